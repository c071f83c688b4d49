#!/usr/bin/env python3
"""End-to-end tests of `tokterm models` in each dialect (OpenAI, Ollama, Anthropic, Gemini):
the list in a pipe, --json, a terminal's table, the day's cache and --refresh, HTTP and
network errors. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
AKEY = "sk-ant-test-0123456789abcdefghijklmnopqrstuvwxyz"
GKEY = "AIzaSy-test-0123456789abcdefghijklmnopqrstu"
NO_KEYS = {"ANTHROPIC_API_KEY": None, "GEMINI_API_KEY": None, "GOOGLE_API_KEY": None,
           "OPENAI_BASE_URL": None}


def text(b):
    return b.decode("utf-8", "replace")


def as_json(out):
    try:
        return json.loads(out)
    except ValueError:
        return None


def lists(srv):
    """The model-list requests the server saw."""
    return [r for r in srv.requests(all=True) if r.get("models_list")]


def run(args, home, api="openai", env=None, **kw):
    e = dict(NO_KEYS)
    if api == "anthropic":
        e.update(ANTHROPIC_API_KEY=AKEY, OPENAI_API_KEY=None)
    elif api == "gemini":
        e.update(GEMINI_API_KEY=GKEY, OPENAI_API_KEY=None)
    e.update(env or {})
    return ttlib.run_tokterm(["--api", api] + args, env=e, home=home, **kw)


with ttlib.FakeServer() as srv:
    port = srv.port

    # --- OpenAI-compatible: /v1/models, a pipe, --json, the cache, --refresh ---------------------
    home = ttlib.make_home()
    base = "http://127.0.0.1:%d/models=gpt-4o|gpt-4o-mini|o3-mini/v1" % port
    rc, out, err = run(["--base-url", base, "models"], home)
    t.eq(rc, 0, "openai models: exit 0")
    t.eq(text(out), "gpt-4o\ngpt-4o-mini\no3-mini\n", "openai models: one id a line in a pipe")
    t.eq(text(err), "", "openai models: stderr quiet")
    got = lists(srv)
    t.eq(len(got), 1, "openai models: one request")
    r = got[-1] if got else {}
    t.ok(r.get("path", "").endswith("/v1/models"), "GET {base}/models", r.get("path"))
    t.eq((r.get("headers") or {}).get("authorization"),
         "<redacted len=%d>" % len("Bearer " + ttlib.TEST_KEY), "the key as a Bearer token")

    rc, out, err = run(["--base-url", base, "models", "--json"], home)
    j = as_json(out)
    t.eq(rc, 0, "models --json: exit 0")
    t.eq([m.get("id") for m in j] if isinstance(j, list) else j,
         ["gpt-4o", "gpt-4o-mini", "o3-mini"], "models --json: an array of objects with ids")
    t.eq(len(lists(srv)), 1, "the second call is answered from the cache (no request)")
    rc, out, err = run(["--json", "--base-url", base, "models"], home)
    t.ok(rc == 0 and isinstance(as_json(out), list), "tokterm --json models: JSON too", text(out))

    cache = os.path.join(home, ".cache", "tokterm", "models")
    blob = b""
    for f in os.listdir(cache) if os.path.isdir(cache) else ():
        with open(os.path.join(cache, f), "rb") as fh:
            blob += fh.read()
    t.ok(b"gpt-4o-mini" in blob, "the list is cached in $XDG_CACHE_HOME/tokterm/models",
         repr(os.listdir(os.path.join(home, ".cache"))) if os.path.isdir(
             os.path.join(home, ".cache")) else "no cache dir")
    t.ok(ttlib.TEST_KEY.encode() not in blob and b"sk-" not in blob, "the key is never cached")

    rc, out, err = run(["--base-url", base, "models", "--refresh"], home)
    t.eq((rc, len(lists(srv))), (0, 2), "models --refresh asks the server again")

    # the day counts by the wall clock ("fetched" in epoch seconds)
    def age_cache(home, seconds):
        d = os.path.join(home, ".cache", "tokterm", "models")
        for f in os.listdir(d):
            with open(os.path.join(d, f)) as fh:
                doc = json.load(fh)
            doc["fetched"] = time.time() - seconds
            with open(os.path.join(d, f), "w") as fh:
                json.dump(doc, fh)

    age_cache(home, 3600)
    n0 = len(lists(srv))
    rc, out, err = run(["--base-url", base, "models"], home)
    t.eq((rc, len(lists(srv))), (0, n0), "a list fetched an hour ago: from the cache")
    age_cache(home, 25 * 3600)
    rc, out, err = run(["--base-url", base, "models"], home)
    t.eq((rc, len(lists(srv))), (0, n0 + 1), "a list fetched 25 hours ago: asked again")

    # another base URL is another list
    base2 = "http://127.0.0.1:%d/models=other-model/v1" % port
    rc, out, err = run(["--base-url", base2, "models"], home)
    t.eq(text(out), "other-model\n", "another base URL: its own list, not the cached one")

    rc, out, err = ttlib.run_tokterm_tty(["--base-url", base, "models"], home=home,
                                         env=NO_KEYS)
    lines = text(out).replace("\r", "").splitlines()
    t.ok(rc == 0 and lines and lines[0].startswith("ID") and
         any(ln.startswith("o3-mini") for ln in lines), "on a terminal: a table with a header",
         text(out))
    # ... with what tokterm's tables know of each id: window and price (data/*.tsv), or "-"
    row = {ln.split()[0]: ln.split()[1:] for ln in lines[1:] if ln.strip()}
    t.ok(lines and lines[0].split()[-5:] == ["CONTEXT", "$/M", "IN", "$/M", "OUT"]
         and row.get("o3-mini") == ["200k", "$1.10", "$4.40"],
         "on a terminal: each model's context window and price per million tokens", text(out))

    # --- errors: HTTP (exit 3) and network (exit 4) ---------------------------------------------
    rc, out, err = run(["--base-url", "http://127.0.0.1:%d/status=401,error=Incorrect%%20API%%20key"
                        "/v1" % port, "models", "--refresh"], home)
    t.eq(rc, 3, "HTTP 401: exit 3")
    t.ok("401" in text(err) and "Incorrect API key" in text(err) and out == b"",
         "HTTP 401: the status and the server's message", text(err))
    # a 401 that echoes the key sent: starred, in models and in doctor (until 2026-12 both
    # showed it whole, while -p, --json and batch starred it)
    echo = ("http://127.0.0.1:%d/status=401,error=Incorrect%%20API%%20key%%20provided:%%20%s/v1"
            % (port, ttlib.TEST_KEY))
    rc, out, err = run(["--base-url", echo, "models", "--refresh"], home)
    # (the key is in the URL too, which the message shows: what follows "provided:" is checked)
    t.ok(rc == 3 and "Incorrect API key provided: ****" in text(err) and
         "provided: sk-" not in text(err),
         "HTTP 401 echoing the key: models stars it", text(err))
    rc, out, err = run(["--base-url", echo, "doctor", "--timeout", "5"], home)
    t.ok("Incorrect API key provided: ****" in text(out + err) and
         "provided: sk-" not in text(out + err),
         "HTTP 401 echoing the key: doctor stars it", text(out + err)[-600:])
    rc, out, err = run(["--base-url", "http://127.0.0.1:9/v1", "models"], home)
    t.eq(rc, 4, "no server: exit 4")
    t.ok("127.0.0.1:9" in text(err) and out == b"", "no server: says where", text(err))

    # --- Ollama: /api/tags when /v1/models is missing --------------------------------------------
    n0 = len(lists(srv))
    obase = "http://127.0.0.1:%d/ollama,models=llama3.2:3b|qwen2.5:7b/v1" % port
    rc, out, err = run(["--base-url", obase, "models"], home, env={"OPENAI_API_KEY": None})
    t.eq((rc, text(out)), (0, "llama3.2:3b\nqwen2.5:7b\n"), "ollama: models[].name of /api/tags")
    paths = [r["path"] for r in lists(srv)[n0:]]
    t.ok(paths and paths[-1].endswith("/api/tags"), "ollama: GET {root}/api/tags", repr(paths))

    # --- Anthropic: x-api-key, anthropic-version, display_name ----------------------------------
    home = ttlib.make_home()
    abase = "http://127.0.0.1:%d/models=claude-sonnet-4-5|claude-haiku-4-5/v1" % port
    rc, out, err = run(["--base-url", abase, "models", "--json"], home, api="anthropic")
    j = as_json(out)
    t.eq(rc, 0, "anthropic models: exit 0")
    t.eq(j, [{"id": "claude-sonnet-4-5", "name": "Claude-Sonnet-4-5"},
             {"id": "claude-haiku-4-5", "name": "Claude-Haiku-4-5"}],
         "anthropic models --json: data[].id and display_name")
    r = lists(srv)[-1]
    h = r.get("headers") or {}
    t.ok(r["path"].split("?")[0].endswith("/v1/models"),
         "anthropic: GET {base}/models", r["path"])
    t.eq(h.get("x-api-key"), "<redacted len=%d>" % len(AKEY), "anthropic: the key in x-api-key")
    t.ok("anthropic-version" in h and "authorization" not in h, "anthropic: its version header",
         json.dumps(h))
    n0 = len(lists(srv))
    rc, out, err = run(["--base-url", abase, "models"], home, api="anthropic")
    t.eq((rc, text(out), len(lists(srv))), (0, "claude-sonnet-4-5\nclaude-haiku-4-5\n", n0),
         "anthropic: the second call from the cache")
    pbase = "http://127.0.0.1:%d/page=2,models=c-1|c-2|c-3|c-4|c-5/v1" % port
    n0 = len(lists(srv))
    rc, out, err = run(["--base-url", pbase, "models"], home, api="anthropic")
    got = lists(srv)[n0:]
    t.eq((rc, text(out)), (0, "c-1\nc-2\nc-3\nc-4\nc-5\n"), "anthropic: every page")
    t.eq([r["path"].split("?", 1)[-1] for r in got],
         ["limit=1000", "limit=1000&after_id=c-2", "limit=1000&after_id=c-4"],
         "anthropic: the next pages by after_id while has_more")

    # --- Gemini: models/NAME, pages, embeddings left out ----------------------------------------
    home = ttlib.make_home()
    gbase = ("http://127.0.0.1:%d/page=2,models=gemini-2.5-flash|text-embedding-004|"
             "gemini-2.5-pro/v1beta" % port)
    n0 = len(lists(srv))
    rc, out, err = run(["--base-url", gbase, "models"], home, api="gemini")
    t.eq(rc, 0, "gemini models: exit 0")
    t.eq(text(out), "gemini-2.5-flash\ngemini-2.5-pro\n",
         "gemini: NAME of models/NAME, every page, no embedding model")
    got = lists(srv)[n0:]
    t.eq(len(got), 2, "gemini: two pages, two requests")
    t.ok(len(got) == 2 and "pageToken=2" in got[1]["path"], "gemini: the second by pageToken",
         repr([r["path"] for r in got]))
    h = got[0]["headers"] if got else {}
    t.eq(h.get("x-goog-api-key"), "<redacted len=%d>" % len(GKEY), "gemini: x-goog-api-key")
    rc, out, err = run(["--base-url", gbase, "models", "--json"], home, api="gemini")
    j = as_json(out) or [{}]
    t.eq((j[0].get("id"), j[0].get("input_token_limit"), j[0].get("output_token_limit")),
         ("gemini-2.5-flash", 1048576, 65536), "gemini --json: the token limits")
    t.eq(len(lists(srv)), n0 + 2, "gemini: the second call from the cache")
    rc, out, err = run(["--base-url", "http://127.0.0.1:%d/status=403/v1beta" % port, "models"],
                       home, api="gemini")
    t.eq(rc, 3, "gemini HTTP 403: exit 3")
    t.ok("403" in text(err), "gemini HTTP 403: said", text(err))

    # --- a hostile list: nothing a terminal obeys reaches it; a broken cache is asked again ------
    home = ttlib.make_home()
    hbase = "http://127.0.0.1:%d/models=ok-model|ev%%1B%%5D0%%3Bowned%%07il|two%%0Alines/v1" % port
    rc, out, err = run(["--base-url", hbase, "models"], home)
    t.eq((rc, text(out)), (0, "ok-model\nev^[]0;owned^Gil\ntwo^Jlines\n"),
         "pipe: controls shown in caret notation, one id a line")
    rc, out, err = ttlib.run_tokterm_tty(["--base-url", hbase, "models"], home=home,
                                         env=NO_KEYS)
    t.ok(rc == 0 and b"\x1b" not in out and b"\x07" not in out and b"owned" in out,
         "terminal: no escape byte from the server", repr(out))
    rc, out, err = ttlib.run_tokterm_tty(["--base-url", hbase, "models", "--json"], home=home,
                                         env=NO_KEYS)
    j = as_json(out.replace(b"\r", b""))
    t.ok(b"\x1b" not in out and isinstance(j, list) and len(j) == 3 and
         j[1]["id"] == "ev\x1b]0;owned\x07il", "--json on a terminal: escaped, the same ids",
         repr(out))
    cache = os.path.join(home, ".cache", "tokterm", "models")
    for f in os.listdir(cache):
        with open(os.path.join(cache, f), "w") as fh:
            fh.write('{"base_url": 12, "models": "junk')
    n0 = len(lists(srv))
    rc, out, err = run(["--base-url", hbase, "models"], home)
    t.eq((rc, len(lists(srv))), (0, n0 + 1), "a broken cache file: the server is asked again")

    # credentials in the base URL stay out of the cache and the messages; the server's words
    # with an escape are shown, not obeyed
    home = ttlib.make_home()
    ubase = "http://user:hunter2secret@127.0.0.1:%d/models=u-model/v1" % port
    rc, out, err = run(["--base-url", ubase, "models"], home)
    blob = b""
    cache = os.path.join(home, ".cache", "tokterm", "models")
    for f in os.listdir(cache) if os.path.isdir(cache) else ():
        with open(os.path.join(cache, f), "rb") as fh:
            blob += fh.read()
    t.ok(rc == 0 and b"u-model" in blob and b"hunter2secret" not in blob,
         "user:password@ of the base URL: not in the cache", repr(blob))
    rc, out, err = run(["--base-url", ubase.replace("/v1", "/status=401,error=no%1B%5B2J/v1")
                        .replace("models=u-model/", ""), "models"], home)
    t.ok(rc == 3 and b"hunter2secret" not in err and b"\x1b" not in err and b"^[[2J" in err,
         "an error: no password, the server's escape shown visibly", repr(err))

    # --- --json names the model the server reported --------------------------------------------
    rc, out, err = ttlib.run_tokterm(["--json", "-m", "gpt-4o", "-p", "hi"],
                                     env={"OPENAI_BASE_URL": srv.base("served=gpt-4o-2024-08-06")})
    t.eq((as_json(out) or {}).get("model"), "gpt-4o-2024-08-06",
         "--json: the model the server reported")

    # --- the chat: /model Tab completes from the cache, /use-local, the header ------------------
    if not ttlib.Tmux.available():
        t.skip("the chat in tmux", "no tmux", tool="tmux")
    else:
        stderr_path = os.path.join(ttlib.tempdir("tt-models-stderr-"), "stderr")

        def chat(tm, env, args=()):
            e = dict(env)
            home = e.pop("HOME", None)
            e["TT_TEST_STDERR"] = stderr_path
            tm.run(["sh", "-c", 'exec "$0" "$@" 2>>"$TT_TEST_STDERR"', ttlib.tokterm_path()] +
                   list(args), ttlib.clean_env(home=home, env=e))
            return tm.wait_for(re.compile("F1|\u203a"), 10)

        home = ttlib.make_home()
        cbase = srv.base("models=alpha-model|gamma-7b|gamma-13b")
        rc, out, err = run(["--base-url", cbase, "models"], home)  # fills the cache
        n0 = len(lists(srv))
        with ttlib.Tmux(80, 24) as tm:
            chat(tm, {"HOME": home, "OPENAI_BASE_URL": cbase})
            tm.send_text("/model alp")
            tm.send("Tab")
            scr = tm.wait_for("/model alpha-model", 3)
            t.ok(scr is not None, "/model Tab completes from `tokterm models`' cache",
                 tm.capture())
            tm.send("Enter")
            t.ok(tm.wait_for("alpha-model for the next", 3) is not None, "/model takes it",
                 tm.capture())
            tm.send_text("/model gamma")
            tm.send("Tab")
            scr = tm.wait_for("/model gamma-", 3)
            t.ok(scr is not None and "/model gamma-7b" not in scr,
                 "/model gamma Tab: the common part of two models", tm.capture())
            tm.send_text("1")
            tm.send("Tab")
            t.ok(tm.wait_for("/model gamma-13b", 3) is not None, "then the one that matches",
                 tm.capture())
            tm.send("C-u")
            tm.send("C-d")
            tm.wait_exit(5)
        t.eq(len(lists(srv)), n0, "Tab completion makes no request")

        # the header: the model the server reported when it is another
        with ttlib.Tmux(80, 24) as tm:
            chat(tm, {"OPENAI_BASE_URL": srv.base("served=gpt-4o-2024-08-06")},
                 ["-m", "gpt-4o"])
            tm.send_text("hello")
            tm.send("Enter")
            scr = tm.wait_for("gpt-4o \u2192 gpt-4o-2024-08-06", 10)
            t.ok(scr is not None, "the answer's header: asked \u2192 reported", tm.capture())
            tm.send("C-d")
            tm.wait_exit(5)

        # /use-local: a model the local server lists, not gpt-4o-mini
        lbase = srv.base("models=llama3.2:3b|qwen2.5:7b")
        n0 = len(srv.requests())
        with ttlib.Tmux(80, 24) as tm:
            chat(tm, {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None,
                      "TOKTERM_LOCAL_PROBE": "Ollama=" + lbase})
            tm.wait_for("press Enter", 5)
            tm.send_text("/use-local")
            tm.send("Enter")
            # the notice can be on the screen in part: wait for the model's name in it
            scr = tm.wait_for(re.compile(r"Using the local[\s\S]*its model \S+,"), 5)
            t.ok(scr is not None and "its model llama3.2:3b" in scr,
                 "/use-local: says which model it took", tm.capture())
            tm.send_text("local question")
            tm.send("Enter")
            done = tm.wait_for("\u2713", 10)
            r = srv.requests()
            t.ok(done is not None and len(r) == n0 + 1 and
                 r[-1]["body"].get("model") == "llama3.2:3b",
                 "/use-local: the request names the local server's first model",
                 r[-1]["body"].get("model") if len(r) > n0 else tm.capture())
            tm.send("C-d")
            tm.wait_exit(5)
        with open(stderr_path, "a+") as f:
            f.seek(0)
            errs = f.read()
        t.eq(errs, "", "the chat wrote nothing to stderr")

    rc, out, err = run(["models", "--bogus"], home)
    t.eq(rc, 2, "models --bogus: exit 2")

t.done()
