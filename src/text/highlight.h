/* highlight.h - syntax highlighting of code lines, one line at a time, for a streaming styler.
 *
 * A small table-driven highlighter: each language is one row of a table (keywords, types,
 * constants, builtins, comment and string delimiters, a few flags; diff, HTML/XML and Markdown
 * have their own line scanners). A line is highlighted once, when it is finished: what a line
 * leaves open for the next one (a block comment, a multi-line string, an HTML tag) is carried
 * in a small struct hl_state, so no line is ever looked at twice and a line's spans never
 * depend on how the text arrived. The cost is one pass over the bytes of the line with a
 * 256-entry action table and one hash probe per identifier.
 *
 * Languages (fence info string, case-insensitive, its first word; aliases in brackets):
 *   c [h], cpp [c++ cc cxx hpp hh h++ cuda], csharp [c# cs], java, kotlin [kt kts], swift,
 *   go [golang], rust [rs], javascript [js jsx mjs cjs node], typescript [ts tsx],
 *   python [py py3 python3 gyp], ruby [rb], php, lua, shell [sh bash zsh ksh shell-session
 *   console fish], sql [mysql postgresql postgres psql sqlite plsql], json [jsonc json5
 *   geojson], yaml [yml], toml, ini [cfg conf editorconfig properties], html [htm xhtml vue
 *   svelte], xml [svg xsd xsl plist], css [scss less sass], markdown [md mkd], diff [patch udiff],
 *   dockerfile [docker containerfile], makefile [make mk mak gnumake].
 * Anything else is plain code (hl_lang_find returns NULL). The system's nano syntax files are
 * not read: the same fence would render differently from machine to machine, and their
 * regular expressions cost far more per line than this table (see docs/ARCHITECTURE.md). */
#ifndef TT_HIGHLIGHT_H
#define TT_HIGHLIGHT_H
#include <stddef.h>
#include <stdint.h>

#include "text/theme.h"

struct hl_lang; /* a row of the language table (static) */
struct hl;      /* a language's compiled keyword table */

/* What one line leaves open for the next. Zero (HL_STATE_INIT) at the start of a block, and
 * exactly that again after a line that leaves nothing open (hl_line and hl_scan clear what a
 * closed string or comment left): a state equal to HL_STATE_INIT means "inside nothing", which
 * wrap.c relies on to keep only the lines that start inside something. */
struct hl_state {
    uint8_t mode;  /* inside nothing, a block comment, a string, an HTML tag */
    uint8_t depth; /* nesting of block comments (Rust, Swift, Kotlin) */
    uint8_t esc;   /* backslash escapes inside the string */
    uint8_t nclose;
    char close[12]; /* what ends the comment or string */
};
#define HL_STATE_INIT {0, 0, 0, 0, {0}}

/* Spans of one line, reused from line to line (hl_line resets n). */
struct hl_spans {
    struct theme_span *v;
    size_t n, cap;
};

/* The language of a fence's info string s[0..n) (its first word is used), or NULL when it
 * names no known language (plain code). */
const struct hl_lang *hl_lang_find(const char *s, size_t n);

/* The language's canonical name ("python"). */
const char *hl_lang_name(const struct hl_lang *l);

/* Number of languages, and language i (for lists and tests). */
size_t hl_lang_count(void);
const struct hl_lang *hl_lang_at(size_t i);

/* Compile a language's tables (a few microseconds); free with hl_free. */
struct hl *hl_new(const struct hl_lang *l);
const struct hl_lang *hl_of(const struct hl *h);
void hl_free(struct hl *h);

/* Highlight one line s[0..n) (display text without its '\n'): out gets spans sorted, not
 * overlapping and covering [0, n) exactly (code text that is no token gets THEME_CODE); *st
 * is what the previous line left and becomes what this one leaves. Spans start and end only
 * at ASCII bytes or the ends of the line, so they never cut a UTF-8 sequence. */
void hl_line(const struct hl *h, struct hl_state *st, const char *s, size_t n,
             struct hl_spans *out);

/* What hl_line would leave in *st after the line s[0..n), without its spans: the state the
 * next line starts in, for a line that is highlighted later (hl_line from the state it started
 * in gives the spans hl_line would have given then). The same scan without the words' lookups
 * and the spans; a line of generic code that holds no byte able to open a comment or a string
 * is passed over in one loop. */
void hl_scan(const struct hl *h, struct hl_state *st, const char *s, size_t n);

void hl_spans_free(struct hl_spans *o);

#endif
