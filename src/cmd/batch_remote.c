/* batch_remote.c - `tokterm batch --remote`: the provider's Batch API (see batch_remote.h). */
#include "config.h"
#include "cmd/batch_remote.h"
#include "cmd/batch.h"
#include "core/models.h"
#include "net/probe.h"
#include "proto/api.h"
#include "proto/dialect.h"
#include "store/store.h"
#include "base/sha256.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define REMOTE_TIMEOUT_MS 300000L       /* one upload or download at most */
#define REMOTE_REPLY_MAX (4u << 20)     /* a JSON reply kept (a batch object is small) */
#define REMOTE_CHUNK 65536
#define REMOTE_TRIES 20         /* looks in a row that may fail (network, 429, 5xx) before the
                                   run gives up (the batch runs on: the same command resumes) */
#define REMOTE_BACKOFF_MAX 300.0 /* seconds: the wait after failures doubles up to this */
#define REMOTE_BOUNDARY "tokterm-batch-7f3a9c1e5b2d4680" /* no JSON line holds "\r\n--" */

enum remote_kind { REMOTE_OPENAI, REMOTE_ANTHROPIC };

struct remote_part {
    unsigned char hash[STORE_REMOTE_HASH_LEN];
    char id[160];          /* the batch's id ("" until created) */
    char status[32];       /* its last state, as the provider words it */
    long total, done, failed;
    int terminal, resumed;
    char *out_file, *err_file; /* OpenAI's files; Anthropic's results URL is in out_file */
    char *error;           /* a failed batch's first error */
    cJSON *errors;         /* its errors.data: {code, message, line} per refused upload line */
};

struct remote_item {
    long line;
    char *id;              /* NULL for a local line */
    const char *model;     /* one of the job's models; NULL for a local line */
    off_t off;             /* where its line is in the spool */
    long len;              /* -1: no line (yet) */
    int part;              /* request: the part it went in; -1: a local line */
    long pos;              /* request: its line in the part's upload (1-based) */
};

struct remote_job {
    const struct conf *c;
    const char *key;
    struct store *st;
    enum remote_kind kind;
    const struct dialect *dl;
    const char *endpoint;  /* OpenAI: the url of each line */
    char *base;            /* base URL, no trailing slash */
    char *shown_base;      /* the same without credentials (the store's) */
    double poll_s;
    size_t max_req, max_bytes;
    int spool;
    struct remote_item *items;
    size_t n_items, cap_items;
    struct remote_part *parts;
    size_t n_parts, cap_parts;
    char **models;         /* the models the lines name, each once */
    size_t n_models, cap_models, last_model;
    struct buf cur;        /* the part being gathered: the body to send, framing and all */
    size_t cur_start;      /* where its requests start (after the multipart head) */
    size_t cur_n;
    struct sha256 cur_hash;
    struct loop *lp;       /* signals end a wait or a transfer */
    long last_status;      /* HTTP status of the last request (0: none arrived) */
    int drawn;
};

/* ---- HTTP ---- */

static int remote_should_stop(void *ud)
{
    const struct remote_job *j = ud;
    return j && j->lp && loop_signalled(j->lp);
}

struct remote_sink {
    int fd;
    long status;
    struct buf err;        /* a non-2xx body, kept for its message */
    int failed;            /* a write failed */
};

static int remote_on_data(void *ud, const struct buf *headers, const char *p, size_t n)
{
    struct remote_sink *s = ud;
    if (!s->status) {
        const char *h = buf_str(headers);
        const char *sp = strchr(h, ' ');
        s->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    }
    if (s->status < 200 || s->status > 299) {
        if (s->err.len < REMOTE_REPLY_MAX)
            buf_append(&s->err, p, n);
        return 0;
    }
    if (util_write_all(s->fd, p, n) < 0) {
        s->failed = 1;
        return 1;
    }
    return 0;
}

/* One request to url: method (NULL: GET, or POST with a body), body of ctype. The JSON reply
 * into *out (caller deletes), or with sink_fd >= 0 the reply's bytes appended to that file.
 * Returns 0, or 3 (HTTP error), 4 (network), 130 (a signal) with err set. */
static int remote_http(struct remote_job *j, const char *method, const char *url,
                       const char *body, size_t len, const char *ctype, cJSON **out,
                       int sink_fd, struct buf *err)
{
    const char *hdr[4 + DIALECT_MAX_HEADERS + 2];
    char *auth = models_headers(j->c, j->key, hdr);
    char *ct = NULL;
    if (ctype) {
        size_t nh = 0;
        while (hdr[nh])
            nh++;
        ct = xasprintf("Content-Type: %s", ctype);
        hdr[nh++] = ct;
        hdr[nh] = NULL;
    }
    struct remote_sink sink = {sink_fd, 0, BUF_INIT, 0};
    struct net_probe_request rq = {
        .url = url, .headers = hdr, .user_agent = PACKAGE_NAME "/" PACKAGE_VERSION,
        .timeout_ms = REMOTE_TIMEOUT_MS,
        .connect_timeout_ms = j->c->connect_timeout_ms > 0 ? j->c->connect_timeout_ms : 30000,
        .cacert = j->c->cacert, .insecure = j->c->insecure, .body_max = REMOTE_REPLY_MAX,
        .method = method, .body = body, .body_len = len,
        .on_data = sink_fd >= 0 ? remote_on_data : NULL, .should_stop = remote_should_stop,
        .ud = sink_fd >= 0 ? (void *)&sink : (void *)j};
    struct net_probe_result res;
    memset(&res, 0, sizeof res);
    int rc = net_probe(&rq, &res);
    util_free_secret(auth);
    free(ct);
    char *shown = models_display_url(url);
    int code = 0;
    const struct buf *reply = sink_fd >= 0 ? &sink.err : &res.body;
    long status = res.status;
    j->last_status = rc < 0 || res.failure != NET_PROBE_OK ? 0 : status;
    if (j->lp && loop_signalled(j->lp)) {
        buf_printf(err, "interrupted during %s %s", method ? method : "GET", shown);
        code = 130;
    } else if (rc < 0 || res.failure != NET_PROBE_OK) {
        buf_printf(err, "%s %s: %s", method ? method : "GET", shown,
                   res.why[0] ? res.why : "no answer");
        code = 4;
    } else if (status < 200 || status > 299) {
        struct buf msg = BUF_INIT;
        char ecode[64] = "";
        j->dl->error_message(status, "application/json", reply->data ? reply->data : "",
                             reply->len, &msg, ecode, sizeof ecode);
        buf_printf(err, "%s %s: %s", method ? method : "GET", shown, buf_str(&msg));
        buf_free(&msg);
        code = 3;
    } else if (sink.failed) {
        buf_printf(err, "writing the spool file: %s", strerror(errno));
        code = 1;
    } else if (out) {
        *out = cJSON_ParseWithLength(res.body.data ? res.body.data : "", res.body.len);
        if (!cJSON_IsObject(*out)) {
            cJSON_Delete(*out);
            *out = NULL;
            buf_printf(err, "%s %s: the answer is not a JSON object", method ? method : "GET",
                       shown);
            code = 3;
        }
    }
    util_redact(err->data, j->key);
    free(shown);
    buf_free(&sink.err);
    net_probe_result_free(&res);
    return code;
}

/* The base URL, path, then id and tail when id is given. */
static char *remote_url(const struct remote_job *j, const char *path, const char *id,
                        const char *tail)
{
    return xasprintf("%s%s%s%s%s", j->base, path, id ? "/" : "", id ? id : "",
                     id && tail ? tail : "");
}

static const char *remote_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static long remote_num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? util_json_long(v->valuedouble, 0) : 0;
}

static void remote_set(char **dst, const char *v)
{
    free(*dst);
    *dst = v && *v ? xstrdup(v) : NULL;
}

/* A batch object into p: its id, state, counts, files. */
static void remote_read_batch(const struct remote_job *j, struct remote_part *p, const cJSON *o)
{
    const char *id = remote_str(o, "id");
    if (id)
        snprintf(p->id, sizeof p->id, "%s", id);
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(o, "request_counts");
    if (j->kind == REMOTE_ANTHROPIC) {
        const char *s = remote_str(o, "processing_status");
        snprintf(p->status, sizeof p->status, "%s", s ? s : "?");
        long ok = remote_num(rc, "succeeded"), bad = remote_num(rc, "errored") +
                  remote_num(rc, "canceled") + remote_num(rc, "expired");
        p->total = ok + bad + remote_num(rc, "processing");
        p->done = ok + bad;
        p->failed = bad;
        p->terminal = s && strcmp(s, "ended") == 0;
        remote_set(&p->out_file, remote_str(o, "results_url"));
        return;
    }
    const char *s = remote_str(o, "status");
    snprintf(p->status, sizeof p->status, "%s", s ? s : "?");
    p->total = remote_num(rc, "total");
    p->failed = remote_num(rc, "failed");
    p->done = remote_num(rc, "completed") + p->failed;
    static const char *const ends[] = {"completed", "failed", "expired", "cancelled"};
    p->terminal = 0;
    for (size_t i = 0; s && i < TT_ARRAY_LEN(ends); i++)
        p->terminal |= strcmp(s, ends[i]) == 0;
    remote_set(&p->out_file, remote_str(o, "output_file_id"));
    remote_set(&p->err_file, remote_str(o, "error_file_id"));
    const cJSON *errs = cJSON_GetObjectItemCaseSensitive(o, "errors");
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(errs, "data"), 0);
    if (first) {
        cJSON_Delete(p->errors);
        p->errors = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(errs, "data"), 1);
        const char *m = remote_str(first, "message");
        long line = remote_num(first, "line");
        free(p->error);
        p->error = line ? xasprintf("%s (line %ld of the upload)", m ? m : "invalid", line)
                        : xstrdup(m ? m : "invalid");
    }
}

/* GET (or cancel) batch id into p. Returns as remote_http. */
static int remote_get(struct remote_job *j, struct remote_part *p, const char *id, int cancel,
                      struct buf *err)
{
    char *url = remote_url(j, j->kind == REMOTE_ANTHROPIC ? "/messages/batches" : "/batches",
                           id, cancel ? "/cancel" : NULL);
    cJSON *o = NULL;
    int rc = remote_http(j, cancel ? "POST" : NULL, url, cancel ? "" : NULL, 0, NULL, &o, -1,
                         err);
    if (rc == 0)
        remote_read_batch(j, p, o);
    cJSON_Delete(o);
    free(url);
    return rc;
}

/* ---- the job ---- */

static size_t remote_env_limit(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
    return v && *v && !*end && n > 0 && n < dflt ? (size_t)n : dflt;
}

struct remote_job *remote_job_new(const struct conf *c, const char *key, struct store *st,
                                  double poll_s, struct buf *err)
{
    const struct dialect *dl = conf_dialect(c);
    enum remote_kind kind;
    const char *endpoint = NULL;
    if (dl == &dialect_anthropic) {
        kind = REMOTE_ANTHROPIC;
    } else if (dl == &dialect_openai || dl == &dialect_responses) {
        kind = REMOTE_OPENAI;
        endpoint = dl == &dialect_responses ? "/v1/responses" : "/v1/chat/completions";
    } else {
        buf_printf(err, "batch: --remote is not supported for api = %s (the Batch APIs of "
                        "OpenAI and Anthropic are); run the batch locally without --remote",
                   dl->name);
        return NULL;
    }
    struct remote_job *j = xcalloc(1, sizeof *j);
    j->c = c;
    j->key = key;
    j->st = st;
    j->kind = kind;
    j->dl = dl;
    j->endpoint = endpoint;
    j->base = xstrdup(c->base_url && *c->base_url ? c->base_url : dl->base_url);
    size_t bl = strlen(j->base);
    while (bl && j->base[bl - 1] == '/')
        j->base[--bl] = '\0';
    j->shown_base = models_display_url(j->base);
    j->poll_s = poll_s > 0 ? poll_s : REMOTE_POLL_DEFAULT;
    j->max_req = remote_env_limit("TOKTERM_REMOTE_MAX_REQUESTS",
                                  kind == REMOTE_ANTHROPIC ? 100000 : 50000);
    j->max_bytes = remote_env_limit("TOKTERM_REMOTE_MAX_BYTES",
                                    kind == REMOTE_ANTHROPIC ? (size_t)256 << 20
                                                             : (size_t)200 << 20);
    const char *tmp = getenv("TMPDIR");
    char *path = xasprintf("%s/tokterm-remote-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    j->spool = mkstemp(path);
    if (j->spool >= 0) {
        unlink(path);
        int fl = fcntl(j->spool, F_GETFL);
        (void)fcntl(j->spool, F_SETFL, fl | O_APPEND);
        (void)fcntl(j->spool, F_SETFD, FD_CLOEXEC);
    } else {
        buf_printf(err, "batch: cannot make a spool file in %s: %s", tmp && *tmp ? tmp : "/tmp",
                   strerror(errno));
        free(path);
        remote_job_free(j);
        return NULL;
    }
    free(path);
    return j;
}

int remote_job_spool(const struct remote_job *j)
{
    return j->spool;
}

static struct remote_item *remote_item_new(struct remote_job *j, long line)
{
    XGROW(j->items, j->n_items + 1, j->cap_items);
    struct remote_item *it = &j->items[j->n_items++];
    memset(it, 0, sizeof *it);
    it->line = line;
    it->len = -1;
    it->part = -1;
    return it;
}

void remote_job_note(struct remote_job *j, long line, off_t off, size_t len)
{
    struct remote_item *it = remote_item_new(j, line);
    it->off = off;
    it->len = (long)len;
}

/* A batch was not made of the file uploaded as fid: delete the file, so that a failed run
 * leaves nothing on the provider's storage; if that fails too, err says what is left. */
static void remote_drop_upload(struct remote_job *j, const char *fid, struct buf *err)
{
    char *url = remote_url(j, "/files", fid, NULL);
    struct buf derr = BUF_INIT;
    cJSON *o = NULL;
    if (remote_http(j, "DELETE", url, NULL, 0, NULL, &o, -1, &derr) != 0)
        buf_printf(err, "; the uploaded file %s is left on the server (%s)", fid,
                   buf_str(&derr));
    cJSON_Delete(o);
    buf_free(&derr);
    free(url);
}

/* Upload the gathered part (or find the batch it already is) and start a new one. */
static int remote_flush(struct remote_job *j, struct buf *err)
{
    if (!j->cur_n)
        return 0;
    XGROW(j->parts, j->n_parts + 1, j->cap_parts);
    struct remote_part *p = &j->parts[j->n_parts++];
    memset(p, 0, sizeof *p);
    /* what the requests are and where they go: the hash the store knows the batch by */
    sha256_update(&j->cur_hash, j->shown_base, strlen(j->shown_base) + 1);
    sha256_update(&j->cur_hash, j->dl->name, strlen(j->dl->name) + 1);
    sha256_final(&j->cur_hash, p->hash);
    p->total = (long)j->cur_n;
    int rc = 0;
    char found[sizeof p->id] = "";
    if (j->st && store_remote_get(j->st, p->hash, found, sizeof found) == 0 && *found) {
        struct buf gerr = BUF_INIT;
        rc = remote_get(j, p, found, 0, &gerr);
        if (rc == 0) {
            p->resumed = 1;
            fprintf(stderr, "tokterm batch: picking up batch %s (%ld request%s), created by an "
                            "earlier run of these requests\n", p->id, p->total,
                    util_plural(p->total));
        } else if (rc == 3) { /* gone (deleted, another account): a new one */
            fprintf(stderr, "tokterm batch: warning: batch %s of an earlier run is not there "
                            "(%s); creating a new one\n", found, buf_str(&gerr));
            rc = 0;
        } else
            buf_append(err, gerr.data ? gerr.data : "", gerr.len);
        buf_free(&gerr);
    }
    if (rc == 0 && !p->resumed) {
        cJSON *o = NULL;
        if (j->kind == REMOTE_ANTHROPIC) {
            buf_appends(&j->cur, "]}");
            char *url = remote_url(j, "/messages/batches", NULL, NULL);
            rc = remote_http(j, "POST", url, j->cur.data, j->cur.len, "application/json", &o,
                             -1, err);
            free(url);
        } else {
            buf_appends(&j->cur, "\r\n--" REMOTE_BOUNDARY "--\r\n");
            char *url = remote_url(j, "/files", NULL, NULL);
            rc = remote_http(j, "POST", url, j->cur.data, j->cur.len,
                             "multipart/form-data; boundary=" REMOTE_BOUNDARY, &o, -1, err);
            free(url);
            buf_free(&j->cur);
            const char *fid = rc == 0 ? remote_str(o, "id") : NULL;
            char *uploaded = fid ? xstrdup(fid) : NULL;
            if (rc == 0 && !fid) {
                buf_appends(err, "POST /files: the answer has no file id");
                rc = 3;
            }
            if (rc == 0) {
                cJSON *req = cJSON_CreateObject();
                cJSON_AddStringToObject(req, "input_file_id", fid);
                cJSON_AddStringToObject(req, "endpoint", j->endpoint);
                cJSON_AddStringToObject(req, "completion_window", "24h");
                char *body = cJSON_PrintUnformatted(req);
                cJSON_Delete(req);
                cJSON_Delete(o);
                o = NULL;
                url = remote_url(j, "/batches", NULL, NULL);
                rc = remote_http(j, "POST", url, body, strlen(body), "application/json", &o,
                                 -1, err);
                free(url);
                cJSON_free(body);
                if (rc != 0 && rc != 130)
                    remote_drop_upload(j, uploaded, err);
            }
            free(uploaded);
        }
        if (rc == 0) {
            remote_read_batch(j, p, o);
            if (!p->id[0]) {
                buf_appends(err, "the provider's answer names no batch id");
                rc = 3;
            }
        }
        cJSON_Delete(o);
        if (rc == 0 && j->st &&
            store_remote_put(j->st, p->hash, j->dl->name, j->shown_base, p->id, p->total) != 0)
            fprintf(stderr, "tokterm batch: warning: %s: running it again will not find batch "
                            "%s\n", store_error(j->st), p->id);
        if (rc == 0)
            fprintf(stderr, "tokterm batch: created batch %s (%ld request%s)\n", p->id,
                    p->total, util_plural(p->total));
    }
    buf_free(&j->cur);
    j->cur_n = 0;
    if (rc != 0) { /* not made: forget it */
        free(p->out_file);
        free(p->err_file);
        free(p->error);
        cJSON_Delete(p->errors);
        j->n_parts--;
    }
    return rc;
}

/* model, kept once for all the lines that name it (most name one). */
static const char *remote_model(struct remote_job *j, const char *model)
{
    if (j->n_models && strcmp(j->models[j->last_model], model) == 0)
        return j->models[j->last_model];
    for (size_t i = 0; i < j->n_models; i++)
        if (strcmp(j->models[i], model) == 0)
            return j->models[j->last_model = i];
    XGROW(j->models, j->n_models + 1, j->cap_models);
    j->models[j->n_models] = xstrdup(model);
    j->last_model = j->n_models;
    return j->models[j->n_models++];
}

int remote_job_add(struct remote_job *j, long line, const char *id, const char *model,
                   const char *body, struct buf *err)
{
    cJSON *b = cJSON_Parse(body);
    if (!b) {
        buf_appends(err, "batch: a request body is not JSON");
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(b, "stream"); /* a batch answers whole */
    cJSON_DeleteItemFromObjectCaseSensitive(b, "stream_options");
    char cid[32];
    snprintf(cid, sizeof cid, "tt-%zu", j->n_items);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "custom_id", cid);
    if (j->kind == REMOTE_ANTHROPIC) {
        cJSON_AddItemToObject(o, "params", b);
    } else {
        cJSON_AddStringToObject(o, "method", "POST");
        cJSON_AddStringToObject(o, "url", j->endpoint);
        cJSON_AddItemToObject(o, "body", b);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    size_t n = strlen(text);
    size_t frame = j->kind == REMOTE_ANTHROPIC ? 16 : 0; /* {"requests":[ ]} */
    if (j->cur_n && (j->cur_n + 1 > j->max_req ||
                     j->cur.len - j->cur_start + n + 1 + frame > j->max_bytes)) {
        int rc = remote_flush(j, err);
        if (rc) {
            cJSON_free(text);
            return rc;
        }
    }
    if (!j->cur_n) {
        sha256_init(&j->cur_hash);
        if (j->kind == REMOTE_ANTHROPIC)
            buf_appends(&j->cur, "{\"requests\":[");
        else /* the upload's multipart head: the requests are sent from where they are */
            buf_appends(&j->cur, "--" REMOTE_BOUNDARY "\r\nContent-Disposition: form-data; "
                                 "name=\"purpose\"\r\n\r\nbatch\r\n--" REMOTE_BOUNDARY
                                 "\r\nContent-Disposition: form-data; name=\"file\"; "
                                 "filename=\"tokterm-batch.jsonl\"\r\nContent-Type: "
                                 "application/jsonl\r\n\r\n");
        j->cur_start = j->cur.len;
    } else if (j->kind == REMOTE_ANTHROPIC)
        buf_appendc(&j->cur, ',');
    buf_append(&j->cur, text, n);
    if (j->kind == REMOTE_OPENAI)
        buf_appendc(&j->cur, '\n');
    sha256_update(&j->cur_hash, text, n + 1);
    cJSON_free(text);
    j->cur_n++;
    struct remote_item *it = remote_item_new(j, line);
    it->id = xstrdup(id);
    it->model = remote_model(j, model);
    it->part = (int)j->n_parts;
    it->pos = (long)j->cur_n;
    return 0;
}

/* ---- progress ---- */

static void remote_clear(struct remote_job *j)
{
    if (j->drawn) {
        (void)util_write_all(2, "\r\033[K", 4);
        j->drawn = 0;
    }
}

/* The state of every batch: a bar on a terminal, a line when it changed otherwise. */
static void remote_progress(struct remote_job *j, int tty, double t0, long done0, double t_done0,
                            struct buf *last)
{
    long total = 0, done = 0, failed = 0;
    const char *status = NULL;
    int mixed = 0;
    for (size_t i = 0; i < j->n_parts; i++) {
        struct remote_part *p = &j->parts[i];
        total += p->total;
        done += p->done;
        failed += p->failed;
        if (status && strcmp(status, p->status) != 0)
            mixed = 1;
        if (!status || (!p->terminal && mixed))
            status = p->status;
    }
    char what[200];
    if (j->n_parts == 1)
        snprintf(what, sizeof what, "%s %s", j->parts[0].id, status ? status : "");
    else
        snprintf(what, sizeof what, "%zu batches %s", j->n_parts,
                 mixed ? "(several states)" : status ? status : "");
    double now = util_now();
    char stats[320];
    if (tty) {
        char eta[32];
        double rate = done > done0 && now > t_done0 ? (double)(done - done0) / (now - t_done0)
                                                    : 0;
        batch_fmt_time(eta, sizeof eta, rate > 0 ? (double)(total - done) / rate : -1);
        char el[32];
        batch_fmt_time(el, sizeof el, now - t0);
        snprintf(stats, sizeof stats, " %ld/%ld  failed %ld  %s  %s  ETA %s", done, total,
                 failed, what, el, eta);
        batch_draw_bar((size_t)done, (size_t)total, stats);
        j->drawn = 1;
        return;
    }
    snprintf(stats, sizeof stats, "%s: %ld/%ld done, %ld failed", what, done, total, failed);
    if (strcmp(buf_str(last), stats) != 0) {
        fprintf(stderr, "tokterm batch: %s\n", stats);
        buf_reset(last);
        buf_appends(last, stats);
    }
}

/* ---- results ---- */

/* Read len bytes of the spool at off into b (NUL-terminated). */
static int remote_pread(const struct remote_job *j, off_t off, size_t len, struct buf *b)
{
    buf_reset(b);
    buf_reserve(b, len + 1);
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(j->spool, b->data + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    b->len = len;
    b->data[len] = '\0';
    return 0;
}

/* Index the lines of the spool in [from, to): each names its item by custom_id "tt-N". */
static void remote_index(struct remote_job *j, size_t part, off_t from, off_t to)
{
    struct buf line = BUF_INIT;
    char *chunk = xmalloc(REMOTE_CHUNK);
    off_t start = from, at = from;
    while (at < to) {
        size_t want = (size_t)(to - at) < REMOTE_CHUNK ? (size_t)(to - at) : REMOTE_CHUNK;
        ssize_t n = pread(j->spool, chunk, want, at);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n')
                continue;
            off_t end = at + i;
            if (end > start && remote_pread(j, start, (size_t)(end - start), &line) == 0) {
                cJSON *o = cJSON_ParseWithLength(line.data, line.len);
                const char *cid = remote_str(o, "custom_id");
                char *e;
                unsigned long k = cid && strncmp(cid, "tt-", 3) == 0
                                      ? strtoul(cid + 3, &e, 10) : (unsigned long)-1;
                if (k < j->n_items && cid[3] && !*e && j->items[k].part == (int)part) {
                    j->items[k].off = start;
                    j->items[k].len = (long)(end - start);
                }
                cJSON_Delete(o);
            }
            start = end + 1;
        }
        at += n;
    }
    free(chunk);
    buf_free(&line);
}

/* The length of url's "scheme://host:port". */
static size_t remote_origin_len(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    return (size_t)(p - url) + strcspn(p, "/?#");
}

/* Download a part's files (or results) into the spool and index them. */
static int remote_download(struct remote_job *j, size_t pi, struct buf *err)
{
    struct remote_part *p = &j->parts[pi];
    const char *files[2] = {p->out_file, p->err_file};
    for (int k = 0; k < 2; k++) {
        if (!files[k])
            continue;
        char *url;
        size_t ol = remote_origin_len(j->base);
        if (j->kind == REMOTE_OPENAI)
            url = remote_url(j, "/files", files[k], "/content");
        else if (remote_origin_len(files[k]) == ol && strncmp(files[k], j->base, ol) == 0)
            url = xstrdup(files[k]); /* the results_url the batch names */
        else /* never the key to another host: the documented place instead */
            url = remote_url(j, "/messages/batches", p->id, "/results");
        off_t from = lseek(j->spool, 0, SEEK_END);
        int rc = remote_http(j, NULL, url, NULL, 0, NULL, NULL, j->spool, err);
        free(url);
        if (rc)
            return rc;
        off_t to = lseek(j->spool, 0, SEEK_END);
        if (to > from) {
            char last;
            if (pread(j->spool, &last, 1, to - 1) == 1 && last != '\n') {
                (void)util_write_all(j->spool, "\n", 1);
                to++;
            }
        }
        remote_index(j, pi, from, to);
    }
    return 0;
}

static void remote_text(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct buf *two = ud;
    if (kind == API_CONTENT)
        buf_append(&two[0], s, n);
    else if (kind == API_REASONING)
        buf_append(&two[1], s, n);
}

/* Anthropic's error type to the HTTP status the Messages API answers it with. */
static long remote_anthropic_status(const char *type)
{
    static const struct { const char *t; long s; } map[] = {
        {"invalid_request_error", 400}, {"authentication_error", 401},
        {"billing_error", 402}, {"permission_error", 403}, {"not_found_error", 404},
        {"request_too_large", 413}, {"rate_limit_error", 429}, {"api_error", 500},
        {"overloaded_error", 529}};
    for (size_t i = 0; type && i < TT_ARRAY_LEN(map); i++)
        if (strcmp(type, map[i].t) == 0)
            return map[i].s;
    return 500;
}

/* A provider's result line into r, content and reasoning (two[0], two[1]). */
static void remote_decode(const struct remote_job *j, const struct remote_part *p,
                          const char *line, size_t n, struct net_result *r, struct buf *two)
{
    cJSON *o = cJSON_ParseWithLength(line, n);
    const cJSON *body = NULL;
    const char *why = NULL;
    char *owned = NULL;
    if (j->kind == REMOTE_ANTHROPIC) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "result");
        const char *t = remote_str(res, "type");
        if (t && strcmp(t, "succeeded") == 0) {
            body = cJSON_GetObjectItemCaseSensitive(res, "message");
            r->status = 200;
        } else if (t && strcmp(t, "errored") == 0) {
            body = cJSON_GetObjectItemCaseSensitive(res, "error");
            const cJSON *inner = cJSON_GetObjectItemCaseSensitive(body, "error");
            r->status = remote_anthropic_status(remote_str(inner, "type"));
        } else if (t && strcmp(t, "canceled") == 0) {
            r->outcome = API_CANCELLED;
            why = "cancelled: the batch was cancelled before this request ran";
        } else if (t && strcmp(t, "expired") == 0) {
            why = "expired: the batch's 24-hour window ended before this request ran";
            snprintf(r->error_code, sizeof r->error_code, "batch_expired");
        } else
            why = "the provider's result line is not understood";
    } else {
        const cJSON *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
        if (cJSON_IsObject(resp)) {
            r->status = remote_num(resp, "status_code");
            body = cJSON_GetObjectItemCaseSensitive(resp, "body");
        } else if (cJSON_IsObject(e)) {
            const char *code = remote_str(e, "code"), *msg = remote_str(e, "message");
            snprintf(r->error_code, sizeof r->error_code, "%s", code ? code : "");
            why = owned = code && strcmp(code, "batch_expired") == 0
                              ? xasprintf("expired: %s", msg ? msg : "the batch's window ended")
                              : xasprintf("%s%s%s", code ? code : "error", msg ? ": " : "",
                                          msg ? msg : "");
        } else
            why = "the provider's result line is not understood";
    }
    if (!why && body) {
        char *text = cJSON_PrintUnformatted(body);
        size_t tn = text ? strlen(text) : 0;
        if (r->status >= 200 && r->status <= 299) {
            struct api_stream st;
            api_stream_init(&st);
            if (j->dl->decode_body(&st, text, tn, remote_text, two) < 0) {
                r->outcome = API_ERR_HTTP;
                r->error = xstrdup(st.error.len ? buf_str(&st.error) : "a bad answer");
                snprintf(r->error_code, sizeof r->error_code, "%s", st.error_code);
            } else if (st.finish[0]) {
                struct buf msg = BUF_INIT;
                r->outcome = j->dl->finish_outcome(&st, &msg);
                if (msg.len)
                    r->error = buf_take(&msg);
                buf_free(&msg);
            } else {
                r->outcome = API_ERR_TRUNCATED;
                r->error = xstrdup("the answer has no finish reason");
            }
            snprintf(r->model, sizeof r->model, "%s", st.model);
            snprintf(r->finish, sizeof r->finish, "%s", st.finish);
            r->usage = st.usage;
            r->content_bytes = two[0].len;
            r->reasoning_bytes = two[1].len;
            api_stream_free(&st);
        } else {
            struct buf msg = BUF_INIT;
            j->dl->error_message(r->status, "application/json", text ? text : "", tn, &msg,
                                 r->error_code, sizeof r->error_code);
            r->outcome = API_ERR_HTTP;
            r->error = buf_take(&msg);
            buf_free(&msg);
        }
        cJSON_free(text);
    } else if (!why)
        why = "the provider's result line is not understood";
    if (why) {
        if (r->outcome != API_CANCELLED)
            r->outcome = API_ERR_HTTP;
        r->error = xstrdup(why);
    }
    (void)p;
    free(owned);
    cJSON_Delete(o);
}

/* The line of a request without a result (pos: its line in the upload): what its batch's end
 * says about it. */
static void remote_missing(const struct remote_part *p, long pos, struct net_result *r)
{
    r->outcome = API_ERR_HTTP;
    if (strcmp(p->status, "cancelled") == 0 || strcmp(p->status, "canceled") == 0) {
        r->outcome = API_CANCELLED;
        r->error = xasprintf("cancelled: batch %s was cancelled before this request ran",
                             p->id);
    } else if (strcmp(p->status, "expired") == 0) {
        snprintf(r->error_code, sizeof r->error_code, "batch_expired");
        r->error = xasprintf("expired: batch %s's 24-hour window ended before this request "
                             "ran", p->id);
    } else if (strcmp(p->status, "failed") == 0) {
        snprintf(r->error_code, sizeof r->error_code, "batch_failed");
        const cJSON *e, *own = NULL;
        cJSON_ArrayForEach(e, p->errors)
            if (!own && remote_num(e, "line") == pos)
                own = e;
        const char *m = own ? remote_str(own, "message") : NULL;
        if (own)
            r->error = xasprintf("batch %s failed: this request was refused: %s", p->id,
                                 m ? m : "invalid");
        else
            r->error = xasprintf("batch %s failed: %s", p->id, p->error ? p->error
                                                                      : "no reason");
    } else
        r->error = xasprintf("batch %s (%s) returned no result for this request", p->id,
                             p->status);
}

/* Write every line in input order. */
static int remote_write(struct remote_job *j, int out_fd, remote_emit_fn fn, void *ud)
{
    struct buf line = BUF_INIT, two[2] = {BUF_INIT, BUF_INIT};
    int rc = 0;
    fn(ud, 0, NULL, NULL, NULL, NULL, NULL); /* the output is written from here */
    for (size_t i = 0; i < j->n_items && rc == 0; i++) {
        const struct remote_item *it = &j->items[i];
        if (it->part < 0) { /* a local line, as it was written */
            if (remote_pread(j, it->off, (size_t)it->len, &line) < 0 ||
                util_write_all(out_fd, line.data, line.len) < 0)
                rc = errno == EPIPE ? 141 : 1;
            continue;
        }
        const struct remote_part *p = &j->parts[it->part];
        struct net_result r;
        memset(&r, 0, sizeof r);
        r.t.ttft = -1;
        buf_reset(&two[0]);
        buf_reset(&two[1]);
        if (it->len >= 0 && remote_pread(j, it->off, (size_t)it->len, &line) == 0)
            remote_decode(j, p, line.data, line.len, &r, two);
        else
            remote_missing(p, it->pos, &r);
        r.attempts = 1;
        fn(ud, it->line, it->id, &r, buf_str(&two[0]), buf_str(&two[1]), it->model);
        free(r.error);
    }
    buf_free(&line);
    buf_free(&two[0]);
    buf_free(&two[1]);
    return rc;
}

/* rc of a request that is worth another try later: the network, a 429 or a 5xx. */
static int remote_transient(const struct remote_job *j, int rc)
{
    return rc == 4 || (rc == 3 && (j->last_status == 429 || j->last_status == 408 ||
                                   j->last_status >= 500));
}

/* Seconds to the next look after fails failed ones in a row: the poll interval, doubled per
 * failure up to REMOTE_BACKOFF_MAX (or the interval, when longer). */
static double remote_backoff(const struct remote_job *j, int fails)
{
    double s = j->poll_s;
    for (int i = 0; i < fails && s < REMOTE_BACKOFF_MAX; i++)
        s *= 2;
    return s > REMOTE_BACKOFF_MAX && j->poll_s < REMOTE_BACKOFF_MAX ? REMOTE_BACKOFF_MAX : s;
}

/* After a failed look: 0 to try again at the next poll (a warning says so), else rc. */
static int remote_retry(struct remote_job *j, int rc, int *fails, struct buf *err)
{
    if (!remote_transient(j, rc) || ++*fails >= REMOTE_TRIES)
        return rc;
    remote_clear(j);
    fprintf(stderr, "tokterm batch: warning: %s; trying again in %.3g s (%d of %d)\n",
            buf_str(err), remote_backoff(j, *fails), *fails, REMOTE_TRIES - 1);
    buf_reset(err);
    return 0;
}

int remote_job_run(struct remote_job *j, struct loop *lp, int out_fd, int tty,
                   remote_emit_fn fn, void *ud, struct buf *err)
{
    j->lp = lp;
    int rc = remote_flush(j, err);
    if (rc) /* the provider refused (3), or could not be reached (4): the exit says which (until
             * 2026-12 both were 1, which --help calls an internal error) */
        return rc == 130 || rc == 3 || rc == 4 ? rc : 1;
    double t0 = util_now(), t_done0 = t0;
    long done0 = -1;
    struct buf last = BUF_INIT;
    double next_poll = 0;
    int fails = 0;
    for (;;) {
        int all = 1;
        double now = util_now();
        if (now >= next_poll) {
            for (size_t i = 0; i < j->n_parts && rc == 0; i++) {
                struct remote_part *p = &j->parts[i];
                if (!p->terminal)
                    rc = remote_get(j, p, p->id, 0, err);
                all &= p->terminal;
            }
            if (rc == 0)
                fails = 0;
            else if ((rc = remote_retry(j, rc, &fails, err)) != 0)
                break;
            else
                all = 0;
            next_poll = util_now() + remote_backoff(j, fails);
            if (done0 < 0) {
                done0 = 0;
                for (size_t i = 0; i < j->n_parts; i++)
                    done0 += j->parts[i].done;
                t_done0 = util_now();
            }
        } else
            for (size_t i = 0; i < j->n_parts; i++)
                all &= j->parts[i].terminal;
        remote_progress(j, tty, t0, done0, t_done0, &last);
        if (all)
            break;
        double wait = next_poll - util_now();
        if (tty && wait > 1)
            wait = 1;
        if (wait > 0)
            (void)loop_wait(lp, NULL, 0, (int)(wait * 1000) + 1);
        if (loop_signal(lp)) {
            rc = 130;
            break;
        }
    }
    remote_clear(j);
    buf_free(&last);
    if (rc) {
        if (rc != 130)
            return rc == 3 || rc == 4 ? rc : 1;
        for (size_t i = 0; i < j->n_parts; i++)
            fprintf(stderr, "tokterm batch: batch %s runs on at the provider (%s)\n",
                    j->parts[i].id, j->parts[i].status);
        fprintf(stderr, "tokterm batch: run the same command again to pick %s up, or stop "
                        "%s: tokterm batch --remote-cancel %s\n",
                j->n_parts > 1 ? "them" : "it", j->n_parts > 1 ? "each" : "it",
                j->n_parts > 1 ? "ID" : j->parts[0].id);
        return 130;
    }
    fails = 0;
    for (size_t i = 0; i < j->n_parts; i++) {
        off_t mark = lseek(j->spool, 0, SEEK_END);
        while ((rc = remote_download(j, i, err)) != 0 && remote_retry(j, rc, &fails, err) == 0) {
            if (ftruncate(j->spool, mark) != 0) /* what came of the failed try */
                break;
            (void)loop_wait(lp, NULL, 0, (int)(remote_backoff(j, fails) * 1000) + 1);
            if (loop_signal(lp)) {
                rc = 130;
                break;
            }
        }
        if (rc)
            return rc == 130 || rc == 3 || rc == 4 ? rc : 1;
    }
    rc = remote_write(j, out_fd, fn, ud);
    if (rc == 0 && j->st)
        for (size_t i = 0; i < j->n_parts; i++)
            (void)store_remote_del(j->st, j->parts[i].hash); /* written: a new run is new */
    return rc;
}

void remote_job_free(struct remote_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n_items; i++)
        free(j->items[i].id);
    free(j->items);
    for (size_t i = 0; i < j->n_models; i++)
        free(j->models[i]);
    free(j->models);
    for (size_t i = 0; i < j->n_parts; i++) {
        free(j->parts[i].out_file);
        free(j->parts[i].err_file);
        free(j->parts[i].error);
        cJSON_Delete(j->parts[i].errors);
    }
    free(j->parts);
    buf_free(&j->cur);
    if (j->spool >= 0)
        close(j->spool);
    free(j->base);
    free(j->shown_base);
    free(j);
}

/* ---- status and cancel ---- */

int remote_status(const struct conf *c, const char *key, const char *id, int cancel)
{
    struct buf err = BUF_INIT;
    struct remote_job *j = remote_job_new(c, key, NULL, 0, &err);
    if (!j) {
        fprintf(stderr, "tokterm %s\n", buf_str(&err));
        buf_free(&err);
        return 2;
    }
    struct remote_part p;
    memset(&p, 0, sizeof p);
    int rc = remote_get(j, &p, id, cancel, &err);
    if (rc) {
        fprintf(stderr, "tokterm batch: %s\n", buf_str(&err));
    } else {
        printf("%s: %s%s, %ld/%ld done, %ld failed\n", p.id, p.status,
               cancel ? " (cancel asked)" : "", p.done, p.total, p.failed);
        if (p.out_file)
            printf("  %s: %s\n", j->kind == REMOTE_ANTHROPIC ? "results" : "output file",
                   p.out_file);
        if (p.err_file)
            printf("  error file: %s\n", p.err_file);
        if (p.error)
            printf("  error: %s\n", p.error);
    }
    free(p.out_file);
    free(p.err_file);
    free(p.error);
    cJSON_Delete(p.errors);
    remote_job_free(j);
    buf_free(&err);
    return rc;
}
