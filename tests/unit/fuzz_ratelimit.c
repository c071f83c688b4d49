/* fuzz_ratelimit.c - fuzz target for every ratelimit parser, with invariants.
 *
 * Two builds of one file:
 *   - `make check` builds it with a main() that runs the seed inputs below and then
 *     FUZZ_ITERATIONS (env, default 200000) deterministic mutations of them, printing TAP;
 *     under --enable-asan this is a sanitiser-checked random test.
 *   - libFuzzer, for open-ended runs (BUILD = a configured build directory, for config.h):
 *       clang -g -O1 -fsanitize=fuzzer,address,undefined -DTT_LIBFUZZER -IBUILD -Isrc \
 *         tests/unit/fuzz_ratelimit.c src/ratelimit.c src/util.c src/buf.c src/xmalloc.c \
 *         -lm -o /tmp/fuzz_ratelimit && /tmp/fuzz_ratelimit -max_total_time=60 CORPUS_DIR
 * Input layout: byte 0 picks a header name (or raw), the rest is the value/line. */
#include "config.h"
#include "net/ratelimit.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long violations;
static const char *first_violation;

#ifdef TT_LIBFUZZER
#define VIOLATION(what) abort()
#else
#define VIOLATION(what)                    \
    do {                                   \
        if (!violations++)                 \
            first_violation = (what);      \
    } while (0)
#endif
#define CHECK(cond)                        \
    do {                                   \
        if (!(cond))                       \
            VIOLATION(#cond);              \
    } while (0)

static const char *const names[] = {
    "x-ratelimit-limit-requests: ",   "x-ratelimit-limit-tokens: ",
    "x-ratelimit-remaining-requests: ", "x-ratelimit-remaining-tokens: ",
    "x-ratelimit-reset-requests: ",   "x-ratelimit-reset-tokens: ",
    "retry-after-ms: ",               "retry-after: ",
    "x-should-retry: ",               "anthropic-ratelimit-requests-reset: ",
    "anthropic-ratelimit-tokens-remaining: ", "",
};

#define NOW 5000.0
#define EPOCH 1761031600.0

static void check_dim(const struct ratelimit_dim *d, double now)
{
    CHECK(d->limit >= RATELIMIT_UNKNOWN);
    CHECK(d->remaining >= RATELIMIT_UNKNOWN);
    CHECK(d->reset_at == RATELIMIT_NO_TIME || (d->reset_at >= now && isfinite(d->reset_at)));
}

static void one_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return;
    const char *v = (const char *)data + 1;
    size_t n = size - 1;

    /* raw parsers on the value alone (exact length: the sanitiser catches over-reads) */
    char *exact = malloc(n ? n : 1);
    memcpy(exact, v, n);
    double d = -7;
    if (ratelimit_parse_duration(exact, n, &d) == 0)
        CHECK(isfinite(d) && d >= 0 && d <= 1e9);
    double e = -7;
    if (ratelimit_parse_http_date(exact, n, &e) == 0)
        CHECK(isfinite(e) && e >= 0 && e < 253402300800.0 + 86400);
    e = -7;
    if (ratelimit_parse_rfc3339(exact, n, &e) == 0)
        CHECK(isfinite(e) && e >= 0 && e < 253402300800.0 + 2 * 86400);

    /* one header line */
    const char *name = names[data[0] % (sizeof names / sizeof names[0])];
    size_t nl = strlen(name);
    char *line = malloc(nl + n + 1);
    memcpy(line, name, nl);
    memcpy(line + nl, v, n);
    struct ratelimit_state s;
    struct ratelimit_response r;
    ratelimit_state_init(&s, (data[0] & 0x10) ? 60 : 0, (data[0] & 0x20) ? 10000 : 0);
    ratelimit_response_init(&r);
    int rc = ratelimit_feed(&s, &r, line, nl + n, NOW, EPOCH);
    CHECK(rc >= -1 && rc <= 1);
    check_dim(&s.req, NOW);
    check_dim(&s.tok, NOW);
    double delay = ratelimit_response_delay(&r);
    CHECK(delay == RATELIMIT_NO_TIME || (delay >= 0 && isfinite(delay)));
    CHECK(r.should_retry >= -1 && r.should_retry <= 1);

    /* pacing and display on whatever state came out */
    double est = (double)(data[0] * 97);
    double w = ratelimit_wait_time(&s, NOW, est);
    CHECK(isfinite(w) && w >= 0 && w <= 1e9);
    ratelimit_note_sent(&s, NOW, est);
    w = ratelimit_wait_time(&s, NOW + 0.5, est);
    CHECK(isfinite(w) && w >= 0 && w <= 1e9);
    char buf[128];
    memset(buf, 'x', sizeof buf);
    ratelimit_format(&s, NOW, buf, sizeof buf);
    CHECK(memchr(buf, '\0', sizeof buf) != NULL);

    /* retry decision from these headers */
    struct ratelimit_policy p;
    ratelimit_policy_init(&p);
    static const int statuses[] = {200, 400, 401, 403, 404, 408, 409, 413, 429, 500, 503, 0};
    int status = statuses[(data[0] >> 4) % 12];
    double dl = -1;
    char reason[96];
    enum ratelimit_verdict vd = ratelimit_should_retry(status, status ? RATELIMIT_NET_OK
                                                                     : RATELIMIT_NET_TIMEOUT,
                                                       (data[0] & 1) ? "insufficient_quota" : NULL,
                                                       0, 1 + (data[0] & 3), &p, &r, &dl, reason,
                                                       sizeof reason);
    CHECK(vd == RATELIMIT_RETRY ? (dl >= 0 && dl <= p.max_retry_wait) : dl == 0);
    CHECK(strlen(reason) > 0);

    /* a 429 waited out: the same headers, the input as its body's text */
    double ch = -1, td = ratelimit_text_delay(exact, n);
    CHECK(td == RATELIMIT_NO_TIME || (isfinite(td) && td >= 0));
    int tk = ratelimit_text_tokens(exact, n);
    CHECK(tk == 0 || tk == 1);
    vd = ratelimit_wait_out(status, RATELIMIT_NET_OK, NULL, &p, &r, (double)(data[0] & 7) * 50,
                            &dl, &ch, reason, sizeof reason);
    CHECK(vd == RATELIMIT_RETRY ? (dl >= 0 && dl <= p.max_retry_wait &&
                                   ch >= RATELIMIT_WAIT_MIN && ch >= dl)
                                : (dl == 0 && ch == 0));
    ratelimit_note_refused(&s, &r, tk, NOW, NOW + 0.25);
    w = ratelimit_wait_time(&s, NOW + 0.25, est);
    CHECK(isfinite(w) && w >= 0 && w <= 1e9);

    /* persistence: whatever we save must load, and a second round is a fixed point */
    char l1[256], l2[256], l3[256];
    ratelimit_state_save(&s, NOW, EPOCH, l1, sizeof l1);
    struct ratelimit_state t, u;
    ratelimit_state_init(&t, 0, 0);
    CHECK(ratelimit_state_load(&t, l1, strlen(l1), 10, EPOCH + 3) == 0);
    ratelimit_state_save(&t, 10, EPOCH + 3, l2, sizeof l2);
    ratelimit_state_init(&u, 0, 0);
    CHECK(ratelimit_state_load(&u, l2, strlen(l2), 10, EPOCH + 3) == 0);
    ratelimit_state_save(&u, 10, EPOCH + 3, l3, sizeof l3);
    CHECK(strcmp(l2, l3) == 0);

    /* the input as a saved line */
    struct ratelimit_state z;
    ratelimit_state_init(&z, 0, 0);
    if (ratelimit_state_load(&z, exact, n, NOW, EPOCH) == 0) {
        check_dim(&z.req, NOW);
        check_dim(&z.tok, NOW);
        w = ratelimit_wait_time(&z, NOW, 100);
        CHECK(isfinite(w) && w >= 0);
        ratelimit_format(&z, NOW, buf, sizeof buf);
    }
    free(line);
    free(exact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_input(data, size);
    return 0;
}

#ifndef TT_LIBFUZZER
#include "tap.h"

static const char *const seeds[] = {
    "\x05" "6m0s", "\x05" "2m59.56s", "\x04" "1h2m3s", "\x05" "20ms", "\x04" "12",
    "\x02" "-1", "\x02" "4999", "\x00" "5000", "\x03" "159000", "\x06" "1500.5",
    "\x07" "Wed, 21 Oct 2026 07:28:00 GMT", "\x07" "Sunday, 06-Nov-94 08:49:37 GMT",
    "\x07" "Sun Nov  6 08:49:37 1994", "\x07" "120", "\x08" "true", "\x08" "false",
    "\x09" "rl1 req=4999/5000/1761031600.012/1761031600.000 tok=?/?/?/?",
    "\x19" "rl1 req=1/2/?/5 tok=0/9/1761031999.5/1761031600 x=y", "\x05" "1e999s",
    "\x05" "1\xC2\xB5s", "\x04" "99999999999999999999999999999", "\x05" "-5s", "\x05" "",
};

static uint64_t rng_s = 0x243F6A8885A308D3ull;
static uint64_t next(void)
{
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return rng_s;
}

static const char *const tokens[] = {"h", "m", "s", "ms", "us", "ns", ".", "-", "0", "9",
                                     "1e", " ", "\r\n", ":", "/", "?", "=", "GMT", "Oct",
                                     "99999999", "rl1 ", "req=", "tok=", ",", "\xC2\xB5"};

/* Mutate buf[0..*len) in place (capacity cap). */
static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    int ops = 1 + (int)(next() % 4);
    for (int i = 0; i < ops; i++) {
        size_t l = *len;
        switch (next() % 5) {
        case 0: /* flip a byte */
            if (l)
                buf[next() % l] = (uint8_t)next();
            break;
        case 1: /* delete a span */
            if (l > 1) {
                size_t at = next() % l, k = 1 + next() % (l - at);
                memmove(buf + at, buf + at + k, l - at - k);
                *len = l - k;
            }
            break;
        case 2: { /* insert a token */
            const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
            size_t k = strlen(t), at = l ? next() % (l + 1) : 0;
            if (l + k <= cap) {
                memmove(buf + at + k, buf + at, l - at);
                memcpy(buf + at, t, k);
                *len = l + k;
            }
            break;
        }
        case 3: /* duplicate a span (long digit runs) */
            if (l && l * 2 <= cap) {
                memcpy(buf + l, buf, l);
                *len = l * 2;
            }
            break;
        default: /* change the selector */
            if (l)
                buf[0] = (uint8_t)next();
            break;
        }
    }
}

int main(void)
{
    size_t nseeds = sizeof seeds / sizeof seeds[0];
    for (size_t i = 0; i < nseeds; i++) {
        size_t len = 1 + strlen(seeds[i] + 1);
        violations = 0;
        one_input((const uint8_t *)seeds[i], len);
        TAP_OK(violations == 0, "seed %zu \"%s\" holds the invariants%s%s", i, seeds[i] + 1,
               violations ? ": " : "", violations ? first_violation : "");
    }
    const char *env = getenv("FUZZ_ITERATIONS");
    long iters = env ? atol(env) : 200000;
    enum { CAP = 8192 };
    static uint8_t buf[CAP];
    violations = 0;
    long bad_at = -1;
    for (long i = 0; i < iters; i++) {
        const char *seed = seeds[next() % nseeds];
        size_t len = 1 + strlen(seed + 1);
        memcpy(buf, seed, len);
        mutate(buf, &len, CAP);
        unsigned long before = violations;
        one_input(buf, len);
        if (violations != before && bad_at < 0) {
            bad_at = i;
            printf("# first violating input (%zu bytes): ", len);
            for (size_t k = 0; k < len && k < 200; k++)
                printf("%02x", buf[k]);
            printf("\n");
        }
    }
    TAP_OK(violations == 0, "%ld mutated inputs hold the invariants%s%s", iters,
           violations ? ": " : "", violations ? first_violation : "");
    return tap_done();
}
#endif
