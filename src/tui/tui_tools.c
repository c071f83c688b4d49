/* tui_tools.c - the chat's side of tool calls: see tui_tools.h. */
#include "config.h"
#include "tui/tui_tools.h"
#include "tui/tui_app.h"
#include "tui/tui_ask.h"
#include "proto/tool.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
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
