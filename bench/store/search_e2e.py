#!/usr/bin/env python3
"""End-to-end time of `tokterm search` (process start, store open, search, printing) for each
query store_bench runs, on a database that store_bench kept.

usage:
    bench/store/run.sh --cache 0 --keep --dir /tmp/tt-store-db        # 100,000 messages
    make -C _build/store-bench src/tokterm
    bench/store/search_e2e.py --tokterm _build/store-bench/src/tokterm \\
        --db /tmp/tt-store-db/messages.db [--rounds 20] [--tokterm OTHER ...]

The queries are the words store_bench prints (its pseudo-random vocabulary has a fixed seed).
Each command runs with an empty HOME and XDG directories so that no configuration is read.
The first line times `tokterm --version`: the start-up cost every command pays. With several
--tokterm binaries (say, before and after a change) their runs alternate, so that the load of a
shared machine weighs on each alike.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.dont_write_bytecode = True
from benchlib import pct  # noqa: E402  (interpolated between the two nearest ranks)

QUERIES = [
    ["popo"],                     # the most common word (73% of messages)
    ["cortrarel"],                # middling
    ["lorelka"],                  # rare
    ["gonelcor", "anobterish"],   # two words
    ['"somde farelcor"'],         # phrase
    ["piru"],                     # 4-character substring
    ["中国"],                     # CJK, 2 characters (scan)
    ["图书馆"],                   # CJK, 3 characters
    ["zz"],                       # 2 characters, absent (scan of every message)
    ['NEAR("x'],                  # hostile
    ["北京大学", "数据库"],       # CJK words
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", required=True, action="append")
    ap.add_argument("--db", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tt-search-e2e-") as home:
        bench(a, home)


def bench(a, home):
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=home + "/config",
               XDG_DATA_HOME=home + "/data", XDG_CACHE_HOME=home + "/cache",
               XDG_STATE_HOME=home + "/state")
    for k in ("TOKTERM_PROFILE", "OPENAI_API_KEY"):
        env.pop(k, None)

    def run(tok, args):
        t = time.perf_counter()
        p = subprocess.run([tok] + args, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        dt = (time.perf_counter() - t) * 1e3
        # exit 1 is `tokterm search`'s "no matches" (grep's convention); anything else fails
        nomatch = p.returncode == 1 and b"no matches" in p.stderr
        if p.returncode != 0 and not nomatch:
            sys.exit("tokterm %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                   p.stderr.decode(errors="replace")[:300]))
        return dt, p.stdout

    with open("/proc/loadavg") as f:
        print("# load average: " + " ".join(f.read().split()[:3]))
    toks = a.tokterm
    tag = (lambda i: "  [%d]" % (i + 1)) if len(toks) > 1 else (lambda i: "")
    for i, tok in enumerate(toks):
        if len(toks) > 1:
            print("# [%d] %s" % (i + 1, tok))

    def measure(args):
        v = [[] for _ in toks]
        out = [b""] * len(toks)
        for _ in range(a.rounds):
            for i, tok in enumerate(toks):
                dt, out[i] = run(tok, args)
                v[i].append(dt)
        return v, out

    v, _ = measure(["--version"])
    for i in range(len(toks)):
        print("%-28s n=%-4d p50=%7.1f ms  p99=%7.1f ms%s" % (
            "tokterm --version", len(v[i]), pct(v[i], 50), pct(v[i], 99), tag(i)))
    every = [[] for _ in toks]
    for q in QUERIES:
        v, out = measure(["--db", a.db, "search"] + q)
        for i in range(len(toks)):
            if len(q[0]) >= 3 or len(q) > 1:
                every[i] += v[i]
            hits = sum(1 for line in out[i].splitlines()
                       if line and not line.startswith(b" "))
            print("%-28s n=%-4d p50=%7.1f ms  p99=%7.1f ms  hits=%d%s" % (
                "search " + " ".join(q), len(v[i]), pct(v[i], 50), pct(v[i], 99), hits, tag(i)))
    for i in range(len(toks)):
        print("%-28s n=%-4d p50=%7.1f ms  p99=%7.1f ms%s" % (
            "search, >=3-char queries", len(every[i]), pct(every[i], 50), pct(every[i], 99),
            tag(i)))
    with open("/proc/loadavg") as f:
        print("# load average: " + " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
