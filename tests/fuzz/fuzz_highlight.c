/* fuzz_highlight.c - the code highlighter (highlight.c) and its use by markdown.c.
 *
 * The first input byte picks a language (every row of the table, by index), the rest is code.
 * Invariants on any bytes:
 *   - each line's spans are sorted, non-empty, in known slots, cover the line exactly and
 *     start and end only at ASCII bytes or the line's ends (no cut UTF-8 sequence);
 *   - the state a line leaves is well formed (its close string within bounds);
 *   - highlighting is a function of the lines: the same lines give the same spans twice;
 *   - the same code inside a fence of that language, fed to the Markdown styler whole and in
 *     input-chosen pieces (previews asked for in between), gives identical finished lines,
 *     each covered by its spans. */
#include "config.h"
#include "fuzz.h"
#include "base/buf.h"
#include "text/highlight.h"
#include "text/markdown.h"

#include <string.h>

static void fuzz_hl_lines(const struct hl *h, const char *s, size_t n, struct buf *out)
{
    struct hl_state st = HL_STATE_INIT;
    struct hl_spans o = {NULL, 0, 0};
    size_t at = 0;
    while (at <= n) {
        const char *e = at < n ? memchr(s + at, '\n', n - at) : NULL;
        size_t len = e ? (size_t)(e - (s + at)) : n - at;
        const char *l = s + at;
        hl_line(h, &st, l, len, &o);
        FUZZ_CHECK(st.nclose <= sizeof(st.close));
        size_t cov = 0;
        for (size_t i = 0; i < o.n; i++) {
            FUZZ_CHECK(o.v[i].off == cov);
            FUZZ_CHECK(o.v[i].len > 0);
            FUZZ_CHECK(o.v[i].slot < THEME_SLOT_COUNT);
            if (cov > 0)
                FUZZ_CHECK((unsigned char)l[cov] < 0x80 || (unsigned char)l[cov - 1] < 0x80);
            cov += o.v[i].len;
            buf_printf(out, "%u,%u,%u;", o.v[i].off, o.v[i].len, o.v[i].slot);
        }
        FUZZ_CHECK(cov == len);
        buf_appendc(out, '\n');
        if (!e)
            break;
        at += len + 1;
    }
    hl_spans_free(&o);
}

static void fuzz_hl_md(const char *doc, size_t n, const uint8_t *cuts, size_t ncuts,
                       struct buf *out)
{
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    size_t off = 0, k = 0;
    while (off < n) {
        size_t step = ncuts ? (size_t)(1 + cuts[k++ % ncuts] % 37) : n - off;
        if (step > n - off)
            step = n - off;
        markdown_feed(md, doc + off, step);
        off += step;
        if (ncuts) {
            size_t np = markdown_pending_count(md);
            for (size_t i = 0; i < np; i++)
                FUZZ_CHECK(markdown_pending_line(md, i) != NULL);
        }
    }
    markdown_finish(md);
    for (size_t i = 0; i < markdown_count(md); i++) {
        const struct markdown_line *l = markdown_line(md, i);
        uint32_t at = 0;
        for (size_t s = 0; s < l->wl.nspans; s++) {
            FUZZ_CHECK(l->wl.spans[s].off == at);
            at += l->wl.spans[s].len;
            buf_printf(out, "%u,%u;", l->wl.spans[s].len, l->wl.spans[s].slot);
        }
        FUZZ_CHECK(at == l->wl.len);
        buf_append(out, l->wl.text, l->wl.len);
        buf_appendc(out, '\n');
    }
    markdown_free(md);
}

FUZZ_ENTRY(highlight)
{
    if (size == 0)
        return 0;
    const struct hl_lang *lang = hl_lang_at(data[0] % hl_lang_count());
    const char *code = (const char *)data + 1;
    size_t n = size - 1;
    struct hl *h = hl_new(lang);
    struct buf a = BUF_INIT, b = BUF_INIT;
    fuzz_hl_lines(h, code, n, &a);
    fuzz_hl_lines(h, code, n, &b);
    FUZZ_CHECK(a.len == b.len && memcmp(buf_str(&a), buf_str(&b), a.len) == 0);
    hl_free(h);
    /* the same code in a fence: no line of it may close the fence, so indent it by 4 */
    struct buf doc = BUF_INIT, m1 = BUF_INIT, m2 = BUF_INIT;
    buf_printf(&doc, "````%s\n    ", hl_lang_name(lang));
    for (size_t i = 0; i < n; i++) {
        buf_appendc(&doc, code[i]);
        if (code[i] == '\n')
            buf_appends(&doc, "    ");
    }
    fuzz_hl_md(buf_str(&doc), doc.len, NULL, 0, &m1);
    fuzz_hl_md(buf_str(&doc), doc.len, data, size, &m2);
    FUZZ_CHECK(m1.len == m2.len && memcmp(buf_str(&m1), buf_str(&m2), m1.len) == 0);
    buf_free(&a);
    buf_free(&b);
    buf_free(&doc);
    buf_free(&m1);
    buf_free(&m2);
    return 0;
}
