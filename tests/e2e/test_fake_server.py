#!/usr/bin/env python3
"""Self-test of tests/fake-openai/server.py and of ttlib itself; prints TAP."""

import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the (possibly read-only) source tree

import glob  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

CHAT = "/v1/chat/completions"
t = ttlib.Tap()
CURL = shutil.which("curl")


def chat_path(spec):
    return "/%s%s" % (spec, CHAT) if spec else CHAT


def user_body(text, stream=True, model="test-model", **extra):
    b = {"model": model, "stream": stream, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "an earlier question"},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": text}]}
    b.update(extra)
    return b


def curl(srv, spec, *extra):
    """POST with curl -sN; returns (curl exit code, body bytes)."""
    r = subprocess.run([CURL, "-sN", "--max-time", "10", "-H", "Content-Type: application/json",
                        "--data-binary", '{"stream":true}', *extra,
                        "http://127.0.0.1:%d%s" % (srv.port, chat_path(spec))],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20)
    return r.returncode, r.stdout


def raw_exchange(srv, spec, body=b'{"stream":true}', timeout=10.0):
    """POST over a raw socket with Connection: close; returns (head text, list of HTTP chunks).

    Each HTTP chunk is one write of the server, so the list shows how the body was split."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (chat_path(spec).encode(), len(body), body))
        data = bytearray()
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    chunks = []
    while rest:
        line, _, rest = rest.partition(b"\r\n")
        n = int(line, 16)
        if n == 0:
            break
        chunks.append(rest[:n])
        rest = rest[n + 2:]
    return head.decode("latin-1"), chunks


def stream_text(chunks):
    return "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c.get("choices"))


def last_log(srv):
    return srv.requests(all=True)[-1]


def test_replay(srv):
    fixtures = sorted(glob.glob(os.path.join(ttlib.fixtures_dir(), "*.sse")))
    t.ok(len(fixtures) >= 7, "found the fixtures (%d)" % len(fixtures))
    for path in fixtures:
        name = os.path.basename(path)
        with open(path, "rb") as f:
            want = f.read()
        for mode in ("whole", "byte"):
            if CURL:
                rc, got = curl(srv, "replay=%s,chunk=%s" % (name, mode))
                t.ok(rc == 0 and got == want, "curl %s chunk=%s byte-identical" % (name, mode),
                     "rc=%d, %d bytes vs %d" % (rc, len(got), len(want)))
            else:
                t.skip("curl %s chunk=%s" % (name, mode), "curl not found", tool="curl")
        status, _, got = srv.post(chat_path("replay=%s,chunk=random,seed=7" % name), {})
        t.ok(status == 200 and got == want, "http.client %s chunk=random identical" % name)
    # How the writes are split, seen as HTTP chunks.
    name = "deepseek_keepalive.sse"
    with open(os.path.join(ttlib.fixtures_dir(), name), "rb") as f:
        want = f.read()
    _, ch = raw_exchange(srv, "replay=%s,chunk=whole" % name)
    t.eq(ch, [want], "chunk=whole: one write")
    _, ch = raw_exchange(srv, "replay=%s,chunk=byte" % name)
    t.ok(len(ch) == len(want) and b"".join(ch) == want, "chunk=byte: one write per byte")
    _, ch = raw_exchange(srv, "replay=%s,chunk=17" % name)
    t.ok(b"".join(ch) == want and all(len(c) == 17 for c in ch[:-1]), "chunk=17: 17-byte writes")
    _, ch = raw_exchange(srv, "replay=%s,chunk=line" % name)
    t.ok(b"".join(ch) == want and all(c.endswith(b"\n") and c.count(b"\n") == 1 for c in ch),
         "chunk=line: one line per write")
    _, ch = raw_exchange(srv, "replay=%s" % name)
    t.ok(b"".join(ch) == want and ch[0] == b": keep-alive\n\n"
         and all(c.endswith(b"\n\n") for c in ch) and len(ch) == want.count(b"\n\n"),
         "default chunk=event: one event per write", repr(ch[:3]))
    _, ch = raw_exchange(srv, "replay=%s,chunk=random,seed=3" % name)
    t.ok(b"".join(ch) == want and all(1 <= len(c) <= 64 for c in ch) and len(ch) > 10,
         "chunk=random: sizes 1..64")
    _, ch2 = raw_exchange(srv, "replay=%s,chunk=random,seed=3" % name)
    t.eq([len(c) for c in ch2], [len(c) for c in ch], "chunk=random: same seed, same split")


def test_gen(srv):
    status, hdrs, body = srv.post(chat_path("gen=1000"), user_body("x", model="gen-model"))
    t.eq(status, 200, "gen=1000 status")
    t.eq(hdrs.get("content-type"), "text/event-stream", "gen content-type")
    t.eq(hdrs.get("transfer-encoding"), "chunked", "gen is chunked")
    events = ttlib.sse_events(body)
    t.eq(events[-1]["data"], "[DONE]", "gen ends with [DONE]")
    chunks = [json.loads(e["data"]) for e in events[:-1]]
    t.eq(chunks[0]["choices"][0]["delta"].get("role"), "assistant", "gen: role delta first")
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:]
                if c["choices"] and c["choices"][0]["delta"].get("content")]
    t.eq(len(contents), 1000, "gen=1000: 1000 content deltas")
    t.eq(contents[:3] + contents[-1:], ["tok0 ", "tok1 ", "tok2 ", "tok999 "], "gen numbering")
    t.eq(chunks[-2]["choices"][0]["finish_reason"], "stop", "gen: finish chunk stop")
    t.eq((chunks[-1]["choices"], chunks[-1]["usage"]["completion_tokens"]), ([], 1000),
         "gen: usage chunk with empty choices")
    t.ok(all(c["model"] == "gen-model" and c["object"] == "chat.completion.chunk"
             for c in chunks), "gen: model and object in every chunk")
    _, ch = raw_exchange(srv, "gen=1000,chunk=event")
    t.eq(len(ch), 1000 + 4, "gen chunk=event: one write per event")
    _, ch2 = raw_exchange(srv, "gen=1000,chunk=whole")
    t.ok(len(ch2) == 1 and ch2[0] == b"".join(ch), "gen chunk=whole: same body in one write")


def test_echo(srv):
    text = "héllo wörld, 你好 😊 the end"
    status, hdrs, body = srv.post(CHAT, user_body(text, model="echo-model"))
    chunks = ttlib.chunk_deltas(body)
    t.eq(status, 200, "echo status")
    t.eq(stream_text(chunks), text, "echo: deltas join to the last user message")
    deltas = [c["choices"][0]["delta"]["content"] for c in chunks[1:] if c["choices"]
              and c["choices"][0]["delta"].get("content")]
    t.ok(len(deltas) > 3 and all(1 <= len(d) <= 4 for d in deltas), "echo: ~4-char deltas",
         repr(deltas))
    t.eq(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": ""},
         "echo: role delta first")
    t.ok(all(c["model"] == "echo-model" for c in chunks), "echo: request's model in chunks")
    t.eq(chunks[-2]["choices"][0]["finish_reason"], "stop", "echo: finish stop")
    usage = chunks[-1].get("usage") or {}
    t.eq(usage.get("completion_tokens"), len(deltas), "echo: completion_tokens = deltas")
    t.ok(usage.get("prompt_tokens", 0) > 0, "echo: prompt_tokens counted")
    t.eq(body.endswith(b"data: [DONE]\n\n"), True, "echo ends with [DONE]")
    rec = last_log(srv)
    t.eq(rec["body"]["messages"][-1]["content"], text, "log holds the request body")
    # content given as an array of parts
    parts = user_body([{"type": "text", "text": "part one, "}, {"type": "text", "text": "two"}])
    _, _, body = srv.post(CHAT, parts)
    t.eq(stream_text(ttlib.chunk_deltas(body)), "part one, two", "echo: content parts joined")
    _, _, body = srv.post(chat_path("reply=caf%C3%A9%2C%20ok%3D1"), user_body("ignored"))
    t.eq(stream_text(ttlib.chunk_deltas(body)), "café, ok=1", "reply=TEXT url-decoded")
    status, hdrs, body = srv.post(chat_path("json=1"), user_body("plain answer"))
    obj = json.loads(body)
    t.ok(status == 200 and hdrs.get("content-type") == "application/json"
         and obj["object"] == "chat.completion"
         and obj["choices"][0]["message"]["content"] == "plain answer"
         and int(hdrs.get("content-length", -1)) == len(body),
         "json=1: chat.completion object", body[:200])
    _, hdrs, body = srv.post(CHAT, user_body("no stream", stream=False))
    t.ok(hdrs.get("content-type") == "application/json"
         and json.loads(body)["choices"][0]["message"]["content"] == "no stream",
         "stream:false gets a JSON answer")
    _, _, body = srv.post(CHAT, b"this is not json")
    t.ok(last_log(srv)["body"] is None and json.loads(body)["choices"][0]["message"]["content"]
         == "", "non-JSON body logged as null")


def test_errors_headers(srv):
    status, hdrs, body = srv.post(
        chat_path("status=429,error=Rate%20limit%20reached,code=rate_limit_exceeded,"
                  "h.retry-after-ms=20"), user_body("x"))
    err = json.loads(body).get("error", {})
    t.eq(status, 429, "status=429")
    t.eq((err.get("message"), err.get("code"), err.get("type")),
         ("Rate limit reached", "rate_limit_exceeded", "requests"), "error JSON body")
    t.ok(hdrs.get("content-type") == "application/json"
         and int(hdrs.get("content-length", -1)) == len(body), "error: JSON with Content-Length")
    t.eq(hdrs.get("retry-after-ms"), "20", "h.retry-after-ms header")
    status, hdrs, body = srv.post(chat_path("status=500"), user_body("x"))
    t.ok(status == 500 and json.loads(body)["error"]["type"] == "server_error",
         "status=500 alone gets a default error body")
    with open(os.path.join(ttlib.fixtures_dir(), "README.md"), "rb") as f:
        readme = f.read()
    status, hdrs, body = srv.post(chat_path("status=502,body=README.md,ctype=text/html"), {})
    t.ok(status == 502 and body == readme and hdrs.get("content-type") == "text/html",
         "status=502 body=FILE ctype=text/html")
    status, hdrs, body = srv.post(chat_path(
        "gen=3,h.x-ratelimit-remaining-requests=42,h.x-ratelimit-reset-tokens=6m0s"), {})
    t.ok(status == 200 and hdrs.get("x-ratelimit-remaining-requests") == "42"
         and hdrs.get("x-ratelimit-reset-tokens") == "6m0s", "h.* headers on a stream", hdrs)
    status, _, body = srv.post(chat_path("gen=3,nosuchkey=1"), {})
    t.ok(status == 400 and b"nosuchkey" in body, "unknown spec key is a 400")
    status, _, _ = srv.get("/v1/nothing")
    t.eq(status, 404, "unknown path is a 404")
    status, _, body = srv.get("/v1/models")
    ids = [m["id"] for m in json.loads(body)["data"]]
    t.ok(status == 200 and json.loads(body)["object"] == "list" and ids, "GET /v1/models")
    _, _, body = srv.get("/models=a%7Cb/v1/models")
    t.eq([m["id"] for m in json.loads(body)["data"]], ["a", "b"], "models= key")


def test_rate_limits(srv):
    """rpm= and tpm= buckets: their headers, the 429 of each type, report=minute."""
    def burst(spec, n, **extra):
        return [srv.post(chat_path(spec), user_body("x", stream=False, **extra))
                for _ in range(n)]
    # rpm=60,burst=3: three go, the fourth is refused (a request a second comes back)
    got = burst("rpm=60,burst=3", 4)
    t.eq([g[0] for g in got], [200, 200, 200, 429], "rpm=60,burst=3: 3 pass, the 4th is a 429")
    h, err = got[3][1], json.loads(got[3][2])["error"]
    t.ok(h.get("x-ratelimit-limit-requests") == "60"
         and h.get("x-ratelimit-remaining-requests") == "0"
         and 0 < int(h.get("retry-after-ms", 0)) <= 1001
         and err["type"] == "requests" and err["code"] == "rate_limit_exceeded",
         "the 429: type requests, retry-after-ms <= 1 s, remaining 0", (h, err))
    # report=minute: the same burst, but the headers show the per-minute bucket (hundreds left)
    got = burst("rpm=600,burst=2,report=minute", 3)
    h = got[2][1]
    t.ok([g[0] for g in got] == [200, 200, 429]
         and int(h.get("x-ratelimit-remaining-requests", 0)) >= 590,
         "report=minute: a 429 while the per-minute remaining says %s"
         % h.get("x-ratelimit-remaining-requests"), [g[1] for g in got])
    t.ok(got[0][1].get("x-ratelimit-reset-requests") == "0.100s",
         "report=minute: one request spent resets in 0.100s at 600 rpm",
         got[0][1].get("x-ratelimit-reset-requests"))
    # tpm: the prompt (about characters/4 + 3 a message) plus max_tokens
    got = burst("tpm=1000", 3, max_tokens=400)
    ptoks = (len("be brief" "an earlier question" "an earlier answer" "x") + 3) // 4 + 12
    h0, h2 = got[0][1], got[2][1]
    err = json.loads(got[2][2])["error"]
    t.ok([g[0] for g in got] == [200, 200, 429]
         and h0.get("x-ratelimit-limit-tokens") == "1000"
         and h0.get("x-ratelimit-remaining-tokens") == str(1000 - 400 - ptoks)
         and "x-ratelimit-limit-requests" not in h0,
         "tpm=1000, max_tokens=400: two pass, the third is a 429; remaining counts prompt + "
         "max_tokens", [g[1] for g in got])
    t.ok(err["type"] == "tokens" and "tokens per min (TPM)" in err["message"]
         and "Requested %d" % (400 + ptoks) in err["message"]
         and int(h2.get("retry-after-ms", 0)) > 0,
         "the tokens 429: type tokens, TPM message, retry-after-ms", err)
    got = burst("rpm=600,tpm=100000,tburst=500", 2, max_tokens=400)
    t.ok([g[0] for g in got] == [200, 429]
         and json.loads(got[1][2])["error"]["type"] == "tokens"
         and got[1][1].get("x-ratelimit-remaining-requests") is not None,
         "rpm and tpm together: the token burst refuses, both limits in the headers")
    log = last_log(srv)
    t.ok(log.get("rate_limited") and log.get("rate_limited_type") == "tokens",
         "the log marks rate_limited and its type", log)
    status, _, body = srv.post(chat_path("rpm=5,report=hour"), user_body("x"))
    t.ok(status == 400 and b"report" in body, "report=hour is a 400")


def test_faults(srv):
    spec = "replay=openai_length.sse,chunk=byte,drop_after=100"
    if CURL:
        rc, got = curl(srv, spec)
        t.ok(rc == 18 and len(got) == 100, "drop_after=100: curl sees a partial transfer",
             "rc=%d len=%d" % (rc, len(got)))
    else:
        t.skip("drop_after with curl", "curl not found", tool="curl")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", chat_path(spec.replace("chunk=byte", "chunk=event")), body=b"{}")
    r = conn.getresponse()
    try:
        r.read()
        t.ok(False, "drop_after: http.client read fails")
    except http.client.IncompleteRead as e:
        t.eq(len(e.partial), 100, "drop_after: http.client IncompleteRead after 100 bytes")
    conn.close()

    s = socket.create_connection(("127.0.0.1", srv.port), timeout=0.6)
    s.sendall(b"POST /stall_after=50,stall_s=2,replay=openai_length.sse/v1/chat/completions "
              b"HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    got = bytearray()
    timed_out = False
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except socket.timeout:
        timed_out = True
    s.close()
    head, _, rest = bytes(got).partition(b"\r\n\r\n")
    t.ok(timed_out and rest.startswith(b"32\r\n") and len(rest) == 4 + 50 + 2,
         "stall_after=50: 50 bytes then silence", repr(rest[:80]))

    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=0.4)
    try:
        conn.request("POST", chat_path("hang=1,stall_s=2"), body=b'{"hang":"me"}')
        conn.getresponse()
        t.ok(False, "hang=1: no answer")
    except (socket.timeout, TimeoutError):
        t.ok(time.monotonic() - t0 < 2, "hang=1: client times out waiting")
    conn.close()
    rec = last_log(srv)
    t.ok(rec.get("hang") is True and rec["body"] == {"hang": "me"}, "hang=1 request is logged")

    t0 = time.monotonic()
    _, ch = raw_exchange(srv, "keepalive_ms=50,stall_s=0.5,gen=5", timeout=5)
    dt = time.monotonic() - t0
    kas = [c for c in ch[1:] if c == b": keep-alive\n\n"]
    t.ok(ch and b'"role":"assistant"' in ch[0] and len(kas) >= 5 and len(kas) == len(ch) - 1
         and 0.4 < dt < 3, "keepalive_ms: first event then keep-alive comments, bounded",
         "%d chunks in %.2fs" % (len(ch), dt))

    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", chat_path("header_delay_ms=250,gen=2"), body=b"{}")
    r = conn.getresponse()
    t_head = time.monotonic() - t0
    r.read()
    conn.request("POST", chat_path("first_delay_ms=250,gen=2"), body=b"{}")
    t0 = time.monotonic()
    r = conn.getresponse()
    t_head2 = time.monotonic() - t0
    r.read(1)
    t_body2 = time.monotonic() - t0
    r.read()
    conn.request("POST", chat_path("delay_ms=30,gen=5"), body=b"{}")
    t0 = time.monotonic()
    conn.getresponse().read()
    t_delay = time.monotonic() - t0
    conn.close()
    t.ok(t_head >= 0.24, "header_delay_ms=250 delays the status line (%.3fs)" % t_head)
    t.ok(t_body2 - t_head2 >= 0.2,
         "first_delay_ms=250: headers at once, body later (%.3f/%.3fs)" % (t_head2, t_body2))
    t.ok(t_delay >= 8 * 0.03 * 0.95, "delay_ms=30 between 9 writes (%.3fs)" % t_delay)

    # A client that vanishes mid-stream must not hurt the server.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(b"POST /gen=50000,chunk=event/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: 0\r\n\r\n")
    s.recv(1000)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()
    status, _, _ = srv.get("/_health")
    t.eq(status, 200, "server healthy after a client reset mid-stream")


def test_connections(srv):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    for text in ("first", "second"):
        conn.request("POST", CHAT, body=json.dumps(user_body(text)).encode(),
                     headers={"Content-Type": "application/json"})
        conn.getresponse().read()
    conn.request("POST", chat_path("close=1,gen=2"), body=b"{}")
    r = conn.getresponse()
    close_hdr = r.getheader("Connection")
    r.read()
    conn.request("POST", CHAT, body=json.dumps(user_body("fourth")).encode())
    conn.getresponse().read()
    conn.close()
    recs = srv.requests()[-4:]
    t.ok(recs[0]["conn"] == recs[1]["conn"] == recs[2]["conn"]
         and [r["conn_req"] for r in recs[:3]] == [1, 2, 3],
         "keep-alive: one connection, conn_req 1, 2, 3",
         [(r["conn"], r["conn_req"]) for r in recs])
    t.ok(close_hdr == "close" and recs[3]["conn"] != recs[2]["conn"] and recs[3]["conn_req"] == 1,
         "close=1: Connection: close, next request on a new connection")

    n = srv.queue(["reply=one", "reply=two,h.x-q=2"])
    t.eq(n, 2, "queue accepted two specs")
    got = []
    for _ in range(3):
        _, hdrs, body = srv.post(chat_path("reply=url"), user_body("x"))
        got.append(stream_text(ttlib.chunk_deltas(body)))
    t.eq(got, ["one", "two", "url"], "/_queue: queued specs in order, then the URL's")
    recs = srv.requests()[-3:]
    t.eq([r.get("queued", False) for r in recs], [True, True, False], "log marks queued specs")
    t.eq(recs[1]["spec"], {"reply": "two", "headers": [["x-q", "2"]]}, "log holds parsed spec")
    status, _, _ = srv.post("/_queue", ["bad_key=1"])
    t.eq(status, 400, "queue rejects a bad spec")

    secret = "sk-secret-abcdef123456"
    srv.post(CHAT, user_body("auth"), headers={"Authorization": "Bearer " + secret,
                                               "X-Custom": "yes"})
    rec = last_log(srv)
    t.eq(rec["headers"].get("authorization"), "<redacted len=%d>" % len(secret + "Bearer "),
         "authorization redacted with its length")
    t.ok(secret.encode() not in srv.raw_log(), "key never lands in the log")
    t.eq(rec["headers"].get("x-custom"), "yes", "other headers logged, lower-cased")
    want_keys = {"n", "t", "method", "path", "spec", "conn", "conn_req", "headers", "body",
                 "status"}
    t.ok(want_keys <= set(rec) and rec["status"] == 200 and rec["method"] == "POST"
         and isinstance(rec["t"], float), "log line fields", sorted(rec))
    ns = [r["n"] for r in srv.requests(all=True)]
    t.eq(ns, list(range(1, len(ns) + 1)), "request numbers 1..N")


def test_ttlib(srv):
    os.environ["OPENAI_BASE_URL"] = "http://leak.invalid"
    os.environ["OPENAI_ORG_ID"] = "org-leak"
    e = ttlib.clean_env(env={"EXTRA": "1", "LC_ALL": None})
    t.ok(sorted(k for k in e if k.startswith("OPENAI_")) == ["OPENAI_API_KEY"]
         and e["OPENAI_API_KEY"].startswith("sk-test-"), "clean_env: only the test key")
    t.ok(all(e[k].startswith(e["HOME"]) for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                   "XDG_STATE_HOME", "XDG_CACHE_HOME"))
         and os.path.isdir(e["HOME"]) and e["EXTRA"] == "1" and "LC_ALL" not in e,
         "clean_env: XDG dirs under a fresh HOME, overrides applied")
    t.eq(srv.base("gen=1"), "http://127.0.0.1:%d/gen=1/v1" % srv.port, "base(spec)")
    t.eq(ttlib.sse_events(b": c\r\ndata: a\r\ndata: b\r\n\r\nevent: x\ndata:c\n\n"),
         [{"event": None, "data": "a\nb"}, {"event": "x", "data": "c"}], "sse_events")
    if not ttlib.Tmux.available():
        t.skip("tmux helper", "tmux not available", tool="tmux")
        return
    with ttlib.Tmux(30, 6) as tm:
        tm.run(["sh", "-c", 'printf "cols=%s\\n" "$(tput cols)"; printf "ready> "; read x; '
                'echo "got:$x:$FOO"; exit 7'], ttlib.clean_env(env={"FOO": "bar"}))
        t.ok(tm.wait_for("ready>", 5) is not None, "tmux: wait_for text")
        tm.send_text("hi there")
        tm.send("Enter")
        screen = tm.wait_for(re.compile(r"got:hi there:bar"), 5)
        t.ok(screen is not None and "cols=30" in screen, "tmux: send keys, env, size", screen)
        t.eq(tm.wait_exit(5), 7, "tmux: exit status")
        t.ok("got:hi there:bar" in tm.capture(), "tmux: screen kept after exit")
    with ttlib.Tmux(40, 5) as tm:
        tm.run('trap "echo caught; exit 3" INT; echo waiting; while :; do sleep 0.05; done')
        t.ok(tm.wait_for("waiting", 5) is not None, "tmux: shell-string command runs")
        tm.send("C-c")
        t.ok(tm.wait_exit(5) == 3 and "caught" in tm.capture(), "tmux: C-c reaches the program")


def main():
    srv = ttlib.FakeServer()
    try:
        srv.start()
    except Exception as e:  # noqa: BLE001
        t.bail("fake server did not start: %s" % e)
    t.ok(srv.port and srv.get("/_health")[0] == 200, "server answers /_health")
    try:
        for fn in (test_replay, test_gen, test_echo, test_errors_headers, test_rate_limits,
                   test_faults,
                   test_connections, test_ttlib):
            try:
                fn(srv)
            except Exception as e:  # noqa: BLE001 - report, then carry on with the next group
                import traceback
                t.ok(False, "%s raised %s: %s" % (fn.__name__, type(e).__name__, e),
                     traceback.format_exc())
        # Stopping must be quick even with a connection hanging on a stall.
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(b"POST /hang=1/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 0\r\n\r\n")
        time.sleep(0.1)
        t0 = time.monotonic()
        rc = srv.stop()
        s.close()
        t.ok(rc == 0 and time.monotonic() - t0 < 3,
             "SIGTERM stops the server cleanly (rc=%s, %.2fs)" % (rc, time.monotonic() - t0))
        t.eq(srv.stderr(), "", "server wrote nothing to stderr")
    finally:
        srv.stop()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
