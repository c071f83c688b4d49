#!/usr/bin/env python3
"""End-to-end tests of the chat's tool-call approval, in tmux, with the test tools
(TOKTERM_TEST_TOOLS) and the fake server replaying tool-call streams: every call is shown
(the tool and its arguments pretty-printed) and waits for y (once), a (always for this tool in
this conversation), n (refuse: the model is told), e (edit the arguments as JSON, checked
against the schema); nothing runs before the key; Esc during a running tool cancels it; tool
calls and results appear one line each, /expand N shows one whole; a resumed conversation
shows its tool lines; `a` does not carry over to a new conversation. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()

if not ttlib.Tmux.available():
    t.skip("tool approval in tmux", "tmux is not installed", tool="tmux")
    sys.exit(t.done())

ASK = "y run once  n refuse"
TWO = "replay=openai_tool_calls.sse"  # test.add {"a": 2, "b": 40}, then test.echo
ANSWER = "reply=the%20sum%20is%2042"


def tool_msgs(req):
    """The role-tool messages of a request: {tool_call_id: content}."""
    return {m.get("tool_call_id"): m.get("content")
            for m in (req.get("body") or {}).get("messages") or [] if m.get("role") == "tool"}


ADD, ECHO = "call_DdmO9pD3xa9XTPNJ32zg2hcA", "call_ABSg8GmpTnHUKRPB9aFCk1iE"

with ttlib.FakeServer() as srv:
    home = ttlib.make_home()

    def chat(extra=(), cols=110):
        tm = ttlib.Tmux(cols, 34)
        tm.__enter__()
        tm.run([ttlib.tokterm_path(), "--no-cache", "--base-url", srv.base()] + list(extra),
               ttlib.clean_env(home=home, env={"TOKTERM_TEST_TOOLS": "1"}))
        tm.wait_for(re.compile("F1|\u203a"), 10)
        return tm

    def ask(tm, prompt):
        tm.send_text(prompt)
        tm.send("Enter")
        return tm.wait_for(ASK, 10)

    # --- y once, n refuse -----------------------------------------------------------------
    srv.queue([TWO, ANSWER])
    tm = chat()
    n0 = len(srv.requests())
    screen = ask(tm, "add 2 and 40")
    t.ok(screen is not None and "the model calls test.add (test tools)" in screen and
         re.search(r'"a": 2,\s*\n.*"b": 40', screen) is not None,
         "the call is shown: the tool, its arguments pretty-printed", tm.capture())
    t.eq(len(srv.requests()), n0 + 1, "nothing more is sent before the key")
    tm.send("Enter")  # Enter alone answers nothing
    t.ok(ASK in tm.capture(), "Enter alone does not approve")
    tm.send("y")
    # 20 s: on a loaded machine (a CI run under ASan) the first wait of 10 s once ran out; if
    # it runs out again, the diagnostic says whether the question came later without a key
    t0 = time.monotonic()
    # the call's arguments are rows below its title: wait for them too
    screen = tm.wait_for(re.compile(r'the model calls test\.echo[\s\S]*"text": "h'), 20)
    waited, cap = time.monotonic() - t0, tm.capture()
    late = None if screen is not None else tm.wait_for("the model calls test.echo", 10)
    t.ok(screen is not None and '"text": "h' in screen, "y: the next call is asked about",
         "after %.1f s:\n%s\n%s" % (waited, cap, "it came later, with no key" if late else
                                    "still not asked 10 s later"))
    tm.send("n")
    screen = tm.wait_for("the sum is 42", 10)
    t.ok(screen is not None, "the answer after the tools", tm.capture())
    req = srv.requests()[-1]
    tm_ = tool_msgs(req)
    t.eq(tm_.get(ADD), "42", "y: test.add ran, its result sent back with its call id")
    t.ok("refused" in (tm_.get(ECHO) or ""), "n: the model is told the call was refused", tm_)
    t.ok(re.search(r"\u2699 1 test\.add \{\"a\": 2, \"b\": 40\}", screen) is not None and
         re.search(r"\u21b3 1 ok, 2 bytes, [0-9.]+s: 42 \(/expand 1\)", screen) is not None,
         "the call and its result: one line each", screen)
    t.ok(re.search(r"\u2699 2 test\.echo .*refused", screen) is not None,
         "a refused call is marked", screen)
    # the user said no: the warning says so, not "not allowed: see --allow-tool" (a flag of
    # scripted mode, until 2026-12 the chat's warning too)
    t.ok("you refused the tool call test.echo" in screen and "--allow-tool" not in screen,
         "n: the warning says the user refused it", screen)
    tm.send_text("/expand 1")
    tm.send("Enter")
    screen = tm.wait_for(re.compile(r"Tool call 1: test\.add[\s\S]*Result \(2 bytes"), 5)
    t.ok(screen is not None and "Result (2 bytes" in screen, "/expand 1: the call whole",
         tm.capture())
    # /context counts the tool definitions every request carries (until 2026-12 it left them
    # out, and the budget with it: 14 MCP tools are ~2,000 tokens)
    tm.send_text("/context")
    tm.send("Enter")
    screen = tm.wait_for(re.compile(r"tool definitions \d+ \(sent with every request\)"), 5)
    m = re.search(r"tool definitions (\d+)", screen or "")
    t.ok(m is not None and int(m.group(1)) >= 30,
         "/context: the tool definitions are counted", tm.capture())

    # --- a always: the same tool runs unasked in this conversation -------------------------
    srv.queue([TWO, ANSWER, TWO, ANSWER])
    ask(tm, "again")
    tm.send("a")
    tm.wait_for("the model calls test.echo", 10)
    tm.send("y")
    tm.wait_for(re.compile(r"the sum is 42(.|\n)*the sum is 42"), 10)
    n1 = len(srv.requests())
    tm.send_text("and again")
    tm.send("Enter")
    screen = tm.wait_for("the model calls test.echo", 10)
    t.ok(screen is not None and "the model calls test.add" not in screen,
         "a: test.add runs unasked the next time, test.echo is still asked", tm.capture())
    tm.send("y")
    tm.wait_for(re.compile(r"(the sum is 42(.|\n)*){3}"), 10)
    t.eq(tool_msgs(srv.requests()[-1]).get(ADD), "42", "a: the unasked call ran")

    # --- /new forgets `a` -------------------------------------------------------------------
    tm.send_text("/new")
    tm.send("Enter")
    srv.queue([TWO, ANSWER])
    screen = ask(tm, "fresh")
    t.ok(screen is not None and "the model calls test.add" in screen,
         "/new: test.add is asked about again", tm.capture())

    # --- e edit: bad JSON refused, a schema violation refused, a good edit runs ------------
    tm.send("e")
    tm.wait_for("editing: Enter takes it", 5)
    tm.send("F2")  # the conversation browser must not open under the question
    t.ok(tm.wait_for("Conversations (", 1) is None and "\u203a {" in tm.capture(),
         "e: F2 while editing opens no browser", tm.capture())
    tm.send("C-u")  # readline: clear the line
    tm.send_text('{"a": 1,')
    tm.send("Enter")
    t.ok(tm.wait_for("not taken:", 5) is not None, "e: invalid JSON is not taken",
         tm.capture())
    tm.send("C-u")
    tm.send_text('{"a": "one", "b": 1}')
    tm.send("Enter")
    # "not taken:" of the invalid JSON can still be on screen: wait for this one's field
    screen = tm.wait_for(re.compile(r"not taken:.*\$\.a"), 5)
    t.ok(screen is not None and "$.a" in screen, "e: arguments against the schema are not "
         "taken, the message names the field", tm.capture())
    tm.send("C-u")
    tm.send_text('{"a": 1, "b": 1}')
    tm.send("Enter")
    screen = tm.wait_for(re.compile(r'"a": 1,\s*\n.*"b": 1[\s\S]*' + re.escape(ASK)), 5)
    t.ok(screen is not None and ASK in screen, "e: the edit is shown and asked again",
         tm.capture())
    tm.send("y")
    tm.wait_for("the model calls test.echo", 10)
    tm.send("Escape")
    tm.wait_for("the sum is 42", 10)
    tmsgs = tool_msgs(srv.requests()[-1])
    added = tmsgs.get(ADD) or ""
    t.ok(added.endswith("]\n2") and added.startswith(
         "[the user edited this call's arguments before it ran; the model had asked for: ") and
         '"b": 40' in added,
         "e then y: the edited arguments ran (1 + 1), and the model is told they were edited",
         added)
    t.ok("refused" in (tmsgs.get(ECHO) or ""), "Esc at the question refuses", tmsgs)
    body = srv.requests()[-1]["body"]
    calls = [c for m in body["messages"] for c in m.get("tool_calls") or []]
    t.ok(any(c["function"]["arguments"] == '{"a":1,"b":1}' for c in calls),
         "the edited arguments are what the history carries", calls)
    # ... and what is saved: a resume shows and sends the call that ran, not the model's
    # (until 2026-12 the row kept {"a": 2, "b": 40})
    db = sqlite3.connect(ttlib.history_db(home))
    tool = db.execute("SELECT tool FROM messages WHERE role = 'assistant' AND tool IS NOT NULL "
                      "ORDER BY id DESC LIMIT 1").fetchone()
    db.close()
    t.ok(tool and '{\\"a\\":1,\\"b\\":1}' in tool[0].replace(" ", "") and
         '\\"b\\":40' not in tool[0].replace(" ", ""),
         "the edited arguments are what the conversation saved", tool)

    # --- Esc while a tool runs cancels it; the status bar shows round, tool, time ----------
    srv.queue(["replay=openai_tool_sleep.sse", ANSWER])
    ask(tm, "sleep")
    tm.send("y")
    screen = tm.wait_for(re.compile(r"round 1 \u00b7 test\.sleep \d"), 5)
    t.ok(screen is not None, "the status bar: the round, the tool and its time",
         ttlib.status_bar(tm.capture()))
    n2 = len(srv.requests())
    tm.send("Escape")
    screen = tm.wait_for(re.compile(r"\u21b3 \d+ error.*cancel"), 5)
    t.ok(screen is not None, "Esc: the running tool is cancelled at once", tm.capture())
    t.eq(len(srv.requests()), n2, "Esc: the turn ends, no further request")
    # its tool ran (cancelled): the turn stays, with that result, and the next request carries
    # it (until 2026-12 the prompt came back and the request left the turn out: the model
    # never knew a tool had run)
    screen = tm.wait_for("its tools ran: the turn stays", 5) or tm.capture()
    t.ok("its tools ran: the turn stays" in screen and "\u203a sleep" not in screen,
         "Esc: the turn whose tool ran stays; the hint says so", screen)
    srv.queue([ANSWER])
    n3 = len(srv.requests())
    tm.send_text("and now?")
    tm.send("Enter")
    tm.wait_for(re.compile(r"and now\?[\s\S]*\u2713"), 10)
    sent = srv.requests()[n3:]
    msgs = sent[0]["body"]["messages"] if sent else []
    t.ok([m.get("content") for m in msgs if m["role"] == "user"][-2:] == ["sleep", "and now?"] and
         any(m["role"] == "tool" and "cancelled by the user" in (m.get("content") or "")
             for m in msgs),
         "the next request carries the prompt and the cancelled call's result",
         json.dumps(msgs)[-1200:])
    tm.send("C-u")
    tm.send("C-d")
    t.eq(tm.wait_exit(10), 0, "the chat quits")
    tm.kill()
    # show says the turn went unanswered (until 2026-12 it read as any answered turn)
    db = sqlite3.connect(ttlib.history_db(home))
    cid = db.execute("SELECT max(id) FROM conversations").fetchone()[0]
    db.close()
    rc, out, _ = ttlib.run_tokterm(["show", str(cid)], home=home)
    shown = out.decode(errors="replace")
    t.ok(rc == 0 and re.search(r"sleep\n\n\*not answered: no answer was saved for this turn; "
                               r"a request carries the prompt and its tool rounds", shown)
         is not None,
         "show: the turn whose tool was cancelled is marked not answered", shown[-1500:])

    # --- resume: the tool lines come back ---------------------------------------------------
    tm = chat(["-c"])
    screen = tm.wait_for(re.compile(r"\u2699 \d+ test\.add[\s\S]*\u21b3 \d+ ok"), 10)
    t.ok(screen is not None and re.search(r"\u2699 \d+ test\.add", screen) is not None and
         re.search(r"\u21b3 \d+ ok", screen) is not None,
         "resume: the saved tool calls and results, one line each", tm.capture())
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()
    # ... with what the model thought and said before its calls, as shown live (until 2026-12
    # a resume showed the calls alone, though their text is sent again with them)
    srv.clear_queue()
    srv.queue(["replay=anthropic_tool_use.sse", ANSWER])
    rc, _, err = ttlib.run_tokterm(["--api", "anthropic", "--base-url", srv.base(),
                                    "--allow-tool", "test.*", "-p", "add with words"], home=home,
                                   env={"ANTHROPIC_API_KEY": ttlib.TEST_KEY,
                                        "TOKTERM_TEST_TOOLS": "1"})
    tm = chat(["-c"])
    screen = tm.wait_for(re.compile(r"add with words[\s\S]*\u2699 \d+ test\.add"), 10) or ""
    t.ok(rc == 0 and re.search(r"add with words\n[\s\S]*I need the sum and an echo\.\n[\s\S]*"
                               r"Let me check\.\n[\s\S]*asked for tools\n[\s\S]*\u2699 \d+ "
                               r"test\.add", screen) is not None,
         "resume: a round's reasoning and text before its calls (rc %d)" % rc,
         tm.capture() + err.decode(errors="replace"))
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()

    # --- --allow-tool in the chat: no question ----------------------------------------------
    srv.queue([TWO, ANSWER])
    tm = chat(["--allow-tool", "test.*"])
    tm.send_text("allowed")
    tm.send("Enter")
    screen = tm.wait_for("the sum is 42", 10)
    t.ok(screen is not None and ASK not in screen, "--allow-tool test.*: no question",
         tm.capture())
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()

    # --- allow = in the config: unasked in every conversation -------------------------------
    home2 = ttlib.make_home()
    cfg = os.path.join(home2, ".config", "tokterm")
    os.makedirs(cfg, mode=0o700)
    with open(os.path.join(cfg, "config"), "w") as f:
        f.write("allow = test.add, *.nothing\n")
    os.chmod(os.path.join(cfg, "config"), 0o600)
    home = home2
    srv.queue([TWO, ANSWER, TWO, ANSWER])
    tm = chat()
    screen = ask(tm, "config allows add")
    t.ok(screen is not None and "the model calls test.echo" in screen and
         "the model calls test.add" not in screen,
         "allow = test.add: test.add runs unasked, test.echo is asked", tm.capture())
    tm.send("n")
    tm.wait_for("the sum is 42", 10)
    tm.send_text("/new")
    tm.send("Enter")
    screen = ask(tm, "a new conversation")
    t.ok(screen is not None and "the model calls test.echo" in screen,
         "allow = test.add: unasked in a new conversation too", tm.capture())
    tm.send("n")
    tm.wait_for("the sum is 42", 10)
    t.eq(tool_msgs(srv.requests()[-1]).get(ADD), "42", "allow = test.add: it ran")
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()

    # --- a narrow window still shows every choice's key (until 2026-12 "n refuse  e edit" came
    # last, after the tool's name, and a 50-column row cut them off) ------------------------
    srv.queue([TWO, ANSWER])
    tm = chat(cols=50)
    screen = ask(tm, "narrow") or tm.capture()
    row = [ln for ln in screen.split("\n") if "y run once" in ln]
    t.ok(row and "n refuse  e edit  a always" in row[-1],
         "a 50-column window: y, n, e and a are all on the choices row", screen)
    tm.kill()

# --- the done-when: an MCP filesystem server's read, approved in the chat -----------------------
def modules():
    for d in (os.environ.get("TOKTERM_MCP_MODULES"),
              os.path.join(ttlib.srcdir(), "mcp", "node_modules")):
        if d and os.path.isdir(os.path.join(d, "@modelcontextprotocol", "server-filesystem")):
            return os.path.abspath(d)
    return None


def tool_call_sse(call_id, wire, args):
    """A chat-completions stream that asks for one call."""
    def chunk(delta, finish=None):
        return "data: " + json.dumps({"id": "chatcmpl-fs", "object": "chat.completion.chunk",
                                      "created": 1733000000, "model": "gpt-4o-mini",
                                      "choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}]}) + "\n\n"
    return (chunk({"role": "assistant", "content": None}) +
            chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                   "function": {"name": wire, "arguments": args}}]}) +
            chunk({}, "tool_calls") + "data: [DONE]\n\n")


# --- every dialect: the same question, the result back in the dialect's shape ----------------
with ttlib.FakeServer() as dsrv:
    for api, fixture, base, key_var in (
            ("anthropic", "anthropic_tool_use.sse", dsrv.base(), "ANTHROPIC_API_KEY"),
            ("gemini", "gemini_tool_call.sse", dsrv.url("/v1beta"), "GEMINI_API_KEY"),
            ("responses", "responses_tool_call.sse", dsrv.base(), "OPENAI_API_KEY")):
        dsrv.queue(["replay=" + fixture, "reply=The%20sum%20is%2042."])
        tm = ttlib.Tmux(110, 34)
        tm.__enter__()
        tm.run([ttlib.tokterm_path(), "--no-save", "--no-cache", "--api", api, "--base-url",
                base], ttlib.clean_env(env={"TOKTERM_TEST_TOOLS": "1", key_var: ttlib.TEST_KEY}))
        tm.wait_for(re.compile("F1|\u203a"), 10)
        tm.send_text("add 2 and 40")
        tm.send("Enter")
        screen = tm.wait_for(ASK, 10)
        t.ok(screen is not None and "the model calls test.add" in screen and
             re.search(r'"a": 2,\s*\n.*"b": 40', screen) is not None,
             "%s: the call is asked about, its arguments pretty-printed" % api, tm.capture())
        tm.send("y")
        tm.wait_for("the model calls test.echo", 10)
        tm.send("n")
        screen = tm.wait_for("The sum is 42.", 10)
        last = json.dumps(dsrv.requests()[-1].get("body") or {})
        t.ok(screen is not None and "42" in last and "refused" in last,
             "%s: approved and refused results go back, the answer comes" % api,
             (tm.capture() or "") + last[-600:])
        tm.send("C-d")
        tm.wait_exit(10)
        tm.kill()

# --- arguments too long for the panel: shown cut, sent whole, not editable --------------------
fixtures = ttlib.tempdir("tt-fix-")
big = "x" * 200000
with open(os.path.join(fixtures, "big.sse"), "w") as f:
    f.write(tool_call_sse("call_big1", "test__echo", json.dumps({"text": big})))
with ttlib.FakeServer(extra_args=["--fixtures", fixtures]) as bsrv:
    bsrv.queue(["replay=big.sse", "reply=done"])
    tm = ttlib.Tmux(110, 34)
    tm.__enter__()
    tm.run([ttlib.tokterm_path(), "--no-save", "--no-cache", "--base-url", bsrv.base()],
           ttlib.clean_env(env={"TOKTERM_TEST_TOOLS": "1"}))
    tm.wait_for(re.compile("F1|\u203a"), 10)
    tm.send_text("echo a lot")
    tm.send("Enter")
    screen = tm.wait_for(ASK, 10)
    rows = re.search(r"lines 1-\d+ of (\d+) \(PgUp/PgDn\)", screen or "")
    t.ok(screen is not None and rows and int(rows.group(1)) < 1000 and "e edit" not in screen,
         "200 KB of arguments: the panel shows the start (bounded rows), no edit", tm.capture())
    for _ in range(40):
        tm.send("NPage")
    t.ok(tm.wait_for("bytes more: they are sent whole", 5) is not None,
         "PgDn: the panel's end says the rest is sent whole", tm.capture())
    tm.send("e")
    t.ok(ASK in tm.capture() and "editing" not in tm.capture(), "e does nothing then")
    tm.send("y")
    tm.wait_for("done", 10)
    body = bsrv.requests()[-1]["body"]
    args = [c["function"]["arguments"] for m in body["messages"] for c in m.get("tool_calls") or []]
    t.ok(args and json.loads(args[0]).get("text") == big and
         "x" * 1000 in (tool_msgs(bsrv.requests()[-1]).get("call_big1") or ""),
         "the call ran with the whole arguments",
         "%r / %r" % ([len(a) for a in args],
                      (tool_msgs(bsrv.requests()[-1]).get("call_big1") or "")[:80]))
    # its 200 KB result goes to the model cut to 64 KiB: the result line says so (until
    # 2026-12 it gave the whole size alone)
    t.ok(re.search(r"\u21b3 \d+ ok, \d+ bytes \(the model gets its start and end, 64 KiB\)",
                   tm.capture()) is not None,
         "a result over 64 KiB: its line says the model gets 64 KiB of it", tm.capture())
    tm.send("C-d")
    tm.wait_exit(10)
    tm.kill()

node, mods = shutil.which("node"), modules()
if not node or not mods:
    t.skip("the chat approves a read by an MCP filesystem server",
           "node or tests/mcp/node_modules missing (npm ci in tests/mcp)", tool="node")
    sys.exit(t.done())
root = ttlib.tempdir("tt-fs-")
notes = os.path.join(root, "notes.txt")
with open(notes, "w") as f:
    f.write("the secret number is 4217\n")
with open(os.path.join(fixtures, "fs_read.sse"), "w") as f:
    f.write(tool_call_sse("call_fs1", "fs__read_text_file", json.dumps({"path": notes})))
home3 = ttlib.make_home()
cfgdir = os.path.join(home3, ".config", "tokterm")
os.makedirs(cfgdir, mode=0o700)
with open(os.path.join(cfgdir, "config"), "w") as f:
    f.write("mcp = fs\n\n[mcp fs]\ncommand = %s %s %s\n" % (
        node, os.path.join(mods, "@modelcontextprotocol", "server-filesystem", "dist",
                           "index.js"), root))
os.chmod(os.path.join(cfgdir, "config"), 0o600)
with ttlib.FakeServer(extra_args=["--fixtures", fixtures]) as fsrv:
    fsrv.queue(["replay=fs_read.sse", "reply=The%20file%20says%204217."])
    tm = ttlib.Tmux(110, 34)
    tm.__enter__()
    tm.run([ttlib.tokterm_path(), "--no-cache", "--base-url", fsrv.base()],
           ttlib.clean_env(home=home3))
    tm.wait_for(re.compile("F1|\u203a"), 10)
    tm.send_text("what does notes.txt say?")
    tm.send("Enter")
    screen = tm.wait_for(ASK, 60)
    t.ok(screen is not None and "the model calls fs.read_text_file (MCP server fs)" in screen
         and notes in screen, "MCP: the read is shown with its server and path", tm.capture())
    tools = (fsrv.requests()[0].get("body") or {}).get("tools") or []
    t.ok(any(x.get("function", {}).get("name") == "fs__read_text_file" for x in tools),
         "MCP: the server's tools are offered to the model")
    tm.send("y")
    screen = tm.wait_for("The file says 4217.", 30)
    t.ok(screen is not None, "MCP: approved, the answer comes", tm.capture())
    res = tool_msgs(fsrv.requests()[-1]).get("call_fs1") or ""
    t.ok("the secret number is 4217" in res, "MCP: the file's text went back to the model",
         res)
    tm.send("C-d")
    t.eq(tm.wait_exit(15), 0, "MCP: the chat quits (the server stopped)")
    tm.kill()

sys.exit(t.done())
