#!/usr/bin/env python3
"""TUI versus scripted mode on one huge stream (issue 3).

The same fake-server stream of N deltas (gen=N,chunk=whole: as fast as loopback goes) is
consumed, several rounds, in one run by
  (S) tokterm --incognito --trace F -p x > /dev/null   scripted mode
  (C) tokterm --incognito --trace F in tmux (80x24)    the chat, prompt typed with send-keys
(--incognito: neither saves to the store nor answers from the response cache, so both modes do
the same network and parsing work). Each round runs S C C S (the next round C S S C): both
sides' runs lie symmetric about the round's middle, so a load that drifts through the round
cancels. Each process reads its own CPU clock (CLOCK_PROCESS_CPUTIME_ID: all its threads) in
the U records of its --trace: scripted from the request sent (libcurl already loaded) to the
answer's end written; the chat from the request sent to the frame that shows the end with all
of the text styled (bench/highlight's answers_cpu). So start-up, the keystrokes and quitting
are left out of both sides the same way, by the process itself, and no subtraction of two
processes is needed. A round's ratio is its two chat answers over its two scripted ones; the
median of the rounds' ratios is printed with its quartiles and range. The whole processes'
CPU (wait4(2)) is printed too: work moved out of the answer's window would show there.
--also PATH puts another build's chat in the same rounds, over the same scripted runs
(--tokterm's, which needs scripted --trace): before / after side by side.
Wall time: scripted = the process; TUI = request sent -> the frame drawn after the end of the
stream (from --trace). From --trace, each frame's delay = frame done - arrival of the oldest
delta it shows (the worst delta of that frame).

A first round (one scripted run, one chat per build) warms the machine up and is printed but
not counted.

With --text markdown the stream is realistic text instead (issue 14): N deltas (default 100,000)
of Markdown paragraphs, headings and list items with **bold**, `inline code` and CJK, in pieces
of one to a few words (CJK one or two characters), sent in one write (a fixture written to a
temp dir, replayed with chunk=whole); the chat is 120x40 unless --width/--height say otherwise.

Frames over 16 ms are split into a late start and a slow draw, and for each, what the process
did while its text waited (the UI thread working, the network thread, or neither running:
slow_cause); beside each chat round
waker.c sleeps in poll() for 8 ms over and over and reports how late it woke: the scheduler's
floor at this load (bench/README.md).

usage: bench/tui/run.py [--tokterm PATH] [--also PATH] [--text gen|markdown] [--deltas N]
                        [--rounds 11] [--width W --height H] [--traces DIR]
Targets (issue 14): stream-only TUI CPU <= 1.3x scripted (gen), <= 3x (markdown); frame delay
p99 <= 16 ms; frame cost p50 <= 2 ms (markdown).
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.dont_write_bytecode = True
import ttlib  # noqa: E402
from benchlib import pct  # noqa: E402

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


def waker_bin(tmp):
    """bench/tui/waker.c compiled into tmp: the floor probe run beside each chat round."""
    exe = os.path.join(tmp, "waker")
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "waker.c")], check=True)
    return exe


def rusage_cmd(out, argv):
    return [sys.executable, "-c", RUSAGE, out] + argv


def rusage_read(path):
    """(cpu s, peak RSS KiB, exit code, wall s) of the child."""
    f = open(path).read().split()
    return float(f[0]) + float(f[1]), int(f[2]), int(f[3]), float(f[4])
BODY = '{"model":"bench","messages":[{"role":"user","content":"x"}],"stream":true}'


# Realistic text: (kind, text) units; pieces of these are the deltas.
MD_WORDS = ("the", "parser", "returns", "a", "value", "when", "each", "row", "is", "read",
            "from", "buffer", "and", "then", "we", "check", "that", "length", "of", "input",
            "fits", "into", "window", "before", "calling", "it", "again", "with", "next",
            "offset", "so", "stream", "never", "blocks", "on", "slow", "reader")
MD_CODE = ("parse_row()", "buf_len", "NULL", "size_t n", "x->next", "memcpy(dst, src, n)",
           "--max-time", "0x7f", "utf8_decode", "[]")
MD_CJK = ("中文字符", "输入是有效的", "日本語のテキスト", "한국어 문장", "解析器", "缓冲区长度",
          "流式传输", "表示される", "窗口")


def md_pieces(n, seed=14):
    """n deltas of Markdown: headings, paragraphs, list items; bold, inline code and CJK."""
    rng = random.Random(seed)
    out = []

    def words(k):
        for _ in range(k):
            r = rng.random()
            if r < 0.08:
                out.append(" **" + rng.choice(MD_WORDS))
                out.append(" " + rng.choice(MD_WORDS) + "**")
            elif r < 0.15:
                out.append(" `" + rng.choice(MD_CODE) + "`")
            elif r < 0.27:
                cjk = rng.choice(MD_CJK)
                out.append(" ")
                for i in range(0, len(cjk), 2):
                    out.append(cjk[i:i + 2])
            else:
                out.append(" " + rng.choice(MD_WORDS))
    sec = 0
    while len(out) < n:
        sec += 1
        out.append("## Section %d" % sec)
        out.append(" " + rng.choice(MD_CJK) + "\n\n")
        for _ in range(rng.randint(1, 3)):
            out.append(rng.choice(MD_WORDS).capitalize())
            words(rng.randint(20, 60))
            out.append(".\n\n")
        for _ in range(rng.randint(2, 5)):
            out.append("- ")
            out.append(rng.choice(MD_WORDS))
            words(rng.randint(5, 25))
            out.append("\n")
        out.append("\n")
    return out[:n]


def md_fixture(dirname, n):
    """Writes DIR/md.sse: the stream of md_pieces(n); returns its size in bytes."""
    def ev(obj):
        return ("data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) +
                "\n\n").encode("utf-8")

    def chunk(delta, finish=None):
        return {"id": "chatcmpl-md", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "bench", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                               "finish_reason": finish}]}
    parts = [ev(chunk({"role": "assistant", "content": ""}))]
    parts.extend(ev(chunk({"content": p})) for p in md_pieces(n))
    parts.append(ev(chunk({}, "stop")))
    parts.append(ev({"id": "chatcmpl-md", "object": "chat.completion.chunk",
                     "created": 1700000000, "model": "bench", "choices": [],
                     "usage": {"prompt_tokens": 8, "completion_tokens": n,
                               "total_tokens": n + 8}}))
    parts.append(b"data: [DONE]\n\n")
    data = b"".join(parts)
    with open(os.path.join(dirname, "md.sse"), "wb") as f:
        f.write(data)
    return len(data)


def scripted(tokterm, env, tmp, wrap=(), trace=False):
    """(wall s, CPU s of the whole process, peak RSS KiB, exit code, the answer's CPU s or
    None): trace: --trace FILE, the answer's CPU from the process's own clock, request sent ->
    its end written (the U records after S and E), start-up and exit left out."""
    out = os.path.join(tmp, "scripted.txt")
    tr = os.path.join(tmp, "scripted-trace.txt")
    if os.path.exists(tr):
        os.unlink(tr)
    argv = [tokterm, "--incognito"] + (["--trace", tr] if trace else []) + ["-p", "x"]
    with open(os.devnull, "wb") as null:
        subprocess.run(rusage_cmd(out, list(wrap) + argv), env=env,
                       stdin=subprocess.DEVNULL, stdout=null, stderr=subprocess.DEVNULL)
    cpu, rss, code, wall = rusage_read(out)
    ans = None
    if trace:
        u = [float(w[1]) for w in (ln.split() for ln in open(tr)) if w and w[0] == "U"]
        if len(u) != 2:
            raise RuntimeError("%s --trace -p wrote %d U records, not 2 (a build without "
                               "scripted --trace?)" % (tokterm, len(u)))
        ans = u[1] - u[0]
    return wall, cpu, rss, code, ans


def answers_cpu(trace):
    """Each answer in a --trace file, from the U record after its S to the one after the frame
    that shows its end (the first frame started after its E) or, when text set aside by a
    large batch was still unstyled then, after the Y that says all of it is styled: a list of
    dicts of its CPU (all threads), the UI thread's, the frames' (UI thread, inside frames),
    the frame count (s)."""
    recs = [w for w in (line.split() for line in open(trace)) if w and w[0] in "SEFUY"]
    out, cur = [], None
    for k, w in enumerate(recs):
        if w[0] == "S":
            c = next(x for x in recs[k:] if x[0] == "U")
            cur = {"c0": (float(c[1]), float(c[2])), "frames": 0, "fcpu": 0.0, "e": None,
                   "shown": False}
        elif cur is None:
            continue
        elif w[0] == "E":
            cur["e"] = float(w[1])
        elif w[0] == "F":
            c = next(x for x in recs[k:] if x[0] == "U")
            cur["frames"] += 1
            cur["fcpu"] += float(c[3])
            if cur["e"] is not None and float(w[3]) >= cur["e"]:
                cur["shown"] = True
        elif w[0] == "Y" and cur["shown"] and int(w[3]) >= int(w[2]):
            c = next(x for x in recs[k:] if x[0] == "U")
            out.append({"ans": float(c[1]) - cur["c0"][0], "ui": float(c[2]) - cur["c0"][1],
                        "fcpu": cur["fcpu"], "frames": cur["frames"]})
            cur = None
    return out


def read_trace(path):
    """S, E and the frames of a --trace file: (arrival of the oldest text or None, done,
    start, events, then from the U record after the frame: the UI thread's CPU seconds, its
    minor faults, the process's CPU seconds, all so far; None when the frame has no U)."""
    s = e = None
    frames = []
    open_f = False  # the last record of these was an F: the next U is its
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
                           int(w[4]), None, None, None))
        elif w[0] == "U" and open_f:
            frames[-1] = frames[-1][:4] + (float(w[2]), int(w[4]), float(w[1]))
        if w[0] in "SEFU":
            open_f = w[0] == "F"
    return s, e, frames


def slow_frames(frames, over_ms=16):
    """Each frame whose delay passed over_ms: its delay in three parts, the wait the chat's
    pacing asks for (its oldest text -> 1/120 s after the frame before, when that is later:
    long when the text was read before that frame started but reached the UI thread after
    it), how late it started after that, and what it cost to draw; then, over the text's wait
    (from the end of the last frame that ended before it arrived to the end of this one), the
    UI thread's CPU, the process's (both threads), its length (ms) and the UI thread's minor
    page faults (those four None without U records)."""
    out = []
    for i, fr in enumerate(frames):
        if fr[0] is None or (fr[1] - fr[0]) * 1000 <= over_ms:
            continue
        due = max(fr[0], frames[i - 1][2] + 1 / 120.0) if i else fr[0]
        ui = proc = span = faults = None
        j = max((k for k in range(i) if frames[k][1] <= fr[0]), default=None)
        if j is not None and fr[4] is not None and frames[j][4] is not None:
            ui = (fr[4] - frames[j][4]) * 1000
            proc = (fr[6] - frames[j][6]) * 1000
            span = (fr[1] - frames[j][1]) * 1000
            faults = fr[5] - frames[j][5]
        out.append(((due - fr[0]) * 1000, (fr[2] - due) * 1000, (fr[1] - fr[2]) * 1000,
                    ui, proc, span, faults))
    return out


def slow_cause(f):
    """What the process did while a slow frame's text waited: None without U records;
    "neither" when its CPU (both threads) was under half the wait (it barely ran: the VM or
    other processes had the cores); else the thread that took more of it, "UI" (such as a
    first batch in fresh memory) or "network"."""
    if f[3] is None:
        return None
    if f[4] < f[5] / 2:
        return "neither"
    return "UI" if f[3] >= f[4] - f[3] else "network"


def slow_frames_text(slow):
    """One line on slow_frames' frames: each one's CPU over its text's wait, and how many
    slow_cause puts on each cause."""
    known = [f for f in slow if f[3] is not None]
    causes = [slow_cause(f) for f in known]
    return ("While the text of each frame over 16 ms waited (UI thread / process CPU / the "
            "wait, UI page faults): %s; the process working, mostly the UI thread %d, mostly "
            "the network thread %d; the process barely running %d"
            % (", ".join("%.1f/%.1f/%.1f ms %d" % (f[3], f[4], f[5], f[6]) for f in known) or
               "-", causes.count("UI"), causes.count("network"), causes.count("neither")))


def tui(tokterm, env, width, height, tmp, rnd, wrap=(), traces=None):
    trace = os.path.join(tmp, "trace%d.txt" % rnd)
    timing = os.path.join(tmp, "time%d.txt" % rnd)
    wakes = os.path.join(tmp, "wake%d.txt" % rnd)
    slow = 20 if wrap else 1  # under valgrind
    # the floor: a bare poll() of 8 ms (the chat's wait for a frame at 120 Hz) beside the chat
    waker = None if wrap else subprocess.Popen([waker_bin(tmp), wakes, "8"],
                                               stdin=subprocess.PIPE)
    with ttlib.Tmux(width, height) as tm:
        tm.run(rusage_cmd(timing, list(wrap) + [tokterm, "--incognito", "--trace", trace]), env)
        if not tm.wait_for("F1", 10 * slow):
            raise RuntimeError("the TUI did not start:\n" + tm.capture())
        tm.send_text("x")
        tm.send("Enter")
        deadline = time.monotonic() + 120 * slow
        while time.monotonic() < deadline:
            if os.path.exists(trace) and any(l.startswith("E ") for l in open(trace)):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the stream did not end:\n" + tm.capture())
        time.sleep(0.3 * slow)  # the last frame
        if waker:
            waker.stdin.close()
            waker.wait()
        screen = tm.capture()
        tm.send("C-d")
        code = tm.wait_exit(10 * slow)
    if code != 0:
        raise RuntimeError("the TUI exited with %r" % code)
    if traces:
        os.makedirs(traces, exist_ok=True)
        shutil.copy(trace, os.path.join(traces, "trace%d.txt" % rnd))
    cpu, rss, _, _ = rusage_read(timing)
    s, e, frames = read_trace(trace)
    # the frame that shows the end: the first one started after it (later frames are the
    # status bar's exact count and its clock)
    last = min(fr[1] for fr in frames if fr[2] >= e)
    delays = [(fr[1] - fr[0]) * 1000 for fr in frames if fr[0] is not None]
    costs = [(fr[1] - fr[2]) * 1000 for fr in frames if s <= fr[2] <= last]
    nframes = sum(1 for fr in frames if s <= fr[2] <= last)
    late = slow_frames(frames)
    wake = [float(x) for x in open(wakes)] if waker else []
    ans = answers_cpu(trace)
    if len(ans) != 1:
        raise RuntimeError("%d answers in the chat's trace, 1 asked" % len(ans))
    return {"ans": ans[0]["ans"], "wall": last - s, "cpu": cpu, "rss": rss, "delays": delays, "costs": costs,
            "frames": nframes, "screen": screen, "slow": late, "wake": wake}


def callgrind(outdir, tokterm, env, width, height, tmp):
    """Scripted mode and the chat, once each under callgrind (all threads in one profile)."""
    os.makedirs(outdir, exist_ok=True)
    totals = {}
    for mode in ("scripted", "tui"):
        out = os.path.join(os.path.abspath(outdir), "callgrind.%s" % mode)
        wrap = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
        if mode == "scripted":
            scripted(tokterm, env, tmp, wrap)
        else:  # tokterm would exec the chat program, which valgrind's /proc/self/exe hides
            chat = os.path.join(os.path.dirname(tokterm), "tokterm-tui")
            tui(chat if os.path.exists(chat) else tokterm, env, width, height, tmp, 0, wrap)
        total = None
        for line in open(out):
            if line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
        totals[mode] = total
        print("%s: %s instructions (%s)" % (mode, format(total, ","), out))
    print("chat / scripted instructions: %.2fx" % (totals["tui"] / totals["scripted"]))
    print("(callgrind_annotate --inclusive=yes FILE | head -60 shows where they go)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokterm", default=os.environ.get("TOKTERM") or
                    os.path.join(HERE, "..", "..", "_build", "plain", "src", "tokterm"))
    ap.add_argument("--text", choices=("gen", "markdown"), default="gen",
                    help="gen: 'tokN ' deltas (one long line); markdown: realistic text")
    ap.add_argument("--deltas", type=int, default=None,
                    help="default 200,000 (gen) or 100,000 (markdown)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--also", metavar="PATH", action="append", default=[],
                    help="another build's tokterm: its chat in the same rounds, over the same "
                         "scripted runs (--tokterm's; before / after side by side)")
    ap.add_argument("--width", type=int, default=None, help="default 80 (gen), 120 (markdown)")
    ap.add_argument("--height", type=int, default=None, help="default 24 (gen), 40 (markdown)")
    ap.add_argument("--chunk", default="whole", help="fake-server write size: whole, event, ...")
    ap.add_argument("--traces", metavar="DIR", help="keep each chat round's --trace in DIR")
    ap.add_argument("--callgrind", metavar="DIR",
                    help="instead of timing: one scripted run and one chat run under valgrind "
                         "--tool=callgrind, profiles in DIR, instruction totals printed")
    a = ap.parse_args()
    md = a.text == "markdown"
    deltas = a.deltas or (100000 if md else 200000)
    width = a.width or (120 if md else 80)
    height = a.height or (40 if md else 24)
    tokterm = os.path.abspath(a.tokterm)
    if not ttlib.Tmux.available():
        sys.exit("tmux is needed")
    tmp = ttlib.tempdir("tt-tuibench-")
    t_start = time.monotonic()
    fixtures = ttlib.tempdir("tt-tuibench-fx-")
    size = md_fixture(fixtures, deltas) if md else 0
    with ttlib.FakeServer(extra_args=["--fixtures", fixtures]) as srv:
        if md:
            spec = "replay=md.sse,chunk=%s" % a.chunk
        else:
            spec = "gen=%d,chunk=%s" % (deltas, a.chunk)
            _, _, body = srv.post("/%s/v1/chat/completions" % spec, BODY.encode())
            size = len(body)
        env = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base(spec)})
        env1 = ttlib.clean_env(env={"OPENAI_BASE_URL": srv.base("reply=x")})
        print("# %s, %d cores, tokterm %s" % (" ".join(os.uname()[0:1] + os.uname()[4:5]),
                                               os.cpu_count(), tokterm))
        print("# stream: %d deltas (%s), %.1f MB (%s); TUI %dx%d in tmux; %d rounds"
              % (deltas, "markdown" if md else "tokN", size / 1e6, spec, width, height,
                 a.rounds))
        print("# load average at start: %.2f %.2f %.2f" % os.getloadavg())
        if a.callgrind:
            callgrind(a.callgrind, tokterm, env, width, height, tmp)
            return
        builds = [tokterm] + [os.path.abspath(b) for b in a.also]
        sc, tu = [], {b: [] for b in builds}
        ratios = {b: [] for b in builds}
        # A first round, not counted (as benchlib.interleave's and bench/highlight's warm-up):
        # in run-all it follows the stream and resume benchmarks, whose ~200 MB the VM's free
        # page reporting hands back to the host 2 s after they are freed, and its first chats
        # paid a fresh huge page at ~3.3 ms (docs/PERFORMANCE.md; the 200k delay row once
        # missed on such rounds alone: 19.9-24.6 ms, the rest 7.5-9.8). Printed, not hidden.
        x = scripted(tokterm, env, tmp, trace=True)
        warm = ["scripted %.1f ms cpu" % (x[4] * 1e3)]
        for k, b in enumerate(builds):
            y = tui(b, env, width, height, tmp, 10000 + k)
            warm.append("%s %.1f ms cpu, delay p99 %.1f ms" % (
                "tui" if len(builds) == 1 else "tui(%d)" % k, y["ans"] * 1e3,
                pct(y["delays"], 99)))
        print("warm-up round (not counted): %s" % " | ".join(warm))
        for r in range(a.rounds):
            # ABBA: scripted, the chats, the chats again in reverse, scripted (the next round
            # the other way round): each side's runs lie symmetric about the round's middle,
            # so a load that rises or falls through the round cancels
            chats = [("C", b) for b in builds]
            seq = ([("S", None)] + chats + chats[::-1] + [("S", None)] if r % 2 == 0 else
                   chats + [("S", None), ("S", None)] + chats[::-1])
            got_s, got_c = [], {b: [] for b in builds}
            for k, (m, b) in enumerate(seq):
                if m == "S":
                    x = scripted(tokterm, env, tmp, trace=True)
                    if x[3] != 0:
                        sys.exit("scripted mode failed")
                    got_s.append(x)
                else:
                    got_c[b].append(tui(b, env, width, height, tmp, 2 * r + len(got_c[b]),
                                        traces=a.traces))
            sc.extend(got_s)
            s_ans = sum(x[4] for x in got_s)
            line = []
            for b in builds:
                tu[b].extend(got_c[b])
                ratios[b].append(sum(x["ans"] for x in got_c[b]) / s_ans)
                line.append("%s %.1f %.1f ms cpu, %s frames, delay p99 %.1f ms: %.2fx"
                            % ("tui" if len(builds) == 1 else "tui(%d)" % builds.index(b),
                               got_c[b][0]["ans"] * 1e3,
                               got_c[b][1]["ans"] * 1e3,
                               "/".join(str(x["frames"]) for x in got_c[b]),
                               pct([d for x in got_c[b] for d in x["delays"]], 99),
                               ratios[b][-1]))
            print("round %d (%s): scripted %.1f %.1f ms cpu | %s"
                  % (r + 1, "".join(m for m, _ in seq), got_s[0][4] * 1e3, got_s[1][4] * 1e3,
                     " | ".join(line)))
            sys.stdout.flush()
        load_end = os.getloadavg()
        med = statistics.median
        s_ans = med(x[4] for x in sc)
        for b in builds:
            t = tu[b]
            if len(builds) > 1:
                print()
                print("## %s" % b)
            print()
            print("| | wall (median) | CPU user+sys, whole process (median) | the answer's CPU, "
                  "all threads (median) | peak RSS |")
            print("|---|---|---|---|---|")
            print("| scripted `tokterm --incognito -p x > /dev/null` | %.3f s | %.3f s | %.1f ms "
                  "| %d MiB |" % (med(x[0] for x in sc), med(x[1] for x in sc), s_ans * 1e3,
                                 med(x[2] for x in sc) // 1024))
            print("| TUI in tmux | %.3f s | %.3f s | %.1f ms | %d MiB |"
                  % (med(x["wall"] for x in t), med(x["cpu"] for x in t),
                     med(x["ans"] for x in t) * 1e3, med(x["rss"] for x in t) // 1024))
            print("| **TUI / scripted** | **%.2fx** | **%.2fx** (whole processes: start-up, "
                  "keys, quitting) | | |" % (med(x["wall"] for x in t) / med(x[0] for x in sc),
                                             med(x["cpu"] for x in t) / med(x[1] for x in sc)))
            print()
            q = statistics.quantiles(ratios[b], n=4) if len(ratios[b]) >= 2 else ratios[b] * 3
            print("Stream only (start-up excluded): scripted %.1f ms, TUI %.1f ms: **%.2fx** "
                  "(median of the rounds' ratios, quartiles %.2f-%.2f, range %.2f-%.2f over %d "
                  "rounds; target <= %s)"
                  % (s_ans * 1e3, med(x["ans"] for x in t) * 1e3, med(ratios[b]), q[0], q[2],
                     min(ratios[b]), max(ratios[b]), len(ratios[b]), "3x" if md else "1.3x"))
            print("(each process's own CPU clock, all threads, from the request sent to its end "
                  "written (scripted) or drawn and styled (the chat); a round's ratio is its "
                  "two chat answers over its two scripted ones)")
            if len(builds) > 1:
                dl = [d for x in t for d in x["delays"]]
                print("Delta arrival -> frame, %d frames: p50 %.1f ms, p90 %.1f ms, **p99 %.1f "
                      "ms**, max %.1f ms, %d over 16 ms" % (
                          len(dl), pct(dl, 50), pct(dl, 90), pct(dl, 99), max(dl),
                          sum(1 for d in dl if d > 16)))
        tu = tu[tokterm]
        delays = [d for x in tu for d in x["delays"]]
        costs = [c for x in tu for c in x["costs"]]
        print()
        print("Delta arrival -> frame that shows it (per frame, its oldest delta), %d frames:"
              % len(delays))
        print("p50 %.1f ms, p90 %.1f ms, **p99 %.1f ms** (target <= 16 ms), max %.1f ms"
              % (pct(delays, 50), pct(delays, 90), pct(delays, 99), max(delays)))
        print("Frame delays, all rounds (ms): %s" % " ".join("%.1f" % d for d in delays))
        print("Per round, delay p99: median %.1f ms over %d chat runs (a run's worst frame; "
              "the pooled p99 above is the worst of all runs)"
              % (statistics.median(pct(x["delays"], 99) for x in tu), len(tu)))
        print("Frame cost (draw + doupdate while streaming): **p50 %.2f ms** (target <= 2 ms), "
              "p99 %.2f ms, max %.2f ms" % (pct(costs, 50), pct(costs, 99), max(costs)))
        slow = [f for x in tu for f in x["slow"]]
        most = [max(range(3), key=lambda k: f[k]) for f in slow]
        print("Frames over 16 ms: %d of %d; the largest part: pacing wait %d, late start %d, "
              "draw %d; p50 of each %.1f / %.1f / %.1f ms (pacing wait: oldest text -> 1/120 s "
              "after the frame before, long when the text reached the UI thread after that "
              "frame began)" % (len(slow), len(delays), most.count(0), most.count(1),
                                most.count(2), pct([f[0] for f in slow], 50),
                                pct([f[1] for f in slow], 50), pct([f[2] for f in slow], 50)))
        if slow:
            print(slow_frames_text(slow))
        wake = [w for x in tu for w in x["wake"]]
        if wake:
            print("Floor: a bare poll() of 8 ms beside each chat round woke late by p50 %.2f ms, "
                  "p99 %.2f ms, max %.2f ms (%d wake-ups): the scheduler's wait at this load, "
                  "which every frame pays too" % (pct(wake, 50), pct(wake, 99), max(wake),
                                                  len(wake)))
        print("# load average at end: %.2f %.2f %.2f; bench run time %.0f s"
              % (load_end + (time.monotonic() - t_start,)))
        print()
        print("Last screen of the last round:")
        for line in tu[-1]["screen"].splitlines()[-5:]:
            print("    " + line)


if __name__ == "__main__":
    main()
