/* wrap.c - grapheme cluster widths, line wrapping and an incrementally wrapped document. */
#include "config.h"
#include "text/wrap.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "base/xmalloc.h"
#include "text/table.h"

#define TAB_STOP 4

/* ---- widths ---- */

static int is_pictographic(uint32_t cp)
{
    if (cp < 0xA9)
        return 0;
    int b = utf8proc_get_property((utf8proc_int32_t)cp)->boundclass;
    return b == UTF8PROC_BOUNDCLASS_EXTENDED_PICTOGRAPHIC || b == UTF8PROC_BOUNDCLASS_E_BASE ||
           b == UTF8PROC_BOUNDCLASS_E_BASE_GAZ || b == UTF8PROC_BOUNDCLASS_GLUE_AFTER_ZWJ;
}

static int is_regional(uint32_t cp)
{
    return cp >= 0x1F1E6 && cp <= 0x1F1FF;
}

static int is_mark(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

int wrap_cp_width(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0))
        return 0;
    if (cp < 0x300)
        return 1;
    if ((cp >= 0x1160 && cp <= 0x11FF) || (cp >= 0xD7B0 && cp <= 0xD7FF))
        return 0; /* Hangul Jamo vowels and final consonants join the leading consonant */
    if (cp > 0x10FFFF)
        return 1;
    if (utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MC)
        return 1; /* spacing marks advance the cursor in terminals */
    return utf8proc_charwidth((utf8proc_int32_t)cp);
}

/* Code points of 2 columns that no grapheme rule joins to what precedes or follows them
 * other than by the rules for Extend, ZWJ and SpacingMark: CJK ideographs (URO, extension A),
 * hiragana and katakana letters, precomposed Hangul syllables (LV/LVT: nothing but jamo V/T
 * joins them). */
static inline int simple_wide(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FEF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x30A1 && cp <= 0x30FA) ||
           (cp >= 0xAC00 && cp <= 0xD7A3);
}

/* The code point of the three-byte sequence at s when it is simple_wide, else 0 (the lead
 * bytes E3..ED are never overlong; simple_wide excludes the surrogates). */
static inline uint32_t dec3_cjk(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    if (n < 3 || s[0] < 0xE3 || s[0] > 0xED || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
        return 0;
    uint32_t cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return simple_wide(cp) ? cp : 0;
}

/* Cluster flags */
#define CL_CJK 0x01u /* a wide, non-emoji cluster: a line may break before and after it */

static size_t cluster_info(const char *s, size_t n, int *width, unsigned *flags)
{
    *flags = 0;
    if (n == 0) {
        *width = 0;
        return 0;
    }
    unsigned char c0 = (unsigned char)s[0];
    if (c0 < 0x80 && (n == 1 || (unsigned char)s[1] < 0x80) && !(c0 == '\r' && n > 1 &&
                                                                   s[1] == '\n')) {
        *width = c0 >= 0x20 && c0 < 0x7F ? 1 : 0;
        return 1;
    }
    uint32_t w3 = dec3_cjk(s, n);
    if (w3 && (n == 3 || (unsigned char)s[3] < 0x80 || dec3_cjk(s + 3, n - 3))) {
        *width = 2; /* CJK before ASCII or CJK: see the simple_wide case below */
        *flags = CL_CJK;
        return 3;
    }
    uint32_t first, cp;
    size_t pos = utf8_decode(s, n, &first);
    if (first == UTF8_REPLACEMENT && pos == 1) {
        *width = 1; /* an invalid byte stands alone, drawn as U+FFFD */
        return 1;
    }
    if (simple_wide(first)) {
        /* CJK text: a cluster ends before ASCII or another such character (none of them is
         * Prepend, Extend, ZWJ, SpacingMark or a Hangul jamo); anything else takes the long
         * way below */
        uint32_t next = 0;
        if (pos == n || (unsigned char)s[pos] < 0x80 ||
            (utf8_decode(s + pos, n - pos, &next) > 1 && simple_wide(next))) {
            *width = 2;
            *flags = CL_CJK;
            return pos;
        }
    }
    utf8proc_int32_t state = 0;
    uint32_t prev = first;
    int pict = is_pictographic(first), ri = is_regional(first);
    int keycap = first == '#' || first == '*' || (first >= '0' && first <= '9');
    int sum = wrap_cp_width(first), emoji = 0, text = 0, after_zwj = 0;
    while (pos < n) {
        size_t k = utf8_decode(s + pos, n - pos, &cp);
        if (cp == UTF8_REPLACEMENT && k == 1)
            break;
        if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cp,
                                             &state))
            break;
        if (cp == 0xFE0F) {
            if (pict || keycap)
                emoji = 1;
        } else if (cp == 0xFE0E) {
            if (pict)
                text = 1;
        } else if (cp == 0x200D) {
            after_zwj = 1;
        } else if (cp >= 0x1F3FB && cp <= 0x1F3FF) {
            if (pict)
                emoji = 1;
        } else if (ri && is_regional(cp)) {
            emoji = 1;
        } else if (after_zwj && is_pictographic(cp)) {
            if (pict)
                emoji = 1;
        } else {
            sum += wrap_cp_width(cp);
        }
        prev = cp;
        pos += k;
    }
    if (emoji)
        *width = 2;
    else if (text)
        *width = 1;
    else if (sum == 0 && is_mark(first))
        *width = 1;
    else
        *width = sum;
    if (!emoji && !pict && wrap_cp_width(first) == 2)
        *flags |= CL_CJK;
    return pos;
}

/* cluster_info with printable ASCII (not followed by a combining sequence) and CJK before
 * ASCII or CJK (its first case) inline. */
static inline size_t cluster_ascii(const char *s, size_t n, int *width, unsigned *flags)
{
    unsigned char c = (unsigned char)s[0];
    if (c >= 0x20 && c < 0x7F && (n == 1 || (unsigned char)s[1] < 0x80)) {
        *width = 1;
        *flags = 0;
        return 1;
    }
    if (c >= 0xE3 && dec3_cjk(s, n) &&
        (n == 3 || (unsigned char)s[3] < 0x80 || dec3_cjk(s + 3, n - 3))) {
        *width = 2;
        *flags = CL_CJK;
        return 3;
    }
    return cluster_info(s, n, width, flags);
}

size_t wrap_cluster(const char *s, size_t n, int *width)
{
    int w;
    unsigned f;
    size_t k = cluster_info(s, n, &w, &f);
    if (width)
        *width = w;
    return k;
}

size_t wrap_width(const char *s, size_t n)
{
    size_t total = 0, pos = 0;
    while (pos < n) {
        int w;
        pos += wrap_cluster(s + pos, n - pos, &w);
        total += (size_t)w;
    }
    return total;
}

size_t wrap_fit(const char *s, size_t n, size_t cols, size_t *used)
{
    size_t total = 0, pos = 0;
    while (pos < n) {
        int w;
        size_t k = wrap_cluster(s + pos, n - pos, &w);
        if (total + (size_t)w > cols)
            break;
        total += (size_t)w;
        pos += k;
    }
    if (used)
        *used = total;
    return pos;
}

int wrap_one_visible(const char *s, size_t n)
{
    size_t seen = 0;
    for (size_t i = 0; i < n && seen <= 1;) {
        int w;
        i += wrap_cluster(s + i, n - i, &w);
        seen += w > 0;
    }
    return seen <= 1;
}

void wrap_clean(struct buf *out, const char *s, size_t n)
{
    if (!memchr(s, '\t', n)) { /* nothing to expand: the sanitised text as it is */
        utf8_sanitize(out, s, n);
        return;
    }
    struct buf tmp = BUF_INIT;
    utf8_sanitize(&tmp, s, n);
    const char *t = buf_str(&tmp);
    size_t len = tmp.len, pos = 0, run = 0, col = 0;
    buf_reserve(out, len);
    while (pos < len) {
        if (t[pos] == '\t') {
            buf_append(out, t + run, pos - run);
            size_t spaces = TAB_STOP - col % TAB_STOP;
            for (size_t i = 0; i < spaces; i++)
                buf_appendc(out, ' ');
            col += spaces;
            run = ++pos;
        } else if (t[pos] == '\n') {
            col = 0;
            pos++;
        } else {
            int w;
            pos += wrap_cluster(t + pos, len - pos, &w);
            col += (size_t)w;
        }
    }
    buf_append(out, t + run, len - run);
    buf_free(&tmp);
}

/* ---- wrapping ---- */

static void rows_add(struct wrap_rows *r, size_t off, size_t len, size_t width, size_t indent)
{
    XGROW(r->v, r->n + 1, r->cap);
    r->v[r->n++] = (struct wrap_row){(uint32_t)off, (uint32_t)len, (uint32_t)width,
                                     (uint32_t)indent};
}

/* Wrapping one hard line: the row being filled and the last break opportunity in it. */
struct wrapper {
    struct wrap_rows *out;
    const char *s;
    size_t n, base, width, hang; /* hang: indent of the rows after the first (0 when wide) */
    size_t row_start, col, pos, emitted;
    int first;
    /* the row could end at brk_end (brk_endcol columns) and the next one start at brk */
    size_t brk, brk_end, brk_endcol;
    int have_brk, prev_cjk;
};

/* Columns of the current row. */
static inline size_t wrapper_avail(const struct wrapper *w)
{
    return w->first ? w->width : w->width - w->hang;
}

/* End the current row at byte end, cols columns wide. */
static inline void wrapper_emit(struct wrapper *w, size_t end, size_t cols)
{
    rows_add(w->out, w->base + w->row_start, end - w->row_start, cols, w->first ? 0 : w->hang);
    w->emitted++;
    w->first = 0;
}

/* End the current row at the current position and start the next one there. */
static inline void wrapper_cut(struct wrapper *w)
{
    wrapper_emit(w, w->pos, w->col);
    w->row_start = w->pos;
    w->col = 0;
}

int wrap_bytewise;

/* The end of the run of bytes in [lo, 0x7E] starting at s[pos] (lo: 0x21, a word; 0x20,
 * printable ASCII): eight bytes at a time (a byte below lo or above 0x7E ends it; the lowest
 * byte the borrow/carry tricks flag is exact). */
static inline size_t ascii_run_end(const unsigned char *s, size_t pos, size_t n, unsigned lo)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    while (pos + 8 <= n) {
        uint64_t x;
        memcpy(&x, s + pos, 8);
        uint64_t m = (((x - ones * lo) & ~x) | ((x + ones) | x)) & high;
        if (m)
            return pos + (size_t)(__builtin_ctzll(m) >> 3);
        pos += 8;
    }
#endif
    while (pos < n && s[pos] >= lo && s[pos] < 0x7F)
        pos++;
    return pos;
}

/* WRAP_PRE: cut wherever the next character does not fit; spaces are text. A run of printable
 * ASCII goes a row's room at a time (its last byte is left to the cluster step when a non-ASCII
 * byte follows, which may be a combining mark of its cluster). */
static void wrap_pre(struct wrapper *w)
{
    const unsigned char *s = (const unsigned char *)w->s;
    while (w->pos < w->n) {
        if (!wrap_bytewise) {
            size_t e = ascii_run_end(s, w->pos, w->n, 0x20);
            if (e < w->n && s[e] >= 0x80 && e > w->pos)
                e--;
            while (w->pos < e) {
                size_t avail = wrapper_avail(w);
                if (w->col > 0 && w->col + 1 > avail) {
                    wrapper_cut(w);
                    avail = wrapper_avail(w);
                }
                size_t room = avail > w->col ? avail - w->col : 1;
                size_t take = e - w->pos < room ? e - w->pos : room;
                w->col += take;
                w->pos += take;
            }
            if (w->pos >= w->n)
                break;
        }
        int cw;
        unsigned cf;
        size_t k = cluster_ascii(w->s + w->pos, w->n - w->pos, &cw, &cf);
        if (w->col > 0 && w->col + (size_t)cw > wrapper_avail(w))
            wrapper_cut(w);
        w->col += (size_t)cw;
        w->pos += k;
    }
}

/* A run of spaces. At the start of a row it is indentation: kept, cut like any text when it
 * is wider than the row, never a break opportunity. Elsewhere it is a break opportunity, or,
 * when it overflows the row, the row ends before it and it is dropped. */
static void wrap_spaces(struct wrapper *w)
{
    const char *s = w->s;
    if (w->pos == w->row_start) {
        while (w->pos < w->n && s[w->pos] == ' ') {
            if (w->col > 0 && w->col + 1 > wrapper_avail(w))
                wrapper_cut(w);
            w->col++;
            w->pos++;
        }
        w->prev_cjk = 0;
        return;
    }
    size_t run_start = w->pos, run_col = w->col;
    while (w->pos < w->n && s[w->pos] == ' ') {
        w->pos++;
        w->col++;
    }
    if (w->col > wrapper_avail(w) && run_start > w->row_start) {
        wrapper_emit(w, run_start, run_col);
        w->row_start = w->pos;
        w->col = 0;
        w->have_brk = 0;
    } else if (run_start > w->row_start) {
        w->have_brk = 1;
        w->brk = w->pos;
        w->brk_end = run_start;
        w->brk_endcol = run_col;
    }
    w->prev_cjk = 0;
}

/* One character cluster: placed on the row, or the row ends (at the last break opportunity,
 * the carried word rescanned on the next row, else right here). CJK characters may break
 * anywhere. */
static void wrap_char(struct wrapper *w)
{
    int cw;
    unsigned cf;
    size_t k = cluster_ascii(w->s + w->pos, w->n - w->pos, &cw, &cf);
    int cjk = (cf & CL_CJK) != 0;
    if ((cjk || w->prev_cjk) && w->pos > w->row_start) {
        w->have_brk = 1;
        w->brk = w->brk_end = w->pos;
        w->brk_endcol = w->col;
    }
    if (w->col + (size_t)cw > wrapper_avail(w) && w->col > 0) {
        if (w->have_brk && w->brk > w->row_start && w->brk_end > w->row_start) {
            wrapper_emit(w, w->brk_end, w->brk_endcol);
            w->row_start = w->pos = w->brk; /* rescan the carried word on the new row */
        } else {
            wrapper_emit(w, w->pos, w->col);
            w->row_start = w->pos;
        }
        w->col = 0;
        w->have_brk = 0;
        w->prev_cjk = 0;
        return;
    }
    w->col += (size_t)cw;
    w->pos += k;
    w->prev_cjk = cjk;
}

/* A run of printable ASCII other than spaces that fits the row whole: placed at once, as
 * wrap_char would place it one byte at a time (its last byte is left to wrap_char when a
 * non-ASCII byte follows, which may be a combining mark of its cluster). Returns 0 when the
 * run is empty or does not fit (wrap_char then takes it byte by byte). */
static inline int wrap_ascii_word(struct wrapper *w)
{
    const unsigned char *s = (const unsigned char *)w->s;
    size_t e = w->pos;
    while (e < w->n && s[e] > 0x20 && s[e] < 0x7F)
        e++;
    if (e < w->n && s[e] >= 0x80)
        e--;
    if (e <= w->pos || w->col + (e - w->pos) > wrapper_avail(w))
        return 0;
    if (w->prev_cjk && w->pos > w->row_start) { /* a break opportunity after CJK */
        w->have_brk = 1;
        w->brk = w->brk_end = w->pos;
        w->brk_endcol = w->col;
    }
    w->col += e - w->pos;
    w->pos = e;
    w->prev_cjk = 0;
    return 1;
}


/* wrap_one's loop (wrap_spaces after the row's start, wrap_ascii_word, wrap_char) for printable
 * ASCII, spaces and the CJK that cluster_ascii measures inline, with the state in locals and
 * the clusters classified inline: the same rows and the same state. Returns at the first byte
 * it does not take (indentation, anything else), where the loop goes on. */
static void wrap_fast(struct wrapper *w)
{
    const unsigned char *s = (const unsigned char *)w->s;
    const char *cs = w->s;
    size_t n = w->n, pos = w->pos, col = w->col;
    size_t brk = w->brk, brk_end = w->brk_end, brk_endcol = w->brk_endcol;
    int have_brk = w->have_brk, prev_cjk = w->prev_cjk;
    size_t avail = wrapper_avail(w);
    while (pos < n) {
        unsigned c = s[pos];
        if (c == ' ') {
            if (pos == w->row_start)
                break; /* indentation: wrap_spaces */
            size_t run_start = pos, run_col = col;
            while (pos < n && s[pos] == ' ') {
                pos++;
                col++;
            }
            if (col > avail) {
                wrapper_emit(w, run_start, run_col);
                w->row_start = pos;
                col = 0;
                have_brk = 0;
                avail = wrapper_avail(w);
            } else {
                have_brk = 1;
                brk = pos;
                brk_end = run_start;
                brk_endcol = run_col;
            }
            prev_cjk = 0;
            continue;
        }
        size_t k, cw;
        int cjk;
        if (c > 0x20 && c < 0x7F) {
            size_t e = ascii_run_end(s, pos + 1, n, 0x21);
            if (e < n && s[e] >= 0x80)
                e--;
            if (e > pos && col + (e - pos) <= avail) { /* wrap_ascii_word */
                if (prev_cjk && pos > w->row_start) {
                    have_brk = 1;
                    brk = brk_end = pos;
                    brk_endcol = col;
                }
                col += e - pos;
                pos = e;
                prev_cjk = 0;
                continue;
            }
            if (pos + 1 < n && s[pos + 1] >= 0x80 && !dec3_cjk(cs + pos + 1, n - pos - 1))
                break; /* maybe a combining mark: cluster_info */
            k = cw = 1;
            cjk = 0;
        } else if (c >= 0xE3 && dec3_cjk(cs + pos, n - pos) &&
                   (pos + 3 == n || s[pos + 3] < 0x80 || dec3_cjk(cs + pos + 3, n - pos - 3))) {
            k = 3;
            cw = 2;
            cjk = 1;
        } else {
            break;
        }
        /* wrap_char */
        if ((cjk || prev_cjk) && pos > w->row_start) {
            have_brk = 1;
            brk = brk_end = pos;
            brk_endcol = col;
        }
        if (col + cw > avail && col > 0) {
            if (have_brk && brk > w->row_start && brk_end > w->row_start) {
                wrapper_emit(w, brk_end, brk_endcol);
                w->row_start = pos = brk;
            } else {
                wrapper_emit(w, pos, col);
                w->row_start = pos;
            }
            col = 0;
            have_brk = 0;
            prev_cjk = 0;
            avail = wrapper_avail(w);
            continue;
        }
        col += cw;
        pos += k;
        prev_cjk = cjk;
    }
    w->pos = pos;
    w->col = col;
    w->brk = brk;
    w->brk_end = brk_end;
    w->brk_endcol = brk_endcol;
    w->have_brk = have_brk;
    w->prev_cjk = prev_cjk;
}

/* Wrap one hard line s[0..n) whose first byte is at `base` in the caller's text. */
static void wrap_one(struct wrap_rows *out, const char *s, size_t n, size_t base, size_t width,
                     size_t hang, unsigned flags)
{
    struct wrapper w = {.out = out, .s = s, .n = n, .base = base, .width = width,
                        .hang = hang > 0 && hang * 2 <= width ? hang : 0, .first = 1};
    if (flags & WRAP_PRE)
        wrap_pre(&w);
    else
        while (w.pos < n) {
            if (!wrap_bytewise) {
                wrap_fast(&w);
                if (w.pos >= n)
                    break;
            }
            if (s[w.pos] == ' ')
                wrap_spaces(&w);
            else if (!wrap_ascii_word(&w))
                wrap_char(&w);
        }
    if (w.row_start < n || w.emitted == 0)
        wrapper_emit(&w, n, w.col);
}

void wrap_text(struct wrap_rows *out, const char *s, size_t n, int width, int hang,
               unsigned flags)
{
    size_t w = width < 1 ? 1 : (size_t)width, h = hang < 0 ? 0 : (size_t)hang, start = 0;
    for (;;) {
        const char *nl = memchr(s + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - s) : n;
        wrap_one(out, s + start, end - start, start, w, h, flags);
        if (!nl)
            break;
        start = end + 1;
    }
}

void wrap_rows_free(struct wrap_rows *rows)
{
    free(rows->v);
    rows->v = NULL;
    rows->n = rows->cap = 0;
}

/* ---- wrap_doc ----
 *
 * Memory: a line costs its text (in an arena of blocks that never move), one struct dline
 * (40 bytes), a wrap_row (16 bytes) per row when it has more than one and its spans (12 bytes
 * each; none when the line is in one style, the common case). The spans of a row are cut from
 * its line's spans when the row is asked for, and a rule's text is one string per document, so
 * the rows of an answer cost well under twice its size, not a copy per row. (Indexes are 32
 * bits: an answer is at most 4 GiB, max_answer_mb.) */

#define ARENA_BLOCK 65536 /* text arena blocks; a longer line gets a block of its own */

struct arena {
    char **blocks;
    size_t n, cap;
    size_t used, size; /* of the last block */
};

#define DL_ONEROW 0x8000u /* dline.flags: one row {0, len, ri = its width, 0}, not in rows */
#define DL_TABLE 0x4000u  /* dline.flags: a table row laid out in tabs[ri] (WRAP_TABLE) */
#define DL_LATER 0x2000u  /* dline.flags: highlighted when a row is asked for (wrap_hl) */
#define DL_OWN (DL_ONEROW | DL_TABLE | DL_LATER)

/* The lines to highlight when drawn, in two small lists rather than a record per line (a
 * 10,000-line block made 400 KB of records, and their fresh pages cost more than styling it):
 * runs of consecutive lines of one language whose code starts at the same byte, and the few
 * lines that start inside a string or comment (every other line starts from HL_STATE_INIT). */
struct drun {
    size_t line0;
    uint32_t n, at;
    const struct hl_lang *lang;
};

struct dstate {
    size_t line;
    struct hl_state st;
};

struct dline {
    const char *text; /* in the list's arena; NULL for a rule (the document's rule string) */
    size_t row0;      /* rows before this line in its list */
    uint32_t len;
    uint32_t nspans;  /* 0: the whole line in `slot`, no attributes */
    uint32_t span0;   /* its spans: spans[span0 .. span0 + nspans) */
    uint32_t ri;      /* its rows: rows.v[ri ..]; with DL_ONEROW, the width of its one row */
    uint16_t slot, hang, flags, tag;
};

struct dlist {
    struct dline *v;
    size_t n, cap;
    struct wrap_rows rows;  /* the rows of every line that has more than one, in order */
    size_t total;           /* rows of all lines */
    struct theme_span *spans;
    size_t nspans, capspans;
    struct arena text;
    struct table_out *tabs; /* table rows laid out at the width (WRAP_TABLE lines) */
    size_t ntabs, captabs;
    size_t ntabs_made;      /* tabs[0 .. ntabs_made) hold buffers kept for reuse */
    struct drun *runs;      /* the DL_LATER lines, in order */
    size_t nruns, capruns;
    struct dstate *states;  /* those of them that start in a string or comment, in order */
    size_t nstates, capstates;
};

struct wrap_doc {
    int width;
    struct dlist fin, pend;
    struct buf tail;   /* append_text: the unfinished raw line */
    struct buf scratch;
    struct buf rule;   /* a rule's text at this width */
    struct theme_span *rsp; /* the spans of the row wrap_doc_row gave last */
    size_t caprsp;
    struct hl *hl;          /* the compiled tables of the last language highlighted */
    struct hl_spans hsp;    /* a DL_LATER line's spans, being made */
    size_t highlighted;     /* DL_LATER lines highlighted so far (wrap_doc_highlighted) */
};

static const char *arena_put(struct arena *a, const char *s, size_t n)
{
    if (!n)
        return "";
    if (!a->n || a->size - a->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        XGROW(a->blocks, a->n + 1, a->cap);
        a->blocks[a->n++] = xmalloc(size);
        a->size = size;
        a->used = 0;
    }
    char *p = a->blocks[a->n - 1] + a->used;
    memcpy(p, s, n);
    a->used += n;
    return p;
}

/* Take p (malloc'd, n bytes of text) as a block of its own, full. */
static const char *arena_adopt(struct arena *a, char *p, size_t n)
{
    XGROW(a->blocks, a->n + 1, a->cap);
    if (a->n && a->used < a->size) { /* keep the last block open: the adopted one goes before */
        a->blocks[a->n] = a->blocks[a->n - 1];
        a->blocks[a->n - 1] = p;
    } else {
        a->blocks[a->n] = p;
        a->size = a->used = n;
    }
    a->n++;
    return p;
}

static void arena_free(struct arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof(*a));
}

static void spans_push(struct theme_span **v, size_t *n, size_t *cap, size_t first,
                       struct theme_span sp)
{
    if (sp.len == 0)
        return;
    if (*n > first && (*v)[*n - 1].slot == sp.slot && (*v)[*n - 1].attrs == sp.attrs &&
        (*v)[*n - 1].off + (*v)[*n - 1].len == sp.off) {
        (*v)[*n - 1].len += sp.len;
        return;
    }
    XGROW(*v, *n + 1, *cap);
    (*v)[(*n)++] = sp;
}

/* Append l's spans to the list so that they are sorted, inside the text, and cover it (gaps
 * get the line's slot); one span in the line's slot without attributes is not stored. */
static void normalise_spans(struct dlist *dl, struct dline *l, const struct theme_span *sp,
                            size_t nsp)
{
    size_t at = 0, first = dl->nspans;
    l->span0 = (uint32_t)first;
    /* what markdown makes (the spans in order, each where the last ended, none empty, no two
     * neighbours alike, the last at the end) is stored as it is, in one copy */
    size_t ok = 0;
    while (ok < nsp && sp[ok].off == at && sp[ok].len &&
           (ok == 0 || sp[ok].slot != sp[ok - 1].slot || sp[ok].attrs != sp[ok - 1].attrs)) {
        at += sp[ok].len;
        ok++;
    }
    if (ok == nsp && at == l->len && nsp > 0 &&
        !(nsp == 1 && sp[0].slot == l->slot && sp[0].attrs == 0)) {
        XGROW(dl->spans, first + nsp, dl->capspans);
        memcpy(dl->spans + first, sp, nsp * sizeof(*sp));
        dl->nspans = first + nsp;
        l->nspans = (uint32_t)nsp;
        return;
    }
    at = 0;
    for (size_t i = 0; i < nsp; i++) {
        size_t a = sp[i].off, b = (size_t)sp[i].off + sp[i].len;
        if (b > l->len)
            b = l->len;
        if (a < at)
            a = at; /* overlapping or unsorted: keep the earlier one */
        if (a >= b)
            continue;
        if (a > at)
            spans_push(&dl->spans, &dl->nspans, &dl->capspans, first,
                       (struct theme_span){(uint32_t)at, (uint32_t)(a - at), l->slot, 0});
        spans_push(&dl->spans, &dl->nspans, &dl->capspans, first,
                   (struct theme_span){(uint32_t)a, (uint32_t)(b - a), sp[i].slot,
                                       sp[i].attrs});
        at = b;
    }
    if (at < l->len)
        spans_push(&dl->spans, &dl->nspans, &dl->capspans, first,
                   (struct theme_span){(uint32_t)at, (uint32_t)(l->len - at), l->slot, 0});
    l->nspans = (uint32_t)(dl->nspans - first);
    if (l->nspans == 1 && dl->spans[first].slot == l->slot && dl->spans[first].attrs == 0) {
        dl->nspans = first; /* the whole line in its own slot: implied */
        l->nspans = 0;
    }
}

/* Wrap l at width: a line of one row that is all of it keeps only its width, other rows are
 * appended to the list's rows. */
static void dline_wrap(struct dlist *dl, struct dline *l, int width)
{
    l->row0 = dl->total;
    l->flags &= (uint16_t)~(DL_ONEROW | DL_TABLE);
    if (l->flags & WRAP_TABLE) {
        struct theme_span one = {0, l->len, l->slot, 0};
        XGROW(dl->tabs, dl->ntabs + 1, dl->captabs);
        struct table_out *t = &dl->tabs[dl->ntabs];
        if (dl->ntabs == dl->ntabs_made) { /* a new slot: its buffers start empty */
            memset(t, 0, sizeof(*t));
            dl->ntabs_made++;
        }
        if (table_layout(l->text, l->len, l->nspans ? dl->spans + l->span0 : &one,
                         l->nspans ? l->nspans : 1, l->slot, width, t) == 0) {
            l->flags |= DL_TABLE;
            l->ri = (uint32_t)dl->ntabs++;
            dl->total += t->rows.n;
            return;
        }
    }
    if (l->flags & WRAP_RULE) {
        l->flags |= DL_ONEROW;
        l->ri = (uint32_t)(width < 1 ? 1 : width);
        dl->total++;
        return;
    }
    size_t n0 = dl->rows.n;
    wrap_text(&dl->rows, l->text, l->len, width, l->hang,
              l->flags & (WRAP_PRE | WRAP_TABLE) ? WRAP_PRE : 0);
    const struct wrap_row *r = &dl->rows.v[n0];
    dl->total += dl->rows.n - n0;
    if (dl->rows.n - n0 == 1 && r->off == 0 && r->len == l->len && r->indent == 0) {
        l->flags |= DL_ONEROW;
        l->ri = r->width;
        dl->rows.n = n0;
    } else {
        l->ri = (uint32_t)n0;
    }
}

/* The first of n records (stride bytes apart, sorted by the size_t at byte off) whose size_t
 * there is key or more; n when none: the binary search of the line lists. */
static size_t dl_search(const void *v, size_t n, size_t stride, size_t off, size_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, at;
        memcpy(&at, (const char *)v + mid * stride + off, sizeof at);
        if (at < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int hl_state_init(const struct hl_state *st)
{
    static const struct hl_state init = HL_STATE_INIT;
    return memcmp(st, &init, sizeof(init)) == 0;
}

/* Line `line` (the list's last so far) is highlighted when drawn: it joins the last run or
 * starts one. */
static void dlater_add(struct dlist *dl, size_t line, const struct hl_lang *lang, uint32_t at,
                       const struct hl_state *st)
{
    struct drun *r = dl->nruns ? &dl->runs[dl->nruns - 1] : NULL;
    if (!r || r->lang != lang || r->at != at || r->line0 + r->n != line) {
        XGROW(dl->runs, dl->nruns + 1, dl->capruns);
        r = &dl->runs[dl->nruns++];
        *r = (struct drun){line, 0, at, lang};
    }
    r->n++;
    if (!hl_state_init(st)) {
        XGROW(dl->states, dl->nstates + 1, dl->capstates);
        dl->states[dl->nstates++] = (struct dstate){line, *st};
    }
}

static void dlist_add(struct dlist *dl, const struct wrap_line *in, int width, char *owned,
                      const struct wrap_hl *hl)
{
    XGROW(dl->v, dl->n + 1, dl->cap);
    struct dline *l = &dl->v[dl->n];
    memset(l, 0, sizeof(*l));
    l->slot = in->slot;
    l->hang = in->hang;
    l->flags = in->flags;
    l->tag = in->tag;
    if (in->flags & WRAP_RULE) {
        /* a rule is as wide as the window: its text is the document's, made per width */
        l->slot = in->nspans && in->spans[0].len ? in->spans[0].slot : in->slot;
        l->span0 = (uint32_t)dl->nspans;
    } else {
        l->len = (uint32_t)in->len;
        l->text = owned ? arena_adopt(&dl->text, owned, in->len)
                        : arena_put(&dl->text, in->text, in->len);
        owned = NULL;
        normalise_spans(dl, l, in->spans, in->nspans);
        if (hl && !(in->flags & WRAP_TABLE) && hl->at <= in->len) {
            dlater_add(dl, dl->n, hl->lang, hl->at, &hl->st);
            l->flags |= DL_LATER;
        }
    }
    free(owned); /* a rule's text is the document's */
    dline_wrap(dl, l, width);
    dl->n++;
}

/* Highlight line i of dl now (DL_LATER): its spans before `at` as pushed, then the code's,
 * normalised as wrap_doc_push would have stored them had they come highlighted. */
static void dline_highlight(struct wrap_doc *d, struct dlist *dl, size_t i)
{
    struct dline *l = &dl->v[i];
    /* the first run after line i, then line i's state if it is not the initial one */
    size_t lo = dl_search(dl->runs, dl->nruns, sizeof(*dl->runs), offsetof(struct drun, line0),
                          i + 1);
    l->flags &= (uint16_t)~DL_LATER;
    if (!lo || i - dl->runs[lo - 1].line0 >= dl->runs[lo - 1].n)
        return;
    const struct drun *z = &dl->runs[lo - 1];
    struct hl_state st = HL_STATE_INIT;
    lo = dl_search(dl->states, dl->nstates, sizeof(*dl->states), offsetof(struct dstate, line), i);
    if (lo < dl->nstates && dl->states[lo].line == i)
        st = dl->states[lo].st;
    if (!d->hl || hl_of(d->hl) != z->lang) {
        hl_free(d->hl);
        d->hl = hl_new(z->lang);
    }
    hl_line(d->hl, &st, l->text + z->at, l->len - z->at, &d->hsp);
    d->highlighted++;
    size_t keep = 0; /* the spans before the code, then the code's shifted */
    while (keep < l->nspans && dl->spans[l->span0 + keep].off + dl->spans[l->span0 + keep].len <=
                                   z->at)
        keep++;
    if (keep) { /* none kept: dl->spans may be NULL */
        XGROW(d->hsp.v, d->hsp.n + keep, d->hsp.cap);
        memmove(d->hsp.v + keep, d->hsp.v, d->hsp.n * sizeof(*d->hsp.v));
        memcpy(d->hsp.v, dl->spans + l->span0, keep * sizeof(*d->hsp.v));
    }
    for (size_t k = keep; k < keep + d->hsp.n; k++)
        d->hsp.v[k].off += z->at;
    normalise_spans(dl, l, d->hsp.v, keep + d->hsp.n); /* appended: the old ones stay unused */
}

static void dlist_clear(struct dlist *dl)
{
    dl->n = 0;
    dl->nruns = dl->nstates = 0;
    dl->rows.n = 0;
    dl->total = 0;
    dl->ntabs = 0;
    dl->nspans = 0;
    arena_free(&dl->text);
}

static void dlist_free(struct dlist *dl)
{
    dlist_clear(dl);
    for (size_t i = 0; i < dl->ntabs_made; i++)
        table_out_free(&dl->tabs[i]);
    free(dl->tabs);
    free(dl->v);
    wrap_rows_free(&dl->rows);
    free(dl->spans);
    free(dl->runs);
    free(dl->states);
}

static void dlist_rewrap(struct dlist *dl, int width)
{
    dl->rows.n = 0;
    dl->total = 0;
    dl->ntabs = 0;
    for (size_t i = 0; i < dl->n; i++)
        dline_wrap(dl, &dl->v[i], width);
}

/* Move src's lines to the end of dl: line records, rows, spans and table layouts are appended
 * (their indexes shifted), text blocks change hands; nothing is copied twice or rewrapped. */
static void dlist_splice(struct dlist *dl, struct dlist *src)
{
    size_t rows0 = dl->rows.n, spans0 = dl->nspans, tabs0 = dl->ntabs, total0 = dl->total;
    for (size_t i = dl->ntabs; i < dl->ntabs_made; i++)
        table_out_free(&dl->tabs[i]); /* spare slots: src's come right after the used ones */
    dl->ntabs_made = dl->ntabs;
    if (src->ntabs_made) {
        XGROW(dl->tabs, tabs0 + src->ntabs_made, dl->captabs);
        memcpy(dl->tabs + tabs0, src->tabs, src->ntabs_made * sizeof(*src->tabs));
        dl->ntabs += src->ntabs;
        dl->ntabs_made += src->ntabs_made;
        src->ntabs = src->ntabs_made = 0;
    }
    if (src->rows.n) {
        XGROW(dl->rows.v, rows0 + src->rows.n, dl->rows.cap);
        memcpy(dl->rows.v + rows0, src->rows.v, src->rows.n * sizeof(*src->rows.v));
        dl->rows.n += src->rows.n;
    }
    if (src->nspans) {
        XGROW(dl->spans, spans0 + src->nspans, dl->capspans);
        memcpy(dl->spans + spans0, src->spans, src->nspans * sizeof(*src->spans));
        dl->nspans += src->nspans;
    }
    if (src->nruns) { /* lines still to highlight when drawn: their indexes move too */
        XGROW(dl->runs, dl->nruns + src->nruns, dl->capruns);
        for (size_t i = 0; i < src->nruns; i++) {
            struct drun r = src->runs[i];
            r.line0 += dl->n;
            dl->runs[dl->nruns++] = r;
        }
        XGROW(dl->states, dl->nstates + src->nstates, dl->capstates);
        for (size_t i = 0; i < src->nstates; i++)
            dl->states[dl->nstates++] =
                (struct dstate){src->states[i].line + dl->n, src->states[i].st};
        src->nruns = src->nstates = 0;
    }
    XGROW(dl->v, dl->n + src->n, dl->cap);
    for (size_t i = 0; i < src->n; i++) {
        struct dline l = src->v[i];
        l.row0 += total0;
        l.span0 += (uint32_t)spans0;
        if (l.flags & DL_TABLE)
            l.ri += (uint32_t)tabs0;
        else if (!(l.flags & DL_ONEROW))
            l.ri += (uint32_t)rows0;
        dl->v[dl->n++] = l;
    }
    dl->total += src->total;
    if (src->text.n) { /* src's last block stays the open one */
        XGROW(dl->text.blocks, dl->text.n + src->text.n, dl->text.cap);
        memcpy(dl->text.blocks + dl->text.n, src->text.blocks,
               src->text.n * sizeof(*src->text.blocks));
        dl->text.n += src->text.n;
        dl->text.used = src->text.used;
        dl->text.size = src->text.size;
        free(src->text.blocks);
        memset(&src->text, 0, sizeof(src->text));
    }
    src->n = src->rows.n = src->total = src->nspans = 0;
}

void wrap_doc_splice(struct wrap_doc *d, struct wrap_doc *src)
{
    wrap_doc_set_width(src, d->width);
    dlist_clear(&d->pend);
    dlist_splice(&d->fin, &src->fin);
    struct dlist pend = d->pend; /* src's pending lines become d's (d's list, empty, goes to src) */
    d->pend = src->pend;
    src->pend = pend;
}

struct wrap_doc *wrap_doc_new(int width)
{
    struct wrap_doc *d = xcalloc(1, sizeof(*d));
    d->width = width < 1 ? 1 : width;
    return d;
}

void wrap_doc_free(struct wrap_doc *d)
{
    if (!d)
        return;
    dlist_free(&d->fin);
    dlist_free(&d->pend);
    buf_free(&d->tail);
    buf_free(&d->scratch);
    buf_free(&d->rule);
    free(d->rsp);
    hl_free(d->hl);
    hl_spans_free(&d->hsp);
    free(d);
}

void wrap_doc_set_width(struct wrap_doc *d, int width)
{
    width = width < 1 ? 1 : width;
    if (width == d->width)
        return;
    d->width = width;
    dlist_rewrap(&d->fin, width);
    dlist_rewrap(&d->pend, width);
}

int wrap_doc_width(const struct wrap_doc *d)
{
    return d->width;
}

void wrap_doc_push(struct wrap_doc *d, const struct wrap_line *line)
{
    dlist_add(&d->fin, line, d->width, NULL, NULL);
}

void wrap_doc_push_hl(struct wrap_doc *d, const struct wrap_line *line, const struct wrap_hl *hl)
{
    dlist_add(&d->fin, line, d->width, NULL, hl);
}

void wrap_doc_push_take(struct wrap_doc *d, const struct wrap_line *line, char *text)
{
    dlist_add(&d->fin, line, d->width, text, NULL);
}

void wrap_doc_pending_clear(struct wrap_doc *d)
{
    dlist_clear(&d->pend);
}

void wrap_doc_pending_add(struct wrap_doc *d, const struct wrap_line *line)
{
    dlist_add(&d->pend, line, d->width, NULL, NULL);
}

static void push_clean(struct wrap_doc *d, struct dlist *dl, const char *s, size_t n, int slot,
                       unsigned flags)
{
    if (n && s[n - 1] == '\r')
        n--;
    buf_reset(&d->scratch);
    wrap_clean(&d->scratch, s, n);
    struct wrap_line wl = {buf_str(&d->scratch), d->scratch.len, NULL, 0, (uint16_t)slot, 0,
                           (uint16_t)flags, 0};
    dlist_add(dl, &wl, d->width, NULL, NULL);
}

void wrap_doc_append_text(struct wrap_doc *d, const char *s, size_t n, int slot,
                          unsigned flags)
{
    size_t scan = d->tail.len, start = 0;
    buf_append(&d->tail, s, n);
    const char *t = buf_str(&d->tail);
    for (;;) {
        const char *nl = memchr(t + scan, '\n', d->tail.len - scan);
        if (!nl)
            break;
        size_t end = (size_t)(nl - t);
        push_clean(d, &d->fin, t + start, end - start, slot, flags);
        start = scan = end + 1;
    }
    if (start) {
        memmove(d->tail.data, d->tail.data + start, d->tail.len - start);
        d->tail.len -= start;
        d->tail.data[d->tail.len] = '\0';
    }
    dlist_clear(&d->pend);
    size_t keep = d->tail.len - utf8_incomplete_tail(d->tail.data ? d->tail.data : "",
                                                     d->tail.len);
    if (keep)
        push_clean(d, &d->pend, d->tail.data, keep, slot, flags);
}

size_t wrap_doc_lines(const struct wrap_doc *d)
{
    return d->fin.n;
}

size_t wrap_doc_rows(const struct wrap_doc *d)
{
    return d->fin.total + d->pend.total;
}

int wrap_doc_row(const struct wrap_doc *cd, size_t i, struct wrap_view *v)
{
    struct wrap_doc *d = (struct wrap_doc *)cd; /* the row's span scratch (heap object) */
    const struct dlist *dl = &d->fin;
    size_t line_base = 0;
    if (i >= dl->total) {
        i -= dl->total;
        line_base = dl->n;
        dl = &d->pend;
        if (i >= dl->total)
            return -1;
    }
    /* the last line with row0 <= i (line 0's is 0) */
    size_t lo = dl_search(dl->v, dl->n, sizeof(*dl->v), offsetof(struct dline, row0), i + 1) - 1;
    /* line lo holds row i: a line without rows (a table's in list form) shares its row0
     * with the next line, which is then the last with row0 <= i */
    if (dl->v[lo].flags & DL_LATER)
        dline_highlight(d, (struct dlist *)dl, lo);
    const struct dline *l = &dl->v[lo];
    const struct table_out *tab = l->flags & DL_TABLE ? &dl->tabs[l->ri] : NULL;
    struct wrap_row one;
    const struct wrap_row *row = &one;
    if (tab)
        row = &tab->rows.v[i - l->row0];
    else if (!(l->flags & DL_ONEROW))
        row = &dl->rows.v[l->ri + (i - l->row0)];
    else if (l->flags & WRAP_RULE)
        one = (struct wrap_row){0, l->ri * 3, l->ri, 0};
    else
        one = (struct wrap_row){0, l->len, l->ri, 0};
    size_t a = row->off, b = a + row->len, n = 0;
    if (l->flags & WRAP_RULE) {
        if ((size_t)d->rule.len != b || !d->rule.data) { /* the width the row was made at */
            buf_reset(&d->rule);
            for (size_t k = 0; k < row->width; k++)
                buf_append(&d->rule, "\xE2\x94\x80", 3);
        }
        v->text = d->rule.data;
    } else {
        v->text = (tab ? tab->text.data : l->text) + a;
    }
    /* no span stored yet: dl->spans is NULL, and NULL + 0 is undefined */
    const struct theme_span *sp = tab ? tab->spans : l->nspans ? dl->spans + l->span0 : NULL;
    size_t nsp = tab ? tab->nspans : l->nspans;
    if (row->len && !nsp) {
        XGROW(d->rsp, 1, d->caprsp);
        d->rsp[n++] = (struct theme_span){0, row->len, l->slot, 0};
    } else if (row->len) {
        size_t s0 = 0, s1 = nsp; /* first span that ends after a */
        while (s0 < s1) {
            size_t mid = s0 + (s1 - s0) / 2;
            if ((size_t)sp[mid].off + sp[mid].len <= a)
                s0 = mid + 1;
            else
                s1 = mid;
        }
        for (size_t j = s0; j < nsp && sp[j].off < b; j++) {
            size_t sa = sp[j].off > a ? sp[j].off : a;
            size_t sb = (size_t)sp[j].off + sp[j].len;
            if (sb > b)
                sb = b;
            if (sa < sb) {
                XGROW(d->rsp, n + 1, d->caprsp);
                d->rsp[n++] = (struct theme_span){(uint32_t)(sa - a), (uint32_t)(sb - sa),
                                                  sp[j].slot, sp[j].attrs};
            }
        }
    }
    v->len = row->len;
    v->width = (int)row->width;
    v->indent = (int)row->indent;
    v->spans = n ? d->rsp : NULL;
    v->nspans = n;
    v->line = line_base + lo;
    v->tag = l->tag;
    v->flags = l->flags & (uint16_t)~DL_OWN;
    v->first = i == l->row0;
    return 0;
}

size_t wrap_doc_highlighted(const struct wrap_doc *d)
{
    return d->highlighted;
}
