/* tui_draw.c - theme slots to curses attributes; rows of cchar_t built per grapheme cluster. */
#include "config.h"
#include "tui/tui_draw.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "text/wrap.h"
#include "base/xmalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static attr_t tui_draw_attrs[THEME_SLOT_COUNT];
static short tui_draw_pairs[THEME_SLOT_COUNT];
/* The background of each colour pair handed out (index 0: the terminal's default colours,
 * -1), for the rule of tui_row_put_spans that a run of spaces may keep the style before it. */
static short tui_draw_pair_bg[THEME_SLOT_COUNT + 1] = {-1};
static unsigned long tui_cells_put, tui_cells_made; /* tui_draw_counts */

static attr_t tui_draw_map(unsigned a)
{
    attr_t r = A_NORMAL;
    if (a & THEME_ATTR_BOLD)
        r |= A_BOLD;
    if (a & THEME_ATTR_DIM)
        r |= A_DIM;
    if (a & THEME_ATTR_ITALIC)
        r |= A_ITALIC;
    if (a & THEME_ATTR_UNDERLINE)
        r |= A_UNDERLINE;
    if (a & THEME_ATTR_REVERSE)
        r |= A_REVERSE;
    return r;
}

void tui_draw_setup(const struct theme *t, int no_color)
{
    static int started, default_ok;
    int ncolors = 0;
    if (has_colors() && !no_color) {
        if (!started) {
            start_color();
            default_ok = use_default_colors() == OK;
            started = 1;
        }
        ncolors = COLORS;
    }
    struct theme_style st[THEME_SLOT_COUNT];
    short fgs[THEME_SLOT_COUNT] = {0}, bgs[THEME_SLOT_COUNT] = {0};
    theme_resolve(t, ncolors, no_color || ncolors == 0, st);
    for (int i = 0; i < THEME_SLOT_COUNT; i++) {
        tui_draw_attrs[i] = tui_draw_map(st[i].attrs);
        tui_draw_pairs[i] = 0;
        tui_draw_pair_bg[i + 1] = -1;
        if (ncolors && !no_color && i + 1 < COLOR_PAIRS) {
            short fg = st[i].fg, bg = st[i].bg;
            if (!default_ok) {
                if (fg < 0)
                    fg = COLOR_WHITE;
                if (bg < 0)
                    bg = COLOR_BLACK;
            }
            if (fg >= COLORS)
                fg = -1;
            if (bg >= COLORS)
                bg = -1;
            fgs[i] = fg;
            bgs[i] = bg;
            /* Every slot's pair is set (cells drawn before a theme switch keep theirs), but
             * two slots of the same colours share the first one's: curses writes no colour
             * change between their cells. */
            if (init_pair((short)(i + 1), fg, bg) == OK) {
                tui_draw_pairs[i] = (short)(i + 1);
                tui_draw_pair_bg[i + 1] = bg;
                for (int j = 0; j < i; j++) {
                    if (tui_draw_pairs[j] == j + 1 && fgs[j] == fg && bgs[j] == bg) {
                        tui_draw_pairs[i] = (short)(j + 1);
                        break;
                    }
                }
            }
        }
    }
}

attr_t tui_draw_attr(int slot, unsigned extra)
{
    if (slot < 0 || slot >= THEME_SLOT_COUNT)
        slot = THEME_DEFAULT;
    return tui_draw_attrs[slot] | tui_draw_map(extra);
}

short tui_draw_pair(int slot)
{
    if (slot < 0 || slot >= THEME_SLOT_COUNT)
        slot = THEME_DEFAULT;
    return tui_draw_pairs[slot];
}

void tui_row_begin(struct tui_row *r, int width)
{
    r->n = 0;
    r->col = 0;
    r->width = width < 0 ? 0 : width;
    r->overlay = 0;
    r->styles = 0;
}

/* Append one cell of wc[0..nwc) (a spacing character plus combining ones) w columns wide. */
static void tui_row_cell(struct tui_row *r, const wchar_t *wc, int nwc, attr_t a, short pair,
                         int w)
{
    XGROW(r->cells, r->n + 1, r->cap);
    wchar_t tmp[CCHARW_MAX + 1];
    int k = nwc < CCHARW_MAX ? nwc : CCHARW_MAX;
    memcpy(tmp, wc, (size_t)k * sizeof(wchar_t));
    if (r->overlay && w > 0) { /* the overlay last (replacing a mark when the cell is full) */
        k = k < CCHARW_MAX ? k + 1 : k;
        tmp[k - 1] = r->overlay;
    }
    tmp[k] = L'\0';
    setcchar(&r->cells[r->n], tmp, a, pair, NULL);
    r->n++;
    r->col += w;
    tui_cells_put++;
    tui_cells_made++;
}

/* The cells of printable ASCII in one style (attributes and pair), each made by setcchar the
 * first time it is drawn: most cells of a frame are ASCII in a few styles, and a copy costs a
 * tenth of a setcchar. Up to TUI_ASCII_STYLES styles are kept, the oldest replaced first. */
#define TUI_ASCII_STYLES 8
struct tui_ascii {
    attr_t a;
    short pair;
    int used;
    uint64_t made[2]; /* bit c - 0x20: cell[c - 0x20] is made */
    cchar_t cell[0x7F - 0x20];
};
static struct tui_ascii tui_ascii_cache[TUI_ASCII_STYLES];
static unsigned tui_ascii_next;

static struct tui_ascii *tui_ascii_style(attr_t a, short pair)
{
    for (int i = 0; i < TUI_ASCII_STYLES; i++) {
        struct tui_ascii *e = &tui_ascii_cache[i];
        if (e->used && e->a == a && e->pair == pair)
            return e;
    }
    struct tui_ascii *e = &tui_ascii_cache[tui_ascii_next++ % TUI_ASCII_STYLES];
    e->a = a;
    e->pair = pair;
    e->used = 1;
    e->made[0] = e->made[1] = 0;
    return e;
}

/* Append the cell of printable ASCII c (0x20..0x7E) in style e. */
static void tui_row_ascii(struct tui_row *r, struct tui_ascii *e, unsigned char c)
{
    unsigned k = c - 0x20u;
    if (!(e->made[k >> 6] >> (k & 63) & 1)) {
        wchar_t wc[2] = {(wchar_t)c, L'\0'};
        setcchar(&e->cell[k], wc, e->a, e->pair, NULL);
        e->made[k >> 6] |= (uint64_t)1 << (k & 63);
        tui_cells_made++;
    }
    tui_cells_put++;
    XGROW(r->cells, r->n + 1, r->cap);
    r->cells[r->n++] = e->cell[k];
    r->col++;
}

/* The style of the cells just appended to a row that held n0 cells before them. */
static void tui_row_styled(struct tui_row *r, size_t n0, attr_t a, short pair, int strike)
{
    if (n0 && (a != r->last_a || pair != r->last_pair))
        r->styles++;
    r->last_a = a;
    r->last_pair = pair;
    r->last_strike = strike;
}

static void tui_row_spaces(struct tui_row *r, int k, attr_t a, short pair)
{
    static const wchar_t sp[1] = {L' '};
    if (k <= 0 || r->col >= r->width)
        return;
    struct tui_ascii *e = r->overlay ? NULL : tui_ascii_style(a, pair);
    tui_row_styled(r, r->n, a, pair, r->overlay != 0);
    while (k-- > 0 && r->col < r->width) {
        if (e)
            tui_row_ascii(r, e, ' ');
        else
            tui_row_cell(r, sp, 1, a, pair, 1);
    }
}

static int tui_draw_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

#define TUI_DRAW_MAXCP 32

/* Emit one cluster s[0..k) that wrap.h says is ow columns wide. */
static void tui_row_cluster(struct tui_row *r, const char *s, size_t k, int ow, attr_t a,
                            short pair)
{
    uint32_t cps[TUI_DRAW_MAXCP];
    int widths[TUI_DRAW_MAXCP];
    int ncp = 0, ww = 0, bad = 0;
    for (size_t i = 0; i < k && ncp < TUI_DRAW_MAXCP;) {
        uint32_t cp;
        size_t m = utf8_decode(s + i, k - i, &cp);
        int w = tui_draw_is_control(cp) ? -1 : wcwidth((wchar_t)cp);
        if (w < 0)
            bad = 1;
        else
            ww += w;
        cps[ncp] = cp;
        widths[ncp] = w;
        ncp++;
        i += m;
    }
    if (ncp == 0 || ow <= 0)
        return; /* zero-width format characters take no cell */
    if (!bad && ww == ow && widths[0] > 0) {
        /* curses and wrap.h agree: one cell per spacing character, marks attached */
        wchar_t cell[CCHARW_MAX];
        int nc = 0, cw = 0;
        for (int i = 0; i < ncp; i++) {
            if (widths[i] > 0) {
                if (nc)
                    tui_row_cell(r, cell, nc, a, pair, cw);
                nc = 0;
                cw = widths[i];
            }
            if (nc < CCHARW_MAX)
                cell[nc++] = (wchar_t)cps[i];
        }
        if (nc)
            tui_row_cell(r, cell, nc, a, pair, cw);
        return;
    }
    /* They disagree (terminals do too): draw a form every terminal measures the same way. */
    wchar_t cell[2];
    int cw;
    if (bad) {
        cell[0] = (wchar_t)UTF8_REPLACEMENT;
        tui_row_cell(r, cell, 1, a, pair, 1);
        cw = 1;
    } else if (widths[0] > 0 && widths[0] <= ow) {
        cell[0] = (wchar_t)cps[0];
        tui_row_cell(r, cell, 1, a, pair, widths[0]);
        cw = widths[0];
    } else if (widths[0] == 0) {
        cell[0] = L' '; /* a mark with no base sits on a space */
        cell[1] = (wchar_t)cps[0];
        tui_row_cell(r, cell, 2, a, pair, 1);
        cw = 1;
    } else {
        cell[0] = (wchar_t)UTF8_REPLACEMENT;
        tui_row_cell(r, cell, 1, a, pair, 1);
        cw = 1;
    }
    tui_row_spaces(r, ow - cw, a, pair);
}

/* tui_row_put with the style resolved: attributes a, colour pair, struck or not. */
static int tui_row_put_style(struct tui_row *r, const char *s, size_t n, attr_t a, short pair,
                             int strike)
{
    int start = r->col;
    size_t n0 = r->n;
    r->overlay = strike ? (wchar_t)0x0336 : 0;
    struct tui_ascii *e = r->overlay || !n ? NULL : tui_ascii_style(a, pair);
    size_t pos = 0;
    while (pos < n && r->col < r->width) {
        unsigned char c = (unsigned char)s[pos];
        if (c < 0x80 && (pos + 1 == n || (unsigned char)s[pos + 1] < 0x80)) {
            if (e && c >= 0x20 && c < 0x7F) {
                tui_row_ascii(r, e, c);
                pos++;
                continue;
            }
            wchar_t wc = c >= 0x20 && c < 0x7F ? (wchar_t)c
                       : (c == '\t' || c == '\n') ? L' ' : (wchar_t)UTF8_REPLACEMENT;
            tui_row_cell(r, &wc, 1, a, pair, 1);
            pos++;
            continue;
        }
        int ow;
        size_t k = wrap_cluster(s + pos, n - pos, &ow);
        if (k == 0)
            break;
        if (ow > 0 && r->col + ow > r->width) {
            if (r->col == 0) { /* wider than the whole row: a placeholder, and progress */
                wchar_t el = 0x2026;
                tui_row_cell(r, &el, 1, a, pair, 1);
            }
            tui_row_spaces(r, r->width - r->col, a, pair);
            break;
        }
        tui_row_cluster(r, s + pos, k, ow, a, pair);
        pos += k;
    }
    r->overlay = 0;
    if (r->col > start)
        tui_row_styled(r, n0, a, pair, strike);
    return r->col - start;
}

int tui_row_put(struct tui_row *r, const char *s, size_t n, int slot, unsigned extra)
{
    return tui_row_put_style(r, s, n, tui_draw_attr(slot, extra), tui_draw_pair(slot),
                             (extra & THEME_ATTR_STRIKE) != 0);
}

/* Attributes that show on a space: a run of spaces with one of them keeps its own style. */
#define TUI_DRAW_SPACE_SHOWS (A_UNDERLINE | A_REVERSE)

/* Append s[0..n) in a slot plus extra, except that a run of only spaces takes the style of
 * the cell before it when that looks the same (the same background, nothing that shows on a
 * space on either side): "def name" and "is None" then need no colour change around the
 * space, which is most of what a highlighted row costs to write. */
static void tui_row_put_span(struct tui_row *r, const char *s, size_t n, int slot,
                             unsigned extra)
{
    attr_t a = tui_draw_attr(slot, extra);
    short pair = tui_draw_pair(slot);
    int strike = (extra & THEME_ATTR_STRIKE) != 0;
    if (r->n && !strike && !r->last_strike && !((a | r->last_a) & TUI_DRAW_SPACE_SHOWS) &&
        (a != r->last_a || pair != r->last_pair) &&
        tui_draw_pair_bg[pair] == tui_draw_pair_bg[r->last_pair]) {
        size_t i = 0;
        while (i < n && s[i] == ' ')
            i++;
        if (i == n) {
            a = r->last_a;
            pair = r->last_pair;
        }
    }
    tui_row_put_style(r, s, n, a, pair, strike);
}

void tui_row_put_spans(struct tui_row *r, const char *s, size_t n,
                       const struct theme_span *spans, size_t nspans, int base_slot)
{
    size_t at = 0;
    for (size_t i = 0; i < nspans && r->col < r->width; i++) {
        size_t a = spans[i].off, b = (size_t)spans[i].off + spans[i].len;
        if (b > n)
            b = n;
        if (a < at)
            a = at;
        if (a >= b)
            continue;
        if (a > at)
            tui_row_put_span(r, s + at, a - at, base_slot, 0);
        tui_row_put_span(r, s + a, b - a, spans[i].slot, spans[i].attrs);
        at = b;
    }
    if (at < n)
        tui_row_put_span(r, s + at, n - at, base_slot, 0);
}

int tui_row_put_raw(struct tui_row *r, const char *s, size_t n, int slot, unsigned extra)
{
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, s, n);
    int w = tui_row_put(r, buf_str(&b), b.len, slot, extra);
    buf_free(&b);
    return w;
}

void tui_row_fill(struct tui_row *r, int to, int slot)
{
    if (to > r->width)
        to = r->width;
    tui_row_spaces(r, to - r->col, tui_draw_attr(slot, 0), tui_draw_pair(slot));
}

/* The rows tui_row_blit drew across the whole screen width, by screen row: this frame's
 * (cur) and the last frame's (prev, what the terminal shows unless something else was drawn
 * over it since), for tui_draw_settle. */
static struct {
    int rows, cols;
    cchar_t *cur, *prev;
    unsigned char *drawn, *known; /* cur holds this frame's row; prev holds a row */
    unsigned short *styles;       /* style changes in cur's row (tui_row.styles) */
} tui_settle;

void tui_row_blit(struct tui_row *r, WINDOW *w, int y, int slot)
{
    tui_row_fill(r, r->width, slot);
    if (!r->n)
        return;
    mvwadd_wchnstr(w, y, 0, r->cells, (int)r->n);
    int sy = getbegy(w) + y;
    if (LINES != tui_settle.rows || COLS != tui_settle.cols) {
        size_t n = (size_t)(LINES > 0 ? LINES : 0) * (size_t)(COLS > 0 ? COLS : 0);
        tui_settle.rows = LINES > 0 ? LINES : 0;
        tui_settle.cols = COLS > 0 ? COLS : 0;
        tui_settle.cur = xreallocarray(tui_settle.cur, n + 1, sizeof(cchar_t));
        tui_settle.prev = xreallocarray(tui_settle.prev, n + 1, sizeof(cchar_t));
        tui_settle.drawn = xrealloc(tui_settle.drawn, (size_t)tui_settle.rows + 1);
        tui_settle.known = xrealloc(tui_settle.known, (size_t)tui_settle.rows + 1);
        tui_settle.styles = xreallocarray(tui_settle.styles, (size_t)tui_settle.rows + 1,
                                          sizeof(unsigned short));
        memset(tui_settle.drawn, 0, (size_t)tui_settle.rows + 1);
        memset(tui_settle.known, 0, (size_t)tui_settle.rows + 1);
    }
    if (sy < 0 || sy >= tui_settle.rows)
        return;
    if (getbegx(w) != 0 || r->n != (size_t)tui_settle.cols) {
        tui_settle.drawn[sy] = 0;
        tui_settle.known[sy] = 0; /* part of the row is someone else's */
        return;
    }
    cchar_t *c = tui_settle.cur + (size_t)sy * (size_t)tui_settle.cols;
    memcpy(c, r->cells, r->n * sizeof(*c));
    tui_settle.styles[sy] = r->styles > 0xFFFF ? 0xFFFF : (unsigned short)r->styles;
    tui_settle.drawn[sy] = 1;
}

/* What curses' doupdate costs, in instructions of ncurses 6.4 (callgrind): a cursor move that
 * lands within 8 columns of a margin or 8 cells from where it starts tries every way the
 * terminal has to move (relative_move three or four times, each formatting strings with
 * tiparm); a move elsewhere formats one cursor address; a cell written; a change of colour
 * or attributes (a foreground and a background formatted, and the attributes). */
#define TUI_SETTLE_MOVE_NEAR 16000
#define TUI_SETTLE_MOVE_FAR 3500
#define TUI_SETTLE_CELL 160
#define TUI_SETTLE_STYLE 6500
#define TUI_SETTLE_LOCAL 8 /* lib_mvcur.c's LONG_DIST, plus one */
#define TUI_SETTLE_ROW_STYLES 4 /* rows with more style changes are left to curses */
#define TUI_SETTLE_INLINE 5 /* curses writes a run of this many or fewer equal cells anyway */

/* The same cell (setcchar zeroes what follows the last character): the first character
 * first, where most cells that differ already do. */
static inline int tui_cell_same(const cchar_t *a, const cchar_t *b)
{
    return a->chars[0] == b->chars[0] && a->attr == b->attr && a->ext_color == b->ext_color &&
           a->chars[1] == b->chars[1] &&
           (!a->chars[1] || memcmp(a->chars + 2, b->chars + 2, sizeof(a->chars) -
                                   2 * sizeof(a->chars[0])) == 0);
}

static int tui_cell_style_same(const cchar_t *a, const cchar_t *b)
{
    return a->attr == b->attr && a->ext_color == b->ext_color;
}

/* Row y: where its new cells nw and the ones before, old, agree between two that differ,
 * mark those of curscr as unknown when writing them costs less than curses' move. */
static void tui_settle_row(int y, const cchar_t *nw, const cchar_t *old, int cols)
{
    static cchar_t *poison;
    static int npoison;
    int first = 0, last = cols - 1;
    while (first < cols && tui_cell_same(&nw[first], &old[first]))
        first++;
    if (first == cols)
        return;
    while (last > first && tui_cell_same(&nw[last], &old[last]))
        last--;
    for (int x = first + 1; x < last;) {
        if (!tui_cell_same(&nw[x], &old[x])) {
            x++;
            continue;
        }
        int s = x;
        while (x < last && tui_cell_same(&nw[x], &old[x]))
            x++;
        /* [s, x): cells the terminal shows already, between two it does not. curses skips
         * them with a move; writing them costs the cells and the style changes among them
         * that the move would not make. */
        int len = x - s, styles = 0;
        if (len <= TUI_SETTLE_INLINE)
            continue;
        for (int k = s; k <= x; k++)
            styles += !tui_cell_style_same(&nw[k], &nw[k - 1]);
        styles -= !tui_cell_style_same(&nw[x], &nw[s - 1]);
        int near = x <= TUI_SETTLE_LOCAL || x >= cols - TUI_SETTLE_LOCAL ||
                   len <= TUI_SETTLE_LOCAL;
        long skip = near ? TUI_SETTLE_MOVE_NEAR : TUI_SETTLE_MOVE_FAR;
        if ((long)len * TUI_SETTLE_CELL + (long)styles * TUI_SETTLE_STYLE >= skip)
            continue;
        if (npoison < cols) {
            /* A cell nothing draws (blink, invisible, protected): curses takes it for
             * unknown and writes the cell it stands for. */
            static const wchar_t sp[2] = {L' ', L'\0'};
            poison = xreallocarray(poison, (size_t)cols, sizeof(*poison));
            for (int i = npoison; i < cols; i++)
                setcchar(&poison[i], sp, A_BLINK | A_INVIS | A_PROTECT, 0, NULL);
            npoison = cols;
        }
        mvwadd_wchnstr(curscr, y, s, poison, len);
    }
}

void tui_draw_settle(void)
{
    int cols = tui_settle.cols;
    if (tui_settle.rows != LINES || cols != COLS || cols <= 2 * TUI_SETTLE_LOCAL)
        return;
    for (int y = 0; y < tui_settle.rows; y++) {
        if (!tui_settle.drawn[y])
            continue;
        size_t at = (size_t)y * (size_t)cols;
        /* A row drawn with many style changes is left to curses: a run between two changes
         * there seldom goes without one. */
        if (tui_settle.known[y] && tui_settle.styles[y] <= TUI_SETTLE_ROW_STYLES)
            tui_settle_row(y, tui_settle.cur + at, tui_settle.prev + at, cols);
        memcpy(tui_settle.prev + at, tui_settle.cur + at, (size_t)cols * sizeof(cchar_t));
        tui_settle.known[y] = 1;
        tui_settle.drawn[y] = 0;
    }
}

void tui_draw_counts(unsigned long *put, unsigned long *made)
{
    *put = tui_cells_put;
    *made = tui_cells_made;
}

void tui_row_free(struct tui_row *r)
{
    free(r->cells);
    memset(r, 0, sizeof(*r));
}

int tui_draw_width(const char *s, size_t n)
{
    return (int)wrap_width(s, n);
}
