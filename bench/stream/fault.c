/* fault.c - what fresh memory costs on this machine: 2 MiB touched as 4 KiB pages, populated in
 * one call, and as one transparent huge page (MADV_HUGEPAGE). The numbers behind the huge-page
 * buffers of buf.c / xmalloc.c / sqlite_dl.c (docs/PERFORMANCE.md).
 *
 *     cc -O2 -o /tmp/fault bench/stream/fault.c && /tmp/fault
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
    const size_t n = (size_t)2 << 20;
    for (int round = 0; round < 3; round++) {
        double t0 = now();
        char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        memset(p, 1, n);
        double t1 = now();
        munmap(p, n);
        char *q = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                       -1, 0);
        if (q == MAP_FAILED)
            return 1;
        memset(q, 1, n);
        double t2 = now();
        munmap(q, n);
        char *r = mmap(NULL, 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED)
            return 1;
        char *a = (char *)(((uintptr_t)r + n - 1) & ~(uintptr_t)(n - 1));
        madvise(a, n, MADV_HUGEPAGE);
        memset(a, 1, n);
        double t3 = now();
        munmap(r, 2 * n);
        printf("2 MiB fresh: 4 KiB pages %.2f ms, populated %.2f ms, huge page %.2f ms\n",
               (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3);
    }
    return 0;
}
