#!/usr/bin/env python3
"""Two builds of tokterm side by side on the resume benchmark's conversations (issue 14): the
same request, and the time each takes.

For each case one database is made (as run.py makes it) and copied, one copy per build, each
with a HOME of its own; then
  1. a warm-up run of each (what is done once: the counts of the inserted rows);
  2. one run of each with bench/batch/leanserver.c capturing: the bodies each sent must be
     byte for byte the same, and so must what each printed and the rows each saved (role,
     status, text and parent of the turn added: what the user sees = what is sent = what is
     saved). A difference is printed and the script exits 1;
  3. --rounds rounds, interleaved (the order alternating), of `-c -p` with each build on its
     own copy (both copies grow by one turn a round, in step): wall and CPU medians and the
     median of the per-round ratios tokterm / baseline, with their quartiles.

usage: bench/resume/compare.py --tokterm NEW --baseline OLD [--rounds 11]
                               [--cases short:10000,short:1300,long:10000,flaky:10000]
                               [--keep DIR]
       (--rounds 0: only the check of the bodies)
"""
import argparse
import os
import shutil
import sqlite3
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import benchlib  # noqa: E402
import run  # noqa: E402  (bench/resume/run.py: the databases, the server, the capture)


def saved(db):
    """The turn the last run added: its two rows as (role, status, content, parent's role)."""
    c = sqlite3.connect(db)
    rows = c.execute("SELECT m.role, m.status, m.content, p.role FROM messages m LEFT JOIN "
                     "messages p ON p.id = m.parent_id ORDER BY m.id DESC LIMIT 2").fetchall()
    c.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", required=True, help="the build under test")
    ap.add_argument("--baseline", required=True, help="the build it is compared with")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--cases", default="short:10000,short:1300,long:10000,flaky:10000")
    ap.add_argument("--keep", default="", help="make the work files here and leave them")
    a = ap.parse_args()
    builds = {"baseline": os.path.abspath(a.baseline), "tokterm": os.path.abspath(a.tokterm)}
    work = os.path.abspath(a.keep) if a.keep else tempfile.mkdtemp(prefix="tt-resume-cmp-")
    os.makedirs(work, exist_ok=True)
    srv, port, cap = run.lean_server(work)
    benchlib.header("resume (`-c -p`): %s vs %s" % (a.tokterm, a.baseline),
                    "%d rounds, medians; ratio: median of the per-round ratios" % a.rounds)
    differ = 0
    try:
        if a.rounds:
            print("| conversation | same body | tokterm wall | baseline wall | wall ratio "
                  "| CPU ratio |")
            print("|---|---|---|---|---|---|")
        for case in a.cases.split(","):
            kind, n = case.split(":")
            n = int(n)
            made = os.path.join(work, "%s-%d.db" % (kind, n))
            env0 = run.env_for(os.path.join(work, "home-made"), port)
            os.makedirs(env0["HOME"], exist_ok=True)
            count, total = run.make_db(builds["baseline"], env0, made, n, kind,
                                       seed=n * 7 + len(kind))
            argv, env, bodies, out = {}, {}, {}, {}
            for k, exe in builds.items():
                db = os.path.join(work, "%s-%d-%s.db" % (kind, n, k))
                shutil.copyfile(made, db)
                env[k] = run.env_for(os.path.join(work, "home-%s-%d-%s" % (kind, n, k)), port)
                os.makedirs(env[k]["HOME"], exist_ok=True)
                argv[k] = [exe, "--db", db, "-c", "-p", "And what about the parser's buffer?"]
                benchlib.measure(argv[k], env[k])  # warm-up
            for k in builds:
                out[k] = os.path.join(work, "out-%s" % k)
                # the capture runs through measure() with stdout to a file: what was printed
                bodies[k] = [open(b, "rb").read() for b in
                             run.captured(builds[k], argv[k], env[k], cap)]
                benchlib.measure(argv[k], env[k], stdout=out[k])
            same = bodies["tokterm"] == bodies["baseline"]
            same_out = open(out["tokterm"], "rb").read() == open(out["baseline"], "rb").read()
            same_rows = saved(argv["tokterm"][2]) == saved(argv["baseline"][2])
            label = "%s messages, %s (%.1f MB)" % (format(count, ","), kind, total / 1e6)
            if not (same and same_out and same_rows):
                differ = 1
                print("# %s: DIFFERENT: bodies %s (%s vs %s bytes), printed text %s, rows saved "
                      "%s" % (label, "same" if same else "differ",
                              "+".join(str(len(b)) for b in bodies["tokterm"]),
                              "+".join(str(len(b)) for b in bodies["baseline"]),
                              "same" if same_out else "differs",
                              "same" if same_rows else "differ"))
            elif not a.rounds:
                print("# %s: the same %d body(ies), %d bytes; the same text printed and rows "
                      "saved" % (label, len(bodies["tokterm"]),
                                 sum(len(b) for b in bodies["tokterm"])))
            if not a.rounds:
                continue
            res = benchlib.interleave(argv, a.rounds, env_of=lambda k: env[k], warmup=0)
            if any(x[3] for k in res for x in res[k]):
                raise RuntimeError("a run failed")
            q = benchlib.pspread(res["tokterm"], res["baseline"])
            print("| %s | %s | %s | %s | %.2fx%s | %.2fx |" %
                  (label, "yes" if same and same_out and same_rows else "**no**",
                   benchlib.ms(benchlib.med(res["tokterm"])),
                   benchlib.ms(benchlib.med(res["baseline"])),
                   benchlib.pratio(res["tokterm"], res["baseline"]),
                   " (%.2f-%.2f)" % tuple(q) if q else "",
                   benchlib.pratio(res["tokterm"], res["baseline"], 1)))
            sys.stdout.flush()
    finally:
        srv.terminate()
        srv.wait()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("# load average at the end %s" % benchlib.loadavg())
    return differ


if __name__ == "__main__":
    sys.exit(main())
