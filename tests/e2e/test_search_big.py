#!/usr/bin/env python3
"""The first `tokterm search` after a 3.9 MB answer of distinct words (the fake server's
gen=400000: "tok0 tok1 ... tok399999"), which indexes it. Its peak RSS (wait4 of exactly that
child) stays within a small bound: putting the answer in the word index held every one of its
2 million distinct pieces in FTS5's memory at once (272 MB measured, 9-35 s), where the
trigram index, and now the search, take some 20 MB. The hits are the same as before: the
word, the middle of a word, an absent word, and the second search finds what the first did.
Peak RSS under ASan is the sanitizer's, so the ASan build leaves this test out (Makefile.am).
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
WORDS = 400000
RSS_MAX_MIB = 80  # main: 272 MiB; now about 20 (the Python parent's mark counts too)


def search(home, term, timeout=120):
    """(exit code, stdout, peak RSS in MiB) of `tokterm search term`."""
    dd = ttlib.tempdir("tt-search-big-")
    out_path = os.path.join(dd, "out")
    with open(out_path, "wb") as fo:
        p = subprocess.Popen([ttlib.tokterm_path(), "search", term],
                             env=ttlib.clean_env(home), stdin=subprocess.DEVNULL, stdout=fo,
                             stderr=subprocess.DEVNULL)
        status, ru = ttlib.wait_rusage(p, timeout)
    with open(out_path, "rb") as f:
        out = f.read()
    return os.waitstatus_to_exitcode(status), out, ru.ru_maxrss / 1024.0


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    rc, out, err = ttlib.run_tokterm(
        ["-m", "gpt-4o-mini", "-p", "count"], home=home, timeout=120,
        env={"OPENAI_BASE_URL": srv.base("gen=%d,chunk=65536" % WORDS)})
    t.eq(rc, 0, "a one-shot saved an answer of %d distinct words" % WORDS)
    db = os.path.join(home, ".local", "share", "tokterm", "tokterm.db")
    con = sqlite3.connect(db)
    size = con.execute("SELECT length(content) FROM messages WHERE role = 'assistant'")
    size = (size.fetchone() or [0])[0]
    con.close()
    t.ok(size > 3800000, "the answer is %d bytes" % size)

    rc, out, rss = search(home, "tok123456")
    t.eq(rc, 0, "the first search finds the word")
    t.ok(b"[tok123456]" in out, "its snippet shows it")
    t.ok(rss < RSS_MAX_MIB, "the first search's peak RSS: %.1f MiB (at most %d)"
         % (rss, RSS_MAX_MIB))
    con = sqlite3.connect(db)
    queued = con.execute("SELECT (SELECT count(*) FROM words_queue) + "
                         "(SELECT count(*) FROM fts_pending)").fetchone()[0]
    con.close()
    t.eq(queued, 0, "it indexed the answer (nothing is left queued)")
    rc, out, rss = search(home, "ok34567")
    t.ok(rc == 0 and b"[ok34567]" in out, "the middle of a word is found")
    rc, out, rss = search(home, "tok400000")
    t.eq(rc, 1, "a word the answer does not hold is not (exit 1)")
    rc, out, rss = search(home, "tok123456")
    t.ok(rc == 0 and b"[tok123456]" in out, "the second search finds the word again")
    t.ok(rss < RSS_MAX_MIB, "in %.1f MiB" % rss)

t.done()
