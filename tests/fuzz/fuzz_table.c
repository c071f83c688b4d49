/* fuzz_table.c - Markdown tables laid out at a width (table.c, through markdown.c and wrap.c).
 *
 * The input is Markdown; when it has no delimiter row, one is made for its first line so that
 * most inputs are tables. Invariants at a width taken from the input and at 1 and 50:
 *   - every table row lays out (table_layout accepts what markdown encodes);
 *   - as a table: the rows of one table are equally wide (borders whole), as wide as
 *     table_widths says (3 * columns + 1 + the column widths), within the width, and start and
 *     end with a border; as records (too narrow, or a row over 256 rows high in its columns):
 *     rows fit unless one cluster is wider than the row (widths
 *     as drawn, span by span: a cell's text is measured alone, so a mark at its start does not
 *     join the padding before it; the whole row's text is not measured);
 *   - spans cover every row and the row text is display text (no control byte);
 *   - the rows are the same whether the input came whole or split at an input-chosen byte, and
 *     after a resize from another width;
 *   - table_layout on the raw bytes (an encoded row made by anyone) stays in bounds. */
#include "config.h"
#include "fuzz.h"
#include "text/markdown.h"
#include "text/table.h"
#include "text/wrap.h"

#include <string.h>

static struct markdown *fuzz_tab_style(const char *s, size_t n, size_t cut)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    if (cut > n)
        cut = n;
    markdown_feed(md, s, cut);
    markdown_pending_count(md);
    markdown_feed(md, s + cut, n - cut);
    markdown_finish(md);
    return md;
}

static void fuzz_tab_dump(const struct wrap_doc *d, struct buf *out)
{
    size_t rows = wrap_doc_rows(d);
    for (size_t r = 0; r < rows; r++) {
        struct wrap_view v;
        FUZZ_CHECK(wrap_doc_row(d, r, &v) == 0);
        buf_printf(out, "%d %d %zu|", v.indent, v.width, v.line);
        buf_append(out, v.text, v.len);
        for (size_t k = 0; k < v.nspans; k++)
            buf_printf(out, "|%u,%u,%u", v.spans[k].off, v.spans[k].len, v.spans[k].slot);
        buf_appendc(out, '\n');
    }
}

/* The encoded row of line i, when it is a table row, parsed back for its columns. */
static int fuzz_tab_cols(const struct markdown_line *ml, struct table_col *cols, char *kind)
{
    const char *s = ml->wl.text;
    if (ml->kind != MARKDOWN_TABLE || ml->wl.len < 2)
        return 0;
    *kind = s[1];
    const char *end = memchr(s + 1, '\x1d', ml->wl.len - 1);
    FUZZ_CHECK(end != NULL);
    int n = 0;
    const char *p = s + 2;
    while (*p >= '0' && *p <= '9')
        n = n * 10 + (*p++ - '0');
    FUZZ_CHECK(n >= 1 && n <= TABLE_MAX_COLS);
    for (int c = 0; c < n; c++) {
        FUZZ_CHECK(*p == ';');
        cols[c].align = p[1];
        cols[c].nat = (uint32_t)strtoul(p + 2, (char **)&p, 10);
        cols[c].word = (uint32_t)strtoul(p + 1, (char **)&p, 10);
        cols[c].min = (uint32_t)strtoul(p + 1, (char **)&p, 10);
    }
    FUZZ_CHECK(p == end);
    return n;
}

static void fuzz_tab_check(const struct markdown *md, int width, struct buf *out)
{
    struct wrap_doc *d = wrap_doc_new(width);
    size_t n = markdown_count(md);
    for (size_t i = 0; i < n; i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    size_t rows = wrap_doc_rows(d);
    for (size_t r = 0; r < rows; r++) {
        struct wrap_view v;
        FUZZ_CHECK(wrap_doc_row(d, r, &v) == 0);
        FUZZ_CHECK(v.line < n);
        const struct markdown_line *ml = markdown_line(md, v.line);
        size_t at = 0;
        for (size_t s = 0; s < v.nspans; s++) {
            FUZZ_CHECK(v.spans[s].off == at);
            at += v.spans[s].len;
        }
        FUZZ_CHECK(at == v.len);
        if (ml->kind != MARKDOWN_TABLE)
            continue;
        FUZZ_CHECK(fuzz_terminal_safe(v.text, v.len));
        struct table_col cols[TABLE_MAX_COLS];
        uint32_t colw[TABLE_MAX_COLS];
        char kind;
        int nc = fuzz_tab_cols(ml, cols, &kind);
        FUZZ_CHECK(nc > 0);
        int bordered = v.len >= 3 && (!memcmp(v.text, "\xE2\x94\x82", 3) ||
                                      !memcmp(v.text, "\xE2\x94\x9C", 3));
        if (table_widths(nc, cols, width, colw) == 0 && bordered) {
            size_t want = 3 * (size_t)nc + 1;
            for (int c = 0; c < nc; c++)
                want += colw[c];
            FUZZ_CHECK(v.indent == 0 && (size_t)v.width == want && want <= (size_t)width);
            FUZZ_CHECK(v.len >= 6);
            FUZZ_CHECK(!memcmp(v.text, "\xE2\x94\x82", 3) || !memcmp(v.text, "\xE2\x94\x9C", 3));
            FUZZ_CHECK(!memcmp(v.text + v.len - 3, "\xE2\x94\x82", 3) ||
                       !memcmp(v.text + v.len - 3, "\xE2\x94\xA4", 3));
        } else { /* a record: the list form, or a row too high for its columns */
            FUZZ_CHECK(kind != 's');
            FUZZ_CHECK(v.indent + v.width <= width || wrap_one_visible(v.text, v.len));
        }
    }
    if (out)
        fuzz_tab_dump(d, out);
    /* a resize from another width lays out the same rows */
    struct buf again = BUF_INIT, fresh = BUF_INIT;
    fuzz_tab_dump(d, &fresh);
    wrap_doc_set_width(d, width * 2 + 7);
    wrap_doc_set_width(d, width);
    fuzz_tab_dump(d, &again);
    FUZZ_CHECK(again.len == fresh.len && memcmp(buf_str(&again), buf_str(&fresh), again.len) == 0);
    buf_free(&again);
    buf_free(&fresh);
    wrap_doc_free(d);
}

FUZZ_ENTRY(table)
{
    if (size < 2)
        return 0;
    int width = 1 + data[0] % 120;
    size_t cut = data[1];
    const char *s = (const char *)data + 2;
    size_t n = size - 2;

    /* make most inputs a table: a delimiter row after the first line when it has none */
    struct buf src = BUF_INIT;
    const char *nl = memchr(s, '\n', n);
    size_t first = nl ? (size_t)(nl - s) : n;
    buf_append(&src, s, first);
    if (!memmem(s, n, "|-", 2) && !memmem(s, n, "-|", 2)) {
        buf_appends(&src, "\n|");
        size_t pipes = 0;
        for (size_t i = 0; i < first; i++)
            pipes += s[i] == '|';
        for (size_t i = 0; i <= pipes && i < 80; i++)
            buf_appends(&src, i % 3 == 1 ? ":-:|" : i % 3 == 2 ? "--:|" : "---|");
    }
    buf_append(&src, s + first, n - first);

    struct markdown *whole = fuzz_tab_style(src.data, src.len, src.len);
    struct markdown *split = fuzz_tab_style(src.data, src.len, cut);
    static const int widths[] = {1, 50};
    for (size_t i = 0; i <= sizeof(widths) / sizeof(widths[0]); i++) {
        int w = i ? widths[i - 1] : width;
        struct buf a = BUF_INIT, b = BUF_INIT;
        fuzz_tab_check(whole, w, &a);
        fuzz_tab_check(split, w, &b);
        FUZZ_CHECK(a.len == b.len && memcmp(buf_str(&a), buf_str(&b), a.len) == 0);
        buf_free(&a);
        buf_free(&b);
    }
    markdown_free(whole);
    markdown_free(split);
    buf_free(&src);

    /* the raw bytes as an encoded row */
    struct table_out o = TABLE_OUT_INIT;
    if (table_layout(s, n, NULL, 0, THEME_ASSISTANT, width, &o) == 0) {
        for (size_t r = 0; r < o.rows.n; r++)
            FUZZ_CHECK((size_t)o.rows.v[r].off + o.rows.v[r].len <= o.text.len);
        size_t at = 0;
        for (size_t k = 0; k < o.nspans; k++) {
            FUZZ_CHECK(o.spans[k].off == at);
            at += o.spans[k].len;
        }
        FUZZ_CHECK(at == o.text.len);
    }
    table_out_free(&o);
    return 0;
}
