/* cli.h - command-line parsing into a plain struct (no I/O), so it can be unit-tested. */
#ifndef TT_CLI_H
#define TT_CLI_H
#include "base/buf.h"
#include "proto/api.h"

#define CLI_PARAM_FIELD(f, kind, min, max, opt, shrt, metavar, help) const char *f;

struct cli {
    const char **prompts;     /* each -p TEXT (a turn of one conversation), or the joined
                                 positional words; n_prompts of them (array owned) */
    int n_prompts;
    const char **mcp;         /* each --mcp NAME (array owned) */
    int n_mcp;
    char *prompt_buf;         /* the joined words */
    const char **files;       /* each -f PATH, in order (array owned): attachments of the
                                 first prompt (scripted mode, or the chat's first) */
    int n_files;
    const char *model, *system, *profile, *role, *config_path, *base_url, *api, *cacert, *trace;
    API_SAMPLING(CLI_PARAM_FIELD) /* --max-tokens, --temperature, ... (checked by conf) */
    const char *reasoning_effort; /* --reasoning-effort (checked by conf) */
    const char *extra_body;       /* --extra-body JSON (checked by conf) */
    const char *render;           /* --render auto|always|never (checked by conf) */
    const char *idle_timeout, *connect_timeout, *max_time, *max_answer_mb; /* checked by conf */
    const char *db, *conversation, *retries;
    const char *attach_max_files, *attach_max_bytes; /* --attach-max-* (checked by conf) */
    int json, reasoning, insecure, no_usage, help, version;
    int no_save, incognito, no_cache, cache_only, cont;
    int execute, dry_run;     /* -x: shell-command mode; --dry-run: only print the command */
    const char **allow_tools; /* each --allow-tool GLOB (array owned), n_allow_tools of them */
    int n_allow_tools;
    const char *subcommand;   /* a reserved word given as the first positional argument */
    int sub_argc;             /* arguments after the subcommand name */
    char **sub_argv;          /* points into argv: sub_argv[0] is the subcommand */
};

/* Reserved subcommand names, NULL-terminated (listed in --help). */
extern const char *const cli_subcommands[];

/* Parse argv. Returns 0, or -1 with err set (bad usage). Free with cli_free. */
int cli_parse(struct cli *c, int argc, char **argv, struct buf *err);
void cli_free(struct cli *c);

/* The --help text. */
const char *cli_usage(void);

#endif
