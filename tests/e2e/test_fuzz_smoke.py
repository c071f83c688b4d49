#!/usr/bin/env python3
"""tests/fuzz/smoke.sh runs every dialect's decoder (fuzz_dialect) in both stages: the usual
fuzz-smoke with the captured streams of tests/fixtures as seeds (one capture or more per
dialect), and the size-stress stage (FUZZ_SIZE=1) with a generated 16 MiB stream of each
dialect. Runs smoke.sh with stand-in fuzz binaries that record their arguments (no clang
needed; well under a second). Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
TOP = os.path.dirname(ttlib.srcdir())
SMOKE = os.path.join(ttlib.srcdir(), "fuzz", "smoke.sh")
NAMES = ["sse", "api", "dialect", "tokenizer"]
FAKE = """#!/bin/sh
printf '%s\\n' "$@" >"$0.args"
echo 'stat::number_of_executed_units: 1'
"""


def smoke(size, max_mb):
    work = ttlib.tempdir("tt-fuzz-smoke-")
    os.makedirs(os.path.join(work, "tests", "fuzz"))
    for n in NAMES:
        p = os.path.join(work, "tests", "fuzz", "fuzz_" + n)
        with open(p, "w") as f:
            f.write(FAKE)
        os.chmod(p, 0o755)
    env = dict(os.environ, FUZZ_SECONDS="1", FUZZ_JOBS="1", FUZZ_SIZE=size,
               FUZZ_MAX_MB=str(max_mb))
    r = subprocess.run(["sh", SMOKE, TOP] + NAMES, cwd=work, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    args = {}
    for n in NAMES:
        p = os.path.join(work, "tests", "fuzz", "fuzz_" + n + ".args")
        args[n] = open(p).read().split("\n") if os.path.exists(p) else None
    return r.returncode, r.stdout.decode(errors="replace"), args, work


def seeds_of(a):
    return [x for x in a if not x.startswith("-")]


# --- the usual stage: fuzz_dialect runs, seeded with every dialect's captured streams -------
rc, out, args, work = smoke("0", 16)
t.eq(rc, 0, "fuzz-smoke: every stand-in passes")
t.ok("PASS: fuzz_dialect" in out, "fuzz-smoke: fuzz_dialect runs", out)
a = args["dialect"] or []
fixtures = os.path.join(TOP, "tests", "fixtures")
t.ok(fixtures in seeds_of(a), "fuzz_dialect: seeded with tests/fixtures", a)
caps = os.listdir(fixtures)
for d in ("anthropic", "gemini", "responses"):
    t.ok(any(c.startswith(d + "_") and c.endswith(".sse") for c in caps),
         "tests/fixtures has a captured %s stream" % d)
corpus = os.path.join(TOP, "tests", "fuzz", "corpus", "dialect")
t.ok(corpus in seeds_of(a), "fuzz_dialect: and its own corpus", a)
for d in ("anthropic", "gemini", "responses"):
    t.ok(any(c.startswith(d + "-") for c in os.listdir(corpus)),
         "tests/fuzz/corpus/dialect has %s bodies" % d, os.listdir(corpus))
t.ok("-dict=" + os.path.join(TOP, "tests", "fuzz", "dialect.dict") in a,
     "fuzz_dialect: with its dictionary", a)

# --- size stress: fuzz_dialect runs too, from a big stream of each dialect ------------------
rc, out, args, work = smoke("1", 1)
t.eq(rc, 0, "size stress: every stand-in passes")
t.ok("PASS: fuzz_dialect" in out and "size-stress" in out, "size stress: fuzz_dialect runs", out)
a = args["dialect"] or []
t.ok("-max_len=%d" % 1048576 in a and "-len_control=0" in a,
     "size stress: fuzz_dialect takes inputs of FUZZ_MAX_MB", a)
sdir = os.path.join(work, "fuzz-size", "dialect")
t.ok("fuzz-size/dialect" in seeds_of(a), "size stress: fuzz_dialect starts from fuzz-size/dialect",
     a)
made = sorted(x for x in os.listdir(sdir) if not x.startswith(".")) if os.path.isdir(sdir) else []
for d in ("anthropic", "gemini", "responses"):
    big = [x for x in made if x.startswith(d)]
    t.ok(big and all(os.path.getsize(os.path.join(sdir, x)) >= 1048576 - 64 for x in big),
         "size stress: a generated %s stream of FUZZ_MAX_MB" % d, made)
t.ok(fixtures in seeds_of(a), "size stress: fuzz_dialect also seeded with tests/fixtures", a)

sys.exit(t.done())
