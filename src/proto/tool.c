/* tool.c - function calling's shared data: names for the wire, the schema check, globs. */
#include "config.h"
#include "proto/tool.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tool_defs_free(struct tool_def *defs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(defs[i].name);
        free(defs[i].description);
        free(defs[i].schema);
    }
    free(defs);
}

void tool_call_free(struct tool_call *c)
{
    free(c->id);
    free(c->name);
    free(c->wire);
    free(c->args);
    memset(c, 0, sizeof *c);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

void tool_call_copy(struct tool_call *dst, const struct tool_call *src)
{
    dst->id = dup_or_null(src->id);
    dst->name = dup_or_null(src->name);
    dst->wire = dup_or_null(src->wire);
    dst->args = src->args ? xstrndup(src->args, src->args_len) : NULL;
    dst->args_len = src->args ? src->args_len : 0;
}

void tool_result_free(struct tool_result *r)
{
    buf_free(&r->content);
    free(r->structured);
    free(r->note);
    memset(r, 0, sizeof *r);
}

void tool_result_error(struct tool_result *r, const char *fmt, ...)
{
    va_list ap;
    char small[512];
    va_start(ap, fmt);
    vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    buf_reset(&r->content);
    buf_appends(&r->content, small);
    r->is_error = 1;
}

void tool_wire_name(const char *name, char *out, size_t size)
{
    char tmp[256];
    size_t o = 0;
    for (const char *p = name; *p && o + 2 < sizeof tmp; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '.') {
            tmp[o++] = '_';
            tmp[o++] = '_';
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-') {
            tmp[o++] = (char)c;
        } else {
            tmp[o++] = '_';
        }
    }
    tmp[o] = 0;
    if (o == 0)
        snprintf(tmp, sizeof tmp, "tool");
    if (o > 64) { /* long: 55 bytes, "_" and 8 hex digits of FNV-1a of the whole name */
        uint32_t h = 2166136261u;
        for (const char *p = name; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        snprintf(tmp + 55, sizeof tmp - 55, "_%08x", (unsigned)h);
    }
    snprintf(out, size, "%s", tmp);
}

int tool_glob(const char *pat, const char *name)
{
    const char *star = NULL, *back = NULL;
    while (*name) {
        if (*pat == '*') {
            star = ++pat;
            back = name;
        } else if (*pat == '?' || *pat == *name) {
            pat++;
            name++;
        } else if (star) {
            pat = star;
            name = ++back;
        } else {
            return 0;
        }
    }
    while (*pat == '*')
        pat++;
    return *pat == 0;
}

/* ---- the schema check ---- */

#define SCHEMA_DEPTH 32

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsObject(v))
        return "object";
    if (cJSON_IsArray(v))
        return "array";
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsNumber(v))
        return v->valuedouble > -9.007199254740992e15 && v->valuedouble < 9.007199254740992e15 &&
                       v->valuedouble == (double)(long long)v->valuedouble
                   ? "integer"
                   : "number";
    return "unknown";
}

static int type_is(const cJSON *v, const char *t)
{
    const char *have = json_type(v);
    if (!strcmp(t, have))
        return 1;
    return !strcmp(t, "number") && !strcmp(have, "integer");
}

/* Count UTF-8 code points (maxLength counts characters). */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

struct sc {
    struct buf *err;
    char path[512];
};

static int sc_fail(struct sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sc_fail(struct sc *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    buf_reset(c->err);
    buf_printf(c->err, "%s: %s", c->path[0] ? c->path : "$", msg);
    return -1;
}

static int check(struct sc *c, const cJSON *s, const cJSON *v, int depth);

/* Descend into path element (".name" or "[i]") for one check. */
static int check_at(struct sc *c, const cJSON *s, const cJSON *v, int depth, const char *name,
                    int idx)
{
    size_t at = strlen(c->path);
    if (at == 0)
        snprintf(c->path, sizeof c->path, "$");
    at = strlen(c->path);
    if (name)
        snprintf(c->path + at, sizeof c->path - at, ".%.100s", name);
    else
        snprintf(c->path + at, sizeof c->path - at, "[%d]", idx);
    int r = check(c, s, v, depth + 1);
    if (r == 0)
        c->path[at] = 0;
    return r;
}

static double num(const cJSON *s, const char *key, int *has)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, key);
    *has = cJSON_IsNumber(x);
    return *has ? x->valuedouble : 0;
}

static int check_type(struct sc *c, const cJSON *s, const cJSON *v)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(t)) {
        if (!type_is(v, t->valuestring))
            return sc_fail(c, "expected %s, got %s", t->valuestring, json_type(v));
    } else if (cJSON_IsArray(t)) {
        const cJSON *e;
        char want[200] = "";
        cJSON_ArrayForEach(e, t) {
            if (cJSON_IsString(e) && type_is(v, e->valuestring))
                return 0;
            if (cJSON_IsString(e) && strlen(want) + strlen(e->valuestring) + 4 < sizeof want) {
                if (want[0])
                    strcat(want, " or ");
                strcat(want, e->valuestring);
            }
        }
        return sc_fail(c, "expected %s, got %s", want, json_type(v));
    }
    return 0;
}

static int check_object(struct sc *c, const cJSON *s, const cJSON *v, int depth)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *e;
    if (cJSON_IsArray(req)) {
        cJSON_ArrayForEach(e, req) {
            if (cJSON_IsString(e) && !cJSON_GetObjectItemCaseSensitive(v, e->valuestring))
                return sc_fail(c, "required property \"%.100s\" is missing", e->valuestring);
        }
    }
    cJSON_ArrayForEach(e, v) {
        const cJSON *ps = cJSON_IsObject(props) ? cJSON_GetObjectItemCaseSensitive(props, e->string)
                                                : NULL;
        if (ps) {
            if (check_at(c, ps, e, depth, e->string, 0) < 0)
                return -1;
        } else if (cJSON_IsFalse(addl)) {
            return sc_fail(c, "property \"%.100s\" is not allowed", e->string);
        } else if (cJSON_IsObject(addl)) {
            if (check_at(c, addl, e, depth, e->string, 0) < 0)
                return -1;
        }
    }
    return 0;
}

static int check_array(struct sc *c, const cJSON *s, const cJSON *v, int depth)
{
    int has;
    double lo = num(s, "minItems", &has);
    int n = cJSON_GetArraySize(v);
    if (has && n < lo)
        return sc_fail(c, "expected at least %.0f items, got %d", lo, n);
    double hi = num(s, "maxItems", &has);
    if (has && n > hi)
        return sc_fail(c, "expected at most %.0f items, got %d", hi, n);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (cJSON_IsObject(items)) {
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (check_at(c, items, e, depth, NULL, i++) < 0)
                return -1;
        }
    }
    return 0;
}

static int check_scalar(struct sc *c, const cJSON *s, const cJSON *v)
{
    int has;
    double x;
    if (cJSON_IsString(v)) {
        size_t len = utf8_chars(v->valuestring);
        x = num(s, "minLength", &has);
        if (has && (double)len < x)
            return sc_fail(c, "expected at least %.0f characters, got %zu", x, len);
        x = num(s, "maxLength", &has);
        if (has && (double)len > x)
            return sc_fail(c, "expected at most %.0f characters, got %zu", x, len);
    }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        x = num(s, "minimum", &has);
        if (has && d < x)
            return sc_fail(c, "%g is less than the minimum %g", d, x);
        x = num(s, "maximum", &has);
        if (has && d > x)
            return sc_fail(c, "%g is more than the maximum %g", d, x);
        x = num(s, "exclusiveMinimum", &has);
        if (has && d <= x)
            return sc_fail(c, "%g is not more than %g", d, x);
        x = num(s, "exclusiveMaximum", &has);
        if (has && d >= x)
            return sc_fail(c, "%g is not less than %g", d, x);
    }
    return 0;
}

static int check_enum(struct sc *c, const cJSON *s, const cJSON *v)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (k && !cJSON_Compare(k, v, 1))
        return sc_fail(c, "value is not the one allowed");
    if (cJSON_IsArray(en)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, en) {
            if (cJSON_Compare(e, v, 1))
                return 0;
        }
        return sc_fail(c, "value is not one of the allowed values");
    }
    return 0;
}

/* anyOf / oneOf / allOf: the message of the first branch that failed when none fits. */
static int check_combos(struct sc *c, const cJSON *s, const cJSON *v, int depth)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *e;
    if (cJSON_IsArray(all)) {
        cJSON_ArrayForEach(e, all) {
            if (check(c, e, v, depth + 1) < 0)
                return -1;
        }
    }
    static const char *const which[] = {"anyOf", "oneOf"};
    for (int w = 0; w < 2; w++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(s, which[w]);
        if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
            continue;
        int fits = 0;
        char path[sizeof c->path];
        memcpy(path, c->path, sizeof path);
        cJSON_ArrayForEach(e, arr) {
            if (check(c, e, v, depth + 1) == 0)
                fits++;
            memcpy(c->path, path, sizeof path);
        }
        if (fits == 0)
            return sc_fail(c, "value fits none of the %s schemas", which[w]);
        if (w == 1 && fits > 1)
            return sc_fail(c, "value fits %d of the oneOf schemas, not one", fits);
    }
    return 0;
}

static int check(struct sc *c, const cJSON *s, const cJSON *v, int depth)
{
    if (depth > SCHEMA_DEPTH)
        return sc_fail(c, "nested deeper than %d levels", SCHEMA_DEPTH);
    if (!cJSON_IsObject(s)) /* true, or not a schema: anything goes */
        return 0;
    if (check_type(c, s, v) < 0 || check_enum(c, s, v) < 0 || check_combos(c, s, v, depth) < 0)
        return -1;
    if (cJSON_IsObject(v))
        return check_object(c, s, v, depth);
    if (cJSON_IsArray(v))
        return check_array(c, s, v, depth);
    return check_scalar(c, s, v);
}

/* 1 when JSON text nests deeper than max (cJSON recurses; bound it first). */
static int too_deep(const char *s, size_t n, int max)
{
    int d = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '{' || ch == '[') {
            if (++d > max)
                return 1;
        } else if (ch == '}' || ch == ']') {
            d--;
        }
    }
    return 0;
}

int tool_schema_check(const char *schema, const char *args, size_t n, struct buf *err)
{
    struct sc c = {.err = err};
    if (too_deep(args, n, 64)) {
        buf_reset(err);
        buf_appends(err, "arguments nest deeper than 64 levels");
        return -1;
    }
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(args, n, &end, 0);
    if (!v || (size_t)(end - args) < n) {
        size_t rest = v ? (size_t)(end - args) : n;
        while (rest < n && (args[rest] == ' ' || args[rest] == '\n' || args[rest] == '\t' ||
                            args[rest] == '\r'))
            rest++;
        if (!v || rest < n) {
            cJSON_Delete(v);
            buf_reset(err);
            buf_appends(err, "arguments are not valid JSON");
            return -1;
        }
    }
    if (!cJSON_IsObject(v)) {
        buf_reset(err);
        buf_printf(err, "$: arguments must be a JSON object, got %s", json_type(v));
        cJSON_Delete(v);
        return -1;
    }
    int r = 0;
    if (schema && *schema && !too_deep(schema, strlen(schema), 64)) {
        cJSON *s = cJSON_Parse(schema);
        r = s ? check(&c, s, v, 0) : 0; /* a source's unreadable schema checks nothing */
        cJSON_Delete(s);
    }
    cJSON_Delete(v);
    return r;
}
