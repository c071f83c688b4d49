/* gitignore.c - .gitignore rules and git's wildmatch (gitignore.h). */
#include "config.h"
#include "core/gitignore.h"

#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

enum { WM_MATCH = 1, WM_NOMATCH = 0, WM_ABORT_ALL = -1, WM_ABORT_TO_STARSTAR = -2 };

struct gitignore_rule {
    char *pattern;
    size_t base; /* index of the rule's base folder in bases */
    unsigned negate : 1, dir_only : 1, anchored : 1;
};

struct gitignore {
    struct gitignore_rule *rules;
    size_t n, cap;
    char **bases; /* "" or a folder below the attached one; or "../" + lead for a file above */
    size_t nbases, bcap;
};

#define GITIGNORE_ABOVE "../"

/* git's dowild() (wildmatch.c), with WM_PATHNAME: "*" and "?" never match "/". */
static int gitignore_dowild(const unsigned char *pattern, const unsigned char *p,
                            const unsigned char *text)
{
    unsigned char p_ch;
    for (; (p_ch = *p) != '\0'; text++, p++) {
        int matched, match_slash, negated;
        unsigned char t_ch, prev_ch;
        if ((t_ch = *text) == '\0' && p_ch != '*')
            return WM_ABORT_ALL;
        switch (p_ch) {
        case '\\':
            p_ch = *++p;
            if (!p_ch)
                return WM_ABORT_ALL;
            if (t_ch != p_ch)
                return WM_NOMATCH;
            continue;
        default:
            if (t_ch != p_ch)
                return WM_NOMATCH;
            continue;
        case '?':
            if (t_ch == '/')
                return WM_NOMATCH;
            continue;
        case '*':
            if (*++p == '*') {
                const unsigned char *prev_p = p - 2;
                while (*++p == '*') {
                }
                if ((prev_p < pattern || *prev_p == '/') &&
                    (*p == '\0' || *p == '/' || (p[0] == '\\' && p[1] == '/'))) {
                    if (p[0] == '/' && gitignore_dowild(pattern, p + 1, text) == WM_MATCH)
                        return WM_MATCH;
                    match_slash = 1;
                } else {
                    match_slash = 0;
                }
            } else {
                match_slash = 0;
            }
            if (*p == '\0') {
                if (!match_slash && strchr((const char *)text, '/'))
                    return WM_NOMATCH;
                return WM_MATCH;
            } else if (!match_slash && *p == '/') {
                const char *slash = strchr((const char *)text, '/');
                if (!slash)
                    return WM_NOMATCH;
                text = (const unsigned char *)slash;
                break; /* the "/" is matched by the loop */
            }
            for (;;) {
                if (t_ch == '\0')
                    break;
                if ((matched = gitignore_dowild(pattern, p, text)) != WM_NOMATCH) {
                    if (!match_slash || matched != WM_ABORT_TO_STARSTAR)
                        return matched;
                } else if (!match_slash && t_ch == '/') {
                    return WM_ABORT_TO_STARSTAR;
                }
                t_ch = *++text;
            }
            return WM_ABORT_ALL;
        case '[':
            p_ch = *++p;
            if (p_ch == '^')
                p_ch = '!';
            negated = p_ch == '!';
            if (negated)
                p_ch = *++p;
            prev_ch = 0;
            matched = 0;
            do {
                if (!p_ch)
                    return WM_ABORT_ALL;
                if (p_ch == '\\') {
                    p_ch = *++p;
                    if (!p_ch)
                        return WM_ABORT_ALL;
                    if (t_ch == p_ch)
                        matched = 1;
                } else if (p_ch == '-' && prev_ch && p[1] && p[1] != ']') {
                    p_ch = *++p;
                    if (p_ch == '\\') {
                        p_ch = *++p;
                        if (!p_ch)
                            return WM_ABORT_ALL;
                    }
                    if (t_ch <= p_ch && t_ch >= prev_ch)
                        matched = 1;
                    p_ch = 0; /* a range is not the start of another */
                } else if (t_ch == p_ch) {
                    matched = 1;
                }
                prev_ch = p_ch;
            } while ((p_ch = *++p) != ']');
            if (matched == negated || t_ch == '/')
                return WM_NOMATCH;
            continue;
        }
    }
    return *text ? WM_NOMATCH : WM_MATCH;
}

int gitignore_wildmatch(const char *pattern, const char *text)
{
    const unsigned char *p = (const unsigned char *)pattern;
    return gitignore_dowild(p, p, (const unsigned char *)text) == WM_MATCH;
}

struct gitignore *gitignore_new(void)
{
    return xcalloc(1, sizeof(struct gitignore));
}

void gitignore_free(struct gitignore *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        free(g->rules[i].pattern);
    for (size_t i = 0; i < g->nbases; i++)
        free(g->bases[i]);
    free(g->rules);
    free(g->bases);
    free(g);
}

/* One line of a .gitignore into a rule (0), or 1 when it holds none. */
static int gitignore_parse(char *line, struct gitignore_rule *r)
{
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r')
        line[--n] = '\0';
    /* trailing spaces, unless the last one is escaped */
    while (n && line[n - 1] == ' ' && !(n >= 2 && line[n - 2] == '\\'))
        line[--n] = '\0';
    if (!n || line[0] == '#')
        return 1;
    memset(r, 0, sizeof *r);
    char *p = line;
    if (*p == '!') {
        r->negate = 1;
        p++;
    } else if (p[0] == '\\' && (p[1] == '!' || p[1] == '#')) {
        p++;
    }
    n = strlen(p);
    if (n && p[n - 1] == '/') {
        r->dir_only = 1;
        p[--n] = '\0';
    }
    if (!n)
        return 1;
    if (strchr(p, '/'))
        r->anchored = 1;
    if (*p == '/')
        p++;
    if (!*p)
        return 1;
    r->pattern = xstrdup(p);
    return 0;
}

static void gitignore_add_base(struct gitignore *g, char *base, const char *text, size_t n)
{
    XGROW(g->bases, g->nbases + 1, g->bcap);
    size_t bi = g->nbases;
    g->bases[g->nbases++] = base;
    char *copy = xmalloc(n + 1);
    memcpy(copy, text, n);
    copy[n] = '\0';
    for (char *line = copy, *next; line; line = next) {
        next = memchr(line, '\n', (size_t)(copy + n - line));
        if (next)
            *next++ = '\0';
        struct gitignore_rule r;
        if (gitignore_parse(line, &r) != 0)
            continue;
        r.base = bi;
        XGROW(g->rules, g->n + 1, g->cap);
        g->rules[g->n++] = r;
    }
    free(copy);
}

void gitignore_add(struct gitignore *g, const char *base, const char *text, size_t n)
{
    gitignore_add_base(g, xstrdup(base), text, n);
}

void gitignore_add_above(struct gitignore *g, const char *lead, const char *text, size_t n)
{
    gitignore_add_base(g, xasprintf(GITIGNORE_ABOVE "%s", lead), text, n);
}

/* 1 when path is base or below it. */
static int gitignore_under(const char *path, const char *base)
{
    size_t k = strlen(base);
    return k == 0 || (strncmp(path, base, k) == 0 && (path[k] == '\0' || path[k] == '/'));
}

void gitignore_leave(struct gitignore *g, const char *base)
{
    if (!*base)
        return;
    /* rule sets are added in walk order, so the ones below base are the last (those from
     * above come first and are never under base) */
    while (g->nbases && gitignore_under(g->bases[g->nbases - 1], base)) {
        size_t bi = g->nbases - 1;
        while (g->n && g->rules[g->n - 1].base == bi)
            free(g->rules[--g->n].pattern);
        free(g->bases[bi]);
        g->nbases--;
    }
}

int gitignore_match(const struct gitignore *g, const char *path, int is_dir)
{
    for (size_t i = g->n; i-- > 0;) {
        const struct gitignore_rule *r = &g->rules[i];
        if (r->dir_only && !is_dir)
            continue;
        const char *base = g->bases[r->base];
        char *joined = NULL;
        const char *rel;
        if (strncmp(base, GITIGNORE_ABOVE, 3) == 0) { /* a file above: lead + "/" + path */
            joined = xasprintf("%s/%s", base + 3, path);
            rel = joined;
        } else if (gitignore_under(path, base)) {
            rel = path + strlen(base) + (*base ? 1 : 0);
        } else {
            continue;
        }
        const char *subject = rel;
        if (!r->anchored) {
            const char *slash = strrchr(rel, '/');
            subject = slash ? slash + 1 : rel;
        }
        int hit = *rel && gitignore_wildmatch(r->pattern, subject);
        free(joined);
        if (hit)
            return !r->negate; /* the last rule that matches decides */
    }
    return 0;
}
