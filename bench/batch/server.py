#!/usr/bin/env python3
"""A lean fake chat-completions server for the batch throughput benchmark (stdlib only).

One asyncio thread, HTTP/1.1 keep-alive: every POST .../chat/completions waits --delay-ms, then
streams the last user message back as an OpenAI SSE stream (role delta, 4-character content
deltas, stop, usage, [DONE]) in one write. No thread per connection and no GIL contention, so
at a few hundred requests a second the 50 ms wait is what a client sees, not the server's own
overhead (tests/fake-openai/server.py, with a thread per connection, adds 5-25 ms at 32
concurrent requests on two cores). GET /_stats returns {"requests": n, "connections": n,
"max_in_flight": n}.

usage: server.py --port-file F [--port 0] [--delay-ms 50]
"""
import argparse
import asyncio
import json
import os
import signal

STATS = {"requests": 0, "connections": 0, "in_flight": 0, "max_in_flight": 0}


def answer(body):
    """The whole HTTP response: an SSE stream echoing the last user message (string content)."""
    try:
        req = json.loads(body)
    except ValueError:
        req = {}
    model = req.get("model") or "fake-model"
    text = ""
    for m in req.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
            text = m["content"]
    # Chunks from a template: only the model and the text pieces need JSON escaping.
    head = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",'
            '"created":1700000000,"model":%s,"choices":' % json.dumps(model))
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    out = [head + '[{"index":0,"delta":{"role":"assistant","content":""},'
                  '"finish_reason":null}]}\n\n']
    for p in pieces:
        out.append(head + '[{"index":0,"delta":{"content":%s},"finish_reason":null}]}\n\n'
                   % json.dumps(p))
    out.append(head + '[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    if (req.get("stream_options") or {}).get("include_usage"):
        pt = len(text) // 4 + 3
        out.append(head[:-len(',"choices":')] + ',"choices":[],"usage":{"prompt_tokens":%d,'
                   '"completion_tokens":%d,"total_tokens":%d}}\n\n'
                   % (pt, len(pieces), pt + len(pieces)))
    out.append("data: [DONE]\n\n")
    data = "".join(out).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
            + b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")


async def handle(reader, writer, delay):
    STATS["connections"] += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for h in lines[1:]:
                k, _, v = h.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "GET" and path.endswith("/_stats"):
                out = json.dumps(STATS).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(out) + out)
                continue
            STATS["requests"] += 1
            STATS["in_flight"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
            await asyncio.sleep(delay)
            STATS["in_flight"] -= 1
            writer.write(answer(body))
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--delay-ms", type=float, default=50)
    a = ap.parse_args()
    delay = a.delay_ms / 1000.0
    srv = await asyncio.start_server(lambda r, w: handle(r, w, delay), "127.0.0.1", a.port,
                                     backlog=256)
    port = srv.sockets[0].getsockname()[1]
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.replace(a.port_file + ".tmp", a.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    async with srv:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
