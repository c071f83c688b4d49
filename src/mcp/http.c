/* http.c - the Streamable HTTP transport: each message is a POST to the server's URL; a
 * request's answer comes back as one JSON body or as an event stream (progress first, then
 * the answer), read on a thread of its own per request. The session id the server gives at
 * initialize (Mcp-Session-Id) and the negotiated MCP-Protocol-Version go on every later POST;
 * the session is ended with a DELETE. The headers of the section ($VAR and {key} expanded)
 * live only in memory and are wiped at the end. */
#include "config.h"
#include "mcp/mcp_int.h"

#include "base/util.h"
#include "base/xmalloc.h"
#include "net/probe.h"
#include "proto/sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int mcp_http_open(struct mcp_client *c, struct buf *err)
{
    char *key = NULL;
    if (c->conf.key_cmd && *c->conf.key_cmd) {
        if (!c->get_key) {
            buf_printf(err, "%s: key_cmd cannot be run here", c->conf.name);
            return -1;
        }
        key = c->get_key(&c->conf, err);
        if (!key)
            return -1;
    } else if (c->conf.key_env) {
        const char *v = getenv(c->conf.key_env);
        if (!v || !*v) {
            buf_printf(err, "%s: key_env names %s, which is not set", c->conf.name,
                       c->conf.key_env);
            return -1;
        }
        char *from = xasprintf("$%s ([mcp %s] key_env)", c->conf.key_env, c->conf.name);
        key = util_key_take(v, from, err);
        free(from);
        if (!key) {
            if (!err->len)
                buf_printf(err, "%s: key_env names %s, which holds only blanks", c->conf.name,
                           c->conf.key_env);
            return -1;
        }
    }
    size_t n = 0;
    int uses_key = 0;
    for (char **h = c->conf.headers; h && *h; h++, n++)
        uses_key |= strstr(*h, "{key}") != NULL;
    char **v = xcalloc(n + 2, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = mcp_expand(c->conf.headers[i], key);
        size_t len = strlen(v[i]); /* a $VAR saved with its newline */
        while (len && (v[i][len - 1] == '\r' || v[i][len - 1] == '\n'))
            v[i][--len] = '\0';
        const char *colon = strchr(v[i], ':');
        for (size_t j = 0; j < len; j++)
            if (((unsigned char)v[i][j] < 0x20 && v[i][j] != '\t') || v[i][j] == 0x7f) {
                buf_printf(err, "%s: the header %.*s holds a control character once $VAR and "
                                "{key} are put in (byte %zu); nothing was sent",
                           c->conf.name,
                           (int)(colon && (size_t)(colon - v[i]) < j ? (size_t)(colon - v[i]) : j),
                           v[i], j + 1);
                for (size_t k = 0; k <= i; k++)
                    util_free_secret(v[k]);
                free(v);
                util_free_secret(key);
                return -1;
            }
        if (colon && util_secret_name(v[i], (size_t)(colon - v[i]))) /* "Bearer KEY" whole:
                                                                       its pieces are starred */
            mcp_secret_add(c, colon + 1 + strspn(colon + 1, " \t"));
    }
    mcp_secret_add(c, key);
    if (key && !uses_key)
        v[n++] = xasprintf("Authorization: Bearer %s", key);
    mcp_strv_free_all(c->http_headers);
    c->http_headers = v;
    if (key) {
        util_wipe(key, strlen(key));
        free(key);
    }
    return 0;
}

/* One POST in flight. */
struct mcp_post {
    struct mcp_client *c;
    char *body;
    size_t len;
    long id;               /* 0: a notification or an answer */
    const char *method;    /* NULL: POST */
    int kind;              /* 0 not known yet, 1 JSON, 2 event stream, 3 something else */
    struct buf json;       /* a JSON answer, up to the limit */
    int too_large;
    struct sse_parser sse;
    struct buf why;
    long status;
    int sent_session;      /* the POST carried an Mcp-Session-Id */
};

static int mcp_http_event(void *ud, const struct sse_event *ev)
{
    struct mcp_post *p = ud;
    if (strcmp(ev->type, "message") == 0)
        mcp_dispatch(p->c, ev->data, ev->data_len);
    return 0;
}

/* The value of header name in the header lines hs (a new string), NULL when absent. */
static char *mcp_header_value(const struct buf *hs, const char *name)
{
    size_t nl = strlen(name);
    for (const char *l = hs->data; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        if (n > nl && strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vn = (size_t)(l + n - v);
            while (vn && (v[vn - 1] == '\r' || v[vn - 1] == ' '))
                vn--;
            return xstrndup(v, vn);
        }
        l = end ? end + 1 : l + n;
    }
    return NULL;
}

static int mcp_http_data(void *ud, const struct buf *headers, const char *s, size_t n)
{
    struct mcp_post *p = ud;
    if (!p->kind) {
        char *ct = mcp_header_value(headers, "Content-Type");
        p->kind = !ct ? 3 : strncasecmp(ct, "text/event-stream", 17) == 0 ? 2
                      : strncasecmp(ct, "application/json", 16) == 0 ? 1 : 3;
        free(ct);
        char *sid = mcp_header_value(headers, "Mcp-Session-Id");
        if (sid) {
            pthread_mutex_lock(&p->c->mu);
            if (!p->c->session_id)
                p->c->session_id = sid, sid = NULL;
            pthread_mutex_unlock(&p->c->mu);
            free(sid);
        }
    }
    if (p->kind == 2) {
        int rc = sse_feed(&p->sse, s, n, mcp_http_event, p);
        if (rc < 0) {
            p->too_large = 1;
            return 1;
        }
    } else if (p->json.len + n > mcp_max_message(p->c)) {
        p->too_large = 1;
        return 1;
    } else
        buf_append(&p->json, s, n);
    return 0;
}

static int mcp_http_stop(void *ud)
{
    struct mcp_post *p = ud;
    pthread_mutex_lock(&p->c->mu);
    int stop = p->c->stopping;
    if (!stop && p->id) {
        stop = 1;
        for (struct mcp_pending *q = p->c->pending; q; q = q->next)
            if (q->id == p->id)
                stop = q->done; /* answered, timed out or cancelled */
    }
    pthread_mutex_unlock(&p->c->mu);
    return stop;
}

/* Make the POST (or DELETE); 0, or -1 with p->why set. */
/* How much of url a message may show: not its query or fragment, where a token often rides
 * (the message can become a tool result the model reads). */
static int mcp_http_url_shown(const char *url)
{
    return (int)strcspn(url, "?#");
}

static int mcp_http_do(struct mcp_post *p)
{
    struct mcp_client *c = p->c;
    size_t nh = 0;
    for (char **h = c->http_headers; h && *h; h++)
        nh++;
    const char **hs = xcalloc(nh + 6, sizeof *hs);
    char *sid = NULL, *ver = NULL;
    size_t k = 0;
    hs[k++] = "Content-Type: application/json";
    hs[k++] = "Accept: application/json, text/event-stream";
    pthread_mutex_lock(&c->mu);
    if (c->session_id) {
        hs[k++] = sid = xasprintf("Mcp-Session-Id: %s", c->session_id);
        p->sent_session = 1;
    }
    if (c->protocol[0])
        hs[k++] = ver = xasprintf("MCP-Protocol-Version: %s", c->protocol);
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nh; i++)
        hs[k++] = c->http_headers[i];
    struct net_probe_request req = {
        .url = c->conf.url, .headers = hs, .user_agent = "tokterm/" PACKAGE_VERSION,
        .timeout_ms = (long)(c->conf.timeout * 1000) + 1000, .connect_timeout_ms = 10000,
        .method = p->method, .body = p->body, .body_len = p->len,
        .on_data = mcp_http_data, .should_stop = mcp_http_stop, .ud = p};
    struct net_probe_result out;
    sse_init(&p->sse, mcp_max_message(c));
    int rc = net_probe(&req, &out);
    p->status = out.status;
    if (rc != 0)
        buf_printf(&p->why, "%s", out.why);
    else if (p->too_large)
        rc = -1;
    else if (out.failure != NET_PROBE_OK && !mcp_http_stop(p)) {
        buf_printf(&p->why, "%.*s: %s", mcp_http_url_shown(c->conf.url), c->conf.url, out.why);
        rc = -1;
    } else if (out.status >= 400) {
        buf_printf(&p->why, "HTTP %ld from %.*s", out.status, mcp_http_url_shown(c->conf.url),
                   c->conf.url);
        if (p->json.len) {
            struct buf safe = BUF_INIT;
            mcp_dispatch(c, p->json.data, p->json.len); /* a JSON-RPC error, perhaps */
            buf_free(&safe);
        }
        rc = -1;
    } else if (p->kind == 1 && p->json.len)
        mcp_dispatch(c, p->json.data, p->json.len);
    net_probe_result_free(&out);
    sse_free(&p->sse);
    free(sid);
    free(ver);
    free(hs);
    return rc;
}

static void mcp_post_free(struct mcp_post *p)
{
    free(p->body);
    buf_free(&p->json);
    buf_free(&p->why);
    free(p);
}

static void *mcp_http_thread(void *arg)
{
    struct mcp_post *p = arg;
    struct mcp_client *c = p->c;
    int rc = mcp_http_do(p);
    if (p->too_large) {
        char why[160];
        snprintf(why, sizeof why, "the server's answer is over the limit of %ld MiB "
                 "(max_result_mb in [mcp %s])", c->conf.max_result_mb, c->conf.name);
        mcp_request_failed(c, p->id, MCP_TOO_LARGE, why);
    } else if (rc != 0 && p->status == 404 && p->sent_session) {
        /* the server forgot the session (it restarted): the next request starts a new one */
        mcp_request_failed(c, p->id, MCP_FAILED, "the server ended the session (HTTP 404); the "
                                                  "next request starts a new one");
        mcp_server_ended(c, "the server ended the session (HTTP 404)");
    } else if (rc != 0)
        mcp_request_failed(c, p->id, MCP_FAILED, p->why.data);
    else /* the answer should have come by now */
        mcp_request_failed(c, p->id, MCP_FAILED, "the server's answer ended without a result");
    mcp_post_free(p);
    pthread_mutex_lock(&c->mu);
    c->http_threads--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int mcp_http_send(struct mcp_client *c, const char *msg, size_t n, long id,
                         struct buf *err)
{
    struct mcp_post *p = xcalloc(1, sizeof *p);
    p->c = c;
    p->body = xstrndup(msg, n);
    p->len = n;
    p->id = id;
    if (!id) { /* a notification or an answer: 202 Accepted, nothing to wait for */
        int rc = mcp_http_do(p);
        if (rc != 0)
            buf_printf(err, "%s", p->why.data ? p->why.data : "failed");
        mcp_post_free(p);
        return rc;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    pthread_mutex_lock(&c->mu);
    c->http_threads++;
    pthread_mutex_unlock(&c->mu);
    int rc = pthread_create(&th, &at, mcp_http_thread, p);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        pthread_mutex_lock(&c->mu);
        c->http_threads--;
        pthread_mutex_unlock(&c->mu);
        mcp_post_free(p);
        buf_printf(err, "cannot start a thread");
        return -1;
    }
    return 0;
}

static void mcp_http_close(struct mcp_client *c, double grace)
{
    (void)grace;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    while (c->http_threads > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    c->stopping = 0;
    char *sid = c->session_id;
    pthread_mutex_unlock(&c->mu);
    if (sid) { /* end the session (a server may answer 405: it does not let clients) */
        struct mcp_post *p = xcalloc(1, sizeof *p);
        p->c = c;
        p->method = "DELETE";
        double t = c->conf.timeout;
        c->conf.timeout = 2;
        mcp_http_do(p);
        c->conf.timeout = t;
        mcp_post_free(p);
    }
    pthread_mutex_lock(&c->mu);
    c->session_id = NULL;
    pthread_mutex_unlock(&c->mu);
    free(sid);
    mcp_strv_free_all(c->http_headers);
    c->http_headers = NULL;
    mcp_server_ended(c, "the session was ended");
}

const struct mcp_transport mcp_http_transport = {mcp_http_open, mcp_http_send, mcp_http_close};
