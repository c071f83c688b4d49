/* test_ratelimit.c - header parsing, pacing, retry policy, breaker, key pool, persistence. */
#include "config.h"
#include "net/ratelimit.h"
#include "tap.h"
#include "base/util.h"

#include <limits.h>
#include <math.h>
#include <time.h>

#define NOW 1000.0          /* monotonic test clock */
#define EPOCH 1761031600.0  /* wall clock at NOW: 2025-10-21 07:26:40 UTC */

static int near(double a, double b)
{
    return fabs(a - b) < 1e-6;
}

#define TAP_NEAR(got, want, name)                                                         \
    do {                                                                                  \
        double tn_g_ = (got), tn_w_ = (want);                                             \
        if (!TAP_OK(near(tn_g_, tn_w_), "%s", name))                                      \
            printf("#   got:  %.9g\n#   want: %.9g\n", tn_g_, tn_w_);                     \
    } while (0)

/* ---- helpers ---- */

static int feed(struct ratelimit_state *s, struct ratelimit_response *r, const char *line,
                double now)
{
    return ratelimit_feed(s, r, line, strlen(line), now, EPOCH);
}

static void feed_openai(struct ratelimit_state *s, struct ratelimit_response *r, double now)
{
    feed(s, r, "x-ratelimit-limit-requests: 5000\r\n", now);
    feed(s, r, "x-ratelimit-limit-tokens: 160000\r\n", now);
    feed(s, r, "x-ratelimit-remaining-requests: 4999\r\n", now);
    feed(s, r, "x-ratelimit-remaining-tokens: 159000\r\n", now);
    feed(s, r, "x-ratelimit-reset-requests: 12ms\r\n", now);
    feed(s, r, "x-ratelimit-reset-tokens: 6m0s\r\n", now);
}

static double fixed_value;
static int random_calls;
static double fixed_random(void *ctx)
{
    (void)ctx;
    random_calls++;
    return fixed_value;
}

static void policy_fixed(struct ratelimit_policy *p, double value)
{
    ratelimit_policy_init(p);
    fixed_value = value;
    p->random = fixed_random;
}

/* ---- durations ---- */

static void check_dur(const char *s, double want, const char *name)
{
    double got = -99;
    int rc = ratelimit_parse_duration(s, strlen(s), &got);
    if (!TAP_OK(rc == 0 && near(got, want), "duration %s", name))
        printf("#   rc %d got %.9g want %.9g\n", rc, got, want);
}

static void check_dur_bad(const char *s, size_t n, const char *name)
{
    double got = -99;
    int rc = ratelimit_parse_duration(s, n, &got);
    TAP_OK(rc == -1, "duration rejects %s", name);
}

static void test_durations(void)
{
    check_dur("1s", 1, "1s");
    check_dur("6m0s", 360, "6m0s");
    check_dur("20ms", 0.02, "20ms");
    check_dur("2m59.56s", 179.56, "2m59.56s");
    check_dur("1h2m3s", 3723, "1h2m3s");
    check_dur("12", 12, "plain seconds");
    check_dur("0.5", 0.5, "plain fraction");
    check_dur("  7s \r\n", 7, "blanks and CRLF trimmed");
    check_dur("0s", 0, "zero");
    check_dur("1.5h", 5400, "fractional hours");
    check_dur("250us", 250e-6, "microseconds");
    check_dur("1\xC2\xB5s", 1e-6, "micro sign");
    check_dur("3ns", 3e-9, "nanoseconds");
    check_dur(".5s", 0.5, "leading dot");
    check_dur("1m1ms", 60.001, "m then ms");
    check_dur("000000000000000000000000000000000000000001s", 1, "long leading zeros");
    {
        char s[6000];
        memcpy(s, "1.", 2);
        memset(s + 2, '9', 5000);
        memcpy(s + 5002, "s", 2);
        double got = -1;
        TAP_OK(ratelimit_parse_duration(s, strlen(s), &got) == 0 && got > 1.99 && got <= 2.0,
               "duration with 5000 fraction digits is finite");
    }
    {
        char s[6000];
        memset(s, '9', 5000);
        memcpy(s + 5000, "s", 2);
        check_dur_bad(s, strlen(s), "5000-digit integer");
    }
    check_dur_bad("abc", 3, "abc");
    check_dur_bad("-5s", 3, "-5s");
    check_dur_bad("+5s", 3, "+5s");
    check_dur_bad("1e999s", 6, "1e999s");
    check_dur_bad("1e3", 3, "exponent");
    check_dur_bad("", 0, "empty");
    check_dur_bad("  \r\n", 4, "blank");
    check_dur_bad("s", 1, "unit alone");
    check_dur_bad("1x", 2, "unknown unit");
    check_dur_bad("1m30", 4, "trailing number without unit");
    check_dur_bad("1..5s", 5, "two dots");
    check_dur_bad("5 s", 3, "space inside");
    check_dur_bad("inf", 3, "inf");
    check_dur_bad("nan", 3, "nan");
    check_dur_bad("99999999999s", 12, "over 31 years");
    check_dur_bad("300000h", 7, "hours overflow the bound");
    check_dur_bad("1s\0" "5", 4, "embedded NUL");
    double got = 0;
    TAP_OK(ratelimit_parse_duration("10sXYZ", 3, &got) == 0 && near(got, 10),
           "duration honours the length (no NUL needed)");
}

/* ---- HTTP dates ---- */

static double timegm_of(int y, int mo, int d, int h, int mi, int s)
{
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    return (double)timegm(&tm);
}

static void check_date(const char *s, double want, const char *name)
{
    double got = -1;
    int rc = ratelimit_parse_http_date(s, strlen(s), &got);
    if (!TAP_OK(rc == 0 && got == want, "http date %s", name))
        printf("#   rc %d got %.0f want %.0f\n", rc, got, want);
}

static void test_http_dates(void)
{
    check_date("Wed, 21 Oct 2026 07:28:00 GMT", timegm_of(2026, 10, 21, 7, 28, 0), "IMF-fixdate");
    check_date("Sun, 06 Nov 1994 08:49:37 GMT", 784111777, "RFC 9110 example");
    check_date("Sunday, 06-Nov-94 08:49:37 GMT", 784111777, "RFC 850 form");
    check_date("Sun Nov  6 08:49:37 1994", 784111777, "asctime form");
    check_date("Thu, 29 Feb 2024 23:59:59 GMT", timegm_of(2024, 2, 29, 23, 59, 59), "leap day");
    check_date("Fri, 01 Jan 2100 00:00:00 GMT", timegm_of(2100, 1, 1, 0, 0, 0), "year 2100");
    check_date("thu, 01 jan 1970 00:00:00 gmt", 0, "lower case, epoch");
    /* property: agree with timegm over a spread of dates */
    const char *mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int bad = 0, n = 0;
    for (int y = 1970; y <= 2400; y += 7) {
        for (int m = 1; m <= 12; m++) {
            int d = 1 + (y * 7 + m * 3) % 28, h = (y + m) % 24, mi = (y * m) % 60, s = m * 4;
            char buf[64];
            snprintf(buf, sizeof buf, "Mon, %02d %s %04d %02d:%02d:%02d GMT", d, mon[m - 1], y, h,
                     mi, s);
            double got = -1;
            n++;
            if (ratelimit_parse_http_date(buf, strlen(buf), &got) != 0 ||
                got != timegm_of(y, m, d, h, mi, s)) {
                if (!bad)
                    printf("# first mismatch: %s -> %.0f\n", buf, got);
                bad++;
            }
        }
    }
    TAP_OK(bad == 0, "http date agrees with timegm on %d dates", n);
    const char *garbage[] = {
        "", "soon", "Wed, 32 Oct 2026 07:28:00 GMT", "Wed, 29 Feb 2025 07:28:00 GMT",
        "Wed, 21 Oct 2026 24:00:00 GMT", "Wed, 21 Foo 2026 07:28:00 GMT",
        "Wed, 21 Oct 2026 07:28:00", "Wed, 21 Oct 2026 07:28:00 PST",
        "Wed, 21 Oct 1969 07:28:00 GMT", "Wed, 21 Oct 202 07:28:00 GMT",
        "Wed, 21 Oct 2026 7:28:00 GMT", "Wed, 21-Oct 2026 07:28:00 GMT",
        "Wed Oct 21 07:28:00", "Wed, 021 Oct 2026 07:28:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMTX",
        "W, 21 Oct 2026 07:28:00 GMT",
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(garbage); i++) {
        double got;
        TAP_OK(ratelimit_parse_http_date(garbage[i], strlen(garbage[i]), &got) == -1,
               "http date rejects \"%s\"", garbage[i]);
    }
}

/* ---- feeding headers ---- */

static void test_feed(void)
{
    struct ratelimit_state s;
    struct ratelimit_response r;
    ratelimit_state_init(&s, 0, 0);
    ratelimit_response_init(&r);
    TAP_INT(s.seen, 0, "fresh state has seen nothing");
    TAP_INT(feed(&s, &r, "HTTP/2 200\r\n", NOW), 0, "status line ignored");
    TAP_INT(feed(&s, &r, "content-type: text/event-stream\r\n", NOW), 0, "other header ignored");
    TAP_INT(feed(&s, &r, "\r\n", NOW), 0, "blank line ignored");
    TAP_INT(s.seen, 0, "still nothing seen");

    TAP_INT(feed(&s, &r, "x-ratelimit-limit-requests: 5000\r\n", NOW), 1, "limit-requests used");
    TAP_INT(feed(&s, &r, "X-RateLimit-Limit-Tokens:160000", NOW), 1, "mixed case, no space");
    TAP_INT(feed(&s, &r, "X-RATELIMIT-REMAINING-REQUESTS:  4999 \r\n", NOW), 1, "upper case");
    TAP_INT(feed(&s, &r, "x-ratelimit-remaining-tokens: 159000\r\n", NOW), 1, "remaining-tokens");
    TAP_INT(feed(&s, &r, "x-ratelimit-reset-requests: 12ms\r\n", NOW), 1, "reset-requests");
    TAP_INT(feed(&s, &r, "x-ratelimit-reset-tokens: 6m0s\r\n", NOW), 1, "reset-tokens");
    TAP_INT(s.seen, 1, "seen after headers");
    TAP_INT(s.req.limit, 5000, "state limit requests");
    TAP_INT(s.tok.limit, 160000, "state limit tokens");
    TAP_INT(s.req.remaining, 4999, "state remaining requests");
    TAP_INT(s.tok.remaining, 159000, "state remaining tokens");
    TAP_NEAR(s.req.reset_at, NOW + 0.012, "request reset is absolute (now + 12ms)");
    TAP_NEAR(s.tok.reset_at, NOW + 360, "token reset is absolute (now + 6m0s)");
    TAP_INT(r.limit_req, 5000, "response limit requests");
    TAP_INT(r.remaining_tok, 159000, "response remaining tokens");
    TAP_NEAR(r.reset_tok, 360, "response keeps the reset duration");

    /* a header line that is not NUL-terminated where it ends */
    const char raw[] = "x-ratelimit-remaining-requests: 42\r\nGARBAGE 7";
    TAP_INT(ratelimit_feed(&s, &r, raw, 36, NOW, EPOCH), 1, "feed honours the length");
    TAP_INT(s.req.remaining, 42, "value read up to the length");

    /* malformed values become unknown, distinct from 0 */
    TAP_INT(feed(&s, &r, "x-ratelimit-remaining-requests: abc\r\n", NOW), -1, "garbage count");
    TAP_INT(s.req.remaining, RATELIMIT_UNKNOWN, "garbage count -> unknown");
    TAP_INT(feed(&s, &r, "x-ratelimit-remaining-requests: 0\r\n", NOW), 1, "zero count");
    TAP_INT(s.req.remaining, 0, "zero stays zero (not unknown)");
    TAP_INT(feed(&s, &r, "x-ratelimit-limit-tokens: 99999999999999999999999999\r\n", NOW), -1,
            "overflowing count rejected");
    TAP_INT(s.tok.limit, RATELIMIT_UNKNOWN, "overflowing count -> unknown");
    TAP_INT(feed(&s, &r, "x-ratelimit-limit-tokens: -7\r\n", NOW), -1, "negative count rejected");
    TAP_INT(feed(&s, &r, "x-ratelimit-limit-tokens:\r\n", NOW), -1, "empty count rejected");
    TAP_INT(feed(&s, &r, "x-ratelimit-reset-tokens: -5s\r\n", NOW), -1, "negative reset");
    TAP_OK(s.tok.reset_at < 0, "negative reset -> unknown");
    TAP_INT(feed(&s, &r, "x-ratelimit-reset-tokens: 1e999s\r\n", NOW), -1, "1e999s reset");

    /* Azure: only remaining-*, sometimes -1 */
    struct ratelimit_state az;
    ratelimit_state_init(&az, 0, 0);
    TAP_INT(feed(&az, NULL, "x-ratelimit-remaining-requests: -1\r\n", NOW), 1, "Azure -1 accepted");
    TAP_INT(az.req.remaining, RATELIMIT_UNKNOWN, "Azure -1 = unknown");
    TAP_INT(feed(&az, NULL, "x-ratelimit-remaining-tokens: 9000\r\n", NOW), 1, "Azure tokens");
    TAP_INT(az.tok.remaining, 9000, "Azure remaining tokens");
    TAP_INT(az.tok.limit, RATELIMIT_UNKNOWN, "Azure sends no limit");
    TAP_OK(az.tok.reset_at < 0, "Azure sends no reset");

    /* retry hints */
    struct ratelimit_response h;
    ratelimit_response_init(&h);
    TAP_NEAR(ratelimit_response_delay(&h), RATELIMIT_NO_TIME, "no delay before headers");
    TAP_INT(feed(NULL, &h, "Retry-After: 30\r\n", NOW), 1, "retry-after seconds");
    TAP_NEAR(h.retry_after, 30, "retry-after = 30 s");
    TAP_NEAR(ratelimit_response_delay(&h), 30, "delay from retry-after");
    TAP_INT(feed(NULL, &h, "retry-after-ms: 1234.5\r\n", NOW), 1, "retry-after-ms fractional");
    TAP_NEAR(h.retry_after_ms, 1.2345, "retry-after-ms in seconds");
    TAP_NEAR(ratelimit_response_delay(&h), 1.2345, "retry-after-ms wins over retry-after");
    TAP_INT(feed(NULL, &h, "retry-after-ms: soon\r\n", NOW), -1, "garbage retry-after-ms");
    TAP_NEAR(h.retry_after_ms, RATELIMIT_NO_TIME, "garbage retry-after-ms cleared");
    TAP_NEAR(ratelimit_response_delay(&h), 30, "falls back to retry-after");
    TAP_INT(feed(NULL, &h, "retry-after: Tue, 21 Oct 2025 07:27:40 GMT\r\n", NOW), 1,
            "retry-after HTTP date");
    TAP_NEAR(h.retry_after, 60, "HTTP date minus now_epoch = 60 s");
    TAP_INT(feed(NULL, &h, "retry-after: Tue, 21 Oct 2025 07:00:00 GMT\r\n", NOW), 1,
            "retry-after date in the past");
    TAP_NEAR(h.retry_after, 0, "past date = no wait");
    TAP_INT(feed(NULL, &h, "retry-after: in a while\r\n", NOW), -1, "garbage retry-after");
    TAP_NEAR(h.retry_after, RATELIMIT_NO_TIME, "garbage retry-after cleared");
    TAP_INT(feed(NULL, &h, "retry-after: -3\r\n", NOW), -1, "negative retry-after rejected");
    /* a number too large to read is a wait too long, not none (until 2026-12: none) */
    static const char *const huge[] = {"retry-after: 9999999999999999999\r\n",
                                       "retry-after-ms: 99999999999999999999\r\n"};
    for (int i = 0; i < 2; i++) {
        TAP_OK(feed(NULL, &h, huge[i], NOW) == 1, "%.14s past what a decimal holds", huge[i]);
        TAP_NEAR(i ? h.retry_after_ms : h.retry_after, 1e15, "... reads as huge (seconds)");
    }
    TAP_INT(feed(NULL, &h, "retry-after-ms: 99999999999999999999x\r\n", NOW), -1,
            "... but not when it is not a number");
    ratelimit_response_init(&h);
    TAP_INT(h.should_retry, -1, "x-should-retry not sent");
    TAP_INT(feed(NULL, &h, "x-should-retry: TRUE\r\n", NOW), 1, "x-should-retry true");
    TAP_INT(h.should_retry, 1, "should_retry = 1");
    TAP_INT(feed(NULL, &h, "x-should-retry: false\r\n", NOW), 1, "x-should-retry false");
    TAP_INT(h.should_retry, 0, "should_retry = 0");
    TAP_INT(feed(NULL, &h, "x-should-retry: maybe\r\n", NOW), -1, "x-should-retry garbage");
    TAP_INT(h.should_retry, -1, "garbage -> not sent");
    TAP_INT(feed(NULL, NULL, "x-should-retry: true\r\n", NOW), 1, "both outputs may be NULL");

    /* Groq: per-day request limit, reset duration taken literally */
    struct ratelimit_state g;
    ratelimit_state_init(&g, 0, 0);
    feed(&g, NULL, "x-ratelimit-limit-requests: 14400\r\n", NOW);
    feed(&g, NULL, "x-ratelimit-remaining-requests: 0\r\n", NOW);
    feed(&g, NULL, "x-ratelimit-reset-requests: 2m59.56s\r\n", NOW);
    TAP_NEAR(g.req.reset_at, NOW + 179.56, "Groq reset taken literally");
    TAP_NEAR(ratelimit_wait_time(&g, NOW, 10), 179.56, "Groq exhausted: wait until reset");
    TAP_NEAR(ratelimit_wait_time(&g, NOW + 179.56, 10), 0, "Groq after reset: go");
    char line[128];
    ratelimit_format(&g, NOW + 180, line, sizeof line);
    TAP_STR(line, "req 14k/14k", "Groq refilled to the daily limit after reset (tokens never reported: left out)");
}

/* ---- pacing ---- */

static void test_pacing(void)
{
    struct ratelimit_state s;
    ratelimit_state_init(&s, 0, 0);
    TAP_NEAR(ratelimit_wait_time(&s, NOW, 100000), 0, "all unknown: never wait");
    ratelimit_note_sent(&s, NOW, 100000);
    TAP_NEAR(ratelimit_wait_time(&s, NOW, 100000), 0, "still unknown after sending");

    feed(&s, NULL, "x-ratelimit-limit-requests: 60\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-remaining-requests: 0\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-reset-requests: 12s\r\n", NOW);
    TAP_NEAR(ratelimit_wait_time(&s, NOW, 0), 12, "0 requests left, reset in 12 s: wait 12 s");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 5, 0), 7, "5 s later: wait 7 s");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 12, 0), 0, "at the reset: go");
    ratelimit_note_sent(&s, NOW + 12, 0);
    TAP_INT(s.req.remaining, 59, "after the reset a send debits the refilled limit");

    struct ratelimit_state t;
    ratelimit_state_init(&t, 0, 0);
    feed(&t, NULL, "x-ratelimit-limit-tokens: 1000\r\n", NOW);
    feed(&t, NULL, "x-ratelimit-remaining-tokens: 100\r\n", NOW);
    feed(&t, NULL, "x-ratelimit-reset-tokens: 30s\r\n", NOW);
    TAP_NEAR(ratelimit_wait_time(&t, NOW, 50), 0, "50 tokens fit in 100");
    TAP_NEAR(ratelimit_wait_time(&t, NOW, 500), 30, "500 tokens: wait for the reset");
    TAP_NEAR(ratelimit_wait_time(&t, NOW, 5000), 30, "more than the limit: wait until full");
    TAP_NEAR(ratelimit_wait_time(&t, NOW + 31, 5000), 0, "more than the limit, full: go");
    ratelimit_note_sent(&t, NOW, 60);
    TAP_INT(t.tok.remaining, 40, "note_sent debits tokens");
    TAP_NEAR(ratelimit_wait_time(&t, NOW, 50), 30,
             "after the debit 50 no longer fits (tokens do not move the reset)");
    ratelimit_note_sent(&t, NOW, 1e30);
    TAP_INT(t.tok.remaining, 0, "huge debit clamps at 0");
    ratelimit_note_sent(&t, NOW, NAN);
    TAP_INT(t.tok.remaining, 0, "NaN estimate is harmless");

    /* Azure: remaining 0 without a reset: unknown when, so no wait */
    struct ratelimit_state az;
    ratelimit_state_init(&az, 0, 0);
    feed(&az, NULL, "x-ratelimit-remaining-requests: 0\r\n", NOW);
    TAP_NEAR(ratelimit_wait_time(&az, NOW, 10), 0, "remaining 0 without reset: no wait");

    /* configured buckets: a second's worth at a time (until 2026-12 a minute's: rpm = 120
     * sent 120 requests at once to a server that enforces 2 a second) */
    struct ratelimit_state c;
    ratelimit_state_init(&c, 60, 6000);
    TAP_NEAR(ratelimit_wait_time(&c, NOW, 100), 0, "configured bucket starts full");
    ratelimit_note_sent(&c, NOW, 0);
    TAP_NEAR(ratelimit_wait_time(&c, NOW, 0), 1, "60 rpm: one sent, wait 1 s for the next");
    TAP_NEAR(ratelimit_wait_time(&c, NOW + 0.5, 0), 0.5, "half a second later: 0.5 s");
    TAP_NEAR(ratelimit_wait_time(&c, NOW + 1, 0), 0, "one second later: go");
    struct ratelimit_state c2;
    ratelimit_state_init(&c2, 600, 0);
    for (int i = 0; i < 10; i++)
        ratelimit_note_sent(&c2, NOW, 0);
    TAP_NEAR(ratelimit_wait_time(&c2, NOW, 0), 0.1, "600 rpm: a burst of 10, then 0.1 s apart");
    struct ratelimit_state ct;
    ratelimit_state_init(&ct, 0, 6000);
    TAP_NEAR(ratelimit_wait_time(&ct, NOW, 3000), 0, "tpm: a request larger than a second's "
             "worth goes when the bucket is full");
    ratelimit_note_sent(&ct, NOW, 3000);
    TAP_NEAR(ratelimit_wait_time(&ct, NOW, 3000), 30, "tpm 6000, 3000 sent: the next 3000 in 30 s");
    TAP_NEAR(ratelimit_wait_time(&ct, NOW, 12000), 30, "larger than the bucket: until it is full");
    TAP_NEAR(ratelimit_wait_time(&ct, NOW + 30, 3000), 0, "30 s later: go");

    /* header and configured limits combine: the longer wait wins */
    struct ratelimit_state both;
    ratelimit_state_init(&both, 60, 0);
    feed(&both, NULL, "x-ratelimit-remaining-requests: 0\r\n", NOW);
    feed(&both, NULL, "x-ratelimit-reset-requests: 3s\r\n", NOW);
    TAP_NEAR(ratelimit_wait_time(&both, NOW, 0), 3, "header wait beats a full bucket");

    /* local debits against server remaining */
    struct ratelimit_state d;
    ratelimit_state_init(&d, 0, 0);
    feed(&d, NULL, "x-ratelimit-remaining-requests: 2\r\n", NOW);
    feed(&d, NULL, "x-ratelimit-reset-requests: 20s\r\n", NOW);
    ratelimit_note_sent(&d, NOW, 0);
    TAP_NEAR(ratelimit_wait_time(&d, NOW, 0), 0, "one request left");
    ratelimit_note_sent(&d, NOW + 1, 0);
    TAP_NEAR(ratelimit_wait_time(&d, NOW + 1, 0), 19, "local debits exhaust it: wait for reset");

    /* remaining without reset goes stale after a minute */
    TAP_INT(az.req.remaining, 0, "Azure remaining 0 stored");
    struct ratelimit_key k = {az, 0};
    const struct ratelimit_key *kp[] = {&k};
    TAP_INT(ratelimit_pool_pick(kp, 1, NOW + 61, NULL), 0, "stale key still pickable");
    char buf[96];
    ratelimit_format(&az, NOW + 61, buf, sizeof buf);
    TAP_STR(buf, "req ?/?", "stale remaining shown as unknown (tokens never reported: left out)");
    ratelimit_format(&az, NOW + 30, buf, sizeof buf);
    TAP_STR(buf, "req 0/?", "fresh Azure remaining shown");
}

/* ---- retry policy ---- */

static enum ratelimit_verdict decide(int status, enum ratelimit_net net, const char *code,
                                     int shown, int attempt, const struct ratelimit_policy *p,
                                     const struct ratelimit_response *r, double *delay,
                                     char *reason)
{
    return ratelimit_should_retry(status, net, code, shown, attempt, p, r, delay, reason, 160);
}

static void check_verdict(int status, enum ratelimit_net net, const char *code,
                          enum ratelimit_verdict want, const char *name)
{
    struct ratelimit_policy p;
    policy_fixed(&p, 0.5);
    struct ratelimit_response r;
    ratelimit_response_init(&r);
    double delay = -1;
    char reason[160];
    enum ratelimit_verdict v = decide(status, net, code, 0, 1, &p, &r, &delay, reason);
    if (!TAP_OK(v == want, "verdict %s -> %s", name, ratelimit_verdict_name(want)))
        printf("#   got %s (%s)\n", ratelimit_verdict_name(v), reason);
    TAP_OK(v == RATELIMIT_RETRY ? delay > 0 : delay == 0, "delay %s", name);
}

static void test_retry(void)
{
    check_verdict(429, RATELIMIT_NET_OK, "rate_limit_exceeded", RATELIMIT_RETRY, "429");
    check_verdict(429, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "429 without code");
    check_verdict(429, RATELIMIT_NET_OK, "insufficient_quota", RATELIMIT_NO_QUOTA,
                  "429 insufficient_quota");
    check_verdict(408, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "408");
    check_verdict(409, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "409");
    check_verdict(500, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "500");
    check_verdict(502, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "502");
    check_verdict(503, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "503");
    check_verdict(504, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "504");
    check_verdict(529, RATELIMIT_NET_OK, NULL, RATELIMIT_RETRY, "529");
    check_verdict(400, RATELIMIT_NET_OK, "invalid_request_error", RATELIMIT_NO_STATUS, "400");
    check_verdict(401, RATELIMIT_NET_OK, "invalid_api_key", RATELIMIT_NO_STATUS, "401");
    check_verdict(403, RATELIMIT_NET_OK, NULL, RATELIMIT_NO_STATUS, "403");
    check_verdict(404, RATELIMIT_NET_OK, "model_not_found", RATELIMIT_NO_STATUS, "404");
    check_verdict(422, RATELIMIT_NET_OK, NULL, RATELIMIT_NO_STATUS, "422");
    check_verdict(413, RATELIMIT_NET_OK, "rate_limit_exceeded", RATELIMIT_NO_TOO_LARGE, "413");
    check_verdict(200, RATELIMIT_NET_OK, NULL, RATELIMIT_NO_SUCCESS, "200");
    check_verdict(200, RATELIMIT_NET_OK, "server_error", RATELIMIT_RETRY, "200 + stream error");
    check_verdict(200, RATELIMIT_NET_OK, "content_filter", RATELIMIT_NO_SUCCESS,
                  "200 + other stream error");
    check_verdict(0, RATELIMIT_NET_CONNECT, NULL, RATELIMIT_RETRY, "connect failure");
    check_verdict(0, RATELIMIT_NET_TIMEOUT, NULL, RATELIMIT_RETRY, "timeout");
    check_verdict(0, RATELIMIT_NET_DROPPED, NULL, RATELIMIT_RETRY, "dropped connection");
    check_verdict(0, RATELIMIT_NET_FATAL, NULL, RATELIMIT_NO_STATUS, "fatal transport error");

    struct ratelimit_policy p;
    struct ratelimit_response r;
    char reason[160];
    double delay;
    policy_fixed(&p, 0.5);
    ratelimit_response_init(&r);

    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 1, 1, &p, &r, &delay, reason), RATELIMIT_NO_SHOWN,
            "no retry after answer text was shown");
    TAP_STR(reason, "HTTP 500 server error after the answer started; not retrying",
            "reason after answer shown");
    TAP_INT(decide(0, RATELIMIT_NET_DROPPED, NULL, 1, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_SHOWN, "dropped after text shown: no retry");

    /* an error event in a 200's stream, said in words (until 2026-12 "HTTP 200 stream error
     * server_error") */
    TAP_INT(decide(200, RATELIMIT_NET_OK, "overloaded", 0, 1, &p, &r, &delay, reason),
            RATELIMIT_RETRY, "an overload in the stream: retried");
    TAP_OK(strncmp(reason, "the server is overloaded (said in the stream), retrying", 55) == 0,
           "... and said so: %s", reason);
    decide(200, RATELIMIT_NET_OK, "server_error", 0, 1, &p, &r, &delay, reason);
    TAP_OK(strncmp(reason, "a server error in the stream (server_error), retrying", 53) == 0,
           "a server error in the stream: said so: %s", reason);
    TAP_INT(decide(413, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_TOO_LARGE, "413 distinct verdict");
    TAP_STR(reason, "HTTP 413 request too large for the rate limit; not retrying the same request",
            "413 reason");

    /* x-should-retry */
    r.should_retry = 0;
    TAP_INT(decide(503, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_SERVER_SAYS, "x-should-retry false forbids a 503 retry");
    TAP_STR(reason, "HTTP 503 service unavailable; server says not to retry", "forbid reason");
    r.should_retry = 1;
    TAP_INT(decide(400, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "x-should-retry true allows a 400 retry");
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 1, 1, &p, &r, &delay, reason), RATELIMIT_NO_SHOWN,
            "x-should-retry true cannot undo shown text");
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 0, 3, &p, &r, &delay, reason),
            RATELIMIT_NO_ATTEMPTS, "x-should-retry true still honours max retries");
    r.should_retry = -1;

    /* attempts */
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 0, 2, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "attempt 2 of 3 may retry");
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 0, 3, &p, &r, &delay, reason),
            RATELIMIT_NO_ATTEMPTS, "attempt 3 of 3: give up");
    TAP_STR(reason, "HTTP 500 server error; giving up after 3 attempts", "give-up reason");
    p.max_retries = 0;
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_ATTEMPTS, "max_retries 0: no retry");
    p.max_retries = 5;
    TAP_INT(decide(500, RATELIMIT_NET_OK, NULL, 0, 5, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "max_retries 5: attempt 5 retries");
    TAP_OK(strstr(reason, "(attempt 6/6)") != NULL, "attempt counter in reason: %s", reason);
    p.max_retries = 2;

    /* server delays */
    feed(NULL, &r, "retry-after-ms: 1200\r\n", NOW);
    TAP_INT(decide(429, RATELIMIT_NET_OK, "rate_limit_exceeded", 0, 1, &p, &r, &delay, reason),
            RATELIMIT_RETRY, "429 with retry-after-ms retries");
    TAP_NEAR(delay, 1.2, "server delay wins over backoff");
    TAP_STR(reason, "HTTP 429 rate limited, retrying in 1.2 s (attempt 2/3)", "reason text");
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 120\r\n", NOW);
    TAP_INT(decide(429, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_WAIT_TOO_LONG, "retry-after 120 > max_retry_wait 60: refuse");
    TAP_OK(strstr(reason, "server asks to wait 120 s (more than max_retry_wait 60 s)") != NULL,
           "max-wait reason: %s", reason);
    TAP_NEAR(delay, 0, "no delay when refusing");
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 9999999999999999999\r\n", NOW);
    TAP_INT(decide(429, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_WAIT_TOO_LONG, "retry-after too large to read: refuse at once");
    TAP_OK(strstr(reason, "server asks to wait over 1000000000000000 s (more than "
                          "max_retry_wait 60 s)") != NULL, "... saying so: %s", reason);
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 120\r\n", NOW);
    p.max_retry_wait = 200;
    TAP_INT(decide(429, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "raised max_retry_wait allows it");
    TAP_NEAR(delay, 120, "waits the server's 120 s");
    p.max_retry_wait = 60;
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 60\r\n", NOW);
    TAP_INT(decide(503, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "exactly max_retry_wait is allowed");

    /* 429 without retry-after: the exhausted dimension's reset is the server's word */
    ratelimit_response_init(&r);
    feed(NULL, &r, "x-ratelimit-remaining-tokens: 0\r\n", NOW);
    feed(NULL, &r, "x-ratelimit-reset-tokens: 12s\r\n", NOW);
    feed(NULL, &r, "x-ratelimit-remaining-requests: 10\r\n", NOW);
    feed(NULL, &r, "x-ratelimit-reset-requests: 50s\r\n", NOW);
    TAP_INT(decide(429, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason), RATELIMIT_RETRY,
            "429 with exhausted tokens retries");
    TAP_NEAR(delay, 12, "waits for the token reset, not the request reset");
    ratelimit_response_init(&r);
    feed(NULL, &r, "x-ratelimit-remaining-requests: 0\r\n", NOW);
    feed(NULL, &r, "x-ratelimit-reset-requests: 2m59.56s\r\n", NOW);
    TAP_INT(decide(429, RATELIMIT_NET_OK, NULL, 0, 1, &p, &r, &delay, reason),
            RATELIMIT_NO_WAIT_TOO_LONG, "Groq daily limit reset in 3 min: refuse");
    TAP_OK(strstr(reason, "limit resets in 180 s (more than max_retry_wait 60 s)") != NULL,
           "reset reason: %s", reason);

    /* backoff sequence with a fixed random source */
    static const double nominal[] = {0.5, 1, 2, 4, 8, 8, 8, 8};
    struct ratelimit_policy q;
    policy_fixed(&q, 0);
    q.max_retries = 100;
    ratelimit_response_init(&r);
    int ok_b = 1, ok_eq_lo = 1, ok_eq_hi = 1, ok_full = 1, ok_none = 1;
    for (int a = 1; a <= 8; a++) {
        ok_b &= near(ratelimit_backoff(&q, a), nominal[a - 1]);
        q.jitter = RATELIMIT_JITTER_EQUAL;
        fixed_value = 0;
        decide(503, RATELIMIT_NET_OK, NULL, 0, a, &q, &r, &delay, reason);
        ok_eq_lo &= near(delay, nominal[a - 1] / 2);
        fixed_value = 0.999;
        decide(503, RATELIMIT_NET_OK, NULL, 0, a, &q, &r, &delay, reason);
        ok_eq_hi &= delay < nominal[a - 1] && near(delay, nominal[a - 1] * 0.9995);
        q.jitter = RATELIMIT_JITTER_FULL;
        fixed_value = 0.25;
        decide(503, RATELIMIT_NET_OK, NULL, 0, a, &q, &r, &delay, reason);
        ok_full &= near(delay, nominal[a - 1] * 0.25);
        q.jitter = RATELIMIT_JITTER_NONE;
        decide(503, RATELIMIT_NET_OK, NULL, 0, a, &q, &r, &delay, reason);
        ok_none &= near(delay, nominal[a - 1]);
    }
    TAP_OK(ok_b, "backoff doubles 0.5 .. 8 and stays capped");
    TAP_OK(ok_eq_lo, "equal jitter, random 0: half the backoff");
    TAP_OK(ok_eq_hi, "equal jitter, random ~1: just under the backoff");
    TAP_OK(ok_full, "full jitter, random 0.25: a quarter");
    TAP_OK(ok_none, "no jitter: the backoff itself");
    TAP_NEAR(ratelimit_backoff(&q, INT_MAX), 8, "huge attempt number stays capped");
    q.jitter = RATELIMIT_JITTER_FULL;
    fixed_value = 7.5; /* a broken random source is clamped */
    decide(503, RATELIMIT_NET_OK, NULL, 0, 1, &q, &r, &delay, reason);
    TAP_OK(delay >= 0 && delay < 0.5, "random >= 1 clamped (%g)", delay);
    fixed_value = NAN;
    decide(503, RATELIMIT_NET_OK, NULL, 0, 1, &q, &r, &delay, reason);
    TAP_OK(delay == 0, "NaN random clamped to 0");
    random_calls = 0;
    feed(NULL, &r, "retry-after-ms: 10\r\n", NOW);
    decide(503, RATELIMIT_NET_OK, NULL, 0, 1, &q, &r, &delay, reason);
    TAP_INT(random_calls, 0, "server delay does not consume randomness");

    /* the default generator stays in bounds */
    struct ratelimit_policy dflt;
    ratelimit_policy_init(&dflt);
    dflt.max_retries = 10;
    ratelimit_response_init(&r);
    int inb = 1;
    double sum = 0;
    for (int i = 0; i < 2000; i++) {
        int a = 1 + i % 6;
        decide(500, RATELIMIT_NET_OK, NULL, 0, a, &dflt, &r, &delay, reason);
        double d = ratelimit_backoff(&dflt, a);
        inb &= delay >= d / 2 && delay < d;
        if (a == 1)
            sum += delay;
    }
    TAP_OK(inb, "default random: equal jitter within [d/2, d)");
    double mean = sum / (2000 / 6 + 1);
    TAP_OK(mean > 0.33 && mean < 0.42, "default random is spread (mean %.3f of [0.25,0.5))", mean);
    TAP_INT(ratelimit_should_retry(500, RATELIMIT_NET_OK, NULL, 0, 1, &dflt, NULL, NULL, NULL, 0),
            RATELIMIT_RETRY, "NULL response, delay and reason are allowed");

    /* the reason fits any buffer */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ratelimit_should_retry(429, RATELIMIT_NET_OK, NULL, 0, 1, &dflt, NULL, &delay, tiny, 8);
    TAP_OK(memchr(tiny, '\0', 8) != NULL, "reason truncated into a small buffer");
}

static void check_explain(struct ratelimit_failure f, const char *want, const char *name)
{
    char *m = ratelimit_explain(&f);
    if (!TAP_OK(strstr(m, want) != NULL, "explain %s", name))
        printf("#   message: %s\n#   wanted:  %s\n", m, want);
    free(m);
}

static void test_explain(void)
{
    check_explain((struct ratelimit_failure){.status = 401}, "OPENAI_API_KEY", "401 default env");
    check_explain((struct ratelimit_failure){.status = 401, .key_env = "GROQ_API_KEY"},
                  "$GROQ_API_KEY", "401 custom env");
    check_explain((struct ratelimit_failure){.status = 403}, "lacks access to this model",
                  "403 access");
    check_explain((struct ratelimit_failure){.status = 413, .error_code = "request_too_large"},
                  "over the server's size limit", "413 request_too_large: size, not a rate");
    {
        /* a 429 that waited as asked until max_rate_wait: that is the one to raise */
        struct ratelimit_response rr;
        ratelimit_response_init(&rr);
        rr.retry_after = 1;
        check_explain((struct ratelimit_failure){.status = 429, .resp = &rr,
                                                 .max_retry_wait = 60},
                      "raise max_rate_wait", "429 waited out: max_rate_wait named");
    }
    check_explain((struct ratelimit_failure){.status = 429, .error_code = "insufficient_quota"},
                  "billing", "429 insufficient_quota -> billing");
    check_explain((struct ratelimit_failure){.status = 404,
                                             .url = "https://api.example.com/v1/chat/completions"
                                                    "?api-version=1#x"},
                  "HTTP 404 at /v1/chat/completions: the model name or the base URL is wrong",
                  "404 shows the path");
    check_explain((struct ratelimit_failure){.status = 404, .url = "http://localhost:8080"},
                  "HTTP 404 at /:", "404 with a bare host");
    check_explain((struct ratelimit_failure){.status = 404,
                                             .url = "https://api.example.com/v1/chat/completions"},
                  "(it usually ends in /v1).", "404: the base URL ends in /v1");
    check_explain((struct ratelimit_failure){.status = 404,
                                             .url = "https://generativelanguage.googleapis.com/v1"
                                                    "/models/gemini-9:streamGenerateContent"},
                  "(it usually ends in /v1beta).", "404 from Gemini: its base ends in /v1beta");
    check_explain((struct ratelimit_failure){.status = 413}, "too large for this model's rate",
                  "413 prompt too large");
    struct ratelimit_response r;
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 120\r\n", NOW);
    check_explain((struct ratelimit_failure){.status = 429, .resp = &r, .max_retry_wait = 60},
                  "server asks to wait 120 s (more than max_retry_wait 60 s)", "429 long wait");
    check_explain((struct ratelimit_failure){.status = 503}, "HTTP 503: the server failed", "503");
    check_explain((struct ratelimit_failure){.net = RATELIMIT_NET_CONNECT}, "Could not connect",
                  "connect failure");
    check_explain((struct ratelimit_failure){.net = RATELIMIT_NET_TIMEOUT}, "timed out",
                  "timeout");
    check_explain((struct ratelimit_failure){.status = 400, .message = "max_tokens is too large"},
                  "Server said: max_tokens is too large", "server message appended");
    check_explain((struct ratelimit_failure){.status = 200, .error_code = "content_filter"},
                  "(content_filter)", "stream error code");
}

/* ---- breaker ---- */

static void test_breaker(void)
{
    struct ratelimit_breaker b;
    double w = -1;
    ratelimit_breaker_init(&b, 0, 0);
    TAP_INT(b.threshold, 5, "default threshold 5");
    TAP_NEAR(b.cooldown, 30, "default cool-down 30 s");
    ratelimit_breaker_init(&b, 3, 10);
    TAP_INT(ratelimit_breaker_allow(&b, NOW, &w), 1, "closed lets requests through");
    TAP_NEAR(w, 0, "no wait when closed");
    ratelimit_breaker_failure(&b, NOW);
    ratelimit_breaker_failure(&b, NOW);
    TAP_STR(ratelimit_breaker_name(b.mode), "closed", "2 failures: still closed");
    ratelimit_breaker_success(&b, NOW);
    ratelimit_breaker_failure(&b, NOW);
    ratelimit_breaker_failure(&b, NOW);
    TAP_STR(ratelimit_breaker_name(b.mode), "closed", "success reset the count");
    ratelimit_breaker_failure(&b, NOW + 1);
    TAP_STR(ratelimit_breaker_name(b.mode), "open", "3 consecutive failures open it");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 2, &w), 0, "open refuses");
    TAP_NEAR(w, 9, "open: wait for the rest of the cool-down");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 11, &w), 1, "after the cool-down one probe goes");
    TAP_STR(ratelimit_breaker_name(b.mode), "half-open", "probing: half-open");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 11.5, &w), 0, "a second probe waits");
    TAP_NEAR(w, 9.5, "until the probe is overdue");
    ratelimit_breaker_failure(&b, NOW + 12);
    TAP_STR(ratelimit_breaker_name(b.mode), "open", "failed probe reopens at once");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 21, &w), 0, "reopened: full cool-down again");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 22, &w), 1, "second probe after cool-down");
    ratelimit_breaker_success(&b, NOW + 23);
    TAP_STR(ratelimit_breaker_name(b.mode), "closed", "successful probe closes it");
    TAP_INT(b.failures, 0, "failure count cleared");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 23, NULL), 1, "closed again, NULL wait ok");
    /* a probe that never reports */
    for (int i = 0; i < 3; i++)
        ratelimit_breaker_failure(&b, NOW + 30);
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 40, &w), 1, "probe leaves");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 49, &w), 0, "lost probe: still waiting");
    TAP_INT(ratelimit_breaker_allow(&b, NOW + 50, &w), 1, "lost probe overdue: another probe");

    TAP_INT(ratelimit_breaker_counts(500, RATELIMIT_NET_OK, NULL), 1, "500 counts as failure");
    TAP_INT(ratelimit_breaker_counts(503, RATELIMIT_NET_OK, NULL), 1, "503 counts");
    TAP_INT(ratelimit_breaker_counts(408, RATELIMIT_NET_OK, NULL), 1, "408 counts");
    TAP_INT(ratelimit_breaker_counts(429, RATELIMIT_NET_OK, NULL), 0, "429 does not count");
    TAP_INT(ratelimit_breaker_counts(400, RATELIMIT_NET_OK, NULL), 0, "400 does not count");
    TAP_INT(ratelimit_breaker_counts(200, RATELIMIT_NET_OK, NULL), 0, "200 does not count");
    TAP_INT(ratelimit_breaker_counts(200, RATELIMIT_NET_OK, "overloaded_error"), 1,
            "an overloaded_error event in a 200's stream counts, as a 5xx");
    TAP_INT(ratelimit_breaker_counts(200, RATELIMIT_NET_OK, "invalid_request_error"), 0,
            "another error event does not");
    TAP_INT(ratelimit_breaker_counts(0, RATELIMIT_NET_CONNECT, NULL), 1, "connect failure counts");
    TAP_INT(ratelimit_breaker_counts(0, RATELIMIT_NET_TIMEOUT, NULL), 1, "timeout counts");
    TAP_INT(ratelimit_breaker_counts(0, RATELIMIT_NET_FATAL, NULL), 0, "fatal transport does not");
}

/* ---- key pool ---- */

static void key_with(struct ratelimit_key *k, const char *req_rem, const char *tok_rem)
{
    ratelimit_state_init(&k->state, 0, 0);
    k->cool_until = 0;
    char line[96];
    if (req_rem) {
        snprintf(line, sizeof line, "x-ratelimit-remaining-requests: %s", req_rem);
        feed(&k->state, NULL, line, NOW);
        feed(&k->state, NULL, "x-ratelimit-limit-requests: 100", NOW);
        feed(&k->state, NULL, "x-ratelimit-reset-requests: 20s", NOW);
    }
    if (tok_rem) {
        snprintf(line, sizeof line, "x-ratelimit-remaining-tokens: %s", tok_rem);
        feed(&k->state, NULL, line, NOW);
        feed(&k->state, NULL, "x-ratelimit-reset-tokens: 40s", NOW);
    }
}

static void test_pool(void)
{
    struct ratelimit_key a, b, c, d;
    key_with(&a, "10", "5000");
    key_with(&b, "90", "100");
    key_with(&c, NULL, NULL);
    key_with(&d, "0", "9000");
    const struct ratelimit_key *keys[] = {&a, &b, &c, &d};
    double w = -1;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW, &w), 1, "most remaining requests wins");
    TAP_NEAR(w, 0, "no wait when a key is healthy");
    b.cool_until = NOW + 10;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW, &w), 0, "cooling key skipped");
    a.cool_until = NOW + 5;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW, &w), 2, "unknown ranks above exhausted");
    c.cool_until = NOW + 7;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW, &w), 3, "exhausted key is the last resort");
    d.cool_until = NOW + 8;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW, &w), -1, "all cooling: none");
    TAP_NEAR(w, 5, "wait until the first key comes back");
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW + 6, &w), 0, "cool-down over: key back");
    a.cool_until = b.cool_until = c.cool_until = 0;
    d.cool_until = 0;
    TAP_INT(ratelimit_pool_pick(keys, 4, NOW + 21, &w), 3,
            "after the request reset a, b, d are full again; d wins on tokens");

    /* tokens break request ties; then the lower index */
    struct ratelimit_key e, f, g;
    key_with(&e, "50", "100");
    key_with(&f, "50", "900");
    key_with(&g, "50", "900");
    const struct ratelimit_key *ties[] = {&e, &f, &g};
    TAP_INT(ratelimit_pool_pick(ties, 3, NOW, NULL), 1, "tokens break a request tie");
    struct ratelimit_key h;
    key_with(&h, "50", "0");
    const struct ratelimit_key *tk[] = {&h, &c};
    TAP_INT(ratelimit_pool_pick(tk, 2, NOW, NULL), 1, "a key out of tokens ranks below unknown");
    key_with(&h, "50", "0");
    struct ratelimit_key i2;
    key_with(&i2, "50", NULL);
    const struct ratelimit_key *tk2[] = {&h, &i2};
    TAP_INT(ratelimit_pool_pick(tk2, 2, NOW, NULL), 1, "unknown tokens beat exhausted tokens");
    TAP_INT(ratelimit_pool_pick(NULL, 0, NOW, &w), -1, "empty pool");
    struct ratelimit_key x1, x2;
    key_with(&x1, "0", "10");  /* refills in 20 s */
    key_with(&x2, "10", "0");  /* refills in 40 s */
    const struct ratelimit_key *ex[] = {&x2, &x1, NULL};
    TAP_INT(ratelimit_pool_pick(ex, 3, NOW, NULL), 1, "among exhausted keys the sooner reset wins");

    /* cooling after failures */
    struct ratelimit_key k;
    struct ratelimit_response r;
    key_with(&k, "5", "0");
    ratelimit_response_init(&r);
    feed(NULL, &r, "retry-after: 7", NOW);
    ratelimit_key_note_failure(&k, 429, "rate_limit_exceeded", &r, NOW);
    TAP_NEAR(k.cool_until, NOW + 7, "429 cools until retry-after");
    key_with(&k, "5", "0");
    ratelimit_key_note_failure(&k, 429, NULL, NULL, NOW);
    TAP_NEAR(k.cool_until, NOW + 40, "429 without retry-after cools until the token reset");
    key_with(&k, NULL, NULL);
    ratelimit_key_note_failure(&k, 429, NULL, NULL, NOW);
    TAP_NEAR(k.cool_until, NOW + 5, "429 with nothing known cools 5 s");
    ratelimit_key_note_failure(&k, 500, NULL, NULL, NOW);
    TAP_NEAR(k.cool_until, NOW + 5, "500 leaves the key's health alone");
    ratelimit_key_note_failure(&k, 401, NULL, NULL, NOW);
    TAP_OK(isinf(k.cool_until), "401 kills the key");
    key_with(&k, NULL, NULL);
    ratelimit_key_note_failure(&k, 429, "insufficient_quota", NULL, NOW);
    TAP_OK(isinf(k.cool_until), "insufficient_quota kills the key");
    const struct ratelimit_key *dead[] = {&k};
    TAP_INT(ratelimit_pool_pick(dead, 1, NOW, &w), -1, "dead pool: none");
    TAP_OK(isinf(w), "dead pool: infinite wait");
}

/* ---- persistence and display ---- */

static void test_persist(void)
{
    struct ratelimit_state s, t;
    ratelimit_state_init(&s, 0, 0);
    feed_openai(&s, NULL, NOW);
    char line[256], line2[256], buf[96], buf2[96];
    int n = ratelimit_state_save(&s, NOW, EPOCH, line, sizeof line);
    TAP_INT(n, (long long)strlen(line), "save returns its length");
    TAP_STR(line, "rl1 req=4999/5000/1761031600.012/1761031600.000 "
                  "tok=159000/160000/1761031960.000/1761031600.000", "saved line");
    /* load in a later run: another monotonic base, 10 s later on the wall clock */
    ratelimit_state_init(&t, 30, 0);
    TAP_INT(ratelimit_state_load(&t, line, strlen(line), 50, EPOCH + 10), 0, "load succeeds");
    TAP_INT(t.tok.remaining, 159000, "loaded remaining tokens");
    TAP_INT(t.tok.limit, 160000, "loaded limit tokens");
    TAP_NEAR(t.tok.reset_at, 50 + 350, "reset moved onto the new monotonic clock");
    TAP_INT(t.req.remaining, 5000, "request reset already past: refilled");
    TAP_NEAR(t.rpm, 30, "configured rpm kept");
    TAP_INT(t.seen, 1, "loaded state counts as seen");
    ratelimit_format(&s, NOW + 10, buf, sizeof buf);
    ratelimit_format(&t, 50, buf2, sizeof buf2);
    TAP_STR(buf2, buf, "loaded state shows the same status");
    ratelimit_state_save(&t, 50, EPOCH + 10, line2, sizeof line2);
    ratelimit_state_save(&s, NOW + 10, EPOCH + 10, line, sizeof line);
    TAP_STR(line2, line, "save after load round-trips");

    struct ratelimit_state u;
    ratelimit_state_init(&u, 0, 0);
    ratelimit_state_save(&u, NOW, EPOCH, line, sizeof line);
    TAP_STR(line, "rl1 req=?/?/?/? tok=?/?/?/?", "unknown state saves as ?");
    feed(&u, NULL, "x-ratelimit-remaining-tokens: 0", NOW);
    ratelimit_state_save(&u, NOW, EPOCH, line, sizeof line);
    ratelimit_state_init(&t, 0, 0);
    TAP_INT(ratelimit_state_load(&t, line, strlen(line), NOW, EPOCH), 0, "Azure line loads");
    TAP_INT(t.tok.remaining, 0, "zero survives the round trip");
    TAP_INT(t.req.remaining, RATELIMIT_UNKNOWN, "unknown survives the round trip");
    const char *fut = "rl1 req=1/2/?/5 tok=?/?/?/? future=xyz\n";
    TAP_INT(ratelimit_state_load(&t, fut, strlen(fut), 0, 0), 0, "unknown fields are skipped");
    TAP_INT(t.req.limit, 2, "...and the known ones read");
    TAP_INT(t.answered, 0, "no ans=1: not known to answer without limits");
    /* An endpoint that answered without any rate-limit header: the next run skips the slow
     * start; the line an older version reads as "nothing known". */
    int need = ratelimit_answered_line(line, sizeof line);
    TAP_STR(line, "rl1 req=?/?/?/? tok=?/?/?/? ans=1", "answered line");
    TAP_INT(need, (int)strlen(line), "answered line: its length");
    ratelimit_state_init(&t, 0, 0);
    TAP_INT(ratelimit_state_load(&t, line, strlen(line), NOW, EPOCH), 0, "answered line loads");
    TAP_OK(t.answered == 1 && t.seen == 0, "answered, no limit seen (answered %d, seen %d)",
           t.answered, t.seen);
    ratelimit_state_save(&t, NOW, EPOCH, line2, sizeof line2);
    TAP_STR(line2, line, "answered line round-trips");
    const char *ans0 = "rl1 req=?/?/?/? tok=?/?/?/? ans=0";
    TAP_OK(ratelimit_state_load(&t, ans0, strlen(ans0), NOW, EPOCH) == 0 && !t.answered,
           "ans=0: not answered");

    const char *bad[] = {
        "", "rl2 req=?/?/?/? tok=?/?/?/?", "rl1", "rl1 req=?/?/?/?", "rl1 req=?/?/? tok=?/?/?/?",
        "rl1 req=a/?/?/? tok=?/?/?/?", "rl1 req=-1/?/?/? tok=?/?/?/?",
        "rl1 req=5/?/?/? tok=?/?/?/?",
        "rl1 req=?/?/?/?  tok", "rl1 req=?/?/1e5/? tok=?/?/?/?", "rl1req=?/?/?/? tok=?/?/?/?",
        "rl1 req=99999999999999999999/?/?/1 tok=?/?/?/?", "rl1 req=?/?/?/?x tok=?/?/?/?",
    };
    struct ratelimit_state keep;
    ratelimit_state_init(&keep, 0, 0);
    feed_openai(&keep, NULL, NOW);
    for (size_t i = 0; i < TT_ARRAY_LEN(bad); i++) {
        struct ratelimit_state v;
        memcpy(&v, &keep, sizeof v);
        int rc = ratelimit_state_load(&v, bad[i], strlen(bad[i]), NOW, EPOCH);
        TAP_OK(rc == -1 && memcmp(&v, &keep, sizeof v) == 0,
               "malformed line rejected, state unchanged: \"%s\"", bad[i]);
    }
    char small[10];
    n = ratelimit_state_save(&keep, NOW, EPOCH, small, sizeof small);
    TAP_OK(n > 9 && strlen(small) == 9, "save truncates to the buffer and reports the need");
}

static void check_fmt_dur(double secs, const char *want)
{
    char buf[32], name[64];
    snprintf(name, sizeof name, "format duration %g -> %s", secs, want);
    TAP_STR(ratelimit_format_duration(secs, buf, sizeof buf), want, name);
}

/* Issue 16: a response said 1,234 tokens remained (reset in 6 min), later answers came without
 * rate-limit headers: the old count must not hold a request for minutes. */
static void test_forget_unreported(void)
{
    struct ratelimit_state s;
    ratelimit_state_init(&s, 0, 0);
    feed(&s, NULL, "x-ratelimit-limit-tokens: 30000\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-remaining-tokens: 1234\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-reset-tokens: 6m0s\r\n", NOW);
    ratelimit_note_sent(&s, NOW + 1, 1000);
    TAP_OK(ratelimit_wait_time(&s, NOW + 2, 1000) > 300, "1,234 tokens, 1,000 spent: waits");
    struct ratelimit_response r;
    ratelimit_response_init(&r); /* an answer with no rate-limit header at all */
    ratelimit_forget_unreported(&s, &r);
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 2, 1000), 0,
             "a later answer without the headers: the stale count no longer holds requests");
    char buf[96];
    TAP_STR(ratelimit_format(&s, NOW + 2, buf, sizeof buf), "tok ?/30k",
            "and it is shown as unknown (requests never reported: left out)");
    /* an answer that reports the tokens keeps them */
    feed(&s, NULL, "x-ratelimit-remaining-tokens: 10\r\n", NOW + 3);
    feed(&s, NULL, "x-ratelimit-reset-tokens: 1m0s\r\n", NOW + 3);
    ratelimit_response_init(&r);
    feed(&s, &r, "x-ratelimit-remaining-tokens: 10\r\n", NOW + 3);
    ratelimit_forget_unreported(&s, &r);
    TAP_OK(ratelimit_wait_time(&s, NOW + 4, 1000) > 50, "a reported count stays");
}

static void test_format(void)
{
    struct ratelimit_state s;
    char buf[96];
    ratelimit_state_init(&s, 0, 0);
    TAP_STR(ratelimit_format(&s, NOW, buf, sizeof buf), "", "nothing sent: empty string");
    feed_openai(&s, NULL, NOW);
    TAP_STR(ratelimit_format(&s, NOW, buf, sizeof buf), "req 4999/5000 (12ms) tok 159k/160k (6m0s)",
            "OpenAI status text: each limit with its own reset");
    TAP_STR(ratelimit_format(&s, NOW + 300, buf, sizeof buf),
            "req 5000/5000 tok 159k/160k (1m0s)",
            "later: requests refilled, reset counts down");
    TAP_STR(ratelimit_format(&s, NOW + 400, buf, sizeof buf),
            "req 5000/5000 tok 160k/160k", "all reset: full, no reset shown");
    struct ratelimit_state az;
    ratelimit_state_init(&az, 0, 0);
    feed(&az, NULL, "x-ratelimit-remaining-requests: -1", NOW);
    feed(&az, NULL, "x-ratelimit-remaining-tokens: 1500000", NOW);
    TAP_STR(ratelimit_format(&az, NOW, buf, sizeof buf), "req ?/? tok 1.5M/?",
            "Azure status text");
    struct ratelimit_state big;
    ratelimit_state_init(&big, 0, 0);
    feed(&big, NULL, "x-ratelimit-limit-tokens: 2000000", NOW);
    feed(&big, NULL, "x-ratelimit-remaining-tokens: 1999999", NOW);
    feed(&big, NULL, "x-ratelimit-limit-requests: 10000", NOW);
    feed(&big, NULL, "x-ratelimit-remaining-requests: 9999", NOW);
    feed(&big, NULL, "x-ratelimit-reset-tokens: 1h2m3s", NOW);
    TAP_STR(ratelimit_format(&big, NOW, buf, sizeof buf), "req 9999/10k tok 1.9M/2M (1h2m3s)",
            "compact counts round down");
    feed(&big, NULL, "x-ratelimit-limit-tokens: 9223372036854775000", NOW);
    feed(&big, NULL, "x-ratelimit-remaining-tokens: 3000000000", NOW);
    TAP_STR(ratelimit_format(&big, NOW, buf, sizeof buf),
            "req 9999/10k tok 3G/9223372036G (1h2m3s)", "giant counts do not overflow");
    char small[12];
    memset(small, 'x', sizeof small);
    ratelimit_format(&s, NOW, small, sizeof small);
    TAP_STR(small, "req 4999/50", "format truncates to the buffer");

    check_fmt_dur(0.02, "20ms");
    check_fmt_dur(0.0001, "1ms");
    check_fmt_dur(1.2, "1.2s");
    check_fmt_dur(1.0, "1s");
    check_fmt_dur(12, "12s");
    check_fmt_dur(12.2, "13s");
    check_fmt_dur(360, "6m0s");
    check_fmt_dur(3723, "1h2m3s");
    check_fmt_dur(0, "0s");
    check_fmt_dur(-4, "0s");
    check_fmt_dur(NAN, "?");
    check_fmt_dur(INFINITY, "277777h46m40s");
}

/* A fresh state holding one report that was alone on the wire: limit, remaining and reset of
 * the dimension dim ("requests" or "tokens"). */
static void alone(struct ratelimit_state *s, const char *dim, const char *limit,
                  const char *remaining, const char *reset)
{
    char line[128];
    ratelimit_state_init(s, 0, 0);
    snprintf(line, sizeof line, "x-ratelimit-limit-%s: %s\r\n", dim, limit);
    feed(s, NULL, line, NOW);
    snprintf(line, sizeof line, "x-ratelimit-remaining-%s: %s\r\n", dim, remaining);
    feed(s, NULL, line, NOW);
    snprintf(line, sizeof line, "x-ratelimit-reset-%s: %s\r\n", dim, reset);
    feed(s, NULL, line, NOW);
    ratelimit_merge_report(s, s, NOW, 0, 1);
}

/* Reports of requests that were on the wire together, and the refill clock after a reset. */
static void test_merge(void)
{
    struct ratelimit_state s, before;
    ratelimit_state_init(&s, 0, 0);
    /* A burst of 10 refilled at 10/s: the probe alone says 9 left, full in 0.1 s. */
    feed(&s, NULL, "x-ratelimit-limit-requests: 600\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-remaining-requests: 9\r\n", NOW);
    feed(&s, NULL, "x-ratelimit-reset-requests: 0.1s\r\n", NOW);
    ratelimit_merge_report(&s, &s, NOW, 0, 1);
    TAP_INT(s.req.remaining, 9, "a report with nothing else on the wire is the state");
    for (int i = 0; i < 9; i++)
        ratelimit_note_sent(&s, NOW, 0);
    TAP_INT(s.req.remaining, 0, "nine sent: none left");
    /* The first of the nine reached the server first: it says 8 left and full in 0.2 s. */
    before = s;
    feed(&s, NULL, "x-ratelimit-remaining-requests: 8\r\n", NOW + 0.01);
    feed(&s, NULL, "x-ratelimit-reset-requests: 0.2s\r\n", NOW + 0.01);
    ratelimit_merge_report(&s, &before, NOW + 0.01, 8, 0);
    TAP_INT(s.req.remaining, 0, "8 later requests are not in its count: still none left");
    TAP_INT(s.req.full, 10, "8 left and 2 missing: a bucket of 10");
    TAP_NEAR(s.req.reset_at, NOW + 1.0, "its near reset does not undo the nine sends' clock");
    /* The last one sent reached the server before some others (other connections): its stale
     * report says 5 left with a nearer reset. Neither may let more requests go. */
    before = s;
    feed(&s, NULL, "x-ratelimit-remaining-requests: 5\r\n", NOW + 0.02);
    feed(&s, NULL, "x-ratelimit-reset-requests: 0.5s\r\n", NOW + 0.02);
    ratelimit_merge_report(&s, &before, NOW + 0.02, 0, 0);
    TAP_INT(s.req.remaining, 0, "a stale report sent in a crowd does not raise remaining");
    TAP_NEAR(s.req.reset_at, NOW + 1.0, "nor bring the reset nearer");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 0.5, 0), 0.5, "wait for the later reset");
    /* At the reset the bucket is full (10); the first spend starts the refill clock. */
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 1.0, 0), 0, "at the reset: go");
    for (int i = 0; i < 10; i++)
        ratelimit_note_sent(&s, NOW + 1.0, 0);
    TAP_INT(s.req.remaining, 0, "the full burst of 10 spent");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 1.02, 0), 0.98,
             "the 11th waits until the ten are back (10 x 0.1 s), not for nothing");

    /* Answers slower than the refill: a burst of 5 refilled at 20/s (1,200 a minute). The probe
     * alone says 4 left, full in 0.05 s; four more go at once. Their reports are not back when
     * that reset comes, so the reset must have moved on by what they spent. */
    alone(&s, "requests", "1200", "4", "0.050s");
    TAP_NEAR(s.req.unit, 0.05, "the refill rate of a per-minute limit: 60/1200 s a request");
    for (int i = 0; i < 4; i++)
        ratelimit_note_sent(&s, NOW, 0);
    TAP_NEAR(s.req.reset_at, NOW + 0.25, "four spent: full again 4 x 0.05 s after the report's reset");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 0.06, 0), 0.19,
             "past the report's own reset, the reports of the four still out: wait");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 0.25, 0), 0, "once the four are back in the bucket: go");
    /* A send from a bucket thought full starts a clock of one request, not of the whole burst. */
    ratelimit_note_sent(&s, NOW + 0.3, 0);
    TAP_INT(s.req.remaining, 4, "after the reset: the burst of 5, one spent");
    TAP_NEAR(s.req.reset_at, NOW + 0.35, "full again one refill (0.05 s) later");

    /* A new process whose first report says 0 left (the last one emptied the bucket), full in
     * 0.22 s: 4.4 requests missing at 20/s, so the bucket holds 5, not the 1,200 of the limit. */
    alone(&s, "requests", "1200", "0", "0.220s");
    TAP_INT(s.req.full, 5, "0 left and full in 0.22 s at 20/s: a bucket of 5");
    TAP_NEAR(ratelimit_wait_time(&s, NOW + 0.1, 0), 0.12, "wait for the reset");
    ratelimit_note_sent(&s, NOW + 0.22, 0);
    TAP_INT(s.req.remaining, 4, "at the reset the bucket holds 5 (one now spent), not 1,200");

    /* Groq: requests per day. The report shows the slower rate: 179.56 s for 30 missing. */
    alone(&s, "requests", "14400", "14370", "2m59.56s");
    TAP_NEAR(s.req.unit, 179.56 / 30, "a per-day limit: the report's slower rate is learnt");
    ratelimit_note_sent(&s, NOW, 0);
    TAP_NEAR(s.req.reset_at, NOW + 179.56, "one spend: never past the longest reset reported");
    /* A reset rounded to a second teaches no rate: 1 s for 10 missing is not 0.1 s each. */
    alone(&s, "requests", "10000", "9990", "1s");
    TAP_NEAR(s.req.unit, 0.006, "a 1 s reset: the per-minute rate, 60/10000 s");
    /* A 20-hour window: the reset never moves past it, however many are sent. */
    alone(&s, "requests", "1000", "999", "20h");
    for (int i = 0; i < 999; i++)
        ratelimit_note_sent(&s, NOW, 0);
    TAP_NEAR(ratelimit_wait_time(&s, NOW, 0), 72000, "999 sent in a 20 h window: wait 20 h, no more");
    /* A limit near INT64_MAX: no overflow (UBSan) and no wait. */
    alone(&s, "tokens", "9223372036854775500", "0", "60s");
    TAP_OK(s.tok.full <= 1, "a huge limit: no bucket size learnt from it");
}

/* Anthropic's anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}: resets are
 * RFC 3339 times, turned into durations against the wall clock. */
static void test_anthropic_headers(void)
{
    static const struct {
        const char *s;
        double want;
    } good[] = {
        {"2025-10-21T07:27:40Z", EPOCH + 60},          {"2025-10-21T07:27:40.5Z", EPOCH + 60.5},
        {"2025-10-21T09:27:40+02:00", EPOCH + 60},     {"2025-10-21T05:57:40-01:30", EPOCH + 60},
        {"2025-10-21t07:27:40z", EPOCH + 60},          {" 2025-10-21T07:27:40Z ", EPOCH + 60},
        {"2024-02-29T00:00:00Z", 1709164800},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        double got = -1;
        char name[96];
        snprintf(name, sizeof name, "RFC 3339 %s", good[i].s);
        TAP_INT(ratelimit_parse_rfc3339(good[i].s, strlen(good[i].s), &got), 0, name);
        TAP_NEAR(got, good[i].want, name);
    }
    static const char *const bad[] = {
        "", "2025-10-21", "2025-10-21T07:27:40", "2025-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
        "2025-10-21T24:00:00Z", "2025-10-21 07:27:40Z", "2025-10-21T07:27:40+2:00",
        "2025-10-21T07:27:40Zjunk", "1969-12-31T23:59:59Z", "2025-10-21T07:27:40.Z", "60s",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double got = 0;
        char name[96];
        snprintf(name, sizeof name, "RFC 3339: '%s' refused", bad[i]);
        TAP_INT(ratelimit_parse_rfc3339(bad[i], strlen(bad[i]), &got), -1, name);
    }

    struct ratelimit_state s;
    struct ratelimit_response r;
    ratelimit_state_init(&s, 0, 0);
    ratelimit_response_init(&r);
    TAP_INT(feed(&s, &r, "anthropic-ratelimit-requests-limit: 50\r\n", NOW), 1,
            "anthropic requests-limit is ours");
    feed(&s, &r, "anthropic-ratelimit-requests-remaining: 49\r\n", NOW);
    feed(&s, &r, "anthropic-ratelimit-requests-reset: 2025-10-21T07:27:40Z\r\n", NOW);
    feed(&s, &r, "Anthropic-RateLimit-Tokens-Limit: 40000\r\n", NOW);
    feed(&s, &r, "anthropic-ratelimit-tokens-remaining: 39000\r\n", NOW);
    TAP_INT(feed(&s, &r, "anthropic-ratelimit-tokens-reset: 2025-10-21T07:27:10Z\r\n", NOW), 1,
            "anthropic tokens-reset parses");
    TAP_OK(s.seen, "anthropic headers: the quota is seen");
    TAP_INT(s.req.limit, 50, "anthropic: requests limit");
    TAP_INT(s.req.remaining, 49, "anthropic: requests remaining");
    TAP_NEAR(s.req.reset_at, NOW + 60, "anthropic: requests reset 60 s from now");
    TAP_INT(s.tok.limit, 40000, "anthropic: tokens limit");
    TAP_INT(s.tok.remaining, 39000, "anthropic: tokens remaining");
    TAP_NEAR(s.tok.reset_at, NOW + 30, "anthropic: tokens reset 30 s from now");
    TAP_NEAR(r.reset_req, 60, "anthropic: the response's request reset");
    TAP_INT(r.limit_tok, 40000, "anthropic: the response's token limit");
    TAP_INT(feed(&s, &r, "anthropic-ratelimit-input-tokens-remaining: 5\r\n", NOW), 0,
            "input-tokens-*: not used (tokens-* is the tightest of them)");
    TAP_INT(s.tok.remaining, 39000, "input-tokens-*: the token dimension unchanged");
    TAP_INT(feed(&s, &r, "anthropic-ratelimit-requests-reset: tomorrow\r\n", NOW), -1,
            "a malformed reset: -1");
    TAP_OK(r.reset_req < 0, "a malformed reset: unknown");
    feed(&s, &r, "anthropic-ratelimit-requests-reset: 2025-10-21T07:00:00Z\r\n", NOW);
    TAP_NEAR(r.reset_req, 0, "a reset in the past: now");
}

/* ---- the short window: a per-minute limit enforced over a second ---- */

static void feed_minute(struct ratelimit_state *s, int64_t limit, int64_t left, double now)
{
    char l1[64], l2[64], l3[64];
    snprintf(l1, sizeof l1, "x-ratelimit-limit-requests: %lld", (long long)limit);
    snprintf(l2, sizeof l2, "x-ratelimit-remaining-requests: %lld", (long long)left);
    snprintf(l3, sizeof l3, "x-ratelimit-reset-requests: %.3fs",
             (double)(limit - left) * 60.0 / (double)limit);
    feed(s, NULL, l1, now);
    feed(s, NULL, l2, now);
    feed(s, NULL, l3, now);
}

/* Send whenever the pacing allows, for `secs` seconds from t0 in 1 ms steps, against a server
 * bucket of `burst` refilled at per_s a second (already short of `spent`); returns the sends
 * and counts into *refused those the server's bucket could not take (each a 429 the pacing
 * learns from, the per-minute count showing room). */
static int simulate(struct ratelimit_state *s, double t0, double secs, double burst,
                    double per_s, double spent, int *refused)
{
    double level = burst - spent, last = t0;
    int sent = 0;
    *refused = 0;
    for (double t = t0; t < t0 + secs; t += 0.001) {
        if (ratelimit_wait_time(s, t, 0) > 0)
            continue;
        level += (t - last) * per_s;
        if (level > burst)
            level = burst;
        last = t;
        ratelimit_note_sent(s, t, 0);
        sent++;
        if (level >= 1) {
            level -= 1;
        } else {
            ++*refused;
            struct ratelimit_response r;
            ratelimit_response_init(&r);
            r.remaining_req = 500;
            ratelimit_note_refused(s, &r, 0, t, t);
        }
    }
    return sent;
}

static void test_short_window(void)
{
    /* 600 a minute reported, 10 a second enforced: the probe went before the limit was known */
    struct ratelimit_state s;
    ratelimit_state_init(&s, 0, 0);
    ratelimit_note_sent(&s, NOW, 0);
    feed_minute(&s, 600, 599, NOW);
    int refused;
    int sent = simulate(&s, NOW, 10, 10, 10, 1, &refused);
    TAP_INT(refused, 0, "600 rpm enforced as 10 a second: no send meets an empty bucket");
    TAP_OK(sent >= 9 + 85 && sent <= 9 + 100, "10 s of sends: %d (>= 85 %% of 100 after a burst "
           "of 9)", sent);
    /* the per-minute count alone would have let 599 go at once */
    struct ratelimit_state once;
    ratelimit_state_init(&once, 0, 0);
    feed_minute(&once, 600, 599, NOW);
    for (int i = 0; i < 9; i++) {
        TAP_NEAR(ratelimit_wait_time(&once, NOW, 0), 0, "a burst of 9 goes at once");
        ratelimit_note_sent(&once, NOW, 0);
    }
    TAP_NEAR(ratelimit_wait_time(&once, NOW, 0), 1 / 9.7, "the 10th waits a refill at 97 % "
             "of 10 a second");

    /* a server enforcing 4 at once: a 429 while 590 are left halves the bucket (9 -> 4.5) */
    struct ratelimit_response r;
    ratelimit_response_init(&r);
    r.remaining_req = 590;
    ratelimit_note_refused(&once, &r, 0, NOW, NOW + 0.01);
    TAP_NEAR(once.req.q_cap, 4.5, "a 429 with room per minute: the short bucket halves");
    TAP_NEAR(ratelimit_wait_time(&once, NOW + 0.01, 0), 1 / 9.7, "and is empty now");
    ratelimit_note_refused(&once, &r, 0, NOW, NOW + 0.02);
    TAP_NEAR(once.req.q_cap, 4.5, "a 429 of a request sent before that teaches nothing more");
    sent = simulate(&once, NOW + 2, 10, 4, 10, 0, &refused);
    TAP_OK(refused <= 1, "then a 4-at-once server sees at most one more 429 over 10 s (%d)",
           refused);
    TAP_OK(sent >= 85, "at %d sends in 10 s", sent);
    TAP_NEAR(once.req.q_cap, 2.25, "that 429 halved it once more");
    for (int i = 0; i < 2; i++)
        ratelimit_note_refused(&once, &r, 0, NOW + 20 + i, NOW + 20 + i);
    TAP_NEAR(once.req.q_cap, 1, "halves down to one request");
    ratelimit_note_refused(&once, &r, 0, NOW + 30, NOW + 30);
    TAP_NEAR(once.req.q_factor, 0.97 * 0.9, "then the refill slows by a tenth");
    for (int i = 0; i < 20; i++)
        ratelimit_note_refused(&once, &r, 0, NOW + 40 + i, NOW + 40 + i);
    TAP_NEAR(once.req.q_factor, 0.5, "down to half of limit/60");
    /* a 429 that says 0 left per minute is the minute's limit: nothing to learn */
    struct ratelimit_state z;
    ratelimit_state_init(&z, 0, 0);
    feed_minute(&z, 600, 0, NOW);
    r.remaining_req = 0;
    ratelimit_note_refused(&z, &r, 0, NOW, NOW);
    TAP_NEAR(z.req.q_cap, 0, "a 429 with nothing left per minute leaves the short bucket's size");

    /* many sends before the limit was known: the debt is two buckets at most, and drains
     * (until 2026-12 the capped wait came back after each drain: 12 sends, 2 a minute, the
     * next waited ~5 minutes in countdowns of 61 s) */
    struct ratelimit_state m;
    ratelimit_state_init(&m, 0, 0);
    for (int i = 0; i < 12; i++)
        ratelimit_note_sent(&m, NOW, 0);
    feed_minute(&m, 2, 1, NOW);
    double w0 = ratelimit_wait_time(&m, NOW, 0);
    TAP_OK(w0 > 30 && w0 < 62, "12 sends before 2 a minute was known: a wait of two buckets "
           "(%.1f s)", w0);
    TAP_NEAR(ratelimit_wait_time(&m, NOW + w0 + 0.1, 0), 0, "and once it has passed, none");

    /* Groq: requests per day (a slow refill shown by the reset): no second's share */
    struct ratelimit_state g;
    ratelimit_state_init(&g, 0, 0);
    feed(&g, NULL, "x-ratelimit-limit-requests: 14400", NOW);
    feed(&g, NULL, "x-ratelimit-remaining-requests: 14000", NOW);
    feed(&g, NULL, "x-ratelimit-reset-requests: 2h0m0s", NOW);
    ratelimit_merge_report(&g, &g, NOW, 0, 1);
    for (int i = 0; i < 30; i++)
        ratelimit_note_sent(&g, NOW, 0);
    TAP_NEAR(ratelimit_wait_time(&g, NOW, 0), 0, "a per-day limit: 30 at once still go");

    /* tokens: 120,000 a minute, about 1,800 a second; a request of 1,000 */
    struct ratelimit_state k;
    ratelimit_state_init(&k, 0, 0);
    feed(&k, NULL, "x-ratelimit-limit-tokens: 120000", NOW);
    feed(&k, NULL, "x-ratelimit-remaining-tokens: 119000", NOW);
    feed(&k, NULL, "x-ratelimit-reset-tokens: 0.5s", NOW);
    TAP_NEAR(ratelimit_wait_time(&k, NOW, 1000), 0, "tokens: the first 1,000 go");
    ratelimit_note_sent(&k, NOW, 1000);
    TAP_NEAR(ratelimit_wait_time(&k, NOW, 1000), 200 / 1940.0, "the next waits for 200 more");
    TAP_NEAR(ratelimit_wait_time(&k, NOW, 5000), 1000 / 1940.0,
             "one larger than the bucket waits for a full one");
    ratelimit_response_init(&r);
    r.remaining_tok = 90000;
    ratelimit_note_refused(&k, &r, 1, NOW, NOW);
    TAP_NEAR(k.tok.q_cap, 900, "a tokens 429 with room per minute halves the tokens bucket");
    TAP_NEAR(k.req.q_cap, 0, "and not the requests one");
}

static void test_wait_out(void)
{
    struct ratelimit_policy p;
    ratelimit_policy_init(&p);
    TAP_NEAR(p.max_rate_wait, 120, "max_rate_wait defaults to 120 s");
    struct ratelimit_response r;
    ratelimit_response_init(&r);
    double delay = -1, charge = -1;
    char reason[200];
    r.retry_after = 2;
    enum ratelimit_verdict v = ratelimit_wait_out(429, RATELIMIT_NET_OK, "rate_limit_exceeded",
                                                  &p, &r, 0, &delay, &charge, reason,
                                                  sizeof reason);
    TAP_OK(v == RATELIMIT_RETRY && near(delay, 2) && near(charge, 2),
           "429 retry-after 2: waited out, 2 s");
    TAP_STR(reason, "HTTP 429 rate limited, waiting 2 s as asked (not a retry)", "its reason");
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 119, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_NO_RATE_WAIT && delay == 0, "119 s waited already: 2 more would pass "
           "max_rate_wait");
    TAP_STR(reason, "HTTP 429 rate limited: the waits for rate limits count 119 s already "
            "(each at least 1 s), 2 s more would pass max_rate_wait 120 s", "it says so");
    TAP_STR(ratelimit_verdict_name(v), "rate-wait-used", "verdict name");
    r.retry_after = 0;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    /* until 2026-12 it went at once and counted 1 s: ~120 requests in 50 ms, then "waited
     * 120 s" */
    TAP_OK(v == RATELIMIT_RETRY && near(delay, RATELIMIT_WAIT_MIN) &&
           near(charge, RATELIMIT_WAIT_MIN),
           "retry-after 0: waits RATELIMIT_WAIT_MIN, and counts what it waits");
    TAP_STR(reason, "HTTP 429 rate limited, waiting 1 s (asked 0 s; 1 s at least) (not a retry)",
            "its reason says what was asked and what is waited");
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 119.2, &delay, &charge, reason,
                           sizeof reason);
    TAP_STR(reason, "HTTP 429 rate limited: the waits for rate limits count 119 s already "
            "(each at least 1 s), 1 s more would pass max_rate_wait 120 s",
            "past max_rate_wait: says the 1 s it would count");
    /* a short hint, above 10 ms, is waited as asked and counted 1 s */
    r.retry_after = RATELIMIT_NO_TIME;
    r.retry_after_ms = 0.02;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_RETRY && near(delay, 0.02) && near(charge, RATELIMIT_WAIT_MIN),
           "retry-after-ms 20: waited 20 ms as asked, counted 1 s (delay %g)", delay);
    r.retry_after_ms = RATELIMIT_NO_TIME;
    r.retry_after = 90;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_NO_STATUS, "retry-after 90 > max_retry_wait: not waited out (the "
           "retry rules refuse it)");
    r.retry_after = 1;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, "insufficient_quota", &p, &r, 0, &delay,
                           &charge, reason, sizeof reason);
    TAP_OK(v == RATELIMIT_NO_STATUS, "insufficient_quota: never waited out");
    v = ratelimit_wait_out(503, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_NO_STATUS, "a 503 with retry-after: a retry, from the budget");
    v = ratelimit_wait_out(200, RATELIMIT_NET_OK, "rate_limit_exceeded", &p, &r, 0, &delay,
                           &charge, reason, sizeof reason);
    TAP_OK(v == RATELIMIT_RETRY, "a streamed rate_limit_exceeded with retry-after: waited out");
    r.should_retry = 0;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_NO_STATUS, "x-should-retry: false is not waited out");
    ratelimit_response_init(&r);
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_NO_STATUS && delay == 0, "a 429 that says nothing of when: the budget");
    r.remaining_tok = 0;
    r.reset_tok = 3;
    v = ratelimit_wait_out(429, RATELIMIT_NET_OK, NULL, &p, &r, 0, &delay, &charge, reason,
                           sizeof reason);
    TAP_OK(v == RATELIMIT_RETRY && near(delay, 3), "0 tokens left, reset in 3 s: waited out");
    TAP_STR(reason, "HTTP 429 rate limited, waiting 3 s for the reset (not a retry)",
            "its reason");

    /* the delay and the dimension in the message's text */
    static const struct {
        const char *text;
        double want;
    } texts[] = {
        {"Rate limit reached for gpt-4o on requests per min (RPM): Limit 600, Used 600, "
         "Requested 1. Please try again in 97ms. Visit ...", 0.097},
        {"Please try again in 1.2s.", 1.2},
        {"please TRY AGAIN IN 6m0s", 360},
        {"Requests to the API have exceeded the rate limit. Please retry after 6 seconds.", 6},
        {"Please try again later.", RATELIMIT_NO_TIME},
        {"try again in ", RATELIMIT_NO_TIME},
        {"try again in .s", RATELIMIT_NO_TIME},
        {"retry after 6", RATELIMIT_NO_TIME},
        {"", RATELIMIT_NO_TIME},
        /* too large to be a time: huge, not absent (until 2026-12 absent: retried in 0.3 s) */
        {"Please try again in 999999999999s.", 999999999999.0},
        {"Please try again in 99999999999999999999999h.", 1e15},
        {"Please retry after 99999999999999999999 seconds.", 1e15},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(texts); i++)
        TAP_NEAR(ratelimit_text_delay(texts[i].text, strlen(texts[i].text)), texts[i].want,
                 texts[i].text);
    TAP_NEAR(ratelimit_text_delay(NULL, 0), RATELIMIT_NO_TIME, "NULL text");
    const char *tpm = "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000";
    const char *typed = "{\"error\":{\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}";
    const char *rpm = "Rate limit reached for gpt-4o on requests per min (RPM): Limit 600";
    TAP_INT(ratelimit_text_tokens(tpm, strlen(tpm)), 1, "tokens per min: the tokens limit");
    TAP_INT(ratelimit_text_tokens(typed, strlen(typed)), 1, "type tokens: the tokens limit");
    TAP_INT(ratelimit_text_tokens(rpm, strlen(rpm)), 0, "requests per min: the requests limit");
}

int main(void)
{
    test_anthropic_headers();
    test_durations();
    test_http_dates();
    test_feed();
    test_pacing();
    test_merge();
    test_retry();
    test_explain();
    test_breaker();
    test_pool();
    test_persist();
    test_forget_unreported();
    test_format();
    test_short_window();
    test_wait_out();
    return tap_done();
}
