/* test_probe.c - net_library_settle (net/probe.c): it waits for libcurl's load only while the
 * preload thread is loading it, never loads it itself, and gives up after its bound when the
 * load hangs (a library that cannot be read: a FIFO nobody writes, as test_startup.py does). */
#include "config.h"
#include "net/curl_dl.h"
#include "net/probe.h"
#include "tap.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* In a child (the load is once per process): libcurl named as a FIFO that nobody opens for
 * writing, so that the preload thread's dlopen() blocks. Writes the seconds a settle of 50 ms
 * took and whether libcurl counted as loaded to fd. */
static void hung_child(int fd, const char *fifo)
{
    setenv("TOKTERM_LIBCURL", fifo, 1);
    net_library_preload();
    double t0 = now();
    net_library_settle(50);
    double took[2] = {now() - t0, (double)curl_dl_loaded()};
    if (write(fd, took, sizeof took) != sizeof took)
        _exit(1);
    _exit(0); /* the loading thread, still blocked, goes with the process */
}

int main(void)
{
    char dir[] = "/tmp/tt-probe-XXXXXX";
    char fifo[64];
    int pfd[2];
    if (!mkdtemp(dir) || pipe(pfd) != 0)
        return 1;
    snprintf(fifo, sizeof fifo, "%s/libcurl.so", dir);
    if (mkfifo(fifo, 0600) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0)
        hung_child(pfd[1], fifo);
    close(pfd[1]);
    double took[2] = {-1, -1};
    struct pollfd pf = {pfd[0], POLLIN, 0};
    ssize_t got = poll(&pf, 1, 10000) == 1 ? read(pfd[0], took, sizeof took) : -1;
    close(pfd[0]);
    kill(pid, SIGKILL); /* one that waits for the load for good would never end */
    waitpid(pid, NULL, 0);
    unlink(fifo);
    rmdir(dir);
    TAP_OK(got == (ssize_t)sizeof took && took[0] >= 0.045 && took[0] < 5,
           "a load that hangs: settle(50) gives up after its bound (%.3f s)", took[0]);
    TAP_OK(took[1] == 0, "and libcurl is not loaded then");

    /* no preload: nothing to wait for, and nothing loaded (a settle that loaded libcurl on its
     * own thread would take the load off the network thread) */
    net_library_settle(10000);
    TAP_INT(curl_dl_loaded(), 0, "without a preload, settle loads nothing");
    /* a preload under way (the load takes milliseconds): settle returns once it is done */
    net_library_preload();
    net_library_settle(10000);
    TAP_INT(curl_dl_loaded(), 1, "with a preload, settle returns once libcurl is loaded");
    const char *why = NULL;
    TAP_OK(curl_dl_load(&why) == 0, "and it loaded (%s)", why ? why : "no error");
    double t0 = now();
    net_library_settle(10000); /* loaded: returns at once */
    TAP_OK(curl_dl_loaded() && now() - t0 < 1, "a second settle returns at once");
    net_library_cleanup(); /* the preload thread, never adopted, ends */
    return tap_done();
}
