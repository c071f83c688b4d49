/* mcpset.c - the MCP servers of a configuration (mcpset.h). */
#include "config.h"
#include "core/mcpset.h"

#include "base/util.h"
#include "base/xmalloc.h"
#include "core/tools.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An HTTP server's key_cmd, run as api_key_cmd is (its own process group, a timeout). */
static char *mcp_set_key(const struct mcp_server_conf *sc, struct buf *err)
{
    struct conf k;
    conf_defaults(&k); /* its key_cmd_timeout */
    char *what = xasprintf("[mcp %s] key_cmd", sc->name);
    char *key = conf_key_cmd(sc->key_cmd, what, k.key_cmd_timeout, err);
    free(what);
    if (!key && err->len == 0)
        buf_printf(err, "%s: key_cmd printed no key", sc->name);
    conf_free(&k);
    return key;
}

int mcp_set_load(struct mcp_set *s, const struct conf *c, struct buf *err)
{
    memset(s, 0, sizeof *s);
    int n = mcp_conf_load(c->path, &s->confs, err);
    if (n < 0)
        return -1;
    s->n = n;
    s->clients = xcalloc((size_t)n + 1, sizeof *s->clients);
    for (int i = 0; i < n; i++)
        if (mcp_conf_runs(&s->confs[i])) {
            struct buf why = BUF_INIT;
            if (!conf_file_trusted(c->path, (unsigned)getuid(), &why)) {
                buf_printf(err, "%s: [mcp %s] runs a command, but %s", c->path,
                           s->confs[i].name, why.data ? why.data : "the file is not safe");
                buf_free(&why);
                mcp_set_free(s, 0);
                return -1;
            }
            buf_free(&why);
            break;
        }
    return 0;
}

static void mcp_set_known(const struct mcp_set *s, struct buf *err)
{
    if (!s->n) {
        buf_appends(err, "the config file has no [mcp NAME] section");
        return;
    }
    buf_appends(err, "known:");
    for (int i = 0; i < s->n; i++)
        buf_printf(err, "%s %s", i ? "," : "", s->confs[i].name);
}

struct mcp_client *mcp_set_get(struct mcp_set *s, const char *name, struct buf *err)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->confs[i].name, name) == 0) {
            if (!s->clients[i])
                s->clients[i] = mcp_client_new(&s->confs[i], mcp_set_key);
            return s->clients[i];
        }
    buf_printf(err, "no MCP server '%.64s' (", name);
    mcp_set_known(s, err);
    buf_appendc(err, ')');
    return NULL;
}

char **mcp_set_enabled(const struct mcp_set *s, const struct conf *c, struct buf *err)
{
    if (!c->mcp || !*c->mcp)
        return NULL;
    char *copy = xstrdup(c->mcp), *save = NULL;
    char **v = NULL;
    size_t n = 0;
    for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (strcmp(t, "none") == 0)
            continue;
        if (!mcp_conf_find(s->confs, s->n, t)) {
            buf_printf(err, "mcp: no [mcp %.64s] section in the config file (", t);
            mcp_set_known(s, err);
            buf_appendc(err, ')');
            util_strv_free(v);
            free(copy);
            return NULL;
        }
        v = xrealloc(v, (n + 2) * sizeof *v);
        v[n++] = xstrdup(t);
        v[n] = NULL;
    }
    free(copy);
    return v;
}

void mcp_set_free(struct mcp_set *s, double grace)
{
    for (int i = 0; s->clients && i < s->n; i++)
        mcp_client_free(s->clients[i], grace);
    free(s->clients);
    mcp_conf_free(s->confs, s->n);
    memset(s, 0, sizeof *s);
}

/* The `allow =` of server conf sc ("read_file, search") into p as "NAME.TOOL" globs. */
static void mcp_set_allow_one(struct tool_policy *p, const struct mcp_server_conf *sc)
{
    char *list = xstrdup(sc && sc->allow ? sc->allow : ""), *save = NULL;
    for (char *w = strtok_r(list, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
        char *glob = xasprintf("%s.%s", sc->name, w);
        tool_policy_allow(p, glob);
        free(glob);
    }
    free(list);
}

/* The enabled servers of c into t as sources and their `allow =` into p (either NULL: not
 * that; both: only checked). How many, or -1. */
static int mcp_set_each(struct tools *t, struct tool_policy *p, const struct conf *c,
                        struct buf *err)
{
    if (!c->mcp || !*c->mcp)
        return 0;
    struct mcp_set s;
    if (mcp_set_load(&s, c, err) < 0)
        return -1;
    char **names = mcp_set_enabled(&s, c, err);
    int n = !names && err->len ? -1 : 0;
    for (size_t i = 0; names && names[i]; i++, n++) {
        const struct mcp_server_conf *sc = mcp_conf_find(s.confs, s.n, names[i]);
        if (t)
            tools_add(t, mcp_source_new(sc, mcp_set_key));
        if (p)
            mcp_set_allow_one(p, sc);
    }
    util_strv_free(names);
    mcp_set_free(&s, 0);
    return n;
}

int mcp_set_check(const struct conf *c, struct buf *err)
{
    return mcp_set_each(NULL, NULL, c, err) < 0 ? -1 : 0;
}

int mcp_set_tools(struct tools *t, const struct conf *c, struct buf *err)
{
    return mcp_set_each(t, NULL, c, err);
}

struct tools *mcp_set_registry(const struct conf *c, struct buf *err)
{
    struct tools *t = tools_new();
    const char *test = getenv("TOKTERM_TEST_TOOLS");
    if (test && *test)
        tools_add_test(t);
    if (mcp_set_tools(t, c, err) < 0) {
        tools_free(t);
        return NULL;
    }
    return t;
}

int mcp_set_allow(struct tool_policy *p, const struct conf *c, struct buf *err)
{
    return mcp_set_each(NULL, p, c, err) < 0 ? -1 : 0;
}

int mcp_set_policy(struct tool_policy *p, const struct conf *c, const char *const *globs,
                   int n, struct buf *err)
{
    for (int i = 0; i < n; i++)
        tool_policy_allow(p, globs[i]);
    char *list = xstrdup(c->allow ? c->allow : ""), *save = NULL;
    for (char *g = strtok_r(list, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        g = util_trim(g);
        if (*g)
            tool_policy_allow(p, g);
    }
    free(list);
    return mcp_set_allow(p, c, err);
}
