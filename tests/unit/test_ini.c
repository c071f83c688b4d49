/* test_ini.c - the INI reader of the config file and the themes: what a line is, line
 * numbers, values kept whole, malformed lines by kind, hostile bytes. */
#include "config.h"
#include "text/ini.h"
#include "tap.h"
#include "base/buf.h"
#include "base/xmalloc.h"

/* Each callback as one line of text: "3 S name", "4 P [sec] key=value", "5 E kind text". */
static int record(void *ud, struct ini_line *l)
{
    struct buf *b = ud;
    if (l->type == INI_SECTION)
        buf_printf(b, "%d S %s\n", l->lineno, l->section);
    else if (l->type == INI_PAIR)
        buf_printf(b, "%d P [%s] %s=%s\n", l->lineno, l->section ? l->section : "-", l->key,
                   l->value);
    else
        buf_printf(b, "%d E %d %s %02x\n", l->lineno, (int)l->error, l->text, l->byte);
    return 0;
}

static int stop_at_second(void *ud, struct ini_line *l)
{
    int *seen = ud;
    (void)l;
    return ++*seen == 2 ? 7 : 0;
}

/* Parse text (len bytes, may hold NULs) and return the record of callbacks. */
static char *parse(const char *text, size_t len, unsigned flags, int *rc, int *lines)
{
    char *copy = xmalloc(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    struct buf b = BUF_INIT;
    *rc = ini_parse(copy, len, flags, record, &b, lines);
    free(copy);
    return buf_take(&b);
}

#define PARSE(lit, flags) parse(lit, sizeof(lit) - 1, flags, &rc, &lines)

int main(void)
{
    int rc, lines;
    char *r = PARSE("# comment\n; another\n\n top = 1 \n[ a ]\r\nk = v = w ; x # y\n"
                    "  indented = \"q\"\n[]\nempty =\n= novalue\nlast=1", 0);
    TAP_STR(r, "4 P [-] top=1\n5 S a\n6 P [a] k=v = w ; x # y\n7 P [a] indented=\"q\"\n"
               "8 S \n9 P [] empty=\n10 P [] =novalue\n11 P [] last=1\n",
            "sections, pairs, comments, blanks, CRLF; '=' ';' '#' quotes kept in values");
    TAP_INT(rc, 0, "a good text returns 0");
    TAP_INT(lines, 11, "the last line counts without a newline");
    free(r);

    /* INI_INLINE_COMMENTS (the config file, as the docs' examples write it): a '#' or ';'
     * after a blank starts a comment; a quoted value keeps them, with a comment after it */
    r = PARSE("model = qwen3:8b     # any model from `ollama list`\n"
              "include_usage = false\t; older servers\n"
              "url = http://h/#frag\nsys = C# and a;b\ncolour = #839496\n"
              "q = \"keep # this ; too\"   # but not this\nq2 = 'x ; y'\n"
              "open = \"no close # cut\nbare = #only\n",
              INI_INLINE_COMMENTS);
    TAP_STR(r, "1 P [-] model=qwen3:8b\n2 P [-] include_usage=false\n3 P [-] url=http://h/#frag\n"
               "4 P [-] sys=C# and a;b\n5 P [-] colour=#839496\n"
               "6 P [-] q=\"keep # this ; too\"\n7 P [-] q2='x ; y'\n"
               "8 P [-] open=\"no close # cut\n9 P [-] bare=#only\n",
            "inline comments: cut after a blank, kept inside quotes and words");
    free(r);
    /* an empty value ends there (the comment scan never runs past it: until a review found
     * it, "key =" scanned the next lines, and past the text on the last one); shell commands
     * and JSON are kept whole; a section header may have a comment */
    r = PARSE("[p]   # the profile\nmax_tokens =\nsystem = \"Reply with #tags ; always\"\n"
              "api_key_cmd = cd ~/k ; cat x # c\nextra_body = {\"stop\": [\"a ;b\"]}\nlast =",
              INI_INLINE_COMMENTS);
    TAP_STR(r, "1 S p\n2 P [p] max_tokens=\n3 P [p] system=\"Reply with #tags ; always\"\n"
               "4 P [p] api_key_cmd=cd ~/k ; cat x # c\n5 P [p] extra_body={\"stop\": [\"a ;b\"]}\n"
               "6 P [p] last=\n",
            "inline comments: empty values, commands, JSON and a header's comment");
    free(r);
    char v[] = "\"a # b\" ; c";
    ini_cut_comment(v);
    ini_unquote(v);
    TAP_STR(v, "a # b", "ini_cut_comment then ini_unquote: a quoted value with a comment");

    r = PARSE("a = 1\n\n", 0);
    TAP_INT(lines, 2, "a trailing newline starts no line");
    free(r);

    struct buf big = BUF_INIT;
    buf_appends(&big, "[p]\nsystem = ");
    for (int i = 0; i < 5000; i++)
        buf_appendc(&big, 'x');
    buf_appends(&big, "\nnext = 1\n");
    r = parse(big.data, big.len, 0, &rc, &lines);
    TAP_OK(rc == 0 && strlen(r) > 5000 && strstr(r, "3 P [p] next=1"),
           "a 5,000-byte value is kept whole and the next line is line 3");
    free(r);
    buf_free(&big);

    r = PARSE("[a] junk\nx = 1\n", 0);
    TAP_STR(r, "1 E 4 [a] junk 00\n", "text after ']' is a malformed section; reading stops");
    TAP_INT(rc, -1, "... and ini_parse returns -1");
    free(r);
    r = PARSE("ok = 1\n  [open\n", 0);
    TAP_STR(r, "1 P [-] ok=1\n2 E 4 [open 00\n", "'[' without ']'");
    free(r);
    r = PARSE("a = 1\nno equals here\n", 0);
    TAP_STR(r, "1 P [-] a=1\n2 E 5 no equals here 00\n", "a line without '='");
    free(r);
    r = PARSE("a: 1\n", 0);
    TAP_STR(r, "1 E 5 a: 1 00\n", "':' does not separate a key");
    free(r);

    r = PARSE("a = 1\nb = x\0y\n", 0);
    TAP_STR(r, "1 P [-] a=1\n2 E 1 b = x 00\n", "a NUL byte is an error, also without flags");
    free(r);
    r = PARSE("# \xff\n", INI_TEXT_ONLY);
    TAP_STR(r, "1 E 2 # \xff 00\n", "INI_TEXT_ONLY: invalid UTF-8, even in a comment");
    free(r);
    r = PARSE("# \xff\n", 0);
    TAP_STR(r, "", "without it a comment is only a comment");
    free(r);
    r = PARSE("k = caf\xc3\xa9\tok\r\nx = \x1b[31m\n", INI_TEXT_ONLY);
    TAP_STR(r, "1 P [-] k=caf\xc3\xa9\tok\n2 E 3 x = \x1b[31m 1b\n",
            "INI_TEXT_ONLY: tab, CR and UTF-8 pass; ESC is a control character");
    free(r);

    /* a UTF-8 byte order mark (what some Windows editors write first) is not part of the
     * first line: it hid the first key */
    r = PARSE("\xef\xbb\xbfmodel = m\n[p]\n", INI_TEXT_ONLY);
    TAP_STR(r, "1 P [-] model=m\n2 S p\n", "a BOM at the start is skipped (key on line 1)");
    free(r);
    r = PARSE("\xef\xbb\xbf[p]\nk = v\n", 0);
    TAP_STR(r, "1 S p\n2 P [p] k=v\n", "a BOM before a section header");
    free(r);
    r = PARSE("a = 1\n\xef\xbb\xbf" "b = 2\n", 0);
    TAP_STR(r, "1 P [-] a=1\n2 P [-] \xef\xbb\xbf" "b=2\n", "only at the start of the text");
    free(r);
    r = PARSE("\xef\xbb", 0);
    TAP_STR(r, "1 E 5 \xef\xbb 00\n", "half a BOM is text");
    free(r);

    char text[] = "a = 1\nb = 2\nc = 3\n";
    int seen = 0;
    rc = ini_parse(text, strlen(text), 0, stop_at_second, &seen, &lines);
    TAP_OK(rc == 7 && seen == 2 && lines == 2, "a callback's non-zero stops the reading");

    char empty[1] = "";
    rc = ini_parse(empty, 0, 0, stop_at_second, &seen, &lines);
    TAP_OK(rc == 0 && lines == 0, "empty text: no line");
    return tap_done();
}
