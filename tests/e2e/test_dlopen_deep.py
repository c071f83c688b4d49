#!/usr/bin/env python3
"""The libraries tokterm loads on first use (libcurl; SQLite when it is not linked in:
configure --with-sqlite=shared) are bound with RTLD_DEEPBIND:
their own symbols are looked up in themselves first (util_dlopen_deep), which is most of their
load's instructions. Not when something is preloaded (LD_PRELOAD): an interposer (an
allocator, a fault injector) must keep reaching the libraries' calls, so they are looked up
in the program's scope first as before; valgrind's own preloads (vgpreload_*) do not count.
Seen through ld.so's LD_DEBUG=scopes: the first scope of a library loaded with DEEPBIND is its
own. Left out of the ASan build (its runtime must come first among the preloads, and the
sanitizer builds never use DEEPBIND). Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def first_scopes(err):
    """{library basename: the first object of its scope 0} from LD_DEBUG=scopes output."""
    out, lib = {}, None
    for line in err.decode("utf-8", "replace").splitlines():
        m = re.search(r"object=(\S+) \[\d+\]", line)
        if m:
            lib = os.path.basename(m.group(1))
            continue
        m = re.search(r"scope 0: (\S+)", line)
        if m and lib:
            out.setdefault(lib, os.path.basename(m.group(1)))
            lib = None
    return out


def libm_path():
    """The C library's libm as this Python process maps it (glibc's, present everywhere)."""
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if re.search(r"/libm\.so\.6$", p) or re.search(r"/libm-[\d.]+\.so$", p):
                return os.path.realpath(p)
    return "libm.so.6"


exe = os.path.basename(ttlib.tokterm_path())
# A machine-wide preload (/etc/ld.so.preload) is an interposer for every run: no DEEPBIND.
SYSTEM_PRELOAD = os.path.exists("/etc/ld.so.preload")


def deep(lib):
    """The first object of lib's scope 0 when it is loaded with RTLD_DEEPBIND."""
    return exe if SYSTEM_PRELOAD else lib


# SQLite linked in (the default build): no library of it is loaded, so it has no scope.
rc, out, _ = ttlib.run_tokterm(["--version"])
LINKED = b"(linked in)" in out


def sqlite_first(preloaded):
    """What scope 0 of libsqlite3 should start with: none when SQLite is linked in."""
    if LINKED:
        return None
    return exe if preloaded else deep("libsqlite3.so.0")


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()

    def run(name, extra):
        env = {"OPENAI_BASE_URL": srv.base("reply=Deep%20enough."), "LD_DEBUG": "scopes"}
        env.update(extra)
        rc, out, err = ttlib.run_tokterm(["-p", "question %s" % name], env=env, home=home)
        t.ok(rc == 0 and out.strip() == b"Deep enough.",
             "%s: the one-shot answers (store and network)" % name,
             "rc %d, stdout %r, stderr %r" % (rc, out[:200], err[-400:]))
        return first_scopes(err)

    s = run("plain", {})
    t.eq(s.get("libsqlite3.so.0"), sqlite_first(False),
         "plain: SQLite's symbols are looked up in SQLite first (RTLD_DEEPBIND), or SQLite is "
         "linked in and no libsqlite3 is loaded (%s)" % ("linked in" if LINKED else "shared"))
    curl = next((so for so in ttlib.LIBCURL_SONAMES if so in s), "libcurl")
    t.eq(s.get(curl), deep(curl),
         "plain: libcurl's symbols are looked up in libcurl first (RTLD_DEEPBIND)")

    s = run("preloaded", {"LD_PRELOAD": "libm.so.6"})
    t.eq(s.get("libsqlite3.so.0"), sqlite_first(True),
         "LD_PRELOAD: SQLite's symbols are looked up in the program's scope first")
    curl = next((so for so in ttlib.LIBCURL_SONAMES if so in s), "libcurl")
    t.eq(s.get(curl), exe,
         "LD_PRELOAD: libcurl's symbols are looked up in the program's scope first")

    d = ttlib.tempdir()
    vg = os.path.join(d, "vgpreload_standin-amd64-linux.so")
    os.symlink(libm_path(), vg)
    s = run("valgrind's preload", {"LD_PRELOAD": vg})
    t.eq(s.get("libsqlite3.so.0"), sqlite_first(False),
         "a vgpreload_* object alone: SQLite still gets RTLD_DEEPBIND")

    s = run("two preloads", {"LD_PRELOAD": vg + ":libm.so.6"})
    t.eq(s.get("libsqlite3.so.0"), sqlite_first(True),
         "vgpreload_* and another preload: the program's scope first")
sys.exit(t.done())
