#!/usr/bin/env python3
"""A real server in the loop: nginx as a TLS + HTTP/2 reverse proxy in front of the fake server.

Shows from nginx's own log ($connection, $connection_requests, $server_protocol) that 20 turns
in one process use one connection (so one TLS handshake) over HTTP/2, that a certificate
that does not verify gives a clear error, and that a batch at concurrency 16 is multiplexed:
32 requests on one connection, up to 16 in flight at once ($msec, $request_time).
Prints TAP; skips when nginx or openssl is missing."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
OPENSSL = shutil.which("openssl")


def log_lines(d, skip=0, want=None, timeout=3.0):
    """Lines of nginx's access log after the first skip; waits (bounded) until want are there:
    nginx writes a request's line after its last byte left, which can be just after tokterm
    has read the answer and exited."""
    deadline = time.time() + timeout
    while True:
        with open(os.path.join(d, "access.log")) as f:
            lines = [ln.split() for ln in f.readlines()[skip:] if len(ln.split()) >= 4]
        if want is None or len(lines) >= want or time.time() > deadline:
            return lines
        time.sleep(0.05)


def start_nginx(d, port, upstream):
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""
daemon off;
master_process off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 128; }
http {
    log_format tt '$connection $connection_requests $server_protocol $status $ssl_session_reused '
                  '$msec $request_time';
    access_log %(d)s/access.log tt;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    upstream fake { server 127.0.0.1:%(up)d; keepalive 16; }
    server {
        listen 127.0.0.1:%(port)d ssl http2;
        ssl_certificate %(d)s/cert.pem;
        ssl_certificate_key %(d)s/key.pem;
        location / {
            proxy_pass http://fake;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
        }
    }
}
""" % {"d": d, "port": port, "up": upstream})
    p = subprocess.Popen([NGINX, "-c", conf, "-p", d, "-e", os.path.join(d, "error.log")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    err = p.stderr.read().decode() if p.poll() is not None else ""
    p.kill()
    raise RuntimeError("nginx did not start: " + err)


if not NGINX or not OPENSSL:
    t.skip("nginx TLS + HTTP/2 proxy", "nginx or openssl not installed",
           tool="nginx" if not NGINX else "openssl")
    sys.exit(t.done())

d = ttlib.tempdir("tt-nginx-")
subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-keyout", os.path.join(d, "key.pem"), "-out", os.path.join(d, "cert.pem"),
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
cert = os.path.join(d, "cert.pem")

with ttlib.FakeServer() as srv:
    port = ttlib.free_port()
    ng = start_nginx(d, port, srv.port)
    try:
        base = "https://127.0.0.1:%d/v1" % port
        turns = []
        for i in range(20):
            turns += ["-p", "turn %d" % i]
        rc, out, err = ttlib.run_tokterm(["--cacert", cert, "--json"] + turns,
                                         env={"OPENAI_BASE_URL": base}, timeout=60)
        results = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
        t.eq(rc, 0, "20 turns through nginx: exit 0")
        t.eq(len(results), 20, "20 answers")
        t.eq([r.get("content") for r in results], ["turn %d" % i for i in range(20)],
             "every answer streamed back through the proxy")
        t.eq(sorted(set(r.get("http_version") for r in results)), ["2"], "HTTP/2 negotiated (ALPN)")
        t.eq([r.get("connection_reused") for r in results], [False] + [True] * 19,
             "tokterm reports the first connection new, the other 19 reused")
        log = log_lines(d, want=20)
        t.eq(len(log), 20, "nginx logged 20 requests")
        t.eq(len(set(p[0] for p in log)), 1, "nginx: all 20 on one connection ($connection), "
             "so one TLS handshake")
        t.eq([int(p[1]) for p in log], list(range(1, 21)), "nginx: $connection_requests 1..20")
        t.eq(sorted(set(p[2] for p in log)), ["HTTP/2.0"], "nginx: $server_protocol HTTP/2.0")
        t.ok(ttlib.TEST_KEY.encode() not in out + err, "key never printed")

        rc, out, err = ttlib.run_tokterm(["-p", "hi"], env={"OPENAI_BASE_URL": base})
        t.eq(rc, 4, "self-signed certificate without --cacert: exit 4 (network)")
        t.ok(b"certificate" in err.lower() and b"cacert" in err, "certificate error explained, "
             "with what to do", err.decode())
        rc, out, err = ttlib.run_tokterm(["--insecure", "-p", "insecure ok"],
                                         env={"OPENAI_BASE_URL": base})
        t.ok(rc == 0 and out == b"insecure ok\n", "--insecure connects", err.decode())
        t.ok(b"--insecure" in err, "--insecure warns every time")

        # A batch at concurrency 16: one connection, HTTP/2 streams in flight together.
        with open(os.path.join(d, "access.log")) as f:
            before = len(f.readlines())
        inp = os.path.join(d, "batch.jsonl")
        with open(inp, "w") as f:
            for i in range(32):
                f.write(json.dumps({"id": i, "prompt": "batch %d" % i}) + "\n")
        rc, out, err = ttlib.run_tokterm(
            ["--cacert", cert, "--incognito", "batch", "--concurrency", "16", inp],
            env={"OPENAI_BASE_URL": "https://127.0.0.1:%d/header_delay_ms=300/v1" % port},
            timeout=60)
        results = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
        t.ok(rc == 0 and len(results) == 32 and
             sorted(r["content"] for r in results) == sorted("batch %d" % i for i in range(32)),
             "batch of 32 through nginx: every answer", err.decode())
        t.eq(sorted(set(r["http_version"] for r in results)), ["2"], "batch: HTTP/2 for all")
        blog = log_lines(d, skip=before, want=32)
        t.eq(len(blog), 32, "batch: nginx logged 32 requests")
        t.eq(len(set(p[0] for p in blog)), 1, "batch: all 32 on one connection ($connection)")
        t.eq(sorted(set(p[2] for p in blog)), ["HTTP/2.0"], "batch: $server_protocol HTTP/2.0")
        spans = [(float(p[5]) - float(p[6]), float(p[5])) for p in blog]
        ev = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        cur = most = 0
        for _, step in ev:
            cur += step
            most = max(most, cur)
        # (The upper bound is checked in test_batch.py: nginx logs a request after its last byte
        # left, so the next stream of a slot can start before the log time of the previous.)
        t.ok(most >= 12, "batch: requests overlap on that connection (%d at once, at most 16)"
             % most)
    finally:
        ng.terminate()
        try:
            ng.wait(timeout=5)
        except subprocess.TimeoutExpired:
            ng.kill()

sys.exit(t.done())
