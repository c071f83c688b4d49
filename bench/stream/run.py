#!/usr/bin/env python3
"""Side-by-side benchmark of streaming consumption (issues 2, 4, 14).

Every comparison runs its competitors in one run, interleaved (each round runs each once, the
order rotating), and reports medians:

 1. the fake server's stream of N small deltas (gen=N,chunk=whole: at loopback speed), N =
    200,000 (40.5 MB of SSE) and 1,000,000 (~210 MB), consumed by
      curl -sN > /dev/null          the floor: bytes only, no parsing
      tokterm --incognito -p x      SSE + JSON decoding, each delta written to stdout
      the openai npm SDK            parse and print each delta (node; 200,000 only)
    wall, CPU (user+sys) and peak RSS of each process (GNU time; wall from here);
 2. saving the conversation as it streams vs --no-save (both --no-cache, both open the same
    database), answers of 1 kB, 64 kB (just under 64 KiB: indexed at save time before issue
    14), 1 MB and 10 MB (gen=N with N chosen for the size); each run of either side is
    waited for until the `tokterm --checkpoint` a saving run leaves is gone (the wall is
    tokterm's own), so that no run shares the cores with the previous run's WAL copy; every
    size takes the larger of --rounds and --small-runs (a 9.9 MB run is ~0.1 s: 11 rounds
    left its median wandering 1.07x-1.23x between full runs);
 3. one short request, start-up included: curl vs tokterm --incognito (one delta), and curl vs
    tokterm in the default mode (store opened, cache looked up, conversation saved; a new prompt
    each run, so the cache misses as a new question does).
Targets (issue 14): wall <= 1.15x curl at both lengths, CPU <= 1.3x, RSS <= 1.0x, SDK >= 10x
slower, saving <= 1.1x --no-save at every size, one request <= 1.3x (default mode included).

usage: bench/stream/run.py [--tokterm PATH] [--rounds 11] [--small-runs 21] [--deltas 200000]
                           [--big-deltas 1000000] [--sdk-rounds N] [--sizes 1000,64000,...]
                           [--rows FILE] [--baseline PATH]
--deltas 0 --big-deltas 0 --small-runs 0 runs the saving rows alone; --baseline PATH runs them
for two builds side by side (A/B: each build's ratio to its own --no-save, and new / base).
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.dont_write_bytecode = True
import benchlib  # noqa: E402
import ttlib  # noqa: E402
from benchlib import measure, med  # noqa: E402

BODY = '{"model":"bench","messages":[{"role":"user","content":"x"}],"stream":true}'


def gen_text_bytes(n):
    """Bytes of the answer of gen=n: "tok0 tok1 ... tok{n-1} "."""
    total, lo, d = 0, 0, 1
    while lo < n:
        hi = min(n, 10 ** d)
        total += (hi - lo) * (d + 4)
        lo, d = hi, d + 1
    return total


def gen_for(size):
    """The smallest gen=N whose answer has at least size bytes."""
    lo, hi = 1, 1
    while gen_text_bytes(hi) < size:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if gen_text_bytes(mid) < size:
            lo = mid + 1
        else:
            hi = mid
    return lo


def human(n):
    for unit, f in (("MB", 1e6), ("kB", 1e3)):
        if n >= f:
            return "%g %s" % (round(n / f, 1), unit)
    return "%d B" % n


def curl_cmd(url, body=BODY):
    return ["curl", "-sN", url + "/chat/completions", "-H", "Content-Type: application/json",
            "-H", "Authorization: Bearer sk-bench", "-d", body]


def stream(srv, tokterm, node, deltas, rounds, sdk_rounds, rows, label_sdk):
    spec = "gen=%d,chunk=whole" % deltas
    url = srv.base(spec)
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": url})
    _, _, body = srv.post("/%s/v1/chat/completions" % spec, BODY.encode())  # build it once
    cmds = {"curl": curl_cmd(url), "tokterm": [tokterm, "--incognito", "-p", "x"]}
    res = benchlib.interleave(cmds, rounds, env_of=lambda k: env)
    if node and sdk_rounds:
        sdk = [node, os.path.join(HERE, "sdk.mjs")]
        res["openai-sdk"] = benchlib.interleave({"sdk": sdk}, sdk_rounds,
                                                env_of=lambda k: env, warmup=0)["sdk"]
    print()
    print("stream: %s deltas, %.1f MB of SSE (%s of text), %d rounds (median; CPU = user+sys)"
          % (format(deltas, ","), len(body) / 1e6, human(gen_text_bytes(deltas)), rounds))
    print("| | wall | CPU | peak RSS |")
    print("|---|---|---|---|")
    m = {}
    for k, r in res.items():
        m[k] = (med(r, 0), med(r, 1), med(r, 2))
        print("| %s | %.1f ms | %.1f ms | %.1f MB |" % (k, m[k][0] * 1e3, m[k][1] * 1e3,
                                                  m[k][2] / 1024))
    (tw, tc, tm), (cw, cc, cm) = m["tokterm"], m["curl"]
    rw, rc, rm = (benchlib.pratio(res["tokterm"], res["curl"], i) for i in (0, 1, 2))
    qw, qc, qm = (benchlib.pspread(res["tokterm"], res["curl"], i) for i in (0, 1, 2))
    print("tokterm / curl: wall %.2fx (target <= 1.15x), CPU %.2fx (target <= 1.3x), "
          "RSS %.2fx (target <= 1.0x); medians of the per-round ratios" % (rw, rc, rm))
    n = format(deltas, ",")
    rows.add("stream wall / curl, %s deltas" % n, "%.1f ms" % (tw * 1e3), "curl %.1f ms" %
             (cw * 1e3), rw, "<= 1.15", spread=qw)
    rows.add("stream CPU / curl, %s deltas" % n, "%.1f ms" % (tc * 1e3), "curl %.1f ms" %
             (cc * 1e3), rc, "<= 1.3", spread=qc)
    rows.add("stream peak RSS / curl, %s deltas" % n, "%.2f MB" % (tm / 1024), "curl %.2f MB" %
             (cm / 1024), rm, "<= 1.0", spread=qm)
    if "openai-sdk" in m:
        sw = m["openai-sdk"][0]
        print("openai-sdk / tokterm: wall %.1fx (target >= 10x), %d rounds" % (sw / tw,
                                                                              sdk_rounds))
        rows.add("openai SDK wall / tokterm, %s deltas" % n, "%.1f ms" % (tw * 1e3),
                 "SDK %.2f s" % sw, sw / tw, ">= 10", note="%d SDK rounds" % sdk_rounds)
    elif label_sdk:
        print("openai-sdk: skipped (node or the openai package missing)")
    sys.stdout.flush()


def saving(srv, tokterm, sizes, rounds, rows, reuse=0, small_rounds=0, baseline=None):
    print()
    rounds = max(rounds, small_rounds)
    print("saving the conversation as it streams (default) vs --no-save, both --no-cache, %d "
          "rounds at every size (median wall)" % rounds)
    if baseline:
        return saving_ab(srv, tokterm, baseline, sizes, rounds, reuse)
    print("| answer | deltas | saving | --no-save | ratio (target <= 1.1x) |")
    print("|---|---|---|---|---|")
    home = ttlib.make_home()
    per_round = []
    for size in sizes:
        n = gen_for(size)
        if reuse and abs(n - reuse) < 0.02 * reuse:
            n = reuse  # the stream the server has built already (1,000,000: 9.9 MB)
        spec = "gen=%d,chunk=whole" % n
        url = srv.base(spec)
        env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": url})
        srv.post("/%s/v1/chat/completions" % spec, BODY.encode())
        argvs = {"saving": [tokterm, "--no-cache", "-p", "x"],
                 "nosave": [tokterm, "--no-cache", "--no-save", "-p", "x"]}
        # adopt: each run is also waited for until what it left running is gone (a saving
        # run of 1 MB or more leaves `tokterm --checkpoint` copying its WAL), so that no run,
        # of either side, shares the 2 cores with the previous run's copy; the wall time is
        # still tokterm's own.
        cmds = {k: (lambda v=v: measure(v, env, adopt=True)) for k, v in argvs.items()}
        res = benchlib.interleave(cmds, rounds)
        sw, nw = med(res["saving"]), med(res["nosave"])
        r = benchlib.pratio(res["saving"], res["nosave"])
        print("| %s | %s | %.1f ms | %.1f ms | %.2fx |" % (human(gen_text_bytes(n)),
                                                         format(n, ","), sw * 1e3, nw * 1e3,
                                                         r))
        sys.stdout.flush()
        rows.add("saving / `--no-save`, %s answer" % human(gen_text_bytes(n)),
                 "%.1f ms" % (sw * 1e3), "--no-save %.1f ms" % (nw * 1e3), r, "<= 1.1",
                 spread=benchlib.pspread(res["saving"], res["nosave"]))
        per_round.append((human(gen_text_bytes(n)), [x[0] / max(y[0], 1e-9) for x, y in
                                                     zip(res["saving"], res["nosave"])]))
    print()
    for what, v in per_round:  # bench/pool.py pools these over several runs
        print("Rounds, saving / --no-save, %s answer: %s" % (what, " ".join("%.3f" % x
                                                                          for x in v)))


def saving_ab(srv, tokterm, baseline, sizes, rounds, reuse):
    """saving() for two builds side by side: each round runs both builds' saving and --no-save
    runs (order rotating), each build on a database of its own; prints each build's ratio to
    its own --no-save, the new build's saving wall over the baseline's, and the same for CPU
    (user + sys of tokterm and of the `tokterm --checkpoint` it left, which rusage -a adopts:
    steadier than the wall on a loaded machine)."""
    print("A/B: %s (new) vs %s (baseline)" % (tokterm, baseline))
    print("| answer | new saving | new --no-save | new ratio | base saving | base --no-save | "
          "base ratio | new / base saving | CPU new / base saving (with the --checkpoint) |")
    print("|---|---|---|---|---|---|---|---|---|")
    homes = {"new": ttlib.make_home(), "base": ttlib.make_home()}
    for size in sizes:
        n = gen_for(size)
        if reuse and abs(n - reuse) < 0.02 * reuse:
            n = reuse
        spec = "gen=%d,chunk=whole" % n
        url = srv.base(spec)
        srv.post("/%s/v1/chat/completions" % spec, BODY.encode())
        cmds = {}
        for b, exe in (("new", tokterm), ("base", baseline)):
            env = ttlib.clean_env(home=homes[b], env={"OPENAI_BASE_URL": url})
            for k, extra in (("saving", []), ("nosave", ["--no-save"])):
                argv = [exe, "--no-cache"] + extra + ["-p", "x"]
                cmds[b + "-" + k] = (lambda v=argv, e=env: measure(v, e, adopt=True))
        res = benchlib.interleave(cmds, rounds)
        m = {k: med(v) * 1e3 for k, v in res.items()}
        print("| %s | %.1f ms | %.1f ms | %.2fx | %.1f ms | %.1f ms | %.2fx | %.2fx | %.2fx |" % (
            human(gen_text_bytes(n)), m["new-saving"], m["new-nosave"],
            benchlib.pratio(res["new-saving"], res["new-nosave"]), m["base-saving"],
            m["base-nosave"], benchlib.pratio(res["base-saving"], res["base-nosave"]),
            benchlib.pratio(res["new-saving"], res["base-saving"]),
            benchlib.pratio(res["new-saving"], res["base-saving"], 1)))
        sys.stdout.flush()


def short_requests(srv, tokterm, runs, rows):
    print()
    small = srv.base("gen=1,chunk=whole")
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": small})
    res = benchlib.interleave({"curl": curl_cmd(small),
                               "tokterm": [tokterm, "--incognito", "-p", "x"]}, runs,
                              env_of=lambda k: env)
    c, t = med(res["curl"]), med(res["tokterm"])
    r = benchlib.pratio(res["tokterm"], res["curl"])
    print("one-delta request, start-up included, %d runs (median): curl %.1f ms, tokterm "
          "--incognito %.1f ms: %.2fx (target <= 1.3x)" % (runs, c * 1e3, t * 1e3, r))
    rows.add("one short request, `--incognito`", "%.1f ms" % (t * 1e3), "curl %.1f ms" %
             (c * 1e3), r, "<= 1.3", spread=benchlib.pspread(res["tokterm"], res["curl"]))
    # The default mode: the store, a cache lookup (a miss: a new question each run), the save.
    home = ttlib.make_home()
    env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": small})
    n = [0]

    def prompt():
        n[0] += 1
        return "question %06d" % n[0]

    def run_tokterm():
        return measure([tokterm, "-p", prompt()], env)

    def run_curl():
        body = BODY.replace('"x"', '"%s"' % prompt())
        return measure(curl_cmd(small, body), env)

    res = benchlib.interleave({"curl": run_curl, "tokterm": run_tokterm}, runs)
    c, t = med(res["curl"]), med(res["tokterm"])
    r = benchlib.pratio(res["tokterm"], res["curl"])
    print("one short request, default mode (store, cache miss, save), %d runs (median): curl "
          "%.1f ms, tokterm %.1f ms: %.2fx (target <= 1.3x)" % (runs, c * 1e3, t * 1e3, r))
    rows.add("one short request, default mode (saving + cache)", "%.1f ms" % (t * 1e3),
             "curl %.1f ms" % (c * 1e3), r, "<= 1.3",
             spread=benchlib.pspread(res["tokterm"], res["curl"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--deltas", type=int, default=200000)
    ap.add_argument("--big-deltas", type=int, default=1000000, help="0: skip")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--sdk-rounds", type=int, default=None, help="default: --rounds; 0: skip")
    ap.add_argument("--small-runs", type=int, default=21)
    ap.add_argument("--sizes", default="1000,64000,1000000,10000000",
                    help="answer sizes in bytes for saving vs --no-save ('' to skip)")
    ap.add_argument("--rows", default="", help="append run-all's table rows (JSON) here")
    ap.add_argument("--baseline", default="",
                    help="a second tokterm: the saving rows run both builds side by side")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    rows = benchlib.Rows(a.rows)
    node = shutil.which("node")
    sdk_ok = node and os.path.isdir(os.path.join(HERE, "node_modules", "openai"))
    sdk_rounds = a.rounds if a.sdk_rounds is None else a.sdk_rounds
    if node and not sdk_ok and a.deltas and sdk_rounds:
        print("installing the openai npm package into bench/stream/node_modules ...")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=HERE)
        sdk_ok = os.path.isdir(os.path.join(HERE, "node_modules", "openai"))
    benchlib.header("stream (bench/stream/run.py)", "tokterm %s" % tokterm)
    with ttlib.FakeServer() as srv:
        if a.deltas:
            stream(srv, tokterm, node if sdk_ok else None, a.deltas, a.rounds, sdk_rounds, rows,
                   True)
        if a.big_deltas:
            stream(srv, tokterm, None, a.big_deltas, a.rounds, 0, rows, False)
        sizes = [int(s) for s in a.sizes.split(",") if s]
        if sizes:
            saving(srv, tokterm, sizes, a.rounds, rows, a.big_deltas or 1000000, a.small_runs,
                   os.path.abspath(a.baseline) if a.baseline else None)
        if a.small_runs:
            short_requests(srv, tokterm, a.small_runs, rows)
    print("# load average at the end %s" % benchlib.loadavg())


if __name__ == "__main__":
    main()
