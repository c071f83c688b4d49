/* tui_ask.h - a question in the chat that waits for one key: a panel over the bottom of the
 * transcript (a title and a body: a proposed shell command, a tool call's arguments
 * pretty-printed) and the choices in the input row. Used by /x (run, edit, copy, cancel) and
 * by tool-call approval (y once, a always, n refuse, e edit). Internal to tui/.
 *
 * While it is open, keys go to it (those typed before it opened are dropped): a key of
 * spec.keys answers (done is called, the panel closes); Enter alone answers nothing; Esc and
 * Ctrl-C answer 27; PgUp/PgDn scroll the panel when the body is longer than
 * it; spec.edit_key puts the body into the input line: Enter hands it to spec.check (0: it
 * becomes the body and the question is asked again; -1: the message is shown and the text
 * stays to be fixed), Esc or Ctrl-C go back to the question with the body unchanged. */
#ifndef TT_TUI_ASK_H
#define TT_TUI_ASK_H
#include "base/buf.h"

struct tui;

struct tui_ask_spec {
    const char *title;   /* one line, raw text (sanitised when drawn) */
    const char *body;    /* lines, raw text */
    const char *choices; /* the input row: "r run  e edit  c copy  q cancel" */
    const char *keys;    /* the keys that answer ("rcq"); letters match either case */
    int edit_key;        /* the key that edits the body ('e'), 0: none */
    /* An edited body: 0 to take it (*fixed, when set, replaces it: normalised JSON; caller
     * frees), or -1 with a one-line message in err. NULL: any text that is not blank. */
    int (*check)(void *ud, const char *text, char **fixed, struct buf *err);
    /* The answer: key (lower case), or 27 for Esc / Ctrl-C / Ctrl-D; body is the current text
     * (edited or not). The panel is closed before done runs (done may open another). */
    void (*done)(struct tui *t, void *ud, int key, const char *body);
    void *ud;
};

/* Open a question (strings copied). One at a time: an open one is answered 27 first. */
void tui_ask_open(struct tui *t, const struct tui_ask_spec *spec);
/* 1 while a question is open (asking or editing). */
int tui_ask_active(const struct tui *t);
/* A key from curses: 1 when the question used it (else the chat handles it: while editing,
 * readline gets the keys). */
int tui_ask_key(struct tui *t, int c);
/* A line the input accepted while editing: 1 when taken (line freed), else 0. */
int tui_ask_line(struct tui *t, char *line);
/* Draw the panel over the bottom of the transcript window and, unless editing, the choices in
 * the input window (*cy, *cx: the cursor). Returns 1 when it drew the input row. */
int tui_ask_draw(struct tui *t, int *cy, int *cx);
/* Answer an open question with Esc (27), if one is open. */
void tui_ask_close(struct tui *t);
/* Free an open question without answering (the chat ends). */
void tui_ask_free(struct tui *t);

#endif
