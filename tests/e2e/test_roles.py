#!/usr/bin/env python3
"""End-to-end tests of roles: --role with a built-in, a user file and a [role NAME] section,
the command line winning over the role, tokterm roles (--json), an unknown role, bad front
matter, /role in the chat (tmux, Tab completion). The real binary against the fake server.
Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()


def run(srv, args, **kw):
    env = {"OPENAI_BASE_URL": srv.base("")}
    return ttlib.run_tokterm(["--no-save", "--no-cache"] + args, env=env, **kw)


def body(srv):
    r = srv.requests()
    return (r[-1].get("body") or {}) if r else {}


def system(b):
    m = b.get("messages") or [{}]
    return m[0].get("content") if m[0].get("role") == "system" else None


def text(b):
    return b.decode("utf-8", "replace")


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)


with open(os.path.join(ttlib.srcdir(), "..", "data", "roles", "review.md")) as f:
    REVIEW = f.read().split("---\n", 2)[2].strip()

with ttlib.FakeServer() as srv:
    # --- a built-in: its prompt and temperature in the body ---------------------------------------
    rc, out, err = run(srv, ["--role", "review", "-p", "x"])
    b = body(srv)
    t.eq(rc, 0, "--role review: exit 0")
    t.eq(system(b), REVIEW, "--role review: the built-in's prompt is the system message")
    t.eq(b.get("temperature"), 0.3, "--role review: the role's temperature")
    rc, out, err = run(srv, ["--role", "review", "-t", "1.5", "-p", "x"])
    t.eq(body(srv).get("temperature"), 1.5, "-t on the command line wins over the role")
    rc, out, err = run(srv, ["--role", "review", "-s", "mine", "-p", "x"])
    t.eq(system(body(srv)), "mine", "-s on the command line wins over the role's prompt")

    # --- a user file overrides the built-in of the same name --------------------------------------
    home = ttlib.make_home()
    cfg = os.path.join(home, ".config", "tokterm")
    write(os.path.join(cfg, "roles", "review.md"),
          "---\ntemperature: 0.9   # a comment\nmodel = my-reviewer # after a blank\n---\n"
          "Review like a pirate.\n")
    rc, out, err = run(srv, ["--role", "review", "-p", "x"], home=home)
    b = body(srv)
    t.eq((rc, system(b), b.get("temperature"), b.get("model")),
         (0, "Review like a pirate.", 0.9, "my-reviewer"),
         "a user file overrides the built-in (its comments after values cut off)")

    # --- [role NAME] sections; role = NAME in a profile; the role wins over the profile -----------
    write(os.path.join(cfg, "config"),
          "system = The profile's prompt.\n\n"
          "[role terse]\nsystem = Answer in one word.\ntop_p = 0.5   # comment\n"
          "model = terse-model ; comment\n"
          "extra_body = {\"top_k\": 7}\n\n"
          "[work]\nmodel = work-model\ntemperature = 0.1\nrole = terse\n")
    rc, out, err = run(srv, ["--role", "terse", "-p", "x"], home=home)
    b = body(srv)
    t.eq((rc, system(b), b.get("top_p")), (0, "Answer in one word.", 0.5),
         "a [role NAME] section works (its comments after values cut off)")
    rc, out, err = run(srv, ["-P", "work", "-p", "x"], home=home)
    b = body(srv)
    t.eq((rc, system(b), b.get("model"), b.get("temperature")),
         (0, "Answer in one word.", "terse-model", 0.1),
         "role = NAME in a profile: the role's keys win, the profile's others stay")

    # --- extra_body: in a role file, a [role NAME] section, on the command line ------------------
    write(os.path.join(cfg, "roles", "xb.md"),
          "---\nextra_body: {\"top_k\": 40, \"safety_settings\": [], \"temperature\": 0.25}\n"
          "temperature: 0.6\n---\nhi\n")
    rc, out, err = run(srv, ["--role", "xb", "-p", "x"], home=home)
    b = body(srv)
    t.eq((rc, b.get("top_k"), b.get("safety_settings"), b.get("temperature"), system(b)),
         (0, 40, [], 0.25, "hi"),
         "a role's extra_body: its members at the top level, replacing tokterm's")
    rc, out, err = run(srv, ["--role", "terse", "-p", "x"], home=home)
    t.eq(body(srv).get("top_k"), 7, "extra_body in a [role NAME] section")
    rc, out, err = run(srv, ["--role", "xb", "--extra-body", '{"seed": 3}', "-p", "x"],
                       home=home)
    b = body(srv)
    t.eq((rc, b.get("seed"), b.get("top_k")), (0, 3, None),
         "--extra-body: sent, and it replaces the role's extra_body")
    rc, out, err = run(srv, ["-p", "x"], home=home)
    t.ok("top_k" not in body(srv), "no extra_body: nothing extra", str(body(srv)))
    n0 = len(srv.requests())
    rc, out, err = run(srv, ["--extra-body", "[1]", "-p", "x"], home=home)
    t.ok(rc == 2 and "--extra-body" in text(err) and "JSON object" in text(err),
         "--extra-body not an object: exit 2, the option named", text(err))
    write(os.path.join(cfg, "roles", "bad.md"), "---\ntemperature: 0.2\nextra_body: {\"a\": \n---\n")
    rc, out, err = run(srv, ["--role", "bad", "-p", "x"], home=home)
    t.ok(rc == 2 and "roles/bad.md:3: extra_body must be a JSON object" in text(err)
         and "invalid JSON" in text(err), "a role's bad extra_body: exit 2, FILE:LINE", text(err))
    os.remove(os.path.join(cfg, "roles", "bad.md"))
    bad_cfg = os.path.join(home, "bad-config")
    write(bad_cfg, "model = m\nextra_body = 40\n")
    rc, out, err = run(srv, ["--config", bad_cfg, "-p", "x"], home=home)
    t.ok(rc == 2 and "bad-config:2: extra_body must be a JSON object" in text(err),
         "the config's bad extra_body: exit 2, FILE:LINE", text(err))
    t.eq(len(srv.requests()), n0, "nothing is sent")

    # --- tokterm roles ----------------------------------------------------------------------------
    rc, out, err = run(srv, ["roles"], home=home)
    lines = text(out).splitlines()
    t.eq(rc, 0, "tokterm roles: exit 0")
    for name, src in (("review", "user"), ("terse", "config"), ("shell", "built-in"),
                      ("explain", "built-in"), ("translate", "built-in")):
        t.ok(any(re.match(r"%s +%s +\S" % (name, src), ln) for ln in lines),
             "tokterm roles: %s from %s with its first line" % (name, src), text(out))
    t.ok(not any(ln.startswith("work") for ln in lines), "a profile is not a role", text(out))
    rc, out, err = run(srv, ["roles", "--json"], home=home)
    try:
        j = json.loads(out or b"[]")
    except ValueError:
        j = []
    d = {r.get("name"): r for r in j if isinstance(r, dict)} if isinstance(j, list) else {}
    t.eq((d.get("review", {}).get("source"), d.get("review", {}).get("prompt")),
         ("user", "Review like a pirate."), "roles --json: source and prompt")

    # --- an unknown role; bad front matter --------------------------------------------------------
    n0 = len(srv.requests())
    rc, out, err = run(srv, ["--role", "nope", "-p", "x"], home=home)
    t.eq(rc, 2, "an unknown role: exit 2")
    t.ok("unknown role 'nope'" in text(err) and "shell" in text(err) and "terse" in text(err),
         "the message names the known roles", text(err))
    t.eq(len(srv.requests()), n0, "nothing is sent")
    for content, want, name in (
            ("---\ntemperature: 0.2\nno colon here\n---\nhi\n",
             "roles/bad.md:3: expected 'key: value'", "bad front matter: exit 2, FILE:LINE"),
            ("---\ntemperature: 7\n---\nhi\n", "roles/bad.md:2: temperature must be",
             "a bad value: FILE:LINE"),
            ("---\napi_key: sk-x\n---\nhi\n", "roles/bad.md:2: a role cannot set 'api_key'",
             "a role cannot set a key or where requests go"),
            ("---\ntemperature: 0.2\n", "roles/bad.md:1: the front matter opened with '---' is "
             "never closed", "unclosed front matter"),
            ("---\ntemperature: 0.2\n\nBe terse.\n", "roles/bad.md:1: the front matter opened "
             "with '---' is never closed", "unclosed front matter before a prompt: said so, not "
             "that the prompt is not 'key: value'")):
        write(os.path.join(cfg, "roles", "bad.md"), content)
        rc, out, err = run(srv, ["--role", "bad", "-p", "x"], home=home)
        t.ok(rc == 2 and want in text(err), name, text(err))
        # `tokterm roles` finds the same fault (until 2026-12 a bad value passed the listing)
        rc, out, err = ttlib.run_tokterm(["roles"], home=home)
        t.ok(rc == 2 and want in text(err), "roles lists it as faulty: " + name, text(err))
    write(os.path.join(cfg, "roles", "bad.md"), "---\n\x1b]0;owned\x07 x\n---\n")
    rc, out, err = run(srv, ["--role", "bad", "-p", "x"], home=home)
    t.ok(rc == 2 and b"\x1b" not in err and b"\x07" not in err,
         "a role file's escape sequences are made harmless in the message", repr(err))
    os.remove(os.path.join(cfg, "roles", "bad.md"))

    # --- /role in the chat (tmux) -----------------------------------------------------------------
    if not ttlib.Tmux.available():
        t.skip("/role in tmux", "tmux is not installed", tool="tmux")
    else:
        with ttlib.Tmux(100, 20) as tm:
            tm.run([ttlib.tokterm_path(), "--no-save", "--no-cache"],
                   ttlib.clean_env(home=home, env={"OPENAI_BASE_URL": srv.base("")}))
            t.ok(tm.wait_for(re.compile("F1|\u203a"), 10) is not None, "the chat opens",
                 tm.capture())
            tm.send_text("/role ter")
            tm.send("Tab")
            t.ok(tm.wait_for(re.compile(r"\u203a /role terse *\n"), 3) is not None,
                 "Tab completes a role name", tm.capture())
            tm.send("Enter")
            t.ok(tm.wait_for("Role terse", 3) is not None, "/role terse: said", tm.capture())
            n0 = len(srv.requests())
            tm.send_text("hello there")
            tm.send("Enter")
            deadline = time.monotonic() + 10
            while len(srv.requests()) <= n0 and time.monotonic() < deadline:
                time.sleep(0.05)
            b = body(srv)
            t.eq((system(b), b.get("top_p"), b.get("model"), b.get("top_k")),
                 ("Answer in one word.", 0.5, "terse-model", 7),
                 "/role terse: the next request has its prompt and settings")
            tm.send_text("/role")
            tm.send("Enter")
            t.ok(tm.wait_for(re.compile(r"Role: terse\..*review", re.S), 3) is not None,
                 "/role alone: the current one and the others", tm.capture())
            tm.send_text("/role nope")
            tm.send("Enter")
            t.ok(tm.wait_for("unknown role 'nope'", 3) is not None, "/role nope: refused",
                 tm.capture())
            for i, word in enumerate(("none", "off")):
                if i:
                    tm.send_text("/role terse")
                    tm.send("Enter")
                    tm.wait_for("Role terse", 3)
                tm.send_text("/role " + word)
                tm.send("Enter")
                t.ok(tm.wait_for("No role", 3) is not None, "/role %s: said" % word,
                     tm.capture())
                n0 = len(srv.requests())
                tm.send_text("again %d" % i)
                tm.send("Enter")
                deadline = time.monotonic() + 10
                while len(srv.requests()) <= n0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                b = body(srv)
                t.eq((system(b), "top_p" in b, "top_k" in b, b.get("model") == "terse-model"),
                     ("The profile's prompt.", False, False, False),
                     "/role %s: the next request has the profile's prompt and settings" % word)

t.done()
