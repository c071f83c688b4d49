#!/usr/bin/env python3
"""How SQLite reaches tokterm (configure --with-sqlite): linked in (the default, Debian's
libsqlite3.a) or loaded with dlopen() when the store first opens (shared). Either way every
call goes through the table sqlite_dl.c fills (store/sqlite_dl.h), so the shared build links
what the default one does: only sqlite_dl.o names SQLite's functions. What `--version` says
is what the process does: "(linked in)" exactly when no libsqlite3 is loaded (ld.so's
LD_DEBUG=files). A run that never opens the store (--incognito) loads none in either build,
and no libm: the SQLite linked in reaches libm through a loader of its own (ld --wrap), so a
one-shot that saves loads none either. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

src = os.path.dirname(ttlib.tokterm_path())
archives = [os.path.join(src, a) for a in ("libttcore.a", "libttapp.a")]
nm = shutil.which("nm")
t.ok(nm is not None and all(os.path.exists(a) for a in archives),
     "nm and the build's archives are there", "nm %s, %s" % (nm, archives))
naming = {}
if nm:
    out = subprocess.run([nm, "-A", "-u"] + archives, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
    for line in out.splitlines():
        m = re.match(r"(\S+):(\S+\.o):\s+U (sqlite3_\w+)$", line.strip())
        if m:
            naming.setdefault(m.group(2), set()).add(m.group(3))


def loaded(args, env=None, lib=b"libsqlite3"):
    """(exit code, stdout, whether ld.so loaded a library whose name starts with lib) of one
    run."""
    e = {"LD_DEBUG": "files"}
    e.update(env or {})
    rc, out, err = ttlib.run_tokterm(args, env=e)
    libs = re.findall(rb"file=(\S+) \[\d+\];\s+(?:needed|dynamically loaded) by (\S+)", err)
    # (the sanitizer build's runtimes need libm themselves)
    return rc, out, any(os.path.basename(f).startswith(lib) and
                        not re.match(rb"lib[a-z]*san\.so", os.path.basename(by))
                        for f, by in libs)


rc, out, sqlite_loaded = loaded(["--version"])
m = re.search(rb"SQLite (\d+\.\d+\.\d+)( \(linked in\))?", out)
t.ok(rc == 0 and m is not None, "--version names SQLite's version", out[:300])
linked = bool(m and m.group(2))
t.ok(m is not None and linked != sqlite_loaded,
     "--version says linked in exactly when no libsqlite3 is loaded",
     "says %s, libsqlite3 loaded: %s" % ("linked in" if linked else "shared", sqlite_loaded))
t.ok(("sqlite_dl.o" in naming) == linked,
     "sqlite_dl.o names SQLite's functions (the table's entries) exactly when SQLite is linked "
     "in (shared: dlsym finds them)", repr(sorted(naming)))
others = {o: sorted(f)[:5] for o, f in naming.items() if o != "sqlite_dl.o"}
t.ok(not others, "no other object calls SQLite but through the table (a function missing "
     "from SQLITE_DL_FUNCS would not link in the shared build)", repr(others))

with ttlib.FakeServer() as srv:
    rc, out, sqlite_loaded = loaded(["--incognito", "-p", "hi"],
                                    {"OPENAI_BASE_URL": srv.base("reply=Hello.")})
    t.ok(rc == 0 and out.strip() == b"Hello." and not sqlite_loaded,
         "--incognito -p answers without loading a libsqlite3",
         "rc %d, %r, loaded %s" % (rc, out[:100], sqlite_loaded))
    # SQLite's libm calls are sent to a loader of libm (store/sqlite_dl.c); tokterm itself
    # calls none: no run maps libm until SQL's math does
    rc, out, libm_loaded = loaded(["--incognito", "-p", "hi"],
                                  {"OPENAI_BASE_URL": srv.base("reply=Hello.")}, b"libm.")
    t.ok(rc == 0 and not libm_loaded, "--incognito -p loads no libm",
         "rc %d, libm loaded %s" % (rc, libm_loaded))
    rc, out, libm_loaded = loaded(["-p", "hi"], {"OPENAI_BASE_URL": srv.base("reply=Hello.")},
                                  b"libm.")
    t.ok(rc == 0 and out.strip() == b"Hello." and (not libm_loaded or not linked),
         "a one-shot that saves loads no libm either (SQLite linked in; its shared library "
         "brings libm along)", "rc %d, libm loaded %s" % (rc, libm_loaded))
sys.exit(t.done())
