#!/usr/bin/env python3
"""End-to-end tests of data/prices.tsv for the native dialects: a Claude (--api anthropic) and a
Gemini (--api gemini) run report a cost equal to tokens x the table's price, scripted (--json)
and in the chat's status bar. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
ANT_KEY = "sk-ant-test-0123456789abcdefghijklmnopqrstuvwxyz"
GEM_KEY = "AIzaSy-test-0123456789abcdefghijklmnopqrstu"
PTOKS = 100000  # big enough that the status bar shows dollars, not "<$0.0001"

# (dialect, model, USD per 1M input, per 1M output): the rows of data/prices.tsv under test
CASES = [("anthropic", "claude-haiku-4-5", 1.00, 5.00),
         ("gemini", "gemini-2.5-flash", 0.30, 2.50)]


def env_for(srv, api, spec):
    e = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": "http://127.0.0.1:9/never",
         "GEMINI_API_KEY": None, "GOOGLE_API_KEY": None}
    if api == "anthropic":
        e.update(ANTHROPIC_API_KEY=ANT_KEY, ANTHROPIC_BASE_URL=srv.base(spec))
    else:
        e.update(GEMINI_API_KEY=GEM_KEY)
    return e


def args_for(srv, api, model, spec):
    a = ["--api", api, "-m", model]
    if api == "gemini":
        a += ["--base-url", "http://127.0.0.1:%d/%s/v1beta" % (srv.port, spec)]
    return a


with ttlib.FakeServer() as srv:
    spec = "prompt_tokens=%d" % PTOKS
    for api, model, pin, pout in CASES:
        rc, out, err = ttlib.run_tokterm(args_for(srv, api, model, spec) +
                                         ["--json", "-p", "price me"],
                                         env=env_for(srv, api, spec))
        t.ok(rc == 0, "%s: --json exit 0" % model, err.decode(errors="replace"))
        try:
            o = json.loads(out.decode().splitlines()[-1])
        except (ValueError, IndexError):
            o = {}
        u = o.get("usage") or {}
        usd = (o.get("context") or {}).get("spent_usd")
        want = (u.get("prompt_tokens", 0) * pin + u.get("completion_tokens", 0) * pout) / 1e6
        t.ok(u.get("prompt_tokens") == PTOKS and u.get("completion_tokens", 0) > 0,
             "%s: the usage decoded" % model, json.dumps(u))
        t.ok(usd is not None and usd > 0 and abs(usd - want) < 1e-9,
             "%s: spent_usd = tokens x price ($%s/$%s per 1M): %r, want %r"
             % (model, pin, pout, usd, want))

    # --- the chat's status bar shows the session's spend in dollars ---------------------------
    if not ttlib.Tmux.available():
        t.skip("status bar spend in tmux", "tmux is not installed", tool="tmux")
    else:
        for api, model, pin, pout in CASES:
            with ttlib.Tmux(100, 24) as tm:
                e = ttlib.clean_env(env=env_for(srv, api, spec))
                tm.run([ttlib.tokterm_path()] + args_for(srv, api, model, spec), e)
                t.ok(tm.wait_for(re.compile("F1|\u203a"), 10) is not None,
                     "%s chat: opens" % model, tm.capture())
                tm.send_text("hi")  # the echo: one piece, one completion token
                tm.send("Enter")
                done = tm.wait_for(re.compile(r"session \S+ tok \$\d+\.\d{4}"), 15)
                # one turn: the prompt's PTOKS at pin, "hi" is one output token
                t.ok(done is not None and "$0.%s" % ("%.4f" % (PTOKS * pin / 1e6))[2:4] in done,
                     "%s chat: the status bar shows the spend in dollars" % model,
                     done or tm.capture())
                footer = re.search(r"\u2713[^\n]*", done or tm.capture())
                footer = footer.group(0) if footer else ""
                t.ok(re.search(r"\u00b7 1 token( |$)", footer) is not None
                     and "1 tokens" not in footer,
                     "%s chat: the answer's footer says \"1 token\"" % model, footer)

sys.exit(t.done())
