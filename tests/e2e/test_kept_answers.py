#!/usr/bin/env python3
"""Answers kept in a conversation cost their text, not the room reserved while they arrived.

A long answer's buffer reserves room up to max_answer_mb (128 MiB of address space) so that it
is never copied while it grows; e2317c8 gave that room to answers from 128 KiB on when they
come in large pieces (a fast sender, or a replay from the cache, which arrives whole). The
turn took the buffer as it was: each kept answer of ~170 KB then held 128 MiB of address
space (and a huge page), so a run of 16 such answers needed 2 GiB, and under an address-space
limit (ulimit -v; a strict overcommit alike) the run died of "out of memory" halfway.

Here: 16 prompts in one scripted run, each answered by ~170 KB (gen=20000), first from the
server, then all from the cache, under RLIMIT_AS = 1 GiB (the base build needs < 300 MiB):
both runs end with status 0 and the whole output. Skipped under a sanitizer (its shadow
memory takes terabytes of address space). Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
PROMPTS = 16
LIMIT = 1 << 30  # bytes of address space

SANITIZED = ttlib.built_with("asan", "tsan")


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run(args, env, home):
    e = ttlib.clean_env(home, env)
    p = subprocess.Popen([ttlib.tokterm_path()] + args, env=e, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=limited)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out, err


if SANITIZED:
    t.skip("kept answers under an address-space limit", "a sanitizer build's shadow memory")
    t.done()
    sys.exit(0)

with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    # no summary request: every answer stays in the conversation sent
    ttlib.write_config(home, "context_window = 100000000\n")
    env = {"OPENAI_BASE_URL": srv.base("gen=20000")}
    args = []
    for i in range(PROMPTS):
        args += ["-p", "question %d" % i]
    rc, out1, err = run(args, env, home)
    t.ok(rc == 0 and len(out1) > PROMPTS * 150000,
         "%d streamed answers of ~170 KB in one run, under a 1 GiB address-space limit"
         % PROMPTS, "rc %s, %d bytes out: %s" % (rc, len(out1), err[-300:]))
    n = len(srv.requests(all=True))
    rc, out2, err = run(args, env, home)
    t.ok(rc == 0 and out2 == out1,
         "the same %d answers replayed from the cache, under the same limit" % PROMPTS,
         "rc %s, %d of %d bytes out: %s" % (rc, len(out2), len(out1), err[-300:]))
    t.ok(len(srv.requests(all=True)) == n, "the replay sent nothing",
         "%d requests" % (len(srv.requests(all=True)) - n))
t.done()
