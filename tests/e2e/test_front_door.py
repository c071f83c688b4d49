#!/usr/bin/env python3
"""One front door (core/setup.c): the chat, -p and batch get the key pool (`keys =`) and the
fallback (`fallback =` profile, `fallback_model`) from the same setup. The chat is driven in a
private tmux against the fake server; what was sent is read from the server's log. Prints TAP;
the chat's points are skipped cleanly when tmux is missing."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import urllib.parse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

KEY_A, KEY_B = "sk-aaaaaaaaaaaa", "sk-bbbbbbbbbbbbbbbbbbbbbbbb"
LEN_A, LEN_B = "<redacted len=%d>" % (7 + len(KEY_A)), "<redacted len=%d>" % (7 + len(KEY_B))
# 429 on the first key: with a pool, the retry goes at once to another healthy key
REFUSE_429 = ("status=429,error=slow,code=rate_limit_exceeded,h.x-ratelimit-remaining-requests=0,"
              "h.x-ratelimit-reset-requests=60s")
REFUSE_401 = "status=401,error=Incorrect%20API%20key"


def home_with(config):
    home = ttlib.make_home()
    cfg = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write(config)
    return home


def pool_env(srv, home):
    return {"HOME": home, "KEY_A": KEY_A, "KEY_B": KEY_B, "OPENAI_API_KEY": None,
            "OPENAI_BASE_URL": srv.base()}


def fallback_config(srv):
    return ("profile = main\n[main]\nbase_url = %s\nbreaker_failures = 2\nfallback = backup\n"
            "[backup]\nbase_url = %s\nmodel = backup-model\n" % (srv.base("status=500"),
                                                                  srv.base()))


def start_chat(tm, env, args=()):
    e = dict(env)
    home = e.pop("HOME", None)
    tm.run([ttlib.tokterm_path()] + list(args), ttlib.clean_env(home=home, env=e))
    return tm.wait_for(re.compile("F1|\u203a"), 10)


def chat_send(tm, text, mark="\u2713", timeout=15):
    """Type text, press Enter, wait for the answer's footer mark; returns the screen."""
    tm.send_text(text)
    tm.send("Enter")
    return tm.wait_for(re.compile(re.escape(text) + r"[\s\S]*" + mark), timeout)


def auths(made):
    return [r["headers"].get("authorization") for r in made]


with ttlib.FakeServer() as srv:
    # --- scripted mode and batch take the same pool and fallback (the reference) ------------------
    home = home_with("keys = KEY_A, KEY_B\n")
    srv.clear_queue()
    srv.queue([REFUSE_429, ""])
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--json", "-p", "pool -p"],
                                     env=pool_env(srv, home), home=home)
    made = srv.requests()[n0:]
    res = json.loads(out) if out.strip() else {}
    t.eq((rc, res.get("content"), res.get("key")), (0, "pool -p", "KEY_B"),
         "-p with a pool: key A refused (429), key B answers")
    t.eq(auths(made), [LEN_A, LEN_B], "-p with a pool: A then B on the wire")

    d = ttlib.tempdir("tt-front-")
    lines = os.path.join(d, "in.jsonl")
    with open(lines, "w") as f:
        f.write(json.dumps({"id": 1, "prompt": "pool batch"}) + "\n")
    srv.clear_queue()
    srv.queue([REFUSE_429, ""])
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--no-cache", "batch", lines],
                                     env=pool_env(srv, home), home=home)
    made = srv.requests()[n0:]
    res = json.loads(out.splitlines()[0]) if out.strip() else {}
    t.eq((rc, res.get("content"), res.get("key")), (0, "pool batch", "KEY_B"),
         "batch with a pool: key A refused (429), key B answers")
    t.eq(auths(made), [LEN_A, LEN_B], "batch with a pool: A then B on the wire")

    # a server echoing pieces of the pool's keys: starred in messages, output and the store
    echo = "your keys %s and %s are wrong" % (KEY_A[:-1], KEY_B[1:])
    leaks = lambda data: [k for k in (KEY_A[:8], KEY_A[-8:], KEY_B[:8], KEY_B[-8:])
                          if k.encode() in data]
    srv.clear_queue()
    srv.queue(["status=400,error=" + urllib.parse.quote(echo)])
    rc, out, err = ttlib.run_tokterm(["-p", "pool echo"], env=pool_env(srv, home), home=home)
    rc2, dump, _ = ttlib.run_tokterm(["export", "--all", "--format", "json"],
                                     env=pool_env(srv, home), home=home)
    t.ok(rc == 3 and b"are wrong" in err and not leaks(err) and not leaks(dump),
         "-p with a pool: a server's echo of any pool key is starred (stderr, database)",
         "rc %d, leaks %r / %r: %r" % (rc, leaks(err), leaks(dump), err))
    with open(lines, "w") as f:
        f.write(json.dumps({"id": 2, "prompt": "pool echo batch"}) + "\n")
    srv.clear_queue()
    srv.queue(["status=400,error=" + urllib.parse.quote(echo)])
    rc, out, err = ttlib.run_tokterm(["--no-cache", "batch", lines], env=pool_env(srv, home),
                                     home=home)
    t.ok(b"are wrong" in out and not leaks(out) and not leaks(err),
         "batch with a pool: the echo of any pool key is starred", "%r %r" % (leaks(out), out))

    # batch now has the fallback too: the same endpoint with fallback_model
    home = home_with("base_url = %s\nbreaker_failures = 2\nfallback_model = spare-model\n"
                     % srv.base())
    srv.clear_queue()
    srv.queue(["status=500", "status=500", ""])
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--retries", "3", "--no-cache", "batch", lines],
                                     env={"OPENAI_BASE_URL": None}, home=home)
    made = srv.requests()[n0:]
    srv.clear_queue()
    res = json.loads(out.splitlines()[0]) if out.strip() else {}
    t.eq((rc, res.get("model"), res.get("fallback")), (0, "spare-model", True),
         "batch: the breaker opens after 2 failures and fallback_model answers")
    t.eq([r["body"]["model"] for r in made], ["gpt-4o-mini", "gpt-4o-mini", "spare-model"],
         "batch fallback: the same body with the fallback's model")
    same = [dict(r["body"], model=None) for r in made]
    t.ok(len(same) == 3 and same[0] == same[2], "batch fallback: messages and parameters kept")

    # --- the sampling parameters of API_SAMPLING reach the body from every door ----------------
    # top_p and seed are one line each in the table: a profile, the command line (over the
    # profile) and a batch line (over both) set them; unset, they are not sent
    home = home_with("profile = p\n[p]\ntop_p = 0.5\nseed = 7\n")
    env = {"OPENAI_BASE_URL": srv.base()}

    def sent(args, stdin=None):
        srv.clear_queue()
        n0 = len(srv.requests())
        rc, out, err = ttlib.run_tokterm(["--no-cache"] + args, env=env, home=home, stdin=stdin)
        return rc, out, err, [r["body"] for r in srv.requests()[n0:]]

    def params(body):
        return tuple((body or {}).get(k) for k in ("top_p", "seed"))

    rc, out, err, bodies = sent(["-p", "profile params"])
    t.eq((rc, [params(b) for b in bodies]), (0, [(0.5, 7)]),
         "-p: top_p = 0.5 and seed = 7 of the profile reach the body")
    rc, out, err, bodies = sent(["--top-p", "0.25", "--seed", "0", "-p", "cli params"])
    t.eq((rc, [params(b) for b in bodies]), (0, [(0.25, 0)]),
         "-p: --top-p 0.25 and --seed 0 win over the profile (a seed of 0 is sent)")
    with open(lines, "w") as f:
        f.write(json.dumps({"id": 1, "prompt": "line params", "top_p": 0.9, "seed": 3}) + "\n")
        f.write(json.dumps({"id": 2, "prompt": "profile params"}) + "\n")
        f.write(json.dumps({"id": 3, "prompt": "bad", "top_p": 2}) + "\n")
    rc, out, err, bodies = sent(["--seed", "11", "batch", "-j", "1", lines])
    by = {b["messages"][-1]["content"]: params(b) for b in bodies}
    t.eq(by, {"line params": (0.9, 3), "profile params": (0.5, 11)},
         "batch: a line's top_p and seed win over --seed 11 and the profile's top_p")
    res = {r.get("id"): r for r in (json.loads(x) for x in out.splitlines() if x.strip())}
    t.eq(((res.get(3) or {}).get("error"), rc),
         ("line 3: \"top_p\" must be a number from 0 to 1", 3),
         "batch: a line's top_p out of range is refused and named")
    rc, out, err, bodies = sent(["--top-p", "1.5", "-p", "x"])
    t.ok(rc == 2 and b"top_p must be a number from 0 to 1" in err and not bodies,
         "--top-p 1.5: bad usage (exit 2), nothing sent", err.decode())
    home = home_with("")
    rc, out, err, bodies = sent(["-p", "no params"])
    t.ok(rc == 0 and len(bodies) == 1 and "top_p" not in bodies[0] and "seed" not in bodies[0],
         "no top_p or seed configured: neither is sent", repr(bodies))

    if not ttlib.Tmux.available():
        t.skip("the chat with keys and fallback", "tmux is not installed", tool="tmux")
        sys.exit(t.done())

    # --- the chat: `keys =`, the first key refused ------------------------------------------------
    home = home_with("keys = KEY_A, KEY_B\n")
    with ttlib.Tmux(80, 24) as tm:
        start_chat(tm, pool_env(srv, home), ["--no-cache"])
        scr = tm.wait_for(re.compile("Type a message|no API key"), 5) or ""
        t.ok("Type a message" in scr and "no API key" not in scr,
             "chat with a pool and no OPENAI_API_KEY: it opens ready to send", scr)
        # a 429 on key A: retried at once with key B, in the same exchange
        srv.clear_queue()
        srv.queue([REFUSE_429, ""])
        n0 = len(srv.requests())
        scr = chat_send(tm, "pool chat one")
        made = srv.requests()[n0:]
        t.ok(scr is not None and "pool chat one" in scr.split("\n", 1)[-1],
             "chat: key A refused (429), the answer comes with key B", scr or tm.capture())
        t.eq(auths(made), [LEN_A, LEN_B], "chat: A then B on the wire (the pool is wired)")
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "chat with a pool: Ctrl-D quits with status 0")
    # a 401 on key A: the same turn goes on with key B (until 2026-12 it failed, "a refused key
    # is not retried"), and so does the next (a new chat: in the one above, A cools down for
    # the 60 s its 429 asked)
    home = home_with("keys = KEY_A, KEY_B\n")
    with ttlib.Tmux(80, 24) as tm:
        start_chat(tm, pool_env(srv, home), ["--no-cache"])
        srv.clear_queue()
        srv.queue([REFUSE_401, ""])
        n0 = len(srv.requests())
        scr = chat_send(tm, "pool chat two")
        t.ok(scr is not None and scr.count("pool chat two") >= 2 and
             auths(srv.requests()[n0:]) == [LEN_A, LEN_B],
             "chat: key A refused with 401, the same turn is answered with key B",
             scr or tm.capture())
        scr = chat_send(tm, "pool chat three")
        made = srv.requests()[n0:]
        t.ok(scr is not None and scr.count("pool chat three") >= 2,
             "chat: the next turn is answered", tm.capture())
        t.eq(auths(made), [LEN_A, LEN_B, LEN_B], "chat: after A's 401 the next turn uses key B")
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "chat with a pool: Ctrl-D quits with status 0 (2)")

    # every key cooling down or dead: a turn waits for the first key to come back (it used a
    # NULL quota and the chat crashed). A's 429 cools it 4 s; B's 401 kills B, and that turn
    # waits for A and is answered; so is the next, with A.
    home = home_with("keys = KEY_A, KEY_B\n")
    with ttlib.Tmux(80, 24) as tm:
        start_chat(tm, pool_env(srv, home), ["--no-cache"])
        srv.clear_queue()
        srv.queue([REFUSE_429.replace("60s", "4s") + ",h.retry-after=4", "",
                   REFUSE_401, ""])
        n0 = len(srv.requests())
        scr = chat_send(tm, "cool one")
        scr = chat_send(tm, "cool two", timeout=20)
        scr = chat_send(tm, "cool three", timeout=20)
        made = srv.requests()[n0:]
        t.ok(scr is not None and scr.count("cool two") >= 2 and scr.count("cool three") >= 2 and
             tm.dead() is None,
             "chat: with A cooling and B refused, the turn waits for A and is answered",
             tm.capture())
        t.eq(auths(made), [LEN_A, LEN_B, LEN_B, LEN_A, LEN_A],
             "chat: A (429), B, B (401), then A again")
        gap = made[3]["t"] - made[0]["t"] if len(made) == 5 else 0
        t.ok(gap >= 3.8, "chat: A was not used again before its 4 s were over (%.2fs)" % gap)
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "chat with a cooling pool: Ctrl-D quits with status 0")

    # --- the chat: a `fallback =` profile when the breaker opens ----------------------------------
    home = home_with(fallback_config(srv))
    srv.clear_queue()
    with ttlib.Tmux(80, 24) as tm:
        start_chat(tm, {"HOME": home, "OPENAI_BASE_URL": None}, ["--retries", "3", "--no-cache"])
        n0 = len(srv.requests())
        scr = chat_send(tm, "fall back chat", timeout=20)
        made = srv.requests()[n0:]
        t.ok(scr is not None, "chat: the fallback profile answers once the breaker opens",
             tm.capture())
        t.eq([(r["spec"] or {}).get("status") for r in made], [500, 500, None],
             "chat: 2 failures open the breaker, the third attempt goes to the fallback")
        t.eq([r["body"]["model"] for r in made[-1:]], ["backup-model"],
             "chat: the fallback request carries the fallback profile's model")
        tm.send("C-d")
        t.eq(tm.wait_exit(5), 0, "chat with a fallback: Ctrl-D quits with status 0")

    # the same configuration with -p, for comparison: the same three requests
    srv.clear_queue()
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--retries", "3", "--json", "-p", "fall back -p"],
                                     env={"OPENAI_BASE_URL": None}, home=home)
    made = srv.requests()[n0:]
    res = json.loads(out) if out.strip() else {}
    t.eq((rc, res.get("model"), len(made)), (0, "backup-model", 3),
         "-p with the same fallback profile: the same three requests")

sys.exit(t.done())
