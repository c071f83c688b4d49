/* wrapdump.h - a wrap_doc's rows as text, to compare two documents (test_wrap, test_markdown). */
#ifndef TT_WRAPDUMP_H
#define TT_WRAPDUMP_H
#include "base/buf.h"
#include "text/wrap.h"

/* Every row: line, width, indent, first, tag, flags, its text and its spans. */
static char *doc_dump(const struct wrap_doc *d)
{
    struct buf b = BUF_INIT;
    struct wrap_view v;
    for (size_t i = 0; wrap_doc_row(d, i, &v) == 0; i++) {
        buf_printf(&b, "%zu:%d:%d:%d:%u:%u:", v.line, v.width, v.indent, v.first, v.tag, v.flags);
        buf_append(&b, v.text, v.len);
        for (size_t k = 0; k < v.nspans; k++)
            buf_printf(&b, "[%u+%u s%u a%u]", v.spans[k].off, v.spans[k].len, v.spans[k].slot,
                       v.spans[k].attrs);
        buf_appendc(&b, '\n');
    }
    return buf_take(&b);
}

#endif
