/* sqlite_dl.c - SQLite's table of functions, filled on first use (see sqlite_dl.h): from the
 * SQLite linked in, or (configure --with-sqlite=shared) from a dlopen() of the library. */
#include "config.h"
/* This file names the functions themselves (their addresses go into the table). */
#define SQLITE_DL_NO_REDIRECT
#include "store/sqlite_dl.h"
#include "store/wal_vfs.h"

#include "base/util.h"
#include "base/xmalloc.h"

#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* configure finds the soname the development library links to; this is Debian's. */
#ifndef TT_SQLITE_SONAME
#define TT_SQLITE_SONAME "libsqlite3.so.0"
#endif
#define SQLITE_DL_HOW "install SQLite 3 (the Debian package libsqlite3-0)"

struct sqlite_dl sqlite_dl_api;

static pthread_once_t sqlite_dl_once = PTHREAD_ONCE_INIT;
static char sqlite_dl_error[512]; /* empty once loaded */

/* The lend (sqlite_dl_lend): room in the block that holds a long answer's text, for the
 * record SQLite makes of that text. Under its lock, and lent_at (what SQLite was given, NULL
 * when nothing is out) read without it by every free, so that the others take no lock. */
static pthread_mutex_t sqlite_dl_lend_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(char *) sqlite_dl_lent_at;
static struct {
    char *base;       /* the text's block: freed here if SQLite keeps the record past the lend */
    const char *text; /* the text, in the block */
    size_t len;       /* its bytes */
    size_t cap;       /* the block's bytes from base */
    int ends_record;  /* the text is the record's last value: the record may end where it does */
    size_t size;      /* bytes given from lent_at on */
    pthread_t thread; /* only this thread's allocations take it */
    int open;         /* between sqlite_dl_lend and sqlite_dl_lend_end */
    int out;          /* SQLite holds it */
    int orphan;       /* SQLite held it at sqlite_dl_lend_end: base goes when it is freed */
    unsigned long hits, placed;
} sqlite_dl_lent;

/* The smallest record of a row that holds a text of len bytes is longer than len + this (its
 * header has a byte per column): a block of len to len + 2 bytes is a copy of the text. */
#define SQLITE_DL_RECORD_MIN 16

/* Where the lend puts a block of z bytes, or NULL when it does not take it. Under the lock. */
static char *sqlite_dl_lend_at(size_t z)
{
    const char *text = sqlite_dl_lent.text, *end = text + sqlite_dl_lent.len;
    if (sqlite_dl_lent.ends_record && z >= sqlite_dl_lent.len + SQLITE_DL_RECORD_MIN &&
        z <= (size_t)(end - sqlite_dl_lent.base)) {
        /* the record's last value is the text: SQLite copies it onto itself */
        sqlite_dl_lent.placed++;
        return (char *)end - z;
    }
    size_t at = ((size_t)(end - sqlite_dl_lent.base) + 1 + 63) & ~(size_t)63;
    if (at < sqlite_dl_lent.cap && z <= sqlite_dl_lent.cap - at)
        return sqlite_dl_lent.base + at; /* past the text and its NUL */
    return NULL;
}

/* The lent block's size when p is it, else 0. */
static size_t sqlite_dl_lent_size(const void *p)
{
    if (!p || p != atomic_load(&sqlite_dl_lent_at))
        return 0;
    pthread_mutex_lock(&sqlite_dl_lend_lock);
    size_t z = p == atomic_load(&sqlite_dl_lent_at) ? sqlite_dl_lent.size : 0;
    pthread_mutex_unlock(&sqlite_dl_lend_lock);
    return z;
}

/* SQLite's allocator: malloc, except that a block of XMALLOC_HUGE_WRITE bytes or more (the
 * record of a long answer, written whole) goes in huge pages: the lent end of the text's
 * block when it fits there, else huge_alloc (still a malloc'd block, so free, realloc and
 * malloc_usable_size apply). */
static void *sqlite_dl_malloc(int n)
{
    size_t z = n > 0 ? (size_t)n : 1;
    if (z < XMALLOC_HUGE_WRITE)
        return malloc(z);
    char *p = NULL;
    pthread_mutex_lock(&sqlite_dl_lend_lock);
    if (sqlite_dl_lent.open && !sqlite_dl_lent.out &&
        pthread_equal(sqlite_dl_lent.thread, pthread_self()) && (p = sqlite_dl_lend_at(z))) {
        sqlite_dl_lent.out = 1;
        sqlite_dl_lent.hits++;
        sqlite_dl_lent.size = z;
        atomic_store(&sqlite_dl_lent_at, p);
    }
    pthread_mutex_unlock(&sqlite_dl_lend_lock);
    return p ? p : huge_alloc(z);
}

static void sqlite_dl_free(void *p)
{
    if (p && p == atomic_load(&sqlite_dl_lent_at)) {
        char *base = NULL;
        pthread_mutex_lock(&sqlite_dl_lend_lock);
        int lent = p == atomic_load(&sqlite_dl_lent_at);
        if (lent) {
            sqlite_dl_lent.out = 0;
            atomic_store(&sqlite_dl_lent_at, NULL);
            if (sqlite_dl_lent.orphan) { /* the lend is over: its block was left to this */
                base = sqlite_dl_lent.base;
                sqlite_dl_lent.orphan = 0;
            }
        }
        pthread_mutex_unlock(&sqlite_dl_lend_lock);
        if (lent) {
            free(base);
            return;
        }
    }
    free(p);
}

static int sqlite_dl_size(void *p)
{
    size_t z = sqlite_dl_lent_size(p);
    if (!z && p)
        z = malloc_usable_size(p);
    return z > INT_MAX ? INT_MAX : (int)z;
}

static void *sqlite_dl_realloc(void *p, int n)
{
    size_t z = n > 0 ? (size_t)n : 1;
    size_t old = sqlite_dl_lent_size(p);
    if (!old) {
        if (z < XMALLOC_HUGE_WRITE || !p)
            return p ? realloc(p, z) : sqlite_dl_malloc(n);
        old = malloc_usable_size(p);
    }
    if (old >= z)
        return p; /* (the lent block too, while it is large enough) */
    void *q = huge_alloc(z);
    if (q) {
        memcpy(q, p, old);
        sqlite_dl_free(p);
    }
    return q;
}

void sqlite_dl_lend(char *base, const char *text, size_t len, size_t cap, int ends_record)
{
    pthread_mutex_lock(&sqlite_dl_lend_lock);
    if (!atomic_load(&sqlite_dl_lent_at) && !sqlite_dl_lent.open) {
        sqlite_dl_lent.base = base;
        sqlite_dl_lent.text = text;
        sqlite_dl_lent.len = len;
        sqlite_dl_lent.cap = cap;
        sqlite_dl_lent.ends_record = ends_record;
        sqlite_dl_lent.size = 0;
        sqlite_dl_lent.thread = pthread_self();
        sqlite_dl_lent.open = 1;
        sqlite_dl_lent.out = sqlite_dl_lent.orphan = 0;
    } /* else one is still out (left to SQLite by an earlier lend): nothing is lent */
    pthread_mutex_unlock(&sqlite_dl_lend_lock);
}

int sqlite_dl_lend_end(char *base)
{
    int kept = 0;
    pthread_mutex_lock(&sqlite_dl_lend_lock);
    if (sqlite_dl_lent.open && sqlite_dl_lent.base == base) {
        sqlite_dl_lent.open = 0;
        kept = sqlite_dl_lent.out;
        if (kept)
            sqlite_dl_lent.orphan = 1; /* freed with what SQLite holds */
    }
    pthread_mutex_unlock(&sqlite_dl_lend_lock);
    return kept;
}

unsigned long sqlite_dl_lend_used(int placed)
{
    pthread_mutex_lock(&sqlite_dl_lend_lock);
    unsigned long n = placed ? sqlite_dl_lent.placed : sqlite_dl_lent.hits;
    pthread_mutex_unlock(&sqlite_dl_lend_lock);
    return n;
}

/* What SQLite asks for is what its allocator gets (mallocWithAlarm): a large block is asked
 * for as it is, so that a record placed by the lend ends where the text does. */
static int sqlite_dl_roundup(int n)
{
    return n > INT_MAX - 7 || n >= (int)XMALLOC_HUGE_WRITE ? n : (n + 7) & ~7;
}

static int sqlite_dl_mem_init(void *ud)
{
    (void)ud;
    return SQLITE_OK;
}

static void sqlite_dl_mem_shutdown(void *ud)
{
    (void)ud;
}

static const sqlite3_mem_methods sqlite_dl_mem = {
    sqlite_dl_malloc, sqlite_dl_free, sqlite_dl_realloc, sqlite_dl_size, sqlite_dl_roundup,
    sqlite_dl_mem_init, sqlite_dl_mem_shutdown, NULL,
};

static int sqlite_dl_large_reads; /* sqlite_dl_prefer_large_reads() was called */

void sqlite_dl_prefer_large_reads(void)
{
    sqlite_dl_large_reads = 1;
}

/* For a command that will read many pages (a search walks the index's long doclists): the
 * page cache in one huge page, shared by every connection. A 4 KiB page fresh from the kernel
 * costs ~11 us to fault in on the machines tokterm is measured on, and the ~1,000 pages of a
 * cold search were a fifth of its time; a 2 MiB huge page costs 0.07-0.3 ms. SQLite writes into
 * every slot when it takes the buffer, so the whole of it is resident from then on: other
 * commands keep malloc's pages, as many as they read. Past the buffer SQLite uses malloc. */
static void sqlite_dl_page_cache(int (*config)(int, ...))
{
    if (!sqlite_dl_large_reads)
        return;
    int hdr = 0;
    if (config(SQLITE_CONFIG_PCACHE_HDRSZ, &hdr) != SQLITE_OK || hdr < 0)
        return;
    size_t slot = ((size_t)4096 + (size_t)hdr + 7) & ~(size_t)7; /* the store's page size */
    char *buf = huge_alloc(XMALLOC_HUGE_PAGE);
    if (!buf)
        return;
    /* Only if the kernel gave a huge page: without one (THP off, or none free), SQLite's
     * setup would fault in the whole buffer page by page, dearer than malloc on demand. */
    if (!huge_is_huge(buf) || config(SQLITE_CONFIG_PAGECACHE, buf, (int)slot,
                                     (int)(XMALLOC_HUGE_PAGE / slot)) != SQLITE_OK)
        free(buf);
    /* else SQLite owns it until the process ends */
}

#ifdef TT_SQLITE_STATIC
/* ---- the libm functions of the SQLite linked in, from libm loaded on first call ----
 * Debian's libsqlite3.a calls libm in its SQL math functions (acos() ... trunc()) and in FTS5's
 * bm25(): linking it would map libm into every run, --incognito included, ~0.3 MB of resident
 * memory for functions tokterm's own SQL never calls. The build links a copy of the archive in
 * which objcopy renamed those calls (configure's SQLITE_REDEFINE: NAME to tt_sqlite_NAME for
 * each X(NAME, n) below; this file is linked whenever SQLite is, since the table below names
 * SQLite's functions), and the first one loads libm (its soname from configure) and finds
 * them all. A name SQLite calls that is not listed links libm again (configure's -lm, a
 * NEEDED entry), which tests/e2e/test_sqlite_link.py finds: list it. */
#ifndef TT_LIBM_SONAME
#define TT_LIBM_SONAME "libm.so.6"
#endif

/* Every libm function SQLite calls (nm -u of libsqlite3.a's func.o and fts5.o), with how many
 * doubles it takes. configure reads the names from these lines: one X(name, n) each. */
#define SQLITE_MATH_FUNCS(X)                                                                   \
    X(acos, 1)                                                                                 \
    X(acosh, 1)                                                                                \
    X(asin, 1)                                                                                 \
    X(asinh, 1)                                                                                \
    X(atan, 1)                                                                                 \
    X(atan2, 2)                                                                                \
    X(atanh, 1)                                                                                \
    X(cos, 1)                                                                                  \
    X(cosh, 1)                                                                                 \
    X(exp, 1)                                                                                  \
    X(fmod, 2)                                                                                 \
    X(log, 1)                                                                                  \
    X(pow, 2)                                                                                  \
    X(sin, 1)                                                                                  \
    X(sinh, 1)                                                                                 \
    X(sqrt, 1)                                                                                 \
    X(tan, 1)                                                                                  \
    X(tanh, 1)                                                                                 \
    X(trunc, 1)

#define SQLITE_MATH_PARAMS1 double x
#define SQLITE_MATH_PARAMS2 double x, double y
#define SQLITE_MATH_TYPES1 double
#define SQLITE_MATH_TYPES2 double, double
#define SQLITE_MATH_ARGS1 (x)
#define SQLITE_MATH_ARGS2 (x, y)

static struct {
#define SQLITE_MATH_SLOT(name, n) double (*name)(SQLITE_MATH_TYPES##n);
    SQLITE_MATH_FUNCS(SQLITE_MATH_SLOT)
#undef SQLITE_MATH_SLOT
} sqlite_math;

static pthread_once_t sqlite_math_once = PTHREAD_ONCE_INIT;

static void sqlite_math_load(void)
{
    const struct util_dlfn fns[] = {
#define SQLITE_MATH_FIND(name, n) {#name, &sqlite_math.name, sizeof sqlite_math.name},
        SQLITE_MATH_FUNCS(SQLITE_MATH_FIND)
#undef SQLITE_MATH_FIND
    };
    char err[256];
    if (!util_dlopen(TT_LIBM_SONAME, "libm", "install the C library's libm", fns,
                     TT_ARRAY_LEN(fns), NULL, err, sizeof err))
        memset(&sqlite_math, 0, sizeof sqlite_math); /* every function gives NaN: SQL's NULL */
}

/* tt_sqlite_NAME: what SQLite's calls of NAME were renamed to. */
#define SQLITE_MATH_WRAP(name, n)                                                              \
    double tt_sqlite_##name(SQLITE_MATH_PARAMS##n);                                            \
    double tt_sqlite_##name(SQLITE_MATH_PARAMS##n)                                             \
    {                                                                                          \
        (void)pthread_once(&sqlite_math_once, sqlite_math_load);                              \
        return sqlite_math.name ? sqlite_math.name SQLITE_MATH_ARGS##n : NAN;                  \
    }
SQLITE_MATH_FUNCS(SQLITE_MATH_WRAP)
#undef SQLITE_MATH_WRAP

/* The SQLite linked in: its functions, and sqlite3_config in *config. 0. */
static int sqlite_dl_fill(struct sqlite_dl *api, int (**config)(int, ...))
{
#define SQLITE_DL_FN(name) api->name = sqlite3_##name;
    SQLITE_DL_FUNCS(SQLITE_DL_FN)
#undef SQLITE_DL_FN
    *config = sqlite3_config;
    return 0;
}
#else
/* A missing function's words: the version found, too old (NULL when it does not say). */
static const char *sqlite_dl_older(void *lib)
{
    static char v[64];
    const char *(*version)(void) = NULL;
    if (util_dlsym(lib, "sqlite3_libversion", &version, sizeof version) != 0)
        return NULL;
    snprintf(v, sizeof v, "SQLite %s is too old", version());
    return v;
}

/* The shared library, loaded (it stays until the process ends): its functions, and
 * sqlite3_config in *config (NULL if it has none). 0, or -1 with sqlite_dl_error set. */
static int sqlite_dl_fill(struct sqlite_dl *api, int (**config)(int, ...))
{
    const struct util_dlfn fns[] = {
#define SQLITE_DL_FN(name) {"sqlite3_" #name, &api->name, sizeof api->name},
        SQLITE_DL_FUNCS(SQLITE_DL_FN)
#undef SQLITE_DL_FN
    };
    void *lib = util_dlopen(TT_SQLITE_SONAME, "SQLite", SQLITE_DL_HOW, fns,
                            TT_ARRAY_LEN(fns), sqlite_dl_older, sqlite_dl_error,
                            sizeof sqlite_dl_error);
    if (!lib)
        return -1;
    *config = NULL;
    (void)util_dlsym(lib, "sqlite3_config", config, sizeof *config);
    return 0;
}
#endif

static void sqlite_dl_init(void)
{
    struct sqlite_dl api;
    memset(&api, 0, sizeof api);
    int (*config)(int, ...) = NULL;
    if (sqlite_dl_fill(&api, &config) != 0)
        return;
    sqlite_dl_api = api;
    /* Before SQLite initialises itself: the allocator that puts large blocks (the record of a
     * long answer) in huge pages. Refused (SQLITE_MISUSE) if something initialised it first. */
    if (config) {
        (void)config(SQLITE_CONFIG_MALLOC, &sqlite_dl_mem);
        /* No allocation statistics (nothing reads them): with them on, every allocation takes
         * SQLite's global memory mutex, for which the background checkpoint's connection and
         * this thread's contended. */
        (void)config(SQLITE_CONFIG_MEMSTATUS, 0);
        sqlite_dl_page_cache(config);
    }
    wal_vfs_install(); /* after the configuration: it initialises SQLite */
}

int sqlite_dl_load(char **err)
{
    if (pthread_once(&sqlite_dl_once, sqlite_dl_init) != 0) {
        *err = xstrdup("cannot load SQLite: pthread_once failed");
        return -1;
    }
    if (sqlite_dl_error[0]) {
        *err = xstrdup(sqlite_dl_error);
        return -1;
    }
    return 0;
}
