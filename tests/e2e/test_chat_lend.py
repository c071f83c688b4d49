#!/usr/bin/env python3
"""One copy of a fast answer in the chat, not two (issue 14: the chat as light as scripted mode).

The session keeps the answer's text (the conversation's next request sends it); the chat's view
kept a second copy of a long printable line to wrap and draw it, in fresh pages: a 2 MiB huge
page for this line, ~0.1 ms of the UI thread's CPU on the project's VM when the memory had just
been freed, ~3.3 ms when the host had taken it back. Now such a line reads its bytes in the
session's copy (buf_lend: the block is freed by whichever of its owner and the view lets go
last). The real binary in a private tmux streams 200,000 deltas ("tokN ", one 1.9 MB line,
gen=200000,chunk=whole) with --trace; checked:
- the E record's lent bytes: most of the line was read in the session's copy, not copied;
- the end of the answer on screen, then its start after Home (rows read in the lent block);
- a second answer the same way, after which the first one's rows (its block now the
  conversation's turn's) still show its start; /new (the conversation and the transcript both
  let go of the blocks, in whichever order), another answer, Ctrl-D: exit 0;
- the same in the default mode (the answer saved as it streams) and with that conversation
  resumed (-c);
- a fast Markdown answer of short lines (40,000 deltas): the text the chat sets aside to style
  after its last screenful is read in the session's copy too (the E record's lent bytes), its
  start shows after Home, twice; /new, Ctrl-D: exit 0.
In the AddressSanitizer build a block freed while the view reads it fails the run. Prints TAP;
skips cleanly without tmux."""

import json
import re
import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

LINE = 1888890  # bytes of gen=200000's answer: "tok0 tok1 ... tok199999 "
t = ttlib.Tap()
if not ttlib.Tmux.available():
    t.skip("one copy of a fast answer in the chat", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

tokterm = ttlib.tokterm_path()
IDLE = re.compile(r"^ idle ", re.M)


def ends(trace):
    """The E records' lent bytes, in order."""
    if not os.path.exists(trace):
        return []
    return [int(w[2]) for w in (ln.split() for ln in open(trace)) if w and w[0] == "E" and
            len(w) > 2]


def answer(tm, trace, k, what):
    """Send a prompt, wait for the k-th E record and the idle status bar; the lent bytes."""
    tm.send_text("x")
    tm.send("Enter")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(ends(trace)) < k:
        time.sleep(0.05)
    got = ends(trace)
    scr = tm.wait_for(IDLE, 30)
    t.ok(len(got) >= k and scr is not None and "tok199999" in scr,
         "%s: 200,000 deltas streamed, the end of the answer on screen" % what, tm.capture())
    return got[k - 1] if len(got) >= k else None


def top_shows_start(tm, what):
    tm.send("Home")
    scr = tm.wait_for(re.compile(r"tok0 tok1 tok2 tok3 tok4 "), 20)
    t.ok(scr is not None, "%s: Home shows the first answer's start (rows read in its block)"
         % what, tm.capture())
    tm.send("End")
    tm.wait_for(IDLE, 20)


def chat(env, args, what):
    tdir = ttlib.tempdir("tt-chat-lend-")
    trace = os.path.join(tdir, "trace")
    with ttlib.Tmux(80, 24) as tm:
        tm.run([tokterm] + args + ["--trace", trace], env)
        t.ok(tm.wait_for("F1", 15) is not None, "%s: the chat starts" % what, tm.capture())
        lent1 = answer(tm, trace, 1, what + ", first answer")
        t.ok(lent1 is not None and lent1 >= LINE * 9 // 10,
             "%s: the view read %s of the %d-byte line in the session's copy (at least 90%%)"
             % (what, lent1, LINE), tm.capture())
        top_shows_start(tm, what + ", streamed")
        lent2 = answer(tm, trace, 2, what + ", second answer")
        t.ok(lent1 is not None and lent2 is not None and lent2 - lent1 >= LINE * 9 // 10,
             "%s: the second answer's line read in place too (%s bytes)"
             % (what, None if lent2 is None or lent1 is None else lent2 - lent1))
        top_shows_start(tm, what + ", after a second answer")
        tm.send_text("/new")
        tm.send("Enter")
        time.sleep(0.5)
        answer(tm, trace, 3, what + ", after /new")
        tm.send("C-d")
        t.eq(tm.wait_exit(30), 0, "%s: Ctrl-D quits with 0" % what)


def md_fixture(dirname):
    """DIR/md.sse: a fast Markdown answer of short lines (no long line to lend), 40,000 deltas
    in paragraphs and headings; returns the answer's text."""
    pieces, k = [], 0
    while len(pieces) < 40000:
        pieces.append("## Part %d\n\n" % (k // 10))
        pieces.extend(" **w%d** word%d" % (k, i) if i % 9 == 0 else " word%d" % i
                      for i in range(60))
        pieces.append(".\n\n")
        k += 1
    pieces[1] = " alpha0"
    pieces.append("\n\nomega9 end")

    def ev(delta, finish=None):
        return "data: %s\n\n" % json.dumps({"id": "c", "object": "chat.completion.chunk",
                                              "created": 1, "model": "m", "choices": [{
                                                  "index": 0, "delta": delta,
                                                  "finish_reason": finish}]})
    with open(os.path.join(dirname, "md.sse"), "w", encoding="utf-8") as f:
        f.write(ev({"role": "assistant", "content": ""}))
        f.write("".join(ev({"content": p}) for p in pieces))
        f.write(ev({}, "stop") + "data: [DONE]\n\n")
    return "".join(pieces)


def md_chat():
    """A fast Markdown answer: the text the chat styles later (all but its last screenful) is
    read in the session's copy, not copied; its start after Home; /new, Ctrl-D."""
    fx = ttlib.tempdir("tt-chat-lend-md-")
    text = md_fixture(fx)
    tdir = ttlib.tempdir("tt-chat-lend-")
    trace = os.path.join(tdir, "trace")
    with ttlib.FakeServer(extra_args=["--fixtures", fx]) as srv, ttlib.Tmux(80, 24) as tm:
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("replay=md.sse,chunk=whole")})
        tm.run([tokterm, "--incognito", "--trace", trace], env)
        t.ok(tm.wait_for("F1", 15) is not None, "Markdown: the chat starts", tm.capture())
        for k in (1, 2):
            tm.send_text("x")
            tm.send("Enter")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(ends(trace)) < k:
                time.sleep(0.05)
            scr = tm.wait_for(IDLE, 30)
            got = ends(trace)
            lent = got[k - 1] - (got[k - 2] if k > 1 else 0) if len(got) >= k else None
            t.ok(scr is not None and "omega9 end" in scr,
                 "Markdown, answer %d: its end on screen" % k, tm.capture())
            t.ok(lent is not None and lent >= len(text.encode()) // 2,
                 "Markdown, answer %d: %s of its %d bytes, set aside to style later, read in "
                 "the session's copy (at least half)" % (k, lent, len(text.encode())))
            tm.send("Home")
            t.ok(tm.wait_for("alpha0", 20) is not None,
                 "Markdown, answer %d: Home shows the first answer's start" % k, tm.capture())
            tm.send("End")
            tm.wait_for(IDLE, 20)
        tm.send_text("/new")
        tm.send("Enter")
        time.sleep(0.5)
        tm.send("C-d")
        t.eq(tm.wait_exit(30), 0, "Markdown: Ctrl-D quits with 0")


md_chat()
with ttlib.FakeServer() as srv:
    spec = "gen=200000,chunk=whole"
    chat(ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base(spec)}), ["--incognito"],
         "--incognito")
    home = ttlib.tempdir("tt-chat-lend-home-")
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base(spec), "HOME": home})
    chat(env, ["--no-cache"], "saving")
    chat(env, ["--no-cache", "-c"], "saving, resumed")
sys.exit(t.done())
