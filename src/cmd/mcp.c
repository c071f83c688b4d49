/* mcp.c - `tokterm mcp list` and `tokterm mcp call` (mcp.h). */
#include "config.h"
#include "cmd/mcp.h"

#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "core/loop.h"
#include "core/mcpset.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MCP_GRACE 2.0 /* seconds a server gets to exit after its stdin closes */

/* s made safe for a terminal (s is a server's text). */
static void cmd_mcp_put(FILE *f, const char *s, size_t n, int tty)
{
    if (!tty) {
        fwrite(s, 1, n, f);
        return;
    }
    struct buf b = BUF_INIT;
    for (size_t off = 0; off < n;) { /* line by line, keeping the newlines */
        const char *nl = memchr(s + off, '\n', n - off);
        size_t k = nl ? (size_t)(nl - s - off) : n - off;
        buf_reset(&b);
        utf8_sanitize(&b, s + off, k);
        fwrite(b.data ? b.data : "", 1, b.len, f);
        if (nl)
            fputc('\n', f);
        off += k + (nl != NULL);
    }
    buf_free(&b);
}

static const char *cmd_mcp_transport(const struct mcp_server_conf *sc)
{
    return sc->url ? "http" : "stdio";
}

static cJSON *cmd_mcp_list_json(const struct mcp_server_conf *sc, struct mcp_client *c,
                                const struct mcp_tool *t, int n, const char *error)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sc->name);
    cJSON_AddStringToObject(o, "transport", cmd_mcp_transport(sc));
    if (error) {
        cJSON_AddStringToObject(o, "error", error);
        return o;
    }
    cJSON_AddStringToObject(o, "protocol", mcp_client_protocol(c));
    cJSON_AddStringToObject(o, "server", mcp_client_server_info(c));
    cJSON *arr = cJSON_AddArrayToObject(o, "tools");
    for (int i = 0; i < n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", t[i].name);
        if (t[i].title)
            cJSON_AddStringToObject(x, "title", t[i].title);
        cJSON_AddStringToObject(x, "description", t[i].description);
        cJSON *schema = cJSON_Parse(t[i].input_schema);
        cJSON_AddItemToObject(x, "inputSchema", schema ? schema : cJSON_CreateObject());
        cJSON_AddItemToArray(arr, x);
    }
    return o;
}

/* The first line of a description, cut to width columns. */
static void cmd_mcp_first_line(struct buf *out, const char *d, size_t width)
{
    size_t n = strcspn(d, "\n");
    if (n > width)
        n = utf8_cut(d, n, width - 3), buf_append(out, d, n), buf_appends(out, "...");
    else
        buf_append(out, d, n);
}

static int cmd_mcp_list(struct mcp_set *set, int json, int argc, char **argv)
{
    int failed = 0;
    cJSON *all = json ? cJSON_CreateArray() : NULL;
    int tty = isatty(1);
    for (int i = 0; i < (argc ? argc : set->n); i++) {
        struct buf err = BUF_INIT;
        const char *name = argc ? argv[i] : set->confs[i].name;
        struct mcp_client *c = mcp_set_get(set, name, &err);
        if (!c) {
            fprintf(stderr, "tokterm: %s\n", err.data);
            buf_free(&err);
            if (all)
                cJSON_Delete(all);
            return 2;
        }
        const struct mcp_server_conf *sc = mcp_conf_find(set->confs, set->n, name);
        const struct mcp_tool *t = NULL;
        int n = mcp_client_tools(c, &t, &err);
        if (n < 0) {
            failed = 1;
            fprintf(stderr, "tokterm: %s\n", err.data ? err.data : "failed");
        }
        if (all)
            cJSON_AddItemToArray(all, cmd_mcp_list_json(sc, c, t, n, n < 0 ? err.data : NULL));
        else {
            struct buf line = BUF_INIT;
            buf_printf(&line, "%s (%s", sc->name, cmd_mcp_transport(sc));
            if (sc->url)
                buf_printf(&line, " %s", sc->url);
            else
                for (char **a = sc->argv; *a; a++)
                    buf_printf(&line, " %s", *a);
            buf_appends(&line, ")");
            if (n >= 0)
                buf_printf(&line, ": %s, MCP %s, %d tool%s", mcp_client_server_info(c),
                           mcp_client_protocol(c), n, n == 1 ? "" : "s");
            else
                buf_appends(&line, ": not available");
            buf_appendc(&line, '\n');
            /* one column for the descriptions: as wide as the longest name (up to 40) */
            int wname = 24;
            for (int k = 0; k < n; k++) {
                int w = (int)(strlen(sc->name) + 1 + strlen(t[k].name));
                if (w > wname)
                    wname = w < 40 ? w : 40;
            }
            for (int k = 0; k < n; k++) {
                int w = (int)(strlen(sc->name) + 1 + strlen(t[k].name));
                buf_printf(&line, "  %s.%s%*s ", sc->name, t[k].name, w < wname ? wname - w : 0,
                           "");
                cmd_mcp_first_line(&line, t[k].description, (size_t)(94 - wname));
                buf_appendc(&line, '\n');
            }
            cmd_mcp_put(stdout, line.data, line.len, tty);
            buf_free(&line);
        }
        buf_free(&err);
    }
    if (all) {
        char *s = cJSON_PrintUnformatted(all);
        cmd_mcp_put(stdout, s, strlen(s), tty);
        putchar('\n');
        free(s);
        cJSON_Delete(all);
    }
    if (!set->n && !argc && !json)
        fprintf(stderr, "tokterm: no MCP servers: add an [mcp NAME] section to the config file "
                        "(see tokterm(1))\n");
    return failed ? 4 : 0;
}

static void cmd_mcp_progress(void *ud, double progress, double total, const char *message)
{
    const char *label = ud;
    struct buf b = BUF_INIT;
    buf_printf(&b, "%s: progress %g", label, progress);
    if (total >= 0)
        buf_printf(&b, "/%g", total);
    if (message) {
        buf_appends(&b, ": ");
        utf8_sanitize(&b, message, strlen(message) > 200 ? 200 : strlen(message));
    }
    fprintf(stderr, "%s\n", b.data);
    buf_free(&b);
}

/* The exit status of a call's result. */
static int cmd_mcp_exit(const struct mcp_result *r)
{
    switch (r->status) {
    case MCP_OK:
        return r->is_error ? 1 : 0;
    case MCP_RPC_ERROR:
        return 3;
    case MCP_FAILED:
        return 4;
    case MCP_TIMEOUT:
    case MCP_TOO_LARGE:
        return 8;
    case MCP_CANCELLED:
        return 130;
    }
    return 1;
}

static int cmd_mcp_call(struct mcp_set *set, int json, int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "tokterm: usage: tokterm mcp call SERVER TOOL [JSON | -]\n");
        return 2;
    }
    char *args = NULL;
    if (argc == 3 && strcmp(argv[2], "-") == 0) {
        struct buf in = BUF_INIT;
        char tmp[65536];
        size_t r;
        while ((r = fread(tmp, 1, sizeof tmp, stdin)) > 0 && in.len < (64u << 20))
            buf_append(&in, tmp, r);
        args = buf_take(&in);
    } else
        args = xstrdup(argc == 3 ? argv[2] : "{}");
    cJSON *parsed = cJSON_Parse(args ? args : "");
    int is_obj = cJSON_IsObject(parsed);
    cJSON_Delete(parsed);
    if (!is_obj) {
        fprintf(stderr, "tokterm: mcp call: the arguments must be a JSON object, e.g. "
                        "'{\"message\": \"hi\"}'\n");
        free(args);
        return 2;
    }
    struct buf err = BUF_INIT;
    struct mcp_client *c = mcp_set_get(set, argv[0], &err);
    if (!c) {
        fprintf(stderr, "tokterm: %s\n", err.data);
        buf_free(&err);
        free(args);
        return 2;
    }
    buf_free(&err);
    char *label = xasprintf("%s.%s", argv[0], argv[1]);
    /* on a thread, so that Ctrl-C (or SIGTERM) cancels it: the server is told */
    struct loop lp;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    const char *lerr = NULL;
    int have_loop = loop_init(&lp, sigs, 3, 0, &lerr) == 0;
    struct mcp_call *k = mcp_call_start(c, argv[1], args, cmd_mcp_progress, label);
    while (have_loop && !mcp_call_done(k)) {
        int fd = mcp_call_fd(k);
        loop_wait(&lp, &fd, 1, 1000);
        if (loop_signal(&lp))
            mcp_call_cancel(k);
    }
    struct mcp_result r;
    mcp_call_finish(k, &r);
    if (have_loop)
        loop_end(&lp);
    int tty = isatty(1);
    if (r.status == MCP_OK && json) {
        cmd_mcp_put(stdout, r.json, strlen(r.json), tty);
        putchar('\n');
    } else if (r.status == MCP_OK) {
        if (r.text.len) {
            cmd_mcp_put(stdout, r.text.data, r.text.len, tty);
            if (r.text.data[r.text.len - 1] != '\n')
                putchar('\n');
        } else if (r.structured) {
            cmd_mcp_put(stdout, r.structured, strlen(r.structured), tty);
            putchar('\n');
        }
        if (r.is_error)
            fprintf(stderr, "tokterm: %s: the tool reported an error\n", label);
    } else
        fprintf(stderr, "tokterm: %s%s\n", r.error.data ? r.error.data : "failed",
                r.diag.data ? r.diag.data : "");
    fflush(stdout);
    int code = cmd_mcp_exit(&r);
    mcp_result_free(&r);
    free(label);
    free(args);
    return code;
}

static const char cmd_mcp_usage[] =
    "usage: tokterm mcp list [SERVER...] [--json]\n"
    "       tokterm mcp call SERVER TOOL [JSON | -] [--json]\n"
    "list starts the [mcp NAME] servers of the config file (all, or those named) and lists\n"
    "their tools; call runs one tool with a JSON object of arguments (- reads it from stdin)\n"
    "and prints its result. call exits 0, 1 when the tool reports an error, 2 on bad usage,\n"
    "3 on a JSON-RPC error, 4 when the server fails, 8 on a timeout, 130 when cancelled.\n";

int cmd_mcp(const struct conf *conf, int json, int argc, char **argv)
{
    /* argv[0] is "mcp" */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(cmd_mcp_usage, stdout);
            return 0;
        }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            memmove(argv + i, argv + i + 1, (size_t)(argc - i - 1) * sizeof *argv);
            argc--, i--;
        }
    if (argc < 2 || (strcmp(argv[1], "list") != 0 && strcmp(argv[1], "call") != 0)) {
        fprintf(stderr, "tokterm: %s", cmd_mcp_usage);
        return 2;
    }
    struct mcp_set set;
    struct buf err = BUF_INIT;
    if (mcp_set_load(&set, conf, &err) < 0) {
        fprintf(stderr, "tokterm: %s\n", err.data);
        buf_free(&err);
        return 2;
    }
    buf_free(&err);
    int code = strcmp(argv[1], "list") == 0 ? cmd_mcp_list(&set, json, argc - 2, argv + 2)
                                            : cmd_mcp_call(&set, json, argc - 2, argv + 2);
    fflush(stdout);
    mcp_exiting(); /* the servers' shutdown goes on in a reaper: the shell is back at once */
    mcp_set_free(&set, MCP_GRACE);
    return code;
}
