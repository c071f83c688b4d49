#!/usr/bin/env python3
"""End-to-end tests of the Anthropic dialect (--api anthropic, profile `api = anthropic`):
the real binary against the fake server's /v1/messages. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = "sk-ant-test-0123456789abcdefghijklmnopqrstuvwxyz"


def env_for(srv, spec="", **more):
    """Only an Anthropic key and base URL; the OpenAI ones gone or pointing elsewhere."""
    e = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.base(spec), "OPENAI_API_KEY": None,
         "OPENAI_BASE_URL": "http://127.0.0.1:9/never"}
    e.update(more)
    return e


def run(srv, spec, args, **kw):
    env = env_for(srv, spec, **kw.pop("env", {}))
    return ttlib.run_tokterm(["--api", "anthropic"] + args, env=env, **kw)


def last(srv):
    return srv.requests()[-1]


def text(b):
    return b.decode("utf-8", "replace")


with ttlib.FakeServer() as srv:
    # --- -p with only ANTHROPIC_API_KEY: path, headers, body -----------------------------------
    rc, out, err = run(srv, "", ["-s", "Be brief.", "-p", "hello there"])
    t.eq(rc, 0, "--api anthropic -p: exit 0")
    t.eq(text(out), "hello there\n", "--api anthropic -p: the echo streamed back")
    t.eq(text(err), "", "--api anthropic -p: stderr quiet")
    r = last(srv)
    t.ok(r["path"].endswith("/v1/messages"), "POST {base}/messages", r["path"])
    h = r["headers"]
    t.eq(h.get("x-api-key"), "<redacted len=%d>" % len(KEY), "the key in x-api-key")
    t.ok("authorization" not in h, "no Authorization header", json.dumps(h))
    t.eq(h.get("anthropic-version"), "2023-06-01", "anthropic-version header")
    b = r["body"]
    t.eq(b.get("model"), "claude-haiku-4-5", "the dialect's default model")
    t.eq(b.get("max_tokens"), 8192, "max_tokens always sent")
    t.eq(b.get("system"), "Be brief.", "system prompt top-level")
    t.eq(b.get("messages"), [{"role": "user", "content": "hello there"}], "messages")
    t.eq(b.get("stream"), True, "stream: true")
    t.ok("stream_options" not in b, "no stream_options")
    t.ok(KEY.encode() not in out + err, "the key never printed")

    # --- --json: content, finish, model, usage ---------------------------------------------------
    rc, out, err = run(srv, "", ["--json", "-m", "claude-x", "--max-tokens", "50", "-p", "abcdefgh"])
    t.eq(rc, 0, "--json: exit 0")
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.eq(j.get("content"), "abcdefgh", "--json: content")
    t.eq(j.get("finish_reason"), "stop", "--json: finish_reason stop (end_turn)")
    t.eq(j.get("model"), "claude-x", "--json: model")
    usage = j.get("usage") or {}
    t.eq(usage.get("completion_tokens"), 2, "--json: output_tokens as completion_tokens",)
    t.ok((usage.get("prompt_tokens") or 0) > 0, "--json: input_tokens as prompt_tokens",
         json.dumps(j))
    t.eq(last(srv)["body"].get("max_tokens"), 50, "--max-tokens sent as max_tokens")
    rc, out, err = run(srv, "", ["--json", "-p", "window"])
    try:
        ctx = json.loads(out).get("context") or {}
    except ValueError:
        ctx = {}
    t.eq(ctx.get("window"), 200000, "--json: Claude's window, not the 8192 assumed for unknowns")
    t.eq(ctx.get("approximate"), True, "--json: Claude's counts are estimates")
    rc, out, err = ttlib.run_tokterm(["count", "-m", "claude-haiku-4-5"], stdin="hello world")
    t.eq(rc, 0, "count -m claude: exit 0")
    t.ok("no public tokenizer" in text(err) and "estimate" in text(err),
         "count -m claude: labelled an estimate", text(err))

    # --- stop_reason max_tokens: cut, exit 6 ----------------------------------------------------
    rc, out, err = run(srv, "stop=max_tokens", ["-p", "long answer"])
    t.eq(rc, 6, "stop_reason max_tokens: exit 6")
    t.eq(text(out), "long answer\n", "max_tokens: the text kept")
    t.ok('stop_reason "max_tokens"' in text(err), "max_tokens: stderr says so", text(err))

    # --- the other stop reasons: each its own advice; an unknown one is not taken as whole
    # (until 2026-12 pause_turn and a full context window said "raise max_tokens", and
    # stop_reason "weird" exited 0) ------------------------------------------------------------
    for stop, want in (("pause_turn", "paused a long turn"),
                       ("model_context_window_exceeded", "context window is full"),
                       ("weird", "a reason this tokterm does not know")):
        rc, out, err = run(srv, "stop=" + stop, ["-p", "an answer"])
        t.ok(rc == 6 and text(out) == "an answer\n" and want in text(err) and
             "raise max_tokens" not in text(err),
             "stop_reason %s: exit 6, the text kept, its own advice" % stop, text(err))

    # --- mid-stream overloaded_error after text: not retried, exit 3 ----------------------------
    n0 = len(srv.requests())
    rc, out, err = run(srv, "replay=anthropic_overloaded.sse", ["-p", "hi"])
    t.eq(rc, 3, "mid-stream overloaded_error: exit 3")
    t.eq(text(out), "Partial ans\n", "mid-stream error: partial text kept")
    t.ok("Overloaded" in text(err), "mid-stream error: the message", text(err))
    t.eq(len(srv.requests()) - n0, 1, "text was shown: no retry")

    # --- HTTP 529 overloaded_error: retried, then its message -----------------------------------
    n0 = len(srv.requests())
    rc, out, err = run(srv, "status=529", ["--retries", "1", "-p", "hi"])
    t.eq(rc, 3, "529: exit 3")
    t.ok("Overloaded" in text(err) or "overloaded_error" in text(err), "529: the error type",
         text(err))
    t.eq(len(srv.requests()) - n0, 2, "529 overloaded_error: retried")
    # the dialect's verdict (struct dialect's retryable) wins over the status: an error type
    # that fails the same every time is not retried, even behind a 5xx
    n0 = len(srv.requests())
    rc, out, err = run(srv, "status=503,type=invalid_request_error,error=bad%20request",
                       ["--retries", "2", "-p", "hi"])
    t.eq(rc, 3, "503 invalid_request_error: exit 3")
    t.eq(len(srv.requests()) - n0, 1, "503 invalid_request_error: not retried (the dialect says so)")
    rc, out, err = run(srv, "status=401,error=invalid%20x-api-key", ["-p", "hi"])
    t.eq(rc, 3, "401: exit 3")
    t.ok("invalid x-api-key (authentication_error)" in text(err), "401: message and type",
         text(err))

    # --- anthropic-ratelimit-* headers: the quota; a 429 with retry-after paced and retried ---
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    quota = ("h.anthropic-ratelimit-requests-limit=50,h.anthropic-ratelimit-requests-remaining=41,"
             "h.anthropic-ratelimit-requests-reset=%s,h.anthropic-ratelimit-tokens-limit=40000,"
             "h.anthropic-ratelimit-tokens-remaining=39000,h.anthropic-ratelimit-tokens-reset=%s"
             % (reset, reset))
    rc, out, err = run(srv, quota, ["--json", "-p", "quota"])
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.ok("41" in (j.get("quota") or "") and "50" in (j.get("quota") or ""),
         "anthropic-ratelimit-*: the quota as for x-ratelimit-*", json.dumps(j.get("quota")))
    srv.clear_queue()
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    srv.queue(["status=429,type=rate_limit_error,h.retry-after=2,"
               "h.anthropic-ratelimit-requests-remaining=0,h.anthropic-ratelimit-requests-limit=50,"
               "h.anthropic-ratelimit-requests-reset=%s" % soon, ""])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["-p", "after the wait"])
    made = srv.requests()[n0:]
    t.eq(rc, 0, "429 rate_limit_error: retried, exit 0")
    t.eq(text(out), "after the wait\n", "429: the answer of the retry")
    t.ok(len(made) == 2 and made[1]["t"] - made[0]["t"] >= 1.5,
         "429: the retry waited for retry-after (2 s)",
         [r["t"] for r in made])
    srv.clear_queue()

    # --- the truncated stream (no message_stop) -------------------------------------------------
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                           "anthropic_text.sse")
    with open(fixture, "rb") as f:
        cut = f.read().index(b"event: message_stop")
    rc, out, err = run(srv, "replay=anthropic_text.sse,drop_after=%d" % cut, ["-p", "hi"])
    t.eq(rc, 5, "no message_stop (after message_delta): truncated, exit 5")
    t.ok(text(out).startswith("Hello, w"), "truncated: the text kept", text(out))

    # --- --json with thinking: reasoning, content, the cut -------------------------------------
    rc, out, err = run(srv, "replay=anthropic_thinking.sse", ["--json", "-p", "27 * 453?"])
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.eq(rc, 6, "thinking, max_tokens: exit 6")
    t.eq(j.get("content"), "27 * 453 = 12,231", "--json: content without the thinking")
    t.ok((j.get("reasoning") or "").startswith("Let me solve this step by step"),
         "--json: the thinking as reasoning", json.dumps(j)[:300])
    t.eq(j.get("finish_reason"), "length", "--json: max_tokens as length")

    # --- a conversation begun in openai, continued in anthropic (-c) ----------------------------
    home2 = ttlib.make_home()
    rc, out, err = ttlib.run_tokterm(["-s", "Be kind.", "-p", "first question"], home=home2,
                                     env={"OPENAI_BASE_URL": srv.base()})
    t.eq(rc, 0, "resume across dialects: the openai turn")
    rc, out, err = run(srv, "", ["-c", "-p", "second question"], home=home2)
    t.eq(rc, 0, "resume across dialects: the anthropic turn")
    b = last(srv)["body"]
    t.ok(last(srv)["path"].endswith("/v1/messages"), "resume: sent to /messages")
    t.eq(b.get("messages"), [{"role": "user", "content": "first question"},
                             {"role": "assistant", "content": "first question"},
                             {"role": "user", "content": "second question"}],
         "resume: the history in user/assistant turns")
    t.eq(b.get("system"), "Be kind.", "resume: the saved system prompt top-level")

    # --- the profile key `api = anthropic`, and its base_url -------------------------------------
    home = ttlib.make_home()
    cfg = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write("profile = claude\n[claude]\napi = anthropic\nbase_url = %s\nmodel = claude-y\n"
                % srv.base())
    rc, out, err = ttlib.run_tokterm(["-p", "from the profile"], home=home,
                                     env={"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": None})
    t.eq(rc, 0, "profile api = anthropic: exit 0")
    t.eq(text(out), "from the profile\n", "profile api = anthropic: answer")
    r = last(srv)
    t.ok(r["path"].endswith("/v1/messages") and r["body"].get("model") == "claude-y",
         "profile: /messages with the profile's model", r["path"])

    # --- doctor checks the profile in its dialect: GET {base}/models with its headers ----------
    rc, out, err = ttlib.run_tokterm(["doctor"], home=home,
                                     env={"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": None})
    got = [r for r in srv.requests(all=True) if r["method"] == "GET"
           and r["path"].endswith("/v1/models")]
    h = got[-1]["headers"] if got else {}
    t.ok(got and h.get("anthropic-version") == "2023-06-01" and "x-api-key" in h
         and "authorization" not in h, "doctor: GET /models with x-api-key and anthropic-version",
         json.dumps(h))
    t.ok("x-api-key" not in text(out) or KEY not in text(out), "doctor: the key never printed")
    # --api anthropic doctor, no config: Anthropic's endpoint and key, as -p would use them
    # (until 2026-12 doctor ignored --api: it checked OpenAI and failed, OPENAI_API_KEY unset)
    n0 = len(srv.requests(all=True))
    rc, out, err = ttlib.run_tokterm(["--api", "anthropic", "doctor"], home=ttlib.make_home(),
                                     env=env_for(srv))
    got = [r for r in srv.requests(all=True)[n0:] if r["method"] == "GET"]
    h = got[-1]["headers"] if got else {}
    t.ok("$ANTHROPIC_API_KEY is set" in text(out) and "OPENAI_API_KEY" not in text(out) and
         "model claude-haiku-4-5" in text(out) and h.get("anthropic-version") == "2023-06-01" and
         "x-api-key" in h, "--api anthropic doctor: Anthropic's key and endpoint checked",
         text(out))

    # --- a fallback profile in another dialect: openai failing, Claude answering ---------------
    home3 = ttlib.make_home()
    os.makedirs(os.path.join(home3, ".config", "tokterm"))
    with open(os.path.join(home3, ".config", "tokterm", "config"), "w") as f:
        f.write("profile = main\n[main]\nbase_url = %s\nbreaker_failures = 2\nfallback = claude\n"
                "[claude]\napi = anthropic\nbase_url = %s\n" % (srv.base("status=500"),
                                                                 srv.base()))
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--retries", "3", "--json", "-p", "fall back to claude"],
                                     home=home3, env={"ANTHROPIC_API_KEY": KEY,
                                                      "OPENAI_BASE_URL": None})
    made = srv.requests()[n0:]
    t.eq(rc, 0, "fallback to anthropic: exit 0")
    t.eq([r["path"].rsplit("/", 1)[-1] for r in made], ["completions", "completions", "messages"],
         "fallback: 2 failures to chat/completions open the breaker, then /messages")
    fb = made[-1] if made else {"headers": {}, "body": {}}
    t.ok(fb["headers"].get("anthropic-version") == "2023-06-01" and "x-api-key" in fb["headers"]
         and fb["body"].get("model") == "claude-haiku-4-5" and "max_tokens" in fb["body"],
         "fallback: an Anthropic request with its headers, model and max_tokens",
         json.dumps(fb)[:400])
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.eq(j.get("content"), "fall back to claude", "fallback: the Anthropic answer decoded")

    # --- batch in the anthropic dialect: every line a Messages request -------------------------
    bin_path = ttlib.write_jsonl(os.path.join(ttlib.tempdir("tt-batch-"), "in.jsonl"), [
        {"id": "a", "prompt": "batch one"},
        {"id": "b", "prompt": "batch two", "system": "terse", "max_tokens": 77}])
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["batch", bin_path])
    made = srv.requests()[n0:]
    lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    t.eq(rc, 0, "batch --api anthropic: exit 0")
    t.eq(sorted((x.get("id"), x.get("content"), x.get("finish_reason")) for x in lines),
         [("a", "batch one", "stop"), ("b", "batch two", "stop")], "batch: both answers decoded")
    t.ok(len(made) == 2 and all(r["path"].endswith("/v1/messages") for r in made),
         "batch: two requests to /messages", [r["path"] for r in made])
    two = [r["body"] for r in made if r["body"]["messages"][-1]["content"] == "batch two"]
    t.ok(two and two[0].get("system") == "terse" and two[0].get("max_tokens") == 77,
         "batch: a line's system and max_tokens in Anthropic's shape", json.dumps(two)[:300])

    # --- an unknown dialect ---------------------------------------------------------------------
    rc, out, err = ttlib.run_tokterm(["--api", "klingon", "-p", "hi"])
    t.eq(rc, 2, "--api klingon: exit 2")
    t.ok("api must be one of openai|anthropic" in text(err), "--api klingon: the names",
         text(err))

    # --- the cache keys on the dialect: the same base URL, an OpenAI request is not a hit --------
    home = ttlib.make_home()
    rc, out, err = run(srv, "", ["-p", "cached"], home=home)
    n0 = len(srv.requests())
    rc, out, err = run(srv, "", ["-p", "cached"], home=home)
    t.eq(len(srv.requests()), n0, "anthropic: the second ask is a cache hit")
    t.eq(text(out), "cached\n", "anthropic: the cached answer")

    # --- sampling the Messages API leaves out or refuses is said (until 2026-12 a temperature
    # with thinking went unsent without a word) ------------------------------------------------
    rc, out, err = run(srv, "", ["--no-save", "--no-cache", "-t", "0.3", "--reasoning-effort",
                                 "low", "-p", "think"])
    t.ok(rc == 0 and "temperature 0.3 is not sent" in text(err) and
         "temperature" not in last(srv)["body"], "-t with thinking: not sent, and said",
         text(err))
    rc, out, err = run(srv, "", ["--no-save", "--no-cache", "-t", "1.5", "-p", "hot"])
    t.ok("Anthropic takes 0 to 1" in text(err), "-t 1.5: said to be out of Anthropic's range",
         text(err))

    # --- -c --api anthropic after an OpenAI conversation: not its model (until 2026-12 the
    # OpenAI model name went to /v1/messages) ----------------------------------------------------
    # (the OpenAI server is named "localhost", the Anthropic one 127.0.0.1: two hosts, as two
    # providers are)
    home = ttlib.make_home()
    openai_env = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": KEY,
                  "OPENAI_BASE_URL": srv.base("").replace("127.0.0.1", "localhost")}
    rc, out, err = ttlib.run_tokterm(["-m", "gpt-4o", "-p", "held with openai"], home=home,
                                     env=openai_env)
    rc, out, err = run(srv, "", ["-c", "-p", "and now claude"], home=home)
    body = last(srv)["body"]
    t.ok(rc == 0 and body["model"] != "gpt-4o" and "gpt-4o is not taken" in text(err) and
         "held with localhost:" in text(err) and
         [m["content"] for m in body["messages"]][-1] == "and now claude",
         "-c --api anthropic: the profile's model, not the OpenAI conversation's, said",
         "%r %s" % (body.get("model"), text(err)))
    # ... and back: -c alone goes to the configured OpenAI server, which never heard of the
    # Claude model the Anthropic turn asked for (until 2026-12 it was sent there). --api given
    # drops the saved model even at the same host (which dialect the conversation was held
    # with is not saved; a gateway serving several would get another provider's name), said
    rc, out, err = run(srv, "", ["-c", "-m", "claude-opus-4-1", "-p", "claude again"],
                       home=home)
    rc, out, err = run(srv, "", ["-c", "-p", "claude once more"], home=home)
    t.ok(rc == 0 and last(srv)["body"]["model"] != "claude-opus-4-1" and
         "claude-opus-4-1 is not taken: --api names another API" in text(err),
         "-c --api given at the same host: the saved model not taken, said (-m keeps it)",
         "%r %s" % (last(srv)["body"].get("model"), text(err)))
    n = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "back to openai"], home=home, env=openai_env)
    t.ok(rc == 2 and len(srv.requests()) == n and "was held with 127.0.0.1:" in text(err) and
         "not taken" not in text(err),
         "-c alone after an Anthropic turn: refused, nothing sent, one message", text(err))
    rc, out, err = ttlib.run_tokterm(["-c", "--base-url", openai_env["OPENAI_BASE_URL"], "-p",
                                      "back to openai"], home=home, env=openai_env)
    body = last(srv)["body"]
    t.ok(rc == 0 and last(srv)["path"].endswith("/chat/completions") and
         not body["model"].startswith("claude") and "claude" in text(err) and
         "is not taken: it was held with 127.0.0.1:" in text(err),
         "-c --base-url OpenAI's after an Anthropic turn: not the Claude model, said",
         "%r %s %s" % (body.get("model"), last(srv)["path"], text(err)))
    # the same --base-url (or --api) as the conversation's keeps its model (a review found the
    # first version dropping it whenever the flag was given)
    home = ttlib.make_home()
    oenv = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": None}
    for args in (["-m", "qwen-local", "-p", "local one"], ["-c", "-p", "local two"],
                 ["--api", "openai", "-c", "-p", "local three"]):
        rc, out, err = ttlib.run_tokterm(["--base-url", srv.base("")] + args, home=home, env=oenv)
        t.ok(rc == 0 and last(srv)["body"]["model"] == "qwen-local" and
             "not taken" not in text(err),
             "the same server given again: %s keeps the model" % " ".join(args[:-2] or ["-m"]),
             "%r %s" % (last(srv)["body"].get("model"), text(err)))

    # --- the chat, in tmux: --api anthropic with only ANTHROPIC_API_KEY -------------------------
    done = ttlib.chat_turn(t, srv, "anthropic", [ttlib.tokterm_path(), "--api", "anthropic"],
                           env_for(srv, "delay_ms=20"), "hello from the chat",
                           "hello from the chat", "/v1/messages")
    if done is not None:
        t.ok("claude-haiku-4-5" in ttlib.status_bar(done), "chat: the status bar names the model",
             done)

# --- a config written for OpenAI, then --api anthropic: to Anthropic's own API its model goes
# as claude-haiku-4-5, said (until 2026-12 "gpt-4o" was sent, and a 404 was all one saw); to
# a proxy's base URL, or with -m, the name is kept. The connection goes to a proxy nobody
# listens on: refused at once, no network needed. -------------------------------------------
with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write("model = gpt-4o\nmax_retries = 0\n")
    nowhere = {"ANTHROPIC_BASE_URL": None, "https_proxy": "http://127.0.0.1:9",
               "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": None, "no_proxy": None}
    rc, out, err = run(srv, "", ["--no-save", "--json", "-p", "hi"], env=nowhere, home=home)
    j = json.loads(out) if out.strip() else {}
    t.ok(rc == 4 and j.get("model") == "claude-haiku-4-5" and
         "the configured model gpt-4o is another provider's; claude-haiku-4-5 is used" in
         text(err) and "(ANTHROPIC_BASE_URL)" in text(err),
         "--api anthropic with a config's OpenAI model: Anthropic's default, said (rc %d)" % rc,
         text(out) + text(err))
    rc, out, err = run(srv, "", ["--no-save", "--json", "-m", "gpt-4o", "-p", "hi"], env=nowhere,
                       home=home)
    j = json.loads(out) if out.strip() else {}
    t.ok(j.get("model") == "gpt-4o" and "another provider's" not in text(err),
         "--api anthropic -m gpt-4o: the name given is sent", text(out) + text(err))
    rc, out, err = run(srv, "", ["--no-save", "-p", "hi"], home=home)
    t.ok(rc == 0 and (last(srv).get("body") or {}).get("model") == "gpt-4o" and
         "another provider's" not in text(err),
         "--api anthropic to a proxy's base URL: the configured model kept", text(err))

sys.exit(t.done())
