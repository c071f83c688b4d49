/* test_conv_model.c - the model-based test of the conversation: random sequences (seeded,
 * replayable) of send / HTTP failure / refused connection / a stream dropped mid-answer /
 * cancel before and after the first token / an answer cut short / budget refusal / /edit /
 * /retry / /new / quit and resume, run through the real session (network thread, fake server,
 * SQLite store) and checked after every step against a small reference model of its own:
 *   - the messages of the request the fake server received,
 *   - the transcript (conv_transcript of the session's conversation: what the chat draws),
 *   - `export --format json` of the saved conversation (its live path).
 *
 * Usage: test_conv_model [SEQUENCES [SEED]]   (environment: TT_MODEL_SEQS, TT_MODEL_SEED)
 * A failure prints the seed and the sequence number, and the steps so far: run again with
 * that seed and TT_MODEL_FROM=N to replay just that sequence. Prints TAP. */
#include "config.h"
#include "cmd/store.h"
#include "core/conf.h"
#include "core/conv.h"
#include "core/session.h"
#include "store/store.h"
#include "tap.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- the fake server ---- */

static pid_t srv_pid;
static int srv_port, dead_port;
static char tmpdir[256], log_path[320], db_path[320];
static long log_off; /* bytes of the log already read */

static int start_server(void)
{
    const char *srcdir = getenv("srcdir");
    char script[1024], port_file[400];
    snprintf(script, sizeof script, "%s/fake-openai/server.py", srcdir ? srcdir : "tests");
    snprintf(port_file, sizeof port_file, "%s/port", tmpdir);
    char *argv[] = {"python3", script, "--port", "0", "--port-file", port_file, "--log", log_path,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&srv_pid, "python3", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    for (int i = 0; i < 500; i++) { /* 10 s */
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &srv_port) == 1;
            fclose(f);
            if (ok && srv_port > 0)
                return 0;
        }
        usleep(20000);
    }
    return -1;
}

/* A port nothing listens on: bound, then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return 9;
    close(fd);
    return ntohs(a.sin_port);
}

/* The chat requests the server logged since the last call: their bodies' "messages" (the last
 * one), and how many there were. */
static int log_take(cJSON **last_messages)
{
    *last_messages = NULL;
    FILE *f = fopen(log_path, "r");
    if (!f)
        return 0;
    fseek(f, log_off, SEEK_SET);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int count = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* not whole yet */
        log_off += n;
        cJSON *j = cJSON_Parse(line);
        cJSON *path = cJSON_GetObjectItem(j, "path");
        if (cJSON_IsString(path) && strstr(path->valuestring, "chat/completions")) {
            count++;
            cJSON_Delete(*last_messages);
            *last_messages =
                cJSON_DetachItemFromObject(cJSON_GetObjectItem(j, "body"), "messages");
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    return count;
}

/* ---- the reference model ---- */

enum kind { K_OK, K_HTTP, K_REFUSED_CONN, K_DROP, K_CANCEL_EARLY, K_CANCEL_LATE, K_CUT,
            K_BUDGET, K_NKINDS };
static const char *const kind_names[] = {"ok", "http-fail", "conn-refused", "drop",
                                         "cancel-before-first-token", "cancel-after-first-token",
                                         "cut", "budget-refused"};

struct rturn {
    char *prompt;
    enum conv_outcome outcome;
    char *answer;  /* text the answer has (what arrived), NULL: none */
    char *error;   /* failure / refusal text as observed, NULL */
    int requested; /* a request was made: an answer row exists */
};

struct ref {
    char *system;
    struct rturn *t;
    size_t n, cap;
};

static void ref_clear(struct ref *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->t[i].prompt);
        free(r->t[i].answer);
        free(r->t[i].error);
    }
    r->n = 0;
}

static int ref_sent(const struct rturn *t)
{
    return t->outcome == CONV_ANSWERED || t->outcome == CONV_CUT ||
           (t->outcome == CONV_INTERRUPTED && t->answer && *t->answer);
}

/* The messages the next request must carry, with prompt last. */
static cJSON *ref_request(const struct ref *r, const char *prompt)
{
    cJSON *a = cJSON_CreateArray();
    if (r->system) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", r->system);
        cJSON_AddItemToArray(a, m);
    }
    for (size_t i = 0; i < r->n; i++) {
        if (!ref_sent(&r->t[i]))
            continue;
        cJSON *u = cJSON_CreateObject(), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "role", "user");
        cJSON_AddStringToObject(u, "content", r->t[i].prompt);
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", r->t[i].answer ? r->t[i].answer : "");
        cJSON_AddItemToArray(a, u);
        cJSON_AddItemToArray(a, m);
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", prompt);
    cJSON_AddItemToArray(a, u);
    return a;
}

/* The transcript, written independently of conv_transcript's code. */
static char *ref_transcript(const struct ref *r)
{
    struct buf b = BUF_INIT;
    if (r->system)
        buf_printf(&b, "system: %s\n", r->system);
    for (size_t i = 0; i < r->n; i++) {
        const struct rturn *t = &r->t[i];
        buf_printf(&b, "user: %s\n", t->prompt);
        const char *e = t->error ? t->error : "";
        switch (t->outcome) {
        case CONV_ANSWERED:
            buf_printf(&b, "assistant: %s\n", t->answer ? t->answer : "");
            break;
        case CONV_CUT:
            buf_printf(&b, "assistant (cut): %s\n", t->answer ? t->answer : "");
            break;
        case CONV_INTERRUPTED:
            if (t->answer && *t->answer)
                buf_printf(&b, "assistant (interrupted): %s\n", t->answer);
            else
                buf_printf(&b, "interrupted: %s\n", e);
            break;
        case CONV_FAILED:
            buf_printf(&b, "failed: %s\n", e);
            break;
        case CONV_REFUSED:
            buf_printf(&b, "refused: %s\n", e);
            break;
        default:
            break;
        }
    }
    return buf_take(&b);
}

/* The live path's rows as export shows them: "role|content|refused" lines. */
static char *ref_export(const struct ref *r)
{
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < r->n; i++) {
        const struct rturn *t = &r->t[i];
        buf_printf(&b, "user|%s|%d\n", t->prompt, t->outcome == CONV_REFUSED);
        if (t->requested)
            buf_printf(&b, "assistant|%s|0\n", t->answer ? t->answer : "");
    }
    return buf_take(&b);
}

/* ---- the system under test ---- */

struct sut {
    struct conf conf;
    struct store *st;
    struct session *s;
    int open;
    struct buf text;          /* answer text seen by the sink in this exchange */
    char *error;              /* the exchange's error */
    enum api_outcome outcome;
    int ended;
};

static void sink_text(void *ud, int reasoning, const char *s, size_t n, double a, double b)
{
    struct sut *u = ud;
    (void)a, (void)b;
    if (!reasoning)
        buf_append(&u->text, s, n);
}

static void sink_end(void *ud, const struct net_result *r)
{
    struct sut *u = ud;
    u->ended = 1;
    u->outcome = r->outcome;
    free(u->error);
    u->error = r->error ? xstrdup(r->error) : NULL;
}

static void set_url(struct sut *u, int port, const char *spec)
{
    free(u->conf.base_url);
    u->conf.base_url = spec && *spec ? xasprintf("http://127.0.0.1:%d/%s/v1", port, spec)
                                     : xasprintf("http://127.0.0.1:%d/v1", port);
}

static int sut_open(struct sut *u)
{
    const char *err = NULL;
    u->s = session_open(&u->conf, xstrdup("sk-model-test-key-0123456789"), &err);
    if (!u->s) {
        printf("# session_open: %s\n", err);
        return -1;
    }
    session_use_store(u->s, u->st, 1, SESSION_CACHE_OFF);
    /* as the chat does */
    session_set_options(u->s, &(struct session_opts){.keep_answer = 1, .save_refused = 1});
    u->open = 1;
    return 0;
}

static void sut_close(struct sut *u)
{
    if (u->open)
        session_close(u->s);
    u->open = 0;
}

/* Dispatch until the exchange ends; when cancel_after_text, cancel once text has arrived;
 * when cancel_logged, cancel once the server has logged the request. 0, or -1 on a timeout. */
static int run_exchange(struct sut *u, int cancel_after_text, int cancel_logged)
{
    struct session_sink sink = {.ud = u, .text = sink_text, .end = sink_end};
    double until = util_now() + 20;
    int cancelled = 0;
    while (!u->ended) {
        if (util_now() > until)
            return -1;
        struct pollfd p = {.fd = session_fd(u->s), .events = POLLIN};
        int t = session_timeout_ms(u->s);
        poll(&p, 1, cancel_logged && !cancelled ? 5 : t < 0 || t > 50 ? 50 : t);
        session_tick(u->s);
        session_dispatch(u->s, &sink);
        if (!cancelled && !u->ended && cancel_after_text && u->text.len) {
            session_cancel(u->s);
            cancelled = 1;
        }
        if (!cancelled && !u->ended && cancel_logged) {
            struct stat sb;
            if (stat(log_path, &sb) == 0 && sb.st_size > log_off) {
                session_cancel(u->s);
                cancelled = 1;
            }
        }
    }
    return 0;
}

/* ---- the checks ---- */

static int failures;
static struct buf steps; /* what this sequence did, for the failure report */

static int check(int ok, const char *what, const char *got, const char *want)
{
    if (ok)
        return 1;
    failures++;
    printf("# MISMATCH: %s\n# steps: %s\n", what, buf_str(&steps));
    if (got || want)
        printf("# got:\n%s\n# want:\n%s\n", got ? got : "(null)", want ? want : "(null)");
    return 0;
}

static void check_state(struct sut *u, const struct ref *r)
{
    struct buf tb = BUF_INIT;
    conv_transcript(session_conv(u->s), &tb);
    char *want = ref_transcript(r);
    check(strcmp(buf_str(&tb), want) == 0, "transcript", buf_str(&tb), want);
    free(want);
    buf_free(&tb);

    int64_t id = session_conv(u->s)->id;
    want = ref_export(r);
    if (!id) { /* nothing saved yet: nothing to export, and nothing should be owed */
        check(r->n == 0 || strcmp(want, "") == 0, "a conversation with turns is saved", "", want);
        free(want);
        return;
    }
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    char *argv[] = {"export", ids, "--format", "json", NULL};
    char *out = NULL;
    size_t outn = 0;
    FILE *f = open_memstream(&out, &outn);
    FILE *e = fopen("/dev/null", "w");
    int rc = cmd_store_run(u->st, 4, argv, f, e, 0);
    fclose(f);
    fclose(e);
    cJSON *j = cJSON_Parse(out);
    struct buf got = BUF_INIT;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(j, "messages"))
    {
        cJSON *role = cJSON_GetObjectItem(m, "role"), *c = cJSON_GetObjectItem(m, "content");
        cJSON *err = cJSON_GetObjectItem(m, "error");
        int refused = strcmp(role->valuestring, "user") == 0 && cJSON_IsString(err);
        buf_printf(&got, "%s|%s|%d\n", role->valuestring, c->valuestring, refused);
    }
    check(rc == 0 && strcmp(buf_str(&got), want) == 0, "export --format json (live path)",
          buf_str(&got), want);
    cJSON_Delete(j);
    buf_free(&got);
    free(out);
    free(want);
}

/* ---- the steps ---- */

static unsigned rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) % n;
}

/* Send prompt with behaviour k; settle the reference the way the model says. */
static void step_send(struct sut *u, struct ref *r, const char *prompt, enum kind k, int serial)
{
    char reply[64], spec[256];
    snprintf(reply, sizeof reply, "r%d-answer-text", serial);
    int cancel_text = 0, cancel_logged = 0;
    switch (k) {
    case K_OK:
        snprintf(spec, sizeof spec, "reply=%s", reply);
        break;
    case K_HTTP: {
        static const int codes[] = {500, 401, 429, 400, 503};
        snprintf(spec, sizeof spec, "status=%d", codes[rnd(5)]);
        break;
    }
    case K_DROP:
        snprintf(spec, sizeof spec, "reply=%s-%s,drop_after=%d", reply,
                 "and-a-long-tail-that-is-cut-somewhere-in-the-middle", 250 + (int)rnd(400));
        break;
    case K_CANCEL_EARLY:
        snprintf(spec, sizeof spec, "reply=%s,first_delay_ms=10000", reply);
        cancel_logged = 1;
        break;
    case K_CANCEL_LATE:
        snprintf(spec, sizeof spec, "reply=%s-with-more-pieces-to-come,delay_ms=40", reply);
        cancel_text = 1;
        break;
    case K_CUT:
        snprintf(spec, sizeof spec, "replay=openai_length.sse");
        break;
    default:
        spec[0] = 0;
    }
    if (k == K_REFUSED_CONN)
        set_url(u, dead_port, NULL);
    else
        set_url(u, srv_port, spec);
    char *msg = NULL;
    if (k == K_BUDGET) {
        session_budget_command(u->s, "1", &msg);
        free(msg);
    }
    cJSON *want_req = ref_request(r, prompt);
    cJSON *junk;
    log_take(&junk); /* anything earlier */
    cJSON_Delete(junk);
    buf_reset(&u->text);
    u->ended = 0;
    session_send(u->s, prompt);
    int timed_out = run_exchange(u, cancel_text, cancel_logged) < 0;
    check(!timed_out, "the exchange ends", NULL, NULL);
    if (k == K_BUDGET) {
        session_budget_command(u->s, "off", &msg);
        free(msg);
    }
    /* the request the server saw */
    cJSON *got_req = NULL;
    int n = 0;
    for (int tries = 0; tries < 100; tries++) { /* the log line may trail the answer a little */
        cJSON *g;
        int c = log_take(&g);
        n += c;
        if (g) {
            cJSON_Delete(got_req);
            got_req = g;
        }
        if (n || k == K_BUDGET || k == K_REFUSED_CONN)
            break;
        usleep(2000);
    }
    if (k == K_BUDGET || k == K_REFUSED_CONN) {
        check(n == 0, "nothing reaches the server", NULL, NULL);
    } else {
        char *g = got_req ? cJSON_PrintUnformatted(got_req) : NULL;
        char *w = cJSON_PrintUnformatted(want_req);
        check(n == 1 && g && strcmp(g, w) == 0, "the request's messages", g, w);
        free(g);
        free(w);
    }
    cJSON_Delete(got_req);
    cJSON_Delete(want_req);

    /* the reference's turn: the outcome the behaviour must give */
    XGROW(r->t, r->n + 1, r->cap);
    struct rturn *t = &r->t[r->n++];
    memset(t, 0, sizeof *t);
    t->prompt = xstrdup(prompt);
    t->requested = k != K_BUDGET;
    const char *seen = buf_str(&u->text);
    switch (k) {
    case K_OK:
        t->outcome = CONV_ANSWERED;
        check(strcmp(seen, reply) == 0, "the answer streamed", seen, reply);
        t->answer = xstrdup(reply);
        break;
    case K_HTTP:
    case K_REFUSED_CONN:
        t->outcome = CONV_FAILED;
        check(u->text.len == 0, "no text from a failed request", seen, "");
        break;
    case K_DROP:
        t->outcome = u->text.len ? CONV_INTERRUPTED : CONV_FAILED;
        check(strncmp(reply, seen, u->text.len < strlen(reply) ? u->text.len : strlen(reply)) == 0,
              "a dropped stream keeps a prefix of the answer", seen, reply);
        if (u->text.len)
            t->answer = xstrdup(seen);
        break;
    case K_CANCEL_EARLY:
        t->outcome = CONV_INTERRUPTED;
        check(u->text.len == 0, "nothing arrived before the cancel", seen, "");
        break;
    case K_CANCEL_LATE:
        t->outcome = CONV_INTERRUPTED;
        check(u->text.len > 0 && strncmp(seen, reply, strlen(reply) < u->text.len
                                                          ? strlen(reply) : u->text.len) == 0,
              "the text before the cancel is kept", seen, reply);
        t->answer = xstrdup(seen);
        break;
    case K_CUT:
        t->outcome = CONV_CUT;
        check(u->text.len > 0, "a cut answer has text", seen, "some");
        t->answer = xstrdup(seen);
        break;
    case K_BUDGET:
        t->outcome = CONV_REFUSED;
        break;
    default:
        break;
    }
    if (t->outcome != CONV_ANSWERED && t->outcome != CONV_CUT)
        t->error = u->error ? xstrdup(u->error) : NULL;
}

static int run_sequence(unsigned seed, int seq)
{
    rng_state = seed * 2654435761u + (unsigned)seq * 40503u + 1;
    int before = failures;
    buf_reset(&steps);
    struct sut u;
    memset(&u, 0, sizeof u);
    conf_defaults(&u.conf);
    free(u.conf.model);
    u.conf.model = xstrdup("fake-model");
    u.conf.max_retries = 0;
    u.conf.breaker_failures = 1000000;
    u.conf.connect_timeout_ms = 2000;
    u.conf.idle_timeout = 15;
    if (rnd(2)) {
        u.conf.system = xstrdup("you are a test");
    }
    set_url(&u, srv_port, NULL);
    char *err = NULL;
    u.st = store_open(db_path, NULL, &err);
    if (!u.st) {
        printf("# store_open: %s\n", err);
        free(err);
        return 0;
    }
    struct ref r = {.system = u.conf.system};
    if (sut_open(&u) < 0)
        return 0;
    int n_steps = 3 + (int)rnd(8);
    for (int i = 0; i < n_steps && failures == before; i++) {
        unsigned what = rnd(100);
        char prompt[64];
        snprintf(prompt, sizeof prompt, "p%d-%d", seq, i);
        if (what < 55 || r.n == 0) { /* a new turn, any behaviour */
            enum kind k = what < 25 ? K_OK : (enum kind)rnd(K_NKINDS);
            buf_printf(&steps, "send(%s) ", kind_names[k]);
            step_send(&u, &r, prompt, k, seq * 100 + i);
        } else if (what < 67) { /* /edit: a new version of the last turn */
            enum kind k = rnd(3) ? K_OK : (enum kind)rnd(K_NKINDS);
            buf_printf(&steps, "edit(%s) ", kind_names[k]);
            session_fork_last(u.s);
            r.n--;
            free(r.t[r.n].prompt), free(r.t[r.n].answer), free(r.t[r.n].error);
            step_send(&u, &r, prompt, k, seq * 100 + i);
        } else if (what < 79) { /* /retry */
            enum kind k = rnd(3) ? K_OK : (enum kind)rnd(K_NKINDS);
            buf_printf(&steps, "retry(%s) ", kind_names[k]);
            char *again = xstrdup(r.t[r.n - 1].prompt);
            session_fork_last(u.s);
            r.n--;
            free(r.t[r.n].prompt), free(r.t[r.n].answer), free(r.t[r.n].error);
            step_send(&u, &r, again, k, seq * 100 + i);
            free(again);
        } else if (what < 85) { /* /new */
            buf_appends(&steps, "new ");
            session_new_conversation(u.s);
            ref_clear(&r);
        } else { /* quit, then resume the conversation */
            buf_appends(&steps, "quit+resume ");
            int64_t id = session_conv(u.s)->id;
            sut_close(&u);
            if (sut_open(&u) < 0)
                break;
            if (id) {
                char *e = NULL;
                if (!check(session_resume(u.s, id, &e) == 0, "resume", e, NULL))
                    free(e);
            } else {
                ref_clear(&r);
            }
        }
        check_state(&u, &r);
    }
    sut_close(&u);
    store_close(u.st);
    ref_clear(&r);
    free(r.t);
    free(u.error);
    buf_free(&u.text);
    conf_free(&u.conf);
    return failures == before;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : getenv("TT_MODEL_SEQS") ? atoi(getenv("TT_MODEL_SEQS"))
                                                                 : 2000;
    unsigned seed = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10)
                  : getenv("TT_MODEL_SEED") ? (unsigned)strtoul(getenv("TT_MODEL_SEED"), NULL, 10)
                                            : 20261201u;
    int from = getenv("TT_MODEL_FROM") ? atoi(getenv("TT_MODEL_FROM")) : 0;
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tt-model-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("1..0 # SKIP no temporary directory\n");
        return 1;
    }
    snprintf(log_path, sizeof log_path, "%s/requests.jsonl", tmpdir);
    snprintf(db_path, sizeof db_path, "%s/tokterm.db", tmpdir);
    setenv("XDG_STATE_HOME", tmpdir, 1);
    setenv("XDG_CONFIG_HOME", tmpdir, 1);
    if (!TAP_OK(start_server() == 0, "the fake server starts"))
        return tap_done();
    dead_port = closed_port();
    int passed = 0, ran = 0;
    for (int i = from; i < from + n && failures < 5; i++) {
        ran++;
        if (run_sequence(seed, i))
            passed++;
        else
            printf("# sequence %d failed (replay: TT_MODEL_SEED=%u TT_MODEL_FROM=%d "
                   "TT_MODEL_SEQS=1)\n", i, seed, i);
    }
    TAP_OK(passed == ran && ran == n, "%d of %d random sequences (seed %u) agree with the model",
           passed, n, seed);
    kill(srv_pid, SIGTERM);
    waitpid(srv_pid, NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    buf_free(&steps);
    return tap_done();
}
