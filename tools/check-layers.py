#!/usr/bin/env python3
"""The house rule, checked: a folder of src/ includes only folders below it, and only the
folder that owns a library includes its headers (docs/ARCHITECTURE.md, "The rule").
src/main.c sits above every folder: it may include any folder's public headers, but no
private one and no library header another folder owns (it prints ncurses' and readline's
versions from their headers' macros: those two it may include).
Prints TAP: one point per folder and one for main.c; exits 1 when any include breaks the rule.
Run from anywhere (make check runs it from a VPATH build): src/ is found next to this file,
or in the directory given as the first argument."""
import os, re, sys

# folder -> folders it may include (besides itself)
ALLOWED = {
    "base": set(),
    "proto": {"base"},
    "tokens": {"base"},
    "text": {"base"},
    "store": {"base"},
    "net": {"base", "proto"},
    "mcp": {"base", "proto", "text", "net"},
    "core": {"base", "proto", "tokens", "text", "store", "net", "mcp"},
    "cmd": {"base", "proto", "tokens", "text", "store", "net", "mcp", "core"},
    "tui": {"base", "proto", "tokens", "text", "store", "net", "mcp", "core"},
}
# system headers only one folder may include
OWNER = {
    "sqlite3.h": "store", "curl/curl.h": "net", "curses.h": "tui", "ncurses.h": "tui",
    "ncursesw/curses.h": "tui", "readline/readline.h": "tui", "readline/history.h": "tui",
    "term.h": "tui",
    "libxml/HTMLparser.h": "text", "libxml/tree.h": "text", "libxml/xmlerror.h": "text",
    "libxml/parser.h": "text",
    "hiredis/hiredis.h": "net",
}

# headers private to their folder: the library loaders, the tokenizer SQLite calls back and
# the store's internals (struct store)
PRIVATE = {"store/sqlite_dl.h", "store/fts_words.h", "store/store_int.h", "store/wal_vfs.h",
           "net/curl_dl.h",
           "net/redis_dl.h",
           "proto/api_int.h", "text/xml_dl.h", "mcp/mcp_int.h",
           "tui/tui_app.h"}

# library headers main.c may include although another folder owns them (version macros)
MAIN_MAY = {"curses.h", "readline/readline.h"}

INCLUDE = re.compile(r'\s*#\s*include\s*([<"])([^>"]+)[>"]')

def includes(path):
    """(line number, '<' or '"', header) of each #include of a file."""
    for lineno, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        m = INCLUDE.match(line)
        if m:
            yield lineno, m.group(1), m.group(2)

def check_main(src):
    """The breaches of src/main.c: a private header, or a library another folder owns."""
    bad = []
    path = os.path.join(src, "main.c")
    for lineno, kind, inc in includes(path) if os.path.isfile(path) else []:
        where = "src/main.c:%d" % lineno
        if kind == '"' and inc in PRIVATE:
            bad.append("%s includes %s (private to %s/)" % (where, inc, inc.split("/")[0]))
        owner = OWNER.get(inc)
        if owner and inc not in MAIN_MAY:
            bad.append("%s includes <%s> (only %s/ may)" % (where, inc, owner))
    return bad

def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(top, "src")
    bad = {}
    for folder in sorted(ALLOWED):
        bad[folder] = []
        d = os.path.join(src, folder)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(d, name)
            for lineno, kind, inc in includes(path):
                where = "src/%s/%s:%d" % (folder, name, lineno)
                if kind == '"' and "/" in inc:
                    f = inc.split("/")[0]
                    if f != folder and f not in ALLOWED[folder]:
                        bad[folder].append("%s includes %s" % (where, inc))
                    elif f != folder and inc in PRIVATE:
                        bad[folder].append("%s includes %s (private to %s/)" % (where, inc, f))
                owner = OWNER.get(inc)
                if owner and owner != folder:
                    bad[folder].append("%s includes <%s> (only %s/ may)" % (where, inc, owner))
    points = [("src/%s/ keeps to its layer" % f, bad[f]) for f in sorted(bad)]
    points.append(("src/main.c includes only public headers", check_main(src)))
    print("1..%d" % len(points))
    failed = 0
    for i, (name, breaches) in enumerate(points, 1):
        if breaches:
            failed = 1
            print("not ok %d - %s" % (i, name))
            for b in breaches:
                print("#   " + b)
        else:
            print("ok %d - %s" % (i, name))
    return failed

if __name__ == "__main__":
    sys.exit(main())
