/* tui_shell.c - shell-command mode's terminal pieces: for tokterm -x (outside the chat: no
 * curses screen, only terminfo) a readline prompt on the terminal, prefilled, and whether the
 * terminal takes OSC 52; in the chat, /x: the proposal sent as a turn, then run / edit / copy /
 * cancel asked with tui_ask.h, the command run on the shell's screen (curses suspended). */
#include "config.h"
#include "tui/tui.h"
#include "tui/tui_app.h"
#include "tui/tui_ask.h"
#include "core/role.h"
#include "core/shellcmd.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
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

int tui_term_usable(int tty, char *why, size_t n)
{
    const char *term = getenv("TERM");
    struct buf b = BUF_INIT; /* TERM is shown: made safe first */
    utf8_sanitize(&b, term ? term : "", term ? strlen(term) : 0);
    int err = 0, ok = 0;
    if (!term || !*term)
        snprintf(why, n, "TERM is not set");
    else if (setupterm(NULL, tty, &err) != OK)
        snprintf(why, n, "TERM=%.64s is not a terminal type terminfo knows", buf_str(&b));
    else {
        char *cup = tigetstr("cup");
        ok = cup && cup != (char *)-1;
        if (!ok)
            snprintf(why, n, "TERM=%.64s cannot move the cursor", buf_str(&b));
        del_curterm(cur_term);
    }
    buf_free(&b);
    return ok;
}

/* ---- /x in the chat ---- */

/* The proposal's prompt: the shell role's instructions (the user's roles/shell.md if any),
 * the shell and system, then the request. Caller frees. */
static char *tui_shell_prompt(struct tui *t, const char *request)
{
    struct buf p = BUF_INIT, err = BUF_INIT;
    struct role r;
    memset(&r, 0, sizeof r);
    if (role_load(&r, "shell", t->conf->path, &err) == 0 && r.prompt)
        buf_printf(&p, "%s\n", r.prompt);
    else
        buf_appends(&p, "Answer with one shell command alone in one fenced code block, then at "
                        "most one short line saying what it does.\n");
    role_free(&r);
    buf_free(&err);
    shellcmd_context(&p, shellcmd_shell());
    buf_printf(&p, "\n\nPropose one command for: %s", request);
    return buf_take(&p);
}

void tui_shell_cmd(struct tui *t, const char *arg)
{
    if (!arg || !*arg) {
        tui_error(t, "/x takes a request: /x find files over 100 MB changed this week");
        return;
    }
    char *prompt = tui_shell_prompt(t, arg);
    if (tui_send(t, prompt, 1) == 0)
        t->shell_pending = 1;
    free(prompt);
}

/* 1 when the terminal's terminfo entry (curses has it loaded) has Ms: it takes OSC 52. */
static int tui_shell_ms(void)
{
    char *ms = tigetstr("Ms");
    return ms && ms != (char *)-1;
}

/* r: the screen goes back to the shell, the command runs there with its output shown (and
 * kept for a follow-up), one key returns (f sends the output to the model). */
static void tui_shell_run(struct tui *t, const char *cmd)
{
    const char *shell = shellcmd_shell();
    tui_suspend_curses(t);
    struct buf b = BUF_INIT;
    buf_appends(&b, "\n$ ");
    utf8_sanitize(&b, cmd, strlen(cmd));
    buf_appends(&b, "\n");
    (void)util_write_all(1, b.data, b.len);
    struct shellcmd_out out = {BUF_INIT, BUF_INIT, 0};
    const char *err = NULL;
    int st = shellcmd_exec(shell, cmd, 0, 1, 2, &out, &err);
    buf_reset(&b);
    if (st < 0)
        buf_printf(&b, "\ntokterm: %s: %s\n", err, strerror(errno));
    buf_printf(&b, "\n[exit %d] f: send the output to the model, any other key: back to the "
                   "chat ", st);
    (void)util_write_all(1, b.data, b.len);
    int k = st < 0 ? 0 : shellcmd_key(0);
    /* end the question's line: the shell's screen is what is left when the chat ends (until
     * 2026-12 the next prompt of the shell was drawn over "[exit 0] f: ...") */
    (void)util_write_all(1, "\r\n", 2);
    tui_resume_curses(t);
    buf_reset(&b);
    buf_printf(&b, "$ %s\n\xE2\x86\x92 exit %d, %zu bytes of output%s", cmd, st, out.total,
               k == 'f' || k == 'F' ? ", sent back" : "");
    tui_meta(t, buf_str(&b));
    if (st >= 0 && (k == 'f' || k == 'F')) {
        char *p = shellcmd_followup(shell, cmd, st, &out, NULL);
        tui_send(t, p, 1);
        free(p);
    }
    buf_free(&b);
    shellcmd_out_free(&out);
}

static void tui_shell_done(struct tui *t, void *ud, int key, const char *cmd)
{
    (void)ud;
    if (key == 'r') {
        tui_shell_run(t, cmd);
    } else if (key == 'c') {
        struct buf seq = BUF_INIT;
        if (!tui_shell_ms()) {
            tui_hint(t, "cannot copy: this terminal does not say it takes OSC 52 (terminfo Ms)");
        } else if (shellcmd_osc52(&seq, cmd, strlen(cmd)) < 0) {
            tui_hint(t, "cannot copy: the command is longer than OSC 52 carries");
        } else {
            fflush(stdout);
            (void)util_write_all(1, seq.data, seq.len);
            tui_hint(t, "copied the command to the clipboard (OSC 52)");
        }
        buf_free(&seq);
    } else {
        tui_hint(t, "cancelled: nothing was run");
    }
}

void tui_shell_answer_end(struct tui *t, const struct net_result *r)
{
    if (!t->shell_pending)
        return;
    t->shell_pending = 0;
    const struct conv *c = t->have_session ? session_conv(t->s) : NULL;
    if (!r || r->outcome != API_OK || !c || !c->n)
        return;
    const struct conv_turn *last = &c->turns[c->n - 1];
    char *note = NULL;
    char *cmd = last->answer ? shellcmd_extract(last->answer, last->answer_len, &note) : NULL;
    free(note);
    if (!cmd) {
        tui_hint(t, "/x: the answer holds no command to run");
        return;
    }
    char *title = xasprintf("run in %s?", shellcmd_shell());
    tui_ask_open(t, &(struct tui_ask_spec){
                        .title = title, .body = cmd,
                        .choices = "r run  e edit  c copy  q cancel", .keys = "rcq",
                        .edit_key = 'e', .done = tui_shell_done});
    free(title);
    free(cmd);
}
