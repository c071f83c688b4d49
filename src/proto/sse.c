/* sse.c - incremental text/event-stream parser.
 *
 * Lines end with LF, CR or CRLF (a CRLF may be split across feeds). One leading UTF-8 BOM is
 * skipped. A line starting with ':' is a comment; "field: value" strips one space after the
 * colon; a line with no colon is a field with an empty value. `data` lines are joined with LF;
 * a blank line dispatches the event (nothing is dispatched when no data field was seen, unless
 * the non-standard `error` field was). An unterminated last event is never dispatched. */
#include "config.h"
#include "proto/sse.h"

#include <string.h>

#define SSE_DEFAULT_MAX ((size_t)64 << 20)

void sse_init(struct sse_parser *p, size_t max_event)
{
    memset(p, 0, sizeof *p);
    p->max_event = max_event ? max_event : SSE_DEFAULT_MAX;
    p->retry_ms = -1;
}

void sse_free(struct sse_parser *p)
{
    buf_free(&p->line);
    buf_free(&p->data);
    buf_free(&p->type);
    buf_free(&p->id);
    buf_free(&p->error);
}

int sse_pending(const struct sse_parser *p)
{
    return p->line.len > 0 || p->data.len > 0 || p->has_error_field;
}

int sse_idle(const struct sse_parser *p)
{
    return p->bom_checked && !p->after_cr && !p->line.len && !p->data.len && !p->type.len &&
           !p->has_error_field;
}

void sse_skipped(struct sse_parser *p, unsigned long n)
{
    p->events += n;
}

static void sse_reset_event(struct sse_parser *p)
{
    buf_reset(&p->data);
    buf_reset(&p->type);
    buf_reset(&p->error);
    p->has_error_field = 0;
}

/* Hand the event being built, with data[0..len), to fn; then start the next one. */
static int sse_emit(struct sse_parser *p, const char *data, size_t len, sse_event_fn fn,
                    void *ud)
{
    struct sse_event ev;
    ev.type = p->type.len ? buf_str(&p->type) : "message";
    ev.data = data;
    ev.data_len = len;
    ev.id = buf_str(&p->id);
    ev.error = p->has_error_field ? buf_str(&p->error) : NULL;
    ev.error_len = p->error.len;
    p->events++;
    int rc = fn(ud, &ev);
    sse_reset_event(p);
    return rc;
}

static int sse_dispatch(struct sse_parser *p, sse_event_fn fn, void *ud)
{
    if (p->data.len == 0 && !p->has_error_field) {
        sse_reset_event(p);
        return 0;
    }
    if (p->data.len > 0)
        p->data.data[--p->data.len] = '\0'; /* drop the LF after the last data line */
    return sse_emit(p, buf_str(&p->data), p->data.len, fn, ud);
}

/* The usual event, one `data:` line then a blank line, both whole in the bytes being fed and
 * ended by LF alone: dispatched from those bytes, without copying the data. */
static int sse_dispatch_line(struct sse_parser *p, const char *s, size_t n, sse_event_fn fn,
                             void *ud)
{
    const char *v = s + 5;
    if (v < s + n && *v == ' ')
        v++;
    size_t vlen = (size_t)(s + n - v);
    if (vlen + 1 > p->max_event) {
        p->errmsg = "event data larger than the limit";
        return -1;
    }
    return sse_emit(p, v, vlen, fn, ud);
}

static int sse_field_is(const char *f, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n == k && memcmp(f, name, k) == 0;
}

/* Process one complete line (without its end-of-line bytes). */
static int sse_line(struct sse_parser *p, const char *s, size_t n, sse_event_fn fn, void *ud)
{
    if (n == 0)
        return sse_dispatch(p, fn, ud);
    if (s[0] == ':') {
        p->comments++;
        return 0;
    }
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    if (sse_field_is(s, flen, "data")) {
        if (p->data.len + vlen + 1 > p->max_event) {
            p->errmsg = "event data larger than the limit";
            return -1;
        }
        buf_append(&p->data, v, vlen);
        buf_appendc(&p->data, '\n');
    } else if (sse_field_is(s, flen, "event")) {
        buf_reset(&p->type);
        buf_append(&p->type, v, vlen);
    } else if (sse_field_is(s, flen, "id")) {
        if (!memchr(v, '\0', vlen)) {
            buf_reset(&p->id);
            buf_append(&p->id, v, vlen);
        }
    } else if (sse_field_is(s, flen, "retry")) {
        long ms = 0;
        size_t i;
        for (i = 0; i < vlen && v[i] >= '0' && v[i] <= '9' && ms < 100000000; i++)
            ms = ms * 10 + (v[i] - '0');
        if (vlen && i == vlen)
            p->retry_ms = ms;
    } else if (sse_field_is(s, flen, "error")) {
        /* Not in the standard: older llama.cpp servers report errors this way. Bounded like
         * data: endless error lines must not grow memory without limit. */
        if (p->error.len + vlen + 1 > p->max_event) {
            p->errmsg = "error field larger than the limit";
            return -1;
        }
        if (p->has_error_field)
            buf_appendc(&p->error, '\n');
        buf_append(&p->error, v, vlen);
        p->has_error_field = 1;
    }
    return 0;
}

/* Position of the first CR or LF in s[0..n), or n. */
/* Offset of the first line end (CR or LF) in s[0..n), or n. has_cr: 0 when the caller knows
 * s holds no CR (one scan for the whole read instead of one per line). */
static size_t sse_find_eol(const char *s, size_t n, int has_cr)
{
    const char *lf = memchr(s, '\n', n);
    size_t lim = lf ? (size_t)(lf - s) : n;
    const char *cr = has_cr ? memchr(s, '\r', lim) : NULL;
    return cr ? (size_t)(cr - s) : lim;
}

int sse_feed(struct sse_parser *p, const char *s, size_t n, sse_event_fn fn, void *ud)
{
    if (!p->bom_checked) {
        /* The BOM may itself arrive split: hold up to 2 bytes back until it can be decided. */
        static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
        size_t have = p->line.len;
        size_t take = n < 3 - have ? n : 3 - have;
        if (memcmp(p->line.data ? p->line.data : "", bom, have) == 0 &&
            memcmp(s, bom + have, take) == 0) {
            if (have + take < 3) {
                buf_append(&p->line, s, take);
                return 0;
            }
            buf_reset(&p->line);
            s += take;
            n -= take;
        } else if (have) {
            /* Not a BOM after all: the held bytes are ordinary line bytes. */
        }
        p->bom_checked = 1;
    }
    if (p->after_cr && n > 0) {
        p->after_cr = 0;
        if (s[0] == '\n') {
            s++;
            n--;
        }
    }
    int has_cr = n > 0 && memchr(s, '\r', n) != NULL;
    while (n > 0) {
        size_t eol = sse_find_eol(s, n, has_cr);
        if (eol == n) {
            if (p->line.len + n > p->max_event) {
                p->errmsg = "line longer than the limit";
                return -1;
            }
            buf_append(&p->line, s, n);
            return 0;
        }
        int rc;
        if (!p->line.len && eol + 1 < n && s[eol] == '\n' && s[eol + 1] == '\n' &&
            !p->data.len && !p->has_error_field && eol >= 5 && memcmp(s, "data:", 5) == 0) {
            rc = sse_dispatch_line(p, s, eol, fn, ud);
            s += eol + 2;
            n -= eol + 2;
            if (rc)
                return rc;
            continue;
        }
        if (p->line.len) {
            if (p->line.len + eol > p->max_event) {
                p->errmsg = "line longer than the limit";
                return -1;
            }
            buf_append(&p->line, s, eol);
            rc = sse_line(p, p->line.data, p->line.len, fn, ud);
            buf_reset(&p->line);
        } else {
            rc = sse_line(p, s, eol, fn, ud);
        }
        size_t skip = eol + 1;
        if (s[eol] == '\r') {
            if (eol + 1 < n) {
                if (s[eol + 1] == '\n')
                    skip++;
            } else {
                p->after_cr = 1;
            }
        }
        s += skip;
        n -= skip;
        if (rc)
            return rc;
    }
    return 0;
}
