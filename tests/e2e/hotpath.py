"""The functions of tokterm's own text that a scripted stream runs, read with callgrind
(valgrind): shared by tests/e2e/test_layout_hot.py (they must lie together) and
tools/hot-text.py (which writes src/tokterm.ld, the linker's order of them).

    cost, files = hotpath.stream_functions(tokterm, deltas=2000)   # {name: instructions}, {name: file}

A name is the symbol callgrind reports, with GCC's clone suffixes (".constprop.0", ".part.0",
".isra.0", ".cold") cut off by base_name()."""

import os
import re
import subprocess
import tempfile

import ttlib

BODY = '{"model":"bench","messages":[{"role":"user","content":"x"}],"stream":true}'
CLONE = re.compile(r"\.(constprop|part|isra|cold|lto_priv)(\.\d+)*")


def base_name(fn):
    """foo.part.0.constprop.0 -> foo (the section -ffunction-sections gives is .text.foo...)."""
    return CLONE.sub("", fn.split("'")[0])


def parse_callgrind(path, obj):
    """{function: self instructions} of the functions of the object file obj (a real path), and
    {function: its source file}."""
    obtab, fntab, fltab, cost, files = {}, {}, {}, {}, {}
    cur_ob = cur_fn = cur_fl = None
    skip = False

    def name(s, table):
        m = re.match(r"\((\d+)\)(?: (.*))?", s)
        if not m:
            return s
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table[m.group(1)]

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                cur_ob = name(line[3:], obtab)
            elif line.startswith("fl="):
                cur_fl = name(line[3:], fltab)
            elif line.startswith(("fi=", "fe=")):
                name(line[3:], fltab)
            elif line.startswith("fn="):
                cur_fn = name(line[3:], fntab)
                files.setdefault(cur_fn, cur_fl)
            elif line.startswith(("cfi=", "cfl=")):
                name(line[4:], fltab)
            elif line.startswith("cob="):
                name(line[4:], obtab)
            elif line.startswith("cfn="):
                name(line[4:], fntab)
            elif line.startswith("calls="):
                skip = True  # the next cost line is the call's inclusive cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and cur_ob and os.path.realpath(cur_ob) == obj:
                    cost[cur_fn] = cost.get(cur_fn, 0) + int(parts[1])
    return cost, {k: files.get(k) for k in cost}


def stream_functions(tokterm, deltas=2000, timeout=600):
    """Run `tokterm --incognito -p x` under callgrind against the fake server's stream of
    `deltas` small deltas; ({function: self instructions}, {function: source file}) of
    tokterm's own code."""
    tokterm = os.path.realpath(tokterm)
    out = tempfile.mktemp(prefix="tt-callgrind-", dir=ttlib.tempdir("tt-hot-"))
    with ttlib.FakeServer() as srv:
        url = srv.base("gen=%d,chunk=whole" % deltas)
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": url})
        r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                            tokterm, "--incognito", "-p", "x"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError("callgrind run failed (%d): %s" % (r.returncode,
                                                               r.stderr.decode()[-400:]))
    return parse_callgrind(out, tokterm)
