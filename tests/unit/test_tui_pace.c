/* test_tui_pace.c - tui/tui_pace.h: when the chat's next frame is due. A fake clock drives
 * synthetic schedules of text read by the network thread and taken by the UI thread, at once
 * or after a hold (the network's 64 KiB batches, a UI thread not running); no frame may start
 * later than TUI_TEXT_WAIT after the oldest text it shows, or TUI_FRAME_GAP after the text
 * was taken when it was taken later (when the loop wakes on time), nor closer than
 * TUI_FRAME_GAP to the one before. Then the network thread's hold (net/textbatch.h) of a fast
 * sender's text feeds the same pacing. */
#include "config.h"
#include "tui/tui_pace.h"
#include "net/textbatch.h"
#include "tap.h"

#include <stdlib.h>

#define EPS 1e-9

struct result {
    double worst;   /* the largest (frame start - oldest text it shows) */
    double over;    /* the largest (frame start - its bound): <= 0 when every frame kept it */
    double closest; /* the closest two frame starts came */
    int frames;
};

/* Runs a schedule: text is read at read[0..n) and taken by the UI thread at take[0..n) (both
 * ascending, take[i] >= read[i]); each frame costs cost seconds and shows all text taken
 * before it started. The loop wakes exactly when a frame is due or text is taken. A frame's
 * bound: its oldest text's read + TUI_TEXT_WAIT, that text's take + TUI_FRAME_GAP, or the
 * end of the frame before, whichever is latest. */
static struct result run(const double *read, const double *take, size_t n, double cost)
{
    struct result r = {0, -1e9, 1e9, 0};
    double now = 0, last = -1.0, oldest = 0, oldest_take = 0;
    size_t next = 0;
    while (next < n || oldest > 0) {
        double due = oldest > 0 ? tui_pace_due(last, oldest) : 1e18;
        double wake = next < n && take[next] < due ? take[next] : due;
        if (wake > now)
            now = wake;
        while (next < n && take[next] <= now) { /* taken: it waits for a frame */
            if (!oldest) {
                oldest = read[next];
                oldest_take = take[next];
            }
            next++;
        }
        if (oldest > 0 && now >= tui_pace_due(last, oldest) - EPS) {
            double bound = oldest + TUI_TEXT_WAIT;
            if (oldest_take + TUI_FRAME_GAP > bound)
                bound = oldest_take + TUI_FRAME_GAP;
            if (last >= 0 && last + cost > bound)
                bound = last + cost; /* the frame before was still being drawn */
            if (now - oldest > r.worst)
                r.worst = now - oldest;
            if (now - bound > r.over)
                r.over = now - bound;
            if (last >= 0 && now - last < r.closest)
                r.closest = now - last;
            last = now;
            oldest = 0;
            r.frames++;
            now += cost; /* text taken meanwhile waits for the next frame */
        }
    }
    return r;
}

/* 300 schedules (bursts, a steady trickle, a fast sender), frames costing 0.3-6 ms; each
 * text taken up to hold_max after its read. */
static struct result schedules(unsigned seed, double hold_max, int *deltas)
{
    struct result all = {0, -1e9, 1e9, 0};
    srand(seed);
    *deltas = 0;
    for (int sched = 0; sched < 300; sched++) {
        size_t n = 50 + (size_t)(rand() % 400);
        double *rd = malloc(n * sizeof *rd), *tk = malloc(n * sizeof *tk), t = 0;
        int kind = sched % 3;
        for (size_t i = 0; i < n; i++) {
            double gap = kind == 0 ? (rand() % 10 ? 0.0002 : 0.02 + (rand() % 30) / 1000.0)
                         : kind == 1 ? (rand() % 20000) / 1e6 /* 0-20 ms */
                                     : 0.00005;                 /* a fast sender */
            t += gap;
            rd[i] = t;
            tk[i] = t + hold_max * (rand() % 1001) / 1000.0;
            if (i && tk[i] < tk[i - 1])
                tk[i] = tk[i - 1]; /* the queue keeps the order */
        }
        double cost = (300 + rand() % 5700) / 1e6;
        struct result r = run(rd, tk, n, cost);
        if (r.worst > all.worst)
            all.worst = r.worst;
        if (r.over > all.over)
            all.over = r.over;
        if (r.closest < all.closest)
            all.closest = r.closest;
        all.frames += r.frames;
        *deltas += (int)n;
        free(rd);
        free(tk);
    }
    return all;
}

/* The network thread's passes over a fast sender (net/textbatch.h): one every dt seconds, each
 * NET_HOLD_MIN bytes of the stream and text bytes of its text, n passes. Fills rd (each
 * pass's read) and tk (when its batch went to the queue) for run(); returns the batches. */
static int net_passes(double dt, size_t text, size_t n, double *rd, double *tk)
{
    size_t held = 0, start = 0;
    double first = 0;
    int batches = 0;
    for (size_t i = 0; i < n; i++) {
        double now = (double)i * dt;
        if (!held)
            first = now;
        rd[i] = now;
        held += text;
        if (net_hold_batch(NET_HOLD_MIN, held, first, now) && i + 1 < n)
            continue;
        for (size_t j = start; j <= i; j++)
            tk[j] = now;
        start = i + 1;
        held = 0;
        batches++;
    }
    return batches;
}

int main(void)
{
    /* one delta just after a frame: never later than 120 Hz allows, nor TUI_TEXT_WAIT */
    TAP_OK(tui_pace_due(1.0, 1.001) <= 1.0 + TUI_FRAME_MIN + EPS,
           "text 1 ms after a frame: due %.2f ms after it (<= %.2f)",
           (tui_pace_due(1.0, 1.001) - 1.0) * 1000, TUI_FRAME_MIN * 1000);
    TAP_OK(tui_pace_due(1.0, 1.001) <= 1.001 + TUI_TEXT_WAIT + EPS,
           "text 1 ms after a frame: due %.2f ms after the text (<= %.2f)",
           (tui_pace_due(1.0, 1.001) - 1.001) * 1000, TUI_TEXT_WAIT * 1000);
    /* text read 4 ms before a frame began, taken after it: not 1/120 s after that frame */
    TAP_OK(tui_pace_due(1.0, 0.996) <= 1.0 + TUI_FRAME_GAP + EPS,
           "text read 4 ms before a frame: due %.2f ms after it (<= %.2f)",
           (tui_pace_due(1.0, 0.996) - 1.0) * 1000, TUI_FRAME_GAP * 1000);
    TAP_OK(tui_pace_due(1.0, 0.990) >= 1.0 + TUI_FRAME_GAP - EPS,
           "text read 10 ms before a frame: not due before %.2f ms after it",
           TUI_FRAME_GAP * 1000);
    /* text after a quiet spell: drawn at once */
    TAP_OK(tui_pace_due(1.0, 1.020) <= 1.020 + EPS, "text 20 ms after a frame: due at once");
    TAP_OK(tui_pace_due(1.0, 1.009) <= 1.009 + EPS, "text 9 ms after a frame: due at once");
    /* nothing new: the status bar's frames stay at 60 Hz */
    TAP_OK(tui_pace_due(1.0, 0) >= 1.0 + TUI_FRAME - EPS, "no text: 1/60 s after the last");

    /* text taken as it is read */
    int deltas;
    struct result r = schedules(14, 0, &deltas);
    TAP_OK(r.worst <= TUI_TEXT_WAIT + EPS,
           "300 schedules: no frame starts later than %.2f ms after its oldest text (worst "
           "%.2f ms)", TUI_TEXT_WAIT * 1000, r.worst * 1000);
    TAP_OK(r.closest >= TUI_FRAME_GAP - EPS,
           "no two frames start closer than %.2f ms (closest %.2f ms)", TUI_FRAME_GAP * 1000,
           r.closest * 1000);
    TAP_OK(r.frames < deltas, "frames %d for %d deltas: batched", r.frames, deltas);

    /* text held up to TUI_TEXT_WAIT - TUI_FRAME_GAP before the UI thread takes it: still
     * drawn within TUI_TEXT_WAIT of its read, unless a frame was being drawn */
    r = schedules(15, TUI_TEXT_WAIT - TUI_FRAME_GAP, &deltas);
    TAP_OK(r.over <= EPS,
           "held up to %.1f ms: every frame within %.2f ms of its oldest text's read or at the "
           "end of the frame before (%.2f ms over at worst)",
           (TUI_TEXT_WAIT - TUI_FRAME_GAP) * 1000, TUI_TEXT_WAIT * 1000,
           r.over > 0 ? r.over * 1000 : 0);
    /* held up to 20 ms (a UI thread not running): TUI_FRAME_GAP after the take at most */
    r = schedules(16, 0.020, &deltas);
    TAP_OK(r.over <= EPS,
           "held up to 20 ms: every frame within %.2f ms of its oldest text's read, %.2f ms "
           "of its take or at the end of the frame before (%.2f ms over at worst)",
           TUI_TEXT_WAIT * 1000, TUI_FRAME_GAP * 1000,
           r.over > 0 ? r.over * 1000 : 0);
    TAP_OK(r.closest >= TUI_FRAME_GAP - EPS,
           "held up to 20 ms: no two frames closer than %.2f ms (closest %.2f ms)",
           TUI_FRAME_GAP * 1000, r.closest * 1000);
    TAP_OK(r.frames < deltas, "held: frames %d for %d deltas", r.frames, deltas);

    /* the network's hold ends in time for the frame pacing's bound */
    TAP_OK(NET_HOLD_AGE <= TUI_TEXT_WAIT - TUI_FRAME_GAP + EPS,
           "the network holds text %.1f ms at most, within the %.1f ms the pacing allows",
           NET_HOLD_AGE * 1000, (TUI_TEXT_WAIT - TUI_FRAME_GAP) * 1000);
    enum { PASSES = 400 };
    double rd[PASSES], tk[PASSES];
    /* a fast sender slowed by a busy CPU: a pass every 0.5 ms with 1 KiB of text (64 KiB of
     * it would take 32 ms): every frame within TUI_TEXT_WAIT of its oldest text's read */
    int batches = net_passes(0.0005, 1024, PASSES, rd, tk);
    r = run(rd, tk, PASSES, 0.0005);
    TAP_OK(r.worst <= TUI_TEXT_WAIT + EPS,
           "a slowed fast sender: no frame later than %.2f ms after its oldest text (worst "
           "%.2f ms, %d batches, %d frames)",
           TUI_TEXT_WAIT * 1000, r.worst * 1000, batches, r.frames);
    /* a fast sender at full speed: 2 KiB of text every 0.05 ms still goes in whole batches */
    size_t text = 2048;
    batches = net_passes(0.00005, text, PASSES, rd, tk);
    int whole = (int)((PASSES * text + NET_BATCH_MAX - 1) / NET_BATCH_MAX);
    TAP_OK(batches <= whole, "a fast sender at full speed: %d batches for %zu KiB (%d of "
           "64 KiB)", batches, PASSES * text / 1024, whole);
    return tap_done();
}
