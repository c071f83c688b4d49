#!/usr/bin/env python3
"""Fake OpenAI-compatible chat-completions server for tokterm's tests and benchmarks.

Loopback HTTP/1.1 (keep-alive, chunked streams). The scenario is chosen per request by a spec
segment in the URL path: a client pointed at http://127.0.0.1:PORT/<spec>/v1 posts to
/<spec>/v1/chat/completions. See README.md next to this file for every spec key.

Python 3 standard library only.
"""

import argparse
import http.server
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib

STOP = threading.Event()          # set on SIGTERM/SIGINT: every wait in a handler ends early
DEFAULT_STALL_S = 30.0            # upper bound of stall_after / keepalive_ms / hang
IDLE_TIMEOUT_S = 120.0            # an idle keep-alive connection is closed after this
BIG_WRITE = 65536                 # pieces above this are framed with separate sendall() calls

# Spec keys and how their values are parsed; anything else is answered with a 400 so that a
# typo in a test shows up instead of being ignored.
INT_KEYS = {"gen", "delay_ms", "first_delay_ms", "header_delay_ms", "status", "drop_after",
            "stall_after", "keepalive_ms", "seed", "prompt_tokens", "huge_line", "big_delta",
            "nest", "bomb", "bomb_text", "page", "tool_calls", "tool_args", "big_header"}
FLOAT_KEYS = {"stall_s"}
FLAG_KEYS = {"close", "json", "hang", "rst", "empty_deltas", "linger", "bomb_usage", "ollama"}
STR_KEYS = {"replay", "reply", "chunk", "body", "error", "code", "type", "ctype", "raw",
            "models", "encoding", "redirect", "reason", "stop", "retry_delay", "served"}
BYTES_KEYS = {"content_json", "usage_json"}     # percent-decoded to bytes, not text
ENCODINGS = ("gzip", "deflate", "br", "zstd")
# Routes a spec prefix may stand before; the spec is everything between the first "/" and
# the route, so an unencoded "/" inside a value (ctype=text/html) is fine.
ROUTES = ("/v1/chat/completions", "/chat/completions", "/v1/messages", "/messages", "/v1/models",
          "/models", "/v1/responses", "/responses", "/api/tags")
# Gemini: [/<spec>][/v1beta]/models/MODEL:streamGenerateContent (or :generateContent)
GEMINI_ROUTE = re.compile(r"^(.*?)(/v1beta|/v1)?/models/([^/]+):(streamGenerateContent|"
                          r"generateContent)$")


class SpecError(ValueError):
    pass


def models_body(spec, url, headers):
    """A model list (GET .../models) in the shape the request asks for: Ollama's /api/tags,
    Gemini's /v1beta/models (or an x-goog-api-key; pages of spec page=N by pageToken),
    Anthropic's (an anthropic-version header), else OpenAI's. The names from models=A|B."""
    names = spec.get("models", "fake-model|gpt-4o-mini").split("|")
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    if parts.path.endswith("/api/tags"):
        return jdump({"models": [{"name": m, "model": m, "size": 1000000,
                                  "details": {"family": "fake"}} for m in names]})
    if parts.path.endswith("/v1beta/models") or headers.get("x-goog-api-key"):
        per = spec.get("page") or len(names) or 1
        start = int((query.get("pageToken") or ["0"])[0] or 0)
        page = names[start:start + per]
        doc = {"models": [{"name": "models/" + m, "displayName": m.upper(),
                           "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
                           "supportedGenerationMethods":
                               ["embedContent"] if "embedding" in m
                               else ["generateContent", "countTokens"]} for m in page]}
        if start + per < len(names):
            doc["nextPageToken"] = str(start + per)
        return jdump(doc)
    if headers.get("anthropic-version"):  # pages of page=N (else limit=) after after_id
        per = spec.get("page") or int((query.get("limit") or ["20"])[0] or 20)
        after = (query.get("after_id") or [None])[0]
        start = names.index(after) + 1 if after in names else 0
        page = names[start:start + per]
        return jdump({"data": [{"type": "model", "id": m, "display_name": m.title(),
                                "created_at": "2025-02-19T00:00:00Z"} for m in page],
                      "has_more": start + per < len(names),
                      "first_id": page[0] if page else None,
                      "last_id": page[-1] if page else None})
    return jdump({"object": "list", "data": [
        {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"}
        for m in names]})


def spec_parse(text):
    """Parse 'k=v,k2=v2' (values percent-encoded) into a dict with typed values."""
    spec = {}
    if not text:
        return spec
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = urllib.parse.unquote(key)
        value = urllib.parse.unquote(value) if sep else "1"
        if key.startswith("h.") and len(key) > 2:
            spec.setdefault("headers", []).append([key[2:], value])
            continue
        try:
            if key in INT_KEYS:
                spec[key] = int(value)
            elif key in FLOAT_KEYS:
                spec[key] = float(value)
            elif key in FLAG_KEYS:
                spec[key] = value not in ("0", "", "false", "no")
            elif key in STR_KEYS:
                spec[key] = value
            elif key in BYTES_KEYS:
                spec[key] = urllib.parse.unquote_to_bytes(item.partition("=")[2])
            else:
                raise SpecError("unknown spec key %r" % key)
        except ValueError as e:
            if isinstance(e, SpecError):
                raise
            raise SpecError("bad value %r for spec key %r" % (value, key)) from None
    chunk = spec.get("chunk")
    if chunk is not None and chunk not in ("whole", "line", "event", "byte", "random"):
        if not chunk.isdigit() or int(chunk) <= 0:
            raise SpecError("bad chunk mode %r" % chunk)
    for k in ("replay", "body"):
        if k in spec and ("/" in spec[k] or spec[k].startswith(".")):
            raise SpecError("%s must name a file in the fixtures directory" % k)
    if spec.get("encoding", "gzip") not in ENCODINGS:
        raise SpecError("encoding must be one of %s" % ", ".join(ENCODINGS))
    if spec.get("report", "bucket") not in ("bucket", "minute"):
        raise SpecError("report must be bucket or minute")
    for k in ("huge_line", "big_delta", "nest", "bomb", "bomb_text"):
        if spec.get(k, 0) < 0:
            raise SpecError("%s must not be negative" % k)
    return spec


# ---------------------------------------------------------------------------------------------
# Bodies

EVENT_END = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")
LINE_END = re.compile(rb"\r\n|\r|\n")


def split_after(data, pattern):
    """Split bytes after each match of pattern; the pieces joined give data back."""
    pieces = []
    start = 0
    for m in pattern.finditer(data):
        pieces.append(data[start:m.end()])
        start = m.end()
    if start < len(data):
        pieces.append(data[start:])
    return pieces


class Body:
    """A response body plus (optionally) its pre-split SSE events."""

    def __init__(self, data, events=None):
        self.data = data
        self.events = events

    def pieces(self, spec):
        mode = spec.get("chunk", "event")
        data = self.data
        if mode == "whole":
            return [data] if data else []
        if mode == "event":
            return self.events if self.events is not None else split_after(data, EVENT_END)
        if mode == "line":
            return split_after(data, LINE_END)
        if mode == "byte":
            return [data[i:i + 1] for i in range(len(data))]
        if mode == "random":
            rng = random.Random(spec.get("seed", 0))
            out, i = [], 0
            while i < len(data):
                n = rng.randint(1, 64)
                out.append(data[i:i + n])
                i += n
            return out
        n = int(mode)
        return [data[i:i + n] for i in range(0, len(data), n)]


def jdump(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_event(obj):
    return b"data: " + jdump(obj).encode("utf-8") + b"\n\n"


def chunk_obj(cid, created, model, delta=None, finish=None, usage=None):
    if usage is not None:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": usage}
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta if delta is not None else {},
                         "logprobs": None, "finish_reason": finish}]}


USAGE_MARK = "@@usage_json@@"


def with_usage_raw(data, usage_raw):
    """data (bytes of JSON) with the usage placeholder replaced by the raw bytes usage_raw."""
    return data.replace(jdump(USAGE_MARK).encode("utf-8"), usage_raw)


def stream_body(pieces, model, cid, created, usage, usage_raw=None, reasoning=None):
    """SSE stream: role delta, a reasoning_content delta when reasoning, one content delta per
    piece, stop, usage, [DONE]. usage_raw: the usage member's bytes, verbatim (may be of the
    wrong types on purpose)."""
    events = [sse_event(chunk_obj(cid, created, model, {"role": "assistant", "content": ""}))]
    if reasoning:
        events.append(sse_event(chunk_obj(cid, created, model, {"reasoning_content": reasoning})))
    for p in pieces:
        events.append(sse_event(chunk_obj(cid, created, model, {"content": p})))
    events.append(sse_event(chunk_obj(cid, created, model, {}, "stop")))
    if usage_raw is not None:
        events.append(with_usage_raw(sse_event(chunk_obj(cid, created, model, usage=USAGE_MARK)),
                                     usage_raw))
    else:
        events.append(sse_event(chunk_obj(cid, created, model, usage=usage)))
    events.append(b"data: [DONE]\n\n")
    return Body(b"".join(events), events)


_GEN_CACHE = {}
_GEN_LOCK = threading.Lock()


def gen_body(n, model):
    """N numbered deltas 'tokI ' in OpenAI chunk shape; built once per (N, model)."""
    key = (n, model)
    with _GEN_LOCK:
        body = _GEN_CACHE.get(key)
        if body is not None:
            return body
        cid = "chatcmpl-fakegen%d" % n
        m = jdump(model)
        head = ('data: {"id":"%s","object":"chat.completion.chunk","created":1700000000,'
                '"model":%s,"choices":[{"index":0,"delta":{"content":"tok' % (cid, m))
        tail = ' "},"logprobs":null,"finish_reason":null}]}\n\n'
        events = [sse_event(chunk_obj(cid, 1700000000, model,
                                      {"role": "assistant", "content": ""}))]
        events.extend((head + str(i) + tail).encode("utf-8") for i in range(n))
        events.append(sse_event(chunk_obj(cid, 1700000000, model, {}, "stop")))
        events.append(sse_event(chunk_obj(cid, 1700000000, model, usage={
            "prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8})))
        events.append(b"data: [DONE]\n\n")
        body = Body(b"".join(events), events)
        if len(_GEN_CACHE) > 16:
            _GEN_CACHE.clear()
        _GEN_CACHE[key] = body
        return body


class LazyBody(Body):
    """A streamed body made while it is sent (never held whole in memory): gen() yields the
    pieces; chunk= modes do not apply."""

    def __init__(self, gen):
        super().__init__(b"", None)
        self.gen = gen

    def pieces(self, spec):
        return self.gen()


FLOOD_BLOCK = b"x" * (1 << 20)
# big_delta text: this 64-byte unit repeated (ASCII, 2- and 3-byte UTF-8, a newline)
BIG_UNIT = "0123456789 abcdefghijklmnopqrstuvwxyz \u00e9\u4e2d ABCDEFGHIJKLMNOPQRS\n".encode()
assert len(BIG_UNIT) == 64


def big_delta_text(n):
    """The content big_delta=N sends: BIG_UNIT repeated N // 64 times (tests compare it)."""
    return BIG_UNIT * (n // len(BIG_UNIT))


def huge_line_body(n, model):
    """Role and one normal delta, then `data: {...` followed by N bytes of 'x' with no newline,
    then the end of the body: a line that never ends."""
    cid = "chatcmpl-fakehuge"

    def gen():
        yield sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""}))
        yield sse_event(chunk_obj(cid, 1700000000, model, {"content": "before the flood "}))
        yield b'data: {"choices":[{"index":0,"delta":{"content":"'
        left = n
        while left > 0:
            k = min(left, len(FLOOD_BLOCK))
            yield FLOOD_BLOCK if k == len(FLOOD_BLOCK) else FLOOD_BLOCK[:k]
            left -= k
    return LazyBody(gen)


def big_delta_body(n, model):
    """One content delta holding big_delta_text(n), sent in 1 MiB writes, then stop, usage,
    [DONE]."""
    cid = "chatcmpl-fakebig"
    unit = json.dumps(BIG_UNIT.decode("utf-8"), ensure_ascii=False)[1:-1].encode("utf-8")
    count = n // len(BIG_UNIT)

    def gen():
        yield sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""}))
        yield b'data: {"id":"' + cid.encode() + b'","choices":[{"index":0,"delta":{"content":"'
        per = (1 << 20) // len(unit)
        left = count
        while left > 0:
            k = min(left, per)
            yield unit * k
            left -= k
        yield b'"},"finish_reason":null}]}\n\n'
        yield sse_event(chunk_obj(cid, 1700000000, model, {}, "stop"))
        # a count a real server could give (about 4 bytes a token): tokterm takes a count
        # of fewer than 1 token per 128 bytes for a lie, and counts the text itself
        yield sse_event(chunk_obj(cid, 1700000000, model, usage={
            "prompt_tokens": 5, "completion_tokens": max(1, n // 4),
            "total_tokens": 5 + max(1, n // 4)}))
        yield b"data: [DONE]\n\n"
    return LazyBody(gen)


def tool_calls_body(k, n, model):
    """A content delta "before the calls ", then K tool calls (ids call_0.., names f0..), each
    with N bytes of arguments ('x') sent in deltas of at most 1 MiB, then finish_reason
    tool_calls and [DONE]. Made while it is sent."""
    cid = "chatcmpl-faketools"

    def call(i, fields):
        return sse_event(chunk_obj(cid, 1700000000, model,
                                   {"tool_calls": [dict({"index": i}, **fields)]}))

    def gen():
        yield sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""}))
        yield sse_event(chunk_obj(cid, 1700000000, model, {"content": "before the calls "}))
        for i in range(k):
            yield call(i, {"id": "call_%d" % i, "type": "function",
                           "function": {"name": "f%d" % i, "arguments": ""}})
            head = ('data: {"id":"%s","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,'
                    '"function":{"arguments":"' % (cid, i)).encode()
            left = n
            while left > 0:
                m = min(left, len(FLOOD_BLOCK))
                yield head + FLOOD_BLOCK[:m] + b'"}}]},"finish_reason":null}]}\n\n'
                left -= m
        yield sse_event(chunk_obj(cid, 1700000000, model, {}, "tool_calls"))
        yield b"data: [DONE]\n\n"
    return LazyBody(gen)


def raw_content_body(raw, model):
    """One content delta whose JSON value is the bytes raw, verbatim (may be invalid JSON or
    invalid UTF-8 on purpose), between a role delta and stop/usage/[DONE]."""
    cid = "chatcmpl-fakeraw"
    events = [sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""})),
              b'data: {"id":"' + cid.encode() + b'","choices":[{"index":0,"delta":{"content":'
              + raw + b'},"finish_reason":null}]}\n\n',
              sse_event(chunk_obj(cid, 1700000000, model, {}, "stop")),
              sse_event(chunk_obj(cid, 1700000000, model, usage={
                  "prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})),
              b"data: [DONE]\n\n"]
    return Body(b"".join(events), events)


def nested_json(n):
    return b"[" * n + b"]" * n


def nest_body(n, model):
    """A normal delta, then a chunk with an extra member nested n arrays deep, stop, [DONE]."""
    cid = "chatcmpl-fakenest"
    events = [sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""})),
              sse_event(chunk_obj(cid, 1700000000, model, {"content": "before the nest "})),
              b'data: {"choices":[{"index":0,"delta":{"content":"x","extra":' + nested_json(n)
              + b'}}]}\n\n',
              sse_event(chunk_obj(cid, 1700000000, model, {}, "stop")),
              b"data: [DONE]\n\n"]
    return Body(b"".join(events), events)


BOMB_UNIT_TEXT = BIG_UNIT * 64   # 4 KiB of answer text per event of bomb_text=
BOMB_BLOCK = 16 << 20            # bytes of filler compressed once and repeated
_BOMB_CACHE = {}
_BOMB_LOCK = threading.Lock()


def bomb_parts(n, text, model, usage=False):
    """(head, filler unit, count, tail) of bomb=N (N newlines: no event at all) or
    bomb_text=N (N bytes of answer text, BOMB_UNIT_TEXT per content delta) after a role delta,
    then stop, a usage chunk when usage (bomb_usage: completion_tokens = N // 4), and
    [DONE]."""
    cid = "chatcmpl-fakebomb"
    head = sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""}))
    tail = sse_event(chunk_obj(cid, 1700000000, model, {}, "stop")) + b"data: [DONE]\n\n"
    if usage:
        tail = tail[:-len(b"data: [DONE]\n\n")] + sse_event(chunk_obj(
            cid, 1700000000, model, usage={"prompt_tokens": 8, "completion_tokens": n // 4,
                                           "total_tokens": 8 + n // 4})) + b"data: [DONE]\n\n"
    if not text:
        return head, b"\n", n, tail
    unit = sse_event({"choices": [{"index": 0, "delta": {
        "content": BOMB_UNIT_TEXT.decode("utf-8")}, "finish_reason": None}]})
    return head, unit, n // len(BOMB_UNIT_TEXT), tail


def bomb_plain(n, text, model, usage=False):
    """The bomb's body made while it is sent (no Content-Encoding)."""
    head, unit, count, tail = bomb_parts(n, text, model, usage)

    def gen():
        yield head
        per = max(1, (1 << 20) // len(unit))
        left = count
        while left > 0:
            k = min(left, per)
            yield unit * k
            left -= k
        yield tail
    return LazyBody(gen)


def bomb_compressed(n, text, kind, model):
    """The bomb's whole body compressed with kind (made once per process and kept): gzip and
    deflate repeat one compressed 16 MiB block (after a full flush the compressor's output for
    the same block is the same bytes) with the right trailer; br and zstd use their command-line
    tools. None when the tool is missing."""
    key = (n, text, kind, model)
    with _BOMB_LOCK:
        if key in _BOMB_CACHE:
            return _BOMB_CACHE[key]
    head, unit, count, tail = bomb_parts(n, text, model)
    per = max(1, BOMB_BLOCK // len(unit))
    block = unit * per
    reps, rem = divmod(count, per)
    if kind in ("gzip", "deflate"):
        z = zlib.compressobj(9, zlib.DEFLATED, 31 if kind == "gzip" else 15)
        out = [z.compress(head) + z.flush(zlib.Z_FULL_FLUSH)]
        check = 0 if kind == "gzip" else 1
        fold = zlib.crc32 if kind == "gzip" else zlib.adler32
        check = fold(head, check)
        if reps:
            rep = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
            again = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
            assert rep == again, "a full flush does not repeat"
            out.append(rep * reps)
            for _ in range(reps):
                check = fold(block, check)
        last = unit * rem + tail
        check = fold(last, check)
        end = z.compress(last) + z.flush(zlib.Z_FINISH)
        size = len(head) + reps * len(block) + len(last)
        if kind == "gzip":  # CRC-32 and the size modulo 2^32, little-endian
            end = end[:-8] + check.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
        else:               # Adler-32, big-endian
            end = end[:-4] + check.to_bytes(4, "big")
        data = b"".join(out) + end
    else:
        tool = "brotli" if kind == "br" else "zstd"
        if not shutil.which(tool):
            return None
        args = [tool, "-c", "-q", "1"] if kind == "br" else [tool, "-q", "-c", "-1"]
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

        def feed():
            try:
                p.stdin.write(head)
                for _ in range(reps):
                    p.stdin.write(block)
                p.stdin.write(unit * rem + tail)
            finally:
                p.stdin.close()
        th = threading.Thread(target=feed, daemon=True)
        th.start()
        data = p.stdout.read()
        th.join()
        if p.wait() != 0:
            return None
    with _BOMB_LOCK:
        if len(_BOMB_CACHE) > 8:
            _BOMB_CACHE.clear()
        _BOMB_CACHE[key] = data
    return data


def empty_deltas_body(model, seconds):
    """A role delta, then deltas with empty content until seconds have passed (paced by
    delay_ms), then stop and [DONE]: a stream that never makes progress."""
    cid = "chatcmpl-fakeempty"

    def gen():
        yield sse_event(chunk_obj(cid, 1700000000, model, {"role": "assistant", "content": ""}))
        deadline = time.monotonic() + seconds
        empty = sse_event(chunk_obj(cid, 1700000000, model, {"content": ""}))
        while time.monotonic() < deadline and not STOP.is_set():
            yield empty
        yield sse_event(chunk_obj(cid, 1700000000, model, {}, "stop"))
        yield b"data: [DONE]\n\n"
    return LazyBody(gen)


def zstd_frame(data):
    """data as one zstd frame (the zstd tool; frames may follow each other in a stream)."""
    return subprocess.run(["zstd", "-q", "-c", "-1"], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


class Encoder:
    """Content-Encoding of a body, piece by piece, so a compressed stream stays a stream:
    gzip / deflate (zlib, flushed after every piece) or br (see brotli_raw_block)."""

    def __init__(self, kind):
        self.kind = kind
        self.started = False
        if kind != "br":
            self.z = zlib.compressobj(6, zlib.DEFLATED, 31 if kind == "gzip" else 15)

    def piece(self, data):
        if not data:
            return b""
        if self.kind == "zstd":
            return zstd_frame(data)
        if self.kind != "br":
            return self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)
        out = bytearray()
        for i in range(0, len(data), 65536):
            out += brotli_raw_block(data[i:i + 65536], not self.started)
            self.started = True
        return bytes(out)

    def finish(self):
        if self.kind == "zstd":
            return b""
        if self.kind != "br":
            return self.z.flush(zlib.Z_FINISH)
        # ISLAST = 1, ISLASTEMPTY = 1 (after the window size bit when nothing was sent)
        fields = [] if self.started else [(0, 1)]
        return _bits(fields + [(1, 1), (1, 1)])


def _bits(fields):
    """Pack (value, nbits) fields least significant bit first, padded to whole bytes."""
    acc, n = 0, 0
    for v, k in fields:
        acc |= v << n
        n += k
    return acc.to_bytes((n + 7) // 8, "little")


def brotli_raw_block(block, first):
    """A brotli uncompressed meta-block (RFC 7932 section 9.2) of 1..65536 bytes: a valid
    brotli stream needs no brotli library when it does not compress. first: prefix the
    stream header (WBITS = 16, one 0 bit)."""
    fields = [(0, 1)] if first else []
    # ISLAST = 0, MNIBBLES = 4 (code 0), MLEN - 1 in 16 bits, ISUNCOMPRESSED = 1, pad to a byte
    fields += [(0, 1), (0, 2), (len(block) - 1, 16), (1, 1)]
    return _bits(fields) + block


def message_text(content):
    """Text of a message content: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "".join(parts)
    return ""


def request_facts(body):
    """(model, last user text, rough prompt tokens, wants_stream) of a request body."""
    model, text, chars, nmsg, stream = "fake-model", "", 0, 0, False
    if isinstance(body, dict):
        if isinstance(body.get("model"), str) and body["model"]:
            model = body["model"]
        stream = body.get("stream") is True
        # Anthropic's top-level system prompt, the Responses API's instructions
        for k in ("system", "instructions"):
            if isinstance(body.get(k), str):
                chars += len(body[k])
        # Gemini's contents (parts of text, role user or model), the Responses API's input
        msgs = body.get("messages", body.get("input", [
            {"role": c.get("role"), "content": c.get("parts")} for c in body.get("contents", [])
            if isinstance(c, dict)]))
        if isinstance(msgs, list):
            for m in msgs:
                if not isinstance(m, dict):
                    continue
                t = message_text(m.get("content"))
                chars += len(t)
                nmsg += 1
                if m.get("role") == "user":
                    text = t
    return model, text, (chars + 3) // 4 + 3 * nmsg, stream


# Gemini (POST .../models/MODEL:streamGenerateContent?alt=sse): CRLF-framed chunks of
# GenerateContentResponse, Google's error shape with a RetryInfo when retry_delay= says.
GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def gemini_error_json(status, message, gstatus=None, retry_delay=None):
    err = {"code": status, "message": message,
           "status": gstatus or GEMINI_STATUS.get(status, "UNKNOWN")}
    if retry_delay:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                           "retryDelay": retry_delay}]
    return jdump({"error": err}).encode("utf-8")


def gemini_body(pieces, model, ptoks, stop, stream):
    """An answer of pieces as Gemini chunks (the last with finishReason stop and the usage),
    each `data: {...}` CRLF CRLF; or one GenerateContentResponse when not streamed."""
    def chunk(parts, finish, done):
        cand = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        usage = {"promptTokenCount": ptoks, "totalTokenCount": ptoks + done}
        if done:
            usage["candidatesTokenCount"] = done
        return {"candidates": [cand], "usageMetadata": usage, "modelVersion": model}
    if not stream:
        return Body(jdump(chunk([{"text": "".join(pieces)}], stop, len(pieces))).encode("utf-8"))
    events = []
    for i, p in enumerate(pieces or [""]):
        last = i == max(len(pieces), 1) - 1
        events.append(b"data: " + jdump(chunk([{"text": p}], stop if last else None, i + 1))
                      .encode("utf-8") + b"\r\n\r\n")
    return Body(b"".join(events), events)


# The OpenAI Responses API (POST .../v1/responses): semantic events named by type; stop= is
# "completed" (default), an incomplete reason (max_output_tokens, content_filter) or "failed".
def responses_body(pieces, model, rid, ptoks, stop, stream):
    text = "".join(pieces)
    usage = {"input_tokens": ptoks, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": len(pieces), "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": ptoks + len(pieces)}
    status = stop if stop in ("completed", "failed") else "incomplete"
    resp = {"id": rid, "object": "response", "created_at": 1741290958, "status": status,
            "model": model, "error": None, "incomplete_details": None, "store": False,
            "output": [{"id": "msg_" + rid, "type": "message", "status": "completed",
                        "role": "assistant", "content": [{"type": "output_text", "text": text,
                                                          "annotations": []}]}],
            "usage": usage}
    if status == "incomplete":
        resp["incomplete_details"] = {"reason": stop}
    if status == "failed":
        resp["error"] = {"code": "server_error", "message": "fake server: the response failed"}
    if not stream:
        return Body(jdump(resp).encode("utf-8"))
    seq = [0]

    def ev(obj):
        obj = dict(obj, sequence_number=seq[0])
        seq[0] += 1
        return b"event: " + obj["type"].encode() + b"\n" + sse_event(obj)
    start = dict(resp, status="in_progress", output=[], usage=None, incomplete_details=None,
                 error=None)
    events = [ev({"type": "response.created", "response": start})]
    for p in pieces:
        events.append(ev({"type": "response.output_text.delta", "item_id": "msg_" + rid,
                          "output_index": 0, "content_index": 0, "delta": p}))
    events.append(ev({"type": "response.output_text.done", "item_id": "msg_" + rid,
                      "output_index": 0, "content_index": 0, "text": text}))
    events.append(ev({"type": "response." + status, "response": resp}))
    return Body(b"".join(events), events)


def split_text(text, size=4):
    return [text[i:i + size] for i in range(0, len(text), size)]


def strict_refusal(body):
    """A chat-completions or Responses body for a model named o-strict*, which refuses what
    OpenAI's o-series refuse: (param, code, message) of the 400 it gets, or None. Answered
    one at a time, max_tokens first, as OpenAI does."""
    if not isinstance(body, dict) or not str(body.get("model", "")).startswith("o-strict"):
        return None
    if "max_tokens" in body:
        return ("max_tokens", "unsupported_parameter",
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.")
    if "temperature" in body and body["temperature"] != 1:
        return ("temperature", "unsupported_value",
                "Unsupported value: 'temperature' does not support %s with this model. Only "
                "the default (1) value is supported." % body["temperature"])
    return None


def error_type(status):
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    if status == 401:
        return "invalid_request_error"
    return "invalid_request_error"


def error_json(status, message, etype=None, code=None):
    return jdump({"error": {"message": message, "type": etype or error_type(status),
                            "param": None, "code": code}}).encode("utf-8")


# Anthropic Messages (POST .../v1/messages): its own stream events, message and error shapes.
ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 529: "overloaded_error"}


def anthropic_error_json(status, message, etype=None):
    etype = etype or ANTHROPIC_ERRORS.get(status, "api_error")
    return jdump({"type": "error", "error": {"type": etype, "message": message},
                  "request_id": "req_fake"}).encode("utf-8")


def anthropic_event(name, obj):
    return b"event: " + name.encode() + b"\n" + sse_event(obj)


def anthropic_body(pieces, model, mid, ptoks, stop, stream):
    """An answer of pieces in Anthropic's shape: the stream of events (message_start,
    content_block_start, ping, text_delta per piece, content_block_stop, message_delta with
    stop_reason and usage, message_stop), or the whole message."""
    usage = {"input_tokens": ptoks, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": len(pieces)}
    msg = {"id": mid, "type": "message", "role": "assistant", "model": model,
           "content": [{"type": "text", "text": "".join(pieces)}], "stop_reason": stop,
           "stop_sequence": None, "usage": usage}
    if not stream:
        return Body(jdump(msg).encode("utf-8"))
    start = dict(msg, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events = [anthropic_event("message_start", {"type": "message_start", "message": start}),
              anthropic_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                      "content_block": {"type": "text",
                                                                        "text": ""}}),
              anthropic_event("ping", {"type": "ping"})]
    for p in pieces:
        events.append(anthropic_event("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": p}}))
    events += [anthropic_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
               anthropic_event("message_delta", {
                   "type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": len(pieces)}}),
               anthropic_event("message_stop", {"type": "message_stop"})]
    return Body(b"".join(events), events)


# ---------------------------------------------------------------------------------------------
# Server

# rpm=N[,burst=B] and tpm=N[,tburst=T]: token buckets shared by all requests with the same
# figures (server-wide), B requests (T tokens) at once, refilled at N a minute. A chat request
# that finds one too low gets a 429 rate_limit_exceeded of type requests or tokens (with
# retry-after-ms: the time until it would fit); every answer carries the x-ratelimit-*-requests
# and -tokens headers of the limits in force. report=minute: the headers give the per-minute
# figures (a bucket of N refilled at N a minute, as OpenAI reports) while burst= enforces, so
# a 429 may come while the remaining count says hundreds are left.
INT_KEYS.update({"rpm", "burst", "tpm", "tburst"})
STR_KEYS.add("report")


def request_cost(body, ptoks):
    """Tokens a request counts against tpm=: its prompt (about characters/4) plus the most it
    may answer (max_tokens, max_completion_tokens or max_output_tokens), as OpenAI counts."""
    most = 0
    if isinstance(body, dict):
        for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            v = body.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                most = v
                break
    return ptoks + most


class RateBuckets:
    def __init__(self):
        self.lock = threading.Lock()
        # (kind, limit, burst) -> [enforced level, per-minute level, monotonic time of both]
        self.buckets = {}

    def _bucket(self, kind, limit, cap, now):
        rate = limit / 60.0
        b = self.buckets.setdefault((kind, limit, cap), [float(cap), float(limit), now])
        b[0] = min(float(cap), b[0] + (now - b[2]) * rate)
        b[1] = min(float(limit), b[1] + (now - b[2]) * rate)
        b[2] = now
        return b

    def take(self, spec, rec, body):
        """The spec to answer with: headers added, and a 429 error when a bucket is too low."""
        dims = []  # (kind, limit, burst, cost)
        if "rpm" in spec:
            rpm = max(1, spec["rpm"])
            dims.append(("requests", rpm, max(1, spec.get("burst", rpm)), 1))
        if "tpm" in spec:
            tpm = max(1, spec["tpm"])
            dims.append(("tokens", tpm, max(1, spec.get("tburst", tpm)),
                         request_cost(body, request_facts(body)[2])))
        minute = spec.get("report") == "minute"
        now = time.monotonic()
        with self.lock:
            bs = [self._bucket(kind, limit, cap, now) for kind, limit, cap, _ in dims]
            short = None  # the first dimension that cannot cover its cost
            for (kind, limit, cap, cost), b in zip(dims, bs):
                if b[0] < min(cost, cap) and short is None:
                    short = (kind, limit, cap, cost, b[0])
            if short is None:
                for (_, _, _, cost), b in zip(dims, bs):
                    b[0] -= cost
                    b[1] -= cost
            levels = [(b[0], b[1]) for b in bs]
        spec = dict(spec)
        hdrs = list(spec.get("headers", []))
        for (kind, limit, cap, _), (level, mlevel) in zip(dims, levels):
            rate = limit / 60.0
            shown, full = (mlevel, limit) if minute else (level, cap)
            hdrs += [["x-ratelimit-limit-" + kind, str(limit)],
                     ["x-ratelimit-remaining-" + kind, str(max(0, int(shown)))],
                     ["x-ratelimit-reset-" + kind, "%.3fs" % (max(0.0, full - shown) / rate)]]
        spec["headers"] = hdrs
        if short is not None:
            kind, limit, cap, cost, level = short
            wait_ms = int((min(cost, cap) - level) / (limit / 60.0) * 1000) + 1
            spec["headers"].append(["retry-after-ms", str(wait_ms)])
            what = "requests per min (RPM)" if kind == "requests" else "tokens per min (TPM)"
            spec.update(status=429, code="rate_limit_exceeded", type=kind,
                        error="Rate limit reached for %s: Limit %d, Used %d, Requested %d. "
                              "Please try again in %dms." % (what, limit,
                                                            limit - max(0, int(level)), cost,
                                                            wait_ms))
            rec["rate_limited"] = True
            rec["rate_limited_type"] = kind
        return spec


RATE = RateBuckets()



# ---------------------------------------------------------------------------------------------
# Batch APIs: OpenAI's Files + Batches, Anthropic's Message Batches. A batch moves one state
# per GET of it (its poll), so a test that polls every 50 ms sees the whole life in a second:
# OpenAI validating -> in_progress (bsteps polls, request_counts growing) -> finalizing ->
# completed (or bend=expired|failed); Anthropic in_progress (bsteps polls) -> ended. A cancel
# makes it cancelling (canceling) and the next poll ends it, the requests not run yet cancelled.
# A request whose last user text holds "FAIL" gets a 400 (error file / "errored").

INT_KEYS.update({"bsteps", "bmax", "bstep_ms", "bflaky", "binvalid"})
FLAG_KEYS.update({"bjunk"})
STR_KEYS.update({"bend"})
BATCH_ROUTE = re.compile(r"^(.*?)/v1/(files|batches|messages/batches)(?:/([^/]+))?"
                         r"(?:/(content|cancel|results))?$")


def multipart_fields(ctype, raw):
    """{name: (filename, bytes)} of a multipart/form-data body; None when it is not one."""
    m = re.search(r'boundary="?([^";]+)"?', ctype or "")
    if not m or not ctype.lower().startswith("multipart/form-data"):
        return None
    sep = b"--" + m.group(1).encode("latin-1")
    out = {}
    for part in raw.split(sep)[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        disp = re.search(rb'name="([^"]*)"(?:; filename="([^"]*)")?', head)
        if disp:
            out[disp.group(1).decode()] = ((disp.group(2) or b"").decode() or None, data)
    return out


class Batches:
    def __init__(self):
        self.lock = threading.Lock()
        self.files = {}
        self.batches = {}
        self.n = 0

    def next_id(self, prefix):
        self.n += 1
        return "%s%06d" % (prefix, self.n)


BATCHES = Batches()


def batch_answer(kind, body, n):
    """(status, response body dict) of one request of a batch, as the endpoint would answer."""
    model, text, ptoks, _ = request_facts(body)
    if "FAIL" in text:
        msg = "fake server: request refused (its prompt holds FAIL)"
        if kind == "anthropic":
            return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": msg}}
        return 400, json.loads(error_json(400, msg, "invalid_request_error"))
    pieces = split_text(text)
    if kind == "anthropic":
        return 200, json.loads(anthropic_body(pieces, model, "msg_b%d" % n, ptoks,
                                              "end_turn", False).data)
    if kind == "/v1/responses":
        return 200, json.loads(responses_body(pieces, model, "resp_b%d" % n, ptoks,
                                              "completed", False).data)
    usage = {"prompt_tokens": ptoks, "completion_tokens": len(pieces),
             "total_tokens": ptoks + len(pieces)}
    return 200, {"id": "chatcmpl-b%d" % n, "object": "chat.completion", "created": 1700000000,
                 "model": model, "choices": [{"index": 0, "message": {
                     "role": "assistant", "content": text}, "logprobs": None,
                     "finish_reason": "stop"}], "usage": usage}


def batch_run_some(b, upto):
    """Run the batch's requests up to index upto (exclusive), recording their results."""
    while b["ran"] < min(upto, len(b["reqs"])):
        cid, body = b["reqs"][b["ran"]]
        status, resp = batch_answer(b["kind"], body, b["ran"])
        b["results"].append((cid, status, resp))
        b["ran"] += 1


def openai_batch_view(b):
    ok = sum(1 for r in b["results"] if r[1] < 400)
    return {k: v for k, v in b.items() if k not in ("reqs", "results", "ran", "kind", "spec",
                                                    "polls", "end", "t0", "gets", "step")} | {
        "request_counts": {"total": len(b["reqs"]), "completed": ok,
                           "failed": len(b["results"]) - ok}}


def batch_junk(data, first):
    """bjunk: an output file a client must survive: the first request's line cut short, a line
    that is not JSON, lines naming ids that were never sent, blank lines, CRLF, no final
    newline."""
    lines = data.split("\n")[:-1]
    lines = [ln[:len(ln) // 2] if '"custom_id": "%s"' % first in ln or
             '"custom_id":"%s"' % first in ln else ln for ln in lines]
    junk = ["this is not json", "", jdump({"custom_id": "tt-999999", "response": None}),
            jdump({"custom_id": "someone-else", "response": {"status_code": 200, "body": {}}}),
            jdump({"custom_id": None}), "[1,2,3]"]
    return "\r\n".join(junk[:3] + lines + junk[3:])


def openai_batch_finish(b, state):
    """End b in state: write its output and error files (in an order of their own: the
    reverse of the input, as a real batch's order is not the input's)."""
    out, err = [], []
    for i, (cid, status, resp) in enumerate(reversed(b["results"])):
        line = {"id": "batch_req_%s_%d" % (b["id"], i), "custom_id": cid,
                "response": {"status_code": status, "request_id": "req_%d" % i, "body": resp},
                "error": None}
        (out if status < 400 else err).append(line)
    if state == "expired":
        for cid, _ in b["reqs"][b["ran"]:]:
            err.append({"id": "batch_req_x_" + cid, "custom_id": cid, "response": None,
                        "error": {"code": "batch_expired", "message": "This request could not "
                                  "be executed before the completion window expired."}})
    now = int(time.time())
    for name, lines in (("output_file_id", out), ("error_file_id", err)):
        if lines:
            fid = BATCHES.next_id("file-out")
            data = "".join(jdump(x) + "\n" for x in lines)
            if b["spec"].get("bjunk") and name == "output_file_id":
                data = batch_junk(data, b["reqs"][0][0])
            BATCHES.files[fid] = {"id": fid, "object": "file", "purpose": "batch_output",
                                  "filename": "batch_output.jsonl", "created_at": now,
                                  "data": data.encode()}
            BATCHES.files[fid]["bytes"] = len(BATCHES.files[fid]["data"])
            b[name] = fid
    b["status"] = state
    b[state + "_at"] = now


def openai_batch_poll(b):
    """One poll: the batch moves one step."""
    b["polls"] += 1
    s = b["status"]
    steps = max(1, b["spec"].get("bsteps", 2))
    if s == "validating":
        if b["end"] == "failed":
            b["status"], b["failed_at"] = "failed", int(time.time())
        else:
            b["status"], b["in_progress_at"] = "in_progress", int(time.time())
    elif s == "in_progress":
        b["step"] = b.get("step", 0) + 1
        total = len(b["reqs"])
        if b["end"] == "expired":
            batch_run_some(b, (total // 2) * b["step"] // steps)
            if b["step"] >= steps:
                openai_batch_finish(b, "expired")
        else:
            batch_run_some(b, total * b["step"] // steps)
            if b["step"] >= steps:
                b["status"], b["finalizing_at"] = "finalizing", int(time.time())
    elif s == "finalizing":
        openai_batch_finish(b, "completed")
    elif s == "cancelling":
        openai_batch_finish(b, "cancelled")


def anthropic_batch_view(b, base):
    counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    for r in b["results"]:
        counts[r[1] if isinstance(r[1], str) else "succeeded" if r[1] < 400 else "errored"] += 1
    counts["processing"] = len(b["reqs"]) - len(b["results"])
    return {"id": b["id"], "type": "message_batch", "processing_status": b["status"],
            "request_counts": counts, "ended_at": b.get("ended_at"),
            "created_at": b["created_at"], "expires_at": b["expires_at"],
            "cancel_initiated_at": b.get("cancel_initiated_at"), "archived_at": None,
            "results_url": base + "/v1/messages/batches/%s/results" % b["id"]
            if b["status"] == "ended" else None}


def anthropic_batch_poll(b):
    b["polls"] += 1
    steps = max(1, b["spec"].get("bsteps", 2))
    total = len(b["reqs"])
    if b["status"] == "in_progress":
        b["step"] = b.get("step", 0) + 1
        upto = total * b["step"] // steps
        if b["end"] == "expired":
            upto = (total // 2) * b["step"] // steps
        batch_run_some(b, upto)
        if b["step"] >= steps:
            for cid, _ in b["reqs"][b["ran"]:]:
                b["results"].append((cid, "expired", None))
            b["ran"] = total
            b["status"], b["ended_at"] = "ended", "2026-01-01T00:00:00Z"
    elif b["status"] == "canceling":
        for cid, _ in b["reqs"][b["ran"]:]:
            b["results"].append((cid, "canceled", None))
        b["ran"] = total
        b["status"], b["ended_at"] = "ended", "2026-01-01T00:00:00Z"


def anthropic_results(b):
    if b["spec"].get("bjunk"):
        return batch_junk(anthropic_results_text(b), b["reqs"][0][0]).encode()
    return anthropic_results_text(b).encode()


def anthropic_results_text(b):
    lines = []
    for cid, status, resp in reversed(b["results"]):
        if status in ("canceled", "expired"):
            res = {"type": status}
        elif status < 400:
            res = {"type": "succeeded", "message": resp}
        else:
            res = {"type": "errored", "error": resp}
        lines.append(jdump({"custom_id": cid, "result": res}) + "\n")
    return "".join(lines)


def handle_batch(handler, method, m, raw, rec):
    """The Files and Batches routes; returns (status, body bytes, content type)."""
    prefix, what, oid, verb = m.group(1), m.group(2), m.group(3), m.group(4)
    spec = spec_parse(prefix.strip("/"))
    rec["spec"] = spec
    base = "http://%s:%d%s" % (handler.server.server_address[0],
                               handler.server.server_address[1], prefix)
    now = int(time.time())

    def err(status, msg, etype="invalid_request_error"):
        if what == "messages/batches":
            return status, anthropic_error_json(status, msg, etype), "application/json"
        return status, error_json(status, msg, etype), "application/json"

    def ok(obj):
        return 200, jdump(obj).encode("utf-8"), "application/json"

    if "status" in spec or "error" in spec:
        return err(spec.get("status", 500), spec.get("error", "fake server error"))
    with BATCHES.lock:
        if what == "files" and method == "POST" and not oid:
            fields = multipart_fields(handler.headers.get("Content-Type"), raw)
            if fields is None or "file" not in fields or "purpose" not in fields:
                return err(400, "fake server: POST /v1/files takes multipart/form-data with "
                                "'purpose' and 'file'")
            purpose = fields["purpose"][1].decode()
            if purpose != "batch":
                return err(400, "fake server: purpose must be 'batch', not %r" % purpose)
            fid = BATCHES.next_id("file-")
            f = {"id": fid, "object": "file", "bytes": len(fields["file"][1]), "created_at": now,
                 "filename": fields["file"][0] or "upload", "purpose": purpose,
                 "data": fields["file"][1]}
            BATCHES.files[fid] = f
            rec["upload"] = {"file": fid, "bytes": f["bytes"], "filename": f["filename"],
                             "lines": f["data"].count(b"\n")}
            return ok({k: v for k, v in f.items() if k != "data"})
        if what == "files" and method == "DELETE" and oid and not verb:
            if not BATCHES.files.pop(oid, None):
                return err(404, "No such File object: %s" % oid)
            rec["file_deleted"] = oid
            return ok({"id": oid, "object": "file", "deleted": True})
        if what == "files" and method == "GET" and oid and verb == "content":
            f = BATCHES.files.get(oid)
            if not f:
                return err(404, "No such File object: %s" % oid)
            return 200, f["data"], "application/octet-stream"
        if what == "batches" and method == "POST" and not oid:
            body = json.loads(raw or b"null") if raw else None
            if not isinstance(body, dict) or body.get("completion_window") != "24h" or \
                    body.get("endpoint") not in ("/v1/chat/completions", "/v1/responses"):
                return err(400, "fake server: give input_file_id, endpoint "
                                "(/v1/chat/completions or /v1/responses), completion_window 24h")
            f = BATCHES.files.get(body.get("input_file_id"))
            if not f:
                return err(404, "No such File object: %s" % body.get("input_file_id"))
            reqs, errors, seen = [], [], set()
            for i, line in enumerate(f["data"].decode("utf-8", "replace").splitlines(), 1):
                try:
                    o = json.loads(line)
                    cid = o["custom_id"]
                    assert o["method"] == "POST" and o["url"] == body["endpoint"]
                    assert isinstance(o["body"], dict) and o["body"].get("stream") is not True
                    assert cid not in seen
                    assert spec.get("binvalid") != i
                except (ValueError, KeyError, AssertionError, TypeError):
                    errors.append({"code": "invalid_request", "line": i,
                                   "message": "line %d is not a valid batch request" % i})
                    continue
                seen.add(cid)
                reqs.append((cid, o["body"]))
            if "bmax" in spec and len(reqs) > spec["bmax"]:
                return err(400, "fake server: at most %d requests per batch" % spec["bmax"])
            bid = BATCHES.next_id("batch_")
            b = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                 "input_file_id": f["id"], "completion_window": "24h", "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": now,
                 "expires_at": now + 86400, "metadata": body.get("metadata"),
                 "reqs": reqs, "results": [], "ran": 0, "kind": body["endpoint"],
                 "spec": spec, "polls": 0, "end": spec.get("bend", "completed"),
                 "t0": time.monotonic()}
            if errors:
                b["end"] = "failed"
                b["errors"] = {"object": "list", "data": errors}
            BATCHES.batches[bid] = b
            rec["batch_created"] = bid
            rec["batch_requests"] = len(reqs)
            return ok(openai_batch_view(b))
        if what == "messages/batches" and method == "POST" and not oid:
            body = json.loads(raw) if raw else None
            try:
                reqs = [(r["custom_id"], r["params"]) for r in body["requests"]]
                assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", c) for c, _ in reqs)
                assert len(set(c for c, _ in reqs)) == len(reqs)
                assert all(isinstance(p, dict) and p.get("stream") is not True and
                           "max_tokens" in p for _, p in reqs)
            except (TypeError, KeyError, AssertionError):
                return err(400, "fake server: requests must be a list of {custom_id, params} "
                                "(unique ids, params with max_tokens, no stream)")
            if "bmax" in spec and len(reqs) > spec["bmax"]:
                return err(400, "fake server: at most %d requests per batch" % spec["bmax"])
            bid = BATCHES.next_id("msgbatch_")
            b = {"id": bid, "status": "in_progress", "reqs": reqs, "results": [], "ran": 0,
                 "kind": "anthropic", "spec": spec, "polls": 0,
                 "end": spec.get("bend", "ended"), "t0": time.monotonic(),
                 "created_at": "2026-01-01T00:00:00Z",
                 "expires_at": "2026-01-02T00:00:00Z"}
            BATCHES.batches[bid] = b
            rec["batch_created"] = bid
            rec["batch_requests"] = len(reqs)
            return ok(anthropic_batch_view(b, base))
        b = BATCHES.batches.get(oid or "")
        if not b:
            return err(404, "fake server: no batch %r" % oid, "not_found_error")
        anth = what == "messages/batches"
        if method == "GET" and not verb:
            b["gets"] = b.get("gets", 0) + 1
            if b["spec"].get("bflaky") and b["gets"] % b["spec"]["bflaky"] == 0:
                rec["flaky"] = True
                return err(503, "fake server: flaky (every %d GET of a batch)"
                           % b["spec"]["bflaky"], "overloaded_error" if anth else None)
            step = (anthropic_batch_poll if anth else openai_batch_poll)
            if b["spec"].get("bstep_ms"):  # one state per bstep_ms since it was created
                due = int((time.monotonic() - b["t0"]) * 1000) // b["spec"]["bstep_ms"]
                while b["polls"] < due:
                    step(b)
            else:
                step(b)
            rec["batch_status"] = b["status"]
            return ok(anthropic_batch_view(b, base) if anth else openai_batch_view(b))
        if method == "POST" and verb == "cancel":
            if anth and b["status"] == "in_progress":
                b["status"], b["cancel_initiated_at"] = "canceling", "2026-01-01T00:00:00Z"
            elif not anth and b["status"] in ("validating", "in_progress", "finalizing"):
                b["status"], b["cancelling_at"] = "cancelling", now
            rec["batch_cancel"] = b["id"]
            return ok(anthropic_batch_view(b, base) if anth else openai_batch_view(b))
        if anth and method == "GET" and verb == "results":
            if b["status"] != "ended":
                return err(400, "fake server: batch %s has not ended" % b["id"])
            return 200, anthropic_results(b), "application/binary"
    return err(404, "fake server: no route for %s %s" % (method, m.group(0)))


class State:
    def __init__(self, fixtures, log_path, default_spec):
        self.fixtures = fixtures
        self.default_spec = default_spec
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.nreq = 0
        self.nconn = 0
        self.queue = []

    def next_conn(self):
        with self.lock:
            self.nconn += 1
            return self.nconn

    def next_req(self):
        with self.lock:
            self.nreq += 1
            return self.nreq

    def pop_queue(self):
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def write_log(self, rec):
        if not self.log:
            return
        line = json.dumps(rec, ensure_ascii=False,
                          default=lambda o: o.decode("latin-1") if isinstance(o, bytes) else str(o))
        line += "\n"
        with self.log_lock:
            self.log.write(line)
            self.log.flush()

    def fixture(self, name):
        with open(os.path.join(self.fixtures, name), "rb") as f:
            return f.read()


REDACT = {"authorization", "api-key", "x-api-key", "x-goog-api-key", "proxy-authorization"}


class ClientGone(Exception):
    pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1"
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = IDLE_TIMEOUT_S

    def setup(self):
        super().setup()
        self.conn_id = self.server.state.next_conn()
        self.conn_req = 0

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):  # keep stderr quiet; the JSON log has everything
        pass

    # -- request plumbing ---------------------------------------------------------------------

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ClientGone()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(65537)
                        if not t or t in (b"\r\n", b"\n"):
                            break
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n > 0 else b""
        if len(data) < n:
            raise ClientGone()
        return data

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        try:
            self.conn_req += 1
            self.route(method)
        except (ClientGone, ConnectionError, TimeoutError, socket.timeout, OSError):
            self.close_connection = True

    def route(self, method):
        st = self.server.state
        n = st.next_req()
        t = time.time()
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = urllib.parse.urlsplit(self.path).path
        spec_text, rest = st.default_spec, path.strip("/")
        facts = body  # what the answer is made from (Gemini's model and stream: the URL's)
        gemini = GEMINI_ROUTE.match(path)
        if gemini:  # the model is in the path; alt=sse in the query asks for SSE
            rest = "gemini"
            if gemini.group(1).strip("/"):
                spec_text = gemini.group(1).lstrip("/")
            facts = dict(body if isinstance(body, dict) else {},
                         model=urllib.parse.unquote(gemini.group(3)),
                         stream=gemini.group(4) == "streamGenerateContent")
        for route in ROUTES if not gemini else ():
            if path.endswith(route):
                rest = route.strip("/")
                prefix = path[:-len(route)]
                if route == "/models" and prefix.endswith("/v1beta"):  # Gemini's list
                    prefix, rest = prefix[:-len("/v1beta")], "v1beta/models"
                if prefix.strip("/"):
                    spec_text = prefix[1:] if prefix.startswith("/") else prefix
                break
        rec = {"n": n, "t": t, "method": method, "path": self.path, "spec": None,
               "conn": self.conn_id, "conn_req": self.conn_req,
               "headers": self.log_headers(), "body": body, "status": None}
        bm = BATCH_ROUTE.match(path)
        if bm:
            rec["batch_api"] = True
            if body is None and raw:
                rec["body_bytes"] = len(raw)
            try:
                status, data, ctype = handle_batch(self, method, bm, raw, rec)
            except SpecError as e:
                status, data, ctype = 400, error_json(400, "fake server: " + str(e)), \
                    "application/json"
            rec["status"] = status
            st.write_log(rec)
            return self.send_simple(status, data, ctype)

        if rest == "_health" and method == "GET":
            rec["status"] = 200
            st.write_log(rec)
            return self.send_simple(200, b'{"ok":true}\n')
        if rest == "_queue":
            return self.handle_queue(method, body, rec)

        is_chat = (rest.endswith("chat/completions") or rest.endswith("messages") or
                   rest.endswith("responses") or rest == "gemini") and method == "POST"
        rec["anthropic"] = rest.endswith("messages")
        if rest == "gemini":
            rec["gemini"] = True
        if rest.endswith("responses"):
            rec["responses"] = True
        is_models = (rest.endswith("models") or rest == "api/tags") and method == "GET"
        if is_models:  # errors in the shape of the dialect asking
            rec["models_list"] = True
            rec["anthropic"] = bool(self.headers.get("anthropic-version"))
            if rest == "v1beta/models" or self.headers.get("x-goog-api-key"):
                rec["gemini"] = True
        if is_chat:
            queued = st.pop_queue()
            if queued is not None:
                spec_text = queued
                rec["queued"] = True
        try:
            spec = spec_parse(spec_text)
        except SpecError as e:
            rec["status"] = 400
            rec["spec_error"] = str(e)
            st.write_log(rec)
            return self.send_simple(400, error_json(400, "fake server: " + str(e)),
                                    "application/json")
        rec["spec"] = spec
        if spec.get("ollama") and is_models and rest != "api/tags":
            is_models = False  # an Ollama without the OpenAI-style list: 404
        if not (is_chat or is_models):
            rec["status"] = 404
            st.write_log(rec)
            return self.send_simple(404, error_json(404, "fake server: no route for %s %s"
                                                    % (method, path)), "application/json")
        self.respond(spec, facts, rec, is_chat)

    def log_headers(self):
        out = {}
        for k, v in self.headers.items():
            k = k.lower()
            if k in REDACT:
                v = "<redacted len=%d>" % len(v)
            out[k] = out[k] + ", " + v if k in out else v
        return out

    def handle_queue(self, method, body, rec):
        st = self.server.state
        if method == "DELETE":
            with st.lock:
                st.queue.clear()
            status, reply = 200, {"queued": 0}
        elif method == "POST" and isinstance(body, list) and all(isinstance(s, str)
                                                                  for s in body):
            try:
                for s in body:
                    spec_parse(s)
            except SpecError as e:
                status, reply = 400, {"error": {"message": str(e)}}
            else:
                with st.lock:
                    st.queue.extend(body)
                    status, reply = 200, {"queued": len(st.queue)}
        elif method == "GET":
            with st.lock:
                status, reply = 200, {"queue": list(st.queue)}
        else:
            status, reply = 400, {"error": {"message": "POST a JSON list of spec strings"}}
        rec["status"] = status
        st.write_log(rec)
        self.send_simple(status, jdump(reply).encode("utf-8") + b"\n", "application/json")

    def send_simple(self, status, data, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.connection.sendall(data)

    # -- scenario responses -------------------------------------------------------------------

    def respond(self, spec, body, rec, is_chat):
        st = self.server.state
        stall_s = spec.get("stall_s", DEFAULT_STALL_S)
        if spec.get("hang"):
            rec["hang"] = True
            st.write_log(rec)
            self.wait_quiet(stall_s)
            self.close_connection = True
            return

        if is_chat and ("rpm" in spec or "tpm" in spec):
            spec = RATE.take(spec, rec, body)
        model, text, ptoks, wants_stream = request_facts(body)
        if "served" in spec:  # the model the answer names (a server's alias or snapshot)
            model = spec["served"]
        if "prompt_tokens" in spec:
            ptoks = spec["prompt_tokens"]
        status = spec.get("status", 200)
        ctype = None
        stream = False
        precompressed = False  # out is already encoded as spec["encoding"] says
        if "redirect" in spec:
            status = spec.get("status", 307)
            # the bytes of the text as UTF-8 (http.server sends header values as Latin-1)
            spec.setdefault("headers", []).append(
                ["Location", spec["redirect"].encode("utf-8").decode("latin-1")])
            out = Body(b"<html><head><title>%d Redirect</title></head><body>moved to %s"
                       b"</body></html>\n" % (status, spec["redirect"].encode("utf-8")))
            ctype = "text/html"
        elif "nest" in spec and status >= 400:
            out = Body(b'{"error":{"message":"deeply nested","details":' +
                       nested_json(spec["nest"]) + b"}}")
            ctype = "application/json"
        elif "body" in spec:
            try:
                data = st.fixture(spec["body"])
            except OSError as e:
                status, data = 500, error_json(500, "fake server: %s" % e)
            ctype = "application/json"
            out = Body(data)
        elif "raw" in spec:
            out, ctype = Body(spec["raw"].encode("utf-8")), "text/plain; charset=utf-8"
        elif is_chat and not rec.get("anthropic") and not rec.get("gemini") and \
                strict_refusal(body) and status < 400:
            param, code, msg = strict_refusal(body)
            status = 400
            err = json.loads(error_json(400, msg, "invalid_request_error", code))
            err["error"]["param"] = param
            out, ctype = Body(jdump(err).encode("utf-8")), "application/json"
            rec["refused"] = param
        elif "error" in spec or status >= 400:
            msg = spec.get("error", "fake server error (HTTP %d)" % status)
            if rec.get("anthropic"):
                out = Body(anthropic_error_json(status, msg, spec.get("type")))
            elif rec.get("gemini"):
                out = Body(gemini_error_json(status, msg, spec.get("code"),
                                             spec.get("retry_delay")))
            else:
                out = Body(error_json(status, msg, spec.get("type"), spec.get("code")))
            ctype = "application/json"
        elif not is_chat:
            out = Body(models_body(spec, self.path, self.headers).encode("utf-8") + b"\n")
            ctype = "application/json"
        elif "replay" in spec:
            try:
                out = Body(st.fixture(spec["replay"]))
                ctype, stream = "text/event-stream", True
            except OSError as e:
                status = 500
                out = Body(error_json(500, "fake server: %s" % e))
                ctype = "application/json"
        elif "gen" in spec:
            out, ctype, stream = gen_body(max(0, spec["gen"]), model), "text/event-stream", True
        elif "huge_line" in spec:
            out, ctype, stream = huge_line_body(spec["huge_line"], model), "text/event-stream", True
        elif "big_delta" in spec:
            out, ctype, stream = big_delta_body(spec["big_delta"], model), "text/event-stream", True
        elif "tool_calls" in spec:
            out = tool_calls_body(spec["tool_calls"], spec.get("tool_args", 2), model)
            ctype, stream = "text/event-stream", True
        elif "content_json" in spec:
            out, ctype = raw_content_body(spec["content_json"], model), "text/event-stream"
            stream = True
        elif "nest" in spec:
            out, ctype, stream = nest_body(spec["nest"], model), "text/event-stream", True
        elif "bomb" in spec or "bomb_text" in spec:
            text_bomb = "bomb_text" in spec
            n_bomb = spec["bomb_text" if text_bomb else "bomb"]
            ctype, stream = "text/event-stream", True
            if "encoding" in spec:
                data = bomb_compressed(n_bomb, text_bomb, spec["encoding"], model)
                if data is None:
                    status, ctype, stream = 500, "application/json", False
                    out = Body(error_json(500, "fake server: the %s tool is missing" % (
                        "brotli" if spec["encoding"] == "br" else "zstd")))
                    spec = dict(spec)
                    del spec["encoding"]
                else:
                    out = Body(data, [data])  # one write: the whole bomb in one read
                    precompressed = True
            else:
                out = bomb_plain(n_bomb, text_bomb, model, spec.get("bomb_usage"))
        elif spec.get("empty_deltas"):
            out, ctype, stream = empty_deltas_body(model, stall_s), "text/event-stream", True
        else:
            if "reply" in spec:
                text = spec["reply"]
            pieces = split_text(text)
            if rec.get("anthropic"):
                wants = wants_stream and not spec.get("json")
                out = anthropic_body(pieces, model, "msg_fake%d" % rec["n"], ptoks,
                                     spec.get("stop", "end_turn"), wants)
                ctype, stream = "text/event-stream" if wants else "application/json", wants
            elif rec.get("gemini") or rec.get("responses"):
                wants = wants_stream and not spec.get("json")
                if rec.get("gemini"):
                    out = gemini_body(pieces, model, ptoks, spec.get("stop", "STOP"), wants)
                else:
                    out = responses_body(pieces, model, "resp_fake%d" % rec["n"], ptoks,
                                         spec.get("stop", "completed"), wants)
                ctype, stream = "text/event-stream" if wants else "application/json", wants
            usage = {"prompt_tokens": ptoks, "completion_tokens": len(pieces),
                     "total_tokens": ptoks + len(pieces)}
            cid = "chatcmpl-fake%d" % rec["n"]
            created = int(rec["t"])
            usage_raw = spec.get("usage_json")
            if rec.get("anthropic") or rec.get("gemini") or rec.get("responses"):
                pass
            elif spec.get("json") or not wants_stream:
                out = Body(jdump({
                    "id": cid, "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "logprobs": None, "finish_reason": "stop"}],
                    "usage": usage if usage_raw is None else USAGE_MARK}).encode("utf-8"))
                if usage_raw is not None:
                    out = Body(with_usage_raw(out.data, usage_raw))
                ctype = "application/json"
            else:
                effort = body.get("reasoning_effort") if isinstance(body, dict) else None
                out = stream_body(pieces, model, cid, created, usage, usage_raw,
                                  "thinking at %s effort" % effort if effort else None)
                ctype, stream = "text/event-stream", True

        rec["status"] = status
        st.write_log(rec)
        if spec.get("header_delay_ms"):
            if STOP.wait(spec["header_delay_ms"] / 1000.0):
                raise ClientGone()
        enc = Encoder(spec["encoding"]) if "encoding" in spec and not precompressed else None
        if enc and not stream:
            out = Body(enc.piece(out.data) + enc.finish())
            enc = None
        reason = spec.get("reason")
        self.send_response(status, reason.encode("utf-8").decode("latin-1") if reason else None)
        self.send_header("Content-Type", spec.get("ctype", ctype))
        if "encoding" in spec:
            self.send_header("Content-Encoding", spec["encoding"])
        if stream:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(len(out.data)))
        for name, value in spec.get("headers", []):
            self.send_header(name, value)
        if spec.get("big_header"):
            self.send_header("X-Big", "a" * spec["big_header"])
        if spec.get("close"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.send_body(out, spec, stream, stall_s, enc)

    def send_body(self, out, spec, chunked, stall_s, enc=None):
        sock = self.connection
        pieces = out.pieces(spec)
        limit = spec.get("drop_after", spec.get("stall_after"))
        delay = spec.get("delay_ms", 0) / 1000.0
        first_delay = spec.get("first_delay_ms", 0) / 1000.0
        keepalive = spec.get("keepalive_ms", 0) / 1000.0
        if keepalive > 0:  # the first event, then comments until stall_s
            events = out.events if out.events is not None else split_after(out.data, EVENT_END)
            pieces = events[:1]
        sent = 0
        for i, piece in enumerate(pieces):
            if i == 0 and first_delay > 0:
                if STOP.wait(first_delay):
                    raise ClientGone()
            elif i > 0 and delay > 0:
                if STOP.wait(delay):
                    raise ClientGone()
            if limit is not None and sent + len(piece) >= limit:
                piece = piece[:limit - sent]
                self.write_piece(sock, enc.piece(piece) if enc else piece, chunked)
                sent += len(piece)
                break
            self.write_piece(sock, enc.piece(piece) if enc else piece, chunked)
            sent += len(piece)
        if keepalive > 0 and limit is None:
            self.keep_alive_forever(sock, keepalive, stall_s, chunked)
            return
        if "drop_after" in spec and sent >= spec["drop_after"]:
            self.drop(sock, spec.get("rst"))
            return
        if "stall_after" in spec and sent >= spec["stall_after"]:
            self.wait_quiet(stall_s)
            self.close_connection = True
            return
        if enc:
            self.write_piece(sock, enc.finish(), chunked)
        if spec.get("linger"):  # the whole body, but the response never ends
            self.wait_quiet(stall_s)
            self.close_connection = True
            return
        if chunked:
            sock.sendall(b"0\r\n\r\n")

    def write_piece(self, sock, piece, chunked):
        if not piece:
            return
        if not chunked:
            sock.sendall(piece)
        elif len(piece) > BIG_WRITE:
            sock.sendall(b"%x\r\n" % len(piece))
            sock.sendall(piece)
            sock.sendall(b"\r\n")
        else:
            sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")

    def keep_alive_forever(self, sock, every, stall_s, chunked):
        deadline = time.monotonic() + stall_s
        while time.monotonic() < deadline:
            if self.wait_quiet(min(every, deadline - time.monotonic())) != "timeout":
                break
            if time.monotonic() < deadline:
                self.write_piece(sock, b": keep-alive\n\n", chunked)
        self.close_connection = True

    def drop(self, sock, rst):
        self.close_connection = True
        try:
            if rst:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                b"\x01\x00\x00\x00\x00\x00\x00\x00")
            else:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def wait_quiet(self, seconds):
        """Send nothing for up to seconds; returns 'timeout', 'gone' or 'stop'."""
        sock = self.connection
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            if STOP.is_set():
                return "stop"
            try:
                r, _, _ = select.select([sock], [], [], min(0.1, left))
                if r and not sock.recv(1, socket.MSG_PEEK):
                    return "gone"
            except (OSError, ValueError):
                return "gone"
            if r:
                time.sleep(min(0.05, max(0.0, left)))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout)):
            return
        super().handle_error(request, client_address)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="Fake OpenAI-compatible server for tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    ap.add_argument("--log", help="append one JSON line per request to this file")
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "fixtures"))
    ap.add_argument("--default-spec", default="", help="spec for URLs without a spec segment")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="private key of --tls-cert (PEM)")
    args = ap.parse_args(argv)
    try:
        spec_parse(args.default_spec)
    except SpecError as e:
        ap.error("--default-spec: %s" % e)

    srv = Server((args.host, args.port), Handler)
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake runs in the handler's thread (first read), so a client that rejects
        # the certificate only ends its own connection.
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    srv.state = State(os.path.abspath(args.fixtures), args.log, args.default_spec)
    port = srv.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    print("PORT %d" % port, flush=True)

    done = threading.Event()

    def on_signal(signum, frame):
        STOP.set()
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    th.start()
    while not done.wait(0.2):
        pass
    srv.shutdown()
    srv.server_close()
    if srv.state.log:
        srv.state.log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
