#!/usr/bin/env python3
"""tests/check-all.sh tells the truth: its last line ("N passed, N failed") and its exit
status, when a stage dies, a tool is missing or CI asks for every tool. check-all.sh runs here
in a scratch tree (not a git checkout) with stand-ins for configure, make, valgrind and clang
on a PATH of its own, so each scenario takes well under a second. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
SCRIPT = os.path.join(ttlib.srcdir(), "check-all.sh")
# The programs check-all.sh requires, read from its own list so the two cannot drift apart
# (redis-server joined that list and this copy was forgotten once).
with open(SCRIPT) as _f:
    _loop = [ln for ln in _f if ln.startswith("for tool in ")]
TOOLS = tuple(_loop[0].split(" in ", 1)[1].split(";")[0].split()) if _loop else ()
if "python3" not in TOOLS or "tmux" not in TOOLS:
    raise SystemExit("check-all.sh: the 'for tool in ...' list of required programs not found")
UTILS = ("sh", "sed", "grep", "tail", "head", "cat", "tr", "find", "mkdir", "rm", "nproc",
         "dirname", "cmp", "touch", "mv", "env", "ls", "chmod")

SUMMARY = """\
============================================================================
Testsuite summary for tokterm 0.0
============================================================================
# TOTAL: {total}
# PASS:  {passed}
# SKIP:  {skip}
# XFAIL: 0
# FAIL:  {failed}
# XPASS: 0
# ERROR: 0
============================================================================
"""

# make's stand-in: what `make -s -jN check` and `make fuzz-smoke` print, by scenario ($SCEN).
FAKE_MAKE = r"""#!/bin/sh
case " $* " in
*" check "*)
    case $SCEN in
    die) echo "make[1]: *** [Makefile:2041: tests/unit/test_utf8] Error 1"; exit 2 ;;
    late) printf '%s' "$SUMMARY_OK"; echo "make[1]: *** [Makefile:99: check-local] Error 1"
          exit 2 ;;
    skip) printf '%s' "$SUMMARY_SKIP"; exit 0 ;;
    *) printf '%s' "$SUMMARY_OK"; exit 0 ;;
    esac ;;
*" fuzz-smoke "*)
    case $SCEN in
    fuzzdie) echo "PASS: fuzz_sse"; echo "make: *** [fuzz-smoke] Error 1"; exit 2 ;;
    *) echo "PASS: fuzz_sse"; echo "PASS: fuzz_api"; exit 0 ;;
    esac ;;
esac
mkdir -p src && printf '#!/bin/sh\n' >src/tokterm && chmod +x src/tokterm # "the build"
exit 0
"""

FAKE_RUNPY = r"""import os, sys
if os.environ.get("SCEN") == "vgdie":
    print("ok 1 - scripted run")
    print("Traceback (most recent call last): ...")
    sys.exit(1)
print("ok 1 - scripted run")
print("ok 2 - subcommands")
print("1..2")
"""


def scratch(missing=()):
    """A scratch top directory with check-all.sh, a stand-in configure and valgrind/run.py,
    and a bin directory: the utilities, stand-ins for the tools (but `missing`) and make."""
    top = ttlib.tempdir("tt-checkall-")
    os.makedirs(os.path.join(top, "tests", "valgrind"))
    shutil.copy(SCRIPT, os.path.join(top, "tests", "check-all.sh"))
    with open(os.path.join(top, "configure"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(top, "configure"), 0o755)
    with open(os.path.join(top, "tests", "valgrind", "run.py"), "w") as f:
        f.write(FAKE_RUNPY)
    bindir = os.path.join(top, "bin")
    os.makedirs(bindir)
    for u in UTILS:
        p = shutil.which(u)
        if p:
            os.symlink(p, os.path.join(bindir, u))
    for tool in TOOLS:
        if tool in missing:
            continue
        if tool == "python3":
            os.symlink(sys.executable, os.path.join(bindir, tool))
            continue
        with open(os.path.join(bindir, tool), "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(bindir, tool), 0o755)
    with open(os.path.join(bindir, "make"), "w") as f:
        f.write(FAKE_MAKE)
    os.chmod(os.path.join(bindir, "make"), 0o755)
    return top, bindir


def run(scen, ci, missing=()):
    top, bindir = scratch(missing)
    # /usr/sbin and /sbin: check-all.sh looks there too (nginx); keep them out of reach
    env = {"PATH": bindir, "SCEN": scen, "HOME": top,
           "SUMMARY_OK": SUMMARY.format(total=5, passed=5, skip=0, failed=0),
           "SUMMARY_SKIP": SUMMARY.format(total=5, passed=4, skip=1, failed=0)}
    if ci:
        env["CI"] = "true"
    sbin = [d for d in ("/usr/sbin", "/sbin") if os.path.isdir(d)]
    # the script appends /usr/sbin:/sbin for nginx: a missing nginx must really be missing
    if "nginx" in missing and any(os.path.exists(os.path.join(d, "nginx")) for d in sbin):
        return None
    r = subprocess.run([os.path.join(bindir, "sh"), os.path.join(top, "tests", "check-all.sh")],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       cwd=top)
    out = r.stdout.decode("utf-8", "replace")
    last = out.rstrip("\n").split("\n")[-1]
    return r.returncode, last, out


def failed_of(last):
    """N of the last line "P passed, N failed", or None when it is not that line."""
    parts = last.split()
    if len(parts) == 4 and parts[1] == "passed," and parts[3] == "failed":
        try:
            return int(parts[2])
        except ValueError:
            return None
    return None


def honest(scen, ci, want_fail, name, missing=()):
    got = run(scen, ci, missing)
    if got is None:
        t.skip(name, "nginx in /usr/sbin cannot be hidden from check-all.sh")
        return
    rc, last, out = got
    n = failed_of(last)
    if want_fail:
        t.ok(rc != 0 and n is not None and n > 0, name + ": exit 1 and a failure counted",
             "exit %d, last line %r\n%s" % (rc, last, out[-1500:]))
    else:
        t.ok(rc == 0 and n == 0, name + ": exit 0, 0 failed",
             "exit %d, last line %r\n%s" % (rc, last, out[-1500:]))


if not os.path.exists(SCRIPT):
    t.bail("no %s" % SCRIPT)

honest("ok", False, False, "everything passes")
honest("ok", True, False, "everything passes under CI")
honest("die", False, True, "make check dies before its summary")
honest("die", True, True, "make check dies before its summary, under CI")
honest("late", False, True, "make check fails after a clean summary")
honest("skip", False, False, "a skipped test outside CI")
honest("skip", True, True, "a skipped test under CI")
honest("vgdie", False, True, "the valgrind stage dies")
honest("fuzzdie", False, True, "fuzz-smoke fails without a FAIL line")
for tool in ("zsh", "tmux", "openssl", "curl", "valgrind"):
    honest("ok", True, True, "under CI, %s missing" % tool, missing=(tool,))
honest("ok", False, False, "outside CI, zsh missing (listed, not a failure)", missing=("zsh",))
got = run("ok", False, ("zsh",))
t.ok(got is not None and "missing programs: zsh" in got[2], "outside CI a missing tool is named",
     got[2][-800:] if got else "")
got = run("ok", False, ("clang",))
t.ok(got is not None and got[0] != 0 and (failed_of(got[1]) or 0) > 0,
     "clang missing: the fuzz stage fails (no fuzzing is no pass)", got[2][-800:] if got else "")
sys.exit(t.done())
