/* test_probe.c - net_library_settle (net/probe.c): it waits for libcurl's load only while the
 * preload thread is loading it, and never loads it itself. */
#include "config.h"
#include "net/curl_dl.h"
#include "net/probe.h"
#include "tap.h"

int main(void)
{
    /* no preload: nothing to wait for, and nothing loaded (a settle that loaded libcurl on its
     * own thread would take the load off the network thread) */
    net_library_settle();
    TAP_INT(curl_dl_loaded(), 0, "without a preload, settle loads nothing");
    /* a preload under way (the load takes milliseconds): settle returns once it is done */
    net_library_preload();
    net_library_settle();
    TAP_INT(curl_dl_loaded(), 1, "with a preload, settle returns once libcurl is loaded");
    const char *why = NULL;
    TAP_OK(curl_dl_load(&why) == 0, "and it loaded (%s)", why ? why : "no error");
    net_library_settle(); /* loaded: returns at once */
    TAP_INT(curl_dl_loaded(), 1, "a second settle changes nothing");
    net_library_cleanup(); /* the preload thread, never adopted, ends */
    return tap_done();
}
