/* client.c - the MCP client's JSON-RPC: requests and their answers, the handshake, tools/list,
 * tools/call, ping, progress and cancellation (mcp.h). The transports (stdio.c, http.c) hand
 * each whole message to mcp_dispatch. */
#include "config.h"
#include "mcp/mcp_int.h"

#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

const char *const mcp_protocol_versions[] = {MCP_PROTOCOL_VERSION, "2025-06-18", "2025-03-26",
                                             "2024-11-05", NULL};

size_t mcp_max_message(const struct mcp_client *c)
{
    return (size_t)c->conf.max_result_mb << 20;
}

struct mcp_client *mcp_client_new(const struct mcp_server_conf *conf, mcp_key_fn get_key)
{
    struct mcp_client *c = xcalloc(1, sizeof *c);
    mcp_conf_copy(&c->conf, conf);
    if (c->conf.timeout <= 0)
        c->conf.timeout = 60;
    if (c->conf.max_result_mb <= 0)
        c->conf.max_result_mb = 16;
    c->get_key = get_key;
    c->tr = c->conf.url ? &mcp_http_transport : &mcp_stdio_transport;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->write_mu, NULL);
    pthread_mutex_init(&c->start_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->in_fd = c->out_fd = c->err_fd = c->stop_fd[0] = c->stop_fd[1] = -1;
    return c;
}

const char *mcp_client_name(const struct mcp_client *c)
{
    return c->conf.name;
}

const char *mcp_client_protocol(const struct mcp_client *c)
{
    return c->protocol;
}

const char *mcp_client_server_info(const struct mcp_client *c)
{
    return c->server_info ? c->server_info : "";
}

static void mcp_tools_clear(struct mcp_client *c)
{
    for (int i = 0; i < c->n_tools; i++) {
        free(c->tools[i].name);
        free(c->tools[i].title);
        free(c->tools[i].description);
        free(c->tools[i].input_schema);
    }
    free(c->tools);
    c->tools = NULL;
    c->n_tools = 0;
    c->tools_valid = 0;
}

void mcp_client_free(struct mcp_client *c, double grace)
{
    if (!c)
        return;
    if (c->running)
        c->tr->close(c, grace);
    mcp_tools_clear(c);
    free(c->server_info);
    buf_free(&c->dead_why);
    buf_free(&c->stderr_tail);
    mcp_conf_clear(&c->conf);
    mcp_strv_free_all(c->secrets);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->write_mu);
    pthread_mutex_destroy(&c->start_mu);
    free(c);
}

/* ---- what went wrong, for messages --------------------------------------------------- */

void mcp_secret_add(struct mcp_client *c, const char *s)
{
    if (!s || strlen(s) < 8)
        return; /* util_redact stars runs of 8 bytes or more */
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < c->n_secrets && strcmp(c->secrets[i], s) != 0)
        i++;
    if (i == c->n_secrets) {
        XGROW(c->secrets, c->n_secrets + 2, c->cap_secrets);
        c->secrets[c->n_secrets++] = xstrdup(s);
        c->secrets[c->n_secrets] = NULL;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Star c's secrets in text (may be NULL; c->mu held). */
static void mcp_redact(const struct mcp_client *c, char *text)
{
    for (size_t i = 0; text && i < c->n_secrets; i++)
        util_redact(text, c->secrets[i]);
}

/* ... in every string of a message from the server (c->mu held) */
static void mcp_redact_tree(const struct mcp_client *c, cJSON *j)
{
    for (; j; j = j->next) {
        if (cJSON_IsString(j))
            mcp_redact(c, j->valuestring);
        mcp_redact_tree(c, j->child);
    }
}

void mcp_stderr_add(struct mcp_client *c, const char *p, size_t n)
{
    pthread_mutex_lock(&c->mu);
    c->stderr_total += n;
    if (n >= MCP_STDERR_KEEP) {
        p += n - MCP_STDERR_KEEP;
        n = MCP_STDERR_KEEP;
    }
    buf_append(&c->stderr_tail, p, n);
    if (c->stderr_tail.len > 2 * MCP_STDERR_KEEP) {
        size_t cut = c->stderr_tail.len - MCP_STDERR_KEEP;
        memmove(c->stderr_tail.data, c->stderr_tail.data + cut, MCP_STDERR_KEEP);
        c->stderr_tail.len = MCP_STDERR_KEEP;
        c->stderr_tail.data[MCP_STDERR_KEEP] = '\0';
    }
    pthread_mutex_unlock(&c->mu);
}

/* The diagnostics a failed request's message ends with (c->mu held): garbage on stdout,
 * answers nobody asked for, the last line of stderr. */
static void mcp_diagnose(struct mcp_client *c, struct buf *b)
{
    if (c->garbage)
        buf_printf(b, "; it wrote %lu line%s that %s not JSON-RPC (the first: '%s')", c->garbage,
                   c->garbage == 1 ? "" : "s", c->garbage == 1 ? "is" : "are",
                   c->garbage_first);
    if (c->unknown_ids)
        buf_printf(b, "; it sent %lu answer%s with an id tokterm never asked for",
                   c->unknown_ids, c->unknown_ids == 1 ? "" : "s");
    if (c->stderr_tail.len) {
        const char *s = c->stderr_tail.data;
        size_t n = c->stderr_tail.len;
        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
            n--;
        size_t start = n;
        while (start && s[start - 1] != '\n')
            start--;
        if (n > start) {
            struct buf safe = BUF_INIT;
            size_t len = n - start > 200 ? 200 : n - start;
            utf8_sanitize(&safe, s + start, len);
            buf_printf(b, "; its stderr ends: %s", safe.data ? safe.data : "");
            buf_free(&safe);
        }
    }
}

/* ---- pending requests ------------------------------------------------------------------ */

static struct mcp_pending *mcp_pending_find(struct mcp_client *c, long id)
{
    for (struct mcp_pending *p = c->pending; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void mcp_pending_remove(struct mcp_client *c, struct mcp_pending *p)
{
    for (struct mcp_pending **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* Settle p (c->mu held). */
static void mcp_settle(struct mcp_client *c, struct mcp_pending *p, enum mcp_status st,
                       const char *why)
{
    if (p->done)
        return;
    p->done = 1;
    p->status = st;
    if (why)
        buf_appends(&p->error, why);
    if (st != MCP_OK && st != MCP_RPC_ERROR && st != MCP_CANCELLED)
        mcp_diagnose(c, &p->diag);
    mcp_redact(c, p->error.data);
    mcp_redact(c, p->diag.data);
    pthread_cond_broadcast(&c->cv);
}

void mcp_request_failed(struct mcp_client *c, long id, enum mcp_status st, const char *why)
{
    pthread_mutex_lock(&c->mu);
    struct mcp_pending *p = mcp_pending_find(c, id);
    if (p)
        mcp_settle(c, p, st, why);
    pthread_mutex_unlock(&c->mu);
}

void mcp_server_ended(struct mcp_client *c, const char *why)
{
    pthread_mutex_lock(&c->mu);
    c->dead = 1;
    buf_reset(&c->dead_why);
    buf_appends(&c->dead_why, why);
    mcp_redact(c, c->dead_why.data);
    for (struct mcp_pending *p = c->pending; p; p = p->next)
        mcp_settle(c, p, MCP_FAILED, why);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- messages from the server ------------------------------------------------------- */

static void mcp_garbage(struct mcp_client *c, const char *msg, size_t n)
{
    pthread_mutex_lock(&c->mu);
    if (!c->garbage++) {
        struct buf safe = BUF_INIT;
        utf8_sanitize(&safe, msg, n > 60 ? 60 : n);
        snprintf(c->garbage_first, sizeof c->garbage_first, "%s%s",
                 safe.data ? safe.data : "", n > 60 ? "..." : "");
        buf_free(&safe);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Send the message m (freed) without waiting for anything. */
static void mcp_send_json(struct mcp_client *c, cJSON *m)
{
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    struct buf err = BUF_INIT;
    if (s)
        c->tr->send(c, s, strlen(s), 0, &err);
    buf_free(&err);
    free(s);
}

/* Answer a request of the server: ping gets {}, anything else "method not found" (tokterm
 * offers no sampling, roots or elicitation). */
static void mcp_answer_server(struct mcp_client *c, const cJSON *id, const char *method)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "jsonrpc", "2.0");
    cJSON_AddItemToObject(a, "id", cJSON_Duplicate(id, 1));
    if (strcmp(method, "ping") == 0)
        cJSON_AddItemToObject(a, "result", cJSON_CreateObject());
    else {
        cJSON *e = cJSON_AddObjectToObject(a, "error");
        cJSON_AddNumberToObject(e, "code", -32601);
        cJSON_AddStringToObject(e, "message", "Method not found");
    }
    mcp_send_json(c, a);
}

static void mcp_notification(struct mcp_client *c, const char *method, const cJSON *params)
{
    if (strcmp(method, "notifications/tools/list_changed") == 0) {
        pthread_mutex_lock(&c->mu);
        c->tools_valid = 0;
        pthread_mutex_unlock(&c->mu);
    } else if (strcmp(method, "notifications/progress") == 0 && params) {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(params, "progressToken");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(params, "progress");
        const cJSON *tot = cJSON_GetObjectItemCaseSensitive(params, "total");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(params, "message");
        if (!cJSON_IsNumber(tok) || !cJSON_IsNumber(pr))
            return;
        pthread_mutex_lock(&c->mu);
        struct mcp_pending *p = mcp_pending_find(c, util_json_long(tok->valuedouble, -1));
        if (p && !p->done && p->progress)
            p->progress(p->ud, pr->valuedouble, cJSON_IsNumber(tot) ? tot->valuedouble : -1,
                        cJSON_IsString(msg) ? msg->valuestring : NULL);
        pthread_mutex_unlock(&c->mu);
    }
    /* notifications/message (logging), cancelled, resources/...: nothing to do */
}

static void mcp_response(struct mcp_client *c, const cJSON *j, const cJSON *id)
{
    pthread_mutex_lock(&c->mu);
    struct mcp_pending *p = cJSON_IsNumber(id) ? mcp_pending_find(c, util_json_long(id->valuedouble,
                                                                                     -1))
                                               : NULL;
    if (!p || p->done || (double)p->id != id->valuedouble) {
        c->unknown_ids++;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (cJSON_IsObject(e)) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        struct buf why = BUF_INIT;
        utf8_sanitize(&why, cJSON_IsString(m) ? m->valuestring : "no message",
                      cJSON_IsString(m) ? strlen(m->valuestring) : 10);
        buf_printf(&p->error, "error %ld: %s",
                   cJSON_IsNumber(code) ? util_json_long(code->valuedouble, 0) : 0,
                   why.data ? why.data : "");
        buf_free(&why);
        mcp_settle(c, p, MCP_RPC_ERROR, NULL);
    } else if (res) {
        p->result = cJSON_PrintUnformatted(res);
        mcp_settle(c, p, MCP_OK, NULL);
    } else
        mcp_settle(c, p, MCP_FAILED, "the server answered with neither a result nor an error");
    pthread_mutex_unlock(&c->mu);
}

static int mcp_hex4(const char *p, const char *end, unsigned *v)
{
    if (end - p < 4)
        return -1;
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        x = x << 4 | (unsigned)d;
    }
    *v = x;
    return 0;
}

/* A line of JSON whose strings escape a NUL (\u0000) or a lone surrogate (\ud83d without its
 * pair, as JavaScript's JSON.stringify writes text cut by .slice()): into out with each such
 * escape made \ufffd, for cJSON, which refuses the surrogate (the whole message was lost and
 * its call waited out its timeout) and ends a string at the NUL (the rest of a tool's text was
 * dropped without a word; until 2026-12 both). 1 when out holds a mended copy, 0 when the line
 * needs none. */
static int mcp_json_mend(const char *s, size_t n, struct buf *out)
{
    const char *end = s + n, *copied = s;
    int changed = 0;
    for (const char *p = s; p + 1 < end; p++) {
        if (*p != '\\')
            continue;
        unsigned v, w;
        if (p[1] != 'u' || mcp_hex4(p + 2, end, &v) < 0) {
            p++; /* another escape (\\, \"): its second byte is not an escape's start */
            continue;
        }
        size_t len = 6;
        int bad = v == 0 || (v >= 0xDC00 && v <= 0xDFFF);
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (end - p >= 12 && p[6] == '\\' && p[7] == 'u' && mcp_hex4(p + 8, end, &w) == 0 &&
                w >= 0xDC00 && w <= 0xDFFF)
                len = 12; /* a pair: kept */
            else
                bad = 1;
        }
        if (bad) {
            if (!changed)
                buf_reset(out);
            buf_append(out, copied, (size_t)(p - copied));
            buf_appends(out, "\\ufffd");
            copied = p + len;
            changed = 1;
        }
        p += len - 1;
    }
    if (changed)
        buf_append(out, copied, (size_t)(end - copied));
    return changed;
}

void mcp_dispatch(struct mcp_client *c, const char *msg, size_t n)
{
    while (n && (msg[n - 1] == '\r' || msg[n - 1] == ' ' || msg[n - 1] == '\t'))
        n--;
    size_t lead = 0;
    while (lead < n && (msg[lead] == ' ' || msg[lead] == '\t'))
        lead++;
    if (lead == n)
        return; /* a blank line */
    struct buf mended = BUF_INIT;
    cJSON *j = mcp_json_mend(msg + lead, n - lead, &mended)
                   ? cJSON_ParseWithLength(mended.data, mended.len)
                   : cJSON_ParseWithLength(msg + lead, n - lead);
    buf_free(&mended);
    if (j) {
        pthread_mutex_lock(&c->mu);
        if (c->n_secrets) /* read under the lock: mcp_secret_add takes it */
            mcp_redact_tree(c, j);
        pthread_mutex_unlock(&c->mu);
    }
    if (cJSON_IsArray(j)) { /* a batch (2025-03-26) */
        const cJSON *m;
        cJSON_ArrayForEach(m, j)
        {
            char *s = cJSON_PrintUnformatted(m);
            if (s && cJSON_IsObject(m))
                mcp_dispatch(c, s, strlen(s));
            free(s);
        }
        cJSON_Delete(j);
        return;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
    if (!cJSON_IsObject(j) || !cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
        cJSON_Delete(j);
        mcp_garbage(c, msg + lead, n - lead);
        return;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(j, "method");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (cJSON_IsString(method)) {
        if (id && !cJSON_IsNull(id))
            mcp_answer_server(c, id, method->valuestring);
        else
            mcp_notification(c, method->valuestring,
                             cJSON_GetObjectItemCaseSensitive(j, "params"));
    } else if (id)
        mcp_response(c, j, id);
    else
        mcp_garbage(c, msg + lead, n - lead);
    cJSON_Delete(j);
}

/* The id an oversized message answers: `"id":N` right before its end (the TypeScript SDK
 * writes result, jsonrpc, id in that order), else `"id":N` at its start. 0 when neither. */
static long mcp_find_id(const char *head, size_t hn, const char *tail, size_t tn)
{
    static const char key[] = "\"id\":";
    for (size_t i = tn; i-- > 0;)
        if (i + sizeof key - 1 <= tn && memcmp(tail + i, key, sizeof key - 1) == 0) {
            const char *p = tail + i + sizeof key - 1, *end = tail + tn;
            while (p < end && *p == ' ')
                p++;
            long id = 0;
            const char *d = p;
            while (p < end && *p >= '0' && *p <= '9' && id < 100000000)
                id = id * 10 + (*p++ - '0');
            while (p < end && (*p == ' ' || *p == '\r'))
                p++;
            if (p > d && p < end && *p == '}')
                return id;
            break;
        }
    const char *s = memmem(head, hn > 64 ? 64 : hn, key, sizeof key - 1);
    if (s) {
        const char *p = s + sizeof key - 1, *end = head + hn;
        while (p < end && *p == ' ')
            p++;
        long id = 0;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9' && id < 100000000)
            id = id * 10 + (*p++ - '0');
        if (p > d)
            return id;
    }
    return 0;
}

void mcp_oversized(struct mcp_client *c, const char *head, size_t hn, const char *tail,
                   size_t tn, unsigned long long total)
{
    long id = mcp_find_id(head, hn, tail, tn);
    pthread_mutex_lock(&c->mu);
    struct mcp_pending *p = id ? mcp_pending_find(c, id) : NULL;
    if (!p && c->pending && !c->pending->next)
        p = c->pending; /* no id to be found, but only one request is waiting */
    if (p) {
        char why[200];
        snprintf(why, sizeof why, "the server's answer is %.1f MiB, over the limit of %ld MiB "
                 "(max_result_mb in [mcp %s])", (double)total / (1 << 20),
                 c->conf.max_result_mb, c->conf.name);
        mcp_settle(c, p, MCP_TOO_LARGE, why);
    } else
        c->garbage++;
    pthread_mutex_unlock(&c->mu);
}

/* ---- requests -------------------------------------------------------------------------- */

static void mcp_notify(struct mcp_client *c, const char *method, cJSON *params)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddStringToObject(m, "method", method);
    if (params)
        cJSON_AddItemToObject(m, "params", params);
    mcp_send_json(c, m);
}

static int mcp_cancelled(const int *cancel)
{
    return cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE);
}

static void mcp_deadline(struct timespec *ts, double secs)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)secs;
    ts->tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Send method with params (taken) and wait for the answer: up to timeout seconds (0: the
 * section's), or until *cancel is set (by any thread; looked at every 0.1 s, at once after
 * mcp_call_cancel). *result gets the result's JSON. A failure's why goes to err, and what
 * the server's own output says of it (stderr, stray stdout) to diag, or to err when diag is
 * NULL. */
static enum mcp_status mcp_request_diag(struct mcp_client *c, const char *method,
                                        cJSON *params, mcp_progress_fn progress, void *ud,
                                        const int *cancel, double timeout, char **result,
                                        struct buf *err, struct buf *diag);

static enum mcp_status mcp_request(struct mcp_client *c, const char *method, cJSON *params,
                                   mcp_progress_fn progress, void *ud, const int *cancel,
                                   double timeout, char **result, struct buf *err)
{
    return mcp_request_diag(c, method, params, progress, ud, cancel, timeout, result, err,
                            NULL);
}

static enum mcp_status mcp_request_diag(struct mcp_client *c, const char *method,
                                        cJSON *params, mcp_progress_fn progress, void *ud,
                                        const int *cancel, double timeout, char **result,
                                        struct buf *err, struct buf *diag)
{
    *result = NULL;
    struct mcp_pending *p = xcalloc(1, sizeof *p);
    pthread_mutex_lock(&c->mu);
    p->id = ++c->next_id;
    p->progress = progress;
    p->ud = ud;
    p->next = c->pending;
    c->pending = p;
    int dead = c->dead;
    pthread_mutex_unlock(&c->mu);
    if (!params)
        params = cJSON_CreateObject();
    if (progress) {
        cJSON *meta = cJSON_AddObjectToObject(params, "_meta");
        cJSON_AddNumberToObject(meta, "progressToken", (double)p->id);
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddNumberToObject(m, "id", (double)p->id);
    cJSON_AddStringToObject(m, "method", method);
    cJSON_AddItemToObject(m, "params", params);
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    struct buf why = BUF_INIT;
    int sent = !dead && s && c->tr->send(c, s, strlen(s), p->id, &why) == 0;
    free(s);
    double t = timeout > 0 ? timeout : c->conf.timeout;
    double end = util_now() + t;
    pthread_mutex_lock(&c->mu);
    if (!sent)
        mcp_settle(c, p, MCP_FAILED, dead ? c->dead_why.data : why.data);
    double left;
    while (!p->done && !mcp_cancelled(cancel) && (left = end - util_now()) > 0) {
        struct timespec dl;
        mcp_deadline(&dl, cancel && left > 0.1 ? 0.1 : left);
        pthread_cond_timedwait(&c->cv, &c->mu, &dl);
    }
    int tell = !p->done;
    if (!p->done) {
        char msg[160];
        if (mcp_cancelled(cancel))
            snprintf(msg, sizeof msg, "%s cancelled", method);
        else
            snprintf(msg, sizeof msg, "no answer to %s within %g s (timeout in [mcp %s])",
                     method, t, c->conf.name);
        mcp_settle(c, p, mcp_cancelled(cancel) ? MCP_CANCELLED : MCP_TIMEOUT, msg);
    }
    mcp_pending_remove(c, p);
    pthread_mutex_unlock(&c->mu);
    if (tell) { /* the server may stop working on it */
        cJSON *cp = cJSON_CreateObject();
        cJSON_AddNumberToObject(cp, "requestId", (double)p->id);
        cJSON_AddStringToObject(cp, "reason", p->status == MCP_CANCELLED ? "cancelled by the user"
                                                                          : "timed out");
        mcp_notify(c, "notifications/cancelled", cp);
    }
    enum mcp_status st = p->status;
    if (st == MCP_OK)
        *result = p->result;
    else {
        free(p->result);
        buf_printf(err, "%s: %s", c->conf.name, p->error.data ? p->error.data : "failed");
        buf_append(diag ? diag : err, p->diag.data ? p->diag.data : "", p->diag.len);
    }
    buf_free(&p->error);
    buf_free(&p->diag);
    buf_free(&why);
    free(p);
    return st;
}

/* mcp_client_start, given up when *cancel is set (NULL: never). */
static int mcp_start(struct mcp_client *c, const int *cancel, struct buf *err)
{
    pthread_mutex_lock(&c->start_mu);
    pthread_mutex_lock(&c->mu);
    int ok = c->running && !c->dead;
    int restart = c->running && c->dead;
    pthread_mutex_unlock(&c->mu);
    if (ok) {
        pthread_mutex_unlock(&c->start_mu);
        return 0;
    }
    if (restart)
        c->tr->close(c, 0);
    pthread_mutex_lock(&c->mu);
    c->dead = 0;
    c->running = 1;
    c->garbage = c->unknown_ids = 0;
    c->protocol[0] = '\0';
    buf_reset(&c->stderr_tail);
    mcp_tools_clear(c);
    pthread_mutex_unlock(&c->mu);
    if (c->tr->open(c, err) != 0) {
        c->running = 0;
        pthread_mutex_unlock(&c->start_mu);
        return -1;
    }
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "protocolVersion", MCP_PROTOCOL_VERSION);
    cJSON_AddObjectToObject(params, "capabilities");
    cJSON *info = cJSON_AddObjectToObject(params, "clientInfo");
    cJSON_AddStringToObject(info, "name", "tokterm");
    cJSON_AddStringToObject(info, "version", PACKAGE_VERSION);
    char *res = NULL;
    int rc = -1;
    /* a server's start (npx fetching a package, node compiling, a loaded machine) may take
     * longer than the calls the section's timeout is set for: its initialize waits at least
     * MCP_START_SECONDS (a cancel still stops it at once) */
    double start_wait = c->conf.timeout < MCP_START_SECONDS ? MCP_START_SECONDS : 0;
    if (mcp_request(c, "initialize", params, NULL, NULL, cancel, start_wait, &res, err) ==
        MCP_OK) {
        cJSON *r = cJSON_Parse(res);
        const cJSON *pv = cJSON_GetObjectItemCaseSensitive(r, "protocolVersion");
        const cJSON *si = cJSON_GetObjectItemCaseSensitive(r, "serverInfo");
        const cJSON *sn = cJSON_GetObjectItemCaseSensitive(si, "name");
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(si, "version");
        int known = 0;
        for (size_t i = 0; cJSON_IsString(pv) && mcp_protocol_versions[i]; i++)
            known |= strcmp(pv->valuestring, mcp_protocol_versions[i]) == 0;
        if (!known) {
            struct buf safe = BUF_INIT;
            const char *v = cJSON_IsString(pv) ? pv->valuestring : "(none)";
            utf8_sanitize(&safe, v, strlen(v) > 40 ? 40 : strlen(v));
            buf_printf(err, "%s: the server speaks MCP revision '%s'; tokterm speaks %s, "
                            "2025-06-18, 2025-03-26 and 2024-11-05", c->conf.name,
                       safe.data ? safe.data : "", MCP_PROTOCOL_VERSION);
            buf_free(&safe);
        } else {
            pthread_mutex_lock(&c->mu);
            snprintf(c->protocol, sizeof c->protocol, "%s", pv->valuestring);
            free(c->server_info);
            c->server_info = xasprintf("%.80s %.40s", cJSON_IsString(sn) ? sn->valuestring : "?",
                                       cJSON_IsString(sv) ? sv->valuestring : "");
            pthread_mutex_unlock(&c->mu);
            mcp_notify(c, "notifications/initialized", NULL);
            rc = 0;
        }
        cJSON_Delete(r);
        free(res);
    }
    if (rc != 0) {
        c->tr->close(c, 0);
        c->running = 0;
    }
    pthread_mutex_unlock(&c->start_mu);
    return rc;
}

int mcp_client_start(struct mcp_client *c, struct buf *err)
{
    return mcp_start(c, NULL, err);
}

int mcp_client_ping(struct mcp_client *c, struct buf *err)
{
    if (mcp_client_start(c, err) != 0)
        return -1;
    char *res = NULL;
    enum mcp_status st = mcp_request(c, "ping", NULL, NULL, NULL, NULL, 0, &res, err);
    free(res);
    return st == MCP_OK ? 0 : -1;
}

static char *mcp_json_string(const cJSON *o, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(s) ? xstrdup(s->valuestring) : NULL;
}

#define MCP_PAGES_MAX 1000 /* tools/list pages followed at most (a server repeating a cursor) */

int mcp_tools_run(struct mcp_client *c, const int *cancel, const struct mcp_tool **tools,
                  struct buf *err)
{
    *tools = NULL;
    if (mcp_start(c, cancel, err) != 0)
        return -1;
    pthread_mutex_lock(&c->mu);
    int valid = c->tools_valid;
    pthread_mutex_unlock(&c->mu);
    if (valid) {
        *tools = c->tools;
        return c->n_tools;
    }
    struct mcp_tool *v = NULL;
    size_t n = 0, cap = 0;
    char *cursor = NULL;
    int rc = 0;
    for (int page = 0; rc == 0; page++) {
        if (page == MCP_PAGES_MAX) {
            buf_printf(err, "%s: tools/list went on for over %d pages", c->conf.name, page);
            rc = -1;
            break;
        }
        cJSON *params = cJSON_CreateObject();
        if (cursor)
            cJSON_AddStringToObject(params, "cursor", cursor);
        free(cursor);
        cursor = NULL;
        char *res = NULL;
        if (mcp_request(c, "tools/list", params, NULL, NULL, cancel, 0, &res, err) != MCP_OK) {
            rc = -1;
            break;
        }
        cJSON *r = cJSON_Parse(res);
        free(res);
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, "tools"), *t;
        cJSON_ArrayForEach(t, arr)
        {
            char *name = mcp_json_string(t, "name");
            if (!name)
                continue;
            XGROW(v, n + 1, cap);
            struct mcp_tool *tool = &v[n++];
            tool->name = name;
            tool->title = mcp_json_string(t, "title");
            tool->description = mcp_json_string(t, "description");
            if (!tool->description)
                tool->description = xstrdup("");
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
            tool->input_schema = cJSON_IsObject(schema) ? cJSON_PrintUnformatted(schema) : NULL;
            if (!tool->input_schema)
                tool->input_schema = xstrdup("{}");
        }
        cursor = mcp_json_string(r, "nextCursor");
        cJSON_Delete(r);
        if (!cursor || !*cursor)
            break;
    }
    free(cursor);
    pthread_mutex_lock(&c->mu);
    mcp_tools_clear(c);
    c->tools = v;
    c->n_tools = (int)n;
    c->tools_valid = rc == 0;
    pthread_mutex_unlock(&c->mu);
    *tools = c->tools;
    return rc == 0 ? (int)n : -1;
}

int mcp_client_tools(struct mcp_client *c, const struct mcp_tool **tools, struct buf *err)
{
    return mcp_tools_run(c, NULL, tools, err);
}

/* ---- tools/call ------------------------------------------------------------------------ */

void mcp_result_free(struct mcp_result *r)
{
    buf_free(&r->text);
    buf_free(&r->error);
    buf_free(&r->diag);
    free(r->structured);
    free(r->json);
    memset(r, 0, sizeof *r);
}

/* The result object's content blocks into r->text. */
static void mcp_result_read(struct mcp_result *r, const cJSON *res)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content"), *b;
    cJSON_ArrayForEach(b, content)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if (r->text.len)
            buf_appendc(&r->text, '\n');
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        const cJSON *res_item = cJSON_GetObjectItemCaseSensitive(b, "resource");
        if (strcmp(ty, "text") == 0 && cJSON_IsString(text))
            buf_appends(&r->text, text->valuestring);
        else if (strcmp(ty, "image") == 0 || strcmp(ty, "audio") == 0) {
            const cJSON *mime = cJSON_GetObjectItemCaseSensitive(b, "mimeType");
            const cJSON *data = cJSON_GetObjectItemCaseSensitive(b, "data");
            buf_printf(&r->text, "[%s %s, %zu bytes of base64]", ty,
                       cJSON_IsString(mime) ? mime->valuestring : "?",
                       cJSON_IsString(data) ? strlen(data->valuestring) : (size_t)0);
        } else if (strcmp(ty, "resource_link") == 0) {
            const cJSON *uri = cJSON_GetObjectItemCaseSensitive(b, "uri");
            buf_printf(&r->text, "[resource %s]", cJSON_IsString(uri) ? uri->valuestring : "?");
        } else if (strcmp(ty, "resource") == 0 && cJSON_IsObject(res_item)) {
            const cJSON *uri = cJSON_GetObjectItemCaseSensitive(res_item, "uri");
            const cJSON *rt = cJSON_GetObjectItemCaseSensitive(res_item, "text");
            if (cJSON_IsString(rt))
                buf_appends(&r->text, rt->valuestring);
            else
                buf_printf(&r->text, "[resource %s]", cJSON_IsString(uri) ? uri->valuestring : "?");
        } else
            buf_printf(&r->text, "[%s content]", *ty ? ty : "unknown");
    }
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(res, "isError");
    r->is_error = cJSON_IsTrue(ie);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
    if (sc && !cJSON_IsNull(sc))
        r->structured = cJSON_PrintUnformatted(sc);
}

enum mcp_status mcp_call_run(struct mcp_client *c, const char *tool, const char *arguments,
                             mcp_progress_fn progress, void *ud, const int *cancel,
                             double timeout, struct mcp_result *r)
{
    memset(r, 0, sizeof *r);
    cJSON *args = arguments && *arguments ? cJSON_Parse(arguments) : cJSON_CreateObject();
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(args);
        buf_printf(&r->error, "%s.%s: the arguments must be a JSON object", c->conf.name, tool);
        return r->status = MCP_FAILED;
    }
    struct buf why = BUF_INIT;
    if (mcp_start(c, cancel, &why) != 0) { /* the model is told it failed, the user why */
        cJSON_Delete(args);
        buf_printf(&r->error, "%s: the MCP server could not be started", c->conf.name);
        if (why.len)
            buf_printf(&r->diag, "; %s", why.data);
        buf_free(&why);
        return r->status = mcp_cancelled(cancel) ? MCP_CANCELLED : MCP_FAILED;
    }
    buf_free(&why);
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "name", tool);
    cJSON_AddItemToObject(params, "arguments", args);
    char *res = NULL;
    r->status = mcp_request_diag(c, "tools/call", params, progress, ud, cancel, timeout, &res,
                                 &r->error, &r->diag);
    if (r->status == MCP_OK) {
        cJSON *j = cJSON_Parse(res);
        if (!cJSON_IsObject(j)) {
            buf_printf(&r->error, "%s: tools/call's result is not an object", c->conf.name);
            r->status = MCP_FAILED;
        } else
            mcp_result_read(r, j);
        cJSON_Delete(j);
        r->json = res;
    }
    return r->status;
}

enum mcp_status mcp_client_call(struct mcp_client *c, const char *tool, const char *arguments,
                                mcp_progress_fn progress, void *ud, struct mcp_result *r)
{
    return mcp_call_run(c, tool, arguments, progress, ud, NULL, 0, r);
}

struct mcp_call {
    struct mcp_client *c;
    char *tool, *arguments;
    mcp_progress_fn progress;
    void *ud;
    int cancelled;          /* under c->mu */
    int done;               /* under c->mu */
    int pipe[2];
    pthread_t th;
    struct mcp_result r;
};

static void *mcp_call_thread(void *arg)
{
    struct mcp_call *k = arg;
    mcp_call_run(k->c, k->tool, k->arguments, k->progress, k->ud, &k->cancelled, 0, &k->r);
    pthread_mutex_lock(&k->c->mu);
    k->done = 1;
    pthread_mutex_unlock(&k->c->mu);
    char b = 1;
    while (write(k->pipe[1], &b, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

struct mcp_call *mcp_call_start(struct mcp_client *c, const char *tool, const char *arguments,
                                mcp_progress_fn progress, void *ud)
{
    struct mcp_call *k = xcalloc(1, sizeof *k);
    k->c = c;
    k->tool = xstrdup(tool);
    k->arguments = xstrdup(arguments ? arguments : "");
    k->progress = progress;
    k->ud = ud;
    if (pipe2(k->pipe, O_CLOEXEC) != 0 ||
        pthread_create(&k->th, NULL, mcp_call_thread, k) != 0) {
        /* run it here: the caller blocks, but gets its answer */
        if (k->pipe[0] <= 0 && pipe2(k->pipe, O_CLOEXEC) != 0)
            xmalloc_die(0);
        mcp_call_thread(k);
        k->th = 0;
    }
    return k;
}

int mcp_call_fd(const struct mcp_call *k)
{
    return k->pipe[0];
}

int mcp_call_done(const struct mcp_call *k)
{
    pthread_mutex_lock(&k->c->mu);
    int d = k->done;
    pthread_mutex_unlock(&k->c->mu);
    return d;
}

void mcp_call_cancel(struct mcp_call *k)
{
    pthread_mutex_lock(&k->c->mu);
    __atomic_store_n(&k->cancelled, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&k->c->cv);
    pthread_mutex_unlock(&k->c->mu);
}

void mcp_call_finish(struct mcp_call *k, struct mcp_result *r)
{
    if (k->th)
        pthread_join(k->th, NULL);
    *r = k->r;
    close(k->pipe[0]);
    close(k->pipe[1]);
    free(k->tool);
    free(k->arguments);
    free(k);
}

/* ---- $VAR expansion -------------------------------------------------------------------- */

char *mcp_expand(const char *s, const char *key)
{
    struct buf b = BUF_INIT;
    for (const char *p = s; *p;) {
        if (key && strncmp(p, "{key}", 5) == 0) {
            buf_appends(&b, key);
            p += 5;
        } else if (*p == '$' && (p[1] == '{' || p[1] == '_' || (p[1] >= 'A' && p[1] <= 'Z') ||
                                 (p[1] >= 'a' && p[1] <= 'z'))) {
            const char *q = p + 1;
            int brace = *q == '{';
            q += brace;
            const char *start = q;
            while (*q == '_' || (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                   (*q >= '0' && *q <= '9'))
                q++;
            if (brace && *q != '}') {
                buf_appendc(&b, *p++);
                continue;
            }
            char *name = xstrndup(start, (size_t)(q - start));
            const char *v = getenv(name);
            free(name);
            if (v)
                buf_appends(&b, v);
            p = q + brace;
        } else
            buf_appendc(&b, *p++);
    }
    char *r = buf_take(&b);
    return r ? r : xstrdup("");
}
