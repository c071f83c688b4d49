/* alloccount.h - the allocations of the test process itself, counted: a test program that
 * includes this (once, in its one file) defines malloc, calloc and realloc to count each call
 * in n_alloc (glibc's __libc_* do the work), for the tests that bound how many allocations a
 * path makes (test_render_alloc, test_resume_alloc). Under AddressSanitizer the sanitizer
 * owns the allocator: nothing is defined (the ASan build leaves those tests out). */
#ifndef TT_TEST_ALLOCCOUNT_H
#define TT_TEST_ALLOCCOUNT_H
#include <stddef.h>

#include "memprobe.h"

static long n_alloc;

#if !UNDER_ASAN
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
    n_alloc++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t k)
{
    n_alloc++;
    return __libc_calloc(n, k);
}

void *realloc(void *p, size_t n)
{
    n_alloc++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}
#endif

#endif
