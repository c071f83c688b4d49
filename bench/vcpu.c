/* vcpu.c - does a thread that sleeps wake late, where one that spins keeps running? No target:
 * a fact about the machine (docs/PERFORMANCE.md, "What the slow frames wait for").
 *
 *   cc -O2 -o /tmp/vcpu bench/vcpu.c && /tmp/vcpu [seconds, 20] [sleep ms, 8]
 *
 * For the given seconds it sleeps in poll() for the given milliseconds again and again (as the
 * chat's loop waits for its next frame) and counts the wake-ups that came more than 4, 8 and
 * 16 ms late; for as many seconds it reads the clock in a loop and counts the gaps between two
 * reads of more than 4, 8 and 16 ms (the thread did not run). The two take turns of 2 s. On a
 * virtual machine whose host takes back an idle virtual CPU, the first has late wake-ups and
 * the second no gaps. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct tally {
    long n, over4, over8, over16;
    double max;
};

static void count(struct tally *t, double ms)
{
    t->n++;
    t->over4 += ms > 4;
    t->over8 += ms > 8;
    t->over16 += ms > 16;
    if (ms > t->max)
        t->max = ms;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 20;
    int ms = argc > 2 ? atoi(argv[2]) : 8;
    if (secs <= 0 || ms <= 0) {
        fprintf(stderr, "usage: vcpu [seconds] [sleep ms]\n");
        return 2;
    }
    struct tally sleep = {0}, spin = {0};
    /* the two in turns of 2 s, so that both see the host's load of the same minutes */
    double end = now() + 2 * secs;
    while (now() < end) {
        double t0 = now();
        while (now() - t0 < 2) {
            double a = now();
            poll(NULL, 0, ms);
            count(&sleep, (now() - a) * 1e3 - ms);
        }
        t0 = now();
        double prev = t0;
        while (prev - t0 < 2) {
            double a = now();
            if ((a - prev) * 1e3 > 1) /* only the gaps: a read is ~30 ns */
                count(&spin, (a - prev) * 1e3);
            prev = a;
        }
    }
    printf("sleeping %d ms in poll() for %.0f s: %ld wake-ups, late by > 4 ms %ld, > 8 ms %ld, "
           "> 16 ms %ld, max %.1f ms\n", ms, secs, sleep.n, sleep.over4, sleep.over8,
           sleep.over16, sleep.max);
    printf("spinning for %.0f s: gaps > 4 ms %ld, > 8 ms %ld, > 16 ms %ld, max %.1f ms\n", secs,
           spin.over4, spin.over8, spin.over16, spin.max);
    return 0;
}
