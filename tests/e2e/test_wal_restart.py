#!/usr/bin/env python3
"""The WAL starts over after the background checkpoint (issue 14). A run whose store holds
more than 1 MB of WAL copies it into the database while its request is on the wire
(store_checkpoint_async); the answer's commit must then start the WAL over, so that the next
open rebuilds its WAL index from a few frames instead of re-reading (and checksumming) every
frame written since the database was made, and the next run does not copy it all again.
Before: the copy began before the prompt's commit, and the answer's transaction began before
the copy was waited for, so the WAL never started over: it grew by every run's pages (~110 kB
a resume of the benchmark's long conversation) and every later run copied and re-read it.
Nothing is lost: every turn is in the database, read back by a new connection.
A run that wrote 256 KiB or more leaves the copy to a detached `tokterm --checkpoint`, which
starts the WAL over once it copied it. TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def db_path(home):
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


def wal_frames(db):
    """The frames of the WAL's current generation (those whose salt is the header's): what the
    next open's recovery reads."""
    try:
        with open(db + "-wal", "rb") as f:
            w = f.read()
    except FileNotFoundError:
        return 0
    if len(w) < 32:
        return 0
    page = struct.unpack(">I", w[8:12])[0]
    salt, off, n = w[16:24], 32, 0
    while off + 24 + page <= len(w) and w[off + 8:off + 16] == salt:
        n += 1
        off += 24 + page
    return n


def rows(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
    try:
        return con.execute("SELECT role, length(content) FROM messages ORDER BY id").fetchall()
    finally:
        con.close()


with ttlib.FakeServer() as srv:

    def run(home, spec, args, env=None):
        return ttlib.run_tokterm(["-m", "gpt-4o-mini"] + args, home=home, timeout=120,
                                 env=dict(env or {}, OPENAI_BASE_URL=srv.base(spec)))

    for how, resume in (("a resume (-c -p)", ["-c"]), ("a one-shot (-p)", [])):
        home = ttlib.make_home()
        db = db_path(home)
        rc, _, err = run(home, "", ["-p", "the schema first"])  # checkpoints at its close
        t.eq(rc, 0, "%s: the first run made the database" % how)
        # Answers of ~0.11 MB (~53 frames a run: 27 of text, the rest its rows and index)
        # until the WAL holds more than 1 MiB (256 frames): five, or more if a run's own copy
        # started the WAL over. A run that wrote less than 256 KiB (its own count, printed by
        # TOKTERM_DEBUG_STORE) starts no detached `tokterm --checkpoint` at its close: the copy
        # is the next run's, while its request is out. On a loaded machine one may write more:
        # its answer arrives in many reads, so its text is written twice (the parts, every
        # 0.25 s, then the answer's row; seen with two test suites at once, and with 8 of
        # this test at once under ASan). Such a run starts one, rightly (test_store.py): it
        # is waited for, and the WAL fills again from where that copy started it over. (Under
        # a load where every run writes that much, it cannot fill: "left N frames" fails.)
        n_long = 0
        while wal_frames(db) < 256 and n_long < 30:
            rc, out, err = run(home, "gen=14000,chunk=whole",
                               ["-c", "-p", "long answer %d" % n_long],
                               {"TOKTERM_DEBUG_STORE": "1"})
            n_long += 1
            m = re.search(rb"store: wrote (\d+) bytes to the WAL", err)
            wrote = int(m.group(1)) if m else -1
            running = ttlib.checkpoint_running(db)
            t.ok(rc == 0 and 0 <= wrote and (wrote >= 256 << 10 or not running),
                 "%s: long answer %d wrote %d bytes, %s" %
                 (how, n_long, wrote, "less than 256 KiB: no detached checkpoint"
                  if wrote < 256 << 10 else "256 KiB or more: its detached checkpoint"),
                 err.decode(errors="replace"))
            if wrote >= 256 << 10:
                ttlib.wait_checkpoints(db)
        before = wal_frames(db)
        t.ok(before >= 256, "%s: %d long answers left %d frames in the WAL (>= 1 MiB)"
             % (how, n_long, before))
        rc, out, err = run(home, "reply=Short.", resume + ["-p", "and now a short one"])
        after = wal_frames(db)
        t.ok(rc == 0 and out.strip() == b"Short.", "%s: the next run answered" % how,
             err.decode(errors="replace"))
        # the copy ran while the request was out; the answer's commit started the WAL over:
        # what it holds is that commit's pages, not the MiB before it
        t.ok(after < 64, "%s: the WAL started over after the copy (%d frames, was %d)"
             % (how, after, before))
        rc, out, err = run(home, "reply=Again.", resume + ["-p", "one more"])
        t.ok(rc == 0 and wal_frames(db) < 128,
             "%s: the next run appends to the new WAL (%d frames)" % (how, wal_frames(db)))
        got = rows(db)
        want_roles = ["user", "assistant"] * (3 + n_long)
        t.eq([r[0] for r in got], want_roles, "%s: every turn is saved" % how)
        longs = [got[3 + 2 * i][1] for i in range(n_long)] if len(got) >= 2 * n_long + 4 else []
        t.ok(len(got) == 6 + 2 * n_long and longs and longs[0] >= 100000 and
             all(n == longs[0] for n in longs) and got[-3][1] == len("Short."),
             "%s: the long answers and the short one are whole" % how, repr(got))

    # A run that wrote 256 KiB or more (here a ~0.33 MB answer, ~110 frames) starts a
    # detached `tokterm --checkpoint` at its close, which copies the WAL and starts it over:
    # the next open's recovery reads a few frames, not the answer again (before, only runs
    # that wrote 1 MiB started one, and this answer's frames waited for a later request).
    home = ttlib.make_home()
    db = db_path(home)
    rc, _, _ = run(home, "", ["-p", "the schema first"])
    rc2, out, err = run(home, "gen=40000,chunk=whole", ["-p", "a 0.33 MB answer"])
    # The copy's lock is held from before the run exits: another tokterm (and
    # ttlib.checkpoint_running) goes by it, as the copy's command line is the run's until its
    # exec. Checked as soon as the run is reaped (or the copy has already started the WAL
    # over: it takes an exec, SQLite's load and a copy, many milliseconds).
    locked = ttlib.checkpoint_locked(db)
    t.ok(locked or wal_frames(db) < 16,
         "a 0.33 MB answer: its copy holds its lock when the run has exited")
    # the copy is forked as the run exits: until its exec its command line is the run's, so
    # wait for what it does (at most 10 s), then for it to be gone
    deadline = time.monotonic() + 10
    while wal_frames(db) >= 16 and time.monotonic() < deadline:
        time.sleep(0.05)
    copied = ttlib.wait_checkpoints(db)
    frames = wal_frames(db)
    t.ok(rc == 0 and rc2 == 0 and copied and frames < 16,
         "a 0.33 MB answer: its detached copy started the WAL over (%d frames)" % frames,
         err.decode(errors="replace"))
    got = rows(db)
    t.ok(len(got) == 4 and got[3][1] >= 300000, "a 0.33 MB answer: saved whole", repr(got))

t.done()
