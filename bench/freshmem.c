/* freshmem.c - what fresh memory costs on this machine, and how soon freed memory turns slow.
 *
 *   cc -O2 -o /tmp/freshmem bench/freshmem.c && /tmp/freshmem [PAGES] [PAUSE_S ...]
 *
 * For each pause (default 0 1 3 6 s): maps PAGES (default 16) 2 MiB pages advised for
 * transparent huge pages and writes one byte of each (one fault each, the kernel zeroes the
 * page), unmaps them, waits the pause, then maps and touches PAGES fresh 2 MiB pages again and
 * prints the median milliseconds per page of that second round; then frees those, waits the
 * pause again and prints what 512 fresh 4 KiB pages cost (one 2 MiB region advised
 * MADV_NOHUGEPAGE, one byte per page). Which of the two is cheaper differs between the VMs
 * tokterm was measured on: 4 KiB pages took 11-16 us each on one and 2-3 us on another, where
 * a huge page after a pause of 3 s took 5-9 ms (docs/PERFORMANCE.md). On a machine where
 * the memory a process frees is soon given back to a host, the rounds after a long pause are
 * slower (docs/PERFORMANCE.md, "Fresh memory on this VM"). Not a benchmark with a target: the
 * floor under the rows that touch fresh memory (the chat's copies of a fast answer, the
 * saving run's buffers). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define HUGE ((size_t)2 << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pause_for(double pause)
{
    struct timespec ts = {(time_t)pause, (long)((pause - (double)(time_t)pause) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* usleep may refuse 1 s or more */
        ;
}

/* Milliseconds to touch 512 fresh 4 KiB pages (2 MiB without huge pages). */
static double touch_small(void)
{
    char *q = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    (void)madvise(q, HUGE, MADV_NOHUGEPAGE);
    double t = now();
    for (size_t i = 0; i < HUGE; i += 4096)
        q[i] = 1;
    t = now() - t;
    munmap(q, HUGE);
    return t * 1e3;
}

/* Touch n fresh huge pages; each page's milliseconds into ms[]. The map is returned to unmap. */
static char *touch(int n, double *ms, size_t *len)
{
    *len = (size_t)(n + 1) * HUGE;
    char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *a = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    (void)madvise(a, (size_t)n * HUGE, MADV_HUGEPAGE);
    for (int i = 0; i < n; i++) {
        double t = now();
        a[(size_t)i * HUGE] = 1;
        ms[i] = (now() - t) * 1e3;
    }
    return p;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
    if (n < 1 || n > 4096) {
        fprintf(stderr, "usage: freshmem [PAGES 1-4096] [PAUSE_S ...]\n");
        return 2;
    }
    double dflt[] = {0, 1, 3, 6};
    int np = argc > 2 ? argc - 2 : 4;
    double *ms = calloc((size_t)n, sizeof *ms);
    if (!ms)
        return 1;
    printf("2 MiB pages, %d per round: median (min-max) ms per page after a pause; then 512 "
           "fresh 4 KiB pages after the same pause\n", n);
    for (int k = 0; k < np; k++) {
        double pause = argc > 2 ? atof(argv[k + 2]) : dflt[k];
        size_t len;
        char *p = touch(n, ms, &len); /* these become the freed memory the pause ages */
        munmap(p, len);
        pause_for(pause);
        p = touch(n, ms, &len);
        munmap(p, len);
        qsort(ms, (size_t)n, sizeof *ms, cmp);
        pause_for(pause);
        double small = touch_small();
        printf("  pause %4.1f s: %.3f (%.3f-%.3f); 4 KiB pages: 512 in %.3f ms (%.1f us each)\n",
               pause, ms[n / 2], ms[0], ms[n - 1], small, small * 1e3 / 512);
    }
    free(ms);
    return 0;
}
