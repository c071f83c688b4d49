/* metrics.h - Prometheus metrics of the exchanges: a registry the answers are observed into,
 * its text exposition (format 0.0.4), and a small HTTP server that serves it at /metrics.
 * Names follow Prometheus' conventions: the tokterm_ prefix, base units (_seconds), counters
 * end in _total. Labels: provider (the API host), model, and status on the request counter. */
#ifndef TOKTERM_CORE_METRICS_H
#define TOKTERM_CORE_METRICS_H

#include "base/buf.h"

#include <stddef.h>

/* One answer. */
struct metrics_obs {
    const char *provider, *model; /* NULL: "unknown" */
    const char *status;           /* complete, error, cancelled, truncated, interrupted */
    int cached;                   /* replayed from the cache: counted as a hit, not timed */
    double ttft, itl, total, dns, connect, tls; /* seconds; < 0 = unknown */
    long long prompt_tokens, completion_tokens; /* < 0 = unknown */
    long long retries, rate_limited;            /* attempts after the first; answered 429 */
    double spend_usd;                           /* < 0 = no price */
};

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* Add one answer (safe from any thread). */
void metrics_observe(struct metrics *m, const struct metrics_obs *o);
/* Requests on the wire now. */
void metrics_set_inflight(struct metrics *m, long n);
/* A pool key's remaining quota; dimension is "requests" or "tokens". */
void metrics_set_quota(struct metrics *m, const char *key, const char *dimension, double left);
/* Append the exposition of every family to out (safe from any thread). */
void metrics_write(struct metrics *m, struct buf *out);

struct metrics_server;
/* Serve m at http://HOST:PORT/metrics (addr "HOST:PORT"; port 0 picks one) on a thread of its
 * own. NULL with err set when addr is bad or cannot be bound; *port gets the port bound. */
struct metrics_server *metrics_listen(struct metrics *m, const char *addr, int *port,
                                      struct buf *err);
/* Wait until /metrics has been read once from now on, at most seconds. */
void metrics_linger(struct metrics_server *s, double seconds);
void metrics_server_stop(struct metrics_server *s);

#endif
