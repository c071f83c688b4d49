/* responses.h - OpenAI's Responses API (POST {base}/responses): the request body, its
 * semantic stream events, a whole answer. No I/O. The same struct api_stream and emit
 * callback as the chat-completions codec (proto/api.h); error bodies are OpenAI's
 * (api_error_message reads them). */
#ifndef TT_RESPONSES_H
#define TT_RESPONSES_H
#include <stddef.h>

#include "proto/api.h"
#include "proto/sse.h"

/* The body: `model`, `input` (the messages as {role, content}), the system messages joined
 * as `instructions`, max_output_tokens, temperature, top_p (seed: the API has none, not
 * sent), `stream`, `store: false` (tokterm keeps the history itself), and `reasoning:
 * {summary: "auto"}` when r->reasoning_summary. Caller frees. */
char *responses_request_json(const struct api_request *r);

/* Decode one SSE event by its `type` (the data's, else the event name):
 * response.created / in_progress: the model; response.output_text.delta and
 * response.refusal.delta: API_CONTENT; response.reasoning_summary_text.delta and
 * response.reasoning_text.delta: API_REASONING (a blank line between summary parts);
 * response.completed: usage, finish "stop", done, returns 1; response.incomplete: usage,
 * incomplete_details.reason max_output_tokens -> "length", any other (content_filter) ->
 * "content_filter", the reason itself in finish_detail ("completed" when complete), done, returns 1; response.failed and
 * error: st->error and error_code, returns 1. Any other event is ignored (0). -1 on malformed
 * JSON. */
int responses_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                           void *ud);

/* Decode one event's data; type_hint (may be NULL) is the event name, used when the data has
 * no "type". Same returns. */
int responses_stream_chunk(struct api_stream *st, const char *json, size_t n,
                           const char *type_hint, api_emit_fn fn, void *ud);

/* Decode a whole answer (a "response" object): output[] message text as API_CONTENT,
 * reasoning summaries as API_REASONING, usage, status -> finish as in the stream. 0, or -1
 * with st->error set (status failed, an error object, not JSON). */
int responses_decode_completion(struct api_stream *st, const char *body, size_t n,
                                api_emit_fn fn, void *ud);

#endif
