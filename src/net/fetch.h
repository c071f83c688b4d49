/* fetch.h - one GET of a URL the user attached (-f https://..., /attach URL), on the calling
 * thread, with the limits a page from anywhere needs (and a way for the caller to cancel it):
 *   - http:// and https:// only, for the URL and for every redirect; a URL with a user name or
 *     password is refused (it would be kept in the transcript and the database);
 *   - at most max_redirects redirects; the whole request within timeout_ms; at most max_bytes
 *     of body after decoding (a larger Content-Length is refused before the body comes);
 *   - nothing of the user's is sent: no Authorization, no cookies (curl's cookie engine stays
 *     off), no .netrc, no API key or profile header; only Accept and a User-Agent;
 *   - the answer's Content-Type is checked when the first byte of the body arrives (accept):
 *     a type nobody can use stops the transfer there.
 * Library code: never prints; messages say what happened and what to change. */
#ifndef TT_NET_FETCH_H
#define TT_NET_FETCH_H
#include <stddef.h>

#include "base/buf.h"

enum net_fetch_failure {
    NET_FETCH_OK,
    NET_FETCH_URL,      /* not http(s), credentials in it, or malformed: nothing was sent */
    NET_FETCH_UNLOADED, /* libcurl could not be loaded */
    NET_FETCH_TIMEOUT,  /* no whole answer within timeout_ms */
    NET_FETCH_SIZE,     /* the body is larger than max_bytes */
    NET_FETCH_TYPE,     /* accept() refused the Content-Type */
    NET_FETCH_HTTP,     /* an HTTP status of 400 or more, or a redirect loop / too many */
    NET_FETCH_NETWORK,  /* resolve, connect, TLS, a transfer error */
    NET_FETCH_CANCELLED, /* cancelled() said to stop */
};

struct net_fetch_request {
    const char *url;
    long timeout_ms;
    size_t max_bytes;
    long max_redirects;
    const char *user_agent;
    /* Called once with the Content-Type ("" when the server sent none) before the body is
     * kept: 1 to go on, 0 to stop (NET_FETCH_TYPE). NULL accepts everything. */
    int (*accept)(const char *content_type, void *ud);
    void *ud;
    /* Asked every NET_FETCH_POLL_MS while the fetch waits (and between its reads): 1 stops it
     * at once (NET_FETCH_CANCELLED). NULL: only the limits stop it. */
    int (*cancelled)(void *ud);
};

#define NET_FETCH_POLL_MS 50

struct net_fetch_result {
    enum net_fetch_failure failure;
    char why[320];          /* the message when failure != NET_FETCH_OK */
    long status;            /* HTTP status of the last answer, 0 when none */
    char content_type[128]; /* of the last answer, "" when none */
    char final_url[1024];   /* after redirects */
    struct buf body;
};

/* GET req->url into *out. 0 on success (status < 400, body whole), -1 with out->failure and
 * out->why otherwise. Free out->body with net_fetch_result_free in both cases. */
int net_fetch(const struct net_fetch_request *req, struct net_fetch_result *out);
void net_fetch_result_free(struct net_fetch_result *out);

/* 1 when s starts with http:// or https:// (any case): what -f and /attach take as a URL. */
int net_fetch_is_url(const char *s);

#endif
