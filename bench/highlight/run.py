#!/usr/bin/env python3
"""Highlighting's cost in the chat: a 10,000-line code block, with and without (issue 16).

An answer holding one ```python block of --lines lines (default 10,000; realistic code: defs,
docstrings, comments, strings, numbers, calls) in deltas of a few words each, sent in one write
(chunk=whole), and the same answer with the block under a bare ``` fence (plain code: what
highlight = false makes of every block), are answered by one chat process in tmux (120x40,
--incognito), in the order highlighted, plain, plain, highlighted (the next round the other
way round), with /new between them, after a first plain answer that is not counted (the
process's warm-up, ~30 ms, would fall on the first of the four). The answer's CPU is read by the chat itself: --trace writes
the process's CPU clock (all threads, nanoseconds) when the request is sent, after every frame
and when text a large batch set aside is all styled; an answer costs the difference between its
request and the frame that shows its end, or that last styling if it comes later (styling,
drawing, the network thread's parsing; not start-up, keys or quitting). A round's
ratio is the highlighted answers' CPU over the plain ones'; the median of the rounds' ratios
is printed with its quartiles. --aa makes both blocks plain (the noise floor at this load);
--also PATH runs a second build in the same rounds (before / after side by side).

usage: bench/highlight/run.py [--tokterm PATH] [--also PATH] [--lines N] [--rounds 21] [--aa]
                              [--callgrind DIR]
Target (issue 16): the answer's CPU with highlighting <= 1.10x without.
--callgrind DIR instead runs the chat (tokterm-tui) once per mode (highlight = true / false in
the config) under valgrind --tool=callgrind and prints the instruction totals and their ratio
(whole processes; load-independent).
"""
import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
_spec = importlib.util.spec_from_file_location("tuibench", os.path.join(HERE, "..", "tui",
                                                                         "run.py"))
tuibench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tuibench)
ttlib = tuibench.ttlib

PY_LINES = (
    "def {name}(self, {arg}: int, *, limit: float = 0.5) -> dict[str, int]:",
    "    \"\"\"Return the {arg} counts of {name}, at most limit per row.\"\"\"",
    "    result = {{}}  # counts by key",
    "    for i, row in enumerate(self.rows[{n}:{m}]):",
    "        if row.{arg} is None or i > {n}:",
    "            continue",
    "        key = f\"{name}-{{i}}\" + 'x' * {n}",
    "        result[key] = result.get(key, 0) + int(row.{arg} * 0x{n:x})",
    "    return sorted(result.items(), key=lambda kv: (kv[1], kv[0]))[:{m}]",
    "",
    "@functools.lru_cache(maxsize={m})",
    "class {cname}(Base):",
    "    '''A {name} that keeps {m} items and prints them.'''",
    "    total = {n}.25e3",
    "    print(\"{name}\", len(self.items), True, False)",
)
NAMES = ("parse_rows", "merge_keys", "window_fit", "read_chunk", "count_tokens", "split_cells",
         "flush_table", "decode_utf8", "wrap_line", "style_span")


def code_lines(n, seed=16):
    rnd = random.Random(seed)
    out = []
    while len(out) < n:
        name = rnd.choice(NAMES)
        for t in PY_LINES:
            out.append(t.format(name=name, arg=rnd.choice(("size", "width", "value")),
                                n=rnd.randint(1, 999), m=rnd.randint(1000, 9999),
                                cname=name.title().replace("_", "")))
            if len(out) == n:
                break
    return out


def fixture(dirname, lines, seed=16, info="python", name="code.sse"):
    """DIR/NAME: the answer "Here is the code:" + a ```INFO block of `lines` lines, in deltas
    of 1-4 words; returns (bytes, deltas)."""
    rnd = random.Random(seed)
    text = ("Here is the code:\n\n```" + info + "\n" + "\n".join(code_lines(lines)) +
            "\n```\n\nDone.\n")
    words = text.split(" ")
    pieces, i = [], 0
    while i < len(words):
        k = rnd.randint(1, 4)
        pieces.append(" ".join(words[i:i + k]) + (" " if i + k < len(words) else ""))
        i += k

    def ev(obj):
        return ("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()

    def chunk(delta, finish=None):
        return {"id": "c", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason":
                                               finish}]}
    parts = [ev(chunk({"role": "assistant", "content": ""}))]
    parts += [ev(chunk({"content": p})) for p in pieces]
    parts.append(ev(chunk({}, "stop")))
    parts.append(b"data: [DONE]\n\n")
    data = b"".join(parts)
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(data)
    return len(data), len(pieces)


def env_for(srv, spec, highlight):
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write("highlight = %s\n" % ("true" if highlight else "false"))
    return ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base(spec)})


def callgrind(a, tokterm, envs, tmp):
    os.makedirs(a.callgrind, exist_ok=True)
    chat = os.path.join(os.path.dirname(tokterm), "tokterm-tui")
    totals = {}
    for h in (True, False):
        out = os.path.join(os.path.abspath(a.callgrind), "callgrind.%s" %
                           ("highlight" if h else "plain"))
        wrap = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
        tuibench.tui(chat if os.path.exists(chat) else tokterm, envs[h], a.width, a.height,
                     tmp, 0, wrap)
        for line in open(out):
            if line.startswith("totals:") or line.startswith("summary:"):
                totals[h] = int(line.split()[1])
        print("highlight = %s: %s instructions (%s)" % (str(h).lower(),
                                                       format(totals[h], ","), out))
    print("highlight / plain instructions, whole processes: %.3fx; %.0f instructions per code "
          "line" % (totals[True] / totals[False], (totals[True] - totals[False]) / a.lines))


def chat_round(tokterm, env, srv, specs, a, tmp, r):
    """One chat process answering len(specs) prompts, each from the next queued spec, with
    /new between them (so no answer is the history of the next request); answers_cpu of its
    trace, and its whole CPU (wait4)."""
    trace = os.path.join(tmp, "trace%d.txt" % r)
    timing = os.path.join(tmp, "time%d.txt" % r)
    srv.clear_queue()
    srv.queue(specs)
    with ttlib.Tmux(a.width, a.height) as tm:
        tm.run(tuibench.rusage_cmd(timing, [tokterm, "--incognito", "--trace", trace]), env)
        if not tm.wait_for("F1", 10):
            raise RuntimeError("the chat did not start:\n" + tm.capture())
        for k in range(len(specs)):
            if k:
                tm.send_text("/new")
                tm.send("Enter")
                time.sleep(0.1)
            tm.send_text("x")
            tm.send("Enter")
            deadline = time.monotonic() + 120
            while sum(1 for ln in open(trace) if ln.startswith("E ")) <= k:
                if time.monotonic() > deadline:
                    raise RuntimeError("answer %d did not end:\n%s" % (k + 1, tm.capture()))
                time.sleep(0.05)
            time.sleep(0.3)  # the frame that shows the end
        tm.send("C-d")
        code = tm.wait_exit(10)
    if code != 0:
        raise RuntimeError("the chat exited with %r" % code)
    got = tuibench.answers_cpu(trace)
    if len(got) != len(specs):
        raise RuntimeError("%d answers in the trace, %d asked" % (len(got), len(specs)))
    return got, tuibench.rusage_read(timing)[0]


def q3(v):
    return statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--also", metavar="PATH", help="a second build, in the same rounds")
    ap.add_argument("--lines", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--width", type=int, default=120)
    ap.add_argument("--height", type=int, default=40)
    ap.add_argument("--aa", action="store_true",
                    help="A/A check: both blocks plain (the ratio's noise and order effect)")
    ap.add_argument("--callgrind", metavar="DIR")
    a = ap.parse_args()
    builds = [os.path.abspath(a.tokterm)] + ([os.path.abspath(a.also)] if a.also else [])
    tokterm = builds[0]
    if not ttlib.Tmux.available():
        sys.exit("tmux is needed")
    tmp = ttlib.tempdir("tt-hlbench-")
    fixtures = ttlib.tempdir("tt-hlbench-fx-")
    size, ndeltas = fixture(fixtures, a.lines)
    fixture(fixtures, a.lines, info="", name="plain.sse")
    t_start = time.monotonic()
    with ttlib.FakeServer(extra_args=["--fixtures", fixtures]) as srv:
        spec = "replay=code.sse,chunk=whole"
        spec_of = {"H": "replay=plain.sse,chunk=whole" if a.aa else spec,
                   "P": "replay=plain.sse,chunk=whole"}
        print("# %d-line python block, %d deltas, %.1f MB (%s); chat %dx%d in tmux; %d rounds; "
              "tokterm %s%s" % (a.lines, ndeltas, size / 1e6, spec, a.width, a.height, a.rounds,
                                " and ".join(builds), "; A/A: both plain" if a.aa else ""))
        print("# load average at start: %.2f %.2f %.2f" % os.getloadavg())
        if a.callgrind:
            envs = {h: env_for(srv, spec, h) for h in (True, False)}
            callgrind(a, tokterm, envs, tmp)
            return
        env = env_for(srv, "reply=x", True)
        keys = ("ans", "ui", "fcpu", "frames")
        got = {(b, m): {k: [] for k in keys} for b in builds for m in "HP"}
        whole = {b: [] for b in builds}
        ratios = {b: [] for b in builds}
        for r in range(a.rounds):
            order = "HPPH" if r % 2 == 0 else "PHHP"
            for b in (builds if r % 2 == 0 else builds[::-1]):
                # a first answer, not counted, warms the process up (~30 ms: the first
                # frames, the wrapping tables, the styles): it fell on H in even rounds and
                # on P in odd ones, and skewed each round's ratio
                res, cpu = chat_round(b, env, srv, [spec_of["P"]] + [spec_of[m] for m in order],
                                      a, tmp, r)
                res = res[1:]
                whole[b].append(cpu)
                for m, x in zip(order, res):
                    for k in keys:
                        got[(b, m)][k].append(x[k])
                hs = sum(x["ans"] for m, x in zip(order, res) if m == "H")
                ps = sum(x["ans"] for m, x in zip(order, res) if m == "P")
                ratios[b].append(hs / ps)
                print("round %d%s: %s %s ms (frames %s) | %.3fx"
                      % (r + 1, "" if len(builds) == 1 else " " + b, order,
                         " ".join("%.1f" % (x["ans"] * 1e3) for x in res),
                         " ".join(str(x["frames"]) for x in res), ratios[b][-1]))
                sys.stdout.flush()
        load_end = os.getloadavg()
    med = statistics.median
    for b in builds:
        hi, pl = got[(b, "H")], got[(b, "P")]
        q = q3(ratios[b])
        ratio = med(ratios[b])
        print()
        if len(builds) > 1:
            print("## %s" % b)
        print("| | answer CPU, all threads (median) | UI thread | its frames | frames | "
              "per frame |")
        print("|---|---|---|---|---|---|")
        for h, g in ((True, hi), (False, pl)):
            print("| chat, highlight = %s | %.1f ms | %.1f ms | %.1f ms | %g | %.2f ms |"
                  % ("true" if h else "false", med(g["ans"]) * 1e3, med(g["ui"]) * 1e3,
                     med(g["fcpu"]) * 1e3, med(g["frames"]),
                     med(f / n for f, n in zip(g["fcpu"], g["frames"])) * 1e3))
        print("| **highlight / plain** | **%.2fx** | %.2fx | %.2fx | | |"
              % (ratio, med(hi["ui"]) / med(pl["ui"]), med(hi["fcpu"]) / med(pl["fcpu"])))
        print()
        print("Stream only (start-up excluded), highlight / plain: **%.2fx** (median of the "
              "rounds' ratios, quartiles %.2f-%.2f; target <= 1.10x)" % (ratio, q[0], q[2]))
        print("Highlighting costs %.2f us per code line (median difference / %d lines); the "
              "whole chat process (5 answers, start-up, quitting) %.3f s CPU"
              % ((med(hi["ans"]) - med(pl["ans"])) * 1e6 / a.lines, a.lines, med(whole[b])))
    print("# load average at end: %.2f %.2f %.2f; bench run time %.0f s"
          % (load_end + (time.monotonic() - t_start,)))


if __name__ == "__main__":
    main()
