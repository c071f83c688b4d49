#!/usr/bin/env python3
"""What the shared quota state on Redis (state = redis://...) adds to each request, against the
local state alone: bench/redis/state_bench (built with the tree) runs both side by side against
a redis-server started here on a free loopback port, in a temp dir, and prints p50/p99 per
request of each and of what Redis adds. Target: <= 1 ms added at p99 on loopback.

    bench/redis/run.py --build BUILDDIR [--rounds N] [--requests N] [--rows FILE]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import benchlib  # noqa: E402
import ttlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("BENCH_BUILD", "_build/plain"))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--requests", type=int, default=2000, help="requests of each kind a round")
    ap.add_argument("--rows", default="")
    a = ap.parse_args()
    prog = os.path.join(a.build, "bench", "redis", "state_bench")
    if not os.path.exists(prog):
        subprocess.run(["make", "-C", a.build, "bench/redis/state_bench"], check=True,
                       stdout=subprocess.DEVNULL)
    if not shutil.which("redis-server"):
        sys.exit("bench/redis: redis-server is not installed (Debian redis-server)")
    d = tempfile.mkdtemp(prefix="tt-bench-redis-")
    port = ttlib.free_port()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                            "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        load = os.getloadavg()[0]
        p = subprocess.run([prog, "--url", "redis://127.0.0.1:%d/0" % port, "--rounds",
                            str(a.rounds), "--requests", str(a.requests)],
                           capture_output=True, text=True)
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    got = {k: (float(x), float(y)) for k, x, y in
           re.findall(r"^(local|redis|added|ping)\s+p50 ([\d.]+) ms\s+p99 ([\d.]+) ms", p.stdout, re.M)}
    m = re.search(r"fell back (\d+)", p.stdout)
    fell = m.group(1) if m else "?"
    if p.returncode != 0 or len(got) != 4:
        sys.exit("bench/redis: state_bench failed (exit %d)" % p.returncode)
    if fell not in ("0", "?"):
        print("\nnote: %s calls fell back to the local state (a call over the 50 ms budget "
              "under load, then a second without Redis): those requests count here as local "
              "ones, so the Redis figures are too low; rerun on a quieter machine" % fell)
    print("\n| per request (load %.1f) | p50 | p99 |\n|---|---|---|" % load)
    for k, name in (("local", "local state (SQLite-backed, in memory)"),
                    ("redis", "state = redis (loopback)"), ("added", "added by Redis"),
                    ("ping", "floor: one PING round trip")):
        print("| %s | %.3f ms | %.3f ms |" % (name, got[k][0], got[k][1]))
    rows = benchlib.Rows(a.rows)
    rows.add("shared state on Redis: added latency per request, p99 (loopback)",
             "Redis p50 %.3f ms, p99 %.3f ms" % got["redis"],
             "local p50 %.3f ms, p99 %.3f ms" % got["local"], None, "<= 1",
             value=got["added"][1], note="ms; p50 added %.3f ms; a PING p50 %.3f ms, p99 %.3f "
             "ms; %s calls fell back" % (got["added"][0], got["ping"][0], got["ping"][1], fell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
