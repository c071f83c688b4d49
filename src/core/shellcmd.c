/* shellcmd.c - shell-command mode without a terminal: see shellcmd.h. */
#include "config.h"
#include "core/shellcmd.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/markdown.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

const char *shellcmd_shell(void)
{
    const char *s = getenv("SHELL");
    if (s && s[0] == '/' && access(s, X_OK) == 0)
        return s;
    return "/bin/sh";
}

void shellcmd_context(struct buf *out, const char *shell)
{
    const char *name = strrchr(shell, '/');
    name = name ? name + 1 : shell;
    struct utsname u;
    if (uname(&u) == 0)
        buf_printf(out, "The user's shell is %s (%s) on %s %s (%s): write the command for that "
                        "shell and system.", name, shell, u.sysname, u.release, u.machine);
    else
        buf_printf(out, "The user's shell is %s (%s): write the command for that shell.", name,
                   shell);
}

/* The line at *p (up to LF, CR dropped) into [*b, *e); *p moves past it. 0 at the end. */
static int shellcmd_line(const char **p, const char *end, const char **b, const char **e)
{
    if (*p >= end)
        return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    *b = *p;
    *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    if (*e > *b && (*e)[-1] == '\r')
        (*e)--;
    return 1;
}

/* A fence line: 3+ backticks or tildes after at most 3 spaces; its char and length. */
static int shellcmd_fence(const char *b, const char *e, char *ch, size_t *n)
{
    size_t ind = 0;
    while (b < e && *b == ' ' && ind < 3)
        b++, ind++;
    if (b >= e || (*b != '`' && *b != '~'))
        return 0;
    size_t k = 0;
    while (b + k < e && b[k] == *b)
        k++;
    if (k < 3)
        return 0;
    *ch = *b;
    *n = k;
    return 1;
}

static int shellcmd_blank(const char *b, const char *e)
{
    for (; b < e; b++)
        if (*b != ' ' && *b != '\t')
            return 0;
    return 1;
}

static char *shellcmd_dup_trim(const char *b, const char *e)
{
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    return xstrndup(b, (size_t)(e - b));
}

char *shellcmd_extract(const char *answer, size_t len, char **note)
{
    if (note)
        *note = NULL;
    const char *p = answer, *end = answer + len, *b, *e;
    char fch = 0;
    size_t flen = 0;
    while (shellcmd_line(&p, end, &b, &e)) {
        if (!shellcmd_fence(b, e, &fch, &flen))
            continue;
        struct buf cmd = BUF_INIT;
        int closed = 0;
        while (shellcmd_line(&p, end, &b, &e)) {
            char c;
            size_t n;
            if (shellcmd_fence(b, e, &c, &n) && c == fch && n >= flen &&
                shellcmd_blank(b + strspn(b, " ") + n, e)) {
                closed = 1;
                break;
            }
            if (!cmd.len && shellcmd_blank(b, e))
                continue; /* blank lines before the command */
            buf_append(&cmd, b, (size_t)(e - b));
            buf_appendc(&cmd, '\n');
        }
        while (cmd.len && (cmd.data[cmd.len - 1] == '\n' || cmd.data[cmd.len - 1] == ' ' ||
                           cmd.data[cmd.len - 1] == '\t'))
            cmd.data[--cmd.len] = '\0';
        if (!cmd.len) {
            buf_free(&cmd);
            return NULL;
        }
        if (note && closed)
            while (shellcmd_line(&p, end, &b, &e))
                if (!shellcmd_blank(b, e)) {
                    *note = shellcmd_dup_trim(b, e);
                    break;
                }
        return buf_take(&cmd);
    }
    /* No block: an answer of one line is the command. */
    p = answer;
    const char *one_b = NULL, *one_e = NULL;
    while (shellcmd_line(&p, end, &b, &e)) {
        if (shellcmd_blank(b, e))
            continue;
        if (one_b)
            return NULL; /* prose of several lines: no command to find */
        one_b = b;
        one_e = e;
    }
    if (!one_b)
        return NULL;
    char *c = shellcmd_dup_trim(one_b, one_e);
    size_t n = strlen(c);
    if (n >= 2 && c[0] == '`' && c[n - 1] == '`') {
        memmove(c, c + 1, n - 2);
        c[n - 2] = '\0';
    }
    if (c[0] == '$' && c[1] == ' ')
        memmove(c, c + 2, strlen(c + 2) + 1);
    if (!*c) {
        free(c);
        return NULL;
    }
    return c;
}

void shellcmd_out_free(struct shellcmd_out *o)
{
    buf_free(&o->head);
    buf_free(&o->tail);
    o->total = 0;
}

/* Keep s[0..n) of the output: the first half of SHELLCMD_KEEP in head, the last in tail. */
static void shellcmd_keep(struct shellcmd_out *o, const char *s, size_t n)
{
    const size_t half = SHELLCMD_KEEP / 2;
    o->total += n;
    if (o->head.len < half) {
        size_t k = half - o->head.len < n ? half - o->head.len : n;
        buf_append(&o->head, s, k);
        s += k;
        n -= k;
    }
    if (!n)
        return;
    if (n >= half) {
        buf_reset(&o->tail);
        buf_append(&o->tail, s + n - half, half);
        return;
    }
    if (o->tail.len + n > half) {
        size_t drop = o->tail.len + n - half;
        memmove(o->tail.data, o->tail.data + drop, o->tail.len - drop);
        o->tail.len -= drop;
    }
    buf_append(&o->tail, s, n);
}

/* The child: the command's descriptors, default signals, nothing of ours open, exec. */
static void shellcmd_child(const char *shell, const char *cmd, int in_fd, int out_fd,
                           int err_fd)
{
    static const int sigs[] = {SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < TT_ARRAY_LEN(sigs); i++)
        signal(sigs[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if ((in_fd >= 0 && dup2(in_fd, 0) < 0) || (out_fd >= 0 && dup2(out_fd, 1) < 0) ||
        (err_fd >= 0 && dup2(err_fd, 2) < 0))
        _exit(127);
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur : 1024;
    if (max > 65536)
        max = 65536;
    for (long fd = 3; fd < max; fd++) /* the store, sockets, the loop's pipes */
        close((int)fd);
    execl(shell, shell, "-c", cmd, (char *)NULL);
    _exit(127);
}

/* Copy the pipes to out_fd and err_fd (and into kept) until both are closed. */
static void shellcmd_pump(int po, int pe, int out_fd, int err_fd, struct shellcmd_out *kept)
{
    struct pollfd pf[2] = {{po, POLLIN, 0}, {pe, POLLIN, 0}};
    int to[2] = {out_fd, err_fd};
    char chunk[65536];
    int open_n = 2;
    while (open_n) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            ssize_t n = read(pf[i].fd, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_n--;
                continue;
            }
            if (to[i] >= 0)
                (void)util_write_all(to[i], chunk, (size_t)n);
            shellcmd_keep(kept, chunk, (size_t)n);
        }
    }
}

int shellcmd_exec(const char *shell, const char *cmd, int in_fd, int out_fd, int err_fd,
                  struct shellcmd_out *kept, const char **err)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (kept && (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)) {
        *err = "cannot make a pipe for the command's output";
        if (po[0] >= 0) {
            close(po[0]);
            close(po[1]);
        }
        return -1;
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    pid_t pid = fork();
    if (pid == 0)
        shellcmd_child(shell, cmd, in_fd, kept ? po[1] : out_fd, kept ? pe[1] : err_fd);
    int status = -1;
    if (pid < 0) {
        *err = "cannot start the shell (fork)";
    } else {
        if (kept) {
            close(po[1]);
            close(pe[1]);
            po[1] = pe[1] = -1;
            shellcmd_pump(po[0], pe[0], out_fd, err_fd, kept);
            po[0] = pe[0] = -1;
        }
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
    }
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return status;
}

/* Append s[0..n) with invalid UTF-8 replaced by U+FFFD. */
static void shellcmd_utf8(struct buf *out, const char *s, size_t n)
{
    if (utf8_valid(s, n)) {
        buf_append(out, s, n);
        return;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (cp == UTF8_REPLACEMENT && k == 1) {
            char e[4];
            buf_append(out, e, utf8_encode(cp, e));
        } else {
            buf_append(out, s + i, k);
        }
        i += k;
    }
}

void shellcmd_code_block(struct buf *b, const char *s, size_t n)
{
    markdown_code_block(b, "", s, n, shellcmd_utf8);
}

char *shellcmd_followup(const char *shell, const char *cmd, int status,
                        const struct shellcmd_out *o, const char *question)
{
    struct buf b = BUF_INIT, out = BUF_INIT;
    buf_printf(&b, "I ran this command in %s:\n", shell);
    shellcmd_code_block(&b, cmd, strlen(cmd));
    buf_printf(&b, "It exited with status %d. ", status);
    size_t kept = o->head.len + o->tail.len;
    if (!o->total) {
        buf_appends(&b, "It printed nothing.\n");
    } else {
        buf_append(&out, o->head.data, o->head.len);
        if (o->total > kept)
            buf_printf(&out, "%s[... %zu bytes left out ...]\n",
                       o->head.len && o->head.data[o->head.len - 1] != '\n' ? "\n" : "",
                       o->total - kept);
        buf_append(&out, o->tail.data, o->tail.len);
        buf_printf(&b, "Its output (stdout and stderr, %zu bytes%s):\n", o->total,
                   o->total > kept ? ", the middle left out" : "");
        shellcmd_code_block(&b, out.data, out.len);
    }
    buf_appends(&b, question && *question ? question : "Explain the output.");
    buf_free(&out);
    return buf_take(&b);
}

int shellcmd_key(int tty)
{
    struct termios old, raw;
    int have = tcgetattr(tty, &old) == 0;
    if (have) {
        raw = old;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
        raw.c_iflag &= ~(tcflag_t)(ICRNL | IXON);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(tty, TCSAFLUSH, &raw);
    }
    unsigned char c;
    ssize_t n;
    do
        n = read(tty, &c, 1);
    while (n < 0 && errno == EINTR);
    if (have)
        tcsetattr(tty, TCSAFLUSH, &old);
    return n == 1 ? c : -1;
}

int shellcmd_osc52(struct buf *out, const char *text, size_t len)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len > SHELLCMD_OSC52_MAX)
        return -1;
    buf_appends(out, "\033]52;c;");
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < len ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < len ? s[i + 2] : 0);
        char q[4] = {b64[v >> 18 & 63], b64[v >> 12 & 63],
                     i + 1 < len ? b64[v >> 6 & 63] : '=', i + 2 < len ? b64[v & 63] : '='};
        buf_append(out, q, 4);
    }
    buf_appends(out, "\a");
    return 0;
}
