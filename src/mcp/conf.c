/* conf.c - [mcp NAME] sections of the config file (mcp.h). core/conf.c skips them. */
#include "config.h"
#include "mcp/mcp_int.h"

#include "base/util.h"
#include "base/xmalloc.h"
#include "text/ini.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MCP_CONF_MAX (1u << 20) /* the config file is read whole; core/conf.c caps it so too */

/* Words of s as a shell would split them (no expansion): blanks separate, '...' and "..."
 * quote, a backslash escapes the next character (outside single quotes). NULL-terminated
 * array of new strings; NULL with err set for an unfinished quote. */
static char **mcp_words(const char *s, struct buf *err)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct buf w = BUF_INIT;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        buf_reset(&w);
        char q = 0;
        for (; *p && (q || (*p != ' ' && *p != '\t')); p++) {
            if (q == '\'' ? *p == '\'' : q == '"' ? *p == '"' : 0)
                q = 0;
            else if (!q && (*p == '\'' || *p == '"'))
                q = *p;
            else if (*p == '\\' && q != '\'' && p[1])
                buf_appendc(&w, *++p);
            else
                buf_appendc(&w, *p);
        }
        if (q) {
            buf_printf(err, "an unfinished %c quote", q);
            for (size_t i = 0; i < n; i++)
                free(v[i]);
            free(v);
            buf_free(&w);
            return NULL;
        }
        XGROW(v, n + 2, cap);
        v[n++] = xstrndup(w.data ? w.data : "", w.len);
    }
    XGROW(v, n + 1, cap);
    v[n] = NULL;
    buf_free(&w);
    return v;
}

static void mcp_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) {
        util_wipe(v[i], strlen(v[i]));
        free(v[i]);
    }
    free(v);
}

static size_t mcp_strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* v with the words of w appended (w freed). */
static char **mcp_strv_join(char **v, char **w)
{
    size_t a = mcp_strv_len(v), b = mcp_strv_len(w);
    v = xrealloc(v, (a + b + 1) * sizeof *v);
    memcpy(v + a, w, b * sizeof *w);
    v[a + b] = NULL;
    free(w);
    return v;
}

/* "A: x; B: y" split at ';' into trimmed non-empty pieces. */
static char **mcp_headers_split(const char *s, struct buf *err, const char *what)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    char *copy = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        t = util_trim(t);
        if (!*t)
            continue;
        char *colon = strchr(t, ':');
        if (!colon || colon == t) {
            buf_printf(err, "%s must be 'Name: value' pieces separated by ';'", what);
            mcp_strv_free(v);
            free(copy);
            return NULL;
        }
        XGROW(v, n + 2, cap);
        v[n++] = xstrdup(t);
        v[n] = NULL;
    }
    free(copy);
    if (!v)
        v = xcalloc(1, sizeof *v);
    return v;
}

struct mcp_conf_reader {
    const char *path;
    struct mcp_server_conf *v;
    int n;
    size_t cap;
    struct mcp_server_conf *cur; /* the section being read, NULL outside [mcp ...] */
    struct buf *err;
};

static int mcp_conf_fail(struct mcp_conf_reader *r, int lineno, const char *key,
                         const struct buf *why)
{
    buf_printf(r->err, "%s:%d: [mcp %s] %s: %s", r->path, lineno, r->cur ? r->cur->name : "?",
               key, why->data ? why->data : "bad value");
    return -1;
}

static int mcp_conf_pair(struct mcp_conf_reader *r, struct ini_line *l)
{
    struct mcp_server_conf *c = r->cur;
    const char *k = l->key;
    char *val = l->value;
    size_t vl = strlen(val);
    if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0] &&
        strcmp(k, "args") != 0 && strcmp(k, "command") != 0 && strcmp(k, "env") != 0) {
        val[vl - 1] = '\0';
        val++;
    }
    struct buf why = BUF_INIT;
    int rc = 0;
    if (strcmp(k, "command") == 0 || strcmp(k, "args") == 0 || strcmp(k, "env") == 0) {
        char **w = mcp_words(val, &why);
        if (!w)
            rc = -1;
        else if (strcmp(k, "env") == 0) {
            for (size_t i = 0; w[i] && rc == 0; i++)
                if (!strchr(w[i], '=') || w[i][0] == '=') {
                    buf_printf(&why, "each word must be NAME=value ('%.40s' is not)", w[i]);
                    rc = -1;
                }
            if (rc == 0)
                c->env = mcp_strv_join(c->env, w);
            else
                mcp_strv_free(w);
        } else if (strcmp(k, "command") == 0) {
            if (!w[0]) {
                buf_appends(&why, "empty");
                rc = -1;
                mcp_strv_free(w);
            } else { /* the command's words go before any args given already */
                char **rest = c->argv;
                c->argv = mcp_strv_join(w, rest ? rest : xcalloc(1, sizeof *rest));
            }
        } else
            c->argv = mcp_strv_join(c->argv, w);
    } else if (strcmp(k, "cwd") == 0) {
        free(c->cwd);
        c->cwd = xstrdup(val);
    } else if (strcmp(k, "allow") == 0) {
        free(c->allow);
        c->allow = xstrdup(val);
    } else if (strcmp(k, "url") == 0) {
        if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0) {
            buf_appends(&why, "must be an http:// or https:// URL");
            rc = -1;
        } else {
            free(c->url);
            c->url = xstrdup(val);
        }
    } else if (strcmp(k, "headers") == 0) {
        char **h = mcp_headers_split(val, &why, "headers");
        if (!h)
            rc = -1;
        else
            c->headers = mcp_strv_join(c->headers, h);
    } else if (strcmp(k, "key_env") == 0 || strcmp(k, "api_key_env") == 0) {
        free(c->key_env);
        c->key_env = xstrdup(val);
    } else if (strcmp(k, "key_cmd") == 0 || strcmp(k, "api_key_cmd") == 0) {
        free(c->key_cmd);
        c->key_cmd = xstrdup(val);
    } else if (strcmp(k, "timeout") == 0) {
        char *end;
        errno = 0;
        double t = strtod(val, &end);
        if (errno || end == val || *end || !(t > 0 && t <= 86400)) {
            buf_appends(&why, "must be a number of seconds from 0 to 86400 (0 excluded)");
            rc = -1;
        } else
            c->timeout = t;
    } else if (strcmp(k, "max_result_mb") == 0) {
        char *end;
        errno = 0;
        long m = strtol(val, &end, 10);
        if (errno || end == val || *end || m < 1 || m > 4096) {
            buf_appends(&why, "must be a whole number of MiB from 1 to 4096");
            rc = -1;
        } else
            c->max_result_mb = m;
    } else {
        buf_printf(&why, "unknown key (known: command, args, env, cwd, url, headers, key_env, "
                         "key_cmd, timeout, max_result_mb, allow)");
        rc = -1;
    }
    if (rc)
        mcp_conf_fail(r, l->lineno, k, &why);
    buf_free(&why);
    return rc;
}

static int mcp_conf_line(void *ud, struct ini_line *l)
{
    struct mcp_conf_reader *r = ud;
    if (l->type == INI_ERROR)
        return 0; /* core/conf.c reports malformed lines */
    if (l->type == INI_SECTION) {
        r->cur = NULL;
        if (strncmp(l->section, "mcp ", 4) != 0)
            return 0;
        char *name = util_trim(l->section + 4);
        int ok = *name && strlen(name) <= 64;
        for (const char *p = name; *p && ok; p++)
            ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                 (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
        if (!ok) {
            buf_printf(r->err, "%s:%d: [mcp NAME]: a name is 1 to 64 letters, digits, '_' or "
                               "'-' (no '.': tools are called SERVER.TOOL)", r->path, l->lineno);
            return -1;
        }
        for (int i = 0; i < r->n; i++)
            if (strcmp(r->v[i].name, name) == 0) {
                buf_printf(r->err, "%s:%d: [mcp %s] given twice (first at line %d)", r->path,
                           l->lineno, name, r->v[i].line);
                return -1;
            }
        XGROW(r->v, (size_t)r->n + 1, r->cap);
        r->cur = &r->v[r->n++];
        memset(r->cur, 0, sizeof *r->cur);
        r->cur->name = xstrdup(name);
        r->cur->timeout = 60;
        r->cur->max_result_mb = 16;
        r->cur->line = l->lineno;
        return 0;
    }
    return r->cur ? mcp_conf_pair(r, l) : 0;
}

int mcp_conf_load(const char *path, struct mcp_server_conf **out, struct buf *err)
{
    *out = NULL;
    if (!path)
        return 0;
    size_t len = 0;
    char *text = util_read_file(path, &len, MCP_CONF_MAX);
    if (!text)
        return 0;
    struct mcp_conf_reader r = {.path = path, .err = err};
    int rc = ini_parse(text, len, INI_INLINE_COMMENTS, mcp_conf_line, &r, NULL);
    util_wipe(text, len);
    free(text);
    for (int i = 0; rc == 0 && i < r.n; i++) {
        struct mcp_server_conf *c = &r.v[i];
        if (!!c->argv == !!c->url) {
            buf_printf(err, "%s:%d: [mcp %s] needs either command (stdio) or url (HTTP)", path,
                       c->line, c->name);
            rc = -1;
        }
    }
    if (rc > 0 || rc < 0) {
        mcp_conf_free(r.v, r.n);
        return -1;
    }
    *out = r.v;
    return r.n;
}

static char **mcp_strv_dup(char *const *v)
{
    if (!v)
        return NULL;
    size_t n = mcp_strv_len(v);
    char **d = xcalloc(n + 1, sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = xstrdup(v[i]);
    return d;
}

static char *mcp_strdup0(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

void mcp_conf_copy(struct mcp_server_conf *d, const struct mcp_server_conf *s)
{
    *d = *s;
    d->name = xstrdup(s->name);
    d->argv = mcp_strv_dup(s->argv);
    d->env = mcp_strv_dup(s->env);
    d->headers = mcp_strv_dup(s->headers);
    d->cwd = mcp_strdup0(s->cwd);
    d->url = mcp_strdup0(s->url);
    d->key_env = mcp_strdup0(s->key_env);
    d->key_cmd = mcp_strdup0(s->key_cmd);
    d->allow = mcp_strdup0(s->allow);
}

void mcp_conf_clear(struct mcp_server_conf *c)
{
    free(c->name);
    mcp_strv_free(c->argv);
    mcp_strv_free(c->env);
    mcp_strv_free(c->headers);
    free(c->cwd);
    free(c->url);
    free(c->key_env);
    free(c->key_cmd);
    free(c->allow);
    memset(c, 0, sizeof *c);
}

void mcp_conf_free(struct mcp_server_conf *v, int n)
{
    for (int i = 0; i < n; i++)
        mcp_conf_clear(&v[i]);
    free(v);
}

const struct mcp_server_conf *mcp_conf_find(const struct mcp_server_conf *v, int n,
                                            const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

int mcp_conf_runs(const struct mcp_server_conf *c)
{
    return c->argv || (c->key_cmd && *c->key_cmd);
}

void mcp_strv_free_all(char **v)
{
    mcp_strv_free(v);
}
