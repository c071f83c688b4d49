#!/usr/bin/env python3
"""Golden tests of Markdown tables in the chat: the real binary in a private tmux against the fake
server, the answer's rows captured with their colours (capture-pane -e) at 40, 50, 60, 100 and
200 columns and compared with tests/e2e/golden/tables/; a resize re-lays a table. The issue's
61-column table at 60 and 50 columns, a CJK table, a streamed answer (openai_table.sse) at 50.
Then strikethrough, task lists and nested quotes as drawn, with and without NO_COLOR, and
scripted --render's OSC 8 hyperlinks (profile key hyperlinks).
TT_GOLDEN_UPDATE=1 rewrites the golden files (look at them before committing). Prints TAP;
skips cleanly when tmux is missing."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
GOLDEN = os.path.join(ttlib.srcdir(), "e2e", "golden", "tables")
UPDATE = os.environ.get("TT_GOLDEN_UPDATE") == "1"

T61 = ("| Term | Meaning | Example |\n|---|---|---|\n"
       "| latency | time until the first byte | 120 ms |\n"
       "| throughput | tokens per second, sustained rate | 85 tok/s |\n")
CJK = ("| 名字 | 说明 | 数量 |\n|:-:|---|--:|\n"
       "| 你好 | 中文的单元格内容会在字符之间换行 | 12 |\n"
       "| 世界 | 混合 mixed 文本 text | 3 |\n")
ANSWER = "Two tables:\n\n" + T61 + "\n" + CJK + "\nThe end.\n"


width = ttlib.display_width


def answer_span(plain):
    """Indices [a, b) of the answer's rows: after its header row, before the footer."""
    lines = plain.split("\n")
    a = b = None
    for i, row in enumerate(lines):
        if "\u25c6" in row and a is None:  # the answer's header row
            a = i + 1
        elif a is not None and row[2:].startswith("\u2713"):
            b = i
            break
    return (a, b) if a is not None and b is not None else None


def start(tm, srv, spec):
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base(spec)})
    tm.run([ttlib.tokterm_path(), "--no-save"], env)
    return tm.wait_for(re.compile("F1|\u203a"), 10)


def ask(tm):
    tm.send_text("show the tables")
    tm.send("Enter")
    return tm.wait_for(re.compile("\u2713"), 15)


def rows_of(tm):
    plain = tm.capture()
    span = answer_span(plain)
    if span is None:
        return None, None
    esc = tm.capture(escapes=True).split("\n")
    lines = plain.split("\n")
    return lines[span[0]:span[1]], esc[span[0]:span[1]]


def table_rows_whole(rows, cols, name):
    """Every table row fits the pane (gutter 2), rows of a table equally wide, whole."""
    tabs, cur = [], []
    for r in rows + [""]:
        body = r[2:].rstrip()
        if body[:1] in ("\u2502", "\u251c"):
            cur.append(body)
        elif cur:
            tabs.append(cur)
            cur = []
    ok = bool(tabs)
    for tab in tabs:
        w = {width(r) for r in tab}
        ok = ok and len(w) == 1 and max(w) <= cols - 2 and all(
            r[-1] in ("\u2502", "\u2524") for r in tab)
    t.ok(ok, name + ": %d tables, every row whole within %d columns" % (len(tabs), cols - 2),
         "\n".join(rows))
    return tabs


def golden(name, esc_rows):
    path = os.path.join(GOLDEN, name + ".txt")
    got = "\n".join(r.rstrip() for r in esc_rows) + "\n"
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(got)
    try:
        with open(path, encoding="utf-8") as f:
            want = f.read()
    except OSError:
        want = None
    # as the eye sees it (ttlib.shown_cells): a bold blank in a header may come out plain
    t.ok(want is not None and ttlib.shown_cells(got) == ttlib.shown_cells(want),
         name + ": looks like golden/tables/%s.txt" % name, "got:\n%s\nwant:\n%s" % (got, want))


if not ttlib.Tmux.available():
    t.skip("tmux tests", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    spec = "reply=" + urllib.parse.quote(ANSWER, safe="")
    for cols in (40, 50, 60, 100, 200):
        with ttlib.Tmux(cols, 60) as tm:
            start(tm, srv, spec)
            t.ok(ask(tm) is not None, "%d columns: the answer completes" % cols, tm.capture())
            plain, esc = rows_of(tm)
            if plain is None:
                t.ok(False, "%d columns: answer rows found" % cols, tm.capture())
                continue
            tabs = table_rows_whole(plain, cols, "%d columns" % cols)
            if cols >= 63:
                t.ok(any(r.startswith("\u2502 Term       \u2502 Meaning") and width(r) == 61
                         for tab in tabs for r in tab),
                     "%d columns: the issue's table at its natural 61 columns" % cols,
                     "\n".join(plain))
            else:
                text = "\n".join(plain)
                t.ok("Meani" not in text.replace("Meaning", ""),
                     "%d columns: no word of the header is split" % cols, text)
            golden("answer-%d" % cols, esc)
            # a resize re-lays the tables: the rows of a fresh window of the other width
            other = 50 if cols != 50 else 100
            tm.resize(other, 60)
            time.sleep(0.5)
            resized, _ = rows_of(tm)
            fresh = os.path.join(GOLDEN, "answer-%d.txt" % other)
            if resized is not None and os.path.exists(fresh):
                with open(fresh, encoding="utf-8") as f:
                    want = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
                got = "\n".join(r.rstrip() for r in resized) + "\n"
                t.eq(got, want, "%d -> %d columns: re-laid as if drawn there" % (cols, other))
            else:
                t.ok(False, "%d -> %d columns: rows found" % (cols, other), tm.capture())

    # a streamed answer (pieces of 1-6 characters) with a 5-column table, at 50 columns
    with ttlib.Tmux(50, 60) as tm:
        start(tm, srv, "replay=openai_table.sse")
        t.ok(ask(tm) is not None, "streamed table: the answer completes", tm.capture())
        plain, esc = rows_of(tm)
        if plain is not None:
            table_rows_whole(plain, 50, "streamed table at 50 columns")
            golden("streamed-50", esc)
        else:
            t.ok(False, "streamed table: answer rows found", tm.capture())

        # a search hit in a table stays highlighted when a resize lays the table out anew
        def hit_style():
            for row in tm.capture(escapes=True).split("\n"):
                m = re.search(r"\u2502 ((?:\x1b\[[0-9;]*m)+)Flask", row)
                if m:
                    return m.group(1)
            return None

        tm.send_text("/find Flask")
        tm.send("Enter")
        tm.wait_for("hit 1/1", 5)
        before = hit_style()
        tm.resize(80, 60)
        time.sleep(0.5)
        after = hit_style()
        t.ok(before is not None and "48;" in before and after == before,
             "a search hit in a table keeps its highlight after a resize",
             "%r -> %r" % (before, after))

    # strikethrough (U+0336 over each cell: curses has no attribute for it), tasks, quotes
    extras = "Plan:\n\n- [x] ~~old step~~ done\n- [ ] next\n\n> a\n> > b\n"
    for env in ({}, {"NO_COLOR": "1"}):
        with ttlib.Tmux(60, 30) as tm:
            e = ttlib.clean_env(env=dict(env, OPENAI_BASE_URL=srv.base(
                "reply=" + urllib.parse.quote(extras, safe=""))))
            tm.run([ttlib.tokterm_path(), "--no-save"], e)
            tm.wait_for(re.compile("F1|\u203a"), 10)
            name = "extras" + (" (NO_COLOR)" if env else "")
            scr = ask(tm) or tm.capture()
            t.ok("\u2611 o\u0336l\u0336d\u0336 \u0336s\u0336t\u0336e\u0336p\u0336 done" in scr
                 and "~~" not in scr, name + ": struck text, markers hidden, task checked", scr)
            t.ok("\u2610 next" in scr, name + ": an open task", scr)
            t.ok("\u2502 \u2502 b" in scr, name + ": a bar per quote level", scr)

    # scripted --render: URLs as OSC 8 hyperlinks where the terminal is known to show them
    url_spec = "reply=" + urllib.parse.quote("see https://example.com/x now\n", safe="")
    link = b"\x1b]8;;https://example.com/x\x1b\\"
    base = {"OPENAI_BASE_URL": srv.base(url_spec), "TERM": "xterm-256color"}
    home = ttlib.make_home()
    ttlib.write_config(home, "hyperlinks = always\n")
    rc, out, err = ttlib.run_tokterm(["--no-save", "--render", "always", "-p", "x"], env=base,
                                     home=home)
    t.ok(rc == 0 and link in out and out.count(b"\x1b]8;;\x1b\\") == 1,
         "hyperlinks = always: the URL as an OSC 8 link, even into a pipe", repr(out))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "-p", "x"],
                                         env=dict(base, TERM_PROGRAM="WezTerm"))
    t.ok(rc == 0 and link in out, "auto on a terminal known to show links (WezTerm)", repr(out))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "-p", "x"],
                                         env=dict(base, TERM_PROGRAM="WezTerm", TMUX="/t,1,0"))
    t.ok(rc == 0 and b"\x1b]8" not in out and b"https://example.com/x" in out,
         "auto inside tmux: no link, the URL as text", repr(out))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "-p", "x"], env=base)
    t.ok(rc == 0 and b"\x1b]8" not in out, "auto on a terminal not known to: no link", repr(out))
    ttlib.write_config(home, "hyperlinks = sometimes\n")
    rc, out, err = ttlib.run_tokterm(["--no-save", "-p", "x"], env=base, home=home)
    t.ok(rc == 2 and b"auto|always|never" in err, "hyperlinks = sometimes: exit 2, the choices",
         err.decode())

sys.exit(t.done())
