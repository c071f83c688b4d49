#!/usr/bin/env python3
"""The thread that loads libcurl at start-up (net_library_preload) becomes the network thread
(issue 14). While it loads, the first request hands itself over to it; once it has loaded, it
waits to be taken rather than end, so that no thread has to be started on the way of a request
that comes later (a resume of a long conversation reads it for longer than libcurl takes to
load: ~0.9 ms of `-c -p`'s 10,000 messages on the project's VM went to starting one).

Seen with strace: the threads a run creates (clone with CLONE_THREAD). The prompt comes on
stdin 1.5 s after the start, so libcurl is loaded long before the request: one thread in all,
and the answer arrives. A run with no request (the prompt is empty) ends its waiting thread
when it frees and joins everything at its exit (TOKTERM_FULL_CLEANUP, as under a leak
checker): it exits at once, and does not hang in the join. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def traced(args, env, feed, delay):
    """Run tokterm under strace -f, its stdin a pipe that gets `feed` after `delay` seconds;
    returns (exit code, stdout, stderr, the threads it created, seconds it took)."""
    d = ttlib.tempdir()
    log, outp, errp = (os.path.join(d, n) for n in ("strace.log", "out", "err"))
    with open(outp, "wb") as out, open(errp, "wb") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=clone,clone3", "-o", log,
                              ttlib.tokterm_path()] + args, env=env, stdin=subprocess.PIPE,
                             stdout=out, stderr=err)
        time.sleep(delay)
        try:
            p.stdin.write(feed)
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        took = time.monotonic() - t0
    with open(log) as f:
        threads = [line for line in f if "CLONE_THREAD" in line and "= -" not in line]
    with open(outp, "rb") as f1, open(errp, "rb") as f2:
        return p.returncode, f1.read(), f2.read(), threads, took


if not shutil.which("strace"):
    t.skip("threads of a run", "strace is not installed", tool="strace")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("reply=Adopted.")})
    rc, out, err, threads, took = traced(["--incognito", "-m", "gpt-4o-mini", "-p", "say"],
                                         env, b"it\n", 1.5)
    t.ok(rc == 0 and out.strip() == b"Adopted." and took >= 1.5,
         "a prompt that comes late (%.2f s) is answered" % took,
         "rc %r out %r err %r" % (rc, out, err))
    t.eq(len(threads), 1, "one thread for libcurl's load and the request, not one each")

    # no request at all: the waiting thread ends with the run, at once (the exit that frees
    # and joins everything, as a leak checker's run has it; a one-shot's ordinary exit only
    # flushes and goes)
    env["TOKTERM_FULL_CLEANUP"] = "1"
    rc, out, err, threads, took = traced(["--incognito", "-m", "gpt-4o-mini", "-p", ""],
                                         env, b"", 0.0)
    t.ok(rc == 2 and b"empty" in err and len(threads) == 1 and took < 10,
         "a run that sends nothing exits at once (%.2f s), its waiting thread ended" % took,
         "rc %r err %r threads %r" % (rc, err, threads))

sys.exit(t.done())
