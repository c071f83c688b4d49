#!/usr/bin/env python3
"""The first `tokterm search` after a large answer: the search that indexes it.

usage:
    bench/store/search_big.py --tokterm BUILD/src/tokterm [--tokterm OTHER ...]
                              [--words 400000] [--rounds 5] [--rows FILE]

One one-shot against tests/fake-openai/server.py (gen=WORDS: "tok0 tok1 ...", 3.9 MB at
400,000 words, every word distinct) makes a database; each round copies it to a fresh HOME and
times, side by side, with each --tokterm in turn (the order rotates each round):

  first:   `tokterm search tok123456`: applies both queues (the trigram index and the word
           index) and answers through the word index;
  trigram: `tokterm search tok1` on another copy: a 4-character term goes to the trigram index,
           so only the trigram queue is applied: the cost of indexing the answer by trigrams;
  second:  `tokterm search tok123456` again on the first copy: both indexes up to date.

Printed: wall and CPU medians, peak RSS, and the median of the per-round ratios first / trigram
and first / second. run-all's row (--rows) is first / trigram for the first --tokterm (target:
at most 3: the word index may cost a few times the trigram index, never its 15-60 times).
Wall times on a shared machine: read the load average in the header.
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, ".."))

import benchlib  # noqa: E402
import ttlib  # noqa: E402


def env_of(home):
    e = ttlib.clean_env(home)
    e.pop("OPENAI_API_KEY", None)
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", required=True, action="append")
    ap.add_argument("--words", type=int, default=400000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", default="")
    a = ap.parse_args()
    benchlib.header("search_big", "gen=%d" % a.words)
    work = tempfile.mkdtemp(prefix="tt-search-big-")
    try:
        run(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(a, work):
    seed = os.path.join(work, "seed")
    os.makedirs(seed)
    with ttlib.FakeServer() as srv:
        e = ttlib.clean_env(seed, {"OPENAI_BASE_URL": srv.base("gen=%d,chunk=65536" % a.words)})
        code = benchlib.measure([a.tokterm[0], "-m", "gpt-4o-mini", "-p", "count"], e)[3]
        if code != 0:
            sys.exit("search_big: the one-shot failed (%d)" % code)
    db_dir = os.path.join(seed, ".local", "share", "tokterm")
    size = os.path.getsize(os.path.join(db_dir, "tokterm.db"))
    print("# database with the answer: %d bytes" % size)
    names = ["%d:%s" % (i, os.path.basename(os.path.dirname(os.path.dirname(t))) or t)
             for i, t in enumerate(a.tokterm)]
    res = {n: {"first": [], "trigram": [], "second": []} for n in names}
    for r in range(a.rounds):
        k0 = r % len(names)
        for i in list(range(k0, len(names))) + list(range(k0)):
            n, exe = names[i], a.tokterm[i]
            homes = []
            for what in ("w", "t"):
                h = os.path.join(work, "r%d-%d-%s" % (r, i, what))
                shutil.copytree(seed, h)
                homes.append(h)
            res[n]["first"].append(benchlib.measure([exe, "search", "tok123456"],
                                                    env_of(homes[0])))
            res[n]["trigram"].append(benchlib.measure([exe, "search", "tok1"], env_of(homes[1])))
            res[n]["second"].append(benchlib.measure([exe, "search", "tok123456"],
                                                     env_of(homes[0])))
            for h in homes:
                shutil.rmtree(h, ignore_errors=True)
    print("%-28s %10s %10s %10s   %s" % ("build / search", "wall", "cpu", "peak RSS",
                                         "ratio to trigram, to second (wall; per round)"))
    first_row = None
    for n in names:
        r = res[n]
        for what in ("first", "trigram", "second"):
            rows = r[what]
            print("%-28s %10s %10s %7.1f MB" % (
                "%s %s" % (n, what), benchlib.ms(benchlib.med(rows)),
                benchlib.ms(benchlib.med(rows, 1)), benchlib.med(rows, 2) / 1024.0))
        rt = benchlib.pratio(r["first"], r["trigram"])
        rs = benchlib.pratio(r["first"], r["second"])
        print("%s: first search after a %d-word answer: %.2fx the trigram's, %.1fx a second "
              "search's" % (n, a.words, rt, rs))
        if first_row is None:
            first_row = (r, rt)
    r, rt = first_row
    benchlib.Rows(a.rows).add(
        "first `tokterm search` after a 3.9 MB answer of distinct words, vs the trigram "
        "index's alone", benchlib.ms(benchlib.med(r["first"])),
        benchlib.ms(benchlib.med(r["trigram"])), rt, "<= 3",
        note="peak RSS %.0f MB; a second search %s" % (benchlib.med(r["first"], 2) / 1024.0,
                                                      benchlib.ms(benchlib.med(r["second"]))),
        spread=benchlib.pspread(r["first"], r["trigram"]))


if __name__ == "__main__":
    main()
