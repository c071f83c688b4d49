#!/usr/bin/env python3
"""End-to-end tests of the MCP client: `tokterm mcp list` and `tokterm mcp call` against the
real servers from npm (tests/mcp/package.json: server-everything over stdio and Streamable
HTTP, server-filesystem on a temporary directory) and against tests/mcp/hostile.py (a server
that crashes, hangs, writes garbage, answers with wrong ids, returns 50 MiB, floods stderr,
pages its tool list, pings back, speaks an unknown revision). Prints TAP.

The npm packages come from $TOKTERM_MCP_MODULES (tests/check-all.sh installs them with npm ci
and sets it), else tests/mcp/node_modules; without them (or without node) the real-server
tests are skipped, and fail under CI."""

import sys

sys.dont_write_bytecode = True

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
HOSTILE = os.path.join(ttlib.srcdir(), "mcp", "hostile.py")


def modules():
    for d in (os.environ.get("TOKTERM_MCP_MODULES"),
              os.path.join(ttlib.srcdir(), "mcp", "node_modules"),
              os.path.join(ttlib.HERE, "..", "mcp", "node_modules")):
        if d and os.path.isdir(os.path.join(d, "@modelcontextprotocol", "server-everything")):
            return os.path.abspath(d)
    return None


def config(text):
    d = ttlib.tempdir("tt-mcp-")
    path = os.path.join(d, "config.ini")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def tt(cfg, args, env=None, timeout=90, **kw):
    rc, out, err = ttlib.run_tokterm(["--config", cfg] + args, env=env, timeout=timeout, **kw)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


FIX = ttlib.tempdir("tt-mcp-fix-")


def tool_call_sse(name, call_id, wire, args):
    """A fixture in FIX: a chat-completions stream whose answer is one tool call (its
    arguments in two fragments)."""
    a = json.dumps(args)
    chunks = [{"delta": {"role": "assistant", "content": None}},
              {"delta": {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                         "function": {"name": wire, "arguments": a[:5]}}]}},
              {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": a[5:]}}]}},
              {"delta": {}, "finish_reason": "tool_calls"}]
    with open(os.path.join(FIX, name), "w") as f:
        for c in chunks:
            c.setdefault("finish_reason", None)
            f.write("data: %s\n\n" % json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                                  "model": "gpt-4o-mini",
                                                  "choices": [dict(index=0, **c)]}))
        f.write("data: [DONE]\n\n")


def hostile_section(name, flags="", extra=""):
    return "[mcp %s]\ncommand = %s %s %s\n%s\n" % (name, sys.executable, HOSTILE, flags, extra)


# ---- the hostile server ------------------------------------------------------------------

cfg = config(hostile_section("h", "--pages 3 --garbage-first",
                             "timeout = 3\nmax_result_mb = 4\nenv = SECRET_FOR_TEST=${MY_SECRET}")
             + hostile_section("flood", "--flood-stderr 20")
             + hostile_section("badver", "--version 1999-01-01")
             + "[mcp gone]\ncommand = /nonexistent/mcp-server\n")

rc, out, err = tt(cfg, ["mcp", "call", "h", "ok", '{"text": "hello"}'])
t.eq((rc, out), (0, "hello\n"), "call: the text content on stdout, exit 0")

# a lone surrogate escape and a NUL in a tool's text: U+FFFD each, the rest kept (until 2026-12
# the surrogate lost the whole answer, the call waiting out its timeout, and the NUL cut the
# text short)
start = time.monotonic()
rc, out, err = tt(cfg, ["mcp", "call", "h", "odd_text"])
t.ok(rc == 0 and out == "half \ufffd end a\ufffdb tail\n" and time.monotonic() - start < 10,
     "call: a lone surrogate and a NUL in the text are U+FFFD, the text whole, at once",
     repr(out) + err)

rc, out, err = tt(cfg, ["mcp", "list", "h"])
names = [ln.split()[0] for ln in out.splitlines()[1:]]
t.ok(rc == 0 and names[:4] == ["h.page0", "h.page1", "h.page2", "h.ok"],
     "list: every page of tools/list followed (nextCursor)", out + err)

start = time.monotonic()
rc, out, err = tt(cfg, ["mcp", "call", "h", "crash"])
t.ok(rc == 4 and "exited with status 3" in err and "dying" in err and
     time.monotonic() - start < 10,
     "a server that crashes mid-call: exit 4, its status and stderr named at once", err)

start = time.monotonic()
rc, out, err = tt(cfg, ["mcp", "call", "h", "hang"])
took = time.monotonic() - start
t.ok(rc == 8 and "no answer to tools/call within 3 s" in err and took < 12,
     "a server that hangs: the section's timeout (3 s), exit 8 (%.1f s)" % took, err)

# a server slower to start than the section's timeout: its start (initialize) may take up to
# 30 s, the calls keep the section's 1 s (a short timeout is for calls, and a slow start on
# a loaded machine made a 2 s timeout fail the whole server)
scfg = config(hostile_section("slowstart", "--init-delay 2.5", "timeout = 1"))
start = time.monotonic()
rc, out, err = tt(scfg, ["mcp", "call", "slowstart", "ok", '{"text": "late"}'])
t.ok(rc == 0 and out == "late\n" and time.monotonic() - start >= 2.5,
     "a server slower to start (2.5 s) than its timeout (1 s): it starts, the call answers",
     err)
rc, out, err = tt(scfg, ["mcp", "call", "slowstart", "hang"])
t.ok(rc == 8 and "no answer to tools/call within 1 s" in err,
     "... and its calls keep the section's 1 s", err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "garbage"])
t.ok(rc == 8 and "not JSON-RPC" in err and "Server starting up" in err,
     "a server writing garbage to stdout: named in the message", err)
t.eq(ttlib.terminal_hazards(err.encode()), [], "the garbage is made safe for a terminal")

rc, out, err = tt(cfg, ["mcp", "call", "h", "wrong_id"])
t.ok(rc == 8 and "an id tokterm never asked for" in err,
     "an answer with a wrong JSON-RPC id: not taken, and said", err)


def peak_rss_kib(args, env=None):
    """(exit code, stderr, peak RSS of tokterm in KiB)."""
    e = ttlib.clean_env(None, env)
    p = subprocess.Popen([ttlib.tokterm_path()] + args, env=e, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    status, ru = ttlib.wait_rusage(p, 120)
    return os.waitstatus_to_exitcode(status), err.decode("utf-8", "replace"), ru.ru_maxrss


rc, err, rss = peak_rss_kib(["--config", cfg, "mcp", "call", "h", "huge", '{"mb": 50}'])
t.ok(rc == 8 and "50.0 MiB, over the limit of 4 MiB" in err,
     "a 50 MiB result over max_result_mb: exit 8, the size and the limit named", err)
t.ok(rss < 48 * 1024, "... in bounded memory (peak RSS %d KiB)" % rss)

rc, err, rss = peak_rss_kib(["--config", cfg, "mcp", "call", "flood", "ok"])
t.ok(rc == 0 and rss < 48 * 1024,
     "20 MiB on stderr before the answer: drained, the call works (peak RSS %d KiB)" % rss, err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "progress", '{"steps": 3}'])
t.ok(rc == 0 and out == "done 3\n" and "h.progress: progress 3/3: step 3" in err,
     "progress notifications on stderr, then the result", out + err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "ping_me"])
t.eq((rc, out), (0, "pong ok\n"), "the server's ping is answered")

rc, out, err = tt(cfg, ["mcp", "call", "h", "error"])
t.ok(rc == 1 and out == "it went wrong\n" and "reported an error" in err,
     "isError: the content printed, exit 1", out + err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "rpc_error"])
t.ok(rc == 3 and "error -32000: no way" in err, "a JSON-RPC error: exit 3, its message", err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "structured", "--json"])
t.ok(rc == 0 and json.loads(out).get("structuredContent") == {"answer": 42},
     "--json prints the whole result (structuredContent)", out + err)
rc, out, err = tt(cfg, ["mcp", "call", "h", "structured"])
t.eq(out, '{"answer":42}\n', "structured content alone is printed as JSON")

rc, out, err = tt(cfg, ["mcp", "call", "h", "env"], env={"MY_SECRET": "s3cr3t-value"})
t.eq(out, "sha:%s raw:************\n" % hashlib.sha256(b"s3cr3t-value").hexdigest()[:12],
     "env = NAME=${VAR}: the value comes from tokterm's environment (and its echo is starred)")
# a server that echoes a secret of its section (until 2026-12 printed, sent to the model and
# saved as it came)
for how, want_rc in (("rpc", 3), ("is_error", 1), ("stderr", 4)):
    rc, out, err = tt(cfg, ["mcp", "call", "h", "env_echo", '{"how": "%s"}' % how],
                      env={"MY_SECRET": "s3cr3t-value"})
    t.ok(rc == want_rc and "s3cr3t-value" not in out + err and "****" in out + err,
         "a server that echoes its env secret (%s): starred" % how, "%d %s%s" % (rc, out, err))

rc, out, err = tt(cfg, ["mcp", "call", "h", "fds"])
t.eq((rc, out), (0, "none\n"), "a server inherits no descriptor but stdin, stdout, stderr")

rc, out, err = tt(cfg, ["mcp", "call", "badver", "ok"])
t.ok(rc == 4 and "revision '1999-01-01'" in err, "an unknown protocol revision is refused", err)

rc, out, err = tt(cfg, ["mcp", "call", "gone", "ok"])
t.ok(rc == 4 and "no such executable" in err, "a command that does not exist: said", err)

rc, out, err = tt(cfg, ["mcp", "call", "nosuch", "ok"])
t.ok(rc == 2 and "no MCP server 'nosuch'" in err and "known: h, flood" in err,
     "an unknown server: exit 2 with the known ones", err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "ok", "[1, 2]"])
t.ok(rc == 2 and "must be a JSON object" in err, "arguments that are not an object: exit 2", err)

rc, out, err = tt(cfg, ["mcp", "call", "h", "ok", "-"], stdin='{"text": "from stdin"}')
t.eq(out, "from stdin\n", "arguments from stdin with '-'")

# Ctrl-C during a call: cancelled (the server is told), exit 130
e = ttlib.clean_env()
p = subprocess.Popen([ttlib.tokterm_path(), "--config", cfg, "mcp", "call", "h", "hang"], env=e,
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
time.sleep(1.0)
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=15)
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
t.ok(p.returncode == 130 and b"cancelled" in err, "SIGINT cancels the call: exit 130", err)

# The answer is printed (and flushed) as it arrives; the server's shutdown comes after: a
# server that stays up 3 s after its stdin closes (as server-everything stays 350 ms) does
# not hold the answer back, nor tokterm's exit (its reaper waits: test_mcp_exit.py).
lcfg = config(hostile_section("l", "--linger 3"))
p = subprocess.Popen([ttlib.tokterm_path(), "--config", lcfg, "mcp", "call", "l", "ok",
                      '{"text": "early"}'], env=ttlib.clean_env(), stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
line = p.stdout.readline()
t0 = time.monotonic()
try:
    rest, err = p.communicate(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    rest, err = p.communicate()
took = time.monotonic() - t0
t.ok(line == b"early\n" and p.returncode == 0,
     "the answer is on stdout as it arrives, then exit 0",
     "line %r, exit %s %.2f s after, %r" % (line, p.returncode, took, err))

# the same misdeeds over Streamable HTTP (hostile.py --http)
portfile = os.path.join(ttlib.tempdir("tt-mcp-http-"), "port")
hsrv = subprocess.Popen([sys.executable, HOSTILE, "--http", portfile], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        if os.path.exists(portfile):
            break
        time.sleep(0.05)
    hcfg = config("[mcp w]\nurl = http://127.0.0.1:%s/mcp\ntimeout = 2\nmax_result_mb = 4\n"
                  % open(portfile).read())
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "ok"])
    t.eq((rc, out), (0, "http ok\n"), "HTTP: a JSON answer, the session id carried")
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "sse"])
    t.ok(rc == 0 and out == "sse ok\n" and "w.sse: progress 2/2" in err,
         "HTTP: an event stream with progress, then the result", out + err)
    rc, err, rss = peak_rss_kib(["--config", hcfg, "mcp", "call", "w", "huge", '{"mb": 50}'])
    t.ok(rc == 8 and "over the limit of 4 MiB" in err and rss < 48 * 1024,
         "HTTP: a 50 MiB event: exit 8, bounded memory (peak RSS %d KiB)" % rss, err)
    start = time.monotonic()
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "hang"])
    t.ok(rc == 8 and "within 2 s" in err and time.monotonic() - start < 10,
         "HTTP: a server that hangs: the timeout", err)
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "garbage"])
    t.ok(rc == 4 and "not JSON-RPC" in err and "<html>" in err,
         "HTTP: a body that is not JSON: said", err)
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "http500"])
    t.ok(rc == 3 and "internal trouble" in err, "HTTP 500 with a JSON-RPC error: its message",
         err)
    rc, out, err = tt(hcfg, ["mcp", "call", "w", "expire"])
    t.ok(rc == 4 and "ended the session (HTTP 404)" in err, "HTTP: a session the server "
         "forgot: said", err)
    tool_call_sse("w_expire.sse", "call_e", "w__expire", {})
    tool_call_sse("w_ok.sse", "call_ok", "w__ok", {})
    with ttlib.FakeServer(extra_args=["--fixtures", FIX]) as fake:
        fake.queue(["replay=w_expire.sse", "replay=w_ok.sse", "reply=done"])
        rc, out, err = tt(hcfg, ["--mcp", "w", "--allow-tool", "w.*", "--no-save", "-p", "x"],
                          env={"OPENAI_BASE_URL": fake.base("")})
        msgs = (fake.requests()[-1].get("body") or {}).get("messages", [])
        got = [(m.get("tool_call_id"), str(m.get("content"))) for m in msgs
               if m.get("role") == "tool"]
        t.ok(rc == 0 and len(got) == 2 and "HTTP 404" in got[0][1] and
             got[1] == ("call_ok", "http ok"),
             "HTTP: after the server forgot the session, the next call starts a new one",
             "%r %s" % (got, err))
finally:
    hsrv.stdin.close()
    hsrv.wait(10)

bad = config("[mcp x]\ncommand = true\n")
os.chmod(bad, 0o666)
rc, out, err = tt(bad, ["mcp", "list"])
t.ok(rc == 2 and "runs a command" in err and "writable by every user" in err,
     "a config file others can change may not run a server", err)

bad = config("[mcp x]\nurl = ftp://x\n")
rc, out, err = tt(bad, ["mcp", "list"])
t.ok(rc == 2 and "config.ini:2: [mcp x] url" in err, "a bad section: FILE:LINE", err)

# --mcp and mcp = name servers that must exist, before anything is sent
with ttlib.FakeServer() as fake:
    env = {"OPENAI_BASE_URL": fake.base("reply=hi")}
    rc, out, err = tt(cfg, ["--mcp", "h", "--mcp", "nosuch", "--no-save", "-p", "x"], env=env)
    t.ok(rc == 2 and "no [mcp nosuch] section" in err and not fake.requests(),
         "--mcp NAME without a section: exit 2, nothing sent", err)
    prof = config(open(cfg).read() + "[p]\nmcp = flood, gone2\n")
    rc, out, err = tt(prof, ["-P", "p", "--no-save", "-p", "x"], env=env)
    t.ok(rc == 2 and "no [mcp gone2] section" in err, "mcp = in a profile: checked too", err)
    rc, out, err = tt(cfg, ["--mcp", "h", "--no-save", "-p", "x"], env=env)
    t.ok(rc == 0 and out == "hi\n", "--mcp h: the prompt is answered", out + err)

# ---- the chat: the servers start off the UI thread ---------------------------------------


def chat_open(home, fake, size=(100, 30)):
    tm = ttlib.Tmux(*size)
    tm.__enter__()
    tm.run([ttlib.tokterm_path(), "--no-save", "--no-cache", "--base-url", fake.base()],
           ttlib.clean_env(home=home))
    return tm


def chat_start_tests():
    # a server that hangs in initialize: the chat stays alive, Esc gives the prompt back
    home = ttlib.make_home()
    ttlib.write_config(home, "mcp = slow\n\n" +
                       hostile_section("slow", "--init-delay 600", "timeout = 40"))
    with ttlib.FakeServer() as fake:
        fake.queue(["reply=answered%20without%20tools"])
        tm = chat_open(home, fake)
        try:
            screen = tm.wait_for("starting MCP server slow", 10)
            t.ok(screen is not None, "the chat opens while the server starts: the status bar "
                 "names it", tm.capture())
            tm.send_text("hello there")
            tm.send("Enter")
            screen = tm.wait_for("waits for the MCP servers", 5)
            t.ok(screen is not None and "hello there" in screen,
                 "Enter: the turn shown, the prompt waits for the server", tm.capture())
            tm.send_text("xyz")
            screen = tm.wait_for(re.compile(r"\u203a.*xyz"), 5)
            t.ok(screen is not None, "typed keys are echoed while the server hangs", tm.capture())
            tm.wait_for(re.compile(r"starting MCP server slow \d+s.*F1 help"), 3)
            m1 = re.search(r"starting MCP server slow ([0-9.]+)s", ttlib.status_bar(tm.capture()))
            time.sleep(2.2)
            m2 = re.search(r"starting MCP server slow ([0-9.]+)s", ttlib.status_bar(tm.capture()))
            t.ok(m1 and m2 and float(m2.group(1)) > float(m1.group(1)),
                 "the status bar keeps redrawing: the time the server has taken grows",
                 "%s / %s" % (m1 and m1.group(0), m2 and m2.group(0)))
            tm.send("BSpace", "BSpace", "BSpace")
            t0 = time.monotonic()
            tm.send("Escape")
            screen = tm.wait_for(re.compile(r"\u203a hello there"), 5)
            t.ok(screen is not None and time.monotonic() - t0 < 5,
                 "Esc: control back, the prompt back in the input line", tm.capture())
            screen = tm.wait_for(re.compile(r"slow: initialize cancelled[\s\S]*"
                                            r"goes on without the tools"), 5)  # a row below
            t.ok(screen is not None and "goes on without the tools" in screen,
                 "... the server's start is cancelled, and said", tm.capture())
            t.eq(len(fake.requests()), 0, "... nothing was sent")
            tm.send("Enter")
            screen = tm.wait_for("answered without tools", 10)
            reqs = fake.requests()
            t.ok(screen is not None and len(reqs) == 1 and
                 "tools" not in (reqs[0].get("body") or {}) and
                 [m.get("content") for m in reqs[0]["body"]["messages"]][-1] == "hello there",
                 "Enter again: the prompt is sent, without the server's tools", tm.capture())
            tm.send("C-d")
            t.eq(tm.wait_exit(10), 0, "the chat quits")
        finally:
            tm.kill()

    # a server slow to start: the prompt waits for it, then goes with its tools; one that
    # cannot start is said as the chat opens, and the chat goes on without it
    home = ttlib.make_home()
    ttlib.write_config(home, "mcp = gone, slow\n\n[mcp gone]\ncommand = /nonexistent/mcp\n\n" +
                       hostile_section("slow", "--init-delay 3"))
    with ttlib.FakeServer() as fake:
        fake.queue(["reply=with%20tools"])
        tm = chat_open(home, fake)
        try:
            tm.wait_for("starting MCP server", 10)
            tm.send_text("use them")
            tm.send("Enter")
            t.ok(tm.wait_for("waits for the MCP servers", 3) is not None and
                 not fake.requests(), "a slow server: the prompt waits", tm.capture())
            screen = tm.wait_for("with tools", 15)
            reqs = fake.requests()
            names = [x["function"]["name"] for x in (reqs[0].get("body") or {}).get("tools", [])
                     ] if reqs else []
            t.ok(screen is not None and "h__ok" not in names and "slow__ok" in names,
                 "... then it goes, with the server's tools", repr(names))
            t.ok(screen is not None and "gone: cannot run '/nonexistent/mcp'" in screen and
                 "goes on without the tools" in screen,
                 "a server that cannot start: a clear line, the chat goes on", tm.capture())
            tm.send("C-d")
            t.eq(tm.wait_exit(10), 0, "the chat quits (the server stopped)")
        finally:
            tm.kill()


if ttlib.Tmux.available():
    chat_start_tests()
else:
    t.skip("the chat while MCP servers start", "tmux is not installed", tool="tmux")

# ---- the real servers from npm ------------------------------------------------------------

mods = modules()
node = shutil.which("node")
if not mods or not node:
    why = "node missing" if not node else "tests/mcp/node_modules missing (npm ci in tests/mcp)"
    for name in ("server-everything list", "echo", "add", "tool error", "progress",
                 "server-filesystem read", "large result", "scripted --mcp fs",
                 "Streamable HTTP"):
        t.skip(name, why, tool="node")
    sys.exit(t.done())

EVERYTHING = os.path.join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js")
FS = os.path.join(mods, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
root = ttlib.tempdir("tt-mcp-fs-")
with open(os.path.join(root, "notes.txt"), "w") as f:
    f.write("the answer is 42\n")
with open(os.path.join(root, "big.txt"), "w") as f:
    f.write(("0123456789abcdef" * 64 + "\n") * 5000)  # 5.1 MB
real = config("[mcp ev]\ncommand = %s\nargs = %s stdio\n\n"
              "[mcp fs]\ncommand = %s %s %s\n\n"
              "[mcp fs1]\ncommand = %s %s %s\nmax_result_mb = 1\n"
              % (node, EVERYTHING, node, FS, root, node, FS, root))

rc, out, err = tt(real, ["mcp", "list", "--json"])
try:
    listed = {s["name"]: [x["name"] for x in s.get("tools", [])] for s in json.loads(out)}
except ValueError:
    listed = {}
t.ok(rc == 0 and {"echo", "get-sum", "trigger-long-running-operation"} <= set(listed.get("ev", []))
     and "read_text_file" in listed.get("fs", []),
     "server-everything list: tools of both servers (--json)", out + err)

# the text list: every description starts in one column, past the longest name
# (fs.list_directory_with_sizes)
rc, out, err = tt(real, ["mcp", "list", "fs"])
tools = [ln for ln in out.splitlines() if ln.startswith("  fs.")]
cols = {len(ln) - len(ln[2 + len(ln.split()[0]):].lstrip()) for ln in tools}
t.ok(rc == 0 and len(tools) > 10 and len(cols) == 1, "list: the descriptions in one column",
     out + err)

rc, out, err = tt(real, ["mcp", "call", "ev", "echo", '{"message": "hi there"}'])
t.eq((rc, out), (0, "Echo: hi there\n"), "echo")

rc, out, err = tt(real, ["mcp", "call", "ev", "get-sum", '{"a": 2, "b": 40}'])
t.ok(rc == 0 and "42" in out, "add (get-sum)", out + err)

rc, out, err = tt(real, ["mcp", "call", "ev", "get-sum", '{"a": "x"}'])
t.ok(rc == 1 and "Input validation error" in out, "tool error: isError, exit 1", out + err)

rc, out, err = tt(real, ["mcp", "call", "ev", "trigger-long-running-operation",
                         '{"duration": 1, "steps": 3}'])
t.ok(rc == 0 and "completed" in out and "progress 3/3" in err,
     "progress of a long-running tool", out + err)

rc, out, err = tt(real, ["mcp", "call", "fs", "read_text_file",
                         json.dumps({"path": os.path.join(root, "notes.txt")})])
t.eq((rc, out), (0, "the answer is 42\n"), "server-filesystem read a file in a temp dir")

rc, out, err = tt(real, ["mcp", "call", "fs", "read_text_file",
                         json.dumps({"path": os.path.join(root, "big.txt")})])
t.ok(rc == 0 and len(out) == 5000 * 1025, "large result: 5 MB read whole (%d)" % len(out))
rc, out, err = tt(real, ["mcp", "call", "fs1", "read_text_file",
                         json.dumps({"path": os.path.join(root, "big.txt")})])
t.ok(rc == 8 and "over the limit of 1 MiB" in err, "... and refused over max_result_mb", err)

# the "done when", scripted: the model reads a file through server-filesystem
tool_call_sse("fs_read.sse", "call_fs1", "fs__read_text_file",
              {"path": os.path.join(root, "notes.txt")})
with ttlib.FakeServer(extra_args=["--fixtures", FIX]) as fake:
    fake.queue(["replay=fs_read.sse", "reply=The answer is 42."])
    rc, out, err = tt(real, ["--mcp", "fs", "--allow-tool", "fs.*", "--no-save", "-p",
                             "What does notes.txt say?"],
                      env={"OPENAI_BASE_URL": fake.base("")})
    reqs = fake.requests()
    last = (reqs[-1].get("body") or {}).get("messages", [{}])[-1] if reqs else {}
    t.ok(rc == 0 and "The answer is 42." in out and last.get("role") == "tool" and
         last.get("tool_call_id") == "call_fs1" and "the answer is 42" in
         str(last.get("content")), "--mcp fs --allow-tool 'fs.*': the model reads a file "
         "through server-filesystem and answers (rc %d)" % rc, out + err + repr(last)[:300])

rc, out, err = tt(real, ["mcp", "call", "ev", "get-env"], env={"OPENAI_API_KEY": ttlib.TEST_KEY})
t.ok(rc == 0 and "PATH" in out and ttlib.TEST_KEY not in out,
     "a server does not inherit tokterm's API key", out[:300])


port = ttlib.free_port()
env = dict(os.environ, PORT=str(port))
srv = subprocess.Popen([node, EVERYTHING, "streamableHttp"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)
try:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    web = config("[mcp web]\nurl = http://127.0.0.1:%d/mcp\nheaders = X-Key: {key}\n"
                 "key_env = WEB_KEY\n" % port)
    rc, out, err = tt(web, ["mcp", "call", "web", "trigger-long-running-operation",
                            '{"duration": 1, "steps": 2}'], env={"WEB_KEY": "k-123"})
    t.ok(rc == 0 and "completed" in out and "progress 2/2" in err,
         "Streamable HTTP: a call with progress over SSE, a session", out + err)
    rc, out, err = tt(web, ["mcp", "call", "web", "echo", '{"message": "x"}'])
    t.ok(rc == 4 and "WEB_KEY, which is not set" in err, "Streamable HTTP: a missing key", err)
    # a key saved with its newline is sent without it; one with a line break inside, or a
    # header whose $VAR holds one, stops before anything is sent (until 2026-12 both went out
    # as they were, the rest of the line as headers of its own)
    rc, out, err = tt(web, ["mcp", "call", "web", "echo", '{"message": "x"}'],
                      env={"WEB_KEY": "k-123\n"})
    t.ok(rc == 0 and "x" in out, "Streamable HTTP: a key_env value's newline dropped", out + err)
    rc, out, err = tt(web, ["mcp", "call", "web", "echo", '{"message": "x"}'],
                      env={"WEB_KEY": "k-123\r\nX-Evil: 1"})
    t.ok(rc == 4 and "$WEB_KEY" in err and "control character" in err and "k-123" not in err,
         "Streamable HTTP: a key_env value with a line break inside: refused", err)
    web2 = config("[mcp web]\nurl = http://127.0.0.1:%d/mcp\nheaders = X-Tok: $WEB_TOK\n"
                  % port)
    rc, out, err = tt(web2, ["mcp", "call", "web", "echo", '{"message": "x"}'],
                      env={"WEB_TOK": "t-1\r\nX-Evil: 1"})
    t.ok(rc == 4 and "X-Tok" in err and "control character" in err and "t-1" not in err,
         "Streamable HTTP: a header whose $VAR holds a line break: refused", err)
    web3 = config("[mcp web]\nurl = http://127.0.0.1:%d/mcp\nkey_cmd = printf 'k-1\\033[2J'\n"
                  % port)
    rc, out, err = tt(web3, ["mcp", "call", "web", "echo", '{"message": "x"}'])
    t.ok(rc == 4 and "[mcp web] key_cmd's output" in err and "control character" in err and
         "api_key_cmd" not in err and "\x1b" not in err,
         "Streamable HTTP: a key_cmd printing an escape: refused, the server's key_cmd named",
         err)
finally:
    os.killpg(srv.pid, signal.SIGTERM)
    srv.wait()

sys.exit(t.done())
