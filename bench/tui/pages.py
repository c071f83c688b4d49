#!/usr/bin/env python3
"""What a chat frame that shows a whole new page costs (the drawing alone, no styling).

The chat (tmux, --incognito --trace) answers one long stream, then PgUp is pressed --pages
times: each frame draws a page the screen did not show, as a fast stream's frames do, but with
nothing new to style, so the frame's CPU is the drawing (tui_view_draw, tui_draw_settle,
doupdate). Each frame's UI-thread CPU comes from the U records of --trace (the thread's own
clock). With --text gen the stream is the fake server's numbered words ("tok123 tok124 ...",
bench/tui/run.py's fast deltas), whose columns line up from page to page; with --text code a
highlighted Python block (bench/highlight's lines), with --text plain the same block unfenced
by a language (one colour). --also PATH runs a second build in the
same rounds (the order swapped every round); the medians and their ratio are printed.

usage: bench/tui/pages.py [--tokterm PATH] [--also PATH] [--text gen|code|plain] [--pages 30]
                          [--rounds 4] [--width 80 --height 24]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import ttlib  # noqa: E402


def code_fixture(tmp, info):
    spec = importlib.util.spec_from_file_location("hlbench",
                                                  os.path.join(HERE, "..", "highlight", "run.py"))
    hl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hl)
    hl.fixture(tmp, 3000, info=info)
    return "replay=code.sse,chunk=whole"


def page_frames(tokterm, env, a, trace):
    """UI-thread CPU (ms) of each frame PgUp drew."""
    with ttlib.Tmux(a.width, a.height) as tm:
        tm.run([tokterm, "--incognito", "--trace", trace], env)
        if not tm.wait_for("F1", 10):
            raise RuntimeError("the chat did not start:\n" + tm.capture())
        tm.send_text("x")
        tm.send("Enter")
        if not tm.wait_for("\u2713", 60):
            raise RuntimeError("the answer did not end:\n" + tm.capture())
        time.sleep(0.3)
        for _ in range(a.pages):
            tm.send("PageUp")
            time.sleep(0.03)
        time.sleep(0.5)
        tm.send("C-d")
        if tm.wait_exit(10) != 0:
            raise RuntimeError("the chat did not quit")
    lines = open(trace).read().split("\n")
    end = max(i for i, ln in enumerate(lines) if ln.startswith("E "))
    # after E: the frames that show the end, then the pages
    cpu = [float(ln.split()[3]) * 1000 for ln in lines[end:] if ln.startswith("U ")][3:]
    return [c for c in cpu if c > 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=ttlib.tokterm_path())
    ap.add_argument("--also")
    ap.add_argument("--text", choices=("gen", "code", "plain"), default="gen")
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--width", type=int, default=80)
    ap.add_argument("--height", type=int, default=24)
    a = ap.parse_args()
    builds = [a.tokterm] + ([a.also] if a.also else [])
    tmp = tempfile.mkdtemp(prefix="tt-pages-")
    got = {b: [] for b in builds}
    print("# load average at start: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    with ttlib.FakeServer(extra_args=["--fixtures", tmp]) as srv:
        spec = ("gen=60000,chunk=whole" if a.text == "gen" else
                code_fixture(tmp, "python" if a.text == "code" else ""))
        env = ttlib.clean_env(home=ttlib.make_home(), env={"OPENAI_BASE_URL": srv.base(spec)})
        k = 0
        for r in range(a.rounds):
            for b in (builds if r % 2 == 0 else builds[::-1]):
                got[b].extend(page_frames(b, env, a, os.path.join(tmp, "trace%d" % k)))
                k += 1
    print("%s, %dx%d, %d pages x %d rounds" % (a.text, a.width, a.height, a.pages, a.rounds))
    med = {}
    for b in builds:
        c = got[b]
        q = statistics.quantiles(c, n=4)
        med[b] = statistics.median(c)
        print("%s: a page's frame, UI-thread CPU p50 %.3f ms (quartiles %.3f-%.3f, %d frames)"
              % (b, med[b], q[0], q[2], len(c)))
    if a.also:
        print("**%s / %s: %.2fx**" % (a.also, a.tokterm, med[a.also] / med[a.tokterm]))
    print("# load average at end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
