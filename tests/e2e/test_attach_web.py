#!/usr/bin/env python3
"""End-to-end tests of URL and folder attachments in scripted mode (-f URL, -f DIR): a page
served by a small HTTP server of this test becomes readable text in the request the fake
OpenAI server receives (script, style and nav gone; headings, code, tables kept); the page's
server sees no key, no Authorization and no cookie (even after a redirect that set one); a
slow URL times out (attach_url_timeout), an oversized one is refused (attach_url_max_bytes),
with and without a Content-Length; redirect loops, redirects to ftp://, 404s, binary types
and URLs with credentials are refused with a message and nothing is sent. A folder with
nested .gitignore files sends its text files in git's order and tells the model and the user
what was left out; --attach-max-files cuts it. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import http.server  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import socketserver  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

PAGE = b"""<!DOCTYPE html><html><head><title>The  Page</title>
<script>var secret = "alert-me";</script><style>body { color: red }</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Main heading</h1><p>First   paragraph with <a href="https://example.org/x">a link</a>.</p>
<pre><code class="language-python">def f(x):
    return x * 2
</code></pre>
<table><tr><th>Name</th><th>Size</th></tr><tr><td>alpha</td><td>1</td></tr></table>
<ul><li>one</li><li>two</li></ul><footer>copyright noise</footer></body></html>"""

SEEN = []  # (path, headers) of every request to the page server


class Pages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, ctype, body, extra=(), length=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in extra:
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if length:
            self.wfile.write(body)
        else:
            for i in range(0, len(body), 65536):
                piece = body[i:i + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")

    def do_GET(self):
        SEEN.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        p = self.path
        if p == "/page.html":
            self.send(200, "text/html; charset=utf-8", PAGE)
        elif p == "/redirect":
            self.send(302, "text/html", b"moved", [("Location", "/page.html"),
                                                   ("Set-Cookie", "session=abc123; Path=/")])
        elif p == "/loop":
            self.send(302, "text/html", b"", [("Location", "/loop")])
        elif p == "/to-ftp":
            self.send(302, "text/html", b"", [("Location", "ftp://127.0.0.1/x")])
        elif p == "/slow":
            time.sleep(4)
            self.send(200, "text/plain", b"late")
        elif p == "/big":
            self.send(200, "text/plain", b"x" * 300000)
        elif p == "/big-chunked":
            self.send(200, "text/plain", b"y" * 300000, length=False)
        elif p == "/notes.txt":
            self.send(200, "text/plain; charset=utf-8", "plain notes \u00e9\n".encode())
        elif p == "/archive.zip":
            self.send(200, "application/zip", b"PK\x03\x04" + b"\0" * 100)
        elif p == "/empty.html":
            self.send(200, "text/html", b"<html><body><script>x()</script></body></html>")
        else:
            self.send(404, "text/html", b"<h1>not here</h1>")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # tokterm hangs up on a slow or oversized answer: that is the point


pages = Server(("127.0.0.1", 0), Pages)
threading.Thread(target=pages.serve_forever, daemon=True).start()
PORT = pages.server_address[1]


def url(path):
    return "http://127.0.0.1:%d%s" % (PORT, path)


home = ttlib.make_home()
cfgdir = os.path.join(home, ".config", "tokterm")
os.makedirs(cfgdir)
with open(os.path.join(cfgdir, "config"), "w") as f:
    f.write("attach_url_timeout = 1.5\nattach_url_max_bytes = 200000\n")


def run(srv, args, **kw):
    env = {"OPENAI_BASE_URL": srv.base("")}
    return ttlib.run_tokterm(["--no-save", "--no-cache"] + args, env=env, home=home, **kw)


def user_text(srv):
    r = srv.requests()
    if not r:
        return ""
    msgs = (r[-1].get("body") or {}).get("messages") or []
    users = [m for m in msgs if m.get("role") == "user"]
    c = users[-1].get("content") if users else ""
    if isinstance(c, list):
        c = "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def text(b):
    return b.decode("utf-8", "replace")


with ttlib.FakeServer() as srv:
    # --- a page as readable text ---------------------------------------------------------------
    rc, out, err = run(srv, ["-f", url("/page.html"), "-p", "summarise"])
    t.eq(rc, 0, "-f URL: exit 0 (%s)" % text(err).strip()[:200])
    u = user_text(srv)
    for want in ("Title: The Page", "# Main heading", "First paragraph with [a link]"
                 "(https://example.org/x).", "```python\ndef f(x):\n    return x * 2\n```",
                 "| Name | Size |", "| alpha | 1 |", "- one\n- two", url("/page.html"),
                 "summarise"):
        t.ok(want in u, "-f URL: the request holds %r" % want[:40], u[:2000])
    for noise in ("alert-me", "color: red", "About", "copyright noise"):
        t.ok(noise not in u, "-f URL: no %r (script, style, nav, footer)" % noise)
    # --- nothing of the user's goes to the page's server ---------------------------------------
    del SEEN[:]
    rc, out, err = run(srv, ["-f", url("/redirect"), "-p", "x"])
    t.eq(rc, 0, "-f URL with a redirect that sets a cookie: exit 0")
    t.eq([p for p, _ in SEEN], ["/redirect", "/page.html"], "the redirect was followed once")
    leaked = [(p, k) for p, h in SEEN for k, v in h.items()
              if k in ("authorization", "cookie", "x-api-key", "api-key", "x-goog-api-key",
                       "proxy-authorization") or ttlib.TEST_KEY in v]
    t.eq(leaked, [], "the page's server saw no key, Authorization or cookie")
    t.ok(all(h.get("user-agent", "").startswith("tokterm/") for _, h in SEEN),
         "a tokterm User-Agent")
    t.ok("(from %s)" % url("/page.html") in user_text(srv), "a redirected page says from where")

    def refused(args, want, name):
        n = len(srv.requests())
        t0 = time.monotonic()
        rc, out, err = run(srv, args)
        e = text(err)
        t.eq(rc, 2, "%s: exit 2" % name)
        t.ok(want in e, "%s: says %r" % (name, want), e)
        t.ok("nothing was sent" in e, "%s: nothing was sent" % name, e)
        t.eq(len(srv.requests()), n, "%s: no request reached the model" % name)
        ttlib.safe_stderr(t, err, name)
        return time.monotonic() - t0

    took = refused(["-f", url("/slow"), "-p", "x"], "attach_url_timeout", "a slow URL")
    t.ok(took < 4, "a slow URL: given up after the limit (%.1f s)" % took)
    refused(["-f", url("/big"), "-p", "x"], "attach_url_max_bytes", "a 300 KB URL")
    refused(["-f", url("/big-chunked"), "-p", "x"], "attach_url_max_bytes",
            "a 300 KB URL without a length")
    refused(["-f", url("/loop"), "-p", "x"], "redirected more than 5 times", "a redirect loop")
    refused(["-f", url("/to-ftp"), "-p", "x"], "not http(s)", "a redirect to ftp://")
    refused(["-f", url("/missing"), "-p", "x"], "answered HTTP 404", "a 404")
    refused(["-f", url("/archive.zip"), "-p", "x"], "application/zip", "a zip file")
    refused(["-f", url("/empty.html"), "-p", "x"], "no readable text", "a page without text")
    del SEEN[:]
    refused(["-f", "http://user:pw@127.0.0.1:%d/page.html" % PORT, "-p", "x"],
            "user name or password", "a URL with credentials")
    t.eq(SEEN, [], "a URL with credentials: never fetched")
    rc, out, err = run(srv, ["-f", url("/notes.txt"), "-p", "x"])
    t.ok(rc == 0 and "plain notes \u00e9" in user_text(srv), "-f URL of text/plain: its text")

    # --- folders -----------------------------------------------------------------------------
    d = ttlib.tempdir("tt-folder-")
    tree = {".gitignore": "*.log\nbuild/\n", "a.c": "int a;\n", "b/.gitignore": "!keep.log\n",
            "b/keep.log": "kept log\n", "b/x.log": "dropped\n", "b/z.py": "print(1)\n",
            "build/out.c": "generated\n", ".git/HEAD": "ref\n", "app.log": "noise\n"}
    for rel, content in tree.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(content)
    with open(os.path.join(d, "blob.bin"), "wb") as f:
        f.write(b"\x00\x01\x02binary")
    rc, out, err = run(srv, ["-f", d, "-p", "review"])
    t.eq(rc, 0, "-f DIR: exit 0 (%s)" % text(err).strip()[:300])
    u = user_text(srv)
    order = [u.find(d + "/" + rel) for rel in (".gitignore", "a.c", "b/.gitignore",
                                              "b/keep.log", "b/z.py")]
    t.ok(all(i >= 0 for i in order) and order == sorted(order),
         "-f DIR: the text files in git's order", u[:1500])
    for gone in ("dropped", "generated", "noise", "ref\n"):
        t.ok(gone not in u, "-f DIR: %r left out" % gone.strip())
    t.ok("Left out of the folder" in u and "blob.bin: binary" in u and
         "build/: ignored" in u, "-f DIR: the model is told what was left out", u[-800:])
    t.ok("left out" in text(err) and "blob.bin" in text(err),
         "-f DIR: the user is told what was left out", text(err))
    rc, out, err = run(srv, ["--attach-max-files", "2", "-f", d, "-p", "review"])
    u = user_text(srv)
    t.ok(rc == 0 and (d + "/a.c:\n") in u and (d + "/b/z.py:\n") not in u,
         "--attach-max-files 2: the first two files only")
    t.ok("over the limit of files" in text(err) and "attach_max_files" in text(err),
         "--attach-max-files 2: the rest listed as over the limit", text(err))
    one = ttlib.tempdir("tt-folder-one-")
    os.makedirs(os.path.join(one, ".git"))  # a work tree: its .gitignore decides, and is sent
    for rel, content in (("a.c", "int a;\n"), (".gitignore", "build/\n"), ("build/x.o", "o\n")):
        os.makedirs(os.path.dirname(os.path.join(one, rel)), exist_ok=True)
        with open(os.path.join(one, rel), "w") as f:
            f.write(content)
    rc, out, err = run(srv, ["-f", one, "-p", "review"])
    u = user_text(srv)
    t.ok(rc == 0 and "(1 entry):" in u and "build/: ignored" in u,
         "-f DIR: one entry left out is \"1 entry\"", u[-400:])
    # outside a git work tree hidden entries are left out (no .gitignore keeps .env or
    # .ssh/ out: until 2026-12 `/attach ~` sent tokterm's own history and config)
    bare = ttlib.tempdir("tt-folder-bare-")
    for rel, content in (("a.c", "int a;\n"), (".env", "TOKEN=hush\n"), (".ssh/id", "k\n")):
        os.makedirs(os.path.dirname(os.path.join(bare, rel)), exist_ok=True)
        with open(os.path.join(bare, rel), "w") as f:
            f.write(content)
    rc, out, err = run(srv, ["-f", bare, "-p", "review"])
    u = user_text(srv)
    t.ok(rc == 0 and (bare + "/a.c:\n") in u and "hush" not in u and "TOKEN" not in u and
         ".env: hidden, outside a git work tree" in u and ".ssh: hidden" in text(err),
         "-f DIR outside git: hidden entries left out and said", u[-600:] + text(err))
    e = ttlib.tempdir("tt-folder-empty-")
    with open(os.path.join(e, "only.bin"), "wb") as f:
        f.write(b"\x00\x00")
    refused(["-f", e, "-p", "x"], "no text file to attach", "a folder without text")
    rc, out, err = run(srv, ["--attach-max-files", "0", "-f", d, "-p", "x"])
    t.eq(rc, 2, "--attach-max-files 0: bad usage")
    t.ok("attach_max_files" in text(err), "--attach-max-files 0: named", text(err))

    # --- the chat: /attach, Tab, errors that keep the command, /detach, a pasted path ----------
    if not ttlib.Tmux.available():
        t.skip("the chat's /attach", "tmux is not installed", tool="tmux")
    else:
        w = ttlib.tempdir("tt-chat-attach-")
        with open(os.path.join(w, "notes-file.txt"), "w") as f:
            f.write("NOTES123 are here\n")
        os.makedirs(os.path.join(w, "sub dir"))
        with open(os.path.join(w, "sub dir", "dragged.py"), "w") as f:
            f.write("DRAGGED456 = 1\n")
        with ttlib.Tmux(110, 30) as tm:
            tm.run("cd %s && exec %s --no-save --no-cache" % (ttlib._shquote(w),
                                                             ttlib._shquote(ttlib.tokterm_path())),
                   ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("")}))
            t.ok(tm.wait_for("\u203a", 10) is not None, "chat: opens", tm.capture())
            tm.send_text("/attach notes-f")
            tm.send("Tab")
            t.ok(tm.wait_for("/attach notes-file.txt", 3) is not None,
                 "chat: Tab completes a path after /attach", tm.capture())
            tm.send("Enter")
            t.ok(tm.wait_for(re.compile(r"Attached \(1 waiting[\s\S]*1\. .*notes-file\.txt"), 3)
                 is not None and "notes-file.txt" in tm.capture(),
                 "chat: /attach FILE says what waits", tm.capture())
            # the same file again is said, not attached twice (until 2026-12 it was)
            tm.send_text("/attach notes-file.txt")
            tm.send("Enter")
            t.ok(tm.wait_for("already attached, not added again: notes-file.txt", 3)
                 is not None and "2. " not in tm.capture(),
                 "chat: /attach of the same file again adds nothing", tm.capture())
            tm.send_text("/attach missing.txt")
            tm.send("Enter")
            # the input row, below the message, gets the command back: wait for it too
            scr = tm.wait_for(re.compile(r"cannot attach missing\.txt[\s\S]*"
                                         r"\u203a /attach missing\.txt"), 3)
            t.ok(scr is not None, "chat: a missing file is an error", tm.capture())
            t.ok(scr is not None and "\u203a /attach missing.txt" in scr,
                 "chat: the command stays in the input to be corrected", scr or "")
            tm.send("C-u")
            tm.send_text("/attach " + url("/slow"))
            t0 = time.monotonic()
            tm.send("Enter")
            scr = tm.wait_for(re.compile("attach_url_timeout[\\s\\S]*" +
                                         re.escape("\u203a /attach " + url("/slow"))), 8)
            t.ok(scr is not None and time.monotonic() - t0 < 6,
                 "chat: a slow URL times out with the setting named", tm.capture())
            t.ok(scr is not None and ("\u203a /attach " + url("/slow")) in scr,
                 "chat: the URL stays in the input", scr or "")
            # Esc while a URL is fetched cancels it (the limit of 1.5 s would end it too,
            # with another message); keys typed meanwhile are kept
            tm.send("C-u")
            tm.send_text("/attach " + url("/slow"))
            tm.send("Enter")
            t.ok(tm.wait_for("Esc cancels", 3) is not None,
                 "chat: a fetch says Esc cancels it", tm.capture())
            tm.send_text("zq")
            tm.send("Escape")
            scr = tm.wait_for("cancelled while fetching from 127.0.0.1", 5)
            t.ok(scr is not None and scr.count("attach_url_timeout") == 1,
                 "chat: Esc cancels the fetch of a URL (not its time limit)", tm.capture())
            scr = tm.wait_for("\u203a /attach " + url("/slow") + "zq", 3)
            t.ok(scr is not None, "chat: the command stays, with the keys typed meanwhile",
                 tm.capture())
            tm.send("C-u")
            tm.send_text("/attach " + url("/page.html"))
            tm.send("Enter")
            t.ok(tm.wait_for("Attached (2 waiting", 5) is not None, "chat: /attach URL",
                 tm.capture())
            # a path dragged onto the terminal: a bracketed paste of a quoted path
            tm.tmux("set-buffer", "'%s'" % os.path.join(w, "sub dir", "dragged.py"))
            tm.tmux("paste-buffer", "-p", "-t", tm.target)
            t.ok(tm.wait_for("Attached (3 waiting", 3) is not None and
                 "A pasted path" in tm.capture(), "chat: a pasted path is attached, with a note",
                 tm.capture())
            t.ok(re.search("\u203a *\n", tm.capture()) is not None,
                 "chat: the pasted path leaves the input", tm.capture())
            tm.send_text("/attach")
            tm.send("Enter")
            t.ok(tm.wait_for(re.compile(r"Waiting for your next prompt:\s*\n.*1\. .*notes-file"
                                        r".*\n.*2\. .*page\.html.*\n.*3\. .*dragged", re.S), 3)
                 is not None, "chat: /attach alone lists them", tm.capture())
            tm.send_text("/detach 2")
            tm.send("Enter")
            t.ok(tm.wait_for("2 wait.", 3) is not None, "chat: /detach 2 drops one", tm.capture())
            n0 = len(srv.requests())
            tm.send_text("explain these")
            tm.send("Enter")
            deadline = time.monotonic() + 10
            while len(srv.requests()) <= n0 and time.monotonic() < deadline:
                time.sleep(0.05)
            u = user_text(srv)
            t.ok("NOTES123" in u and "DRAGGED456" in u and "Main heading" not in u and
                 "explain these" in u, "chat: the prompt carries what waited", u[:1500])
            t.ok(tm.wait_for("+ attached: notes-file.txt", 3) is not None,
                 "chat: the transcript shows them under the prompt", tm.capture())
            tm.send_text("/attach")
            tm.send("Enter")
            t.ok(tm.wait_for("No attachments wait", 3) is not None,
                 "chat: nothing waits after the prompt", tm.capture())
            tm.send("C-d")

pages.shutdown()
sys.exit(t.done())
