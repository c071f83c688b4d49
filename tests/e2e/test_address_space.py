#!/usr/bin/env python3
"""A fast answer under a limit on address space (RLIMIT_AS, `ulimit -v`): kept, shown, saved.

A fast answer's text takes its room ahead of need, in one block of huge pages, so that it is
never copied again as it grows: the session's copy up to max_answer_mb (64 MiB), the store's
buffer 64 MiB (a part and, past it, SQLite's record of it). Only the pages written are
resident, but the address space is taken at once, and where it is limited (`ulimit -v`, a
container's RLIMIT_AS, a strict overcommit that counts it) the block can be refused. Until
2026-12 a refusal aborted the run in the middle of the answer ("out of memory (268435456
bytes)": the session asked for its limit plus one byte, which became 256 MiB), although the
answer itself needed a few MB: saving needed ~200 MiB of address space where --incognito ran in
60, and the chat ~300 MiB. Now such a room is only tried (buf_try_room), and a refused one
leaves the answer to grow as a short one does.

The real binary streams 200,000 deltas ("tokN ", 1.9 MB, one write: bench/tui/run.py's
stream) under SCRIPT_MB in scripted mode, saving and --incognito, and under CHAT_MB in the
chat (in a private tmux): the whole answer is printed, saved (its row's length), shown (its
last delta and "200000 tokens" on screen), and the runs exit 0. Seen at these limits: 1.9 MB
printed and saved at 50 MiB, the chat at 70 MiB; before the change, saving aborted at 150 MiB
and the chat at 300 MiB. The limit is not set in an AddressSanitizer build (its shadow memory
needs terabytes of address space): there the same runs go without it. Prints TAP; the chat's
part skips cleanly without tmux."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

SCRIPT_MB = 120
CHAT_MB = 160
DELTAS = 200000
ANSWER = "".join("tok%d " % i for i in range(DELTAS))

t = ttlib.Tap()
tokterm = ttlib.tokterm_path()


def limited(mb, argv):
    """argv under an address-space limit of mb MiB (the shell's ulimit -v, in KiB); None:
    no limit."""
    if mb is None:
        return argv
    return ["sh", "-c", 'ulimit -v %d && exec "$0" "$@"' % (mb << 10)] + argv


def limit_name(mb):
    return "no limit (ASan)" if mb is None else "address space %d MiB" % mb


def saved_answer(home):
    db = ttlib.history_db(home)
    c = sqlite3.connect(db, timeout=30)
    try:
        row = c.execute("SELECT length(content), status FROM messages WHERE role = 'assistant' "
                        "ORDER BY id DESC LIMIT 1").fetchone()
    finally:
        c.close()
    return row


# An AddressSanitizer build needs terabytes of address space for its shadow memory: there the
# same runs go without the limit (the paths of the room taken ahead of need, under ASan)
asan = ttlib.built_with("asan")
if asan:
    t.diag("AddressSanitizer build: the runs below have no limit on address space")
    SCRIPT_MB = CHAT_MB = None

with ttlib.FakeServer() as srv:
    base = srv.base("gen=%d,chunk=whole" % DELTAS)
    for mode in ("saving", "--incognito"):
        home = ttlib.make_home()
        env = ttlib.clean_env(home, env={"OPENAI_BASE_URL": base})
        argv = [tokterm] + (["--incognito"] if mode != "saving" else []) + ["-p", "x"]
        r = subprocess.run(limited(SCRIPT_MB, argv), env=env, capture_output=True, timeout=120)
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        t.ok(r.returncode == 0 and "out of memory" not in err,
             "scripted, %s, %s: exits 0" % (mode, limit_name(SCRIPT_MB)),
             "exit %r, stderr: %s" % (r.returncode, err[-400:]))
        t.ok(out == ANSWER + "\n", "the whole 1.9 MB answer is printed (%d bytes)"
             % len(out), "ends with %r" % out[-60:])
        if mode == "saving":
            row = saved_answer(home)
            t.eq(row, (len(ANSWER), "complete"), "and saved whole: its row's length, complete")

    if not ttlib.Tmux.available():
        t.skip("the chat under a limit on address space", "tmux is not installed", tool="tmux")
        sys.exit(t.done())
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": base})
    with ttlib.Tmux(80, 24) as tm:
        tm.run(limited(CHAT_MB, [tokterm, "--incognito"]), env)
        started = tm.wait_for("F1", 15)
        t.ok(started, "the chat starts, %s" % limit_name(CHAT_MB), tm.capture())
        if started:
            tm.send_text("x")
            tm.send("Enter")
            shown = tm.wait_for("%d tokens" % DELTAS, 60)
            screen = tm.capture()
            t.ok(shown and "tok%d" % (DELTAS - 1) in screen and "out of memory" not in screen,
                 "the chat shows the whole answer: its last delta and \"%d tokens\"" % DELTAS,
                 screen)
            tm.send_text("/quit")
            tm.send("Enter")
            t.eq(tm.wait_exit(15), 0, "and /quit exits 0")
sys.exit(t.done())
