/* rusage.c - run a command and report its wall time, CPU time and peak RSS (bench/benchlib.py).
 *
 * Like GNU time, but in microseconds (time(1) prints CPU in hundredths, too coarse for a 20 ms
 * run). The command is forked from this small process, so its peak RSS is its own (a child
 * forked from Python starts from the Python process's pages, and ru_maxrss survives exec).
 *
 * cc -O2 -o rusage rusage.c
 * usage: rusage OUTFILE COMMAND [ARG...]
 * OUTFILE gets "wall_s user_s sys_s maxrss_kib exit_code"; the exit code is also this
 * program's (128 + N for a signal N).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: rusage OUTFILE COMMAND [ARG...]\n", stderr);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 125;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) {
        perror("wait4");
        return 125;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 125;
    }
    fprintf(f, "%.6f %.6f %.6f %ld %d\n",
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss, code);
    fclose(f);
    return code;
}
