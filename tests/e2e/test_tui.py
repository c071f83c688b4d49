#!/usr/bin/env python3
"""End-to-end tests of the interactive chat: the real binary in a private tmux against the fake
server. Prints TAP; skips cleanly when tmux is missing."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

STATUS_RE = re.compile(r"^ (idle|waiting|streaming|cancelling|error|no API key|retrying)")
NO_KEY_PROBE = "None=http://127.0.0.1:1/v1"  # nothing listens on port 1: no local server


def q(text):
    return urllib.parse.quote(text, safe="")


width = ttlib.display_width


def transcript(screen):
    """The transcript rows of a screen (everything above the status bar), gutters removed."""
    lines = screen.split("\n")
    for i, line in enumerate(lines):
        if STATUS_RE.match(line):
            return [row[2:] if len(row) >= 2 else "" for row in lines[:i]], lines[i:]
    return [row[2:] for row in lines], []


def answer_rows(screen):
    """Rows of the last answer: after its header row, before its footer (or the end)."""
    rows, _ = transcript(screen)
    start = None
    for i, row in enumerate(rows):
        if re.match(r"^\S+ +\d\d:\d\d$", row.strip()):  # "model   12:34" (gutter: the diamond)
            start = i + 1
    out = []
    for row in rows[start or 0:]:
        if row.startswith("\u2713") or row.startswith("\u2717") or row.startswith("\u26a0"):
            break
        out.append(row)
    while out and not out[-1].strip():
        out.pop()
    return out


def status_line(screen):
    _, rest = transcript(screen)
    return rest[0] if rest else ""


STDERR = os.path.join(ttlib.tempdir("tt-tui-stderr-"), "stderr")


def start(tm, srv, spec="", env=None, args=()):
    """Run tokterm in tm; its stderr (nothing, unless a sanitizer reports) goes to STDERR."""
    e = {"OPENAI_BASE_URL": srv.base(spec)} if srv else {}
    e.update(env or {})
    home = e.pop("HOME", None)
    e["TT_TEST_STDERR"] = STDERR
    tm.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()] +
           list(args), ttlib.clean_env(home=home, env=e))
    # "F1" alone is in the first notice too, a row above the status bar's "F1 help"
    return tm.wait_for(re.compile("F1 help|\u203a"), 10)


def colours(esc):
    """Colour parameters of the SGR sequences in a capture -e (39/49 = default not counted)."""
    out = []
    for params in re.findall(r"\x1b\[([0-9;]*)m", esc):
        p = [int(x) if x else 0 for x in params.split(";")]
        i = 0
        while i < len(p):
            if p[i] in (38, 48):
                out.append(p[i])
                i += 3 if i + 1 < len(p) and p[i + 1] == 5 else 5
                continue
            if 30 <= p[i] <= 37 or 40 <= p[i] <= 47 or 90 <= p[i] <= 97 or 100 <= p[i] <= 107:
                out.append(p[i])
            i += 1
    return out


if not ttlib.Tmux.available():
    t.skip("tmux tests", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

T0 = time.monotonic()
with ttlib.FakeServer() as srv:
    # --- 1. a streamed answer appears while it streams, then completely -------------------------
    reply = "The quick brown fox jumps over the lazy dog. " * 6
    with ttlib.Tmux(80, 24) as tm:
        home = ttlib.make_home()
        screen = start(tm, srv, "reply=%s,delay_ms=25" % q(reply.strip()), {"HOME": home})
        t.ok(screen is not None and "F1 help" in screen, "the chat opens with a status bar",
             screen or tm.capture())
        tm.send_text("hello there")
        tm.send("Enter")
        mid = tm.wait_for(re.compile(r"The quick brown fox"), 5)
        t.ok(mid is not None, "the answer starts to appear", tm.capture())
        mid = tm.capture()
        partial = " ".join(r.strip() for r in answer_rows(mid))
        t.ok("\u2713" not in mid and partial and reply.startswith(partial) and
             len(partial) < len(reply.strip()), "captured while streaming: a strict prefix",
             mid)
        t.ok(status_line(mid).startswith(" streaming") or status_line(mid).startswith(" waiting"),
             "status says streaming", status_line(mid))
        # the status bar is a row below the check mark: wait for its final state too
        done = tm.wait_for(re.compile(r"\u2713[\s\S]*^ idle .*\d+ tok/s", re.M), 10)
        t.ok(done is not None, "the answer completes (check mark)", tm.capture())
        done = done or ""  # a timeout failed above; every check below needs text that came
        text = " ".join(r.strip() for r in answer_rows(done))
        t.eq(text, reply.strip(), "the whole answer is on screen, wrapped")
        t.ok("\u258c hello there" in done, "the prompt is shown with the user bar", done)
        st = status_line(done)
        t.ok("gpt-4o-mini" in st, "status: model", st)
        t.ok(re.search(r"ttft \d", st) is not None, "status: time to first token", st)
        t.ok(re.search(r"\d+ tok/s", st) is not None, "status: tokens/s", st)
        t.ok(st.startswith(" idle"), "status: idle again", st)
        req = srv.requests()[-1]
        t.eq(req["body"]["messages"][-1], {"role": "user", "content": "hello there"},
             "the prompt was sent")
        # a stream whose tokens came in one burst and then stalled (a buffering proxy, a stuck
        # server), cancelled 1.5 s later, has no rate: until 2026-12 the bar and the footer
        # read millions of tok/s (its tokens over the microseconds between the first and last)
        srv.queue(["gen=400,stall_after=6000,stall_s=20"])
        tm.send_text("burst please")
        tm.send("Enter")
        tm.wait_for(re.compile(r"^ streaming", re.M), 5)
        time.sleep(1.5)
        tm.send("Escape")
        burst = tm.wait_for(re.compile(r"^ idle .*ttft", re.M), 10) or tm.capture()
        st = status_line(burst)
        t.ok(st.startswith(" idle") and "tok/s" not in st and "total" in st and
             "tok/s" not in burst.split("burst please")[-1],
             "a burst, then a stall: no tokens/s in the bar or the footer", burst)
        # --- history: Ctrl-D quits with 0, the history file is private and reloads ---
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "Ctrl-D on an empty prompt quits with status 0")
    hist = os.path.join(home, ".local", "state", "tokterm", "history")
    t.ok(os.path.exists(hist), "history file created", hist)
    if os.path.exists(hist):
        t.eq(stat.S_IMODE(os.stat(hist).st_mode), 0o600, "history file mode 0600")
        t.ok("hello there" in open(hist).read(), "history holds the prompt")
    with ttlib.Tmux(60, 12) as tm:
        start(tm, srv, "", {"HOME": home})
        tm.send("Up")
        time.sleep(0.3)
        t.ok(tm.wait_for("\u203a burst please", 3) is not None, "Up recalls the prompt of the "
             "last run", tm.capture())
        tm.send("C-c")
        t.ok(tm.wait_for(re.compile(r"\u203a *\n"), 2) is not None or
             "burst please" not in tm.capture().split("\n")[-2], "Ctrl-C clears the prompt",
             tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)

    # --- the history file keeps whole entries: a multi-line one is not cut in two at exit, and a
    # prompt over 16 KiB (a large paste) is not written to it ---
    home = ttlib.make_home()
    hist = os.path.join(home, ".local", "state", "tokterm", "history")
    os.makedirs(os.path.dirname(hist))
    with open(hist, "w") as f:
        f.write("#1700000000\n" + "\n".join("multi %d" % i for i in range(2500)) + "\n"
                "#1700000001\nsmall one\n")
    os.chmod(hist, 0o600)
    editor = os.path.join(home, "big-editor.sh")
    with open(editor, "w") as f:
        f.write("#!/bin/sh\nhead -c 20000 /dev/zero | tr '\\0' y > \"$1\"\n")
    os.chmod(editor, 0o755)
    with ttlib.Tmux(60, 12) as tm:
        start(tm, srv, "", {"HOME": home, "EDITOR": editor})
        tm.send("C-x", "C-e")
        t.ok(tm.wait_for("yyyy", 5) is not None, "history: the 20 KB prompt is in the input line",
             tm.capture())
        tm.send("Enter")
        tm.wait_for("\u2713", 10)
        tm.send_text("after the big one")
        tm.send("Enter")
        tm.wait_for(re.compile("\u2713[\\s\\S]*\u2713"), 10)
        tm.send("C-d")
        tm.wait_exit(5)
    # a prompt with a line readline would read back as a timestamp ("#2 ...")
    with open(editor, "w") as f:
        f.write("#!/bin/sh\nprintf 'step one\\n#2 step two\\nstep three' > \"$1\"\n")
    with ttlib.Tmux(60, 12) as tm:
        start(tm, srv, "", {"HOME": home, "EDITOR": editor})
        tm.send("C-x", "C-e")
        tm.wait_for("step three", 5)
        tm.send("Enter")
        tm.wait_for("\u2713", 10)
        tm.send("C-d")
        tm.wait_exit(5)
    text = open(hist).read() if os.path.exists(hist) else ""
    entries = re.split(r"(?m)^#\d+\n", text)[1:]
    t.ok(text.startswith("#") and any(e.startswith("multi 0\n") and "multi 2499\n" in e
                                      for e in entries)
         and not any(e.startswith("multi ") and not e.startswith("multi 0\n") for e in entries),
         "history: a 2,500-line entry stays whole at exit", text[:200])
    t.ok("small one\n" in entries and "after the big one\n" in entries and "y" * 20000 not in text,
         "history: short prompts kept, a 20 KB one not written",
         [e[:40] for e in entries])
    t.ok("step" not in text and re.search(r"(?m)^#\d+\nafter the big one$", text),
         "history: a prompt with a hash-digit line is not written (it would read back in pieces)",
         text[-200:])

    # --- 2. CJK and emoji at 40 columns: nothing split, nothing lost ---------------------------
    cjk = ("中文字符测试这是一个很长的句子用来检查换行是否正确日本語のテキストも混ぜます"
           "한국어도있습니다漢字がたくさん並んでいる行をさらに長くするための文章です終わり")
    with ttlib.Tmux(40, 14) as tm:
        start(tm, srv, "reply=" + q(cjk))
        tm.send_text("cjk")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        t.ok(done is not None, "CJK: the answer completes", tm.capture())
        rows = answer_rows(done) if done else []
        t.eq("".join(rows), cjk, "CJK at 40 columns: every character shown, in order")
        t.ok(rows and all(width(r) <= 38 for r in rows), "CJK rows fit in 38 columns",
             "\n".join("%d %s" % (width(r), r) for r in rows))
        t.ok(len(rows) >= 4 and all(width(r) >= 37 for r in rows[:-1]),
             "CJK rows are filled (broken between characters, not early)", "\n".join(rows))
        tm.send("C-d")
        tm.wait_exit(5)
    emoji = "flags \U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5 family \U0001F468\u200d\U0001F469" \
            "\u200d\U0001F467 e\u0301 end " * 3
    with ttlib.Tmux(20, 14) as tm:
        start(tm, srv, "reply=" + q(emoji.strip()))
        tm.send_text("emoji")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        t.ok(done is not None, "emoji: the answer completes", tm.capture())
        rows = answer_rows(done) if done else []
        joined = " ".join(r.strip() for r in rows)
        t.ok(joined.count("end") == 3, "emoji at 20 columns: all the text arrives", rows)
        t.ok(rows and all(width(r) <= 18 for r in rows), "emoji rows fit the width", rows)
        t.ok("\U0001F1EB\U0001F1F7" in joined, "a flag is drawn whole", joined)
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 3. resize while streaming reflows everything ------------------------------------------
    with ttlib.Tmux(80, 16) as tm:
        start(tm, srv, "gen=300,delay_ms=8")
        tm.send_text("go")
        tm.send("Enter")
        t.ok(tm.wait_for("tok60 ", 10) is not None, "resize: the answer streams", tm.capture())
        tm.resize(44, 12)
        time.sleep(0.2)
        tm.resize(33, 14)
        done = tm.wait_for("\u2713", 15)
        t.ok(done is not None, "resize: the answer completes", tm.capture())
        rows = [r.strip() for r in answer_rows(done)] if done else []
        nums = [int(x[3:]) for r in rows for x in r.split()]
        t.ok(nums and nums[-1] == 299 and nums == list(range(nums[0], 300)),
             "after resizes the visible tail is complete and in order", "\n".join(rows))
        t.ok(rows and all(width(r) <= 31 for r in rows), "rows fit the new width",
             "\n".join(rows))
        # scroll back: PgUp shows older rows, End returns to the bottom
        tm.send("PPage")
        time.sleep(0.3)
        up = [int(x[3:]) for r in transcript(tm.capture())[0] for x in r.split()
              if re.fullmatch(r"tok\d+", x)]
        t.ok(up and max(up) < 299, "PgUp scrolls back", tm.capture())
        tm.send("End")
        time.sleep(0.3)
        t.ok("tok299" in tm.capture(), "End returns to the bottom", tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)

    # a single line longer than 16 KiB is previewed and wrapped incrementally: same rows as a
    # full greedy wrap, through a resize
    def greedy(words, w):
        rows, cur = [], ""
        for word in words:
            if not cur:
                cur = word
            elif len(cur) + 1 + len(word) <= w:
                cur += " " + word
            else:
                rows.append(cur)
                cur = word
        return rows + ([cur] if cur else [])

    with ttlib.Tmux(70, 16) as tm:
        start(tm, srv, "gen=2400,chunk=16384,delay_ms=40")
        tm.send_text("long line")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"tok1[2-9]\d\d"), 10) is not None and
             "\u2713" not in tm.capture(), "the long line streams (resized mid-stream)",
             tm.capture())
        tm.resize(47, 16)
        done = tm.wait_for("\u2713", 15)
        rows = [r.rstrip() for r in answer_rows(done)] if done else []
        want = greedy(["tok%d" % i for i in range(2400)], 45)
        t.ok(rows and rows == want[-len(rows):], "an 18 KB line: the rows of a greedy wrap "
             "(incremental, after a resize)", "\n".join(rows[-4:]) + "\nwant:\n" +
             "\n".join(want[-4:]))
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 4. scrolled up, new text does not move the view; Esc cancels, partial text stays ------
    with ttlib.Tmux(60, 14) as tm:
        start(tm, srv, "gen=3000,delay_ms=5")
        tm.send_text("long")
        tm.send("Enter")
        streaming = tm.wait_for("tok150 ", 10)
        tm.send("PPage")
        time.sleep(0.2)
        a = transcript(tm.capture())[0]
        time.sleep(0.5)
        b = transcript(tm.capture())[0]
        t.ok(streaming is not None and "\u2713" not in tm.capture() and a == b,
             "while scrolled up the view stays put as text streams in",
             "streaming: %s\n%s\n---\n%s" % (streaming is not None, "\n".join(a), "\n".join(b)))
        tm.send("End")
        tm.send("Escape")
        done = tm.wait_for(re.compile(r"cancelled[\s\S]*^ idle", re.M), 5)
        t.ok(done is not None, "Esc cancels the streaming answer (marked cancelled)",
             tm.capture())
        rows = transcript(done)[0] if done else []
        shown = [int(x[3:]) for r in rows for x in r.split() if re.fullmatch(r"tok\d+", x)]
        t.ok(shown and 150 <= max(shown) < 2999, "the partial text stays on screen",
             "\n".join(rows))
        t.ok(done is not None and status_line(done).startswith(" idle"),
             "idle after cancelling", status_line(done or tm.capture()))
        tm.send_text("next")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"\u258c next(.*\n)+.*tok50 "), 10) is not None,
             "a new prompt works after a cancel", tm.capture())
        tm.send("Escape")
        scr = tm.wait_for(re.compile(r"tok50 (.*\n)+.*cancelled"), 5)
        t.ok(scr is not None and srv.requests()[-1]["body"]["messages"][-1]["content"] ==
             "next", "the second answer is cancelled too", tm.capture())
        tm.send("Escape")  # Esc on an idle prompt does nothing (Ctrl-D still quits)
        time.sleep(0.2)
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "quits after a cancel")

    # --- 5. status bar: rate limits, connection reuse, context ---------------------------------
    hdrs = ",".join(["h.x-ratelimit-limit-requests=5000", "h.x-ratelimit-remaining-requests=4999",
                     "h.x-ratelimit-limit-tokens=160000", "h.x-ratelimit-remaining-tokens=159000",
                     "h.x-ratelimit-reset-requests=6m0s", "h.x-ratelimit-reset-tokens=30s"])
    with ttlib.Tmux(200, 12) as tm:
        start(tm, srv, "reply=ok," + hdrs)
        tm.send_text("one")
        tm.send("Enter")
        done = tm.wait_for(re.compile(r"\u2713[\s\S]*session \d+ tok"), 10)
        t.ok(done is not None, "rate limits: the answer completes", tm.capture())
        st = status_line(done) if done else ""
        t.ok("req 4999/5000" in st, "status: remaining/limit requests from x-ratelimit-*", st)
        t.ok("tok 159k/160k" in st, "status: remaining/limit tokens", st)
        t.ok(re.search(r"req 4999/5000 \(\d+m\d+s\)", st) is not None,
             "status: reset countdown (each limit its own)", st)
        t.ok("new HTTP/1.1" in st, "status: a new connection and its HTTP version", st)
        t.ok(re.search(r"ctx ~?\d+(\.\d+k)?/\d+(\.\d+)?k", st) is not None,
             "status: context used / available", st)
        t.ok(re.search(r"session \d+ tok", st) is not None, "status: session tokens", st)
        srv.queue(["reply=" + q("slow words " * 20) + ",delay_ms=60," + hdrs])
        tm.send_text("two")
        tm.send("Enter")
        mid = tm.wait_for(re.compile(r"^ streaming", re.M), 10) or ""
        t.ok(mid and "HTTP/1" not in status_line(mid),
             "status: no connection field while the next request is out (it was the last "
             "one's)", status_line(mid))
        done = tm.wait_for(re.compile(r"reused HTTP"), 15)
        t.ok(done is not None, "status: the second request reused the connection",
             status_line(tm.capture()))
        ends = re.findall(r"^ *\u2713.*$", done or "", re.M)
        t.ok(ends and all("attempt" not in e for e in ends),
             "an answer of one attempt names no failed one", done or "")
        # a 503 is retried: the status bar counts down, then the answer streams
        n0 = len(srv.requests())
        srv.queue(["status=503,h.retry-after-ms=1500", "reply=after%20the%20retry"])
        tm.send_text("three")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"^ retrying in \d", re.M), 5)
        t.ok(scr is not None, "status: retrying in Ns", status_line(tm.capture()))
        # a message typed during the countdown: kept, and the hint says what waits (until
        # 2026-12 "an answer is still streaming", while nothing streamed)
        tm.send_text("typed meanwhile")
        tm.send("Enter")
        hint = tm.wait_for("waits to be sent", 3) or tm.capture()
        t.ok("waits to be sent" in hint and "still streaming" not in hint and
             "\u203a typed meanwhile" in hint, "during a retry: the hint says what waits", hint)
        tm.send("C-u")
        done = tm.wait_for(re.compile(r"after the retry\n.*\u2713[\s\S]*^ idle", re.M), 10)
        t.ok(done is not None and status_line(done).startswith(" idle"),
             "the retried request answers", tm.capture())
        t.ok("waits to be sent" not in (done or tm.capture()),
             "the hint of the wait is gone once the answer came", done or tm.capture())
        t.eq([r["status"] for r in srv.requests()[n0:]], [503, 200],
             "the server saw the failed attempt and the retry")
        t.ok(done is not None and re.search(r"after the retry\n.*\u2713.* after 1 failed attempt$",
                                            done, re.M) is not None,
             "the answer's line says it came after a failed attempt", done or "")
        srv.queue(["status=429,h.retry-after-ms=100", "status=500", "reply=third%20time"])
        tm.send_text("again")
        tm.send("Enter")
        done = tm.wait_for(re.compile(r"third time\n.*\u2713.*$", re.M), 15)
        t.ok(done is not None and re.search(
            r"third time\n.*\u2713.* after 2 failed attempts \(1 answered 429\)$", done, re.M),
             "after a 429 and a 500: both failed attempts, the 429 named", done or tm.capture())
        # no requests left until the reset: the next one waits for the quota
        srv.queue(["reply=spent,h.x-ratelimit-limit-requests=5000,"
                   "h.x-ratelimit-remaining-requests=0,h.x-ratelimit-reset-requests=1500ms",
                   "reply=paced"])
        tm.send_text("four")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"spent\n.*\u2713"), 10) is not None,
             "the answer that spends the quota completes", tm.capture())
        tm.send_text("five")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"^ waiting for quota \d", re.M), 5)
        t.ok(scr is not None, "status: waiting for quota Ns", status_line(tm.capture()))
        t.ok(tm.wait_for(re.compile(r"paced\n.*\u2713"), 10) is not None,
             "the paced request goes after the reset", tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)
    with ttlib.Tmux(200, 30) as tm:
        start(tm, srv, "reply=ok")
        tm.send_text("x")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        st = status_line(done) if done else None  # None: the wait timed out
        t.ok(st is not None and "req " not in st, "no rate-limit field without the headers",
             st if st is not None else "timed out: " + tm.capture())
        t.ok(st is not None and re.search(r"ctx ~?\d+(\.\d+k)?/\d", st) is not None,
             "status: a context figure after an answer", st)
        # /context and /budget report in the transcript
        tm.send_text("/context")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"next request[\s\S]*tokens"), 5)
        t.ok(scr is not None and "tokens" in "\n".join(transcript(scr)[0]),
             "/context shows a report with token counts", scr or tm.capture())
        tm.send_text("/budget 50k")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"Budget:"), 5)
        t.ok(scr is not None, "/budget shows the budget", scr or tm.capture())
        tm.send_text("/budget lots")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"/budget takes tokens"), 5)
        t.ok(scr is not None and "/budget: /budget" not in scr,
             "/budget lots: the usage, naming /budget once", scr or tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 6. escape sequences from the model never reach the terminal ---------------------------
    evil = ("A\x1b]0;PWNED\x07B\x1b[2JC\x1b[6nD\x1bcE\x1b]52;c;ZXZpbA==\x07F"
            "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\G\x1b[31mRED\x1b[0m"
            "\u009d0;C1TITLE\u009c\u009b2J\u009b31mH\u0090q\u009c end")
    with ttlib.Tmux(100, 16, record=True) as tm:
        start(tm, srv, "reply=" + q(evil))
        title0 = tm.tmux("display", "-p", "-t", tm.target, "#{pane_title}").strip()
        tm.send_text("evil")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        t.ok(done is not None, "the hostile answer completes", tm.capture())
        title1 = tm.tmux("display", "-p", "-t", tm.target, "#{pane_title}").strip()
        t.ok(done is not None and title1 == title0,
             "OSC 0 / C1 OSC do not change the terminal title", (title0, title1))
        t.ok(done is not None and "PWNED" not in title1 and "C1TITLE" not in title1,
             "title not injected", title1)
        txt = done or ""
        t.ok("^[]0;PWNED^G" in txt, "OSC 0 shown as visible text", txt)
        t.ok("^[[2J" in txt and "^[c" in txt and "^[[6n" in txt,
             "ESC[2J, ESC c, ESC[6n shown as visible text", txt)
        t.ok("^[]52;c;ZXZpbA==" in txt and "^[]8;;" in txt, "OSC 52 and OSC 8 shown as text", txt)
        t.ok("<U+009B>" in txt and "<U+009D>" in txt, "8-bit C1 forms shown as <U+..>", txt)
        t.ok("\u258c evil" in txt and "Type a message" in txt, "the screen was not cleared", txt)
        # what reached the terminal, byte for byte (a capture shows what tmux made of it).
        # The answer streams in pieces of 4 characters, and a loaded machine draws them over
        # more than one frame: curses then writes "A^[]0" and ";PWNED^G..." apart, with the
        # status bar between them (a README run's recording of 2,043 bytes). A repaint
        # (Ctrl-L) writes the whole row at once; the frames before it are checked too.
        tm.send("C-l")
        rec = tm.recording(want=b"^[]0;PWNED^G")
        bad = ttlib.recording_hazards(rec)
        t.ok(done is not None and b"^[]0;PWNED^G" in rec and not bad and
             b"\x1b[31mRED" not in rec and b"\x1b[2JC" not in rec,
             "recorded output: no raw OSC 0/52/8, DCS, C1, clear or injected SGR",
             "; ".join(bad[:6]) + " (%d bytes)" % len(rec))
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 7. multi-line input: bracketed paste, Alt-Enter, Ctrl-J ------------------------------
    with ttlib.Tmux(60, 14) as tm:
        start(tm, srv, "")
        n0 = len(srv.requests())
        tm.tmux("set-buffer", "-b", "ttpaste", "line one\nline two\nline three")
        tm.tmux("paste-buffer", "-p", "-b", "ttpaste", "-t", tm.target)
        time.sleep(0.5)
        scr = tm.capture()
        t.ok("line one" in scr and "line three" in scr, "the pasted lines are in the input", scr)
        t.eq(len(srv.requests()), n0, "a bracketed paste with newlines sends nothing")
        tm.send("Enter")
        tm.wait_for("\u2713", 10)
        r = srv.requests()
        t.eq(r[-1]["body"]["messages"][-1]["content"] if len(r) > n0 else None,
             "line one\nline two\nline three", "Enter sends the pasted lines as one message")
        tm.send_text("a")
        tm.send("M-Enter")
        tm.send_text("b")
        tm.send("C-j")
        tm.send_text("c")
        time.sleep(0.3)
        t.eq(len(srv.requests()), n0 + 1, "Alt-Enter and Ctrl-J do not send")
        tm.send("Enter")
        deadline = time.monotonic() + 5
        while len(srv.requests()) < n0 + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = srv.requests()
        t.eq(r[-1]["body"]["messages"][-1]["content"] if len(r) > n0 + 1 else None, "a\nb\nc",
             "Alt-Enter and Ctrl-J insert newlines")
        # slash commands, completion, search
        tm.wait_for(re.compile(r"\u2713[^\n]*\n(.*\n)*.*\u2713"), 5)
        # every command Tab lists can be seen: a list wider than the window goes above the
        # prompt, wrapped (until 2026-12 it was cut at the window's edge)
        tm.send_text("/")
        tm.send("Tab")
        tm.send("Tab")
        scr = tm.wait_for("completions: see above", 3) or tm.capture()
        flat = " ".join(scr.split())
        t.ok(all(c in flat for c in ("/attach", "/quit", "/theme", "/use-local", "/x")) and
             "completions: see above" in flat, "Tab Tab on '/': every command is on screen",
             scr)
        tm.send("C-u")
        # /attach of the chat's own terminal, or of a device: refused at once, the chat goes
        # on (a review found /attach /dev/stdin froze it in a read of the terminal)
        tm.send_text("/attach /dev/stdin")
        tm.send("Enter")
        scr = tm.wait_for("read only from -f on the command line", 3) or tm.capture()
        tm.send("C-u")  # a refused command stays in the prompt, to be mended
        tm.send_text("/attach /dev/tty")
        tm.send("Enter")
        scr2 = tm.wait_for("/dev/tty: not a regular file", 3) or tm.capture()
        tm.send("C-u")
        t.ok("read only from -f" in scr and "/dev/tty: not a regular file" in scr2,
             "/attach of a terminal or a device: refused, the chat goes on", scr2)
        tm.send_text("/mo")
        tm.send("Tab")
        t.ok(tm.wait_for(re.compile(r"\u203a /model *\n"), 3) is not None,
             "Tab completes /mo to /model",
             tm.capture())
        tm.send_text("other-model")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"^ idle .*other-model", re.M), 3) is not None and
             "other-model" in status_line(tm.capture()), "/model switches the model",
             tm.capture())
        tm.send_text("/retry")
        tm.send("Enter")
        deadline = time.monotonic() + 5
        while len(srv.requests()) < n0 + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = srv.requests()
        t.ok(len(r) == n0 + 3 and r[-1]["body"]["model"] == "other-model" and
             r[-1]["body"]["messages"][-1]["content"] == "a\nb\nc" and
             len(r[-1]["body"]["messages"]) == len(r[-2]["body"]["messages"]),
             "/retry sends the last prompt again, without the old answer",
             [x["body"] for x in r[-2:]])
        tm.wait_for("\u2713", 5)
        time.sleep(0.3)
        tm.send("C-s")
        tm.send_text("line")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"hit \d+/\d+"), 3) is not None, "Ctrl-S searches the "
             "transcript", tm.capture())
        m = re.search(r"hit (\d+)/(\d+)", tm.capture())
        tm.send("n")
        if m:  # wait for another hit number (the same count): a wrong one still fails below
            tm.wait_for(re.compile(r"hit (?!%s/)\d+/%s\b" % (m.group(1), m.group(2))), 3)
        m2 = re.search(r"hit (\d+)/(\d+)", tm.capture())
        t.ok(m and m2 and m.group(2) == m2.group(2) and m.group(1) != m2.group(1),
             "n moves to another hit", tm.capture())
        tm.send("Escape")
        tm.send_text("/copy")
        tm.send("Enter")
        t.ok(tm.wait_for("copy.txt", 3) is not None, "/copy saves the last answer",
             tm.capture())
        tm.send_text("/new")
        tm.send("Enter")
        tm.wait_for("New conversation", 3)
        tm.send_text("fresh")
        tm.send("Enter")
        deadline = time.monotonic() + 5
        while len(srv.requests()) < n0 + 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = srv.requests()
        t.eq([m["content"] for m in r[-1]["body"]["messages"]] if len(r) > n0 + 3 else None,
             ["fresh"], "/new starts an empty conversation")
        tm.send_text("/help")
        tm.send("Enter")
        t.ok(tm.wait_for("/quit: leave", 3) is not None, "/help lists the commands",
             tm.capture())
        tm.send_text("/quit")
        tm.send("Enter")
        t.eq(tm.wait_exit(5), 0, "/quit quits with status 0")

    # --- 8. no key: the chat opens, says what to set, sends nothing; a local server is offered --
    with ttlib.Tmux(80, 24) as tm:
        start(tm, None, "", {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None,
                             "TOKTERM_LOCAL_PROBE": NO_KEY_PROBE})
        scr = tm.wait_for(re.compile(r"OPENAI_API_KEY[\s\S]*^ no API key", re.M), 5)
        t.ok(scr is not None and "OPENAI_BASE_URL" in scr and "profile" in scr,
             "no key: the screen says what to set", scr or tm.capture())
        t.ok(scr is not None and "no API key" in status_line(scr), "no key: status says so",
             status_line(scr or tm.capture()))
        t.ok(scr is not None and "press Enter" not in scr, "no local server: none offered",
             scr or tm.capture())
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "no key: Ctrl-D quits")
    n0 = len(srv.requests())
    with ttlib.Tmux(80, 24) as tm:
        start(tm, None, "", {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None,
                             "TOKTERM_LOCAL_PROBE": "Ollama=" + srv.base()})
        scr = tm.wait_for("press Enter", 5)
        t.ok(scr is not None and srv.base() in scr, "no key: the local server is offered",
             scr or tm.capture())
        tm.send_text("secret question")
        tm.send("Enter")
        time.sleep(0.5)
        t.eq(len(srv.requests()), n0, "no key: nothing is sent")
        tm.send("C-c")
        tm.send("Enter")
        t.ok(tm.wait_for("Using the local", 3) is not None, "Enter switches to the local server",
             tm.capture())
        tm.send_text("local question")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        r = srv.requests()
        t.ok(done is not None and len(r) == n0 + 1 and
             r[-1]["body"]["messages"][-1]["content"] == "local question" and
             "authorization" not in r[-1]["headers"], "the local server answers, without a key",
             r[-1:] if r else None)
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 9. themes: NO_COLOR, 8 colours, a malformed theme ------------------------------------
    with ttlib.Tmux(60, 10) as tm:
        start(tm, srv, "reply=**bold**%20and%20%60code%60", {"NO_COLOR": "1"})
        tm.send_text("c")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        esc = tm.capture(escapes=True)
        t.ok(done is not None and not colours(esc) and "\x1b[1m" in esc,
             "NO_COLOR: attributes only, no colours", repr(esc[:300]))
        tm.send("C-d")
        tm.wait_exit(5)
    with ttlib.Tmux(60, 10, term="xterm") as tm:
        start(tm, srv, "reply=**bold**%20and%20%60code%60")
        tm.send_text("c")
        tm.send("Enter")
        done = tm.wait_for("\u2713", 10)
        esc = tm.capture(escapes=True)
        cols = colours(esc)
        t.ok(done is not None and cols and all(30 <= c <= 37 or 40 <= c <= 47 for c in cols),
             "8-colour terminal: only the 8 basic colours", repr(esc[:300]))
        tm.send("C-d")
        tm.wait_exit(5)
    home = ttlib.make_home()
    tdir = os.path.join(home, ".config", "tokterm", "themes")
    os.makedirs(tdir)
    with open(os.path.join(tdir, "broken.theme"), "w") as f:
        f.write("[theme]\nname = broken\nheading = purpl\n")
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write("theme = broken\n")
    with ttlib.Tmux(80, 12) as tm:
        scr = start(tm, srv, "", {"HOME": home})
        scr = tm.wait_for("purpl", 3)
        t.ok(scr is not None and "broken.theme" in scr, "a malformed theme is reported "
             "(file:line)", scr or tm.capture())
        t.ok(scr is not None and "F1 help" in scr, "and the chat runs with the default theme",
             scr)
        tm.send("C-d")
        tm.wait_exit(5)

    # --- 10. $EDITOR, /theme, /profile -------------------------------------------------------
    home = ttlib.make_home()
    editor = os.path.join(home, "editor.sh")
    with open(editor, "w") as f:
        f.write("#!/bin/sh\nprintf 'from the editor\\nsecond line\\n' > \"$1\"\n")
    os.chmod(editor, 0o755)
    cfgdir = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfgdir)
    with open(os.path.join(cfgdir, "config"), "w") as f:
        f.write("[first]\nbase_url = %s\nmodel = model-one\n\n[second]\nbase_url = %s\n"
                "model = model-two\n[mcp tools]\ncommand = /nonexistent/server\n"
                "[role terse]\nsystem = Be terse.\n" % (srv.base(), srv.base()))
    with ttlib.Tmux(80, 20) as tm:
        start(tm, None, "", {"HOME": home, "EDITOR": editor, "TOKTERM_PROFILE": "first",
                             "OPENAI_BASE_URL": None})
        n0 = len(srv.requests())
        tm.send_text("draft")
        tm.send("C-x", "C-e")
        scr = tm.wait_for("second line", 5)
        t.ok(scr is not None and "draft" not in scr.split("\n")[-2], "Ctrl-X Ctrl-E: the "
             "editor's text replaces the prompt", scr or tm.capture())
        t.eq(len(srv.requests()), n0, "the edited prompt is not sent by itself")
        tm.send("Enter")
        tm.wait_for("\u2713", 5)
        r = srv.requests()
        t.ok(len(r) == n0 + 1 and r[-1]["body"]["messages"][-1]["content"] ==
             "from the editor\nsecond line" and r[-1]["body"]["model"] == "model-one",
             "Enter sends it (profile first)", r[-1]["body"] if r else None)
        tm.send_text("/profile se")
        tm.send("Tab")
        t.ok(tm.wait_for(re.compile(r"/profile second *\n"), 3) is not None,
             "Tab completes profile names", tm.capture())
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"^ idle .*second/model-two", re.M), 3) is not None and
             "second/model-two" in status_line(tm.capture()),
             "/profile switches profile and model", tm.capture())
        tm.send_text("again")
        tm.send("Enter")
        deadline = time.monotonic() + 5
        while len(srv.requests()) < n0 + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = srv.requests()
        t.ok(len(r) == n0 + 2 and r[-1]["body"]["model"] == "model-two" and
             [m["content"] for m in r[-1]["body"]["messages"]] ==
             ["from the editor\nsecond line", "from the editor\nsecond line", "again"],
             "the conversation carries over to the new profile",
             r[-1]["body"] if r else None)
        tm.wait_for("\u2713", 5)
        tm.send_text("/profile nosuch")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"^! .*nosuch", re.M), 3) is not None and
             "second/model-two" in status_line(tm.capture()),
             "an unknown profile is refused, the current one stays", tm.capture())
        tm.send_text("/profile")
        tm.send("Enter")
        scr = tm.wait_for(re.compile(r"Available: first second *\n"), 3)
        t.ok(scr is not None, "/profile lists the profiles, not the [mcp] or [role] sections",
             tm.capture())
        tm.send_text("/theme light")
        tm.send("Enter")
        t.ok(tm.wait_for("Theme light", 3) is not None, "/theme switches the theme",
             tm.capture())
        tm.send_text("/theme nosuch")
        tm.send("Enter")
        t.ok(tm.wait_for(re.compile(r"theme 'nosuch' not found"), 3) is not None,
             "an unknown theme is reported", tm.capture())
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "quits")

    # --- 11. tiny terminals make progress -----------------------------------------------------
    with ttlib.Tmux(4, 3) as tm:
        start(tm, srv, "reply=" + q("中文ab"))
        tm.send_text("x")
        tm.send("Enter")
        time.sleep(0.6)
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "a 4x3 terminal works and quits cleanly")

    # --- 12. counting tokens stays off the drawing path ------------------------------------
    # (issue 14) --trace writes "T <answer bytes> <texts>" after each frame: what the frame gave
    # the token counter. A model of another tokenizer (our count is needed for the history):
    # the answer is counted between frames, so no frame counts anything. A server that sends
    # no usage: the status bar's count after the answer is the exact count of the history.
    def count(text):
        r = subprocess.run([ttlib.tokterm_path(), "count", "--encoding", "o200k_base"],
                           input=text.encode("utf-8"), stdout=subprocess.PIPE,
                           env=ttlib.clean_env(), timeout=30)
        return int(r.stdout)

    def counted_run(spec, args, trace, settled):
        """The chat's screen once its status bar shows settled (a regex), or after 10 s
        without it: the count after the end comes between frames, later on a loaded machine
        (a README run's 0.5 s once saw it missing)."""
        with ttlib.Tmux(100, 24) as tm:
            start(tm, srv, spec, args=args + ("--trace", trace))
            tm.send_text("count me")
            tm.send("Enter")
            tm.wait_for("\u2713", 10)
            scr = tm.wait_for(settled, 10) or tm.capture()
            tm.send("C-d")
            tm.wait_exit(5)
        lines = open(trace).read().split("\n")
        frames = [ln for ln in lines if ln.startswith("F ")]
        fed = [tuple(int(x) for x in ln.split()[1:]) for ln in lines if ln.startswith("T ")]
        return scr, frames, fed

    reply = ("Counting as it streams: the status bar learns the answer's tokens between "
             "frames, never while drawing one. ") * 5
    tdir = ttlib.tempdir("tt-tui-trace-")
    scr, frames, fed = counted_run("reply=%s,delay_ms=4" % q(reply),
                                   ("--model", "other-tokenizer-model"),
                                   os.path.join(tdir, "approx"), re.compile(r"ctx ~\d+/"))
    t.ok(len(frames) >= 3 and len(fed) == len(frames) and not any(a or b for a, b in fed),
         "no frame tokenises (%d frames; answer bytes, texts counted by frames: %d, %d)"
         % (len(frames), sum(a for a, _ in fed), sum(b for _, b in fed)),
         [x for x in zip(frames, fed) if x[1] != (0, 0)][:10])
    t.ok(re.search(r"ctx ~\d+/", status_line(scr)) is not None,
         "and the count is shown (an estimate: another tokenizer)", status_line(scr))
    want = 3 + count("user") + count("count me") + 3 + count("assistant") + count(reply) + 3
    scr, frames, fed = counted_run("reply=%s,delay_ms=4,usage_json=null" % q(reply),
                                   ("--no-usage",), os.path.join(tdir, "exact"),
                                   re.compile(r"ctx %d/" % want))
    m = re.search(r"ctx (~?)(\d+)/", status_line(scr))
    t.ok(m is not None and m.group(1) == "" and int(m.group(2)) == want,
         "no usage: the status bar shows the exact count of the history (%d)" % want,
         status_line(scr))
    t.ok(not any(a or b for a, b in fed), "and no frame tokenises",
         [x for x in zip(frames, fed) if x[1] != (0, 0)][:10])

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-6000:])
t.diag("tmux tests took %.1f s" % (time.monotonic() - T0))
sys.exit(t.done())
