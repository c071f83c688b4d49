/* otlp.c - spans as OTLP/HTTP JSON, batched on a thread of their own. */
#include "config.h"
#include "net/otlp.h"

#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/curl_dl.h"
#include "net/net.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct otlp_item {
    cJSON *span;
};

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int on, stopping;
    char *url, *service;
    struct curl_slist *headers;
    cJSON **q;
    size_t n;
    unsigned long dropped, failed;
    char why[256];
} otlp = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

static int otlp_true(const char *v)
{
    return v && (!strcasecmp(v, "true") || !strcmp(v, "1"));
}

/* Random hex id of n bytes. */
static void otlp_id(char *out, size_t n)
{
    static unsigned long long s;
    if (!s)
        s = (unsigned long long)time(NULL) ^ ((unsigned long long)(uintptr_t)&s << 16) ^
            (unsigned long long)(util_now() * 1e9);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        snprintf(out + 2 * i, 3, "%02x", (unsigned)(s & 0xff));
    }
}

static void otlp_attr_s(cJSON *a, const char *k, const char *v)
{
    if (!v)
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", k);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "value"), "stringValue", v);
    cJSON_AddItemToArray(a, o);
}

static void otlp_attr_i(cJSON *a, const char *k, long long v)
{
    char n[32];
    snprintf(n, sizeof n, "%lld", v); /* OTLP JSON: 64-bit integers as strings */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", k);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "value"), "intValue", n);
    cJSON_AddItemToArray(a, o);
}

static void otlp_attr_d(cJSON *a, const char *k, double v)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", k);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "value"), "doubleValue", v);
    cJSON_AddItemToArray(a, o);
}

static void otlp_time(cJSON *o, const char *k, double unix_s)
{
    char n[32];
    snprintf(n, sizeof n, "%.0f", unix_s * 1e9);
    cJSON_AddStringToObject(o, k, n);
}

static void otlp_event(cJSON *events, const char *name, double at, cJSON *attrs)
{
    cJSON *e = cJSON_CreateObject();
    otlp_time(e, "timeUnixNano", at);
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddItemToObject(e, "attributes", attrs ? attrs : cJSON_CreateArray());
    cJSON_AddItemToArray(events, e);
}

/* POST one batch; 0, or -1 with otlp.why set. */
static int otlp_post(const char *body)
{
    const char *why = NULL;
    if (curl_dl_load(&why) != 0) {
        snprintf(otlp.why, sizeof otlp.why, "%s", why ? why : "libcurl could not be loaded");
        return -1;
    }
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(otlp.why, sizeof otlp.why, "curl_easy_init failed");
        return -1;
    }
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, otlp.url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, otlp.headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(e, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    /* the collector's reply is not read (until 2026-12 libcurl wrote it to stdout: a "{}"
     * after the answer, --json's lines no longer JSON) */
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, curl_dl_discard);
    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    if (rc != CURLE_OK) {
        snprintf(otlp.why, sizeof otlp.why, "%s", *err ? err : curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status >= 300) {
        snprintf(otlp.why, sizeof otlp.why, "HTTP %ld", status);
        return -1;
    }
    return 0;
}

/* Send the spans taken from the queue as one ExportTraceServiceRequest. */
static void otlp_send(cJSON **spans, size_t n)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *rs = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "resourceSpans"), rs);
    cJSON *attrs = cJSON_AddArrayToObject(cJSON_AddObjectToObject(rs, "resource"),
                                          "attributes");
    otlp_attr_s(attrs, "service.name", otlp.service);
    otlp_attr_s(attrs, "telemetry.sdk.name", "tokterm");
    otlp_attr_s(attrs, "telemetry.sdk.language", "c");
    cJSON *ss = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(rs, "scopeSpans"), ss);
    cJSON *scope = cJSON_AddObjectToObject(ss, "scope");
    cJSON_AddStringToObject(scope, "name", "tokterm");
    cJSON_AddStringToObject(scope, "version", PACKAGE_VERSION);
    cJSON *arr = cJSON_AddArrayToObject(ss, "spans");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, spans[i]);
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (body && otlp_post(body) != 0)
        otlp.failed += n;
    free(body);
}

static void *otlp_run(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&otlp.mu);
    for (;;) {
        if (!otlp.n && otlp.stopping)
            break;
        if (otlp.n < OTLP_BATCH && !otlp.stopping) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1; /* a batch a second at most, or OTLP_BATCH spans */
            pthread_cond_timedwait(&otlp.cv, &otlp.mu, &until);
            if (!otlp.n)
                continue;
        }
        size_t n = otlp.n < OTLP_BATCH ? otlp.n : OTLP_BATCH;
        cJSON **take = xreallocarray(NULL, n, sizeof *take);
        memcpy(take, otlp.q, n * sizeof *take);
        memmove(otlp.q, otlp.q + n, (otlp.n - n) * sizeof *take);
        otlp.n -= n;
        pthread_mutex_unlock(&otlp.mu);
        otlp_send(take, n); /* the spans belong to the request now */
        free(take);
        pthread_mutex_lock(&otlp.mu);
    }
    pthread_mutex_unlock(&otlp.mu);
    return NULL;
}

static void otlp_init(void)
{
    if (otlp_true(getenv("OTEL_SDK_DISABLED")))
        return;
    const char *t = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    const char *b = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    if (t && *t)
        otlp.url = xstrdup(t);
    else if (b && *b)
        otlp.url = xasprintf("%s%sv1/traces", b, b[strlen(b) - 1] == '/' ? "" : "/");
    else
        return;
    const char *sn = getenv("OTEL_SERVICE_NAME");
    otlp.service = xstrdup(sn && *sn ? sn : "tokterm");
    otlp.headers = curl_slist_append(NULL, "Content-Type: application/json");
    const char *h = getenv("OTEL_EXPORTER_OTLP_HEADERS");
    for (const char *p = h; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq && eq > p) { /* "k=v" -> "k: v", percent-escapes decoded */
            struct buf line = BUF_INIT;
            buf_append(&line, p, (size_t)(eq - p));
            buf_appends(&line, ": ");
            for (const char *c = eq + 1; c < p + len; c++) {
                unsigned v;
                if (*c == '%' && c + 2 < p + len && sscanf(c + 1, "%2x", &v) == 1) {
                    char ch = (char)v;
                    buf_append(&line, &ch, 1);
                    c += 2;
                } else {
                    buf_append(&line, c, 1);
                }
            }
            if (!strpbrk(buf_str(&line), "\r\n"))
                otlp.headers = curl_slist_append(otlp.headers, buf_str(&line));
            buf_free(&line);
        }
        p = end ? end + 1 : NULL;
    }
    const char *why = NULL;
    if (curl_dl_load(&why) != 0 || pthread_create(&otlp.thread, NULL, otlp_run, NULL) != 0) {
        fprintf(stderr, "tokterm: traces are not exported: %s\n",
                why ? why : "cannot start the exporter's thread");
        return;
    }
    otlp.q = xreallocarray(NULL, OTLP_QUEUE_MAX, sizeof *otlp.q);
    otlp.on = 1;
    atexit(otlp_shutdown);
}

void otlp_span(const struct otlp_span *s)
{
    pthread_once(&otlp.once, otlp_init);
    if (!otlp.on)
        return;
    cJSON *sp = cJSON_CreateObject();
    char trace[33], span[17];
    otlp_id(trace, 16);
    otlp_id(span, 8);
    cJSON_AddStringToObject(sp, "traceId", trace);
    cJSON_AddStringToObject(sp, "spanId", span);
    char name[192];
    snprintf(name, sizeof name, "chat %s", s->request_model ? s->request_model : "");
    cJSON_AddStringToObject(sp, "name", name);
    cJSON_AddNumberToObject(sp, "kind", 3); /* SPAN_KIND_CLIENT */
    otlp_time(sp, "startTimeUnixNano", s->start);
    otlp_time(sp, "endTimeUnixNano", s->end);
    cJSON *a = cJSON_AddArrayToObject(sp, "attributes");
    otlp_attr_s(a, "gen_ai.operation.name", "chat");
    otlp_attr_s(a, "gen_ai.system", s->system ? s->system : "openai");
    otlp_attr_s(a, "gen_ai.request.model", s->request_model);
    otlp_attr_s(a, "gen_ai.response.model", s->response_model);
    if (s->finish_reason) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", "gen_ai.response.finish_reasons");
        cJSON *vals = cJSON_AddArrayToObject(
            cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "value"), "arrayValue"),
            "values");
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "stringValue", s->finish_reason);
        cJSON_AddItemToArray(vals, v);
        cJSON_AddItemToArray(a, o);
    }
    if (s->input_tokens >= 0)
        otlp_attr_i(a, "gen_ai.usage.input_tokens", s->input_tokens);
    if (s->output_tokens >= 0)
        otlp_attr_i(a, "gen_ai.usage.output_tokens", s->output_tokens);
    otlp_attr_s(a, "server.address", s->server);
    if (s->status)
        otlp_attr_i(a, "http.response.status_code", s->status);
    static const char *const tk[] = {"tokterm.dns_seconds", "tokterm.connect_seconds",
                                     "tokterm.tls_seconds", "tokterm.time_to_first_token_seconds"};
    const double tv[] = {s->dns, s->connect, s->tls, s->ttft};
    for (int i = 0; i < 4; i++)
        if (tv[i] >= 0)
            otlp_attr_d(a, tk[i], tv[i]);
    otlp_attr_i(a, "tokterm.retries", s->retries);
    otlp_attr_i(a, "tokterm.rate_limited", s->rate_limited);
    if (s->cached)
        otlp_attr_i(a, "tokterm.cached", 1);
    cJSON *ev = cJSON_AddArrayToObject(sp, "events");
    if (s->ttft >= 0)
        otlp_event(ev, "gen_ai.first_token", s->start + s->ttft, NULL);
    for (int i = 1; i <= s->retries; i++) {
        cJSON *ea = cJSON_CreateArray();
        otlp_attr_i(ea, "tokterm.attempt", i + 1);
        otlp_event(ev, "tokterm.retry", s->start, ea);
    }
    cJSON *st = cJSON_AddObjectToObject(sp, "status");
    if (s->error) {
        cJSON_AddNumberToObject(st, "code", 2); /* STATUS_CODE_ERROR */
        cJSON_AddStringToObject(st, "message", s->error);
    }
    pthread_mutex_lock(&otlp.mu);
    if (otlp.n < OTLP_QUEUE_MAX && !otlp.stopping) {
        otlp.q[otlp.n++] = sp;
        sp = NULL;
        if (otlp.n >= OTLP_BATCH)
            pthread_cond_signal(&otlp.cv);
    } else {
        otlp.dropped++;
    }
    pthread_mutex_unlock(&otlp.mu);
    cJSON_Delete(sp);
}

void otlp_result(const struct net_result *r, const char *api, const char *model,
                 const char *server, int retries)
{
    pthread_once(&otlp.once, otlp_init);
    if (!otlp.on)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double end = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    api = api ? api : "openai";
    const char *system = !strcmp(api, "gemini")      ? "gcp.gemini"
                         : !strcmp(api, "responses") ? "openai"
                                                     : api;
    int timed = !r->cached;
    struct otlp_span sp = {system, model, r->model[0] ? r->model : NULL,
                           r->finish[0] ? r->finish : NULL, server,
                           r->outcome == API_OK ? NULL : r->error ? r->error : "failed",
                           r->status, end - (r->t.total > 0 ? r->t.total : 0), end,
                           r->t.ttft, timed ? r->t.dns : -1, timed ? r->t.connect : -1,
                           timed ? r->t.tls : -1, r->usage.present ? r->usage.prompt : -1,
                           r->usage.present ? r->usage.completion : -1, retries,
                           r->rate_limited, r->cached};
    otlp_span(&sp);
}

void otlp_shutdown(void)
{
    pthread_mutex_lock(&otlp.mu);
    if (!otlp.on || otlp.stopping) {
        pthread_mutex_unlock(&otlp.mu);
        return;
    }
    otlp.stopping = 1;
    pthread_cond_signal(&otlp.cv);
    pthread_mutex_unlock(&otlp.mu);
    pthread_join(otlp.thread, NULL);
    if (otlp.failed || otlp.dropped) {
        char *shown = util_url_shown(otlp.url); /* never its user:password */
        fprintf(stderr, "tokterm: warning: %lu span%s not exported to %s%s%s\n",
                otlp.failed + otlp.dropped, otlp.failed + otlp.dropped == 1 ? "" : "s",
                shown, *otlp.why ? ": " : "", otlp.why);
        free(shown);
    }
    curl_slist_free_all(otlp.headers);
    free(otlp.q);
    free(otlp.url);
    free(otlp.service);
    otlp.on = 0;
}
