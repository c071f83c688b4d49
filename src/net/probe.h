/* probe.h - requests made outside the network thread (the local-server probe, and
 * `tokterm doctor`'s look at an endpoint) and what libcurl is. The rest of the program never
 * includes curl_dl.h: only net/ talks to libcurl. */
#ifndef TT_NET_PROBE_H
#define TT_NET_PROBE_H
#include <stddef.h>

#include "base/buf.h"

/* libcurl for --version: "8.5.0 (OpenSSL/3.0.13, HTTP/2)", or "(not loadable) (-)" with *why
 * (when why != NULL) pointing to what to install (static). The string is malloc'd. */
char *net_library_version(const char **why);

/* Does GET url answer 200 within timeout_ms? 1 yes, 0 no (nothing, an error, libcurl missing). */
int net_answers(const char *url, long timeout_ms);

/* Star in text (may be NULL) every credential of the proxy variables libcurl reads
 * (http_proxy, https_proxy, all_proxy, HTTPS_PROXY, ALL_PROXY): each user:password, its
 * password, and their base64, which a Proxy-Authorization: Basic carries and a proxy's 407 page
 * may echo (until 2026-12 printed, saved and shown by doctor as it came). */
void net_proxy_redact(char *text);

struct curl_slist;
/* For net/: wipe each line of a header list (one may carry a key) and free the list. */
void net_headers_free(struct curl_slist *headers);

/* Start loading libcurl (dlopen, curl_global_init) on a thread of its own, so that the
 * configuration's other work (the key, the store, the history) does not wait for it; the
 * first user of curl waits for the load to end (pthread_once), and sees its error. Once. */
void net_library_preload(void);
/* 1 once libcurl is loaded (by the preload thread or anyone), 0 before: a request can leave
 * now, and the network thread is there or can start at once. */
int net_library_loaded(void);
/* Where the preload started (tests): the CPU of the thread that started it, and the one its
 * thread first ran on; both -1 when it was not placed (one CPU, or no affinity). */
void net_library_placement(int *starter, int *loader);
/* The loading thread, once libcurl is loaded (or failed to load), goes on with fn(arg)
 * (net_start's network thread: a thread cannot be created while dlopen() holds the loader's
 * lock, and none has to start once it is loaded: it waits for this after the load). 1 when
 * taken, 0 when it was never started or was taken already. Once. */
int net_library_adopt(void *(*fn)(void *), void *arg);
/* Join the loading thread (for an adopted fn: once fn returned). */
void net_library_join(void);
/* Wait until libcurl is loaded (or failed to load; whoever needs it next says so): a run
 * that times itself (scripted --trace) leaves the load out of what it times. */
void net_library_wait(void);
/* The same, but only while the preload thread is loading it (net_library_preload), and for at
 * most max_ms: a caller with work that can wait for the load sleeps through it instead of
 * running beside it, and a load that hangs (a library on a stuck file system) holds it no
 * longer than that. */
void net_library_settle(int max_ms);

/* At the very end of the process (after net_stop): the preload joined, libcurl's global
 * cleanup when it was loaded. */
void net_library_cleanup(void);

/* One GET (or a POST or DELETE), its answer kept whole (up to body_max bytes) with curl's
 * timings, or handed to on_data as it arrives (the MCP client's Streamable HTTP). */
struct net_probe_request {
    const char *url;
    const char *const *headers; /* "Name: value" lines to send, NULL-terminated; may be NULL */
    const char *user_agent;     /* NULL: curl's none */
    long timeout_ms;            /* the whole request */
    long connect_timeout_ms;
    const char *cacert;         /* CA bundle to trust; NULL or "" = the system's */
    int insecure;               /* skip the certificate checks */
    size_t body_max;            /* a longer body is cut (the request still succeeds) */
    const char *method;         /* NULL: GET, or POST when body is set; or e.g. "DELETE" */
    const char *body;           /* the request body (body_len bytes), NULL = none */
    size_t body_len;
    /* When set, the answer's bytes go here as they arrive instead of into out->body; headers
     * holds the answer's header lines so far. Returning non-zero ends the transfer. */
    int (*on_data)(void *ud, const struct buf *headers, const char *p, size_t n);
    int (*should_stop)(void *ud); /* polled about every second and on each read; 1 = end */
    void *ud;
    /* a secret the answer may echo (the key sent): starred in out's why, headers and body
     * (util_redact; until 2026-12 doctor and models showed a 401's echo of it whole) */
    const char *secret;
};

/* Where a probe failed, in the order the request goes. */
enum net_probe_failure {
    NET_PROBE_OK,         /* an HTTP answer arrived completely (any status) */
    NET_PROBE_UNLOADED,   /* libcurl could not be loaded or a handle made: nothing was sent */
    NET_PROBE_RESOLVE,    /* the host name did not resolve */
    NET_PROBE_CONNECT,    /* no TCP connection (refused, or the time ran out before one) */
    NET_PROBE_PROXY,      /* the proxy refused the tunnel (proxy_status: its CONNECT's answer) */
    NET_PROBE_TLS,        /* the TLS handshake or the certificate check failed */
    NET_PROBE_OTHER,      /* any other transport failure (see status: an answer may have begun) */
};

struct net_probe_result {
    enum net_probe_failure failure;
    char why[256];        /* curl's message for a failure ("" when OK) */
    char ip[64];          /* the address connected to, "" when none */
    double dns_ms, connect_ms, tls_ms, total_ms; /* since the start (curl's *_TIME_T); 0 = none */
    long status;          /* HTTP status of the last answer, 0 when none */
    long proxy_status;    /* NET_PROBE_PROXY: the proxy's status for the CONNECT (407, 403) */
    struct buf headers;   /* the last answer's header lines as received, status line first */
    struct buf body;      /* up to body_max bytes */
};

/* Send req (loads libcurl if needed; no signal is used) and fill *out. Returns 0 when the
 * request was made (see out->failure), -1 with out->failure = NET_PROBE_UNLOADED and out->why
 * set otherwise. Free with net_probe_result_free in both cases. */
int net_probe(const struct net_probe_request *req, struct net_probe_result *out);
void net_probe_result_free(struct net_probe_result *out);

#endif
