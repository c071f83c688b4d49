#!/usr/bin/env python3
"""What a scripted `-c -p` of a long conversation costs in fresh memory (issue 14). The resume
builds its rows, turns, plan and body once (thousands of small blocks and arrays that double)
and exits; each fresh 4 KiB page is a fault, ~11 us on the VMs tokterm is measured on
(docs/PERFORMANCE.md). The working set comes from one heap, grown 8 MiB at a time and advised
for transparent huge pages, and reused as it is freed (xmalloc_working_set), so the minor
faults of the run (os.wait4's ru_minflt) hardly grow with the history: 2,800 more turns that
all fit add fewer than 600 faults (~1,100-1,600 before). Without THP (the system's setting
"never") the reuse alone: fewer than 1,100 (~1,250 before). The request is the one the
full load sends (TOKTERM_FULL_RESUME=1), with THP off for the process too. The ASan build
leaves this test out (its allocator is not glibc's). TAP."""

import sys

sys.dont_write_bytecode = True

import ctypes  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
CONF = "context_window = 400000\ncontext_policy = truncate\n"
PR_SET_THP_DISABLE = 41


def no_thp():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)


with ttlib.FakeServer() as srv:
    spec = "reply=Fine%20thanks."

    def make(turns):
        home = ttlib.make_home()
        ttlib.write_config(home, CONF)
        rc, _, err = ttlib.run_tokterm(["-m", "gpt-4o-mini", "-p", "Let us start."],
                                       env={"OPENAI_BASE_URL": srv.base(spec)}, home=home)
        t.ok(rc == 0, "the conversation starts", err.decode(errors="replace")[-800:])
        ttlib.history_add_turns(ttlib.history_db(home), turns, 12, 1)
        # the first resume counts the rows and packs them: not what is measured
        rc, _, err = ttlib.run_tokterm(["-m", "gpt-4o-mini", "-c", "-p", "count them"],
                                       env={"OPENAI_BASE_URL": srv.base(spec)}, home=home,
                                       timeout=120)
        t.ok(rc == 0, "%d turns: the first resume" % turns, err.decode(errors="replace")[-800:])
        return home

    def resume(home, prompt, what, pre=None, env=None):
        """One `-c -p` run in home; its rusage."""
        e = ttlib.clean_env(home, dict({"OPENAI_BASE_URL": srv.base(spec)}, **(env or {})))
        p = subprocess.Popen([ttlib.tokterm_path(), "-m", "gpt-4o-mini", "-c", "-p", prompt],
                             env=e, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=pre)
        status, ru = ttlib.wait_rusage(p, 120)
        t.ok(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, what)
        return ru

    def faults(home):
        """The least minor faults of three `-c -p` runs (each adds a turn)."""
        return min(resume(home, "and now", "a resume answers").ru_minflt for _ in range(3))

    small, large = make(200), make(3000)
    mode = ttlib.thp_mode()
    grow = faults(large) - faults(small)
    if mode != "never":
        t.ok(grow < 600, "THP %s: 2,800 more turns add %d minor faults (fewer than 600)"
             % (mode, grow))
    else:
        t.ok(grow < 1100, "THP never: 2,800 more turns add %d minor faults (fewer than 1,100)"
             % grow)

    # the same request as the full load's, with huge pages and without, each on a copy
    ttlib.wait_checkpoints(ttlib.history_db(large))
    n0 = len(srv.requests())
    for k, (pre, env) in enumerate(((None, None), (no_thp, None),
                                    (None, {"TOKTERM_FULL_RESUME": "1"}))):
        home = os.path.join(ttlib.tempdir("tt-faults-"), "home%d" % k)
        shutil.copytree(large, home)
        resume(home, "the same question", "a resume of the same turn", pre, env)
    bodies = [r["body"] for r in srv.requests()[n0:]]
    t.ok(len(bodies) == 3 and bodies[0] == bodies[2] and bodies[1] == bodies[2],
         "the requests are the full load's (%d requests, %s messages)"
         % (len(bodies), bodies and len(bodies[-1].get("messages", []))))

t.done()
