#!/usr/bin/env python3
"""The hostile input catalogue: the real binary against broken, hostile or odd servers, files
and databases. For each case: the exit status tokterm documents, a message that says what
happened (and what to do), nothing already received lost, bounded memory, no raw control or
escape byte from the input on stderr. Prints TAP.

The checks made with todo() were TODO points for core bugs this catalogue found (compressed
streams, json-labelled streams, messages without advice); those bugs are fixed, so they are
plain test points now.

HOSTILE_TABLE=FILE writes a Markdown table of what tokterm did in each case (for the docs)."""

import sys

sys.dont_write_bytecode = True

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pty  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
import zlib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
TABLE = []
MIB = 1 << 20
ASAN = ttlib.built_with("asan")
# Peak RSS allowed for the 100 MB line and the 10 MB delta (measured: 80 and 73 MiB plain, 182
# and 221 MiB with ASan's shadow memory and quarantine). Unbounded buffering of the 100 MB line
# would pass 200 MiB in a plain build.
RSS_LIMIT = 512 if ASAN else 192
BIG_UNIT = ("0123456789 abcdefghijklmnopqrstuvwxyz \u00e9\u4e2d ABCDEFGHIJKLMNOPQRS\n"
            .encode("utf-8"))  # as tests/fake-openai/server.py sends it for big_delta=


def q(text):
    return urllib.parse.quote(text, safe="")


def todo(cond, name, why, diag=""):
    """A test point for a bug found here and since fixed in the core (was a TAP TODO)."""
    return t.ok(cond, name, diag)


def run(args, env=None, home=None, stdin=None, timeout=60):
    """Run tokterm; returns (exit code, stdout, stderr)."""
    e = ttlib.clean_env(home, env)
    p = subprocess.Popen([ttlib.tokterm_path()] + [str(a) for a in args], env=e,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        err += b"\n[killed after %gs]\n" % timeout
    return p.returncode, out, err


def peak_rss(args, env=None, home=None, timeout=60):
    """Run tokterm with stdout/stderr to files; returns (exit code, stdout, stderr, peak RSS
    in MiB) with the RSS of exactly this child (wait4)."""
    d = ttlib.tempdir("tt-rss-")
    e = ttlib.clean_env(home, env)
    with open(os.path.join(d, "out"), "wb") as fo, open(os.path.join(d, "err"), "wb") as fe:
        p = subprocess.Popen([ttlib.tokterm_path()] + [str(a) for a in args], env=e,
                             stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
        status, ru = ttlib.wait_rusage(p, timeout)
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(os.path.join(d, "out"), "rb") as f:
        out = f.read()
    with open(os.path.join(d, "err"), "rb") as f:
        err = f.read()
    return p.returncode, out, err, ru.ru_maxrss / 1024.0


# the bidi controls a terminal obeys (they reorder what is shown): utf8_bidi_control()
BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)) | {0x200E, 0x200F, 0x061C}


def safe_stderr(err, name):
    """No byte of the input may drive the terminal through our messages: no C0 control but TAB
    and LF, no DEL, no C1 control (U+0080..U+009F, which some terminals obey as CSI, OSC, DCS),
    and valid UTF-8 (a stray byte could complete a C1 or an escape with what follows)."""
    bad = [b for b in err if (b < 0x20 and b not in (0x09, 0x0a)) or b == 0x7f]
    try:
        text = err.decode("utf-8")
    except UnicodeDecodeError as e:
        text, bad = "", bad + ["invalid UTF-8 at %d" % e.start]
    bad += ["U+%04X" % ord(c) for c in text if 0x80 <= ord(c) <= 0x9f or ord(c) in BIDI]
    t.ok(not bad, name + ": stderr holds no control/escape byte", "%r %r" % (bad[:5], err[:300]))


def clean_message(rc, err):
    """A message with nothing of the server's raw bytes: valid UTF-8, no U+FFFD (which would
    show that undecoded or binary bytes reached it), and no message at all for a success."""
    try:
        text = err.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return "\ufffd" not in text and (rc != 0 or text == "")


def need_tool(tool, name):
    """True when tool is on PATH; else a skip (a failure under CI: t.skip with tool)."""
    if shutil.which(tool):
        return True
    t.skip(name, "the %s tool is not installed" % tool, tool=tool)
    return False


def timed_run(args, env, timeout=120):
    """run() with the elapsed seconds: (rc, out, err, seconds)."""
    t0 = time.monotonic()
    rc, out, err = run(args, env, timeout=timeout)
    return rc, out, err, time.monotonic() - t0


def start(args, env):
    """Start tokterm (stdout and stderr to files); returns (process, out path, err path)."""
    d = ttlib.tempdir("tt-sig-")
    fo, fe = os.path.join(d, "out"), os.path.join(d, "err")
    with open(fo, "wb") as o, open(fe, "wb") as e:
        p = subprocess.Popen([ttlib.tokterm_path()] + [str(a) for a in args],
                             env=ttlib.clean_env(env=env), stdin=subprocess.DEVNULL, stdout=o,
                             stderr=e, start_new_session=True)
    return p, fo, fe


def wait_exit(p, timeout):
    """The exit status of p, or None when it did not end within timeout (then it is killed)."""
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def first_line(err):
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def record(case, rc, err, note=""):
    msg = first_line(err)
    if len(msg) > 160:
        msg = msg[:157] + "..."
    TABLE.append((case, rc, msg.replace("|", "\\|"), note))


class TlsServer:
    """tests/fake-openai/server.py over HTTPS (ttlib.FakeServer checks health over plain HTTP)."""

    def __init__(self, cert, key):
        self.dir = ttlib.tempdir("tt-tlssrv-")
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen([sys.executable, ttlib.server_script(), "--port", "0",
                                      "--port-file", port_file, "--tls-cert", cert,
                                      "--tls-key", key], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        self.port = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.port = int(f.read().strip())
                break
            time.sleep(0.02)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return False


def on_pty(env_extra, args):
    """Run tokterm with its stdout and stderr on a pseudo-terminal; returns (status, bytes)."""
    env = ttlib.clean_env(env=env_extra)
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(ttlib.tokterm_path(), [ttlib.tokterm_path()] + args, env)
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), buf


with ttlib.FakeServer() as srv:
    def base(spec):
        return {"OPENAI_BASE_URL": srv.base(spec)}

    # --- 0. the fake server's hostile answers are what they claim (checked without tokterm) -------
    def raw(spec, stream=True):
        return srv.post("/%s/v1/chat/completions" % spec,
                        {"messages": [{"role": "user", "content": "x"}], "stream": stream})

    st, hd, body = raw("reply=%s,encoding=gzip" % q("zipped text"))
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in
                   ttlib.chunk_deltas(zlib.decompress(body, 31)) if c.get("choices"))
    t.ok(hd.get("content-encoding") == "gzip" and text == "zipped text",
         "fake server: encoding=gzip is a valid gzip stream", repr(text))
    st, hd, body = raw("reply=whole,json=1,encoding=deflate", stream=False)
    t.ok(b'"content":"whole"' in zlib.decompress(body), "fake server: encoding=deflate (zlib)")
    curl = shutil.which("curl")
    if curl and b"brotli" in subprocess.run([curl, "-V"], capture_output=True).stdout:
        r = subprocess.run([curl, "-s", "--compressed", "-d", '{"stream":true}',
                            srv.url("/reply=%s,encoding=br/v1/chat/completions" % q("brotli!"))],
                           capture_output=True, timeout=30)
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in
                       ttlib.chunk_deltas(r.stdout) if c.get("choices"))
        t.ok(r.returncode == 0 and text == "brotli!",
             "fake server: encoding=br decodes with curl's brotli", repr(r.stdout[:200]))
    else:
        t.skip("fake server: encoding=br", "no curl with brotli", tool="curl with brotli")
    st, hd, body = raw("content_json=" + urllib.parse.quote_from_bytes(b'"a\xff\x00b"'))
    t.ok(b'"content":"a\xff\x00b"}' in body, "fake server: content_json bytes are sent verbatim")
    st, hd, body = raw("redirect=" + q("http://example.invalid/v1"))
    t.eq((st, hd.get("location")), (307, "http://example.invalid/v1"),
         "fake server: redirect= answers 307 with Location")

    # --- 1. a 100 MB SSE line without a newline -------------------------------------------------
    t0 = time.monotonic()
    rc, out, err, rss = peak_rss(["-p", "hi"], base("huge_line=%d" % (100 * 1000 * 1000)))
    took = time.monotonic() - t0
    t.eq(rc, 3, "100 MB line: exit 3 (unusable stream)")
    t.ok(b"line longer than the limit" in err, "100 MB line: says the line is too long",
         err.decode(errors="replace"))
    t.eq(out, b"before the flood \n", "100 MB line: the text before it is kept")
    t.ok(b"partial answer above is kept" in err, "100 MB line: says the partial answer is kept")
    t.ok(rss < RSS_LIMIT, "100 MB line: memory stays bounded (peak %.0f MiB < %d)"
         % (rss, RSS_LIMIT))
    t.ok(took < 30, "100 MB line: ends promptly (%.1f s)" % took)
    todo(b"try again" in err or b"provider" in err,
         "100 MB line: says what to do", "net.c composes this message without advice",
         err.decode(errors="replace"))
    safe_stderr(err, "100 MB line")
    record("a 100 MB SSE line without a newline", rc, err, "peak RSS %.0f MiB" % rss)

    # --- 2. a 10 MB single delta ----------------------------------------------------------------
    n = 10 * 1000 * 1000
    rc, out, err, rss = peak_rss(["-p", "hi"], base("big_delta=%d" % n))
    want = BIG_UNIT * (n // len(BIG_UNIT))
    t.eq(rc, 0, "10 MB delta: exit 0")
    t.eq(hashlib.sha256(out).hexdigest(), hashlib.sha256(want).hexdigest(),
         "10 MB delta: every byte on stdout, exactly (%d bytes)" % len(out))
    t.eq(err, b"", "10 MB delta: stderr quiet")
    t.ok(rss < RSS_LIMIT, "10 MB delta: peak memory %.0f MiB < %d" % (rss, RSS_LIMIT))
    record("a 10 MB single delta", rc, err, "all %d bytes printed, peak RSS %.0f MiB"
           % (len(out), rss))

    # --- 3. invalid UTF-8 and NUL bytes inside content --------------------------------------------
    esc = q('"a\\u0000b\\ud800c\\u001b[2Jd"')  # JSON escapes: NUL, a lone surrogate, ESC
    rc, out, err = run(["-p", "hi"], base("content_json=" + esc))
    t.eq((rc, out), (0, b"a\x00b\xef\xbf\xbdc\x1b[2Jd\n"),
         "escaped NUL, lone surrogate, ESC: exact bytes to a pipe (U+FFFD for the surrogate)")
    st, screen = on_pty(base("content_json=" + esc), ["-p", "hi"])
    t.eq(st, 0, "escaped NUL/ESC on a terminal: exit 0")
    t.ok(b"a^@b\xef\xbf\xbdc^[[2Jd" in screen and b"\x1b" not in screen and b"\x00" not in screen,
         "escaped NUL/ESC on a terminal: shown as ^@ and ^[, never raw", repr(screen))
    record("NUL, ESC and a lone surrogate as JSON escapes in content", rc, err,
           "pipe: exact bytes; terminal: `^@`, `^[`, U+FFFD")
    raw = urllib.parse.quote_from_bytes(b'"a\xff\xfeb\xc3"')  # raw invalid UTF-8 in the JSON
    rc, out, err = run(["-p", "hi"], base("content_json=" + raw))
    t.eq((rc, out), (0, b"a\xff\xfeb\xc3\n"), "raw invalid UTF-8: passed through to a pipe")
    st, screen = on_pty(base("content_json=" + raw), ["-p", "hi"])
    t.ok(b"a\xef\xbf\xbd\xef\xbf\xbdb\xef\xbf\xbd" in screen and b"\xff" not in screen,
         "raw invalid UTF-8 on a terminal: U+FFFD", repr(screen))
    record("raw invalid UTF-8 bytes inside a JSON string", rc, err,
           "pipe: exact bytes; terminal: U+FFFD")
    # --json is JSON, so UTF-8: such bytes are U+FFFD there, as in `export --format json`
    # (until 2026-12 written raw: Python's json.load refused the line)
    rc, out, err = run(["--json", "-p", "hi"], base("content_json=" + raw))
    try:
        got = json.loads(out.decode("utf-8")).get("content")
    except ValueError as e:
        got = "not JSON: %s" % e
    t.eq((rc, got), (0, "a\ufffd\ufffdb\ufffd"), "raw invalid UTF-8 with --json: U+FFFD, valid JSON")
    # ... and such an answer sent back in the history (-c): the text saved as it came, the
    # request body valid UTF-8 with U+FFFD for each invalid byte and for a NUL, nothing cut at
    # the NUL (until 2026-12 the raw bytes went out: a body that is not UTF-8, which a real API
    # refuses on every later turn, and the message ended at the NUL)
    home = ttlib.make_home()
    for content, want, what in ((b'"a\xff\xfeb\xc3 tail"', "a\ufffd\ufffdb\ufffd tail",
                                 "invalid bytes"),
                                (b'"a\\u0000b tail"', "a\ufffdb tail", "a NUL")):
        n0 = len(srv.requests())
        rc1, _, _ = run(["-p", "first"], base("content_json=" +
                                              urllib.parse.quote_from_bytes(content)), home=home)
        rc2, _, err2 = run(["-c", "-p", "next"], base(""), home=home)
        bodies = [r.get("body") for r in srv.requests()[n0:]]
        hist = bodies[-1]["messages"] if len(bodies) == 2 and bodies[-1] else []
        sent = [m.get("content") for m in hist if m.get("role") == "assistant"]
        t.ok((rc1, rc2) == (0, 0) and sent == [want],
             "an answer with %s sent back by -c: valid UTF-8, U+FFFD, nothing cut (%r)"
             % (what, sent), err2.decode(errors="replace"))
    db = sqlite3.connect(ttlib.history_db(home))
    kept = [r[0] for r in db.execute("SELECT CAST(content AS BLOB) FROM messages "
                                      "WHERE role = 'assistant' ORDER BY id")]
    db.close()
    t.ok(len(kept) == 4 and kept[0] == b"a\xff\xfeb\xc3 tail" and kept[2] == b"a\x00b tail",
         "those answers are saved as they came", repr(kept))
    # ... and exported as JSON with U+FFFD for the NUL, as --json and the request have it
    # (until 2026-12 the NUL was dropped: "ab tail")
    rc, out, err = run(["export", "2", "--format", "json"], home=home)
    try:
        got = [m.get("content") for m in json.loads(out.decode("utf-8"))["messages"]
               if m.get("role") == "assistant"]
    except (ValueError, KeyError) as e:
        got = "not JSON: %s" % e
    t.eq((rc, got[:1]), (0, ["a\ufffdb tail"]), "an answer with a NUL exported as JSON: U+FFFD")
    raw = urllib.parse.quote_from_bytes(b'"a\x00b\x1b[2J"')  # raw NUL and ESC: invalid JSON
    rc, out, err = run(["-p", "hi"], base("content_json=" + raw))
    t.eq(rc, 3, "raw NUL/ESC inside a JSON string: exit 3 (malformed chunk)")
    t.ok(b"malformed JSON" in err and b"control character" in err and
         b"the answer could not be read" in err and b"server reported" not in err,
         "raw NUL/ESC: says the chunk is malformed, not that the server reported an error",
         err.decode(errors="replace"))
    safe_stderr(err, "raw NUL/ESC in a chunk")
    record("raw NUL and ESC bytes inside a JSON string (invalid JSON)", rc, err)

    # --- 4. deeply nested JSON --------------------------------------------------------------------
    rc, out, err = run(["-p", "hi"], base("nest=100000"))
    t.eq(rc, 3, "100,000-deep chunk: exit 3")
    t.ok(b"nested too deeply" in err, "100,000-deep chunk: says nested too deeply",
         err.decode(errors="replace"))
    t.ok(out.startswith(b"before the nest "), "100,000-deep chunk: earlier text kept", repr(out))
    safe_stderr(err, "deep chunk")
    record("a stream chunk nested 100,000 arrays deep", rc, err)
    rc, out, err = run(["-p", "hi"], base("nest=100000,status=400"))
    t.eq(rc, 3, "100,000-deep error body: exit 3")
    t.ok(b"HTTP 400" in err and len(err) < 4096, "100,000-deep error body: short HTTP 400 message",
         err[:300].decode(errors="replace"))
    safe_stderr(err, "deep error body")
    record("an HTTP 400 error body nested 100,000 arrays deep", rc, err)

    # --- 5. an HTML error page from a proxy with status 502 --------------------------------------
    rc, out, err = run(["-p", "hi"], base("status=502,ctype=text/html,body=proxy_502.html"))
    t.eq(rc, 3, "proxy 502 page: exit 3")
    t.ok(b"HTTP 502" in err and b"502 Bad Gateway" in err and b"proxy" in err,
         "proxy 502 page: status, page title, and that a proxy answered",
         err.decode(errors="replace"))
    safe_stderr(err, "proxy 502")
    record("an HTML error page from a proxy, status 502", rc, err)
    # ... and with a 200 (a captive portal): said as a page, not as malformed JSON (until
    # 2026-12 "the server sent malformed JSON (not an object): <html>...")
    rc, out, err = run(["-p", "hi"], base("ctype=text/html,body=proxy_502.html"))
    t.ok(rc != 0 and b"an HTML page" in err and b"proxy" in err and b"malformed" not in err,
         "an HTML page with a 200: said as a page from a proxy", err.decode(errors="replace"))
    safe_stderr(err, "portal 200")
    rc, out, err = run(["-p", "hi"], base("status=400,error=" + q("bad \x1b]0;owned\x07 \x1b[2J "
                                                                 "\u009b1m key")))
    t.eq(rc, 3, "error message with escape sequences: exit 3")
    t.ok(b"^[]0;owned^G" in err, "error message with escape sequences: shown visibly",
         err.decode(errors="replace"))
    safe_stderr(err, "escapes in an error message")
    record("an error message full of terminal escape sequences", rc, err)

    # --- 6. gzip- or brotli-encoded streams (never asked for) -------------------------------------
    for enc in ("gzip", "br", "deflate", "zstd"):
        if enc == "zstd" and not need_tool("zstd", "zstd-encoded stream"):
            continue
        rc, out, err = run(["-p", "hi"], base("reply=%s,encoding=%s" % (q("compressed " + enc),
                                                                      enc)))
        ok = rc == 0 and out == b"compressed " + enc.encode() + b"\n"
        todo(ok, "%s-encoded stream: decoded and shown" % enc,
             "net.c does not set CURLOPT_ACCEPT_ENCODING",
             "rc=%d out=%r err=%r" % (rc, out, err))
        t.ok(rc != 0 or ok, "%s-encoded stream: never garbage with exit 0" % enc)
        t.ok(clean_message(rc, err), "%s-encoded stream: no compressed bytes in the message" % enc,
             repr(err[:300]))
        record("a %s-encoded stream" % enc, rc, err)
    # Real bombs: a few KB that expand to 1 GiB of newlines (no event at all) arrive in one
    # read, so the whole expansion ran inside one curl_multi_perform, past every limit.
    BOMB = 1 << 30

    def fetch(spec):
        return srv.post("/%s/v1/chat/completions" % spec,
                        {"messages": [{"role": "user", "content": "x"}], "stream": True})
    for enc, tool in (("gzip", None), ("br", "brotli"), ("zstd", "zstd")):
        name = "%s bomb (1 GiB of newlines)" % enc
        if tool and not need_tool(tool, name):
            continue
        spec = "bomb=%d,encoding=%s" % (BOMB, enc)
        st, hd, body = fetch(spec)  # made once by the server and kept: the runs are not slowed
        t.ok(st == 200 and hd.get("content-encoding") == enc and len(body) < 2 * MIB,
             "fake server: %s is %d compressed bytes" % (name, len(body)))
        rc, out, err, took = timed_run(["--retries", "0", "--idle-timeout", "1", "-p", "hi"],
                                       base(spec))
        t.eq(rc, 4, "%s, --idle-timeout 1: exit 4 (no answer text)" % name)
        t.ok(b"idle timeout" in err, "%s: says the idle timeout ended it" % name,
             err.decode(errors="replace"))
        t.ok(took < 3.5, "%s: ends within the idle timeout + 2.5 s (%.1f s)" % (name, took))
        safe_stderr(err, name)
        record("a %s bomb: 1 GiB of newlines in %d KB (`--idle-timeout 1`)"
               % (enc, len(body) >> 10), rc, err, "ended after %.1f s" % took)
        rc, out, err, took = timed_run(["--max-time", "1", "-p", "hi"], base(spec))  # retries too
        t.eq(rc, 8, "%s, --max-time 1: exit 8 (tokterm's own limit)" % name)
        t.ok(b"--max-time" in err, "%s, --max-time: names the option" % name,
             err.decode(errors="replace"))
        t.ok(took < 3.5, "%s, --max-time 1: ends within 2.5 s of it (%.1f s)" % (name, took))
        # SIGINT in the middle of the expansion: cancelled (130), at once
        p, fo, fe = start(["-p", "hi"], base(spec))
        n0 = len(srv.requests())
        deadline = time.monotonic() + 10
        while len(srv.requests()) == n0 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.01)
        time.sleep(0.3)  # the bomb is on its way or being expanded
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        rc = wait_exit(p, 30)
        took = time.monotonic() - t0
        with open(fe, "rb") as f:
            err = f.read()
        t.eq(rc, 130, "%s, SIGINT: exit 130 (cancelled)" % name)
        t.ok(rc is not None and took < 1.5, "%s, SIGINT: ends within 1.5 s (%.2f s)" % (name, took))
        t.ok(b"cancelled" in err, "%s, SIGINT: says cancelled" % name, err.decode(errors="replace"))
        record("the same, SIGINT during the expansion", rc, err, "ended %.2f s after it" % took)

    # A bomb of answer text: 1 GiB of content deltas in a few hundred KB. The answer stops at
    # the --max-answer-mb limit, exit 8, and keeps exactly what came before it.
    spec = "bomb_text=%d,encoding=gzip" % BOMB
    st, hd, body = fetch(spec)
    t.ok(st == 200 and len(body) < 4 * MIB, "fake server: a text bomb in %d KB" % (len(body) >> 10))
    text = BIG_UNIT * (8 * MIB // len(BIG_UNIT))  # the answer's first 8 MiB; it ends in "\n"
    rc, out, err, rss = peak_rss(["--max-answer-mb", "8", "-p", "hi"], base(spec), timeout=120)
    t.eq(rc, 8, "text bomb, --max-answer-mb 8: exit 8")
    t.ok(b"passed the 8 MiB limit" in err and b"max_answer_mb" in err and b"kept" in err,
         "text bomb: says which limit stopped it and that the text is kept",
         err.decode(errors="replace"))
    t.eq((len(out), hashlib.sha256(out).hexdigest()), (len(text), hashlib.sha256(text).hexdigest()),
         "text bomb: exactly the first 8 MiB of the answer on stdout")
    t.ok(rss < RSS_LIMIT, "text bomb: peak RSS %.0f MiB < %d" % (rss, RSS_LIMIT))
    safe_stderr(err, "text bomb")
    record("a gzip bomb of answer text: 1 GiB in %d KB (`--max-answer-mb 8`)" % (len(body) >> 10),
           rc, err, "the first 8 MiB printed and kept, peak RSS %.0f MiB" % rss)

    rc, out, err = run(["-p", "hi"], base("json=1,encoding=gzip,reply=whole"))
    todo((rc, out) == (0, b"whole\n"), "gzip-encoded JSON answer: decoded and shown",
         "net.c does not set CURLOPT_ACCEPT_ENCODING", "rc=%d err=%r" % (rc, err))
    safe_stderr(err, "gzip JSON answer")
    record("a gzip-encoded non-streamed answer", rc, err)

    # --- 7. a redirect ----------------------------------------------------------------------------
    target = srv.base("reply=moved")
    before = len(srv.requests())
    rc, out, err = run(["-p", "hi"], base("redirect=" + q(target)))
    t.eq(rc, 3, "redirect: exit 3")
    t.ok(b"redirects" in err and target.encode() in err and b"base URL" in err,
         "redirect: says where to and to change the base URL", err.decode(errors="replace"))
    t.eq(len(srv.requests()) - before, 1, "redirect: not followed (the key stays home)")
    safe_stderr(err, "redirect")
    record("a 307 redirect", rc, err)
    # A Location (and a reason phrase) made of terminal commands: a window title (OSC 0), a
    # screen clear (CSI 2J), a clipboard write (OSC 52), a C1 CSI; on a pipe and on a terminal.
    evil = ("http://x.invalid/\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZWNobyBvd25lZA==\x07"
            "\u009b31m\u202egnp.exe/v1")
    spec = "redirect=%s,reason=%s" % (q(evil), q("Moved \x1b]0;reason\x07\x1b[2J"))
    rc, out, err = run(["-p", "hi"], base(spec))
    t.eq(rc, 3, "hostile Location: exit 3")
    t.ok(b"redirected to" in err and b"^[]0;owned^G^[[2J^[]52;c;" in err
         and b"<U+009B>31m<U+202E>gnp" in err,
         "hostile Location: shown visibly (^[ for ESC, <U+009B> for C1, <U+202E> for bidi)",
         err.decode(errors="replace"))
    safe_stderr(err, "hostile Location on a pipe")
    st, screen = on_pty(base(spec), ["-p", "hi"])
    t.ok(st == 3 and b"redirected to" in screen and b"\x1b" not in screen
         and b"\x07" not in screen and b"\xc2\x9b" not in screen
         and "\u202e".encode() not in screen,
         "hostile Location on a terminal: no ESC, BEL, C1 or bidi control written",
         repr(screen[:400]))
    record("a 307 whose `Location` holds OSC 0, CSI 2J, OSC 52, a C1 CSI and U+202E", rc, err,
           "shown as `^[`, `^G`, `<U+009B>`, `<U+202E>`")

    # --- 8. Content-Type: application/json on a streamed request ----------------------------------
    rc, out, err = run(["-p", "whole answer"], base("json=1"))
    t.eq((rc, out, err), (0, b"whole answer\n", b""), "JSON answer to a stream request: shown")
    record("`Content-Type: application/json` answer to a streamed request", rc, err,
           "the whole answer is shown")
    rc, out, err = run(["-p", "labelled json"], base("ctype=application/json"))
    todo((rc, out) == (0, b"labelled json\n"),
         "an SSE stream labelled application/json: still read as a stream",
         "net.c trusts the label and decodes the stream as one JSON body",
         "rc=%d err=%r" % (rc, err))
    safe_stderr(err, "mislabelled stream")
    record("an SSE stream labelled `application/json`", rc, err)

    # --- 9. a server that accepts the connection and never answers --------------------------------
    t0 = time.monotonic()
    rc, out, err = run(["--idle-timeout", "1", "-p", "hi"], base("hang=1,stall_s=20"))
    took = time.monotonic() - t0
    t.eq(rc, 4, "silent server: exit 4")
    t.ok(b"no answer text from the server" in err and b"idle timeout" in err,
         "silent server: says nothing arrived", err.decode(errors="replace"))
    t.ok(took < 10, "silent server: gives up after the idle timeout (%.1f s)" % took)
    todo(b"--idle-timeout" in err or b"idle_timeout" in err,
         "silent server: says how to wait longer", "net.c's message names no option",
         err.decode(errors="replace"))
    record("a server that accepts the connection and never answers (`--idle-timeout 1`)", rc, err)

    # --- 9b. a response header line of 8 MB ------------------------------------------------------
    # libcurl refuses a line over 100 KiB with CURLE_OUT_OF_MEMORY and no text: until 2026-12
    # that read "tokterm: Out of memory" (and --json "error":"Out of memory"), 14 MB resident
    for mode in ([], ["--json"]):
        rc, out, err = run(mode + ["-p", "hi"], base("big_header=%d" % (8 * MIB)))
        said = err if not mode else out
        t.ok(rc == 4 and b"Too large response headers" in said and b"server's headers" in said
             and b"Out of memory" not in out + err,
             "8 MB header line%s: exit 4, the server's headers are too large" % " ".join(
                 [""] + mode), (out + err).decode(errors="replace")[:500])
        if not mode:
            record("a response header line of 8 MB", rc, err)

    # --- 10. a port nobody listens on -------------------------------------------------------------
    rc, out, err = run(["-p", "hi"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    t.eq(rc, 4, "closed port: exit 4")
    t.ok(b"onnect" in err and b"127.0.0.1" in err, "closed port: says the connection failed",
         err.decode(errors="replace"))
    todo(b"base_url" in err or b"running" in err or b"OPENAI_BASE_URL" in err,
         "closed port: says what to check", "net.c passes curl's text on without advice",
         err.decode(errors="replace"))
    record("a port nobody listens on", rc, err)


# --- 11. a TLS certificate that does not verify ---------------------------------------------------
OPENSSL = shutil.which("openssl")
if not OPENSSL:
    t.skip("TLS cases", "openssl is not installed", tool="openssl")
else:
    d = ttlib.tempdir("tt-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    r = subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", cert], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        t.skip("TLS cases", "openssl could not make a certificate: %s" % r.stderr[-200:],
               tool="openssl")
    else:
        with TlsServer(cert, key) as tls:
            t.ok(tls.port is not None, "TLS fake server starts")
            url = "https://127.0.0.1:%d/reply=secure/v1" % (tls.port or 1)
            rc, out, err = run(["-p", "hi"], {"OPENAI_BASE_URL": url})
            t.eq(rc, 4, "self-signed certificate: exit 4")
            t.ok(b"certificate" in err and b"cacert" in err,
                 "self-signed certificate: says so and how to trust its CA",
                 err.decode(errors="replace"))
            t.eq(out, b"", "self-signed certificate: nothing printed")
            record("a TLS certificate that does not verify (self-signed)", rc, err)
            warned = 0
            for i in range(2):
                rc, out, err = run(["--insecure", "-p", "hi"], {"OPENAI_BASE_URL": url})
                warned += b"--insecure" in err and b"TLS certificate checks are OFF" in err
            t.eq((rc, out), (0, b"secure\n"), "--insecure: the answer arrives")
            t.eq(warned, 2, "--insecure: warns on every run")
            record("the same with `--insecure`", rc, err, "answer shown; warns every run")
            rc, out, err = run(["--cacert", cert, "-p", "hi"], {"OPENAI_BASE_URL": url})
            t.eq((rc, out, err), (0, b"secure\n", b""), "--cacert with its certificate: verified")

# --- 12. a config file with garbage ---------------------------------------------------------------
home = ttlib.make_home()
cfgdir = os.path.join(home, ".config", "tokterm")
os.makedirs(cfgdir)
cfg = os.path.join(cfgdir, "config")
with open(cfg, "wb") as f:
    f.write(b"model = x\n\x1b]0;pwned\x07\x1b[2J garbage \xff\xfe line\n")
rc, out, err = run(["-p", "hi"], home=home)
t.eq(rc, 2, "garbage config: exit 2")
t.ok(b"config:2:" in err and b"key = value" in err, "garbage config: file, line and the syntax",
     err.decode(errors="replace"))
safe_stderr(err, "garbage config")
record("a config file with garbage (escape sequences, invalid UTF-8)", rc, err)
with open(cfg, "wb") as f:
    f.write(os.urandom(2000) + b"\x00")
rc, out, err = run(["-p", "hi"], home=home)
t.eq(rc, 2, "binary config: exit 2")
t.ok(b"not a text file" in err or b"config" in err, "binary config: says what is wrong",
     err.decode(errors="replace"))
safe_stderr(err, "binary config")
record("a config file of random binary bytes", rc, err)
with open(cfg, "w") as f:
    f.write("[p]\nmax_tokens = lots\x1b[31m\n")
rc, out, err = run(["-P", "p", "-p", "hi"], home=home)
t.eq(rc, 2, "bad value: exit 2")
t.ok(b"max_tokens must be a whole number" in err and b"config:2:" in err,
     "bad value: names the option, its range, the line", err.decode(errors="replace"))
safe_stderr(err, "bad value")
record("a config value out of its type (`max_tokens = lots`)", rc, err)

# --- 13. a database file that is not SQLite, or is read-only --------------------------------------
with ttlib.FakeServer() as srv:
    d = ttlib.tempdir("tt-db-")
    garbage = os.path.join(d, "garbage.db")
    with open(garbage, "wb") as f:
        f.write(b"this is not a database\n" + os.urandom(5000))
    rc, out, err = run(["--db", garbage, "-p", "hello"], {"OPENAI_BASE_URL": srv.base()})
    t.eq((rc, out), (0, b"hello\n"), "database not SQLite: the answer still arrives")
    t.ok(b"not a tokterm database" in err and b"--db" in err and b"not saved" in err,
         "database not SQLite: warns it is not saved and what to do", err.decode(errors="replace"))
    record("a database file that is not SQLite (chat)", rc, err, "answer shown, not saved")
    rc, out, err = run(["--db", garbage, "ls"])
    t.eq(rc, 1, "database not SQLite: ls exits 1")
    t.ok(b"not a tokterm database" in err, "database not SQLite: ls says why",
         err.decode(errors="replace"))
    record("the same, `tokterm ls`", rc, err)
    with open(garbage, "rb") as f:
        t.ok(f.read().startswith(b"this is not a database"), "database not SQLite: left untouched")

    ro_dir = ttlib.tempdir("tt-ro-")
    os.chmod(ro_dir, 0o777)
    ro = os.path.join(ro_dir, "ro.db")
    rc, out, err = run(["--db", ro, "-p", "first"], {"OPENAI_BASE_URL": srv.base()})
    t.eq(rc, 0, "read-only database: made writable first")
    os.chmod(ro, 0o444)
    as_other = []
    if os.geteuid() == 0:  # root ignores file modes: run as nobody
        setpriv = shutil.which("setpriv")
        as_other = ([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
                    if setpriv else None)
    if as_other is None:
        t.skip("read-only database", "running as root without setpriv", tool="setpriv")
    else:
        for name in os.listdir(ro_dir):
            os.chmod(os.path.join(ro_dir, name), 0o444)
        env = ttlib.clean_env(home=ro_dir, env={"OPENAI_BASE_URL": srv.base()})
        p = subprocess.run(as_other + [ttlib.tokterm_path(), "--db", ro, "-p", "second"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        t.eq((p.returncode, p.stdout), (0, b"second\n"), "read-only database: the answer arrives")
        t.ok(b"read-only" in p.stderr and b"not saved" in p.stderr,
             "read-only database: warns it is read-only and nothing is saved",
             p.stderr.decode(errors="replace"))
        record("a read-only database file (chat)", p.returncode, p.stderr,
               "answer shown, not saved")
        p = subprocess.run(as_other + [ttlib.tokterm_path(), "--db", ro, "ls"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        t.eq(p.returncode, 0, "read-only database: ls reads it (readers never write)")
        t.ok(b"first" in p.stdout, "read-only database: ls lists what it holds",
             (p.stdout + p.stderr).decode(errors="replace"))
        record("the same, `tokterm ls`", p.returncode, p.stderr, "listed (readers never write)")

    # --- 14. what was received survives a broken stream in the database too -----------------------
    db = os.path.join(ttlib.tempdir("tt-keep-"), "keep.db")
    rc, out, err = run(["--db", db, "-p", "hi"],
                       {"OPENAI_BASE_URL": srv.base("huge_line=%d" % (80 * MIB))})
    rc2, shown, err2 = run(["--db", db, "show", "1"])
    t.ok(rc == 3 and rc2 == 0 and b"before the flood" in shown,
         "broken stream: the partial answer is in the database", shown.decode(errors="replace"))

# --- 16. tokterm's own limits: progress, --max-time, --max-answer-mb; empty and odd answers ------
with ttlib.FakeServer() as srv:
    def base(spec):
        return {"OPENAI_BASE_URL": srv.base(spec)}

    # empty deltas every 10 ms are not progress: the idle timer still runs
    rc, out, err, took = timed_run(["--retries", "0", "--idle-timeout", "1", "-p", "hi"],
                                   base("empty_deltas=1,delay_ms=10,stall_s=20"))
    t.eq(rc, 4, "empty deltas every 10 ms: exit 4")
    t.ok(b"idle timeout" in err, "empty deltas: the idle timeout ended it", err.decode())
    t.ok(took < 3.5, "empty deltas: within 2.5 s of --idle-timeout 1 (%.1f s)" % took)
    record("a stream of empty deltas every 10 ms (`--idle-timeout 1`)", rc, err,
           "only new text counts as progress")

    # [DONE], then the response never ends: complete after a short wait, not an idle timeout
    rc, out, err, took = timed_run(["-p", "hi"], base("reply=done%20then%20silence,linger=1,"
                                                      "stall_s=30"))
    t.eq((rc, out, err), (0, b"done then silence\n", b""),
         "[DONE] and a response that never ends: the answer, exit 0")
    t.ok(took < 6, "[DONE] and a response that never ends: over in %.1f s" % took)
    record("`[DONE]`, then a response that never ends", rc, err, "complete after 2 s")

    # --max-time: the whole request; text that came is kept, exit 8
    rc, out, err, took = timed_run(["--max-time", "1", "-p", "hi"], base("gen=200,delay_ms=20"))
    t.eq(rc, 8, "--max-time 1 on a 4 s answer: exit 8")
    t.ok(out.startswith(b"tok0 tok1 ") and len(out) < 2000,
         "--max-time: the text so far is printed", repr(out[:100]))
    t.ok(b"--max-time" in err and b"kept" in err, "--max-time: names the limit, says kept",
         err.decode())
    t.ok(took < 2.5, "--max-time 1: ends on time (%.1f s)" % took)
    record("an answer longer than `--max-time 1`", rc, err, "the text so far printed and kept")
    # retries and their waits count too
    srv.queue(["status=503,h.retry-after=1"] * 4)
    rc, out, err, took = timed_run(["--retries", "5", "--max-time", "1.5", "-p", "hi"], base(""))
    srv.clear_queue()
    t.eq(rc, 8, "--max-time over retries: exit 8")
    t.ok(took < 3, "--max-time 1.5 over retries and their waits: ends on time (%.1f s)" % took)
    t.ok(b"--max-time" in err, "--max-time over retries: says so", err.decode())
    record("retries past `--max-time 1.5` (503 with retry-after 1, four times)", rc, err)

    # an answer past --max-answer-mb, not compressed: the same stop, memory bounded
    rc, out, err, rss = peak_rss(["--max-answer-mb", "4", "-p", "hi"],
                                 base("bomb_text=%d" % (64 * MIB)), timeout=120)
    t.eq((rc, len(out)), (8, 4 * MIB), "64 MiB answer, --max-answer-mb 4: exit 8, 4 MiB kept")
    t.ok(rss < RSS_LIMIT, "64 MiB answer, limit 4: peak RSS %.0f MiB < %d" % (rss, RSS_LIMIT))
    rc2, out2, err2 = run(["--max-answer-mb", "0", "-p", "hi"], base("reply=x"))
    t.eq(rc2, 2, "--max-answer-mb 0: bad usage (exit 2)")

    # tokterm's bounds on tool calls are its own limits, exit 8, not the server's error (until
    # 2026-12: "the server reported an error mid-stream: ...", exit 3)
    for spec, name, said in [
            ("tool_calls=1,tool_args=%d" % (9 * MIB), "a tool call of 9 MiB",
             b"a tool call's arguments are over 8 MiB, tokterm's limit; stopped, the text so "
             b"far is kept"),
            ("tool_calls=129", "129 tool calls",
             b"the answer made more than 128 tool calls, tokterm's limit; stopped")]:
        rc, out, err = run(["-p", "hi"], base(spec))
        t.ok(rc == 8 and out == b"before the calls \n" and said in err
             and b"server reported" not in err,
             "%s: exit 8, tokterm's limit, the text kept" % name, err.decode() + repr(out[:80]))
        if spec.startswith("tool_calls=1,"):
            record("a tool call whose arguments are 9 MiB", rc, err, "the text before kept")
    # the calls' arguments count toward --max-answer-mb with the text (until 2026-12 they did
    # not: 128 calls of ~8 MiB, none offered, held 1.06 GB); 32 calls of 4 MiB past a limit of
    # 8: exit 8 there, memory bounded near it (measured 25-46 MiB; 146 MiB before)
    rc, out, err, rss = peak_rss(["--max-answer-mb", "8", "-p", "hi"],
                                 base("tool_calls=32,tool_args=%d" % (4 * MIB)), timeout=120)
    t.ok(rc == 8 and out == b"before the calls \n" and b"the answer passed the 8 MiB limit "
         b"(max_answer_mb, its tool calls' arguments with its text)" in err,
         "128 MiB of tool call arguments, --max-answer-mb 8: exit 8 at the limit, the text kept",
         err.decode() + repr(out[:80]))
    t.ok(rss < (320 if ASAN else 96),
         "128 MiB of tool call arguments, limit 8: peak RSS %.0f MiB < %d" % (
             rss, 320 if ASAN else 96))
    record("32 tool calls of 4 MiB of arguments each, `--max-answer-mb 8`", rc, err,
           "stopped at the limit, the text kept")

    # a 200 with no answer in it: exit 4 like the stream, and never cached
    home = ttlib.make_home()
    for body in ("{}", '{"choices":[]}',
                 '{"choices":[{"index":0,"message":{"role":"assistant","content":""}}]}'):
        spec = "raw=%s,ctype=application/json" % q(body)
        before = len(srv.requests())
        rc, out, err = run(["-p", "empty please"], base(spec), home=home)
        t.eq((rc, out), (4, b""), "HTTP 200 %s: exit 4, nothing printed" % body)
        t.ok(b"no answer" in err, "HTTP 200 %s: says the server sent no answer" % body,
             err.decode())
        rc, out, err = run(["-p", "empty please"], base(spec), home=home)
        t.eq((rc, len(srv.requests()) - before), (4, 2),
             "HTTP 200 %s: not cached (asked again)" % body)
        record("HTTP 200 with `%s` (not streamed)" % body, rc, err, "nothing cached")
    rc, out, err = run(["--cache-only", "-p", "empty please"], base("reply=x"), home=home)
    t.eq(rc, 7, "--cache-only after the empty answers: a miss (exit 7)")
    # an explicitly empty answer (finish_reason "stop", no text) stands (exit 0) but is not
    # cached either: by -p nor by batch
    spec = "raw=%s,ctype=application/json" % q(
        '{"choices":[{"index":0,"message":{"role":"assistant","content":""},'
        '"finish_reason":"stop"}]}')
    lines = os.path.join(home, "in.jsonl")
    with open(lines, "w") as f:
        f.write('{"id":1,"prompt":"empty by batch"}\n')
    before = len(srv.requests())
    codes = [run(["-p", "empty on purpose"], base(spec), home=home)[0] for _ in range(2)]
    codes += [run(["batch", lines], base(spec), home=home)[0] for _ in range(2)]
    t.eq((codes, len(srv.requests()) - before), ([0, 0, 0, 0], 4),
         "an empty answer with finish_reason stop: exit 0, never cached (-p, batch)")

    # n = 2 (extra_body): each chunk carries one choice, index 0 or 1; the answer is choice
    # 0's (until 2026-12 every chunk's first choice was taken: "HelloBonjour world monde",
    # exit 6 from choice 1's finish_reason "length")
    ev = lambda i, d, fr=None: "data: %s\n\n" % json.dumps(
        {"choices": [{"index": i, "delta": d, "finish_reason": fr}]})
    sse = (ev(0, {"role": "assistant", "content": ""}) + ev(1, {"role": "assistant",
           "content": ""}) + ev(0, {"content": "Hello"}) + ev(1, {"content": "Bonjour"}) +
           ev(0, {"content": " world"}) + ev(1, {"content": " monde"}) + ev(0, {}, "stop") +
           ev(1, {}, "length") + "data: [DONE]\n\n")
    home = ttlib.make_home()
    rc, out, err = run(["--extra-body", '{"n":2}', "-p", "two answers"],
                       base("ctype=text/event-stream,raw=" + q(sse)), home=home)
    t.eq((rc, out, err), (0, b"Hello world\n", b""),
         "n=2 streamed: choice 0's text and finish, exit 0")
    rc, shown, err = run(["show", "1"], home=home)
    t.ok(b"Hello world" in shown and b"Bonjour" not in shown, "n=2: choice 0 is what is saved",
         shown.decode(errors="replace"))
    body = json.dumps({"choices": [
        {"index": 1, "message": {"role": "assistant", "content": "Bonjour"},
         "finish_reason": "length"},
        {"index": 0, "message": {"role": "assistant", "content": "Hello"},
         "finish_reason": "stop"}]})
    rc, out, err = run(["--extra-body", '{"n":2}', "-p", "two answers"],
                       base("ctype=application/json,raw=" + q(body)))
    t.eq((rc, out, err), (0, b"Hello\n", b""),
         "n=2 in one object, choice 1 listed first: choice 0, exit 0")

    # usage of the wrong type: one warning, the answer stands (exit 0)
    for usage in ('{"prompt_tokens":1,"completion_tokens":2,"total_tokens":"8"}',
                  '{"prompt_tokens":null,"completion_tokens":-5,"total_tokens":1e300}',
                  '{"prompt_tokens":"x","completion_tokens":{},"total_tokens":[1]}'):
        for mode in ("", "json=1,"):
            spec = "%sreply=fine,usage_json=%s" % (mode, q(usage))
            rc, out, err = run(["-p", "hi"], base(spec))
            t.eq((rc, out), (0, b"fine\n"), "usage %s%s: the answer, exit 0" % (mode, usage))
            t.ok(err.count(b"warning") == 1 and b"usage" in err,
                 "usage %s%s: one warning" % (mode, usage), err.decode())
        safe_stderr(err, "usage of the wrong type")
    record('usage with `"total_tokens":"8"` (a string), null, negative or huge', rc, err,
           "the answer stands; usage ignored")

# --- 15. a theme file with garbage (interactive chat) ---------------------------------------------
if not ttlib.Tmux.available():
    t.skip("garbage theme", "tmux is not installed", tool="tmux")
else:
    home = ttlib.make_home()
    tdir = os.path.join(home, ".config", "tokterm", "themes")
    os.makedirs(tdir)
    with open(os.path.join(tdir, "junk.theme"), "wb") as f:
        f.write(b"[theme]\nuser = re\x7fd\r \xc2\x9b bold\n" + os.urandom(64))
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write("theme = junk\n")
    with ttlib.FakeServer() as srv, ttlib.Tmux(100, 24) as tm:
        tm.run([ttlib.tokterm_path()],
               ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("reply=fine")}))
        screen = tm.wait_for("built-in theme", 10)
        t.ok(screen is not None,
             "garbage theme: the chat starts and says it uses the built-in theme", tm.capture())
        t.ok(screen is not None and "junk.theme" in screen,
             "garbage theme: names the file", screen)
        tm.send_text("still works")
        tm.send("Enter")
        t.ok(tm.wait_for("fine", 10) is not None, "garbage theme: chatting still works",
             tm.capture())
        esc = tm.capture(escapes=True)
        t.ok("\x07" not in esc and "\x9b" not in esc and "\x7f" not in esc,
             "garbage theme: no raw control byte from the file reached the screen", repr(esc))
        tm.send("C-d")
        t.eq(tm.wait_exit(10), 0, "garbage theme: quits with 0")
        TABLE.append(("a theme file with garbage (interactive chat)", 0,
                      "the chat starts with the built-in theme and shows the file's error", ""))

# --- answers that are not what they seem (a helper's hostile server): each said for what it is
# (until 2026-12: a 304 was "a redirect", a JSON error in a 200 body "mid-stream", valid JSON of
# another shape "malformed", a reply that is not HTTP libcurl's words alone, and a whole JSON
# answer short of its Content-Length dropped) ---------------------------------------------------
ANSWER = (b'{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":'
          b'{"role":"assistant","content":"full answer"},"finish_reason":"stop"}]}')
RAW = {
    "304": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n",
    "err200": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n"
               b"\r\n" + b'{"error":{"message":"quota gone now"}}'),
    "shape": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
              b'{"choices": "x"}'),
    "notheep": b"SSH-2.0-OpenSSH_9.2\r\n",
    "short": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"\r\n" % (len(ANSWER) + 100)) + ANSWER,
    # a proxy's answers to CONNECT p407.invalid:443 and p403.invalid:443
    "p407.invalid:443": (b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: "
                         b"Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n"),
    "p403.invalid:443": b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
    # and to any plain http request it forwards (GET http://HOST/...: the segment "http:")
    "http:": (b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
              b"realm=\"corp\"\r\nContent-Length: 0\r\n\r\n"),
}
SEEN = []  # the first segment of each request's path (a CONNECT's host:port)


def raw_server():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)

    def serve():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                c.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    got = c.recv(65536)
                    if not got:
                        break
                    data += got
                path = data.split(b" ", 2)[1].decode() if data.count(b" ") >= 2 else "/"
                SEEN.append(path.strip("/").split("/")[0])
                c.sendall(RAW.get(SEEN[-1], b""))
            except OSError:
                pass
            finally:
                c.close()
    threading.Thread(target=serve, daemon=True).start()
    return s


rs = raw_server()
rport = rs.getsockname()[1]
for name, want_rc, want in (("304", 3, "HTTP 304: Not Modified"),
                            ("err200", 3, "the server reported an error in its answer: quota"),
                            ("shape", 3, "the server sent JSON that is not the API's answer"),
                            ("notheep", 4, "the server's reply is not HTTP"),
                            ("short", 0, "shorter than its Content-Length said, but whole JSON")):
    rc, out, err = run(["--retries", "0", "--incognito", "-p", "hi"],
                       {"OPENAI_BASE_URL": "http://127.0.0.1:%d/%s/v1" % (rport, name)})
    e = err.decode(errors="replace")
    t.ok(rc == want_rc and want in e and "mid-stream" not in e and "redirects" not in e and
         (name != "short" or out == b"full answer\n"),
         "%s: exit %d, said for what it is" % (name, want_rc), "rc %d %s" % (rc, e))
# an https request through a proxy that refuses the tunnel: said so, with what to do, after
# one attempt: the next would get the same answer (until 2026-12 "connection dropped,
# retrying" twice, then "CONNECT tunnel failed, response 407", exit 4)
for host, want in (("p407.invalid", "HTTP 407 (it wants a user and password"),
                   ("p403.invalid", "HTTP 403 (it does not allow this host")):
    before = len(SEEN)
    rc, out, err = run(["--incognito", "-p", "hi"],
                       {"OPENAI_BASE_URL": "https://%s/v1" % host, "NO_PROXY": None,
                        "no_proxy": None,
                        "HTTPS_PROXY": "http://alice:pr0xy-s3cret@127.0.0.1:%d" % rport})
    e = err.decode(errors="replace")
    t.ok(rc == 4 and "the proxy refused the tunnel" in e and want in e and
         "pr0xy-s3cret" not in e, "a proxy's %s: exit 4, said for what it is" % want[:8], e)
    t.eq(SEEN[before:], [host + ":443"], "a proxy's %s: one attempt, not retried" % want[:8])
# the same proxy for a plain http base URL: its 407 is the response; "HTTP 407" said nothing
# more until 2026-12
rc, out, err = run(["--incognito", "-p", "hi"],
                   {"OPENAI_BASE_URL": "http://p407plain.invalid/v1", "NO_PROXY": None,
                    "no_proxy": None, "http_proxy": "http://127.0.0.1:%d" % rport})
e = err.decode(errors="replace")
t.ok(rc == 3 and "HTTP 407" in e and "a proxy (http_proxy" in e and "wants a user and password"
     in e, "a plain http request's 407: exit 3, names the proxy and what to set", e)
rs.close()

if os.environ.get("HOSTILE_TABLE"):
    with open(os.environ["HOSTILE_TABLE"], "w") as f:
        f.write("| input | exit | what tokterm says (last line of stderr) | notes |\n")
        f.write("|---|---|---|---|\n")
        for case, rc, msg, note in TABLE:
            f.write("| %s | %s | %s | %s |\n" % (case, rc, msg.replace("\n", " "), note))

sys.exit(t.done())
