#!/usr/bin/env python3
"""The chat draws frames inside a large batch of text (issue 14: token->screen delay).

An answer replayed from the response cache reaches the chat as one batch (here ~2.7 MB of
Markdown: ~80 ms of styling); the network hands over up to 256 KiB at a time. The chat styles a
batch TUI_SLICE bytes at a time and, when a frame falls due before the batch is done, draws
it there: --trace writes "P <bytes styled> <batch bytes>" for each such frame. Before, the
whole batch was styled before the next frame. The trace's "C" lines say a frame copies the
cells of ASCII text instead of making each with setcchar. Prints TAP; skips cleanly without
tmux."""

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
    t.skip("frames inside a batch", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

STDERR = os.path.join(ttlib.tempdir("tt-slices-stderr-"), "stderr")


def fixture(dirname, paragraphs):
    """DIR/big.sse: an answer of Markdown paragraphs in deltas of a few words."""
    words = ("the **parser** returns a `value` when each row is read from 缓冲区 and then "
             "we check that the length fits").split(" ")

    def ev(obj):
        return "data: " + json.dumps(obj, ensure_ascii=False) + "\n\n"

    def chunk(delta, finish=None):
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    out = [ev(chunk({"role": "assistant", "content": ""}))]
    for p in range(paragraphs):
        line = "Paragraph %d: " % p + " ".join(words[(p + k) % len(words)] for k in range(60))
        for k in range(0, len(line), 24):
            out.append(ev(chunk({"content": line[k:k + 24]})))
        out.append(ev(chunk({"content": "\n\n"})))
    out.append(ev(chunk({}, "stop")))
    out.append("data: [DONE]\n\n")
    with open(os.path.join(dirname, "big.sse"), "w", encoding="utf-8") as f:
        f.write("".join(out))


def chat(srv, home, trace, want):
    with ttlib.Tmux(100, 30) as tm:
        env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("replay=big.sse,chunk=whole"),
                                              "TT_TEST_STDERR": STDERR})
        tm.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path(),
                "--trace", trace], env)
        tm.wait_for(re.compile("F1|\u203a"), 10)
        tm.send_text("a long answer, please")
        tm.send("Enter")
        seen = tm.wait_for(want, 60)
        time.sleep(0.3)
        screen = tm.capture()
        tm.send("C-d")
        code = tm.wait_exit(10)
    return seen is not None, screen, code, open(trace).read().split("\n")


fx = ttlib.tempdir("tt-slices-fx-")
fixture(fx, 8000)
home = ttlib.make_home()
os.makedirs(os.path.join(home, ".config", "tokterm"), exist_ok=True)
with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
    f.write("cache_max_mb = 1000\n")  # an answer of up to 10 MB is cached
tdir = ttlib.tempdir("tt-slices-")
with ttlib.FakeServer(extra_args=["--fixtures", fx]) as srv:
    ok, screen, code, first = chat(srv, home, os.path.join(tdir, "first"), "\u2713")
    t.ok(ok and code == 0, "the answer streams and is saved (the cache has it)", screen)
    # "C <cells drawn> <cells setcchar made>" per frame: a cell of printable ASCII is made once
    # per character and style, then copied (setcchar for each cell was a fifth of a frame)
    cells = [[int(x) for x in ln.split()[1:]] for ln in first if ln.startswith("C ")]
    put, made = sum(c[0] for c in cells), sum(c[1] for c in cells)
    t.ok(len(cells) >= 2 and put >= 1000 and made * 10 <= put,
         "the frames copy ASCII cells: setcchar made %d of %d cells (%d frames)"
         % (made, put, len(cells)), first[:40])
    ok, screen, code, lines = chat(srv, home, os.path.join(tdir, "replay"), "from the cache")
    t.ok(ok and code == 0, "the same prompt again is answered from the cache", screen)
    t.ok("Paragraph 7999:" in screen, "and its end is on screen", screen)
    parts = [[int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("P ")]
    t.ok(len(parts) >= 1 and all(0 < a < n for a, n in parts),
         "frames are drawn inside the replayed batch (%d: %s)" % (len(parts), parts[:5]),
         lines[:40])
    frames = [ln for ln in lines if ln.startswith("F ")]
    t.ok(len(frames) >= len(parts) + 1, "each of them a frame of the trace (%d frames)"
         % len(frames), lines[:40])

err = open(STDERR, errors="replace").read() if os.path.exists(STDERR) else ""
t.ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report on stderr",
     err[-6000:])
sys.exit(t.done())
