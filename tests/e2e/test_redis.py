#!/usr/bin/env python3
"""Shared quota state on Redis (state = redis://...): four tokterm processes with separate
homes (four machines) run `batch -j 16` against one fake server that enforces one global limit
(600 requests a minute, a burst of 10, and 60,000 tokens a minute). With a real redis-server
(started here on a free port, in a temp dir) they hold the limit together: at most 1 % 429s, no
prompt fails, at least 90 % of the limit; without it the same job draws the 429 storm; Redis
killed mid-job: every answer still comes. redis-server missing is a skip, a failure under CI
(TOKTERM_REQUIRE_TOOLS).

The URL gives each Redis call 1 s (?timeout=1000) rather than the default 50 ms: the sixteen
connections share the machine with the test's fake server and, under ASan and with other tests
beside it, a call on a busy CPU took over 50 ms, and the fallback to local pacing that is meant
for a Redis that is slow let 429s through. What is checked here is the sharing; the budget
itself (the default and ?timeout=) is checked against a silent server in test_state."""
import sys
sys.dont_write_bytecode = True
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import ttlib

t = ttlib.Tap()
RPM, BURST, PER_PROC, PROCS = 600, 10, 40, 4


def start_redis(port, d):
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--dir", d, "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p
        except OSError:
            time.sleep(0.02)
    p.kill()
    raise RuntimeError("redis-server did not start")


def stop(p):
    if p and p.poll() is None:
        p.kill()
        p.wait()


def run_job(srv, spec, state, tag, kill=None):
    """Four batch processes of PER_PROC prompts each, at once; returns (results per process,
    wall seconds, the server's records of this job)."""
    before = len(srv.requests())
    procs = []
    for i in range(PROCS):
        home = ttlib.make_home()
        ttlib.write_config(home, "state = %s\n" % state if state else "")
        path = os.path.join(home, "in.jsonl")
        with open(path, "w") as f:
            for k in range(PER_PROC):
                f.write(json.dumps({"id": "%s-%d-%d" % (tag, i, k),
                                    "prompt": "%s %d %d" % (tag, i, k)}) + "\n")
        env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(spec)})
        procs.append(subprocess.Popen([ttlib.tokterm_path(), "batch", "-j", "16", path],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True))
    t0 = time.monotonic()
    if kill:
        kill()
    res = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        lines = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
        res.append((p.returncode, lines, err.decode()))
    wall = time.monotonic() - t0
    return res, wall, srv.requests()[before:]


def summary(res, reqs):
    limited = sum(1 for r in reqs if r.get("rate_limited"))
    done = sum(1 for rc, lines, _ in res for x in lines if x.get("outcome") == "complete")
    return limited, done


def sustained(reqs):
    """Requests a second the server let through after the first burst: (n - burst) over the
    span between the first and the last accepted arrival."""
    ok = sorted(r["t"] for r in reqs if not r.get("rate_limited"))
    if len(ok) <= BURST + 1 or ok[-1] <= ok[0]:
        return 0.0
    return (len(ok) - BURST) / (ok[-1] - ok[0])


if not shutil.which("redis-server") or not shutil.which("redis-cli"):
    t.skip("shared state on Redis", "redis-server not installed", tool="redis-server")
    sys.exit(t.done())

rdir = ttlib.tempdir("tt-redis-")
port = ttlib.free_port()
redis = start_redis(port, rdir)
state = "redis://127.0.0.1:%d/0?timeout=1000" % port
total = PROCS * PER_PROC
try:
    with ttlib.FakeServer() as srv:
        spec = "rpm=%d,burst=%d,tpm=60000,tburst=1000" % (RPM, BURST)
        # 1. with the shared state: one global pace
        res, wall, reqs = run_job(srv, spec, state, "shared")
        limited, done = summary(res, reqs)
        rate = sustained(reqs)
        t.ok(all(rc == 0 for rc, _, _ in res) and done == total,
             "state = redis: all %d prompts answered by 4 processes (%.1f s)" % (total, wall),
             "\n".join(e for _, _, e in res)[-2000:])
        t.ok(limited <= 0.01 * len(reqs),
             "state = redis: at most 1 %% 429s (%d of %d requests)" % (limited, len(reqs)))
        t.ok(rate >= 0.9 * RPM / 60,
             "state = redis: at least 90 %% of the limit (%.2f requests/s of %g)"
             % (rate, RPM / 60.0))
        t.ok(not any("warning" in e for _, _, e in res), "no warning while Redis is up",
             "\n".join(e for _, _, e in res)[-1000:])
        # Redis holds hashes and numbers, never the key
        keys = subprocess.run(["redis-cli", "-p", str(port), "--scan"], capture_output=True,
                              text=True).stdout.split()
        t.ok(keys and all(k.startswith("tokterm:") for k in keys),
             "Redis holds tokterm's hashed names only: %s" % keys[:3])
        # A spent per-day limit another process saw holds this one no longer than a lone
        # process is held: past max_rate_wait it is said and the request goes (until 2026-12
        # the second machine waited the ~10 hours the shared bucket reported)
        day = ("h.x-ratelimit-limit-requests=2,h.x-ratelimit-remaining-requests=0,"
               "h.x-ratelimit-reset-requests=20h")
        outs = []
        for i in range(2):
            home = ttlib.make_home()
            ttlib.write_config(home, "state = %s\n" % state)
            outs.append(ttlib.run_tokterm(["--no-save", "--no-cache", "--base-url",
                                           srv.base(day), "-p", "day %d" % i], home=home,
                                          timeout=20))
        rc, out, err = outs[1]
        t.ok(outs[0][0] == 0 and rc == 0 and b"day 1" in out and
             b"sending now, the server decides" in err,
             "a spent daily limit shared on Redis: the next machine's request goes, said",
             "%r %r" % (outs[0][2][-300:], err[-300:]))
        dump = subprocess.run(["redis-cli", "-p", str(port), "--no-raw", "EVAL",
                               "local o = {} for _, k in ipairs(redis.call('KEYS', '*')) do "
                               "for _, v in ipairs(redis.call('HGETALL', k)) do o[#o+1] = v end "
                               "end return o", "0"], capture_output=True, text=True).stdout
        t.ok(ttlib.TEST_KEY not in dump and "shared 0" not in dump,
             "no key and no prompt text in Redis")

        # 1b. a pool's refused keys, shared: the next process fails at once (until 2026-12 a
        # dead key read back from Redis as a day's cool-down: "waiting 24h0m0s for key A")
        home = ttlib.make_home()
        os.makedirs(os.path.join(home, ".config", "tokterm"))
        with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
            f.write("state = %s\nkeys = KEY_A, KEY_B\n" % state)
        penv = {"OPENAI_BASE_URL": srv.base(), "KEY_A": "sk-aaaa-redis-pool-one",
                "KEY_B": "sk-bbbb-redis-pool-two"}
        srv.queue(["status=401,error=revoked", "status=401,error=revoked"])
        n0 = len(srv.requests())
        rc1, _, err1 = ttlib.run_tokterm(["--no-cache", "-p", "a"], env=penv, home=home)
        t0 = time.time()
        rc2, _, err2 = ttlib.run_tokterm(["--no-cache", "-p", "b"], env=penv, home=home,
                                         timeout=30)
        rc3, _, err3 = ttlib.run_tokterm(["--no-cache", "-p", "c"], env=penv, home=home,
                                         timeout=30)
        err2 += err3
        rc2 = max(rc2, rc3) if rc2 == rc3 else -1
        el = time.time() - t0
        srv.clear_queue()
        t.ok(rc1 == 3 and rc2 == 3 and el < 10 and len(srv.requests()) - n0 == 2 and
             b"every key of the pool (KEY_A, KEY_B) was refused" in err2,
             "state = redis, both keys refused: the next processes fail at once (%.1f s), "
             "sends nothing" % el, (err1 + err2).decode())

        # 1c. one-shots in a row on an endpoint that reports no limit: none waits for the one
        # before (until 2026-12 each waited out the last one's 2 s probe: "waiting for quota
        # 10ms (client-side limit)" four times, then 1.98 s)
        home = ttlib.make_home()
        os.makedirs(os.path.join(home, ".config", "tokterm"))
        with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
            f.write("state = %s\n" % state)
        walls = []
        for i in range(3):
            t0 = time.time()
            rc, _, err = ttlib.run_tokterm(["--no-cache", "-p", "one-shot %d" % i], env={
                "OPENAI_BASE_URL": srv.base("reply=ok")}, home=home)
            walls.append((rc, round(time.time() - t0, 2), b"waiting" in err))
        t.ok(all(rc == 0 and w < 1.0 and not waited for rc, w, waited in walls),
             "state = redis: one-shots in a row do not wait for each other's probe", str(walls))

        # 1d. an open breaker shared through Redis: the fallback model at the same URL has a
        # breaker of its own (until 2026-12 it was the endpoint's, open too: exit 4, nothing
        # sent, "using the fallback profile")
        home = ttlib.make_home()
        os.makedirs(os.path.join(home, ".config", "tokterm"))
        with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
            f.write("state = %s\n[brk]\nbase_url = %s\nbreaker_failures = 2\nmax_retries = 0\n"
                    "fallback_model = fake-fallback\n" % (state, srv.base("reply=fine")))
        # (each run's request, failed for good, goes to the fallback model, which fails too)
        srv.queue(["status=503"] * 4)
        for p in ("a", "b"):
            ttlib.run_tokterm(["--no-cache", "-P", "brk", "-p", p], home=home)
        srv.clear_queue()
        rc, out, err = ttlib.run_tokterm(["--no-cache", "-P", "brk", "--json", "-p", "c"],
                                         home=home)
        try:
            j = json.loads(out)
        except ValueError:
            j = {}
        t.ok(rc == 0 and j.get("model") == "fake-fallback" and j.get("content") == "fine" and
             b"using the fallback model fake-fallback" in err,
             "state = redis, breaker open: the fallback model answers, named as a model",
             out.decode() + err.decode())

        # 2. without it: four pacers that do not know of each other draw the storm
        time.sleep(1.5)  # the server's bucket (one per rpm and burst) full again
        res, wall, reqs = run_job(srv, spec, None, "alone")
        limited, done = summary(res, reqs)
        t.ok(limited > 0.01 * len(reqs),
             "without shared state the same job draws the 429 storm (%d of %d requests)"
             % (limited, len(reqs)))

        # 3. Redis killed mid-job: the local state takes over, every process paced on the share
        # of the limit it had (a storm as in 2 would use up the default 2 retries of some
        # prompts), and every answer comes.
        def kill_soon():
            time.sleep(3)
            stop(redis)
        time.sleep(1.5)
        res, wall, reqs = run_job(srv, spec, state, "killed",
                                  kill=kill_soon)
        limited, done = summary(res, reqs)
        errs = "\n".join(e for _, _, e in res)
        t.ok(all(rc == 0 for rc, _, _ in res) and done == total,
             "Redis killed after 3 s: every prompt still answered, default retries (%d, %d "
             "429s of %d requests)" % (done, limited, len(reqs)), errs[-2000:])
        # A Redis call slower than its budget while Redis is alive (a loaded machine) is a
        # true "unreachable" too, followed by "reachable again": what must hold is one warning
        # per loss, and the last word of each process is that the state is gone.
        def losses(e):
            lost = back = 0
            last = None
            for line in e.splitlines():
                if "shared state" in line and "reachable again" in line:
                    back, last = back + 1, "back"
                elif "shared state" in line and "unreachable" in line:
                    lost, last = lost + 1, "lost"
            return lost, back, last
        t.ok(all(losses(e)[0] >= 1 and losses(e)[0] == losses(e)[1] + 1 and
                 losses(e)[2] == "lost" for _, _, e in res),
             "each process warns once per loss that the shared state is gone, last after the "
             "kill (%s)" % [losses(e) for _, _, e in res], errs[-1000:])
finally:
    stop(redis)

sys.exit(t.done())
