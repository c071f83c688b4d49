/* test_tools.c - function calling's shared parts: wire names, the schema check, globs, the
 * registry, the approval policy and calls on a worker thread (the test tools). */
#include "config.h"
#include "core/tools.h"
#include "proto/api.h"
#include "proto/dialect.h"
#include "stream_check.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>

#include <poll.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

static int wire_ok(const char *w)
{
    regex_t re;
    regcomp(&re, "^[a-zA-Z0-9_-]{1,64}$", REG_EXTENDED | REG_NOSUB);
    int ok = regexec(&re, w, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

static void test_wire(void)
{
    char w[80];
    tool_wire_name("fs.read_file", w, sizeof w);
    TAP_STR(w, "fs__read_file", "wire: the dot becomes __");
    tool_wire_name("my server.tööl/x", w, sizeof w);
    TAP_OK(wire_ok(w), "wire: other bytes become _ (%s)", w);
    char longname[200];
    memset(longname, 'x', 150);
    strcpy(longname + 150, ".y");
    tool_wire_name(longname, w, sizeof w);
    TAP_INT(strlen(w), 64, "wire: a long name is cut to 64");
    TAP_OK(wire_ok(w), "wire: a long name still matches the pattern");
    char w2[80];
    longname[3] = 'z';
    tool_wire_name(longname, w2, sizeof w2);
    TAP_OK(strcmp(w, w2) != 0, "wire: two long names differ by their hash");
}

static int check(const char *schema, const char *args, const char *want_err)
{
    struct buf err = BUF_INIT;
    int r = tool_schema_check(schema, args, strlen(args), &err);
    int ok = want_err ? r < 0 && strstr(buf_str(&err), want_err) != NULL : r == 0;
    if (!TAP_OK(ok, "schema check %.60s -> %s", args, want_err ? want_err : "ok"))
        printf("#   r=%d err=\"%s\" want \"%s\"\n", r, buf_str(&err), want_err ? want_err : "");
    buf_free(&err);
    return ok;
}

static void test_schema(void)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\","
                    "\"minLength\":1},\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
                    "\"mode\":{\"enum\":[\"r\",\"w\"]},\"tags\":{\"type\":\"array\","
                    "\"items\":{\"type\":\"string\"},\"maxItems\":2}},"
                    "\"required\":[\"path\"],\"additionalProperties\":false}";
    check(s, "{\"path\":\"a\"}", NULL);
    check(s, "{\"path\":\"a\",\"n\":3,\"mode\":\"w\",\"tags\":[\"x\",\"y\"]}", NULL);
    check(s, "{}", "required property \"path\" is missing");
    check(s, "{\"path\":1}", "$.path: expected string, got integer");
    check(s, "{\"path\":\"\"}", "at least 1 characters");
    check(s, "{\"path\":\"a\",\"n\":1.5}", "$.n: expected integer, got number");
    check(s, "{\"path\":\"a\",\"n\":10}", "more than the maximum");
    check(s, "{\"path\":\"a\",\"mode\":\"x\"}", "$.mode: value is not one of");
    check(s, "{\"path\":\"a\",\"tags\":[\"x\",2]}", "$.tags[1]: expected string");
    check(s, "{\"path\":\"a\",\"tags\":[\"x\",\"y\",\"z\"]}", "at most 2 items");
    check(s, "{\"path\":\"a\",\"extra\":1}", "property \"extra\" is not allowed");
    check(s, "{\"path\":\"a\"", "not valid JSON");
    check(s, "{\"path\":\"a\"} x", "not valid JSON");
    check(s, "{\"path\":\"a\"}  \t", NULL);
    check(s, "[1]", "must be a JSON object");
    check(NULL, "{\"any\":[1,{}]}", NULL);
    check(NULL, "\"text\"", "must be a JSON object");
    check("{\"type\":\"object\",\"properties\":{\"v\":{\"type\":[\"string\",\"null\"]}}}",
          "{\"v\":null}", NULL);
    check("{\"type\":\"object\",\"properties\":{\"v\":{\"anyOf\":[{\"type\":\"string\"},"
          "{\"type\":\"integer\"}]}}}",
          "{\"v\":true}", "fits none of the anyOf");
    check("{\"type\":\"object\",\"properties\":{\"v\":{\"oneOf\":[{\"type\":\"number\"},"
          "{\"type\":\"integer\"}]}}}",
          "{\"v\":1}", "oneOf");
    check("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
          "{\"a\":1,\"b\":\"x\"}", "$.b: expected integer");
    /* deep nesting is bounded: no recursion past the limit */
    struct buf deep = BUF_INIT;
    buf_appends(&deep, "{\"a\":");
    for (int i = 0; i < 100000; i++)
        buf_appendc(&deep, '[');
    check(NULL, buf_str(&deep), "deeper than 64");
    buf_free(&deep);
    const char *self = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\","
                       "\"additionalProperties\":{\"type\":\"object\","
                       "\"additionalProperties\":{\"type\":\"object\"}}}}}";
    check(self, "{\"a\":{\"b\":{\"c\":{}}}}", NULL);
    check(self, "{\"a\":{\"b\":{\"c\":1}}}", "$.a.b.c: expected object, got integer");
}

static void test_glob(void)
{
    TAP_OK(tool_glob("*", "fs.read_file"), "glob: * matches all");
    TAP_OK(tool_glob("fs.*", "fs.read_file"), "glob: fs.*");
    TAP_OK(!tool_glob("fs.*", "fsx.read_file"), "glob: fs.* not fsx.");
    TAP_OK(tool_glob("*.read_*", "fs.read_file"), "glob: *.read_*");
    TAP_OK(tool_glob("test.ec?o", "test.echo"), "glob: ?");
    TAP_OK(!tool_glob("test.echo", "test.echo2"), "glob: whole name");
}

static void test_registry(void)
{
    struct tools *t = tools_new();
    tools_add_test(t);
    struct buf err = BUF_INIT;
    TAP_INT(tools_load(t, &err), 0, "registry: the test tools list");
    TAP_INT(tools_count(t), 5, "registry: five test tools");
    const struct tools_entry *e = tools_find(t, "test.echo");
    TAP_OK(e && !strcmp(e->wire, "test__echo"), "registry: test.echo is test__echo");
    TAP_OK(tools_find_wire(t, "test__add") == tools_find(t, "test.add"), "registry: by wire");
    const struct api_tool *defs;
    size_t n;
    const char *only[] = {"test.e*"};
    tools_api(t, only, 1, &defs, &n);
    TAP_INT(n, 1, "registry: tools_api keeps the tools the globs name");
    TAP_STR(n ? defs[0].name : "", "test__echo", "registry: the wire name goes to the API");
    tools_api(t, NULL, 0, &defs, &n);
    TAP_INT(n, 5, "registry: tools_api without globs: all");

    struct tool_call c = {.id = xstrdup("call_1"), .wire = xstrdup("test__add"),
                          .args = xstrdup("{\"a\":2,\"b\":40}"), .args_len = 14};
    struct tool_result r = {0};
    TAP_INT(tools_prepare(t, &c, &r), 0, "prepare: a good call");
    TAP_STR(c.name, "test.add", "prepare: the tokterm name is filled in");
    struct tool_job *j = tool_job_start(t, &c, 0, NULL, NULL, NULL);
    struct pollfd p = {.fd = tool_job_fd(j), .events = POLLIN};
    TAP_INT(poll(&p, 1, 10000), 1, "job: its fd becomes readable");
    TAP_OK(tool_job_done(j), "job: done");
    tool_job_finish(j, &r);
    TAP_STR(buf_str(&r.content), "42", "job: test.add 2 40 = 42");
    TAP_INT(r.is_error, 0, "job: not an error");
    tool_result_free(&r);
    tool_call_free(&c);

    c.wire = xstrdup("test__add");
    c.args = xstrdup("{\"a\":\"2\",\"b\":1}");
    c.args_len = strlen(c.args);
    TAP_INT(tools_prepare(t, &c, &r), -1, "prepare: a schema violation is refused");
    TAP_OK(r.is_error && strstr(buf_str(&r.content), "$.a: expected number"),
           "prepare: the model is told why (%s)", buf_str(&r.content));
    tool_result_free(&r);
    tool_call_free(&c);
    c.wire = xstrdup("nope__x");
    TAP_INT(tools_prepare(t, &c, &r), -1, "prepare: an unknown tool is refused");
    TAP_OK(strstr(buf_str(&r.content), "unknown tool"), "prepare: unknown tool said");
    tool_result_free(&r);
    tool_call_free(&c);
    c.wire = xstrdup("test__fail");
    TAP_INT(tools_prepare(t, &c, &r), 0, "prepare: no arguments at all become {}");
    TAP_STR(c.args, "{}", "prepare: {}");
    j = tool_job_start(t, &c, 0, NULL, NULL, NULL);
    tool_job_finish(j, &r);
    TAP_OK(r.is_error && strstr(buf_str(&r.content), "failed"), "job: an error result");
    tool_result_free(&r);
    tool_call_free(&c);

    c.wire = xstrdup("test__sleep");
    c.args = xstrdup("{\"seconds\":600}");
    c.args_len = strlen(c.args);
    TAP_INT(tools_prepare(t, &c, &r), 0, "prepare: sleep");
    j = tool_job_start(t, &c, 0, NULL, NULL, NULL);
    TAP_OK(!tool_job_done(j), "job: a long call is not done at once");
    tool_job_cancel(j);
    tool_job_finish(j, &r); /* returns: the tool sees the flag */
    TAP_OK(r.is_error && strstr(buf_str(&r.content), "cancelled"), "job: cancelled");
    tool_result_free(&r);
    tool_call_free(&c);
    buf_free(&err);
    tools_free(t);
}

static void test_policy(void)
{
    struct tool_policy p = {0};
    TAP_INT(tool_policy_verdict(&p, "fs.read_file"), TOOL_ASK, "policy: the chat asks");
    p.scripted = 1;
    TAP_INT(tool_policy_verdict(&p, "fs.read_file"), TOOL_REFUSE, "policy: scripted refuses");
    tool_policy_allow(&p, "fs.*");
    TAP_INT(tool_policy_verdict(&p, "fs.read_file"), TOOL_RUN, "policy: --allow-tool fs.*");
    TAP_INT(tool_policy_verdict(&p, "shell.run"), TOOL_REFUSE, "policy: not shell.run");
    p.scripted = 0;
    tool_policy_always(&p, "shell.run");
    TAP_INT(tool_policy_verdict(&p, "shell.run"), TOOL_RUN, "policy: always");
    tool_policy_reset(&p);
    TAP_INT(tool_policy_verdict(&p, "shell.run"), TOOL_ASK, "policy: reset forgets always");
    TAP_INT(tool_policy_verdict(&p, "fs.x"), TOOL_RUN, "policy: reset keeps --allow-tool");
    tool_policy_free(&p);
}

/* The calls a decode assembled: "id|wire|args" each, for comparing. */
static void check_calls(const struct got *g, const char *const *want, size_t n, const char *what)
{
    TAP_OK(g->st.n_calls == n, "%s: %zu calls (%zu)", what, n, g->st.n_calls);
    for (size_t i = 0; i < n && i < g->st.n_calls; i++) {
        const struct tool_call *c = &g->st.calls[i];
        char *have = xasprintf("%s|%s|%s", c->id ? c->id : "-", c->wire ? c->wire : "-",
                               c->args ? c->args : "-");
        TAP_STR(have, want[i], what);
        free(have);
    }
}

static void test_openai_stream(void)
{
    struct got g;
    stream_check_fixture("openai_tool_calls.sse", api_stream_event, &g);
    const char *want[] = {
        "call_DdmO9pD3xa9XTPNJ32zg2hcA|test__add|{\"a\": 2, \"b\": 40}",
        "call_ABSg8GmpTnHUKRPB9aFCk1iE|test__echo|{\"text\": \"h\\u00e9llo \\\"world\\\" \u2603\"}",
    };
    check_calls(&g, want, 2, "openai: parallel calls assembled from fragments");
    TAP_STR(g.st.finish, "tool_calls", "openai: finish tool_calls");
    TAP_INT(g.ret, 1, "openai: [DONE] ends it");
    struct buf err = BUF_INIT;
    TAP_INT(tool_schema_check(NULL, g.st.calls[1].args, g.st.calls[1].args_len, &err), 0,
            "openai: the assembled arguments are valid JSON");
    buf_free(&err);
    struct buf msg = BUF_INIT;
    TAP_INT(api_finish_outcome(&g.st, &msg), API_OK, "openai: a tool_calls finish is whole");
    buf_free(&msg);
    got_free(&g);

    /* a server that numbers parallel calls all 0 but gives each its own id; whole arguments
     * as an object; no index at all */
    const char *odd =
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\","
        "\"function\":{\"name\":\"x\",\"arguments\":{\"k\":1}}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\","
        "\"function\":{\"name\":\"y\",\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c\",\"function\":"
        "{\"name\":\"z\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n";
    got_every_split(&g, api_stream_event, odd, strlen(odd), "openai: odd servers");
    const char *want2[] = {"a|x|{\"k\":1}", "b|y|{}", "c|z|-"};
    check_calls(&g, want2, 3, "openai: odd servers' calls");
    got_free(&g);
}

/* The request body carries the tools, the assistant's calls and the results. */
static void test_openai_request(void)
{
    struct tool_call calls[] = {{.id = "call_1", .wire = "test__add", .args = "{\"a\":1}",
                                 .args_len = 7}};
    struct api_message m[] = {
        API_MSG("user", "add"),
        {.role = "assistant", .content = "", .calls = calls, .n_calls = 1},
        {.role = "tool", .content = "3", .tool_call_id = "call_1", .tool_name = "test__add"},
    };
    struct api_tool tools[] = {{"test__add", "Add.", "{\"type\":\"object\"}"},
                               {"bad", NULL, "not json"}};
    struct api_request r = {.model = "m", .messages = m, .n_messages = 3, .tools = tools,
                            .n_tools = 2, .stream = 1};
    char *body = api_request_json(&r);
    cJSON *o = cJSON_Parse(body);
    TAP_OK(o != NULL, "openai request: valid JSON");
    cJSON *ms = cJSON_GetObjectItem(o, "messages");
    cJSON *tc = cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 1), "tool_calls");
    cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(tc, 0), "function");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments")), "{\"a\":1}",
            "openai request: arguments as a string");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 2), "tool_call_id")),
            "call_1", "openai request: the result names its call");
    cJSON *t1 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "tools"), 1),
                                    "function");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t1, "parameters"),
                                                     "type")),
            "object", "openai request: a bad schema becomes an object schema");
    cJSON_Delete(o);
    free(body);
    r.n_tools = 0;
    r.n_messages = 1;
    body = api_request_json(&r);
    TAP_OK(!strstr(body, "tools"), "openai request: no tools, no member");
    free(body);
}

static void test_anthropic(void)
{
    const struct dialect *d = dialect_find("anthropic");
    struct got g;
    stream_check_fixture("anthropic_tool_use.sse", d->stream_event, &g);
    const char *want[] = {"toolu_01T1x1fJ34qAmk2tNTrN7Up6|test__add|{\"a\": 2, \"b\": 40}",
                          "toolu_01ABcd|test__echo|{\"text\": \"h\\u00e9llo\"}"};
    check_calls(&g, want, 2, "anthropic: tool_use blocks from input_json_delta");
    TAP_STR(g.st.finish, "tool_calls", "anthropic: stop_reason tool_use is tool_calls");
    TAP_STR(buf_str(&g.content), "Let me check.", "anthropic: the text beside the calls");
    TAP_STR(buf_str(&g.st.thinking_json),
            "[{\"type\":\"thinking\",\"thinking\":\"I need the sum and an echo.\","
            "\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3h\"}]",
            "anthropic: the thinking block kept with its signature");
    got_free(&g);
    /* the older fixture: a tool_use after thinking, its input in two fragments */
    stream_check_fixture("anthropic_thinking.sse", d->stream_event, &g);
    const char *want2[] = {"toolu_01T1x1fJ34qAmk2tNTrN7Up6|get_weather|"
                           "{\"location\": \"San Francisco, CA\", \"text\": \"x\"}"};
    check_calls(&g, want2, 1, "anthropic: the thinking fixture's tool_use");
    got_free(&g);
    /* a whole message */
    const char *whole = "{\"type\":\"message\",\"content\":[{\"type\":\"thinking\","
                        "\"thinking\":\"t\",\"signature\":\"s\"},{\"type\":\"tool_use\","
                        "\"id\":\"toolu_9\",\"name\":\"x\",\"input\":{\"k\":[1]}}],"
                        "\"stop_reason\":\"tool_use\"}";
    got_init(&g, d->stream_event);
    TAP_INT(d->decode_body(&g.st, whole, strlen(whole), got_emit, &g), 0, "anthropic: whole");
    const char *want3[] = {"toolu_9|x|{\"k\":[1]}"};
    check_calls(&g, want3, 1, "anthropic: a whole message's tool_use");
    got_free(&g);

    /* the request: tools with input_schema; calls as tool_use after the thinking blocks;
     * the results in one user message, then the next prompt */
    struct tool_call calls[] = {{.id = "toolu_1", .wire = "test__add", .args = "{\"a\":1}",
                                 .args_len = 7},
                                {.id = "toolu_2", .wire = "test__echo", .args = "bad", .args_len = 3}};
    struct api_message m[] = {
        API_MSG("system", "sys"),
        API_MSG("user", "add"),
        {.role = "assistant", .content = "ok", .calls = calls, .n_calls = 2,
         .thinking_json = "[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"}]"},
        {.role = "tool", .content = "3", .tool_call_id = "toolu_1"},
        {.role = "tool", .content = "no", .tool_call_id = "toolu_2", .tool_error = 1},
        API_MSG("user", "next"),
    };
    struct api_tool tools[] = {{"test__add", "Add.", "{\"type\":\"object\"}"}};
    struct api_request r = {.model = "claude-x", .messages = m, .n_messages = 6, .tools = tools,
                            .n_tools = 1};
    char *body = d->request_json(&r);
    cJSON *o = cJSON_Parse(body);
    cJSON *ms = cJSON_GetObjectItem(o, "messages");
    TAP_INT(cJSON_GetArraySize(ms), 3, "anthropic request: user, assistant, user");
    cJSON *ac = cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 1), "content");
    const char *types[4];
    for (int i = 0; i < 4; i++)
        types[i] = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ac, i), "type"));
    TAP_OK(cJSON_GetArraySize(ac) == 4 && !strcmp(types[0], "thinking") &&
               !strcmp(types[1], "text") && !strcmp(types[2], "tool_use") &&
               !strcmp(types[3], "tool_use"),
           "anthropic request: thinking, text, tool_use, tool_use");
    cJSON *in = cJSON_GetObjectItem(cJSON_GetArrayItem(ac, 2), "input");
    TAP_OK(cJSON_IsNumber(cJSON_GetObjectItem(in, "a")), "anthropic request: input as an object");
    cJSON *uc = cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 2), "content");
    TAP_OK(cJSON_GetArraySize(uc) == 3 &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(uc, 0),
                                                                "tool_use_id")), "toolu_1") &&
               cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(uc, 1), "is_error")) &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(uc, 2),
                                                                "text")), "next"),
           "anthropic request: both results, then the next prompt, in one user message");
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "tools"), 0);
    TAP_OK(cJSON_GetObjectItem(t0, "input_schema") && !cJSON_GetObjectItem(t0, "parameters"),
           "anthropic request: tools with input_schema");
    cJSON_Delete(o);
    free(body);
    r.n_tools = 0;
    r.messages = m + 1;
    r.n_messages = 1;
    body = d->request_json(&r);
    TAP_OK(strstr(body, "\"content\":\"add\"") && !strstr(body, "tools"),
           "anthropic request: plain messages as before");
    free(body);
}

/* The body a dialect makes of one exchange: the user's "add", the assistant's call id of
 * test__add {"a":1} (thinking: its thinking_json, may be NULL), the result "3"; parsed
 * (caller deletes). */
static cJSON *exchange_body(const char *dialect, const char *id, const char *thinking)
{
    struct tool_call calls[] = {{.id = (char *)id, .wire = "test__add", .args = "{\"a\":1}",
                                 .args_len = 7}};
    struct api_message m[] = {
        API_MSG("user", "add"),
        {.role = "assistant", .content = "", .calls = calls, .n_calls = 1,
         .thinking_json = thinking},
        {.role = "tool", .content = "3", .tool_call_id = id, .tool_name = "test__add"},
    };
    struct api_tool tools[] = {{"test__add", "Add.", "{\"type\":\"object\"}"}};
    struct api_request r = {.model = "m", .messages = m, .n_messages = 3, .tools = tools,
                            .n_tools = 1};
    char *body = dialect_find(dialect)->request_json(&r);
    cJSON *o = cJSON_Parse(body);
    free(body);
    return o;
}

static void test_gemini(void)
{
    const struct dialect *d = dialect_find("gemini");
    struct got g;
    stream_check_fixture("gemini_tool_call.sse", d->stream_event, &g);
    const char *want[] = {"-|test__add|{\"a\":2,\"b\":40}",
                          "-|test__echo|{\"text\":\"h\u00e9llo\"}"};
    check_calls(&g, want, 2, "gemini: functionCall parts, whole");
    TAP_STR(g.st.finish, "tool_calls", "gemini: STOP with calls is tool_calls");
    TAP_STR(buf_str(&g.st.thinking_json), "[\"CiQB0e2Kb0cz+/x\",\"\"]",
            "gemini: the thoughtSignature kept per call");
    TAP_STR(buf_str(&g.content), "Checking.", "gemini: the text beside");
    got_free(&g);

    cJSON *o = exchange_body("gemini", "call_1_1", "[\"sig\"]");
    cJSON *cs = cJSON_GetObjectItem(o, "contents");
    cJSON *p1 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cs, 1), "parts"), 0);
    cJSON *p2 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cs, 2), "parts"), 0);
    TAP_OK(cJSON_GetArraySize(cs) == 3 &&
               cJSON_IsNumber(cJSON_GetObjectItem(
                   cJSON_GetObjectItem(cJSON_GetObjectItem(p1, "functionCall"), "args"), "a")) &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p1, "thoughtSignature")), "sig"),
           "gemini request: the model's functionCall with its signature");
    cJSON *fr = cJSON_GetObjectItem(p2, "functionResponse");
    TAP_OK(fr && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(fr, "name")), "test__add") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(
                           cJSON_GetObjectItem(fr, "response"), "result")), "3"),
           "gemini request: the functionResponse by name");
    TAP_OK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                                   cJSON_GetArrayItem(cJSON_GetObjectItem(o, "tools"), 0),
                                   "functionDeclarations"), 0), "parametersJsonSchema") != NULL,
           "gemini request: functionDeclarations with parametersJsonSchema");
    cJSON_Delete(o);
}

static void test_responses(void)
{
    const struct dialect *d = dialect_find("responses");
    struct got g;
    stream_check_fixture("responses_tool_call.sse", d->stream_event, &g);
    const char *want[] = {"call_add1|test__add|{\"a\":2,\"b\":40}",
                          "call_echo2|test__echo|{\"text\":\"h\\u00e9llo\"}"};
    check_calls(&g, want, 2, "responses: function_call items from argument deltas");
    TAP_STR(g.st.finish, "tool_calls", "responses: completed with calls is tool_calls");
    got_free(&g);
    const char *whole = "{\"object\":\"response\",\"status\":\"completed\",\"output\":["
                        "{\"type\":\"function_call\",\"call_id\":\"c9\",\"name\":\"x\","
                        "\"arguments\":\"{}\"}]}";
    got_init(&g, d->stream_event);
    TAP_INT(d->decode_body(&g.st, whole, strlen(whole), got_emit, &g), 0, "responses: whole");
    const char *want2[] = {"c9|x|{}"};
    check_calls(&g, want2, 1, "responses: a whole response's function_call");
    got_free(&g);

    cJSON *o = exchange_body("responses", "call_1", NULL);
    cJSON *in = cJSON_GetObjectItem(o, "input");
    cJSON *i1 = cJSON_GetArrayItem(in, 1), *i2 = cJSON_GetArrayItem(in, 2);
    TAP_OK(cJSON_GetArraySize(in) == 3 &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(i1, "type")), "function_call") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(i1, "arguments")), "{\"a\":1}") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(i2, "type")),
                       "function_call_output") &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(i2, "call_id")), "call_1"),
           "responses request: function_call and function_call_output items");
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "tools"), 0);
    TAP_OK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t0, "name")), "test__add") &&
               cJSON_GetObjectItem(t0, "parameters") && cJSON_IsFalse(cJSON_GetObjectItem(t0, "strict")),
           "responses request: flat function tools, strict false");
    cJSON_Delete(o);
}

int main(void)
{
    test_responses();
    test_gemini();
    test_anthropic();
    test_openai_stream();
    test_openai_request();
    test_wire();
    test_schema();
    test_glob();
    test_registry();
    test_policy();
    return tap_done();
}
