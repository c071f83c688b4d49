/* api.h - the chat-completions protocol: request JSON, stream chunk decoding for every provider
 * dialect (OpenAI, Azure, llama.cpp old and new, Ollama, DeepSeek, OpenRouter, vLLM), and error
 * bodies. No I/O. */
#ifndef TT_API_H
#define TT_API_H
#include <stddef.h>

#include "base/buf.h"
#include "proto/sse.h"

struct api_message {
    const char *role;     /* "system", "user", "assistant" */
    const char *content;
};

struct api_request {
    const char *model;
    const struct api_message *messages;
    size_t n_messages;
    long max_tokens;            /* <= 0: not sent */
    const char *max_tokens_field; /* "max_tokens" (default) or "max_completion_tokens" */
    double temperature;
    int has_temperature;
    int stream;
    int include_usage;          /* stream_options.include_usage */
};

/* Build the JSON body of a chat-completions request; caller frees. */
char *api_request_json(const struct api_request *r);

enum api_kind {
    API_CONTENT = 1,  /* s/n: answer text */
    API_REASONING,    /* s/n: reasoning text (reasoning_content / reasoning) */
    API_FINISH,       /* stream state: finish_reason set */
    API_USAGE,        /* stream state: usage set */
};

struct api_usage {
    long long prompt, completion, total, reasoning, cached;
    int present;
};

/* Everything learnt from one stream so far. */
struct api_stream {
    char model[128];
    char finish[32];        /* finish_reason, "" until one arrives */
    struct api_usage usage;
    int done;               /* "[DONE]" seen */
    long chunks;            /* data events decoded */
    struct buf error;       /* error reported by the server inside the stream ("" = none) */
    char error_code[64];
    struct buf scratch;     /* unescaped text */
    /* The last plain text chunk's shape: its bytes before and after its one text string. A
     * chunk made of the same bytes around another valid string is decoded from that string
     * alone (two compares and one string scan instead of a walk over every member). */
    struct buf shape_pre, shape_post;
    int shape_kind;         /* API_CONTENT or API_REASONING; 0 = no shape */
    /* while a chunk is decoded: its text string (raw, quotes included) and what it emitted */
    const char *text_q0, *text_q1;
    int text_kind, n_text, n_other;
};

typedef void (*api_emit_fn)(void *ud, enum api_kind kind, const char *s, size_t n);

void api_stream_init(struct api_stream *st);
void api_stream_free(struct api_stream *st);

/* Decode one SSE event. Returns 0 to go on, 1 when the stream is over (a "[DONE]" event or an
 * error sent mid-stream: st->error says which), -1 when the data is not valid JSON (st->error
 * holds a message). Text is delivered through fn as it is found. */
int api_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn, void *ud);

/* Decode one chunk object (the data of an event). Same returns as api_stream_event. */
int api_stream_chunk(struct api_stream *st, const char *json, size_t n, api_emit_fn fn, void *ud);

/* Decode a whole non-streamed answer (an object "chat.completion" sent with
 * Content-Type application/json): text through fn, finish and usage into st. Returns 0, or -1
 * with st->error set (an error object, or not JSON). */
int api_decode_completion(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                          void *ud);

/* Turn an HTTP error answer into one line for the user: "HTTP 401: <server's message>".
 * Understands OpenAI/Azure {"error":{...}}, vLLM {"object":"error",...}, {"error":"text"},
 * {"detail":...}, {"message":...}, HTML pages from proxies, and plain text. The error code
 * (e.g. "insufficient_quota"), when any, is copied into code. */
void api_error_message(long status, const char *ctype, const char *body, size_t n,
                       struct buf *msg, char *code, size_t code_size);

/* Outcome of an exchange, from the stream state plus what the transport saw. */
enum api_outcome {
    API_OK = 0,        /* complete answer */
    API_CUT,           /* the server stopped it early: finish_reason length / content_filter */
    API_ERR_HTTP,      /* HTTP error status, or an error sent in the stream */
    API_ERR_NETWORK,   /* nothing of an answer arrived: connect, DNS, TLS, reset, timeout */
    API_ERR_TRUNCATED, /* the stream ended or broke before a finish_reason */
    API_CANCELLED,     /* the user cancelled */
    API_ERR_USAGE,     /* bad usage / config (set by callers, never by the transport) */
    API_CACHE_MISS,    /* --cache-only and the cache has no answer for the request */
};

/* Short name of an outcome: "complete", "cut", "api-error", ... */
const char *api_outcome_name(enum api_outcome o);

/* Process exit status for an outcome (documented in tokterm(1)). */
int api_outcome_exit(enum api_outcome o);

#endif
