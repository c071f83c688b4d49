#!/usr/bin/env python3
"""Side-by-side benchmark of streaming consumption (issue 2).

The same fake-server stream of N small deltas is consumed, several rounds, in one run by
  (a) curl -sN > /dev/null         the floor: bytes only, no parsing
  (b) tokterm --incognito -p x     parse SSE + JSON, write each delta (no database)
  (b') tokterm --no-cache -p x      the default: the conversation saved as it streams
  (c) the official openai npm SDK  parse and print each delta (node)
and a one-delta request end to end (process start-up included) by curl and tokterm.
Wall time, CPU time (user+sys) and peak RSS come from wait4(2) for each child process.

usage: bench/stream/run.py [--tokterm PATH] [--deltas 200000] [--rounds 5] [--small-runs 30]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.dont_write_bytecode = True
import ttlib  # noqa: E402

BODY = '{"model":"bench","messages":[{"role":"user","content":"x"}],"stream":true}'


TIME = "/usr/bin/time"  # GNU time: its own small fork, so the child's peak RSS is its own


def measure(argv, env):
    """Run argv with stdout to /dev/null; returns (wall s, cpu s, peak RSS KiB, exit code)."""
    rfd, wfd = os.pipe()
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen([TIME, "-f", "%e %U %S %M %x", "-o", "/dev/fd/%d" % wfd] + argv,
                             env=env, stdin=subprocess.DEVNULL, stdout=null,
                             stderr=subprocess.DEVNULL, pass_fds=(wfd,))
        os.close(wfd)
        out = os.read(rfd, 4096).decode()
        os.close(rfd)
        p.wait()
    wall = time.perf_counter() - t0  # finer than time(1)'s 10 ms; same overhead for every tool
    fields = out.split()[-5:]
    user, sys_, rss, code = float(fields[1]), float(fields[2]), int(fields[3]), int(fields[4])
    if code != 0:
        sys.stderr.write("%s failed (%d)\n" % (argv[0], code))
    return wall, user + sys_, rss, code


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--deltas", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small-runs", type=int, default=30)
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    node = shutil.which("node")
    sdk_ok = node and os.path.isdir(os.path.join(HERE, "node_modules", "openai"))
    if node and not sdk_ok:
        print("installing the openai npm package into bench/stream/node_modules ...")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=HERE)
        sdk_ok = os.path.isdir(os.path.join(HERE, "node_modules", "openai"))

    with ttlib.FakeServer() as srv:
        spec = "gen=%d,chunk=whole" % a.deltas
        url = srv.base(spec)
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": url})
        # warm the server's body cache and measure the stream's size
        _, _, body = srv.post("/%s/v1/chat/completions" % spec, BODY.encode())
        size_mb = len(body) / 1e6
        cmds = {
            "curl": ["curl", "-sN", url + "/chat/completions", "-H", "Content-Type: application/json",
                     "-H", "Authorization: Bearer sk-bench", "-d", BODY],
            "tokterm": [tokterm, "--incognito", "-p", "x"],
            # issue 4's pair: saving as it streams vs --no-save (both without the response
            # cache, which would answer the later rounds; both open the same database)
            "tokterm-saving": [tokterm, "--no-cache", "-p", "x"],
            "tokterm-nosave": [tokterm, "--no-cache", "--no-save", "-p", "x"],
        }
        if sdk_ok:
            cmds["openai-sdk"] = [node, os.path.join(HERE, "sdk.mjs")]
        res = {k: [] for k in cmds}
        for r in range(a.rounds):
            for k, argv in cmds.items():
                res[k].append(measure(argv, env))
        print("stream: %d deltas, %.1f MB, %d rounds (median; CPU = user+sys)" %
              (a.deltas, size_mb, a.rounds))
        print("%-12s %9s %9s %10s" % ("", "wall s", "CPU s", "peak RSS"))
        med = {}
        for k, rows in res.items():
            w = statistics.median(x[0] for x in rows)
            c = statistics.median(x[1] for x in rows)
            m = statistics.median(x[2] for x in rows)
            med[k] = (w, c, m)
            print("%-12s %9.3f %9.3f %8.1f MB" % (k, w, c, m / 1024))
        tw, tc, tm = med["tokterm"]
        cw, cc, cm = med["curl"]
        print("tokterm / curl:  wall %.2fx (target <= 1.5x)  CPU %.2fx  RSS %.2fx (target <= 1.0x)"
              % (tw / cw, tc / max(cc, 1e-9), tm / cm))
        sw_, sc_, sm_ = med["tokterm-saving"]
        nw_, nc_, nm_ = med["tokterm-nosave"]
        print("tokterm saving the conversation (default) / --no-save:  wall %.2fx (target <= 1.2x)"
              "  CPU %.2fx  RSS %.2fx" % (sw_ / nw_, sc_ / max(nc_, 1e-9), sm_ / nm_))
        if "openai-sdk" in med:
            sw, sc, sm = med["openai-sdk"]
            print("openai-sdk / tokterm:  wall %.1fx (target >= 10x)  CPU %.1fx  RSS %.1fx"
                  % (sw / tw, sc / tc, sm / tm))
        else:
            print("openai-sdk: skipped (node or the openai package missing)")

        # one delta, start-up included
        small = srv.base("gen=1,chunk=whole")
        env1 = ttlib.clean_env(env={"OPENAI_BASE_URL": small})
        c1 = ["curl", "-sN", small + "/chat/completions", "-H", "Content-Type: application/json",
              "-d", BODY]
        t1 = [tokterm, "--incognito", "-p", "x"]
        cs, ts = [], []
        for _ in range(a.small_runs):
            cs.append(measure(c1, env1)[0])
            ts.append(measure(t1, env1)[0])
        cmed, tmed = statistics.median(cs), statistics.median(ts)
        print("one-delta request, start-up included, %d runs (median): curl %.1f ms, tokterm "
              "%.1f ms: %.2fx (target <= 1.3x)" % (a.small_runs, cmed * 1e3, tmed * 1e3, tmed / cmed))


if __name__ == "__main__":
    main()
