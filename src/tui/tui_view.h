/* tui_view.h - the transcript pane: messages as styled, wrapped rows (wrap.h + markdown.h),
 * scrollback that follows the bottom only while it is there, and search.
 *
 * Each message keeps its wrapped rows per width (wrap_doc); while an answer streams only its
 * tail is restyled and rewrapped, once per drawn frame. An unfinished line longer than
 * TUI_VIEW_LONG_LINE bytes is previewed unstyled and wrapped incrementally (only its last rows
 * are redone), so a huge single-line answer costs time proportional to the new text; it gets
 * its markdown styles when its newline arrives (an answer that ends inside such a line keeps
 * the unstyled rows). A line over TUI_VIEW_STYLE_MAX (1 MiB) is never styled (styling costs
 * ~16x its size): it stays as previewed. A message added whole (tui_view_add, or a saved answer
 * given to tui_view_answer_text at once) is fed the same way, in pieces, so reading a
 * transcript back costs what streaming it did: its text about twice, once in the rows. */
#ifndef TT_TUI_VIEW_H
#define TT_TUI_VIEW_H
#include <curses.h>
#include <stddef.h>

#define TUI_VIEW_LONG_LINE 16384
#define TUI_VIEW_MAX_HITS 100000 /* a search keeps this many hits (40 bytes each) at most */

enum tui_msg_kind {
    TUI_MSG_USER,      /* the user's prompt: plain text, user style, a bar in the gutter */
    TUI_MSG_ASSISTANT, /* an answer: markdown, streamed */
    TUI_MSG_NOTICE,    /* local information (help, hints): markdown in the system style */
    TUI_MSG_ERROR,     /* local error: plain text in the error style */
    TUI_MSG_META,      /* local information as plain text in the meta style (/context) */
};

struct tui_view;

/* A new empty transcript (free with tui_view_free). */
struct tui_view *tui_view_new(void);
void tui_view_free(struct tui_view *v);

/* Append a finished message of text[0..n) (raw: sanitised when styled). Returns its index. */
/* Highlight fenced code blocks of messages added from now on (the `highlight` option; on by
 * default); 0 draws them in the code slot alone. */
void tui_view_set_highlight(struct tui_view *v, int on);

size_t tui_view_add(struct tui_view *v, enum tui_msg_kind kind, const char *text, size_t n);

/* Start a streamed answer under a header row showing label (e.g. the model) and info on the
 * right (e.g. the time). Returns its index. */
size_t tui_view_answer_begin(struct tui_view *v, const char *label, const char *info);
/* Replace answer idx's header (the model the server reported). */
void tui_view_answer_label(struct tui_view *v, size_t idx, const char *label);

/* Append streamed text (reasoning = 1: the model's reasoning, shown before the answer). */
void tui_view_answer_text(struct tui_view *v, size_t idx, int reasoning, const char *s,
                          size_t n);
/* Text given to tui_view_answer_text (the body, not the reasoning) that lies inside
 * block[0..len) may be read there: a long printable line then holds the block (buf_lend)
 * instead of a copy of its bytes (the session's copy of a fast answer: one copy of it, not
 * two). The block's bytes must not change while lent. block NULL: text is copied. */
void tui_view_answer_lend(struct tui_view *v, void *block, size_t len);
/* Bytes of streamed text read in a lent block instead of copied, all answers so far. */
size_t tui_view_lent(const struct tui_view *v);

/* A large batch of streamed text, its last screenful first. With lazy on (the chat's
 * transcript; off by default, as in the conversation browser's views), a batch of 32 KiB or
 * more while the view follows the bottom: tui_view_answer_defer takes s[0..k) and returns k
 * when markdown_restart finds where a new styler gives the same lines with a pane's height of
 * lines after it; the caller gives s[k..n) (what the pane shows) to tui_view_answer_text at
 * once. The deferred text waits, unstyled and without rows, for tui_view_lazy_step, or for a
 * scroll, a search or a pane taller than what was styled after it, which style all of it
 * first. Each byte is styled once either way. 0: nothing taken (too small, no such place). */
void tui_view_set_lazy(struct tui_view *v, int on);
size_t tui_view_answer_defer(struct tui_view *v, size_t idx, int reasoning, const char *s,
                             size_t n);
/* Style up to bytes of the oldest waiting text; returns the bytes styled (0: none waits). */
size_t tui_view_lazy_step(struct tui_view *v, size_t bytes);
/* Bytes of streamed text styled so far; *taken gets the bytes given to tui_view_answer_text
 * (the difference waits for tui_view_lazy_step). */
size_t tui_view_styled(const struct tui_view *v, size_t *taken);
/* The answer is over: style what is left and add footer (raw text, may be NULL) in
 * footer_slot (enum theme_slot) under it. */
void tui_view_answer_end(struct tui_view *v, size_t idx, const char *footer, int footer_slot);

/* Number of messages. */
size_t tui_view_count(const struct tui_view *v);

/* Kind of message idx. */
enum tui_msg_kind tui_view_kind(const struct tui_view *v, size_t idx);

/* Drop messages idx and later (search hits are cleared). */
void tui_view_truncate(struct tui_view *v, size_t idx);

/* Lay out for a pane of width x height and draw every row into w (no refresh). Streaming
 * tails are restyled here, so call it once per frame. */
void tui_view_draw(struct tui_view *v, WINDOW *w, int width, int height);

/* For a caller that scrolls by itself (the conversation browser shows a long conversation as
 * one view per message and styles only the messages it shows): the rows of the whole
 * transcript laid out at width, and rows [top, top + height) of it drawn into rows
 * y0..y0+height-1 of w (blank past the end). Neither uses nor moves the view's own scroll
 * position. */
size_t tui_view_rows(struct tui_view *v, int width);
void tui_view_draw_rows(struct tui_view *v, WINDOW *w, int y0, int width, int height,
                        size_t top);

/* Scroll by rows (negative = towards older text) or pages; home = the first row, end = the
 * bottom (the view follows new text again). */
void tui_view_scroll(struct tui_view *v, long rows);
void tui_view_page(struct tui_view *v, int pages);
void tui_view_home(struct tui_view *v);
void tui_view_end(struct tui_view *v);

/* 1 while the view shows the bottom and follows new text. */
int tui_view_following(const struct tui_view *v);

/* Search the finished text for q (ASCII case-insensitive). Returns the number of hits and
 * shows the last one (the most recent); 0 clears the search. Only the newest
 * TUI_VIEW_MAX_HITS hits are kept (tui_view_search_dropped() counts the others). */
size_t tui_view_search(struct tui_view *v, const char *q);

/* Move to the next older (dir < 0) or newer (dir > 0) hit, wrapping around. Returns the
 * 1-based number of the current hit, 0 when there are none. */
size_t tui_view_search_step(struct tui_view *v, int dir);

/* Hits of the last search older than the ones kept (0 unless it found more than
 * TUI_VIEW_MAX_HITS). */
size_t tui_view_search_dropped(const struct tui_view *v);

/* Current hit number (1-based, 0 = none) and the number of hits. */
size_t tui_view_search_pos(const struct tui_view *v, size_t *total);

/* Forget the search (its highlights disappear). */
void tui_view_search_end(struct tui_view *v);

#endif
