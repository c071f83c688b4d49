/* test_tui_pace.c - tui/tui_pace.h: when the chat's next frame is due. A fake clock drives
 * synthetic schedules of arriving text; no frame may start later than TUI_FRAME_MIN after the
 * oldest text it shows (when the loop wakes on time), nor closer than TUI_FRAME_MIN to the
 * one before. */
#include "config.h"
#include "tui/tui_pace.h"
#include "tap.h"

#include <stdlib.h>

#define EPS 1e-9

/* Runs a schedule: text arrives at arrive[0..n) (ascending), each frame costs cost seconds
 * and shows all text that arrived before it started. The loop wakes exactly when a frame is
 * due or text arrives. Returns the largest (frame start - oldest text it shows) and writes
 * the closest two frame starts came to *closest and the frames drawn to *frames. */
static double run(const double *arrive, size_t n, double cost, double *closest, int *frames)
{
    double now = 0, last = -1.0, oldest = 0, worst = 0;
    size_t next = 0;
    *closest = 1e9;
    *frames = 0;
    while (next < n || oldest > 0) {
        double due = oldest > 0 ? tui_pace_due(last, oldest) : 1e18;
        double wake = next < n && arrive[next] < due ? arrive[next] : due;
        if (wake > now)
            now = wake;
        while (next < n && arrive[next] <= now) { /* taken: it waits for a frame */
            if (!oldest)
                oldest = arrive[next];
            next++;
        }
        if (oldest > 0 && now >= tui_pace_due(last, oldest) - EPS) {
            if (now - oldest > worst)
                worst = now - oldest;
            if (last >= 0 && now - last < *closest)
                *closest = now - last;
            last = now;
            oldest = 0;
            (*frames)++;
            now += cost; /* text arriving meanwhile waits for the next frame */
        }
    }
    return worst;
}

int main(void)
{
    /* one delta just after a frame: the next frame is the earliest 120 Hz allows */
    TAP_OK(tui_pace_due(1.0, 1.001) <= 1.0 + TUI_FRAME_MIN + EPS,
           "text 1 ms after a frame: due %.2f ms after it (<= %.2f)",
           (tui_pace_due(1.0, 1.001) - 1.0) * 1000, TUI_FRAME_MIN * 1000);
    /* text after a quiet spell: drawn at once */
    TAP_OK(tui_pace_due(1.0, 1.020) <= 1.020 + EPS, "text 20 ms after a frame: due at once");
    TAP_OK(tui_pace_due(1.0, 1.009) <= 1.009 + EPS, "text 9 ms after a frame: due at once");
    /* nothing new: the status bar's frames stay at 60 Hz */
    TAP_OK(tui_pace_due(1.0, 0) >= 1.0 + TUI_FRAME - EPS, "no text: 1/60 s after the last");

    /* synthetic schedules: bursts, a steady trickle, a fast sender; frame costs 0.3-6 ms */
    srand(14);
    double worst_all = 0, closest_all = 1e9;
    int frames_all = 0, deltas_all = 0;
    for (int sched = 0; sched < 300; sched++) {
        size_t n = 50 + (size_t)(rand() % 400);
        double *a = malloc(n * sizeof *a), t = 0;
        int kind = sched % 3;
        for (size_t i = 0; i < n; i++) {
            double gap = kind == 0 ? (rand() % 10 ? 0.0002 : 0.02 + (rand() % 30) / 1000.0)
                         : kind == 1 ? (rand() % 20000) / 1e6 /* 0-20 ms */
                                     : 0.00005;                 /* a fast sender */
            t += gap;
            a[i] = t;
        }
        double cost = (300 + rand() % 5700) / 1e6, closest;
        int frames;
        double worst = run(a, n, cost, &closest, &frames);
        if (worst > worst_all)
            worst_all = worst;
        if (closest < closest_all)
            closest_all = closest;
        frames_all += frames;
        deltas_all += (int)n;
        free(a);
    }
    TAP_OK(worst_all <= TUI_FRAME_MIN + EPS,
           "300 schedules: no frame starts later than %.2f ms after its oldest text (worst "
           "%.2f ms)", TUI_FRAME_MIN * 1000, worst_all * 1000);
    TAP_OK(closest_all >= TUI_FRAME_MIN - EPS,
           "no two frames start closer than %.2f ms (closest %.2f ms)", TUI_FRAME_MIN * 1000,
           closest_all * 1000);
    TAP_OK(frames_all < deltas_all, "frames %d for %d deltas: batched", frames_all, deltas_all);
    return tap_done();
}
