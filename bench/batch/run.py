#!/usr/bin/env python3
"""Batch throughput benchmark (issue 6): N prompts at concurrency C against a server that waits
50 ms before each answer, `tokterm batch` side by side with the official openai npm SDK doing
the same requests with a pool of C workers (bench/batch/sdk.mjs).

  ideal = ceil(N / C) x 50 ms  efficiency = ideal / wall time of the whole process

The ideal is the time of a client that costs nothing: each of the C places on the wire holds
one request for 50 ms at least, so ceil(N / C) requests follow each other on one of them
(1,000 / 32: 32 rounds, 1.600 s; N x 50 ms / C = 1.5625 s, the ideal used before 2026-12-01,
is a fraction of a round no client can reach: it capped every tool at 97.7 %).

tokterm runs as a user runs it: in one HOME that keeps its database from one round to the next
(created by an untimed warm-up run), with prompts that carry the round's number, so no answer
comes from the cache (every tool sends the same prompts). "tokterm, new HOME" is the first run
ever: the database created and the endpoint's limits unknown (a one-time cost, shown apart).

The server is bench/batch/leanserver.c (compiled here with cc: epoll + a timerfd, answers 50 ms
after each request to ~0.1 ms); --server asyncio uses bench/batch/server.py (Python asyncio,
wakes up to 1 ms late and spends its own event loop at 600 req/s) and --server fake
tests/fake-openai/server.py (header_delay_ms=50, a thread per connection). `curl --parallel`
sending the same 1,000 requests at the same concurrency is the C floor: what a client with no
work of its own (no JSON, no output lines) gets from this server on this machine. Wall, CPU
(user+sys) come from wait4(2), peak RSS from /usr/bin/time.

Then the rate-limit check: the same batch against the fake server with rpm=600 (a bucket of 600
requests refilled at 600 a minute, 429 when empty); every request that got a 429 is counted
from the server's log. tokterm should pace itself to zero; the SDK retries what failed. (tokterm
paces a per-minute limit a second's worth at a time, as servers may enforce it: this check
takes it N / 9.7 s, not (N - 600) / 10.) And the short window (issue 18): --window-n prompts at
-j 8 and -j 16 against rpm=600,burst=10,report=minute (600 a minute reported, 10 a second
enforced): 429s (target <= 2 %), failed prompts, throughput as a share of the limit.

usage: bench/batch/run.py [--tokterm PATH] [--n 1000] [--concurrency 32] [--delay-ms 50]
                          [--rounds 3] [--server lean|fake] [--rpm 600] [--rpm-n N] [--no-rpm]
                          [--window-n 120] [--rows FILE]
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.dont_write_bytecode = True
import benchlib  # noqa: E402
import ttlib  # noqa: E402


def run_time(err):
    """The run's own time from its summary line on stderr (start-up and exit excluded):
    tokterm batch prints "...; 1.72 s, 581.0/s", sdk.mjs "sdk batch: N items; 1.720 s"."""
    for line in err.decode("utf-8", "replace").splitlines():
        m = re.search(r"; ([0-9.]+) s", line)
        if m and ("tokterm batch:" in line or "sdk batch:" in line):
            return float(m.group(1))
    return float("nan")


def measure(argv, env, out_path):
    """Run argv with stdout to out_path: (wall s, run s, cpu s, peak RSS MiB, exit code)."""
    # Peak RSS through /usr/bin/time: wait4's ru_maxrss of a child forked from this Python
    # process counts the pages of the Python copy it was before exec (about 23 MiB).
    tfile = out_path + ".time"
    timer = ["/usr/bin/time", "-f", "%M", "-o", tfile] if os.path.exists("/usr/bin/time") else []
    t0 = time.perf_counter()
    with open(out_path, "wb") as out:
        p = subprocess.Popen(timer + argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 3):
        sys.stderr.write("%s: exit %d: %s\n" % (argv[0], p.returncode, err.decode()[-500:]))
    rss = ru.ru_maxrss / 1024.0
    if timer:
        with open(tfile) as f:
            lines = [l for l in f.read().split() if l.isdigit()]
            rss = int(lines[-1]) / 1024.0 if lines else float("nan")
    return wall, run_time(err), ru.ru_utime + ru.ru_stime, rss, p.returncode


def count_lines(path):
    ok = failed = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("error") is None and r.get("outcome", "complete") == "complete":
                ok += 1
            else:
                failed += 1
    return ok, failed


class LeanServer:
    def __init__(self, delay_ms, kind="lean"):
        self.dir = ttlib.tempdir("tt-bench-srv-")
        pf = os.path.join(self.dir, "port")
        if kind == "lean":
            exe = os.path.join(self.dir, "leanserver")
            subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", exe,
                            os.path.join(HERE, "leanserver.c")], check=True)
            argv = [exe]
        else:
            argv = [sys.executable, os.path.join(HERE, "server.py")]
        # The server stands in for an API on other machines: it runs before the clients it
        # serves (nice -10 when allowed), so that on a loaded 2-core machine its late answers
        # are not counted against the client (its lateness is printed with each tool's row).
        def first():
            try:
                os.nice(-10)
            except OSError:
                pass
        self.proc = subprocess.Popen(argv + ["--port-file", pf, "--delay-ms", str(delay_ms)],
                                     preexec_fn=first)
        deadline = time.monotonic() + 10
        while not os.path.exists(pf):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("bench server did not start")
            time.sleep(0.02)
        with open(pf) as f:
            self.port = int(f.read())

    def base(self):
        return "http://127.0.0.1:%d/v1" % self.port

    def stats(self, reset=False):
        """The server's counters; reset: empty its lateness and turnaround samples."""
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (
                self.port, "_reset" if reset else "_stats")) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--delay-ms", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server", choices=("lean", "asyncio", "fake"), default="lean")
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--rpm-n", type=int, default=0, help="requests for the rpm check (default --n)")
    ap.add_argument("--no-rpm", action="store_true")
    ap.add_argument("--window-n", type=int, default=120,
                    help="prompts for the short-window check (0: skip it)")
    ap.add_argument("--rows", default="", help="append run-all's table row (JSON) here")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    benchlib.header("batch (bench/batch/run.py)", "tokterm %s" % tokterm)
    node = shutil.which("node")
    sdk_ok = bool(node) and os.path.isdir(os.path.join(HERE, "node_modules", "openai"))
    if node and not sdk_ok:
        print("installing the openai npm package into bench/batch/node_modules ...")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=HERE)
        sdk_ok = os.path.isdir(os.path.join(HERE, "node_modules", "openai"))

    work = ttlib.tempdir("tt-bench-batch-")

    def prompt(r, i):
        return "round %d benchmark prompt number %d" % (r, i)

    def inp(r):  # the input of round r (0: the warm-up), written once
        path = os.path.join(work, "in%d.jsonl" % r)
        if not os.path.exists(path):
            with open(path, "w") as f:
                for i in range(a.n):
                    f.write(json.dumps({"id": i, "prompt": prompt(r, i)}) + "\n")
        return path
    ideal = math.ceil(a.n / a.concurrency) * a.delay_ms / 1000.0
    old_ideal = a.n * a.delay_ms / 1000.0 / a.concurrency
    out = os.path.join(work, "out.jsonl")

    if a.server in ("lean", "asyncio"):
        srv = LeanServer(a.delay_ms, a.server)
        base = srv.base()
    else:
        srv = ttlib.FakeServer()
        srv.start()
        base = srv.base("header_delay_ms=%d,chunk=whole" % a.delay_ms)

    j = str(a.concurrency)
    # tool -> (argv of round r, HOME kept across rounds or None for a fresh one each run)
    tools = {
        "tokterm batch": (lambda r: [tokterm, "batch", "--concurrency", j, inp(r)],
                          ttlib.make_home()),
        "tokterm --incognito": (lambda r: [tokterm, "--incognito", "batch", "--concurrency", j,
                                           inp(r)], ttlib.make_home()),
        "tokterm, new HOME": (lambda r: [tokterm, "batch", "--concurrency", j, inp(r)], None),
    }
    if sdk_ok:
        tools["openai SDK (node)"] = (lambda r: [node, os.path.join(HERE, "sdk.mjs"), inp(r), j],
                                      None)

    # The floor: curl sending the same requests, a.concurrency at a time (a config file of
    # url/data/header/output blocks separated by "next").
    def curl_cfg(r):
        ccfg = os.path.join(work, "curl%d.cfg" % r)
        if os.path.exists(ccfg):
            return ccfg
        with open(ccfg, "w") as f:
            blocks = []
            for i in range(a.n):
                body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                                   "stream_options": {"include_usage": True},
                                   "messages": [{"role": "user", "content": prompt(r, i)}]})
                blocks.append('url = "%s/chat/completions"\ndata = %s\n'
                              'header = "Content-Type: application/json"\n'
                              'header = "Authorization: Bearer sk-bench"\n'
                              'output = "/dev/null"\n' % (base, json.dumps(body)))
            f.write("next\n".join(blocks))
        return ccfg
    if shutil.which("curl"):
        tools["curl --parallel"] = (lambda r: ["curl", "-s", "-Z", "--parallel-max", j,
                                               "--parallel-immediate", "-K", curl_cfg(r)], None)
    results = {name: [] for name in tools}
    conns = {}
    turns = {}  # tool -> per round (client turnaround p50 us, server lateness max us)
    try:
        for name, (argv, home) in tools.items():  # the warm-up: databases created, untimed
            if home:
                measure(argv(0), ttlib.clean_env(home, {"OPENAI_BASE_URL": base}), out)
        for r in range(1, a.rounds + 1):
            for name, (argv, home) in tools.items():
                env = ttlib.clean_env(home, {"OPENAI_BASE_URL": base})
                lean = a.server in ("lean", "asyncio")
                before = srv.stats(reset=a.server == "lean")["connections"] if lean else 0
                wall, run, cpu, rss, code = measure(argv(r), env, out)
                st = srv.stats() if lean else {}
                if a.server == "lean":
                    turns.setdefault(name, []).append((st["turn_us_p50"], st["late_us_max"]))
                if name.startswith("curl"):
                    ok, failed, run = (a.n, 0, wall) if code == 0 else (0, a.n, wall)
                else:
                    ok, failed = count_lines(out)
                if lean:  # the tool's connections (not the one that asked for the stats)
                    conns[name] = st["connections"] - before - 1
                results[name].append((wall, run, cpu, rss, ok, failed))
    finally:
        srv.stop()

    print("%d requests, concurrency %d, the server waits %d ms before each answer (%s server)"
          % (a.n, a.concurrency, a.delay_ms, a.server))
    print("ideal = ceil(%d / %d) x %d ms = %.3f s (%.0f req/s; N x %d ms / C = %.4f s was the "
          "ideal before: x%.3f); median of %d rounds" % (
              a.n, a.concurrency, a.delay_ms, ideal, a.n / ideal, a.delay_ms, old_ideal,
              old_ideal / ideal, a.rounds))
    print("wall: the whole process (start-up included); run: first request to last answer, "
          "from the tool's own summary (curl prints none: its run is its wall)")
    print("turn: the client's own time per request (from an answer written to the next request "
          "on that connection, median); late: the server's worst lateness in the run (medians "
          "over the rounds)\n")
    hdr = "%-22s %7s %6s %7s %6s %6s %7s %9s %6s %5s %8s %8s" % (
        "tool", "wall s", "eff %", "run s", "eff %", "req/s", "cpu s", "peak MiB", "failed",
        "conns", "turn ms", "late ms")
    print(hdr)
    print("-" * len(hdr))
    med = {}
    for name, rs in results.items():
        wall = statistics.median(x[0] for x in rs)
        run = statistics.median(x[1] for x in rs)
        cpu = statistics.median(x[2] for x in rs)
        rss = statistics.median(x[3] for x in rs)
        failed = max(x[5] for x in rs)
        med[name] = (wall, run, cpu, rss)
        tv = turns.get(name)
        tcol = ("%8.3f %8.1f" % (statistics.median(x[0] for x in tv) / 1000.0,
                                 statistics.median(x[1] for x in tv) / 1000.0)) if tv else ""
        print("%-22s %7.3f %6.1f %7.3f %6.1f %6.0f %7.2f %9.1f %6d %5s %s" % (
            name, wall, 100 * ideal / wall, run, 100 * ideal / run, a.n / run, cpu, rss,
            failed, conns.get(name, "-"), tcol))
    if "curl --parallel" in med:
        t, c = med["tokterm batch"], med["curl --parallel"]
        print("\ntokterm batch / curl --parallel (the C floor on this server): run %.2fx, "
              "wall %.2fx" % (t[1] / c[0], t[0] / c[0]))
    if "openai SDK (node)" in med:
        t, s = med["tokterm batch"], med["openai SDK (node)"]
        print("\nSDK / tokterm: wall %.2fx, run %.2fx, cpu %.1fx, peak RSS %.1fx"
              % (s[0] / t[0], s[1] / t[1], s[2] / t[2], s[3] / t[3]))
    t = med["tokterm batch"]
    print("target, tokterm batch >= 90%% of the ideal throughput: run %.1f%% %s, wall %.1f%% %s"
          % (100 * ideal / t[1], "MET" if ideal / t[1] >= 0.9 else "NOT MET",
             100 * ideal / t[0], "MET" if ideal / t[0] >= 0.9 else "NOT MET"))
    c = med.get("curl --parallel")
    benchlib.Rows(a.rows).add(
        "`batch -j %d`, %s requests: share of the ideal throughput (whole process)"
        % (a.concurrency, format(a.n, ",")), "%.1f %% (%.2f s)" % (100 * ideal / t[0], t[0]),
        "curl --parallel %.1f %%" % (100 * ideal / c[0]) if c else "", None, ">= 90 %",
        100 * ideal / t[0], note="ideal ceil(N/C) x 50 ms = %.2f s; the first run (new HOME) "
        "%.1f %%" % (ideal, 100 * ideal / med["tokterm, new HOME"][0]))

    if a.no_rpm:
        return
    n = a.rpm_n or a.n
    rin = os.path.join(work, "rpm.jsonl")
    with open(rin, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "prompt": "rate limited prompt %d" % i}) + "\n")
    print("\nrate limit: %d requests at concurrency %d, fake server rpm=%d (a bucket of %d, "
          "refilled at %d/min; 429 when empty)" % (n, a.concurrency, a.rpm, a.rpm, a.rpm))
    floor = max(0.0, (n - a.rpm) * 60.0 / a.rpm)
    print("the quota alone needs %.1f s\n" % floor)
    print("%-22s %8s %8s %8s %8s" % ("tool", "wall s", "429s", "failed", "requests"))
    rtools = [("tokterm batch", [tokterm, "--incognito", "batch", "--concurrency",
                                 str(a.concurrency), rin])]
    if sdk_ok:
        rtools.append(("openai SDK (node)", [node, os.path.join(HERE, "sdk.mjs"), rin,
                                             str(a.concurrency)]))
    for name, argv in rtools:
        with ttlib.FakeServer() as fs:  # a fresh server: a full bucket for each tool
            env = ttlib.clean_env(env={"OPENAI_BASE_URL": fs.base(
                "rpm=%d,header_delay_ms=%d" % (a.rpm, a.delay_ms))})
            wall, run, cpu, rss, code = measure(argv, env, out)
            ok, failed = count_lines(out)
            reqs = fs.requests()
            limited = sum(1 for r in reqs if r.get("rate_limited"))
            print("%-22s %8.1f %8d %8d %8d" % (name, wall, limited, failed, len(reqs)))
            if name == "tokterm batch":
                print("  zero 429s: %s" % ("PASS" if limited == 0 else "FAIL"))
    if a.window_n > 0:
        short_window(a, tokterm, node if sdk_ok else None, work)


def short_window(a, tokterm, node, work):
    """One process against 600 requests a minute enforced as 10 a second while the headers
    report the minute (fake server rpm=600,burst=10,report=minute; issue 18): 429s, failed
    prompts and the throughput over the server's log (what passed after the first burst of 10,
    over the time it took), at -j 8 and -j 16, tokterm beside the openai SDK."""
    rin = os.path.join(work, "window.jsonl")
    with open(rin, "w") as f:
        for i in range(a.window_n):
            f.write(json.dumps({"id": i, "prompt": "short window prompt %d" % i}) + "\n")
    print("\nshort window: %d prompts, fake server rpm=600,burst=10,report=minute (600 a minute "
          "reported, 10 a second enforced)\n" % a.window_n)
    print("%-22s %4s %8s %8s %8s %8s %10s" % ("tool", "-j", "wall s", "429s", "failed",
                                               "requests", "of limit"))
    out = os.path.join(work, "window.out")
    for j in (8, 16):
        tools = [("tokterm batch", [tokterm, "--incognito", "batch", "-j", str(j), rin])]
        if node:
            tools.append(("openai SDK (node)", [node, os.path.join(HERE, "sdk.mjs"), rin,
                                                str(j)]))
        for name, argv in tools:
            with ttlib.FakeServer() as fs:
                env = ttlib.clean_env(env={"OPENAI_BASE_URL": fs.base(
                    "rpm=600,burst=10,report=minute")})
                wall = measure(argv, env, out)[0]
                ok, failed = count_lines(out)
                reqs = fs.requests()
                limited = sum(1 for r in reqs if r.get("rate_limited"))
                times = [r["t"] for r in reqs if r.get("status") == 200]
                span = times[-1] - times[0] if len(times) > 1 else 0
                share = (len(times) - 10) / span / 10 if span > 0 else float("nan")
                print("%-22s %4d %8.1f %8d %8d %8d %9.0f%%" % (name, j, wall, limited, failed,
                                                               len(reqs), 100 * share))
                if name == "tokterm batch":
                    pct = 100.0 * limited / max(1, len(reqs))
                    benchlib.Rows(a.rows).add(
                        "`batch -j %d`, %d prompts, 600 rpm enforced as 10/s: 429s" % (j, a.window_n),
                        "%.1f %% (%d of %d), %d failed" % (pct, limited, len(reqs), failed), "",
                        None, "<= 2", pct, note="throughput %.0f %% of the limit" % (100 * share))


if __name__ == "__main__":
    main()
