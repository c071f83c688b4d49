#!/usr/bin/env python3
"""A large batch of text reaches the screen at once (issue 14: token->screen delay).

An answer replayed from the response cache reaches the chat as one batch (here ~2.7 MB of
Markdown: ~80 ms of styling); the network hands over up to 256 KiB at a time. The chat styles
such a batch's last screenful first (from a place where a new styler gives the same lines),
so the next frame shows all of it scrolled to its end; the text before waits unstyled and is
styled once the stream pauses or ends, or at once when a scroll needs it. --trace writes
"Y <text handed over> <text the transcript took> <text styled>" after each frame. Before, the
batch was styled in order, 16 KiB at a time, and frames inside it (--trace "P <styled>
<batch>") showed its beginning; a batch with no such place (one huge code block) still is.
The trace's "C" lines say a frame copies the cells of ASCII text instead of making each with
setcchar; its "U" lines carry the process's and the UI thread's CPU clocks after S, after each
frame and when the text set aside is all styled. Prints TAP; skips cleanly without tmux."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
if not ttlib.Tmux.available():
    t.skip("a large batch on screen at once", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

STDERR = os.path.join(ttlib.tempdir("tt-slices-stderr-"), "stderr")
WORDS = ("the **parser** returns a `value` when each row is read from 缓冲区 and then "
         "we check that the length fits").split(" ")


def ev(obj):
    return "data: " + json.dumps(obj, ensure_ascii=False) + "\n\n"


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def paragraph(p):
    return "Paragraph %d: " % p + " ".join(WORDS[(p + k) % len(WORDS)] for k in range(60))


def write(dirname, name, deltas):
    out = [ev(chunk({"role": "assistant", "content": ""}))]
    out += [ev(chunk({"content": d})) for d in deltas]
    out.append(ev(chunk({}, "stop")))
    out.append("data: [DONE]\n\n")
    with open(os.path.join(dirname, name), "w", encoding="utf-8") as f:
        f.write("".join(out))
    return len("".join(deltas).encode("utf-8"))


def fixtures(dirname):
    """big.sse: 8000 paragraphs in deltas of a few words; code.sse: one fenced block of 60,000
    lines (no place for a second styler); trickle.sse: 600 paragraphs in one delta, then 150
    deltas of a word (sent 20 ms apart, the stream never pauses for long)."""
    sizes = {}
    deltas = []
    for p in range(8000):
        line = paragraph(p)
        deltas += [line[k:k + 24] for k in range(0, len(line), 24)] + ["\n\n"]
    sizes["big"] = write(dirname, "big.sse", deltas)
    code = ["```\n"] + ["    row_%d = parse(buf, len) + %d;\n" % (i, i) for i in range(60000)]
    sizes["code"] = write(dirname, "code.sse", code + ["```\n"])
    head = "".join(paragraph(p) + "\n\n" for p in range(600))
    sizes["trickle"] = write(dirname, "trickle.sse", [head] + ["w%d " % i for i in range(150)])
    return sizes


def trace_lines(path):
    return open(path).read().split("\n") if os.path.exists(path) else []


def ys(lines):
    return [[int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("Y ")]


def wait_styled(trace, timeout=30):
    """Until the trace says the text set aside is all styled (a Y with styled == taken after
    the answer's end), at most timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = trace_lines(trace)
        if "E" in [ln[:1] for ln in lines]:
            end = max(i for i, ln in enumerate(lines) if ln.startswith("E "))
            if any(v[1] == v[2] for v in ys(lines[end:])):
                return
        time.sleep(0.05)


def chat(srv, home, trace, spec, prompt, want, keys=None):
    with ttlib.Tmux(100, 30) as tm:
        env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base(spec),
                                              "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path(),
                "--trace", trace], env)
        tm.wait_for(re.compile("F1|\u203a"), 10)
        tm.send_text(prompt)
        tm.send("Enter")
        extra = keys(tm) if keys else None
        seen = tm.wait_for(want, 60)
        wait_styled(trace)
        time.sleep(0.3)
        screen = tm.capture()
        tm.send("C-d")
        code = tm.wait_exit(10)
    return seen is not None, screen, code, trace_lines(trace), extra


def consecutive(screen):
    """The paragraph numbers on screen, and whether they follow each other."""
    nums = [int(x) for x in re.findall(r"Paragraph (\d+):", screen)]
    return nums, len(nums) >= 2 and all(b == a + 1 for a, b in zip(nums, nums[1:]))


fx = ttlib.tempdir("tt-slices-fx-")
size = fixtures(fx)
home = ttlib.make_home()
os.makedirs(os.path.join(home, ".config", "tokterm"), exist_ok=True)
with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
    f.write("cache_max_mb = 1000\n")  # an answer of up to 10 MB is cached
tdir = ttlib.tempdir("tt-slices-")
with ttlib.FakeServer(extra_args=["--fixtures", fx]) as srv:
    big = "replay=big.sse,chunk=whole"
    ok, screen, code, lines, _ = chat(srv, home, os.path.join(tdir, "first"), big,
                                      "a long answer, please", "\u2713")
    t.ok(ok and code == 0, "the answer streams and is saved (the cache has it)", screen)
    y = ys(lines)
    t.ok(y and all(s <= k <= h for h, k, s in y) and y[-1] == [size["big"]] * 3,
         "streamed: never more styled than taken, all of it styled once in the end "
         "(%d bytes; last Y %s)" % (size["big"], y[-1] if y else None), lines[-30:])
    # "C <cells drawn> <cells setcchar made>" per frame: a cell of printable ASCII is made once
    # per character and style, then copied (setcchar for each cell was a fifth of a frame)
    cells = [[int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("C ")]
    put, made = sum(c[0] for c in cells), sum(c[1] for c in cells)
    t.ok(len(cells) >= 2 and put >= 1000 and made * 10 <= put,
         "the frames copy ASCII cells: setcchar made %d of %d cells (%d frames)"
         % (made, put, len(cells)), lines[:40])

    ok, screen, code, lines, _ = chat(srv, home, os.path.join(tdir, "replay"), big,
                                      "a long answer, please", "from the cache")
    t.ok(ok and code == 0, "the same prompt again is answered from the cache", screen)
    t.ok("Paragraph 7999:" in screen, "and its end is on screen", screen)
    y = [v for v in ys(lines) if v[0] > 0]
    t.ok(y and y[0][1] == y[0][0] == size["big"] and y[0][2] < 65536,
         "the first frame after the replayed batch (one of %d bytes) shows all of it: %d taken, "
         "only %d bytes, its last screenful, styled before it" % (
             size["big"], y[0][1] if y else -1, y[0][2] if y else -1), lines[:40])
    t.ok(not [ln for ln in lines if ln.startswith("P ")],
         "no frame shows the batch's beginning (no frame inside it)", lines[:40])
    t.ok(y and y[-1] == [size["big"]] * 3,
         "the rest is styled afterwards, each byte once (last Y %s)" % (y[-1] if y else None),
         lines[-20:])

    # one code block of 2 MB has no place for a second styler: styled in order, frames inside
    spec = "replay=code.sse,chunk=whole"
    ok, screen, code, _, _ = chat(srv, home, os.path.join(tdir, "code1"), spec, "code, please",
                                  "\u2713")
    t.ok(ok and code == 0, "a long code block streams and is cached", screen)
    ok, screen, code, lines, _ = chat(srv, home, os.path.join(tdir, "code2"), spec,
                                      "code, please", "from the cache")
    t.ok(ok and code == 0 and "row_59999" in screen, "its replay ends on screen", screen)
    parts = [[int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("P ")]
    t.ok(len(parts) >= 1 and all(0 < a < n for a, n in parts),
         "frames are drawn inside the replayed batch (%d: %s)" % (len(parts), parts[:5]),
         lines[:40])
    frames = [ln for ln in lines if ln.startswith("F ")]
    t.ok(len(frames) >= len(parts) + 1, "each of them a frame of the trace (%d frames)"
         % len(frames), lines[:40])
    y = ys(lines)
    t.ok(y and y[-1] == [size["code"]] * 3, "all of it styled once (last Y %s)"
         % (y[-1] if y else None), lines[-10:])

    # a scroll while the text before the last screenful waits: it is styled first, in order
    def scroll(tm):
        tm.wait_for("Paragraph 599:", 20)
        time.sleep(0.2)  # a frame or two: the 600 paragraphs wait, the words keep coming
        shown = tm.capture()
        tm.send("PPage")
        tm.send("PPage")
        time.sleep(0.4)
        up = tm.capture()
        tm.send("Home")
        time.sleep(0.4)
        top = tm.capture()
        tm.send("End")  # back to the bottom, following the words again
        return shown, up, top

    trace = os.path.join(tdir, "trickle")
    ok, screen, code, lines, (shown, up, home_screen) = chat(
        srv, ttlib.make_home(), trace, "replay=trickle.sse,chunk=event,delay_ms=20",
        "a trickle, please", "w149", keys=scroll)
    t.ok(ok and code == 0, "a large delta, then words 20 ms apart", screen)
    y = ys(lines)
    waited = [v for v in y if v[2] < v[1]]
    t.ok(waited and waited[0][2] < 65536, "frames showed the large delta's end while the text "
         "before it waited (%d such frames, first %s)" % (len(waited), waited[:1]), lines[:40])
    nums, fine = consecutive(up)
    t.ok(fine and nums[-1] < 599, "two pages up: paragraphs %s, in order" % nums, up)
    nums, fine = consecutive(home_screen)
    t.ok(fine and nums[0] == 0, "Home: the first paragraphs %s, in order" % nums, home_screen)
    t.ok(y and y[-1] == [size["trickle"]] * 3, "all of it styled once (last Y %s)"
         % (y[-1] if y else None), lines[-10:])
    # U <process CPU> <UI thread CPU> <the frame's UI CPU> <UI thread's page faults> after S,
    # after each frame and after the Y that says all is styled: the benchmarks read an
    # answer's CPU from them
    recs = [ln.split() for ln in lines if ln[:2] in ("S ", "F ", "U ")]
    follows = all(k + 1 < len(recs) and recs[k + 1][0] == "U" for k in range(len(recs))
                  if recs[k][0] != "U")
    cs = [[float(x) for x in w[1:]] for w in recs if w[0] == "U" and len(w) == 5]
    t.ok(recs and recs[-1][0] == "U" and follows and
         len(cs) >= sum(1 for w in recs if w[0] != "U"),
         "the trace has a CPU record after S and after each frame (%d)" % len(cs), lines[:40])
    forward = all(b[0] >= a[0] and b[1] >= a[1] and b[3] >= a[3] for a, b in zip(cs, cs[1:]))
    t.ok(cs and forward and all(0 <= c[2] <= c[1] <= c[0] for c in cs) and cs[-1][0] > cs[0][0],
         "its clocks only go forward, the UI thread's within the process's (%s -> %s)"
         % (cs[0] if cs else None, cs[-1] if cs else None), lines[:40])

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-6000:])
sys.exit(t.done())
