#!/usr/bin/env python3
"""tokterm exits as soon as its work is done, and a stdio MCP server still running then is
shut down by the spec's sequence all the same (stdin closed, SIGTERM after the grace, SIGKILL
after as long again) by a detached reaper, `tokterm --reap`: against tests/mcp/hostile.py
(no npm packages needed). Prints TAP.

This process makes itself the subreaper of what tokterm leaves (prctl
PR_SET_CHILD_SUBREAPER), as init does on a real system: so the server and the reaper become
its children once tokterm has exited, and it sees when and how each ended (waitpid)."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
HOSTILE = os.path.join(ttlib.srcdir(), "mcp", "hostile.py")
GRACE = 2.0  # seconds before SIGTERM, and again before SIGKILL (docs/GUIDE.md, MCP servers)

if not ttlib.adopt_orphans():
    t.skip("tokterm's exit before the server's", "prctl(PR_SET_CHILD_SUBREAPER) is not available")
    sys.exit(t.done())


def wait_for(pid, timeout):
    """(exit status as os.waitpid gives it, seconds waited) for our child pid; None on
    timeout (then its group is killed)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            got, st = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "not ours", 0
        if got:
            return st, time.monotonic() - t0
        time.sleep(0.01)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    return None, timeout


def how(st):
    if st is None or isinstance(st, str):
        return str(st)
    if os.WIFSIGNALED(st):
        return "signal %d" % os.WTERMSIG(st)
    return "exit %d" % os.WEXITSTATUS(st)


def run(flags, args=None, extra_env=None, tty=False):
    """Run tokterm with a hostile.py server 'l' (flags); returns a dict of what was seen."""
    d = ttlib.tempdir("tt-mcp-exit-")
    pidfile, log, listed = (os.path.join(d, x) for x in ("pid", "log", "listed"))
    cfg = os.path.join(d, "config.ini")
    with open(cfg, "w") as f:
        f.write("[mcp l]\ncommand = %s %s --pidfile %s --listed %s %s\nenv = HOSTILE_LOG=%s\n"
                % (sys.executable, HOSTILE, pidfile, listed, flags, log))
    os.chmod(cfg, 0o600)
    env = ttlib.clean_env(env=extra_env)
    argv = [ttlib.tokterm_path(), "--config", cfg] + (
        args or ["mcp", "call", "l", "ok", '{"text": "early"}'])
    t0 = time.monotonic()
    if tty:  # the chat on a terminal: quit with Ctrl-D once the server is up
        import pty
        import threading
        master, slave = pty.openpty()
        p = subprocess.Popen(argv, env=env, stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True)
        os.close(slave)
        screen = []
        th = threading.Thread(target=ttlib._drain, args=(master, screen), daemon=True)
        th.start()
        for _ in range(1500):  # the chat has listed the server's tools: it is up
            if os.path.exists(listed) or p.poll() is not None:
                break
            time.sleep(0.02)
        time.sleep(0.3)  # the listing handed to the chat
        t0 = time.monotonic()
        os.write(master, b"\x04")
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        th.join(5)
        os.close(master)
        out, err = b"".join(screen), b""
    else:
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
    r = {"rc": p.returncode, "out": out.decode("utf-8", "replace"),
         "err": err.decode("utf-8", "replace"), "exited": time.monotonic() - t0}
    with open(pidfile) as f:
        spid = int(f.read())
    # right after tokterm's exit: is the server still running, now our child?
    try:
        got, st = os.waitpid(spid, os.WNOHANG)
        r["alive"] = got == 0
        if got:
            r["server"], r["server_end"] = st, time.monotonic() - t0
    except ChildProcessError:
        r["alive"] = False  # reaped by tokterm before it exited
        r["server"] = "not ours"
    # the reaper: a child of ours now, once it has exec'd `tokterm --reap` (a copy of tokterm
    # that has not exec'd yet still has tokterm's command line, and one in the middle of its
    # exec none at all, until the new program's arguments are set up: wait for either; a
    # README run once read the second and took it for no reaper)
    r["reapers"] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pending = False
        r["reapers"] = []
        for pid, _state in ttlib.children():
            st = ttlib.proc_state(pid)
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            if st is None:
                continue
            cmd = st[0].split(b"\0")
            if b"--reap" in cmd:
                r["reapers"].append((pid, cmd, environ))
            elif pid != spid and (cmd[0] == argv[0].encode() or ttlib.mid_exec(st)):
                pending = True
        if not pending:
            break
        time.sleep(0.01)
    if "server" not in r:
        st, _ = wait_for(spid, 3 * GRACE + 5)
        r["server"], r["server_end"] = st, time.monotonic() - t0
    r["reaper_status"] = [how(wait_for(pid, 10)[0]) for pid, _, _ in r["reapers"]]
    time.sleep(0.05)
    try:
        os.killpg(spid, 0)
        r["group_left"] = True
    except OSError:
        r["group_left"] = False
    mine = {spid} | {pid for pid, _, _ in r["reapers"]}
    r["left"] = [c for c in ttlib.children() if c[0] in mine]
    r["log"] = open(log).read() if os.path.exists(log) else ""
    return r


def common(r, name):
    """What every case checks: tokterm exited first, one reaper that holds no key, and
    nothing of the server is left afterwards."""
    t.ok(r["alive"], "%s: tokterm exits while the server still runs (%.2f s)" % (name, r["exited"]),
         "server %s" % how(r.get("server")))
    ok = len(r["reapers"]) == 1
    if ok:
        _, cmd, environ = r["reapers"][0]
        ok = cmd[1] == b"--reap" and ttlib.TEST_KEY.encode() not in environ + b"".join(cmd) \
            and environ == b""
    t.ok(ok, "%s: one reaper, `tokterm --reap`, with an empty environment (no key)" % name,
         repr([(c, e[:200]) for _, c, e in r["reapers"]]))
    t.eq(r["reaper_status"], ["exit 0"], "%s: the reaper ends, status 0" % name)
    t.ok(not r["group_left"] and not r["left"],
         "%s: nothing left of the server: no process in its group, no zombie" % name,
         repr(r["left"]))


# 1. a server that ignores stdin's end (it would linger 60 s): SIGTERM after the grace
r = run("--linger 60")
t.eq((r["rc"], r["out"], r["err"]), (0, "early\n", ""),
     "lingering server: tokterm's exit code and output are those of the call")
common(r, "EOF ignored")
t.ok(r["server"] != "not ours" and how(r["server"]) == "signal 15" and
     r["server_end"] >= GRACE - 0.2,
     "EOF ignored: the server gets SIGTERM after the %g s grace, though tokterm had exited" % GRACE,
     "%s at %.2f s" % (how(r["server"]), r.get("server_end", 0)))

# 2. a server that ignores stdin's end and SIGTERM: SIGKILL after as long again
r = run("--linger 60 --ignore-term")
t.eq((r["rc"], r["out"]), (0, "early\n"), "stubborn server: exit 0, the answer")
common(r, "TERM ignored")
t.ok(how(r["server"]) == "signal 9" and "TERM" in r["log"] and
     r["server_end"] >= 2 * GRACE - 0.2,
     "TERM ignored: SIGTERM, then SIGKILL %g s later" % GRACE,
     "%s at %.2f s, log %r" % (how(r["server"]), r.get("server_end", 0), r["log"]))

# 3. a server that exits by itself after stdin's end (as server-everything, 350 ms later;
# 1 s here, so that tokterm is surely gone first, and before the 2 s grace)
r = run("--linger 1")
common(r, "exits on EOF")
t.ok(how(r["server"]) == "exit 0" and "TERM" not in r["log"],
     "exits on EOF: it ends by itself (status 0), no signal, and is reaped",
     "%s, log %r" % (how(r["server"]), r["log"]))

# 4. what the server writes to stderr after tokterm exited: drained by the reaper (no block,
# no broken pipe), never on tokterm's stderr
r = run("--linger 1 --stderr-after-eof 2")
common(r, "late stderr")
t.ok(how(r["server"]) == "exit 0" and "late stderr" not in r["err"],
     "late stderr: 2 MiB written after tokterm exited are drained (the server exits 0), "
     "none on tokterm's stderr", "%s, stderr %r" % (how(r["server"]), r["err"][-300:]))

# 5. -p with tools: the same hand-off when the scripted run ends
FIX = ttlib.tempdir("tt-mcp-exit-fix-")
with open(os.path.join(FIX, "call.sse"), "w") as f:
    for c in [{"delta": {"role": "assistant", "content": None}},
              {"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                         "function": {"name": "l__ok",
                                                      "arguments": '{"text": "x"}'}}]}},
              {"delta": {}, "finish_reason": "tool_calls"}]:
        c.setdefault("finish_reason", None)
        f.write("data: %s\n\n" % json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                              "model": "gpt-4o-mini",
                                              "choices": [dict(index=0, **c)]}))
    f.write("data: [DONE]\n\n")
with ttlib.FakeServer(extra_args=["--fixtures", FIX]) as fake:
    fake.queue(["replay=call.sse", "reply=done"])
    r = run("--linger 60", args=["--base-url", fake.base(), "--mcp", "l", "--allow-tool", "l.*",
                                 "--no-save", "-p", "use the tool"])
t.eq((r["rc"], r["out"].strip()), (0, "done"), "-p with tools: exit 0, the answer")
common(r, "-p with tools")
t.ok(how(r["server"]) == "signal 15", "-p with tools: the server gets SIGTERM after the grace",
     how(r["server"]))

# 6. the chat's quit
with ttlib.FakeServer() as fake:
    r = run("--linger 60", args=["--base-url", fake.base(), "--mcp", "l", "--no-save"], tty=True)
t.eq(r["rc"], 0, "the chat quits with Ctrl-D: exit 0")
common(r, "the chat's quit")
t.ok(how(r["server"]) == "signal 15" and r["server_end"] >= GRACE - 0.2,
     "the chat's quit: the server gets SIGTERM after the grace",
     "%s at %.2f s" % (how(r["server"]), r.get("server_end", 0)))

# the reaper is tokterm's own: run by hand, it says so and touches nothing
rc, out, err = ttlib.run_tokterm(["--reap", "1234", "2", "0"])
t.ok(rc == 2 and b"--reap is tokterm's own" in err, "tokterm --reap by hand: exit 2, a message",
     err)

sys.exit(t.done())
