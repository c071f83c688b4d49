#!/usr/bin/env python3
"""Resuming a long conversation (`tokterm -c -p`) against curl posting the same bodies (issue 14).

For each case a database is made with one conversation of N messages (tokterm makes the
database and the first turn; the rest are inserted with Python's sqlite3 as a script would, each
row linked to its parent as tokterm links it, without token counts: schema v7 counts such rows
once, in the warm-up run, and stores the counts), then, interleaved, several rounds of
  (a) tokterm --db D -c -p PROMPT             the default configuration: context policy, saving,
                                              response cache
  (b) curl posting the body (or bodies) tokterm sent in its previous run, one process
against bench/batch/leanserver.c (answers at once; captures the bodies it gets). Each tokterm
run adds one turn (two messages) to the conversation; a warm-up run before the rounds pays what
is done once (the token counts of the inserted rows, the long case's one summary request, the
page cache). When tokterm sends more than one request in a
run (summaries of the dropped turns, context_policy = summarize), curl posts all of them, in
order, with --next, on one connection.

Cases: short = 10,000 and 1,300 messages of 20-100 bytes; long = 10,000 messages of ~800 bytes
(8 MB); flaky = short, with one exchange in 50 failed before any text came (an empty answer
row with status 'error', as a network failure leaves it: a prompt never sent). Targets: <= 1.5x
(short and flaky, at every length), <= 2x (long).

usage: bench/resume/run.py [--tokterm PATH] [--rounds 11] [--rows FILE] [--keep DIR]
                           [--cases short:10000,short:1300,long:10000,flaky:10000]
"""
import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.dont_write_bytecode = True
import benchlib  # noqa: E402

WORDS = ("the a of to and in is it that for on with as was this be are by at from or an not "
         "but have you which one all we can there their more will about would if when what so "
         "out up into time only new some could these two may first any like now than other how "
         "then its our over also after most work where just should because each those people "
         "parser buffer stream token cache index query table answer model request server client "
         "function return value error memory thread socket header json string number array "
         "object width height frame screen render layout budget context history message store "
         "database commit search window prompt reply summary length offset pointer struct").split()


def text(rng, n_bytes):
    """About n_bytes of prose-like text: sentences of common words, some code and numbers."""
    out, size = [], 0
    while size < n_bytes:
        k = rng.randint(5, 16)
        s = " ".join(rng.choice(WORDS) for _ in range(k))
        r = rng.random()
        if r < 0.1:
            s += " `%s(%d)`" % (rng.choice(WORDS), rng.randint(0, 9999))
        elif r < 0.2:
            s += ", %d.%d%%" % (rng.randint(0, 99), rng.randint(0, 9))
        s = s[0].upper() + s[1:] + rng.choice((".", ".", ".", "?", "!"))
        out.append(s)
        size += len(s) + 1
    return " ".join(out)[:max(n_bytes, 1)]


def env_for(home, port):
    e = {k: os.environ[k] for k in ("PATH", "TMPDIR", "LD_LIBRARY_PATH") if k in os.environ}
    e.update({"HOME": home, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
              "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
              "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
              "XDG_CACHE_HOME": os.path.join(home, ".cache"),
              "OPENAI_API_KEY": "sk-bench-0123456789abcdefghijklmnopqrstuvwxyz",
              "OPENAI_BASE_URL": "http://127.0.0.1:%d/v1" % port,
              "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TERM": "dumb"})
    return e


def make_db(tokterm, env, db, n, kind, seed):
    """A database with one conversation of n messages (alternating user/assistant)."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    r = subprocess.run([tokterm, "--db", db, "-p", "Let us start."], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("tokterm could not make %s: %s" % (db, r.stderr.decode()))
    rng = random.Random(seed)
    c = sqlite3.connect(db)
    conv, = c.execute("SELECT max(id) FROM conversations").fetchone()
    last_user, = c.execute("SELECT max(id) FROM messages WHERE conversation_id = ? AND "
                           "role = 'user'", (conv,)).fetchone()
    next_id, = c.execute("SELECT max(id) + 1 FROM messages").fetchone()
    model, = c.execute("SELECT model FROM messages WHERE id = ?", (last_user,)).fetchone()
    now = int(time.time()) - n
    rows = []
    lo, hi = (600, 1000) if kind == "long" else (20, 100)
    for i in range(n - 2):
        mid = next_id + i
        if i % 2 == 0:
            rows.append((mid, conv, "user", now + i, model, text(rng, rng.randint(lo, hi)),
                         last_user, "complete"))
            last_user = mid
        elif kind == "flaky" and i % 100 == 99:  # an exchange that failed: no text came
            rows.append((mid, conv, "assistant", now + i, model, "", last_user, "error"))
        else:
            rows.append((mid, conv, "assistant", now + i, model, text(rng, rng.randint(lo, hi)),
                         last_user, "complete"))
    c.execute("BEGIN")
    c.executemany("INSERT INTO messages(id, conversation_id, role, created, model, content, "
                  "parent_id, status) VALUES(?, ?, ?, ?, ?, ?, ?, ?)", rows)
    c.execute("UPDATE conversations SET head_id = ?, updated = ? WHERE id = ?",
              (last_user, now + n, conv))
    c.commit()
    total, count = c.execute("SELECT sum(length(CAST(content AS BLOB))), count(*) FROM messages "
                             "WHERE conversation_id = ?", (conv,)).fetchone()
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return count, total


def lean_server(work):
    exe = os.path.join(work, "leanserver")
    src = os.path.join(HERE, "..", "batch", "leanserver.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    cap = os.path.join(work, "body")
    p = subprocess.Popen([exe, "--port-file", port_file, "--delay-ms", "0", "--capture", cap],
                         stdout=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(port_file):
            return p, int(open(port_file).read()), cap
        time.sleep(0.01)
    p.kill()
    raise RuntimeError("leanserver did not start")


def captured(tokterm, argv, env, cap):
    """Run tokterm once with the server capturing; returns the paths of the bodies it sent."""
    for f in os.listdir(os.path.dirname(cap)):
        if f.startswith(os.path.basename(cap) + "."):
            os.unlink(os.path.join(os.path.dirname(cap), f))
    open(cap + ".on", "w").close()
    try:
        m = benchlib.measure(argv, env)
    finally:
        os.unlink(cap + ".on")
    if m[3] != 0:
        raise RuntimeError("tokterm failed (%d): %s" % (m[3], " ".join(argv)))
    bodies, k = [], 1
    while os.path.exists("%s.%d" % (cap, k)):
        dst = "%s.keep%d" % (cap, k)
        os.replace("%s.%d" % (cap, k), dst)
        bodies.append(dst)
        k += 1
    return bodies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--cases", default="short:10000,short:1300,long:10000,flaky:10000")
    ap.add_argument("--rows", default="")
    ap.add_argument("--keep", default="", help="make the work files here and leave them")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    rows = benchlib.Rows(a.rows)
    work = os.path.abspath(a.keep) if a.keep else tempfile.mkdtemp(prefix="tt-resume-")
    os.makedirs(work, exist_ok=True)
    srv, port, cap = lean_server(work)
    benchlib.header("resume (`-c -p`) vs curl posting the same bodies",
                    "%d rounds, medians; ratio: median of the per-round ratios" % a.rounds)
    made_in = []
    try:
        print("| conversation | requests/run | bytes sent | tokterm -c -p | curl | ratio | target |")
        print("|---|---|---|---|---|---|---|")
        for case in a.cases.split(","):
            kind, n = case.split(":")
            n = int(n)
            home = os.path.join(work, "home-%s-%d" % (kind, n))
            os.makedirs(home, exist_ok=True)
            env = env_for(home, port)
            db = os.path.join(work, "%s-%d.db" % (kind, n))
            t0 = time.monotonic()
            count, total = make_db(tokterm, env, db, n, kind, seed=n * 7 + len(kind))
            made = time.monotonic() - t0
            made_in.append("%s %d: %.1f s" % (kind, n, made))
            argv = [tokterm, "--db", db, "-c", "-p", "And what about the parser's buffer?"]
            benchlib.measure(argv, env)  # warm-up: whatever is done once
            bodies = captured(tokterm, argv, env, cap)
            url = "http://127.0.0.1:%d/v1/chat/completions" % port
            curl = ["curl", "-sN"]
            for i, b in enumerate(bodies):
                if i:
                    curl.append("--next")
                curl += ["-sN", url, "-H", "Content-Type: application/json",
                         "-H", "Authorization: Bearer " + env["OPENAI_API_KEY"], "-H", "Expect:",
                         "--data-binary", "@" + b]
            res = benchlib.interleave({"tokterm": argv, "curl": curl}, a.rounds,
                                      env_of=lambda k: env, warmup=0)
            if any(x[3] for x in res["tokterm"] + res["curl"]):
                raise RuntimeError("a run failed")
            tw, cw = benchlib.med(res["tokterm"]), benchlib.med(res["curl"])
            r = benchlib.pratio(res["tokterm"], res["curl"])
            sent = sum(os.path.getsize(b) for b in bodies)
            target = "<= 2" if kind == "long" else "<= 1.5"
            label = "%s messages, %s (%.1f MB)" % (format(count, ","), kind, total / 1e6)
            print("| %s | %d | %.0f kB | %s | %s | %.2fx | %sx |" %
                  (label, len(bodies), sent / 1e3, benchlib.ms(tw), benchlib.ms(cw), r,
                   target))
            sys.stdout.flush()
            rows.add("`-c -p`, %s" % label, benchlib.ms(tw), "curl " + benchlib.ms(cw), r,
                     target, note="%d request(s), %.0f kB"
                     % (len(bodies), sent / 1e3),
                     spread=benchlib.pspread(res["tokterm"], res["curl"]))
    finally:
        srv.terminate()
        srv.wait()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("# databases made in (not timed): %s" % ", ".join(made_in))
    print("# load average at the end %s" % benchlib.loadavg())


if __name__ == "__main__":
    main()
