/* models.c - the models a server offers, parsed per dialect and cached (see models.h). */
#include "config.h"
#include "core/models.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "core/conf.h"
#include "net/probe.h"
#include "proto/dialect.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MODELS_BODY_MAX ((size_t)8 << 20) /* one page of a list */
#define MODELS_MAX_PAGES 50
#define MODELS_MAX ((size_t)100000)

static void models_add(struct model_list *l, const char *id, const char *name, long in,
                       long out)
{
    if (l->n >= MODELS_MAX)
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    struct model_info *m = &l->v[l->n++];
    m->id = xstrdup(id);
    m->name = name && *name ? xstrdup(name) : NULL;
    m->input_limit = in > 0 ? in : 0;
    m->output_limit = out > 0 ? out : 0;
}

static const char *models_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static long models_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e12 ? (long)v->valuedouble
                                                                              : 0;
}

/* A Gemini model that can answer a chat (generateContent), or one that does not say. */
static int models_gemini_chat(const cJSON *m)
{
    const cJSON *how = cJSON_GetObjectItemCaseSensitive(m, "supportedGenerationMethods");
    if (!cJSON_IsArray(how))
        return 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, how)
        if (cJSON_IsString(x) && strcmp(x->valuestring, "generateContent") == 0)
            return 1;
    return 0;
}

/* "name=value" with value percent-escaped outside [A-Za-z0-9._~-]. */
static char *models_query(const char *name, const char *value)
{
    struct buf b = BUF_INIT;
    buf_printf(&b, "%s=", name);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("._~-", *p))
            buf_appendc(&b, (char)*p);
        else
            buf_printf(&b, "%%%02X", *p);
    }
    return buf_take(&b);
}

int models_parse(const char *source, const char *body, size_t n, struct model_list *l,
                 char **next)
{
    if (next)
        *next = NULL;
    cJSON *root = cJSON_ParseWithLength(body, n);
    if (!root)
        return -1;
    int gemini = strcmp(source, "gemini") == 0, ollama = strcmp(source, "ollama") == 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, gemini || ollama ? "models"
                                                                               : "data");
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        const char *id = models_str(m, gemini || ollama ? "name" : "id");
        if (!id)
            continue;
        if (gemini) {
            if (!models_gemini_chat(m))
                continue;
            if (strncmp(id, "models/", 7) == 0 && id[7])
                id += 7;
            models_add(l, id, models_str(m, "displayName"), models_num(m, "inputTokenLimit"),
                       models_num(m, "outputTokenLimit"));
        } else {
            models_add(l, id, models_str(m, "display_name"), 0, 0);
        }
    }
    if (next && gemini) { /* the next page's query: Gemini's token, Anthropic's last id */
        const char *tok = models_str(root, "nextPageToken");
        *next = tok ? models_query("pageToken", tok) : NULL;
    } else if (next && strcmp(source, "anthropic") == 0 &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "has_more"))) {
        const char *last = models_str(root, "last_id");
        *next = last ? models_query("after_id", last) : NULL;
    }
    cJSON_Delete(root);
    return 0;
}

int models_has(const struct model_list *l, const char *model)
{
    if (!model)
        return 0;
    if (strncmp(model, "models/", 7) == 0)
        model += 7;
    for (size_t i = 0; i < l->n; i++) {
        const char *id = l->v[i].id;
        if (strncmp(id, "models/", 7) == 0)
            id += 7;
        if (strcmp(id, model) == 0)
            return 1;
    }
    return 0;
}

int models_id_typable(const char *id)
{
    size_t n = strlen(id);
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, id, n);
    int ok = n && b.len == n && memcmp(buf_str(&b), id, n) == 0 && !strpbrk(id, "\t\n ");
    buf_free(&b);
    return ok;
}

void model_list_free(struct model_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].id);
        free(l->v[i].name);
    }
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

char *models_headers(const struct conf *c, const char *key, const char **out)
{
    const struct dialect *dl = conf_dialect(c);
    char *auth = NULL;
    if (key && *key && c->auth_header && *c->auth_header)
        auth = strcasecmp(c->auth_header, "Authorization") == 0
                   ? xasprintf("Authorization: Bearer %s", key)
                   : xasprintf("%s: %s", c->auth_header, key);
    size_t nh = 0;
    if (auth)
        out[nh++] = auth;
    out[nh++] = "Accept: application/json";
    for (size_t i = 0; i < DIALECT_MAX_HEADERS && dl->headers[i]; i++)
        out[nh++] = dl->headers[i]; /* anthropic-version */
    out[nh] = NULL;
    return auth;
}

char *models_display_url(const char *url)
{
    const char *p = strstr(url, "://");
    const char *host = p ? p + 3 : url;
    const char *at = NULL;
    for (const char *q = host; *q && *q != '/'; q++)
        if (*q == '@')
            at = q;
    if (!at)
        return xstrdup(url);
    return xasprintf("%.*s%s", (int)(host - url), url, at + 1);
}

/* The base URL without trailing slashes, malloc'd; when shown, without user:password@ too
 * (what the cache is keyed by and holds, what messages say). */
static char *models_base(const struct conf *c, int shown)
{
    const char *u = c->base_url ? c->base_url : "";
    char *b = shown ? models_display_url(u) : xstrdup(u);
    size_t bl = strlen(b);
    while (bl && b[bl - 1] == '/')
        b[--bl] = '\0';
    return b;
}

/* Ollama's default port in the base URL's authority. */
static int models_ollama_port(const struct conf *c)
{
    const char *b = c->base_url ? c->base_url : "";
    const char *p = strstr(b, "://");
    p = p ? p + 3 : b;
    size_t n = strcspn(p, "/?#");
    return n >= 6 && memcmp(p + n - 6, ":11434", 6) == 0;
}

static char *models_cache_path(const struct conf *c)
{
    char *b = models_base(c, 1);
    unsigned long long h = 1469598103934665603ULL; /* FNV-1a of "dialect base" */
    const char *api = conf_dialect(c)->name;
    for (const char *s = api; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h = (h ^ ' ') * 1099511628211ULL;
    for (const char *s = b; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    free(b);
    char *dir = conf_dir("cache");
    char *path = xasprintf("%s/models/%s-%016llx.json", dir, api, h);
    free(dir);
    return path;
}

static int models_cache_read(const struct conf *c, struct model_list *l)
{
    char *path = models_cache_path(c);
    size_t n;
    char *text = util_read_file(path, &n, (size_t)64 << 20);
    free(path);
    if (!text)
        return -1;
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    char *b = models_base(c, 1);
    const char *cb = root ? models_str(root, "base_url") : NULL;
    const char *src = root ? models_str(root, "source") : NULL;
    const cJSON *f = root ? cJSON_GetObjectItemCaseSensitive(root, "fetched") : NULL;
    const cJSON *arr = root ? cJSON_GetObjectItemCaseSensitive(root, "models") : NULL;
    int bad = !cb || strcmp(cb, b) != 0 || !src || !cJSON_IsNumber(f) || !cJSON_IsArray(arr);
    free(b);
    if (bad) {
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        const char *id = models_str(m, "id");
        if (id)
            models_add(l, id, models_str(m, "name"), models_num(m, "input_token_limit"),
                       models_num(m, "output_token_limit"));
    }
    snprintf(l->source, sizeof l->source, "%s", src);
    l->fetched = f->valuedouble;
    l->from_cache = 1;
    cJSON_Delete(root);
    return 0;
}

/* The list as JSON objects (the cache file's "models" and `tokterm models --json`). */
static cJSON *models_json_array(const struct model_list *l)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < l->n; i++) {
        const struct model_info *m = &l->v[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", m->id);
        if (m->name)
            cJSON_AddStringToObject(o, "name", m->name);
        if (m->input_limit)
            cJSON_AddNumberToObject(o, "input_token_limit", (double)m->input_limit);
        if (m->output_limit)
            cJSON_AddNumberToObject(o, "output_token_limit", (double)m->output_limit);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

char *models_json(const struct model_list *l)
{
    cJSON *arr = models_json_array(l);
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

/* Write the cache file (a temporary file renamed over it); a failure only loses the cache. */
static void models_cache_write(const struct conf *c, const struct model_list *l)
{
    char *path = models_cache_path(c);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    int ok = util_mkdir_p(path, 0700) == 0;
    *slash = '/';
    cJSON *root = cJSON_CreateObject();
    char *base = models_base(c, 1); /* no user:password@ on disk */
    cJSON_AddStringToObject(root, "base_url", base);
    free(base);
    cJSON_AddStringToObject(root, "source", l->source);
    cJSON_AddNumberToObject(root, "fetched", l->fetched);
    cJSON_AddItemToObject(root, "models", models_json_array(l));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *tmp = xasprintf("%s.%ld.tmp", path, (long)getpid());
    FILE *fp = ok && text ? util_fopen_private(tmp) : NULL;
    if (fp) {
        int bad = fputs(text, fp) < 0 || fputc('\n', fp) < 0;
        bad |= fclose(fp) != 0;
        if (bad || rename(tmp, path) != 0)
            unlink(tmp);
    }
    free(tmp);
    free(text);
    free(path);
}

int models_cached(const struct conf *c, struct model_list *l)
{
    return models_cache_read(c, l);
}

/* One GET of url with c's headers; 0 (see r->status), or 4 with err set. */
static int models_request(const struct conf *c, const char *key, const char *url,
                          struct net_probe_result *r, struct buf *err)
{
    const char *headers[4 + DIALECT_MAX_HEADERS];
    char *auth = models_headers(c, key, headers);
    long t = c->max_time > 0 && c->max_time < 30 ? (long)(c->max_time * 1000) : 30000;
    struct net_probe_request req = {
        .url = url,
        .headers = headers,
        .user_agent = PACKAGE_NAME "/" PACKAGE_VERSION,
        .timeout_ms = t,
        .connect_timeout_ms = c->connect_timeout_ms > 0 && c->connect_timeout_ms < t
                                  ? c->connect_timeout_ms : t,
        .cacert = c->cacert,
        .insecure = c->insecure,
        .body_max = MODELS_BODY_MAX,
        .secret = key,
    };
    int rc = net_probe(&req, r);
    util_free_secret(auth);
    if (rc != 0 || (r->failure != NET_PROBE_OK && r->status == 0)) {
        char *shown = models_display_url(url);
        buf_printf(err, "GET %s: %s", shown, r->why[0] ? r->why : "no answer");
        free(shown);
        return 4;
    }
    return 0;
}

/* "HTTP 401: <the server's message>" for an error answer, in the dialect's words. */
static void models_http_error(const struct conf *c, const char *url,
                              const struct net_probe_result *r, struct buf *err)
{
    struct buf msg = BUF_INIT;
    char code[64] = "";
    const char *ct = NULL; /* the body's shape is what matters; error_message sniffs it */
    conf_dialect(c)->error_message(r->status, ct, buf_str(&r->body), r->body.len, &msg, code,
                                   sizeof code);
    char *shown = models_display_url(url);
    buf_printf(err, "GET %s: %s", shown, msg.len ? buf_str(&msg) : "HTTP error");
    free(shown);
    buf_free(&msg);
}

/* Every page of the list at first_url (Gemini's by pageToken, Anthropic's by after_id). */
static int models_fetch_pages(const struct conf *c, const char *key, const char *first_url,
                              const char *source, struct model_list *l, long *status,
                              struct buf *err)
{
    char *url = xstrdup(first_url);
    int code = 0;
    for (int page = 0; page < MODELS_MAX_PAGES; page++) {
        struct net_probe_result r;
        code = models_request(c, key, url, &r, err);
        *status = r.status;
        char *next = NULL;
        if (code == 0 && (r.status < 200 || r.status > 299)) {
            models_http_error(c, url, &r, err);
            code = 3;
        } else if (code == 0 &&
                   models_parse(source, buf_str(&r.body), r.body.len, l, &next) < 0) {
            char *shown = models_display_url(url);
            buf_printf(err, "GET %s: HTTP %ld but not a model list", shown, r.status);
            free(shown);
            code = 3;
        }
        net_probe_result_free(&r);
        if (code || !next) {
            free(next);
            break;
        }
        char *u = xasprintf("%s%c%s", first_url, strchr(first_url, '?') ? '&' : '?', next);
        free(next);
        free(url);
        url = u;
    }
    free(url);
    return code;
}

int models_get(const struct conf *c, const char *key, int refresh, struct model_list *l,
               struct buf *err)
{
    if (!refresh && models_cache_read(c, l) == 0) {
        double age = (double)time(NULL) - l->fetched; /* wall clock: the file outlives boots */
        if (age >= 0 && age < MODELS_CACHE_TTL)
            return 0;
        model_list_free(l);
    }
    l->from_cache = 0;
    const struct dialect *dl = conf_dialect(c);
    char *b = models_base(c, 0);
    size_t bl = strlen(b);
    size_t rl = bl >= 3 && memcmp(b + bl - 3, "/v1", 3) == 0 ? bl - 3 : bl;
    char *tags = xasprintf("%.*s/api/tags", (int)rl, b);
    int openai = strcmp(dl->name, "openai") == 0;
    int code;
    long status = 0;
    if (openai && models_ollama_port(c)) {
        snprintf(l->source, sizeof l->source, "ollama");
        code = models_fetch_pages(c, key, tags, "ollama", l, &status, err);
    } else {
        int anthropic = strcmp(dl->name, "anthropic") == 0;
        char *url = xasprintf("%.*s%s%s", (int)bl, b, dl->models_path,
                              anthropic ? "?limit=1000" : "");
        snprintf(l->source, sizeof l->source, "%s",
                 strcmp(dl->name, "gemini") == 0 ? "gemini" : anthropic ? "anthropic" : "openai");
        code = models_fetch_pages(c, key, url, l->source, l, &status, err);
        free(url);
        if (code == 3 && status == 404 && openai) { /* an Ollama elsewhere: its own list */
            struct buf e2 = BUF_INIT;
            model_list_free(l);
            if (models_fetch_pages(c, key, tags, "ollama", l, &status, &e2) == 0) {
                snprintf(l->source, sizeof l->source, "ollama");
                buf_reset(err);
                code = 0;
            } else {
                model_list_free(l);
            }
            buf_free(&e2);
        }
    }
    free(tags);
    free(b);
    if (code == 0) {
        l->fetched = (double)time(NULL);
        models_cache_write(c, l);
    } else {
        model_list_free(l);
    }
    return code;
}
