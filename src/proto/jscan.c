/* jscan.c - allocation-free JSON pull scanner (see jscan.h). */
#include "config.h"
#include "proto/jscan.h"
#include "base/utf8.h"

#include <string.h>

static int jscan_fail(struct jscan *j, const char *why)
{
    if (!j->err)
        j->err = why;
    j->p = j->end;
    return -1;
}

void jscan_init(struct jscan *j, const char *s, size_t n)
{
    j->p = s;
    j->end = s + n;
    j->err = NULL;
}

static void jscan_ws(struct jscan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

int jscan_peek(struct jscan *j)
{
    jscan_ws(j);
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

static int jscan_expect(struct jscan *j, char c)
{
    if (jscan_peek(j) != (unsigned char)c)
        return jscan_fail(j, "unexpected character");
    j->p++;
    return 0;
}

int jscan_object_begin(struct jscan *j)
{
    return jscan_expect(j, '{');
}

int jscan_array_begin(struct jscan *j)
{
    return jscan_expect(j, '[');
}

int jscan_string(struct jscan *j, const char **s, size_t *n, int *escaped)
{
    if (jscan_peek(j) != '"')
        return jscan_fail(j, "expected a string");
    const char *start = ++j->p;
    int esc = 0;
    for (;;) {
        /* Fast skip of ordinary bytes. */
        const char *q = j->p + jscan_plain_len(j->p, (size_t)(j->end - j->p));
        j->p = q;
        if (q >= j->end)
            return jscan_fail(j, "unterminated string");
        if (*q == '"')
            break;
        if (*q == '\\') {
            esc = 1;
            if (q + 1 >= j->end)
                return jscan_fail(j, "unterminated escape");
            char c = q[1];
            if (c == 'u') {
                if (j->end - q < 6)
                    return jscan_fail(j, "short \\u escape");
                for (int i = 2; i < 6; i++) {
                    char h = q[i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return jscan_fail(j, "bad \\u escape");
                }
                j->p = q + 6;
            } else if (strchr("\"\\/bfnrt", c) && c) {
                j->p = q + 2;
            } else {
                return jscan_fail(j, "bad escape");
            }
            continue;
        }
        return jscan_fail(j, "control character in string");
    }
    *s = start;
    *n = (size_t)(j->p - start);
    *escaped = esc;
    j->p++; /* closing quote */
    return 0;
}

int jscan_object_next(struct jscan *j, int *first, const char **key, size_t *klen)
{
    int c = jscan_peek(j);
    if (c == '}') {
        j->p++;
        return 0;
    }
    if (!*first) {
        if (c != ',')
            return jscan_fail(j, "expected ',' or '}'");
        j->p++;
    }
    *first = 0;
    int esc;
    if (jscan_string(j, key, klen, &esc) < 0)
        return -1;
    if (jscan_expect(j, ':') < 0)
        return -1;
    return 1;
}

int jscan_array_next(struct jscan *j, int *first)
{
    int c = jscan_peek(j);
    if (c == ']') {
        j->p++;
        return 0;
    }
    if (!*first) {
        if (c != ',')
            return jscan_fail(j, "expected ',' or ']'");
        j->p++;
    }
    *first = 0;
    if (jscan_peek(j) < 0)
        return jscan_fail(j, "unterminated array");
    return 1;
}

static int jscan_literal(struct jscan *j, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
        return -1;
    j->p += n;
    return 0;
}

int jscan_null(struct jscan *j)
{
    if (jscan_peek(j) == 'n' && jscan_literal(j, "null") == 0)
        return 1;
    return 0;
}

static int jscan_number_span(struct jscan *j)
{
    const char *p = j->p, *e = j->end;
    if (p < e && *p == '-')
        p++;
    if (p >= e || !(*p >= '0' && *p <= '9'))
        return jscan_fail(j, "bad number");
    if (*p == '0')
        p++;
    else
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !(*p >= '0' && *p <= '9'))
            return jscan_fail(j, "bad number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !(*p >= '0' && *p <= '9'))
            return jscan_fail(j, "bad number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    return 0;
}

int jscan_integer(struct jscan *j, long long *v)
{
    if (jscan_peek(j) < 0)
        return jscan_fail(j, "expected a number");
    const char *start = j->p;
    if (jscan_number_span(j) < 0)
        return -1;
    long long x = 0;
    int neg = 0;
    const char *p = start;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; p < j->p && *p >= '0' && *p <= '9'; p++)
        if (x < (long long)1e17)
            x = x * 10 + (*p - '0');
    *v = neg ? -x : x;
    return 0;
}

static int jscan_skip_depth(struct jscan *j, int depth)
{
    if (depth > JSCAN_MAX_DEPTH)
        return jscan_fail(j, "nested too deeply");
    int c = jscan_peek(j), first = 1;
    const char *s;
    size_t n;
    int esc, r;
    switch (c) {
    case '{':
        j->p++;
        while ((r = jscan_object_next(j, &first, &s, &n)) == 1)
            if (jscan_skip_depth(j, depth + 1) < 0)
                return -1;
        return r;
    case '[':
        j->p++;
        while ((r = jscan_array_next(j, &first)) == 1)
            if (jscan_skip_depth(j, depth + 1) < 0)
                return -1;
        return r;
    case '"':
        return jscan_string(j, &s, &n, &esc);
    case 't':
        return jscan_literal(j, "true") == 0 ? 0 : jscan_fail(j, "bad literal");
    case 'f':
        return jscan_literal(j, "false") == 0 ? 0 : jscan_fail(j, "bad literal");
    case 'n':
        return jscan_literal(j, "null") == 0 ? 0 : jscan_fail(j, "bad literal");
    case -1:
        return jscan_fail(j, "unexpected end");
    default:
        return jscan_number_span(j);
    }
}

int jscan_skip(struct jscan *j)
{
    return jscan_skip_depth(j, 0);
}

int jscan_at_end(struct jscan *j)
{
    return jscan_peek(j) == -1;
}

static int jscan_hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else
            v |= c - 'A' + 10;
    }
    return v;
}

void jscan_unescape(const char *s, size_t n, struct buf *out)
{
    size_t i = 0, run = 0;
    buf_reserve(out, n);
    while (i < n) {
        if (s[i] != '\\') {
            i++;
            continue;
        }
        buf_append(out, s + run, i - run);
        if (i + 1 >= n) {
            run = n;
            break;
        }
        char c = s[i + 1], ch = 0;
        switch (c) {
        case 'n': ch = '\n'; break;
        case 't': ch = '\t'; break;
        case 'r': ch = '\r'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'u': break;
        default: ch = c; break;
        }
        if (c != 'u') {
            buf_appendc(out, ch);
            i += 2;
            run = i;
            continue;
        }
        if (i + 6 > n) {
            i = n;
            run = n;
            break;
        }
        uint32_t cp = (uint32_t)jscan_hex4(s + i + 2);
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i + 6 <= n && s[i] == '\\' && s[i + 1] == 'u') {
                uint32_t lo = (uint32_t)jscan_hex4(s + i + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                } else {
                    cp = UTF8_REPLACEMENT;
                }
            } else {
                cp = UTF8_REPLACEMENT;
            }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = UTF8_REPLACEMENT;
        }
        char enc[4];
        buf_append(out, enc, utf8_encode(cp, enc));
        run = i;
    }
    buf_append(out, s + run, n - run);
}
