/* tui_shell.c - shell-command mode's terminal pieces (tokterm -x): a readline prompt on the
 * terminal, prefilled, and whether the terminal takes OSC 52. Runs outside the chat: no curses
 * screen, only terminfo. */
#include "config.h"
#include "tui/tui.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <curses.h>
#include <term.h>
#include <readline/readline.h>

static const char *tui_shell_prefill;
static int tui_shell_abandoned;

static int tui_shell_startup(void)
{
    if (tui_shell_prefill && *tui_shell_prefill)
        rl_insert_text(tui_shell_prefill);
    return 0;
}

/* Ctrl-C: abandon the edit (the terminal sends it as a key, not a signal: see prep). */
static int tui_shell_abandon(int count, int key)
{
    (void)count;
    (void)key;
    tui_shell_abandoned = 1;
    rl_done = 1;
    return 0;
}

static void tui_shell_prep(int meta)
{
    rl_prep_terminal(meta);
    struct termios t;
    int fd = fileno(rl_instream);
    if (tcgetattr(fd, &t) == 0) {
        t.c_lflag &= ~(tcflag_t)ISIG;
        tcsetattr(fd, TCSADRAIN, &t);
    }
}

char *tui_shell_edit(int tty, const char *prompt, const char *initial)
{
    setlocale(LC_CTYPE, ""); /* multibyte characters in the line */
    int in_fd = dup(tty), out_fd = dup(tty);
    FILE *in = in_fd >= 0 ? fdopen(in_fd, "r") : NULL;
    FILE *out = out_fd >= 0 ? fdopen(out_fd, "w") : NULL;
    if (!in || !out) {
        if (in)
            fclose(in);
        else if (in_fd >= 0)
            close(in_fd);
        if (out)
            fclose(out);
        else if (out_fd >= 0)
            close(out_fd);
        return NULL;
    }
    rl_instream = in;
    rl_outstream = out;
    rl_readline_name = "tokterm";
    rl_catch_signals = 0;
    rl_change_environment = 0;
    rl_startup_hook = tui_shell_startup;
    rl_prep_term_function = tui_shell_prep;
    rl_bind_key('\003', tui_shell_abandon);
    tui_shell_prefill = initial;
    tui_shell_abandoned = 0;
    char *line = readline(prompt);
    if (tui_shell_abandoned) {
        free(line);
        line = NULL;
        fputs("\n", out);
    }
    rl_startup_hook = NULL;
    tui_shell_prefill = NULL;
    rl_instream = NULL;
    rl_outstream = NULL;
    fclose(in);
    fclose(out);
    return line;
}

int tui_shell_osc52(int tty)
{
    int err = 0;
    if (setupterm(NULL, tty, &err) != OK)
        return 0;
    char *ms = tigetstr("Ms");
    int ok = ms && ms != (char *)-1;
    del_curterm(cur_term);
    return ok;
}
