/* anthropic.c - the Anthropic Messages dialect (proto/dialect.h): POST {base}/messages with
 * x-api-key and anthropic-version, system prompt top-level, max_tokens always sent; the stream
 * of message_start, content_block_start/delta/stop, message_delta, message_stop, ping and
 * error events decoded into struct api_stream. */
#include "config.h"
#include "proto/api_int.h"
#include "proto/dialect.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the request ---- */

/* max_tokens when the profile sets none: the Messages API requires one. 4096 is the most
 * the Claude 3 models (claude-3-opus/sonnet/haiku-*) allow; every later model allows 8192 or
 * more, and 8192 is what a chat answer rarely reaches. */
static long anthropic_default_max_tokens(const char *model)
{
    static const char *const old[] = {"claude-3-opus", "claude-3-sonnet", "claude-3-haiku"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        if (model && strncmp(model, old[i], strlen(old[i])) == 0)
            return 4096;
    return 8192;
}

/* The sampling parameters the Messages API takes under their own names; max_tokens is added
 * first by the caller, seed does not exist there. With extended thinking (ud non-NULL) the
 * API refuses a temperature. */
static const char *anthropic_param_name(void *ud, const struct api_param *p)
{
    if (strcmp(p->name, "temperature") == 0)
        return ud ? NULL : p->name;
    return strcmp(p->name, "top_p") == 0 ? p->name : NULL;
}

/* The Messages API's role for a chat-completions role: system text goes top-level. */
static const char *anthropic_role(const char *role)
{
    if (!role || strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
        return NULL;
    return strcmp(role, "assistant") == 0 ? "assistant" : "user";
}

/* 1 when s has no text but white space: the API refuses a text block of only that ("text
 * content blocks must contain non-whitespace text"), as it refuses an empty one; a model of
 * another dialect may answer "\n\n" before its tool calls. */
static int anth_blank(const char *s)
{
    while (s && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++;
    return !s || !*s;
}

/* A block {"type": "text", "text": text}. */
static cJSON *anth_text_block(const char *text)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", text);
    return b;
}

/* The blocks of an assistant message that asked for tools: its signed thinking blocks (they
 * must come back with the results), its text, a tool_use per call (input: the arguments as
 * JSON; arguments that are not an object go as {}: the model was told they were invalid). */
static void anth_call_blocks(cJSON *blocks, const struct api_message *m,
                             struct api_call_ids *ids)
{
    cJSON *th = m->thinking_json ? cJSON_Parse(m->thinking_json) : NULL;
    cJSON *b;
    if (cJSON_IsArray(th)) {
        /* only Anthropic's own blocks: a turn answered by Gemini keeps its thought signatures
         * here, strings the Messages API refuses (until 2026-12 they were sent, and every later
         * -c of that conversation with --api anthropic failed) */
        while ((b = cJSON_DetachItemFromArray(th, 0)) != NULL) {
            const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "type"));
            if (cJSON_IsObject(b) && type &&
                (strcmp(type, "thinking") == 0 || strcmp(type, "redacted_thinking") == 0))
                cJSON_AddItemToArray(blocks, b);
            else
                cJSON_Delete(b);
        }
    }
    cJSON_Delete(th);
    if (!anth_blank(m->content))
        cJSON_AddItemToArray(blocks, anth_text_block(m->content));
    for (size_t k = 0; k < m->n_calls; k++) {
        const struct tool_call *c = &m->calls[k];
        b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", api_call_ids_call(ids, c->id));
        cJSON_AddStringToObject(b, "name", c->wire ? c->wire : "");
        cJSON *in = c->args ? cJSON_ParseWithLength(c->args, c->args_len) : NULL;
        if (!cJSON_IsObject(in)) {
            cJSON_Delete(in);
            in = cJSON_CreateObject();
        }
        cJSON_AddItemToObject(b, "input", in);
        cJSON_AddItemToArray(blocks, b);
    }
}

static cJSON *anth_result_block(const struct api_message *m, const struct api_call_ids *ids)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_result");
    cJSON_AddStringToObject(b, "tool_use_id", api_call_ids_result(ids, m->tool_call_id));
    cJSON_AddStringToObject(b, "content", m->content ? m->content : "");
    if (m->tool_error)
        cJSON_AddTrueToObject(b, "is_error");
    return b;
}

/* A tool round as text, for a request without tools: the model's words and "[called tool
 * NAME with ARGS]" per call, or "[result of tool NAME: TEXT]" (error). out is reset first. */
static void anth_tool_text(struct buf *out, const struct api_message *m)
{
    buf_reset(out);
    if (m->tool_call_id) {
        buf_printf(out, "[%s of tool %s: %s]", m->tool_error ? "error" : "result",
                   m->tool_name ? m->tool_name : "?", m->content ? m->content : "");
        return;
    }
    if (m->content && *m->content)
        buf_printf(out, "%s\n\n", m->content);
    for (size_t k = 0; k < m->n_calls; k++) {
        const struct tool_call *c = &m->calls[k];
        buf_printf(out, "%s[called tool %s with %.*s]", k ? "\n" : "", c->wire ? c->wire : "?",
                   (int)(c->args ? c->args_len : 2), c->args ? c->args : "{}");
    }
}

/* One message of the body: text alone as a string (as before tools), else its blocks. */
static void anth_flush(cJSON *msgs, const char *role, struct buf *text, cJSON **blocks)
{
    cJSON *jm = cJSON_CreateObject();
    cJSON_AddStringToObject(jm, "role", role);
    if (*blocks) {
        if (text->len)
            cJSON_AddItemToArray(*blocks, anth_text_block(buf_str(text)));
        cJSON_AddItemToObject(jm, "content", *blocks);
        *blocks = NULL;
    } else {
        cJSON_AddStringToObject(jm, "content", buf_str(text));
    }
    cJSON_AddItemToArray(msgs, jm);
    buf_reset(text);
}

/* A file as a content block: {"type":"image"|"document","source":{"type":"base64",
 * "media_type":..., "data":...}} (a document with its file name as title). */
static cJSON *anthropic_part(const struct api_part *p)
{
    cJSON *b = cJSON_CreateObject();
    int doc = p->kind == API_PART_DOCUMENT;
    cJSON_AddStringToObject(b, "type", doc ? "document" : "image");
    cJSON *src = cJSON_AddObjectToObject(b, "source");
    cJSON_AddStringToObject(src, "type", "base64");
    cJSON_AddStringToObject(src, "media_type", p->mime);
    struct buf d = BUF_INIT;
    buf_append_base64(&d, p->data, p->len);
    cJSON_AddStringToObject(src, "data", buf_str(&d));
    buf_free(&d);
    if (doc && p->name)
        cJSON_AddStringToObject(b, "title", p->name);
    return b;
}

static char *anthropic_request_json(const struct api_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", r->model ? r->model : "");
    /* extended thinking: its budget comes out of max_tokens, which must stay above it */
    long budget = api_effort_budget(r->reasoning_effort);
    long max = r->max_tokens > 0 ? r->max_tokens : anthropic_default_max_tokens(r->model);
    if (budget && max <= budget)
        max += budget;
    char digits[24];
    snprintf(digits, sizeof digits, "%ld", max);
    cJSON_AddRawToObject(o, "max_tokens", digits);
    /* System messages, wherever they are, joined into one top-level system; the others in
     * user/assistant alternation: consecutive messages of one role joined, empty (or blank) ones
     * left out (the API refuses an empty text). */
    struct buf sys = BUF_INIT, text = BUF_INIT, flat = BUF_INIT;
    struct api_call_ids ids = {0}; /* tool_use ids as sent: valid and unique */
    const char *role = NULL;
    cJSON *msgs = cJSON_CreateArray(), *blocks = NULL; /* blocks: the message has tool parts */
    for (size_t i = 0; i <= r->n_messages; i++) {
        const struct api_message *m = i < r->n_messages ? &r->messages[i] : NULL;
        const char *c = m && m->content ? m->content : "";
        const char *to = m ? anthropic_role(m->role) : NULL;
        int tool = m && (m->n_calls || m->tool_call_id);
        if (tool && !r->n_tools) {
            /* no tools in this request (a -c without the servers of the earlier turns): the
             * API refuses tool_use and tool_result blocks then, so the rounds go as text
             * (until 2026-12 every later -c of such a conversation failed with HTTP 400) */
            anth_tool_text(&flat, m);
            c = buf_str(&flat);
            tool = 0;
        }
        if (m && anth_blank(c) && !tool && !m->n_parts)
            continue;
        if (m && !to) {
            buf_printf(&sys, "%s%s", sys.len ? "\n\n" : "", c);
            continue;
        }
        if (role && (!m || strcmp(to, role) != 0))
            anth_flush(msgs, role, &text, &blocks);
        if (!m)
            break;
        if (m->n_parts) { /* files first (after the text before them), then the text */
            if (!blocks)
                blocks = cJSON_CreateArray();
            if (text.len)
                cJSON_AddItemToArray(blocks, anth_text_block(buf_str(&text)));
            buf_reset(&text);
            for (size_t k = 0; k < m->n_parts; k++)
                cJSON_AddItemToArray(blocks, anthropic_part(&m->parts[k]));
        }
        role = to;
        if (tool || blocks) { /* results first in their user message, then any text */
            if (!blocks)
                blocks = cJSON_CreateArray();
            if (text.len)
                cJSON_AddItemToArray(blocks, anth_text_block(buf_str(&text)));
            buf_reset(&text);
            if (m->tool_call_id)
                cJSON_AddItemToArray(blocks, anth_result_block(m, &ids));
            else if (m->n_calls)
                anth_call_blocks(blocks, m, &ids);
            else if (!anth_blank(c))
                cJSON_AddItemToArray(blocks, anth_text_block(c));
            continue;
        }
        buf_printf(&text, "%s%s", text.len ? "\n\n" : "", c);
    }
    if (sys.len)
        cJSON_AddStringToObject(o, "system", buf_str(&sys));
    cJSON_AddItemToObject(o, "messages", msgs);
    buf_free(&sys);
    buf_free(&text);
    buf_free(&flat);
    api_call_ids_free(&ids);
    api_params_add(o, r, anthropic_param_name, budget ? o : NULL);
    if (budget) {
        cJSON *th = cJSON_AddObjectToObject(o, "thinking");
        cJSON_AddStringToObject(th, "type", "enabled");
        cJSON_AddNumberToObject(th, "budget_tokens", (double)budget);
    }
    if (r->n_tools) {
        cJSON *tools = cJSON_AddArrayToObject(o, "tools");
        for (size_t i = 0; i < r->n_tools; i++) {
            cJSON *f = api_tool_schema(&r->tools[i]); /* name, description, parameters */
            cJSON *schema = cJSON_DetachItemFromObject(f, "parameters");
            cJSON_AddItemToObject(f, "input_schema", schema);
            cJSON_AddItemToArray(tools, f);
        }
    }
    if (r->stream)
        cJSON_AddTrueToObject(o, "stream");
    return api_json_finish(o);
}

/* ---- the answer ---- */

/* What one event (or a whole message) said besides its text. */
struct anth_info {
    char type[32];  /* the top-level "type": "message_start", ..., "message", "error" */
    int error;      /* an "error" object was read */
};

enum { ANTH_IN, ANTH_CREATE, ANTH_READ }; /* st->dcount: input token counts as the API splits them */

/* usage: cumulative counts (message_start has the input ones, message_delta the output so far
 * and, on newer servers, the input ones again). prompt = input + cache writes + cache reads,
 * as OpenAI's prompt_tokens counts cached tokens too; cached = cache reads. */
static int anth_usage(struct api_stream *st, struct jscan *j)
{
    if (jscan_null(j))
        return 0;
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    jscan_object_begin(j);
    int first = 1, r, good = st->usage_good;
    const char *k;
    size_t kn;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        long long *dst = jscan_key_is(k, kn, "input_tokens") ? &st->dcount[ANTH_IN]
                       : jscan_key_is(k, kn, "cache_creation_input_tokens") ? &st->dcount[ANTH_CREATE]
                       : jscan_key_is(k, kn, "cache_read_input_tokens") ? &st->dcount[ANTH_READ]
                       : jscan_key_is(k, kn, "output_tokens") ? &st->usage.completion : NULL;
        if (dst ? api_usage_number(st, j, dst) < 0 : jscan_skip(j) < 0)
            return -1;
    }
    if (r < 0)
        return -1;
    if (st->usage_good == good)
        return 0;
    struct api_usage *u = &st->usage;
    u->prompt = st->dcount[ANTH_IN] + st->dcount[ANTH_CREATE] + st->dcount[ANTH_READ];
    u->cached = st->dcount[ANTH_READ];
    u->total = u->prompt + u->completion;
    u->present = 1;
    return 0;
}

/* {"type": "overloaded_error", "message": "Overloaded"}: the message, the type as the code. */
static int anth_error(struct api_stream *st, struct jscan *j)
{
    if (jscan_peek(j) != '{')
        return api_error_obj(st, j); /* a string, null: as chat completions reads it */
    jscan_object_begin(j);
    int first = 1, r;
    const char *k, *s;
    size_t kn, n;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "type")) {
            if (api_short(st, j, st->error_code, sizeof st->error_code) < 0)
                return -1;
            api_code_clean(st->error_code);
        } else if (jscan_key_is(k, kn, "message")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0)
                api_error_set(st, s, n);
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    if (st->error.len == 0 && st->error_code[0])
        api_error_set(st, st->error_code, strlen(st->error_code));
    return 0;
}

#define ANTH_DEPTH 2 /* event -> message / delta / content_block -> content[] item */

/* An event's object, or one nested in it (depth > 0): text and thinking of a delta, a content
 * block or a message's content are emitted as found (whatever order the members come in);
 * the model, usage, stop_reason and error are kept in st; the top-level type in info. */
static int anth_obj(struct api_stream *st, struct jscan *j, int depth, struct anth_info *info,
                    api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    jscan_object_begin(j);
    int first = 1, r;
    const char *k, *s;
    size_t kn, n;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        int rc = 0;
        enum api_kind kind = jscan_key_is(k, kn, "text") ? API_CONTENT
                           : jscan_key_is(k, kn, "thinking") ? API_REASONING : 0;
        if (kind && depth > 0) {
            const char *q0 = jscan_peek(j) == '"' ? j->p : NULL;
            int t = api_text(st, j, &s, &n);
            if (q0 && t >= 0) { /* a string: where, for the event's shape */
                st->text_q0 = q0;
                st->text_q1 = j->p;
                st->text_kind = (int)kind;
                st->n_text++;
            }
            if (t > 0)
                fn(ud, kind, s, n);
            rc = t < 0 ? -1 : 0;
        } else if (depth == 0 && jscan_key_is(k, kn, "type")) {
            rc = api_short(st, j, info->type, sizeof info->type);
        } else if (depth < ANTH_DEPTH &&
                   (jscan_key_is(k, kn, "message") || jscan_key_is(k, kn, "delta") ||
                    jscan_key_is(k, kn, "content_block"))) {
            rc = anth_obj(st, j, depth + 1, info, fn, ud);
        } else if (depth < ANTH_DEPTH && jscan_key_is(k, kn, "content") &&
                   jscan_peek(j) == '[') {
            int af = 1, ar;
            jscan_array_begin(j);
            while ((ar = jscan_array_next(j, &af)) == 1)
                if (anth_obj(st, j, depth + 1, info, fn, ud) < 0)
                    return -1;
            rc = ar;
        } else if (jscan_key_is(k, kn, "usage")) {
            int had = st->usage.present;
            rc = anth_usage(st, j);
            if (rc == 0 && st->usage.present && !had) {
                st->n_other++;
                fn(ud, API_USAGE, NULL, 0);
            }
        } else if (jscan_key_is(k, kn, "model")) {
            rc = api_short(st, j, st->model, sizeof st->model);
        } else if (jscan_key_is(k, kn, "stop_reason")) {
            /* kept until message_stop says the message is whole; shown in messages */
            rc = api_short(st, j, st->finish_detail, sizeof st->finish_detail);
            api_code_clean(st->finish_detail);
        } else if (jscan_key_is(k, kn, "error")) {
            rc = anth_error(st, j);
            info->error = 1;
        } else {
            rc = jscan_skip(j); /* index, id, role, signature, partial_json, citations, ... */
        }
        if (rc < 0)
            return -1;
    }
    return r;
}

/* A stop_reason in chat-completions words: what the cache, the conversation and the exit
 * status go by (finish_detail keeps the server's own word). */
static const char *anth_finish(const char *stop)
{
    static const struct { const char *stop, *finish; } map[] = {
        {"end_turn", "stop"},       {"stop_sequence", "stop"},
        {"max_tokens", "length"},   {"model_context_window_exceeded", "length"},
        {"pause_turn", "length"},   /* the server paused a long turn: the answer is not whole */
        {"refusal", "content_filter"}, {"tool_use", "tool_calls"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(stop, map[i].stop) == 0)
            return map[i].finish;
    /* a reason this tokterm does not know: the answer may not be whole (exit 6, as Gemini's
     * unknown finishReason; until 2026-12 it was taken as complete) */
    return *stop ? "content_filter" : "stop";
}

static void anth_set_finish(struct api_stream *st, api_emit_fn fn, void *ud)
{
    snprintf(st->finish, sizeof st->finish, "%s", anth_finish(st->finish_detail));
    fn(ud, API_FINISH, NULL, 0);
}

/* One event's data (or a whole body): 0 on, 1 over, -1 malformed. */
static int anth_decode(struct api_stream *st, const char *json, size_t n, int is_error_event,
                       struct anth_info *info, api_emit_fn fn, void *ud)
{
    struct jscan j;
    jscan_init(&j, json, n);
    if (jscan_peek(&j) != '{')
        return api_malformed(st, json, n, "not an object");
    st->chunks++;
    if (anth_obj(st, &j, 0, info, fn, ud) < 0 || !jscan_at_end(&j))
        return api_malformed(st, json, n, j.err ? j.err : "trailing bytes");
    if (info->error || is_error_event || strcmp(info->type, "error") == 0) {
        if (st->error.len == 0)
            buf_appends(&st->error, "the server reported an error");
        return 1;
    }
    return 0;
}

/* ---- tool_use and thinking blocks (st->dstate: the kind of the block being streamed) ---- */

enum { ANTH_BLOCK_NONE, ANTH_BLOCK_THINKING, ANTH_BLOCK_TOOL };

/* Add one thinking block ({"type":"thinking","thinking","signature"} or a redacted one) to
 * st->thinking_json, a JSON array. */
static void anth_keep_block(struct api_stream *st, cJSON *b)
{
    char *t = cJSON_PrintUnformatted(b);
    if (!t)
        return;
    if (st->thinking_json.len) {
        st->thinking_json.data[--st->thinking_json.len] = 0; /* the "]" */
        buf_appendc(&st->thinking_json, ',');
    } else {
        buf_appendc(&st->thinking_json, '[');
    }
    buf_appends(&st->thinking_json, t);
    buf_appendc(&st->thinking_json, ']');
    free(t);
}

static const char *anth_str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* A content block as a whole (a message's content item, or content_block_start's): a
 * tool_use starts a call (its input, when it has members, is the whole arguments), a
 * thinking block starts (streamed) or is kept (whole), a redacted one is kept. key: the
 * block's index. 0, or -1 past a limit (st->error set). */
static int anth_block_start(struct api_stream *st, const cJSON *b, long key, int whole,
                            api_emit_fn fn, void *ud)
{
    const char *type = anth_str(b, "type");
    if (!type)
        return 0;
    if (!strcmp(type, "tool_use")) {
        struct tool_call *c = api_call_get(st, key, 1, fn, ud);
        if (!c)
            return -1;
        if (anth_str(b, "id"))
            api_call_str(&c->id, anth_str(b, "id"), strlen(anth_str(b, "id")));
        if (anth_str(b, "name"))
            api_call_str(&c->wire, anth_str(b, "name"), strlen(anth_str(b, "name")));
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(b, "input");
        if (cJSON_IsObject(in) && (in->child || whole)) {
            char *a = cJSON_PrintUnformatted(in);
            int r = a ? api_call_args(st, c, a, strlen(a)) : 0;
            free(a);
            if (r < 0)
                return -1;
        }
        st->dstate = ANTH_BLOCK_TOOL;
        st->dindex = key;
    } else if (!strcmp(type, "thinking") && whole) {
        anth_keep_block(st, (cJSON *)b);
    } else if (!strcmp(type, "thinking")) {
        buf_reset(&st->dtext);
        buf_reset(&st->dsig);
        if (anth_str(b, "signature"))
            buf_appends(&st->dsig, anth_str(b, "signature"));
        st->dstate = ANTH_BLOCK_THINKING;
    } else if (!strcmp(type, "redacted_thinking")) {
        anth_keep_block(st, (cJSON *)b);
    }
    return 0;
}

/* The events about blocks other than text: content_block_start, the deltas of tool input
 * and signatures, content_block_stop. Read with cJSON (they are few); text and thinking
 * deltas never come here. 0, or 1 when a limit ended the stream. */
static int anth_block_event(struct api_stream *st, const char *type, const char *json, size_t n,
                            api_emit_fn fn, void *ud)
{
    cJSON *o = cJSON_ParseWithLength(json, n);
    if (!o)
        return 0; /* anth_decode read it: it is valid JSON */
    const cJSON *ix = cJSON_GetObjectItemCaseSensitive(o, "index");
    long key = cJSON_IsNumber(ix) ? util_json_long(ix->valuedouble, -1) : -1;
    int r = 0;
    if (!strcmp(type, "content_block_start")) {
        r = anth_block_start(st, cJSON_GetObjectItemCaseSensitive(o, "content_block"), key, 0,
                             fn, ud);
    } else if (!strcmp(type, "content_block_delta")) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "delta");
        const char *dt = anth_str(d, "type"), *part = anth_str(d, "partial_json");
        struct tool_call *c = api_call_get(st, key, 0, fn, ud);
        if (dt && !strcmp(dt, "input_json_delta") && part && c)
            r = api_call_args(st, c, part, strlen(part));
        else if (dt && !strcmp(dt, "signature_delta") && anth_str(d, "signature"))
            buf_appends(&st->dsig, anth_str(d, "signature"));
    } else if (!strcmp(type, "content_block_stop") && st->dstate == ANTH_BLOCK_THINKING) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", buf_str(&st->dtext));
        cJSON_AddStringToObject(b, "signature", buf_str(&st->dsig));
        anth_keep_block(st, b);
        cJSON_Delete(b);
        st->dstate = ANTH_BLOCK_NONE;
    } else if (!strcmp(type, "content_block_stop")) {
        st->dstate = ANTH_BLOCK_NONE;
    }
    cJSON_Delete(o);
    return r < 0 ? 1 : 0;
}

/* The emit of the stream: thinking text is also kept for its block (sent back with tool
 * results). */
struct anth_emit {
    struct api_stream *st;
    api_emit_fn fn;
    void *ud;
};

static void anth_emit_fn(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct anth_emit *e = ud;
    if (kind == API_REASONING && e->st->dstate == ANTH_BLOCK_THINKING)
        buf_append(&e->st->dtext, s, n);
    e->fn(e->ud, kind, s, n);
}

static int anthropic_stream_event(struct api_stream *st, const struct sse_event *ev,
                                  api_emit_fn fn0, void *ud0)
{
    struct anth_emit em = {st, fn0, ud0};
    api_emit_fn fn = anth_emit_fn;
    void *ud = &em;
    if (ev->data_len == 0)
        return 0;
    if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
        st->done = 1; /* not Anthropic's: the end without message_stop is truncated */
        return 1;
    }
    int is_error = strcmp(ev->type, "error") == 0;
    /* a text delta shaped as the last one: only its string is new (the bytes around it, so
     * the type, the index and the delta's type, are the same) */
    if (!is_error && api_shape_match(st, ev->data, ev->data_len, fn, ud))
        return 0;
    struct anth_info info = {"", 0};
    st->text_q0 = st->text_q1 = NULL;
    st->n_text = st->n_other = 0;
    int r = anth_decode(st, ev->data, ev->data_len, is_error, &info, fn, ud);
    api_shape_keep(st, ev->data, ev->data_len,
                   r == 0 && st->error.len == 0 && strcmp(info.type, "content_block_delta") == 0);
    if (r != 0)
        return r;
    if (!strncmp(info.type, "content_block_", 14) &&
        (strcmp(info.type, "content_block_delta") != 0 ||
         memmem(ev->data, ev->data_len, "input_json_delta", 16) ||
         memmem(ev->data, ev->data_len, "signature_delta", 15)) &&
        anth_block_event(st, info.type, ev->data, ev->data_len, fn, ud))
        return 1;
    if (strcmp(info.type, "message_stop") == 0) {
        st->done = 1;
        anth_set_finish(st, fn, ud);
        return 1;
    }
    if (strcmp(info.type, "message_start") == 0)
        st->finish_detail[0] = '\0'; /* its message's stop_reason is null */
    return 0;
}

static int anthropic_decode_body(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                          void *ud)
{
    struct anth_info info = {"", 0};
    struct api_textcount c = {fn, ud, 0};
    int r = anth_decode(st, body, n, 0, &info, api_textcount_emit, &c);
    if (r != 0)
        return -1;
    cJSON *o = cJSON_ParseWithLength(body, n); /* tool_use and thinking blocks */
    const cJSON *b, *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    if (!cJSON_IsArray(content))
        content = NULL;
    long k = 0;
    cJSON_ArrayForEach(b, content) {
        if (anth_block_start(st, b, k++, 1, fn, ud) < 0) {
            cJSON_Delete(o);
            return -1;
        }
    }
    cJSON_Delete(o);
    /* a whole message is over: its stop_reason, or "end_turn" when it has text and names none
     * ({} or a message without content is no answer: finish stays "") */
    if (st->finish_detail[0] || c.text)
        anth_set_finish(st, fn, ud);
    return 0;
}

static enum api_outcome anthropic_finish_outcome(const struct api_stream *st, struct buf *msg)
{
    const char *d = st->finish_detail;
    if (strcmp(d, "model_context_window_exceeded") == 0) {
        buf_appends(msg, "the answer was cut: the model's context window is full (stop_reason "
                         "\"model_context_window_exceeded\"); shorten the conversation (/context, "
                         "context_policy) or start a new one");
        return API_CUT;
    }
    if (strcmp(d, "pause_turn") == 0) {
        buf_appends(msg, "the server paused a long turn (stop_reason \"pause_turn\"): the "
                         "answer is not whole; go on with -c -p 'go on'");
        return API_CUT;
    }
    if (strcmp(st->finish, "length") == 0) {
        buf_printf(msg, "the answer was cut at the token limit (stop_reason \"%s\"); raise "
                   "max_tokens", d);
        return API_CUT;
    }
    if (strcmp(d, "refusal") == 0) {
        buf_printf(msg, "the model declined to answer (stop_reason \"%s\")", d);
        return API_CUT;
    }
    if (strcmp(st->finish, "content_filter") == 0) {
        buf_printf(msg, "the answer stopped for a reason this tokterm does not know "
                        "(stop_reason \"%s\"): it may not be whole", d);
        return API_CUT;
    }
    return API_OK;
}

/* Anthropic's error types (https://docs.anthropic.com/en/api/errors): api_error (500) and
 * overloaded_error (529) pass; a request the API refuses fails again. */
static int anthropic_retryable(long status, const char *code)
{
    if (code && (strcmp(code, "overloaded_error") == 0 || strcmp(code, "api_error") == 0))
        return 1;
    if (status == 529)
        return 1;
    if (code && (strcmp(code, "invalid_request_error") == 0 ||
                 strcmp(code, "authentication_error") == 0 ||
                 strcmp(code, "permission_error") == 0 || strcmp(code, "not_found_error") == 0 ||
                 strcmp(code, "request_too_large") == 0 || strcmp(code, "billing_error") == 0))
        return 0;
    return -1; /* rate_limit_error and the rest: the generic rules, with retry-after */
}

const struct dialect dialect_anthropic = {
    .name = "anthropic",
    .base_url = "https://api.anthropic.com/v1",
    .model = "claude-haiku-4-5", /* the small, fast one, as gpt-4o-mini is for openai */
    .base_env = "ANTHROPIC_BASE_URL",
    .key_env = {"ANTHROPIC_API_KEY"},
    .path = "/messages",
    .models_path = "/models",
    .auth_header = "x-api-key",
    .auth_prefix = "",
    .headers = {"anthropic-version: 2023-06-01"},
    .request_json = anthropic_request_json,
    .stream_event = anthropic_stream_event,
    .decode_body = anthropic_decode_body,
    /* {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}} reads as
     * chat completions' {"error":{...}}: the message, and the type as the code */
    .error_message = api_error_message,
    .retryable = anthropic_retryable,
    .finish_outcome = anthropic_finish_outcome,
};
