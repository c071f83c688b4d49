/* tui_input.h - GNU readline driven through its callback interface inside the curses loop.
 *
 * Readline never touches the terminal: it gets bytes from a queue this module fills
 * (rl_getc_function / rl_input_available_hook), its terminal preparation is disabled (curses
 * owns the tty), and rl_redisplay_function only marks the input line dirty; tui_input_draw
 * draws it into a curses window. Emacs or vi editing (from the user's inputrc), Ctrl-R
 * history search, completion through a callback, history in a file (mode 0600, multi-line
 * entries kept whole), Alt-Enter / Ctrl-J insert a newline, bracketed paste inserts the pasted
 * text (newlines included) without sending, Ctrl-X Ctrl-E (vi: v) edits the line in $EDITOR. */
#ifndef TT_TUI_INPUT_H
#define TT_TUI_INPUT_H
#include <curses.h>
#include <stddef.h>

struct tui_input_ops {
    void *ud;
    /* A line was accepted (caller frees it), or NULL at end of input (Ctrl-D on an empty
     * line). */
    void (*line)(void *ud, char *line);
    /* Candidates for completing the word text[start..end) of line (a NULL-terminated list
     * that stays valid until the next call), or NULL for none. */
    const char *const *(*complete)(void *ud, const char *line, int start, int end);
    /* 1 when the word at start of line is a path (/attach): Tab completes file names. May be
     * NULL. */
    int (*paths)(void *ud, const char *line, int start);
    /* A bracketed paste arrived on an empty line (text: what was pasted). Return 1 when it
     * was taken (a dragged file's path became an attachment): it is removed from the line.
     * May be NULL. */
    int (*pasted)(void *ud, const char *text);
    /* Show completion candidates (one line, raw text). */
    void (*matches)(void *ud, const char *text);
    /* Read more keys into the queue (tui_input_push), waiting up to timeout_ms; readline
     * needs them now (the rest of a bracketed paste). */
    void (*more)(void *ud, int timeout_ms);
    /* Give the terminal to another program and take it back (for $EDITOR). */
    void (*suspend)(void *ud);
    void (*resume)(void *ud);
};

/* Set readline up (reads the user's inputrc) and load the history from history_path (NULL =
 * no history file; the file and its directory are created private). Returns 0, or -1 with
 * *err (static text) when the history file cannot be created (editing works anyway). */
int tui_input_init(const struct tui_input_ops *ops, const char *prompt, const char *history_path,
                   const char **err);

/* Save the history and hand readline's state back. */
void tui_input_end(void);

/* Queue the bytes a curses key code stands for (KEY_LEFT -> ESC [ D, bytes as they are). */
void tui_input_push_key(int key);

/* Queue raw bytes. */
void tui_input_push(const char *s, size_t n);

/* Let readline process everything queued. */
void tui_input_run(void);

/* Add line to the history (memory and file), unless it repeats the last entry. */
void tui_input_history_add(const char *line);

/* Rows the input line needs at this width (>= 1). */
int tui_input_rows(int width);

/* Draw the prompt and line into w (width x height, scrolled so the cursor shows); *cy, *cx
 * get the cursor position in w. */
void tui_input_draw(WINDOW *w, int width, int height, int *cy, int *cx);

/* 1 when the line changed since the last draw (and clear the flag). */
int tui_input_dirty(void);

/* 1 when the line is empty (and no search or key sequence is under way). */
int tui_input_empty(void);

/* 1 when readline edits in vi mode. */
int tui_input_vi(void);

/* 1 inside a readline sub-mode (Ctrl-R search, an unfinished key sequence). */
int tui_input_busy(void);

/* Abandon any sub-mode and clear the line. */
void tui_input_clear(void);
/* The same for the user's Ctrl-C: the text goes to readline's kill ring first, so a draft
 * cleared by a Ctrl-C meant for an answer that had just ended comes back with Ctrl-Y. 1 when
 * there was text. */
int tui_input_discard(void);

/* Put text into the next fresh line (after the current line is accepted). */
/* Put text in the input line now when it is empty: a prompt that failed or was refused comes
 * back for the user to send again. 1 when it is there; 0 when the user has typed ahead: the
 * line is left alone, and the text goes to the history (Up recalls it). Until 2026-12 it was
 * held for the next fresh line, where what the user typed next was joined to it. */
int tui_input_offer(const char *text);
void tui_input_defer(const char *text);
/* 1 when a text waits for the next fresh line (tui_input_defer). */
int tui_input_deferring(void);

#endif
