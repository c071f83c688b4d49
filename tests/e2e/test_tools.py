#!/usr/bin/env python3
"""End-to-end tests of function calling in scripted mode: the fake server replays tool-call
streams (tests/fixtures/*tool*.sse), the test tools (TOKTERM_TEST_TOOLS) answer, and the next
request must carry the calls and their results exactly; --allow-tool decides what runs; the
round limit; --json; the rows saved and a resume that sends the same history. Prints TAP."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import re  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ttlib  # noqa: E402

t = ttlib.Tap()
KEY = ttlib.TEST_KEY
ADD_ID = "call_DdmO9pD3xa9XTPNJ32zg2hcA"
ECHO_ID = "call_ABSg8GmpTnHUKRPB9aFCk1iE"


def run(srv, home, args, tools=True, env_extra=None, **kw):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": srv.base()}
    env.update(env_extra or {})
    if tools:
        env["TOKTERM_TEST_TOOLS"] = "1"
    return ttlib.run_tokterm(args, env=env, home=home, **kw)


def text(b):
    return b.decode("utf-8", "replace")


def bodies(srv, since):
    return [r.get("body") or {} for r in srv.requests()[since:]]


with ttlib.FakeServer() as srv:
    home = ttlib.make_home()
    db = os.path.join(home, "tt.db")

    # --- 1. two parallel calls, both allowed: run, results sent back, the answer follows ---
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_calls.sse", "reply=The sum is 42."])
    rc, out, err = run(srv, home, ["--db", db, "--allow-tool", "test.*", "-p", "add 2 and 40"])
    t.ok(rc == 0 and text(out).strip() == "The sum is 42.",
         "allowed calls run and the model answers (rc %d)" % rc, text(err))
    b = bodies(srv, n0)
    t.ok(len(b) == 2, "two requests: the call, then the results (%d)" % len(b))
    names = [x["function"]["name"] for x in b[0].get("tools", [])] if b else []
    t.ok("test__add" in names and "test__echo" in names,
         "the request offers the test tools by wire name", repr(names))
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    roles = [m["role"] for m in msgs]
    t.ok(roles == ["user", "assistant", "tool", "tool"], "the second request: user, the "
         "assistant's calls, two results (%r)" % roles)
    calls = msgs[1].get("tool_calls", []) if len(msgs) > 1 else []
    t.ok([c["id"] for c in calls] == [ADD_ID, ECHO_ID] and
         calls[0]["function"]["arguments"] == '{"a": 2, "b": 40}' and
         calls[1]["function"]["name"] == "test__echo",
         "the calls go back as they came (ids, names, arguments exactly)", json.dumps(calls))
    res = [(m.get("tool_call_id"), m.get("content")) for m in msgs[2:]]
    t.ok(res and res[0] == (ADD_ID, "42") and res[1][0] == ECHO_ID and
         json.loads(res[1][1]) == {"text": "h\u00e9llo \"world\" \u2603"},
         "each result is paired with its call id", repr(res))
    t.ok("tool test.add" in text(err) and "tool result: test.add 42" in text(err),
         "stderr shows the call and its result", text(err))

    # --- calls when no tool was offered (a broken or hostile server): not run, said, exit 9
    # (until 2026-12 dropped without a word, exit 0) ---
    srv.queue(["replay=openai_tool_calls.sse"])
    n0 = len(srv.requests())
    rc, out, err = run(srv, ttlib.make_home(), ["-p", "add"], tools=False)
    t.ok(rc == 9 and "the model asked for a tool (test__add, ...) but none was offered" in
         text(err) and len(srv.requests()) == n0 + 1 and "tools" not in bodies(srv, n0)[0],
         "calls no tool was offered for: not run, said, exit 9 (rc %d)" % rc, text(err))
    # a call named with the key (a server that echoes what it was sent): the name is starred
    # in the message (until 2026-12 printed and saved as it came)
    sse = ('data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
           '"type":"function","function":{"name":"x%sx","arguments":"{}"}}]}}]}\n\n'
           'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
           'data: [DONE]\n\n' % KEY)
    srv.queue(["raw=%s,ctype=text/event-stream" % urllib.parse.quote(sse, safe="")])
    rc, out, err = run(srv, ttlib.make_home(), ["-p", "add"], tools=False)
    t.ok(rc == 9 and "but none was offered" in text(err) and KEY not in text(err),
         "a call no tool was offered for, named with the key: the key starred (rc %d)" % rc,
         text(err))

    # --- --json: each round's reasoning with its calls, the last round's at the top (until
    # 2026-12 the first round's reasoning was dropped: only the last round's was printed) ---
    def sse(finish, *deltas):
        ev = ['data: {"choices":[{"index":0,"delta":%s}]}\n\n' % json.dumps(d) for d in deltas]
        ev.append('data: {"choices":[{"index":0,"delta":{},"finish_reason":"%s"}]}\n\n' % finish)
        return ("raw=%s,ctype=text/event-stream" %
                urllib.parse.quote("".join(ev) + "data: [DONE]\n\n", safe=""))
    srv.queue([sse("tool_calls", {"reasoning_content": "first I add"},
                   {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function":
                                    {"name": "test__add", "arguments": '{"a": 1, "b": 2}'}}]}),
               sse("stop", {"reasoning_content": "then I answer"}, {"content": "3"})])
    rc, out, err = run(srv, ttlib.make_home(), ["--allow-tool", "test.*", "--json", "-p", "1+2"])
    j = json.loads(out) if rc == 0 and out.strip() else {}
    tl = j.get("tools") or [{}]
    t.ok(j.get("content") == "3" and j.get("reasoning") == "then I answer" and
         tl[0].get("reasoning") == "first I add" and tl[0].get("result") == "3",
         "--json: the tool round's reasoning with its calls, the answer's at the top (rc %d)" % rc,
         text(out) + text(err))

    # --- 2. the rows saved: the calls on the assistant row, a tool row per result ---
    c = sqlite3.connect(db)
    rows = c.execute("SELECT role, content, tool, status FROM messages ORDER BY id").fetchall()
    c.close()
    t.ok([r[0] for r in rows] == ["user", "assistant", "tool", "tool", "assistant"],
         "saved: user, the round's assistant row, two tool rows, the answer",
         repr([r[0] for r in rows]))
    tool1 = json.loads(rows[1][2]) if len(rows) > 1 and rows[1][2] else {}
    t.ok([x.get("id") for x in tool1.get("calls", [])] == [ADD_ID, ECHO_ID] and
         tool1["calls"][0].get("name") == "test.add",
         "the assistant row keeps its calls (id, name)", repr(tool1))
    tool2 = json.loads(rows[2][2]) if len(rows) > 2 and rows[2][2] else {}
    t.ok(tool2.get("id") == ADD_ID and rows[2][1] == "42" and rows[4][2] is None and
         rows[4][1] == "The sum is 42.", "a tool row names its call; the answer has no tool",
         repr(rows))

    rc1, shown, _ = run(srv, home, ["--db", db, "show", "1"])
    rc2, exported, _ = run(srv, home, ["--db", db, "export", "1", "--format", "json"])
    rc3, found, _ = run(srv, home, ["--db", db, "search", "world"])
    ex = json.loads(exported) if rc2 == 0 else {}
    ex_tools = [m.get("tool") for m in ex.get("messages", [])]
    t.ok(rc1 == 0 and "- call `test.add` (%s): {\"a\": 2, \"b\": 40}" % ADD_ID in text(shown)
         and "*result of `test.add` (%s)*" % ADD_ID in text(shown),
         "show: the calls and the call each result answers", text(shown))
    t.ok(rc2 == 0 and ex_tools[1]["calls"][0]["arguments"] == '{"a": 2, "b": 40}' and
         ex_tools[2]["id"] == ADD_ID and rc3 == 0 and " tool " in text(found),
         "export --format json has each row's tool part; search finds a tool's result",
         json.dumps(ex_tools) + text(found))

    # --- 3. resume: the next request carries the same rounds, paired ---
    n0 = len(srv.requests())
    srv.queue(["reply=ok"])
    rc, out, err = run(srv, home, ["--db", db, "-c", "-p", "and again?"])
    b = bodies(srv, n0)
    msgs2 = b[0].get("messages", []) if b else []
    t.ok(rc == 0 and msgs2[:4] == msgs[:4] and
         [m["role"] for m in msgs2] == ["user", "assistant", "tool", "tool", "assistant", "user"],
         "a resume sends the saved rounds exactly as they were sent", json.dumps(msgs2)[:2000])

    # --- 4. scripted mode without --allow-tool: refused, the model told, exit 9 ---
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_calls.sse", "reply=I could not add them."])
    rc, out, err = run(srv, home, ["--no-save", "--allow-tool", "test.echo", "-p", "add"])
    b = bodies(srv, n0)
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    res = {m.get("tool_call_id"): m.get("content") for m in msgs if m["role"] == "tool"}
    t.ok(rc == 9, "a refused call: exit 9 (%d)" % rc, text(err))
    t.ok("refused" in res.get(ADD_ID, "") and res.get(ECHO_ID, "").startswith("{"),
         "the model is told the call was refused; the allowed one ran", repr(res))
    t.ok("tool refused: test.add" in text(err) and "may be incomplete" in text(err),
         "stderr says which call was refused", text(err))

    # the config's allow = counts as allowed in scripted mode too
    acfg = os.path.join(home, "allow.conf")
    with open(acfg, "w") as f:
        f.write("allow = test.add\n")
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_calls.sse", "reply=half"])
    rc, out, err = run(srv, home, ["--no-save", "--config", acfg, "-p", "add"])
    b = bodies(srv, n0)
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    res = {m.get("tool_call_id"): m.get("content") for m in msgs if m["role"] == "tool"}
    t.ok(rc == 9 and res.get(ADD_ID) == "42" and "refused" in res.get(ECHO_ID, ""),
         "allow = test.add in the config: it runs, test.echo is refused (rc %d)" % rc,
         text(err) + repr(res))

    # --- 5. schema violation and unknown tool: reported to the model, nothing runs ---
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_bad.sse", "reply=fine"])
    rc, out, err = run(srv, home, ["--no-save", "--allow-tool", "*", "-p", "x"])
    b = bodies(srv, n0)
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    res = {m.get("tool_call_id"): m.get("content") for m in msgs if m["role"] == "tool"}
    t.ok(rc == 0 and "invalid arguments for test.add" in res.get("c1", "") and
         "unknown tool" in res.get("c2", ""),
         "invalid arguments and unknown tools go back as errors (rc %d)" % rc, repr(res))

    # --- 6. the round limit: tool_rounds = 2, the model keeps asking ---
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_calls.sse"] * 3 + ["reply=never"])
    cfg = os.path.join(home, "rounds.conf")
    with open(cfg, "w") as f:
        f.write("tool_rounds = 2\n")
    rc, out, err = run(srv, home, ["--no-save", "--config", cfg, "--allow-tool", "*", "--json",
                                   "-p", "loop"])
    srv.clear_queue()
    b = bodies(srv, n0)
    j = json.loads(out) if out.strip() else {}
    t.ok(rc == 9 and len(b) == 3, "after 2 rounds the third ask stops the turn: exit 9, "
         "3 requests (rc %d, %d)" % (rc, len(b)), text(err))
    tools = j.get("tools", [])
    t.ok(len(tools) == 6 and tools[0]["name"] == "test.add" and tools[0]["result"] == "42" and
         tools[4]["round"] == 3 and "limit of 2 tool rounds" in tools[4]["result"] and
         "tool rounds" in j.get("tools_incomplete", ""),
         "--json lists every call with its round and result", json.dumps(j)[:1500])

    # --- 7. an MCP server's tool (tests/mcp/hostile.py over stdio): --mcp h, allowed ---
    hostile = os.path.join(ttlib.srcdir(), "mcp", "hostile.py")
    mcfg = os.path.join(home, "mcp.conf")
    with open(mcfg, "w") as f:
        f.write("[mcp h]\ncommand = %s %s\n" % (sys.executable, hostile))
    os.chmod(mcfg, 0o600)
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_mcp.sse", "reply=The server said it."])
    rc, out, err = run(srv, home, ["--no-save", "--config", mcfg, "--mcp", "h", "--allow-tool",
                                   "h.*", "-p", "call it"], tools=False)
    b = bodies(srv, n0)
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    names = [x["function"]["name"] for x in b[0].get("tools", [])] if b else []
    t.ok(rc == 0 and "h__ok" in names and msgs and msgs[-1].get("role") == "tool" and
         msgs[-1].get("content") == "from mcp" and msgs[-1].get("tool_call_id") == "call_mcp1",
         "--mcp h --allow-tool 'h.*': the server's tool runs, its result goes back (rc %d)" % rc,
         text(err) + json.dumps(msgs)[:800])
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_mcp.sse", "reply=refused"])
    rc, out, err = run(srv, home, ["--no-save", "--config", mcfg, "--mcp", "h", "-p", "x"],
                       tools=False)
    t.ok(rc == 9 and "tool refused: h.ok" in text(err),
         "--mcp h without --allow-tool: refused, exit 9 (rc %d)" % rc, text(err))

    # an MCP server's stderr is shown, never sent to the model: it may hold paths or tokens
    # (until 2026-12 a crash's "its stderr ends: dying" was the tool result the model got)
    fx = ttlib.tempdir("tt-fx-")
    with open(os.path.join(ttlib.srcdir(), "fixtures", "openai_tool_mcp.sse")) as f:
        crash = f.read().replace("h__ok", "h__crash")
    with open(os.path.join(fx, "mcp_crash.sse"), "w") as f:
        f.write(crash)
    with ttlib.FakeServer(extra_args=["--fixtures", fx]) as csrv:
        csrv.queue(["replay=mcp_crash.sse", "reply=it failed"])
        rc, out, err = run(csrv, home, ["--no-save", "--config", mcfg, "--mcp", "h",
                                        "--allow-tool", "h.*", "-p", "crash it"], tools=False)
        b = bodies(csrv, 0)
        sent = [m.get("content") or "" for m in (b[1].get("messages", []) if len(b) > 1 else [])
                if m.get("role") == "tool"]
    t.ok(sent and "dying" not in sent[0] and "h" in sent[0] and
         re.search(r"tool note \(not sent to the model\): h\.crash .*dying", text(err)),
         "an MCP server's stderr: on stderr for the user, not in the result the model gets",
         repr(sent) + text(err))

    # --- 7b. the config's allow = in a profile, with --allow-tool, in [mcp NAME] ---
    def allowed_run(cfg_text, args, tools=True, spec="replay=openai_tool_calls.sse"):
        path = os.path.join(home, "allow.conf")
        with open(path, "w") as f:
            f.write(cfg_text)
        os.chmod(path, 0o600)
        n0 = len(srv.requests())
        srv.queue([spec, "reply=done"])
        rc, out, err = run(srv, home, ["--no-save", "--no-cache", "--config", path] + args,
                           tools=tools)
        b = bodies(srv, n0)
        msgs = b[1].get("messages", []) if len(b) > 1 else []
        return rc, {m.get("tool_call_id"): m.get("content") for m in msgs
                    if m["role"] == "tool"}, text(err)

    rc, res, err = allowed_run("[p]\nallow = test.*\n", ["-P", "p", "-p", "add"])
    t.ok(rc == 0 and res.get(ADD_ID) == "42" and res.get(ECHO_ID, "").startswith("{"),
         "allow = test.* in the profile: both run (rc %d)" % rc, repr(res) + err)
    rc, res, err = allowed_run("allow = test.echo\n", ["--allow-tool", "test.add", "-p", "add"])
    t.ok(rc == 0 and res.get(ADD_ID) == "42" and res.get(ECHO_ID, "").startswith("{"),
         "allow = and --allow-tool together (rc %d)" % rc, repr(res) + err)
    rc, res, err = allowed_run("mcp = h\n[mcp h]\ncommand = %s %s\nallow = ok\n"
                               % (sys.executable, hostile), ["-p", "call it"], tools=False,
                               spec="replay=openai_tool_mcp.sse")
    t.ok(rc == 0 and res.get("call_mcp1") == "from mcp",
         "[mcp h] allow = ok: h.ok runs unasked (rc %d)" % rc, repr(res) + err)

    # --- 8. Anthropic: tool_use blocks in, thinking kept, tool_result blocks out ---
    n0 = len(srv.requests())
    srv.queue(["replay=anthropic_tool_use.sse", "reply=The sum is 42."])
    rc, out, err = run(srv, home, ["--no-save", "--api", "anthropic", "--base-url", srv.base(),
                                   "--allow-tool", "test.*", "-p", "add 2 and 40"],
                       env_extra={"ANTHROPIC_API_KEY": KEY})
    b = bodies(srv, n0)
    msgs = b[1].get("messages", []) if len(b) > 1 else []
    ac = msgs[1].get("content", []) if len(msgs) > 1 else []
    uc = msgs[2].get("content", []) if len(msgs) > 2 else []
    t.ok(rc == 0 and text(out) == "Let me check.\nThe sum is 42.\n" and
         [x.get("type") for x in ac] == ["thinking", "text", "tool_use", "tool_use"] and
         ac[0].get("signature") == "EqQBCgIYAhIM1gbcDa9GJwZA2b3h" and
         ac[2].get("id") == "toolu_01T1x1fJ34qAmk2tNTrN7Up6" and ac[2].get("input") == {"a": 2, "b": 40},
         "anthropic: the thinking block (signed), the text and both tool_use go back (rc %d)" % rc,
         text(err) + json.dumps(msgs)[:1500])
    t.ok([(x.get("type"), x.get("tool_use_id"), x.get("content")) for x in uc][:1] ==
         [("tool_result", "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "42")] and len(uc) == 2 and
         "test__add" in [x.get("name") for x in b[0].get("tools", [])] and
         "input_schema" in b[0]["tools"][0],
         "anthropic: both results in one user message, paired by tool_use_id", json.dumps(uc))

    # the same on a terminal (rendered): each round's text ends its line (until 2026-12
    # "Let me check.The sum is 42."); --json: a round's own text is in its first call's entry
    srv.clear_queue()
    srv.queue(["replay=anthropic_tool_use.sse", "reply=The sum is 42."])
    rc, out, err = ttlib.run_tokterm_tty(
        ["--no-save", "--no-cache", "--api", "anthropic", "--base-url", srv.base(), "--allow-tool", "test.*",
         "-p", "add 2 and 40"], env={"ANTHROPIC_API_KEY": KEY, "TOKTERM_TEST_TOOLS": "1"},
        home=home)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text(out)).replace("\r", "")
    t.ok("Let me check.\n" in plain and "The sum is 42." in plain,
         "anthropic on a terminal: the first round's text ends its line", repr(plain[-400:]))
    srv.clear_queue()
    srv.queue(["replay=anthropic_tool_use.sse", "reply=The sum is 42."])
    rc, out, err = run(srv, home, ["--no-save", "--no-cache", "--json", "--api", "anthropic",
                                   "--base-url", srv.base(), "--allow-tool", "test.*", "-p",
                                   "add 2 and 40"], env_extra={"ANTHROPIC_API_KEY": KEY})
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    t.ok(j.get("content") == "The sum is 42." and
         [x.get("text") for x in j.get("tools", [])] == ["Let me check.", None],
         "--json: the first round's text in its first call's entry", text(out)[:800])

    srv.clear_queue()

    # a turn stopped after its tools ran (tool_rounds reached): a -c carries its prompt and
    # rounds, which ran (until 2026-12 it was left out whole: the model did not know a tool
    # had run, and could ask for the same write again)
    shome = ttlib.make_home()
    ttlib.write_config(shome, "tool_rounds = 1\n")
    srv.queue(["replay=openai_tool_calls.sse", "replay=openai_tool_calls.sse"])
    rc1, out, err = run(srv, shome, ["--no-cache", "--allow-tool", "test.*", "-p", "loop sum"])
    srv.clear_queue()
    n0 = len(srv.requests())
    rc2, out, err2 = run(srv, shome, ["-c", "-p", "and?"], tools=False)
    b = bodies(srv, n0)
    roles = [m["role"] for m in b[0]["messages"]] if b else []
    t.ok(rc1 == 9 and rc2 == 0 and roles[:2] == ["user", "assistant"] and roles[-1] == "user" and
         "tool" in roles and b[0]["messages"][0]["content"] == "loop sum" and
         any(m.get("content") == "42" for m in b[0]["messages"]),
         "-c after a turn stopped in its tools: its prompt, calls and results are sent",
         "%d %d %r %s" % (rc1, rc2, roles, text(err2)))
    rc, out, err = run(srv, shome, ["show", "1"], tools=False)
    t.ok("a request carries the prompt and its tool rounds" in text(out),
         "show says that turn is carried", text(out)[-1200:])

    # --- 9. Gemini: functionCall parts in, functionResponse parts out (paired by name) ---
    def gemini_round(fixture, reply):
        """A Gemini tool round replayed from fixture: rc, err, the second request's contents,
        the model turn's parts and the results' parts."""
        n0 = len(srv.requests())
        srv.queue(["replay=" + fixture, "reply=" + reply])
        rc, out, err = run(srv, home, ["--no-save", "--api", "gemini", "--base-url",
                                       srv.url("/v1beta"), "--allow-tool", "test.*", "-p", "add"],
                           env_extra={"GEMINI_API_KEY": KEY})
        b = bodies(srv, n0)
        cs = b[1].get("contents", []) if len(b) > 1 else []
        return (rc, err, cs, cs[1].get("parts", []) if len(cs) > 1 else [],
                cs[2].get("parts", []) if len(cs) > 2 else [])
    rc, err, cs, mp, up = gemini_round("gemini_tool_call.sse", "The sum is 42.")
    t.ok(rc == 0 and [("functionCall" in p, p.get("thoughtSignature")) for p in mp] ==
         [(False, None), (True, "CiQB0e2Kb0cz+/x"), (True, None)] and
         [p.get("functionResponse", {}).get("name") for p in up] == ["test__add", "test__echo"] and
         up[0]["functionResponse"]["response"] == {"result": "42"},
         "gemini: the calls (with the signature) and their results go back (rc %d)" % rc,
         text(err) + json.dumps(cs)[:1500])
    t.ok(mp and up and not any("id" in p.get("functionCall", p.get("functionResponse", {}))
                               for p in mp + up),
         "gemini: calls the server gave no id go back without one (tokterm's own stay home)",
         json.dumps(cs)[:1500])

    # the server's call ids go back in the calls and their results (until 2026-12 they did not:
    # two parallel calls of one function could not be told apart); ids tokterm made do not
    rc, err, cs, mp, up = gemini_round("gemini_tool_call_ids.sse", "Both done.")
    t.ok(rc == 0 and [p.get("functionCall", {}).get("id") for p in mp] == ["fc-7a1", "fc-7a2"] and
         [(p.get("functionResponse", {}).get("id"), p.get("functionResponse", {}).get(
             "response")) for p in up] == [("fc-7a1", {"result": "42"}),
                                           ("fc-7a2", {"result": "2"})],
         "gemini: the server's call ids go back with the calls and their results (rc %d)" % rc,
         text(err) + json.dumps(cs)[:1500])

    # a Gemini conversation with tools in two turns (tokterm names both turns' calls
    # call_1_1, call_1_2), continued with --api anthropic: the Messages API wants tool_use
    # ids unique in a request (until 2026-12 they went as saved: HTTP 400 on every -c)
    gdb = os.path.join(home, "gem.db")
    gargs = ["--db", gdb, "--api", "gemini", "--base-url", srv.url("/v1beta"), "--allow-tool",
             "test.*"]
    genv = {"GEMINI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    srv.queue(["replay=gemini_tool_call.sse", "reply=first", "replay=gemini_tool_call.sse",
               "reply=second"])
    rc1, out, err = run(srv, home, gargs + ["-p", "one"], env_extra=genv)
    rc2, out, err = run(srv, home, gargs + ["-c", "-p", "two"], env_extra=genv)
    srv.clear_queue()
    n0 = len(srv.requests())
    rc, out, err = run(srv, home, ["--db", gdb, "--api", "anthropic", "--base-url", srv.base(),
                                   "--allow-tool", "test.*", "-c", "-p", "three"],
                       env_extra=genv)
    b = bodies(srv, n0)
    uses, pairs = [], []
    for m in (b[0].get("messages", []) if b else []):
        blocks = m["content"] if isinstance(m["content"], list) else []
        if m["role"] == "assistant":
            last_ids = [x["id"] for x in blocks if x.get("type") == "tool_use"]
            uses += last_ids
        pairs += [x["tool_use_id"] in last_ids for x in blocks if x.get("type") == "tool_result"]
    t.ok(rc1 == 0 and rc2 == 0 and rc == 0 and len(uses) == 4 and len(set(uses)) == 4 and
         all(re.match(r"^[a-zA-Z0-9_-]+$", i) for i in uses) and pairs == [True] * 4,
         "gemini conversation -c --api anthropic: tool_use ids unique, results paired "
         "(rc %d %d %d)" % (rc1, rc2, rc), "%r %r %s" % (uses, pairs, text(err)))
    # ... and with --api responses: its call_ids must be unique too ("Duplicate
    # function_call_output for call_id")
    n0 = len(srv.requests())
    srv.queue(["reply=four"])
    rc, out, err = run(srv, home, ["--db", gdb, "--api", "responses", "--base-url", srv.base(),
                                   "--allow-tool", "test.*", "-c", "-p", "four"], env_extra=genv)
    srv.clear_queue()
    b = bodies(srv, n0)
    items = [(x.get("type"), x.get("call_id")) for x in (b[0].get("input", []) if b else [])
             if x.get("call_id")]
    calls = [i for k, i in items if k == "function_call"]
    outs = [i for k, i in items if k == "function_call_output"]
    t.ok(rc == 0 and len(calls) == 4 and len(set(calls)) == 4 and sorted(outs) == sorted(calls),
         "gemini conversation -c --api responses: call_ids unique, outputs paired (rc %d)" % rc,
         "%r %s" % (items, text(err)))

    # --- 10. Responses: function_call items in, function_call_output items out ---
    n0 = len(srv.requests())
    srv.queue(["replay=responses_tool_call.sse", "reply=The sum is 42."])
    rc, out, err = run(srv, home, ["--no-save", "--api", "responses", "--base-url", srv.base(),
                                   "--allow-tool", "test.*", "-p", "add"])
    b = bodies(srv, n0)
    items = b[1].get("input", []) if len(b) > 1 else []
    t.ok(rc == 0 and [(x.get("type"), x.get("call_id")) for x in items[1:]] ==
         [("function_call", "call_add1"), ("function_call", "call_echo2"),
          ("function_call_output", "call_add1"), ("function_call_output", "call_echo2")] and
         items[3].get("output") == "42" and text(out).strip() == "The sum is 42.",
         "responses: the calls and their outputs go back as items (rc %d)" % rc,
         text(err) + json.dumps(items)[:1500])

    # --- 11. a huge result: cut for the model with a marker, whole in the store ---
    bdb = os.path.join(home, "big.db")
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_big.sse", "reply=big"])
    rc, out, err = run(srv, home, ["--db", bdb, "--allow-tool", "*", "-p", "big"])
    b = bodies(srv, n0)
    sent = [m for m in b[1].get("messages", []) if m["role"] == "tool"] if len(b) > 1 else []
    c = sqlite3.connect(bdb)
    kept = c.execute("SELECT length(content) FROM messages WHERE role = 'tool'").fetchall()
    c.close()
    t.ok(rc == 0 and sent and len(sent[0]["content"]) < 70000 and
         "bytes of this tool result cut by tokterm" in sent[0]["content"] and
         sent[0]["content"].startswith("abcdefghij") and kept == [(300000,)],
         "a 300 kB result: the model gets its head and tail around a marker, the store all of "
         "it (%s)" % (kept,), text(err)[:500])

    # a result of 8 MB (about 310k tokens, past gpt-4o-mini's 128k window) is planned as
    # what is sent: the turn goes on, not refused as too long for the window
    n0 = len(srv.requests())
    srv.queue(["replay=openai_tool_huge.sse", "reply=huge"])
    rc, out, err = run(srv, home, ["--no-save", "--allow-tool", "*", "-p", "huge"])
    b = bodies(srv, n0)
    sent = [m for m in b[1].get("messages", []) if m["role"] == "tool"] if len(b) > 1 else []
    t.ok(rc == 0 and text(out).strip() == "huge" and sent and len(sent[0]["content"]) < 70000,
         "an 8 MB result past the window: sent cut, the answer comes (rc %d)" % rc, text(err))

    # --- 12. kill -9 while a tool runs: what happened so far is saved, a resume goes on ---
    kdb = os.path.join(home, "kill.db")
    srv.queue(["replay=openai_tool_slow.sse"])
    env = ttlib.clean_env(home, {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": srv.base(),
                                 "TOKTERM_TEST_TOOLS": "1"})

    def kill_in_sleep(db, prompt):
        """Run -p prompt with every tool allowed; kill -9 it once test.sleep runs. Its stderr."""
        p = subprocess.Popen([ttlib.tokterm_path(), "--db", db, "--allow-tool", "*", "-p",
                              prompt], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = b""
        deadline = time.monotonic() + 20
        while b"tool test.sleep" not in seen and time.monotonic() < deadline:
            r, _, _ = select.select([p.stderr], [], [], 0.5)
            if r:
                seen += os.read(p.stderr.fileno(), 4096)
        p.send_signal(signal.SIGKILL)
        p.wait()
        return seen
    seen = kill_in_sleep(kdb, "sleep")
    c = sqlite3.connect(kdb)
    rows = c.execute("SELECT role, tool IS NOT NULL, status FROM messages ORDER BY id").fetchall()
    c.close()
    t.ok(rows == [("user", 0, "complete"), ("assistant", 1, "complete")],
         "kill -9 mid-tool: the prompt and the call are saved (%r)" % rows, text(seen))
    n0 = len(srv.requests())
    srv.queue(["reply=fine"])
    rc, out, err = run(srv, home, ["--db", kdb, "-c", "-p", "again"])
    b = bodies(srv, n0)
    msgs = b[0]["messages"] if b else []
    t.ok(rc == 0 and [m["role"] for m in msgs] == ["user", "assistant", "tool", "user"] and
         msgs[2].get("tool_call_id") == msgs[1]["tool_calls"][0]["id"] and
         "no result of this call was saved" in msgs[2]["content"],
         "the resume after it sends the call with a result saying tokterm stopped (rc %d)" % rc,
         text(err) + (json.dumps(b[0]) if b else ""))

    # the same with two calls, the first answered: its result goes with the resume (until
    # 2026-12 the round was left out whole, and the model never learnt that the first ran)
    kdb2 = os.path.join(home, "kill2.db")
    calls = [{"index": i, "id": "k%d" % i, "type": "function",
              "function": {"name": n, "arguments": a}}
             for i, (n, a) in enumerate((("test__add", '{"a": 1, "b": 2}'),
                                         ("test__sleep", '{"seconds": 60}')))]
    srv.queue([sse("tool_calls", {"tool_calls": calls})])
    seen = kill_in_sleep(kdb2, "add, then sleep")
    n0 = len(srv.requests())
    srv.queue(["reply=fine"])
    rc, out, err = run(srv, home, ["--db", kdb2, "-c", "-p", "go on"])
    b = bodies(srv, n0)
    msgs = b[0]["messages"] if b else []
    res = [(m.get("tool_call_id"), m.get("content")) for m in msgs if m["role"] == "tool"]
    t.ok(rc == 0 and [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user"]
         and res[0] == ("k0", "3") and res[1][0] == "k1" and
         "no result of this call was saved" in res[1][1],
         "kill -9 in a round's second call: the first's result is sent, the second's says "
         "tokterm stopped (rc %d)" % rc, text(seen) + text(err) + (json.dumps(b[0]) if b else ""))
    rc, out, err = run(srv, home, ["--db", kdb2, "show", "1"])
    t.ok(rc == 0 and "*result of `test.add` (k0)*" in text(out), "show: the result that came",
         text(out))

    # --- 13. --json's usage is the turn's: every round's summed (until 2026-12 only the last
    # round's, so a tool turn under-reported what it cost) ---
    srv.queue(["replay=openai_tool_calls.sse", "reply=The sum is 42.,prompt_tokens=200"])
    rc, out, err = run(srv, home, ["--no-save", "--no-cache", "--allow-tool", "test.*", "--json",
                                   "-p", "add"])
    u = (json.loads(out) if out.strip() else {}).get("usage") or {}
    t.ok(rc == 0 and u.get("prompt_tokens") == 295 and u.get("completion_tokens", 0) > 50 and
         u.get("total_tokens") == u.get("prompt_tokens", 0) + u.get("completion_tokens", 0),
         "--json usage sums both rounds: 95 + 200 prompt tokens", text(out) + text(err))

    # --- 14. no tools at all: the body has no tools member ---
    n0 = len(srv.requests())
    rc, out, err = run(srv, home, ["--no-save", "-p", "hi"], tools=False)
    b = bodies(srv, n0)
    t.ok(rc == 0 and b and "tools" not in b[0], "without tools the body is as before")

t.done()
