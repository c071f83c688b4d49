#!/usr/bin/env python3
"""MCP tool round trip (issue 17): one stdio tools/call of server-everything's `echo`,
start-up included, `tokterm mcp call` side by side with the official MCP TypeScript SDK client
(bench/mcp/sdk.mjs: Client + StdioClientTransport: spawn, initialize, call, close). Both
spawn the same server with node, close its stdin after the call, and print "Echo: hi". Target: tokterm <= 0.5x the SDK's wall time, until the client has exited (the shell
is back): the SDK waits for the server's exit before it exits; tokterm leaves a server still
running after its stdin closed to a detached reaper (`tokterm --reap`, the same SIGTERM and
SIGKILL after the same graces) and exits. So every command runs under `rusage -a`, the
subreaper of what it leaves: the CPU row counts the server and the reaper too, and a row says
when the server was gone (tokterm: when the reaper saw it exit), next to the SDK's and the
floor's.

A third command is the floor no client can go under until the server is gone: the server
alone, its three messages (initialize, notifications/initialized, the call) piped in by the
shell. server-everything lives on for 350 ms after initialize (a timer that asks the client
for its roots), with any client: a client that waits for that exit is bounded by floor / SDK;
tokterm, which does not, can go under the floor.

A second pass times what a user waits for: from the start to the moment "Echo: hi" reaches
the pipe (each client prints it as the result arrives, before it closes the server), the
server's 350 ms and exit excluded; the floor's is when the server writes its answer. That row
has no target of its own (the issue's target is the first row's).

The packages are those of the MCP tests (tests/mcp/package.json; npm ci there when missing).

usage: bench/mcp/run.py [--tokterm PATH] [--rounds 11] [--rows FILE]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

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


def answer_time(argv, env):
    """(seconds until "Echo: hi" reached our pipe, seconds until the process ended, 0, exit
    code): the shape of benchlib.measure's rows. Under `rusage -a` with its output to
    /dev/null, so that what the command leaves running ends before the next round starts."""
    t0 = time.monotonic()
    p = subprocess.Popen([benchlib.rusage_bin(), "-a", os.devnull] + argv, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got, ta = b"", None
    while True:
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        got += chunk
        if ta is None and b"Echo: hi" in got:
            ta = time.monotonic()
    p.stdout.close()
    code = p.wait()
    te = time.monotonic()
    return (ta if ta is not None else te) - t0, te - t0, 0, code if ta is not None else 1


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
    res = benchlib.interleave({k: (lambda v=v: benchlib.measure(v, env, adopt=True))
                               for k, v in cmds.items()}, a.rounds)
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
    print("| wall until the client exits, one echo call, start-up included | %s | SDK %s "
          "| %.2fx%s | <= 0.5x |"
          % (benchlib.ms(tw), benchlib.ms(sw), r,
             " (%.2f-%.2f)" % tuple(spread) if spread else ""))
    print("| CPU (user+sys) of the client and the server (and tokterm's reaper) | %s | SDK %s "
          "| %.2fx | |" % (benchlib.ms(tc), benchlib.ms(sc), rc))
    tg, sg, fg = (benchlib.med(res[k], 4) for k in ("tokterm", "sdk", "floor"))
    print("| until the server was gone (tokterm: its reaper's end; SDK: its own exit) | %s "
          "| SDK %s, floor %s | %.2fx | |"
          % (benchlib.ms(tg), benchlib.ms(sg), benchlib.ms(fg),
             benchlib.pratio(res["tokterm"], res["sdk"], 4)))
    print("| wall vs the floor (the server alone, fed by a pipe) | %s | floor %s | %.2fx | |"
          % (benchlib.ms(tw), benchlib.ms(fw), rf))
    print("| the floor vs the SDK (the bound of a client that waits for the server) | floor %s "
          "| SDK %s "
          "| %.2fx | |" % (benchlib.ms(fw), benchlib.ms(sw),
                          benchlib.pratio(res["floor"], res["sdk"])))
    ans = benchlib.interleave({k: (lambda v=v: answer_time(v, env)) for k, v in cmds.items()},
                              a.rounds)
    if any(x[3] for x in ans["tokterm"] + ans["sdk"] + ans["floor"]):
        sys.exit("bench/mcp: a run failed (answer pass)")
    ta, sa, fa = (benchlib.med(ans[k]) for k in ("tokterm", "sdk", "floor"))
    ra = benchlib.pratio(ans["tokterm"], ans["sdk"])
    aspread = benchlib.pspread(ans["tokterm"], ans["sdk"])
    print("| until the answer is printed (the server's 350 ms and exit after) | %s | SDK %s "
          "| %.2fx%s | |" % (benchlib.ms(ta), benchlib.ms(sa), ra,
                            " (%.2f-%.2f)" % tuple(aspread) if aspread else ""))
    print("| until the answer is printed, vs the floor's answer | %s | floor %s | %.2fx | |"
          % (benchlib.ms(ta), benchlib.ms(fa), benchlib.pratio(ans["tokterm"], ans["floor"])))
    rows = benchlib.Rows(a.rows)
    rows.add("MCP `tools/call` (stdio echo, start-up included)", benchlib.ms(tw),
             "MCP TS SDK " + benchlib.ms(sw), r, "<= 0.5", spread=spread,
             note="floor %s; server gone at %s (SDK %s)" % (benchlib.ms(fw), benchlib.ms(tg),
                                                             benchlib.ms(sg)))
    rows.add("MCP `tools/call`, until the answer is printed (no target)", benchlib.ms(ta),
             "MCP TS SDK " + benchlib.ms(sa), ra, "", spread=aspread)
    print("# load average at the end %s" % benchlib.loadavg())


if __name__ == "__main__":
    main()
