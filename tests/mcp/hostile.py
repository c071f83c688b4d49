#!/usr/bin/env python3
"""A small MCP server over stdio that misbehaves on request, for tests/e2e/test_mcp.py.

usage: hostile.py [--flood-stderr MB] [--garbage-first] [--pages N] [--version V]
                  [--init-delay S] [--linger S] [--ignore-term] [--stderr-after-eof MB]
                  [--pidfile FILE] [--listed FILE]
       hostile.py --http PORT-FILE   (Streamable HTTP on a free port written to PORT-FILE)

It answers initialize (protocol version V, default the client's), tools/list (N pages of one
tool each, default 1: "page0", "page1", ...; plus the tools below on the last page) and
tools/call of these tools:

  ok          {"text": ...}: one text block, the text echoed
  crash       exits with status 3 mid-call (after writing "dying" to stderr)
  hang        never answers (it keeps reading; notifications/cancelled is logged to stderr)
  garbage     writes lines that are not JSON-RPC, then nothing
  wrong_id    answers with an id the client never used, then nothing
  huge        {"mb": N}: a text result of N MiB (one line)
  error       a result with isError: true
  rpc_error   a JSON-RPC error (-32000)
  progress    {"steps": N}: N progress notifications, then the result
  structured  structuredContent only
  ping_me     pings the client, answers with "pong ok" once the client has answered
  env         the value of $SECRET_FOR_TEST (or "unset")
  fds         the descriptors above 2 it inherited ("none")
  list_changed  sends notifications/tools/list_changed and adds a tool "added"

Over HTTP (POST /mcp) initialize gives a session id that every later POST must carry (404
without it), and the tools are: ok (a JSON answer), sse (progress then the result as an event
stream), huge {"mb": N} (an event stream of N MiB), hang (never answers), garbage (a 200 with
a body that is not JSON), http500 (a 500 with a JSON-RPC error), expire (404: the session is
gone, as a server that restarted says).

With HOSTILE_LOG=FILE set, each notifications/cancelled is appended to FILE.
--init-delay S sleeps S seconds before answering initialize (a server slow to start, or
one that hangs there). --flood-stderr MB writes MB MiB to stderr before answering initialize. --garbage-first writes a
banner line to stdout before anything (as some servers do). --linger S stays up S seconds
after its stdin closes (as server-everything does, with a timer set at initialize), then
exits 0. --ignore-term ignores SIGTERM (each one appended to HOSTILE_LOG as "TERM"), so only
SIGKILL ends it. --stderr-after-eof MB writes MB MiB to stderr after the linger, then exits 0
(it blocks if nobody drains its stderr, and dies of a broken pipe if nobody holds it).
--pidfile FILE writes its pid to FILE at start; --listed FILE creates FILE once it has
answered the last page of tools/list (the client is ready).
"""
import hashlib
import json
import os
import sys
import time

args = sys.argv[1:]


def opt(name, default=None):
    if name in args:
        return args[args.index(name) + 1]
    return default


out = sys.stdout.buffer
pages = int(opt("--pages", "1"))
version = opt("--version")
extra_tools = []


def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


def result(i, r):
    send({"jsonrpc": "2.0", "id": i, "result": r})


TOOLS = ["ok", "crash", "hang", "garbage", "wrong_id", "huge", "error", "rpc_error", "progress",
         "structured", "ping_me", "env", "list_changed", "fds", "odd_text"]

if opt("--pidfile"):
    with open(opt("--pidfile"), "w") as f:
        f.write("%d\n" % os.getpid())

if "--ignore-term" in args:
    import signal

    def on_term(*_):
        if os.environ.get("HOSTILE_LOG"):
            with open(os.environ["HOSTILE_LOG"], "a") as f:
                f.write("TERM\n")

    signal.signal(signal.SIGTERM, on_term)

if "--garbage-first" in args:
    out.write(b"Server starting up... (not JSON)\n")
    out.flush()

def serve_http(port_file):
    import http.server
    import socketserver
    import threading
    import time
    sessions = set()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, code, body, ctype="application/json", extra=()):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self):
            sessions.discard(self.headers.get("Mcp-Session-Id"))
            self.reply(200, b"")

        def do_POST(self):
            m = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            method, i, p = m.get("method"), m.get("id"), m.get("params") or {}
            sid = self.headers.get("Mcp-Session-Id")
            if method == "initialize":
                sid = "s%d" % len(sessions)
                sessions.add(sid)
                r = {"jsonrpc": "2.0", "id": i, "result": {
                    "protocolVersion": p.get("protocolVersion"), "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile-http", "version": "1"}}}
                return self.reply(200, json.dumps(r).encode(), extra=[("Mcp-Session-Id", sid)])
            if sid not in sessions:
                return self.reply(404, b'{"error": "no such session"}')
            if i is None:
                return self.reply(202, b"")
            if method == "tools/list":
                r = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in
                               ("ok", "sse", "huge", "hang", "garbage", "http500", "expire")]}
                return self.reply(200, json.dumps({"jsonrpc": "2.0", "id": i,
                                                   "result": r}).encode())
            name, a = p.get("name"), p.get("arguments") or {}
            text = lambda t: json.dumps({"jsonrpc": "2.0", "id": i, "result": {  # noqa: E731
                "content": [{"type": "text", "text": t}]}}).encode()
            if name == "ok":
                return self.reply(200, text("http ok"))
            if name == "garbage":
                return self.reply(200, b"<html>not json</html>")
            if name == "http500":
                return self.reply(500, json.dumps({"jsonrpc": "2.0", "id": i, "error": {
                    "code": -32603, "message": "internal trouble"}}).encode())
            if name == "expire":
                sessions.discard(sid)
                return self.reply(404, b"")
            if name == "hang":
                time.sleep(30)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            tok = (p.get("_meta") or {}).get("progressToken")
            if name == "sse":
                for k in range(2):
                    ev = {"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": tok, "progress": k + 1, "total": 2}}
                    self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
                self.wfile.write(b"data: " + text("sse ok") + b"\n\n")
            elif name == "huge":
                n = int(float(a.get("mb", 50)) * (1 << 20))
                self.wfile.write(b'data: {"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":'
                                 b'"text","text":"' % i)
                try:
                    while n > 0:
                        k = min(n, 1 << 20)
                        self.wfile.write(b"x" * k)
                        n -= k
                    self.wfile.write(b'"}]}}\n\n')
                except OSError:
                    pass
            self.close_connection = True

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin or kills us


if "--http" in args:
    serve_http(opt("--http"))
    sys.exit(0)

pending_ping = None
for raw in sys.stdin.buffer:
    try:
        m = json.loads(raw)
    except ValueError:
        continue
    method, i, p = m.get("method"), m.get("id"), m.get("params") or {}
    if method is None and i == "ping-1" and pending_ping is not None:
        result(pending_ping, {"content": [{"type": "text", "text": "pong ok"}]})
        pending_ping = None
        continue
    if method == "initialize":
        time.sleep(float(opt("--init-delay", "0")))
        mb = float(opt("--flood-stderr", "0"))
        chunk = b"E" * 65535 + b"\n"
        for _ in range(int(mb * 16)):
            sys.stderr.buffer.write(chunk)
        sys.stderr.flush()
        result(i, {"protocolVersion": version or p.get("protocolVersion"),
                   "capabilities": {"tools": {"listChanged": True}},
                   "serverInfo": {"name": "hostile", "version": "1"}})
    elif method == "notifications/cancelled":
        sys.stderr.write("cancelled %s\n" % p.get("requestId"))
        sys.stderr.flush()
        if os.environ.get("HOSTILE_LOG"):
            with open(os.environ["HOSTILE_LOG"], "a") as f:
                f.write("cancelled %s %s\n" % (p.get("requestId"), p.get("reason")))
    elif method == "tools/list":
        page = int(p.get("cursor") or 0)
        tools = [{"name": "page%d" % page, "inputSchema": {"type": "object"}}]
        r = {"tools": tools}
        if page + 1 < pages:
            r["nextCursor"] = str(page + 1)
        else:
            tools += [{"name": t, "description": "the %s tool" % t,
                       "inputSchema": {"type": "object"}} for t in TOOLS + extra_tools]
        result(i, r)
        if "nextCursor" not in r and opt("--listed"):
            open(opt("--listed"), "w").close()
    elif method == "ping":
        result(i, {})
    elif method == "tools/call":
        name, a = p.get("name"), p.get("arguments") or {}
        if name == "ok":
            result(i, {"content": [{"type": "text", "text": a.get("text", "ok")}]})
        elif name == "crash":
            sys.stderr.write("dying\n")
            sys.stderr.flush()
            os._exit(3)
        elif name == "hang":
            pass
        elif name == "garbage":
            out.write(b"this is not json\n{\"half\": \n\x00\xff binary\n[1,2,3]\n")
            out.flush()
        elif name == "wrong_id":
            result(i + 1000, {"content": [{"type": "text", "text": "for someone else"}]})
        elif name == "huge":
            n = int(float(a.get("mb", 50)) * (1 << 20))
            body = b'{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"'
            out.write(body)
            left = n
            while left > 0:
                k = min(left, 1 << 20)
                out.write(b"x" * k)
                left -= k
            out.write(b'"}]},"id":' + str(i).encode() + b"}\n")
            out.flush()
        elif name == "odd_text":  # a lone surrogate (JS text cut by .slice()) and a NUL
            result(i, {"content": [{"type": "text", "text": "half \ud83d end a\x00b tail"}]})
        elif name == "error":
            result(i, {"content": [{"type": "text", "text": "it went wrong"}], "isError": True})
        elif name == "rpc_error":
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32000, "message": "no way"}})
        elif name == "progress":
            tok = (p.get("_meta") or {}).get("progressToken")
            steps = int(a.get("steps", 3))
            for k in range(steps):
                if tok is not None:
                    send({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": tok, "progress": k + 1, "total": steps,
                                     "message": "step %d" % (k + 1)}})
            result(i, {"content": [{"type": "text", "text": "done %d" % steps}]})
        elif name == "structured":
            result(i, {"content": [], "structuredContent": {"answer": 42}})
        elif name == "ping_me":
            pending_ping = i
            send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        elif name == "fds":
            seen = []
            for x in sorted(int(x) for x in os.listdir("/proc/self/fd") if int(x) > 2):
                try:
                    seen.append("%d:%s" % (x, os.readlink("/proc/self/fd/%d" % x)))
                except OSError:
                    pass  # the listing's own descriptor, closed by now
            result(i, {"content": [{"type": "text", "text": " ".join(seen) or "none"}]})
        elif name == "env":  # the value's digest (what arrived) and the value (starred)
            v = os.environ.get("SECRET_FOR_TEST", "unset")
            result(i, {"content": [{"type": "text", "text": "sha:%s raw:%s" % (
                hashlib.sha256(v.encode()).hexdigest()[:12], v)}]})
        elif name == "env_echo":  # the secret echoed back every way a server can
            v = os.environ.get("SECRET_FOR_TEST", "unset")
            how = a.get("how", "rpc")
            if how == "rpc":
                send({"jsonrpc": "2.0", "id": i, "error": {"code": -32000,
                                                           "message": "rpc fail " + v}})
            elif how == "is_error":
                result(i, {"content": [{"type": "text", "text": "bad token " + v}],
                           "isError": True})
            else:
                sys.stderr.write("fatal: token %s rejected\n" % v)
                sys.stderr.flush()
                os._exit(3)
        elif name == "list_changed":
            extra_tools.append("added")
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            result(i, {"content": [{"type": "text", "text": "changed"}]})
        else:
            send({"jsonrpc": "2.0", "id": i,
                  "error": {"code": -32602, "message": "Unknown tool: %s" % name}})

time.sleep(float(opt("--linger", "0")))  # stdin closed: the client waits for our exit
if opt("--stderr-after-eof"):
    chunk = b"late stderr of the server " * 2520 + b"\n"  # ~64 KiB a line
    for _ in range(int(float(opt("--stderr-after-eof")) * 16)):
        sys.stderr.buffer.write(chunk)
    sys.stderr.flush()
