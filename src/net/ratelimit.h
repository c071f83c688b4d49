/* ratelimit.h - rate-limit headers, client-side pacing, retry/backoff policy, circuit breaker
 * and key-pool scheduling. Pure: no curl, no I/O, no global clock - every function that needs
 * time takes it as an argument so tests control it.
 *
 * Times: `now` is a monotonic clock in seconds (util_now(); must be >= 0), `now_epoch` is the
 * wall clock in seconds since the epoch (util_epoch()); it is only needed where the network gives
 * or the store keeps absolute dates.
 *
 * Typical use by the network code, per request:
 *   ratelimit_response_init(&resp);
 *   for each header line: ratelimit_feed(&key->state, &resp, line, len, util_now(), util_epoch());
 *   on failure: v = ratelimit_should_retry(status, net, code, shown, attempt, &policy, &resp,
 *                                           &delay, reason, sizeof reason);
 *   before each send: wait = ratelimit_wait_time(&key->state, now, est_tokens); then
 *                     ratelimit_note_sent(&key->state, now, est_tokens).
 *
 * All parsers take (pointer, length), never read past the length and need no NUL terminator;
 * any byte string is safe input (see tests/unit/fuzz_ratelimit.c). Objects are plain data with
 * no locking: one thread at a time per object (the default jitter generator is per-thread). */
#ifndef TT_RATELIMIT_H
#define TT_RATELIMIT_H
#include <stddef.h>
#include <stdint.h>

/* A count the server did not send (or sent as -1, like Azure): distinct from 0. */
#define RATELIMIT_UNKNOWN ((int64_t)-1)
/* A time or duration that is not known. */
#define RATELIMIT_NO_TIME (-1.0)

/* ---- quota state (one per API key and endpoint) ---- */

/* One dimension of a quota: requests or tokens. */
struct ratelimit_dim {
    int64_t limit;     /* x-ratelimit-limit-*, or RATELIMIT_UNKNOWN */
    int64_t remaining; /* x-ratelimit-remaining-*, minus local debits; or RATELIMIT_UNKNOWN */
    double reset_at;   /* monotonic time the server refills remaining to limit; or NO_TIME */
    double updated_at; /* monotonic time remaining was last reported; or NO_TIME */
    int64_t full;      /* the largest bucket size a report has shown (remaining + 1, or
                          remaining + what its reset says is missing): what "full" is when the
                          server's bucket holds less than its per-minute limit (a burst);
                          0 = none seen */
    double period;     /* longest reset duration reported: how long the server takes to refill
                          from empty (0 = none seen). A request sent while no reset is known
                          starts that clock: what it spends is back by then at the latest. */
    double unit;       /* seconds the server takes to give one unit back (0 = unknown): 60/limit,
                          or more when a report shows a slower refill (Groq's requests per day).
                          Each local spend moves reset_at on by this much, so requests still on
                          their way (their reports not back yet) are paid for in the clock. */
    /* The short window: a per-minute limit may be enforced over a second while the headers
     * report the per-minute figures (OpenAI: 600 rpm enforced as 10 a second), so a dimension
     * with a per-minute limit is also paced by a bucket of about a second's worth, refilled at
     * a little under limit/60 a second (see ratelimit_note_refused). */
    double q_debt;     /* what it lacked of full at q_time (spends not yet refilled) */
    double q_time;     /* monotonic time of q_debt; NO_TIME = never spent from (full) */
    double q_cap;      /* its size as learnt from 429s; 0 = the default (0.9 of limit/60) */
    double q_factor;   /* its refill as a share of limit/60; 0 = the default (0.97) */
    double q_learnt;   /* when a 429 last shrank it; NO_TIME = never */
};

/* What the server told us about a key's quota, plus optional configured client-side limits.
 * Plain data: copy it freely; nothing to free. */
struct ratelimit_state {
    struct ratelimit_dim req, tok;
    int seen;           /* 1 once any x-ratelimit-* header arrived (or a saved line loaded) */
    int answered;       /* 1: the endpoint answered before without sending any rate-limit
                           header (a saved line's "ans=1"): its limits are known to be absent,
                           so no slow start is needed to learn them */
    double rpm, tpm;    /* configured requests/tokens per minute; 0 = none */
    double req_level;   /* configured request bucket level (rpm bucket) */
    double tok_level;   /* configured token bucket level (tpm bucket) */
    double bucket_time; /* monotonic time the configured buckets were last refilled; or NO_TIME */
};

/* Initialise a quota state with everything unknown. rpm/tpm > 0 add client-side token buckets
 * of that many requests/tokens per minute (refilled continuously, starting full). */
void ratelimit_state_init(struct ratelimit_state *s, double rpm, double tpm);

/* What a configured bucket of `per_minute` holds when full: a second's worth, at least one
 * unit (the local pacer and the Redis one both size it so). */
double ratelimit_bucket_cap(double per_minute);

/* ---- per-response header values ---- */

/* Everything one HTTP response said about limits and retrying. Plain data. */
struct ratelimit_response {
    int64_t limit_req, remaining_req; /* as sent, or RATELIMIT_UNKNOWN */
    int64_t limit_tok, remaining_tok;
    double reset_req, reset_tok;      /* durations as sent (seconds), or NO_TIME */
    double retry_after_ms;            /* retry-after-ms converted to seconds, or NO_TIME */
    double retry_after;               /* retry-after in seconds (a date minus now_epoch, >= 0),
                                         or NO_TIME */
    int should_retry;                 /* x-should-retry: 1 true, 0 false, -1 not sent */
};

/* Reset a response record to "nothing sent". Call before the first header of each response. */
void ratelimit_response_init(struct ratelimit_response *r);

/* Feed one raw header line ("Name: value", any case, optional CRLF, len bytes). Rate-limit
 * headers update state s (absolute reset times = now + duration) and r; retry-after(-ms) and
 * x-should-retry update r only. Either s or r may be NULL. A malformed value sets that field to
 * unknown. Returns 1 for a header this module uses, 0 for any other line (status line, blank
 * line, other headers), -1 for one of ours with a malformed value. */
int ratelimit_feed(struct ratelimit_state *s, struct ratelimit_response *r, const char *line,
                   size_t len, double now, double now_epoch);

/* The delay the server asked for in r: retry-after-ms wins over retry-after. Returns seconds
 * (>= 0) or RATELIMIT_NO_TIME when the server gave none. */
double ratelimit_response_delay(const struct ratelimit_response *r);

/* Parse a duration: Go style "1s", "6m0s", "20ms", "2m59.56s", "1h2m3s" (units h m s ms us ns,
 * fractions allowed) or a plain number of seconds ("12", "0.5"). Leading/trailing blanks are
 * ignored. Returns 0 and *secs, or -1 for an empty, negative, exponent, overflowing (more than
 * about 31 years) or otherwise malformed value. */
int ratelimit_parse_duration(const char *s, size_t len, double *secs);

/* Parse an RFC 3339 date-time ("2026-10-21T07:28:00Z", "...T07:28:00.5+02:00"; T and Z in
 * either case; Anthropic's rate-limit resets) into seconds since the epoch. Leading/trailing
 * blanks are ignored. Returns 0, or -1 for anything else (no zone, a bad field, before 1970). */
int ratelimit_parse_rfc3339(const char *s, size_t len, double *epoch);

/* Parse an HTTP date (IMF-fixdate "Wed, 21 Oct 2026 07:28:00 GMT", RFC 850 or asctime form).
 * Returns 0 and *epoch (seconds since 1970, UTC), or -1. */
int ratelimit_parse_http_date(const char *s, size_t len, double *epoch);

/* ---- client-side pacing ---- */

/* The tokens a server counts against its tokens-per-minute limit for a request of body (a
 * JSON text): its messages' text at about 4 bytes a token, 3 a message, plus max_tokens. */
double ratelimit_est_tokens(const char *body, long max_tokens);

/* Seconds to wait before sending a request of about est_tokens tokens (0 = go now), from the
 * server-reported quota (remaining requests/tokens are taken as valid until their reset time;
 * then the dimension is full again) and the configured rpm/tpm buckets. Never waits for what is
 * unknown; never waits longer than until a bucket is full (a request larger than the whole limit
 * goes once the limit is full, and the server judges it). Does not modify s. */
double ratelimit_wait_time(const struct ratelimit_state *s, double now, double est_tokens);
/* The part of that wait the configured rpm/tpm buckets ask for alone (the user's own pacing,
 * never cut short by a cap on holds, net.c's net_hold_past). */
double ratelimit_wait_configured(const struct ratelimit_state *s, double now, double est_tokens);

/* Debit one request and est_tokens tokens from s (known remaining counts and the configured
 * buckets), at time now. Call when the request leaves. */
void ratelimit_note_sent(struct ratelimit_state *s, double now, double est_tokens);

/* A response's rate-limit headers have just been fed into s; before is s as it was when that
 * response began. The server counted the requests that reached it before this one: `later`
 * requests of this quota were sent after it, and when others were in flight too (newest = 0)
 * some of those may have reached the server first and answered with fresher counts already.
 * Unless this report is the newest word (newest and later == 0), keep the lower remaining
 * (minus later) and the later reset of the two, so a stale report never lets more requests
 * go than the quota has. */
/* A successful response r (its headers all fed) said nothing of a limit that s holds a count
 * for: the server no longer reports it, so that count (and its reset) is forgotten, not left
 * to hold requests until a reset minutes away (issue 16). Call after ratelimit_merge_report. */
void ratelimit_forget_unreported(struct ratelimit_state *s, const struct ratelimit_response *r);

void ratelimit_merge_report(struct ratelimit_state *s, const struct ratelimit_state *before,
                            double now, int64_t later, int newest);

/* One dimension as a token bucket, for state shared across processes (net/state.c): *cap its
 * size (the burst reports have shown, else the limit) and *rate units given back a second (both
 * 0 when unknown), *level what the last report implies is left now (-1 unknown); a per-minute
 * limit's short window (ratelimit_note_refused) bounds all three. */
void ratelimit_dim_bucket(const struct ratelimit_dim *d, double now, double *cap, double *rate,
                          double *level);

/* A 429 of the requests (tokens = 0) or tokens (tokens = 1) limit came back for a request sent
 * at sent_at; r holds its headers. The server's bucket is empty now, so the short window's is
 * too; and when its per-minute count still had room (remaining > 0), the server enforces the
 * limit over a shorter window than this process assumed: the short bucket halves (down to one
 * unit), then its refill slows by a tenth a time (down to half of limit/60). Requests that were
 * already on their way when it last learnt (sent_at before then) teach nothing new. */
void ratelimit_note_refused(struct ratelimit_state *s, const struct ratelimit_response *r,
                            int tokens, double sent_at, double now);

/* The delay an error message asks for: "Please try again in 1.2s." / "in 20ms" / "in 6m0s"
 * (OpenAI), "retry after 6 seconds" (Azure). Returns seconds, or RATELIMIT_NO_TIME. Any bytes
 * are safe input. */
double ratelimit_text_delay(const char *text, size_t len);

/* 1 when a 429's body is about the tokens limit ("tokens per min", "(TPM)", type "tokens"),
 * 0 otherwise (requests, or not said). */
int ratelimit_text_tokens(const char *text, size_t len);

/* ---- retry policy ---- */

enum ratelimit_jitter {
    RATELIMIT_JITTER_EQUAL = 0, /* delay = d/2 + random(0, d/2): never less than half (default) */
    RATELIMIT_JITTER_FULL,      /* delay = random(0, d) */
    RATELIMIT_JITTER_NONE,      /* delay = d */
};

/* How the transfer ended, as told by the network code (map curl's codes onto these). */
enum ratelimit_net {
    RATELIMIT_NET_OK = 0,    /* an HTTP response arrived (look at the status) */
    RATELIMIT_NET_CONNECT,   /* could not connect (refused, DNS temporary failure, reset) */
    RATELIMIT_NET_TIMEOUT,   /* connect or transfer timed out */
    RATELIMIT_NET_DROPPED,   /* connection closed mid-response */
    RATELIMIT_NET_FATAL,     /* not worth retrying (TLS certificate, bad URL, ...) */
};

/* Retry knobs. Fill with ratelimit_policy_init(), then change what the config says. */
struct ratelimit_policy {
    int max_retries;       /* retries after the first attempt (default 2: 3 attempts in all) */
    double backoff_base;   /* first backoff delay before jitter, seconds (default 0.5) */
    double backoff_cap;    /* backoff doubles up to this, seconds (default 8) */
    double max_retry_wait; /* a server-asked delay longer than this: give up (default 60) */
    double max_rate_wait;  /* 429s waited out without spending a retry: at most this many
                              seconds in all for one request, each wait counting at least
                              RATELIMIT_WAIT_MIN (default 120; 0: none, every 429 a retry) */
    enum ratelimit_jitter jitter;
    /* Random numbers in [0, 1); NULL = an internal per-thread xorshift generator. */
    double (*random)(void *ctx);
    void *random_ctx;
};

/* Fill p with the defaults listed above. */
void ratelimit_policy_init(struct ratelimit_policy *p);

/* Outcome of ratelimit_should_retry(): RATELIMIT_RETRY or why not. */
enum ratelimit_verdict {
    RATELIMIT_RETRY = 0,       /* retry after *delay seconds */
    RATELIMIT_NO_SUCCESS,      /* the status is not an error */
    RATELIMIT_NO_SHOWN,        /* answer text already reached the user */
    RATELIMIT_NO_STATUS,       /* status (or transport error) is never retried: 400 401 403 404 */
    RATELIMIT_NO_QUOTA,        /* 429 insufficient_quota: billing, not a rate */
    RATELIMIT_NO_TOO_LARGE,    /* 413: the same request will fail again; shrink it */
    RATELIMIT_NO_SERVER_SAYS,  /* x-should-retry: false */
    RATELIMIT_NO_WAIT_TOO_LONG,/* the server asks to wait more than max_retry_wait */
    RATELIMIT_NO_ATTEMPTS,     /* max_retries used up */
    RATELIMIT_NO_RATE_WAIT,    /* 429s waited out for max_rate_wait seconds in all already:
                                  from here on the retries decide */
};

/* What one wait-out of a 429 waits and counts against max_rate_wait at least, seconds: a
 * server that answers "retry after 0" forever gets a request a second, and still ends. */
#define RATELIMIT_WAIT_MIN 1.0
/* A server-asked wait shorter than this is no hint: it is waited RATELIMIT_WAIT_MIN. */
#define RATELIMIT_SLEEP_MIN 0.01

/* Decide whether to retry an attempt that ended with HTTP status (0 = none) or transport error
 * net, with the body's error code/type (NULL if none), after answer text was or was not shown.
 * attempt is the 1-based number of the attempt that just ended; resp holds its headers (may be
 * NULL). Rules, in order: never after answer text was shown; x-should-retry false forbids and
 * true allows regardless of status; otherwise retry on 408, 409, 429 (not insufficient_quota),
 * 5xx, connect failures, timeouts and dropped connections, and on a 2xx whose streamed error is
 * server_error / overloaded(_error) / rate_limit_exceeded; never when the attempts are used up.
 * The delay is the server's (retry-after-ms, then retry-after; for 429 without them the reset of
 * an exhausted dimension) or else exponential backoff with jitter; a server delay longer than
 * max_retry_wait refuses. Sets *delay (0 when not retrying) and writes a one-line human reason
 * into reason[size] (may be NULL), e.g. "HTTP 429 rate limited, retrying in 1.2 s (attempt
 * 2/3)". Returns the verdict. */
enum ratelimit_verdict ratelimit_should_retry(int status, enum ratelimit_net net,
                                              const char *error_code, int got_answer_text,
                                              int attempt, const struct ratelimit_policy *p,
                                              const struct ratelimit_response *resp,
                                              double *delay, char *reason, size_t size);

/* A 429 the client can wait out without spending a retry from max_retries: the server said
 * when to come back (retry-after-ms, retry-after, or the reset of a dimension it reports
 * exhausted; ratelimit_text_delay's "try again in" goes into retry_after_ms first) within
 * max_retry_wait. waited is what this request's earlier wait-outs counted. Returns
 * RATELIMIT_RETRY with *delay (the server's; RATELIMIT_WAIT_MIN for one under
 * RATELIMIT_SLEEP_MIN) and a reason such as
 * "HTTP 429 rate limited, waiting 2 s as asked (not a retry)";
 * RATELIMIT_NO_RATE_WAIT when this wait would pass max_rate_wait (reason says so); or
 * RATELIMIT_NO_STATUS when it is no such 429. In both, ratelimit_should_retry decides, with
 * the budget of max_retries (so max_rate_wait = 0 is the plain retry policy). *charge gets what this wait counts (>= RATELIMIT_WAIT_MIN). */
enum ratelimit_verdict ratelimit_wait_out(int status, enum ratelimit_net net,
                                          const char *error_code,
                                          const struct ratelimit_policy *p,
                                          const struct ratelimit_response *resp, double waited,
                                          double *delay, double *charge, char *reason,
                                          size_t size);

/* Backoff before jitter for the retry after attempt n (1-based): base * 2^(n-1), capped. */
double ratelimit_backoff(const struct ratelimit_policy *p, int attempt);

/* A final failure, for ratelimit_explain(). Unused fields may stay 0/NULL. */
struct ratelimit_failure {
    int status;                /* HTTP status, 0 = none */
    enum ratelimit_net net;    /* transport outcome */
    const char *error_code;    /* error.code or error.type from the body */
    const char *message;       /* error.message from the body (shown sanitised by the caller) */
    const char *url;           /* request URL: 404 shows its path */
    const char *key_env;       /* environment variable holding the key (NULL: OPENAI_API_KEY) */
    const char *key_label; /* a pool's key: its label (keys =), named instead of key_env */
    const struct ratelimit_response *resp; /* headers of the last response */
    double max_retry_wait;     /* policy value, for "server asks to wait" (0: not mentioned) */
};

/* A user-facing message saying what went wrong and what to do about it (401 check the key,
 * 403 key lacks access, 429 insufficient_quota billing, 404 model or base URL wrong, 413 prompt
 * too large, ...). Returns a new string (caller frees); the server message is appended raw, so
 * sanitise before drawing. */
char *ratelimit_explain(const struct ratelimit_failure *f);

/* Name of a verdict ("retry", "too-large", ...) for logs and tests. Static string. */
const char *ratelimit_verdict_name(enum ratelimit_verdict v);

/* ---- circuit breaker (one per endpoint) ---- */

enum ratelimit_breaker_mode {
    RATELIMIT_CLOSED = 0, /* requests flow */
    RATELIMIT_OPEN,       /* failing: refuse until the cool-down ends */
    RATELIMIT_HALF_OPEN,  /* cooled down: one probe request at a time */
};

struct ratelimit_breaker {
    enum ratelimit_breaker_mode mode;
    int failures;      /* consecutive failures */
    int threshold;     /* failures that open it */
    double cooldown;   /* seconds open before a probe */
    double opened_at;  /* when it last opened */
    double probe_at;   /* when the half-open probe left, or NO_TIME */
};

/* Closed breaker opening after threshold consecutive failures (<= 0: 5) for cooldown seconds
 * (<= 0: 30). */
void ratelimit_breaker_init(struct ratelimit_breaker *b, int threshold, double cooldown);

/* May a request go now? Returns 1 (go) or 0 and *wait = seconds until it may (wait may be NULL).
 * An open breaker whose cool-down ended turns half-open and lets exactly one probe through (this
 * call records it); another probe is allowed only if the first got no verdict within cooldown. */
int ratelimit_breaker_allow(struct ratelimit_breaker *b, double now, double *wait);

/* Record a success: closes the breaker and clears the failure count. */
void ratelimit_breaker_success(struct ratelimit_breaker *b, double now);

/* Record a failure: counts it; opens the breaker at the threshold, or again at once when the
 * half-open probe failed. */
void ratelimit_breaker_failure(struct ratelimit_breaker *b, double now);

/* 1 when an outcome is an endpoint failure for the breaker (5xx, 408, connect/timeout/dropped),
 * 0 when the endpoint answered (2xx, 4xx incl. 429 - pacing handles those). */
int ratelimit_breaker_counts(int status, enum ratelimit_net net, const char *code);

/* "closed", "open" or "half-open". Static string. */
const char *ratelimit_breaker_name(enum ratelimit_breaker_mode m);

/* ---- key pool ---- */

/* One API key of a pool: its quota and health. */
struct ratelimit_key {
    struct ratelimit_state state;
    double cool_until; /* skip the key until this monotonic time; 0 = healthy; HUGE_VAL = dead */
};

/* Index of the key to use at time now among keys[0..n) (NULL entries skipped): healthy keys
 * only, ranked by remaining requests then remaining tokens, per dimension known-positive (more is
 * better) > unknown > exhausted; a key exhausted in either dimension ranks below all others (the
 * one whose reset comes first leads); ties go to the lower index. Returns -1 when every key is
 * cooling down or dead and
 * sets *wait (may be NULL) to the seconds until the first comes back (HUGE_VAL: all dead). */
int ratelimit_pool_pick(const struct ratelimit_key *const *keys, size_t n, double now,
                        double *wait);

/* Update a key's health after a failed attempt: a 429 cools it until the server's retry-after,
 * else until the reset of its exhausted dimension, else for 5 s; 401, 403 and 429
 * insufficient_quota mark it dead. Other statuses leave it alone. resp may be NULL. */
void ratelimit_key_note_failure(struct ratelimit_key *k, int status, const char *error_code,
                                const struct ratelimit_response *resp, double now);

/* 1 when status (and error_code, may be NULL) marks the key that got it dead: 401, 403, 429
 * insufficient_quota. */
int ratelimit_key_dead(int status, const char *error_code);

/* ---- persistence and display ---- */

/* Serialise the server-reported part of s into a short line (no newline) such as
 * "rl1 req=4999/5000/1761031680.250/1761031620.000 tok=?/?/?/?": per dimension
 * remaining/limit/reset/reported-at, '?' = unknown, times in epoch seconds (converted with
 * now/now_epoch), then " ans=1" when s->answered. Writes at most size bytes (NUL included).
 * Returns the length it needed (like snprintf). */
int ratelimit_state_save(const struct ratelimit_state *s, double now, double now_epoch, char *out,
                         size_t size);

/* The saved line of an endpoint that answered without any rate-limit header ("ans=1"; see
 * answered), into out as ratelimit_state_save() writes it. */
int ratelimit_answered_line(char *out, size_t size);

/* Load a line written by ratelimit_state_save() into s (configured rpm/tpm and buckets are kept;
 * resets already past are applied). Returns 0, or -1 for a malformed line (s unchanged). */
int ratelimit_state_load(struct ratelimit_state *s, const char *line, size_t len, double now,
                         double now_epoch);

/* Status-bar text such as "req 4999/5000 (12ms) tok 159k/160k (6m0s)" ('?' for unknown
 * counts; each limit with the time to its own reset, none when that is unknown or past), or ""
 * when the server never sent any rate-limit header. Writes at most size bytes; returns buf. */
char *ratelimit_format(const struct ratelimit_state *s, double now, char *buf, size_t size);

/* Format a duration the way the status bar does ("20ms", "1.2s", "12s", "6m0s", "1h2m3s";
 * whole seconds and milliseconds round up, so a pending wait never shows as 0) into buf[size];
 * returns buf. */
char *ratelimit_format_duration(double secs, char *buf, size_t size);

#endif
