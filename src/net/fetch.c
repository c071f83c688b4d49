/* fetch.c - one bounded GET of an attached URL (fetch.h). */
#include "config.h"
#include "net/fetch.h"

#include "net/curl_dl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct net_fetch_xfer {
    const struct net_fetch_request *req;
    struct net_fetch_result *out;
    CURL *e;
    int checked; /* the Content-Type has been looked at */
    enum net_fetch_failure stop; /* why the write callback stopped the transfer */
};

int net_fetch_is_url(const char *s)
{
    return s && (strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0);
}

/* The host part of a URL for messages (at most size - 1 bytes). */
static void net_fetch_host(const char *url, char *host, size_t size)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    snprintf(host, size, "%.*s", (int)(n < size ? n : size - 1), p);
}

static size_t net_fetch_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct net_fetch_xfer *x = ud;
    struct net_fetch_result *out = x->out;
    size_t n = size * nmemb;
    if (!x->checked) {
        x->checked = 1;
        curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &out->status);
        char *ct = NULL;
        curl_easy_getinfo(x->e, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(out->content_type, sizeof out->content_type, "%s", ct ? ct : "");
        if (out->status >= 400) { /* the error page is not wanted */
            x->stop = NET_FETCH_HTTP;
            return 0;
        }
        if (x->req->accept && !x->req->accept(out->content_type, x->req->ud)) {
            x->stop = NET_FETCH_TYPE;
            return 0;
        }
    }
    if (out->body.len + n > x->req->max_bytes) {
        x->stop = NET_FETCH_SIZE;
        return 0;
    }
    buf_append(&out->body, p, n);
    return n;
}

/* Refuse what is not an http(s) URL, and one carrying credentials. */
static int net_fetch_check_url(const char *url, struct net_fetch_result *out)
{
    if (!net_fetch_is_url(url)) {
        snprintf(out->why, sizeof out->why, "only http:// and https:// addresses are fetched");
        return -1;
    }
    const char *host = strstr(url, "://") + 3;
    size_t n = strcspn(host, "/?#");
    if (memchr(host, '@', n)) {
        snprintf(out->why, sizeof out->why,
                 "the address holds a user name or password: it is not fetched (it would be "
                 "kept in the conversation); remove it from the URL");
        return -1;
    }
    if (n == 0 || strpbrk(url, " \t\r\n")) {
        snprintf(out->why, sizeof out->why, "not a valid address");
        return -1;
    }
    return 0;
}

static void net_fetch_options(CURL *e, const struct net_fetch_request *req,
                              struct net_fetch_xfer *x, char *errbuf, struct curl_slist *hdrs)
{
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_USERAGENT, req->user_agent ? req->user_agent : "tokterm");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, net_fetch_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* every encoding curl decodes */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     req->timeout_ms < 10000 ? req->timeout_ms : 10000L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, req->max_redirects);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_bytes);
    curl_easy_setopt(e, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    curl_easy_setopt(e, CURLOPT_UNRESTRICTED_AUTH, 0L);
    /* http and https only, redirects included (the _STR options from 7.85; the bit masks
     * before, by number, since newer headers mark them deprecated). */
    CURLcode strs = CURLE_UNKNOWN_OPTION;
#if LIBCURL_VERSION_NUM >= 0x075500
    strs = curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strs == CURLE_OK)
        strs = curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    if (strs != CURLE_OK) {
        long both = CURLPROTO_HTTP | CURLPROTO_HTTPS;
        curl_easy_setopt(e, (CURLoption)(CURLOPTTYPE_LONG + 181), both);
        curl_easy_setopt(e, (CURLoption)(CURLOPTTYPE_LONG + 182), both);
    }
}

/* The failure and its message after the transfer returned res. */
static void net_fetch_explain(const struct net_fetch_request *req, struct net_fetch_xfer *x,
                              CURLcode res, const char *errbuf)
{
    struct net_fetch_result *out = x->out;
    char host[128];
    net_fetch_host(req->url, host, sizeof host);
    if (res == CURLE_WRITE_ERROR && x->stop)
        out->failure = x->stop;
    else if (res == CURLE_FILESIZE_EXCEEDED)
        out->failure = NET_FETCH_SIZE;
    else if (res == CURLE_OPERATION_TIMEDOUT)
        out->failure = NET_FETCH_TIMEOUT;
    else if (res == CURLE_TOO_MANY_REDIRECTS)
        out->failure = NET_FETCH_HTTP;
    else if (res == CURLE_UNSUPPORTED_PROTOCOL)
        out->failure = NET_FETCH_URL;
    else if (res != CURLE_OK)
        out->failure = NET_FETCH_NETWORK;
    else if (out->status >= 400)
        out->failure = NET_FETCH_HTTP;
    switch (out->failure) {
    case NET_FETCH_SIZE:
        snprintf(out->why, sizeof out->why, "%s sent more than %zu bytes", host,
                 req->max_bytes);
        break;
    case NET_FETCH_TIMEOUT:
        snprintf(out->why, sizeof out->why, "no whole answer from %s within %.3g s", host,
                 (double)req->timeout_ms / 1000.0);
        break;
    case NET_FETCH_TYPE:
        snprintf(out->why, sizeof out->why, "%s sent %s, which is not text, HTML, an image or "
                 "a PDF", host, out->content_type[0] ? out->content_type : "no Content-Type");
        break;
    case NET_FETCH_HTTP:
        if (res == CURLE_TOO_MANY_REDIRECTS)
            snprintf(out->why, sizeof out->why, "%s redirected more than %ld times", host,
                     req->max_redirects);
        else
            snprintf(out->why, sizeof out->why, "%s answered HTTP %ld", host, out->status);
        break;
    case NET_FETCH_URL:
        snprintf(out->why, sizeof out->why, "%s redirected to an address that is not http(s)",
                 host);
        break;
    case NET_FETCH_CANCELLED:
        snprintf(out->why, sizeof out->why, "cancelled while fetching from %s", host);
        break;
    case NET_FETCH_NETWORK:
        snprintf(out->why, sizeof out->why, "%s: %.180s", host,
                 errbuf[0] ? errbuf : curl_easy_strerror(res));
        break;
    default:
        break;
    }
}

/* Run the transfer: curl_easy_perform, or a multi loop that asks req->cancelled every
 * NET_FETCH_POLL_MS (curl's own progress callback can wait a second between calls when
 * nothing arrives). */
static CURLcode net_fetch_perform(CURL *e, const struct net_fetch_request *req,
                                  struct net_fetch_xfer *x)
{
    if (!req->cancelled)
        return curl_easy_perform(e);
    CURLM *m = curl_multi_init();
    if (!m || curl_multi_add_handle(m, e) != CURLM_OK) {
        if (m)
            curl_multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY;
    }
    CURLcode res = CURLE_OK;
    for (int running = 1, done = 0; !done;) {
        if (req->cancelled(req->ud)) {
            x->stop = NET_FETCH_CANCELLED;
            res = CURLE_WRITE_ERROR;
            break;
        }
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            res = CURLE_OUT_OF_MEMORY;
            break;
        }
        int left;
        for (CURLMsg *msg; (msg = curl_multi_info_read(m, &left)) != NULL;)
            if (msg->msg == CURLMSG_DONE) {
                res = msg->data.result;
                done = 1;
            }
        if (!done && running && curl_multi_poll(m, NULL, 0, NET_FETCH_POLL_MS, NULL) != CURLM_OK) {
            res = CURLE_OUT_OF_MEMORY;
            break;
        }
        if (!done && !running)
            done = 1; /* ended without a message: res stays as it is */
    }
    curl_multi_remove_handle(m, e);
    curl_multi_cleanup(m);
    return res;
}

int net_fetch(const struct net_fetch_request *req, struct net_fetch_result *out)
{
    memset(out, 0, sizeof *out);
    if (net_fetch_check_url(req->url, out) != 0) {
        out->failure = NET_FETCH_URL;
        return -1;
    }
    const char *unloaded = NULL;
    CURL *e = curl_dl_load(&unloaded) == 0 ? curl_easy_init() : NULL;
    if (!e) {
        out->failure = NET_FETCH_UNLOADED;
        snprintf(out->why, sizeof out->why, "%s",
                 unloaded ? unloaded : "curl could not be initialised");
        return -1;
    }
    struct net_fetch_xfer x = {req, out, e, 0, NET_FETCH_OK};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = curl_slist_append(
        NULL, "Accept: text/html,application/xhtml+xml,text/plain;q=0.9,text/*;q=0.8,"
              "application/json;q=0.8,image/*;q=0.5,application/pdf;q=0.5,*/*;q=0.1");
    net_fetch_options(e, req, &x, errbuf, hdrs);
    CURLcode res = net_fetch_perform(e, req, &x);
    if (!out->status)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    if (!x.checked) {
        char *ct = NULL;
        curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(out->content_type, sizeof out->content_type, "%s", ct ? ct : "");
        /* an empty body: the type is still checked */
        if (res == CURLE_OK && out->status < 400 && req->accept &&
            !req->accept(out->content_type, req->ud)) {
            x.stop = NET_FETCH_TYPE;
            res = CURLE_WRITE_ERROR;
        }
    }
    char *eff = NULL;
    curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &eff);
    snprintf(out->final_url, sizeof out->final_url, "%s", eff ? eff : req->url);
    net_fetch_explain(req, &x, res, errbuf);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(e);
    return out->failure == NET_FETCH_OK ? 0 : -1;
}

void net_fetch_result_free(struct net_fetch_result *out)
{
    buf_free(&out->body);
}
