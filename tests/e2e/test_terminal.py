#!/usr/bin/env python3
"""What reaches a terminal outside the chat: scripted output, --json, ls/show/search/export
and doctor, with stdout (or stderr) on a pseudo-terminal. Text from a server or the database
may hold C1 controls, DEL, escape sequences and bidi controls (U+202E reorders the rest of a
line: "Trojan Source"): on a terminal none of them may pass raw; JSON escapes them as \\uXXXX
(still JSON, same strings); text shows them as <U+202E> or caret notation. On a pipe or a
file every byte stays exactly as it came. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

# An answer with every kind of character that must not drive a terminal.
EVIL = ("safe start \u202eevil reversed\u202c \u2066iso\u2069 \u200fmark\u200e \u061calm "
        "c1 \u009b2J \u009d0;C1TITLE\u009c del \x7f esc \x1b]52;c;ZXZpbA==\x07 "
        "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1bP1$r\x1b\\ end")
EVIL_TITLE = "title \u202egnp.exe\u202c \u009b31m \x1b]0;pwned\x07 bidi"
VISIBLE = ["<U+202E>", "<U+202C>", "<U+2066>", "<U+2069>", "<U+200F>", "<U+200E>",
           "<U+061C>", "<U+009B>", "<U+009D>", "<U+009C>", "^?", "^[]52;c;", "^[]8;;",
           "^[P1$r"]


def q(text):
    return urllib.parse.quote(text, safe="")


def tty_safe(data, name):
    # search marks its hits in bold on a terminal: tokterm's own two sequences
    bad = ttlib.terminal_hazards(data.replace(b"\x1b[1m", b"").replace(b"\x1b[0m", b""))
    return t.ok(not bad, name + ": nothing raw that drives or reorders the terminal",
                "; ".join(bad[:8]) + "\n" + repr(data[:400]))


def visible(data, name, want=VISIBLE):
    text = data.decode("utf-8", "replace")
    missing = [v for v in want if v not in text]
    return t.ok(not missing, name + ": the controls are shown visibly", "missing %r in %r"
                % (missing, text[:600]))


def escaped_json(data, name, strings):
    """data is valid JSON whose text holds \\u escapes for the hazards; strings all occur in
    the decoded value."""
    text = data.decode("utf-8", "replace")
    try:
        json.loads(text)
        ok = True
    except ValueError as e:
        ok = False
        text = "%s\n%s" % (e, text)
    t.ok(ok, name + ": valid JSON", text[:400])
    low = text.lower()
    want = ["\\u202e", "\\u2066", "\\u200f", "\\u061c", "\\u009b", "\\u009d", "\\u007f"]
    t.ok(all(w in low for w in want), name + ": C1, DEL and bidi written as \\uXXXX",
         [w for w in want if w not in low])
    dump = json.dumps(json.loads(text)) if ok else ""
    t.ok(ok and all(json.dumps(s)[1:-1] in dump for s in strings),
         name + ": decodes to the same strings", dump[:400])


# --- the checker itself: ttlib.safe_stderr must catch every class, and pass clean text ------
HAZARDS = {"ESC": b"a\x1b[2J", "BEL": b"\x07", "CR": b"a\rb", "NUL": b"\x00", "BS": b"\x08",
           "DEL": b"\x7f", "C1 CSI as UTF-8": "\u009b".encode(), "C1 U+0080": "\u0080".encode(),
           "C1 U+009F": "\u009f".encode(), "raw 8-bit CSI": b"x\x9b2J",
           "raw 8-bit 0x80": b"\x80", "raw 8-bit OSC": b"\x9d0;t\x9c"}
HAZARDS.update(("bidi U+%04X" % cp, ("ab" + chr(cp) + "c").encode()) for cp in
               sorted(ttlib.BIDI_CONTROLS))
for name, data in HAZARDS.items():
    sub = ttlib.Tap()
    sub._line = lambda s: None  # a private Tap: only its verdict counts
    t.ok(not ttlib.safe_stderr(sub, data, name) and sub.failed == 1,
         "safe_stderr rejects %s" % name)
CLEAN = ("tokterm: tab\tand lf\n \u4f60\u597d \U0001F600 \ufffd <U+202E> ^[[2J "
         "\u00a0\u00e9 \u05e9\u05dc\u05d5\u05dd \u0633\u0644\u0627\u0645 \u200d\n").encode()
sub = ttlib.Tap()
sub._line = lambda s: None
t.ok(ttlib.safe_stderr(sub, CLEAN, "clean"), "safe_stderr passes clean text (TAB, LF, CJK, "
     "emoji, U+FFFD, visible forms, NBSP, Hebrew, Arabic, ZWJ)", ttlib.terminal_hazards(CLEAN))
t.ok(len(ttlib.BIDI_CONTROLS) == 12, "twelve bidi controls are checked")

home = ttlib.make_home()
db = os.path.join(home, "t.db")
with ttlib.FakeServer() as srv:
    base = srv.base("reply=" + q(EVIL))
    args = ["--db", db, "--base-url", base]

    # --- scripted text: a terminal sees the controls, a pipe gets every byte ----------------
    rc, out, err = ttlib.run_tokterm_tty(args + ["-p", EVIL_TITLE])
    t.eq(rc, 0, "scripted on a terminal: exit 0")
    tty_safe(out, "scripted text on a terminal")
    visible(out, "scripted text on a terminal")
    ttlib.safe_stderr(t, err, "scripted text on a terminal")
    rc, out, err = ttlib.run_tokterm(args + ["--no-save", "-p", "x"])
    t.ok(rc == 0 and out == (EVIL + "\n").encode(), "scripted text on a pipe: byte-exact",
         repr(out[:300]))

    # a CRLF split between two deltas ("abc\r" + "\ndef": the server sends 4 code points at
    # a time) is a line break, as it is within one delta; a lone CR is shown (the raw text:
    # --render never; test_render checks the rendered text)
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--render", "never", "--base-url",
                                          srv.base("delay_ms=60,reply=" + q("abc\r\ndef\rg\r")),
                                          "-p", "x"])
    t.ok(rc == 0 and out == b"abc\ndef^Mg^M\n", "a CRLF across deltas on a terminal: one line "
         "break, no ^M", repr(out))

    # --- reasoning on a terminal's stderr (stdout a pipe) ------------------------------------
    sse = "".join("data: %s\n\n" % json.dumps(c) for c in (
        {"choices": [{"index": 0, "delta": {"reasoning_content": EVIL}}]},
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})) + \
        "data: [DONE]\n\n"
    rsn = srv.base("ctype=text/event-stream,raw=" + q(sse))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--base-url", rsn, "--reasoning", "-p",
                                          "x"], ttys=(2,))
    t.ok(rc == 0 and out == b"ok\n" and b"safe start" in err,
         "--reasoning, stderr a terminal: the reasoning arrives", (rc, out, err[:200]))
    tty_safe(err, "--reasoning on a terminal's stderr")
    visible(err, "--reasoning on a terminal's stderr", ["<U+202E>", "<U+009B>", "^?"])

    # --- --json -------------------------------------------------------------------------------
    rc, out, err = ttlib.run_tokterm_tty(args + ["--no-save", "--json", "-p", "x"])
    t.eq(rc, 0, "--json on a terminal: exit 0")
    tty_safe(out, "--json on a terminal")
    escaped_json(out, "--json on a terminal", [EVIL])
    rc, pout, err = ttlib.run_tokterm(args + ["--no-save", "--json", "-p", "x"])
    t.ok(rc == 0 and "\u009b2J".encode() in pout and "\u202e".encode() in pout and
         b"\x7f" in pout and json.loads(pout)["content"] == EVIL,
         "--json on a pipe: the bytes cJSON writes (raw C1, DEL, bidi), as before",
         repr(pout[:300]))

    # --- the store: ls, show, search, export ----------------------------------------------------
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE conversations SET title = ?, model = ?", (EVIL_TITLE,
                                                                      "gpt\u202e-4o\u009b"))
    con.close()
    for sub in (["ls"], ["show", "1"], ["search", "evil"], ["search", "reversed"],
                ["export", "1"], ["export", "1", "--format", "md"], ["rename", "1",
                                                                    EVIL_TITLE]):
        rc, out, err = ttlib.run_tokterm_tty(["--db", db] + sub)
        name = "tokterm %s on a terminal" % sub[0] + (" " + sub[-1] if sub[0] == "export" else "")
        t.eq(rc, 0, name + ": exit 0")
        tty_safe(out, name)
        ttlib.safe_stderr(t, err, name)
        visible(out, name, ["<U+202E>", "<U+009B>", "^[]0;pwned^G"] +
                (VISIBLE if sub[0] in ("show", "export") else []))
    rc, out, err = ttlib.run_tokterm(["--db", db, "ls"])
    t.ok(rc == 0 and EVIL_TITLE.encode() in out, "ls on a pipe: the title byte-exact",
         repr(out[:300]))
    rc, out, err = ttlib.run_tokterm(["--db", db, "show", "1"])
    t.ok(rc == 0 and EVIL.encode() in out and EVIL_TITLE.encode() in out,
         "show on a pipe: byte-exact", repr(out[:300]))
    rc, out, err = ttlib.run_tokterm(["--db", db, "export", "1", "--format", "md"])
    t.ok(rc == 0 and EVIL.encode() in out, "export md to a file: byte-exact", repr(out[:300]))

    for sub in (["export", "1", "--format", "json"], ["export", "--all"],
                ["export", "--all", "--format", "json", "--all-versions"]):
        name = "tokterm %s on a terminal" % " ".join(sub)
        rc, out, err = ttlib.run_tokterm_tty(["--db", db] + sub)
        t.eq(rc, 0, name + ": exit 0")
        tty_safe(out, name)
        escaped_json(out, name, [EVIL, EVIL_TITLE, "gpt\u202e-4o\u009b"])
        rc, pout, err = ttlib.run_tokterm(["--db", db] + sub)
        t.ok(rc == 0 and "\u202e".encode() in pout and b"\x7f" in pout and
             json.loads(pout) == json.loads(out),
             "%s to a pipe: raw as before, the same value" % " ".join(sub), repr(pout[:200]))

    # --- errors quoting hostile text, on a terminal's stderr -----------------------------------
    bad = srv.base("status=400,error=" + q("bad \u202eevil\u202c \u009b2J \x7f request"))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--base-url", bad, "-p", "x"],
                                         ttys=(1, 2))
    t.eq(rc, 3, "an HTTP error on a terminal: exit 3")
    tty_safe(err, "an HTTP error's message on a terminal's stderr")
    visible(err, "an HTTP error's message", ["<U+202E>", "<U+009B>", "^?"])

    # --- doctor ---------------------------------------------------------------------------
    cfgdir = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfgdir, exist_ok=True)
    cfg = os.path.join(cfgdir, "config")
    with open(cfg, "w") as f:
        f.write("profile = evil\n[evil]\nbase_url = %s\nmodel = gpt\u202e-4o\n"
                % srv.base("status=403,error=" + q("no \u202eentry\u202c \u009b2J \x7f here")))
    os.chmod(cfg, 0o600)
    for ttys in ((1,), (1, 2)):
        rc, out, err = ttlib.run_tokterm_tty(["--db", db, "doctor", "--timeout", "5"],
                                             home=home, ttys=ttys, env={"OPENAI_BASE_URL": None})
        name = "doctor on a terminal" + (" (stderr too)" if 2 in ttys else "")
        t.ok(b"HTTP 403" in out, name + ": the check ran", out.decode("utf-8", "replace"))
        tty_safe(out, name)
        tty_safe(err, name + ", stderr")
        visible(out, name, ["no <U+202E>entry<U+202C> <U+009B>2J ^? here", "gpt<U+202E>-4o"])

    rc, out, err = ttlib.run_tokterm(["doctor", "--\x1b]0;pwned\x07\u202eevil\u009b"])
    t.eq(rc, 2, "doctor with a hostile unknown argument: exit 2")
    ttlib.safe_stderr(t, err, "doctor's unknown argument")

    # --- batch: its JSON lines on a terminal are escaped, into a pipe byte-exact -------------
    lines = '{"id":1,"prompt":"a"}\n'
    rc, out, err = ttlib.run_tokterm_tty(["--db", db, "--base-url", base, "batch", "-"],
                                         stdin=lines)
    t.eq(rc, 0, "batch on a terminal: exit 0")
    tty_safe(out, "batch JSON lines on a terminal")
    line = out.decode("utf-8", "replace").strip().splitlines()[-1] if out.strip() else ""
    try:
        got = json.loads(line).get("content")
    except ValueError:
        got = None
    t.eq(got, EVIL, "batch on a terminal: still JSON, the same content when decoded")
    rc, out, err = ttlib.run_tokterm(["--db", db, "--base-url", base, "--no-cache", "batch", "-"],
                                     stdin=lines)
    t.ok(rc == 0 and json.loads(out.decode().splitlines()[-1])["content"] == EVIL
         and b"\xe2\x80\xae" in out, "batch into a pipe: the raw bytes", repr(out[:300]))

    # --- an empty search query is bad usage ---------------------------------------------------
    for qry in ([""], ["   "], ["", ""], ['""']):
        rc, out, err = ttlib.run_tokterm(["--db", db, "search"] + qry)
        t.ok(rc == 2 and b"query" in err, "search %r: exit 2, says the query is empty" % qry,
             "rc %d: %r" % (rc, err))

sys.exit(t.done())
