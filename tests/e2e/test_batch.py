#!/usr/bin/env python3
"""End-to-end tests of `tokterm batch`: the real binary against the fake server. Prints TAP.

Input forms, per-line overrides, bad lines, the response cache (shared with the chat),
--resume, order of completion, requests really in flight together (the server's log times),
SIGINT (whole lines only, exit 130), and pacing under a server-side requests-per-minute limit.
The input is streamed: answers come while stdin is still open, 256 MB of stdin runs in a few
MiB, a line past 64 MiB gets an error line, a prompt past the context window is not sent.
The HTTP/2 multiplexing case (one connection for a batch at concurrency 16) is in
test_nginx.py."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import pty  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY
FIELDS = {"id", "line", "content", "reasoning", "model", "finish_reason", "outcome", "exit_code",
          "http_status", "error", "usage", "timings", "connection_reused", "http_version",
          "cached", "attempts", "retries"}


write_lines = ttlib.write_jsonl
parse = ttlib.parse_jsonl


def by_id(lines):
    return {json.dumps(r["id"]): r for r in lines if r}


def prompts_sent(srv, since=0):
    """The last user message of every chat request the server got after the first `since`."""
    out = []
    for r in srv.requests()[since:]:
        msgs = (r.get("body") or {}).get("messages") or []
        out.append(msgs[-1]["content"] if msgs else None)
    return out


def max_overlap(intervals):
    """Largest number of [start, end) intervals that hold one instant."""
    ev = sorted([(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals],
                key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best


ASAN = ttlib.built_with("asan")


def run_rss(args, feed, env, home, timeout=120):
    """Run tokterm with stdin written by feed(pipe) from a thread (or a file: feed is a path);
    returns (exit code, stdout, stderr, peak RSS in MiB) of exactly this child (wait4). Under
    ASan the quarantine of freed memory is cut to 16 MiB (by default it keeps 256 MiB of freed
    blocks resident, which is no leak of ours)."""
    dd = ttlib.tempdir("tt-rss-")
    e = ttlib.clean_env(home, env)
    if ASAN:
        e["ASAN_OPTIONS"] = (e.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16").lstrip(":")
    fin = open(feed, "rb") if isinstance(feed, str) else None
    with open(os.path.join(dd, "out"), "wb") as fo, open(os.path.join(dd, "err"), "wb") as fe:
        p = subprocess.Popen([ttlib.tokterm_path()] + [str(a) for a in args], env=e,
                             stdin=fin or subprocess.PIPE, stdout=fo, stderr=fe)
        th = None
        if not fin:
            def write():
                try:
                    feed(p.stdin)
                    p.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
            th = threading.Thread(target=write, daemon=True)
            th.start()
        status, ru = ttlib.wait_rusage(p, timeout)
        if th:
            th.join(5)
    if fin:
        fin.close()
    with open(os.path.join(dd, "out"), "rb") as f:
        out = f.read()
    with open(os.path.join(dd, "err"), "rb") as f:
        err = f.read()
    return os.waitstatus_to_exitcode(status), out, err, ru.ru_maxrss / 1024.0


d = ttlib.tempdir("tt-batch-")
home = ttlib.make_home()

with ttlib.FakeServer() as srv:
    def run(args, spec="", **kw):
        env = dict(kw.pop("env", {}) or {})
        env.setdefault("OPENAI_BASE_URL", srv.base(spec))
        kw.setdefault("home", home)
        return ttlib.run_tokterm(args, env=env, **kw)

    # --- usage ---
    rc, out, err = run(["batch"])
    t.eq(rc, 2, "no input file: exit 2")
    t.ok(b"give the input file" in err, "no input file: says what to give", err.decode())
    rc, out, err = run(["batch", "--help"])
    t.ok(rc == 0 and b"--concurrency" in out and b"--resume" in out, "batch --help")
    t.ok(b'"files": [PATH...]' in out, "batch --help names a line's \"files\" (the GUIDE's)",
         out.decode())
    rc, out, err = run(["batch", "x.jsonl", "--concurrency", "0"])
    t.ok(rc == 2 and b"--concurrency takes a number" in err, "--concurrency 0 refused",
         err.decode())
    rc, out, err = run(["batch", "x.jsonl", "-m", "gpt"])
    t.ok(rc == 2 and b"go before the word batch" in err, "a global option after batch: hint",
         err.decode())
    rc, out, err = run(["batch", os.path.join(d, "missing.jsonl")])
    t.ok(rc == 2 and b"cannot read" in err, "missing input: exit 2", err.decode())
    rc, out, err = run(["batch", "x.jsonl", "--resume"])
    t.ok(rc == 2 and b"--resume needs --out" in err, "--resume without --out: exit 2", err.decode())

    # --- both forms, per-line model, system prompts, every field ---
    inp = write_lines(os.path.join(d, "forms.jsonl"), [
        {"id": 1, "prompt": "alpha one"},
        {"id": "two", "messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "beta two"}]},
        "",
        {"id": 3.5, "prompt": "gamma three", "model": "other-model", "temperature": 0.5,
         "max_tokens": 77},
        {"id": 4, "prompt": "delta four", "system": "own system"},
    ])
    n0 = len(srv.requests())
    rc, out, err = run(["-s", "global system", "batch", inp, "--concurrency", "2"])
    lines = parse(out)
    t.eq(rc, 0, "forms: exit 0 (every item complete)")
    t.eq(len(lines), 4, "forms: one line per item (the blank line is skipped)")
    t.ok(all(r is not None and set(r) == FIELDS for r in lines), "forms: every line is JSON with "
         "the --json fields plus id, line, retries", out.decode())
    got = by_id(lines)
    t.eq({k: (v["content"], v["line"], v["outcome"], v["exit_code"]) for k, v in got.items()},
         {"1": ("alpha one", 1, "complete", 0), '"two"': ("beta two", 2, "complete", 0),
          "3.5": ("gamma three", 4, "complete", 0), "4": ("delta four", 5, "complete", 0)},
         "forms: contents echoed, ids kept as given (number, string), input line numbers")
    t.eq(got["3.5"]["model"], "other-model", "per-line model in the answer")
    t.ok(all(v["usage"] and v["usage"]["completion_tokens"] > 0 and v["timings"]["total_s"] > 0
             and v["http_status"] == 200 and v["error"] is None and v["cached"] is False
             for v in got.values()), "usage, timings, status, error null, cached false")
    bodies = {r["body"]["messages"][-1]["content"]: r["body"] for r in srv.requests()[n0:]}
    t.eq(len(bodies), 4, "forms: four requests reached the server")
    t.eq(bodies["gamma three"]["model"], "other-model", "server got the per-line model")
    t.eq((bodies["gamma three"].get("temperature"), bodies["gamma three"].get("max_tokens")),
         (0.5, 77), "server got the per-line temperature and max_tokens")
    t.eq(bodies["alpha one"]["model"], "gpt-4o-mini", "default model otherwise")
    t.eq(bodies["alpha one"]["messages"][0], {"role": "system", "content": "global system"},
         "prompt form: -s system prompt sent")
    t.eq(bodies["delta four"]["messages"][0], {"role": "system", "content": "own system"},
         "prompt form: the line's own system wins")
    t.eq(bodies["beta two"]["messages"], [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": "beta two"}],
         "messages form: sent as given (no -s added)")
    t.ok(all(b.get("stream") is True for b in bodies.values()), "requests are streamed")
    t.ok(b"4 items: 4 complete, 0 failed" in err, "one-line summary on stderr (not a terminal)",
         err.decode())
    t.ok(b"\r" not in err and b"\033" not in err, "no progress bar when stderr is not a terminal")

    # --- the cache: a second run asks the server nothing ---
    n0 = len(srv.requests())
    rc, out2, err = run(["-s", "global system", "batch", inp])
    lines2 = parse(out2)
    t.eq(len(srv.requests()), n0, "second run: no request reached the server")
    t.ok(rc == 0 and len(lines2) == 4 and all(r["cached"] for r in lines2),
         "second run: four cached answers, exit 0", out2.decode())
    t.eq({k: v["content"] for k, v in by_id(lines2).items()},
         {k: v["content"] for k, v in got.items()}, "cached answers equal the first ones")
    t.ok(b"4 from the cache" in err, "summary counts cache hits", err.decode())
    rc, out3, err = run(["--no-cache", "batch", inp])
    t.eq(len(srv.requests()), n0 + 4, "--no-cache: asks the server again")
    rc, out3, err = run(["--incognito", "batch", inp])
    t.eq(len(srv.requests()), n0 + 8, "--incognito: no cache")
    # chat and batch share cache entries
    rc, out, err = run(["-p", "shared between chat and batch"])
    t.eq(rc, 0, "a chat answer (fills the cache)")
    n0 = len(srv.requests())
    shared = write_lines(os.path.join(d, "shared.jsonl"),
                         [{"id": "s", "prompt": "shared between chat and batch"},
                          {"id": "miss", "prompt": "never asked before"}])
    rc, out, err = run(["batch", shared])
    got = by_id(parse(out))
    t.ok(got['"s"']["cached"] and got['"s"']["content"] == "shared between chat and batch",
         "batch answers from the chat's cache entry")
    t.eq(prompts_sent(srv, n0), ["never asked before"], "only the new prompt was sent")
    rc, out, err = run(["--cache-only", "batch", write_lines(os.path.join(d, "co.jsonl"), [
        {"id": 1, "prompt": "shared between chat and batch"}, {"id": 2, "prompt": "not cached"}])])
    got = by_id(parse(out))
    t.eq((got["1"]["outcome"], got["2"]["outcome"], got["2"]["exit_code"], rc),
         ("complete", "cache-miss", 7, 3), "--cache-only: hit, miss (exit_code 7), exit 3")

    # --- bad lines: an error line each, the run goes on ---
    bad = write_lines(os.path.join(d, "bad.jsonl"), [
        {"id": 1, "prompt": "good one"},
        "this is not json",
        {"prompt": "no id"},
        {"id": 1, "prompt": "duplicate"},
        {"id": 5, "prompt": "p", "messages": [{"role": "user", "content": "m"}]},
        {"id": 6, "prompt": "p", "temperature": 9},
        {"id": 7, "messages": [{"role": "wizard", "content": "m"}]},
        {"id": 8},
        "[1, 2]",
        {"id": {"nested": 1}, "prompt": "p"},
        {"id": 11, "prompt": "fine too", "colour": "blue"},
    ])
    n0 = len(srv.requests())
    rc, out, err = run(["batch", bad])
    lines = parse(out)
    t.eq(rc, 3, "bad lines: exit 3 (some items failed)")
    t.eq(len(lines), 11, "bad lines: one output line per input line")
    byline = {r["line"]: r for r in lines}
    t.eq(sorted(r["line"] for r in lines if r["outcome"] == "complete"), [1, 11],
         "the good lines were answered")
    errs = {ln: (r["outcome"], r["exit_code"]) for ln, r in byline.items()
            if r["outcome"] != "complete"}
    t.eq(errs, {ln: ("usage-error", 2) for ln in range(2, 11)},
         "every bad line: outcome usage-error, exit_code 2")
    why = {ln: byline[ln]["error"] for ln in range(2, 11)}
    checks = {2: "not valid JSON", 3: "no \"id\"", 4: "duplicate id: line 1", 5: "not both",
              6: "temperature", 7: "role", 8: "no \"prompt\"", 9: "not a JSON object",
              10: "must be a string or a number"}
    t.ok(all(why[k].startswith("line %d: " % k) and v in why[k] for k, v in checks.items()),
         "each error names its line and the reason", json.dumps(why, indent=1))
    t.eq((byline[4]["id"], byline[3]["id"]), (1, None), "error lines keep the id (null when none)")
    t.ok(all(byline[ln]["usage"] is None and byline[ln]["timings"] is None for ln in range(2, 11)),
         "error lines: usage and timings null")
    t.eq(sorted(prompts_sent(srv, n0)), ["fine too", "good one"], "only good lines were sent")
    t.ok(b'unknown field "colour"' in err, "unknown field: one warning", err.decode())
    t.ok(b"2 complete, 9 failed" in err, "summary counts failures", err.decode())

    # --- a failing request: its line says why, the others complete ---
    srv.queue(["status=400,error=bad%20request%20here"])
    rc, out, err = run(["batch", "--concurrency", "1", write_lines(
        os.path.join(d, "fail.jsonl"),
        [{"id": "f", "prompt": "first"}, {"id": "g", "prompt": "x"}])])
    got = by_id(parse(out))
    t.eq((got['"f"']["outcome"], got['"f"']["exit_code"], got['"f"']["http_status"], rc),
         ("api-error", 3, 400, 3), "HTTP 400: api-error line, exit 3")
    t.ok("bad request here" in (got['"f"']["error"] or ""), "the server's message is in error")
    t.eq(got['"g"']["outcome"], "complete", "the next item still completes")
    t.ok(KEY.encode() not in out + err, "key never printed")

    # --- malformed files ---
    arr = os.path.join(d, "array.json")
    with open(arr, "w") as f:
        json.dump([{"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}], f, indent=2)
    rc, out, err = run(["batch", arr])
    t.ok(rc == 2 and out == b"" and b"JSON array" in err and b"jq -c" in err,
         "a JSON array: exit 2, says how to convert", err.decode())
    pretty = os.path.join(d, "pretty.jsonl")
    with open(pretty, "w") as f:
        json.dump({"id": 1, "prompt": "a"}, f, indent=2)
    rc, out, err = run(["batch", pretty])
    t.ok(rc == 2 and out == b"" and b"not JSON lines" in err, "a pretty-printed object: exit 2",
         err.decode())
    with open(os.path.join(d, "bin.jsonl"), "wb") as f:
        f.write(b"\x00\x01\x02binary\x00\n\xff\xfe")
    rc, out, err = run(["batch", os.path.join(d, "bin.jsonl")])
    t.ok(rc == 2 and b"not JSON lines" in err, "a binary file: exit 2", err.decode())
    # two 429s that said when: the summary's retries say they followed a 429 (waits the
    # server asked for, not paid from max_retries; until 2026-12 they read as 2 plain retries)
    srv.queue(["status=429,h.retry-after-ms=100"] * 2)
    rc, out, err = run(["--incognito", "--retries", "0", "batch", "-"],
                       stdin=b'{"id": 1, "prompt": "after two 429s"}\n')
    srv.clear_queue()
    lines = parse(out)
    t.ok(rc == 0 and len(lines) == 1 and lines[0]["outcome"] == "complete" and
         b"2 retries (2 after a 429)" in err, "429s waited out: complete, the summary says so",
         err.decode())
    # "max_tokens": 0 is "not sent", as in the configuration (until 2026-12: refused)
    rc, out, err = run(["--incognito", "batch", "-"],
                       stdin=b'{"id": 1, "prompt": "zero max", "max_tokens": 0}\n')
    lines = parse(out)
    t.ok(rc == 0 and len(lines) == 1 and lines[0]["outcome"] == "complete" and
         "max_tokens" not in srv.requests()[-1]["body"],
         "a line's max_tokens 0: not sent, the line completes", out.decode() + err.decode())
    # a message's content as OpenAI's list of text parts: joined (until 2026-12 refused);
    # an image part fails its line, saying what to do
    rc, out, err = run(["--incognito", "batch", "-"], stdin=(
        b'{"id": 1, "messages": [{"role": "user", "content": [{"type": "text", "text": "part '
        b'one"}, {"type": "text", "text": "part two"}]}]}\n'
        b'{"id": 2, "messages": [{"role": "user", "content": [{"type": "image_url", '
        b'"image_url": {"url": "https://x/y.png"}}]}]}\n'))
    got = by_id(parse(out))
    t.ok(got.get("1", {}).get("content") == "part one\npart two" and
         got.get("2", {}).get("outcome") == "usage-error" and
         '"files"' in (got.get("2", {}).get("error") or ""),
         "messages with text parts: joined; an image part: that line fails, saying why",
         out.decode())
    # off a terminal a long pacing wait is said as it begins (until 2026-12 a CI log went
    # quiet for its length); rpm = 10: the second line waits 6 s
    whome = ttlib.make_home()
    ttlib.write_config(whome, "rpm = 10\n")
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-"], home=whome,
                                     env={"OPENAI_BASE_URL": srv.base()},
                                     stdin=b'{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "b"}\n')
    t.ok(rc == 0 and len(parse(out)) == 2 and
         re.search(rb"tokterm batch: waiting for quota [56]s", err) is not None,
         "off a terminal: the pacing wait is said", err.decode())
    # an array on stdin: the hint reads stdin too (until 2026-12: jq -c '.[]' stdin, a file)
    rc, out, err = run(["batch", "-"], stdin=b'[{"id": 1, "prompt": "a"}]\n')
    t.ok(rc == 2 and b"tokterm batch: stdin holds a JSON array" in err and
         b"jq -c '.[]' > IN.jsonl" in err, "a JSON array on stdin: the hint pipes it", err.decode())
    # a refused run leaves --out's last results alone (until 2026-12 it emptied the file first)
    kept = os.path.join(d, "kept.jsonl")
    for why, args in (("not JSON lines", ["batch", pretty, "-o", kept]),
                      ("a metrics port in use", ["batch", write_lines(
                          os.path.join(d, "m1.jsonl"), ['{"id":1,"prompt":"a"}']), "-o", kept,
                          "--metrics-listen", "127.0.0.1:%d" % srv.port])):
        with open(kept, "w") as f:
            f.write('{"id":1,"outcome":"complete","content":"precious"}\n')
        rc, out, err = run(args)
        with open(kept) as f:
            left = f.read()
        t.ok(rc == 2 and "precious" in left, "refused (%s): --out is left as it was" % why,
             err.decode())
    rc, out, err = run(["batch", write_lines(os.path.join(d, "empty.jsonl"), ["", "  "])])
    t.ok(rc == 0 and out == b"", "blank lines only: nothing to do, exit 0", err.decode())
    # stdin, CRLF and a byte-order mark
    rc, out, err = run(["batch", "-"], stdin=b'\xef\xbb\xbf{"id":1,"prompt":"from stdin"}\r\n')
    lines = parse(out)
    t.ok(rc == 0 and len(lines) == 1 and lines[0]["content"] == "from stdin",
         "input from stdin (-), with a BOM and CRLF", out.decode() + err.decode())
    rc, out, err = run(["batch", inp, "--out", inp])
    t.ok(rc == 2 and b"is the input file" in err, "--out = the input: refused", err.decode())

    # --- order of completion ---
    # The network thread sends one request alone until an answer shows the server's limits
    # (slow start), then the rest together; the 2nd request to arrive waits 700 ms, so its
    # line must come last whatever its place in the input.
    n0 = len(srv.requests())
    srv.queue(["", "header_delay_ms=700"])
    ids = ["a", "b", "c", "d", "e"]
    rc, out, err = run(["--incognito", "batch", "-j", "4", write_lines(
        os.path.join(d, "order.jsonl"), [{"id": i, "prompt": i} for i in ids])])
    reqs = srv.requests()[n0:]
    slow = [r["body"]["messages"][-1]["content"] for r in reqs
            if r.get("queued") and r["spec"].get("header_delay_ms")]
    got = [r["id"] for r in parse(out)]
    t.ok(len(slow) == 1 and got[-1] == slow[0] and sorted(got) == ids,
         "lines come in order of completion, not input order (slow: %s, got %s)"
         % (slow, got))

    # --- requests in flight together ---
    many = write_lines(os.path.join(d, "many.jsonl"),
                       [{"id": i, "prompt": "overlap %d" % i} for i in range(8)])
    for conc, want in ((4, 4), (1, 1)):
        n0 = len(srv.requests())
        t0 = time.monotonic()
        rc, out, err = run(["--incognito", "batch", "-j", str(conc), many],
                           spec="header_delay_ms=400")
        wall = time.monotonic() - t0
        reqs = srv.requests()[n0:]
        t.ok(rc == 0 and len(parse(out)) == 8 and len(reqs) == 8, "-j %d: 8 answers" % conc)
        got = max_overlap([(r["t"], r["t"] + 0.4) for r in reqs])
        t.eq(got, want, "-j %d: at most and at least %d requests in flight (server log times)"
             % (conc, want))
        if conc == 4:
            t.ok(wall < 8 * 0.4 * 0.6, "-j 4: 8 x 400 ms took %.2f s, not 3.2 s" % wall)
            first = sorted(r["t"] for r in reqs)
            t.ok(first[4] - first[1] < 0.2, "-j 4: after the first answer, 4 requests reach "
                 "the server together (the 4th %.2f s after the 1st)" % (first[4] - first[1]))

    # --- more requests at once than the soft limit on open files: it is raised toward what
    # they need (or the concurrency lowered to fit the hard limit, and said); until 2026-12
    # the sockets past it failed with EMFILE as "Couldn't connect to server - is the server
    # running?", retried or lost, and then opened the circuit breaker ---
    wide = write_lines(os.path.join(d, "wide.jsonl"),
                       [{"id": i, "prompt": "wide %d" % i} for i in range(300)])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for lim, name in (((128, hard), "soft limit 128"), ((128, 128), "soft and hard limit 128")):
        e = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("header_delay_ms=300")})
        p = subprocess.run([ttlib.tokterm_path(), "--incognito", "batch", "-j", "200", wide],
                           env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120,
                           preexec_fn=lambda lim=lim: resource.setrlimit(
                               resource.RLIMIT_NOFILE, lim))
        lines = parse(p.stdout)
        t.ok(p.returncode == 0 and len(lines) == 300 and
             all(r["outcome"] == "complete" and r["retries"] == 0 for r in lines),
             "-j 200 under a %s: 300 answers, none retried" % name,
             "rc %d, %d lines, %d retried: %s" % (p.returncode, len(lines),
                                                  sum(r.get("retries", 0) > 0 for r in lines),
                                                  p.stderr.decode()[-600:]))
        if lim[1] == 128:
            t.ok(b"running 64 at once" in p.stderr and b"ulimit -n" in p.stderr,
                 "the hard limit too low: the concurrency lowered, and said", p.stderr.decode())

    # --- 200 requests at -j 8: the connections are reused, every answer is cached in the
    # order its line was written (the answers that end together are cached in one write) ---
    h2 = ttlib.make_home()
    reuse = write_lines(os.path.join(d, "reuse.jsonl"),
                        [{"id": i, "prompt": "reuse %d" % i} for i in range(200)])
    n0 = len(srv.requests())
    rc, out, err = run(["batch", "-j", "8", reuse], home=h2)
    reqs = srv.requests()[n0:]
    lines = parse(out)
    t.ok(rc == 0 and len(lines) == 200 and len(reqs) == 200 and
         all(r and r["outcome"] == "complete" for r in lines), "-j 8: 200 answers", err.decode())
    conns = {r["conn"] for r in reqs}
    t.ok(len(conns) <= 8 + 2, "-j 8: 200 requests over %d connections (at most 8, + 2)"
         % len(conns))
    import sqlite3  # noqa: E402
    db = sqlite3.connect(os.path.join(h2, ".local", "share", "tokterm", "tokterm.db"))
    cached = [row[0] for row in db.execute("SELECT content FROM response_cache ORDER BY id")]
    db.close()
    t.ok(cached == [r["content"] for r in lines if r],
         "every answer cached, in the order the lines were written (%d rows)" % len(cached))
    rc, out, err = run(["--cache-only", "batch", "-j", "8", reuse], home=h2)
    t.ok(rc == 0 and len(parse(out)) == 200 and all(r["cached"] for r in parse(out)) and
         len(srv.requests()) == n0 + 200, "--cache-only: the 200 answers from the cache",
         err.decode())
    # The run learnt that this server sends no rate-limit header (saved with the quota state):
    # the next one sends its first 4 requests together instead of one alone until it answers
    # (the slow start that learns the limits of an unknown server; --incognito keeps it).
    n0 = len(srv.requests())
    again = write_lines(os.path.join(d, "again.jsonl"),
                        [{"id": i, "prompt": "again %d" % i} for i in range(4)])
    rc, out, err = run(["batch", "-j", "4", again], spec="header_delay_ms=1000", home=h2)
    first = sorted(r["t"] for r in srv.requests()[n0:])
    t.ok(rc == 0 and len(first) == 4 and first[3] < first[0] + 1.0,
         "a server known to send no limits: 4 requests leave before the first answer "
         "(arrivals %s s after the first)" % [round(x - first[0], 2) for x in first],
         err.decode())

    # --- the progress bar when stderr is a terminal ---
    master, slave = pty.openpty()
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("header_delay_ms=150")})
    p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "batch", "-j", "2", many],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                         start_new_session=True)
    os.close(slave)
    screen = b""
    while True:
        r, _, _ = select.select([master], [], [], 10)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    out = p.stdout.read()
    p.wait()
    os.close(master)
    t.ok(p.returncode == 0 and len(parse(out)) == 8, "progress run: 8 answers on stdout")
    t.ok(b"\r[" in screen and b"/8" in screen and b"failed 0" in screen and b"ETA" in screen
         and b"/s" in screen, "stderr is a terminal: a progress bar with done/failed/rate/ETA",
         screen.decode(errors="replace"))
    t.ok(b"8 items: 8 complete" in screen, "and the summary line at the end")
    t.ok(b"{" not in screen, "answers never on the terminal's stderr")

    # --- the reader goes away: stop, exit 141 like a pipe writer killed by SIGPIPE ---
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("header_delay_ms=100")})
    p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "batch", "-j", "2", many],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    first_line = p.stdout.readline()
    p.stdout.close()
    try:
        err = p.stderr.read()
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    t.ok(json.loads(first_line)["outcome"] == "complete" and p.returncode == 141,
         "stdout closed after one line: exit 141 (got %s)" % p.returncode, err.decode())

    # --- --resume ---
    items = [{"id": "r%d" % i, "prompt": "resume %d" % i} for i in range(6)]
    full = write_lines(os.path.join(d, "resume.jsonl"), items)
    part = write_lines(os.path.join(d, "resume3.jsonl"), items[:3])
    outf = os.path.join(d, "resume.out")
    rc, out, err = run(["--incognito", "batch", part, "--out", outf])
    t.ok(rc == 0 and out == b"", "--out: nothing on stdout")
    with open(outf, "a") as f:  # a failed line for r3, and r4's line cut in half by a crash
        f.write(json.dumps({"id": "r3", "outcome": "network-error", "error": "boom"}) + "\n")
        f.write('{"id":"r4","content":"half')
    n0 = len(srv.requests())
    rc, out, err = run(["--incognito", "batch", full, "--out", outf, "--resume"])
    t.eq(rc, 0, "--resume: exit 0")
    t.eq(sorted(prompts_sent(srv, n0)), ["resume 3", "resume 4", "resume 5"],
         "--resume: only the ids not complete in OUT were sent")
    with open(outf, "rb") as f:
        data = f.read()
    lines = parse(data)
    t.ok(data.endswith(b"\n") and None not in lines, "--resume: OUT is whole JSON lines")
    t.eq(sorted(r["id"] for r in lines), ["r%d" % i for i in range(6)],
         "--resume: one line per id (the failed and the half line were dropped)")
    t.ok(all(r["outcome"] == "complete" for r in lines), "--resume: all complete")
    t.ok(b"3 skipped" in err, "summary counts skipped ids", err.decode())
    n0 = len(srv.requests())
    rc, out, err = run(["--incognito", "batch", full, "--out", outf, "--resume"])
    t.ok(rc == 0 and len(srv.requests()) == n0, "--resume when all are done: nothing sent")

    # --- SIGINT: finished lines whole, the rest cancelled, exit 130; then --resume ---
    big = write_lines(os.path.join(d, "sigint.jsonl"),
                      [{"id": i, "prompt": "sig %d" % i} for i in range(12)])
    big_spec = "gen=20000,chunk=whole,header_delay_ms=300"  # answers of 130 kB, 300 ms each
    env = ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base(big_spec)})
    p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "batch", "-j", "3", big], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    time.sleep(1.0)
    t_sig = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    took = time.monotonic() - t_sig
    lines = parse(out)
    t.eq(p.returncode, 130, "SIGINT: exit 130")
    t.ok(took < 3, "SIGINT: stops at once (%.2f s)" % took)
    t.ok(out.endswith(b"\n") and None not in lines, "SIGINT: only whole JSON lines on stdout "
         "(%d bytes)" % len(out))
    t.ok(0 < len(lines) < 12, "SIGINT: some finished lines written, not all (%d)" % len(lines))
    t.ok(all(r["outcome"] == "complete" and len(r["content"]) > 100000 for r in lines),
         "SIGINT: every written line is a complete answer (cancelled ones are not written)")
    t.ok(b"interrupted" in err, "SIGINT: the summary says interrupted", err.decode())
    # the same with --out, then --resume completes the rest
    outf = os.path.join(d, "sigint.out")
    p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "batch", "-j", "3", big,
                          "--out", outf], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    with open(outf, "rb") as f:
        data = f.read()
    first = parse(data)
    t.ok(p.returncode == 130 and data.endswith(b"\n") and None not in first and
         0 < len(first) < 12, "SIGINT with --out: exit 130, whole lines (%d)" % len(first))
    t.ok(b"--resume" in err, "SIGINT with --out: says how to finish", err.decode())
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-j", "3", big, "--out", outf,
                                      "--resume"], env={"OPENAI_BASE_URL": srv.base(big_spec)},
                                     home=home, timeout=60)
    with open(outf, "rb") as f:
        final = parse(f.read())
    t.eq(rc, 0, "after SIGINT, --resume: exit 0")
    t.eq(sorted(r["id"] for r in final), list(range(12)), "after --resume: every id once")
    t.eq(len(srv.requests()) - n0, 12 - len(first), "--resume sent only the unfinished ones")

    # --- the input is streamed ---
    # Answers come while stdin is still open: the first line is answered before the second
    # is written (the old reader waited for the end of the input).
    p = subprocess.Popen([ttlib.tokterm_path(), "--incognito", "batch", "-"],
                         env=ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base("")}),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    p.stdin.write(b'{"id": "s1", "prompt": "streamed one"}\n')
    p.stdin.flush()
    r, _, _ = select.select([p.stdout], [], [], 10)
    first = p.stdout.readline() if r else b""
    try:
        rest, err = p.communicate(b'{"id": "s2", "prompt": "streamed two"}\n', timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rest, err = p.communicate()
    got = [json.loads(x) for x in (first + rest).decode().splitlines()]
    t.ok(first and json.loads(first)["id"] == "s1" and json.loads(first)["outcome"] == "complete",
         "stdin still open: the first line is answered before the second is written (%r)"
         % first[:80], err.decode())
    t.ok(p.returncode == 0 and [x["id"] for x in got] == ["s1", "s2"],
         "then the second one, exit 0 (%s)" % p.returncode)

    # A bad line before the first object waits for it, then gets its error line.
    rc, out, err = run(["--incognito", "batch", "-"],
                       stdin=b'not json\n{"id": 1, "prompt": "after a bad line"}\n')
    got = {r["line"]: r for r in parse(out)}
    t.ok(rc == 3 and got.get(1, {}).get("outcome") == "usage-error"
         and got.get(2, {}).get("outcome") == "complete",
         "a bad first line: its error line, then the object is answered (exit 3)", err.decode())

    # 256 MB on stdin (2,560 lines of 100 kB) in a few MiB: --cache-only answers each line
    # at once (a miss) without the network. The whole input used to be read first (300 MB:
    # 528 MiB).
    words = ("lorem ipsum dolor sit amet " * 4000)[:100000]

    def feed_big(pipe):
        for i in range(2560):
            pipe.write(b'{"id": %d, "prompt": "%s"}\n' % (i, words.encode()))

    t0 = time.monotonic()
    rc, out, err, rss = run_rss(["--cache-only", "batch", "-"], feed_big,
                                {"OPENAI_BASE_URL": srv.base("")}, home)
    lines = parse(out)
    t.ok(rc == 3 and len(lines) == 2560 and all(r and r["outcome"] == "cache-miss" for r in lines),
         "256 MB of stdin: 2,560 lines answered (cache misses) in %.1f s" % (time.monotonic() - t0),
         err.decode()[-500:])
    t.ok(rss < 64, "256 MB of stdin: peak RSS %.0f MiB < 64 (streamed, not read whole)" % rss)

    # A 100 MB line: skipped unread past 64 MiB, an error line, the others go on.
    big_path = os.path.join(d, "bigline.jsonl")
    with open(big_path, "wb") as f:
        f.write(b'{"id": "a", "prompt": "before the big line"}\n')
        f.write(b'{"id": "big", "prompt": "')
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
        f.write(b'"}\n')
        f.write(b'{"id": "b", "prompt": "after the big line"}\n')
    n0 = len(srv.requests())
    rc, out, err, rss = run_rss(["--incognito", "batch", big_path], big_path,
                                {"OPENAI_BASE_URL": srv.base("")}, home)
    got = {r["line"]: r for r in parse(out) if r}
    t.ok(rc == 3 and got.get(1, {}).get("outcome") == "complete"
         and got.get(3, {}).get("outcome") == "complete"
         and got.get(2, {}).get("outcome") == "usage-error"
         and "longer than the limit of 64 MiB" in (got.get(2, {}).get("error") or ""),
         "a 100 MB line: its error line says the 64 MiB limit; the lines around it complete",
         out.decode()[:600] + err.decode())
    t.eq(sorted(prompts_sent(srv, n0)), ["after the big line", "before the big line"],
         "the 100 MB line was not sent")
    t.ok(rss < 200, "a 100 MB line: peak RSS %.0f MiB < 200" % rss)
    os.unlink(big_path)

    # A prompt past the model's context window (gpt-4o-mini: 128,000) is not sent: ~1M
    # tokens in 4 MB. It used to go to the server as it was.
    huge = os.path.join(d, "huge.jsonl")
    with open(huge, "w") as f:
        f.write(json.dumps({"id": "h", "prompt": "word " * 800000}) + "\n")
        f.write(json.dumps({"id": "ok", "prompt": "small enough"}) + "\n")
        f.write(json.dumps({"id": "cut", "prompt": "word " * 200, "max_tokens": 127900}) + "\n")
    n0 = len(srv.requests())
    rc, out, err = run(["--incognito", "batch", huge])
    got = by_id(parse(out))
    h = got.get('"h"', {})
    t.ok(rc == 3 and h.get("outcome") == "usage-error" and h.get("exit_code") == 2
         and "prompt too long for the context window (800008 tokens > 123904)"
         in (h.get("error") or ""), "a 1M-token prompt: \"prompt too long for the context "
         "window (N tokens > M)\"", h.get("error") or out.decode()[:300])
    c = got.get('"cut"', {})
    t.ok(c.get("outcome") == "usage-error" and "> 100)" in (c.get("error") or ""),
         "the line's max_tokens is the answer reserve (%s)" % c.get("error"))
    t.eq(prompts_sent(srv, n0), ["small enough"], "only the prompt that fits was sent")
    cfg = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfg, exist_ok=True)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write("context_policy = off\n")
    os.chmod(os.path.join(cfg, "config"), 0o600)
    n0 = len(srv.requests())
    rc, out, err = run(["--incognito", "batch", write_lines(os.path.join(d, "off.jsonl"), [
        {"id": "cut", "prompt": "word " * 200, "max_tokens": 127900}])])
    os.unlink(os.path.join(cfg, "config"))
    t.ok(rc == 0 and len(srv.requests()) - n0 == 1, "context_policy = off: no check, sent as is "
         "(as the chat)", err.decode())

# --- pacing: a server that allows 600 requests a minute (10 at once) must see no 429 ---
with ttlib.FakeServer() as srv:
    paced = write_lines(os.path.join(d, "paced.jsonl"),
                        [{"id": i, "prompt": "paced %d" % i} for i in range(40)])
    t0 = time.monotonic()
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-j", "8", paced],
                                     env={"OPENAI_BASE_URL": srv.base("rpm=600,burst=10")},
                                     timeout=60)
    wall = time.monotonic() - t0
    lines = parse(out)
    limited = [r for r in srv.requests() if r.get("rate_limited")]
    t.ok(rc == 0 and len(lines) == 40 and all(r["outcome"] == "complete" for r in lines),
         "rpm=600,burst=10: 40 items complete (%.1f s, %d retries)"
         % (wall, sum(r["retries"] for r in lines)), err.decode())
    t.ok(wall >= 2.5, "rpm=600,burst=10: 40 requests need 3 s at 10/s (took %.1f s)" % wall)
    # Requests sent together over several connections reach the server in any order, so the
    # answers' remaining counts are stale in a crowd: net.c merges them (the lower count, the
    # later reset) and a send after a reset starts the refill clock. Zero is the target.
    t.ok(len(limited) == 0, "rpm=600,burst=10: no request got a 429 (got %d)" % len(limited))
    # A profile's rpm is paced a second's worth at a time: rpm = 120 is 2 a second, not 120 at
    # once (until 2026-12: 10 lines at -j 8 left in 0.02 s, a server enforcing 2 a second
    # refused most of them)
    home = ttlib.make_home()
    os.makedirs(os.path.join(home, ".config", "tokterm"))
    with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
        f.write("rpm = 120\n")
    ten = write_lines(os.path.join(d, "rpm120.jsonl"),
                      [{"id": i, "prompt": "rpm %d" % i} for i in range(10)])
    n0 = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-j", "8", ten], home=home,
                                     env={"OPENAI_BASE_URL": srv.base()}, timeout=60)
    ts = [r["t"] for r in srv.requests()[n0:]]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    t.ok(rc == 0 and len(ts) == 10 and ts[-1] - ts[0] >= 3.8 and min(gaps[1:]) >= 0.35,
         "rpm = 120: a second's worth (2) at once, then 0.5 s apart (first to last %.2f s, "
         "smallest later gap %.2f s)" % (ts[-1] - ts[0] if ts else 0,
                                          min(gaps[1:]) if len(gaps) > 1 else 0), err.decode())
    # The same at -j 32, more requests than the burst many times over, a different bucket.
    many = write_lines(os.path.join(d, "paced100.jsonl"),
                       [{"id": i, "prompt": "paced %d" % i} for i in range(60)])
    before = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-j", "32", many],
                                     env={"OPENAI_BASE_URL": srv.base("rpm=1200,burst=5")},
                                     timeout=60)
    reqs = srv.requests()[before:]
    limited = [r for r in reqs if r.get("rate_limited")]
    lines = parse(out)
    t.ok(rc == 0 and len(lines) == 60 and len(reqs) == 60,
         "rpm=1200,burst=5 at -j 32: 60 items, 60 requests", err.decode())
    t.ok(len(limited) == 0, "rpm=1200,burst=5 at -j 32: no request got a 429 (got %d)"
         % len(limited))
    # Answers slower than the refill (150 ms before the headers, a burst refilled every 50 ms):
    # the reports of a burst are not back when the last report's reset comes, so each send
    # must move the reset on itself (a loaded machine shows the same; CI under ASan did). A
    # bucket of its own: a new process cannot know that the last one emptied a shared one.
    before = len(srv.requests())
    rc, out, err = ttlib.run_tokterm(["--incognito", "batch", "-j", "32", many],
                                     env={"OPENAI_BASE_URL":
                                          srv.base("rpm=1200,burst=6,header_delay_ms=150")},
                                     timeout=60)
    reqs = srv.requests()[before:]
    limited = [r for r in reqs if r.get("rate_limited")]
    lines = parse(out)
    # what the items that did not complete say (it failed once under load, session 26, with
    # 12 of 60 items failed and no 429, and only stderr's summary kept)
    bad = [{k: r.get(k) for k in ("id", "outcome", "error", "retries")} for r in lines
           if r.get("outcome") != "complete"]
    t.ok(rc == 0 and len(lines) == 60 and len(reqs) == 60,
         "slow headers, rpm=1200,burst=6 at -j 32: 60 items, 60 requests",
         "rc %d, %d lines, %d requests; not complete: %s\n%s"
         % (rc, len(lines), len(reqs), json.dumps(bad)[:4000], err.decode()[-4000:]))
    t.ok(len(limited) == 0, "slow headers: no request got a 429 (got %d)" % len(limited))

sys.exit(t.done())
