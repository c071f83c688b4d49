/* state_url.c - the pure half of the shared quota state (state.h): addresses, names and the
 * buckets' figures. No hiredis: libttcore holds it, so the configuration checks a URL. */
#include "config.h"
#include "net/state.h"

#include "base/sha256.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- addresses */

static int state_copy(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        return -1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

/* %XX escapes of a user or password, in place. */
static void state_unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2])) {
            char hex[3] = {r[1], r[2], 0};
            *w++ = (char)strtol(hex, NULL, 16);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* A whole decimal number in [lo, hi]: 0 with it in *out, or -1. */
static int state_parse_num(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int state_parse_db(const char *s, int *db)
{
    return state_parse_num(s, 0, 1000000, db);
}

/* The options after '?': "db=N" (a socket's database; a TCP URL gives it as its path) and
 * "timeout=MS", joined by '&'. 0, or -1 with the reason in err. */
static int state_parse_options(const char *q, int db_ok, struct state_addr *a, char *err,
                               size_t size)
{
    char opts[128];
    if (state_copy(opts, sizeof opts, q, strlen(q)) != 0) {
        snprintf(err, size, "state: the options after '?' are too long");
        return -1;
    }
    char *save = NULL;
    for (char *o = strtok_r(opts, "&", &save); o; o = strtok_r(NULL, "&", &save)) {
        if (db_ok && util_starts_with(o, "db=")) {
            if (state_parse_db(o + 3, &a->db) != 0) {
                snprintf(err, size, "state: ?db= needs a number, got '%.20s'", o + 3);
                return -1;
            }
        } else if (util_starts_with(o, "timeout=")) {
            if (state_parse_num(o + 8, STATE_BUDGET_MIN_MS, STATE_BUDGET_MAX_MS,
                                &a->budget_ms) != 0) {
                snprintf(err, size, "state: ?timeout= is what a Redis call may take in "
                         "milliseconds, %d-%d, got '%.20s'", STATE_BUDGET_MIN_MS,
                         STATE_BUDGET_MAX_MS, o + 8);
                return -1;
            }
        } else {
            snprintf(err, size, "state: unknown option '%.20s' after '?' (%stimeout=MS)", o,
                     db_ok ? "db=N, " : "");
            return -1;
        }
    }
    return 0;
}

/* The part of a redis:// URL after the scheme, its options cut off:
 * [user:password@]host[:port][/db]. */
static int state_parse_tcp(const char *p, struct state_addr *a, char *err, size_t size)
{
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q; /* the last @: a password may hold one */
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        if (colon && state_copy(a->user, sizeof a->user, p, (size_t)(colon - p)) != 0) {
            snprintf(err, size, "state: the user name is too long");
            return -1;
        }
        if (state_copy(a->password, sizeof a->password, pw, (size_t)(at - pw)) != 0) {
            snprintf(err, size, "state: the password is too long");
            return -1;
        }
        state_unescape(a->user);
        state_unescape(a->password);
        p = at + 1;
    }
    const char *hend = end, *port = NULL;
    if (*p == '[') { /* [IPv6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            snprintf(err, size, "state: an IPv6 address needs its closing ']'");
            return -1;
        }
        if (state_copy(a->host, sizeof a->host, p + 1, (size_t)(rb - p - 1)) != 0)
            goto bad_host;
        port = rb + 1 < end && rb[1] == ':' ? rb + 2 : NULL;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) {
            hend = colon;
            port = colon + 1;
        }
        if (state_copy(a->host, sizeof a->host, p, (size_t)(hend - p)) != 0)
            goto bad_host;
    }
    if (!a->host[0])
        goto bad_host;
    if (port) {
        char num[16];
        if (state_copy(num, sizeof num, port, (size_t)(end - port)) != 0) {
            snprintf(err, size, "state: bad port");
            return -1;
        }
        if (state_parse_num(num, 1, 65535, &a->port) != 0) {
            snprintf(err, size, "state: the port must be 1-65535, got '%.16s'", num);
            return -1;
        }
    }
    if (slash && slash[1] && state_parse_db(slash + 1, &a->db) != 0) {
        snprintf(err, size, "state: the database after '/' must be a number, got '%.20s'",
                 slash + 1);
        return -1;
    }
    return 0;
bad_host:
    snprintf(err, size, "state: no host in redis://[user:password@]host:port/db");
    return -1;
}

int state_parse_url(const char *url, struct state_addr *a, char *err, size_t size)
{
    memset(a, 0, sizeof *a);
    a->port = 6379;
    a->budget_ms = STATE_BUDGET_MS;
    if (!url)
        url = "";
    if (util_starts_with(url, "unix://")) {
        const char *p = url + 7, *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 0 || p[0] != '/' || state_copy(a->path, sizeof a->path, p, n) != 0) {
            snprintf(err, size, "state: a socket is unix:///absolute/path (at most %zu bytes)",
                     sizeof a->path - 1);
            return -1;
        }
        return q ? state_parse_options(q + 1, 1, a, err, size) : 0;
    }
    if (!util_starts_with(url, "redis://")) {
        snprintf(err, size, "state: expected redis://[user:password@]host:port/db or "
                 "unix:///path, got '%.40s'", util_starts_with(url, "redis") ? "redis..." : url);
        return -1;
    }
    /* The options start at the last '?' that no '@' follows (a password may hold a '?'). The
     * rest is parsed from a copy cut there. */
    const char *q = strrchr(url, '?');
    if (q && strchr(q, '@'))
        q = NULL;
    char body[1024];
    if (state_copy(body, sizeof body, url, q ? (size_t)(q - url) : strlen(url)) != 0) {
        snprintf(err, size, "state: the URL is too long");
        return -1;
    }
    int rc = q ? state_parse_options(q + 1, 0, a, err, size) : 0;
    if (rc == 0)
        rc = state_parse_tcp(body + 8, a, err, size);
    util_wipe(body, sizeof body); /* it may hold a password */
    return rc;
}

/* ---------------------------------------------------------------- ids */

static void state_id(const char *what, const char *url, const char *key, char out[33])
{
    struct sha256 h;
    unsigned char d[SHA256_DIGEST_LEN];
    char hex[65];
    sha256_init(&h);
    sha256_update(&h, what, strlen(what));
    sha256_update(&h, url ? url : "", url ? strlen(url) : 0);
    sha256_update(&h, "\n", 1);
    if (key)
        sha256_update(&h, key, strlen(key));
    sha256_final(&h, d);
    sha256_hex(d, hex);
    memcpy(out, hex, 32);
    out[32] = '\0';
    util_wipe(&h, sizeof h);
}

void state_quota_id(const char *url, const char *key, char out[33])
{
    state_id("tokterm-quota-v1\n", url, key, out);
}

void state_endpoint_id(const char *url, char out[33])
{
    state_id("tokterm-endpoint-v1\n", url, NULL, out);
}

/* ---------------------------------------------------------------- dimensions */

void state_dims(const struct ratelimit_state *s, double now, double est_tokens,
                struct state_dim d[2])
{
    const struct ratelimit_dim *dims[2] = {&s->req, &s->tok};
    double conf[2] = {s->rpm, s->tpm};
    for (int i = 0; i < 2; i++) {
        double cap, rate, level;
        ratelimit_dim_bucket(dims[i], now, &cap, &rate, &level);
        if (!(cap > 0) && conf[i] > 0) { /* no headers: the configured bucket, a second's */
            rate = conf[i] / 60;          /* worth (at least one), as the local one holds */
            cap = ratelimit_bucket_cap(conf[i]);
        }
        if (rate >= 1 && cap > rate)
            cap = rate; /* at most a second's worth at once (600 a minute may mean 10 a second) */
        d[i].cap = cap > 1 ? cap - 1 : cap; /* one unit of margin */
        d[i].rate = rate;
        d[i].cost = i == 0 ? 1 : (est_tokens > 0 ? est_tokens : 0);
        d[i].level = level >= 0 ? (level >= 1 ? level - 1 : 0) : -1;
    }
}

