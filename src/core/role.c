/* role.c - named presets: user files, [role NAME] sections, built-ins. */
#include "config.h"
#include "core/role.h"

#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/ini.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The settings a role may make: the request's, not where it goes or with which key. */
static const char *const role_keys[] = {"model", "api", "profile", "system", "temperature",
                                         "top_p", "seed", "reasoning_effort", "max_tokens",
                                         "max_tokens_field", "extra_body", "mcp", NULL};

/* 1 when k is one of the n strings of v. */
static int role_in(const char *const *v, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], k) == 0)
            return 1;
    return 0;
}

static int role_key_ok(const char *k)
{
    return role_in(role_keys, TT_ARRAY_LEN(role_keys) - 1, k);
}

static int role_name_ok(const char *n)
{
    if (!*n || *n == '.' || strlen(n) > 64)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

void role_free(struct role *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->keys[i]);
        free(r->values[i]);
    }
    free(r->keys);
    free(r->values);
    free(r->lines);
    free(r->name);
    free(r->path);
    free(r->prompt);
    free(r->profile);
    memset(r, 0, sizeof *r);
}

/* One "key: value" or "key = value" line (trimmed, not empty) at lineno. */
static int role_setting(struct role *r, char *line, int lineno, const char *sep,
                        struct buf *err)
{
    size_t k = strcspn(line, sep);
    if (!line[k]) {
        buf_printf(err, "%s:%d: expected 'key: value', got '%.40s'", r->path, lineno, line);
        return -1;
    }
    line[k] = '\0';
    char *key = util_trim(line), *value = util_trim(line + k + 1);
    if (!ini_whole_value(key))
        ini_cut_comment(value);
    ini_unquote(value);
    if (!role_key_ok(key)) {
        buf_printf(err, "%s:%d: a role cannot set '%.40s' (it may set:", r->path, lineno, key);
        for (size_t i = 0; role_keys[i]; i++)
            buf_printf(err, " %s", role_keys[i]);
        buf_appendc(err, ')');
        return -1;
    }
    if (strcmp(key, "system") == 0) {
        free(r->prompt);
        r->prompt = xstrdup(value);
    } else if (strcmp(key, "profile") == 0) {
        free(r->profile);
        r->profile = *value ? xstrdup(value) : NULL;
    } else {
        r->keys = xrealloc(r->keys, (r->n + 1) * sizeof *r->keys);
        r->values = xrealloc(r->values, (r->n + 1) * sizeof *r->values);
        r->lines = xrealloc(r->lines, (r->n + 1) * sizeof *r->lines);
        r->keys[r->n] = xstrdup(key);
        r->values[r->n] = xstrdup(value);
        r->lines[r->n++] = lineno;
    }
    return 0;
}

/* 1 when a line of text is "---" (blanks around it allowed), as closes front matter. */
static int role_has_closer(const char *text)
{
    for (const char *q = text; *q;) {
        size_t n = strcspn(q, "\n"), b = strspn(q, " \t");
        size_t end = n;
        while (end > b && (q[end - 1] == '\r' || q[end - 1] == ' ' || q[end - 1] == '\t'))
            end--;
        if (end - b == 3 && strncmp(q + b, "---", 3) == 0)
            return 1;
        q += n + (q[n] != '\0');
    }
    return 0;
}

/* A role file: optional front matter between "---" lines, then the prompt. */
static int role_read_file(struct role *r, struct buf *err)
{
    size_t len;
    char *text = util_read_file(r->path, &len, 1u << 20);
    if (!text) {
        buf_printf(err, "%s: %s", r->path, errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
        return -1;
    }
    if (memchr(text, '\0', len)) {
        buf_printf(err, "%s: not a text file", r->path);
        free(text);
        return -1;
    }
    char *body = text;
    int rc = 0;
    if (strncmp(text, "---", 3) == 0 && (text[3] == '\n' || text[3] == '\r')) {
        char *p = text + strcspn(text, "\n") + (text[strcspn(text, "\n")] != 0);
        int lineno = 1, closed = 0;
        /* no closing line at all: say so first, not that the prompt is not "key: value" */
        int closer = role_has_closer(p);
        if (!closer)
            rc = -1;
        while (*p && rc == 0) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            lineno++;
            char *line = util_trim(p);
            p = nl ? nl + 1 : p + strlen(p);
            if (strcmp(line, "---") == 0) {
                closed = 1;
                break;
            }
            if (*line && *line != '#')
                rc = role_setting(r, line, lineno, ":=", err);
        }
        if (!closer || (rc == 0 && !closed)) {
            buf_printf(err, "%s:1: the front matter opened with '---' is never closed by "
                            "another '---' line", r->path);
            rc = -1;
        }
        body = p;
    }
    if (rc == 0) {
        char *b = util_trim(body);
        if (*b) {
            free(r->prompt);
            r->prompt = xstrdup(b);
        }
    }
    free(text);
    return rc;
}

/* The config file's "[role NAME]" headers, one by one: the name of the next after *pos. */
static char *role_next_section(char **pos, int *lineno)
{
    while (**pos) {
        char *line = *pos, *nl = strchr(line, '\n');
        *pos = nl ? nl + 1 : line + strlen(line);
        if (nl)
            *nl = '\0';
        ++*lineno;
        line = util_trim(line);
        char *end = strrchr(line, ']');
        if (line[0] == '[' && end && strncmp(line + 1, "role ", 5) == 0) {
            *end = '\0';
            char *name = util_trim(line + 6);
            ini_unquote(name);
            return name;
        }
    }
    return NULL;
}

/* The [role name] section of the config file: 0 found, 1 not, -1 with err set. */
static int role_read_section(struct role *r, const char *cfgpath, struct buf *err)
{
    size_t len;
    char *text = cfgpath ? util_read_file(cfgpath, &len, 4u << 20) : NULL;
    if (!text)
        return 1;
    char *pos = text, *name;
    int lineno = 0, rc = 1;
    while (rc == 1 && (name = role_next_section(&pos, &lineno)))
        if (strcmp(name, r->name) == 0)
            rc = 0;
    if (rc == 0) {
        r->path = xstrdup(cfgpath);
        r->source = "config";
        while (*pos && rc == 0 && pos[strspn(pos, " \t")] != '[') {
            char *line = pos, *nl = strchr(line, '\n');
            pos = nl ? nl + 1 : line + strlen(line);
            if (nl)
                *nl = '\0';
            lineno++;
            line = util_trim(line);
            if (*line && *line != '#' && *line != ';')
                rc = role_setting(r, line, lineno, "=", err);
        }
    }
    free(text);
    return rc;
}

static char *role_user_dir(void)
{
    char *cfg = conf_dir("config");
    char *d = xasprintf("%s/roles", cfg);
    free(cfg);
    return d;
}

/* Make what err got from offset from on harmless to print: it quotes text from a file. */
static int role_clean(struct buf *err, size_t from, int rc)
{
    if (rc < 0 && err->len > from) {
        struct buf t = BUF_INIT;
        utf8_sanitize(&t, err->data + from, err->len - from);
        err->len = from;
        buf_append(err, t.data, t.len);
        buf_free(&t);
    }
    return rc;
}

static int role_find(struct role *r, const char *name, const char *cfgpath, struct buf *err);

int role_load(struct role *r, const char *name, const char *cfgpath, struct buf *err)
{
    size_t from = err->len;
    return role_clean(err, from, role_find(r, name, cfgpath, err));
}

static int role_find(struct role *r, const char *name, const char *cfgpath, struct buf *err)
{
    memset(r, 0, sizeof *r);
    r->name = xstrdup(name);
    if (role_name_ok(name)) {
        char *dir = role_user_dir();
        char *user = xasprintf("%s/%s.md", dir, name);
        free(dir);
        if (access(user, F_OK) == 0) {
            r->path = user;
            r->source = "user";
            return role_read_file(r, err);
        }
        free(user);
        int rc = role_read_section(r, cfgpath, err);
        if (rc <= 0)
            return rc;
        char *file = xasprintf("roles/%s.md", name);
        r->path = util_data_path(file, NULL);
        free(file);
        if (r->path) {
            r->source = "built-in";
            return role_read_file(r, err);
        }
    }
    buf_printf(err, "unknown role '%.64s' (known:", name);
    char **v = role_names(cfgpath, NULL);
    for (size_t i = 0; v && v[i]; i++)
        buf_printf(err, " %s", v[i]);
    buf_appends(err, v && v[0] ? ")" : " none)");
    util_strv_free(v);
    return -1;
}

int role_sets(const struct role *r, const char *key)
{
    return role_in((const char *const *)r->keys, r->n, key);
}

static int role_apply_keep(struct conf *c, const struct role *r, struct buf *err, int keep)
{
    for (size_t i = 0; i < r->n; i++) {
        if (keep && conf_given(c, r->keys[i]))
            continue;
        struct buf e = BUF_INIT;
        if (conf_set(c, r->keys[i], r->values[i], &e) < 0) {
            size_t from = err->len;
            buf_printf(err, "%s:%d: %s", r->path, r->lines[i], buf_str(&e));
            buf_free(&e);
            return role_clean(err, from, -1);
        }
        buf_free(&e);
    }
    if (r->prompt && !(keep && conf_given(c, "system"))) {
        free(c->system);
        c->system = xstrdup(r->prompt);
    }
    free(c->role);
    c->role = xstrdup(r->name);
    return 0;
}

int role_apply(struct conf *c, const struct role *r, struct buf *err)
{
    return role_apply_keep(c, r, err, 0);
}

int role_apply_over(struct conf *c, const struct role *r, struct buf *err)
{
    return role_apply_keep(c, r, err, 1);
}

static int role_drop_keep(struct conf *c, struct buf *err, int keep);

int role_drop(struct conf *c, struct buf *err)
{
    return role_drop_keep(c, err, 0);
}

int role_drop_over(struct conf *c, struct buf *err)
{
    return role_drop_keep(c, err, 1);
}

static int role_drop_keep(struct conf *c, struct buf *err, int keep)
{
    struct conf p;
    conf_defaults(&p);
    struct buf warn = BUF_INIT;
    int rc = c->path ? conf_load(&p, c->path, c->profile, err, &warn) : 0;
    buf_free(&warn);
    if (rc >= 0) {
        conf_apply_env(&p);
        for (size_t i = 0; role_keys[i]; i++)
            if (strcmp(role_keys[i], "api") != 0 && strcmp(role_keys[i], "profile") != 0 &&
                !(keep && conf_given(c, role_keys[i])))
                conf_copy(c, &p, role_keys[i]);
        free(c->role);
        c->role = NULL;
    }
    conf_free(&p);
    return rc < 0 ? -1 : 0;
}

/* Add name (from source) unless it is there. */
static void role_add(char ***v, const char ***src, size_t *n, const char *name,
                     const char *source)
{
    if (!role_name_ok(name))
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], name) == 0)
            return;
    *v = xrealloc(*v, (*n + 2) * sizeof **v);
    *src = xrealloc(*src, (*n + 2) * sizeof **src);
    (*src)[*n] = source;
    (*v)[(*n)++] = xstrdup(name);
    (*v)[*n] = NULL;
}

/* The NAME.md files of dir. */
static void role_add_dir(char ***v, const char ***src, size_t *n, const char *dir,
                         const char *source)
{
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".md") == 0) {
            char *name = xstrndup(e->d_name, l - 3);
            role_add(v, src, n, name, source);
            free(name);
        }
    }
    if (d)
        closedir(d);
}

static int role_cmp_idx(const void *a, const void *b, void *v)
{
    char **names = v;
    return strcmp(names[*(const size_t *)a], names[*(const size_t *)b]);
}

char **role_names(const char *cfgpath, const char ***sources)
{
    char **v = NULL;
    const char **src = NULL;
    size_t n = 0;
    char *dir = role_user_dir();
    role_add_dir(&v, &src, &n, dir, "user");
    free(dir);
    size_t len;
    char *text = cfgpath ? util_read_file(cfgpath, &len, 4u << 20) : NULL;
    char *pos = text, *name;
    int lineno = 0;
    while (text && (name = role_next_section(&pos, &lineno)))
        role_add(&v, &src, &n, name, "config");
    free(text);
    char *builtin = util_data_path("roles", NULL);
    role_add_dir(&v, &src, &n, builtin, "built-in");
    free(builtin);
    if (!v) {
        v = xcalloc(1, sizeof *v);
        src = xcalloc(1, sizeof *src);
    }
    /* sort names and sources together */
    size_t *idx = xcalloc(n ? n : 1, sizeof *idx);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, role_cmp_idx, v);
    char **sv = xcalloc(n + 1, sizeof *sv);
    const char **ss = xcalloc(n + 1, sizeof *ss);
    for (size_t i = 0; i < n; i++) {
        sv[i] = v[idx[i]];
        ss[i] = src[idx[i]];
    }
    free(idx);
    free(v);
    free(src);
    if (sources)
        *sources = ss;
    else
        free(ss);
    return sv;
}

