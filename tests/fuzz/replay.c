/* replay.c - runs every fuzz target over its seed corpus and its regression inputs, so that
 * `make check` (plain and ASan, gcc or clang) re-checks each crash ever found and every seed
 * without libFuzzer. Prints TAP: one test point per target and input directory. Each input
 * runs in a child process, so a crash is reported with the file that caused it.
 *
 *   tests/fuzz/replay                       every target, dirs below $srcdir (tests/)
 *   tests/fuzz/replay TARGET FILE...        just these inputs, in this process (for gdb,
 *                                           valgrind or a new crash file) */
#include "config.h"
#include "fuzz.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct replay_target {
    const char *name;
    int (*fn)(const uint8_t *data, size_t size);
    const char *dirs[5]; /* relative to $srcdir (tests/) */
};

static const struct replay_target replay_targets[] = {
    {"sse", fuzz_sse_one, {"fixtures", "fuzz/corpus/sse", "fuzz/regress/sse"}},
    {"api", fuzz_api_one, {"fixtures", "fuzz/corpus/api", "fuzz/regress/api"}},
    {"dialect", fuzz_dialect_one, {"fixtures", "fuzz/corpus/dialect", "fuzz/regress/dialect"}},
    {"conf", fuzz_conf_one, {"fuzz/corpus/conf", "fuzz/regress/conf"}},
    {"theme", fuzz_theme_one, {"../themes", "theme", "fuzz/corpus/theme", "fuzz/regress/theme"}},
    {"markdown", fuzz_markdown_one, {"fuzz/corpus/markdown", "fuzz/regress/markdown"}},
    {"table", fuzz_table_one, {"fuzz/corpus/table", "fuzz/regress/table"}},
    {"highlight", fuzz_highlight_one, {"fuzz/corpus/highlight", "fuzz/regress/highlight"}},
    {"tokenizer", fuzz_tokenizer_one,
     {"tokenizer/corpus", "fuzz/corpus/tokenizer", "fuzz/regress/tokenizer"}},
    {"ratelimit", fuzz_ratelimit_one, {"fuzz/corpus/ratelimit", "fuzz/regress/ratelimit"}},
    {"html", fuzz_html_one, {"fuzz/corpus/html", "fuzz/regress/html"}},
};

static const struct replay_target *replay_find(const char *name)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(replay_targets); i++)
        if (strcmp(replay_targets[i].name, name) == 0)
            return &replay_targets[i];
    return NULL;
}

static int replay_file(const struct replay_target *t, const char *path)
{
    size_t len;
    char *data = util_read_file(path, &len, 0);
    if (!data)
        return -1;
    /* An exact-size copy, so the sanitizers see a read past the end. */
    uint8_t *exact = xmalloc(len ? len : 1);
    memcpy(exact, data, len);
    free(data);
    t->fn(exact, len);
    free(exact);
    return 0;
}

static int replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run every regular file of dir (sorted) through t, each in a child. Returns the number of
 * inputs run, or -1 after a failure (described in why). */
static long replay_dir(const struct replay_target *t, const char *dir, char *why, size_t wsize)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, wsize, "cannot open %s", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0)
            continue;
        char *p = xasprintf("%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            names = xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = p;
        } else {
            free(p);
        }
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, replay_cmp);
    long ran = 0;
    for (size_t i = 0; i < n && ran >= 0; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(replay_file(t, names[i]) == 0 ? 0 : 3);
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0) {
            snprintf(why, wsize, "fork failed");
            ran = -1;
        } else if (WIFSIGNALED(status)) {
            snprintf(why, wsize, "%s: killed by signal %d", names[i], WTERMSIG(status));
            ran = -1;
        } else if (WEXITSTATUS(status) != 0) {
            snprintf(why, wsize, "%s: exit status %d", names[i], WEXITSTATUS(status));
            ran = -1;
        } else {
            ran++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    if (argc >= 2) {
        const struct replay_target *t = replay_find(argv[1]);
        if (!t) {
            fprintf(stderr, "replay: no target '%s'\n", argv[1]);
            return 2;
        }
        for (int i = 2; i < argc; i++)
            if (replay_file(t, argv[i]) < 0) {
                fprintf(stderr, "replay: cannot read %s\n", argv[i]);
                return 2;
            }
        printf("%d input(s) ran through %s\n", argc - 2, t->name);
        return 0;
    }
    const char *src = tap_srcdir();
    for (size_t i = 0; i < TT_ARRAY_LEN(replay_targets); i++) {
        const struct replay_target *t = &replay_targets[i];
        long total = 0;
        for (size_t k = 0; k < TT_ARRAY_LEN(t->dirs) && t->dirs[k]; k++) {
            char *dir = xasprintf("%s/%s", src, t->dirs[k]);
            char why[512] = "";
            long ran = replay_dir(t, dir, why, sizeof why);
            TAP_OK(ran >= 0, "%s: inputs of %s hold the invariants (%ld)%s%s", t->name,
                   t->dirs[k], ran, ran < 0 ? ": " : "", why);
            total += ran > 0 ? ran : 0;
            free(dir);
        }
        TAP_OK(total > 0, "%s: has inputs to replay (%ld)", t->name, total);
    }
    return tap_done();
}
