/* state_bench.c - the latency the shared quota state (state = redis://..., net/state.c) adds to
 * one request, against the local state alone, side by side.
 *
 *   state_bench --url redis://127.0.0.1:PORT/0 [--requests N] [--rounds R]
 *
 * A request here is what the network thread does for it in pacing: before it leaves
 * (ratelimit_wait_time, ratelimit_note_sent; with Redis also state_dims and state_admit: one
 * EVALSHA), at its headers (three x-ratelimit-* lines fed and merged; with Redis state_report)
 * and at its end (with Redis the breaker's state_breaker). Each round runs N requests of each
 * kind back to back, the order alternating; the limits are so large that nobody waits. Prints
 * p50 and p99 per request of each, and of the difference (what Redis adds), and the floor: one
 * PING round trip on a connection of its own, in the same rounds. bench/redis/run.py
 * starts the redis-server and makes run-all's row of it. */
#include "config.h"
#include "net/ratelimit.h"
#include "net/state.h"

#include "base/util.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static int warming = 1; /* the first requests probe the unknown limits */

/* One request's pacing; st NULL: local state only. Returns its seconds. */
static double one(struct ratelimit_state *s, struct state *st, const char *qid, const char *bid)
{
    static const char *const h[] = {"x-ratelimit-limit-requests: 1000000\r\n",
                                    "x-ratelimit-remaining-requests: 999990\r\n",
                                    "x-ratelimit-reset-requests: 1ms\r\n"};
    double t0 = util_now(), w;
    struct state_dim d[2];
    (void)ratelimit_wait_time(s, t0, 100);
    if (st) {
        state_dims(s, t0, 100, d);
        enum state_verdict v = state_admit(st, qid, bid, d, 10, 0, &w);
        if (v != STATE_GO && v != STATE_LOCAL && !warming) { /* LOCAL: over the budget */
            fprintf(stderr, "state_bench: Redis held a request back (%d, %g s)\n", (int)v, w);
            exit(1);
        }
    }
    ratelimit_note_sent(s, t0, 100);
    struct ratelimit_state before = *s;
    double now = util_now();
    for (int i = 0; i < 3; i++)
        (void)ratelimit_feed(s, NULL, h[i], strlen(h[i]), now, 1e9);
    ratelimit_merge_report(s, &before, now, 0, 1);
    if (st) {
        state_dims(s, now, 0, d);
        state_report(st, qid, d, 0);
        state_breaker(st, bid, 1, 5, 30);
    }
    return util_now() - t0;
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    int n = 2000, rounds = 11;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--requests") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: state_bench --url redis://HOST:PORT/DB [--requests N] "
                            "[--rounds R]\n");
            return 2;
        }
    }
    if (!url || n < 1 || rounds < 1) {
        fprintf(stderr, "state_bench: --url is required\n");
        return 2;
    }
    char err[256], qid[33], bid[33];
    struct state *st = state_new(url, NULL, err, sizeof err);
    if (!st) {
        fprintf(stderr, "state_bench: %s\n", err);
        return 2;
    }
    state_quota_id("http://127.0.0.1/v1/chat/completions", "Bearer sk-bench", qid);
    state_endpoint_id("http://127.0.0.1/v1/chat/completions", bid);
    struct ratelimit_state ls, rs;
    ratelimit_state_init(&ls, 0, 0);
    ratelimit_state_init(&rs, 0, 0);
    one(&rs, st, qid, bid); /* connect, load the scripts, learn the limits: not counted */
    one(&rs, st, qid, bid);
    warming = 0;
    size_t total = (size_t)n * (size_t)rounds;
    double *loc = calloc(total, sizeof *loc), *red = calloc(total, sizeof *red);
    double *add = calloc(total, sizeof *add), *ping = calloc(total, sizeof *ping);
    struct state_addr sa;
    if (state_parse_url(url, &sa, err, sizeof err) != 0)
        return 2;
    redisContext *rc = redisConnect(sa.host, sa.port);
    if (!rc || rc->err) {
        fprintf(stderr, "state_bench: cannot connect for the PINGs\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++) {
            int redis = (pass + r) % 2;
            for (int i = 0; i < n; i++) {
                size_t k = (size_t)r * (size_t)n + (size_t)i;
                if (redis) {
                    red[k] = one(&rs, st, qid, bid);
                    double t0 = util_now();
                    redisReply *pr = redisCommand(rc, "PING");
                    ping[k] = util_now() - t0;
                    if (pr)
                        freeReplyObject(pr);
                } else {
                    loc[k] = one(&ls, NULL, qid, bid);
                }
            }
        }
    for (size_t k = 0; k < total; k++)
        add[k] = red[k] - loc[k];
    unsigned long calls, fallbacks;
    state_counts(st, &calls, &fallbacks);
    printf("requests %zu (%d rounds of %d), Redis calls %lu, fell back %lu (a call over the "
           "50 ms budget, or Redis lost for the retry second after it)\n", total, rounds, n,
           calls, fallbacks);
    printf("local  p50 %.4f ms  p99 %.4f ms\n", pct(loc, total, 0.5) * 1e3,
           pct(loc, total, 0.99) * 1e3);
    printf("redis  p50 %.4f ms  p99 %.4f ms\n", pct(red, total, 0.5) * 1e3,
           pct(red, total, 0.99) * 1e3);
    printf("added  p50 %.4f ms  p99 %.4f ms\n", pct(add, total, 0.5) * 1e3,
           pct(add, total, 0.99) * 1e3);
    printf("ping   p50 %.4f ms  p99 %.4f ms\n", pct(ping, total, 0.5) * 1e3,
           pct(ping, total, 0.99) * 1e3);
    redisFree(rc);
    free(ping);
    free(loc);
    free(red);
    free(add);
    state_free(st);
    return 0;
}
