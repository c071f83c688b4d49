#!/usr/bin/env python3
"""Start-up overlap: a scripted request loads libcurl on a thread of its own while the main
thread reads the key and opens the store, and the request leaves only when both are done.
Seen from outside: while another process holds the database locked (so the store's open
waits), libcurl is already mapped in tokterm (/proc/PID/maps); the request then leaves once
on one connection, and a cache hit sends nothing. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def maps(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return f.read()
    except OSError:
        return ""


def has_open(pid, path):
    """Whether process pid has the file path open."""
    d = "/proc/%d/fd" % pid
    try:
        for fd in os.listdir(d):
            try:
                if os.readlink(os.path.join(d, fd)) == path:
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def wait_open(p, path, timeout):
    """True once p has path open (False when p ended or time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        if has_open(p.pid, path):
            return True
        time.sleep(0.01)
    return False


def wait_maps(p, names, timeout):
    """True once every name is in p's mappings (False when p ended or time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        m = maps(p.pid)
        if all(n in m for n in names):
            return True
        time.sleep(0.01)
    return False


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("reply=hello%20there"),
                                          "TOKTERM_DEBUG_DUMPABLE": "1"})
    db = os.path.join(home, ".local", "share", "tokterm", "tokterm.db")
    rc, out, err = ttlib.run_tokterm(["-p", "first"], env=env, home=home)
    t.ok(rc == 0 and out == b"hello there\n" and os.path.exists(db),
         "a first run makes the database", err.decode(errors="replace"))

    # Another process holds the database: tokterm's store_open waits on the lock.
    lock = sqlite3.connect(db, isolation_level=None, timeout=10)
    lock.execute("PRAGMA locking_mode = EXCLUSIVE")
    lock.execute("BEGIN EXCLUSIVE")
    lock.execute("CREATE TABLE IF NOT EXISTS tt_test_lock (x)")
    n0 = len(srv.requests(all=True))
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "second"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    waiting = wait_open(p, os.path.realpath(db), 10)  # the store is being opened
    curl = wait_maps(p, ["libcurl"], 3)
    sent_meanwhile = len(srv.requests(all=True)) - n0
    still = p.poll() is None
    t.ok(waiting and still, "tokterm waits on the locked database")
    t.ok(curl, "libcurl is loaded while the store waits (not after it)",
         "no libcurl in /proc/PID/maps while store_open waited")
    t.ok(sent_meanwhile == 0, "nothing is sent before the store is open and the prompt saved",
         "%d requests" % sent_meanwhile)
    lock.execute("ROLLBACK")
    lock.close()
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    t.ok(p.returncode == 0 and out == b"hello there\n", "the request leaves once the store is "
         "open", "rc %s: %s" % (p.returncode, err.decode(errors="replace")))
    reqs = srv.requests()
    t.ok(len(reqs) == 2 and reqs[-1]["conn_req"] == 1,
         "one request on one connection", repr([(r["n"], r["conn"], r["conn_req"]) for r in reqs]))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    con.close()
    t.ok(rows[-2:] == [("user", "second"), ("assistant", "hello there")],
         "the prompt and the answer are saved", repr(rows))

    # A cache hit: the answer comes from the store and nothing leaves (the early start loads
    # libcurl at most).
    n0 = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["-p", "second"], env=env, home=home)
    t.ok(rc == 0 and out == b"hello there\n", "the same prompt again is answered",
         err.decode(errors="replace"))
    t.ok(len(srv.requests(all=True)) == n0, "a cache hit sends nothing",
         repr(srv.requests(all=True)[n0:]))

    # Without libcurl (an unloadable file first on the library path for each build tokterm
    # tries): a cached answer needs no network and is given; a new prompt is saved and its
    # turn fails saying why.
    fake = ttlib.tempdir("tt-nocurl-")
    for so in ttlib.LIBCURL_SONAMES:
        with open(os.path.join(fake, so), "w") as f:
            f.write("not a library\n" * 16)
    nocurl = dict(env, LD_LIBRARY_PATH=fake)
    n0 = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["-p", "second"], env=nocurl, home=home)
    t.ok(rc == 0 and out == b"hello there\n", "a cache hit is answered without libcurl",
         "rc %d: %s" % (rc, err.decode(errors="replace")))
    rc, out, err = ttlib.run_tokterm(["-p", "third"], env=nocurl, home=home)
    t.ok(rc != 0 and b"cannot load libcurl" in err and b"install libcurl" in err,
         "a new prompt without libcurl fails saying what to install",
         "rc %d: %s" % (rc, err.decode(errors="replace")))
    t.ok(len(srv.requests(all=True)) == n0, "nothing was sent without libcurl")
    con = sqlite3.connect(db)
    rows = con.execute("SELECT role, content, status FROM messages ORDER BY id").fetchall()
    con.close()
    t.ok(rows[-1][0] == "assistant" and rows[-1][2] == "error" and rows[-2][:2] ==
         ("user", "third"), "the prompt is saved and its answer marked failed", repr(rows[-3:]))

    # libcurl held while it loads (a FIFO as the first build tokterm tries, first on the
    # library path: the loading thread blocks reading it until the test closes its end; the
    # other build unloadable). The request is handed over at once: the loading thread becomes
    # the network thread once libcurl is loaded, and the main thread waits for events in its
    # loop (poll), not for libcurl (a futex). Let go, the load fails and the turn fails as
    # above.
    held = ttlib.tempdir("tt-heldcurl-")
    fifo = os.path.join(held, ttlib.LIBCURL_SONAMES[0])
    os.mkfifo(fifo)
    for so in ttlib.LIBCURL_SONAMES[1:]:
        with open(os.path.join(held, so), "w") as f:
            f.write("not a library\n" * 16)
    n0 = len(srv.requests(all=True))
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "fourth"],
                         env=dict(env, LD_LIBRARY_PATH=held), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    wfd, deadline = -1, time.monotonic() + 20
    while wfd < 0 and time.monotonic() < deadline and p.poll() is None:
        try:  # ENXIO until the loading thread has the FIFO open
            wfd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.01)
    polls = {"x86_64": ("7", "271"), "aarch64": ("73",)}.get(os.uname().machine, ())
    call, deadline = "?", time.monotonic() + 10
    while wfd >= 0 and call not in polls and time.monotonic() < deadline and p.poll() is None:
        try:  # the main thread's system call: its number first
            with open("/proc/%d/syscall" % p.pid) as f:
                call = f.read().split()[0]
        except (OSError, IndexError):
            call = "?"
        time.sleep(0.01)
    t.ok(wfd >= 0 and call in polls and p.poll() is None,
         "while libcurl loads, the request is handed over and the main thread waits in poll",
         "FIFO opened: %s, main thread in system call %s (poll: %s)" % (wfd >= 0, call, polls))
    if wfd >= 0:
        os.close(wfd)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    t.ok(p.returncode != 0 and b"cannot load libcurl" in err and b"install libcurl" in err and
         len(srv.requests(all=True)) == n0,
         "a libcurl that fails while the request waits for it: the turn fails saying why",
         "rc %s: %s" % (p.returncode, err.decode(errors="replace")))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT role, content, status FROM messages ORDER BY id").fetchall()
    con.close()
    t.ok(rows[-1][0] == "assistant" and rows[-1][2] == "error" and rows[-2][:2] ==
         ("user", "fourth"), "its prompt is saved and its answer marked failed",
         repr(rows[-3:]))

t.done()
