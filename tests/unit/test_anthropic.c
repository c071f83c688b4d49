/* test_anthropic.c - the Anthropic Messages dialect (proto/anthropic.c): streams decoded whole
 * and split at every byte, a mid-stream error, a truncated stream, the request body, error
 * bodies, the outcome of each stop_reason. */
#include "config.h"
#include "proto/dialect.h"
#include "fixture.h"
#include "got.h"
#include "proto/sse.h"

#include <cjson/cJSON.h>

static const struct dialect *D;

static void decode_fixture(struct got *g, const char *name)
{
    size_t n;
    char *s = fixture_read(name, &n);
    got_every_split(g, D->stream_event, s, n, name);
    free(s);
}

static void decode_split(struct got *g, const char *s, size_t n, size_t cut)
{
    got_decode(g, D->stream_event, s, n, cut);
}

/* The request body of r, parsed. */
static cJSON *body_of(const struct api_request *r)
{
    char *s = D->request_json(r);
    cJSON *o = cJSON_Parse(s);
    free(s);
    return o;
}

static void test_request(void)
{
    struct api_message m[] = {
        API_MSG("system", "You are terse."),    API_MSG("user", "first"),
        API_MSG("user", "second"),              API_MSG("system", "Answer in French."),
        API_MSG("assistant", ""),               API_MSG("assistant", "Bonjour"),
        API_MSG("assistant", "encore"),         API_MSG("user", "third"),
    };
    struct api_request r = {.model = "claude-sonnet-4-5", .messages = m, .n_messages = 8,
                            .stream = 1, .include_usage = 1, .temperature = 0.5,
                            .has_temperature = 1, .top_p = 0.9, .has_top_p = 1, .seed = 7,
                            .has_seed = 1};
    char *s = D->request_json(&r);
    TAP_STR(s,
            "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":8192,"
            "\"system\":\"You are terse.\\n\\nAnswer in French.\","
            "\"messages\":[{\"role\":\"user\",\"content\":\"first\\n\\nsecond\"},"
            "{\"role\":\"assistant\",\"content\":\"Bonjour\\n\\nencore\"},"
            "{\"role\":\"user\",\"content\":\"third\"}],"
            "\"temperature\":0.5,\"top_p\":0.9,\"stream\":true}",
            "request: system top-level, same roles merged, empty left out, no seed, "
            "no stream_options");
    free(s);

    r.max_tokens = 300;
    r.stream = 0;
    r.has_temperature = r.has_top_p = 0;
    r.n_messages = 2;
    cJSON *o = body_of(&r);
    TAP_INT(cJSON_GetObjectItem(o, "max_tokens")->valueint, 300, "request: max_tokens as set");
    TAP_OK(!cJSON_GetObjectItem(o, "stream") && !cJSON_GetObjectItem(o, "temperature"),
           "request: no stream, no temperature when unset");
    TAP_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o, "messages")), 1, "request: one message");
    cJSON_Delete(o);

    r.max_tokens = 0;
    r.model = "claude-3-haiku-20240307";
    o = body_of(&r);
    TAP_INT(cJSON_GetObjectItem(o, "max_tokens")->valueint, 4096,
            "request: Claude 3 default max_tokens 4096");
    cJSON_Delete(o);
    r.model = "claude-3-5-haiku-20241022";
    o = body_of(&r);
    TAP_INT(cJSON_GetObjectItem(o, "max_tokens")->valueint, 8192,
            "request: later models default to 8192");
    cJSON_Delete(o);

    r.n_messages = 1; /* a system prompt alone */
    o = body_of(&r);
    TAP_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o, "messages")), 0,
            "request: system alone, no messages");
    TAP_STR(cJSON_GetObjectItem(o, "system")->valuestring, "You are terse.", "request: system");
    cJSON_Delete(o);
}

/* A turn answered by another dialect keeps its own signatures in thinking_json (Gemini: an
 * array of strings): only Anthropic's thinking blocks go back (until 2026-12 the strings were
 * sent as blocks, which the API refuses). */
static void test_foreign_thinking(void)
{
    struct tool_call call = {.id = "call_1", .wire = "ev__sum", .args = "{\"a\":1}",
                             .args_len = 7};
    struct api_message m[] = {
        API_MSG("user", "sum"),
        {.role = "assistant", .content = "Summing.", .calls = &call, .n_calls = 1,
         .thinking_json = "[\"CiQB0e2K\", \"\", {\"type\":\"thinking\",\"thinking\":\"t\","
                          "\"signature\":\"s\"}, {\"type\":\"text\",\"text\":\"x\"}, 7]"},
        {.role = "tool", .content = "1", .tool_call_id = "call_1", .tool_name = "ev__sum"},
    };
    struct api_tool tool = {.name = "ev__sum"};
    struct api_request r = {.model = "claude-sonnet-4-5", .messages = m, .n_messages = 3,
                            .tools = &tool, .n_tools = 1};
    cJSON *o = body_of(&r);
    cJSON *blocks = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "messages"), 1),
                                        "content");
    char *got = cJSON_PrintUnformatted(blocks);
    TAP_STR(got,
            "[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"},"
            "{\"type\":\"text\",\"text\":\"Summing.\"},"
            "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"ev__sum\",\"input\":{\"a\":1}}]",
            "a call's blocks: Anthropic's thinking block only, not another dialect's signatures");
    free(got);
    cJSON_Delete(o);

    /* the same history in a request without tools (a -c without the servers): the API refuses
     * tool blocks then, so the round goes as text */
    r.tools = NULL;
    r.n_tools = 0;
    o = body_of(&r);
    got = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "messages"));
    TAP_STR(got,
            "[{\"role\":\"user\",\"content\":\"sum\"},"
            "{\"role\":\"assistant\",\"content\":\"Summing.\\n\\n[called tool ev__sum with "
            "{\\\"a\\\":1}]\"},"
            "{\"role\":\"user\",\"content\":\"[result of tool ev__sum: 1]\"}]",
            "no tools in the request: the earlier round as text, no tool blocks");
    TAP_OK(!cJSON_GetObjectItem(o, "tools"), "and no tools member");
    free(got);
    cJSON_Delete(o);
}

/* Ids the Messages API refuses (a character outside [a-zA-Z0-9_-], one used twice in the
 * request: tokterm names Gemini's calls call_ROUND_N afresh in every turn) go made valid and
 * unique, each result with its own call's (until 2026-12 they went as saved: HTTP 400). */
static void test_tool_ids(void)
{
    struct tool_call c1 = {.id = "call_1_1", .wire = "ev__sum", .args = "{}", .args_len = 2};
    struct tool_call c2[] = {{.id = "call_1_1", .wire = "ev__sum", .args = "{}", .args_len = 2},
                             {.id = "functions.ev__sum:0", .wire = "ev__sum", .args = "{}",
                              .args_len = 2}};
    struct api_message m[] = {
        API_MSG("user", "one"),
        {.role = "assistant", .calls = &c1, .n_calls = 1},
        {.role = "tool", .content = "1", .tool_call_id = "call_1_1", .tool_name = "ev__sum"},
        API_MSG("assistant", "done"),
        API_MSG("user", "two"),
        {.role = "assistant", .calls = c2, .n_calls = 2},
        {.role = "tool", .content = "2", .tool_call_id = "call_1_1", .tool_name = "ev__sum"},
        {.role = "tool", .content = "3", .tool_call_id = "functions.ev__sum:0",
         .tool_name = "ev__sum"},
    };
    struct api_tool tool = {.name = "ev__sum"};
    struct api_request r = {.model = "claude-sonnet-4-5", .messages = m, .n_messages = 8,
                            .tools = &tool, .n_tools = 1};
    cJSON *o = body_of(&r), *msgs = cJSON_GetObjectItem(o, "messages");
    struct buf ids = BUF_INIT;
    cJSON *jm, *b;
    cJSON_ArrayForEach(jm, msgs) {
        cJSON_ArrayForEach(b, cJSON_GetObjectItem(jm, "content")) {
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(b, "id"));
            const char *res = cJSON_GetStringValue(cJSON_GetObjectItem(b, "tool_use_id"));
            if (id || res)
                buf_printf(&ids, "%s%s%s", ids.len ? " " : "", res ? "<" : "", id ? id : res);
        }
    }
    TAP_STR(buf_str(&ids), "call_1_1 <call_1_1 call_1_1_2 functions_ev__sum_0_3 <call_1_1_2 "
            "<functions_ev__sum_0_3",
            "tool ids: valid, unique in the request, each result paired with its call's");
    buf_free(&ids);
    cJSON_Delete(o);
}

/* Text of only white space is left out as empty text is: the API refuses a text block of it
 * (until 2026-12 an answer "\n\n" before tool calls, as OpenAI-compatible models give, made
 * every later request of the conversation fail with HTTP 400). */
static void test_blank_text(void)
{
    struct tool_call c = {.id = "call_1", .wire = "ev__sum", .args = "{}", .args_len = 2};
    struct api_message m[] = {
        API_MSG("user", "sum"),
        {.role = "assistant", .content = "\n\n", .calls = &c, .n_calls = 1},
        {.role = "tool", .content = "1", .tool_call_id = "call_1", .tool_name = "ev__sum"},
        API_MSG("assistant", " \r\n\t"),
        API_MSG("user", "next"),
    };
    struct api_tool tool = {.name = "ev__sum"};
    struct api_request r = {.model = "claude-sonnet-4-5", .messages = m, .n_messages = 5,
                            .tools = &tool, .n_tools = 1};
    cJSON *o = body_of(&r);
    char *got = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "messages"));
    TAP_STR(got,
            "[{\"role\":\"user\",\"content\":\"sum\"},"
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call_1\","
            "\"name\":\"ev__sum\",\"input\":{}}]},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
            "\"call_1\",\"content\":\"1\"},{\"type\":\"text\",\"text\":\"next\"}]}]",
            "blank text: no text block of white space, a blank answer left out");
    free(got);
    cJSON_Delete(o);
}

/* Events decoded in a row by one decoder (which may reuse the last text delta's shape) give
 * exactly what a fresh decoder gives for each alone after the same history: text, kind,
 * return, and nothing of a shape where the bytes around the text differ. */
static void test_shapes(void)
{
#define D0 "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\""
#define D1 "\"}}"
#define T0 "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\""
    static const struct {
        const char *type, *data;
        const char *content, *reasoning;
        int ret;
    } ev[] = {
        {"content_block_delta", D0 "ab" D1, "ab", "", 0},
        {"content_block_delta", D0 "cd" D1, "cd", "", 0},               /* the same shape */
        {"content_block_delta", D0 "e\\\"f\\u00e9" D1, "e\"f\xC3\xA9", "", 0}, /* escapes */
        {"message_stop", "{\"type\":\"message_stop\",\"delta\":{\"text\":\"q\"}}", "q", "", 1},
        {"message_stop", "{\"type\":\"message_stop\",\"delta\":{\"text\":\"r\"}}", "r", "", 1},
        {"content_block_delta", D0 "x\\\"}}" D1, "x\"}}", "", 0},    /* text like the suffix */
        {"error", D0 "no" D1, "no", "", 1},                          /* event: error, same bytes */
        {"content_block_delta", D0 "a\",\"text\":\"b" D1, "ab", "", 0},  /* two strings */
        {"content_block_delta", D0 "" D1, "", "", 0},                  /* empty text */
        {"content_block_delta", T0 "hm" D1, "", "hm", 0},              /* another kind */
        {"content_block_delta", T0 "mm" D1, "", "mm", 0},
        {"content_block_delta", D0 "tab\there" D1, "", "", -1},        /* raw control: malformed */
        {"content_block_delta", D0 "ok" D1, "ok", "", 0},
        {"ping", "{\"type\":\"ping\"}", "", "", 0},
        {"content_block_delta", D0 "z" D1 " ", "z", "", 0},            /* a trailing blank */
    };
#undef D0
#undef D1
#undef T0
    struct got seq;
    got_init(&seq, D->stream_event);
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        struct sse_event e = {.type = ev[i].type, .data = ev[i].data,
                              .data_len = strlen(ev[i].data), .id = ""};
        size_t c0 = seq.content.len, r0 = seq.reasoning.len;
        int ret = D->stream_event(&seq.st, &e, got_emit, &seq);
        struct got one;
        got_init(&one, D->stream_event);
        int ret1 = D->stream_event(&one.st, &e, got_emit, &one);
        char name[96];
        snprintf(name, sizeof name, "event %zu in a stream = alone = expected", i);
        TAP_OK(ret == ret1 && ret == ev[i].ret && seq.content.len - c0 == one.content.len &&
                   seq.reasoning.len - r0 == one.reasoning.len &&
                   memcmp(seq.content.data ? seq.content.data + c0 : "", buf_str(&one.content),
                          one.content.len) == 0 &&
                   strcmp(buf_str(&one.content), ev[i].content) == 0 &&
                   strcmp(buf_str(&one.reasoning), ev[i].reasoning) == 0,
               "%s (ret %d/%d, \"%s\")", name, ret, ret1, buf_str(&one.content));
        got_free(&one);
    }
    got_free(&seq);
}

static void error_body(long status, const char *body, const char *want, const char *want_code,
                       int retry)
{
    struct buf m = BUF_INIT;
    char code[64];
    D->error_message(status, "application/json", body, strlen(body), &m, code, sizeof code);
    char name[64];
    snprintf(name, sizeof name, "error body %ld: message", status);
    TAP_STR(buf_str(&m), want, name);
    snprintf(name, sizeof name, "error body %ld: code", status);
    TAP_STR(code, want_code, name);
    snprintf(name, sizeof name, "error body %ld: retryable %d", status, retry);
    TAP_INT(D->retryable(status, code), retry, name);
    buf_free(&m);
}

int main(void)
{
    D = dialect_find("anthropic");
    if (!TAP_OK(D != NULL, "anthropic: found by name"))
        return tap_done();
    TAP_STR(D->base_url, "https://api.anthropic.com/v1", "anthropic: base URL");
    TAP_STR(D->key_env[0], "ANTHROPIC_API_KEY", "anthropic: key variable");
    TAP_STR(D->auth_header, "x-api-key", "anthropic: x-api-key");
    TAP_STR(D->auth_prefix, "", "anthropic: the key alone");
    TAP_STR(D->headers[0], "anthropic-version: 2023-06-01", "anthropic: version header");
    char *path = dialect_path(D, "claude-x");
    TAP_STR(path, "/messages", "anthropic: path");
    free(path);

    struct got g;
    struct buf m = BUF_INIT;
    decode_fixture(&g, "anthropic_text.sse");
    TAP_STR(buf_str(&g.content), "Hello, w\xC3\xB6rld \xE2\x80\x94 \xF0\x9F\x98\x80\n\"quoted\"!",
            "text: text_delta, escapes and a surrogate pair");
    TAP_STR(buf_str(&g.reasoning), "", "text: no reasoning");
    TAP_STR(g.st.model, "claude-sonnet-4-5-20250929", "text: model from message_start");
    TAP_STR(g.st.finish, "stop", "text: end_turn is stop");
    TAP_STR(g.st.finish_detail, "end_turn", "text: the server's word kept");
    TAP_INT(g.finishes, 1, "text: finish announced once, at message_stop");
    TAP_INT(g.st.usage.prompt, 25 + 2048, "text: prompt = input + cache reads");
    TAP_INT(g.st.usage.cached, 2048, "text: cache reads");
    TAP_INT(g.st.usage.completion, 15, "text: output_tokens from message_delta");
    TAP_INT(g.st.usage.total, 2088, "text: total");
    TAP_INT(g.usages, 1, "text: usage announced once");
    TAP_INT(g.ret, 1, "text: message_stop ends the stream");
    TAP_OK(g.st.done, "text: done");
    TAP_INT(D->finish_outcome(&g.st, &m), API_OK, "text: complete");
    got_free(&g);

    decode_fixture(&g, "anthropic_thinking.sse");
    TAP_STR(buf_str(&g.reasoning),
            "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3",
            "thinking: thinking_delta is reasoning");
    TAP_STR(buf_str(&g.content), "27 * 453 = 12,231",
            "thinking: text only; signature and input_json_delta ignored");
    TAP_STR(g.st.finish, "length", "thinking: max_tokens is length");
    TAP_STR(g.st.finish_detail, "max_tokens", "thinking: stop_reason kept");
    TAP_INT(g.st.usage.prompt, 52, "thinking: prompt = input + cache writes");
    TAP_INT(g.st.usage.completion, 100, "thinking: output tokens");
    TAP_STR(buf_str(&g.st.error), "", "thinking: no error");
    enum api_outcome o = D->finish_outcome(&g.st, &m);
    TAP_INT(o, API_CUT, "thinking: max_tokens is cut");
    TAP_INT(api_outcome_exit(o), 6, "thinking: exit 6");
    TAP_OK(strstr(buf_str(&m), "stop_reason \"max_tokens\"") != NULL, "thinking: message (%s)",
           buf_str(&m));
    got_free(&g);

    decode_fixture(&g, "anthropic_overloaded.sse");
    TAP_STR(buf_str(&g.content), "Partial ans", "overloaded: partial text kept");
    TAP_INT(g.ret, 1, "overloaded: the error event ends the stream");
    TAP_STR(buf_str(&g.st.error), "Overloaded", "overloaded: message");
    TAP_STR(g.st.error_code, "overloaded_error", "overloaded: code is the error type");
    TAP_STR(g.st.finish, "", "overloaded: no finish");
    TAP_INT(D->retryable(200, g.st.error_code), 1, "overloaded: retryable");
    got_free(&g);

    /* Truncated: the stream ends before message_stop, even after message_delta said why. */
    size_t n;
    char *s = fixture_read("anthropic_text.sse", &n);
    const char *cut = strstr(s, "event: message_stop");
    got_every_split(&g, D->stream_event, s, (size_t)(cut - s), "truncated before message_stop");
    TAP_STR(buf_str(&g.content), "Hello, w\xC3\xB6rld \xE2\x80\x94 \xF0\x9F\x98\x80\n\"quoted\"!",
            "truncated: the text so far");
    TAP_STR(g.st.finish, "", "truncated: no finish (the answer is not known whole)");
    TAP_INT(g.finishes, 0, "truncated: no finish announced");
    TAP_INT(g.ret, 0, "truncated: the stream never said it was over");
    got_free(&g);
    cut = strstr(s, "event: content_block_stop");
    decode_split(&g, s, (size_t)(cut - s), (size_t)(cut - s));
    TAP_STR(g.st.finish, "", "truncated mid-block: no finish");
    got_free(&g);
    free(s);

    /* An `event: error` whose data is not Anthropic's shape, and bad JSON. */
    struct sse_event ev = {.type = "error", .data = "{\"type\":\"error\"}", .data_len = 16};
    got_init(&g, D->stream_event);
    TAP_INT(D->stream_event(&g.st, &ev, got_emit, &g), 1, "error event without details: over");
    TAP_STR(buf_str(&g.st.error), "the server reported an error", "error event: a message");
    got_free(&g);
    ev = (struct sse_event){.type = "content_block_delta",
                            .data = "{\"type\":\"content_block_delta\",\"delta\":{\"text\":\"a",
                            .data_len = 48};
    got_init(&g, D->stream_event);
    TAP_INT(D->stream_event(&g.st, &ev, got_emit, &g), -1, "broken JSON: -1");
    TAP_OK(strstr(buf_str(&g.st.error), "malformed JSON") != NULL, "broken JSON: message");
    got_free(&g);

    /* stop_reason refusal, and message_stop with no stop_reason */
    static const char refusal[] =
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"refusal\"},\"usage\":{\"output_tokens\":2}}\n\nevent: message_stop\ndata: "
        "{\"type\":\"message_stop\"}\n\n";
    decode_split(&g, refusal, sizeof refusal - 1, 0);
    buf_reset(&m);
    TAP_STR(g.st.finish, "content_filter", "refusal: content_filter");
    TAP_INT(D->finish_outcome(&g.st, &m), API_CUT, "refusal: cut");
    TAP_OK(strstr(buf_str(&m), "refusal") != NULL, "refusal: message says so");
    got_free(&g);
    static const char bare_stop[] = "data: {\"type\":\"message_stop\"}\n\n";
    decode_split(&g, bare_stop, sizeof bare_stop - 1, 0);
    TAP_STR(g.st.finish, "stop", "message_stop alone (no event: line): stop");
    got_free(&g);

    /* a whole answer (stream: false) */
    static const char whole[] =
        "{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\","
        "\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\",\"signature\":\"abc\"},"
        "{\"type\":\"text\",\"text\":\"Hi!\"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"
        "\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":null,"
        "\"cache_read_input_tokens\":4,\"output_tokens\":3}}";
    got_init(&g, D->stream_event);
    TAP_INT(D->decode_body(&g.st, whole, strlen(whole), got_emit, &g), 0, "body: decoded");
    TAP_STR(buf_str(&g.content), "Hi!", "body: text");
    TAP_STR(buf_str(&g.reasoning), "hmm", "body: thinking");
    TAP_STR(g.st.finish, "stop", "body: finish");
    TAP_INT(g.st.usage.prompt, 14, "body: prompt");
    TAP_INT(g.st.usage.total, 17, "body: total");
    got_free(&g);
    static const char err[] = "{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\","
                              "\"message\":\"model: claude-nope\"}}";
    got_init(&g, D->stream_event);
    TAP_INT(D->decode_body(&g.st, err, strlen(err), got_emit, &g), -1, "body: an error is -1");
    TAP_STR(buf_str(&g.st.error), "model: claude-nope", "body: its message");
    got_free(&g);

    test_request();
    test_foreign_thinking();
    test_tool_ids();
    test_blank_text();
    test_shapes();

    error_body(529,
               "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
               "\"Overloaded\"},\"request_id\":\"req_011CSHoEeqs5C35K2UUqR7Fy\"}",
               "HTTP 529: Overloaded (overloaded_error)", "overloaded_error", 1);
    error_body(401,
               "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":"
               "\"invalid x-api-key\"}}",
               "HTTP 401: invalid x-api-key (authentication_error)", "authentication_error", 0);
    error_body(400,
               "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
               "\"max_tokens: Field required\"}}",
               "HTTP 400: max_tokens: Field required (invalid_request_error)",
               "invalid_request_error", 0);
    error_body(429,
               "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
               "\"Number of request tokens has exceeded your per-minute rate limit\"}}",
               "HTTP 429: Number of request tokens has exceeded your per-minute rate limit "
               "(rate_limit_error)", "rate_limit_error", -1);
    error_body(500, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"
                    "\"Internal server error\"}}",
               "HTTP 500: Internal server error (api_error)", "api_error", 1);
    buf_free(&m);
    return tap_done();
}
