/* gemini.c - the Gemini generateContent dialect: request body, stream chunks, whole answers,
 * RetryInfo. Chunks are walked with jscan (no allocation but the unescaped text); bodies are
 * built and error bodies read with cJSON, off the hot path. */
#include "config.h"
#include "proto/gemini.h"
#include "proto/dialect.h"
#include "proto/api_int.h"
#include "proto/jscan.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The body member of a sampling parameter: generationConfig names them in camelCase
 * (top_p -> topP), and max_tokens is maxOutputTokens. ud: a buffer of GEMINI_NAME_MAX. */
#define GEMINI_NAME_MAX 64
static const char *gemini_param_name(void *ud, const struct api_param *p)
{
    if (strcmp(p->name, "max_tokens") == 0)
        return "maxOutputTokens";
    char *out = ud;
    size_t o = 0;
    for (const char *s = p->name; *s && o + 1 < GEMINI_NAME_MAX; s++) {
        if (*s == '_' && s[1]) {
            s++;
            out[o++] = (char)(*s >= 'a' && *s <= 'z' ? *s - 'a' + 'A' : *s);
        } else {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
    return out;
}

static cJSON *gemini_text_part(const char *text)
{
    cJSON *part = cJSON_CreateObject();
    cJSON_AddStringToObject(part, "text", text ? text : "");
    return part;
}

/* A call's id as the server gave it, or NULL: none, or one tokterm made to pair a result
 * with its call ("call_ROUND_N", session.c) when the server named none. A server's id goes
 * back in the functionCall and its functionResponse ("must be sent back"; until 2026-12 it
 * never was, and parallel calls of one function could not be told apart). */
static const char *gemini_server_id(const char *id)
{
    unsigned r, k;
    int end = 0;
    if (!id || !*id || (sscanf(id, "call_%u_%u%n", &r, &k, &end) == 2 && !id[end]))
        return NULL;
    return id;
}

/* The parts of a model turn that asked for tools: a functionCall per call (args: the
 * arguments as an object, {} when they were not one), with its thoughtSignature when the
 * answer had one (thinking_json: a JSON array of signatures, one per call, "" for none). */
static void gemini_call_parts(cJSON *turn, const struct api_message *m)
{
    cJSON *sigs = m->thinking_json ? cJSON_Parse(m->thinking_json) : NULL;
    for (size_t k = 0; k < m->n_calls; k++) {
        const struct tool_call *c = &m->calls[k];
        cJSON *part = cJSON_CreateObject(), *fc = cJSON_AddObjectToObject(part, "functionCall");
        if (gemini_server_id(c->id))
            cJSON_AddStringToObject(fc, "id", c->id);
        cJSON_AddStringToObject(fc, "name", c->wire ? c->wire : "");
        cJSON *args = c->args ? cJSON_ParseWithLength(c->args, c->args_len) : NULL;
        if (!cJSON_IsObject(args)) {
            cJSON_Delete(args);
            args = cJSON_CreateObject();
        }
        cJSON_AddItemToObject(fc, "args", args);
        const char *sig = cJSON_GetStringValue(cJSON_GetArrayItem(sigs, (int)k));
        if (sig && *sig)
            cJSON_AddStringToObject(part, "thoughtSignature", sig);
        cJSON_AddItemToArray(turn, part);
    }
    cJSON_Delete(sigs);
}

/* A tool's result: functionResponse {id (the server's), name, response: {"result" or
 * "error": text}}. */
static cJSON *gemini_result_part(const struct api_message *m)
{
    cJSON *part = cJSON_CreateObject(), *fr = cJSON_AddObjectToObject(part, "functionResponse");
    if (gemini_server_id(m->tool_call_id))
        cJSON_AddStringToObject(fr, "id", m->tool_call_id);
    cJSON_AddStringToObject(fr, "name", m->tool_name ? m->tool_name : "");
    cJSON *resp = cJSON_AddObjectToObject(fr, "response");
    cJSON_AddStringToObject(resp, m->tool_error ? "error" : "result", m->content ? m->content : "");
    return part;
}

/* A file as {"inline_data": {"mime_type": ..., "data": base64}}. */
static cJSON *gemini_inline_part(const struct api_part *p)
{
    cJSON *part = cJSON_CreateObject();
    cJSON *in = cJSON_AddObjectToObject(part, "inline_data");
    cJSON_AddStringToObject(in, "mime_type", p->mime);
    struct buf d = BUF_INIT;
    buf_append_base64(&d, p->data, p->len);
    cJSON_AddStringToObject(in, "data", buf_str(&d));
    buf_free(&d);
    return part;
}

char *gemini_request_json(const struct api_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *contents = cJSON_AddArrayToObject(o, "contents");
    cJSON *sys = NULL, *turn = NULL;
    const char *turn_role = NULL;
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct api_message *m = &r->messages[i];
        int tool = m->n_calls || m->tool_call_id;
        if ((!m->content || !*m->content) && !tool && !m->n_parts)
            continue; /* Gemini refuses an empty text part: "empty text parameter" */
        if (m->role && strcmp(m->role, "system") == 0) {
            if (!sys) {
                cJSON *si = cJSON_AddObjectToObject(o, "systemInstruction");
                sys = cJSON_AddArrayToObject(si, "parts");
            }
            cJSON_AddItemToArray(sys, gemini_text_part(m->content));
            continue;
        }
        /* Gemini knows two roles and wants them to alternate: a run of one role is one turn
         * of several parts. */
        const char *role = m->role && strcmp(m->role, "assistant") == 0 ? "model" : "user";
        if (!turn || strcmp(turn_role, role) != 0) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "role", role);
            turn = cJSON_AddArrayToObject(c, "parts");
            turn_role = role;
            cJSON_AddItemToArray(contents, c);
        }
        if (m->tool_call_id) {
            cJSON_AddItemToArray(turn, gemini_result_part(m));
            continue;
        }
        for (size_t k = 0; k < m->n_parts; k++) /* files first: inline_data */
            cJSON_AddItemToArray(turn, gemini_inline_part(&m->parts[k]));
        if (m->content && *m->content)
            cJSON_AddItemToArray(turn, gemini_text_part(m->content));
        gemini_call_parts(turn, m);
    }
    if (r->n_tools) {
        cJSON *decl = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_tools; i++) {
            cJSON *f = api_tool_schema(&r->tools[i]);
            /* the whole JSON Schema (parameters takes only an OpenAPI subset) */
            cJSON_AddItemToObject(f, "parametersJsonSchema",
                                  cJSON_DetachItemFromObject(f, "parameters"));
            cJSON_AddItemToArray(decl, f);
        }
        cJSON *t = cJSON_CreateObject();
        cJSON_AddItemToObject(t, "functionDeclarations", decl);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "tools"), t);
    }
    cJSON *gc = cJSON_CreateObject();
    char name[GEMINI_NAME_MAX];
    api_params_add(gc, r, gemini_param_name, name);
    if (api_effort_budget(r->reasoning_effort)) {
        /* Gemini counts the thinking inside maxOutputTokens: the answer's limit gets the
         * budget on top, whatever its size (anthropic's max_tokens gets it only when not
         * above it), up to the 2.5 models' 65,536 (until 2026-12 --max-tokens 100 with a
         * budget of 1024 left the answer nothing) */
        if (r->max_tokens > 0) {
            char digits[24];
            long v = r->max_tokens + api_effort_budget(r->reasoning_effort);
            snprintf(digits, sizeof digits, "%ld",
                     v > 65536 && r->max_tokens <= 65536 ? 65536 : v);
            cJSON_ReplaceItemInObjectCaseSensitive(gc, "maxOutputTokens",
                                                   cJSON_CreateRaw(digits));
        }
        cJSON *tc = cJSON_AddObjectToObject(gc, "thinkingConfig");
        cJSON_AddNumberToObject(tc, "thinkingBudget",
                                (double)api_effort_budget(r->reasoning_effort));
        cJSON_AddTrueToObject(tc, "includeThoughts");
    }
    if (gc->child)
        cJSON_AddItemToObject(o, "generationConfig", gc);
    else
        cJSON_Delete(gc);
    return api_json_finish(o);
}

/* finishReason s[0..n) into st->finish (and finish_detail). */
static void gemini_finish(struct api_stream *st, const char *s, size_t n, api_emit_fn fn,
                          void *ud)
{
    if (n == 0 || (n == 25 && memcmp(s, "FINISH_REASON_UNSPECIFIED", 25) == 0))
        return;
    api_copy(st->finish_detail, sizeof st->finish_detail, s, n);
    api_code_clean(st->finish_detail);
    if (n == 4 && memcmp(s, "STOP", 4) == 0) {
        strcpy(st->finish, "stop");
    } else if (n == 10 && memcmp(s, "MAX_TOKENS", 10) == 0) {
        strcpy(st->finish, "length");
    } else {
        /* SAFETY, RECITATION, LANGUAGE, BLOCKLIST, PROHIBITED_CONTENT, SPII, OTHER,
         * MALFORMED_FUNCTION_CALL, IMAGE_SAFETY, ...: the answer was stopped, for this reason */
        strcpy(st->finish, "content_filter");
    }
    fn(ud, API_FINISH, NULL, 0);
}

/* A functionCall part (whole, in one chunk: Gemini does not stream arguments): a call with
 * its name, args and (newer servers) id; its thoughtSignature kept, one per call, in
 * thinking_json (sent back with the call). 0, or -1 past a limit. */
static int gemini_call(struct api_stream *st, const char *fc, size_t fn_len, const char *sig,
                       size_t sn, int sesc, api_emit_fn fn, void *ud)
{
    cJSON *o = cJSON_ParseWithLength(fc, fn_len);
    struct tool_call *c = api_call_get(st, (long)st->n_calls, 1, fn, ud);
    if (!c) {
        cJSON_Delete(o);
        return -1;
    }
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "id"));
    if (name)
        api_call_str(&c->wire, name, strlen(name));
    if (id && *id)
        api_call_str(&c->id, id, strlen(id));
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
    char *a = cJSON_IsObject(args) ? cJSON_PrintUnformatted(args) : NULL;
    int r = api_call_args(st, c, a ? a : "{}", a ? strlen(a) : 2);
    free(a);
    cJSON_Delete(o);
    /* the signatures, a JSON array of strings aligned with the calls ("" for none) */
    if (st->thinking_json.len) {
        st->thinking_json.data[--st->thinking_json.len] = 0; /* the "]" */
        buf_appendc(&st->thinking_json, ',');
    } else {
        buf_appendc(&st->thinking_json, '[');
    }
    struct buf u = BUF_INIT;
    if (sig && sesc)
        jscan_unescape(sig, sn, &u);
    else if (sig)
        buf_append(&u, sig, sn);
    cJSON *js = cJSON_CreateString(buf_str(&u));
    char *t = cJSON_PrintUnformatted(js);
    buf_appends(&st->thinking_json, t ? t : "\"\"");
    free(t);
    cJSON_Delete(js);
    buf_free(&u);
    buf_appendc(&st->thinking_json, ']');
    return r;
}

/* One part: its text goes out once the part is read (`thought` may follow `text`). */
static int gemini_part(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    const char *text = NULL, *k, *fc = NULL, *sig = NULL;
    size_t tn = 0, kn, fcn = 0, sn = 0;
    int esc = 0, thought = 0, first = 1, r, sesc = 0;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "functionCall") && jscan_peek(j) == '{') {
            fc = j->p;
            if (jscan_skip(j) < 0)
                return -1;
            fcn = (size_t)(j->p - fc);
        } else if (jscan_key_is(k, kn, "thoughtSignature") && jscan_peek(j) == '"') {
            if (jscan_string(j, &sig, &sn, &sesc) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "text") && jscan_peek(j) == '"') {
            if (jscan_string(j, &text, &tn, &esc) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "thought")) {
            thought = jscan_peek(j) == 't';
            if (jscan_skip(j) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    api_emit_span(st, thought ? API_REASONING : API_CONTENT, text, tn, esc, fn, ud);
    if (fc && gemini_call(st, fc, fcn, sig, sn, sesc, fn, ud) < 0)
        return -1;
    return 0;
}

static int gemini_content(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    const char *k;
    size_t kn;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "parts") && jscan_peek(j) == '[') {
            int af = 1, ar;
            jscan_array_begin(j);
            while ((ar = jscan_array_next(j, &af)) == 1)
                if (gemini_part(st, j, fn, ud) < 0)
                    return -1;
            if (ar < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

static int gemini_candidate(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_object_begin(j) < 0)
        return -1;
    const char *k, *s;
    size_t kn, n;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "content")) {
            if (gemini_content(st, j, fn, ud) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "finishReason")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0)
                gemini_finish(st, s, n, fn, ud);
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

static const struct api_usage_key gemini_usage_keys[] = {
    API_USAGE_AT(NULL, "promptTokenCount", prompt),
    API_USAGE_AT(NULL, "candidatesTokenCount", completion),
    API_USAGE_AT(NULL, "totalTokenCount", total),
    API_USAGE_AT(NULL, "thoughtsTokenCount", reasoning),
    API_USAGE_AT(NULL, "cachedContentTokenCount", cached),
    {NULL, NULL, 0},
};

/* usageMetadata: each chunk's is the whole count so far, so it replaces the last one. The
 * thoughts are billed as output but not counted in candidatesTokenCount: completion is both,
 * as in chat completions (whose completion_tokens include the reasoning tokens). */
static int gemini_usage(struct api_stream *st, struct jscan *j)
{
    struct api_usage before = st->usage;
    int good = st->usage_good;
    memset(&st->usage, 0, sizeof st->usage);
    st->usage_good = 0;
    if (api_usage_read(st, j, gemini_usage_keys) < 0)
        return -1;
    if (!st->usage.present) {
        st->usage = before; /* nothing usable in this one: keep the last */
    } else {
        st->usage.completion += st->usage.reasoning;
        if (st->usage.total < st->usage.prompt + st->usage.completion)
            st->usage.total = st->usage.prompt + st->usage.completion;
    }
    st->usage_good += good;
    return 0;
}

static int gemini_feedback(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    const char *k, *s;
    size_t kn, n;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "blockReason")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0 && !(n == 24 && memcmp(s, "BLOCK_REASON_UNSPECIFIED", 24) == 0)) {
                strcpy(st->finish, "content_filter");
                char why[32];
                api_copy(why, sizeof why, s, n);
                api_code_clean(why);
                snprintf(st->finish_detail, sizeof st->finish_detail, "prompt blocked: %s", why);
                fn(ud, API_FINISH, NULL, 0);
            }
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

/* {"code": 503, "message": "...", "status": "UNAVAILABLE", "details": [...]}: the message,
 * and the status as the code (the number when there is none). */
static int gemini_error_obj(struct api_stream *st, struct jscan *j)
{
    if (jscan_peek(j) != '{')
        return api_error_obj(st, j); /* a string, null */
    jscan_object_begin(j);
    const char *k, *s;
    size_t kn, n;
    int first = 1, r;
    char status[64] = "";
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "message")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0)
                api_error_set(st, s, n);
        } else if (jscan_key_is(k, kn, "status")) {
            if (api_short(st, j, status, sizeof status) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "code") && jscan_peek(j) != '"') {
            long long code;
            if (jscan_integer(j, &code) < 0)
                return -1;
            snprintf(st->error_code, sizeof st->error_code, "%lld", code);
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    if (status[0])
        memcpy(st->error_code, status, sizeof st->error_code);
    api_code_clean(st->error_code);
    if (st->error.len == 0)
        buf_appends(&st->error, "the server reported an error");
    return 0;
}

int gemini_stream_chunk(struct api_stream *st, const char *json, size_t n, api_emit_fn fn,
                        void *ud)
{
    struct jscan j;
    jscan_init(&j, json, n);
    if (jscan_object_begin(&j) < 0)
        return api_malformed(st, json, n, "not an object");
    const char *k;
    size_t kn;
    int first = 1, r, had_error = 0, usage_before = st->usage.present;
    st->chunks++;
    while ((r = jscan_object_next(&j, &first, &k, &kn)) == 1) {
        int rc = 0;
        if (jscan_key_is(k, kn, "candidates") && jscan_peek(&j) == '[') {
            int af = 1, ar, idx = 0;
            jscan_array_begin(&j);
            /* One answer is asked for; candidates past the first are ignored. */
            while (rc == 0 && (ar = jscan_array_next(&j, &af)) == 1)
                rc = idx++ == 0 ? gemini_candidate(st, &j, fn, ud) : jscan_skip(&j);
            if (ar < 0)
                rc = -1;
        } else if (jscan_key_is(k, kn, "usageMetadata")) {
            rc = gemini_usage(st, &j);
        } else if (jscan_key_is(k, kn, "modelVersion")) {
            rc = api_short(st, &j, st->model, sizeof st->model);
        } else if (jscan_key_is(k, kn, "promptFeedback")) {
            rc = gemini_feedback(st, &j, fn, ud);
        } else if (jscan_key_is(k, kn, "error") && jscan_peek(&j) != 'n') {
            rc = gemini_error_obj(st, &j);
            had_error = 1;
        } else {
            rc = jscan_skip(&j);
        }
        if (rc < 0)
            return api_malformed(st, json, n, j.err);
    }
    if (r < 0 || !jscan_at_end(&j))
        return api_malformed(st, json, n, j.err ? j.err : "trailing bytes");
    if (st->usage.present && !usage_before)
        fn(ud, API_USAGE, NULL, 0);
    if (st->n_calls && !strcmp(st->finish, "stop"))
        strcpy(st->finish, "tool_calls"); /* Gemini says STOP: the answer asks for tools */
    return had_error ? 1 : 0;
}

int gemini_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                        void *ud)
{
    if (ev->data_len == 0)
        return 0;
    return gemini_stream_chunk(st, ev->data, ev->data_len, fn, ud);
}

/* A whole answer: one chunk, or [chunk, chunk, ...] (streamGenerateContent without alt=sse). */
static int gemini_whole(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                        void *ud)
{
    struct jscan j;
    jscan_init(&j, body, n);
    if (jscan_peek(&j) != '[')
        return gemini_stream_chunk(st, body, n, fn, ud);
    int af = 1, ar;
    jscan_array_begin(&j);
    while ((ar = jscan_array_next(&j, &af)) == 1) {
        jscan_peek(&j); /* past the blanks: the element starts at j.p */
        const char *from = j.p;
        if (jscan_skip(&j) < 0)
            return api_malformed(st, body, n, j.err);
        int r = gemini_stream_chunk(st, from, (size_t)(j.p - from), fn, ud);
        if (r != 0)
            return r;
    }
    if (ar < 0 || !jscan_at_end(&j))
        return api_malformed(st, body, n, j.err ? j.err : "trailing bytes");
    return 0;
}

int gemini_decode_completion(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                             void *ud)
{
    return api_decode_whole(st, body, n, fn, ud, gemini_whole);
}

/* "12s", "0.5s", "1.250s": seconds, or -1. */
static double gemini_duration(const char *s)
{
    char *end;
    if (!s || !(*s >= '0' && *s <= '9'))
        return -1;
    double v = strtod(s, &end);
    if (end == s || strcmp(end, "s") != 0 || !(v >= 0 && v <= 86400))
        return -1;
    return v;
}

double gemini_retry_delay(const char *body, size_t n)
{
    cJSON *root = n ? cJSON_ParseWithLength(body, n) : NULL;
    const cJSON *top = cJSON_IsArray(root) ? cJSON_GetArrayItem(root, 0) : root;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(top, "error");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(err, "details");
    const cJSON *list = cJSON_IsArray(details) ? details : NULL, *d;
    double wait = -1;
    cJSON_ArrayForEach(d, list) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(d, "@type");
        const cJSON *delay = cJSON_GetObjectItemCaseSensitive(d, "retryDelay");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        size_t tl = strlen(t);
        if (tl >= 20 && strcmp(t + tl - 20, "google.rpc.RetryInfo") == 0 &&
            cJSON_IsString(delay)) {
            wait = gemini_duration(delay->valuestring);
            break;
        }
    }
    cJSON_Delete(root);
    return wait;
}

/* https://ai.google.dev/gemini-api/docs/troubleshooting: UNAVAILABLE (503), INTERNAL (500) and
 * DEADLINE_EXCEEDED (504) pass; a request the API refuses fails again. RESOURCE_EXHAUSTED
 * (429): the generic rules, which wait the RetryInfo delay; in a 200's stream before any text,
 * a rate limit too (until 2026-12 it was not retried, where the same error as an HTTP 429
 * was). */
static int gemini_retryable(long status, const char *code)
{
    if (status >= 200 && status <= 299 && code && strcmp(code, "RESOURCE_EXHAUSTED") == 0)
        return 2;
    static const char *const again[] = {"UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"};
    static const char *const never[] = {"INVALID_ARGUMENT", "FAILED_PRECONDITION",
                                        "PERMISSION_DENIED", "UNAUTHENTICATED", "NOT_FOUND"};
    for (size_t i = 0; code && i < sizeof again / sizeof *again; i++)
        if (strcmp(code, again[i]) == 0)
            return 1;
    for (size_t i = 0; code && i < sizeof never / sizeof *never; i++)
        if (strcmp(code, never[i]) == 0)
            return 0;
    return -1;
}

static enum api_outcome gemini_finish_outcome(const struct api_stream *st, struct buf *msg)
{
    if (strcmp(st->finish, "length") == 0) {
        buf_printf(msg, "the answer was cut at the token limit (finishReason \"%s\"); raise "
                   "max_tokens", st->finish_detail);
        return API_CUT;
    }
    if (strcmp(st->finish, "content_filter") == 0) {
        if (strncmp(st->finish_detail, "prompt blocked: ", 16) == 0)
            buf_printf(msg, "Gemini refused the prompt (blockReason \"%s\")",
                       st->finish_detail + 16);
        else
            buf_printf(msg, "Gemini stopped the answer (finishReason \"%s\")",
                       st->finish_detail);
        return API_CUT;
    }
    return API_OK;
}

const struct dialect dialect_gemini = {
    .name = "gemini",
    .base_url = "https://generativelanguage.googleapis.com/v1beta",
    .model = "gemini-2.5-flash",
    .key_env = {"GEMINI_API_KEY", "GOOGLE_API_KEY"},
    .path = "/models/{model}:streamGenerateContent?alt=sse",
    .models_path = "/models",
    .auth_header = "x-goog-api-key",
    .auth_prefix = "",
    .request_json = gemini_request_json,
    .stream_event = gemini_stream_event,
    .decode_body = gemini_decode_completion,
    /* {"error":{"code":429,"message":...,"status":"RESOURCE_EXHAUSTED"}} (or a list of one):
     * the message, and the status as the code */
    .error_message = api_error_message,
    .retryable = gemini_retryable,
    .finish_outcome = gemini_finish_outcome,
    .retry_delay = gemini_retry_delay,
};
