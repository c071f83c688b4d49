/* ansi.h - Markdown rendered for a terminal without curses: markdown.c's styled lines wrapped
 * (wrap.c) and coloured with SGR escape sequences from a theme's resolved slots.
 *
 * Scripted mode (`-p` with --render, cmd/script.c) streams an answer through ansi_md: a line
 * is written when markdown finishes it (a table when it ends), the unfinished tail when the
 * answer ends; on a terminal (ansi_md_live) a line still arriving after 0.1 s is drawn as it
 * grows and erased row by row when its finished rows take its place. What the chat draws with curses, this draws with escapes:
 *   - every span in its slot's style plus the span's own attribute bits (every THEME_ATTR_*
 *     bit has an SGR code in ansi.c's table); colours as theme_resolve() gives them for the
 *     terminal's colour count, none with NO_COLOR (attributes only);
 *   - the theme's `default` background is the terminal's own (the chat paints the whole
 *     window with it; a stream cannot), so a slot with that background gets none;
 *   - continuation rows of a quote repeat its bars, code rows are padded to the width in the
 *     code style when that style has a background, a rule is a row of U+2500 as wide as the
 *     width, a table row is laid out at the width (text/table.h, as the chat's wrap_doc does);
 *   - every row ends with SGR 0 (when it set anything) and '\n'.
 * The text was made safe by markdown (wrap_clean): the only escapes written are ours. A source
 * line longer than ANSI_LONG_LINE is not styled (styling costs ~16x its size): it is written
 * as it arrives, sanitised, and styling resumes after its newline. */
#ifndef TT_ANSI_H
#define TT_ANSI_H
#include <stddef.h>

#include "base/buf.h"
#include "text/markdown.h"
#include "text/theme.h"

#define ANSI_LONG_LINE ((size_t)1 << 20)

/* The colours a terminal shows, from $TERM and $COLORTERM (either may be NULL): 256 for
 * "*256color*" or a COLORTERM of truecolor/24bit, 0 for "dumb" or no TERM (no escapes at all),
 * else 8. */
int ansi_colors(const char *term, const char *colorterm);

/* Resolve theme t for a terminal of ncolors colours (no_color: NO_COLOR is set) into
 * out[THEME_SLOT_COUNT], the `default` slot's background dropped (see above). ncolors 0
 * with !no_color means no escapes at all: every style is plain. */
void ansi_styles(const struct theme *t, int ncolors, int no_color, struct theme_style *out);

/* Append the rows of styled line ml wrapped at width columns to out, each ended by '\n'. */
void ansi_line(struct buf *out, const struct markdown_line *ml, const struct theme_style *st,
               int width);

/* A streamed answer: text in (split anywhere), finished rows out. */
struct ansi_md;

/* st (THEME_SLOT_COUNT styles) is copied; base_slot as for markdown_new. */
struct ansi_md *ansi_md_new(const struct theme_style *st, int width, int base_slot);

/* Highlight fenced code blocks (markdown_set_highlight; on by default). Before the first feed. */
void ansi_md_highlight(struct ansi_md *r, int on);

/* Feed s[0..n); append the rows of every line this finishes to out. */
void ansi_md_feed(struct ansi_md *r, const char *s, size_t n, struct buf *out);

/* The answer is over: append the rest (the unfinished line, a held table) to out. */
void ansi_md_finish(struct ansi_md *r, struct buf *out);

/* For a terminal: draw the unfinished line as it grows, styled as far as it goes, at most its
 * last `rows` rows (fewer than the screen's: they are redrawn by moving the cursor up over
 * them), at most every 40 ms; a finished line replaces it. 0: only finished lines (the
 * default). Before the first feed. */
void ansi_md_live(struct ansi_md *r, int rows);

/* Erase the drawn unfinished line (before something else is written to the terminal: it is
 * drawn again at the next feed). Nothing when none is shown. */
void ansi_md_hide(struct ansi_md *r, struct buf *out);

/* Write autolinks and bare URLs (a link span whose text is a whole http(s) URL) as OSC 8
 * hyperlinks: ESC ] 8 ; ; URL ESC \ text ESC ] 8 ; ; ESC \. Not inside tables (a URL
 * wrapped in its cell is in pieces). Off by default. */
void ansi_md_hyperlinks(struct ansi_md *r, int on);

/* Whether to write hyperlinks: setting "always" or "never" (profile key `hyperlinks`) decides;
 * else (auto, NULL) only on a terminal (tty) that is known to show them by its variables, read
 * through env (getenv in the program): TERM_PROGRAM iTerm.app, WezTerm, vscode, ghostty,
 * Hyper, rio or Tabby; VTE_VERSION >= 5000; KITTY_WINDOW_ID, WT_SESSION, KONSOLE_VERSION,
 * ALACRITTY_WINDOW_ID, WEZTERM_PANE; TERM xterm-kitty or foot*. Never inside tmux or screen
 * (TMUX set, TERM tmux* or screen*) unless "always": they pass OSC 8 on only when configured
 * to, and the variables of the terminal outside say nothing about that. The chat never writes
 * them: curses cannot, and bytes written beside it would corrupt its picture of the screen. */
int ansi_hyperlinks(const char *setting, int tty, const char *(*env)(const char *));

void ansi_md_free(struct ansi_md *r);

#endif
