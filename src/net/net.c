/* net.c - the network thread (see net.h). */
#include "config.h"
#include "net/net.h"
#include "net/textbatch.h"
#include "net/probe.h"
#include "net/queue.h"
#include "net/state.h"
#include "proto/sse.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/curl_dl.h"

#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define NET_BODY_CAP ((size_t)64 << 20)   /* non-streamed bodies (JSON answers, errors), at least */
#define NET_ANSWER_CAP ((size_t)64 << 20) /* an answer's text when the request sets no limit */
#define NET_DRAIN_MAX ((size_t)1 << 20)   /* bytes read after the end of a stream, at most */
#define NET_DRAIN_S 2.0                   /* seconds waited for the end of the response after it */
#define NET_GAP_BUCKETS 160              /* quarter octaves of microseconds, up to ~19 h */
#define NET_RECV_BUFFER 131072L              /* curl receive buffer, bytes */
/* The longest unfinished event held between two of libcurl's pieces (at most 16 KiB each,
 * CURL_MAX_WRITE_SIZE) to be decoded whole on the fast path: a chunk of the shape is its
 * pre and post (API_SHAPE_MAX) and a short text. */
#define NET_CARRY_MAX 4096

enum xfer_mode { XM_UNDECIDED, XM_SSE, XM_BODY };

struct xfer {
    struct xfer *next;
    unsigned id;
    CURL *easy;
    struct curl_slist *hdrs;
    struct net_request *rq;
    struct net *net;
    enum xfer_mode mode;
    struct sse_parser sse;
    struct api_stream api;
    struct buf body;
    struct buf headers;
    char ctype[128];
    char errbuf[CURL_ERROR_SIZE];
    int sock_errno;        /* why the last socket() failed (net_open_socket); 0 */
    long status;
    double t_start, t_first_token, t_last_delta;
    double t_last_event;   /* the last progress: new answer or reasoning text (the idle timer) */
    double deadline;       /* monotonic time the whole request ends (--max-time); HUGE_VAL */
    unsigned gaps[NET_GAP_BUCKETS];
    double now;            /* clock read once per network read */
    struct buf carry;      /* an unfinished event of the shape, held until its end comes
                              (net_feed_sse); never handed to the SSE parser meanwhile */
    struct buf batch;      /* decoded text of this pass (or more, NET_HOLD_MIN), handed to the
                              queue in one push */
    size_t pass_bytes;     /* bytes the write callback had in this pass of the net thread */
    unsigned long pieces;  /* write callbacks of an event stream (TOKTERM_DEBUG_STREAM) */
    unsigned long parsed;  /* of its events, those the SSE parser dispatched */
    enum api_kind batch_kind;
    double batch_t_first;
    long deltas;
    size_t content_bytes, reasoning_bytes;
    int headers_sent;      /* QEV_HEADERS pushed */
    int headers_end;       /* the blank line that ends the response's headers came */
    int stream_over;       /* [DONE] or an error event: ignore the rest */
    int proto_error;       /* the stream could not be parsed */
    int idle_fired;
    int cancelled;
    int time_fired;        /* stopped by --max-time */
    int limit_fired;       /* stopped by --max-answer-mb: the text up to the limit is kept */
    int drained_stop;      /* stopped reading bytes that followed the end of the stream */
    int cut_after_end;     /* the connection broke after the finish_reason, before the usage */
    size_t drained;        /* bytes read after the end of the stream */
    double t_over;         /* when the stream ended ([DONE] or an error event) */
    unsigned cancel_seen;  /* net->cancel_seq when this transfer last looked at the cancels */
    char last_failure[256]; /* why the last attempt failed, for a --max-time message */
    struct ratelimit_response resp; /* rate-limit and retry headers of this attempt */
    struct net_quota *quota; /* quota state of the key in use (pacing, rate-limit headers) */
    struct net_quota *ep;    /* the endpoint's entry: its circuit breaker */
    int key_index;           /* pool key of this attempt */
    int used_fallback;
    int attempt;           /* 1-based attempt number */
    int rate_limited;      /* attempts answered 429 so far */
    int rate_waits;        /* of those, 429s waited out without spending a retry */
    double rate_waited;    /* what those waits counted against max_rate_wait, seconds */
    double sent_at;        /* monotonic time this attempt left */
    double start_at;       /* waiting: monotonic time it may leave */
    uint64_t seq;          /* its quota's sent count when this attempt left */
    struct ratelimit_state before; /* its quota's state when this response began */
    int crowded;           /* other requests of its quota were on the wire when it left */
    double told_until;     /* the end of the wait the last QEV_WAIT told of; 0: none told */
    int send_now;          /* net_send_now: leaves at once, whatever the quota or backoff says */
    int breaker_open;      /* failed fast: the endpoint's circuit breaker is open */
    int booked;            /* the shared state booked its place: leaves at start_at */
    int pool_dead;         /* failed fast: every key of its pool was refused */
};

/* Quota state, pacing and circuit breaker shared by the requests of one quota name. */
struct net_quota {
    struct net_quota *next;
    char *name;
    struct ratelimit_key key;   /* .state: the quota; .cool_until: key health (pools) */
    struct ratelimit_breaker br;
    int hold_told;              /* a hold past net_hold_most was said (net_hold_past) */
    int failed_in_row;          /* requests in a row that failed after all their retries: with
                                   no fallback, the breaker fails requests fast only from
                                   br.threshold of them (attempts open it for the fallback) */
    uint64_t sent;              /* requests sent so far (attempts) */
    int probing;                /* slow start: the first request is on the wire, alone */
    int answered;               /* a response arrived: the limits are known (or absent) */
    int heard;                  /* a response's headers arrived (its limits, or none) */
    int peers;                  /* processes sharing it, as Redis last said (0: unknown) */
    double rpm_saved;           /* rpm as configured, while a share of Redis's rate paces
                                   (NET_SHARE_OFF: not pacing on a share) */
    char sid[33], bid[33];      /* its names in the shared state (hashes; "" until used) */
};

struct net {
    pthread_t thread;
    CURLM *multi;
    CURLSH *share;
    struct queue *q;
    pthread_mutex_t lock;
    struct xfer *pending;     /* submitted, not yet added (under lock) */
    unsigned *cancels;        /* ids to cancel (under lock) */
    size_t n_cancels, cap_cancels;
    unsigned *nows;           /* ids to send now (net_send_now, under lock) */
    size_t n_nows, cap_nows;
    atomic_uint cancel_seq;   /* counts net_cancel calls: a transfer looks at the cancels
                                 from inside curl's callbacks when it moved */
    atomic_int stop;
    atomic_int unfinished;    /* submitted, not ended yet: counted down just before the
                                 push of the QEV_END (net_idle) */
    unsigned next_id;         /* under lock */
    struct xfer *active;      /* net thread only */
    int n_active;             /* net thread only: length of active */
    atomic_int on_wire;       /* n_active, for other threads (net_on_wire) */
    atomic_int max_active;    /* at most this many on the wire (0: no limit) */
    struct xfer *waiting;     /* net thread only: not sent yet (quota, backoff) */
    struct net_quota *quotas; /* net thread only */
    struct state *state;      /* net thread only: the shared quota state, opened on first use */
    char *load_error;         /* under lock: libcurl could not be loaded (a thread started
                                 while it loaded, net_start's wait = 0) */
    int adopted;              /* the thread is the preload's (net_library_adopt) */
    int linger_ms;            /* TOKTERM_TEST_NET_LINGER_MS (tests): the thread is busy this
                                 long after it ends a request (a slow one at the exit) */
};

void net_request_free(struct net_request *rq)
{
    if (!rq)
        return;
    util_free_secret(rq->auth_value);
    util_free_secret(rq->state_password);
    util_free_secret(rq->state_url); /* may hold a password */
    free(rq->url);
    free(rq->body);
    free(rq->auth_name);
    free(rq->cacert);
    free(rq->quota_name);
    free(rq->quota_seed);
    free(rq->key_env);
    for (size_t i = 0; i < rq->n_keys; i++) {
        util_free_secret(rq->keys[i].auth_value);
        free(rq->keys[i].label);
    }
    free(rq->keys);
    net_request_free(rq->fallback);
    free(rq->fallback_name);
    free(rq->breaker_key);
    free(rq);
}

void net_result_redact(struct net_result *r, const char *secret)
{
    util_redact(r->error, secret);
    util_redact(r->error_code, secret);
    util_redact(r->error_param, secret);
    util_redact(r->model, secret);
    util_redact(r->finish, secret);
    util_redact(r->warning, secret);
}

void net_result_free(void *p)
{
    struct net_result *r = p;
    if (!r)
        return;
    free(r->error);
    free(r->warning);
    free(r->headers);
    free(r->quota_line);
    free(r->quota_text);
    for (size_t i = 0; i < r->n_calls; i++)
        tool_call_free(&r->calls[i]);
    free(r->calls);
    free(r->thinking_json);
    free(r);
}

/* ---- gap histogram: quarter-octave buckets over whole microseconds (no libm) ---- */

static size_t net_gap_bucket(uint64_t us)
{
    if (us < 4)
        return (size_t)us;
    int e = 63 - __builtin_clzll(us);             /* floor(log2(us)) >= 2 */
    size_t b = (size_t)(4 * e + (int)((us >> (e - 2)) & 3) - 4);
    return b < NET_GAP_BUCKETS ? b : NET_GAP_BUCKETS - 1;
}

/* Middle of bucket b, in microseconds. */
static double net_gap_value(size_t b)
{
    if (b < 4)
        return (double)b;
    int e = (int)(b + 4) / 4, m = (int)(b + 4) % 4;
    uint64_t lo = (uint64_t)(4 + m) << (e - 2), width = (uint64_t)1 << (e - 2);
    return (double)lo + (double)width / 2;
}

static void net_gap_add(struct xfer *x, double seconds)
{
    x->gaps[net_gap_bucket(seconds > 0 ? (uint64_t)(seconds * 1e6) : 0)]++;
}

static double net_gap_quantile(const struct xfer *x, double q)
{
    unsigned long total = 0, seen = 0;
    for (size_t i = 0; i < NET_GAP_BUCKETS; i++)
        total += x->gaps[i];
    if (!total)
        return 0;
    double want = q * (double)total;
    for (size_t i = 0; i < NET_GAP_BUCKETS; i++) {
        seen += x->gaps[i];
        if ((double)seen >= want)
            return net_gap_value(i) / 1e6;
    }
    return 0;
}

/* ---- decoding callbacks (net thread) ---- */

/* Hand the text decoded so far to the queue: a batch of a fast sender (NET_HOLD_MIN or more)
 * goes in its own storage, without a copy, and the next one starts in a new buffer of the
 * batch's size; a model's few tokens are copied. */
static void net_flush(struct xfer *x)
{
    if (!x->batch.len)
        return;
    enum queue_type type = x->batch_kind == API_CONTENT ? QEV_CONTENT : QEV_REASONING;
    if (x->batch.len >= NET_HOLD_MIN) {
        queue_push_buf(x->net->q, type, x->id, &x->batch, x->batch_t_first);
        if (!x->batch.data)
            buf_reserve(&x->batch, NET_BATCH_MAX); /* NET_BATCH_CAP bytes */
        return;
    }
    queue_push_text(x->net->q, type, x->id, x->batch.data, x->batch.len, x->batch_t_first);
    buf_reset(&x->batch);
}

/* The most answer text (content + reasoning) x may receive. */
static size_t net_answer_cap(const struct xfer *x)
{
    return x->rq->max_answer_bytes ? x->rq->max_answer_bytes : NET_ANSWER_CAP;
}

/* What x may still receive of its answer: text, reasoning and the tool calls' arguments
 * share net_answer_cap (until 2026-12 the arguments were not counted). */
static size_t net_answer_room(const struct xfer *x)
{
    size_t have = x->content_bytes + x->reasoning_bytes + x->api.args_bytes;
    size_t cap = net_answer_cap(x);
    return have < cap ? cap - have : 0;
}

/* The dialect x speaks (chat completions unless its request names another). */
static const struct dialect *net_dialect(const struct xfer *x)
{
    return x->rq->dialect ? x->rq->dialect : dialect_default();
}

/* Start a batch of text of this kind when none is held. */
static void net_batch_begin(struct xfer *x, enum api_kind kind)
{
    if (!x->batch.len) {
        x->batch_kind = kind;
        x->batch_t_first = x->now;
    }
}

/* Count k deltas of text (n bytes in all) that arrived now, in one read. */
static void net_deltas(struct xfer *x, enum api_kind kind, size_t n, unsigned long k)
{
    double now = x->now;
    x->t_last_event = now; /* progress: the idle timer starts again */
    if (x->deltas == 0)
        x->t_first_token = now;
    else
        net_gap_add(x, now - x->t_last_delta);
    x->gaps[0] += (unsigned)(k - 1); /* the others of the same read: no gap */
    x->t_last_delta = now;
    x->deltas += k;
    if (kind == API_CONTENT)
        x->content_bytes += n;
    else
        x->reasoning_bytes += n;
}

static void net_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct xfer *x = ud;
    if (kind != API_CONTENT && kind != API_REASONING)
        return;
    if (x->limit_fired || !n)
        return; /* past the limit: nothing more; an empty delta is no progress */
    size_t room = net_answer_room(x);
    if (n > room) {
        /* Keep the text up to the limit, cut where a UTF-8 sequence begins. */
        while (room > 0 && ((unsigned char)s[room] & 0xC0) == 0x80)
            room--;
        n = room;
        x->limit_fired = 1;
        if (!n)
            return;
    }
    if (x->batch.len && (x->batch_kind != kind || n > NET_BATCH_MAX - x->batch.len))
        net_flush(x);
    net_batch_begin(x, kind);
    buf_append(&x->batch, s, n);
    net_deltas(x, kind, n, 1);
    if (x->batch.len >= NET_BATCH_MAX)
        net_flush(x); /* bound the memory held when a fast server fills the socket */
}

static int net_on_event(void *ud, const struct sse_event *ev)
{
    struct xfer *x = ud;
    x->parsed++;
    x->api.args_room = net_answer_room(x);
    int r = net_dialect(x)->stream_event(&x->api, ev, net_emit, x);
    if (x->api.limit)
        x->limit_fired = 1; /* tokterm's bound on tool calls: stop reading, keep the text */
    else if (r < 0)
        x->proto_error = 1;
    if (r != 0) {
        x->stream_over = 1;
        x->t_over = x->now;
    }
    return r != 0 || x->limit_fired;
}

/* Look at the cancellations from inside a transfer (a decompression bomb can keep one
 * curl_multi_perform busy for minutes): 1 when x is cancelled or the thread is stopping. */
static int net_cancel_seen(struct xfer *x)
{
    struct net *n = x->net;
    if (atomic_load(&n->stop))
        x->cancelled = 1;
    unsigned seq = atomic_load(&n->cancel_seq);
    if (seq != x->cancel_seen) {
        x->cancel_seen = seq;
        pthread_mutex_lock(&n->lock);
        for (size_t i = 0; i < n->n_cancels; i++)
            if (n->cancels[i] == x->id || n->cancels[i] == 0)
                x->cancelled = 1;
        pthread_mutex_unlock(&n->lock);
    }
    return x->cancelled;
}

static double net_idle_s(const struct xfer *x)
{
    return x->rq->idle_timeout_s > 0 ? x->rq->idle_timeout_s : 90.0;
}

/* The limits of a transfer, checked at every piece of data it gets (after decompression) and
 * by the watchdog between reads: cancellation, --max-time, the idle timer (new text only).
 * 1 when x must stop now (the flag says why). */
static int net_over_limit(struct xfer *x, double now)
{
    if (x->cancelled || x->time_fired || x->idle_fired || x->drained_stop || net_cancel_seen(x))
        return 1;
    if (now >= x->deadline)
        x->time_fired = 1;
    else if (x->stream_over && now - x->t_over > NET_DRAIN_S)
        x->drained_stop = 1; /* the stream is over; the server does not end the response */
    else if (!x->stream_over && now - x->t_last_event > net_idle_s(x))
        x->idle_fired = 1;
    return x->time_fired || x->idle_fired || x->drained_stop;
}

static void net_headers_done(struct xfer *x)
{
    if (x->headers_sent)
        return;
    x->headers_sent = 1;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    queue_push(x->net->q, QEV_HEADERS, x->id, (double)x->status, NULL);
}

/* Offset just past the first blank line ending in LF LF in s[0..n) (after a line that ended
 * at LF just before s when lf), or 0 when there is none. */
static size_t net_blank_line_end(const char *s, size_t n, int lf)
{
    const char *end = s + n;
    if (lf && n && s[0] == '\n')
        return 1;
    for (const char *q = s; (q = memchr(q, '\n', (size_t)(end - q))) && q + 1 < end; q++)
        if (q[1] == '\n')
            return (size_t)(q + 2 - s);
    return 0;
}

/* 1 when s[0..n), the bytes a fast run left at the end of a piece, may be held for it: the
 * start of a `data:` event, short, with no blank line (the event is not whole) and no CR (so
 * the SSE parser would not dispatch anything in it either). */
static int net_carry_ok(const char *s, size_t n)
{
    return n <= NET_CARRY_MAX && memcmp(s, "data:", n < 5 ? n : 5) == 0 &&
           !memchr(s, '\r', n) && !net_blank_line_end(s, n, 0);
}

/* Decode SSE bytes: whole events of plain text chunks of the last one's shape directly
 * (api_stream_sse_run), anything else with the SSE parser, one event at a time, until the
 * chunks have their shape again. When carry, an unfinished event the fast run stopped at, at
 * the end of s, goes to x->carry instead of the parser. sse_feed's returns. */
static int net_feed_run(struct xfer *x, const char *s, size_t n, int carry)
{
    while (n) {
        if (sse_idle(&x->sse) && x->api.shape_kind && !x->limit_fired &&
            net_dialect(x)->stream_event == api_stream_event) {
            enum api_kind kind = (enum api_kind)x->api.shape_kind;
            if (x->batch.len && x->batch_kind != kind)
                net_flush(x);
            net_batch_begin(x, kind);
            size_t held = x->batch.len;
            size_t answer = net_answer_room(x);
            size_t room = held < NET_BATCH_MAX ? NET_BATCH_MAX - held : 0; /* never grown */
            struct api_run r = {.text = &x->batch, .room = room < answer ? room : answer};
            size_t k = api_stream_sse_run(&x->api, s, n, x->sse.max_event, &r);
            sse_skipped(&x->sse, r.events);
            if (r.deltas)
                net_deltas(x, kind, x->batch.len - held, r.deltas);
            s += k;
            n -= k;
            int full = r.full && room < answer && x->batch.len;
            if (full || x->batch.len >= NET_BATCH_MAX)
                net_flush(x);
            if (full)
                continue; /* the next event in a new batch */
            if (!n)
                break;
            if (carry && net_carry_ok(s, n)) {
                buf_append(&x->carry, s, n);
                return 0;
            }
        }
        size_t k = net_blank_line_end(s, n, 0);
        if (!k)
            k = n;
        int r = sse_feed(&x->sse, s, k, net_on_event, x);
        if (r)
            return r;
        s += k;
        n -= k;
    }
    return 0;
}

/* The bytes of a piece: first those that end a held event (which is then decoded as if it had
 * come whole; when it cannot be held any longer, it goes to the SSE parser as it is), then the
 * rest. */
static int net_feed_sse(struct xfer *x, const char *s, size_t n)
{
    if (x->carry.len) {
        size_t e = net_blank_line_end(s, n, x->carry.data[x->carry.len - 1] == '\n');
        size_t take = e ? e : n;
        int keep = x->carry.len + take <= NET_CARRY_MAX && !memchr(s, '\r', take);
        if (keep) {
            buf_append(&x->carry, s, take);
            if (!e)
                return 0; /* still unfinished */
            s += e;
            n -= e;
        }
        int r = net_feed_run(x, x->carry.data, x->carry.len, 0);
        buf_reset(&x->carry);
        if (r)
            return r;
    }
    return net_feed_run(x, s, n, 1);
}

static size_t net_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    x->pass_bytes += n;
    x->now = util_now();
    if (net_over_limit(x, x->now))
        return 0; /* abort the transfer: curl stops decoding at once */
    if (x->mode == XM_UNDECIDED) {
        net_headers_done(x);
        int sse = strncasecmp(x->ctype, "text/event-stream", 17) == 0;
        if (!sse && x->status < 300) {
            /* Some servers mislabel streams (text/plain, even application/json): sniff. */
            sse = (n >= 5 && memcmp(ptr, "data:", 5) == 0) || (n >= 1 && ptr[0] == ':') ||
                  (n >= 6 && memcmp(ptr, "event:", 6) == 0);
        }
        x->mode = (sse && x->status < 300) ? XM_SSE : XM_BODY;
    }
    if (x->stream_over) {
        /* after [DONE] or an error: drain quietly, but not forever */
        x->drained += n;
        if (x->drained <= NET_DRAIN_MAX)
            return n;
        x->drained_stop = 1;
        return 0;
    }
    if (x->mode == XM_BODY) {
        x->t_last_event = x->now; /* the body is the answer: its bytes are progress */
        size_t cap = net_answer_cap(x), body_cap = cap < NET_BODY_CAP / 2 ? NET_BODY_CAP : 2 * cap;
        if (x->body.len + n > body_cap) {
            x->proto_error = 1;
            buf_reset(&x->api.error);
            buf_printf(&x->api.error, "the server's answer is larger than %zu MiB (twice "
                       "max_answer_mb, or 64 MiB); it was not read", body_cap >> 20);
            return 0;
        }
        buf_append(&x->body, ptr, n);
        return n;
    }
    x->pieces++;
    int r = net_feed_sse(x, ptr, n);
    if (r < 0) {
        x->proto_error = 1;
        buf_reset(&x->api.error);
        buf_printf(&x->api.error, "the server sent an unusable stream: %s (%zu MiB); the server "
                   "or a proxy broke the stream - try again, or report it to the provider",
                   x->sse.errmsg, x->sse.max_event >> 20);
        return 0;
    }
    if (x->limit_fired)
        return 0; /* the answer passed max_answer_mb: stop reading */
    return n;
}

static const char *const net_kept_headers[] = {
    "x-ratelimit-", "anthropic-ratelimit-", "retry-after", "x-should-retry", "content-type",
    "location", "request-id",
    "x-request-id", "openai-processing-ms", "server", "apim-request-id",
};

/* The end of a response's headers: merge its rate-limit report into the quota state. The
 * server counted the requests that reached it before this one. It is the newest word only when
 * nothing else was on the wire while it was (requests sent at once over several connections
 * reach the server in any order); otherwise ratelimit_merge_report keeps the safer numbers. */
static void net_quota_report(struct xfer *x)
{
    struct net_quota *q = x->quota;
    ratelimit_merge_report(&q->key.state, &x->before, util_now(), (int64_t)(q->sent - x->seq),
                           !x->crowded);
}

/* 1 when another request of x's quota is on the wire without its answer's headers. */
static int net_quota_crowded(const struct xfer *x)
{
    for (const struct xfer *o = x->net->active; o; o = o->next)
        if (o != x && o->quota == x->quota && !o->headers_sent)
            return 1;
    return 0;
}

/* ---- the shared quota state (net/state.h): a narrow seam around the local pacing ---- */

#define NET_SHARE_OFF (-1.0)

/* Redis is lost: until it is back, q paces on its share of the limit (the rate learnt, over
 * the processes Redis last said share it, less 10 %) as a configured rpm bucket, so the
 * processes that shared one bucket do not each take all of it. Redis back: the configured rpm
 * again. */
static void net_share_pace(struct net_quota *q, int lost, double now)
{
    struct state_dim d[2];
    state_dims(&q->key.state, now, 0, d);
    if (lost && q->rpm_saved == NET_SHARE_OFF && q->peers > 0 && d[0].rate > 0) {
        q->rpm_saved = q->key.state.rpm;
        q->key.state.rpm = d[0].rate * 60 / q->peers * 0.9;
        q->key.state.req_level = 0;
        q->key.state.bucket_time = now;
    } else if (!lost && q->rpm_saved != NET_SHARE_OFF) {
        q->key.state.rpm = q->rpm_saved;
        q->key.state.req_level = q->rpm_saved;
        q->rpm_saved = NET_SHARE_OFF;
    }
}

/* The shared state x's request names, opened on first use; NULL: local state only. */
static struct state *net_state(struct net *n, const struct xfer *x)
{
    if (!x->rq->state_url || !*x->rq->state_url)
        return NULL;
    if (!n->state) {
        char err[256];
        n->state = state_new(x->rq->state_url, x->rq->state_password, err, sizeof err);
        if (!n->state) /* conf.c checked the URL: not reached */
            queue_push_note(n->q, QEV_WARN, x->id, err, 0);
    }
    return n->state;
}

/* A warning of the shared state (lost, back) goes to x's reader, once. */
static void net_state_warn(struct net *n, const struct xfer *x)
{
    const char *w = state_take_warning(n->state);
    if (w)
        queue_push_note(n->q, QEV_WARN, x->id, w, 0);
}

/* After the response's headers were fed into the local state: the shared levels follow
 * (no_limits: a 2xx that reported no limit). */
static void net_state_report(struct net *n, struct xfer *x, int no_limits)
{
    struct state *st = net_state(n, x);
    if (!st || !x->quota->sid[0])
        return;
    struct state_dim d[2];
    state_dims(&x->quota->key.state, util_now(), 0, d);
    state_report(st, x->quota->sid, d, no_limits);
    net_state_warn(n, x);
}

/* The tokens rq is paced by, counted from its body the first time they are needed. */
static double net_est_tokens(struct net_request *rq)
{
    if (rq->est_pending) {
        rq->est_tokens = ratelimit_est_tokens(rq->body ? rq->body : "", rq->est_answer);
        rq->est_pending = 0;
    }
    return rq->est_tokens;
}

/* Before x leaves: 1 when the shared state decided (*wait: 0 go now, else hold; booked or not;
 * an open breaker it reports is copied into the local one, which sends x to its fallback
 * next), 0 when the
 * local state decides (Redis unreachable, the limits unknown everywhere), -1 when x's pool key
 * cools down for another process's 429: the local pool knows now, so pick x's key again. */
static int net_state_admit(struct net *n, struct xfer *x, double now, double *wait)
{
    struct state *st = net_state(n, x);
    struct net_quota *q = x->quota;
    if (!st || !q->sid[0])
        return 0;
    struct state_dim d[2];
    state_dims(&q->key.state, now, net_est_tokens(x->rq), d);
    int no_limits = q->heard && !q->key.state.seen; /* headers came, with no limit */
    enum state_verdict v = state_admit(st, q->sid, x->ep->bid, d, 10.0, no_limits, wait);
    net_state_warn(n, x);
    if (state_connected(st))
        q->peers = state_peers(st);
    net_share_pace(q, !state_connected(st), now);
    switch (v) {
    case STATE_GO:
        x->booked = *wait > 0.001;
        return 1;
    case STATE_WAIT:
        return 1;
    case STATE_OPEN: /* another process saw the endpoint fail */
        x->ep->br.mode = RATELIMIT_OPEN;
        x->ep->br.opened_at = now - (x->ep->br.cooldown - *wait);
        if (x->ep->br.failures < x->ep->br.threshold)
            x->ep->br.failures = x->ep->br.threshold;
        /* the breaker's check below sends it to the fallback; with none, it goes: each
         * process fails requests fast only after failed requests of its own (failed_in_row),
         * as attempts elsewhere say little of a blip that retries outlive */
        *wait = 0;
        return 1;
    case STATE_COOL: /* another process got a 429 on this key, or found it dead */
        if (x->rq->n_keys > 1 || (x->rq->n_keys == 1 && *wait >= STATE_COOL_DEAD)) {
            /* until 2026-12 a dead key's day read as a day to wait */
            q->key.cool_until = *wait >= STATE_COOL_DEAD ? HUGE_VAL : now + *wait;
            return -1;
        }
        return 1;
    default:
        return 0;
    }
}

/* x's attempt is over with status: the shared breaker and, after a 429 or a refused key, the
 * shared buckets and the key's cool-down. */
static void net_state_outcome(struct net *n, struct xfer *x, int success, int failure,
                              int status, double now)
{
    struct state *st = net_state(n, x);
    if (!st)
        return;
    if (x->ep && x->ep->bid[0] && (success || failure))
        state_breaker(st, x->ep->bid, success, x->ep->br.threshold, x->ep->br.cooldown);
    if (x->quota && x->quota->sid[0] && (status == 429 || status == 401 || status == 403)) {
        double cool = x->rq->n_keys ? x->quota->key.cool_until - now : 0;
        state_cool(st, x->quota->sid, cool > 0 ? cool : 0);
    }
    net_state_warn(n, x);
}

static size_t net_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        /* A new status line (after 100 Continue or a redirect): forget earlier headers. */
        buf_reset(&x->headers);
        x->headers_end = 0;
        ratelimit_response_init(&x->resp);
        if (x->quota)
            x->before = x->quota->key.state;
        x->ctype[0] = '\0';
        return n;
    }
    if (x->quota)
        (void)ratelimit_feed(&x->quota->key.state, &x->resp, ptr, n, util_now(),
                             (double)time(NULL));
    if (n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n'))
        x->headers_end = 1; /* (of this response: a 100 Continue's are forgotten above) */
    if (x->quota && n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n')) {
        net_quota_report(x); /* the end of the headers */
        long code = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && code < 300) /* an answer that no longer reports a limit */
            ratelimit_forget_unreported(&x->quota->key.state, &x->resp);
        x->quota->answered = x->quota->heard = 1;
        net_state_report(x->net, x, code >= 200 && code < 300 && !x->quota->key.state.seen);
    }
    const char *colon = memchr(ptr, ':', n);
    if (!colon)
        return n;
    size_t nlen = (size_t)(colon - ptr);
    const char *v = colon + 1;
    size_t vlen = n - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    for (size_t i = 0; i < TT_ARRAY_LEN(net_kept_headers); i++) {
        size_t k = strlen(net_kept_headers[i]);
        int prefix = net_kept_headers[i][k - 1] == '-';
        if ((prefix ? nlen >= k : nlen == k) && strncasecmp(ptr, net_kept_headers[i], k) == 0) {
            for (size_t c = 0; c < nlen; c++)
                buf_appendc(&x->headers,
                            (char)((ptr[c] >= 'A' && ptr[c] <= 'Z') ? ptr[c] + 32 : ptr[c]));
            buf_appends(&x->headers, ": ");
            /* a server's text: made harmless for a terminal here, once for every reader */
            utf8_sanitize(&x->headers, v, vlen > 512 ? 512 : vlen);
            buf_appendc(&x->headers, '\n');
            if (nlen == 12 && strncasecmp(ptr, "content-type", 12) == 0) {
                size_t c = vlen < sizeof x->ctype - 1 ? vlen : sizeof x->ctype - 1;
                memcpy(x->ctype, v, c);
                x->ctype[c] = '\0';
            }
            break;
        }
    }
    return n;
}

/* ---- transfer set-up and completion ---- */

/* libcurl's socket(), keeping errno: libcurl (7.88) reports a socket() that failed as
 * CURLE_COULDNT_CONNECT with CURLINFO_OS_ERRNO 0, so EMFILE read "Couldn't connect to server -
 * is the server running?" (net_transport_message says what it was). */
static curl_socket_t net_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct xfer *x = ud;
    (void)purpose;
    int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    x->sock_errno = fd < 0 ? errno : 0;
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static int net_xfer_start(struct net *n, struct xfer *x)
{
    struct net_request *rq = x->rq;
    CURL *e = curl_easy_init();
    if (!e)
        return -1;
    x->easy = e;
    x->sock_errno = 0;
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, net_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
    x->net = n;
    x->t_start = x->t_last_event = util_now();
    sse_init(&x->sse, 0);
    api_stream_init(&x->api);
    x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Accept: text/event-stream, application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    for (size_t i = 0; i < DIALECT_MAX_HEADERS && net_dialect(x)->headers[i]; i++)
        x->hdrs = curl_slist_append(x->hdrs, net_dialect(x)->headers[i]);
    const char *auth = rq->n_keys ? rq->keys[x->key_index].auth_value : rq->auth_value;
    if (rq->auth_name && auth) {
        char *h = xasprintf("%s: %s", rq->auth_name, auth);
        x->hdrs = curl_slist_append(x->hdrs, h);
        util_free_secret(h);
    }
    curl_easy_setopt(e, CURLOPT_URL, rq->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->body));
    curl_easy_setopt(e, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, net_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, net_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_SHARE, n->share);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Wait for a connection that may multiplex only where HTTP/2 can be negotiated (TLS):
     * on cleartext HTTP/1.1 it would hold every request behind the first one. */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, strncasecmp(rq->url, "https:", 6) == 0 ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     rq->connect_timeout_ms > 0 ? rq->connect_timeout_ms : 10000L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, NET_RECV_BUFFER);
    /* Ask for no compression (a compressed stream arrives late), but decode gzip, deflate or
     * brotli when a server or proxy sends it anyway. */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "identity");
    if (rq->cacert)
        curl_easy_setopt(e, CURLOPT_CAINFO, rq->cacert);
    if (rq->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (curl_multi_add_handle(n->multi, e) != CURLM_OK)
        return -1;
    return 0;
}

static double net_info_s(CURL *e, CURLINFO what)
{
    curl_off_t us = 0;
    if (curl_easy_getinfo(e, what, &us) != CURLE_OK)
        return -1;
    return (double)us / 1e6;
}

/* The message of an HTTP error status: the body's error, where a redirect pointed, and the
 * transport error that followed. */
static void net_http_message(struct xfer *x, CURLcode res, struct net_result *r,
                             struct buf *msg)
{
    const char *body = x->body.data ? x->body.data : "";
    net_dialect(x)->error_message(r->status, x->ctype, body, x->body.len, msg, r->error_code,
                      sizeof r->error_code);
    if (r->status == 400)
        api_error_param(body, x->body.len, r->error_param, sizeof r->error_param);
    if (r->status == 407) /* only a proxy sends it (until 2026-12 "HTTP 407" alone) */
        buf_appends(msg, " - a proxy (http_proxy / HTTP_PROXY / ALL_PROXY) wants a user and "
                         "password: give them in its URL, http://USER:PASSWORD@HOST:PORT");
    if (r->status >= 300 && r->status < 400) {
        const char *loc = strstr(buf_str(&x->headers), "location: ");
        if (loc) {
            const char *e = strchr(loc, '\n');
            buf_printf(msg, " - redirected to %.*s; point the base URL there",
                       (int)(e ? e - loc - 10 : 200), loc + 10);
        }
    }
    if (res != CURLE_OK)
        buf_printf(msg, " (then: %s)", curl_easy_strerror(res));
}

/* libcurl's CURLE_TOO_LARGE (8.6 and later; the headers built against may be older) */
#define NET_CURLE_TOO_LARGE 100

/* The status a proxy answered the CONNECT of an https request with when it refused the
 * tunnel (300 and up), else 0. libcurl reports it as a receive error. */
static long net_proxy_refused(const struct xfer *x, CURLcode res)
{
    long code = 0;
    if (res == CURLE_OK || !x->easy)
        return 0;
    curl_easy_getinfo(x->easy, CURLINFO_HTTP_CONNECTCODE, &code);
    return code >= 300 ? code : 0;
}

/* The message of a transport error, with what to check for the usual ones. */
static void net_transport_message(const struct xfer *x, CURLcode res, int got_text,
                                  struct buf *msg)
{
    if (!x->headers_end && (res == CURLE_OUT_OF_MEMORY || (int)res == NET_CURLE_TOO_LARGE)) {
        /* libcurl refuses a header line over 100 KiB so, and says nothing in errbuf: until
         * 2026-12 a 50 MB header line read "Out of memory", with 14 MB resident */
        buf_appends(msg, "Too large response headers: a line of the server's headers is over "
                         "100 KiB (libcurl's limit), so the response could not be read; the "
                         "server, or a proxy before it, is broken");
        return;
    }
    long proxy = net_proxy_refused(x, res);
    if (proxy) {
        /* until 2026-12 "connection dropped, retrying" twice, then libcurl's "CONNECT tunnel
         * failed, response 407", exit 4 after 3 attempts and their backoff */
        buf_printf(msg, "the proxy refused the tunnel to the server: HTTP %ld %s", proxy,
                   proxy == 407 ? "(it wants a user and password: give them in the proxy's "
                                  "URL, https_proxy=http://USER:PASSWORD@HOST:PORT)"
                   : proxy == 403 ? "(it does not allow this host: ask its administrator, "
                                    "or set no_proxy for it)"
                                  : "(check https_proxy / HTTPS_PROXY / ALL_PROXY)");
        return;
    }
    if (!x->headers_end && (res == CURLE_UNSUPPORTED_PROTOCOL || res == CURLE_WEIRD_SERVER_REPLY)) {
        /* until 2026-12 libcurl's words alone: "Received HTTP/0.9 when not allowed" */
        buf_printf(msg, "the server's reply is not HTTP (%s): is base_url's host and port an "
                        "HTTP server, and its scheme (http/https) right?",
                   x->errbuf[0] ? x->errbuf : curl_easy_strerror(res));
        return;
    }
    long os_errno = x->sock_errno;
    if (res == CURLE_COULDNT_CONNECT && (os_errno == EMFILE || os_errno == ENFILE)) {
        /* no socket could be made: until 2026-12 this read "Couldn't connect to server - is
         * the server running?", sending the user to a server that was never tried */
        struct rlimit rl;
        buf_printf(msg, "cannot open a connection: %s", strerror((int)os_errno));
        if (os_errno == ENFILE)
            buf_appends(msg, " (the system's limit on open files is reached)");
        else if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            buf_printf(msg, " (this process may open %llu; raise it with ulimit -n)",
                       (unsigned long long)rl.rlim_cur);
        else
            buf_appends(msg, " (raise the limit with ulimit -n)");
        return;
    }
    buf_printf(msg, "%s%s%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(res),
               got_text ? " - the connection broke mid-answer; the answer is incomplete" : "",
               res == CURLE_PEER_FAILED_VERIFICATION || res == CURLE_SSL_CACERT_BADFILE
                   ? " (the server's TLS certificate does not verify: trust its CA with "
                     "cacert= in the profile)"
               : res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST
                   ? " - is the server running? check base_url" : "");
    /* the dialect's variable (until 2026-12 OPENAI_BASE_URL under --api anthropic too) */
    const struct dialect *d = x->rq->dialect ? x->rq->dialect : dialect_default();
    if (res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST) {
        if (d->base_env)
            buf_printf(msg, " (%s)", d->base_env);
    }
}

/* The outcome of an attempt, in the order docs/ARCHITECTURE.md ("Outcomes and exit status")
 * gives, with its message for the user in msg (r->status is set; r->error_code may be). */
static enum api_outcome net_outcome(struct xfer *x, CURLcode res, struct net_result *r,
                                    struct buf *msg)
{
    int got_text = x->content_bytes + x->reasoning_bytes > 0;
    if (x->cancelled) {
        buf_appends(msg, "cancelled");
        return API_CANCELLED;
    }
    if (x->pool_dead) {
        buf_appends(msg, x->errbuf);
        return API_ERR_HTTP; /* the keys were refused, as a 401 would be */
    }
    if (x->breaker_open) {
        buf_appends(msg, x->errbuf);
        return API_ERR_NETWORK;
    }
    if (x->api.limit == API_STREAM_LIMIT_CALLS) { /* (a whole answer's too: decode_body) */
        buf_printf(msg, "%s; stopped, the text so far is kept", buf_str(&x->api.error));
        return API_LIMIT;
    }
    if (x->limit_fired || x->api.limit) {
        buf_printf(msg, "the answer passed the %zu MiB limit (max_answer_mb%s); stopped, the "
                   "text so far is kept", net_answer_cap(x) >> 20,
                   x->api.limit ? ", its tool calls' arguments with its text" : "");
        return API_LIMIT;
    }
    if (x->time_fired) {
        buf_printf(msg, "stopped by --max-time after %g s (max_time in the profile)%s%s",
                   x->rq->max_time_s, got_text ? "; the text so far is kept" : "",
                   !got_text && x->last_failure[0] ? "; the last attempt: " : "");
        if (!got_text && x->last_failure[0])
            buf_appends(msg, x->last_failure);
        return API_LIMIT;
    }
    if (x->idle_fired) {
        buf_printf(msg, "no answer text from the server for %.0f s (idle timeout; keep-alives "
                   "and empty deltas do not count%s); if the model is slow to start, raise "
                   "--idle-timeout (idle_timeout = in the profile)", net_idle_s(x),
                   got_text ? "; the answer is incomplete" : "");
        return got_text ? API_ERR_TRUNCATED : API_ERR_NETWORK;
    }
    if (r->status >= 300 && !x->proto_error) {
        net_http_message(x, res, r, msg);
        return API_ERR_HTTP;
    }
    if (x->proto_error || x->api.error.len) {
        buf_appends(msg, buf_str(&x->api.error));
        memcpy(r->error_code, x->api.error_code, sizeof r->error_code);
        return API_ERR_HTTP;
    }
    if (x->drained_stop && (res == CURLE_WRITE_ERROR || res == CURLE_ABORTED_BY_CALLBACK))
        res = CURLE_OK; /* the stream was over; what followed it was not read */
    if (res != CURLE_OK && x->mode == XM_SSE && x->api.finish[0]) {
        /* the answer had ended (its finish_reason came): a connection cut after it, before
         * the response's last chunk (a proxy closing early), loses none of its text; until
         * 2026-12 it read as truncated, exit 5, against the man page's "a break before a
         * finish_reason". What can be lost is the usage chunk that follows (said) */
        x->cut_after_end = !x->stream_over && !x->api.usage.present;
        res = CURLE_OK;
    }
    if (res != CURLE_OK) {
        net_transport_message(x, res, got_text, msg);
        return got_text ? API_ERR_TRUNCATED : API_ERR_NETWORK;
    }
    if (!x->api.finish[0]) {
        buf_appends(msg, x->mode == XM_BODY && r->status >= 200 && r->status < 300
                             ? "the server sent no answer: its HTTP 200 held no text and no "
                               "finish_reason"
                         : x->mode == XM_SSE && x->api.chunks > 0
                             ? "the stream ended without a finish_reason: the answer is incomplete"
                             : "the server closed the stream without an answer");
        return got_text ? API_ERR_TRUNCATED : API_ERR_NETWORK;
    }
    return net_dialect(x)->finish_outcome(&x->api, msg);
}

/* curl's timings of the attempt and tokterm's own (first token, gaps, tokens/s). */
static void net_timings_of(struct xfer *x, struct net_result *r, double now)
{
    struct net_timings *t = &r->t;
    t->ttft = -1;
    if (!x->easy)
        return;
    t->dns = net_info_s(x->easy, CURLINFO_NAMELOOKUP_TIME_T);
    t->connect = net_info_s(x->easy, CURLINFO_CONNECT_TIME_T);
    t->tls = net_info_s(x->easy, CURLINFO_APPCONNECT_TIME_T);
    t->ttfb = net_info_s(x->easy, CURLINFO_STARTTRANSFER_TIME_T);
    t->total = now - x->t_start;
    t->ttft = x->deltas ? x->t_first_token - x->t_start : -1;
    t->deltas = x->deltas;
    t->gap_p50 = net_gap_quantile(x, 0.50);
    t->gap_p95 = net_gap_quantile(x, 0.95);
    double span = x->deltas > 1 ? x->t_last_delta - x->t_first_token : 0;
    double toks = r->usage.completion > 0 ? (double)r->usage.completion : (double)x->deltas;
    t->tokens_per_s = span >= TT_TPS_MIN_SECONDS && toks >= TT_TPS_MIN_TOKENS ? toks / span : 0;
    long connects = 0, ver = 0;
    curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &ver);
    t->reused = r->status > 0 && connects == 0;
    t->http_version = ver == CURL_HTTP_VERSION_1_0 ? 10 : ver == CURL_HTTP_VERSION_1_1 ? 11
                    : ver == CURL_HTTP_VERSION_2_0 ? 20 : ver == CURL_HTTP_VERSION_3 ? 30 : 0;
}

/* Copy the server's text src into dst (size bytes) made harmless for a terminal, cut where
 * a UTF-8 sequence begins. */
static void net_copy_clean(char *dst, size_t size, const char *src)
{
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, src, strlen(src));
    size_t n = b.len < size - 1 ? b.len : size - 1;
    while (n > 0 && n < b.len && ((unsigned char)b.data[n] & 0xC0) == 0x80)
        n--;
    memcpy(dst, buf_str(&b), n);
    dst[n] = '\0';
    buf_free(&b);
}

/* Make a message that carries a server's text (a body, a header, a reason) harmless for a
 * terminal, whichever front end shows it: every message leaves the thread through here. */
static char *net_clean_message(char *msg)
{
    if (!msg)
        return NULL;
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, msg, strlen(msg));
    free(msg);
    return buf_take(&b);
}

/* What an attempt came to: a result with outcome, message, usage and timings. */
static struct net_result *net_result_of(struct xfer *x, CURLcode res)
{
    struct net_result *r = xcalloc(1, sizeof *r);
    double now = util_now();
    net_flush(x);
    r->req = x->id;
    if (x->easy) {
        net_headers_done(x);
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &r->status);
    }
    r->content_bytes = x->content_bytes;
    r->reasoning_bytes = x->reasoning_bytes;
    if (x->pieces && getenv("TOKTERM_DEBUG_STREAM"))
        fprintf(stderr, "tokterm: debug: stream: %lu pieces, %lu events, %lu by the SSE parser\n",
                x->pieces, x->sse.events, x->parsed);
    r->body = x->mode == XM_BODY;
    int short_body = res == CURLE_PARTIAL_FILE && x->body.len &&
                     r->status >= 200 && r->status < 300;
    if (x->mode == XM_BODY && r->status >= 200 && r->status < 300 &&
        (res == CURLE_OK || short_body) && !x->proto_error) {
        /* A whole JSON answer where a stream was asked for: still an answer. Also one whose
         * connection closed short of its Content-Length, when what came is whole (until
         * 2026-12 "transfer closed with 100 bytes remaining to read", the answer dropped) */
        x->now = util_now();
        x->api.args_room = net_answer_room(x);
        if (net_dialect(x)->decode_body(&x->api, x->body.data ? x->body.data : "", x->body.len,
                                  net_emit, x) < 0 && x->api.error.len == 0)
            buf_appends(&x->api.error, "the server's answer is not valid JSON");
        net_flush(x);
        if (short_body && x->api.error.len == 0 && x->api.finish[0]) {
            res = CURLE_OK;
            r->warning = xstrdup("the server's answer was shorter than its Content-Length "
                                 "said, but whole JSON: taken");
        } else if (short_body) {
            buf_reset(&x->api.error); /* the transport's message says what happened */
        }
    }
    struct buf msg = BUF_INIT;
    r->outcome = net_outcome(x, res, r, &msg);
    r->error = r->outcome == API_OK ? NULL : buf_take(&msg);
    buf_free(&msg);
    net_copy_clean(r->model, sizeof r->model, x->api.model);
    net_copy_clean(r->finish, sizeof r->finish, x->api.finish);
    r->usage = x->api.usage;
    r->calls = x->api.calls; /* moved: the stream state is reset for another attempt */
    r->n_calls = x->api.n_calls;
    x->api.calls = NULL;
    x->api.n_calls = x->api.cap_calls = 0;
    if (x->api.thinking_json.len)
        r->thinking_json = buf_take(&x->api.thinking_json);
    if (r->warning) /* the short body's: said first */
        ;
    else if (x->api.usage_bad)
        r->warning = xstrdup("the server's usage counts were not whole numbers (a string, null, "
                             "negative or huge): they were ignored");
    else if (x->cut_after_end)
        r->warning = xstrdup("the connection broke after the answer's end, before the server "
                             "sent its usage: its token counts are tokterm's estimate");
    net_timings_of(x, r, now);
    r->headers = buf_take(&x->headers);
    r->attempts = x->attempt;
    return r;
}

/* Transport outcome of an attempt, for the retry policy and the breaker. */
static enum ratelimit_net net_kind(const struct xfer *x, CURLcode res, long status)
{
    if (x->idle_fired)
        return RATELIMIT_NET_TIMEOUT;
    long proxy = net_proxy_refused(x, res);
    if (proxy) /* a proxy's 4xx (407: credentials, 403: policy) is the same the next time */
        return proxy >= 500 ? RATELIMIT_NET_CONNECT : RATELIMIT_NET_FATAL;
    switch (res) {
    case CURLE_OK:
        return status > 0 ? RATELIMIT_NET_OK : RATELIMIT_NET_DROPPED;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return RATELIMIT_NET_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return RATELIMIT_NET_TIMEOUT;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return RATELIMIT_NET_DROPPED;
    default:
        return status > 0 ? RATELIMIT_NET_OK : RATELIMIT_NET_FATAL;
    }
}

/* Release what one attempt used; x, its request and its place in the quota stay. */
static void net_xfer_release(struct net *n, struct xfer *x)
{
    if (x->quota)
        x->quota->answered = 1; /* even a failure ends the slow start */
    if (x->easy) {
        curl_multi_remove_handle(n->multi, x->easy);
        curl_easy_cleanup(x->easy);
    }
    net_headers_free(x->hdrs);
    sse_free(&x->sse);
    api_stream_free(&x->api);
    buf_free(&x->carry);
    buf_free(&x->body);
    buf_free(&x->headers);
    buf_free(&x->batch);
    struct xfer keep = *x;
    memset(x, 0, sizeof *x);
    x->id = keep.id;
    x->rq = keep.rq;
    x->net = keep.net;
    x->quota = keep.quota;
    x->ep = keep.ep;
    x->key_index = keep.key_index;
    x->used_fallback = keep.used_fallback;
    x->attempt = keep.attempt;
    x->rate_limited = keep.rate_limited;
    x->rate_waits = keep.rate_waits;
    x->rate_waited = keep.rate_waited;
    x->cancelled = keep.cancelled;
    x->time_fired = keep.time_fired;
    x->deadline = keep.deadline;
    x->cancel_seen = keep.cancel_seen;
    memcpy(x->last_failure, keep.last_failure, sizeof x->last_failure);
    /* no response yet: the server has not said "don't retry" (zeroed, should_retry read 0,
     * and until 2026-12 a refused connection, a reset before the status line or an idle
     * timeout was never retried) */
    ratelimit_response_init(&x->resp);
}

/* Put x (released) back on the waiting list, to leave at time at: a retry, or the hand-off to
 * the fallback. */
static void net_requeue(struct net *n, struct xfer *x, double at)
{
    x->start_at = at;
    x->next = n->waiting;
    n->waiting = x;
}

/* x's retry and pacing policy: its request's, or the defaults (def filled) when it has none */
static const struct ratelimit_policy *net_policy(const struct xfer *x,
                                                 struct ratelimit_policy *def)
{
    if (x->rq->has_policy)
        return &x->rq->policy;
    ratelimit_policy_init(def);
    return def;
}

/* Turn a final failure into advice for the statuses where the user has something to do. */
static void net_explain(struct xfer *x, struct net_result *r, enum ratelimit_net kind)
{
    struct ratelimit_policy def;
    double max_wait = net_policy(x, &def)->max_retry_wait;
    /* a 5xx only when its retry-after, past max_retry_wait, ended the retries at once */
    double sd = ratelimit_response_delay(&x->resp);
    int wait_5xx = r->status >= 500 && r->status <= 599 && sd >= 0 && sd > max_wait;
    if (r->status != 401 && r->status != 403 && r->status != 404 && r->status != 413 &&
        r->status != 429 && !wait_5xx)
        return;
    char prefix[32];
    int k = snprintf(prefix, sizeof prefix, "HTTP %ld: ", r->status);
    const char *server = r->error ? r->error : "";
    if (k > 0 && strncmp(server, prefix, (size_t)k) == 0)
        server += k;
    else if (r->error && strncmp(server, "HTTP ", 5) == 0)
        server = ""; /* no message from the server, only the status */
    struct ratelimit_failure f = {
        .status = (int)r->status,
        .net = kind,
        .error_code = r->error_code[0] ? r->error_code : NULL,
        .message = *server ? server : NULL,
        .url = x->rq->url,
        .key_env = x->rq->key_env,
        .key_label = x->rq->n_keys ? x->rq->keys[x->key_index].label : NULL,
        .resp = &x->resp,
        .max_retry_wait = max_wait,
    };
    char *ex = ratelimit_explain(&f);
    free(r->error);
    r->error = ex;
}

static double net_pick_key(struct net *n, struct xfer *x, double now, int *soonest);
static int net_next_key(struct net *n, const struct xfer *x, double now);
static void net_to_fallback(struct net *n, struct xfer *x, const char *why);

/* The attempt is over: retry it, or hand the result to the UI thread and free x. */
static void net_finish(struct net *n, struct xfer *x, CURLcode res)
{
    struct net_result *r = net_result_of(x, res);
    if (r->status == 429)
        x->rate_limited++;
    r->rate_limited = x->rate_limited;
    double now = util_now();
    enum ratelimit_net kind = net_kind(x, res, r->status);
    int got_text = x->content_bytes + x->reasoning_bytes > 0;
    struct net_quota *q = x->quota;
    const struct dialect *dl = net_dialect(x);
    if (dl->retry_delay && r->status >= 400 && ratelimit_response_delay(&x->resp) < 0) {
        double wait = dl->retry_delay(x->body.data ? x->body.data : "", x->body.len);
        if (wait >= 0)
            x->resp.retry_after = wait; /* Gemini's RetryInfo: as a retry-after header */
    }
    int br_ok = 0, br_fail = 0;
    if (r->status == 429 && q) {
        /* "Please try again in 1.2s." when no header says when; and the short window learns
         * that the server's bucket is empty (and maybe smaller than it thought) */
        const char *body = x->body.data ? x->body.data : "";
        if (ratelimit_response_delay(&x->resp) < 0)
            x->resp.retry_after_ms = ratelimit_text_delay(body, x->body.len);
        ratelimit_note_refused(&q->key.state, &x->resp, ratelimit_text_tokens(body, x->body.len),
                               x->sent_at, now);
    }
    if (x->ep && !x->cancelled && !x->breaker_open && !x->pool_dead && r->outcome != API_LIMIT) {
        br_ok = r->outcome == API_OK || r->outcome == API_CUT;
        br_fail = !br_ok && ratelimit_breaker_counts((int)r->status, kind,
                                                     r->error_code[0] ? r->error_code : NULL);
        if (br_ok) {
            ratelimit_breaker_success(&x->ep->br, now);
            x->ep->failed_in_row = 0;
        } else if (br_fail)
            ratelimit_breaker_failure(&x->ep->br, now);
    }
    if (q && x->rq->n_keys && r->status >= 400)
        ratelimit_key_note_failure(&q->key, (int)r->status,
                                   r->error_code[0] ? r->error_code : NULL, &x->resp, now);
    if (!x->cancelled && !x->pool_dead)
        net_state_outcome(n, x, br_ok, br_fail, (int)r->status, now);
    if (x->rq->n_keys && q) /* no quota: no key was used (all dead, or cancelled first) */
        snprintf(r->key_label, sizeof r->key_label, "%s", x->rq->keys[x->key_index].label);
    r->used_fallback = x->used_fallback;
    if (!x->cancelled && !got_text && !x->pool_dead && !x->time_fired && !x->breaker_open &&
        (r->outcome == API_ERR_HTTP || r->outcome == API_ERR_NETWORK)) {
        /* (an open breaker's refusal sent nothing: it fails at once, not after retries) */
        struct ratelimit_policy def;
        const struct ratelimit_policy *pol = net_policy(x, &def);
        double delay = 0, charge = 0;
        char reason[256] = "";
        int never;
        const char *code = dialect_retry_code(dl, r->status, r->error_code[0] ? r->error_code
                                                                              : NULL, &never);
        /* A 429 that says when to come back is waited out, not paid from the retries. */
        enum ratelimit_verdict v = ratelimit_wait_out((int)r->status, kind, code, pol, &x->resp,
                                                      x->rate_waited, &delay, &charge, reason,
                                                      sizeof reason);
        int free_wait = v == RATELIMIT_RETRY, waits_used = v == RATELIMIT_NO_RATE_WAIT, hop = 0;
        char used[256];
        snprintf(used, sizeof used, "%s", waits_used ? reason : "");
        if (!free_wait) /* then the retries decide, from their own budget */
            v = ratelimit_should_retry((int)r->status, kind, code, 0,
                                       x->attempt - x->rate_waits, pol, &x->resp, &delay,
                                       reason, sizeof reason);
        if (never)
            v = RATELIMIT_NO_STATUS; /* the dialect knows this error comes back */
        if (v != RATELIMIT_RETRY && x->rq->n_keys > 1 && q &&
            ratelimit_key_dead((int)r->status, r->error_code[0] ? r->error_code : NULL)) {
            /* A refused key (dead now): the next key, at once; none left fails the request
             * as a dead pool. Until 2026-12 the request failed on its first key. */
            const char *was = x->rq->keys[x->key_index].label;
            int next = net_next_key(n, x, now);
            v = RATELIMIT_RETRY;
            delay = 0;
            hop = 1; /* another key, not a retry: max_retries is not spent on it */
            if (next >= 0)
                snprintf(reason, sizeof reason, "HTTP %ld on key %s (refused): trying key %s",
                         (long)r->status, was, x->rq->keys[next].label);
            else
                snprintf(reason, sizeof reason, "HTTP %ld on key %s (refused)",
                         (long)r->status, was);
        }
        if (v == RATELIMIT_RETRY && x->rq->n_keys > 1 && r->status == 429) {
            /* This key cools down; another healthy key can go at once. */
            int next = net_next_key(n, x, now);
            if (next >= 0) {
                delay = 0;
                snprintf(reason, sizeof reason, "HTTP 429 on key %s: retrying at once with key %s",
                         x->rq->keys[x->key_index].label, x->rq->keys[next].label);
            }
        }
        if (v == RATELIMIT_RETRY) {
            snprintf(x->last_failure, sizeof x->last_failure, "%s", r->error ? r->error : reason);
            char *clean = net_clean_message(xstrdup(reason));
            if (r->headers && *r->headers) /* its rate limits (a 429's): shown while it waits */
                queue_push_note(n->q, QEV_QUOTA, x->id, r->headers, 0);
            queue_push_note(n->q, QEV_RETRY, x->id, clean, delay);
            free(clean);
            net_result_free(r);
            net_xfer_release(n, x);
            x->rate_waits += free_wait || hop;
            x->rate_waited += free_wait ? charge : 0;
            x->attempt++;
            net_requeue(n, x, now + delay);
            return;
        }
        if (x->ep && br_fail)
            x->ep->failed_in_row++; /* failed for good */
        if (br_fail && x->rq->fallback && !x->used_fallback) {
            /* failed for good at the primary, as the breaker counts failures: the fallback
             * takes the request, with retries of its own (until 2026-12 only an open breaker
             * sent it there, and with the default breaker_failures 5 against 3 attempts a
             * request, a scripted run never reached its fallback) */
            char *clean = net_clean_message(xstrdup(reason)); /* "...; giving up after 3
                                                                 attempts" */
            net_result_free(r);
            net_xfer_release(n, x);
            net_to_fallback(n, x, clean);
            free(clean);
            x->attempt = 1;
            x->rate_waits = 0;
            x->rate_waited = 0;
            net_requeue(n, x, now);
            return;
        }
        net_explain(x, r, kind);
        if (waits_used && r->error) {
            char *more = xasprintf("%s. %s", used, r->error);
            free(r->error);
            r->error = more;
        }
        if (x->attempt > 1 && r->error) {
            char *more = xasprintf("%s (after %d attempts)", r->error, x->attempt);
            free(r->error);
            r->error = more;
        }
    }
    if (x->used_fallback && r->error && r->outcome != API_OK && r->outcome != API_CANCELLED) {
        /* the failure is the fallback's: say so (until 2026-12 it read as the primary's) */
        char *more = xasprintf("the fallback %s failed too: %s",
                               x->rq->fallback_name ? x->rq->fallback_name : "profile", r->error);
        free(r->error);
        r->error = more;
    }
    r->error = net_clean_message(r->error);
    net_proxy_redact(r->error); /* a proxy's 407 page may echo its credentials */
    net_proxy_redact(r->error_code);
    char line[512];
    if (q && q->key.state.seen &&
        ratelimit_state_save(&q->key.state, now, (double)time(NULL), line, sizeof line) >= 0)
        r->quota_line = xstrdup(line);
    else
        r->quota_line = xstrdup("");
    char text[128];
    r->quota_text = xstrdup(q ? ratelimit_format(&q->key.state, now, text, sizeof text) : "");
    net_xfer_release(n, x);
    net_request_free(x->rq);
    unsigned id = x->id;
    free(x);
    atomic_fetch_sub(&n->unfinished, 1); /* nothing of it is left on this thread */
    queue_push(n->q, QEV_END, id, 0, r);
    if (n->linger_ms > 0)
        util_sleep_ms(n->linger_ms);
}

static void net_unlink(struct net *n, struct xfer *x)
{
    for (struct xfer **pp = &n->active; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            atomic_store(&n->on_wire, --n->n_active);
            return;
        }
}

/* The entry named name (created from rq's settings on first use): every request with the same
 * name shares its quota state, pacing buckets, key health and circuit breaker. */
static struct net_quota *net_quota_named(struct net *n, const char *name,
                                         const struct net_request *rq)
{
    for (struct net_quota *q = n->quotas; q; q = q->next)
        if (strcmp(q->name, name) == 0)
            return q;
    struct net_quota *q = xcalloc(1, sizeof *q);
    q->name = xstrdup(name);
    ratelimit_state_init(&q->key.state, rq->rpm, rq->tpm);
    if (rq->quota_seed && *rq->quota_seed && !rq->n_keys)
        (void)ratelimit_state_load(&q->key.state, rq->quota_seed, strlen(rq->quota_seed),
                                   util_now(), (double)time(NULL));
    q->answered = q->key.state.answered; /* no slow start where limits are known absent */
    ratelimit_breaker_init(&q->br, rq->breaker_failures, rq->breaker_cooldown);
    q->rpm_saved = NET_SHARE_OFF;
    q->next = n->quotas;
    n->quotas = q;
    return q;
}

static const char *net_quota_base(const struct net_request *rq)
{
    return rq->quota_name ? rq->quota_name : rq->url;
}

/* The pool key that x, refused or cooling on its key now, could go with at once: its index,
 * or -1 when no other key is healthy. x itself is left as it is. */
static int net_next_key(struct net *n, const struct xfer *x, double now)
{
    struct xfer probe = *x;
    if (net_pick_key(n, &probe, now, NULL) == 0 && probe.key_index != x->key_index)
        return probe.key_index;
    return -1;
}

/* Choose the key (and so the quota) of the next attempt: sets x->key_index and x->quota and
 * returns 0. When no key may be used now, x's key and quota stay as they were (NULL before a
 * first attempt), *soonest (may be NULL) gets the index of the key that comes back first, and
 * it returns the seconds until then (HUGE_VAL: every key is dead). */
static double net_pick_key(struct net *n, struct xfer *x, double now, int *soonest)
{
    const struct net_request *rq = x->rq;
    x->ep = net_quota_named(n, net_quota_base(rq), rq);
    if (rq->state_url && !x->ep->bid[0]) {
        state_endpoint_id(rq->breaker_key ? rq->breaker_key : rq->url, x->ep->bid);
        state_quota_id(rq->url, rq->auth_value, x->ep->sid);
    }
    if (!rq->n_keys) {
        x->quota = x->ep;
        return 0;
    }
    const struct ratelimit_key **ks = xcalloc(rq->n_keys, sizeof *ks);
    struct net_quota **qs = xcalloc(rq->n_keys, sizeof *qs);
    for (size_t i = 0; i < rq->n_keys; i++) {
        char *name = xasprintf("%s|%s", net_quota_base(rq), rq->keys[i].label);
        qs[i] = net_quota_named(n, name, rq);
        if (rq->state_url && !qs[i]->sid[0])
            state_quota_id(rq->url, rq->keys[i].auth_value, qs[i]->sid);
        ks[i] = &qs[i]->key;
        free(name);
    }
    double wait = 0;
    int idx = ratelimit_pool_pick(ks, rq->n_keys, now, &wait);
    if (idx >= 0) {
        x->key_index = idx;
        x->quota = qs[idx];
        wait = 0;
    } else if (soonest) {
        *soonest = 0;
        for (size_t i = 1; i < rq->n_keys; i++)
            if (ks[i]->cool_until < ks[*soonest]->cool_until)
                *soonest = (int)i;
    }
    free(ks);
    free(qs);
    return wait;
}

/* Pick up submissions and cancellations from other threads. */
static void net_take_work(struct net *n)
{
    pthread_mutex_lock(&n->lock);
    struct xfer *list = n->pending;
    n->pending = NULL;
    unsigned *cancels = n->cancels, *nows = n->nows;
    size_t nc = n->n_cancels, nn = n->n_nows;
    n->cancels = n->nows = NULL;
    n->n_cancels = n->cap_cancels = n->n_nows = n->cap_nows = 0;
    pthread_mutex_unlock(&n->lock);

    /* Pending is newest first: prepending each to the waiting list keeps submission order
     * for equal start times (net_admit walks the list in order). */
    struct xfer *tail = NULL;
    for (struct xfer *w = n->waiting; w; w = w->next)
        tail = w;
    struct xfer *rev = NULL;
    while (list) {
        struct xfer *next = list->next;
        list->next = rev;
        rev = list;
        list = next;
    }
    while (rev) {
        struct xfer *x = rev;
        rev = rev->next;
        x->net = n;
        x->attempt = 1;
        x->quota = x->ep = NULL; /* chosen when it may leave (net_admit) */
        x->deadline = x->rq->max_time_s > 0 ? util_now() + x->rq->max_time_s : HUGE_VAL;
        x->next = NULL;
        if (tail)
            tail->next = x;
        else
            n->waiting = x;
        tail = x;
    }
    for (size_t i = 0; i < nc; i++) {
        for (struct xfer *x = n->active; x; x = x->next)
            if (x->id == cancels[i] || cancels[i] == 0)
                x->cancelled = 1;
        for (struct xfer *x = n->waiting; x; x = x->next)
            if (x->id == cancels[i] || cancels[i] == 0)
                x->cancelled = 1;
    }
    free(cancels);
    double now = util_now();
    for (size_t i = 0; i < nn; i++)
        for (struct xfer *x = n->waiting; x; x = x->next)
            if (x->id == nows[i]) {
                x->send_now = 1;
                x->start_at = now;
            }
    free(nows);
}

/* x waits wait seconds for its quota: its new start time, and a note to the sink the first
 * time. */
/* Whether a hold of `wait` s, until `until`, is news to the sink: none told yet, or it ends
 * later than the one told by more than NET_TOLD_SLACK s and a quarter of the wait (steady
 * pacing with short holds is not told again and again). Until 2026-12 only the first was
 * told: a request held again counted down to 0 s and then sat there, its real wait unseen. */
#define NET_TOLD_SLACK 0.5
static int net_hold_news(struct xfer *x, double until, double wait)
{
    double slack = wait / 4 > NET_TOLD_SLACK ? wait / 4 : NET_TOLD_SLACK;
    if (x->told_until > 0 && until <= x->told_until + slack)
        return 0;
    x->told_until = until;
    return 1;
}

/* The longest a request is held on the server's word (the larger of max_rate_wait and
 * max_retry_wait, at least a minute: 0 there is about 429s, not pacing): past it, the server
 * is asked instead. */
static double net_hold_most(const struct xfer *x)
{
    struct ratelimit_policy def;
    const struct ratelimit_policy *p = net_policy(x, &def);
    double most = p->max_rate_wait > p->max_retry_wait ? p->max_rate_wait : p->max_retry_wait;
    return most > 60 ? most : 60;
}

/* A hold longer than net_hold_most from what the server reported (a saved reset hours away, a
 * clock out of step, a per-day limit spent): x goes now (or when the configured rpm/tpm, own,
 * lets it: the user's own pacing is kept) and the server decides, said once per quota.
 * Returns the wait left. Until 2026-12 such a hold was kept: one 429 whose reset said 2030
 * held every later run against that host, any dialect, even --no-save, without end. */
static double net_hold_past(struct net *n, struct xfer *x, struct net_quota *q, double wait,
                            double own)
{
    if (own >= wait)
        return wait;
    if (!q->hold_told) {
        char why[300], tbuf[32], mbuf[32];
        snprintf(why, sizeof why, "the quota says wait %s, more than %s (max_rate_wait or "
                 "max_retry_wait): sending now, the server decides",
                 ratelimit_format_duration(wait, tbuf, sizeof tbuf),
                 ratelimit_format_duration(net_hold_most(x), mbuf, sizeof mbuf));
        queue_push_note(n->q, QEV_WARN, x->id, why, 0);
        q->hold_told = 1;
    }
    return own;
}

static void net_hold(struct net *n, struct xfer *x, double wait, double now)
{
    x->start_at = now + wait;
    if (!net_hold_news(x, x->start_at, wait))
        return;
    char why[200], tbuf[32], qbuf[100];
    const char *quota = ratelimit_format(&x->quota->key.state, now, qbuf, sizeof qbuf);
    snprintf(why, sizeof why, "waiting for quota %s (%s)",
             ratelimit_format_duration(wait, tbuf, sizeof tbuf),
             *quota ? quota : "client-side limit");
    queue_push_note(n->q, QEV_WAIT, x->id, why, wait);
}

/* Every key of x's pool is cooling down after a 429: x waits wait seconds for key k, the first
 * to come back, with a note to the sink when the wait is news (net_hold_news). */
static void net_hold_for_key(struct net *n, struct xfer *x, double wait, double now, int k)
{
    x->start_at = now + wait;
    if (!net_hold_news(x, x->start_at, wait))
        return;
    char why[200], tbuf[32];
    snprintf(why, sizeof why, "every key of the pool is cooling down (HTTP 429): waiting %s "
             "for key %s", ratelimit_format_duration(wait, tbuf, sizeof tbuf),
             x->rq->keys[k].label);
    queue_push_note(n->q, QEV_WAIT, x->id, why, wait);
}

/* Every key of x's pool was refused (401, 403, no credit): x fails at once, not retried. */
static void net_fail_pool(struct net *n, struct xfer *x)
{
    struct buf b = BUF_INIT;
    buf_appends(&b, "every key of the pool (");
    for (size_t i = 0; i < x->rq->n_keys; i++)
        buf_printf(&b, "%s%s", i ? ", " : "", x->rq->keys[i].label);
    buf_appends(&b, ") was refused (HTTP 401, 403 or no credit): check the keys of this "
                    "profile");
    snprintf(x->errbuf, sizeof x->errbuf, "%s", buf_str(&b));
    buf_free(&b);
    x->pool_dead = 1;
    net_finish(n, x, CURLE_COULDNT_CONNECT);
}

/* x's endpoint is failing (its circuit is open): x becomes its fallback request, with a note
 * to the sink. */
static void net_to_fallback(struct net *n, struct xfer *x, const char *why)
{
    struct net_request *fb = x->rq->fallback;
    x->rq->fallback = NULL;
    char note[512];
    snprintf(note, sizeof note, "%s: using the fallback %s", why,
             fb->fallback_name ? fb->fallback_name : "profile"); /* the fallback's own name (until
                                                                  2026-12 the request's: none) */
    queue_push_note(n->q, QEV_RETRY, x->id, note, 0);
    net_request_free(x->rq);
    x->rq = fb;
    x->used_fallback = 1;
    x->told_until = 0;
    /* the primary's quota and key are not the fallback's: chosen when it may leave
     * (net_pick_key); a request ending before then names no key */
    x->quota = x->ep = NULL;
    x->key_index = 0;
}

/* Put x, out of the waiting list, on the wire: counted as sent against its quota. */
static void net_send(struct net *n, struct xfer *x, double now)
{
    struct net_quota *q = x->quota;
    ratelimit_note_sent(&q->key.state, now, net_est_tokens(x->rq));
    x->booked = 0;
    x->sent_at = now;
    x->seq = ++q->sent;
    x->crowded = net_quota_crowded(x);
    q->probing = 1;
    x->told_until = 0;
    x->next = n->active;
    n->active = x;
    atomic_store(&n->on_wire, ++n->n_active);
    if (net_xfer_start(n, x) < 0) {
        net_unlink(n, x);
        snprintf(x->errbuf, sizeof x->errbuf, "could not set up the request");
        net_finish(n, x, CURLE_FAILED_INIT);
    }
}

/* Send the waiting requests whose time has come and whose quota allows; returns the seconds
 * until the next one may be due (HUGE_VAL when none waits). */
static double net_admit(struct net *n)
{
    double now = util_now(), next_due = HUGE_VAL;
    int max_active = atomic_load(&n->max_active);
    struct xfer **pp = &n->waiting;
    while (*pp) {
        struct xfer *x = *pp;
        struct net_quota *q;
        if (x->cancelled || now >= x->deadline) {
            x->time_fired = !x->cancelled;
            *pp = x->next;
            net_finish(n, x, CURLE_ABORTED_BY_CALLBACK);
            continue;
        }
        if (x->deadline - now < next_due)
            next_due = x->deadline - now; /* --max-time ends a wait too */
        if (max_active > 0 && n->n_active >= max_active) {
            pp = &x->next; /* the next one leaves when a transfer on the wire ends */
            continue;
        }
        if (now < x->start_at) {
            next_due = x->start_at - now < next_due ? x->start_at - now : next_due;
            pp = &x->next;
            continue;
        }
        int soonest = 0;
        double kwait = net_pick_key(n, x, now, &soonest);
        if (kwait == HUGE_VAL) {
            *pp = x->next;
            net_fail_pool(n, x);
            continue;
        }
        if (kwait > 0) {
            /* No key may be used now, so none was picked: x->quota is not this attempt's
             * (NULL before a first attempt). Wait for the first key to come back. */
            net_hold_for_key(n, x, kwait, now, soonest);
            next_due = kwait < next_due ? kwait : next_due;
            pp = &x->next;
            continue;
        }
        q = x->quota;
        double wait = 0;
        int shared = x->send_now || x->booked ? 1 : net_state_admit(n, x, now, &wait);
        if (shared < 0)
            continue; /* its key cools down or its breaker is open: look at x again */
        if (!shared && !q->answered && q->probing && !q->key.state.seen && !q->key.state.rpm) {
            /* Slow start: until the first answer shows the limits, one request at a time, so
             * a batch never fires 32 requests into a limit it has not seen yet. */
            x->start_at = now + 0.005;
            next_due = 0.005 < next_due ? 0.005 : next_due;
            pp = &x->next;
            continue;
        }
        if (!shared)
            wait = ratelimit_wait_time(&q->key.state, now, net_est_tokens(x->rq));
        /* the cap holds for a shared bucket's wait too (until 2026-12 one process's
         * per-day limit, spent, held every other process sharing it for the rest of the
         * day, while a lone process went and let the server decide) */
        if (wait > 0.001 && wait > net_hold_most(x))
            wait = net_hold_past(n, x, q, wait,
                                 ratelimit_wait_configured(&q->key.state, now,
                                                           net_est_tokens(x->rq)));
        if (wait > 0.001) {
            net_hold(n, x, wait, now);
            next_due = wait < next_due ? wait : next_due;
            pp = &x->next;
            continue;
        }
        /* An open breaker sends a request to the fallback; with none, it fails requests
         * fast only once breaker_failures requests in a row have failed after all their
         * retries (until 2026-12 five failed attempts did: a blip of 503s failed a whole
         * batch unsent, and a --retries above 4 was never reached). */
        double bwait = 0;
        int fb = x->rq->fallback != NULL;
        if (fb && !ratelimit_breaker_allow(&x->ep->br, now, &bwait)) {
            char why[96];
            snprintf(why, sizeof why, "the endpoint failed %d times in a row (circuit open)",
                     x->ep->br.failures);
            net_to_fallback(n, x, why);
            continue; /* look at it again with the fallback's quota */
        }
        *pp = x->next;
        if (!fb && x->ep->failed_in_row >= x->ep->br.threshold &&
            !ratelimit_breaker_allow(&x->ep->br, now, &bwait)) {
            snprintf(x->errbuf, sizeof x->errbuf,
                     "circuit open: %d requests in a row failed at this endpoint after their "
                     "retries; not sending for another %.0f s (the server looks down)",
                     x->ep->failed_in_row, bwait);
            x->breaker_open = 1;
            net_finish(n, x, CURLE_COULDNT_CONNECT);
            continue;
        }
        net_send(n, x, now);
    }
    return next_due;
}

/* Seconds until a waiting request may be due: 0 for one that is due now and not held back by
 * the limit of requests on the wire (a transfer's end wakes the thread for those). */
static double net_next_due(const struct net *n)
{
    int max_active = atomic_load(&n->max_active);
    int full = max_active > 0 && n->n_active >= max_active;
    double now = util_now(), due = HUGE_VAL;
    for (const struct xfer *x = n->waiting; x; x = x->next) {
        if (x->deadline - now < due)
            due = x->deadline - now > 0 ? x->deadline - now : 0;
        double d = x->start_at - now;
        if (d <= 0 && full)
            continue;
        if (d < due)
            due = d > 0 ? d : 0;
    }
    return due;
}

/* 1 when a socket of a transfer holding text has bytes to read within NET_HOLD_MS (one short
 * poll, not curl_multi_poll, which would take the wakeups meant for the next wait). */
static int net_more_bytes(const struct net *n)
{
    struct pollfd p[16];
    nfds_t k = 0;
    for (const struct xfer *x = n->active; x; x = x->next) {
        curl_socket_t fd = CURL_SOCKET_BAD;
        if (!x->batch.len ||
            curl_easy_getinfo(x->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
            fd == CURL_SOCKET_BAD)
            continue;
        if (k == sizeof p / sizeof *p)
            return 0; /* many at once: no holding */
        p[k++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    return k && poll(p, k, NET_HOLD_MS) > 0;
}

static int net_curl_init(CURLM **multi, CURLSH **share, const char **err);
static void net_end_unsent(struct net *n, struct xfer *x, const char *why);

/* A thread started while libcurl loads (net_start with wait = 0: the loading thread itself)
 * sets curl up first, so that the request leaves the moment libcurl is loaded. Published under the lock: from then on the other
 * threads wake the multi handle. When it cannot load, what is pending ends at once as a network
 * error saying so, as do later submissions (net_submit). 0, or -1 when the thread ends. */
static int net_main_load(struct net *n)
{
    if (n->multi)
        return 0;
    const char *err = NULL;
    CURLM *multi = NULL;
    CURLSH *share = NULL;
    int ok = curl_dl_load(&err) == 0 && net_curl_init(&multi, &share, &err) == 0;
    pthread_mutex_lock(&n->lock);
    struct xfer *list = NULL;
    if (ok) {
        n->multi = multi;
        n->share = share;
    } else {
        n->load_error = xstrdup(err ? err : "no network");
        list = n->pending;
        n->pending = NULL;
    }
    pthread_mutex_unlock(&n->lock);
    while (list) {
        struct xfer *x = list;
        list = list->next;
        net_end_unsent(n, x, n->load_error);
    }
    return ok ? 0 : -1;
}

static void *net_main(void *arg)
{
    struct net *n = arg;
    if (net_main_load(n) != 0)
        return NULL;
    int max_conns = 0;
    while (!atomic_load(&n->stop)) {
        /* A limit of requests on the wire (a batch) keeps as many connections open, whatever
         * the moment: curl's default cache (4 per handle added) shrinks to a few when the
         * submitting thread falls behind for a moment, and closes connections a moment later
         * needed again (11-14 connections for 200 requests at -j 8, instead of 8). */
        int max = atomic_load(&n->max_active);
        if (max > 0 && max != max_conns) {
            curl_multi_setopt(n->multi, CURLMOPT_MAXCONNECTS, (long)max * 4);
            max_conns = max;
        }
        net_take_work(n);
        double due = net_admit(n);
        int running = 0;
        curl_multi_perform(n->multi, &running);
        /* Text decoded during this pass goes to the queue in one push per transfer: one lock
         * and at most one wakeup per socket read, however many deltas it held; from a fast
         * sender, one per NET_BATCH_MAX of text or NET_HOLD_AGE (textbatch.h). */
        int held = 0;
        for (struct xfer *x = n->active; x; x = x->next) {
            if (net_hold_batch(x->pass_bytes, x->batch.len, x->batch_t_first, x->now))
                held = 1;
            else
                net_flush(x);
            x->pass_bytes = 0;
        }
        CURLMsg *m;
        int left, ended = 0;
        while ((m = curl_multi_info_read(n->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            struct xfer *x = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode res = m->data.result;
            net_unlink(n, x);
            net_finish(n, x, res);
            ended = 1;
        }
        if (ended && n->waiting) {
            /* a place on the wire is free: the next request leaves now, not after a poll */
            due = net_admit(n);
            curl_multi_perform(n->multi, &running);
        }
        /* Cancellations and the idle watchdog. */
        double now = util_now();
        for (struct xfer *x = n->active, *next; x; x = next) {
            next = x->next;
            if (net_over_limit(x, now)) {
                net_unlink(n, x);
                net_finish(n, x, CURLE_ABORTED_BY_CALLBACK);
            }
        }
        if (n->waiting && due == HUGE_VAL)
            due = net_next_due(n); /* a retry may just have been queued */
        int ms = n->active ? 100 : 1000;
        if (due < HUGE_VAL && due * 1000 < ms)
            ms = (int)(due * 1000) + 1;
        if (held && net_more_bytes(n))
            continue; /* read them before the held text goes */
        for (struct xfer *x = n->active; x; x = x->next)
            net_flush(x);
        curl_multi_poll(n->multi, NULL, 0, ms, NULL);
    }
    /* Stopping: cancel what is left. */
    net_take_work(n);
    while (n->waiting) {
        struct xfer *x = n->waiting;
        n->waiting = x->next;
        x->cancelled = 1;
        net_finish(n, x, CURLE_ABORTED_BY_CALLBACK);
    }
    while (n->active) {
        struct xfer *x = n->active;
        n->active = x->next;
        atomic_store(&n->on_wire, --n->n_active);
        x->cancelled = 1;
        net_finish(n, x, CURLE_ABORTED_BY_CALLBACK);
    }
    return NULL;
}

/* The network thread's multi and share handles (libcurl loaded): 0, or -1 with *err set. */
static int net_curl_init(CURLM **multi, CURLSH **share, const char **err)
{
    CURLM *m = curl_multi_init();
    CURLSH *sh = curl_share_init();
    if (!m || !sh) {
        *err = "curl could not be initialised";
        if (m)
            curl_multi_cleanup(m);
        if (sh)
            curl_share_cleanup(sh);
        return -1;
    }
    /* Every handle lives on this one thread, so the share needs no lock callbacks. */
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* CURLMOPT_MAXCONNECTS: curl's default keeps 4 connections per handle in use; with a
     * limit of requests on the wire, 4 per request allowed on it (net_main). */
    *multi = m;
    *share = sh;
    return 0;
}

void net_result_push_local(struct queue *q, unsigned id, enum api_outcome outcome, char *why)
{
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = id;
    r->outcome = outcome;
    r->t.ttft = -1;
    r->error = why;
    r->headers = xstrdup("");
    queue_push(q, QEV_END, id, 0, r);
}

/* A request that never left: it ends at once as a network error (why, copied). */
static void net_end_unsent(struct net *n, struct xfer *x, const char *why)
{
    unsigned id = x->id;
    net_request_free(x->rq);
    free(x);
    atomic_fetch_sub(&n->unfinished, 1);
    net_result_push_local(n->q, id, API_ERR_NETWORK, xstrdup(why));
}

/* Wake the thread from curl_multi_poll (nothing to wake while it still loads libcurl: it
 * takes the work once loaded). */
static void net_wake(struct net *n)
{
    pthread_mutex_lock(&n->lock);
    CURLM *m = n->multi;
    pthread_mutex_unlock(&n->lock);
    if (m)
        curl_multi_wakeup(m);
}

struct net *net_start(struct queue *q, int wait, const char **err)
{
    struct net *n = xcalloc(1, sizeof *n);
    n->q = q;
    pthread_mutex_init(&n->lock, NULL);
    atomic_init(&n->stop, 0);
    atomic_init(&n->unfinished, 0);
    const char *linger = getenv("TOKTERM_TEST_NET_LINGER_MS");
    n->linger_ms = linger ? atoi(linger) : 0;
    /* The preload thread becomes the network thread: while it still loads libcurl (a
     * one-shot's first request), once it is loaded, and the caller goes on meanwhile, so the
     * request leaves as soon as libcurl is loaded without waking the caller; or at once, when
     * it has loaded libcurl and waits (a resume of a long conversation), with no thread to
     * start on the way of the request. */
    if (!wait && net_library_adopt(net_main, n)) {
        n->adopted = 1;
        return n;
    }
    if (curl_dl_load(err) != 0 || net_curl_init(&n->multi, &n->share, err) != 0) {
        pthread_mutex_destroy(&n->lock);
        free(n);
        return NULL;
    }

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&n->thread, NULL, net_main, n);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        *err = "could not start the network thread";
        curl_multi_cleanup(n->multi);      /* both made above: the adopted path returned */
        curl_share_cleanup(n->share);
        pthread_mutex_destroy(&n->lock);
        free(n);
        return NULL;
    }
    return n;
}

int net_on_wire(struct net *n)
{
    return atomic_load(&n->on_wire);
}

void net_set_max_active(struct net *n, int max)
{
    atomic_store(&n->max_active, max > 0 ? max : 0);
    net_wake(n);
}

unsigned net_submit(struct net *n, struct net_request *rq)
{
    struct xfer *x = xcalloc(1, sizeof *x);
    x->rq = rq;
    ratelimit_response_init(&x->resp); /* as net_xfer_release leaves it */
    atomic_fetch_add(&n->unfinished, 1);
    pthread_mutex_lock(&n->lock);
    unsigned id = x->id = ++n->next_id;
    const char *failed = n->load_error; /* set once, freed by net_stop */
    if (!failed) {
        x->next = n->pending;
        n->pending = x;
    }
    CURLM *m = n->multi;
    pthread_mutex_unlock(&n->lock);
    if (failed)
        net_end_unsent(n, x, failed);
    else if (m) /* x belongs to the net thread now: it may already be finished and freed */
        curl_multi_wakeup(m);
    return id;
}

void net_cancel(struct net *n, unsigned id)
{
    pthread_mutex_lock(&n->lock);
    XGROW(n->cancels, n->n_cancels + 1, n->cap_cancels);
    n->cancels[n->n_cancels++] = id;
    atomic_fetch_add(&n->cancel_seq, 1);
    pthread_mutex_unlock(&n->lock);
    net_wake(n);
}

void net_send_now(struct net *n, unsigned id)
{
    pthread_mutex_lock(&n->lock);
    XGROW(n->nows, n->n_nows + 1, n->cap_nows);
    n->nows[n->n_nows++] = id;
    pthread_mutex_unlock(&n->lock);
    net_wake(n);
}

int net_idle(struct net *n)
{
    return !n || atomic_load(&n->unfinished) == 0;
}

void net_stop(struct net *n)
{
    if (!n)
        return;
    atomic_store(&n->stop, 1);
    net_wake(n);
    if (n->adopted)
        net_library_join();
    else
        pthread_join(n->thread, NULL);
    if (n->multi)
        curl_multi_cleanup(n->multi);
    if (n->share)
        curl_share_cleanup(n->share);
    free(n->load_error);
    pthread_mutex_destroy(&n->lock);
    free(n->cancels);
    free(n->nows);
    state_free(n->state);
    while (n->quotas) {
        struct net_quota *q = n->quotas;
        n->quotas = q->next;
        free(q->name);
        free(q);
    }
    free(n);
}
