/* xmalloc.c - allocation wrappers: out of memory is fatal, never a silent NULL. */
#include "config.h"
#include "base/xmalloc.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void xmalloc_die(size_t n)
{
    char msg[96];
    int len = snprintf(msg, sizeof msg, "tokterm: out of memory (%zu bytes)\n", n);
    if (len > 0)
        (void)!write(2, msg, (size_t)len);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        xmalloc_die(n);
    return p;
}

#ifdef __GLIBC__
static atomic_int xmalloc_threshold_set; /* mallopt(M_MMAP_THRESHOLD) was called */
static atomic_size_t xmalloc_map_min = XMALLOC_HUGE_MIN; /* the threshold set last */
#endif

/* The size to ask glibc for a huge block of len bytes. glibc serves even a large block from
 * the heap's top chunk when that has the room (after xmalloc_heap_fast it grows 8 MiB at a
 * time); the mmap threshold counts only when the heap must grow. Carved there, the header
 * glibc writes after the block lands on the heap's next 2 MiB, which (advised) is faulted in
 * whole as a fresh huge page: ~0.1 ms, or 3.6 ms on memory the host has taken back
 * (docs/PERFORMANCE.md), in the chat's first frame of a fast answer (the view's line block).
 * Asked for more than the top holds, the block is a map of its own, as XMALLOC_HUGE_MIN's
 * threshold means: only its own pages are touched, and free() returns it whole. The more is
 * address space only (never written); len when the top is smaller, below the threshold set
 * (xmalloc_working_set's 32 MiB: a scripted resume's blocks are carved from its padded heap
 * and reused there on purpose), or without glibc.
 * (Tried in 2026-12 and dropped while the long line's rows, 16 bytes each, filled that heap
 * page anyway; since they are sparse, text/longrows.c, it is one huge page and 2 MB of RSS
 * less per fast answer.) */
static size_t huge_ask(size_t len)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && __GLIBC_PREREQ(2, 33)
    if (len < atomic_load(&xmalloc_map_min))
        return len;
    size_t top = mallinfo2().keepcost; /* below len, the block with its slack cannot fit */
    if (top >= len && top < SIZE_MAX - XMALLOC_HUGE_PAGE)
        return (top + XMALLOC_HUGE_PAGE) & ~(XMALLOC_HUGE_PAGE - 1); /* more than top */
#endif
    return len;
}

static void *huge_alloc_advised(size_t n, int advise);

void *huge_alloc(size_t n)
{
    return huge_alloc_advised(n, 1);
}

void *huge_alloc_for(size_t n, enum xmalloc_use use)
{
    return huge_alloc_advised(n, use == XMALLOC_WHOLE || xmalloc_huge_pays());
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double xmalloc_probe_small_faults(void)
{
    enum { PAGES = 9 };
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return -1;
    char *p = mmap(NULL, (size_t)page * PAGES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    (void)madvise(p, (size_t)page * PAGES, MADV_NOHUGEPAGE); /* the small pages' cost */
    double ns[PAGES];
    for (int i = 0; i < PAGES; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        ((volatile char *)p)[(size_t)i * (size_t)page] = 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns[i] = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    }
    munmap(p, (size_t)page * PAGES);
    qsort(ns, PAGES, sizeof *ns, cmp_double);
    return ns[PAGES / 2]; /* the first also allocates the page table: not the median */
}

int xmalloc_huge_pays_at(double ns)
{
    return ns < 0 || ns > XMALLOC_SMALL_FAULT_NS; /* no measure: as before, huge pages */
}

static atomic_int xmalloc_pays; /* 0: not decided (huge pages), 1: they pay, -1: they do not */

int xmalloc_thp_env(void)
{
    const char *e = getenv("TOKTERM_THP");
    return !e ? 0 : strcmp(e, "always") == 0 ? 1 : strcmp(e, "never") == 0 ? -1 : 0;
}

void xmalloc_huge_decide(void)
{
    int v = xmalloc_thp_env();
    if (!v)
        v = xmalloc_huge_pays_at(xmalloc_probe_small_faults()) ? 1 : -1;
    atomic_store(&xmalloc_pays, v);
}

int xmalloc_huge_pays(void)
{
    int v = atomic_load(&xmalloc_pays);
    if (!v && (v = xmalloc_thp_env()) != 0)
        atomic_store(&xmalloc_pays, v);
    return v >= 0;
}

static void *huge_alloc_advised(size_t n, int advise)
{
#ifdef __GLIBC__
    /* Freeing a mapped block raises glibc's mmap threshold to its size (up to 32 MiB): the next
     * large blocks (the buffers and records of a long answer) would come from the heap and
     * stay resident after they are freed, and a 32 MiB answer's peak grew by a copy. A fixed
     * threshold keeps blocks of 1 MiB or more mapped, returned whole when freed. */
    if (!atomic_exchange(&xmalloc_threshold_set, 1))
        mallopt(M_MMAP_THRESHOLD, (int)XMALLOC_HUGE_MIN);
#endif
    size_t len = (n + XMALLOC_HUGE_PAGE - 1) & ~(XMALLOC_HUGE_PAGE - 1);
    if (len < n)
        return NULL;
    if (!len)
        len = XMALLOC_HUGE_PAGE;
    void *p = NULL;
    size_t ask = huge_ask(len); /* refused (RLIMIT_AS): len will do */
    if (!(ask > len && posix_memalign(&p, XMALLOC_HUGE_PAGE, ask) == 0) &&
        posix_memalign(&p, XMALLOC_HUGE_PAGE, len) != 0)
        return NULL;
    if (advise)
        (void)madvise(p, len, MADV_HUGEPAGE); /* only advice: without THP, plain pages */
    return p;
}

int huge_is_huge(void *p)
{
    volatile char *c = p;
    c[0] = 0;
    size_t small = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec[1] = {0};
    char *last = (char *)p + XMALLOC_HUGE_PAGE - small;
    return small > 0 && mincore(last, small, vec) == 0 && (vec[0] & 1);
}

void *xmalloc_huge(size_t n)
{
    void *p = huge_alloc(n);
    if (!p)
        xmalloc_die(n);
    return p;
}

/* xmalloc_working_set and xmalloc_heap_fast: blocks from mmap_min bytes on are maps of
 * their own; the heap grows XMALLOC_WORK_PAD at a time, advised for huge pages. Once. */
static void xmalloc_heap_pad(int mmap_min, int trim, int advise)
{
#ifdef __GLIBC__
    static int done;
    if (done)
        return;
    done = 1;
    atomic_store(&xmalloc_threshold_set, 1);
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* the pad block below comes from the heap */
    mallopt(M_TRIM_THRESHOLD, trim);
    mallopt(M_TOP_PAD, (int)XMALLOC_WORK_PAD);
    /* one block grows the heap by its size and the pad; advised whole (the huge pages inside
     * it), then freed: the next blocks are carved from it */
    char *p = malloc(XMALLOC_WORK_PAD);
    mallopt(M_MMAP_THRESHOLD, mmap_min);
    atomic_store(&xmalloc_map_min, (size_t)mmap_min);
    if (!p)
        return;
    uintptr_t lo = ((uintptr_t)p + XMALLOC_HUGE_PAGE - 1) & ~(uintptr_t)(XMALLOC_HUGE_PAGE - 1);
    uintptr_t hi = (uintptr_t)sbrk(0) & ~(uintptr_t)(XMALLOC_HUGE_PAGE - 1);
    if (advise && (void *)hi != (void *)-1 && hi > lo && hi - lo <= 4 * XMALLOC_WORK_PAD)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* only advice */
    free(p);
#endif
}

void xmalloc_working_set(void)
{
    xmalloc_heap_pad(32 << 20, 64 << 20, 1);
}

void xmalloc_heap_fast(void)
{
    xmalloc_heap_pad((int)XMALLOC_HUGE_MIN, (int)(4 * XMALLOC_WORK_PAD), xmalloc_huge_pays());
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && __GLIBC_PREREQ(2, 33)
static void *xmalloc_spacer; /* kept: its pages, never touched, stay out of memory */
#endif

void xmalloc_heap_huge(void)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && __GLIBC_PREREQ(2, 33)
    if (atomic_load(&xmalloc_threshold_set))
        return; /* once (set below), and not over xmalloc_working_set's or huge_alloc's */
    /* The spacer comes from the heap, and the heap grows past the huge page; what is freed
     * at the top stays (a trim would split the huge page). */
    mallopt(M_TRIM_THRESHOLD, (int)(2 * XMALLOC_HUGE_PAGE));
    mallopt(M_MMAP_THRESHOLD, (int)(2 * XMALLOC_HUGE_PAGE));
    mallopt(M_TOP_PAD, (int)(2 * XMALLOC_HUGE_PAGE));
    uintptr_t end = (uintptr_t)sbrk(0);
    struct mallinfo2 mi = mallinfo2(); /* keepcost: the top chunk, where new blocks come from */
    uintptr_t top = end - mi.keepcost;
    uintptr_t huge = (top + 8192 + XMALLOC_HUGE_PAGE - 1) & ~(uintptr_t)(XMALLOC_HUGE_PAGE - 1);
    /* A block from the top chunk (its header 16 bytes before it) that ends 16 bytes before
     * the huge page: the new top chunk's header goes there, so the huge page's first touch
     * is a block's, after the advice (a page touched before it stays a small one). */
    void *spacer = malloc(huge - 16 - top - 8);
    if (spacer && (uintptr_t)spacer == top + 16 &&
        (uintptr_t)sbrk(0) >= huge + XMALLOC_HUGE_PAGE &&
        madvise((void *)huge, XMALLOC_HUGE_PAGE, MADV_HUGEPAGE) == 0)
        xmalloc_spacer = spacer;
    else
        free(spacer); /* another allocator (valgrind's), or no THP: the heap as it was */
    atomic_store(&xmalloc_threshold_set, 1);
    mallopt(M_MMAP_THRESHOLD, (int)XMALLOC_HUGE_MIN); /* huge_alloc's */
    mallopt(M_TOP_PAD, 128 << 10);                    /* glibc's default */
#endif
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p)
        xmalloc_die(nmemb * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        xmalloc_die(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        xmalloc_die(0);
    char *p = xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void *xgrow(void *p, size_t need, size_t *cap, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            n = need;
        else
            n *= 2;
    }
    p = xreallocarray(p, n, elem);
    *cap = n;
    return p;
}

void *xreallocarray(void *p, size_t n, size_t elem)
{
    if (elem && n > SIZE_MAX / elem)
        xmalloc_die(SIZE_MAX);
    return xrealloc(p, n * elem);
}
