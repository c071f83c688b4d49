/* gemini.h - Google's Gemini API (generateContent): the request body, the stream of
 * GenerateContentResponse chunks (streamGenerateContent?alt=sse), a whole answer, and the
 * RetryInfo of its error bodies. No I/O. The same struct api_stream and emit callback as the
 * chat-completions codec (proto/api.h), so the network layer reads every dialect alike. */
#ifndef TT_GEMINI_H
#define TT_GEMINI_H
#include <stddef.h>

#include "proto/api.h"
#include "proto/sse.h"

/* The body of a generateContent request (the model goes in the URL, not here): `contents`
 * with roles user/model (consecutive messages of one role merged into one turn of several
 * parts; an empty message is left out, as Gemini refuses empty text), system messages as
 * `systemInstruction`, the sampling parameters in
 * `generationConfig` (maxOutputTokens, temperature, topP, seed). Caller frees. */
char *gemini_request_json(const struct api_request *r);

/* Decode one SSE event: text parts as API_CONTENT, `thought: true` parts as API_REASONING;
 * finishReason STOP -> finish "stop", MAX_TOKENS -> "length", any other (SAFETY, RECITATION,
 * BLOCKLIST, PROHIBITED_CONTENT, SPII, OTHER, ...) -> "content_filter", the reason itself in
 * finish_detail; promptFeedback.blockReason -> "content_filter", "prompt blocked: REASON";
 * usageMetadata (cumulative: each replaces the last; completion = candidates + thoughts,
 * reasoning = thoughts); modelVersion -> model. Returns 0 to go on (Gemini sends no end
 * marker: the stream ends with the response), 1 on an error object (st->error, error_code
 * = its status such as "UNAVAILABLE"), -1 on malformed JSON. */
int gemini_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                        void *ud);

/* Decode one chunk (a GenerateContentResponse object). Same returns. */
int gemini_stream_chunk(struct api_stream *st, const char *json, size_t n, api_emit_fn fn,
                        void *ud);

/* Decode a whole answer: one GenerateContentResponse, or the JSON array of them that
 * streamGenerateContent sends without alt=sse. Text with no finishReason is "stop". 0, or -1
 * with st->error set. */
int gemini_decode_completion(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                             void *ud);

/* The wait an error body asks for, in seconds: details[] of type google.rpc.RetryInfo,
 * retryDelay "12s" / "0.5s" (a protobuf Duration). -1 when the body has none (or not a valid
 * one, or over a day). The network layer takes it as it takes retry-after on a 429 or 503. */
double gemini_retry_delay(const char *body, size_t n);

#endif
