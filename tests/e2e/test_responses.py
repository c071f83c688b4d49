#!/usr/bin/env python3
"""End-to-end tests of the OpenAI Responses dialect (--api responses, profile
`api = responses`): the real binary against the fake server's /v1/responses. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY


def run(srv, spec, args, **kw):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": srv.base(spec)}
    env.update(kw.pop("env", {}))
    return ttlib.run_tokterm(["--api", "responses"] + args, env=env, **kw)


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
    # --- -p: path, headers, body ------------------------------------------------------------------
    rc, out, err = run(srv, "", ["-s", "Be brief.", "--max-tokens", "64", "--seed", "7",
                                 "-p", "hello there"])
    t.eq(rc, 0, "--api responses -p: exit 0")
    t.eq(text(out), "hello there\n", "--api responses -p: the echo streamed back")
    t.eq(text(err), "", "--api responses -p: stderr quiet")
    r = last(srv)
    t.ok(r["path"].endswith("/v1/responses"), "POST {base}/responses", r["path"])
    t.eq(r["headers"].get("authorization"), "<redacted len=%d>" % len("Bearer " + KEY),
         "the key as Bearer")
    b = r["body"] or {}
    t.eq(b.get("model"), "gpt-4o-mini", "the dialect's default model")
    t.eq(b.get("instructions"), "Be brief.", "the system prompt as instructions")
    t.eq(b.get("input"), [{"role": "user", "content": "hello there"}], "input")
    t.eq(b.get("max_output_tokens"), 64, "--max-tokens as max_output_tokens")
    t.ok("seed" not in b and "messages" not in b and "max_tokens" not in b,
         "no seed, no chat-completions members", json.dumps(b))
    t.eq(b.get("store"), False, "store: false")
    t.eq(b.get("stream"), True, "stream: true")

    # --- --json: content, finish, model, usage; reasoning summaries -------------------------------
    rc, out, err = run(srv, "", ["--json", "-m", "o4-x", "-p", "abcdefgh"])
    j = as_json(out)
    t.eq(rc, 0, "--json: exit 0")
    t.eq(j.get("content"), "abcdefgh", "--json: content")
    t.eq(j.get("finish_reason"), "stop", "--json: finish_reason stop (completed)")
    t.eq(j.get("model"), "o4-x", "--json: model")
    t.eq((j.get("usage") or {}).get("completion_tokens"), 2, "--json: output_tokens")
    rc, out, err = run(srv, "replay=responses_reasoning.sse", ["--json", "-p", "hi"])
    j = as_json(out)
    t.eq(rc, 0, "reasoning replay: exit 0")
    t.eq(j.get("reasoning"), "**Greeting**\n\nThe user says hi.",
         "--json: the reasoning summary, its parts apart")
    t.eq(j.get("content"), 'Hi there \u2014 "ok".', "--json: content, .done not repeated")
    usage = j.get("usage") or {}
    t.ok(usage.get("reasoning_tokens") == 128 and usage.get("cached_tokens") == 16,
         "--json: reasoning and cached tokens", json.dumps(usage))

    # --- incomplete: cut, exit 6 -------------------------------------------------------------------
    rc, out, err = run(srv, "stop=max_output_tokens", ["-p", "long answer"])
    t.eq(rc, 6, "incomplete max_output_tokens: exit 6")
    t.eq(text(out), "long answer\n", "incomplete: the text kept")
    t.ok("max_output_tokens" in text(err), "incomplete: stderr says so", text(err))
    rc, out, err = run(srv, "stop=content_filter", ["-p", "x"])
    t.eq(rc, 6, "incomplete content_filter: exit 6")

    # --- failed / error events after text: exit 3, text kept; a stream cut short: exit 5 --------
    rc, out, err = run(srv, "replay=responses_failed.sse", ["-p", "hi"])
    t.eq(rc, 3, "response.failed: exit 3")
    t.eq(text(out), "Partial\n", "response.failed: partial text kept")
    t.ok("The model failed to generate a response." in text(err), "failed: the message",
         text(err))
    rc, out, err = run(srv, "stop=failed", ["-p", "fail me"])
    t.eq(rc, 3, "echo with response.failed: exit 3")
    t.ok("the response failed (server_error)" in text(err), "failed: message and code",
         text(err))
    rc, out, err = run(srv, "replay=responses_error.sse", ["-p", "hi"])
    t.eq(rc, 3, "error event: exit 3")
    t.ok("Rate limit reached" in text(err), "error event: the message", text(err))
    with open(os.path.join(ttlib.fixtures_dir(), "responses_reasoning.sse"), "rb") as f:
        cut = f.read().index(b"event: response.completed")
    rc, out, err = run(srv, "replay=responses_reasoning.sse,drop_after=%d" % cut, ["-p", "hi"])
    t.eq(rc, 5, "no response.completed: truncated, exit 5")
    t.eq(text(out), 'Hi there \u2014 "ok".\n', "truncated: the text kept")

    # --- HTTP errors: OpenAI's shapes ------------------------------------------------------------
    rc, out, err = run(srv, "status=401,error=Incorrect%20API%20key,code=invalid_api_key",
                       ["-p", "hi"])
    t.eq(rc, 3, "401: exit 3")
    t.ok("Incorrect API key (invalid_api_key)" in text(err), "401: message and code", text(err))
    t.ok(KEY.encode() not in out + err, "the key never printed")

    # --- the chat, in tmux: --api responses; the reasoning summary styled ----------------------
    ttlib.chat_turn(t, srv, "responses", [ttlib.tokterm_path(), "--api", "responses"],
                    {"OPENAI_API_KEY": KEY,
                     "OPENAI_BASE_URL": srv.base("replay=responses_reasoning.sse")},
                    "hi there", "Hi there", "/v1/responses", reasoning="The user says hi.",
                    session=187)

t.done()
