/* test_wrap.c - cluster widths, wrapping at many widths, preformatted rows, wrap_doc. */
#include "config.h"
#include "tap.h"
#include "wrapdump.h"
#include "text/wrap.h"
#include "base/xmalloc.h"
#include "base/buf.h"
#include "base/util.h"

#include <stdint.h>

#define FAMILY "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7"
#define FLAG_JP "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5"
#define THUMB_TONE "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"
#define HEART_VS16 "\xE2\x9D\xA4\xEF\xB8\x8F"
#define HEART "\xE2\x9D\xA4"
#define HEART_VS15 "\xE2\x9D\xA4\xEF\xB8\x8E"
#define E_ACUTE "e\xCC\x81"
#define HANGUL_LVT "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB" /* U+1112 U+1161 U+11AB = 한 */
#define DEVA_KI "\xE0\xA4\x95\xE0\xA4\xBF"                 /* U+0915 U+093F */
#define KEYCAP_1 "1\xEF\xB8\x8F\xE2\x83\xA3"
#define CJK12 "你好世界你好世界你好世界"
#define ZWJ "\xE2\x80\x8D"
#define WOMAN "\xF0\x9F\x91\xA9"
#define FFFD "\xEF\xBF\xBD"

static void check_cluster(const char *s, size_t n, size_t want_len, int want_w,
                          const char *name)
{
    int w = -1;
    size_t k = wrap_cluster(s, n, &w);
    TAP_INT(k, want_len, name);
    TAP_INT(w, want_w, name);
}

/* Rows of s joined by '|' (for readable comparisons). */
static char *rows_str(const char *s, size_t n, int width, int hang, unsigned flags)
{
    struct wrap_rows r = {NULL, 0, 0};
    struct buf b = BUF_INIT;
    wrap_text(&r, s, n, width, hang, flags);
    for (size_t i = 0; i < r.n; i++) {
        if (i)
            buf_appendc(&b, '|');
        for (uint32_t k = 0; k < r.v[i].indent; k++)
            buf_appendc(&b, '>');
        buf_append(&b, s + r.v[i].off, r.v[i].len);
    }
    wrap_rows_free(&r);
    return buf_take(&b);
}

static void check_rows(const char *s, int width, int hang, unsigned flags, const char *want,
                       const char *name)
{
    char *got = rows_str(s, strlen(s), width, hang, flags);
    TAP_STR(got, want, name);
    free(got);
}

/* Invariants that must hold for any text and width: rows are in order and at cluster
 * boundaries, each row's width is measured right, no row is wider than its room unless it holds
 * one visible cluster, and only spaces (soft breaks) or '\n' are left out. Returns 1 when ok. */
static int check_invariants(const char *s, size_t n, int width, int hang, unsigned flags,
                            char *why, size_t whylen)
{
    struct wrap_rows r = {NULL, 0, 0};
    wrap_text(&r, s, n, width, hang, flags);
    size_t pos = 0;
    int ok = 1;
    /* cluster boundaries of the whole text */
    char *boundary = calloc(n + 1, 1);
    for (size_t i = 0; i < n;) {
        boundary[i] = 1;
        i += wrap_cluster(s + i, n - i, NULL);
    }
    boundary[n] = 1;
    for (size_t i = 0; i < r.n && ok; i++) {
        const struct wrap_row *w = &r.v[i];
        if (w->off < pos) {
            snprintf(why, whylen, "row %zu goes back", i);
            ok = 0;
            break;
        }
        for (size_t k = pos; k < w->off; k++) {
            if (s[k] != ' ' && s[k] != '\n') {
                snprintf(why, whylen, "row %zu skips byte %zu", i, k);
                ok = 0;
            }
        }
        if (!boundary[w->off] || !boundary[w->off + w->len]) {
            snprintf(why, whylen, "row %zu cuts a cluster", i);
            ok = 0;
        }
        if (wrap_width(s + w->off, w->len) != w->width) {
            snprintf(why, whylen, "row %zu width %u is wrong", i, w->width);
            ok = 0;
        }
        size_t room = (size_t)width - w->indent;
        if (w->width > room && !wrap_one_visible(s + w->off, w->len)) {
            snprintf(why, whylen, "row %zu is %u wide in %zu columns", i, w->width, room);
            ok = 0;
        }
        if ((flags & WRAP_PRE) && w->len == 0 && i + 1 < r.n && r.v[i + 1].off == w->off) {
            snprintf(why, whylen, "row %zu is empty mid-line", i);
            ok = 0;
        }
        pos = w->off + w->len;
    }
    for (size_t k = pos; ok && k < n; k++) {
        if (s[k] != ' ' && s[k] != '\n') {
            snprintf(why, whylen, "byte %zu after the last row", k);
            ok = 0;
        }
    }
    free(boundary);
    wrap_rows_free(&r);
    return ok;
}

static const char *const samples[] = {
    "The quick brown fox jumps over the lazy dog.",
    CJK12,
    "mixed 中文 text with English, 日本語のテキスト and " FAMILY " emoji " FLAG_JP "!",
    FAMILY FAMILY FAMILY " " THUMB_TONE HEART_VS16 KEYCAP_1,
    "caf" E_ACUTE " na" E_ACUTE "ve " HANGUL_LVT HANGUL_LVT " " DEVA_KI DEVA_KI DEVA_KI,
    "bad \xFF\xFE bytes \xE4\xBD and \xC0\xAF end",
    "    indented code    with   runs   of spaces   ",
    "averyveryverylongwordwithoutanyspacesatallthatmustbesplit",
    "a\n\nb c d\n" CJK12 "\n",
    "   ",
    "",
    /* fuzz regress/markdown/width1-zwj: a lone ZWJ (its own zero-width cluster) before a
     * 2-wide emoji; at width 1 their row is 2 wide */
    ZWJ WOMAN ZWJ FFFD FFFD,
};

/* Render all rows of a document into one string (text, width, indent, spans). */
/* Spans of every row must cover the row exactly. */
static int doc_spans_cover(const struct wrap_doc *d)
{
    struct wrap_view v;
    for (size_t i = 0; wrap_doc_row(d, i, &v) == 0; i++) {
        size_t at = 0;
        for (size_t k = 0; k < v.nspans; k++) {
            if (v.spans[k].off != at)
                return 0;
            at += v.spans[k].len;
        }
        if (at != v.len)
            return 0;
    }
    return 1;
}

static void test_widths(void)
{
    check_cluster("A", 1, 1, 1, "ascii letter");
    check_cluster("AB", 2, 1, 1, "ascii cluster is one byte");
    check_cluster("\xE4\xBD\xA0", 3, 3, 2, "CJK is 2 wide");
    check_cluster(FAMILY, strlen(FAMILY), strlen(FAMILY), 2, "ZWJ family is one 2-wide cluster");
    check_cluster(FLAG_JP, 8, 8, 2, "flag (regional indicator pair) is 2 wide");
    check_cluster(FLAG_JP FLAG_JP, 16, 8, 2, "two flags are two clusters");
    check_cluster("\xF0\x9F\x87\xAF", 4, 4, 1, "a lone regional indicator is 1 wide");
    check_cluster(THUMB_TONE, 8, 8, 2, "skin tone modifier joins its emoji");
    check_cluster(HEART_VS16, 6, 6, 2, "VS16 makes a text-default emoji 2 wide");
    check_cluster(HEART, 3, 3, 1, "text-default emoji alone is 1 wide");
    check_cluster(HEART_VS15, 6, 6, 1, "VS15 keeps text presentation");
    check_cluster(KEYCAP_1, strlen(KEYCAP_1), strlen(KEYCAP_1), 2, "keycap sequence is 2 wide");
    check_cluster(E_ACUTE "x", 4, 3, 1, "e + combining acute is one 1-wide cluster");
    check_cluster(HANGUL_LVT, 9, 9, 2, "Hangul jamo L+V+T is one 2-wide syllable");
    check_cluster(DEVA_KI, 6, 6, 2, "Devanagari KA + spacing vowel sign I: one cluster, 2 wide");
    check_cluster("\xCC\x81", 2, 2, 1, "a combining mark without a base is 1 wide");
    check_cluster("\xE2\x80\x8B", 3, 3, 0, "zero width space is 0 wide");
    check_cluster("\xFF" "abc", 4, 1, 1, "invalid byte: own cluster, 1 wide");
    check_cluster("\xE4\xBD", 2, 1, 1, "truncated sequence: one byte at a time");
    check_cluster("\xEF\xBF\xBD", 3, 3, 1, "a real U+FFFD is 3 bytes, 1 wide");
    check_cluster("", 0, 0, 0, "empty input");

    TAP_INT(wrap_cp_width(0x1161), 0, "override: Hangul medial vowel is 0 wide");
    TAP_INT(wrap_cp_width(0x093F), 1, "override: spacing mark is 1 wide");
    TAP_INT(wrap_cp_width(0x1B), 0, "control characters are 0 wide");
    TAP_INT(wrap_width("hello \xE4\xB8\x96\xE7\x95\x8C", 12), 10, "width of mixed text");
    TAP_INT(wrap_width(FAMILY FLAG_JP E_ACUTE, strlen(FAMILY FLAG_JP E_ACUTE)), 5,
            "width of emoji + flag + e-acute");
    TAP_INT(wrap_width("\xFF\xFE", 2), 2, "two invalid bytes are 2 columns");

    size_t used = 0;
    TAP_INT(wrap_fit(CJK12, strlen(CJK12), 5, &used), 6, "fit: 2 CJK chars in 5 columns");
    TAP_INT(used, 4, "fit: 4 columns used");
    TAP_INT(wrap_fit(FAMILY "ab", strlen(FAMILY) + 2, 1, &used), 0,
            "fit: a 2-wide cluster does not fit in 1 column");
    TAP_INT(wrap_fit(E_ACUTE E_ACUTE, 6, 1, &used), 3, "fit keeps the combining mark");
}

static void test_clean(void)
{
    struct buf b = BUF_INIT;
    wrap_clean(&b, "a\tb\tc", 5);
    TAP_STR(buf_str(&b), "a   b   c", "tab expands to the next multiple of 4");
    buf_reset(&b);
    wrap_clean(&b, "\xE4\xBD\xA0\tx", 5);
    TAP_STR(buf_str(&b), "\xE4\xBD\xA0  x", "tab stop counts display columns");
    buf_reset(&b);
    wrap_clean(&b, "\x1b[31mred\r\n\tz\xFF", 13);
    TAP_STR(buf_str(&b), "^[[31mred\n    z\xEF\xBF\xBD",
            "escape made visible, CRLF -> LF, tab after LF, invalid byte -> U+FFFD");
    buf_free(&b);
}

static void test_wrapping(void)
{
    const char *fox = "the quick brown fox jumps over the lazy dog";
    check_rows(fox, 10, 0, 0, "the quick|brown fox|jumps over|the lazy|dog", "ascii at 10");
    check_rows(fox, 80, 0, 0, fox, "ascii at 80 is one row");
    check_rows(fox, 9, 0, 0, "the quick|brown fox|jumps|over the|lazy dog", "ascii at 9");
    check_rows("abcdefghijkl", 5, 0, 0, "abcde|fghij|kl", "long word cut mid-word");
    check_rows("ab abcdefghijkl", 5, 0, 0, "ab|abcde|fghij|kl", "long word moves then cuts");
    check_rows("word   another", 6, 0, 0, "word|anothe|r", "spaces at a break are dropped");
    check_rows("a b", 1, 0, 0, "a|b", "width 1 ascii");
    check_rows("  indented text here", 10, 0, 0, "  indented|text here",
               "leading indentation is kept");
    check_rows("- item with text", 8, 2, 0, "- item|>>with|>>text", "hanging indent");
    check_rows("- item", 3, 2, 0, "-|ite|m", "hang dropped when narrower than twice it");
    check_rows("a\n\nb", 10, 0, 0, "a||b", "hard newlines kept, empty line is a row");
    check_rows("a\n", 10, 0, 0, "a|", "trailing newline gives an empty row");
    check_rows("", 10, 0, 0, "", "empty text is one empty row");
    check_rows("abc   ", 4, 0, 0, "abc", "overflowing trailing spaces make no empty row");
    check_rows("    verylongword", 10, 0, 0, "    verylo|ngword", "indentation is no break");
    check_rows("   x", 1, 0, 0, " | | |x", "indentation wider than the row is cut");

    /* CJK at widths 40 / 7 / 2 / 1 */
    check_rows(CJK12, 40, 0, 0, CJK12, "CJK at 40: one row");
    check_rows(CJK12, 7, 0, 0, "你好世|界你好|世界你|好世界",
               "CJK at 7: 3 per row");
    check_rows(CJK12, 2, 0, 0, "你|好|世|界|你|好|世|界|你|好|世|界",
               "CJK at 2: 1 per row");
    check_rows(CJK12, 1, 0, 0,
               "你|好|世|界|你|好|世|界|你|好|世|界",
               "CJK at 1: over-wide clusters alone, still progresses");
    check_rows("see 你好世界 now", 8, 0, 0, "see 你好|世界 now",
               "CJK breaks between ideographs");
    check_rows(FAMILY FAMILY FAMILY, 5, 0, 0, FAMILY FAMILY "|" FAMILY,
               "ZWJ families never split");
    check_rows(FAMILY "x", 1, 0, 0, FAMILY "|x", "width 1 with a 2-wide emoji");
    TAP_OK(wrap_one_visible(ZWJ WOMAN ZWJ, strlen(ZWJ WOMAN ZWJ)) &&
               !wrap_one_visible(WOMAN "a", strlen(WOMAN "a")) && wrap_one_visible("", 0),
           "wrap_one_visible: zero-width clusters do not count");
    check_rows(ZWJ WOMAN ZWJ FFFD FFFD, 1, 0, 0, ZWJ WOMAN ZWJ "|" FFFD "|" FFFD,
               "width 1: a zero-width cluster stays with the wide one after it, no blank row");
    check_rows(FLAG_JP FLAG_JP, 3, 0, 0, FLAG_JP "|" FLAG_JP, "flags never split");
    check_rows("n" E_ACUTE E_ACUTE "e", 2, 0, 0, "n" E_ACUTE "|" E_ACUTE "e",
               "combining marks stay with their base");

    /* preformatted */
    check_rows("    x = 1;   // comment", 10, 0, WRAP_PRE, "    x = 1;|   // comm|ent",
               "preformatted: hard cut, spaces kept");
    check_rows("short", 10, 0, WRAP_PRE, "short", "preformatted short line");
    check_rows("ab\n\ncd", 10, 0, WRAP_PRE, "ab||cd", "preformatted blank line");
    check_rows(CJK12, 5, 0, WRAP_PRE, "你好|世界|你好|世界|你好|世界",
               "preformatted CJK never split");
    check_rows(FAMILY "ab", 1, 0, WRAP_PRE, FAMILY "|a|b", "preformatted width 1");

    /* invariants over many widths */
    char why[128];
    for (size_t i = 0; i < TT_ARRAY_LEN(samples); i++) {
        int ok = 1;
        why[0] = 0;
        for (int w = 1; w <= 50 && ok; w++)
            for (unsigned f = 0; f <= WRAP_PRE && ok; f += WRAP_PRE)
                for (int h = 0; h <= 4 && ok; h += 2) {
                    ok = check_invariants(samples[i], strlen(samples[i]), w, h, f, why,
                                          sizeof(why));
                    if (!ok)
                        printf("# sample %zu width %d hang %d flags %u: %s\n", i, w, h, f,
                               why);
                }
        TAP_OK(ok, "invariants at widths 1..50, sample %zu", i);
    }

    /* width-1 with width-2 clusters: terminates, one cluster per row */
    struct wrap_rows r = {NULL, 0, 0};
    wrap_text(&r, FAMILY FLAG_JP CJK12, strlen(FAMILY FLAG_JP CJK12), 1, 0, 0);
    TAP_INT(r.n, 14, "width 1: 14 clusters -> 14 rows");
    int all2 = 1;
    for (size_t i = 0; i < r.n; i++)
        all2 &= r.v[i].width == 2;
    TAP_OK(all2, "width 1: every row holds one 2-wide cluster");
    wrap_rows_free(&r);
}

static void test_doc(void)
{
    struct theme_span sp[] = {{0, 3, THEME_BOLD, 0}, {4, 5, THEME_CODE, THEME_ATTR_ITALIC}};
    struct wrap_line l = {"abc defgh ijk", 13, sp, 2, THEME_ASSISTANT, 0, 0, 7};
    struct wrap_doc *d = wrap_doc_new(5);
    wrap_doc_push(d, &l);
    TAP_INT(wrap_doc_rows(d), 3, "doc: 3 rows at width 5");
    struct wrap_view v;
    TAP_INT(wrap_doc_row(d, 1, &v), 0, "doc: row 1 exists");
    TAP_INT(v.len, 5, "doc: row 1 is 'defgh'");
    TAP_OK(memcmp(v.text, "defgh", 5) == 0, "doc: row 1 text");
    TAP_INT(v.nspans, 1, "doc: row 1 has one span");
    TAP_INT(v.spans[0].slot, THEME_CODE, "doc: row 1 span slot");
    TAP_INT(v.spans[0].attrs, THEME_ATTR_ITALIC, "doc: row 1 span attrs");
    TAP_INT(v.tag, 7, "doc: tag passed through");
    TAP_INT(wrap_doc_row(d, 0, &v), 0, "doc: row 0");
    TAP_INT(v.nspans, 1, "doc: trailing space dropped at the break, one span");
    TAP_INT(wrap_doc_row(d, 2, &v), 0, "doc: row 2");
    TAP_INT(v.spans[0].slot, THEME_ASSISTANT, "doc: gap gets the line's slot");
    TAP_INT(wrap_doc_row(d, 3, &v), -1, "doc: row 3 is out of range");
    TAP_OK(doc_spans_cover(d), "doc: spans cover every row");

    struct wrap_line rule = {"---", 3, NULL, 0, THEME_RULE, 0, WRAP_RULE, 0};
    wrap_doc_push(d, &rule);
    TAP_INT(wrap_doc_row(d, 3, &v), 0, "doc: rule row");
    TAP_INT(v.width, 5, "doc: rule is as wide as the document");
    TAP_INT(v.len, 15, "doc: rule is 5 x U+2500");
    wrap_doc_set_width(d, 12);
    TAP_INT(wrap_doc_rows(d), 3, "doc: rewrap at 12 gives 2 + 1 rows");
    TAP_INT(wrap_doc_row(d, 2, &v), 0, "doc: rule after rewrap");
    TAP_INT(v.width, 12, "doc: rule follows the new width");

    struct wrap_line p = {"pending text", 12, NULL, 0, THEME_REASONING, 0, 0, 0};
    wrap_doc_pending_add(d, &p);
    TAP_INT(wrap_doc_rows(d), 4, "doc: pending row counted");
    TAP_INT(wrap_doc_row(d, 3, &v), 0, "doc: pending row");
    TAP_INT(v.line, 2, "doc: pending line numbered after finished ones");
    wrap_doc_pending_clear(d);
    TAP_INT(wrap_doc_rows(d), 3, "doc: pending cleared");
    TAP_INT(wrap_doc_lines(d), 2, "doc: 2 finished lines");
    /* a line handed over (not copied), after a line in the open arena block, then another */
    char *own = xstrdup("taken over text");
    struct wrap_line tl = {own, 15, NULL, 0, THEME_ASSISTANT, 0, 0, 0};
    wrap_doc_push_take(d, &tl, own);
    struct wrap_line after = {"next one", 8, NULL, 0, THEME_ASSISTANT, 0, 0, 0};
    wrap_doc_push(d, &after);
    TAP_INT(wrap_doc_rows(d), 6, "doc: a taken line wraps like a copied one (2 rows at 12)");
    TAP_INT(wrap_doc_row(d, 3, &v), 0, "doc: the taken line's first row");
    TAP_OK(v.text == own && v.len == 10 && memcmp(v.text, "taken over", 10) == 0,
           "doc: its row points into the buffer handed over");
    TAP_INT(wrap_doc_row(d, 5, &v), 0, "doc: the line after it");
    TAP_OK(v.len == 8 && memcmp(v.text, "next one", 8) == 0, "doc: and its text");
    wrap_doc_set_width(d, 40);
    TAP_INT(wrap_doc_rows(d), 4, "doc: rewrapped at 40: one row a line");
    wrap_doc_free(d); /* frees the taken buffer (ASan: no leak) */
}

static const char stream_text[] =
    "First paragraph with some words that wrap around at narrow widths.\n"
    "\n"
    "中文段落，没有空格的长句子"
    "需要在字符之间换行。" FAMILY " family " FLAG_JP " flag\n"
    "tab\there\tand\x1b[31m escape\r\n"
    "caf" E_ACUTE " " HANGUL_LVT " " DEVA_KI " bad\xFF byte " THUMB_TONE HEART_VS16 "\n"
    "last line without newline and a very long wooooooooooooooooooooooooooord";

static void test_incremental(void)
{
    size_t n = sizeof(stream_text) - 1;
    int widths[] = {1, 2, 7, 13, 40, 80};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        int w = widths[wi];
        struct wrap_doc *whole = wrap_doc_new(w);
        wrap_doc_append_text(whole, stream_text, n, THEME_ASSISTANT, 0);
        char *want = doc_dump(whole);
        size_t chunks[] = {1, 2, 3, 5, 64};
        int same = 1;
        for (size_t ci = 0; ci < TT_ARRAY_LEN(chunks); ci++) {
            struct wrap_doc *inc = wrap_doc_new(w);
            for (size_t at = 0; at < n; at += chunks[ci]) {
                size_t k = n - at < chunks[ci] ? n - at : chunks[ci];
                wrap_doc_append_text(inc, stream_text + at, k, THEME_ASSISTANT, 0);
            }
            char *got = doc_dump(inc);
            if (strcmp(got, want) != 0) {
                same = 0;
                printf("# width %d chunk %zu differs\n# got:\n%s\n# want:\n%s\n", w, chunks[ci],
                       got, want);
            }
            free(got);
            wrap_doc_free(inc);
        }
        TAP_OK(same, "incremental rewrap equals whole wrap at width %d", w);
        TAP_OK(doc_spans_cover(whole), "spans cover rows at width %d", w);

        /* the same rows as wrap_text over the cleaned text, line by line */
        struct buf clean = BUF_INIT;
        wrap_clean(&clean, stream_text, n);
        struct wrap_rows r = {NULL, 0, 0};
        wrap_text(&r, clean.data, clean.len, w, 0, 0);
        int match = r.n == wrap_doc_rows(whole);
        for (size_t i = 0; match && i < r.n; i++) {
            struct wrap_view v;
            wrap_doc_row(whole, i, &v);
            match = v.len == r.v[i].len &&
                    memcmp(v.text, clean.data + r.v[i].off, v.len) == 0 &&
                    (size_t)v.width == r.v[i].width;
        }
        TAP_OK(match, "doc rows equal wrap_text rows at width %d", w);
        wrap_rows_free(&r);
        buf_free(&clean);

        /* resize after streaming equals wrapping at the new width from the start */
        wrap_doc_set_width(whole, w + 3);
        struct wrap_doc *fresh = wrap_doc_new(w + 3);
        wrap_doc_append_text(fresh, stream_text, n, THEME_ASSISTANT, 0);
        char *a = doc_dump(whole), *b = doc_dump(fresh);
        TAP_STR(a, b, "resize equals fresh wrap");
        free(a);
        free(b);
        wrap_doc_free(fresh);
        free(want);
        wrap_doc_free(whole);
    }

    /* a split inside a UTF-8 sequence shows nothing broken in the pending row */
    struct wrap_doc *d = wrap_doc_new(20);
    wrap_doc_append_text(d, "ab\xE4\xBD", 4, THEME_USER, 0);
    struct wrap_view v;
    wrap_doc_row(d, 0, &v);
    TAP_INT(v.len, 2, "incomplete UTF-8 held back from the pending row");
    wrap_doc_append_text(d, "\xA0", 1, THEME_USER, 0);
    wrap_doc_row(d, 0, &v);
    TAP_INT(v.len, 5, "completed character appears");
    TAP_INT(v.width, 4, "and is 2 columns wide");
    wrap_doc_free(d);
}

/* The fast paths (CJK clusters, runs of ASCII placed whole, clean text without tabs) give
 * what the general code gives at their edges. */
static void test_fast_paths(void)
{
    check_cluster("\xE4\xB8\xAD" "a", 4, 3, 2, "CJK before ASCII ends its cluster");
    check_cluster("\xE4\xB8\xAD\xE6\x96\x87", 6, 3, 2, "CJK before CJK ends its cluster");
    check_cluster("\xE3\x81\x8B\xE3\x82\x99", 6, 6, 2, "kana + U+3099 is one cluster");
    check_cluster("\xE4\xB8\xAD\xEF\xB8\x8F", 6, 6, 2, "CJK + VS16 is one cluster");
    check_cluster("\xE4\xB8\xAD\xE2\x80\x8D", 6, 6, 2, "CJK + ZWJ is one cluster");
    check_cluster("\xEA\xB0\x80\xE1\x86\xA8", 6, 6, 2, "Hangul LV + jamo T is one cluster");
    check_cluster("\xEA\xB0\x80\xEA\xB0\x80", 6, 3, 2, "two Hangul syllables: two clusters");
    check_cluster("\xE4\xB8\xAD\xE4", 4, 3, 2, "CJK before a cut sequence");
    check_rows("abcde fghij", 5, 0, 0, "abcde|fghij", "a word that fills the row exactly");
    check_rows("abcd" E_ACUTE "f", 5, 0, 0, "abcd" E_ACUTE "|f",
               "a mark after an ASCII run belongs to its last letter");
    check_rows("abcde" E_ACUTE, 5, 0, 0, "abcde|" E_ACUTE, "a word one cluster too wide");
    check_rows("\xE4\xBD\xA0\xE5\xA5\xBD" "abc", 5, 0, 0, "\xE4\xBD\xA0\xE5\xA5\xBD|abc",
               "ASCII after CJK may start a row");
    check_rows("ab\xE4\xBD\xA0\xE5\xA5\xBD", 4, 0, 0, "ab\xE4\xBD\xA0|\xE5\xA5\xBD",
               "CJK after ASCII may start a row");
    check_rows("- **bold** and `code` \xE4\xB8\xAD\xE6\x96\x87 text", 12, 2, 0,
               "- **bold**|>>and `code`|>>\xE4\xB8\xAD\xE6\x96\x87 text",
               "markdown-ish text with a hang");
    struct buf b = BUF_INIT;
    wrap_clean(&b, "a\x1b" "b\xE4\xB8\xAD", 6);
    TAP_STR(buf_str(&b), "a^[b\xE4\xB8\xAD", "clean without tabs still sanitises");
    buf_reset(&b);
    wrap_clean(&b, "\xE4\xB8\xAD\tx", 5);
    TAP_STR(buf_str(&b), "\xE4\xB8\xAD  x", "a tab after CJK counts its two columns");
    buf_free(&b);
}

static uint32_t xorshift(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Every field of every row. */
static char *rows_full(const char *s, size_t n, int width, int hang, unsigned flags)
{
    struct wrap_rows r = {NULL, 0, 0};
    struct buf b = BUF_INIT;
    wrap_text(&r, s, n, width, hang, flags);
    for (size_t i = 0; i < r.n; i++)
        buf_printf(&b, "%u+%u/%u>%u ", r.v[i].off, r.v[i].len, r.v[i].width, r.v[i].indent);
    wrap_rows_free(&r);
    return buf_take(&b);
}

/* The inline loop for ASCII and CJK gives the rows the cluster-by-cluster loop gives, on random
 * lines of words, spaces, CJK, marks, emoji and controls at random widths and hangs; so does
 * WRAP_PRE's run of printable ASCII cut at the width (code, tables). */
static void test_fast_loop(unsigned flags)
{
    static const char *const units[] = {
        "a", "word ", "ab", " ", "   ", "\xE4\xB8\xAD", "\xE6\x96\x87\xE5\xAD\x97", "\xEA\xB0\x80",
        E_ACUTE, "e\xCC\x81", "\xE3\x81\x8B\xE3\x82\x99", "\xF0\x9F\x98\x80", "\x1b", "\r",
        "\xE4", "\xE4\xB8", "\xFF", "x\xE2\x80\x8D", "longerwordthanarow ", "\xEF\xBC\x81",
        "\xE2\x80\xA2 ", "a\xE4\xB8\xAD", "\xE4\xB8\xAD" "b", "\n"};
    uint32_t seed = 7;
    int bad = 0;
    for (int round = 0; round < 5000 && !bad; round++) {
        struct buf b = BUF_INIT;
        size_t k = (size_t)(xorshift(&seed) % 40);
        for (size_t j = 0; j < k; j++)
            buf_appends(&b, units[xorshift(&seed) % (sizeof(units) / sizeof(units[0]))]);
        int width = 1 + (int)(xorshift(&seed) % 30), hang = (int)(xorshift(&seed) % 6);
        const char *t = b.data ? b.data : "";
        wrap_bytewise = 1;
        char *want = rows_full(t, b.len, width, hang, flags);
        wrap_bytewise = 0;
        char *got = rows_full(t, b.len, width, hang, flags);
        if (strcmp(got, want) != 0) {
            bad = 1;
            printf("# width %d hang %d input: %s\n", width, hang, t);
            TAP_STR(got, want, "inline loop differs from the cluster-by-cluster loop");
        }
        free(want);
        free(got);
        buf_free(&b);
    }
    TAP_OK(!bad, "inline ASCII/CJK loop = cluster-by-cluster loop on 5000 random lines%s",
           flags & WRAP_PRE ? " (WRAP_PRE)" : "");
}

int main(void)
{
    test_fast_paths();
    test_fast_loop(0);
    test_fast_loop(WRAP_PRE);
    test_widths();
    test_clean();
    test_wrapping();
    test_doc();
    test_incremental();
    return tap_done();
}
