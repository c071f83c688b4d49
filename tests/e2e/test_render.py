#!/usr/bin/env python3
"""Scripted mode renders Markdown on a terminal (--render auto|always|never, `render` in the
config); a pipe gets the raw text, byte for byte. Also: a cache hit says so on a terminal's
stderr."""
import os
import re
import sys
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

ANSWER = ("# Title\nSome **bold** and `code` text\n- one\n- two\n```py\nprint(1)\n```\n"
          "| a | b |\n|---|---|\n| 1 | 2 |\n" + "word " * 30 + "\ntail")
SGR = re.compile(rb"\x1b\[[0-9;]*m")


def spec(text):
    return "reply=" + urllib.parse.quote(text, safe="")


def plain(b):
    return SGR.sub(b"", b).decode("utf-8", "replace")


def rendered(out, name, width=80):
    """Checks that out is the answer rendered (markup gone, escapes ours, rows fit width)."""
    p = plain(out)
    t.ok(b"\x1b[" in out and "**" not in p and "`code`" not in p and "Some bold and code text"
         in p, name + ": Markdown rendered (escapes, no ** or backticks)", repr(out[:400]))
    t.ok("\u2022 one\n\u2022 two\n" in p and "\u2502 1 \u2502 2 \u2502" in p,
         name + ": bullets and a table drawn", p)
    rows = p.split("\n")
    t.ok(max(len(r) for r in rows) <= width and sum(1 for r in rows if "word" in r) >= 2,
         name + ": wrapped at %d columns" % width, p)
    t.ok(p.endswith("tail\n"), name + ": the unfinished last line at the end", repr(p[-40:]))


with ttlib.FakeServer() as srv:
    env = {"OPENAI_BASE_URL": srv.base(spec(ANSWER)), "TERM": "xterm-256color"}
    raw = (ANSWER + "\n").encode()

    # --- auto (the default): a pipe gets the raw text, a terminal the rendered text ---------
    rc, out, err = ttlib.run_tokterm(["--no-save", "--no-cache", "-p", "x"], env=env)
    t.ok(rc == 0 and out == raw, "auto into a pipe: the raw text, byte for byte", repr(out[:200]))
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"], env=env)
    t.eq(rc, 0, "auto on a terminal: exit 0")
    rendered(out, "auto on a terminal")
    t.ok(b"38;5;" in out, "auto on a terminal: the theme's 256 colours for xterm-256color")

    # --- never / always ------------------------------------------------------------------
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "--render", "never", "-p",
                                          "x"], env=env)
    t.ok(rc == 0 and out == raw, "--render never on a terminal: the raw text", repr(out[:200]))
    rc, out, err = ttlib.run_tokterm(["--no-save", "--no-cache", "--render", "always", "-p", "x"],
                                     env=dict(env, COLUMNS="60"))
    t.eq(rc, 0, "--render always into a pipe: exit 0")
    rendered(out, "--render always into a pipe (COLUMNS=60)", 60)
    rc, out, err = ttlib.run_tokterm(["--no-save", "--no-cache", "--json", "--render", "always",
                                      "-p", "x"], env=env)
    t.ok(rc == 0 and b"\x1b" not in out and b'"content":"# Title' in out,
         "--json is never rendered", repr(out[:200]))

    # --- NO_COLOR: attributes only; TERM=dumb: no escapes at all ---------------------------
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"],
                                         env=dict(env, NO_COLOR="1"))
    t.ok(rc == 0 and b"\x1b[0;1m" in out and not re.search(rb"\x1b\[[0-9;]*;(3|4|9|10)[0-9]", out),
         "NO_COLOR: bold, no colour", repr(out[:300]))
    rendered(out, "NO_COLOR")
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"],
                                         env=dict(env, TERM="dumb"))
    t.ok(rc == 0 and b"\x1b" not in out and "\u2022 one" in out.decode(),
         "TERM=dumb: rendered without escapes", repr(out[:200]))

    # --- the config key, and a bad value ----------------------------------------------------
    home = ttlib.make_home()
    cfg = os.path.join(home, ".config", "tokterm")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write("render = never\n")
    os.chmod(os.path.join(cfg, "config"), 0o600)
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"], env=env, home=home)
    t.ok(rc == 0 and out == raw, "render = never in the config: the raw text on a terminal",
         repr(out[:200]) + err.decode())
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "--render", "always", "-p",
                                          "x"], env=env, home=home)
    rendered(out, "--render always over the config's never")
    rc, out, err = ttlib.run_tokterm(["--no-save", "--render", "sometimes", "-p", "x"], env=env)
    t.ok(rc == 2 and b"auto|always|never" in err and not out, "--render sometimes: exit 2, the "
         "choices named", err.decode())

    # --- the model's escape sequences never reach the terminal when rendered ----------------
    evil = "ok \x1b]0;pwned\x07 \x1b[2J **b**\n"
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"],
                                         env=dict(env, OPENAI_BASE_URL=srv.base(spec(evil))))
    t.ok(rc == 0 and b"\x07" not in out and b"\x1b]" not in out and b"\x1b[2J" not in out,
         "rendered: the model's escapes are neutralised", repr(out))

    # --- a CRLF split between two deltas is one line break when rendered too ---------------
    rc, out, err = ttlib.run_tokterm_tty(["--no-save", "--no-cache", "-p", "x"], env=dict(
        env, OPENAI_BASE_URL=srv.base("delay_ms=20,reply=" + urllib.parse.quote("abc\r\n**d**\r\ne"))))
    t.ok(rc == 0 and plain(out) == "abc\nd\ne\n", "rendered: CRLF across deltas is one line "
         "break", repr(out))

    # --- a slow line is drawn as it grows (until 2026-12 nothing showed until its end: a
    # paragraph of 300 tokens at 50 tokens/s is 6 s of an empty terminal), then replaced by
    # the finished rows: each word once on the screen and in the scrollback ----------------
    if not ttlib.Tmux.available():
        t.skip("a slow line drawn as it grows", tool="tmux")
    else:
        with ttlib.Tmux(60, 12, record=True) as tm:
            tm.run([ttlib.tokterm_path(), "--incognito", "-p", "x"], ttlib.clean_env(env=dict(
                env, OPENAI_BASE_URL=srv.base("gen=150,delay_ms=20")), home=ttlib.make_home()))
            mid = tm.wait_for(re.compile(r"tok[3-9]\d "), 10) or ""
            t.ok("tok3" in mid and "tok149" not in mid,
                 "a slow line: its words show before the line ends", mid)
            code = tm.wait_exit(15)
            hist = tm.tmux("capture-pane", "-p", "-S", "-500", "-t", tm.target)
            words = re.findall(r"tok\d+", hist)
            t.ok(code == 0 and words == ["tok%d" % i for i in range(150)],
                 "a slow line: each word once, in order, on the screen and in the scrollback",
                 "exit %r, %d words: %s" % (code, len(words), hist[-600:]))
            rec = tm.recording()
            t.ok(b"\x1b[J" not in rec and re.search(rb"\r\x1b\[\d+A(\x1b\[2K\x1b\[B)+", rec),
                 "a slow line: its rows erased one by one (not ED, which tmux moves into its "
                 "history from the top-left corner)", repr(rec[:300]))
            rows = [len(r) for r in tm.capture().split("\n")]
            t.ok(max(rows) <= 60, "a slow line: its rows fit the width", str(rows))

    # --- a cache hit says so on a terminal's stderr (and nowhere else) ----------------------
    home = ttlib.make_home()
    cenv = dict(env, OPENAI_BASE_URL=srv.base(spec("cached answer")))
    rc, out, err = ttlib.run_tokterm(["-p", "same question"], env=cenv, home=home)
    rc, out, err = ttlib.run_tokterm_tty(["-p", "same question"], env=cenv, home=home,
                                         ttys=(1, 2))
    t.ok(rc == 0 and b"from the cache" in err and b"cached answer" in out,
         "a cache hit on a terminal: stderr says so", repr(err))
    rc, out, err = ttlib.run_tokterm(["-p", "same question"], env=cenv, home=home)
    t.ok(rc == 0 and err == b"" and out == b"cached answer\n",
         "a cache hit into pipes: nothing on stderr", repr(err))

    # --- "1 token", not "1 tokens" (and "1 answer"): show, stats ----------------------------
    home = ttlib.make_home()
    rc, out, err = ttlib.run_tokterm(["-p", "one"], env=dict(env, OPENAI_BASE_URL=srv.base(
        "reply=hi")), home=home)
    rc, out, err = ttlib.run_tokterm(["show", "1"], home=home)
    t.ok(rc == 0 and b"+ 1 completion token " in out, "show: '1 completion token'",
         out.decode()[-300:])
    rc, out, err = ttlib.run_tokterm(["stats"], home=home)
    t.ok(rc == 0 and b"0 of 1 answer (" in out, "stats: 'of 1 answer'", out.decode()[:400])

sys.exit(t.done())
