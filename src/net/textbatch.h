/* textbatch.h - how long the network thread keeps a fast sender's text before it goes to the
 * queue: a pure function of sizes and the clock, so that tests/unit/test_tui_pace.c runs it
 * with a fake clock under the chat's frame pacing (tui/tui_pace.h). */
#ifndef TT_NET_TEXTBATCH_H
#define TT_NET_TEXTBATCH_H

#include <stddef.h>

/* Text handed to the queue at once, at most: a batch lives in NET_BATCH_CAP bytes (its NUL
 * included) and never grows (a single delta longer than that excepted), so a fast stream's
 * batches are blocks of one size that malloc hands out again. */
#define NET_BATCH_CAP ((size_t)64 << 10)
#define NET_BATCH_MAX (NET_BATCH_CAP - 1)
/* A pass of the net thread that read at least NET_HOLD_MIN bytes of a stream (a fast sender,
 * not a model's tokens) keeps its text, up to NET_BATCH_MAX, while more bytes arrive within
 * NET_HOLD_MS: one wakeup of the consumer for many reads. */
#define NET_HOLD_MIN ((size_t)16 << 10)
#define NET_HOLD_MS 1
/* ... and for at most NET_HOLD_AGE seconds after the batch's first text was read. A stream
 * fast enough to hold but slowed by a busy CPU took 10-17 ms to fill 64 KiB of Markdown text,
 * and the chat's frames then showed text 13-17 ms old (bench/tui/run.py --text markdown
 * --traces). Text the UI thread takes within TUI_TEXT_WAIT - TUI_FRAME_GAP of its read is
 * drawn within TUI_TEXT_WAIT of it (tui/tui_pace.h): 2 ms. A stream not slowed fills a batch
 * sooner (64 KiB of the 200k-delta stream in ~1 ms) and keeps whole ones. */
#define NET_HOLD_AGE 0.002

/* 1 when a transfer keeps its text after a pass that read pass_bytes: held bytes of text in
 * its batch, the first read at first, the last at now (seconds). */
static inline int net_hold_batch(size_t pass_bytes, size_t held, double first, double now)
{
    return pass_bytes >= NET_HOLD_MIN && held < NET_BATCH_MAX && now - first < NET_HOLD_AGE;
}

#endif
