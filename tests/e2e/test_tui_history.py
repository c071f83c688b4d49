#!/usr/bin/env python3
"""End-to-end tests of the conversation browser (F2, /history): the real binary in a private
tmux against the fake server and a database made by scripted runs (plus one conversation of
10,000 messages written with sqlite3). Prints TAP; skips cleanly when tmux is missing."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

BIG = 10000
EVIL_ANSWER = ("evil answer A\x1b]0;pwned\x07B\x1b[2JC\x1b[31mRED\x1b[0m D\x1b]52;c;ZXZpbA==\x07 "
               "\u009b2J \u202eRLO\u202c \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ "
               "\x1bP1$r\x1b\\ \u009d0;C1TITLE\u009c \u2066iso\u2069 end")
# (the browser's title column shows the first 54 columns: the rest is checked in the view)
EVIL_PROMPT = ("nasty \x1b]0;titlepwned\x07 \x1b[2J \u202eRLO\u202c \u009d0;c1\u009c "
               "\x1b]52;c;dGl0bGU=\x07 \x1bP1$r\x1b\\ here")


def q(text):
    return urllib.parse.quote(text, safe="")


STDERR = os.path.join(ttlib.tempdir("tt-hist-stderr-"), "stderr")


def start(tm, env, args):
    """Run tokterm in tm; its stderr (nothing, unless a sanitizer reports) goes to STDERR."""
    e = dict(env)
    home = e.pop("HOME", None)
    e["TT_TEST_STDERR"] = STDERR
    tm.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()] +
           list(args), ttlib.clean_env(home=home, env=e))
    # the whole first frame: "F1" is in its first notice too, the prompt is its last row
    return tm.wait_for(re.compile("F1 help[\\s\\S]*\u203a"), 10)


def ls(db, home):
    rc, out, err = ttlib.run_tokterm(["--db", db, "ls"], home=home)
    return out.decode("utf-8", "replace")


def ls_ids(db, home):
    return {int(line.split()[0]): line for line in ls(db, home).splitlines()[1:] if line.strip()}


def msgs_of(db, home, cid):
    """MSGS of conversation cid in tokterm ls (ID UPDATED(date time) MSGS MODEL TITLE)."""
    line = ls_ids(db, home).get(cid)
    return int(line.split()[3]) if line else None


def conv_id(db, home, word):
    for cid, line in ls_ids(db, home).items():
        if word in line:
            return cid
    return None


def no_raw(tm, must_show, name):
    """Check the bytes tokterm wrote to the terminal (the recording, before tmux interprets
    them: a capture can never show a raw sequence): no OSC, DCS, C1 or bidi control; and
    must_show (bytes), the neutralised text, is there, so the recording is the real one."""
    rec = b""
    for m in must_show:  # the recording lags behind the screen: wait for each
        rec = tm.recording(want=m)
    bad = ttlib.recording_hazards(rec)
    t.ok(rec and not bad, name + ": no raw OSC, DCS, C1 or bidi in the bytes written",
         "; ".join(bad[:6]) + " (%d bytes recorded)" % len(rec))
    t.ok(all(m in rec for m in must_show), name + ": the recording holds the text shown",
         [m for m in must_show if m not in rec])


def settle(tm, pattern, timeout=5.0):
    """The screen once pattern is on it and the frame that drew it has been written whole:
    tmux can show the first rows of a frame before its last ones, so wait until two captures
    60 ms apart agree (at most 1 s more)."""
    scr = tm.wait_for(pattern, timeout)
    if scr is None:
        return tm.capture()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        time.sleep(0.06)
        again = tm.capture()
        if again == scr:
            break
        scr = again
    return scr


def trace_records(path, what):
    out = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 4 and p[0] == "B" and p[1] == what:
                    out.append([float(x) for x in p[2:]])
    except OSError:
        pass
    return out


def make_big(db):
    """A conversation of BIG messages (markdown answers), newest of all, written directly."""
    con = sqlite3.connect(db)
    now = int(time.time())
    with con:
        cur = con.execute("INSERT INTO conversations(title, model, created, updated) "
                          "VALUES(?,?,?,?)", ("the huge conversation", "gpt-4o", now, now + 5))
        cid = cur.lastrowid
        rows = []
        for k in range(BIG):
            if k % 2 == 0:
                txt = "question %d about the topic" % k
            else:
                txt = ("answer %d\n\n## heading %d\n\nsome text with **bold** and `code` and a "
                       "longer sentence that wraps on a narrow terminal window.\n\n- one\n- two"
                       "\n\n```c\nint x = %d;\n```" % (k, k, k))
            if k == 0:
                txt = "bigstartmarker " + txt
            if k == BIG - 1:
                txt = "bigendmarker " + txt
            rows.append((cid, "user" if k % 2 == 0 else "assistant", now, "gpt-4o", txt))
        con.executemany("INSERT INTO messages(conversation_id, role, created, model, content) "
                        "VALUES(?,?,?,?,?)", rows)
    con.close()
    return cid


if not ttlib.Tmux.available():
    t.skip("tmux tests", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

# The recorder can fail: raw sequences written by a program are in its recording.
with ttlib.Tmux(40, 5, record=True) as tm:
    tm.run(["printf", "plain \\033]0;T\\007 \\033]52;c;eA==\\007 \\033P1$r\\033\\\\ "
            "\\302\\233 \\342\\200\\256 \\233 done\\n"])
    tm.wait_exit(5)
    found = " ".join(ttlib.recording_hazards(tm.recording(want=b"done")))
    t.ok(all(w in found for w in ("OSC sequence", "DCS sequence", "C1 control U+009B",
                                  "bidi control U+202E", "raw 8-bit C1 byte 0x9b")),
         "the output recorder sees raw OSC, DCS, C1 and bidi that a capture cannot", found)

T0 = time.monotonic()
home = ttlib.make_home()
db = os.path.join(home, "hist.db")
trace = os.path.join(home, "trace")

with ttlib.FakeServer() as srv:
    def scripted(spec, prompts):
        args = ["--db", db]
        for p in prompts:
            args += ["-p", p]
        return ttlib.run_tokterm(args, env={"OPENAI_BASE_URL": srv.base(spec)}, home=home)

    made = [
        scripted("reply=" + q("Zebras cross the Mara river every year."),
                 ["tell me about the zebra migration"]),
        scripted("reply=" + q("Flour, eggs and milk."), ["a recipe for pancakes"]),
        scripted("reply=" + q("I will be renamed."), ["rename me please"]),
        scripted("reply=" + q("I will be deleted."), ["delete me please"]),
        scripted("reply=" + q(EVIL_ANSWER), [EVIL_PROMPT]),
    ]
    t.ok(all(rc == 0 for rc, _, _ in made), "five conversations saved by scripted runs",
         [m for m in made if m[0] != 0])
    zebra = conv_id(db, home, "zebra")
    pancakes = conv_id(db, home, "pancakes")
    t0 = time.monotonic()
    big = make_big(db)
    t.diag("made a %d-message conversation in %.1f s" % (BIG, time.monotonic() - t0))
    ids = ls_ids(db, home)
    t.eq(len(ids), 6, "six conversations in the database")

    env = {"HOME": home, "OPENAI_BASE_URL": srv.base()}
    with ttlib.Tmux(100, 30, record=True) as tm:
        scr = start(tm, env, ["--db", db, "--trace", trace])
        t.ok(scr is not None and "F1 help" in scr, "the chat opens", scr or tm.capture())
        before = tm.capture()
        title0 = tm.tmux("display", "-p", "-t", tm.target, "#{pane_title}").strip()

        # --- F2 opens the list, newest first ---
        tm.send("F2")
        scr = settle(tm, "Conversations (6)")
        t.ok("Conversations (6)" in scr, "F2 opens the browser with the six conversations", scr)
        order = [int(m.group(1)) for m in re.finditer(r"^.(\s*\d+)  ", scr, re.M)]
        t.eq(order, list(ids.keys()), "newest first, as tokterm ls lists them")
        t.eq(order[0], big, "the conversation updated last is first")
        t.ok("10000" in scr and "the huge conversation" in scr and "a recipe for pancakes" in scr,
             "rows show title and message count", scr)
        t.ok(re.search(r"\d+[mhd] ago|just now", scr) is not None, "rows show when", scr)
        t.ok("^[]0;titlepwned^G" in scr and "^[[2J" in scr and "<U+202E>RLO<U+202C>" in scr,
             "escape sequences and bidi controls in a saved title are shown neutralised", scr)
        no_raw(tm, [b"^[]0;titlepwned^G", b"<U+202E>RLO<U+202C>"], "the browser's titles")
        # --- q closes and restores the chat exactly ---
        tm.send("q")
        time.sleep(0.4)
        t.eq(tm.capture(), before, "q closes the browser and restores the chat screen")
        tm.send("F2")
        settle(tm, "Conversations (6)")
        tm.send("Escape")
        time.sleep(0.4)
        t.eq(tm.capture(), before, "so does Esc")

        # --- /history, live search with a highlighted snippet ---
        tm.send_text("/history")
        tm.send("Enter")
        t.ok("Conversations (6)" in settle(tm, "Conversations (6)"), "/history opens it")
        tm.send("/")
        tm.send_text("zebra")
        scr = settle(tm, "1 conversation matches")
        t.ok("1 conversation matches" in scr and "tell me about the zebra migration" in scr,
             "typing a search shows the matching conversation (live)", scr)
        t.ok("a recipe for pancakes" not in scr, "and only it", scr)
        esc = tm.capture(escapes=True)
        t.ok(re.search(r"\x1b\[[0-9;]*48;5;220[0-9;]*m(\x1b\[[0-9;]*m)*zebra", esc) is not None,
             "the match in the snippet is drawn in the search-hit style", repr(esc[:1500]))
        t.ok("[zebra]" not in scr and "\ufffd" not in scr and "\u00ff" not in scr,
             "no raw markers reach the terminal", scr)
        # FTS syntax never shows an SQL error
        bad = []
        for query in ['"', 'AND OR NOT', 'NEAR(a b)', '*', 'a"b', '(zeb', 'col:val', 'x -y ^z',
                      "'; DROP TABLE messages; --"]:
            tm.send("C-u")
            tm.send_text(query)
            time.sleep(0.25)
            scr = tm.capture()
            if re.search(r"fail|error|syntax|fts5|SQL", scr, re.I) or "match" not in scr:
                bad.append((query, scr))
        t.eq(bad, [], "FTS syntax in a query never shows an error")
        # an OR still being typed keeps the last results, with the hint (until 2026-12 the
        # list went blank); the other side typed, both match
        tm.send("C-u")
        tm.send_text("zebra")
        settle(tm, "1 conversation matches")
        tm.send_text(" OR")
        scr = settle(tm, "OR needs")
        t.ok("OR needs a word" in scr and "tell me about the zebra migration" in scr,
             "an unfinished OR: the last results stay, with the hint", scr)
        tm.send_text(" pancakes")
        scr = settle(tm, "2 conversations match")
        t.ok("2 conversations match" in scr and "a recipe for pancakes" in scr and
             "zebra migration" in scr, "its other side typed: either matches", scr)
        t.eq(len(ls_ids(db, home)), 6, "and the queries changed nothing")
        tm.send("C-u")
        tm.send_text("zebra")
        settle(tm, "1 conversation matches")
        tm.send("Enter")  # leave the field, keep the hits
        time.sleep(0.2)

        # --- Enter opens it read-only ---
        tm.send("Enter")
        scr = settle(tm, "READ-ONLY")
        t.ok("READ-ONLY" in scr and "r resume" in scr and "Esc back" in scr,
             "Enter opens it read-only; the header says so and names the keys", scr)
        t.ok("Zebras cross the Mara river every year." in scr and
             "\u258c tell me about the zebra migration" in scr,
             "the messages are shown like the chat shows them", scr)
        # --- r resumes it; a prompt carries the old messages ---
        n0 = len(srv.requests())
        tm.send("r")
        scr = settle(tm, "Continuing conversation %d" % zebra)
        t.ok("Continuing conversation %d" % zebra in scr and "F1 help" in scr,
             "r resumes it in the chat", scr)
        tm.send_text("and the wildebeest?")
        tm.send("Enter")
        settle(tm, re.compile(r"wildebeest\?\n(.*\n)*.*\u2713"), 10)
        r = srv.requests()
        msgs = [(m["role"], m["content"]) for m in r[-1]["body"]["messages"]] if len(r) > n0 else []
        t.eq(msgs, [("user", "tell me about the zebra migration"),
                    ("assistant", "Zebras cross the Mara river every year."),
                    ("user", "and the wildebeest?")],
             "the request after resuming carries the saved messages")
        t.eq(msgs_of(db, home, zebra), 4, "the new exchange is saved into the resumed "
             "conversation")

        # --- rename: e, type, Enter; Esc cancels ---
        tm.send_text("/history pancakes")
        tm.send("Enter")
        scr = settle(tm, "1 conversation matches")
        t.ok("1 conversation matches: pancakes" in scr, "/history TEXT opens it searching", scr)
        tm.send("e")
        settle(tm, "title of %d" % pancakes)
        tm.send("Escape")
        scr = settle(tm, "not renamed")
        t.ok("not renamed" in scr and "a recipe for pancakes" in ls(db, home),
             "Esc cancels a rename", scr)
        tm.send("e")
        settle(tm, "title of %d" % pancakes)
        tm.send("C-u")
        tm.send_text("Breakfast ideas")
        tm.send("Enter")
        scr = settle(tm, "conversation %d renamed" % pancakes)
        t.ok("conversation %d renamed" % pancakes in scr, "Enter saves the new title", scr)
        t.ok("Breakfast ideas" in ls_ids(db, home).get(pancakes, ""),
             "tokterm ls shows the new title", ls(db, home))
        t.ok("Breakfast ideas" in scr, "the browser shows it too", scr)

        # --- delete: asks first; n keeps it, y deletes it ---
        victim = conv_id(db, home, "delete me")
        tm.send("Escape")  # the whole list again
        settle(tm, "Conversations (6)")
        tm.send("/")
        tm.send_text("deleted")
        settle(tm, "1 conversation matches")
        tm.send("Enter")
        tm.send("d")
        scr = settle(tm, "y/N")
        t.ok("Delete conversation %d 'delete me please' (2 messages)? y/N" % victim in scr,
             "d asks: Delete conversation N 'title' (M messages)? y/N", scr)
        tm.send("n")
        scr = settle(tm, "not deleted")
        t.ok("not deleted" in scr and victim in ls_ids(db, home), "n does not delete", scr)
        tm.send("d")
        settle(tm, "y/N")
        tm.send("y")
        scr = settle(tm, "conversation %d deleted" % victim)
        t.ok("conversation %d deleted" % victim in scr, "y deletes", scr)
        t.ok(victim not in ls_ids(db, home), "tokterm ls no longer lists it", ls(db, home))

        # --- deleting the conversation open in the chat: the chat starts a new one ---
        tm.send("Escape")
        scr = settle(tm, "Conversations (5)")
        t.ok("Conversations (5)" in scr and "\u25cf" in scr,
             "the list has five; the one open in the chat is marked", scr)
        tm.send("/")
        tm.send_text("wildebeest")
        settle(tm, "1 conversation matches")
        tm.send("Enter")
        tm.send("d")
        settle(tm, "y/N")
        tm.send("y")
        settle(tm, "conversation %d deleted" % zebra)
        tm.send("q")
        scr = settle(tm, "was deleted")
        t.ok("Conversation %d was deleted" % zebra in scr and "wildebeest" not in scr,
             "deleting the open conversation leaves a new, empty chat", scr)
        n0 = len(srv.requests())
        tm.send_text("fresh start")
        tm.send("Enter")
        settle(tm, re.compile(r"fresh start\n(.*\n)*.*\u2713"), 10)
        r = srv.requests()
        t.eq([m["content"] for m in r[-1]["body"]["messages"]] if len(r) > n0 else None,
             ["fresh start"], "the next prompt starts a new conversation")
        t.ok(zebra not in ls_ids(db, home) and len(ls_ids(db, home)) == 5,
             "saved as a new conversation", ls(db, home))

        # --- saved escape sequences are shown neutralised ---
        tm.send("F2")
        settle(tm, "Conversations")
        tm.send("/")
        tm.send_text("evil answer")
        # the header can be on screen a moment before the rows of the same frame: wait for both
        scr = settle(tm, re.compile(r"1 conversation matches(.|\n)*\^\[\]0;pwned\^G"))
        t.ok("1 conversation matches" in scr and "^[]0;pwned^G" in scr,
             "the snippet shows the escape sequence as text", scr)
        tm.send("Enter")
        tm.send("Enter")
        scr = settle(tm, "READ-ONLY")
        t.ok("^[]0;pwned^G" in scr and "^[[2J" in scr and "^[[31mRED" in scr and
             "<U+009B>" in scr and "<U+202E>RLO<U+202C>" in scr and "^[]8;;http" in scr and
             "^[P1$r" in scr and "<U+009D>0;C1TITLE<U+009C>" in scr and
             "<U+2066>iso<U+2069>" in scr and "^[]52;c;ZXZpbA==^G" in scr and
             "<U+009D>0;c1<U+009C>" in scr and "^[]52;c;dGl0bGU=^G" in scr and
             "^[P1$r^[\\ here" in scr,
             "the read-only view shows escape sequences, C1 and bidi controls as text", scr)
        no_raw(tm, [b"^[]0;pwned^G", b"<U+2066>iso<U+2069>", b"^[]8;;http"],
               "the saved conversation's text")
        title1 = tm.tmux("display", "-p", "-t", tm.target, "#{pane_title}").strip()
        t.eq(title1, title0, "the terminal title is unchanged")

        # --- the 10,000-message conversation: open and scroll ---
        tm.send("Escape")
        tm.send("/")
        tm.send("C-u")
        tm.send_text("bigstartmarker")
        settle(tm, "1 conversation matches")
        tm.send("Enter")
        tm.send("Enter")
        scr = settle(tm, re.compile(r"messages? 1(-\d+)? of 10000"), 10)
        t.ok(re.search(r"messages? 1(-\d+)? of 10000", scr) and "bigstartmarker" in scr,
             "a 10,000-message conversation opens at its first message (the hit)", scr)
        tm.send("End")
        scr = settle(tm, "of 10000", 5)
        scr = settle(tm, "bigendmarker", 5)
        t.ok("bigendmarker" in scr and re.search(r"\d+-10000 of 10000", scr),
             "End shows its last messages", scr)
        for _ in range(10):
            tm.send("PPage")
        time.sleep(0.5)
        scr = tm.capture()
        m = re.search(r"messages? (\d+)(?:-\d+)? of 10000", scr)
        t.ok(m and 9900 < int(m.group(1)) < 10000, "PgUp scrolls back", scr)
        for _ in range(30):
            tm.send("Up")
        tm.send("Home")
        scr = settle(tm, re.compile(r"messages? 1(-\d+)? of 10000"), 5)
        t.ok(re.search(r"messages? 1(-\d+)? of 10000", scr), "Home goes to the top", scr)
        # resize while it is open
        tm.resize(70, 20)
        time.sleep(0.5)
        scr = tm.capture()
        rows = scr.split("\n")
        t.ok("READ-ONLY" in rows[0] and re.search(r"of 10000", scr) and
             all(len(r) <= 70 for r in rows), "a resize redraws it at the new size", scr)
        tm.resize(100, 30)
        time.sleep(0.3)
        opens = trace_records(trace, "open")
        scrolls = trace_records(trace, "scroll")
        if opens:
            k, loaded, built, done = opens[-1]
            t.diag("open 10,000 messages: load %.1f ms, build %.1f ms, first frame %.1f ms"
                   % ((loaded - k) * 1e3, (built - loaded) * 1e3, (done - k) * 1e3))
            t.ok(done - k < 3.0, "open to first frame under 3 s (%.0f ms)" % ((done - k) * 1e3))
        else:
            t.ok(False, "the trace has the open record")
        if scrolls:
            lat = sorted(s[1] - s[0] for s in scrolls)
            t.diag("scroll frames: %d, median %.2f ms, max %.2f ms"
                   % (len(lat), lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
            t.ok(lat[-1] < 0.5, "every scroll frame under 500 ms")
        else:
            t.ok(False, "the trace has scroll records")
        # --- r resumes it: the chat shows its newest 500 messages, says so at the top ---
        tm.send("r")
        scr = settle(tm, "Continuing conversation %d (5000 turns)" % big, 10)
        t.ok("Continuing conversation %d (5000 turns)" % big in scr and
             "bigendmarker" in scr, "r resumes the 10,000-message conversation", scr)
        tm.send("Home")
        scr = settle(tm, "earlier turns are not shown", 5)
        t.ok("4750 earlier turns are not shown here" in scr and "F2 opens the" in scr
             and "question 9500 about" in scr and "bigstartmarker" not in scr,
             "the chat shows the newest 500 and says where the rest is", scr)
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "quits with status 0")

    # --- resume is refused while an answer streams ---
    with ttlib.Tmux(100, 24) as tm:
        start(tm, {"HOME": home, "OPENAI_BASE_URL": srv.base("gen=4000,delay_ms=5")},
              ["--db", db])
        tm.send_text("stream please")
        tm.send("Enter")
        settle(tm, "tok50 ", 10)
        tm.send("F2")
        scr = settle(tm, "streaming in the chat")
        t.ok("an answer is streaming in the chat" in scr, "the browser says an answer streams",
             scr)
        tm.send("End")
        tm.send("r")
        scr = settle(tm, "still streaming")
        t.ok("an answer is still streaming" in scr and "Conversations" in scr,
             "r is refused while an answer streams", scr)
        tm.send("q")
        tm.send("Escape")
        scr = settle(tm, "cancelled")
        t.ok("cancelled" in scr, "the chat is back (Esc cancels the answer)", scr)
        tm.send("C-d")
        tm.wait_exit(5)

    # --- no store: /history and F2 say so ---
    with ttlib.Tmux(100, 20) as tm:
        start(tm, {"HOME": home, "OPENAI_BASE_URL": srv.base()}, ["--incognito"])
        tm.send_text("/history")
        tm.send("Enter")
        scr = settle(tm, "no conversation store")
        t.ok("no conversation store" in scr and "--incognito" in scr,
             "--incognito: /history says there is no store", scr)
        tm.send("F2")
        time.sleep(0.3)
        t.ok("Conversations" not in tm.capture(), "and F2 opens nothing", tm.capture())
        tm.send("C-d")
        tm.wait_exit(5)

    # --- the view lists a prompt's files under it, as the chat does (until 2026-12 it left
    # them out: what was sent with the prompt did not show) ---
    fhome = ttlib.make_home()
    fdb = os.path.join(fhome, "files.db")
    note = os.path.join(fhome, "notes.txt")
    with open(note, "w") as f:
        f.write("eleven byte")
    rc, _, _ = ttlib.run_tokterm(["--db", fdb, "-f", note, "-p", "read my notes"],
                                 env={"OPENAI_BASE_URL": srv.base()}, home=fhome)
    with ttlib.Tmux(100, 20) as tm:
        start(tm, {"HOME": fhome, "OPENAI_BASE_URL": srv.base()}, ["--db", fdb])
        tm.send_text("/history")
        tm.send("Enter")
        settle(tm, "Conversations (1)")
        tm.send("Enter")
        scr = settle(tm, "READ-ONLY")
        t.ok(rc == 0 and re.search(r"\u258c read my notes\n\s+\+ attached: \S*notes\.txt "
                                   r"\(text, 11 B\)", scr) is not None,
             "the read view lists a prompt's attached file under it", scr)
        tm.send("q")
        tm.send("C-d")
        tm.wait_exit(5)

    # --- /help documents it ---
    with ttlib.Tmux(120, 60) as tm:
        start(tm, {"HOME": home, "OPENAI_BASE_URL": srv.base()}, ["--db", db])
        tm.send("F1")
        scr = settle(tm, "/history")
        t.ok("F2" in scr and "/history" in scr, "/help lists F2 and /history", scr)
        tm.send("C-d")
        tm.wait_exit(5)

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-6000:])
t.diag("browser tests took %.1f s" % (time.monotonic() - T0))
sys.exit(t.done())
