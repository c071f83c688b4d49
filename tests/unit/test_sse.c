/* test_sse.c - the event-stream parser: WHATWG line rules, every fixture split at every byte. */
#include "config.h"
#include "base/buf.h"
#include "fixture.h"
#include "proto/sse.h"

/* Serialise events as "type|data|error;" so runs can be compared. */
static int collect(void *ud, const struct sse_event *ev)
{
    struct buf *b = ud;
    buf_printf(b, "%s|%.*s|%s;", ev->type, (int)ev->data_len, ev->data,
               ev->error ? ev->error : "-");
    return 0;
}

static char *parse_pieces(const char *s, size_t n, const size_t *cuts, size_t ncuts, int *pending)
{
    struct sse_parser p;
    struct buf out = BUF_INIT;
    sse_init(&p, 0);
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        sse_feed(&p, s + at, end - at, collect, &out);
        at = end;
    }
    if (pending)
        *pending = sse_pending(&p);
    sse_free(&p);
    return buf_take(&out);
}

static char *parse_whole(const char *s, int *pending)
{
    return parse_pieces(s, strlen(s), NULL, 0, pending);
}

static void expect(const char *in, const char *want, const char *name)
{
    char *got = parse_whole(in, NULL);
    TAP_STR(got, want, name);
    free(got);
}

static char *replace_lf(const char *s, size_t n, const char *eol)
{
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            buf_appends(&b, eol);
        else
            buf_appendc(&b, s[i]);
    }
    return buf_take(&b);
}

int main(void)
{
    /* Rules from the standard. */
    expect("data: a\n\n", "message|a|-;", "simple event");
    expect("data:a\n\n", "message|a|-;", "no space after colon");
    expect("data:  two\n\n", "message| two|-;", "only one leading space stripped");
    expect("data: 1\ndata: 2\n\n", "message|1\n2|-;", "multi-line data joined with LF");
    expect("data\n\n", "message||-;", "field without colon = empty value, still dispatched");
    expect("data:\n\n", "message||-;", "empty data dispatched");
    expect(": comment\n\n", "", "comment alone dispatches nothing");
    expect("event: ping\n\n", "", "no data field: nothing dispatched");
    expect("event: update\ndata: x\n\ndata: y\n\n", "update|x|-;message|y|-;",
           "event type applies to one event");
    expect("data: a\r\n\r\ndata: b\r\rdata: c\n\n", "message|a|-;message|b|-;message|c|-;",
           "CRLF, CR and LF line ends");
    expect("\xEF\xBB\xBF" "data: bom\n\n", "message|bom|-;", "leading BOM ignored");
    expect("\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\ndata: y\n\n", "message|y|-;",
           "only one BOM stripped (second makes an unknown field)");
    expect("foo: bar\ndata: z\n\n", "message|z|-;", "unknown field ignored");
    expect("error: {\"message\":\"boom\"}\n\n", "message||{\"message\":\"boom\"};",
           "non-standard error field dispatched");
    expect("data: {\"a\":1}\n\ndata: partial", "message|{\"a\":1}|-;",
           "unterminated last event discarded");
    int pending = 0;
    free(parse_whole("data: partial\n", &pending));
    TAP_OK(pending, "unfinished event is reported pending");
    free(parse_whole("data: done\n\n", &pending));
    TAP_OK(!pending, "finished stream has nothing pending");

    /* id and retry */
    {
        struct sse_parser p;
        struct buf out = BUF_INIT;
        sse_init(&p, 0);
        const char *s = "id: 42\nretry: 1500\nretry: x1\ndata: a\n\n";
        sse_feed(&p, s, strlen(s), collect, &out);
        TAP_STR(buf_str(&p.id), "42", "id kept");
        TAP_INT(p.retry_ms, 1500, "retry with digits only accepted");
        sse_free(&p);
        buf_free(&out);
    }
    /* Limit on line length: bounded memory, an error instead. */
    {
        struct sse_parser p;
        struct buf out = BUF_INIT;
        sse_init(&p, 1024);
        char big[700];
        memset(big, 'x', sizeof big);
        int r = 0;
        for (int i = 0; i < 3 && r == 0; i++)
            r = sse_feed(&p, big, sizeof big, collect, &out);
        TAP_INT(r, -1, "over-long line is an error");
        TAP_OK(p.errmsg != NULL, "error message set");
        TAP_OK(p.line.len <= 1024, "memory stays bounded");
        sse_free(&p);
        buf_free(&out);
    }
    /* Callback stop value propagates. */

    /* Every fixture, split at every byte offset, and in every line-ending style. */
    for (size_t f = 0; f < FIXTURE_COUNT; f++) {
        size_t n;
        char *s = fixture_read(fixture_names[f], &n);
        char *whole = parse_pieces(s, n, NULL, 0, NULL);
        TAP_OK(strlen(whole) > 0, "%s: has events", fixture_names[f]);
        size_t bad = (size_t)-1;
        for (size_t cut = 0; cut <= n && bad == (size_t)-1; cut++) {
            char *split = parse_pieces(s, n, &cut, 1, NULL);
            if (strcmp(split, whole) != 0)
                bad = cut;
            free(split);
        }
        if (!TAP_OK(bad == (size_t)-1, "%s: same events split at every offset", fixture_names[f]))
            printf("#   first differing split at byte %zu\n", bad);
        /* three-way splits at a stride, and one byte at a time */
        size_t cuts[2];
        bad = (size_t)-1;
        for (size_t a = 0; a < n && bad == (size_t)-1; a += 7)
            for (size_t b = a; b < n && bad == (size_t)-1; b += 13) {
                cuts[0] = a;
                cuts[1] = b;
                char *split = parse_pieces(s, n, cuts, 2, NULL);
                if (strcmp(split, whole) != 0)
                    bad = a * 100000 + b;
                free(split);
            }
        TAP_OK(bad == (size_t)-1, "%s: same events for three-way splits", fixture_names[f]);
        size_t *all = xmalloc(n * sizeof *all);
        for (size_t i = 0; i < n; i++)
            all[i] = i;
        char *bytes = parse_pieces(s, n, all, n, NULL);
        TAP_STR(bytes, whole, "one byte at a time");
        free(bytes);
        free(all);
        const char *eols[] = {"\r\n", "\r"};
        for (size_t e = 0; e < 2; e++) {
            char *conv = replace_lf(s, n, eols[e]);
            size_t cn = strlen(conv);
            char *got = parse_pieces(conv, cn, NULL, 0, NULL);
            TAP_STR(got, whole, e == 0 ? "CRLF version gives the same events"
                                       : "CR version gives the same events");
            free(got);
            bad = (size_t)-1;
            for (size_t cut = 0; cut <= cn && bad == (size_t)-1; cut++) {
                char *split = parse_pieces(conv, cn, &cut, 1, NULL);
                if (strcmp(split, whole) != 0)
                    bad = cut;
                free(split);
            }
            TAP_OK(bad == (size_t)-1, "%s: %s version split at every offset", fixture_names[f],
                   e == 0 ? "CRLF" : "CR");
            free(conv);
        }
        free(whole);
        free(s);
    }
    return tap_done();
}
