/* loop.c - poll() on the front end's descriptors plus a signal self-pipe. */
#include "config.h"
#include "core/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int loop_pipe_w = -1;                 /* the write end, for the handler */
static volatile sig_atomic_t loop_arrived;   /* signals written to the pipe */
static sig_atomic_t loop_taken;              /* signals loop_signal() returned */

static void loop_on_signal(int sig)
{
    int e = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(loop_pipe_w, &b, 1);
    loop_arrived++;
    errno = e;
}

int loop_init(struct loop *l, const int *sigs, int n, int restart, const char **err)
{
    memset(l, 0, sizeof *l);
    l->pipe[0] = l->pipe[1] = -1;
    if (n > LOOP_MAX_SIGNALS) {
        *err = "too many signals for the event loop";
        return -1;
    }
    if (pipe2(l->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        *err = "cannot create the signal pipe";
        return -1;
    }
    loop_pipe_w = l->pipe[1];
    loop_arrived = 0;
    loop_taken = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = loop_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = restart ? SA_RESTART : 0;
    for (int i = 0; i < n; i++) {
        l->sigs[i] = sigs[i];
        sigaction(sigs[i], &sa, &l->old[i]);
    }
    l->n_sigs = n;
    return 0;
}

int loop_wait(struct loop *l, const int *fds, int n, int timeout_ms)
{
    if (n > LOOP_MAX_FDS)
        n = LOOP_MAX_FDS;
    for (int i = 0; i < n; i++)
        l->p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    l->p[n] = (struct pollfd){.fd = l->pipe[0], .events = POLLIN};
    l->n_fds = n;
    if (loop_signalled(l))
        timeout_ms = 0; /* a signal came before the wait: hand it over at once */
    int r = poll(l->p, (nfds_t)n + 1, timeout_ms);
    if (r < 0) {
        for (int i = 0; i <= n; i++)
            l->p[i].revents = 0;
        return errno == EINTR ? 0 : -1;
    }
    return r;
}

short loop_ready(const struct loop *l, int i)
{
    return i >= 0 && i < l->n_fds ? l->p[i].revents : 0;
}

int loop_signal(struct loop *l)
{
    if (l->next_got == l->n_got) {
        /* read only when the wait saw the pipe ready or a handler ran since */
        if (!(l->p[l->n_fds].revents & POLLIN) && !loop_signalled(l))
            return 0;
        l->p[l->n_fds].revents = 0;
        ssize_t k = read(l->pipe[0], l->got, sizeof l->got);
        l->next_got = 0;
        l->n_got = k > 0 ? (int)k : 0;
        if (!l->n_got) {
            loop_taken = loop_arrived; /* a byte the full pipe lost: nothing to hand over */
            return 0;
        }
    }
    loop_taken++;
    return l->got[l->next_got++];
}

int loop_signalled(const struct loop *l)
{
    (void)l;
    return loop_arrived != loop_taken;
}

void loop_end(struct loop *l)
{
    for (int i = 0; i < l->n_sigs; i++)
        sigaction(l->sigs[i], &l->old[i], NULL);
    l->n_sigs = 0;
    loop_pipe_w = -1;
    for (int i = 0; i < 2; i++)
        if (l->pipe[i] >= 0) {
            close(l->pipe[i]);
            l->pipe[i] = -1;
        }
}
