/* conf.h - typed option table, INI config file with per-provider profiles, XDG paths,
 * environment, and where the API key comes from. No I/O to the terminal. */
#ifndef TT_CONF_H
#define TT_CONF_H
#include "base/buf.h"
#include "proto/api.h"
#include "proto/dialect.h"

struct conf {
    char *profile;          /* selected profile name, NULL = none */
    char *api;              /* the dialect: "openai" (default), "anthropic", ... (dialect.h) */
    char *base_url;         /* e.g. https://api.openai.com/v1 */
    char *model;
    char *system;           /* system prompt */
    int system_given;       /* system came from -s: a resume saves it as the conversation's
                               (the profile's or a role's is not the conversation's own) */
    char *role;             /* the role applied on top of the profile (core/role.h) */
    int role_given;         /* --role: a resume keeps it (else it takes the conversation's) */
    int model_given;        /* the model came from -m, TOKTERM_MODEL, a profile named with -P
                               that sets it, or --role: a resume keeps it (else it takes the
                               model the conversation last asked for) */
    char *mcp;              /* the [mcp NAME] servers enabled: "a, b" (core/mcpset.h) */
    char *api_key_env;      /* name of the environment variable holding the key */
    char *api_key_cmd;      /* shell command printing the key */
    char *api_key;          /* literal key in the file (discouraged: warned about) */
    char *auth_header;      /* "Authorization" (Bearer) or e.g. "api-key" (Azure) */
    API_SAMPLING(API_PARAM_FIELD) /* max_tokens (0 = not sent), temperature and has_temperature,
                             ...: the sampling parameters, with their keys (proto/api.h) */
    char *max_tokens_field; /* "max_tokens" or "max_completion_tokens" */
    char *reasoning_effort; /* "low", "medium", "high"; NULL or "none" = not sent */
    char *pdf;              /* PDF attachments: "auto" (NULL), "document", "text" (attach.h) */
    char *extra_body;       /* a JSON object whose members request_body() adds to every body;
                               NULL = none (checked by conf_set) */
    int include_usage;      /* ask for usage with stream_options (1) */
    long connect_timeout_ms;
    double idle_timeout;    /* seconds without new answer text before giving up */
    double max_time;        /* seconds a whole request may take, retries included; 0 = none */
    long max_answer_mb;     /* an answer stops (kept, exit 5) past this many MiB (64) */
    long tool_rounds;       /* tool rounds at most per turn (10) */
    char *allow;            /* tools the chat runs without asking: globs of tokterm names,
                               "fs.read_file, *.search"; NULL = none */
    double key_cmd_timeout; /* api_key_cmd / cmd: keys are killed after this many seconds (10) */
    char *cacert;
    int insecure;
    char *theme;
    char *render;           /* scripted answers as rendered Markdown: auto (on a terminal), always, never */
    char *hyperlinks;       /* rendered URLs as OSC 8 hyperlinks: auto (a terminal known to), always, never */
    int highlight;          /* highlight code blocks in the chat (1) */
    int save;               /* save conversations (1) */
    double cache_ttl_days;  /* response cache time to live (0 = forever) */
    long cache_max_mb;      /* response cache size cap (0 = unlimited) */
    char *db;               /* conversation database, NULL = $XDG_DATA_HOME/tokterm/tokterm.db */
    long context_window;    /* tokens; 0 = the model's from data/models.tsv */
    char *encoding;         /* "o200k_base" / "cl100k_base"; NULL = the model's */
    long reserve_tokens;    /* answer reserve when max_tokens is 0; 0 = automatic */
    char *context_policy;   /* "summarize" (default), "truncate" or "off" */
    long budget_tokens;     /* session spending cap in tokens; 0 = none */
    double budget_usd;      /* session spending cap in US dollars; 0 = none */
    long max_retries;       /* retries before the first byte of an answer (2) */
    double max_retry_wait;  /* a server asking to wait longer than this fails at once (60 s) */
    double max_rate_wait;   /* 429s waited out (no retry spent): seconds in all a request (120) */
    double rpm, tpm;        /* client-side requests / tokens per minute; 0 = from the headers */
    char *state;            /* quota state shared in Redis: redis://[user:password@]host:port/db
                               or unix:///path (net/state.h); NULL = local (SQLite) only */
    char *state_password_env, *state_password_cmd; /* its password, like api_key_env/_cmd */
    char *state_password;   /* not an option: the password setup_keys resolved (wiped on free) */
    char *keys;             /* a key pool: "NAME, env:NAME, cmd:COMMAND" (comma-separated) */
    char *fallback;         /* profile used while this endpoint's circuit breaker is open */
    char *fallback_model;   /* or: the same endpoint with another model */
    long breaker_failures;  /* consecutive failures that open the breaker (5) */
    double breaker_cooldown;/* seconds it stays open (30) */
    long attach_max_files;  /* a folder attachment takes at most this many files (200) */
    long attach_max_bytes;  /* ... and this many bytes of them together (1 MiB) */
    double attach_url_timeout; /* a URL attachment's whole fetch, seconds (20) */
    long attach_url_max_bytes; /* a URL attachment's body at most, after decoding (5 MiB) */
    char *path;             /* config file that was read, NULL when none */
    int profile_explicit;   /* the profile was named on the command line or in TOKTERM_PROFILE */
    unsigned long profile_set; /* bit i: option i was set by the selected profile's section */
    unsigned long cli_set;  /* bit i: option i was given on the command line (conf_mark_cli) */
};

/* 1 when option name was set by a profile named on the command line or in TOKTERM_PROFILE. */
int conf_profile_owns(const struct conf *c, const char *name);
/* Option name was given on the command line (setup); conf_given asks whether it was: there,
 * or for model and system also TOKTERM_MODEL, -s and --role (model_given, system_given). A
 * resume's role leaves what was given alone. */
void conf_mark_cli(struct conf *c, const char *name);
int conf_given(const struct conf *c, const char *name);
/* Fill c with built-in defaults. */
void conf_defaults(struct conf *c);
/* Free every string in c. */
void conf_free(struct conf *c);

/* Read the INI file at path (a missing file is not an error: returns 1). Top-level keys and a
 * [default] section apply first, then `profile = NAME` from the top level, unless
 * explicit_profile names another. Returns 0 (read), 1 (no file), -1 on a syntax or value error
 * (err gets "FILE:LINE: what is wrong"), a profile the file lacks (err lists those it has),
 * or a file that sets a command (api_key_cmd, cmd: keys) but fails conf_file_trusted. warn
 * gets one line per warning: unknown keys (with the nearest option name), a key or section
 * given twice (the last value wins), a file readable by other users that holds a key, a file
 * others can change. */
int conf_load(struct conf *c, const char *path, const char *explicit_profile,
                struct buf *err, struct buf *warn);

/* May the config file at path run commands (api_key_cmd, cmd: keys)? Like ssh's StrictModes:
 * the file and every directory above it belong to uid or to root, and no one else can write
 * them (a directory others can write needs the sticky bit, as /tmp has). Returns 1, or 0 with
 * why set to what is wrong and the command that fixes it ("FILE is writable by other users
 * (mode 666); fix it with: chmod go-w FILE"). conf_load refuses a file that sets a command
 * and fails this for the user running tokterm. */
int conf_file_trusted(const char *path, unsigned uid, struct buf *why);

/* 0 when url is an http:// or https:// URL with a host (and a port from 1 to 65535 when it
 * has one), without blank space or control characters; else -1 with err set to "NAME must be
 * an http:// or https:// URL ... not 'URL': what is wrong". conf_set checks base_url so. */
int conf_check_url(const char *url, const char *name, struct buf *err);

/* Set one option by name from text, as a config line would. Returns 0, or -1 with err set. */
int conf_set(struct conf *c, const char *key, const char *value, struct buf *err);
/* Give dst src's value of the option key (and its "has_" flag); an unknown key does nothing. */
void conf_copy(struct conf *dst, const struct conf *src, const char *key);

/* Apply the dialect's base URL variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) and
 * TOKTERM_MODEL from the environment (only where set), then the dialect's defaults
 * (conf_apply_dialect). An explicitly chosen profile wins over the environment for the
 * options its section sets. */
void conf_apply_env(struct conf *c);

/* The dialect of c->api (the default one when unset). */
const struct dialect *conf_dialect(const struct conf *c);

/* A dialect other than openai: base_url, model, api_key_env and auth_header still at the
 * OpenAI defaults take the dialect's (its base URL, model, the first of its key variables
 * that is set, else its first, and its auth header). conf_apply_env ends with it; a value
 * the command line sets later wins. */
void conf_apply_dialect(struct conf *c);

/* What to tell a user who has no key, for c's dialect (its own variables, not OpenAI's when
 * it is another): the variable to export (api_key_env) and another the dialect also reads
 * (NULL: none), the variable that points tokterm at another server (NULL: none) and what
 * such a server is, and an example profile, appended to profile as lines. */
struct conf_key_help {
    const char *key_env, *key_env_alt, *base_env, *server;
};
void conf_no_key_help(const struct conf *c, struct conf_key_help *h, struct buf *profile);

/* The API key from api_key_cmd, api_key_env or api_key (in that order). Returns a new string
 * (caller wipes and frees), or NULL with err set when the source is configured but fails, or
 * NULL with err empty when no key is configured. api_key_cmd (and each cmd: key of a pool)
 * runs as `sh -c` in its own process group, which is the terminal's foreground job while it
 * runs (it may ask for a passphrase there); its first output line is the key. It gets
 * key_cmd_timeout seconds to print it, exit and close its output; then its group is killed
 * (SIGTERM, SIGKILL 0.5 s later) and err says so. */
char *conf_api_key(const struct conf *c, struct buf *err);
/* The key the command cmd prints, run as api_key_cmd is (what names it in messages: "[mcp
 * NAME] key_cmd"), checked as every key is (util_key_take). NULL with err set, or err empty
 * when it printed nothing. */
char *conf_key_cmd(const char *cmd, const char *what, double timeout, struct buf *err);
/* Whether c names a key at all (api_key_cmd, a set api_key_env, api_key, or a "keys" pool),
 * without running any command: what "no API key" is decided by. */
int conf_has_key_source(const struct conf *c);

/* The password of the shared state (`state =`) from state_password_cmd (run like api_key_cmd),
 * else state_password_env, into c->state_password (NULL: the URL's own, or none). Returns 0, or
 * -1 with err set (the command failed, the variable is not set). */
int conf_state_password(struct conf *c, struct buf *err);

/* The key pool of "keys": *labels and *values get n new strings each (labels are variable
 * names or "cmd1", never a key). Returns n (0 when no pool is configured), or -1 with err set.
 * Free with conf_pool_free. */
int conf_key_pool(const struct conf *c, char ***labels, char ***values, struct buf *err);
void conf_pool_free(char **labels, char **values, int n);

/* The profiles a config file's text defines: its sections but [default], [role NAME] and
 * [mcp NAME], named as -P takes them ("[profile x]" is x), in order, each once. Returns a
 * NULL-terminated list of new strings (*n of them; free each and the list); the text is
 * read, not changed. */
char **conf_profile_names(const char *text, size_t len, size_t *n);
/* The same for the file at path (NULL or unreadable: none); its text is wiped after. Free
 * with util_strv_free. */
char **conf_file_profile_names(const char *path, size_t *n);

/* XDG directories for tokterm (new strings): kind = "config", "data", "state", "cache". */
char *conf_dir(const char *kind);

/* 1 when base_url points at this machine (a local server that needs no key). */
int conf_is_local(const struct conf *c);

/* Host part of base_url (new string), for display and storage (never the key). */
char *conf_host(const struct conf *c);

#endif
