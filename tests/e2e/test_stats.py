#!/usr/bin/env python3
"""End-to-end tests of `tokterm stats` (issue 18): what a real exchange saves (retries, 429s,
the inter-token gap) and honest percentiles (tokens/s only over answers long enough). TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def query(home, sql):
    con = sqlite3.connect(os.path.join(home, ".local", "share", "tokterm", "tokterm.db"))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    env = {"OPENAI_BASE_URL": srv.base()}
    # a 429 waited out, then 40 tokens 20 ms apart: one retry, one 429, a measurable speed
    srv.queue(["status=429,h.retry-after-ms=100,error=slow,code=rate_limit_exceeded",
               "gen=40,delay_ms=20"])
    rc, out, err = ttlib.run_tokterm(["--no-cache", "-p", "a long one"], env=env, home=home)
    t.ok(rc == 0, "the answer after a 429", err.decode())
    srv.clear_queue()
    # a burst: 3 tokens at once (the rate that says a million tokens/s)
    srv.queue(["gen=3"])
    rc, out, err = ttlib.run_tokterm(["--no-cache", "-p", "a burst"], env=env, home=home)
    t.ok(rc == 0, "the burst answer", err.decode())
    srv.clear_queue()
    rows = query(home, "SELECT retries, rate_limited, itl IS NOT NULL, completion_tokens "
                       "FROM messages WHERE role = 'assistant' ORDER BY id")
    t.eq([r[:3] for r in rows], [(1, 1, 1), (0, 0, 1)],
         "saved: the first answer's retry and 429 and both answers' inter-token gap")
    rc, out, err = ttlib.run_tokterm(["stats", "--json"], env=env, home=home)
    j = json.loads(out) if rc == 0 else {}
    t.eq((j.get("retries"), j.get("rate_limited"), j.get("sent")), (1, 1, 2),
         "stats --json: 1 retry, 1 429, 2 answers sent")
    t.eq(j.get("ttft_seconds", {}).get("n"), 2, "TTFT over both answers")
    tps = j.get("tokens_per_second", {})
    t.ok(tps.get("n") == 1, "tokens/s over the long answer only (not the burst)", repr(tps))
    t.ok(0 < tps.get("p99", 0) < 1000, "tokens/s p99 is a real rate: %s" % tps.get("p99"))
    gap = j.get("inter_token_seconds", {}).get("p99", 0)
    t.ok(0.01 <= gap < 1, "the inter-token gap p99 is about the server's 20 ms: %s" % gap)
    prov = [p.get("host") for p in j.get("providers", [])]
    t.eq(prov, ["127.0.0.1:%d" % srv.port], "one provider: the API host")
    rc, out, err = ttlib.run_tokterm(["stats", "--model", "nothing-like-it"], env=env, home=home)
    t.ok(rc == 0 and b"answers               0" in out, "--model: only that model's answers",
         out.decode())
    rc, out, err = ttlib.run_tokterm(["stats"], env=env, home=home)
    text = out.decode()
    t.ok(rc == 0 and "retries               1 (1 answered 429)" in text
         and "(1 answer of 20+ tokens" in text, "stats: retries, and tokens/s says over what",
         text)

t.done()
