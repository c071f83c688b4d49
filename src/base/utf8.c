/* utf8.c - UTF-8 decoding and terminal-safe sanitising. */
#include "config.h"
#include "base/utf8.h"

#include "base/buf.h"

#include <stdio.h>
#include <string.h>

size_t utf8_decode(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2; v = c & 0x1F; min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F; min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07; min = 0x10000;
    } else {
        *cp = UTF8_REPLACEMENT;
        return 1;
    }
    if (n < len) {
        *cp = UTF8_REPLACEMENT;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = UTF8_REPLACEMENT;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = UTF8_REPLACEMENT;
        return 1;
    }
    *cp = v;
    return len;
}

size_t utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = UTF8_REPLACEMENT;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) { /* ASCII eight bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (cp == UTF8_REPLACEMENT && k == 1)
            return 0;
        i += k;
    }
    return 1;
}

char *utf8_for_wire(const char *s, size_t n, size_t *out_len)
{
    if (!memchr(s, '\0', n) && utf8_valid(s, n))
        return NULL;
    struct buf b = BUF_INIT;
    buf_reserve(&b, n + n / 2 + 1);
    size_t i = 0;
    while (i < n) {
        size_t run = 0; /* printable ASCII and other bytes below 0x80 but NUL: as they are */
        while (i + run < n && (unsigned char)s[i + run] < 0x80 && s[i + run])
            run++;
        buf_append(&b, s + i, run);
        i += run;
        if (i == n)
            break;
        uint32_t cp = 0;
        size_t k = s[i] ? utf8_decode(s + i, n - i, &cp) : 1;
        if (!s[i] || (cp == UTF8_REPLACEMENT && k == 1))
            buf_appends(&b, "\xEF\xBF\xBD");
        else
            buf_append(&b, s + i, k);
        i += k;
    }
    *out_len = b.len;
    return buf_take(&b);
}

size_t utf8_incomplete_tail(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    /* Look back at most 3 bytes for a lead byte whose sequence runs past the end. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned c = s[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: keep looking for the lead */
        size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3
                    : c >= 0xC2 && c <= 0xDF ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* 1 when the eight bytes at s are printable ASCII: no byte < 0x20 (the lowest one's borrow
 * sets its high bit), none > 0x7E (+1, or the byte itself, sets it). A false alarm (past the
 * first bad byte) only sends the caller the slow way. */
static inline int utf8_printable8(const char *s)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t x;
    memcpy(&x, s, 8);
    return !(((x - ones * 0x20) | (x + ones) | x) & high);
}

void utf8_sanitize(struct buf *out, const char *s, size_t n)
{
    size_t i = 0, run = 0; /* run = start of bytes copied verbatim */
    buf_reserve(out, n);
    while (i < n) {
        while (i + 8 <= n && utf8_printable8(s + i))
            i += 8;
        if (i >= n)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F) {
            i++;
            continue;
        }
        if (c == '\n' || c == '\t') {
            i++;
            continue;
        }
        if (c >= 0xE3 && c <= 0xEC && i + 2 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80 &&
            ((unsigned char)s[i + 2] & 0xC0) == 0x80) {
            i += 3; /* U+3000..U+CFFF (CJK, kana, Hangul): valid, no control among them */
            continue;
        }
        if (c >= 0x80) {
            uint32_t cp;
            size_t k = utf8_decode(s + i, n - i, &cp);
            if ((cp >= 0x80 && cp <= 0x9F) || utf8_bidi_control(cp)) {
                buf_append(out, s + run, i - run);
                buf_printf(out, "<U+%04X>", (unsigned)cp);
                i += k;
                run = i;
            } else if (cp == UTF8_REPLACEMENT && k == 1) {
                buf_append(out, s + run, i - run);
                buf_appends(out, "\xEF\xBF\xBD");
                i += 1;
                run = i;
            } else {
                i += k;
            }
            continue;
        }
        /* C0 control, or DEL */
        buf_append(out, s + run, i - run);
        if (c == '\r' && i + 1 < n && s[i + 1] == '\n') {
            /* drop the CR of CRLF */
        } else if (c == 0x7F) {
            buf_appends(out, "^?");
        } else {
            char caret[3] = {'^', (char)(c + 0x40), 0};
            buf_appends(out, caret);
        }
        i++;
        run = i;
    }
    buf_append(out, s + run, n - run);
}

size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    size_t cut = max ? max : 1, back = 0;
    /* back over continuation bytes (at most 3: a sequence is at most 4 bytes) */
    while (back < 3 && cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) {
        cut--;
        back++;
    }
    if (cut == 0) { /* max is shorter than the first sequence: take it whole */
        cut = max ? max : 1;
        while (cut < n && cut < 4 && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut++;
    }
    if (s[cut - 1] == '\r' && cut < n && s[cut] == '\n')
        cut = cut > 1 ? cut - 1 : 2;
    return cut;
}

int utf8_bidi_control(uint32_t cp)
{
    if (cp < 0x061C || cp > 0x2069)
        return 0;
    return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
           cp >= 0x2066;
}

void utf8_json_terminal(struct buf *out, const char *s, size_t n)
{
    size_t i = 0, run = 0; /* run = start of bytes copied verbatim */
    buf_reserve(out, n);
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        size_t k = 1;
        if (c >= 0x80)
            k = utf8_decode(s + i, n - i, &cp);
        int raw = (c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t' ||
                  (c >= 0x80 && !(cp <= 0x9F || utf8_bidi_control(cp) ||
                                  (cp == UTF8_REPLACEMENT && k == 1)));
        if (!raw) {
            buf_append(out, s + run, i - run);
            buf_printf(out, "\\u%04x", (unsigned)cp); /* an invalid byte is \ufffd */
            run = i + k;
        }
        i += k;
    }
    buf_append(out, s + run, n - run);
}
