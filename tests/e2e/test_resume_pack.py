#!/usr/bin/env python3
"""End-to-end test of the packed rows of a resume (schema v13, resume_blocks; issue 14): once a
lean `-c -p` has read a conversation's newest rows from the table, it packs them into blocks,
and later resumes read the blocks instead of stepping the rows (SQLite VM steps,
TOKTERM_DEBUG_STORE: fewer than the rows read). Whatever changes a packed row (its text, its
count, a deleted row, a moved head: another branch) must still give the full load's body:
each case runs the same turn on two copies of one HOME, as tokterm does it and with
TOKTERM_FULL_RESUME=1, and the fake server's bodies must be equal. A conversation never counted
(it fits by its bytes) is read whole by the walk, from its blocks too. TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import sqlite3  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
db_path = ttlib.history_db
CONF = "context_window = 40000\nreserve_tokens = 1000\ncontext_policy = truncate\n"
resumed = ttlib.resumed
vm_steps = ttlib.vm_steps


def sql(home, q, args=()):
    c = sqlite3.connect(db_path(home))
    try:
        r = c.execute(q, args).fetchall()
    except sqlite3.OperationalError as e:  # an older tokterm: no resume_blocks
        t.ok(False, "%s: %s" % (q[:60], e))
        r = [(0, -1, -1)]
    c.commit()
    c.close()
    return r


with ttlib.FakeServer() as srv:

    def run(home, args, env=None):
        return ttlib.run_requests(srv, home, ["--config", os.path.join(home, "tokterm.conf")] +
                                  args, env)

    def same(home, name, prompt):
        """Run prompt on two copies of home (as it is, full load): equal bodies."""
        full = ttlib.copy_home(home)
        rc1, err1, lean = run(home, ["-c", "-p", prompt])
        rc2, err2, whole = run(full, ["-c", "-p", prompt], env={"TOKTERM_FULL_RESUME": "1"})
        t.ok(rc1 == 0 and rc2 == 0 and lean and lean == whole,
             "%s: the same %d request bodies as the full load (%d)" % (name, len(lean),
                                                                      len(whole)),
             (err1 + err2).decode(errors="replace")[-2000:])
        return err1, lean

    home = ttlib.make_home()
    with open(os.path.join(home, "tokterm.conf"), "w") as f:
        f.write(CONF)
    run(home, ["-p", "Let us start."])
    ttlib.history_add_turns(db_path(home), 1500, 30, 1)
    run(home, ["-c", "-p", "count them"])      # the counts (the first resume counts)
    rc, err, _ = run(home, ["-c", "-p", "pack them"])
    how = resumed(err)
    blocks = sql(home, "SELECT count(*), coalesce(min(lo), -1), coalesce(max(hi), -1) "
                       "FROM resume_blocks")[0]
    newest, = sql(home, "SELECT max(id) FROM messages WHERE id <= (SELECT max(id) - 2 "
                        "FROM messages)")[0]
    t.ok(rc == 0 and how and how[1] == "the newest" and blocks[0] >= 1,
         "a lean resume packs the rows it read (%r, blocks %r)" % (how, blocks),
         err.decode(errors="replace")[-2000:])

    # --- 1. a packed resume steps fewer SQLite instructions than the rows it takes ----------
    err, _ = same(home, "packed", "and now")
    how, steps = resumed(err), vm_steps(err)
    t.ok(how and how[1] == "the newest" and steps is not None and steps < 4 * how[0],
         "a packed resume reads %d turns (%d rows) in %r VM steps (under 2 a row)"
         % (how[0] if how else 0, 2 * how[0] if how else 0, steps))

    # --- 2. a packed row's text rewritten (another program): its block and the newer ones go
    mid, = sql(home, "SELECT max(id) - 300 FROM messages")[0]
    sql(home, "UPDATE messages SET content = 'REWRITTEN ' || content WHERE id = ?", (mid,))
    left, = sql(home, "SELECT count(*) FROM resume_blocks WHERE hi >= ?", (mid,))[0]
    t.ok(left == 0, "a rewritten row drops the blocks at or above it (%d left)" % left)
    _, b = same(home, "rewritten", "after the rewrite")
    t.ok(b and "REWRITTEN" in str(b[0]["messages"]), "the rewritten text is sent")
    # the next resume packs again and still sends it
    run(home, ["-c", "-p", "pack again"])
    _, b = same(home, "repacked", "after the repack")
    t.ok(b and "REWRITTEN" in str(b[0]["messages"]), "the rewritten text is sent from the pack")

    # --- 3. a packed row's count forgotten, a packed row deleted --------------------------
    mid, = sql(home, "SELECT max(id) - 200 FROM messages WHERE role = 'assistant'")[0]
    sql(home, "DELETE FROM message_tokens WHERE message_id = (SELECT max(id) FROM messages "
              "WHERE id <= ? AND role = 'assistant')", (mid,))
    same(home, "count forgotten", "after the count")
    run(home, ["-c", "-p", "pack again"])
    gone, = sql(home, "SELECT max(id) FROM messages WHERE id <= ? AND role = 'assistant'",
                (mid,))[0]
    sql(home, "PRAGMA foreign_keys = ON")
    sql(home, "DELETE FROM messages WHERE id = ?", (gone,))
    _, b = same(home, "row deleted", "after the delete")
    run(home, ["-c", "-p", "pack again"])
    _, b = same(home, "repacked after the delete", "after the delete again")

    # --- 4. the head moved to an older turn (another branch of the tree) -------------------
    old, = sql(home, "SELECT max(id) FROM messages WHERE role = 'user' AND id <= "
                     "(SELECT max(id) - 100 FROM messages)")[0]
    sql(home, "UPDATE conversations SET head_id = ? WHERE id = (SELECT max(id) FROM "
              "conversations)", (old,))
    _, b = same(home, "older head", "from the older turn")
    msgs = b[0]["messages"] if b else []
    t.ok(len(msgs) > 2 and msgs[-1]["content"] == "from the older turn" and
         "Message" in msgs[-2]["content"],
         "the branch from the older turn is sent")

    # --- 5. a block that is not what this tokterm writes is read from the table -----------
    sql(home, "UPDATE resume_blocks SET data = x'ff00'")
    same(home, "foreign block", "with a foreign block")

    # --- 6. a conversation never counted (it fits by its bytes): read whole, from the blocks
    fits = ttlib.make_home()
    with open(os.path.join(fits, "tokterm.conf"), "w") as f:
        f.write("context_window = 400000\ncontext_policy = truncate\n")
    run(fits, ["-p", "Let us start."])
    ttlib.history_add_turns(db_path(fits), 700, 12, 1)
    run(fits, ["-c", "-p", "read them"])
    uncounted, = sql(fits, "SELECT count(*) FROM messages WHERE id NOT IN "
                           "(SELECT message_id FROM message_tokens)")[0]
    err, _ = same(fits, "never counted", "and now")
    how, steps = resumed(err), vm_steps(err)
    t.ok(uncounted > 1000 and how and how[1] == "all" and how[0] > 700 and steps is not None
         and steps < 4 * how[0],
         "a conversation never counted (%d rows without a count) is read whole from its "
         "blocks: %r turns in %r VM steps" % (uncounted, how, steps))

    # --- 7. deleting the conversation deletes its blocks -----------------------------------
    rc, _, _ = run(home, ["rm", str(sql(home, "SELECT max(id) FROM conversations")[0][0])])
    n, = sql(home, "SELECT count(*) FROM resume_blocks")[0]
    t.ok(n == 0, "rm: the conversation's blocks are gone (%d left, rm rc %d)" % (n, rc))

t.done()
