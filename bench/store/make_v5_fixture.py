#!/usr/bin/env python3
"""Make tests/fixtures/store-v5-prev-release.db: a schema-v5 database written by the release
before the conversation tree (commit 8ff5f24), for the migration test in test_store.c.

    git worktree add /tmp/prev 8ff5f24 && (cd /tmp/prev && ./autogen.sh)
    mkdir /tmp/prevb && cd /tmp/prevb && /tmp/prev/configure -q && make -j2
    python3 bench/store/make_v5_fixture.py /tmp/prev /tmp/prevb \
        tests/fixtures/store-v5-prev-release.db

It runs that release's src/tokterm against its tests/fake-openai/server.py (echo answers):
  1. a normal two-turn conversation (-p twice in one run);
  2. a conversation whose second request failed with HTTP 500 (--conversation ID);
  3. in the chat (tmux, 100x30): prompt A, /edit to B, /retry, quit (Ctrl-D).
Then VACUUM. The rows' times are the run's: the test checks structure, not times."""

import os
import re
import sqlite3
import sys
import time

sys.dont_write_bytecode = True


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    src, build, out = (os.path.abspath(a) for a in sys.argv[1:])
    sys.path.insert(0, os.path.join(src, "tests", "e2e"))
    os.environ["srcdir"] = os.path.join(src, "tests")
    os.environ["TOKTERM"] = os.path.join(build, "src", "tokterm")
    import ttlib  # the previous release's helpers: its fake server, its binary

    if os.path.exists(out):
        os.unlink(out)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(out + suffix):
            os.unlink(out + suffix)
    db = ["--db", out]
    with ttlib.FakeServer() as srv:
        # 1. two turns in one run
        rc, so, se = ttlib.run_tokterm(db + ["--base-url", srv.base(), "-p", "What is a fox?",
                                             "-p", "And a wolf?"])
        assert rc == 0, (rc, so, se)
        # 2. the second request fails with HTTP 500
        rc, so, se = ttlib.run_tokterm(db + ["--base-url", srv.base(), "-p", "first question"])
        assert rc == 0, (rc, so, se)
        c = sqlite3.connect(out)
        conv = c.execute("SELECT max(id) FROM conversations").fetchone()[0]
        c.close()
        rc, so, se = ttlib.run_tokterm(db + ["--base-url", srv.base("status=500"),
                                             "--retries", "0", "--conversation", str(conv),
                                             "-p", "second question"])
        assert rc == 3, (rc, so, se)
        # 3. the chat: A, /edit to B, /retry, quit
        def answered(tm, n):
            """Wait until the server has had n chat requests and the chat is idle again."""
            for _ in range(200):
                if len(srv.requests()) >= n and " idle " in tm.capture():
                    return True
                time.sleep(0.05)
            raise AssertionError(tm.capture())

        base = len(srv.requests())
        with ttlib.Tmux(100, 30) as tm:
            env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base()})
            tm.run([ttlib.tokterm_path()] + db, env)
            assert tm.wait_for(re.compile("F1|\u203a"), 10), tm.capture()
            tm.send_text("prompt A")
            tm.send("Enter")
            answered(tm, base + 1)
            tm.send_text("/edit")
            tm.send("Enter")
            assert tm.wait_for("\u203a prompt A", 5), tm.capture()
            tm.send("C-u")
            tm.send_text("prompt B")
            tm.send("Enter")
            answered(tm, base + 2)
            tm.send_text("/retry")
            tm.send("Enter")
            answered(tm, base + 3)
            tm.send("C-d")
            for _ in range(100):
                if os.path.exists(tm.status_file) and open(tm.status_file).read().strip():
                    break
                time.sleep(0.05)
        for i, r in enumerate(srv.requests()):
            print("request", i + 1, [(m["role"], m["content"]) for m in r["body"]["messages"]])
    c = sqlite3.connect(out)
    c.execute("PRAGMA journal_mode = DELETE")
    c.execute("VACUUM")
    c.close()
    c = sqlite3.connect(out)
    print("user_version", c.execute("PRAGMA user_version").fetchone()[0])
    for row in c.execute("SELECT id, conversation_id, role, status, error, content "
                         "FROM messages ORDER BY id"):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
