/* script.h - the scripted front end: one prompt in, the answer streamed to stdout, an honest
 * exit status out. */
#ifndef TT_SCRIPT_H
#define TT_SCRIPT_H
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/attach.h"
#include "core/conf.h"
#include "core/session.h"

struct setup;
struct store;

/* Exit status of a turn whose answer could not be completed with its tools: a call was
 * refused (not allowed by --allow-tool) or the model asked for more than tool_rounds rounds. */
#define SCRIPT_EXIT_TOOLS 9

struct script_opts {
    const char *const *prompts; /* one per turn; the first already joined with stdin */
    int n_prompts;
    int json;             /* one JSON object at the end instead of the text */
    int reasoning;        /* copy reasoning to stderr */
    struct store *store;  /* NULL: nothing saved, no cache */
    int save;
    enum session_cache cache;
    struct setup *setup;  /* the key pool and the fallback (setup_use_keys); NULL = none */
    int resume;           /* continue a saved conversation: resume_id, or the latest when 0 */
    int64_t resume_id;
    int endpoint_named;   /* -P, --base-url or --api given: a resume goes where they say, even
                             when the conversation was held elsewhere (else that is refused) */
    int keep;             /* keep each answer for script_answer (shell mode) */
    const char **allow_tools; /* --allow-tool globs: the tool calls that may run (nothing
                                 else does: refused, the model is told, exit 9) */
    int n_allow_tools;
    struct attach_list *files; /* -f: the first prompt's attachments (taken), NULL = none */
    const char *trace;    /* --trace FILE: each turn's S, E and U records (as the chat's) */
};

/* Add the fields of one answer in the --json format (content, reasoning, model, finish_reason,
 * outcome, exit_code, http_status, error, usage, timings (null when !timed), connection_reused,
 * http_version, cached, attempts, key, fallback, quota) to o. Shared with `tokterm batch`.
 * model: shown when the stream named none (may be NULL). */
void script_result_fields(cJSON *o, const struct net_result *r, const char *content,
                          const char *reasoning, const char *model, int code, int timed);

/* Pass as content and reasoning to script_result_fields to leave the texts out of the tree:
 * script_json_write writes them in their place. */
extern const char script_json_streamed[];
#define SCRIPT_JSON_STREAMED script_json_streamed

/* Write o, built with SCRIPT_JSON_STREAMED, and a newline to fd: the same bytes as
 * cJSON_PrintUnformatted(o) with content[0..clen) and reasoning[0..rlen) as those members
 * would print (a NUL byte is \u0000, not the end), but a piece at a time: memory O(piece),
 * not a tree and a printed copy of each text. tty: what a terminal obeys is escaped too
 * (utf8_json_terminal). Returns 0, or -1 when a write failed (errno). */
int script_json_write(int fd, const cJSON *o, const char *content, size_t clen,
                      const char *reasoning, size_t rlen, int tty);

/* A scripted session, turn by turn (script_run's pieces, for shell mode): open with conf and
 * key (taken); NULL with the message printed and *code set. */
struct script;
struct script *script_open(struct conf *conf, char *key, const struct script_opts *o, int *code);
/* Send prompt as the next turn and wait for its end (SIGINT, SIGTERM, SIGHUP cancel it); the
 * answer streams to stdout unless quiet. Returns the turn's exit status. */
int script_turn(struct script *sc, const char *prompt, int quiet);
/* The last answer's text (o->keep or several prompts), "" when none. */
const char *script_answer(const struct script *sc);
/* The line chat, for a terminal the full-screen chat cannot drive (TERM=dumb, a type terminfo
 * does not know; why says which): script_open, then each line typed on stdin is a turn whose
 * answer streams to stdout, until Ctrl-D or /quit (0) or SIGTERM or SIGHUP (128 + it, as the
 * chat). Saved as the chat is. The exit status, also when the session could not open. */
int script_lines(struct conf *conf, char *key, const struct script_opts *o, const char *why);
/* 1 once a signal cancelled a turn or the reader of stdout went away. */
int script_stopped(const struct script *sc);
/* Warn of a store error, close the session and free sc (NULL: nothing). */
void script_close(struct script *sc);

/* Run one exchange with conf and key (taken). Returns the process exit status. */
int script_run(struct conf *conf, char *key, const struct script_opts *o);

#endif
