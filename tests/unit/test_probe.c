/* test_probe.c - net_library_settle (net/probe.c): it waits for libcurl's load only while the
 * preload thread is loading it, never loads it itself, and gives up after its bound when the
 * load hangs (a library that cannot be read: a FIFO nobody writes, as test_startup.py does).
 * And the preload's placement: its thread starts on a CPU other than its starter's, then may
 * run on every CPU the process may use. */
#include "config.h"
#include "base/util.h"
#include "net/curl_dl.h"
#include "net/probe.h"
#include "tap.h"

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* In a child (the load is once per process): libcurl named as a FIFO that nobody opens for
 * writing, so that the preload thread's dlopen() blocks. Writes the seconds a settle of 50 ms
 * took and whether libcurl counted as loaded to fd. */
static void hung_child(int fd, const char *fifo)
{
    setenv("TOKTERM_LIBCURL", fifo, 1);
    net_library_preload();
    double t0 = util_now();
    net_library_settle(50);
    double took[2] = {util_now() - t0, (double)curl_dl_loaded()};
    if (write(fd, took, sizeof took) != sizeof took)
        _exit(1);
    _exit(0); /* the loading thread, still blocked, goes with the process */
}

/* The CPUs thread tid may run on, as /proc tells them ("0-1"), into out. 0, or -1. */
static int task_cpus(const char *tid, char *out, size_t n)
{
    char path[320], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    int rc = -1;
    while (f && rc < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            const char *v = line + 18 + strspn(line + 18, " \t");
            size_t k = strcspn(v, "\n");
            k = k < n ? k : n - 1;
            memcpy(out, v, k);
            out[k] = '\0';
            rc = 0;
        }
    if (f)
        fclose(f);
    return rc;
}

/* How many threads of this process may run on other CPUs than the first one's; -1 when /proc
 * cannot tell. */
static int threads_placed_apart(int *threads)
{
    DIR *d = opendir("/proc/self/task");
    char first[128] = "", cpus[128];
    int apart = 0;
    struct dirent *e;
    *threads = 0;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            if (task_cpus(e->d_name, cpus, sizeof cpus) != 0) {
                apart = -1;
                break;
            }
            if (!(*threads)++)
                snprintf(first, sizeof first, "%s", cpus);
            else if (strcmp(first, cpus) != 0)
                apart++;
        }
    if (d)
        closedir(d);
    return d ? apart : -1;
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
    /* where it started, and that it was let go (the thread waits to be adopted: still there) */
    cpu_set_t mine;
    int starter, loader, threads = 0;
    net_library_placement(&starter, &loader);
    int cpus = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 0;
    if (cpus >= 2)
        TAP_OK(starter >= 0 && loader >= 0 && loader != starter,
               "%d CPUs: the loader started on CPU %d, its starter was on %d", cpus, loader,
               starter);
    else
        TAP_OK(starter == -1 && loader == -1, "%d CPU: the loader is not placed", cpus);
    int apart = threads_placed_apart(&threads);
    TAP_OK(threads == 2 && apart == 0,
           "then it may run on every CPU of the process (%d threads, %d kept apart)", threads,
           apart);
    const char *why = NULL;
    TAP_OK(curl_dl_load(&why) == 0, "and it loaded (%s)", why ? why : "no error");
    double t0 = util_now();
    net_library_settle(10000); /* loaded: returns at once */
    TAP_OK(curl_dl_loaded() && util_now() - t0 < 1, "a second settle returns at once");
    net_library_cleanup(); /* the preload thread, never adopted, ends */
    return tap_done();
}
