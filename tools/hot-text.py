#!/usr/bin/env python3
"""Write src/tokterm.ld: the order in which the linker lays out the code and the read-only data
a scripted stream uses, at the start of tokterm's text and read-only segments.

The kernel maps a binary's pages in blocks around each page a process touches (64 KiB of
fault-around, or the whole large folio of the page cache), so code spread over the whole text
costs its whole size in resident memory: the stream's peak RSS against curl. Compiled with
-ffunction-sections, every function is a section of its own (.text.NAME); the script puts the
functions a scripted stream runs (read with callgrind: tests/e2e/hotpath.py) first, most
instructions first, then the rest of the files the stream lives in (so that a function added
there stays near), then the string and constant sections of every file those functions come
from. tests/e2e/test_layout_hot.py checks the result.

usage: tools/hot-text.py --tokterm BUILD/src/tokterm [--deltas 2000,200000] [--out src/tokterm.ld]

Run it on a build of the current code after the stream's path changed (the test says when);
the list is a plain text file, reviewed like code."""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
sys.dont_write_bytecode = True
import hotpath  # noqa: E402

# Files wholly on the stream's path (the network thread, the wire format, the buffers): all of
# their code goes next to the functions listed, so that a new function there lands near them.
WHOLE = ["net/net.c", "net/queue.c", "net/curl_dl.c", "proto/sse.c", "proto/jscan.c",
         "proto/api.c", "proto/dialect.c", "core/loop.c", "core/request.c", "base/buf.c",
         "base/xmalloc.c", "base/util.c"]


def archives():
    """{src-relative source path: member pattern} from Makefile.am's library lists."""
    text = open(os.path.join(TOP, "Makefile.am"), encoding="utf-8").read()
    text = text.replace("\\\n", " ")
    where = {}
    for m in re.finditer(r"^src_(libttcore|libttapp)_a_SOURCES\s*\+?=(.*)$", text, re.M):
        for f in m.group(2).split():
            if f.endswith(".c"):
                where[f[len("src/"):]] = "*%s.a:%s" % (m.group(1),
                                                       os.path.basename(f)[:-2] + ".o")
    where["main.c"] = "*tokterm-main.o"
    return where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", required=True)
    ap.add_argument("--deltas", default="2000,200000")
    ap.add_argument("--out", default=os.path.join(TOP, "src", "tokterm.ld"))
    a = ap.parse_args()
    cost, files = {}, {}
    for n in a.deltas.split(","):
        c, f = hotpath.stream_functions(a.tokterm, int(n))
        for k, v in c.items():
            cost[k] = cost.get(k, 0) + v
        files.update(f)
    where = archives()
    names, objs = [], []
    def rel_of(fn):
        src = files.get(fn) or ""
        i = src.rfind("/src/")
        return src[i + 5:] if i >= 0 else ""

    # by file, then by name: the order of the source, and a list that changes only where the
    # code does (the 64 KiB blocks count, not the order within them)
    for fn in sorted(cost, key=lambda k: (rel_of(k), hotpath.base_name(k))):
        rel = rel_of(fn)
        if rel in where and where[rel] not in objs:
            objs.append(where[rel])
        b = hotpath.base_name(fn)
        if rel and re.match(r"^[A-Za-z_]\w*$", b) and b not in names:
            names.append(b)
    for rel in WHOLE:
        if where.get(rel) and where[rel] not in objs:
            objs.append(where[rel])
    out = ["/* tokterm's layout: what a scripted stream runs first in the text, its strings and",
           " * constants first in the read-only data. Written by tools/hot-text.py (callgrind of",
           " * `tokterm --incognito -p x`, streams of %s deltas): %d functions of %d files."
           % (a.deltas.replace(",", " and "), len(names), len(objs)),
           " * Passed to the linker with -T next to its default script (INSERT), for src/tokterm",
           " * only; the sections are -ffunction-sections' (configure.ac). The .text here ends",
           " * with what the default script's puts in it, which is left empty and dropped: one",
           " * .text, as tools expect (valgrind reads no symbol of a second code section). */",
           "SECTIONS", "{", "  .text :", "  {",
           "    /* start-up: _start, the C runtime's init, __builtin_cpu_supports (base/cpu.h where",
           "     * the C library does not say), main and the constructors */",
           "    *crt1.o(.text .text.*)",
           "    *crtbegin*.o(.text .text.*)",
           "    *libgcc.a:cpuinfo.o(.text .text.*)",
           "    *(.text.startup .text.startup.*)",
           "    /* the functions the stream ran, by file */"]
    out += ["    *(.text.%s .text.%s.*)" % (n, n) for n in names]
    out += ["    /* the rest of the files the stream lives in: a function added there lands here */"]
    out += ["    %s(.text .text.*)" % where[rel] for rel in WHOLE if rel in where]
    out += ["    HIDDEN (tt_hot_text_end = .);",
            "    /* the default script's .text */",
            "    *(.text.unlikely .text.*_unlikely .text.unlikely.*)",
            "    *(.text.exit .text.exit.*)",
            "    *(.text.startup .text.startup.*)",
            "    *(.text.hot .text.hot.*)",
            "    *(SORT(.text.sorted.*))",
            "    *(.text .stub .text.* .gnu.linkonce.t.*)",
            "    *(.gnu.warning)",
            "  }", "}", "INSERT BEFORE .text;", "",
            "/* An output section of its own, on a page of its own (the default script starts",
            " * the read-only segment with an alignment that comes after this): the strings and",
            " * constants of the files the functions above come from. Not in .rodata, where the",
            " * linker would merge a string into the tail of another from any file. */",
            "SECTIONS", "{", "  .rodata.tt_hot ALIGN(CONSTANT (MAXPAGESIZE)) :", "  {"]
    out += ["    %s(.rodata .rodata.*)" % o for o in objs]
    out += ["    *libgcc.a:cpuinfo.o(.rodata .rodata.*)",
            "    HIDDEN (tt_hot_rodata_end = .);",
            "  }", "}", "INSERT BEFORE .rodata;", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(out))
    print("%s: %d functions, %d files" % (a.out, len(names), len(objs)))


if __name__ == "__main__":
    main()
