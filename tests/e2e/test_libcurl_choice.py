#!/usr/bin/env python3
"""Which libcurl tokterm loads (net/curl_dl.c): Debian's GnuTLS build (libcurl-gnutls.so.4,
the package libcurl3-gnutls) first, whose load is the shorter, then the one it was built
against (libcurl.so.4, OpenSSL); $TOKTERM_LIBCURL names one and only that one. Seen from
outside: the TLS library `tokterm --version` names, and a request answered through each.
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import ctypes  # noqa: E402
import os  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def loadable(soname):
    try:
        ctypes.CDLL(soname)
        return True
    except OSError:
        return False


def version(env):
    rc, out, err = ttlib.run_tokterm(["--version"], env=env, home=home)
    return rc, out.decode(errors="replace") + err.decode(errors="replace")


home = ttlib.make_home()
GNUTLS, OPENSSL = ttlib.LIBCURL_SONAMES
with ttlib.FakeServer() as srv:
    base = srv.base("reply=Through%20curl.")

    def ask(name, env):
        rc, out, err = ttlib.run_tokterm(["--incognito", "-p", "hello"],
                                         env=dict(env, OPENAI_BASE_URL=base), home=home)
        t.ok(rc == 0 and out.strip() == b"Through curl.", "%s: a request is answered" % name,
             "rc %d, stdout %r, stderr %r" % (rc, out[:200], err[-400:]))

    if not loadable(GNUTLS):
        t.skip("the GnuTLS build is loaded first", "%s is not installed" % GNUTLS,
               tool="libcurl3-gnutls")
    else:
        rc, v = version({})
        t.ok(rc == 0 and "GnuTLS/" in v and "OpenSSL/" not in v,
             "by default the GnuTLS build is loaded (--version names GnuTLS)", v)
        ask("by default", {})

    rc, v = version({"TOKTERM_LIBCURL": OPENSSL})
    t.ok(rc == 0 and "OpenSSL/" in v, "TOKTERM_LIBCURL=%s loads that one (OpenSSL)" % OPENSSL,
         v)
    ask("TOKTERM_LIBCURL=%s" % OPENSSL, {"TOKTERM_LIBCURL": OPENSSL})

    # the GnuTLS build unloadable (a file that is no library first on the library path): the
    # OpenSSL one instead, and nothing said about the first
    fake = ttlib.tempdir("tt-nognutls-")
    with open(os.path.join(fake, GNUTLS), "w") as f:
        f.write("not a library\n" * 16)
    rc, v = version({"LD_LIBRARY_PATH": fake})
    t.ok(rc == 0 and "OpenSSL/" in v and "cannot load" not in v,
         "the GnuTLS build unloadable: the OpenSSL one is loaded, quietly", v)
    ask("the GnuTLS build unloadable", {"LD_LIBRARY_PATH": fake})

    # TOKTERM_LIBCURL names the only one tried: unloadable, the request fails saying so
    rc, out, err = ttlib.run_tokterm(["--incognito", "-p", "hello"],
                                     env={"OPENAI_BASE_URL": base,
                                          "TOKTERM_LIBCURL": os.path.join(fake, GNUTLS)},
                                     home=home)
    e = err.decode(errors="replace")
    t.ok(rc != 0 and "cannot load libcurl (%s)" % os.path.join(fake, GNUTLS) in e and
         "install libcurl" in e and not out,
         "TOKTERM_LIBCURL unloadable: no other is tried, the message names it", "rc %d: %s" %
         (rc, e))

t.done()
