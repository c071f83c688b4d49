"""Helpers for tokterm's end-to-end tests (Python 3 standard library only).

    import sys; sys.dont_write_bytecode = True   # keep __pycache__ out of the source tree
    import ttlib
    t = ttlib.Tap()
    with ttlib.FakeServer() as srv:
        rc, out, err = ttlib.run_tokterm(["--base-url", srv.base("reply=hi"), "-p", "x"])
        t.eq(rc, 0, "exit status")
        t.eq(srv.requests()[-1]["body"]["stream"], True, "asked for a stream")
    sys.exit(t.done())

Pieces: FakeServer (tests/fake-openai/server.py on a free port), run_tokterm (the binary in a
clean environment), Tap (TAP output for automake's tap-driver), Tmux (a private tmux server for
terminal tests).
"""

import atexit
import fcntl
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import struct
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


def srcdir():
    """The tests/ source directory: $srcdir when make check sets it, else next to this file."""
    d = os.environ.get("srcdir")
    if d and os.path.isdir(os.path.join(d, "fake-openai")):
        return os.path.abspath(d)
    return os.path.dirname(HERE)


def fixtures_dir():
    return os.path.join(srcdir(), "fixtures")


def server_script():
    return os.path.join(srcdir(), "fake-openai", "server.py")


_TEMPS = []


def _cleanup_temps():
    for d in _TEMPS:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup_temps)


def tempdir(prefix="tt-e2e-"):
    """A fresh temporary directory, removed when the test process exits."""
    d = tempfile.mkdtemp(prefix=prefix)
    _TEMPS.append(d)
    return d


def require_tools():
    """True when a missing tool must fail the tests instead of skipping them: under CI (CI set
    to anything but "", "0", "false" or "no") or with TOKTERM_REQUIRE_TOOLS=1."""
    def on(name):
        return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")
    return on("CI") or on("TOKTERM_REQUIRE_TOOLS")


# ---------------------------------------------------------------------------------------------
# TAP

class Tap:
    """One test point per assertion; done() prints the plan and returns the exit status."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def _line(self, s):
        sys.stdout.write(s + "\n")
        sys.stdout.flush()

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            self._line("# " + line)

    def ok(self, cond, name, diag=""):
        self.n += 1
        name = str(name).replace("#", "\\#").replace("\n", " ")
        self._line("%s %d - %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond:
            self.failed += 1
            if diag:
                self.diag(diag)
        return bool(cond)

    def eq(self, got, want, name):
        return self.ok(got == want, name, "got:  %r\nwant: %r" % (got, want))

    def skip(self, name, why, tool=None):
        """A skipped test point. tool: the program whose absence is the reason (e.g. "tmux");
        under CI (require_tools()) that is a failure, not a skip."""
        if tool and require_tools():
            self.ok(False, "%s: %s" % (name, why),
                    "%s is required when CI or TOKTERM_REQUIRE_TOOLS is set (.ci/packages "
                    "lists the Debian packages)" % tool)
            return
        self.n += 1
        self._line("ok %d - %s # SKIP %s" % (self.n, str(name).replace("#", "\\#"), why))

    def bail(self, why):
        self._line("Bail out! %s" % why)
        sys.exit(1)

    def done(self):
        self._line("1..%d" % self.n)
        return 1 if self.failed else 0


# ---------------------------------------------------------------------------------------------
# Fake server

class FakeServer:
    """Runs tests/fake-openai/server.py on a free loopback port with a log in a temp dir."""

    def __init__(self, default_spec="", startup_timeout=10.0, extra_args=()):
        self.default_spec = default_spec
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        self.dir = None
        self.log_path = None
        self.returncode = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self.dir = tempdir("tt-fake-")
        self.log_path = os.path.join(self.dir, "requests.jsonl")
        port_file = os.path.join(self.dir, "port")
        cmd = [sys.executable, server_script(), "--port", "0", "--port-file", port_file,
               "--log", self.log_path, "--fixtures", fixtures_dir()]
        if self.default_spec:
            cmd += ["--default-spec", self.default_spec]
        cmd += self.extra_args
        with open(os.path.join(self.dir, "stderr"), "wb") as errf:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("fake server exited with %s: %s"
                                   % (self.proc.returncode, self.stderr()))
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.port = int(f.read().strip())
                try:
                    if self.get("/_health")[0] == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("fake server did not start within %.0fs" % self.startup_timeout)

    def stop(self, timeout=5.0):
        """SIGTERM the server; returns its exit status (killed if it does not stop in time)."""
        if self.proc is None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        self.proc = None
        return self.returncode

    def stderr(self):
        try:
            with open(os.path.join(self.dir, "stderr"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def base(self, spec=""):
        """Base URL for a client: http://127.0.0.1:PORT/v1 or http://127.0.0.1:PORT/<spec>/v1."""
        if spec:
            return "http://127.0.0.1:%d/%s/v1" % (self.port, spec)
        return "http://127.0.0.1:%d/v1" % self.port

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def request(self, method, path, body=None, headers=None, timeout=10.0):
        """One request on a fresh connection: (status, headers dict lower-cased, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = None
            hdrs = dict(headers or {})
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body=body, **kw)

    def queue(self, specs):
        """Queue specs: the next chat requests use them in order instead of their URL spec."""
        status, _, body = self.post("/_queue", list(specs))
        if status != 200:
            raise RuntimeError("queue rejected: %s" % body.decode("utf-8", "replace"))
        return json.loads(body)["queued"]

    def clear_queue(self):
        self.request("DELETE", "/_queue")

    def requests(self, all=False):
        """Parsed log lines in arrival order: chat requests (chat completions, Anthropic
        messages, Gemini's generateContent, the Responses API) only, or every request."""
        out = []
        try:
            with open(self.log_path, encoding="utf-8") as f:
                for line in f:
                    # a line still being written has no newline yet: read it next time (a
                    # test that polled the log once met half a line)
                    if line.strip() and line.endswith("\n"):
                        out.append(json.loads(line))
        except FileNotFoundError:
            return []
        out.sort(key=lambda r: r["n"])
        if all:
            return out
        return [r for r in out if r["method"] == "POST"
                and urllib.parse.urlsplit(r["path"]).path.endswith((
                    "/chat/completions", "/messages", "/responses", ":streamGenerateContent",
                    ":generateContent"))]

    def raw_log(self):
        with open(self.log_path, "rb") as f:
            return f.read()


def sse_events(data):
    """Split an SSE body (bytes) into events: a list of {"event": name or None, "data": text}.

    Comments are skipped; an event's data lines are joined with newlines (WHATWG rules)."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events, lines, name = [], [], None
    for line in text.split("\n") + [""]:
        if line == "":
            if lines:
                events.append({"event": name, "data": "\n".join(lines)})
            lines, name = [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            lines.append(value)
        elif field == "event":
            name = value
    return events


def chunk_deltas(data):
    """The JSON chunks of an OpenAI stream body (bytes), without the final [DONE]."""
    return [json.loads(e["data"]) for e in sse_events(data) if e["data"] != "[DONE]"]


# ---------------------------------------------------------------------------------------------
# Running the binary

def tokterm_path():
    """$TOKTERM (set by make check), else src/tokterm of an in-tree or current build."""
    p = os.environ.get("TOKTERM")
    if p:
        return p
    for cand in (os.path.join(HERE, "..", "..", "src", "tokterm"),
                 os.path.join(os.getcwd(), "src", "tokterm")):
        if os.path.exists(cand):
            return os.path.abspath(cand)
    return os.path.abspath(os.path.join(HERE, "..", "..", "src", "tokterm"))


def built_with(*sanitizers):
    """Whether the tokterm under test was built with one of these sanitizers ("asan",
    "tsan"): its runtime's init function is in the binary. Such a build frees and joins
    everything at its exit (its leak checker) and takes more memory."""
    with open(tokterm_path(), "rb") as f:
        binary = f.read()
    return any(b"__%s_init" % s.encode() in binary for s in sanitizers)


# The libcurl builds tokterm tries, in order (net/curl_dl.c): Debian's GnuTLS one, then the one
# it was built against (libcurl4, OpenSSL). A test that takes libcurl away fakes both.
LIBCURL_SONAMES = ("libcurl-gnutls.so.4", "libcurl.so.4")


TEST_KEY = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"
PASS_VARS = ("PATH", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "MSAN_OPTIONS",
             "LD_LIBRARY_PATH")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tokterm_pid(tm):
    """The pid of tokterm in tm's pane: the descendant of the pane's shell that runs the
    binary or the chat program it execs (tokterm-tui beside it); None when there is none."""
    want = os.path.dirname(os.path.realpath(tokterm_path()))
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    todo = [int(tm.tmux("display-message", "-p", "-t", tm.target, "#{pane_pid}").strip())]
    while todo:
        pid = todo.pop()
        try:
            exe = os.path.realpath("/proc/%d/exe" % pid)
            if os.path.dirname(exe) == want and os.path.basename(exe).startswith("tokterm"):
                return pid
        except OSError:
            pass
        todo += kids.get(pid, [])
    return None


def children():
    """[(pid, state letter)] of the processes whose parent is this one (from /proc)."""
    me, res = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        if int(rest[1]) == me:
            res.append((int(d), rest[0]))
    return res


def adopt_orphans(wait=10.0):
    """Make this process the subreaper of what tokterm leaves when it exits (a stdio MCP
    server still being shut down and its reaper, `tokterm --reap`): they become its children,
    as they become init's otherwise, so a test sees when and how each ended (os.waitpid); at
    exit it waits up to `wait` seconds for the reapers and reaps what is left. Linux only;
    returns False where prctl is missing."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            return False
    except (OSError, AttributeError):
        return False

    def reap():
        end = time.monotonic() + wait
        while True:
            busy = False
            for pid, state in children():
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        reaper = b"--reap" in f.read().split(b"\0")
                except OSError:
                    reaper = False
                if state == "Z" or reaper:
                    try:
                        got, _ = os.waitpid(pid, os.WNOHANG)
                        busy |= got == 0
                    except ChildProcessError:
                        pass
            if not busy or time.monotonic() > end:
                return
            time.sleep(0.02)

    atexit.register(reap)
    return True


def proc_state(pid):
    """(command line bytes, comm, state letter) of a process from /proc, or None once gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read()
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        return cmd, stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def mid_exec(st):
    """True when proc_state `st` is a process in the middle of an exec: /proc/PID/cmdline
    reads empty from the moment exec replaces its memory until the new program's arguments are
    set up (vfork() gives the parent back at the start of that window, not its end). A zombie
    and a kernel thread read empty too; the first is told by its state, the second's comm is
    not a program of ours."""
    return st is not None and st[0] == b"" and st[2] != "Z"


# The byte of DB-shm on which a detached copy holds an exclusive open-file-description lock
# while it copies (STORE_SHM_DETACHED in src/store/db.c).
SHM_DETACHED = 129


def checkpoint_locked(db):
    """True while something holds the detached copy's lock on DB-shm: taken by the run that
    starts the copy before it starts it, and held by the copy from its first moment, before
    its exec (when its command line still reads as that run's), until it has started the WAL
    over."""
    try:
        fd = os.open(db + "-shm", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, SHM_DETACHED, 1, 0)
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, fl)
        return struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK
    finally:
        os.close(fd)


def checkpoint_running(db, settle=5.0):
    """True while a `tokterm --checkpoint DB` (the detached copy of a long run's WAL, started
    by its close) is running: it holds its lock (checkpoint_locked; an exiting run's copy
    shares that run's memory until its exec, so its command line is not yet its own), or its
    command line is that copy's (it lets the lock go once the WAL is started over, then copies
    what was left once more). A tokterm caught in the middle of an exec (mid_exec) may be
    becoming that copy, or any other run of another test: it is read again until its command
    line is set up (at most `settle` seconds, then it counts as the copy)."""
    if checkpoint_locked(db):
        return True
    want = b"--checkpoint\0" + os.fsencode(db) + b"\0"
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid, deadline = int(d), time.monotonic() + settle
        st = proc_state(pid)
        while mid_exec(st) and st[1].startswith("tokterm"):
            if time.monotonic() > deadline:
                return True
            time.sleep(0.002)
            st = proc_state(pid)
        if st is not None and want in st[0]:
            return True
    return False


def wait_checkpoints(db, timeout=30.0):
    """Wait until no `tokterm --checkpoint DB` runs; False if one still did after timeout."""
    deadline = time.monotonic() + timeout
    while checkpoint_running(db):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sgr_new():
    """The default style of a terminal cell, for sgr_apply and sgr_style."""
    return {"fg": "-", "bg": "-", "a": ""}


def sgr_apply(st, params):
    """Apply the parameters of one SGR sequence (what stands between ESC [ and m) to the
    style st (sgr_new): 256 colours, true colour, the 16 basic ones, and the attributes bold,
    dim, italic, underline, blink (k), reverse, hidden (h) and strike (s)."""
    p = [int(x) if x else 0 for x in re.split(r"[;:]", params or "0")]
    i = 0
    while i < len(p):
        c = p[i]
        if c == 0:
            st.update(fg="-", bg="-", a="")
        elif c in (38, 48) and i + 2 < len(p) and p[i + 1] == 5:
            st["fg" if c == 38 else "bg"] = str(p[i + 2])
            i += 2
        elif c in (38, 48) and i + 4 < len(p) and p[i + 1] == 2:
            st["fg" if c == 38 else "bg"] = "#%02x%02x%02x" % tuple(p[i + 2:i + 5])
            i += 4
        elif 30 <= c <= 37 or 90 <= c <= 97:
            st["fg"] = "c%d" % (c - 30 if c < 90 else c - 82)
        elif 40 <= c <= 47 or 100 <= c <= 107:
            st["bg"] = "c%d" % (c - 40 if c < 100 else c - 92)
        elif c == 39:
            st["fg"] = "-"
        elif c == 49:
            st["bg"] = "-"
        else:
            flag = {1: "b", 2: "d", 3: "i", 4: "u", 5: "k", 7: "r", 8: "h", 9: "s"}.get(c)
            off = {22: "bd", 23: "i", 24: "u", 25: "k", 27: "r", 28: "h", 29: "s"}.get(c)
            if flag and flag not in st["a"]:
                st["a"] = "".join(sorted(st["a"] + flag))
            elif off:
                st["a"] = "".join(ch for ch in st["a"] if ch not in off)
        i += 1


def sgr_style(st):
    """A style as "fg,bg" plus ",flags" when any (b d h i k r s u): "-" is the default
    colour."""
    return "%s,%s%s" % (st["fg"], st["bg"], ("," + st["a"]) if st["a"] else "")


def blank_shows(style):
    """What a blank in this style (sgr_style's "fg,bg[,flags]") shows: its background, and the
    only attributes that show on a blank (underline, reverse). curses may clear a blank whose
    other attributes are bold, dim, blink or italic (EL or ECH leave none), and keeps it as
    drawn, so how such a blank comes out depends on the frames before it."""
    f = style.split(",")
    flags = f[2] if len(f) > 2 else ""
    return (f[1], "u" in flags, "r" in flags)


def shown_cells(esc):
    """An escaped capture (capture-pane -e) as rows of what the eye sees: each character with
    its style, each blank with blank_shows; a row's trailing blanks on the default background
    are dropped. The style carries from row to row, as the capture writes it."""
    st = sgr_new()
    rows = []
    for line in esc.split("\n"):
        row = []
        for m in re.finditer(r"\x1b\[([0-9;:]*)m|([^\x1b])", line):
            if m.group(2) is None:
                sgr_apply(st, m.group(1))
            elif m.group(2) == " ":
                row.append(blank_shows(sgr_style(st)))
            else:
                row.append((m.group(2), sgr_style(st)))
        while row and row[-1] == ("-", False, False):
            row.pop()
        rows.append(row)
    return rows


def thp_mode():
    """The kernel's transparent huge page mode: always, madvise or never."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            s = f.read()
    except OSError:
        return "never"
    return s[s.find("[") + 1:s.find("]")] if "[" in s else "never"


def make_home():
    """A fresh directory for HOME and the XDG directories (removed at exit)."""
    return tempdir("tt-home-")


def copy_home(home):
    """A copy of home in a fresh directory (removed at exit), made once no detached checkpoint
    of its database runs. A run that wrote 256 KiB or more leaves one copying the WAL into the
    database; copied meanwhile, the files can be taken at different moments of it (the database
    half written, the WAL already started over), which SQLite cannot read as the database was:
    a README run's test_resume_pages.py once sent another request from such a copy."""
    wait_checkpoints(history_db(home))
    full = make_home()
    shutil.rmtree(full)
    shutil.copytree(home, full)
    return full


def write_config(home, text):
    """Write text as HOME's tokterm config (mode 0600, as tokterm wants it); returns the path."""
    d = os.path.join(home, ".config", "tokterm")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "config")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path



def write_jsonl(path, objs):
    """Write objs as JSON lines to path (a str is written as it is); returns path."""
    with open(path, "w", encoding="utf-8") as f:
        for o in objs:
            f.write((o if isinstance(o, str) else json.dumps(o)) + "\n")
    return path


def parse_jsonl(out):
    """Lines of bytes out as objects; None for a line that is not JSON."""
    res = []
    for line in out.decode("utf-8").split("\n")[:-1]:
        try:
            res.append(json.loads(line))
        except ValueError:
            res.append(None)
    return res


def wait_rusage(p, timeout):
    """Wait for Popen p (killed after timeout seconds); returns (status, rusage) of os.wait4."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            return status, ru
        if time.monotonic() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            return status, ru
        time.sleep(0.02)


def _communicate(p, stdin, timeout):
    """p.communicate(stdin); after timeout seconds its process group is killed and the code is
    124. Returns (code, out, err)."""
    try:
        out, err = p.communicate(stdin, timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        return 124, out, err

def clean_env(home=None, env=None):
    """The environment tokterm runs in: private HOME/XDG dirs, a test key, LC_ALL=C.UTF-8.

    env overrides it; a value of None removes the variable."""
    home = home or make_home()
    e = {k: os.environ[k] for k in PASS_VARS if k in os.environ}
    e.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    e.update({
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "OPENAI_API_KEY": TEST_KEY,
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    })
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


def run_tokterm(args, stdin=None, env=None, timeout=30, home=None, cwd=None):
    """Run tokterm with args; returns (exit code, stdout bytes, stderr bytes).

    stdin: bytes/str fed to the process (else /dev/null). home: reuse a directory from
    make_home() across runs (default: a fresh one). On timeout the process is killed and the
    exit code is 124, as timeout(1) reports it."""
    e = clean_env(home, env)
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    p = subprocess.Popen([tokterm_path()] + [str(a) for a in args], env=e, cwd=cwd,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    rc, out, err = _communicate(p, stdin, timeout)
    if rc == 124:
        err += b"\n[ttlib: killed after %gs timeout]\n" % timeout
    return rc, out, err


def run_requests(srv, home, args, env=None, spec="reply=Fine%20thanks.", timeout=120):
    """Run tokterm against srv (a FakeServer) with -m gpt-4o-mini and the store's and the
    tokenizer's debug lines on; returns (exit code, stderr, the bodies srv got meanwhile)."""
    e = {"OPENAI_BASE_URL": srv.base(spec), "TOKTERM_DEBUG_STORE": "1",
         "TOKTERM_DEBUG_TOKENIZED": "1"}
    e.update(env or {})
    n0 = len(srv.requests())
    rc, _out, err = run_tokterm(["-m", "gpt-4o-mini"] + args, env=e, home=home, timeout=timeout)
    return rc, err, [r["body"] for r in srv.requests()[n0:]]


def resumed(err):
    """(turns, "the newest" or "all") from a resume's TOKTERM_DEBUG_TOKENIZED line, or None."""
    m = re.search(rb"resumed (\d+) turns \((the newest|all)\)", err)
    return (int(m.group(1)), m.group(2).decode()) if m else None


def vm_steps(err):
    """The SQLite VM steps TOKTERM_DEBUG_STORE reports for the run, or None."""
    m = re.search(rb"store: (\d+) VM steps", err)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------
# Terminal safety: what tokterm writes must not be able to drive or mislead a terminal

BIDI_CONTROLS = frozenset(list(range(0x202A, 0x202F)) + list(range(0x2066, 0x206A)) +
                          [0x200E, 0x200F, 0x061C])


def _hazards(data, allow_escapes):
    """(offset, what) for each byte or character in data (bytes) that a terminal would obey:
    C0 controls but TAB and LF (but ESC, CR, BS, BEL too when allow_escapes: a curses program
    draws with them), DEL, C1 controls as UTF-8 (U+0080..U+009F), raw 8-bit C1 bytes
    (0x80..0x9F outside a valid UTF-8 sequence) and bidi controls (U+202A..U+202E,
    U+2066..U+2069, U+200E, U+200F, U+061C)."""
    out = []
    text = data.decode("utf-8", "surrogateescape")
    pos = 0  # byte offset of ch
    ok_c0 = (0x09, 0x0A) + ((0x1B, 0x0D, 0x08, 0x07, 0x0F, 0x0E) if allow_escapes else ())
    for ch in text:
        cp = ord(ch)
        what = None
        if cp < 0x20 and cp not in ok_c0:
            what = "C0 control 0x%02x" % cp
        elif cp == 0x7F:
            what = "DEL"
        elif 0x80 <= cp <= 0x9F:
            what = "C1 control U+%04X" % cp
        elif 0xDC80 <= cp <= 0xDC9F:
            what = "raw 8-bit C1 byte 0x%02x" % (cp - 0xDC00)
        elif cp in BIDI_CONTROLS:
            what = "bidi control U+%04X" % cp
        if what:
            out.append((pos, what))
        pos += 1 if 0xDC80 <= cp <= 0xDCFF else len(ch.encode("utf-8"))
    return out


def terminal_hazards(data):
    """Problems of text meant for a terminal (messages, scripted output): a list of
    "offset: what", empty when data (bytes) is safe. See _hazards."""
    return ["%d: %s" % h for h in _hazards(data, False)]


def safe_stderr(t, err, name):
    """One test point: err (bytes) holds nothing that can drive a terminal (terminal_hazards)."""
    bad = terminal_hazards(err)
    return t.ok(not bad, name + ": stderr holds no control, C1 or bidi character",
                "%s\n%r" % ("; ".join(bad[:8]), err[:300]))


# The introducers a curses program never needs, and that text from outside must never bring:
# OSC (title, clipboard OSC 52, hyperlink OSC 8, colours), DCS, SOS, PM, APC; RIS (ESC c).
_SEQ_NAMES = {"]": "OSC", "P": "DCS", "X": "SOS", "^": "PM", "_": "APC", "c": "RIS"}


def recording_hazards(data):
    """Problems in the bytes a curses program wrote to its terminal (a recording, see
    Tmux(record=True)): any OSC, DCS, SOS, PM, APC or RIS sequence, C1 controls (UTF-8 or raw),
    DEL, bidi controls and C0 controls other than those curses draws with. Empty when safe."""
    out = ["%d: %s" % h for h in _hazards(data, True)]
    for m in re.finditer(rb"\x1b([\]PX^_c])", data):
        out.append("%d: %s sequence %r" % (m.start(), _SEQ_NAMES[m.group(1).decode()],
                                            data[m.start():m.start() + 24]))
    return out


def _pty_pair(cols=80, rows=24):
    """A pseudo-terminal (master, slave) whose output is passed as is (no LF -> CRLF)."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return master, slave


def _drain(fd, sink):
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:  # EIO: every slave end is closed
            break
        if not b:
            break
        sink.append(b)


def run_tokterm_tty(args, stdin=None, env=None, timeout=30, home=None, ttys=(1,)):
    """Like run_tokterm, but the descriptors in ttys (1: stdout, 2: stderr) are a terminal
    (isatty() is true there); returns (exit code, stdout bytes, stderr bytes) with exactly the
    bytes tokterm wrote, terminal or pipe."""
    import threading
    e = clean_env(home, env)
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    ptys = {fd: _pty_pair() for fd in ttys}
    kw = {}
    for fd, name in ((1, "stdout"), (2, "stderr")):
        kw[name] = ptys[fd][1] if fd in ptys else subprocess.PIPE
    p = subprocess.Popen([tokterm_path()] + [str(a) for a in args], env=e,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         start_new_session=True, **kw)
    got = {1: [], 2: []}
    threads = []
    for fd, (master, slave) in ptys.items():
        os.close(slave)
        th = threading.Thread(target=_drain, args=(master, got[fd]), daemon=True)
        th.start()
        threads.append(th)
    rc, out, err = _communicate(p, stdin, timeout)
    for th in threads:
        th.join(5)
    for master, _ in ptys.values():
        os.close(master)
    out = b"".join(got[1]) if 1 in ptys else out
    err = b"".join(got[2]) if 2 in ptys else err
    if rc == 124:
        err += b"\n[ttlib: killed after %gs timeout]\n" % timeout
    return rc, out, err


# ---------------------------------------------------------------------------------------------
# tmux

def _executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def tmux_bin():
    """The tmux to use, or None: $TMUX_BIN (what configure found, as TMUX_PROG) when it names
    an executable, else tmux on PATH.

    Anything else in $TMUX_BIN (empty, or not a program: a build configured by an older
    configure.ac inside tmux got tmux's $TMUX, its socket path "/tmp/tmux-0/default,123,0")
    falls back to PATH, so the terminal tests are not skipped for want of a program that is
    installed."""
    b = os.environ.get("TMUX_BIN", "").strip()
    if b:
        found = shutil.which(b) if os.sep not in b else (b if _executable(b) else None)
        if found:
            return found
    return shutil.which("tmux")


class Tmux:
    """A private tmux server (tmux -L NAME -f /dev/null) with one window of width x height.

    with Tmux(80, 24) as tm:
        tm.run([tokterm_path()], clean_env())
        tm.wait_for("> ", 5); tm.send("hello", "Enter"); print(tm.capture())
    Check Tmux.available() first and t.skip(..., tool="tmux") when it is False."""

    _seq = 0

    @staticmethod
    def available():
        return tmux_bin() is not None

    def __init__(self, width=80, height=24, term="xterm-256color", record=False):
        """record: keep every byte the program writes to its terminal (tmux pipe-pane -O,
        before tmux interprets them); recording() returns them. A capture cannot show an
        injected escape sequence: tmux has already obeyed or dropped it."""
        self.width, self.height, self.term = width, height, term
        self.record = record
        self.record_file = None
        self.bin = tmux_bin()
        Tmux._seq += 1
        self.name = "tt-%d-%d" % (os.getpid(), Tmux._seq)
        self.target = "tt:0.0"
        self.status_file = None
        self.started = False

    def __enter__(self):
        if self.bin is None:
            raise RuntimeError("tmux is not available (check Tmux.available())")
        return self

    def __exit__(self, *exc):
        self.kill()
        return False

    def tmux(self, *args, check=True, env=None):
        """Run one tmux command on the private socket; returns its stdout as text."""
        e = env if env is not None else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        e = dict(e)
        e.pop("TMUX", None)
        e.setdefault("TERM", self.term)
        r = subprocess.run([self.bin, "-L", self.name, "-f", "/dev/null"] + list(args),
                           env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError("tmux %s: %s" % (args[0], r.stderr.decode(errors="replace")))
        return r.stdout.decode("utf-8", "replace")

    def run_chat(self, stderr, env=None, args=(), home=None, wait=True):
        """Start tokterm (the chat) with args and env over clean_env(home), its stderr (nothing,
        unless a sanitizer reports) appended to the file stderr; wait for its status bar ("F1
        help", 10 s) and return the screen, or None (wait=False: at once)."""
        e = dict(env or {})
        e["TT_TEST_STDERR"] = stderr
        self.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', tokterm_path()] +
                 list(args), clean_env(home, e))
        return self.wait_for(re.compile("F1 help"), 10) if wait else None

    def run(self, cmd, env=None):
        """Start cmd (a list of argv or a shell string) in the window, with environment env."""
        if self.started:
            raise RuntimeError("Tmux.run called twice")
        env = dict(env if env is not None else clean_env())
        env["TERM"] = self.term
        if isinstance(cmd, str):
            cmd = ["sh", "-c", cmd]
        # tmux 3.3 sometimes marks a pane dead without ever filling #{pane_dead_status}, so a
        # wrapper shell records the status in a file. It traps INT/QUIT with a command (not
        # ignore), so the program still gets default signal handling and C-c reaches only it.
        self.status_file = os.path.join(tempdir("tt-tmux-"), "status")
        cmd = "trap : INT QUIT; %s; st=$?; echo $st > %s; exit $st" % (
            " ".join(_shquote(c) for c in cmd), _shquote(self.status_file))
        if self.record:
            # The program starts once the pipe is there, so the recording has its first byte.
            d = os.path.dirname(self.status_file)
            self.record_file = os.path.join(d, "output")
            ready = os.path.join(d, "recording")
            cmd = "while [ ! -e %s ]; do sleep 0.02; done; %s" % (_shquote(ready), cmd)
        setenv = []
        for k, v in sorted(env.items()):
            setenv += ["-e", "%s=%s" % (k, v)]
        self.tmux("start-server", ";",
                  "set", "-g", "remain-on-exit", "on", ";",
                  "set", "-g", "remain-on-exit-format", "", ";",
                  "set", "-g", "status", "off", ";",
                  "set", "-g", "escape-time", "0", ";",
                  "set", "-g", "default-terminal", self.term, ";",
                  "new-session", "-d", "-s", "tt", "-x", str(self.width), "-y", str(self.height),
                  *setenv, cmd, env=env)
        self.started = True
        if self.record:
            self.tmux("pipe-pane", "-O", "-t", self.target, "touch %s; exec cat >> %s" % (
                _shquote(ready), _shquote(self.record_file)))

    def recording(self, settle=0.2, want=None, timeout=10.0):
        """Every byte the program has written to the terminal so far (Tmux(record=True)).
        tmux copies them to the file through a pipe of its own, which lags on a loaded machine
        (a CI run under ASan once read 1,970 bytes of an answer already on the screen): with
        want (bytes), waits up to timeout seconds for them to be in the file; either way, past
        settle seconds, until the file stops growing for settle seconds."""
        deadline = time.monotonic() + timeout
        time.sleep(settle)
        data = b""
        while True:
            with open(self.record_file, "rb") as f:
                data = f.read()
            if time.monotonic() >= deadline:
                return data
            if want is not None and want not in data:
                time.sleep(0.05)
                continue
            time.sleep(settle)
            if os.path.getsize(self.record_file) == len(data):
                return data

    def send(self, *keys):
        """send-keys: tmux key names ("Enter", "C-c", "Up") or text words."""
        self.tmux("send-keys", "-t", self.target, *keys)

    def send_text(self, text):
        """Type text literally (no key-name lookup)."""
        self.tmux("send-keys", "-t", self.target, "-l", text)

    def resize(self, width, height):
        self.width, self.height = width, height
        self.tmux("resize-window", "-t", "tt", "-x", str(width), "-y", str(height))

    def capture(self, escapes=False):
        """The visible screen as text (capture-pane -p), one line per row."""
        args = ["capture-pane", "-p", "-t", self.target]
        if escapes:
            args.append("-e")
        return self.tmux(*args)

    def wait_for(self, pattern, timeout=5.0):
        """Poll the screen until pattern (a substring or a compiled regex) appears.

        Returns the screen text, or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.capture()
            found = pattern.search(screen) if isinstance(pattern, re.Pattern) else pattern in screen
            if found:
                return screen
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def ask(self, cmd, env, prompt, timeout=30.0):
        """Start the chat cmd, send prompt once it is up and wait for the answer's end (its
        check mark): None, or the screen as it was when a wait ran out."""
        self.run(cmd, env)
        if self.wait_for(re.compile("F1|\u203a"), 10) is None:
            return self.capture()
        self.send_text(prompt)
        self.send("Enter")
        if self.wait_for("\u2713", timeout) is None:
            return self.capture()
        return None

    def dead(self):
        """None while the program runs, else its exit status as a shell reports it (128+N
        when killed by signal N)."""
        out = self.tmux("display-message", "-p", "-t", self.target,
                        "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}",
                        check=False).strip().split(":")
        if len(out) == 3 and out[0] == "1":
            try:
                with open(self.status_file) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                pass
            if out[1].isdigit():
                return int(out[1])
            if out[2].isdigit():
                return 128 + int(out[2])
        return None  # running, or dead before tmux collected the status

    def wait_exit(self, timeout=5.0):
        """Wait for the program to end; returns its exit status or None on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.dead()
            if st is not None:
                return st
            time.sleep(0.05)
        return None

    def kill(self):
        if self.bin:
            self.tmux("kill-server", check=False)
        self.started = False


def _shquote(s):
    s = str(s)
    if s and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


# --- long conversations written as a script would (test_history_scale, test_lean_resume) ---

HISTORY_WORDS = ["river", "stone", "lamp", "orange", "quiet", "window", "paper", "engine",
                 "cloud", "garden", "silver", "harbour", "seven", "copper", "meadow", "lantern"]


def history_text(i, words):
    """'Message i: ' and words words of a fixed pool (the number finds the message again)."""
    return "Message %d: " % i + " ".join(
        HISTORY_WORDS[(i * 5 + k * 7 + k // 3) % len(HISTORY_WORDS)] for k in range(words))


def history_db(home):
    """The database of a HOME made by make_home()."""
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


def history_add_turns(db, turns, words, start, conv=None):
    """Append turns (prompt + answer) to conversation conv (None: the newest) of db with
    Python's sqlite3, each row linked to its parent as tokterm links it, without token counts.
    A run before it may have left a `tokterm --checkpoint` copying its WAL, which holds the
    write lock while it copies: waited for first (a README run, with another beside it, saw
    Python's 5 s of waiting end in "database is locked")."""
    import sqlite3
    wait_checkpoints(db)
    c = sqlite3.connect(db, timeout=60)
    if conv is None:
        conv, = c.execute("SELECT max(id) FROM conversations").fetchone()
    head, = c.execute("SELECT head_id FROM conversations WHERE id = ?", (conv,)).fetchone()
    nid, = c.execute("SELECT max(id) + 1 FROM messages").fetchone()
    rows, now = [], int(time.time())
    for i in range(turns):
        u, a = nid + 2 * i, nid + 2 * i + 1
        rows.append((u, conv, "user", now, "gpt-4o-mini", history_text(start + 2 * i, words),
                     head))
        rows.append((a, conv, "assistant", now, "gpt-4o-mini",
                     history_text(start + 2 * i + 1, words), u))
        head = u
    c.execute("BEGIN")
    c.executemany("INSERT INTO messages(id, conversation_id, role, created, model, content, "
                  "parent_id) VALUES(?, ?, ?, ?, ?, ?, ?)", rows)
    c.execute("UPDATE conversations SET head_id = ? WHERE id = ?", (head, conv))
    c.commit()
    c.close()


def display_width(s):
    """Display width as a terminal counts it (wide East Asian characters are 2)."""
    import unicodedata
    w = 0
    for ch in s:
        if unicodedata.combining(ch) or ch in "\u200d\ufe0f":
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w


def italic_text(screen):
    """The characters of a capture(escapes=True) screen drawn in italics (SGR 3 .. 0/23),
    rows joined by newlines: follows the SGR state across rows as a terminal does."""
    out, italic, i = [], False, 0
    for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b])", screen):
        if m.group(2) is not None:
            ch = m.group(2)
            out.append(ch if italic or ch == "\n" else "")
            continue
        ps = [int(x) if x else 0 for x in m.group(1).split(";")]
        i = 0
        while i < len(ps):
            if ps[i] in (38, 48, 58):
                i += 3 if i + 1 < len(ps) and ps[i + 1] == 5 else 5
                continue
            if ps[i] == 0 or ps[i] == 23:
                italic = False
            elif ps[i] == 3:
                italic = True
            i += 1
    return "".join(out)


def quit_chat(tm):
    """End the chat in tm with Ctrl-D and wait for it to exit."""
    tm.send("C-d")
    tm.wait_exit(5)


def settle(tm, pause=0.3):
    """The screen once it has not changed for `pause` seconds (at most 3 s)."""
    last, deadline = None, time.monotonic() + 3
    while time.monotonic() < deadline:
        scr = tm.capture()
        if scr == last:
            return scr
        last = scr
        time.sleep(pause)
    return last


def status_bar(screen):
    """The status bar of a chat screen: the row naming "F1 help"."""
    rows = [ln for ln in (screen or "").splitlines() if "F1 help" in ln]
    return rows[-1] if rows else ""


def chat_turn(t, srv, label, cmd, env, prompt, answer, path, reasoning=None, session=None,
              size=(120, 24)):
    """The chat of one dialect in tmux, one turn: opens, PROMPT sent, ANSWER shown, one request
    whose path ends with PATH, a status bar with latency (ttft, total), context (ctx N/M) and
    spend ($), and, when REASONING is given, that text in the reasoning style (italic, behind
    the ┊ gutter); with SESSION, the session's tokens as the server's usage counted them
    ("session N tok"). Checks are named "LABEL chat: ...". Returns the screen (or None)."""
    if not Tmux.available():
        t.skip(label + " chat in tmux", "tmux is not installed", tool="tmux")
        return None
    with Tmux(*size) as tm:
        tm.run(cmd, clean_env(env=env))
        t.ok(tm.wait_for(re.compile("F1|\u203a"), 10) is not None, label + " chat: opens",
             tm.capture())
        n0 = len(srv.requests())
        tm.send_text(prompt)
        tm.send("Enter")
        # the status bar is drawn after the end mark (a row of its own): wait for its spend
        done = tm.wait_for(re.compile(r"\u2713[\s\S]*\$\d+\.\d*[1-9]"), 15)
        t.ok(done is not None and answer in done.split(prompt, 1)[-1],
             label + " chat: the answer appears", done or tm.capture())
        made = srv.requests()[n0:]
        t.ok(len(made) == 1 and made[0]["path"].split("?")[0].endswith(path),
             label + " chat: one request to " + path, [r["path"] for r in made])
        st = status_bar(done)
        t.ok(re.search(r"ttft \d+(\.\d+)?m?s total \d+(\.\d+)?m?s", st) is not None,
             label + " chat: the status bar shows the latency", st)
        t.ok(re.search(r"ctx ~?[1-9][\d.]*k?/\d", st) is not None,
             label + " chat: the status bar shows the context used", st)
        t.ok(re.search(r"\$\d+\.\d*[1-9]", st) is not None,
             label + " chat: the status bar shows the spend", st)
        if session is not None:
            t.ok("session %d tok" % session in st,
                 label + " chat: the session's tokens from the server's usage", st)
        if reasoning is not None:
            it = italic_text(tm.capture(escapes=True))
            t.ok("\u250a " + reasoning in it,
                 label + " chat: the reasoning in the reasoning style (italic, behind ┊)", it)
        return done
