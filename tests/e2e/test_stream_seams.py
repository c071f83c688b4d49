#!/usr/bin/env python3
"""A fast stream's events stay on the fast path where libcurl cuts them (issue 14, stream CPU).

libcurl hands the write callback at most 16 KiB at a time (CURL_MAX_WRITE_SIZE), so a fast
stream of 200-byte events has one event cut in two every 16 KiB, and a server that writes small
pieces cuts every event. The network thread holds such an unfinished event of the stream's
shape and decodes it whole when its end comes (net.c, net_feed_sse), instead of handing it to
the SSE parser and the JSON decoder. TOKTERM_DEBUG_STREAM makes tokterm print, per exchange,
the pieces libcurl handed over, the events decoded and how many of them went through the SSE
parser: only the events around the text (role, the first text that gives the shape, stop,
usage, [DONE]), however the bytes were cut. Every byte of the answer arrives, in order, for
streams cut at every size, with CR line endings, comments, fields and escapes among them.
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
PARSED_MAX = 8  # role, the first text, stop, usage, [DONE], and some slack
LINE = re.compile(rb"tokterm: debug: stream: (\d+) pieces, (\d+) events, (\d+) by the SSE parser")


def gen_text(n):
    return "".join("tok%d " % i for i in range(n)).encode()


def debug(err):
    m = LINE.search(err)
    return tuple(int(x) for x in m.groups()) if m else None


def run(srv, spec):
    return ttlib.run_tokterm(["--incognito", "-p", "x"], timeout=120,
                             env={"OPENAI_BASE_URL": srv.base(spec), "TOKTERM_DEBUG_STREAM": "1"})


def chunk(text=None, role=False, finish=None):
    delta = {"role": "assistant", "content": ""} if role else ({} if text is None else
                                                               {"content": text})
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def ev(obj, nl="\n"):
    return "data: " + json.dumps(obj, separators=(",", ":")) + nl + nl


def mixed_stream():
    """An SSE body of plain text chunks of one shape with everything else among them; returns
    (body, the answer's text)."""
    parts, text = [ev(chunk(role=True))], []

    def words(a, b):
        for i in range(a, b):
            parts.append(ev(chunk("w%d " % i)))
            text.append("w%d " % i)

    def one(s, nl="\n"):
        parts.append(ev(chunk(s), nl))
        text.append(s)

    words(0, 20)
    one("crlf ", "\r\n")           # CR LF line endings: the parser's
    words(20, 30)
    parts.append(": keep-alive\n\n")
    words(30, 40)
    parts.append("id: 7\n" + ev(chunk("with id ")))
    text.append("with id ")
    words(40, 50)
    one('esc "q" a\\b\nline ')     # escapes: the JSON decoder's
    words(50, 60)
    one("long " * 20)              # longer than 32 bytes
    words(60, 70)
    one("cr ", "\r")               # CR alone
    words(70, 80)
    parts.append(ev(chunk(finish="stop")))
    parts.append("data: [DONE]\n\n")
    return "".join(parts), "".join(text)


with ttlib.FakeServer() as srv:
    # 200,000 deltas in one write: libcurl's 16 KiB pieces cut ~2,500 events
    n = 200000
    rc, out, err = run(srv, "gen=%d,chunk=whole" % n)
    want = gen_text(n) + b"\n"
    t.ok(rc == 0 and hashlib.sha256(out).hexdigest() == hashlib.sha256(want).hexdigest(),
         "gen=%d: exit 0, the whole answer in order (%d bytes)" % (n, len(out)),
         err.decode(errors="replace")[-400:])
    d = debug(err)
    t.ok(d is not None, "gen=%d: the debug line" % n, err.decode(errors="replace")[-400:])
    if d:
        pieces, events, parsed = d
        t.ok(pieces >= 1000 and events >= n,
             "gen=%d: %d pieces from libcurl, %d events" % (n, pieces, events))
        t.ok(parsed <= PARSED_MAX, "gen=%d: %d events by the SSE parser (at most %d), however "
             "the %d pieces cut them" % (n, parsed, PARSED_MAX, pieces))

    # every event cut, at every offset: the server writes pieces of a few bytes
    n = 3000
    want = gen_text(n) + b"\n"
    for size in (7, 61, 1000, 4099):
        rc, out, err = run(srv, "gen=%d,chunk=%d" % (n, size))
        d = debug(err)
        t.ok(rc == 0 and out == want, "gen=%d,chunk=%d: the whole answer in order" % (n, size),
             err.decode(errors="replace")[-400:])
        t.ok(d is not None and d[1] >= n and d[2] <= PARSED_MAX,
             "gen=%d,chunk=%d: %s events, %s by the SSE parser (at most %d)"
             % (n, size, d and d[1], d and d[2], PARSED_MAX))

    # everything else among the text, cut at every size: the same answer
    body, text = mixed_stream()
    want = text.encode() + b"\n"
    for size in (1, 2, 3, 5, 7, 13, 64, 150, 333, 100000):
        spec = "raw=%s,ctype=%s,chunk=%d" % (urllib.parse.quote(body, safe=""),
                                              urllib.parse.quote("text/event-stream", safe=""),
                                              size)
        rc, out, err = run(srv, spec)
        t.ok(rc == 0 and out == want, "mixed stream, chunk=%d: the same answer" % size,
             "rc %d, got %r" % (rc, out[:300]))
sys.exit(t.done())
