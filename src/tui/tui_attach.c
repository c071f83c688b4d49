/* tui_attach.c - attachments in the chat: /attach PATH|DIR|URL (Tab completes paths),
 * /attach alone lists what waits, /detach N (or all) drops, and a path pasted (dragged) onto
 * an empty prompt becomes an attachment with a visible note. Attachments wait for the next
 * prompt: tui_send hands them to the session with it (tui_attach_send). */
#include "config.h"
#include "core/attach_ext.h"
#include "net/fetch.h"
#include "tui/tui_app.h"
#include "tui/tui_input.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

static struct attach_list *tui_attach_list(struct tui *t)
{
    if (!t->pending)
        t->pending = xcalloc(1, sizeof *t->pending);
    return t->pending;
}

void tui_attach_free(struct tui *t)
{
    if (t->pending)
        attach_list_free(t->pending);
    free(t->pending);
    t->pending = NULL;
}

int tui_attach_paths(void *ud, const char *line, int start)
{
    (void)ud;
    return start > 0 && strncmp(line, "/attach ", 8) == 0;
}

/* "1. name (PNG image 640x480, 12.3 KiB)" lines of the attachments from index from on. */
static void tui_attach_lines(struct buf *out, const struct attach_list *l, size_t from)
{
    for (size_t i = from; i < l->n; i++) {
        buf_printf(out, "%zu. ", i + 1);
        attach_describe(out, &l->v[i], -1);
        buf_appendc(out, '\n');
    }
}

/* Keys typed while a URL is fetched: Esc or Ctrl-C cancels the fetch; any other key is kept
 * and given back to the input afterwards, in order (at most TUI_FETCH_KEYS of them). */
#define TUI_FETCH_KEYS 256
struct tui_fetch_keys {
    struct tui *t;
    int v[TUI_FETCH_KEYS];
    size_t n;
};

static int tui_fetch_cancelled(void *ud)
{
    struct tui_fetch_keys *k = ud;
    for (int c; (c = wgetch(k->t->keys)) != ERR;) {
        if (c == 27 || c == 3)
            return 1;
        if (k->n < TUI_FETCH_KEYS)
            k->v[k->n++] = c;
    }
    return 0;
}

/* Give the kept keys back: curses' queue returns the last one pushed first. */
static void tui_fetch_keys_back(struct tui_fetch_keys *k)
{
    while (k->n)
        ungetch(k->v[--k->n]);
}

/* Add arg; a note says what came (and what a folder left out), or the error, with the
 * command put back in the input so that the path can be corrected (again: the command as
 * typed when again is not NULL). */
static int tui_attach_add(struct tui *t, const char *arg, const char *again)
{
    struct attach_list *l = tui_attach_list(t), add = {0};
    size_t before = l->n;
    struct buf warn = BUF_INIT, m = BUF_INIT;
    char *err = NULL;
    struct tui_fetch_keys *keys = NULL;
    if (net_fetch_is_url(arg)) {
        tui_hint(t, "fetching the URL... (Esc cancels)");
        tui_redraw_now(t);
        keys = xcalloc(1, sizeof *keys);
        keys->t = t;
    }
    /* the provider's limits are checked now (a 20 MB image, a PDF without pdftotext), not
     * when the prompt is sent */
    int rc = attach_any(&add, arg, &warn, &err, keys ? tui_fetch_cancelled : NULL, keys);
    if (keys) {
        tui_fetch_keys_back(keys);
        tui_hint(t, ""); /* the fetch is over (until 2026-12 the hint stayed until a key) */
    }
    free(keys);
    if (rc == 0) { /* the same file again is said, not added twice (until 2026-12 it was) */
        size_t kept = 0;
        for (size_t i = 0; i < add.n; i++) {
            if (attach_list_has(l, l->n, &add.v[i])) {
                buf_appends(&warn, "already attached, not added again: ");
                utf8_sanitize(&warn, add.v[i].name, strlen(add.v[i].name));
                buf_appendc(&warn, '\n');
                attach_clear(&add.v[i]);
            } else {
                add.v[kept++] = add.v[i];
            }
        }
        add.n = kept;
    }
    if (rc == 0 && add.n == 0) { /* nothing new */
        tui_meta(t, buf_str(&warn));
        attach_list_free(&add);
        buf_free(&warn);
        return 0;
    }
    if (rc == 0 && t->have_session && session_attach_check(t->s, &add, &err) != 0)
        rc = -1;
    if (rc != 0)
        attach_list_free(&add);
    else
        attach_list_move(l, &add);
    if (rc != 0) {
        buf_printf(&m, "cannot attach %s", err);
        tui_error(t, buf_str(&m));
        if (again)
            tui_input_defer(again);
        free(err);
        buf_free(&m);
        buf_free(&warn);
        return -1;
    }
    buf_printf(&m, "Attached (%zu waiting for your next prompt; /attach lists them, /detach N "
                   "drops one):\n", l->n);
    tui_attach_lines(&m, l, before);
    if (warn.len)
        buf_printf(&m, "%s", buf_str(&warn));
    tui_meta(t, buf_str(&m));
    buf_free(&m);
    buf_free(&warn);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
    return 0;
}

void tui_attach_cmd(struct tui *t, const char *arg)
{
    struct attach_list *l = tui_attach_list(t);
    if (!*arg) {
        if (!l->n) {
            tui_meta(t, "No attachments wait. /attach PATH adds a file, a folder or a URL "
                        "(Tab completes paths; a path pasted on an empty prompt is attached "
                        "too).");
            return;
        }
        struct buf m = BUF_INIT;
        buf_printf(&m, "Waiting for your next prompt:\n");
        tui_attach_lines(&m, l, 0);
        tui_meta(t, buf_str(&m));
        buf_free(&m);
        return;
    }
    char *path = attach_unquote(arg);
    char *again = xasprintf("/attach %s", arg);
    tui_attach_add(t, path, again);
    free(again);
    free(path);
}

void tui_detach_cmd(struct tui *t, const char *arg)
{
    struct attach_list *l = tui_attach_list(t);
    char *end = NULL;
    long n = strtol(arg, &end, 10);
    if (!strcmp(arg, "all") || (!*arg && l->n == 1)) {
        size_t k = l->n;
        attach_list_free(l);
        char *m = xasprintf("Dropped %zu attachment%s.", k, k == 1 ? "" : "s");
        tui_meta(t, m);
        free(m);
    } else if (!*arg || end == arg || *end || n < 1 || (size_t)n > l->n) {
        char *m = l->n ? xasprintf("/detach N drops attachment N (1 to %zu), /detach all drops "
                                   "them all (/attach lists them)", l->n)
                       : xstrdup("no attachments wait (/attach PATH adds one)");
        tui_error(t, m);
        free(m);
    } else {
        struct buf m = BUF_INIT;
        buf_appends(&m, "Dropped ");
        attach_describe(&m, &l->v[n - 1], -1);
        attach_clear(&l->v[n - 1]);
        memmove(&l->v[n - 1], &l->v[n], (l->n - (size_t)n) * sizeof *l->v);
        l->n--;
        buf_printf(&m, "; %zu wait%s.", l->n, l->n == 1 ? "s" : "");
        tui_meta(t, buf_str(&m));
        buf_free(&m);
    }
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}

int tui_attach_pasted(void *ud, const char *text)
{
    struct tui *t = ud;
    char *path = attach_pasted_path(text);
    if (!path)
        return 0;
    struct buf m = BUF_INIT;
    buf_appends(&m, "A pasted path: ");
    utf8_sanitize(&m, path, strlen(path));
    tui_meta(t, buf_str(&m));
    buf_free(&m);
    tui_attach_add(t, path, NULL);
    free(path);
    return 1;
}

size_t tui_attach_offer(struct tui *t, const struct attach *att, size_t n)
{
    struct attach_list *l = tui_attach_list(t);
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        if (attach_list_has(l, l->n, &att[i]))
            continue;
        XGROW(l->v, l->n + 1, l->cap);
        attach_copy(&l->v[l->n++], &att[i]);
        added++;
    }
    t->dirty |= TUI_D_STATUS;
    return added;
}

size_t tui_attach_send(struct tui *t)
{
    if (!t->pending || !t->pending->n)
        return 0;
    size_t n = t->pending->n;
    session_attach(t->s, t->pending);
    return n;
}
