#!/usr/bin/env python3
"""bench/pool.py: the rows of several run-all runs pooled (issue 14).

Logs are written here in the shape the benchmarks print (their per-round lines), with values
chosen so that pooling and a single run's median disagree: the pooled median of all rounds is
not the median of the runs' medians, and the pooled p99 of all frames is not any run's p99.
The benchmarks' own print statements must still carry the lines pool.py reads (a renamed line
would leave pool.py reading nothing). Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POOL = os.path.join(TOP, "bench", "pool.py")
t = ttlib.Tap()


def write(d, name, text):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def tui_log(ratios, delays):
    out = ["# stream: 200000 deltas"]
    for i, r in enumerate(ratios):
        out.append("round %d (SCCS): scripted 8.0 8.0 ms cpu | tui 10.0 10.0 ms cpu, 5/5 "
                   "frames, delay p99 9.0 ms: %.2fx" % (i + 1, r))
    out.append("p50 6.9 ms, p90 9.3 ms, **p99 19.8 ms** (target <= 16 ms), max 20.0 ms")
    out.append("Frame delays, all rounds (ms): " + " ".join("%.1f" % d for d in delays))
    return "\n".join(out) + "\n"


tmp = ttlib.tempdir("tt-pool-")
a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
# run a: three rounds at 1.0x; run b: four at 2.0x. The runs' medians are 1.00 and 2.00; all
# seven rounds pooled: 2.00 (the median of 1 1 1 2 2 2 2), where the median of the two runs'
# medians would say 1.50.
write(a, "tui.log", tui_log([1.0, 1.0, 1.0], [5.0] * 99 + [30.0]))
write(b, "tui.log", tui_log([2.0, 2.0, 2.0, 2.0], [5.0] * 100))
# highlight: a 1.20 1.20 1.20, b 1.00 1.00 1.00 1.00 1.00: pooled 1.00 (met), run a alone not
write(a, "highlight.log", "".join("round %d: HPPH 1 1 1 1 ms (frames 3 3 3 3) | 1.200x\n" % i
                                  for i in range(3)))
write(b, "highlight.log", "".join("round %d: PHHP 1 1 1 1 ms (frames 3 3 3 3) | 1.000x\n" % i
                                  for i in range(5)))
write(a, "stream.log", "Rounds, saving / --no-save, 9.9 MB answer: 1.200 1.200 1.200\n"
                       "Rounds, saving / --no-save, 1 kB answer: 1.000 1.000\n")
write(b, "stream.log", "Rounds, saving / --no-save, 9.9 MB answer: 1.050 1.050\n")

p = subprocess.run([sys.executable, POOL, a, b], capture_output=True, text=True)
out = p.stdout
t.eq(p.returncode, 0, "pool.py exits 0")
rows = {}
for line in out.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 6 and cells[0] not in ("row", "---"):
        rows[cells[0]] = cells
t.diag(out)
r = rows.get("chat CPU / scripted CPU, 200k deltas")
t.ok(r and r[1] == "1.00x 2.00x" and r[2] == "**2.00x**" and r[3].startswith("7 rounds"),
     "the chat's ratio: each run's median, and the median of all rounds (not of the medians)",
     repr(r))
t.ok(r and r[5] == "**no**", "a pooled ratio over its target is marked as missed", repr(r))
r = rows.get("chat token->screen delay p99, 200k deltas")
# 200 frames, one of 30 ms: the pooled p99 interpolates 5.0 and 30.0 at rank 197.01 of 199
t.ok(r and r[2] == "**5.0 ms**" and r[3] == "200 frames, 1 over 16 ms" and r[5] == "yes",
     "the delay: the p99 of all frames of all runs, and the frames over 16 ms counted", repr(r))
t.ok(r and r[1] == "5.3 ms 5.0 ms", "each run's own p99: run a's 100 frames with one of 30 ms "
     "give 5.25 ms, run b's 5.0",
     repr(r))
r = rows.get("highlight / plain")
t.ok(r and r[2] == "**1.00x**" and r[5] == "yes" and r[1] == "1.20x 1.00x",
     "highlight: 8 rounds pooled", repr(r))
r = rows.get("saving / --no-save, 9.9 MB answer")
t.ok(r and r[2] == "**1.20x**" and r[3].startswith("5 rounds"), "saving 9.9 MB: 5 rounds pooled",
     repr(r))
r = rows.get("saving / --no-save, 1 kB answer")
t.ok(r and r[1] == "1.00x —" and r[3].startswith("2 rounds"),
     "a size that only one run has is pooled over that run, the other run's value a dash "
     "in its place", repr(r))
t.ok(list(k for k in rows if k.startswith("saving"))[0].endswith("9.9 MB answer"),
     "sizes keep the order the logs give them")

p = subprocess.run([sys.executable, POOL, os.path.join(tmp, "none")], capture_output=True,
                   text=True)
t.ok(p.returncode != 0 and "not a directory" in p.stderr, "a missing log directory is an error",
     p.stderr)

# the benchmarks still print what pool.py reads
src = {n: open(os.path.join(TOP, "bench", *n.split("/"))).read()
       for n in ("tui/run.py", "stream/run.py", "highlight/run.py", "pool.py")}
t.ok('"Frame delays, all rounds (ms): %s"' in src["tui/run.py"] and
     "Frame delays, all rounds \\(ms\\)" in src["pool.py"],
     "bench/tui/run.py prints the frame delays pool.py reads")
t.ok('"Rounds, saving / --no-save, %s answer: %s"' in src["stream/run.py"] and
     "Rounds, saving / --no-save, (.+?) answer" in src["pool.py"],
     "bench/stream/run.py prints the saving rounds pool.py reads")
hl_round = r'"round %d%s: %s %s ms \(frames %s\) \| %\.3fx"'
t.ok(re.search(r'print\("round %d \(%s\): scripted', src["tui/run.py"]) is not None and
     re.search(hl_round, src["highlight/run.py"]) is not None,
     "the round lines of bench/tui and bench/highlight keep their shape")
sys.exit(t.done())
