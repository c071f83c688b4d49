/* api.c - chat-completions request building and stream decoding for all provider dialects. */
#include "config.h"
#include "proto/api.h"
#include "proto/api_int.h"
#include "proto/jscan.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define API_PARAM_DESC_INT(f) .off = offsetof(struct api_request, f)
#define API_PARAM_DESC_FLAG(f) .flagged = 1, .has_off = offsetof(struct api_request, has_##f)
#define API_PARAM_DESC_REAL(f) .real = 1, API_PARAM_DESC_INT(f), API_PARAM_DESC_FLAG(f)
#define API_PARAM_DESC_WHOLE(f) API_PARAM_DESC_INT(f), API_PARAM_DESC_FLAG(f)
#define API_PARAM_DESC(f, kind, lo, hi, lng, sh, mv, hlp)                                    \
    {.name = #f, .min = lo, .max = hi, .opt = lng, .shrt = sh, .metavar = mv, .help = hlp, \
     API_PARAM_DESC_##kind(f)},
const struct api_param api_params[] = {API_SAMPLING(API_PARAM_DESC)};
#undef API_PARAM_DESC

/* The value of parameter p in r (*v for REAL, *n for a whole number); 0 when it is not sent. */
int api_param_get(const struct api_request *r, const struct api_param *p, double *v,
                         long *n)
{
    const char *base = (const char *)r;
    *v = 0;
    *n = 0;
    if (p->real)
        *v = *(const double *)(base + p->off);
    else
        *n = *(const long *)(base + p->off);
    return p->flagged ? *(const int *)(base + p->has_off) : *n > 0;
}

int api_param_from_json(struct api_request *r, const struct api_param *p, double v, int is_number,
                        struct buf *err)
{
    char *base = (char *)r;
    if (p->real) {
        if (!is_number || !(v >= p->min && v <= p->max)) {
            buf_printf(err, "\"%s\" must be a number from %g to %g", p->name, p->min, p->max);
            return -1;
        }
        *(double *)(base + p->off) = v;
    } else if (!p->flagged && is_number && v == 0) {
        *(long *)(base + p->off) = 0; /* 0 is "not sent", as in the configuration */
    } else {
        /* the range first: v is cast to long only inside it */
        if (!is_number || !(v >= p->min && v <= p->max) || v != (double)(long)v) {
            buf_printf(err, "\"%s\" must be a whole number from %.0f to %.0f", p->name,
                       p->min, p->max);
            return -1;
        }
        *(long *)(base + p->off) = (long)v;
    }
    if (p->flagged)
        *(int *)(base + p->has_off) = 1;
    return 0;
}

void api_params_add(cJSON *o, const struct api_request *r, api_param_name_fn name_of, void *ud)
{
    for (size_t i = 0; i < API_N_PARAMS; i++) {
        const struct api_param *p = &api_params[i];
        double v;
        long n;
        if (!api_param_get(r, p, &v, &n))
            continue;
        const char *name = name_of ? name_of(ud, p) : p->name;
        if (!name)
            continue;
        if (p->real) {
            cJSON_AddNumberToObject(o, name, v);
        } else {
            /* digits, as cJSON prints a whole number up to 2^31; past 1e15 it would print
             * 9.00719925474099e+15 (a seed must stay exact) */
            char digits[24];
            snprintf(digits, sizeof digits, "%ld", n);
            cJSON_AddRawToObject(o, name, digits);
        }
    }
}

char *api_json_finish(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) {
        fputs("tokterm: out of memory building a request\n", stderr);
        abort();
    }
    char *copy = xstrdup(s);
    cJSON_free(s);
    return copy;
}

static const char *const api_effort_names[] = {"none", "low", "medium", "high"};

const char *api_effort_name(int level)
{
    return level >= 0 && level <= API_EFFORT_HIGH ? api_effort_names[level] : NULL;
}

int api_effort_parse(const char *word)
{
    if (!word || !*word || strcmp(word, "off") == 0)
        return API_EFFORT_NONE;
    for (int i = 0; i <= API_EFFORT_HIGH; i++)
        if (strcmp(word, api_effort_names[i]) == 0)
            return i;
    return -1;
}

long api_effort_budget(int level)
{
    static const long budget[] = {0, 1024, 4096, 16384};
    return level > 0 && level <= API_EFFORT_HIGH ? budget[level] : 0;
}

/* max_tokens goes as max_completion_tokens for the o-series */
static const char *api_chat_param_name(void *ud, const struct api_param *p)
{
    const struct api_request *r = ud;
    if (p->off == offsetof(struct api_request, max_tokens) && r->max_tokens_field)
        return r->max_tokens_field;
    return p->name;
}

/* s as a JSON string, escaped byte for byte as cJSON prints it (so a body, and the response
 * cache's key, are the same as before): quote, backslash and control characters escaped, the
 * rest as it is. Runs of plain bytes are copied at once. */
static void api_json_string(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    buf_appendc(b, '"');
    /* the runs that need no escape are found 16 bytes at a time (jscan_plain_len): a history
     * of 0.3-8 MB is escaped at memchr's pace, not tested a byte at a time */
    const char *end = s + strlen(s);
    for (const char *p = s;; p++) {
        size_t run = jscan_plain_len(p, (size_t)(end - p));
        buf_append(b, p, run);
        p += run;
        if (p == end)
            break;
        unsigned c = (unsigned char)*p;
        char e[7] = {'\\', 0};
        size_t n = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            n = 6;
        }
        buf_append(b, e, n);
    }
    buf_appendc(b, '"');
}

cJSON *api_tool_schema(const struct api_tool *t)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "name", t->name);
    if (t->description && *t->description)
        cJSON_AddStringToObject(f, "description", t->description);
    cJSON *schema = t->schema ? cJSON_Parse(t->schema) : NULL;
    if (!cJSON_IsObject(schema)) {
        cJSON_Delete(schema);
        schema = cJSON_CreateObject();
        cJSON_AddStringToObject(schema, "type", "object");
    }
    cJSON_AddItemToObject(f, "parameters", schema);
    return f;
}

/* The tool_calls member of an assistant message. */
static void api_chat_calls(struct buf *b, const struct api_message *m)
{
    buf_appends(b, ",\"tool_calls\":[");
    for (size_t k = 0; k < m->n_calls; k++) {
        const struct tool_call *c = &m->calls[k];
        buf_appends(b, k ? ",{\"id\":" : "{\"id\":");
        api_json_string(b, c->id ? c->id : "");
        buf_appends(b, ",\"type\":\"function\",\"function\":{\"name\":");
        api_json_string(b, c->wire ? c->wire : "");
        buf_appends(b, ",\"arguments\":");
        api_json_string(b, c->args && c->args_len ? c->args : "{}");
        buf_appends(b, "}}");
    }
    buf_appendc(b, ']');
}

struct tool_call *api_call_get(struct api_stream *st, long key, int make, api_emit_fn fn,
                               void *ud)
{
    for (size_t i = st->n_calls; i > 0; i--)
        if (st->call_keys[i - 1] == key)
            return &st->calls[i - 1];
    if (!make)
        return NULL;
    if (st->n_calls >= API_CALLS_MAX) {
        if (!st->error.len) {
            buf_printf(&st->error, "the answer made more than %d tool calls, tokterm's limit",
                       API_CALLS_MAX);
            st->limit = API_STREAM_LIMIT_CALLS;
        }
        return NULL;
    }
    st->calls = xgrow(st->calls, st->n_calls + 1, &st->cap_calls, sizeof *st->calls);
    st->call_keys = xgrow(st->call_keys, st->n_calls + 1, &st->cap_keys, sizeof *st->call_keys);
    struct tool_call *c = &st->calls[st->n_calls];
    memset(c, 0, sizeof *c);
    st->call_keys[st->n_calls++] = key;
    fn(ud, API_TOOL_CALL, NULL, 0);
    return c;
}

int api_call_args(struct api_stream *st, struct tool_call *c, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (c->args_len + n > API_CALL_ARGS_MAX) {
        if (!st->error.len) {
            buf_printf(&st->error, "a tool call's arguments are over %zu MiB, tokterm's limit",
                       API_CALL_ARGS_MAX >> 20);
            st->limit = API_STREAM_LIMIT_CALLS;
        }
        return -1;
    }
    if (n > st->args_room) {
        if (!st->error.len) {
            buf_appends(&st->error, "the tool calls' arguments passed the answer's limit");
            st->limit = API_STREAM_LIMIT_ANSWER;
        }
        return -1;
    }
    st->args_room -= n;
    st->args_bytes += n;
    size_t cap = 64;
    while (cap <= c->args_len)
        cap *= 2;
    if (!c->args || c->args_len + n + 1 > cap) { /* capacity: the power of two above len */
        while (cap < c->args_len + n + 1)
            cap *= 2;
        c->args = xrealloc(c->args, cap);
    }
    memcpy(c->args + c->args_len, s, n);
    c->args_len += n;
    c->args[c->args_len] = 0;
    return 0;
}

void api_call_str(char **dst, const char *s, size_t n)
{
    free(*dst);
    *dst = xstrndup(s, n);
}

static int api_call_ids_used(const struct api_call_ids *ids, const char *wire)
{
    for (size_t i = 0; i < ids->n; i++)
        if (strcmp(ids->v[i].wire, wire) == 0)
            return 1;
    return 0;
}

static int api_call_id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

const char *api_call_ids_call(struct api_call_ids *ids, const char *raw)
{
    raw = raw ? raw : "";
    int ok = *raw != '\0';
    for (const char *s = raw; *s && ok; s++)
        ok = api_call_id_char(*s);
    char *wire;
    if (ok && !api_call_ids_used(ids, raw)) {
        wire = xstrdup(raw);
    } else { /* its other characters as '_', and a suffix that no id sent has */
        char *base = xasprintf("%.64s", *raw ? raw : "call");
        for (char *s = base; *s; s++)
            if (!api_call_id_char(*s))
                *s = '_';
        wire = NULL;
        for (size_t k = ids->n + 1; !wire || api_call_ids_used(ids, wire); k++) {
            free(wire);
            wire = xasprintf("%s_%zu", base, k);
        }
        free(base);
    }
    XGROW(ids->v, ids->n + 1, ids->cap);
    ids->v[ids->n].raw = raw;
    ids->v[ids->n].wire = wire;
    return ids->v[ids->n++].wire;
}

const char *api_call_ids_result(const struct api_call_ids *ids, const char *raw)
{
    for (size_t i = ids->n; raw && i-- > 0;)
        if (strcmp(ids->v[i].raw, raw) == 0)
            return ids->v[i].wire;
    return raw ? raw : "";
}

void api_call_ids_free(struct api_call_ids *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        free(ids->v[i].wire);
    free(ids->v);
}

void api_part_data_url(struct buf *out, const struct api_part *p)
{
    buf_printf(out, "data:%s;base64,", p->mime);
    buf_append_base64(out, p->data, p->len);
}

/* A chat-completions message's content: its text, or with files an array of parts (images as
 * image_url data URLs, PDFs as file parts with file_data), then the text. */
static void api_chat_content(struct buf *b, const struct api_message *m)
{
    const char *text = m->content ? m->content : "";
    if (!m->n_parts) {
        api_json_string(b, text);
        return;
    }
    buf_appendc(b, '[');
    for (size_t i = 0; i < m->n_parts; i++) {
        const struct api_part *p = &m->parts[i];
        if (p->kind == API_PART_IMAGE) {
            buf_appends(b, "{\"type\":\"image_url\",\"image_url\":{\"url\":\"");
            api_part_data_url(b, p);
            buf_appends(b, "\"}},");
        } else {
            buf_appends(b, "{\"type\":\"file\",\"file\":{\"filename\":");
            api_json_string(b, p->name ? p->name : "file.pdf");
            buf_appends(b, ",\"file_data\":\"");
            api_part_data_url(b, p);
            buf_appends(b, "\"}},");
        }
    }
    buf_appends(b, "{\"type\":\"text\",\"text\":");
    api_json_string(b, text);
    buf_appends(b, "}]");
}

char *api_request_json(const struct api_request *r)
{
    /* The messages are written here (a long history is not copied into a cJSON tree, escaped
     * and copied again); the parameters after them by cJSON, as before. */
    cJSON *o = cJSON_CreateObject();
    api_params_add(o, r, api_chat_param_name, (void *)r);
    if (api_effort_budget(r->reasoning_effort))
        cJSON_AddStringToObject(o, "reasoning_effort", api_effort_name(r->reasoning_effort));
    if (r->stream) {
        cJSON_AddTrueToObject(o, "stream");
        if (r->include_usage) {
            cJSON *so = cJSON_AddObjectToObject(o, "stream_options");
            cJSON_AddTrueToObject(so, "include_usage");
        }
    }
    char *rest = api_json_finish(o);
    size_t bytes = 64 + strlen(rest);
    for (size_t i = 0; i < r->n_messages; i++)
        bytes += 32 + strlen(r->messages[i].role) +
                 (r->messages[i].content ? strlen(r->messages[i].content) : 0);
    for (size_t i = 0; i < r->n_messages; i++)
        for (size_t k = 0; k < r->messages[i].n_parts; k++)
            bytes += 128 + r->messages[i].parts[k].len / 3 * 4 + 4;
    struct buf b = BUF_INIT;
    buf_reserve(&b, bytes + bytes / 16);
    buf_appends(&b, "{\"model\":");
    api_json_string(&b, r->model ? r->model : "");
    buf_appends(&b, ",\"messages\":[");
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct api_message *m = &r->messages[i];
        buf_appends(&b, i ? ",{\"role\":" : "{\"role\":");
        api_json_string(&b, m->role);
        if (m->tool_call_id) {
            buf_appends(&b, ",\"tool_call_id\":");
            api_json_string(&b, m->tool_call_id);
        }
        buf_appends(&b, ",\"content\":");
        api_chat_content(&b, m);
        if (m->n_calls)
            api_chat_calls(&b, m);
        buf_appendc(&b, '}');
    }
    buf_appendc(&b, ']');
    if (r->n_tools) {
        cJSON *tools = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_tools; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "type", "function");
            cJSON_AddItemToObject(t, "function", api_tool_schema(&r->tools[i]));
            cJSON_AddItemToArray(tools, t);
        }
        char *tj = api_json_finish(tools);
        buf_appends(&b, ",\"tools\":");
        buf_appends(&b, tj);
        free(tj);
    }
    if (rest[0] == '{' && rest[1] != '}') { /* "{...}": its members follow the messages */
        buf_appendc(&b, ',');
        buf_appends(&b, rest + 1);
    } else {
        buf_appendc(&b, '}');
    }
    free(rest);
    return buf_take(&b);
}

void api_stream_init(struct api_stream *st)
{
    memset(st, 0, sizeof *st);
    st->args_room = SIZE_MAX;
}

void api_stream_free(struct api_stream *st)
{
    buf_free(&st->error);
    buf_free(&st->scratch);
    buf_free(&st->shape_pre);
    buf_free(&st->shape_post);
    buf_free(&st->shape_gap);
    for (size_t i = 0; i < st->n_calls; i++)
        tool_call_free(&st->calls[i]);
    free(st->calls);
    free(st->call_keys);
    buf_free(&st->thinking_json);
    buf_free(&st->dtext);
    buf_free(&st->dsig);
}

/* Append text the server sent to a message for the user: no control byte or escape sequence
 * passes (utf8_sanitize makes them visible), line breaks and tabs become spaces, and at most
 * max bytes are kept ("..." marks a cut, never inside a UTF-8 sequence). */
void api_msg_append(struct buf *msg, const char *s, size_t n, size_t max)
{
    size_t cut = n;
    if (cut > max) {
        cut = max;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut--;
    }
    size_t from = msg->len;
    utf8_sanitize(msg, s, cut);
    for (size_t i = from; i < msg->len; i++)
        if (msg->data[i] == '\n' || msg->data[i] == '\t')
            msg->data[i] = ' ';
    if (cut < n)
        buf_appends(msg, "...");
}

/* Replace the error message with server text (see api_msg_append). */
void api_error_set(struct api_stream *st, const char *s, size_t n)
{
    buf_reset(&st->error);
    api_msg_append(&st->error, s, n, API_MSG_MAX);
}

/* An error code is an identifier: anything but printable ASCII becomes '?'. */
void api_code_clean(char *code)
{
    for (; *code; code++)
        if ((unsigned char)*code < 0x20 || (unsigned char)*code >= 0x7f)
            *code = '?';
}

void api_copy(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

void api_unescape_span(struct api_stream *st, const char **s, size_t *n, int escaped)
{
    if (!escaped)
        return;
    buf_reset(&st->scratch);
    jscan_unescape(*s, *n, &st->scratch);
    *s = st->scratch.data;
    *n = st->scratch.len;
}

void api_emit_span(struct api_stream *st, enum api_kind kind, const char *s, size_t n,
                   int escaped, api_emit_fn fn, void *ud)
{
    if (!s)
        return;
    api_unescape_span(st, &s, &n, escaped);
    if (n)
        fn(ud, kind, s, n);
}

/* Read a string value (or null) at the scanner; deliver decoded text. Returns -1 on bad JSON,
 * 0 when null or empty, 1 with text in *out and *outn (valid until the next call). */
int api_text(struct api_stream *st, struct jscan *j, const char **out, size_t *outn)
{
    if (jscan_null(j))
        return 0;
    if (jscan_peek(j) != '"')
        return jscan_skip(j) < 0 ? -1 : 0; /* a number or object where text belongs: ignore */
    const char *s;
    size_t n;
    int esc;
    if (jscan_string(j, &s, &n, &esc) < 0)
        return -1;
    api_unescape_span(st, &s, &n, esc);
    *out = s;
    *outn = n;
    return n > 0;
}

/* Copy a short string value (or nothing for null/other) into dst. */
int api_short(struct api_stream *st, struct jscan *j, char *dst, size_t size)
{
    const char *s;
    size_t n;
    int r = api_text(st, j, &s, &n);
    if (r > 0)
        api_copy(dst, size, s, n);
    return r < 0 ? -1 : 0;
}

/* One usage count at the scanner into *dst: a whole number from 0 to 2^53. Anything else (a
 * string, null, an object, a negative, fractional or huge number) is skipped, *dst is left as
 * it was and st->usage_bad is set: usage is the server's bookkeeping, never worth an answer.
 * -1 only when the JSON itself is broken. */
int api_usage_number(struct api_stream *st, struct jscan *j, long long *dst)
{
    int c = jscan_peek(j);
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *from = j->p;
        while (from < j->end && (*from == ' ' || *from == '\t' || *from == '\n' || *from == '\r'))
            from++;
        if (jscan_skip(j) < 0)
            return -1;
        size_t len = (size_t)(j->p - from);
        long long v = 0;
        size_t i = 0;
        while (i < len && from[i] >= '0' && from[i] <= '9' && v <= (1LL << 53))
            v = v * 10 + (from[i++] - '0');
        if (i == len && len <= 16 && v <= (1LL << 53)) {
            *dst = v;
            st->usage_good++;
            return 0;
        }
        st->usage_bad = 1; /* negative, fractional, exponent or too large */
        return 0;
    }
    if (c != 'n')
        st->usage_bad = 1; /* a string, an object, an array, a boolean */
    return jscan_skip(j);
}

/* The count of keys[] named k inside the object `in` (NULL: at the top), or NULL. */
static long long *api_usage_dst(struct api_usage *u, const struct api_usage_key *keys,
                                const char *in, const char *k, size_t kn)
{
    for (; keys->key; keys++)
        if ((in ? keys->in && strcmp(keys->in, in) == 0 : !keys->in) &&
            jscan_key_is(k, kn, keys->key))
            return (long long *)((char *)u + keys->off);
    return NULL;
}

/* The name of keys[]'s detail object k (its `in`), or NULL. */
static const char *api_usage_in(const struct api_usage_key *keys, const char *k, size_t kn)
{
    for (; keys->key; keys++)
        if (keys->in && jscan_key_is(k, kn, keys->in))
            return keys->in;
    return NULL;
}

int api_usage_read(struct api_stream *st, struct jscan *j, const struct api_usage_key *keys)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    struct api_usage *u = &st->usage;
    int first = 1, r;
    const char *k;
    size_t kn;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        long long *dst = api_usage_dst(u, keys, NULL, k, kn);
        if (dst) {
            if (api_usage_number(st, j, dst) < 0)
                return -1;
            continue;
        }
        const char *in = api_usage_in(keys, k, kn);
        if (in && jscan_peek(j) == '{') {
            int f2 = 1, r2;
            const char *k2;
            size_t kn2;
            jscan_object_begin(j);
            while ((r2 = jscan_object_next(j, &f2, &k2, &kn2)) == 1) {
                long long *d2 = api_usage_dst(u, keys, in, k2, kn2);
                if (d2) {
                    if (api_usage_number(st, j, d2) < 0)
                        return -1;
                } else if (jscan_skip(j) < 0) {
                    return -1;
                }
            }
            if (r2 < 0)
                return -1;
            continue;
        }
        if (jscan_skip(j) < 0)
            return -1;
    }
    if (r < 0)
        return -1;
    if (!st->usage_good)
        return 0; /* not one count could be used: no usage */
    u->present = 1;
    if (!u->total)
        u->total = u->prompt + u->completion;
    return 0;
}

/* chat completions: either count in either details object */
static const struct api_usage_key api_chat_usage[] = {
    API_USAGE_AT(NULL, "prompt_tokens", prompt),
    API_USAGE_AT(NULL, "completion_tokens", completion),
    API_USAGE_AT(NULL, "total_tokens", total),
    API_USAGE_AT("completion_tokens_details", "reasoning_tokens", reasoning),
    API_USAGE_AT("completion_tokens_details", "cached_tokens", cached),
    API_USAGE_AT("prompt_tokens_details", "reasoning_tokens", reasoning),
    API_USAGE_AT("prompt_tokens_details", "cached_tokens", cached),
    {NULL, NULL, 0},
};

static int api_usage_obj(struct api_stream *st, struct jscan *j)
{
    return api_usage_read(st, j, api_chat_usage);
}

/* {"message": ..., "code": ..., "type": ...} or a plain string. */
int api_error_obj(struct api_stream *st, struct jscan *j)
{
    const char *s;
    size_t n;
    if (jscan_peek(j) == '"') {
        if (api_text(st, j, &s, &n) < 0)
            return -1;
        api_error_set(st, s, n);
        return 0;
    }
    if (jscan_null(j))
        return 0;
    if (jscan_peek(j) != '{')
        return jscan_skip(j);
    jscan_object_begin(j);
    int first = 1, r;
    const char *k;
    size_t kn;
    char type[64] = "";
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "message")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0)
                api_error_set(st, s, n);
        } else if (jscan_key_is(k, kn, "code") && (jscan_peek(j) == '"' || jscan_peek(j) == 'n')) {
            if (api_short(st, j, st->error_code, sizeof st->error_code) < 0)
                return -1;
            api_code_clean(st->error_code);
        } else if (jscan_key_is(k, kn, "code")) {
            long long code;
            if (jscan_integer(j, &code) < 0)
                return -1;
            snprintf(st->error_code, sizeof st->error_code, "%lld", code);
        } else if (jscan_key_is(k, kn, "type")) {
            if (api_short(st, j, type, sizeof type) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    if (st->error.len == 0 && type[0])
        api_error_set(st, type, strlen(type));
    if (st->error.len == 0)
        buf_appends(&st->error, "the server reported an error");
    return 0;
}

/* The function object of one tool_calls entry: name and arguments (a string in fragments, or
 * an object some servers send whole) into *c (made when it is NULL). */
static int api_chat_function(struct api_stream *st, struct jscan *j, struct tool_call *c)
{
    if (jscan_object_begin(j) < 0)
        return -1;
    int first = 1, r;
    const char *k, *s;
    size_t kn, n;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "name")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0 && !c->wire)
                api_call_str(&c->wire, s, n);
        } else if (jscan_key_is(k, kn, "arguments") && jscan_peek(j) == '{') {
            const char *from = j->p;
            if (jscan_skip(j) < 0)
                return -1;
            while (*from != '{')
                from++;
            if (api_call_args(st, c, from, (size_t)(j->p - from)) < 0)
                return -2;
        } else if (jscan_key_is(k, kn, "arguments")) {
            int t = api_text(st, j, &s, &n);
            if (t < 0)
                return -1;
            if (t > 0 && api_call_args(st, c, s, n) < 0)
                return -2;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

/* One entry of a delta's tool_calls: {"index", "id", "type", "function"}; pos is its place in
 * the array (servers that send no index). A new id at a known index starts another call (a
 * server that numbers parallel calls all 0). */
static int api_chat_call(struct api_stream *st, struct jscan *j, long pos, api_emit_fn fn,
                         void *ud)
{
    /* the members may come in any order: read them first, then find the call */
    const char *start = j->p;
    long long idx = pos;
    char id[128] = "";
    if (jscan_object_begin(j) < 0)
        return -1;
    int first = 1, r;
    const char *k;
    size_t kn;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "index") && jscan_peek(j) != '"') {
            if (jscan_integer(j, &idx) < 0)
                return -1;
        } else if (jscan_key_is(k, kn, "id")) {
            if (api_short(st, j, id, sizeof id) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    struct tool_call *c = api_call_get(st, (long)idx, 0, fn, ud);
    if (!c || (id[0] && c->id && strcmp(c->id, id) != 0)) {
        if (c) /* another call at the same index: the old one keeps its place */
            st->call_keys[c - st->calls] = -2 - (long)(c - st->calls);
        c = api_call_get(st, (long)idx, 1, fn, ud);
        if (!c)
            return -2;
    }
    if (id[0] && !c->id)
        c->id = xstrdup(id);
    /* second pass for the function */
    struct jscan j2;
    jscan_init(&j2, start, (size_t)(j->p - start));
    first = 1;
    if (jscan_object_begin(&j2) < 0)
        return -1;
    while ((r = jscan_object_next(&j2, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "function") && jscan_peek(&j2) == '{') {
            int f = api_chat_function(st, &j2, c);
            if (f < 0)
                return f;
        } else if (jscan_skip(&j2) < 0) {
            return -1;
        }
    }
    return r;
}

static int api_chat_calls_read(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_array_begin(j) < 0)
        return -1;
    int af = 1, ar;
    long pos = 0;
    while ((ar = jscan_array_next(j, &af)) == 1) {
        int r = jscan_peek(j) == '{' ? api_chat_call(st, j, pos++, fn, ud) : jscan_skip(j);
        if (r < 0)
            return r;
    }
    return ar;
}

/* The delta (stream) or message (non-stream) object of a choice. */
static int api_delta(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_null(j))
        return 0;
    if (jscan_object_begin(j) < 0)
        return -1;
    int first = 1, r;
    const char *k, *s;
    size_t kn, n;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        enum api_kind kind = 0;
        if (jscan_key_is(k, kn, "content") || jscan_key_is(k, kn, "refusal"))
            kind = API_CONTENT;
        else if (jscan_key_is(k, kn, "reasoning_content") || jscan_key_is(k, kn, "reasoning"))
            kind = API_REASONING;
        if (!kind && jscan_key_is(k, kn, "tool_calls")) {
            int c = api_chat_calls_read(st, j, fn, ud);
            if (c < 0)
                return c;
            continue;
        }
        if (!kind) {
            if (jscan_skip(j) < 0)
                return -1;
            continue;
        }
        const char *q0 = jscan_peek(j) == '"' ? j->p : NULL;
        int t = api_text(st, j, &s, &n);
        if (t < 0)
            return -1;
        if (q0) { /* a string: remember where, for the chunk's shape */
            st->text_q0 = q0;
            st->text_q1 = j->p;
            st->text_kind = (int)kind;
            st->n_text++;
        }
        if (t > 0)
            fn(ud, kind, s, n);
    }
    return r;
}

static int api_choice(struct api_stream *st, struct jscan *j, api_emit_fn fn, void *ud)
{
    if (jscan_object_begin(j) < 0)
        return -1;
    int first = 1, r;
    const char *k;
    size_t kn;
    while ((r = jscan_object_next(j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "delta") || jscan_key_is(k, kn, "message")) {
            int d = api_delta(st, j, fn, ud);
            if (d < 0)
                return d; /* -2: over a limit, st->error says which */
        } else if (jscan_key_is(k, kn, "finish_reason")) {
            char fr[32] = "";
            if (api_short(st, j, fr, sizeof fr) < 0)
                return -1;
            if (fr[0]) {
                memcpy(st->finish, fr, sizeof fr);
                fn(ud, API_FINISH, NULL, 0);
            }
        } else if (jscan_key_is(k, kn, "usage")) {
            /* some servers put usage on the choice */
            if (api_usage_obj(st, j) < 0)
                return -1;
        } else if (jscan_skip(j) < 0) {
            return -1;
        }
    }
    return r;
}

/* The "index" of the choice object at j, read on a copy (j does not move): -1 without one
 * (or one that is not a number: the choice is taken as the first), else its value. */
static long long api_choice_index(struct jscan j)
{
    if (jscan_object_begin(&j) < 0)
        return -1;
    int first = 1;
    const char *k;
    size_t kn;
    while (jscan_object_next(&j, &first, &k, &kn) == 1) {
        long long v;
        if (jscan_key_is(k, kn, "index"))
            return jscan_integer(&j, &v) == 0 ? v : -1;
        if (jscan_skip(&j) < 0)
            return -1;
    }
    return -1;
}

static void api_html_summary(const char *body, size_t n, struct buf *msg);

int api_malformed(struct api_stream *st, const char *json, size_t n, const char *why)
{
    buf_reset(&st->error);
    size_t lead = 0;
    while (lead < n && (json[lead] == ' ' || json[lead] == '\t' || json[lead] == '\r' ||
                        json[lead] == '\n'))
        lead++;
    if (n - lead >= 5 && (strncasecmp(json + lead, "<!DOC", 5) == 0 ||
                          strncasecmp(json + lead, "<html", 5) == 0)) {
        /* a captive portal's or a proxy's page with a 200 (until 2026-12 "malformed JSON
         * (not an object): <html>...", where an error status said what it was) */
        buf_appends(&st->error, "the server answered with ");
        api_html_summary(json + lead, n - lead, &st->error);
        return -1;
    }
    int raw_control = 0; /* cJSON takes them inside strings; JSON does not */
    for (size_t i = 0; i < n && !raw_control; i++)
        raw_control = (unsigned char)json[i] < 0x20 && json[i] != '\t' && json[i] != '\n' &&
                      json[i] != '\r';
    const char *end = json; /* the error path only: whole JSON, nothing after it */
    cJSON *valid = raw_control ? NULL : cJSON_ParseWithLengthOpts(json, n, &end, 0);
    while (valid && end < json + n && strchr(" \t\r\n", *end) && *end)
        end++;
    if (valid && end < json + n) {
        cJSON_Delete(valid);
        valid = NULL;
    }
    if (valid) /* {"choices": "x"}: JSON, not of the shape the API's (until 2026-12 "malformed") */
        buf_printf(&st->error, "the server sent JSON that is not the API's answer (%s): ",
                   why ? why : "an unknown shape");
    else
        buf_printf(&st->error, "the server sent malformed JSON (%s): ", why ? why : "invalid");
    cJSON_Delete(valid);
    size_t show = n < 80 ? n : 80;
    for (size_t i = 0; i < show; i++) {
        unsigned char c = (unsigned char)json[i];
        buf_appendc(&st->error, c >= 0x20 && c < 0x7f ? (char)c : '?');
    }
    if (n > show)
        buf_appends(&st->error, "...");
    return -1;
}

#define API_SHAPE_MAX 1024 /* bytes around the text kept as a chunk's shape */

/* A chunk of the last shape: its text string, and where the chunk ends. */
struct api_shaped {
    const char *s, *end;
    size_t sn;
    int esc;
};

/* The common case of api_shape_find, a string without escapes (its end is the first quote):
 * 1 and m filled when the chunk at json is the last shape's bytes around such a string, 0
 * when it is not of the shape, -1 when its string must be scanned as JSON (escapes). */
static inline int api_shape_plain(const struct api_stream *st, const char *json, const char *end,
                                  struct api_shaped *m)
{
    size_t pre = st->shape_pre.len, post = st->shape_post.len;
    if (!st->shape_kind || (size_t)(end - json) < pre + post ||
        memcmp(json, st->shape_pre.data, pre) != 0)
        return 0;
    const char *t = json + pre, *q = t + jscan_plain_len(t, (size_t)(end - t));
    if ((size_t)(end - q) < post || *q != '"')
        return -1;
    if (memcmp(q, st->shape_post.data, post) != 0)
        return 0;
    m->s = t;
    m->sn = (size_t)(q - t);
    m->esc = 0;
    m->end = q + post;
    return 1;
}

/* Is the chunk at json (whose bytes end at most at end) the last shape's bytes around another
 * valid JSON string? The string starts at the prefix's last byte (its opening quote) and must
 * end exactly where the suffix begins (with the closing quote): then every other member is the
 * same. 1 and m filled when it is. */
static int api_shape_find(const struct api_stream *st, const char *json, const char *end,
                          struct api_shaped *m)
{
    int r = api_shape_plain(st, json, end, m);
    if (r >= 0)
        return r;
    size_t pre = st->shape_pre.len, post = st->shape_post.len;
    struct jscan j;
    jscan_init(&j, json + pre - 1, (size_t)(end - json) - pre + 1);
    if (jscan_string(&j, &m->s, &m->sn, &m->esc) < 0 || (size_t)(end - j.p) + 1 < post ||
        memcmp(j.p - 1, st->shape_post.data, post) != 0)
        return 0;
    m->end = j.p - 1 + post;
    return 1;
}

static inline void api_shape_emit(struct api_stream *st, const struct api_shaped *m,
                                  api_emit_fn fn, void *ud)
{
    st->chunks++;
    api_emit_span(st, (enum api_kind)st->shape_kind, m->s, m->sn, m->esc, fn, ud);
}

/* The chunk is the last shape's bytes around another valid JSON string: emit that string.
 * Returns 1 when it was (the chunk is decoded), 0 when a full decode is needed. */
int api_shape_match(struct api_stream *st, const char *json, size_t n, api_emit_fn fn, void *ud)
{
    struct api_shaped m;
    if (!api_shape_find(st, json, json + n, &m) || m.end != json + n)
        return 0;
    api_shape_emit(st, &m, fn, ud);
    return 1;
}

/* The shape's gap for a `data:` field of dl bytes (see shape_gap), built on first use. */
static const struct buf *api_shape_gap(struct api_stream *st, size_t dl)
{
    if (st->shape_gap_dl != dl) {
        buf_reset(&st->shape_gap);
        buf_append(&st->shape_gap, st->shape_post.data, st->shape_post.len);
        buf_append(&st->shape_gap, "\n\ndata: ", 2 + dl);
        buf_append(&st->shape_gap, st->shape_pre.data, st->shape_pre.len);
        st->shape_gap_dl = dl;
    }
    return &st->shape_gap;
}

/* Append the plain text s[0..n) to out (n < room), as buf_append does, without the call when
 * it fits. */
static inline void api_run_append(struct buf *out, const char *s, size_t n)
{
    if (out->cap - out->len > n) {
        memcpy(out->data + out->len, s, n);
        out->len += n;
        out->data[out->len] = '\0';
    } else {
        buf_append(out, s, n);
    }
}

int api_stream_simd = 2;

/* The run of events joined by the shape's gap (api_stream_sse_run's inner loop). */
struct api_gap {
    const char *g;       /* the gap */
    size_t glen, step;   /* its length; an event's bytes after its text (shape_post, LF LF) */
    size_t lim;          /* the longest text an event may hold (max_data) */
    size_t room;         /* in/out: text bytes still allowed */
    const char *p, *t;   /* in/out: an event whose `data:` field and shape_pre are checked,
                            and its text */
    unsigned long joined, deltas; /* out */
    unsigned long wide;           /* out: of them, those the AVX-512 loop decoded */
};

/* One event decoded: its text of sn bytes ended at q (the gap follows). */
static inline __attribute__((always_inline)) void api_gap_step(struct api_gap *c, const char *q,
                                                               size_t sn)
{
    c->room -= sn;
    c->deltas += sn > 0;
    c->joined++;
    c->p = q + c->step;
    c->t = q + c->glen;
}

/* The end of a loop: out's length (ol, in od) and its terminator. */
static inline __attribute__((always_inline)) void api_gap_end(struct buf *out, char *od,
                                                              size_t ol)
{
    out->len = ol;
    if (od)
        od[ol] = '\0';
}

/* From gp->p, an event whose `data:` field and shape_pre are checked and whose text starts at
 * gp->t: decode events while each one's text is plain and is followed by the whole gap (its
 * end, the blank line, the next event's start up to its text), appending their text to out;
 * at most one when once. Leaves gp->p and gp->t at the first event it did not decode. */
static void api_gap_loop(struct api_gap *gp, const char *end, struct buf *out, int once)
{
    struct api_gap c = *gp;
    int copy16 = c.glen >= 16;
    char *od = out->data;
    size_t ol = out->len, oc = out->cap;
    for (;;) {
        size_t sn = jscan_plain_len(c.t, (size_t)(end - c.t));
        const char *q = c.t + sn;
        if ((size_t)(end - q) < c.glen || sn > c.lim || sn > c.room ||
            memcmp(q, c.g, c.glen) != 0)
            break;
        if (copy16 && sn <= 16 && oc - ol > 16) {
            /* a short text: one 16-byte copy (glen >= 16 bytes follow the text in s) */
            memcpy(od + ol, c.t, 16);
            ol += sn;
        } else {
            out->len = ol;
            api_run_append(out, c.t, sn);
            od = out->data;
            ol = out->len;
            oc = out->cap;
        }
        api_gap_step(&c, q, sn);
        if (once)
            break;
    }
    api_gap_end(out, od, ol);
    *gp = c;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include "base/cpu.h"
#include <immintrin.h>
#define API_GAP_AVX2 1
/* api_gap_loop for texts shorter than 32 bytes and gaps of 32 or more, 32 bytes at a time:
 * one load finds the text's end and is its copy; the gap is compared without a call. Stops
 * (for api_gap_loop to go on) at anything else. */
__attribute__((target("avx2"))) static void api_gap_loop_avx2(struct api_gap *gp,
                                                              const char *end, struct buf *out)
{
    struct api_gap c = *gp;
    const char *g = c.g;
    size_t tail = c.glen - 32;        /* the last 32 bytes of the gap, maybe overlapping */
    size_t blocks = (tail + 31) / 32; /* and the 32-byte blocks before them */
    char *od = out->data;
    size_t ol = out->len, oc = out->cap;
    const __m256i quote = _mm256_set1_epi8('"'), bslash = _mm256_set1_epi8('\\');
    const __m256i ctl = _mm256_set1_epi8(0x1f);
    if (c.lim < 32 || !od)
        return;
    /* a text shorter than 32 bytes fits lim, and room while room >= 32 */
    while (end - c.t >= 32 && oc - ol > 32 && c.room >= 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)c.t);
        __m256i m = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, bslash)),
            _mm256_cmpeq_epi8(_mm256_max_epu8(v, ctl), ctl));
        unsigned bits = (unsigned)_mm256_movemask_epi8(m);
        if (!bits)
            break; /* a text of 32 bytes or more */
        size_t sn = (size_t)__builtin_ctz(bits);
        const char *q = c.t + sn;
        if ((size_t)(end - q) < c.glen)
            break;
        __m256i d = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(q + tail)),
                                     _mm256_loadu_si256((const __m256i *)(const void *)(g + tail)));
#define API_GAP_BLOCK(i)                                                                        \
    d = _mm256_or_si256(d, _mm256_xor_si256(                                                    \
                               _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * i)), \
                               _mm256_loadu_si256((const __m256i *)(const void *)(g + 32 * i))))
        switch (blocks) { /* the blocks before the last 32 bytes, unrolled */
        default:
            for (size_t i = 8; i < blocks; i++)
                API_GAP_BLOCK(i);
            __attribute__((fallthrough));
        case 8: API_GAP_BLOCK(7); __attribute__((fallthrough));
        case 7: API_GAP_BLOCK(6); __attribute__((fallthrough));
        case 6: API_GAP_BLOCK(5); __attribute__((fallthrough));
        case 5: API_GAP_BLOCK(4); __attribute__((fallthrough));
        case 4: API_GAP_BLOCK(3); __attribute__((fallthrough));
        case 3: API_GAP_BLOCK(2); __attribute__((fallthrough));
        case 2: API_GAP_BLOCK(1); __attribute__((fallthrough));
        case 1: API_GAP_BLOCK(0); __attribute__((fallthrough));
        case 0: break;
        }
#undef API_GAP_BLOCK
        if (!_mm256_testz_si256(d, d))
            break;
        _mm256_storeu_si256((__m256i *)(void *)(od + ol), v); /* the text, and bytes past it */
        ol += sn;
        api_gap_step(&c, q, sn);
    }
    api_gap_end(out, od, ol);
    *gp = c;
}

/* api_gap_loop_avx2 with AVX-512BW, for gaps of 32 to 256 bytes. The gap is held in NB
 * registers of 64 bytes (the last one masked to the gap's end) and compared with one masked
 * compare a block. The next event's text is looked for before this one's end is known: its
 * start is this text's start plus the gap plus this text's length (< 32), so the 64 bytes at
 * this text's start plus the gap hold it and its end; their quote, backslash and control bytes
 * are found while this event is checked, and the next text's end is the first quote past this
 * text's length. An event then waits for one shift and one bit scan of the one before it,
 * not for a load and its compares. Stops where api_gap_loop_avx2 stops. */
#define API_GAP512_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,bmi,bmi2")))
static inline API_GAP512_TARGET __attribute__((always_inline)) void
api_gap_loop512_n(struct api_gap *gp, const char *end, struct buf *out, const int nb)
{
    struct api_gap c = *gp;
    const char *t = c.t;
    size_t glen = c.glen;
    char *od = out->data;
    /* a text shorter than 32 bytes fits lim, and room while 32 bytes are left of it */
    size_t wroom = c.room < out->cap - out->len ? c.room : out->cap - out->len;
    if (!od || wroom <= 32 || (size_t)(end - t) < glen + 64 || c.lim < 32)
        return;
    __mmask64 last = ~(__mmask64)0 >> (64 * nb - glen);
    __m512i g0 = _mm512_setzero_si512(), g1 = g0, g2 = g0, g3 = g0;
#define API_G512(i) (i == nb - 1 ? _mm512_maskz_loadu_epi8(last, c.g + 64 * i) \
                                 : _mm512_loadu_si512((const void *)(c.g + 64 * i)))
    g0 = API_G512(0);
    if (nb > 1)
        g1 = API_G512(1);
    if (nb > 2)
        g2 = API_G512(2);
    if (nb > 3)
        g3 = API_G512(3);
#undef API_G512
    const __m512i quote = _mm512_set1_epi8('"'), bslash = _mm512_set1_epi8('\\');
    const __m512i ctl = _mm512_set1_epi8(0x1f);
#define API_W512(p, M, B)                                                                   \
    do {                                                                                    \
        __m512i x_ = _mm512_loadu_si512((const void *)(p));                                 \
        M = _mm512_cmpeq_epi8_mask(x_, quote);                                              \
        B = _mm512_cmpeq_epi8_mask(x_, bslash) | _mm512_cmple_epu8_mask(x_, ctl);           \
    } while (0)
    char *w = od + out->len;
    const char *w_lim = w + wroom - 33, *t_lim = end - glen - 64;
    unsigned long joined = 0, empty = 0;
    uint64_t m, b, sh = 0; /* the masks of the 64 bytes that hold t, at offset sh */
    API_W512(t, m, b);
    while (t <= t_lim && w <= w_lim) {
        uint64_t x = m >> sh;
        if (!x)
            break; /* a text of 32 bytes or more */
        size_t sn = (size_t)_tzcnt_u64(x);
        if (sn >= 32 || (b >> sh & ((x & -x) - 1)))
            break; /* long, or a backslash or control byte before the quote */
        uint64_t m2, b2;
        API_W512(t + glen, m2, b2); /* the next text is at sn in these 64 bytes */
        const char *q = t + sn;
        __mmask64 d = _mm512_cmpneq_epi8_mask(g0, nb == 1 ? _mm512_maskz_loadu_epi8(last, q)
                                                         : _mm512_loadu_si512((const void *)q));
        if (nb > 1)
            d |= _mm512_cmpneq_epi8_mask(g1, nb == 2 ? _mm512_maskz_loadu_epi8(last, q + 64)
                                                     : _mm512_loadu_si512((const void *)(q + 64)));
        if (nb > 2)
            d |= _mm512_cmpneq_epi8_mask(g2, nb == 3 ? _mm512_maskz_loadu_epi8(last, q + 128)
                                                     : _mm512_loadu_si512((const void *)(q + 128)));
        if (nb > 3)
            d |= _mm512_cmpneq_epi8_mask(g3, _mm512_maskz_loadu_epi8(last, q + 192));
        if (d)
            break;
        _mm256_storeu_si256((__m256i *)(void *)w,
                            _mm256_loadu_si256((const __m256i *)(const void *)t));
        w += sn; /* the text, and bytes past it */
        empty += sn == 0;
        joined++;
        t = q + glen;
        sh = sn;
        m = m2;
        b = b2;
    }
#undef API_W512
    if (joined) {
        size_t took = (size_t)(w - (od + out->len));
        out->len += took;
        od[out->len] = '\0';
        c.room -= took;
        c.joined += joined;
        c.deltas += joined - empty;
        c.p = t - glen + c.step;
        c.t = t;
        *gp = c;
    }
}

static API_GAP512_TARGET void api_gap_loop512(struct api_gap *gp, const char *end,
                                              struct buf *out)
{
    switch ((gp->glen + 63) / 64) {
    case 1: api_gap_loop512_n(gp, end, out, 1); break;
    case 2: api_gap_loop512_n(gp, end, out, 2); break;
    case 3: api_gap_loop512_n(gp, end, out, 3); break;
    case 4: api_gap_loop512_n(gp, end, out, 4); break;
    default: break;
    }
}
#endif

static void api_gap_run(struct api_gap *gp, const char *end, struct buf *out)
{
#ifdef API_GAP_AVX2
    if (gp->glen >= 32 && api_stream_simd && cpu_avx2()) {
        int wide = api_stream_simd >= 2 && gp->glen <= 256 && cpu_avx512_scan();
        /* the wide loop, and one event by the other each time it stops, while that goes on */
        for (;;) {
            unsigned long before = gp->joined;
            if (wide)
                api_gap_loop512(gp, end, out);
            gp->wide += gp->joined - before;
            api_gap_loop_avx2(gp, end, out);
            before = gp->joined;
            api_gap_loop(gp, end, out, 1);
            if (gp->joined == before)
                return;
        }
    }
#endif
    api_gap_loop(gp, end, out, 0);
}

size_t api_stream_sse_run(struct api_stream *st, const char *s, size_t n, size_t max_data,
                          struct api_run *r)
{
    const char *p = s, *end = s + n;
    struct buf *out = r->text;
    size_t room = r->room;
    struct api_shaped m;
    r->events = r->deltas = r->joined = r->wide = 0;
    r->full = 0;
    r->kind = (enum api_kind)st->shape_kind;
    while (end - p > 6 && memcmp(p, "data:", 5) == 0) {
        const char *json = p[5] == ' ' ? p + 6 : p + 5;
        size_t dl = (size_t)(json - p);
        /* a shaped chunk, then the blank line that ends the event, all in s */
        int found = api_shape_plain(st, json, end, &m);
        if (found < 0)
            found = api_shape_find(st, json, end, &m);
        if (!found || end - m.end < 2 || m.end[0] != '\n' || m.end[1] != '\n' ||
            (size_t)(m.end - json) + 1 > max_data)
            break;
        size_t len = out->len;
        if (m.esc)
            jscan_unescape(m.s, m.sn, out);
        else if (m.sn <= room)
            api_run_append(out, m.s, m.sn);
        if (out->len - len > room || (!m.esc && m.sn > room)) {
            out->len = len; /* past the room: the caller decodes this event itself */
            if (out->data)
                out->data[len] = '\0';
            r->full = 1;
            break;
        }
        room -= out->len - len;
        r->deltas += out->len > len;
        r->events++;
        st->chunks++;
        p = m.end + 2;
        /* The events that follow, while each one's text is plain and its end, the blank line
         * and the next event's start up to its text are the shape's gap: one compare an event.
         * The first one that is not (the last whole event in s among them) is left to the
         * loop above, from its start. */
        size_t pre = st->shape_pre.len, post = st->shape_post.len, head = dl + pre;
        if (pre + post + 1 > max_data)
            continue;
        size_t lim = max_data - 1 - pre - post; /* the longest text an event may hold */
        const struct buf *gap = api_shape_gap(st, dl);
        const char *g = gap->data;
        size_t glen = gap->len;
        if ((size_t)(end - p) < head || memcmp(p, g + post + 2, head) != 0)
            continue;
        struct api_gap gp = {g, glen, post + 2, lim, room, p, p + head, 0, 0, 0};
        api_gap_run(&gp, end, out);
        p = gp.p;
        room = gp.room;
        r->deltas += gp.deltas;
        r->events += gp.joined;
        r->joined += gp.joined;
        r->wide += gp.wide;
        st->chunks += (long)gp.joined;
    }
    return (size_t)(p - s);
}

/* After a full decode: keep the chunk's shape when it was plain text (one text string, no
 * finish, usage, error or other emission), else forget the old one. */
void api_shape_keep(struct api_stream *st, const char *json, size_t n, int plain)
{
    st->shape_kind = 0;
    st->shape_gap_dl = 0;
    if (!plain || st->n_text != 1 || st->n_other || !st->text_q0)
        return;
    size_t pre = (size_t)(st->text_q0 - json) + 1, post = n - (size_t)(st->text_q1 - json) + 1;
    if (pre + post > API_SHAPE_MAX || st->text_q1 <= st->text_q0)
        return;
    buf_reset(&st->shape_pre);
    buf_append(&st->shape_pre, json, pre);
    buf_reset(&st->shape_post);
    buf_append(&st->shape_post, st->text_q1 - 1, post);
    st->shape_kind = st->text_kind;
}

struct api_counted {
    struct api_stream *st;
    api_emit_fn fn;
    void *ud;
};

static void api_count_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct api_counted *c = ud;
    if (kind != API_CONTENT && kind != API_REASONING)
        c->st->n_other++;
    c->fn(c->ud, kind, s, n);
}

static int api_stream_chunk_full(struct api_stream *st, const char *json, size_t n,
                                 api_emit_fn fn, void *ud);

int api_stream_chunk(struct api_stream *st, const char *json, size_t n, api_emit_fn fn, void *ud)
{
    if (api_shape_match(st, json, n, fn, ud))
        return 0;
    struct api_counted c = {st, fn, ud};
    st->text_q0 = st->text_q1 = NULL;
    st->n_text = st->n_other = 0;
    int r = api_stream_chunk_full(st, json, n, api_count_emit, &c);
    api_shape_keep(st, json, n, r == 0 && st->error.len == 0);
    return r;
}

static int api_stream_chunk_full(struct api_stream *st, const char *json, size_t n,
                                 api_emit_fn fn, void *ud)
{
    struct jscan j;
    jscan_init(&j, json, n);
    if (jscan_object_begin(&j) < 0)
        return api_malformed(st, json, n, "not an object");
    int first = 1, r, had_error = 0, usage_before = st->usage.present;
    int object_error = 0; /* vLLM's old {"object":"error","message":...} */
    const char *k;
    size_t kn;
    st->chunks++;
    while ((r = jscan_object_next(&j, &first, &k, &kn)) == 1) {
        if (jscan_key_is(k, kn, "choices")) {
            if (jscan_null(&j))
                continue;
            if (jscan_array_begin(&j) < 0)
                return api_malformed(st, json, n, j.err);
            int af = 1, ar, pos = 0, taken = 0;
            while ((ar = jscan_array_next(&j, &af)) == 1) {
                /* One answer is asked for: choice 0 (by its "index", else the first). With
                 * n > 1 (extra_body) each chunk carries one choice of any index; until
                 * 2026-12 every chunk's first was taken, and n = 2 interleaved two answers
                 * ("HelloBonjour world monde") with the exit status of the last to end. */
                long long ci = api_choice_index(j);
                int take = !taken && (ci == 0 || (ci < 0 && pos == 0));
                pos++;
                taken |= take;
                int rc = take ? api_choice(st, &j, fn, ud) : jscan_skip(&j);
                if (rc == -2)
                    return 1;
                if (rc < 0)
                    return api_malformed(st, json, n, j.err);
            }
            if (ar < 0)
                return api_malformed(st, json, n, j.err);
        } else if (jscan_key_is(k, kn, "usage")) {
            if (api_usage_obj(st, &j) < 0)
                return api_malformed(st, json, n, j.err);
        } else if (jscan_key_is(k, kn, "model")) {
            if (api_short(st, &j, st->model, sizeof st->model) < 0)
                return api_malformed(st, json, n, j.err);
        } else if (jscan_key_is(k, kn, "error")) {
            if (api_error_obj(st, &j) < 0)
                return api_malformed(st, json, n, j.err);
            had_error = st->error.len > 0;
        } else if (jscan_key_is(k, kn, "object")) {
            char obj[32] = "";
            if (api_short(st, &j, obj, sizeof obj) < 0)
                return api_malformed(st, json, n, j.err);
            object_error = strcmp(obj, "error") == 0;
        } else if (jscan_key_is(k, kn, "message")) {
            const char *s;
            size_t sn;
            int t = api_text(st, &j, &s, &sn);
            if (t < 0)
                return api_malformed(st, json, n, j.err);
            if (t > 0 && st->error.len == 0) {
                api_error_set(st, s, sn); /* kept only if this is an error object */
                object_error |= 2;
            }
        } else if (jscan_skip(&j) < 0) {
            return api_malformed(st, json, n, j.err);
        }
    }
    if (r < 0 || !jscan_at_end(&j))
        return api_malformed(st, json, n, j.err ? j.err : "trailing bytes");
    if (object_error & 1) {
        if (st->error.len == 0)
            buf_appends(&st->error, "the server reported an error");
        return 1;
    }
    if (object_error & 2 && !had_error)
        buf_reset(&st->error); /* a top-level "message" that was not an error */
    if (st->usage.present && !usage_before)
        fn(ud, API_USAGE, NULL, 0);
    if (had_error || (st->finish[0] == 'e' && strcmp(st->finish, "error") == 0)) {
        if (st->error.len == 0)
            buf_appends(&st->error, "the server ended the answer with finish_reason \"error\"");
        return 1;
    }
    return 0;
}

int api_stream_event(struct api_stream *st, const struct sse_event *ev, api_emit_fn fn, void *ud)
{
    if (ev->error) {
        /* Old llama.cpp: `error: {json}` as its own SSE field. */
        struct jscan j;
        jscan_init(&j, ev->error, ev->error_len);
        buf_reset(&st->error);
        if (jscan_peek(&j) != '{' || api_error_obj(st, &j) < 0 || st->error.len == 0)
            api_error_set(st, ev->error, ev->error_len);
        return 1;
    }
    if (ev->type[0] == 'e' && strcmp(ev->type, "error") == 0) {
        /* `event: error` with the details in data */
        if (api_stream_chunk(st, ev->data, ev->data_len, fn, ud) < 0 || st->error.len == 0)
            api_error_set(st, ev->data, ev->data_len);
        return 1;
    }
    if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
        st->done = 1;
        return 1;
    }
    if (ev->data_len == 0)
        return 0;
    return api_stream_chunk(st, ev->data, ev->data_len, fn, ud);
}

void api_textcount_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct api_textcount *c = ud;
    if (kind == API_CONTENT || kind == API_REASONING)
        c->text += n;
    c->fn(c->ud, kind, s, n);
}

int api_decode_whole(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                     void *ud, api_chunk_fn decode)
{
    struct api_textcount c = {fn, ud, 0};
    int r = decode(st, body, n, api_textcount_emit, &c);
    if (r < 0)
        return -1;
    if (st->error.len)
        return -1;
    /* A whole answer with text that names no reason is complete; one with neither text nor
     * a reason ({}, {"choices":[]}, an empty message) is no answer at all: finish stays "".
     * The finish is announced as a streamed one is (fuzz_dialect: a finish only with its
     * announcement; a Gemini body whose "finishReason" key is misspelt had none). */
    if (!st->finish[0] && c.text) {
        memcpy(st->finish, "stop", 5);
        fn(ud, API_FINISH, NULL, 0);
    }
    return 0;
}

int api_decode_completion(struct api_stream *st, const char *body, size_t n, api_emit_fn fn,
                          void *ud)
{
    return api_decode_whole(st, body, n, fn, ud, api_stream_chunk);
}

/* Text of an HTML page reduced to its <title> or first words. */
static void api_html_summary(const char *body, size_t n, struct buf *msg)
{
    const char *t = NULL;
    for (size_t i = 0; i + 7 <= n; i++)
        if (strncasecmp(body + i, "<title>", 7) == 0) {
            t = body + i + 7;
            break;
        }
    if (t) {
        const char *e = t;
        while (e < body + n && *e != '<')
            e++;
        buf_appends(msg, "an HTML page (\"");
        api_msg_append(msg, t, (size_t)(e - t), 120);
        buf_appends(msg, "\") - probably from a proxy or gateway, not the API");
    } else {
        buf_appends(msg, "an HTML page - probably from a proxy or gateway, not the API");
    }
}

static const char *api_json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

void api_error_param(const char *body, size_t n, char *out, size_t size)
{
    if (!size)
        return;
    out[0] = '\0';
    cJSON *root = n ? cJSON_ParseWithLength(body, n) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "param");
    if (cJSON_IsString(p) && strlen(p->valuestring) < size) {
        snprintf(out, size, "%s", p->valuestring);
        api_code_clean(out);
    }
    cJSON_Delete(root);
}

void api_error_message(long status, const char *ctype, const char *body, size_t n,
                       struct buf *msg, char *code, size_t code_size)
{
    if (code_size)
        code[0] = '\0';
    buf_printf(msg, "HTTP %ld", status);
    if (status == 304) { /* no redirect: an answer to a conditional request, which tokterm
                            never makes (until 2026-12 called a redirect) */
        buf_appends(msg, ": Not Modified, to a request that asked for no cached copy: the "
                         "server, or a cache or proxy before it, is broken");
        return;
    }
    if (status >= 300 && status < 400) {
        /* A redirect's body is a page for browsers; what matters is that it is not followed. */
        buf_appends(msg, ": the server redirects this request; tokterm does not follow "
                         "redirects (they could carry your key to another host)");
        return;
    }
    const char *text = NULL;
    cJSON *root = n ? cJSON_ParseWithLength(body, n) : NULL;
    if (root) {
        /* Google's errors (Gemini, and its OpenAI-compatible endpoint) may come as a list of
         * one: [{"error":{"code":429,"message":...,"status":"RESOURCE_EXHAUSTED"}}] */
        const cJSON *top = cJSON_IsArray(root) ? cJSON_GetArrayItem(root, 0) : root;
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(top, "error");
        const cJSON *src = cJSON_IsObject(err) ? err : top;
        if (cJSON_IsString(err))
            text = err->valuestring;
        else if (cJSON_IsObject(err) && cJSON_IsObject(cJSON_GetObjectItem(err, "error")))
            src = cJSON_GetObjectItem(err, "error"); /* some proxies nest it twice */
        if (!text)
            text = api_json_str(src, "message");
        if (!text)
            text = api_json_str(top, "detail");
        if (!text) {
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(top, "detail");
            if (cJSON_IsArray(d) && cJSON_IsObject(cJSON_GetArrayItem(d, 0)))
                text = api_json_str(cJSON_GetArrayItem(d, 0), "msg");
        }
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(src, "code");
        const char *type = api_json_str(src, "type");
        /* Google's status names the error better than its number, the HTTP status again */
        const char *gstatus = src == err ? api_json_str(src, "status") : NULL;
        if (code_size && gstatus && !cJSON_IsString(c))
            snprintf(code, code_size, "%s", gstatus);
        else if (code_size && cJSON_IsString(c))
            snprintf(code, code_size, "%s", c->valuestring);
        else if (code_size && cJSON_IsNumber(c))
            snprintf(code, code_size, "%d", c->valueint);
        else if (code_size && type)
            snprintf(code, code_size, "%s", type);
        if (code_size)
            api_code_clean(code);
        if (text) {
            buf_appends(msg, ": ");
            api_msg_append(msg, text, strlen(text), API_MSG_MAX);
        }
        if (code_size && code[0] && !(text && strstr(text, code))) {
            buf_printf(msg, " (%s)", code);
        }
        cJSON_Delete(root);
        if (text)
            return;
    }
    int html = (ctype && strstr(ctype, "html")) ||
               (n >= 5 && (strncasecmp(body, "<!DOC", 5) == 0 || strncasecmp(body, "<html", 5) == 0));
    if (html) {
        buf_appends(msg, ": ");
        api_html_summary(body, n, msg);
        return;
    }
    if (n && !root) {
        buf_appends(msg, ": ");
        size_t show = n;
        while (show && (body[show - 1] == '\n' || body[show - 1] == '\r'))
            show--;
        api_msg_append(msg, body, show, 300);
    }
}

enum api_outcome api_finish_outcome(const struct api_stream *st, struct buf *msg)
{
    if (strcmp(st->finish, "length") == 0) {
        buf_appends(msg, "the answer was cut at the token limit (finish_reason \"length\")");
        return API_CUT;
    }
    if (strcmp(st->finish, "content_filter") == 0) {
        buf_appends(msg, "the answer was stopped by the provider's content filter");
        return API_CUT;
    }
    return API_OK;
}

const char *api_outcome_name(enum api_outcome o)
{
    switch (o) {
    case API_OK: return "complete";
    case API_CUT: return "cut";
    case API_ERR_HTTP: return "api-error";
    case API_ERR_NETWORK: return "network-error";
    case API_ERR_TRUNCATED: return "truncated";
    case API_CANCELLED: return "cancelled";
    case API_ERR_USAGE: return "usage-error";
    case API_CACHE_MISS: return "cache-miss";
    case API_LIMIT: return "limit";
    }
    return "unknown";
}

int api_outcome_exit(enum api_outcome o)
{
    switch (o) {
    case API_OK: return 0;
    case API_ERR_USAGE: return 2;
    case API_ERR_HTTP: return 3;
    case API_ERR_NETWORK: return 4;
    case API_ERR_TRUNCATED: return 5;
    case API_CUT: return 6;
    case API_CANCELLED: return 130;
    case API_CACHE_MISS: return 7;
    case API_LIMIT: return 8;
    }
    return 1;
}
