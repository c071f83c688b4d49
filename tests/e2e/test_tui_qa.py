#!/usr/bin/env python3
"""What a demanding new user found in the chat (2026-12 QA pass), in tmux: the status bar's
"ctx" after an answer longer than the model's window; Ctrl-C on a draft keeps it for Ctrl-Y;
the browser's footer of a cancelled answer; tabs in the input line; a blank prompt; entity
references in an answer; the conversation browser in a narrow window; a command typed after a
prompt that came back to the input line; a long model name in the status bar."""
import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
STDERR = os.path.join(ttlib.tempdir("tt-qa-stderr-"), "stderr")


def start(tm, srv, spec="", env=None, args=()):
    return tm.run_chat(STDERR, dict({"OPENAI_BASE_URL": srv.base(spec)}, **(env or {})), args)


def say(tm, text):
    tm.send_text(text)
    tm.send("Enter")


def paste(tm, text):
    """A bracketed paste of text."""
    tm.tmux("set-buffer", "-b", "ttpaste", text)
    tm.tmux("paste-buffer", "-p", "-b", "ttpaste", "-t", tm.target)


quit_chat = ttlib.quit_chat  # noqa: E305
settle = ttlib.settle


def bar(scr):
    return ([ln for ln in scr.splitlines() if "\u2502" in ln and "ctx" in ln] or [""])[-1]


def bar_or_hint(scr):
    """The line above the prompt: the status bar, or the hint that stands in its place."""
    rows = [ln for ln in scr.splitlines() if ln.strip()]
    return rows[-2] if len(rows) >= 2 else ""


def ctx_used(scr):
    """The tokens of the status bar's "ctx N/W" (k = thousands), or None."""
    m = re.search(r"ctx ~?([0-9.]+)(k?)/", bar(scr))
    if not m:
        return None
    return float(m.group(1)) * (1000 if m.group(2) else 1)


if not ttlib.Tmux.available():
    t.skip("chat QA in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    # --- an answer longer than the whole window: the next request shortens it, and the status
    # bar's ctx says what that request carries (until 2026-12 it said 0: the plan made with
    # the answer as the newest message failed, "too long", and its count was taken) ----------
    with ttlib.Tmux(110, 30) as tm:
        t.ok(start(tm, srv, args=["-m", "qa-unknown-model"]) is not None,
             "ctx: the chat opens with a model of a small (assumed) window", tm.capture())
        srv.queue(["big_delta=100000"])
        say(tm, "write a lot")
        t.ok(tm.wait_for("\u2713", 10) is not None, "ctx: the long answer ends", tm.capture())
        scr = settle(tm)
        used = ctx_used(scr)
        say(tm, "/context")
        ctx = tm.wait_for(re.compile(r"The next turn costs ~?[0-9,]+ prompt tokens"), 5) or ""
        m = re.search(r"The next turn costs ~?([0-9,]+) prompt tokens", ctx)
        nxt = int(m.group(1).replace(",", "")) if m else None
        t.ok(used is not None and nxt is not None and used > 100 and abs(used - nxt) <= 20,
             "ctx: the status bar counts the shortened history /context reports (%s vs %s)"
             % (used, nxt), scr + "\n----\n" + ctx)
        quit_chat(tm)

    # --- Ctrl-C on a draft: the line is cleared, its text kept for Ctrl-Y (until 2026-12 it
    # was gone: not in the history, not in the kill ring; a Ctrl-C meant for an answer that had
    # just ended wiped what was typed while it streamed) ----------------------------------------
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv, "reply=fine") is not None, "ctrl-c: the chat opens", tm.capture())
        tm.send_text("a long draft I typed with care")
        tm.wait_for("with care", 3)
        tm.send("C-c")
        scr = settle(tm)
        t.ok("with care" not in scr and "Ctrl-Y" in bar_or_hint(scr),
             "ctrl-c: the line is cleared, the hint says Ctrl-Y brings it back", scr)
        tm.send("C-y")
        scr = tm.wait_for("\u203a a long draft I typed with care", 3)
        t.ok(scr is not None, "ctrl-c: Ctrl-Y brings the draft back", scr or tm.capture())
        tm.send("Enter")
        t.ok(tm.wait_for("\u2713", 10) is not None, "ctrl-c: the draft is sent", tm.capture())
        tm.send("C-c")
        scr = settle(tm)
        t.ok("again within 2 s" in scr, "ctrl-c: on the empty prompt it still says how to quit",
             scr)
        quit_chat(tm)

    # --- the browser's read view of a cancelled answer: "cancelled" once (until 2026-12 it
    # read "cancelled: cancelled", the status and then the saved error, the same word) ---------
    with ttlib.Tmux(100, 24) as tm:
        t.ok(start(tm, srv) is not None, "read view: the chat opens", tm.capture())
        srv.queue(["gen=200,delay_ms=40"])
        say(tm, "count slowly")
        tm.wait_for("tok3 ", 10)
        tm.send("Escape")
        t.ok(tm.wait_for("cancelled (the partial answer", 5) is not None,
             "read view: the answer is cancelled", tm.capture())
        tm.send("F2")
        tm.wait_for("Conversations", 5)
        tm.send("Enter")
        scr = tm.wait_for("READ-ONLY", 5) or tm.capture()
        scr = settle(tm)
        t.ok("\u2717 cancelled" in scr and "cancelled: cancelled" not in scr,
             "read view: the footer says cancelled once", scr)
        tm.send("q")
        settle(tm)
        quit_chat(tm)

    # --- a paste with tabs: the input line shows the indentation the transcript will show
    # (until 2026-12 a tab was one column there, and pasted Go or Makefile lines looked flat) --
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv) is not None, "tabs: the chat opens", tm.capture())
        paste(tm, "func f() {\n\treturn 1\n}\nab\tc")
        scr = tm.wait_for(re.compile(r"ab +c"), 3) or tm.capture()
        rows = scr.splitlines()
        t.ok(any(r == "      return 1" for r in rows) and any(r == "  ab  c" for r in rows),
             "tabs: the input line expands them to stops of 4", scr)
        tm.send("Enter")
        scr = tm.wait_for("\u2713", 10) or tm.capture()
        t.ok(any(r == "\u258c     return 1" for r in scr.splitlines()),
             "tabs: the sent prompt shows the same indentation", scr)
        quit_chat(tm)

    # --- a blank prompt (spaces, or new lines only) is not sent (until 2026-12 it was: a
    # request and its tokens for nothing, and a 400 from Anthropic, which refuses text blocks of
    # whitespace) --------------------------------------------------------------------------------
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv) is not None, "blank: the chat opens", tm.capture())
        n0 = len(srv.requests())
        tm.send_text("   ")
        tm.send("Enter")
        tm.send("M-Enter", "M-Enter", "Enter")
        paste(tm, " \n\t\n")
        tm.send("Enter")
        time.sleep(1)
        scr = settle(tm)
        t.ok(len(srv.requests()) == n0 and "\u25c6" not in scr,
             "blank: nothing is sent, no answer opens", scr)
        t.ok("blank" in bar_or_hint(scr), "blank: the hint says why nothing was sent", scr)
        say(tm, "  real question  ")
        scr = tm.wait_for("\u2713", 10) or tm.capture()
        t.ok(len(srv.requests()) == n0 + 1, "blank: a prompt with text still goes", scr)
        quit_chat(tm)

    # --- entity references in an answer are drawn as their characters (until 2026-12
    # "AT&amp;T" stayed as it came) ---------------------------------------------------------------
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv) is not None, "entities: the chat opens", tm.capture())
        srv.queue(["reply=AT%26amp%3BT said %26lt%3Bok%26gt%3B and `%26amp%3B` in code"])
        say(tm, "entities")
        scr = tm.wait_for("\u2713", 10) or tm.capture()
        t.ok("AT&T said <ok> and &amp; in code" in scr, "entities: decoded, not in code", scr)
        quit_chat(tm)

    # --- the conversation browser in a narrow window: the columns go before the title does
    # (until 2026-12 the title shrank to nothing below 34 columns, "updated" was cut) ---------
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv, "reply=ok") is not None, "narrow browser: the chat opens",
             tm.capture())
        say(tm, "gateway to the stars")
        tm.wait_for("\u2713", 10)
        for w in (30, 24):
            tm.resize(w, 10)
            time.sleep(0.3)
            tm.send("F2")
            scr = tm.wait_for("Conversations", 5) or tm.capture()
            scr = settle(tm)
            row = ([ln for ln in scr.splitlines() if "\u25cf" in ln] or [""])[0]
            t.ok("gateway to" in row and not re.search(r"just n?\s*$|ago\S", row) and
                 (w < 28 or row.rstrip().endswith("just now")),
                 "narrow browser at %d columns: the title shows, no column is cut" % w, scr)
            tm.send("q")
            settle(tm)
        tm.resize(100, 20)
        quit_chat(tm)

    # --- a refused prompt comes back to the input line, and the refusal says "/budget N": the
    # command typed then runs, the prompt stays (until 2026-12 the two were one line, sent as a
    # message: "my question/budget 50k") ---------------------------------------------------------
    with ttlib.Tmux(100, 24) as tm:
        t.ok(start(tm, srv, "reply=fine") is not None, "put back: the chat opens", tm.capture())
        say(tm, "first one")
        tm.wait_for("\u2713", 10)
        say(tm, "/budget 10")
        tm.wait_for("budget 10 tokens", 5)
        n0 = len(srv.requests())
        say(tm, "my question")
        scr = tm.wait_for("\u203a my question", 5) or tm.capture()
        t.ok("not sent" in scr, "put back: refused, the prompt is back in the input line", scr)
        say(tm, "/budget off")
        scr = tm.wait_for("no budget set", 5) or tm.capture()
        scr = settle(tm)
        t.ok("no budget set" in scr and "my question/budget" not in scr and
             len(srv.requests()) == n0, "put back: /budget off runs, nothing is sent", scr)
        t.ok(re.search(r"^\u203a my question\s*$", scr, re.M) is not None,
             "put back: the prompt is still in the input line", scr)
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"my question\n(.*\n)*.*\u2713"), 10) or tm.capture()
        t.ok(len(srv.requests()) == n0 + 1, "put back: Enter sends it", scr)
        tm.send_text("what is 1")
        tm.send("Enter")
        tm.wait_for("\u2713", 10)
        quit_chat(tm)

    # --- a long model name in a window of 60 columns: cut, not gone (until 2026-12 the bar
    # said "idle" and nothing else) ----------------------------------------------------------------
    long_model = "accounts/fireworks/models/llama-v3p1-405b-instruct-long-context"
    with ttlib.Tmux(100, 20) as tm:
        t.ok(start(tm, srv, args=["-m", long_model]) is not None, "long model: the chat opens",
             tm.capture())
        tm.resize(60, 20)
        time.sleep(0.3)
        scr = settle(tm)
        rows = [ln for ln in scr.splitlines() if ln.startswith(" idle")]
        t.ok(rows and "accounts/fireworks" in rows[-1] and "\u2026" in rows[-1] and
             len(rows[-1].rstrip()) <= 60, "long model: the bar shows its name, cut", scr)
        tm.resize(100, 20)
        quit_chat(tm)

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-3000:])
sys.exit(t.done())
