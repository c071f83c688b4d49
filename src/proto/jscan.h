/* jscan.h - allocation-free JSON pull scanner for the hot path (one SSE chunk per call).
 *
 * cJSON builds a tree with a malloc per node; decoding 200,000 stream chunks that way costs
 * more than receiving them. jscan walks the text in place, validates it, and hands out spans
 * of the values the caller asks for. Strings come back raw (escapes intact) with a flag; use
 * jscan_unescape() when the flag is set. Nesting is limited (JSCAN_MAX_DEPTH) so hostile input
 * cannot exhaust the stack. */
#ifndef TT_JSCAN_H
#define TT_JSCAN_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/buf.h"

#define JSCAN_MAX_DEPTH 256

struct jscan {
    const char *p;
    const char *end;
    const char *err;  /* first error, NULL while fine */
};

/* Start scanning s[0..n). */
void jscan_init(struct jscan *j, const char *s, size_t n);
/* Next non-space byte without consuming it, or -1 at the end. */
int jscan_peek(struct jscan *j);
/* Consume '{' (returns 0) or fail (-1). Then loop on jscan_object_next. */
int jscan_object_begin(struct jscan *j);
/* Next member: 1 with *key and *klen set (raw key text) and the scanner at the value; 0 at '}';
 * -1 on error. *first must start at 1 for each object. */
int jscan_object_next(struct jscan *j, int *first, const char **key, size_t *klen);
/* Consume '[' (0) or fail (-1); then jscan_array_next: 1 = an element follows, 0 = ']', -1. */
int jscan_array_begin(struct jscan *j);
int jscan_array_next(struct jscan *j, int *first);
/* A string value: 0 with the raw span (between the quotes) and *escaped = 1 when it holds
 * backslash escapes; -1 when the value is not a valid string. */
int jscan_string(struct jscan *j, const char **s, size_t *n, int *escaped);

/* The length of the run of ordinary string bytes at s[0..n): up to the first '"', '\\' or
 * control character, or n. 16 bytes at a time with SSE2, then word-at-a-time (a byte is '"' or
 * '\\' when its XOR with that byte is zero, a control character when it is below 0x20), for
 * the hot paths of streaming. */
static inline size_t jscan_plain_len(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    size_t i = 0;
#ifdef __SSE2__
    /* 16 bytes at a time: '"', '\\' by equality, a control byte by max(c, 0x1f) == 0x1f */
    for (; n - i >= 16; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
        __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
        __m128i c = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        __m128i m = _mm_or_si128(_mm_or_si128(q, b), c);
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return i + (size_t)__builtin_ctz(bits);
    }
#endif
    for (; n - i >= 8; i += 8) {
        uint64_t v, a, b;
        memcpy(&v, s + i, 8);
        a = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        uint64_t m = (((a - ones) & ~a) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs;
        if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* the lowest flagged byte is exact (a borrow only flags bytes after it) */
            return i + (size_t)__builtin_ctzll(m) / 8;
#else
            break;
#endif
        }
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20)
            break;
    }
    return i;
}
/* 1 and consumed when the next value is `null`, else 0 (nothing consumed). */
int jscan_null(struct jscan *j);
/* A number value as a long long (fractions truncated): 0, or -1 when not a number. */
int jscan_integer(struct jscan *j, long long *v);
/* Skip any value, validating it: 0 or -1. */
int jscan_skip(struct jscan *j);
/* 1 when only white space is left. */
int jscan_at_end(struct jscan *j);
/* 1 when the raw key equals name (inline: with a literal name the length folds to a constant). */
static inline int jscan_key_is(const char *key, size_t klen, const char *name)
{
    size_t n = __builtin_strlen(name);
    return klen == n && __builtin_memcmp(key, name, n) == 0;
}
/* Append the decoded form of a raw JSON string span to out (\uXXXX pairs joined; a lone
 * surrogate becomes U+FFFD). */
void jscan_unescape(const char *s, size_t n, struct buf *out);

#endif
