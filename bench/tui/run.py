#!/usr/bin/env python3
"""TUI versus scripted mode on one huge stream (issue 3).

The same fake-server stream of N deltas (gen=N,chunk=whole: as fast as loopback goes) is
consumed, several rounds, in one run by
  (a) tokterm --incognito -p x > /dev/null      scripted mode
  (b) tokterm --incognito in tmux (80x24)       the chat, prompt typed with send-keys
(--incognito: neither saves to the store nor answers from the response cache, so both modes do
the same network and parsing work)
CPU time (user+sys) and peak RSS of each tokterm process come from wait4(2); the TUI's whole
process is counted (start-up, waiting for the keystroke and quitting included), so its ratio
is an upper bound. Wall time: scripted = the process; TUI = request sent -> the frame drawn
after the end of the stream (from --trace). From --trace, each frame's delay = frame done -
arrival of the oldest delta it shows (the worst delta of that frame).

usage: bench/tui/run.py [--tokterm PATH] [--deltas 200000] [--rounds 5] [--width 80 --height 24]
Targets: TUI CPU <= 2x scripted; frame delay p99 <= 33 ms.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.dont_write_bytecode = True
import ttlib  # noqa: E402

# Runs argv[2:] and writes "user sys maxrss_kib exitcode wall" of that child to argv[1] (wait4(2):
# microseconds, unlike GNU time's hundredths).
RUSAGE = ("import os, sys, time\n"
          "t0 = time.monotonic()\n"
          "pid = os.fork()\n"
          "if pid == 0:\n"
          "    os.execvp(sys.argv[2], sys.argv[2:])\n"
          "_, st, ru = os.wait4(pid, 0)\n"
          "code = os.waitstatus_to_exitcode(st)\n"
          "open(sys.argv[1], 'w').write('%f %f %d %d %f' % (ru.ru_utime, ru.ru_stime,"
          " ru.ru_maxrss, code, time.monotonic() - t0))\n"
          "sys.exit(code)\n")


def rusage_cmd(out, argv):
    return [sys.executable, "-c", RUSAGE, out] + argv


def rusage_read(path):
    """(cpu s, peak RSS KiB, exit code, wall s) of the child."""
    f = open(path).read().split()
    return float(f[0]) + float(f[1]), int(f[2]), int(f[3]), float(f[4])
BODY = '{"model":"bench","messages":[{"role":"user","content":"x"}],"stream":true}'


def scripted(tokterm, env, tmp):
    out = os.path.join(tmp, "scripted.txt")
    with open(os.devnull, "wb") as null:
        subprocess.run(rusage_cmd(out, [tokterm, "--incognito", "-p", "x"]), env=env,
                       stdin=subprocess.DEVNULL, stdout=null, stderr=subprocess.DEVNULL)
    cpu, rss, code, wall = rusage_read(out)
    return wall, cpu, rss, code


def read_trace(path):
    s = e = None
    frames = []
    for line in open(path):
        w = line.split()
        if not w:
            continue
        if w[0] == "S":
            s = float(w[1])
        elif w[0] == "E":
            e = float(w[1])
        elif w[0] == "F":
            frames.append((None if w[1] == "-" else float(w[1]), float(w[2]), float(w[3]),
                           int(w[4])))
    return s, e, frames


def tui_idle(tokterm, env, width, height, tmp, rnd):
    """CPU of starting the TUI and quitting at once (no request): its fixed cost."""
    timing = os.path.join(tmp, "idle%d.txt" % rnd)
    with ttlib.Tmux(width, height) as tm:
        tm.run(rusage_cmd(timing, [tokterm, "--incognito"]), env)
        if not tm.wait_for("F1", 10):
            raise RuntimeError("the TUI did not start:\n" + tm.capture())
        tm.send("C-d")
        tm.wait_exit(10)
    return rusage_read(timing)[0]


def tui(tokterm, env, width, height, tmp, rnd):
    trace = os.path.join(tmp, "trace%d.txt" % rnd)
    timing = os.path.join(tmp, "time%d.txt" % rnd)
    with ttlib.Tmux(width, height) as tm:
        tm.run(rusage_cmd(timing, [tokterm, "--incognito", "--trace", trace]), env)
        if not tm.wait_for("F1", 10):
            raise RuntimeError("the TUI did not start:\n" + tm.capture())
        tm.send_text("x")
        tm.send("Enter")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(trace) and any(l.startswith("E ") for l in open(trace)):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the stream did not end:\n" + tm.capture())
        time.sleep(0.3)  # the last frame
        screen = tm.capture()
        tm.send("C-d")
        code = tm.wait_exit(10)
    if code != 0:
        raise RuntimeError("the TUI exited with %r" % code)
    cpu, rss, _, _ = rusage_read(timing)
    s, e, frames = read_trace(trace)
    last = max(fr[1] for fr in frames if fr[1] >= e)
    delays = [(fr[1] - fr[0]) * 1000 for fr in frames if fr[0] is not None]
    costs = [(fr[1] - fr[2]) * 1000 for fr in frames if s <= fr[2] <= last]
    nframes = sum(1 for fr in frames if s <= fr[2] <= last)
    return {"wall": last - s, "cpu": cpu, "rss": rss,
            "delays": delays, "costs": costs, "frames": nframes, "screen": screen}


def pct(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--deltas", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=80)
    ap.add_argument("--height", type=int, default=24)
    ap.add_argument("--chunk", default="whole", help="fake-server write size: whole, event, ...")
    a = ap.parse_args()
    tokterm = os.path.abspath(a.tokterm)
    if not ttlib.Tmux.available():
        sys.exit("tmux is needed")
    tmp = ttlib.tempdir("tt-tuibench-")
    with ttlib.FakeServer() as srv:
        spec = "gen=%d,chunk=%s" % (a.deltas, a.chunk)
        url = srv.base(spec)
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": url})
        _, _, body = srv.post("/%s/v1/chat/completions" % spec, BODY.encode())
        print("# %s, %d cores, tokterm %s" % (" ".join(os.uname()[0:1] + os.uname()[4:5]),
                                               os.cpu_count(), tokterm))
        print("# stream: %d deltas, %.1f MB (%s); TUI %dx%d in tmux; %d rounds"
              % (a.deltas, len(body) / 1e6, spec, a.width, a.height, a.rounds))
        sc, tu, idle = [], [], []
        for r in range(a.rounds):
            sc.append(scripted(tokterm, env, tmp))
            tu.append(tui(tokterm, env, a.width, a.height, tmp, r))
            idle.append(tui_idle(tokterm, env, a.width, a.height, tmp, r))
            print("round %d: scripted %.3f s wall %.3f s cpu | tui %.3f s wall %.3f s cpu, "
                  "%d frames, delay p99 %.1f ms" % (r + 1, sc[-1][0], sc[-1][1], tu[-1]["wall"],
                                                    tu[-1]["cpu"], tu[-1]["frames"],
                                                    pct(tu[-1]["delays"], 99)))
        if any(x[3] != 0 for x in sc):
            sys.exit("scripted mode failed")
        sw = statistics.median(x[0] for x in sc)
        scpu = statistics.median(x[1] for x in sc)
        tw = statistics.median(x["wall"] for x in tu)
        tcpu = statistics.median(x["cpu"] for x in tu)
        delays = [d for x in tu for d in x["delays"]]
        costs = [c for x in tu for c in x["costs"]]
        print()
        print("| | wall (median) | CPU user+sys (median) | peak RSS |")
        print("|---|---|---|---|")
        print("| scripted `tokterm --incognito -p x > /dev/null` | %.3f s | %.3f s | %d MiB |"
              % (sw, scpu, statistics.median(x[2] for x in sc) // 1024))
        print("| TUI in tmux | %.3f s | %.3f s | %d MiB |"
              % (tw, tcpu, statistics.median(x["rss"] for x in tu) // 1024))
        print("| **TUI / scripted** | **%.2fx** | **%.2fx** (target <= 2x) | |"
              % (tw / sw, tcpu / scpu))
        icpu = statistics.median(idle)
        print()
        print("TUI start + quit without a request: %.3f s CPU (median); the stream itself: "
              "%.3f s, %.2fx scripted." % (icpu, tcpu - icpu, (tcpu - icpu) / scpu))
        print()
        print("Delta arrival -> frame that shows it (per frame, its oldest delta), %d frames:"
              % len(delays))
        print("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (target <= 33 ms), max %.1f ms"
              % (pct(delays, 50), pct(delays, 90), pct(delays, 99), max(delays)))
        print("Frame cost (draw + doupdate while streaming): p50 %.2f ms, p99 %.2f ms, max %.2f ms"
              % (pct(costs, 50), pct(costs, 99), max(costs)))
        print()
        print("Last screen of the last round:")
        for line in tu[-1]["screen"].splitlines()[-5:]:
            print("    " + line)


if __name__ == "__main__":
    main()
