#!/usr/bin/env python3
"""Two builds of tokterm side by side on the start-up rows of bench/stream/run.py: one short
request (one delta), start-up included, with curl beside them as run.py has it.

Cases (each its own interleaved run: every round runs each command once, the order rotating):
  default    tokterm -p "question N" (store opened, cache looked up and missed, saved), each
             build with a HOME of its own, warmed by one run first; curl posts the same
  incognito  tokterm --incognito -p x (no store), curl
  saving     tokterm --no-cache -p x, a 1 kB answer (run.py's "saving" row), each build with
             its HOME, against --no-save of the baseline
Printed: the medians of wall and CPU (user+sys) of each, the median of the per-round ratios
new / baseline with their quartiles, and each build's ratio to curl; the load average at the
start and the end. For instruction counts of one run of each build (steadier than the wall
on a shared machine) use valgrind --tool=callgrind --separate-threads=yes.

usage: bench/stream/compare.py --tokterm NEW --baseline OLD [--rounds 31]
                               [--cases default,incognito,saving]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import benchlib  # noqa: E402
import ttlib  # noqa: E402
import run  # noqa: E402  (bench/stream/run.py: the body, curl's command, the sizes)
from benchlib import measure, med  # noqa: E402


def report(name, res, new, old):
    print("%s:" % name)
    for k in res:
        print("  %-10s wall %6.2f ms  CPU %6.2f ms" % (k, med(res[k]) * 1e3,
                                                     med(res[k], 1) * 1e3))
    q = benchlib.pspread(res[new], res[old])
    print("  new / baseline: wall %.3fx (quartiles %.3f-%.3f), CPU %.3fx" % (
        benchlib.pratio(res[new], res[old]), q[0], q[1], benchlib.pratio(res[new], res[old], 1)))
    if "curl" in res:
        print("  / curl: new %.3fx, baseline %.3fx" % (benchlib.pratio(res[new], res["curl"]),
                                                     benchlib.pratio(res[old], res["curl"])))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--cases", default="default,incognito,saving")
    a = ap.parse_args()
    builds = {"new": os.path.abspath(a.tokterm), "baseline": os.path.abspath(a.baseline)}
    cases = a.cases.split(",")
    benchlib.header("stream start-up, two builds (bench/stream/compare.py)",
                    "new %s, baseline %s" % (builds["new"], builds["baseline"]))
    n = [0]

    def prompt():
        n[0] += 1
        return "question %06d" % n[0]

    with ttlib.FakeServer() as srv:
        small = srv.base("gen=1,chunk=whole")
        if "default" in cases:
            envs = {k: ttlib.clean_env(home=ttlib.make_home(), env={"OPENAI_BASE_URL": small})
                    for k in builds}
            for k, exe in builds.items():
                measure([exe, "-p", "warm-up"], envs[k])
            cmds = {k: (lambda k=k: measure([builds[k], "-p", prompt()], envs[k]))
                    for k in builds}
            body = lambda: run.BODY.replace('"x"', '"%s"' % prompt())  # noqa: E731
            cmds["curl"] = lambda: measure(run.curl_cmd(small, body()), envs["new"])
            report("one short request, default mode", benchlib.interleave(cmds, a.rounds),
                   "new", "baseline")
        if "incognito" in cases:
            env = ttlib.clean_env(env={"OPENAI_BASE_URL": small})
            cmds = {k: [exe, "--incognito", "-p", "x"] for k, exe in builds.items()}
            cmds["curl"] = run.curl_cmd(small)
            report("one short request, --incognito",
                   benchlib.interleave(cmds, a.rounds, env_of=lambda k: env), "new", "baseline")
        if "saving" in cases:
            spec = "gen=%d,chunk=whole" % run.gen_for(1000)
            url = srv.base(spec)
            srv.post("/%s/v1/chat/completions" % spec, run.BODY.encode())
            envs = {k: ttlib.clean_env(home=ttlib.make_home(), env={"OPENAI_BASE_URL": url})
                    for k in builds}
            cmds = {k: (lambda k=k: measure([builds[k], "--no-cache", "-p", "x"], envs[k],
                                            adopt=True))
                    for k in builds}
            cmds["no-save"] = lambda: measure([builds["baseline"], "--no-cache", "--no-save",
                                               "-p", "x"], envs["baseline"], adopt=True)
            res = benchlib.interleave(cmds, a.rounds)
            report("saving a 1 kB answer", res, "new", "baseline")
            print("  / --no-save: new %.3fx, baseline %.3fx" % (
                benchlib.pratio(res["new"], res["no-save"]),
                benchlib.pratio(res["baseline"], res["no-save"])))
    print("# load average at the end %s" % benchlib.loadavg())


if __name__ == "__main__":
    main()
