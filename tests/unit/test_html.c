/* test_html.c - HTML to readable text (text/html.c through libxml2): structure kept
 * (headings, paragraphs, lists, links, pre as fenced blocks, tables), noise dropped (script,
 * style, nav, hidden), and hostile pages: deep nesting, huge text, invalid UTF-8, entities,
 * control bytes, the output limit. */
#include "config.h"
#include "text/html.h"
#include "tap.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

static char *text_of(const char *html)
{
    struct buf b = BUF_INIT;
    const char *why = NULL;
    if (html_to_text(html, strlen(html), NULL, 0, &b, &why) < 0)
        return xasprintf("ERROR %s", why ? why : "?");
    char *s = xasprintf("%s", buf_str(&b));
    buf_free(&b);
    return s;
}

#define CASE(html, want, name)                                                                  \
    do {                                                                                         \
        char *got_ = text_of(html);                                                              \
        TAP_STR(got_, want, name);                                                               \
        free(got_);                                                                              \
    } while (0)

/* 1 when s holds no control byte but TAB and LF, and is valid UTF-8. */
static int clean(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
            return 0;
    }
    return utf8_valid(s, n);
}

int main(void)
{
    CASE("<html><head><title>A  page</title><style>p{}</style></head><body>"
         "<h1>Main</h1><p>One\n two</p><p>Three</p></body></html>",
         "Title: A page\n\n# Main\n\nOne two\n\nThree", "title, heading, paragraphs");
    CASE("<body><script>alert('x')</script><nav><a href=/a>Home</a></nav>"
         "<noscript>js!</noscript><p>kept</p><div hidden>no</div><span aria-hidden=true>no"
         "</span><p style='display: none'>no</p><footer>(c)</footer><aside>ad</aside></body>",
         "kept", "script, style, nav, hidden, footer, aside dropped");
    CASE("<ul><li>a</li><li>b<ul><li>c</li></ul></li></ul><ol start=3><li>x<li>y</ol>",
         "- a\n- b\n  - c\n\n3. x\n4. y", "lists: nested, numbered from start");
    CASE("<p>See <a href='https://x.org/a'>the docs</a> and <a href='https://y.org'>"
         "https://y.org</a> <a href='#top'>top</a> <a href='javascript:go()'>js</a>.</p>",
         "See [the docs](https://x.org/a) and https://y.org top js.", "links");
    CASE("<pre class='language-python'>def f():\n    return `x`\n</pre><p>after</p>",
         "```python\ndef f():\n    return `x`\n```\n\nafter", "pre as a fenced block");
    CASE("<pre><code class='lang-c'>a ``` b</code></pre>", "````c\na ``` b\n````",
         "a fence longer than the backticks inside");
    CASE("<p>call <code>f(x)</code> now<code></code></p>", "call `f(x)` now", "inline code");
    CASE("<table><tr><th>Name</th><th>Size</th></tr><tr><td>a <p>b</p></td><td>1</td></tr>"
         "</table>",
         "| Name | Size |\n|---|---|\n| a b | 1 |", "tables as rows");
    CASE("<blockquote><p>quoted</p><p>two</p></blockquote>", "> quoted\n>\n> two",
         "block quotes");
    CASE("<p>&lt;tag&gt; &amp; &eacute;&#233;&#x1F600; &nbsp;x</p>",
         "<tag> & \xc3\xa9\xc3\xa9\xf0\x9f\x98\x80 \xc2\xa0x", "entities decoded");
    CASE("<p>a<br>b<br/>c</p><hr><p>d</p>", "a\nb\nc\n\n---\n\nd", "br and hr");
    CASE("<img src=x alt='a cat'> <img src=y>", "[image: a cat]", "image alt text");
    CASE("", "", "empty input");
    CASE("just text", "just text", "text without tags");
    CASE("<p>a\x01\x1b[31mb\x7f</p>", "a[31mb", "control bytes dropped");

    /* Invalid UTF-8: valid text comes out, nothing dropped silently around it. */
    {
        const char *bad = "<p>ok \xff\xfe bytes \xc3</p>";
        char *got = text_of(bad);
        TAP_OK(clean(got, strlen(got)) && strstr(got, "ok") && strstr(got, "bytes"),
               "invalid UTF-8: valid text out (%s)", got);
        free(got);
    }
    /* Deep nesting: 100,000 levels of div and of blockquote, bounded prefix, no crash. */
    {
        const char *tags[] = {"<div>", "<blockquote>", "<ul><li>", "<table><tr><td>", "<pre>",
                              "<a href=u>"};
        for (size_t t = 0; t < sizeof tags / sizeof *tags; t++) {
            struct buf in = BUF_INIT;
            for (int i = 0; i < 100000; i++)
                buf_appends(&in, tags[t]);
            buf_appends(&in, "deep\nline");
            char *got = text_of(buf_str(&in));
            size_t longest = 0, cur = 0;
            for (const char *p = got; *p; p++) {
                cur = *p == '\n' ? 0 : cur + 1;
                if (cur > longest)
                    longest = cur;
            }
            TAP_OK(strstr(got, "deep") && longest < 100, "deep %s: text kept, lines short (%zu)",
                   tags[t], longest);
            free(got);
            buf_free(&in);
        }
    }
    /* Huge: 8 MB of paragraphs, cut at the limit with the cut said. */
    {
        struct buf in = BUF_INIT;
        while (in.len < 8u << 20)
            buf_appends(&in, "<p>lorem ipsum dolor sit amet</p>\n");
        struct buf out = BUF_INIT;
        const char *why = NULL;
        int rc = html_to_text(in.data, in.len, NULL, 100000, &out, &why);
        TAP_INT(rc, 1, "huge page: cut at the limit");
        TAP_OK(out.len <= 100000 && out.len > 90000, "huge page: %zu bytes of text", out.len);
        buf_free(&out);
        rc = html_to_text(in.data, in.len, NULL, 0, &out, &why);
        TAP_INT(rc, 0, "huge page: whole without a limit");
        TAP_OK(out.len > 5000000 && clean(out.data, out.len), "huge page: %zu bytes", out.len);
        buf_free(&out);
        buf_free(&in);
    }
    /* The limit never splits a UTF-8 sequence. */
    {
        struct buf out = BUF_INIT;
        const char *why = NULL;
        const char *s = "<p>\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9</p>";
        TAP_INT(html_to_text(s, strlen(s), NULL, 5, &out, &why), 1, "limit inside text");
        TAP_STR(buf_str(&out), "\xc3\xa9\xc3\xa9", "limit: whole characters only");
        buf_free(&out);
    }
    /* A declared charset: Latin-1 bytes come out as UTF-8. */
    {
        struct buf out = BUF_INIT;
        const char *why = NULL;
        const char *s = "<p>caf\xe9</p>";
        html_to_text(s, strlen(s), "ISO-8859-1", 0, &out, &why);
        TAP_STR(buf_str(&out), "caf\xc3\xa9", "charset from the Content-Type");
        buf_free(&out);
    }
    /* Appends to what out already holds. */
    {
        struct buf out = BUF_INIT;
        const char *why = NULL;
        buf_appends(&out, "before\n");
        html_to_text("<p>x</p>", 8, NULL, 0, &out, &why);
        TAP_STR(buf_str(&out), "before\nx", "appends to out");
        buf_free(&out);
    }
    return tap_done();
}
