#!/usr/bin/env python3
"""What a tester found in the chat's input and commands, in tmux: text of several lines that
starts with "/" is a prompt, not a command, and an unknown command stays in the input line; a
pasted CRLF is one newline; /theme names the folder it reads;
/help wraps to the window; /copy N counts the code blocks the screen shows."""
import os
import re
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
STDERR = os.path.join(ttlib.tempdir("tt-commands-stderr-"), "stderr")


def start(tm, srv, spec="", env=None):
    return tm.run_chat(STDERR, dict({"OPENAI_BASE_URL": srv.base(spec)}, **(env or {})))


def paste(tm, text, raw=False):
    """A bracketed paste of text (raw: its bytes as they are, CR included)."""
    tm.tmux("set-buffer", "-b", "ttpaste", text)
    tm.tmux("paste-buffer", "-p", *(["-r"] if raw else []), "-b", "ttpaste", "-t", tm.target)


def sent_after(srv, n0, timeout=5.0):
    """The last user message of the first request after the n0 first, or None."""
    deadline = time.monotonic() + timeout
    while len(srv.requests()) <= n0 and time.monotonic() < deadline:
        time.sleep(0.05)
    r = srv.requests()
    return r[n0]["body"]["messages"][-1]["content"] if len(r) > n0 else None


def input_rows(scr):
    """The rows of the input line: from the prompt mark to the end of the screen."""
    rows = scr.rstrip("\n").split("\n")
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].startswith("\u203a"):
            return "\n".join(r.rstrip() for r in rows[i:])
    return ""


if not ttlib.Tmux.available():
    t.skip("chat commands in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    # --- several lines that start with "/" are a prompt; an unknown command stays ----------
    with ttlib.Tmux(100, 30) as tm:
        t.ok(start(tm, srv, "reply=fine") is not None, "the chat opens", tm.capture())
        trace = ("/usr/lib/python3.11/json/decoder.py:355: JSONDecodeError: Expecting value\n"
                 "Traceback follows\n  line 2")
        n0 = len(srv.requests())
        paste(tm, trace)
        tm.wait_for("line 2", 3)
        tm.send("Enter")
        t.eq(sent_after(srv, n0), trace, "a paste of three lines that starts with a path is "
             "sent as a prompt, as pasted")
        scr = tm.wait_for("\u2713", 10) or tm.capture()
        t.ok("unknown command" not in scr, "no 'unknown command' for it", scr)

        n0 = len(srv.requests())
        tm.send_text("// a comment")
        tm.send("C-j")
        tm.send_text("int x = 1")
        tm.send("Enter")
        t.eq(sent_after(srv, n0), "// a comment\nint x = 1",
             "two typed lines that start with // are sent as typed (no slash taken off)")
        tm.wait_for(re.compile(r"\u2713[\s\S]*\u2713"), 10)

        n0 = len(srv.requests())
        tm.send_text("/modle gpt-4o")
        tm.send("Enter")
        scr = tm.wait_for("unknown command /modle", 3) or tm.capture()
        t.ok("unknown command /modle" in scr, "a typo'd command is refused", scr)
        time.sleep(0.3)
        scr = tm.capture()
        t.eq(input_rows(scr), "\u203a /modle gpt-4o",
             "the refused line stays in the input line, to be mended")
        tm.send("C-a")
        tm.send("M-d")  # "/modle": readline's word is the letters, the slash goes with them
        tm.send_text("/model")
        tm.send("Enter")
        scr = tm.wait_for("Model gpt-4o for the next requests", 3) or tm.capture()
        t.ok("Model gpt-4o for the next requests" in scr and input_rows(scr) == "\u203a",
             "mended, it runs and the input line is empty", scr)
        t.eq(len(srv.requests()), n0, "nothing was sent")
        # a command pasted with its newline is still a command (a review: the rule above made
        # "/model gpt-4o-mini\n", copied from a page, a prompt)
        tm.wait_for(re.compile(r"\u203a *$"), 3)
        paste(tm, "/model gpt-4o-mini\n")
        time.sleep(0.3)
        tm.send("Enter")
        scr = tm.wait_for("Model gpt-4o-mini for the next requests", 3) or tm.capture()
        t.ok("Model gpt-4o-mini for the next requests" in scr and len(srv.requests()) == n0,
             "a command pasted with its newline runs, nothing sent", scr)

        # --- a pasted CRLF is one newline, a lone CR too -------------------------------------
        tm.wait_for(re.compile(r"\u203a *$"), 3)
        n0 = len(srv.requests())
        paste(tm, "crlf1\r\ncrlf2\r\nlf3\ncr4\rend", raw=True)
        tm.wait_for("end", 3)
        tm.send("Enter")
        t.eq(sent_after(srv, n0), "crlf1\ncrlf2\nlf3\ncr4\nend",
             "a raw paste: CRLF, LF and a lone CR are one newline each")
        tm.wait_for(re.compile(r"end\n(.*\n)*.*\u2713"), 10)
        n0 = len(srv.requests())
        tm.send_text("typed")
        tm.send("C-j")
        tm.send("C-j")
        tm.send_text("two")
        tm.send("Enter")
        t.eq(sent_after(srv, n0), "typed\n\ntwo", "typed newlines are as typed")
        tm.wait_for(re.compile(r"two\n(.*\n)*.*\u2713"), 10)

        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "Ctrl-D quits")

    # --- /theme names the folder user themes are read from: $XDG_CONFIG_HOME's --------------
    xdg = ttlib.tempdir("tt-commands-xdg-")
    os.makedirs(os.path.join(xdg, "tokterm", "themes"))
    with open(os.path.join(xdg, "tokterm", "themes", "mine.theme"), "w") as f:
        f.write("[theme]\nname = mine\n")
    with ttlib.Tmux(160, 30) as tm:
        start(tm, srv, "reply=fine", {"XDG_CONFIG_HOME": xdg})
        tm.send_text("/theme")
        tm.send("Enter")
        scr = tm.wait_for("User themes go in", 3) or tm.capture()
        flat = " ".join(scr.split())
        t.ok("`mine`" in flat or " mine " in flat, "/theme lists the theme of $XDG_CONFIG_HOME",
             scr)
        t.ok("User themes go in %s/tokterm/themes/NAME.theme" % xdg in flat and
             "~/.config" not in flat, "/theme names $XDG_CONFIG_HOME/tokterm/themes", scr)
        tm.send("C-d")
        tm.wait_exit(5)

    # --- /help wraps to the window, not early ----------------------------------------------
    with ttlib.Tmux(120, 60) as tm:
        start(tm, srv, "reply=fine")
        tm.send_text("/help")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"//text sends /text.*\n"), 3) or tm.capture()
        rows = [r.rstrip() for r in scr.split("\n")]
        role = [r for r in rows if "/role [NAME]" in r]
        t.ok(role and "/role none drops it" in role[0],
             "at 120 columns, '/role none drops it' is on the row of '/role [NAME]'", scr)
        xrow = [r for r in rows if "/x REQUEST" in r]
        t.ok(xrow and "q or Esc cancel" in xrow[0],
             "at 120 columns, the /x entry is one row", scr)
        early = []
        for i in range(len(rows) - 1):  # a row continued below: the next word did not fit
            nxt = rows[i + 1]
            if rows[i].startswith("  \u2022") or rows[i].startswith("    "):
                if nxt.startswith("    ") and nxt.strip() and \
                        ttlib.display_width(rows[i]) + 1 + len(nxt.split()[0]) <= 120:
                    early.append(rows[i])
        t.eq(early, [], "no help row is broken before the window's edge")
        tm.send("C-d")
        tm.wait_exit(5)

    # --- /copy N numbers the code blocks the screen shows ----------------------------------
    # A fence indented 4 spaces in a list item is a code block on screen (its label "sh", the
    # code in the code style); the 4-space-indented lines without a fence are shown as text.
    answer = ("Here:\n\n```bash\nls -l\n```\n\n~~~\nplain\n~~~\n\nIndented:\n\n"
              "    int x = 1;\n    return x;\n\n1. step\n\n    ```sh\n    make \\\n"
              "      all\n    ```\n\nend\n")
    state = ttlib.tempdir("tt-commands-state-")
    with ttlib.Tmux(100, 40) as tm:
        start(tm, srv, "reply=" + urllib.parse.quote(answer, safe=""),
              {"XDG_STATE_HOME": state})
        tm.send_text("code please")
        tm.send("Enter")
        tm.wait_for("\u2713", 10)
        scr = tm.capture()
        t.ok(re.search(r"^ +sh *\n +make \\ *\n +all *$", scr, re.M) is not None,
             "the indented fence is shown as a code block", scr)
        esc = tm.capture(escapes=True).split("\n")
        code = [r for r in esc if "-l" in r]
        text = [r for r in esc if "int x = 1;" in r]
        t.ok(code and "\x1b[48;" in code[0] and text and "\x1b[48;" not in text[0],
             "the unfenced indented lines are text (no code background)", "\n".join(esc))
        tm.send_text("/copy 3")
        tm.send("Enter")
        scr = tm.wait_for("code block 3", 3) or tm.capture()
        path = os.path.join(state, "tokterm", "copy.txt")
        got = open(path).read() if os.path.exists(path) else None
        t.eq(got, "make \\\n  all\n", "/copy 3 copies the fenced block of the list item, "
             "the fence's indentation taken off")
        tm.send_text("/copy 4")
        tm.send("Enter")
        scr = tm.wait_for("/copy 4:", 3) or tm.capture()
        t.ok("the last answer has 3 code blocks" in scr,
             "/copy 4: the answer has 3 code blocks (the unfenced indented lines are text)",
             scr)
        tm.send("C-u")
        tm.send("C-d")
        tm.wait_exit(5)

    # --- a resumed answer looks as it did live: its time, and its footer (until 2026-12 a
    # resume showed neither) ------------------------------------------------------------
    rhome = ttlib.make_home()

    def answer_rows(scr):
        rows = scr.split("\n")
        i = next((k for k, r in enumerate(rows) if r.startswith("\u25c6")), None)
        j = next((k for k, r in enumerate(rows) if "\u2713" in r), None)
        return [r.rstrip() for r in rows[i:j + 1]] if i is not None and j is not None else []
    with ttlib.Tmux(100, 30) as tm:
        e = {"OPENAI_BASE_URL": srv.base("gen=12")}
        tm.run_chat(STDERR, e, home=rhome)
        tm.send_text("hello there")
        tm.send("Enter")
        live = answer_rows(tm.wait_for("\u2713", 10) or tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)
    with ttlib.Tmux(100, 30) as tm:
        tm.run_chat(STDERR, e, ["-c"], rhome, wait=False)
        resumed = answer_rows(tm.wait_for("Continuing conversation", 10) or tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)
    # --- money spent stays in the bar under a model with no price (until 2026-12 the dollars
    # went from it at /model of an unpriced model, while /context still had them) ----------
    with ttlib.Tmux(120, 30) as tm:
        tm.run_chat(STDERR, {"OPENAI_BASE_URL": srv.base("gen=2000")}, ["-m", "gpt-4o"])
        tm.send_text("spend some")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"session \S+ tok \$"), 10) or tm.capture()
        before = re.search(r"session \S+ tok (\$[0-9.]+)", scr)
        tm.send_text("/model no-such-priced-model")
        tm.send("Enter")
        scr = tm.wait_for("no-such-priced-model", 5) and tm.capture()
        after = re.search(r"session \S+ tok (\u2265\$[0-9.]+)", scr or "")
        t.ok(before and after and after.group(1) == "\u2265" + before.group(1),
             "an unpriced model: the bar keeps the dollars spent, as at least that", scr)
        tm.send("C-d")
        tm.wait_exit(5)
    # --- /model while an answer streams: the bar keeps the streaming answer's model until it
    # ends (until 2026-12 it showed the new one, and its window, at once) --------------------
    with ttlib.Tmux(120, 30) as tm:
        tm.run_chat(STDERR, {"OPENAI_BASE_URL": srv.base("gen=150,delay_ms=20")},
                    ["-m", "gpt-4o-mini"])
        tm.send_text("stream a while")
        tm.send("Enter")
        tm.wait_for("tok5 ", 10)
        tm.send_text("/model gpt-4o")
        tm.send("Enter")
        scr = tm.wait_for("for the next requests", 5) or tm.capture()
        bar = [r for r in scr.split("\n") if "\u2502" in r]
        t.ok(bar and "gpt-4o-mini" in bar[-1] and "streaming is gpt-4o-mini's" in scr,
             "/model while streaming: the bar keeps the answer's model", scr)
        scr = tm.wait_for("\u2713", 15) and tm.wait_for(re.compile(r"^ idle", re.M), 5) or \
            tm.capture()
        bar = [r for r in scr.split("\n") if r.startswith(" idle")]
        t.ok(bar and "gpt-4o " in bar[-1] + " " and "gpt-4o-mini" not in bar[-1],
             "... and the new model once the answer ended", scr)
        tm.send("C-d")
        tm.wait_exit(5)
    # --- a turn refused before it was sent shows no timings in the bar (until 2026-12 "ttft -
    # total 127ms" of the refusal) ---------------------------------------------------------
    nhome = ttlib.make_home()
    os.makedirs(os.path.join(nhome, ".config", "tokterm"), exist_ok=True)
    with open(os.path.join(nhome, ".config", "tokterm", "config"), "w") as f:
        f.write("context_window = 300\nreserve_tokens = 50\n")
    with ttlib.Tmux(120, 30) as tm:
        tm.run_chat(STDERR, {"OPENAI_BASE_URL": srv.base("reply=ok")}, home=nhome)
        n0 = len(srv.requests())
        tm.send_text("word " * 400)
        tm.send("Enter")
        tm.wait_for("the prompt is back", 10)
        tm.send("C-u")  # the prompt given back fills the rows above the bar
        scr = tm.wait_for(re.compile(r"^ error", re.M), 10) or tm.capture()
        bar = [r for r in scr.split("\n") if r.startswith(" error")]
        t.ok(bar and "total" not in bar[-1] and "ttft" not in bar[-1] and
             len(srv.requests()) == n0,
             "a prompt over the window, not sent: no timings in the bar", scr)
        tm.send("C-d")
        tm.wait_exit(5)
    t.ok(len(live) == 3 and re.search(r"\d\d:\d\d$", live[0]) and "first token" in live[2],
         "live: the answer's header has its time, its footer the timings", "\n".join(live))
    t.eq(resumed, live, "resumed: the answer shows as it did live")

t.ok(not os.path.exists(STDERR) or not open(STDERR, errors="replace").read().strip(),
     "nothing on stderr",
     open(STDERR, errors="replace").read() if os.path.exists(STDERR) else "")
sys.exit(t.done())
