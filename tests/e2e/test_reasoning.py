#!/usr/bin/env python3
"""End-to-end tests of the reasoning controls: --reasoning-effort (and reasoning_effort in a
profile) in each dialect's body, the reasoning to stderr with --reasoning, /think in the chat
(tmux). The real binary against the fake server. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY


def run(srv, args, spec="", api=None, **kw):
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY, "GEMINI_API_KEY": KEY,
           "OPENAI_BASE_URL": srv.base(spec), "ANTHROPIC_BASE_URL": srv.base(spec)}
    env.update(kw.pop("env", {}))
    pre = ["--api", api, "--base-url", srv.base(spec)] if api else []
    return ttlib.run_tokterm(pre + ["--no-save"] + args, env=env, **kw)


def body(srv):
    r = srv.requests()
    return (r[-1].get("body") or {}) if r else {}


def text(b):
    return b.decode("utf-8", "replace")


with ttlib.FakeServer() as srv:
    # --- --reasoning-effort in each dialect's body ------------------------------------------------
    rc, out, err = run(srv, ["--reasoning-effort", "high", "-t", "0.3", "-p", "hello"])
    b = body(srv)
    t.ok(rc == 0, "--reasoning-effort high: exit 0", text(err))
    t.ok(b.get("reasoning_effort") == "high", "chat completions: reasoning_effort", json.dumps(b))
    t.eq(text(out), "hello\n", "the answer on stdout, the reasoning not")
    t.eq(text(err), "", "without --reasoning the reasoning is not on stderr")
    rc, out, err = run(srv, ["--reasoning-effort", "low", "--reasoning", "-p", "hello"])
    t.eq(rc, 0, "--reasoning: exit 0")
    t.eq(text(err), "thinking at low effort\n", "--reasoning: the reasoning on stderr")
    t.eq(text(out), "hello\n", "--reasoning: the answer alone on stdout")
    rc, out, err = run(srv, ["--reasoning-effort", "medium", "--json", "-p", "hello"])
    j = json.loads(out or b"{}")
    t.eq(j.get("reasoning"), "thinking at medium effort", "--json: the reasoning")
    rc, out, err = run(srv, ["--reasoning-effort", "none", "-p", "hello"])
    t.ok("reasoning_effort" not in body(srv), "none: not sent", json.dumps(body(srv)))
    rc, out, err = run(srv, ["--reasoning-effort", "extreme", "-p", "hello"])
    t.eq(rc, 2, "an unknown effort: exit 2")
    t.ok("none|low|medium|high" in text(err), "the message names the levels", text(err))

    rc, out, err = run(srv, ["--reasoning-effort", "medium", "-p", "hi"], api="responses")
    t.eq(body(srv).get("reasoning"), {"effort": "medium", "summary": "auto"},
         "responses: reasoning {effort, summary}")
    rc, out, err = run(srv, ["--reasoning-effort", "high", "-t", "0.5", "-p", "hi"],
                       api="anthropic")
    b = body(srv)
    t.eq(b.get("thinking"), {"type": "enabled", "budget_tokens": 16384},
         "anthropic: thinking with a budget")
    t.ok(b.get("max_tokens", 0) > 16384 and "temperature" not in b,
         "anthropic: max_tokens above the budget, no temperature", json.dumps(b))
    rc, out, err = run(srv, ["--reasoning-effort", "low", "-p", "hi"], api="gemini")
    t.eq((body(srv).get("generationConfig") or {}).get("thinkingConfig"),
         {"thinkingBudget": 1024, "includeThoughts": True}, "gemini: thinkingConfig")

    # --- the profile's reasoning_effort; the command line wins --------------------------------
    home = ttlib.make_home()
    cfg = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfg, exist_ok=True)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write("[think]\nreasoning_effort = medium\n")
    rc, out, err = run(srv, ["-P", "think", "-p", "hi"], home=home)
    t.eq(body(srv).get("reasoning_effort"), "medium", "profile reasoning_effort = medium")
    rc, out, err = run(srv, ["-P", "think", "--reasoning-effort", "none", "-p", "hi"], home=home)
    t.ok("reasoning_effort" not in body(srv), "--reasoning-effort none over the profile")

    # --- the cache key covers it --------------------------------------------------------------
    home = ttlib.make_home()
    n0 = len(srv.requests())
    for e in ("low", "high", "low"):
        ttlib.run_tokterm(["--reasoning-effort", e, "-p", "cache me"], home=home,
                          env={"OPENAI_BASE_URL": srv.base("")})
    t.eq(len(srv.requests()) - n0, 2, "cache: low, high asked; the second low from the cache")

    # --- a refused member learnt from the 400, sent again at once, remembered --------------------
    home = ttlib.make_home()
    env = {"OPENAI_BASE_URL": srv.base("")}

    def strict(args):
        n0 = len(srv.requests())
        rc, out, err = ttlib.run_tokterm(["--no-cache"] + args, home=home, env=env)
        return rc, out, err, srv.requests()[n0:]

    rc, out, err, reqs = strict(["-m", "o-strict", "--max-tokens", "50", "-p", "hi there"])
    t.eq(rc, 0, "o-strict, max_tokens refused: exit 0 (sent again)")
    t.eq(text(out), "hi there\n", "o-strict: the answer")
    t.eq([r.get("refused") for r in reqs], ["max_tokens", None], "first run: one 400, then 200")
    t.ok(len(reqs) == 2 and (reqs[1].get("body") or {}).get("max_completion_tokens") == 50 and
         "max_tokens" not in reqs[1]["body"], "sent again with max_completion_tokens",
         json.dumps(reqs[-1].get("body")))
    t.ok("o-strict refuses max_tokens" in text(err), "stderr says what was learnt", text(err))
    rc, out, err, reqs = strict(["-m", "o-strict", "--max-tokens", "50", "-p", "hi again"])
    t.ok(rc == 0 and [r.get("refused") for r in reqs] == [None], "second run: no 400",
         json.dumps([r.get("refused") for r in reqs]))
    t.eq(text(err), "", "second run: nothing to say")
    rc, out, err, reqs = strict(["-m", "o-strict-t", "-t", "0.5", "-p", "warm"])
    t.ok(rc == 0 and [r.get("refused") for r in reqs] == ["temperature", None] and
         "temperature" not in (reqs[-1].get("body") or {}),
         "temperature refused (unsupported_value): sent again without it, exit 0",
         json.dumps([rc] + [r.get("refused") for r in reqs]))
    rc, out, err, reqs = strict(["-m", "o-strict-t", "-t", "0.5", "-p", "warm again"])
    t.ok(rc == 0 and [r.get("refused") for r in reqs] == [None], "temperature: remembered")
    rc, out, err, reqs = strict(["-m", "gpt-4o-mini", "-t", "0.5", "--max-tokens", "9",
                                 "-p", "other"])
    b = reqs[-1].get("body") or {} if reqs else {}
    t.ok(b.get("max_tokens") == 9 and b.get("temperature") == 0.5,
         "another model keeps max_tokens and temperature", json.dumps(b))
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--api", "responses", "-m", "o-strict", "-t", "0.5", "-p",
                                      "resp"], home=home, env=env)
    t.ok(rc == 0 and [r.get("refused") for r in srv.requests()[n0:]] == ["temperature", None],
         "responses: the same 400 learnt, sent again, exit 0",
         json.dumps([rc] + [r.get("refused") for r in srv.requests()[n0:]]))
    home2 = ttlib.make_home()
    n0 = len(srv.requests())
    for _ in range(2):
        ttlib.run_tokterm(["--incognito", "-m", "o-strict", "--max-tokens", "5", "-p", "x"],
                          home=home2, env=env)
    t.eq([r.get("refused") for r in srv.requests()[n0:]], ["max_tokens", None] * 2,
         "--incognito: learnt for the run, not remembered")
    rc, out, err = ttlib.run_tokterm(["-m", "o-strict", "--max-tokens", "5", "-p", "x"],
                                     env={"OPENAI_BASE_URL": srv.base("status=400,code=unsupported_parameter")})
    t.eq(rc, 3, "a 400 naming no param: not sent again, exit 3")

    # --- /think in the chat (tmux): the status bar, the next request's body -----------------------
    if not ttlib.Tmux.available():
        t.skip("/think in tmux", "tmux is not installed", tool="tmux")
    else:
        with ttlib.Tmux(100, 20) as tm:
            home = ttlib.make_home()
            tm.run([ttlib.tokterm_path(), "--no-save"],
                   ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("")}))
            t.ok(tm.wait_for(re.compile("F1|\u203a"), 10) is not None, "the chat opens",
                 tm.capture())
            tm.send_text("/thi")
            tm.send("Tab")
            t.ok(tm.wait_for(re.compile(r"\u203a /think *\n"), 3) is not None,
                 "Tab completes /thi to /think", tm.capture())
            tm.send_text("high")
            tm.send("Enter")
            t.ok(tm.wait_for("think:high", 3) is not None, "/think high: think:high in the status",
                 tm.capture())
            n0 = len(srv.requests())
            tm.send_text("ponder this")
            tm.send("Enter")
            t.ok(tm.wait_for("\u2713", 10) is not None, "the answer completes", tm.capture())
            r = srv.requests()
            b = (r[-1].get("body") or {}) if len(r) > n0 else {}
            t.eq(b.get("reasoning_effort"), "high", "/think high: the next request asks for it")
            t.ok("thinking at high effort" in tm.capture(), "the reasoning is shown in the chat",
                 tm.capture())
            tm.send_text("/think off")
            tm.send("Enter")
            deadline = time.monotonic() + 3
            while "think:high" in tm.capture() and time.monotonic() < deadline:
                time.sleep(0.05)
            t.ok("think:" not in tm.capture(), "/think off: gone from the status", tm.capture())
            tm.send_text("again")
            tm.send("Enter")
            deadline = time.monotonic() + 5
            while len(srv.requests()) < n0 + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            r = srv.requests()
            t.ok(len(r) >= n0 + 2 and "reasoning_effort" not in (r[-1].get("body") or {}),
                 "/think off: not sent", json.dumps(r[-1].get("body")))
            msgs = (r[-1].get("body") or {}).get("messages", [])
            t.ok(len(msgs) >= 3 and "thinking at" not in json.dumps(msgs) and
                 msgs[-2].get("content") == "ponder this",
                 "the history carries the answer, never its reasoning", json.dumps(msgs))
            tm.send_text("/think extreme")
            tm.send("Enter")
            t.ok(tm.wait_for("low, medium, high or off", 3) is not None,
                 "/think extreme: refused, the levels named", tm.capture())

t.done()
