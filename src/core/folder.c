/* folder.c - the files of a folder attachment (folder.h). */
#include "config.h"
#include "core/folder.h"

#include "base/util.h"
#include "base/xmalloc.h"
#include "core/gitignore.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct folder_walk {
    const struct folder_limits *lim;
    folder_take_fn take;
    void *ud;
    struct folder_report *rep;
    struct gitignore *ig;
    const char *top;  /* the folder as given, without trailing "/" */
    size_t scanned;
    int full;         /* the limit is reached */
    const char *full_why;
    int in_git;       /* the folder is in a git work tree: its .gitignore files decide */
};

struct folder_entry {
    char *name;
    char *key; /* name, plus "/" for a folder: the sort key of git's order */
    int is_dir;
};

static void folder_left_out(struct folder_walk *w, const char *path, const char *why)
{
    struct folder_report *r = w->rep;
    if (r->left_out++ < FOLDER_LIST_MAX)
        buf_printf(&r->listing, "%s: %s\n", path, why);
}

static int folder_cmp(const void *a, const void *b)
{
    return strcmp(((const struct folder_entry *)a)->key, ((const struct folder_entry *)b)->key);
}

/* The path shown for rel (below the top folder). */
static char *folder_show(const struct folder_walk *w, const char *rel)
{
    return xasprintf("%s%s%s", w->top, strcmp(w->top, "/") ? "/" : "", rel);
}

static void folder_file(struct folder_walk *w, const char *full, const char *show,
                        const struct stat *st)
{
    const struct folder_limits *lim = w->lim;
    if (!w->full && w->rep->files >= lim->max_files) {
        w->full = 1;
        w->full_why = "over the limit of files (attach_max_files)";
    }
    if (!w->full && (size_t)st->st_size > lim->max_bytes - w->rep->bytes) {
        if ((size_t)st->st_size > lim->max_bytes) { /* alone too large: the others may fit */
            folder_left_out(w, show, "larger than the byte limit (attach_max_bytes)");
            return;
        }
        w->full = 1;
        w->full_why = "over the limit of bytes (attach_max_bytes)";
    }
    if (w->full) {
        w->rep->truncated = 1;
        folder_left_out(w, show, w->full_why);
        return;
    }
    size_t len = 0;
    char *data = util_read_file(full, &len, lim->max_bytes - w->rep->bytes);
    if (!data) {
        char why[160];
        snprintf(why, sizeof why, "unreadable (%s)",
                 errno == EFBIG ? "it grew past the limit" : strerror(errno));
        folder_left_out(w, show, why);
        return;
    }
    const char *why = NULL;
    if (w->take(w->ud, show, data, len, &why) == 0) {
        w->rep->files++;
        w->rep->bytes += len;
    } else {
        folder_left_out(w, show, why ? why : "not text");
    }
    free(data);
}

/* Read the .gitignore of folder full (rel below the top) into the rules. */
static void folder_rules(struct folder_walk *w, const char *full, const char *rel)
{
    char *path = xasprintf("%s/.gitignore", full);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        size_t len = 0;
        char *text = util_read_file(path, &len, 1 << 20);
        if (text)
            gitignore_add(w->ig, rel, text, len);
        free(text);
    }
    free(path);
}

static void folder_dir(struct folder_walk *w, const char *full, const char *rel, int depth)
{
    DIR *d = opendir(full);
    if (!d) {
        char *show = folder_show(w, rel);
        char why[160];
        snprintf(why, sizeof why, "unreadable (%s)", strerror(errno));
        folder_left_out(w, show, why);
        free(show);
        return;
    }
    folder_rules(w, full, rel);
    struct folder_entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (++w->scanned > FOLDER_SCAN_MAX)
            break;
        XGROW(v, n + 1, cap);
        v[n].name = xstrdup(e->d_name);
        v[n].is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN) {
            char *p = xasprintf("%s/%s", full, e->d_name);
            struct stat st;
            v[n].is_dir = lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
            free(p);
        }
        v[n].key = xasprintf("%s%s", e->d_name, v[n].is_dir ? "/" : "");
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, folder_cmp);
    for (size_t i = 0; i < n; i++) {
        char *crel = *rel ? xasprintf("%s/%s", rel, v[i].name) : xstrdup(v[i].name);
        char *cfull = xasprintf("%s/%s", full, v[i].name);
        char *show = folder_show(w, crel);
        struct stat st;
        if (lstat(cfull, &st) != 0) {
            folder_left_out(w, show, "vanished");
        } else if (!strcmp(v[i].name, ".git")) {
            /* git's own folder (or a worktree's .git file): always out, never listed */
        } else if (!w->in_git && v[i].name[0] == '.') {
            /* outside a git work tree no .gitignore keeps .env, .ssh/ or tokterm's own config
             * and history out (a home folder attached): hidden entries are left out, as rg
             * does; until 2026-12 they were sent */
            w->rep->ignored++;
            folder_left_out(w, show, "hidden, outside a git work tree (attach it by name)");
        } else if (S_ISDIR(st.st_mode) && gitignore_match(w->ig, crel, 1)) {
            w->rep->ignored++;
            char *dshow = xasprintf("%s/", show);
            folder_left_out(w, dshow, "ignored (.gitignore)");
            free(dshow);
        } else if (S_ISDIR(st.st_mode)) {
            if (depth + 1 >= FOLDER_DEPTH_MAX)
                folder_left_out(w, show, "too deep");
            else
                folder_dir(w, cfull, crel, depth + 1);
        } else if (gitignore_match(w->ig, crel, 0)) {
            w->rep->ignored++;
            folder_left_out(w, show, "ignored (.gitignore)");
        } else if (S_ISLNK(st.st_mode)) {
            folder_left_out(w, show, "a symbolic link (not followed)");
        } else if (!S_ISREG(st.st_mode)) {
            folder_left_out(w, show, "not a regular file");
        } else {
            folder_file(w, cfull, show, &st);
        }
        free(show);
        free(cfull);
        free(crel);
        free(v[i].name);
        free(v[i].key);
    }
    free(v);
    if (w->scanned > FOLDER_SCAN_MAX && !*rel) {
        w->rep->truncated = 1;
        buf_printf(&w->rep->listing, "(the walk stopped after %d entries)\n", FOLDER_SCAN_MAX);
    }
    gitignore_leave(w->ig, rel);
}

/* The .gitignore files above the folder, up to the top of its git work tree (a folder that
 * holds .git): git applies them too. Outermost first. Sets w->in_git. */
static void folder_rules_above(struct folder_walk *w)
{
    char *real = realpath(w->top, NULL);
    if (!real)
        return;
    char *ups[FOLDER_DEPTH_MAX];
    size_t n = 0;
    int found = 0;
    char *cur = xstrdup(real);
    for (;;) {
        char *git = xasprintf("%s/.git", cur);
        struct stat st;
        found = lstat(git, &st) == 0;
        free(git);
        if (found || n == FOLDER_DEPTH_MAX || !strcmp(cur, "/")) {
            free(cur);
            break;
        }
        char *slash = strrchr(cur, '/');
        if (slash == cur)
            slash[1] = '\0';
        else
            *slash = '\0';
        ups[n++] = xstrdup(cur); /* a parent of the folder */
    }
    /* ups[n-1] is the work tree's top when found */
    w->in_git = found;
    for (size_t i = n; found && i-- > 0;) {
        const char *lead = real + strlen(ups[i]) + (strcmp(ups[i], "/") ? 1 : 0);
        char *path = xasprintf("%s/.gitignore", ups[i]);
        struct stat st;
        size_t len = 0;
        char *text = lstat(path, &st) == 0 && S_ISREG(st.st_mode)
                         ? util_read_file(path, &len, 1 << 20) : NULL;
        if (text)
            gitignore_add_above(w->ig, lead, text, len);
        free(text);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(ups[i]);
    free(real);
}

int folder_walk(const char *dir, const struct folder_limits *lim, folder_take_fn take, void *ud,
                struct folder_report *rep, char **err)
{
    memset(rep, 0, sizeof *rep);
    struct stat st;
    if (stat(dir, &st) != 0) {
        *err = xasprintf("%s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        *err = xasprintf("%s: not a folder", dir);
        return -1;
    }
    char *top = xstrdup(dir);
    size_t k = strlen(top);
    while (k > 1 && top[k - 1] == '/')
        top[--k] = '\0';
    struct folder_walk w = {lim, take, ud, rep, gitignore_new(), top, 0, 0, NULL, 0};
    folder_rules_above(&w);
    folder_dir(&w, top, "", 0);
    if (rep->left_out > FOLDER_LIST_MAX)
        buf_printf(&rep->listing, "... and %zu more\n", rep->left_out - FOLDER_LIST_MAX);
    gitignore_free(w.ig);
    free(top);
    return 0;
}
