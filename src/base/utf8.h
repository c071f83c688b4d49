/* utf8.h - UTF-8 decoding and terminal-safe sanitising (no curses, no I/O). */
#ifndef TT_UTF8_H
#define TT_UTF8_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define UTF8_REPLACEMENT 0xFFFDu

/* Decode one code point from s[0..n). Returns the bytes consumed (>= 1 when n > 0, 0 when
 * n == 0). An invalid or overlong sequence, a surrogate or a truncated sequence consumes one
 * byte and yields U+FFFD in *cp. */
size_t utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Encode cp into out (at least 4 bytes); returns the length (1..4). */
size_t utf8_encode(uint32_t cp, char *out);

/* 1 when s[0..n) is entirely valid UTF-8. */
int utf8_valid(const char *s, size_t n);

/* Bytes at the end of s[0..n) that begin a valid but unfinished sequence (0..3): hold them
 * back and prepend them to the next chunk when text arrives in pieces. */
size_t utf8_incomplete_tail(const char *s, size_t n);

/* Append s[0..n) to out so that no byte of it can drive a terminal:
 * C0 controls except TAB and LF become caret notation (ESC -> "^["), DEL -> "^?", a CR of a
 * CRLF pair is dropped (a lone CR -> "^M"), C1 controls (U+0080..U+009F) become "<U+009B>",
 * bidi controls (utf8_bidi_control) become "<U+202E>" (shown, not obeyed: they would reorder
 * the rest of the line), invalid UTF-8 bytes become U+FFFD. Everything else is copied as is. */
void utf8_sanitize(struct buf *out, const char *s, size_t n);

/* s[0..n) as text a JSON string can carry to a server: NULL when it is that already (valid
 * UTF-8 without a NUL byte), else a copy (malloc'd, NUL-terminated, its length in *out_len)
 * in which every invalid byte and every NUL is U+FFFD. An answer a hostile or broken server
 * sent with such bytes is kept as it came; sent back in the history as it is, the request
 * body was not UTF-8 (a real API refuses it with a 400 on every later turn) and a NUL cut the
 * message short. */
char *utf8_for_wire(const char *s, size_t n, size_t *out_len);

/* The length of a first piece of s[0..n) of at most max bytes that splits no UTF-8 sequence
 * and no CRLF pair, so that text sanitised piece by piece comes out as it would whole (and
 * memory stays bounded by the piece). Never 0 when n > 0: a sequence or CRLF at the start
 * longer than max is taken whole (at most 4 bytes). */
size_t utf8_cut(const char *s, size_t n, size_t max);

/* 1 for the bidi controls that reorder displayed text: the embeddings and overrides
 * U+202A..U+202E, the isolates U+2066..U+2069, the marks U+200E, U+200F and U+061C. */
int utf8_bidi_control(uint32_t cp);

/* Append JSON text s[0..n) to out for a terminal: the same JSON value, but no character in it
 * that a terminal obeys or that reorders what it shows. C0 controls but TAB and LF (cJSON
 * escapes them in strings already), DEL, C1 controls and bidi controls become \uXXXX escapes;
 * an invalid UTF-8 byte (a raw 8-bit C1 byte among them) becomes \ufffd. Valid JSON stays
 * valid and decodes to the same string (but for the invalid bytes). */
void utf8_json_terminal(struct buf *out, const char *s, size_t n);

#endif
