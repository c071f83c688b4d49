/* test_responses.c - the OpenAI Responses dialect: event streams at every split, the end
 * events (completed, incomplete, failed, error), usage, unknown events, request bodies, whole
 * answers, hostile input. */
#include "config.h"
#include "proto/responses.h"
#include "proto/dialect.h"
#include "stream_check.h"

#include <cjson/cJSON.h>

/* member names are case-sensitive in the API */
#define cJSON_GetObjectItem cJSON_GetObjectItemCaseSensitive

static void chunk(struct got *g, const char *json, const char *hint)
{
    got_init(g, responses_stream_event);
    g->ret = responses_stream_chunk(&g->st, json, strlen(json), hint, got_emit, g);
}

static void test_streams(void)
{
    struct got g;
    size_t n;
    char *s = fixture_read("responses_reasoning.sse", &n);
    stream_check_splits("responses_reasoning.sse", responses_stream_event, s, n, &g);
    TAP_STR(buf_str(&g.content), "Hi there \xE2\x80\x94 \"ok\".",
            "reasoning: output_text deltas are the content, .done not repeated");
    TAP_STR(buf_str(&g.reasoning), "**Greeting**\n\nThe user says hi.",
            "reasoning: summary deltas, a blank line between the summary's parts");
    TAP_STR(g.st.finish, "stop", "reasoning: completed is stop");
    TAP_INT(g.ret, 1, "reasoning: response.completed ends the stream");
    TAP_INT(g.st.done, 1, "reasoning: done");
    TAP_STR(g.st.model, "o4-mini-2025-04-16", "reasoning: the model from response.created");
    TAP_INT(g.st.usage.prompt, 37, "usage: input_tokens");
    TAP_INT(g.st.usage.completion, 150, "usage: output_tokens");
    TAP_INT(g.st.usage.reasoning, 128, "usage: output_tokens_details.reasoning_tokens");
    TAP_INT(g.st.usage.cached, 16, "usage: input_tokens_details.cached_tokens");
    TAP_INT(g.st.usage.total, 187, "usage: total_tokens");
    TAP_INT(g.usages, 1, "usage announced once");
    TAP_INT(g.finishes, 1, "finish announced once");
    got_free(&g);

    /* Truncated: no response.completed (cut before it, or inside it). */
    const char *last = strstr(s, "event: response.completed");
    TAP_OK(last != NULL, "the fixture's last event found");
    size_t cuts[] = {(size_t)(last - s), n - 3, n - 1};
    for (size_t i = 0; i < 3; i++) {
        got_decode(&g, responses_stream_event, s, cuts[i], cuts[i]);
        TAP_OK(g.st.finish[0] == '\0' && g.ret == 0 && !g.st.done && g.content.len > 0,
               "truncated at byte %zu of %zu: text kept, no finish (the answer is truncated)",
               cuts[i], n);
        got_free(&g);
    }
    free(s);

    stream_check_fixture("responses_incomplete.sse", responses_stream_event, &g);
    TAP_STR(buf_str(&g.content), "Once upon a time", "incomplete: content");
    TAP_STR(g.st.finish, "length", "incomplete: max_output_tokens is length");
    TAP_OK(g.ret == 1 && g.st.done, "incomplete: ends the stream");
    TAP_INT(g.st.usage.total, 28, "incomplete: usage");
    TAP_STR(g.st.model, "gpt-4.1-2025-04-14", "incomplete: model");
    got_free(&g);

    stream_check_fixture("responses_failed.sse", responses_stream_event, &g);
    TAP_STR(buf_str(&g.content), "Partial", "failed: the text before it kept");
    TAP_INT(g.ret, 1, "failed: ends the stream");
    TAP_STR(buf_str(&g.st.error), "The model failed to generate a response.", "failed: message");
    TAP_STR(g.st.error_code, "server_error", "failed: code");
    TAP_STR(g.st.finish, "", "failed: no finish");
    got_free(&g);

    stream_check_fixture("responses_error.sse", responses_stream_event, &g);
    TAP_STR(buf_str(&g.content), "Par", "error event: the text before it kept");
    TAP_INT(g.ret, 1, "error event: ends the stream");
    TAP_STR(buf_str(&g.st.error), "Rate limit reached for gpt-4.1 on tokens per min (TPM).",
            "error event: message");
    TAP_STR(g.st.error_code, "rate_limit_exceeded", "error event: code");
    got_free(&g);
}

static void test_events(void)
{
    struct got g;
    static const struct {
        const char *reason, *finish, *detail;
    } inc[] = {
        {"\"max_output_tokens\"", "length", "max_output_tokens"},
        {"\"content_filter\"", "content_filter", "content_filter"},
        {"\"something_new\"", "content_filter", "something_new"},
        {"null", "content_filter", "incomplete"},
    };
    for (size_t i = 0; i < sizeof inc / sizeof *inc; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                 "\"incomplete\",\"incomplete_details\":{\"reason\":%s}}}", inc[i].reason);
        chunk(&g, json, NULL);
        TAP_OK(g.ret == 1 && strcmp(g.st.finish, inc[i].finish) == 0 &&
               strcmp(g.st.finish_detail, inc[i].detail) == 0,
               "incomplete reason %s -> \"%s\" \"%s\" (got \"%s\" \"%s\")", inc[i].reason,
               inc[i].finish, inc[i].detail, g.st.finish, g.st.finish_detail);
        got_free(&g);
    }

    /* members in any order; the type from the event name when the data has none */
    chunk(&g, "{\"delta\":\"a\\\"b\",\"item_id\":\"m\",\"type\":\"response.output_text.delta\"}",
          NULL);
    TAP_STR(buf_str(&g.content), "a\"b", "delta before type, escapes decoded");
    got_free(&g);
    chunk(&g, "{\"delta\":\"r\"}", "response.reasoning_text.delta");
    TAP_STR(buf_str(&g.reasoning), "r", "no type in the data: the event name says it");
    got_free(&g);
    chunk(&g, "{\"type\":\"response.refusal.delta\",\"delta\":\"I can't\"}", NULL);
    TAP_STR(buf_str(&g.content), "I can't", "refusal deltas are content");
    got_free(&g);

    /* unknown and unused events: nothing, and the stream goes on */
    static const char *const ignored[] = {
        "{\"type\":\"response.future_event\",\"delta\":\"x\",\"response\":{\"status\":\"completed\"}}",
        "{\"type\":\"response.output_text.done\",\"text\":\"whole text again\"}",
        "{\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"a\\\"\"}",
        "{\"type\":\"response.in_progress\",\"response\":{\"status\":\"in_progress\"}}",
        "{\"type\":\"response.output_text.delta\",\"delta\":null}",
        "{\"type\":\"response.output_text.delta\",\"delta\":{\"text\":\"x\"}}",
        "{}",
    };
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        chunk(&g, ignored[i], NULL);
        TAP_OK(g.ret == 0 && g.content.len == 0 && g.reasoning.len == 0 && !g.st.finish[0] &&
               g.st.error.len == 0, "ignored: %s", ignored[i]);
        got_free(&g);
    }

    chunk(&g, "{\"type\":\"error\",\"error\":{\"type\":\"server_error\",\"code\":\"server_error\","
              "\"message\":\"boom\"}}", NULL);
    TAP_OK(g.ret == 1 && strcmp(buf_str(&g.st.error), "boom") == 0 &&
           strcmp(g.st.error_code, "server_error") == 0, "error event with an error object");
    got_free(&g);
    chunk(&g, "{\"type\":\"error\",\"sequence_number\":1}", NULL);
    TAP_OK(g.ret == 1 && strcmp(buf_str(&g.st.error), "the server reported an error") == 0,
           "error event without a message: a message still");
    got_free(&g);
    chunk(&g, "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":null}}",
          NULL);
    TAP_OK(g.ret == 1 && strcmp(buf_str(&g.st.error), "the server reported the response failed") == 0,
           "failed without an error object: a message still");
    got_free(&g);

    /* `event: error` with text, not JSON */
    got_decode(&g, responses_stream_event, "event: error\ndata: upstream timeout\n\n", 37, 37);
    TAP_OK(g.ret == 1 && strcmp(buf_str(&g.st.error), "upstream timeout") == 0,
           "event: error with plain text data");
    got_free(&g);
    chunk(&g, "{\"type\":\"response.output_text.delta\",\"delta\":\"x\"", NULL);
    TAP_OK(g.ret == -1 && strstr(buf_str(&g.st.error), "malformed") != NULL,
           "truncated JSON is malformed");
    got_free(&g);
    chunk(&g, "[\"response.completed\"]", NULL);
    TAP_INT(g.ret, -1, "not an object: malformed");
    got_free(&g);
}

static void test_hostile(void)
{
    struct got g;
    struct buf b = BUF_INIT;
    buf_appends(&b, "{\"type\":\"response.completed\",\"response\":{\"output\":");
    for (int i = 0; i < 100000; i++)
        buf_appendc(&b, '[');
    chunk(&g, buf_str(&b), NULL);
    TAP_OK(g.ret == -1 && g.st.error.len < 300, "deep nesting: malformed, a short message");
    got_free(&g);
    buf_reset(&b);
    buf_appends(&b, "{\"type\":\"response.output_text.delta\",\"delta\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appends(&b, "\\u00e9");
    buf_appends(&b, "\"}");
    chunk(&g, buf_str(&b), NULL);
    TAP_OK(g.ret == 0 && g.content.len == (size_t)2 << 20, "6 MiB of escapes: 1 Mi characters");
    got_free(&g);
    buf_reset(&b);
    buf_appends(&b, "{\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":"
                    "{\"reason\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appendc(&b, '\x7f');
    buf_appends(&b, "\"},\"model\":\"");
    for (int i = 0; i < (1 << 20); i++)
        buf_appendc(&b, 'm');
    buf_appends(&b, "\"}}");
    chunk(&g, buf_str(&b), NULL);
    TAP_OK(g.ret == 1 && strlen(g.st.finish_detail) < sizeof g.st.finish_detail &&
           strspn(g.st.finish_detail, "?") == strlen(g.st.finish_detail) &&
           strlen(g.st.model) < sizeof g.st.model,
           "1 MiB reason and model: cut to their fields, no control byte");
    got_free(&g);
    buf_free(&b);
}

static void test_request(void)
{
    struct api_message msgs[] = {
        API_MSG("system", "be brief"), API_MSG("user", "hi \"there\""),
        API_MSG("assistant", "hello"),
        API_MSG("system", "and kind"), API_MSG("user", "again"),
    };
    struct api_request rq = {.model = "o4-mini", .messages = msgs, .n_messages = 5,
                             .max_tokens = 64, .temperature = 0.25, .has_temperature = 1,
                             .top_p = 0.5, .has_top_p = 1, .seed = 7, .has_seed = 1,
                             .stream = 1, .include_usage = 1, .reasoning_summary = 1};
    char *body = responses_request_json(&rq);
    cJSON *o = cJSON_Parse(body);
    TAP_OK(o != NULL, "request: valid JSON");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "model")), "o4-mini", "request: model");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "instructions")), "be brief\n\nand kind",
            "request: the system messages are the instructions");
    const cJSON *input = cJSON_GetObjectItem(o, "input");
    TAP_INT(cJSON_GetArraySize(input), 3, "request: the other messages are the input");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(input, 1), "role")),
            "assistant", "request: roles kept");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(input, 0), "content")),
            "hi \"there\"", "request: content round-trips");
    TAP_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "max_output_tokens")), 64, "request: max_output_tokens");
    TAP_OK(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "temperature")) == 0.25 &&
           cJSON_GetNumberValue(cJSON_GetObjectItem(o, "top_p")) == 0.5, "request: temperature, top_p");
    TAP_OK(!cJSON_GetObjectItem(o, "seed") && !cJSON_GetObjectItem(o, "max_tokens") &&
           !cJSON_GetObjectItem(o, "messages") && !cJSON_GetObjectItem(o, "stream_options"),
           "request: no seed (the API has none), no chat-completions members");
    TAP_OK(cJSON_IsTrue(cJSON_GetObjectItem(o, "stream")), "request: stream true");
    TAP_OK(cJSON_IsFalse(cJSON_GetObjectItem(o, "store")), "request: store false");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "reasoning"),
                                                     "summary")), "auto",
            "request: reasoning summary asked for");
    cJSON_Delete(o);
    free(body);
    rq.n_messages = 1;
    rq.messages = msgs + 1;
    rq.max_tokens = 0;
    rq.has_temperature = rq.has_top_p = rq.has_seed = rq.reasoning_summary = rq.stream = 0;
    body = responses_request_json(&rq);
    TAP_STR(body, "{\"model\":\"o4-mini\",\"input\":[{\"role\":\"user\",\"content\":\"hi "
            "\\\"there\\\"\"}],\"store\":false}", "request: nothing set, nothing sent");
    free(body);
}

static void test_whole(void)
{
    struct got g;
    const char *body =
        "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"o4-mini\","
        "\"output\":[{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\","
        "\"text\":\"A\"},{\"type\":\"summary_text\",\"text\":\"B\"}]},{\"id\":\"msg_1\",\"type\":"
        "\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\","
        "\"annotations\":[]},{\"text\":\" there\",\"type\":\"output_text\"}]}],\"error\":null,"
        "\"incomplete_details\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":5,"
        "\"total_tokens\":8}}";
    got_init(&g, responses_stream_event);
    TAP_INT(responses_decode_completion(&g.st, body, strlen(body), got_emit, &g), 0,
            "whole: decoded");
    TAP_STR(buf_str(&g.content), "Hi there", "whole: the message's text parts");
    TAP_STR(buf_str(&g.reasoning), "A\n\nB", "whole: the reasoning summary");
    TAP_OK(strcmp(g.st.finish, "stop") == 0 && g.st.usage.total == 8 &&
           strcmp(g.st.model, "o4-mini") == 0, "whole: finish, usage, model");
    got_free(&g);
    const char *inc = "{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":"
                      "\"max_output_tokens\"},\"output\":[{\"type\":\"message\",\"content\":"
                      "[{\"type\":\"output_text\",\"text\":\"Once\"}]}]}";
    got_init(&g, responses_stream_event);
    TAP_OK(responses_decode_completion(&g.st, inc, strlen(inc), got_emit, &g) == 0 &&
           strcmp(g.st.finish, "length") == 0 && strcmp(buf_str(&g.content), "Once") == 0,
           "whole incomplete: length, text kept");
    got_free(&g);
    const char *failed = "{\"status\":\"failed\",\"error\":{\"code\":\"server_error\","
                         "\"message\":\"bad\"},\"output\":[]}";
    got_init(&g, responses_stream_event);
    TAP_OK(responses_decode_completion(&g.st, failed, strlen(failed), got_emit, &g) == -1 &&
           strcmp(buf_str(&g.st.error), "bad") == 0, "whole failed: -1 with the message");
    got_free(&g);
    const char *err = "{\"error\":{\"message\":\"Incorrect API key\",\"code\":\"invalid_api_key\"}}";
    got_init(&g, responses_stream_event);
    TAP_OK(responses_decode_completion(&g.st, err, strlen(err), got_emit, &g) == -1 &&
           strcmp(g.st.error_code, "invalid_api_key") == 0, "whole: an error body is -1");
    got_free(&g);
    got_init(&g, responses_stream_event);
    TAP_OK(responses_decode_completion(&g.st, "{}", 2, got_emit, &g) == 0 && !g.st.finish[0],
           "whole: {} is no answer (finish stays empty)");
    got_free(&g);
    got_init(&g, responses_stream_event);
    TAP_OK(responses_decode_completion(&g.st, "{} {}", 5, got_emit, &g) == -1,
           "whole: trailing bytes malformed");
    got_free(&g);
}

/* The table's entry: what the network layer reads. */
static void test_entry(void)
{
    const struct dialect *d = dialect_find("responses");
    TAP_OK(d == &dialect_responses, "entry: found by name");
    TAP_OK(strcmp(d->base_url, "https://api.openai.com/v1") == 0 &&
           strcmp(d->key_env[0], "OPENAI_API_KEY") == 0 && !d->key_env[1] &&
           strcmp(d->base_env, "OPENAI_BASE_URL") == 0 && strcmp(d->model, "gpt-4o-mini") == 0,
           "entry: OpenAI's base URL, keys and default model");
    TAP_OK(strcmp(d->auth_header, "Authorization") == 0 &&
           strcmp(d->auth_prefix, "Bearer ") == 0, "entry: Bearer");
    char *p = dialect_path(d, "o4-mini");
    TAP_STR(p, "/responses", "entry: path");
    free(p);
    TAP_OK(d->request_json == responses_request_json &&
           d->stream_event == responses_stream_event &&
           d->decode_body == responses_decode_completion &&
           d->error_message == api_error_message && !d->retry_delay,
           "entry: this file's functions, OpenAI's error bodies");
    TAP_OK(d->retryable(200, "server_error") == 1 && d->retryable(400, "invalid_prompt") == 0 &&
           d->retryable(429, "rate_limit_exceeded") == -1, "entry: retryable codes");
    static const struct {
        const char *chunk;
        enum api_outcome o;
        const char *msg;
    } outs[] = {
        {"{\"type\":\"response.completed\",\"response\":{}}", API_OK, ""},
        {"{\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":"
         "{\"reason\":\"max_output_tokens\"}}}", API_CUT,
         "the answer was cut at the token limit (incomplete: max_output_tokens); raise "
         "max_tokens"},
        {"{\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":"
         "{\"reason\":\"content_filter\"}}}", API_CUT,
         "the answer was stopped by the provider (incomplete: content_filter)"},
    };
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        struct got g;
        chunk(&g, outs[i].chunk, NULL);
        struct buf m = BUF_INIT;
        enum api_outcome o = d->finish_outcome(&g.st, &m);
        TAP_OK(o == outs[i].o && strcmp(buf_str(&m), outs[i].msg) == 0,
               "outcome %zu: %s, \"%s\" (got %s, \"%s\")", i, api_outcome_name(outs[i].o),
               outs[i].msg, api_outcome_name(o), buf_str(&m));
        buf_free(&m);
        got_free(&g);
    }
}

int main(void)
{
    test_entry();
    test_streams();
    test_events();
    test_hostile();
    test_request();
    test_whole();
    return tap_done();
}
