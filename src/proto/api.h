/* api.h - the chat-completions protocol: request JSON, stream chunk decoding for every provider
 * dialect (OpenAI, Azure, llama.cpp old and new, Ollama, DeepSeek, OpenRouter, vLLM), and error
 * bodies. No I/O. */
#ifndef TT_API_H
#define TT_API_H
#include <stddef.h>

#include "base/buf.h"
#include "proto/sse.h"
#include "proto/tool.h"

/* A file that goes with a message as a content part of its own: an image or a PDF document,
 * its bytes as they are (each dialect encodes them: base64 in its own shape). core/attach.c
 * makes them; a text file is no part: it is in the message's content, fenced. */
enum api_part_kind {
    API_PART_IMAGE = 1, /* chat completions image_url (a data URL), responses input_image,
                           anthropic image (source base64), gemini inline_data */
    API_PART_DOCUMENT,  /* a PDF: chat completions file (file_data), responses input_file,
                           anthropic document, gemini inline_data application/pdf */
};
struct api_part {
    enum api_part_kind kind;
    const char *mime;            /* "image/png", "application/pdf" */
    const char *name;            /* the file's name (a document's filename) */
    const unsigned char *data;
    size_t len;
};

struct api_message {
    const char *role;     /* "system", "user", "assistant", "tool" */
    const char *content;
    /* assistant: the tool calls the answer made, in order (wire names, the ids the provider
     * gave); content may be "" then */
    const struct tool_call *calls;
    size_t n_calls;
    /* assistant, anthropic: the answer's thinking blocks as a JSON array (thinking with its
     * signature, redacted_thinking), sent back before its tool_use blocks; NULL: none */
    const char *thinking_json;
    /* role "tool": the result (content) of the call with this id and wire name */
    const char *tool_call_id, *tool_name;
    int tool_error;       /* the result is an error (anthropic is_error) */
    const struct api_part *parts; /* user: files before the text, n_parts of them; NULL: the
                                     content is the whole message */
    size_t n_parts;
};

/* A plain message (role, text) as an initializer: API_MSG("user", "hi"). */
#define API_MSG(r, c) {.role = (r), .content = (c)}

/* A tool the model may call (core/tools.h tools_api): its wire name ^[a-zA-Z0-9_-]{1,64}$,
 * description (NULL: none) and input schema as JSON text (NULL: any object). */
struct api_tool {
    const char *name;
    const char *description;
    const char *schema;
};

/* The data URL of a part, "data:<mime>;base64,...", appended to out. */
void api_part_data_url(struct buf *out, const struct api_part *p);

/* The sampling parameters, in the order a request body carries them: the one table to extend.
 * Each line gives the field(s) of struct api_request and of struct conf (API_PARAM_FIELD), the
 * body member (api_request_json), the configuration key and its check (conf.c's option table),
 * the command-line option and its --help line (cli.c), its layering onto the profile
 * (setup.c), the per-line override of `tokterm batch` and its --help (api_param_from_json,
 * batch.c), and so the response-cache key, which hashes the body:
 *   X(name, kind, min, max, long option, short option or 0, metavar, help)
 * kind INT: `long name`, a whole number, not sent when <= 0 (the configuration and the
 * command line also take 0: not sent); REAL: `double name` and `int has_name`, a number, sent
 * when has_name is set; WHOLE: `long name` and `int has_name`, a whole number, sent when
 * has_name is set (0 too). min..max is the range a value may take (max at most 2^53). An
 * unset parameter is not sent, so a new line leaves every body that does not set it byte for
 * byte the same (and its cache entry valid); besides its line, only the docs and the shell
 * completions name it. */
#define API_SAMPLING(X)                                                                            \
    X(max_tokens, INT, 1, 1e7, "max-tokens", 0, "N", "limit the answer's length")                  \
    X(temperature, REAL, 0, 2, "temperature", 't', "T", "sampling temperature (0..2)")             \
    X(top_p, REAL, 0, 1, "top-p", 0, "P", "nucleus sampling: the top P of probability (0..1)")     \
    X(seed, WHOLE, 0, 9007199254740991, "seed", 0, "N", "sample repeatably with seed N")           \
    /* one line per parameter, each ending in a backslash */

#define API_PARAM_FIELD_INT(name) long name;
#define API_PARAM_FIELD_REAL(name) double name; int has_##name;
#define API_PARAM_FIELD_WHOLE(name) long name; int has_##name;
/* X callback declaring a parameter's field(s) in a struct: API_SAMPLING(API_PARAM_FIELD). */
#define API_PARAM_FIELD(name, kind, min, max, opt, shrt, metavar, help) API_PARAM_FIELD_##kind(name)

/* Copy one parameter between two structs with the fields above (a struct conf into a struct
 * api_request): #define X(name, kind, ...) API_PARAM_COPY_##kind(dst, src, name). */
#define API_PARAM_COPY_INT(dst, src, name) (dst)->name = (src)->name;
#define API_PARAM_COPY_REAL(dst, src, name) \
    (dst)->name = (src)->name;              \
    (dst)->has_##name = (src)->has_##name;
#define API_PARAM_COPY_WHOLE(dst, src, name) API_PARAM_COPY_REAL(dst, src, name)

struct api_request {
    const char *model;
    const struct api_message *messages;
    size_t n_messages;
    const char *max_tokens_field; /* "max_tokens" (default) or "max_completion_tokens" */
    API_SAMPLING(API_PARAM_FIELD)
    int stream;
    int include_usage;          /* stream_options.include_usage */
    int reasoning_summary;      /* responses: ask for reasoning summaries (reasoning.summary
                                   "auto"); only reasoning models take it */
    int reasoning_effort;       /* API_EFFORT_*: how hard a reasoning model thinks; NONE = not
                                   sent. A word, and a structure of its own in each dialect, so
                                   not a line of API_SAMPLING: reasoning_effort (chat
                                   completions), reasoning {effort, summary} (responses),
                                   thinking {budget_tokens} (anthropic: no temperature then),
                                   generationConfig.thinkingConfig (gemini) */
    const struct api_tool *tools; /* the tools the model may call (none: no tools member) */
    size_t n_tools;
};

/* Reasoning effort levels (--reasoning-effort, reasoning_effort in a profile, /think). */
enum { API_EFFORT_NONE, API_EFFORT_LOW, API_EFFORT_MEDIUM, API_EFFORT_HIGH };
/* "none", "low", "medium", "high" (NULL past them). */
const char *api_effort_name(int level);
/* The level of a word (NULL, "" and "none"/"off": API_EFFORT_NONE); -1 for another word. */
int api_effort_parse(const char *word);
/* The thinking budget in tokens of a level, for the dialects that take one (anthropic,
 * gemini): 1024, 4096, 16384; 0 for NONE. */
long api_effort_budget(int level);

/* One sampling parameter, described for code that walks them all (the batch override, the
 * command line). */
struct api_param {
    const char *name;      /* "temperature": the body member and the configuration key */
    int real;              /* REAL (a number) rather than INT or WHOLE (a whole number) */
    int flagged;           /* REAL, WHOLE: sent when its has_ flag is set; INT: when above 0 */
    double min, max;
    const char *opt;       /* long command-line option: "max-tokens" */
    char shrt;             /* short command-line option, 0 = none */
    const char *metavar, *help;
    size_t off, has_off;   /* where it is in struct api_request (has_off: if flagged) */
};

/* The parameters of API_SAMPLING, in its order; API_N_PARAMS of them. */
extern const struct api_param api_params[];
enum {
#define API_PARAM_COUNT_(name, kind, min, max, opt, shrt, metavar, help) API_PARAM_IDX_##name,
    API_SAMPLING(API_PARAM_COUNT_)
#undef API_PARAM_COUNT_
    API_N_PARAMS
};

/* Set parameter p of r from the JSON value v (a batch line's override): 0 when v is a number in
 * range (whole for INT and WHOLE), else -1 with err set ("\"temperature\" must be a number
 * from 0 to 2"). */
int api_param_from_json(struct api_request *r, const struct api_param *p, double v, int is_number,
                        struct buf *err);

/* Build the JSON body of a chat-completions request; caller frees. */
char *api_request_json(const struct api_request *r);

enum api_kind {
    API_CONTENT = 1,  /* s/n: answer text */
    API_REASONING,    /* s/n: reasoning text (reasoning_content / reasoning) */
    API_FINISH,       /* stream state: finish_reason set */
    API_USAGE,        /* stream state: usage set */
    API_TOOL_CALL,    /* stream state: a tool call started (st->calls[st->n_calls - 1]) */
};

struct api_usage {
    long long prompt, completion, total, reasoning, cached;
    int present;
};

/* Everything learnt from one stream so far. */
struct api_stream {
    char model[128];
    char finish[32];        /* finish_reason, "" until one arrives: "stop", "length",
                               "content_filter" for the native dialects (gemini.c, ...) */
    char finish_detail[48]; /* the native dialects: the server's own word behind finish
                               ("end_turn", "MAX_TOKENS", "SAFETY", "prompt blocked: OTHER",
                               "max_output_tokens"), for messages and --json; else "" */
    struct api_usage usage;
    int done;               /* "[DONE]" seen */
    long chunks;            /* data events decoded */
    int usage_bad;          /* a usage count was of the wrong type or range: it was ignored */
    int usage_good;         /* usage counts read */
    struct buf error;       /* error reported by the server inside the stream ("" = none) */
    char error_code[64];
    struct buf scratch;     /* unescaped text */
    /* The last plain text chunk's shape: its bytes before and after its one text string. A
     * chunk made of the same bytes around another valid string is decoded from that string
     * alone (two compares and one string scan instead of a walk over every member). */
    struct buf shape_pre, shape_post;
    int shape_kind;         /* API_CONTENT or API_REASONING; 0 = no shape */
    /* The bytes between two such chunks' texts in an event stream: shape_post, the blank line,
     * the `data:` field (shape_gap_dl bytes: "data:" or "data: ") and shape_pre; built by
     * api_stream_sse_run when first needed (shape_gap_dl 0: not built for this shape). */
    struct buf shape_gap;
    size_t shape_gap_dl;
    /* while a chunk is decoded: its text string (raw, quotes included) and what it emitted */
    const char *text_q0, *text_q1;
    int text_kind, n_text, n_other;
    /* a dialect decoder's own state between events (0 after api_stream_init) */
    int dstate;
    long dindex;
    long long dcount[4];
    /* The answer's tool calls as they stream, in every dialect: id, wire name, and the
     * arguments assembled exactly from their fragments (name NULL: core maps it). */
    struct tool_call *calls;
    size_t n_calls, cap_calls;
    long *call_keys;          /* per call: the dialect's index for it in the stream */
    size_t cap_keys;
    int limit;                /* API_STREAM_LIMIT_*: one of tokterm's own limits on tool calls
                                 ended the stream (error says which) */
    size_t args_bytes;        /* the arguments of every call so far, bytes */
    size_t args_room;         /* the most bytes they may still grow by (the caller's answer
                                 limit; SIZE_MAX after api_stream_init: none) */
    struct buf thinking_json; /* anthropic: the thinking blocks with their signatures, as a
                                 JSON array to send back with tool results ("" none) */
    struct buf dtext, dsig;   /* anthropic: the thinking block being streamed, its signature */
};

/* struct api_stream's limit: tokterm's bounds on one answer's tool calls (more than
 * API_CALLS_MAX calls, or a call's arguments over API_CALL_ARGS_MAX) ended it; the stream is
 * over as after an error, but the server reported none (an outcome of API_LIMIT, not a
 * server's error: until 2026-12 it read "the server reported an error mid-stream", exit 3). */
#define API_STREAM_LIMIT_CALLS 1
/* ... or the arguments passed args_room: the answer's limit (max_answer_mb), which text and
 * arguments share (until 2026-12 arguments were not counted: 128 calls of 8 MiB unasked for
 * held 1 GB). */
#define API_STREAM_LIMIT_ANSWER 2

typedef void (*api_emit_fn)(void *ud, enum api_kind kind, const char *s, size_t n);

void api_stream_init(struct api_stream *st);
void api_stream_free(struct api_stream *st);

/* Decode one SSE event. Returns 0 to go on, 1 when the stream is over (a "[DONE]" event or an
 * error sent mid-stream: st->error says which), -1 when the data is not valid JSON (st->error
 * holds a message). Text is delivered through fn as it is found. */
int api_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn, void *ud);

/* Decode one chunk object (the data of an event). Same returns as api_stream_event. */
int api_stream_chunk(struct api_stream *st, const char *json, size_t n, api_emit_fn fn, void *ud);

/* What api_stream_sse_run decoded. */
struct api_run {
    struct buf *text;      /* in: the text is appended here (unescaped) */
    size_t room;           /* in: at most this many bytes: the run stops before an event whose
                              text would pass it */
    enum api_kind kind;    /* out: API_CONTENT or API_REASONING, the kind of all that text */
    unsigned long events;  /* out: events consumed */
    unsigned long deltas;  /* out: of them, those with text (not empty) */
    unsigned long joined;  /* out: of them, those whose end and the next event's start up to
                              its text were checked in one compare (shape_gap) */
    unsigned long wide;    /* out: of them, those the AVX-512 loop decoded (api_stream_simd) */
    int full;              /* out: 1 when it stopped at an event whose text would pass room */
};

/* The fast path of a stream of plain text chunks: decode the whole SSE events at the start of
 * s[0..n) that are one `data:` line holding a chunk of the last chunk's shape (see shape_pre)
 * and a blank line, ended by LF alone, as api_stream_event would (their data at most
 * max_data - 1 bytes), appending their text to r->text. Stops at the first other byte, at an
 * event not whole in s, or at one past r->room. Returns the bytes consumed. Call it only where
 * an SSE parser would be at the start of an event with nothing pending (sse_idle), and hand it
 * the rest. */
size_t api_stream_sse_run(struct api_stream *st, const char *s, size_t n, size_t max_data,
                          struct api_run *r);
/* 2 (the default): api_stream_sse_run uses AVX-512BW or AVX2 where the CPU has them; 1: AVX2
 * at most; the tests set 1 and 0 to check the other paths too. */
extern int api_stream_simd;

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

/* The request member an OpenAI-shaped error body blames ({"error": {"param": "temperature"}}:
 * a 400 unsupported_parameter or unsupported_value) into out; "" when it names none. */
void api_error_param(const char *body, size_t n, char *out, size_t size);

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
    API_LIMIT,         /* stopped by one of tokterm's own limits (--max-answer-mb, --max-time);
                          the text that came is kept */
};

/* The outcome of a chat-completions stream whose finish is set: API_CUT for "length" and
 * "content_filter" (with a message appended to msg), else API_OK. */
enum api_outcome api_finish_outcome(const struct api_stream *st, struct buf *msg);

/* Short name of an outcome: "complete", "cut", "api-error", ... */
const char *api_outcome_name(enum api_outcome o);

/* Process exit status for an outcome (documented in tokterm(1)). */
int api_outcome_exit(enum api_outcome o);

#endif
