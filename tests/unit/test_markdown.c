/* test_markdown.c - each construct, chunking invariance, pending lines, sanitising. */
#include "config.h"
#include "tap.h"
#include "wrapdump.h"
#include "text/markdown.h"
#include "base/buf.h"
#include "base/util.h"

static const char *const kind_names[] = {"TEXT", "BLANK", "HEADING", "CODE", "LABEL",
                                         "LIST", "QUOTE", "RULE", "TABLE", "RAW"};

/* One line as KIND/level/hang/flags: slot[attrs]=text|slot=text... */
static void dump_line(struct buf *b, const struct markdown_line *l)
{
    buf_printf(b, "%s/%d/%d/%d:", kind_names[l->kind], l->level, l->wl.hang, l->wl.flags);
    size_t at = 0;
    for (size_t i = 0; i < l->wl.nspans; i++) {
        const struct theme_span *s = &l->wl.spans[i];
        if (s->off != at)
            buf_printf(b, "<GAP %zu..%u>", at, s->off);
        buf_appends(b, i ? "|" : " ");
        buf_appends(b, theme_slot_name(s->slot));
        if (s->attrs) {
            buf_appendc(b, '[');
            if (s->attrs & THEME_ATTR_BOLD)
                buf_appendc(b, 'b');
            if (s->attrs & THEME_ATTR_ITALIC)
                buf_appendc(b, 'i');
            if (s->attrs & THEME_ATTR_DIM)
                buf_appendc(b, 'd');
            if (s->attrs & THEME_ATTR_UNDERLINE)
                buf_appendc(b, 'u');
            if (s->attrs & THEME_ATTR_STRIKE)
                buf_appendc(b, 's');
            buf_appendc(b, ']');
        }
        buf_appendc(b, '=');
        buf_append(b, l->wl.text + s->off, s->len);
        at = s->off + s->len;
    }
    if (at != l->wl.len)
        buf_printf(b, "<UNCOVERED %zu..%zu>", at, l->wl.len);
    if (l->wl.tag != (l->kind | l->level << 8))
        buf_appends(b, "<BAD TAG>");
    buf_appendc(b, '\n');
}

static char *dump_all(struct markdown *md)
{
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < markdown_count(md); i++)
        dump_line(&b, markdown_line(md, i));
    return buf_take(&b);
}

static char *render(const char *src, size_t n)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, src, n);
    markdown_finish(md);
    char *s = dump_all(md);
    markdown_free(md);
    return s;
}

static char *render_chunked(const char *src, size_t n, size_t chunk)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    for (size_t at = 0; at < n; at += chunk) {
        markdown_feed(md, src + at, n - at < chunk ? n - at : chunk);
        markdown_pending_count(md); /* previews must not disturb the result */
    }
    markdown_finish(md);
    char *s = dump_all(md);
    markdown_free(md);
    return s;
}

static void check_md(const char *src, const char *want, const char *name)
{
    char *got = render(src, strlen(src));
    TAP_STR(got, want, name);
    free(got);
}

static void test_inline(void)
{
    check_md("plain text", "TEXT/0/0/0: assistant=plain text\n", "plain text");
    check_md("a **b** *c* ***d*** _e_ `f`",
             "TEXT/0/0/0: assistant=a |bold=b|assistant= |italic=c|assistant= |bold-italic=d"
             "|assistant= |italic=e|assistant= |code=f\n",
             "bold, italic, bold-italic, underscore, inline code");
    check_md("**bold *both* bold**",
             "TEXT/0/0/0: bold=bold |bold-italic=both|bold= bold\n", "nested emphasis");
    check_md("*foo**bar**baz*", "TEXT/0/0/0: italic=foo|bold-italic=bar|italic=baz\n",
             "intraword ** inside * (CommonMark's rule of 3)");
    check_md("2 * 3 * 4 and snake_case_name",
             "TEXT/0/0/0: assistant=2 * 3 * 4 and snake_case_name\n",
             "spaced stars and intraword underscores stay literal");
    check_md("**unclosed and *also", "TEXT/0/0/0: assistant=**unclosed and *also\n",
             "unclosed delimiters stay literal");
    check_md("\\*not emphasis\\*", "TEXT/0/0/0: assistant=*not emphasis*\n",
             "backslash escapes");
    /* entity references, as models write them: decoded outside code, literal inside it and
     * when they are none (until 2026-12 "&amp;" was drawn as it came) */
    check_md("AT&amp;T &lt;tag&gt; &quot;q&quot; &apos;a&apos; &#233; &#x4E2D; a&nbsp;b",
             "TEXT/0/0/0: assistant=AT&T <tag> \"q\" 'a' \xC3\xA9 \xE4\xB8\xAD a b\n",
             "entity references are decoded");
    check_md("`&amp;` & &unknown; &amp &#0; &#1; &#xD800; &#99999999;",
             "TEXT/0/0/0: code=&amp;|assistant= & &unknown; &amp &#0; &#1; &#xD800; "
             "&#99999999;\n",
             "entities stay literal in code and when they are not ones");
    check_md("**&lt;b&gt;**", "TEXT/0/0/0: bold=<b>\n", "an entity takes its span's style");
    check_md("``a ` b`` and `**x**`",
             "TEXT/0/0/0: code=a ` b|assistant= and |code=**x**\n",
             "code spans: longer fences, no emphasis inside");
    check_md("`unclosed code", "TEXT/0/0/0: assistant=`unclosed code\n",
             "unclosed backtick is literal");
    check_md("see [the docs](https://x.y/z \"title\") now",
             "TEXT/0/0/0: assistant=see |link=the docs|dim= (https://x.y/z)|assistant= now\n",
             "link: text styled, url dimmed in parentheses");
    check_md("[**bold link**](u)", "TEXT/0/0/0: link[b]=bold link|dim= (u)\n",
             "emphasis inside link text");
    check_md("[https://a.b](https://a.b)", "TEXT/0/0/0: link=https://a.b\n",
             "link whose text is its url shows it once");
    check_md("![a cat](cat.png)", "TEXT/0/0/0: dim=image: |link=a cat|dim= (cat.png)\n",
             "image");
    check_md("go to <https://a.b/c> or https://d.e/f_g_h. ok",
             "TEXT/0/0/0: assistant=go to |link=https://a.b/c|assistant= or "
             "|link=https://d.e/f_g_h|assistant=. ok\n",
             "autolink and bare url (trailing dot excluded, underscores untouched)");
    check_md("[not a link] (x)", "TEXT/0/0/0: assistant=[not a link] (x)\n",
             "brackets without (url) stay text");
    check_md("evil \x1b[2J\x07 text\r", "TEXT/0/0/0: assistant=evil ^[[2J^G text\n",
             "control characters sanitised, CR dropped");
    check_md("bad \xFF byte", "TEXT/0/0/0: assistant=bad \xEF\xBF\xBD byte\n",
             "invalid UTF-8 -> U+FFFD");
}

static void test_blocks(void)
{
    check_md("# Title\n### Sub **b** ###\n#nospace",
             "HEADING/1/2/0: dim=# |heading=Title\n"
             "HEADING/3/4/0: dim=### |heading=Sub |heading[b]=b\n"
             "TEXT/0/0/0: assistant=#nospace\n",
             "headings (closing #s dropped; # needs a space)");
    check_md("```python\nx = 1  # *not* styled\n\n\tindented\n```\nafter",
             "LABEL/0/0/1: code-label=python\n"
             "CODE/0/0/1: code=x = |code-number=1|code=  |code-comment=# *not* styled\n"
             "CODE/0/0/1:\n"
             "CODE/0/0/1: code=    indented\n"
             "TEXT/0/0/0: assistant=after\n",
             "fenced code block with language label, verbatim, tab expanded");
    check_md("~~~~\n```\nstill code\n~~~~",
             "LABEL/0/0/1:\nCODE/0/0/1: code=```\nCODE/0/0/1: code=still code\n",
             "tilde fence closes only with tildes");
    check_md("text\n```js\ncode **not bold**\n",
             "TEXT/0/0/0: assistant=text\nLABEL/0/0/1: code-label=js\n"
             "CODE/0/0/1: code=code **not bold**\n",
             "unclosed fence at the end is still code");
    check_md("---\n***\n_ _ _\n--",
             "RULE/0/0/2: rule=\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80\n"
             "RULE/0/0/2: rule=\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80\n"
             "RULE/0/0/2: rule=\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80\n"
             "TEXT/0/0/0: assistant=--\n",
             "horizontal rules");
    check_md("> quoted *it*\n> > nested\n>",
             "QUOTE/1/2/0: quote=\xE2\x94\x82 quoted |quote[i]=it\n"
             "QUOTE/2/4/0: quote=\xE2\x94\x82 \xE2\x94\x82 nested\n"
             "QUOTE/1/2/0: quote=\xE2\x94\x82 \n",
             "block quotes and nesting");
    check_md("- a\n- b **x**\n  - c\n    - d\n      more d\n- e\n\nplain",
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= a\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= b |bold=x\n"
             "LIST/1/4/0: assistant=  |list-marker=\xE2\x97\xA6|assistant= c\n"
             "LIST/2/6/0: assistant=    |list-marker=\xE2\x96\xAA|assistant= d\n"
             "LIST/2/6/0: assistant=      more d\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= e\n"
             "BLANK/0/0/0:\n"
             "TEXT/0/0/0: assistant=plain\n",
             "nested bullet lists with continuation");
    check_md("1. one\n2. two\n   1) inner\n   2) inner two\n10. ten\n* star\n+ plus",
             "LIST/0/3/0: list-marker=1.|assistant= one\n"
             "LIST/0/3/0: list-marker=2.|assistant= two\n"
             "LIST/1/5/0: assistant=  |list-marker=1)|assistant= inner\n"
             "LIST/1/5/0: assistant=  |list-marker=2)|assistant= inner two\n"
             "LIST/0/4/0: list-marker=10.|assistant= ten\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= star\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= plus\n",
             "ordered lists, nesting by indentation, other bullets");
    check_md("    - deep first\n  - shallower\n- top",
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= deep first\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= shallower\n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= top\n",
             "outdenting never goes below level 0");
    check_md("1. step\n   ```sh\n   ls -l\n   ```\n2. next",
             "LIST/0/3/0: list-marker=1.|assistant= step\n"
             "LABEL/0/3/1: assistant=   |code-label=sh\n"
             "CODE/0/3/1: assistant=   |code-function=ls|code= -l\n"
             "LIST/0/3/0: list-marker=2.|assistant= next\n",
             "code fence inside a list item is indented under it");
    check_md("**not a list**\n-not a list either",
             "TEXT/0/0/0: bold=not a list\nTEXT/0/0/0: assistant=-not a list either\n",
             "bold at line start is not a bullet");
    check_md("  indented para", "TEXT/0/2/0: assistant=  indented para\n",
             "indentation kept with a hanging indent");
}

static void test_strike_tasks(void)
{
    check_md("~~gone~~ kept", "TEXT/0/0/0: assistant[s]=gone|assistant= kept\n",
             "~~strikethrough~~: markers hidden, text struck");
    check_md("~one~ ~~~three~~~ ~~ spaced ~~ a~~b",
             "TEXT/0/0/0: assistant=~one~ ~~~three~~~ ~~ spaced ~~ a~~b\n",
             "one or three tildes, spaced or unclosed runs stay text");
    check_md("**~~both~~** ~~`code` [l](http://x)~~",
             "TEXT/0/0/0: bold[s]=both|assistant= |code[s]=code|assistant[s]= |link[s]=l|dim= "
             "(http://x)\n",
             "strikethrough inside strong, over code and a link");
    check_md("- [ ] todo\n- [x] done\n  - [X] nested\n- [ ]\n- [y] not a task",
             "LIST/0/2/0: list-marker=\xE2\x98\x90|assistant= todo\n"
             "LIST/0/2/0: list-marker=\xE2\x98\x91|assistant= done\n"
             "LIST/1/4/0: assistant=  |list-marker=\xE2\x98\x91|assistant= nested\n"
             "LIST/0/2/0: list-marker=\xE2\x98\x90|assistant= \n"
             "LIST/0/2/0: list-marker=\xE2\x80\xA2|assistant= [y] not a task\n",
             "task lists: ballot boxes instead of bullets, empty or checked");
    check_md("1. [x] first\n2. [ ] second",
             "LIST/0/5/0: list-marker=1.|assistant= |list-marker=\xE2\x98\x91|assistant= "
             "first\n"
             "LIST/0/5/0: list-marker=2.|assistant= |list-marker=\xE2\x98\x90|assistant= "
             "second\n",
             "ordered task lists: the box after the number");
    check_md("> a\n> > b\n>>> c\n\n---",
             "QUOTE/1/2/0: quote=\xE2\x94\x82 a\n"
             "QUOTE/2/4/0: quote=\xE2\x94\x82 \xE2\x94\x82 b\n"
             "QUOTE/3/6/0: quote=\xE2\x94\x82 \xE2\x94\x82 \xE2\x94\x82 c\n"
             "BLANK/0/0/0:\n"
             "RULE/0/0/2: rule=\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80\n",
             "nested quotes: a bar per level; a rule");
}

static void test_tables(void)
{
    /* rows are encoded for wrap_doc, which lays them out at its width (test_table) */
    check_md("| a | b |\n|:--|--:|\n| 1 | 22 |\n| 333 | `4` |\nafter",
             "TABLE/0/0/4: assistant=\x1dh2;l3,3,1;r2,2,1\x1d|bold=a|assistant=\x1f|bold=b\n"
             "TABLE/0/0/4: assistant=\x1ds2;l3,3,1;r2,2,1\x1d\n"
             "TABLE/0/0/4: assistant=\x1d"
             "f2;l3,3,1;r2,2,1\x1d"
             "1\x1f"
             "22\x1e|bold=a|assistant=\x1f|bold=b\n"
             "TABLE/0/0/4: assistant=\x1d"
             "b2;l3,3,1;r2,2,1\x1d"
             "333\x1f|code=4|assistant=\x1e|bold=a|assistant=\x1f|bold=b\n"
             "TEXT/0/0/0: assistant=after\n",
             "table rows: kind, measured columns, cells, the header's cells in body rows");
    check_md("```sh | x\nls | wc\n```",
             "LABEL/0/0/1: code-label=sh\nCODE/0/0/1: code-function=ls|code= | |code-function=wc\n",
             "a fence with a pipe in its info string is a fence, pipes in code are code");
    check_md("a | b\nnot a delimiter",
             "TEXT/0/0/0: assistant=a | b\nTEXT/0/0/0: assistant=not a delimiter\n",
             "a line with a pipe but no delimiter row is text");
    /* a long table: aligned on its first 256 rows, later rows flow with those widths */
    struct buf b = BUF_INIT;
    buf_appends(&b, "| n | v |\n|---|---|\n");
    for (int i = 0; i < 300; i++)
        buf_printf(&b, "| %d | x |\n", i);
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, b.data, b.len);
    TAP_INT(markdown_count(md), 2 + 300, "long table: rows stream after the first 256");
    TAP_INT(markdown_pending_count(md), 0, "long table: nothing held back any more");
    const struct markdown_line *last = markdown_line(md, markdown_count(md) - 1);
    TAP_OK(last->kind == MARKDOWN_TABLE && strstr(last->wl.text, "299"),
           "long table: last row aligned");
    markdown_free(md);
    buf_free(&b);
}

static void test_pending(void)
{
    struct markdown *md = markdown_new(THEME_REASONING);
    markdown_feed(md, "# Hea", 5);
    TAP_INT(markdown_count(md), 0, "pending: nothing finished yet");
    TAP_INT(markdown_pending_count(md), 1, "pending: one provisional line");
    const struct markdown_line *p = markdown_pending_line(md, 0);
    TAP_INT(p->kind, MARKDOWN_HEADING, "pending: provisional heading");
    TAP_OK(p->wl.len == 5 && memcmp(p->wl.text, "# Hea", 5) == 0, "pending: its text");
    markdown_feed(md, "ding\nmore **bo", 14);
    TAP_INT(markdown_count(md), 1, "pending: heading finished");
    p = markdown_pending_line(md, 0);
    TAP_OK(p && p->wl.len == 9 && p->wl.spans[0].slot == THEME_REASONING,
           "pending: unfinished line in the base slot");
    markdown_feed(md, "ld**\n\xE4\xBD", 7);
    TAP_INT(markdown_count(md), 2, "pending: second line finished");
    TAP_INT(markdown_pending_count(md), 0, "pending: an incomplete UTF-8 tail shows nothing");
    markdown_feed(md, "\xA0", 1);
    p = markdown_pending_line(md, 0);
    TAP_OK(p && p->wl.len == 3, "pending: completed character appears");
    markdown_free(md);

    md = markdown_new(THEME_ASSISTANT);
    const char *t = "| a | b |\n|---|---|\n| 1 |";
    markdown_feed(md, t, strlen(t));
    TAP_INT(markdown_count(md), 0, "table: rows held back while the table grows");
    TAP_INT(markdown_pending_count(md), 3, "table: header, delimiter and partial row pending");
    TAP_INT(markdown_pending_line(md, 0)->kind, MARKDOWN_TABLE_RAW, "table: shown raw");
    TAP_INT(markdown_pending_line(md, 2)->kind, MARKDOWN_TABLE_RAW, "table: partial row raw");
    markdown_feed(md, " 2 |\n\nnext", 10);
    TAP_INT(markdown_count(md), 4, "table: emitted aligned when it ends (3 rows + blank)");
    TAP_INT(markdown_line(md, 0)->kind, MARKDOWN_TABLE, "table: aligned kind");
    markdown_free(md);

    md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, "```c\nint x", 10);
    TAP_INT(markdown_count(md), 1, "fence: label finished");
    TAP_INT(markdown_pending_line(md, 0)->kind, MARKDOWN_CODE, "fence: partial line is code");
    markdown_feed(md, ";\n``", 4);
    TAP_INT(markdown_pending_line(md, 0)->kind, MARKDOWN_CODE,
            "fence: a partial closing fence still looks like code");
    markdown_feed(md, "`\nafter", 7);
    TAP_INT(markdown_count(md), 2, "fence: closing fence adds no line");
    TAP_INT(markdown_pending_line(md, 0)->kind, MARKDOWN_TEXT, "fence: text after it");
    markdown_free(md);
}

static const char doc[] =
    "# Streaming **test** document\n"
    "\n"
    "Some *emphasis*, **strong**, ***both***, `code`, and a [link](https://example.com/a_b).\n"
    "Intraword snake_case and 2 * 3 stay literal; \\*escaped\\* too.\n"
    "\n"
    "- item one with \xE4\xB8\xAD\xE6\x96\x87 text\n"
    "  - nested **bold** item\n"
    "    1. deep numbered\n"
    "- item two \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\n"
    "\n"
    "> a quote with `code`\n"
    "> > nested\n"
    "\n"
    "| Name | Value |\n"
    "|:-----|------:|\n"
    "| \xC3\xA9t\xC3\xA9 | 1 |\n"
    "| x | **22** |\n"
    "\n"
    "---\n"
    "```python\n"
    "def f(x):\n"
    "\treturn x ** 2  # *not* emphasis\n"
    "```\n"
    "Tail line with <https://a.b> and https://c.d/e.\r\n"
    "Escape \x1b[31m red and invalid \xFF byte\n"
    "```\n"
    "unclosed fence at the end";

static void test_chunking(void)
{
    size_t n = sizeof(doc) - 1;
    char *whole = render(doc, n);
    TAP_OK(strstr(whole, "<GAP") == NULL && strstr(whole, "<UNCOVERED") == NULL &&
               strstr(whole, "<BAD TAG>") == NULL,
           "spans cover every line, tags consistent");
    TAP_OK(strstr(whole, "LABEL/0/0/1: code-label=python") != NULL, "document has its fence");
    TAP_OK(strstr(whole, "CODE/0/0/1: code=unclosed fence at the end") != NULL,
           "document ends inside an unclosed fence");

    int split_ok = 1;
    for (size_t cut = 0; cut <= n; cut++) {
        struct markdown *md = markdown_new(THEME_ASSISTANT);
        markdown_feed(md, doc, cut);
        markdown_pending_count(md);
        markdown_feed(md, doc + cut, n - cut);
        markdown_finish(md);
        char *got = dump_all(md);
        if (strcmp(got, whole) != 0) {
            if (split_ok)
                printf("# split at %zu differs:\n%s\n", cut, got);
            split_ok = 0;
        }
        free(got);
        markdown_free(md);
    }
    TAP_OK(split_ok, "every 2-way split gives the same lines as the whole (%zu splits)", n + 1);

    size_t chunks[] = {1, 2, 3, 7, 64};
    for (size_t i = 0; i < TT_ARRAY_LEN(chunks); i++) {
        char *got = render_chunked(doc, n, chunks[i]);
        TAP_STR(got, whole, chunks[i] == 1 ? "1-byte chunks equal the whole feed"
                                           : "n-byte chunks equal the whole feed");
        free(got);
    }

    /* ** split across chunks */
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, "a *", 3);
    markdown_pending_count(md);
    markdown_feed(md, "*b*", 3);
    markdown_pending_count(md);
    markdown_feed(md, "* c", 3);
    markdown_finish(md);
    char *got = dump_all(md);
    TAP_STR(got, "TEXT/0/0/0: assistant=a |bold=b|assistant= c\n", "** split across chunks");
    free(got);
    markdown_free(md);

    /* finished lines never change while more text arrives */
    md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, doc, n / 2);
    char *early = dump_all(md);
    size_t early_count = markdown_count(md);
    const struct markdown_line *first = markdown_line(md, 0);
    const char *first_text = first->wl.text;
    markdown_feed(md, doc + n / 2, n - n / 2);
    markdown_finish(md);
    char *late = dump_all(md);
    TAP_OK(early_count > 5 && strncmp(late, early, strlen(early)) == 0,
           "lines finished early are unchanged at the end (%zu lines)", early_count);
    TAP_OK(markdown_line(md, 0) == first && first->wl.text == first_text,
           "finished lines keep their address and are not restyled");
    free(early);
    free(late);
    markdown_free(md);

    /* line addresses stay valid across many more lines (read through old pointers) */
    md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, "line 0\n", 7);
    const struct markdown_line *l0 = markdown_line(md, 0);
    for (int i = 1; i < 1000; i++) {
        char tmp[32];
        int k = snprintf(tmp, sizeof(tmp), "line %d\n", i);
        markdown_feed(md, tmp, (size_t)k);
    }
    const struct markdown_line *l300 = markdown_line(md, 300);
    TAP_OK(markdown_count(md) == 1000 && l0 == markdown_line(md, 0) && l0->wl.len == 6 &&
               memcmp(l0->wl.text, "line 0", 6) == 0 && l300->wl.len == 8,
           "line pointers stable over 1000 lines");
    TAP_OK(markdown_line(md, 1000) == NULL, "out-of-range line is NULL");
    /* released lines are gone (their blocks freed), the rest and the count stay */
    markdown_release(md, 600);
    const struct markdown_line *l600 = markdown_line(md, 600);
    TAP_OK(markdown_line(md, 0) == NULL && markdown_line(md, 599) == NULL && l600 &&
               l600->wl.len == 8 && memcmp(l600->wl.text, "line 600", 8) == 0 &&
               markdown_count(md) == 1000,
           "markdown_release frees the lines before 600, keeps 600.. and the count");
    markdown_feed(md, "line 1000\n", 10);
    markdown_release(md, 5000); /* past the end: up to the count */
    markdown_feed(md, "**bold** after\n", 15);
    const struct markdown_line *lb = markdown_line(md, 1001);
    TAP_OK(markdown_count(md) == 1002 && markdown_line(md, 1000) == NULL && lb &&
               lb->wl.len == 10 && memcmp(lb->wl.text, "bold after", 10) == 0,
           "after a release past the end, new lines still come");
    markdown_free(md); /* frees only what is left (ASan: no double free) */

    md = markdown_new(THEME_ASSISTANT);
    markdown_finish(md);
    TAP_INT(markdown_count(md), 0, "empty input: no lines");
    markdown_feed(md, "x\n", 2);
    TAP_INT(markdown_count(md), 0, "feed after finish is ignored");
    markdown_free(md);
    free(whole);
}

/* Lines built to make a naive parser rescan (quadratic): each must stay fast. The bound is
 * generous (sanitizer builds are slow); a quadratic parser needs tens of seconds here. */
static void test_hostile(void)
{
    static const char *const units[] = {"[", "a* ", "[a](", "_a", "` ``", "**a* ", "<http://"};
    for (size_t u = 0; u < TT_ARRAY_LEN(units); u++) {
        struct buf b = BUF_INIT;
        while (b.len < 200000)
            buf_appends(&b, units[u]);
        double t0 = util_now();
        struct markdown *md = markdown_new(THEME_ASSISTANT);
        markdown_feed(md, b.data, b.len);
        markdown_finish(md);
        double dt = util_now() - t0;
        TAP_OK(markdown_count(md) == 1 && dt < 3.0, "200 KB line of '%s' styled in %.3f s",
               units[u], dt);
        markdown_free(md);
        buf_free(&b);
    }
    /* many openers of one kind, then many closers of another that match none of them */
    struct buf b = BUF_INIT;
    while (b.len < 100000)
        buf_appends(&b, "*a ");
    while (b.len < 200000)
        buf_appends(&b, "b_ ");
    double t0 = util_now();
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, b.data, b.len);
    markdown_finish(md);
    double dt = util_now() - t0;
    TAP_OK(markdown_count(md) == 1 && dt < 3.0,
           "33k '*' openers then 33k unmatched '_' closers styled in %.3f s", dt);
    markdown_free(md);
    buf_free(&b);
}

/* Wrapping markdown output: code rows hard-wrapped, list rows hang under the text. */
static void test_with_wrap(void)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    const char *s = "- a list item that wraps\n```\n0123456789abcdef\n```\n";
    markdown_feed(md, s, strlen(s));
    markdown_finish(md);
    struct wrap_doc *d = wrap_doc_new(10);
    for (size_t i = 0; i < markdown_count(md); i++)
        wrap_doc_push(d, &markdown_line(md, i)->wl);
    struct wrap_view v;
    wrap_doc_row(d, 1, &v);
    TAP_INT(v.indent, 2, "list continuation row hangs under the item text");
    TAP_INT(v.tag & 0xFF, MARKDOWN_LIST, "row tag gives the markdown kind");
    size_t rows = wrap_doc_rows(d);
    wrap_doc_row(d, rows - 1, &v);
    TAP_OK(v.len == 6 && memcmp(v.text, "abcdef", 6) == 0, "code line hard-wrapped at 10");
    wrap_doc_free(d);
    markdown_free(md);
}

static uint32_t xorshift(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* The scanners that jump over plain text give what stepping byte by byte gives, on random
 * Markdown dense in every byte they look for (and UTF-8, CJK, tabs around them). */
static void test_fast_scan(void)
{
    static const char *const units[] = {
        "a", "the ", "h", "http://x.y/z ", "https://a.b(c) ", "<https://q.r>", "*", "**", "_",
        "__", "`", "``", "` `", "[", "]", "(", ")", "[a](b)", "![i](u \"t\")", "\\", "\\*",
        "\\`", "!", "<", ">", " ", "  ", "\t", "\n", "\n\n", "# ", "- ", "1. ", "> ", "|",
        "中文", "é", "日本語", "e\xcc\x81", "\xff", "~", "#", "snake_case", "2 * 3"};
    uint32_t seed = 14;
    int bad = 0;
    for (int round = 0; round < 400 && !bad; round++) {
        struct buf b = BUF_INIT;
        size_t k = 1 + (size_t)(xorshift(&seed) % 120);
        for (size_t j = 0; j < k; j++)
            buf_appends(&b, units[xorshift(&seed) % TT_ARRAY_LEN(units)]);
        markdown_bytewise = 1;
        char *want = render(b.data, b.len);
        markdown_bytewise = 0;
        char *got = render(b.data, b.len);
        if (strcmp(got, want) != 0) {
            bad = 1;
            printf("# input: %s\n", b.data);
            TAP_STR(got, want, "fast scan differs from the byte-by-byte scan");
        }
        free(want);
        free(got);
        buf_free(&b);
    }
    TAP_OK(!bad, "run-skipping inline scan = byte-by-byte scan on 400 random lines");
}

/* markdown_restart: a new styler taking over at the place it names gives the lines the one
 * styler would, wherever the old one stood (every place it may name is tried: each min_lines,
 * from several starting points); places inside fences, lists, tables or after a line that is
 * not blank are never named. */
static const char restart_doc[] =
    "# Title\n"
    "\n"
    "Para with **bold** and `code`.\n"
    "\n"
    "- item one\n"
    "\n"
    "  continued after a blank line\n"
    "    - nested\n"
    "\n"
    "- item two at column 0\n"
    "  1. numbered\n"
    "\n"
    "Text at column 0 ends the list.\n"
    "\n"
    "```python\n"
    "s = \"\"\"a string\n"
    "\n"
    "column 0 inside the fence, after a blank line\n"
    "\"\"\"\n"
    "\n"
    "x = 1\n"
    "```\n"
    "\n"
    "~~~~\n"
    "\n"
    "~~~ not closing (shorter)\n"
    "\n"
    "still code\n"
    "~~~~~\n"
    "\n"
    "| a | b |\n"
    "|---|---|\n"
    "| 1 | 2 |\n"
    "\n"
    "| c | d |\n"
    "|---|---|\n"
    "```| a row, not a fence |\n"
    "\n"
    "after the table\r\n"
    "\t\n"
    "> quote\n"
    "> > deeper\n"
    "\n"
    "\t- tab-indented item\n"
    "\n"
    "  ```\n"
    "  indented fence\n"
    "\n"
    "  still inside\n"
    "  ```\n"
    "\n"
    "`inline` at the start\n"
    "\n"
    "---\n"
    "\n"
    "1. one\n"
    "2. two\n"
    "\n"
    "Last paragraph \xE4\xB8\xAD\xE6\x96\x87\n"
    "\n"
    "## end\n"
    "tail without newline";

static void test_restart(void)
{
    const char *src = restart_doc;
    size_t n = strlen(src);
    char *want = render(src, n);
    int tried = 0, bad = 0, pending = 0;
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += src[i] == '\n';
    static const size_t starts[] = {0, 1, 9, 40, 150, 260, 400};
    for (size_t si = 0; si < sizeof(starts) / sizeof(starts[0]); si++) {
        size_t c = starts[si];
        size_t last = SIZE_MAX;
        for (size_t k = 0; k <= lines; k++) {
            struct markdown *a = markdown_new(THEME_ASSISTANT);
            markdown_feed(a, src, c);
            size_t at = markdown_restart(a, src + c, n - c, k, 1 << 20);
            if (at == 0 || at == last) {
                markdown_free(a);
                continue;
            }
            last = at;
            tried++;
            markdown_feed(a, src + c, at);
            pending += markdown_pending_count(a) != 0;
            struct markdown *b = markdown_new(THEME_ASSISTANT);
            markdown_feed(b, src + c + at, n - c - at);
            markdown_finish(b);
            char *da = dump_all(a), *db = dump_all(b);
            struct buf got = BUF_INIT;
            buf_appends(&got, da);
            buf_appends(&got, db);
            if (strcmp(buf_str(&got), want) != 0) {
                if (!bad)
                    printf("# restart at %zu (from %zu) differs:\n%s", c + at, c, buf_str(&got));
                bad++;
            }
            buf_free(&got);
            free(da);
            free(db);
            markdown_free(a);
            markdown_free(b);
        }
    }
    TAP_OK(tried >= 20, "restart: %d places tried", tried);
    TAP_INT(bad, 0, "restart: a new styler there gives the same lines");
    TAP_INT(pending, 0, "restart: the old styler holds nothing unfinished there");
    /* never inside a fence, a list's continuation, or after a line that is not blank */
    static const char *const never[] = {"column 0 inside", "still code", "still inside",
                                        "continued after", "  1. numbered", "| 1 | 2 |"};
    int found = 0;
    for (size_t k = 0; k <= lines; k++) {
        struct markdown *a = markdown_new(THEME_ASSISTANT);
        size_t at = markdown_restart(a, src, n, k, 1 << 20);
        for (size_t j = 0; j < sizeof(never) / sizeof(never[0]); j++)
            found += at && strncmp(src + at, never[j], strlen(never[j])) == 0;
        markdown_free(a);
    }
    TAP_INT(found, 0, "restart: no place inside a block");
    /* min_lines finished lines after the place, and a long line before it stops the scan */
    struct markdown *a = markdown_new(THEME_ASSISTANT);
    const char *three = "a\n\nb\n\nc\n\nd\n";
    TAP_INT(markdown_restart(a, three, strlen(three), 2, 100), 6, "restart: 2 lines after it");
    TAP_INT(markdown_restart(a, three, strlen(three), 3, 100), 6, "restart: 3 lines after it");
    TAP_INT(markdown_restart(a, three, strlen(three), 4, 100), 3, "restart: 4 lines after it");
    TAP_INT(markdown_restart(a, three, strlen(three), 9, 100), 0, "restart: too few lines");
    TAP_INT(markdown_restart(a, "aaaaaaaa\n\nb\n\nc\n", 15, 1, 4), 0,
            "restart: a line over max_line before it");
    markdown_feed(a, "```", 3); /* md's own line could become a fence */
    TAP_INT(markdown_restart(a, "\n\nb\n\nc\n\nd\n", 11, 1, 100), 0,
            "restart: not after an unfinished line that may open a fence");
    markdown_free(a);
    free(want);
}

/* wrap_doc_splice: the finished lines [0, k) in one document and the rest (finished and
 * pending) in another, joined, read row for row like one document that got them all, at the
 * width they were made at and after a resize; tables, rules and code among them. */
static void test_splice(void)
{
    const char *src = restart_doc;
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    markdown_feed(md, src, strlen(src) - 4); /* "tail without newl": a pending line */
    size_t n = markdown_count(md), np = markdown_pending_count(md);
    int bad = 0, badw = 0;
    for (size_t k = 0; k <= n; k++) {
        int w = 14 + (int)(k % 3) * 9;
        struct wrap_doc *one = wrap_doc_new(w), *a = wrap_doc_new(w), *b = wrap_doc_new(w);
        for (size_t i = 0; i < n; i++) {
            wrap_doc_push(one, &markdown_line(md, i)->wl);
            wrap_doc_push(i < k ? a : b, &markdown_line(md, i)->wl);
        }
        for (size_t i = 0; i < np; i++) {
            wrap_doc_pending_add(one, &markdown_pending_line(md, i)->wl);
            wrap_doc_pending_add(b, &markdown_pending_line(md, i)->wl);
            if (k % 2)
                wrap_doc_pending_add(a, &markdown_pending_line(md, i)->wl); /* dropped */
        }
        wrap_doc_set_width(b, k % 4 == 3 ? w + 5 : w); /* src at another width: rewrapped */
        wrap_doc_splice(a, b);
        char *x = doc_dump(one), *y = doc_dump(a);
        bad += strcmp(x, y) != 0 || wrap_doc_rows(b) != 0 || wrap_doc_lines(a) != n;
        free(x);
        free(y);
        wrap_doc_set_width(one, w + 11);
        wrap_doc_set_width(a, w + 11);
        x = doc_dump(one);
        y = doc_dump(a);
        badw += strcmp(x, y) != 0;
        free(x);
        free(y);
        wrap_doc_free(one);
        wrap_doc_free(a);
        wrap_doc_free(b);
    }
    TAP_OK(bad == 0, "splice: two documents joined read like one (%zu places, %d differ)", n + 1, bad);
    TAP_INT(badw, 0, "splice: and after a resize");
    markdown_free(md);
}

/* markdown_open_fence: the fence a Markdown reader still has open at the end of a text, as
 * CommonMark decides it (indent of 3 spaces at most, a closer at least as long, of the same
 * character, with nothing after it). */
static void test_open_fence(void)
{
    static const struct {
        const char *text;
        size_t len;
        char ch;
    } cases[] = {
        {"plain text\nno fence", 0, 0},
        {"```python\nprint(1)", 3, '`'},
        {"```python\nprint(1)\n```", 0, 0},
        {"```python\nprint(1)\n```\n", 0, 0},
        {"~~~~\ncode\n~~~\nstill code", 4, '~'},     /* a closer shorter than the opener */
        {"~~~~\ncode\n~~~~~  \nafter", 0, 0},         /* longer, then blanks: closes */
        {"```\ncode\n~~~\n", 3, '`'},                 /* the other character */
        {"```\ncode\n``` x\n", 3, '`'},               /* text after it: not a closer */
        {"   ```\ncode", 3, '`'},                      /* 3 spaces: a fence */
        {"    ```\ncode", 0, 0},                       /* 4: indented code, no fence */
        {"\t```\ncode", 0, 0},
        {"Here is code: ```python", 0, 0},              /* not at the line's start */
        {"``` a`b\ncode", 0, 0},                       /* a backtick in the info string */
        {"~~~ a`b\ncode", 3, '~'},
        {"``\ncode", 0, 0},
        {"```\r\ncode\r\n```\r\n", 0, 0},           /* CRLF */
        {"```\n````\nx", 0, 0},                        /* closed by the longer run */
        {"a\n```\nb\n```\n````c\nd", 4, '`'},        /* a second block left open */
        {"", 0, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ch = 0;
        size_t n = markdown_open_fence(cases[i].text, strlen(cases[i].text), &ch);
        if (n != cases[i].len || (n && ch != cases[i].ch)) {
            printf("# open fence of case %zu: %zu '%c', want %zu '%c'\n", i, n, ch ? ch : ' ',
                   cases[i].len, cases[i].ch ? cases[i].ch : ' ');
            bad++;
        }
    }
    TAP_INT(bad, 0, "open fence: what a Markdown reader still has open at the end");
}

int main(void)
{
    test_open_fence();
    test_inline();
    test_blocks();
    test_strike_tasks();
    test_tables();
    test_pending();
    test_chunking();
    test_with_wrap();
    test_fast_scan();
    test_hostile();
    test_restart();
    test_splice();
    return tap_done();
}
