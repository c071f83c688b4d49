/* rusage.c - run a command and report its wall time, CPU time and peak RSS (bench/benchlib.py).
 *
 * Like GNU time, but in microseconds (time(1) prints CPU in hundredths, too coarse for a 20 ms
 * run). The command is forked from this small process, so its peak RSS is its own (a child
 * forked from Python starts from the Python process's pages, and ru_maxrss survives exec).
 *
 * cc -O2 -o rusage rusage.c
 * usage: rusage [-a] OUTFILE COMMAND [ARG...]
 * OUTFILE gets "wall_s user_s sys_s maxrss_kib exit_code"; the exit code is also this
 * program's (128 + N for a signal N).
 *
 * -a: also what the command leaves running when it exits (this program is their subreaper,
 * PR_SET_CHILD_SUBREAPER, so they become its children as they would become init's): it waits
 * for every one, their CPU is added to user_s and sys_s, and a sixth field, gone_s, is the
 * wall time until the last of them ended (wall_s when there was none). bench/mcp times
 * `tokterm mcp call` so: wall_s until tokterm exits, gone_s until its MCP server is gone.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int adopt = argc > 1 && strcmp(argv[1], "-a") == 0;
    if (adopt) {
        argv++;
        argc--;
        if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
            perror("prctl");
            return 125;
        }
    }
    if (argc < 3) {
        fputs("usage: rusage [-a] OUTFILE COMMAND [ARG...]\n", stderr);
        return 2;
    }
    struct timespec t0, t1, t2;
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
    t2 = t1;
    struct rusage ra;
    int sa;
    while (adopt && wait4(-1, &sa, 0, &ra) > 0) { /* what it left: ECHILD once all are gone */
        clock_gettime(CLOCK_MONOTONIC, &t2);
        ru.ru_utime.tv_sec += ra.ru_utime.tv_sec;
        ru.ru_utime.tv_usec += ra.ru_utime.tv_usec;
        ru.ru_stime.tv_sec += ra.ru_stime.tv_sec;
        ru.ru_stime.tv_usec += ra.ru_stime.tv_usec;
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 125;
    }
    fprintf(f, "%.6f %.6f %.6f %ld %d",
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss, code);
    if (adopt)
        fprintf(f, " %.6f",
                (double)(t2.tv_sec - t0.tv_sec) + (double)(t2.tv_nsec - t0.tv_nsec) / 1e9);
    fputc('\n', f);
    fclose(f);
    return code;
}
