#!/usr/bin/env python3
"""What a new user stumbled on in the chat (issue 16), in tmux: F1 is an overlay that leaves the
transcript alone, an error is said once, /theme with an unknown name keeps the theme, the
"still streaming" hint goes when the stream ends, Ctrl-C on an empty prompt says how to quit
(and a second one within 2 s quits); on TERM=dumb or an unknown TERM, the line chat."""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
STDERR = os.path.join(ttlib.tempdir("tt-fixes-stderr-"), "stderr")


def start(tm, srv, spec="", env=None):
    return tm.run_chat(STDERR, dict({"OPENAI_BASE_URL": srv.base(spec)}, **(env or {})))


def say(tm, text):
    tm.send_text(text)
    tm.send("Enter")


quit_chat = ttlib.quit_chat  # noqa: E305
settle = ttlib.settle


if not ttlib.Tmux.available():
    t.skip("chat fixes in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    # --- F1 three times: an overlay each time, the transcript unchanged ----------------------
    with ttlib.Tmux(100, 30) as tm:
        t.ok(start(tm, srv, "reply=fine") is not None, "the chat opens", tm.capture())
        say(tm, "first question")
        before = tm.wait_for("\u2713", 10)
        t.ok(before is not None, "an answer", tm.capture())
        for i in range(3):
            tm.send("F1")
            scr = tm.wait_for("/model [NAME]", 3)
            t.ok(scr is not None and "first question" not in scr,
                 "F1 #%d: the help covers the transcript" % (i + 1), scr or tm.capture())
            tm.send("Escape" if i != 1 else "F1")
            scr = settle(tm)
            t.ok("/model [NAME]" not in scr and "first question" in scr,
                 "F1 #%d: %s closes it, the transcript is back" % (i + 1,
                                                                   "F1" if i == 1 else "Esc"),
                 scr)
        tm.send("Home")  # the top of the transcript (the prompt is empty)
        scr = settle(tm)
        t.ok("first question" in scr and "/model" not in scr and "Commands" not in scr,
             "no copy of the help in the transcript, from its top", scr)
        tm.send("End")
        tm.send("F1")
        tm.wait_for("/model [NAME]", 3)
        tm.send_text("x")
        scr = settle(tm)
        t.ok("/model [NAME]" not in scr and re.search(r"\u203a x", scr) is not None,
             "another key closes the help and goes to the prompt", scr)
        tm.send("C-u")

        # --- /theme with an unknown name keeps the theme ------------------------------------
        say(tm, "/theme light")
        t.ok(tm.wait_for("Theme light", 3) is not None, "/theme light", tm.capture())
        say(tm, "/theme neon")
        scr = tm.wait_for(re.compile(r"'neon' not found[\s\S]*stays[\s\S]*Available"), 3)
        t.ok(scr is not None and "built-in theme" not in scr and "stays" in scr,
             "/theme neon: the error says the theme stays", scr or tm.capture())
        t.ok(scr is not None and re.search(r"Theme: light\. Available: .*\bmono\b", scr),
             "/theme neon kept the light theme and lists the others", scr or tm.capture())

        # --- Ctrl-C on an empty prompt says how to quit; a second one quits -----------------
        tm.send("C-c")
        scr = settle(tm)
        st = ttlib.status_bar(scr) or scr.splitlines()[-2]
        t.ok("Ctrl-D" in scr and "/quit" in scr and "Ctrl-C again" in scr,
             "Ctrl-C on an empty prompt: the status bar says how to quit", scr)
        t.eq(tm.dead(), None, "one Ctrl-C does not quit")
        time.sleep(2.3)
        tm.send("C-c")
        time.sleep(0.3)
        t.eq(tm.dead(), None, "a Ctrl-C 2 s after the last one does not quit either")
        tm.send("C-c")
        t.eq(tm.wait_exit(5), 0, "a second Ctrl-C within 2 s quits (status 0)")

    # --- Ctrl-C on a prompt with text still clears it (and does not count towards quitting) --
    with ttlib.Tmux(100, 30) as tm:
        start(tm, srv, "reply=fine")
        tm.send_text("some text")
        tm.send("C-c")
        tm.send("C-c")
        time.sleep(0.3)
        scr = settle(tm)
        t.ok(tm.dead() is None and "some text" not in scr and "Ctrl-C again" in scr,
             "Ctrl-C clears the text, the next one only says how to quit", scr)
        quit_chat(tm)

    # --- an error is said once --------------------------------------------------------------
    with ttlib.Tmux(100, 30) as tm:
        start(tm, srv, "status=401")
        say(tm, "hello")
        scr = tm.wait_for("\u2717", 10)
        scr = settle(tm)
        n = scr.count("the API key was rejected")
        t.ok(n == 1, "a 401 is said once (%d times)" % n, scr)
        quit_chat(tm)

    # --- "an answer is still streaming" goes when the stream ends ---------------------------
    with ttlib.Tmux(100, 30) as tm:
        start(tm, srv, "gen=20,delay_ms=100")
        say(tm, "slow one")
        tm.wait_for("tok1", 5)
        say(tm, "too early")
        scr = tm.wait_for("still streaming", 3)
        t.ok(scr is not None, "Enter while streaming: the hint", tm.capture())
        scr = tm.wait_for("\u2713", 10)
        scr = settle(tm)
        t.ok(scr is not None and "still streaming" not in scr and "too early" in scr,
             "the hint is gone once the stream has ended (the typed text stays)", scr)
        quit_chat(tm)

    # --- quota: each limit with its own reset; a wait says why and Enter sends anyway -------
    with ttlib.Tmux(160, 30) as tm:
        start(tm, srv, "reply=ok")
        srv.queue(["reply=spent,h.x-ratelimit-limit-requests=100,"
                   "h.x-ratelimit-remaining-requests=0,h.x-ratelimit-reset-requests=120s,"
                   "h.x-ratelimit-limit-tokens=30000,h.x-ratelimit-remaining-tokens=29000,"
                   "h.x-ratelimit-reset-tokens=2s", "reply=anyway"])
        say(tm, "one")
        # the status bar is a row below the check mark: wait for its limits too
        scr = tm.wait_for(re.compile(r"spent\n.*\u2713[\s\S]*tok 29k/30k \(\d"), 10)
        st = ttlib.status_bar(scr or tm.capture())
        t.ok(re.search(r"req 0/100 \((1m\d+s|2m0s)\) tok 29k/30k \(\d", st) is not None,
             "the bar shows each limit with its own reset", st)
        n0 = len(srv.requests())
        say(tm, "two")
        scr = tm.wait_for(re.compile(r"^ waiting for quota \d", re.M), 5)
        st = "".join(re.findall(r"^ waiting for quota .*$", scr or "", re.M))
        t.ok(scr is not None and "Enter sends now" in st and "req 0/100" in st,
             "waiting for quota: the bar says why and how to send anyway", st)
        t.eq(len(srv.requests()), n0, "nothing sent while it waits")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"anyway\n.*\u2713"), 10)
        t.ok(scr is not None and len(srv.requests()) == n0 + 1,
             "Enter on the empty prompt sends it at once (the reset is 2 minutes away)",
             tm.capture())
        quit_chat(tm)

    # a 429 that says 0 remain: the bar says so while the request waits (not a stale 10)
    with ttlib.Tmux(160, 30) as tm:
        start(tm, srv, "reply=ok")
        srv.queue(["reply=ten,h.x-ratelimit-limit-requests=100,"
                   "h.x-ratelimit-remaining-requests=10,h.x-ratelimit-reset-requests=60s",
                   "status=429,h.retry-after-ms=500,h.x-ratelimit-limit-requests=100,"
                   "h.x-ratelimit-remaining-requests=0,h.x-ratelimit-reset-requests=90s",
                   "reply=after%20the%20429"])
        say(tm, "three")
        tm.wait_for(re.compile(r"ten\n.*\u2713"), 10)
        say(tm, "four")
        scr = tm.wait_for(re.compile(r"^ waiting for quota .*req 0/100", re.M), 5)
        bar = "".join(re.findall(r"^ waiting for quota .*$", scr or "", re.M))
        t.ok(scr is not None and "req 10/100" not in bar,
             "a 429's headers reach the bar while the request waits (0 left, not a stale 10)",
             "\n".join(tm.capture().splitlines()[-3:]))
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"after the 429\n.*\u2713"), 10) is not None,
             "and Enter sends it anyway", tm.capture())
        quit_chat(tm)

    # --- a terminal the full-screen chat cannot drive: the line chat --------------------------
    # TERM=dumb (Emacs' M-x shell) drew the chat's frames as one garbled line; an unknown TERM
    # ended with curses' "Error opening terminal". Both get a chat of lines now.
    for term, why in (("dumb", "TERM=dumb cannot move the cursor"),
                      ("no-such-terminal", "TERM=no-such-terminal is not a terminal type")):
        home = ttlib.make_home()
        with ttlib.Tmux(100, 30) as tm:
            e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(), "TT_TEST_STDERR": STDERR})
            tm.run(["sh", "-c", 'TERM="$1" exec "$0" 2>&1', ttlib.tokterm_path(), term], e)
            scr = tm.wait_for(re.compile("line chat[\\s\\S]*^\u203a ?$", re.M), 10)
            t.ok(scr is not None and why in scr.replace("\n", ""),
                 "TERM=%s: the line chat says why and prompts" % term, tm.capture())
            say(tm, "first line")
            scr = tm.wait_for(re.compile(r"^first line\n\n\u203a ?$", re.M), 10)
            t.ok(scr is not None, "TERM=%s: the answer streams under the prompt" % term,
                 tm.capture())
            if term == "dumb":  # Ctrl-C stops a slow answer, keeps it, and the chat goes on
                srv.queue(["gen=400,delay_ms=20"])
                say(tm, "slow")
                tm.wait_for("tok10 ", 10)
                tm.send("C-c")
                scr = tm.wait_for(re.compile(r"cancelled \(the partial answer above is kept\)"
                                             r"\n\n\u203a ?$", re.M), 10)
                t.ok(scr is not None, "line chat: Ctrl-C stops the answer, the chat goes on",
                     tm.capture())
                srv.clear_queue()
                say(tm, "/model")
                t.ok(tm.wait_for("knows only /quit", 5) is not None,
                     "line chat: a command it does not know is said, not sent", tm.capture())
                # a paste longer than the terminal's line: not sent cut, and said so
                n0 = len(srv.requests())
                tm.send_text("x" * 6000)
                tm.send("Enter")
                t.ok(tm.wait_for("not sent: the terminal cuts a line at 4095 bytes", 10)
                     is not None and len(srv.requests()) == n0,
                     "line chat: a line the terminal cut is not sent", tm.capture())
                say(tm, "after that")
                t.ok(tm.wait_for(re.compile(r"^after that\n\n\u203a ?$", re.M), 10) is not None,
                     "line chat: the next line is answered", tm.capture())
            if term == "dumb":  # SIGTERM mid-answer ends the line chat, not only the answer
                srv.queue(["gen=400,delay_ms=20"])
                say(tm, "slow again")
                tm.wait_for("tok10 ", 10)
                pids = subprocess.run(["pgrep", "-f", "^" + ttlib.tokterm_path()],
                                      capture_output=True, text=True).stdout.split()
                home_pids = [p for p in pids if home in open("/proc/%s/environ" % p,
                                                             errors="replace").read()]
                for p in home_pids:
                    os.kill(int(p), signal.SIGTERM)
                t.eq(tm.wait_exit(10), 128 + signal.SIGTERM,
                     "line chat: SIGTERM mid-answer leaves, exit 143 as the chat")
                srv.clear_queue()
            else:
                tm.send("C-d")
                t.eq(tm.wait_exit(10), 0, "TERM=%s: Ctrl-D leaves the line chat, exit 0" % term)
        rc, out, err = ttlib.run_tokterm(["ls", "--json"], home=home)
        rows = [json.loads(x.rstrip(",")) for x in out.decode().splitlines()[1:-1]]
        want = 8 if term == "dumb" else 2
        t.ok(rc == 0 and len(rows) == 1 and rows[0]["messages"] == want,
             "TERM=%s: the line chat's turns are saved as one conversation" % term, out.decode())
        if term == "dumb":  # -c: the line chat says which conversation goes on
            with ttlib.Tmux(100, 30) as tm:
                e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base()})
                tm.run(["sh", "-c", 'TERM=dumb exec "$0" -c 2>&1', ttlib.tokterm_path()], e)
                scr = tm.wait_for(re.compile(r"continuing conversation %d\b[\s\S]*^\u203a ?$"
                                             % rows[0]["id"], re.M), 10)
                t.ok(scr is not None, "line chat -c: names the conversation it continues",
                     tm.capture())
                tm.send("C-d")
                tm.wait_exit(10)

    # --- /new and /clear while an answer streams: refused with the hint, the answer goes on
    # (until 2026-12 /new cancelled it without a word, /clear cut its start off the screen) ----
    with ttlib.Tmux(100, 20) as tm:
        start(tm, srv, "gen=150,delay_ms=20")
        say(tm, "q")
        tm.wait_for("tok20 ", 10)
        for cmd in ("/new", "/clear"):
            say(tm, cmd)
            scr = tm.wait_for("still streaming", 3) or tm.capture()
            t.ok("an answer is still streaming: Esc cancels it" in scr and "New conversation"
                 not in scr, "%s while an answer streams: refused, says why" % cmd, scr)
            tm.send("C-u")
        scr = tm.wait_for(re.compile(r"tok149 [\s\S]*\u2713"), 15) or tm.capture()
        t.ok("tok149" in scr and "cancelled" not in scr and "tok0 " in scr,
             "/new, /clear while streaming: the answer completes, its start still shown", scr)
        quit_chat(tm)

    # --- the bar's quota: past its reset the count is the limit again, and a limit the next
    # answers no longer report is unknown (until 2026-12 "req 4/100" stayed, or "req 0/100
    # (4m54s)" counted down a limit the server had stopped sending) --------------------------
    with ttlib.Tmux(150, 12) as tm:
        start(tm, srv)
        srv.queue(["reply=one,h.x-ratelimit-limit-requests=100,"
                   "h.x-ratelimit-remaining-requests=3,h.x-ratelimit-reset-requests=2s"])
        say(tm, "q1")
        scr = tm.wait_for(re.compile(r"^ idle .*req 3/100", re.M), 10) or tm.capture()
        t.ok("req 3/100" in scr, "bar: the reported count", scr)
        scr = tm.wait_for(re.compile(r"^ idle .*req 100/100", re.M), 6) or tm.capture()
        t.ok("req 100/100" in scr, "bar: past the reset, the limit again", scr)
        srv.clear_queue()
        say(tm, "q2")
        tm.wait_for(re.compile(r"^ idle .*session \d+ tok", re.M), 10)
        time.sleep(0.3)
        bar = [ln for ln in tm.capture().split("\n") if ln.startswith(" idle")]
        t.ok(bar and "req ?/100" in bar[-1] and "(" not in bar[-1].split("req ")[1][:12],
             "bar: an answer without the limit's headers: its count is unknown, no countdown",
             str(bar))
        quit_chat(tm)

    # --- a cached answer made no connection: the bar names none (until 2026-12 "new HTTP/?")
    with ttlib.Tmux(150, 12) as tm:
        start(tm, srv, "reply=from%20the%20server")
        say(tm, "the same question")
        tm.wait_for(re.compile(r"^ idle .*new HTTP/1", re.M), 10)
        say(tm, "/new")
        say(tm, "the same question")
        scr = tm.wait_for(re.compile(r"^ idle .*cached", re.M), 10) or tm.capture()
        bar = [ln for ln in scr.split("\n") if ln.startswith(" idle")]
        t.ok(bar and "cached" in bar[-1] and "HTTP/" not in bar[-1],
             "bar: a cached answer names no connection", str(bar))
        quit_chat(tm)

    # --- hints that outlived what they said: a URL's fetch, a send without waiting (until
    # 2026-12 both stayed in place of the status bar until a key was pressed) ----------------
    with ttlib.Tmux(150, 14) as tm:
        start(tm, srv)
        say(tm, "/attach http://127.0.0.1:%d/v1/models" % srv.port)
        scr = tm.wait_for("Attached", 10) or tm.capture()
        time.sleep(0.3)
        t.ok("Attached" in scr and "fetching the URL" not in tm.capture(),
             "/attach URL: the fetching hint goes when the fetch is done", tm.capture())
        say(tm, "/detach 1")
        srv.queue(["reply=spent,h.x-ratelimit-limit-requests=100,"
                   "h.x-ratelimit-remaining-requests=0,h.x-ratelimit-reset-requests=20s"])
        say(tm, "first")
        tm.wait_for(re.compile(r"^ idle", re.M), 10)
        say(tm, "second")
        tm.wait_for("waiting for quota", 10)
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"second\n(.*\n)*.*\u2713"), 10) or tm.capture()
        time.sleep(0.3)
        t.ok("sent now, without waiting" not in tm.capture() and
             re.search(r"^ idle", tm.capture(), re.M),
             "Enter during a quota wait: the 'sent now' hint goes with the answer", tm.capture())
        quit_chat(tm)

    # --- an answer sent shortened is marked as compressed history is (until 2026-12 only
    # summaries and drops were: the transcript showed it whole, unmarked) ---------------------
    home = ttlib.make_home()
    ttlib.write_config(home, "context_window = 4000\n")
    with ttlib.Tmux(120, 20) as tm:
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=2000"),
                                   "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()], e)
        tm.wait_for(re.compile("F1 help"), 10)
        n0 = len(srv.requests())
        for k, m in enumerate(("one", "two", "three")):
            say(tm, m)
            deadline = time.monotonic() + 10
            while len(srv.requests()) < n0 + k + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            tm.wait_for(re.compile(r"^ idle", re.M), 10)
        sent = srv.requests()[-1]["body"]["messages"]
        scr = tm.wait_for("earlier messages shortened", 5) or tm.capture()
        t.ok(any(len(x.get("content") or "") < 2000 and "elided" in (x.get("content") or "")
                 for x in sent) and "earlier messages shortened, summarised or dropped" in scr,
             "a shortened answer: the transcript says history was shortened", scr)
        quit_chat(tm)

    # --- /model with blanks in the name is a typo, refused (until 2026-12 "a b c" was taken)
    with ttlib.Tmux(120, 12) as tm:
        start(tm, srv)
        say(tm, "/model a b c")
        scr = tm.wait_for("has no spaces", 5) or tm.capture()
        bar = [ln for ln in scr.split("\n") if ln.startswith(" idle")]
        t.ok("a model name has no spaces" in scr and bar and "a b c" not in bar[-1],
             "/model a b c: refused, the model unchanged", scr)
        # Tab after the one argument offers nothing (until 2026-12 it put the model's name
        # in again: "/model gpt-x gpt-4o-mini"); the Z after it shows the Tab was read
        tm.send("C-u")
        tm.send_text("/model gpt-x ")
        tm.send("Tab")
        tm.send_text("Z")
        scr = tm.wait_for(re.compile(r"\u203a /model gpt-x \S*Z"), 5) or tm.capture()
        t.ok(re.search(r"\u203a /model gpt-x Z", scr) is not None,
             "Tab after /model's argument adds nothing", scr)
        tm.send("C-u")
        quit_chat(tm)

    # --- a resumed chat shows the saved reasoning as the live one did (until 2026-12 it hid
    # it: the turns are loaded without it, for speed) ------------------------------------------
    home = ttlib.make_home()
    rc, _, err = ttlib.run_tokterm(["--reasoning-effort", "low", "-p", "reason please"],
                                   env={"OPENAI_BASE_URL": srv.base()}, home=home)
    with ttlib.Tmux(100, 15) as tm:
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(), "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" -c 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()], e)
        scr = tm.wait_for("Continuing conversation", 10) or tm.capture()
        t.ok(rc == 0 and re.search(r"thinking at low effort\n.*reason please", scr) is not None,
             "a resume shows the answer's saved reasoning above it", err.decode() + scr)
        quit_chat(tm)

    # --- a resumed turn that failed after its tools ran says it is sent again with them
    # (until 2026-12 it read "not sent again" while its rounds went with every request) ------
    home = ttlib.make_home()
    srv.queue(["replay=openai_tool_calls.sse", "status=400"])
    rc, _, err = ttlib.run_tokterm(["--allow-tool", "test.*", "-p", "add them"],
                                   env={"OPENAI_BASE_URL": srv.base(), "TOKTERM_TEST_TOOLS": "1"},
                                   home=home)
    with ttlib.Tmux(100, 30) as tm:
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(), "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" -c 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()], e)
        scr = tm.wait_for("Continuing conversation", 10) or tm.capture()
        flat = re.sub(r"\s+", " ", scr)
        t.ok(rc != 0 and "tool rounds are sent again" in flat and "not sent again" not in flat,
             "a resumed turn that failed after its tools ran: said to be sent again",
             err.decode() + scr)
        quit_chat(tm)

    # --- another tokterm adds to the chat's conversation (a script's --conversation 1 -p): the
    # next prompt shows it first and waits for Enter, then goes after it (until 2026-12 it was
    # sent without it, and the outside turn left the live path as a replaced version) --------
    home = ttlib.make_home()
    with ttlib.Tmux(100, 30) as tm:
        tm.run_chat(STDERR, {"OPENAI_BASE_URL": srv.base()}, home=home)
        say(tm, "first words")
        tm.wait_for(re.compile(r"✓"), 10)
        say(tm, "/model chat-model")  # the chat's own choice: a reload keeps it
        time.sleep(0.3)
        rc, out, err = ttlib.run_tokterm(["--conversation", "1", "-m", "script-model", "-p",
                                          "outside words"],
                                         env={"OPENAI_BASE_URL": srv.base()}, home=home)
        n0 = len(srv.requests())
        say(tm, "second words")
        scr = tm.wait_for("Another tokterm added", 10) or tm.capture()
        flat = re.sub(r"\s+", " ", scr)
        t.ok(rc == 0 and "outside words" in flat and "Your message was not sent" in flat and
             len(srv.requests()) == n0 and re.search(r"› second words", scr),
             "another writer's turn: shown, the prompt kept, nothing sent", err.decode() + scr)
        tm.send("Enter")
        deadline = time.monotonic() + 10
        while len(srv.requests()) == n0 and time.monotonic() < deadline:
            time.sleep(0.1)
        body = (srv.requests() or [{}])[-1].get("body") or {}
        msgs = [m.get("content") for m in body.get("messages", [])]
        t.ok(msgs == ["first words", "first words", "outside words", "outside words",
                      "second words"] and body.get("model") == "chat-model",
             "then Enter sends the prompt after the other writer's turn, with the chat's "
             "/model", repr(msgs) + repr(body.get("model")))
        tm.wait_for(re.compile(r"second words\n(.*\n)*.*✓"), 10)
        ttlib.run_tokterm(["--conversation", "1", "-p", "more outside"],
                          env={"OPENAI_BASE_URL": srv.base()}, home=home)
        n0 = len(srv.requests())
        say(tm, "/retry")
        scr = tm.wait_for("/retry was not done", 10) or tm.capture()
        time.sleep(0.5)
        t.ok("more outside" in scr and len(srv.requests()) == n0,
             "/retry after another writer's turn: shown, nothing sent", scr)
        quit_chat(tm)
    rc, out, err = ttlib.run_tokterm(["show", "1"], home=home)
    t.ok(rc == 0 and out.count(b"## User") == 4, "all four turns on the live path",
         out.decode())

    # --- --incognito writes no file: not the input history, not /copy's copy.txt (until 2026-12
    # both held the prompts and answers of an incognito chat) ------------------------------------
    home = ttlib.make_home()
    with ttlib.Tmux(100, 20) as tm:
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("reply=secret%20answer"),
                                   "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" --incognito 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()],
               e)
        tm.wait_for(re.compile("F1 help"), 10)
        say(tm, "my password is hunter2")
        tm.wait_for("secret answer", 10)
        say(tm, "/copy")
        scr = tm.wait_for(re.compile(r"copy\.txt|Copied"), 5) or tm.capture()
        t.ok("--incognito" in scr, "--incognito /copy: says it writes no copy.txt", scr)
        tm.send("Up")
        t.ok(tm.wait_for("\u203a /copy", 3) is not None,
             "--incognito: Up still recalls this run's lines", tm.capture())
        tm.send("C-u")
        quit_chat(tm)
    files = [os.path.relpath(os.path.join(d, f), home) for d, _, fs in os.walk(home) for f in fs]
    t.ok(files == [], "--incognito chat: no file written under HOME", str(files))

    # --- what a helper lost around an answer in flight (session 51) ---------------------------
    home = ttlib.make_home()
    notes = os.path.join(home, "notes.txt")
    with open(notes, "w") as f:
        f.write("the attached notes say 4242\n")
    with ttlib.Tmux(120, 20) as tm:
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(), "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()], e)
        tm.wait_for(re.compile("F1 help"), 10)
        # a failed prompt comes back with its attachments (until 2026-12 Enter sent it alone)
        say(tm, "/attach " + notes)
        tm.wait_for("Attached", 5)
        srv.queue(["status=400"])
        say(tm, "explain the notes")
        scr = tm.wait_for("Enter sends them again", 10) or tm.capture()
        t.ok("the prompt and its attachments are back" in scr,
             "a refused prompt: the prompt and its attachment are back", scr)
        n0 = len(srv.requests())
        tm.send("Enter")
        tm.wait_for(re.compile(r"\u2713"), 10)
        r = srv.requests()
        sent = json.dumps(r[-1]["body"]["messages"][-1]) if len(r) > n0 else ""
        t.ok("explain the notes" in sent and "4242" in sent,
             "Enter sends the prompt with its attachment again", sent[:400])
        # a command typed while an answer streams waits in the input line (until 2026-12 it
        # was dropped with a hint); Enter after the answer runs it
        say(tm, "/clear")  # the slow answer's header stays on the screen
        srv.queue(["gen=150,delay_ms=40"])  # 6 s: still streaming after the checks below
        say(tm, "slow one")
        time.sleep(0.6)
        say(tm, "/retry")
        scr = tm.wait_for("then press Enter", 3) or tm.capture()
        t.ok("\u203a /retry" in scr, "/retry during a stream: kept in the input line", scr)
        # /model while it streams changes the next request's model, not this answer's label
        tm.send("C-u")
        say(tm, "/model other-model")
        tm.wait_for(re.compile(r"tok149"), 15)
        scr = settle(tm)
        t.ok("other-model \u2192" not in scr,
             "/model during a stream: the answer in flight keeps its model's label", scr)
        tm.send_text("/retry")
        tm.send("Enter")
        scr = tm.wait_for("version 2 of 2", 10) or tm.capture()
        t.ok("version 2 of 2" in scr, "after the answer, /retry runs", scr)
        quit_chat(tm)

    # --- /model during a stream: the answer is charged at the price of the model it was sent
    # to (until 2026-12 at the new one's, once /context had looked it up) -------------------------
    with ttlib.Tmux(120, 40) as tm:
        t.ok(start(tm, srv, "gen=600,delay_ms=5", env={"TOKTERM_MODEL": "gpt-4o-mini"})
             is not None, "price: the chat opens", tm.capture())
        say(tm, "price me")
        tm.wait_for("tok20", 10)
        say(tm, "/model gpt-4o")
        say(tm, "/context")
        scr = tm.wait_for("streaming now", 5) or tm.capture()
        t.ok("the answer streaming now is not in it yet" in " ".join(scr.split()),
             "/context during a stream: says the streaming answer is not counted yet (until "
             "2026-12 its plan read as two user messages in a row)", scr)
        tm.wait_for("\u2713", 30)
        tm.send("C-u")
        say(tm, "/budget")
        spent = re.compile(r"Budget: spent [\d,]+ tokens, \$([\d.]+)")
        scr = tm.wait_for(spent, 5) or tm.capture()
        m = spent.search(scr)
        # 600 completion tokens: gpt-4o-mini $0.60/M -> ~$0.0004; gpt-4o $10/M -> ~$0.006
        t.ok(m and float(m.group(1)) < 0.002,
             "/model mid-answer: the answer priced as gpt-4o-mini's ($%s)"
             % (m.group(1) if m else "?"), scr)

        # --- Ctrl-D or /quit while an answer streams asks again (until 2026-12 it quit at once,
        # exit 0, the answer cut off without a word) ---------------------------------------------
        srv.queue(["gen=400,delay_ms=25"])
        say(tm, "a long one")
        tm.wait_for("tok5 ", 10)
        tm.send("C-d")
        scr = tm.wait_for("again within 2 s quits", 3) or tm.capture()
        t.ok("again within 2 s quits" in scr and tm.dead() is None,
             "Ctrl-D during a stream: asks again, still running", scr)
        time.sleep(2.3)
        say(tm, "/quit")
        scr = tm.wait_for("again within 2 s quits", 3) or tm.capture()
        t.ok("again within 2 s quits" in scr and tm.dead() is None,
             "/quit during a stream, over 2 s later: asks again", scr)
        tm.send("C-d")
        t.ok(tm.wait_exit(5) is not None, "the second within 2 s quits")
    with ttlib.Tmux(120, 40) as tm:
        t.ok(start(tm, srv, "gen=60,delay_ms=20") is not None, "quit hint: the chat opens",
             tm.capture())
        say(tm, "a short one")
        tm.wait_for("tok5 ", 10)
        tm.send("C-d")
        tm.wait_for("again within 2 s quits", 3)
        tm.wait_for("\u2713", 10)
        scr = settle(tm)
        t.ok("\u2713" in scr and "again within 2 s quits" not in scr and tm.dead() is None,
             "the quit hint goes with the answer it was about", scr)
        quit_chat(tm)

    # --- a warning of the network goes into the conversation at the turn's end, and the status
    # bar comes back (until 2026-12 it held the bar until a key) ---------------------------------
    with ttlib.Tmux(120, 40) as tm:
        t.ok(start(tm, srv, "") is not None, "warning: the chat opens", tm.capture())
        srv.queue(["reply=ok,h.x-ratelimit-limit-tokens=30000,h.x-ratelimit-remaining-tokens=10,"
                   "h.x-ratelimit-reset-tokens=6m0s", "reply=second%20ok"])
        say(tm, "set a low quota")
        tm.wait_for("\u2713", 10)
        say(tm, "next one")
        tm.wait_for("second ok", 10)
        time.sleep(0.5)
        scr = settle(tm)
        bar = ([ln for ln in scr.splitlines() if "\u2502" in ln and "ctx" in ln] or [""])[-1]
        t.ok("sending now" in scr and "sending now" not in bar and "ctx" in bar,
             "the quota warning: in the conversation, the status bar back", scr)
        quit_chat(tm)

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-3000:])
sys.exit(t.done())
