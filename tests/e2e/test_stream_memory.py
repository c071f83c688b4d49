#!/usr/bin/env python3
"""What a fast stream holds in memory between the network thread and the output (the stream's
peak RSS against curl): the network thread's batches never grow past 64 KiB of storage, the
queue holds no event larger than that, and it holds at most its bound (256 KiB) plus what one
push adds, unless a wait for a descheduled consumer ended by its timeout (then the bound was
left on purpose and is not checked). TOKTERM_DEBUG_QUEUE makes tokterm print what its queue
held at most. Every byte of the answer still arrives, in order. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import hashlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
BATCH = 64 * 1024   # net.c's NET_BATCH_CAP, queue.c's QUEUE_EVENT_CAP
HIGH = 256 * 1024   # queue.c's QUEUE_TEXT_HIGH
DELTAS = 200000


def gen_text(n):
    return "".join("tok%d " % i for i in range(n)).encode()


with ttlib.FakeServer() as srv:
    env = {"OPENAI_BASE_URL": srv.base("gen=%d,chunk=whole" % DELTAS), "TOKTERM_DEBUG_QUEUE": "1"}
    want = hashlib.sha256(gen_text(DELTAS) + b"\n").hexdigest()
    for i in range(3):
        rc, out, err = ttlib.run_tokterm(["--incognito", "-p", "x"], env=env, timeout=60)
        m = re.search(rb"queue: held (\d+) bytes of text in (\d+) of storage at most, (\d+) in "
                      rb"one event; (\d+) waits, (\d+) timed out", err)
        t.ok(rc == 0 and hashlib.sha256(out).hexdigest() == want,
             "run %d: exit 0, the whole answer in order (%d bytes)" % (i + 1, len(out)),
             err.decode(errors="replace")[-400:])
        t.ok(m is not None, "run %d: the queue's debug line" % (i + 1), err.decode(errors="replace"))
        if not m:
            continue
        held, storage, event, waits, timeouts = (int(x) for x in m.groups())
        t.ok(event <= BATCH, "run %d: no event's storage past %d bytes (%d)" % (i + 1, BATCH,
                                                                                 event))
        if timeouts:
            t.skip("run %d: the bound" % (i + 1), "%d of %d waits ended by their timeout (a "
                   "descheduled consumer)" % (timeouts, waits))
        else:
            t.ok(held < HIGH + BATCH and storage <= HIGH + 2 * BATCH,
                 "run %d: at most the bound plus a push held (%d bytes in %d; %d waits)"
                 % (i + 1, held, storage, waits))
sys.exit(t.done())
