/* net.h - the network thread: owns a curl multi handle with pooled, reused connections
 * (keep-alive, shared TLS sessions and DNS cache, HTTP/2 when offered). Requests are queued to
 * it; it decodes streams (sse + api) and hands events to a queue (queue.h). Never touches the
 * terminal. */
#ifndef TT_NET_H
#define TT_NET_H
#include <stddef.h>

#include "proto/api.h"
#include "proto/dialect.h"
#include "net/ratelimit.h"

struct queue;

/* One key of a pool: a label for people (the variable's name, never the key) and the value. */
struct net_key {
    char *label;
    char *auth_value;     /* as auth_value below; wiped before it is freed */
};

struct net_request {
    char *url;            /* full URL of .../chat/completions */
    char *body;           /* JSON request body */
    const struct dialect *dialect; /* how the answer is decoded and its extra headers; NULL =
                                      openai (chat completions) */
    char *auth_name;      /* header carrying the key: "Authorization" or "api-key"; NULL = none */
    char *auth_value;     /* "Bearer sk-..." or the key itself; wiped before it is freed */
    long connect_timeout_ms; /* 0 = 10 s */
    double idle_timeout_s;   /* no data event for this long ends the attempt; 0 = 90 s */
    double max_time_s;       /* the whole request, retries included, ends after this; 0 = none */
    size_t max_answer_bytes; /* the answer (content + reasoning + tool calls' arguments) stops
                                past this; 0 = 64 MiB */
    char *cacert;         /* CA bundle to trust, NULL = system */
    int insecure;         /* skip TLS verification */
    struct ratelimit_policy policy; /* retries before the first byte of an answer */
    int has_policy;       /* 0: ratelimit_policy_init() defaults */
    char *quota_name;     /* requests with the same name share one quota state, pacing and
                             circuit breaker (e.g. "profile|host|key label"); NULL = the URL */
    char *quota_seed;     /* a saved quota line (ratelimit_state_save) to start from when this
                             process has no state for quota_name yet; may be NULL */
    double rpm, tpm;      /* client-side limits per minute from the profile; 0 = none */
    char *state_url;      /* quota state shared in Redis (`state =`, net/state.h); NULL: local */
    char *state_password; /* its password from state_password_env/_cmd (a secret); may be NULL */
    double est_tokens;    /* tokens this request will use, for pacing; 0 = unknown */
    int est_pending;      /* est_tokens is still to be counted from body and est_answer (by the
                             network thread, when it first paces the request) */
    long est_answer;      /* the answer's tokens in that count (max_tokens; 0: none) */
    char *key_env;        /* variable the key came from, for messages ("OPENAI_API_KEY") */
    struct net_key *keys; /* a key pool (n_keys > 0): each attempt uses the healthy key with the
                             most remaining quota; a key that got 429 cools down until its reset
                             (when all are cooling, the request waits for the first back: QEV_WAIT);
                             one refused (401, 403, no credit) is dead, and when all are, the
                             request fails at once; auth_value is then unused */
    size_t n_keys;
    int breaker_failures; /* consecutive failures that open this endpoint's breaker (0: 5) */
    double breaker_cooldown; /* seconds it stays open (0: 30) */
    struct net_request *fallback; /* sent instead while this endpoint's breaker is open */
    char *fallback_name;  /* for messages: the fallback profile or model */
    char *breaker_key;    /* what the shared breaker is named by (NULL: the URL): a fallback
                             model's own, at the same URL */
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
    char error_param[32];       /* a 400's error.param: the member refused ("temperature") */
    char model[128];
    char finish[32];
    struct api_usage usage;
    struct net_timings t;
    char *headers;              /* kept response headers, "name: value\n" lines, lower-case names */
    int cached;                 /* replayed from the response cache: no request was made */
    int body;                   /* the answer came as one body (JSON, a page), not a stream */
    int attempts;               /* attempts made (1 + retries) */
    int rate_limited;           /* attempts answered 429 */
    char key_label[64];         /* the pool key that served the last attempt ("" without a pool) */
    int used_fallback;          /* the fallback served it (the primary's breaker was open) */
    char *quota_line;           /* quota state after this exchange (ratelimit_state_save), "" when
                                   the server sent no rate-limit header */
    char *quota_text;           /* the same for people: "req 4999/5000 tok 159k/160k reset 6m0s" */
    char *warning;              /* a note for the user that does not change the outcome (usage
                                   of the wrong type was ignored); NULL when none */
    struct tool_call *calls;    /* the tool calls the answer asked for (wire names, arguments
                                   assembled), n_calls of them; NULL: none */
    size_t n_calls;
    char *thinking_json;        /* anthropic: the answer's signed thinking blocks (JSON array),
                                   NULL: none */
    size_t content_bytes;       /* answer text received */
    size_t reasoning_bytes;
};

struct net;

/* Start the network thread delivering to q. Returns NULL and sets *err (static text) when curl
 * cannot be set up. wait = 0 while net_library_preload's thread still loads libcurl: that
 * thread becomes the network thread once libcurl is loaded, and net_start returns at once;
 * when libcurl cannot be loaded, every request ends as a network error that says why
 * (QEV_END). Else (wait = 1, or no load running) libcurl is loaded first, a failure is *err. */
struct net *net_start(struct queue *q, int wait, const char **err);
/* Queue a request (net takes ownership of rq and its strings). Returns its id (never 0).
 * Before it leaves, the request waits while its quota says so (QEV_WAIT with the seconds); an
 * attempt that fails before any answer text on 408, 409, 429, 5xx, a connection failure or a
 * timeout is retried with backoff per rq->policy (QEV_RETRY with the reason and the seconds);
 * after repeated failures of an endpoint its circuit breaker fails requests fast. */
unsigned net_submit(struct net *n, struct net_request *rq);
/* Keep at most max requests on the wire at once (0: no limit); the others wait in submission
 * order and leave, on the network thread, the moment a place is free. */
void net_set_max_active(struct net *n, int max);
/* Requests on the wire now (not those waiting for their time or a place): any thread. */
int net_on_wire(struct net *n);
/* Ask the thread to stop request id; it ends with outcome API_CANCELLED. */
void net_cancel(struct net *n, unsigned id);
/* The user asks request id, waiting for its quota or for a retry's backoff, to leave now: it
 * goes at once, its quota not looked at (the server may refuse it with a 429). */
void net_send_now(struct net *n, unsigned id);
/* Stop the thread, cancelling everything; frees n. */
void net_stop(struct net *n);
/* 1 when the thread has ended every request submitted: of each, nothing is left on it but the
 * push of its QEV_END (counted down just before it, so a caller that has taken every QEV_END
 * sees 1). A process that exits next may then leave the thread parked in its poll rather
 * than wake and join it (net_stop), and leave n and its queue to the exit. */
int net_idle(struct net *n);
/* Free a request that was never submitted (wipes the key). */
void net_request_free(struct net_request *rq);
/* Free a QEV_END result. */
void net_result_free(void *result);
/* util_redact over every text of r a server chose: the message, the error's code and member,
 * the model and finish_reason it named, the warning (until 2026-12 only the message was: a
 * key echoed as an error code reached stderr, one echoed as the model the store and --json). */
void net_result_redact(struct net_result *r, const char *secret);
/* An exchange that ended without the network (never sent, refused, libcurl missing): its end
 * is queued on q under id, with outcome, no timings and why (taken) as the error. */
void net_result_push_local(struct queue *q, unsigned id, enum api_outcome outcome, char *why);

#endif
