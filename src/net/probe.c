/* probe.c - one-off requests outside the network thread, and libcurl's identity (probe.h). */
#include "config.h"
#include "net/probe.h"

#include "net/curl_dl.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *net_library_version(const char **why)
{
    curl_version_info_data *cv = curl_dl_load(why) == 0 ? curl_version_info(CURLVERSION_NOW)
                                                          : NULL;
    if (!cv)
        return xstrdup("(not loadable) (-)");
    return xasprintf("%s (%s%s)", cv->version, cv->ssl_version ? cv->ssl_version : "no TLS",
                     (cv->features & CURL_VERSION_HTTP2) ? ", HTTP/2" : "");
}

int net_answers(const char *url, long timeout_ms)
{
    if (curl_dl_load(NULL) != 0)
        return 0;
    CURL *e = curl_easy_init();
    if (!e)
        return 0;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, curl_dl_discard);
    long status = 0;
    int ok = curl_easy_perform(e) == CURLE_OK &&
             curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
    curl_easy_cleanup(e);
    return ok;
}

void net_headers_free(struct curl_slist *headers)
{
    for (struct curl_slist *h = headers; h; h = h->next)
        util_wipe(h->data, strlen(h->data));
    curl_slist_free_all(headers);
}

static pthread_t net_preload_thread;
static int net_preload_started;
/* What the preload thread goes on with once libcurl is loaded (net_library_adopt). */
static pthread_mutex_t net_preload_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t net_preload_cond = PTHREAD_COND_INITIALIZER;
static void *(*net_preload_then)(void *);
static void *net_preload_arg;
static int net_preload_quit;   /* net_library_cleanup: no adoption will come */
static int net_preload_loaded; /* its load is over (done or failed): net_library_settle */
static pthread_cond_t net_loaded_cond; /* on CLOCK_MONOTONIC: set up by net_library_preload */

/* Where the loader starts: on a CPU other than the one that starts it, which goes on with
 * the store's work (the walk of a long conversation, the answer's SQL). Placed by the kernel,
 * it often started on that same CPU and the two threads took turns on it for a millisecond or
 * more while the other CPU idled: the VM of session 41 packs a process's threads onto one
 * vCPU (its kernel's sched_vcpu_pack). Only where it starts: it then runs on the CPUs the
 * process may use (net_preload_unplace), as every other thread does. 31 interleaved runs of
 * each (bench marks, not in the tree): the load started 0.8 ms after main() instead of 1.7-2.8
 * ms, and a -c -p of 10,000 short messages ended at 10.3-11.7 ms instead of 13.3-13.5 ms. */
#if defined(__linux__) && defined(CPU_SET)
static cpu_set_t net_preload_cpus; /* the process's CPUs when the loader was placed */
static int net_preload_placed;
static int net_preload_cpu_from = -1, net_preload_cpu_at = -1; /* net_library_placement */

/* An attribute for the loader's thread that starts it off the calling thread's CPU: attr, or
 * NULL where there is no other CPU to start it on. */
static pthread_attr_t *net_preload_place(pthread_attr_t *attr)
{
    cpu_set_t other;
    int here = sched_getcpu();
    if (here < 0 || here >= CPU_SETSIZE ||
        sched_getaffinity(0, sizeof net_preload_cpus, &net_preload_cpus) != 0)
        return NULL;
    other = net_preload_cpus;
    CPU_CLR(here, &other);
    if (CPU_COUNT(&other) == 0 || pthread_attr_init(attr) != 0)
        return NULL;
    if (pthread_attr_setaffinity_np(attr, sizeof other, &other) != 0) {
        pthread_attr_destroy(attr);
        return NULL;
    }
    net_preload_placed = 1;
    net_preload_cpu_from = here;
    return attr;
}

/* In the loader: the process's CPUs again, now that it has started. */
static void net_preload_unplace(void)
{
    if (!net_preload_placed)
        return;
    net_preload_cpu_at = sched_getcpu();
    (void)sched_setaffinity(0, sizeof net_preload_cpus, &net_preload_cpus);
}

void net_library_placement(int *starter, int *loader)
{
    *starter = net_preload_placed ? net_preload_cpu_from : -1;
    *loader = net_preload_placed ? net_preload_cpu_at : -1;
}
#else
static pthread_attr_t *net_preload_place(pthread_attr_t *attr)
{
    (void)attr;
    return NULL;
}

static void net_preload_unplace(void)
{
}

void net_library_placement(int *starter, int *loader)
{
    *starter = *loader = -1;
}
#endif

/* Loaded before the request is ready (a resume of a long conversation, a chat's first
 * prompt), the thread waits to be adopted rather than end: a thread started then took
 * ~1 ms on the project's VM (the stack's mmap and the clone, then the idle vCPU's wake-up),
 * on the way of the request; a wake-up of this one is a fraction of it. */
static void *net_preload_main(void *arg)
{
    (void)arg;
    net_preload_unplace();
    (void)curl_dl_load(NULL); /* its error, if any, is told by whoever needs curl next */
    pthread_mutex_lock(&net_preload_lock);
    net_preload_loaded = 1;
    pthread_cond_broadcast(&net_loaded_cond);
    while (!net_preload_then && !net_preload_quit)
        pthread_cond_wait(&net_preload_cond, &net_preload_lock);
    void *(*then)(void *) = net_preload_then;
    pthread_mutex_unlock(&net_preload_lock);
    return then ? then(net_preload_arg) : NULL;
}

int net_library_adopt(void *(*fn)(void *), void *arg)
{
    if (!net_preload_started)
        return 0;
    pthread_mutex_lock(&net_preload_lock);
    int ok = !net_preload_then && !net_preload_quit;
    if (ok) {
        net_preload_then = fn;
        net_preload_arg = arg;
        pthread_cond_signal(&net_preload_cond);
    }
    pthread_mutex_unlock(&net_preload_lock);
    return ok;
}

void net_library_join(void)
{
    if (net_preload_started) {
        pthread_join(net_preload_thread, NULL);
        net_preload_started = 0;
    }
}

int net_library_loaded(void)
{
    return curl_dl_loaded();
}

void net_library_wait(void)
{
    (void)curl_dl_load(NULL);
}

/* A thread of this process running beside the loader makes the load slower: the loader writes
 * to pages it first read (each library's relocations), and each such copy-on-write fault
 * flushes the TLB of every CPU that runs the process, with an interrupt the loader waits for.
 * On the 2-vCPU VM of session 40 (bench/shootdown.c, medians of 21 rounds): such a flush took
 * 25 us with a thread of the process running on the other vCPU, 7 us with another process
 * there; libcurl's load in a fresh process took 7.3 ms beside a spinning thread, 6.0 alone. */
void net_library_settle(int max_ms)
{
    if (!net_preload_started || curl_dl_loaded())
        return;
    struct timespec until;
    util_deadline_ms(&until, max_ms);
    pthread_mutex_lock(&net_preload_lock);
    while (!net_preload_loaded &&
           pthread_cond_timedwait(&net_loaded_cond, &net_preload_lock, &until) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&net_preload_lock);
}

void net_library_preload(void)
{
    if (net_preload_started || curl_dl_loaded())
        return;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&net_loaded_cond, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* signals reach the UI thread only */
    pthread_attr_t attr, *placed = net_preload_place(&attr);
    net_preload_started = pthread_create(&net_preload_thread, placed, net_preload_main, NULL) == 0;
    if (placed) {
        pthread_attr_destroy(placed);
        if (!net_preload_started) { /* a CPU the process may no longer use: as before */
            net_preload_placed = 0;
            net_preload_started =
                pthread_create(&net_preload_thread, NULL, net_preload_main, NULL) == 0;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void net_library_cleanup(void)
{
    /* An adopted thread is the network's: net_stop joins it (one never stopped runs on, as a
     * network thread of its own would). One still waiting to be adopted ends now. */
    pthread_mutex_lock(&net_preload_lock);
    int adopted = net_preload_then != NULL;
    if (!adopted) {
        net_preload_quit = 1;
        pthread_cond_signal(&net_preload_cond);
    }
    pthread_mutex_unlock(&net_preload_lock);
    if (!adopted)
        net_library_join();
    if (curl_dl_loaded())
        curl_global_cleanup();
}

/* ---- net_probe ------------------------------------------------------------------------ */

struct net_probe_xfer {
    struct net_probe_result *out;
    const struct net_probe_request *req;
};

static int net_probe_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                              curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const struct net_probe_request *req = ((struct net_probe_xfer *)ud)->req;
    return req->should_stop && req->should_stop(req->ud);
}

static size_t net_probe_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct net_probe_xfer *x = ud;
    struct buf *b = &x->out->body;
    size_t n = size * nmemb;
    if (x->req->on_data)
        return x->req->on_data(x->req->ud, &x->out->headers, p, n) ? 0 : n;
    if (b->len < x->req->body_max)
        buf_append(b, p, n < x->req->body_max - b->len ? n : x->req->body_max - b->len);
    return n;
}

static size_t net_probe_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct net_probe_xfer *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) /* a new answer (after a 100 or a redirect) */
        buf_reset(&x->out->headers);
    buf_append(&x->out->headers, p, n);
    return n;
}

static double net_probe_ms(CURL *e, CURLINFO what)
{
    curl_off_t us = 0;
    curl_easy_getinfo(e, what, &us);
    return (double)us / 1000.0;
}

/* The step of the request that res says failed. */
static enum net_probe_failure net_probe_failure_of(CURLcode res, double connect_ms)
{
    switch (res) {
    case CURLE_OK:
        return NET_PROBE_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
        return NET_PROBE_RESOLVE;
    case CURLE_COULDNT_CONNECT:
        return NET_PROBE_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return connect_ms == 0 ? NET_PROBE_CONNECT : NET_PROBE_OTHER;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
        return NET_PROBE_TLS;
    default:
        return NET_PROBE_OTHER;
    }
}

/* The request's options on handle e; the header list to free afterwards. */
static struct curl_slist *net_probe_setup(CURL *e, const struct net_probe_request *req,
                                          struct net_probe_xfer *x, char *errbuf)
{
    struct curl_slist *hdrs = NULL;
    for (const char *const *h = req->headers; h && *h; h++)
        hdrs = curl_slist_append(hdrs, *h);
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    if (req->user_agent)
        curl_easy_setopt(e, CURLOPT_USERAGENT, req->user_agent);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, net_probe_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, net_probe_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "identity"); /* decode whatever arrives */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms);
    if (req->cacert && *req->cacert)
        curl_easy_setopt(e, CURLOPT_CAINFO, req->cacert);
    if (req->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (req->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
    }
    if (req->method)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    if (req->should_stop) {
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, net_probe_progress);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    }
    return hdrs;
}

int net_probe(const struct net_probe_request *req, struct net_probe_result *out)
{
    memset(out, 0, sizeof *out);
    const char *unloaded = NULL;
    CURL *e = curl_dl_load(&unloaded) == 0 ? curl_easy_init() : NULL;
    if (!e) {
        out->failure = NET_PROBE_UNLOADED;
        snprintf(out->why, sizeof out->why, "%s",
                 unloaded ? unloaded : "curl could not be initialised");
        return -1;
    }
    struct net_probe_xfer x = {out, req};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = net_probe_setup(e, req, &x, errbuf);
    CURLcode res = curl_easy_perform(e);
    if (res != CURLE_OK)
        snprintf(out->why, sizeof out->why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(res));
    char *ip = NULL;
    if (curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip)
        snprintf(out->ip, sizeof out->ip, "%s", ip);
    out->dns_ms = net_probe_ms(e, CURLINFO_NAMELOOKUP_TIME_T);
    out->connect_ms = net_probe_ms(e, CURLINFO_CONNECT_TIME_T);
    out->tls_ms = net_probe_ms(e, CURLINFO_APPCONNECT_TIME_T);
    out->total_ms = net_probe_ms(e, CURLINFO_TOTAL_TIME_T);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    out->failure = net_probe_failure_of(res, out->connect_ms);
    long proxy = 0; /* a refused tunnel: libcurl says a receive error */
    if (res != CURLE_OK && curl_easy_getinfo(e, CURLINFO_HTTP_CONNECTCODE, &proxy) == CURLE_OK &&
        proxy >= 300) {
        out->failure = NET_PROBE_PROXY;
        out->proxy_status = proxy;
    }
    net_headers_free(hdrs);
    curl_easy_cleanup(e);
    if (req->secret) {
        util_redact(out->why, req->secret);
        util_redact(out->headers.data, req->secret);
        util_redact(out->body.data, req->secret);
    }
    net_proxy_redact(out->why);
    net_proxy_redact(out->headers.data);
    net_proxy_redact(out->body.data);
    return 0;
}

static char **net_proxy_secrets; /* NULL-terminated, made once */
static pthread_once_t net_proxy_once = PTHREAD_ONCE_INIT;

static void net_proxy_secrets_make(void)
{
    static const char *const vars[] = {"http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY",
                                       "ALL_PROXY"};
    size_t n = 0;
    net_proxy_secrets = xcalloc(3 * TT_ARRAY_LEN(vars) + 1, sizeof *net_proxy_secrets);
    for (size_t i = 0; i < TT_ARRAY_LEN(vars); i++) {
        char *u = util_url_userinfo(getenv(vars[i]));
        if (!u)
            continue;
        struct buf b = BUF_INIT;
        buf_append_base64(&b, u, strlen(u));
        net_proxy_secrets[n++] = buf_take(&b);
        char *colon = strchr(u, ':');
        if (colon && colon[1])
            net_proxy_secrets[n++] = xstrdup(colon + 1);
        net_proxy_secrets[n++] = u;
    }
}

void net_proxy_redact(char *text)
{
    if (!text)
        return;
    pthread_once(&net_proxy_once, net_proxy_secrets_make);
    for (char **s = net_proxy_secrets; *s; s++)
        util_redact(text, *s);
}

void net_probe_result_free(struct net_probe_result *out)
{
    buf_free(&out->headers);
    buf_free(&out->body);
}
