/* batch.h - `tokterm batch IN.jsonl > OUT.jsonl`: many independent requests from a JSON-lines
 * file, several in flight at once over the network thread's shared connection pool (HTTP/2
 * multiplexing when the server offers it), answered from the response cache where possible.
 *
 * Input: one JSON object per line (blank lines are skipped, CRLF and a UTF-8 BOM are fine):
 *   {"id": ID, "prompt": "text"}                       system prompt from -s / the profile,
 *                                                      or the line's own "system"
 *   {"id": ID, "messages": [{"role": "user", "content": "text"}, ...]}   the whole list as is
 * ID is a string or a number, unique in the file. Optional per line: "model", "temperature"
 * (0..2), "max_tokens" (> 0); they override the configuration. Other fields are ignored (one
 * warning on stderr names them). Roles: system, developer, user, assistant; content must be a
 * string.
 *
 * Output: one JSON line per input line, written with one write() as the item finishes, so the
 * lines come in order of completion, not input order ("line" gives the input line number):
 *   {"id", "line", "content", "reasoning", "model", "finish_reason", "outcome", "exit_code",
 *    "http_status", "error", "usage", "timings", "connection_reused", "http_version", "cached",
 *    "retries"}
 * with the field names and meanings of `tokterm --json`. A bad input line (not an object, no
 * id, a duplicate id, no prompt/messages, a bad value, a line longer than BATCH_MAX_LINE, a
 * prompt that does not fit the model's context window) gets a line with outcome "usage-error",
 * exit_code 2 and the reason in "error"; the run goes on. A file in which no line is a JSON
 * object (a JSON array, a pretty-printed object, a binary file) is refused as a whole (exit 2):
 * the error lines of bad lines before the first object wait for it (at most 1000 of them; a
 * file whose first 1000 non-blank lines hold no object is refused).
 *
 * The input is streamed: read a chunk at a time as requests leave, so memory holds the lines in
 * flight (2 x concurrency), the answers not yet written and a small key per id (duplicates,
 * --resume), never the whole input. A line is kept up to BATCH_MAX_LINE bytes; the rest of a
 * longer one is skipped unread and it gets an error line. Each request is checked against the
 * context window as the chat checks it (context_window or the model table, else 8,192; the
 * answer reserve max_tokens / reserve_tokens): one that does not fit is not sent and its line
 * says "prompt too long for the context window (N tokens > M)". context_policy = off skips the
 * check.
 *
 * Answers are not saved as conversations (a batch is not a chat); they do use and fill the
 * response cache, with the same keys as the chat (request_cache_key).
 *
 * --resume (needs --out FILE): ids whose line in FILE has outcome "complete" are skipped; every
 * other line of FILE (errors, cut answers, a half-written last line) is dropped from it (FILE
 * is rewritten through a temporary file and a rename) and its item is tried again; new lines
 * are appended. FILE is read a line at a time too.
 *
 * Exit status: 0 every item complete (or nothing to do); 3 one or more items were not complete
 * (see each line's outcome and exit_code); 2 bad usage or an unreadable/malformed input;
 * 130 interrupted (SIGINT/SIGTERM/SIGHUP: requests in flight are cancelled and not written,
 * every finished line is); 141 the output was closed; 1 other output errors. */
#ifndef TT_BATCH_H
#define TT_BATCH_H
#include "base/buf.h"
#include "core/conf.h"
#include "core/session.h"

struct store;

#define BATCH_DEFAULT_CONCURRENCY 8
#define BATCH_MAX_LINE ((size_t)64 << 20) /* longest input line read (bytes) */
#define BATCH_MAX_CONCURRENCY 1024

struct batch_opts {
    const char *in;        /* input file, "-" = stdin */
    const char *out;       /* output file (--out), NULL = stdout */
    int concurrency;       /* requests in flight at most */
    int resume;            /* --resume */
    int help;              /* --help was given: print batch_usage() and stop */
    struct store *store;   /* response cache and quota state (borrowed); NULL = none */
    enum session_cache cache;
    char **pool_labels;    /* a key pool (conf_key_pool; borrowed), n_pool keys; 0 = none */
    char **pool_values;
    int n_pool;
    const struct conf *fallback; /* profile used while the breaker is open (borrowed), with
                                    fallback_key (borrowed); NULL: conf's fallback_model, if any */
    const char *fallback_key;
    const char *metrics_listen; /* --metrics-listen HOST:PORT: serve /metrics while it runs */
    double metrics_linger;      /* --metrics-linger S: after the job, serve until one scrape
                                   has read the final figures, at most S seconds */
    int remote;                 /* --remote: through the provider's Batch API (batch_remote.h) */
    const char *remote_status;  /* --remote-status ID: print that batch's state */
    const char *remote_cancel;  /* --remote-cancel ID: cancel it */
    double remote_poll;         /* --remote-poll S: seconds between looks (0: the default) */
};

/* Parse the batch arguments; argv[0] is "batch". Fills o (store, cache, the pool and the
 * fallback are left as they are, the rest gets defaults). Returns 0, or -1 with a message in err (bad usage). */
int batch_parse(struct batch_opts *o, int argc, char **argv, struct buf *err);

/* Usage text of `tokterm batch` (static). */
const char *batch_usage(void);

/* "1:05", "1:02:03", or "--:--" for a negative or huge s (the progress bars' times). */
void batch_fmt_time(char *out, size_t size, double s);

/* Draw a progress bar on stderr: "\r[####----]" for fin of todo (when it fits), then stats,
 * then the rest of the row cleared. */
void batch_draw_bar(size_t fin, size_t todo, const char *stats);

/* Run the batch with conf (borrowed) and key (taken: wiped and freed; NULL for keyless local
 * servers). Prints progress and errors on stderr. Returns the process exit status (above). */
int batch_run(struct conf *conf, char *key, const struct batch_opts *o);

#endif
