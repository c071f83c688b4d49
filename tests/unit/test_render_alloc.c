/* test_render_alloc.c - what styling and wrapping a streamed answer costs the allocator: the
 * chat's path (markdown_feed, each finished line pushed into a wrap_doc, then released, as
 * tui_view.c does) reuses its buffers from line to line, so a long answer makes a few
 * allocations per block of text, not several per line (issue 14: the chat's CPU on Markdown;
 * malloc and free were ~15 % of it).
 *
 * malloc, calloc and realloc are counted by alloccount.h. Under AddressSanitizer the
 * sanitizer owns them: the test says so and skips. */
#include "config.h"
#include "tap.h"
#include "alloccount.h"
#include "memprobe.h"
#include "base/buf.h"
#include "text/markdown.h"
#include "text/wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Markdown like an answer's: headings, paragraphs with **bold**, `code`, CJK and a [link](u),
 * list items. */
static void answer(struct buf *b, int lines)
{
    static const char *const words[] = {"the", "parser", "returns", "a", "value", "**when",
                                        "each**", "`buf_len`", "row", "中文字符", "is",
                                        "read", "from", "缓冲区长度", "`x->next`", "and"};
    unsigned r = 14;
    for (int i = 0; i < lines; i++) {
        if (i % 20 == 0)
            buf_printf(b, "## Section %d 解析器\n", i / 20);
        else if (i % 20 >= 15)
            buf_appends(b, "- ");
        int n = 12 + i % 40;
        for (int k = 0; k < n; k++) {
            r = r * 1103515245u + 12345u;
            buf_printf(b, "%s%s", k ? " " : "", words[(r >> 16) % 16]);
        }
        if (i % 7 == 0)
            buf_appends(b, " see [the docs](https://example.com/d)");
        buf_appends(b, i % 20 == 14 ? ".\n\n" : ".\n");
    }
}

/* Feeds src in chunks of 64 bytes, pushes each finished line into the document and releases
 * it, and looks at the pending line every 16 chunks (a frame). */
static void stream(struct markdown *md, struct wrap_doc *d, size_t *done, const char *src,
                   size_t n)
{
    for (size_t at = 0, k = 0; at < n; at += 64, k++) {
        markdown_feed(md, src + at, n - at < 64 ? n - at : 64);
        while (*done < markdown_count(md))
            wrap_doc_push(d, &markdown_line(md, (*done)++)->wl);
        markdown_release(md, *done);
        if (k % 16 == 0) {
            wrap_doc_pending_clear(d);
            for (size_t i = 0; i < markdown_pending_count(md); i++)
                wrap_doc_pending_add(d, &markdown_pending_line(md, i)->wl);
        }
    }
}

static void test_per_line(void)
{
    struct buf warm = BUF_INIT, body = BUF_INIT;
    answer(&warm, 200);
    answer(&body, 4000);
    struct markdown *md = markdown_new(THEME_ASSISTANT);
    struct wrap_doc *d = wrap_doc_new(100);
    size_t done = 0;
    stream(md, d, &done, warm.data, warm.len); /* buffers grown to their working size */
    size_t before = done;
    n_alloc = 0;
    stream(md, d, &done, body.data, body.len);
    long allocs = n_alloc;
    size_t lines = done - before;
    TAP_OK(lines > 4000, "the answer made %zu lines", lines);
    /* before: ~13 a line (the line's text and spans, the inline scanner's nodes, indexes and
     * emphasis links, each line anew); now the buffers are kept and the finished lines' text
     * goes into blocks: what is left is the document's own growth and the frames' previews
     * (a frame every 16 chunks: ~2,000 here, each a few allocations) */
    TAP_OK((double)allocs / (double)lines < 1.5, "%ld allocations for %zu lines (%.2f a line)",
           allocs, lines, (double)allocs / (double)lines);
    markdown_finish(md);
    while (done < markdown_count(md))
        wrap_doc_push(d, &markdown_line(md, done++)->wl);
    TAP_OK(wrap_doc_lines(d) == done, "every line reached the document");
    markdown_free(md);
    wrap_doc_free(d);
    buf_free(&warm);
    buf_free(&body);
}

int main(void)
{
    if (UNDER_ASAN) {
        printf("1..0 # SKIP the allocator is AddressSanitizer's\n");
        return 0;
    }
    test_per_line();
    return tap_done();
}
