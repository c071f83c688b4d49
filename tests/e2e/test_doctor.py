#!/usr/bin/env python3
"""`tokterm doctor` against the fake server: one line per check with ok/warn/fail and what to
do, the exit status, the key never printed, server text sanitised, the database and the
terminal checks. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
LINE = re.compile(r"^(ok   |warn |fail ) (\S[^\n]{11}) (\[[^\]]+\] )?\S")  # "%-5s %-12s "
SUMMARY = re.compile(r"^(\d+) ok, (\d+) warn, (\d+) fail$")
RL = "h.x-ratelimit-limit-requests=500,h.x-ratelimit-remaining-requests=499," \
     "h.x-ratelimit-reset-requests=120ms,h.x-ratelimit-limit-tokens=30000," \
     "h.x-ratelimit-remaining-tokens=29000"


def lines_of(out):
    return out.decode("utf-8", "replace").splitlines()


def home_with(config):
    """A new HOME whose tokterm config (mode 600) is CONFIG."""
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    path = os.path.join(home, ".config", "tokterm", "config")
    with open(path, "w") as f:
        f.write(config)
    os.chmod(path, 0o600)
    return home


def find(lines, status, check, profile=None, piece=""):
    """The first line with this status, check name, profile and text piece, or None."""
    for ln in lines:
        m = LINE.match(ln)
        if not m or m.group(1).strip() != status or m.group(2).strip() != check:
            continue
        if profile is not None and (m.group(3) or "").strip() != "[%s]" % profile:
            continue
        if piece in ln:
            return ln
    return None


def well_formed(lines, name):
    body = lines[1:-1]
    bad = [ln for ln in body if not LINE.match(ln)]
    t.ok(lines and lines[0].startswith("tokterm doctor: tokterm ") and not bad,
         name + ": every line is 'ok|warn|fail CHECK ...'", "\n".join(bad or lines[:2]))
    m = SUMMARY.match(lines[-1]) if lines else None
    counts = [sum(1 for ln in body if ln.startswith(s + " ")) for s in ("ok", "warn", "fail")]
    t.ok(m is not None and [int(x) for x in m.groups()] == counts,
         name + ": the summary counts the lines (%s)" % (lines[-1] if lines else ""))
    return counts


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    cfgdir = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfgdir)
    cfg = os.path.join(cfgdir, "config")
    with open(cfg, "w") as f:
        f.write("profile = fake\nmodle = typo\n"
                "[fake]\nbase_url = %s\nmodel = gpt-4o-mini\n"
                "[nokey]\nbase_url = %s\napi_key_env = TT_DOCTOR_UNSET\n"
                "[closed]\nbase_url = http://127.0.0.1:9/v1\n"
                "[wrongmodel]\nbase_url = %s\nmodel = no-such-model\n"
                "[hostile]\nbase_url = %s\napi_key_cmd = echo sk-from-cmd-0123456789\n"
                "[role terse]\nsystem = Be terse.\n"  # a role and an MCP server: no profiles
                "[mcp none]\ncommand = /nonexistent/mcp-server\n"
                % (srv.base(RL + ",models=gpt-4o-mini%7Cother"),
                   srv.base("status=401,error=" + "Incorrect%20API%20key%20provided"),
                   srv.base(), srv.base("status=403,error=%1B%5D0%3Bowned%07%1B%5B2Jno")))
    os.chmod(cfg, 0o600)
    env = {"OPENAI_BASE_URL": None}
    before = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["doctor", "--timeout", "5"], home=home, env=env)
    lines = lines_of(out)
    t.eq(rc, 1, "a failing check: exit 1")
    well_formed(lines, "five profiles")
    t.ok(find(lines, "ok", "config", None, "5 profiles (fake, nokey, closed, wrongmodel, "
                                            "hostile)"), "config: syntax ok, the profiles named")
    t.ok(find(lines, "warn", "config", None, "unknown option 'modle'"),
         "config: an unknown option is a warning with the line", "\n".join(lines))
    t.ok(find(lines, "ok", "config perms", None, "mode 600"), "config perms: 600 is ok")
    t.ok(find(lines, "ok", "key source", "fake", "$OPENAI_API_KEY is set (%d characters)"
              % len(ttlib.TEST_KEY)), "key source: the variable and the key's length")
    t.ok(find(lines, "ok", "http", "fake", "HTTP 200, 2 models"), "http: GET /models answered")
    t.ok(find(lines, "ok", "key valid", "fake", "accepted"), "key valid: accepted")
    t.ok(find(lines, "ok", "model", "fake", "gpt-4o-mini is listed"), "model: listed")
    t.ok(find(lines, "ok", "rate limits", "fake", "499/500"),
         "rate limits: the headers it saw", "\n".join(lines))
    t.ok(find(lines, "ok", "rate limits", "fake", "tok 29k/30k"), "rate limits: tokens too")
    ln = find(lines, "fail", "key valid", "nokey", "HTTP 401")
    t.ok(ln and "Incorrect API key provided" in ln and "api_key_env" in ln,
         "key valid: a refused request says what the server said and what to set", ln)
    t.ok(find(lines, "ok", "key source", "nokey", "$TT_DOCTOR_UNSET is not set"),
         "key source: names the unset variable")
    ln = find(lines, "fail", "connect", "closed", "127.0.0.1:9")
    t.ok(ln and "running" in ln, "connect: a closed port fails with a hint", ln)
    t.ok(find(lines, "warn", "model", "wrongmodel", "no-such-model is not in the server's list"),
         "model: an unknown model is a warning")
    t.ok(find(lines, "ok", "key source", "hostile", "api_key_cmd printed a key"),
         "key source: api_key_cmd ran")
    ln = find(lines, "ok", "memory", None, "a fresh 4 KiB page takes")
    m = re.search(r"takes ([0-9.]+) us: the chat keeps a fast answer's copies in (huge|4 KiB) "
                  r"pages", ln or "")
    t.ok(m and (m.group(2) == "huge") == (float(m.group(1)) > 6.0),
         "memory: what a fresh page costs here, and the page size the chat takes for it", ln)
    for mode, size in (("never", "4 KiB"), ("always", "huge")):
        rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=home,
                                         env=dict(env, TOKTERM_THP=mode))
        t.ok(find(lines_of(out), "ok", "memory", None,
                  "TOKTERM_THP=%s: the chat keeps a fast answer's copies in %s pages"
                  % (mode, size)),
             "memory: TOKTERM_THP=%s decides instead" % mode)
    ln = find(lines, "fail", "key valid", "hostile", "HTTP 403")
    t.ok(ln and "^[]0;owned^G^[[2Jno" in ln, "server text with escapes is shown visibly", ln)
    t.ok(b"\x1b" not in out and b"\x07" not in out, "no escape byte from the server in the output")
    t.ok(ttlib.TEST_KEY.encode() not in out + err and b"sk-from-cmd" not in out + err,
         "no key is ever printed")
    reqs = [r for r in srv.requests(all=True)[before:] if r["path"].endswith("/models")]
    t.eq(len(reqs), 4, "one GET /models per reachable profile")
    auth = [r["headers"].get("authorization") for r in reqs]
    t.ok("<redacted len=%d>" % len("Bearer " + ttlib.TEST_KEY) in auth,
         "the key is sent to check it", auth)
    t.ok(find(lines, "ok", "database", None, "does not exist yet"), "database: not there yet")
    t.ok(find(lines, "ok", "data", None, "o200k_base"), "data: tokenizer table found")
    t.ok(find(lines, "ok", "theme", None, "dark"), "theme: the default theme loads")

    # Gemini's list: models[].name = "models/NAME", matched against the profile's NAME
    ghome = home_with("[gem]\napi = gemini\nbase_url = http://127.0.0.1:%d/models=gemini-2.5-flash"
                      "%%7Cgemini-2.5-pro/v1beta\nmodel = gemini-2.5-pro\n"
                      "[gemwrong]\napi = gemini\nbase_url = http://127.0.0.1:%d/v1beta\n"
                      "model = gemini-nope\n" % (srv.port, srv.port))
    genv = {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": None,
            "GEMINI_API_KEY": "AIzaSy-test-0123456789abcdefghijklmnopqrstu"}
    rc, out, err = ttlib.run_tokterm(["doctor"], home=ghome, env=genv)
    lines = lines_of(out)
    t.ok(find(lines, "ok", "http", "gem", "HTTP 200, 2 models"),
         "gemini: doctor counts models[] of GET /v1beta/models", "\n".join(lines))
    t.ok(find(lines, "ok", "model", "gem", "gemini-2.5-pro is listed"),
         "gemini: NAME found as models/NAME")
    t.ok(find(lines, "warn", "model", "gemwrong", "gemini-nope is not in the server's list"),
         "gemini: an unknown model is a warning")

    # a base_url that answers a web page (a UI, a login portal, a path short of /v1): not
    # the API, whatever its 200 says (until 2026-12: "ok http ... HTTP 200, 0 models" and
    # "ok key valid", exit 0, while every chat request failed with exit 3)
    phome = home_with("[page]\nbase_url = %s\n"
                      % srv.base("ctype=text/html,raw=%3Chtml%3Esign%20in%3C%2Fhtml%3E"))
    rc, out, err = ttlib.run_tokterm(["doctor", "--timeout", "5"], home=phome,
                                     env={"OPENAI_BASE_URL": None})
    lines = lines_of(out)
    well_formed(lines, "a web page")
    ln = find(lines, "fail", "http", "page", "HTTP 200 but not a model list (text/html)")
    t.ok(ln and "base_url ends where the API starts" in ln,
         "a web page for /models: a failed http check that names base_url", "\n".join(lines))
    t.ok(not find(lines, "ok", "key valid", "page"), "a web page: no word of the key's validity")
    t.eq(rc, 1, "a web page for /models: exit 1")

    # a key pasted where a variable's name goes (keys =, api_key_env =, state_password_env
    # =): refused, exit 2, and never shown (until 2026-12 "the variable sk-... is not set" on
    # stderr and in doctor's line)
    pasted = "sk-proj-PASTED0123456789abcdef"
    for name, setting in (("keys (a bare item)", "keys = env:OPENAI_API_KEY, %s" % pasted),
                          ("keys (env:)", "keys = env:%s" % pasted),
                          ("api_key_env", "api_key_env = %s" % pasted),
                          ("state_password_env", "state = redis://127.0.0.1:1/0\n"
                                                 "state_password_env = %s" % pasted)):
        khome = home_with("[k]\nbase_url = %s\n%s\n" % (srv.base(), setting))
        rc, out, err = ttlib.run_tokterm(["-P", "k", "--no-save", "-p", "hi"], home=khome,
                                         env={"OPENAI_BASE_URL": None})
        rc2, dout, derr = ttlib.run_tokterm(["doctor", "--offline"], home=khome,
                                            env={"OPENAI_BASE_URL": None})
        t.ok(rc == 2 and b"not shown" in err and pasted.encode() not in out + err,
             "a key pasted in %s: exit 2, refused without showing it" % name, err.decode())
        t.ok(rc2 == 1 and pasted.encode() not in dout + derr,
             "a key pasted in %s: doctor fails, without showing it" % name,
             (dout + derr).decode())

    # an https base_url behind a proxy that refuses the tunnel (407): a failed proxy check
    # and no tls or http line (until 2026-12 "ok tls: certificate verified" though no
    # handshake had happened, then "the server ... did not answer: is it busy?")
    psock = socket.socket()
    psock.bind(("127.0.0.1", 0))
    psock.listen(4)

    def proxy407():
        while True:
            try:
                c, _ = psock.accept()
            except OSError:
                return
            try:
                c.settimeout(5)
                c.recv(65536)
                c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: "
                          b"Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            c.close()
    threading.Thread(target=proxy407, daemon=True).start()
    xhome = home_with("[behind]\nbase_url = https://api.proxied.invalid/v1\n")
    rc, out, err = ttlib.run_tokterm(
        ["doctor", "--timeout", "5"], home=xhome,
        env={"OPENAI_BASE_URL": None, "NO_PROXY": None, "no_proxy": None,
             "HTTPS_PROXY": "http://carol:pr0xy-pw@127.0.0.1:%d" % psock.getsockname()[1]})
    psock.close()
    lines = lines_of(out)
    well_formed(lines, "a proxy's 407")
    ln = find(lines, "fail", "proxy", "behind", "refused the tunnel to api.proxied.invalid: "
                                                 "HTTP 407")
    t.ok(ln and "user and password" in ln and "pr0xy-pw" not in out.decode(),
         "a proxy's 407: a failed proxy check that says what to set", "\n".join(lines))
    t.ok(not find(lines, "ok", "tls", "behind") and not find(lines, "fail", "http", "behind"),
         "a proxy's 407: no tls line (no handshake happened) and no http line")
    t.eq(rc, 1, "a proxy's 407: exit 1")

    # one config, three dialects: each profile checked against its own endpoint, with its own
    # key variable and headers (not the dialect of the default profile)
    mhome = home_with("profile = oa\n[oa]\nbase_url = %s\nmodel = gpt-4o-mini\n"
                      "[ant]\napi = anthropic\nbase_url = %s\nmodel = claude-haiku-4-5\n"
                      "[gem]\napi = gemini\nbase_url = http://127.0.0.1:%d/"
                      "models=gemini-2.5-flash/v1beta\nmodel = gemini-2.5-flash\n"
                      % (srv.base("models=gpt-4o-mini"), srv.base("models=claude-haiku-4-5"),
                         srv.port))
    akey, gkey = "sk-ant-doctor-0123456789abcdef", "AIzaSy-doctor-0123456789abcdefghijk"
    menv = {"OPENAI_BASE_URL": None, "ANTHROPIC_API_KEY": akey, "GEMINI_API_KEY": gkey}
    before = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["doctor"], home=mhome, env=menv)
    lines = lines_of(out)
    t.eq(rc, 0, "three dialects: all fine, exit 0")
    for prof, model, var in (("oa", "gpt-4o-mini", "OPENAI_API_KEY"),
                             ("ant", "claude-haiku-4-5", "ANTHROPIC_API_KEY"),
                             ("gem", "gemini-2.5-flash", "GEMINI_API_KEY")):
        t.ok(find(lines, "ok", "key source", prof, "$" + var + " is set"),
             "three dialects: [%s] takes its key from $%s" % (prof, var), "\n".join(lines))
        t.ok(find(lines, "ok", "model", prof, model + " is listed"),
             "three dialects: [%s] finds %s in its server's list" % (prof, model))
    got = {}
    for r in srv.requests(all=True)[before:]:
        if r["method"] == "GET":
            got[r["path"].split("/")[1].split("=")[-1]] = (r["path"], r["headers"])
    p, h = got.get("gpt-4o-mini", ("", {}))
    t.ok(p.endswith("/v1/models") and h.get("authorization") == "<redacted len=%d>"
         % len("Bearer " + ttlib.TEST_KEY) and "x-api-key" not in h,
         "three dialects: [oa] GET /v1/models with a bearer key", (p, h))
    p, h = got.get("claude-haiku-4-5", ("", {}))
    t.ok(p.endswith("/v1/models") and h.get("x-api-key") == "<redacted len=%d>" % len(akey)
         and h.get("anthropic-version") == "2023-06-01" and "authorization" not in h,
         "three dialects: [ant] GET /v1/models with x-api-key and anthropic-version", (p, h))
    p, h = got.get("gemini-2.5-flash", ("", {}))
    t.ok(p.endswith("/v1beta/models") and h.get("x-goog-api-key") == "<redacted len=%d>"
         % len(gkey) and "authorization" not in h,
         "three dialects: [gem] GET /v1beta/models with x-goog-api-key", (p, h))

    # -P: one profile; everything fine: exit 0
    before = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["-P", "fake", "doctor"], home=home, env=env)
    lines = lines_of(out)
    t.eq(rc, 0, "-P fake: all fine, exit 0")
    t.ok(all("[nokey]" not in ln and "[closed]" not in ln for ln in lines),
         "-P fake: only that profile is checked")
    t.eq(len(srv.requests(all=True)) - before, 1, "-P fake: one request")

    # --offline: no network
    before = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=home, env=env)
    t.eq(len(srv.requests(all=True)) - before, 0, "--offline: no request leaves")
    t.ok(find(lines_of(out), "ok", "key source", "fake", "is set"), "--offline: keys still checked")

    # a server that takes the connection and never answers: the hint is not about the URL
    # (until 2026-12 it said to check that base_url ends where the API starts)
    hhome = ttlib.make_home()
    rc, out, err = ttlib.run_tokterm(["doctor", "--timeout", "1"], home=hhome,
                                     env={"OPENAI_API_KEY": "sk-test",
                                          "OPENAI_BASE_URL": srv.base("hang=1,stall_s=3")})
    ln = find(lines_of(out), "fail", "http", None, "did not answer")
    t.ok(ln is not None and "ends where the API starts" not in (ln or ""),
         "doctor, a server that hangs: says it did not answer", out.decode())

    # a key pool: reported by labels, the first key checked
    phome = ttlib.make_home()
    os.makedirs(os.path.join(phome, ".config", "tokterm"))
    with open(os.path.join(phome, ".config", "tokterm", "config"), "w") as f:
        f.write("[pool]\nbase_url = %s\nkeys = env:TT_POOL_A, cmd:echo sk-pool-from-cmd-99\n"
                "[nopool]\nbase_url = %s\nkeys = env:TT_POOL_UNSET\n" % (srv.base(), srv.base()))
    before = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["doctor"], home=phome,
                                     env={"OPENAI_BASE_URL": None, "TT_POOL_A": "sk-pool-a-1234"})
    lines = lines_of(out)
    t.ok(find(lines, "ok", "key source", "pool", "key pool of 2 (TT_POOL_A, cmd1)"),
         "key pool: its labels, never its keys", "\n".join(lines))
    auth = [r["headers"].get("authorization") for r in srv.requests(all=True)[before:]]
    t.ok("<redacted len=%d>" % len("Bearer sk-pool-a-1234") in auth, "key pool: the first key "
         "is the one checked", auth)
    t.ok(find(lines, "fail", "key source", "nopool", "TT_POOL_UNSET is not set"),
         "key pool: an unset variable fails")
    t.ok(b"sk-pool" not in out + err, "key pool: no key printed")

    # permissions: a key in a file others can read
    with open(cfg, "a") as f:
        f.write("[filekey]\nbase_url = %s\napi_key = sk-written-in-the-file\n" % srv.base())
    os.chmod(cfg, 0o644)
    rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=home, env=env)
    lines = lines_of(out)
    ln = find(lines, "fail", "config perms", None, "holds an API key")
    t.ok(ln and "chmod 600" in ln, "config perms: a readable key fails with chmod 600", ln)
    t.ok(find(lines, "warn", "key source", "filekey", "written in the config file"),
         "key source: a key in the file is a warning")
    t.ok(b"sk-written-in-the-file" not in out, "the key in the file is not printed")
    os.chmod(cfg, 0o666)
    rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=home, env=env)
    t.ok(find(lines_of(out), "fail", "config perms", None, "writable by others"),
         "config perms: writable by others fails")

    # garbage config
    with open(cfg, "wb") as f:
        f.write(b"model = x\n\x1b[2J\x07 garbage\n")
    os.chmod(cfg, 0o600)
    rc, out, err = ttlib.run_tokterm(["doctor"], home=home, env=env)
    lines = lines_of(out)
    t.eq(rc, 1, "garbage config: exit 1")
    well_formed(lines, "garbage config")
    ln = find(lines, "fail", "config", None, "config:2:")
    t.ok(ln and "^[[2J^G" in ln and "fix that line" in ln,
         "garbage config: file, line, the text made visible, what to do", ln)
    t.ok(find(lines, "ok", "locale", None, "UTF-8"), "garbage config: the other checks still run")

    # --config naming a file that is not there: a failure, not "no config file"
    rc, out, err = ttlib.run_tokterm(["--config", cfg + ".missing", "doctor", "--offline"],
                                     home=home, env=env)
    lines = lines_of(out)
    t.eq(rc, 1, "--config to a missing file: exit 1")
    t.ok(find(lines, "fail", "config", None, "no such file (given with --config)"),
         "--config to a missing file: a failed check", "\n".join(lines))

    # database: a real one, a broken one
    os.remove(cfg)
    dbdir = ttlib.tempdir("tt-doc-db-")
    db = os.path.join(dbdir, "chat.db")
    rc, out, err = ttlib.run_tokterm(["--db", db, "-p", "hello"],
                                     env={"OPENAI_BASE_URL": srv.base()})
    rc, out, err = ttlib.run_tokterm(["--db", db, "doctor", "--offline"], home=home)
    lines = lines_of(out)
    t.eq(rc, 0, "database ok: exit 0")
    t.ok(find(lines, "ok", "database", None, "integrity ok, schema"), "database: integrity ok",
         "\n".join(lines))
    t.ok(find(lines, "ok", "database", None, "1 conversation"), "database: counts conversations")
    t.ok(find(lines, "ok", "db perms", None, "mode 600"), "database: mode 600")
    # the word index: nothing to say after a chat (the next search applies its two changes);
    # 2,500 messages written by another program are queued, and a search applies 2,000
    t.ok(not find(lines, "ok", "word index"), "word index: nothing to say after a chat",
         "\n".join(lines))
    con = sqlite3.connect(db)
    with con:
        con.executemany("INSERT INTO messages(conversation_id, role, created, content) "
                        "VALUES(1, 'user', 1, ?)", [("imported message %d" % i,)
                                                    for i in range(2500)])
    con.close()
    rc, out, err = ttlib.run_tokterm(["--db", db, "doctor", "--offline"], home=home)
    ln = find(lines_of(out), "ok", "word index", None, "changes to apply")
    t.ok(ln and "2502 changes" in ln and "applies 2000" in ln,
         "word index: 2,502 changes queued, and what a search does with them", ln)
    rc, out, err = ttlib.run_tokterm(["--db", db, "search", "imported"], home=home)
    t.ok(rc == 0 and b"imported" in out, "a search finds the imported messages meanwhile")
    rc, out, err = ttlib.run_tokterm(["--db", db, "doctor", "--offline"], home=home)
    t.ok(not find(lines_of(out), "ok", "word index"),
         "word index: 502 left, nothing to say", out.decode(errors="replace"))
    junk = os.path.join(dbdir, "junk.db")
    with open(junk, "wb") as f:
        f.write(b"not sqlite at all\n" * 300)
    rc, out, err = ttlib.run_tokterm(["--db", junk, "doctor", "--offline"], home=home)
    ln = find(lines_of(out), "fail", "database", None, "junk.db")
    t.eq(rc, 1, "database not SQLite: exit 1")
    t.ok(ln and "move it away" in ln, "database not SQLite: fail with what to do", ln)
    # an intact database on a read-only filesystem (no WAL index can be made beside it): read
    # as `ls` reads it, immutable (until 2026-12: "integrity check failed: unable to open
    # database file; move it away (the next chat creates a new one)")
    if os.geteuid() == 0 and shutil.which("mount"):
        mnt = ttlib.tempdir("tt-doc-ro-")
        if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt],
                           stderr=subprocess.DEVNULL) == 0:
            shutil.copyfile(db, os.path.join(mnt, "chat.db"))
            os.chmod(os.path.join(mnt, "chat.db"), 0o600)
            subprocess.call(["mount", "-o", "remount,ro", mnt])
            rc, out, err = ttlib.run_tokterm(["--db", os.path.join(mnt, "chat.db"), "doctor",
                                              "--offline"], home=home)
            subprocess.call(["umount", mnt])
            lines = lines_of(out)
            t.ok(rc == 0 and find(lines, "ok", "database", None, "integrity ok") and
                 find(lines, "warn", "db perms", None, "read-only filesystem"),
                 "database on a read-only filesystem: intact, and why it is not writable",
                 "\n".join(lines))
        else:
            t.skip("database on a read-only filesystem", "cannot mount a tmpfs")
    else:
        t.skip("database on a read-only filesystem", "needs root and mount")
    other = os.path.join(dbdir, "other.db")
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
    rc, out, err = ttlib.run_tokterm(["--db", other, "doctor", "--offline"], home=home)
    t.ok(find(lines_of(out), "fail", "database", None, "not a tokterm database"),
         "an SQLite file of another program is not a tokterm database")

    # bad usage
    rc, out, err = ttlib.run_tokterm(["doctor", "--frobnicate"], home=home)
    t.eq(rc, 2, "doctor --frobnicate: exit 2")
    rc, out, err = ttlib.run_tokterm(["doctor", "--help"], home=home)
    t.ok(rc == 0 and b"--offline" in out, "doctor --help")

    # locale that is not UTF-8
    rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=home,
                                     env={"LC_ALL": "C", "LANG": "C"})
    ln = find(lines_of(out), "warn", "locale", None, "not UTF-8")
    t.ok(ln and "LANG=C.UTF-8" in ln, "locale C: a warning that says what to set", ln)

    # MCP servers: each section started and its tools listed; the enabled names checked
    hostile = os.path.join(ttlib.srcdir(), "mcp", "hostile.py")
    started = os.path.join(ttlib.tempdir("tt-doc-mcp-"), "pid")
    mhome = home_with("[default]\nmcp = good, typo\n\n[mcp good]\ncommand = %s %s --pidfile %s\n"
                      "\n[mcp gone]\ncommand = /nonexistent/mcp-server --stdio\n"
                      % (sys.executable, hostile, started))
    rc, out, err = ttlib.run_tokterm(["doctor", "--offline"], home=mhome, env=env)
    lines = lines_of(out)
    well_formed(lines, "doctor --offline with MCP servers")
    t.ok(find(lines, "ok", "mcp", "good", "not started (--offline)")
         and not os.path.exists(started), "mcp --offline: read, not started",
         "\n".join(lines))
    rc, out, err = ttlib.run_tokterm(["doctor", "--timeout", "20"], home=mhome, env=env)
    lines = lines_of(out)
    well_formed(lines, "doctor with MCP servers")
    ln = find(lines, "ok", "mcp", "good", "hostile")
    t.ok(ln and re.search(r"MCP \d{4}-\d\d-\d\d, \d+ tools \(\d+ ms\)", ln)
         and os.path.exists(started), "mcp: a server that starts: its name, protocol and tools",
         "\n".join(lines))
    ln = find(lines, "fail", "mcp", "gone", "no such executable")
    t.ok(ln and "fix [mcp gone], or see tokterm mcp list gone" in ln
         and "gone: cannot" not in ln, "mcp: a server that cannot run fails, said once", ln)
    ln = find(lines, "fail", "mcp", None, "no [mcp typo] section")
    t.ok(ln and "fix the mcp = line" in ln, "mcp: an enabled name without a section fails", ln)
    t.eq(rc, 1, "doctor with a failing MCP server: exit 1")
    # -P: the profile's servers, each name on its own (a typo does not hide the good one)
    with open(os.path.join(mhome, ".config", "tokterm", "config"), "a") as f:
        f.write("\n[work]\nmcp = good, typo2\n")
    rc, out, err = ttlib.run_tokterm(["-P", "work", "doctor", "--offline"], home=mhome, env=env)
    lines = lines_of(out)
    t.ok(find(lines, "ok", "mcp", "good", "not started") and find(lines, "fail", "mcp", None,
                                                                   "no [mcp typo2] section")
         and not find(lines, "ok", "mcp", "gone"),
         "-P work: its servers only, the good one checked beside the typo", "\n".join(lines))
    rc, out, err = ttlib.run_tokterm(["--mcp", "gone", "doctor", "--offline"], home=mhome,
                                     env=env)
    lines = lines_of(out)
    t.ok(find(lines, "ok", "mcp", "gone", "not started") and not find(lines, "ok", "mcp", "good")
         and not find(lines, "fail", "mcp", None, "typo"),
         "--mcp gone: that server only, in place of the profile's list", "\n".join(lines))

# the terminal check, on a real terminal
if not ttlib.Tmux.available():
    t.skip("doctor on a terminal", "tmux is not installed", tool="tmux")
else:
    with ttlib.Tmux(100, 30) as tm:
        tm.run([ttlib.tokterm_path(), "doctor", "--offline"], ttlib.clean_env())
        # 90 s: with two full test runs beside it, the screen was once still blank after 10 s,
        # and once (TERM=vt100, 2026-12) after 30 s; a run that ends sooner passes sooner
        screen = tm.wait_for(re.compile(r"\d+ ok, \d+ warn, \d+ fail"), 90) or tm.capture()
        t.ok(find(screen.splitlines(), "ok", "terminal", None,
                  "xterm-256color, 256 colours, 100x30"),
             "terminal: TERM, colours and size", screen)
        tm.kill()
    # a terminal without cursor movement: the chat will be the line chat, and doctor says so
    for term, ok in (("dumb", False), ("vt100", True)):
        with ttlib.Tmux(100, 30) as tm:
            tm.run(["sh", "-c", 'TERM="$1" exec "$0" doctor --offline', ttlib.tokterm_path(),
                    term], ttlib.clean_env())
            screen = tm.wait_for(re.compile(r"\d+ ok, \d+ warn, \d+ fail"), 90) or tm.capture()
            joined = screen.replace("\n", "")
            if ok:
                t.ok(find(screen.splitlines(), "ok", "terminal", None, "vt100, 0 colours"),
                     "terminal: vt100 has no colours but holds the chat", screen)
            else:
                t.ok("warn  terminal" in joined and "TERM=dumb cannot move the cursor: the chat "
                     "runs as the line chat" in joined, "terminal: TERM=dumb is the line chat",
                     screen)
            tm.kill()
    with ttlib.Tmux(30, 20) as tm:
        tm.run([ttlib.tokterm_path(), "doctor", "--offline"], ttlib.clean_env())
        screen = tm.wait_for(re.compile(r"\d+ ok, \d+ warn, \d+ fail"), 90) or tm.capture()
        joined = screen.replace("\n", "")
        t.ok("warn  terminal" in joined and "only 30x20" in joined,
             "terminal: a narrow window is a warning", screen)

# Every config example of the docs, as a reader copies it (inline "# comments" and all), is a
# config doctor reads without a fault, whose profiles' models hold no comment: a '#' or ';'
# after a blank starts one (until 2026-12 the Ollama page's example failed with
# "include_usage must be true or false, not 'false   # older Ollama versions...'", and its
# model went out as "qwen3:8b   # any model from `ollama list`").
DOCS = [os.path.join(ttlib.srcdir(), "..", p) for p in ["README.md", "docs/GUIDE.md"]]
PROV = os.path.join(ttlib.srcdir(), "..", "docs", "providers")
DOCS += sorted(os.path.join(PROV, f) for f in os.listdir(PROV) if f.endswith(".md"))
blocks = []
for path in DOCS:
    with open(path, encoding="utf-8") as f:
        for m in re.finditer(r"```ini\n(.*?)```", f.read(), re.S):
            blocks.append((os.path.relpath(path, os.path.join(ttlib.srcdir(), "..")),
                           m.group(1)))
t.ok(len(blocks) >= 15, "docs: the config examples are found (%d)" % len(blocks))
commented = 0
for where, text in blocks:
    commented += bool(re.search(r"[ \t][#;]", text))
    home = home_with(text)
    r = ttlib.run_tokterm(["doctor", "--offline"], home=home, env={"OPENAI_API_KEY": "sk-x"},
                          timeout=60)
    lines = lines_of(r[1])
    faults = [ln for ln in lines if ln.startswith("fail ") and " config" in ln]
    models = [ln for ln in lines if re.match(r"^ok +profile ", ln)]
    t.ok(not faults and models and not any(re.search(r"model [^,]*[#;]", ln) for ln in models),
         "docs: %s's example reads as meant (%d profiles)" % (where, len(models)),
         "\n".join(faults + models) or r[1].decode() + r[2].decode())
t.ok(commented >= 5, "docs: %d examples hold inline comments" % commented)

# profiles that none selects: doctor warns, and a run names them (until 2026-12 doctor said ok
# and the run asked for an OpenAI key, pointing at the default config path)
home = home_with("[a]\nbase_url = http://127.0.0.1:9/v1\napi_key_env = TT_A\n"
                 "[b]\nbase_url = http://127.0.0.1:8/v1\n")
r = ttlib.run_tokterm(["doctor", "--offline"], home=home, env={"OPENAI_API_KEY": None},
                      timeout=60)
t.ok(find(lines_of(r[1]), "warn", "config", None, "no profile is selected"),
     "doctor: profiles but none selected is a warning", r[1].decode())
rc, out, err = ttlib.run_tokterm(["-p", "x"], home=home, env={"OPENAI_API_KEY": None})
t.ok(rc == 2 and b"select one of the profiles of" in err and b"-P a" in err and
     b"it has a, b" in err, "no key, profiles unselected: the run names them", err.decode())

sys.exit(t.done())
