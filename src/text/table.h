/* table.h - Markdown table rows laid out at the width they are drawn at (no curses).
 *
 * markdown.c styles a table's rows once, without knowing the width; wrap.c lays each row out
 * whenever it wraps the document (so a resize re-lays the table). Between the two, a row is one
 * wrap_line with WRAP_TABLE set whose text is an encoded row:
 *
 *     "\x1d" KIND NCOLS (";" ALIGN NAT "," WORD "," MIN)... "\x1d" CELL ("\x1f" CELL)...
 *     ["\x1e" HEAD ("\x1f" HEAD)...]
 *
 * KIND is 'h' (the header row), 's' (the delimiter row), 'f' (the first body row) or 'b' (a
 * later body row); ALIGN is 'l', 'r' or 'c'; NAT, WORD and MIN (decimal) are the column's
 * widest cell, longest word and widest grapheme cluster over the rows markdown measured (the
 * first TABLE_MAX_ROWS), the same in every row of one table so its rows line up whatever the
 * width; the header's cells ride along in body rows for the list form. Cells are display text
 * (wrap_clean'ed, so the separator bytes never occur in them); the line's spans style them.
 *
 * Layout at width W (table_widths): the frame "│ a │ b │" takes 3 * NCOLS + 1 columns; when
 * the natural widths fit they are kept; else every column keeps its longest word and the room
 * left is shared in proportion to what each lacks of its natural width; else every column
 * keeps its widest cluster and the room is shared in proportion to what each lacks of its
 * longest word (words are cut). Text wraps inside its cell (wrap_text, by grapheme width, CJK
 * correct); a shrunk table gets a rule between body rows so wrapped rows stay apart. When even
 * the widest cluster of every column cannot fit, the row is shown as a record instead, one
 * "Header: value" line per column (the header and delimiter rows then take no rows at all). A
 * row that would be more than 256 rows high in its columns (a long text in a narrow column:
 * its borders would cost many times its text) is shown as a record too, inside the table. */
#ifndef TT_TABLE_H
#define TT_TABLE_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "text/theme.h"
#include "text/wrap.h"

#define TABLE_MAX_COLS 64 /* columns beyond this are dropped */

/* What a column needs: its alignment and widths measured over its cells. */
struct table_col {
    char align;    /* 'l', 'r' or 'c' */
    uint32_t nat;  /* widest cell */
    uint32_t word; /* longest word (no break inside it) */
    uint32_t min;  /* widest grapheme cluster */
};

/* Fold the display text s[0..n) of one cell into its column's widths. */
void table_measure(struct table_col *col, const char *s, size_t n);

/* Append the encoded row prefix ("\x1d" KIND NCOLS ... "\x1d") to out. */
void table_meta(struct buf *out, char kind, int ncols, const struct table_col *cols);

/* Column widths at `width` columns into colw[ncols]: 0, or -1 when not even the widest cluster
 * of every column fits (the list form). */
int table_widths(int ncols, const struct table_col *cols, int width, uint32_t *colw);

/* A row laid out: rows of text (offsets into text) styled by spans (covering text). */
struct table_out {
    struct buf text;
    struct theme_span *spans;
    size_t nspans, capspans;
    struct wrap_rows rows;
    size_t cut; /* no span merges across this offset */
};
#define TABLE_OUT_INIT {BUF_INIT, NULL, 0, 0, {NULL, 0, 0}, 0}

/* Lay out the encoded row s[0..n) (spans sp[0..nsp) sorted and covering it, or none: all in
 * `slot`) at `width` columns into out (reset first). Returns 0, or -1 when s is not an encoded
 * row. Every row is at most `width` wide unless width < 2 (a record's line holds at least one
 * cluster). The header and delimiter rows of the list form have no rows. */
int table_layout(const char *s, size_t n, const struct theme_span *sp, size_t nsp, int slot,
                 int width, struct table_out *out);

void table_out_free(struct table_out *out);

#endif
