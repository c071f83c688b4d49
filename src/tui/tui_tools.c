/* tui_tools.c - the chat's side of tool calls: see tui_tools.h. */
#include "config.h"
#include "tui/tui_tools.h"
#include "tui/tui_app.h"
#include "tui/tui_ask.h"
#include "proto/tool.h"
#include "core/shellcmd.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One question: what the answer goes back to. */
struct tui_tool_q {
    tui_tool_done_fn done;
    void *ud;
    char *schema;
};

char *tui_tool_pretty(const char *args, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(args, n);
    char *p = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!p)
        return xstrndup(args, n);
    /* cJSON indents with tabs: two spaces read better in a narrow panel */
    struct buf b = BUF_INIT;
    for (const char *s = p; *s; s++)
        if (*s == '\t')
            buf_appends(&b, "  ");
        else
            buf_appendc(&b, *s);
    cJSON_free(p);
    return buf_take(&b);
}

/* e: the edit must be JSON that the tool's schema takes; it is shown pretty-printed again. */
static int tui_tool_check(void *ud, const char *text, char **fixed, struct buf *err)
{
    struct tui_tool_q *q = ud;
    if (tool_schema_check(q->schema, text, strlen(text), err) < 0)
        return -1;
    *fixed = tui_tool_pretty(text, strlen(text));
    return 0;
}

static void tui_tool_answer(struct tui *t, void *ud, int key, const char *body)
{
    struct tui_tool_q *q = ud;
    cJSON *j = cJSON_Parse(body);
    char *compact = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    int run = key == 'y' || key == 'a';
    q->done(t, q->ud, run ? TOOL_RUN : TOOL_REFUSE, key == 'a', compact ? compact : body);
    if (compact)
        cJSON_free(compact);
    free(q->schema);
    free(q);
}

void tui_tool_ask(struct tui *t, const struct tools_entry *e, const struct tool_call *call,
                  tui_tool_done_fn done, void *ud)
{
    struct tui_tool_q *q = xcalloc(1, sizeof *q);
    q->done = done;
    q->ud = ud;
    q->schema = e && e->def.schema ? xstrdup(e->def.schema) : NULL;
    const char *name = call->name ? call->name : call->wire ? call->wire : "?";
    char *title;
    if (e && e->src)
        title = xasprintf("%s %s wants to run %s", e->src->kind ? e->src->kind : "tool",
                          e->src->name, name);
    else
        title = xasprintf("the model wants to run %s", name);
    char *body = tui_tool_pretty(call->args ? call->args : "{}",
                                 call->args ? call->args_len : 2);
    char *choices = xasprintf("y run once  a always (%s, this conversation)  n refuse  e edit",
                              name);
    tui_ask_open(t, &(struct tui_ask_spec){.title = title, .body = body, .choices = choices,
                                           .keys = "yan", .edit_key = 'e',
                                           .check = tui_tool_check, .done = tui_tool_answer,
                                           .ud = q});
    free(title);
    free(body);
    free(choices);
}

/* ---- the transcript's record ---- */

struct tui_tool_rec {
    char *id, *name, *args;
    int refused, done, is_error;
    struct buf result;   /* the first TUI_TOOL_KEEP bytes */
    size_t result_len;
    double seconds;
};

struct tui_tool_log {
    struct tui_tool_rec *v;
    size_t n, cap;
};

static struct tui_tool_rec *tui_tool_find(struct tui *t, const struct tool_call *call)
{
    struct tui_tool_log *l = t->tool_log;
    for (size_t i = l ? l->n : 0; i > 0; i--)
        if (call->id && l->v[i - 1].id && strcmp(l->v[i - 1].id, call->id) == 0)
            return &l->v[i - 1];
    return NULL;
}

/* text cut to one line of at most max bytes (whole UTF-8 sequences), "…" when cut. */
static void tui_tool_line(struct buf *b, const char *text, size_t n, size_t max)
{
    size_t k = 0, cut = 0;
    while (k < n && k < max) {
        uint32_t cp;
        size_t len = utf8_decode(text + k, n - k, &cp);
        if (k + len > max)
            break;
        k += len;
    }
    for (size_t i = 0; i < k; i++) {
        char c = text[i];
        if (c == '\n' || c == '\r' || c == '\t') {
            if (b->len && b->data[b->len - 1] != ' ')
                buf_appendc(b, ' ');
            continue;
        }
        buf_appendc(b, c);
    }
    cut = k < n;
    if (cut)
        buf_appends(b, "\xE2\x80\xA6");
}

void tui_tool_shown_call(struct tui *t, const struct tool_call *call, int refused)
{
    if (!t->tool_log)
        t->tool_log = xcalloc(1, sizeof *t->tool_log);
    struct tui_tool_log *l = t->tool_log;
    XGROW(l->v, l->n + 1, l->cap);
    struct tui_tool_rec *r = &l->v[l->n++];
    memset(r, 0, sizeof *r);
    r->id = xstrdup(call->id ? call->id : "");
    r->name = xstrdup(call->name ? call->name : call->wire ? call->wire : "?");
    r->args = xstrndup(call->args ? call->args : "", call->args ? call->args_len : 0);
    r->refused = refused;
    struct buf b = BUF_INIT;
    buf_printf(&b, "\xE2\x9A\x99 %zu %s ", l->n, r->name);
    tui_tool_line(&b, r->args, strlen(r->args), 80);
    buf_appends(&b, refused ? " \xC2\xB7 refused" : "");
    tui_meta(t, buf_str(&b));
    buf_free(&b);
}

void tui_tool_shown_result(struct tui *t, const struct tool_call *call,
                           const struct tool_result *res, double seconds)
{
    struct tui_tool_rec *r = tui_tool_find(t, call);
    if (!r) { /* a result without a call shown (an invalid call): show the call first */
        tui_tool_shown_call(t, call, 0);
        r = &t->tool_log->v[t->tool_log->n - 1];
    }
    size_t n = res->content.len;
    r->done = 1;
    r->is_error = res->is_error;
    r->result_len = n;
    r->seconds = seconds;
    buf_reset(&r->result);
    buf_append(&r->result, res->content.data ? res->content.data : "",
               n < TUI_TOOL_KEEP ? n : TUI_TOOL_KEEP);
    struct buf b = BUF_INIT;
    size_t num = (size_t)(r - t->tool_log->v) + 1;
    buf_printf(&b, "  \xE2\x86\xB3 %zu %s, %zu bytes, %.2fs: ", num,
               res->is_error ? "error" : "ok", n, seconds);
    tui_tool_line(&b, r->result.data ? r->result.data : "", r->result.len, 80);
    buf_printf(&b, " (/expand %zu)", num);
    tui_meta(t, buf_str(&b));
    buf_free(&b);
}

void tui_tool_expand(struct tui *t, const char *arg)
{
    struct tui_tool_log *l = t->tool_log;
    if (!l || !l->n) {
        tui_error(t, "/expand: no tool was called in this chat yet");
        return;
    }
    size_t k = l->n;
    if (arg && *arg) {
        char *end;
        long v = strtol(arg, &end, 10);
        if (end == arg || *end || v < 1 || (size_t)v > l->n) {
            char *m = xasprintf("/expand takes the number of a tool call, 1 to %zu", l->n);
            tui_error(t, m);
            free(m);
            return;
        }
        k = (size_t)v;
    }
    struct tui_tool_rec *r = &l->v[k - 1];
    struct buf b = BUF_INIT;
    buf_printf(&b, "**Tool call %zu: %s**%s\n\n", k, r->name, r->refused ? " (refused)" : "");
    char *pretty = tui_tool_pretty(r->args, strlen(r->args));
    shellcmd_code_block(&b, pretty, strlen(pretty));
    free(pretty);
    if (r->done) {
        buf_printf(&b, "\n**%s** (%zu bytes, %.2fs%s):\n\n", r->is_error ? "Error" : "Result",
                   r->result_len, r->seconds,
                   r->result_len > r->result.len ? ", the start shown" : "");
        shellcmd_code_block(&b, r->result.data ? r->result.data : "", r->result.len);
    } else {
        buf_appends(&b, "\n(no result yet)\n");
    }
    tui_notice(t, buf_str(&b));
    buf_free(&b);
}

void tui_tool_log_free(struct tui *t)
{
    struct tui_tool_log *l = t->tool_log;
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].id);
        free(l->v[i].name);
        free(l->v[i].args);
        buf_free(&l->v[i].result);
    }
    free(l->v);
    free(l);
    t->tool_log = NULL;
}
