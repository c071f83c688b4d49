#!/usr/bin/env python3
"""Batch throughput benchmark (issue 6): N prompts at concurrency C against a server that waits
50 ms before each answer, `tokterm batch` side by side with the official openai npm SDK doing
the same requests with a pool of C workers (bench/batch/sdk.mjs).

  ideal = N x 50 ms / C        efficiency = ideal / wall time of the whole process

The server is bench/batch/leanserver.c (compiled here with cc: epoll + a timerfd, answers 50 ms
after each request to ~0.1 ms); --server asyncio uses bench/batch/server.py (Python asyncio,
wakes up to 1 ms late and spends its own event loop at 600 req/s) and --server fake
tests/fake-openai/server.py (header_delay_ms=50, a thread per connection). `curl --parallel`
sending the same 1,000 requests at the same concurrency is the C floor: what a client with no
work of its own (no JSON, no output lines) gets from this server on this machine. Wall, CPU
(user+sys) come from wait4(2), peak RSS from /usr/bin/time.

Then the rate-limit check: the same batch against the fake server with rpm=600 (a bucket of 600
requests refilled at 600 a minute, 429 when empty); every request that got a 429 is counted
from the server's log. tokterm should pace itself to zero; the SDK retries what failed.

usage: bench/batch/run.py [--tokterm PATH] [--n 1000] [--concurrency 32] [--delay-ms 50]
                          [--rounds 3] [--server lean|fake] [--rpm 600] [--rpm-n N] [--no-rpm]
                          [--rows FILE]
"""
import argparse
import json
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
        self.proc = subprocess.Popen(argv + ["--port-file", pf, "--delay-ms", str(delay_ms)])
        deadline = time.monotonic() + 10
        while not os.path.exists(pf):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("bench server did not start")
            time.sleep(0.02)
        with open(pf) as f:
            self.port = int(f.read())

    def base(self):
        return "http://127.0.0.1:%d/v1" % self.port

    def stats(self):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/_stats" % self.port) as r:
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
    inp = os.path.join(work, "in.jsonl")
    with open(inp, "w") as f:
        for i in range(a.n):
            f.write(json.dumps({"id": i, "prompt": "benchmark prompt number %d" % i}) + "\n")
    ideal = a.n * a.delay_ms / 1000.0 / a.concurrency
    out = os.path.join(work, "out.jsonl")

    if a.server in ("lean", "asyncio"):
        srv = LeanServer(a.delay_ms, a.server)
        base = srv.base()
    else:
        srv = ttlib.FakeServer()
        srv.start()
        base = srv.base("header_delay_ms=%d,chunk=whole" % a.delay_ms)

    tools = {
        "tokterm batch": lambda: [tokterm, "batch", "--concurrency", str(a.concurrency), inp],
        "tokterm --incognito": lambda: [tokterm, "--incognito", "batch", "--concurrency",
                                        str(a.concurrency), inp],
    }
    if sdk_ok:
        tools["openai SDK (node)"] = lambda: [node, os.path.join(HERE, "sdk.mjs"), inp,
                                              str(a.concurrency)]
    # The floor: curl sending the same requests, a.concurrency at a time (a config file of
    # url/data/header/output blocks separated by "next").
    ccfg = os.path.join(work, "curl.cfg")
    with open(ccfg, "w") as f:
        blocks = []
        for i in range(a.n):
            body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                               "stream_options": {"include_usage": True},
                               "messages": [{"role": "user",
                                             "content": "benchmark prompt number %d" % i}]})
            blocks.append('url = "%s/chat/completions"\ndata = %s\n'
                          'header = "Content-Type: application/json"\n'
                          'header = "Authorization: Bearer sk-bench"\noutput = "/dev/null"\n'
                          % (base, json.dumps(body)))
        f.write("next\n".join(blocks))
    if shutil.which("curl"):
        tools["curl --parallel"] = lambda: ["curl", "-s", "-Z", "--parallel-max",
                                            str(a.concurrency), "--parallel-immediate",
                                            "-K", ccfg]
    results = {name: [] for name in tools}
    conns = {}
    try:
        for r in range(a.rounds):
            for name, argv in tools.items():
                env = ttlib.clean_env(env={"OPENAI_BASE_URL": base})  # a fresh HOME: no cache hits
                lean = a.server in ("lean", "asyncio")
                before = srv.stats()["connections"] if lean else 0
                wall, run, cpu, rss, code = measure(argv(), env, out)
                if name.startswith("curl"):
                    ok, failed, run = (a.n, 0, wall) if code == 0 else (0, a.n, wall)
                else:
                    ok, failed = count_lines(out)
                if lean:
                    conns[name] = srv.stats()["connections"] - before
                results[name].append((wall, run, cpu, rss, ok, failed))
        late = srv.stats() if a.server == "lean" else {}
    finally:
        srv.stop()

    print("%d requests, concurrency %d, the server waits %d ms before each answer (%s server)"
          % (a.n, a.concurrency, a.delay_ms, a.server))
    print("ideal = %d x %d ms / %d = %.3f s (%.0f req/s); median of %d rounds" % (
        a.n, a.delay_ms, a.concurrency, ideal, a.n / ideal, a.rounds))
    if late.get("late_us_p50") is not None:
        print("the server's own lateness (answer written after its 50 ms): p50 %d us, max %d us"
              % (late["late_us_p50"], late["late_us_max"]))
    print("wall: the whole process (start-up included); run: first request to last answer, "
          "from the tool's own summary (curl prints none: its run is its wall)\n")
    hdr = "%-22s %7s %6s %7s %6s %6s %7s %9s %6s %5s" % (
        "tool", "wall s", "eff %", "run s", "eff %", "req/s", "cpu s", "peak MiB", "failed",
        "conns")
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
        print("%-22s %7.3f %6.1f %7.3f %6.1f %6.0f %7.2f %9.1f %6d %5s" % (
            name, wall, 100 * ideal / wall, run, 100 * ideal / run, a.n / run, cpu, rss,
            failed, conns.get(name, "-")))
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
        100 * ideal / t[0], note="ideal %.2f s" % ideal)

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


if __name__ == "__main__":
    main()
