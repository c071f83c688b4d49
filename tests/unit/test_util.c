/* test_util.c - base/util.c: key redaction (any run of 8 or more of the key's characters),
 * its speed on a long text, and the small string helpers. */
#include "config.h"
#include "base/util.h"
#include "tap.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY "sk-proj-A1b2C3d4E5f6G7h8I9j0KlMnOpQr"

/* text with secret redacted (a new string). */
static char *redacted(const char *text, const char *secret)
{
    char *t = xstrdup(text);
    util_redact(t, secret);
    return t;
}

/* "pre" + n stars + "post" (a new string). */
static char *stars(const char *pre, size_t n, const char *post)
{
    char *s = xmalloc(strlen(pre) + n + strlen(post) + 1);
    strcpy(s, pre);
    memset(s + strlen(pre), '*', n);
    strcpy(s + strlen(pre) + n, post);
    return s;
}

static void check(const char *name, const char *pre, const char *piece, const char *post,
                  int hidden)
{
    char *text = xasprintf("%s%s%s", pre, piece, post);
    char *got = redacted(text, KEY);
    char *want = hidden ? stars(pre, strlen(piece), post) : xstrdup(text);
    TAP_STR(got, want, name);
    free(text);
    free(got);
    free(want);
}

static const char *test_older(void *lib)
{
    (void)lib;
    return "9.9 or later is needed";
}

/* util_dlopen: the loader of curl_dl.c, sqlite_dl.c and xml_dl.c, and its messages. */
static void test_dlopen(void)
{
    char err[256] = "";
    size_t (*len)(const char *) = NULL;
    int (*cmp)(const char *, const char *) = NULL;
    struct util_dlfn fns[] = {{"strlen", &len, sizeof len}, {"strcmp", &cmp, sizeof cmp}};
    void *lib = util_dlopen("libc.so.6", "libc", "install it", fns, 2, NULL, err, sizeof err);
    TAP_OK(lib && len && cmp && len("abc") == 3 && cmp("a", "a") == 0,
           "dlopen: each function into its slot");
    lib = util_dlopen("libtt-nosuch.so.9", "nosuch", "install nosuch", fns, 2, NULL, err,
                      sizeof err);
    TAP_OK(!lib && strncmp(err, "cannot load nosuch (libtt-nosuch.so.9): ", 40) == 0 &&
               strstr(err, "; install nosuch"), "dlopen: no library: %s", err);
    struct util_dlfn more[] = {{"strlen", &len, sizeof len}, {"tt_nosuch_fn", &cmp, sizeof cmp}};
    lib = util_dlopen("libc.so.6", "libc", "install it", more, 2, test_older, err, sizeof err);
    TAP_STR(lib ? "loaded" : err,
            "cannot load libc (libc.so.6): it has no tt_nosuch_fn (9.9 or later is needed); "
            "install it", "dlopen: a missing function named, with the version's words");
    lib = util_dlopen("libc.so.6", "libc", "install it", more, 2, NULL, err, sizeof err);
    TAP_STR(lib ? "loaded" : err,
            "cannot load libc (libc.so.6): it has no tt_nosuch_fn; install it",
            "dlopen: ... and without them");
}

/* What the detached program sees, reported by a shell on the descriptor it keeps (3). */
static const char spawn_report[] =
    /* first, with the shell's builtins: a shell blocks every signal while it forks */
    "while read -r k v; do [ \"$k\" = SigBlk: ] && echo \"SigBlk=$v\"; done < /proc/$$/status; "
    "set -- $(cat /proc/$$/stat); echo \"pidsid=$1/$6\"; "
    "echo fds; ls /proc/$$/fd; echo endfds; "
    "echo \"env=$(tr '\\0' '\\n' < /proc/$$/environ | grep -c . )\"; "
    "echo \"in=$(readlink /proc/$$/fd/0) out=$(readlink /proc/$$/fd/1)\"";

/* util_spawn_detached: a session of its own (its pid is its session id), /dev/null as 0-2,
 * the kept descriptor as 3 and nothing else open, an empty environment, no signal blocked.
 * exiting: one fork, not waited for (the caller is about to end); not exiting: the double
 * fork, the middle process waited for. */
static void test_spawn_detached(int exiting)
{
    const char *how = exiting ? "exiting" : "staying";
    int p[2];
    TAP_OK(pipe2(p, O_CLOEXEC) == 0, "%s: a pipe for the report", how);
    int stray = open("/dev/null", O_RDONLY); /* not close-on-exec: must not reach the child */
    setenv("TOKTERM_SPAWN_TEST", "x", 1);
    sigset_t usr, old;
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr, &old);
    char *script = xasprintf("exec 1>&3; %s", spawn_report);
    char *argv[] = {(char *)"sh", (char *)"-c", script, NULL};
    errno = ERANGE;
    int rc = util_spawn_detached("/bin/sh", argv, &p[1], 1, NULL, NULL, exiting);
    int err = errno;
    /* what the call was given is the caller's again (an exiting caller frees or reuses it on
     * its way out): the child execs its own copy */
    memset(script, 'x', strlen(script));
    argv[2] = argv[0] = NULL;
    sigset_t after;
    sigprocmask(SIG_SETMASK, NULL, &after);
    /* the children (they share this thread's memory until their exec) change neither the
     * caller's errno nor its mask, which the call blocks everything around */
    TAP_OK(err == ERANGE, "%s: errno as the caller left it (%d)", how, err);
    TAP_OK(sigismember(&after, SIGUSR1) == 1 && sigismember(&after, SIGTERM) == 0,
           "%s: the caller's signal mask restored", how);
    sigprocmask(SIG_SETMASK, &old, NULL);
    unsetenv("TOKTERM_SPAWN_TEST");
    close(p[1]);
    close(stray);
    TAP_OK(rc == 0, "%s: spawned", how);
    char out[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(p[0]);
    if (exiting)
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        } /* this test lives on: the child is its own */
    unsigned pid = 0, sid = 0;
    const char *ps = strstr(out, "pidsid=");
    int got = ps && sscanf(ps, "pidsid=%u/%u", &pid, &sid) == 2;
    /* exiting: the child leads its session; staying: the grandchild of the session's leader */
    TAP_OK(got && pid > 0 && sid != (unsigned)getsid(0) && (exiting ? pid == sid : pid != sid),
           "%s: a session of its own (pid %u, session %u; ours %u)", how, pid, sid,
           (unsigned)getsid(0));
    /* ls lists the shell's own descriptors (the shell opens none to run it) */
    TAP_OK(strstr(out, "fds\n0\n1\n2\n3\nendfds\n") != NULL, "%s: only 0-3 open: %s", how,
           out);
    TAP_OK(strstr(out, "env=0\n") != NULL, "%s: an empty environment", how);
    TAP_OK(strstr(out, "SigBlk=0000000000000000\n") != NULL, "%s: no signal blocked", how);
    TAP_OK(strstr(out, "in=/dev/null out=pipe:") != NULL, "%s: stdin /dev/null, 3 the pipe",
           how);
    free(script);
}

int main(void)
{
    const size_t k = strlen(KEY);
    char piece[64];

    /* util_json_long: numbers a peer's JSON may hold, converted without undefined behaviour
     * (UBSan reports the cast of 1e300 in the sanitizer builds) */
    TAP_OK(util_json_long(3.7, -1) == 3 && util_json_long(-2.0, -1) == -2 &&
               util_json_long(9007199254740991.0, -1) == 9007199254740991L,
           "util_json_long: integers up to 2^53 and fractions, truncated");
    TAP_OK(util_json_long(2.22e108, -1) == -1 && util_json_long(-1e300, 7) == 7 &&
               util_json_long(9007199254740992.0, -1) == -1 &&
               util_json_long(__builtin_nan(""), -1) == -1 &&
               util_json_long(__builtin_inf(), -1) == -1,
           "util_json_long: 2^53 and past it, infinities and NaN give the default");
    /* a directory read as a file (--config DIR, a secret mounted as a folder): its own reason,
     * not EIO ("Input/output error", until 2026-12) */
    errno = 0;
    size_t dlen = 0;
    char *dir_text = util_read_file("/", &dlen, 0);
    TAP_OK(dir_text == NULL && errno == EISDIR, "util_read_file of a directory: EISDIR");
    free(dir_text);
    /* a URL's credentials: taken out to show, and read (percent-decoded) to star */
    char *u = util_url_userinfo("http://pu%40ser:p%3Ass@w@proxy:3128/x?a=b@c");
    char *v = util_url_shown("http://pu%40ser:p%3Ass@w@proxy:3128/x?a=b@c");
    TAP_STR(u, "pu@ser:p:ss@w", "util_url_userinfo: up to the authority's last @, decoded");
    TAP_STR(v, "http://proxy:3128/x?a=b@c", "util_url_shown: the userinfo taken out");
    free(u);
    free(v);
    u = util_url_userinfo("pu:pw@proxy:3128");
    TAP_STR(u, "pu:pw", "util_url_userinfo: without a scheme, as libcurl takes a proxy");
    free(u);
    u = util_url_userinfo("http://proxy:3128/a@b");
    v = util_url_shown("redis:x");
    TAP_OK(u == NULL && strcmp(v, "redis:x") == 0, "no userinfo: NULL, and the URL as it is");
    free(v);
    test_dlopen();
    test_spawn_detached(1);
    test_spawn_detached(0);

    check("the whole key", "Incorrect API key provided: ", KEY, ".", 1);
    snprintf(piece, sizeof piece, "%.*s", (int)k - 1, KEY);
    check("the key minus its last character", "key '", piece, "' is wrong", 1);
    check("the key minus its first character", "key '", KEY + 1, "' is wrong", 1);
    snprintf(piece, sizeof piece, "%.8s", KEY + 12);
    check("a middle slice of 8 characters", "x", piece, "y", 1);
    snprintf(piece, sizeof piece, "%.7s", KEY + 12);
    check("a middle slice of 7 characters is left alone", "x", piece, "y", 0);
    snprintf(piece, sizeof piece, "%.12s", KEY);
    check("the key's first 12 characters", "", piece, "", 1);
    snprintf(piece, sizeof piece, "%.10s", KEY + k - 10);
    check("the key's last 10 characters, at the end of the text", "tail ", piece, "", 1);
    check("a masked key (sk-...OpQr) is left alone", "key sk-...", "OpQr", " wrong", 0);

    /* two slices, overlapping pieces, a slice next to text that is not the key */
    {
        char *text = xasprintf("a=%.9s b=%.11s c=%.7s", KEY + 3, KEY + 20, KEY);
        char *got = redacted(text, KEY);
        char *want = xasprintf("a=********* b=*********** c=%.7s", KEY);
        TAP_STR(got, want, "two slices in one text, a 7-character one kept");
        free(text);
        free(got);
        free(want);
    }
    {
        /* a slice that continues past the key's end into other text: only the key's part */
        char *text = xasprintf("%sZZZZ", KEY + k - 9);
        char *got = redacted(text, KEY);
        TAP_STR(got, "*********ZZZZ", "only the characters that are the key's");
        free(text);
        free(got);
    }
    {
        /* a key with a repeating piece: every occurrence, also overlapping ones */
        const char *rk = "abababababXYZ12345";
        char *got = redacted("abababababababab xx", rk);
        TAP_STR(got, "**************** xx", "overlapping runs of a repetitive key");
        free(got);
    }
    {
        char *got = redacted("short secret sk-123 here", "sk-1234");
        TAP_STR(got, "short secret sk-123 here", "a secret under 8 characters: nothing");
        free(got);
        util_redact(NULL, KEY);
        got = redacted("text", NULL);
        TAP_STR(got, "text", "NULL secret: text unchanged");
        free(got);
    }

    /* 10 MB of text that shares characters with the key, slices planted at the start, the
     * middle and the end: every one hidden, in well under a second */
    {
        size_t n = 10u << 20;
        char *big = xmalloc(n + 1);
        for (size_t i = 0; i < n; i++)
            big[i] = KEY[(i * 7) % 5 + (i % 3)]; /* the key's characters, never 8 in a row */
        big[n] = '\0';
        memcpy(big, KEY, k);
        memcpy(big + n / 2, KEY + 5, 20);
        memcpy(big + n - 9, KEY + k - 9, 9);
        big[k] = big[n / 2 - 1] = big[n / 2 + 20] = big[n - 10] = ' '; /* the slices' ends */
        double t0 = util_now();
        util_redact(big, KEY);
        double dt = util_now() - t0;
        int hidden = big[0] == '*' && big[k - 1] == '*' && big[k] != '*' &&
                     big[n / 2 - 1] != '*' && big[n / 2] == '*' && big[n / 2 + 19] == '*' &&
                     big[n / 2 + 20] != '*' && big[n - 9] == '*' && big[n - 1] == '*';
        TAP_OK(hidden, "10 MB: each planted slice hidden, nothing around it");
        size_t starred = 0;
        for (size_t i = 0; i < n; i++)
            starred += big[i] == '*';
        TAP_INT(starred, k + 20 + 9, "10 MB: exactly the planted characters starred");
        TAP_OK(dt < 1.0, "10 MB redacted in %.3f s (< 1 s)", dt);
        free(big);
    }

    /* the string helpers */
    {
        char s[] = " \t x y \r\n";
        TAP_STR(util_trim(s), "x y", "util_trim");
        TAP_OK(util_starts_with("cmd:echo", "cmd:") && !util_starts_with("cm", "cmd:"),
               "util_starts_with");
    }
    return tap_done();
}
