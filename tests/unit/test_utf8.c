/* test_utf8.c - decoding, incomplete tails and terminal sanitising. */
#include "config.h"
#include "tap.h"
#include "base/utf8.h"

static void check_sanitize(const char *in, size_t n, const char *want, const char *name)
{
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, in, n);
    TAP_STR(buf_str(&b), want, name);
    buf_free(&b);
}

static void check_json(const char *in, const char *want, const char *name)
{
    struct buf b = BUF_INIT;
    utf8_json_terminal(&b, in, strlen(in));
    TAP_STR(buf_str(&b), want, name);
    buf_free(&b);
}

int main(void)
{
    uint32_t cp;
    TAP_INT(utf8_decode("A", 1, &cp), 1, "ascii length");
    TAP_INT(cp, 'A', "ascii value");
    TAP_INT(utf8_decode("\xE4\xBD\xA0", 3, &cp), 3, "CJK length");
    TAP_INT(cp, 0x4F60, "CJK value");
    TAP_INT(utf8_decode("\xF0\x9F\x98\x8A", 4, &cp), 4, "emoji length");
    TAP_INT(cp, 0x1F60A, "emoji value");
    TAP_INT(utf8_decode("\xC0\xAF", 2, &cp), 1, "overlong consumes one byte");
    TAP_INT(cp, UTF8_REPLACEMENT, "overlong gives U+FFFD");
    TAP_INT(utf8_decode("\xED\xA0\x80", 3, &cp), 1, "surrogate rejected");
    TAP_INT(utf8_decode("\xE4\xBD", 2, &cp), 1, "truncated sequence");
    TAP_OK(utf8_valid("h\xC3\xA9llo", 6), "valid string");
    TAP_OK(!utf8_valid("h\xC3llo", 5), "invalid string");
    {
        size_t n = 0;
        TAP_OK(utf8_for_wire("h\xC3\xA9 \xEF\xBF\xBD ok", 10, &n) == NULL,
               "for the wire: valid text (a U+FFFD in it too) needs no copy");
        char *w = utf8_for_wire("a\xFF\x00" "b\xE4\xB8", 6, &n);
        TAP_OK(w && n == 14 && memcmp(w, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD", 14) == 0,
               "for the wire: an invalid byte, a NUL and a cut sequence become U+FFFD each");
        free(w);
    }

    TAP_INT(utf8_incomplete_tail("ab\xE4\xBD", 4), 2, "tail: 2 of 3 bytes");
    TAP_INT(utf8_incomplete_tail("ab\xE4\xBD\xA0", 5), 0, "tail: complete");
    TAP_INT(utf8_incomplete_tail("ab\xF0", 3), 1, "tail: lone 4-byte lead");
    TAP_INT(utf8_incomplete_tail("ab", 2), 0, "tail: ascii");

    char out[4];
    TAP_INT(utf8_encode(0x1F60A, out), 4, "encode emoji");
    TAP_OK(memcmp(out, "\xF0\x9F\x98\x8A", 4) == 0, "encode emoji bytes");

    check_sanitize("plain text\n\tok", 14, "plain text\n\tok", "sanitize keeps text, LF, TAB");
    check_sanitize("\x1b]52;c;SGVsbG8=\x07", 16, "^[]52;c;SGVsbG8=^G", "OSC 52 neutralised");
    check_sanitize("\x1b]0;pwned\x1b\\", 11, "^[]0;pwned^[\\", "OSC 0 title neutralised");
    check_sanitize("\x1b[2J\x1b[6n\x1b" "c", 10, "^[[2J^[[6n^[c", "CSI and RIS neutralised");
    check_sanitize("\xC2\x9B" "2J", 4, "<U+009B>2J", "8-bit CSI neutralised");
    check_sanitize("\xC2\x9D" "0;t\xC2\x9C", 7, "<U+009D>0;t<U+009C>", "8-bit OSC/ST neutralised");
    check_sanitize("a\r\nb\rc", 6, "a\nb^Mc", "CRLF kept as LF, lone CR visible");
    check_sanitize("x\x7fy", 3, "x^?y", "DEL visible");
    check_sanitize("\xE4\xB8\xAD\xE3\x81\x82\xEC\x9E\x90\xE4\xB8", 11,
                   "\xE4\xB8\xAD\xE3\x81\x82\xEC\x9E\x90\xEF\xBF\xBD\xEF\xBF\xBD",
                   "CJK kept, a cut CJK sequence -> U+FFFD per byte");
    check_sanitize("\xE3\x81\xE3\x81\x82", 5, "\xEF\xBF\xBD\xEF\xBF\xBD\xE3\x81\x82",
                   "a CJK lead with one continuation byte -> U+FFFD per byte");
    check_sanitize("bad\xFF\xFEz", 6, "bad\xEF\xBF\xBD\xEF\xBF\xBDz", "invalid bytes replaced");
    check_sanitize("\xE4\xBD\xA0\xE5\xA5\xBD", 6, "\xE4\xBD\xA0\xE5\xA5\xBD", "CJK kept");
    check_sanitize("a\0b", 3, "a^@b", "NUL visible");

    /* bidi controls are shown, not obeyed (the Trojan Source reordering) */
    check_sanitize("a\xE2\x80\xAE" "cba", 7, "a<U+202E>cba", "RLO U+202E visible");
    check_sanitize("\xE2\x80\xAA\xE2\x80\xAB\xE2\x80\xAC\xE2\x80\xAD", 12,
                   "<U+202A><U+202B><U+202C><U+202D>", "LRE RLE PDF LRO visible");
    check_sanitize("\xE2\x81\xA6\xE2\x81\xA7\xE2\x81\xA8\xE2\x81\xA9", 12,
                   "<U+2066><U+2067><U+2068><U+2069>", "isolates U+2066..U+2069 visible");
    check_sanitize("\xE2\x80\x8E\xE2\x80\x8F\xD8\x9C", 8, "<U+200E><U+200F><U+061C>",
                   "LRM RLM ALM visible");
    check_sanitize("\xE2\x80\x8D\xE2\x80\xAF\xE2\x81\xA5\xE2\x81\xAA\xD8\x9B", 14,
                   "\xE2\x80\x8D\xE2\x80\xAF\xE2\x81\xA5\xE2\x81\xAA\xD8\x9B",
                   "neighbours of the bidi controls (ZWJ, U+202F, U+2065, U+206A, U+061B) kept");
    check_sanitize("\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85", 17,
                   "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85",
                   "Hebrew and Arabic letters kept");

    /* pieces that keep sequences and CRLF whole */
    TAP_INT(utf8_cut("abcdef", 6, 4), 4, "cut: ASCII at the limit");
    TAP_INT(utf8_cut("abc", 3, 8), 3, "cut: all of a short text");
    TAP_INT(utf8_cut("ab\xE4\xBD\xA0", 5, 3), 2, "cut: not inside a 3-byte sequence");
    TAP_INT(utf8_cut("ab\xE4\xBD\xA0", 5, 4), 2, "cut: not before its last byte");
    TAP_INT(utf8_cut("ab\xE4\xBD\xA0x", 6, 5), 5, "cut: after a whole sequence");
    TAP_INT(utf8_cut("ab\r\nc", 5, 3), 2, "cut: not between CR and LF");
    TAP_INT(utf8_cut("ab\r\rc", 5, 3), 3, "cut: after a lone CR");
    TAP_OK(utf8_cut("\x80\x80\x80\x80\x80", 5, 2) - 1 < 4, "cut: stray continuation bytes");
    TAP_INT(utf8_cut("\xE4\xBD\xA0x", 4, 1), 3, "cut: a sequence longer than max is whole");
    TAP_INT(utf8_cut("\r\nx", 3, 1), 2, "cut: so is a CRLF");
    TAP_INT(utf8_cut("xyz", 3, 0), 1, "cut: max 0 still makes progress");
    {
        /* sanitising piece by piece gives the same text as at once */
        const char *t = "a\r\nb\xC2\x9B\xE2\x80\xAE\xE4\xBD\xA0\r\n\x1b[2J\xFF\xF0\x9F\x98\x8A\r";
        size_t n = strlen(t);
        struct buf whole = BUF_INIT;
        utf8_sanitize(&whole, t, n);
        int same = 1;
        for (size_t max = 1; max <= n; max++) {
            struct buf parts = BUF_INIT;
            for (size_t at = 0; at < n;) {
                size_t k = utf8_cut(t + at, n - at, max);
                utf8_sanitize(&parts, t + at, k);
                at += k;
            }
            same &= strcmp(buf_str(&parts), buf_str(&whole)) == 0;
            buf_free(&parts);
        }
        TAP_OK(same, "sanitising utf8_cut pieces of every size = sanitising the whole");
        buf_free(&whole);
    }

    /* JSON for a terminal: the same JSON value, no byte that can drive a terminal */
    check_json("{\"a\":\"x\xC2\x9B" "2J\"}", "{\"a\":\"x\\u009b2J\"}", "JSON: raw C1 CSI escaped");
    check_json("[\"\xC2\x80\xC2\x9F\x7F\"]", "[\"\\u0080\\u009f\\u007f\"]",
               "JSON: C1 range ends and DEL escaped");
    check_json("\"a\xE2\x80\xAE" "b\xE2\x81\xA6\xE2\x80\x8F\xD8\x9C\"",
               "\"a\\u202eb\\u2066\\u200f\\u061c\"", "JSON: bidi controls escaped");
    check_json("{\n\t\"k\":\t\"\\u001b[2J \xE4\xBD\xA0 \xF0\x9F\x98\x8A\"\n}",
               "{\n\t\"k\":\t\"\\u001b[2J \xE4\xBD\xA0 \xF0\x9F\x98\x8A\"\n}",
               "JSON: layout, escapes already there, CJK and emoji kept byte for byte");
    check_json("\"bad\x9B\xFF\"", "\"bad\\ufffd\\ufffd\"", "JSON: raw 8-bit bytes become \\ufffd");
    check_json("\"\x1b]0;t\x07\"", "\"\\u001b]0;t\\u0007\"", "JSON: raw C0 (never from cJSON) escaped");
    return tap_done();
}
