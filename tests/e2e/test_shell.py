#!/usr/bin/env python3
"""End-to-end tests of shell-command mode (tokterm -x): the request carries the shell role and
the user's shell and system; --dry-run only prints; no terminal prints and runs nothing (exit
11); --allow-tool shell runs unasked (the command's status); in tmux: run (the output shown,
the command's status, a follow-up that carries the output), edit with readline, copy with
OSC 52 (a tmux buffer) or a message, cancel (exit 10, nothing ran), stdin from a pipe. The real
binary against the fake server. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
work = ttlib.tempdir("tt-shell-")
marker = os.path.join(work, "ran")


def reply(cmd, note="Touches a file."):
    return "reply=" + urllib.parse.quote("```sh\n%s\n```\n%s" % (cmd, note), safe="")


CMD = "touch %s && echo ran-it" % marker
SPEC = reply(CMD)


def last_user(srv):
    r = srv.requests()
    msgs = (r[-1].get("body") or {}).get("messages") or [] if r else []
    return msgs[-1].get("content") if msgs else None


def clear():
    if os.path.exists(marker):
        os.unlink(marker)


def run(srv, args, spec=SPEC, **kw):
    return ttlib.run_tokterm(["--no-save", "--no-cache", "--base-url", srv.base(spec)] + args,
                             **kw)


with ttlib.FakeServer() as srv:
    # --- without a terminal ------------------------------------------------------------------
    clear()
    rc, out, err = run(srv, ["-x", "--dry-run", "touch", "a", "file"])
    t.eq(rc, 0, "--dry-run: exit 0")
    t.eq(out.decode(), CMD + "\n", "--dry-run: stdout holds the command alone")
    t.ok(not os.path.exists(marker), "--dry-run: nothing ran")
    body = srv.requests()[-1]["body"]
    system = body["messages"][0]
    t.ok(system["role"] == "system" and "You turn requests into shell commands" in
         system["content"], "-x: the shell role's prompt is the system message", system)
    t.ok(re.search(r"The user's shell is \w+ \(/[^)]*\) on \w+", system["content"]) is not None,
         "-x: the system message names the user's shell and system", system)
    t.eq(body["messages"][-1]["content"], "touch a file", "-x: the words are the request")
    t.eq(body.get("temperature"), 0.2, "-x: the role's temperature")

    rc, out, err = run(srv, ["-x", "touch", "a", "file"], env={"SHELL": "/bin/sh"})
    t.eq(rc, 11, "no terminal, no --allow-tool: exit 11")
    t.eq(out.decode(), CMD + "\n", "no terminal: the command is printed on stdout")
    t.ok(b"not run: there is no terminal" in err and b"--allow-tool shell" in err,
         "no terminal: stderr says why and what to do", err)
    t.ok(not os.path.exists(marker), "no terminal: nothing ran")

    rc, out, err = run(srv, ["-x", "--allow-tool", "shell", "touch"],
                       spec=reply("echo out; echo err >&2; touch %s; exit 3" % marker))
    t.eq(rc, 3, "--allow-tool shell: the command's own status")
    t.ok(os.path.exists(marker), "--allow-tool shell: the command ran")
    t.eq(out, b"out\n", "--allow-tool shell: the command's stdout on stdout")
    t.ok(b"running (--allow-tool shell)" in err and b"err\n" in err,
         "--allow-tool shell: stderr names the command, then the command's stderr", err)
    clear()
    rc, out, err = run(srv, ["-x", "--allow-tool", "fs.*", "touch"])
    t.eq(rc, 11, "--allow-tool fs.* does not allow shell")
    rc, out, err = run(srv, ["-x", "--dry-run", "x"], spec="reply=I%20will%20not.%0ANo.")
    t.eq(rc, 10, "an answer without a command: exit 10")
    t.ok(b"holds no command" in err and b"I will not." in err,
         "an answer without a command: stderr shows the answer", err)
    rc, out, err = run(srv, ["--dry-run", "-p", "x"])
    t.eq(rc, 2, "--dry-run without -x: bad usage")

    # --- in a terminal (tmux) ----------------------------------------------------------------
    if not ttlib.Tmux.available():
        t.skip("-x in tmux", "tmux is not installed", tool="tmux")
        sys.exit(t.done())

    def session(args, spec=SPEC, term="xterm-256color", pipe=None):
        tm = ttlib.Tmux(100, 30, term=term)
        tm.__enter__()
        argv = [ttlib.tokterm_path(), "--no-save", "--no-cache", "--base-url", srv.base(spec)]
        cmd = " ".join(ttlib._shquote(a) for a in argv + args)
        if pipe:
            cmd = "printf %s | %s" % (ttlib._shquote(pipe), cmd)
        tm.run(cmd, ttlib.clean_env(env={"SHELL": "/bin/sh"}))
        return tm

    ASK = "[r]un  [e]dit  [c]opy  [q] cancel?"

    # run: the output shown, a follow-up carrying it, the command's status
    clear()
    tm = session(["-x", "touch", "it"], pipe="context from a pipe\n")
    screen = tm.wait_for(ASK, 10)
    t.ok(screen is not None and "$ " + CMD in screen and "# Touches a file." in screen,
         "tmux: the command and its note are shown, then the question", tm.capture())
    t.ok("context from a pipe" in (last_user(srv) or ""),
         "tmux: stdin from a pipe is context, the question still on the terminal")
    t.ok(not os.path.exists(marker), "tmux: nothing runs before a key")
    tm.send("r")
    screen = tm.wait_for("f: follow up", 10)
    t.ok(screen is not None and "ran-it" in screen and "[exit 0]" in screen,
         "r: the command runs, its output and status shown", tm.capture())
    t.ok(os.path.exists(marker), "r: the command ran")
    n0 = len(srv.requests())
    tm.send("f")
    t.ok(tm.wait_for("question (Enter: explain it)>", 5) is not None,
         "f: a readline prompt for the question", tm.capture())
    tm.send_text("why")
    tm.send("Enter")
    st = tm.wait_exit(10)
    t.eq(st, 0, "r then f: the command's status")
    u = last_user(srv) or ""
    t.ok(len(srv.requests()) == n0 + 1 and "ran-it" in u and "status 0" in u and
         u.endswith("why"), "f: the follow-up carries the output, the status and the question",
         u)
    tm.kill()

    # edit with readline, prefilled; a failing status comes back
    clear()
    tm = session(["-x", "touch", "it"])
    tm.wait_for(ASK, 10)
    tm.send("e")
    t.ok(tm.wait_for("edit> " + CMD, 5) is not None, "e: readline prefilled with the command",
         tm.capture())
    tm.send("End")
    tm.send_text("; echo edited; exit 4")
    tm.send("Enter")
    t.ok(tm.wait_for(re.compile(r"\$ .*echo edited; exit 4\s"), 5) is not None,
         "e: the edited command is shown again", tm.capture())
    tm.send("r")
    screen = tm.wait_for("f: follow up", 10)
    t.ok(screen is not None and "edited" in screen and "[exit 4]" in screen,
         "e then r: the edited command ran", tm.capture())
    tm.send("Enter")
    t.eq(tm.wait_exit(10), 4, "e then r: exit with the edited command's status")
    tm.kill()

    # copy: OSC 52 into tmux's buffer (set-clipboard on)
    clear()
    tm = session(["-x", "touch", "it"])
    tm.tmux("set", "-g", "set-clipboard", "on")
    tm.wait_for(ASK, 10)
    tm.send("c")
    st = tm.wait_exit(10)
    t.eq(st, 0, "c: exit 0 after the copy")
    t.ok("copied to the clipboard" in tm.capture(), "c: says it copied", tm.capture())
    t.eq(tm.tmux("show-buffer", check=False), CMD, "c: the command is in tmux's buffer (OSC 52)")
    t.ok(not os.path.exists(marker), "c: nothing ran")
    tm.kill()

    # copy on a terminal without Ms: a message, the question again
    tm = session(["-x", "touch", "it"], term="vt100")
    tm.wait_for(ASK, 10)
    tm.send("c")
    # the message and the question again are two writes: wait for the question after it
    screen = tm.wait_for(re.compile(r"cannot copy[\s\S]*" + re.escape(ASK)), 5)
    t.ok(screen is not None and screen.count(ASK) == 2,
         "c without OSC 52: a message, then the question again", tm.capture())
    tm.send("q")
    t.eq(tm.wait_exit(10), 10, "q: exit 10")
    t.ok("cancelled: nothing was run" in tm.capture(), "q: says nothing ran", tm.capture())
    t.ok(not os.path.exists(marker), "q: nothing ran")
    tm.kill()

    # Ctrl-C and Esc cancel too
    for key in ("C-c", "Escape"):
        tm = session(["-x", "touch", "it"])
        tm.wait_for(ASK, 10)
        tm.send(key)
        t.eq(tm.wait_exit(10), 10, "%s at the question: exit 10" % key)
        t.ok(not os.path.exists(marker), "%s: nothing ran" % key)
        tm.kill()

    # --- /x in the chat ------------------------------------------------------------------------
    def chat(spec=SPEC):
        tm = ttlib.Tmux(100, 30)
        tm.__enter__()
        tm.run([ttlib.tokterm_path(), "--no-save", "--no-cache", "--base-url", srv.base(spec)],
               ttlib.clean_env(env={"SHELL": "/bin/sh"}))
        tm.wait_for(re.compile("F1|\u203a"), 10)
        return tm

    CHOICES = "? r run  e edit  c copy  q cancel"
    clear()
    tm = chat()
    tm.send_text("/x touch a file")
    tm.send("Enter")
    screen = tm.wait_for(CHOICES, 10)
    t.ok(screen is not None and "run in /bin/sh?" in screen and CMD in screen.split(
        "run in /bin/sh?")[-1], "/x: the command in a panel, the choices in the input row",
         tm.capture())
    sent = last_user(srv) or ""
    t.ok("You turn requests into shell commands" in sent and "The user's shell is sh" in sent and
         sent.endswith("Propose one command for: touch a file"),
         "/x: the turn carries the shell role, the shell and the request", sent)
    t.ok(not os.path.exists(marker), "/x: nothing runs before a key")
    tm.send("r")
    screen = tm.wait_for("f: send the output to the model", 10)
    t.ok(screen is not None and "ran-it" in screen, "/x r: the command runs on the shell's "
         "screen, its output shown", tm.capture())
    t.ok(os.path.exists(marker), "/x r: the command ran")
    n0 = len(srv.requests())
    tm.send("f")
    screen = tm.wait_for("sent back", 10)
    t.ok(screen is not None and "exit 0" in screen, "/x r f: back in the chat, the run noted",
         tm.capture())
    tm.wait_for("\u2713", 10)
    u = last_user(srv) or ""
    t.ok(len(srv.requests()) == n0 + 1 and "ran-it" in u and "status 0" in u,
         "/x r f: the follow-up carries the output and the status", u)
    tm.send("C-d")
    t.eq(tm.wait_exit(10), 0, "/x: the chat goes on and quits")
    # the shell's screen left behind ends the question's line: the cursor is on the next one
    # (until 2026-12 it stayed on "[exit 0] f: ...", where a shell's prompt would be drawn)
    cur = tm.tmux("display-message", "-p", "#{cursor_x} #{cursor_y}", check=False)
    rows = tm.capture().split("\n")
    cy = int(cur.split()[1]) if cur and len(cur.split()) == 2 else -1
    t.ok(cur.split()[0] == "0" and 0 < cy < len(rows) and "[exit 0] f:" in rows[cy - 1],
         "/x r: the question's line is ended when the chat is left", "%r\n%s" % (cur, "\n".join(rows)))
    tm.kill()

    clear()
    tm = chat()
    tm.send_text("/x touch a file")
    tm.send("Enter")
    tm.wait_for(CHOICES, 10)
    tm.send("e")
    # the hint is the status bar; the input row below it gets the command
    screen = tm.wait_for(re.compile(r"editing: Enter takes it[\s\S]*" + re.escape(CMD)), 5)
    t.ok(screen is not None and tm.capture().rstrip().splitlines()[-1].endswith(CMD),
         "/x e: the command in the input line", tm.capture())
    tm.send("End")
    tm.send_text(" edited")
    tm.send("Enter")
    screen = tm.wait_for(CHOICES, 5)
    t.ok(screen is not None and "ran-it edited" in screen, "/x e: the edited command asked again",
         tm.capture())
    tm.send("q")
    screen = tm.wait_for("cancelled: nothing was run", 5)
    t.ok(screen is not None and CHOICES not in screen, "/x q: cancelled, the panel closed",
         tm.capture())
    t.ok(not os.path.exists(marker), "/x q: nothing ran")
    tm.send_text("/x touch a file")
    tm.send("Enter")
    tm.wait_for(CHOICES, 10)
    tm.tmux("set", "-g", "set-clipboard", "on")
    tm.send("c")
    t.ok(tm.wait_for("copied the command", 5) is not None, "/x c: says it copied", tm.capture())
    t.eq(tm.tmux("show-buffer", check=False), CMD, "/x c: the command in tmux's buffer")
    tm.send_text("/x touch a file")
    tm.send("Enter")
    tm.wait_for(CHOICES, 10)
    tm.send("Escape")
    t.ok(tm.wait_for("cancelled: nothing was run", 5) is not None, "/x Esc: cancelled",
         tm.capture())
    t.ok(not os.path.exists(marker), "/x c, Esc: nothing ran")
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()

sys.exit(t.done())
