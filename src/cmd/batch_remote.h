/* batch_remote.h - `tokterm batch --remote`: the same input and output as a local batch, sent
 * through the provider's Batch API instead of one request per line (half the price, the
 * provider's engine, up to 24 hours).
 *
 * OpenAI (api = openai or responses): the requests go up as a JSONL file (POST /files,
 * purpose "batch", multipart), each line {"custom_id", "method": "POST", "url", "body"} with
 * the url /v1/chat/completions or /v1/responses; POST /batches creates the batch with a 24h
 * completion window; GET /batches/ID is polled (validating, in_progress, finalizing, then
 * completed, failed, expired, cancelling, cancelled); the output and error files are read from
 * /files/ID/content. Anthropic (api = anthropic): POST /messages/batches {"requests":
 * [{"custom_id", "params"}]}, GET /messages/batches/ID (in_progress, canceling, ended), the
 * results JSONL from its results_url (succeeded, errored, canceled, expired per request).
 * Gemini: not supported (exit 2).
 *
 * Inputs larger than the provider's limits are split into several batches (OpenAI 50,000
 * requests / 200 MB a file, Anthropic 100,000 requests / 256 MB a batch; the environment's
 * TOKTERM_REMOTE_MAX_REQUESTS and TOKTERM_REMOTE_MAX_BYTES lower them). Each part is known in
 * the store by the SHA-256 of its requests and where they go (schema v11, remote_batches): the
 * same command run again after Ctrl-C or a kill picks the running batches up instead of
 * creating new ones; once the answers are written the rows are forgotten.
 *
 * Custom ids are "tt-N", N the item's place in the input; results come back in any order and
 * are put in input order through a spool file (memory holds a small record per line, never
 * the answers). Bad input lines get the local batch's error lines, in their place. */
#ifndef TT_BATCH_REMOTE_H
#define TT_BATCH_REMOTE_H
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"
#include "core/conf.h"
#include "core/loop.h"
#include "net/net.h"

struct store;
struct remote_job;

#define REMOTE_POLL_DEFAULT 10.0 /* seconds between two looks at a running batch */

/* A job for conf's provider with key (borrowed; NULL for none) and store (NULL: no resume).
 * NULL with err set when the provider has no batch API this client speaks (exit 2). */
struct remote_job *remote_job_new(const struct conf *c, const char *key, struct store *st,
                                  double poll_s, struct buf *err);

/* The file descriptor local lines (error lines of bad input) are written to while the input
 * is read; remote_job_note records where each went. */
int remote_job_spool(const struct remote_job *j);
void remote_job_note(struct remote_job *j, long line, off_t off, size_t len);

/* One request: the item of input line `line` (id: its canonical JSON, model) whose body (in
 * the profile's dialect, as a chat request would send it) goes into the batch. 0, or -1 with
 * err set (a failed upload: the run stops). */
int remote_job_add(struct remote_job *j, long line, const char *id, const char *model,
                   const char *body, struct buf *err);

/* What the run hands back for each request, in input order: the answer as a net_result
 * (outcome, status, model, finish, usage, error), its content and reasoning. Called once
 * with r NULL (line 0) before the first line is written: the output may be prepared. */
typedef void (*remote_emit_fn)(void *ud, long line, const char *id, const struct net_result *r,
                               const char *content, const char *reasoning, const char *model);

/* Send what is left, poll until every batch ended (a progress bar on stderr when tty, else
 * a line per change), then write every line in input order to out_fd: local lines copied,
 * answers through fn. Returns 0, 130 when a signal stopped the wait (the batches run on: the
 * same command picks them up), 141/1 when writing failed, 1 when the provider failed us
 * (err set). */
int remote_job_run(struct remote_job *j, struct loop *lp, int out_fd, int tty,
                   remote_emit_fn fn, void *ud, struct buf *err);

void remote_job_free(struct remote_job *j);

/* `--remote-status ID` (cancel = 0) and `--remote-cancel ID`: print the batch's state on
 * stdout. Returns 0, 2 (no batch API), 3 (an HTTP error) or 4 (the network failed). */
int remote_status(const struct conf *c, const char *key, const char *id, int cancel);

#endif
