#!/usr/bin/env python3
"""A lean resume reads its rows through a map of the database file (issue 14): the newest
turns of a long conversation, a few hundred pages read once, are not copied page by page into
SQLite's page cache (each page a fresh 4 KiB of memory the kernel faults in). The store's debug
line (TOKTERM_DEBUG_STORE) says how many pages went through the page cache: with the map, the
few the run writes and the WAL's, not the history's. The request is the one the full load
(TOKTERM_FULL_RESUME=1, no map) sends, byte for byte, and so is a second lean resume's. TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def pages(err):
    m = re.search(rb"store: (\d+) pages read into the page cache", err)
    return int(m.group(1)) if m else None
resumed = ttlib.resumed


with ttlib.FakeServer() as srv:

    def run(home, args, env=None):
        return ttlib.run_requests(srv, home, args, env)

    home = ttlib.make_home()
    rc, _, _ = run(home, ["-p", "Let us start."])
    # 4,000 rows of ~150 words (~1 kB each: 4 MB, ~1,000 pages): 128k tokens of window hold
    # the newest few hundred
    ttlib.history_add_turns(ttlib.history_db(home), 2000, 150, 1)
    rc, err, _ = run(home, ["-c", "-p", "the first resume counts the rows"])
    t.eq(rc, 0, "the first resume (it counts and stores the rows' tokens)")
    full = ttlib.copy_home(home)
    rc, err, lean = run(home, ["-c", "-p", "and the parser's buffer?"])
    n, how = resumed(err) or (0, None)
    t.ok(rc == 0 and how == "the newest" and 100 < n < 2000,
         "a lean resume reads the newest turns (%r)" % (resumed(err),),
         err.decode(errors="replace"))
    got = pages(err)
    # the history read is ~600 pages; what is left is the run's own writes and the WAL
    t.ok(got is not None and got < 150,
         "the turns read through the map: %r pages through the page cache" % got,
         err.decode(errors="replace"))
    rc2, err2, whole = run(full, ["-c", "-p", "and the parser's buffer?"],
                           env={"TOKTERM_FULL_RESUME": "1"})
    full_pages = pages(err2)
    t.ok(rc2 == 0 and full_pages is not None and full_pages > 500,
         "the full load reads the file as before (%r pages through the page cache)"
         % full_pages, err2.decode(errors="replace"))
    t.ok(len(lean) == 1 and lean == whole,
         "the same request as the full load, byte for byte (%d bytes)"
         % (len(str(lean[0])) if lean else 0))
    rc, err, again = run(home, ["-c", "-p", "one more"])
    rc2, err2, again_full = run(full, ["-c", "-p", "one more"],
                                env={"TOKTERM_FULL_RESUME": "1"})
    t.ok(rc == 0 and rc2 == 0 and again and again == again_full,
         "the next resume too (the map is off again after the walk: the answer saved as before)")

t.done()
