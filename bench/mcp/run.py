#!/usr/bin/env python3
"""MCP tool round trip (issue 17): one stdio tools/call of server-everything's `echo`,
start-up included, `tokterm mcp call` side by side with the official MCP TypeScript SDK client
(bench/mcp/sdk.mjs: Client + StdioClientTransport: spawn, initialize, call, close). Both
spawn the same server with node, wait for it to exit after its stdin closes, and print
"Echo: hi". Target: tokterm <= 0.5x the SDK's wall time.

A third command is the floor no client can go under: the server alone, its three messages
(initialize, notifications/initialized, the call) piped in by the shell. server-everything
lives on for 350 ms after initialize (a timer that asks the client for its roots), with any
client, so tokterm / floor is what tokterm costs, and tokterm / SDK is bounded by
floor / (floor + the SDK's own start).

The packages are those of the MCP tests (tests/mcp/package.json; npm ci there when missing).

usage: bench/mcp/run.py [--tokterm PATH] [--rounds 11] [--rows FILE]
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.dont_write_bytecode = True
import benchlib  # noqa: E402


def modules():
    d = os.environ.get("TOKTERM_MCP_MODULES") or os.path.join(TOP, "tests", "mcp", "node_modules")
    if not os.path.isdir(os.path.join(d, "@modelcontextprotocol", "sdk")):
        print("installing tests/mcp's packages (npm ci) ...")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"],
                       cwd=os.path.join(TOP, "tests", "mcp"), check=True)
        d = os.path.join(TOP, "tests", "mcp", "node_modules")
    return os.path.abspath(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(TOP, "_build", "plain", "src", "tokterm"))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--rows", default="")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    node = shutil.which("node")
    if not node:
        sys.exit("bench/mcp: node is missing")
    mods = modules()
    server = os.path.join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js")
    home = benchlib_home = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                        "tokterm-bench-mcp-%d" % os.getuid())
    os.makedirs(os.path.join(home, ".config", "tokterm"), exist_ok=True)
    cfg = os.path.join(home, ".config", "tokterm", "config")
    with open(cfg, "w") as f:
        f.write("[mcp ev]\ncommand = %s\nargs = %s stdio\n" % (node, server))
    os.chmod(cfg, 0o600)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": benchlib_home,
           "XDG_CONFIG_HOME": os.path.join(home, ".config"), "LANG": "C.UTF-8"}
    cmds = {"tokterm": [tokterm, "mcp", "call", "ev", "echo", '{"message": "hi"}'],
            "sdk": [node, os.path.join(HERE, "sdk.mjs"), mods, server],
            "floor": ["sh", "-c", "printf '%s\\n' \"$1\" \"$2\" \"$3\" | \"$4\" \"$5\" stdio", "floor",
                      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{'
                      '"protocolVersion":"2025-11-25","capabilities":{},'
                      '"clientInfo":{"name":"sh","version":"1"}}}',
                      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
                      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",'
                      '"arguments":{"message":"hi"}}}', node, server]}
    for k, argv in cmds.items():  # both must work before anything is timed
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        ok = "Echo: hi" in out.stdout if k == "floor" else out.stdout.strip() == "Echo: hi"
        if out.returncode != 0 or not ok:
            sys.exit("bench/mcp: %s failed (%d): %s%s" % (k, out.returncode, out.stdout,
                                                           out.stderr[-2000:]))
    benchlib.header("MCP tools/call round trip (stdio, server-everything echo, start-up "
                    "included) vs the official TypeScript SDK client",
                    "%d rounds, medians; ratio: median of the per-round ratios" % a.rounds)
    res = benchlib.interleave(cmds, a.rounds, env_of=lambda k: env)
    if any(x[3] for x in res["tokterm"] + res["sdk"] + res["floor"]):
        sys.exit("bench/mcp: a run failed")
    fw = benchlib.med(res["floor"])
    rf = benchlib.pratio(res["tokterm"], res["floor"])
    tw, sw = benchlib.med(res["tokterm"]), benchlib.med(res["sdk"])
    tc, sc = benchlib.med(res["tokterm"], 1), benchlib.med(res["sdk"], 1)
    r = benchlib.pratio(res["tokterm"], res["sdk"])
    rc = benchlib.pratio(res["tokterm"], res["sdk"], 1)
    spread = benchlib.pspread(res["tokterm"], res["sdk"])
    print("| measure | tokterm mcp call | baseline | ratio | target |")
    print("|---|---|---|---|---|")
    print("| wall, one echo call, start-up included | %s | SDK %s | %.2fx%s | <= 0.5x |"
          % (benchlib.ms(tw), benchlib.ms(sw), r,
             " (%.2f-%.2f)" % tuple(spread) if spread else ""))
    print("| CPU (user+sys) of the client and the server | %s | SDK %s | %.2fx | |"
          % (benchlib.ms(tc), benchlib.ms(sc), rc))
    print("| wall vs the floor (the server alone, fed by a pipe) | %s | floor %s | %.2fx | |"
          % (benchlib.ms(tw), benchlib.ms(fw), rf))
    benchlib.Rows(a.rows).add("MCP `tools/call` (stdio echo, start-up included)",
                              benchlib.ms(tw), "MCP TS SDK " + benchlib.ms(sw), r, "<= 0.5",
                              spread=spread)
    print("# load average at the end %s" % benchlib.loadavg())


if __name__ == "__main__":
    main()
