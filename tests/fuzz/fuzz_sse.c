/* fuzz_sse.c - the SSE parser: any bytes, split anywhere, must give the same events.
 *
 * Each input is parsed three times - in one feed, one byte per feed, and in pieces whose sizes
 * come from the input itself - and the events (type, data, id, error field), the comment count
 * and the pending state must be identical. A fourth run with a 64-byte limit checks that the
 * limit holds memory down (the parser's line and data buffers never pass it) and that a parser
 * stopped by it reports why. */
#include "config.h"
#include "fuzz.h"
#include "proto/sse.h"

#include <string.h>

struct sse_log {
    struct buf out;
    size_t limit; /* max_event of the parser, 0 = default */
};

static int fuzz_sse_event(void *ud, const struct sse_event *ev)
{
    struct sse_log *log = ud;
    FUZZ_CHECK(ev->type && ev->data && ev->id);
    FUZZ_CHECK(!ev->error || ev->error[ev->error_len] == '\0');
    if (log->limit)
        FUZZ_CHECK(ev->data_len <= log->limit);
    buf_appends(&log->out, ev->type);
    buf_appendc(&log->out, '\0');
    buf_append(&log->out, ev->data, ev->data_len);
    buf_appendc(&log->out, '\0');
    buf_appends(&log->out, ev->id);
    buf_appendc(&log->out, '\0');
    if (ev->error) {
        buf_appendc(&log->out, 'E');
        buf_append(&log->out, ev->error, ev->error_len);
    }
    buf_appendc(&log->out, '\n');
    return 0;
}

/* Parse data in pieces of the sizes step() returns; the log gets the events, then a summary. */
static void fuzz_sse_run(const uint8_t *data, size_t size, int mode, size_t limit,
                         struct sse_log *log)
{
    struct sse_parser p;
    sse_init(&p, limit);
    log->limit = limit;
    size_t off = 0, k = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        size_t n = size - off;
        if (mode == 1)
            n = 1;
        else if (mode == 2)
            n = 1 + (size_t)(data[k++ % size] % 13);
        if (n > size - off)
            n = size - off;
        rc = sse_feed(&p, (const char *)data + off, n, fuzz_sse_event, log);
        off += n;
        if (limit) {
            FUZZ_CHECK(p.line.len <= limit);
            FUZZ_CHECK(p.data.len <= limit);
            FUZZ_CHECK(p.error.len <= limit);
        }
    }
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0)
        FUZZ_CHECK(p.errmsg && *p.errmsg);
    buf_printf(&log->out, "rc=%d comments=%lu events=%lu pending=%d retry=%ld", rc, p.comments,
               p.events, rc == 0 ? sse_pending(&p) : -1, p.retry_ms);
    sse_free(&p);
}

FUZZ_ENTRY(sse)
{
    struct sse_log whole = {BUF_INIT, 0}, bytes = {BUF_INIT, 0}, pieces = {BUF_INIT, 0};
    fuzz_sse_run(data, size, 0, 0, &whole);
    fuzz_sse_run(data, size, 1, 0, &bytes);
    fuzz_sse_run(data, size, 2, 0, &pieces);
    FUZZ_CHECK(whole.out.len == bytes.out.len &&
               memcmp(whole.out.data, bytes.out.data, whole.out.len) == 0);
    FUZZ_CHECK(whole.out.len == pieces.out.len &&
               memcmp(whole.out.data, pieces.out.data, whole.out.len) == 0);
    buf_free(&whole.out);
    buf_free(&bytes.out);
    buf_free(&pieces.out);

    struct sse_log small = {BUF_INIT, 0};
    fuzz_sse_run(data, size, 2, 64, &small);
    buf_free(&small.out);
    return 0;
}
