/* xml_dl.c - dlopen() of libxml2 on first use (see xml_dl.h). */
#include "config.h"
#include "text/xml_dl.h"

#include "base/util.h"

#include <pthread.h>
#include <string.h>

/* configure finds the soname the development library links to; this is Debian's. */
#ifndef TT_XML2_SONAME
#define TT_XML2_SONAME "libxml2.so.2"
#endif
#define XML_DL_HOW "install libxml2 (the Debian package libxml2)"

struct xml_dl xml_dl_api;

static pthread_once_t xml_dl_once = PTHREAD_ONCE_INIT;
static char xml_dl_error[512] = "not loaded"; /* empty once loaded */

static void xml_dl_init(void)
{
    struct xml_dl api;
    memset(&api, 0, sizeof api);
    const struct util_dlfn fns[] = {
#define XML_DL_FN(name) {#name, &api.dl_##name, sizeof api.dl_##name},
        XML_DL_FUNCS(XML_DL_FN)
#undef XML_DL_FN
    };
    if (!util_dlopen(TT_XML2_SONAME, "libxml2", XML_DL_HOW, fns, TT_ARRAY_LEN(fns), NULL,
                     xml_dl_error, sizeof xml_dl_error))
        return;
    xml_dl_api = api;
    xml_dl_error[0] = '\0';
}

int xml_dl_load(const char **why)
{
    if (pthread_once(&xml_dl_once, xml_dl_init) != 0 || xml_dl_error[0]) {
        if (why)
            *why = xml_dl_error[0] ? xml_dl_error : "cannot load libxml2: pthread_once failed";
        return -1;
    }
    return 0;
}
