/* util.c - clocks, files, strings. */
#include "config.h"
#include "base/util.h"
#include "base/buf.h"
#include "base/xmalloc.h"

#include <dlfcn.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

double util_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void util_deadline_ms(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void util_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

double util_cpu(int thread)
{
    struct timespec ts;
    if (clock_gettime(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long util_thread_faults(void)
{
#ifdef RUSAGE_THREAD
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0)
        return ru.ru_minflt;
#endif
    return 0;
}

int64_t util_epoch(void)
{
    return (int64_t)time(NULL);
}

char *util_read_file(const char *path, size_t *len, size_t max_bytes)
{
    return util_read_file_stat(path, len, max_bytes, NULL);
}

static char *util_read_stream(FILE *f, size_t *len, size_t max_bytes, struct stat *st);

char *util_read_file_stat(const char *path, size_t *len, size_t max_bytes, struct stat *st)
{
    FILE *f = fopen(path, "rb");
    return f ? util_read_stream(f, len, max_bytes, st) : NULL;
}

char *util_read_fd(int fd, size_t *len, size_t max_bytes, struct stat *st)
{
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    return util_read_stream(f, len, max_bytes, st);
}

/* util_read_file_stat's read of an open stream, closed at the end. */
static char *util_read_stream(FILE *f, size_t *len, size_t max_bytes, struct stat *st)
{
    if (st && fstat(fileno(f), st) != 0) {
        int e = errno;
        fclose(f);
        errno = e;
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *p = xmalloc(cap);
    for (;;) {
        XGROW(p, n + 2, cap); /* room for a byte and the NUL */
        errno = 0;
        size_t k = fread(p + n, 1, cap - n - 1, f);
        n += k;
        if (max_bytes && n > max_bytes) {
            free(p);
            fclose(f);
            errno = EFBIG;
            return NULL;
        }
        if (k == 0)
            break;
    }
    /* the read's own reason: a directory given as a file (--config DIR, a secret mounted as
     * a folder) is EISDIR, "Is a directory" (until 2026-12 always EIO, "Input/output error") */
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        free(p);
        errno = err;
        return NULL;
    }
    p[n] = '\0';
    if (len)
        *len = n;
    return p;
}

int util_mkdir_p(const char *path, unsigned mode)
{
    char *p = xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST) {
                int e = errno;
                free(p);
                errno = e;
                return -1;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    return 0;
}

static char util_home_private[PATH_MAX];
static pthread_once_t util_home_once = PTHREAD_ONCE_INIT;

/* A uid with no HOME and no passwd entry (a container's random uid): a folder of its own in
 * $TMPDIR or /tmp, "tokterm-UID", made 0700; one that is there and not this uid's own private
 * folder (planted by another user: its config would send the key where they like) is passed
 * over for a fresh one, said once. Until 2026-12 the home was /tmp itself. */
static void util_home_private_init(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    unsigned uid = (unsigned)getuid();
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/tokterm-%u", tmp, uid) >= (int)sizeof path)
        return;
    struct stat st;
    if ((mkdir(path, 0700) == 0 || errno == EEXIST) && lstat(path, &st) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & 077)) {
        memcpy(util_home_private, path, strlen(path) + 1);
        return;
    }
    char fresh[PATH_MAX];
    if (snprintf(fresh, sizeof fresh, "%s-XXXXXX", path) >= (int)sizeof fresh || !mkdtemp(fresh))
        return;
    fprintf(stderr, "tokterm: no HOME and no home in the password database, and %s is not "
                    "this user's own private folder: using %s for this run\n", path, fresh);
    memcpy(util_home_private, fresh, strlen(fresh) + 1);
}

const char *util_home(void)
{
    const char *home = getenv("HOME");
    if (home && *home)
        return home;
    struct passwd *pw = getpwuid(getuid());
    if (pw && pw->pw_dir && pw->pw_dir[0] == '/')
        return pw->pw_dir;
    pthread_once(&util_home_once, util_home_private_init);
    return util_home_private[0] ? util_home_private : NULL;
}

void util_hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int got = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_NOCTTY);
            if (got >= 0 && got != fd)
                close(got); /* a lower one was free after all: leave it */
        }
}

static ssize_t util_std_write(void *cookie, const char *s, size_t n)
{
    return util_write_all((int)(intptr_t)cookie, s, n) == 0 ? (ssize_t)n : -1;
}

void util_std_streams_wait(void)
{
    /* until 2026-12 `show`, `export` and `count --ids` stopped after 64 KiB with "writing
     * stdout: Resource temporarily unavailable", exit 1, where -p and batch waited */
    for (int fd = 1; fd <= 2; fd++) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || !(fl & O_NONBLOCK))
            continue;
        cookie_io_functions_t io = {.write = util_std_write};
        FILE *f = fopencookie((void *)(intptr_t)fd, "w", io);
        if (!f)
            continue;
        if (fd == 1) {
            setvbuf(f, NULL, isatty(1) ? _IOLBF : _IOFBF, BUFSIZ);
            stdout = f;
        } else {
            setvbuf(f, NULL, _IONBF, 0);
            stderr = f;
        }
    }
}

int util_out_failed(int e, const char *who, const char *tail)
{
    if (e == EPIPE)
        return 141;
    fprintf(stderr, "%s: writing stdout: %s%s%s\n", who, strerror(e ? e : EIO), tail ? " " : "",
            tail ? tail : "");
    return 1;
}

int util_out_flushed(FILE *f, int code, const char *who)
{
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return code;
    return util_out_failed(errno, who, NULL);
}

FILE *util_fopen_private(const char *path)
{
    /* fopen creates 0666 & ~umask: under umask 000 anyone could read a --trace file */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

int util_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
                continue;
            }
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

void util_wipe(void *p, size_t n)
{
    if (p && n)
        explicit_bzero(p, n);
}

/* The authority of url (after "scheme://", or from the start without one, as libcurl takes
 * http_proxy=user:pw@host:3128; up to '/', '?' or '#'): *at gets the '@' that ends its
 * userinfo, NULL when none. Returns the authority's start, or NULL for no url. */
static const char *util_url_authority(const char *url, const char **at)
{
    *at = NULL;
    if (!url)
        return NULL;
    const char *a = strstr(url, "://");
    a = a ? a + 3 : url;
    size_t n = strcspn(a, "/?#");
    for (size_t i = 0; i < n; i++)
        if (a[i] == '@')
            *at = a + i; /* the last: a password may hold an '@' written raw */
    return a;
}

static int util_hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *util_url_userinfo(const char *url)
{
    const char *at, *a = util_url_authority(url, &at);
    if (!a || !at || at == a)
        return NULL;
    char *u = xmalloc((size_t)(at - a) + 1), *o = u;
    for (const char *p = a; p < at; p++) {
        int h, l;
        if (*p == '%' && p + 2 < at && (h = util_hex(p[1])) >= 0 && (l = util_hex(p[2])) >= 0) {
            *o++ = (char)(h * 16 + l);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return u;
}

char *util_url_shown(const char *url)
{
    const char *at, *a = util_url_authority(url, &at);
    if (!a || !at)
        return xstrdup(url ? url : "");
    return xasprintf("%.*s%s", (int)(a - url), url, at + 1);
}

size_t util_distance(const char *a, const char *b, size_t max)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64 || (n > m ? n - m : m - n) > max)
        return max + 1;
    unsigned short d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (unsigned short)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (unsigned short)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            unsigned short v = (unsigned short)(d[i - 1][j - 1] + !same);
            if (d[i - 1][j] + 1 < v)
                v = (unsigned short)(d[i - 1][j] + 1);
            if (d[i][j - 1] + 1 < v)
                v = (unsigned short)(d[i][j - 1] + 1);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = (unsigned short)(d[i - 2][j - 2] + 1);
            d[i][j] = v;
        }
    return d[n][m];
}

int util_secret_name(const char *name, size_t n)
{
    static const char *const words[] = {"key", "token", "secret", "pass", "auth", "cred",
                                        "cookie", "session"};
    for (size_t w = 0; w < TT_ARRAY_LEN(words); w++) {
        size_t k = strlen(words[w]);
        for (size_t i = 0; i + k <= n; i++)
            if (strncasecmp(name + i, words[w], k) == 0)
                return 1;
    }
    return 0;
}

void util_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void util_free_secret(char *s)
{
    if (s) {
        util_wipe(s, strlen(s));
        free(s);
    }
}

char *util_key_take(const char *v, const char *from, struct buf *err)
{
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    size_t b = strspn(v, " \t\r\n");
    if (b >= n)
        return NULL;
    for (size_t i = b; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            buf_printf(err, "the key in %s holds a control character (byte %zu of %zu: %s) "
                            "that cannot go in a header; nothing was sent - check how it is set",
                       from, i + 1, strlen(v),
                       v[i] == '\n' || v[i] == '\r' ? "a line break" : "not printable");
            return NULL;
        }
    return xstrndup(v + b, n - b);
}

char *util_trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

int util_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *util_next_data_line(char **cur)
{
    while (*cur && **cur) {
        char *line = *cur, *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        *cur = nl ? nl + 1 : NULL;
        if (*line != '#' && *line)
            return line;
    }
    return NULL;
}

#ifndef TT_DATADIR
#define TT_DATADIR "/usr/local/share/tokterm"
#endif
#ifndef TT_SRCDIR
#define TT_SRCDIR "."
#endif

char *util_data_path(const char *file, struct buf *tried)
{
    const char *env = getenv("TOKTERM_DATADIR");
    const char *dirs[2] = {TT_DATADIR, TT_SRCDIR "/data"};
    size_t ndirs = 2;
    if (env && *env) {
        dirs[0] = env;
        ndirs = 1;
    }
    for (size_t i = 0; i < ndirs; i++) {
        char *path = xasprintf("%s/%s", dirs[i], file);
        if (access(path, R_OK) == 0)
            return path;
        if (tried)
            buf_printf(tried, "%s%s", tried->len ? ", " : "", path);
        free(path);
    }
    return NULL;
}

/* RTLD_DEEPBIND, or 0 when it would be wrong. With it the library's symbols are looked up in
 * the library and its own dependencies first, then in the program's scope: SQLite's functions
 * calling each other (through its PLT, bound at load: BIND_NOW) are found at the first object
 * instead of after tokterm, cJSON, utf8proc and libc. Measured with callgrind: SQLite's
 * load 1.49M -> 0.98M instructions, before libcurl's load can start; libcurl's 15.8M ->
 * 13.8M. The same functions are found: the program exports only its copies of libc's stdin,
 * stdout, stderr and environ (copy relocations); libcurl, OpenSSL and libxml2 then read the
 * first three from libc's own, and tokterm never assigns them: both hold the same. Only an
 * interposer is passed over: an LD_PRELOAD (an allocator such as jemalloc, a test's fault
 * injector) or /etc/ld.so.preload would no longer reach the library's calls, so neither gets
 * DEEPBIND, nor do the sanitizers' interceptors (their builds never use it). Valgrind's own
 * preloads (vgpreload_*) replace functions by their address, not by the lookup order:
 * memcheck still sees every allocation. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UTIL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define UTIL_SANITIZED 1
#endif
#endif

int util_dlopen_deep(void)
{
#if defined(RTLD_DEEPBIND) && !defined(UTIL_SANITIZED)
    if (access("/etc/ld.so.preload", F_OK) == 0)
        return 0;
    const char *p = getenv("LD_PRELOAD");
    while (p && *p) { /* ld.so splits the list at colons and spaces */
        size_t n = strcspn(p, ": \t");
        const char *base = p;
        for (size_t i = 0; i < n; i++)
            if (p[i] == '/')
                base = p + i + 1;
        if (n && strncmp(base, "vgpreload_", 10) != 0)
            return 0;
        p += n + (p[n] != '\0');
    }
    return RTLD_DEEPBIND;
#else
    return 0;
#endif
}

void *util_dlopen(const char *soname, const char *what, const char *how,
                  const struct util_dlfn *fns, size_t n, const char *(*older)(void *lib),
                  char *err, size_t size)
{
    /* RTLD_LAZY: a dependency built without BIND_NOW (libcurl's Kerberos, GMP, nghttp2,
     * librtmp, zlib, ...) binds each function on its first call, so the ones never called
     * cost nothing: libcurl's load is 18.2M -> 15.6M instructions. A library built with
     * BIND_NOW (libcurl, OpenSSL, SQLite) is bound at load either way: each of its symbols
     * looked up, by default in the program and every library it loaded first, which is most
     * of the load (util_dlopen_deep). */
    void *lib = dlopen(soname, RTLD_LAZY | RTLD_LOCAL | util_dlopen_deep());
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, size, "cannot load %s (%s): %s; %s", what, soname,
                 why ? why : "dlopen failed", how);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (util_dlsym(lib, fns[i].name, fns[i].slot, fns[i].size) != 0) {
            const char *v = older ? older(lib) : NULL;
            snprintf(err, size, "cannot load %s (%s): it has no %s%s%s%s; %s", what, soname,
                     fns[i].name, v ? " (" : "", v ? v : "", v ? ")" : "", how);
            dlclose(lib);
            return NULL;
        }
    return lib;
}

int util_dlsym(void *lib, const char *name, void *slot, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p)
        return -1;
    memcpy(slot, &p, size);
    return 0;
}

/* A window of 8 bytes as one number: the last byte read in the low bits. */
#define UTIL_GRAM 8

static uint64_t util_gram_hash(uint64_t v, unsigned shift)
{
    return (v * 0x9E3779B97F4A7C15ull) >> shift;
}

void util_redact(char *text, const char *secret)
{
    if (!secret || !text)
        return;
    size_t k = strlen(secret);
    if (k < UTIL_GRAM)
        return;
    /* A run of 8 or more of the secret's characters is a union of windows of 8 that are each a
     * piece of the secret, and every such window is such a run: hide each window of text whose
     * 8 bytes are one of the secret's k - 7 windows. The windows live in an open-addressed table
     * (a quarter full at most), the text is read once with a rolling 64-bit window: O(n), ~1 ns
     * a byte; the bytes the secret never uses skip the lookup. */
    size_t grams = k - UTIL_GRAM + 1, cap = 16;
    unsigned shift = 60;
    while (cap < grams * 4)
        cap <<= 1, shift--;
    uint64_t *table = xcalloc(cap, sizeof *table);
    unsigned char *used = xcalloc(cap, 1);
    unsigned char in_secret[256] = {0};
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)secret[i];
        in_secret[c] = 1;
        v = (v << 8) | c;
        if (i + 1 < UTIL_GRAM)
            continue;
        size_t h = (size_t)util_gram_hash(v, shift);
        while (used[h] && table[h] != v)
            h = (h + 1) & (cap - 1);
        used[h] = 1;
        table[h] = v;
    }
    v = 0;
    size_t run = 0; /* how many of the last bytes read are characters of the secret */
    for (size_t i = 0; text[i]; i++) {
        unsigned char c = (unsigned char)text[i];
        v = (v << 8) | c;
        if (!in_secret[c]) {
            run = 0;
            continue;
        }
        if (++run < UTIL_GRAM)
            continue;
        size_t h = (size_t)util_gram_hash(v, shift);
        while (used[h] && table[h] != v)
            h = (h + 1) & (cap - 1);
        if (used[h]) /* text[i - 7 .. i] is a piece of the secret; v keeps the bytes read */
            memset(text + i + 1 - UTIL_GRAM, '*', UTIL_GRAM);
    }
    util_wipe(table, cap * sizeof *table);
    free(table);
    free(used);
}

/* The grandchild of util_spawn_detached (async-signal-safe calls only). Never returns. */
static void util_detached_exec(const char *exe, char *const argv[], const int *keep, int n_keep,
                               void (*fallback)(void *ctx), void *ctx)
{
    int high[6];
    for (int i = 0; i < n_keep; i++) /* above 3 + n_keep first: the dup2s below clobber none */
        high[i] = keep[i] >= 0 ? fcntl(keep[i], F_DUPFD, 10) : -1;
    int nul = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3; i++)
        dup2(nul, i);
    for (int i = 0; i < n_keep; i++) /* dup2 clears FD_CLOEXEC: they go through exec */
        dup2(high[i] >= 0 ? high[i] : 0, 3 + i);
    int first = 3 + n_keep;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) != 0)
#endif
    {
        struct rlimit rl;
        int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1 << 20)
                      ? (int)rl.rlim_cur : 1 << 20;
        for (int fd = first; fd < max; fd++)
            close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char *envp[] = {NULL};
    execve(exe, argv, envp);
    if (fallback) {
        fallback(ctx);
        _exit(0);
    }
    _exit(127);
}

/* In a vfork()ed child, before it unblocks signals: every caught signal back to its default
 * action (the child has a copy of the handlers, not the parent's), so that none runs a
 * handler of the parent on the memory the two share. */
__attribute__((noinline)) static void util_vchild_signals(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig > SIGSYS && sig < SIGRTMIN)
            continue; /* the C library's own (it refuses them: errno would change) */
        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
            sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            sigaction(sig, &sa, NULL);
        }
    }
}

/* util_spawn_detached's copies: vfork()ed when share (they share this memory until their
 * exec instead of copying its page tables: fork() of a process that holds a 1 MB answer took
 * 1.0-1.5 ms, then copy-on-write faults until the child's exec; vfork() only what the exec
 * takes to drop the memory; only the calling thread waits), else fork()ed (a fallback runs
 * in them after a failed exec). Signals are blocked around it; shared copies set the caught
 * ones back to their defaults before exec unblocks them. */
static int util_spawn_copies(const char *exe, char *const argv[], const int *keep, int n_keep,
                             void (*fallback)(void *ctx), void *ctx, int exiting, int share)
{
    volatile int vf = share; /* read again after vfork(), which returns twice */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int saved = errno; /* a shared copy's calls set this thread's errno */
    pid_t a = vf ? vfork() : fork();
    if (a == 0) { /* a session of its own, left at once: the grandchild is nobody's child */
        if (vf)
            util_vchild_signals();
        if (setsid() < 0)
            _exit(1);
        if (exiting)
            util_detached_exec(exe, argv, keep, n_keep, fallback, ctx);
        /* a vfork()ed middle process goes on once the grandchild has exec'd */
        pid_t b = vf ? vfork() : fork();
        if (b == 0)
            util_detached_exec(exe, argv, keep, n_keep, fallback, ctx);
        _exit(b < 0);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    if (a < 0 || exiting)
        return a > 0 ? 0 : -1;
    int st = 0;
    while (waitpid(a, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

#ifndef UTIL_SANITIZED /* (the sanitizers expect each stack to be a thread's) */
/* What the child of util_spawn_cloned runs: its own copies of what it execs, at the start of
 * the block whose end is its stack. */
struct util_cspawn {
    const char *exe;
    char **argv;
    int keep[6];
    int n_keep;
};

#define UTIL_CSTACK 65536 /* the child's stack: a few calls, and exec */

static int util_cchild(void *arg)
{
    struct util_cspawn *c = arg;
    util_vchild_signals();
    if (setsid() < 0)
        _exit(1);
    util_detached_exec(c->exe, c->argv, c->keep, c->n_keep, NULL, NULL);
    return 127;
}

/* 1 under valgrind (its preload is in LD_PRELOAD), which ends a program that clones itself
 * other than as fork, vfork or a thread does. */
static int util_under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload_") != NULL;
}

/* util_spawn_detached for a caller that exits right after: clone(CLONE_VM) without
 * CLONE_VFORK. This process goes on to its exit at once, and the child shares its memory until
 * its own exec, which is then the last user of that memory: the child's exec frees it, not
 * this process's exit. With vfork() the exit waited for the child's exec (0.3-0.6 ms) and
 * then freed the memory itself; its reaping also came ~1.3 ms later than a run's that started
 * no child (1 MB answer, 31 rounds: exit to wait4 2.8 ms against 1.4 ms). What the child reads
 * is copied into a block of its own, never unmapped: nothing this process does on its way out
 * can change it. Until its exec the child's command line reads as this process's: whoever
 * waits for the copy goes by the lock it holds from the start (store_detached_running), not by
 * the command line. 0 when the child was started, or -1 when nothing was started (no such
 * clone under valgrind, one refused by a seccomp filter, no memory for the block): the caller
 * vforks instead. */
static int util_spawn_cloned(const char *exe, char *const argv[], const int *keep, int n_keep)
{
    if (util_under_valgrind())
        return -1;
    size_t need = sizeof(struct util_cspawn) + strlen(exe) + 1, n_argv = 0;
    for (; argv[n_argv]; n_argv++)
        need += sizeof(char *) + strlen(argv[n_argv]) + 1;
    need = (need + sizeof(char *) + 63) & ~(size_t)63;
    char *block = mmap(NULL, need + UTIL_CSTACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (block == MAP_FAILED)
        return -1;
    struct util_cspawn *c = (struct util_cspawn *)block;
    c->argv = (char **)(c + 1);
    char *str = (char *)(c->argv + n_argv + 1);
    for (size_t i = 0; i < n_argv; i++) {
        size_t len = strlen(argv[i]) + 1;
        c->argv[i] = memcpy(str, argv[i], len);
        str += len;
    }
    c->argv[n_argv] = NULL;
    c->exe = memcpy(str, exe, strlen(exe) + 1);
    for (int i = 0; i < n_keep; i++)
        c->keep[i] = keep[i];
    c->n_keep = n_keep;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int saved = errno;
    pid_t pid = clone(util_cchild, block + need + UTIL_CSTACK, CLONE_VM | SIGCHLD, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    if (pid > 0)
        return 0;
    munmap(block, need + UTIL_CSTACK);
    return -1;
}
#endif

int util_spawn_detached(const char *exe, char *const argv[], const int *keep, int n_keep,
                        void (*fallback)(void *ctx), void *ctx, int exiting)
{
    if (n_keep < 0 || n_keep > 6)
        return -1;
    /* Without a fallback nothing runs in the children but exec: they need no copy of the
     * memory. A caller that exits does not wait for the exec either (util_spawn_cloned); one
     * that stays waits for it (vfork). The sanitizers' builds vfork for an exit and fork the
     * double fork: AddressSanitizer's vfork keeps the caller's return address in one slot per
     * thread, which a vfork in the vfork()ed child overwrites. */
#ifndef UTIL_SANITIZED
    if (!fallback && exiting && util_spawn_cloned(exe, argv, keep, n_keep) == 0)
        return 0;
    int share = !fallback;
#else
    int share = !fallback && exiting;
#endif
    return util_spawn_copies(exe, argv, keep, n_keep, fallback, ctx, exiting, share);
}
