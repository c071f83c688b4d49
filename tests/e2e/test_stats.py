#!/usr/bin/env python3
"""End-to-end tests of `tokterm stats` (issue 18): what a real exchange saves (retries, 429s,
the inter-token gap) and honest percentiles (tokens/s only over answers long enough). TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
import http.server  # noqa: E402
import threading  # noqa: E402

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
    # --model as it is typed (any case), and the model's dated snapshots (the row keeps the
    # model that answered); search alike; --since after --until is a mistake, not "no match"
    mhome = ttlib.make_home()
    ttlib.run_tokterm(["-p", "plain one"], home=mhome, env=env)
    ttlib.run_tokterm(["-p", "dated one"], home=mhome,
                      env={"OPENAI_BASE_URL": srv.base("served=gpt-4o-mini-2025")})
    rc, out2, _ = ttlib.run_tokterm(["stats", "--model", "GPT-4O-MINI"], env=env, home=mhome)
    t.ok(rc == 0 and b"answers               2" in out2,
         "stats --model: any case, dated snapshots included", out2.decode())
    # ... but not another model that starts with the name (a review found gpt-4o matching
    # gpt-4o-mini), nor a name read as a pattern
    ttlib.run_tokterm(["-m", "gpt-4o", "-p", "bigger one"], home=mhome, env=env)
    rc, out3, _ = ttlib.run_tokterm(["stats", "--model", "gpt-4o"], env=env, home=mhome)
    rc4, out4, _ = ttlib.run_tokterm(["stats", "--model", "gpt-4o%"], env=env, home=mhome)
    t.ok(b"answers               1" in out3 and b"answers               0" in out4,
         "stats --model gpt-4o: not gpt-4o-mini; 'gpt-4o%' is no pattern",
         out3.decode() + out4.decode())
    rc, sout, _ = ttlib.run_tokterm(["search", "dated", "--model", "Gpt-4o-Mini"], home=mhome)
    t.ok(rc == 0 and b"gpt-4o-mini-2025" in sout, "search --model: the same", sout.decode())
    rc, _, serr = ttlib.run_tokterm(["search", "dated", "--since", "2030-01-02", "--until",
                                     "2030-01-01"], home=mhome)
    t.ok(rc == 2 and b"--since 2030-01-02 is after --until 2030-01-01" in serr,
         "--since after --until: bad usage, said", serr.decode())
    rc, out, err = ttlib.run_tokterm(["stats", "--model", "nothing-like-it"], env=env, home=home)
    t.ok(rc == 0 and b"answers               0" in out, "--model: only that model's answers",
         out.decode())
    # no answer long enough to count: the line says which answers would be, not a bare "-"
    t.ok(b"tokens/s              - (no answers of 20+ tokens over 0.5+ s yet)\n" in out,
         "stats: no tokens/s yet says over what it will be", out.decode())
    rc, out, err = ttlib.run_tokterm(["stats"], env=env, home=home)
    text = out.decode()
    t.ok(rc == 0 and "retries               1 (1 answered 429)" in text
         and "(1 answer of 20+ tokens" in text, "stats: retries, and tokens/s says over what",
         text)
    # the per-model spend is written as the spend line is: ~$0.00003 is not "0.0000"
    t.ok(re.search(r"^gpt-4o-mini +2 +\d+ +\d+ +\d+ +<\$0\.0001$", text, re.M) is not None
         and "spend                 <$0.0001\n" in text, "stats: a model's tiny spend", text)

    # show gives tokens/s where stats counts it: the 40 tokens over 0.8 s, not the burst
    speeds = []
    for cid in ("1", "2"):
        rc, out, err = ttlib.run_tokterm(["show", cid], env=env, home=home)
        speeds.append(re.findall(r"[\d.]+ tokens/s", out.decode()))
    t.ok(len(speeds[0]) == 1 and 0 < float(speeds[0][0].split()[0]) < 1000 and speeds[1] == [],
         "show: tokens/s of the long answer only, not the burst's millions", repr(speeds))
    # an answer with no first token (tool calls only) has no speed: as stats, show gives none
    copy = ttlib.copy_home(home)
    con = sqlite3.connect(os.path.join(copy, ".local", "share", "tokterm", "tokterm.db"))
    with con:
        con.execute("UPDATE messages SET ttft = NULL, tokens_per_s = 0 WHERE conversation_id = 1 "
                    "AND role = 'assistant'")
    con.close()
    rc, out, err = ttlib.run_tokterm(["show", "1"], env=env, home=copy)
    t.ok(rc == 0 and "tokens/s" not in out.decode(), "show: no tokens/s without a first token",
         out.decode())

    # --- Prometheus: stats --format prometheus passes promtool ---
    rc, prom, err = ttlib.run_tokterm(["stats", "--format", "prometheus"], env=env, home=home)
    t.ok(rc == 0 and b'tokterm_requests_total{provider="127.0.0.1:%d",model="gpt-4o-mini",'
         b'status="complete"} 2' % srv.port in prom and
         b'tokterm_rate_limited_total{provider="127.0.0.1:%d",model="gpt-4o-mini"} 1'
         % srv.port in prom, "stats --format prometheus: the requests and the 429",
         prom.decode()[-1500:])
    promtool = shutil.which("promtool")
    if not promtool:
        t.skip("promtool check metrics", "promtool not installed", tool="promtool")
    else:
        p = subprocess.run([promtool, "check", "metrics"], input=prom, capture_output=True)
        t.ok(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
             "promtool check metrics: no error, no lint", (p.stdout + p.stderr).decode())

    # --- a real Prometheus scrapes a running batch; PromQL counts its requests ---
    prometheus = shutil.which("prometheus")
    if not prometheus:
        t.skip("Prometheus scrapes batch", "prometheus not installed", tool="prometheus")
    else:
        d = ttlib.tempdir("tt-prom-")
        mport, pport = ttlib.free_port(), ttlib.free_port()
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: tokterm\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % mport)
        with open(os.path.join(d, "stderr"), "wb") as errf:
            pr = subprocess.Popen([prometheus, "--config.file", os.path.join(d, "prometheus.yml"),
                                   "--storage.tsdb.path", os.path.join(d, "data"),
                                   "--web.listen-address", "127.0.0.1:%d" % pport],
                                  stdout=subprocess.DEVNULL, stderr=errf)
        api = "http://127.0.0.1:%d" % pport

        def get(path):
            with urllib.request.urlopen(api + path, timeout=5) as r:
                return r.read()
        try:
            ready = False
            for _ in range(300):
                try:
                    ready = b"Ready" in get("/-/ready")
                except OSError:
                    pass
                if ready or pr.poll() is not None:
                    break
                time.sleep(0.1)
            t.ok(ready, "prometheus started")
            # its targets start being scraped (and found down) a few seconds after it is ready
            up = []
            for _ in range(300):
                try:
                    up = json.loads(get("/api/v1/query?query=up"))["data"]["result"]
                except (OSError, ValueError, KeyError):
                    up = []
                if up or pr.poll() is not None:
                    break
                time.sleep(0.1)
            t.ok(up, "prometheus scrapes the (not yet listening) target", repr(up))
            n = 12
            inp = os.path.join(d, "in.jsonl")
            with open(inp, "w") as f:
                for i in range(n):
                    f.write(json.dumps({"id": i, "prompt": "scrape %d" % i}) + "\n")
            benv = {"OPENAI_BASE_URL": srv.base("gen=20,delay_ms=25")}
            rc, out, err = ttlib.run_tokterm(
                ["--no-cache", "batch", inp, "-j", "2", "--metrics-listen",
                 "127.0.0.1:%d" % mport, "--metrics-linger", "20"],
                env=benv, home=home, timeout=90)
            t.ok(rc == 0 and out.count(b"\n") == n, "the batch answered every line",
                 err.decode())
            q = urllib.parse.quote('sum(max_over_time(tokterm_requests_total{job="tokterm",'
                                   'status="complete"}[5m]))')
            got = None
            for _ in range(50):  # the scrape the batch waited for is being stored
                try:
                    res = json.loads(get("/api/v1/query?query=" + q))["data"]["result"]
                    got = res and res[0]["value"][1]
                except (OSError, ValueError, KeyError):
                    got = None
                if got == str(n):
                    break
                time.sleep(0.1)
            t.eq(got, str(n), "PromQL over the scraped series: %d requests" % n)
            q = urllib.parse.quote('max_over_time(tokterm_requests_in_flight{job="tokterm"}[5m])')
            res = json.loads(get("/api/v1/query?query=" + q))["data"]["result"]
            t.ok(res and 1 <= float(res[0]["value"][1]) <= 2,
                 "a scrape saw requests in flight while it ran, at most -j 2 (until 2026-12 the "
                 "requests handed to the network thread, up to twice -j)", repr(res))
        finally:
            pr.terminate()
            try:
                pr.wait(10)
            except subprocess.TimeoutExpired:
                pr.kill()
                pr.wait()

    # --- the spend metric prices each line at its own model's price (until 2026-12 at the
    # default model's: a gpt-4o line was charged as gpt-4o-mini) ---
    d2 = ttlib.tempdir("tt-spend-")
    inp2 = os.path.join(d2, "in.jsonl")
    with open(inp2, "w") as f:
        f.write(json.dumps({"id": 1, "prompt": "same words here", "model": "gpt-4o"}) + "\n")
        f.write(json.dumps({"id": 2, "prompt": "same words here", "model": "gpt-4o-mini"}) + "\n")
    mport2 = ttlib.free_port()
    p2 = subprocess.Popen([ttlib.tokterm_path(), "--no-cache", "batch", inp2, "-o",
                           os.path.join(d2, "out.jsonl"), "--metrics-listen",
                           "127.0.0.1:%d" % mport2, "--metrics-linger", "5"],
                          env=ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base()}),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    spend, deadline = {}, time.time() + 20
    while len(spend) < 2 and time.time() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport2, timeout=2) as r:
                for ln in r.read().decode().splitlines():
                    m = re.match(r'tokterm_spend_usd_total\{.*model="([^"]+)".*\} (\S+)', ln)
                    if m and float(m.group(2)) > 0:
                        spend[m.group(1)] = float(m.group(2))
        except OSError:
            pass
        time.sleep(0.1)
    p2.wait(30)
    ratio = spend.get("gpt-4o", 0) / spend["gpt-4o-mini"] if spend.get("gpt-4o-mini") else 0
    t.ok(ratio > 10, "batch spend: the same tokens cost gpt-4o over 10x gpt-4o-mini (%.1fx: %r)"
         % (ratio, spend))

    # --- /metrics answers a scrape while other clients trickle their requests a byte at a
    # time (until 2026-12 the clients were read one after the other, 2 s of silence allowed
    # per byte: one client sending a byte every 0.5 s held the endpoint as long as it went
    # on, and the scrape beside it got nothing) ---
    d3 = ttlib.tempdir("tt-loris-")
    inp3 = os.path.join(d3, "in.jsonl")
    with open(inp3, "w") as f:
        f.write(json.dumps({"id": 1, "prompt": "one"}) + "\n")
    mport3 = ttlib.free_port()
    p3 = subprocess.Popen([ttlib.tokterm_path(), "--no-cache", "batch", inp3, "-o",
                           os.path.join(d3, "out.jsonl"), "--metrics-listen",
                           "127.0.0.1:%d" % mport3, "--metrics-linger", "15"],
                          env=ttlib.clean_env(home, {"OPENAI_BASE_URL": srv.base()}),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    loris, stop = [], threading.Event()
    for _ in range(200):
        try:
            loris.append(socket.create_connection(("127.0.0.1", mport3), timeout=2))
            break
        except OSError:
            time.sleep(0.05)
    for _ in range(3):
        loris.append(socket.create_connection(("127.0.0.1", mport3), timeout=2))

    def trickle():
        for i in range(40):  # "GET /metrics..." a byte every 0.5 s, never the end of it
            if stop.wait(0.5 if i else 0):
                return
            for so in loris:
                try:
                    so.send(b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaa"[i:i + 1])
                except OSError:
                    pass

    tr = threading.Thread(target=trickle)
    tr.start()
    time.sleep(0.3)  # every slow client has sent its first byte
    got, t0 = b"", time.time()
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport3, timeout=6) as r:
            got = r.read()
    except OSError as e:
        got = repr(e).encode()
    took = time.time() - t0
    stop.set()
    tr.join()
    for so in loris:
        so.close()
    t.ok(b"tokterm_requests_in_flight" in got,
         "a scrape beside 4 clients trickling their requests is answered (in %.2f s)" % took,
         got[:200].decode(errors="replace"))
    t.eq(p3.wait(30), 0, "the batch ends well after that scrape")
    p3.stderr.close()

    # --- OpenTelemetry: a receiver decodes the OTLP/HTTP JSON of a batch ---
    class Receiver(http.server.BaseHTTPRequestHandler):
        got = []

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            Receiver.got.append((self.path, dict(self.headers), body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass

    rx = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    d = ttlib.tempdir("tt-otel-")
    inp = os.path.join(d, "in.jsonl")
    with open(inp, "w") as f:
        for i in range(3):
            f.write(json.dumps({"id": i, "prompt": "SECRET PROMPT %d" % i}) + "\n")
    oenv = {"OPENAI_BASE_URL": srv.base("gen=5"),
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % rx.server_port,
            "OTEL_EXPORTER_OTLP_HEADERS": "x-team=llm%20ops,authorization=Bearer%20t0k",
            "OTEL_SERVICE_NAME": "tt-e2e"}
    srv.queue(["status=429,h.retry-after-ms=50,error=slow,code=rate_limit_exceeded"])
    rc, out, err = ttlib.run_tokterm(["--no-cache", "batch", inp, "-j", "1"], env=oenv,
                                     home=home, timeout=60)
    srv.clear_queue()
    t.ok(rc == 0 and out.count(b"\n") == 3, "batch with traces: every answer", err.decode())
    # the collector's reply ("{}") never reaches stdout (until 2026-12 libcurl wrote it there,
    # after the last line: --json no longer JSON lines)
    def json_lines(b):
        try:
            return b.endswith(b"\n") and all(json.loads(x) is not None for x in b.splitlines())
        except ValueError:
            return False
    t.ok(json_lines(out), "batch with traces: stdout is the results' JSON lines only",
         repr(out[-80:]))
    spans, resources = [], []
    for path, hdrs, body in Receiver.got:
        j = json.loads(body)
        for rs in j["resourceSpans"]:
            resources.append({a["key"]: a["value"] for a in rs["resource"]["attributes"]})
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    t.eq(len(spans), 3, "one span per request")
    t.ok(Receiver.got and all(p == "/v1/traces" for p, _, _ in Receiver.got),
         "posted to ENDPOINT/v1/traces", repr([p for p, _, _ in Receiver.got]))
    h = Receiver.got[0][1] if Receiver.got else {}
    t.ok(h.get("x-team") == "llm ops" and h.get("authorization") == "Bearer t0k" and
         h.get("Content-Type") == "application/json",
         "OTEL_EXPORTER_OTLP_HEADERS sent (percent-decoded)", repr(h))
    t.ok(resources and resources[0].get("service.name") == {"stringValue": "tt-e2e"},
         "OTEL_SERVICE_NAME is the resource's service.name", repr(resources[:1]))
    want = {"gen_ai.system", "gen_ai.request.model", "gen_ai.response.model",
            "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons", "tokterm.dns_seconds", "tokterm.connect_seconds"}
    ok = bool(spans)
    for sp in spans:
        keys = {a["key"] for a in sp.get("attributes", [])}
        ok = ok and want <= keys and len(sp["traceId"]) == 32 and len(sp["spanId"]) == 16 \
            and int(sp["endTimeUnixNano"]) >= int(sp["startTimeUnixNano"]) > 0 \
            and sp.get("kind") == 3
    t.ok(ok, "every span: GenAI attributes, ids, times, kind client",
         json.dumps(spans[:1])[:1500])
    ev = [[e["name"] for e in sp.get("events", [])] for sp in spans]
    t.ok(ev and all("gen_ai.first_token" in e for e in ev) and
         sum(e.count("tokterm.retry") for e in ev) == 1,
         "events: the first token of each, the one retry", repr(ev))
    raw = b"".join(b for _, _, b in Receiver.got)
    t.ok(b"SECRET PROMPT" not in raw and b"sk-test" not in raw,
         "no prompt text and no key in the spans")
    rc, pout, err = ttlib.run_tokterm(["--no-cache", "--json", "-p", "traced"], env=oenv,
                                      home=home, timeout=60)
    t.ok(rc == 0 and json_lines(pout) and len(pout.splitlines()) == 1,
         "-p --json with traces: one JSON line on stdout", repr(pout[-80:]))
    # a dead collector: every answer, and one warning
    dead = ttlib.free_port()
    oenv["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:%d" % dead
    rc, out, err = ttlib.run_tokterm(["--no-cache", "batch", inp], env=oenv, home=home,
                                     timeout=60)
    t.ok(rc == 0 and out.count(b"\n") == 3 and err.count(b"not exported") == 1,
         "a dead collector: every answer and one warning", err.decode())
    # OTEL_SDK_DISABLED: nothing sent
    n = len(Receiver.got)
    oenv["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:%d" % rx.server_port
    oenv["OTEL_SDK_DISABLED"] = "true"
    rc, out, err = ttlib.run_tokterm(["--no-cache", "batch", inp], env=oenv, home=home)
    t.ok(rc == 0 and len(Receiver.got) == n, "OTEL_SDK_DISABLED=true: no export")
    # one -p: its span too
    n = len(Receiver.got)
    oenv.pop("OTEL_SDK_DISABLED")
    rc, out, err = ttlib.run_tokterm(["--no-cache", "-p", "one more"], env=oenv, home=home)
    got = [sp for _, _, b in Receiver.got[n:] for rs in json.loads(b)["resourceSpans"]
           for ss in rs["scopeSpans"] for sp in ss["spans"]]
    t.ok(rc == 0 and len(got) == 1 and got[0]["name"].startswith("chat "),
         "-p: one span, sent before the process ends", repr(got)[:600])
    rx.shutdown()

t.done()
