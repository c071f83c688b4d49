#!/usr/bin/env python3
"""The store on disk (issue 13): `rm` leaves no copy of the text in any file of the data
directory, the online backup (or tokterm.db with its WAL) holds everything, read-only commands
never write (a full disk, a read-only file), the data directory is made private, eight writers
at once lose nothing, kill -9 at 50 random points never damages the database. TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
rng = random.Random(int(os.environ.get("TT_SEED", "0")) or int(time.time()))


def data_dir(home):
    return os.path.join(home, ".local", "share", "tokterm")


def db_path(home):
    return os.path.join(data_dir(home), "tokterm.db")


def query(path, sql, args=()):
    """Read through a read-only connection (it never checkpoints or deletes the WAL)."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def files_holding(d, needle):
    """Names of the files under d whose raw bytes hold needle, and the names of all files."""
    hit, names = [], []
    for root, _dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            names.append(os.path.relpath(p, d))
            with open(p, "rb") as fh:
                if needle in fh.read():
                    hit.append(os.path.relpath(p, d))
    return hit, sorted(names)


with ttlib.FakeServer() as srv:

    def run(home, spec, args, **kw):
        env = dict(kw.pop("env", {}) or {})
        env.setdefault("OPENAI_BASE_URL", srv.base(spec))
        return ttlib.run_tokterm(args, env=env, home=home, **kw)

    # --- rm: no copy of the text left in any file --------------------------------------------
    home = ttlib.make_home()
    marker = "qz" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))
    keep = "kp" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))
    rc, _, err = run(home, "", ["-p", "keep this one %s please" % keep])
    t.eq(rc, 0, "rm: a conversation to keep")
    rc, _, err = run(home, "", ["-p", "first %s" % marker])
    t.ok(rc == 0, "rm: a conversation holding the marker", err.decode())
    rc, out, err = run(home, "", ["search", marker])
    t.ok(rc == 0 and marker.encode() in out, "rm: search finds the marker (both indexes fed)",
         out.decode() + err.decode())
    # then a 100 KB prompt echoed back over ~1.5 s, not cached: the answer is saved in batches
    # of ~17 KB (parts on overflow pages, freed when the answer is folded into its row; over
    # 64 KiB, it waits for the next search to be indexed, so nothing reuses them: free pages
    # that still hold the text)
    long_prompt = " ".join("w%d %s" % (i, marker) for i in range(6000))
    rc, _, err = run(home, "chunk=262144,delay_ms=100", ["-c", "--no-cache", "-p", long_prompt])
    t.ok(rc == 0, "rm: a second, long turn", err.decode())
    conv = query(db_path(home), "SELECT conversation_id FROM messages WHERE content LIKE ?",
                 ("%" + marker + "%",))[0][0]
    # the word index holds a piece per character: marker[2:] is one of them
    hit, names = files_holding(data_dir(home), marker.encode())
    t.ok(hit, "rm: before, the marker is on disk (%s of %s)" % (hit, names))
    con = sqlite3.connect("file:%s?mode=ro" % db_path(home), uri=True)
    free = con.execute("PRAGMA freelist_count").fetchall()[0][0]
    words = con.execute("SELECT count(*) FROM messages_words_data WHERE instr(block, ?)",
                        (marker[2:].encode(),)).fetchall()[0][0]
    con.close()
    t.diag("before rm: %d free pages, %d word-index blocks hold a piece of the marker" % (free, words))
    rc, out, err = run(home, "", ["rm", str(conv)])
    t.eq(rc, 0, "rm: exit 0")
    hit, names = files_holding(data_dir(home), marker.encode())
    t.eq(hit, [], "rm: no file of the data directory holds the marker (%s)" % names)
    hit, names = files_holding(data_dir(home), marker[2:].encode())
    t.eq(hit, [], "rm: nor a piece of it from the word index")
    for f in names:
        p = os.path.join(data_dir(home), f)
        t.diag("after rm: %s %d bytes" % (f, os.path.getsize(p)))
    t.eq(query(db_path(home), "PRAGMA integrity_check"), [("ok",)], "rm: integrity_check ok")
    rc, out, err = run(home, "", ["search", keep])
    t.ok(rc == 0 and keep.encode() in out, "rm: the other conversation is still found")
    rc, out, err = run(home, "", ["search", marker])
    t.ok(rc == 1 and marker.encode() not in out, "rm: the marker is found no more")
    rc, out, err = run(home, "", ["-m", "x", "-p", "keep this one %s please" % keep])
    t.eq(rc, 0, "rm: writing after rm works")

    # --- a batch copies the WAL while its requests are out (issue 14) -------------------------
    # The background checkpoint goes by what the WAL holds after a commit of this process; a
    # batch asked before its first (its cache entries), when nothing is known, and then never.
    home = ttlib.make_home()
    rc, _, _ = run(home, "", ["-p", "the schema first"])  # that run checkpoints at close
    inp = ttlib.write_jsonl(os.path.join(home, "lines.jsonl"),
                            [{"id": i, "prompt": "wal line %d" % i} for i in range(60)])
    rc, out, err = run(home, "gen=6000,chunk=whole", ["batch", inp, "--concurrency", "4"])
    t.eq(rc, 0, "batch of 60 answers of 48 KB: exit 0")
    size = os.path.getsize(db_path(home))
    t.ok(size >= 1 << 20, "batch: its cache entries (2.9 MB) were copied into tokterm.db while "
         "requests were out (%d bytes; a WAL under 8 MiB is not copied at close)" % size)
    t.eq(query(db_path(home), "SELECT count(*) FROM response_cache"), [(61,)],
         "batch: every answer cached (the one-shot's and the batch's 60)")

    # --- backups: the online backup (sqlite3 .backup), or the file with its WAL ---------------
    # (issue 14: no checkpoint at every exit, its fsyncs cost more than the save; the newest
    # writes may be in tokterm.db-wal only, and tokterm.db alone is a consistent older copy)
    home = ttlib.make_home()
    rc, _, err = run(home, "", ["-p", "backup question one"])
    rc2, _, err2 = run(home, "gen=300", ["-c", "-p", "backup question two"])
    t.ok(rc == 0 and rc2 == 0, "backup: two turns", (err + err2).decode())
    whole = [("user", "backup question one", "complete"),
             ("assistant", "backup question one", "complete"),
             ("user", "backup question two", "complete"),
             ("assistant", "tok0 tok1 tok2 tok3 ", "complete")]
    sql = "SELECT role, substr(content, 1, 20), status FROM messages ORDER BY id"
    bdir = ttlib.tempdir("tt-backup-")
    backup = os.path.join(bdir, "backup.db")
    src = sqlite3.connect("file:%s?mode=ro" % db_path(home), uri=True)
    dst = sqlite3.connect(backup)
    src.backup(dst)  # what sqlite3 tokterm.db ".backup FILE" does
    dst.close()
    src.close()
    t.eq(query(backup, sql), whole, "backup: the online backup holds the whole conversation")
    t.eq(query(backup, "PRAGMA integrity_check"), [("ok",)], "backup: it is intact")
    both = os.path.join(bdir, "both")
    os.mkdir(both)
    for suffix in ("", "-wal"):
        if os.path.exists(db_path(home) + suffix):
            shutil.copyfile(db_path(home) + suffix, os.path.join(both, "tokterm.db" + suffix))
    t.eq(query(os.path.join(both, "tokterm.db"), sql), whole,
         "backup: tokterm.db copied with tokterm.db-wal holds the whole conversation")
    alone = os.path.join(bdir, "alone.db")
    shutil.copyfile(db_path(home), alone)  # the main file ALONE, no -wal, no -shm
    try:
        got = query(alone, "PRAGMA integrity_check") + query(
            alone, "SELECT count(*) FROM sqlite_schema WHERE name = 'messages'")
    except sqlite3.Error as e:
        got = str(e)
    t.eq(got, [("ok",), (1,)], "backup: tokterm.db alone is an intact tokterm database")

    # --- a reader pointed at nothing makes nothing (until 2026-12 `--db typo.db ls` made a
    # 184 KB typo.db and printed nothing) --------------------------------------------------------
    home = ttlib.make_home()
    typo = os.path.join(home, "typo.db")
    for args, want_rc, want_out in ((["ls"], 0, b""), (["ls", "--json"], 0, b"[]"),
                                    (["search", "x"], 1, b""), (["show", "1"], 1, b""),
                                    (["export", "1"], 1, b""), (["stats", "--json"], 0, b"{"),
                                    # nor do the commands that change it, nor -c -p (until
                                    # 2026-12 each made an empty database at a mistyped path)
                                    (["rm", "1"], 1, b""), (["rename", "1", "x"], 1, b""),
                                    (["cache", "stats"], 0, b"entries"),
                                    (["cache", "clear"], 0, b"cleared 0")):
        rc, out, err = run(home, "", ["--db", typo] + args)
        what = " ".join(args)
        t.ok(rc == want_rc and out.strip().startswith(want_out) and
             b"no database at " + typo.encode() in err,
             "--db at no file, %s: exit %d, says there is no database there" % (what, want_rc),
             "exit %d\n%s%s" % (rc, out.decode(), err.decode()))
    rc, out, err = run(home, "", ["--db", typo, "-c", "-p", "go on"])
    t.ok(rc == 2 and b"no database at " + typo.encode() in err and b"to continue" in err,
         "--db at no file, -c -p: exit 2, says there is no database there", err.decode())
    t.ok(not os.path.exists(typo) and not os.path.exists(data_dir(home)),
         "--db at no file: the readers, rm, rename, cache and -c made no file",
         str(os.listdir(home)))
    # a file it cannot open: -c and --cache-only stop, and say so (until 2026-12 a "warning"
    # that the conversation would not be saved, as if the run went on, then exit 2)
    junk = os.path.join(home, "junk.db")
    with open(junk, "wb") as f:
        f.write(b"not sqlite at all\n" * 300)
    for args, said in ((["-c", "-p", "go on"], b"cannot continue the conversation: "),
                       (["--cache-only", "-p", "hi"], b"cannot read the cache: ")):
        rc, out, err = run(home, "", ["--db", junk] + args)
        t.ok(rc == 2 and err.startswith(b"tokterm: " + said) and b"nothing was sent" in err and
             b"warning" not in err and b"not saved" not in err,
             "a database it cannot open, %s: exit 2, says the run stopped" % args[0],
             err.decode())
    rc, out, err = run(home, "", ["ls"])
    t.ok(rc == 0 and not os.path.exists(data_dir(home)) and b"no database at" in err,
         "a new user's ls: no data directory made, and says so", err.decode())
    rc, _, err = run(home, "", ["--db", typo, "-p", "now saved"])
    rc2, out, err2 = run(home, "", ["--db", typo, "ls"])
    t.ok(rc == 0 and rc2 == 0 and b"now saved" in out and b"no database" not in err2,
         "--db: a chat makes the file, then ls reads it", (err + err2).decode())

    # --- read-only commands never write: a full disk, or a read-only file ------------------------
    home = ttlib.make_home()
    rc, _, err = run(home, "", ["-p", "an earlier turn"])
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=400,delay_ms=10")})
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "cut by the crash"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    time.sleep(1.2)
    p.kill()
    p.communicate()
    st = query(db_path(home), "SELECT status FROM messages ORDER BY id DESC LIMIT 1")
    t.eq(st, [("streaming",)], "read-only: a row left 'streaming' by a killed writer")
    conv = query(db_path(home), "SELECT conversation_id FROM messages ORDER BY id DESC LIMIT 1")[0][0]
    mnt = None
    if os.geteuid() == 0 and shutil.which("mount"):
        # a real full disk: a small tmpfs holding the data directory, filled to the last byte
        mnt = ttlib.tempdir("tt-full-")
        if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt],
                           stderr=subprocess.DEVNULL) != 0:
            mnt = None
    ro_home = ttlib.make_home()
    os.makedirs(os.path.dirname(data_dir(ro_home)), exist_ok=True)
    if mnt:
        shutil.copytree(data_dir(home), os.path.join(mnt, "tokterm"))
        os.symlink(os.path.join(mnt, "tokterm"), data_dir(ro_home))
        with open(os.path.join(mnt, "filler"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        how = "a full disk"
    else:
        shutil.copytree(data_dir(home), data_dir(ro_home))
        for f in os.listdir(data_dir(ro_home)):
            os.chmod(os.path.join(data_dir(ro_home), f), 0o400)
        os.chmod(data_dir(ro_home), 0o500)
        how = "a read-only file and directory"
    t.diag("read-only commands on %s" % how)
    before = {f: open(os.path.join(data_dir(ro_home), f), "rb").read()
              for f in os.listdir(data_dir(ro_home))}
    rc, out, err = run(ro_home, "", ["ls"])
    t.ok(rc == 0 and b"an earlier turn" in out, "%s: ls works (exit %d)" % (how, rc), err.decode())
    rc, out, err = run(ro_home, "", ["show", str(conv)])
    t.ok(rc == 0 and b"cut by the crash" in out and b"tok0 tok1" in out,
         "%s: show works, with the text saved so far" % how, err.decode())
    t.ok(b"interrupted" in out, "%s: show says the answer was interrupted" % how, out.decode())
    rc, out, err = run(ro_home, "", ["export", str(conv), "--format", "json"])
    t.ok(rc == 0 and b"tok0 tok1" in out, "%s: export works" % how, err.decode())
    rc, out, err = run(ro_home, "", ["stats"])
    t.eq(rc, 0, "%s: stats works" % how)
    after = {f: open(os.path.join(data_dir(ro_home), f), "rb").read()
             for f in os.listdir(data_dir(ro_home))}
    t.ok(before.keys() == after.keys() and all(
        before[f] == after[f] for f in before if not f.endswith("-shm")),
        "%s: ls, show, export and stats wrote nothing" % how)
    # search brings its indexes up to date when it can (best effort): it still answers
    rc, out, err = run(ro_home, "", ["search", "earlier"])
    t.ok(rc == 0 and b"earlier" in out, "%s: search works" % how, err.decode())
    if mnt:
        subprocess.call(["umount", mnt])
    else:
        os.chmod(data_dir(ro_home), 0o700)
    rc, out, err = run(home, "", ["-p", "a writer recovers"])
    t.eq(query(db_path(home), "SELECT status FROM messages WHERE conversation_id = ? "
                              "AND role = 'assistant'", (conv,)), [("interrupted",)],
         "the next writer marks it interrupted")

    # --- an answer over SQLite's length limit (lowered to 1 MB: a 1 GB answer in small) ------
    home = ttlib.make_home()
    rc, out, err = run(home, "gen=300000", ["-p", "a long one"],
                       env={"TOKTERM_TEST_SQLITE_LENGTH": "1000000"})
    gen = "".join("tok%d " % i for i in range(300000)).encode()
    t.ok(rc == 0 and out.rstrip(b"\n") == gen, "over the limit: a 2.9 MB answer, exit 0",
         err.decode())
    rc, out, err = run(home, "", ["show", "1"], env={"TOKTERM_TEST_SQLITE_LENGTH": "1000000"})
    t.ok(rc == 0 and gen.rstrip() in out, "over the limit: show prints the whole answer "
         "(kept in parts)", err.decode())
    rc, out, err = run(home, "", ["export", "1", "--format", "md"])
    t.ok(rc == 0 and gen.rstrip() in out, "over the limit: export has it whole", err.decode())
    t.eq(query(db_path(home), "SELECT status FROM messages WHERE role = 'assistant'"),
         [("complete",)], "over the limit: marked complete")

    # --- the data directory is made private ------------------------------------------------
    home = ttlib.make_home()
    d = data_dir(home)
    os.makedirs(d)
    os.chmod(d, 0o777)
    rc, _, err = run(home, "", ["-p", "private please"])
    t.eq(stat.S_IMODE(os.stat(d).st_mode), 0o700, "a 0777 data directory is tightened to 0700")
    t.ok(b"0777" in err and b"0700" in err, "and tokterm says so", err.decode())
    os.chmod(d, 0o750)
    rc, _, err = run(home, "", ["-p", "group may read"])
    t.eq(stat.S_IMODE(os.stat(d).st_mode), 0o750, "a 0750 directory (not writable by others) is left alone")
    home = ttlib.make_home()
    rc, _, err = run(home, "", ["-p", "new dir"])
    t.eq(stat.S_IMODE(os.stat(data_dir(home)).st_mode), 0o700, "a directory tokterm creates is 0700")
    # a database open to others loses those bits only: one made read-only stays read-only
    # (until 2026-12 it became 0600: ls made a 0444 database writable again)
    os.chmod(db_path(home), 0o644)
    rc, _, err = run(home, "", ["ls"])
    t.ok(stat.S_IMODE(os.stat(db_path(home)).st_mode) == 0o600 and b"0644" in err and
         b"now 0600" in err, "a 0644 database: 0600, said", err.decode())
    os.chmod(db_path(home), 0o444)
    rc, _, err = run(home, "", ["ls"])
    t.ok(stat.S_IMODE(os.stat(db_path(home)).st_mode) == 0o400 and b"0444" in err and
         b"now 0400" in err, "a read-only 0444 database: 0400, still read-only, said",
         "%o %s" % (stat.S_IMODE(os.stat(db_path(home)).st_mode), err.decode()))
    os.chmod(db_path(home), 0o600)

    # --- another process holds the write lock (an sqlite3 shell, a long write) -----------------
    # The answer keeps streaming while its batches wait (until 2026-12 the first batch waited
    # for the lock, the answer frozen on stdout until it was let go), and is saved whole once
    # the lock is free; a prompt that waits for the lock before it is sent says so.
    import threading  # noqa: E402
    home = ttlib.make_home()
    run(home, "", ["-p", "create the database"])
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=60,delay_ms=40")})
    holder = sqlite3.connect(db_path(home), isolation_level=None, timeout=10,
                             check_same_thread=False)
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "while locked"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    got = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: p.stdout.read1(4096), b"")),
                              daemon=True)
    reader.start()
    time.sleep(0.15)  # its prompt saved, the answer begun
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM cache_meta WHERE 0")
    deadline = time.time() + 20
    while b"tok59" not in b"".join(got) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    streamed = b"tok59" in b"".join(got)
    t.ok(streamed and p.poll() is None,
         "the write lock held by another process: the whole answer streamed meanwhile, the "
         "save still waiting", repr(b"".join(got)[-60:]))
    holder.execute("COMMIT")
    _, err = p.communicate(timeout=60)
    reader.join(5)
    text = query(db_path(home), "SELECT content, status FROM messages WHERE role = 'assistant' "
                                "ORDER BY id DESC LIMIT 1")
    t.ok(p.returncode == 0 and text and text[0][1] == "complete" and
         text[0][0].rstrip().endswith("tok59") and b"not be saved" not in err,
         "... and saved whole once the lock was let go, no warning", err.decode())
    # a prompt that meets the lock before it is sent: said after SQLite's own 5 s wait
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM cache_meta WHERE 0")
    threading.Timer(7.0, lambda: holder.execute("COMMIT")).start()
    rc, out, err = run(home, "", ["-p", "before the lock goes"], timeout=60)
    t.ok(rc == 0 and out == b"before the lock goes\n" and
         b"waiting for the database" in err and b"write lock" in err,
         "a prompt waiting for the lock: said on stderr, then sent and answered", err.decode())
    time.sleep(0.2)
    holder.close()

    # --- eight writers at once ---------------------------------------------------------------
    home = ttlib.make_home()
    run(home, "", ["-p", "create the database"])
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=120,delay_ms=3")})
    t0 = time.time()
    procs = [subprocess.Popen([ttlib.tokterm_path(), "-p", "p%d" % i, "-p", "q%d" % i], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for i in range(8)]
    errs = [pr.communicate(timeout=120)[1] for pr in procs]
    t.diag("8 writers: %.1f s" % (time.time() - t0))
    t.eq([pr.returncode for pr in procs], [0] * 8, "8 writers: all exit 0")
    t.ok(all(b"locked" not in e and b"busy" not in e for e in errs),
         "8 writers: no 'locked' or 'busy'", repr(errs))
    want = ["p%d" % i for i in range(8)] + ["q%d" % i for i in range(8)]
    got = query(db_path(home), "SELECT content FROM messages WHERE role = 'user' AND content <> "
                               "'create the database' ORDER BY content")
    t.eq([r[0] for r in got], sorted(want), "8 writers: all 16 prompts saved, once each")
    gen = "".join("tok%d " % i for i in range(120))
    got = query(db_path(home), "SELECT count(*) FROM messages WHERE role = 'assistant' AND "
                               "status = 'complete' AND content = ?", (gen,))
    t.eq(got, [(16,)], "8 writers: all 16 answers saved whole and complete")
    t.eq(query(db_path(home), "SELECT count(*) FROM message_parts"), [(0,)],
         "8 writers: no part left over")
    t.eq(query(db_path(home), "PRAGMA integrity_check"), [("ok",)], "8 writers: integrity_check ok")

    # --- kill -9 at 50 random points -------------------------------------------------------------
    home = ttlib.make_home()
    for i in range(3):
        run(home, "", ["-p", "earlier turn %d" % i])
    earlier = query(db_path(home), "SELECT id, role, status, content FROM messages ORDER BY id")
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=300,delay_ms=1")})
    bad, finished, t0 = [], 0, time.time()
    for trial in range(50):
        args = ["-p", "trial %d" % trial] if trial % 2 else ["-c", "-p", "trial %d" % trial]
        p = subprocess.Popen([ttlib.tokterm_path()] + args, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 0.6))
        if p.poll() is not None:
            finished += 1
        p.kill()
        p.wait()
        con = sqlite3.connect("file:%s?mode=ro" % db_path(home), uri=True, timeout=30)
        try:
            ic = con.execute("PRAGMA integrity_check").fetchall()
            now = con.execute("SELECT id, role, status, content FROM messages WHERE id <= ? "
                              "ORDER BY id", (earlier[-1][0],)).fetchall()
        finally:
            con.close()
        if ic != [("ok",)] or now != earlier:
            bad.append((trial, ic, len(now)))
    t.diag("kill -9: 50 trials in %.1f s, %d finished before the kill" % (time.time() - t0, finished))
    t.eq(bad, [], "kill -9 at 50 random points: integrity ok and earlier turns intact each time")
    rc, out, err = run(home, "", ["-p", "after the kills"])
    t.eq(rc, 0, "kill -9: the next run works")
    left = query(db_path(home), "SELECT count(*) FROM messages WHERE status = 'streaming'")
    t.eq(left, [(0,)], "kill -9: the next writer recovered every cut answer")
    t.eq(query(db_path(home), "PRAGMA integrity_check"), [("ok",)], "kill -9: integrity ok at the end")
    n_user = query(db_path(home), "SELECT count(*) FROM messages WHERE content LIKE 'trial %'")
    t.diag("kill -9: %d of 50 prompts were saved before the kill" % n_user[0][0])

sys.exit(t.done())
