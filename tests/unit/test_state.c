/* test_state.c - the shared quota state (net/state.c, net/state_url.c): URLs, the buckets'
 * figures, and the scripts against a real redis-server started here on a free port in a
 * temporary directory (skipped when it is not installed, a failure under CI or with
 * TOKTERM_REQUIRE_TOOLS=1): booking, sharing between handles, reports, a 429's cool-down, the
 * breaker, a flushed script cache, an unreachable, slow, restarted or password-protected
 * Redis, and no key in it. */
#include "config.h"
#include "net/state.h"

#include "base/util.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/tt-state-XXXXXX";

static void test_urls(void)
{
    struct state_addr a;
    char err[256];
    TAP_INT(state_parse_url("redis://127.0.0.1:6390/2", &a, err, sizeof err), 0, "host:port/db");
    TAP_STR(a.host, "127.0.0.1", "host");
    TAP_INT(a.port, 6390, "port");
    TAP_INT(a.db, 2, "db");
    TAP_INT(state_parse_url("redis://u:p%40ss@r.example", &a, err, sizeof err), 0, "user:pw@host");
    TAP_STR(a.user, "u", "user");
    TAP_STR(a.password, "p@ss", "password unescaped");
    TAP_INT(a.port, 6379, "default port");
    TAP_INT(state_parse_url("redis://:secret@[::1]:7000", &a, err, sizeof err), 0, "IPv6");
    TAP_STR(a.host, "::1", "IPv6 host");
    TAP_STR(a.password, "secret", "password without a user");
    TAP_INT(a.port, 7000, "IPv6 port");
    TAP_INT(state_parse_url("unix:///run/redis.sock?db=3", &a, err, sizeof err), 0, "socket");
    TAP_STR(a.path, "/run/redis.sock", "socket path");
    TAP_INT(a.db, 3, "socket db");
    TAP_INT(a.budget_ms, STATE_BUDGET_MS, "a call's budget: 50 ms unless the URL says");

    /* ?timeout=MS: what a call may take (a Redis across a WAN, or on a loaded machine) */
    TAP_INT(state_parse_url("redis://h:6390/2?timeout=250", &a, err, sizeof err), 0,
            "host:port/db?timeout=");
    TAP_INT(a.budget_ms, 250, "the budget from the URL");
    TAP_INT(a.db, 2, "the db before it");
    TAP_INT(a.port, 6390, "the port before it");
    TAP_INT(state_parse_url("redis://h?timeout=5", &a, err, sizeof err), 0, "host?timeout=");
    TAP_STR(a.host, "h", "the host, the options cut off");
    TAP_INT(a.budget_ms, 5, "5 ms");
    TAP_INT(state_parse_url("unix:///s?db=3&timeout=100", &a, err, sizeof err), 0,
            "socket?db=&timeout=");
    TAP_OK(a.db == 3 && a.budget_ms == 100 && strcmp(a.path, "/s") == 0,
           "socket: path, db and budget (%s %d %d)", a.path, a.db, a.budget_ms);
    TAP_INT(state_parse_url("unix:///s?timeout=100&db=4", &a, err, sizeof err), 0,
            "either order");
    TAP_OK(a.db == 4 && a.budget_ms == 100, "db %d, budget %d", a.db, a.budget_ms);
    TAP_INT(state_parse_url("redis://:pa?ss@h:7", &a, err, sizeof err), 0,
            "a '?' in the password is not an option");
    TAP_OK(strcmp(a.password, "pa?ss") == 0 && a.port == 7 && a.budget_ms == STATE_BUDGET_MS,
           "password, port and budget (%d)", a.budget_ms);
    TAP_INT(state_parse_url("redis://:pa?ss@h:7/1?timeout=80", &a, err, sizeof err), 0,
            "a '?' in the password and options");
    TAP_OK(strcmp(a.password, "pa?ss") == 0 && a.db == 1 && a.budget_ms == 80,
           "password, db and budget (%d)", a.budget_ms);
    TAP_INT(state_parse_url("redis://h:65535?timeout=1", &a, err, sizeof err), 0,
            "the lowest budget and the highest port");
    TAP_OK(a.port == 65535 && a.budget_ms == 1, "port %d, budget %d", a.port, a.budget_ms);
    TAP_INT(state_parse_url("redis://h:1/1000000?timeout=10000", &a, err, sizeof err), 0,
            "the highest budget and database");
    TAP_OK(a.port == 1 && a.db == 1000000 && a.budget_ms == 10000, "port %d, db %d, budget %d",
           a.port, a.db, a.budget_ms);
    static const char *const bad[] = {"http://x", "redis://", "redis://h:0", "redis://h:99999",
                                      "redis://h/x", "unix://rel", "redis://[::1", "",
                                      "redis://h:12ab", "unix:///s?x=1", "redis://h?timeout=0",
                                      "redis://h?timeout=10001", "redis://h/1?timeout=",
                                      "redis://h?timeout=5x", "redis://h?db=1",
                                      "unix:///s?db=1&wait=3", "redis://h/1000001",
                                      "redis://h:-1", "unix:///s?db=-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        TAP_INT(state_parse_url(bad[i], &a, err, sizeof err), -1, bad[i]);
        TAP_OK(util_starts_with(err, "state: "), "'%s' says why: %s", bad[i], err);
    }
    char longopt[300] = "redis://h?timeout=5";
    while (strlen(longopt) < sizeof longopt - 12)
        strcat(longopt, "&timeout=5");
    TAP_INT(state_parse_url(longopt, &a, err, sizeof err), -1, "options of 280 bytes or more");
    TAP_OK(util_starts_with(err, "state: "), "say why: %s", err);
    TAP_INT(state_parse_url("redis://u:hunter2@h:1/x", &a, err, sizeof err), -1, "bad db");
    TAP_OK(!strstr(err, "hunter2"), "the message never repeats the password");

    char q1[33], q2[33], e1[33];
    state_quota_id("http://h/v1/chat/completions", "Bearer sk-abc", q1);
    state_quota_id("http://h/v1/chat/completions", "Bearer sk-abd", q2);
    state_endpoint_id("http://h/v1/chat/completions", e1);
    TAP_INT(strlen(q1), 32, "a quota id is 32 hex digits");
    TAP_OK(strcmp(q1, q2) != 0 && strcmp(q1, e1) != 0, "ids differ by key and kind");
    TAP_OK(!strstr(q1, "abc"), "the id is a hash, not the key");
}

static void test_dims(void)
{
    struct ratelimit_state s;
    ratelimit_state_init(&s, 0, 0);
    struct state_dim d[2];
    state_dims(&s, 100, 50, d);
    TAP_OK(d[0].cap == 0 && d[0].level < 0, "nothing known: no bucket, no level");
    static const char *const h[] = {"x-ratelimit-limit-requests: 600\r\n",
                                    "x-ratelimit-remaining-requests: 7\r\n",
                                    "x-ratelimit-reset-requests: 0.250s\r\n"};
    for (int i = 0; i < 3; i++)
        ratelimit_feed(&s, NULL, h[i], strlen(h[i]), 100, 1e9);
    ratelimit_merge_report(&s, &s, 100, 0, 1);
    state_dims(&s, 100, 50, d);
    TAP_OK(d[0].rate > 9.99 && d[0].rate < 10.01, "rate from the limit: 10/s (%g)", d[0].rate);
    TAP_OK(d[0].cap > 8.9 && d[0].cap < 9.1, "size 10 seen, one unit of margin: 9 (%g)",
           d[0].cap);
    TAP_OK(d[0].level > 6.4 && d[0].level < 6.6,
           "level: 7.5 from the reset, minus the margin (%g)", d[0].level);
    TAP_OK(d[1].cost == 50 && d[0].cost == 1, "costs: one request, its tokens");
    ratelimit_state_init(&s, 120, 0);
    state_dims(&s, 100, 0, d);
    TAP_OK(d[0].cap == 1 && d[0].rate == 2,
           "configured rpm 120: a second's worth (2), minus the margin (%g)", d[0].cap);
    ratelimit_state_init(&s, 30, 0);
    state_dims(&s, 100, 0, d);
    TAP_OK(d[0].cap == 1, "rpm 30, under one a second: one at a time, as the local bucket "
           "holds (until 2026-12 the minute's 29; %g)", d[0].cap);
    static const char *const m[] = {"x-ratelimit-limit-requests: 600\r\n",
                                    "x-ratelimit-remaining-requests: 599\r\n",
                                    "x-ratelimit-reset-requests: 100ms\r\n"};
    ratelimit_state_init(&s, 0, 0);
    for (int i = 0; i < 3; i++)
        ratelimit_feed(&s, NULL, m[i], strlen(m[i]), 100, 1e9);
    ratelimit_merge_report(&s, &s, 100, 0, 1);
    state_dims(&s, 100, 0, d);
    TAP_OK(d[0].cap >= 1 && d[0].cap <= d[0].rate - 1 + 1e-9 && d[0].rate > 9 && d[0].rate <= 10,
           "600 a minute reported as a minute: at most a second's burst less the margin "
           "(%g at %g/s)", d[0].cap, d[0].rate);
}

/* ---- a real redis-server ---- */

static pid_t redis_pid;
static int redis_port;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &n) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static int redis_start(const char *pass)
{
    char port[16];
    snprintf(port, sizeof port, "%d", redis_port);
    redis_pid = fork();
    if (redis_pid == 0) {
        freopen("/dev/null", "w", stdout);
        const char *argv[16] = {"redis-server", "--port", port, "--bind", "127.0.0.1",
                                "--dir", dir, "--save", "", "--appendonly", "no"};
        int n = 11;
        if (pass) {
            argv[n++] = "--requirepass";
            argv[n++] = pass;
        }
        argv[n] = NULL;
        execvp("redis-server", (char **)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* up to 4 s for it to listen */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)redis_port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (ok)
            return 0;
        int st;
        if (waitpid(redis_pid, &st, WNOHANG) == redis_pid)
            return -1;
        usleep(20000);
    }
    return -1;
}

static void redis_stop(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGKILL);
        waitpid(redis_pid, NULL, 0);
        redis_pid = 0;
    }
}

/* Run redis-cli with args on our port; its output (first line) into out. */
static void cli(const char *args, char *out, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d %s 2>/dev/null", redis_port, args);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p) {
        size_t n = fread(out, 1, size - 1, p);
        out[n] = '\0';
        pclose(p);
    }
}

static int tool_required(void)
{
    const char *v[2] = {getenv("CI"), getenv("TOKTERM_REQUIRE_TOOLS")};
    for (int i = 0; i < 2; i++)
        if (v[i] && *v[i] && strcmp(v[i], "0") && strcasecmp(v[i], "false") &&
            strcasecmp(v[i], "no"))
            return 1;
    return 0;
}

static struct state *open_state(const char *pw)
{
    char url[64], err[256];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", redis_port);
    return state_new(url, pw, err, sizeof err);
}

static void test_redis(void)
{
    struct state *a = open_state(NULL), *b = open_state(NULL);
    double w = -1;
    struct state_dim none[2] = {{0, 0, 1, -1}, {0, 0, 0, -1}};
    TAP_INT(state_admit(a, "q1", "e1", none, 10, 0, &w), STATE_LOCAL,
            "limits unknown everywhere: the local state decides");
    TAP_OK(state_connected(a), "connected on first use");
    TAP_INT(state_admit(b, "q1", "e1", none, 10, 0, &w), STATE_WAIT,
            "one process probes unknown limits: another waits for what it learns");
    TAP_OK(w > 0 && w < 0.05, "and asks again soon (%g)", w);
    TAP_INT(state_admit(a, "q0", "e1", none, 10, 1, &w), STATE_LOCAL,
            "an endpoint that sends no limits: local pacing");
    TAP_INT(state_admit(b, "q0", "e1", none, 10, 0, &w), STATE_LOCAL,
            "for every process, without a probe");
    /* a bucket of 5 refilled at 10 a second */
    struct state_dim d[2] = {{5, 10, 1, -1}, {0, 0, 100, -1}};
    int go_now = 0;
    for (int i = 0; i < 5; i++)
        go_now += state_admit(i % 2 ? a : b, "q1", "e1", d, 10, 0, &w) == STATE_GO && w == 0;
    TAP_INT(go_now, 5, "two handles (processes) share one bucket of 5: five go at once");
    TAP_INT(state_peers(a), 2, "Redis counts the processes sharing the quota");
    TAP_INT(state_admit(a, "q1", "e1", d, 10, 0, &w), STATE_GO, "the sixth is booked");
    TAP_OK(w > 0.05 && w < 0.11, "for about 0.1 s later (%g)", w);
    TAP_INT(state_admit(b, "q1", "e1", none, 10, 0, &w), STATE_GO,
            "another process that knows nothing yet uses the sizes learnt");
    TAP_OK(w > 0.15 && w < 0.21, "and is booked after it (%g)", w);
    TAP_INT(state_admit(a, "q1", "e1", d, 0.1, 0, &w), STATE_WAIT,
            "a wait longer than max_book is not booked");
    TAP_INT(state_admit(a, "q2", "e1", d, 10, 0, &w), STATE_GO, "another quota has its own bucket");
    TAP_OK(w == 0, "and goes at once");

    /* reports only bring a level down */
    struct state_dim r[2] = {{5, 10, 1, 4}, {0, 0, 0, -1}};
    state_report(a, "q2", r, 0); /* 4 left: no change, it is lower already */
    r[0].level = 0;
    state_report(a, "q2", r, 0);
    state_flush(a);
    TAP_INT(state_admit(b, "q2", "e1", d, 10, 0, &w), STATE_GO, "after a report of 0 left");
    TAP_OK(w > 0.05, "the next one waits for the refill (%g)", w);

    /* a 429 on a pool key: every process skips it for the cool-down */
    state_cool(a, "q3", 5);
    state_flush(a);
    TAP_INT(state_admit(b, "q3", "e1", d, 10, 0, &w), STATE_COOL, "a key cooling down (429)");
    TAP_OK(w > 4 && w <= 5, "for the rest of its cool-down (%g)", w);

    /* the breaker: 3 failures from two processes open it */
    state_breaker(a, "e2", 0, 3, 30);
    state_breaker(b, "e2", 0, 3, 30);
    state_flush(a);
    state_flush(b);
    TAP_INT(state_admit(a, "q4", "e2", d, 10, 0, &w), STATE_GO, "two failures: still closed");
    state_breaker(a, "e2", 1, 3, 30);
    state_flush(a);
    state_breaker(b, "e2", 0, 3, 30);
    state_breaker(a, "e2", 0, 3, 30);
    state_flush(b);
    TAP_INT(state_admit(a, "q4", "e2", d, 10, 0, &w), STATE_GO, "a success in between resets it");
    state_breaker(b, "e2", 0, 3, 30);
    state_flush(b);
    TAP_INT(state_admit(a, "q4", "e2", d, 10, 0, &w), STATE_OPEN, "three in a row open it");
    TAP_OK(w > 29 && w <= 30, "for its cool-down (%g)", w);

    /* the script cache flushed: EVALSHA answers NOSCRIPT, EVAL takes over */
    char out[4096];
    unsigned long calls, fb0, fb1;
    state_counts(a, &calls, &fb0);
    cli("SCRIPT FLUSH", out, sizeof out);
    TAP_INT(state_admit(a, "q5", "e1", d, 10, 0, &w), STATE_GO, "after SCRIPT FLUSH");
    state_counts(a, &calls, &fb1);
    TAP_INT(fb1, fb0, "no fallback to the local state");
    TAP_OK(state_take_warning(a) == NULL, "and no warning");

    /* nothing but hashes in Redis */
    char q[33];
    state_quota_id("http://h/v1", "Bearer sk-secret-key-123", q);
    state_cool(a, q, 1);
    state_flush(a);
    cli("--scan --pattern '*'", out, sizeof out);
    TAP_OK(strstr(out, "tokterm:q:") && !strstr(out, "sk-secret"), "keys are hashes");
    cli("--no-raw HGETALL tokterm:q:q1", out, sizeof out);
    TAP_OK(strstr(out, "rlvl") && strstr(out, "rcap"), "a quota holds its bucket's figures");

    /* Redis restarted: the local state answers, one warning, back after the retry interval */
    redis_stop();
    double t0 = util_now();
    TAP_INT(state_admit(a, "q1", "e1", d, 10, 0, &w), STATE_LOCAL, "Redis gone: local state");
    const char *warn = state_take_warning(a);
    TAP_OK(warn && strstr(warn, "unreachable") && strstr(warn, "local state"),
           "a warning: %s", warn ? warn : "(none)");
    TAP_INT(state_admit(a, "q1", "e1", d, 10, 0, &w), STATE_LOCAL, "still gone");
    TAP_OK(state_take_warning(a) == NULL, "the warning is given once");
    TAP_OK(util_now() - t0 < 0.5, "never hangs (%.3f s)", util_now() - t0);
    TAP_INT(redis_start(NULL), 0, "redis-server restarted (empty)");
    usleep(1100 * 1000);
    struct state_dim seed[2] = {{5, 10, 1, 2}, {0, 0, 0, -1}};
    TAP_INT(state_admit(a, "q1", "e1", seed, 10, 0, &w), STATE_GO, "back: booked in Redis again");
    warn = state_take_warning(a);
    TAP_OK(warn && strstr(warn, "reachable again"), "says so: %s", warn ? warn : "(none)");
    cli("HGET tokterm:q:q1 rlvl", out, sizeof out);
    TAP_OK(atof(out) > 0.9 && atof(out) < 1.1,
           "merged back: the bucket starts from the local level (2 left, one booked: %g)", atof(out));
    state_free(a);
    state_free(b);

    /* a password */
    redis_stop();
    TAP_INT(redis_start("s3cret"), 0, "redis-server with a password");
    a = open_state("s3cret");
    TAP_INT(state_admit(a, "q1", "e1", d, 10, 0, &w), STATE_GO, "AUTH with the password");
    state_free(a);
    a = open_state("wrong");
    TAP_INT(state_admit(a, "q1", "e1", d, 10, 0, &w), STATE_LOCAL, "a wrong password: local state");
    warn = state_take_warning(a);
    TAP_OK(warn && strstr(warn, "AUTH") && !strstr(warn, "wrong"),
           "the warning names AUTH, not the password: %s", warn ? warn : "(none)");
    state_free(a);
    redis_stop();
}

/* A socket listening on a free port of 127.0.0.1, its address in *sa. */
static int listen_local(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof *sa;
    bind(fd, (struct sockaddr *)sa, sizeof *sa);
    listen(fd, 8);
    getsockname(fd, (struct sockaddr *)sa, &n);
    return fd;
}

/* A server that accepts and never answers: a call costs the budget, not more. */
static void test_slow(void)
{
    struct sockaddr_in sa;
    int fd = listen_local(&sa);
    char url[64], err[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
    struct state *st = state_new(url, NULL, err, sizeof err);
    struct state_dim d[2] = {{5, 10, 1, -1}, {0, 0, 0, -1}};
    double w, t0 = util_now();
    TAP_INT(state_admit(st, "q", "e", d, 10, 0, &w), STATE_LOCAL, "a silent server: local state");
    double took = util_now() - t0;
    TAP_OK(took < 0.5, "after the budget, not a hang (%.3f s)", took);
    const char *warn = state_take_warning(st);
    TAP_OK(warn && strstr(warn, "unreachable"), "with a warning: %s", warn ? warn : "(none)");
    t0 = util_now();
    state_admit(st, "q", "e", d, 10, 0, &w);
    TAP_OK(util_now() - t0 < 0.01, "the next call within a second does not try again");
    state_free(st);

    /* ?timeout=300: the same silent server is waited for that long, not 50 ms */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=300", ntohs(sa.sin_port));
    st = state_new(url, NULL, err, sizeof err);
    t0 = util_now();
    TAP_INT(state_admit(st, "q", "e", d, 10, 0, &w), STATE_LOCAL,
            "a silent server with ?timeout=300: local state");
    took = util_now() - t0;
    TAP_OK(took >= 0.29 && took < 1.5, "after 300 ms, not 50 (%.3f s)", took);
    state_free(st);
    close(fd);

    snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
    st = state_new(url, NULL, err, sizeof err);
    TAP_INT(state_admit(st, "q", "e", d, 10, 0, &w), STATE_LOCAL, "nothing listening: local state");
    state_free(st);
    TAP_OK(state_new("http://x", NULL, err, sizeof err) == NULL, "a bad URL: no handle");
}

/* A server whose every reply announces a 300 MB string and then sends it as fast as it can:
 * the call ends at a reply larger than ours can be, not after buffering it (until 2026-12
 * hiredis kept all of it: 300 MB more resident per call; 2 GB made 3.9 GB). The budget is
 * 10 s so that it is the size that ends the call. */
static void test_huge_reply(void)
{
    struct sockaddr_in sa;
    int fd = listen_local(&sa);
    pid_t kid = fork();
    if (kid == 0) {
        static char chunk[1 << 20];
        memset(chunk, 'a', sizeof chunk);
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                _exit(0);
            char in[4096];
            if (read(c, in, sizeof in) > 0 && write(c, "$300000000\r\n", 12) == 12)
                for (int i = 0; i < 300; i++)
                    if (write(c, chunk, sizeof chunk) < 0)
                        break;
            close(c);
        }
    }
    close(fd);
    char url[80], err[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=10000", ntohs(sa.sin_port));
    struct state *st = state_new(url, NULL, err, sizeof err);
    struct state_dim d[2] = {{5, 10, 1, -1}, {0, 0, 0, -1}};
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double w;
    TAP_INT(state_admit(st, "q", "e", d, 10, 0, &w), STATE_LOCAL,
            "a server announcing a 300 MB reply: local state");
    getrusage(RUSAGE_SELF, &r1);
    TAP_OK(r1.ru_maxrss - r0.ru_maxrss < 32 * 1024, "not buffered: %ld KB more resident",
           r1.ru_maxrss - r0.ru_maxrss);
    const char *warn = state_take_warning(st);
    TAP_OK(warn && strstr(warn, "larger than"), "the warning says why: %s",
           warn ? warn : "(none)");
    state_free(st);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir))
        return 1;
    test_urls();
    test_dims();
    test_slow();
    test_huge_reply();
    redis_port = free_port();
    if (system("command -v redis-server >/dev/null && command -v redis-cli >/dev/null") != 0) {
        if (tool_required())
            TAP_OK(0, "redis-server and redis-cli are installed (required under CI)");
        else
            printf("# redis-server not installed: its tests skipped\n");
    } else if (redis_start(NULL) != 0) {
        TAP_OK(0, "redis-server starts");
    } else {
        test_redis();
    }
    redis_stop();
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return tap_done();
}
