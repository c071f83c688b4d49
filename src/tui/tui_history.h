/* tui_history.h - the conversation browser (F2 or /history): a full-screen overlay over the
 * chat, drawn instead of it while open and closed back to it unchanged.
 *
 * - The list: saved conversations, newest first (id, title, model, messages, last update),
 *   all loaded at once (5,000 take ~10 ms; only the visible rows are drawn).
 * - Live search: `/` edits a query; the list becomes store_search() hits, one entry per
 *   conversation (its best hit) with a snippet whose matches are drawn in the search-hit style.
 *   The search runs when the frame is drawn, so keys that arrive together cost one search.
 * - Enter: the conversation read-only (rendered like the chat: markdown, sanitised); r resumes
 *   it in the chat (refused while an answer streams), e / n / F2 renames, d deletes after a
 *   y/N question. Deleting the conversation open in the chat starts a new one there.
 * - Everything from the store (titles, snippets, messages, models) is sanitised before it is
 *   drawn, like the model's text in the chat.
 * With --trace FILE it adds "B <what> <key time> <frame done>" records (what = open, list,
 * search, scroll, key; open also carries the load and build times: "B open k l b d"). */
#ifndef TT_TUI_HISTORY_H
#define TT_TUI_HISTORY_H

struct tui;

/* Open the browser (arg: a search to start with, may be NULL or ""). Without a store it
 * says why in the transcript instead. */
void tui_hist_open(struct tui *t, const char *arg);

/* A key while the browser is open (Esc arrives as 27 alone). */
void tui_hist_key(struct tui *t, int c);

/* Draw the browser into its windows (wnoutrefresh; the caller calls doupdate), then
 * tui_hist_drawn with the times of the frame. */
void tui_hist_draw(struct tui *t);
void tui_hist_drawn(struct tui *t, double done);

/* Close the browser (the chat is redrawn). */
void tui_hist_close(struct tui *t);

#endif
