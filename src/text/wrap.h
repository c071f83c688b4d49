/* wrap.h - display width per grapheme cluster and wrapping styled text into rows (no curses).
 *
 * Width model (what the curses layer must draw to stay in step):
 *   - Text is measured per extended grapheme cluster (utf8proc's segmentation, Unicode 15).
 *   - An emoji cluster is 2 columns: a pictographic base followed by VS16 (U+FE0F), a skin tone
 *     modifier or a ZWJ sequence (family, rainbow flag), a pair of regional indicators (a flag),
 *     or a keycap `1️⃣`. VS15 (U+FE0E) after a pictographic base forces 1 column.
 *   - Any other cluster is the sum of its code points' widths, so a combining mark (e + U+0301)
 *     adds 0 and a spacing mark (Devanagari vowel sign) adds 1, as wcwidth() does.
 *   - A cluster that would be 0 wide but starts with a combining mark (a mark with no base) is
 *     1 column (curses draws it on a space). Format characters such as U+200B are 0 wide.
 *   - An invalid UTF-8 byte is a cluster of its own, 1 column (draw it as U+FFFD).
 *   - Control characters are 0 wide here: sanitise text first (wrap_clean, utf8_sanitize).
 *
 * Per-code-point overrides where terminals (glibc wcwidth, xterm, VTE, kitty) disagree with
 * utf8proc_charwidth():
 *   - Hangul Jamo medial vowels and final consonants (U+1160..U+11FF, U+D7B0..U+D7FF):
 *     utf8proc says 1, terminals 0 (they join the leading consonant into one 2-column syllable).
 *   - Spacing combining marks (category Mc, e.g. U+093F): utf8proc says 0, terminals 1.
 *   - East Asian Ambiguous characters are 1 column (terminals in "CJK width" mode differ).
 *
 * Wrapping: rows break after spaces (the spaces at a break are dropped), between two CJK
 * (wide, non-emoji) clusters, and otherwise mid-word at a cluster boundary when a word does not
 * fit. A wide cluster is never split; a cluster wider than the row sits alone on its row (the
 * only case where a row is wider than the width), so wrapping always makes progress.
 * Preformatted lines (code, tables) are not reflowed: spaces are kept and rows are cut at the
 * width. A hanging indent `hang` shifts continuation rows right; it is dropped when it would
 * leave less than half the width. */
#ifndef TT_WRAP_H
#define TT_WRAP_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "text/highlight.h"
#include "text/theme.h"

/* wrap_line.flags */
#define WRAP_PRE 0x01u  /* preformatted: no reflow, cut rows at the width */
#define WRAP_RULE 0x02u /* a horizontal rule: one row of U+2500 as wide as the width */
#define WRAP_TABLE 0x04u /* an encoded table row (text/table.h): wrap_doc lays it out at its
                          * width (rows of other text than the line's; maybe none at all) */

/* A code line highlighted when it is first drawn (wrap_doc_row), not when it is pushed
 * (wrap_doc_push_hl): bytes [at, len) of the line are code in `lang`, and the line before left
 * `st` open. The line's own spans show those bytes as plain code (THEME_CODE) until then; the
 * spans of the bytes before `at` are kept. markdown_highlight_when_drawn makes such lines. */
struct wrap_hl {
    const struct hl_lang *lang;
    struct hl_state st;
    uint32_t at;
};

/* One logical line (no '\n' inside) with its styles, as markdown produces them. */
struct wrap_line {
    const char *text;
    size_t len;
    const struct theme_span *spans; /* sorted, non-overlapping; gaps get `slot` */
    size_t nspans;
    uint16_t slot;  /* enum theme_slot for bytes no span covers */
    uint16_t hang;  /* columns of indent for continuation rows */
    uint16_t flags; /* WRAP_* */
    uint16_t tag;   /* caller's data, returned with each row (markdown: kind | level << 8) */
};

/* One display row: bytes [off, off + len) of the text given to wrap_text, drawn after
 * `indent` blank columns. */
struct wrap_row {
    uint32_t off;
    uint32_t len;
    uint32_t width;  /* display columns of the bytes */
    uint32_t indent; /* blank columns before them (the hanging indent of continuation rows) */
};

/* A growable array of rows. */
struct wrap_rows {
    struct wrap_row *v;
    size_t n, cap;
};

/* Measure the grapheme cluster at the start of s[0..n): returns its length in bytes (>= 1 when
 * n > 0, 0 when n == 0) and stores its display width in *width (may be NULL). */
size_t wrap_cluster(const char *s, size_t n, int *width);

/* Display width of one code point after the override table (0, 1 or 2; controls are 0). */
int wrap_cp_width(uint32_t cp);

/* Display width of s[0..n), cluster by cluster. */
size_t wrap_width(const char *s, size_t n);

/* Length in bytes of the longest prefix of s[0..n) that fits in `cols` columns, never cutting a
 * cluster; its width goes to *used (may be NULL). */
size_t wrap_fit(const char *s, size_t n, size_t cols, size_t *used);

/* 1 when at most one cluster of s[0..n) has a non-zero width. */
int wrap_one_visible(const char *s, size_t n);

/* Append s[0..n) to out made safe and measurable: utf8_sanitize (controls become visible
 * caret notation, invalid bytes U+FFFD), then TAB expanded to spaces up to the next multiple of
 * 4 columns (counted from the start of s or from the last '\n'). */
void wrap_clean(struct buf *out, const char *s, size_t n);

/* Wrap s[0..n) into rows of at most `width` columns and append them to out. A '\n' is a hard
 * break (its byte belongs to no row); every line yields at least one row, so "" gives one empty
 * row and "a\n" two. flags: WRAP_PRE. width < 1 counts as 1. A row is wider than its room only
 * when wrap_one_visible holds for it: a cluster wider than the row, alone but for zero-width
 * clusters beside it (at width 1, a lone ZWJ then U+1F469: no blank row for the ZWJ). */
void wrap_text(struct wrap_rows *out, const char *s, size_t n, int width, int hang,
               unsigned flags);

/* Release the rows' memory. */
void wrap_rows_free(struct wrap_rows *rows);

/* ---- wrap_doc: the rows of a growing document, rewrapped only at its tail ----
 *
 * A document is a list of finished lines (each wrapped once when pushed and cached; rewrapped
 * only when the width changes) followed by pending lines (the unfinished tail: replaced as a
 * whole after every append). Streaming use with markdown:
 *
 *     markdown_feed(md, chunk, n);
 *     while (done < markdown_count(md))              // lines finished by this chunk
 *         wrap_doc_push(doc, &markdown_line(md, done++)->wl);
 *     wrap_doc_pending_clear(doc);
 *     for (i = 0; i < markdown_pending_count(md); i++)
 *         wrap_doc_pending_add(doc, &markdown_pending_line(md, i)->wl);
 *
 * or, for plain text, wrap_doc_append_text(). The cost of an append is the size of the new text
 * plus the size of the unfinished line, not of the document. Lines are copied: the caller's
 * buffers may change afterwards. */
struct wrap_doc;

/* A row ready to draw. text points into the document and stays valid until the next change
 * to it; spans (cut from the line's spans when the row is asked for) stay valid until the next
 * wrap_doc_row() on the document. Span offsets are relative to `text` and the spans cover it
 * completely. */
struct wrap_view {
    const char *text;
    size_t len;
    int width;  /* display columns of text */
    int indent; /* blank columns to draw first */
    const struct theme_span *spans;
    size_t nspans;
    size_t line;   /* index of its logical line: finished lines first, then pending ones */
    uint16_t tag;  /* the line's tag */
    uint16_t flags; /* the line's WRAP_* flags */
    int first;     /* 1 on the first row of its line */
};

/* A new empty document wrapped at `width` columns (free with wrap_doc_free). */
struct wrap_doc *wrap_doc_new(int width);

void wrap_doc_free(struct wrap_doc *d);

/* Rewrap every line for a new width (cost: the whole document). */
void wrap_doc_set_width(struct wrap_doc *d, int width);

int wrap_doc_width(const struct wrap_doc *d);

/* Append a finished line (copied) and wrap it once. */
void wrap_doc_push(struct wrap_doc *d, const struct wrap_line *line);

/* The same for a line highlighted when one of its rows is first asked for (hl copied; NULL:
 * wrap_doc_push). */
void wrap_doc_push_hl(struct wrap_doc *d, const struct wrap_line *line, const struct wrap_hl *hl);

/* wrap_doc_push for a line whose text (line->text, malloc'd) the document takes over instead of
 * copying it (a huge line is not held twice). */
void wrap_doc_push_take(struct wrap_doc *d, const struct wrap_line *line, char *text);

/* Drop the pending lines. */
void wrap_doc_pending_clear(struct wrap_doc *d);

/* Append a pending line (copied) after the other pending lines and wrap it. */
void wrap_doc_pending_add(struct wrap_doc *d, const struct wrap_line *line);

/* Plain-text streaming: append raw bytes (split anywhere, even inside a UTF-8 sequence) drawn
 * with `slot`. Each completed line is cleaned (wrap_clean) and pushed; the unfinished last line
 * becomes the only pending line. Don't mix with wrap_doc_pending_* on the same document. */
void wrap_doc_append_text(struct wrap_doc *d, const char *s, size_t n, int slot,
                          unsigned flags);

/* Move every line of src (finished, then pending) to the end of d, whose pending lines are
 * dropped: d then reads as if they had been pushed into it, at d's width. Their records move
 * (indexes shifted, text blocks handed over), nothing is restyled or, at the same width,
 * rewrapped; src is left empty. The chat joins the rows of an answer's last screenful, styled
 * first, to the text before it once that is styled. */
void wrap_doc_splice(struct wrap_doc *d, struct wrap_doc *src);

/* Finished lines so far. */
size_t wrap_doc_lines(const struct wrap_doc *d);

/* Rows of the whole document, pending lines included. */
size_t wrap_doc_rows(const struct wrap_doc *d);

/* Row i (0 = top) into *v. Returns 0, or -1 when i >= wrap_doc_rows(). O(log lines). */
int wrap_doc_row(const struct wrap_doc *d, size_t i, struct wrap_view *v);

/* How many of the lines pushed with a wrap_hl have been highlighted (one of their rows asked
 * for) so far: the rest cost nothing but their push. */
size_t wrap_doc_highlighted(const struct wrap_doc *d);

/* Tests only: nonzero turns off wrap_text's inline loop for ASCII and CJK (the reference, one
 * cluster at a time, that test_wrap compares it with). */
extern int wrap_bytewise;

#endif
