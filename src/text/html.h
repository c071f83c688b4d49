/* html.h - readable text from an HTML page (for URL attachments), through libxml2's HTML
 * parser (a real parser: implied and unclosed tags, entities, encodings, broken markup).
 *
 * The text is Markdown-like, for a model to read: the title first ("Title: ..."), headings as
 * "#" lines, paragraphs separated by a blank line, lists as "- " / "1. " items indented by
 * nesting, links as [text](href), <pre> as fenced blocks (the language from a "language-x" or
 * "lang-x" class), inline <code> in backticks, tables as "| a | b |" rows with a separator
 * after the first, block quotes as "> ". Left out: script, style, noscript, template, nav,
 * aside, footer, forms, svg, canvas, iframes and anything hidden (the hidden attribute,
 * aria-hidden="true", style display:none). Whitespace outside <pre> is collapsed.
 *
 * Hostile input is bounded: the tree is walked without recursion, structure deeper than
 * HTML_DEPTH_MAX levels is kept as plain text, a line's indentation is capped, the output
 * stops at max_out bytes, and the text is valid UTF-8 with no control character but TAB
 * and LF. */
#ifndef TT_HTML_H
#define TT_HTML_H
#include <stddef.h>

#include "base/buf.h"

#define HTML_DEPTH_MAX 200

/* Append the text of html[0..n) to out (at most max_out bytes, 0 for no limit). encoding: the
 * charset a Content-Type named, or NULL (then the page's <meta> or UTF-8). Returns 0, 1 when
 * the text was cut at max_out, or -1 with *why (static) when libxml2 cannot be loaded or
 * parses nothing. */
int html_to_text(const char *html, size_t n, const char *encoding, size_t max_out,
                 struct buf *out, const char **why);

#endif
