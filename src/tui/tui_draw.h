/* tui_draw.h - the curses end of styling: theme slots to colour pairs and attributes, and rows
 * of cchar_t built cluster by cluster (htop's RichString idea) and blitted with one call.
 *
 * Every text drawn here has been through utf8_sanitize (directly or via wrap_clean/markdown);
 * as a second line of defence the row builder never emits a C0/C1 control character.
 *
 * Width agreement: a row is only garble-free when curses, the terminal and wrap.h agree on how
 * wide each cluster is. The builder splits a cluster into cells wherever wcwidth() starts a new
 * column (so curses counts what the terminal counts) and, when the sum of wcwidth() differs from
 * wrap.h's width (emoji with VS16 on a narrow base, keycaps, skin tones, ZWJ sequences - the
 * cases terminals disagree on), draws a safe form instead: the first code point, padded with
 * spaces to the wrap.h width. The text itself is unchanged (copy gets the full sequence). */
#ifndef TT_TUI_DRAW_H
#define TT_TUI_DRAW_H
#include <curses.h>
#include <stddef.h>

#include "text/theme.h"

/* Resolve theme t for this terminal (COLORS, NO_COLOR when no_color) into colour pairs and
 * attributes, one per slot. Call after initscr (and again to switch themes). */
void tui_draw_setup(const struct theme *t, int no_color);

/* The curses attributes (colour pair included) of a slot plus THEME_ATTR_* bits. */
attr_t tui_draw_attr(int slot, unsigned extra);
/* The colour pair of a slot. */
short tui_draw_pair(int slot);

/* A row being built: cells for wadd_wchnstr, at most `width` columns. */
struct tui_row {
    cchar_t *cells;
    size_t n, cap;
    int col;   /* columns used so far */
    int width; /* columns available */
    wchar_t overlay; /* a combining character laid over each cell (U+0336: struck), or 0 */
    attr_t last_a;   /* the style of the last cell appended (when n > 0) */
    short last_pair;
    int last_strike;
    unsigned styles; /* style changes between the cells appended so far */
};

/* Start (or restart) a row of `width` columns; keeps the memory of earlier rows. */
void tui_row_begin(struct tui_row *r, int width);

/* Append text s[0..n) (sanitised UTF-8) in a slot plus THEME_ATTR_* bits, cluster by cluster,
 * stopping at the row's width. THEME_ATTR_STRIKE, which curses has no attribute for, lays
 * U+0336 (combining long stroke overlay) over each cell. A wide cluster that does not fit at the end is replaced by
 * spaces; a cluster wider than the whole row is drawn as U+2026. TAB and LF become spaces.
 * Returns the columns appended. */
int tui_row_put(struct tui_row *r, const char *s, size_t n, int slot, unsigned extra);

/* Append text with spans (offsets relative to s; gaps drawn in base_slot). A run of only
 * spaces (a gap or a span) is drawn in the style of the cell before it when it looks the same
 * there (same background; no underline, reverse or strike on either side): fewer attribute
 * changes for curses to write. */
void tui_row_put_spans(struct tui_row *r, const char *s, size_t n,
                       const struct theme_span *spans, size_t nspans, int base_slot);

/* Append raw text (not yet sanitised: model names, server messages): sanitised first. */
int tui_row_put_raw(struct tui_row *r, const char *s, size_t n, int slot, unsigned extra);

/* Append spaces in a slot up to column `to` (clipped to the width). */
void tui_row_fill(struct tui_row *r, int to, int slot);

/* Fill the rest of the row in `slot` and draw it at row y of window w. */
void tui_row_blit(struct tui_row *r, WINDOW *w, int y, int slot);

/* Just before doupdate: each full-width row tui_row_blit drew since the last call is compared
 * with the row drawn there before; where curses would skip a run of equal cells between two
 * changed ones with a cursor move that costs more to choose than writing the run, those cells
 * of curscr are marked unknown, so that curses writes them instead. What the terminal shows
 * is the same (a marked cell is only ever written again). */
void tui_draw_settle(void);

/* Free the row's memory. */
void tui_row_free(struct tui_row *r);

/* Cells appended to rows so far, and how many of them setcchar made (printable ASCII is made
 * once per character and style, then copied): for --trace. */
void tui_draw_counts(unsigned long *put, unsigned long *made);

/* Display width of sanitised text, as tui_row_put draws it. */
int tui_draw_width(const char *s, size_t n);

#endif
