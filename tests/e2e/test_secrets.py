#!/usr/bin/env python3
"""Secrets and the config file (#13 items 3, 4, 5, 16): api_key_cmd runs only from a file no one
else can change; it is bounded in time, its whole process group killed; no core file; a server
that echoes part of the key gets it starred on stderr and in the database; config mistakes
(missing --config file, a malformed base URL, a missing profile, a BOM, duplicates, typos) get
exit 2 or a warning with a clear message. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import base64  # noqa: E402
import http.server  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pty  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY
ROOT = os.geteuid() == 0


def home_with(config, mode=0o600, dirmode=None):
    """A fresh HOME whose config file holds config (text), with the given modes."""
    home = ttlib.make_home()
    d = os.path.join(home, ".config", "tokterm")
    os.makedirs(d)
    path = os.path.join(d, "config")
    with open(path, "w") as f:
        f.write(config)
    os.chmod(path, mode)
    if dirmode is not None:
        os.chmod(d, dirmode)
    return home, path


def timed(args, **kw):
    t0 = time.monotonic()
    rc, out, err = ttlib.run_tokterm(args, **kw)
    return rc, out, err.decode("utf-8", "replace"), time.monotonic() - t0


def gone(pid, wait=2.0):
    """True when process pid has ended (gone, or a zombie nobody reaped yet)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    return True
        except OSError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


with ttlib.FakeServer() as srv:
    env = {"OPENAI_BASE_URL": srv.base(), "OPENAI_API_KEY": None}  # the key from the command
    env_key = {"OPENAI_BASE_URL": srv.base()}                         # the test key

    # ---- 3: api_key_cmd only from a file no one else can change ---------------------------
    def cmd_config(marker, extra=""):
        return ("base_url = %s\napi_key_cmd = touch %s; echo sk-from-the-command-1234\n%s"
                % (srv.base(), marker, extra))

    for mode, name in ((0o666, "writable by every user (666)"),
                       (0o620, "writable by its group (620)")):
        home, path = home_with("", 0o600)
        marker = os.path.join(home, "ran")
        with open(path, "w") as f:
            f.write(cmd_config(marker))
        os.chmod(path, mode)
        rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
        t.eq(rc, 2, "config %s with api_key_cmd: exit 2" % name)
        t.ok(("chmod go-w %s" % path) in err and "api_key_cmd is not run" in err,
             "... the message names the file and the fix", err)
        t.ok(not os.path.exists(marker), "... and the command did not run")
        rc, out, err2, _ = timed(["ls"], home=home, env=env)
        t.eq(rc, 2, "... the same config for ls: refused too (exit 2)")

    home, path = home_with("", 0o600)
    marker = os.path.join(home, "ran")
    with open(path, "w") as f:
        f.write("base_url = %s\nkeys = env:NOPE_A, cmd:touch %s; echo sk-k\n" % (srv.base(), marker))
    os.chmod(path, 0o666)
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 2 and "chmod go-w" in err and not os.path.exists(marker),
         "a cmd: key in a 666 file: refused, not run", err)

    home, path = home_with("", 0o600)
    marker = os.path.join(home, "ran")
    with open(path, "w") as f:
        f.write(cmd_config(marker))
    d = os.path.dirname(path)
    os.chmod(d, 0o777)
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 2 and ("%s is writable by every user" % d) in err and
         ("chmod go-w %s" % d) in err and not os.path.exists(marker),
         "a directory others can write (777): refused, the directory and its fix named", err)
    os.chmod(d, 0o1777)
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 0 and os.path.exists(marker), "the same directory with the sticky bit: runs", err)
    os.chmod(d, 0o700)

    if ROOT:
        home, path = home_with("", 0o600)
        marker = os.path.join(home, "ran")
        with open(path, "w") as f:
            f.write(cmd_config(marker))
        os.chown(path, 65534, -1)
        rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
        t.ok(rc == 2 and "belongs to uid 65534" in err and ("chown 0 %s" % path) in err and
             not os.path.exists(marker), "a file another user owns (uid 65534): refused", err)
    else:
        t.skip("a file another user owns: refused", "needs root to give a file away")

    home, path = home_with("", 0o600)
    marker = os.path.join(home, "ran")
    with open(path, "w") as f:
        f.write(cmd_config(marker))
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 0 and os.path.exists(marker), "mode 600, the user's own: the command runs", err)
    auth = srv.requests()[-1]["headers"].get("authorization")
    t.eq(auth, "<redacted len=%d>" % len("Bearer sk-from-the-command-1234"),
         "... and its key is sent")
    home, path = home_with("base_url = %s\napi_key = %s\n" % (srv.base(), KEY), 0o644)
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 0 and "holds an API key and other users can read it" in err,
         "a key in a 644 file: still the warning", err)
    # the other secrets a config may hold in the clear (until 2026-12 only api_key was warned
    # about): a state URL's password, an [mcp] header or env value whose name says secret
    for text, what in (("state = redis://default:REDISPASS42@127.0.0.1:1/0\n",
                        "a password (state)"),
                       ("[mcp h]\nurl = http://127.0.0.1:1/x\nheaders = Accept: application/json;"
                        " Authorization: Bearer mcp-LITERAL\n", "a header's secret ([mcp])"),
                       ("[mcp s]\ncommand = true\nenv = GITHUB_TOKEN=ghp_literal1234 PATH=/bin\n",
                        "an env secret ([mcp])")):
        home, path = home_with("base_url = %s\n%s" % (srv.base(), text), 0o644)
        rc, out, err, _ = timed(["doctor", "--offline"], home=home, env=env_key)
        t.ok("holds %s and others can read it (mode 644)" % what in out.decode(),
             "a 644 config with %s: doctor fails its perms" % what, out.decode())
    home, path = home_with("base_url = %s\n[mcp h]\nurl = http://127.0.0.1:1/x\nheaders = "
                           "Authorization: Bearer $TOK; X-Api-Key: {key}\n[mcp e]\ncommand = "
                           "true\nenv = PATH=/bin TOKEN= HOME=/x\n" % srv.base(), 0o644)
    rc, out, err, _ = timed(["doctor", "--offline"], home=home, env=env_key)
    t.ok("others can read it" not in out.decode() and "ok    config perms" in out.decode(),
         "secrets from variables ($TOK, {key}) and a plain env: no warning", out.decode())
    home, path = home_with("base_url = %s\n" % srv.base(), 0o666)
    rc, out, err, _ = timed(["-p", "hi"], home=home, env={"OPENAI_BASE_URL": None})
    t.ok(rc == 0 and ("chmod go-w %s" % path) in err,
         "no command in a 666 file: runs, with a warning and the fix", err)

    # ---- 4: api_key_cmd is bounded; its process group is killed ---------------------------
    for cmd, name in (("sleep 300", "sleep 300"),
                      ("sh -c 'sleep 300 & echo sk-from-a-child'",
                       "a child that keeps the pipe (sh -c 'sleep 300 & echo key')")):
        home, path = home_with("", 0o600)
        pidfile = os.path.join(home, "pid")
        with open(path, "w") as f:
            f.write("key_cmd_timeout = 1\napi_key_cmd = sh -c 'echo $$ >%s; exec sleep 301' & %s\n"
                    % (pidfile, cmd))
        rc, out, err, dt = timed(["-p", "hi"], home=home, env=env, timeout=60)
        t.eq(rc, 2, "%s, key_cmd_timeout = 1: exit 2" % name)
        t.ok(dt < 4, "... after %.1f s (limit 1 s, then 0.5 s of grace)" % dt)
        t.ok("api_key_cmd did not finish in 1 s (killed)" in err and "key_cmd_timeout" in err,
             "... and says so", err)
        pid = read_pid(pidfile)
        t.ok(pid and gone(pid), "... the command's process group is gone (pid %d)" % pid)
    home, path = home_with("api_key_cmd = sleep 300\n", 0o600)
    rc, out, err, dt = timed(["-p", "hi"], home=home, env=env, timeout=60)
    t.ok(rc == 2 and 9.5 < dt < 13 and "did not finish in 10 s (killed)" in err,
         "the default limit: 10 s (took %.1f s)" % dt, err)

    # a signal to tokterm while the command runs ends the command's group too (until 2026-12
    # SIGTERM and SIGHUP killed tokterm and left the command running)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        home, path = home_with("", 0o600)
        pidfile = os.path.join(home, "pid")
        with open(path, "w") as f:
            f.write("key_cmd_timeout = 60\napi_key_cmd = sh -c 'echo $$ >%s; exec sleep 302'\n"
                    % pidfile)
        # the signals as a terminal's shell leaves them: a run under nohup (SIGHUP ignored) or
        # started with & (SIGINT ignored) passes that on, and tokterm rightly keeps it so
        p = subprocess.Popen([ttlib.tokterm_path(), "-p", "hi"], env=ttlib.clean_env(home, env),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=lambda: [
                                 signal.signal(s, signal.SIG_DFL) for s in
                                 (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)])
        deadline = time.monotonic() + 10
        while not read_pid(pidfile) and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = read_pid(pidfile)
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        p.stdout.close()
        p.stderr.close()
        t.ok(rc == -sig and pid and gone(pid),
             "%s while api_key_cmd runs: tokterm ends by it (%s) and the command's group is "
             "gone (pid %d)" % (signal.Signals(sig).name, rc, pid))
        if pid and not gone(pid, 0):
            os.kill(pid, signal.SIGKILL)

    # a command that asks on the terminal gets it: its group is the foreground job there
    home, path = home_with("key_cmd_timeout = 8\napi_key_cmd = printf 'passphrase? ' >/dev/tty; "
                           "read -r k </dev/tty; echo \"$k\"\n", 0o600)
    e = ttlib.clean_env(home, env)
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(ttlib.tokterm_path(), [ttlib.tokterm_path(), "--incognito", "-p", "hi"], e)
    seen = b""
    deadline = time.monotonic() + 20
    typed = False
    status = None
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            seen += chunk
        if not typed and b"passphrase? " in seen:
            os.write(fd, b"sk-typed-at-the-prompt-99\n")
            typed = True
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)
    t.ok(typed and status is not None and os.waitstatus_to_exitcode(status) == 0,
         "api_key_cmd reads a passphrase from the terminal: it is asked and answered",
         seen.decode("utf-8", "replace"))
    auth = srv.requests()[-1]["headers"].get("authorization")
    t.eq(auth, "<redacted len=%d>" % len("Bearer sk-typed-at-the-prompt-99"),
         "... the typed key is the one sent")

    # ---- 5: a key echoed in part is starred everywhere -------------------------------------
    home = ttlib.make_home()
    pieces = [("the key minus its last character", KEY[:-1]),
              ("the key minus its first character", KEY[1:]),
              ("a middle slice of 12", KEY[10:22])]
    for name, piece in pieces:
        srv.queue(["status=401,error=" + urllib.parse.quote("Incorrect API key provided: %s." % piece)])
        rc, out, err, _ = timed(["-p", "hi %s" % name], home=home, env={"OPENAI_BASE_URL": srv.base()})
        t.ok(rc == 3 and piece not in err and "*" * len(piece) in err,
             "server echoes %s: starred on stderr" % name, err)
    for name, piece in pieces:
        srv.queue(["status=400,error=" + urllib.parse.quote("bad request for %s" % piece)])
    rc, out, err, _ = timed(["batch", "-"], home=home, env={"OPENAI_BASE_URL": srv.base()},
                            stdin="".join('{"id": %d, "prompt": "p%d"}\n' % (i, i)
                                          for i in range(3)))
    srv.clear_queue()
    t.ok(rc == 3 and out.count(b'"error"') == 3 and b"*" * 12 in out and
         all(p not in err and p.encode() not in out for _, p in pieces),
         "batch: three failed lines, the echoes starred", out.decode("utf-8", "replace") + err)
    ddir = os.path.join(home, ".local", "share", "tokterm")
    leaks = []
    for fname in sorted(os.listdir(ddir)):
        with open(os.path.join(ddir, fname), "rb") as f:
            data = f.read()
        for i in range(len(KEY) - 7):
            if KEY[i:i + 8].encode() in data:
                leaks.append("%s holds %r" % (fname, KEY[i:i + 8]))
                break
    t.ok(not leaks, "no 8 characters of the key in any file of the data directory (%s)"
         % ", ".join(sorted(os.listdir(ddir))), "\n".join(leaks))

    # ---- 5: no core file, not dumpable -------------------------------------------------------
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    t.diag("core_pattern: %r" % pattern)
    work = ttlib.tempdir("tt-core-")
    os.chmod(work, 0o777)
    as_user = 65534 if ROOT else None

    def start(argv):
        def pre():
            # SIGQUIT as the kernel's default: a shell's background list (`cmd &` without job
            # control) starts its children with SIGINT and SIGQUIT ignored, and an ignored
            # SIGQUIT makes no core, for sleep and tokterm alike (the check would be skipped)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGQUIT})
            resource.setrlimit(resource.RLIMIT_CORE,
                               (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            if as_user is not None:
                os.setgid(65534)
                os.setuid(as_user)
        return subprocess.Popen(argv, cwd=work, env=ttlib.clean_env(work), preexec_fn=pre,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def quit_and_wait(p):
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGQUIT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, st = os.waitpid(p.pid, os.WNOHANG)
            if pid:
                p.returncode = 0  # reaped here; keep Popen from waiting
                return st
            time.sleep(0.05)
        p.kill()
        return None

    control = start(["sleep", "30"])
    st = quit_and_wait(control)
    control_dumps = st is not None and os.WCOREDUMP(st)
    t.diag("control: sleep under ulimit -c unlimited %s a core on SIGQUIT"
           % ("dumps" if control_dumps else "does not dump"))
    tui = os.path.join(os.path.dirname(ttlib.tokterm_path()), "tokterm-tui")
    for prog in (ttlib.tokterm_path(), tui):
        name = os.path.basename(prog)
        if not os.path.exists(prog):
            t.skip("%s: no core" % name, "not built")
            continue
        before = set(os.listdir(work))
        p = start([prog, "count"])  # waits for stdin, which stays open
        time.sleep(0.3)
        with open("/proc/%d/limits" % p.pid) as f:
            limits = [ln for ln in f if ln.startswith("Max core file size")]
        st_owner = os.stat("/proc/%d/status" % p.pid).st_uid
        with open("/proc/%d/status" % p.pid) as f:
            uid = int([ln for ln in f if ln.startswith("Uid:")][0].split()[1])
        t.ok(limits and limits[0].split()[4:6] == ["0", "0"],
             "%s: RLIMIT_CORE is 0 though the shell allowed unlimited" % name, limits)
        t.ok(uid != 0 and st_owner == 0,
             "%s: not dumpable (/proc/PID/status is root's, the process runs as uid %d)"
             % (name, uid))
        st = quit_and_wait(p)
        p.stdin.close()
        new = sorted(set(os.listdir(work)) - before)
        if control_dumps:
            t.ok(st is not None and not os.WCOREDUMP(st) and not new,
                 "%s: SIGQUIT under ulimit -c unlimited writes no core" % name, new)
        else:
            t.skip("%s: SIGQUIT writes no core" % name,
                   "this machine writes no core even for sleep (core_pattern %r)" % pattern)

    # ---- 16: config mistakes -------------------------------------------------------------------
    rc, out, err, _ = timed(["--config", "/nonexistent/tokterm.conf", "-p", "hi"], env=env)
    t.ok(rc == 2 and "/nonexistent/tokterm.conf: no such file" in err,
         "--config FILE that does not exist: exit 2, named", err)
    rc, out, err, _ = timed(["-p", "hi"], env=env_key)
    t.eq(rc, 0, "the default config file missing: fine")
    for url in ("htp://x/v1", "api.example.com/v1", "http://exa mple.com/v1", "https:///v1"):
        home, path = home_with("base_url = %s\n" % url)
        rc, out, err, _ = timed(["-p", "hi"], home=home, env={"OPENAI_BASE_URL": None})
        t.ok(rc == 2 and ("%s:1: base_url must be an http:// or https:// URL" % path) in err,
             "base_url = %s: exit 2 with file, line and what is wrong" % url, err)
    rc, out, err, _ = timed(["-p", "hi"], env={"OPENAI_BASE_URL": "htp://x/v1"})
    t.ok(rc == 2 and "OPENAI_BASE_URL must be" in err, "OPENAI_BASE_URL=htp://x/v1: exit 2", err)
    rc, out, err, _ = timed(["--base-url", "htp://x/v1", "-p", "hi"], env=env)
    t.ok(rc == 2 and "base_url must be" in err, "--base-url htp://x/v1: exit 2", err)
    home, path = home_with("profile = nosuch\n[groq]\nmodel = a\n[local]\nmodel = b\n")
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env)
    t.ok(rc == 2 and "no profile 'nosuch' (the file defines [groq], [local])" in err,
         "profile = nosuch: the defined sections listed", err)
    home, path = home_with("\ufeffmodel = bom-model\nmodel = second\nmodle = x\n[p]\n[p]\n")
    rc, out, err, _ = timed(["-p", "hi"], home=home, env=env_key)
    t.eq(srv.requests()[-1]["body"].get("model"), "second",
         "a BOM hides no key; of two, the last one wins")
    t.ok("%s:2: duplicate key 'model' (first at line 1); the last one wins" % path in err,
         "a duplicate key: warned with both lines", err)
    t.ok("%s:5: duplicate section [p] (first at line 4)" % path in err,
         "a duplicate section: warned", err)
    t.ok("unknown option 'modle' ignored; did you mean 'model'?" in err,
         "an unknown key: did you mean", err)

    # ---- a key a server echoes in the stream's other fields (until 2026-12 only the message
    # was starred: as an error code it reached stderr, as the model the store and --json) ------
    class Echo(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            key = self.headers.get("Authorization", "").split(" ")[-1]
            if self.path.startswith("/err/"):
                events = [{"id": "c", "model": key, "choices": [{"index": 0, "delta": {
                    "content": "hi"}}]},
                          {"error": {"message": "failure for key " + key, "code": key}}]
            else:
                events = [{"id": "c", "model": key, "choices": [{"index": 0, "delta": {
                    "content": "hello"}, "finish_reason": None}]},
                          {"id": "c", "model": key, "choices": [{"index": 0, "delta": {},
                                                                 "finish_reason": key}]}]
            body = "".join("data: %s\n\n" % json.dumps(e) for e in events).encode()
            body += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    echo = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    home = ttlib.make_home()
    eurl = "http://127.0.0.1:%d" % echo.server_port
    rc, out, err, _ = timed(["--retries", "0", "--json", "-p", "hi"], home=home,
                            env={"OPENAI_BASE_URL": eurl + "/err/v1"})
    rc2, out2, err2, _ = timed(["--json", "-p", "hi"], home=home,
                               env={"OPENAI_BASE_URL": eurl + "/ok/v1"})
    saved = b""
    for root, _, files in os.walk(home):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                saved += fh.read()
    t.ok(rc == 3 and KEY not in err and KEY.encode() not in out and "failure for key" in err,
         "a key echoed as a mid-stream error's code: starred on stderr and in --json",
         err + out.decode("utf-8", "replace"))
    t.ok(rc2 == 0 and KEY.encode() not in out2 and b"hello" in out2 and KEY not in err2,
         "a key echoed as the model and the finish_reason: starred in --json",
         err2 + out2.decode("utf-8", "replace"))
    t.ok(len(saved) > 0 and KEY.encode() not in saved,
         "... and in nothing saved (the database, its WAL, the cache)")
    echo.shutdown()

    # ---- a proxy's credentials: a 407 page that echoes them, and an OTLP endpoint's (until
    # 2026-12 printed, saved in the answer's error and shown by doctor as they came) ----------
    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            n = int(self.headers.get("Content-Length", 0) or 0)
            if n:
                self.rfile.read(n)
            body = ("proxy denied: you sent %s" %
                    self.headers.get("Proxy-Authorization", "nothing")).encode()
            self.send_response(407)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_HEAD = answer

        def log_message(self, *a):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    home = ttlib.make_home()
    pw = "PROXYSECRET99"
    penv = {"http_proxy": "http://puser:%s@127.0.0.1:%d" % (pw, proxy.server_port),
            "no_proxy": None, "NO_PROXY": None, "OPENAI_BASE_URL": "http://192.0.2.1:9/v1"}
    # libcurl also takes the variable without a scheme (a review found that form unstarred)
    rc, out, err, _ = timed(["--retries", "0", "--incognito", "-p", "hi"], home=home,
                            env=dict(penv, http_proxy="puser:%s@127.0.0.1:%d"
                                     % (pw, proxy.server_port)))
    t.ok(rc != 0 and "407" in err and pw not in err and
         base64.b64encode(b"puser:" + pw.encode()).decode() not in err,
         "a proxy variable without a scheme: its credentials starred too", err)
    rc, out, err, _ = timed(["--retries", "0", "-p", "hi"], home=home, env=penv)
    rc2, out2, err2, _ = timed(["doctor"], home=home, env=penv)
    saved = b""
    for root, _, files in os.walk(home):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                saved += fh.read()
    b64 = base64.b64encode(b"puser:" + pw.encode()).decode()
    t.ok(rc != 0 and "407" in err and pw not in err and b64 not in err,
         "a 407 that echoes the proxy's Basic credentials: starred on stderr", err)
    t.ok("407" in out2.decode() and pw not in err2 + out2.decode() and b64 not in err2 + out2.decode(),
         "... and in doctor", out2.decode()[-800:] + err2)
    t.ok(pw.encode() not in saved and b64.encode() not in saved, "... and in the database")
    proxy.shutdown()
    oenv = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ou:OTELPASS77@127.0.0.1:9",
            "OPENAI_BASE_URL": srv.base()}
    rc, out, err, _ = timed(["--incognito", "-p", "hi"], env=oenv)
    t.ok(rc == 0 and "not exported to http://127.0.0.1:9/" in err and "OTELPASS77" not in err,
         "an OTLP endpoint's user:password: not in the warning", err)

# ---- no HOME and no passwd entry (a container's random uid): a private folder of its own,
# never one another user made (until 2026-12 the home was /tmp itself: /tmp/.config/tokterm's
# config was read, and the conversations went to /tmp/.local) -------------------------------
if not ROOT:
    t.skip("no HOME, no passwd entry", "needs root to run as a uid with no entry")
else:
    import glob  # noqa: E402
    import pwd  # noqa: E402
    uid = None
    for u in range(61000 + os.getpid() % 3000, 65000):
        try:
            pwd.getpwuid(u)
        except KeyError:
            uid = u
            break
    tmp = ttlib.tempdir("tt-nohome-")
    os.chmod(tmp, 0o1777)

    def as_nobody_run(srv, args):
        def pre():
            os.setgid(uid)
            os.setuid(uid)
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": tmp, "OPENAI_API_KEY": KEY,
               "OPENAI_BASE_URL": srv.base(), "LC_ALL": "C.UTF-8"}
        for k in ("TOKTERM_DATADIR", "TOKTERM_TUI", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                  "LSAN_OPTIONS", "TOKTERM_LIBCURL"):
            if k in os.environ:
                env[k] = os.environ[k]
        p = subprocess.run([ttlib.tokterm_path()] + args, env=env, preexec_fn=pre,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    with ttlib.FakeServer() as srv:
        planted = os.path.join(tmp, "tokterm-%d" % uid)
        os.makedirs(os.path.join(planted, ".config", "tokterm"))
        with open(os.path.join(planted, ".config", "tokterm", "config"), "w") as f:
            f.write("model = planted-model\n")
        rc, out, err = as_nobody_run(srv, ["-p", "hi"])
        body = (srv.requests() or [{}])[-1].get("body") or {}
        fresh = [d for d in glob.glob(planted + "-*") if os.path.isdir(d)]
        t.ok(rc == 0 and body.get("model") != "planted-model" and
             "is not this user's own private folder" in err and len(fresh) == 1 and
             glob.glob(os.path.join(fresh[0], ".local", "share", "tokterm", "*.db")),
             "no HOME, no passwd entry, a folder another user made: passed over for a fresh "
             "one, said (rc %d)" % rc, err + repr(body.get("model")) + repr(fresh))
        subprocess.run(["rm", "-rf", planted] + fresh)
        rc, out, err = as_nobody_run(srv, ["-p", "hi"])
        st = os.lstat(planted) if os.path.isdir(planted) else None
        t.ok(rc == 0 and st is not None and st.st_uid == uid and
             stat.S_IMODE(st.st_mode) == 0o700 and not err and
             glob.glob(os.path.join(planted, ".local", "share", "tokterm", "*.db")),
             "no HOME, no passwd entry: the conversation saved in TMPDIR/tokterm-UID, 0700",
             err + repr(st))

sys.exit(t.done())
