/* responses.c - the OpenAI Responses dialect: request body, semantic stream events, whole
 * answers. Events are walked with jscan (no allocation but the unescaped text); the body is
 * built with cJSON. */
#include "config.h"
#include "proto/responses.h"
#include "proto/dialect.h"
#include "proto/api_int.h"
#include "proto/jscan.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* max_tokens is max_output_tokens; the API takes no seed (a 400 "Unknown parameter"). */
static const char *responses_param_name(void *ud, const struct api_param *p)
{
    (void)ud;
    if (strcmp(p->name, "max_tokens") == 0)
        return "max_output_tokens";
    if (strcmp(p->name, "seed") == 0)
        return NULL;
    return p->name;
}

/* A user message with files: input_image (a data URL) and input_file (filename, file_data)
 * parts, then input_text. */
static cJSON *responses_content(const struct api_message *m, const char *text)
{
    cJSON *a = cJSON_CreateArray();
    struct buf d = BUF_INIT;
    for (size_t k = 0; k < m->n_parts; k++) {
        const struct api_part *p = &m->parts[k];
        cJSON *e = cJSON_CreateObject();
        buf_reset(&d);
        api_part_data_url(&d, p);
        if (p->kind == API_PART_IMAGE) {
            cJSON_AddStringToObject(e, "type", "input_image");
            cJSON_AddStringToObject(e, "image_url", buf_str(&d));
        } else {
            cJSON_AddStringToObject(e, "type", "input_file");
            cJSON_AddStringToObject(e, "filename", p->name ? p->name : "file.pdf");
            cJSON_AddStringToObject(e, "file_data", buf_str(&d));
        }
        cJSON_AddItemToArray(a, e);
    }
    buf_free(&d);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "input_text");
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddItemToArray(a, t);
    return a;
}

char *responses_request_json(const struct api_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", r->model ? r->model : "");
    struct buf sys = BUF_INIT;
    struct api_call_ids ids = {0}; /* call_ids as sent: unique in the request */
    cJSON *input = cJSON_AddArrayToObject(o, "input");
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct api_message *m = &r->messages[i];
        const char *text = m->content ? m->content : "";
        if (m->role && strcmp(m->role, "system") == 0) {
            if (sys.len)
                buf_appends(&sys, "\n\n");
            buf_appends(&sys, text);
            continue;
        }
        if (m->tool_call_id) { /* a tool's result */
            cJSON *out = cJSON_CreateObject();
            cJSON_AddStringToObject(out, "type", "function_call_output");
            cJSON_AddStringToObject(out, "call_id", api_call_ids_result(&ids, m->tool_call_id));
            cJSON_AddStringToObject(out, "output", text);
            cJSON_AddItemToArray(input, out);
            continue;
        }
        if (*text || !m->n_calls) {
            cJSON *msg = cJSON_CreateObject();
            cJSON_AddStringToObject(msg, "role", m->role ? m->role : "user");
            if (m->n_parts)
                cJSON_AddItemToObject(msg, "content", responses_content(m, text));
            else
                cJSON_AddStringToObject(msg, "content", text);
            cJSON_AddItemToArray(input, msg);
        }
        for (size_t k = 0; k < m->n_calls; k++) { /* the calls the answer made, as items */
            const struct tool_call *c = &m->calls[k];
            cJSON *fc = cJSON_CreateObject();
            cJSON_AddStringToObject(fc, "type", "function_call");
            cJSON_AddStringToObject(fc, "call_id", api_call_ids_call(&ids, c->id));
            cJSON_AddStringToObject(fc, "name", c->wire ? c->wire : "");
            cJSON_AddStringToObject(fc, "arguments", c->args && c->args_len ? c->args : "{}");
            cJSON_AddItemToArray(input, fc);
        }
    }
    api_call_ids_free(&ids);
    if (r->n_tools) {
        cJSON *tools = cJSON_AddArrayToObject(o, "tools");
        for (size_t i = 0; i < r->n_tools; i++) {
            cJSON *f = api_tool_schema(&r->tools[i]);
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "type", "function");
            cJSON *x;
            while ((x = f->child) != NULL) /* name, description, parameters: flat */
                cJSON_AddItemToObject(t, x->string, cJSON_DetachItemViaPointer(f, x));
            cJSON_AddFalseToObject(t, "strict"); /* true would refuse most MCP schemas */
            cJSON_Delete(f);
            cJSON_AddItemToArray(tools, t);
        }
    }
    if (sys.len)
        cJSON_AddStringToObject(o, "instructions", buf_str(&sys));
    buf_free(&sys);
    api_params_add(o, r, responses_param_name, NULL);
    if (r->reasoning_summary || api_effort_budget(r->reasoning_effort)) {
        cJSON *rs = cJSON_AddObjectToObject(o, "reasoning");
        if (api_effort_budget(r->reasoning_effort))
            cJSON_AddStringToObject(rs, "effort", api_effort_name(r->reasoning_effort));
        cJSON_AddStringToObject(rs, "summary", "auto");
    }
    cJSON_AddBoolToObject(o, "store", 0);
    if (r->stream)
        cJSON_AddTrueToObject(o, "stream");
    return api_json_finish(o);
}

static const struct api_usage_key responses_usage_keys[] = {
    API_USAGE_AT(NULL, "input_tokens", prompt),
    API_USAGE_AT(NULL, "output_tokens", completion),
    API_USAGE_AT(NULL, "total_tokens", total),
    API_USAGE_AT("output_tokens_details", "reasoning_tokens", reasoning),
    API_USAGE_AT("input_tokens_details", "cached_tokens", cached),
    {NULL, NULL, 0},
};

/* What a response object said about its end. */
struct responses_end {
    char status[32];  /* "completed", "incomplete", "failed", "in_progress", ... */
    char reason[48];  /* incomplete_details.reason */
};

static int responses_incomplete(struct api_stream *st, struct jscan *j, struct responses_end *e)
{
    if (jscan_null(j))
        return 0;
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    jscan_object_begin(j);
    const char *k;
    size_t kn;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "reason")) {
            if (api_short(st, j, e->reason, sizeof e->reason) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

/* One content or summary part of an output item: {type, text}; its text goes out once the
 * part is read (type may follow text). kind: what text is when the type does not say. */
static int responses_part(struct api_stream *st, struct jscan *j, enum api_kind kind,
                          api_emit_fn fn, void *ud)
{
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    jscan_object_begin(j);
    const char *text = NULL, *k;
    size_t tn = 0, kn;
    int esc = 0, first = 1, r;
    char type[32] = "";
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if ((jscan_key_is(k, kn, "text") || jscan_key_is(k, kn, "refusal")) &&
            jscan_peek(j) == '"') {
            if (jscan_string(j, &text, &tn, &esc) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "type")) {
            if (api_short(st, j, type, sizeof type) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    if (strcmp(type, "reasoning_text") == 0 || strcmp(type, "summary_text") == 0)
        kind = API_REASONING;
    api_emit_span(st, kind, text, tn, esc, fn, ud);
    return 0;
}

/* An array of parts; reasoning summaries get a blank line between them. */
static int responses_parts(struct api_stream *st, struct jscan *j, enum api_kind kind,
                           api_emit_fn fn, void *ud)
{
    if (jscan_peek(j) != '[')
        return jscan_skip(j);
    jscan_array_begin(j);
    int af = 1, ar, idx = 0;
    while ((ar = jscan_array_next(j, &af)) == 1) {
        if (idx++ && kind == API_REASONING)
            fn(ud, API_REASONING, "\n\n", 2);
        if (responses_part(st, j, kind, fn, ud) < 0)
            return -1;
    }
    return ar;
}

/* A function_call item (JSON text item[0..n)), key: its output_index: the call it starts, or
 * the one already started (its arguments, when none streamed). 0, or -1 past a limit. */
static int responses_fc_item(struct api_stream *st, const char *item, size_t n, long key,
                             api_emit_fn fn, void *ud)
{
    cJSON *o = cJSON_ParseWithLength(item, n);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "type"));
    if (!type || strcmp(type, "function_call") != 0) {
        cJSON_Delete(o);
        return 0;
    }
    int r = 0;
    struct tool_call *c = api_call_get(st, key, 1, fn, ud);
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "call_id"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
    const char *args = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "arguments"));
    if (!c) {
        r = -1;
    } else {
        if (id && !c->id)
            c->id = xstrdup(id);
        if (name && !c->wire)
            c->wire = xstrdup(name);
        if (args && !c->args_len)
            r = api_call_args(st, c, args, strlen(args));
    }
    cJSON_Delete(o);
    return r;
}

/* One item of a whole answer's output[]: a message's content parts, a reasoning item's
 * summary (and content, for models that show their reasoning), a function call. */
static int responses_item(struct api_stream *st, struct jscan *j, long key, api_emit_fn fn,
                          void *ud)
{
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    const char *start = j->p;
    jscan_object_begin(j);
    const char *k;
    size_t kn;
    int first = 1, r;
    char type[32] = "";
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        int rc;
        if (jscan_key_is(k, kn, "content"))
            rc = responses_parts(st, j, API_CONTENT, fn, ud);
        else if (jscan_key_is(k, kn, "summary"))
            rc = responses_parts(st, j, API_REASONING, fn, ud);
        else if (jscan_key_is(k, kn, "type"))
            rc = api_short(st, j, type, sizeof type);
        else
            rc = jscan_skip(j);
        if (rc < 0)
            return -1;
    }
    if (r == 0 && !strcmp(type, "function_call") &&
        responses_fc_item(st, start, (size_t)(j->p - start), key, fn, ud) < 0)
        return -1;
    return r;
}

/* A response object: model, status, usage, incomplete_details, error; its output[] text only
 * when whole (a stream has sent it already, as deltas). */
static int responses_response(struct api_stream *st, struct jscan *j, int whole,
                              struct responses_end *e, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    const char *k;
    size_t kn;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        int rc;
        if (jscan_key_is(k, kn, "model")) {
            rc = api_short(st, j, st->model, sizeof st->model);
        } else if (jscan_key_is(k, kn, "status")) {
            rc = api_short(st, j, e->status, sizeof e->status);
        } else if (jscan_key_is(k, kn, "usage")) {
            rc = api_usage_read(st, j, responses_usage_keys);
        } else if (jscan_key_is(k, kn, "incomplete_details")) {
            rc = responses_incomplete(st, j, e);
        } else if (jscan_key_is(k, kn, "error")) {
            rc = api_error_obj(st, j);
        } else if (whole && jscan_key_is(k, kn, "output") && jscan_peek(j) == '[') {
            int af = 1, ar;
            long key = 0;
            jscan_array_begin(j);
            rc = 0;
            while (rc == 0 && (ar = jscan_array_next(j, &af)) == 1)
                rc = responses_item(st, j, key++, fn, ud);
            if (ar < 0)
                rc = -1;
        } else {
            rc = jscan_skip(j);
        }
        if (rc < 0)
            return -1;
    }
    return r;
}

/* The end a status names: 1 when the answer is over (finish set, or an error), else 0. */
static int responses_finish(struct api_stream *st, const struct responses_end *e,
                            api_emit_fn fn, void *ud)
{
    if (strcmp(e->status, "failed") == 0 || strcmp(e->status, "cancelled") == 0) {
        if (st->error.len == 0)
            buf_printf(&st->error, "the server reported the response %s", e->status);
        return 1;
    }
    if (strcmp(e->status, "completed") == 0) {
        strcpy(st->finish, st->n_calls ? "tool_calls" : "stop");
        strcpy(st->finish_detail, "completed");
    } else if (strcmp(e->status, "incomplete") == 0) {
        /* max_output_tokens; content_filter, or a reason this code does not know: the answer
         * was stopped */
        strcpy(st->finish, strcmp(e->reason, "max_output_tokens") == 0 ? "length"
                                                                       : "content_filter");
        snprintf(st->finish_detail, sizeof st->finish_detail, "%s",
                 e->reason[0] ? e->reason : "incomplete");
        api_code_clean(st->finish_detail);
    } else {
        return 0;
    }
    st->done = 1;
    fn(ud, API_FINISH, NULL, 0);
    return 1;
}

/* The members of an event that matter, found in one walk (in any order). */
struct responses_event {
    char type[64];
    const char *delta;       /* raw string span, NULL when none */
    size_t delta_n;
    int delta_esc;
    const char *response;    /* the response object's span, NULL when none */
    size_t response_n;
    long long summary_index;
    int has_error;           /* an "error" member (an error event's details) */
    const char *item;        /* the item's span (output_item.added / done), NULL when none */
    size_t item_n;
    long long output_index;
};

static int responses_scan(struct jscan *j, struct api_stream *st, struct responses_event *ev)
{
    const char *k;
    size_t kn;
    int first = 1, r;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        int rc = 0;
        if (jscan_key_is(k, kn, "type")) {
            rc = api_short(st, j, ev->type, sizeof ev->type);
        } else if (jscan_key_is(k, kn, "delta") && jscan_peek(j) == '"') {
            rc = jscan_string(j, &ev->delta, &ev->delta_n, &ev->delta_esc);
        } else if (jscan_key_is(k, kn, "response") && jscan_peek(j) == '{') {
            ev->response = j->p;
            rc = jscan_skip(j);
            ev->response_n = (size_t)(j->p - ev->response);
        } else if (jscan_key_is(k, kn, "summary_index") && jscan_peek(j) != 'n') {
            rc = jscan_integer(j, &ev->summary_index);
        } else if (jscan_key_is(k, kn, "output_index") && jscan_peek(j) != 'n') {
            rc = jscan_integer(j, &ev->output_index);
        } else if (jscan_key_is(k, kn, "item") && jscan_peek(j) == '{') {
            ev->item = j->p;
            rc = jscan_skip(j);
            ev->item_n = (size_t)(j->p - ev->item);
        } else {
            ev->has_error |= jscan_key_is(k, kn, "error") && jscan_peek(j) != 'n';
            rc = jscan_skip(j);
        }
        if (rc < 0)
            return -1;
    }
    return r < 0 || !jscan_at_end(j) ? -1 : 0;
}

static int responses_is(const struct responses_event *ev, const char *type)
{
    return strcmp(ev->type, type) == 0;
}

/* An error event: {"type":"error","code":...,"message":...} or its details in "error". */
static int responses_error_event(struct api_stream *st, const char *json, size_t n,
                                 const struct responses_event *ev)
{
    struct jscan j;
    jscan_init(&j, json, n);
    if (ev->has_error) {
        const char *k;
        size_t kn;
        int first = 1;
        jscan_object_begin(&j);
        while (jscan_object_next(&j, &first, &k, &kn) == 1 && !jscan_key_is(k, kn, "error"))
            jscan_skip(&j);
    }
    buf_reset(&st->error);
    api_error_obj(st, &j); /* the JSON was walked once already: it is valid */
    if (!ev->has_error && strcmp(buf_str(&st->error), "error") == 0)
        buf_reset(&st->error); /* the event's own "type" taken for a message */
    if (st->error.len == 0)
        buf_appends(&st->error, "the server reported an error");
    return 1;
}

int responses_stream_chunk(struct api_stream *st, const char *json, size_t n,
                           const char *type_hint, api_emit_fn fn, void *ud)
{
    struct responses_event ev;
    memset(&ev, 0, sizeof ev);
    struct jscan j;
    jscan_init(&j, json, n);
    if (jscan_object_begin(&j) < 0)
        return api_malformed(st, json, n, "not an object");
    if (responses_scan(&j, st, &ev) < 0)
        return api_malformed(st, json, n, j.err ? j.err : "trailing bytes");
    st->chunks++;
    if (!ev.type[0] && type_hint)
        api_copy(ev.type, sizeof ev.type, type_hint, strlen(type_hint));
    if (ev.delta && (responses_is(&ev, "response.output_text.delta") ||
                     responses_is(&ev, "response.refusal.delta") ||
                     responses_is(&ev, "response.reasoning_summary_text.delta") ||
                     responses_is(&ev, "response.reasoning_text.delta"))) {
        enum api_kind kind = strncmp(ev.type, "response.reasoning", 18) == 0 ? API_REASONING
                                                                              : API_CONTENT;
        api_emit_span(st, kind, ev.delta, ev.delta_n, ev.delta_esc, fn, ud);
        return 0;
    }
    if (ev.delta && responses_is(&ev, "response.function_call_arguments.delta")) {
        struct tool_call *c = api_call_get(st, (long)ev.output_index, 1, fn, ud);
        const char *s = ev.delta;
        size_t dn = ev.delta_n;
        api_unescape_span(st, &s, &dn, ev.delta_esc);
        return !c || api_call_args(st, c, s, dn) < 0 ? 1 : 0;
    }
    if (ev.item && (responses_is(&ev, "response.output_item.added") ||
                    responses_is(&ev, "response.output_item.done")))
        return responses_fc_item(st, ev.item, ev.item_n, (long)ev.output_index, fn, ud) < 0;
    if (responses_is(&ev, "response.reasoning_summary_part.added")) {
        if (ev.summary_index > 0)
            fn(ud, API_REASONING, "\n\n", 2); /* between the summary's parts */
        return 0;
    }
    if (responses_is(&ev, "error"))
        return responses_error_event(st, json, n, &ev);
    if (!ev.response || strncmp(ev.type, "response.", 9) != 0)
        return 0; /* an event this code does not use */
    struct responses_end e;
    memset(&e, 0, sizeof e);
    int usage_before = st->usage.present;
    jscan_init(&j, ev.response, ev.response_n);
    if (responses_response(st, &j, 0, &e, fn, ud) < 0)
        return api_malformed(st, json, n, j.err);
    if (st->usage.present && !usage_before)
        fn(ud, API_USAGE, NULL, 0);
    /* The event names the end; the response's status says the same (or is missing). */
    const char *end = ev.type + 9;
    if (strcmp(end, "completed") == 0 || strcmp(end, "incomplete") == 0 ||
        strcmp(end, "failed") == 0 || strcmp(end, "cancelled") == 0)
        api_copy(e.status, sizeof e.status, end, strlen(end));
    else
        return 0; /* response.created, response.in_progress, ...: the model so far */
    return responses_finish(st, &e, fn, ud);
}

int responses_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn,
                           void *ud)
{
    if (ev->data_len == 0)
        return 0;
    const char *hint = strcmp(ev->type, "message") == 0 ? NULL : ev->type;
    int r = responses_stream_chunk(st, ev->data, ev->data_len, hint, fn, ud);
    if (r < 0 && hint && strcmp(hint, "error") == 0) {
        api_error_set(st, ev->data, ev->data_len); /* `event: error` with text, not JSON */
        return 1;
    }
    return r;
}

/* A whole answer: a response object (or an error object). */
static int responses_whole(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                           void *ud)
{
    struct responses_end e;
    memset(&e, 0, sizeof e);
    struct jscan j;
    jscan_init(&j, body, n);
    if (jscan_peek(&j) != '{')
        return api_malformed(st, body, n, "not an object");
    int usage_before = st->usage.present;
    if (responses_response(st, &j, 1, &e, fn, ud) < 0 || !jscan_at_end(&j))
        return api_malformed(st, body, n, j.err ? j.err : "trailing bytes");
    st->chunks++;
    if (st->usage.present && !usage_before)
        fn(ud, API_USAGE, NULL, 0);
    if (st->error.len)
        return 1;
    return responses_finish(st, &e, fn, ud);
}

int responses_decode_completion(struct api_stream *st, const char *body, size_t n,
                                api_emit_fn fn, void *ud)
{
    return api_decode_whole(st, body, n, fn, ud, responses_whole);
}

/* The codes of errors sent in a Responses stream (the error event, response.failed):
 * server_error passes; invalid_prompt fails again; the rest (rate_limit_exceeded, HTTP
 * statuses): the generic rules. */
static int responses_retryable(long status, const char *code)
{
    (void)status;
    if (code && strcmp(code, "server_error") == 0)
        return 1;
    if (code && strcmp(code, "invalid_prompt") == 0)
        return 0;
    return -1;
}

static enum api_outcome responses_finish_outcome(const struct api_stream *st, struct buf *msg)
{
    if (strcmp(st->finish, "length") == 0) {
        buf_appends(msg, "the answer was cut at the token limit (incomplete: "
                         "max_output_tokens); raise max_tokens");
        return API_CUT;
    }
    if (strcmp(st->finish, "content_filter") == 0) {
        buf_printf(msg, "the answer was stopped by the provider (incomplete: %s)",
                   st->finish_detail);
        return API_CUT;
    }
    return API_OK;
}

const struct dialect dialect_responses = {
    .name = "responses",
    .base_url = "https://api.openai.com/v1",
    .model = "gpt-4o-mini", /* as for openai */
    .base_env = "OPENAI_BASE_URL",
    .key_env = {"OPENAI_API_KEY"},
    .path = "/responses",
    .models_path = "/models",
    .auth_header = "Authorization",
    .auth_prefix = "Bearer ",
    .request_json = responses_request_json,
    .stream_event = responses_stream_event,
    .decode_body = responses_decode_completion,
    .error_message = api_error_message, /* OpenAI's error bodies */
    .retryable = responses_retryable,
    .finish_outcome = responses_finish_outcome,
};
