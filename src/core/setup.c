/* setup.c - command line + environment + profile -> conf, keys, fallback, store, cache mode. */
#include "config.h"
#include "core/setup.h"
#include "core/attach_ext.h"
#include "core/mcpset.h"
#include "core/role.h"
#include "net/probe.h"
#include "proto/api.h"
#include "store/store.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup_wipe(char **key)
{
    util_free_secret(*key);
    *key = NULL;
}

/* Each line of text (conf_load's warnings) as a "warning: " line of warn. */
static void setup_warn_lines(struct buf *warn, const char *text)
{
    while (*text) {
        size_t n = strcspn(text, "\n");
        buf_printf(warn, "warning: %.*s\n", (int)n, text);
        text += n + (text[n] == '\n');
    }
}

/* Sampling settings Anthropic's Messages API leaves out or refuses, said before a request:
 * a temperature with extended thinking is not sent (until 2026-12 it went without a word),
 * a top_p under 0.95 with it and a temperature over 1 are refused by the server. */
static void setup_warn_sampling(const struct conf *c, struct buf *warn)
{
    if (!c->api || strcmp(c->api, "anthropic") != 0)
        return;
    int thinking = api_effort_budget(api_effort_parse(c->reasoning_effort)) > 0;
    if (thinking && c->has_temperature)
        buf_printf(warn, "warning: temperature %g is not sent: Anthropic takes none with "
                         "extended thinking (reasoning_effort %s)\n", c->temperature,
                   c->reasoning_effort);
    else if (c->has_temperature && c->temperature > 1)
        buf_printf(warn, "warning: temperature %g: Anthropic takes 0 to 1, and will refuse "
                         "it\n", c->temperature);
    if (thinking && c->has_top_p && c->top_p < 0.95)
        buf_printf(warn, "warning: top_p %g: with extended thinking Anthropic takes 0.95 to 1, "
                         "and will refuse it\n", c->top_p);
}

/* Command-line values on top of the configuration. */
static int setup_apply_cli(struct conf *c, const struct cli *a, struct buf *err)
{
    const struct {
        const char *key, *val;
    } sets[] = {
        {"model", a->model}, {"system", a->system}, {"base_url", a->base_url},
#define SETUP_PARAM_SET(f, kind, min, max, opt, shrt, metavar, help) {#f, a->f},
        API_SAMPLING(SETUP_PARAM_SET)
#undef SETUP_PARAM_SET
        {"reasoning_effort", a->reasoning_effort}, {"extra_body", a->extra_body},
        {"render", a->render},
        {"idle_timeout", a->idle_timeout}, {"max_time", a->max_time},
        {"max_answer_mb", a->max_answer_mb}, {"cacert", a->cacert}, {"max_retries", a->retries},
        {"attach_max_files", a->attach_max_files}, {"attach_max_bytes", a->attach_max_bytes},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(sets); i++) {
        if (sets[i].val && conf_set(c, sets[i].key, sets[i].val, err) < 0) {
            if (sets[i].val == a->extra_body)
                buf_appends(err, " (--extra-body)");
            return -1;
        }
        if (sets[i].val)
            conf_mark_cli(c, sets[i].key);
    }
    if (a->connect_timeout) {
        char *end;
        double s = strtod(a->connect_timeout, &end);
        if (end == a->connect_timeout || *end || !(s > 0 && s <= 600)) {
            buf_printf(err, "--connect-timeout takes seconds from 0.001 to 600, not '%s'",
                       a->connect_timeout);
            return -1;
        }
        c->connect_timeout_ms = (long)(s * 1000 + 0.5);
    }
    if (a->n_mcp) { /* --mcp NAME, repeatable: the list replaces the profile's */
        struct buf names = BUF_INIT;
        for (int i = 0; i < a->n_mcp; i++)
            buf_printf(&names, "%s%s", i ? ", " : "", a->mcp[i]);
        int rc = conf_set(c, "mcp", names.data, err);
        buf_free(&names);
        if (rc < 0)
            return -1;
        conf_mark_cli(c, "mcp");
    }
    if (a->insecure)
        c->insecure = 1;
    if (a->no_usage)
        c->include_usage = 0;
    /* -s, or a --role with a prompt: asked for now, so a resume sends it */
    c->system_given = (a->system && *a->system) || (a->role && c->system && *c->system);
    return 0;
}

int setup_role(struct setup *su, const char *name, const char *cfgpath,
                      const char *profile, struct buf *err)
{
    struct role r;
    char *want = xstrdup(name);
    int rc = role_load(&r, want, su->conf.path, err);
    if (rc == 0 && r.profile && !profile) {
        su->role_profile = 1;
        conf_free(&su->conf);
        conf_defaults(&su->conf);
        struct buf w = BUF_INIT;
        rc = conf_load(&su->conf, cfgpath, r.profile, err, &w) < 0 ? -1 : 0;
        buf_free(&w); /* its warnings were given once already */
    }
    if (rc == 0)
        rc = role_apply(&su->conf, &r, err);
    su->role_model = rc == 0 && role_sets(&r, "model");
    role_free(&r);
    free(want);
    return rc;
}

int setup_conf(struct setup *su, const struct cli *a, struct buf *err, struct buf *warn)
{
    conf_defaults(&su->conf);
    su->have_conf = 1;
    char *cfgdir = conf_dir("config");
    char *cfgpath = a->config_path ? xstrdup(a->config_path) : xasprintf("%s/config", cfgdir);
    free(cfgdir);
    const char *profile = a->profile ? a->profile : getenv("TOKTERM_PROFILE");
    if (profile && !*profile)
        profile = NULL;
    struct buf cerr = BUF_INIT, cwarn = BUF_INIT;
    int lr = conf_load(&su->conf, cfgpath, profile, &cerr, &cwarn);
    setup_warn_lines(warn, buf_str(&cwarn));
    buf_free(&cwarn);
    if (lr == 1 && a->config_path) { /* only the default file may be missing */
        buf_printf(&cerr, "%s: no such file (given with --config)", cfgpath);
        lr = -1;
    }
    if (lr >= 0 && (a->role || su->conf.role))
        lr = setup_role(su, a->role ? a->role : su->conf.role, cfgpath, profile, &cerr);
    /* what a resume keeps rather than taking the conversation's (session_resumed) */
    su->conf.role_given = a->role != NULL;
    su->conf.model_given = a->model || (getenv("TOKTERM_MODEL") && *getenv("TOKTERM_MODEL")) ||
                           conf_profile_owns(&su->conf, "model") ||
                           (a->role && su->role_model);
    free(cfgpath);
    if (lr < 0) {
        buf_printf(err, "config: %s", buf_str(&cerr));
        buf_free(&cerr);
        return -1;
    }
    buf_free(&cerr);
    /* the dialect first: it names the environment's base URL variable and the defaults
     * (conf_apply_env) */
    /* --api counts as given (a resume keeps the conversation's model only on its own
     * dialect) when it differs from the configuration's */
    int api_moved = a->api && strcmp(a->api, su->conf.api ? su->conf.api : "") != 0;
    if (a->api && conf_set(&su->conf, "api", a->api, err) < 0)
        return -1;
    if (api_moved)
        conf_mark_cli(&su->conf, "api");
    conf_apply_env(&su->conf);
    /* --api to a provider's own API with the configuration's model of another provider (a
     * config written for OpenAI, then `--api anthropic`): the dialect's model, said; until
     * 2026-12 "gpt-4o" went to Anthropic, whose 404 was all the user saw. A proxy's base URL
     * keeps it (LiteLLM and OpenRouter serve any provider's names on each API). */
    const struct dialect *d = conf_dialect(&su->conf);
    if (api_moved && !su->conf.model_given && su->conf.base_url &&
        strcmp(su->conf.base_url, d->base_url) == 0 &&
        dialect_model_foreign(d, su->conf.model)) {
        buf_printf(warn, "warning: --api %s: the configured model %s is another provider's; "
                         "%s is used (-m picks another)\n", d->name, su->conf.model, d->model);
        free(su->conf.model);
        su->conf.model = xstrdup(d->model);
    }
    if (setup_apply_cli(&su->conf, a, err) < 0)
        return -1;
    if (mcp_set_check(&su->conf, err) < 0) /* --mcp, mcp =: the servers exist */
        return -1;
    /* the file's and the command line's base_url were checked when set: this one is the
     * environment's */
    const char *base_env = conf_dialect(&su->conf)->base_env;
    if (conf_check_url(su->conf.base_url, base_env ? base_env : "base_url", err) < 0)
        return -1;
    attach_limits_conf(&su->conf); /* folders' and URLs' limits for every front end */
    if (su->conf.insecure)
        buf_appends(warn, "warning: TLS certificate checks are OFF (--insecure): anyone on the "
                          "path can read your prompts and your key\n");
    setup_warn_sampling(&su->conf, warn);
    return 0;
}

int setup_resume(struct setup *su, const struct cli *a, struct buf *err)
{
    su->resume = a->cont || a->conversation;
    su->resume_id = 0;
    if (su->resume && a->incognito) { /* until 2026-12: "no conversation store is open" */
        buf_printf(err, "%s continues a saved conversation, and --incognito opens none: "
                        "leave one of them out", a->cont ? "-c" : "--conversation");
        return -1;
    }
    if (a->cont && a->conversation) { /* until 2026-12 --conversation won without a word */
        buf_printf(err, "-c continues the latest conversation and --conversation %s names one: "
                        "leave one of them out", a->conversation);
        return -1;
    }
    if (a->conversation) {
        char *end;
        errno = 0;
        long long id = strtoll(a->conversation, &end, 10);
        if (*end || id <= 0 || errno == ERANGE || end == a->conversation) {
            buf_printf(err, "--conversation takes an id from tokterm ls, not '%s'",
                       a->conversation);
            return -1;
        }
        su->resume_id = id;
    }
    return 0;
}

int setup_cache(struct setup *su, const struct cli *a, struct buf *err)
{
    if (a->cache_only && (a->no_cache || a->incognito)) {
        buf_appends(err, "--cache-only cannot be combined with --no-cache or --incognito");
        return -1;
    }
    su->cache = a->incognito ? SESSION_CACHE_OFF : a->cache_only ? SESSION_CACHE_ONLY
              : a->no_cache ? SESSION_CACHE_BYPASS : SESSION_CACHE_ON;
    su->save = su->conf.save && !a->no_save;
    return 0;
}

int setup_keys(struct setup *su, const struct cli *a, struct buf *err)
{
    struct conf *c = &su->conf;
    su->key = conf_api_key(c, err);
    if (!su->key && err->len)
        return -1;
    if (conf_state_password(c, err) != 0)
        return -1;
    su->no_key = !conf_has_key_source(c) && !conf_is_local(c) && !a->cache_only;
    if (su->no_key)
        return 0; /* nothing will be sent: neither a pool nor a fallback is needed */
    /* A key pool, and a fallback profile for when the endpoint's breaker is open. */
    int n = conf_key_pool(c, &su->pool_labels, &su->pool_values, err);
    if (n < 0)
        return -1;
    su->n_pool = n;
    if (c->fallback && *c->fallback && c->profile && strcmp(c->fallback, c->profile) == 0) {
        /* until 2026-12 taken without a word: the "fallback" was the same server */
        buf_printf(err, "fallback profile '%s' is the profile in use: name another profile "
                        "(or fallback_model for another model here)", c->fallback);
        return -1;
    }
    if (c->fallback && *c->fallback) {
        struct buf ferr = BUF_INIT, fwarn = BUF_INIT;
        conf_defaults(&su->fallback);
        if (!c->path || conf_load(&su->fallback, c->path, c->fallback, &ferr, &fwarn) != 0) {
            buf_printf(err, "fallback profile '%s': %s", c->fallback,
                       ferr.len ? buf_str(&ferr) : "no config file");
            conf_free(&su->fallback);
            buf_free(&ferr);
            buf_free(&fwarn);
            return -1;
        }
        conf_apply_env(&su->fallback);
        su->have_fallback = 1;
        buf_reset(&ferr);
        su->fallback_key = conf_api_key(&su->fallback, &ferr); /* none: sent without one */
        buf_free(&ferr);
        buf_free(&fwarn);
    }
    return 0;
}

char *setup_db_path(const struct cli *a, const struct conf *c)
{
    if (a->db)
        return xstrdup(a->db);
    if (c->db && *c->db)
        return xstrdup(c->db);
    char *dir = conf_dir("data");
    char *p = xasprintf("%s/tokterm.db", dir);
    free(dir);
    return p;
}

int setup_store(struct setup *su, const struct cli *a, int required, struct buf *warn)
{
    if (a->incognito)
        return 0;
    const struct conf *c = &su->conf;
    char *path = setup_db_path(a, c);
    struct store_open_info info;
    char *err = NULL;
    struct stat st;
    if (required && su->resume && stat(path, &st) != 0 && errno == ENOENT) {
        /* a mistyped --db: said, and no file made (until 2026-12 an empty database was
         * created there, and the run then said only that nothing was saved yet) */
        buf_printf(warn, "no database at %s: nothing has been saved there to continue (check "
                         "--db, or db = in the configuration)\n", path);
        free(path);
        return -1;
    }
    su->store = store_open(path, &info, &err);
    if (!su->store && required) {
        /* the run stops here: said so (until 2026-12 a "warning" that the conversation would
         * not be saved, as if it went on, and then exit 2 with nothing sent) */
        buf_printf(warn, "%s: %s; nothing was sent (fix the file, or give --db FILE)\n",
                   su->resume ? "cannot continue the conversation" : "cannot read the cache",
                   err ? err : path);
        free(err);
        free(path);
        return -1;
    }
    if (!su->store) {
        buf_printf(warn, "warning: %s\n"
                         "  this conversation is not saved and the response cache is off; fix "
                         "the file or use --db FILE (or --incognito)\n", err ? err : path);
        free(err);
        free(path);
        return 0;
    }
    if (info.mode_fixed)
        buf_printf(warn, "note: %s was open to others (mode %04o); now %04o\n", path,
                   info.old_mode, info.new_mode);
    if (info.dir_mode_fixed)
        buf_printf(warn, "note: the directory of %s was writable by others (mode %04o); now "
                         "%04o\n", path, info.old_dir_mode, info.new_dir_mode);
    if (info.recovered > 0)
        buf_printf(warn, "note: %d answer%s cut off by an earlier crash marked interrupted\n",
                   info.recovered, info.recovered == 1 ? "" : "s");
    free(path);
    store_set_checkpoint_exe(su->store, "/proc/self/exe"); /* tokterm --checkpoint */
    int64_t cap = (int64_t)c->cache_max_mb << 20;
    store_cache_set_limits(su->store, (int64_t)(c->cache_ttl_days * 86400), cap);
    store_cache_set_entry_max(su->store, cap / 100); /* one answer never evicts a hundred */
    return 0;
}

void setup_use_keys(struct setup *su, struct session *s)
{
    if (su->n_pool) {
        session_use_pool(s, su->pool_labels, su->pool_values, su->n_pool);
        su->pool_labels = su->pool_values = NULL;
        su->n_pool = 0;
    }
    if (su->have_fallback) {
        session_use_fallback(s, &su->fallback, su->fallback_key);
        su->fallback_key = NULL;
    }
}

/* Does something answer GET base/models within a short time? */
static int setup_probe(const char *base)
{
    char *url = xasprintf("%s/models", base);
    int ok = net_answers(url, 400L);
    free(url);
    return ok;
}

int setup_find_local(char *name, size_t name_size, char *url, size_t url_size)
{
    const char *probe = getenv("TOKTERM_LOCAL_PROBE");
    const char *defaults = "Ollama=http://127.0.0.1:11434/v1;llama.cpp=http://127.0.0.1:8080/v1";
    char *list = xstrdup(probe && *probe ? probe : defaults);
    int found = 0;
    for (char *save = NULL, *item = strtok_r(list, ";", &save); item && !found;
         item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        if (!eq)
            continue;
        *eq = '\0';
        if (setup_probe(eq + 1)) {
            snprintf(name, name_size, "%s", item);
            snprintf(url, url_size, "%s", eq + 1);
            found = 1;
        }
    }
    free(list);
    return found;
}

void setup_free(struct setup *su)
{
    setup_wipe(&su->key);
    setup_wipe(&su->fallback_key);
    conf_pool_free(su->pool_labels, su->pool_values, su->n_pool);
    if (su->have_fallback)
        conf_free(&su->fallback);
    if (su->store && su->at_exit)
        store_close_at_exit(su->store);
    else if (su->store)
        store_close(su->store);
    if (su->have_conf)
        conf_free(&su->conf);
    memset(su, 0, sizeof *su);
}
