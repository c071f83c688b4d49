/* shootdown.c - what does a thread running beside another cost it, when the other changes
 * the process's page tables? No target: a fact about the machine (docs/PERFORMANCE.md,
 * session 40's section, "What a thread beside the loader costs it").
 *
 *   cc -O2 -pthread -o /tmp/shootdown bench/shootdown.c -ldl && /tmp/shootdown [rounds, 15]
 *
 * Taking write access away from a page that was written (mprotect RW -> R) must flush the
 * page from the TLB of every CPU that runs the process at that moment: the kernel interrupts
 * them and waits until they have. It times 500 such changes (each followed by the change
 * back) with nothing else running in the process, with a thread of the same process spinning
 * on the other CPU, and with another process spinning there (which needs no flush); then a
 * dlopen() of libcurl in a fresh process (exec'd: the loader's relocations write to pages it read
 * first: each such copy-on-write fault is one flush) alone and beside a spinning thread.
 * Each round runs them all, in turns; it prints the medians. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static volatile int stop;

static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long x = 1;
    while (!stop)
        x = x * 6364136223846793005UL + 1;
    return NULL;
}

/* us per RW -> R -> RW change of one written page */
static double protect_pairs(void)
{
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    enum { N = 500 };
    double a = now_us();
    for (int i = 0; i < N; i++) {
        p[0] = (char)i;
        mprotect(p, 4096, PROT_READ);
        mprotect(p, 4096, PROT_READ | PROT_WRITE);
    }
    double us = (now_us() - a) / N;
    munmap(p, 4096);
    return us;
}

enum { ALONE, THREAD, PROCESS };

/* protect_pairs() with nothing, a thread or a process spinning beside it */
static double protect_beside(int what)
{
    pthread_t t;
    pid_t pid = -1;
    stop = 0;
    if (what == THREAD && pthread_create(&t, NULL, spin, NULL) != 0)
        return -1;
    if (what == PROCESS && (pid = fork()) == 0) {
        spin(NULL);
        _exit(0);
    }
    usleep(2000); /* the spinner is running */
    double us = protect_pairs();
    stop = 1;
    if (what == THREAD)
        pthread_join(t, NULL);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return us;
}

/* The child of load_beside: a fresh process (exec'd, as a command starts), a thread spinning
 * beside it or not, the ms of the dlopen() written to fd 3. */
static int load_child(const char *soname, int thread)
{
    pthread_t t;
    if (thread)
        pthread_create(&t, NULL, spin, NULL);
    usleep(500); /* the spinner is running */
    double a = now_us();
    void *h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    double ms = h ? (now_us() - a) / 1e3 : -1;
    if (write(3, &ms, sizeof ms) != sizeof ms)
        return 1;
    _exit(0); /* the spinner goes with the process */
}

/* ms of a dlopen() of soname in a fresh process, with a thread spinning beside it or not */
static double load_beside(const char *soname, int thread)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(fd[1], 3) < 0)
            _exit(1);
        char *args[] = {"shootdown", "--load", (char *)soname, thread ? "1" : "0", NULL};
        execv("/proc/self/exe", args);
        _exit(1);
    }
    close(fd[1]);
    double ms = -1;
    if (read(fd[0], &ms, sizeof ms) != sizeof ms)
        ms = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return ms;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--load") == 0)
        return load_child(argv[2], atoi(argv[3]));
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    const char *soname = "libcurl-gnutls.so.4";
    if (rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: shootdown [rounds, 1-1000]\n");
        return 2;
    }
    double *v[5];
    for (int k = 0; k < 5; k++)
        v[k] = calloc((size_t)rounds, sizeof *v[k]);
    for (int r = 0; r < rounds; r++) {
        int first = r % 2; /* the order alternates by round */
        for (int i = 0; i < 3; i++) {
            int what = (i + first) % 3;
            v[what][r] = protect_beside(what);
        }
        for (int i = 0; i < 2; i++) {
            int thread = (i + first) % 2;
            v[3 + thread][r] = load_beside(soname, thread);
        }
    }
    printf("a written page made read-only and back (the first needs a TLB flush), medians of "
           "%d rounds of 500:\n", rounds);
    printf("  nothing else in the process      %6.1f us\n", median(v[ALONE], rounds));
    printf("  a thread of it spinning beside   %6.1f us\n", median(v[THREAD], rounds));
    printf("  another process spinning beside  %6.1f us\n", median(v[PROCESS], rounds));
    if (median(v[3], rounds) < 0) {
        printf("dlopen(%s): cannot load it\n", soname);
        return 0;
    }
    printf("dlopen(%s) in a fresh process, medians of %d:\n", soname, rounds);
    printf("  alone                            %6.2f ms\n", median(v[3], rounds));
    printf("  a thread of it spinning beside   %6.2f ms\n", median(v[4], rounds));
    return 0;
}
