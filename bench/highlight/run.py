#!/usr/bin/env python3
"""Highlighting's cost in the chat: a 10,000-line code block, with and without (issue 16).

The same fake-server stream, an answer holding one ```python block of --lines lines (default
10,000; realistic code: defs, docstrings, comments, strings, numbers, calls) in deltas of a few
words each, sent in one write (chunk=whole), is shown several rounds, interleaved, by the chat in
tmux (120x40, --incognito):
  (a) highlight = true    (the default)
  (b) highlight = false   (the config option: every code line in the one code slot)
CPU time (user+sys) of each tokterm process comes from wait4(2) (bench/tui/run.py's helpers);
a one-delta answer of each mode, round by round, is subtracted (start-up, libcurl, the request,
quitting), so the ratio compares the streaming and rendering only. Both ratios (whole process,
stream only) are printed; also the highlighting's cost per code line.

usage: bench/highlight/run.py [--tokterm PATH] [--lines N] [--rounds 11] [--callgrind DIR]
Target (issue 16): stream-only CPU with highlighting <= 1.10x without.
--callgrind DIR instead runs the chat (tokterm-tui) once per mode under valgrind --tool=callgrind
and prints the instruction totals and their ratio (whole processes; load-independent).
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


def fixture(dirname, lines, seed=16):
    """DIR/code.sse: the answer "Here is the code:" + a python block of `lines` lines, in
    deltas of 1-4 words; returns (bytes, deltas)."""
    rnd = random.Random(seed)
    text = "Here is the code:\n\n```python\n" + "\n".join(code_lines(lines)) + "\n```\n\nDone.\n"
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
    with open(os.path.join(dirname, "code.sse"), "wb") as f:
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--lines", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--width", type=int, default=120)
    ap.add_argument("--height", type=int, default=40)
    ap.add_argument("--callgrind", metavar="DIR")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    if not ttlib.Tmux.available():
        sys.exit("tmux is needed")
    tmp = ttlib.tempdir("tt-hlbench-")
    fixtures = ttlib.tempdir("tt-hlbench-fx-")
    size, ndeltas = fixture(fixtures, a.lines)
    t_start = time.monotonic()
    with ttlib.FakeServer(extra_args=["--fixtures", fixtures]) as srv:
        spec = "replay=code.sse,chunk=whole"
        envs = {h: env_for(srv, spec, h) for h in (True, False)}
        env1 = {h: env_for(srv, "reply=x", h) for h in (True, False)}
        print("# %d-line python block, %d deltas, %.1f MB (%s); chat %dx%d in tmux; %d rounds; "
              "tokterm %s" % (a.lines, ndeltas, size / 1e6, spec, a.width, a.height, a.rounds,
                              tokterm))
        print("# load average at start: %.2f %.2f %.2f" % os.getloadavg())
        if a.callgrind:
            callgrind(a, tokterm, envs, tmp)
            return
        cpu = {True: [], False: []}
        only = {True: [], False: []}
        ratios = []
        for r in range(a.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {}
            for h in order:
                run = tuibench.tui(tokterm, envs[h], a.width, a.height, tmp, r)
                idle = tuibench.tui_idle(tokterm, env1[h], a.width, a.height, tmp, r)
                got[h] = run["cpu"] - idle
                cpu[h].append(run["cpu"])
                only[h].append(got[h])
            ratios.append(got[True] / got[False] if got[False] > 0 else float("nan"))
            print("round %d: highlight %.3f s cpu (%.3f stream only) | plain %.3f s cpu "
                  "(%.3f stream only) | %.3fx" % (r + 1, cpu[True][-1], got[True],
                                                  cpu[False][-1], got[False], ratios[-1]))
        load_end = os.getloadavg()
    hw, pw = statistics.median(cpu[True]), statistics.median(cpu[False])
    ho, po = statistics.median(only[True]), statistics.median(only[False])
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    ratio = statistics.median(ratios)
    print()
    print("| | CPU user+sys, whole process (median) | stream only (median) |")
    print("|---|---|---|")
    print("| chat, highlight = true | %.3f s | %.1f ms |" % (hw, ho * 1000))
    print("| chat, highlight = false | %.3f s | %.1f ms |" % (pw, po * 1000))
    print("| **highlight / plain** | **%.2fx** | **%.2fx** |" % (hw / pw, ratio))
    print()
    print("Stream only (start-up excluded), highlight / plain: **%.2fx** (median of the rounds' "
          "ratios, quartiles %.2f-%.2f; target <= 1.10x)" % (ratio, q[0], q[2]))
    print("Highlighting costs %.2f us per code line (median difference / %d lines)"
          % ((ho - po) * 1e6 / a.lines, a.lines))
    print("# load average at end: %.2f %.2f %.2f; bench run time %.0f s"
          % (load_end + (time.monotonic() - t_start,)))


if __name__ == "__main__":
    main()
