#!/usr/bin/env python3
"""Benchmark of the conversation browser (F2): opening the list, a 10,000-message conversation,
scrolling it, and searching as one types, measured from the --trace "B" records (key handled
to frame done) of the real chat in a private tmux.

    bench/tui/history.py --tokterm _build/hist/src/tokterm [--rounds 5] [--convs 5000]
        [--messages 10000]

The database is made once in a temporary directory: --convs conversations of 4 messages and
one conversation of --messages messages (markdown answers of ~800 bytes), written with sqlite3
into a database tokterm created."""

import argparse
import os
import random
import sqlite3
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "e2e"))
import ttlib  # noqa: E402

WORDS = ("alpha beta gamma delta epsilon zeta theta lambda kappa sigma omega river mountain "
         "code fox").split()


def para(n):
    return " ".join(random.choice(WORDS) for _ in range(n))


def make_db(path, convs, messages):
    rc, out, err = ttlib.run_tokterm(["--db", path, "ls"])
    if rc != 0:
        sys.exit("tokterm --db ls failed: %s" % err.decode(errors="replace"))
    random.seed(1)
    con = sqlite3.connect(path)
    now = int(time.time())
    with con:
        for c in range(convs):
            when = now - (convs - c) * 600
            cid = con.execute("INSERT INTO conversations(title, model, created, updated) "
                              "VALUES(?,?,?,?)", ("conversation %d %s" % (c, para(4)),
                                                  "gpt-4o-mini", when, when)).lastrowid
            con.executemany("INSERT INTO messages(conversation_id, role, created, model, "
                            "content) VALUES(?,?,?,?,?)",
                            [(cid, ("user", "assistant")[k % 2], when, "gpt-4o-mini", para(30))
                             for k in range(4)])
        cid = con.execute("INSERT INTO conversations(title, model, created, updated) "
                          "VALUES(?,?,?,?)", ("the huge one", "gpt-4o", now, now)).lastrowid
        rows = []
        for k in range(messages):
            if k % 2 == 0:
                txt = "question %d: %s?" % (k, para(15))
            else:
                txt = ("answer %d\n\n## heading %d\n\n%s\n\n- item one %s\n- item two %s\n\n"
                       "```python\nprint(%d)\nx = %d\n```\n\n%s **bold** and `code` %s"
                       % (k, k, para(60), para(5), para(5), k, k, para(40), para(10)))
            rows.append((cid, ("user", "assistant")[k % 2], now, "gpt-4o", txt))
        con.executemany("INSERT INTO messages(conversation_id, role, created, model, content) "
                        "VALUES(?,?,?,?,?)", rows)
    con.close()


def records(path):
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 4 and p[0] == "B":
                v = [float(x) for x in p[2:]]
                out.setdefault(p[1], []).append(v)
    return out


def one_round(db, trace):
    with ttlib.Tmux(100, 30) as tm:
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
        tm.run([ttlib.tokterm_path(), "--db", db, "--trace", trace], env)
        if tm.wait_for("F1", 10) is None:
            sys.exit("the chat did not start:\n" + tm.capture())
        tm.send("F2")
        tm.wait_for("Conversations", 10)
        tm.send("Home")  # the huge one is the newest
        time.sleep(0.2)
        tm.send("Enter")
        tm.wait_for("READ-ONLY", 10)
        for i in range(20):
            tm.send("NPage")
            time.sleep(0.05)
        tm.send("End")
        time.sleep(0.2)
        for i in range(20):
            tm.send("Up")
            time.sleep(0.03)
        tm.send("Home")
        time.sleep(0.2)
        tm.send("Escape")
        time.sleep(0.2)
        tm.send("/")
        for ch in "lambda":
            tm.send_text(ch)
            time.sleep(0.15)
        time.sleep(0.3)
        tm.send("Escape")
        time.sleep(0.1)
        tm.send("q")
        time.sleep(0.2)
        tm.send("C-d")
        tm.wait_exit(5)
    return records(trace)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", help="the tokterm binary (default: $TOKTERM or the build's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--convs", type=int, default=5000)
    ap.add_argument("--messages", type=int, default=10000)
    a = ap.parse_args()
    if a.tokterm:
        os.environ["TOKTERM"] = os.path.abspath(a.tokterm)
    if not ttlib.Tmux.available():
        sys.exit("tmux is needed")
    d = ttlib.tempdir("tt-hist-bench-")
    db = os.path.join(d, "bench.db")
    t0 = time.monotonic()
    make_db(db, a.convs, a.messages)
    print("database: %d conversations + one of %d messages, %.1f MB, made in %.1f s"
          % (a.convs, a.messages, os.path.getsize(db) / 1e6, time.monotonic() - t0))
    lists, opens, loads, scrolls, searches = [], [], [], [], []
    for r in range(a.rounds):
        rec = one_round(db, os.path.join(d, "trace%d" % r))
        lists += [v[1] - v[0] for v in rec.get("list", [])]
        for v in rec.get("open", []):
            opens.append(v[3] - v[0])
            loads.append(v[1] - v[0])
        scrolls += [v[1] - v[0] for v in rec.get("scroll", [])]
        searches += [v[1] - v[0] for v in rec.get("key", []) + rec.get("search", [])]

    def show(name, v):
        if not v:
            print("%-40s no records" % name)
            return
        v = sorted(v)
        print("%-40s n=%-4d median %7.2f ms   p95 %7.2f ms   max %7.2f ms"
              % (name, len(v), statistics.median(v) * 1e3, v[int(len(v) * 0.95) - 1 if
                                                             len(v) > 1 else 0] * 1e3,
                 v[-1] * 1e3))

    show("F2: list of %d conversations" % (a.convs + 1), lists)
    show("Enter: %d messages, first frame" % a.messages, opens)
    show("  of which loading from SQLite", loads)
    show("scroll (PgDn, Up, End, Home)", scrolls)
    show("other keys (typing the search, Esc)", searches)


if __name__ == "__main__":
    main()
