/* tui_pace.h - when the chat draws its next frame: a pure function of the last frame's start
 * and the arrival of the oldest text not yet drawn, so that tests/unit/test_tui_pace.c drives
 * it with a fake clock. */
#ifndef TT_TUI_PACE_H
#define TT_TUI_PACE_H

#define TUI_FRAME (1.0 / 60.0)      /* with no text waiting, frames start this far apart */
#define TUI_FRAME_MIN (1.0 / 120.0) /* text waiting: at most this long after the last frame */
#define TUI_TEXT_WAIT 0.006         /* nor longer than this after the text was read */
#define TUI_FRAME_GAP 0.004         /* and frames never start closer than this */

/* Monotonic seconds when the next frame is due; oldest = 0: no text waits. oldest is when
 * the network thread read the text, which can be before the last frame began: the text
 * reached the UI thread after it (the network holds a fast sender's text until 64 KiB, at
 * most NET_HOLD_AGE in net/textbatch.h, or the UI thread was not running). Text is drawn as soon as 120 Hz allows (TUI_FRAME_MIN
 * after the last frame), and at the latest TUI_TEXT_WAIT after it was read, but never
 * sooner than TUI_FRAME_GAP after the last frame (250 Hz at most: a backlog taken in pieces
 * does not draw a frame per piece). So the pacing adds at most TUI_TEXT_WAIT to text that
 * reached the UI thread within TUI_TEXT_WAIT - TUI_FRAME_GAP of its read, where 120 Hz alone
 * added up to TUI_FRAME_MIN plus the time the text took to reach the UI thread; then come
 * a wake-up and a frame. (Aiming at 12 ms after the text, until 2026-12, left 4 ms of the
 * 16 ms target for both.) A fast sender gets 120-250 frames a second, each showing all that
 * came since the last. */
static inline double tui_pace_due(double last_frame, double oldest)
{
    if (oldest <= 0)
        return last_frame + TUI_FRAME;
    double floor = last_frame + TUI_FRAME_MIN;
    double due = oldest > floor ? oldest : floor;
    double late = oldest + TUI_TEXT_WAIT, gap = last_frame + TUI_FRAME_GAP;
    if (late < gap)
        late = gap;
    return late < due ? late : due;
}

#endif
