/* setup.h - the one front door: the command line, the environment and the configuration file
 * become what a front end needs to talk to a server: the profile (struct conf, which carries
 * the request settings), the key or key pool, the fallback (another profile with its key, or
 * the profile's fallback_model), the store and how the response cache is used. The chat, -p
 * and `tokterm batch` all come through here, so `keys =` and `fallback =` work the same in
 * each (main.c's table of commands says which steps each one needs).
 *
 * Error convention, for every module of src/ (and followed here):
 *  - Allocation failure is fatal: xmalloc and friends abort, so nobody checks for NULL.
 *  - A recoverable error returns -1 (or NULL) and fills a message for the caller: a struct buf
 *    *err, a char ** the caller frees, or a const char ** for static text. The message says
 *    what is wrong and what to do, without "tokterm: " and without a trailing newline.
 *  - Warnings that do not stop the work are appended to a struct buf *warn, one line each
 *    ("warning: ..." or "note: ...", continuation lines indented by two spaces).
 *  - Library modules (base, proto, tokens, text, store, net, core) never print and never exit:
 *    only the front ends (main.c, cmd/, tui/) write to stdout, stderr or the terminal, and they
 *    choose the exit status (2 for bad usage or configuration, 1 for internal errors). */
#ifndef TT_SETUP_H
#define TT_SETUP_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/cli.h"
#include "core/conf.h"
#include "core/session.h"

struct store;

/* What a command needs before its handler runs (main.c's table). */
enum setup_need {
    SETUP_CONFIG = 1 << 0,   /* the configuration: file, profile, environment, command line */
    SETUP_KEY = 1 << 1,      /* the key or key pool, and the fallback */
    SETUP_STORE = 1 << 2,    /* the store (conversations, response cache, quota state) */
    SETUP_TERMINAL = 1 << 3, /* a terminal on stdin and stdout: the chat */
};

struct setup {
    struct conf conf;          /* the profile with the environment and command line applied */
    int have_conf;
    int role_profile;          /* --role (or role =) chose the profile: where requests go was
                                  named (a resume of a conversation held elsewhere may go) */
    int role_model;            /* the role applied sets model (a resume keeps it) */
    char *key;                 /* the API key (wiped on free); NULL: none configured */
    int no_key;                /* a remote server, no key, no key pool and not --cache-only:
                                  nothing can be sent (the caller says what to set) */
    char **pool_labels, **pool_values; /* the key pool (`keys =`), n_pool of each */
    int n_pool;
    struct conf fallback;      /* the fallback profile (`fallback =`), when have_fallback */
    int have_fallback;
    char *fallback_key;        /* its key (wiped on free); may be NULL */
    struct store *store;       /* NULL: --incognito, or it could not be opened */
    int save;                  /* write conversations (profile's save, not --no-save) */
    enum session_cache cache;  /* --incognito, --cache-only, --no-cache, or the default */
    int resume;                /* --continue / --conversation: resume_id, the latest when 0 */
    int64_t resume_id;
    int at_exit;               /* setup_free runs right before _exit: the store's memory is
                                  left to it (store_close_at_exit) */
};

/* Read the configuration for a: the file (--config, else $XDG_CONFIG_HOME/tokterm/config), the
 * profile (-P, TOKTERM_PROFILE, else the file's), the environment, then the command line on
 * top. Returns 0, or -1 with err set ("config: FILE:LINE: ..." or a bad command-line value).
 * Warnings (unknown keys, a key in a readable file, --insecure) are appended to warn. */
int setup_conf(struct setup *su, const struct cli *a, struct buf *err, struct buf *warn);
/* Apply the role name (core/role.h) to su->conf, read from cfgpath, on top of its profile: a
 * role naming a profile loads that profile first unless profile (the one chosen explicitly)
 * is set. Returns 0, or -1 with err set (an unknown role lists the known ones). */
int setup_role(struct setup *su, const char *name, const char *cfgpath, const char *profile,
               struct buf *err);

/* --continue / --conversation ID into su->resume and su->resume_id: 0, or -1 with err set when
 * the id is not a positive number. */
int setup_resume(struct setup *su, const struct cli *a, struct buf *err);

/* How the response cache is used (su->cache) and whether conversations are saved (su->save):
 * 0, or -1 with err set for --cache-only with --no-cache or --incognito. */
int setup_cache(struct setup *su, const struct cli *a, struct buf *err);

/* The key of su->conf, then (unless su->no_key) its key pool and its fallback profile with the
 * fallback's key. Returns 0 (su->no_key says that nothing can be authenticated: the caller
 * says what to set), or -1 with err set (a key command or variable that fails, a bad pool
 * entry, a fallback profile that cannot be read). */
int setup_keys(struct setup *su, const struct cli *a, struct buf *err);

/* Open the store (none with --incognito): --db, the profile's db, else
 * $XDG_DATA_HOME/tokterm/tokterm.db, with the profile's cache limits. A store that cannot be
 * opened is a warning (the run goes on without saving or caching), unless required: then -1.
 * Notes (a file mode fixed, answers marked interrupted) and warnings go to warn. */
int setup_store(struct setup *su, const struct cli *a, int required, struct buf *warn);

/* The database path for a and su->conf (caller frees). */
char *setup_db_path(const struct cli *a, const struct conf *c);

/* Hand the key pool (moved) and the fallback (profile borrowed from su, which must outlive s;
 * key moved) to session s. Call before the first send. */
void setup_use_keys(struct setup *su, struct session *s);

/* The first local server (Ollama, llama.cpp) that answers on its usual port: 1 with its name
 * and base URL copied out, else 0. TOKTERM_LOCAL_PROBE ("Name=URL;Name=URL") replaces the list
 * (tests point it at the fake server). */
int setup_find_local(char *name, size_t name_size, char *url, size_t url_size);

/* Close the store and free (wiping the keys) everything su holds. */
void setup_free(struct setup *su);

#endif
