#!/usr/bin/env python3
"""End-to-end tests of saving, review subcommands and the response cache (issue 4). TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def db_path(home):
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


def query(home, sql, args=()):
    con = sqlite3.connect(db_path(home))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()

    def run(spec, args, **kw):
        env = dict(kw.pop("env", {}) or {})
        env.setdefault("OPENAI_BASE_URL", srv.base(spec))
        return ttlib.run_tokterm(args, env=env, home=home, **kw)

    # --- every exchange saved ---
    rc, out, err = run("", ["-m", "model-a", "-s", "sys one", "-p", "first saved question"])
    t.eq(rc, 0, "answer with saving on")
    t.eq(stat.S_IMODE(os.stat(db_path(home)).st_mode), 0o600, "database file is 0600")
    rows = query(home, "SELECT role, content, status, model, host FROM messages ORDER BY id")
    t.eq([(r[0], r[1], r[2]) for r in rows],
         [("user", "first saved question", "complete"), ("assistant", "first saved question", "complete")],
         "prompt and answer saved, marked complete")
    t.eq(rows[1][3], "model-a", "model saved")
    t.eq(rows[1][4], "127.0.0.1:%d" % srv.port, "server host saved (never a URL with a key)")
    conv = query(home, "SELECT title, system_prompt FROM conversations")
    t.eq(conv, [("first saved question", "sys one")], "conversation titled from the first prompt")
    dump = b"".join(open(p, "rb").read() for p in (db_path(home), db_path(home) + "-wal")
                    if os.path.exists(p))
    t.ok(ttlib.TEST_KEY.encode() not in dump, "the key is not in the database (nor its WAL)")
    timings = query(home, "SELECT ttft, total_time FROM messages WHERE role='assistant'")[0]
    t.ok(timings[0] is not None and timings[1] is not None, "timings saved")

    # --- cache: the same request is answered without a request ---
    n = len(srv.requests())
    rc, out, err = run("", ["-m", "model-a", "-s", "sys one", "--json", "-p", "first saved question"])
    j = json.loads(out)
    t.eq(len(srv.requests()), n, "cache hit: the server got no request")
    t.eq((j.get("cached"), j.get("content")), (True, "first saved question"), "cache hit: --json says cached")
    rc, out, err = run("", ["-m", "model-a", "-s", "sys two", "--json", "-p", "first saved question"])
    t.eq(len(srv.requests()), n + 1, "changed system prompt: cache miss, one request")
    rc, out, err = run("", ["-m", "model-b", "-s", "sys one", "--json", "-p", "first saved question"])
    t.eq(len(srv.requests()), n + 2, "changed model: cache miss, one request")
    rc, out, err = run("", ["-m", "model-a", "-s", "sys one", "--no-cache", "-p", "first saved question"])
    t.eq(len(srv.requests()), n + 3, "--no-cache asks the server")
    rc, out, err = run("", ["-m", "model-a", "--cache-only", "-p", "never asked before"])
    t.eq(rc, 7, "--cache-only miss: exit 7")
    t.eq(len(srv.requests()), n + 3, "--cache-only sends nothing")
    rc, out, err = run("replay=openai_length.sse", ["-p", "cut answer"])
    rc, out, err = run("replay=openai_length.sse", ["-p", "cut answer"])
    t.eq(len(srv.requests()), n + 5, "a cut (length) answer is never cached")
    rc, out, err = run("status=500", ["-p", "error answer"])
    t.eq(query(home, "SELECT status FROM messages ORDER BY id DESC LIMIT 1"), [("error",)],
         "an HTTP error is saved with status error")

    # --- a cached answer is saved as cached: stats counts it as a hit, not in TTFT or tokens/s ---
    home2 = ttlib.make_home()
    env2 = {"OPENAI_BASE_URL": srv.base("")}
    n = len(srv.requests())
    ttlib.run_tokterm(["-p", "cache me once"], env=env2, home=home2)
    rc, out, err = ttlib.run_tokterm(["--json", "-p", "cache me once"], env=env2, home=home2)
    t.ok(rc == 0 and len(srv.requests()) == n + 1 and json.loads(out).get("cached") is True,
         "the second -p came from the cache", err.decode())
    rows = query(home2, "SELECT cached, ttft, tokens_per_s FROM messages WHERE role='assistant' "
                        "ORDER BY id")
    t.eq([r[0] for r in rows], [0, 1], "the cached answer is saved with cached = 1")
    t.ok(len(rows) == 2 and rows[0][1] is not None and rows[1][1] is None and rows[1][2] is None,
         "only the answer from the server has timings", repr(rows))
    rc, out, err = ttlib.run_tokterm(["stats"], env=env2, home=home2)
    lines = {ln[:22].strip(): ln[22:].strip() for ln in out.decode().splitlines()}
    t.eq(lines.get("cache hits"), "1 of 2 answers (50.0%)", "stats: one hit of two answers")
    ttft = ("p50 %.2f s   p90 %.2f s   p99 %.2f s   (1 answer)" % ((rows[0][1],) * 3)
            if rows and rows[0][1] else None)
    t.eq(lines.get("time to first token"), ttft, "stats: TTFT of the first answer only")
    rc, out, err = ttlib.run_tokterm(["search", "cache", "--limit", "5001"], env=env2, home=home2)
    t.ok(rc == 2 and b"--limit takes 1 to 5000" in err, "search --limit 5001: exit 2, says the cap",
         err.decode())

    # --- continue ---
    rc, out, err = run("", ["-c", "-p", "follow-up"])
    last = srv.requests()[-1]["body"]["messages"]
    t.eq([(m["role"], m["content"] if m["role"] == "user" else "...") for m in last],
         [("user", "cut answer"), ("assistant", "..."), ("user", "follow-up")],
         "-c continues the latest conversation with an answer (not the failed one): "
         "its turns alternate")
    first_id = query(home, "SELECT min(id) FROM conversations")[0][0]
    rc, out, err = run("", ["--conversation", str(first_id), "-p", "back to the first"])
    last = srv.requests()[-1]["body"]["messages"]
    t.eq([m["content"] for m in last], ["sys one", "first saved question", "first saved question",
                                        "back to the first"],
         "--conversation ID resumes that history with its system prompt")
    rc, out, err = run("", ["--conversation", "99999", "-p", "x"])
    t.ok(rc == 2 and b"no conversation 99999" in err, "unknown conversation: exit 2 with a message")

    # --- review subcommands ---
    rc, out, err = run("", ["ls"])
    t.ok(rc == 0 and b"first saved question" in out, "ls lists conversations", out.decode())
    rc, out, err = run("", ["show", str(first_id)])
    t.ok(rc == 0 and b"back to the first" in out, "show prints a conversation")
    rc, out, err = run("", ["search", "saved"])
    t.ok(rc == 0 and b"[saved]" in out, "search finds and highlights", out.decode())
    # --json: one object a line in an array, for scripts
    rc, out, err = run("", ["ls", "--json"])
    try:
        convs = json.loads(out)
    except ValueError:
        convs = []
    want = query(home, "SELECT c.id, (SELECT count(*) FROM messages m WHERE "
                       "m.conversation_id = c.id) FROM conversations c "
                       "ORDER BY c.updated DESC, c.id DESC")
    t.ok(rc == 0 and [(c.get("id"), c.get("messages")) for c in convs] == [tuple(w) for w in want]
         and all(set(c) == {"id", "title", "model", "profile", "created", "updated", "messages"}
                 for c in convs) and out.count(b"\n") == len(convs) + 2,
         "ls --json: every conversation, newest first, one a line", out.decode()[:400])
    rc, out, err = run("", ["search", "saved", "--json"])
    try:
        hits = json.loads(out)
    except ValueError:
        hits = []
    t.ok(rc == 0 and hits and all("saved" in h["snippet"] and "[" not in h["snippet"]
                                  and h["conversation"] > 0
                                  and (h["message"] is None if h["role"] == "title"
                                       else h["message"] > 0) for h in hits),
         "search --json: the hits, snippets without markers", out.decode()[:400])
    rc, out, err = run("", ["search", "zzqxnotsaidanywhere", "--json"])
    t.ok(rc == 1 and out == b"[]\n", "search --json without a match: [] and exit 1",
         "rc %d: %r" % (rc, out))
    rc, out, err = run("", ["search", 'AND "unbalanced (quote'])
    t.ok(rc == 1 and err == b"tokterm search: no matches\n" and out == b"",
         "search with operators and an unbalanced quote: no FTS syntax error, no match",
         "rc %d: %r %r" % (rc, out, err))
    # a pasted paragraph of 130 words: more than SQLite lets tt_rank() take as arguments (until
    # 2026-12 "cannot search: too many arguments on function tt_rank", exit 1)
    rc, out, err = run("", ["search"] + ["saved"] * 130 + ["--json"])
    t.ok(rc == 0 and b'"conversation"' in out and err == b"",
         "search of 130 words: ranked and found, no SQL error", "rc %d: %r" % (rc, err))
    # a quoted phrase matches across a line break, a tab or several spaces (until 2026-12 only
    # with the very blanks typed), and is still a phrase: its words apart do not match
    run("", ["-p", "the heading\nparagraph\t  follows here; heading and then paragraph"])
    rc, out, err = run("", ["search", '"heading paragraph follows"'])
    t.ok(rc == 0 and b"[heading paragraph   follows]" in out,
         "search: a phrase across a line break and a tab is found, highlighted whole",
         out.decode() + err.decode())
    rc, out, err = run("", ["search", '"heading follows"'])
    t.ok(rc == 1 and out == b"", "search: a phrase's words apart are not the phrase",
         out.decode() + err.decode())
    rc, out, err = run("", ["search", "--json", '"  HEADING   Paragraph  "'])
    try:
        hits = json.loads(out)
    except ValueError:
        hits = []
    t.ok(rc == 0 and len(hits) == 2 and all("heading paragraph" in h["snippet"] for h in hits),
         "search: a phrase in any case and spacing (the question and its echo)",
         out.decode() + err.decode())
    # grep's convention: no match says so on stderr and exits 1, so `search X && ...` works
    rc, out, err = run("", ["search", "zzqxnotsaidanywhere"])
    t.ok(rc == 1 and out == b"" and err == b"tokterm search: no matches\n",
         "search without a match: 'no matches' on stderr, exit 1", "rc %d: %r %r" % (rc, out, err))
    rc, out, err = ttlib.run_tokterm_tty(["search", "zzqxnotsaidanywhere"], home=home)
    t.ok(rc == 1 and out == b"" and err == b"tokterm search: no matches\n",
         "search without a match on a terminal: the same", "rc %d: %r %r" % (rc, out, err))
    rc, out, err = run("", ["export", str(first_id), "--format", "json"])
    try:
        ex = json.loads(out)
    except ValueError:
        ex = {}
    t.ok(rc == 0 and "first saved question" in json.dumps(ex), "export --format json")
    # -o -: stdout, the same bytes (until 2026-12 a file named "-" and a folder "-.files/")
    cwd = os.getcwd()
    os.chdir(ttlib.tempdir("tt-export-dash-"))
    try:
        rc2, out2, err2 = run("", ["export", str(first_id), "--format", "json", "-o", "-"])
        made = os.listdir(".")
    finally:
        os.chdir(cwd)
    t.ok(rc2 == 0 and out2 == out and made == [], "export -o -: to stdout, no file made",
         "rc %d, files %r: %r" % (rc2, made, err2))
    # export --all: valid JSON, indented one way (cJSON's tabs) in the wrapper and inside
    rc, out, err = run("", ["export", "--all"])
    try:
        ok = json.loads(out)["format"] == "tokterm-export"
    except (ValueError, KeyError):
        ok = False
    t.ok(rc == 0 and ok and not re.search(rb"^ ", out, re.M) and b"\n\t\t{\n\t\t\t\"id\"" in out,
         "export --all: one JSON document, indented with tabs throughout", out[:300])

    # --- an answer cut off inside a code block (max_tokens) leaves its fence open: the Markdown
    # of show and export closes it, so the messages after it stay headings and text for a
    # Markdown reader, not the rest of one code block ---
    def open_fences(md):
        """The '## ' headings a CommonMark reader sees outside fenced code, and whether a
        fence is open at the end (top-level fences: indent of 3 spaces at most)."""
        heads, fence = [], None
        for line in md.split("\n"):
            stripped = line.lstrip(" ")
            indent = len(line) - len(stripped)
            run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in "`~" else 0
            if fence:
                if (indent <= 3 and run >= fence[1] and stripped[0] == fence[0] and
                        not stripped[run:].strip()):
                    fence = None
            elif indent <= 3 and run >= 3 and not (stripped[0] == "`" and "`" in stripped[run:]):
                fence = (stripped[0], run)
            elif line.startswith("## "):
                heads.append(line)
        return heads, fence

    cut = "Start:\n````python\nprint(1)\n```\nstill code"
    rc, out, err = run("reply=" + urllib.parse.quote(cut, safe=""), ["-p", "cut me off"])
    cut_id = query(home, "SELECT max(id) FROM conversations")[0][0]
    rc2, out2, err2 = run("", ["-c", "-p", "and after it"])
    for cmd in (["export", str(cut_id)], ["show", str(cut_id)]):
        rc, out, err = run("", cmd)
        heads, fence = open_fences(out.decode())
        t.ok(rc == 0 and rc2 == 0 and len(heads) == 4 and fence is None and
             b"still code\n````\n" in out and b"and after it" in out,
             "%s: a fence an answer leaves open is closed after it; the next messages are "
             "Markdown again" % cmd[0], "%r %r" % (heads, out.decode()[-600:]))
    # show says which turns a request leaves out, by the rule the request follows (until
    # 2026-12 a failed turn read as any other; only a turn with no answer row was marked)
    run("", ["-p", "kept one"])
    run("status=400", ["-c", "-p", "refused by the server"])
    run("", ["-c", "-p", "kept two"])
    sent = srv.requests()[-1]["body"]["messages"]
    rc, out, err = run("", ["show", str(query(home, "SELECT max(id) FROM conversations")[0][0])])
    o = out.decode()
    t.ok(rc == 0 and [m["content"] for m in sent] == ["kept one", "kept one", "kept two"] and
         o.count("a request leaves this turn out") == 1 and
         re.search(r"refused by the server\n\n## Assistant[^\n]*\n\n+\*error[^\n]*a request "
                   r"leaves this turn out\*", o) is not None,
         "show: the failed turn the next request left out is marked so, and only it", o)
    rc, out, err = run("", ["stats"])
    t.ok(rc == 0 and b"cache" in out.lower(), "stats prints answers and cache hit rate")
    # a usage error shows that subcommand's usage, not the other seven's
    rc, out, err = run("", ["rename", str(first_id)])
    t.eq((rc, err.decode()), (2, "tokterm rename: rename takes a conversation id and a title\n"
                                 "usage: tokterm rename ID TITLE...\n"),
         "rename without a title: its own usage line")
    # renaming an old conversation leaves it where it was: until 2026-12 rename set its
    # updated time, so ls listed it first and -c continued it instead of the newest one
    newest = query(home, "SELECT max(id) FROM conversations")[0][0]
    con = sqlite3.connect(db_path(home))
    con.execute("UPDATE conversations SET updated = updated - 100")  # as if an hour ago
    con.commit()
    con.close()
    before = query(home, "SELECT id, updated FROM conversations ORDER BY id")
    rc, out, err = run("", ["rename", str(first_id), "an old one renamed"])
    rc2, out2, err2 = run("", ["-c", "-p", "after the rename"])
    sent = [m["content"] for m in srv.requests()[-1]["body"]["messages"]]
    t.ok(rc == 0 and rc2 == 0 and sent == ["kept one", "kept one", "kept two", "kept two",
                                           "after the rename"],
         "rename of an old conversation: -c still continues the newest one", repr(sent))
    t.eq(query(home, "SELECT id, updated FROM conversations WHERE id=?", (first_id,)),
         [r for r in before if r[0] == first_id], "rename leaves the updated time alone")
    t.eq(query(home, "SELECT max(id) FROM conversations")[0][0], newest, "-c made no new one")
    # white space in a new title is one blank, as in a title taken from a prompt (until
    # 2026-12 a line break went in as it was and split the conversation's line of ls)
    rc, out, err = run("", ["rename", str(first_id), "two\nlines\t and ", " more "])
    rc2, out2, err2 = run("", ["ls", "--limit", "100"])
    t.ok(rc == 0 and query(home, "SELECT title FROM conversations WHERE id=?", (first_id,)) ==
         [("two lines and more",)] and
         re.search(r"^\s+%d\s.*two lines and more$" % first_id, out2.decode(), re.M),
         "rename: a line break or tab in the title is a blank; ls keeps one line a "
         "conversation", out.decode() + out2.decode())
    rc, out, err = run("", ["export", str(first_id), "--format", "xml"])
    e = err.decode()
    t.ok(rc == 2 and "usage: tokterm export ID" in e and "tokterm export --all" in e and
         "export -o FILE:" in e and "tokterm rm" not in e and "search:" not in e,
         "export --format xml: export's usage lines and notes only", e)
    rc, out, err = run("", ["stats", "--help"])
    t.ok(rc == 0 and b"tokterm rm ID" in out and b"tokterm stats" in out,
         "--help still lists every review subcommand", out.decode())
    rc, out, err = run("", ["rm", str(first_id)])
    t.eq(rc, 0, "rm")
    t.eq(query(home, "SELECT count(*) FROM conversations WHERE id=?", (first_id,)), [(0,)], "rm deleted it")

    # --- CJK search by a 2-character substring ---
    run("", ["-p", "東京都の天気は晴れです"])
    rc, out, err = run("", ["search", "天気"])
    t.ok(rc == 0 and "天気".encode() in out, "CJK found by a 2-character substring", out.decode())

    # --- answers of 60 KiB and 200 KiB are found right after the run (issue 14: every answer
    # is queued for the index when it finishes, whatever its size; the search indexes the
    # queue first) ---
    for size, marker in ((60 * 1024, "flatsixtyk"), (200 * 1024, "flattwohundredk")):
        text = "lorem ipsum dolor sit amet " * (size // 27)  # on stdin: argv holds 128 KiB
        rc, out, err = run("", ["--no-cache", "-p", marker], stdin=text.encode())
        aid = query(home, "SELECT max(id) FROM messages WHERE role = 'assistant'")[0][0]
        rc2, out, err2 = run("", ["search", marker])
        t.ok(rc == 0 and rc2 == 0 and ("/%d " % aid).encode() in out and b"assistant" in out,
             "a %d KiB answer is found right after the run" % (size // 1024),
             out.decode()[:300] + err.decode() + err2.decode())

    # --- --no-save / --incognito ---
    before = query(home, "SELECT count(*) FROM messages")[0][0]
    run("", ["--no-save", "-p", "not saved"])
    run("", ["--incognito", "-p", "not saved either"])
    t.eq(query(home, "SELECT count(*) FROM messages")[0][0], before, "--no-save and --incognito save nothing")

    # --- kill -9 mid-stream: integrity, content up to the last batch, marked interrupted ---
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=400,delay_ms=10")})
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "long answer"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    p.kill()
    p.wait()
    p.stdout.close()
    p.stderr.close()
    t.eq(query(home, "PRAGMA integrity_check"), [("ok",)], "kill -9: integrity_check ok")
    row = query(home, "SELECT id, status FROM messages WHERE role='assistant' ORDER BY id DESC LIMIT 1")[0]
    t.eq(row[1], "streaming", "kill -9: answer still marked streaming before the next start")
    saved = "".join(r[0] for r in query(home, "SELECT text FROM message_parts WHERE message_id=? "
                                              "AND reasoning=0 ORDER BY id", (row[0],)))
    t.ok(saved.startswith("tok0 ") and len(saved) > 100, "kill -9: answer saved up to the last "
         "batch (%d bytes)" % len(saved))
    prompt = query(home, "SELECT content FROM messages WHERE role='user' ORDER BY id DESC LIMIT 1")[0]
    t.eq(prompt, ("long answer",), "kill -9: the prompt was committed before the request")
    rc, out, err = run("", ["ls"])
    t.eq(query(home, "SELECT status FROM messages WHERE id=?", (row[0],)), [("streaming",)],
         "ls only reads: it recovers nothing (issue 13)")
    conv_id = query(home, "SELECT conversation_id FROM messages WHERE id=?", (row[0],))[0][0]
    rc, out, err = run("", ["rename", str(conv_id), "cut"])
    t.ok(b"interrupted" in err, "next writer says an answer was marked interrupted", err.decode())
    t.eq(query(home, "SELECT status, content FROM messages WHERE id=?", (row[0],)),
         [("interrupted", saved)], "next start marks it interrupted, with the saved text")

    # --- the answer's end compiles no SQL (issue 14): it was compiled while the request was
    # on the wire; a fast answer (no part written), a slow one (parts), a cached one-shot ---
    cases = [("gen=150,chunk=whole", ["--no-cache", "-p", "fast"], "a fast answer's end"),
             ("gen=3,delay_ms=300", ["--no-cache", "-p", "slow"], "an answer saved in parts"),
             ("", ["-p", "compile question %d" % os.getpid()], "a default one-shot")]
    for spec, args, what in cases:
        rc, out, err = run(spec, args, env={"TOKTERM_DEBUG_STORE": "1"})
        t.ok(rc == 0 and b"0 statements compiled from the first answer's end on" in err,
             "%s compiles no statement" % what, err.decode(errors="replace"))
    t.ok(query(home, "SELECT count(*) FROM messages WHERE role = 'assistant' AND content = "
                     "'tok0 tok1 tok2 ' AND status = 'complete'")[0][0] >= 1,
         "the answer saved in parts is whole in its row")

    # --- a scripted run's store is closed for the exit: what the close writes is written,
    # SQLite's memory left to _exit (TOKTERM_FULL_CLEANUP=1, as under a leak checker: freed) ---
    for full in ("", "1"):
        env = {"TOKTERM_DEBUG_STORE": "1"}
        if full:
            env["TOKTERM_FULL_CLEANUP"] = full
        rc, out, err = run("", ["-p", "closing %s %d" % (full or "fast", os.getpid())], env=env)
        fast = b"closed for the exit" in err
        asan = ttlib.built_with("asan")  # an ASan build frees all (leak checks)
        t.ok(rc == 0 and fast == (not full and not asan),
             "%s: the store's memory is %s" % ("full cleanup" if full else "a one-shot",
                                               "freed" if full or asan else "left to the exit"),
             err.decode(errors="replace"))
        t.eq(query(home, "SELECT count(*) FROM messages WHERE content = 'closing %s %d'"
                         % (full or "fast", os.getpid()))[0][0], 2,
             "%s: prompt and answer saved" % ("full cleanup" if full else "a one-shot"))
    t.eq(query(home, "PRAGMA integrity_check"), [("ok",)], "integrity_check ok after both")
    # a 10 MB answer's run still has its WAL copied and started over when it closes for the
    # exit: by the checkpoint process it starts then (tokterm --checkpoint), waited for here
    rc, out, err = run("gen=1000000,chunk=whole", ["--no-cache", "-p", "long"], timeout=120)
    done = ttlib.wait_checkpoints(db_path(home))
    wal = db_path(home) + "-wal"
    wal_size = os.path.getsize(wal)  # before a connection of ours ends it
    con = sqlite3.connect(db_path(home))
    try:
        frames = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        con.close()
    t.ok(rc == 0 and done and len(out) > 9000000 and wal_size <= 16 << 20 and frames < 100,
         "a 10 MB answer's WAL is copied and started over at exit (%d frames left)" % frames)

    # --- two processes writing at once ---
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("gen=100,delay_ms=5")})
    procs = [subprocess.Popen([ttlib.tokterm_path(), "-p", "p%d" % i, "-p", "q%d" % i], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for i in range(2)]
    errs = [pr.communicate(timeout=60)[1] for pr in procs]
    t.eq([pr.returncode for pr in procs], [0, 0], "two processes at once: both exit 0")
    t.ok(all(b"locked" not in e for e in errs), "no 'database is locked'", repr(errs))
    got = query(home, "SELECT count(*) FROM messages WHERE content IN ('p0','p1','q0','q1')")[0][0]
    t.eq(got, 4, "two processes at once: all four prompts saved")

    # --- a database that is not SQLite, or read-only ---
    bad = os.path.join(home, "bad.db")
    with open(bad, "wb") as f:
        f.write(b"this is not a database" * 100)
    rc, out, err = run("", ["--db", bad, "-p", "still answered"])
    t.ok(rc == 0 and out == b"still answered\n", "db not SQLite: the answer still comes", err.decode())
    t.ok(b"not saved" in err, "db not SQLite: says it is not saved and what to do", err.decode())
    rc, out, err = run("", ["--db", bad, "ls"])
    t.ok(rc == 1 and b"tokterm:" in err, "ls on a bad db: exit 1 with a message", err.decode())

sys.exit(t.done())
