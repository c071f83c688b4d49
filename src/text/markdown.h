/* markdown.h - a streaming Markdown styler: chunks of text in, styled logical lines out.
 *
 * Input may be split anywhere (inside a UTF-8 sequence, inside `**`). A line is styled when its
 * '\n' arrives (or at markdown_finish) and never again: the cost of a chunk is its own size;
 * markdown_pending_*() re-examines only the unfinished last line (plus the rows of a table
 * still being received). The finished lines never depend on how the input was split.
 *
 * Output lines are display text, not the source (but TABLE lines, below): every line is
 * sanitised (wrap_clean: control characters made visible, TAB expanded to 4 columns) and
 * markup is rendered like this:
 *   - **strong**, *em*, _em_, ***both***: markers hidden; text in the bold / italic /
 *     bold-italic slot, or, inside a heading, quote or link, that slot plus ATTR_BOLD/ITALIC.
 *     Emphasis follows CommonMark's delimiter rules but does not span lines.
 *   - `code`: backticks hidden, content in the code slot. Backslash escapes (\*) drop the
 *     backslash.
 *   - # headings: the #s stay visible in the dim slot ("## " then the text in heading).
 *     Setext headings (text underlined with === or ---) are not recognised: --- is a rule.
 *   - ``` / ~~~ fences: the opening fence becomes a CODE_LABEL line whose text is the language
 *     ("" when none); each content line is a CODE line, verbatim, WRAP_PRE; the closing fence
 *     produces no line. A fence still open at the end stays code. When the info string names
 *     a language highlight.h knows, each code line is highlighted once, when it is finished
 *     (code-keyword, code-string, ... slots; a block comment or string left open is carried
 *     to the next line); other code is in the code slot.
 *   - lists (-, *, + or 1. / 1)): nesting from indentation (any consistent step), re-indented
 *     to 2 columns per level; bullets become U+2022 / U+25E6 / U+25AA by depth, numbers stay as
 *     written; both in the list-marker slot. Continuation rows hang under the item text.
 *     Indented lines after an item continue it. Indented code blocks are not recognised.
 *   - > quotes: each level becomes "│ " in the quote slot; text in the quote slot.
 *   - ---, ***, ___: a RULE line (WRAP_RULE: wrap_doc draws it across the width).
 *   - tables (a row with |, then a delimiter row like |---|:-:|): rows are held back while the
 *     table grows (shown raw by markdown_pending_*, kind TABLE_RAW) and emitted when the first
 *     non-table line or the end arrives, one TABLE line a row (the delimiter row too), each an
 *     encoded row with WRAP_TABLE (text/table.h: not display text) that wrap_doc lays out at
 *     its width: box-drawing borders, columns shrunk to fit, cells wrapped, or records when
 *     too narrow. Column widths are measured on all rows; a table longer than 256 rows is
 *     measured on its first 256 and later rows flow with those measures. Cells beyond the
 *     header's count are dropped, missing cells are empty.
 *   - [text](url): text in the link slot then " (url)" in the dim slot (only the text when it
 *     equals the url); ![alt](url) shows "image: alt (url)"; <https://...> and bare
 *     http(s):// URLs are links.
 *   - A soft line break inside a paragraph stays a line break (no joining of source lines).
 * Text without markup uses the base slot given to markdown_new(). */
#ifndef TT_MARKDOWN_H
#define TT_MARKDOWN_H
#include <stddef.h>
#include <stdint.h>

#include "text/theme.h"
#include "text/wrap.h"

enum markdown_kind {
    MARKDOWN_TEXT,       /* paragraph text */
    MARKDOWN_BLANK,      /* an empty line */
    MARKDOWN_HEADING,    /* level = 1..6 */
    MARKDOWN_CODE,       /* a line of a fenced code block (verbatim, WRAP_PRE) */
    MARKDOWN_CODE_LABEL, /* the opening fence: text = the language, "" when none */
    MARKDOWN_LIST,       /* a list item or its continuation; level = depth (0 = outermost) */
    MARKDOWN_QUOTE,      /* block quote; level = depth (1 = "> ") */
    MARKDOWN_RULE,       /* horizontal rule (WRAP_RULE) */
    MARKDOWN_TABLE,      /* a table row or the delimiter row, encoded (WRAP_TABLE, table.h) */
    MARKDOWN_TABLE_RAW   /* a row of a table still growing, shown as typed (pending only) */
};

/* A styled logical line. wl.text has no '\n'; wl.spans cover it completely; wl.tag is
 * kind | level << 8, so the curses layer can tell code rows (paint the background to the
 * right edge) or quote rows (draw the bar in the hanging indent) from a wrap_view. */
struct markdown_line {
    struct wrap_line wl;
    uint8_t kind;  /* enum markdown_kind */
    uint8_t level;
    const struct wrap_hl *hl; /* markdown_highlight_when_drawn: how to highlight it, or NULL */
};

struct markdown;

/* A new styler; plain text gets `base_slot` (THEME_ASSISTANT, THEME_REASONING, ...). */
struct markdown *markdown_new(int base_slot);

void markdown_free(struct markdown *md);

/* Highlight the code of fenced blocks whose info string names a known language (text/
 * highlight.h): on (1) by default; 0 keeps every code line in the code slot. Set it before
 * the first feed. */
void markdown_set_highlight(struct markdown *md, int on);

/* For a styler whose finished lines go to a wrap_doc: the lines of a highlighted block are not
 * highlighted when they are finished but when wrap_doc first draws one of their rows (their
 * markdown_line.hl says how: push them with wrap_doc_push_hl; their wl alone shows the code in
 * THEME_CODE). What a line leaves open for the next one is still followed line by line
 * (hl_scan), so a line drawn later has the colours it would have had at once, and the lines
 * never drawn cost a few instructions a byte. Previews of the unfinished line stay highlighted
 * at once. Set it before the first feed. */
void markdown_highlight_when_drawn(struct markdown *md);

/* Append a chunk of source text. Ignored after markdown_finish. */
void markdown_feed(struct markdown *md, const char *s, size_t n);

/* End of input: the unfinished line (if any) is styled, a held table is emitted aligned, an
 * unclosed code fence stays code. A final '\n' does not add an empty line. */
void markdown_finish(struct markdown *md);

/* Number of finished lines (grows with markdown_feed; lines never change once counted). */
size_t markdown_count(const struct markdown *md);

/* Finished line i (< markdown_count), or NULL when out of range. Owned by md; the pointer and
 * everything it points to stay valid (and unchanged) until markdown_free. */
const struct markdown_line *markdown_line(const struct markdown *md, size_t i);

/* Forget the unfinished source line (the caller shows that line itself: one too long to
 * style). A table being received ends first: its rows become finished lines. */
void markdown_skip_line(struct markdown *md);

/* Free the finished lines before upto (the caller has copied them): markdown_line() is NULL for
 * them afterwards, markdown_count() does not change. A streamed answer then costs the styler
 * only its unfinished line, not a second copy of the document. */
void markdown_release(struct markdown *md, size_t upto);

/* Number of provisional lines after the finished ones: rows of a table still being received
 * and the unfinished last line. Recomputed lazily after a feed. */
size_t markdown_pending_count(struct markdown *md);

/* Provisional line i (< markdown_pending_count), owned by md, valid until the next feed. */
const struct markdown_line *markdown_pending_line(struct markdown *md, size_t i);

/* Where a new styler may take over from md, which is to be fed s[0..n) next: the start L of
 * the last line of s such that markdown_new() fed s[L..) gives exactly the lines md would give
 * after s[0..L) (L begins a line in column 0 after a blank line, outside a code fence, so no
 * block state crosses it), with at least min_lines finished lines from L on and no line before
 * L longer than max_line bytes (md's unfinished line counted in); 0 when there is none. After
 * s[0..L), md holds no unfinished line and no table. The scan looks at the first bytes of
 * each line (a line that could be a fence is cleaned and checked as process_line would): the
 * chat styles a large batch's last screenful first and the text before it later. */
size_t markdown_restart(struct markdown *md, const char *s, size_t n, size_t min_lines,
                        size_t max_line);

struct buf;
/* Writing, not styling: text[0..len) as a fenced code block for a Markdown reader (a model's
 * prompt): a fence of backticks one longer than text's longest run of them (3 at least), info
 * after the opening one (a language, or ""), the text (through put when not NULL, e.g. to
 * sanitise it), a newline unless it ends with one, the closing fence and a newline. */
void markdown_code_block(struct buf *out, const char *info, const char *text, size_t len,
                         void (*put)(struct buf *out, const char *s, size_t n));

/* Writing: the code fence a CommonMark reader still has open after text[0..len) (a line
 * indented at most 3 spaces that opens ``` or ~~~, and no later one that closes it): its length,
 * its character in *ch; 0 when every fence is closed. A message that ends inside one (an answer
 * cut off in a code block) would make the rest of a Markdown export code: the export closes it
 * (tokterm export, show). Only top-level fences: one in a list item or a quote ends with it. */
size_t markdown_open_fence(const char *text, size_t len, char *ch);

/* Tests only: nonzero makes the inline scanners step through plain text byte by byte (the
 * reference that test_markdown compares the run-skipping scanners with). */
extern int markdown_bytewise;

#endif
