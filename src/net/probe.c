/* probe.c - one-off requests outside the network thread, and libcurl's identity (probe.h). */
#include "config.h"
#include "net/probe.h"

#include "net/curl_dl.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>

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
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, NULL);
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(e, CURLOPT_WRITEDATA, devnull);
    long status = 0;
    int ok = curl_easy_perform(e) == CURLE_OK &&
             curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
    if (devnull)
        fclose(devnull);
    curl_easy_cleanup(e);
    return ok;
}

void net_library_cleanup(void)
{
    if (curl_dl_loaded())
        curl_global_cleanup();
}
