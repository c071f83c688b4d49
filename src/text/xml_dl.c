/* xml_dl.c - dlopen() of libxml2 on first use (see xml_dl.h). */
#include "config.h"
#include "text/xml_dl.h"

#include "base/util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
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
    void *lib = util_dlopen(TT_XML2_SONAME, "libxml2", XML_DL_HOW, xml_dl_error,
                            sizeof xml_dl_error);
    if (!lib)
        return;
    struct xml_dl api;
    memset(&api, 0, sizeof api);
    const char *missing = NULL;
#define XML_DL_LOAD(name)                                                                      \
    if (!missing && util_dlsym(lib, #name, &api.dl_##name, sizeof api.dl_##name) != 0)                   \
        missing = #name;
    XML_DL_FUNCS(XML_DL_LOAD)
#undef XML_DL_LOAD
    if (missing) {
        snprintf(xml_dl_error, sizeof xml_dl_error, "cannot load libxml2 (%s): it has no %s; %s",
                 TT_XML2_SONAME, missing, XML_DL_HOW);
        dlclose(lib);
        return;
    }
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
