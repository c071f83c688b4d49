#!/usr/bin/env python3
"""Small faults found by QA, one section each: what the user is told matches what happens.
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
ONLY = set(sys.argv[1:])  # section names to run (lock, modes, ...); none: every section


def section(name):
    return not ONLY or name in ONLY


def db_path(home):
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


with ttlib.FakeServer() as srv:
    base = {"OPENAI_BASE_URL": srv.base()}

    if section("lock"):
        # --- the write lock held longer than a write waits: the turn's save gives up once, 30 s
        # after it began, as the note says; until 2026-12 the batch gave up at 30 s and then each
        # write of it waited 30 s more, the request leaving after 60 s ---
        home = ttlib.make_home()
        rc, _, _ = ttlib.run_tokterm(["-p", "make the database"], env=base, home=home)
        t.eq(rc, 0, "a first run makes the database")
        held = threading.Event()
        release = threading.Event()

        def hold():
            con = sqlite3.connect(db_path(home), isolation_level=None)
            con.execute("BEGIN IMMEDIATE")
            held.set()
            release.wait(90)
            con.execute("ROLLBACK")
            con.close()

        th = threading.Thread(target=hold)
        th.start()
        held.wait(10)
        start = time.monotonic()
        p = subprocess.Popen([ttlib.tokterm_path(), "--no-cache", "-p", "lock wait"],
                             env=ttlib.clean_env(home, base), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = os.read(p.stdout.fileno(), 4096)  # the answer's first bytes: the request left
        took = time.monotonic() - start
        release.set()
        out, err = p.communicate(timeout=120)
        th.join()
        t.eq(first + out, b"lock wait\n", "the answer is printed")
        t.ok(b"gives up 30 s after it began, 25 s from now" in err, "the note says 30 s in all",
             err.decode(errors="replace"))
        t.ok(28 <= took <= 33, "the request left after the 30 s the write waited (%.1f s)" % took)
        t.ok(b"could not be saved" in err, "and the turn is said to be unsaved",
             err.decode(errors="replace"))

    if section("modes"):
        # --- under umask 000 the --trace file and the models cache are still 0600: they hold the
        # user's requests and what the server offers them (until 2026-12: 0666) ---
        home = ttlib.make_home()
        trace = os.path.join(home, "trace.out")
        old = os.umask(0)
        try:
            rc, _, err = ttlib.run_tokterm(["--trace", trace, "-p", "traced"], env=base, home=home)
            rc2, _, err2 = ttlib.run_tokterm(["models"], env=base, home=home)
        finally:
            os.umask(old)
        t.eq((rc, rc2), (0, 0), "a traced -p and `tokterm models` under umask 000")
        t.eq(oct(os.stat(trace).st_mode & 0o777), "0o600", "the --trace file is 0600")
        cache = os.path.join(home, ".cache", "tokterm", "models")
        modes = [oct(os.stat(os.path.join(cache, f)).st_mode & 0o777) for f in os.listdir(cache)]
        t.eq(modes, ["0o600"], "the models cache file is 0600")

    # --- a config file that is a FIFO nobody writes: refused after 5 s with the reason (until
    # 2026-12 the open blocked tokterm for ever); one something writes to (`--config <(...)`)
    # and /dev/null are read ---
    if section("fifo"):
        home = ttlib.make_home()
        cfgdir = os.path.join(home, ".config", "tokterm")
        os.makedirs(cfgdir, exist_ok=True)
        os.mkfifo(os.path.join(cfgdir, "config"))
        fifo = os.path.join(home, "other.ini")
        os.mkfifo(fifo)
        for args, what in ((["-p", "x"], "the default config"),
                           (["--config", fifo, "-p", "x"], "--config FIFO")):
            start = time.monotonic()
            rc, out, err = ttlib.run_tokterm(args, env=base, home=home, timeout=20)
            t.eq(rc, 2, "%s as a FIFO: a configuration error (exit 2)" % what)
            t.ok(b"a FIFO with nothing to read in 5 s" in err, "%s: says it is a FIFO" % what,
                 err.decode(errors="replace"))
            t.ok(time.monotonic() - start < 15, "%s: within its 5 s" % what)
        os.unlink(os.path.join(cfgdir, "config"))
        rc, out, err = ttlib.run_tokterm(["--config", "/dev/stdin", "--no-save", "--json", "-p",
                                          "x"], env=base, home=home, stdin="model = piped-model\n")
        t.ok(rc == 0 and json.loads(out).get("model") == "piped-model" and not err,
             "--config /dev/stdin from a pipe: read", out.decode() + err.decode())
        rc, out, err = ttlib.run_tokterm(["--config", "/dev/null", "--no-save", "-p", "x"],
                                         env=base, home=home)
        t.ok(rc == 0 and not err, "--config /dev/null: an empty config, no warning",
             err.decode())

    # --- no socket can be opened (EMFILE): the message names the limit on open files, not
    # "Couldn't connect to server - is the server running?" (until 2026-12). The first attempt
    # goes to a closed port; while tokterm waits to retry, its limit is set to the descriptors
    # it has open, so the retries' socket() fails with EMFILE, whatever start-up needed ---
    if section("emfile"):
        home = ttlib.make_home()
        env = ttlib.clean_env(home, {"OPENAI_BASE_URL": "http://127.0.0.1:%d/v1"
                                     % ttlib.free_port()})
        p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "--no-cache", "-p", "files"],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        first = p.stderr.readline()
        n = len(os.listdir("/proc/%d/fd" % p.pid))
        resource.prlimit(p.pid, resource.RLIMIT_NOFILE, (n, n))
        out, err = p.communicate(timeout=60)
        err = first + err
        t.ok(b"retrying" in first, "the first attempt failed (a closed port)", first.decode())
        t.eq(p.returncode, 4, "a network failure (exit 4)")
        t.ok(b"Too many open files" in err and b"ulimit -n" in err,
             "the message names too many open files and ulimit -n", err.decode())
        t.ok(b"is the server running" not in err.split(b"\n")[-2],
             "and does not send the user to the server", err.decode())

    # --- a query of 1,000 words: SQLite parsed their chain of ANDs as a tree 1,000 deep and
    # refused it ("Expression tree is too large"), exit status 1 as for no match (until 2026-12)
    if section("search"):
        home = ttlib.make_home()
        rc, _, _ = ttlib.run_tokterm(["-p", "count"], home=home,
                                     env={"OPENAI_BASE_URL": srv.base("gen=1000")})
        t.eq(rc, 0, "an answer of 1,000 distinct words (tok0 ... tok999)")
        words = ["tok%d" % i for i in range(1000)]
        rc, out, err = ttlib.run_tokterm(["search"] + words, home=home)
        t.ok(rc == 0 and b"[tok0]" in out, "a query of its 1,000 words finds it",
             "rc %d: %s" % (rc, err.decode(errors="replace")[-300:]))
        rc, out, err = ttlib.run_tokterm(["search"] + words + ["tok1000"], home=home)
        t.ok(rc == 1 and b"no matches" in err and b"too large" not in err,
             "one word more that it lacks: no matches", err.decode(errors="replace")[-300:])
        short = ["%c%c" % (97 + i // 26 % 26, 97 + i % 26) for i in range(1000)]
        rc, out, err = ttlib.run_tokterm(["search"] + short, home=home)
        t.ok(rc == 1 and b"no matches" in err and b"too large" not in err,
             "1,000 short words (filtered row by row): no matches, no error",
             err.decode(errors="replace")[-300:])

    # --- batch's output cannot be written (a full disk): its summary counts the lines really
    # written; until 2026-12 "1 item: 1 complete" with nothing written ---
    if section("batch"):
        home = ttlib.make_home()
        inp = os.path.join(home, "in.jsonl")
        ttlib.write_jsonl(inp, [{"id": i, "prompt": "line %d" % i} for i in range(5)])
        for args, name in ((["-o", "/dev/full"], "--out /dev/full"), ([], "stdout /dev/full")):
            with open("/dev/full", "wb") as full:
                p = subprocess.run([ttlib.tokterm_path(), "--incognito", "batch", inp] + args,
                                   env=ttlib.clean_env(home, base), stdin=subprocess.DEVNULL,
                                   stdout=full, stderr=subprocess.PIPE, timeout=60)
            err = p.stderr.decode(errors="replace")
            t.eq(p.returncode, 1, "%s: exit 1 (the output failed)" % name)
            t.ok("No space left on device" in err, "%s: the write's error is said" % name, err)
            t.ok(" 0 complete, 0 failed" in err and "not written" in err,
                 "%s: the summary counts nothing written and says what was not" % name, err)

    # --- `tokterm rm N` while another process answers in conversation N (-c): the answer is
    # printed whole, and the warning says the conversation was removed meanwhile; until 2026-12
    # it said only "FOREIGN KEY constraint failed" ---
    if section("rm"):
        home = ttlib.make_home()
        rc, _, _ = ttlib.run_tokterm(["-p", "first"], env=base, home=home)
        t.eq(rc, 0, "a first conversation")
        env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=40,delay_ms=100")})
        p = subprocess.Popen([ttlib.tokterm_path(), "-c", "-p", "second"], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        first = os.read(p.stdout.fileno(), 4096)  # streaming: its answer's row is saved
        rc, rm_out, _ = ttlib.run_tokterm(["rm", "1"], home=home)
        out, err = p.communicate(timeout=60)
        err = err.decode(errors="replace")
        t.ok(rc == 0 and b"deleted conversation 1" in rm_out, "rm 1 while the answer streams")
        want = "".join("tok%d " % i for i in range(40)).encode()
        t.eq((first + out).strip(), want.strip(), "the answer is printed whole")
        t.eq(p.returncode, 0, "the answering run ends as its answer did (exit 0)")
        t.ok("conversation was removed meanwhile" in err, "the warning says why", err)

    # --- a word of a conversation's title (rename) finds the conversation; until 2026-12
    # search looked at messages only ---
    if section("titles"):
        home = ttlib.make_home()
        for q in ("alpha beta", "gamma delta"):
            rc, _, _ = ttlib.run_tokterm(["-p", q], env=base, home=home)
        rc, out, _ = ttlib.run_tokterm(["rename", "1", "Holiday", "plans", "Zanzibar"], home=home)
        t.eq(rc, 0, "conversation 1 renamed")
        rc, out, err = ttlib.run_tokterm(["search", "zanzibar"], home=home)
        t.ok(rc == 0 and out.startswith(b"1  ") and b"title  Holiday plans [Zanzibar]" in out,
             "a word of the title finds the conversation, marked", out.decode() + err.decode())
        rc, out, err = ttlib.run_tokterm(["search", "--json", "PLANS", "zanz"], home=home)
        hits = json.loads(out) if rc == 0 else []
        t.eq([(h["conversation"], h["message"], h["role"]) for h in hits],
             [(1, None, "title")], "--json: the conversation, message null, role title")
        rc, out, err = ttlib.run_tokterm(["search", "gamma"], home=home)
        t.ok(rc == 0 and b"title" not in out.split(b"\n")[0] and out.count(b"\n") == 4,
             "a title that is the first prompt, found in its messages: not listed twice",
             out.decode())
        rc, out, err = ttlib.run_tokterm(["search", "zanzibar", "--model", "other"], home=home)
        t.eq(rc, 1, "--model filters the conversation's model")
        # with OR: titles first, and a conversation found by a message not listed again for
        # its title (until 2026-12 each alternative's list was merged by place)
        rc, _, _ = ttlib.run_tokterm(["rename", "2", "Zanzibar", "gamma", "notes"], home=home)
        rc, out, err = ttlib.run_tokterm(["search", "gamma", "OR", "zanzibar"], home=home)
        lines = out.decode().splitlines()
        t.ok(rc == 0 and lines and lines[0].startswith("1  ") and "title" in lines[0] and
             not any(ln.startswith("2  ") and "title" in ln for ln in lines) and
             any(ln.startswith("2/") for ln in lines),
             "OR: the title-only conversation first, the one found by a message not listed "
             "again for its title", out.decode())

t.done()
