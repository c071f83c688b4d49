#!/usr/bin/env python3
"""What saving a fast 1 MB answer costs in fresh memory, over the same run with --no-save.
Each fresh 4 KiB page is a minor fault, ~11 us on the VMs tokterm is measured on
(docs/PERFORMANCE.md), and a block written whole once made is cheaper in a huge page from
256 KiB on (XMALLOC_HUGE_WRITE): SQLite's record of the answer (1,000,000 bytes: 245 faults
in 4 KiB pages) and the store's buffer of a fast answer. With THP (madvise or always) saving
adds fewer than 330 minor faults (os.wait4's ru_minflt of tokterm itself, the least of three
runs each; ~480 before, ~170 after on the measuring VM); without THP ("never") fewer than 850
(the record, the buffer and SQLite's pages all in 4 KiB pages: 703 measured with THP turned
off on the same VM, where a bound of 700 failed).
The answer is saved whole either way.
A short one-shot in the default mode (the store opened, the cache looked up, the exchange
saved) over the same with --incognito: SQLite's schema, statements and pages are ~200 small
blocks' worth of fresh 4 KiB pages (+199 minor faults measured), which the store's process
takes from one huge page of heap (xmalloc_heap_huge): with THP, fewer than 80 more (-9 to -15
measured: the huge page also holds libcurl's and OpenSSL's blocks); without, fewer than 300.
The ASan build leaves this test out (its allocator is not glibc's). TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
SPEC = "gen=111111,chunk=whole"  # "tok0 tok1 ... tok111110 ": 1,000,000 bytes


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    db = ttlib.history_db(home)
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(SPEC)})

    def run(extra, what):
        """One one-shot of the 1 MB answer; its minor faults."""
        ttlib.wait_checkpoints(db)  # no copy of the previous run's WAL beside it
        p = subprocess.Popen([ttlib.tokterm_path(), "--no-cache"] + extra + ["-p", "x"],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        status, ru = ttlib.wait_rusage(p, 120)
        t.ok(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, what)
        return ru.ru_minflt

    run([], "a first run makes the database")
    save, nosave = [], []
    for i in range(3):
        save.append(run([], "saving, run %d" % (i + 1)))
        nosave.append(run(["--no-save"], "--no-save, run %d" % (i + 1)))
    extra = min(save) - min(nosave)
    t.diag("minor faults: saving %s, --no-save %s" % (save, nosave))
    mode = ttlib.thp_mode()
    bound = 330 if mode != "never" else 850
    t.ok(extra < bound, "THP %s: saving a 1 MB answer adds %d minor faults (fewer than %d)"
         % (mode, extra, bound))
    ttlib.wait_checkpoints(db)

    short = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=1,chunk=whole")})

    def one_shot(extra, n):
        """A short question never asked before (a cache miss); its minor faults."""
        p = subprocess.Popen([ttlib.tokterm_path()] + extra + ["-p", "question %d" % n],
                             env=short, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        status, ru = ttlib.wait_rusage(p, 60)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        return ru.ru_minflt if ok else 10 ** 6

    default = [one_shot([], n) for n in range(4)]
    incognito = [one_shot(["--incognito"], n) for n in range(4)]
    t.diag("a short one-shot's minor faults: default %s, --incognito %s" % (default, incognito))
    extra = min(default) - min(incognito)
    bound = 80 if mode != "never" else 300
    t.ok(extra < bound, "THP %s: the default mode's store adds %d minor faults to a short "
         "one-shot (fewer than %d)" % (mode, extra, bound))
    ttlib.wait_checkpoints(db)
    con = sqlite3.connect(db)
    rows = con.execute("SELECT length(content), status FROM messages WHERE role = 'assistant' "
                       "ORDER BY id").fetchall()
    con.close()
    big = [r for r in rows if r[0] >= 1000000]
    t.ok(len(big) == 4 and all(r == (1000000, "complete") for r in big),
         "the four saved 1 MB answers are whole and complete: %s" % big)

t.done()
