/* stdio.c - the stdio transport: the server is a child process in a process group of its
 * own, with no descriptor of ours but its stdin, stdout and stderr, spoken to through
 * newline-delimited JSON on its stdin and stdout; its stderr is drained and only its last
 * 4 KiB kept. A reader thread polls stdout, stderr and a stop pipe.
 *
 * The stop is the spec's (lifecycle, "Shutdown", stdio): stdin closed, SIGTERM after a grace,
 * SIGKILL after as long again. While tokterm goes on it waits for that here; once it is about
 * to exit (mcp_exiting) a server still running is handed to a detached reaper, `tokterm
 * --reap`, which takes the same steps, so the exit does not wait for the server. */
#include "config.h"
#include "mcp/mcp_int.h"

#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The variables a server inherits from tokterm (as the MCP SDKs do: nothing else, so no API
 * key of tokterm's reaches a server unless its section's env names it). */
static int mcp_env_inherited(const char *e)
{
    static const char *const keep[] = {"HOME=", "LOGNAME=", "PATH=", "SHELL=", "TERM=", "USER=",
                                       "LANG=", "TMPDIR=", "TZ=", "LC_", NULL};
    for (size_t i = 0; keep[i]; i++)
        if (strncmp(e, keep[i], strlen(keep[i])) == 0)
            return 1;
    return 0;
}

/* The child's environment: the inherited variables, then the section's env (expanded; its
 * values are c's secrets). */
static char **mcp_child_env(struct mcp_client *c)
{
    const struct mcp_server_conf *conf = &c->conf;
    size_t n = 0, cap = 0;
    char **v = NULL;
    for (char **e = environ; e && *e; e++)
        if (mcp_env_inherited(*e)) {
            XGROW(v, n + 2, cap);
            v[n++] = xstrdup(*e);
        }
    for (char **e = conf->env; e && *e; e++) {
        size_t nl = (size_t)(strchr(*e, '=') - *e) + 1;
        for (size_t i = 0; i < n; i++)
            if (strncmp(v[i], *e, nl) == 0) { /* replaces an inherited one */
                free(v[i]);
                v[i] = v[--n];
                break;
            }
        XGROW(v, n + 2, cap);
        char *val = mcp_expand(*e + nl, NULL);
        if (util_secret_name(*e, nl - 1))
            mcp_secret_add(c, val);
        v[n++] = xasprintf("%.*s%s", (int)nl, *e, val);
        util_wipe(val, strlen(val));
        free(val);
    }
    XGROW(v, n + 1, cap);
    v[n] = NULL;
    return v;
}

/* The program to run: a name with '/' as it is, else looked up in PATH (the child's). */
static char *mcp_find_program(const char *name, char **env)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char **e = env; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        char *cand = xasprintf("%.*s%s%s", (int)n, p, n ? "/" : "", name);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        if (!colon)
            return NULL;
        p = colon + 1;
    }
}

static void mcp_close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

#define MCP_FOREVER 1e18 /* a deadline never reached */

/* A poll timeout in ms for a wait of left seconds (at most an hour: then the caller looks
 * again). */
static int mcp_poll_ms(double left)
{
    return left <= 0 ? 0 : left > 3600 ? 3600000 : (int)(left * 1000) + 1;
}

static int mcp_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Wait up to secs for process pid to exit: 1 when it has (reaped, unless peek: then left
 * for a later wait; si, if not NULL, says how it ended), 0 when it has not (or wake_fd, if
 * not -1, became readable), -1 when it is not there to wait for (reaped elsewhere). It sleeps
 * on a pidfd, readable when the process exits, so the exit is seen at once without waking to
 * look; a kernel without pidfd_open (before 5.3) gets a 2 ms poll. */
static int mcp_pid_wait(pid_t pid, double secs, int peek, siginfo_t *si, int wake_fd)
{
    double end = util_now() + secs;
    int pfd = -2; /* opened when there is something to wait for */
    siginfo_t tmp;
    if (!si)
        si = &tmp;
    int rc = 0;
    for (;;) {
        memset(si, 0, sizeof *si);
        int w = waitid(P_PID, (id_t)pid, si, WEXITED | WNOHANG | (peek ? WNOWAIT : 0));
        if (w == 0 && si->si_pid == pid) {
            rc = 1;
            break;
        }
        if (w != 0 && errno != EINTR) {
            rc = -1;
            break;
        }
        double left = end - util_now();
        if (left <= 0)
            break;
        if (pfd == -2)
            pfd = mcp_pidfd_open(pid);
        struct pollfd pf[2] = {{pfd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        if (pfd < 0 || poll(pf, 2, mcp_poll_ms(left)) < 0)
            util_sleep_ms(2);
        if (pf[1].revents)
            break;
    }
    if (pfd >= 0)
        close(pfd);
    return rc;
}

/* One wait of the stop: 1 when the server has exited by until (a util_now() time), else 0. */
typedef int (*mcp_exit_wait_fn)(void *ctx, double until);

/* The spec's stop of a stdio server whose stdin was closed at since: up to grace seconds for
 * it to exit, then SIGTERM to its process group and as long again (0.5 s when grace is 0),
 * then SIGKILL and a wait for the end; what it started and left behind in its group gets a
 * SIGTERM. The same steps here and in the reaper; only wait differs. */
static void mcp_stop_steps(pid_t pid, double grace, double since, mcp_exit_wait_fn wait,
                           void *ctx)
{
    if (!wait(ctx, since + grace)) {
        kill(-pid, SIGTERM);
        if (!wait(ctx, util_now() + (grace > 0 ? grace : 0.5))) {
            kill(-pid, SIGKILL);
            wait(ctx, MCP_FOREVER);
        }
    }
    kill(-pid, SIGTERM);
}

/* The server's stdout closed: reap it if it is ending, and say how it ended. */
static void mcp_stdio_ended(struct mcp_client *c)
{
    /* the last of its stderr: it usually says why */
    char tmp[16384];
    ssize_t r;
    int fl = fcntl(c->err_fd, F_GETFL);
    if (c->err_fd >= 0 && fcntl(c->err_fd, F_SETFL, fl | O_NONBLOCK) == 0)
        while ((r = read(c->err_fd, tmp, sizeof tmp)) > 0)
            mcp_stderr_add(c, tmp, (size_t)r);
    struct buf why = BUF_INIT;
    buf_printf(&why, "the server (%s) ", c->conf.argv[0]);
    /* look without reaping (mcp_stdio_close reaps it): up to 0.2 s for it to end */
    siginfo_t si;
    int ended = mcp_pid_wait(c->pid, 0.2, 1, &si, c->stop_fd[0]) == 1;
    if (ended && si.si_code == CLD_EXITED)
        buf_printf(&why, "exited with status %d", si.si_status);
    else if (ended)
        buf_printf(&why, "was killed by signal %d", si.si_status);
    else
        buf_appends(&why, "closed its stdout");
    mcp_server_ended(c, why.data);
    buf_free(&why);
}

/* Lines of the server's stdout: each whole one goes to mcp_dispatch; one longer than the
 * limit is skipped, its first and last MCP_SNIP bytes kept to find its id. */
struct mcp_lines {
    struct buf line;
    int skipping;
    unsigned long long skipped;
    char head[MCP_SNIP], tail[MCP_SNIP];
    size_t hn, tn;
};

static void mcp_lines_tail(struct mcp_lines *L, const char *p, size_t n)
{
    if (n >= MCP_SNIP) {
        memcpy(L->tail, p + n - MCP_SNIP, MCP_SNIP);
        L->tn = MCP_SNIP;
        return;
    }
    size_t keep = L->tn + n > MCP_SNIP ? MCP_SNIP - n : L->tn;
    memmove(L->tail, L->tail + L->tn - keep, keep);
    memcpy(L->tail + keep, p, n);
    L->tn = keep + n;
}

static void mcp_lines_feed(struct mcp_client *c, struct mcp_lines *L, const char *p, size_t n)
{
    size_t max = mcp_max_message(c);
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        if (!L->skipping && L->line.len + k > max) {
            L->skipping = 1;
            L->hn = L->line.len < MCP_SNIP ? L->line.len : MCP_SNIP;
            memcpy(L->head, L->line.data, L->hn);
            if (L->hn < MCP_SNIP) {
                size_t more = k < MCP_SNIP - L->hn ? k : MCP_SNIP - L->hn;
                memcpy(L->head + L->hn, p, more);
                L->hn += more;
            }
            L->tn = 0;
            mcp_lines_tail(L, L->line.data ? L->line.data : "", L->line.len);
            L->skipped = L->line.len;
            buf_free(&L->line); /* give the memory back */
        }
        if (L->skipping) {
            mcp_lines_tail(L, p, k);
            L->skipped += k;
        } else
            buf_append(&L->line, p, k);
        if (!nl)
            return;
        if (L->skipping)
            mcp_oversized(c, L->head, L->hn, L->tail, L->tn, L->skipped);
        else
            mcp_dispatch(c, L->line.data ? L->line.data : "", L->line.len);
        L->skipping = 0;
        buf_reset(&L->line);
        p = nl + 1;
        n -= k + 1;
    }
}

static void *mcp_stdio_reader(void *arg)
{
    struct mcp_client *c = arg;
    struct mcp_lines L = {0};
    size_t bufsz = 1 << 16;
    char *rb = xmalloc(bufsz);
    int out_open = 1, err_open = 1;
    while (out_open) {
        struct pollfd pf[3] = {{c->out_fd, POLLIN, 0}, {err_open ? c->err_fd : -1, POLLIN, 0},
                               {c->stop_fd[0], POLLIN, 0}};
        if (poll(pf, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[2].revents)
            break;
        if (pf[1].revents) {
            ssize_t r = read(c->err_fd, rb, bufsz);
            if (r > 0)
                mcp_stderr_add(c, rb, (size_t)r);
            else if (r == 0 || errno != EINTR)
                err_open = 0;
        }
        if (pf[0].revents) {
            ssize_t r = read(c->out_fd, rb, bufsz);
            if (r > 0)
                mcp_lines_feed(c, &L, rb, (size_t)r);
            else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                out_open = 0;
                mcp_stdio_ended(c);
            }
        }
    }
    free(rb);
    buf_free(&L.line);
    return NULL;
}

static int mcp_stdio_open(struct mcp_client *c, struct buf *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
    char **env = mcp_child_env(c);
    char *prog = mcp_find_program(c->conf.argv[0], env);
    int rc = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    if (!prog) {
        buf_printf(err, "%s: cannot run '%s': %s", c->conf.name, c->conf.argv[0],
                   strchr(c->conf.argv[0], '/') ? "no such executable" : "not found in PATH");
        goto out;
    }
    if (c->conf.cwd) {
        struct stat st;
        if (stat(c->conf.cwd, &st) != 0 || !S_ISDIR(st.st_mode)) {
            buf_printf(err, "%s: cwd '%s' is not a directory", c->conf.name, c->conf.cwd);
            goto out;
        }
    }
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(er, O_CLOEXEC) ||
        pipe2(c->stop_fd, O_CLOEXEC)) {
        buf_printf(err, "%s: pipe: %s", c->conf.name, strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, er[1], 2);
    if (c->conf.cwd)
        posix_spawn_file_actions_addchdir_np(&fa, c->conf.cwd);
    /* nothing else of ours: the database, sockets, pipes without O_CLOEXEC, the caller's */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGHUP);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0); /* its own group: Ctrl-C in the terminal is tokterm's */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    int e = posix_spawn(&c->pid, prog, &fa, &at, c->conf.argv, env);
    if (e) {
        c->pid = 0;
        buf_printf(err, "%s: cannot run '%s': %s", c->conf.name, prog, strerror(e));
        goto out;
    }
    c->in_fd = in[1];
    c->out_fd = out[0];
    c->err_fd = er[0];
    in[1] = out[0] = er[0] = -1;
    fcntl(c->in_fd, F_SETFL, fcntl(c->in_fd, F_GETFL) | O_NONBLOCK);
    if (pthread_create(&c->reader, NULL, mcp_stdio_reader, c) != 0) {
        buf_printf(err, "%s: cannot start a thread", c->conf.name);
        kill(-c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
        goto out;
    }
    c->reader_on = 1;
    rc = 0;
out:
    for (int i = 0; i < 2; i++) {
        mcp_close_fd(&in[i]);
        mcp_close_fd(&out[i]);
        mcp_close_fd(&er[i]);
    }
    if (rc != 0) {
        mcp_close_fd(&c->stop_fd[0]);
        mcp_close_fd(&c->stop_fd[1]);
        mcp_close_fd(&c->in_fd);
        mcp_close_fd(&c->out_fd);
        mcp_close_fd(&c->err_fd);
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(prog);
    mcp_strv_free_all(env);
    return rc;
}

static int mcp_stdio_send(struct mcp_client *c, const char *msg, size_t n, long id,
                          struct buf *err)
{
    (void)id;
    pthread_mutex_lock(&c->write_mu);
    int rc = 0;
    double deadline = util_now() + c->conf.timeout;
    for (int part = 0; part < 2 && rc == 0; part++) {
        const char *p = part ? "\n" : msg;
        size_t left = part ? 1 : n;
        while (left) {
            if (c->in_fd < 0) {
                buf_printf(err, "the server (%s) is stopped", c->conf.argv[0]);
                rc = -1;
                break;
            }
            ssize_t w = write(c->in_fd, p, left);
            if (w > 0) {
                p += w;
                left -= (size_t)w;
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno == EAGAIN) {
                double wait = deadline - util_now();
                struct pollfd pf = {c->in_fd, POLLOUT, 0};
                if (wait > 0 && poll(&pf, 1, (int)(wait * 1000) + 1) >= 0)
                    continue;
                buf_printf(err, "the server (%s) stopped reading its stdin", c->conf.argv[0]);
            } else
                buf_printf(err, "the server (%s) closed its stdin: %s", c->conf.argv[0],
                           strerror(errno));
            rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&c->write_mu);
    return rc;
}

/* The wait of the stop in process: the server reaped (here or elsewhere). */
static int mcp_stdio_wait(void *ctx, double until)
{
    const struct mcp_client *c = ctx;
    return mcp_pid_wait(c->pid, until - util_now(), 0, NULL, -1) != 0;
}

/* ---- the reaper ------------------------------------------------------------------------ */

static int mcp_exit_hand_off; /* mcp_exiting was called */

void mcp_exiting(void)
{
    __atomic_store_n(&mcp_exit_hand_off, 1, __ATOMIC_RELAXED);
}

/* The reaper's descriptors: a pidfd of the server (readable once it has exited: the reaper
 * is not its parent and cannot wait for it), the server's stdout and stderr (drained unread,
 * so that it neither blocks on a full pipe nor dies of a broken one). */
struct mcp_reap {
    int pidfd, fds[2];
};

/* The wait of the stop in the reaper. Only system calls: it also runs in a forked copy of
 * tokterm (see mcp_reaper_fallback). */
static int mcp_reap_wait(void *ctx, double until)
{
    struct mcp_reap *r = ctx;
    char sink[16384];
    for (;;) {
        struct pollfd pf[3] = {{r->pidfd, POLLIN, 0}, {r->fds[0], POLLIN, 0},
                               {r->fds[1], POLLIN, 0}};
        double left = until - util_now();
        int n = poll(pf, 3, mcp_poll_ms(left));
        if (n < 0 && errno != EINTR)
            util_sleep_ms(10);
        if (n > 0 && pf[0].revents)
            return 1;
        for (int i = 0; n > 0 && i < 2; i++)
            if (pf[i + 1].revents) {
                ssize_t k = read(r->fds[i], sink, sizeof sink);
                if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                    close(r->fds[i]);
                    r->fds[i] = -1;
                }
            }
        if (left <= 0)
            return 0;
    }
}

/* The pid a pidfd refers to (/proc/self/fdinfo), 0 when that process is gone and reaped,
 * -1 when fd is not a pidfd. */
static long mcp_pidfd_pid(int fd)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return -1;
    ssize_t n = read(f, text, sizeof text - 1);
    close(f);
    text[n > 0 ? n : 0] = '\0';
    const char *p = strstr(text, "\nPid:");
    if (!p)
        return -1;
    long pid = strtol(p + 5, NULL, 10);
    return pid > 0 ? pid : pid == -1 ? 0 : -1;
}

int mcp_reap_main(int argc, char **argv)
{
    char *e[3] = {NULL, NULL, NULL};
    long pid = argc == 3 ? strtol(argv[0], &e[0], 10) : 0;
    double grace = argc == 3 ? strtod(argv[1], &e[1]) : -1;
    double since = argc == 3 ? strtod(argv[2], &e[2]) : 0;
    long fd_pid = mcp_pidfd_pid(3);
    if (argc != 3 || *e[0] || *e[1] || *e[2] || pid <= 1 || !(grace >= 0 && grace <= 3600) ||
        (fd_pid != pid && fd_pid != 0)) {
        fputs("tokterm: --reap is tokterm's own: the process it leaves an MCP server's "
              "shutdown to when it exits\n", stderr);
        return 2;
    }
    if (fd_pid == 0) /* it ended and was reaped already: nothing left to stop */
        return 0;
    struct mcp_reap r = {3, {4, 5}};
    mcp_stop_steps((pid_t)pid, grace, since, mcp_reap_wait, &r);
    return 0;
}

/* The reaper without /proc (its exec failed): the steps in the forked copy of tokterm, with
 * util_spawn_detached's descriptors 3-5. Only async-signal-safe calls. */
struct mcp_reaper_arg {
    pid_t pid;
    double grace, since;
};

static void mcp_reaper_fallback(void *ctx)
{
    const struct mcp_reaper_arg *a = ctx;
    struct mcp_reap r = {3, {4, 5}};
    mcp_stop_steps(a->pid, a->grace, a->since, mcp_reap_wait, &r);
}

static void mcp_stdio_stop_reader(struct mcp_client *c)
{
    if (c->reader_on) {
        char b = 1;
        if (write(c->stop_fd[1], &b, 1) < 0) {
            /* the reader also ends at the server's EOF */
        }
        pthread_join(c->reader, NULL);
        c->reader_on = 0;
    }
}

/* tokterm is about to exit and c's stdin was closed at since: leave the rest of the stop to
 * a detached reaper (util_spawn_detached, then tokterm --reap). 0 when it is left to
 * it (or the server had already ended: reaped here), -1 when it cannot be (no pidfd before
 * Linux 5.3, no fork): then the caller waits here. */
static int mcp_stdio_hand_off(struct mcp_client *c, double grace, double since)
{
    int fds[3] = {mcp_pidfd_open(c->pid), c->out_fd, c->err_fd};
    if (fds[0] < 0)
        return -1;
    mcp_stdio_stop_reader(c); /* its pipes go to the reaper */
    int rc = 0;
    if (mcp_pid_wait(c->pid, 0, 0, NULL, -1) != 0)
        kill(-c->pid, SIGTERM); /* it has ended: what it left behind in its group */
    else {
        char spid[24], sgrace[32], ssince[48];
        snprintf(spid, sizeof spid, "%ld", (long)c->pid);
        snprintf(sgrace, sizeof sgrace, "%.3f", grace);
        snprintf(ssince, sizeof ssince, "%.6f", since);
        char *argv[] = {(char *)"tokterm", (char *)"--reap", spid, sgrace, ssince, NULL};
        /* the reaper: the pidfd and the server's stdout and stderr as 3-5, an empty
         * environment, so it holds no key (neither the environment's nor tokterm's memory) */
        struct mcp_reaper_arg arg = {c->pid, grace, since};
        rc = util_spawn_detached("/proc/self/exe", argv, fds, 3, mcp_reaper_fallback, &arg,
                                 0);
    }
    close(fds[0]);
    return rc;
}

static void mcp_stdio_close(struct mcp_client *c, double grace)
{
    pthread_mutex_lock(&c->write_mu);
    mcp_close_fd(&c->in_fd); /* the polite way: the server sees the end of its input */
    pthread_mutex_unlock(&c->write_mu);
    double since = util_now();
    if (c->pid > 0) {
        if (!__atomic_load_n(&mcp_exit_hand_off, __ATOMIC_RELAXED) ||
            mcp_stdio_hand_off(c, grace, since) != 0)
            mcp_stop_steps(c->pid, grace, since, mcp_stdio_wait, c);
        c->pid = 0;
    }
    mcp_stdio_stop_reader(c);
    mcp_close_fd(&c->stop_fd[0]);
    mcp_close_fd(&c->stop_fd[1]);
    mcp_close_fd(&c->out_fd);
    mcp_close_fd(&c->err_fd);
    mcp_server_ended(c, "the server was stopped");
}

const struct mcp_transport mcp_stdio_transport = {mcp_stdio_open, mcp_stdio_send,
                                                  mcp_stdio_close};
