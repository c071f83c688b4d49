#!/usr/bin/env python3
"""End-to-end tests of `tokterm batch --remote`: the providers' Batch APIs (OpenAI's Files and
Batches, Anthropic's Message Batches) against the fake server's versions of them, whose
batches move one state per poll. Prints TAP.

Both providers end to end (the same output lines as a local batch, in input order), partial
failures, a batch that expires or fails, --remote-status and --remote-cancel, resume after a
kill -9 mid-poll (no second batch: the server's log), splitting at the provider's limits, bad
input lines reported as a local batch reports them, Gemini refused, and the API key never in
the store, the spool or the process's argv."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY
AKEY = "sk-ant-test-abcdefghijklmnopqrstuvwxyz0123456789"
FIELDS = {"id", "line", "content", "reasoning", "model", "finish_reason", "outcome", "exit_code",
          "http_status", "error", "usage", "timings", "connection_reused", "http_version",
          "cached", "attempts", "retries"}
POLL = ["--remote-poll", "0.05"]


def eq(got, want, name, diag=""):
    t.ok(got == want, name, "got %r, want %r%s" % (got, want, "; " + diag if diag else ""))


write_lines = ttlib.write_jsonl
parse = ttlib.parse_jsonl


def batch_log(srv, since=0):
    """The Files / Batches requests of the server's log after the first `since` of them."""
    return [r for r in srv.requests(all=True) if r.get("batch_api")][since:]


def created(log):
    return [r for r in log if r.get("batch_created")]


def files_hold(root, needle):
    """Files under root whose bytes hold needle."""
    hits = []
    for dp, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dp, n)
            try:
                with open(p, "rb") as f:
                    if needle in f.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


d = ttlib.tempdir("tt-rbatch-")
home = ttlib.make_home()

MIXED = [{"id": 1, "prompt": "alpha one"},
         {"id": "two", "prompt": "beta FAIL two"},
         "this is not json",
         {"id": 3, "messages": [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "gamma three"}]},
         {"prompt": "no id here"},
         {"id": 3, "prompt": "a duplicate id"},
         {"id": 6, "prompt": "delta six", "temperature": 0.5},
         "",
         {"id": 7, "prompt": "epsilon seven"}]
mixed = write_lines(os.path.join(d, "mixed.jsonl"), MIXED)
TEN = write_lines(os.path.join(d, "ten.jsonl"),
                  [{"id": i, "prompt": "prompt number %d" % i} for i in range(10)])

with ttlib.FakeServer() as srv:
    def run(args, spec="bsteps=2", api="openai", **kw):
        env = dict(kw.pop("env", {}) or {})
        if api == "anthropic":
            env.setdefault("ANTHROPIC_BASE_URL", srv.base(spec))
            env.setdefault("ANTHROPIC_API_KEY", AKEY)
            pre = ["--api", "anthropic", "-m", "claude-3-5-haiku-latest"]
        elif api == "responses":
            env.setdefault("OPENAI_BASE_URL", srv.base(spec))
            pre = ["--api", "responses", "-m", "gpt-4o-mini"]
        else:
            env.setdefault("OPENAI_BASE_URL", srv.base(spec))
            pre = ["-m", "gpt-4o-mini"]
        kw.setdefault("home", home)
        return ttlib.run_tokterm(pre + args, env=env, **kw)

    # --- a remote run that fails before it writes leaves --out as it was (a review found the
    # spool's error lines emptying it while the input was read) ---
    keep = os.path.join(d, "kept.out")
    with open(keep, "w") as f:
        f.write('{"id": 0, "outcome": "complete", "content": "precious"}\n')
    rc, out, err = run(["batch", "--remote", "--out", keep, mixed],
                       env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    with open(keep) as f:
        t.ok(rc != 0 and "precious" in f.read(), "--remote that cannot reach the provider: "
             "--out is left as it was (rc %d)" % rc, err.decode())

    # --- usage ---
    rc, out, err = run(["batch", "--remote", "--resume", "--out", os.path.join(d, "o"), mixed])
    eq(rc, 2, "--remote --resume: usage error")
    t.ok(b"resumes by itself" in err, "--remote --resume: says why", err.decode())
    rc, out, err = run(["batch", "--remote-poll", "0", "--remote", mixed])
    eq(rc, 2, "--remote-poll 0: usage error")
    rc, out, err = ttlib.run_tokterm(["--api", "gemini", "-m", "gemini-2.0-flash", "batch",
                                      "--remote", mixed], home=home,
                                     env={"GEMINI_API_KEY": "g-test-key",
                                          "GEMINI_BASE_URL": srv.base("")})
    eq(rc, 2, "gemini: exit 2")
    t.ok(b"not supported for api = gemini" in err, "gemini: says it is not supported",
         err.decode())
    eq(batch_log(srv), [], "gemini: nothing was sent")

    # --- the local batch's lines for the same input (the reference) ---
    rc_l, out_l, err_l = run(["batch", mixed], spec="")
    local = parse(out_l)
    local_by_line = {r["line"]: r for r in local if r}

    # --- OpenAI end to end ---
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [mixed])
    lines = parse(out)
    eq(rc, 3, "openai: exit 3 (one request failed, bad lines)")
    t.ok(all(r is not None for r in lines), "openai: every output line is JSON")
    eq([r["line"] for r in lines], [1, 2, 3, 4, 5, 6, 7, 9], "openai: one line per non-blank "
         "input line, in input order")
    t.ok(all(set(r) == FIELDS for r in lines), "openai: the local batch's fields",
         str([sorted(set(r) ^ FIELDS) for r in lines]))
    by_line = {r["line"]: r for r in lines}
    eq([by_line[i]["outcome"] for i in (1, 4, 7, 9)], ["complete"] * 4,
         "openai: the good requests are complete")
    eq(by_line[1]["content"], "alpha one", "openai: the answer's text (the fake echoes)")
    eq(by_line[4]["content"], "gamma three", "openai: a messages line")
    eq(by_line[1]["finish_reason"], "stop", "openai: finish_reason")
    t.ok(by_line[1]["usage"] and by_line[1]["usage"]["completion_tokens"] == 3,
         "openai: usage from the batch's answer", json.dumps(by_line[1]["usage"]))
    eq(by_line[1]["model"], "gpt-4o-mini", "openai: model")
    eq(by_line[1]["id"], 1, "openai: id kept as a number")
    eq(by_line[2]["id"], "two", "openai: id kept as a string")
    eq((by_line[2]["outcome"], by_line[2]["exit_code"], by_line[2]["http_status"]),
         ("api-error", 3, 400), "openai: the failed request: api-error, exit 3, HTTP 400")
    t.ok("FAIL" in (by_line[2]["error"] or "") and by_line[2]["error"].startswith("HTTP 400"),
         "openai: its error, worded as a local batch words it", by_line[2]["error"])
    for ln in (3, 5, 6):
        eq({k: by_line[ln][k] for k in ("id", "outcome", "exit_code", "error")},
             {k: local_by_line[ln][k] for k in ("id", "outcome", "exit_code", "error")},
             "openai: bad line %d reported exactly as the local batch reports it" % ln)
    eq({k: by_line[1][k] for k in FIELDS - {"timings", "connection_reused", "http_version",
                                               "attempts"}},
         {k: local_by_line[1][k] for k in FIELDS - {"timings", "connection_reused",
                                                     "http_version", "attempts"}},
         "openai: a complete line equals the local batch's but for the timings")
    log = batch_log(srv, n0)
    ups = [r for r in log if r.get("upload")]
    eq(len(ups), 1, "openai: one file uploaded")
    t.ok(ups and ups[0]["headers"].get("content-type", "").startswith("multipart/form-data"),
         "openai: the upload is multipart/form-data")
    eq(ups[0]["upload"]["lines"] if ups else None, 5, "openai: 5 requests in it")
    cr = created(log)
    eq(len(cr), 1, "openai: one batch created")
    body = cr[0]["body"] if cr else {}
    eq((body.get("endpoint"), body.get("completion_window")),
         ("/v1/chat/completions", "24h"), "openai: endpoint and completion window")
    polls = [r for r in log if r.get("batch_status")]
    eq([r["batch_status"] for r in polls][-1:], ["completed"], "openai: polled to completed")
    t.ok(any(r["path"].endswith("/content") for r in log), "openai: files downloaded")
    t.ok(all(r["headers"].get("authorization", "").startswith("<redacted") for r in log),
         "openai: every request carries the key (the log redacts it)")
    t.ok(b"created batch batch_" in err and b"completed" in err,
         "openai: stderr (not a terminal): quiet lines with the states", err.decode())
    t.ok(b"\r" not in err, "openai: no progress bar when stderr is not a terminal")
    t.ok(b"5 complete, 3 failed" not in err and b"4 complete, 4 failed" in err,
         "openai: the summary counts the bad lines too", err.decode())

    # the same again: a finished job is forgotten, so a new batch is made
    rc2, out2, _ = run(["batch", "--remote"] + POLL + [mixed])
    eq(len(created(batch_log(srv, n0))), 2, "openai: a finished job run again is a new batch")
    eq(parse(out2), lines, "openai: the same lines")

    # --- the Responses API: endpoint /v1/responses ---
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [mixed], api="responses")
    lines = parse(out)
    cr = created(batch_log(srv, n0))
    eq(cr[0]["body"].get("endpoint") if cr else None, "/v1/responses",
         "responses: the batch's endpoint is /v1/responses")
    eq([r["outcome"] for r in lines if r["line"] in (1, 4, 7, 9)], ["complete"] * 4,
         "responses: complete answers", err.decode())
    eq([r["content"] for r in lines if r["line"] == 1], ["alpha one"], "responses: text")

    # --- Anthropic end to end ---
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [mixed], api="anthropic")
    lines = parse(out)
    eq(rc, 3, "anthropic: exit 3")
    eq([r["line"] for r in lines], [1, 2, 3, 4, 5, 6, 7, 9], "anthropic: input order")
    by_line = {r["line"]: r for r in lines}
    eq([by_line[i]["outcome"] for i in (1, 4, 7, 9)], ["complete"] * 4,
         "anthropic: complete answers", err.decode())
    eq(by_line[9]["content"], "epsilon seven", "anthropic: text")
    eq(by_line[1]["finish_reason"], "stop", "anthropic: end_turn is stop")
    eq((by_line[2]["outcome"], by_line[2]["http_status"]), ("api-error", 400),
         "anthropic: errored: api-error with invalid_request_error's status")
    t.ok("FAIL" in (by_line[2]["error"] or ""), "anthropic: its message", by_line[2]["error"])
    eq(by_line[5]["error"], local_by_line[5]["error"], "anthropic: a bad line as locally")
    log = batch_log(srv, n0)
    cr = created(log)
    eq(len(cr), 1, "anthropic: one message batch")
    reqs = (cr[0]["body"] or {}).get("requests", []) if cr else []
    eq(len(reqs), 5, "anthropic: 5 requests")
    t.ok(all(r["custom_id"].startswith("tt-") and "max_tokens" in r["params"] and
             "stream" not in r["params"] for r in reqs),
         "anthropic: custom ids, params with max_tokens and without stream")
    t.ok(reqs and reqs[2]["params"].get("system") == "be brief",
         "anthropic: a system message goes in params.system (the Messages dialect)")
    t.ok(all(r["path"].split("/v1/")[-1].startswith("messages/batches") for r in log),
         "anthropic: only /v1/messages/batches")
    t.ok(all(r["headers"].get("x-api-key", "").startswith("<redacted") and
             r["headers"].get("anthropic-version") for r in log),
         "anthropic: x-api-key and anthropic-version on every request")

    # --- expired ---
    for api, kind in (("openai", "openai"), ("anthropic", "anthropic")):
        rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=2,bend=expired",
                           api=api)
        lines = parse(out)
        oc = [r["outcome"] for r in lines]
        eq(rc, 3, "%s expired: exit 3" % kind)
        eq(len(lines), 10, "%s expired: a line for each of the 10" % kind)
        eq(oc[:5], ["complete"] * 5, "%s expired: the first half ran" % kind, str(oc))
        t.ok(all(r["outcome"] == "api-error" and "expired" in r["error"] for r in lines[5:]),
             "%s expired: the rest say expired" % kind, str([r["error"] for r in lines[5:]]))

    # --- a batch that failed validation ---
    rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=2,bend=failed")
    lines = parse(out)
    eq(rc, 3, "failed: exit 3")
    t.ok(len(lines) == 10 and all("failed" in r["error"] for r in lines),
         "failed: every line says the batch failed", str(lines[:1]))

    rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=2,binvalid=3")
    lines = parse(out)
    eq(rc, 3, "a line refused by validation: exit 3")
    t.ok(len(lines) == 10 and "this request was refused" in lines[2]["error"] and
         "line 3 is not a valid batch request" in lines[2]["error"],
         "a line refused by validation: its own line says why", str(lines[2:3]))
    t.ok(all("failed" in r["error"] and "line 3 of the upload" in r["error"]
             for r in lines[:2] + lines[3:]),
         "a line refused by validation: the others say the batch failed, and for which line",
         str(lines[:1]))

    # --- a hostile output file: each request's line says what came of it, nothing else ---
    for api in ("openai", "anthropic"):
        rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=1,bjunk", api=api)
        lines = parse(out)
        eq(rc, 3, "%s junk output: exit 3" % api, err.decode())
        eq([r["id"] for r in lines], list(range(10)),
           "%s junk output: one line per request, in order, no extra" % api)
        t.ok(lines and lines[0]["outcome"] == "api-error" and
             "no result" in lines[0]["error"],
             "%s junk output: the cut line's request says it has no result" % api,
             str(lines[:1]))
        eq([r["outcome"] for r in lines[1:]], ["complete"] * 9,
           "%s junk output: the others are complete" % api)
        t.ok(b"Sanitizer" not in err and b"runtime error" not in err,
             "%s junk output: no sanitizer report" % api)

    # --- status, cancel, and a running job that sees the cancel ---
    for api in ("openai", "anthropic"):
        n0 = len(batch_log(srv))
        env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("bsteps=100000"),
                                     "ANTHROPIC_BASE_URL": srv.base("bsteps=100000"),
                                     "ANTHROPIC_API_KEY": AKEY})
        pre = ["--api", "anthropic", "-m", "claude-3-5-haiku-latest"] if api == "anthropic" \
            else ["-m", "gpt-4o-mini"]
        outp = os.path.join(d, "cancel-%s.jsonl" % api)
        p = subprocess.Popen([ttlib.tokterm_path()] + pre + ["batch", "--remote", "--out", outp]
                             + POLL + [TEN], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        bid = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not bid:
            cr = created(batch_log(srv, n0))
            bid = cr[0]["batch_created"] if cr else None
            time.sleep(0.05)
        time.sleep(0.3)
        rc, out, err = run(["batch", "--remote-status", bid or "none"], spec="bsteps=100000",
                           api=api)
        word = "in_progress"
        t.ok(rc == 0 and out.decode().startswith("%s: %s" % (bid, word)),
             "%s --remote-status: the id and its state" % api, out.decode() + err.decode())
        rc, out, err = run(["batch", "--remote-cancel", bid or "none"], spec="bsteps=100000",
                           api=api)
        t.ok(rc == 0 and ("cancelling" if api == "openai" else "canceling") in out.decode(),
             "%s --remote-cancel: cancelling" % api, out.decode() + err.decode())
        try:
            _, perr = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, perr = p.communicate()
        with open(outp, "rb") as f:
            lines = parse(f.read())
        eq(p.returncode, 3, "%s cancel: the running job ends, exit 3" % api, perr.decode())
        eq(len(lines), 10, "%s cancel: a line for each request" % api)
        t.ok(all(r["outcome"] in ("complete", "cancelled") for r in lines) and
             any(r["outcome"] == "cancelled" for r in lines),
             "%s cancel: the ones not run say cancelled" % api,
             str([r["outcome"] for r in lines]))
        t.ok(all("cancel" in r["error"] for r in lines if r["outcome"] == "cancelled"),
             "%s cancel: and why" % api)
    rc, out, err = run(["batch", "--remote-status", "batch_nonesuch"])
    eq(rc, 3, "--remote-status of an unknown id: exit 3")
    t.ok(b"404" in err and b"batch_nonesuch" in err, "--remote-status: the server's 404",
         err.decode())

    # --- resume after kill -9 mid-poll: the same batch, not a second one ---
    for api in ("openai", "anthropic"):
        rhome = ttlib.make_home()
        n0 = len(batch_log(srv))
        spec = "bsteps=60"
        env = ttlib.clean_env(rhome, {"OPENAI_BASE_URL": srv.base(spec),
                                      "ANTHROPIC_BASE_URL": srv.base(spec),
                                      "ANTHROPIC_API_KEY": AKEY})
        pre = ["--api", "anthropic", "-m", "claude-3-5-haiku-latest"] if api == "anthropic" \
            else ["-m", "gpt-4o-mini"]
        args = [ttlib.tokterm_path()] + pre + ["batch", "--remote"] + POLL + [TEN]
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            polls = [r for r in batch_log(srv, n0) if r.get("batch_status")]
            if len(polls) >= 5:
                break
            time.sleep(0.05)
        with open("/proc/%d/cmdline" % p.pid, "rb") as f:
            argv = f.read()
        t.ok(KEY.encode() not in argv and AKEY.encode() not in argv,
             "%s: the key is not in the argv" % api)
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        t.ok(len(polls) >= 5, "%s: killed -9 mid-poll (after %d polls)" % (api, len(polls)))
        eq(files_hold(rhome, KEY.encode()) + files_hold(rhome, AKEY.encode()), [],
             "%s: no file of the home (store, WAL) holds the key" % api)
        rc, out, err = ttlib.run_tokterm(pre + ["batch", "--remote"] + POLL + [TEN],
                                         env={"OPENAI_BASE_URL": srv.base(spec),
                                              "ANTHROPIC_BASE_URL": srv.base(spec),
                                              "ANTHROPIC_API_KEY": AKEY},
                                         home=rhome, timeout=60)
        lines = parse(out)
        log = batch_log(srv, n0)
        eq(rc, 0, "%s resume: exit 0" % api, err.decode())
        eq(len(created(log)), 1, "%s resume: no second batch created (the server's log)" % api)
        eq(len([r for r in log if r.get("upload")]), 0 if api == "anthropic" else 1,
             "%s resume: nothing uploaded again" % api)
        t.ok(b"picking up batch" in err, "%s resume: says it picks the batch up" % api,
             err.decode())
        eq([r["id"] for r in lines], list(range(10)), "%s resume: all 10, in order" % api)
        t.ok(all(r["outcome"] == "complete" for r in lines), "%s resume: all complete" % api)

    # --- Ctrl-C mid-poll: exit 130, the batch runs on, and how to pick it up ---
    n0 = len(batch_log(srv))
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("bsteps=100000")})
    p = subprocess.Popen([ttlib.tokterm_path(), "-m", "gpt-4o-mini", "batch", "--remote"] +
                         POLL + [TEN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and \
            len([r for r in batch_log(srv, n0) if r.get("batch_status")]) < 3:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    eq(p.returncode, 130, "SIGINT mid-poll: exit 130", err.decode())
    eq(out, b"", "SIGINT mid-poll: nothing written (the answers are not there yet)")
    t.ok(b"runs on at the provider" in err and b"run the same command again" in err,
         "SIGINT mid-poll: says the batch runs on and how to pick it up", err.decode())

    # --- a poll that fails now and then (503): waited out, not the end of the job ---
    for api in ("openai", "anthropic"):
        n0 = len(batch_log(srv))
        rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=4,bflaky=2",
                           api=api)
        flaky = [r for r in batch_log(srv, n0) if r.get("flaky")]
        eq(rc, 0, "%s flaky polls: exit 0" % api, err.decode())
        t.ok(len(flaky) >= 2, "%s flaky polls: the server failed %d polls" % (api, len(flaky)))
        eq([r["outcome"] for r in parse(out)], ["complete"] * 10,
           "%s flaky polls: every answer" % api)
        t.ok(b"503" in err and b"trying again" in err, "%s flaky polls: a warning" % api,
             err.decode())

    # --- states by time (bstep_ms): a status look does not move the batch ---
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=3,bstep_ms=100")
    polls = [r for r in batch_log(srv, n0) if r.get("batch_status")]
    eq(rc, 0, "by time: exit 0", err.decode())
    t.ok(len(polls) > 6, "by time: many polls for 6 states (%d)" % len(polls))

    # --- a key pool and no single key: the pool's first key (a batch belongs to its key) ---
    phome = ttlib.make_home()
    pkey = "sk-pool-first-0123456789abcdefghijklmnop"
    ttlib.write_config(phome, "[pool]\nbase_url = %s\nmodel = gpt-4o-mini\n"
                              "keys = env:TT_POOL_A, env:TT_POOL_B\n" % srv.base("bsteps=2"))
    n0 = len(batch_log(srv))
    rc, out, err = ttlib.run_tokterm(["-P", "pool", "batch", "--remote"] + POLL + [TEN],
                                     home=phome, env={"OPENAI_API_KEY": None,
                                                      "TT_POOL_A": pkey,
                                                      "TT_POOL_B": "sk-pool-second-zz"})
    log = batch_log(srv, n0)
    eq(rc, 0, "key pool: exit 0", err.decode())
    auth = set(r["headers"].get("authorization") for r in log)
    eq(auth, {"<redacted len=%d>" % len("Bearer " + pkey)},
       "key pool: every request carries the pool's first key")
    eq(files_hold(phome, pkey.encode()), [], "key pool: the key is in no file")

    # --- split at the provider's limits ---
    for api in ("openai", "anthropic"):
        n0 = len(batch_log(srv))
        rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=2,bmax=4", api=api,
                           env={"TOKTERM_REMOTE_MAX_REQUESTS": "4"})
        lines = parse(out)
        cr = created(batch_log(srv, n0))
        eq([r["batch_requests"] for r in cr], [4, 4, 2],
             "%s split: 10 prompts at 4 a batch are 3 batches" % api)
        eq(rc, 0, "%s split: exit 0" % api, err.decode())
        eq([r["id"] for r in lines], list(range(10)), "%s split: one output, in order" % api)
        eq([r["content"] for r in lines], ["prompt number %d" % i for i in range(10)],
             "%s split: each answer on its own line" % api)
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [TEN],
                       env={"TOKTERM_REMOTE_MAX_BYTES": "700"})
    ups = [r["upload"]["bytes"] for r in batch_log(srv, n0) if r.get("upload")]
    t.ok(len(ups) >= 3 and all(b <= 700 for b in ups),
         "bytes split: files of at most 700 bytes (%s)" % ups)
    eq([r["outcome"] for r in parse(out)], ["complete"] * 10, "bytes split: all complete")

    # --- the file is uploaded but the batch is refused: the upload is deleted ---
    n0 = len(batch_log(srv))
    rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="bsteps=2,bmax=4")
    log = batch_log(srv, n0)
    ups = [r["upload"]["file"] for r in log if r.get("upload")]
    eq(rc, 3, "batch refused after the upload: exit 3 (the provider refused; was 1)",
       err.decode())
    t.ok(b"at most 4 requests" in err, "batch refused: says why", err.decode())
    eq([r.get("file_deleted") for r in log if r.get("method") == "DELETE"], ups,
       "batch refused: the uploaded file is deleted", repr(log[-3:]))
    t.ok(b"left on the server" not in err, "batch refused: nothing is left to say",
         err.decode())

    # --- the upload fails: a clear message, nothing written ---
    rc, out, err = run(["batch", "--remote"] + POLL + [TEN], spec="status=500")
    eq(rc, 3, "upload refused (HTTP 500): exit 3")
    t.ok(b"HTTP 500" in err and b"/files" in err, "upload refused: says where and what",
         err.decode())
    eq(out, b"", "upload refused: nothing written")

    # --- a progress bar when stderr is a terminal ---
    rc, out, err = ttlib.run_tokterm_tty(["-m", "gpt-4o-mini", "batch", "--remote",
                                          "--remote-poll", "0.2", TEN], home=home,
                                         env={"OPENAI_BASE_URL": srv.base("bsteps=4")},
                                         ttys=(2,))
    eq(rc, 0, "tty: exit 0")
    t.ok(b"\r[" in err and b"ETA" in err and b"/10" in err and b"failed 0" in err,
         "tty: a progress bar with done/total, failed and ETA", err.decode(errors="replace"))
    eq(len(parse(out)), 10, "tty: the answers on stdout")

    eq(files_hold(home, KEY.encode()) + files_hold(home, AKEY.encode()), [],
         "no file of the home holds a key after all the runs")

t.done()
