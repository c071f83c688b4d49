#!/usr/bin/env python3
"""The chat's frames write a few cells the terminal already shows instead of a cursor move
that costs curses more to choose (tui_draw_settle), and the screen stays the same.

A long answer of numbered words ("tok123 tok124 ...", the benchmark's fast deltas) fills many
screens whose columns line up, so a new screen shares runs of cells with the one before it.
curses skipped each run of more than five such cells with a cursor move (about three a row,
each ~17,000 instructions to choose); now a run between two changed cells is written when
that is cheaper (no colour change in it), so a page of new text needs about one move a row.
The real binary in tmux (TERM tmux-256color) at 80x24: PgUp shows the page before; the bytes of that frame are
read from the recording (pipe-pane) and their cursor moves counted. The screen tmux shows
after it must equal the one a full repaint (Ctrl-L) draws, cell for cell with colours, at
80 and 120 columns and with a highlighted code block (colour changes in the runs)."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
# Cursor moves curses writes for tmux-256color (no bce: cleared cells are written, so the
# capture shows each cell's colours): cup, hpa, vpa, cuf/cub/cuu/cud with a count, CR.
MOVE = re.compile(rb"\x1b\[[0-9;]*[HGdCDAB]|\r")
CODE = "".join("    result[key%d] = rows.get(key, 0) + int(row * 0x%x)  # count %d\n"
               % (i, i * 7, i) for i in range(70))
ANSWER = "Here:\n\n```python\n" + CODE + "```\n"


def screen(tm):
    """The screen as the eye sees it (ttlib.shown_cells): curses may clear a bold blank or write
    it, as the frames before it left the cell."""
    return ttlib.shown_cells(tm.tmux("capture-pane", "-p", "-e", "-N", "-t", tm.target))


def first_diff(a, b):
    """Where two screens of cells first differ, for the diagnostics."""
    for y, (ra, rb) in enumerate(zip(a or [], b or [])):
        if ra != rb:
            x = next((x for x, (ca, cb) in enumerate(zip(ra, rb)) if ca != cb), min(len(ra), len(rb)))
            return "row %d column %d: %r / %r" % (y, x, ra[x:x + 3], rb[x:x + 3])
    return "%d / %d rows" % (len(a or []), len(b or []))


def page_up(width, height, spec):
    """The chat answers spec; PgUp; returns (bytes of the frame PgUp drew, the screen after it
    as cells, the same after a Ctrl-L repaint), or Nones."""
    home = ttlib.make_home()
    with ttlib.Tmux(width, height, term="tmux-256color", record=True) as tm:
        stuck = tm.ask([ttlib.tokterm_path()], ttlib.clean_env(
            home=home, env={"OPENAI_BASE_URL": srv.base(spec)}), "go")
        if stuck is not None:
            return None, None, stuck
        # the recording lags behind the screen: the answer's end mark is in it first
        before = len(tm.recording(0.5, want="\u2713".encode()))
        tm.send("PageUp")
        data = tm.recording(0.5)[before:]
        after = screen(tm)
        tm.send("C-l")
        tm.recording(0.5)
        return data, after, screen(tm)


if not ttlib.Tmux.available():
    t.skip("cursor moves of a frame in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    for width, height in ((80, 24), (120, 40)):
        data, after, repaint = page_up(width, height, "gen=6000,chunk=whole")
        t.ok(data is not None and b"tok" in data,
             "%dx%d: PgUp draws the page before" % (width, height), repaint)
        if data is None:
            continue
        rows = height - 2  # the transcript's rows (the status bar and the input row below)
        moves = len(MOVE.findall(data))
        t.ok(0 < moves <= rows * 3 // 2,
             "%dx%d: a new page of aligned words takes at most 1.5 cursor moves a row "
             "(got %d for %d rows)" % (width, height, moves, rows), repr(data))
        t.ok(after == repaint, "%dx%d: the screen equals a full repaint" % (width, height),
             first_diff(after, repaint))

    data, after, repaint = page_up(100, 20, "reply=%s,chunk=whole" %
                                   urllib.parse.quote(ANSWER, safe=""))
    t.ok(data is not None and b"result" in data, "code: PgUp draws the page before", repaint)
    t.ok(data is not None and after == repaint,
         "code: the highlighted page equals a full repaint",
         first_diff(after, repaint))

sys.exit(t.done())
