/* cmd_doctor.c - `tokterm doctor`: one line per check of the setup (see cmd_doctor.h). */
#include "config.h"
#include "cmd/doctor.h"
#include "proto/api.h"
#include "proto/dialect.h"
#include "core/cli.h"
#include "core/conf.h"
#include "core/mcpset.h"
#include "core/models.h"
#include "net/probe.h"
#include "net/ratelimit.h"
#include "store/info.h"
#include "store/store.h"
#include "text/theme.h"
#include "tokens/tokenizer.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define DOCTOR_BODY_MAX ((size_t)4 << 20) /* a /models list longer than this is cut */

enum doctor_status { DOCTOR_OK, DOCTOR_WARN, DOCTOR_FAIL };

struct doctor {
    int counts[3];
    int offline;
    long timeout_ms;
    const struct cli *a;
};

/* Print one check: "ok    config       [profile] what; todo". Text from files or the network
 * is sanitised, so nothing a server sends can drive the terminal. */
static void doctor_line(struct doctor *d, enum doctor_status st, const char *check,
                        const char *profile, const char *what, const char *todo)
{
    static const char *const names[] = {"ok", "warn", "fail"};
    struct buf b = BUF_INIT;
    buf_printf(&b, "%-5s %-12s ", names[st], check);
    if (profile)
        buf_printf(&b, "[%s] ", profile);
    buf_appends(&b, what);
    if (todo && *todo) {
        buf_appends(&b, "; ");
        buf_appends(&b, todo);
    }
    struct buf safe = BUF_INIT;
    utf8_sanitize(&safe, b.data, b.len);
    for (size_t i = 0; i < safe.len; i++)
        if (safe.data[i] == '\n' || safe.data[i] == '\t')
            safe.data[i] = ' ';
    printf("%s\n", buf_str(&safe));
    fflush(stdout);
    buf_free(&safe);
    buf_free(&b);
    d->counts[st]++;
}

/* printf-style variant of doctor_line for the "what" part. */
static void doctor_linef(struct doctor *d, enum doctor_status st, const char *check,
                         const char *profile, const char *todo, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void doctor_linef(struct doctor *d, enum doctor_status st, const char *check,
                         const char *profile, const char *todo, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *what = NULL;
    if (vasprintf(&what, fmt, ap) < 0)
        what = NULL;
    va_end(ap);
    doctor_line(d, st, check, profile, what ? what : fmt, todo);
    free(what);
}

/* ---- config ---------------------------------------------------------------------------- */

/* Check the config file; returns 0 when it loads (profiles in *names), -1 when it does not. */
static int doctor_config(struct doctor *d, const char *path, int given, char ***names,
                         size_t *n)
{
    *names = NULL;
    *n = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && given) {
            doctor_linef(d, DOCTOR_FAIL, "config", NULL, "fix the path given with --config",
                         "%s: no such file (given with --config)", path);
            return -1;
        }
        if (errno == ENOENT) {
            doctor_linef(d, DOCTOR_OK, "config", NULL,
                         "create it to keep profiles (see tokterm(1), CONFIGURATION)",
                         "no config file at %s: built-in defaults and the environment", path);
            return 0;
        }
        doctor_linef(d, DOCTOR_FAIL, "config", NULL, "fix its permissions or path",
                     "%s: %s", path, strerror(errno));
        return -1;
    }
    struct conf c;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    conf_defaults(&c);
    int rc = conf_load(&c, path, NULL, &err, &warn);
    if (rc < 0) {
        doctor_linef(d, DOCTOR_FAIL, "config", NULL, "fix that line (tokterm(1), CONFIGURATION)",
                     "%s", buf_str(&err));
    } else {
        *names = conf_file_profile_names(path, n);
        struct buf list = BUF_INIT;
        for (size_t i = 0; i < *n; i++)
            buf_printf(&list, "%s%s", i ? ", " : "", (*names)[i]);
        doctor_linef(d, DOCTOR_OK, "config", NULL, NULL, "%s: syntax ok, %zu profile%s%s%s%s",
                     path, *n, *n == 1 ? "" : "s", *n ? " (" : "", buf_str(&list), *n ? ")" : "");
        buf_free(&list);
        if (*n && !c.profile && !conf_has_key_source(&c) &&
            strcmp(c.base_url, dialect_default()->base_url) == 0)
            /* until 2026-12 called ok, while every run without -P went to OpenAI */
            doctor_linef(d, DOCTOR_WARN, "config", NULL, NULL,
                         "no profile is selected and %s has no key: a run without -P fails; "
                         "add \"profile = %s\" at the top to use one", c.base_url,
                         (*names)[0]);
    }
    /* warnings: one line each (unknown options, a key readable by others...) */
    char *w = xstrdup(buf_str(&warn));
    char what[64] = ""; /* the secret the file holds, as conf's warning names it */
    for (char *save = NULL, *line = strtok_r(w, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        const char *h = strstr(line, " holds "), *e = strstr(line, " and other users can read");
        if (h && e && e > h) /* said by the permission check below */
            snprintf(what, sizeof what, "%.*s", (int)(e - h - 7), h + 7);
        else
            doctor_line(d, DOCTOR_WARN, "config", NULL, line,
                        strstr(line, "unknown option") ? "fix or remove that line" : NULL);
    }
    free(w);
    unsigned mode = st.st_mode & 0777;
    if (mode & 022)
        doctor_linef(d, DOCTOR_FAIL, "config perms", NULL, NULL,
                     "%s is writable by others (mode %03o): they could change api_key_cmd; "
                     "chmod 600 %s", path, mode, path);
    else if ((mode & 044) && what[0])
        doctor_linef(d, DOCTOR_FAIL, "config perms", NULL, NULL,
                     "%s holds %s and others can read it (mode %03o); chmod 600 %s", path, what,
                     mode, path);
    else if (st.st_uid != geteuid())
        doctor_linef(d, DOCTOR_WARN, "config perms", NULL, "chown it to yourself",
                     "%s belongs to another user (uid %u)", path, (unsigned)st.st_uid);
    else
        doctor_linef(d, DOCTOR_OK, "config perms", NULL, NULL, "mode %03o", mode);
    conf_free(&c);
    buf_free(&err);
    buf_free(&warn);
    return rc < 0 ? -1 : 0;
}

/* ---- one profile: key source and endpoint --------------------------------------------------- */

/* Check where the key comes from; returns the key (caller wipes and frees) or NULL. */
static char *doctor_key(struct doctor *d, const struct conf *c, const char *prof, int local)
{
    struct buf err = BUF_INIT;
    char *key = conf_api_key(c, &err);
    if (c->api_key_cmd && *c->api_key_cmd) {
        if (key)
            doctor_linef(d, DOCTOR_OK, "key source", prof, NULL,
                         "api_key_cmd printed a key (%zu characters)", strlen(key));
        else
            doctor_linef(d, DOCTOR_FAIL, "key source", prof,
                         "run the command yourself and fix it, or use api_key_env",
                         "%s (api_key_cmd = %s)", buf_str(&err), c->api_key_cmd);
    } else if (!key && err.len) { /* a key the variable holds with a line break inside */
        doctor_line(d, DOCTOR_FAIL, "key source", prof, buf_str(&err), NULL);
    } else if (key && c->api_key_env && *c->api_key_env && getenv(c->api_key_env) &&
               *getenv(c->api_key_env)) {
        doctor_linef(d, DOCTOR_OK, "key source", prof, NULL, "$%s is set (%zu characters)",
                     c->api_key_env, strlen(key));
    } else if (key) {
        doctor_line(d, DOCTOR_WARN, "key source", prof,
                    "the key is written in the config file (api_key)",
                    "keep it in a password manager: api_key_cmd = pass show NAME");
    } else if (local) {
        doctor_linef(d, DOCTOR_OK, "key source", prof, NULL,
                     "no key ($%s is not set); a local server needs none",
                     c->api_key_env && *c->api_key_env ? c->api_key_env : "OPENAI_API_KEY");
    } else {
        char *todo = xasprintf("export %s=... or set api_key_cmd in the profile",
                               c->api_key_env && *c->api_key_env ? c->api_key_env
                                                                 : "OPENAI_API_KEY");
        doctor_linef(d, DOCTOR_FAIL, "key source", prof, todo, "no key: $%s is not set",
                     c->api_key_env && *c->api_key_env ? c->api_key_env : "OPENAI_API_KEY");
        free(todo);
    }
    if (c->api_key && *c->api_key && key && strcmp(key, c->api_key) != 0)
        doctor_line(d, DOCTOR_WARN, "key source", prof,
                    "an api_key written in the config file is not used (another source wins)",
                    "remove it from the file");
    buf_free(&err);
    return key;
}

/* What doctor reads in the answer's headers: its rate limits and content type. */
struct doctor_xfer {
    struct ratelimit_state rl;
    struct ratelimit_response resp;
    char ctype[128];
};

static void doctor_headers(struct doctor_xfer *x, const struct buf *headers)
{
    ratelimit_state_init(&x->rl, 0, 0);
    ratelimit_response_init(&x->resp);
    x->ctype[0] = '\0';
    const char *p = headers->data, *end = p + headers->len;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
        ratelimit_feed(&x->rl, &x->resp, p, n, util_now(), (double)util_epoch());
        if (n > 13 && strncasecmp(p, "content-type:", 13) == 0) {
            size_t k = n - 13 < sizeof x->ctype - 1 ? n - 13 : sizeof x->ctype - 1;
            memcpy(x->ctype, p + 13, k);
            x->ctype[k] = '\0';
            util_trim(x->ctype);
        }
        p += n;
    }
}

/* Number of models in a /models list in the dialect's shape (Gemini's "models/NAME"),
 * and whether model is one of them; -1 when the body is not such a list. */
static int doctor_models(const struct conf *c, const char *body, size_t n, const char *model,
                         int *listed)
{
    struct model_list l = {0};
    const char *api = conf_dialect(c)->name;
    int ok = models_parse(strcmp(api, "responses") == 0 ? "openai" : api, body, n, &l,
                          NULL) == 0;
    int count = ok ? (int)l.n : -1;
    *listed = ok && models_has(&l, model);
    model_list_free(&l);
    return count;
}

/* The DNS, TCP and TLS lines of a probe; 0 when the request got that far, -1 after a fail. */
static int doctor_transport(struct doctor *d, const struct conf *c, const char *prof,
                            const char *host, int https, const struct net_probe_result *r)
{
    if (r->failure == NET_PROBE_RESOLVE) {
        doctor_linef(d, DOCTOR_FAIL, "dns", prof,
                     "check the host name in base_url, your DNS and network", "%s: %s", host,
                     r->why);
        return -1;
    }
    doctor_linef(d, DOCTOR_OK, "dns", prof, NULL, "%s %s%s (%.0f ms)", host,
                 r->ip[0] ? "-> " : "resolved", r->ip, r->dns_ms);

    if (r->failure == NET_PROBE_CONNECT) {
        doctor_linef(d, DOCTOR_FAIL, "connect", prof,
                     conf_is_local(c) ? "is the local server running on that port?"
                                      : "check base_url, a proxy or firewall in between",
                     "%s: %s", host, r->why);
        return -1;
    }
    double took = r->connect_ms - r->dns_ms; /* a reused or instant connection: not "-0" */
    doctor_linef(d, DOCTOR_OK, "connect", prof, NULL, "%s in %.0f ms", host,
                 took > 0 ? took : 0.0);

    if (r->failure == NET_PROBE_PROXY) {
        /* until 2026-12 "ok tls: certificate verified" (no handshake had happened), then
         * "the server took the connection but did not answer: is it busy?" */
        doctor_linef(d, DOCTOR_FAIL, "proxy", prof,
                     r->proxy_status == 407
                         ? "it wants a user and password: give them in the proxy's URL, "
                           "https_proxy=http://USER:PASSWORD@HOST:PORT"
                         : "check https_proxy / HTTPS_PROXY / ALL_PROXY and no_proxy",
                     "the proxy refused the tunnel to %s: HTTP %ld", host, r->proxy_status);
        return -1;
    }
    if (https) {
        if (r->failure == NET_PROBE_TLS) {
            doctor_linef(d, DOCTOR_FAIL, "tls", prof,
                         "trust its CA with cacert = FILE in the profile (or --cacert FILE)",
                         "%s", r->why);
            return -1;
        }
        if (c->insecure)
            doctor_line(d, DOCTOR_WARN, "tls", prof,
                        "certificate checks are OFF (insecure): anyone on the path can read "
                        "your prompts and key", "remove insecure, use cacert = FILE instead");
        else
            doctor_linef(d, DOCTOR_OK, "tls", prof, NULL, "certificate verified (%.0f ms)",
                         r->tls_ms - r->connect_ms);
    } else if (!conf_is_local(c)) {
        doctor_line(d, DOCTOR_WARN, "tls", prof,
                    "plain http to a remote host: the key and prompts travel unencrypted",
                    "use https://");
    }
    return 0;
}

/* The lines of an HTTP error status: the key refused, no model list, a quota, the server. */
static void doctor_http_error(struct doctor *d, const char *prof, const char *shown,
                              const char *key, const struct net_probe_result *r,
                              const struct doctor_xfer *x)
{
    struct buf msg = BUF_INIT;
    char code[64];
    long status = r->status;
    api_error_message(status, x->ctype, buf_str(&r->body), r->body.len, &msg, code,
                      sizeof code);
    if (status == 401 || status == 403) {
        doctor_linef(d, DOCTOR_OK, "http", prof, NULL, "GET %s answered (%.0f ms)", shown,
                     r->total_ms);
        doctor_linef(d, DOCTOR_FAIL, "key valid", prof,
                     key ? "check the key source of this profile (or a new key)"
                         : "this server wants a key: set api_key_env or api_key_cmd",
                     "the server refused %s: %s", key ? "the key" : "a request without a key",
                     buf_str(&msg));
    } else if (status == 404) {
        doctor_linef(d, DOCTOR_WARN, "http", prof,
                     "some servers have no model list; a chat request will tell, else "
                     "check base_url",
                     "GET %s: %s", shown, buf_str(&msg));
    } else if (status == 429) {
        doctor_linef(d, DOCTOR_WARN, "http", prof, "wait, or check your plan and quota",
                     "GET %s: %s", shown, buf_str(&msg));
    } else {
        doctor_linef(d, DOCTOR_FAIL, "http", prof,
                     status >= 500 ? "the server has trouble: try again later"
                                   : "check base_url",
                     "GET %s: %s", shown, buf_str(&msg));
    }
    buf_free(&msg);
}

/* The HTTP, key, model and rate-limit lines of a probe that got an answer (or began to). */
static void doctor_http(struct doctor *d, const struct conf *c, const char *prof,
                        const char *shown, const char *key, const struct net_probe_result *r)
{
    if (r->failure != NET_PROBE_OK && r->status == 0) {
        /* connected, no answer (a server that hangs, a timeout): the URL's path is not the
         * question (until 2026-12 the hint said to check it whatever failed) */
        int connected = r->failure == NET_PROBE_OTHER && r->ip[0];
        doctor_linef(d, DOCTOR_FAIL, "http", prof,
                     connected ? "the server took the connection but did not answer: is it "
                                 "busy, or still loading a model?"
                               : "check that base_url ends where the API starts (e.g. .../v1)",
                     "GET %s: %s", shown, r->why);
        return;
    }
    struct doctor_xfer x;
    doctor_headers(&x, &r->headers);
    if (r->status >= 200 && r->status < 300) {
        int listed;
        int count = doctor_models(c, buf_str(&r->body), r->body.len, c->model, &listed);
        if (count < 0) {
            /* a web page, a login portal, a base_url short of the API's path: the chat
             * fails on it (exit 3), and `tokterm models` says so; until 2026-12 doctor said
             * "0 models" and "the server accepted the key" (a page that is not the API
             * says nothing of the key: no key line) */
            const char *ct = x.ctype + strspn(x.ctype, " \t");
            doctor_linef(d, DOCTOR_FAIL, "http", prof,
                         "check that base_url ends where the API starts (e.g. .../v1)",
                         "GET %s: HTTP %ld but not a model list (%s)", shown, r->status,
                         *ct ? ct : "no Content-Type");
            goto limits;
        }
        doctor_linef(d, DOCTOR_OK, "http", prof, NULL, "GET %s: HTTP %ld, %d model%s (%.0f ms)",
                     shown, r->status, count, count == 1 ? "" : "s", r->total_ms);
        if (key)
            doctor_line(d, DOCTOR_OK, "key valid", prof, "the server accepted the key", NULL);
        if (count > 0 && listed)
            doctor_linef(d, DOCTOR_OK, "model", prof, NULL, "%s is listed", c->model);
        else if (count > 0)
            doctor_linef(d, DOCTOR_WARN, "model", prof,
                         "check the name (tokterm -m NAME, or model = in the profile)",
                         "%s is not in the server's list", c->model);
    } else {
        doctor_http_error(d, prof, shown, key, r, &x);
    }

limits:
    if (x.rl.seen) {
        char rl[160];
        ratelimit_format(&x.rl, util_now(), rl, sizeof rl);
        doctor_linef(d, DOCTOR_OK, "rate limits", prof, NULL, "%s", rl);
    } else {
        doctor_line(d, DOCTOR_OK, "rate limits", prof,
                    "no x-ratelimit-* headers on this answer (many servers send them only on "
                    "chat requests)", NULL);
    }
}

/* DNS, connection, TLS and HTTP checks of GET base_url/models with the key. */
static void doctor_endpoint(struct doctor *d, const struct conf *c, const char *prof,
                            const char *key)
{
    const char *b = c->base_url;
    size_t bl = strlen(b);
    while (bl && b[bl - 1] == '/')
        bl--;
    const struct dialect *dl = conf_dialect(c);
    char *url = xasprintf("%.*s%s", (int)bl, b, dl->models_path); /* in the profile's dialect */
    char *shown = models_display_url(url);
    char *host = conf_host(c);
    int https = strncasecmp(b, "https://", 8) == 0;
    if (strncasecmp(b, "http://", 7) != 0 && !https) {
        doctor_linef(d, DOCTOR_FAIL, "endpoint", prof,
                     "base_url must start with https:// (or http:// for a local server)",
                     "base_url '%s' is not an HTTP URL", b);
        goto out;
    }
    const char *headers[4 + DIALECT_MAX_HEADERS];
    char *auth = models_headers(c, key, headers); /* in the profile's dialect */
    struct net_probe_request req = {
        .url = url,
        .headers = headers,
        .user_agent = PACKAGE_NAME "/" PACKAGE_VERSION " (doctor)",
        .timeout_ms = d->timeout_ms,
        .connect_timeout_ms = c->connect_timeout_ms > 0 && c->connect_timeout_ms < d->timeout_ms
                                  ? c->connect_timeout_ms : d->timeout_ms,
        .cacert = c->cacert,
        .insecure = c->insecure,
        .body_max = DOCTOR_BODY_MAX,
        .secret = key,
    };
    struct net_probe_result r;
    if (net_probe(&req, &r) != 0)
        doctor_line(d, DOCTOR_FAIL, "endpoint", prof, r.why, NULL);
    else if (doctor_transport(d, c, prof, host, https, &r) == 0)
        doctor_http(d, c, prof, shown, key, &r);
    net_probe_result_free(&r);
    util_free_secret(auth);
out:
    free(host);
    free(shown);
    free(url);
}

/* Apply the command-line settings doctor honours (the endpoint and its TLS). */
static void doctor_apply_cli(const struct cli *a, struct conf *c)
{
    struct buf err = BUF_INIT;
    if (a->base_url)
        conf_set(c, "base_url", a->base_url, &err);
    if (a->cacert)
        conf_set(c, "cacert", a->cacert, &err);
    if (a->insecure)
        c->insecure = 1;
    buf_free(&err);
}

static void doctor_profile(struct doctor *d, const char *cfgpath, const char *name)
{
    struct conf c;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    conf_defaults(&c);
    if (conf_load(&c, cfgpath, name, &err, &warn) < 0) {
        doctor_linef(d, DOCTOR_FAIL, "profile", name, "fix the config file", "%s",
                     buf_str(&err));
        goto out;
    }
    /* --api before the environment: the dialect names the base URL's variable, the default
     * base URL, model and key variable (until 2026-12 doctor ignored it: --api anthropic
     * doctor checked api.openai.com and failed for want of OPENAI_API_KEY) */
    if (d->a->api && conf_set(&c, "api", d->a->api, &err) < 0) {
        doctor_linef(d, DOCTOR_FAIL, "profile", name ? name : "default", "fix --api", "%s",
                     buf_str(&err));
        goto out;
    }
    conf_apply_env(&c);
    doctor_apply_cli(d->a, &c);
    const char *prof = name ? name : "default";
    char *shown = models_display_url(c.base_url);
    doctor_linef(d, DOCTOR_OK, "profile", prof, NULL, "%s, model %s", shown, c.model);
    free(shown);
    int local = conf_is_local(&c);
    char *key = NULL;
    if (c.keys && *c.keys) { /* a key pool replaces the single key */
        char **labels = NULL, **values = NULL;
        int n = conf_key_pool(&c, &labels, &values, &err);
        if (n > 0) {
            struct buf names = BUF_INIT;
            for (int i = 0; i < n; i++)
                buf_printf(&names, "%s%s", i ? ", " : "", labels[i]);
            doctor_linef(d, DOCTOR_OK, "key source", prof, NULL,
                         "key pool of %d (%s); the first is checked below", n, buf_str(&names));
            buf_free(&names);
            key = xstrdup(values[0]);
        } else {
            doctor_linef(d, DOCTOR_FAIL, "key source", prof,
                         "fix the keys = line (NAME, env:NAME or cmd:COMMAND, comma-separated)",
                         "key pool: %s", n < 0 ? buf_str(&err) : "no key in keys =");
        }
        conf_pool_free(labels, values, n > 0 ? n : 0);
    } else {
        key = doctor_key(d, &c, prof, local);
    }
    if (!d->offline)
        doctor_endpoint(d, &c, prof, key);
    util_free_secret(key);
out:
    conf_free(&c);
    buf_free(&err);
    buf_free(&warn);
}

/* ---- MCP servers ------------------------------------------------------------------------ */

/* text past a leading "prefix: ", else text */
static const char *doctor_after(const char *text, const char *prefix)
{
    size_t k = strlen(prefix);
    return strncmp(text, prefix, k) == 0 && text[k] == ':' && text[k + 1] == ' ' ? text + k + 2
                                                                                 : text;
}

/* The servers the profile enables (`mcp =`, or --mcp) must each have a section. Each [mcp NAME]
 * section (with -P or --mcp, only those enabled) is started and its tools listed, as `mcp
 * list` does, one after another: a request waits up to --timeout (or the section's own timeout
 * when shorter), a start at least 30 s (npx may be fetching the server); --offline starts
 * none. */
static void doctor_mcp(struct doctor *d, const struct conf *c, int only)
{
    struct mcp_set set;
    struct buf err = BUF_INIT, names = BUF_INIT;
    if (mcp_set_load(&set, c, &err) < 0) {
        doctor_linef(d, DOCTOR_FAIL, "mcp", NULL, "fix the [mcp NAME] section", "%s",
                     buf_str(&err));
        buf_free(&err);
        return;
    }
    if (d->a->n_mcp) /* --mcp NAME replaces the profile's list, as in the chat */
        for (int i = 0; i < d->a->n_mcp; i++)
            buf_printf(&names, "%s%s", i ? ", " : "", d->a->mcp[i]);
    else if (c->mcp)
        buf_appends(&names, c->mcp);
    only |= d->a->n_mcp > 0;
    /* each name checked on its own (mcp_set_enabled stops at the first unknown one) */
    char *save = NULL, **on = xcalloc(names.len / 2 + 2, sizeof *on);
    size_t n_on = 0;
    for (char *w = names.len ? strtok_r(names.data, ", \t", &save) : NULL; w;
         w = strtok_r(NULL, ", \t", &save))
        if (strcmp(w, "none") != 0 && !mcp_conf_find(set.confs, set.n, w))
            doctor_linef(d, DOCTOR_FAIL, "mcp", NULL,
                         d->a->n_mcp ? "fix --mcp" : "fix the mcp = line",
                         "%.64s is enabled, but the config file has no [mcp %.64s] section", w,
                         w);
        else
            on[n_on++] = w;
    for (int i = 0; i < set.n; i++) {
        struct mcp_server_conf *sc = &set.confs[i];
        int enabled = 0;
        for (size_t k = 0; k < n_on && !enabled; k++)
            enabled = strcmp(on[k], sc->name) == 0;
        if (only && !enabled) /* -P NAME, --mcp: the servers that run there */
            continue;
        struct buf how = BUF_INIT;
        if (sc->url)
            buf_printf(&how, "http %s", sc->url);
        else
            buf_printf(&how, "stdio %s", sc->argv && sc->argv[0] ? sc->argv[0] : "?");
        if (d->offline) {
            doctor_linef(d, DOCTOR_OK, "mcp", sc->name, NULL, "%s: not started (--offline)",
                         how.data);
            buf_free(&how);
            continue;
        }
        if (sc->timeout <= 0 || sc->timeout > d->timeout_ms / 1000.0)
            sc->timeout = d->timeout_ms / 1000.0;
        double t0 = util_now();
        const struct mcp_tool *tools = NULL;
        buf_reset(&err);
        struct mcp_client *cl = mcp_set_get(&set, sc->name, &err);
        int n = cl ? mcp_client_tools(cl, &tools, &err) : -1;
        if (n < 0) {
            /* the client's messages begin "NAME: " (and an HTTP one "URL: ") */
            const char *why = doctor_after(err.len ? err.data : "not available", sc->name);
            why = sc->url ? doctor_after(why, sc->url) : why;
            char *todo = xasprintf("fix [mcp %s], or see tokterm mcp list %s", sc->name,
                                   sc->name);
            doctor_linef(d, DOCTOR_FAIL, "mcp", sc->name, todo, "%s: %s", how.data, why);
            free(todo);
        } else {
            doctor_linef(d, DOCTOR_OK, "mcp", sc->name, NULL,
                         "%s: %s, MCP %s, %d tool%s (%.0f ms)", how.data,
                         mcp_client_server_info(cl), mcp_client_protocol(cl), n,
                         util_plural(n), (util_now() - t0) * 1000);
        }
        buf_free(&how);
    }
    fflush(stdout);
    mcp_exiting(); /* doctor is on its way out: the servers' shutdown goes on in a reaper */
    mcp_set_free(&set, 2.0);
    free(on);
    buf_free(&names);
    buf_free(&err);
}

/* ---- terminal, database, data files ------------------------------------------------------- */

/* tigetnum("colors") of $TERM (0 when it has none), and in *cup whether it can move the
 * cursor (the full chat needs it: else the line chat runs); -1 when terminfo does not know
 * it, -2 (why in *why) when the terminfo library cannot be loaded: it is loaded here only, as
 * tokterm links no curses (the chat is the separate program tokterm-tui). */
static int doctor_colors(int fd, const char **why, int *cup)
{
    void *lib = dlopen(TT_TINFO_SONAME, RTLD_NOW | RTLD_LOCAL);
    int (*setupterm_fn)(const char *, int, int *) = NULL;
    int (*tigetnum_fn)(const char *) = NULL;
    void *(*set_curterm_fn)(void *) = NULL;
    int (*del_curterm_fn)(void *) = NULL;
    char *(*tigetstr_fn)(const char *) = NULL;
    void *p;
    if (lib && (p = dlsym(lib, "setupterm")))
        memcpy(&setupterm_fn, &p, sizeof p);
    if (lib && (p = dlsym(lib, "tigetnum")))
        memcpy(&tigetnum_fn, &p, sizeof p);
    if (lib && (p = dlsym(lib, "set_curterm")))
        memcpy(&set_curterm_fn, &p, sizeof p);
    if (lib && (p = dlsym(lib, "del_curterm")))
        memcpy(&del_curterm_fn, &p, sizeof p);
    if (lib && (p = dlsym(lib, "tigetstr")))
        memcpy(&tigetstr_fn, &p, sizeof p);
    if (!setupterm_fn || !tigetnum_fn || !set_curterm_fn || !del_curterm_fn || !tigetstr_fn) {
        *why = dlerror();
        return -2;
    }
    int err = 0, colors = -1;
    *cup = 0;
    if (setupterm_fn(NULL, fd, &err) == 0) { /* OK */
        colors = tigetnum_fn("colors");
        colors = colors < 0 ? 0 : colors; /* -1: none (vt100, dumb) */
        char *s = tigetstr_fn("cup");
        *cup = s && s != (char *)-1;
        del_curterm_fn(set_curterm_fn(NULL));
    }
    return colors; /* the library stays loaded: doctor ends soon */
}

static void doctor_terminal(struct doctor *d)
{
    setlocale(LC_CTYPE, "");
    const char *cs = nl_langinfo(CODESET);
    const char *lc = setlocale(LC_CTYPE, NULL);
    if (cs && strcmp(cs, "UTF-8") == 0)
        doctor_linef(d, DOCTOR_OK, "locale", NULL, NULL, "%s (UTF-8)", lc ? lc : "?");
    else
        doctor_linef(d, DOCTOR_WARN, "locale", NULL,
                     "export LANG=C.UTF-8 (or another UTF-8 locale) for wide characters",
                     "%s uses %s, not UTF-8", lc ? lc : "the locale", cs ? cs : "?");
    setlocale(LC_CTYPE, "C");

    int fd = isatty(1) ? 1 : isatty(0) ? 0 : -1;
    if (fd < 0) {
        doctor_line(d, DOCTOR_OK, "terminal", NULL,
                    "not on a terminal (scripted mode needs none)", NULL);
        return;
    }
    const char *term = getenv("TERM");
    const char *why = NULL;
    int cup = 0, colors = term && *term ? doctor_colors(fd, &why, &cup) : -1;
    if (colors == -2) {
        doctor_linef(d, DOCTOR_WARN, "terminal", NULL,
                     "install the terminfo library (the Debian package libtinfo6)",
                     "cannot load %s: %s", TT_TINFO_SONAME, why ? why : "dlopen failed");
        return;
    }
    struct winsize ws;
    int cols = ioctl(fd, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
    int rows = cols ? ws.ws_row : 0;
    const char *nc = getenv("NO_COLOR");
    if (colors >= 0 && !cup) {
        doctor_linef(d, DOCTOR_WARN, "terminal", NULL,
                     "set TERM to your terminal's name (e.g. xterm-256color) for the full chat",
                     "TERM=%s cannot move the cursor: the chat runs as the line chat", term);
    } else if (!term || !*term || colors == -1) {
        doctor_linef(d, DOCTOR_WARN, "terminal", NULL,
                     "set TERM to your terminal's name (e.g. xterm-256color) for the full chat",
                     "TERM=%s is unknown to terminfo: the chat runs as the line chat",
                     term && *term ? term : "(unset)");
    } else if (cols && cols < 40) {
        doctor_linef(d, DOCTOR_WARN, "terminal", NULL, "widen the window for the chat",
                     "%s, %d colours, only %dx%d", term, colors, cols, rows);
    } else {
        doctor_linef(d, DOCTOR_OK, "terminal", NULL, NULL, "%s, %d colours%s, %dx%d", term,
                     colors, nc && *nc ? " (NO_COLOR set: none used)" : "", cols, rows);
    }
}

/* What a fresh page costs here, and so where the chat keeps a fast answer's copies
 * (xmalloc_huge_decide): information, never a warning. */
static void doctor_memory(struct doctor *d)
{
    int env = xmalloc_thp_env();
    if (env) {
        doctor_linef(d, DOCTOR_OK, "memory", NULL, NULL,
                     "TOKTERM_THP=%s: the chat keeps a fast answer's copies in %s pages",
                     env > 0 ? "always" : "never", env > 0 ? "huge" : "4 KiB");
        return;
    }
    double ns = xmalloc_probe_small_faults();
    if (ns < 0) {
        doctor_line(d, DOCTOR_OK, "memory", NULL,
                    "the chat keeps a fast answer's copies in huge pages (a fresh page could "
                    "not be timed)",
                    NULL);
        return;
    }
    int huge = xmalloc_huge_pays_at(ns);
    doctor_linef(d, DOCTOR_OK, "memory", NULL, NULL,
                 "a fresh 4 KiB page takes %.1f us: the chat keeps a fast answer's copies in %s "
                 "pages (huge above %.0f us; TOKTERM_THP=always|never decides instead)",
                 ns / 1000.0,
                 huge ? "huge" : "4 KiB", XMALLOC_SMALL_FAULT_NS / 1000.0);
}

/* The word index (store/): behind after an upgrade or another program's changes (the few
 * changes of a chat are applied by the next search at once), off with many blobs. Silent
 * when it is in use and nearly up to date. */
static void doctor_word_index(struct doctor *d, long long queued, long long blobs)
{
    if (blobs > STORE_WORDS_LONG_MAX)
        doctor_linef(d, DOCTOR_OK, "word index", NULL, NULL,
                     "not used: %lld messages hold a word of over %d characters (more than %d), "
                     "so every search uses the trigram index",
                     blobs, STORE_WORDS_LONG_CHARS, STORE_WORDS_LONG_MAX);
    else if (queued > STORE_WORDS_BATCH)
        doctor_linef(d, DOCTOR_OK, "word index", NULL, NULL,
                     "%lld changes to apply; each search for a word applies %d and uses the "
                     "trigram index until none is left",
                     queued, STORE_WORDS_BATCH);
}

/* The database file's mode: private and writable. */
static void doctor_db_perms(struct doctor *d, const char *path, unsigned mode)
{
    if (mode & 077)
        doctor_linef(d, DOCTOR_WARN, "db perms", NULL, NULL,
                     "others can read your conversations (mode %03o); chmod 600 %s", mode, path);
    else if (access(path, W_OK) != 0 && errno == EROFS) /* no chmod makes it writable */
        doctor_linef(d, DOCTOR_WARN, "db perms", NULL, "use --db FILE on a writable disk",
                     "%s is on a read-only filesystem: chats will not be saved", path);
    else if (access(path, W_OK) != 0)
        doctor_linef(d, DOCTOR_WARN, "db perms", NULL, "chmod 600 it (or use --db FILE)",
                     "%s is read-only: chats will not be saved", path);
    else
        doctor_linef(d, DOCTOR_OK, "db perms", NULL, NULL, "mode %03o", mode);
}

static void doctor_database(struct doctor *d, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            doctor_linef(d, DOCTOR_OK, "database", NULL, NULL,
                         "%s does not exist yet (the first chat creates it, mode 600)", path);
        else
            doctor_linef(d, DOCTOR_FAIL, "database", NULL, "fix the path or its permissions",
                         "%s: %s", path, strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        doctor_linef(d, DOCTOR_FAIL, "database", NULL, "point --db or db = at a file",
                     "%s is not a regular file", path);
        return;
    }
    struct store_inspect in;
    char *open_err = NULL;
    int rc = store_inspect(path, &in, &open_err);
    const char *todo_bad = "move it away (the next chat creates a new one) or use --db FILE";
    if (rc == STORE_INSPECT_UNLOADED) {
        doctor_line(d, DOCTOR_FAIL, "database", NULL, open_err, NULL);
    } else if (rc != 0) {
        doctor_linef(d, DOCTOR_FAIL, "database", NULL, todo_bad, "%s: %s", path, open_err);
    } else if (in.problem) {
        doctor_linef(d, DOCTOR_FAIL, "database", NULL, todo_bad,
                     "%s: integrity check failed: %s", path, in.problem);
    }
    free(open_err);
    if (rc != 0 || in.problem) {
        store_inspect_clear(&in);
        return;
    }
    int version = in.version;
    long long convs = in.conversations, queued = in.words_queued, blobs = in.words_long;
    store_inspect_clear(&in);
    char *wal = xasprintf("%s-wal", path);
    struct stat ws;
    long long bytes = in.pages * in.page_size +
                      (stat(wal, &ws) == 0 ? (long long)ws.st_size : 0);
    free(wal);
    if (convs < 0) {
        doctor_linef(d, DOCTOR_FAIL, "database", NULL, todo_bad,
                     "%s is an SQLite file but not a tokterm database (no conversations table)",
                     path);
        return;
    }
    if (version > STORE_SCHEMA_VERSION) {
        doctor_linef(d, DOCTOR_WARN, "database", NULL, "update tokterm",
                     "%s has schema %d, newer than this tokterm knows (%d)", path, version,
                     STORE_SCHEMA_VERSION);
        return;
    }
    doctor_linef(d, DOCTOR_OK, "database", NULL, NULL,
                 "%s: integrity ok, schema %d, %.1f MiB, %lld conversation%s", path, version,
                 (double)bytes / 1048576.0, convs, convs == 1 ? "" : "s");
    doctor_word_index(d, queued, blobs);
    doctor_db_perms(d, path, st.st_mode & 0777);
}

static void doctor_data(struct doctor *d, const char *theme)
{
    char *err = NULL;
    struct tokenizer *tok = tokenizer_open("o200k_base", &err);
    if (tok) {
        doctor_linef(d, DOCTOR_OK, "data", NULL, NULL, "tokenizer table o200k_base (%zu tokens)",
                     tokenizer_vocab_size(tok));
        tokenizer_close(tok);
    } else {
        doctor_linef(d, DOCTOR_WARN, "data", NULL,
                     "reinstall (make install) or set TOKTERM_DATADIR; token counts are "
                     "estimates until then", "%s", err ? err : "tokenizer tables not found");
    }
    free(err);
    err = NULL;
    char *warn = NULL;
    struct theme *t = theme_find(theme && *theme ? theme : "default", &err, &warn);
    if (err)
        doctor_linef(d, DOCTOR_WARN, "theme", NULL, "fix the file or choose another theme",
                     "%s", err);
    else
        doctor_linef(d, DOCTOR_OK, "theme", NULL, NULL, "%s%s", theme_name(t),
                     warn ? " (with warnings)" : "");
    theme_free(t);
    free(err);
    free(warn);
}

/* ---- the subcommand -------------------------------------------------------------------------- */

static const char doctor_usage[] =
    "Usage: tokterm [-P NAME] [--config FILE] [--db FILE] doctor [--offline] [--timeout S]\n"
    "Checks the config file, each profile's key and endpoint (DNS, TLS, GET /models, the\n"
    "key's validity, rate-limit headers), each MCP server (started, its tools listed; with\n"
    "--offline only read), the terminal, the database and the data files.\n"
    "One line per check: ok, warn or fail, and what to do. Exit status 1 when a check failed.\n";

/* doctor's own arguments into d: -1 to go on, else the exit status (--help, a mistake). */
static int doctor_args(struct doctor *d, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            fputs(doctor_usage, stdout);
            return 0;
        } else if (strcmp(o, "--offline") == 0) {
            d->offline = 1;
        } else if (strcmp(o, "--timeout") == 0 || strncmp(o, "--timeout=", 10) == 0) {
            const char *v = o[9] == '=' ? o + 10 : i + 1 < argc ? argv[++i] : NULL;
            char *end = NULL;
            double s = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || !(s > 0 && s <= 600)) {
                fprintf(stderr, "tokterm: doctor: --timeout takes seconds from 0.001 to 600\n");
                return 2;
            }
            d->timeout_ms = (long)(s * 1000 + 0.5);
        } else {
            struct buf b = BUF_INIT; /* an argument can come from anywhere: shown, not obeyed */
            utf8_sanitize(&b, o, strlen(o));
            fprintf(stderr, "tokterm: doctor: unknown argument '%s'\n%s", buf_str(&b),
                    doctor_usage);
            buf_free(&b);
            return 2;
        }
    }
    return -1;
}

int cmd_doctor(const struct cli *a, int argc, char **argv)
{
    struct doctor d = {.timeout_ms = 10000, .a = a};
    int rc = doctor_args(&d, argc, argv);
    if (rc >= 0)
        return rc;
    printf("tokterm doctor: %s\n", PACKAGE_STRING);

    char *cfgdir = conf_dir("config");
    char *cfgpath = a->config_path ? xstrdup(a->config_path) : xasprintf("%s/config", cfgdir);
    free(cfgdir);
    char **names;
    size_t n;
    int cfg_ok = doctor_config(&d, cfgpath, a->config_path != NULL, &names, &n) == 0;

    const char *only = a->profile ? a->profile : getenv("TOKTERM_PROFILE");
    if (only && !*only)
        only = NULL;
    struct conf c; /* the settings the chat would use: theme, database */
    struct buf err = BUF_INIT, warn = BUF_INIT;
    conf_defaults(&c);
    if (cfg_ok && conf_load(&c, cfgpath, only, &err, &warn) >= 0)
        conf_apply_env(&c);
    if (cfg_ok) {
        if (only)
            doctor_profile(&d, cfgpath, only);
        else if (n == 0)
            doctor_profile(&d, cfgpath, NULL);
        for (size_t i = 0; i < n && !only; i++)
            doctor_profile(&d, cfgpath, names[i]);
    }
    util_strv_free(names);
    if (cfg_ok && c.path)
        doctor_mcp(&d, &c, only != NULL);

    doctor_terminal(&d);
    doctor_memory(&d);
    char *db;
    if (a->db)
        db = xstrdup(a->db);
    else if (c.db && *c.db)
        db = xstrdup(c.db);
    else {
        char *dir = conf_dir("data");
        db = xasprintf("%s/tokterm.db", dir);
        free(dir);
    }
    doctor_database(&d, db);
    free(db);
    doctor_data(&d, c.theme);
    conf_free(&c);
    buf_free(&err);
    buf_free(&warn);
    free(cfgpath);

    printf("%d ok, %d warn, %d fail\n", d.counts[DOCTOR_OK], d.counts[DOCTOR_WARN],
           d.counts[DOCTOR_FAIL]);
    return d.counts[DOCTOR_FAIL] ? 1 : 0;
}
