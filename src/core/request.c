/* request.c - profile + messages -> the wire request, for the main model and the fallback. */
#include "config.h"
#include "core/request.h"
#include "net/probe.h"
#include "net/ratelimit.h"
#include "store/store.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *request_profile(const struct conf *c)
{
    return c->profile ? c->profile : "default";
}

void request_api(struct api_request *ar, const struct conf *c, const struct api_message *m,
                 size_t n)
{
    memset(ar, 0, sizeof *ar);
    ar->model = c->model;
    ar->messages = m;
    ar->n_messages = n;
    ar->max_tokens_field = c->max_tokens_field;
#define REQUEST_PARAM_COPY(f, kind, min, max, opt, shrt, metavar, help) \
    API_PARAM_COPY_##kind(ar, c, f)
    API_SAMPLING(REQUEST_PARAM_COPY)
#undef REQUEST_PARAM_COPY
    int effort = api_effort_parse(c->reasoning_effort);
    ar->reasoning_effort = effort > 0 ? effort : API_EFFORT_NONE;
    ar->stream = 1;
    ar->include_usage = c->include_usage;
    request_learnt_apply(ar, c);
}

/* ---- what servers refused (request_learn) ---- */

struct learnt {
    char *host, *model, *fix;
};
static struct learnt *learnt;
static size_t n_learnt, cap_learnt;
static int learnt_loaded;

static char *request_learnt_path(void)
{
    char *dir = conf_dir("state");
    char *p = xasprintf("%s/learnt", dir);
    free(dir);
    return p;
}

static void request_learnt_add(const char *host, const char *model, const char *fix)
{
    XGROW(learnt, n_learnt + 1, cap_learnt);
    learnt[n_learnt++] = (struct learnt){xstrdup(host), xstrdup(model), xstrdup(fix)};
}

/* The file, read once a process (at most 1 MiB; a malformed line is skipped). */
static void request_learnt_load(void)
{
    if (learnt_loaded)
        return;
    learnt_loaded = 1;
    char *path = request_learnt_path();
    size_t len = 0;
    char *text = util_read_file(path, &len, 1 << 20);
    free(path);
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2 || strchr(t2 + 1, '\t'))
            continue;
        *t1 = *t2 = '\0';
        request_learnt_add(line, t1 + 1, t2 + 1);
    }
    free(text);
}

void request_learnt_apply(struct api_request *ar, const struct conf *c)
{
    request_learnt_load();
    if (!n_learnt || !ar->model)
        return;
    char *host = conf_host(c);
    for (size_t i = 0; i < n_learnt; i++) {
        const struct learnt *l = &learnt[i];
        if (strcmp(l->host, host) != 0 || strcmp(l->model, ar->model) != 0)
            continue;
        if (strcmp(l->fix, "max_completion_tokens") == 0 || strcmp(l->fix, "max_tokens") == 0)
            ar->max_tokens_field = strcmp(l->fix, "max_tokens") == 0 ? "max_tokens"
                                                                     : "max_completion_tokens";
        else if (strcmp(l->fix, "-reasoning_effort") == 0)
            ar->reasoning_effort = API_EFFORT_NONE;
        for (size_t k = 0; l->fix[0] == '-' && k < API_N_PARAMS; k++) {
            const struct api_param *p = &api_params[k];
            if (strcmp(l->fix + 1, p->name) != 0)
                continue;
            if (p->flagged)
                *(int *)((char *)ar + p->has_off) = 0;
            else
                *(long *)((char *)ar + p->off) = 0;
        }
    }
    free(host);
}

/* The fix r's 400 asks for, given what c sends now ("" when none). */
static void request_learn_fix(const struct conf *c, const struct net_result *r, char fix[40])
{
    fix[0] = '\0';
    if (r->outcome != API_ERR_HTTP || r->status != 400 || !r->error_param[0] ||
        (strcmp(r->error_code, "unsupported_parameter") != 0 &&
         strcmp(r->error_code, "unsupported_value") != 0))
        return;
    struct api_request ar;
    request_api(&ar, c, NULL, 0);
    const char *field = ar.max_tokens_field ? ar.max_tokens_field : "max_tokens";
    const char *param = r->error_param;
    if (strcmp(param, "max_tokens") == 0 || strcmp(param, "max_completion_tokens") == 0) {
        /* the field changes once for a model: a server refusing both is not chased */
        char *host = conf_host(c);
        int known = 0;
        for (size_t i = 0; i < n_learnt; i++)
            known |= !ar.model || (strcmp(learnt[i].host, host) == 0 &&
                                   strcmp(learnt[i].model, ar.model) == 0 &&
                                   strncmp(learnt[i].fix, "max_", 4) == 0);
        free(host);
        if (!known && ar.max_tokens > 0 && strcmp(param, field) == 0)
            snprintf(fix, 40, "%s", strcmp(field, "max_tokens") == 0 ? "max_completion_tokens"
                                                                     : "max_tokens");
        return;
    }
    if (strcmp(param, "reasoning_effort") == 0 && ar.reasoning_effort) {
        snprintf(fix, 40, "-%s", param);
        return;
    }
    for (size_t k = 0; k < API_N_PARAMS; k++) {
        const struct api_param *p = &api_params[k];
        const char *base = (const char *)&ar;
        int sent = p->flagged ? *(const int *)(base + p->has_off)
                              : *(const long *)(base + p->off) > 0;
        if (sent && strcmp(param, p->name) == 0) {
            snprintf(fix, 40, "-%s", param);
            return;
        }
    }
}

int request_learn(const struct conf *c, const struct net_result *r, int save)
{
    char fix[40];
    request_learn_fix(c, r, fix);
    if (!fix[0] || !c->model || strchr(c->model, '\t') || strchr(c->model, '\n'))
        return 0;
    char *host = conf_host(c);
    request_learnt_add(host, c->model, fix);
    if (save) {
        char *dir = conf_dir("state");
        char *path = request_learnt_path();
        int fd = util_mkdir_p(dir, 0700) == 0
                     ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
        if (fd >= 0) {
            char *line = xasprintf("%s\t%s\t%s\n", host, c->model, fix);
            (void)util_write_all(fd, line, strlen(line)); /* one write: lines never mix */
            free(line);
            close(fd);
        }
        free(path);
        free(dir);
    }
    free(host);
    return 1;
}

char *request_learnt_note(const struct conf *c, const struct net_result *r)
{
    const char *p = r->error_param;
    if (strcmp(p, "max_tokens") == 0 || strcmp(p, "max_completion_tokens") == 0)
        return xasprintf("%s refuses %s: sent again with %s (remembered)", c->model, p,
                         strcmp(p, "max_tokens") == 0 ? "max_completion_tokens" : "max_tokens");
    return xasprintf("%s refuses %s: sent again without it (remembered)", c->model, p);
}

/* The URL of a request for model: the base URL and the dialect's path. */
char *request_url_model(const struct conf *c, const char *model)
{
    const char *b = c->base_url;
    size_t n = strlen(b);
    while (n && b[n - 1] == '/')
        n--;
    char *path = dialect_path(conf_dialect(c), model);
    char *url = xasprintf("%.*s%s", (int)n, b, path);
    free(path);
    return url;
}

char *request_url(const struct conf *c)
{
    return request_url_model(c, c->model);
}

char *request_body(const struct conf *c, const struct api_request *ar)
{
    char *body = conf_dialect(c)->request_json(ar);
    if (!c->extra_body || !*c->extra_body)
        return body; /* byte for byte the dialect's: the cache keys of stored answers hash it */
    /* extra_body's members at the top level, after the dialect's; one of the same name
     * replaces tokterm's (conf_set checked it is an object) */
    cJSON *o = cJSON_Parse(body), *extra = cJSON_Parse(c->extra_body);
    if (!cJSON_IsObject(o) || !cJSON_IsObject(extra)) {
        cJSON_Delete(o);
        cJSON_Delete(extra);
        return body;
    }
    while (extra->child) {
        cJSON *m = cJSON_DetachItemViaPointer(extra, extra->child);
        char *name = xstrdup(m->string); /* replacing frees m->string before copying it */
        if (cJSON_GetObjectItemCaseSensitive(o, name))
            cJSON_ReplaceItemInObjectCaseSensitive(o, name, m);
        else
            cJSON_AddItemToObject(o, name, m);
        free(name);
    }
    cJSON_Delete(extra);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        xmalloc_die(strlen(body) + strlen(c->extra_body));
    free(body);
    body = xstrdup(s);
    cJSON_free(s);
    return body;
}

char *request_auth(const struct conf *c, const char *key)
{
    return strcasecmp(c->auth_header, "Authorization") == 0 ? xasprintf("Bearer %s", key)
                                                            : xstrdup(key);
}

char *request_quota_name(const struct conf *c)
{
    char *host = conf_host(c);
    char *name = xasprintf("%s|%s", request_profile(c), host);
    free(host);
    return name;
}

void request_cache_key(const struct conf *c, const char *model, const char *body,
                       unsigned char key[32])
{
    const struct dialect *d = conf_dialect(c);
    const char *url = c->base_url ? c->base_url : "(null)";
    /* Gemini's model is in the URL, not the body: until 2026-12 gemini-2.5-pro was answered
     * from gemini-2.5-flash's cached answers */
    char *full = c->base_url && d->path && strstr(d->path, "{model}")
                     ? request_url_model(c, model ? model : c->model)
                     : NULL;
    if (full)
        url = full;
    /* openai's key is what it was before there were dialects, so its entries stay valid */
    int named = d != &dialect_openai;
    /* the canonical text "tokterm-cache-v1\n[dialect ]URL\nBODY" hashed in pieces: the body,
     * hundreds of kB on a resume, is not copied after its head into fresh pages first */
    const char *parts[] = {"tokterm-cache-v1\n", named ? d->name : "", named ? " " : "", url,
                           "\n", body};
    size_t lens[TT_ARRAY_LEN(parts)];
    for (size_t i = 0; i < TT_ARRAY_LEN(parts); i++)
        lens[i] = strlen(parts[i]);
    store_cache_key_parts(parts, lens, TT_ARRAY_LEN(parts), key);
    free(full);
}

struct net_request *request_new(const struct conf *c, char *body, const struct request_keys *k,
                                long max_tokens)
{
    const char *key = k ? k->key : NULL;
    int n_pool = k ? k->n_pool : 0;
    struct net_request *rq = xcalloc(1, sizeof *rq);
    rq->url = request_url(c);
    rq->body = body;
    rq->dialect = conf_dialect(c);
    if (c->auth_header && *c->auth_header && (key || n_pool)) {
        rq->auth_name = xstrdup(c->auth_header);
        if (key)
            rq->auth_value = request_auth(c, key);
    }
    if (n_pool) {
        rq->keys = xcalloc((size_t)n_pool, sizeof *rq->keys);
        rq->n_keys = (size_t)n_pool;
        for (int i = 0; i < n_pool; i++) {
            rq->keys[i].label = xstrdup(k->labels[i]);
            rq->keys[i].auth_value = request_auth(c, k->values[i]);
        }
    }
    rq->connect_timeout_ms = c->connect_timeout_ms;
    rq->idle_timeout_s = c->idle_timeout;
    rq->max_time_s = c->max_time;
    rq->max_answer_bytes = (size_t)c->max_answer_mb << 20;
    rq->cacert = c->cacert ? xstrdup(c->cacert) : NULL;
    rq->insecure = c->insecure;
    rq->breaker_failures = (int)c->breaker_failures;
    rq->breaker_cooldown = c->breaker_cooldown;
    ratelimit_policy_init(&rq->policy);
    rq->policy.max_retries = (int)c->max_retries;
    rq->policy.max_retry_wait = c->max_retry_wait;
    rq->policy.max_rate_wait = c->max_rate_wait;
    rq->has_policy = 1;
    rq->rpm = c->rpm;
    rq->tpm = c->tpm;
    /* The tokens it is paced by: a scan of the body, 0.3 ms of a 337 kB one. While libcurl
     * still loads (a one-shot), the request cannot leave before the load ends: counted here,
     * beside the load. Else by the network thread, when it first paces the request: not on
     * the way of this thread, whose work is then what the request waits for (a -c -p of a
     * long conversation: 1-2 % less wall in bench/resume/compare.py, session 41). */
    rq->est_answer = max_tokens;
    rq->est_pending = 1;
    if (!net_library_loaded()) {
        rq->est_tokens = ratelimit_est_tokens(body, max_tokens);
        rq->est_pending = 0;
    }
    rq->key_env = c->api_key_env ? xstrdup(c->api_key_env) : NULL;
    rq->quota_name = request_quota_name(c);
    if (c->state && *c->state) {
        rq->state_url = xstrdup(c->state);
        rq->state_password = c->state_password ? xstrdup(c->state_password) : NULL;
    }
    return rq;
}

struct net_request *request_fallback(const struct conf *c, const struct api_request *ar,
                                     const struct request_keys *k, const struct conf *fc,
                                     const char *fkey)
{
    const char *model = fc ? fc->model : c->fallback_model;
    if (!fc && !(model && *model))
        return NULL;
    /* Same messages and parameters, with the fallback's model. */
    struct api_request far = *ar;
    far.model = model;
    char *body = request_body(fc ? fc : c, &far); /* the fallback's dialect */
    struct net_request *fb;
    if (fc) {
        /* another profile: its server, its key, a quota of its own starting from nothing */
        struct request_keys fk = {.key = fkey};
        fb = request_new(fc, body, &fk, fc->max_tokens);
        fb->fallback_name = xasprintf("profile %s", fc->profile ? fc->profile : "?");
    } else {
        /* the same endpoint with another model: a breaker of its own */
        fb = request_new(c, body, k, c->max_tokens);
        free(fb->url);
        fb->url = request_url_model(c, model); /* a dialect may name the model in the path */
        char *name = xasprintf("%s|%s", fb->quota_name, model);
        free(fb->quota_name);
        fb->quota_name = name;
        fb->fallback_name = xasprintf("model %s", model);
        fb->breaker_key = xasprintf("%s#%s", fb->url, model); /* its own breaker in Redis too */
    }
    return fb;
}

void request_quota_seed(struct net_request *rq, struct store *st, const struct conf *c)
{
    if (!st)
        return;
    struct store_quota q;
    memset(&q, 0, sizeof q);
    if (store_quota_get(st, request_profile(c), rq->quota_name, &q) == 0 && q.extra)
        rq->quota_seed = xstrdup(q.extra);
    store_quota_clear(&q);
}

void request_quota_save(struct store *st, const struct conf *c, const char *quota_line)
{
    if (!st || !quota_line || !*quota_line)
        return;
    char *name = request_quota_name(c);
    struct store_quota q = {-1, -1, -1, -1, -1, -1, -1, (char *)quota_line, 0};
    (void)store_quota_put(st, request_profile(c), name, &q);
    free(name);
}
