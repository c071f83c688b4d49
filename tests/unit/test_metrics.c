/* test_metrics.c - the Prometheus registry: cumulative buckets, sums and counts, label
 * escaping, cache hits not timed, unknown values not observed; /metrics over HTTP. */
#include "config.h"
#include "core/metrics.h"
#include "base/buf.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int has(const struct buf *b, const char *s)
{
    return b->data && strstr(b->data, s) != NULL;
}

/* GET path from 127.0.0.1:port; the whole response in out. */
static void http_get(int port, const char *path, struct buf *out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        char req[256];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
        (void)!write(fd, req, (size_t)n);
        char tmp[4096];
        ssize_t k;
        while ((k = read(fd, tmp, sizeof tmp)) > 0)
            buf_append(out, tmp, (size_t)k);
    }
    close(fd);
}

int main(void)
{
    struct metrics *m = metrics_new();
    struct metrics_obs a = {"api.x", "m\"1\\\n", "complete", 0, 0.3, 0.02, 2.0, 0.001, 0.002,
                            -1, 10, 40, 1, 1, 0.5};
    metrics_observe(m, &a);
    a.ttft = 7;
    a.itl = -1; /* unknown: not observed */
    a.retries = a.rate_limited = 0;
    metrics_observe(m, &a);
    struct metrics_obs c = {"api.x", "m\"1\\\n", "complete", 1, 0.001, 0.001, 0.001, 0, 0, 0,
                            99, 99, 0, 0, 9};
    metrics_observe(m, &c); /* a cache hit: counted, not timed, not billed */
    metrics_set_inflight(m, 3);
    metrics_set_quota(m, "work", "requests", 42);
    struct buf b = BUF_INIT;
    metrics_write(m, &b);
#define L "{provider=\"api.x\",model=\"m\\\"1\\\\\\n\""
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_bucket" L ",le=\"0.005\"} 0\n"),
           "bounds are written short, as other exporters write them (not 0.0050000000000000001)");
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_bucket" L ",le=\"0.25\"} 0\n"),
           "0.3 s is not in the 0.25 bucket");
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_bucket" L ",le=\"0.5\"} 1\n"),
           "0.3 s is in the 0.5 bucket (label value escaped)");
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_bucket" L ",le=\"10\"} 2\n"),
           "buckets are cumulative: 7 s counted at 10");
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_bucket" L ",le=\"+Inf\"} 2\n"),
           "+Inf holds every observation");
    TAP_OK(has(&b, "tokterm_time_to_first_token_seconds_sum" L "} 7.3\n"),
           "sum of the two timed answers");
    TAP_OK(has(&b, "tokterm_inter_token_latency_seconds_count" L "} 1\n"),
           "an unknown gap is not observed");
    TAP_OK(has(&b, "tokterm_tls_handshake_duration_seconds_count" L "} 0\n"),
           "no TLS time known: none observed");
    TAP_OK(has(&b, "tokterm_requests_total" L ",status=\"complete\"} 3\n"),
           "requests counted, the cache hit too");
    TAP_OK(has(&b, "tokterm_cache_hits_total" L "} 1\n"), "one cache hit");
    TAP_OK(has(&b, "tokterm_retries_total" L "} 1\n"), "retries");
    TAP_OK(has(&b, "tokterm_rate_limited_total" L "} 1\n"), "429s");
    TAP_OK(has(&b, "tokterm_input_tokens_total" L "} 20\n"), "input tokens: the hit not billed");
    TAP_OK(has(&b, "tokterm_output_tokens_total" L "} 80\n"), "output tokens");
    TAP_OK(has(&b, "tokterm_spend_usd_total" L "} 1\n"), "spend");
    TAP_OK(has(&b, "# TYPE tokterm_requests_in_flight gauge\ntokterm_requests_in_flight 3\n"),
           "in flight");
    TAP_OK(has(&b, "tokterm_quota_remaining{key=\"work\",dimension=\"requests\"} 42\n"),
           "remaining quota per key");
#undef L
    struct buf err = BUF_INIT;
    int port = 0;
    TAP_OK(metrics_listen(m, "nonsense", &port, &err) == NULL && has(&err, "HOST:PORT"),
           "a bad address is refused: %s", err.data ? err.data : "");
    buf_reset(&err);
    /* glibc keeps a port's low 16 bits: 99999 was port 34463 (until 2026-12) */
    TAP_OK(metrics_listen(m, "127.0.0.1:99999", &port, &err) == NULL &&
               has(&err, "from 0 to 65535"),
           "a port past 65535 is refused: %s", err.data ? err.data : "");
    buf_reset(&err);
    struct metrics_server *s = metrics_listen(m, "127.0.0.1:0", &port, &err);
    TAP_OK(s && port > 0, "listening on port %d", port);
    if (s) {
        struct buf r = BUF_INIT;
        http_get(port, "/metrics", &r);
        TAP_OK(has(&r, "HTTP/1.1 200 OK\r\n") && has(&r, "text/plain; version=0.0.4") &&
                   has(&r, "tokterm_requests_in_flight 3\n"),
               "GET /metrics serves the exposition");
        buf_reset(&r);
        http_get(port, "/other", &r);
        TAP_OK(has(&r, "HTTP/1.1 404"), "another path: 404");
        buf_free(&r);
        metrics_server_stop(s);
    }
    buf_free(&err);
    buf_free(&b);
    metrics_free(m);
    return tap_done();
}
