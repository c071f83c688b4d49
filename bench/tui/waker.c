/* waker.c - the floor of a frame's delay on this machine, now: a process that sleeps in
 * poll() for PERIOD_MS, as the chat's loop does until its next frame is due, and records how
 * much later than asked it ran again (the scheduler's wait, which every frame pays too). It
 * runs until its stdin closes, then writes each lateness in milliseconds to OUT, one a line.
 * bench/tui/run.py runs one beside each chat round.   usage: waker OUT PERIOD_MS */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int period = atoi(argv[2]);
    size_t n = 0, cap = 4096;
    double *late = malloc(cap * sizeof *late);
    if (!late || period <= 0)
        return 2;
    for (;;) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        double t0 = now_ms();
        int r = poll(&p, 1, period);
        double t1 = now_ms();
        if (r > 0) {
            char b[256];
            if (read(0, b, sizeof b) <= 0)
                break; /* the round is over */
            continue;
        }
        if (r < 0)
            continue;
        if (n == cap) {
            double *m = realloc(late, (cap *= 2) * sizeof *late);
            if (!m)
                break;
            late = m;
        }
        late[n++] = t1 - t0 - period;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.3f\n", late[i]);
    return fclose(f) == 0 ? 0 : 1;
}
