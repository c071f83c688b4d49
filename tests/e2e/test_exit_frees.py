#!/usr/bin/env python3
"""End-to-end test of what a scripted `-c -p` does once its answer is out (issue 14): the
process exits right after, so the turns a resume read (thousands of texts) and the last plan are
left to the kernel instead of freed one by one (session_leave), unless a leak checker watches
(TOKTERM_FULL_CLEANUP=1 frees them). Counted with a small LD_PRELOAD library that counts free()
calls after the first write to stdout: the count must not grow with the history (1,000 vs 3,000
turns that all fit: less than 3,000 more; ~2.5 a turn when they are freed). The ASan build
leaves this test out (its runtime must come first, and it frees everything on purpose). TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

PRELOAD = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
extern void __libc_free(void *);
static unsigned long n_after;
static int printed;
void free(void *p) { if (p && printed) n_after++; __libc_free(p); }
ssize_t write(int fd, const void *b, size_t n)
{
    if (fd == 1)
        printed = 1;
    return syscall(SYS_write, fd, b, n);
}
static void report(void)
{
    char b[64];
    int n = snprintf(b, sizeof b, "\nfrees after the answer: %lu\n", n_after);
    (void)!syscall(SYS_write, 2, b, n);
}
void _exit(int code) { report(); syscall(SYS_exit_group, code); for (;;); }
__attribute__((destructor)) static void fin(void) { report(); }
"""

work = ttlib.tempdir("tt-exit-")
src, lib = os.path.join(work, "frees.c"), os.path.join(work, "frees.so")
with open(src, "w") as f:
    f.write(PRELOAD)
r = subprocess.run([os.environ.get("CC", "cc").split()[0], "-O2", "-shared", "-fPIC", "-o", lib,
                    src], capture_output=True)
t.ok(r.returncode == 0, "the counting library builds", r.stderr.decode(errors="replace"))
CONF = "context_window = 400000\ncontext_policy = truncate\n"

with ttlib.FakeServer() as srv:

    def run(home, args, env=None):
        e = {"OPENAI_BASE_URL": srv.base("reply=Fine%20thanks."), "TOKTERM_DEBUG_TOKENIZED": "1"}
        e.update(env or {})
        return ttlib.run_tokterm(["--config", os.path.join(home, "tokterm.conf"),
                                  "-m", "gpt-4o-mini"] + args, env=e, home=home, timeout=60)

    def frees(turns, env=None):
        home = ttlib.make_home()
        with open(os.path.join(home, "tokterm.conf"), "w") as f:
            f.write(CONF)
        run(home, ["-p", "Let us start."])
        ttlib.history_add_turns(ttlib.history_db(home), turns, 12, 1)
        run(home, ["-c", "-p", "count them"])
        rc, out, err = run(home, ["-c", "-p", "and now"], dict(env or {}, LD_PRELOAD=lib))
        m = re.search(rb"frees after the answer: (\d+)", err)
        how = re.search(rb"resumed (\d+) turns", err)
        t.ok(rc == 0 and m and how and int(how.group(1)) > turns,
             "%d turns%s: resumed %s, %s frees after the answer" %
             (turns, " (TOKTERM_FULL_CLEANUP=1)" if env else "", how and how.group(1).decode(),
              m and m.group(1).decode()), err.decode(errors="replace")[-1500:])
        return int(m.group(1)) if m else -1

    small, large = frees(1000), frees(3000)
    # the turns' texts and the plan alone are ~2.5 frees a turn: ~5,000 more at 3,000 turns
    t.ok(0 <= small and 0 <= large < small + 3000,
         "the work after the answer does not grow with the history (%d, %d frees)"
         % (small, large))
    full = frees(3000, {"TOKTERM_FULL_CLEANUP": "1"})
    t.ok(full > large + 2 * 3000,
         "TOKTERM_FULL_CLEANUP=1 still frees every turn (%d frees, %d without)" % (full, large))

t.done()
