/* tui_tools.c - the chat's side of tool calls: see tui_tools.h. */
#include "config.h"
#include "tui/tui_tools.h"
#include "tui/tui_app.h"
#include "tui/tui_ask.h"
#include "tui/tui_input.h"
#include "proto/tool.h"
#include "core/mcpset.h"
#include "core/shellcmd.h"
#include "store/store.h"
#include "base/utf8.h"
#include "base/util.h"
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
    char *shown;  /* the body as first shown: a different one was edited */
};

char *tui_tool_pretty(const char *args, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(args, n);
    char *p = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!p)
        return xstrndup(args, n);
    /* cJSON indents with tabs and puts one after each colon (strings hold none: escaped):
     * two spaces an indent and one space after a colon read better in a narrow panel */
    struct buf b = BUF_INIT;
    int line_start = 1;
    for (const char *s = p; *s; s++) {
        if (*s == '\t')
            buf_appends(&b, line_start ? "  " : " ");
        else
            buf_appendc(&b, *s);
        line_start = *s == '\n' || (line_start && *s == '\t');
    }
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
    int run = key == 'y' || key == 'a';
    int edited = strcmp(body, q->shown) != 0;
    cJSON *j = edited ? cJSON_Parse(body) : NULL; /* checked by tui_tool_check */
    char *compact = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    q->done(t, q->ud, run ? TOOL_RUN : TOOL_REFUSE, key == 'a',
            edited ? (compact ? compact : body) : NULL);
    if (compact)
        cJSON_free(compact);
    free(q->schema);
    free(q->shown);
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
    const char *kind = e && e->src && e->src->kind ? e->src->kind : "";
    char *title = strcmp(kind, "mcp") == 0
                      ? xasprintf("the model calls %s (MCP server %s)", name, e->src->name)
                  : e && e->src ? xasprintf("the model calls %s (%s tools)", name, e->src->name)
                                : xasprintf("the model calls %s", name);
    char *body = tui_tool_pretty(call->args ? call->args : "{}",
                                 call->args ? call->args_len : 2);
    size_t whole = strlen(body);
    int cut = whole > TUI_TOOL_SHOW;
    if (cut) { /* bounded: the panel shows the start, the call runs with all of it */
        char *b = xasprintf("%.*s\n\xE2\x80\xA6 (%zu bytes more: they are sent whole; too long "
                            "to edit here)", (int)TUI_TOOL_SHOW, body, whole - TUI_TOOL_SHOW);
        free(body);
        body = b;
    }
    q->shown = xstrdup(body);
    /* the short choices first: a narrow window cuts the row's end, and at 80 columns a long
     * tool name used to cut "n refuse  e edit" off (until 2026-12) */
    char *choices = xasprintf("y run once  n refuse%s  a always (%s, this conversation)",
                              cut ? "" : "  e edit", name);
    tui_ask_open(t, &(struct tui_ask_spec){.title = title, .body = body, .choices = choices,
                                           .keys = "yan", .edit_key = cut ? 0 : 'e',
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
    buf_printf(&b, "  \xE2\x86\xB3 %zu %s, %zu bytes%s, %.2fs: ", num,
               res->is_error ? "error" : "ok", n,
               n > CONV_TOOL_SENT_MAX ? " (the model gets its start and end, 64 KiB)" : "",
               seconds);
    tui_tool_line(&b, r->result.data ? r->result.data : "", r->result.len, 80);
    buf_printf(&b, " (/expand %zu)", num);
    if (res->note) { /* the server's own output: for you, never the model (it may hold paths
                        or tokens; until 2026-12 its stderr went to the model) */
        buf_appends(&b, "\n    not sent to the model:");
        tui_tool_line(&b, res->note, strlen(res->note), 200);
    }
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

/* ---- the chat's tools ---- */

/* An error of the tools' setup, in the transcript. */
static void tui_tools_error(struct tui *t, const char *what, struct buf *err)
{
    char *m = xasprintf("%s: %s", what, buf_str(err));
    tui_error(t, m);
    free(m);
    buf_reset(err);
}

void tui_tools_init(struct tui *t)
{
    struct buf err = BUF_INIT;
    /* --mcp NAME, mcp = a, b (not started yet); the test tools under TOKTERM_TEST_TOOLS */
    t->tools = mcp_set_registry(t->conf, &err);
    const char *test = getenv("TOKTERM_TEST_TOOLS");
    int m = t->tools ? 0 : -1;
    if (!t->tools)
        tui_tools_error(t, "mcp", &err);
    else if (!(test && *test) && !(t->conf->mcp && *t->conf->mcp)) {
        tools_free(t->tools); /* nothing to offer: requests stay as they were */
        t->tools = NULL;
    }
    /* --allow-tool, the config's `allow = fs.read_file, *.search` and [mcp NAME]
     * `allow = read_file`: the only approvals that outlive a conversation */
    if (mcp_set_policy(&t->policy, t->conf, t->o->allow_tools, t->o->n_allow_tools, &err) < 0 &&
        m >= 0)
        tui_tools_error(t, "mcp", &err);
    buf_free(&err);
}

int tui_tools_pending(const struct tui *t)
{
    return t->tools && !t->tools_loaded;
}

void tui_tools_start(struct tui *t)
{
    if (tui_tools_pending(t) && !t->tools_loader)
        t->tools_loader = tools_load_start(t->tools);
}

int tui_tools_fd(const struct tui *t)
{
    return t->tools_loader ? tools_load_fd(t->tools_loader) : -1;
}

void tui_tools_loaded(struct tui *t)
{
    if (!t->tools_loader || !tools_load_done(t->tools_loader))
        return;
    struct buf err = BUF_INIT;
    int rc = tools_load_finish(t->tools_loader, &err);
    t->tools_loader = NULL;
    t->tools_loaded = 1; /* a server that failed is not started again in this chat */
    if (rc < 0) { /* the servers that answered are kept */
        buf_appends(&err, "\n(the chat goes on without the tools of the servers above)");
        tui_tools_error(t, "tools", &err);
    }
    buf_free(&err);
    tui_status_tool(&t->st, NULL, 0, 0, util_now());
    if (strncmp(t->hint, TUI_HINT_TOOLS, sizeof TUI_HINT_TOOLS - 1) == 0)
        t->hint[0] = '\0'; /* it is over */
    tui_tools_session(t);
    char *prompt = t->send_wait;
    t->send_wait = NULL;
    if (prompt && t->have_session) {
        enum session_cache cache = session_set_cache(t->s, t->send_wait_cache);
        tui_send_go(t, prompt);
        session_set_cache(t->s, cache);
    }
    free(prompt);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}

void tui_tools_wait(struct tui *t, const char *prompt)
{
    tui_tools_start(t);
    free(t->send_wait);
    t->send_wait = xstrdup(prompt);
    /* the cache mode it was sent with (/retry bypasses the cache for its send only) */
    enum session_cache cache = session_set_cache(t->s, SESSION_CACHE_ON);
    session_set_cache(t->s, cache);
    t->send_wait_cache = (int)cache;
    tui_hint(t, TUI_HINT_TOOLS);
    tui_tools_status(t, util_now());
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
    t->urgent = 1;
}

void tui_tools_wait_cancel(struct tui *t)
{
    if (!t->send_wait)
        return;
    /* the servers still starting are stopped; tui_tools_loaded says so when they are */
    if (t->tools_loader)
        tools_load_cancel(t->tools_loader);
    tui_view_drop_last_turn(t); /* nothing was sent: the turn goes, its prompt comes back */
    int back = tui_input_offer(t->send_wait);
    free(t->send_wait);
    t->send_wait = NULL;
    t->answer = TUI_NO_ANSWER;
    t->shell_pending = 0;
    tui_hint(t, back ? "not sent: the prompt is back (Enter sends it, without the servers that "
                       "did not start)"
                     : "not sent: the prompt is in the input history (Up recalls it)");
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS | TUI_D_INPUT;
}

void tui_tools_session(struct tui *t)
{
    if (t->tools && t->tools_loaded && t->have_session)
        session_use_tools(t->s, t->tools, &t->policy, (int)t->conf->tool_rounds);
}

void tui_tools_forget(struct tui *t)
{
    tool_policy_reset(&t->policy);
}

void tui_tools_free(struct tui *t)
{
    mcp_exiting(); /* the chat ends: a server still running is left to a reaper */
    if (t->tools_loader) { /* the servers still starting are stopped */
        struct buf err = BUF_INIT;
        tools_load_cancel(t->tools_loader);
        tools_load_finish(t->tools_loader, &err);
        t->tools_loader = NULL;
        buf_free(&err);
    }
    free(t->send_wait);
    t->send_wait = NULL;
    tools_free(t->tools);
    t->tools = NULL;
    tool_policy_free(&t->policy);
    tui_tool_log_free(t);
}

/* tui_tools_approve's answer. */
struct tui_tools_wait {
    int done, always;
    enum tool_verdict v;
    char *args;
};

static void tui_tools_approved(struct tui *t, void *ud, enum tool_verdict v, int always,
                               const char *args)
{
    (void)t;
    struct tui_tools_wait *w = ud;
    w->done = 1;
    w->v = v;
    w->always = always;
    w->args = args ? xstrdup(args) : NULL;
}

enum tool_verdict tui_tools_approve(void *ud, struct tool_call *call)
{
    struct tui *t = ud;
    if (t->quit || t->cancelling)
        return TOOL_REFUSE;
    struct tui_tools_wait w = {0};
    tui_tool_ask(t, call->name ? tools_find(t->tools, call->name) : NULL, call,
                 tui_tools_approved, &w);
    tui_hint(t, "a tool call waits for your answer (Esc refuses it)");
    tui_modal(t); /* frames, keys and signals until the answer (a quit or cancel: refused) */
    if (!w.done || w.v != TOOL_RUN) {
        free(w.args);
        return TOOL_REFUSE;
    }
    if (w.always && call->name)
        tool_policy_always(&t->policy, call->name);
    if (w.args) {
        free(call->args);
        call->args_len = strlen(w.args);
        call->args = w.args;
    }
    return TOOL_RUN;
}

void tui_tools_call(void *ud, const struct tool_call *call, enum tool_verdict verdict)
{
    struct tui *t = ud;
    if (t->answer != TUI_NO_ANSWER && !t->answer_split) {
        /* the round's text ends here; the next round's goes below the tool lines */
        tui_view_answer_end(t->view, t->answer, "asked for tools", THEME_META);
        t->answer_split = 1;
    }
    tui_tool_shown_call(t, call, verdict != TOOL_RUN);
    tui_view_end(t->view);
    t->dirty |= TUI_D_VIEW;
}

void tui_tools_result(void *ud, const struct tool_call *call, const struct tool_result *res,
                      double seconds)
{
    struct tui *t = ud;
    tui_tool_shown_result(t, call, res, seconds);
    tui_status_tool(&t->st, NULL, 0, 0, util_now());
    tui_view_end(t->view);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}

void tui_tools_answer_next(struct tui *t)
{
    if (!t->answer_split || t->answer == TUI_NO_ANSWER)
        return;
    t->answer_split = 0;
    t->answer =
        tui_view_answer_begin(t->view, t->answer_model[0] ? t->answer_model : NULL, NULL);
}

void tui_tools_status(struct tui *t, double now)
{
    if (t->tools_loader) { /* which server is starting, and for how long */
        char name[64], label[96];
        double secs = 0;
        const char *kind = tools_load_now(t->tools_loader, name, sizeof name, &secs);
        if (kind) {
            snprintf(label, sizeof label, "starting %s %s", strcmp(kind, "mcp") ? kind
                                                                               : "MCP server",
                     name);
            tui_status_tool(&t->st, label, 0, secs, now);
        }
        return;
    }
    int round = 0;
    double elapsed = 0;
    const struct tool_call *c = t->have_session ? session_tool_running(t->s, &round, &elapsed)
                                                : NULL;
    if (c)
        tui_status_tool(&t->st, c->name ? c->name : c->wire, round, elapsed, now);
    else if (t->st.tool[0])
        tui_status_tool(&t->st, NULL, 0, 0, now);
}

void tui_tools_show_steps(struct tui *t, const struct conv_turn *tt)
{
    for (size_t i = 0; i < tt->n_steps; i++) {
        const struct conv_step *st = &tt->steps[i];
        if (!st->result) {
            /* what the model said (and thought) before its calls, as it was shown live: it is
             * sent again with them (until 2026-12 a resume showed the calls alone) */
            char *why = t->o->store && st->id > 0 ? store_message_reasoning(t->o->store, st->id)
                                                  : NULL;
            size_t n = st->text ? st->len : 0;
            while (n && strchr(" \t\r\n", st->text[n - 1]))
                n--;
            if (n || (why && *why)) {
                size_t a = tui_view_answer_begin(t->view, tt->model ? tt->model : t->conf->model,
                                                 NULL);
                if (why && *why)
                    tui_view_answer_text(t->view, a, 1, why, strlen(why));
                if (n)
                    tui_view_answer_text(t->view, a, 0, st->text, st->len);
                tui_view_answer_end(t->view, a, "asked for tools", THEME_META);
            }
            free(why);
            for (size_t k = 0; k < st->n_calls; k++)
                tui_tool_shown_call(t, &st->calls[k], 0);
            continue;
        }
        struct tool_call c = {.id = st->call_id, .name = st->name, .wire = st->wire};
        struct tool_result r = {.is_error = st->is_error};
        buf_append(&r.content, st->text ? st->text : "", st->len);
        tui_tool_shown_result(t, &c, &r, 0);
        buf_free(&r.content);
    }
}
