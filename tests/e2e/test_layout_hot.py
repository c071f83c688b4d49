#!/usr/bin/env python3
"""What a scripted stream touches of tokterm's own binary: few of the 64 KiB blocks the kernel
maps around each page a process faults in (fault-around), since every block touched is resident
memory (the stream's peak RSS against curl, bench/stream/run.py).

- the functions a stream runs (callgrind, 2,000 deltas) lie in at most 3 blocks of the text
  (src/tokterm.ld puts them first: 2 blocks; the rest of the files they live in follows, so a
  function added there costs one block more at most; 7 blocks before the layout);
- the segments start on 64 KiB, so those blocks are the binary's own and not wherever the load
  address puts them;
- the strings and constants of the files those functions come from lie in one block, the first
  of the read-only segment (up to tt_hot_rodata_end, a symbol of src/tokterm.ld);
- the relative relocations are packed (DT_RELR): the dynamic loader reads a few hundred bytes,
  not 23 KB of .rela.dyn.
A function run and not listed in src/tokterm.ld is named in a note: run tools/hot-text.py.
Needs valgrind and binutils (readelf, nm); not in the ASan build (valgrind cannot run it).
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hotpath  # noqa: E402
import ttlib  # noqa: E402

BLOCK = 64 << 10
t = ttlib.Tap()
tokterm = ttlib.tokterm_path()
for tool in ("valgrind", "readelf", "nm"):
    if not shutil.which(tool):
        t.skip("the layout of the scripted path", tool + " not installed", tool=tool)
        sys.exit(t.done())


def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True).stdout


# The segments: (vaddr, memsz, flags, align) of each LOAD.
loads = []
for line in run("readelf", "-lW", tokterm).splitlines():
    f = line.split()
    if f[:1] == ["LOAD"]:
        loads.append((int(f[2], 16), int(f[5], 16), "".join(f[6:-1]), int(f[-1], 16)))
t.ok(loads and all(a >= BLOCK for _, _, _, a in loads), "every LOAD segment is aligned to 64 KiB",
     "\n".join("%#x +%#x %s align %#x" % s for s in loads))
text = [s for s in loads if "E" in s[2]]
t.ok(len(text) == 1, "one executable segment")
if not text:
    sys.exit(t.done())
tlo, tsz = text[0][0], text[0][1]

# Functions: address and size from the symbol table (every copy of a static name).
addr, addr_of = {}, {}
for line in run("nm", "-S", "--defined-only", tokterm).splitlines():
    f = line.split()
    if len(f) == 4 and f[2] in "Tt":
        addr.setdefault(f[3], []).append((int(f[0], 16), int(f[1], 16)))
    if len(f) >= 3:
        addr_of.setdefault(f[-1], int(f[0], 16))

cost, files = hotpath.stream_functions(tokterm, 2000)
blocks, unknown = {}, []
for fn in cost:
    places = addr.get(fn.split("'")[0])
    if not places:
        unknown.append(fn)
        continue
    for a, n in places:
        for b in range((a - (tlo & ~(BLOCK - 1))) // BLOCK,
                       (a + max(n, 1) - 1 - (tlo & ~(BLOCK - 1))) // BLOCK + 1):
            blocks.setdefault(b, []).append(fn)
t.ok(len(cost) > 100, "callgrind saw the stream's functions (%d)" % len(cost))
t.ok(len(blocks) <= 3, "the %d functions a scripted stream runs lie in %d of the text's 64 KiB "
     "blocks (at most 3)" % (len(cost), len(blocks)),
     "\n".join("block %d: %s" % (b, " ".join(sorted(set(v))[:12])) for b, v in
               sorted(blocks.items())))
unknown = [u for u in unknown if not u.startswith(("(", "0x"))]
if unknown:
    t.diag("functions not found in the symbol table: %s" % " ".join(sorted(unknown)))

listed = set()
ld = os.path.join(ttlib.srcdir(), "..", "src", "tokterm.ld")
if os.path.exists(ld):
    listed = set(re.findall(r"\*\(\.text\.(\w+) ", open(ld).read()))
missing = sorted({hotpath.base_name(f) for f in cost if "/src/" in (files.get(f) or "")} -
                 listed - {"main"})
missing = [m for m in missing if re.match(r"^[A-Za-z_]\w*$", m)]
if missing:
    t.diag("run but not listed in src/tokterm.ld (tools/hot-text.py --tokterm %s): %s"
           % (tokterm, " ".join(missing)))

# The strings and constants of the files the stream runs: from the start of the read-only
# segment to tt_hot_rodata_end (src/tokterm.ld), within one block.
ro = [s for s in loads if s[2] == "R" and s[0] > tlo]
end = addr_of.get("tt_hot_rodata_end")
t.ok(ro and end and 0 < end - ro[0][0] <= BLOCK,
     "the stream's strings and constants start the read-only segment, in one 64 KiB block",
     "read-only segment %s, tt_hot_rodata_end %s" % (ro[:1], end and hex(end)))

relr = re.search(r"\(RELR\)", run("readelf", "-dW", tokterm)) is not None
relative = run("readelf", "-rW", tokterm).count("_RELATIVE")
t.ok(relr and relative < 50, "relative relocations packed (DT_RELR; %d left in .rela.dyn)"
     % relative)
sys.exit(t.done())
