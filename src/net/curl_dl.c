/* curl_dl.c - dlopen() of libcurl on first use (see curl_dl.h). */
#include "config.h"
#include "net/curl_dl.h"

#include "base/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* configure finds the soname the development library links to; this is Debian's. */
#ifndef TT_CURL_SONAME
#define TT_CURL_SONAME "libcurl.so.4"
#endif
#define CURL_DL_HOW "install libcurl (the Debian package libcurl3-gnutls or libcurl4)"
/* Debian's libcurl built on GnuTLS (libcurl3-gnutls; the same API and version as libcurl4,
 * whose TLS is OpenSSL's) is tried first: it needs no libssl, and its load and
 * curl_global_init take ~0.5 ms less (5.1 against 5.6 ms, 80 interleaved loads on the
 * project's VM), on the way of every request's start. */
#define CURL_DL_FIRST "libcurl-gnutls.so.4"

struct curl_dl curl_dl_api;

static pthread_once_t curl_dl_once = PTHREAD_ONCE_INIT;
static char curl_dl_error[512] = "not loaded"; /* empty once loaded */

static const char *curl_dl_older(void *lib)
{
    (void)lib;
    return "7.68 or later is needed";
}

static void curl_dl_init(void)
{
    struct curl_dl api;
    memset(&api, 0, sizeof api);
    const struct util_dlfn fns[] = {
#define CURL_DL_FN(name) {"curl_" #name, &api.name, sizeof api.name},
        CURL_DL_FUNCS(CURL_DL_FN)
#undef CURL_DL_FN
    };
    /* $TOKTERM_LIBCURL names the only one; else the GnuTLS build first, then configure's
     * (the last one tried says what failed) */
    const char *only = getenv("TOKTERM_LIBCURL");
    const char *tries[2] = {CURL_DL_FIRST, TT_CURL_SONAME};
    size_t n = strcmp(tries[0], tries[1]) != 0 ? 2 : 1;
    if (only && *only) {
        tries[0] = only;
        n = 1;
    }
    void *lib = NULL;
    for (size_t i = 0; !lib && i < n; i++)
        lib = util_dlopen(tries[i], "libcurl", CURL_DL_HOW, fns, TT_ARRAY_LEN(fns),
                          curl_dl_older, curl_dl_error, sizeof curl_dl_error);
    if (!lib)
        return;
    /* Once, before any other thread uses curl (curl_global_init is not thread-safe in every
     * version); the library stays loaded until the process ends. */
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(curl_dl_error, sizeof curl_dl_error, "curl could not be initialised");
        return;
    }
    curl_dl_api = api;
    curl_dl_error[0] = '\0';
}

int curl_dl_load(const char **why)
{
    if (pthread_once(&curl_dl_once, curl_dl_init) != 0) {
        if (why)
            *why = "cannot load libcurl: pthread_once failed";
        return -1;
    }
    if (curl_dl_error[0]) {
        if (why)
            *why = curl_dl_error;
        return -1;
    }
    return 0;
}

size_t curl_dl_discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * nmemb;
}

int curl_dl_loaded(void)
{
    return curl_dl_api.easy_init != NULL;
}
