#!/usr/bin/env python3
"""End-to-end tests of history that scales (issue 14): token counts stored with the messages
(a resume tokenises only what is new; an older database is upgraded and counted once), and
incremental summaries (at most one summary request per turn, reused across runs, each one
extending the previous summary; a large one announced, /context saying what the next turn
costs). TAP.

Long conversations are written with Python's sqlite3 as a script would (each row linked to its
parent), after tokterm made the database and the first turn. TOKTERM_DEBUG_TOKENIZED makes
tokterm print how many texts and bytes it tokenised."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
text = ttlib.history_text
db_path = ttlib.history_db
add_turns = ttlib.history_add_turns


def write_config(home, body):
    path = os.path.join(home, "tokterm.conf")
    with open(path, "w") as f:
        f.write(body)
    return path


def sql(db, q):
    c = sqlite3.connect(db)
    try:
        return c.execute(q).fetchall()
    except sqlite3.OperationalError as e:  # an older tokterm: no such table
        return [(repr(e),)]
    finally:
        c.close()


def tokenised(err):
    m = re.search(rb"tokenised (\d+) texts, (\d+) bytes", err)
    return (int(m.group(1)), int(m.group(2))) if m else None


def numbers(s):
    return [int(x) for x in re.findall(r"Message (\d+):", s)]


def summaries(reqs):
    return [r for r in reqs if r["body"] and r["body"].get("stream") is not True]


with ttlib.FakeServer() as srv:

    def run(home, cfg, args, spec="reply=Fine%20thanks.", env=None):
        e = {"OPENAI_BASE_URL": srv.base(spec), "TOKTERM_DEBUG_TOKENIZED": "1"}
        e.update(env or {})
        return ttlib.run_tokterm(["--config", cfg, "-m", "gpt-4o-mini"] + args, env=e,
                                 home=home, timeout=60)

    # --- 1. a resume counts only what is new -------------------------------------------------
    home = ttlib.make_home()
    # truncate, and a window the history does not fit by its bytes: every message is counted
    cfg = write_config(home, "context_window = 4000\nreserve_tokens = 200\n"
                             "context_policy = truncate\n")
    rc, out, err = run(home, cfg, ["-p", "Let us start."])
    t.eq(rc, 0, "counts: the first turn")
    db = db_path(home)
    add_turns(db, 200, 30, 1)
    n_msgs, = sql(db, "SELECT count(*) FROM messages")[0]
    rc, out, err = run(home, cfg, ["-c", "-p", "first resume"])
    first = tokenised(err)
    t.ok(rc == 0 and first is not None and first[0] >= 400,
         "counts: the first resume of rows saved without counts counts them (%r)" % (first,),
         err.decode(errors="replace"))
    counted = sql(db, "SELECT count(*), count(DISTINCT encoding) FROM message_tokens")[0]
    t.ok(len(counted) == 2 and counted[0] >= n_msgs and counted[1] == 1,
         "counts: and stores them, one per message (%r of %d messages)" % (counted, n_msgs))
    rc, out, err = run(home, cfg, ["-c", "-p", "second resume"])
    second = tokenised(err)
    answer = len("Fine thanks.")
    t.ok(rc == 0 and second is not None and second[1] <= len("second resume") + answer + 64,
         "counts: the next resume tokenises only the new prompt (%r; the history is %d "
         "messages)" % (second, n_msgs + 2), err.decode(errors="replace"))
    rows = sql(db, "SELECT m.id, m.role, m.content FROM messages m LEFT JOIN message_tokens t "
                   "ON t.message_id = m.id WHERE t.message_id IS NULL")
    t.ok(len(rows) == 0, "counts: the new prompt and answer were stored with their counts",
         repr(rows))

    # --- 2. an older database (schema 6, no counts) is upgraded in place and counted once ---
    # What v7 and later added goes (v7 the counts; v8 the tool column; v9 the latency
    # columns; v10 the attachments; v11 the provider's batches; v12 the token marks), so the
    # file is a true version 6 one.
    c = sqlite3.connect(db)
    c.executescript("DROP TRIGGER IF EXISTS response_cache_message_ad; "
                    "DROP TRIGGER IF EXISTS response_cache_message_au; "
                    "DROP INDEX IF EXISTS response_cache_message; ")
    if "message_id" in [r[1] for r in c.execute("PRAGMA table_info(response_cache)")]:
        c.execute("ALTER TABLE response_cache DROP COLUMN message_id")
    c.executescript("DROP TRIGGER IF EXISTS resume_blocks_messages_ai; "
                    "DROP TRIGGER IF EXISTS resume_blocks_messages_au; "
                    "DROP TRIGGER IF EXISTS resume_blocks_messages_ad; "
                    "DROP TABLE IF EXISTS resume_blocks; "
                    "DROP TABLE IF EXISTS remote_batches; "
                    "DROP TRIGGER IF EXISTS token_marks_messages_ai; "
                    "DROP TRIGGER IF EXISTS token_marks_messages_au; "
                    "DROP TABLE IF EXISTS token_marks; "
                    "DROP TRIGGER IF EXISTS message_tokens_ad; "
                    "DROP TRIGGER IF EXISTS message_tokens_au; "
                    "DROP TABLE IF EXISTS message_tokens; "
                    "DROP TRIGGER IF EXISTS attachments_message_ad; "
                    "DROP TRIGGER IF EXISTS attachments_blob_ad; "
                    "DROP TABLE IF EXISTS attachments; DROP TABLE IF EXISTS blobs;")
    cols = [r[1] for r in c.execute("PRAGMA table_info(messages)")]
    for col in ("tool", "itl", "retries", "rate_limited"):
        if col in cols:
            c.execute("ALTER TABLE messages DROP COLUMN " + col)
    c.executescript("PRAGMA user_version = 6;")
    c.close()
    rc, out, err = run(home, cfg, ["-c", "-p", "after the upgrade"])
    up = tokenised(err)
    t.ok(rc == 0 and sql(db, "PRAGMA user_version")[0][0] >= 7 and up and up[0] >= 400,
         "upgrade: a version 6 database opens, is upgraded, and its history counted (%r)" % (up,),
         err.decode(errors="replace"))
    rc, out, err = run(home, cfg, ["-c", "-p", "and once more"])
    again = tokenised(err)
    t.ok(rc == 0 and again is not None and again[1] <= len("and once more") + answer + 64,
         "upgrade: counted once: the next resume tokenises only what is new (%r)" % (again,))

    # --- 3. summaries: one request per turn, reused, extending the previous one ---------------
    home = ttlib.make_home()
    cfg = write_config(home, "context_window = 40000\nreserve_tokens = 1000\n"
                             "context_policy = summarize\n")
    rc, out, err = run(home, cfg, ["-p", "Let us start."])
    db = db_path(home)
    add_turns(db, 500, 110, 1)  # ~125k tokens: three windows
    n0 = len(srv.requests())
    srv.queue(["reply=SUMMARY-ONE%20of%20the%20old%20turns.", "reply=Fine%20thanks."])
    rc, out, err = run(home, cfg, ["-c", "-p", "resume with a long history"])
    reqs = srv.requests()[n0:]
    sm = summaries(reqs)
    t.ok(rc == 0 and len(sm) == 1 and len(reqs) == 2,
         "summaries: a history of two windows and more takes one summary request, not a train "
         "(%d summary requests, %d requests)" % (len(sm), len(reqs)), err.decode(errors="replace"))
    body = sm[0]["body"]["messages"][1]["content"] if sm else ""
    st = [r for r in reqs if r not in sm]
    sent = numbers(" ".join(m["content"] for m in st[-1]["body"]["messages"])) if st else []
    held = numbers(body)
    t.ok(held and sent and min(held) > 1 and max(held) + 1 == min(sent),
         "summaries: it holds the newest dropped turns (messages %s-%s, the request from %s), "
         "not the oldest" % (held and min(held), held and max(held), sent and min(sent)))
    last_held = max(held) if held else 0
    t.ok(rc == 0 and re.search(rb"tokterm: note: .*summary request of [\d,]+ prompt tokens", err)
         is not None, "summaries: a large summary request is announced on stderr",
         err.decode(errors="replace"))
    t.ok(st and any("SUMMARY-ONE" in m["content"] for m in st[-1]["body"]["messages"]),
         "summaries: the request carries the new summary")

    n1 = len(srv.requests())
    rc, out, err = run(home, cfg, ["-c", "-p", "right after"])
    reqs = srv.requests()[n1:]
    t.ok(rc == 0 and len(reqs) == 1 and not summaries(reqs) and
         any("SUMMARY-ONE" in m["content"] for m in reqs[0]["body"]["messages"]),
         "summaries: a second run right after sends no summary request and reuses the saved one "
         "(%d requests)" % len(reqs))

    add_turns(db, 120, 110, 2000)  # enough new turns to be dropped
    n2 = len(srv.requests())
    srv.queue(["reply=SUMMARY-TWO.", "reply=Fine%20thanks."])
    rc, out, err = run(home, cfg, ["-c", "-p", "later"])
    reqs = srv.requests()[n2:]
    sm = summaries(reqs)
    body = sm[0]["body"]["messages"][1]["content"] if sm else ""
    t.ok(rc == 0 and len(sm) == 1, "summaries: new turns dropped: one summary request (%d)"
         % len(sm))
    t.ok("Summary so far:\nSUMMARY-ONE of the old turns." in body and numbers(body) and
         min(numbers(body)) > last_held,
         "summaries: it extends the previous summary (its text, not its turns, in the request)")
    rows = sql(db, "SELECT count(*) FROM summaries")
    t.eq(rows[0][0], 2, "summaries: both are stored")

    # --- 4. a one-shot that fits by its bytes never opens the rank table to save counts -----
    h5 = ttlib.make_home()
    c5 = write_config(h5, "")
    for i in range(2):  # the first run makes the database; the second is the common case
        rc, out, err = run(h5, c5, ["-p", "hello %d" % i])
        t.ok(rc == 0 and b"tokenised 0 texts, 0 bytes; table not opened" in err,
             "one-shot %d: saving its turn opens no tokenizer table" % i, err)

    # --- 5. /context in the chat says what the next turn costs --------------------------------
    if not ttlib.Tmux.available():
        t.skip("/context shows the next turn's cost", "no tmux", "tmux")
    else:
        add_turns(db, 120, 110, 3000)
        with ttlib.Tmux(200, 50) as tm:
            e = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("reply=ok")})
            tm.run([ttlib.tokterm_path(), "--config", cfg, "-m", "gpt-4o-mini", "-c"], e)
            tm.wait_for(re.compile("F1|\u203a"), 10)
            tm.send_text("/context")
            tm.send("Enter")
            scr = tm.wait_for(re.compile(r"next turn costs about [\d,]+ prompt tokens plus"), 10)
            t.ok(scr is not None and re.search(r"summary request of [\d,]+\s+prompt tokens",
                                               re.sub(r"\s+", " ", scr)) is not None,
                 "/context: the next turn's cost, with the summary request's prompt tokens",
                 scr or tm.capture())
            tm.send("C-d")
            tm.wait_exit(5)

sys.exit(t.done())
