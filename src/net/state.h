/* state.h - quota state shared by several processes (and machines) in Redis (`state =
 * redis://...`): the token buckets of each quota (requests and tokens, their sizes and rates
 * learnt from the rate-limit headers as net/ratelimit.c learns them), a key's cool-down, the
 * endpoint's circuit breaker. The network thread asks before each request leaves and tells
 * after each answer; the local state (net/ratelimit.c, saved in SQLite) keeps being fed too,
 * so when Redis is unreachable, slow (more than its budget a call: STATE_BUDGET_MS unless the
 * URL's ?timeout= says) or restarted, pacing goes on with it: the call answers STATE_LOCAL, a
 * warning is handed out once (state_take_warning), the connection is tried again at most once
 * a second, and the next call that reaches Redis seeds it from the local state again ("merge
 * back").
 *
 * Every update is one Lua script, run with EVALSHA (EVAL when Redis answers NOSCRIPT: its
 * script cache was flushed or it restarted); every clock is Redis's TIME, so machines whose
 * clocks disagree share one bucket. Redis keys are "tokterm:q:" plus a hash of the URL and the
 * API key (never the key) and "tokterm:b:" plus a hash of the URL; no prompt text goes there.
 *
 * One struct state per connection; not thread-safe (the network thread owns it). */
#ifndef TT_STATE_H
#define TT_STATE_H
#include <stddef.h>

#include "net/ratelimit.h"

/* The time a call may take before Redis counts as slow and the local state answers, unless the
 * URL says otherwise (?timeout=MS, STATE_BUDGET_MIN_MS to STATE_BUDGET_MAX_MS): a Redis across a
 * WAN, or one on a loaded machine, may need more. */
#define STATE_BUDGET_MS 50
/* The longest cool-down a key gets in Redis: a dead key's (401, 403, no credit), read back as
 * dead (STATE_COOL_DEAD and more), not as a day to wait. */
#define STATE_COOL_MAX 86400.0
#define STATE_COOL_DEAD (STATE_COOL_MAX / 2) /* no 429 asks for 12 h; the hash lives 1 h */
#define STATE_BUDGET_MIN_MS 1
#define STATE_BUDGET_MAX_MS 10000

/* Where Redis is: from "redis://[user:password@]host[:port][/db][?timeout=MS]" or
 * "unix:///path[?db=N][&timeout=MS]" (the options in either order, after one '?'). */
struct state_addr {
    char host[256];   /* host name or address ("" for a socket) */
    int port;         /* 6379 unless given */
    char path[256];   /* the socket's path ("" for TCP) */
    char user[128];   /* "" = none (plain AUTH password) */
    char password[256]; /* "" = none */
    int db;           /* SELECT db (0 = default) */
    int budget_ms;    /* what a call may take (STATE_BUDGET_MS unless ?timeout= says) */
};

/* Parse url into *a. Returns 0, or -1 with a one-line reason in err[size]. The reason never
 * repeats the password. */
int state_parse_url(const char *url, struct state_addr *a, char *err, size_t size);

/* What one dimension (requests or tokens) of a quota is, for the shared bucket: its size and
 * refill rate (0 = unknown: Redis keeps what another process learnt), what this request costs
 * and the level the server's last report implies now (-1 = unknown). */
struct state_dim {
    double cap, rate, cost, level;
};

/* The two dimensions of local state s for a request of est_tokens tokens at time now: the
 * sizes and rates the headers taught (or the configured rpm/tpm), at most one second of the
 * rate when that is a unit or more (providers may enforce a per-minute limit per second while
 * their headers report the minute: OpenAI documents 600 a minute as 10 a second), less one unit
 * of margin (an answer's arrival varies by a few milliseconds; a bucket kept one below the
 * server's never sends into its 429), and the level minus that margin. */
void state_dims(const struct ratelimit_state *s, double now, double est_tokens,
                struct state_dim d[2]);

/* Answers of state_admit. */
enum state_verdict {
    STATE_LOCAL = -1, /* Redis unreachable or slow, or the quota not known yet: use local state */
    STATE_GO = 0,     /* a place is booked: leave in *wait seconds (0: now) without asking again */
    STATE_WAIT = 1,   /* the bucket is empty for longer than max_book: ask again in *wait s */
    STATE_OPEN = 2,   /* the endpoint's breaker is open (another process saw it fail): *wait */
    STATE_COOL = 3,   /* this key cools down after a 429 (another process got it): *wait */
};

struct state;

/* A handle for url (see struct state_addr), password (may be NULL: the URL's) replacing the
 * URL's. Does not connect (the first call does), so it never fails but for a malformed URL:
 * NULL with err set. */
struct state *state_new(const char *url, const char *password, char *err, size_t size);
void state_free(struct state *st);

/* Names of a quota (url and the key it uses; key may be NULL) and an endpoint, hashed:
 * out[33], 32 hex digits. */
void state_quota_id(const char *url, const char *key, char out[33]);
void state_endpoint_id(const char *url, char out[33]);

/* Before a request of quota qid at endpoint epid leaves: book it in the shared buckets.
 * max_book: the longest wait that is booked (a longer one is asked again). While no process
 * knows the limits, one gets STATE_LOCAL (it probes with its local slow start) and the others
 * STATE_WAIT for 10 ms; no_limits = 1 says the endpoint answered without any rate-limit
 * header, so every process paces locally (STATE_LOCAL) from then on. */
enum state_verdict state_admit(struct state *st, const char *qid, const char *epid,
                               const struct state_dim d[2], double max_book, int no_limits,
                               double *wait);

/* A response's headers were fed into local state: bring the shared levels down to what the
 * server reported (levels d[i].level; never up), set up the buckets Redis does not know from
 * d's caps and rates, note an endpoint that reports no limit (no_limits: a 2xx without any
 * rate-limit header), and end the probe, so the next process need not wait for it. */
void state_report(struct state *st, const char *qid, const struct state_dim d[2], int no_limits);

/* A 429 (or a refused key): the shared buckets of qid are empty now and, when cool > 0, the
 * key cools down for cool seconds for every process. */
void state_cool(struct state *st, const char *qid, double cool);

/* The endpoint answered (success = 1) or failed as the breaker counts failures: threshold
 * failures in a row open it for cooldown seconds, for every process. */
void state_breaker(struct state *st, const char *epid, int success, int threshold,
                   double cooldown);

/* state_report, state_cool and state_breaker send their update without waiting for its
 * reply (the next state_admit reads it first, within its budget), so a request's path waits for
 * one round trip, its admission. Wait for those replies now (tests, before reading Redis). */
void state_flush(struct state *st);

/* A warning to show once (Redis lost, or back), or NULL. The string stays valid until the
 * next call on st. */
const char *state_take_warning(struct state *st);

/* How many processes (state handles) asked about the quota of the last state_admit that
 * reached Redis within 10 s, this one included; 0 before any did. */
int state_peers(const struct state *st);

/* 1 while connected. */
int state_connected(const struct state *st);

/* Calls made, and calls that fell back to the local state, since state_new. */
void state_counts(const struct state *st, unsigned long *calls, unsigned long *fallbacks);

#endif
