#!/usr/bin/env python3
"""End-to-end tests of scripted mode: the real binary against the fake server. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pty  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY


def run(srv, spec, args, **kw):
    env = dict(kw.pop("env", {}) or {})
    env.setdefault("OPENAI_BASE_URL", srv.base(spec))
    return ttlib.run_tokterm(args, env=env, **kw)


def no_key_leak(out, err, name):
    t.ok(KEY.encode() not in out and KEY.encode() not in err, name + ": key never printed")


FIXTURES = {
    # fixture: (exit code, stdout, a piece of stderr or None)
    "openai_length.sse": (6, '{"\n', "cut at the token limit"),
    "azure_filter.sse": (0, "Hallo Welt!\n", None),
    "deepseek_keepalive.sse": (0, "你好！有什么可以帮你的吗？😊\n", None),
    "llamacpp_reasoning.sse": (0, "OK\n", None),
    "ollama_reasoning.sse": (6, "Hi there\n", "cut at the token limit"),
    "llamacpp_old_error.sse": (3, "", "exceeds the available context size"),
    "openrouter_midstream_error.sse": (3, "Partial ans\n", "Provider disconnected unexpectedly"),
}

with ttlib.FakeServer() as srv:
    # --- every fixture, whole and one byte per write ---
    for fx, (code, out_want, err_piece) in FIXTURES.items():
        for chunk in ("event", "byte"):
            rc, out, err = run(srv, "replay=%s,chunk=%s" % (fx, chunk), ["-p", "hi"])
            name = "%s (chunk=%s)" % (fx, chunk)
            t.eq(rc, code, name + ": exit code")
            t.eq(out.decode("utf-8", "replace"), out_want, name + ": stdout")
            if err_piece:
                t.ok(err_piece in err.decode("utf-8", "replace"), name + ": stderr explains",
                     err.decode("utf-8", "replace"))
            else:
                t.eq(err.decode("utf-8", "replace"), "", name + ": stderr quiet")
    rc, out, err = run(srv, "replay=deepseek_keepalive.sse", ["--reasoning", "-p", "hi"])
    t.eq(err.decode(), "Okay, the user greets.\n", "--reasoning sends reasoning to stderr")
    t.ok(b"Okay" not in out, "reasoning never on stdout")

    # --- the request that leaves ---
    before = len(srv.requests())
    rc, out, err = run(srv, "", ["-m", "test-model", "-s", "be terse", "--max-tokens", "33",
                                 "--temperature", "0.3", "-p", "what is 2+2"])
    req = srv.requests()[before]
    body = req["body"]
    t.eq(rc, 0, "echo: exit 0")
    t.eq(out.decode(), "what is 2+2\n", "echo: answer streamed to stdout with a final newline")
    t.eq(body["model"], "test-model", "request: model")
    t.eq(body["messages"], [{"role": "system", "content": "be terse"},
                            {"role": "user", "content": "what is 2+2"}], "request: messages")
    t.eq(body.get("stream"), True, "request: stream true")
    t.eq(body.get("stream_options"), {"include_usage": True}, "request: include_usage")
    t.eq(body.get("max_tokens"), 33, "request: max_tokens")
    t.ok(abs(body.get("temperature", 0) - 0.3) < 1e-9, "request: temperature")
    t.ok(req["path"].endswith("/v1/chat/completions"), "request: path is BASE/chat/completions")
    auth = req["headers"].get("authorization", "")
    t.eq(auth, "<redacted len=%d>" % len("Bearer " + KEY), "request: Bearer key sent")
    no_key_leak(out, err, "echo")
    rc, out, err = run(srv, "", ["--no-usage", "-p", "x"])
    t.ok("stream_options" not in srv.requests()[-1]["body"], "--no-usage drops stream_options")

    # a key saved with its newline (a CI secret): the line break dropped, the request whole
    # (until 2026-12 "Bearer KEY\n" ended the headers early: no body reached the server, and
    # the fake answered an empty prompt, exit 0); one with a line break inside is refused, and
    # nothing goes out (it sent "X-Injected: 1" as a header of its own)
    rc, out, err = run(srv, "", ["--no-cache", "-p", "newline key"],
                       env={"OPENAI_API_KEY": KEY + "\r\n"})
    req = srv.requests()[-1]
    t.ok(rc == 0 and out == b"newline key\n" and req["body"] and
         req["headers"].get("authorization") == "<redacted len=%d>" % len("Bearer " + KEY),
         "a key with a trailing line break: sent without it, the request whole",
         "%r %r %r" % (rc, out, req["headers"]))
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--no-cache", "-p", "x"],
                       env={"OPENAI_API_KEY": KEY + "\r\nX-Injected: 1"})
    t.ok(rc == 2 and len(srv.requests()) == n0 and b"$OPENAI_API_KEY" in err and
         b"line break" in err and KEY.encode() not in err,
         "a key with a line break inside: exit 2, nothing sent, the key not shown", err.decode())

    # --- stdin ---
    rc, out, err = run(srv, "", [], stdin="from stdin only\n")
    t.eq((rc, out.decode()), (0, "from stdin only\n"), "prompt from stdin when it is a pipe")
    rc, out, err = run(srv, "", ["-p", "review this"], stdin="diff --git a b\n+x\n")
    t.eq(srv.requests()[-1]["body"]["messages"][-1]["content"], "review this\n\ndiff --git a b\n+x\n",
         "-p plus stdin: stdin appended as context")
    rc, out, err = run(srv, "", ["explain", "these", "words"])
    t.eq(srv.requests()[-1]["body"]["messages"][-1]["content"], "explain these words",
         "positional words are the prompt")
    rc, out, err = run(srv, "", [], stdin="   \n")
    t.eq(rc, 2, "empty prompt: exit 2")
    t.ok(b"empty" in err, "empty prompt: message")
    # stdin is read as -f reads text (until 2026-12 a NUL cut the prompt there without a
    # word, and UTF-16 went out as U+FFFD and stray bytes)
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["-p", "summarize"], stdin=b"line one\nsecret\x00after nul\n")
    t.ok(rc == 2 and b"NUL" in err and len(srv.requests()) == n0,
         "stdin with a NUL: refused, exit 2, nothing sent", err.decode(errors="replace"))
    rc, out, err = run(srv, "", ["-p", "what"], stdin="hello utf16 \u00e9\n".encode("utf-16"))
    t.eq((rc, srv.requests()[-1]["body"]["messages"][-1]["content"]),
         (0, "what\n\nhello utf16 \u00e9\n"), "UTF-16 stdin with its BOM: converted")
    rc, out, err = run(srv, "", ["-p", "what"], stdin=b"\xef\xbb\xbfbom text")
    t.eq(srv.requests()[-1]["body"]["messages"][-1]["content"], "what\n\nbom text",
         "a UTF-8 byte order mark on stdin is dropped")
    rc, out, err = run(srv, "", ["-p", "what"], stdin=b"bad \xff byte")
    t.ok(rc == 0 and b"not valid UTF-8" in err and
         srv.requests()[-1]["body"]["messages"][-1]["content"] == "what\n\nbad \ufffd byte",
         "invalid UTF-8 on stdin: sent as U+FFFD, and said", err.decode(errors="replace"))
    rc, out, err = run(srv, "", ["-p", "ws"], stdin=" \n\n  \n")
    t.eq(srv.requests()[-1]["body"]["messages"][-1]["content"], "ws",
         "a stdin of blanks adds nothing to the prompt")

    # --- stdout that cannot be written: a full disk is said and fails (until 2026-12 -p gave
    # 141 without a word, as for a reader gone, and --json and the readers exited 0) ---
    full_home = ttlib.make_home()

    def to_full(args):
        e = ttlib.clean_env(full_home, {"OPENAI_BASE_URL": srv.base("")})
        with open("/dev/full", "wb") as full:
            p = subprocess.run([ttlib.tokterm_path()] + args, env=e, stdin=subprocess.DEVNULL,
                               stdout=full, stderr=subprocess.PIPE, timeout=30)
        return p.returncode, p.stderr.decode(errors="replace")
    for args in (["-p", "to a full disk"], ["--json", "-p", "json to a full disk"], ["ls"],
                 ["show", "1"], ["export", "--all", "--format", "json"], ["help"],
                 ["--version"], ["roles"]):
        rc, err = to_full(args)
        t.ok(rc == 1 and "No space left on device" in err,
             "%s > /dev/full: exit 1 and the reason (rc %d)" % (" ".join(args[:2]), rc), err)
    # ... and an answer it stopped mid-stream is saved with that reason (until 2026-12
    # "cancelled", as if the user had asked)
    stop_home = ttlib.make_home()
    e = ttlib.clean_env(stop_home, {"OPENAI_BASE_URL": srv.base("gen=2000,delay_ms=2")})
    with open("/dev/full", "wb") as full:
        p = subprocess.run([ttlib.tokterm_path(), "-p", "long, to a full disk"], env=e,
                           stdin=subprocess.DEVNULL, stdout=full, stderr=subprocess.PIPE,
                           timeout=60)
    db = os.path.join(stop_home, ".local", "share", "tokterm", "tokterm.db")
    con = sqlite3.connect(db)
    rows = con.execute("SELECT status, error FROM messages WHERE role = 'assistant'").fetchall()
    con.close()
    t.ok(p.returncode == 1 and rows == [("cancelled",
                                         "stopped: writing stdout failed (No space left on "
                                         "device)")],
         "-p > /dev/full mid-stream: the answer saved with why it stopped", repr(rows))

    # a closed stdout fails every time (until 2026-12 libcurl's wake-up socket could take fd
    # 1 first: the answer went into it, exit 0, in about half the runs)
    e = ttlib.clean_env(full_home, {"OPENAI_BASE_URL": srv.base("")})
    got = []
    for i in range(8):
        p = subprocess.run([ttlib.tokterm_path(), "--no-cache", "-p", "closed %d" % i], env=e,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30,
                           preexec_fn=lambda: os.close(1))
        got.append((p.returncode, b"Bad file descriptor" in p.stderr))
    t.eq(got, [(1, True)] * 8, "-p with stdout closed: exit 1 and the reason, every run")

    # stdout handed over non-blocking (Node's child_process, some CI runners) and read slowly:
    # every command waits for room in the pipe (until 2026-12 show, export and count --ids
    # stopped after 64 KiB: "writing stdout: Resource temporarily unavailable", exit 1)
    nb_home = ttlib.make_home()
    ttlib.run_tokterm(["-p", "big"], home=nb_home,
                      env={"OPENAI_BASE_URL": srv.base("gen=30000")})
    for args in (["show", "1"], ["export", "--all"], ["-p", "big", "--no-cache"]):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
        p = subprocess.Popen([ttlib.tokterm_path()] + args, stdout=w, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL,
                             env=ttlib.clean_env(nb_home,
                                                 {"OPENAI_BASE_URL": srv.base("gen=30000")}))
        os.close(w)
        time.sleep(0.5)  # the pipe fills
        got = b""
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            got += b
        os.close(r)
        perr = p.stderr.read()
        prc = p.wait()
        t.ok(prc == 0 and len(got) > 200000 and not perr,
             "%s into a full non-blocking pipe: all of it, exit 0 (%d bytes)"
             % (" ".join(args), len(got)), "exit %d: %r" % (prc, perr[:200]))

    # a closed stdin (`<&-`, a daemon's job) adds nothing to -p, as </dev/null does (until
    # 2026-12: "reading stdin: Bad file descriptor", exit 2, nothing sent)
    p = subprocess.run([ttlib.tokterm_path(), "--no-cache", "-p", "stdin closed"], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                       preexec_fn=lambda: os.close(0))
    t.ok(p.returncode == 0 and p.stdout == b"stdin closed\n" and not p.stderr,
         "-p with stdin closed: answered, exit 0", "%r %r" % (p.returncode, p.stderr[:200]))
    p = subprocess.run([ttlib.tokterm_path(), "--no-cache"], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30, preexec_fn=lambda: os.close(0))
    t.ok(p.returncode == 2 and b"the prompt is empty" in p.stderr,
         "no prompt and stdin closed: the prompt is empty, exit 2", repr(p.stderr[:200]))

    # a reader gone is quiet for count too (it said "Broken pipe" and exited 1)
    e = ttlib.clean_env(full_home)
    p = subprocess.Popen([ttlib.tokterm_path(), "count", "--ids"], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the ids come
    _, cerr = p.communicate(b"hello world " * 200000, timeout=30)
    t.ok(p.returncode == 141 and not cerr, "count --ids into a closed pipe: 141, quiet",
         "%r %r" % (p.returncode, cerr[:200]))

    # count reads stdin as -p does: a byte order mark is no token, UTF-16 is its text
    got = [ttlib.run_tokterm(["count"], stdin=data)[1] for data in
           (b"\xff\xfe", b"\xef\xbb\xbfhi", "hi".encode("utf-16"), b"hi")]
    t.eq(got, [b"0\n", b"1\n", b"1\n", b"1\n"], "count: a BOM alone 0, UTF-16 hi as hi")

    # --- `help CMD` is `CMD --help` (until 2026-12 it printed the general help) ---
    rc, out, err = ttlib.run_tokterm(["help", "count"])
    t.ok(rc == 0 and out.decode().startswith("usage: tokterm count"), "help count: count's help",
         out.decode()[:200])
    rc, out, err = ttlib.run_tokterm(["help", "nosuch"])
    t.ok(rc == 2 and b"no command 'nosuch'" in err and b"count" in err,
         "help of an unknown command: exit 2, the commands named", err.decode())

    # --- --json ---
    rc, out, err = run(srv, "replay=llamacpp_reasoning.sse", ["--json", "-p", "hi"])
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.eq(rc, 0, "--json: exit 0")
    t.eq(j.get("content"), "OK", "--json: content")
    t.eq(j.get("reasoning"), "Thinking Process", "--json: reasoning")
    t.eq(j.get("finish_reason"), "stop", "--json: finish_reason")
    t.eq(j.get("model"), "carnice", "--json: model from the stream")
    t.eq((j.get("usage") or {}).get("completion_tokens"), 191, "--json: usage")
    t.ok(isinstance(j.get("timings", {}).get("ttft_s"), float), "--json: timings.ttft_s")
    t.ok("connection_reused" in j, "--json: connection_reused")
    t.eq(out.count(b"\n"), 1, "--json: exactly one line")
    # a long answer is written a piece (64 KiB) at a time, 3-byte characters across the
    # pieces' edges, C1 and bidi controls among them: on a pipe and on a terminal (where those
    # controls are escaped) one line that decodes to the whole answer
    text = ("\u4e2d" * 1000 + "\u009b\u202e") * 40
    outs = []
    for runner in (ttlib.run_tokterm, ttlib.run_tokterm_tty):
        srv.queue(["reply=" + urllib.parse.quote(text, safe="")])
        outs.append(runner(["--no-save", "--json", "-p", "hi"],
                           env={"OPENAI_BASE_URL": srv.base()})[1])
    srv.clear_queue()
    try:
        js = [json.loads(x) for x in outs]
    except ValueError:
        js = [{}, {}]
    t.ok([x.get("content") for x in js] == [text] * 2 and
         all(x.endswith(b"}\n") and x.count(b"\n") == 1 for x in outs),
         "--json, a 120 KB answer: one line, the whole answer, on a pipe and on a terminal")
    t.ok(b"\xc2\x9b" not in outs[1] and b"\xe2\x80\xae" not in outs[1] and
         b"\\u009b" in outs[1] and b"\\u202e" in outs[1],
         "--json, a 120 KB answer on a terminal: C1 and bidi controls escaped")

    # --- connection reuse: two turns in one process ---
    before = len(srv.requests())
    rc, out, err = run(srv, "", ["--json", "-p", "first turn", "-p", "second turn"])
    lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    reqs = srv.requests()[before:]
    t.eq(rc, 0, "two turns: exit 0")
    t.eq(len(reqs), 2, "two turns: two requests")
    t.ok(len(reqs) == 2 and reqs[0]["conn"] == reqs[1]["conn"], "two turns: one TCP connection")
    t.ok(len(reqs) == 2 and reqs[1]["conn_req"] == 2, "two turns: second request reuses it")
    t.eq([x.get("connection_reused") for x in lines], [False, True],
         "two turns: --json reports new then reused")
    t.eq([m["role"] for m in reqs[1]["body"]["messages"]] if len(reqs) == 2 else None,
         ["user", "assistant", "user"], "two turns: history carries the first answer")
    rc, out, err = run(srv, "", ["-p", "one", "-p", "two"])
    t.ok(out.decode() == "one\n\ntwo\n", "two turns as text: answers separated by a blank line",
         "rc=%d out=%r err=%r last requests=%r" % (rc, out, err, srv.requests()[-2:]))
    # a server that answers 429 "come back in 20 ms" again and again: each wait is told three
    # times, then at the 4th, 8th, 16th... (until 2026-12 a line each: 120 lines in 2 minutes)
    n429 = len(srv.requests())
    rc, out, err = run(srv, "status=429,h.retry-after-ms=20", ["--max-time", "1.5", "-p", "x"])
    n429 = len(srv.requests()) - n429
    waits = [ln for ln in err.decode(errors="replace").splitlines() if "as asked" in ln]
    t.ok(len(waits) >= 6 and len(waits) <= 12 and "(the same 4 times in a row)" in waits[3] and
         "(the same 8 times in a row)" in waits[4], "repeated 429 waits: a few lines, counted",
         err.decode(errors="replace"))
    # -c with --incognito, and an id past int64: said plainly, exit 2 (until 2026-12 "no
    # conversation store is open", and "no conversation 9223372036854775807")
    rc, _, err = run(srv, "", ["--incognito", "-c", "-p", "x"])
    t.ok(rc == 2 and b"--incognito opens none" in err, "--incognito -c: bad usage, said",
         err.decode(errors="replace"))
    # -c and --conversation name two things (until 2026-12 --conversation won without a word)
    n0 = len(srv.requests())
    rc, _, err = run(srv, "", ["-c", "--conversation", "1", "-p", "x"])
    t.ok(rc == 2 and b"leave one of them out" in err and len(srv.requests()) == n0,
         "-c with --conversation: bad usage, said, nothing sent", err.decode(errors="replace"))
    rc, _, err = run(srv, "", ["--conversation", "99999999999999999999", "-p", "x"])
    t.ok(rc == 2 and b"not '99999999999999999999'" in err, "--conversation past int64: bad usage",
         err.decode(errors="replace"))
    # the last line counts every wait: one per 429 answered, but for the last answer when
    # --max-time ended the run before its wait began (until 2026-12 a count of 8, 16, 32...
    # was the last line even when more waits followed it)
    last = re.search(r"\(the same (\d+) times in a row\)$", waits[-1]) if waits else None
    t.ok(last and int(last.group(1)) in (n429, n429 - 1),
         "repeated 429 waits: the last line gives the count in all", (waits[-1:], n429))
    # one wait in each of five turns: each is said (a review found the count ran across turns,
    # so the 5th turn's wait went unsaid)
    srv.queue(["status=429,h.retry-after-ms=20", "reply=ok"] * 5)
    rc, out, err = run(srv, "", ["-p", "1", "-p", "2", "-p", "3", "-p", "4", "-p", "5"])
    waits = [ln for ln in err.decode(errors="replace").splitlines() if "as asked" in ln]
    t.ok(rc == 0 and len(waits) == 5 and not any("in a row" in w for w in waits),
         "a wait in each of five turns: each said, no count", err.decode(errors="replace"))
    # a failed turn ends the run: the prompts after it are named, not dropped without a word
    srv.queue(["reply=ok1", "status=500"])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--retries", "0", "-p", "one", "-p", "two", "-p", "three",
                                 "-p", "four"])
    t.ok(rc == 3 and len(srv.requests()) == n0 + 2 and
         b"2 later prompts were not sent (turns 3-4 of 4): the turn before them ended with "
         b"exit 3" in err, "a failed turn: the later prompts are named as not sent",
         err.decode(errors="replace"))
    t.eq(out, b"ok1\n", "a failed later turn: stdout has the first answer, no blank line "
         "after it as if another answer followed")

    # --- HTTP errors ---
    rc, out, err = run(srv, "status=401,error=Incorrect%20API%20key%20provided,code=invalid_api_key",
                       ["-p", "hi"])
    t.eq(rc, 3, "401: exit 3")
    t.ok(b"HTTP 401" in err and b"Incorrect API key provided" in err, "401: status and message",
         err.decode())
    no_key_leak(out, err, "401")
    rc, out, err = run(srv, "status=429,error=You%20exceeded%20your%20current%20quota,code=insufficient_quota",
                       ["-p", "hi"])
    t.ok(rc == 3 and b"insufficient_quota" in err, "429 insufficient_quota: exit 3 with the code",
         err.decode())
    rc, out, err = run(srv, "status=502,ctype=text/html,body=proxy_502.html", ["-p", "hi"])
    t.eq(rc, 3, "502 HTML: exit 3")
    t.ok(b"HTTP 502" in err and b"502 Bad Gateway" in err and b"proxy" in err,
         "502 HTML page: status, title, and a hint that a proxy answered", err.decode())

    # --- network failures and truncation ---
    rc, out, err = run(srv, "gen=50,chunk=event,drop_after=900", ["-p", "hi"])
    t.eq(rc, 5, "drop mid-answer: exit 5 (truncated)")
    t.ok(out.startswith(b"tok") and out.endswith(b"\n"), "drop mid-answer: partial text kept",
         repr(out[:80]))
    t.ok(b"incomplete" in err, "drop mid-answer: says the answer is incomplete", err.decode())
    rc, out, err = run(srv, "gen=5,chunk=event,drop_after=0", ["--retries", "0", "-p", "hi"])
    t.eq(rc, 4, "drop before any byte: exit 4 (network)")
    rc, out, err = run(srv, "hang=1,stall_s=5", ["--retries", "0", "--idle-timeout", "1", "-p", "hi"])
    t.eq(rc, 4, "server never answers: idle watchdog, exit 4")
    t.ok(b"idle timeout" in err, "idle watchdog message", err.decode())
    t0 = time.time()
    rc, out, err = run(srv, "gen=3,keepalive_ms=100,stall_s=6", ["--retries", "0", "--idle-timeout", "1",
                                                                 "-p", "hi"])
    took = time.time() - t0
    t.eq(rc, 4, "keep-alive comments forever after the role chunk: watchdog fires, exit 4")
    t.ok(b"idle timeout" in err, "keep-alive: idle timeout message", err.decode())
    t.ok(took < 4, "keep-alive comments do not reset the watchdog (%.1fs)" % took)
    rc, out, err = run(srv, "gen=3,stall_after=10", ["--retries", "0", "--idle-timeout", "1", "-p", "hi"])
    t.ok(rc in (4, 5), "stall: ends with a network/truncated code (%d)" % rc)
    rc, out, err = ttlib.run_tokterm(["--retries", "0", "-p", "hi"],
                                     env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    t.eq(rc, 4, "port nobody listens on: exit 4")
    t.ok(b"onnect" in err, "connection refused explained", err.decode())
    rc, out, err = run(srv, "gen=20,chunk=event", ["-p", "hi"])
    rc2, out2, err2 = run(srv, "json=1", ["-p", "whole answer please"])
    t.eq((rc2, out2.decode()), (0, "whole answer please\n"),
         "application/json answer to a stream request is still shown")

    # --- cancel with SIGINT: partial kept, exit 130 ---
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("gen=200,delay_ms=20")})
    p = subprocess.Popen([ttlib.tokterm_path(), "-p", "hi"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = b""
    deadline = time.time() + 10
    while b"tok5" not in got and time.time() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            got += os.read(p.stdout.fileno(), 4096)
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=10)
    got += rest
    t.eq(p.returncode, 130, "SIGINT: exit 130")
    t.ok(got.startswith(b"tok0") and b"tok199" not in got, "SIGINT: partial answer kept")
    t.ok(b"cancelled" in err, "SIGINT: says cancelled", err.decode())
    # show marks it cancelled once: its footer, not also a quoted "error: cancelled"
    r = subprocess.run([ttlib.tokterm_path(), "show", "1"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    t.ok(r.returncode == 0 and b"\n*cancelled" in r.stdout and b"error: cancelled" not in
         r.stdout, "show: a cancelled answer is marked once", r.stdout.decode()[-400:])

    # --- the answer stays live in a pipe: text read is written before the stream goes on ---
    def seen_after(spec, want, limit=5.0):
        """Seconds until stdout (a pipe) holds want, or None; the stream outlasts limit."""
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base(spec)})
        start = time.monotonic()
        p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "-m", "m", "-p", "hi"],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        got, took = b"", None
        while time.monotonic() - start < limit:
            r, _, _ = select.select([p.stdout], [], [], 0.05)
            chunk = os.read(p.stdout.fileno(), 1 << 20) if r else b""
            got += chunk
            if want in got:
                took = time.monotonic() - start
                break
            if r and not chunk:
                break  # the stream ended first: took stays None
        p.kill()
        p.wait()
        return took

    def stream_body(spec):
        """The SSE body the fake server sends for spec (to the model "m" that seen_after asks)."""
        return srv.post("/%s/v1/chat/completions" % spec, b'{"model":"m","messages":[{"role":'
                        b'"user","content":"hi"}],"stream":true}')[2]

    def text_before(body, n):
        """The answer's text in the events of body that end within its first n bytes."""
        whole = body[:body.rindex(b"\n\n", 0, n) + 2]
        return "".join(d["choices"][0]["delta"].get("content") or ""
                       for d in ttlib.chunk_deltas(whole) if d.get("choices"))
    # One delta (after the role chunk), then nothing for 6 s.
    body = stream_body("gen=3")
    stall = body.index(b"tok0") + body[body.index(b"tok0"):].index(b"\n\n") + 2
    took = seen_after("gen=3,stall_after=%d,stall_s=6" % stall, b"tok0 ")
    t.ok(took is not None and took < 1.5,
         "a stream that waits after its first delta: the delta reaches the pipe at once "
         "(%s s)" % took)
    # A fast sender (the net thread batches the text of many reads), then a stall: what came
    # before the stall is written at once, not when more bytes come.
    stall = 1000000
    last = text_before(stream_body("gen=20000,chunk=whole"), stall).split()[-1]
    took = seen_after("gen=20000,chunk=whole,stall_after=%d,stall_s=6" % stall,
                      (last + " ").encode())
    t.ok(took is not None and took < 3,
         "a fast stream that stalls: its text up to the stall (%s) is written during the stall "
         "(%s s)" % (last, took))

    # --- escape sequences: exact bytes to a pipe, neutralised on a terminal ---
    evil = "A%1B%5D0%3Bpwned%07B%1B%5B2J%C2%9BC"
    rc, out, err = run(srv, "reply=" + evil, ["-p", "hi"])
    t.eq(out, b"A\x1b]0;pwned\x07B\x1b[2J\xc2\x9bC\n", "pipe: model bytes passed through exactly")
    env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("reply=" + evil)})
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(ttlib.tokterm_path(), [ttlib.tokterm_path(), "-p", "hi"], env)
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    _, status = os.waitpid(pid, 0)
    t.ok(b"\x1b" not in buf and b"\xc2\x9b" not in buf, "terminal: no ESC or C1 reaches it",
         repr(buf))
    t.ok(b"^[]0;pwned^GB^[[2J<U+009B>C" in buf, "terminal: sequences shown visibly", repr(buf))

    # --- no key: a clear message, and a local server offered ---
    rc, out, err = ttlib.run_tokterm(["-p", "hi"], env={"OPENAI_API_KEY": None,
                                                        "TOKTERM_LOCAL_PROBE": "Ollama=" + srv.base()})
    t.eq(rc, 2, "no key: exit 2")
    t.ok(b"OPENAI_API_KEY" in err and b"OPENAI_BASE_URL" in err and b"profile" in err,
         "no key: says what to set", err.decode())
    t.ok(b"A local Ollama server answers at " + srv.base().encode() in err,
         "no key: offers the local server that answers", err.decode())
    # another dialect's own variables and profile, not OpenAI's
    for api, names in (("anthropic", (b"export ANTHROPIC_API_KEY=", b"export ANTHROPIC_BASE_URL=")),
                       ("gemini", (b"export GEMINI_API_KEY=", b"GOOGLE_API_KEY"))):
        rc, out, err = ttlib.run_tokterm(["--api", api, "-p", "hi"],
                                         env={"OPENAI_API_KEY": None,
                                              "TOKTERM_LOCAL_PROBE": "None=http://127.0.0.1:1/v1"})
        t.ok(rc == 2 and all(n in err for n in names) and b"api = " + api.encode() in err
             and b"OPENAI" not in err, "no key, --api %s: its variables and profile" % api,
             err.decode())
    # a profile's own api_key_env is the only variable read: no other is offered
    khome = ttlib.make_home()
    os.makedirs(os.path.join(khome, ".config", "tokterm"))
    kcfg = os.path.join(khome, ".config", "tokterm", "config")
    with open(kcfg, "w") as f:
        f.write("[g]\napi = gemini\napi_key_env = MY_GEMINI_KEY\n")
    os.chmod(kcfg, 0o600)
    rc, out, err = ttlib.run_tokterm(["-P", "g", "-p", "hi"], home=khome,
                                     env={"TOKTERM_LOCAL_PROBE": "None=http://127.0.0.1:1/v1"})
    t.ok(rc == 2 and b"export MY_GEMINI_KEY=" in err and b"GOOGLE_API_KEY" not in err
         and b"GEMINI_API_KEY" not in err, "no key, api_key_env set: only that variable named",
         err.decode())
    rc, out, err = ttlib.run_tokterm(["-p", "keyless"], env={"OPENAI_API_KEY": None,
                                                             "OPENAI_BASE_URL": srv.base()})
    t.eq((rc, out), (0, b"keyless\n"), "local server needs no key")
    t.ok("authorization" not in srv.requests()[-1]["headers"], "keyless: no Authorization header")

    # --- config file: profiles, api_key_cmd, garbage ---
    home = ttlib.make_home()
    cfgdir = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfgdir)
    with open(os.path.join(cfgdir, "config"), "w") as f:
        f.write("[fake]\nbase_url = %s\nmodel = profile-model\napi_key_cmd = echo sk-from-cmd-123456\n"
                % srv.base())
    os.chmod(os.path.join(cfgdir, "config"), 0o600)
    rc, out, err = ttlib.run_tokterm(["-P", "fake", "-p", "hi"], home=home,
                                     env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    r = srv.requests()[-1]
    t.eq(rc, 0, "profile: exit 0")
    t.eq(r["body"]["model"], "profile-model", "profile: model")
    t.eq(r["headers"].get("authorization"), "<redacted len=%d>" % len("Bearer sk-from-cmd-123456"),
         "profile: key from api_key_cmd")
    # a key from a command or from the config file is checked as a variable's is: a control
    # character inside would end the header line (until 2026-12 only variables were checked,
    # and api_key_cmd's "sk-x\ry" went out as it was)
    for what, line in (("api_key_cmd", "api_key_cmd = printf 'sk-from-cmd\\rX-Injected: 1'"),
                       ("keys = cmd:", "keys = cmd:printf 'sk-from-cmd\\033[31m'"),
                       ("api_key", "api_key = sk-from-file\x1b[2J")):
        with open(os.path.join(cfgdir, "config"), "w") as f:
            f.write("[fake]\nbase_url = %s\nmodel = profile-model\n%s\n" % (srv.base(), line))
        n0 = len(srv.requests())
        rc, out, err = ttlib.run_tokterm(["-P", "fake", "--no-cache", "-p", "hi"], home=home,
                                         env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
        t.ok(rc == 2 and len(srv.requests()) == n0 and b"control character" in err and
             b"sk-from-file" not in err and b"\x1b" not in err and b"\r" not in err,
             "a control character in the key from %s: exit 2, nothing sent" % what,
             "%r %r" % (rc, err))
    with open(os.path.join(cfgdir, "config"), "w") as f:
        f.write("[fake]\nbase_url = %s\nmodel = profile-model\napi_key_cmd = echo sk-from-cmd-123456\n"
                % srv.base())
    with open(os.path.join(cfgdir, "config"), "w") as f:
        f.write("model = x\n\x01\x02 garbage line\n")
    rc, out, err = ttlib.run_tokterm(["-p", "hi"], home=home)
    t.eq(rc, 2, "garbage config: exit 2")
    t.ok(b"config:2:" in err, "garbage config: file and line named", err.decode())
    rc, out, err = ttlib.run_tokterm(["--frobnicate"])
    t.eq(rc, 2, "unknown option: exit 2")
    rc, out, err = ttlib.run_tokterm(["--help"])
    t.ok(rc == 0 and b"Exit status" in out and b"count" in out, "--help lists exit codes and subcommands")
    help_text = out.decode()
    # --help's and README's exit statuses are the man page's (8 and 9 were missing)
    with open(os.path.join(ttlib.srcdir(), "..", "README.md"), encoding="utf-8") as f:
        readme_exit = re.search(r"Exit status: ([\s\S]*?)\n\n", f.read()).group(1)
    with open(os.path.join(ttlib.srcdir(), "..", "docs", "tokterm.1"), encoding="utf-8") as f:
        man = f.read()
    man_codes = sorted(set(int(n) for n in re.findall(
        r"^\.B (\d+)$", man[man.index(".SH EXIT STATUS"):].split("\n.SH ", 1)[0], re.M)))
    help_exit = help_text[help_text.index("Exit status:"):]
    codes = lambda s: sorted(set(int(n) for n in re.findall(r"(?:^|[;:]\s+)(\d+) ", s)))
    t.ok(len(man_codes) > 10 and codes(help_exit) == man_codes == codes(readme_exit),
         "--help and README name the man page's exit statuses",
         "help %s, README %s, man %s" % (codes(help_exit), codes(readme_exit), man_codes))
    t.ok(re.search(r"\bls \[--limit N\] \[--json\]", help_text)
         and re.search(r"search QUERY [^\n]*\[--limit N\] \[--json\]", help_text),
         "--help names ls's and search's --json and --limit", help_text)
    # every subcommand's --help: its usage on stdout, exit 0, with no key or server set up
    bad = []
    for sub in ("ls", "show", "search", "export", "rm", "rename", "stats", "cache", "count",
                "models", "roles", "mcp", "doctor", "batch", "help"):
        rc, out, err = ttlib.run_tokterm([sub, "--help"], env={"OPENAI_API_KEY": None,
                                                               "OPENAI_BASE_URL": None})
        if rc != 0 or not out.lower().startswith(b"usage:") or err:
            bad.append((sub, rc, out[:60], err[:100]))
    t.eq(bad, [], "every subcommand's --help prints its usage, exit 0, without a key")
    api_help = re.search(rb"--api NAME[\s\S]*?profile 'api'", out)
    t.ok(api_help and all(re.search(rb"\b%s\b" % d, api_help.group(0))
                          for d in (b"openai", b"anthropic", b"gemini", b"responses")),
         "--help names every --api dialect", out.decode())
    rc, out, err = ttlib.run_tokterm(["--version"])
    t.ok(rc == 0 and b"libcurl" in out and b"SQLite" in out, "--version names library versions")
    # count: the words given, joined by spaces, as stdin would give them (no newline)
    rc, out, err = ttlib.run_tokterm(["count", "hello", "world,", "\u4f60\u597d"])
    rc2, out2, err2 = ttlib.run_tokterm(["count"], stdin="hello world, \u4f60\u597d")
    t.ok(rc == 0 and rc2 == 0 and out == out2 and int(out) == 5,
         "count TEXT...: the words' tokens, as on stdin", "%r %r %r" % (out, out2, err))
    rc, out, err = ttlib.run_tokterm(["count", "--ids", "--", "-p"], stdin="ignored")
    rc2, out2, err2 = ttlib.run_tokterm(["count", "--ids"], stdin="-p")
    t.ok(rc == 0 and out == out2 and out.strip(), "count -- -p: TEXT after -- may begin with -",
         "%r %r" % (out, out2))
    rc, out, err = ttlib.run_tokterm(["count", "-x"])
    t.ok(rc == 2 and b"unknown option '-x'" in err, "count -x: an unknown option", err.decode())
    rc, out, err = run(srv, "", ["--insecure", "-p", "hi"])
    t.ok(b"--insecure" in err, "--insecure warns", err.decode())

    # --- --trace: each answer's start, end and CPU, as the chat writes them (bench/tui) ---
    tdir = ttlib.tempdir()
    trace = os.path.join(tdir, "trace.txt")
    rc, out, err = run(srv, "gen=20000", ["--incognito", "--trace", trace, "-p", "one",
                                          "-p", "two"])
    t.ok(rc == 0, "--trace -p: exit 0", err.decode())
    t.ok(out.startswith(b"tok0 ") and out.count(b"tok19999") == 2,
         "--trace -p: both answers still on stdout")
    recs = [ln.split() for ln in open(trace)] if os.path.exists(trace) else []
    shape = [w[0] for w in recs] == list("SUEU" * 2)
    t.ok(shape, "--trace -p: S U E U per answer", repr(recs[:10]))
    cpu = [(float(w[1]), float(w[2])) for w in recs if w[0] == "U"] if shape else []
    at = [float(w[1]) for w in recs if w[0] in "SE"] if shape else []
    t.ok(shape and all(b > a for a, b in zip(at, at[1:])), "--trace -p: S and E times in order",
         repr(at))
    # 20,000 deltas are parsed and written between S and E: the process's clock moves
    t.ok(shape and cpu[1][0] > cpu[0][0] and cpu[3][0] > cpu[2][0],
         "--trace -p: each answer's process CPU counted between its S and E", repr(cpu))
    t.ok(shape and all(p >= th for p, th in cpu),
         "--trace -p: process CPU (all threads) >= the thread's", repr(cpu))
    t.ok(os.path.exists(trace) and b"tok" not in open(trace, "rb").read(),
         "--trace -p: no text of the answer in the trace")
    before = len(srv.requests())
    rc, out, err = run(srv, "", ["--incognito", "--trace", os.path.join(tdir, "no", "t"),
                                 "-p", "hi"])
    t.ok(rc == 2 and b"--trace" in err and b"No such file" in err,
         "--trace into a missing folder: exit 2, the path and the reason", err.decode())
    t.eq(len(srv.requests()), before, "--trace into a missing folder: nothing sent")

    # --- a prompt that fits by its bytes is sent without mapping the tokenizer's table ---
    def maps_while_streaming(args):
        """The tokenizer tables tokterm has mapped while the answer stalls mid-stream."""
        # tokterm makes itself undumpable (no core, no /proc/PID/maps for other users' eyes);
        # the documented debug switch lets a non-root tester read its maps
        env = ttlib.clean_env(None, {"OPENAI_BASE_URL": srv.base("gen=50,stall_after=2000,stall_s=5"),
                                     "TOKTERM_DEBUG_DUMPABLE": "1"})
        n0 = len(srv.requests())
        p = subprocess.Popen([ttlib.tokterm_path()] + args, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while len(srv.requests()) == n0 and time.monotonic() < deadline:
            time.sleep(0.02)  # the request was planned before it left
        time.sleep(0.2)       # the stream stalls for 5 s: tokterm is still running
        with open("/proc/%d/maps" % p.pid) as f:
            maps = f.read()
        alive = p.poll() is None
        p.kill()
        p.wait()
        return alive, [ln.split()[-1] for ln in maps.splitlines() if ln.endswith(".bin")]
    first, bins = maps_while_streaming(["--incognito", "-p", "how are you"])
    t.ok(first and not bins, "-p: the request fits by its bytes, no tokenizer table mapped (%s)"
         % bins)
    first, bins = maps_while_streaming(["--incognito", "--json", "-p", "how are you"])
    t.ok(first and any(b.endswith("o200k_base.bin") for b in bins),
         "--json: exact counts, the table is mapped (%s)" % bins)
    rc, out, err = run(srv, "", ["--incognito", "--json", "-p", "how are you"])
    t.eq(json.loads(out)["context"]["prompt_tokens"], 3 + 1 + 3 + 3,
         "--json: the request's exact tokens (3 + user 1 + 'how are you' 3 + primer 3)")

    # a pipe on stdin that stays quiet: said after 3 s (until 2026-12 nothing was said), and
    # what it sends then is read
    env = ttlib.clean_env(None, {"OPENAI_BASE_URL": srv.base("")})
    p = subprocess.Popen(["sh", "-c", '(sleep 4; echo late words) | "$0" --no-save --no-cache '
                          '-p x', ttlib.tokterm_path()], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    t.ok(p.returncode == 0 and b"late words" in out and
         b"waiting for stdin, a pipe that has sent nothing yet" in err,
         "a quiet pipe on stdin: said after 3 s, then read", err.decode())
    out = subprocess.run([ttlib.tokterm_path(), "--no-save", "--no-cache", "-p", "x"],
                         input=b"at once", env=env, capture_output=True, timeout=60)
    t.ok(out.returncode == 0 and b"waiting for stdin" not in out.stderr,
         "a pipe that sends at once: nothing said", out.stderr.decode())

sys.exit(t.done())
