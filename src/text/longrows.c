/* longrows.c - the rows of a long growing line, sparse when it is printable ASCII
 * (longrows.h). */
#include "config.h"
#include "text/longrows.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

struct longrows_block {
    struct wrap_rows rows; /* rows [first, first + rows.n) */
    size_t first;
    unsigned gen;          /* the longrows' gen they were wrapped at */
    int ok;
};

void longrows_push(struct longrows *r, struct wrap_row row)
{
    if (r->sparse && r->tail.n >= 2 * LONGROWS_EVERY) {
        /* the tail's first block becomes a checkpoint; its second stays whole (a rewind
         * never reaches back further than two rows) */
        size_t j = r->base / LONGROWS_EVERY;
        XGROW(r->ck, j + 1, r->capck);
        r->ck[j] = r->tail.v[0].off;
        memmove(r->tail.v, r->tail.v + LONGROWS_EVERY,
                (r->tail.n - LONGROWS_EVERY) * sizeof *r->tail.v);
        r->tail.n -= LONGROWS_EVERY;
        r->base += LONGROWS_EVERY;
    }
    XGROW(r->tail.v, r->tail.n + 1, r->tail.cap);
    r->tail.v[r->tail.n++] = row;
}

/* wrap_text for printable ASCII (one column per byte, no clusters to find), with the same
 * rules: break after spaces and drop them, keep indentation, cut words wider than the row;
 * pre cuts at the width. At most limit rows. */
static void longrows_wrap(struct longrows *r, const char *s, size_t n, size_t off, size_t w,
                          int pre, size_t limit)
{
    size_t row_start = 0, col = 0, pos = 0;
    size_t emitted = 0;
#define LR_EMIT(end, c)                                                                       \
    do {                                                                                      \
        longrows_push(r, (struct wrap_row){(uint32_t)(off + row_start),                       \
                                           (uint32_t)((end) - row_start), (uint32_t)(c), 0}); \
        if (++emitted >= limit)                                                               \
            return;                                                                           \
    } while (0)
    if (pre) {
        for (; pos < n; pos += w) {
            row_start = pos;
            size_t take = n - pos < w ? n - pos : w;
            LR_EMIT(pos + take, take);
        }
        if (!emitted) {
            row_start = 0;
            LR_EMIT(0, 0);
        }
        return;
    }
    size_t brk = 0, brk_end = 0, brk_endcol = 0;
    int have_brk = 0;
    while (pos < n) {
        if (pos == row_start && s[pos] != ' ') {
            /* a row that starts with a word, found from its end: the byte past the room, then
             * back to the last run of spaces (what the byte loop below decides, without
             * visiting every byte of the row) */
            if (n - pos <= w) { /* the rest fits */
                col = n - pos;
                pos = n;
                break;
            }
            size_t e = pos + w, q = e, next;
            if (s[e] == ' ') { /* the row ends before the run of spaces e is in */
                next = e;
                while (next < n && s[next] == ' ')
                    next++;
            } else { /* at the last run of spaces before e, else cut at e */
                while (q > pos && s[q - 1] != ' ')
                    q--;
                next = q > pos ? q : e;
                if (q == pos)
                    q = e;
                else
                    q--;
            }
            while (q > pos && s[q - 1] == ' ')
                q--;
            LR_EMIT(q, q - row_start);
            row_start = pos = next;
            col = 0;
            have_brk = 0;
            continue;
        }
        if (s[pos] == ' ' && pos == row_start) { /* indentation: kept, never a break */
            while (pos < n && s[pos] == ' ') {
                if (col > 0 && col + 1 > w) {
                    LR_EMIT(pos, col);
                    row_start = pos;
                    col = 0;
                }
                col++;
                pos++;
            }
            continue;
        }
        if (s[pos] == ' ') {
            size_t run_start = pos, run_col = col;
            while (pos < n && s[pos] == ' ') {
                pos++;
                col++;
            }
            if (col > w && run_start > row_start) {
                LR_EMIT(run_start, run_col);
                row_start = pos;
                col = 0;
                have_brk = 0;
            } else if (run_start > row_start) {
                have_brk = 1;
                brk = pos;
                brk_end = run_start;
                brk_endcol = run_col;
            }
            continue;
        }
        if (col + 1 > w && col > 0) {
            if (have_brk && brk > row_start && brk_end > row_start) {
                LR_EMIT(brk_end, brk_endcol);
                row_start = pos = brk;
            } else {
                LR_EMIT(pos, col);
                row_start = pos;
            }
            col = 0;
            have_brk = 0;
            continue;
        }
        /* the word goes on to the next space, the end, or the end of the row's room */
        size_t room = w - col, lim = n - pos < room ? n - pos : room;
        const char *sp = memchr(s + pos, ' ', lim);
        size_t k = sp ? (size_t)(sp - (s + pos)) : lim;
        col += k;
        pos += k;
    }
    if (row_start < n || !emitted)
        LR_EMIT(n, col);
#undef LR_EMIT
}

void longrows_ascii(struct longrows *r, const char *s, size_t n, size_t off, size_t w, int pre)
{
    if (r->width != w || r->pre != pre) {
        r->width = w;
        r->pre = pre;
        r->gen++;
    }
    longrows_wrap(r, s, n, off, w, pre, SIZE_MAX);
}

size_t longrows_rewind(struct longrows *r, int full)
{
    if (!full && r->tail.n >= 2) {
        r->tail.n -= 2;
        return r->tail.v[r->tail.n].off;
    }
    r->tail.n = 0;
    r->base = 0;
    r->gen++;
    return 0;
}

void longrows_clear(struct longrows *r, int sparse)
{
    if (sparse && !r->block)
        r->block = xcalloc(1, sizeof *r->block);
    r->tail.n = 0;
    r->base = 0;
    r->sparse = sparse;
    r->gen++;
}

void longrows_free(struct longrows *r)
{
    wrap_rows_free(&r->tail);
    free(r->ck);
    if (r->block)
        wrap_rows_free(&r->block->rows);
    free(r->block);
    memset(r, 0, sizeof(*r));
}

void longrows_reserve(struct longrows *r, size_t cap)
{
    if (r->sparse || r->tail.cap >= cap)
        return;
    r->tail.v = xreallocarray(r->tail.v, cap, sizeof *r->tail.v);
    r->tail.cap = cap;
}

void longrows_fit(struct longrows *r)
{
    if (r->tail.cap > r->tail.n + 4096) {
        r->tail.v = xreallocarray(r->tail.v, r->tail.n ? r->tail.n : 1, sizeof *r->tail.v);
        r->tail.cap = r->tail.n ? r->tail.n : 1;
    }
}

const struct wrap_row *longrows_row(const struct longrows *r, const char *text, size_t n,
                                    size_t i)
{
    if (i >= r->base)
        return i - r->base < r->tail.n ? &r->tail.v[i - r->base] : NULL;
    /* before the tail: its block, rewrapped from its checkpoint unless it is the last one
     * asked for (a frame asks for its rows in order) */
    size_t j = i / LONGROWS_EVERY, first = j * LONGROWS_EVERY;
    struct longrows_block *b = r->block; /* made when the rows became sparse */
    if (!b->ok || b->first != first || b->gen != r->gen) {
        b->rows.n = 0;
        struct longrows tmp = {.tail = b->rows};
        size_t at = r->ck[j];
        longrows_wrap(&tmp, text + at, n - at, at, r->width, r->pre, LONGROWS_EVERY);
        b->rows = tmp.tail;
        b->first = first;
        b->gen = r->gen;
        b->ok = 1;
    }
    return i - first < b->rows.n ? &b->rows.v[i - first] : NULL;
}
