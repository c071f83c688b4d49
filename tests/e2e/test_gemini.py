#!/usr/bin/env python3
"""End-to-end tests of the Gemini dialect (--api gemini, profile `api = gemini`): the real
binary against the fake server's /v1beta/models/MODEL:streamGenerateContent. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = "AIzaSy-test-0123456789abcdefghijklmnopqrstu"


def base(srv, spec=""):
    return "http://127.0.0.1:%d%s/v1beta" % (srv.port, "/" + spec if spec else "")


def run(srv, spec, args, key_var="GEMINI_API_KEY", **kw):
    """Only a Gemini key; the OpenAI ones gone or pointing elsewhere."""
    env = {"OPENAI_API_KEY": None, "GEMINI_API_KEY": None, "GOOGLE_API_KEY": None,
           "OPENAI_BASE_URL": "http://127.0.0.1:9/never"}
    env[key_var] = KEY
    return ttlib.run_tokterm(["--api", "gemini", "--base-url", base(srv, spec)] + args,
                             env=env, **kw)


def last(srv):
    return srv.requests()[-1]


def text(b):
    return b.decode("utf-8", "replace")


def as_json(out):
    try:
        return json.loads(out)
    except ValueError:
        return {}


with ttlib.FakeServer() as srv:
    # --- -p with only GEMINI_API_KEY: path, headers, body ---------------------------------------
    rc, out, err = run(srv, "", ["-s", "Be brief.", "--temperature", "0.5", "-p", "hello there"])
    t.eq(rc, 0, "--api gemini -p: exit 0")
    t.eq(text(out), "hello there\n", "--api gemini -p: the echo streamed back")
    t.eq(text(err), "", "--api gemini -p: stderr quiet")
    r = last(srv)
    t.ok(r["path"].endswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
         "POST {base}/models/{model}:streamGenerateContent?alt=sse", r["path"])
    h = r["headers"]
    t.eq(h.get("x-goog-api-key"), "<redacted len=%d>" % len(KEY), "the key in x-goog-api-key")
    t.ok("authorization" not in h and KEY not in r["path"], "no Authorization, no key in the URL",
         json.dumps(h))
    b = r["body"] or {}
    t.eq(b.get("contents"), [{"role": "user", "parts": [{"text": "hello there"}]}], "contents")
    t.eq(b.get("systemInstruction"), {"parts": [{"text": "Be brief."}]}, "systemInstruction")
    t.eq(b.get("generationConfig"), {"temperature": 0.5}, "generationConfig")
    t.ok("model" not in b and "stream" not in b and "messages" not in b,
         "no chat-completions members", json.dumps(b))
    t.ok(KEY.encode() not in out + err, "the key never printed")

    # --- GOOGLE_API_KEY alone ---------------------------------------------------------------------
    rc, out, err = run(srv, "", ["-p", "hi"], key_var="GOOGLE_API_KEY")
    t.eq(rc, 0, "GOOGLE_API_KEY alone: exit 0")
    t.eq(last(srv)["headers"].get("x-goog-api-key"), "<redacted len=%d>" % len(KEY),
         "GOOGLE_API_KEY: sent in x-goog-api-key")

    # --- --json: content, finish, model, usage ----------------------------------------------------
    rc, out, err = run(srv, "", ["--json", "-m", "gemini-x", "--max-tokens", "50", "-p", "abcdefgh"])
    j = as_json(out)
    t.eq(rc, 0, "--json: exit 0")
    t.eq(j.get("content"), "abcdefgh", "--json: content")
    t.eq(j.get("finish_reason"), "stop", "--json: finish_reason stop (STOP)")
    t.eq(j.get("model"), "gemini-x", "--json: model (modelVersion)")
    usage = j.get("usage") or {}
    t.eq(usage.get("completion_tokens"), 2, "--json: candidatesTokenCount as completion_tokens")
    t.ok((usage.get("prompt_tokens") or 0) > 0, "--json: promptTokenCount", json.dumps(j))
    t.ok(last(srv)["path"].startswith("/v1beta/models/gemini-x:"), "-m: the model in the URL",
         last(srv)["path"])
    t.eq((last(srv)["body"] or {}).get("generationConfig"), {"maxOutputTokens": 50},
         "--max-tokens as maxOutputTokens")

    # --- thoughts: --json reasoning and usage -----------------------------------------------------
    rc, out, err = run(srv, "replay=gemini_thinking.sse", ["--json", "-p", "hi"])
    j = as_json(out)
    t.eq(rc, 0, "thinking replay: exit 0")
    t.eq(j.get("reasoning"), "**Considering the greeting**\n\nThe user says hi.",
         "--json: thought parts as reasoning")
    usage = j.get("usage") or {}
    t.ok(usage.get("reasoning_tokens") == 50 and usage.get("completion_tokens") == 59,
         "--json: thoughtsTokenCount as reasoning, in completion", json.dumps(usage))

    # --- finishReason MAX_TOKENS, SAFETY, a blocked prompt: cut, exit 6 with the reason ----------
    rc, out, err = run(srv, "stop=MAX_TOKENS", ["-p", "long answer"])
    t.eq(rc, 6, "MAX_TOKENS: exit 6")
    t.eq(text(out), "long answer\n", "MAX_TOKENS: the text kept")
    t.ok('finishReason "MAX_TOKENS"' in text(err), "MAX_TOKENS: stderr says so", text(err))
    rc, out, err = run(srv, "stop=SAFETY", ["--json", "-p", "risky"])
    t.eq(rc, 6, "SAFETY: exit 6")
    t.ok('finishReason \\"SAFETY\\"' in text(out) or "SAFETY" in text(err),
         "SAFETY: the reason given", text(out) + text(err))
    rc, out, err = run(srv, "replay=gemini_blocked_prompt.sse", ["-p", "x"])
    t.eq(rc, 6, "blocked prompt: exit 6")
    t.ok("PROHIBITED_CONTENT" in text(err), "blocked prompt: the block reason", text(err))

    # --- mid-stream error after text: exit 3, text kept; a stream cut short: exit 5 -------------
    rc, out, err = run(srv, "replay=gemini_midstream_error.sse", ["-p", "hi"])
    t.eq(rc, 3, "mid-stream UNAVAILABLE: exit 3")
    t.eq(text(out), "Partial ans\n", "mid-stream error: partial text kept")
    t.ok("overloaded" in text(err), "mid-stream error: the message", text(err))
    with open(os.path.join(ttlib.fixtures_dir(), "gemini_thinking.sse"), "rb") as f:
        cut = f.read().rindex(b"data: ")
    rc, out, err = run(srv, "replay=gemini_thinking.sse,drop_after=%d" % cut, ["-p", "hi"])
    t.eq(rc, 5, "no finishReason before the end: truncated, exit 5")
    t.eq(text(out), "Hello! \u00e9t\u00e9 \U0001F600 How can\n", "truncated: the text kept")

    # --- 429 RESOURCE_EXHAUSTED with RetryInfo: retried; 400 INVALID_ARGUMENT: not ---------------
    # (max_rate_wait = 0: the 429 spends a retry instead of being waited out, so a server that
    # always refuses ends after --retries)
    n0 = len(srv.requests())
    nowait = ttlib.make_home()
    ttlib.write_config(nowait, "max_rate_wait = 0\n")
    rc, out, err = run(srv, "status=429,error=Quota%20exceeded,retry_delay=1s",
                       ["--retries", "1", "-p", "hi"], home=nowait)
    t.eq(rc, 3, "429: exit 3")
    t.ok("Quota exceeded (RESOURCE_EXHAUSTED)" in text(err), "429: message and status",
         text(err))
    t.eq(len(srv.requests()) - n0, 2, "429 RESOURCE_EXHAUSTED: retried")
    n0 = len(srv.requests())
    rc, out, err = run(srv, "status=400,error=API%20key%20not%20valid", ["-p", "hi"])
    t.eq(rc, 3, "400: exit 3")
    t.ok("API key not valid (INVALID_ARGUMENT)" in text(err), "400: message and status",
         text(err))
    t.eq(len(srv.requests()) - n0, 1, "400 INVALID_ARGUMENT: not retried")

    # --- a profile with api = gemini ---------------------------------------------------------------
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    path = os.path.join(home, ".config", "tokterm", "config")
    with open(path, "w") as f:
        f.write("[g]\napi = gemini\nmodel = gemini-2.5-pro\nbase_url = %s\n" % base(srv))
    os.chmod(path, 0o600)
    rc, out, err = ttlib.run_tokterm(["-P", "g", "-p", "from a profile"], home=home,
                                     env={"GEMINI_API_KEY": KEY, "OPENAI_API_KEY": None})
    t.eq(rc, 0, "profile api = gemini: exit 0")
    t.ok("/models/gemini-2.5-pro:streamGenerateContent" in last(srv)["path"],
         "profile: its model in the URL", last(srv)["path"])


    # --- the dialect's retry verdict and delay in net's retry decision ---------------------------
    # an UNAVAILABLE error in a 200 answer (ratelimit.c knows no such word; gemini.c retries it)
    srv.clear_queue()
    srv.queue(["error=busy,code=UNAVAILABLE", ""])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--retries", "1", "-p", "after UNAVAILABLE"])
    t.eq(rc, 0, "UNAVAILABLE in a 200 answer: retried, exit 0")
    t.eq(len(srv.requests()) - n0, 2, "UNAVAILABLE in a 200 answer: two requests")
    # RESOURCE_EXHAUSTED in a 200 answer before any text: retried as a rate limit, as the same
    # error in an HTTP 429 is (until 2026-12 the run ended at once, exit 3)
    srv.queue(["error=quota,code=RESOURCE_EXHAUSTED", ""])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--retries", "1", "-p", "after RESOURCE_EXHAUSTED"])
    t.ok(rc == 0 and len(srv.requests()) - n0 == 2,
         "RESOURCE_EXHAUSTED in a 200 answer: retried, exit 0 (rc %d, %d requests)"
         % (rc, len(srv.requests()) - n0), err.decode(errors="replace"))
    # a 429 whose RetryInfo asks for 2 s: the retry waits for it, as for a retry-after header
    srv.queue(["status=429,error=Quota%20exceeded,retry_delay=2s", ""])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--retries", "1", "-p", "after RetryInfo"])
    made = srv.requests()[n0:]
    t.eq(rc, 0, "429 with RetryInfo: retried, exit 0")
    t.ok(len(made) == 2 and made[1]["t"] - made[0]["t"] >= 1.5,
         "429 with RetryInfo 2s: the retry waited for it", [r["t"] for r in made])
    srv.clear_queue()
    # --- the chat, in tmux: --api gemini with only GEMINI_API_KEY; the thought part styled -----
    ttlib.chat_turn(t, srv, "gemini",
                    [ttlib.tokterm_path(), "--api", "gemini", "-m", "gemini-2.5-flash",
                     "--base-url", base(srv, "replay=gemini_thinking.sse")],
                    {"OPENAI_API_KEY": None, "GOOGLE_API_KEY": None, "GEMINI_API_KEY": KEY,
                     "OPENAI_BASE_URL": "http://127.0.0.1:9/never"},
                    "hi there", "How can I help", ":streamGenerateContent",
                    reasoning="The user says hi.", session=67)

    # --- /profile in the chat: openai -> gemini, the conversation goes on in Gemini's shape -----
    if not ttlib.Tmux.available():
        t.skip("/profile across dialects", "tmux is not installed", tool="tmux")
    else:
        phome = ttlib.make_home()
        os.makedirs(os.path.join(phome, ".config", "tokterm"))
        with open(os.path.join(phome, ".config", "tokterm", "config"), "w") as f:
            f.write("profile = oa\n[oa]\nbase_url = %s\nmodel = gpt-4o-mini\n"
                    "[gem]\napi = gemini\nbase_url = %s\nmodel = gemini-2.5-flash\n"
                    % (srv.base(), base(srv)))
        with ttlib.Tmux(120, 30) as tm:
            tm.run([ttlib.tokterm_path(), "-s", "Be brief."],
                   ttlib.clean_env(home=phome, env={"GEMINI_API_KEY": KEY,
                                                    "OPENAI_BASE_URL": None}))
            tm.wait_for(re.compile("F1|\u203a"), 10)
            n0 = len(srv.requests())
            tm.send_text("first question")
            tm.send("Enter")
            t.ok(tm.wait_for("\u2713", 15) is not None, "/profile: the openai answer",
                 tm.capture())
            tm.send_text("/budget 5k")
            tm.send("Enter")
            m = re.search(r"Budget: spent (\d+) tokens", tm.wait_for("Budget: spent", 5) or "")
            spent1 = int(m.group(1)) if m else 0
            tm.send_text("/profile gem")
            tm.send("Enter")
            t.ok(tm.wait_for("gemini-2.5-flash", 5) is not None, "/profile gem: switched",
                 tm.capture())
            tm.send_text("second question")
            tm.send("Enter")
            done = tm.wait_for(re.compile("\u2713(.|\n)*\u2713"), 15)
            t.ok(done is not None and done.count("second question") >= 2,
                 "/profile gem: the answer streamed from Gemini", done or tm.capture())
            made = srv.requests()[n0:]
            t.ok(len(made) == 2 and made[0]["path"].endswith("/v1/chat/completions")
                 and ":streamGenerateContent" in made[1]["path"]
                 and "gemini-2.5-flash" in made[1]["path"],
                 "/profile: the first request to chat completions, the next to Gemini",
                 [r["path"] for r in made])
            h = made[1]["headers"] if len(made) == 2 else {}
            t.ok(h.get("x-goog-api-key") == "<redacted len=%d>" % len(KEY)
                 and "authorization" not in h, "/profile: Gemini's key and header", h)
            b = made[1]["body"] if len(made) == 2 else {}
            turns = [(c.get("role"), "".join(p.get("text", "") for p in c.get("parts", [])))
                     for c in b.get("contents", [])]
            t.eq(turns, [("user", "first question"), ("model", "first question"),
                         ("user", "second question")],
                 "/profile: the whole history in Gemini's shape (user/model, parts)")
            si = b.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
            t.eq(si, "Be brief.", "/profile: the system prompt as systemInstruction")
            t.ok("messages" not in b, "/profile: no chat-completions members")
            # the chat's budget goes on across /profile, as across /new and /model (until
            # 2026-12 the new profile's session began at 0 spent and without the /budget cap)
            tm.send_text("/budget")
            tm.send("Enter")
            screen = tm.wait_for(re.compile(r"Budget: spent[\s\S]*Budget: spent"), 5) or ""
            m = re.findall(r"Budget: spent (\d+) tokens.*budget ([\d,]+) tokens", screen)
            t.ok(spent1 > 0 and len(m) == 2 and int(m[1][0]) > spent1 and m[1][1] == "5,000",
                 "/profile: the budget's spending and cap go on (%d before)" % spent1, screen)

    # --- the model is in the URL only: a cached answer of one model is not another's, and a
    # batch line's "model" is the URL's (until 2026-12: -m gemini-2.5-pro was answered from
    # gemini-2.5-flash's cache, and every batch line went to the profile's model) -------------
    home = ttlib.make_home()
    for model in ("gemini-2.5-flash", "gemini-2.5-pro"):
        rc, out, err = run(srv, "reply=an%20answer", ["-m", model, "--json", "-p", "which model"],
                           home=home)
        j = as_json(out)
        t.ok(rc == 0 and j.get("cached") is False and ("/models/%s:" % model) in last(srv)["path"],
             "cache: %s asked, not answered from another model's entry" % model,
             text(out) + text(err) + last(srv)["path"])
    rc, out, err = run(srv, "reply=an%20answer", ["-m", "gemini-2.5-pro", "--json", "-p",
                                                  "which model"], home=home)
    t.ok(rc == 0 and as_json(out).get("cached") is True and as_json(out).get("model") ==
         "gemini-2.5-pro", "cache: the same model again is a hit", text(out) + text(err))
    lines = ttlib.write_jsonl(os.path.join(ttlib.tempdir("tt-batch-"), "in.jsonl"), [
        {"id": "a", "prompt": "one", "model": "gemini-2.5-pro"},
        {"id": "b", "prompt": "two", "model": "gemini-x-lite"}])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["--no-cache", "batch", lines], home=home)
    paths = sorted(r["path"].split("/models/")[1].split(":")[0] for r in srv.requests()[n0:])
    t.ok(rc == 0 and paths == ["gemini-2.5-pro", "gemini-x-lite"],
         "batch: each line's \"model\" in its URL", text(err) + str(paths))

t.done()
