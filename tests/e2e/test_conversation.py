#!/usr/bin/env python3
"""One conversation, the same everywhere: what the model is sent, what the transcript shows,
what is saved and what a resume sends agree, after budget refusals, failures, /edit, /retry,
cancels and resumes. The chat runs in a private tmux against the fake server. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
PROMPT = re.compile("\u203a")


def msgs(req):
    """A request's messages as (role, content) pairs."""
    return [(m["role"], m["content"]) for m in (req.get("body") or {}).get("messages", [])]


def alternates(pairs):
    """System first (if any), then strictly user/assistant/user..., ending with user."""
    roles = [r for r, _ in pairs if r != "system"]
    return all(r == ("user" if i % 2 == 0 else "assistant") for i, r in enumerate(roles)) \
        and roles and roles[-1] == "user"


def start_chat(tm, srv, home, args=(), env=None):
    e = {"OPENAI_BASE_URL": srv.base("")}
    e.update(env or {})
    tm.run([ttlib.tokterm_path()] + list(args), ttlib.clean_env(home=home, env=e))
    return tm.wait_for(re.compile("F1"), 10)


def send(tm, text, wait=None, timeout=8):
    tm.send_text(text)
    tm.send("Enter")
    if wait:
        return tm.wait_for(wait if hasattr(wait, "search") else re.compile(re.escape(wait)),
                           timeout)
    return None


def wait_idle(tm, n_ticks, timeout=8, also=None):
    """Wait until the number of answer footers (✓/✗/⚠) on screen reaches n_ticks
    (and the text also is on screen: the input row is drawn after the footer)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        scr = tm.capture()
        if len(re.findall("[\u2713\u2717\u26a0]", scr)) >= n_ticks and " idle" in scr and \
                (also is None or also in scr):
            return scr
        time.sleep(0.05)
    return tm.capture()


def wait_requests(srv, n, timeout=8):
    """Wait until the server has logged n chat requests; returns them."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and len(srv.requests()) < n:
        time.sleep(0.05)
    return srv.requests()


def export(home, cid, *extra):
    rc, out, err = ttlib.run_tokterm(["export", str(cid), "--format", "json"] + list(extra),
                                     home=home)
    return json.loads(out) if rc == 0 else {"error": err.decode(errors="replace")}


def no_retries(home):
    """A config file in home's XDG config dir: no retries, so a failure shows at once."""
    d = os.path.join(home, ".config", "tokterm")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config"), "w") as f:
        f.write("max_retries = 0\n")
    os.chmod(os.path.join(d, "config"), 0o600)


def db_path(home):
    return os.path.join(home, ".local", "share", "tokterm", "tokterm.db")


def latest_id(home):
    rc, out, _ = ttlib.run_tokterm(["ls"], home=home)
    rows = [ln.split() for ln in out.decode().splitlines()[1:] if ln.strip()]
    return int(rows[0][0]) if rows else None


if not ttlib.Tmux.available():
    t.skip("conversation tests in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

with ttlib.FakeServer() as srv:
    # --- 1. budget refusals are shown and saved, never sent -------------------------------------
    home = ttlib.make_home()
    with ttlib.Tmux(100, 40) as tm:
        t.ok(start_chat(tm, srv, home) is not None, "budget: the chat opens", tm.capture())
        send(tm, "/budget 60", "Budget")
        for i, p in enumerate(["alpha one", "beta two", "gamma three"]):
            send(tm, p)
            wait_idle(tm, i + 1)
        n_before = len(srv.requests())
        send(tm, "delta four", "not sent")
        scr = wait_idle(tm, 4, also="\u203a delta four")
        t.ok("budget" in scr and "delta four" in scr, "budget: delta four is refused, shown", scr)
        t.ok(re.search("\u203a delta four", scr) is not None,
             "budget: the refused prompt is back in the input line", scr)
        tm.send("C-u")
        send(tm, "epsilon five")
        wait_idle(tm, 5)
        t.eq(len(srv.requests()), n_before, "budget: the refused prompts never reach the server")
        tm.send("C-u")
        send(tm, "/budget off", "Budget")
        send(tm, "zeta six")
        scr = wait_idle(tm, 6)
        req = srv.requests()[-1]
        got = msgs(req)
        want = [("user", "alpha one"), ("assistant", "alpha one"), ("user", "beta two"),
                ("assistant", "beta two"), ("user", "gamma three"), ("assistant", "gamma three"),
                ("user", "zeta six")]
        t.eq(got, want, "budget: the next request carries only the answered turns, alternating")
        t.ok(scr.count("not sent") >= 2, "budget: the transcript shows both refusals", scr)
        tm.send("C-u")
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    cid = latest_id(home)
    ex = export(home, cid)
    rows = [(m["role"], m["content"], m.get("error") is not None) for m in ex.get("messages", [])]
    t.eq([r for r in rows if r[0] == "user"],
         [("user", p, p in ("delta four", "epsilon five")) for p in
          ["alpha one", "beta two", "gamma three", "delta four", "epsilon five", "zeta six"]],
         "budget: the saved conversation has the refused turns, marked refused")
    # a resume sends what the live session would have sent next
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "eta seven"], home=home,
                                     env={"OPENAI_BASE_URL": srv.base("")})
    t.eq(msgs(srv.requests()[-1]), want[:-1] + [("user", "zeta six"), ("assistant", "zeta six"),
                                                 ("user", "eta seven")],
         "budget: -c sends the same history, refused turns left out")

    # -c passes over newer conversations without an answer (a key refused): said, with the one
    # it continues (until 2026-12 the prompt went to the older conversation without a word)
    home = ttlib.make_home()
    no_retries(home)
    env = {"OPENAI_BASE_URL": srv.base("")}
    ttlib.run_tokterm(["-p", "older"], home=home, env=env)
    older = latest_id(home)
    srv.queue(["status=401"])
    ttlib.run_tokterm(["-p", "refused"], home=home, env=env)
    refused = latest_id(home)
    time.sleep(1.1)  # "updated" is in whole seconds: a tie goes to the higher id
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "again"], home=home, env=env)
    t.ok(rc == 0 and refused != older and
         ("continuing conversation %d, the latest with an answer: conversation %d, newer, has "
          "no answer" % (older, refused)).encode() in err,
         "-c past a newer conversation without an answer: says which it continues",
         err.decode(errors="replace"))
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "and again"], home=home, env=env)
    t.ok(rc == 0 and b"continuing" not in err, "-c of the newest conversation: no word",
         err.decode(errors="replace"))
    time.sleep(1.1)
    srv.queue(["status=401"])
    ttlib.run_tokterm(["-p", "refused too"], home=home, env=env)
    with ttlib.Tmux(120, 40) as tm:
        start_chat(tm, srv, home, ["-c"])
        scr = tm.wait_for(re.compile("Continuing conversation"), 5) or tm.capture()
        scr = tm.wait_for(re.compile("has no answer"), 3) or tm.capture()
        t.ok(re.search(r"Continuing conversation %d .*the latest with an answer: "
                       r"conversation %d, newer, has no answer" % (older, latest_id(home)),
                       " ".join(scr.split())) is not None,
             "the chat's -c says it too", scr)
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)

    # --- 2. /edit and /retry replace the turn: versions, never duplicates ----------------------
    home = ttlib.make_home()
    with ttlib.Tmux(100, 40) as tm:
        start_chat(tm, srv, home)
        n0 = len(srv.requests())
        send(tm, "A")
        wait_idle(tm, 1)
        send(tm, "/edit")
        time.sleep(0.3)
        tm.send("C-u")
        send(tm, "B")
        t.eq(msgs(wait_requests(srv, n0 + 2)[-1]), [("user", "B")],
             "edit: the request carries B alone")
        scr = wait_idle(tm, 1)
        send(tm, "/retry")
        scr = tm.wait_for(re.compile("version 3 of 3"), 8) or tm.capture()
        t.eq(msgs(wait_requests(srv, n0 + 3)[-1]), [("user", "B")],
             "retry: the request carries B alone")
        t.ok("version 3 of 3" in scr and "\u203a A" not in scr,
             "retry: the transcript shows the third version, not A", scr)
        # a cancelled answer that is retried does not come back
        srv.queue(["reply=slow%20words%20come%20one%20by%20one,delay_ms=300"])
        send(tm, "X")
        tm.wait_for(re.compile("slow"), 5)
        tm.send("Escape")
        wait_idle(tm, 2)
        send(tm, "/retry")
        wait_idle(tm, 2)
        tm.send("C-u")
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "C"], home=home,
                                     env={"OPENAI_BASE_URL": srv.base("")})
    t.eq(msgs(srv.requests()[-1]), [("user", "B"), ("assistant", "B"), ("user", "X"),
                                     ("assistant", "X"), ("user", "C")],
         "resume: -c sends B, the retried X and C: no A, no duplicate, no cancelled answer")
    cid = latest_id(home)
    rc, out, err = ttlib.run_tokterm(["--conversation", str(cid), "-p", "D"], home=home,
                                     env={"OPENAI_BASE_URL": srv.base("")})
    t.eq(msgs(srv.requests()[-1])[:6], [("user", "B"), ("assistant", "B"), ("user", "X"),
                                        ("assistant", "X"), ("user", "C"), ("assistant", "C")],
         "resume: --conversation sends the live path too")
    ex = export(home, cid)
    users = [m["content"] for m in ex["messages"] if m["role"] == "user"]
    t.eq(users, ["B", "X", "C", "D"], "export: the live path, no duplicates")
    exall = export(home, cid, "--all-versions")
    users_all = [m["content"] for m in exall["messages"] if m["role"] == "user"]
    t.eq(users_all, ["A", "B", "B", "X", "X", "C", "D"],
         "export --all-versions: every version is kept")
    t.ok(sum(1 for m in exall["messages"] if not m["live"]) == 6,
         "export --all-versions: the replaced rows are marked", json.dumps(exall)[:2000])
    rc, out, err = ttlib.run_tokterm(["show", str(cid)], home=home)
    show = out.decode()
    t.ok("version 3 of 3" in show and "\n\nA\n\n" not in show,
         "show: the live path with the version of each turn", show)
    # F2 -> r resumes the live path too
    with ttlib.Tmux(100, 40) as tm:
        start_chat(tm, srv, home)
        tm.send("F2")
        tm.wait_for(re.compile("X"), 5)
        tm.send("r")
        scr = tm.wait_for(re.compile("Continuing conversation"), 5) or tm.capture()
        t.ok(scr is not None and "4 turns" in scr, "F2 r: the browser resumes 4 turns", scr)
        send(tm, "E")
        wait_idle(tm, 5)
        t.eq([m for m in msgs(srv.requests()[-1])][-3:], [("user", "D"), ("assistant", "D"),
                                                          ("user", "E")],
             "F2 r: the next request continues the live path")
        t.ok(alternates(msgs(srv.requests()[-1])), "F2 r: the request alternates",
             repr(msgs(srv.requests()[-1])))
        tm.send("C-u")
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    # F2 -> Enter reads a conversation: a replaced version is marked under its own answer (as
    # the chat marks it), not above the next prompt, where it read as the previous answer's
    vhome = ttlib.make_home()
    with ttlib.Tmux(100, 40) as tm:
        start_chat(tm, srv, vhome)
        send(tm, "firstturn")
        wait_idle(tm, 1)
        send(tm, "secondturn")
        wait_idle(tm, 2)
        send(tm, "/retry")
        wait_idle(tm, 3)
        tm.send("F2")
        tm.wait_for(re.compile("firstturn"), 5)
        tm.send("Enter")
        scr = tm.wait_for(re.compile("READ-ONLY"), 5) or tm.capture()
        rows = [r.strip() for r in scr.splitlines() if r.strip()]
        after = lambda text: [rows[k + 1] for k, r in enumerate(rows[:-1]) if r == text]
        t.ok(after("firstturn") == ["\u258c secondturn"] and
             after("secondturn")[:1] == ["version 1 of 2 \u00b7 replaced: not on the live path, "
                                         "never sent again"] and
             after("secondturn")[1:2] == ["version 2 of 2"],
             "F2 read: each version mark sits under the answer it belongs to", scr)
        tm.send("q")
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    # one turn is "1 turn"
    one_home = ttlib.make_home()
    rc, out, err = ttlib.run_tokterm(["-p", "just one"], home=one_home,
                                     env={"OPENAI_BASE_URL": srv.base("")})
    with ttlib.Tmux(100, 30) as tm:
        start_chat(tm, srv, one_home, ["-c"])
        scr = tm.wait_for(re.compile("Continuing conversation"), 5) or tm.capture()
        t.ok(rc == 0 and "(1 turn) with" in scr, "-c: a conversation of one turn says \"1 turn\"",
             scr)
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)

    # --- 3. failures: shown, saved, never sent; the prompt comes back --------------------------
    home = ttlib.make_home()
    no_retries(home)
    with ttlib.Tmux(100, 40) as tm:
        start_chat(tm, srv, home)
        send(tm, "first")
        wait_idle(tm, 1)
        for i, spec in enumerate(["status=401", "status=429", "status=500"]):
            srv.queue([spec])
            tm.send("C-u")
            send(tm, "second")
            scr = wait_idle(tm, 2 + i, also="\u203a second")
            t.ok(re.search("\u203a second", scr) is not None,
                 "%s: the failed prompt is back in the input line" % spec, scr)
            if spec == "status=500":  # the advice under it does not say "HTTP 500" again
                t.ok("The server failed (server error). Try again later." in scr
                     and scr.count("HTTP 500:") == 1, "500: the status said once", scr)
        # a cancel before the answer's first byte: nothing to keep, the prompt comes back
        # too (until 2026-12 it was lost: not sent again, not offered back)
        srv.queue(["header_delay_ms=5000"])
        tm.send("C-u")
        n0 = len(srv.requests())
        send(tm, "slow one")
        wait_requests(srv, n0 + 1)
        tm.send("C-c")
        scr = wait_idle(tm, 5, also="\u203a slow one")
        t.ok(re.search("\u203a slow one", scr) is not None and "cancelled" in scr,
             "a cancel before the first byte: the prompt is back in the input line", scr)
        tm.send("C-u")
        # typed ahead: the draft stays, the prompt goes to the history (until 2026-12 it was
        # held for the next line, and what was typed there was joined to it and sent)
        srv.queue(["header_delay_ms=5000"])
        n0 = len(srv.requests())
        send(tm, "slow two")
        wait_requests(srv, n0 + 1)
        tm.send_text("draft")
        tm.send("C-c")
        scr = wait_idle(tm, 6, also="input history")
        t.ok("\u203a draft" in scr and "the prompt is in the input history" in scr,
             "a cancel while a draft is typed: the draft stays, the prompt is in the history",
             scr)
        tm.send("C-u")
        send(tm, "/model")
        scr = tm.wait_for("Change it with", 5) or tm.capture()
        time.sleep(0.3)
        rows = [ln for ln in tm.capture().split("\n") if ln.startswith("\u203a")]
        t.ok(rows and rows[-1].strip() == "\u203a",
             "after the next line the input is empty: nothing held back to join what is typed",
             tm.capture())
        tm.send("C-u")
        send(tm, "third")
        wait_idle(tm, 7)
        got = msgs(srv.requests()[-1])
        t.eq(got, [("user", "first"), ("assistant", "first"), ("user", "third")],
             "after 401/429/500 the next request alternates: no two user messages in a row")
        tm.send("C-u")
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    # no key: the turn is refused, shown at once and saved; the prompt comes back
    home_nk = ttlib.make_home()
    with ttlib.Tmux(100, 40) as tm:
        tm.run([ttlib.tokterm_path()],
               ttlib.clean_env(home=home_nk, env={"OPENAI_API_KEY": None,
                                               "OPENAI_BASE_URL": "https://api.example.invalid/v1",
                                               "TOKTERM_LOCAL_PROBE": "None=http://127.0.0.1:1/v1"}))
        tm.wait_for(re.compile("No API key"), 10)
        send(tm, "hello without a key")
        scr = tm.wait_for(re.compile("not sent: no API key[\\s\\S]*\u203a hello without a key"),
                          5) or tm.capture()
        t.ok("not sent: no API key" in scr and "\u258c hello without a key" in scr,
             "no key: the refused turn shows at once", scr)
        t.ok(re.search("\u203a hello without a key", scr) is not None,
             "no key: the prompt is back in the input line", scr)
        tm.send("C-u")
        tm.send("C-d")
        tm.wait_exit(5)
    con = sqlite3.connect(db_path(home_nk))
    rows = con.execute("SELECT role, content, error FROM messages ORDER BY id").fetchall()
    con.close()
    t.eq(rows, [("user", "hello without a key", "no API key")],
         "no key: the refused turn is saved, with no answer row")
    # a refused connection, scripted (--base-url: sent to another server than the one the
    # conversation was held with, which -c alone refuses)
    rc, out, err = ttlib.run_tokterm(["--base-url", "http://127.0.0.1:1/v1", "-c", "-p", "fourth"],
                                     home=home)
    t.eq(rc, 4, "a refused connection: exit 4")
    rc, out, err = ttlib.run_tokterm(["-c", "-p", "fifth"], home=home,
                                     env={"OPENAI_BASE_URL": srv.base("")})
    t.eq(msgs(srv.requests()[-1]),
         [("user", "first"), ("assistant", "first"), ("user", "third"), ("assistant", "third"),
          ("user", "fifth")], "after a refused connection -c still alternates")
    # a scripted run that sent nothing saves nothing; -c skips a failed conversation
    home = ttlib.make_home()
    env = {"OPENAI_BASE_URL": srv.base("")}
    ttlib.run_tokterm(["-p", "kept"], home=home, env=env)
    n_convs = len(ttlib.run_tokterm(["ls"], home=home)[1].decode().splitlines())
    rc, _, _ = ttlib.run_tokterm(["--cache-only", "-p", "never asked"], home=home, env=env)
    t.eq(rc, 7, "--cache-only miss: exit 7")
    rc, _, _ = ttlib.run_tokterm(["-p", "no key"], home=home,
                                 env={"OPENAI_API_KEY": None,
                                      "OPENAI_BASE_URL": "https://api.example.invalid/v1"})
    t.eq(rc, 2, "no key: exit 2")
    t.eq(len(ttlib.run_tokterm(["ls"], home=home)[1].decode().splitlines()), n_convs,
         "a scripted run that sent nothing saves nothing")
    srv.queue(["status=500"])
    no_retries(home)
    rc, _, _ = ttlib.run_tokterm(["-p", "fails"], home=home, env=env)
    t.eq(rc, 3, "HTTP 500: exit 3")
    con = sqlite3.connect(db_path(home))
    n_saved = con.execute("SELECT count(*) FROM conversations").fetchone()[0]
    con.close()
    t.eq(n_saved, 2, "the failed run is saved (it sent a request)")
    ttlib.run_tokterm(["-c", "-p", "go on"], home=home, env=env)
    t.eq(msgs(srv.requests()[-1]), [("user", "kept"), ("assistant", "kept"), ("user", "go on")],
         "-c continues the latest conversation with an answer, not the failed one")

    # --- the system prompt a conversation goes on with is saved: the chat's /system and -s on a
    # resume (until 2026-12 both lived in memory only: the next resume sent the old one, and
    # show and export had the old one)
    home = ttlib.make_home()
    env = {"OPENAI_BASE_URL": srv.base("")}
    ttlib.run_tokterm(["-s", "be terse", "-p", "one"], home=home, env=env)
    with ttlib.Tmux(100, 40) as tm:
        start_chat(tm, srv, home, ["-c"])
        send(tm, "/system Answer only in French", "system prompt")
        send(tm, "two")
        wait_idle(tm, 2)
        tm.send_text("/quit")
        tm.send("Enter")
        tm.wait_exit(5)
    ttlib.run_tokterm(["-c", "-p", "three"], home=home, env=env)
    t.eq(msgs(srv.requests()[-1])[0], ("system", "Answer only in French"),
         "system: the chat's /system is what -c sends next")
    cid = latest_id(home)
    t.eq(export(home, cid).get("system_prompt"), "Answer only in French",
         "system: export has the chat's /system")
    ttlib.run_tokterm(["--conversation", str(cid), "-s", "new system", "-p", "four"], home=home,
                      env=env)
    ttlib.run_tokterm(["-c", "-p", "five"], home=home, env=env)
    t.eq(msgs(srv.requests()[-1])[0], ("system", "new system"),
         "system: -s on a resume is what the next resume sends")
    # a profile's system prompt is for new conversations: a resume keeps the conversation's
    # own, and saves nothing over it (a review found it saved the profile's over it)
    ttlib.write_config(home, "system = Be concise\n")
    ttlib.run_tokterm(["-c", "-p", "six"], home=home, env=env)
    t.eq(msgs(srv.requests()[-1])[0], ("system", "new system"),
         "system: a resume sends the conversation's prompt, not the profile's")
    t.eq(export(home, cid).get("system_prompt"), "new system",
         "system: and the saved one is left as it was")
    # a resume refused (held elsewhere) saves nothing of its -s
    there = {"OPENAI_BASE_URL": srv.base("").replace("127.0.0.1", "localhost")}
    rc, _, _ = ttlib.run_tokterm(["-c", "-s", "never sent", "-p", "x"], home=home, env=there)
    t.ok(rc == 2 and export(home, cid).get("system_prompt") == "new system",
         "system: a refused resume's -s is not saved")

    # --- a resume goes on with the model and role the conversation was held with (until 2026-12
    # it took the profile's model and no role, yet kept the role's system prompt) ------------
    home = ttlib.make_home()
    ttlib.run_tokterm(["-m", "gpt-4o", "-p", "model one"], home=home, env=env)
    ttlib.run_tokterm(["-c", "-p", "model two"], home=home, env=env)
    t.eq(srv.requests()[-1]["body"]["model"], "gpt-4o",
         "resume: -c goes on with the model the conversation asked for")
    ttlib.run_tokterm(["-c", "-m", "gpt-4.1", "-p", "model three"], home=home, env=env)
    t.eq(srv.requests()[-1]["body"]["model"], "gpt-4.1", "resume: -m given now wins")
    ttlib.run_tokterm(["-c", "-p", "model four"], home=home, env=env)
    t.eq(srv.requests()[-1]["body"]["model"], "gpt-4.1",
         "resume: and the next -c goes on with it")
    ttlib.run_tokterm(["--role", "review", "-p", "role one"], home=home, env=env)
    live = srv.requests()[-1]["body"]
    ttlib.run_tokterm(["-c", "-p", "role two"], home=home, env=env)
    resumed = srv.requests()[-1]["body"]
    t.ok(live.get("temperature") == 0.3 and resumed.get("temperature") == 0.3 and
         resumed["model"] == live["model"] and
         msgs({"body": resumed})[0] == msgs({"body": live})[0],
         "resume: a conversation held with --role review goes on with its settings",
         json.dumps({k: v for k, v in resumed.items() if k != "messages"}))
    with ttlib.Tmux(100, 30) as tm:  # the chat's /role is kept too, and /role names it
        start_chat(tm, srv, home, ["-c"])
        send(tm, "/role")
        scr = tm.wait_for("Role: review", 5) or tm.capture()
        t.ok("Role: review" in scr, "resume: the chat's /role names the conversation's role",
             scr)
        send(tm, "/role translate", "Role translate")
        send(tm, "role three")
        wait_idle(tm, 2)
        tm.send("C-d")
        tm.wait_exit(5)
    chat = srv.requests()[-1]["body"]
    ttlib.run_tokterm(["-c", "-p", "role four"], home=home, env=env)
    t.eq(msgs(srv.requests()[-1])[0], msgs({"body": chat})[0],
         "resume: a role switched in the chat is the one -c goes on with")
    # what the command line gives on the resume wins over the conversation's role (a review
    # found the role applied over -m, -s and -t)
    ttlib.run_tokterm(["--role", "review", "-p", "role five"], home=home, env=env)
    ttlib.run_tokterm(["-c", "-m", "cli-model", "-t", "0.9", "-s", "CLI SYSTEM", "-p", "six"],
                      home=home, env=env)
    body = srv.requests()[-1]["body"]
    t.ok(body["model"] == "cli-model" and body.get("temperature") == 0.9 and
         msgs({"body": body})[0] == ("system", "CLI SYSTEM"),
         "resume: -m, -t and -s given now win over the conversation's role",
         json.dumps({k: v for k, v in body.items() if k != "messages"}) + repr(msgs({"body": body})[0]))
    # --role given on a resume is the conversation's from then on
    ttlib.run_tokterm(["-c", "--role", "translate", "-p", "seven"], home=home, env=env)
    seven = srv.requests()[-1]["body"]
    ttlib.run_tokterm(["-c", "-p", "eight"], home=home, env=env)
    eight = srv.requests()[-1]["body"]
    t.ok(msgs({"body": eight})[0] == msgs({"body": seven})[0] and
         eight.get("temperature") == seven.get("temperature"),
         "resume: --role given on a resume is what the next resume takes",
         repr(msgs({"body": seven})[0])[:200] + " / " + repr(msgs({"body": eight})[0])[:200])

    # a conversation held with no role goes on with none, though the config names one now (a
    # helper found the role's temperature sent without its prompt)
    home = ttlib.make_home()
    ttlib.run_tokterm(["-p", "no role"], home=home, env=env)
    ttlib.write_config(home, "role = review\n")
    ttlib.run_tokterm(["-c", "-p", "still none"], home=home, env=env)
    body = srv.requests()[-1]["body"]
    t.ok("temperature" not in body and msgs({"body": body})[0][0] == "user",
         "resume: held with no role, it goes on with none (no role settings, no role prompt)",
         json.dumps({k: v for k, v in body.items() if k != "messages"}))

    # --- the model that answered is saved (a router's, a dated snapshot), not only the one
    # asked for (until 2026-12 show, export and stats had only the one asked for)
    home = ttlib.make_home()
    ttlib.run_tokterm(["-m", "gpt-4o-mini", "-p", "which model"], home=home,
                      env={"OPENAI_BASE_URL": srv.base("served=gpt-4o-mini-2024-07-18")})
    ex = export(home, latest_id(home))
    got = [(m["role"], m.get("model")) for m in ex.get("messages", [])]
    t.ok(got[-1:] == [("assistant", "gpt-4o-mini-2024-07-18")],
         "served: the answer's row has the model the server says answered", repr(got))

    # --- a conversation held with another server is not sent whole to this one unasked (until
    # 2026-12, -c sent a conversation held with -P ollama to the config's cloud profile)
    home = ttlib.make_home()
    there = {"OPENAI_BASE_URL": srv.base("").replace("127.0.0.1", "localhost")}
    rc, _, _ = ttlib.run_tokterm(["-p", "held elsewhere"], home=home, env=there)
    n0 = len(srv.requests())
    rc, _, err = ttlib.run_tokterm(["-c", "-p", "go on"], home=home, env=env)
    err = err.decode(errors="replace")
    t.ok(rc == 2 and len(srv.requests()) == n0 and "was held with localhost:" in err and
         "-P" in err, "elsewhere: -c to another server is refused, nothing sent", err)
    rc, _, err = ttlib.run_tokterm(["--cache-only", "-c", "-p", "go on"], home=home, env=env)
    t.eq(rc, 7, "elsewhere: --cache-only sends nothing, so it is not refused (a cache miss: 7)")
    # a role that names a profile names where requests go
    ttlib.write_config(home, "[here]\nbase_url = %s\n[role hereto]\nprofile = here\n"
                       "system = Be here.\n" % env["OPENAI_BASE_URL"])
    rc, _, err = ttlib.run_tokterm(["--role", "hereto", "-c", "-p", "via the role"], home=home,
                                   env=there)
    t.ok(rc == 0 and msgs(srv.requests()[-1])[-1] == ("user", "via the role"),
         "elsewhere: --role with a profile names where to send it", err.decode(errors="replace"))
    os.remove(os.path.join(home, ".config", "tokterm", "config"))
    rc, _, err = ttlib.run_tokterm(["--base-url", env["OPENAI_BASE_URL"], "-c", "-p", "go on"],
                                   home=home, env=env)
    t.ok(rc == 0 and msgs(srv.requests()[-1])[-1] == ("user", "go on"),
         "elsewhere: --base-url names where to send it: sent", err.decode(errors="replace"))
    ttlib.run_tokterm(["-p", "back there"], home=home, env=there)
    with ttlib.Tmux(110, 30) as tm:
        scr = start_chat(tm, srv, home, ["-c"]) or ""
        scr = tm.wait_for("held with", 5) or tm.capture()
        t.ok("This conversation was held with localhost:" in scr.replace("\n", " "),
             "elsewhere: the chat says where it was held before the next turn goes", scr)
        tm.send("C-d")
        tm.wait_exit(5)

sys.exit(t.done())
