/* tui_view.c - the transcript: messages, wrapped rows cached per width, scrollback, search. */
#include "config.h"
#include "tui/tui_view.h"
#include "base/buf.h"
#include "text/markdown.h"
#include "text/theme.h"
#include "tui/tui_draw.h"
#include "base/utf8.h"
#include "text/wrap.h"
#include "text/longrows.h"
#include "base/xmalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define TUI_VIEW_ADD_PIECE (1u << 20) /* tui_view_add styles a long text this much at a time */
#define TUI_VIEW_STYLE_MAX (1u << 20) /* a longer line is never styled (shown as previewed) */
/* A long line growing in batches of a fast sender (16 KiB or more at a time) takes a block of
 * huge pages once it passes 32 KiB (so at its first batch of that size), instead of doubling
 * up to 1 MiB in small pages (256 page faults and a copy of the line) first: buf.c's blocks
 * from XMALLOC_HUGE_MIN on are huge. */
#define TUI_VIEW_FAST_BATCH (16u << 10)
#define TUI_VIEW_FAST_GROW (32u << 10)
#define TUI_VIEW_LAZY_MIN 32768       /* a batch this large has its last screenful styled first */

enum { TUI_PART_REASONING, TUI_PART_BODY, TUI_PART_FOOTER, TUI_PARTS };

/* Text of a streamed part whose styling waits: a large batch's last screenful was styled first,
 * by a new styler, into a new document; the text before it comes here. It lies after doc's lines
 * and before the next gap's doc (or the part's own). */
struct tui_gap {
    struct wrap_doc *doc; /* the lines before the gap (finished) */
    struct markdown *md;  /* the styler as it stood where the gap begins */
    size_t done;          /* md's lines in doc */
    struct buf raw;       /* the gap's source text */
    void *block;          /* raw's bytes are read in this lent block (raw's cap 0: never grown
                             nor freed here), or NULL: raw owns them */
    size_t fed;           /* raw[0..fed) given to md */
};

/* One block of a message: its styler and its wrapped rows. */
struct tui_part {
    struct markdown *md;     /* the styler while text comes (freed when finished) */
    int styled;              /* markdown (rows carry markdown tags), not plain text */
    struct wrap_doc *doc;    /* NULL until text arrives */
    size_t done;             /* markdown lines already pushed into doc */
    size_t bytes;            /* text received */
    int slot;                /* base style */
    int finished;            /* no more text will come */
    int dirty;               /* text arrived since the last sync */
    struct buf line;         /* raw bytes of the unfinished line */
    size_t fed;              /* bytes of line given to the styler */
    /* An unfinished line longer than TUI_VIEW_LONG_LINE: previewed unstyled and wrapped
     * incrementally; its bytes wait in line and reach the styler when its newline comes. */
    int long_mode;
    int lraw;                /* the line is printable ASCII: rows point into line itself */
    void *lblock;            /* with lraw: line's bytes are read in this lent block (its cap
                                0: never grown nor freed here), or NULL: line owns them */
    struct tui_view *lender; /* while text is fed: the view, for its lent block */
    int ldrop;               /* not ASCII and over TUI_VIEW_STYLE_MAX: never styled, so its
                                raw bytes are not kept (line is empty, ltext has it) */
    size_t llen;             /* with ldrop: the line's raw length */
    struct buf carry;        /* an unfinished UTF-8 sequence held back */
    struct buf ltext;        /* cleaned text of the line (when not lraw) */
    size_t lascii;           /* ltext[lascii..] is printable ASCII only */
    struct longrows lrows;   /* its rows */
    struct wrap_rows lscratch;
    int lslot;
    unsigned lflags;
    uint16_t ltag;
    struct tui_gap *gaps;    /* text whose styling waits, oldest first (tui_view_lazy_step) */
    size_t ngaps, capgaps;
};

struct tui_msg {
    enum tui_msg_kind kind;
    char *label;             /* header row text; NULL = no header row */
    char *info;              /* right side of the header row */
    struct tui_part part[TUI_PARTS];
    size_t rows;             /* rows at the current width (set by tui_msg_rows) */
};

struct tui_hit {
    size_t msg;
    int part;
    size_t line;             /* its logical line in the part's document */
    const char *p;           /* inside a finished line's text (stable for the doc's life) */
    size_t len;
};

struct tui_view {
    struct tui_msg *msgs;
    size_t n, cap;
    int pane_w, pane_h;      /* last layout */
    int width;               /* content width the documents are wrapped at */
    int gutter;
    int follow;
    size_t top;              /* first shown row when not following */
    size_t total;            /* rows of the whole transcript at the last draw */
    char *query;
    struct tui_hit *hits;
    size_t nhits, caphits;
    size_t dropped;          /* older hits not kept (more than TUI_VIEW_MAX_HITS) */
    size_t cur;              /* current hit, 1-based; 0 = none */
    int jump;                /* bring the current hit into view at the next draw */
    struct tui_row row;
    struct theme_span *spans;
    size_t spans_cap;
    int plain_code; /* tui_view_set_highlight(v, 0): code blocks in one colour */
    int lazy;       /* tui_view_set_lazy: a large batch's last screenful styled first */
    void *lend;     /* tui_view_answer_lend: text inside lend[0..lend_len) may be held */
    size_t lend_len;
    size_t lent;    /* bytes of streamed text read in a lent block, not copied */
    size_t styled;  /* bytes of streamed text styled (tui_view_styled) */
    size_t taken;   /* bytes of streamed text taken */
};

static void tui_gap_free(struct tui_gap *g)
{
    wrap_doc_free(g->doc);
    markdown_free(g->md);
    if (g->block)
        buf_return(g->block);
    else
        buf_free(&g->raw);
}

/* ---- a long line read in a lent block (tui_view_answer_lend) ---- */

/* The line lets go of the block it reads in (its bytes are not needed any more). */
static void tui_part_line_unlend(struct tui_part *p)
{
    if (!p->lblock)
        return;
    buf_return(p->lblock);
    p->lblock = NULL;
    memset(&p->line, 0, sizeof p->line);
}

/* The line owns its bytes again: copied out of the block it read them in. */
static void tui_part_line_own(struct tui_part *p)
{
    if (!p->lblock)
        return;
    struct buf own = BUF_INIT;
    if (p->line.len + 1 >= XMALLOC_HUGE_MIN)
        (void)buf_try_room(&own, p->line.len + 1);
    buf_append(&own, p->line.data, p->line.len);
    tui_part_line_unlend(p);
    p->line = own;
}

/* 1 when s[0..n) lies in the view's lent block (tui_view_answer_lend). */
static int tui_view_lends(const struct tui_view *v, const char *s, size_t n)
{
    if (!v || !v->lend || !n)
        return 0;
    uintptr_t b = (uintptr_t)v->lend, at = (uintptr_t)s;
    return at >= b && at - b <= v->lend_len && n <= v->lend_len - (at - b);
}

/* s[0..n) follows the printable long line: when both lie in the view's lent block, end to
 * end, the line reads them there (holding the block from the first such text on) instead of
 * copying them. 1 when it does. */
static int tui_part_line_lent(struct tui_part *p, const char *s, size_t n)
{
    struct tui_view *v = p->lender;
    if (!tui_view_lends(v, s, n))
        return 0;
    uintptr_t b = (uintptr_t)v->lend, at = (uintptr_t)s;
    if (p->lblock) {
        if (p->lblock != v->lend || p->line.data + p->line.len != s)
            return 0;
        p->line.len += n;
        v->lent += n;
        return 1;
    }
    /* the line so far must be the bytes just before s in the block */
    if (at - b < p->line.len || memcmp(s - p->line.len, p->line.data, p->line.len) != 0)
        return 0;
    size_t len = p->line.len;
    buf_free(&p->line);
    p->line.data = (char *)(uintptr_t)(at - len);
    p->line.len = len + n;
    p->line.cap = 0;
    p->lblock = v->lend;
    buf_lend(p->lblock);
    v->lent += n;
    return 1;
}

static void tui_part_free(struct tui_part *p)
{
    tui_part_line_unlend(p);
    for (size_t i = 0; i < p->ngaps; i++)
        tui_gap_free(&p->gaps[i]);
    free(p->gaps);
    markdown_free(p->md);
    wrap_doc_free(p->doc);
    buf_free(&p->line);
    buf_free(&p->carry);
    buf_free(&p->ltext);
    longrows_free(&p->lrows);
    wrap_rows_free(&p->lscratch);
    memset(p, 0, sizeof(*p));
}

static void tui_part_doc(struct tui_part *p, int width)
{
    if (!p->doc)
        p->doc = wrap_doc_new(width);
}

static void tui_part_plain(struct tui_part *p, const char *s, size_t n, int slot, int width)
{
    p->slot = slot;
    tui_part_doc(p, width);
    p->bytes += n;
    wrap_doc_append_text(p->doc, s, n, slot, 0);
    p->finished = 1;
}

/* Rewrap the long line's rows from its last two rows on (greedy wrapping never changes rows
 * before the last one when text is appended), or from scratch when full is set.
 * A printable-ASCII line's rows are sparse (longrows.h): a checkpoint every 64 rows and the
 * rows after the last one, ~3 KB for a 1.9 MB line instead of 380 KB of fresh pages.
 * Another line's rows are kept whole; a fast sender's take room for as many rows as its huge
 * block holds text (at 40 columns or more) at once, so that only the rows written are
 * faulted in (doubling, they moved to fresh pages at each step), cut to their size when the
 * line is done (longrows_fit). */
static void tui_part_long_wrap(struct tui_part *p, int width, int full)
{
    size_t from = longrows_rewind(&p->lrows, full);
    const struct buf *src = p->lraw ? &p->line : &p->ltext;
    size_t per_row = width < 40 ? 40 : (size_t)width;
    if (src->cap >= XMALLOC_HUGE_MIN)
        longrows_reserve(&p->lrows, src->cap / per_row); /* none when sparse */
    const char *s = buf_str(src) + from;
    size_t n = src->len - from;
    if (p->lraw || from >= p->lascii) {
        longrows_ascii(&p->lrows, s, n, from, width < 1 ? 1 : (size_t)width,
                       (p->lflags & WRAP_PRE) != 0);
        return;
    }
    p->lscratch.n = 0;
    wrap_text(&p->lscratch, s, n, width, 0, p->lflags);
    for (size_t i = 0; i < p->lscratch.n; i++) {
        struct wrap_row r = p->lscratch.v[i];
        r.off += (uint32_t)from;
        longrows_push(&p->lrows, r);
    }
}

/* Clean s[0..n) of the long line onto ltext: printable ASCII runs are copied, the rest goes
 * through wrap_clean (controls made visible, TABs expanded). An unfinished UTF-8 sequence at
 * the end waits in carry for the next chunk. */
static void tui_part_long_clean(struct tui_part *p, const char *s, size_t n)
{
    if (p->carry.len) { /* complete the held sequence first */
        size_t take = 0;
        while (take < n && p->carry.len < 4) {
            buf_appendc(&p->carry, s[take++]);
            if (utf8_incomplete_tail(p->carry.data, p->carry.len) == 0)
                break;
        }
        if (utf8_incomplete_tail(p->carry.data, p->carry.len) == p->carry.len)
            return; /* still unfinished, and s is used up */
        wrap_clean(&p->ltext, p->carry.data, p->carry.len);
        p->lascii = p->ltext.len;
        buf_reset(&p->carry);
        s += take;
        n -= take;
    }
    size_t hold = utf8_incomplete_tail(s, n);
    size_t end = n - hold;
    size_t i = 0;
    while (i < end) {
        size_t j = i;
        while (j < end && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] < 0x7F)
            j++;
        buf_append(&p->ltext, s + i, j - i);
        if (j == end)
            break;
        size_t k = j;
        while (k < end && !((unsigned char)s[k] >= 0x20 && (unsigned char)s[k] < 0x7F))
            k++;
        wrap_clean(&p->ltext, s + j, k - j);
        p->lascii = p->ltext.len;
        i = k;
    }
    if (hold)
        buf_append(&p->carry, s + end, hold);
}

static int tui_ascii_printable(const char *s, size_t n)
{
    size_t i = 0;
#ifdef __SSE2__
    /* 64 bytes at a time: signed, a byte >= 0x80 is below 0x20 too */
    const __m128i lo = _mm_set1_epi8(0x20), hi = _mm_set1_epi8(0x7E);
    for (; i + 64 <= n; i += 64) {
        __m128i bad = _mm_setzero_si128();
        for (int k = 0; k < 64; k += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i + k));
            bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmplt_epi8(x, lo), _mm_cmpgt_epi8(x, hi)));
        }
        if (_mm_movemask_epi8(bad))
            return 0;
    }
#endif
    /* eight bytes at a time: any byte < 0x20, or > 0x7E (which takes in bytes >= 0x80) */
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (((x - ones * 0x20) & ~x & high) || (((x + ones * (127 - 0x7E)) | x) & high))
            return 0;
    }
    for (; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7F)
            return 0;
    return 1;
}

/* More text of the long line: kept raw; cleaned into ltext once it is not plain ASCII. */
static void tui_part_long_append(struct tui_part *p, const char *s, size_t n)
{
    if (p->ldrop) {
        p->llen += n;
        tui_part_long_clean(p, s, n);
        return;
    }
    if (!(p->lraw && tui_part_line_lent(p, s, n))) {
        tui_part_line_own(p); /* the text goes on elsewhere than in the block */
        if (n >= TUI_VIEW_FAST_BATCH && p->line.cap < XMALLOC_HUGE_MIN &&
            p->line.len + n >= TUI_VIEW_FAST_GROW)
            (void)buf_try_room_for(&p->line, 2 * XMALLOC_HUGE_PAGE, XMALLOC_GRADUAL); /* a fast
                                                       * sender's line: its room now, if it can
                                                       * be had */
        buf_append(&p->line, s, n);
    }
    if (p->lraw && tui_ascii_printable(s, n))
        return;
    if (p->lraw) { /* from now on the rows need a cleaned copy (same offsets so far) */
        tui_part_line_own(p); /* and the raw bytes are appended to */
        p->lraw = 0;
        longrows_clear(&p->lrows, 0); /* kept whole from now on: rewrapped from the start */
        buf_reset(&p->ltext);
        buf_reset(&p->carry);
        p->lascii = 0;
        tui_part_long_clean(p, p->line.data, p->line.len);
    } else {
        tui_part_long_clean(p, s, n);
    }
    if (p->line.len > TUI_VIEW_STYLE_MAX) { /* it will never be styled: ltext is enough */
        p->ldrop = 1;
        p->llen = p->line.len;
        buf_free(&p->line);
    }
}

/* Push a styler's finished lines into a document (wrapped there, once). */
static void tui_lines_push(struct markdown *md, struct wrap_doc *doc, size_t *done)
{
    size_t count = markdown_count(md);
    while (*done < count) { /* a code line is highlighted there when first drawn */
        const struct markdown_line *ml = markdown_line(md, (*done)++);
        wrap_doc_push_hl(doc, &ml->wl, ml->hl);
    }
    markdown_release(md, *done); /* the document has its copy */
}

static void tui_part_push(struct tui_part *p)
{
    tui_lines_push(p->md, p->doc, &p->done);
}

static void tui_part_go_long(struct tui_part *p);

/* The long-line preview is over: its buffers go (not only emptied: they were large). */
static void tui_part_long_free(struct tui_part *p)
{
    tui_part_line_unlend(p); /* read already (the styler has it, or the document a copy) */
    p->long_mode = 0;
    p->ldrop = 0;
    p->llen = 0;
    buf_free(&p->ltext);
    buf_free(&p->carry);
    longrows_free(&p->lrows);
    wrap_rows_free(&p->lscratch);
    p->lascii = 0;
}

/* A long line over TUI_VIEW_STYLE_MAX has ended (its bytes are all in line): it becomes a
 * finished line of the document as previewed (unstyled, cleaned), the styler forgets it. */
static void tui_part_long_done(struct tui_part *p)
{
    if (!p->lraw && p->carry.len) { /* an unfinished UTF-8 sequence before the newline */
        wrap_clean(&p->ltext, p->carry.data, p->carry.len);
        buf_reset(&p->carry);
    }
    markdown_skip_line(p->md);
    tui_part_push(p); /* a table the styler held ends before it */
    tui_part_line_own(p); /* the document takes the line's bytes over */
    struct buf *src = p->lraw ? &p->line : &p->ltext;
    size_t len = src->len;
    char *text = buf_take(src); /* the document takes it over: not held twice */
    struct wrap_line wl = {text, len, NULL, 0, (uint16_t)p->lslot, 0, (uint16_t)p->lflags,
                           p->ltag};
    wrap_doc_pending_clear(p->doc);
    wrap_doc_push_take(p->doc, &wl, text);
    p->done = markdown_count(p->md);
    tui_part_long_free(p);
    buf_free(&p->line);
    p->fed = 0;
}

static void tui_part_md_feed(struct tui_part *p, const char *s, size_t n, int width)
{
    if (!n || p->finished)
        return;
    tui_part_doc(p, width);
    p->bytes += n;
    p->dirty = 1;
    const char *nl = memrchr(s, '\n', n);
    if (p->long_mode) {
        if (!nl) {
            tui_part_long_append(p, s, n);
            return;
        }
        size_t end = (size_t)((const char *)memchr(s, '\n', n) - s);
        if ((p->ldrop ? p->llen : p->line.len) + end > TUI_VIEW_STYLE_MAX) {
            /* too long to style (that takes ~16x its size): it stays as previewed */
            tui_part_long_append(p, s, end);
            tui_part_long_done(p);
            p->bytes -= n - end - 1;
            tui_part_md_feed(p, s + end + 1, n - end - 1, width);
            return;
        }
        /* the long line ends: the styler gets it whole, and the preview is over */
        markdown_feed(p->md, p->line.data + p->fed, p->line.len - p->fed);
        tui_part_long_free(p);
    }
    if (!nl && !p->long_mode && p->line.len + n > TUI_VIEW_LONG_LINE) {
        /* the unfinished line gets long: the styler sees its start (what kind of line it
         * is), the rest waits unstyled for its newline (no styling of a huge pending line
         * by the next frame) */
        size_t take = p->line.len < TUI_VIEW_LONG_LINE ? TUI_VIEW_LONG_LINE - p->line.len : 0;
        markdown_feed(p->md, s, take);
        buf_append(&p->line, s, take);
        p->fed = p->line.len;
        tui_part_go_long(p);
        if (n > take)
            tui_part_long_append(p, s + take, n - take);
        return;
    }
    markdown_feed(p->md, s, n);
    if (nl) {
        if (p->line.cap > TUI_VIEW_LONG_LINE * 4)
            buf_free(&p->line); /* a long line's room is not kept */
        else
            buf_reset(&p->line);
        buf_append(&p->line, nl + 1, (size_t)(s + n - nl - 1));
        tui_part_push(p); /* each line wrapped once, when it is done, not by a frame */
    } else {
        buf_append(&p->line, s, n);
    }
    p->fed = p->line.len;
}

/* tui_part_md_feed for a text of any size, as if it streamed: lines in pieces of about
 * TUI_VIEW_ADD_PIECE, each piece's lines moved into the document before the next (the styler
 * never holds a copy of a long message), and a line longer than TUI_VIEW_LONG_LINE in pieces
 * without its newline, then the newline: it is previewed like a streamed one, and one over
 * TUI_VIEW_STYLE_MAX stays unstyled, so reading a saved answer back costs what streaming it
 * did. */
static void tui_part_md_feed_pieces(struct tui_part *p, const char *text, size_t n, int width)
{
    size_t at = 0;
    while (at < n) {
        size_t end = at;
        while (end < n && end - at < TUI_VIEW_ADD_PIECE) {
            const char *nl = memchr(text + end, '\n', n - end);
            size_t le = nl ? (size_t)(nl - text) + 1 : n;
            if (le - end > TUI_VIEW_LONG_LINE) {
                if (end > at)
                    break; /* what comes before it first */
                size_t body = nl ? le - 1 : n;
                for (size_t k = end; k < body; k += TUI_VIEW_ADD_PIECE)
                    tui_part_md_feed(p, text + k,
                                     body - k < TUI_VIEW_ADD_PIECE ? body - k : TUI_VIEW_ADD_PIECE,
                                     width);
                if (nl)
                    tui_part_md_feed(p, text + body, 1, width);
                at = end = le;
                break;
            }
            end = le;
        }
        if (end > at)
            tui_part_md_feed(p, text + at, end - at, width);
        at = end;
    }
}

static void tui_part_pending(struct tui_part *p)
{
    wrap_doc_pending_clear(p->doc);
    size_t np = markdown_pending_count(p->md);
    for (size_t i = 0; i < np; i++)
        wrap_doc_pending_add(p->doc, &markdown_pending_line(p->md, i)->wl);
}

/* Turn the unfinished line into a long-line preview. */
static void tui_part_go_long(struct tui_part *p)
{
    /* keep the provisional lines before the unfinished one (rows of a growing table) */
    wrap_doc_pending_clear(p->doc);
    size_t np = markdown_pending_count(p->md);
    p->lslot = p->slot;
    p->lflags = 0;
    p->ltag = MARKDOWN_TEXT;
    for (size_t i = 0; i < np; i++) {
        const struct markdown_line *ml = markdown_pending_line(p->md, i);
        if (i + 1 < np) {
            wrap_doc_pending_add(p->doc, &ml->wl);
            continue;
        }
        p->ltag = ml->wl.tag;
        if (ml->kind == MARKDOWN_CODE) {
            p->lslot = THEME_CODE;
            p->lflags = WRAP_PRE;
        } else if (ml->kind == MARKDOWN_TABLE_RAW) {
            p->lflags = WRAP_PRE;
        }
    }
    p->long_mode = 1;
    p->ldrop = 0;
    p->llen = 0;
    buf_reset(&p->ltext);
    buf_reset(&p->carry);
    p->lascii = 0;
    p->lraw = tui_ascii_printable(p->line.data, p->line.len);
    longrows_clear(&p->lrows, p->lraw);
    if (!p->lraw)
        tui_part_long_clean(p, p->line.data, p->line.len);
}

/* Bring a streamed part's rows up to date: push finished lines, redo the unfinished tail. */
static void tui_part_sync(struct tui_part *p, int width)
{
    if (!p->md || !p->dirty)
        return;
    p->dirty = 0;
    tui_part_push(p);
    if (p->finished)
        return;
    if (!p->long_mode && p->line.len > TUI_VIEW_LONG_LINE)
        tui_part_go_long(p);
    if (p->long_mode) {
        tui_part_long_wrap(p, width, 0);
        return;
    }
    tui_part_pending(p);
}

static void tui_part_finish(struct tui_part *p, int width)
{
    if (!p->md || p->finished)
        return;
    tui_part_doc(p, width);
    p->dirty = 1;
    tui_part_sync(p, width);
    p->finished = 1;
    if (p->long_mode) {
        /* ended inside a huge line: keep its unstyled rows (styling it now would cost as
         * much as all the frames did); the styler never sees it */
        if (!p->lraw && p->carry.len) {
            wrap_clean(&p->ltext, p->carry.data, p->carry.len);
            p->lascii = p->ltext.len;
            buf_free(&p->carry);
            tui_part_long_wrap(p, width, 0);
        }
        longrows_fit(&p->lrows);
        markdown_free(p->md);
        p->md = NULL;
        return;
    }
    buf_free(&p->line);
    markdown_finish(p->md);
    tui_lines_push(p->md, p->doc, &p->done);
    wrap_doc_pending_clear(p->doc);
    markdown_free(p->md); /* the document holds copies of its lines */
    p->md = NULL;
}

/* Rows of a part; the text of its gaps has none until it is styled. */
static size_t tui_part_rows(const struct tui_part *p)
{
    size_t n = p->doc ? wrap_doc_rows(p->doc) : 0;
    for (size_t g = 0; g < p->ngaps; g++)
        n += wrap_doc_rows(p->gaps[g].doc);
    if (p->long_mode)
        n += longrows_count(&p->lrows);
    return n;
}

/* Row i of a part; *slot gets the base style for bytes no span covers. */
static int tui_part_row(const struct tui_part *p, size_t i, struct wrap_view *wv, int *slot)
{
    *slot = p->slot;
    for (size_t g = 0; g < p->ngaps; g++) {
        size_t gn = wrap_doc_rows(p->gaps[g].doc);
        if (i < gn)
            return wrap_doc_row(p->gaps[g].doc, i, wv);
        i -= gn;
    }
    size_t dn = p->doc ? wrap_doc_rows(p->doc) : 0;
    if (i < dn)
        return wrap_doc_row(p->doc, i, wv);
    i -= dn;
    const struct buf *src = p->lraw ? &p->line : &p->ltext;
    const struct wrap_row *r =
        p->long_mode ? longrows_row(&p->lrows, src->data, src->len, i) : NULL;
    if (!r)
        return -1;
    memset(wv, 0, sizeof(*wv));
    wv->text = src->data + r->off;
    wv->len = r->len;
    wv->width = (int)r->width;
    wv->indent = (int)r->indent;
    wv->line = SIZE_MAX;
    wv->tag = p->ltag;
    wv->flags = (uint16_t)p->lflags;
    wv->first = i == 0;
    *slot = p->lslot;
    return 0;
}

static void tui_part_set_width(struct tui_part *p, int width)
{
    for (size_t g = 0; g < p->ngaps; g++)
        wrap_doc_set_width(p->gaps[g].doc, width);
    if (p->doc)
        wrap_doc_set_width(p->doc, width);
    if (p->long_mode)
        tui_part_long_wrap(p, width, 1);
}

/* ---- text styled later (a large batch's last screenful first) ---- */

/* The part's text s[0..at) waits in a gap: the styler as it stands and its document go with
 * it, and a new styler and document take s[at..) (markdown_restart said where: the lines come
 * out the same). When block, s[0..at) lies in that lent block: the gap holds it and reads the
 * text there, else it keeps a copy. */
static void tui_part_gap_open(struct tui_part *p, struct markdown *fresh, const char *s,
                              size_t at, int width, void *block)
{
    tui_part_push(p);
    wrap_doc_pending_clear(p->doc); /* the unfinished line is the gap's styler's now */
    XGROW(p->gaps, p->ngaps + 1, p->capgaps);
    struct tui_gap *g = &p->gaps[p->ngaps++];
    memset(g, 0, sizeof(*g));
    g->doc = p->doc;
    g->md = p->md;
    g->done = p->done;
    if (block) {
        g->raw.data = (char *)(uintptr_t)s;
        g->raw.len = at;
        g->block = block;
        buf_lend(block);
    } else {
        buf_append(&g->raw, s, at);
    }
    p->doc = wrap_doc_new(width);
    p->md = fresh;
    p->done = 0;
    tui_part_line_unlend(p);
    buf_reset(&p->line);
    p->fed = 0;
    p->bytes += at;
    p->dirty = 1;
}

/* Style up to budget bytes of the part's oldest gap; a gap styled to its end joins the
 * document after it. Returns the bytes styled. */
static size_t tui_part_gap_step(struct tui_part *p, size_t budget)
{
    struct tui_gap *g = &p->gaps[0];
    size_t k = g->raw.len - g->fed < budget ? g->raw.len - g->fed : budget;
    markdown_feed(g->md, g->raw.data + g->fed, k);
    g->fed += k;
    tui_lines_push(g->md, g->doc, &g->done);
    if (g->fed < g->raw.len)
        return k;
    /* it ended where the next styler began: a line start after a blank line, nothing held */
    struct wrap_doc **next = p->ngaps > 1 ? &p->gaps[1].doc : &p->doc;
    wrap_doc_splice(g->doc, *next);
    wrap_doc_free(*next);
    *next = g->doc;
    g->doc = NULL;
    tui_gap_free(g);
    memmove(p->gaps, p->gaps + 1, (p->ngaps - 1) * sizeof(*p->gaps));
    p->ngaps--;
    return k;
}

/* ---- messages ---- */

static void tui_msg_free(struct tui_msg *m)
{
    for (int i = 0; i < TUI_PARTS; i++)
        tui_part_free(&m->part[i]);
    free(m->label);
    free(m->info);
}

static size_t tui_msg_rows(struct tui_msg *m)
{
    size_t n = (m->label ? 1 : 0) + 1;
    for (int i = 0; i < TUI_PARTS; i++)
        n += tui_part_rows(&m->part[i]);
    m->rows = n;
    return n;
}

struct tui_view *tui_view_new(void)
{
    struct tui_view *v = xcalloc(1, sizeof(*v));
    v->follow = 1;
    v->width = 78;
    v->gutter = 2;
    return v;
}

void tui_view_free(struct tui_view *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        tui_msg_free(&v->msgs[i]);
    free(v->msgs);
    free(v->query);
    free(v->hits);
    free(v->spans);
    tui_row_free(&v->row);
    free(v);
}

static struct tui_msg *tui_view_push(struct tui_view *v, enum tui_msg_kind kind)
{
    XGROW(v->msgs, v->n + 1, v->cap);
    struct tui_msg *m = &v->msgs[v->n++];
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    return m;
}

/* A styler for a new part; code highlighted unless the configuration said no, each line when
 * it is first drawn (its document does it: the lines scrolled past unseen cost a scan). */
static struct markdown *tui_view_md(const struct tui_view *v, int slot)
{
    struct markdown *md = markdown_new(slot);
    markdown_set_highlight(md, !v->plain_code);
    markdown_highlight_when_drawn(md);
    return md;
}

void tui_view_set_highlight(struct tui_view *v, int on)
{
    v->plain_code = !on;
}

size_t tui_view_add(struct tui_view *v, enum tui_msg_kind kind, const char *text, size_t n)
{
    struct tui_msg *m = tui_view_push(v, kind);
    struct tui_part *p = &m->part[TUI_PART_BODY];
    if (kind == TUI_MSG_NOTICE || kind == TUI_MSG_ASSISTANT) {
        p->slot = kind == TUI_MSG_NOTICE ? THEME_SYSTEM : THEME_ASSISTANT;
        p->md = tui_view_md(v, p->slot);
        p->styled = 1;
        tui_part_md_feed_pieces(p, text, n, v->width);
        tui_part_finish(p, v->width);
    } else {
        int slot = kind == TUI_MSG_USER ? THEME_USER
                   : kind == TUI_MSG_META ? THEME_META
                                          : THEME_ERROR;
        tui_part_plain(p, text, n, slot, v->width);
    }
    return v->n - 1;
}

size_t tui_view_answer_begin(struct tui_view *v, const char *label, const char *info)
{
    struct tui_msg *m = tui_view_push(v, TUI_MSG_ASSISTANT);
    m->label = xstrdup(label ? label : "assistant");
    m->info = info ? xstrdup(info) : NULL;
    m->part[TUI_PART_REASONING].slot = THEME_REASONING;
    m->part[TUI_PART_REASONING].md = tui_view_md(v, THEME_REASONING);
    m->part[TUI_PART_REASONING].styled = 1;
    m->part[TUI_PART_BODY].slot = THEME_ASSISTANT;
    m->part[TUI_PART_BODY].md = tui_view_md(v, THEME_ASSISTANT);
    m->part[TUI_PART_BODY].styled = 1;
    return v->n - 1;
}

void tui_view_answer_label(struct tui_view *v, size_t idx, const char *label)
{
    if (idx >= v->n || !label)
        return;
    free(v->msgs[idx].label);
    v->msgs[idx].label = xstrdup(label);
}

/* The part that streamed text goes to (the reasoning is over once the answer begins). */
static struct tui_part *tui_view_answer_part(struct tui_view *v, size_t idx, int reasoning)
{
    struct tui_msg *m = &v->msgs[idx];
    if (!reasoning && m->part[TUI_PART_REASONING].bytes)
        tui_part_finish(&m->part[TUI_PART_REASONING], v->width); /* the answer has begun */
    return &m->part[reasoning ? TUI_PART_REASONING : TUI_PART_BODY];
}

void tui_view_answer_text(struct tui_view *v, size_t idx, int reasoning, const char *s,
                          size_t n)
{
    if (idx >= v->n)
        return;
    struct tui_part *p = tui_view_answer_part(v, idx, reasoning);
    v->taken += n;
    v->styled += n;
    p->lender = reasoning ? NULL : v;
    tui_part_md_feed_pieces(p, s, n, v->width);
    p->lender = NULL;
}

void tui_view_answer_lend(struct tui_view *v, void *block, size_t len)
{
    v->lend = block;
    v->lend_len = block ? len : 0;
}

size_t tui_view_lent(const struct tui_view *v)
{
    return v->lent;
}

size_t tui_view_answer_defer(struct tui_view *v, size_t idx, int reasoning, const char *s,
                             size_t n)
{
    if (idx >= v->n || !v->lazy || !v->follow || v->query || n < TUI_VIEW_LAZY_MIN)
        return 0;
    struct tui_part *p = tui_view_answer_part(v, idx, reasoning);
    if (!p->md || p->finished || p->long_mode || p->fed != p->line.len)
        return 0;
    size_t rows = v->pane_h > 0 ? (size_t)v->pane_h : 40;
    size_t at = markdown_restart(p->md, s, n, rows + 2, TUI_VIEW_LONG_LINE);
    if (!at)
        return 0;
    tui_part_doc(p, v->width);
    /* the text set aside lies in the session's copy (a fast answer's, which does not move):
     * read there when its turn comes, not copied into fresh pages (~65 page faults of the UI
     * thread for 540 KB of Markdown, bench/tui/run.py --text markdown) */
    void *block = !reasoning && tui_view_lends(v, s, at) ? v->lend : NULL;
    if (block)
        v->lent += at;
    tui_part_gap_open(p, tui_view_md(v, p->slot), s, at, v->width, block);
    v->taken += at;
    return at;
}

void tui_view_set_lazy(struct tui_view *v, int on)
{
    v->lazy = on;
}

size_t tui_view_lazy_step(struct tui_view *v, size_t bytes)
{
    for (size_t i = 0; i < v->n; i++)
        for (int j = 0; j < TUI_PARTS; j++)
            if (v->msgs[i].part[j].ngaps) {
                size_t k = tui_part_gap_step(&v->msgs[i].part[j], bytes);
                v->styled += k;
                return k;
            }
    return 0;
}

size_t tui_view_styled(const struct tui_view *v, size_t *taken)
{
    *taken = v->taken;
    return v->styled;
}

/* Style every gap now (a scroll, a search or the pane reaches above the text styled first). */
static void tui_view_fill(struct tui_view *v)
{
    while (tui_view_lazy_step(v, SIZE_MAX) > 0)
        ;
}

void tui_view_answer_end(struct tui_view *v, size_t idx, const char *footer, int footer_slot)
{
    if (idx >= v->n)
        return;
    struct tui_msg *m = &v->msgs[idx];
    tui_part_finish(&m->part[TUI_PART_REASONING], v->width);
    tui_part_finish(&m->part[TUI_PART_BODY], v->width);
    if (footer && *footer)
        tui_part_plain(&m->part[TUI_PART_FOOTER], footer, strlen(footer), footer_slot, v->width);
}

size_t tui_view_count(const struct tui_view *v)
{
    return v->n;
}

enum tui_msg_kind tui_view_kind(const struct tui_view *v, size_t idx)
{
    return idx < v->n ? v->msgs[idx].kind : TUI_MSG_NOTICE;
}

void tui_view_truncate(struct tui_view *v, size_t idx)
{
    tui_view_search_end(v);
    while (v->n > idx)
        tui_msg_free(&v->msgs[--v->n]);
}

/* ---- layout ---- */

static void tui_view_layout(struct tui_view *v, int width, int height)
{
    int gutter = width >= 8 ? 2 : 0;
    int cw = width - gutter < 1 ? 1 : width - gutter;
    v->pane_w = width;
    v->pane_h = height;
    v->gutter = gutter;
    if (cw == v->width)
        return;
    /* keep the message at the top of the pane in view when not following */
    size_t anchor = 0, acc = 0;
    if (!v->follow)
        for (; anchor < v->n && acc + v->msgs[anchor].rows <= v->top; anchor++)
            acc += v->msgs[anchor].rows;
    v->width = cw;
    for (size_t i = 0; i < v->n; i++)
        for (int j = 0; j < TUI_PARTS; j++)
            tui_part_set_width(&v->msgs[i].part[j], cw);
    if (!v->follow) {
        size_t top = 0;
        for (size_t i = 0; i < anchor && i < v->n; i++)
            top += tui_msg_rows(&v->msgs[i]);
        v->top = top;
    }
    v->jump = v->cur != 0;
    if (v->query) { /* a table's rows are laid out anew at a width: its hits with them */
        size_t cur = v->cur;
        char *q = xstrdup(v->query);
        tui_view_search(v, q);
        free(q);
        if (cur && cur <= v->nhits)
            v->cur = cur;
    }
}

/* Global row of the hit h (its message's first row + the row holding h->p). */
static size_t tui_view_hit_row(struct tui_view *v, const struct tui_hit *h)
{
    size_t row = 0;
    for (size_t i = 0; i < h->msg && i < v->n; i++)
        row += v->msgs[i].rows;
    if (h->msg >= v->n)
        return row;
    struct tui_msg *m = &v->msgs[h->msg];
    row += m->label ? 1 : 0;
    for (int j = 0; j < h->part; j++)
        row += tui_part_rows(&m->part[j]);
    const struct tui_part *p = &m->part[h->part];
    size_t n = p->doc ? wrap_doc_rows(p->doc) : 0, best = 0;
    uintptr_t hp = (uintptr_t)h->p;
    for (size_t i = 0; i < n; i++) {
        struct wrap_view wv;
        if (wrap_doc_row(p->doc, i, &wv) < 0)
            break;
        if (wv.line < h->line)
            continue;
        if (wv.line > h->line)
            break;
        if ((uintptr_t)wv.text <= hp)
            best = i;
    }
    return row + best;
}

/* Spans of one row with the search hits in it laid over them (into v->spans). */
static size_t tui_view_overlay(struct tui_view *v, size_t msg, int part, const struct wrap_view *wv,
                               int base_slot)
{
    struct theme_span one = {0, (uint32_t)wv->len, (uint16_t)base_slot, 0};
    const struct theme_span *sp = wv->nspans ? wv->spans : &one;
    size_t nsp = wv->nspans ? wv->nspans : 1;
    size_t need = nsp * 3 + 8, n = 0;
    uintptr_t ra = (uintptr_t)wv->text, rb = ra + wv->len;
    /* collect the hits in this row */
    size_t o_a[16], o_b[16];
    int o_s[16], no = 0;
    for (size_t i = 0; i < v->nhits && no < 16; i++) {
        const struct tui_hit *h = &v->hits[i];
        if (h->msg != msg || h->part != part || h->line != wv->line)
            continue;
        uintptr_t ha = (uintptr_t)h->p, hb = ha + h->len;
        if (hb <= ra || ha >= rb)
            continue;
        o_a[no] = ha > ra ? (size_t)(ha - ra) : 0;
        o_b[no] = hb < rb ? (size_t)(hb - ra) : wv->len;
        o_s[no] = i + 1 == v->cur ? THEME_SELECTION : THEME_SEARCH_HIT;
        no++;
    }
    XGROW(v->spans, need + (size_t)no * 2, v->spans_cap);
    if (!no) {
        memcpy(v->spans, sp, nsp * sizeof(*sp));
        return nsp;
    }
    /* split every span at the hit boundaries */
    for (size_t i = 0; i < nsp; i++) {
        size_t a = sp[i].off, b = (size_t)sp[i].off + sp[i].len;
        while (a < b) {
            int in = -1;
            size_t next = b;
            for (int k = 0; k < no; k++) {
                if (a >= o_a[k] && a < o_b[k]) {
                    in = k;
                    if (o_b[k] < next)
                        next = o_b[k];
                } else if (o_a[k] > a && o_a[k] < next) {
                    next = o_a[k];
                }
            }
            XGROW(v->spans, n + 1, v->spans_cap);
            v->spans[n].off = (uint32_t)a;
            v->spans[n].len = (uint32_t)(next - a);
            v->spans[n].slot = in >= 0 ? (uint16_t)o_s[in] : sp[i].slot;
            v->spans[n].attrs = in >= 0 ? 0 : sp[i].attrs;
            n++;
            a = next;
        }
    }
    return n;
}

static void tui_view_draw_row(struct tui_view *v, WINDOW *w, int y, size_t mi, size_t r)
{
    struct tui_msg *m = &v->msgs[mi];
    struct tui_row *row = &v->row;
    tui_row_begin(row, v->pane_w);
    if (m->label && r == 0) {
        if (v->gutter)
            tui_row_put(row, "\xE2\x97\x86 ", 4, THEME_META, THEME_ATTR_BOLD);
        tui_row_put_raw(row, m->label, strlen(m->label), THEME_META, THEME_ATTR_BOLD);
        if (m->info) {
            int iw = tui_draw_width(m->info, strlen(m->info));
            if (row->col + 1 + iw <= v->pane_w) {
                tui_row_fill(row, v->pane_w - iw, THEME_DEFAULT);
                tui_row_put_raw(row, m->info, strlen(m->info), THEME_META, 0);
            }
        }
        tui_row_blit(row, w, y, THEME_DEFAULT);
        return;
    }
    r -= m->label ? 1 : 0;
    int part = 0;
    for (; part < TUI_PARTS; part++) {
        size_t pr = tui_part_rows(&m->part[part]);
        if (r < pr)
            break;
        r -= pr;
    }
    if (part == TUI_PARTS) { /* the blank row after the message */
        tui_row_blit(row, w, y, THEME_DEFAULT);
        return;
    }
    const struct tui_part *p = &m->part[part];
    struct wrap_view wv;
    int slot;
    if (tui_part_row(p, r, &wv, &slot) < 0) {
        tui_row_blit(row, w, y, THEME_DEFAULT);
        return;
    }
    if (v->gutter) {
        if (m->kind == TUI_MSG_USER)
            tui_row_put(row, "\xE2\x96\x8C ", 4, THEME_USER, 0);
        else if (m->kind == TUI_MSG_ERROR)
            tui_row_put(row, "! ", 2, THEME_ERROR, THEME_ATTR_BOLD);
        else if (part == TUI_PART_REASONING) /* the model thinking aloud */
            tui_row_put(row, "\xE2\x94\x8A ", 4, THEME_REASONING, 0);
        else
            tui_row_fill(row, v->gutter, THEME_DEFAULT);
    }
    int kind = p->styled ? (wv.tag & 0xFF) : MARKDOWN_TEXT;
    int level = wv.tag >> 8;
    int code = kind == MARKDOWN_CODE || kind == MARKDOWN_CODE_LABEL;
    int left = row->col;
    if (kind == MARKDOWN_QUOTE && !wv.first && wv.indent >= 2 * level) {
        for (int d = 0; d < level; d++)
            tui_row_put(row, "\xE2\x94\x82 ", 4, THEME_QUOTE, 0);
    }
    tui_row_fill(row, left + wv.indent, slot);
    size_t nsp = tui_view_overlay(v, mi, part, &wv, slot);
    tui_row_put_spans(row, wv.text, wv.len, v->spans, nsp, slot);
    tui_row_blit(row, w, y, code ? THEME_CODE : THEME_DEFAULT);
}

/* Bring every message's rows up to date and sum them into v->total. */
static size_t tui_view_sync(struct tui_view *v)
{
    size_t total = 0;
    for (size_t i = 0; i < v->n; i++) {
        struct tui_msg *m = &v->msgs[i];
        for (int j = 0; j < TUI_PARTS; j++)
            tui_part_sync(&m->part[j], v->width);
        total += tui_msg_rows(m);
    }
    v->total = total;
    return total;
}

/* Draw rows top.. of the transcript into rows y0..y0+height-1 of w (blank past the end). */
static void tui_view_paint(struct tui_view *v, WINDOW *w, int y0, int width, int height,
                           size_t top)
{
    size_t mi = 0, acc = 0;
    while (mi < v->n && acc + v->msgs[mi].rows <= top)
        acc += v->msgs[mi++].rows;
    size_t r = top - acc;
    for (int y = y0; y < y0 + height; y++) {
        if (mi < v->n) {
            tui_view_draw_row(v, w, y, mi, r);
            if (++r >= v->msgs[mi].rows) {
                mi++;
                r = 0;
            }
        } else {
            tui_row_begin(&v->row, width);
            tui_row_blit(&v->row, w, y, THEME_DEFAULT);
        }
    }
}

/* Rows of the transcript below the last text whose styling waits (SIZE_MAX: none waits). */
static size_t tui_view_below_gaps(const struct tui_view *v)
{
    size_t below = 0;
    for (size_t i = v->n; i-- > 0;) {
        const struct tui_msg *m = &v->msgs[i];
        below++; /* the blank row after it */
        for (int j = TUI_PARTS; j-- > 0;) {
            const struct tui_part *p = &m->part[j];
            if (p->ngaps)
                return below + (p->doc ? wrap_doc_rows(p->doc) : 0) +
                       (p->long_mode ? longrows_count(&p->lrows) : 0);
            below += tui_part_rows(p);
        }
        below += m->label ? 1 : 0;
    }
    return SIZE_MAX;
}

size_t tui_view_rows(struct tui_view *v, int width)
{
    tui_view_fill(v);
    tui_view_layout(v, width, v->pane_h);
    return tui_view_sync(v);
}

void tui_view_draw_rows(struct tui_view *v, WINDOW *w, int y0, int width, int height,
                        size_t top)
{
    tui_view_fill(v);
    tui_view_layout(v, width, v->pane_h);
    tui_view_sync(v);
    tui_view_paint(v, w, y0, width, height, top);
}

void tui_view_draw(struct tui_view *v, WINDOW *w, int width, int height)
{
    tui_view_layout(v, width, height);
    size_t total = tui_view_sync(v);
    size_t h = height > 0 ? (size_t)height : 0;
    if ((!v->follow || v->jump) && tui_view_below_gaps(v) != SIZE_MAX) {
        tui_view_fill(v); /* rows above the bottom are asked for: all of them styled */
        total = tui_view_sync(v);
    } else if (tui_view_below_gaps(v) < h) {
        tui_view_fill(v); /* the pane reaches above what was styled first */
        total = tui_view_sync(v);
    }
    size_t max_top = total > h ? total - h : 0;
    if (v->jump && v->cur) {
        size_t r = tui_view_hit_row(v, &v->hits[v->cur - 1]);
        size_t eff = v->follow ? max_top : v->top;
        if (r < eff || r >= eff + h) {
            v->top = r > h / 2 ? r - h / 2 : 0;
            v->follow = 0;
        }
    }
    v->jump = 0;
    if (v->follow || v->top >= max_top) {
        v->top = max_top;
        v->follow = 1;
    }
    tui_view_paint(v, w, 0, width, height, v->top);
}

/* ---- scrolling ---- */

/* Before the view leaves the bottom: every gap styled, the rows counted again. */
static void tui_view_unlazy(struct tui_view *v)
{
    if (tui_view_below_gaps(v) == SIZE_MAX)
        return;
    tui_view_fill(v);
    tui_view_sync(v);
}

void tui_view_scroll(struct tui_view *v, long rows)
{
    tui_view_unlazy(v);
    size_t h = v->pane_h > 0 ? (size_t)v->pane_h : 0;
    size_t max_top = v->total > h ? v->total - h : 0;
    size_t top = v->follow ? max_top : v->top;
    if (rows < 0) {
        size_t d = (size_t)-rows;
        top = top > d ? top - d : 0;
    } else {
        top += (size_t)rows;
    }
    v->follow = top >= max_top;
    v->top = v->follow ? max_top : top;
}

void tui_view_page(struct tui_view *v, int pages)
{
    long page = v->pane_h > 2 ? v->pane_h - 2 : 1;
    tui_view_scroll(v, page * pages);
}

void tui_view_home(struct tui_view *v)
{
    tui_view_unlazy(v);
    size_t h = v->pane_h > 0 ? (size_t)v->pane_h : 0;
    v->top = 0;
    v->follow = v->total <= h;
}

void tui_view_end(struct tui_view *v)
{
    v->follow = 1;
}

int tui_view_following(const struct tui_view *v)
{
    return v->follow;
}

/* ---- search ---- */

static int tui_view_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static void tui_view_hit_add(struct tui_view *v, size_t msg, int part, size_t line,
                             const char *p, size_t len)
{
    if (v->nhits == 2 * TUI_VIEW_MAX_HITS) { /* keep the newest: memory stays bounded */
        memmove(v->hits, v->hits + TUI_VIEW_MAX_HITS, TUI_VIEW_MAX_HITS * sizeof(*v->hits));
        v->nhits = TUI_VIEW_MAX_HITS;
        v->dropped += TUI_VIEW_MAX_HITS;
    }
    XGROW(v->hits, v->nhits + 1, v->caphits);
    v->hits[v->nhits++] = (struct tui_hit){msg, part, line, p, len};
}

static void tui_view_search_line(struct tui_view *v, size_t msg, int part, size_t line,
                                 const char *s, size_t n, const char *q, size_t qn)
{
    for (size_t i = 0; i + qn <= n; i++) {
        size_t k = 0;
        while (k < qn && tui_view_lower((unsigned char)s[i + k]) ==
                             tui_view_lower((unsigned char)q[k]))
            k++;
        if (k == qn) {
            tui_view_hit_add(v, msg, part, line, s + i, qn);
            i += qn - 1;
        }
    }
}

size_t tui_view_search(struct tui_view *v, const char *q)
{
    tui_view_search_end(v);
    size_t qn = q ? strlen(q) : 0;
    if (!qn)
        return 0;
    tui_view_unlazy(v);
    v->query = xstrdup(q);
    for (size_t mi = 0; mi < v->n; mi++) {
        for (int pj = 0; pj < TUI_PARTS; pj++) {
            const struct tui_part *p = &v->msgs[mi].part[pj];
            if (!p->doc)
                continue;
            size_t rows = wrap_doc_rows(p->doc), fin = wrap_doc_lines(p->doc);
            const char *start = NULL, *end = NULL;
            size_t line = SIZE_MAX;
            int ok = 0;
            for (size_t r = 0; r <= rows; r++) {
                struct wrap_view wv;
                int have = r < rows && wrap_doc_row(p->doc, r, &wv) == 0;
                if (!have || wv.line != line) {
                    if (start && ok)
                        tui_view_search_line(v, mi, pj, line, start, (size_t)(end - start), q,
                                             qn);
                    if (!have)
                        break;
                    line = wv.line;
                    start = wv.text;
                    ok = (p->finished || wv.line < fin) && !(wv.flags & WRAP_RULE);
                }
                end = wv.text + wv.len;
            }
        }
    }
    if (v->nhits > TUI_VIEW_MAX_HITS) {
        size_t drop = v->nhits - TUI_VIEW_MAX_HITS;
        memmove(v->hits, v->hits + drop, TUI_VIEW_MAX_HITS * sizeof(*v->hits));
        v->nhits = TUI_VIEW_MAX_HITS;
        v->dropped += drop;
    }
    v->cur = v->nhits;
    v->jump = v->nhits > 0;
    return v->nhits;
}

size_t tui_view_search_step(struct tui_view *v, int dir)
{
    if (!v->nhits)
        return 0;
    if (dir < 0)
        v->cur = v->cur > 1 ? v->cur - 1 : v->nhits;
    else
        v->cur = v->cur < v->nhits ? v->cur + 1 : 1;
    v->jump = 1;
    return v->cur;
}

size_t tui_view_search_dropped(const struct tui_view *v)
{
    return v->dropped;
}

size_t tui_view_search_pos(const struct tui_view *v, size_t *total)
{
    if (total)
        *total = v->nhits;
    return v->cur;
}

void tui_view_search_end(struct tui_view *v)
{
    free(v->query);
    v->query = NULL;
    v->nhits = 0;
    v->dropped = 0;
    v->cur = 0;
    v->jump = 0;
}
