/* ratelimit.c - rate-limit headers, pacing buckets, retry policy, circuit breaker, key pool.
 *
 * Quota model ("step" buckets): the server's x-ratelimit-remaining-* is taken as the budget
 * until x-ratelimit-reset-* (converted to an absolute monotonic time when the header arrives);
 * at that time the dimension is full again (remaining = limit). The reset duration is taken
 * literally, whatever the window (OpenAI per minute, Groq per day); each request sent moves the
 * requests' reset on by the time the server takes to give one back (60/limit, or slower when a
 * report shows it), so requests whose reports are not back yet are paid for. A remaining count
 * without a
 * reset (Azure) is trusted for STALE_AFTER seconds, then it is taken as refilled (the limit, or
 * unknown when no limit was sent). Unknown never
 * causes a wait. Configured rpm/tpm are token buckets holding a second's worth (at least one
 * request, one token: a server that enforces its minute per second refuses a minute's burst;
 * until 2026-12 they held the whole minute), refilled continuously at the per-minute figure,
 * and may go into debt after a request larger than the bucket (at most a minute's). */
#include "config.h"
#include "net/ratelimit.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Seconds a remaining count without a reset time stays trustworthy. */
#define STALE_AFTER 60.0
/* Largest duration accepted from a header, seconds (~31 years). */
#define DURATION_MAX 1e9
/* Largest number of significant integer digits a decimal may carry before it is rejected. */
#define DECIMAL_MAX 1e15
/* A retry delay too large to read (more than DECIMAL_MAX), seconds: said as "over" it. */
#define HINT_HUGE DECIMAL_MAX
/* Cool-down of a key after a 429 that told nothing about when to come back. */
#define COOL_DEFAULT 5.0

/* ---- small lexing helpers (bounded by an end pointer, never NUL-dependent) ---- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static void trim(const char **p, const char **end)
{
    while (*p < *end && is_blank(**p))
        (*p)++;
    while (*end > *p && is_blank((*end)[-1]))
        (*end)--;
}

/* 1 when [p, end) equals the lower-case word w, ignoring case. */
static int equals_nocase(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - p) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower(p[i]) != w[i])
            return 0;
    return 1;
}

/* Parse an unsigned decimal "123" or "12.5" at *p (at least one digit, no sign, no exponent).
 * Advances *p past it. Returns 0 and *out, or -1 (nothing parsed, or more than DECIMAL_MAX). */
static int parse_decimal(const char **p, const char *end, double *out)
{
    const char *s = *p;
    double ip = 0, fp = 0, scale = 1;
    int digits = 0;
    while (s < end && is_digit(*s)) {
        ip = ip * 10 + (*s - '0');
        if (ip > DECIMAL_MAX)
            return -1;
        s++;
        digits++;
    }
    if (s < end && *s == '.') {
        s++;
        while (s < end && is_digit(*s)) {
            if (scale < 1e18) { /* further digits cannot change a double; skip them */
                fp = fp * 10 + (*s - '0');
                scale *= 10;
            }
            s++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    *out = ip + fp / scale;
    *p = s;
    return 0;
}

/* A server's "wait this long" as parse_decimal reads it, but a number too large for it reads
 * as HINT_HUGE (its digits skipped): a delay that large is a delay past any max_retry_wait,
 * not one never given (until 2026-12 "retry-after: 9999999999999999999" read as no hint, and
 * the request was retried in 0.3 s). */
static int parse_hint(const char **p, const char *end, double *out)
{
    if (parse_decimal(p, end, out) == 0)
        return 0;
    const char *s = *p;
    if (s == end || !is_digit(*s))
        return -1;
    while (s < end && is_digit(*s))
        s++;
    if (s < end && *s == '.')
        for (s++; s < end && is_digit(*s);)
            s++;
    *out = HINT_HUGE;
    *p = s;
    return 0;
}

/* Parse a non-negative integer count, or "-1" (unknown). Returns 0 and *out, or -1. */
static int parse_count(const char *p, const char *end, int64_t *out)
{
    trim(&p, &end);
    if (end - p == 2 && p[0] == '-' && p[1] == '1') {
        *out = RATELIMIT_UNKNOWN;
        return 0;
    }
    if (p == end)
        return -1;
    int64_t v = 0;
    for (; p < end; p++) {
        if (!is_digit(*p))
            return -1;
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

/* ratelimit_parse_duration; with hint (a server's retry delay) a value past DURATION_MAX is
 * not refused but kept, at most HINT_HUGE (see parse_hint). */
static int parse_duration(const char *s, size_t len, double *secs, int hint)
{
    const char *p = s, *end = s + len;
    trim(&p, &end);
    if (p == end)
        return -1;
    double total = 0;
    int parts = 0;
    while (p < end) {
        double v;
        if ((hint ? parse_hint(&p, end, &v) : parse_decimal(&p, end, &v)) != 0)
            return -1;
        double unit;
        if (p == end) {
            if (parts > 0) /* "1m30": a number without unit after a unit */
                return -1;
            unit = 1; /* plain number of seconds */
        } else if (*p == 'h') {
            unit = 3600, p++;
        } else if (*p == 'm' && end - p >= 2 && p[1] == 's') {
            unit = 1e-3, p += 2;
        } else if (*p == 'm') {
            unit = 60, p++;
        } else if (*p == 's') {
            unit = 1, p++;
        } else if (*p == 'u' && end - p >= 2 && p[1] == 's') {
            unit = 1e-6, p += 2;
        } else if (end - p >= 3 && (unsigned char)p[0] == 0xC2 && (unsigned char)p[1] == 0xB5 &&
                   p[2] == 's') { /* µs, micro sign */
            unit = 1e-6, p += 3;
        } else if (end - p >= 3 && (unsigned char)p[0] == 0xCE && (unsigned char)p[1] == 0xBC &&
                   p[2] == 's') { /* μs, Greek mu */
            unit = 1e-6, p += 3;
        } else if (*p == 'n' && end - p >= 2 && p[1] == 's') {
            unit = 1e-9, p += 2;
        } else {
            return -1;
        }
        total += v * unit;
        if (total > (hint ? HINT_HUGE : DURATION_MAX)) {
            if (!hint)
                return -1;
            total = HINT_HUGE;
        }
        parts++;
    }
    *secs = total;
    return 0;
}

int ratelimit_parse_duration(const char *s, size_t len, double *secs)
{
    return parse_duration(s, len, secs, 0);
}

/* ---- HTTP dates ---- */

static const char month_names[12][4] = {"jan", "feb", "mar", "apr", "may", "jun",
                                        "jul", "aug", "sep", "oct", "nov", "dec"};

static int is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int y, int m)
{
    static const int d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian, y >= 1970). */
static long days_since_epoch(int y, int m, int d)
{
    long days = 0;
    for (int yy = 1970; yy < y; yy++)
        days += is_leap(yy) ? 366 : 365;
    for (int mm = 1; mm < m; mm++)
        days += month_days(y, mm);
    return days + d - 1;
}

/* Read up to max digits (at least min) as an int. */
static int read_int(const char **p, const char *end, int min, int max, int *out)
{
    int v = 0, n = 0;
    while (*p < end && n < max && is_digit(**p)) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    if (n < min || (*p < end && is_digit(**p)))
        return -1;
    *out = v;
    return 0;
}

static int read_month(const char **p, const char *end, int *out)
{
    if (end - *p < 3)
        return -1;
    for (int i = 0; i < 12; i++) {
        if (lower((*p)[0]) == month_names[i][0] && lower((*p)[1]) == month_names[i][1] &&
            lower((*p)[2]) == month_names[i][2]) {
            *p += 3;
            *out = i + 1;
            return 0;
        }
    }
    return -1;
}

static int skip_char(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return -1;
    (*p)++;
    return 0;
}

static void skip_spaces(const char **p, const char *end)
{
    while (*p < end && **p == ' ')
        (*p)++;
}

static int read_clock(const char **p, const char *end, int *h, int *mi, int *s)
{
    if (read_int(p, end, 2, 2, h) || skip_char(p, end, ':') || read_int(p, end, 2, 2, mi) ||
        skip_char(p, end, ':') || read_int(p, end, 2, 2, s))
        return -1;
    return 0;
}

int ratelimit_parse_http_date(const char *str, size_t len, double *epoch)
{
    const char *p = str, *end = str + len;
    trim(&p, &end);
    int y, mo, d, h, mi, s;
    /* day name: "Wed," (IMF), "Wednesday," (RFC 850) or "Wed" (asctime) */
    const char *name = p;
    while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        p++;
    if (p - name < 3)
        return -1;
    int comma = p < end && *p == ',';
    if (comma)
        p++;
    skip_spaces(&p, end);
    if (comma) {
        /* "21 Oct 2026 07:28:00 GMT" or "21-Oct-26 07:28:00 GMT" */
        if (read_int(&p, end, 1, 2, &d))
            return -1;
        if (p >= end || (*p != ' ' && *p != '-'))
            return -1;
        char sep = *p++;
        if (read_month(&p, end, &mo) || skip_char(&p, end, sep))
            return -1;
        const char *ys = p;
        if (read_int(&p, end, 2, 4, &y) || p - ys == 3)
            return -1;
        if (p - ys == 2)
            y += y < 70 ? 2000 : 1900;
        if (skip_char(&p, end, ' ') || read_clock(&p, end, &h, &mi, &s) ||
            skip_char(&p, end, ' '))
            return -1;
        if (!equals_nocase(p, end, "gmt") && !equals_nocase(p, end, "utc"))
            return -1;
    } else {
        /* asctime: "Oct 21 07:28:00 2026" (day padded with a space) */
        if (read_month(&p, end, &mo))
            return -1;
        skip_spaces(&p, end);
        if (read_int(&p, end, 1, 2, &d) || skip_char(&p, end, ' ') ||
            read_clock(&p, end, &h, &mi, &s) || skip_char(&p, end, ' ') ||
            read_int(&p, end, 4, 4, &y) || p != end)
            return -1;
    }
    if (y < 1970 || y > 9999 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 || s > 60)
        return -1;
    *epoch = (double)days_since_epoch(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
    return 0;
}

int ratelimit_parse_rfc3339(const char *str, size_t len, double *epoch)
{
    const char *p = str, *end = str + len;
    trim(&p, &end);
    int y, mo, d, h, mi, s;
    if (read_int(&p, end, 4, 4, &y) || skip_char(&p, end, '-') || read_int(&p, end, 2, 2, &mo) ||
        skip_char(&p, end, '-') || read_int(&p, end, 2, 2, &d) || p >= end ||
        lower(*p++) != 't' || read_clock(&p, end, &h, &mi, &s))
        return -1;
    double frac = 0, scale = 0.1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return -1;
        for (; p < end && is_digit(*p); p++, scale /= 10)
            frac += (*p - '0') * scale;
    }
    int offset = 0; /* seconds east of UTC */
    if (p < end && lower(*p) == 'z') {
        p++;
    } else if (p < end && (*p == '+' || *p == '-')) {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (read_int(&p, end, 2, 2, &oh) || skip_char(&p, end, ':') ||
            read_int(&p, end, 2, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset = sign * (oh * 3600 + om * 60);
    } else {
        return -1;
    }
    if (p != end || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 ||
        mi > 59 || s > 60)
        return -1;
    double t = (double)days_since_epoch(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + s + frac -
               offset;
    if (t < 0)
        return -1;
    *epoch = t;
    return 0;
}

/* ---- state and header feeding ---- */

static void dim_init(struct ratelimit_dim *d)
{
    memset(d, 0, sizeof *d);
    d->limit = RATELIMIT_UNKNOWN;
    d->remaining = RATELIMIT_UNKNOWN;
    d->reset_at = RATELIMIT_NO_TIME;
    d->updated_at = RATELIMIT_NO_TIME;
    d->q_time = RATELIMIT_NO_TIME;
    d->q_learnt = RATELIMIT_NO_TIME;
}


void ratelimit_state_init(struct ratelimit_state *s, double rpm, double tpm)
{
    memset(s, 0, sizeof *s);
    dim_init(&s->req);
    dim_init(&s->tok);
    s->rpm = rpm > 0 && isfinite(rpm) ? rpm : 0;
    s->tpm = tpm > 0 && isfinite(tpm) ? tpm : 0;
    s->req_level = ratelimit_bucket_cap(s->rpm);
    s->tok_level = ratelimit_bucket_cap(s->tpm);
    s->bucket_time = RATELIMIT_NO_TIME;
}

void ratelimit_response_init(struct ratelimit_response *r)
{
    r->limit_req = r->remaining_req = RATELIMIT_UNKNOWN;
    r->limit_tok = r->remaining_tok = RATELIMIT_UNKNOWN;
    r->reset_req = r->reset_tok = RATELIMIT_NO_TIME;
    r->retry_after_ms = r->retry_after = RATELIMIT_NO_TIME;
    r->should_retry = -1;
}

/* Apply the passage of time to one dimension: a reset that has come refills it to the limit; a
 * count below the limit without a reset goes stale after STALE_AFTER (then it is taken as
 * refilled: the limit, or unknown when the limit is). */
/* What "full" is for a dimension: the limit, unless the server has never shown more than a burst
 * well below it (a token bucket of B requests refilled at the per-minute limit): then B. Having
 * seen only 0 remaining says nothing about B. */
static int64_t dim_capacity(const struct ratelimit_dim *d)
{
    return d->full > 1 && d->limit != RATELIMIT_UNKNOWN && d->full <= d->limit / 2 ? d->full
                                                                                   : d->limit;
}

static void dim_roll(struct ratelimit_dim *d, double now)
{
    if (d->reset_at >= 0 && now >= d->reset_at) {
        d->remaining = dim_capacity(d); /* full again */
        d->updated_at = d->reset_at;
        d->reset_at = RATELIMIT_NO_TIME;
    }
    if (d->reset_at < 0 && d->remaining != RATELIMIT_UNKNOWN && d->remaining != d->limit &&
        !(now - d->updated_at <= STALE_AFTER)) {
        d->remaining = d->limit; /* assume refilled; unknown when the limit is */
        d->updated_at = now;
    }
}

/* Seconds per unit given back: what a fresh report shows, else 60/limit (a per-minute limit). */
static double dim_unit(const struct ratelimit_dim *d)
{
    if (!(d->limit > 0) || d->limit == RATELIMIT_UNKNOWN)
        return 0;
    return d->unit > 0 ? d->unit : 60.0 / (double)d->limit;
}

/* ---- the short window (see struct ratelimit_dim) ---- */

/* Share of limit/60 the short bucket holds, and refills a second, by default; how much slower
 * each 429 at the smallest bucket makes the refill, and the slowest it gets. */
#define QW_CAP 0.9
#define QW_RATE 0.97
#define QW_SLOWER 0.9
#define QW_RATE_MIN 0.5

/* 1 when the short window applies to d: a per-minute limit the server reports, known with a
 * remaining count (one it stopped reporting holds nothing back, see
 * ratelimit_forget_unreported), and no report has shown a slower refill (Groq's requests per
 * day are paced by their reset, not by a second's share). */
static int qw_applies(const struct ratelimit_dim *d)
{
    if (!(d->limit > 0) || d->limit == RATELIMIT_UNKNOWN || d->remaining == RATELIMIT_UNKNOWN)
        return 0;
    return !(d->unit > 1.5 * 60.0 / (double)d->limit);
}

/* 1 when the short window paces d: it applies, and the reports have not shown the server's
 * burst already (a bucket well below the limit, which the refill clock paces), or a 429 has
 * taught it something. */
static int qw_on(const struct ratelimit_dim *d)
{
    return qw_applies(d) && (dim_capacity(d) >= d->limit || d->q_cap > 0 || d->q_factor > 0);
}

static double qw_cap(const struct ratelimit_dim *d)
{
    double c = d->q_cap > 0 ? d->q_cap : QW_CAP * (double)d->limit / 60.0;
    return c < 1 ? 1 : c;
}

static double qw_rate(const struct ratelimit_dim *d)
{
    return (d->q_factor > 0 ? d->q_factor : QW_RATE) * (double)d->limit / 60.0;
}

/* What the short bucket is short of being full at time now: the spends not yet refilled, at
 * most two buckets' worth (a debt of one at most). Spends made before the limit was known count
 * too (the probe that showed it), refilled from their time once the rate is known. */
static double qw_debt(const struct ratelimit_dim *d, double now)
{
    if (d->q_time < 0)
        return 0; /* never spent from: full */
    /* capped before it drains: the spends made while the limit was unknown may be many, and a
     * debt capped only after draining showed the same wait again and again (until 2026-12:
     * 12 sends before a 2-a-minute limit was known held the next prompt 5 minutes, its
     * countdown starting over at 61 s) */
    double most = 2 * qw_cap(d);
    double debt = (d->q_debt > most ? most : d->q_debt) -
                  (now > d->q_time ? now - d->q_time : 0) * qw_rate(d);
    return debt < 0 ? 0 : debt;
}

/* Seconds until the short bucket holds need (capped at its size: a larger request goes once it
 * is full, into debt). */
static double qw_wait(const struct ratelimit_dim *d, double now, double need)
{
    if (!qw_on(d) || need <= 0)
        return 0;
    double cap = qw_cap(d), lvl = cap - qw_debt(d, now);
    if (need > cap)
        need = cap;
    return lvl >= need ? 0 : (need - lvl) / qw_rate(d);
}

static void qw_spend(struct ratelimit_dim *d, double now, double amount)
{
    if (!(amount > 0))
        return;
    /* with the limit unknown, the refill is too: the debt only grows (bounded where used) */
    d->q_debt = (qw_on(d) ? qw_debt(d, now) : d->q_debt) + amount;
    d->q_time = now;
}

void ratelimit_note_refused(struct ratelimit_state *s, const struct ratelimit_response *r,
                            int tokens, double sent_at, double now)
{
    struct ratelimit_dim *d = tokens ? &s->tok : &s->req;
    if (!qw_applies(d))
        return;
    int64_t left = r ? (tokens ? r->remaining_tok : r->remaining_req) : RATELIMIT_UNKNOWN;
    if (left > 0 && !(sent_at < d->q_learnt)) {
        double cap = qw_cap(d);
        if (cap > 1) {
            d->q_cap = cap / 2 < 1 ? 1 : cap / 2;
        } else {
            double f = (d->q_factor > 0 ? d->q_factor : QW_RATE) * QW_SLOWER;
            d->q_factor = f < QW_RATE_MIN ? QW_RATE_MIN : f;
        }
        d->q_learnt = now;
    }
    d->q_debt = qw_cap(d); /* the server's bucket is empty now */
    d->q_time = now;
}

/* Learn the bucket from a fresh report. Its refill rate: never faster than a per-minute limit
 * allows, slower when the time to full over the units missing from the limit says so (a per-day
 * limit). Its size: what is left plus what the reset says is missing; as the count is rounded
 * down, this is a lower bound (never more than the limit), so a burst sized from it cannot
 * overrun the server even when the only report seen says 0 left. */
static void dim_learn(struct ratelimit_dim *d, double now)
{
    d->unit = 0;
    double u = dim_unit(d);
    if (!(u > 0) || d->remaining == RATELIMIT_UNKNOWN || d->remaining >= d->limit ||
        !(d->reset_at > now))
        return;
    double left = d->reset_at - now;
    /* A reset rounded to whole seconds says little about a rate: only one of 10 s or more
     * (Groq's per-day limits) may show a slower one. */
    double seen = left >= 10 ? left / (double)(d->limit - d->remaining) : 0;
    if (seen > u)
        u = seen;
    d->unit = u;
    double size = util_ceil((double)d->remaining + left / u - 0.02);
    if (size > (double)d->limit)
        size = (double)d->limit;
    if (size < 9e18 && (int64_t)size > d->full)
        d->full = (int64_t)size;
}

/* The dimension as it stands at time now (s is not modified). */
static struct ratelimit_dim dim_view(const struct ratelimit_dim *d, double now)
{
    struct ratelimit_dim v = *d;
    dim_roll(&v, now);
    return v;
}

enum hdr {
    H_LIMIT_REQ, H_LIMIT_TOK, H_REM_REQ, H_REM_TOK, H_RESET_REQ, H_RESET_TOK,
    H_RETRY_AFTER_MS, H_RETRY_AFTER, H_SHOULD_RETRY, H_NONE
};

/* The headers this module reads. Anthropic's tokens-* are the tightest of its token limits
 * (its input-tokens-* and output-tokens-* are not read); its resets are RFC 3339 times. */
static const struct {
    const char *name;
    enum hdr h;
    int rfc3339; /* a reset given as a time, not a duration */
} hdr_names[] = {
    {"x-ratelimit-limit-requests", H_LIMIT_REQ, 0},
    {"x-ratelimit-limit-tokens", H_LIMIT_TOK, 0},
    {"x-ratelimit-remaining-requests", H_REM_REQ, 0},
    {"x-ratelimit-remaining-tokens", H_REM_TOK, 0},
    {"x-ratelimit-reset-requests", H_RESET_REQ, 0},
    {"x-ratelimit-reset-tokens", H_RESET_TOK, 0},
    {"retry-after-ms", H_RETRY_AFTER_MS, 0},
    {"retry-after", H_RETRY_AFTER, 0},
    {"x-should-retry", H_SHOULD_RETRY, 0},
    {"anthropic-ratelimit-requests-limit", H_LIMIT_REQ, 0},
    {"anthropic-ratelimit-tokens-limit", H_LIMIT_TOK, 0},
    {"anthropic-ratelimit-requests-remaining", H_REM_REQ, 0},
    {"anthropic-ratelimit-tokens-remaining", H_REM_TOK, 0},
    {"anthropic-ratelimit-requests-reset", H_RESET_REQ, 1},
    {"anthropic-ratelimit-tokens-reset", H_RESET_TOK, 1},
};

static void set_count(struct ratelimit_state *s, int64_t *rfield, int is_remaining,
                      struct ratelimit_dim *d, int64_t v, double now)
{
    if (rfield)
        *rfield = v;
    if (!s)
        return;
    s->seen = 1;
    if (!is_remaining) {
        d->limit = v;
        return;
    }
    d->remaining = v;
    d->updated_at = now;
    if (v >= 0 && v < INT64_MAX && v + 1 > d->full)
        d->full = v + 1;
    if (d->reset_at >= 0 && d->reset_at <= now) /* an old reset does not apply to this report */
        d->reset_at = RATELIMIT_NO_TIME;
}

static void set_reset(struct ratelimit_state *s, double *rfield, struct ratelimit_dim *d,
                      double secs, double now)
{
    if (rfield)
        *rfield = secs;
    if (!s)
        return;
    s->seen = 1;
    d->reset_at = secs >= 0 ? now + secs : RATELIMIT_NO_TIME;
    if (secs > d->period)
        d->period = secs;
}

/* Which header of ours the name [name, name_end) is (any case); H_NONE for another. */
static enum hdr hdr_find(const char *name, const char *name_end, int *rfc3339)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(hdr_names); i++)
        if (equals_nocase(name, name_end, hdr_names[i].name)) {
            *rfc3339 = hdr_names[i].rfc3339;
            return hdr_names[i].h;
        }
    return H_NONE;
}

/* x-ratelimit-limit-* and x-ratelimit-remaining-*: into s and r (either may be NULL).
 * 1 when the value parses (else it is recorded as unknown). */
static int feed_count(struct ratelimit_state *s, struct ratelimit_response *r, enum hdr h,
                      const char *v, const char *vend, double now)
{
    int64_t n = RATELIMIT_UNKNOWN;
    int ok = parse_count(v, vend, &n) == 0;
    if (!ok)
        n = RATELIMIT_UNKNOWN;
    int is_req = h == H_LIMIT_REQ || h == H_REM_REQ;
    int is_rem = h == H_REM_REQ || h == H_REM_TOK;
    int64_t *rf = NULL;
    if (r)
        rf = is_req ? (is_rem ? &r->remaining_req : &r->limit_req)
                    : (is_rem ? &r->remaining_tok : &r->limit_tok);
    set_count(s, rf, is_rem, s ? (is_req ? &s->req : &s->tok) : NULL, n, now);
    return ok;
}

/* x-ratelimit-reset-requests and -tokens: a duration; anthropic-ratelimit-*-reset: a time
 * (rfc3339), the seconds from now_epoch to it (never negative). 1 when it parses. */
static int feed_reset(struct ratelimit_state *s, struct ratelimit_response *r, enum hdr h,
                      const char *v, const char *vend, double now, int rfc3339,
                      double now_epoch)
{
    double secs = RATELIMIT_NO_TIME;
    int ok;
    if (rfc3339) {
        ok = ratelimit_parse_rfc3339(v, (size_t)(vend - v), &secs) == 0 && isfinite(now_epoch);
        if (ok)
            secs = secs > now_epoch ? secs - now_epoch : 0;
    } else {
        ok = ratelimit_parse_duration(v, (size_t)(vend - v), &secs) == 0;
    }
    if (!ok)
        secs = RATELIMIT_NO_TIME;
    if (h == H_RESET_REQ)
        set_reset(s, r ? &r->reset_req : NULL, s ? &s->req : NULL, secs, now);
    else
        set_reset(s, r ? &r->reset_tok : NULL, s ? &s->tok : NULL, secs, now);
    return ok;
}

/* retry-after: seconds, or an HTTP date (then the seconds from now_epoch, never negative).
 * 1 when it parses. */
static int feed_retry_after(struct ratelimit_response *r, const char *v, const char *vend,
                            double now_epoch)
{
    const char *p = v;
    double val;
    int ok = 0;
    if (parse_hint(&p, vend, &val) == 0 && p == vend) {
        ok = 1;
    } else if (ratelimit_parse_http_date(v, (size_t)(vend - v), &val) == 0 &&
               isfinite(now_epoch)) {
        ok = 1;
        val -= now_epoch;
        if (!(val > 0))
            val = 0;
    }
    if (r)
        r->retry_after = ok ? val : RATELIMIT_NO_TIME;
    return ok;
}

int ratelimit_feed(struct ratelimit_state *s, struct ratelimit_response *r, const char *line,
                   size_t len, double now, double now_epoch)
{
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return 0;
    const char *name = line, *name_end = colon;
    trim(&name, &name_end);
    int rfc3339 = 0;
    enum hdr h = hdr_find(name, name_end, &rfc3339);
    if (h == H_NONE)
        return 0;
    const char *v = colon + 1, *vend = line + len;
    trim(&v, &vend);
    int ok = 0;
    switch (h) {
    case H_LIMIT_REQ:
    case H_LIMIT_TOK:
    case H_REM_REQ:
    case H_REM_TOK:
        ok = feed_count(s, r, h, v, vend, now);
        break;
    case H_RESET_REQ:
    case H_RESET_TOK:
        ok = feed_reset(s, r, h, v, vend, now, rfc3339, now_epoch);
        break;
    case H_RETRY_AFTER_MS: {
        const char *p = v;
        double ms;
        ok = parse_hint(&p, vend, &ms) == 0 && p == vend;
        if (r)
            r->retry_after_ms = !ok ? RATELIMIT_NO_TIME : ms >= HINT_HUGE ? HINT_HUGE
                                                                          : ms / 1000.0;
        break;
    }
    case H_RETRY_AFTER:
        ok = feed_retry_after(r, v, vend, now_epoch);
        break;
    case H_SHOULD_RETRY: {
        int sr = -1;
        if (equals_nocase(v, vend, "true"))
            sr = 1;
        else if (equals_nocase(v, vend, "false"))
            sr = 0;
        ok = sr >= 0;
        if (r)
            r->should_retry = sr;
        break;
    }
    case H_NONE:
        break;
    }
    return ok ? 1 : -1;
}

double ratelimit_response_delay(const struct ratelimit_response *r)
{
    if (!r)
        return RATELIMIT_NO_TIME;
    if (r->retry_after_ms >= 0)
        return r->retry_after_ms;
    if (r->retry_after >= 0)
        return r->retry_after;
    return RATELIMIT_NO_TIME;
}

/* ---- pacing ---- */

static double clamp_tokens(double est)
{
    if (!(est > 0))
        return 0;
    return est > DECIMAL_MAX ? DECIMAL_MAX : est;
}

double ratelimit_bucket_cap(double per_minute)
{
    return per_minute / 60.0 > 1 ? per_minute / 60.0 : 1;
}

/* Level of a configured bucket of `per_minute` capacity at time now. */
static double bucket_level(double level, double per_minute, double since, double now)
{
    double cap = ratelimit_bucket_cap(per_minute);
    if (since < 0)
        return cap; /* never used: full */
    double dt = now - since;
    if (dt > 0)
        level += dt * per_minute / 60.0;
    return level > cap ? cap : level;
}

/* Seconds until a configured bucket holds `need` (capped at its capacity). */
static double bucket_wait(double level, double per_minute, double need)
{
    if (per_minute <= 0 || need <= 0)
        return 0;
    if (need > ratelimit_bucket_cap(per_minute))
        need = ratelimit_bucket_cap(per_minute);
    if (level >= need)
        return 0;
    return (need - level) / (per_minute / 60.0);
}

/* Seconds until a server-reported dimension can cover `need` (0 when unknown or enough). */
static double dim_wait(const struct ratelimit_dim *d, double now, double need)
{
    struct ratelimit_dim v = dim_view(d, now);
    if (need <= 0 || v.remaining == RATELIMIT_UNKNOWN || v.reset_at < 0)
        return 0;
    if (v.limit != RATELIMIT_UNKNOWN && need > (double)v.limit)
        need = (double)v.limit; /* larger than the whole limit: go once full */
    if ((double)v.remaining >= need)
        return 0;
    return v.reset_at - now;
}

/* Where the JSON string that starts at s ends (its closing quote), or end: the next quote
 * not escaped, i.e. after an even run of backslashes. memchr's pace over a body of 0.3-8 MB,
 * not a test per byte. */
static const char *ratelimit_string_end(const char *s, const char *end)
{
    const char *q = s;
    while ((q = memchr(q, '"', (size_t)(end - q))) != NULL) {
        const char *b = q;
        while (b > s && b[-1] == '\\')
            b--;
        if ((q - b) % 2 == 0)
            return q;
        q++;
    }
    return end;
}

/* The tokens a server counts against its tokens-per-minute limit for body, as OpenAI
 * estimates them: the messages' text at about 4 bytes a token, 3 a message (a "role"), plus
 * the answer's reserve. One pass over the body: every string value after a key naming text
 * (content, text, system, instructions, input) counts, the JSON around it does not, so a short
 * prompt is not paced as if its body's keys were prompt. A body without such keys: 4 bytes a
 * token of all of it. */
double ratelimit_est_tokens(const char *body, long max_tokens)
{
    static const char *const text_keys[] = {"content", "text", "system", "instructions",
                                            "input"};
    static const size_t text_lens[] = {7, 4, 6, 12, 5};
    const char *p = body, *end = body + strlen(body);
    size_t text = 0, roles = 0;
    int in_text = 0, found = 0;
    while ((p = memchr(p, '"', (size_t)(end - p))) != NULL) {
        const char *s = ++p;
        p = ratelimit_string_end(s, end);
        size_t n = (size_t)(p - s);
        if (p < end)
            p++;
        const char *q = p;
        while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
            q++;
        if (q < end && *q == ':') { /* a key: which text follows */
            in_text = 0;
            for (size_t i = 0; i < TT_ARRAY_LEN(text_keys); i++)
                if (n == text_lens[i] && memcmp(s, text_keys[i], n) == 0)
                    in_text = found = 1;
            roles += n == 4 && memcmp(s, "role", 4) == 0;
        } else if (in_text) {
            text += n;
        }
    }
    double est = found ? (double)text / 4 + 3.0 * (double)roles : (double)(end - body) / 4;
    return est + (max_tokens > 0 ? (double)max_tokens : 0);
}

double ratelimit_wait_time(const struct ratelimit_state *s, double now, double est_tokens)
{
    double est = clamp_tokens(est_tokens);
    double w = dim_wait(&s->req, now, 1);
    double t = dim_wait(&s->tok, now, est);
    if (t > w)
        w = t;
    t = qw_wait(&s->req, now, 1);
    if (t > w)
        w = t;
    t = qw_wait(&s->tok, now, est);
    if (t > w)
        w = t;
    t = ratelimit_wait_configured(s, now, est_tokens);
    return t > w ? t : w > 0 ? w : 0;
}

double ratelimit_wait_configured(const struct ratelimit_state *s, double now, double est_tokens)
{
    double est = clamp_tokens(est_tokens), w = 0, t;
    if (s->rpm > 0) {
        double lvl = bucket_level(s->req_level, s->rpm, s->bucket_time, now);
        t = bucket_wait(lvl, s->rpm, 1);
        if (t > w)
            w = t;
    }
    if (s->tpm > 0) {
        double lvl = bucket_level(s->tok_level, s->tpm, s->bucket_time, now);
        t = bucket_wait(lvl, s->tpm, est);
        if (t > w)
            w = t;
    }
    return w > 0 ? w : 0;
}

/* Spend `amount` locally. The server gives it back `unit` seconds a unit later than it would
 * have been full: the reset moves on by that much (capped at one whole refill from now), so a
 * burst sent before the reports of the last one are back cannot overrun the bucket (at most the
 * longest reset reported, or a minute, from now). Requests only (refill): a token estimate is
 * rough, and in this step model a spend that moved the reset would make the next request wait
 * for a full bucket where it needs only its share. Otherwise, and with the rate unknown, a spend
 * from a bucket thought full starts the longest refill clock seen. */
static void dim_debit(struct ratelimit_dim *d, double now, double amount, int refill)
{
    dim_roll(d, now);
    if (d->remaining == RATELIMIT_UNKNOWN)
        return;
    int64_t a = (int64_t)util_ceil(amount);
    d->remaining = a >= d->remaining ? 0 : d->remaining - a;
    double unit = refill ? dim_unit(d) : 0;
    if (unit > 0) {
        double at = d->reset_at >= 0 ? d->reset_at + (double)a * unit
                                     : now + (double)(dim_capacity(d) - d->remaining) * unit;
        /* never beyond the longest refill the server has reported (or a minute) */
        double most = now + (d->period > 60 ? d->period : 60);
        d->reset_at = at < most ? at : most;
        if (d->reset_at < now + unit)
            d->reset_at = now + unit; /* what was just spent is back no sooner */
    } else if (d->reset_at < 0 && d->period > 0) {
        d->reset_at = now + d->period;
    }
}

void ratelimit_note_sent(struct ratelimit_state *s, double now, double est_tokens)
{
    double est = clamp_tokens(est_tokens);
    dim_debit(&s->req, now, 1, 1);
    if (est > 0)
        dim_debit(&s->tok, now, est, 0);
    qw_spend(&s->req, now, 1);
    qw_spend(&s->tok, now, est);
    if (s->rpm > 0 || s->tpm > 0) {
        s->req_level = bucket_level(s->req_level, s->rpm, s->bucket_time, now) - 1;
        s->tok_level = bucket_level(s->tok_level, s->tpm, s->bucket_time, now) - est;
        /* cap the debt at one bucket so a huge estimate cannot block for hours */
        if (s->req_level < -s->rpm)
            s->req_level = -s->rpm;
        if (s->tok_level < -s->tpm)
            s->tok_level = -s->tpm;
        if (s->bucket_time < 0 || now > s->bucket_time)
            s->bucket_time = now;
    }
}

/* One dimension of a report that may be stale: the lower remaining and the later reset. */
static void dim_merge(struct ratelimit_dim *d, const struct ratelimit_dim *before, double now,
                      int64_t later)
{
    if (d->remaining == RATELIMIT_UNKNOWN)
        return;
    int64_t r = d->remaining > later ? d->remaining - later : 0;
    struct ratelimit_dim b = dim_view(before, now);
    if (b.remaining != RATELIMIT_UNKNOWN && b.remaining < r)
        r = b.remaining;
    d->remaining = r;
    if (b.reset_at > d->reset_at)
        d->reset_at = b.reset_at;
}

void ratelimit_merge_report(struct ratelimit_state *s, const struct ratelimit_state *before,
                            double now, int64_t later, int newest)
{
    dim_learn(&s->req, now);
    dim_learn(&s->tok, now);
    if (newest && later <= 0)
        return; /* the server counted every request we sent: its report is the state */
    dim_merge(&s->req, &before->req, now, later > 0 ? later : 0);
    dim_merge(&s->tok, &before->tok, now, 0);
}

static void dim_forget(struct ratelimit_dim *d, int64_t limit, int64_t remaining, double reset)
{
    if (limit != RATELIMIT_UNKNOWN || remaining != RATELIMIT_UNKNOWN || reset >= 0)
        return; /* reported */
    d->remaining = RATELIMIT_UNKNOWN;
    d->reset_at = RATELIMIT_NO_TIME;
    d->updated_at = RATELIMIT_NO_TIME;
}

void ratelimit_forget_unreported(struct ratelimit_state *s, const struct ratelimit_response *r)
{
    dim_forget(&s->req, r->limit_req, r->remaining_req, r->reset_req);
    dim_forget(&s->tok, r->limit_tok, r->remaining_tok, r->reset_tok);
}

/* ---- retry policy ---- */

void ratelimit_policy_init(struct ratelimit_policy *p)
{
    p->max_retries = 2;
    p->backoff_base = 0.5;
    p->backoff_cap = 8.0;
    p->max_retry_wait = 60.0;
    p->max_rate_wait = 120.0;
    p->jitter = RATELIMIT_JITTER_EQUAL;
    p->random = NULL;
    p->random_ctx = NULL;
}

static _Thread_local uint64_t rng_state;

static double rng_default(void)
{
    if (rng_state == 0) {
        double t = util_now();
        uint64_t seed = (uint64_t)(t * 1e9) ^ (uint64_t)(uintptr_t)&rng_state;
        rng_state = seed ? seed : 0x9E3779B97F4A7C15ull;
    }
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

static double rng(const struct ratelimit_policy *p)
{
    double r = p->random ? p->random(p->random_ctx) : rng_default();
    if (!(r >= 0))
        r = 0;
    if (r >= 1)
        r = 0x1.fffffffffffffp-1;
    return r;
}

double ratelimit_backoff(const struct ratelimit_policy *p, int attempt)
{
    double d = p->backoff_base > 0 ? p->backoff_base : 0;
    double cap = p->backoff_cap > 0 ? p->backoff_cap : 0;
    if (!(d > 0) || !isfinite(d))
        return d > 0 ? cap : 0;
    for (int i = 1; i < attempt && d < cap; i++)
        d *= 2;
    return d > cap ? cap : d;
}

static double jittered(const struct ratelimit_policy *p, double d)
{
    switch (p->jitter) {
    case RATELIMIT_JITTER_FULL:
        return d * rng(p);
    case RATELIMIT_JITTER_NONE:
        return d;
    case RATELIMIT_JITTER_EQUAL:
    default:
        return d / 2 + d / 2 * rng(p);
    }
}

/* "1.2", "60", "120": seconds for reason texts. */
static const char *secs_text(double d, char *buf, size_t size)
{
    if (!isfinite(d))
        snprintf(buf, size, "?");
    else if (d >= HINT_HUGE) /* a number too large to read (parse_hint) */
        snprintf(buf, size, "over %.0f", HINT_HUGE);
    else if (d < 9.95)
        snprintf(buf, size, "%.1f", d < 0 ? 0 : d);
    else
        snprintf(buf, size, "%.0f", d);
    size_t n = strlen(buf);
    if (n > 2 && strcmp(buf + n - 2, ".0") == 0)
        buf[n - 2] = '\0';
    return buf;
}

static const char *status_phrase(int status, const char *code)
{
    switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not found";
    case 408: return "request timeout";
    case 409: return "conflict";
    case 413: return "request too large";
    case 422: return "unprocessable request";
    case 429:
        return code && strcmp(code, "insufficient_quota") == 0 ? "quota exceeded" : "rate limited";
    case 500: return "server error";
    case 502: return "bad gateway";
    case 503: return "service unavailable";
    case 504: return "gateway timeout";
    case 529: return "overloaded";
    default:
        if (status >= 500 && status <= 599)
            return "server error";
        if (status >= 400 && status <= 499)
            return "client error";
        if (status >= 200 && status <= 299)
            return "ok";
        return "unexpected status";
    }
}

static int code_is(const char *code, const char *w)
{
    return code && strcmp(code, w) == 0;
}

/* A streamed error inside a 2xx response that deserves a retry; returns the status it stands
 * for (500 or 429) or 0. */
static int stream_error_status(const char *code)
{
    if (code_is(code, "server_error") || code_is(code, "overloaded") ||
        code_is(code, "overloaded_error") || code_is(code, "api_error"))
        return 500;
    if (code_is(code, "rate_limit_exceeded") || code_is(code, "rate_limit_error"))
        return 429;
    return 0;
}

static void describe(int status, enum ratelimit_net net, const char *code, char *buf, size_t size)
{
    switch (net) {
    case RATELIMIT_NET_CONNECT: snprintf(buf, size, "connection failed"); return;
    case RATELIMIT_NET_TIMEOUT: snprintf(buf, size, "request timed out"); return;
    case RATELIMIT_NET_DROPPED: snprintf(buf, size, "connection dropped"); return;
    case RATELIMIT_NET_FATAL: snprintf(buf, size, "transport error"); return;
    case RATELIMIT_NET_OK: break;
    }
    if (status == 0)
        snprintf(buf, size, "no response");
    else if (status >= 200 && status <= 299 && stream_error_status(code) == 429)
        snprintf(buf, size, "rate limited (said in the stream)");
    else if (status >= 200 && status <= 299 && code && strstr(code, "overloaded"))
        snprintf(buf, size, "the server is overloaded (said in the stream)");
    else if (status >= 200 && status <= 299 && code)
        /* until 2026-12 "HTTP 200 stream error server_error" */
        snprintf(buf, size, "a server error in the stream (%.40s)", code);
    else
        snprintf(buf, size, "HTTP %d %s", status, status_phrase(status, code));
}

static enum ratelimit_verdict classify(int status, enum ratelimit_net net, const char *code)
{
    switch (net) {
    case RATELIMIT_NET_CONNECT:
    case RATELIMIT_NET_TIMEOUT:
    case RATELIMIT_NET_DROPPED:
        return RATELIMIT_RETRY;
    case RATELIMIT_NET_FATAL:
        return RATELIMIT_NO_STATUS;
    case RATELIMIT_NET_OK:
        break;
    }
    if (status >= 200 && status <= 299) {
        int st = stream_error_status(code);
        if (!st)
            return RATELIMIT_NO_SUCCESS;
        status = st;
    }
    if (status == 429)
        return code_is(code, "insufficient_quota") ? RATELIMIT_NO_QUOTA : RATELIMIT_RETRY;
    if (status == 413)
        return RATELIMIT_NO_TOO_LARGE;
    if (status == 408 || status == 409 || (status >= 500 && status <= 599))
        return RATELIMIT_RETRY;
    return RATELIMIT_NO_STATUS;
}

static void say(char *reason, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *reason, size_t size, const char *fmt, ...)
{
    if (!reason || size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, size, fmt, ap);
    va_end(ap);
}

/* The delay the server asked for: retry-after-ms, then retry-after; for a 429 without them the
 * reset of a dimension it reports exhausted (*from_reset = 1). RATELIMIT_NO_TIME: none. */
static double server_delay(int status, enum ratelimit_net net, const char *error_code,
                           const struct ratelimit_response *resp, int *from_reset)
{
    double sd = ratelimit_response_delay(resp);
    int eff_status = status >= 200 && status <= 299 ? stream_error_status(error_code) : status;
    *from_reset = 0;
    if (sd < 0 && resp && eff_status == 429 && net == RATELIMIT_NET_OK) {
        if (resp->remaining_req == 0 && resp->reset_req > sd)
            sd = resp->reset_req;
        if (resp->remaining_tok == 0 && resp->reset_tok > sd)
            sd = resp->reset_tok;
        *from_reset = sd >= 0;
    }
    return sd;
}

enum ratelimit_verdict ratelimit_wait_out(int status, enum ratelimit_net net,
                                          const char *error_code,
                                          const struct ratelimit_policy *p,
                                          const struct ratelimit_response *resp, double waited,
                                          double *delay, double *charge, char *reason,
                                          size_t size)
{
    char t1[32], t2[32], t3[32], t4[32];
    double d0, c0;
    if (!delay)
        delay = &d0;
    if (!charge)
        charge = &c0;
    *delay = *charge = 0;
    int from_reset;
    double sd = server_delay(status, net, error_code, resp, &from_reset);
    int eff_status = status >= 200 && status <= 299 ? stream_error_status(error_code) : status;
    if (classify(status, net, error_code) != RATELIMIT_RETRY || eff_status != 429 || sd < 0 ||
        (resp && resp->should_retry == 0) ||
        sd > (p->max_retry_wait >= 0 ? p->max_retry_wait : 0))
        return RATELIMIT_NO_STATUS; /* not a 429 to wait out: the retry budget decides */
    /* Each wait counts at least RATELIMIT_WAIT_MIN; a hint under RATELIMIT_SLEEP_MIN (0, a
     * date past, "0.001ms": no hint, as the OpenAI SDK reads it) is also waited that long.
     * Until 2026-12 only the count had the floor, so "retry-after: 0" sent ~120 requests in
     * 50 ms. A short hint above it (retry-after-ms: 20) is waited as asked. */
    double cost = sd > RATELIMIT_WAIT_MIN ? sd : RATELIMIT_WAIT_MIN;
    double most = p->max_rate_wait >= 0 ? p->max_rate_wait : 0;
    if (!(waited >= 0))
        waited = 0;
    if (waited + cost > most) {
        say(reason, size, "HTTP 429 rate limited: the waits for rate limits count %s s "
            "already (each at least %s s), %s s more would pass max_rate_wait %s s",
            secs_text(waited, t1, sizeof t1), secs_text(RATELIMIT_WAIT_MIN, t2, sizeof t2),
            secs_text(cost, t3, sizeof t3), secs_text(most, t4, sizeof t4));
        return RATELIMIT_NO_RATE_WAIT;
    }
    *delay = sd >= RATELIMIT_SLEEP_MIN ? sd : cost;
    *charge = cost;
    if (*delay > sd)
        say(reason, size, "HTTP 429 rate limited, waiting %s s (%s %s s; %s s at least) "
            "(not a retry)", secs_text(cost, t1, sizeof t1),
            from_reset ? "the reset is in" : "asked", secs_text(sd, t2, sizeof t2),
            secs_text(RATELIMIT_WAIT_MIN, t3, sizeof t3));
    else
        say(reason, size, "HTTP 429 rate limited, waiting %s s %s (not a retry)",
            secs_text(sd, t1, sizeof t1), from_reset ? "for the reset" : "as asked");
    return RATELIMIT_RETRY;
}

/* Case-insensitive search for the lower-case word w in [p, end); NULL when absent. */
static const char *find_nocase(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    for (; p && (size_t)(end - p) >= n; p++)
        if (equals_nocase(p, p + n, w))
            return p;
    return NULL;
}

double ratelimit_text_delay(const char *text, size_t len)
{
    if (!text)
        return RATELIMIT_NO_TIME;
    const char *end = text + len, *p;
    if ((p = find_nocase(text, end, "try again in ")) != NULL) {
        p += 13;
        const char *q = p; /* "1.2s", "20ms", "6m0s": digits, units, a dot between digits */
        while (q < end && (is_digit(*q) || *q == 'h' || *q == 'm' || *q == 's' ||
                           (*q == '.' && q + 1 < end && is_digit(q[1]))))
            q++;
        double secs;
        if (q > p && parse_duration(p, (size_t)(q - p), &secs, 1) == 0)
            return secs;
    }
    if ((p = find_nocase(text, end, "retry after ")) != NULL) {
        p += 12;
        double secs;
        if (parse_hint(&p, end, &secs) == 0 && find_nocase(p, end, " second") == p)
            return secs;
    }
    return RATELIMIT_NO_TIME;
}

int ratelimit_text_tokens(const char *text, size_t len)
{
    if (!text)
        return 0;
    const char *end = text + len;
    return find_nocase(text, end, "tokens per min") || find_nocase(text, end, "(tpm)") ||
           find_nocase(text, end, "\"type\":\"tokens\"") ||
           find_nocase(text, end, "\"type\": \"tokens\"");
}

enum ratelimit_verdict ratelimit_should_retry(int status, enum ratelimit_net net,
                                              const char *error_code, int got_answer_text,
                                              int attempt, const struct ratelimit_policy *p,
                                              const struct ratelimit_response *resp,
                                              double *delay, char *reason, size_t size)
{
    char what[96], t1[32], t2[32];
    double dummy;
    if (!delay)
        delay = &dummy;
    *delay = 0;
    if (attempt < 1)
        attempt = 1;
    int total = (p->max_retries > 0 ? p->max_retries : 0) + 1;
    describe(status, net, error_code, what, sizeof what);

    enum ratelimit_verdict v = classify(status, net, error_code);
    if (v == RATELIMIT_NO_SUCCESS) {
        say(reason, size, "%s", what);
        return v;
    }
    if (got_answer_text) {
        say(reason, size, "%s after the answer started; not retrying", what);
        return RATELIMIT_NO_SHOWN;
    }
    int server = resp ? resp->should_retry : -1;
    if (server == 0) {
        say(reason, size, "%s; server says not to retry", what);
        return RATELIMIT_NO_SERVER_SAYS;
    }
    if (server == 1)
        v = RATELIMIT_RETRY;
    switch (v) {
    case RATELIMIT_NO_QUOTA:
        say(reason, size, "%s (insufficient_quota); not retrying", what);
        return v;
    case RATELIMIT_NO_TOO_LARGE:
        say(reason, size, "%s for the rate limit; not retrying the same request", what);
        return v;
    case RATELIMIT_NO_STATUS:
        say(reason, size, "%s; not retrying", what);
        return v;
    default:
        break;
    }
    if (attempt >= total) {
        say(reason, size, "%s; giving up after %d attempt%s", what, attempt,
            attempt == 1 ? "" : "s");
        return RATELIMIT_NO_ATTEMPTS;
    }

    int from_reset = 0;
    double sd = server_delay(status, net, error_code, resp, &from_reset);
    if (sd >= 0) {
        double maxw = p->max_retry_wait >= 0 ? p->max_retry_wait : 0;
        if (sd > maxw) {
            say(reason, size, "%s: %s %s s (more than max_retry_wait %s s)", what,
                from_reset ? "limit resets in" : "server asks to wait",
                secs_text(sd, t1, sizeof t1),
                secs_text(maxw, t2, sizeof t2));
            return RATELIMIT_NO_WAIT_TOO_LONG;
        }
        *delay = sd;
    } else {
        *delay = jittered(p, ratelimit_backoff(p, attempt));
    }
    say(reason, size, "%s, retrying in %s s (attempt %d/%d)", what,
        secs_text(*delay, t1, sizeof t1), attempt + 1, total);
    return RATELIMIT_RETRY;
}

const char *ratelimit_verdict_name(enum ratelimit_verdict v)
{
    switch (v) {
    case RATELIMIT_RETRY: return "retry";
    case RATELIMIT_NO_SUCCESS: return "success";
    case RATELIMIT_NO_SHOWN: return "answer-shown";
    case RATELIMIT_NO_STATUS: return "not-retryable";
    case RATELIMIT_NO_QUOTA: return "insufficient-quota";
    case RATELIMIT_NO_TOO_LARGE: return "too-large";
    case RATELIMIT_NO_SERVER_SAYS: return "server-says-no";
    case RATELIMIT_NO_WAIT_TOO_LONG: return "wait-too-long";
    case RATELIMIT_NO_ATTEMPTS: return "attempts-used";
    case RATELIMIT_NO_RATE_WAIT: return "rate-wait-used";
    }
    return "?";
}

/* The path of a URL ("/v1/chat/completions"), without query or fragment. */
static void url_path(const char *url, struct buf *out)
{
    const char *p = url;
    const char *scheme = strstr(url, "://");
    if (scheme) {
        p = strchr(scheme + 3, '/');
        if (!p)
            p = "/";
    }
    size_t n = strcspn(p, "?#");
    buf_append(out, p, n);
}

char *ratelimit_explain(const struct ratelimit_failure *f)
{
    struct buf b = BUF_INIT;
    const char *key_env = f->key_env && *f->key_env ? f->key_env : "OPENAI_API_KEY";
    char t1[32], t2[32];
    int st = f->status;
    if (f->net == RATELIMIT_NET_OK && st >= 200 && st <= 299 && stream_error_status(f->error_code))
        st = stream_error_status(f->error_code);
    switch (f->net) {
    case RATELIMIT_NET_CONNECT:
        buf_appends(&b, "Could not connect to the server. Check the network connection and the "
                        "base URL.");
        break;
    case RATELIMIT_NET_TIMEOUT:
        buf_appends(&b, "The request timed out. The server may be overloaded: try again later, "
                        "or raise the timeout.");
        break;
    case RATELIMIT_NET_DROPPED:
        buf_appends(&b, "The connection closed before the answer was complete. Try again.");
        break;
    case RATELIMIT_NET_FATAL:
        buf_appends(&b, "The request could not be sent (TLS or URL problem). Check the base URL "
                        "and the system certificates.");
        break;
    case RATELIMIT_NET_OK:
        break;
    }
    if (f->net == RATELIMIT_NET_OK) {
        if (st == 401) {
            if (f->key_label && *f->key_label)
                buf_printf(&b, "HTTP 401: the API key was rejected. Check the pool's key %s "
                               "(the profile's keys =).", f->key_label);
            else
                buf_printf(&b, "HTTP 401: the API key was rejected. Check the key in $%s (or "
                               "the key setting of the profile).", key_env);
        } else if (st == 403) {
            buf_appends(&b, "HTTP 403: the API key lacks access to this model or organisation. "
                            "Pick a model the key may use, or check the organisation/project "
                            "settings.");
        } else if (st == 404) {
            buf_appends(&b, "HTTP 404 at ");
            if (f->url && *f->url)
                url_path(f->url, &b);
            else
                buf_appends(&b, "the endpoint");
            /* Gemini's base ends in /v1beta (until 2026-12 its 404 said /v1 too) */
            int gemini = f->url && (strstr(f->url, ":streamGenerateContent") ||
                                    strstr(f->url, ":generateContent"));
            buf_printf(&b, ": the model name or the base URL is wrong. Check the model and "
                           "base_url (it usually ends in %s).", gemini ? "/v1beta" : "/v1");
        } else if (st == 413 && code_is(f->error_code, "request_too_large")) {
            /* Anthropic's: the body is over its size limit, not a rate limit */
            buf_appends(&b, "HTTP 413 request_too_large: the request is over the server's size "
                            "limit (Anthropic's is 32 MB). Large attachments make it so: attach "
                            "fewer or smaller files.");
        } else if (st == 413) {
            buf_appends(&b, "HTTP 413: the prompt is too large for this model's rate limit. "
                            "Shorten the conversation or lower max_tokens, or use a model with a "
                            "higher tokens-per-minute limit.");
        } else if (st == 429 && code_is(f->error_code, "insufficient_quota")) {
            buf_appends(&b, "HTTP 429 insufficient_quota: the account has no credit left. Check "
                            "the billing and usage limits of the account.");
        } else if (st == 429) {
            double sd = ratelimit_response_delay(f->resp);
            buf_appends(&b, "HTTP 429: rate limited.");
            /* the setting that stopped the waits (until 2026-12 max_retry_wait was named
             * whatever had) */
            const char *raise = "max_retries"; /* no word of when: the retries' backoff */
            if (sd >= 0 && f->max_retry_wait > 0 && sd > f->max_retry_wait) {
                buf_printf(&b, " The server asks to wait %s s (more than max_retry_wait %s s).",
                           secs_text(sd, t1, sizeof t1), secs_text(f->max_retry_wait, t2,
                                                                  sizeof t2));
                raise = "max_retry_wait";
            } else if (sd >= 0) {
                raise = "max_rate_wait"; /* waited as asked until the waits' total ran out */
            }
            buf_printf(&b, " Wait and try again, raise %s, or set rpm/tpm to pace requests.",
                       raise);
        } else if (st == 400) {
            buf_appends(&b, "HTTP 400: the server rejected the request. Check the model name and "
                            "the request options.");
        } else if (st >= 500 && st <= 599) {
            buf_printf(&b, "HTTP %d: the server failed (%s).", st, status_phrase(st, NULL));
            /* a retry-after past max_retry_wait ends the retries at once: say why (until
             * 2026-12 a 503 asking for 100 s failed with no word of it) */
            double sd = ratelimit_response_delay(f->resp);
            if (sd >= 0 && f->max_retry_wait >= 0 && sd > f->max_retry_wait)
                buf_printf(&b, " The server asks to wait %s s (more than max_retry_wait %s s): "
                               "not retried. Try again later, or raise max_retry_wait.",
                           secs_text(sd, t1, sizeof t1),
                           secs_text(f->max_retry_wait, t2, sizeof t2));
            else
                buf_appends(&b, " Try again later.");
        } else if (st == 408) {
            buf_appends(&b, "HTTP 408: the server timed out waiting for the request. Try again.");
        } else if (st >= 200 && st <= 299) {
            buf_printf(&b, "The server reported an error in the answer stream (%s).",
                       f->error_code ? f->error_code : "no code");
        } else if (st == 0) {
            buf_appends(&b, "No response from the server.");
        } else {
            buf_printf(&b, "HTTP %d: %s.", st, status_phrase(st, f->error_code));
        }
    }
    if (f->message && *f->message)
        buf_printf(&b, " Server said: %s", f->message);
    return buf_take(&b);
}

/* ---- circuit breaker ---- */

void ratelimit_breaker_init(struct ratelimit_breaker *b, int threshold, double cooldown)
{
    b->mode = RATELIMIT_CLOSED;
    b->failures = 0;
    b->threshold = threshold > 0 ? threshold : 5;
    b->cooldown = cooldown > 0 ? cooldown : 30.0;
    b->opened_at = RATELIMIT_NO_TIME;
    b->probe_at = RATELIMIT_NO_TIME;
}

int ratelimit_breaker_allow(struct ratelimit_breaker *b, double now, double *wait)
{
    double w = 0;
    int ok = 1;
    if (b->mode == RATELIMIT_OPEN) {
        if (now - b->opened_at >= b->cooldown) {
            b->mode = RATELIMIT_HALF_OPEN;
            b->probe_at = RATELIMIT_NO_TIME;
        } else {
            ok = 0;
            w = b->opened_at + b->cooldown - now;
        }
    }
    if (b->mode == RATELIMIT_HALF_OPEN) {
        if (b->probe_at >= 0 && now - b->probe_at < b->cooldown) {
            ok = 0;
            w = b->probe_at + b->cooldown - now;
        } else {
            b->probe_at = now;
        }
    }
    if (wait)
        *wait = ok ? 0 : w;
    return ok;
}

void ratelimit_breaker_success(struct ratelimit_breaker *b, double now)
{
    (void)now;
    b->mode = RATELIMIT_CLOSED;
    b->failures = 0;
    b->probe_at = RATELIMIT_NO_TIME;
}

void ratelimit_breaker_failure(struct ratelimit_breaker *b, double now)
{
    if (b->failures < b->threshold)
        b->failures++;
    if (b->mode == RATELIMIT_HALF_OPEN || b->mode == RATELIMIT_OPEN ||
        b->failures >= b->threshold) {
        b->mode = RATELIMIT_OPEN;
        b->opened_at = now;
        b->probe_at = RATELIMIT_NO_TIME;
    }
}

int ratelimit_breaker_counts(int status, enum ratelimit_net net, const char *code)
{
    if (status >= 200 && status <= 299 && code) /* an error event in a 200's stream: as the
                                                   status it stands for (Anthropic's
                                                   overloaded_error: a 5xx; until 2026-12 it
                                                   never counted, nor reached the fallback) */
        status = stream_error_status(code);
    switch (net) {
    case RATELIMIT_NET_CONNECT:
    case RATELIMIT_NET_TIMEOUT:
    case RATELIMIT_NET_DROPPED:
        return 1;
    case RATELIMIT_NET_FATAL:
        return 0;
    case RATELIMIT_NET_OK:
        break;
    }
    return status == 408 || (status >= 500 && status <= 599);
}

const char *ratelimit_breaker_name(enum ratelimit_breaker_mode m)
{
    switch (m) {
    case RATELIMIT_CLOSED: return "closed";
    case RATELIMIT_OPEN: return "open";
    case RATELIMIT_HALF_OPEN: return "half-open";
    }
    return "?";
}

/* ---- key pool ---- */

/* 2 known positive, 1 unknown, 0 exhausted. */
static int rank_class(int64_t remaining)
{
    if (remaining == RATELIMIT_UNKNOWN)
        return 1;
    return remaining > 0 ? 2 : 0;
}

/* When an exhausted key can send again: the latest reset among its exhausted dimensions
 * (HUGE_VAL when one has no known reset). Only meaningful for exhausted keys. */
static double ready_at(const struct ratelimit_dim *r, const struct ratelimit_dim *t)
{
    double at = 0;
    if (r->remaining == 0)
        at = r->reset_at >= 0 ? r->reset_at : HUGE_VAL;
    if (t->remaining == 0) {
        double tt = t->reset_at >= 0 ? t->reset_at : HUGE_VAL;
        if (tt > at)
            at = tt;
    }
    return at;
}

/* > 0 when a is a better pick than b: a key exhausted in either dimension ranks last (the one
 * that refills sooner first); then requests, then tokens, each known-positive (more is better) >
 * unknown > exhausted. */
static int key_compare(const struct ratelimit_key *a, const struct ratelimit_key *b, double now)
{
    struct ratelimit_dim ar = dim_view(&a->state.req, now), br = dim_view(&b->state.req, now);
    struct ratelimit_dim at = dim_view(&a->state.tok, now), bt = dim_view(&b->state.tok, now);
    int ea = ar.remaining == 0 || at.remaining == 0, eb = br.remaining == 0 || bt.remaining == 0;
    if (ea != eb)
        return eb - ea;
    if (ea) {
        double ra = ready_at(&ar, &at), rb = ready_at(&br, &bt);
        if (ra != rb)
            return ra < rb ? 1 : -1;
    }
    int ca = rank_class(ar.remaining), cb = rank_class(br.remaining);
    if (ca != cb)
        return ca - cb;
    if (ca == 2 && ar.remaining != br.remaining)
        return ar.remaining > br.remaining ? 1 : -1;
    ca = rank_class(at.remaining), cb = rank_class(bt.remaining);
    if (ca != cb)
        return ca - cb;
    if (ca == 2 && at.remaining != bt.remaining)
        return at.remaining > bt.remaining ? 1 : -1;
    return 0;
}

int ratelimit_pool_pick(const struct ratelimit_key *const *keys, size_t n, double now,
                        double *wait)
{
    int best = -1;
    double soonest = HUGE_VAL;
    for (size_t i = 0; i < n; i++) {
        const struct ratelimit_key *k = keys[i];
        if (!k)
            continue;
        if (k->cool_until > now) {
            if (k->cool_until < soonest)
                soonest = k->cool_until;
            continue;
        }
        if (best < 0 || key_compare(k, keys[best], now) > 0)
            best = (int)i;
    }
    if (wait)
        *wait = best >= 0 ? 0 : (soonest == HUGE_VAL ? HUGE_VAL : soonest - now);
    return best;
}

int ratelimit_key_dead(int status, const char *error_code)
{
    return status == 401 || status == 403 ||
           (status == 429 && code_is(error_code, "insufficient_quota"));
}

void ratelimit_key_note_failure(struct ratelimit_key *k, int status, const char *error_code,
                                const struct ratelimit_response *resp, double now)
{
    if (ratelimit_key_dead(status, error_code)) {
        k->cool_until = HUGE_VAL;
        return;
    }
    if (status != 429)
        return;
    double w = ratelimit_response_delay(resp);
    if (w < 0) {
        struct ratelimit_dim r = dim_view(&k->state.req, now), t = dim_view(&k->state.tok, now);
        if (r.remaining == 0 && r.reset_at > now)
            w = r.reset_at - now;
        if (t.remaining == 0 && t.reset_at > now && t.reset_at - now > w)
            w = t.reset_at - now;
    }
    if (w < 0)
        w = COOL_DEFAULT;
    if (now + w > k->cool_until)
        k->cool_until = now + w;
}

/* ---- persistence ---- */

static void put_count(struct buf *b, int64_t v)
{
    if (v == RATELIMIT_UNKNOWN)
        buf_appendc(b, '?');
    else
        buf_printf(b, "%lld", (long long)v);
}

static void put_time(struct buf *b, int known, double mono, double now, double now_epoch)
{
    if (!known)
        buf_appendc(b, '?');
    else
        buf_printf(b, "%.3f", now_epoch + (mono - now));
}

static void put_dim(struct buf *b, const char *name, const struct ratelimit_dim *d, double now,
                    double now_epoch)
{
    buf_printf(b, " %s=", name);
    put_count(b, d->remaining);
    buf_appendc(b, '/');
    put_count(b, d->limit);
    buf_appendc(b, '/');
    put_time(b, d->reset_at >= 0, d->reset_at, now, now_epoch);
    buf_appendc(b, '/');
    put_time(b, d->remaining != RATELIMIT_UNKNOWN, d->updated_at, now, now_epoch);
}

int ratelimit_state_save(const struct ratelimit_state *s, double now, double now_epoch, char *out,
                         size_t size)
{
    struct buf b = BUF_INIT;
    struct ratelimit_dim r = dim_view(&s->req, now), t = dim_view(&s->tok, now);
    buf_appends(&b, "rl1");
    put_dim(&b, "req", &r, now, now_epoch);
    put_dim(&b, "tok", &t, now, now_epoch);
    if (s->answered)
        buf_appends(&b, " ans=1");
    int n = (int)b.len;
    if (out && size) {
        size_t k = b.len < size - 1 ? b.len : size - 1;
        memcpy(out, b.data, k);
        out[k] = '\0';
    }
    buf_free(&b);
    return n;
}

int ratelimit_answered_line(char *out, size_t size)
{
    struct ratelimit_state s;
    ratelimit_state_init(&s, 0, 0);
    s.answered = 1;
    return ratelimit_state_save(&s, 0, 0, out, size);
}

/* "?" or a non-negative integer; advances *p. */
static int load_count(const char **p, const char *end, int64_t *out)
{
    if (*p < end && **p == '?') {
        (*p)++;
        *out = RATELIMIT_UNKNOWN;
        return 0;
    }
    const char *s = *p;
    while (*p < end && is_digit(**p))
        (*p)++;
    if (*p == s)
        return -1;
    return parse_count(s, *p, out);
}

/* "?" or an epoch time with an optional fraction; advances *p; *out = epoch or NO_TIME. */
static int load_time(const char **p, const char *end, double *out)
{
    if (*p < end && **p == '?') {
        (*p)++;
        *out = RATELIMIT_NO_TIME;
        return 0;
    }
    if (parse_decimal(p, end, out) != 0 || *out > 1e12)
        return -1;
    return 0;
}

static int load_dim(const char **p, const char *end, struct ratelimit_dim *d, double now,
                    double now_epoch)
{
    double reset, upd;
    if (load_count(p, end, &d->remaining) || skip_char(p, end, '/') ||
        load_count(p, end, &d->limit) || skip_char(p, end, '/') || load_time(p, end, &reset) ||
        skip_char(p, end, '/') || load_time(p, end, &upd))
        return -1;
    if (*p < end && **p != ' ')
        return -1;
    d->updated_at = upd >= 0 ? now - (now_epoch - upd) : RATELIMIT_NO_TIME;
    if (d->remaining != RATELIMIT_UNKNOWN && upd < 0)
        return -1; /* a count needs its date */
    d->reset_at = RATELIMIT_NO_TIME;
    if (reset >= 0) {
        double mono = now + (reset - now_epoch);
        if (mono > now) {
            d->reset_at = mono;
        } else { /* the reset already came */
            d->remaining = d->limit;
            d->updated_at = mono;
        }
    }
    return 0;
}

int ratelimit_state_load(struct ratelimit_state *s, const char *line, size_t len, double now,
                         double now_epoch)
{
    const char *p = line, *end = line + len;
    trim(&p, &end);
    if (end - p < 3 || memcmp(p, "rl1", 3) != 0 || !isfinite(now) || !isfinite(now_epoch))
        return -1;
    p += 3;
    struct ratelimit_dim req, tok;
    dim_init(&req);
    dim_init(&tok);
    int got = 0, answered = 0;
    while (p < end) {
        if (*p != ' ')
            return -1;
        while (p < end && *p == ' ')
            p++;
        const char *key = p;
        while (p < end && *p != '=' && *p != ' ')
            p++;
        if (p == end || *p != '=') /* a bare word: malformed */
            return -1;
        const char *key_end = p++;
        if (equals_nocase(key, key_end, "req")) {
            if (load_dim(&p, end, &req, now, now_epoch))
                return -1;
            got |= 1;
        } else if (equals_nocase(key, key_end, "tok")) {
            if (load_dim(&p, end, &tok, now, now_epoch))
                return -1;
            got |= 2;
        } else if (equals_nocase(key, key_end, "ans")) {
            answered = end - p >= 1 && *p == '1' && (end - p == 1 || p[1] == ' ');
            while (p < end && *p != ' ')
                p++;
        } else { /* a field from a newer version: skip it */
            while (p < end && *p != ' ')
                p++;
        }
    }
    if (got != 3)
        return -1;
    s->req = req;
    s->tok = tok;
    s->seen = req.limit != RATELIMIT_UNKNOWN || req.remaining != RATELIMIT_UNKNOWN ||
              req.reset_at >= 0 || tok.limit != RATELIMIT_UNKNOWN ||
              tok.remaining != RATELIMIT_UNKNOWN || tok.reset_at >= 0;
    s->answered = answered;
    return 0;
}

/* ---- display ---- */

static void fmt_count(int64_t v, char *buf, size_t size)
{
    if (v == RATELIMIT_UNKNOWN) {
        snprintf(buf, size, "?");
    } else if (v < 10000) {
        snprintf(buf, size, "%lld", (long long)v);
    } else if (v < 1000000) {
        snprintf(buf, size, "%lldk", (long long)(v / 1000));
    } else {
        /* floor to one decimal so "remaining" never looks fuller than it is */
        const char *unit = v < 1000000000 ? "M" : "G";
        int64_t div = v < 1000000000 ? 100000 : 100000000;
        int64_t tenths = v / div;
        if (tenths % 10 == 0 || tenths >= 1000)
            snprintf(buf, size, "%lld%s", (long long)(tenths / 10), unit);
        else
            snprintf(buf, size, "%lld.%lld%s", (long long)(tenths / 10),
                     (long long)(tenths % 10), unit);
    }
}

char *ratelimit_format_duration(double secs, char *buf, size_t size)
{
    if (!size)
        return buf;
    if (secs != secs) {
        snprintf(buf, size, "?");
        return buf;
    }
    if (secs <= 0) {
        snprintf(buf, size, "0s");
        return buf;
    }
    if (secs < 0.9995) {
        snprintf(buf, size, "%dms", (int)util_ceil(secs * 1000 - 1e-9));
        return buf;
    }
    if (secs < 9.95) {
        snprintf(buf, size, "%.1fs", secs);
        size_t n = strlen(buf);
        if (n > 3 && strcmp(buf + n - 3, ".0s") == 0)
            memmove(buf + n - 3, "s", 2);
        return buf;
    }
    if (secs > 1e9)
        secs = 1e9;
    long long t = (long long)util_ceil(secs - 1e-9);
    if (t < 60)
        snprintf(buf, size, "%llds", t);
    else if (t < 3600)
        snprintf(buf, size, "%lldm%llds", t / 60, t % 60);
    else
        snprintf(buf, size, "%lldh%lldm%llds", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

char *ratelimit_format(const struct ratelimit_state *s, double now, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    if (!s->seen)
        return buf;
    /* each limit with the time to its own reset (none when it is unknown or past) */
    struct ratelimit_dim dims[2] = {dim_view(&s->req, now), dim_view(&s->tok, now)};
    char part[2][96];
    const struct ratelimit_dim *raw[2] = {&s->req, &s->tok};
    for (int i = 0; i < 2; i++) {
        char a[24], b[24], e[40] = "";
        part[i][0] = '\0';
        /* a dimension the server never reported is left out (until 2026-12 "tok ?/?"); one
         * it reported and that went stale still reads "?" */
        if (raw[i]->limit == RATELIMIT_UNKNOWN && raw[i]->remaining == RATELIMIT_UNKNOWN &&
            raw[i]->updated_at == RATELIMIT_NO_TIME && raw[i]->full == 0)
            continue;
        /* past its reset the server's count is its limit again (the pacer may assume a
         * smaller bucket, a burst it learnt: not what the server said; until 2026-12 the bar
         * read "req 4/100" long after a reset) */
        if (raw[i]->reset_at >= 0 && now >= raw[i]->reset_at && raw[i]->limit > 0)
            dims[i].remaining = raw[i]->limit;
        fmt_count(dims[i].remaining, a, sizeof a);
        fmt_count(dims[i].limit, b, sizeof b);
        if (dims[i].reset_at > now) {
            char d[32];
            snprintf(e, sizeof e, " (%s)",
                     ratelimit_format_duration(dims[i].reset_at - now, d, sizeof d));
        }
        snprintf(part[i], sizeof part[i], "%s %s/%s%s", i ? "tok" : "req", a, b, e);
    }
    snprintf(buf, size, "%s%s%s", part[0], part[0][0] && part[1][0] ? " " : "", part[1]);
    return buf;
}

void ratelimit_dim_bucket(const struct ratelimit_dim *d, double now, double *cap, double *rate,
                          double *level)
{
    struct ratelimit_dim v = *d;
    dim_roll(&v, now);
    double c = (double)dim_capacity(&v), u = dim_unit(&v);
    *cap = c > 0 && u > 0 ? c : 0;
    *rate = *cap > 0 ? 1.0 / u : 0;
    *level = -1;
    if (*cap > 0 && v.remaining != RATELIMIT_UNKNOWN) {
        double lv = (double)v.remaining;
        if (v.reset_at > now) { /* the reset says what the rounded-down count hides */
            double e = c - (v.reset_at - now) / u;
            if (e > lv && e < lv + 1)
                lv = e;
        }
        *level = lv < c ? lv : c;
    }
    if (*cap > 0 && qw_on(&v)) { /* a per-minute limit: no more than its short window allows */
        double qc = qw_cap(&v), qr = qw_rate(&v), ql = qc - qw_debt(&v, now);
        *cap = qc < *cap ? qc : *cap;
        *rate = qr < *rate ? qr : *rate;
        if (*level > *cap)
            *level = *cap;
        if (*level >= 0 && ql < *level)
            *level = ql > 0 ? ql : 0;
    }
}
