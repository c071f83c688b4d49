/* net.h - the network thread: owns a curl multi handle with pooled, reused connections
 * (keep-alive, shared TLS sessions and DNS cache, HTTP/2 when offered). Requests are queued to
 * it; it decodes streams (sse + api) and hands events to a queue (queue.h). Never touches the
 * terminal. */
#ifndef TT_NET_H
#define TT_NET_H
#include <stddef.h>

#include "api.h"

struct queue;

struct net_request {
    char *url;            /* full URL of .../chat/completions */
    char *body;           /* JSON request body */
    char *auth_name;      /* header carrying the key: "Authorization" or "api-key"; NULL = none */
    char *auth_value;     /* "Bearer sk-..." or the key itself; wiped before it is freed */
    long connect_timeout_ms; /* 0 = 10 s */
    double idle_timeout_s;   /* no data event for this long ends the attempt; 0 = 90 s */
    char *cacert;         /* CA bundle to trust, NULL = system */
    int insecure;         /* skip TLS verification */
};

struct net_timings {
    double dns, connect, tls, ttfb;   /* seconds since the request started (curl's view) */
    double ttft;                      /* time to the first answer token; -1 when none */
    double total;
    double gap_p50, gap_p95;          /* inter-token gaps, seconds */
    double tokens_per_s;
    long deltas;                      /* text deltas received */
    int reused;                       /* 1 when an existing connection carried the request */
    int http_version;                 /* 10, 11, 20, 30; 0 unknown */
};

/* Everything known when an exchange ends; the reader of QEV_END owns it (net_result_free). */
struct net_result {
    unsigned req;
    enum api_outcome outcome;
    long status;                /* HTTP status, 0 when none arrived */
    char *error;                /* message for the user, NULL when complete */
    char error_code[64];        /* e.g. "insufficient_quota" */
    char model[128];
    char finish[32];
    struct api_usage usage;
    struct net_timings t;
    char *headers;              /* kept response headers, "name: value\n" lines, lower-case names */
    int cached;                 /* replayed from the response cache: no request was made */
    size_t content_bytes;       /* answer text received */
    size_t reasoning_bytes;
};

struct net;

/* Start the network thread delivering to q. Returns NULL and sets *err (static text) when curl
 * cannot be set up. curl_global_init must have been called. */
struct net *net_start(struct queue *q, const char **err);
/* Queue a request (net takes ownership of rq and its strings). Returns its id (never 0). */
unsigned net_submit(struct net *n, struct net_request *rq);
/* Ask the thread to stop request id; it ends with outcome API_CANCELLED. */
void net_cancel(struct net *n, unsigned id);
/* Stop the thread, cancelling everything; frees n. */
void net_stop(struct net *n);
/* Free a request that was never submitted (wipes the key). */
void net_request_free(struct net_request *rq);
/* Free a QEV_END result. */
void net_result_free(void *result);

#endif
