/* shell.h - shell-command mode (tokterm -x): the model proposes one command for the user's
 * shell and system, tokterm shows it and asks on the terminal (/dev/tty, even when stdin is a
 * pipe): run, edit, copy or cancel, one key. Nothing runs without that key, or --allow-tool
 * shell. */
#ifndef TT_SHELL_H
#define TT_SHELL_H
#include "cmd/script.h"
#include "core/conf.h"

/* Exit statuses of shell mode besides the command's own and the exchange's (GUIDE, "Exit
 * status"). */
#define SHELL_EXIT_CANCELLED 10 /* nothing ran: cancelled at the question, or no command */
#define SHELL_EXIT_NO_TTY 11    /* nothing ran: no terminal to ask on, no --allow-tool shell */

/* What only tokterm-tui can do (readline and terminfo live in tui/): NULL in tokterm. */
struct shell_ui {
    /* Edit a line on the terminal tty with readline, prompt first, initial in the line:
     * the new line (caller frees), or NULL when abandoned (Ctrl-C, Ctrl-D). */
    char *(*edit)(int tty, const char *prompt, const char *initial);
    /* 1 when the terminal tty says it takes OSC 52 (terminfo Ms). */
    int (*osc52)(int tty);
};

struct shell_opts {
    struct script_opts so;      /* the prompt (one), the store, the cache, the keys */
    int dry_run;                /* only print the command */
    int allowed;                /* --allow-tool shell: run it without asking */
    const struct shell_ui *ui;
};

/* 1 when a run with these options asks on the terminal: tokterm execs tokterm-tui for it. */
int shell_wants_tty(int dry_run, int allowed);

/* Shell mode with conf (its system prompt gets the shell and system) and key (taken).
 * Returns the exit status: the command's when it ran, SHELL_EXIT_* or the exchange's. */
int shell_run(struct conf *conf, char *key, const struct shell_opts *o);

#endif
