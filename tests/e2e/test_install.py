#!/usr/bin/env python3
"""`make install` (into a DESTDIR) and the shell completions: what gets installed, that the
installed binary finds its data, that --version names the libraries, that the installed
tokterm starts the installed chat (tokterm-tui, in tmux) and links neither curses, readline nor
SQLite, and that each completion script is valid, knows every option of --help and every
subcommand, and completes profiles and conversation ids. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
TOP = os.path.dirname(ttlib.srcdir())
COMP = {"bash": os.path.join(TOP, "completions", "bash", "tokterm"),
        "zsh": os.path.join(TOP, "completions", "zsh", "_tokterm"),
        "fish": os.path.join(TOP, "completions", "fish", "tokterm.fish")}

rc, help_out, _ = ttlib.run_tokterm(["--help"])
help_text = help_out.decode()
long_opts = sorted(set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]+)", help_text, re.M)))
sub_part = help_text.split("Subcommands", 1)[1].split("Environment:", 1)[0]
subs = ["count", "ls", "show", "search", "export", "rm", "rename", "stats", "cache", "models",
        "doctor", "batch", "help", "version"]
t.ok(len(long_opts) >= 25, "--help lists the long options (%d)" % len(long_opts))
t.ok(all(s in sub_part for s in subs), "--help lists the subcommands", sub_part)

# --- every option and subcommand is known to every completion script ---------------------------
for shell, path in COMP.items():
    with open(path) as f:
        text = f.read()
    missing = [o for o in long_opts if o not in text and o.lstrip("-") not in text]
    t.ok(not missing, "%s completion knows every option of --help" % shell, missing)
    missing = [s for s in subs if not re.search(r"\b%s\b" % s, text)]
    t.ok(not missing, "%s completion knows every subcommand" % shell, missing)

# --- bash: run the completion function ------------------------------------------------------------
home = ttlib.make_home()
os.makedirs(os.path.join(home, ".config", "tokterm"))
with open(os.path.join(home, ".config", "tokterm", "config"), "w") as f:
    f.write("profile = work\n[work]\nmodel = a\n[profile local llama]\nmodel = b\n"
            "[default]\nmodel = c\n")
with ttlib.FakeServer() as srv:
    db_env = {"OPENAI_BASE_URL": srv.base()}
    ttlib.run_tokterm(["-p", "first chat"], home=home, env=db_env)
    ttlib.run_tokterm(["-p", "second chat"], home=home, env=db_env)
bindir = os.path.dirname(ttlib.tokterm_path())


def bash_complete(words):
    """COMPREPLY of the bash completion for the command line words (last = being typed)."""
    script = ('source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _tokterm; printf "%%s\\n" '
              '"${COMPREPLY[@]}"' % (ttlib._shquote(COMP["bash"]),
                                     " ".join(ttlib._shquote(w) if w else "''" for w in words),
                                     len(words) - 1))
    env = ttlib.clean_env(home=home, env={"PATH": bindir + ":/usr/bin:/bin"})
    r = subprocess.run(["bash", "--norc", "-c", script], env=env, capture_output=True, timeout=30)
    return sorted(x for x in r.stdout.decode().splitlines() if x)


if not shutil.which("bash"):
    t.skip("bash completion", "bash is not installed", tool="bash")
else:
    t.eq(bash_complete(["tokterm", "--pro"]), ["--profile", "--prompt"], "bash: --pro<TAB>")
    t.eq(bash_complete(["tokterm", "do"]), ["doctor"], "bash: a subcommand")
    t.eq(bash_complete(["tokterm", "-m", "gpt", "ca"]), ["cache"],
         "bash: the subcommand after an option with a value")
    t.eq(bash_complete(["tokterm", "-P", ""]), ["local llama", "work"],
         "bash: profiles from the config file ([default] is not one)")
    t.eq(bash_complete(["tokterm", "show", ""]), ["1", "2"], "bash: conversation ids from ls")
    t.eq(bash_complete(["tokterm", "cache", ""]), ["clear", "stats"], "bash: cache stats|clear")
    t.eq(bash_complete(["tokterm", "doctor", "--"]), ["--help", "--offline", "--timeout"],
         "bash: doctor's options")
    t.eq(bash_complete(["tokterm", "count", "-e", "o2"]), ["o200k_base"], "bash: encodings")

if shutil.which("zsh"):
    r = subprocess.run(["zsh", "-n", COMP["zsh"]], capture_output=True)
    t.eq(r.returncode, 0, "zsh completion: valid syntax")
else:
    t.skip("zsh completion syntax", "zsh is not installed", tool="zsh")
if shutil.which("fish"):
    r = subprocess.run(["fish", "--no-execute", COMP["fish"]], capture_output=True)
    t.eq(r.returncode, 0, "fish completion: valid syntax")
    env = ttlib.clean_env(home=home, env={"PATH": bindir + ":/usr/bin:/bin"})
    r = subprocess.run(["fish", "--no-config", "-c", "source %s; complete -C 'tokterm -P '; "
                        "complete -C 'tokterm rm '" % COMP["fish"]], env=env, capture_output=True,
                       timeout=30)
    got = r.stdout.decode()
    t.ok("work" in got and "local llama" in got and re.search(r"^1\t", got, re.M),
         "fish: profiles and conversation ids", got)
else:
    t.skip("fish completion", "fish is not installed", tool="fish")


def check_chat(dest, root, binary):
    """The chat is the separate program tokterm-tui in $(pkglibexecdir): tokterm execs it."""
    tuis = [os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs if f == "tokterm-tui"]
    rel = [os.path.relpath(p, root) for p in tuis]
    t.ok(len(rel) == 1 and rel[0].endswith(os.path.join("tokterm", "tokterm-tui")) and
         not rel[0].startswith("bin"),
         "installs the chat program once, into $(pkglibexecdir) (libexec/tokterm/)", rel)
    readelf = shutil.which("readelf")
    if readelf:
        r = subprocess.run([readelf, "-d", binary], capture_output=True, timeout=30)
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", r.stdout.decode())
        lazy = [n for n in needed if re.match(r"lib(n?cursesw?|tinfo|readline|sqlite3|curl)", n)]
        t.ok(needed and not lazy, "the installed tokterm links neither curses, readline, SQLite "
             "nor libcurl (loaded when needed)", needed)
    else:
        t.skip("NEEDED entries of the installed tokterm", "readelf is not installed",
               tool="readelf")
    if not tuis or not ttlib.Tmux.available():
        t.skip("the installed chat in tmux", "no tokterm-tui installed" if not tuis else
               "tmux is not installed", tool=None if not tuis else "tmux")
        return
    data = os.path.join(root, "share", "tokterm")
    errfile = os.path.join(ttlib.tempdir("tt-install-tui-"), "stderr")

    def start(tm, extra):
        e = {"TOKTERM_DATADIR": data, "OPENAI_BASE_URL": srv.base(), "TT_ERR": errfile}
        e.update(extra)
        tm.run(["sh", "-c", 'exec "$0" --incognito 2>"$TT_ERR"', binary],
               ttlib.clean_env(env=e))

    with ttlib.FakeServer() as srv:
        # Installed without DESTDIR, tokterm would find tokterm-tui by itself; here it is under
        # the DESTDIR, so tokterm names the configured place, which must be where it went.
        configured = "/" + os.path.relpath(tuis[0], dest)
        if os.path.exists(configured):
            t.skip("tokterm names the configured tokterm-tui", "%s exists" % configured)
        else:
            with ttlib.Tmux(80, 24) as tm:
                start(tm, {})
                st = tm.wait_exit(10)
                with open(errfile, errors="replace") as f:
                    err = f.read()
                t.ok(st == 1 and configured in err and "TOKTERM_TUI" in err,
                     "without tokterm-tui where it is configured: exit 1, a message naming "
                     "the places tried", "status %s, stderr %r" % (st, err))
        with ttlib.Tmux(80, 24) as tm:
            start(tm, {"TOKTERM_TUI": tuis[0]})
            screen = tm.wait_for("F1 help", 10)
            t.ok(screen is not None, "the installed tokterm starts the installed chat "
                 "(status bar in tmux)", tm.capture())
            time.sleep(0.2)
            tm.send_text("hello")
            tm.send("Enter")
            screen = tm.wait_for("\u2713", 10)
            t.ok(screen is not None and "hello" in screen,
                 "the installed chat streams an answer", tm.capture())
            tm.send("C-d")
            st = tm.wait_exit(10)
            with open(errfile, errors="replace") as f:
                err = f.read()
            t.ok(st == 0 and not err, "Ctrl-D ends it with status 0 and nothing on stderr",
                 "status %s, stderr %r" % (st, err))


# --- make install into a DESTDIR ------------------------------------------------------------------
builddir = os.path.dirname(os.path.dirname(ttlib.tokterm_path()))
make = shutil.which("make")
if not make:
    t.skip("make install", "make is not installed", tool="make")
elif not os.path.exists(os.path.join(builddir, "Makefile")):
    t.skip("make install", "no build tree with a Makefile next to %s" % ttlib.tokterm_path())
else:
    dest = ttlib.tempdir("tt-destdir-")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run([make, "-s", "install", "DESTDIR=" + dest], cwd=builddir, env=env,
                       capture_output=True, timeout=300)
    t.eq(r.returncode, 0, "make install DESTDIR=...: succeeds")
    prefix = None
    with open(os.path.join(builddir, "Makefile")) as f:
        for line in f:
            if line.startswith("prefix = "):
                prefix = line.split("=", 1)[1].strip()
    root = dest + (prefix or "/usr/local")
    files = {
        "the binary": "bin/tokterm",
        "the man page": "share/man/man1/tokterm.1",
        "the dark theme": "share/tokterm/themes/dark.theme",
        "the mono theme": "share/tokterm/themes/mono.theme",
        "the o200k_base table": "share/tokterm/o200k_base.bin",
        "the cl100k_base table": "share/tokterm/cl100k_base.bin",
        "the model table": "share/tokterm/models.tsv",
        "the bash completion": "share/bash-completion/completions/tokterm",
        "the zsh completion": "share/zsh/site-functions/_tokterm",
        "the fish completion": "share/fish/vendor_completions.d/tokterm.fish",
    }
    for what, rel in files.items():
        t.ok(os.path.isfile(os.path.join(root, rel)), "installs %s (%s)" % (what, rel))
    binary = os.path.join(root, "bin", "tokterm")
    t.ok(os.access(binary, os.X_OK), "the installed binary is executable")
    env = ttlib.clean_env(env={"TOKTERM_DATADIR": os.path.join(root, "share", "tokterm")})
    r = subprocess.run([binary, "count", "-m", "gpt-4o"], input=b"hello world", env=env,
                       capture_output=True, timeout=30)
    t.eq((r.returncode, r.stdout.strip()), (0, b"2"),
         "the installed binary counts tokens with the installed tables")
    r = subprocess.run([binary, "--version"], env=env, capture_output=True, timeout=30)
    v = r.stdout.decode()
    t.ok(r.returncode == 0 and v.startswith("tokterm ") and all(
        lib in v for lib in ("libcurl", "cJSON", "SQLite", "utf8proc")),
        "--version: the version and the libraries it runs with", v)
    t.ok("ncurses" in v and "readline" in v, "--version also names ncurses and readline", v)
    r = subprocess.run([binary, "doctor", "--offline"], env=env, capture_output=True, timeout=30)
    t.ok(b"ok    data" in r.stdout and b"ok    theme" in r.stdout,
         "the installed binary's doctor finds its data and theme", r.stdout.decode())
    check_chat(dest, root, binary)
    r = subprocess.run([make, "-s", "uninstall", "DESTDIR=" + dest], cwd=builddir,
                       env={k: v for k, v in os.environ.items()
                            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
                       capture_output=True, timeout=300)
    left = [os.path.join(dp, f) for dp, _, fs in os.walk(dest) for f in fs]
    t.ok(r.returncode == 0 and not left, "make uninstall removes every file", left[:10])

sys.exit(t.done())
