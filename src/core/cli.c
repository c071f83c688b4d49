/* cli.c - command-line parsing. Options come first; the first positional word is a subcommand
 * when it is a reserved name, otherwise all positional words form the prompt. */
#include "config.h"
#include "core/cli.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

const char *const cli_subcommands[] = {
    "ls", "show", "search", "export", "rm", "rename", "stats", "cache", "count", "doctor",
    "batch", "models", "roles", "mcp", "help", "version", NULL,
};

/* The subcommand a lone word was probably meant to be, or NULL: another tool's name for it, or
 * its letters with two neighbours swapped (serach, exoprt). Not any one edit: that took
 * "patch", "rules", "state" and "arm" for batch, roles, stats and rm (a review). */
static const char *cli_near_subcommand(const char *w)
{
    static const char *const other[][2] = {{"list", "ls"},   {"history", "ls"},
                                           {"delete", "rm"}, {"remove", "rm"},
                                           {"find", "search"}, {"grep", "search"}};
    size_t n = strlen(w);
    for (size_t i = 0; i < n; i++)
        if (w[i] < 'a' || w[i] > 'z')
            return NULL;
    for (size_t i = 0; i < TT_ARRAY_LEN(other); i++)
        if (strcmp(w, other[i][0]) == 0)
            return other[i][1];
    for (size_t k = 0; n >= 4 && cli_subcommands[k]; k++) {
        const char *c = cli_subcommands[k];
        size_t i = 0;
        if (strlen(c) != n)
            continue;
        while (i < n && w[i] == c[i])
            i++;
        if (i + 1 < n && w[i] == c[i + 1] && w[i + 1] == c[i] && strcmp(w + i + 2, c + i + 2) == 0)
            return c;
    }
    return NULL;
}

struct cli_opt {
    const char *lng;
    char shrt;
    int has_arg;
    size_t off;     /* offset of the const char * (has_arg) or int (flag) in struct cli */
};

#define F(f) offsetof(struct cli, f)
static const struct cli_opt cli_opts[] = {
    {"prompt", 'p', 1, 0},
    {"file", 'f', 1, 0},
    {"model", 'm', 1, F(model)},
    {"system", 's', 1, F(system)},
    {"profile", 'P', 1, F(profile)},
    {"role", 0, 1, F(role)},
    {"mcp", 0, 1, F(mcp)},
    {"config", 0, 1, F(config_path)},
    {"base-url", 0, 1, F(base_url)},
    {"api", 0, 1, F(api)},
#define CLI_PARAM_OPT(f, kind, min, max, opt, shrt, metavar, help) {opt, shrt, 1, F(f)},
    API_SAMPLING(CLI_PARAM_OPT)
#undef CLI_PARAM_OPT
    {"reasoning-effort", 0, 1, F(reasoning_effort)},
    {"extra-body", 0, 1, F(extra_body)},
    {"render", 0, 1, F(render)},
    {"idle-timeout", 0, 1, F(idle_timeout)},
    {"max-time", 0, 1, F(max_time)},
    {"max-answer-mb", 0, 1, F(max_answer_mb)},
    {"connect-timeout", 0, 1, F(connect_timeout)},
    {"cacert", 0, 1, F(cacert)},
    {"trace", 0, 1, F(trace)},
    {"db", 0, 1, F(db)},
    {"retries", 0, 1, F(retries)},
    {"attach-max-files", 0, 1, F(attach_max_files)},
    {"attach-max-bytes", 0, 1, F(attach_max_bytes)},
    {"conversation", 0, 1, F(conversation)},
    {"continue", 'c', 0, F(cont)},
    {"no-save", 0, 0, F(no_save)},
    {"incognito", 0, 0, F(incognito)},
    {"no-cache", 0, 0, F(no_cache)},
    {"cache-only", 0, 0, F(cache_only)},
    {"json", 0, 0, F(json)},
    {"execute", 'x', 0, F(execute)},
    {"dry-run", 0, 0, F(dry_run)},
    {"allow-tool", 0, 1, F(allow_tools)},
    {"reasoning", 0, 0, F(reasoning)},
    {"insecure", 0, 0, F(insecure)},
    {"no-usage", 0, 0, F(no_usage)},
    {"help", 'h', 0, F(help)},
    {"version", 'V', 0, F(version)},
};
#undef F

static const struct cli_opt *cli_find_long(const char *name, size_t n)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(cli_opts); i++)
        if (strlen(cli_opts[i].lng) == n && strncmp(cli_opts[i].lng, name, n) == 0)
            return &cli_opts[i];
    return NULL;
}

static const struct cli_opt *cli_find_short(char c)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(cli_opts); i++)
        if (cli_opts[i].shrt && cli_opts[i].shrt == c)
            return &cli_opts[i];
    return NULL;
}

/* "unknown option 'TEXT' (see tokterm --help)", TEXT made terminal-safe: it is argv. */
static void cli_unknown(struct buf *err, const char *dash, const char *text, size_t n)
{
    struct buf safe = {0};
    utf8_sanitize(&safe, text, n);
    buf_printf(err, "unknown option '%s%s' (see tokterm --help)", dash, safe.len ? safe.data : "");
    buf_free(&safe);
}

/* Store option o's value; *cap is the capacity of c->prompts. */
/* arg appended to a repeatable option's array *v of *n. */
static void cli_push(const char ***v, int *n, const char *arg)
{
    *v = xrealloc(*v, ((size_t)*n + 1) * sizeof **v);
    (*v)[(*n)++] = arg;
}

static void cli_store(struct cli *c, const struct cli_opt *o, const char *arg, size_t *cap)
{
    if (o->off == offsetof(struct cli, allow_tools))
        cli_push(&c->allow_tools, &c->n_allow_tools, arg);
    else if (o->off == offsetof(struct cli, mcp))
        cli_push(&c->mcp, &c->n_mcp, arg);
    else if (o->shrt == 'f')
        cli_push(&c->files, &c->n_files, arg);
    else if (o->shrt == 'p') {
        XGROW(c->prompts, (size_t)c->n_prompts + 1, *cap);
        c->prompts[c->n_prompts++] = arg;
    } else if (o->has_arg)
        *(const char **)((char *)c + o->off) = arg;
    else
        *(int *)((char *)c + o->off) = 1;
}

int cli_parse(struct cli *c, int argc, char **argv, struct buf *err)
{
    memset(c, 0, sizeof *c);
    struct buf words = BUF_INIT;
    int nwords = 0, only_words = 0;
    size_t cap_prompts = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_words && strcmp(a, "--") == 0) {
            only_words = 1;
            continue;
        }
        if (!only_words && a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            const struct cli_opt *o = cli_find_long(a + 2, n);
            if (!o) {
                cli_unknown(err, "", a, strlen(a));
                goto fail;
            }
            if (o->has_arg) {
                const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                if (!v) {
                    buf_printf(err, "option '--%s' needs a value", o->lng);
                    goto fail;
                }
                cli_store(c, o, v, &cap_prompts);
            } else if (eq) {
                buf_printf(err, "option '--%s' takes no value", o->lng);
                goto fail;
            } else {
                cli_store(c, o, NULL, &cap_prompts);
            }
            continue;
        }
        if (!only_words && a[0] == '-' && a[1] != '\0') {
            /* -abc short flags; a value may follow in the same word (-mgpt-4o) or the next. */
            for (const char *p = a + 1; *p; p++) {
                const struct cli_opt *o = cli_find_short(*p);
                if (!o) {
                    uint32_t cp;
                    cli_unknown(err, "-", p, utf8_decode(p, strlen(p), &cp));
                    goto fail;
                }
                if (o->has_arg) {
                    const char *v = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : NULL);
                    if (!v) {
                        buf_printf(err, "option '-%c' needs a value", *p);
                        goto fail;
                    }
                    cli_store(c, o, v, &cap_prompts);
                    break;
                }
                cli_store(c, o, NULL, &cap_prompts);
            }
            continue;
        }
        /* A positional word. */
        if (nwords == 0 && !only_words) {
            for (size_t k = 0; cli_subcommands[k]; k++)
                if (strcmp(a, cli_subcommands[k]) == 0) {
                    c->subcommand = cli_subcommands[k];
                    c->sub_argc = argc - i;
                    c->sub_argv = argv + i;
                    buf_free(&words);
                    return 0;
                }
        }
        if (nwords++)
            buf_appendc(&words, ' ');
        buf_appends(&words, a);
    }
    if (nwords) {
        if (c->n_prompts) {
            buf_printf(err, "give the prompt either with -p or as words, not both");
            goto fail;
        }
        const char *near = nwords == 1 && !only_words ? cli_near_subcommand(buf_str(&words))
                                                      : NULL; /* `--` sends it as it is */
        if (near) { /* until 2026-12 `tokterm list` was sent as a prompt, and saved */
            buf_printf(err, "'%s' is not a command; did you mean '%s'? (to send it as a "
                            "prompt: tokterm -p %s)", buf_str(&words), near, buf_str(&words));
            goto fail;
        }
        c->prompt_buf = buf_take(&words);
        c->prompts = xmalloc(sizeof *c->prompts);
        c->prompts[c->n_prompts++] = c->prompt_buf;
    }
    buf_free(&words);
    return 0;
fail:
    buf_free(&words);
    cli_free(c);
    return -1;
}

void cli_free(struct cli *c)
{
    free(c->prompt_buf);
    free(c->prompts);
    free(c->allow_tools);
    free(c->mcp);
    c->mcp = NULL;
    c->n_mcp = 0;
    free(c->files);
    c->files = NULL;
    c->n_files = 0;
    c->prompt_buf = NULL;
    c->prompts = NULL;
    c->allow_tools = NULL;
    c->n_allow_tools = 0;
    c->n_prompts = 0;
}

static const char cli_usage_head[] =
           "Usage: tokterm [OPTIONS] [PROMPT WORDS...]\n"
           "       tokterm -p PROMPT            answer one prompt on stdout (scripted mode)\n"
           "       COMMAND | tokterm -p PROMPT  stdin is appended to the prompt as context\n"
           "       tokterm -x REQUEST           propose a shell command, ask, then run it\n"
           "       tokterm                      interactive chat when stdin is a terminal\n"
           "       tokterm SUBCOMMAND [ARGS]    see below\n"
           "\n"
           "Options:\n"
           "  -p, --prompt TEXT        the prompt (or give it as words after the options);\n"
           "                           repeat -p for a multi-turn conversation in one run\n"
           "  -f, --file PATH          attach a file to the (first) prompt: text, an image\n"
           "                           (PNG, JPEG, GIF, WebP) or a PDF; repeatable\n"
           "  -m, --model NAME         model (env TOKTERM_MODEL; profile 'model')\n"
           "  -s, --system TEXT        system prompt\n"
           "  -P, --profile NAME       use the [NAME] section of the config file\n"
           "      --role NAME          apply a role: a preset system prompt and settings on top\n"
           "                           of the profile (tokterm roles lists them); profile 'role'\n"
           "      --mcp NAME           enable the [mcp NAME] server of the config file (repeat it;\n"
           "                           profile or role 'mcp = a, b')\n"
           "      --base-url URL       API base URL (env OPENAI_BASE_URL, ANTHROPIC_BASE_URL)\n"
           "      --api NAME           the provider's protocol: openai (chat completions, the\n"
           "                           default), anthropic (Messages), gemini, or responses\n"
           "                           (OpenAI's Responses API); profile 'api'\n";
/* then one line per sampling parameter (API_SAMPLING), then: */
static const char cli_usage_tail[] =
           "      --json               print one JSON object at the end instead of the text\n"
           "  -x, --execute            shell-command mode: the model proposes one command for\n"
           "                           your $SHELL and system; run / edit / copy / cancel is\n"
           "                           asked on the terminal (exit: the command's status; 10\n"
           "                           cancelled; 11 no terminal to ask on)\n"
           "      --dry-run            with -x: only print the proposed command\n"
           "      --allow-tool GLOB    run matching tools without asking (repeatable); with -x,\n"
           "                           'shell' runs the command unseen: DANGEROUS\n"
           "      --reasoning-effort E how hard a reasoning model thinks: low, medium,\n"
           "                           high or none (not sent; the default); /think in the chat\n"
           "      --extra-body JSON    a JSON object merged into every request body (its\n"
           "                           members replace tokterm's); profile 'extra_body'\n"
           "      --reasoning          copy the model's reasoning to stderr\n"
           "      --render WHEN        show the answer as rendered Markdown (colours from the\n"
           "                           theme): auto (when stdout is a terminal; a pipe gets the\n"
           "                           raw text), always, never; profile 'render'\n"
           "      --no-usage           do not send stream_options.include_usage\n"
           "      --idle-timeout S     give up when no new text arrives for S seconds (default 90)\n"
           "      --connect-timeout S  connect timeout in seconds (default 10)\n"
           "      --max-time S         give up on a request after S seconds in all (default: none)\n"
           "      --max-answer-mb N    stop an answer past N MiB, keeping what came (default 64)\n"
           "      --retries N          retries before the first byte of an answer on 408, 409,\n"
           "                           429, 5xx, connection failures, timeouts (default 2)\n"
           "      --attach-max-files N a folder attachment takes at most N files (default 200)\n"
           "      --attach-max-bytes N and at most N bytes of them (default 1048576)\n"
           "      --cacert FILE        trust this CA bundle for TLS\n"
           "      --insecure           do not verify TLS certificates (warns every time)\n"
           "      --config FILE        config file (default $XDG_CONFIG_HOME/tokterm/config)\n"
           "      --trace FILE         write timing records to FILE (frames; -p: each answer's CPU)\n"
           "  -c, --continue           continue the most recent saved conversation\n"
           "      --conversation ID    continue saved conversation ID (see tokterm ls)\n"
           "      --db FILE            conversation database (default\n"
           "                           $XDG_DATA_HOME/tokterm/tokterm.db)\n"
           "      --no-save            do not save this conversation\n"
           "      --incognito          save nothing and do not use the response cache\n"
           "      --no-cache           always ask the server (the answer still fills the cache)\n"
           "      --cache-only         answer only from the cache (exit 7 on a miss)\n"
           "  -h, --help               this text\n"
           "  -V, --version            version and library versions\n"
           "\n"
           "Subcommands (reserved words: use -p to send one of them as a prompt):\n"
           "  count [-m MODEL|--encoding NAME] [--ids] [TEXT]   count the tokens of TEXT or stdin\n"
           "  ls [--limit N] [--json]                     saved conversations, newest first\n"
           "  show ID | export ID --format md|json | export --all   print conversations\n"
           "  search QUERY [--model M] [--since D] [--until D] [--limit N] [--json]\n"
           "                                              full-text search (exit 1: no match)\n"
           "  rm ID | rename ID TITLE | stats | cache stats|clear\n"
           "  models [--json] [--refresh]                 the models the server offers\n"
           "  roles [--json]                              the roles --role and /role know\n"
           "  mcp list [SERVER...] [--json] | mcp call SERVER TOOL [JSON]   MCP servers, tools\n"
           "  doctor, batch, help, version\n"
           "\n"
           "Environment: OPENAI_API_KEY, OPENAI_BASE_URL, TOKTERM_MODEL, TOKTERM_PROFILE, NO_COLOR;\n"
           "  with --api anthropic ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; with --api gemini\n"
           "  GEMINI_API_KEY (or GOOGLE_API_KEY).\n"
           "Exit status: 0 complete answer; 2 bad usage or config; 3 HTTP/API error;\n"
           "  4 network failure; 5 truncated or interrupted stream; 6 answer cut short by the\n"
           "  server (finish_reason length or content_filter); 130 cancelled by the user;\n"
           "  7 --cache-only and no cached answer; 8 stopped by tokterm's own limit\n"
           "  (--max-answer-mb, --max-time), the text so far kept; 9 a tool call refused\n"
           "  or too many tool rounds; 10 -x: nothing ran; 11 -x: no terminal to ask on;\n"
           "  141 stdout closed; 1 internal error.\n";

const char *cli_usage(void)
{
    static char *text;
    if (!text) {
        struct buf b = BUF_INIT;
        buf_appends(&b, cli_usage_head);
        for (size_t i = 0; i < API_N_PARAMS; i++) {
            const struct api_param *p = &api_params[i];
            char *lng = xasprintf("--%s %s", p->opt, p->metavar);
            if (p->shrt)
                buf_printf(&b, "  -%c, %-21s%s\n", p->shrt, lng, p->help);
            else
                buf_printf(&b, "      %-21s%s\n", lng, p->help);
            free(lng);
        }
        buf_appends(&b, cli_usage_tail);
        text = buf_take(&b);
    }
    return text;
}
