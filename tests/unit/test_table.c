/* test_table.c - Markdown tables laid out at the width they are drawn at (table.c through
 * markdown.c and wrap_doc): widths, wrapped cells, CJK, the list form, chunking, resizing. */
#include "config.h"
#include "tap.h"
#include "base/buf.h"
#include "base/util.h"
#include "text/markdown.h"
#include "text/table.h"
#include "text/wrap.h"

#define V "\xE2\x94\x82" /* │ */
#define H "\xE2\x94\x80" /* ─ */
#define L "\xE2\x94\x9C" /* ├ */
#define X "\xE2\x94\xBC" /* ┼ */
#define R "\xE2\x94\xA4" /* ┤ */

/* The table: 61 columns wide at its natural width. */
static const char t61[] =
    "| Term | Meaning | Example |\n|---|---|---|\n"
    "| latency | time until the first byte | 120 ms |\n"
    "| throughput | tokens per second, sustained rate | 85 tok/s |\n";

static struct markdown *styled(const char *src, size_t n, size_t chunk)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    for (size_t at = 0; at < n; at += chunk) {
        markdown_feed(md, src + at, n - at < chunk ? n - at : chunk);
        markdown_pending_count(md);
    }
    markdown_finish(md);
    return md;
}

/* Every row of the document: indent, text, "\n". */
static char *doc_rows(const struct wrap_doc *d)
{
    struct buf b = BUF_INIT;
    for (size_t r = 0; r < wrap_doc_rows(d); r++) {
        struct wrap_view v;
        if (wrap_doc_row(d, r, &v) < 0)
            break;
        buf_printf(&b, "%*s%.*s\n", v.indent, "", (int)v.len, v.text);
    }
    return buf_take(&b);
}

/* src styled (fed in pieces of `chunk` bytes) and laid out at width. */
static char *lay_chunked(const char *src, int width, size_t chunk)
{
    struct markdown *md = styled(src, strlen(src), chunk);
    struct wrap_doc *d = wrap_doc_new(width);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    char *s = doc_rows(d);
    wrap_doc_free(d);
    markdown_free(md);
    return s;
}

static char *lay(const char *src, int width)
{
    return lay_chunked(src, width, strlen(src) + 1);
}

static void check_lay(const char *src, int width, const char *want, const char *name)
{
    char *got = lay(src, width);
    TAP_STR(got, want, name);
    free(got);
}

/* Every row of a table fits the width and is whole: all rows equally wide, each starting with
 * a left border and ending with a right one. Returns the table's width or -1. */
static int rows_whole(const char *src, int width)
{
    struct markdown *md = styled(src, strlen(src), strlen(src) + 1);
    struct wrap_doc *d = wrap_doc_new(width);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    int tw = -1, ok = 1;
    for (size_t r = 0; r < wrap_doc_rows(d) && ok; r++) {
        struct wrap_view v;
        wrap_doc_row(d, r, &v);
        if ((v.tag & 0xFF) != MARKDOWN_TABLE)
            continue;
        int w = (int)wrap_width(v.text, v.len);
        if (tw < 0)
            tw = w;
        ok = w == tw && w == v.width && w <= width && v.indent == 0 && v.len >= 6 &&
             (!memcmp(v.text, V, 3) || !memcmp(v.text, L, 3)) &&
             (!memcmp(v.text + v.len - 3, V, 3) || !memcmp(v.text + v.len - 3, R, 3));
        if (!ok)
            printf("# row %zu at %d: %.*s (%d wide)\n", r, width, (int)v.len, v.text, w);
    }
    wrap_doc_free(d);
    markdown_free(md);
    return ok ? tw : -1;
}

static void test_natural(void)
{
    check_lay("| a | b |\n|:--|--:|\n| 1 | 22 |\n| 333 | `4` |\nafter", 80,
              V " a   " V "  b " V "\n" L H H H H H X H H H H R "\n" V " 1   " V " 22 " V "\n" V
              " 333 " V "  4 " V "\nafter\n",
              "natural widths kept when they fit (left / right alignment)");
    check_lay("a | b\n--- | :-:\nx | \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96", 80,
              V " a " V "   b    " V "\n" L H H H X H H H H H H H H R "\n" V " x " V
              " \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96 " V "\n",
              "no outer pipes, centred, CJK measured 2 columns a character");
    check_lay("| a |\n|---|\n| 1 | extra |\n|\n", 80,
              V " a " V "\n" L H H H R "\n" V " 1 " V "\n" V "   " V "\n",
              "extra cells dropped, missing cells empty");
    check_lay(t61, 61,
              V " Term       " V " Meaning                           " V " Example  " V "\n" L
              H H H H H H H H H H H H X H H H H H H H H H H H H H H H H H H H H H H H H H H H H
              H H H H H H H X H H H H H H H H H H R "\n" V " latency    " V
              " time until the first byte         " V " 120 ms   " V "\n" V
              " throughput " V " tokens per second, sustained rate " V " 85 tok/s " V "\n",
              "the issue's table at 61 columns: as it is");

    /* styles: header cells bold, borders in their slot, cell markup kept */
    const char *src = "| **a** | b |\n|---|---|\n| `x` | y |\n";
    struct markdown *md = styled(src, strlen(src), strlen(src));
    struct wrap_doc *d = wrap_doc_new(40);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    struct wrap_view v;
    wrap_doc_row(d, 0, &v);
    TAP_OK(v.nspans >= 3 && v.spans[0].slot == THEME_TABLE_BORDER &&
               v.spans[1].slot == THEME_BOLD,
           "header row: border slot, then the header cell bold");
    wrap_doc_row(d, 2, &v);
    int code = 0;
    for (size_t i = 0; i < v.nspans; i++)
        code |= v.spans[i].slot == THEME_CODE && v.spans[i].len == 1 &&
                v.text[v.spans[i].off] == 'x';
    TAP_OK(code, "body row: inline code keeps its slot inside the cell");
    wrap_doc_free(d);
    markdown_free(md);
}

static void test_shrink(void)
{
    check_lay(t61, 60,
              V " Term       " V " Meaning                          " V " Example  " V "\n" L
              H H H H H H H H H H H H X H H H H H H H H H H H H H H H H H H H H H H H H H H H H
              H H H H H H X H H H H H H H H H H R "\n" V " latency    " V
              " time until the first byte        " V " 120 ms   " V "\n" L H H H H H H H H H H
              H H X H H H H H H H H H H H H H H H H H H H H H H H H H H H H H H H H H H X H H H
              H H H H H H H R "\n" V " throughput " V " tokens per second, sustained     " V
              " 85 tok/s " V "\n" V "            " V " rate                             " V
              "          " V "\n",
              "61 columns at 60: the wide column shrinks, its text wraps, borders stay whole");
    check_lay(t61, 50,
              V " Term       " V " Meaning                " V " Example  " V "\n" L H H H H H
              H H H H H H H X H H H H H H H H H H H H H H H H H H H H H H H H X H H H H H H H H
              H H R "\n" V " latency    " V " time until the first   " V " 120 ms   " V "\n"
              V "            " V " byte                   " V "          " V "\n" L H H H H H
              H H H H H H H X H H H H H H H H H H H H H H H H H H H H H H H H X H H H H H H H H
              H H R "\n" V " throughput " V " tokens per second,     " V " 85 tok/s " V "\n" V
              "            " V " sustained rate         " V "          " V "\n",
              "61 columns at 50: no word is split (Meaning, throughput whole)");
    static const int widths[] = {40, 50, 60, 100, 200};
    for (size_t i = 0; i < TT_ARRAY_LEN(widths); i++) {
        int w = rows_whole(t61, widths[i]);
        TAP_OK(w > 0 && w <= widths[i] && (widths[i] < 61 || w == 61),
               "the issue's table at %d columns: rows whole, %d wide", widths[i], w);
    }

    /* the widths themselves: natural, then each keeps its longest word, then its widest
     * cluster, shared in proportion to what it lacks */
    struct table_col cols[3] = {{'l', 10, 10, 1}, {'l', 33, 9, 1}, {'l', 8, 5, 1}};
    uint32_t cw[3];
    TAP_OK(table_widths(3, cols, 200, cw) == 0 && cw[0] == 10 && cw[1] == 33 && cw[2] == 8,
           "widths at 200: natural");
    TAP_OK(table_widths(3, cols, 100, cw) == 0 && cw[0] == 10 && cw[1] == 33 && cw[2] == 8,
           "widths at 100: natural");
    TAP_OK(table_widths(3, cols, 50, cw) == 0 && cw[0] + cw[1] + cw[2] == 40 && cw[0] == 10 &&
               cw[1] >= 9 && cw[2] >= 5 && cw[2] <= 8,
           "widths at 50: 40 columns of text, words kept (%u %u %u)", cw[0], cw[1], cw[2]);
    TAP_OK(table_widths(3, cols, 40, cw) == 0 && cw[0] + cw[1] + cw[2] == 30 && cw[0] == 10 &&
               cw[1] >= 9 && cw[2] >= 5,
           "widths at 40: 30 columns of text, words kept (%u %u %u)", cw[0], cw[1], cw[2]);
    TAP_OK(table_widths(3, cols, 30, cw) == 0 && cw[0] + cw[1] + cw[2] == 20 && cw[0] < 10,
           "widths at 30: words no longer fit, cut in proportion (%u %u %u)", cw[0], cw[1],
           cw[2]);
    struct table_col two[2] = {{'l', 40, 8, 1}, {'l', 20, 8, 1}};
    TAP_OK(table_widths(2, two, 37, cw) == 0 && cw[0] == 15 && cw[1] == 15,
           "the wider column gives way first, to a level both reach (%u %u)", cw[0], cw[1]);
    two[1].nat = 10;
    TAP_OK(table_widths(2, two, 37, cw) == 0 && cw[0] == 20 && cw[1] == 10,
           "a column under the level keeps its natural width (%u %u)", cw[0], cw[1]);
    TAP_OK(table_widths(3, cols, 12, cw) == -1 && table_widths(3, cols, 13, cw) == 0,
           "one column each needs 3 * 3 + 1 + 3 = 13 columns");
    struct table_col wide[2] = {{'l', 8, 2, 2}, {'l', 1, 1, 1}};
    TAP_OK(table_widths(2, wide, 9, cw) == -1 && table_widths(2, wide, 10, cw) == 0 &&
               cw[0] == 2,
           "a column of CJK needs 2 columns: one character");
}

static void test_cjk(void)
{
    const char *src = "| \xE5\x90\x8D\xE5\xAD\x97 | \xE8\xAF\xB4\xE6\x98\x8E |\n|---|---|\n"
                      "| \xE4\xBD\xA0\xE5\xA5\xBD | \xE4\xB8\xAD\xE6\x96\x87\xE7\x9A\x84"
                      "\xE5\x8D\x95\xE5\x85\x83\xE6\xA0\xBC\xE5\x86\x85\xE5\xAE\xB9 |\n";
    /* natural: 4 + 16 columns of text; at 20 the second column gets 9 columns: 4 characters
     * a row and a blank, never half of one */
    check_lay(src, 20,
              V " \xE5\x90\x8D\xE5\xAD\x97 " V " \xE8\xAF\xB4\xE6\x98\x8E      " V "\n" L H H
              H H H H X H H H H H H H H H H H R "\n" V " \xE4\xBD\xA0\xE5\xA5\xBD " V
              " \xE4\xB8\xAD\xE6\x96\x87\xE7\x9A\x84\xE5\x8D\x95  " V "\n" V "      " V
              " \xE5\x85\x83\xE6\xA0\xBC\xE5\x86\x85\xE5\xAE\xB9  " V "\n",
              "CJK cells wrap between characters, 2 columns each");
    static const int widths[] = {12, 14, 20, 40, 60, 100, 200};
    for (size_t i = 0; i < TT_ARRAY_LEN(widths); i++)
        TAP_OK(rows_whole(src, widths[i]) > 0, "CJK table at %d columns: rows whole",
               widths[i]);
}

static void test_list_form(void)
{
    check_lay(t61, 12,
              "Term:\n  latency\nMeaning:\n  time until\n  the first\n  byte\nExample: 120\n"
              "  ms\n\nTerm:\n  throughput\nMeaning:\n  tokens per\n  second,\n  sustained\n  "
              "rate\nExample: 85\n  tok/s\n",
              "too narrow for one character a column: one record per row, Header: value");
    check_lay("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", 8,
              "a: 1\nb: 2\n\na: 3\nb: 4\n", "records are apart, the header rows take no rows");
    check_lay("| | b |\n|---|---|\n| 1 | 2 |\n", 8, "Column\n  1: 1\nb: 2\n",
              "an empty header is named by its number");
    char *wide = lay("| a | b |\n|---|---|\n| 1 | 2 |\n", 13);
    TAP_STR(wide, V " a " V " b " V "\n" L H H H X H H H R "\n" V " 1 " V " 2 " V "\n",
            "one column wider: a table again");
    free(wide);
}

static void test_chunking(void)
{
    /* a table split at every boundary (two pieces, and byte by byte) lays out the same */
    char *want = lay(t61, 50);
    int same = 1;
    size_t n = strlen(t61);
    for (size_t cut = 1; cut < n && same; cut++) {
        struct markdown *md = markdown_new(THEME_ASSISTANT);
        markdown_feed(md, t61, cut);
        markdown_pending_count(md);
        markdown_feed(md, t61 + cut, n - cut);
        markdown_finish(md);
        struct wrap_doc *d = wrap_doc_new(50);
        for (size_t i = 0; i < markdown_count(md); i++)
            wrap_doc_push(d, &markdown_line(md, i)->wl);
        char *got = doc_rows(d);
        if (strcmp(got, want) != 0) {
            same = 0;
            printf("# cut at %zu:\n%s", cut, got);
        }
        free(got);
        wrap_doc_free(d);
        markdown_free(md);
    }
    TAP_OK(same, "split in two at each of %zu boundaries: the same table", n - 1);
    char *bytes = lay_chunked(t61, 50, 1);
    TAP_STR(bytes, want, "fed byte by byte: the same table");
    free(bytes);
    free(want);
}

static void test_resize(void)
{
    struct markdown *md = styled(t61, strlen(t61), 7);
    struct wrap_doc *d = wrap_doc_new(100);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    static const int widths[] = {50, 12, 200, 60, 40};
    int ok = 1;
    for (size_t i = 0; i < TT_ARRAY_LEN(widths); i++) {
        wrap_doc_set_width(d, widths[i]);
        char *got = doc_rows(d), *want = lay(t61, widths[i]);
        if (strcmp(got, want) != 0) {
            ok = 0;
            printf("# at %d:\n%s", widths[i], got);
        }
        free(got);
        free(want);
    }
    TAP_OK(ok, "a resize re-lays the table: the same rows as a table laid out at that width");
    wrap_doc_free(d);
    markdown_free(md);

    /* a table still being received stays raw (held), then is laid out when it ends */
    md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, t61, strlen(t61) - 20);
    TAP_INT(markdown_count(md), 0, "streaming: rows held while the table grows");
    TAP_OK(markdown_pending_count(md) == 4 &&
               markdown_pending_line(md, 3)->kind == MARKDOWN_TABLE_RAW,
           "streaming: held rows and the partial one previewed raw");
    markdown_free(md);
}

static void test_long_table(void)
{
    /* past the 256 rows measured, rows flow one by one with the same columns */
    struct buf b = BUF_INIT;
    buf_appends(&b, "| n | text |\n|---|---|\n");
    for (int i = 0; i < 300; i++)
        buf_printf(&b, "| %d | %s |\n", i, i == 299 ? "a much longer cell than any before it" : "x y");
    struct markdown *md = styled(b.data, b.len, b.len + 1);
    TAP_INT(markdown_count(md), 302, "long table: one line a row");
    struct wrap_doc *d = wrap_doc_new(20);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    size_t rows = wrap_doc_rows(d);
    int ok = 1;
    for (size_t r = 0; r < rows; r++) {
        struct wrap_view v;
        wrap_doc_row(d, r, &v);
        ok &= v.width == 14; /* "│ nnn │ text │" */
    }
    struct wrap_view v;
    wrap_doc_row(d, rows - 1, &v);
    TAP_OK(ok && rows > 302, "long table: a later, longer row wraps in the measured columns");
    wrap_doc_free(d);
    markdown_free(md);
    buf_free(&b);
}

static void test_hostile(void)
{
    /* a long text in a narrow column would repeat the borders on every row: a record */
    struct buf big = BUF_INIT;
    buf_appends(&big, "| a | b | c | d | e | f | g | h |\n|---|---|---|---|---|---|---|---|\n| ");
    for (int i = 0; i < 20000; i++)
        buf_appends(&big, "word ");
    buf_appends(&big, "| 2 | 3 | 4 | 5 | 6 | 7 | 8 |\n| x | y | z | u | v | w | q | r |\n");
    struct markdown *md = styled(big.data, big.len, big.len);
    struct wrap_doc *d = wrap_doc_new(40);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    size_t bytes = 0, rows = wrap_doc_rows(d), fit = 1;
    struct wrap_view v;
    for (size_t r = 0; r < rows; r++) {
        wrap_doc_row(d, r, &v);
        bytes += v.len;
        fit &= v.indent + v.width <= 40;
    }
    wrap_doc_row(d, rows - 1, &v);
    TAP_OK(fit && bytes < 2 * big.len && v.len > 6 && !memcmp(v.text, V, 3),
           "a 100 KB cell in a 40-column table of 8: a record (%zu bytes of rows), then the "
           "table goes on", bytes);
    wrap_doc_free(d);
    markdown_free(md);
    buf_free(&big);

    struct table_out o = TABLE_OUT_INIT;
    static const char *const bad[] = {
        "", "\x1d", "\x1dh", "\x1dh0\x1d", "\x1dh65", "\x1dq1;l1,1,1\x1d", "\x1dh1;x1,1,1\x1d",
        "\x1dh1;l1,1\x1d", "\x1dh2;l1,1,1\x1d", "\x1dh1;l1,1,1", "plain text",
    };
    int ok = 1;
    for (size_t i = 0; i < TT_ARRAY_LEN(bad); i++)
        ok &= table_layout(bad[i], strlen(bad[i]), NULL, 0, THEME_ASSISTANT, 40, &o) == -1;
    TAP_OK(ok, "malformed encoded rows are refused");
    const char huge[] = "\x1d"
                        "b2;l99999999999,99999999999,99999999999;r4294967295,1,1\x1d"
                        "a\x1f"
                        "b\x1e"
                        "h";
    TAP_OK(table_layout(huge, sizeof(huge) - 1, NULL, 0, THEME_ASSISTANT, 40, &o) == 0 &&
               o.rows.n == 3,
           "absurd widths: a record, bounded (%zu rows)", o.rows.n);
    table_out_free(&o);
}

int main(void)
{
    test_natural();
    test_shrink();
    test_cjk();
    test_list_form();
    test_chunking();
    test_resize();
    test_long_table();
    test_hostile();
    return tap_done();
}
