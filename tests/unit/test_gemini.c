/* test_gemini.c - the Gemini dialect: streams (CRLF framed) at every split, finish reasons,
 * usage, errors and their RetryInfo, request bodies, whole answers, hostile input. */
#include "config.h"
#include "proto/gemini.h"
#include "proto/dialect.h"
#include "stream_check.h"

#include <cjson/cJSON.h>

/* member names are case-sensitive in the API */
#define cJSON_GetObjectItem cJSON_GetObjectItemCaseSensitive

static void chunk(struct got *g, const char *json)
{
    got_init(g, gemini_stream_event);
    g->ret = gemini_stream_chunk(&g->st, json, strlen(json), got_emit, g);
}

/* A candidate chunk with finishReason `reason`. */
static void finish_case(const char *reason, const char *finish, const char *detail)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}],\"role\":\"model\"},"
             "\"finishReason\":\"%s\",\"index\":0}]}", reason);
    struct got g;
    chunk(&g, json);
    TAP_OK(g.ret == 0 && strcmp(g.st.finish, finish) == 0 &&
           strcmp(g.st.finish_detail, detail) == 0,
           "finishReason %s -> finish \"%s\" detail \"%s\" (got \"%s\" \"%s\")", reason, finish,
           detail, g.st.finish, g.st.finish_detail);
    got_free(&g);
}

static void test_streams(void)
{
    struct got g;
    size_t n;
    char *s = fixture_read("gemini_thinking.sse", &n);
    TAP_OK(strstr(s, "}\r\n\r\ndata: ") != NULL, "the fixture is CRLF framed, as Gemini sends");
    stream_check_splits("gemini_thinking.sse", gemini_stream_event, s, n, &g);
    TAP_STR(buf_str(&g.content), "Hello! \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 How can I help \"you\" today?",
            "thinking: content (escapes, a surrogate pair)");
    TAP_STR(buf_str(&g.reasoning), "**Considering the greeting**\n\nThe user says hi.",
            "thinking: thought parts are reasoning");
    TAP_STR(g.st.finish, "stop", "thinking: STOP is stop");
    TAP_STR(g.st.finish_detail, "STOP", "thinking: the server's word kept");
    TAP_STR(g.st.model, "gemini-2.5-flash", "thinking: modelVersion is the model");
    TAP_INT(g.ret, 0, "thinking: no end marker, the stream goes on to its close");
    TAP_INT(g.st.usage.prompt, 8, "usage: promptTokenCount");
    TAP_INT(g.st.usage.completion, 59, "usage: completion = candidates 9 + thoughts 50");
    TAP_INT(g.st.usage.reasoning, 50, "usage: thoughtsTokenCount is reasoning");
    TAP_INT(g.st.usage.cached, 4, "usage: cachedContentTokenCount");
    TAP_INT(g.st.usage.total, 67, "usage: totalTokenCount");
    TAP_INT(g.usages, 1, "usage announced once");
    TAP_INT(g.finishes, 1, "finish announced once");
    got_free(&g);

    /* The same stream framed with LF alone decodes the same. */
    struct buf lf = BUF_INIT;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\r')
            buf_appendc(&lf, s[i]);
    struct got a, b;
    got_decode(&a, gemini_stream_event, s, n, n);
    got_decode(&b, gemini_stream_event, lf.data, lf.len, lf.len);
    char *sa = got_summary(&a), *sb = got_summary(&b);
    TAP_STR(sb, sa, "LF framing decodes as CRLF framing");
    free(sa);
    free(sb);
    got_free(&a);
    got_free(&b);
    buf_free(&lf);

    /* Truncated: the stream ends before the chunk with the finishReason, or inside it. */
    const char *last = strstr(s, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" I help");
    TAP_OK(last != NULL, "the fixture's last event found");
    size_t cuts[] = {(size_t)(last - s), (size_t)(last - s) + 40, n - 2};
    for (size_t i = 0; i < 3; i++) {
        got_decode(&g, gemini_stream_event, s, cuts[i], cuts[i]);
        TAP_OK(g.st.finish[0] == '\0' && g.ret == 0 && g.content.len > 0,
               "truncated at byte %zu of %zu: text kept, no finish (the answer is truncated)",
               cuts[i], n);
        got_free(&g);
    }
    free(s);

    stream_check_fixture("gemini_safety.sse", gemini_stream_event, &g);
    TAP_STR(buf_str(&g.content), "Here is how", "safety: the text before the stop kept");
    TAP_STR(g.st.finish, "content_filter", "safety: SAFETY stops the answer (cut)");
    TAP_STR(g.st.finish_detail, "SAFETY", "safety: the reason kept");
    got_free(&g);

    stream_check_fixture("gemini_max_tokens.sse", gemini_stream_event, &g);
    TAP_STR(buf_str(&g.content), "One, two, three", "max tokens: content");
    TAP_STR(g.st.finish, "length", "max tokens: MAX_TOKENS is length");
    TAP_INT(g.st.usage.completion, 4, "max tokens: the last usage counts");
    got_free(&g);

    stream_check_fixture("gemini_blocked_prompt.sse", gemini_stream_event, &g);
    TAP_STR(g.st.finish, "content_filter", "blocked prompt: no candidates, cut");
    TAP_STR(g.st.finish_detail, "prompt blocked: PROHIBITED_CONTENT",
            "blocked prompt: the block reason kept");
    TAP_INT(g.st.usage.prompt, 12, "blocked prompt: usage");
    TAP_INT(g.content.len, 0, "blocked prompt: no text");
    got_free(&g);

    stream_check_fixture("gemini_midstream_error.sse", gemini_stream_event, &g);
    TAP_STR(buf_str(&g.content), "Partial ans", "mid-stream error: text before it kept");
    TAP_INT(g.ret, 1, "mid-stream error: ends the stream");
    TAP_STR(buf_str(&g.st.error), "The model is overloaded. Please try again later.",
            "mid-stream error: message");
    TAP_STR(g.st.error_code, "UNAVAILABLE", "mid-stream error: its status is the code");
    got_free(&g);
}

static void test_chunks(void)
{
    finish_case("STOP", "stop", "STOP");
    finish_case("MAX_TOKENS", "length", "MAX_TOKENS");
    finish_case("SAFETY", "content_filter", "SAFETY");
    finish_case("RECITATION", "content_filter", "RECITATION");
    finish_case("BLOCKLIST", "content_filter", "BLOCKLIST");
    finish_case("PROHIBITED_CONTENT", "content_filter", "PROHIBITED_CONTENT");
    finish_case("SPII", "content_filter", "SPII");
    finish_case("OTHER", "content_filter", "OTHER");
    finish_case("FINISH_REASON_UNSPECIFIED", "", "");
    finish_case("A\\u001b[31mB", "content_filter", "A?[31mB");

    struct got g;
    /* `thought` may come after `text`; false is content */
    chunk(&g, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true},"
              "{\"text\":\"c\",\"thought\":false},{\"thoughtSignature\":\"abc\"},"
              "{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]}");
    TAP_STR(buf_str(&g.reasoning), "t", "thought after text: reasoning");
    TAP_STR(buf_str(&g.content), "c", "thought false: content; other parts ignored");
    got_free(&g);

    /* only the first candidate */
    chunk(&g, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"one\"}]},\"index\":0},"
              "{\"content\":{\"parts\":[{\"text\":\"two\"}]},\"finishReason\":\"SAFETY\",\"index\":1}]}");
    TAP_OK(strcmp(buf_str(&g.content), "one") == 0 && g.st.finish[0] == '\0',
           "candidates past the first ignored");
    got_free(&g);

    /* usageMetadata is cumulative: the last replaces the earlier; a useless one keeps it */
    got_init(&g, gemini_stream_event);
    const char *u1 = "{\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,"
                     "\"thoughtsTokenCount\":3,\"totalTokenCount\":10}}";
    const char *u2 = "{\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":4,"
                     "\"totalTokenCount\":9}}";
    const char *u3 = "{\"usageMetadata\":{\"promptTokenCount\":\"x\"}}";
    gemini_stream_chunk(&g.st, u1, strlen(u1), got_emit, &g);
    TAP_OK(g.st.usage.completion == 5 && g.st.usage.reasoning == 3 && g.st.usage.total == 10,
           "usage: completion = candidates + thoughts (5)");
    gemini_stream_chunk(&g.st, u2, strlen(u2), got_emit, &g);
    TAP_OK(g.st.usage.completion == 4 && g.st.usage.reasoning == 0 && g.st.usage.total == 9,
           "usage: the next usageMetadata replaces it, thoughts not added twice");
    gemini_stream_chunk(&g.st, u3, strlen(u3), got_emit, &g);
    TAP_OK(g.st.usage.present && g.st.usage.completion == 4 && g.st.usage_bad,
           "usage: a useless usageMetadata keeps the last good one, flagged");
    TAP_INT(g.usages, 1, "usage announced once over three chunks");
    got_free(&g);

    chunk(&g, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}]");
    TAP_INT(g.ret, -1, "truncated JSON is malformed");
    TAP_OK(strstr(buf_str(&g.st.error), "malformed") != NULL, "malformed JSON message");
    got_free(&g);
    chunk(&g, "{\"error\":{\"code\":429,\"message\":\"Resource exhausted\"}}");
    TAP_OK(g.ret == 1 && strcmp(g.st.error_code, "429") == 0,
           "an error without a status: its number is the code");
    got_free(&g);
    chunk(&g, "{\"error\":null,\"candidates\":[]}");
    TAP_OK(g.ret == 0 && g.st.error.len == 0, "error null is no error");
    got_free(&g);
}

static void test_hostile(void)
{
    struct got g;
    struct buf b = BUF_INIT;
    buf_appends(&b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":");
    for (int i = 0; i < 100000; i++)
        buf_appendc(&b, '[');
    chunk(&g, buf_str(&b));
    TAP_INT(g.ret, -1, "deep nesting: malformed, no recursion blow-up");
    TAP_OK(g.st.error.len < 300, "deep nesting: a short message");
    got_free(&g);

    /* an 8 MiB escaped text decodes whole; an 8 MiB error message and finish reason are cut */
    buf_reset(&b);
    buf_appends(&b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"");
    for (int i = 0; i < (4 << 20); i++)
        buf_appends(&b, "\\n");
    buf_appends(&b, "\"}]}}]}");
    chunk(&g, buf_str(&b));
    TAP_OK(g.ret == 0 && g.content.len == (size_t)4 << 20, "8 MiB of escapes: 4 Mi newlines");
    got_free(&g);
    buf_reset(&b);
    buf_appends(&b, "{\"error\":{\"message\":\"");
    for (int i = 0; i < (8 << 20); i++)
        buf_appendc(&b, 'x');
    buf_appends(&b, "\",\"status\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appendc(&b, 'S');
    buf_appends(&b, "\"}}");
    chunk(&g, buf_str(&b));
    TAP_OK(g.ret == 1 && g.st.error.len <= 2003 && strlen(g.st.error_code) < 64,
           "8 MiB error message: kept to %zu bytes, code to %zu", g.st.error.len,
           strlen(g.st.error_code));
    got_free(&g);
    buf_reset(&b);
    buf_appends(&b, "{\"candidates\":[{\"finishReason\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appendc(&b, 'R');
    buf_appends(&b, "\"}],\"promptFeedback\":{\"blockReason\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appendc(&b, 'B');
    buf_appends(&b, "\"}}");
    chunk(&g, buf_str(&b));
    TAP_OK(g.ret == 0 && strlen(g.st.finish_detail) < sizeof g.st.finish_detail,
           "1 MiB finish and block reasons: the detail stays in its field");
    got_free(&g);
    buf_free(&b);
}

static void test_request(void)
{
    struct api_message msgs[] = {
        API_MSG("system", "be brief"), API_MSG("user", "a"), API_MSG("user", "b \"q\""),
        API_MSG("assistant", "c"),
        API_MSG("assistant", "d"), API_MSG("system", "and kind"), API_MSG("user", "e"),
    };
    struct api_request rq = {.model = "gemini-2.5-flash", .messages = msgs, .n_messages = 7,
                             .max_tokens = 50, .temperature = 0.5, .has_temperature = 1,
                             .top_p = 0.9, .has_top_p = 1, .seed = 9007199254740991L,
                             .has_seed = 1, .stream = 1, .include_usage = 1};
    char *body = gemini_request_json(&rq);
    cJSON *o = cJSON_Parse(body);
    TAP_OK(o != NULL, "request: valid JSON");
    const cJSON *contents = cJSON_GetObjectItem(o, "contents");
    TAP_INT(cJSON_GetArraySize(contents), 3, "request: same-role runs merged into 3 turns");
    static const char *const roles[] = {"user", "model", "user"};
    static const int nparts[] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
        const cJSON *t = cJSON_GetArrayItem(contents, i);
        TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(t, "role")), roles[i], "request: role");
        TAP_INT(cJSON_GetArraySize(cJSON_GetObjectItem(t, "parts")), nparts[i],
                "request: one part per message");
    }
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                cJSON_GetArrayItem(contents, 0), "parts"), 1), "text")),
            "b \"q\"", "request: text round-trips");
    const cJSON *sys = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "systemInstruction"), "parts");
    TAP_INT(cJSON_GetArraySize(sys), 2, "request: system messages in systemInstruction");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(sys, 1), "text")),
            "and kind", "request: system text");
    const cJSON *gc = cJSON_GetObjectItem(o, "generationConfig");
    TAP_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(gc, "maxOutputTokens")), 50, "request: maxOutputTokens");
    TAP_OK(cJSON_GetNumberValue(cJSON_GetObjectItem(gc, "temperature")) == 0.5, "request: temperature");
    TAP_OK(cJSON_GetNumberValue(cJSON_GetObjectItem(gc, "topP")) == 0.9, "request: topP");
    TAP_OK(strstr(body, "\"seed\":9007199254740991") != NULL, "request: seed exact");
    TAP_OK(!cJSON_GetObjectItem(o, "model") && !cJSON_GetObjectItem(o, "stream") &&
           !cJSON_GetObjectItem(o, "messages") && !cJSON_GetObjectItem(gc, "max_tokens"),
           "request: no chat-completions members (the model is in the URL)");
    cJSON_Delete(o);
    free(body);
    rq.max_tokens = 0;
    rq.has_temperature = rq.has_top_p = rq.has_seed = 0;
    rq.n_messages = 1;
    rq.messages = msgs + 1;
    body = gemini_request_json(&rq);
    TAP_STR(body, "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"a\"}]}]}",
            "request: nothing set, no generationConfig, no systemInstruction");
    free(body);
    /* Gemini refuses an empty text part ("empty text parameter"): an empty message (an
     * answer that had no text) is left out, and the user turns around it become one */
    struct api_message holes[] = {API_MSG("system", ""), API_MSG("user", "a"),
                                  API_MSG("assistant", ""),
                                  API_MSG("assistant", NULL), API_MSG("user", "b")};
    rq.messages = holes;
    rq.n_messages = 5;
    body = gemini_request_json(&rq);
    TAP_STR(body, "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"a\"},"
            "{\"text\":\"b\"}]}]}", "request: empty messages left out, no empty part");
    free(body);
}

static void test_errors(void)
{
    const char *body = "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota.\","
                       "\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
                       "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[]},"
                       "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
                       "\"retryDelay\":\"12s\"}]}}";
    struct buf m = BUF_INIT;
    char code[64];
    api_error_message(429, "application/json", body, strlen(body), &m, code, sizeof code);
    TAP_STR(buf_str(&m), "HTTP 429: You exceeded your current quota. (RESOURCE_EXHAUSTED)",
            "429 body: message and status");
    TAP_STR(code, "RESOURCE_EXHAUSTED", "429 body: the status is the code");
    TAP_OK(gemini_retry_delay(body, strlen(body)) == 12.0, "RetryInfo 12s: 12 s");
    buf_reset(&m);
    const char *listed = "[{\"error\":{\"code\":400,\"message\":\"API key not valid.\","
                         "\"status\":\"INVALID_ARGUMENT\"}}]";
    api_error_message(400, "application/json", listed, strlen(listed), &m, code, sizeof code);
    TAP_STR(buf_str(&m), "HTTP 400: API key not valid. (INVALID_ARGUMENT)",
            "an error in a list of one");
    TAP_OK(gemini_retry_delay(listed, strlen(listed)) == -1, "no RetryInfo: -1");
    buf_free(&m);
    static const struct {
        const char *delay;
        double want;
    } delays[] = {
        {"\"0.5s\"", 0.5}, {"\"1.250s\"", 1.25}, {"\"12\"", -1}, {"\"-1s\"", -1},
        {"\"1e9s\"", -1}, {"\"s\"", -1}, {"12", -1}, {"\"86400s\"", 86400}, {"\"nan s\"", -1},
    };
    for (size_t i = 0; i < sizeof delays / sizeof *delays; i++) {
        char b[256];
        snprintf(b, sizeof b, "{\"error\":{\"details\":[{\"@type\":\"type.googleapis.com/"
                 "google.rpc.RetryInfo\",\"retryDelay\":%s}]}}", delays[i].delay);
        TAP_OK(gemini_retry_delay(b, strlen(b)) == delays[i].want, "retryDelay %s: %g",
               delays[i].delay, delays[i].want);
    }
    TAP_OK(gemini_retry_delay("not json", 8) == -1 && gemini_retry_delay("", 0) == -1 &&
           gemini_retry_delay("{\"error\":{\"details\":{}}}", 24) == -1,
           "no JSON, empty, details not a list: -1");
}

static void test_whole(void)
{
    struct got g;
    const char *one = "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"1+1 equals 2.\","
                      "\"thoughtSignature\":\"EjQK\"}],\"role\":\"model\"},\"finishReason\":\"STOP\","
                      "\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":15,"
                      "\"candidatesTokenCount\":6,\"totalTokenCount\":21},"
                      "\"modelVersion\":\"gemini-3.1-flash-lite\"}";
    got_init(&g, gemini_stream_event);
    TAP_INT(gemini_decode_completion(&g.st, one, strlen(one), got_emit, &g), 0, "whole: decoded");
    TAP_OK(strcmp(buf_str(&g.content), "1+1 equals 2.") == 0 && strcmp(g.st.finish, "stop") == 0 &&
           g.st.usage.total == 21 && strcmp(g.st.model, "gemini-3.1-flash-lite") == 0,
           "whole: text, finish, usage, model");
    got_free(&g);
    const char *list = "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]},\n "
                       "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]},"
                       "\"finishReason\":\"MAX_TOKENS\"}]}]";
    got_init(&g, gemini_stream_event);
    TAP_INT(gemini_decode_completion(&g.st, list, strlen(list), got_emit, &g), 0,
            "whole list: decoded");
    TAP_OK(strcmp(buf_str(&g.content), "ab") == 0 && strcmp(g.st.finish, "length") == 0,
           "whole list (no alt=sse): every element's text, the last finish");
    got_free(&g);
    const char *text_only = "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}";
    got_init(&g, gemini_stream_event);
    gemini_decode_completion(&g.st, text_only, strlen(text_only), got_emit, &g);
    TAP_STR(g.st.finish, "stop", "whole: text without finishReason is complete");
    got_free(&g);
    got_init(&g, gemini_stream_event);
    TAP_OK(gemini_decode_completion(&g.st, "{}", 2, got_emit, &g) == 0 && !g.st.finish[0],
           "whole: {} is no answer (finish stays empty)");
    got_free(&g);
    const char *err = "[{\"error\":{\"code\":500,\"message\":\"Internal\",\"status\":\"INTERNAL\"}}]";
    got_init(&g, gemini_stream_event);
    TAP_OK(gemini_decode_completion(&g.st, err, strlen(err), got_emit, &g) == -1 &&
           strcmp(buf_str(&g.st.error), "Internal") == 0 &&
           strcmp(g.st.error_code, "INTERNAL") == 0, "whole: an error in a list is -1");
    got_free(&g);
    got_init(&g, gemini_stream_event);
    TAP_OK(gemini_decode_completion(&g.st, "[{}] x", 6, got_emit, &g) == -1 &&
           strstr(buf_str(&g.st.error), "malformed") != NULL, "whole: trailing bytes malformed");
    got_free(&g);
}

/* The table's entry: what the network layer reads. */
static void test_entry(void)
{
    const struct dialect *d = dialect_find("gemini");
    TAP_OK(d == &dialect_gemini, "entry: found by name");
    TAP_STR(d->base_url, "https://generativelanguage.googleapis.com/v1beta", "entry: base URL");
    TAP_STR(d->model, "gemini-2.5-flash", "entry: default model");
    TAP_OK(strcmp(d->key_env[0], "GEMINI_API_KEY") == 0 &&
           strcmp(d->key_env[1], "GOOGLE_API_KEY") == 0 && !d->key_env[2],
           "entry: GEMINI_API_KEY, then GOOGLE_API_KEY");
    TAP_OK(strcmp(d->auth_header, "x-goog-api-key") == 0 && !d->auth_prefix[0] && !d->headers[0],
           "entry: x-goog-api-key, no prefix, no other header");
    char *p = dialect_path(d, "gemini-2.5-flash");
    TAP_STR(p, "/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "entry: path");
    free(p);
    TAP_OK(d->request_json == gemini_request_json && d->stream_event == gemini_stream_event &&
           d->decode_body == gemini_decode_completion && d->retry_delay == gemini_retry_delay,
           "entry: this file's functions");
    TAP_OK(d->retryable(503, "UNAVAILABLE") == 1 && d->retryable(200, "INTERNAL") == 1 &&
           d->retryable(400, "INVALID_ARGUMENT") == 0 && d->retryable(403, "PERMISSION_DENIED") == 0 &&
           d->retryable(429, "RESOURCE_EXHAUSTED") == -1 && d->retryable(500, NULL) == -1,
           "entry: UNAVAILABLE retried, INVALID_ARGUMENT not, RESOURCE_EXHAUSTED generic");
    static const struct {
        const char *chunk;
        enum api_outcome o;
        const char *msg;
    } outs[] = {
        {"{\"candidates\":[{\"finishReason\":\"STOP\"}]}", API_OK, ""},
        {"{\"candidates\":[{\"finishReason\":\"MAX_TOKENS\"}]}", API_CUT,
         "the answer was cut at the token limit (finishReason \"MAX_TOKENS\"); raise max_tokens"},
        {"{\"candidates\":[{\"finishReason\":\"SAFETY\"}]}", API_CUT,
         "Gemini stopped the answer (finishReason \"SAFETY\")"},
        {"{\"promptFeedback\":{\"blockReason\":\"OTHER\"}}", API_CUT,
         "Gemini refused the prompt (blockReason \"OTHER\")"},
    };
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        struct got g;
        chunk(&g, outs[i].chunk);
        struct buf m = BUF_INIT;
        enum api_outcome o = d->finish_outcome(&g.st, &m);
        TAP_OK(o == outs[i].o && strcmp(buf_str(&m), outs[i].msg) == 0,
               "outcome of %s: %s, \"%s\" (got %s, \"%s\")", outs[i].chunk,
               api_outcome_name(outs[i].o), outs[i].msg, api_outcome_name(o), buf_str(&m));
        TAP_INT(api_outcome_exit(o), outs[i].o == API_CUT ? 6 : 0, "exit status");
        buf_free(&m);
        got_free(&g);
    }
}

int main(void)
{
    test_entry();
    test_streams();
    test_chunks();
    test_hostile();
    test_request();
    test_errors();
    test_whole();
    return tap_done();
}
