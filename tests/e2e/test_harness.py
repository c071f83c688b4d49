#!/usr/bin/env python3
"""make check runs a Python test through python3 whatever its file mode: a test script
committed without its executable bit (git mode 100644) runs, or fails with its own TAP
output, instead of ERROR 126 ("Permission denied"). A probe script, mode 0644, is written
into the build tree and run by the build's own `make check-TESTS TESTS=...` (the rule
automake writes for the .py extension, Makefile.am's TEST_EXTENSIONS). Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
tokterm = os.environ.get("TOKTERM", "")
build = os.path.dirname(os.path.dirname(tokterm)) if tokterm else ""
make = shutil.which("make")
if not build or not os.path.isfile(os.path.join(build, "Makefile")) or not make:
    t.skip("a 0644 test script runs under make check", "no build tree (run it from make check)")
    sys.exit(t.done())

PROBE = "tests/harness-probe"
pdir = os.path.join(build, PROBE)
shutil.rmtree(pdir, ignore_errors=True)
os.makedirs(pdir)
# make's own variables of the outer `make check` (jobserver, -k, ...) stay out of this run
env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def run(name, body):
    """Writes PROBE/name.py (mode 0644) and runs it as the whole suite; (exit status of make,
    the probe's log, make's output)."""
    path = os.path.join(pdir, name + ".py")
    with open(path, "w") as f:
        f.write("#!/usr/bin/env python3\n" + body)
    os.chmod(path, 0o644)
    p = subprocess.run([make, "-s", "-C", build, "check-TESTS", "TESTS=%s/%s.py" % (PROBE, name),
                        "TEST_SUITE_LOG=%s/suite-%s.log" % (PROBE, name)],
                       env=env, capture_output=True, text=True, timeout=120)
    log = ""
    for cand in (name + ".log", name + ".py.log"):
        if os.path.exists(os.path.join(pdir, cand)):
            with open(os.path.join(pdir, cand)) as f:
                log = f.read()
    return p.returncode, log, p.stdout + p.stderr


rc, log, out = run("passes", 'print("1..1")\nprint("ok 1 - the probe ran")\n')
t.ok(rc == 0 and "ok 1 - the probe ran" in log,
     "a passing test script of mode 0644 runs and passes under make check",
     "make exited %d\n%s\nlog:\n%s" % (rc, out[-2000:], log[-1000:]))
t.ok(not re.search(r"^ERROR:", out, re.M) and "Permission denied" not in log,
     "no ERROR 126 (Permission denied) for a 0644 script", out[-2000:])

rc, log, out = run("fails", 'print("1..1")\nprint("not ok 1 - the probe failed on purpose")\n')
t.ok(rc != 0 and "not ok 1 - the probe failed on purpose" in log and "FAIL:" in out,
     "a failing test script of mode 0644 fails with its own message, not ERROR 126",
     "make exited %d\n%s\nlog:\n%s" % (rc, out[-2000:], log[-1000:]))

shutil.rmtree(pdir, ignore_errors=True)
sys.exit(t.done())
