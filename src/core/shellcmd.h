/* shellcmd.h - shell-command mode's pieces that need no terminal (tokterm -x, the chat's /x):
 * the user's shell and system for the prompt, the command found in a model's answer, running
 * it with its output copied and a bounded part kept, the follow-up prompt that carries that
 * part back, and the OSC 52 sequence that copies text to the terminal's clipboard. The front
 * ends ask the user; nothing here runs a command on its own. */
#ifndef TT_SHELLCMD_H
#define TT_SHELLCMD_H
#include <stddef.h>

#include "base/buf.h"

/* Bytes of a command's output kept for a follow-up: the first and the last half of it. */
#define SHELLCMD_KEEP ((size_t)32 << 10)
/* The longest text copied with OSC 52 (xterm's limit for the sequence is about 100 KB). */
#define SHELLCMD_OSC52_MAX ((size_t)74000)

/* The shell commands run in: $SHELL when it is an absolute path to an executable, else
 * /bin/sh. */
const char *shellcmd_shell(void);

/* Append to out the line the system prompt gets: the user's shell (its name and path) and
 * system (uname: name, release, machine). */
void shellcmd_context(struct buf *out, const char *shell);

/* The command of a model's answer: the text of the first fenced code block (``` or ~~~,
 * blank lines at both ends dropped); without one, an answer of one line (inline backticks and
 * a leading "$ " removed). NULL when neither gives a command. *note (may be NULL): the first
 * non-empty line after the block, else NULL (caller frees both). */
char *shellcmd_extract(const char *answer, size_t len, char **note);

/* A command's output as it ran: the first SHELLCMD_KEEP/2 bytes in head, the last in tail,
 * total bytes seen. */
struct shellcmd_out {
    struct buf head, tail;
    size_t total;
};
void shellcmd_out_free(struct shellcmd_out *o);

/* Run cmd as `shell -c cmd`, stdin from in_fd, in this process group (Ctrl-C reaches it, not
 * us: SIGINT and SIGQUIT are ignored here while it runs, as system(3) does). Its stdout and
 * stderr are copied to out_fd and err_fd as they come, and into *kept when kept is not NULL
 * (then the command writes into pipes, not the terminal). Returns its exit status as a shell
 * reports it (128+N when signal N killed it), or -1 with *err set (static text, errno). */
int shellcmd_exec(const char *shell, const char *cmd, int in_fd, int out_fd, int err_fd,
                  struct shellcmd_out *kept, const char **err);

/* The prompt of the follow-up turn: the command, the shell, its status, its output (cut in the
 * middle when it was longer than SHELLCMD_KEEP, invalid UTF-8 replaced), then the question
 * (NULL or empty: "Explain the output."). Caller frees. */
char *shellcmd_followup(const char *shell, const char *cmd, int status,
                        const struct shellcmd_out *o, const char *question);

/* Append s[0..n) to b as a fenced code block: the fence one backtick longer than any run in
 * s (at least three), invalid UTF-8 replaced by U+FFFD. */
void shellcmd_code_block(struct buf *b, const char *s, size_t n);

/* One key from the terminal tty, read without echo or line editing; Ctrl-C and Ctrl-D come as
 * keys (3, 4), not signals. The terminal's modes are put back. -1 at the end of input. */
int shellcmd_key(int tty);

/* Append the OSC 52 sequence that puts text in the clipboard ("c") to out: 0, or -1 when
 * text is longer than SHELLCMD_OSC52_MAX (also /copy's). */
int shellcmd_osc52(struct buf *out, const char *text, size_t len);

#endif
