/* api_int.h - private to src/proto/: the pieces of api.c that every dialect's codec shares
 * (gemini.c, responses.c, ...): reading strings, usage counts and error objects with jscan,
 * messages for the user from server text, and building request bodies with cJSON. */
#ifndef TT_API_INT_H
#define TT_API_INT_H
#include <stddef.h>

#include "proto/api.h"
#include "proto/jscan.h"

struct cJSON;

#define API_MSG_MAX 2000 /* bytes of a server's text kept in one message for the user */

/* The value of parameter p in r (*v for REAL, *n for a whole number); 0 when it is not sent. */
int api_param_get(const struct api_request *r, const struct api_param *p, double *v, long *n);

/* The body member a parameter goes by in a dialect, NULL to leave it out. */
typedef const char *(*api_param_name_fn)(void *ud, const struct api_param *p);
/* Add every set sampling parameter of r to the object o, named by name_of (NULL: its own
 * name); whole numbers as exact digits. */
void api_params_add(struct cJSON *o, const struct api_request *r, api_param_name_fn name_of,
                    void *ud);
/* Print o unformatted, delete it, and return the text (caller frees); aborts when out of
 * memory. */
char *api_json_finish(struct cJSON *o);

/* Append server text to a message for the user: controls made visible, line breaks and tabs
 * as spaces, at most max bytes ("..." marks a cut, never inside a UTF-8 sequence). */
void api_msg_append(struct buf *msg, const char *s, size_t n, size_t max);
/* Replace st->error with server text (as api_msg_append, API_MSG_MAX bytes). */
void api_error_set(struct api_stream *st, const char *s, size_t n);
/* An error code is an identifier: anything but printable ASCII becomes '?'. */
void api_code_clean(char *code);
/* Copy s[0..n) into dst as a string, cut to size - 1 bytes. */
void api_copy(char *dst, size_t size, const char *s, size_t n);
/* A raw string span (jscan_string's) with backslash escapes (escaped) decoded into st->scratch:
 * *s and *n then point there; unchanged when not escaped. */
void api_unescape_span(struct api_stream *st, const char **s, size_t *n, int escaped);
/* Hand the text of the raw string span s[0..n) to fn as kind, decoded; nothing when s is NULL
 * or the text is empty. */
void api_emit_span(struct api_stream *st, enum api_kind kind, const char *s, size_t n,
                   int escaped, api_emit_fn fn, void *ud);
/* A string value (or null) at the scanner: -1 on bad JSON, 0 when null, empty or not a string
 * (skipped), 1 with the decoded text in *out, *outn (valid until the next call). */
int api_text(struct api_stream *st, struct jscan *j, const char **out, size_t *outn);
/* A short string value into dst (nothing for null or another type); -1 on bad JSON. */
int api_short(struct api_stream *st, struct jscan *j, char *dst, size_t size);
/* One usage count into *dst: a whole number from 0 to 2^53 (st->usage_good counts it);
 * anything else is skipped and flags st->usage_bad. -1 only on bad JSON. */
int api_usage_number(struct api_stream *st, struct jscan *j, long long *dst);
/* Where a usage count is found: member `key` of the top-level object (in NULL) or of its
 * member object `in`, stored at offset off of struct api_usage. A table ends with key NULL. */
struct api_usage_key {
    const char *in, *key;
    size_t off;
};
/* A usage object at the scanner (or null) into st->usage, by keys: each count as
 * api_usage_number; usage.present once one count was read, total = prompt + completion when
 * none came. -1 on bad JSON. */
int api_usage_read(struct api_stream *st, struct jscan *j, const struct api_usage_key *keys);
#define API_USAGE_AT(in, key, field) {in, key, offsetof(struct api_usage, field)}
/* An OpenAI-shaped error at the scanner ({"message", "code", "type"} or a string) into
 * st->error and st->error_code. -1 on bad JSON. */
int api_error_obj(struct api_stream *st, struct jscan *j);
/* A decoder of one chunk (api_stream_chunk): 0, 1 when the stream is over, -1 malformed. */
typedef int (*api_chunk_fn)(struct api_stream *st, const char *json, size_t n, api_emit_fn fn,
                            void *ud);
/* A whole non-streamed answer decoded by decode: 0, or -1 with st->error set. An answer with
 * text but no finish is "stop"; one with neither keeps finish "" (no answer at all). */
int api_decode_whole(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                     void *ud, api_chunk_fn decode);
/* st->error = "the server sent malformed JSON (why): <the first bytes>"; returns -1. */
int api_malformed(struct api_stream *st, const char *json, size_t n, const char *why);

/* Counts the text (content and reasoning) an emit function is handed, for the whole-body
 * decoders: an answer with text and no stated reason is complete, one with neither is none.
 * Pass api_textcount_emit with a struct api_textcount {fn, ud, 0}. */
struct api_textcount {
    api_emit_fn fn;
    void *ud;
    size_t text;
};
void api_textcount_emit(void *ud, enum api_kind kind, const char *s, size_t n);

/* The last plain text chunk's shape (struct api_stream's shape_pre, shape_post), for any
 * dialect whose text events differ only in their one text string. api_shape_match: json is
 * that shape around another valid string: its text emitted (st->chunks counted), 1; else 0
 * and a full decode is needed. api_shape_keep, after a full decode that recorded text_q0,
 * text_q1, text_kind, n_text and n_other: keep json's shape when plain (one text string and
 * nothing else emitted), else forget the old one. */
int api_shape_match(struct api_stream *st, const char *json, size_t n, api_emit_fn fn, void *ud);
void api_shape_keep(struct api_stream *st, const char *json, size_t n, int plain);

/* Tool calls as they stream (st->calls), for every dialect. api_call_get: the call the dialect
 * knows by key (its index in the stream); make: start one when there is none (API_TOOL_CALL is
 * emitted); NULL when there is none, or too many (API_CALLS_MAX: st->error set). */
#define API_CALLS_MAX 128
#define API_CALL_ARGS_MAX ((size_t)8 << 20)
struct tool_call *api_call_get(struct api_stream *st, long key, int make, api_emit_fn fn,
                               void *ud);
/* Append a fragment of the arguments (n bytes, decoded): 0, or -1 past API_CALL_ARGS_MAX
 * (st->error set). */
int api_call_args(struct api_stream *st, struct tool_call *c, const char *s, size_t n);
/* Replace *dst with s[0..n) (a call's id or name). */
void api_call_str(char **dst, const char *s, size_t n);
/* The call ids of one request as they are sent. The Messages API wants each to match
 * ^[a-zA-Z0-9_-]+$, and it and the Responses API want each unique in a request; a
 * conversation begun elsewhere may break both: tokterm names the calls of a server that gives
 * no id (Gemini) call_ROUND_N afresh in every turn (session.c), and other servers' ids may
 * hold '.' or ':'. Such an id is sent made valid and unique, and its result names the same
 * (until 2026-12 they were sent as saved: every -c of a Gemini conversation with tools in two
 * turns failed with HTTP 400 there). */
struct api_call_ids {
    struct api_call_id {
        const char *raw; /* as saved */
        char *wire;      /* as sent */
    } *v;
    size_t n, cap;
};
/* The id a call is sent with (owned by ids); calls in request order. */
const char *api_call_ids_call(struct api_call_ids *ids, const char *raw);
/* The id a result is sent with: its call's, the latest call of that id before it. */
const char *api_call_ids_result(const struct api_call_ids *ids, const char *raw);
void api_call_ids_free(struct api_call_ids *ids);
/* The JSON of a request's tools for a dialect: each tool as {name_key: wire name,
 * "description", schema_key: the schema (an empty object schema when it has none)}. */
struct cJSON *api_tool_schema(const struct api_tool *t);
#endif
