/* test_gitignore.c - the .gitignore matcher (core/gitignore.c) against git's rules, and the
 * folder walk (core/folder.c): order, nested .gitignore files, negation, .git, binaries,
 * links and FIFOs, the file and byte limits and the listing of what was left out. */
#include "config.h"
#include "core/folder.h"
#include "core/gitignore.h"
#include "tap.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void wild(const char *pattern, const char *text, int want)
{
    TAP_OK(gitignore_wildmatch(pattern, text) == want, "wildmatch(%s, %s) = %d", pattern, text,
           want);
}

/* rules: one .gitignore text at the top; checks path -> want. */
static void rule(const char *rules, const char *path, int is_dir, int want)
{
    struct gitignore *g = gitignore_new();
    gitignore_add(g, "", rules, strlen(rules));
    char shown[128];
    size_t k = 0;
    for (const char *p = rules; *p && k + 3 < sizeof shown; p++) {
        if (*p == '\n' || *p == '\r') {
            shown[k++] = '\\';
            shown[k++] = *p == '\n' ? 'n' : 'r';
        } else {
            shown[k++] = *p;
        }
    }
    shown[k] = '\0';
    TAP_OK(gitignore_match(g, path, is_dir) == want, "[%s] %s%s -> %s", shown, path,
           is_dir ? "/" : "", want ? "ignored" : "kept");
    gitignore_free(g);
}

static void put(const char *dir, const char *rel, const char *text)
{
    char *p = xasprintf("%s/%s", dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    util_mkdir_p(p, 0700);
    *slash = '/';
    FILE *f = fopen(p, "wb");
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    free(p);
}

struct taken {
    struct buf names;
};

static int take(void *ud, const char *path, const char *data, size_t len, const char **why)
{
    struct taken *t = ud;
    if (memchr(data, '\0', len)) {
        *why = "binary";
        return -1;
    }
    buf_printf(&t->names, "%s\n", path);
    return 0;
}

static void walk(const char *dir, size_t files, size_t bytes, struct taken *t,
                 struct folder_report *rep)
{
    struct folder_limits lim = {files, bytes};
    char *err = NULL;
    buf_reset(&t->names);
    if (folder_walk(dir, &lim, take, t, rep, &err) != 0) {
        TAP_OK(0, "walk %s: %s", dir, err);
        free(err);
    }
}

int main(void)
{
    wild("*.c", "a.c", 1);
    wild("*.c", "dir/a.c", 0);
    wild("a?c", "abc", 1);
    wild("a?c", "a/c", 0);
    wild("**/foo", "foo", 1);
    wild("**/foo", "a/b/foo", 1);
    wild("a/**", "a/b/c", 1);
    wild("a/**", "a", 0);
    wild("a/**/b", "a/b", 1);
    wild("a/**/b", "a/x/y/b", 1);
    wild("a**b", "axxb", 1);
    wild("a**b", "ax/xb", 0);
    wild("[a-c]x", "bx", 1);
    wild("[!a-c]x", "bx", 0);
    wild("[!a-c]x", "dx", 1);
    wild("\\*x", "*x", 1);
    wild("\\*x", "ax", 0);
    wild("[", "[", 0);
    /* git's wildmatch stays polynomial on a pattern built to backtrack */
    {
        char text[300], pat[200];
        memset(text, 'a', sizeof text - 1);
        text[sizeof text - 1] = '\0';
        strcpy(pat, "");
        for (int i = 0; i < 30; i++)
            strcat(pat, "*a");
        strcat(pat, "b");
        wild(pat, text, 0);
        strcpy(pat, "");
        for (int i = 0; i < 30; i++)
            strcat(pat, "**/a");
        wild(pat, "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/b", 0);
    }

    rule("*.o\n", "src/x.o", 0, 1);
    rule("*.o\n", "x.c", 0, 0);
    rule("build/\n", "build", 1, 1);
    rule("build/\n", "build", 0, 0);
    rule("build/\n", "a/build", 1, 1);
    rule("/build\n", "a/build", 1, 0);
    rule("/build\n", "build", 0, 1);
    rule("doc/*.txt\n", "doc/a.txt", 0, 1);
    rule("doc/*.txt\n", "x/doc/a.txt", 0, 0);
    rule("doc/*.txt\n", "doc/x/a.txt", 0, 0);
    rule("**/logs\n", "a/b/logs", 1, 1);
    rule("logs/**\n", "logs/a/b", 0, 1);
    rule("*.log\n!keep.log\n", "keep.log", 0, 0);
    rule("*.log\n!keep.log\n", "other.log", 0, 1);
    rule("!keep.log\n*.log\n", "keep.log", 0, 1);
    rule("# comment\n\n\\#hash\n", "#hash", 0, 1);
    rule("# comment\n", "# comment", 0, 0);
    rule("\\!bang\n", "!bang", 0, 1);
    rule("trail   \n", "trail", 0, 1);
    rule("sp\\ \n", "sp ", 0, 1);
    rule("crlf\r\n", "crlf", 0, 1);
    rule("a?c\n", "abc", 0, 1);

    /* Nested files: a deeper file's rules win, and apply only below it. */
    {
        struct gitignore *g = gitignore_new();
        gitignore_add(g, "", "*.txt\n", 6);
        gitignore_add(g, "sub", "!keep.txt\n/only\n", 16);
        TAP_INT(gitignore_match(g, "sub/keep.txt", 0), 0, "nested negation wins below it");
        TAP_INT(gitignore_match(g, "keep.txt", 0), 1, "nested negation not above it");
        TAP_INT(gitignore_match(g, "sub/only", 0), 1, "nested anchored pattern");
        TAP_INT(gitignore_match(g, "sub/x/only", 0), 0, "nested anchored: only there");
        gitignore_leave(g, "sub");
        TAP_INT(gitignore_match(g, "sub/keep.txt", 0), 1, "rules forgotten on leaving");
        gitignore_free(g);
    }

    /* The walk. */
    char tmpl[] = "/tmp/tt_gitignore_XXXXXX";
    char *dir = mkdtemp(tmpl);
    put(dir, ".gitignore", "*.o\nbuild/\n!important.o\n");
    put(dir, "a.c", "int a;\n");
    put(dir, "a.o", "obj");
    put(dir, "important.o", "kept");
    put(dir, "build/out.c", "x");
    put(dir, "b/.gitignore", "*.md\n!README.md\n");
    put(dir, "b/README.md", "readme\n");
    put(dir, "b/notes.md", "notes\n");
    put(dir, "b/c.c", "c\n");
    put(dir, "a.c.d/x", "x\n");
    put(dir, ".git/config", "[core]\n");
    char *bin = xasprintf("%s/bin.dat", dir);
    FILE *f = fopen(bin, "wb"); /* with its NUL */
    fwrite("a\0b", 1, 3, f);
    fclose(f);
    free(bin);
    char *link = xasprintf("%s/link.c", dir);
    TAP_OK(symlink("a.c", link) == 0, "symlink made");
    char *fifo = xasprintf("%s/fifo", dir);
    TAP_OK(mkfifo(fifo, 0600) == 0, "fifo made");

    struct taken t = {BUF_INIT};
    struct folder_report rep;
    walk(dir, 100, 1 << 20, &t, &rep);
    char *want = xasprintf("%s/.gitignore\n%s/a.c\n%s/a.c.d/x\n%s/b/.gitignore\n"
                           "%s/b/README.md\n%s/b/c.c\n%s/important.o\n",
                           dir, dir, dir, dir, dir, dir, dir);
    TAP_STR(buf_str(&t.names), want, "walk: files in git's order, rules honoured");
    free(want);
    const char *l = buf_str(&rep.listing);
    TAP_OK(!strstr(l, ".git/") && strstr(l, "/a.o: ignored") &&
               strstr(l, "/build/: ignored") && strstr(l, "/b/notes.md: ignored") &&
               strstr(l, "/bin.dat: binary") && strstr(l, "/link.c: a symbolic link") &&
               strstr(l, "/fifo: not a regular file"),
           "walk: every left-out entry listed with its reason");
    TAP_INT(rep.files, 7, "walk: files taken");
    TAP_INT(rep.left_out, 6, "walk: entries left out (.git not among them)");
    TAP_INT(rep.truncated, 0, "walk: not over the limit");
    buf_free(&rep.listing);

    /* The file limit: the first 3 in order, the rest listed. */
    walk(dir, 3, 1 << 20, &t, &rep);
    TAP_INT(rep.files, 3, "file limit: 3 taken");
    TAP_OK(rep.truncated && strstr(buf_str(&rep.listing), "b/README.md: over the limit of files"),
           "file limit: the rest listed");
    buf_free(&rep.listing);
    /* The byte limit: .gitignore (26) + a.c (7) fit in 40, a.c.d/x (2) would too, but the
     * walk stops at the first file that does not fit, for a predictable set. */
    walk(dir, 100, 40, &t, &rep);
    TAP_INT(rep.bytes <= 40, 1, "byte limit: bytes within it");
    TAP_OK(rep.truncated && strstr(buf_str(&rep.listing), "over the limit of bytes"),
           "byte limit: the rest listed (%zu files, %zu bytes)", rep.files, rep.bytes);
    buf_free(&rep.listing);
    /* A trailing slash on the folder name is the same folder. */
    char *slashed = xasprintf("%s//", dir);
    walk(slashed, 100, 1 << 20, &t, &rep);
    TAP_OK(strstr(buf_str(&t.names), "//") == NULL, "trailing slashes: clean paths");
    buf_free(&rep.listing);
    /* Not a folder, missing. */
    {
        struct folder_limits lim = {10, 10};
        char *err = NULL;
        char *file = xasprintf("%s/a.c", dir);
        TAP_INT(folder_walk(file, &lim, take, &t, &rep, &err), -1, "a file is not a folder");
        TAP_OK(err && strstr(err, "not a folder"), "message: %s", err ? err : "");
        free(err);
        err = NULL;
        TAP_INT(folder_walk("/nonexistent/x", &lim, take, &t, &rep, &err), -1, "missing");
        TAP_OK(err && strstr(err, "No such file"), "message: %s", err ? err : "");
        free(err);
        free(file);
    }
    /* Many left out: the listing names 50 and counts the rest. */
    {
        char *many = xasprintf("%s/many", dir);
        for (int i = 0; i < 120; i++) {
            char rel[32];
            snprintf(rel, sizeof rel, "f%03d.c", i);
            put(many, rel, "x");
        }
        walk(many, 10, 1 << 20, &t, &rep);
        TAP_OK(strstr(buf_str(&rep.listing), "... and 60 more"), "listing bounded: %s",
               strrchr(buf_str(&rep.listing), '.') ? "" : "");
        buf_free(&rep.listing);
        free(many);
    }
    /* A folder inside a git work tree: the .gitignore files above it count too. */
    {
        put(dir, "repo/.git/HEAD", "ref\n");
        put(dir, "repo/.gitignore", "*.tmp\n/src/gen/\n");
        put(dir, "repo/src/.gitignore", "!keep.tmp\n");
        put(dir, "repo/src/lib/a.c", "a\n");
        put(dir, "repo/src/lib/b.tmp", "b\n");
        put(dir, "repo/src/lib/keep.tmp", "k\n");
        put(dir, "repo/src/gen/x.c", "x\n");
        char *lib = xasprintf("%s/repo/src/lib", dir);
        walk(lib, 10, 1 << 20, &t, &rep);
        char *want2 = xasprintf("%s/a.c\n%s/keep.tmp\n", lib, lib);
        TAP_STR(buf_str(&t.names), want2, "rules above the folder, up to the work tree's top");
        buf_free(&rep.listing);
        char *src = xasprintf("%s/repo/src", dir);
        walk(src, 10, 1 << 20, &t, &rep);
        TAP_OK(strstr(buf_str(&rep.listing), "src/gen/: ignored") != NULL,
               "an anchored rule above");
        buf_free(&rep.listing);
        /* outside a work tree nothing above counts */
        char *nogit = xasprintf("%s/repo/.git", dir);
        char *cmd = xasprintf("rm -rf '%s' '%s/.git'", nogit, dir);
        TAP_INT(system(cmd), 0, "no work tree");
        walk(lib, 10, 1 << 20, &t, &rep);
        TAP_OK(strstr(buf_str(&t.names), "b.tmp") != NULL, "no .git above: no rules above");
        buf_free(&rep.listing);
        free(cmd);
        free(nogit);
        free(src);
        free(want2);
        free(lib);
    }
    buf_free(&t.names);
    char *rm = xasprintf("rm -rf '%s'", dir);
    TAP_INT(system(rm), 0, "cleanup");
    free(rm);
    free(slashed);
    free(link);
    free(fifo);
    return tap_done();
}
