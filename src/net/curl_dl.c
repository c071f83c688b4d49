/* curl_dl.c - dlopen() of libcurl on first use (see curl_dl.h). */
#include "config.h"
#include "net/curl_dl.h"

#include "base/util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* configure finds the soname the development library links to; this is Debian's. */
#ifndef TT_CURL_SONAME
#define TT_CURL_SONAME "libcurl.so.4"
#endif
#define CURL_DL_HOW "install libcurl (the Debian package libcurl4)"

struct curl_dl curl_dl_api;

static pthread_once_t curl_dl_once = PTHREAD_ONCE_INIT;
static char curl_dl_error[512] = "not loaded"; /* empty once loaded */

static void curl_dl_init(void)
{
    void *lib = util_dlopen(TT_CURL_SONAME, "libcurl", CURL_DL_HOW, curl_dl_error,
                            sizeof curl_dl_error);
    if (!lib)
        return;
    struct curl_dl api;
    memset(&api, 0, sizeof api);
    const char *missing = NULL;
#define CURL_DL_LOAD(name)                                                                     \
    if (!missing && util_dlsym(lib, "curl_" #name, &api.name, sizeof api.name) != 0)           \
        missing = "curl_" #name;
    CURL_DL_FUNCS(CURL_DL_LOAD)
#undef CURL_DL_LOAD
    if (missing) {
        snprintf(curl_dl_error, sizeof curl_dl_error,
                 "cannot load libcurl (%s): it has no %s (7.68 or later is needed); %s",
                 TT_CURL_SONAME, missing, CURL_DL_HOW);
        dlclose(lib);
        return;
    }
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

int curl_dl_loaded(void)
{
    return curl_dl_api.easy_init != NULL;
}
