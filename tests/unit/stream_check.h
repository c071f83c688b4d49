/* stream_check.h - decode a provider's SSE stream through one dialect's event decoder (the
 * api_stream_event signature), whole, split at every byte offset and fed a byte at a time, and
 * compare everything the decoder learnt: for the tests of the native dialects. */
#ifndef TT_TEST_STREAM_CHECK_H
#define TT_TEST_STREAM_CHECK_H
#include "fixture.h"
#include "proto/api.h"
#include "proto/sse.h"

typedef int (*stream_event_fn)(struct api_stream *st, const struct sse_event *ev,
                               api_emit_fn fn, void *ud);

struct got {
    struct api_stream st;
    struct buf content, reasoning;
    int finishes, usages, ret, events;
    stream_event_fn dec;
};

static void got_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct got *g = ud;
    if (kind == API_CONTENT)
        buf_append(&g->content, s, n);
    else if (kind == API_REASONING)
        buf_append(&g->reasoning, s, n);
    else if (kind == API_FINISH)
        g->finishes++;
    else if (kind == API_USAGE)
        g->usages++;
}

static int got_event(void *ud, const struct sse_event *ev)
{
    struct got *g = ud;
    g->events++;
    g->ret = g->dec(&g->st, ev, got_emit, g);
    return g->ret != 0;
}

static void got_init(struct got *g, stream_event_fn dec)
{
    memset(g, 0, sizeof *g);
    api_stream_init(&g->st);
    g->dec = dec;
}

static void got_free(struct got *g)
{
    api_stream_free(&g->st);
    buf_free(&g->content);
    buf_free(&g->reasoning);
}

/* Decode s[0..n) fed in pieces ending at cuts[0..ncuts) (ascending), as the network thread
 * does: nothing more is fed once the decoder said the stream is over. */
static void got_decode(struct got *g, stream_event_fn dec, const char *s, size_t n,
                       const size_t *cuts, size_t ncuts)
{
    got_init(g, dec);
    struct sse_parser p;
    sse_init(&p, 0);
    size_t from = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        if (to < from)
            continue;
        if (sse_feed(&p, s + from, to - from, got_event, g) != 0)
            break;
        from = to;
    }
    sse_free(&p);
}

/* Everything decoded, as one string to compare. Caller frees. */
static char *got_summary(const struct got *g)
{
    const struct api_usage *u = &g->st.usage;
    return xasprintf("content[%s] reasoning[%s] finish[%s/%s] model[%s] usage[%d %lld %lld "
                     "%lld %lld %lld] error[%s|%s] ret %d done %d finishes %d usages %d",
                     buf_str(&g->content), buf_str(&g->reasoning), g->st.finish,
                     g->st.finish_detail, g->st.model, u->present, u->prompt, u->completion,
                     u->reasoning, u->cached, u->total, buf_str(&g->st.error), g->st.error_code,
                     g->ret, g->st.done, g->finishes, g->usages);
}

/* Decode s[0..n) whole into *g, then check that every two-piece split and a byte at a time
 * give the same. */
static void stream_check_splits(const char *name, stream_event_fn dec, const char *s, size_t n,
                                struct got *g)
{
    got_decode(g, dec, s, n, NULL, 0);
    char *whole = got_summary(g);
    size_t bad = (size_t)-1;
    for (size_t cut = 0; cut <= n && bad == (size_t)-1; cut++) {
        struct got split;
        got_decode(&split, dec, s, n, &cut, 1);
        char *sum = got_summary(&split);
        if (strcmp(sum, whole) != 0) {
            bad = cut;
            printf("#   whole: %s\n#   split: %s\n", whole, sum);
        }
        free(sum);
        got_free(&split);
    }
    if (!TAP_OK(bad == (size_t)-1, "%s: the same decoded at every split", name))
        printf("#   first differing split at byte %zu\n", bad);
    size_t *all = xmalloc((n + 1) * sizeof *all);
    for (size_t i = 0; i < n; i++)
        all[i] = i + 1;
    struct got bytes;
    got_decode(&bytes, dec, s, n, all, n);
    char *sum = got_summary(&bytes);
    TAP_STR(sum, whole, "a byte at a time: the same");
    free(sum);
    got_free(&bytes);
    free(all);
    free(whole);
}

/* stream_check_splits on tests/fixtures/NAME. */
static void stream_check_fixture(const char *name, stream_event_fn dec, struct got *g)
{
    size_t n;
    char *s = fixture_read(name, &n);
    stream_check_splits(name, dec, s, n, g);
    free(s);
}

#endif
