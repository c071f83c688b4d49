/* batch.c - `tokterm batch`: JSON lines in, one request per line with several in flight, JSON
 * lines out in order of completion (see batch.h for the formats and the rules). */
#include "config.h"
#include "cmd/batch.h"
#include "cmd/batch_remote.h"
#include "proto/api.h"
#include "net/net.h"
#include "net/otlp.h"
#include "net/queue.h"
#include "net/ratelimit.h"
#include "core/conf.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "core/request.h"
#include "core/session.h"
#include "store/store.h"
#include "tokens/context.h"
#include "tokens/tokenizer.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "base/util.h"
#include "cmd/script.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BATCH_DRAW_INTERVAL 0.1   /* seconds between progress-bar redraws */
#define BATCH_MAX_WARN_KEYS 8     /* unknown field names listed in the warning */
#define BATCH_READ_CHUNK 65536    /* bytes read from the input at a time */
#define BATCH_HOLD_MAX 1000       /* bad lines held back until the first JSON object */
#define BATCH_WINDOW_DEFAULT 8192 /* as the chat: an unknown model without context_window */
#define BATCH_RESERVE_DEFAULT 4096
#define BATCH_ID_KEY_MAX 40       /* longer ids are remembered by their SHA-256 */
/* Answers written but not cached yet are cached together (one commit) once this many, this
 * many bytes, or this old (seconds), and at the end of the run. */
#define BATCH_CACHE_COUNT 64
#define BATCH_CACHE_BYTES (1 << 20)
#define BATCH_CACHE_DELAY 0.1

/* ---- a set of strings with a number each (ids -> line numbers) ---- */

struct batch_set {
    char **keys;
    long *vals;
    size_t cap, n;
};

static uint64_t batch_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of k: where it is, or the empty slot where it would go. */
static size_t batch_set_slot(const struct batch_set *s, const char *k)
{
    size_t i = (size_t)batch_hash(k) & (s->cap - 1);
    while (s->keys[i] && strcmp(s->keys[i], k) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

/* The number stored with k, or 0 when k is not in the set. */
static long batch_set_get(const struct batch_set *s, const char *k)
{
    if (!s->n)
        return 0;
    size_t i = batch_set_slot(s, k);
    return s->keys[i] ? s->vals[i] : 0;
}

/* Add k with v (v != 0) unless it is there already. Returns 1 when added. */
static int batch_set_add(struct batch_set *s, const char *k, long v)
{
    if (2 * (s->n + 1) > s->cap) {
        struct batch_set big = {NULL, NULL, s->cap ? s->cap * 2 : 64, 0};
        big.keys = xcalloc(big.cap, sizeof *big.keys);
        big.vals = xcalloc(big.cap, sizeof *big.vals);
        for (size_t i = 0; i < s->cap; i++)
            if (s->keys[i]) {
                size_t j = batch_set_slot(&big, s->keys[i]);
                big.keys[j] = s->keys[i];
                big.vals[j] = s->vals[i];
                big.n++;
            }
        free(s->keys);
        free(s->vals);
        *s = big;
    }
    size_t i = batch_set_slot(s, k);
    if (s->keys[i])
        return 0;
    s->keys[i] = xstrdup(k);
    s->vals[i] = v;
    s->n++;
    return 1;
}

static void batch_set_free(struct batch_set *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s->vals);
    memset(s, 0, sizeof *s);
}

/* ---- state ---- */

struct batch_item {
    long line;       /* 1-based line number in the input */
    char *id;        /* canonical JSON of the id; NULL when the line has no usable one */
    long dup_of;     /* line of the first item with the same id; 0 = this is the first */
    int skip;        /* complete in the output already (--resume) */
    int nul;         /* the line holds a NUL byte */
};

struct batch_slot {
    unsigned req;    /* request id; 0 = free */
    struct batch_item item; /* owns item.id */
    char *model;     /* model asked for */
    unsigned char key[STORE_CACHE_KEY_LEN];
    int key_set;     /* fill the cache with a complete answer */
    int retries;
    struct buf content, reasoning;
};

struct batch_done {                 /* a finished request, written once the next are out */
    struct batch_item item;         /* owns item.id */
    struct net_result *r;
    char *content, *reasoning, *model;
    int retries;
    unsigned char key[STORE_CACHE_KEY_LEN];
    int key_set;                    /* cache it when complete */
};

/* The input, read a chunk at a time and cut into lines: only the line being gathered is kept
 * (at most `limit` bytes of it; the rest of a longer line is skipped). */
struct batch_reader {
    int fd;
    char *buf;       /* BATCH_READ_CHUNK bytes */
    size_t start, end;
    int eof;         /* read() said end of file (or failed: error) */
    int error;       /* errno of a failed read; 0 = none */
    size_t limit;    /* longest line kept */
    long line;       /* lines returned so far */
    struct buf cur;  /* the line being gathered */
    int cur_any;     /* a byte of it was seen */
    int cur_long;    /* it passed limit: not kept */
    int cur_nl;      /* the last line returned ended with a newline */
    int returned;    /* cur holds the line returned last: reset it at the next call */
};

/* A bad line met before any JSON object: its error line waits until the file proves to be
 * JSON lines (else the whole file is refused and nothing is written). */
struct batch_held {
    long line;
    char *why;
};

/* A counter per encoding, for the context check. */
struct batch_ctx {
    char *enc;
    int approx;
    struct context *c;
};

struct batch {
    const struct batch_opts *o;
    struct conf *conf;
    char *key;
    const char *in_name;        /* "stdin" or the input path */
    struct batch_reader rd;
    int in_done;                /* the input is read to its end (or failed) */
    int refused;                /* the input is not JSON lines at all: exit 2, nothing written */
    struct batch_set ids;       /* ids met (batch_id_key) -> line number */
    const struct batch_set *done_ids; /* --resume: ids complete in the output */
    struct batch_held *held;
    size_t n_held, cap_held;
    size_t objects;             /* lines that are JSON objects */
    char first;                 /* first non-blank character of the first non-blank line */
    long first_bad;             /* the first line that is not a JSON object, and why */
    char first_why[64];
    long total;                 /* non-blank lines of the input when known (a regular file and
                                   a progress bar); -1 = unknown */
    struct batch_ctx ctxs[4];
    struct batch_set seen_keys; /* unknown fields met (for one warning; at most a few) */
    struct queue *q;
    struct net *net;
    struct batch_slot *slots;
    int n_slots, inflight;
    int out_fd, out_tty, err_tty;
    int out_claim; /* --out's fd, to be emptied when the run first writes (-1: done, or none) */
    int stopping;               /* interrupted, or the output failed: start nothing new */
    int out_error;              /* 0, or the exit status for a failed output (141 or 1) */
    char *store_error;          /* first cache failure, reported at the end */
    size_t n_ok, n_failed, n_cached, n_skipped, n_cancelled, n_retries;
    size_t n_unwritten;         /* answers whose line could not be written (out_error) */
    size_t n_limited; /* retries of finished lines that followed a 429 */
    double t_start, last_draw;
    int drawn;                  /* a progress bar is on the screen */
    struct buf line;
    int quota_loaded;           /* the saved quota state went out with the first request */
    char *quota_line;           /* the latest quota state, saved at the end */
    double wait_until;          /* pacing: the network thread holds requests until then */
    struct metrics *metrics;    /* --metrics-listen: the answers observed, else NULL */
    struct metrics_server *metrics_srv;
    char *provider;             /* the API host, the metrics' provider label */
    char *trace_server;         /* the same for the spans' server.address */
    /* the prices of the models the lines asked for, for the metrics' spend (until 2026-12
     * one, the default model's, priced every line: a line's own "model" was charged at it) */
    struct batch_price {
        char *model;
        int priced;
        struct context_price price;
    } *prices;
    size_t n_prices;
    char *prices_file;          /* the user's prices.tsv, read first */
    struct batch_done *done;    /* finished requests to write (and cache) once the next
                                   requests are out: writing and committing never delay them */
    size_t n_done, cap_done;
    size_t n_written;           /* of them, the first n_written have their line written */
    size_t done_bytes;          /* bytes of answer text they hold */
    double done_since;          /* when the oldest written one was written (0: none) */
    struct remote_job *rj;      /* --remote: the provider's batch, else NULL */
    int rj_collect;             /* reading the input: lines go to rj's spool (input order) */
    struct buf rj_err;          /* why sending to the provider failed */
};

/* Items to do as far as known: the non-blank lines minus those --resume skipped; 0 when the
 * total is unknown (stdin, or no progress bar). */
static size_t batch_todo(const struct batch *b)
{
    return b->total >= 0 && (size_t)b->total > b->n_skipped ? (size_t)b->total - b->n_skipped
                                                             : 0;
}

/* ---- arguments ---- */

/* Append ", " and item to b, whose last line is *col columns wide: on a new line indented by
 * indent columns when it would pass the 79th. */
static void batch_usage_item(struct buf *b, size_t *col, const char *item, size_t indent)
{
    size_t n = strlen(item);
    if (*col + 2 + n > 79) {
        buf_printf(b, ",\n%*s%s", (int)indent, "", item);
        *col = indent + n;
    } else {
        buf_printf(b, ", %s", item);
        *col += 2 + n;
    }
}

const char *batch_usage(void)
{
    static char *text;
    if (text)
        return text;
    struct buf b = BUF_INIT;
    buf_appends(&b,
           "Usage: tokterm [OPTIONS] batch IN.jsonl [--concurrency N] [--out FILE [--resume]]\n"
           "\n"
           "Send every line of IN.jsonl (\"-\" = stdin) as its own request, N at a time, and\n"
           "write one JSON line per answer to stdout (or FILE) as each one finishes.\n"
           "\n"
           "Input lines:  {\"id\": 1, \"prompt\": \"Hello\"}\n"
           "              {\"id\": \"b\", \"messages\": [{\"role\": \"user\", "
           "\"content\": \"Hi\"}]}\n");
    /* the sampling parameters (API_SAMPLING) by their JSON names, then by their options */
    const char *head = "  optional per line: \"model\"";
    size_t col = strlen(head);
    buf_appends(&b, head);
    char item[64];
    for (size_t i = 0; i < API_N_PARAMS; i++) {
        snprintf(item, sizeof item, "\"%s\"", api_params[i].name);
        batch_usage_item(&b, &col, item, 4);
    }
    batch_usage_item(&b, &col, "\"system\" (with prompt)", 4);
    batch_usage_item(&b, &col, "\"files\": [PATH...] (with prompt)", 4);
    buf_appends(&b, "\n"
           "Output lines: {\"id\", \"line\", \"content\", \"reasoning\", \"model\", "
           "\"finish_reason\",\n"
           "  \"outcome\", \"exit_code\", \"error\", \"usage\", \"timings\", \"cached\", "
           "...} as --json,\n"
           "  in order of completion (\"line\" is the input line number)\n"
           "\n"
           "  -j, --concurrency N   requests in flight at once (default 8, at most 1024)\n"
           "  -o, --out FILE        write the answers to FILE instead of stdout\n"
           "      --resume          skip ids FILE already has complete; retry the rest\n"
           "      --metrics-listen HOST:PORT  serve Prometheus metrics at /metrics while it runs\n"
           "      --metrics-linger S  then serve until one scrape read the end (at most S s)\n"
           "      --remote          through the provider's Batch API (OpenAI, Anthropic): half\n"
           "                        the price, up to 24 h; lines in input order at the end;\n"
           "                        run it again after a stop to pick the batch up\n"
           "      --remote-poll S   seconds between looks at the batch (default 10)\n"
           "      --remote-status ID, --remote-cancel ID  show or cancel a provider's batch\n"
           "  -h, --help            this text\n");
    head = "Options before 'batch' apply to every line: -m, -s, -P";
    col = strlen(head);
    buf_appends(&b, head);
    batch_usage_item(&b, &col, "--base-url", 0);
    for (size_t i = 0; i < API_N_PARAMS; i++) {
        if (api_params[i].shrt)
            snprintf(item, sizeof item, "-%c", api_params[i].shrt);
        else
            snprintf(item, sizeof item, "--%s", api_params[i].opt);
        batch_usage_item(&b, &col, item, 0);
    }
    static const char *const more[] = {"--no-cache", "--cache-only", "--incognito (no cache)",
                                       "--db ..."};
    for (size_t i = 0; i < TT_ARRAY_LEN(more); i++)
        batch_usage_item(&b, &col, more[i], 0);
    buf_appends(&b, "\n"
           "Answers are not saved as conversations; they use and fill the response cache.\n"
           "Exit status: 0 all complete; 3 some items failed (see their lines), or --remote:\n"
           "  the provider refused (no lines); 4 --remote: the provider could not be reached;\n"
           "  2 bad usage or input; 130 interrupted (finished lines are all written: finish\n"
           "  with --resume).\n");
    text = buf_take(&b);
    return text;
}

/* The seconds of option opt: val from 0 (when zero_ok, else above 0) to 3600 into *out; 0, or
 * -1 with err set. */
static int batch_seconds(const char *opt, const char *val, int zero_ok, double *out,
                         struct buf *err)
{
    char *end;
    errno = 0;
    double sec = strtod(val, &end);
    if (errno || end == val || *end || !(zero_ok ? sec >= 0 : sec > 0) || !(sec <= 3600)) {
        buf_printf(err, "batch: %s takes seconds from %s to 3600, not '%s'", opt,
                   zero_ok ? "0" : "above 0", val);
        return -1;
    }
    *out = sec;
    return 0;
}

/* Each request in flight holds a socket (two for a moment while a connection is replaced), and
 * the process has a few more open: the soft limit on open files is raised toward twice the
 * concurrency and 64 more, as far as the hard limit lets it. Returns the concurrency that fits
 * (said on stderr when it is less than asked). Until 2026-12 `batch -j 1024` under the common
 * soft limit of 1024 lost lines to EMFILE, reported as "Couldn't connect to server - is the
 * server running?", and then to the circuit breaker ("the server looks down"). */
static int batch_fit_files(int concurrency)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return concurrency;
    rlim_t want = (rlim_t)concurrency * 2 + 64;
    if (rl.rlim_cur < want) {
        struct rlimit up = {rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want
                                                                             : rl.rlim_max,
                            rl.rlim_max};
        if (up.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = up.rlim_cur;
    }
    if (rl.rlim_cur >= (rlim_t)concurrency + 64)
        return concurrency;
    int fit = rl.rlim_cur > 65 ? (int)(rl.rlim_cur - 64) : 1;
    fprintf(stderr, "tokterm batch: warning: %d requests at once need about %d open files, and "
                    "the limit is %llu (ulimit -n): running %d at once\n",
            concurrency, concurrency + 64, (unsigned long long)rl.rlim_cur, fit);
    return fit;
}

int batch_parse(struct batch_opts *o, int argc, char **argv, struct buf *err)
{
    struct batch_opts keep = *o;
    memset(o, 0, sizeof *o);
    o->store = keep.store;
    o->cache = keep.cache;
    o->pool_labels = keep.pool_labels;
    o->pool_values = keep.pool_values;
    o->n_pool = keep.n_pool;
    o->fallback = keep.fallback;
    o->fallback_key = keep.fallback_key;
    o->concurrency = BATCH_DEFAULT_CONCURRENCY;
    int only_words = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!only_words && strcmp(a, "--") == 0) {
            only_words = 1;
            continue;
        }
        if (!only_words && a[0] == '-' && a[1] != '\0') {
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
            size_t n = eq ? (size_t)(eq - a) : strlen(a);
#define BATCH_IS(s) (strlen(s) == n && strncmp(a, s, n) == 0)
            int takes = BATCH_IS("--concurrency") || BATCH_IS("-j") || BATCH_IS("--out") ||
                        BATCH_IS("-o") || BATCH_IS("--metrics-listen") ||
                        BATCH_IS("--metrics-linger") || BATCH_IS("--remote-status") ||
                        BATCH_IS("--remote-cancel") || BATCH_IS("--remote-poll");
            if (takes) {
                val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                if (!val) {
                    buf_printf(err, "batch: option '%.*s' needs a value", (int)n, a);
                    return -1;
                }
            } else if (eq) {
                buf_printf(err, "batch: option '%.*s' takes no value", (int)n, a);
                return -1;
            }
            if (BATCH_IS("--concurrency") || BATCH_IS("-j")) {
                char *end;
                errno = 0;
                long c = strtol(val, &end, 10);
                if (errno || end == val || *end || c < 1 || c > BATCH_MAX_CONCURRENCY) {
                    buf_printf(err, "batch: --concurrency takes a number from 1 to %d, not '%s'",
                               BATCH_MAX_CONCURRENCY, val);
                    return -1;
                }
                o->concurrency = (int)c;
            } else if (BATCH_IS("--out") || BATCH_IS("-o")) {
                o->out = val;
            } else if (BATCH_IS("--metrics-listen")) {
                o->metrics_listen = val;
            } else if (BATCH_IS("--metrics-linger")) {
                if (batch_seconds("--metrics-linger", val, 1, &o->metrics_linger, err) < 0)
                    return -1;
            } else if (BATCH_IS("--remote-status")) {
                o->remote_status = val;
            } else if (BATCH_IS("--remote-cancel")) {
                o->remote_cancel = val;
            } else if (BATCH_IS("--remote-poll")) {
                if (batch_seconds("--remote-poll", val, 0, &o->remote_poll, err) < 0)
                    return -1;
            } else if (BATCH_IS("--remote")) {
                o->remote = 1;
            } else if (BATCH_IS("--resume")) {
                o->resume = 1;
            } else if (BATCH_IS("--help") || BATCH_IS("-h")) {
                o->help = 1;
            } else {
                buf_printf(err, "batch: unknown option '%s' (options for every line, such as -m "
                                "MODEL, go before the word batch: tokterm -m MODEL batch IN)", a);
                return -1;
            }
#undef BATCH_IS
            continue;
        }
        if (o->in) {
            buf_printf(err, "batch: one input file only ('%s' and '%s')", o->in, a);
            return -1;
        }
        o->in = a;
    }
    if (o->help)
        return 0;
    if (o->remote_status && o->remote_cancel) {
        buf_appends(err, "batch: give --remote-status or --remote-cancel, not both");
        return -1;
    }
    if (o->remote_status || o->remote_cancel)
        return 0; /* no input */
    if (o->remote && o->resume) {
        buf_appends(err, "batch: --remote resumes by itself: run the same command again (the "
                         "store knows the running batch by its requests)");
        return -1;
    }
    if (!o->in) {
        buf_appends(err, "batch: give the input file: tokterm batch IN.jsonl > OUT.jsonl");
        return -1;
    }
    if (o->resume && !o->out) {
        buf_appends(err, "batch: --resume needs --out FILE (tokterm reads what FILE already "
                         "has; the shell's > would empty it first)");
        return -1;
    }
    return 0;
}

/* ---- output ---- */


static void batch_clear_bar(struct batch *b)
{
    if (b->drawn) {
        (void)util_write_all(2, "\r\033[K", 4);
        b->drawn = 0;
    }
}


/* The price of the model a line asked for, looked up once per model (a few models at most:
 * a line's "model", else the default). */
static const struct batch_price *batch_price_of(struct batch *b, const char *model)
{
    for (size_t i = 0; i < b->n_prices; i++)
        if (strcmp(b->prices[i].model, model) == 0)
            return &b->prices[i];
    b->prices = xrealloc(b->prices, (b->n_prices + 1) * sizeof *b->prices);
    struct batch_price *p = &b->prices[b->n_prices++];
    p->model = xstrdup(model);
    p->priced = context_price_lookup(model, b->prices_file, &p->price) == 0;
    return p;
}

/* Add a finished request to the metrics. */
static void batch_observe(struct batch *b, const struct net_result *r, const char *model,
                          int retries)
{
    static const char *const status[] = {"complete", "truncated", "cancelled", "error"};
    int k = r->outcome == API_OK                                         ? 0
            : r->outcome == API_ERR_TRUNCATED || r->outcome == API_CUT ? 1
            : r->outcome == API_CANCELLED                                ? 2
                                                                         : 3;
    const char *m = r->model[0] ? r->model : model;
    double usd = -1;
    const struct batch_price *p = !r->cached && r->usage.present ? batch_price_of(b, model)
                                                                 : NULL;
    if (p && p->priced)
        usd = context_cost(&p->price, r->usage.prompt, r->usage.cached, r->usage.completion);
    struct metrics_obs o = {b->provider, m, status[k], r->cached, r->t.ttft,
                            r->t.deltas > 1 ? r->t.gap_p50 : -1, r->t.total, r->t.dns,
                            r->t.connect, r->t.tls,
                            r->usage.present ? r->usage.prompt : -1,
                            r->usage.present ? r->usage.completion : -1, retries,
                            r->rate_limited, usd};
    metrics_observe(b->metrics, &o);
    struct ratelimit_state q;
    if (r->quota_line && *r->quota_line &&
        ratelimit_state_load(&q, r->quota_line, strlen(r->quota_line), util_now(),
                             (double)time(NULL)) == 0) {
        const char *key = r->key_label[0] ? r->key_label : "default";
        if (q.req.remaining != RATELIMIT_UNKNOWN)
            metrics_set_quota(b->metrics, key, "requests", (double)q.req.remaining);
        if (q.tok.remaining != RATELIMIT_UNKNOWN)
            metrics_set_quota(b->metrics, key, "tokens", (double)q.tok.remaining);
    }
}

/* Write the line of one finished item. r is the result; timed = 0 for a line that never
 * became a request (usage errors: usage and timings are null). */
/* --out FILE is emptied when the run first writes, not when it is opened: a run refused before
 * (not JSON lines, a metrics port in use) leaves the last run's results alone (until 2026-12
 * it emptied them). A file that cannot be cut (a FIFO, a device) is written as it is. */
static void batch_out_claim(struct batch *b)
{
    if (b->out_claim < 0)
        return;
    (void)!ftruncate(b->out_claim, 0); /* fails on a FIFO or device: nothing to empty */
    b->out_claim = -1;
}

static void batch_emit(struct batch *b, const struct batch_item *it, const struct net_result *r,
                       int timed, const char *content, const char *reasoning, const char *model,
                       int retries)
{
    cJSON *o = cJSON_CreateObject();
    if (it->id)
        cJSON_AddRawToObject(o, "id", it->id);
    else
        cJSON_AddNullToObject(o, "id");
    cJSON_AddNumberToObject(o, "line", (double)it->line);
    script_result_fields(o, r, SCRIPT_JSON_STREAMED, SCRIPT_JSON_STREAMED, model,
                         api_outcome_exit(r->outcome), timed);
    cJSON_AddNumberToObject(o, "retries", retries);
    if (b->metrics && (timed || r->cached))
        batch_observe(b, r, model, retries);
    if (timed || r->cached)
        otlp_result(r, b->conf->api, model, b->trace_server, retries);
    if (!b->rj_collect) /* --remote's lines go to its spool first (remote_write claims) */
        batch_out_claim(b);
    off_t at = b->rj_collect ? lseek(b->out_fd, 0, SEEK_END) : 0;
    int written = 0;
    if (!b->out_error) {
        if (b->out_tty)
            batch_clear_bar(b);
        if (script_json_write(b->out_fd, o, content, content ? strlen(content) : 0, reasoning,
                              reasoning ? strlen(reasoning) : 0, b->out_tty) < 0) {
            b->out_error = errno == EPIPE ? 141 : 1;
            if (errno != EPIPE) {
                batch_clear_bar(b);
                fprintf(stderr, "tokterm batch: writing %s: %s\n",
                        b->o->out ? b->o->out : "stdout", strerror(errno));
            }
            b->stopping = 1;
        } else {
            written = 1;
            if (b->rj_collect) /* its place among the answers to come */
                remote_job_note(b->rj, it->line, at,
                                (size_t)(lseek(b->out_fd, 0, SEEK_END) - at));
        }
    }
    /* the summary counts the lines written: until 2026-12 an answer whose line could not be
     * written (a full disk, a closed pipe) was counted "complete" all the same */
    if (!written)
        b->n_unwritten++;
    else if (r->outcome == API_OK)
        b->n_ok++;
    else
        b->n_failed++;
    if (written && r->cached)
        b->n_cached++;
    cJSON_Delete(o);
}

/* A line that did not become a request. */
static void batch_emit_usage(struct batch *b, const struct batch_item *it, const char *model,
                             const char *why)
{
    struct net_result r;
    memset(&r, 0, sizeof r);
    r.outcome = API_ERR_USAGE;
    r.t.ttft = -1;
    r.error = xasprintf("line %ld: %s", it->line, why);
    batch_emit(b, it, &r, 0, "", "", model, 0);
    free(r.error);
}

/* ---- progress ---- */

void batch_fmt_time(char *out, size_t size, double s)
{
    if (!(s >= 0) || s > 359999) {
        snprintf(out, size, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, size, "%ld:%02ld", t / 60, t % 60);
}

static void batch_progress(struct batch *b, int force)
{
    size_t todo = batch_todo(b);
    if (!b->err_tty || (todo == 0 && b->n_ok + b->n_failed == 0))
        return;
    double now = util_now();
    if (!force && now - b->last_draw < BATCH_DRAW_INTERVAL)
        return;
    b->last_draw = now;
    size_t fin = b->n_ok + b->n_failed;
    double el = now - b->t_start;
    double rate = el > 0.05 ? (double)fin / el : 0;
    char eta[32];
    batch_fmt_time(eta, sizeof eta, rate > 0 && todo > fin ? (double)(todo - fin) / rate : -1);
    char stats[256];
    int sn = todo ? snprintf(stats, sizeof stats, " %zu/%zu  failed %zu", fin, todo, b->n_failed)
                  : snprintf(stats, sizeof stats, " %zu done  failed %zu", fin, b->n_failed);
    if (b->n_cached)
        sn += snprintf(stats + sn, sizeof stats - (size_t)sn, "  cached %zu", b->n_cached);
    if (b->n_retries)
        sn += snprintf(stats + sn, sizeof stats - (size_t)sn, "  retries %zu", b->n_retries);
    if (b->wait_until > now)
        sn += snprintf(stats + sn, sizeof stats - (size_t)sn, "  quota wait %.1fs",
                       b->wait_until - now);
    snprintf(stats + sn, sizeof stats - (size_t)sn, "  %.1f/s  ETA %s", rate, eta);
    batch_draw_bar(fin, todo, stats);
    b->drawn = 1;
}

void batch_draw_bar(size_t fin, size_t todo, const char *stats)
{
    struct winsize ws;
    int cols = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    int width = cols - (int)strlen(stats) - 3;
    if (width > 40)
        width = 40;
    struct buf s = BUF_INIT;
    buf_appendc(&s, '\r');
    if (width >= 8 && todo) {
        int fill = (int)((double)width * (double)(fin < todo ? fin : todo) / (double)todo);
        buf_appendc(&s, '[');
        for (int i = 0; i < width; i++)
            buf_appendc(&s, i < fill ? '#' : '-');
        buf_appendc(&s, ']');
    }
    buf_appends(&s, stats);
    buf_appends(&s, "\033[K");
    (void)util_write_all(2, s.data, s.len);
    buf_free(&s);
}

/* ---- input ---- */

/* The key an id is remembered by: its canonical JSON, or '#' and the hex of the first half of
 * its SHA-256 when longer than BATCH_ID_KEY_MAX (so the sets stay small whatever the ids). */
static void batch_id_key(const char *canon, char out[BATCH_ID_KEY_MAX + 2])
{
    size_t n = strlen(canon);
    if (n <= BATCH_ID_KEY_MAX) {
        memcpy(out, canon, n + 1);
        return;
    }
    unsigned char d[SHA256_DIGEST_LEN];
    char hex[65];
    sha256_digest(canon, n, d);
    sha256_hex(d, hex);
    out[0] = '#';
    memcpy(out + 1, hex, 32);
    out[33] = '\0';
}

static void batch_reader_init(struct batch_reader *rd, int fd, size_t limit)
{
    memset(rd, 0, sizeof *rd);
    rd->fd = fd;
    rd->limit = limit;
    rd->buf = xmalloc(BATCH_READ_CHUNK);
}

static void batch_reader_free(struct batch_reader *rd)
{
    free(rd->buf);
    rd->buf = NULL;
    buf_free(&rd->cur);
}

/* Read the next chunk once everything read is used (one read(); blocks on a pipe only when
 * called after poll() said readable). Returns 0, or -1 on a read error (rd->error). */
static int batch_fill(struct batch_reader *rd)
{
    if (rd->start < rd->end || rd->eof)
        return 0;
    rd->start = rd->end = 0;
    for (;;) {
        ssize_t n = read(rd->fd, rd->buf, BATCH_READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rd->error = errno;
            rd->eof = 1;
            return -1;
        }
        if (n == 0)
            rd->eof = 1;
        rd->end = (size_t)n;
        return 0;
    }
}

/* The next line of what was read: 1 with it in *text / *len (NUL-terminated, valid until the
 * next call; a trailing CR and a UTF-8 byte-order mark at the very start dropped; empty and
 * *too_long set when it passed rd->limit), 0 when more must be read first (batch_fill), -1 at
 * the end of the input. */
static int batch_line(struct batch_reader *rd, const char **text, size_t *len, int *too_long)
{
    if (rd->returned) {
        buf_reset(&rd->cur);
        rd->cur_any = rd->cur_long = rd->returned = 0;
    }
    char *nl = NULL;
    for (;;) {
        if (rd->start == rd->end) {
            if (!rd->eof)
                return 0;
            if (!rd->cur_any)
                return -1;
            break; /* a last line without a newline */
        }
        char *p = rd->buf + rd->start;
        size_t avail = rd->end - rd->start;
        nl = memchr(p, '\n', avail);
        size_t n = nl ? (size_t)(nl - p) : avail;
        rd->cur_any = 1;
        if (!rd->cur_long) {
            if (n > rd->limit - rd->cur.len) {
                rd->cur_long = 1; /* the rest of the line is skipped, not kept */
                buf_free(&rd->cur);
            } else
                buf_append(&rd->cur, p, n);
        }
        rd->start += n + (nl != NULL);
        if (nl)
            break;
    }
    rd->line++;
    rd->returned = 1;
    rd->cur_nl = nl != NULL;
    *too_long = rd->cur_long;
    char *s = rd->cur.data ? rd->cur.data : (char *)"";
    size_t l = rd->cur.len;
    if (rd->line == 1 && l >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3; /* a UTF-8 byte-order mark */
        l -= 3;
    }
    if (l && s[l - 1] == '\r')
        s[--l] = '\0';
    *text = s;
    *len = l;
    return 1;
}

/* Non-blank lines of a regular file, read with pread() (the offset does not move), for the
 * progress bar; -1 when fd is not a regular file. */
static long batch_count_lines(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return -1;
    char *chunk = xmalloc(BATCH_READ_CHUNK);
    long n = 0;
    int nonblank = 0;
    off_t off = lseek(fd, 0, SEEK_CUR);
    if (off < 0)
        off = 0;
    off_t first = off;
    for (;;) {
        ssize_t got = pread(fd, chunk, BATCH_READ_CHUNK, off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t from = 0;
        if (off == first && got >= 3 && memcmp(chunk, "\xEF\xBB\xBF", 3) == 0)
            from = 3;
        for (size_t i = from; i < (size_t)got; i++) {
            char c = chunk[i];
            if (c == '\n') {
                n += nonblank;
                nonblank = 0;
            } else if (!strchr(" \t\r\f\v", c) || c == '\0')
                nonblank = 1;
        }
        off += got;
    }
    free(chunk);
    return n + nonblank;
}

static void batch_emit_usage(struct batch *b, const struct batch_item *it, const char *model,
                             const char *why);
static void batch_start(struct batch *b, struct batch_item *it, const cJSON *o);

/* The input is not JSON lines at all: say so (the run stops, exit 2, nothing written). */
static void batch_refuse(struct batch *b, struct buf *err)
{
    const char *name = b->in_name;
    int in_stdin = !b->o->in || strcmp(b->o->in, "-") == 0;
    if (b->first == '[')
        buf_printf(err, "batch: %s holds a JSON array, not JSON lines; convert it with: "
                        "jq -c '.[]'%s%s > IN.jsonl", name, in_stdin ? "" : " ",
                   in_stdin ? "" : name);
    else
        buf_printf(err, "batch: %s is not JSON lines: no line%s is a JSON object (line %ld: %s). "
                        "Give one object per line, e.g. {\"id\": 1, \"prompt\": \"Hello\"}",
                   name, b->n_held >= BATCH_HOLD_MAX ? " of the first 1000" : "", b->first_bad,
                   b->first_why);
    b->refused = 1;
}

static void batch_held_free(struct batch *b)
{
    for (size_t i = 0; i < b->n_held; i++)
        free(b->held[i].why);
    free(b->held);
    b->held = NULL;
    b->n_held = b->cap_held = 0;
}

/* One line of the input: skipped when blank, else an item answered now (an error line, a
 * cache hit) or sent. */
static void batch_take(struct batch *b, const char *text, size_t len, int too_long,
                       struct buf *err)
{
    const char *s = text + strspn(text, " \t\r\f\v");
    int nul = !too_long && strlen(text) != len;
    if (!too_long && !nul && !*s)
        return; /* a blank line (a NUL byte does not make one) */
    if (!b->first)
        b->first = too_long ? '?' : *s;
    struct batch_item it;
    memset(&it, 0, sizeof it);
    it.line = b->rd.line;
    it.nul = nul;
    const char *stop = NULL;
    cJSON *o = too_long || nul ? NULL : cJSON_ParseWithOpts(text, &stop, 1);
    if (!cJSON_IsObject(o)) {
        char why[160];
        if (too_long)
            snprintf(why, sizeof why, "longer than the limit of %zu MiB per line: not read, "
                                      "not sent", b->rd.limit >> 20);
        else if (nul)
            snprintf(why, sizeof why, "holds a NUL byte: not text");
        else if (!o)
            snprintf(why, sizeof why, "not valid JSON (at byte %ld of the line)",
                     stop ? (long)(stop - text) + 1 : 0L);
        else
            snprintf(why, sizeof why, "not a JSON object");
        if (!b->first_bad) {
            b->first_bad = it.line;
            snprintf(b->first_why, sizeof b->first_why, "%s",
                     too_long ? "a line longer than the limit" : nul ? "a NUL byte"
                     : o ? "a JSON value that is not an object" : "not valid JSON");
        }
        cJSON_Delete(o);
        if (b->objects) {
            batch_emit_usage(b, &it, NULL, why);
        } else if (b->n_held >= BATCH_HOLD_MAX) {
            batch_refuse(b, err);
        } else {
            XGROW(b->held, b->n_held + 1, b->cap_held);
            b->held[b->n_held++] = (struct batch_held){it.line, xstrdup(why)};
        }
        return;
    }
    if (!b->objects++) { /* JSON lines after all: the bad lines before this one get theirs */
        for (size_t i = 0; i < b->n_held; i++) {
            struct batch_item h;
            memset(&h, 0, sizeof h);
            h.line = b->held[i].line;
            batch_emit_usage(b, &h, NULL, b->held[i].why);
        }
        batch_held_free(b);
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (cJSON_IsString(id) || cJSON_IsNumber(id)) {
        char *canon = cJSON_PrintUnformatted(id);
        if (!canon) {
            fputs("tokterm: out of memory\n", stderr);
            abort();
        }
        it.id = xstrdup(canon);
        char key[BATCH_ID_KEY_MAX + 2];
        batch_id_key(canon, key);
        cJSON_free(canon);
        long prev = batch_set_get(&b->ids, key);
        if (prev)
            it.dup_of = prev;
        else
            batch_set_add(&b->ids, key, it.line);
        if (!prev && b->done_ids && batch_set_get(b->done_ids, key))
            it.skip = 1;
    }
    if (it.skip) {
        b->n_skipped++;
        free(it.id);
    } else
        batch_start(b, &it, o);
    cJSON_Delete(o);
}

/* The end of the input: a file that held no JSON object at all is refused. */
static void batch_input_end(struct batch *b, struct buf *err)
{
    b->in_done = 1;
    if (!b->objects && b->n_held)
        batch_refuse(b, err);
}

static const char *const batch_fields[] = {"id", "prompt", "messages", "model", "system",
                                          "files"};

/* The fields a line may have: batch_fields and the sampling parameters, as "id, prompt, ...". */
static void batch_known_fields(struct buf *out)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(batch_fields); i++)
        buf_printf(out, "%s%s", i ? ", " : "", batch_fields[i]);
    for (size_t i = 0; i < API_N_PARAMS; i++)
        buf_printf(out, ", %s", api_params[i].name);
}

static void batch_note_key(struct batch *b, const char *k)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(batch_fields); i++)
        if (strcmp(k, batch_fields[i]) == 0)
            return;
    for (size_t i = 0; i < API_N_PARAMS; i++)
        if (strcmp(k, api_params[i].name) == 0)
            return;
    if (b->seen_keys.n <= BATCH_MAX_WARN_KEYS) /* one more than is shown: "..." */
        batch_set_add(&b->seen_keys, k, 1);
}

static const char *batch_role(const char *r)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant"};
    for (size_t i = 0; i < TT_ARRAY_LEN(roles); i++)
        if (strcmp(r, roles[i]) == 0)
            return roles[i];
    return NULL;
}

/* The key or key pool every request carries. */
static struct request_keys batch_keys(const struct batch *b)
{
    return (struct request_keys){b->key, b->o->pool_labels, b->o->pool_values, b->o->n_pool};
}

/* The counter for encoding enc (exact, or an estimate for a model of another tokenizer). */
static struct context *batch_ctx(struct batch *b, const char *enc, int approx)
{
    size_t i = 0;
    for (; i < TT_ARRAY_LEN(b->ctxs) && b->ctxs[i].c; i++)
        if (b->ctxs[i].approx == approx && strcmp(b->ctxs[i].enc, enc) == 0)
            return b->ctxs[i].c;
    if (i == TT_ARRAY_LEN(b->ctxs)) { /* never with the two encodings; start over */
        i = 0;
        context_free(b->ctxs[0].c);
        free(b->ctxs[0].enc);
    }
    b->ctxs[i] = (struct batch_ctx){xstrdup(enc), approx, context_new(enc, approx, NULL)};
    return b->ctxs[i].c;
}

/* The context check of the chat for one request: the window and answer reserve of model as
 * the chat finds them (context_window, the model table, else 8,192 assumed; max_tokens,
 * reserve_tokens, else 4,096 at most a quarter of the window), the messages counted as the API
 * bills them. A batch sends its messages as given (nothing is shortened or dropped), so one
 * that does not fit is not sent. context_policy = off skips the check, as in the chat.
 * Returns 0, or -1 with err set. */
static int batch_context_check(struct batch *b, const char *model, long max_tokens,
                               const struct api_message *m, size_t n, struct buf *err)
{
    const struct conf *c = b->conf;
    enum context_policy pol;
    if (context_policy_parse(c->context_policy, &pol) == 0 && pol == CONTEXT_OFF)
        return 0;
    struct tok_model_info mi;
    int known = tokenizer_model_info(model, &mi) == 0;
    const char *enc_opt = c->encoding && *c->encoding ? c->encoding : NULL;
    const char *enc = enc_opt ? enc_opt : known && mi.encoding ? mi.encoding : "o200k_base";
    int approx = !enc_opt && !(known && mi.encoding);
    int assumed = c->context_window <= 0 && !(known && mi.context_window > 0);
    long window = c->context_window > 0 ? c->context_window
                : !assumed ? mi.context_window : BATCH_WINDOW_DEFAULT;
    long reserve;
    if (max_tokens > 0)
        reserve = max_tokens;
    else if (c->reserve_tokens > 0)
        reserve = c->reserve_tokens;
    else {
        reserve = BATCH_RESERVE_DEFAULT;
        if (known && mi.max_output > 0 && mi.max_output < reserve)
            reserve = mi.max_output;
        if (reserve > window / 4)
            reserve = window / 4;
    }
    long room = window - reserve;
    /* Every token is at least one byte: most prompts fit on their bytes, uncounted. */
    size_t bytes = CONTEXT_REPLY_PRIMER;
    for (size_t i = 0; i < n; i++)
        bytes += CONTEXT_MSG_OVERHEAD + strlen(m[i].role) + strlen(m[i].content);
    if (room > 0 && bytes <= (size_t)room)
        return 0;
    struct context *ctx = batch_ctx(b, enc, approx);
    long total = CONTEXT_REPLY_PRIMER;
    for (size_t i = 0; i < n; i++)
        total += context_msg_tokens(ctx, m[i].role, m[i].content, strlen(m[i].content));
    if (total <= room)
        return 0;
    buf_printf(err, "prompt too long for the context window (%s%ld tokens > %ld): the window "
                    "of %s is %ld tokens%s, %ld of them kept for the answer (max_tokens / "
                    "reserve_tokens); not sent", context_approximate(ctx) ? "~" : "", total,
               room, model, window, assumed ? " (assumed: set context_window)" : "", reserve);
    return -1;
}

/* A line's "files" (a list of paths, sent with its "prompt" as -f sends them): read and checked
 * into *l, the parts (*parts, n of them) and the message's text (*content: the text files
 * fenced, then the prompt; NULL when there are none). 0, or -1 with err set and nothing
 * left to free. */
static int batch_files(struct batch *b, const cJSON *jf, const cJSON *jp, struct attach_list *l,
                       struct api_part **parts, size_t *n_parts, char **content,
                       struct buf *err)
{
    const struct conf *c = b->conf;
    char *why = NULL;
    const cJSON *e;
    if (!cJSON_IsArray(jf)) {
        buf_appends(err, "\"files\" must be a list of paths");
        return -1;
    }
    cJSON_ArrayForEach(e, jf) {
        if (!cJSON_IsString(e)) {
            buf_appends(err, "\"files\" must be a list of paths");
            attach_list_free(l);
            return -1;
        }
        if (attach_add(l, e->valuestring, &why) < 0)
            break;
    }
    enum attach_provider p = attach_provider(c->api, c->base_url, c->pdf);
    if (!why)
        (void)attach_check(l->v, l->n, p, &why);
    struct conv_turn t = {.prompt = cJSON_IsString(jp) ? jp->valuestring : (char *)"",
                          .att = l->v, .n_att = l->n};
    t.prompt_len = strlen(t.prompt);
    size_t len;
    if (!why && conv_turn_content(&t, attach_pdf_as_text(p), &len, &why))
        *content = t.content;
    if (why) {
        utf8_sanitize(err, why, strlen(why));
        free(why);
        free(t.content);
        attach_list_free(l);
        return -1;
    }
    *parts = xcalloc(l->n + 1, sizeof **parts);
    *n_parts = attach_parts(l->v, l->n, attach_pdf_as_text(p), *parts);
    return 0;
}

/* Build the request body of one item. Returns it (caller frees) with *model pointing into o
 * or the configuration, *max_tokens (0 = none) and *fallback (the request sent while the
 * breaker is open, NULL when no fallback is configured; caller frees), or NULL with err set. */
/* OpenAI's list form of a message's content: its text parts ({"type": "text", "text": ...})
 * joined by newlines into *out (malloc'd). Another part (an image_url, a file) is refused:
 * 0, or -1 with the reason. */
static int batch_text_parts(const cJSON *ct, char **out, size_t at, struct buf *err)
{
    struct buf t = BUF_INIT;
    const cJSON *p;
    size_t k = 0;
    cJSON_ArrayForEach(p, ct) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "text"));
        if (!type || strcmp(type, "text") != 0 || !text) {
            buf_printf(err, "messages[%zu].content[%zu]: only text parts are taken (%s); give "
                            "images and files with a \"prompt\" line's \"files\"", at, k,
                       type ? type : "no type");
            buf_free(&t);
            return -1;
        }
        if (k++)
            buf_appendc(&t, '\n');
        buf_appends(&t, text);
    }
    *out = t.len ? buf_take(&t) : xstrdup("");
    buf_free(&t);
    return 0;
}

static char *batch_body(struct batch *b, const cJSON *o, const char **model, long *max_tokens,
                        struct net_request **fallback, struct buf *err)
{
    char **joined = NULL; /* "messages": the contents given as lists of text parts */
    const struct conf *c = b->conf;
    for (const cJSON *k = o->child; k; k = k->next)
        if (k->string)
            batch_note_key(b, k->string);
    const cJSON *jm = cJSON_GetObjectItemCaseSensitive(o, "model");
    *model = c->model;
    if (jm) {
        if (!cJSON_IsString(jm) || !jm->valuestring[0]) {
            buf_appends(err, "\"model\" must be a non-empty string");
            return NULL;
        }
        *model = jm->valuestring;
    }
    if (!*model || !**model) {
        buf_appends(err, "no model: give -m MODEL, a profile's model, or a \"model\" field");
        return NULL;
    }
    struct api_request ar;
    request_api(&ar, c, NULL, 0);
    ar.model = *model;
    /* the line's own sampling parameters override the configuration's */
    for (size_t i = 0; i < API_N_PARAMS; i++) {
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(o, api_params[i].name);
        if (jv && api_param_from_json(&ar, &api_params[i], cJSON_IsNumber(jv) ? jv->valuedouble
                                                                               : 0,
                                      cJSON_IsNumber(jv), err) < 0)
            return NULL;
    }
    const cJSON *jp = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const cJSON *jms = cJSON_GetObjectItemCaseSensitive(o, "messages");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(o, "system");
    if (jp && jms) {
        buf_appends(err, "give either \"prompt\" or \"messages\", not both");
        return NULL;
    }
    if (!jp && !jms) {
        buf_appends(err, "no \"prompt\" (a string) or \"messages\" (a list) to send");
        return NULL;
    }
    if (js && (!cJSON_IsString(js) || jms)) {
        buf_appends(err, jms ? "\"system\" goes with \"prompt\"; with \"messages\" put a system "
                               "message in the list"
                             : "\"system\" must be a string");
        return NULL;
    }
    const cJSON *jf = cJSON_GetObjectItemCaseSensitive(o, "files");
    if (jf && !jp) {
        buf_appends(err, "\"files\" goes with \"prompt\"");
        return NULL;
    }
    struct attach_list files = {0};
    struct api_part *parts = NULL;
    size_t n_parts = 0;
    char *content = NULL;
    struct api_message *m = NULL;
    size_t n = 0;
    if (jp) {
        if (!cJSON_IsString(jp) || !jp->valuestring[strspn(jp->valuestring, " \t\r\n")]) {
            buf_appends(err, "\"prompt\" must be a non-empty string");
            return NULL;
        }
        if (jf && batch_files(b, jf, jp, &files, &parts, &n_parts, &content, err) < 0)
            return NULL;
        m = xcalloc(2, sizeof *m);
        const char *sys = js ? js->valuestring : c->system;
        if (sys && *sys)
            m[n++] = (struct api_message)API_MSG("system", sys);
        m[n++] = (struct api_message){.role = "user",
                                      .content = content ? content : jp->valuestring,
                                      .parts = parts, .n_parts = n_parts};
    } else {
        int count = cJSON_GetArraySize(jms);
        if (!cJSON_IsArray(jms) || count == 0) {
            buf_appends(err, "\"messages\" must be a non-empty list of {\"role\", \"content\"}");
            return NULL;
        }
        m = xcalloc((size_t)count, sizeof *m);
        joined = xcalloc((size_t)count, sizeof *joined);
        const cJSON *e;
        cJSON_ArrayForEach(e, jms) {
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "role");
            const cJSON *ct = cJSON_GetObjectItemCaseSensitive(e, "content");
            const char *role = cJSON_IsString(r) ? batch_role(r->valuestring) : NULL;
            const char *text = cJSON_IsString(ct) ? ct->valuestring : NULL;
            if (role && cJSON_IsArray(ct) && batch_text_parts(ct, &joined[n], n, err) < 0)
                goto refused;
            if (role && cJSON_IsArray(ct))
                text = joined[n];
            if (!role || !text) {
                buf_printf(err, "messages[%zu] needs a \"role\" (system, developer, user or "
                                "assistant) and a \"content\": a string, or a list of text "
                                "parts", n);
                goto refused;
            }
            m[n++] = (struct api_message)API_MSG(role, text);
        }
    }
    ar.messages = m;
    ar.n_messages = n;
    *max_tokens = ar.max_tokens;
    char *body = NULL;
    if (batch_context_check(b, *model, ar.max_tokens, m, n, err) == 0) {
        body = request_body(c, &ar);
        struct request_keys k = batch_keys(b);
        *fallback = request_fallback(c, &ar, &k, b->o->fallback, b->o->fallback_key);
    }
    for (size_t i = 0; joined && i < n; i++)
        free(joined[i]);
    free(joined);
    free(m);
    free(parts);
    free(content);
    attach_list_free(&files);
    return body;
refused:
    for (size_t i = 0; i <= n; i++)
        free(joined[i]);
    free(joined);
    free(m);
    return NULL;
}

/* ---- requests ---- */

static struct batch_slot *batch_find(struct batch *b, unsigned req)
{
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].req == req)
            return &b->slots[i];
    return NULL;
}

static void batch_store_failed(struct batch *b)
{
    if (!b->store_error)
        b->store_error = xstrdup(store_error(b->o->store));
}

/* Answer an item from a cache entry. */
static void batch_emit_cached(struct batch *b, const struct batch_item *it,
                              const struct store_cache_entry *e, const char *model)
{
    struct net_result r;
    memset(&r, 0, sizeof r);
    r.outcome = API_OK;
    r.status = 200;
    r.cached = 1;
    snprintf(r.model, sizeof r.model, "%s", e->model ? e->model : model);
    snprintf(r.finish, sizeof r.finish, "%s", e->finish_reason ? e->finish_reason : "stop");
    if (e->usage.total_tokens >= 0 || e->usage.completion_tokens >= 0) {
        r.usage.present = 1;
        r.usage.prompt = e->usage.prompt_tokens > 0 ? e->usage.prompt_tokens : 0;
        r.usage.completion = e->usage.completion_tokens > 0 ? e->usage.completion_tokens : 0;
        r.usage.total = e->usage.total_tokens > 0 ? e->usage.total_tokens : 0;
    }
    r.t.ttft = 0;
    r.t.deltas = 1;
    batch_emit(b, it, &r, 1, e->content, e->reasoning, model, 0);
}

/* The request of body (taken), built as the chat builds one: the same URL, key (or key
 * pool), retry policy, pacing limits and quota name, so a batch and a chat of the same profile
 * share one quota state. */
static struct net_request *batch_request(struct batch *b, const char *model, char *body,
                                         long max_tokens)
{
    struct request_keys k = batch_keys(b);
    struct net_request *rq = request_new(b->conf, body, &k, max_tokens);
    free(rq->url); /* the line's model: Gemini names it in the URL (until 2026-12 every line */
    rq->url = request_url_model(b->conf, model); /* went to the profile's model there) */
    if (!b->quota_loaded) /* the first request starts from what the last run learnt */
        request_quota_seed(rq, b->o->store, b->conf);
    b->quota_loaded = 1;
    return rq;
}

/* Start item it (its line is the JSON object o; it->id is taken): a line for a bad item or a
 * cache hit at once, else a request. */
static void batch_start(struct batch *b, struct batch_item *it, const cJSON *o)
{
    struct buf err = BUF_INIT;
    const char *model = NULL;
    long max_tokens = 0;
    char *body = NULL;
    struct net_request *fallback = NULL;
    if (!it->id)
        buf_appends(&err, cJSON_GetObjectItemCaseSensitive(o, "id")
                              ? "\"id\" must be a string or a number"
                              : "no \"id\": every line needs one (a string or a number)");
    else if (it->dup_of)
        buf_printf(&err, "duplicate id: line %ld has the same id", it->dup_of);
    else
        body = batch_body(b, o, &model, &max_tokens, &fallback, &err);
    if (!body) {
        batch_emit_usage(b, it, model, buf_str(&err));
        buf_free(&err);
        free(it->id);
        return;
    }
    buf_free(&err);

    if (b->rj) { /* --remote: into the provider's batch (no cache: the batch is the point) */
        if (remote_job_add(b->rj, it->line, it->id, model, body, &b->rj_err) != 0)
            b->stopping = 1;
        free(body);
        net_request_free(fallback);
        free(it->id);
        return;
    }
    const struct batch_opts *bo = b->o;
    unsigned char key[STORE_CACHE_KEY_LEN];
    int key_set = 0;
    if (bo->store && bo->cache != SESSION_CACHE_OFF) {
        request_cache_key(b->conf, model, body, key);
        key_set = 1;
    }
    if (key_set && (bo->cache == SESSION_CACHE_ON || bo->cache == SESSION_CACHE_ONLY)) {
        struct store_cache_entry e;
        memset(&e, 0, sizeof e);
        int rc = store_cache_get(bo->store, key, &e);
        if (rc == 0) {
            batch_emit_cached(b, it, &e, model);
            store_cache_entry_clear(&e);
            free(body);
            net_request_free(fallback);
            free(it->id);
            return;
        }
        if (rc < 0)
            batch_store_failed(b);
        if (bo->cache == SESSION_CACHE_ONLY) {
            struct net_result r;
            memset(&r, 0, sizeof r);
            r.outcome = API_CACHE_MISS;
            r.t.ttft = -1;
            r.error = xasprintf("--cache-only: the cache has no answer for this exact request "
                                "(model, messages, system prompt and parameters)");
            batch_emit(b, it, &r, 0, "", "", model, 0);
            free(r.error);
            free(body);
            net_request_free(fallback);
            free(it->id);
            return;
        }
    }
    struct batch_slot *s = batch_find(b, 0);
    s->item = *it;
    it->id = NULL;
    s->model = xstrdup(model);
    memcpy(s->key, key, sizeof s->key);
    s->key_set = key_set;
    s->retries = 0;
    buf_reset(&s->content);
    buf_reset(&s->reasoning);
    struct net_request *rq = batch_request(b, model, body, max_tokens);
    rq->fallback = fallback;
    s->req = net_submit(b->net, rq);
    b->inflight++;
    if (b->metrics) /* on the wire, not handed over (until 2026-12 twice -j: the slots) */
        metrics_set_inflight(b->metrics, net_on_wire(b->net));
}

/* The request of slot s ended with r (taken). */
static void batch_finish(struct batch *b, struct batch_slot *s, struct net_result *r)
{
    net_result_redact(r, b->key); /* every key: the pool's and the fallback's too */
    for (int i = 0; i < b->o->n_pool; i++)
        net_result_redact(r, b->o->pool_values[i]);
    net_result_redact(r, b->o->fallback_key);
    if (r->quota_line && *r->quota_line) {
        free(b->quota_line);
        b->quota_line = xstrdup(r->quota_line);
    }
    if (r->outcome == API_CANCELLED && b->stopping) {
        b->n_cancelled++; /* not written: --resume sends it again */
        net_result_free(r);
        free(s->model);
        free(s->item.id);
    } else {
        XGROW(b->done, b->n_done + 1, b->cap_done);
        struct batch_done *d = &b->done[b->n_done++];
        d->item = s->item;
        d->r = r;
        d->content = buf_take(&s->content);
        d->reasoning = buf_take(&s->reasoning);
        d->model = s->model;
        d->retries = s->retries;
        int lim = r->rate_limited - (r->status == 429); /* the 429s that were followed */
        b->n_limited += lim > 0 ? (size_t)lim : 0;
        memcpy(d->key, s->key, sizeof d->key);
        d->key_set = s->key_set;
    }
    s->model = NULL;
    s->item.id = NULL;
    s->req = 0;
    b->inflight--;
    if (b->metrics)
        metrics_set_inflight(b->metrics, net_on_wire(b->net));
}

/* Write the lines of the requests that finished since the last call; then, when force, or
 * when enough answers are waiting (BATCH_CACHE_*), fill the response cache with the complete
 * ones among them, in one write transaction: a commit per answer cost more than the answer. */
static void batch_done_flush(struct batch *b, int force)
{
    for (; b->n_written < b->n_done; b->n_written++) {
        struct batch_done *d = &b->done[b->n_written];
        batch_emit(b, &d->item, d->r, 1, d->content, d->reasoning, d->model, d->retries);
        b->done_bytes += strlen(d->content) + strlen(d->reasoning);
        if (!b->done_since)
            b->done_since = util_now();
    }
    if (!b->n_done || (!force && b->n_done < BATCH_CACHE_COUNT &&
                       b->done_bytes < BATCH_CACHE_BYTES &&
                       util_now() - b->done_since < BATCH_CACHE_DELAY))
        return;
    struct store_cache_put *items = xcalloc(b->n_done, sizeof *items);
    struct store_usage *usage = xcalloc(b->n_done, sizeof *usage);
    size_t n = 0;
    for (size_t i = 0; i < b->n_done; i++) {
        struct batch_done *d = &b->done[i];
        const struct net_result *r = d->r;
        if (r->outcome == API_OK && d->key_set && !b->out_error && !r->used_fallback &&
            r->content_bytes + r->reasoning_bytes > 0) { /* never an empty answer, nor the
                                                             fallback's */
            usage[n] = (struct store_usage){r->usage.prompt, r->usage.completion, r->usage.total,
                                            NULL};
            items[n] = (struct store_cache_put){
                d->key, STORE_COMPLETE, d->content, *d->reasoning ? d->reasoning : NULL,
                r->model[0] ? r->model : d->model, r->finish[0] ? r->finish : NULL,
                r->usage.present ? &usage[n] : NULL, 0};
            n++;
        }
    }
    if (n && store_cache_put_all(b->o->store, items, n) < 0)
        batch_store_failed(b); /* a refusal (too large, ...) is not a failure */
    else if (n) /* the WAL, as this commit left it, copied while requests are out */
        store_checkpoint_async(b->o->store);
    free(items);
    free(usage);
    for (size_t i = 0; i < b->n_done; i++) {
        struct batch_done *d = &b->done[i];
        net_result_free(d->r);
        free(d->content);
        free(d->reasoning);
        free(d->model);
        free(d->item.id);
    }
    b->n_done = b->n_written = b->done_bytes = 0;
    b->done_since = 0;
}

static void batch_events(struct batch *b)
{
    for (struct queue_event *e = queue_take(b->q), *next; e; e = next) {
        next = e->next;
        struct batch_slot *s = batch_find(b, e->req);
        if (e->type == QEV_WARN) {
            batch_clear_bar(b);
            fprintf(stderr, "tokterm: warning: %s\n", buf_str(&e->text)); /* ours, not a server's */
        } else if (!s || !e->req) {
            if (e->type == QEV_END)
                net_result_free(e->ptr);
        } else if (e->type == QEV_CONTENT) {
            buf_append(&s->content, e->text.data, e->text.len);
        } else if (e->type == QEV_REASONING) {
            buf_append(&s->reasoning, e->text.data, e->text.len);
        } else if (e->type == QEV_WAIT) {
            double now = util_now();
            if (!b->err_tty && e->num >= 5 && now >= b->wait_until) {
                /* off a terminal (a CI log) a long wait is said once, as it begins (until
                 * 2026-12 the run went quiet for its length) */
                fprintf(stderr, "tokterm batch: %s\n", buf_str(&e->text));
            }
            b->wait_until = now + e->num; /* pacing: shown on the progress bar */
        } else if (e->type == QEV_RETRY) {
            /* Another attempt follows: whatever this one sent is not the answer. */
            s->retries++;
            b->n_retries++;
            buf_reset(&s->content);
            buf_reset(&s->reasoning);
        } else if (e->type == QEV_END) {
            batch_finish(b, s, e->ptr);
        }
        queue_event_free(e);
    }
}

static void batch_cancel_all(struct batch *b)
{
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].req)
            net_cancel(b->net, b->slots[i].req);
}

/* ---- files ---- */

/* Open the input (a file, or "-" for stdin). Returns the fd, or -1 with err set. */
static int batch_open_input(const char *path, struct buf *err)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        buf_printf(err, "batch: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        buf_printf(err, "batch: %s is a directory", path);
        if (fd)
            close(fd);
        return -1;
    }
    return fd;
}

/* One line of an output file being resumed: 1 when it is a whole line (it ended with a
 * newline) whose outcome is "complete"; *key gets its id's key then. */
static int batch_resume_complete(const char *line, int whole, char key[BATCH_ID_KEY_MAX + 2])
{
    if (!whole)
        return 0; /* a half-written last line */
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    const cJSON *oc = cJSON_GetObjectItemCaseSensitive(o, "outcome");
    int complete = (cJSON_IsString(id) || cJSON_IsNumber(id)) && cJSON_IsString(oc) &&
                   strcmp(oc->valuestring, "complete") == 0;
    if (complete) {
        char *canon = cJSON_PrintUnformatted(id);
        if (canon)
            batch_id_key(canon, key);
        else
            complete = 0;
        cJSON_free(canon);
    }
    cJSON_Delete(o);
    return complete;
}

/* Read FILE line by line (memory: its longest line), collecting the complete ids into done
 * when done != NULL, copying the complete lines to out_fd when out_fd >= 0. Returns the number
 * of other non-empty lines (to drop), or -1 on a read error (errno). */
static long batch_resume_pass(const char *path, struct batch_set *done, int out_fd)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct batch_reader rd;
    batch_reader_init(&rd, fd, (size_t)-1 / 2);
    long dropped = 0;
    const char *line;
    size_t n;
    int tl, r, rc = 0;
    for (;;) {
        r = batch_line(&rd, &line, &n, &tl);
        if (r == 0) {
            if (batch_fill(&rd) < 0)
                break;
            continue;
        }
        if (r < 0)
            break;
        char key[BATCH_ID_KEY_MAX + 2];
        if (batch_resume_complete(line, rd.cur_nl, key)) {
            if (done)
                batch_set_add(done, key, 1);
            if (out_fd >= 0 && (util_write_all(out_fd, line, n) < 0 ||
                                util_write_all(out_fd, "\n", 1) < 0)) {
                rc = -1;
                break;
            }
        } else if (n > 0 || !rd.cur_nl)
            dropped++;
    }
    int e = rd.error ? rd.error : errno;
    if (rd.error)
        rc = -1;
    batch_reader_free(&rd);
    close(fd);
    errno = e;
    return rc < 0 ? -1 : dropped;
}

/* --resume: collect the ids FILE has complete into done, drop its other lines (rewriting it
 * through a temporary file), and open it for appending. Returns the fd, or -1 with err. FILE
 * is read a line at a time, twice when lines must be dropped: memory is its longest line. */
static int batch_open_resume(const char *path, struct batch_set *done, struct buf *err)
{
    long dropped = batch_resume_pass(path, done, -1);
    if (dropped < 0) {
        buf_printf(err, "batch: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (dropped) {
        struct stat sb;
        mode_t mode = stat(path, &sb) == 0 ? (sb.st_mode & 07777) : 0644;
        char *real = realpath(path, NULL); /* rewrite the file a symbolic link points to */
        const char *target = real ? real : path;
        char *tmp = xasprintf("%s.tmp-XXXXXX", target);
        int fd = mkstemp(tmp);
        int ok = fd >= 0 && fchmod(fd, mode) == 0 && batch_resume_pass(path, NULL, fd) >= 0 &&
                 fsync(fd) == 0;
        if (fd >= 0 && close(fd) != 0)
            ok = 0;
        if (!ok || rename(tmp, target) != 0) {
            buf_printf(err, "batch: cannot rewrite %s: %s", path, strerror(errno));
            if (fd >= 0)
                unlink(tmp);
            free(tmp);
            free(real);
            return -1;
        }
        free(tmp);
        free(real);
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        buf_printf(err, "batch: cannot open %s: %s", path, strerror(errno));
    return fd;
}

/* ---- the run ---- */

static int batch_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return strcmp(a, "-") != 0 && stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void batch_summary(struct batch *b, int interrupted)
{
    batch_clear_bar(b);
    if (b->seen_keys.n) {
        struct buf k = BUF_INIT;
        size_t shown = 0;
        for (size_t i = 0; i < b->seen_keys.cap && shown < BATCH_MAX_WARN_KEYS; i++)
            if (b->seen_keys.keys[i])
                buf_printf(&k, "%s\"%s\"", shown++ ? ", " : "", b->seen_keys.keys[i]);
        struct buf known = BUF_INIT;
        batch_known_fields(&known);
        fprintf(stderr, "tokterm batch: warning: ignored unknown field%s %s%s (known: %s)\n",
                b->seen_keys.n > 1 ? "s" : "", buf_str(&k),
                b->seen_keys.n > shown ? ", ..." : "", buf_str(&known));
        buf_free(&known);
        buf_free(&k);
    }
    if (b->store_error)
        fprintf(stderr, "tokterm batch: warning: the response cache failed: %s\n",
                b->store_error);
    double el = util_now() - b->t_start;
    size_t fin = b->n_ok + b->n_failed;
    struct buf s = BUF_INIT;
    if (interrupted && batch_todo(b))
        buf_printf(&s, "interrupted: %zu of %zu written (%zu complete, %zu failed), %zu "
                       "cancelled", fin, batch_todo(b), b->n_ok, b->n_failed, b->n_cancelled);
    else if (interrupted)
        buf_printf(&s, "interrupted: %zu written (%zu complete, %zu failed), %zu cancelled",
                   fin, b->n_ok, b->n_failed, b->n_cancelled);
    else
        buf_printf(&s, "%zu item%s: %zu complete, %zu failed", fin, fin == 1 ? "" : "s",
                   b->n_ok, b->n_failed);
    if (b->n_unwritten)
        buf_printf(&s, ", %zu answer%s not written", b->n_unwritten,
                   b->n_unwritten == 1 ? "" : "s");
    if (b->n_cached)
        buf_printf(&s, ", %zu from the cache", b->n_cached);
    if (b->n_skipped)
        buf_printf(&s, ", %zu skipped (complete in %s)", b->n_skipped, b->o->out);
    if (b->n_retries)
        buf_printf(&s, ", %zu retr%s", b->n_retries, b->n_retries == 1 ? "y" : "ies");
    /* retries are every attempt after the first, as in stats; those after a 429 are said
     * (mostly waits the server asked for, not paid from max_retries) */
    if (b->n_retries && b->n_limited)
        buf_printf(&s, " (%zu after a 429)", b->n_limited);
    buf_printf(&s, "; %.2f s, %.1f/s", el, el > 0 ? (double)fin / el : 0.0);
    fprintf(stderr, "tokterm batch: %s\n", buf_str(&s));
    if (interrupted && b->o->out)
        fprintf(stderr, "tokterm batch: to finish, run the same command with --resume\n");
    else if (interrupted)
        fprintf(stderr, "tokterm batch: to finish later, use --out FILE and --resume\n");
    buf_free(&s);
}

static void batch_remote_emit(void *ud, long line, const char *id, const struct net_result *r,
                              const char *content, const char *reasoning, const char *model)
{
    if (!r) { /* the answers are written from here: --out is emptied now */
        batch_out_claim(ud);
        return;
    }
    struct batch_item it;
    memset(&it, 0, sizeof it);
    it.line = line;
    it.id = (char *)id;
    batch_emit(ud, &it, r, 0, content, reasoning, model, 0);
}

/* --remote: read the whole input (bad lines get their error lines in the spool, requests go
 * into the provider's batches), then wait for the batches and write every line in input
 * order. Returns the exit status; 2 with err set when the input or the provider is refused. */
static int batch_remote(struct batch *b, struct loop *lp, struct buf *err)
{
    /* A batch belongs to the key that made it: a pool's first key, the same every run. */
    const char *key = b->key ? b->key : b->o->n_pool ? b->o->pool_values[0] : NULL;
    b->rj = remote_job_new(b->conf, key, b->o->store, b->o->remote_poll, err);
    if (!b->rj)
        return 2;
    if (!b->o->store)
        fprintf(stderr, "tokterm batch: warning: no store (--incognito?): a run stopped now "
                        "cannot pick its batch up again\n");
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    const char *nerr = NULL;
    if (loop_init(lp, sigs, (int)TT_ARRAY_LEN(sigs), 1, &nerr) < 0) {
        fprintf(stderr, "tokterm batch: %s: %s\n", nerr, strerror(errno));
        return 1;
    }
    b->err_tty = isatty(2);
    b->t_start = util_now();
    int out_fd = b->out_fd, out_tty = isatty(b->out_fd);
    b->out_fd = remote_job_spool(b->rj);
    b->out_tty = 0;
    b->rj_collect = 1;
    while (!b->refused && !b->stopping && !loop_signalled(lp)) {
        const char *text;
        size_t len;
        int too_long;
        int r = batch_line(&b->rd, &text, &len, &too_long);
        if (r == 0) {
            if (batch_fill(&b->rd) < 0)
                break;
            continue;
        }
        if (r < 0) {
            batch_input_end(b, err);
            break;
        }
        batch_take(b, text, len, too_long, err);
    }
    b->rj_collect = 0;
    b->out_fd = out_fd;
    b->out_tty = out_tty;
    if (b->refused)
        return 2;
    int code;
    if (b->rd.error) {
        fprintf(stderr, "tokterm batch: reading %s: %s (nothing was sent)\n", b->in_name,
                strerror(b->rd.error));
        code = 2;
    } else if (b->out_error) {
        code = b->out_error; /* the spool */
    } else if (b->rj_err.len) {
        fprintf(stderr, "tokterm batch: %s\n", buf_str(&b->rj_err));
        code = 1;
    } else if (loop_signalled(lp)) {
        fprintf(stderr, "tokterm batch: interrupted while reading the input\n");
        code = 130;
    } else {
        struct buf rerr = BUF_INIT;
        code = remote_job_run(b->rj, lp, b->out_fd, b->err_tty, batch_remote_emit, b, &rerr);
        if ((code == 1 || code == 3 || code == 4) && rerr.len)
            fprintf(stderr, "tokterm batch: %s\n", buf_str(&rerr));
        buf_free(&rerr);
        if (code == 0 && !b->out_error) {
            batch_summary(b, 0);
            code = b->n_failed ? 3 : 0;
        } else if (b->out_error)
            code = b->out_error;
    }
    loop_end(lp);
    return code;
}

int batch_run(struct conf *conf, char *key, const struct batch_opts *o)
{
    struct batch b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.conf = conf;
    b.key = key;
    b.out_fd = 1;
    b.out_claim = -1;
    b.total = -1;
    b.rd.fd = -1;
    b.in_name = !o->in ? "" : strcmp(o->in, "-") == 0 ? "stdin" : o->in;
    struct buf err = BUF_INIT;
    struct batch_set done = {0};
    struct loop lp = {.pipe = {-1, -1}};
    int code = 2;

    if (o->remote_status || o->remote_cancel) {
        code = remote_status(conf, key ? key : o->n_pool ? o->pool_values[0] : NULL,
                             o->remote_cancel ? o->remote_cancel : o->remote_status,
                             o->remote_cancel != NULL);
        goto out;
    }
    if (o->out && batch_same_file(o->in, o->out)) {
        buf_printf(&err, "batch: --out %s is the input file", o->out);
        goto fail;
    }
    int in_fd = batch_open_input(o->in, &err);
    if (in_fd < 0)
        goto fail;
    /* The input is read as the run goes, a line at a time: memory holds the lines in flight
     * and the answers not yet written, whatever the size of the input. */
    batch_reader_init(&b.rd, in_fd, BATCH_MAX_LINE);
    if (o->out && o->resume) {
        b.out_fd = batch_open_resume(o->out, &done, &err);
        b.done_ids = &done;
    } else if (o->out) {
        b.out_fd = b.out_claim = open(o->out, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (b.out_fd < 0)
            buf_printf(&err, "batch: cannot write %s: %s", o->out, strerror(errno));
    }
    if (b.out_fd < 0) {
        code = 1;
        goto fail;
    }

    if (o->remote) {
        code = batch_remote(&b, &lp, &err);
        if (code == 2 && err.len)
            goto fail;
        goto out;
    }
    b.trace_server = conf_host(conf);
    const char *nerr = NULL;
    b.q = queue_new();
    if (b.q)
        b.net = net_start(b.q, 1, &nerr); /* a failure is the batch's, not each line's */
    if (!b.q || !b.net) {
        buf_printf(&err, "batch: %s", nerr ? nerr : strerror(errno));
        code = 1;
        goto fail;
    }
    if (o->metrics_listen) {
        int port = 0;
        b.metrics = metrics_new();
        b.metrics_srv = metrics_listen(b.metrics, o->metrics_listen, &port, &err);
        if (!b.metrics_srv) {
            code = 2;
            goto fail;
        }
        b.provider = conf_host(conf);
        char *cdir = conf_dir("config");
        b.prices_file = xasprintf("%s/prices.tsv", cdir);
        free(cdir);
        fprintf(stderr, "tokterm batch: metrics at http://%s/metrics (port %d)\n",
                o->metrics_listen, port);
    }
    /* Twice the concurrency is handed to the network thread, which keeps `concurrency` on the
     * wire: when one ends, the next leaves from that thread at once instead of after a round
     * trip through this loop. */
    int concurrency = batch_fit_files(o->concurrency);
    b.n_slots = 2 * concurrency;
    b.slots = xcalloc((size_t)b.n_slots, sizeof *b.slots);
    net_set_max_active(b.net, concurrency);
    b.out_tty = isatty(b.out_fd);
    b.err_tty = isatty(2);
    if (b.err_tty) /* the bar's total: a file's non-blank lines (a pipe's are not known) */
        b.total = batch_count_lines(in_fd);
    b.t_start = util_now();

    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    if (loop_init(&lp, sigs, (int)TT_ARRAY_LEN(sigs), 0, &nerr) < 0) {
        buf_printf(&err, "batch: %s: %s", nerr, strerror(errno));
        code = 1;
        goto fail;
    }

    int interrupted = 0, hard_stop = 0;
    for (;;) {
        int need_input = 0;
        while (!b.stopping && !b.refused && !b.in_done && !loop_signalled(&lp) &&
               b.inflight < b.n_slots) {
            const char *text;
            size_t len;
            int too_long;
            int r = batch_line(&b.rd, &text, &len, &too_long);
            if (r == 0) {
                need_input = 1;
                break;
            }
            if (r < 0)
                batch_input_end(&b, &err);
            else
                batch_take(&b, text, len, too_long, &err);
            batch_progress(&b, 0);
        }
        if (b.refused)
            break; /* nothing was sent nor written */
        batch_done_flush(&b, 0);
        if (b.out_error && b.inflight && !interrupted) {
            batch_cancel_all(&b);
            interrupted = -1; /* cancelled because the output is gone; not a user stop */
        }
        if (b.inflight == 0 && (b.stopping || loop_signalled(&lp) || b.in_done))
            break;
        int fds[2] = {queue_fd(b.q), b.rd.fd};
        if (loop_wait(&lp, fds, need_input ? 2 : 1,
                      b.err_tty ? (int)(BATCH_DRAW_INTERVAL * 1000)
                      : b.n_done ? (int)(BATCH_CACHE_DELAY * 1000) : -1) < 0)
            break;
        if (need_input && loop_ready(&lp, 1) && batch_fill(&b.rd) < 0)
            b.in_done = 1; /* said at the end; what was read is done */
        if (loop_signal(&lp)) {
            while (loop_signal(&lp))
                ; /* signals that came together are one */
            if (interrupted) {
                hard_stop = 1; /* a second signal: stop waiting for the cancellations */
                break;
            }
            interrupted = 1;
            b.stopping = 1;
            batch_cancel_all(&b);
        }
        batch_events(&b);
        batch_progress(&b, 0);
    }
    if (b.refused) {
        net_stop(b.net);
        b.net = NULL;
        loop_end(&lp);
        goto fail;
    }
    batch_done_flush(&b, 1); /* what finished before a second signal or a failed poll, and
                                what is not cached yet */
    if (hard_stop)
        b.n_cancelled += (size_t)b.inflight;
    /* Stop the network thread before the handlers go: a cancelled transfer must not outlive
     * the run, and a signal now still only sets the flag. */
    net_stop(b.net);
    b.net = NULL;
    loop_end(&lp);

    /* Keep the quota state between runs, so the next one starts informed: what the server
     * reported, or that it answered without reporting any limit (no slow start next time). */
    char answered[64];
    if (!b.quota_line && b.n_ok > b.n_cached &&
        ratelimit_answered_line(answered, sizeof answered) < (int)sizeof answered)
        request_quota_save(o->store, conf, answered);
    else
        request_quota_save(o->store, conf, b.quota_line);
    if (!b.refused)
        batch_out_claim(&b); /* a run with no line to write leaves it empty */
    if (b.metrics_srv && o->metrics_linger > 0)
        metrics_linger(b.metrics_srv, o->metrics_linger);
    if (b.out_error != 141)
        batch_summary(&b, interrupted > 0);
    else
        batch_clear_bar(&b);
    code = b.out_error ? b.out_error : interrupted > 0 ? 130 : b.n_failed ? 3 : 0;
    if (b.rd.error && !b.out_error && interrupted <= 0) {
        fprintf(stderr, "tokterm batch: reading %s: %s (the lines before were done)\n",
                b.in_name, strerror(b.rd.error));
        code = 2;
    }
    goto out;
fail:
    fprintf(stderr, "tokterm %s\n", buf_str(&err));
out:
    if (b.net)
        net_stop(b.net);
    metrics_server_stop(b.metrics_srv);
    metrics_free(b.metrics);
    free(b.provider);
    for (size_t i = 0; i < b.n_prices; i++)
        free(b.prices[i].model);
    free(b.prices);
    free(b.prices_file);
    free(b.trace_server);
    otlp_shutdown(); /* the last spans sent before the summary's exit */
    if (b.q)
        queue_free(b.q, net_result_free);
    for (int i = 0; i < b.n_slots; i++) {
        free(b.slots[i].model);
        free(b.slots[i].item.id);
        buf_free(&b.slots[i].content);
        buf_free(&b.slots[i].reasoning);
    }
    free(b.slots);
    for (size_t i = 0; i < b.n_done; i++)
        free(b.done[i].item.id);
    free(b.done);
    for (size_t i = 0; i < TT_ARRAY_LEN(b.ctxs); i++) {
        context_free(b.ctxs[i].c);
        free(b.ctxs[i].enc);
    }
    batch_held_free(&b);
    if (b.rd.fd > 0)
        close(b.rd.fd);
    batch_reader_free(&b.rd);
    free(b.quota_line);
    free(b.store_error);
    batch_set_free(&b.ids);
    batch_set_free(&b.seen_keys);
    batch_set_free(&done);
    buf_free(&b.line);
    buf_free(&err);
    remote_job_free(b.rj);
    buf_free(&b.rj_err);
    if (b.out_fd > 1)
        close(b.out_fd);
    loop_end(&lp);
    util_free_secret(key);
    return code;
}
