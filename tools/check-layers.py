#!/usr/bin/env python3
"""The house rule, checked: a folder of src/ includes only folders below it, and only the
folder that owns a library includes its headers (docs/ARCHITECTURE.md, "The rule").
Prints TAP: one point per folder; exits 1 when any include breaks the rule."""
import os, re, sys

# folder -> folders it may include (besides itself)
ALLOWED = {
    "base": set(),
    "proto": {"base"},
    "tokens": {"base"},
    "text": {"base"},
    "store": {"base"},
    "net": {"base", "proto"},
    "core": {"base", "proto", "tokens", "text", "store", "net"},
    "cmd": {"base", "proto", "tokens", "text", "store", "net", "core"},
    "tui": {"base", "proto", "tokens", "text", "store", "net", "core"},
}
# system headers only one folder may include
OWNER = {
    "sqlite3.h": "store", "curl/curl.h": "net", "curses.h": "tui", "ncurses.h": "tui",
    "ncursesw/curses.h": "tui", "readline/readline.h": "tui", "readline/history.h": "tui",
}

# headers private to their folder: the library loaders and the tokenizer SQLite calls back
PRIVATE = {"store/sqlite_dl.h", "store/fts_words.h", "net/curl_dl.h"}

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
            for lineno, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
                if not m:
                    continue
                inc = m.group(2)
                where = "src/%s/%s:%d" % (folder, name, lineno)
                if m.group(1) == '"' and "/" in inc:
                    f = inc.split("/")[0]
                    if f != folder and f not in ALLOWED[folder]:
                        bad[folder].append("%s includes %s" % (where, inc))
                    elif f != folder and inc in PRIVATE:
                        bad[folder].append("%s includes %s (private to %s/)" % (where, inc, f))
                owner = OWNER.get(inc)
                if owner and owner != folder:
                    bad[folder].append("%s includes <%s> (only %s/ may)" % (where, inc, owner))
    print("1..%d" % len(bad))
    failed = 0
    for i, folder in enumerate(sorted(bad), 1):
        if bad[folder]:
            failed = 1
            print("not ok %d - src/%s/ keeps to its layer" % (i, folder))
            for b in bad[folder]:
                print("#   " + b)
        else:
            print("ok %d - src/%s/ keeps to its layer" % (i, folder))
    return failed

if __name__ == "__main__":
    sys.exit(main())
