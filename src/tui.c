/* tui.c - placeholder: being written now (the TUI helper replaces this file). */
#include "config.h"
#include "tui.h"
#include <stdio.h>
#include <stdlib.h>
int tui_run(struct conf *conf, char *key, const struct tui_opts *o)
{
    (void)conf; (void)o; free(key);
    fputs("tokterm: the interactive chat is not built yet\n", stderr);
    return 2;
}
