/* tui.h - the interactive full-screen chat (ncurses + readline). The only module that calls
 * curses or readline. */
#ifndef TT_TUI_H
#define TT_TUI_H
#include <stdint.h>

#include "core/conf.h"

struct setup;
struct store;

struct tui_opts {
    const char *trace_path;   /* --trace FILE: timing records (util_now() seconds), NULL = off:
                                 "S t" request sent, "E t lent" stream over (lent: the
                                 bytes of streamed text the view read in the session's copy
                                 instead of copying, all answers so far), one per frame
                                 "F <arrival of its oldest delta, - = none> <done> <start> <n>"
                                 then "T <answer bytes it gave the token counter> <texts it
                                 counted>" (0 0);
                                 the conversation browser adds "B ..." (tui_history.h) */
    const char *first_prompt; /* sent at start when not NULL */
    int no_key;               /* no API key is configured for a remote server: the chat starts
                                 anyway, explains what to set, and sends nothing */
    const char *local_name;   /* a local server that answered (e.g. "Ollama"), or NULL */
    const char *local_url;    /* its base URL: offer to switch conf->base_url to it */
    struct store *store;      /* save the conversation / use the response cache; NULL = none */
    int save;                 /* write the conversation to the store */
    int incognito;            /* --incognito: no file at all (no input history, no copy.txt) */
    int cache;                /* enum session_cache: how to use the response cache */
    int resume;               /* continue a saved conversation: resume_id, the latest when 0 */
    int64_t resume_id;
    struct setup *setup;      /* the key pool and the fallback for the first session (moved
                                 to it by setup_use_keys); NULL = none */
    const char *const *allow_tools; /* --allow-tool GLOB: tools that run without asking */
    int n_allow_tools;
    struct attach_list *files; /* -f PATH: files for the first message (taken), NULL = none */
};

/* Run the chat until the user quits. Takes key (wiped and freed). Returns the exit status. */
int tui_run(struct conf *conf, char *key, const struct tui_opts *o);

/* Shell-command mode's terminal pieces (tokterm -x, tui_shell.c), outside the chat: edit a
 * line on the terminal tty with readline, prompt first and initial in the line (the user's
 * inputrc applies; Ctrl-C or Ctrl-D on an empty line abandon it: NULL), the new line
 * otherwise (caller frees); and 1 when the terminal's terminfo entry has Ms (it takes OSC 52,
 * the clipboard sequence). */
char *tui_shell_edit(int tty, const char *prompt, const char *initial);
int tui_shell_osc52(int tty);

/* 1 when the terminal on tty can hold the full-screen chat: $TERM is known to terminfo and
 * can move the cursor. Else 0 and why (at most n bytes): "TERM=dumb cannot move the cursor". */
int tui_term_usable(int tty, char *why, size_t n);

#endif
