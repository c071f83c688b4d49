#!/usr/bin/env python3
"""The binary's layout: the code a scripted request runs lies in one run of the text, with no
module off that path (the store, Markdown, wrapping, highlighting, themes, batch, the native
dialects) in between. The kernel maps 64 KiB of a binary around each page a process faults
in, so code scattered over the whole text costs its whole size in resident memory (the
stream's peak RSS against curl); Makefile.am's "Link order" keeps it together. Reads the
symbol table with nm. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

# Functions every scripted request runs (setup, the request, the stream, the output), from
# both libraries, main.c's aside (main.o is linked first, apart).
HOT = ["script_run", "session_open", "session_send", "request_new", "loop_wait", "net_start",
       "net_submit", "queue_push_text", "queue_take", "conv_push", "conf_load", "cli_parse",
       "context_plan", "ratelimit_feed", "dialect_find", "api_stream_event",
       "api_stream_sse_run", "sse_feed", "jscan_string", "buf_append", "xmalloc", "util_now",
       "tools_load", "tokenizer_model_info", "ansi_md_free"]
# Modules a scripted --incognito request never enters: their public functions' prefixes.
COLD = re.compile(r"^(store_|markdown_|wrap_|hl_|theme_|batch_|gemini_|responses_|"
                  r"anthropic_)")

nm = shutil.which("nm")
if not nm:
    t.skip("the layout", "nm (binutils) not installed", tool="nm")
    sys.exit(t.done())

out = subprocess.run([nm, "--defined-only", ttlib.tokterm_path()], capture_output=True,
                     text=True).stdout
addr = {}
for line in out.splitlines():
    f = line.split()
    if len(f) == 3 and f[1] in "Tt":
        addr.setdefault(f[2], int(f[0], 16))
missing = [h for h in HOT if h not in addr]
t.ok(not missing, "the scripted path's functions are in the symbol table", " ".join(missing))
hot = [addr[h] for h in HOT if h in addr]
lo, hi = min(hot), max(hot)
between = sorted((a, s) for s, a in addr.items() if COLD.match(s) and lo <= a <= hi)
t.ok(not between, "no function off the scripted path between its first and last "
     "(%#x-%#x, %d KiB)" % (lo, hi, (hi - lo) >> 10),
     ", ".join("%s %#x" % (s, a) for a, s in between[:8]))
sys.exit(t.done())
