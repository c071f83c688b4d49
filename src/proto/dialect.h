/* dialect.h - the provider dialects: one table of adapters, one entry per wire protocol
 * ("openai" chat completions, "anthropic" Messages, "gemini", "responses"), like curl's TLS
 * backends: a struct of plain data (URL, key variables, path, headers) and function pointers
 * (request body, stream decoder, whole-body decoder, error body, outcome). No I/O and no curl:
 * the caller (core/request.c, net/) builds the URL and the headers from the data here.
 *
 * Use:
 *   const struct dialect *d = dialect_find(name);          NULL: unknown (see dialect_names)
 *   char *path = dialect_path(d, model);                   "/messages", "/models/M:stream..."
 *   body = d->request_json(&api_request);                  what api_request_json() is today
 *   headers: "<d->auth_header>: <d->auth_prefix><key>" then every d->headers[i]
 *   each SSE event: r = d->stream_event(&st, ev, emit, ud) (0 on, 1 over, -1 bad JSON)
 *   a 2xx application/json body: d->decode_body(&st, body, n, emit, ud)
 *   an HTTP error body: d->error_message(status, ctype, body, n, &msg, code, sizeof code),
 *                       then dialect_retry_code(d, status, code, &never) for the generic
 *                       rules (d->retryable folded in: net/net.c's retry decision),
 *                       and the wait it asks for: d->retry_delay ? d->retry_delay(body, n) : -1
 *   st.finish set: outcome = d->finish_outcome(&st, &msg) (API_OK or API_CUT + a message)
 *
 * Every decoder fills the same struct api_stream (proto/api.h) and emits API_CONTENT and
 * API_REASONING through the same api_emit_fn, so pacing, retries, the cache, the store and the
 * status bar need not know the dialect. Conventions every decoder keeps:
 *   - st->finish is set (and API_FINISH emitted) only when the answer is known to be whole: an
 *     empty finish at the end of the stream is API_ERR_TRUNCATED. It holds the chat-completions
 *     word for the reason ("stop", "length", "content_filter", "tool_calls"), so the cache and
 *     the conversation treat every dialect alike; st->finish_detail holds the server's own
 *     word ("max_tokens", "SAFETY") for messages and --json.
 *   - st->usage.prompt counts every input token, cached ones included (as OpenAI's
 *     prompt_tokens does); st->usage.cached those read from the provider's cache.
 *   - an error in the stream ends it (return 1) with st->error and st->error_code (the
 *     provider's code or type, e.g. "overloaded_error"; ratelimit_should_retry() knows the
 *     retryable ones).
 */
#ifndef TT_DIALECT_H
#define TT_DIALECT_H
#include <stddef.h>

#include "base/buf.h"
#include "proto/api.h"
#include "proto/sse.h"

#define DIALECT_MAX_KEY_ENV 3
#define DIALECT_MAX_HEADERS 3

struct dialect {
    const char *name;        /* "openai": the profile's `api =` and --api */
    const char *base_url;    /* default base URL, no trailing slash */
    const char *model;       /* default model, when the profile names none */
    const char *base_env;    /* variable that overrides the base URL ("OPENAI_BASE_URL"), or NULL */
    const char *key_env[DIALECT_MAX_KEY_ENV]; /* key variables, the first one set wins; NULL ends */
    const char *path;        /* request path after the base URL; "{model}" stands for the model
                                (dialect_path() substitutes it, escaped) */
    const char *models_path; /* the model list's path after the base URL */
    const char *auth_header; /* "Authorization", "x-api-key", "x-goog-api-key" */
    const char *auth_prefix; /* put before the key: "Bearer " or "" */
    const char *headers[DIALECT_MAX_HEADERS]; /* extra "Name: value" lines; NULL ends */
    /* The JSON body of a request; caller frees. */
    char *(*request_json)(const struct api_request *r);
    /* One SSE event: 0 to go on, 1 when the stream is over (its end, or an error in it: then
     * st->error says which), -1 when the data is not valid JSON (st->error says so). */
    int (*stream_event)(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                        void *ud);
    /* A whole answer sent as application/json: 0, or -1 with st->error set. */
    int (*decode_body)(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                       void *ud);
    /* An HTTP error answer to one line "HTTP 529: <server's message>" in msg, the provider's
     * error code or type (when any) in code (see api_error_message). */
    void (*error_message)(long status, const char *ctype, const char *body, size_t n,
                          struct buf *msg, char *code, size_t code_size);
    /* Whether an error with this status and code (from error_message or the stream) is worth
     * another attempt: 1 yes, 2 yes, as a rate limit, 0 never, -1 the generic rules decide
     * (ratelimit_should_retry). */
    int (*retryable)(long status, const char *code);
    /* The outcome of a stream whose st->finish is set: API_OK, or API_CUT with a message for
     * the user appended to msg. */
    enum api_outcome (*finish_outcome)(const struct api_stream *st, struct buf *msg);
    /* The wait an HTTP error body asks for, in seconds (Gemini's RetryInfo.retryDelay on a
     * 429), -1 when it names none; taken as a retry-after header would be. NULL: the dialect's
     * bodies never name one (its headers do). */
    double (*retry_delay)(const char *body, size_t n);
};

/* The dialect named name ("openai", "anthropic", ...; NULL or "" = "openai"), or NULL when
 * there is none by that name. */
const struct dialect *dialect_find(const char *name);

/* The error code to hand the generic retry rules (ratelimit_should_retry) for an attempt that
 * ended with HTTP status and the provider's code (NULL: none), the dialect's retryable
 * verdict folded in: "server_error" ("overloaded" for an overload: Anthropic's
 * overloaded_error; "rate_limit_exceeded" for a rate limit) for a streamed error in a 2xx
 * answer the dialect retries (the generic rules know OpenAI's and Anthropic's words, not every
 * dialect's), else code
 * itself (NULL for none). *never is set to 1 when the dialect says another attempt fails the
 * same (then nothing is to be retried), else to 0. */
const char *dialect_retry_code(const struct dialect *d, long status, const char *code,
                               int *never);

/* 1 when model is by its name one of another provider's (gpt-, o1..o4, chatgpt- are OpenAI's;
 * claude- Anthropic's; gemini-, gemma- Google's) than the one d's default base URL is (the
 * provider's own API, which serves no other's models); 0 when it is d's, or not known. */
int dialect_model_foreign(const struct dialect *d, const char *model);

/* The i-th dialect of the table (0 = the default), NULL past the last: for code that walks
 * them all (the fuzz target, tests). */
const struct dialect *dialect_at(size_t i);

/* The default dialect: OpenAI chat completions, what tokterm spoke before there were others. */
const struct dialect *dialect_default(void);

/* Append the names of the dialects, "openai|anthropic|...", to out (messages, --help). */
void dialect_names(struct buf *out);

/* d->path with "{model}" replaced by model, percent-escaped outside [A-Za-z0-9._~-] (a model
 * name may hold "/" or ":"); caller frees. */
char *dialect_path(const struct dialect *d, const char *model);

/* The entries (each defined next to its decoder). */
extern const struct dialect dialect_openai;    /* proto/dialect.c, api.c's functions */
extern const struct dialect dialect_anthropic; /* proto/anthropic.c */
extern const struct dialect dialect_gemini;    /* proto/gemini.c */
extern const struct dialect dialect_responses; /* proto/responses.c */

#endif
