/* test_mcp.c - the MCP client below the command line: [mcp NAME] sections (words, quotes,
 * env, headers, FILE:LINE errors), and the client against tests/mcp/hostile.py through the
 * tool registry (core/tools.h): names, a call, progress, cancellation that tells the server,
 * a timeout, tools/list_changed, a crash followed by a restart. */
#include "config.h"
#include "tap.h"

#include "base/util.h"
#include "base/xmalloc.h"
#include "core/conf.h"
#include "core/mcpset.h"
#include "core/tools.h"
#include "mcp/mcp.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/tt-mcp-unit-XXXXXX";

static char *write_conf(const char *name, const char *text)
{
    char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, 0600);
    return path;
}

static void test_conf(void)
{
    char *p = write_conf("a.ini",
                         "model = x\n"
                         "[mcp fs]\n"
                         "command = npx -y \"@scope/server fs\"\n"
                         "args = '/a dir' b\\ c\n"
                         "env = A=1 B=\"two words\"\n"
                         "cwd = /tmp\n"
                         "timeout = 2.5\n"
                         "[profile]\nmodel = y\n"
                         "[mcp web]\n"
                         "url = https://example.com/mcp\n"
                         "headers = Authorization: Bearer {key}; X-A: b\n"
                         "key_env = WEB_KEY\n");
    struct mcp_server_conf *v = NULL;
    struct buf err = BUF_INIT;
    int n = mcp_conf_load(p, &v, &err);
    TAP_INT(n, 2, "two [mcp] sections, the others left alone");
    if (n == 2) {
        const struct mcp_server_conf *fs = mcp_conf_find(v, n, "fs");
        TAP_STR(fs->argv[0], "npx", "command: the program");
        TAP_STR(fs->argv[2], "@scope/server fs", "command: a quoted word");
        TAP_STR(fs->argv[3], "/a dir", "args: single quotes");
        TAP_STR(fs->argv[4], "b c", "args: a backslash");
        TAP_OK(fs->argv[5] == NULL, "args: five words");
        TAP_STR(fs->env[1], "B=two words", "env: NAME=value words");
        TAP_OK(fs->timeout == 2.5 && fs->max_result_mb == 16, "timeout; max_result_mb's default");
        TAP_OK(mcp_conf_runs(fs), "a command runs");
        const struct mcp_server_conf *web = mcp_conf_find(v, n, "web");
        TAP_STR(web->headers[1], "X-A: b", "headers: split at ';'");
        TAP_OK(!web->argv && !mcp_conf_runs(web) && web->timeout == 60, "an HTTP section");
    }
    mcp_conf_free(v, n);
    free(p);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[mcp a]\ncommand = x\nurl = http://h/\n", "a.ini:1: [mcp a] needs either"},
        {"[mcp a]\n", "needs either command (stdio) or url"},
        {"[mcp a]\ncommand = 'x\n", "a.ini:2: [mcp a] command: an unfinished ' quote"},
        {"[mcp a]\ncommand = x\nenv = NOEQUALS\n", "a.ini:3: [mcp a] env: each word"},
        {"[mcp a]\ncommand = x\ntimeout = 0\n", "a.ini:3: [mcp a] timeout: must be"},
        {"[mcp a]\ncommand = x\ncolour = red\n", "a.ini:3: [mcp a] colour: unknown key"},
        {"[mcp a.b]\ncommand = x\n", "a.ini:1: [mcp NAME]: a name is"},
        {"[mcp a]\ncommand = x\n[mcp a]\ncommand = y\n", "[mcp a] given twice (first at line 1)"},
        {"[mcp a]\nurl = http://h/\nheaders = nocolon\n", "headers must be 'Name: value'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_conf("a.ini", bad[i].text);
        buf_reset(&err);
        n = mcp_conf_load(p, &v, &err);
        TAP_OK(n == -1 && err.data && strstr(err.data, bad[i].want), "bad section %zu: %s", i,
               err.data ? err.data : "(no error)");
        free(p);
    }
    buf_free(&err);
}

static int progress_calls;
static double progress_last;

static void on_progress(void *ud, double done, double total, const char *msg)
{
    (void)ud, (void)total, (void)msg;
    progress_calls++;
    progress_last = done;
}

static int file_has(const char *path, const char *needle)
{
    size_t len;
    char *s = util_read_file(path, &len, 1 << 20);
    int ok = s && strstr(s, needle);
    free(s);
    return ok;
}

static void test_registry(void)
{
    char *log = xasprintf("%s/cancel.log", dir);
    char *text = xasprintf("[mcp h]\ncommand = python3 %s/mcp/hostile.py --pages 2\n"
                           "env = HOSTILE_LOG=%s\ntimeout = 2\n"
                           "allow = ok, page*\n"
                           "[mcp other]\ncommand = python3 %s/mcp/hostile.py\nallow = ok\n",
                           tap_srcdir(), log, tap_srcdir());
    char *p = write_conf("r.ini", text);
    struct conf c;
    conf_defaults(&c);
    c.path = xstrdup(p);
    struct buf err = BUF_INIT;
    struct tools *t = tools_new();
    TAP_INT(mcp_set_tools(t, &c, &err), 0, "no mcp = : no server added");
    c.mcp = xstrdup("h, nosuch");
    TAP_INT(mcp_set_tools(t, &c, &err), -1, "mcp = an unknown name: refused");
    TAP_OK(err.data && strstr(err.data, "no [mcp nosuch] section") &&
               strstr(err.data, "known: h, other"), "... the known ones named: %s", err.data);
    free(c.mcp);
    c.mcp = xstrdup("h");
    buf_reset(&err);
    TAP_INT(mcp_set_tools(t, &c, &err), 1, "mcp = h: one source");
    struct tool_policy pol = {0};
    TAP_INT(mcp_set_allow(&pol, &c, &err), 0, "mcp = h: its allow = read");
    TAP_OK(tool_policy_verdict(&pol, "h.ok") == TOOL_RUN &&
               tool_policy_verdict(&pol, "h.page1") == TOOL_RUN &&
               tool_policy_verdict(&pol, "h.progress") == TOOL_ASK &&
               tool_policy_verdict(&pol, "other.ok") == TOOL_ASK,
           "allow = ok, page* in [mcp h]: h.ok and h.page1 run unasked; not other.ok");
    tool_policy_free(&pol);
    TAP_OK(tools_load(t, &err) == 0, "the registry lists it: %s", err.data ? err.data : "");
    TAP_OK(tools_find(t, "h.page0") && tools_find(t, "h.page1") && tools_find(t, "h.ok") &&
               !tools_find(t, "other.ok"), "its tools are h.TOOL, every page; only h");

    struct tool_call call = {.id = "c1", .name = "h.progress", .wire = "h__progress",
                             .args = "{\"steps\": 4}", .args_len = 12};
    struct tool_result res = {0};
    struct tool_job *j = tool_job_start(t, &call, 0, on_progress, NULL, NULL);
    tool_job_finish(j, &res);
    TAP_OK(!res.is_error && res.content.data && strcmp(res.content.data, "done 4") == 0,
           "a call through the registry: its result");
    TAP_OK(progress_calls == 4 && progress_last == 4, "progress reached the callback (%d)",
           progress_calls);
    tool_result_free(&res);

    struct tool_call hang = {.id = "c2", .name = "h.hang", .wire = "h__hang", .args = "{}",
                             .args_len = 2};
    double t0 = util_now();
    j = tool_job_start(t, &hang, 30, NULL, NULL, NULL);
    usleep(300000);
    tool_job_cancel(j);
    tool_job_finish(j, &res);
    double took = util_now() - t0;
    TAP_OK(res.is_error && took < 1.5, "cancel: an error result soon (%.2f s): %s", took,
           res.content.data ? res.content.data : "");
    tool_result_free(&res);
    for (int i = 0; i < 100 && !file_has(log, "cancelled"); i++)
        usleep(20000);
    TAP_OK(file_has(log, "cancelled by the user"), "cancel: the server got notifications/cancelled");

    t0 = util_now();
    j = tool_job_start(t, &hang, 0, NULL, NULL, NULL);
    tool_job_finish(j, &res);
    took = util_now() - t0;
    TAP_OK(res.is_error && res.content.data && strstr(res.content.data, "within 2 s") &&
               took < 5, "timeout: the section's 2 s (%.2f s)", took);
    for (int i = 0; i < 100 && !file_has(log, "timed out"); i++)
        usleep(20000);
    TAP_OK(file_has(log, "timed out"), "timeout: the server got notifications/cancelled");
    tool_result_free(&res);

    struct tool_call crash = {.id = "c3", .name = "h.crash", .wire = "h__crash", .args = "{}",
                              .args_len = 2};
    j = tool_job_start(t, &crash, 0, NULL, NULL, NULL);
    tool_job_finish(j, &res);
    TAP_OK(res.is_error && res.content.data && strstr(res.content.data, "exited with status 3"),
           "a crash: said (%s)", res.content.data ? res.content.data : "");
    tool_result_free(&res);
    j = tool_job_start(t, &call, 0, NULL, NULL, NULL);
    tool_job_finish(j, &res);
    TAP_OK(!res.is_error && res.content.data && strcmp(res.content.data, "done 4") == 0,
           "the next call starts the server again");
    tool_result_free(&res);
    tools_free(t);

    /* list_changed: the next list asks again */
    struct mcp_server_conf *v = NULL;
    int n = mcp_conf_load(p, &v, &err);
    struct mcp_client *cl = mcp_client_new(&v[0], NULL);
    const struct mcp_tool *tl;
    int before = mcp_client_tools(cl, &tl, &err);
    struct mcp_result r;
    mcp_client_call(cl, "list_changed", "{}", NULL, NULL, &r);
    mcp_result_free(&r);
    int after = mcp_client_tools(cl, &tl, &err);
    TAP_OK(after == before + 1 && strcmp(tl[after - 1].name, "added") == 0,
           "tools/list_changed: listed again (%d, then %d)", before, after);
    TAP_INT(mcp_client_ping(cl, &err), 0, "ping");
    TAP_STR(mcp_client_protocol(cl), MCP_PROTOCOL_VERSION, "the negotiated revision");
    mcp_client_free(cl, 1);
    mcp_conf_free(v, n);
    conf_free(&c);
    buf_free(&err);
    free(p);
    free(text);
    unlink(log);
    free(log);
}

/* The spec's stdio shutdown: close the server's stdin, wait for it to exit. The wait sleeps
 * until the server exits (a pidfd), rather than waking every few milliseconds to look: the
 * closing thread is switched out a handful of times over a server's 0.5 s after its stdin
 * closes (it was ~250 times with a 2 ms poll), and the server is gone, not killed. */
static void test_shutdown(void)
{
    char *text = xasprintf("[mcp l]\ncommand = python3 %s/mcp/hostile.py --linger 0.5\n",
                           tap_srcdir());
    char *p = write_conf("s.ini", text);
    struct mcp_server_conf *v = NULL;
    struct buf err = BUF_INIT;
    int n = mcp_conf_load(p, &v, &err);
    struct mcp_client *cl = mcp_client_new(&v[0], NULL);
    TAP_INT(mcp_client_ping(cl, &err), 0, "shutdown: the server is up");
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    double t0 = util_now();
    mcp_client_free(cl, 5);
    double took = util_now() - t0;
    getrusage(RUSAGE_THREAD, &r1);
    long sw = r1.ru_nvcsw - r0.ru_nvcsw;
    TAP_OK(took >= 0.45 && took < 4, "shutdown: waited for the server's own exit (%.2f s)", took);
    TAP_OK(sw <= 20, "shutdown: the wait does not poll (%ld voluntary switches in %.2f s)", sw,
           took);
    mcp_conf_free(v, n);
    buf_free(&err);
    free(p);
    free(text);
}

/* A server that hangs in initialize, listed off the calling thread: the loader says which
 * server it is starting, and a cancel ends it at once with the server stopped; the policy of a
 * front end takes --allow-tool, the config's allow = and the sections' allow =. */
static void test_loader(void)
{
    char *text = xasprintf("allow = test.add, *.search\n"
                           "[mcp slow]\ncommand = python3 %s/mcp/hostile.py --init-delay 600\n"
                           "timeout = 30\nallow = ok\n"
                           "[mcp h]\ncommand = python3 %s/mcp/hostile.py\n",
                           tap_srcdir(), tap_srcdir());
    char *p = write_conf("l.ini", text);
    struct conf c;
    conf_defaults(&c);
    c.path = xstrdup(p);
    c.allow = xstrdup(" test.add, *.search ");
    c.mcp = xstrdup("slow, h");
    struct buf err = BUF_INIT;
    struct tool_policy pol = {0};
    const char *globs[] = {"x.*"};
    TAP_INT(mcp_set_policy(&pol, &c, globs, 1, &err), 0, "policy: made");
    TAP_OK(tool_policy_verdict(&pol, "test.add") == TOOL_RUN &&
               tool_policy_verdict(&pol, "fs.search") == TOOL_RUN &&
               tool_policy_verdict(&pol, "slow.ok") == TOOL_RUN &&
               tool_policy_verdict(&pol, "x.y") == TOOL_RUN &&
               tool_policy_verdict(&pol, "h.ok") == TOOL_ASK &&
               tool_policy_verdict(&pol, "test.echo") == TOOL_ASK,
           "policy: --allow-tool, allow = and [mcp slow] allow = ok; nothing else");
    tool_policy_free(&pol);

    struct tools *t = tools_new();
    TAP_INT(mcp_set_tools(t, &c, &err), 2, "two servers");
    TAP_OK(tools_pending(t), "not listed yet");
    double t0 = util_now();
    struct tools_loader *l = tools_load_start(t);
    char name[32] = "";
    double secs = -1;
    const char *kind = NULL;
    while (!(kind = tools_load_now(l, name, sizeof name, &secs)) && util_now() - t0 < 5)
        usleep(10000);
    usleep(300000);
    TAP_OK(kind && !strcmp(kind, "mcp") && !strcmp(name, "slow") && secs >= 0,
           "the loader names the server it is starting (%s %s)", kind ? kind : "-", name);
    TAP_OK(!tools_load_done(l) && util_now() - t0 < 2, "it returned at once; still starting");
    double t1 = util_now();
    tools_load_cancel(l);
    struct pollfd pf = {.fd = tools_load_fd(l), .events = POLLIN};
    TAP_INT(poll(&pf, 1, 5000), 1, "cancel: its fd becomes readable");
    double took = util_now() - t1;
    TAP_INT(tools_load_finish(l, &err), -1, "cancel: the listing failed");
    TAP_OK(took < 2 && err.data && strstr(err.data, "slow: initialize cancelled") &&
               strstr(err.data, "h: not started (cancelled)"),
           "cancel: within %.2f s, both named: %s", took, err.data ? err.data : "");
    TAP_OK(tools_count(t) == 0 && tools_pending(t), "nothing listed; still pending");
    tools_free(t);
    buf_free(&err);
    conf_free(&c);
    free(p);
    free(text);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_conf();
    test_registry();
    test_loader();
    test_shutdown();
    char *cmd = xasprintf("rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(cmd);
    return tap_done();
}
