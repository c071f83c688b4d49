/* tools.c - the registry of tool sources, approval policy, calls on a worker thread, and the
 * test tools. */
#include "config.h"
#include "core/tools.h"
#include "proto/api.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tools {
    struct tool_source **src;
    unsigned char *listed;
    size_t n_src, cap_src;
    struct tools_entry *e;
    size_t n, cap;
    struct api_tool *api; /* tools_api's array */
    size_t cap_api;
};

struct tools *tools_new(void)
{
    return xcalloc(1, sizeof(struct tools));
}

void tools_free(struct tools *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].name);
        free(t->e[i].def.name);
        free(t->e[i].def.description);
        free(t->e[i].def.schema);
    }
    for (size_t i = 0; i < t->n_src; i++)
        if (t->src[i]->close)
            t->src[i]->close(t->src[i]);
    free(t->src);
    free(t->listed);
    free(t->e);
    free(t->api);
    free(t);
}

void tools_add(struct tools *t, struct tool_source *src)
{
    size_t cap = t->cap_src;
    t->src = xgrow(t->src, t->n_src + 1, &t->cap_src, sizeof *t->src);
    t->listed = xgrow(t->listed, t->n_src + 1, &cap, 1);
    t->src[t->n_src] = src;
    t->listed[t->n_src++] = 0;
}

static int wire_taken(const struct tools *t, const char *wire)
{
    return tools_find_wire(t, wire) != NULL;
}

static void entry_add(struct tools *t, struct tool_source *src, struct tool_def *d)
{
    t->e = xgrow(t->e, t->n + 1, &t->cap, sizeof *t->e);
    struct tools_entry *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    e->name = xasprintf("%s.%s", src->name, d->name);
    tool_wire_name(e->name, e->wire, sizeof e->wire);
    for (int k = 2; wire_taken(t, e->wire); k++) { /* "a.b_c" and "a_b.c": both a__b_c */
        char base[72];
        tool_wire_name(e->name, base, sizeof base);
        base[58] = 0;
        snprintf(e->wire, sizeof e->wire, "%.58s_%d", base, k % 100000);
    }
    e->def = *d;
    e->tool = e->def.name;
    e->src = src;
    memset(d, 0, sizeof *d);
    t->n++;
}

/* ---- a worker thread that signals a pipe when it is done (tool jobs, the listing) ---- */

/* The thread is made with the asynchronous signals blocked (so are the threads it makes: an
 * MCP server's reader): SIGINT, SIGWINCH and the rest reach the front end's thread. */
static void worker_start(pthread_t *th, int fds[2], void *(*fn)(void *), void *arg)
{
    if (pipe(fds) < 0)
        xmalloc_die(0);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    sigset_t all, old;
    sigfillset(&all);
    static const int sync[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < sizeof sync / sizeof sync[0]; i++)
        sigdelset(&all, sync[i]);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int e = pthread_create(th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        xmalloc_die(0);
}

static void worker_signal(int *done, int fd)
{
    __atomic_store_n(done, 1, __ATOMIC_RELEASE);
    ssize_t w;
    do
        w = write(fd, "x", 1);
    while (w < 0 && errno == EINTR);
}

static void worker_end(pthread_t th, int fds[2])
{
    pthread_join(th, NULL);
    close(fds[0]);
    close(fds[1]);
}

/* ---- listing ---- */

struct tools_loader {
    pthread_t th;
    int pipe[2];
    int cancel, done, rc;
    struct tools *t;
    struct buf err;
    pthread_mutex_t mu;               /* now and since */
    const struct tool_source *now;    /* being listed, NULL between sources */
    double since;
};

/* tools_load, given up when *cancel is set; l (may be NULL) is told which source is listed. */
static int tools_load_run(struct tools *t, const int *cancel, struct tools_loader *l,
                          struct buf *err)
{
    int rc = 0;
    for (size_t i = 0; i < t->n_src; i++) {
        if (t->listed[i])
            continue;
        struct tool_def *defs = NULL;
        size_t n = 0;
        struct buf e = BUF_INIT;
        int r = -1;
        if (cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE)) {
            buf_printf(&e, "%s: not started (cancelled)", t->src[i]->name);
        } else {
            if (l) {
                pthread_mutex_lock(&l->mu);
                l->now = t->src[i];
                l->since = util_now();
                pthread_mutex_unlock(&l->mu);
            }
            r = t->src[i]->list(t->src[i], cancel, &defs, &n, &e);
        }
        if (r < 0) {
            if (err->len)
                buf_appendc(err, '\n');
            buf_printf(err, "%s", e.len ? buf_str(&e) : "the tool source failed");
            rc = -1;
        } else {
            t->listed[i] = 1;
            for (size_t k = 0; k < n; k++)
                entry_add(t, t->src[i], &defs[k]);
        }
        free(defs);
        buf_free(&e);
    }
    if (l) {
        pthread_mutex_lock(&l->mu);
        l->now = NULL;
        pthread_mutex_unlock(&l->mu);
    }
    return rc;
}

int tools_load(struct tools *t, struct buf *err)
{
    return tools_load_run(t, NULL, NULL, err);
}

int tools_pending(const struct tools *t)
{
    for (size_t i = 0; t && i < t->n_src; i++)
        if (!t->listed[i])
            return 1;
    return 0;
}

static void *loader_main(void *arg)
{
    struct tools_loader *l = arg;
    l->rc = tools_load_run(l->t, &l->cancel, l, &l->err);
    worker_signal(&l->done, l->pipe[1]);
    return NULL;
}

struct tools_loader *tools_load_start(struct tools *t)
{
    struct tools_loader *l = xcalloc(1, sizeof *l);
    l->t = t;
    pthread_mutex_init(&l->mu, NULL);
    worker_start(&l->th, l->pipe, loader_main, l);
    return l;
}

int tools_load_fd(const struct tools_loader *l)
{
    return l->pipe[0];
}

int tools_load_done(const struct tools_loader *l)
{
    return __atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
}

const char *tools_load_now(struct tools_loader *l, char *name, size_t size, double *seconds)
{
    const char *kind = NULL;
    pthread_mutex_lock(&l->mu);
    if (l->now) {
        snprintf(name, size, "%s", l->now->name);
        kind = l->now->kind;
        *seconds = util_now() - l->since;
    }
    pthread_mutex_unlock(&l->mu);
    return kind;
}

void tools_load_cancel(struct tools_loader *l)
{
    __atomic_store_n(&l->cancel, 1, __ATOMIC_RELEASE);
}

int tools_load_finish(struct tools_loader *l, struct buf *err)
{
    worker_end(l->th, l->pipe);
    int rc = l->rc;
    buf_append(err, l->err.data ? l->err.data : "", l->err.len);
    buf_free(&l->err);
    pthread_mutex_destroy(&l->mu);
    free(l);
    return rc;
}

size_t tools_count(const struct tools *t)
{
    return t ? t->n : 0;
}

const struct tools_entry *tools_at(const struct tools *t, size_t i)
{
    return t && i < t->n ? &t->e[i] : NULL;
}

const struct tools_entry *tools_find(const struct tools *t, const char *name)
{
    for (size_t i = 0; t && name && i < t->n; i++)
        if (!strcmp(t->e[i].name, name))
            return &t->e[i];
    return NULL;
}

const struct tools_entry *tools_find_wire(const struct tools *t, const char *wire)
{
    for (size_t i = 0; t && wire && i < t->n; i++)
        if (!strcmp(t->e[i].wire, wire))
            return &t->e[i];
    return NULL;
}

void tools_api(struct tools *t, const char *const *only, size_t n_only,
               const struct api_tool **defs, size_t *n)
{
    size_t k = 0;
    t->api = xgrow(t->api, t->n + 1, &t->cap_api, sizeof *t->api);
    for (size_t i = 0; i < t->n; i++) {
        int keep = n_only == 0;
        for (size_t j = 0; j < n_only && !keep; j++)
            keep = tool_glob(only[j], t->e[i].name);
        if (!keep)
            continue;
        t->api[k].name = t->e[i].wire;
        t->api[k].description = t->e[i].def.description;
        t->api[k].schema = t->e[i].def.schema;
        k++;
    }
    *defs = t->api;
    *n = k;
}

int tools_prepare(const struct tools *t, struct tool_call *call, struct tool_result *res)
{
    const struct tools_entry *e = tools_find_wire(t, call->wire);
    if (!e) {
        tool_result_error(res, "unknown tool \"%.100s\"", call->wire ? call->wire : "");
        return -1;
    }
    free(call->name);
    call->name = xstrdup(e->name);
    if (!call->args || call->args_len == 0) { /* no arguments at all: an empty object */
        free(call->args);
        call->args = xstrdup("{}");
        call->args_len = 2;
    }
    struct buf err = BUF_INIT;
    if (tool_schema_check(e->def.schema, call->args, call->args_len, &err) < 0) {
        tool_result_error(res, "invalid arguments for %s: %s", e->name, buf_str(&err));
        buf_free(&err);
        return -1;
    }
    buf_free(&err);
    return 0;
}

/* ---- approval ---- */

static void names_add(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s))
            return;
    *v = xreallocarray(*v, *n + 1, sizeof **v);
    (*v)[(*n)++] = xstrdup(s);
}

static void names_free(char ***v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

void tool_policy_allow(struct tool_policy *p, const char *glob)
{
    names_add(&p->allow, &p->n_allow, glob);
}

void tool_policy_always(struct tool_policy *p, const char *name)
{
    names_add(&p->always, &p->n_always, name);
}

enum tool_verdict tool_policy_verdict(const struct tool_policy *p, const char *name)
{
    for (size_t i = 0; name && i < p->n_allow; i++)
        if (tool_glob(p->allow[i], name))
            return TOOL_RUN;
    for (size_t i = 0; name && i < p->n_always; i++)
        if (!strcmp(p->always[i], name))
            return TOOL_RUN;
    return p->scripted ? TOOL_REFUSE : TOOL_ASK;
}

void tool_policy_reset(struct tool_policy *p)
{
    names_free(&p->always, &p->n_always);
}

void tool_policy_free(struct tool_policy *p)
{
    names_free(&p->allow, &p->n_allow);
    names_free(&p->always, &p->n_always);
}

/* ---- jobs ---- */

struct tool_job {
    pthread_t th;
    int pipe[2];
    int cancel;
    int done;
    double t0;
    struct tool_source *src;
    const char *tool;
    struct tool_call call;
    struct tool_result res;
    struct tool_ctx ctx;
    void (*done_fn)(void *ud);
};

static void *job_main(void *arg)
{
    struct tool_job *j = arg;
    if (!j->src)
        tool_result_error(&j->res, "unknown tool \"%.100s\"", j->call.wire ? j->call.wire : "");
    else if (j->src->call(j->src, j->tool, j->call.args ? j->call.args : "{}",
                          j->call.args ? j->call.args_len : 2, &j->ctx, &j->res) < 0)
        j->res.is_error = 1;
    if (__atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE) && !j->res.is_error) {
        j->res.is_error = 1; /* the result of a cancelled call is not trusted */
        buf_reset(&j->res.content);
    }
    if (j->res.is_error && j->res.content.len == 0)
        buf_appends(&j->res.content, __atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE)
                                         ? "cancelled by the user"
                                         : "the tool failed");
    worker_signal(&j->done, j->pipe[1]);
    if (j->done_fn)
        j->done_fn(j->ctx.ud);
    return NULL;
}

struct tool_job *tool_job_start(struct tools *t, const struct tool_call *call, double timeout,
                                void (*progress)(void *ud, double done, double total,
                                                 const char *message),
                                void (*done)(void *ud), void *ud)
{
    struct tool_job *j = xcalloc(1, sizeof *j);
    tool_call_copy(&j->call, call);
    const struct tools_entry *e = call->name ? tools_find(t, call->name)
                                             : tools_find_wire(t, call->wire);
    if (e) {
        j->src = e->src;
        j->tool = e->tool;
    }
    j->ctx.cancel = &j->cancel;
    j->ctx.timeout = timeout;
    j->ctx.progress = progress;
    j->ctx.ud = ud;
    j->done_fn = done;
    j->t0 = util_now();
    worker_start(&j->th, j->pipe, job_main, j);
    return j;
}

int tool_job_fd(const struct tool_job *j)
{
    return j->pipe[0];
}

int tool_job_done(const struct tool_job *j)
{
    return __atomic_load_n(&j->done, __ATOMIC_ACQUIRE);
}

void tool_job_cancel(struct tool_job *j)
{
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELEASE);
}

double tool_job_elapsed(const struct tool_job *j)
{
    return util_now() - j->t0;
}

void tool_job_finish(struct tool_job *j, struct tool_result *res)
{
    worker_end(j->th, j->pipe);
    *res = j->res;
    tool_call_free(&j->call);
    free(j);
}

/* ---- the test source (TOKTERM_TEST_TOOLS) ---- */

static int test_list(struct tool_source *src, const int *cancel, struct tool_def **defs,
                     size_t *n, struct buf *err)
{
    static const char *const t[][3] = {
        {"echo", "Return the text given.",
         "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},"
         "\"required\":[\"text\"],\"additionalProperties\":false}"},
        {"add", "Add two numbers.",
         "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
         "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}"},
        {"fail", "Always fails.", "{\"type\":\"object\"}"},
        {"sleep", "Sleep some seconds.",
         "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"number\","
         "\"minimum\":0,\"maximum\":600}},\"required\":[\"seconds\"]}"},
        {"big", "Return that many bytes of text.",
         "{\"type\":\"object\",\"properties\":{\"bytes\":{\"type\":\"integer\","
         "\"minimum\":0}},\"required\":[\"bytes\"]}"},
    };
    (void)src;
    (void)cancel;
    (void)err;
    size_t k = sizeof t / sizeof t[0];
    *defs = xcalloc(k, sizeof **defs);
    for (size_t i = 0; i < k; i++) {
        (*defs)[i].name = xstrdup(t[i][0]);
        (*defs)[i].description = xstrdup(t[i][1]);
        (*defs)[i].schema = xstrdup(t[i][2]);
    }
    *n = k;
    return 0;
}

/* The number after "key": in a flat JSON object (the arguments were checked already). */
static double test_num(const char *args, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(args, pat);
    if (!p)
        return 0;
    p = strchr(p + strlen(pat), ':');
    return p ? strtod(p + 1, NULL) : 0;
}

static int test_call(struct tool_source *src, const char *tool, const char *args,
                     size_t args_len, const struct tool_ctx *ctx, struct tool_result *out)
{
    (void)src;
    if (!strcmp(tool, "echo")) {
        buf_append(&out->content, args, args_len);
    } else if (!strcmp(tool, "add")) {
        buf_printf(&out->content, "%g", test_num(args, "a") + test_num(args, "b"));
    } else if (!strcmp(tool, "fail")) {
        tool_result_error(out, "test.fail failed as asked");
    } else if (!strcmp(tool, "sleep")) {
        double until = util_now() + test_num(args, "seconds");
        while (util_now() < until) {
            if (__atomic_load_n(ctx->cancel, __ATOMIC_ACQUIRE)) {
                tool_result_error(out, "cancelled by the user");
                return 0;
            }
            util_sleep_ms(10);
        }
        buf_appends(&out->content, "slept");
    } else if (!strcmp(tool, "big")) {
        size_t n = (size_t)test_num(args, "bytes");
        size_t cap = ctx->max_bytes ? ctx->max_bytes : (size_t)16 << 20;
        if (n > cap) {
            n = cap;
            out->truncated = 1;
        }
        buf_reserve(&out->content, n);
        for (size_t i = 0; i < n; i++)
            buf_appendc(&out->content, (char)('a' + i % 26));
    } else {
        tool_result_error(out, "no such test tool");
    }
    return 0;
}

void tools_add_test(struct tools *t)
{
    static struct tool_source test = {
        .name = "test", .kind = "test", .parallel = 1, .list = test_list, .call = test_call,
    };
    tools_add(t, &test);
}
