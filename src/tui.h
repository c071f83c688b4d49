/* tui.h - the interactive full-screen chat (ncurses + readline). The only module that calls
 * curses or readline. */
#ifndef TT_TUI_H
#define TT_TUI_H
#include "conf.h"

struct tui_opts {
    const char *trace_path;   /* --trace FILE: write per-frame timing records, NULL = off */
    const char *first_prompt; /* sent at start when not NULL */
    int no_key;               /* no API key is configured for a remote server: the chat starts
                                 anyway, explains what to set, and sends nothing */
    const char *local_name;   /* a local server that answered (e.g. "Ollama"), or NULL */
    const char *local_url;    /* its base URL: offer to switch conf->base_url to it */
};

/* Run the chat until the user quits. Takes key (wiped and freed). Returns the exit status. */
int tui_run(struct conf *conf, char *key, const struct tui_opts *o);

#endif
