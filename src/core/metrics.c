/* metrics.c - Prometheus metrics: registry, text exposition, /metrics over HTTP. */
#include "config.h"
#include "core/metrics.h"

#include "base/utf8.h"
#include "base/xmalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Upper bounds of the buckets: latencies, and the gap between tokens. */
static const double metrics_lat[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60,   120};
static const double metrics_gap[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,   0.25,   0.5,   1,    2.5};
#define METRICS_NB 14 /* the most buckets of a family */

enum { H_TTFT, H_ITL, H_TOTAL, H_DNS, H_CONNECT, H_TLS, H_N };

static const struct {
    const char *name, *help;
    const double *le;
    int n;
} metrics_hist[H_N] = {
    {"tokterm_time_to_first_token_seconds", "Time from sending a request to the first answer token.",
     metrics_lat, 14},
    {"tokterm_inter_token_latency_seconds", "Median gap between the answer tokens of a request.",
     metrics_gap, 11},
    {"tokterm_request_duration_seconds", "Time from sending a request to the end of its answer.",
     metrics_lat, 14},
    {"tokterm_dns_lookup_duration_seconds", "Time to resolve the API host name.", metrics_lat,
     14},
    {"tokterm_connect_duration_seconds", "Time to the TCP connection (DNS included).",
     metrics_lat, 14},
    {"tokterm_tls_handshake_duration_seconds", "Time to the end of the TLS handshake (connect "
                                               "included).",
     metrics_lat, 14},
};

struct metrics_hist {
    long long count[METRICS_NB]; /* per bucket (not cumulative) */
    long long n;
    double sum;
};

struct metrics_status {
    char *name;
    long long n;
};

struct metrics_series {
    char *provider, *model;
    struct metrics_hist h[H_N];
    struct metrics_status *status;
    size_t n_status;
    long long retries, rate_limited, cache_hits, tok_in, tok_out;
    double spend;
};

struct metrics_quota {
    char *key, *dim;
    double left;
};

struct metrics {
    pthread_mutex_t mu;
    struct metrics_series *s;
    size_t n, cap;
    struct metrics_quota *q;
    size_t n_q, cap_q;
    long inflight;
};

struct metrics *metrics_new(void)
{
    struct metrics *m = xcalloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void metrics_free(struct metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->s[i].provider);
        free(m->s[i].model);
        for (size_t k = 0; k < m->s[i].n_status; k++)
            free(m->s[i].status[k].name);
        free(m->s[i].status);
    }
    free(m->s);
    for (size_t i = 0; i < m->n_q; i++) {
        free(m->q[i].key);
        free(m->q[i].dim);
    }
    free(m->q);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static struct metrics_series *metrics_series(struct metrics *m, const char *provider,
                                             const char *model)
{
    provider = provider && *provider ? provider : "unknown";
    model = model && *model ? model : "unknown";
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->s[i].provider, provider) && !strcmp(m->s[i].model, model))
            return &m->s[i];
    XGROW(m->s, m->n + 1, m->cap);
    struct metrics_series *s = &m->s[m->n++];
    memset(s, 0, sizeof *s);
    s->provider = xstrdup(provider);
    s->model = xstrdup(model);
    return s;
}

static void metrics_hist_add(struct metrics_hist *h, int k, double v)
{
    if (v < 0)
        return;
    int b = 0;
    while (b < metrics_hist[k].n && v > metrics_hist[k].le[b])
        b++;
    if (b < metrics_hist[k].n)
        h->count[b]++;
    h->n++;
    h->sum += v;
}

void metrics_observe(struct metrics *m, const struct metrics_obs *o)
{
    pthread_mutex_lock(&m->mu);
    struct metrics_series *s = metrics_series(m, o->provider, o->model);
    const char *st = o->status && *o->status ? o->status : "unknown";
    size_t k;
    for (k = 0; k < s->n_status && strcmp(s->status[k].name, st); k++)
        ;
    if (k == s->n_status) {
        s->status = xreallocarray(s->status, s->n_status + 1, sizeof *s->status);
        s->status[k] = (struct metrics_status){xstrdup(st), 0};
        s->n_status++;
    }
    s->status[k].n++;
    if (o->cached) {
        s->cache_hits++;
    } else {
        const double v[H_N] = {o->ttft, o->itl, o->total, o->dns, o->connect, o->tls};
        for (int h = 0; h < H_N; h++)
            metrics_hist_add(&s->h[h], h, v[h]);
        s->retries += o->retries > 0 ? o->retries : 0;
        s->rate_limited += o->rate_limited > 0 ? o->rate_limited : 0;
        s->tok_in += o->prompt_tokens > 0 ? o->prompt_tokens : 0;
        s->tok_out += o->completion_tokens > 0 ? o->completion_tokens : 0;
        s->spend += o->spend_usd > 0 ? o->spend_usd : 0;
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_inflight(struct metrics *m, long n)
{
    pthread_mutex_lock(&m->mu);
    m->inflight = n;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_quota(struct metrics *m, const char *key, const char *dim, double left)
{
    pthread_mutex_lock(&m->mu);
    size_t i;
    for (i = 0; i < m->n_q && (strcmp(m->q[i].key, key) || strcmp(m->q[i].dim, dim)); i++)
        ;
    if (i == m->n_q) {
        XGROW(m->q, m->n_q + 1, m->cap_q);
        m->q[i] = (struct metrics_quota){xstrdup(key), xstrdup(dim), 0};
        m->n_q++;
    }
    m->q[i].left = left;
    pthread_mutex_unlock(&m->mu);
}

/* A label value: valid UTF-8 with \, " and newline escaped. */
static void metrics_label(struct buf *out, const char *name, const char *v)
{
    struct buf clean = BUF_INIT;
    utf8_sanitize(&clean, v, strlen(v));
    buf_printf(out, "%s=\"", name);
    for (size_t i = 0; i < clean.len; i++) {
        char c = clean.data[i];
        if (c == '\\' || c == '"')
            buf_printf(out, "\\%c", c);
        else if (c == '\n')
            buf_appends(out, "\\n");
        else
            buf_append(out, &c, 1);
    }
    buf_appends(out, "\"");
    buf_free(&clean);
}

static void metrics_pm(struct buf *out, const struct metrics_series *s)
{
    metrics_label(out, "provider", s->provider);
    buf_appends(out, ",");
    metrics_label(out, "model", s->model);
}

/* A number as Prometheus reads it: the shortest of %.15g..%.17g that reads back as v, so a
 * bucket is le="0.005" as other exporters write it, not le="0.0050000000000000001" (until
 * 2026-12), which Prometheus reads but `sum by (le)` across exporters does not join. */
static void metrics_num(struct buf *out, double v)
{
    char t[32];
    for (int p = 15; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (p == 17 || strtod(t, NULL) == v)
            break;
    }
    buf_appends(out, t);
}

static void metrics_head(struct buf *out, const char *name, const char *type, const char *help)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A counter family of one value per series. */
static void metrics_counter(struct buf *out, const struct metrics *m, const char *name,
                            const char *help, size_t off, int is_double)
{
    metrics_head(out, name, "counter", help);
    for (size_t i = 0; i < m->n; i++) {
        const char *p = (const char *)&m->s[i] + off;
        buf_printf(out, "%s{", name);
        metrics_pm(out, &m->s[i]);
        buf_appends(out, "} ");
        if (is_double)
            metrics_num(out, *(const double *)p);
        else
            buf_printf(out, "%lld", *(const long long *)p);
        buf_appends(out, "\n");
    }
}

void metrics_write(struct metrics *m, struct buf *out)
{
    pthread_mutex_lock(&m->mu);
    for (int h = 0; h < H_N; h++) {
        const char *name = metrics_hist[h].name;
        metrics_head(out, name, "histogram", metrics_hist[h].help);
        for (size_t i = 0; i < m->n; i++) {
            const struct metrics_hist *x = &m->s[i].h[h];
            long long cum = 0;
            for (int b = 0; b <= metrics_hist[h].n; b++) {
                cum = b < metrics_hist[h].n ? cum + x->count[b] : x->n;
                buf_printf(out, "%s_bucket{", name);
                metrics_pm(out, &m->s[i]);
                if (b < metrics_hist[h].n) {
                    buf_appends(out, ",le=\"");
                    metrics_num(out, metrics_hist[h].le[b]);
                    buf_appends(out, "\"} ");
                } else {
                    buf_appends(out, ",le=\"+Inf\"} ");
                }
                buf_printf(out, "%lld\n", cum);
            }
            buf_printf(out, "%s_sum{", name);
            metrics_pm(out, &m->s[i]);
            buf_appends(out, "} ");
            metrics_num(out, x->sum);
            buf_printf(out, "\n%s_count{", name);
            metrics_pm(out, &m->s[i]);
            buf_printf(out, "} %lld\n", x->n);
        }
    }
    metrics_head(out, "tokterm_requests_total", "counter",
                 "Answers by provider, model and how they ended (cache hits included).");
    for (size_t i = 0; i < m->n; i++)
        for (size_t k = 0; k < m->s[i].n_status; k++) {
            buf_appends(out, "tokterm_requests_total{");
            metrics_pm(out, &m->s[i]);
            buf_appends(out, ",");
            metrics_label(out, "status", m->s[i].status[k].name);
            buf_printf(out, "} %lld\n", m->s[i].status[k].n);
        }
    metrics_counter(out, m, "tokterm_retries_total", "Attempts after the first.",
                    offsetof(struct metrics_series, retries), 0);
    metrics_counter(out, m, "tokterm_rate_limited_total", "Attempts answered HTTP 429.",
                    offsetof(struct metrics_series, rate_limited), 0);
    metrics_counter(out, m, "tokterm_cache_hits_total", "Answers replayed from the cache.",
                    offsetof(struct metrics_series, cache_hits), 0);
    metrics_counter(out, m, "tokterm_input_tokens_total", "Prompt tokens billed.",
                    offsetof(struct metrics_series, tok_in), 0);
    metrics_counter(out, m, "tokterm_output_tokens_total", "Completion tokens billed.",
                    offsetof(struct metrics_series, tok_out), 0);
    metrics_counter(out, m, "tokterm_spend_usd_total",
                    "US dollars spent, priced from prices.tsv (models without a price: 0).",
                    offsetof(struct metrics_series, spend), 1);
    metrics_head(out, "tokterm_quota_remaining", "gauge",
                 "Requests or tokens a key has left in its window, from the rate-limit headers.");
    for (size_t i = 0; i < m->n_q; i++) {
        buf_appends(out, "tokterm_quota_remaining{");
        metrics_label(out, "key", m->q[i].key);
        buf_appends(out, ",");
        metrics_label(out, "dimension", m->q[i].dim);
        buf_appends(out, "} ");
        metrics_num(out, m->q[i].left);
        buf_appends(out, "\n");
    }
    metrics_head(out, "tokterm_requests_in_flight", "gauge",
                 "Requests started and not finished: on the wire, or waiting in the network "
                 "thread for a connection or for quota (a batch keeps up to twice -j there).");
    buf_printf(out, "tokterm_requests_in_flight %ld\n", m->inflight);
    pthread_mutex_unlock(&m->mu);
}

/* ---------------------------------------------------------------- /metrics over HTTP */

struct metrics_server {
    struct metrics *m;
    int fd, stop_pipe[2];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long served; /* scrapes answered */
};

/* Scrapers are read side by side: a client that sends its request a byte at a time (or
 * nothing) holds only its own slot, never the next scrape (until 2026-12 they were read one
 * after the other, each allowed 2 s of silence per byte, so one client trickling a byte a
 * second held /metrics for over an hour and Prometheus saw the target down). */
#define METRICS_CONNS 32       /* connections read at once; past it the oldest is dropped */
#define METRICS_REQ_MS 5000    /* the whole request must come within this */
#define METRICS_SEND_MS 2000   /* and the answer be taken within this */

struct metrics_conn {
    int fd;
    size_t got;
    long long deadline; /* ms, CLOCK_MONOTONIC */
    char req[4096];
};

static long long metrics_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Answer one complete request: GET /metrics gets the exposition, anything else a 404. The
 * socket is blocking again here, with a send timeout: a client that does not read its
 * answer is dropped after METRICS_SEND_MS instead of holding the thread. */
static void metrics_answer(struct metrics_server *s, int c, const char *req)
{
    struct buf body = BUF_INIT, head = BUF_INIT;
    int ok = strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET /metrics?", 13) == 0;
    if (ok)
        metrics_write(s->m, &body);
    else
        buf_appends(&body, "tokterm serves /metrics only\n");
    buf_printf(&head,
               "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
               "Content-Length: %zu\r\nConnection: close\r\n\r\n",
               ok ? "200 OK" : "404 Not Found", body.len);
    buf_append(&head, body.data ? body.data : "", body.len);
    int fl = fcntl(c, F_GETFL);
    if (fl >= 0)
        fcntl(c, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval tv = {METRICS_SEND_MS / 1000, (METRICS_SEND_MS % 1000) * 1000};
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    long long until = metrics_now_ms() + METRICS_SEND_MS;
    for (size_t at = 0; at < head.len && metrics_now_ms() < until;) {
        ssize_t k = send(c, head.data + at, head.len - at, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        at += (size_t)k;
    }
    buf_free(&head);
    buf_free(&body);
    if (ok) {
        pthread_mutex_lock(&s->mu);
        s->served++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

/* Read what came on a connection; 1 when it is done with (answered, closed or broken). */
static int metrics_read(struct metrics_server *s, struct metrics_conn *cn)
{
    ssize_t k = recv(cn->fd, cn->req + cn->got, sizeof cn->req - 1 - cn->got, 0);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (k <= 0)
        return 1;
    cn->got += (size_t)k;
    cn->req[cn->got] = '\0';
    if (cn->got < sizeof cn->req - 1 && !strstr(cn->req, "\r\n\r\n") && !strstr(cn->req, "\n\n"))
        return 0;
    metrics_answer(s, cn->fd, cn->req); /* the head is complete, or as much as is read */
    return 1;
}

static void *metrics_serve(void *arg)
{
    struct metrics_server *s = arg;
    struct metrics_conn *cs = xcalloc(METRICS_CONNS, sizeof *cs);
    size_t n = 0;
    struct pollfd p[METRICS_CONNS + 2];
    for (;;) {
        long long now = metrics_now_ms();
        for (size_t i = 0; i < n;) /* past its time: dropped */
            if (cs[i].deadline <= now) {
                close(cs[i].fd);
                cs[i] = cs[--n];
            } else {
                i++;
            }
        int wait = -1;
        for (size_t i = 0; i < n; i++)
            if (wait < 0 || cs[i].deadline - now < wait)
                wait = (int)(cs[i].deadline - now);
        p[0] = (struct pollfd){s->fd, POLLIN, 0};
        p[1] = (struct pollfd){s->stop_pipe[0], POLLIN, 0};
        for (size_t i = 0; i < n; i++)
            p[i + 2] = (struct pollfd){cs[i].fd, POLLIN, 0};
        if (poll(p, (nfds_t)n + 2, wait) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        /* the connections first (their slots move as they go), then a new one */
        for (size_t i = n; i-- > 0;)
            if (p[i + 2].revents && metrics_read(s, &cs[i])) {
                close(cs[i].fd);
                cs[i] = cs[--n];
            }
        if (!(p[0].revents & POLLIN))
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        int fl = fcntl(c, F_GETFL);
        if (fl >= 0)
            fcntl(c, F_SETFL, fl | O_NONBLOCK);
        if (n == METRICS_CONNS) { /* full: the oldest goes, a fresh scrape is let in */
            size_t old = 0;
            for (size_t i = 1; i < n; i++)
                if (cs[i].deadline < cs[old].deadline)
                    old = i;
            close(cs[old].fd);
            cs[old] = cs[--n];
        }
        cs[n].fd = c;
        cs[n].got = 0;
        cs[n].deadline = metrics_now_ms() + METRICS_REQ_MS;
        cs[n].req[0] = '\0';
        n++;
    }
    for (size_t i = 0; i < n; i++)
        close(cs[i].fd);
    free(cs);
    return NULL;
}

struct metrics_server *metrics_listen(struct metrics *m, const char *addr, int *port,
                                      struct buf *err)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1]) {
        buf_printf(err, "--metrics-listen takes HOST:PORT (e.g. 127.0.0.1:9464), not '%s'", addr);
        return NULL;
    }
    char host[256];
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host) {
        buf_appends(err, "--metrics-listen: the host name is too long");
        return NULL;
    }
    memcpy(host, addr, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [::1]:9464 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    /* a number past 65535 is refused: glibc's getaddrinfo keeps its low 16 bits, and
     * 127.0.0.1:99999 served on port 34463 (until 2026-12) */
    const char *svc = colon + 1;
    if (svc[strspn(svc, "0123456789")] == '\0' && (strlen(svc) > 5 || atol(svc) > 65535)) {
        buf_printf(err, "--metrics-listen %s: the port must be a number from 0 to 65535", addr);
        return NULL;
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(host, svc, &hints, &ai);
    if (rc != 0) {
        buf_printf(err, "--metrics-listen %s: %s", addr, gai_strerror(rc));
        return NULL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        buf_printf(err, "--metrics-listen %s: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    *port = 0;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        *port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                               : ((struct sockaddr_in *)&sa)->sin_port);
    struct metrics_server *s = xcalloc(1, sizeof *s);
    s->m = m;
    s->fd = fd;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pipe(s->stop_pipe) != 0 || pthread_create(&s->thread, NULL, metrics_serve, s) != 0) {
        buf_printf(err, "--metrics-listen: cannot start its thread: %s", strerror(errno));
        close(fd);
        free(s);
        return NULL;
    }
    return s;
}

void metrics_linger(struct metrics_server *s, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = (long long)until.tv_nsec + (long long)(seconds * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&s->mu);
    unsigned long start = s->served;
    while (s->served == start)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&s->mu);
}

void metrics_server_stop(struct metrics_server *s)
{
    if (!s)
        return;
    (void)!write(s->stop_pipe[1], "x", 1);
    pthread_join(s->thread, NULL);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    close(s->fd);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
