/* test_attach_ext.c - the pieces of folder and URL attachments that need no network: a path
 * typed after /attach or pasted (quotes, backslash escapes, ~, file:// URLs; words and
 * missing files are not paths), a folder through attach_folder (text files as entries, the
 * left-out note for the model and the user, limits), and URL refusals that never reach the
 * network (schemes, credentials). */
#include "config.h"
#include "core/attach_ext.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
}

static void unq(const char *in, const char *want)
{
    char *got = attach_unquote(in);
    TAP_STR(got, want, in);
    free(got);
}

static void pasted(const char *in, const char *want, const char *name)
{
    char *got = attach_pasted_path(in);
    TAP_STR(got, want, name);
    free(got);
}

int main(void)
{
    char tmpl[] = "/tmp/tt_attach_ext_XXXXXX";
    char *dir = mkdtemp(tmpl);
    setenv("HOME", dir, 1);
    unq("plain.txt", "plain.txt");
    unq("  spaced.txt \n", "spaced.txt");
    unq("'my file.txt'", "my file.txt");
    unq("\"my file.txt\"", "my file.txt");
    unq("my\\ file.txt", "my file.txt");
    char *home_file = xasprintf("%s/x.c", dir);
    unq("~/x.c", home_file);

    char *sub = xasprintf("%s/a dir", dir);
    mkdir(sub, 0700);
    char *file = xasprintf("%s/a dir/f.py", dir);
    put(file, "print(1)\n", 9);
    char *q1 = xasprintf("'%s'", file);
    char *q2 = xasprintf("%s/a\\ dir/f.py\n", dir);
    char *q3 = xasprintf("file://%s/a%%20dir/f.py", dir);
    char *words = xasprintf("look at %s", file);
    pasted(q1, file, "pasted: a quoted path");
    pasted(q2, file, "pasted: backslash escapes and a newline after");
    pasted(q3, file, "pasted: a file:// URL, percent-decoded");
    char *qsub = xasprintf("\"%s\"", sub);
    pasted(qsub, sub, "pasted: a folder");
    pasted(sub, NULL, "pasted: a path with an unescaped blank is words");
    pasted(words, NULL, "pasted: words around a path are text");
    pasted("/nonexistent/file.txt", NULL, "pasted: a missing path is text");
    pasted("hello", NULL, "pasted: a word is text");
    pasted("f.py", NULL, "pasted: a bare name is text (relative paths need ./)");
    pasted("/dev/null", NULL, "pasted: not a file or folder");
    pasted("line one\nline two", NULL, "pasted: two lines are text");

    /* a folder: two text files, a binary one, an image left out; the note for the model */
    char *f2 = xasprintf("%s/a dir/b.bin", dir);
    put(f2, "\0\1\2", 3);
    char *f3 = xasprintf("%s/a dir/c.png", dir);
    put(f3, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\1\0\0\0\1\b\2\0\0\0", 29);
    char *f4 = xasprintf("%s/a dir/d.txt", dir);
    put(f4, "dee\n", 4);
    struct attach_list l = {0};
    struct buf warn = BUF_INIT;
    char *err = NULL;
    TAP_INT(attach_folder(&l, sub, &warn, &err), 0, "folder: attached");
    TAP_INT(l.n, 3, "folder: two files and the left-out note");
    if (l.n == 3) {
        TAP_OK(strstr(l.v[0].name, "/a dir/d.txt") && strstr(l.v[1].name, "/a dir/f.py"),
               "folder: files in order (%s, %s)", l.v[0].name, l.v[1].name);
        TAP_OK(strstr(l.v[2].name, "(left out)") &&
                   strstr((char *)l.v[2].data, "b.bin: binary") &&
                   strstr((char *)l.v[2].data, "c.png: an image"),
               "folder: the model is told what was left out and why");
    }
    TAP_OK(strstr(buf_str(&warn), "2 files") && strstr(buf_str(&warn), "2 left out"),
           "folder: the user is told");
    attach_list_free(&l);
    buf_reset(&warn);
    /* nothing to take: an error that lists why, the list unchanged */
    char *bin = xasprintf("%s/bin", dir);
    mkdir(bin, 0700);
    char *f5 = xasprintf("%s/bin/x", dir);
    put(f5, "\0", 1);
    TAP_INT(attach_folder(&l, bin, &warn, &err), -1, "folder without text: refused");
    TAP_OK(err && strstr(err, "no text file to attach") && strstr(err, "x: binary"),
           "folder without text: says why");
    TAP_INT(l.n, 0, "folder without text: nothing attached");
    free(err);
    err = NULL;
    /* URLs refused before any request */
    TAP_INT(attach_url(&l, "http://u:p@127.0.0.1:9/x", &err, NULL, NULL), -1,
            "URL with credentials");
    TAP_OK(err && strstr(err, "user name or password"), "... says so (%s)", err ? err : "");
    free(err);
    err = NULL;
    TAP_INT(attach_any(&l, "ftp://x/y", NULL, &err, NULL, NULL), -1, "ftp:// is a missing file");
    free(err);

    buf_free(&warn);
    char *rm = xasprintf("rm -rf '%s'", dir);
    TAP_INT(system(rm), 0, "cleanup");
    free(rm);
    free(home_file); free(sub); free(file); free(q1); free(q2); free(q3); free(words);
    free(qsub); free(f2); free(f3); free(f4); free(bin); free(f5);
    return tap_done();
}
