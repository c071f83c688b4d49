#!/usr/bin/env python3
"""The thread that loads libcurl at start-up (net_library_preload) becomes the network thread
(issue 14). While it loads, the first request hands itself over to it; once it has loaded, it
waits to be taken rather than end, so that no thread has to be started on the way of a request
that comes later (a resume of a long conversation reads it for longer than libcurl takes to
load: ~0.9 ms of `-c -p`'s 10,000 messages on the project's VM went to starting one).

Seen in /proc/PID/task: the prompt comes on stdin 1.5 s after the start, so libcurl is loaded
long before the request. At 1 s the loading thread is there, waiting; while the answer streams
(slowly) no thread is there that was not there at 1 s. Before, the loading thread had ended by
then, and the request started a new one. A run with no request (the prompt is empty) ends its
waiting thread when it frees and joins everything at its exit (TOKTERM_FULL_CLEANUP, as under
a leak checker): it exits at once, and does not hang in the join. A run whose answer has ended
exits without waking and joining the network thread (net_idle): a test hook keeps the thread busy
4 s after the answer, which a run that joins it waits out. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def tasks(pid):
    """The ids of a process's threads (empty once it is gone)."""
    try:
        return set(int(x) for x in os.listdir("/proc/%d/task" % pid))
    except OSError:
        return set()


def start(args, env):
    d = ttlib.tempdir()
    out, err = open(os.path.join(d, "out"), "w+b"), open(os.path.join(d, "err"), "w+b")
    p = subprocess.Popen([ttlib.tokterm_path()] + args, env=env, stdin=subprocess.PIPE,
                         stdout=out, stderr=err)
    return p, out, err


def finish(p, out, err, timeout=20):
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    out.seek(0)
    err.seek(0)
    return p.returncode, out.read(), err.read()


with ttlib.FakeServer() as srv:
    # an answer of 3 deltas, 0.4 s apart: the network thread is there while it streams
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("gen=3,delay_ms=400")})
    p, out, err = start(["--incognito", "-m", "gpt-4o-mini", "-p", "say"], env)
    time.sleep(1.0)
    waiting = tasks(p.pid)
    time.sleep(0.5)
    p.stdin.write(b"it\n")
    p.stdin.close()
    seen = set()
    deadline = time.monotonic() + 10
    while p.poll() is None and time.monotonic() < deadline:
        seen |= tasks(p.pid)
        time.sleep(0.02)
    rc, o, e = finish(p, out, err)
    t.ok(rc == 0 and o.startswith(b"tok0 tok1 tok2"), "a prompt that comes late is answered",
         "rc %r out %r err %r" % (rc, o, e))
    t.ok(len(waiting) == 2, "1 s in, libcurl loaded: its thread waits (threads: %d)"
         % len(waiting))
    t.ok(len(seen) >= 2 and seen <= waiting,
         "the request is on that thread: no thread started for it (%d new)"
         % len(seen - waiting), "at 1 s %r, while streaming %r" % (sorted(waiting), sorted(seen)))

    # no request at all: the waiting thread ends with the run, at once
    env["TOKTERM_FULL_CLEANUP"] = "1"
    t0 = time.monotonic()
    p, out, err = start(["--incognito", "-m", "gpt-4o-mini", "-p", ""], env)
    p.stdin.close()
    rc, o, e = finish(p, out, err)
    took = time.monotonic() - t0
    t.ok(rc == 2 and b"empty" in e and took < 10,
         "a run that sends nothing exits at once (%.2f s), its waiting thread ended" % took,
         "rc %r err %r" % (rc, e))

    # the answer has ended: the exit does not wait for the network thread. Here the thread is
    # kept busy 4 s after it ends a request (a test hook); a run that joins it takes that long.
    # An ASan build frees and joins everything at its exit (its leak checker), as does
    # TOKTERM_FULL_CLEANUP: the hook shows there that the join waits.
    asan = ttlib.built_with("asan")
    for cleanup in ("", "1"):
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("gen=3,chunk=whole"),
                                   "TOKTERM_TEST_NET_LINGER_MS": "4000"})
        if cleanup:
            env["TOKTERM_FULL_CLEANUP"] = cleanup
        t0 = time.monotonic()
        p, out, err = start(["--incognito", "-m", "gpt-4o-mini", "-p", "say it"], env)
        p.stdin.close()
        rc, o, e = finish(p, out, err)
        took = time.monotonic() - t0
        joins = asan or cleanup
        t.ok(rc == 0 and o.startswith(b"tok0 tok1 tok2") and
             (took >= 4 if joins else took < 3),
             "%s: the exit %s the network thread (%.2f s)"
             % ("TOKTERM_FULL_CLEANUP" if cleanup else "ASan build" if asan else "a one-shot",
                "joins" if joins else "does not wait for", took), "rc %r out %r err %r" % (rc, o, e))

sys.exit(t.done())
