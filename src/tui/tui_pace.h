/* tui_pace.h - when the chat draws its next frame: a pure function of the last frame's start
 * and the arrival of the oldest text not yet drawn, so that tests/unit/test_tui_pace.c drives
 * it with a fake clock. */
#ifndef TT_TUI_PACE_H
#define TT_TUI_PACE_H

#define TUI_FRAME (1.0 / 60.0)      /* with no text waiting, frames start this far apart */
#define TUI_FRAME_MIN (1.0 / 120.0) /* and never closer than this */

/* Monotonic seconds when the next frame is due; oldest = 0: no text waits. Text is drawn as
 * soon as 120 Hz allows: at once when the last frame started TUI_FRAME_MIN ago or more, else
 * then. (Aiming at a fixed delay after the oldest text, 12 ms until 2026-12, left 4 ms of the
 * 16 ms target for a late wake-up and a slow frame together, and a loaded machine took more.)
 * So text waits at most TUI_FRAME_MIN plus a wake-up and a frame; a fast sender gets 120
 * frames a second, each showing all that came since the last. */
static inline double tui_pace_due(double last_frame, double oldest)
{
    if (oldest <= 0)
        return last_frame + TUI_FRAME;
    double floor = last_frame + TUI_FRAME_MIN;
    return oldest > floor ? oldest : floor;
}

#endif
