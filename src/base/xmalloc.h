/* xmalloc.h - allocation that never returns NULL (allocation failure is fatal). */
#ifndef TT_XMALLOC_H
#define TT_XMALLOC_H
#include <stddef.h>

/* "tokterm: out of memory (n bytes)" on stderr, then abort(). */
void xmalloc_die(size_t n) __attribute__((noreturn));
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Large transient buffers: n bytes (rounded up to XMALLOC_HUGE_PAGE) aligned on a huge page and
 * advised for transparent huge pages; free() and realloc() take it like any malloc'd block.
 * Worth it from XMALLOC_HUGE_MIN bytes for a block written whole: a fresh 4 KiB page costs
 * 2-16 us to fault in on the virtual machines tokterm is measured on, a fresh 2 MiB huge page
 * 0.07-0.3 ms, or 4-9 ms when the host has taken the memory back (docs/PERFORMANCE.md). A
 * block written gradually: huge_alloc_for.
 * huge_alloc returns NULL when out of memory; xmalloc_huge does not return then. */
#define XMALLOC_HUGE_PAGE ((size_t)2 << 20)
#define XMALLOC_HUGE_MIN ((size_t)1 << 20)
/* A block written whole once it is made (SQLite's record of a long answer) or one already known
 * to hold a fast answer (a stream's buffer): in a huge page from this size on. 256 KiB in 4 KiB
 * pages is 64 faults (~0.7 ms); a 1 MB answer's record 245 (~2.8 ms), a huge page ~0.15 ms. */
#define XMALLOC_HUGE_WRITE ((size_t)256 << 10)
void *huge_alloc(size_t n);
/* How a huge block will be written: whole soon after it is made (SQLite's record, the store's
 * buffer, a resume's heap), or gradually, as a stream arrives, and maybe never past its first
 * part (the chat's copies of an answer, room taken for the whole answer). */
enum xmalloc_use { XMALLOC_WHOLE, XMALLOC_GRADUAL };
/* huge_alloc for a block written as use says: XMALLOC_WHOLE is huge_alloc; XMALLOC_GRADUAL is
 * advised for huge pages only where they pay (xmalloc_huge_pays), else left to 4 KiB pages,
 * faulted in as they are written. */
void *huge_alloc_for(size_t n, enum xmalloc_use use);
/* 1 when memory written gradually goes in huge pages: unless xmalloc_huge_decide was called
 * or $TOKTERM_THP says "always" or "never", it does (a one-shot's stream fills its blocks at
 * full speed right after the process started, like a block written whole). A fresh 2 MiB huge
 * page costs 0.1-0.3 ms, or 4-9 ms when the host has taken the memory back (after a few
 * seconds idle); a fresh 4 KiB page 11-16 us on one VM tokterm was measured on and 2-3 us on
 * another. XMALLOC_SMALL_FAULT_NS lies between the two: a megabyte written in small pages
 * costs 0.5-0.8 ms at 2-3 us a page, less than a huge page that is often slow (small pages
 * then), and 2.8-4.1 ms at 11-16 us, more than one that is fast as often as not (huge pages
 * then). */
#define XMALLOC_SMALL_FAULT_NS 6000.0
int xmalloc_huge_pays(void);
/* For a process whose blocks fill long after it started, maybe after minutes idle (the chat):
 * decide now, from $TOKTERM_THP or by measuring (xmalloc_probe_small_faults: 9 fresh pages,
 * ~20-150 us). */
void xmalloc_huge_decide(void);
/* $TOKTERM_THP's word: 1 ("always"), -1 ("never"), 0 (unset or neither). */
int xmalloc_thp_env(void);
/* The decision for a median fresh 4 KiB page of ns nanoseconds (no probe, no environment). */
int xmalloc_huge_pays_at(double ns);
/* The median nanoseconds of a fresh 4 KiB page's first write here (9 pages), or -1. */
double xmalloc_probe_small_faults(void);
/* 1 when the first huge page of p (from huge_alloc) is backed by one huge page: p[0] is written
 * and the page's last 4 KiB is then resident too. 0 otherwise (no THP, none free). */
int huge_is_huge(void *p);
void *xmalloc_huge(size_t n);
/* A large working set of many small blocks and growing arrays to come (a scripted resume: the
 * rows, turns, plan and body of thousands of messages): from now on the process's blocks up to
 * 32 MiB come from the heap (not a map each, faulted in afresh), what is freed stays there for
 * the next ones, and the heap grows XMALLOC_WORK_PAD bytes at a time, advised for transparent
 * huge pages. Without glibc or THP, what it can of that. For a process that exits after its
 * work (its memory stays with it, at most XMALLOC_WORK_PAD more). */
#define XMALLOC_WORK_PAD ((size_t)8 << 20)
void xmalloc_working_set(void);
/* The same heap for a process that goes on (the chat, once a fast answer comes: its copies of
 * the text are many blocks and growing arrays in fresh pages), but blocks of XMALLOC_HUGE_MIN
 * or more stay maps of their own, returned whole when freed, so the peak of a long answer is
 * not kept after it (with xmalloc_working_set's 32 MiB, a 15 MiB line's chat peaked 7 MiB
 * higher). Its heap grows gradually: advised for huge pages only where they pay
 * (xmalloc_huge_pays). Once, and not after xmalloc_working_set. Another thread may allocate
 * meanwhile (mallopt locks the main arena; the others read the thresholds as they are). */
void xmalloc_heap_fast(void);
/* Many small blocks to come that live until the exit (SQLite's parsed schema and statements,
 * the page cache, libcurl's and OpenSSL's set-up: ~100-200 fresh 4 KiB pages in a one-shot,
 * ~10 us each to fault in on the virtual machines tokterm is measured on): the heap's next
 * blocks go in one 2 MiB transparent huge page (~0.15 ms), at most 2 MiB more resident. The
 * heap's blocks before this call stay where they are; the pages between them and the huge
 * page are left untouched (never resident). Call while one thread runs. Once; a no-op without
 * glibc, with THP off, under another allocator (valgrind's, ASan's) or after
 * xmalloc_working_set. */
void xmalloc_heap_huge(void);
/* realloc p to n elements of elem bytes; an n * elem that overflows size_t is fatal. For an
 * array that shares the capacity XGROW chose for another. */
void *xreallocarray(void *p, size_t n, size_t elem);
/* Growable arrays: make room for at least need elements of *p, whose capacity is *cap
 * (doubling, at least 16; a size that would overflow size_t is fatal). Use XGROW. */
void *xgrow(void *p, size_t need, size_t *cap, size_t elem);
/* XGROW(array, elements needed, its size_t capacity), git's ALLOC_GROW: a statement that
 * calls xgrow only when the array is full (need is evaluated twice: no side effects). */
#define XGROW(p, need, cap)                                                                   \
    do {                                                                                      \
        if ((size_t)(need) > (cap))                                                           \
            (p) = xgrow((p), (need), &(cap), sizeof *(p));                                    \
    } while (0)
/* printf into a new string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
