#!/usr/bin/env python3
"""Valgrind memcheck over real runs of tokterm: scripted mode (answers, errors, truncation,
cache hits, hostile streams), the review subcommands (ls, search, show, export, stats, cache),
count, doctor, and two short interactive sessions in tmux (an answer; a long line scrolled
through and resized). Each run is one TAP test point: it
passes when memcheck reports no error and no definitely, indirectly or possibly lost block.

    TOKTERM=_build/plain/src/tokterm python3 tests/valgrind/run.py

Needs a build without sanitizers (ASan and valgrind exclude each other); skips when valgrind
is missing. Suppressions: tests/valgrind/tokterm.supp (ncurses/readline internals only, each
entry explained). VALGRIND_LOGS=DIR keeps every log there."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import ttlib  # noqa: E402

t = ttlib.Tap()
VALGRIND = shutil.which("valgrind")
SUPP = os.path.join(HERE, "tokterm.supp")
LOGS = os.environ.get("VALGRIND_LOGS") or ttlib.tempdir("tt-vg-")
os.makedirs(LOGS, exist_ok=True)
BIN = ttlib.tokterm_path()
VG = [VALGRIND or "valgrind", "--tool=memcheck", "--leak-check=full",
      "--show-leak-kinds=definite,indirect,possible",
      "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99",
      "--num-callers=40", "--suppressions=" + SUPP, "--child-silent-after-fork=yes"]
_seq = [0]


def verdict(log, name, rc_ok, diag=""):
    """One test point from a valgrind log: errors and leak summary."""
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    errors = int(m.group(1)) if m else -1
    lost = re.findall(r"(definitely|indirectly|possibly) lost: ([\d,]+) bytes", text)
    leaked = sum(int(b.replace(",", "")) for _, b in lost)
    ok = errors == 0 and leaked == 0 and rc_ok
    t.ok(ok, "%s: %s errors, %d bytes lost" % (name, errors if errors >= 0 else "?", leaked),
         (diag + "\n" if diag else "") + "\n".join(
             ln for ln in text.splitlines() if "==" in ln)[-3000:])


def vg_run(name, args, env=None, home=None, stdin=None, ok_codes=(0,), timeout=120):
    _seq[0] += 1
    log = os.path.join(LOGS, "%02d-%s.log" % (_seq[0], re.sub(r"\W+", "_", name)[:40]))
    e = ttlib.clean_env(home, env)
    e["TOKTERM_FULL_CLEANUP"] = "1"  # the libraries' teardown too: leaks are theirs or ours
    p = subprocess.run(VG + ["--log-file=" + log, BIN] + [str(a) for a in args], env=e,
                       input=stdin if stdin is not None else None,
                       stdin=None if stdin is not None else subprocess.DEVNULL,
                       capture_output=True, timeout=timeout)
    rc = p.returncode
    verdict(log, name, rc in ok_codes, "exit %d (want %s); stderr: %s" % (
        rc, ok_codes, p.stderr.decode(errors="replace")[-500:]))
    return rc, p.stdout, p.stderr


if not VALGRIND:
    t.skip("valgrind runs", "valgrind is not installed", tool="valgrind")
    sys.exit(t.done())
with open(BIN, "rb") as f:
    if b"__asan_init" in f.read():
        t.skip("valgrind runs", "%s is built with AddressSanitizer; use a plain build" % BIN)
        sys.exit(t.done())

home = ttlib.make_home()
with ttlib.FakeServer() as srv:
    def base(spec=""):
        return {"OPENAI_BASE_URL": srv.base(spec)}

    # --- scripted mode ----------------------------------------------------------------------
    vg_run("scripted answer", ["-p", "hello valgrind"], base(), home)
    vg_run("2000 deltas in random splits", ["-p", "x"], base("gen=2000,chunk=random"), home)
    vg_run("--json, two turns", ["--json", "-p", "one", "-p", "two"], base(), home)
    vg_run("cache hit", ["-p", "hello valgrind"], base(), home)
    vg_run("reasoning fixture", ["--reasoning", "-p", "r"], base("replay=deepseek_keepalive.sse"),
           home)
    vg_run("HTTP 401", ["-p", "x"], base("status=401,error=bad%20key"), home, ok_codes=(3,))
    vg_run("mid-stream error", ["-p", "x"], base("replay=openrouter_midstream_error.sse"), home,
           ok_codes=(3,))
    vg_run("dropped mid-answer", ["-p", "x"], base("gen=50,drop_after=900"), home, ok_codes=(5,))
    vg_run("idle timeout", ["--idle-timeout", "1", "-p", "x"], base("hang=1,stall_s=10"), home,
           ok_codes=(4,))
    vg_run("closed port", ["-p", "x"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, home,
           ok_codes=(4,))
    vg_run("66 MiB line (over the limit)", ["-p", "x"], base("huge_line=%d" % (66 << 20)), home,
           ok_codes=(3,), timeout=300)
    vg_run("deeply nested chunk", ["-p", "x"], base("nest=50000"), home, ok_codes=(3,))
    vg_run("NUL and invalid UTF-8", ["-p", "x"],
           base("content_json=%22a%5Cu0000b%5Cud800%FF%22"), home)
    vg_run("stdin as context", ["-p", "review"], base(), home, stdin=b"diff --git a b\n+x\n")

    # --- subcommands ------------------------------------------------------------------------
    vg_run("ls", ["ls"], None, home)
    vg_run("search", ["search", "valgrind"], None, home)
    vg_run("show", ["show", "1"], None, home)
    vg_run("export --all", ["export", "--all"], None, home)
    vg_run("stats", ["stats"], None, home)
    vg_run("cache stats", ["cache", "stats"], None, home)
    vg_run("count", ["count", "-m", "gpt-4o"], None, home, stdin=b"count these tokens\n")
    vg_run("doctor", ["doctor", "--timeout", "5"], base(), home)
    bad = ttlib.make_home()
    os.makedirs(os.path.join(bad, ".config", "tokterm"))
    with open(os.path.join(bad, ".config", "tokterm", "config"), "wb") as f:
        f.write(b"model = x\n\x1b[2J garbage\n")
    vg_run("garbage config", ["-p", "x"], base(), bad, ok_codes=(2,))

    # --- short interactive sessions in tmux -------------------------------------------------
    def vg_chat(name, tag, spec, prompt, answer, moves):
        """The chat under memcheck: a prompt, its answer, then moves(tm) (scrolls, resizes;
        returns its own checks as a dict), then quit."""
        _seq[0] += 1
        log = os.path.join(LOGS, "%02d-%s.log" % (_seq[0], tag))
        with ttlib.Tmux(90, 25) as tm:
            # tokterm execs the chat (tokterm-tui): valgrind follows the exec, and the chat's
            # report replaces the launcher's in the log.
            tm.run(VG + ["--trace-children=yes", "--log-file=" + log, BIN],
                   ttlib.clean_env(home, base(spec)))
            got = {"started": tm.wait_for(re.compile("F1|\u203a"), 60) is not None}
            tm.send_text(prompt)
            tm.send("Enter")
            got["answered"] = tm.wait_for(answer, 60) is not None
            got.update(moves(tm))
            tm.send("C-d")
            got["exit"] = tm.wait_exit(60)
        verdict(log, name, all(v for k, v in got.items() if k != "exit") and got["exit"] == 0,
                " ".join("%s=%s" % kv for kv in got.items()))

    def short_moves(tm):
        time.sleep(0.5)
        tm.send("PageUp")
        tm.send("PageDown")
        tm.resize(70, 20)
        time.sleep(0.5)
        return {}

    def long_moves(tm):
        # one line of ~24 KB: previewed as a long line, its rows sparse (text/longrows.c), so
        # scrolling up to its start rewraps rows from their checkpoints; a resize rewraps it
        for _ in range(6):
            tm.send("PageUp")
        time.sleep(0.5)
        tm.send("Home")
        time.sleep(0.5)
        top = "tok0 tok1" in tm.capture()
        tm.resize(70, 20)
        time.sleep(0.5)
        tm.send("End")
        return {"top": top}

    if not ttlib.Tmux.available():
        t.skip("interactive session", "tmux is not installed", tool="tmux")
    else:
        vg_chat("interactive session (start, answer, scroll, resize, quit)", "tui",
                "reply=hello%20from%20the%20fake,delay_ms=20", "hi there", "hello from the fake",
                short_moves)
        vg_chat("interactive long line (streamed, scrolled to its start, resized, quit)",
                "tui-long", "gen=3000", "long", "tok2999", long_moves)

sys.exit(t.done())
