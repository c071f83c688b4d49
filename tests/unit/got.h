/* got.h - what a stream decoder handed over (text, reasoning, finish and usage
 * announcements), for the decoder tests of every dialect (test_api, test_anthropic, ...):
 * decode a stream through the SSE parser in two pieces, and check every cut decodes alike. */
#ifndef TT_TEST_GOT_H
#define TT_TEST_GOT_H
#include "proto/api.h"
#include "proto/sse.h"
#include "tap.h"
#include "base/xmalloc.h"

/* A dialect's SSE event decoder (struct dialect's stream_event, api_stream_event). */
typedef int (*got_decoder)(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                           void *ud);

struct got {
    struct api_stream st;
    struct buf content, reasoning;
    int finishes, usages, ret;
    got_decoder dec;
};

static inline void got_emit(void *ud, enum api_kind kind, const char *s, size_t n)
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

/* A fresh g for decoder dec. */
static inline void got_init(struct got *g, got_decoder dec)
{
    memset(g, 0, sizeof *g);
    api_stream_init(&g->st);
    g->dec = dec;
}

static inline void got_free(struct got *g)
{
    api_stream_free(&g->st);
    buf_free(&g->content);
    buf_free(&g->reasoning);
}

static inline int got_on_event(void *ud, const struct sse_event *ev)
{
    struct got *g = ud;
    g->ret = g->dec(&g->st, ev, got_emit, g);
    return g->ret != 0;
}

/* Decode s[0..n) with dec, fed to the SSE parser in two pieces cut at byte cut. */
static inline void got_decode(struct got *g, got_decoder dec, const char *s, size_t n,
                              size_t cut)
{
    got_init(g, dec);
    struct sse_parser p;
    sse_init(&p, 0);
    if (sse_feed(&p, s, cut, got_on_event, g) == 0)
        sse_feed(&p, s + cut, n - cut, got_on_event, g);
    sse_free(&p);
}

/* Everything a decode learnt, as one string to compare; caller frees. */
static inline char *got_summary(const struct got *g)
{
    const struct api_stream *st = &g->st;
    const struct api_usage *u = &st->usage;
    struct buf calls = BUF_INIT;
    for (size_t i = 0; i < st->n_calls; i++)
        buf_printf(&calls, " call=%s|%s|%s", st->calls[i].id ? st->calls[i].id : "-",
                   st->calls[i].wire ? st->calls[i].wire : "-",
                   st->calls[i].args ? st->calls[i].args : "-");
    char *sum = xasprintf("content=[%s] reasoning=[%s] finish=%s/%s model=%s usage=%d:%lld,%lld,%lld,"
                     "%lld,%lld error=[%s] code=%s ret=%d done=%d finishes=%d usages=%d",
                     buf_str(&g->content), buf_str(&g->reasoning), st->finish,
                     st->finish_detail, st->model, u->present, u->prompt, u->completion,
                     u->total, u->cached, u->reasoning, buf_str(&st->error), st->error_code,
                     g->ret, st->done, g->finishes, g->usages);
    char *all = xasprintf("%s%s", sum, buf_str(&calls));
    free(sum);
    buf_free(&calls);
    return all;
}

/* Decode s whole into g, then cut in two at every byte offset: one TAP point, ok when every
 * cut decodes exactly as the whole did. */
static inline int got_every_split(struct got *g, got_decoder dec, const char *s, size_t n,
                                  const char *name)
{
    got_decode(g, dec, s, n, n);
    char *whole = got_summary(g);
    size_t bad = (size_t)-1;
    for (size_t cut = 0; cut < n && bad == (size_t)-1; cut++) {
        struct got h;
        got_decode(&h, dec, s, n, cut);
        char *sum = got_summary(&h);
        if (strcmp(sum, whole) != 0) {
            bad = cut;
            printf("# cut at %zu\n# whole: %s\n# split: %s\n", cut, whole, sum);
        }
        free(sum);
        got_free(&h);
    }
    free(whole);
    return TAP_OK(bad == (size_t)-1, "%s: the same at every byte split", name);
}

#endif
