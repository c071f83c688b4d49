#!/usr/bin/env python3
"""End-to-end test of the lean resume (issue 14): `-c -p` reads only the newest turns of a long
conversation when the stored token counts prove that the older ones are left out (dropped, or
stood for by a saved summary), and the request it sends is the one the full load sends. Each
case runs the same turn twice on copies of one HOME: as tokterm does it, and with
TOKTERM_FULL_RESUME=1 (the whole conversation read, as before); the fake server's logged bodies
must be equal, request for request. TOKTERM_DEBUG_TOKENIZED says which way the resume went.
Cases: a history that fits, one whose old turns are dropped, one that reuses a saved summary,
one that needs a new summary (the lean resume falls back to the full load), the store's
work of a lean resume (SQLite VM steps, TOKTERM_DEBUG_STORE) flat in the older history, and
the end of a long answer hashing it once (the debug counter's "hashed"), and a history of
tool rounds (rows with calls and results counted as prompts and answers are). TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
text = ttlib.history_text
db_path = ttlib.history_db
add_turns = ttlib.history_add_turns
resumed = ttlib.resumed
vm_steps = ttlib.vm_steps


with ttlib.FakeServer() as srv:

    def run(home, args, queue=None, env=None):
        if queue:
            srv.queue(queue)
        e = {"OPENAI_BASE_URL": srv.base("reply=Fine%20thanks."), "TOKTERM_DEBUG_TOKENIZED": "1"}
        e.update(env or {})
        n0 = len(srv.requests())
        rc, out, err = ttlib.run_tokterm(["--config", os.path.join(home, "tokterm.conf"),
                                          "-m", "gpt-4o-mini"] + args, env=e, home=home,
                                         timeout=60)
        return rc, err, [r["body"] for r in srv.requests()[n0:]]

    def uncounted_rows(home):
        """Rows of home's database without a count, the last turn's two left out."""
        c = sqlite3.connect(db_path(home))
        n, = c.execute("SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM "
                       "message_tokens t WHERE t.message_id = m.id) AND m.id < "
                       "(SELECT max(id) - 1 FROM messages)").fetchone()
        c.close()
        return n

    def setup(conf, turns, words):
        home = ttlib.make_home()
        with open(os.path.join(home, "tokterm.conf"), "w") as f:
            f.write(conf)
        rc, _, _ = run(home, ["-p", "Let us start."])
        add_turns(db_path(home), turns, words, 1)
        return home

    def same(home, name, prompt, want, queue=None):
        """Run prompt on two copies of home (lean, full); their bodies must be equal."""
        full = ttlib.copy_home(home)
        rc1, err1, lean_bodies = run(home, ["-c", "-p", prompt], queue)
        srv.clear_queue()
        rc2, err2, full_bodies = run(full, ["-c", "-p", prompt], queue,
                                     env={"TOKTERM_FULL_RESUME": "1"})
        srv.clear_queue()
        how = resumed(err1)
        t.ok(rc1 == 0 and rc2 == 0 and how is not None and want in (None, how[1]),
             "%s: the resume reads %s turns (%r)" % (name, want or "some", how),
             (err1 + err2).decode(errors="replace"))
        t.ok(lean_bodies and lean_bodies == full_bodies,
             "%s: the same %d request bodies as the full load (%d)" %
             (name, len(lean_bodies), len(full_bodies)))
        return lean_bodies, how

    # --- 1. a history that fits: the walk reads it all -------------------------------------
    home = setup("context_window = 400000\ncontext_policy = truncate\n", 60, 20)
    run(home, ["-c", "-p", "count them"])  # stores the counts (the first resume counts)
    same(home, "fits", "and now", "all")

    # --- 2. old turns dropped (truncate) ----------------------------------------------------
    home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                 300, 30)
    rc, err, _ = run(home, ["-c", "-p", "count them"])
    t.ok(resumed(err) and resumed(err)[1] == "all",
         "dropped: a resume of rows without counts reads them all (%r)" % (resumed(err),))
    b = same(home, "dropped", "what next", "the newest")
    # another conversation's rows between the old turns and new ones: passed over, or read
    # through the index when they are many
    c = sqlite3.connect(db_path(home))
    c.execute("INSERT INTO conversations(id, title, created, updated) VALUES(900, 'other', 0, 0)")
    nid, = c.execute("SELECT max(id) + 1 FROM messages").fetchone()
    c.executemany("INSERT INTO messages(id, conversation_id, role, created, content, parent_id) "
                  "VALUES(?, 900, ?, 0, 'other', ?)",
                  [(nid + i, "user" if i % 2 == 0 else "assistant", nid + i - 1 if i % 2 else 0)
                   for i in range(3000)])
    c.commit()
    c.close()
    add_turns(db_path(home), 20, 30, 7000, conv=1)
    run(home, ["-c", "-p", "count the new ones"])
    same(home, "interleaved", "and after the other one", "the newest")

    # --- 2b. failed turns: never sent, still read ------------------------------------------
    # An exchange that fails before any text came leaves a prompt that is never sent and an
    # empty answer row. Each gets a count (0 for the empty row, the prompt's own once read), and
    # the walk sums neither: counted as sent, they ended it short of the budget (the plan then
    # needed the full load), and left without a count, they read as rows never counted: the
    # full load, every run from then on.
    home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                 300, 30)
    run(home, ["-c", "-p", "count them"])
    for i in range(6):
        rc, err, _ = run(home, ["--retries", "0", "-c", "-p", "this one fails %d" % i],
                         ["status=500"])
    uncounted = ("SELECT count(*) FROM messages m WHERE m.status = 'error' AND NOT EXISTS "
                 "(SELECT 1 FROM message_tokens t WHERE t.message_id = m.id)")
    n_err, = sqlite3.connect(db_path(home)).execute(
        "SELECT count(*) FROM messages WHERE status = 'error'").fetchone()
    left, = sqlite3.connect(db_path(home)).execute(uncounted).fetchone()
    t.ok(rc == 3 and n_err == 6 and left == 0,
         "failed: each of the 6 empty answers has its count (exit %d, %d rows, %d without)"
         % (rc, n_err, left))
    same(home, "failed", "after the failures", "the newest")
    # counts are stored once: a run after that stores its own turn's two (a count stored
    # again drops the packed rows at and above its row: resume_blocks' triggers)
    c = sqlite3.connect(db_path(home))
    c.executescript("CREATE TABLE tt_puts(n INTEGER); INSERT INTO tt_puts VALUES(0);"
                    "CREATE TRIGGER tt_puts_ai AFTER INSERT ON message_tokens BEGIN "
                    "UPDATE tt_puts SET n = n + 1; END;")
    c.close()
    rc, err, _ = run(home, ["-c", "-p", "once more"])
    puts, = sqlite3.connect(db_path(home)).execute("SELECT n FROM tt_puts").fetchone()
    t.ok(rc == 0 and puts == 2, "failed: a later run stores its own turn's 2 counts, no old "
         "row's again (%d)" % puts, err.decode(errors="replace"))
    # the same rows without their counts (a run that died before it saved them), then older
    # than the turns a walk reads: the first resume reads it all and counts them, the next
    # reads the newest turns again
    c = sqlite3.connect(db_path(home))
    c.execute("DELETE FROM message_tokens WHERE message_id IN (SELECT id FROM messages WHERE "
              "content LIKE 'this one fails %' OR status = 'error')")
    c.commit()
    c.close()
    add_turns(db_path(home), 60, 30, 9000)
    rc, err, _ = run(home, ["-c", "-p", "count the new ones"])
    left = uncounted_rows(home)
    t.ok(rc == 0 and left == 0, "failed, uncounted: one resume counts every row it read, the "
         "unsent prompts too (%d left)" % left, err.decode(errors="replace"))
    same(home, "failed, uncounted", "and then", "the newest")

    # --- 2c. turns /retry replaced: read, never sent ---------------------------------------
    # Each /retry (or /edit) of the last turn makes a new version of it (a user row under the
    # same parent, its answer) and leaves the old one's rows beside the live path. The walk
    # sums only the live path's rows: summed, the replaced turns ended it short of what the
    # history holds, and from a few of them on every resume went back to the full load.
    home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                 300, 30)
    run(home, ["-c", "-p", "count them"])
    c = sqlite3.connect(db_path(home))
    conv, head = c.execute("SELECT id, head_id FROM conversations ORDER BY id DESC "
                           "LIMIT 1").fetchone()
    for k in range(8):
        parent, content, model = c.execute("SELECT parent_id, content, model FROM messages "
                                           "WHERE id = ?", (head,)).fetchone()
        nid, = c.execute("SELECT max(id) + 1 FROM messages").fetchone()
        c.execute("INSERT INTO messages(id, conversation_id, role, created, model, content, "
                  "parent_id) VALUES(?, ?, 'user', 0, ?, ?, ?)", (nid, conv, model, content,
                                                                  parent))
        c.execute("INSERT INTO messages(id, conversation_id, role, created, model, content, "
                  "parent_id) VALUES(?, ?, 'assistant', 0, ?, ?, ?)",
                  (nid + 1, conv, model, "Version %d of the answer: %s" % (k + 2, text(k, 60)),
                   nid))
        c.execute("UPDATE conversations SET head_id = ? WHERE id = ?", (nid, conv))
        head = nid
    c.commit()
    c.close()
    run(home, ["-c", "-p", "count the new version"])
    same(home, "retried", "after the retries", "the newest")
    # the replaced rows (a run killed mid-answer, then /retry: no count was ever stored for
    # them) become older than the turns a walk reads: the walk that read them counted them,
    # so a resume after many more turns reads the newest ones, not the whole conversation
    # every run from then on
    add_turns(db_path(home), 60, 30, 9500)
    run(home, ["-c", "-p", "count the new ones"])
    left = uncounted_rows(home)
    t.ok(left == 0, "retried: every replaced row has its count (%d left)" % left)
    same(home, "retried, older", "long after the retries", "the newest")
    # replaced rows never read by a walk (no -c -p while they were new): the one full load
    # that their missing counts cause gives them theirs, and the next resume is lean again
    c = sqlite3.connect(db_path(home))
    gone = c.execute("DELETE FROM message_tokens WHERE bytes = -1").rowcount
    c.commit()
    c.close()
    add_turns(db_path(home), 60, 30, 9800)
    rc, err, _ = run(home, ["-c", "-p", "count the newest ones"])
    left = uncounted_rows(home)
    t.ok(gone >= 14 and resumed(err) and resumed(err)[1] == "all" and left == 0,
         "retried, never walked: the full load counts the %d replaced rows (%r, %d left)"
         % (gone, resumed(err), left), err.decode(errors="replace"))
    same(home, "retried, healed", "after the full load", "the newest")

    # --- 3. a saved summary reused ----------------------------------------------------------
    home = setup("context_window = 40000\nreserve_tokens = 1000\ncontext_policy = summarize\n",
                 500, 110)
    rc, err, bodies = run(home, ["-c", "-p", "make the summary"],
                          ["reply=SUMMARY-ONE%20of%20the%20old%20turns.", "reply=Fine%20thanks."])
    t.ok(rc == 0 and len(bodies) == 2, "summary: the first resume makes one (%d requests)"
         % len(bodies))
    b, _ = same(home, "summary", "go on", "the newest")
    t.ok(len(b) == 1 and any("SUMMARY-ONE" in m["content"] for m in b[0]["messages"]),
         "summary: the request carries the saved summary")

    # --- 4. turns that outgrow the saved summary: a new one is needed ----------------------
    # Long prompts, each turn counted as tokterm saves it: the lean resume keeps reading the
    # newest turns while the saved summary serves, and goes back to the full load for the turn
    # whose plan needs a new summary (its request holds turns the walk did not read).
    ways = []
    for i in range(8):
        b, how = same(home, "outgrown %d" % i, text(20000 + i, 4000), None,
                      ["reply=SUMMARY-%d." % i, "reply=Fine%20thanks."])
        ways.append((how and how[1], len(b)))
    t.ok(("the newest", 1) in ways and ("all", 2) in ways,
         "outgrown: lean resumes while the summary serves, the full load for a new one (%r)"
         % ways)

    # --- 6. attachments and tool rounds, old (dropped) and new (sent) -----------------------
    # The lean resume reads the attachments of the turns it holds only (from the oldest on):
    # the body must be the full load's, the new turn's image and tool round in it, the old
    # ones dropped with their turns.
    work = ttlib.make_home()
    imgs = []
    for i, (w, h) in enumerate(((16, 8), (24, 12))):
        raw = b"".join(b"\x00" + bytes([16 * i, 128, 240]) * w for _ in range(h))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data +
                    struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
        imgs.append(os.path.join(work, "img%d.png" % i))
        with open(imgs[-1], "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0,
                                                                       0, 0)) +
                    chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    tools = {"TOKTERM_TEST_TOOLS": "1"}
    home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                 10, 30)
    run(home, ["-c", "-f", imgs[0], "-p", "the old image"])
    add_turns(db_path(home), 300, 30, 9000)
    run(home, ["-c", "-p", "count them"])
    run(home, ["-c", "-f", imgs[1], "-p", "the new image"])
    b, _ = same(home, "attachments", "what now", "the newest")
    sent = json.dumps(b[0]["messages"]) if b else ""
    t.ok(b and sent.count('"type": "image_url"') == 1 and "the new image" in sent and
         "the old image" not in sent,
         "attachments: the new image sent, the old one dropped with its turn")
    # a tool round (its rows have no counts yet: the full load, the same body either way)
    run(home, ["-c", "-p", "add two numbers"], ["replay=openai_tool_calls.sse",
                                                 "reply=The sum is 42."], env=tools)
    srv.clear_queue()
    b, _ = same(home, "tools", "and now", None)
    sent = json.dumps(b[0]["messages"]) if b else ""
    t.ok(b and "tool_calls" in sent and sent.count('"type": "image_url"') == 1,
         "tools: the tool round and the new image sent")

    # --- 5. the store's work does not grow with the turns left out ------------------------
    # Two conversations that differ only in how many old turns the plan drops (300 and 1,500):
    # once counted, a lean resume reads the same newest rows of both, and nothing else of the
    # store may be O(history) (the older rows' counts, their attachments). Counted in SQLite VM
    # steps, which do not depend on the load.
    def store_work(home):
        """(how it resumed, SQLite VM steps) of one more lean resume of home."""
        rc, err, _ = run(home, ["-c", "-p", "how much work?"], env={"TOKTERM_DEBUG_STORE": "1"})
        return resumed(err), vm_steps(err)

    def flat(steps, what):
        t.ok(all(h and h[1] == "the newest" and v for h, v in steps) and
             steps[1][1] < steps[0][1] * 1.1 + 2000,
             "%sa lean resume's store work is flat in the dropped turns (VM steps: %r)"
             % (what, steps))

    steps = []
    for turns in (300, 1500):
        home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                     turns, 30)
        run(home, ["-c", "-p", "count them"])
        run(home, ["-c", "-p", "and again"])
        steps.append(store_work(home))
    flat(steps, "300 vs 1,500 turns: ")

    # --- 7. the end of an answer hashes it once --------------------------------------------
    # The server's count of a kept answer is recorded for the plans (the count cache, keyed by
    # a hash of the text) and for the store: one hash of the text, not one for each.
    for args in (["--json", "-p", "hello there"], ["-p", "one", "-p", "two"]):
        home = ttlib.make_home()
        rc, out, err = ttlib.run_tokterm(["-m", "gpt-4o-mini"] + args, home=home, timeout=60,
                                         env={"OPENAI_BASE_URL": srv.base("big_delta=400000"),
                                              "TOKTERM_DEBUG_TOKENIZED": "1"})
        m = re.search(rb"hashed (\d+) texts, (\d+) bytes", err)
        answers = 400000 * (len(args) // 2)
        t.ok(rc == 0 and m and int(m.group(2)) < answers + 4096,
             "%s: the answers (%d bytes) hashed at most once (%s)"
             % (" ".join(args[:1]), answers, m and m.group(0).decode()), err.decode()[-2000:])
        c = sqlite3.connect(db_path(home))
        counts = c.execute("SELECT t.bytes, t.tokens FROM message_tokens t JOIN messages m "
                           "ON m.id = t.message_id WHERE m.role = 'assistant'").fetchall()
        c.close()
        t.ok(len(counts) == len(args) // 2 and all(b == 400000 and k > 0 for b, k in counts),
             "%s: the answers' counts stored (%r)" % (" ".join(args[:1]), counts))

    # --- 8. tool rounds in the dropped turns ----------------------------------------------
    # A conversation whose turns each ran a tool (an assistant row with its calls, the tool's
    # result, the answer): once counted, its rows with calls and its results have counts as
    # its prompts and answers do, so a resume reads only the newest turns (the store's work
    # flat in the dropped turns, 200 vs 1,000) and sends the full load's body.
    def add_tool_turns(db, turns, words, start):
        c = sqlite3.connect(db)
        conv, head = c.execute("SELECT id, head_id FROM conversations ORDER BY id DESC "
                               "LIMIT 1").fetchone()
        nid, = c.execute("SELECT max(id) + 1 FROM messages").fetchone()
        rows = []
        for i in range(turns):
            u = nid + 4 * i
            call = "call_%d" % i
            calls = json.dumps({"calls": [{"id": call, "name": "test.add", "wire": "test__add",
                                           "arguments": json.dumps({"a": i, "b": 2})}]})
            res = json.dumps({"id": call, "name": "test.add", "wire": "test__add"})
            rows += [(u, conv, "user", text(start + 3 * i, words), head, None, None),
                     (u + 1, conv, "assistant", "", u, calls, "tool_calls"),
                     (u + 2, conv, "tool", text(start + 3 * i + 1, words), u, res, None),
                     (u + 3, conv, "assistant", text(start + 3 * i + 2, words), u, None,
                      "stop")]
            head = u
        c.execute("BEGIN")
        c.executemany("INSERT INTO messages(id, conversation_id, role, created, model, "
                      "content, parent_id, tool, finish_reason) "
                      "VALUES(?, ?, ?, 0, 'gpt-4o-mini', ?, ?, ?, ?)",
                      [(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows])
        c.execute("UPDATE conversations SET head_id = ? WHERE id = ?", (head, conv))
        c.commit()
        c.close()

    steps = []
    for turns in (200, 1000):
        home = setup("context_window = 4000\nreserve_tokens = 200\ncontext_policy = truncate\n",
                     0, 30)
        add_tool_turns(db_path(home), turns, 25, 30000)
        run(home, ["-c", "-p", "count them"])
        same(home, "tool rounds %d" % turns, "and again", "the newest")
        steps.append(store_work(home))
    flat(steps, "tool rounds, 200 vs 1,000 turns: ")

t.done()
