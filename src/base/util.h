/* util.h - small helpers shared by every module: clocks, files, strings. */
#ifndef TT_UTIL_H
#define TT_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* A rate of tokens per second is told only of at least this many tokens streamed over at
 * least this long: a burst (a buffering proxy, a stream that stalls after its first chunk)
 * read 2,434,570 tok/s in the chat and 535,511 in show. The network thread's measure, the
 * chat, show and stats keep to it. */
#define TT_TPS_MIN_TOKENS 20
#define TT_TPS_MIN_SECONDS 0.5

/* The plural ending of a count: "%lld token%s", n, util_plural(n) gives "1 token", "2 tokens". */
static inline const char *util_plural(long long n)
{
    return n == 1 ? "" : "s";
}

/* Monotonic clock in seconds. */
double util_now(void);
/* *ts = ms milliseconds from now on the monotonic clock: the deadline of a
 * pthread_cond_timedwait on a condition made with CLOCK_MONOTONIC. */
struct timespec;
void util_deadline_ms(struct timespec *ts, long ms);
/* Sleep ms milliseconds (nanosleep; a signal may end it early). */
void util_sleep_ms(int ms);
/* CPU time in seconds (user + system, nanosecond resolution): of the whole process (all its
 * threads) when thread is 0, of the calling thread when 1. */
double util_cpu(int thread);
/* Minor page faults so far (pages the kernel had to find, zero or map: fresh memory) of the
 * calling thread; 0 where the system cannot say. */
long util_thread_faults(void);
/* Wall clock, seconds since the epoch. */
int64_t util_epoch(void);

/* Read a whole file into a new NUL-terminated string (caller frees); *len gets its length.
 * Returns NULL (errno set) on failure. max_bytes = 0 means no limit. */
char *util_read_file(const char *path, size_t *len, size_t max_bytes);
struct stat;
/* The same, and *st gets the fstat of the file that was read (not of what path names later). */
char *util_read_file_stat(const char *path, size_t *len, size_t max_bytes, struct stat *st);
/* The same from an open descriptor, which is closed in every case. */
char *util_read_fd(int fd, size_t *len, size_t max_bytes, struct stat *st);

/* The user's home directory: $HOME, or when it is unset or empty (cron, a systemd unit, env -i)
 * the password database's entry for this uid, as a shell finds ~; with neither, a private
 * folder of this uid's in $TMPDIR or /tmp (tokterm-UID, 0700, checked to be its own). NULL
 * when none can be had. Not to be freed (the environment's, getpwuid's: valid until the next
 * call, or static). */
const char *util_home(void);

/* mkdir -p with the given mode for each created component. Returns 0 or -1 (errno). */
int util_mkdir_p(const char *path, unsigned mode);

/* fopen(path, "w") of a file only its owner may read: a new file is made 0600 whatever the
 * umask (what tokterm writes, a trace or a cache of the user's requests, is private). An
 * existing file keeps its mode. NULL with errno on failure. */
FILE *util_fopen_private(const char *path);

/* Write all of s[0..n) to fd, retrying partial writes, EINTR and EAGAIN (a line is never left
 * half written). Returns 0, or -1 with errno (EPIPE when the reader went away). */
int util_write_all(int fd, const char *s, size_t n);

/* Fill a closed stdin, stdout or stderr with /dev/null opened the wrong way round (stdin
 * write-only, the others read-only), so that a file or socket opened later cannot become fd
 * 0-2 (an answer written into libcurl's wake-up socket) and using them still fails with
 * EBADF as a closed descriptor does. */
void util_hold_std_fds(void);

/* When stdout or stderr was handed over non-blocking (O_NONBLOCK set by the parent: Node's
 * child_process, some CI runners), put a stream in place of stdout / stderr whose writes wait
 * for room (util_write_all) instead of failing with EAGAIN when the pipe is full. Call before
 * anything is written. */
void util_std_streams_wait(void);

/* The exit status of a command whose stdout failed with errno e (0: stdio lost it, read as
 * EIO): 141, quiet, when the reader went away (what death by SIGPIPE would give); else 1, after
 * "WHO: writing stdout: REASON" on stderr, TAIL after it when not NULL. */
int util_out_failed(int e, const char *who, const char *tail);
/* code, unless flushing f fails or an earlier write to it did: then util_out_failed's status. */
int util_out_flushed(FILE *f, int code, const char *who);

/* Overwrite n bytes at p with zeros in a way the compiler may not drop as a dead store
 * (explicit_bzero): for keys and anything holding one, before it is freed or goes out of
 * scope. p may be NULL when n is 0. */
void util_wipe(void *p, size_t n);
/* The edit distance of a and b, ignoring case (a transposition counts one), or max + 1 when
 * it is larger (also for words over 64 bytes). */
size_t util_distance(const char *a, const char *b, size_t max);
/* Does a variable's or header's name (n bytes) say its value is a secret: key, token, secret,
 * pass, auth, cred, cookie or session in it, in any case? */
int util_secret_name(const char *name, size_t n);
/* Free a NULL-terminated array of strings and each of them; NULL is fine. */
void util_strv_free(char **v);
/* Wipe the string s (up to its NUL) and free it; NULL is fine. */
void util_free_secret(char *s);
/* Replace by '*' every run of 8 or more bytes of text that is a piece of secret (the whole key,
 * the key minus a character, a middle slice: defence in depth for messages that echo what they
 * were sent); a run of 7 is left. Nothing when either is NULL or the secret is shorter than 8
 * bytes. Linear in the text (10 MB: ~20 ms). */
void util_redact(char *text, const char *secret);

/* A key as it may go in a header: v without the blanks and line breaks around it (a CI secret
 * saved with its newline), newly allocated. NULL when nothing is left (err untouched), or when
 * a control character is inside, which would end the header line there and send what follows
 * as headers of its own: err then names `from` ("$OPENAI_API_KEY", "api_key_cmd") and the
 * byte, never the key. */
struct buf;
char *util_key_take(const char *v, const char *from, struct buf *err);

/* Strip leading and trailing ASCII white space in place; returns s. */
char *util_trim(char *s);

/* 1 when s starts with prefix. */
int util_starts_with(const char *s, const char *prefix);
/* The userinfo of a URL ("user:password" of scheme://user:password@host/..., or of
 * user:password@host without a scheme), percent-decoded, as a new string (wipe it), or NULL
 * when the URL has none. */
char *util_url_userinfo(const char *url);
/* url without its userinfo, to show (a new string; a copy when it has none). */
char *util_url_shown(const char *url);

/* The next line of a line-oriented data file at *cur, NUL-terminated in place, skipping empty
 * lines and '#' comments; NULL at the end of the text. */
char *util_next_data_line(char **cur);

struct buf;
/* Path of an existing, readable file of tokterm's data directory (caller frees): looked for in
 * $TOKTERM_DATADIR when set (only there), else in the installed data directory, then in the
 * source tree's data/. NULL when none is readable; the places tried are appended to *tried
 * (may be NULL), comma-separated. */
char *util_data_path(const char *file, struct buf *tried);

/* A function of a library loaded on first use: its name there, and the pointer it goes into
 * (slot, size: the pointer variable, of any function type). */
struct util_dlfn {
    const char *name;
    void *slot;
    size_t size;
};

/* The extra dlopen() flag util_dlopen loads with: RTLD_DEEPBIND (a library's own symbols
 * first), or 0 under an LD_PRELOAD or /etc/ld.so.preload other than valgrind's, and in
 * sanitizer builds: their interposers must keep reaching the library. */
int util_dlopen_deep(void);

/* A library loaded on first use (curl_dl.c, sqlite_dl.c, xml_dl.c): dlopen(soname), then each
 * of the n functions into its slot. The library (it stays loaded), or NULL with nothing left
 * loaded and err[0..size) set to "cannot load WHAT (SONAME): why; HOW" (how: what to install),
 * or, when a function is missing, "cannot load WHAT (SONAME): it has no NAME (OLDER); HOW",
 * older(lib) saying which version is needed or found (older, or what it returns, may be NULL:
 * no parenthesis). */
void *util_dlopen(const char *soname, const char *what, const char *how,
                  const struct util_dlfn *fns, size_t n, const char *(*older)(void *lib),
                  char *err, size_t size);

/* dlsym(lib, name) into a function pointer of any type (slot, size: the pointer variable):
 * 0, or -1 when the library has no such symbol. */
int util_dlsym(void *lib, const char *name, void *slot, size_t size);

/* Start exe with argv and an empty environment as nobody's child (it holds no key: neither
 * the environment's nor a copy of this memory, which exec replaces): a double fork, the middle
 * process in a session of its own, waited for here (no zombie is left; the grandchild goes to
 * init or the subreaper). The grandchild has /dev/null as 0-2, keep[i] as descriptor 3 + i
 * (/dev/null where keep[i] < 0; the descriptions, and their OFD locks, are shared), nothing
 * else open and no signal blocked. When the exec fails it calls fallback(ctx) if given, then
 * _exit(0), else _exit(127). The forked copies of a threaded process make only
 * async-signal-safe calls (so must fallback). Without a fallback the copies are vfork()ed:
 * they share this memory until their exec instead of a copy of its page tables, and only the
 * calling thread waits for the exec. The caller's signal mask and errno are left as they
 * were. n_keep at most 6. 0 when the grandchild was
 * forked, -1 otherwise.
 * exiting: the caller ends right after (_exit), so nobody is left to hold a zombie: one fork,
 * the child in a session of its own, not waited for (a second fork and the wait for it cost
 * 5-22 ms at load 11 on the close of a large answer); init reaps it. Without a fallback that
 * child is a clone sharing this memory whose exec is not waited for either: the caller's
 * errno may change once the child runs, and until its exec the child's command line reads as
 * the caller's. */
int util_spawn_detached(const char *exe, char *const argv[], const int *keep, int n_keep,
                        void (*fallback)(void *ctx), void *ctx, int exiting);

/* A number from JSON as a long: (long)d, truncated, when |d| < 2^53 (every integer a double
 * holds exactly), else dflt. A peer's JSON may say 1e300 or, past cJSON, NaN; converting such
 * a double to an integer is undefined behaviour (fuzz_dialect found an Anthropic block index of
 * 2.2e108). */
static inline long util_json_long(double d, long dflt)
{
    return d > -9007199254740992.0 && d < 9007199254740992.0 ? (long)d : dflt;
}

/* ceil(x) for |x| < 9e18 (x itself otherwise): the one libm function tokterm needed, and
 * linking libm for it costs ~300 KB of resident memory at every start. */
static inline double util_ceil(double x)
{
    if (!(x > -9e18 && x < 9e18))
        return x;
    double t = (double)(long long)x;
    return t < x ? t + 1 : t;
}

#endif
