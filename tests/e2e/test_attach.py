#!/usr/bin/env python3
"""End-to-end tests of attachments (-f PATH): the request body the fake server receives in
each dialect for a text file, an image and a PDF; the errors (exit 2, nothing sent); resume
re-sends them exactly; one blob per file in the store however often it is sent; `show` and
`export`. Fixtures are made here: a real PNG (zlib) and a minimal PDF. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sqlite3  # noqa: E402
import time  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def png(w, h):
    raw = b"".join(b"\x00" + b"\x10\x80\xf0" * w for _ in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pdf(text):
    """A one-page PDF showing text (Helvetica), with a correct xref table."""
    stream = b"BT /F1 24 Tf 72 720 Td (" + text.encode() + b") Tj ET"
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = b"%PDF-1.4\n"
    offs = []
    for i, o in enumerate(objs):
        offs.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for o in offs:
        out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def text(b):
    return b.decode("utf-8", "replace")


work = ttlib.tempdir("tt-attach-")
MAIN_C = os.path.join(work, "main.c")
with open(MAIN_C, "w") as f:
    f.write("int main(void) { return 42; }\n")
IMG = png(64, 32)
PNG = os.path.join(work, "diagram.png")
with open(PNG, "wb") as f:
    f.write(IMG)
PDF_BYTES = pdf("Hello from the PDF")
PDF = os.path.join(work, "report.pdf")
with open(PDF, "wb") as f:
    f.write(PDF_BYTES)
B64 = base64.b64encode(IMG).decode()
PDF64 = base64.b64encode(PDF_BYTES).decode()
FENCED = "%s:\n```c\nint main(void) { return 42; }\n```\n\n" % MAIN_C
HAVE_PDFTOTEXT = shutil.which("pdftotext") is not None


def home_with(config):
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write(config)
    return home


def user_msg(body, dialect):
    """The last user message's content in a dialect's body."""
    if dialect == "gemini":
        return [c for c in body["contents"] if c["role"] == "user"][-1]["parts"]
    if dialect == "responses":
        return [m for m in body["input"] if m["role"] == "user"][-1]["content"]
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


with ttlib.FakeServer() as srv:
    def run(args, dialect="openai", home=None, **kw):
        env = {"OPENAI_API_KEY": ttlib.TEST_KEY, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
               "GEMINI_API_KEY": "AIzaSy-test-0123456789"}
        base = srv.base()
        if dialect == "gemini":
            base = "http://127.0.0.1:%d/v1beta" % srv.port
        env.update(kw.pop("env", {}))
        return ttlib.run_tokterm(["--api", dialect, "--base-url", base] + args, env=env,
                                 home=home, **kw)

    def last():
        return srv.requests()[-1]["body"]

    # --- a pipe and stdin as files: process substitution, -f - and /dev/stdin (until 2026-12
    # "not a regular file", and stdin was read as the prompt's context instead) -------------
    rc, out, err = run(["-f", "/dev/stdin", "-p", "what is it"], stdin="piped text\n")
    t.ok(rc == 0 and user_msg(last(), "openai") == "/dev/stdin:\n```\npiped text\n```\n\n"
         "what is it", "-f /dev/stdin: stdin is the file, not the prompt's context",
         text(err) + repr(user_msg(last(), "openai")))
    rc, out, err = run(["-f", "-", "-p", "what is it"], stdin="dash text\n")
    t.ok(rc == 0 and "```\ndash text\n```" in user_msg(last(), "openai") and
         user_msg(last(), "openai").endswith("what is it"), "-f -: stdin is the file",
         text(err) + repr(user_msg(last(), "openai")))
    n0 = len(srv.requests())
    rc, out, err = run(["-f", "-", "-f", "/dev/stdin", "-p", "x"], stdin="once\n")
    t.ok(rc == 2 and "already attached (a pipe or stdin can be read only once)" in text(err) and
         len(srv.requests()) == n0, "-f - -f /dev/stdin: refused, not an empty second file",
         text(err))
    fifo = os.path.join(work, "a.fifo")
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'printf "from a pipe\\n" > "$0"', fifo])
    rc, out, err = run(["-f", fifo, "-p", "and this"])
    writer.wait()
    t.ok(rc == 0 and "```\nfrom a pipe\n```" in user_msg(last(), "openai"),
         "-f FIFO (as -f <(cmd) gives): read to its end", text(err))
    n0 = len(srv.requests())
    rc, out, err = run(["-f", "/dev/zero", "-p", "x"])
    t.ok(rc == 2 and "more than 64.0 MiB: too large to attach" in text(err) and
         len(srv.requests()) == n0, "-f /dev/zero: too large, nothing sent", text(err))
    # the same file twice (another spelling of its path) goes once, as the chat's /attach
    # has it (until 2026-12 it was sent twice)
    dot = os.path.join(work, ".", "main.c")
    rc, out, err = run(["-f", MAIN_C, "-f", dot, "-p", "once?"])
    c = user_msg(last(), "openai")
    t.ok(rc == 0 and c == FENCED + "once?" and
         "already attached, not added again: " + dot in text(err),
         "-f main.c -f ./main.c: sent once, the second said", text(err) + json.dumps(c))

    # --- the done-when: text file + image, each dialect -----------------------------------------
    for dialect in ("openai", "responses", "anthropic", "gemini"):
        rc, out, err = run(["-f", MAIN_C, "-f", PNG, "-p", "what does this do?"], dialect)
        t.eq(rc, 0, "%s: -f main.c -f diagram.png -p: exit 0" % dialect)
        t.eq(text(err), "", "%s: stderr quiet" % dialect)
        c = user_msg(last(), dialect)
        want_text = FENCED + "what does this do?"
        if dialect == "openai":
            want = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + B64}},
                    {"type": "text", "text": want_text}]
        elif dialect == "responses":
            want = [{"type": "input_image", "image_url": "data:image/png;base64," + B64},
                    {"type": "input_text", "text": want_text}]
        elif dialect == "anthropic":
            want = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": B64}},
                    {"type": "text", "text": want_text}]
        else:
            want = [{"inline_data": {"mime_type": "image/png", "data": B64}},
                    {"text": want_text}]
        t.eq(c, want, "%s: the image part, then the file fenced with its path and the prompt"
             % dialect)

    # --- a text file alone: content stays a string ---------------------------------------------
    rc, out, err = run(["-f", MAIN_C, "-p", "review"])
    t.eq(user_msg(last(), "openai"), FENCED + "review", "text only: one string, fenced file first")

    # --- PDFs: documents where the dialect takes them --------------------------------------------
    for dialect, want in (
            ("anthropic", {"type": "document", "source": {"type": "base64",
                                                          "media_type": "application/pdf",
                                                          "data": PDF64},
                           "title": PDF}),
            ("gemini", {"inline_data": {"mime_type": "application/pdf", "data": PDF64}}),
            ("responses", None)):
        home = home_with("pdf = document\n") if dialect == "responses" else None
        rc, out, err = run(["-f", PDF, "-p", "summarise"], dialect, home=home)
        t.eq(rc, 0, "%s: a PDF: exit 0" % dialect)
        c = user_msg(last(), dialect)
        if dialect == "responses":
            want = {"type": "input_file", "filename": PDF,
                    "file_data": "data:application/pdf;base64," + PDF64}
        t.eq(c[0] if isinstance(c, list) else c, want, "%s: the PDF as a document" % dialect)
    home = home_with("pdf = document\n")
    rc, out, err = run(["-f", PDF, "-p", "summarise"], home=home)
    t.eq(user_msg(last(), "openai")[0],
         {"type": "file", "file": {"filename": PDF,
                                   "file_data": "data:application/pdf;base64," + PDF64}},
         "openai (pdf = document): a file part with file_data")

    # --- a compatible server: the PDF's text, or what to install --------------------------------
    if HAVE_PDFTOTEXT:
        pdf_home = ttlib.make_home()
        rc, out, err = run(["-f", PDF, "-p", "summarise"], home=pdf_home)
        c = user_msg(last(), "openai")
        t.eq(rc, 0, "compatible server + PDF: exit 0")
        t.ok(isinstance(c, str) and c.startswith(PDF + ":\n```\n") and
             "Hello from the PDF" in c and c.endswith("summarise"),
             "compatible server: the PDF's text (pdftotext), fenced", json.dumps(c))
        # show estimates what was sent, the text (until 2026-12 a document's ~1500 tokens)
        rc, out, err = ttlib.run_tokterm(["show", "1"], home=pdf_home)
        m = re.search(r"report\.pdf \(PDF, 1 page, \d+ B, ~(\d+) tokens?\)", text(out))
        t.ok(rc == 0 and m is not None and int(m.group(1)) < 100,
             "show: a PDF sent as its text counts as text", text(out))
    else:
        t.skip("compatible server: the PDF's text", "pdftotext not installed", "pdftotext")
        t.skip("show: a PDF sent as its text counts as text", "pdftotext not installed",
               "pdftotext")
    n0 = len(srv.requests())
    rc, out, err = run(["-f", PDF, "-p", "summarise"], env={"PATH": work})
    t.eq(rc, 2, "no pdftotext: exit 2 (usage)")
    t.ok("poppler-utils" in text(err) and "nothing was sent" in text(err),
         "no pdftotext: says what to install", text(err))
    t.eq(len(srv.requests()), n0, "no pdftotext: nothing sent")

    # a PDF that keeps pdftotext busy is given up (TOKTERM_PDFTOTEXT_TIMEOUT: 30 s by default)
    slow = os.path.join(work, "slowbin")
    os.makedirs(slow, exist_ok=True)
    with open(os.path.join(slow, "pdftotext"), "w") as f:
        f.write("#!/bin/sh\nexec sleep 60\n")
    os.chmod(os.path.join(slow, "pdftotext"), 0o755)
    n0 = len(srv.requests())
    rc, out, err = run(["-f", PDF, "-p", "summarise"],
                       env={"PATH": slow + ":/usr/bin:/bin", "TOKTERM_PDFTOTEXT_TIMEOUT": "1"},
                       timeout=20)
    t.ok(rc == 2 and "given up" in text(err) and len(srv.requests()) == n0,
         "a pdftotext that hangs: given up, exit 2, nothing sent", "%d %s" % (rc, text(err)))

    # --- errors: clear, exit 2, nothing sent -----------------------------------------------------
    big = os.path.join(work, "big.png")
    with open(big, "wb") as f:
        f.write(IMG[:-12])  # header kept; padded past OpenAI's limit below
        f.write(b"\0" * (21 * 1000 * 1000))
    binf = os.path.join(work, "blob.bin")
    with open(binf, "wb") as f:
        f.write(b"\x00\x01\x02binary\xff")
    unreadable = os.path.join(work, "secret.txt")
    with open(unreadable, "w") as f:
        f.write("x")
    os.chmod(unreadable, 0)
    nontext = os.path.join(work, "no-text")  # a folder attaches its text files: none here
    os.makedirs(nontext)
    with open(os.path.join(nontext, "x.bin"), "wb") as f:
        f.write(b"\x00")
    cutf = os.path.join(work, "cut.png")  # a PNG cut off before its header ends
    with open(cutf, "wb") as f:
        f.write(IMG[:10])
    crlf = os.path.join(work, "crlf.png")  # a PNG through LF -> CRLF: damaged, not cut off
    with open(crlf, "wb") as f:
        f.write(IMG.replace(b"\n", b"\r\n"))
    gif = os.path.join(work, "cut.gif")  # valid UTF-8, but a GIF cut off
    with open(gif, "wb") as f:
        f.write(b"GIF89a")
    cases = [(["-f", os.path.join(work, "missing.c")], "no such file", "a missing file"),
             (["-f", crlf], "crlf.png: a binary file", "a damaged PNG is not called cut off"),
             (["-f", gif], "cut.gif: a cut-off GIF image (6 bytes", "a cut-off GIF, not text"),
             (["-f", binf], "binary", "a binary file"),
             (["-f", cutf], "cut.png: a cut-off PNG image (10 bytes", "a cut-off PNG"),
             (["-f", nontext], "no text file", "a folder without text"),
             (["-f", big], "at most", "a 21 MB image")]
    if os.geteuid() != 0:
        cases.append((["-f", unreadable], "cannot read", "an unreadable file"))
    for args, word, name in cases:
        n0 = len(srv.requests())
        rc, out, err = run(args + ["-p", "hi"])
        t.eq(rc, 2, "%s: exit 2" % name)
        t.ok(word in text(err) and text(err).startswith("tokterm: attachment: ") and
             "nothing was sent" in text(err), "%s: a clear message" % name, text(err))
        t.eq(len(srv.requests()), n0, "%s: nothing sent" % name)
    n0 = len(srv.requests())
    small = os.path.join(work, "six.png")
    with open(small, "wb") as f:
        f.write(IMG[:-12] + b"\0" * (6 * 1024 * 1024))
    rc, out, err = run(["-f", small, "-p", "hi"], "anthropic")
    t.ok(rc == 2 and "Anthropic takes at most 3.8 MiB" in text(err),
         "anthropic: a 6 MiB image refused with its limit", text(err))
    rc, out, err = run(["-f", small, "-p", "hi"])
    t.eq(rc, 0, "the same 6 MiB image is fine for an OpenAI-compatible server")
    t.eq(len(srv.requests()), n0 + 1, "only that one was sent")

    # --- store: resume re-sends exactly; one blob per file ---------------------------------------
    home = ttlib.make_home()
    rc, out, err = run(["-f", MAIN_C, "-f", PNG, "-p", "first"], home=home)
    first = last()
    rc, out, err = run(["-c", "-p", "second"], home=home)
    t.eq(rc, 0, "-c after an attachment: exit 0")
    sent = last()["messages"]
    t.eq(sent[0], first["messages"][-1], "resume: the first turn re-sent exactly (file, image)")
    rc, out, err = run(["-f", PNG, "-p", "again the image"], home=home)
    rc, out, err = run(["-c", "-f", PNG, "-p", "and once more"], home=home)
    db = os.path.join(home, ".local", "share", "tokterm", "tokterm.db")
    con = sqlite3.connect(db)
    blobs = con.execute("SELECT count(*) FROM blobs").fetchone()[0]
    rows = con.execute("SELECT count(*) FROM attachments").fetchone()[0]
    pngs = con.execute("SELECT count(*) FROM blobs WHERE data = ?", (IMG,)).fetchone()[0]
    t.eq((blobs, rows, pngs), (2, 4, 1),
         "dedup: the image sent in 3 turns of 2 conversations is one blob (2 blobs, 4 rows)")
    con.close()

    rc, out, err = ttlib.run_tokterm(["export", "1", "--format", "json"], home=home)
    try:
        msgs = json.loads(out)["messages"]
    except (ValueError, KeyError):
        msgs = []
    atts = [a for m in msgs for a in m.get("attachments", [])]
    t.ok(any(a.get("name") == PNG and a.get("kind") == "image" and a.get("width") == 64 and
             a.get("size") == len(IMG) for a in atts) and len(atts) == 2,
         "export --format json: each user message lists its attachments", text(out)[:400])
    # and carries the files themselves (until 2026-12 only their hashes: a backup lost them)
    t.ok(any(a.get("name") == PNG and base64.b64decode(a.get("base64", "")) == IMG
             for a in atts) and all(("text" in a) != ("base64" in a) for a in atts),
         "export --format json: each file's bytes, as text or base64", text(out)[:400])

    # --- show and export: a compact line per attachment ------------------------------------------
    rc, out, err = ttlib.run_tokterm(["show", "1"], home=home)
    t.ok(("diagram.png (PNG image 64x32, %d B" % len(IMG)) in text(out) and
         "main.c (text, 30 B" in text(out), "show: one compact line per attachment", text(out))
    # show prints a line a file and reads no file's bytes (until 2026-12 it read them all:
    # 190 MB of memory to show the line of a 30 MB file)
    big_home = ttlib.make_home()
    big = os.path.join(work, "big.png")
    with open(big, "wb") as f:  # a PNG's header, then 12 MB the server takes as they come
        f.write(png(8, 8)[:33] + os.urandom(12 << 20))
    rc, out, err = run(["-f", big, "-p", "a big one"], home=big_home)
    peak = subprocess.run(
        [sys.executable, "-c", "import resource, subprocess, sys; "
         "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
         "print(r.returncode, r.stdout.count(b'big.png (PNG image 8x8, 12.0 MiB'), "
         "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
         ttlib.tokterm_path(), "show", "1"],
        env=ttlib.clean_env(big_home, {}), capture_output=True, timeout=60).stdout.split()
    rss_cap = 40 << 10 if not ttlib.built_with("asan") else 1 << 30  # ASan's own memory
    t.ok(rc == 0 and peak[:2] == [b"0", b"1"] and int(peak[2]) < rss_cap,
         "show: a 12 MB attachment's line without reading its bytes (peak RSS under 40 MiB)",
         "%d %r %s" % (rc, peak, text(err)))
    exp = os.path.join(work, "export")
    rc, out, err = ttlib.run_tokterm(["export", "1", "-o", os.path.join(exp, "conv.md")],
                                     home=home)
    files = sorted(os.listdir(exp)) if os.path.isdir(exp) else []
    t.ok(rc == 0 and "conv.md" in files, "export: the Markdown written", text(err))
    side = [f for f in files if f != "conv.md"]
    got = {}
    for d in side:
        p = os.path.join(exp, d)
        for f in (os.listdir(p) if os.path.isdir(p) else []):
            with open(os.path.join(p, f), "rb") as fh:
                got[f] = fh.read()
    t.ok(got.get("diagram.png") == IMG and got.get("main.c") is not None,
         "export: the attachments beside the Markdown", repr(sorted(got)))
    # a blank in the file's name: the links stay links (percent-encoded; until 2026-12
    # "[...](my export.files/a.c)", which no Markdown reader takes as a link)
    rc, out, err = ttlib.run_tokterm(["export", "1", "-o", os.path.join(exp, "my export.md")],
                                     home=home)
    with open(os.path.join(exp, "my export.md"), encoding="utf-8") as f:
        md = f.read()
    links = re.findall(r"\]\(([^)]*)\)", md)
    t.ok(rc == 0 and links and all(" " not in x and x.startswith("my%20export.files/")
                                   for x in links) and
         all(os.path.exists(os.path.join(exp, x.replace("%20", " "))) for x in links),
         "export to 'my export.md': its links hold no blank and lead to the files", repr(links))
    # the files cannot be written (a file where their folder goes): the export failed, and its
    # exit status says so (until 2026-12: the error on stderr, exit status 0)
    with open(os.path.join(exp, "blocked.files"), "w") as f:
        f.write("not a folder\n")
    rc, out, err = ttlib.run_tokterm(["export", "1", "-o", os.path.join(exp, "blocked.md")],
                                     home=home)
    t.ok(rc == 1 and "cannot write" in text(err) and "blocked.files/" in text(err),
         "export whose attachments cannot be written: exit status 1 and why", "%d %s" %
         (rc, text(err)))

    # --- the response cache: the files are part of its key -------------------------------------
    home = ttlib.make_home()
    other = os.path.join(work, "other.png")
    with open(other, "wb") as f:
        f.write(png(32, 64))
    n0 = len(srv.requests())
    run(["-f", PNG, "-p", "describe"], home=home)
    run(["-f", PNG, "-p", "describe"], home=home)
    t.eq(len(srv.requests()) - n0, 1, "cache: the same prompt and image again is a hit")
    rc, out, err = run(["-f", other, "-p", "describe"], home=home)
    t.eq(len(srv.requests()) - n0, 2, "cache: the same prompt with another image is asked anew")

    # --- batch: a line's "files" go with its "prompt"; a bad file fails that line alone -----------
    lines = "\n".join(json.dumps(x) for x in (
        {"id": 1, "prompt": "what?", "files": [MAIN_C, PNG]},
        {"id": 2, "prompt": "and this?", "files": [os.path.join(work, "missing.c")]},
        {"id": 3, "prompt": "no files"})) + "\n"
    n0 = len(srv.requests())
    jl = os.path.join(work, "in.jsonl")
    with open(jl, "w") as f:
        f.write(lines)
    rc, out, err = run(["batch", jl, "--concurrency", "1"])
    res = {}
    for ln in text(out).splitlines():
        try:
            j = json.loads(ln)
            res[j.get("id")] = j
        except ValueError:
            pass
    made = srv.requests()[n0:]
    bodies = [user_msg(r["body"], "openai") for r in made]
    t.ok(any(isinstance(c, list) and c[0].get("image_url", {}).get("url", "").endswith(B64) and
             c[-1].get("text") == FENCED + "what?" for c in bodies),
         "batch: a line's files sent as -f sends them", json.dumps(bodies)[:400])
    t.ok(res.get(2, {}).get("outcome") == "usage-error" and "no such file" in (res.get(2, {}).get("error")
                                                                           or ""),
         "batch: a missing file fails its line with the reason", text(out))
    t.ok(res.get(1, {}).get("outcome") == "complete" and res.get(3, {}).get("outcome") == "complete" and
         len(made) == 2, "batch: the other lines answered; the bad one sent nothing", text(out))

    # --- the chat: -f for the first message, a compact line each, /context --------------------
    if not ttlib.Tmux.available():
        t.skip("chat with -f in tmux", "tmux is not installed", tool="tmux")
    else:
        home = ttlib.make_home()
        env = ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base(),
                                              "TERM": "xterm-256color"})
        with ttlib.Tmux(120, 40) as tm:
            tm.run([ttlib.tokterm_path(), "-f", MAIN_C, "-f", PNG], env)
            # the files are rows below the notice: wait for the image's row
            scr = tm.wait_for(re.compile(r"go with your first message[\s\S]*"
                                         r"diagram\.png \(PNG image 64x32"), 10)
            t.ok(scr is not None and "diagram.png (PNG image 64x32" in scr,
                 "chat -f: the files listed before the first message", scr or tm.capture())
            n0 = len(srv.requests())
            tm.send_text("what is it?")
            tm.send("Enter")
            done = tm.wait_for("\u2713", 15)
            after = (done or "").split("what is it?", 1)[-1]
            t.ok(done is not None and "+ attached: %s (text, 30 B" % MAIN_C in after and
                 "+ attached: %s (PNG image 64x32, %d B, ~255 tokens)" % (PNG, len(IMG)) in after,
                 "chat: one compact line per attachment under the message", done or tm.capture())
            made = srv.requests()[n0:]
            c = user_msg(made[0]["body"], "openai") if made else None
            t.ok(isinstance(c, list) and c[0].get("type") == "image_url" and
                 c[-1].get("text") == FENCED + "what is it?",
                 "chat: the first message carries both files", json.dumps(c)[:300])
            tm.send_text("/context")
            tm.send("Enter")
            ctx = tm.wait_for(re.compile(r"Attachments:[\s\S]*Session:"), 10)  # the report's end
            t.ok(ctx is not None and "diagram.png (PNG image 64x32" in ctx and ": sent" in ctx,
                 "/context: the attachments with their tokens, sent", ctx or tm.capture())
            n0 = len(srv.requests())
            tm.send_text("/retry")
            tm.send("Enter")
            deadline = time.monotonic() + 15
            while len(srv.requests()) == n0 and time.monotonic() < deadline:
                time.sleep(0.1)
            made = srv.requests()[n0:]
            c = user_msg(made[0]["body"], "openai") if made else None
            t.ok(isinstance(c, list) and c[0].get("type") == "image_url" and
                 c[-1].get("text") == FENCED + "what is it?",
                 "/retry: the new version sends the files again", json.dumps(c)[:300])
            # /edit puts only the text in the input line: the hint says the files go too
            # (until 2026-12 nothing did, and they were sent again unseen)
            tm.wait_for(re.compile("version 2 of 2"), 15)
            tm.send_text("/edit")
            tm.send("Enter")
            scr = tm.wait_for("attached files go with it", 10)
            t.ok(scr is not None and "(its 2 attached files go with it)" in scr,
                 "/edit of a turn with files: the hint says they go with it", tm.capture())
            tm.send("C-c")

sys.exit(t.done())
