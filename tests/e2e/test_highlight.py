#!/usr/bin/env python3
"""Golden tests of highlighted code blocks in the chat: the real binary in a private tmux against
the fake server, the screen read with `capture-pane -e -N` (colours and trailing cells kept).

A Python block streams in; its rows, as runs of (colour, attributes, text), must look like the
golden files tests/e2e/golden/highlight-*.txt (each character in its style, each blank with what
shows of it: its background, underline and reverse): at 40, 60, 100 and 200 columns, with the answer
split into 1-byte, 7-byte, random and whole writes (every split gives the same screen), and in
each built-in theme. A full repaint of a highlighted block writes few colour changes: a run of
spaces keeps the style before it when that looks the same (the same background, no underline or
reverse), so "def fib" needs none around its space. Besides: the block is highlighted while it arrives (a finished line is
coloured before the answer ends), its background reaches the right edge, a fence without a known
language stays one colour, NO_COLOR keeps only attributes, and `/copy 1` copies the raw code.

TT_GOLDEN_UPDATE=1 rewrites the golden files from what the screen shows (check the diff).
TERM is tmux-256color: it has no bce, so curses paints the background with spaces that the
capture shows (with bce, tmux keeps the erased cells' colour but capture-pane drops them)."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
GOLDEN = os.path.join(ttlib.srcdir(), "e2e", "golden")
UPDATE = os.environ.get("TT_GOLDEN_UPDATE") == "1"
TERM = "tmux-256color"
# A full repaint of the answer and DENSE at 100x40 wrote 678 SGR sequences when every space
# between two tokens was drawn in the code colour ("is None" three colour changes), 514 since.
SGR_BOUND = 600

CODE = (
    "@lru_cache(maxsize=None)\n"
    "def fib(n: int) -> int:\n"
    "    \"\"\"Return the n-th Fibonacci number,\n"
    "    counting from fib(0) == 0.\"\"\"\n"
    "    if n < 2:  # the base case\n"
    "        return n\n"
    "    return fib(n - 1) + fib(n - 2)  # a long line that wraps at narrow widths\n"
    "\n"
    "print(f\"fib(30) = {fib(30)}\", 'done', None, 0x1F)\n"
)
ANSWER = ("Here it is:\n\n```python\n" + CODE +
          "```\n\nAnd plain:\n\n```\nx = 1  # same colour\n```\n")


# Tokens with only spaces between them: on main each such space was a colour change or two.
DENSE = "".join("    if key is not None and value is None or key in seen and not done%d:\n" % i
                for i in range(8))


def q(text):
    return urllib.parse.quote(text, safe="")


def blank_is_layout(style):
    """A blank in this style looks like the terminal's cleared cell."""
    return ttlib.blank_shows(style) == ("-", False, False)


def sgr_runs(line):
    """A captured row as runs "style:text", style = fg,bg + b/i/u/d/r flags."""
    st = ttlib.sgr_new()
    runs = []
    for m in re.finditer(r"\x1b\[([0-9;:]*)m|([^\x1b]+)", line):
        if m.group(2) is not None:
            style = ttlib.sgr_style(st)
            if runs and runs[-1][0] == style:
                runs[-1][1] += m.group(2)
            else:
                runs.append([style, m.group(2)])
            continue
        ttlib.sgr_apply(st, m.group(1))
    # the gutter and trailing blank cells on the default background are layout, not the
    # block. Bold, dim and italic do not show on a blank, and curses may clear such cells to
    # the end of the row (EL, which leaves no attribute) or write them as spaces, as the
    # frames before it left the row: an ASan build under load once drew the wrapped row's
    # last cell without its dim, which the golden file had.
    while runs and not runs[-1][1].strip() and blank_is_layout(runs[-1][0]):
        runs.pop()
    return " | ".join("%s:%s" % (s, txt) for s, txt in runs)


def visible(rows):
    """What the eye sees of rows of sgr_runs: each character with its style, each space with
    only its background and the attributes that show on a space (underline, reverse)."""
    out = []
    for r in rows:
        cells = []
        for run in r.split(" | "):
            style, _, text = run.partition(":")
            for ch in text:
                cells.append(ttlib.blank_shows(style) if ch == " " else (ch, style))
        out.append(cells)
    return out


def repaint_sgr(width, spec):
    """The chat at width x 40 answers spec; after the answer, Ctrl-L repaints the screen.
    Returns (the bytes of that repaint, the screen's escaped capture, plain capture)."""
    home = ttlib.make_home()
    with ttlib.Tmux(width, 40, term=TERM, record=True) as tm:
        stuck = tm.ask([ttlib.tokterm_path()], ttlib.clean_env(
            home=home, env={"OPENAI_BASE_URL": srv.base(spec)}), "fib please", 20)
        if stuck is not None:
            return None, None, stuck
        # the recording lags behind the screen: the answer's end mark is in it first
        before = len(tm.recording(0.5, want="\u2713".encode()))
        tm.send("C-l")
        data = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = tm.recording(0.3)[before:]
            if b"done7" in data and len(tm.recording(0.3)) - before == len(data):
                break
        esc = tm.tmux("capture-pane", "-p", "-e", "-N", "-t", tm.target)
        return data, esc, tm.capture()


def block_rows(esc, plain):
    """The rows of the answer from the Python label to the plain block's last row."""
    rows = esc.split("\n")
    prow = plain.split("\n")
    a = next((i for i, r in enumerate(prow) if r.strip() == "python"), None)
    b = next((i for i, r in enumerate(prow) if "same colour" in r), None)
    if a is None or b is None:
        return None
    return [sgr_runs(r) for r in rows[a:b + 1]]


def chat(width, spec, env=None, height=40, keys=None):
    """Run the chat, send a prompt, wait for the answer; returns (escaped, plain, mid, copied)
    where mid is a plain capture taken while the answer was still streaming (or None)."""
    home = ttlib.make_home()
    e = {"OPENAI_BASE_URL": srv.base(spec)}
    e.update(env or {})
    config = e.pop("CONFIG", None)
    if config:
        os.makedirs(os.path.join(home, ".config", "tokterm"))
        with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
            f.write(config)
    with ttlib.Tmux(width, height, term=TERM) as tm:
        tm.run([ttlib.tokterm_path()], ttlib.clean_env(home=home, env=e))
        if tm.wait_for(re.compile("F1|\u203a"), 10) is None:
            return None, tm.capture(), None, None
        tm.send_text("fib please")
        tm.send("Enter")
        mid = None
        if "delay_ms" in spec:
            mid_esc = None
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                p = tm.capture()
                if "return n" in p:
                    mid_esc = tm.tmux("capture-pane", "-p", "-e", "-N", "-t", tm.target)
                    mid = (p, mid_esc)
                    break
                time.sleep(0.02)
        done = tm.wait_for("\u2713", 20)
        # the answer's end mark can be drawn a frame before the last rows are styled (a README
        # run's ASan build under load once captured a row without its last styled cell): the
        # screen once it stays the same for 0.1 s (at most 3 s)
        esc = tm.tmux("capture-pane", "-p", "-e", "-N", "-t", tm.target)
        deadline = time.monotonic() + 3
        while done is not None and time.monotonic() < deadline:
            time.sleep(0.1)
            again = tm.tmux("capture-pane", "-p", "-e", "-N", "-t", tm.target)
            if again == esc:
                break
            esc = again
        plain = tm.capture()
        copied = None
        if keys:
            for k in keys:
                tm.send_text(k)
                tm.send("Enter")
            tm.wait_for("copy.txt", 5)
            path = os.path.join(home, ".local", "state", "tokterm", "copy.txt")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    copied = f.read()
        if done is None:
            return None, plain, mid, copied
        return esc, plain, mid, copied


def golden(name, rows):
    path = os.path.join(GOLDEN, name)
    text = "".join(r + "$\n" for r in rows)  # "$": trailing cells are kept, visibly
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    try:
        with open(path, encoding="utf-8") as f:
            want = f.read()
    except OSError:
        want = None
    # compared as the eye sees them: curses may clear a blank whose bold, dim or italic does
    # not show (EL or ECH leave no attribute) and then keeps it as drawn, so a CI run once
    # captured the mono theme's dim space in "fib(n - 2)" as a plain one
    want_rows = want.split("$\n")[:-1] if want is not None else None
    t.ok(want_rows is not None and len(want_rows) == len(rows) and
         visible(want_rows) == visible(rows),
         "%s: the block's rows look like the golden file's" % name,
         "got:\n%s\nwant:\n%s" % (text, want))


if not ttlib.Tmux.available():
    t.skip("highlight tests in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    # --- widths: streamed slowly, the first lines coloured before the end ----------------------
    for width in (40, 60, 100, 200):
        esc, plain, mid, copied = chat(width, "reply=%s,delay_ms=15,chunk=random,seed=%d"
                                       % (q(ANSWER), width),
                                       keys=["/copy 1"] if width == 100 else None)
        rows = block_rows(esc or "", plain)
        t.ok(rows is not None, "%d columns: the answer and both blocks are on screen" % width,
             plain)
        if rows is None:
            continue
        golden("highlight-%d.txt" % width, rows)
        kw = "176,236,b:def"
        t.ok(any(kw in r for r in rows), "%d columns: 'def' in the keyword colour" % width,
             "\n".join(rows))
        code_rows = [r for r in rows if " | " in r]  # the label and code rows, not the text
        t.ok(len(code_rows) >= 12 and
             all(r.split(" | ")[-1].split(":")[0].split(",")[1] == "236" for r in code_rows),
             "%d columns: every code row ends in the code background" % width, "\n".join(rows))
        if mid is not None:
            mp, me = mid
            mrows = block_rows(me + "\nsame colour", mp + "\nsame colour") or []
            t.ok("\u2713" not in mp and any(kw in r for r in mrows),
                 "%d columns: highlighted while it streams (before the answer ends)" % width,
                 mp)
        else:
            t.ok(False, "%d columns: caught the answer while it streamed" % width, plain)
        if copied is not None or width == 100:
            t.eq(copied, CODE, "/copy 1 copies the raw code of the highlighted block")

    # --- the background spans the width: the trailing cells of a code row are the code colour --
    esc, plain, _, _ = chat(60, "reply=%s" % q(ANSWER))
    lines = (esc or "").split("\n")
    prow = plain.split("\n")
    i = next((k for k, r in enumerate(prow) if r.startswith("  def fib")), None)
    tail = lines[i] if i is not None else ""
    last = sgr_runs(tail).split(" | ")[-1]
    t.ok(last.split(":")[0].split(",")[1:2] == ["236"] and
         len(re.sub(r"\x1b\[[0-9;:]*m", "", tail)) == 60,
         "the code background reaches the right edge (60 columns)", repr(tail))

    # --- every split of the stream gives the same screen ---------------------------------------
    base = None
    for spec in ("chunk=whole", "chunk=byte", "chunk=7", "chunk=random,seed=1",
                 "chunk=random,seed=2", "chunk=3,delay_ms=1"):
        esc, plain, _, _ = chat(60, "reply=%s,%s" % (q(ANSWER), spec))
        rows = block_rows(esc or "", plain)
        if base is None:
            base = rows
        t.ok(rows is not None and base is not None and visible(rows) == visible(base),
             "split %s: the same rows as the whole answer" % spec,
             "\n".join(rows or ["(none)"]) + "\n---\n" + "\n".join(base or []))

    # --- each built-in theme -------------------------------------------------------------------
    for theme in ("dark", "light", "solarized-dark", "mono"):
        home_cfg = {"CONFIG": "theme = %s\n" % theme}
        esc, plain, _, _ = chat(80, "reply=%s" % q(ANSWER), env=home_cfg)
        rows = block_rows(esc or "", plain)
        t.ok(rows is not None, "theme %s: the answer is on screen" % theme, plain)
        if rows:
            golden("highlight-theme-%s.txt" % theme, rows)

    # --- NO_COLOR: attributes only -------------------------------------------------------------
    esc, plain, _, _ = chat(80, "reply=%s" % q(ANSWER), env={"NO_COLOR": "1"})
    rows = block_rows(esc or "", plain) or []
    styles = set(s.split(":")[0] for r in rows for s in r.split(" | ") if s)
    t.ok(rows and all(s.startswith("-,-") for s in styles) and "-,-,b" in styles,
         "NO_COLOR: no colour in the block, keywords still bold", styles)

    # --- highlight = false: the chat draws code in one colour, as before --------------------
    esc, plain, _, _ = chat(80, "reply=%s" % q(ANSWER), env={"CONFIG": "highlight = false\n"})
    rows = block_rows(esc or "", plain) or []
    styles = set(s.split(":")[0] for r in rows[1:] for s in r.split(" | ") if " | " in r)
    t.ok(rows and styles == {"-,-", "223,236"},
         "highlight = false: code rows in the code colour only", styles)

    # --- a fence without a known language is one colour -----------------------------------------
    esc, plain, _, _ = chat(80, "reply=%s" % q(ANSWER))
    rows = block_rows(esc or "", plain) or [""]
    t.ok(re.fullmatch(r"-,-: +\| 223,236:x = 1  # same colour *", rows[-1]) is not None,
         "a fence without a language stays in the code colour", rows[-1])

    # --- few colour changes: spaces keep the style before them when it looks the same ---------
    data, esc, plain = repaint_sgr(100, "reply=%s,chunk=whole" % q(
        ANSWER + "\n```python\n" + DENSE + "```\n"))
    rows = block_rows(esc or "", plain or "")
    t.ok(data is not None and rows is not None and b"0x1F" in data,
         "Ctrl-L repaints the screen with the highlighted block", plain)
    if data is not None and rows is not None:
        sgr = len(re.findall(rb"\x1b\[[0-9;:]*m", data))
        t.ok(0 < sgr <= SGR_BOUND, "a full repaint writes at most %d SGR sequences (got %d)"
             % (SGR_BOUND, sgr), repr(data))
        try:
            with open(os.path.join(GOLDEN, "highlight-100.txt"), encoding="utf-8") as f:
                want = [ln[:-1] for ln in f.read().split("\n") if ln]
        except OSError:
            want = []
        t.ok(len(want) == len(rows) and visible(rows) == visible(want),
             "every visible character keeps its colour and every space its background",
             "\n".join(rows))

sys.exit(t.done())
