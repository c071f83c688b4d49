#!/usr/bin/env python3
"""End-to-end tests of the context window, history compression, budget and calibration
(issue 5). TAP.

Every request that leaves is read back from the fake server's log and its prompt is counted
with `tokterm count --encoding o200k_base` (content) plus the chat overhead the API bills
(3 per message + the role, 3 for the reply primer), so "it fits" is checked independently of
the planner's own arithmetic."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
SYSTEM = "SYSTEM PROMPT: you are the e2e test assistant."
_counts = {}


def count(text):
    """Tokens of text in o200k_base, from the tokterm binary's count subcommand."""
    if text not in _counts:
        r = subprocess.run([ttlib.tokterm_path(), "count", "--encoding", "o200k_base"],
                           input=text.encode("utf-8"), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=ttlib.clean_env(), timeout=30)
        if r.returncode != 0:
            t.bail("tokterm count failed: %s" % r.stderr.decode(errors="replace"))
        _counts[text] = int(r.stdout)
    return _counts[text]


def chat_tokens(messages):
    return sum(3 + count(m["role"]) + count(m["content"]) for m in messages) + 3


def prompt(i, words=24):
    pool = ["river", "stone", "lamp", "orange", "quiet", "window", "paper", "engine", "cloud",
            "garden", "silver", "harbour"]
    return "Turn %d: " % i + " ".join(pool[(i * 5 + k * 7) % len(pool)] for k in range(words))


def db_path(home):
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


def streamed(reqs):
    return [r for r in reqs if r["body"] and r["body"].get("stream") is True]


def summaries(reqs):
    return [r for r in reqs if r["body"] and r["body"].get("stream") is not True]


def write_config(home, text):
    path = os.path.join(home, "tokterm.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


with ttlib.FakeServer() as srv:

    def run(home, cfg, args, spec="reply=Fine%20thanks.", **kw):
        env = {"OPENAI_BASE_URL": srv.base(spec)}
        return ttlib.run_tokterm(["--config", cfg] + args, env=env, home=home, **kw)

    # --- a little over the window, policy summarize ------------------------------------------
    home = ttlib.make_home()
    cfg = write_config(home, "context_window = 600\nreserve_tokens = 100\n")
    budget = 600 - 100
    turns = [prompt(i) for i in range(1, 19)]
    n0 = len(srv.requests())
    args = ["-m", "gpt-4o-mini", "-s", SYSTEM]
    for p in turns:
        args += ["-p", p]
    rc, out, err = run(home, cfg, args)
    t.eq(rc, 0, "18 turns in a 600-token window: exit 0")
    reqs = srv.requests()[n0:]
    st, sm = streamed(reqs), summaries(reqs)
    t.eq(len(st), 18, "one streamed request per turn")
    sizes = [chat_tokens(r["body"]["messages"]) for r in st]
    t.ok(all(s <= budget for s in sizes), "every request that left fits window - reserve",
         "sizes %r, budget %d" % (sizes, budget))
    t.ok(sizes[0] < sizes[-1] and max(sizes) > budget * 0.8,
         "the history really grew close to the window (%r)" % sizes)
    t.ok(all(r["body"]["messages"][0] == {"role": "system", "content": SYSTEM} for r in st),
         "the system prompt is first in every request, unchanged")
    t.ok(all(r["body"]["messages"][-1]["content"] == p for r, p in zip(st, turns)),
         "the newest message is last in every request, unchanged")
    t.eq(len(sm), 1, "exactly one summary request in 18 turns")
    first_sum = next((i for i, r in enumerate(reqs) if r in sm), len(reqs) - 1)
    sm_body = sm[0]["body"] if sm else {"messages": [{"role": ""}, {"content": ""}]}
    t.ok(sm_body.get("stream") is not True and sm_body["messages"][0]["role"] == "system"
         and turns[0] in sm_body["messages"][1]["content"],
         "the summary request is not streamed and holds the oldest turn")
    after = [r for r in reqs[first_sum + 1:] if r in st]
    with_sum = [r for r in after if any(m["content"].startswith("Summary of the earlier part")
                                        for m in r["body"]["messages"])]
    t.ok(len(after) >= 2 and len(with_sum) == len(after),
         "every later request carries the summary (%d requests, no new summary)" % len(after))
    t.ok(all(r["body"]["messages"][1]["role"] == "system" and
             r["body"]["messages"][1]["content"].endswith("Fine thanks.") for r in with_sum),
         "the summary message comes after the system prompt, with the model's summary text")
    t.ok(all(turns[0] not in json.dumps(r["body"]) for r in after),
         "the summarised turn itself is not sent again")
    # an answer with invalid UTF-8 and a NUL (a broken server) that the summary then covers:
    # the summary request's body is valid JSON, with U+FFFD, nothing cut at the NUL (a
    # review found the summary built from the raw text)
    shome = ttlib.make_home()
    scfg = write_config(shome, "context_window = 600\nreserve_tokens = 100\n")
    srv.queue(["content_json=%22bad%FF%FE bytes %5Cu0000 and the rest%22"])
    n1 = len(srv.requests())
    sargs = ["-m", "gpt-4o-mini"]
    for p in turns:
        sargs += ["-p", p]
    rc, out, err = run(shome, scfg, sargs)
    sreqs = srv.requests()[n1:]
    bad = [r for r in sreqs if r.get("body") is None]
    ssm = summaries(sreqs)
    t.ok(rc == 0 and not bad and ssm and
         "bad\ufffd\ufffd bytes \ufffd and the rest" in ssm[0]["body"]["messages"][1]["content"],
         "a summary over a broken answer: valid JSON, U+FFFD, nothing cut",
         "rc=%d, %d bodies not JSON, %d summaries: %s" % (rc, len(bad), len(ssm),
                                                          err.decode(errors="replace")[-300:]))
    con = sqlite3.connect(db_path(home))
    rows = con.execute("SELECT conversation_id, first_message_id, last_message_id, summary "
                       "FROM summaries").fetchall()
    con.close()
    t.ok(len(rows) == 1 and rows[0][3] == "Fine thanks.", "the summary is stored once in SQLite",
         repr(rows))

    # resuming: the stored summary is reused, never paid for twice
    n1 = len(srv.requests())
    rc, out, err = run(home, cfg, ["-m", "gpt-4o-mini", "-c", "--json", "-p", "resumed question"])
    reqs = srv.requests()[n1:]
    t.eq((rc, len(reqs)), (0, 1), "resume: one request, no summary request")
    msgs = reqs[0]["body"]["messages"]
    t.ok(msgs[0]["content"] == SYSTEM and msgs[1]["content"].startswith("Summary of the earlier")
         and chat_tokens(msgs) <= budget, "resume: system prompt, stored summary, fits")
    j = json.loads(out.splitlines()[-1])
    t.ok(j["context"]["summary_reused"] and j["context"]["summary_requests"] == 0 and
         j["context"]["summarized"] > 0, "--json says the summary was reused", j.get("context"))
    t.eq(j["context"]["prompt_tokens_raw"], chat_tokens(msgs),
         "--json context.prompt_tokens_raw equals an independent count of the request")

    # --- a lot over, policy truncate ---------------------------------------------------------
    home = ttlib.make_home()
    cfg = write_config(home, "context_window = 600\nreserve_tokens = 100\n"
                             "context_policy = truncate\n")
    long_turns = [prompt(i, 150) for i in range(1, 6)]
    n0 = len(srv.requests())
    args = ["-m", "gpt-4o-mini", "-s", SYSTEM]
    for p in long_turns:
        args += ["-p", p]
    rc, out, err = run(home, cfg, args, spec="reply=" + "long%20answer%20" * 60)
    reqs = srv.requests()[n0:]
    t.eq((rc, len(reqs), len(summaries(reqs))), (0, 5, 0),
         "truncate: 5 turns of long messages, no summary request")
    sizes = [chat_tokens(r["body"]["messages"]) for r in reqs]
    t.ok(all(s <= budget for s in sizes), "truncate: every request fits", repr(sizes))
    t.ok(any("tokens elided by tokterm" in m["content"]
             for r in reqs for m in r["body"]["messages"][1:-1]),
         "truncate: long old messages are shortened with a marked elision")
    t.ok(all(r["body"]["messages"][0]["content"] == SYSTEM and
             r["body"]["messages"][-1]["content"] == p for r, p in zip(reqs, long_turns)),
         "truncate: system prompt first and newest message last, unchanged")

    # the same history in a window far too small for it
    cfg_small = write_config(home, "context_window = 400\nreserve_tokens = 50\n"
                                   "context_policy = truncate\n")
    n1 = len(srv.requests())
    rc, out, err = run(home, cfg_small, ["-m", "gpt-4o-mini", "-c", "--json", "-p", "and now?"])
    reqs = srv.requests()[n1:]
    msgs = reqs[0]["body"]["messages"] if reqs else []
    t.ok(rc == 0 and len(reqs) == 1 and chat_tokens(msgs) <= 350,
         "a lot over (history ~%d tokens, window 400): the request fits" %
         sum(len(p) // 4 for p in long_turns))
    t.ok(msgs and msgs[0]["content"] == SYSTEM and msgs[-1]["content"] == "and now?",
         "a lot over: system prompt and newest message survive")
    j = json.loads(out.splitlines()[-1])
    t.ok(j["context"]["dropped"] > 0, "--json context counts dropped messages", j["context"])

    # --- the newest message alone does not fit ------------------------------------------------
    n1 = len(srv.requests())
    rc, out, err = run(home, cfg_small, ["-m", "gpt-4o-mini", "-p", prompt(1, 400)])
    t.eq(rc, 2, "newest message alone too big: exit 2")
    t.ok(b"too long for the model's context window" in err and b"400" in err,
         "newest message alone too big: says so with the window", err.decode(errors="replace"))
    t.eq(len(srv.requests()), n1, "newest message alone too big: nothing was sent")

    # --- policy off: sent as is ---------------------------------------------------------------
    cfg_off = write_config(home, "context_window = 400\nreserve_tokens = 50\n"
                                 "context_policy = off\n")
    n1 = len(srv.requests())
    rc, out, err = run(home, cfg_off, ["-m", "gpt-4o-mini", "-c", "--no-cache", "-p", "off?"])
    reqs = srv.requests()[n1:]
    msgs = reqs[0]["body"]["messages"] if reqs else []
    con = sqlite3.connect(db_path(home))
    saved = con.execute("SELECT count(*) FROM messages WHERE conversation_id = "
                        "(SELECT max(id) FROM conversations)").fetchone()[0]
    con.close()
    t.ok(len(msgs) == saved and chat_tokens(msgs) > 400,
         "off: the whole history is sent as is, over the window (%d messages)" % len(msgs))
    t.ok(all("tokens elided" not in m["content"] for m in msgs), "off: nothing shortened")

    # --- budget: warning at 80 %, refusal at 100 % -------------------------------------------
    home = ttlib.make_home()
    cfg = write_config(home, "budget_tokens = 250\n")
    n0 = len(srv.requests())
    rc, out, err = run(home, cfg, ["-m", "gpt-4o-mini", "--json", "-p", "a", "-p", "b", "-p", "c",
                                   "-p", "d"], spec="reply=ok,prompt_tokens=100")
    reqs = srv.requests()[n0:]
    lines = [json.loads(x) for x in out.splitlines()]
    t.eq(rc, 2, "budget used up: exit 2")
    t.eq(len(reqs), 3, "budget: the 4th turn was not sent (3 x 101 tokens > 250)")
    t.ok(b"80% of the session's budget" in err or b"81% of the session's budget" in err,
         "budget: a warning at 80%", err.decode(errors="replace"))
    t.ok(b"token budget is used up" in err and b"budget_tokens" in err,
         "budget: the refusal says how to raise the cap", err.decode(errors="replace"))
    t.eq([x["context"]["spent_tokens"] for x in lines[:3]], [101, 202, 303],
         "budget: spend counted from the server's usage")
    usd = lines[0]["context"]["spent_usd"]
    t.ok(usd is not None and abs(usd - (100 * 0.15 + 1 * 0.60) / 1e6) < 1e-9,
         "budget: money from data/prices.tsv (gpt-4o-mini $0.15/$0.60 per 1M): %r" % usd)

    # --- calibration on a server that counts 1.3x the estimate --------------------------------
    home = ttlib.make_home()
    cfg = write_config(home, "")
    n_turns = 6
    user = [prompt(i, 10 + i * 3) for i in range(1, n_turns + 1)]
    specs, history, raws = [], [{"role": "system", "content": SYSTEM}], []
    for u in user:
        history.append({"role": "user", "content": u})
        raw = chat_tokens(history)
        raws.append(raw)
        specs.append("reply=ok,prompt_tokens=%d" % round(1.3 * raw))
        history.append({"role": "assistant", "content": "ok"})
    srv.queue(specs)
    args = ["-m", "llama-3-test", "-s", SYSTEM, "--json", "--no-cache"]
    for u in user:
        args += ["-p", u]
    n0 = len(srv.requests())
    rc, out, err = run(home, cfg, args)
    lines = [json.loads(x) for x in out.splitlines()]
    t.eq((rc, len(lines)), (0, n_turns), "calibration: %d turns" % n_turns)
    ctx = [x["context"] for x in lines]
    t.ok(all(c["approximate"] for c in ctx), "an unknown model's counts are approximate")
    t.eq([c["prompt_tokens_raw"] for c in ctx], raws,
         "the raw estimate of each request equals an independent o200k count")
    ratios = [c["ratio"] for c in ctx]
    t.ok(abs(ratios[0] - 1.3) < 0.01 and abs(ratios[-1] - 1.3) < 0.005,
         "the ratio converges on 1.3: %r" % ratios)
    t.ok(ctx[0]["prompt_tokens"] == raws[0] and
         all(abs(c["prompt_tokens"] - 1.3 * r) <= 1.5 for c, r in zip(ctx[1:], raws[1:])),
         "after the first answer the estimate is what the server will count (1.3x)")
    # the ratio is kept for the next run
    srv.queue(["reply=ok,prompt_tokens=%d" % round(1.3 * raws[0])])
    rc, out, err = run(home, cfg, ["-m", "llama-3-test", "-s", SYSTEM, "--json", "--no-cache",
                                   "-p", user[0]])
    c = json.loads(out.splitlines()[-1])["context"]
    t.ok(rc == 0 and c["ratio_samples"] > n_turns and abs(c["prompt_tokens"] - 1.3 * raws[0]) <= 1.5,
         "a new run starts with the learnt ratio", c)
    state = os.path.join(home, ".local", "state", "tokterm", "calibration")
    t.ok(os.path.exists(state) and "llama-3-test" in open(state).read(),
         "the ratio is saved in $XDG_STATE_HOME/tokterm/calibration")
    srv.clear_queue()

    # --- config values are checked -----------------------------------------------------------
    cfg = write_config(home, "context_policy = squash\n")
    rc, out, err = run(home, cfg, ["-p", "x"])
    t.ok(rc == 2 and b"context_policy must be one of" in err, "a bad context_policy is refused",
         err.decode(errors="replace"))

    # --- a server whose completion_tokens cannot be the answer's (1 token for 15 kB): the
    # answer is counted (until 2026-12 it went into the history as 1 token, unseen by the
    # window's check and /budget, and was sent in full on every later turn) ------------------
    home = ttlib.make_home()
    cfg = write_config(home, "")
    lie = ("reply=" + "word%20" * 3000 + ",usage_json=" +
           urllib.parse.quote('{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}'))
    srv.queue([lie, "reply=ok"])
    rc, out, err = run(home, cfg, ["--json", "-p", "one", "-p", "two"])
    lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    ctx = lines[1].get("context", {}).get("prompt_tokens", 0) if len(lines) == 2 else 0
    t.ok(rc == 0 and ctx >= 3000 and count("word " * 3000) <= ctx,
         "1 completion token for 3,000 words: the next turn counts the answer (%d tokens)" % ctx,
         err.decode(errors="replace"))

sys.exit(t.done())
