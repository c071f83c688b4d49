/* main.c - the table of commands and the dispatch: each command (a subcommand, the chat, a
 * scripted prompt) says what it needs (configuration, key, store, terminal); core/setup.c
 * provides it the same way for all of them, then the command's handler runs.
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
#include "cmd/models.h"
#include "cmd/roles.h"
#include "cmd/mcp.h"
#include "mcp/mcp.h"
#include "cmd/store.h"
#include "core/attach.h"
#include "core/attach_ext.h"
#include "core/conf.h"
#include "core/setup.h"
#include "cmd/script.h"
#include "cmd/shell.h"
#include "proto/tool.h"
#include "store/info.h"
#include "store/store.h"
#include "tui/tui.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/otlp.h"
#include "net/probe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>
#include <utf8proc.h>
#include <curses.h>
#include <readline/readline.h>

#define MAIN_STDIN_MAX ((size_t)64 << 20)

/* The libraries' versions (SQLite's says whether it is linked in). SQLite and libcurl are
 * loaded for this when they are loaded on first use; ncurses and readline are the chat's
 * (tokterm-tui's), named by the headers both programs were built with. */
static void main_version(void)
{
    const char *why = NULL;
    char *curl = net_library_version(&why);
    char *err = NULL;
    const char *sqlite = store_library_version(&err);
    printf("%s\n", PACKAGE_STRING);
    printf("libcurl %s, cJSON %s, SQLite %s%s, utf8proc %s, ncurses %s.%d, readline %d.%d\n",
           curl, cJSON_Version(), sqlite ? sqlite : "(not loadable)",
           sqlite && store_library_linked() ? " (linked in)" : "", utf8proc_version(),
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

/* No key: say what to set, and offer a local server when one answers on its usual port. */
static void main_no_key(const struct conf *c)
{
    char *cfg = conf_dir("config");
    struct conf_key_help h;
    struct buf profile = BUF_INIT;
    conf_no_key_help(c, &h, &profile);
    fprintf(stderr, "tokterm: no API key for %s\n  Set one of:\n", c->base_url);
    fprintf(stderr, "    export %s=...%*s(the key for the API", h.key_env,
            h.key_env[0] && strlen(h.key_env) < 28 ? (int)(28 - strlen(h.key_env)) : 1, "");
    if (h.key_env_alt)
        fprintf(stderr, "; or %s", h.key_env_alt);
    fputs(")\n", stderr);
    if (h.base_env)
        fprintf(stderr, "    export %s=https://...%*s(%s)\n", h.base_env,
                strlen(h.base_env) < 20 ? (int)(20 - strlen(h.base_env)) : 1, "", h.server);
    /* the file in use (--config, TOKTERM_CONFIG), not always the default one; profiles it
     * defines that none selects are named (until 2026-12 a config of [a] and [b] without
     * "profile =" read as no key for OpenAI, and doctor called it ok) */
    char *file = c->path ? xstrdup(c->path) : xasprintf("%s/config", cfg);
    size_t n = 0;
    char **names = conf_file_profile_names(c->profile ? NULL : c->path, &n);
    if (n) {
        fprintf(stderr, "  or select one of the profiles of %s: -P %s (or \"profile = %s\" at "
                        "its top; it has", file, names[0], names[0]);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "%s %s", i ? "," : "", names[i]);
        fputs(")\n", stderr);
    } else {
        fprintf(stderr, "  or write a profile in %s, e.g.\n", file);
        for (const char *l = buf_str(&profile), *e; *l; l = e + 1) {
            e = strchr(l, '\n');
            fprintf(stderr, "    %.*s\n", (int)(e - l), l);
        }
    }
    util_strv_free(names);
    free(file);
    buf_free(&profile);
    free(cfg);
    char name[64], url[512];
    if (setup_find_local(name, sizeof name, url, sizeof url))
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
    /* a pipe that stays open with nothing in it (a CI step, ssh without -n, `sleep | tokterm
     * -p`): said after 3 s, once (until 2026-12 the run waited without a word) */
    struct stat st;
    struct pollfd pf = {.fd = 0, .events = POLLIN};
    if (fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) &&
        poll(&pf, 1, 3000) == 0)
        fprintf(stderr, "tokterm: waiting for stdin, a pipe that has sent nothing yet (give "
                        "</dev/null when there is nothing to read)\n");
    for (;;) {
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EBADF && !b.len)
            break; /* stdin closed (`<&-`, a daemon's job): nothing to add, as with </dev/null;
                    * until 2026-12 `tokterm -p x <&-` failed, exit 2 */
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

/* The end of a run, everything of ours closed. The libraries' own teardown (curl_global_cleanup,
 * OpenSSL's atexit handler, GnuTLS's and p11-kit's destructors) frees only what the kernel takes
 * back anyway, and runs ~400 KB of their code that nothing else touched: it was the peak RSS of
 * a scripted run. 1 when main_exit ends the process with _exit and skips it: not when a checker
 * watches (an ASan build; a TSan build, which reports the libcurl preload thread as leaked
 * unless it is joined; TOKTERM_FULL_CLEANUP=1, which the valgrind tests set). The chat keeps
 * the ordinary exit. */
static int main_fast_exit(void)
{
#if !defined(TOKTERM_TUI_BINARY) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
    return !getenv("TOKTERM_FULL_CLEANUP");
#else
    return 0;
#endif
}

static int main_exit(int code)
{
    /* what went through stdio (help, version, roles, doctor...): a stdout that could not take
     * it fails the run, quietly for a reader gone (until 2026-12 they exited 0) */
    code = code == 0 ? util_out_flushed(stdout, 0, "tokterm") : code;
    otlp_shutdown(); /* the last spans sent (at most a batch per second) */
    if (main_fast_exit()) {
        fflush(NULL);
        _exit(code);
    }
    net_library_cleanup();
    return code;
}

/* store_set_busy_note's words on stderr: said after SQLite's own 5 s of the 30 s a write
 * waits (store_begin), so the time left is 25 s */
static void main_busy_note(void *ud, const char *path)
{
    (void)ud;
    fprintf(stderr, "tokterm: waiting for the database %s: another process holds its write "
                    "lock (a write gives up 30 s after it began, 25 s from now)\n", path);
}

/* Print the warnings and notes of warn (setup.h): "tokterm: " before each line but the
 * indented continuation lines. */
static void main_print_warn(struct buf *warn)
{
    const char *t = buf_str(warn);
    while (*t) {
        size_t n = strcspn(t, "\n");
        fprintf(stderr, "%s%.*s\n", t[0] == ' ' ? "" : "tokterm: ", (int)n, t);
        t += n + (t[n] == '\n');
    }
    buf_reset(warn);
}

/* One run: the command line, what setup made of it, and the handlers' own state. */
struct main_run {
    struct cli a;
    struct setup su;
    struct buf err, warn;
    char *prompt;              /* scripted mode: the first prompt, joined with stdin */
    struct attach_list files;  /* -f: the first prompt's attachments */
    struct batch_opts bo;      /* tokterm batch */
};

/* A command: its name (the reserved word of cli.c; "chat" and "prompt" are the two modes
 * without one), what it needs before its handler runs (enum setup_need: SETUP_CONFIG reads
 * the configuration, SETUP_KEY the key or key pool and the fallback, SETUP_STORE opens the
 * store, SETUP_TERMINAL makes it the chat that tokterm-tui runs), a check of its own arguments
 * before the key and the store (optional: returns -1 to go on, else the exit status), and the
 * handler (returns the exit status). A store is required (its failure ends the run) for
 * --cache-only and --continue/--conversation, except in the chat, which says so and goes on. */
struct main_cmd {
    const char *name;
    unsigned needs;
    int (*check)(struct main_run *r);
    int (*run)(struct main_run *r);
};

static const struct main_cmd *main_find(const char *name);
static int main_dispatch(struct main_run *r, const struct main_cmd *cmd);

/* `tokterm help` is --help; `tokterm help CMD` is `tokterm CMD --help` (until 2026-12 it
 * printed the general help whatever CMD was). */
static int main_help(struct main_run *r)
{
    const char *name = r->a.subcommand && strcmp(r->a.subcommand, "help") == 0 &&
                               r->a.sub_argc > 1 ? r->a.sub_argv[1] : NULL;
    const struct main_cmd *cmd = name ? main_find(name) : NULL;
    if (name && (strcmp(name, "help") == 0 || name[0] == '-'))
        name = NULL, cmd = NULL; /* the general help */
    if (name && (!cmd || strcmp(name, "chat") == 0 ||
                 strcmp(name, "prompt") == 0 || strcmp(name, "shell") == 0)) {
        fprintf(stderr, "tokterm help: no command '%s'; the commands are:", name);
        for (size_t i = 0; cli_subcommands[i]; i++)
            fprintf(stderr, " %s", cli_subcommands[i]);
        fputs("\n", stderr);
        return 2;
    }
    if (!cmd) {
        /* said here: once fputs has failed, main_exit's flush no longer knows why */
        errno = 0;
        if (fputs(cli_usage(), stdout) == EOF)
            return util_out_failed(errno, "tokterm", NULL);
        return util_out_flushed(stdout, 0, "tokterm");
    }
    static char help_flag[] = "--help";
    char *argv[] = {(char *)name, help_flag, NULL};
    r->a.subcommand = name;
    r->a.sub_argc = 2;
    r->a.sub_argv = argv;
    return main_dispatch(r, cmd); /* argv lives until it returns */
}

static int main_version_cmd(struct main_run *r)
{
    (void)r;
    main_version();
    return 0;
}

static int main_count(struct main_run *r)
{
    return cmd_count(r->a.sub_argc, r->a.sub_argv);
}

static int main_doctor(struct main_run *r)
{
    return cmd_doctor(&r->a, r->a.sub_argc, r->a.sub_argv); /* reads and checks the config */
}

/* tokterm models: the server's list, with the key when there is one (a local server needs
 * none). */
static int main_models(struct main_run *r)
{
    const struct setup *su = &r->su;
    const char *key = su->key ? su->key : su->n_pool ? su->pool_values[0] : NULL;
    return cmd_models(&su->conf, key, r->a.json, r->a.sub_argc, r->a.sub_argv);
}

/* models --help: the usage, before a key is looked for. */
static int main_models_check(struct main_run *r)
{
    for (int i = 1; i < r->a.sub_argc; i++)
        if (strcmp(r->a.sub_argv[i], "-h") == 0 || strcmp(r->a.sub_argv[i], "--help") == 0)
            return cmd_models(&r->su.conf, NULL, 0, r->a.sub_argc, r->a.sub_argv);
    return -1;
}

static int main_mcp(struct main_run *r)
{
    return cmd_mcp(&r->su.conf, r->a.json, r->a.sub_argc, r->a.sub_argv);
}

static int main_roles(struct main_run *r)
{
    return cmd_roles(r->su.conf.path, r->a.json, r->a.sub_argc, r->a.sub_argv);
}

/* ls, show, search, ...: cmd_store opens the database itself (search reads it its own way). */
static int main_store(struct main_run *r)
{
    char *db = setup_db_path(&r->a, &r->su.conf);
    int code = cmd_store(db, r->a.sub_argc, r->a.sub_argv);
    free(db);
    return code;
}

static int main_unavailable(struct main_run *r)
{
    fprintf(stderr, "tokterm: '%s' is not available in this build yet\n", r->a.subcommand);
    return 2;
}

/* tokterm batch: its own arguments first. */
static int main_batch_check(struct main_run *r)
{
    if (batch_parse(&r->bo, r->a.sub_argc, r->a.sub_argv, &r->err) < 0) {
        fprintf(stderr, "tokterm %s\n", buf_str(&r->err));
        return 2;
    }
    if (r->bo.help) {
        fputs(batch_usage(), stdout);
        return 0;
    }
    if (setup_cache(&r->su, &r->a, &r->err) < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&r->err));
        return 2;
    }
    return -1;
}

static int main_batch(struct main_run *r)
{
    struct setup *su = &r->su;
    r->bo.store = su->store;
    r->bo.cache = su->cache;
    r->bo.pool_labels = su->pool_labels;
    r->bo.pool_values = su->pool_values;
    r->bo.n_pool = su->n_pool;
    r->bo.fallback = su->have_fallback ? &su->fallback : NULL;
    r->bo.fallback_key = su->fallback_key;
    char *key = su->key;
    su->key = NULL;
    return batch_run(&su->conf, key, &r->bo); /* takes the key */
}

/* The chat and scripted mode: --continue/--conversation and the cache flags. */
static int main_flags(struct main_run *r)
{
    if (setup_resume(&r->su, &r->a, &r->err) < 0 || setup_cache(&r->su, &r->a, &r->err) < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&r->err));
        return 2;
    }
    return -1;
}

static int main_files(struct main_run *r);
static int main_file_is_stdin(const struct cli *a);

static int main_chat_check(struct main_run *r)
{
    int code = main_flags(r);
    if (code >= 0)
        return code;
    if (main_files(r) != 0) /* -f for the first message: checked before the chat starts */
        return 2;
    if (!isatty(1)) {
        /* tokterm exec'ed tokterm-tui when both ends are terminals */
        fputs("tokterm: no prompt: give one with -p or on stdin (see tokterm --help)\n", stderr);
        return 2;
    }
#ifdef TOKTERM_TUI_BINARY
    return -1; /* the locale was set by main_chat, before any thread */
#else
    return 1; /* not reached: the chat is tokterm-tui's */
#endif
}

/* The interactive chat (tokterm-tui only), with the key or key pool and the fallback. */
/* A scripted session's options from the command line and the setup, shared by scripted mode
 * (main_prompt) and the line chat (main_chat): the caller adds the prompts or keep. */
static struct script_opts main_script_opts(struct main_run *r)
{
    const struct cli *a = &r->a;
    struct setup *su = &r->su;
    return (struct script_opts){.json = a->json, .reasoning = a->reasoning, .store = su->store,
                                .save = su->save, .cache = su->cache, .setup = su,
                                .resume = su->resume, .resume_id = su->resume_id,
                                .endpoint_named = a->profile || a->base_url || a->api ||
                                                  su->role_profile ||
                                                  (getenv("TOKTERM_PROFILE") &&
                                                   *getenv("TOKTERM_PROFILE")),
                                .allow_tools = a->allow_tools, .n_allow_tools = a->n_allow_tools,
                                .files = r->files.n ? &r->files : NULL, .trace = a->trace};
}

static int main_chat(struct main_run *r)
{
#ifdef TOKTERM_TUI_BINARY
    struct setup *su = &r->su;
    struct tui_opts to = {.trace_path = r->a.trace, .setup = su,
                          .allow_tools = r->a.allow_tools, .n_allow_tools = r->a.n_allow_tools};
    char lname[64], lurl[512];
    if (su->no_key || (!su->key && !su->n_pool && !conf_is_local(&su->conf))) {
        to.no_key = 1; /* the chat still starts, and says what to set */
        if (setup_find_local(lname, sizeof lname, lurl, sizeof lurl)) {
            to.local_name = lname;
            to.local_url = lurl;
        }
    }
    to.store = su->store;
    to.save = su->save;
    to.incognito = r->a.incognito;
    to.cache = su->cache;
    to.resume = su->resume;
    to.resume_id = su->resume_id;
    to.files = r->files.n ? &r->files : NULL;
    char why[128];
    if (!tui_term_usable(1, why, sizeof why)) { /* TERM=dumb (an editor's shell), unknown */
        if (to.no_key) {
            main_no_key(&su->conf);
            return 2;
        }
        struct script_opts so = main_script_opts(r);
        so.json = 0; /* as in the chat: --json is scripted mode's */
        so.keep = 1; /* each turn needs the answers before it */
        char *key = su->key;
        su->key = NULL;
        return script_lines(&su->conf, key, &so, why); /* takes the key */
    }
    char *key = su->key;
    su->key = NULL;
    return tui_run(&su->conf, key, &to); /* takes the key; the pool and fallback via setup */
#else
    (void)r;
    return 1;
#endif
}

/* -f PATH...: read and check the attachments of the first prompt (before the key is read, so
 * nothing is sent when one is wrong: a missing file, a binary one, one over the provider's
 * limits, a PDF without pdftotext for a server that takes no documents). 0, or -1 with the
 * message printed. */
/* Whether -f names stdin ("-", /dev/stdin, /dev/fd/0): it is then that file, read whole,
 * and not the first prompt's context (`git diff | tokterm -f - -p "review"`). */
static int main_file_is_stdin(const struct cli *a)
{
    for (int i = 0; i < a->n_files; i++)
        if (strcmp(a->files[i], "-") == 0 || strcmp(a->files[i], "/dev/stdin") == 0 ||
            strcmp(a->files[i], "/dev/fd/0") == 0)
            return 1;
    return 0;
}

static int main_files(struct main_run *r)
{
    const struct cli *a = &r->a;
    char *err = NULL;
    struct buf notes = BUF_INIT; /* what folders left out */
    attach_allow_streams(1); /* -f <(cmd), -f -: the command line's own */
    for (int i = 0; i < a->n_files && !err; i++) {
        size_t before = r->files.n, kept = before;
        (void)attach_any(&r->files, strcmp(a->files[i], "-") == 0 ? "/dev/stdin" : a->files[i],
                         &notes, &err, NULL, NULL);
        /* a file an earlier -f gave goes once, as the chat's /attach has it (until 2026-12
         * -f a.c -f ./a.c sent it twice) */
        for (size_t k = before; k < r->files.n; k++) {
            if (attach_list_has(&r->files, before, &r->files.v[k])) {
                buf_printf(&notes, "already attached, not added again: %s\n",
                           r->files.v[k].name);
                attach_clear(&r->files.v[k]);
            } else {
                r->files.v[kept++] = r->files.v[k];
            }
        }
        r->files.n = kept;
    }
    attach_allow_streams(0);
    if (!err && notes.len) {
        struct buf safe = BUF_INIT;
        utf8_sanitize(&safe, notes.data, notes.len);
        fprintf(stderr, "tokterm: attachment: %s", buf_str(&safe));
        buf_free(&safe);
    }
    buf_free(&notes);
    if (!err) {
        enum attach_provider p = attach_provider(r->su.conf.api, r->su.conf.base_url, r->su.conf.pdf);
        if (attach_check(r->files.v, r->files.n, p, &err) == 0)
            for (size_t i = 0; i < r->files.n && !err; i++)
                if (r->files.v[i].kind == ATTACH_PDF && attach_pdf_as_text(p))
                    (void)attach_pdf_text(&r->files.v[i], &err);
    }
    if (!err)
        return 0;
    struct buf safe = BUF_INIT;
    utf8_sanitize(&safe, err, strlen(err));
    fprintf(stderr, "tokterm: attachment: %s; nothing was sent\n", buf_str(&safe));
    buf_free(&safe);
    free(err);
    return -1;
}

/* stdin read as text as -f reads a file: UTF-16 with a byte order mark converted, a UTF-8 one
 * dropped, only blanks taken as nothing; a NUL refused (binary: until 2026-12 the prompt was cut
 * there without a word). Invalid UTF-8 goes on, said: its bytes are sent as U+FFFD. -1 with
 * the message printed when refused. */
static int main_stdin_text(char **input, size_t *len)
{
    struct buf b = BUF_INIT;
    const char *note;
    int rc = attach_text_decode((const unsigned char *)*input, *len, &b, &note);
    if (rc == ATTACH_TEXT_NUL || rc == ATTACH_TEXT_UTF16) {
        fprintf(stderr, "tokterm: stdin is not text (%s): nothing was sent; give a file "
                        "with -f (text, an image or a PDF)\n",
                rc == ATTACH_TEXT_NUL ? "it holds a NUL byte" : "a UTF-16 byte order mark, "
                                                                "then no valid UTF-16");
        buf_free(&b);
        return -1;
    }
    if (rc == ATTACH_TEXT_UTF8) {
        fputs("tokterm: warning: stdin is not valid UTF-8: its invalid bytes are sent as "
              "U+FFFD\n", stderr);
    } else {
        free(*input);
        *len = b.len;
        *input = buf_take(&b);
    }
    buf_free(&b);
    if (!(*input)[strspn(*input, " \t\r\n")])
        *len = 0; /* only blanks: no context */
    return 0;
}

/* Scripted mode: the prompt from -p and/or stdin, before the key is read. */
static int main_prompt_check(struct main_run *r)
{
    int code = main_flags(r);
    if (code >= 0)
        return code;
    char *input = NULL;
    size_t input_len = 0;
    if (!isatty(0) && !main_file_is_stdin(&r->a)) {
        input = main_read_stdin(&input_len);
        if (!input || main_stdin_text(&input, &input_len) != 0) {
            free(input);
            return 2;
        }
    }
    /* stdin is context for the first prompt: `git diff | tokterm -p "review this"` */
    const struct cli *a = &r->a;
    if (a->n_prompts && input_len)
        r->prompt = xasprintf("%s\n\n%s", a->prompts[0], input);
    else if (a->n_prompts)
        r->prompt = xstrdup(a->prompts[0]);
    else
        r->prompt = xstrdup(input ? input : "");
    free(input);
    if (main_files(r) != 0)
        return 2;
    if (r->prompt[strspn(r->prompt, " \t\r\n")] == '\0' && !r->files.n) {
        fputs("tokterm: the prompt is empty (give one with -p or on stdin)\n", stderr);
        return 2;
    }
    return -1;
}

static int main_prompt(struct main_run *r)
{
    const struct cli *a = &r->a;
    struct setup *su = &r->su;
    int n = a->n_prompts ? a->n_prompts : 1;
    const char **turns = xcalloc((size_t)n, sizeof *turns);
    turns[0] = r->prompt;
    for (int i = 1; i < n; i++)
        turns[i] = a->prompts[i];
    struct script_opts so = main_script_opts(r);
    so.prompts = turns;
    so.n_prompts = n;
    char *key = su->key;
    su->key = NULL;
    int code = script_run(&su->conf, key, &so); /* takes the key; the pool and fallback too */
    free(turns);
    return code;
}

#define MAIN_SESSION (SETUP_CONFIG | SETUP_KEY | SETUP_STORE)
/* -x: the prompt as for -p; the command is asked about on the terminal (tokterm-tui's). */
static int main_shell_check(struct main_run *r)
{
    if (r->a.json || r->a.n_prompts > 1) {
        fputs("tokterm: -x takes one request, without --json\n", stderr);
        return 2;
    }
    return main_prompt_check(r);
}

/* 1 when a --allow-tool glob allows the tool name. */
static int main_allowed(const struct cli *a, const char *name)
{
    for (int i = 0; i < a->n_allow_tools; i++)
        if (tool_glob(a->allow_tools[i], name))
            return 1;
    return 0;
}

static int main_shell(struct main_run *r)
{
    struct setup *su = &r->su;
    const char *one[] = {r->prompt};
    struct shell_opts o = {.so = {.prompts = one, .n_prompts = 1, .store = su->store,
                                  .save = su->save, .cache = su->cache, .setup = su,
                                  .resume = su->resume, .resume_id = su->resume_id},
                           .dry_run = r->a.dry_run, .allowed = main_allowed(&r->a, "shell")};
#ifdef TOKTERM_TUI_BINARY
    static const struct shell_ui ui = {tui_shell_edit, tui_shell_osc52};
    o.ui = &ui;
#endif
    char *key = su->key;
    su->key = NULL;
    return shell_run(&su->conf, key, &o); /* takes the key */
}

static const struct main_cmd main_cmds[] = {
    {"help", 0, NULL, main_help},
    {"version", 0, NULL, main_version_cmd},
    {"count", 0, NULL, main_count},   /* needs no configuration */
    {"doctor", 0, NULL, main_doctor}, /* reads (and checks) the configuration itself */
    {"ls", SETUP_CONFIG, NULL, main_store},
    {"show", SETUP_CONFIG, NULL, main_store},
    {"search", SETUP_CONFIG, NULL, main_store},
    {"export", SETUP_CONFIG, NULL, main_store},
    {"rm", SETUP_CONFIG, NULL, main_store},
    {"rename", SETUP_CONFIG, NULL, main_store},
    {"stats", SETUP_CONFIG, NULL, main_store},
    {"cache", SETUP_CONFIG, NULL, main_store},
    {"models", SETUP_CONFIG | SETUP_KEY, main_models_check, main_models},
    {"roles", SETUP_CONFIG, NULL, main_roles},
    {"mcp", SETUP_CONFIG, NULL, main_mcp},
    {"batch", MAIN_SESSION, main_batch_check, main_batch},
    {"chat", MAIN_SESSION | SETUP_TERMINAL, main_chat_check, main_chat},
    {"prompt", MAIN_SESSION, main_prompt_check, main_prompt},
    {"shell", MAIN_SESSION, main_shell_check, main_shell},
};

static const struct main_cmd *main_find(const char *name)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(main_cmds); i++)
        if (strcmp(main_cmds[i].name, name) == 0)
            return &main_cmds[i];
    return NULL;
}

/* The command a asks for: --help, --version, a subcommand, else the chat (no prompt, a
 * terminal on stdin) or a scripted prompt. */
static const struct main_cmd *main_pick(const struct cli *a)
{
    static const struct main_cmd unavailable = {"", SETUP_CONFIG, NULL, main_unavailable};
    if (a->help)
        return main_find("help");
    if (a->version)
        return main_find("version");
    if (a->subcommand) {
        const struct main_cmd *c = main_find(a->subcommand);
        return c ? c : &unavailable;
    }
    if (a->execute)
        return main_find("shell");
    return main_find(!a->n_prompts && isatty(0) ? "chat" : "prompt");
}

/* Provide what cmd needs, then run it. Returns the exit status. */
static int main_dispatch(struct main_run *r, const struct main_cmd *cmd)
{
    struct setup *su = &r->su;
    /* The store's process: its blocks (SQLite's schema, statements, pages) in a huge page. Not
     * --incognito's: its few would not pay for the 2 MiB resident. */
    if ((cmd->needs & SETUP_STORE) && !r->a.incognito)
        xmalloc_heap_huge();
    if (cmd->needs & SETUP_CONFIG) {
        int rc = setup_conf(su, &r->a, &r->err, &r->warn);
        main_print_warn(&r->warn);
        if (rc < 0) {
            fprintf(stderr, "tokterm: %s\n", buf_str(&r->err));
            return 2;
        }
    }
    /* A command that needs a key makes requests: libcurl loads on a thread of its own while
     * this one reads the prompt, the key and the store (net_start waits for it). SQLite is
     * set up first, here (its allocator, its page cache, the WAL's VFS): built to load it with
     * dlopen() (--with-sqlite=shared), that dlopen() holds the loader's lock, so the store
     * would otherwise wait for all of libcurl's load (a failure is told again by store_open).
     * Linked in (the default), SQLite costs this 0.04-0.06 ms, not the 0.56 ms of its dlopen(),
     * and libcurl's load starts that much sooner. */
#ifdef TOKTERM_TUI_BINARY
    /* Wide characters for the chat; scripted mode passes bytes through. Set before the
     * libcurl thread starts: setlocale() is not thread-safe (curl_global_init reads it). */
    if (cmd->check == main_chat_check)
        setlocale(LC_ALL, "");
#endif
    if (cmd->needs & SETUP_KEY) {
        if ((cmd->needs & SETUP_STORE) && !r->a.incognito) {
            char *serr = NULL;
            (void)store_library_version(&serr);
            free(serr);
        }
        net_library_preload();
    }
    if (cmd->check) {
        int code = cmd->check(r);
        if (code >= 0)
            return code;
    }
    if (cmd->needs & SETUP_KEY) {
        if (setup_keys(su, &r->a, &r->err) < 0) {
            fprintf(stderr, "tokterm: %s\n", buf_str(&r->err));
            return 2;
        }
        if (su->no_key && !(cmd->needs & SETUP_TERMINAL)) {
            main_no_key(&su->conf); /* the chat starts anyway and says it there */
            return 2;
        }
    }
    if (cmd->needs & SETUP_STORE) {
        int required = !(cmd->needs & SETUP_TERMINAL) && (r->a.cache_only || su->resume);
        int rc = setup_store(su, &r->a, required, &r->warn);
        main_print_warn(&r->warn);
        if (rc < 0)
            return 2;
        if (su->store && !(cmd->needs & SETUP_TERMINAL)) /* the chat's screen is not stderr */
            store_set_busy_note(su->store, main_busy_note, NULL);
    }
    return cmd->run(r);
}

/* The key lives in this process's memory: no core file of it (RLIMIT_CORE 0, also for the
 * commands it runs: api_key_cmd, the editor), and not dumpable, so that neither a core handler
 * that ignores the limit (core_pattern "|...") nor another process of the user (ptrace,
 * /proc/PID/mem) can read it. Set again by tokterm-tui: exec makes a process dumpable. */
static void main_no_core(void)
{
    struct rlimit none = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &none);
#ifdef PR_SET_DUMPABLE
    /* TOKTERM_DEBUG_DUMPABLE=1 keeps the process readable by the user's own debugger and
     * /proc/PID/maps (tests); core files stay off. */
    const char *dbg = getenv("TOKTERM_DEBUG_DUMPABLE");
    if (!dbg || strcmp(dbg, "1") != 0)
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
}

int main(int argc, char **argv)
{
    main_no_core();
    util_hold_std_fds();
    util_std_streams_wait();
    if (argc > 1 && strcmp(argv[1], "--reap") == 0) /* an MCP server's reaper (mcp/mcp.h) */
        return mcp_reap_main(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--checkpoint") == 0) /* a WAL's copy (store/store.h) */
        return store_checkpoint_main(argc - 2, argv + 2);
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* Two arenas: the main thread's, and one for the thread that loads libcurl (then the
     * network's; any further thread shares one of the two). With one, the loader's mallocs
     * (5 ms of dlopen) and the store's beside them took turns on its lock: a `-c -p` of
     * 10,000 messages slept on it 1-3 times while it opened the store and read the turns, each
     * time a sleeping vCPU's wake-up away (~0.7 ms a run; 601 rounds: 0.974x wall, 0.978x
     * CPU). Glibc's default (8 per core) would cost more resident for threads that hand
     * memory to each other; the stream's RSS and CPU were the same with two. */
    mallopt(M_ARENA_MAX, 2);
#endif
    struct main_run r;
    memset(&r, 0, sizeof r);
    int code;
    if (cli_parse(&r.a, argc, argv, &r.err) < 0) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&r.err));
        code = 2;
        goto out;
    }
    const struct main_cmd *cmd = main_pick(&r.a);
#ifndef TOKTERM_TUI_BINARY
    /* The chat with a terminal on both ends: tokterm-tui, before anything else is set up
     * (it reads the configuration itself). */
    if ((cmd->needs & SETUP_TERMINAL) && isatty(1)) {
        code = main_exec_tui(argv);
        goto out;
    }
    /* -x asking on the terminal: readline (edit) and terminfo (copy) are tokterm-tui's. */
    if (cmd->run == main_shell && shell_wants_tty(r.a.dry_run, main_allowed(&r.a, "shell"))) {
        code = main_exec_tui(argv);
        goto out;
    }
#endif
    if (r.a.dry_run && !r.a.execute) {
        fputs("tokterm: --dry-run goes with -x (shell-command mode)\n", stderr);
        code = 2;
        goto out;
    }
    if (r.a.execute && !r.a.role)
        r.a.role = "shell"; /* the role of data/roles/shell.md, or the user's own */
    if (cmd->run != main_help)
        signal(SIGPIPE, SIG_IGN); /* --help keeps the default, like before */
    code = main_dispatch(&r, cmd);
out:
    free(r.prompt);
    attach_list_free(&r.files);
    r.su.at_exit = main_fast_exit();
    setup_free(&r.su);
    cli_free(&r.a);
    buf_free(&r.err);
    buf_free(&r.warn);
    return main_exit(code);
}
