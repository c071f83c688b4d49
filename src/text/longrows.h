/* longrows.h - the rows of one long line that grows at its end (the chat's preview of an
 * unfinished line: tui_view.c), rewrapped from its last rows as text comes.
 *
 * Printable ASCII is wrapped here (one column per byte) by wrap_text's rules. The rows of a
 * line that is all printable ASCII are kept sparse: the offset of every LONGROWS_EVERY-th row
 * (a checkpoint), and the rows from the last checkpoint on. A row before them is rewrapped
 * from its checkpoint when it is asked for: greedy wrapping started at a row's start gives the
 * rows that followed it. Rows of other text are pushed by the caller and kept whole.
 *
 * Why: a 1.9 MB line at 80 columns has ~24,000 rows, 16 bytes each; kept whole they filled
 * 380 KB of fresh pages while the answer streamed, of which a frame draws a screenful. Sparse
 * they take ~3 KB, and the rows being written stay in the cache. */
#ifndef TOKTERM_LONGROWS_H
#define TOKTERM_LONGROWS_H

#include "text/wrap.h"

#include <stddef.h>
#include <stdint.h>

#define LONGROWS_EVERY 64

struct longrows_block;

struct longrows {
    struct wrap_rows tail;   /* rows [base, base + tail.n): all of them unless sparse */
    size_t base;             /* rows before the tail (a multiple of LONGROWS_EVERY) */
    uint32_t *ck;            /* ck[j]: offset of row j * LONGROWS_EVERY, j < base / EVERY */
    size_t capck;
    int sparse;              /* the text is printable ASCII: checkpoints before the tail */
    size_t width;            /* the ASCII rows' width and WRAP_PRE, to rewrap a block */
    int pre;
    unsigned gen;            /* bumped when rows before the tail may change */
    struct longrows_block *block; /* the block longrows_row rewrapped last (NULL: none yet) */
};

/* No rows; sparse says whether the text is printable ASCII (checkpoints allowed). Memory is
 * kept for the next rows. */
void longrows_clear(struct longrows *r, int sparse);
void longrows_free(struct longrows *r);

static inline size_t longrows_count(const struct longrows *r)
{
    return r->base + r->tail.n;
}

/* Drop the last two rows and return the offset to rewrap from (appended text changes only
 * the rows from the last one on: one more is redone for safety); with full, or when there
 * are not two rows, drop every row and return 0. */
size_t longrows_rewind(struct longrows *r, int full);

/* Wrap printable ASCII s[0..n) into rows at width w (pre: cut at the width) and push them;
 * their offsets are relative to s plus off. */
void longrows_ascii(struct longrows *r, const char *s, size_t n, size_t off, size_t w, int pre);

/* Push one row (a caller wrapping other text: not sparse). */
void longrows_push(struct longrows *r, struct wrap_row row);

/* Room for cap rows at once (a whole line's rows, not sparse); cut back by longrows_fit. */
void longrows_reserve(struct longrows *r, size_t cap);
void longrows_fit(struct longrows *r);

/* Row i of text[0..n) (the text the rows were wrapped from, grown or not); NULL past the
 * end. The pointer lasts until the next call on r. */
const struct wrap_row *longrows_row(const struct longrows *r, const char *text, size_t n,
                                    size_t i);

#endif
