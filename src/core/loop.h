/* loop.h - the one event loop of the front ends (scripted mode, batch and the chat): poll() on
 * the caller's file descriptors (the session's queue, the keyboard) with a timeout, plus a
 * self-pipe for signals. The signal handlers only write the signal's number as one byte to the
 * pipe (and count it, for a cheap check between two waits); the loop hands the signals to its
 * caller in the order they came. One loop at a time per process (signals are per process). */
#ifndef TT_LOOP_H
#define TT_LOOP_H
#include <poll.h>
#include <signal.h>

#define LOOP_MAX_FDS 4
#define LOOP_MAX_SIGNALS 8

struct loop {
    struct pollfd p[LOOP_MAX_FDS + 1]; /* the caller's fds of the last wait, then the pipe */
    int n_fds;
    int pipe[2];
    int sigs[LOOP_MAX_SIGNALS];
    struct sigaction old[LOOP_MAX_SIGNALS];
    int n_sigs;
    unsigned char got[64];             /* signals read from the pipe, not yet taken */
    int n_got, next_got;
};

/* Create the self-pipe and catch the n signals of sigs (restart: SA_RESTART, so that reads
 * elsewhere are not cut short). Returns 0, or -1 with *err (static text; errno says more). */
int loop_init(struct loop *l, const int *sigs, int n, int restart, const char **err);

/* Wait until one of the n file descriptors fds (at most LOOP_MAX_FDS; a negative fd is left
 * out) is readable or closed, a signal arrives, or timeout_ms passes (-1: no limit). Returns
 * the number of ready descriptors, the signal pipe included (0 on a timeout or an interrupted
 * wait), or -1 when poll() failed. */
int loop_wait(struct loop *l, const int *fds, int n, int timeout_ms);

/* What the last wait saw on fds[i] (POLLIN, POLLHUP, POLLERR; 0 = nothing). */
short loop_ready(const struct loop *l, int i);

/* The next signal that arrived (its number), 0 when none is left. Never blocks. */
int loop_signal(struct loop *l);

/* 1 when a signal arrived that loop_signal() has not returned yet: a check without a system
 * call, for long stretches of work between two waits. */
int loop_signalled(const struct loop *l);

/* Put the old signal handlers back and close the pipe. */
void loop_end(struct loop *l);

#endif
