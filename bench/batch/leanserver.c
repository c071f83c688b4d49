/* leanserver.c - the batch benchmark's fake chat-completions server (bench/batch/run.py).
 *
 * Every POST waits exactly --delay-ms from the moment its request is complete, then gets an
 * OpenAI SSE stream (role delta, six content deltas, stop, usage when asked, [DONE]) in one
 * write. One thread, epoll, HTTP/1.1 keep-alive; the waits are a FIFO (every request waits the
 * same time, so deadlines come in arrival order) driven by a timerfd armed at the head's
 * absolute deadline, to the microsecond. A Python asyncio server (bench/batch/server.py, kept
 * for comparison) wakes up to 1 ms late (epoll_wait's millisecond timeout) and spends its
 * event loop on 32 connections, which the benchmark would count against the client.
 * GET /_stats: {"requests":n,"connections":n,"max_in_flight":n,"late_us_p50":n,"late_us_max":n,
 * "turn_us_p50":n,"turn_us_p90":n,"turns":n}; GET /_reset empties the lateness and turnaround
 * samples (a benchmark reads them per run). The turnaround is the client's own time per
 * request: from an answer written on a connection to the next request complete on it (a
 * client that costs nothing: a loopback round trip, ~0.05 ms).
 *
 * --capture PREFIX: while the file PREFIX.on exists, each POST's body is written to PREFIX.1,
 * PREFIX.2, ... (numbered from 1 again once PREFIX.on has been absent), so that a benchmark can
 * post with curl exactly the bytes a client sent (bench/resume/run.py); the requests it times
 * write nothing. A request
 * with "Expect: 100-continue" gets its interim 100 at once, as a real server sends it.
 *
 * cc -O2 -o leanserver leanserver.c
 * usage: leanserver --port-file F [--port 0] [--delay-ms 50] [--capture PREFIX]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536

struct conn {
    unsigned gen; /* bumped when the fd is closed: queued answers for an old gen are dropped */
    int open;
    char *in;
    size_t in_len, in_cap;
    char *out; /* what a short write left */
    size_t out_len, out_off;
    int continued; /* the 100 Continue of the request being read was sent */
    int64_t answered_ns; /* when its last answer was written; 0 = none since it opened */
};

struct job {
    int fd;
    unsigned gen;
    int64_t due_ns;
    int usage;
};

static struct conn conns[MAX_FD];
static struct job *fifo;
static size_t fifo_cap, fifo_head, fifo_len;
static long n_requests, n_connections, max_in_flight;
static int64_t delay_ns = 50000000;
static int64_t *late, *turn;
static size_t late_len, late_cap, turn_len, turn_cap;
static int ep, tfd;
static const char *capture_prefix;
static int capture_n;

/* --capture: keep the body of a POST while PREFIX.on exists. */
static void capture(const char *body, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.on", capture_prefix);
    if (access(path, F_OK) != 0) {
        capture_n = 0;
        return;
    }
    snprintf(path, sizeof path, "%s.%d", capture_prefix, ++capture_n);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(body, 1, len, f);
        fclose(f);
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    p = realloc(p, c * size);
    if (!p) {
        perror("realloc");
        exit(1);
    }
    *cap = c;
    return p;
}

static void conn_close(int fd)
{
    struct conn *c = &conns[fd];
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    c->gen++;
    c->open = 0;
    c->in_len = c->out_len = c->out_off = 0;
    c->continued = 0;
    c->answered_ns = 0;
}

static void conn_send(int fd, const char *data, size_t len)
{
    struct conn *c = &conns[fd];
    if (c->out_len == c->out_off) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno != EAGAIN) {
            conn_close(fd);
            return;
        }
        if (w < 0)
            w = 0;
        data += w;
        len -= (size_t)w;
        if (!len)
            return;
        c->out_len = c->out_off = 0;
    }
    char *o = malloc(c->out_len - c->out_off + len);
    if (!o)
        exit(1);
    memcpy(o, c->out + c->out_off, c->out_len - c->out_off);
    memcpy(o + c->out_len - c->out_off, data, len);
    free(c->out);
    c->out = o;
    c->out_len = c->out_len - c->out_off + len;
    c->out_off = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

static void answer(int fd, int usage)
{
    static const char *pieces[] = {"This ", "is a ", "benchmark ", "answer ", "from the ",
                                   "lean server."};
    static const char head[] = "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\","
                               "\"created\":1700000000,\"model\":\"bench-model\",\"choices\":";
    char body[4096];
    size_t n = 0;
    n += (size_t)snprintf(body + n, sizeof body - n,
                          "%s[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                          "\"finish_reason\":null}]}\n\n", head);
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                              "\"finish_reason\":null}]}\n\n", head, pieces[i]);
    n += (size_t)snprintf(body + n, sizeof body - n,
                          "%s[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head);
    if (usage)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6,"
                              "\"total_tokens\":15}}\n\n", head);
    n += (size_t)snprintf(body + n, sizeof body - n, "data: [DONE]\n\n");
    char msg[5000];
    int h = snprintf(msg, sizeof msg,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-cache\r\nContent-Length: %zu\r\n\r\n", n);
    memcpy(msg + h, body, n);
    conn_send(fd, msg, (size_t)h + n);
    conns[fd].answered_ns = now_ns();
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median and the 90th percentile of v[0..n) (sorted here), in microseconds. */
static void quantiles(int64_t *v, size_t n, int64_t *p50, int64_t *p90, int64_t *mx)
{
    *p50 = *p90 = *mx = 0;
    if (!n)
        return;
    qsort(v, n, sizeof *v, cmp64);
    *p50 = v[n / 2] / 1000;
    *p90 = v[n * 9 / 10] / 1000;
    *mx = v[n - 1] / 1000;
}

static void stats(int fd)
{
    int64_t p50, p90, mx, t50, t90, tmx;
    quantiles(late, late_len, &p50, &p90, &mx);
    quantiles(turn, turn_len, &t50, &t90, &tmx);
    char body[512], msg[768];
    int n = snprintf(body, sizeof body,
                     "{\"requests\":%ld,\"connections\":%ld,\"in_flight\":%zu,"
                     "\"max_in_flight\":%ld,\"late_us_p50\":%lld,\"late_us_max\":%lld,"
                     "\"turn_us_p50\":%lld,\"turn_us_p90\":%lld,\"turns\":%zu}",
                     n_requests, n_connections, fifo_len, max_in_flight, (long long)p50,
                     (long long)mx, (long long)t50, (long long)t90, turn_len);
    int h = snprintf(msg, sizeof msg, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %d\r\n\r\n%s", n, body);
    conn_send(fd, msg, (size_t)h);
}

static void arm(void)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (fifo_len) {
        int64_t d = fifo[fifo_head].due_ns;
        its.it_value.tv_sec = d / 1000000000;
        its.it_value.tv_nsec = d % 1000000000;
        if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
            its.it_value.tv_nsec = 1;
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void enqueue(int fd, int usage)
{
    fifo = grow(fifo, &fifo_cap, fifo_len + 1, sizeof *fifo);
    if (fifo_head + fifo_len >= fifo_cap) { /* compact */
        memmove(fifo, fifo + fifo_head, fifo_len * sizeof *fifo);
        fifo_head = 0;
    }
    fifo[fifo_head + fifo_len++] = (struct job){fd, conns[fd].gen, now_ns() + delay_ns, usage};
    if ((long)fifo_len > max_in_flight)
        max_in_flight = (long)fifo_len;
    if (fifo_len == 1)
        arm();
}

static void fire(void)
{
    uint64_t expirations;
    if (read(tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    int64_t now = now_ns();
    while (fifo_len && fifo[fifo_head].due_ns <= now) {
        struct job j = fifo[fifo_head++];
        fifo_len--;
        late = grow(late, &late_cap, late_len + 1, sizeof *late);
        late[late_len++] = now - j.due_ns;
        if (conns[j.fd].open && conns[j.fd].gen == j.gen)
            answer(j.fd, j.usage);
    }
    if (!fifo_len)
        fifo_head = 0;
    arm();
}

/* Requests complete in c->in: handle them. */
static void parse(int fd)
{
    struct conn *c = &conns[fd];
    for (;;) {
        char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!end)
            return;
        size_t head_len = (size_t)(end - c->in) + 4;
        size_t clen = 0;
        for (char *p = c->in; p < end; p++) {
            if ((p == c->in || p[-1] == '\n') && strncasecmp(p, "content-length:", 15) == 0)
                clen = strtoul(p + 15, NULL, 10);
        }
        if (c->in_len < head_len + clen) {
            /* the interim answer a client that asked for one waits for (once per request) */
            if (!c->continued && memmem(c->in, head_len, "100-continue", 12)) {
                c->continued = 1;
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                conn_send(fd, cont, sizeof cont - 1);
            }
            return;
        }
        c->continued = 0;
        if (capture_prefix && strncmp(c->in, "POST ", 5) == 0)
            capture(c->in + head_len, clen);
        int get = strncmp(c->in, "GET ", 4) == 0;
        if (get && strncmp(c->in, "GET /_reset", 11) == 0) {
            late_len = turn_len = 0;
            stats(fd);
        } else if (get) {
            stats(fd);
        } else {
            if (c->answered_ns) {
                turn = grow(turn, &turn_cap, turn_len + 1, sizeof *turn);
                turn[turn_len++] = now_ns() - c->answered_ns;
                c->answered_ns = 0;
            }
            n_requests++;
            enqueue(fd, memmem(c->in + head_len, clen, "include_usage", 13) != NULL);
        }
        if (!c->open)
            return;
        memmove(c->in, c->in + head_len + clen, c->in_len - head_len - clen);
        c->in_len -= head_len + clen;
    }
}

static void on_readable(int fd)
{
    struct conn *c = &conns[fd];
    for (;;) {
        c->in = grow(c->in, &c->in_cap, c->in_len + 65536, 1);
        ssize_t r = read(fd, c->in + c->in_len, c->in_cap - c->in_len);
        if (r > 0) {
            c->in_len += (size_t)r;
            continue;
        }
        if (r == 0 || errno != EAGAIN) {
            conn_close(fd);
            return;
        }
        break;
    }
    parse(fd);
}

static void on_writable(int fd)
{
    struct conn *c = &conns[fd];
    while (c->out_off < c->out_len) {
        ssize_t w = write(fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0) {
            if (errno != EAGAIN)
                conn_close(fd);
            return;
        }
        c->out_off += (size_t)w;
    }
    c->out_len = c->out_off = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    const char *port_file = NULL;
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--delay-ms") == 0)
            delay_ns = (int64_t)(atof(argv[i + 1]) * 1e6);
        else if (strcmp(argv[i], "--capture") == 0)
            capture_prefix = argv[i + 1];
    }
    if (!port_file) {
        fputs("usage: leanserver --port-file F [--port 0] [--delay-ms 50] [--capture PREFIX]\n",
              stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 512) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
        perror("listen");
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 ||
        rename(tmp, port_file) != 0) {
        perror(port_file);
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    struct epoll_event evs[64];
    while (!stop) {
        int n = epoll_wait(ep, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int cfd;
                while ((cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (cfd >= MAX_FD) {
                        close(cfd);
                        continue;
                    }
                    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conns[cfd].open = 1;
                    n_connections++;
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = cfd};
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ce);
                }
            } else if (fd == tfd) {
                fire();
            } else {
                if (evs[i].events & EPOLLOUT)
                    on_writable(fd);
                if (conns[fd].open && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    on_readable(fd);
            }
        }
    }
    return 0;
}
