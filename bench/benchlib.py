"""Helpers shared by the benchmark scripts (bench/*/run.py, bench/run-all.sh).

measure(): one child process timed by bench/rusage.c (wall, CPU, peak RSS of the child itself, in
microseconds). Row(): one line of run-all's table, written as JSON to the file given by --rows (or
$BENCH_ROWS), so that bench/run-all.sh can print every benchmark's ratios in one table.
"""
import json
import os
import statistics
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
_RUSAGE = []


def rusage_bin():
    """bench/rusage.c compiled once into $TMPDIR/tokterm-bench (again when the source changes)."""
    if not _RUSAGE:
        src = os.path.join(TOP, "bench", "rusage.c")
        d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tokterm-bench-%d" % os.getuid())
        os.makedirs(d, exist_ok=True)
        exe = os.path.join(d, "rusage")
        if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
            subprocess.run(["cc", "-O2", "-o", exe + ".tmp", src], check=True)
            os.replace(exe + ".tmp", exe)
        _RUSAGE.append(exe)
    return _RUSAGE[0]


def measure(argv, env, stdout=None, stdin=None, adopt=False):
    """Run argv (stdout to /dev/null unless a path is given) under bench/rusage.c; returns
    (wall s, cpu s = user+sys, peak RSS KiB, exit code), all of the child itself, in
    microseconds (GNU time's CPU has 10 ms steps). adopt: rusage -a, so the CPU also counts
    what the child left running when it exited, and a fifth value is the wall time until
    the last of those was gone (the wall time when there was none)."""
    rfd, wfd = os.pipe()
    out = open(stdout or os.devnull, "wb")
    inp = open(stdin, "rb") if stdin else subprocess.DEVNULL
    try:
        p = subprocess.Popen([rusage_bin()] + (["-a"] if adopt else []) + ["/dev/fd/%d" % wfd] +
                             argv, env=env, stdin=inp,
                             stdout=out, stderr=subprocess.DEVNULL, pass_fds=(wfd,))
        os.close(wfd)
        res = b""
        while True:
            chunk = os.read(rfd, 4096)
            if not chunk:
                break
            res += chunk
        os.close(rfd)
        p.wait()
    finally:
        out.close()
        if stdin:
            inp.close()
    f = res.decode().split()
    wall, user, sys_, rss, code = float(f[0]), float(f[1]), float(f[2]), int(f[3]), int(f[4])
    if code != 0:
        sys.stderr.write("%s failed (%d)\n" % (os.path.basename(argv[0]), code))
    if adopt:
        return wall, user + sys_, rss, code, float(f[5])
    return wall, user + sys_, rss, code


def interleave(cmds, rounds, env_of=None, warmup=1):
    """Run each command of the dict {name: argv or callable} once per round, in turn, rounds
    times (after `warmup` unmeasured rounds); returns {name: [(wall, cpu, rss, code), ...]}.
    The order rotates each round, so that none always runs right after the same other."""
    names = list(cmds)
    res = {k: [] for k in names}
    for r in range(-warmup, rounds):
        k0 = r % len(names)
        for k in names[k0:] + names[:k0]:
            c = cmds[k]
            m = c() if callable(c) else measure(c, env_of(k) if env_of else None)
            if r >= 0:
                res[k].append(m)
    return res


def med(rows, i=0):
    return statistics.median(x[i] for x in rows)


def pratio(a, b, i=0):
    """The median of the per-round ratios a[r][i] / b[r][i] (each round ran both back to back:
    steadier than the ratio of the medians when the load of a shared machine drifts)."""
    return statistics.median(x[i] / max(y[i], 1e-9) for x, y in zip(a, b))


def pct(v, p):
    """The p-th percentile of v, interpolated between the two nearest ranks (nan when empty):
    bench/tui's delays and bench/pool.py's pooled ones."""
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def pspread(a, b, i=0):
    """The first and third quartiles of the per-round ratios (None with fewer than 4 rounds)."""
    v = [x[i] / max(y[i], 1e-9) for x, y in zip(a, b)]
    if len(v) < 4:
        return None
    q = statistics.quantiles(v, n=4)
    return [q[0], q[2]]


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def commit():
    """The short commit of the source tree, with "-dirty" when tracked files differ from it
    ($BENCH_COMMIT when set: the commit a build of an exported tree was made from)."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        c = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True).stdout.strip()
        d = subprocess.run(["git", "-C", TOP, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
        return (c or "?") + ("-dirty" if d else "")
    except OSError:
        return "?"


def header(name, extra=""):
    print("# %s: commit %s, %s, %d cores, load average %s%s" %
          (name, commit(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
           loadavg(), (", " + extra) if extra else ""))


class Rows:
    """Rows of run-all's table: measure, tokterm, baseline, ratio, target ("<= 1.15"),
    appended as JSON lines to path (nothing when path is empty)."""

    def __init__(self, path):
        self.path = path or os.environ.get("BENCH_ROWS") or ""

    def add(self, measure, tokterm, baseline, ratio, target, value=None, note="", spread=None):
        """tokterm, baseline: the shown values (text); ratio: tokterm / baseline (or baseline /
        tokterm where more is better), compared with target ("<= 1.15", ">= 10"); ratio None
        and value V: an absolute measure, V compared with target ("<= 50" for "<= 50 ms");
        spread: [q1, q3] of the per-round ratios."""
        if not self.path:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps({"measure": measure, "tokterm": tokterm, "baseline": baseline,
                                "ratio": ratio, "value": value, "target": target,
                                "note": note, "spread": spread}) + "\n")


def ms(s):
    return "%.1f ms" % (s * 1e3)
