#!/usr/bin/env python3
"""Pool the noisiest rows of several bench/run-all.sh runs (issue 14).

One run's median of 11-22 rounds moves with the machine: on the project's 2-vCPU VMs the same
row has read 0.98x and 1.18x in two runs of one build an hour apart, and a round's own ratio
spans 0.8-2.4x. A row of one run says little about a build when its spread is that wide; the
rounds of several runs of the same build say more. This reads the logs of runs made with
`bench/run-all.sh --logs DIR` (one DIR per run) and prints, for each row below, every run's own
value and the value over all their rounds together, against the target:

  chat CPU / scripted CPU, 200k deltas and Markdown   the median of all rounds' ratios
  chat token->screen delay p99, both streams          the p99 of all frames of all rounds
  highlight / plain                                   the median of all rounds' ratios
  saving / --no-save, each answer size                the median of all rounds' ratios

It decides nothing: run-all's table is the verdict of each run. Pooling only pools runs of one
build on one machine (the caller's choice of DIRs), and the rounds must be the same kind (a
log without the per-round lines, from before they were printed, is left out of that row: "—"
in its place among each run's values).

usage: bench/pool.py LOGDIR [LOGDIR...]
"""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from benchlib import pct  # noqa: E402


def read(d, name):
    try:
        with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tui_rounds(text):
    """bench/tui/run.py: each round's chat / scripted ratio."""
    return [float(m) for m in re.findall(r"^round \d+ \([A-Z]+\):.*: ([0-9.]+)x$", text, re.M)]


def tui_delays(text):
    m = re.search(r"^Frame delays, all rounds \(ms\): (.*)$", text, re.M)
    return [float(x) for x in m.group(1).split()] if m else []


def highlight_rounds(text):
    return [float(m) for m in re.findall(r"^round \d+: .*\| ([0-9.]+)x$", text, re.M)]


def saving_rounds(text):
    """bench/stream/run.py: {answer size: each round's saving / --no-save ratio}."""
    return {m.group(1): [float(x) for x in m.group(2).split()]
            for m in re.finditer(r"^Rounds, saving / --no-save, (.+?) answer: (.*)$", text,
                                 re.M)}


def main():
    dirs = sys.argv[1:]
    if not dirs or any(d.startswith("-") for d in dirs):
        sys.exit(__doc__.split("usage: ")[1].strip())
    for d in dirs:
        if not os.path.isdir(d):
            sys.exit("pool: %s is not a directory of run-all logs" % d)
    rows = []  # the table's cells: row, each run, pooled, pooled over, target, met

    def add(label, target, unit, each, pooled, over):
        """each: one value per run in the order given, None for a run without the lines."""
        fmt = "%.2fx" if unit == "x" else "%.1f ms"
        rows.append((label, " ".join("—" if v is None else fmt % v for v in each),
                     "**%s**" % (fmt % pooled), over,
                     "<= %g%s" % (target, "x" if unit == "x" else " ms"),
                     "yes" if pooled <= target else "**no**"))

    def ratio_row(label, target, per_run):
        allv = [x for v in per_run for x in v]
        if not allv:
            return
        q = statistics.quantiles(allv, n=4) if len(allv) >= 4 else [allv[0]] * 3
        add(label, target, "x", [statistics.median(v) if v else None for v in per_run],
            statistics.median(allv), "%d rounds, quartiles %.2f-%.2f" % (len(allv), q[0], q[2]))

    def delay_row(label, per_run):
        allv = [x for v in per_run for x in v]
        if not allv:
            return
        add(label, 16.0, "ms", [pct(v, 99) if v else None for v in per_run], pct(allv, 99),
            "%d frames, %d over 16 ms" % (len(allv), sum(1 for x in allv if x > 16)))

    for log, what in (("tui.log", "200k deltas"), ("tui-md.log", "Markdown")):
        texts = [read(d, log) for d in dirs]
        ratio_row("chat CPU / scripted CPU, %s" % what, 3.0 if what == "Markdown" else 1.3,
                  [tui_rounds(t) for t in texts])
        delay_row("chat token->screen delay p99, %s" % what, [tui_delays(t) for t in texts])
    ratio_row("highlight / plain", 1.10, [highlight_rounds(read(d, "highlight.log"))
                                          for d in dirs])
    saves = [saving_rounds(read(d, "stream.log")) for d in dirs]
    sizes = []  # in the order the logs give them (smallest first)
    for s in saves:
        sizes += [k for k in s if k not in sizes]
    for size in sizes:
        ratio_row("saving / --no-save, %s answer" % size, 1.10, [s.get(size, []) for s in saves])

    print("Pooled over %d runs: %s" % (len(dirs), ", ".join(dirs)))
    print()
    print("| row | each run | pooled | pooled over | target | met (pooled) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s |" % " | ".join(r))
    if not rows:
        print("(none of the logs has the per-round lines this reads)")


if __name__ == "__main__":
    main()
