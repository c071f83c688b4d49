/* main.c - flags, configuration, and dispatch to scripted mode, the TUI or a subcommand.
 *
 * Compiled twice: as tokterm, which runs everything but the interactive chat and execs
 * tokterm-tui for it (so that scripted runs never load curses and readline), and with
 * TOKTERM_TUI_BINARY as tokterm-tui, which runs the chat (and anything else it is asked). */
#include "config.h"
#include "proto/api.h"
#include "cmd/batch.h"
#include "core/cli.h"
#include "cmd/count.h"
#include "cmd/doctor.h"
#include "cmd/store.h"
#include "core/conf.h"
#include "cmd/script.h"
#include "store/info.h"
#include "store/store.h"
#include "tui/tui.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/probe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <locale.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>
#include <curses.h>
#include <readline/readline.h>

#define MAIN_STDIN_MAX ((size_t)64 << 20)

/* The libraries' versions. SQLite is loaded for this; ncurses and readline are the chat's
 * (tokterm-tui's), named by the headers both programs were built with. */
static void main_version(void)
{
    const char *why = NULL;
    char *curl = net_library_version(&why);
    char *err = NULL;
    const char *sqlite = store_library_version(&err);
    printf("%s\n", PACKAGE_STRING);
    printf("libcurl %s, cJSON %s, SQLite %s, utf8proc %s, ncurses %s.%d, readline %d.%d\n", curl,
           cJSON_Version(), sqlite ? sqlite : "(not loadable)", utf8proc_version(),
           NCURSES_VERSION, NCURSES_VERSION_PATCH, RL_VERSION_MAJOR, RL_VERSION_MINOR);
    free(curl);
    if (why)
        fprintf(stderr, "tokterm: %s\n", why);
    if (err)
        fprintf(stderr, "tokterm: %s\n", err);
    free(err);
}

#ifndef TOKTERM_TUI_BINARY
/* Run the chat, tokterm-tui, with the same arguments: $TOKTERM_TUI if set, else the one next to
 * this executable (a build tree), else the installed one. Returns only when none could be run. */
static int main_exec_tui(char **argv)
{
    char *cand[2] = {NULL, NULL};
    const char *env = getenv("TOKTERM_TUI");
    if (env && *env) {
        cand[0] = xstrdup(env);
    } else {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        char *slash = NULL;
        if (n > 0) {
            self[n] = '\0';
            slash = strrchr(self, '/');
        }
        if (slash) {
            *slash = '\0';
            cand[0] = xasprintf("%s/tokterm-tui", self);
        }
        if (!cand[0] || strcmp(cand[0], TT_LIBEXECDIR "/tokterm-tui") != 0)
            cand[cand[0] ? 1 : 0] = xstrdup(TT_LIBEXECDIR "/tokterm-tui");
    }
    struct buf tried = BUF_INIT;
    for (size_t i = 0; i < TT_ARRAY_LEN(cand) && cand[i]; i++) {
        execv(cand[i], argv);
        buf_printf(&tried, "\n    %s: %s", cand[i], strerror(errno));
        free(cand[i]);
    }
    fprintf(stderr, "tokterm: cannot start the interactive chat (the program tokterm-tui); "
                    "tried:%s\n  reinstall tokterm, or set TOKTERM_TUI to tokterm-tui's path\n",
            buf_str(&tried));
    buf_free(&tried);
    return 1;
}
#endif

/* Does something answer GET url/models within a short time? */
static int main_probe(const char *base)
{
    char *url = xasprintf("%s/models", base);
    int ok = net_answers(url, 400L);
    free(url);
    return ok;
}

/* The first local server (Ollama, llama.cpp) that answers on its usual port: 1 with its name
 * and base URL copied out, else 0. TOKTERM_LOCAL_PROBE ("Name=URL;Name=URL") replaces the
 * list (tests point it at the fake server). */
static int main_find_local(char *name, size_t name_size, char *url, size_t url_size)
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
        if (main_probe(eq + 1)) {
            snprintf(name, name_size, "%s", item);
            snprintf(url, url_size, "%s", eq + 1);
            found = 1;
        }
    }
    free(list);
    return found;
}

/* No key: say what to set, and offer a local server when one answers on its usual port. */
static void main_no_key(const struct conf *c)
{
    char *cfg = conf_dir("config");
    fprintf(stderr,
            "tokterm: no API key for %s\n"
            "  Set one of:\n"
            "    export OPENAI_API_KEY=sk-...            (the key for the API)\n"
            "    export OPENAI_BASE_URL=https://...      (another OpenAI-compatible server)\n"
            "  or write a profile in %s/config, e.g.\n"
            "    [openai]\n"
            "    base_url = https://api.openai.com/v1\n"
            "    api_key_cmd = pass show openai      (or api_key_env = MY_KEY_VARIABLE)\n"
            "    model = gpt-4o-mini\n",
            c->base_url, cfg);
    free(cfg);
    char name[64], url[512];
    if (main_find_local(name, sizeof name, url, sizeof url))
        fprintf(stderr,
                "  A local %s server answers at %s - it needs no key. To use it:\n"
                "    OPENAI_BASE_URL=%s tokterm -m MODEL ...\n",
                name, url, url);
}

/* Read all of stdin (bounded). Returns NULL with a message printed on failure. */
static char *main_read_stdin(size_t *len)
{
    struct buf b = BUF_INIT;
    char chunk[65536];
    for (;;) {
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "tokterm: reading stdin: %s\n", strerror(errno));
            buf_free(&b);
            return NULL;
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > MAIN_STDIN_MAX) {
            fprintf(stderr, "tokterm: stdin is larger than %zu MiB; give a smaller input\n",
                    MAIN_STDIN_MAX >> 20);
            buf_free(&b);
            return NULL;
        }
        buf_append(&b, chunk, (size_t)n);
    }
    *len = b.len;
    return buf_take(&b);
}

/* The conversation database: --db, the profile's db, else $XDG_DATA_HOME/tokterm/tokterm.db. */
static char *main_db_path(const struct cli *a, const struct conf *c)
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

/* Open the store for a chat: NULL (after a warning that says what to do) when it cannot be. */
static struct store *main_open_store(const char *path, const struct conf *c)
{
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    if (!st) {
        fprintf(stderr, "tokterm: warning: %s\n"
                        "  this conversation is not saved and the response cache is off; fix "
                        "the file or use --db FILE (or --incognito)\n", err ? err : path);
        free(err);
        return NULL;
    }
    if (info.mode_fixed)
        fprintf(stderr, "tokterm: note: %s was readable by others (mode %03o); now 0600\n", path,
                info.old_mode);
    if (info.recovered > 0)
        fprintf(stderr, "tokterm: note: %d answer%s cut off by an earlier crash marked "
                        "interrupted\n", info.recovered, info.recovered == 1 ? "" : "s");
    int64_t cap = (int64_t)c->cache_max_mb << 20;
    store_cache_set_limits(st, (int64_t)(c->cache_ttl_days * 86400), cap);
    store_cache_set_entry_max(st, cap / 100); /* one answer never evicts a hundred others */
    return st;
}

/* Wipe and free a key. */
static void main_wipe(char *key)
{
    if (key) {
        memset(key, 0, strlen(key));
        free(key);
    }
}

/* Apply command-line values on top of the configuration. */
static int main_apply_cli(struct conf *c, const struct cli *a, struct buf *err)
{
    const struct {
        const char *key, *val;
    } sets[] = {
        {"model", a->model}, {"system", a->system}, {"base_url", a->base_url},
        {"max_tokens", a->max_tokens}, {"temperature", a->temperature},
        {"idle_timeout", a->idle_timeout}, {"cacert", a->cacert}, {"max_retries", a->retries},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(sets); i++)
        if (sets[i].val && conf_set(c, sets[i].key, sets[i].val, err) < 0)
            return -1;
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
    if (a->insecure)
        c->insecure = 1;
    if (a->no_usage)
        c->include_usage = 0;
    return 0;
}

/* tokterm batch: its arguments first, then the key (or key pool) and the store for the cache. */
static int main_batch(const struct cli *a, struct conf *c)
{
    struct buf err = BUF_INIT;
    struct batch_opts bo;
    memset(&bo, 0, sizeof bo);
    int code = 2;
    if (batch_parse(&bo, a->sub_argc, a->sub_argv, &err) < 0) {
        fprintf(stderr, "tokterm %s\n", buf_str(&err));
        goto out;
    }
    if (bo.help) {
        fputs(batch_usage(), stdout);
        code = 0;
        goto out;
    }
    if (a->cache_only && (a->no_cache || a->incognito)) {
        fputs("tokterm: --cache-only cannot be combined with --no-cache or --incognito\n", stderr);
        goto out;
    }
    char *key = conf_api_key(c, &err);
    if (!key && err.len) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        goto out;
    }
    if (!key && !conf_is_local(c) && !a->cache_only && !(c->keys && *c->keys)) {
        main_no_key(c);
        goto out;
    }
    bo.n_pool = conf_key_pool(c, &bo.pool_labels, &bo.pool_values, &err);
    struct store *st = NULL;
    if (bo.n_pool >= 0 && !a->incognito) {
        char *db = main_db_path(a, c);
        st = main_open_store(db, c);
        free(db);
    }
    if (bo.n_pool < 0 || (!st && a->cache_only)) {
        if (bo.n_pool < 0)
            fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        if (key) {
            memset(key, 0, strlen(key));
            free(key);
        }
        if (st)
            store_close(st);
        goto out;
    }
    bo.store = st;
    bo.cache = a->incognito ? SESSION_CACHE_OFF : a->cache_only ? SESSION_CACHE_ONLY
             : a->no_cache ? SESSION_CACHE_BYPASS : SESSION_CACHE_ON;
    code = batch_run(c, key, &bo);
    conf_pool_free(bo.pool_labels, bo.pool_values, bo.n_pool);
    if (st)
        store_close(st);
out:
    buf_free(&err);
    return code;
}

#ifdef TOKTERM_TUI_BINARY
/* The interactive chat (tokterm-tui only): the key, the store, then the TUI's own loop. */
static int main_chat(const struct cli *a, struct conf *c, int64_t resume_id)
{
    setlocale(LC_ALL, ""); /* wide characters; scripted mode passes bytes through */
    struct buf err = BUF_INIT;
    char *tkey = conf_api_key(c, &err);
    if (!tkey && err.len) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        buf_free(&err);
        return 2;
    }
    buf_free(&err);
    struct tui_opts to = {.trace_path = a->trace};
    char lname[64], lurl[512];
    if (!tkey && !conf_is_local(c)) {
        to.no_key = 1; /* the chat still starts, and says what to set */
        if (main_find_local(lname, sizeof lname, lurl, sizeof lurl)) {
            to.local_name = lname;
            to.local_url = lurl;
        }
    }
    struct store *tst = NULL;
    if (!a->incognito) {
        char *db = main_db_path(a, c);
        tst = main_open_store(db, c);
        free(db);
    }
    to.store = tst;
    to.save = c->save && !a->no_save;
    to.cache = a->incognito ? SESSION_CACHE_OFF : a->cache_only ? SESSION_CACHE_ONLY
             : a->no_cache ? SESSION_CACHE_BYPASS : SESSION_CACHE_ON;
    to.resume = a->cont || a->conversation;
    to.resume_id = resume_id;
    int code = tui_run(c, tkey, &to);
    if (tst)
        store_close(tst);
    return code;
}
#endif

/* The end of a run, everything of ours closed. The libraries' own teardown (curl_global_cleanup,
 * OpenSSL's atexit handler, GnuTLS's and p11-kit's destructors) frees only what the kernel takes
 * back anyway, and runs ~400 KB of their code that nothing else touched: it was the peak RSS of
 * a scripted run. tokterm skips it unless a leak checker watches (an ASan build, or
 * TOKTERM_FULL_CLEANUP=1, which the valgrind tests set). The chat keeps the ordinary exit. */
static int main_exit(int code)
{
#if !defined(TOKTERM_TUI_BINARY) && !defined(__SANITIZE_ADDRESS__)
    if (!getenv("TOKTERM_FULL_CLEANUP")) {
        fflush(NULL);
        _exit(code);
    }
#endif
    net_library_cleanup();
    return code;
}

int main(int argc, char **argv)
{
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* Two threads (UI and network) hand memory to each other: one malloc arena serves them
     * without contention that matters, and a second arena would cost ~0.4 MB resident. */
    mallopt(M_ARENA_MAX, 1);
#endif
    struct cli a;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    int code = 0;
    if (cli_parse(&a, argc, argv, &err) < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        code = 2;
        goto out;
    }
    if (a.help || (a.subcommand && strcmp(a.subcommand, "help") == 0)) {
        fputs(cli_usage(), stdout);
        goto out;
    }
#ifndef TOKTERM_TUI_BINARY
    /* No prompt and a terminal on both ends: the interactive chat, before anything else is
     * set up (tokterm-tui reads the configuration itself). */
    if (!a.version && !a.subcommand && !a.n_prompts && isatty(0) && isatty(1)) {
        code = main_exec_tui(argv);
        goto out;
    }
#endif
    signal(SIGPIPE, SIG_IGN);
    if (a.version || (a.subcommand && strcmp(a.subcommand, "version") == 0)) {
        main_version();
        goto out;
    }

    if (a.subcommand && strcmp(a.subcommand, "count") == 0) {
        code = cmd_count(a.sub_argc, a.sub_argv); /* needs no configuration */
        goto out;
    }
    if (a.subcommand && strcmp(a.subcommand, "doctor") == 0) {
        code = cmd_doctor(&a, a.sub_argc, a.sub_argv); /* reads (and checks) the config itself */
        goto out;
    }

    struct conf c;
    conf_defaults(&c);
    char *cfgdir = conf_dir("config");
    char *cfgpath = a.config_path ? xstrdup(a.config_path) : xasprintf("%s/config", cfgdir);
    free(cfgdir);
    const char *profile = a.profile ? a.profile : getenv("TOKTERM_PROFILE");
    if (profile && !*profile)
        profile = NULL;
    int lr = conf_load(&c, cfgpath, profile, &err, &warn);
    free(cfgpath);
    if (warn.len)
        fprintf(stderr, "tokterm: warning: %s", buf_str(&warn));
    if (lr < 0) {
        fprintf(stderr, "tokterm: config: %s\n", buf_str(&err));
        code = 2;
        goto out_conf;
    }
    conf_apply_env(&c);
    if (main_apply_cli(&c, &a, &err) < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        code = 2;
        goto out_conf;
    }
    if (c.insecure)
        fputs("tokterm: warning: TLS certificate checks are OFF (--insecure): anyone on the "
              "path can read your prompts and your key\n", stderr);

    if (a.subcommand && cmd_store_is_command(a.subcommand)) {
        char *db = main_db_path(&a, &c);
        code = cmd_store(db, a.sub_argc, a.sub_argv);
        free(db);
        goto out_conf;
    }
    if (a.subcommand && strcmp(a.subcommand, "batch") == 0) {
        code = main_batch(&a, &c);
        goto out_conf;
    }
    if (a.subcommand) {
        fprintf(stderr, "tokterm: '%s' is not available in this build yet\n", a.subcommand);
        code = 2;
        goto out_conf;
    }
    int64_t resume_id = 0;
    if (a.conversation) {
        char *end;
        resume_id = strtoll(a.conversation, &end, 10);
        if (*end || resume_id <= 0) {
            fprintf(stderr, "tokterm: --conversation takes an id from tokterm ls, not '%s'\n",
                    a.conversation);
            code = 2;
            goto out_conf;
        }
    }
    if (a.cache_only && (a.no_cache || a.incognito)) {
        fputs("tokterm: --cache-only cannot be combined with --no-cache or --incognito\n", stderr);
        code = 2;
        goto out_conf;
    }

    /* No prompt and a terminal on both ends: the interactive chat (tokterm has exec'ed
     * tokterm-tui for it above, unless standard output is not a terminal). */
    int stdin_tty = isatty(0);
    if (!a.n_prompts && stdin_tty) {
        if (!isatty(1)) {
            fputs("tokterm: no prompt: give one with -p or on stdin (see tokterm --help)\n",
                  stderr);
            code = 2;
            goto out_conf;
        }
#ifdef TOKTERM_TUI_BINARY
        code = main_chat(&a, &c, resume_id);
#endif
        goto out_conf;
    }

    /* Scripted mode: a prompt on the command line and/or on stdin. */
    char *input = NULL;
    size_t input_len = 0;
    if (!stdin_tty) {
        input = main_read_stdin(&input_len);
        if (!input) {
            code = 2;
            goto out_conf;
        }
    }
    /* stdin is context for the first prompt: `git diff | tokterm -p "review this"` */
    char *prompt;
    if (a.n_prompts && input_len)
        prompt = xasprintf("%s\n\n%s", a.prompts[0], input);
    else if (a.n_prompts)
        prompt = xstrdup(a.prompts[0]);
    else
        prompt = xstrdup(input ? input : "");
    free(input);
    size_t blank = strspn(prompt, " \t\r\n");
    if (prompt[blank] == '\0') {
        fputs("tokterm: the prompt is empty (give one with -p or on stdin)\n", stderr);
        free(prompt);
        code = 2;
        goto out_conf;
    }

    char *key = conf_api_key(&c, &err);
    if (!key && err.len) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        free(prompt);
        code = 2;
        goto out_conf;
    }
    if (!key && !conf_is_local(&c) && !a.cache_only && !(c.keys && *c.keys)) {
        main_no_key(&c);
        free(prompt);
        code = 2;
        goto out_conf;
    }
    const char **turns = xcalloc((size_t)(a.n_prompts ? a.n_prompts : 1), sizeof *turns);
    turns[0] = prompt;
    for (int i = 1; i < a.n_prompts; i++)
        turns[i] = a.prompts[i];
    struct script_opts so = {.prompts = turns, .n_prompts = a.n_prompts ? a.n_prompts : 1,
                             .json = a.json, .reasoning = a.reasoning};
    struct store *st = NULL;
    if (!a.incognito) {
        char *db = main_db_path(&a, &c);
        st = main_open_store(db, &c);
        free(db);
        if (!st && (a.cache_only || a.cont || a.conversation)) {
            free(turns);
            free(prompt);
            main_wipe(key);
            code = 2;
            goto out_conf;
        }
    }
    so.store = st;
    so.save = c.save && !a.no_save;
    so.cache = a.incognito ? SESSION_CACHE_OFF : a.cache_only ? SESSION_CACHE_ONLY
             : a.no_cache ? SESSION_CACHE_BYPASS : SESSION_CACHE_ON;
    /* A key pool, and a fallback profile for when the endpoint's breaker is open. */
    int n_pool = conf_key_pool(&c, &so.pool_labels, &so.pool_values, &err);
    if (n_pool < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&err));
        n_pool = 0;
        code = 2;
    }
    so.n_pool = n_pool;
    struct conf fb;
    int have_fb = 0;
    if (code == 0 && c.fallback && *c.fallback) {
        conf_defaults(&fb);
        buf_reset(&err);
        if (!c.path || conf_load(&fb, c.path, c.fallback, &err, &warn) != 0) {
            fprintf(stderr, "tokterm: fallback profile '%s': %s\n", c.fallback,
                    err.len ? buf_str(&err) : "no config file");
            code = 2;
        } else {
            conf_apply_env(&fb);
            have_fb = 1;
            so.fallback = &fb;
            buf_reset(&err);
            so.fallback_key = conf_api_key(&fb, &err);
        }
    }
    if (code != 0) {
        conf_pool_free(so.pool_labels, so.pool_values, n_pool);
        main_wipe(key);
    } else {
        so.resume = a.cont || a.conversation;
        so.resume_id = resume_id;
        code = script_run(&c, key, &so); /* takes the key and the pool */
    }
    if (have_fb)
        conf_free(&fb);
    if (st)
        store_close(st);
    free(turns);
    free(prompt);
out_conf:
    conf_free(&c);
out:
    cli_free(&a);
    buf_free(&err);
    buf_free(&warn);
    return main_exit(code);
}
