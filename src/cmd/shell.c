/* shell.c - shell-command mode (tokterm -x): see shell.h. The question and the command shown
 * go to the terminal (/dev/tty); stdout gets the command's output (or, with --dry-run or no
 * terminal, the command itself), so `tokterm -x ... > file` keeps what a script wants. */
#include "config.h"
#include "cmd/shell.h"
#include "core/shellcmd.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int shell_wants_tty(int dry_run, int allowed)
{
    if (dry_run || allowed)
        return 0;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* Write text to fd, made safe for a terminal when tty. */
static void shell_put(int fd, int tty, const char *s)
{
    if (!tty) {
        (void)util_write_all(fd, s, strlen(s));
        return;
    }
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, s, strlen(s));
    (void)util_write_all(fd, b.data, b.len);
    buf_free(&b);
}

static void shell_say(int tty, const char *s)
{
    (void)util_write_all(tty, s, strlen(s));
}

/* The command and the model's note, on the terminal. */
static void shell_show(int tty, const char *cmd, const char *note)
{
    (void)util_write_all(tty, "\n", 1);
    for (const char *p = cmd; *p;) {
        size_t n = strcspn(p, "\n");
        char *line = xstrndup(p, n);
        shell_say(tty, p == cmd ? "  $ " : "    ");
        shell_put(tty, 1, line);
        (void)util_write_all(tty, "\n", 1);
        free(line);
        p += n + (p[n] == '\n');
    }
    if (note) {
        (void)util_write_all(tty, "  # ", 4);
        shell_put(tty, 1, note);
        (void)util_write_all(tty, "\n", 1);
    }
}

/* Copy cmd with OSC 52: 1 when sent, else 0 with the reason on the terminal. */
static int shell_copy(int tty, const struct shell_ui *ui, const char *cmd)
{
    struct buf seq = BUF_INIT;
    if (!ui || !ui->osc52 || !ui->osc52(tty)) {
        shell_say(tty, "tokterm: cannot copy: this terminal does not say it takes OSC 52 "
                             "(terminfo Ms); select the command above instead\n");
    } else if (shellcmd_osc52(&seq, cmd, strlen(cmd)) < 0) {
        shell_say(tty, "tokterm: cannot copy: the command is longer than OSC 52 "
                             "carries; select it above instead\n");
    } else {
        (void)util_write_all(tty, seq.data, seq.len);
        shell_say(tty, "tokterm: copied to the clipboard (OSC 52)\n");
        buf_free(&seq);
        return 1;
    }
    buf_free(&seq);
    return 0;
}

/* After the command ran: offer the follow-up and send it. */
static void shell_follow_up(struct script *sc, const struct shell_opts *o, int tty,
                            const char *shell, const char *cmd, int status,
                            const struct shellcmd_out *out)
{
    char line[128];
    snprintf(line, sizeof line, "\n[exit %d] f: follow up (send the output to the model), "
                                "any other key: done ", status);
    shell_say(tty, line);
    int k = shellcmd_key(tty);
    (void)util_write_all(tty, "\n", 1);
    if (k != 'f' && k != 'F')
        return;
    char *q = o->ui && o->ui->edit ? o->ui->edit(tty, "question (Enter: explain it)> ", "")
                                   : NULL;
    if (o->ui && o->ui->edit && !q)
        return; /* abandoned */
    char *prompt = shellcmd_followup(shell, cmd, status, out, q);
    free(q);
    (void)script_turn(sc, prompt, 0);
    free(prompt);
}

/* Ask run / edit / copy / cancel until one ends it; returns the exit status. */
static int shell_ask(struct script *sc, const struct shell_opts *o, int tty, char **cmdp,
                     const char *note)
{
    const char *shell = shellcmd_shell();
    shell_show(tty, *cmdp, note);
    for (;;) {
        shell_say(tty, "[r]un  [e]dit  [c]opy  [q] cancel? ");
        int k = shellcmd_key(tty);
        (void)util_write_all(tty, "\n", 1);
        if (k == 'r' || k == 'R' || k == '\r' || k == '\n' || k == 'y') {
            struct shellcmd_out out = {BUF_INIT, BUF_INIT, 0};
            const char *err = NULL;
            int in = isatty(0) ? 0 : tty; /* stdin was read as the prompt's context */
            int st = shellcmd_exec(shell, *cmdp, in, 1, 2, &out, &err);
            if (st < 0) {
                fprintf(stderr, "tokterm: %s: %s\n", err, strerror(errno));
                shellcmd_out_free(&out);
                return 1;
            }
            shell_follow_up(sc, o, tty, shell, *cmdp, st, &out);
            shellcmd_out_free(&out);
            return st;
        }
        if (k == 'e' || k == 'E') {
            if (!o->ui || !o->ui->edit) {
                shell_say(tty, "tokterm: editing needs the chat program tokterm-tui\n");
                continue;
            }
            char *n = o->ui->edit(tty, "edit> ", *cmdp);
            if (n && n[strspn(n, " \t")]) {
                free(*cmdp);
                *cmdp = n;
                shell_show(tty, *cmdp, NULL);
            } else {
                free(n);
            }
            continue;
        }
        if (k == 'c' || k == 'C') {
            if (shell_copy(tty, o->ui, *cmdp))
                return 0;
            continue;
        }
        if (k == 'q' || k == 'Q' || k == 'n' || k == 'N' || k == 27 || k == 3 || k == 4 ||
            k < 0) {
            shell_say(tty, "tokterm: cancelled: nothing was run\n");
            return SHELL_EXIT_CANCELLED;
        }
    }
}

int shell_run(struct conf *conf, char *key, const struct shell_opts *o)
{
    const char *shell = shellcmd_shell();
    struct buf sys = BUF_INIT;
    if (conf->system && *conf->system)
        buf_printf(&sys, "%s\n\n", conf->system);
    shellcmd_context(&sys, shell);
    free(conf->system);
    conf->system = buf_take(&sys);

    int tty = o->dry_run || o->allowed ? -1 : open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    struct script_opts so = o->so;
    so.keep = 1;
    int code = 0;
    struct script *sc = script_open(conf, key, &so, &code);
    if (!sc) {
        if (tty >= 0)
            close(tty);
        return code;
    }
    code = script_turn(sc, so.prompts[0], 1);
    char *note = NULL, *cmd = NULL;
    if (code == 0) {
        const char *ans = script_answer(sc);
        cmd = shellcmd_extract(ans, strlen(ans), &note);
        if (!cmd) {
            fputs("tokterm: the answer holds no command to run:\n", stderr);
            shell_put(2, isatty(2), ans);
            fputs("\n", stderr);
            code = SHELL_EXIT_CANCELLED;
        }
    }
    if (code == 0 && o->dry_run) {
        shell_put(1, isatty(1), cmd);
        (void)util_write_all(1, "\n", 1);
    } else if (code == 0 && o->allowed) {
        fputs("tokterm: running (--allow-tool shell): ", stderr);
        shell_put(2, isatty(2), cmd);
        fputs("\n", stderr);
        const char *err = NULL;
        code = shellcmd_exec(shell, cmd, -1, -1, -1, NULL, &err);
        if (code < 0) {
            fprintf(stderr, "tokterm: %s: %s\n", err, strerror(errno));
            code = 1;
        }
    } else if (code == 0 && tty < 0) {
        shell_put(1, isatty(1), cmd);
        (void)util_write_all(1, "\n", 1);
        fputs("tokterm: the command above was not run: there is no terminal to ask on (run "
              "tokterm -x in a terminal, add --dry-run to only print it, or --allow-tool shell "
              "to run it without asking)\n", stderr);
        code = SHELL_EXIT_NO_TTY;
    } else if (code == 0) {
        code = shell_ask(sc, o, tty, &cmd, note);
    }
    free(cmd);
    free(note);
    if (tty >= 0)
        close(tty);
    script_close(sc);
    return code;
}
