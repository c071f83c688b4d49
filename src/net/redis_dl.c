/* redis_dl.c - dlopen() of hiredis on first use (see redis_dl.h). */
#include "config.h"
#include "net/redis_dl.h"

#include "base/util.h"

#include <pthread.h>
#include <string.h>

/* configure finds the soname the development library links to; this is Debian's. */
#ifndef TT_HIREDIS_SONAME
#define TT_HIREDIS_SONAME "libhiredis.so.0.14"
#endif
#define REDIS_DL_HOW "install hiredis (the Debian package libhiredis0.14 or later)"

struct redis_dl redis_dl_api;

static pthread_once_t redis_dl_once = PTHREAD_ONCE_INIT;
static char redis_dl_error[512] = "not loaded"; /* empty once loaded */

static void redis_dl_init(void)
{
    struct redis_dl api;
    memset(&api, 0, sizeof api);
    /* # and ## take the names as written, not as redis_dl.h's macros */
    const struct util_dlfn fns[] = {
#define REDIS_DL_FN(name) {#name, &api.dl_##name, sizeof api.dl_##name},
        REDIS_DL_FUNCS(REDIS_DL_FN)
#undef REDIS_DL_FN
    };
    if (!util_dlopen(TT_HIREDIS_SONAME, "hiredis", REDIS_DL_HOW, fns, TT_ARRAY_LEN(fns), NULL,
                     redis_dl_error, sizeof redis_dl_error))
        return;
    redis_dl_api = api;
    redis_dl_error[0] = '\0';
}

int redis_dl_load(const char **why)
{
    if (pthread_once(&redis_dl_once, redis_dl_init) != 0 || redis_dl_error[0]) {
        *why = redis_dl_error[0] ? redis_dl_error : "cannot load hiredis: pthread_once failed";
        return -1;
    }
    return 0;
}
