/* tui_history.c - the conversation browser: list, live search, read-only view, resume, rename,
 * delete (see tui_history.h). */
#include "config.h"
#include "tui/tui_history.h"
#include "core/attach.h"
#include "core/conv.h"
#include "store/store.h"
#include "tui/tui_app.h"
#include "tui/tui_draw.h"
#include "tui/tui_view.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Snippet highlight markers: bytes that never occur in UTF-8 text. (Saved text that is not
 * UTF-8 could hold them; then a highlight is off, nothing else.) */
#define TUI_HIST_OPEN "\xFF"
#define TUI_HIST_CLOSE "\xFE"
#define TUI_HIST_HITS 200   /* messages one search asks for */
#define TUI_HIST_CLIP 4096  /* bytes of a title or snippet looked at (more never fits a row) */

enum tui_hist_mode { TUI_HIST_LIST, TUI_HIST_VIEW };

enum tui_hist_prompt {
    TUI_HIST_P_NONE,
    TUI_HIST_P_FIND,   /* typing the search */
    TUI_HIST_P_RENAME, /* typing the new title */
    TUI_HIST_P_DELETE, /* y/N */
};

/* One entry of the search results: the best hit of a conversation. */
struct tui_hist_ent {
    int64_t conv;
    size_t hit;   /* its index in hits */
    size_t count; /* hits in this conversation among those returned */
};

struct tui_hist {
    WINDOW *wtop, *wbody, *wbot;
    int rows, cols, body_h;
    enum tui_hist_mode mode;
    enum tui_hist_prompt prompt;
    struct store_conversation *convs; /* the list, newest first */
    size_t nconv;
    int idw;                          /* columns of the largest id */
    struct buf query;                 /* the search as typed */
    char *searched;                   /* the query the hits are for, NULL = not searching */
    struct store_hit *hits;
    size_t nhits;
    struct tui_hist_ent *ents;
    size_t nents;
    size_t sel, top;                  /* selected entry, first entry shown */
    int64_t sel_id;                   /* the selected conversation, kept across reloads */
    struct buf edit;                  /* the new title being typed */
    int64_t target;                   /* conversation being renamed / deleted */
    char msg[512];                    /* a line for the bottom row until the next key */
    int msg_err;
    /* the read-only view: one tui_view per message, made when it is first shown (a long
     * conversation costs the messages on screen, not all of them) */
    struct store_conversation *conv;  /* the conversation read, with all its messages */
    struct conv_rowinfo *ri;          /* where each of its messages stands in the tree */
    struct store_attach *att;         /* its files, without their bytes (by message id) */
    size_t natt;
    struct tui_view **mv;             /* mv[i]: item i (0: the system prompt, when there is
                                         one; then the messages), NULL until shown */
    size_t nitems, sys, nlive;        /* sys: 1 when item 0 is the system prompt */
    size_t pos, off;                  /* the top row shown: row off of item pos */
    size_t last;                      /* the last item drawn */
    size_t *hitv;                     /* items with a search hit, in order */
    size_t nhitv, hitcur;             /* hitcur: 1-based, 0 = none */
    char *term;                       /* the longest search term, highlighted in the messages */
    int64_t view_id;
    char *view_title;
    struct tui_row row;
    /* --trace */
    const char *what;
    double t_key, t_load, t_build;
};

/* ---- helpers ---- */

static struct store *tui_hist_store(struct tui *t)
{
    return t->o->store;
}

static void tui_hist_say(struct tui_hist *h, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void tui_hist_say(struct tui_hist *h, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->msg, sizeof h->msg, fmt, ap);
    va_end(ap);
    h->msg_err = err;
}

/* "3m ago", "5h ago", "2d ago", else the date. */
static void tui_hist_when(int64_t when, int64_t now, char *b, size_t n)
{
    int64_t d = now - when;
    if (d < 0)
        d = 0;
    if (d < 60) {
        snprintf(b, n, "just now");
    } else if (d < 3600) {
        snprintf(b, n, "%lldm ago", (long long)(d / 60));
    } else if (d < 86400) {
        snprintf(b, n, "%lldh ago", (long long)(d / 3600));
    } else if (d < 7 * 86400) {
        snprintf(b, n, "%lldd ago", (long long)(d / 86400));
    } else {
        time_t tt = (time_t)when;
        struct tm tm;
        if (localtime_r(&tt, &tm))
            strftime(b, n, "%Y-%m-%d", &tm);
        else
            snprintf(b, n, "?");
    }
}

/* Raw text (from the store) made drawable on one row: sanitised, line breaks and tabs as
 * spaces, at most TUI_HIST_CLIP bytes of it. */
static void tui_hist_flat(struct buf *out, const char *s, size_t n)
{
    buf_reset(out);
    if (n > TUI_HIST_CLIP)
        n = TUI_HIST_CLIP;
    utf8_sanitize(out, s, n);
    for (size_t i = 0; i < out->len; i++)
        if (out->data[i] == '\n' || out->data[i] == '\t' || out->data[i] == '\r')
            out->data[i] = ' ';
}

/* Draw raw text in at most cols columns, ending with U+2026 when it is cut. Returns the
 * columns used. */
static int tui_hist_put_clip(struct tui_row *r, const char *s, size_t n, int cols, int slot,
                             unsigned extra)
{
    if (cols <= 0 || !s)
        return 0;
    struct buf b = BUF_INIT;
    tui_hist_flat(&b, s, n);
    int start = r->col, save = r->width;
    int lim = start + cols < save ? start + cols : save;
    if (tui_draw_width(buf_str(&b), b.len) <= lim - start) {
        tui_row_put(r, buf_str(&b), b.len, slot, extra);
    } else if (lim - start >= 1) {
        r->width = lim - 1;
        tui_row_put(r, buf_str(&b), b.len, slot, extra);
        r->width = save;
        tui_row_fill(r, lim - 1, slot);
        tui_row_put(r, "\xE2\x80\xA6", 3, slot, extra);
    }
    buf_free(&b);
    return r->col - start;
}

/* The title of a conversation as shown ("(untitled)" when it has none). */
static const char *tui_hist_title(const char *title)
{
    return title && *title ? title : "(untitled)";
}

static const struct store_conversation *tui_hist_conv(const struct tui_hist *h, int64_t id)
{
    for (size_t i = 0; i < h->nconv; i++)
        if (h->convs[i].id == id)
            return &h->convs[i];
    return NULL;
}

/* Entries shown: search results while searching, else the list. */
static size_t tui_hist_count(const struct tui_hist *h)
{
    return h->searched ? h->nents : h->nconv;
}

static int64_t tui_hist_entry_id(const struct tui_hist *h, size_t i)
{
    if (h->searched)
        return i < h->nents ? h->ents[i].conv : 0;
    return i < h->nconv ? h->convs[i].id : 0;
}

/* Put the selection on conversation id when it is shown (else keep the index in range). */
static void tui_hist_select_id(struct tui_hist *h, int64_t id)
{
    size_t n = tui_hist_count(h);
    for (size_t i = 0; id && i < n; i++)
        if (tui_hist_entry_id(h, i) == id) {
            h->sel = i;
            break;
        }
    if (h->sel >= n)
        h->sel = n ? n - 1 : 0;
    h->sel_id = tui_hist_entry_id(h, h->sel);
}

/* ---- loading and searching ---- */

static void tui_hist_clear_hits(struct tui_hist *h)
{
    store_hits_free(h->hits, h->nhits);
    h->hits = NULL;
    h->nhits = 0;
    free(h->ents);
    h->ents = NULL;
    h->nents = 0;
}

static int tui_hist_load(struct tui *t)
{
    struct tui_hist *h = t->hist;
    store_conversation_list_free(h->convs, h->nconv);
    h->convs = NULL;
    h->nconv = 0;
    if (store_conversation_list(tui_hist_store(t), 0, &h->convs, &h->nconv) != 0) {
        tui_hist_say(h, 1, "cannot list the conversations: %s",
                     store_error(tui_hist_store(t)));
        return -1;
    }
    int64_t max = 99; /* at least as wide as "id" */
    for (size_t i = 0; i < h->nconv; i++)
        if (h->convs[i].id > max)
            max = h->convs[i].id;
    char b[32];
    h->idw = snprintf(b, sizeof b, "%lld", (long long)max);
    if (!h->searched)
        tui_hist_select_id(h, h->sel_id);
    return 0;
}

/* Run the search for the query as typed (nothing when it did not change). */
static void tui_hist_search(struct tui *t)
{
    struct tui_hist *h = t->hist;
    const char *q = buf_str(&h->query);
    const char *p = q;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p) { /* empty: the list again */
        if (h->searched) {
            free(h->searched);
            h->searched = NULL;
            tui_hist_clear_hits(h);
            h->sel = 0;
            tui_hist_select_id(h, h->sel_id);
        }
        return;
    }
    if (h->searched && strcmp(h->searched, q) == 0)
        return;
    int or_open;
    const char *bad = store_query_error(q, &or_open);
    if (or_open) {
        /* "timeout OR" is still being typed: the last results stay, with the hint (until
         * 2026-12 the list went blank: "no conversation matches") */
        tui_hist_say(h, 0, "%s", bad);
        return;
    }
    double t0 = util_now();
    free(h->searched);
    h->searched = xstrdup(q);
    tui_hist_clear_hits(h);
    struct store_search_opts o = {
        .limit = TUI_HIST_HITS,
        .open = TUI_HIST_OPEN,
        .close = TUI_HIST_CLOSE,
        .snippet_chars = h->cols > 40 ? h->cols * 3 / 2 : 60,
    };
    if (bad) /* a lone quote: nothing to look for yet, said as a hint, not a failure */
        tui_hist_say(h, 0, "%s", bad);
    else if (store_search(tui_hist_store(t), q, &o, &h->hits, &h->nhits) != 0) {
        tui_hist_say(h, 1, "search failed: %s", store_error(tui_hist_store(t)));
        h->hits = NULL;
        h->nhits = 0;
    }
    /* one entry per conversation: its best hit (hits come best first) */
    h->ents = xcalloc(h->nhits + 1, sizeof *h->ents);
    for (size_t i = 0; i < h->nhits; i++) {
        size_t k = 0;
        while (k < h->nents && h->ents[k].conv != h->hits[i].conversation_id)
            k++;
        if (k == h->nents)
            h->ents[h->nents++] = (struct tui_hist_ent){h->hits[i].conversation_id, i, 0};
        h->ents[k].count++;
    }
    h->sel = 0;
    h->top = 0;
    h->sel_id = tui_hist_entry_id(h, 0);
    if (!h->what) {
        h->what = "search";
        h->t_key = t0;
    }
}

/* Reload after a change (rename, delete): the list, and the search when there is one. */
static void tui_hist_reload(struct tui *t)
{
    struct tui_hist *h = t->hist;
    tui_hist_load(t);
    if (h->searched) {
        free(h->searched);
        h->searched = NULL; /* forces the search to run again */
        tui_hist_clear_hits(h);
        int64_t keep = h->sel_id;
        tui_hist_search(t);
        tui_hist_select_id(h, keep);
    }
}

/* ---- the read-only view ---- */

#define TUI_HIST_LIVE 256 /* message views kept before the far ones are dropped */
#define TUI_HIST_NEAR 64  /* ... those within this many items of the top stay */

static void tui_hist_view_free(struct tui_hist *h)
{
    for (size_t i = 0; h->mv && i < h->nitems; i++)
        tui_view_free(h->mv[i]);
    free(h->mv);
    h->mv = NULL;
    h->nitems = h->nlive = h->sys = h->pos = h->off = 0;
    store_conversation_free(h->conv);
    free(h->ri);
    h->ri = NULL;
    h->conv = NULL;
    store_attach_free(h->att, h->natt);
    h->att = NULL;
    h->natt = 0;
    free(h->hitv);
    h->hitv = NULL;
    h->nhitv = h->hitcur = 0;
    free(h->term);
    h->term = NULL;
    free(h->view_title);
    h->view_title = NULL;
    h->view_id = 0;
}

/* The files of message id, a line each under it as the chat shows them (until 2026-12 the
 * view left them out: an image sent with a prompt did not show). */
static void tui_hist_attachments(const struct tui_hist *h, struct tui_view *v, int64_t id)
{
    for (size_t i = 0; i < h->natt; i++) {
        const struct store_attach *sa = &h->att[i];
        if (sa->message_id != id)
            continue;
        struct attach a;
        conv_attach_facts(&a, sa);
        struct buf b = BUF_INIT;
        buf_appends(&b, "+ attached: ");
        attach_describe(&b, &a, -1); /* no tokens: what the provider counts depends on it */
        tui_view_add(v, TUI_MSG_META, b.data, b.len);
        buf_free(&b);
    }
}

/* Fill v with item i, rendered as the chat renders it. */
static void tui_hist_item_fill(struct tui_hist *h, struct tui_view *v, size_t i)
{
    if (i < h->sys) {
        struct buf b = BUF_INIT;
        buf_printf(&b, "system prompt: %s", h->conv->system_prompt);
        tui_view_add(v, TUI_MSG_META, b.data, b.len);
        buf_free(&b);
        return;
    }
    const struct store_message *m = &h->conv->messages[i - h->sys];
    const struct conv_rowinfo *ri = &h->ri[i - h->sys];
    /* /edit and /retry keep earlier versions: shown, marked, never sent again. The mark ends
     * the turn, under its answer as the chat puts it (above the turn's prompt, it read as the
     * footer of the answer before it) */
    char vt[CONV_VERSION_MAX];
    char *version = ri->versions > 1 || !ri->live
                        ? xasprintf("%s%s", conv_version_text(vt, ri->version, ri->versions),
                                    ri->live ? "" : " \xC2\xB7 replaced: not on the live path, "
                                                    "never sent again")
                        : NULL;
    if (strcmp(m->role, "user") == 0) {
        tui_view_add(v, TUI_MSG_USER, m->content, m->content_len);
        tui_hist_attachments(h, v, m->id);
        if (m->error) {
            char *note = xasprintf("\xE2\x9C\x97 not sent: %s", m->error);
            tui_view_add(v, TUI_MSG_META, note, strlen(note));
            free(note);
        }
        if (version && ri->answer < 0) /* a turn without an answer: its prompt ends it */
            tui_view_add(v, TUI_MSG_META, version, strlen(version));
    } else if (strcmp(m->role, "assistant") == 0) {
        char when[32] = "";
        time_t tt = (time_t)m->created;
        struct tm tm;
        if (localtime_r(&tt, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        size_t a = tui_view_answer_begin(v, m->model ? m->model : "assistant", when);
        if (m->reasoning && *m->reasoning)
            tui_view_answer_text(v, a, 1, m->reasoning, strlen(m->reasoning));
        tui_view_answer_text(v, a, 0, m->content, m->content_len);
        char *footer = NULL;
        int slot = THEME_META;
        if (m->status != STORE_COMPLETE) {
            slot = THEME_ERROR;
            /* a cancelled answer's error is "cancelled" again: not "cancelled: cancelled" */
            const char *name = store_status_name(m->status);
            const char *why = m->error && strcmp(m->error, name) != 0 ? m->error : NULL;
            footer = xasprintf("\xE2\x9C\x97 %s%s%s", name, why ? ": " : "", why ? why : "");
        } else if (m->cached) {
            footer = xstrdup("\xE2\x9C\x93 from the cache");
        }
        if (version) {
            char *f = footer ? xasprintf("%s \xC2\xB7 %s", footer, version) : xstrdup(version);
            free(footer);
            footer = f;
        }
        tui_view_answer_end(v, a, footer, slot);
        free(footer);
    } else { /* a system or tool message */
        struct buf b = BUF_INIT;
        buf_printf(&b, "%s: ", m->role);
        buf_append(&b, m->content, m->content_len);
        tui_view_add(v, TUI_MSG_META, b.data, b.len);
        buf_free(&b);
    }
    free(version);
}

/* Item i's view, made now when it does not exist yet. */
static struct tui_view *tui_hist_item(struct tui_hist *h, size_t i)
{
    if (h->mv[i])
        return h->mv[i];
    if (h->nlive >= TUI_HIST_LIVE) { /* drop the views far from the top row */
        for (size_t j = 0; j < h->nitems; j++)
            if (h->mv[j] && (j + TUI_HIST_NEAR < h->pos || j > h->pos + TUI_HIST_NEAR)) {
                tui_view_free(h->mv[j]);
                h->mv[j] = NULL;
                h->nlive--;
            }
    }
    struct tui_view *v = tui_view_new();
    tui_view_rows(v, h->cols); /* the width first: the text is wrapped once */
    tui_hist_item_fill(h, v, i);
    if (h->term)
        tui_view_search(v, h->term);
    h->mv[i] = v;
    h->nlive++;
    return v;
}

/* Rows of item i at the current width (a blank row after each message included). */
static size_t tui_hist_item_rows(struct tui_hist *h, size_t i)
{
    return tui_view_rows(tui_hist_item(h, i), h->cols);
}

/* The top row for the last screen. */
static void tui_hist_view_end(struct tui_hist *h)
{
    size_t need = h->body_h > 0 ? (size_t)h->body_h : 1;
    if (!h->nitems)
        return;
    h->pos = h->nitems - 1;
    size_t r = tui_hist_item_rows(h, h->pos);
    while (r < need && h->pos > 0) {
        need -= r;
        r = tui_hist_item_rows(h, --h->pos);
    }
    h->off = r > need ? r - need : 0;
}

/* Keep the top row in range: inside its item, and no further down than the last screen. */
static void tui_hist_view_clamp(struct tui_hist *h)
{
    if (!h->nitems)
        return;
    if (h->pos >= h->nitems)
        h->pos = h->nitems - 1;
    size_t r = tui_hist_item_rows(h, h->pos);
    if (h->off >= r)
        h->off = r ? r - 1 : 0;
    size_t need = h->body_h > 0 ? (size_t)h->body_h : 1, have = r - h->off;
    for (size_t j = h->pos + 1; have < need && j < h->nitems; j++)
        have += tui_hist_item_rows(h, j);
    if (have < need)
        tui_hist_view_end(h);
}

/* Scroll by d rows (negative: up). */
static void tui_hist_view_scroll(struct tui_hist *h, long d)
{
    if (!h->nitems)
        return;
    if (d < 0) {
        size_t up = (size_t)-d;
        while (up > h->off) {
            if (h->pos == 0) {
                up = h->off;
                break;
            }
            up -= h->off + 1; /* to the last row of the item above */
            h->pos--;
            size_t r = tui_hist_item_rows(h, h->pos);
            h->off = r ? r - 1 : 0;
        }
        h->off -= up;
    } else {
        size_t down = (size_t)d;
        size_t r = tui_hist_item_rows(h, h->pos);
        while (h->off + down >= r) {
            if (h->pos + 1 >= h->nitems) {
                down = 0;
                h->off = r ? r - 1 : 0;
                break;
            }
            down -= r - h->off; /* to the first row of the item below */
            h->pos++;
            h->off = 0;
            r = tui_hist_item_rows(h, h->pos);
        }
        h->off += down;
    }
    tui_hist_view_clamp(h);
}

static long tui_hist_view_page(const struct tui_hist *h)
{
    return h->body_h > 2 ? h->body_h - 2 : 1;
}

/* Show the hit item k (0-based) at the top. */
static void tui_hist_view_hit(struct tui_hist *h, size_t k)
{
    if (k >= h->nhitv)
        return;
    h->hitcur = k + 1;
    h->pos = h->hitv[k];
    h->off = 0;
    tui_hist_view_clamp(h);
}

static void tui_hist_view_draw(struct tui_hist *h)
{
    int y = 0;
    size_t i = h->pos, r = h->off;
    h->last = i;
    while (y < h->body_h && i < h->nitems) {
        h->last = i;
        struct tui_view *v = tui_hist_item(h, i);
        size_t rows = tui_view_rows(v, h->cols);
        if (r < rows) {
            size_t k = rows - r;
            if (k > (size_t)(h->body_h - y))
                k = (size_t)(h->body_h - y);
            tui_view_draw_rows(v, h->wbody, y, h->cols, (int)k, r);
            y += (int)k;
        }
        i++;
        r = 0;
    }
    for (; y < h->body_h; y++) {
        tui_row_begin(&h->row, h->cols);
        tui_row_blit(&h->row, h->wbody, y, THEME_DEFAULT);
    }
}

/* The longest term of a search query (see store.h: words, or "quoted phrases"). */
static char *tui_hist_longest_term(const char *q)
{
    struct buf best = BUF_INIT;
    const char *p = q;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *s = p;
        if (*p == '"') {
            s = ++p;
            while (*p && *p != '"')
                p++;
        } else {
            while (*p && *p != ' ' && *p != '\t')
                p++;
        }
        if ((size_t)(p - s) > best.len) {
            buf_reset(&best);
            buf_append(&best, s, (size_t)(p - s));
        }
        if (*p == '"')
            p++;
    }
    return best.len ? buf_take(&best) : NULL;
}

static int tui_hist_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The item of message id (messages are in id order), or SIZE_MAX. */
static size_t tui_hist_item_of(const struct tui_hist *h, int64_t id)
{
    size_t lo = 0, hi = h->conv->n_messages;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->conv->messages[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < h->conv->n_messages && h->conv->messages[lo].id == id)
        return lo + h->sys;
    return SIZE_MAX;
}

static void tui_hist_layout(struct tui_hist *h);

static void tui_hist_view_open(struct tui *t, int64_t id, int64_t hit_msg)
{
    struct tui_hist *h = t->hist;
    double t_key = util_now();
    struct store_conversation *c = NULL;
    int rc = store_conversation_load(tui_hist_store(t), id, &c);
    if (rc != 0) {
        if (rc == STORE_NOT_FOUND)
            tui_hist_say(h, 1, "conversation %lld is gone", (long long)id);
        else
            tui_hist_say(h, 1, "cannot read conversation %lld: %s", (long long)id,
                         store_error(tui_hist_store(t)));
        tui_hist_reload(t);
        return;
    }
    double t_load = util_now();
    tui_hist_view_free(h);
    tui_hist_layout(h);
    h->conv = c;
    if (store_attach_names(tui_hist_store(t), id, &h->att, &h->natt) != 0)
        tui_hist_say(h, 1, "cannot read the attachments: %s", store_error(tui_hist_store(t)));
    size_t turns;
    h->ri = conv_rows(c, &turns);
    h->sys = c->system_prompt && *c->system_prompt ? 1 : 0;
    h->nitems = h->sys + c->n_messages;
    h->mv = xcalloc(h->nitems + 1, sizeof *h->mv);
    h->view_id = c->id;
    h->view_title = xstrdup(tui_hist_title(c->title));
    if (h->searched) {
        /* the messages of this conversation among the hits, in order: n / N go through them,
         * and the longest term is highlighted */
        h->term = tui_hist_longest_term(h->searched);
        h->hitv = xmalloc((h->nhits + 1) * sizeof *h->hitv);
        for (size_t i = 0; i < h->nhits; i++) {
            size_t it = h->hits[i].conversation_id == id
                            ? tui_hist_item_of(h, h->hits[i].message_id)
                            : SIZE_MAX;
            if (it != SIZE_MAX)
                h->hitv[h->nhitv++] = it;
        }
        qsort(h->hitv, h->nhitv, sizeof *h->hitv, tui_hist_cmp_size);
    }
    h->mode = TUI_HIST_VIEW;
    h->pos = h->off = 0;
    size_t at = hit_msg ? tui_hist_item_of(h, hit_msg) : SIZE_MAX;
    for (size_t k = 0; at != SIZE_MAX && k < h->nhitv; k++)
        if (h->hitv[k] == at) {
            tui_hist_view_hit(h, k); /* opened from a search: at its best hit */
            break;
        }
    tui_hist_view_clamp(h);
    h->what = "open";
    h->t_key = t_key;
    h->t_load = t_load;
    h->t_build = util_now();
}

/* ---- actions ---- */

static int64_t tui_hist_selected(const struct tui_hist *h)
{
    if (h->mode == TUI_HIST_VIEW)
        return h->view_id;
    return tui_hist_count(h) ? tui_hist_entry_id(h, h->sel) : 0;
}

static void tui_hist_resume(struct tui *t)
{
    struct tui_hist *h = t->hist;
    int64_t id = tui_hist_selected(h);
    if (!id)
        return;
    if (t->answer != TUI_NO_ANSWER) {
        tui_hist_say(h, 1, "an answer is still streaming in the chat: close the browser (q) "
                           "and cancel it (Esc) first");
        return;
    }
    if (!t->have_session) {
        tui_hist_say(h, 1, "cannot resume: the chat has no session (the network thread did "
                           "not start)");
        return;
    }
    tui_hist_close(t);
    tui_resume(t, id, 1);
}

static void tui_hist_rename_start(struct tui *t)
{
    struct tui_hist *h = t->hist;
    int64_t id = tui_hist_selected(h);
    if (!id)
        return;
    const struct store_conversation *c = tui_hist_conv(h, id);
    h->target = id;
    buf_reset(&h->edit);
    if (c && c->title)
        buf_appends(&h->edit, c->title);
    else if (h->mode == TUI_HIST_VIEW && h->conv && h->conv->title)
        buf_appends(&h->edit, h->conv->title);
    h->prompt = TUI_HIST_P_RENAME;
}

static void tui_hist_rename_done(struct tui *t)
{
    struct tui_hist *h = t->hist;
    h->prompt = TUI_HIST_P_NONE;
    char *title = xstrdup(buf_str(&h->edit));
    util_trim(title);
    if (!*title) {
        tui_hist_say(h, 0, "the title is empty: not renamed");
        free(title);
        return;
    }
    int rc = store_conversation_rename(tui_hist_store(t), h->target, title);
    if (rc == 0) {
        tui_hist_say(h, 0, "conversation %lld renamed", (long long)h->target);
        if (h->view_id == h->target) {
            free(h->view_title);
            h->view_title = xstrdup(title);
        }
    } else if (rc == STORE_NOT_FOUND) {
        tui_hist_say(h, 1, "conversation %lld is gone", (long long)h->target);
    } else {
        tui_hist_say(h, 1, "cannot rename: %s", store_error(tui_hist_store(t)));
    }
    free(title);
    tui_hist_reload(t);
}

static void tui_hist_delete_start(struct tui *t)
{
    struct tui_hist *h = t->hist;
    int64_t id = tui_hist_selected(h);
    if (!id)
        return;
    if (t->have_session && session_conv(t->s)->id == id && t->answer != TUI_NO_ANSWER) {
        tui_hist_say(h, 1, "an answer is streaming into this conversation: cancel it in the "
                           "chat first");
        return;
    }
    h->target = id;
    h->prompt = TUI_HIST_P_DELETE;
}

static void tui_hist_delete_done(struct tui *t, int yes)
{
    struct tui_hist *h = t->hist;
    h->prompt = TUI_HIST_P_NONE;
    int64_t id = h->target;
    if (!yes) {
        tui_hist_say(h, 0, "not deleted");
        return;
    }
    int rc = store_conversation_delete(tui_hist_store(t), id);
    if (rc == STORE_NOT_FOUND) {
        tui_hist_say(h, 1, "conversation %lld is gone", (long long)id);
    } else if (rc != 0) {
        tui_hist_say(h, 1, "cannot delete: %s", store_error(tui_hist_store(t)));
        return;
    } else {
        tui_hist_say(h, 0, "conversation %lld deleted", (long long)id);
    }
    if (t->have_session && session_conv(t->s)->id == id) {
        /* the chat showed it: the chat goes on with a new conversation */
        tui_cmd_new(t);
        char *m = xasprintf("Conversation %lld was deleted in the browser; this is a new "
                            "conversation.", (long long)id);
        tui_notice(t, m);
        free(m);
    }
    if (h->mode == TUI_HIST_VIEW && h->view_id == id) {
        tui_hist_view_free(h);
        h->mode = TUI_HIST_LIST;
    }
    tui_hist_reload(t);
}

/* ---- windows ---- */

static void tui_hist_layout(struct tui_hist *h)
{
    int rows = LINES > 0 ? LINES : 1, cols = COLS > 0 ? COLS : 1;
    if (h->wtop && rows == h->rows && cols == h->cols)
        return;
    int body = rows - 2;
    if (body < 1)
        body = 1;
    if (!h->wtop) {
        h->wtop = newwin(1, cols, 0, 0);
        h->wbody = newwin(body, cols, rows >= 3 ? 1 : 0, 0);
        h->wbot = newwin(1, cols, rows - 1, 0);
    } else {
        wresize(h->wtop, 1, cols);
        wresize(h->wbody, 1, cols);
        mvwin(h->wbody, rows >= 3 ? 1 : 0, 0);
        wresize(h->wbody, body, cols);
        wresize(h->wbot, 1, cols);
        mvwin(h->wbot, rows - 1, 0);
    }
    h->rows = rows;
    h->cols = cols;
    h->body_h = rows >= 3 ? body : 0;
}

/* Rows each entry takes and the rows before the first one. */
static int tui_hist_per(const struct tui_hist *h)
{
    return h->searched ? 2 : 1;
}

static int tui_hist_head_rows(const struct tui_hist *h)
{
    return !h->searched && h->body_h >= 4 ? 1 : 0;
}

static size_t tui_hist_page(const struct tui_hist *h)
{
    int n = (h->body_h - tui_hist_head_rows(h)) / tui_hist_per(h);
    return n > 0 ? (size_t)n : 1;
}

static void tui_hist_move(struct tui_hist *h, long d)
{
    size_t n = tui_hist_count(h);
    if (!n)
        return;
    if (d < 0)
        h->sel = (size_t)-d > h->sel ? 0 : h->sel - (size_t)-d;
    else
        h->sel = h->sel + (size_t)d >= n ? n - 1 : h->sel + (size_t)d;
    h->sel_id = tui_hist_entry_id(h, h->sel);
}

/* ---- drawing ---- */

/* Right-hand columns of a list row: model, messages, updated; each dropped below its width
 * so that the title keeps room (until 2026-12 only the model was: below 34 columns the title
 * shrank to nothing and, narrower still, "updated" was cut mid-word). */
#define TUI_HIST_W_MODEL 70
#define TUI_HIST_W_COUNT 40
#define TUI_HIST_W_WHEN 28

static int tui_hist_right_w(const struct tui_hist *h)
{
    return (h->cols >= TUI_HIST_W_MODEL ? 19 : 0) + (h->cols >= TUI_HIST_W_COUNT ? 10 : 0) +
           (h->cols >= TUI_HIST_W_WHEN ? 11 : 0);
}

/* The messages and updated columns that fit (count: the number of messages, when: the age). */
static void tui_hist_put_right(const struct tui_hist *h, struct tui_row *r, const char *count,
                               const char *when, int slot, unsigned attrs)
{
    char b[64];
    int n = 0;
    if (h->cols >= TUI_HIST_W_COUNT)
        n += snprintf(b + n, sizeof b - (size_t)n, "%10s", count);
    if (h->cols >= TUI_HIST_W_WHEN)
        n += snprintf(b + n, sizeof b - (size_t)n, " %10s", when);
    tui_row_put(r, b, (size_t)n, slot, attrs);
}

static void tui_hist_draw_head(struct tui *t, int y)
{
    struct tui_hist *h = t->hist;
    struct tui_row *r = &h->row;
    tui_row_begin(r, h->cols);
    char b[64];
    snprintf(b, sizeof b, " %*s  ", h->idw, "id");
    tui_row_put(r, b, strlen(b), THEME_META, THEME_ATTR_BOLD);
    int right = tui_hist_right_w(h);
    tui_row_put(r, "title", 5, THEME_META, THEME_ATTR_BOLD);
    tui_row_fill(r, h->cols - right, THEME_DEFAULT);
    if (h->cols >= TUI_HIST_W_MODEL) {
        tui_row_put(r, " model", 6, THEME_META, THEME_ATTR_BOLD);
        tui_row_fill(r, h->cols - right + 19, THEME_DEFAULT);
    }
    tui_hist_put_right(h, r, "messages", "updated", THEME_META, THEME_ATTR_BOLD);
    tui_row_blit(r, h->wbody, y, THEME_DEFAULT);
}

static void tui_hist_draw_conv(struct tui *t, int y, const struct store_conversation *c, int sel,
                               int64_t now)
{
    struct tui_hist *h = t->hist;
    struct tui_row *r = &h->row;
    int base = sel ? THEME_SELECTION : THEME_DEFAULT;
    int cur = t->have_session && session_conv(t->s)->id == c->id;
    tui_row_begin(r, h->cols);
    char b[64];
    snprintf(b, sizeof b, "%s%*lld  ", cur ? "\xE2\x97\x8F" : " ", h->idw, (long long)c->id);
    tui_row_put(r, b, strlen(b), sel ? base : THEME_META, 0);
    int right = tui_hist_right_w(h);
    int room = h->cols - right - r->col - 1;
    tui_hist_put_clip(r, tui_hist_title(c->title), strlen(tui_hist_title(c->title)), room,
                      c->title && *c->title ? base : sel ? base : THEME_DIM, 0);
    tui_row_fill(r, h->cols - right, base);
    int meta = sel ? base : THEME_META;
    if (h->cols >= TUI_HIST_W_MODEL) {
        tui_row_put(r, " ", 1, base, 0);
        tui_hist_put_clip(r, c->model ? c->model : "", c->model ? strlen(c->model) : 0, 17,
                          meta, 0);
        tui_row_fill(r, h->cols - right + 19, base);
    }
    char when[32];
    tui_hist_when(c->updated, now, when, sizeof when);
    snprintf(b, sizeof b, "%lld", (long long)c->message_count);
    tui_hist_put_right(h, r, b, when, meta, 0);
    tui_row_blit(r, h->wbody, y, base);
}

/* A snippet with its markers: matched text in the search-hit style. */
static void tui_hist_put_snippet(struct tui_row *r, const char *s, int base)
{
    size_t n = strlen(s);
    if (n > TUI_HIST_CLIP)
        n = TUI_HIST_CLIP;
    struct buf seg = BUF_INIT;
    int in = 0;
    size_t a = 0;
    for (size_t i = 0; i <= n && r->col < r->width; i++) {
        int mark = i < n && (s[i] == TUI_HIST_OPEN[0] || s[i] == TUI_HIST_CLOSE[0]);
        if (i < n && !mark)
            continue;
        tui_hist_flat(&seg, s + a, i - a);
        tui_row_put(r, buf_str(&seg), seg.len, in ? THEME_SEARCH_HIT : base, 0);
        if (mark)
            in = s[i] == TUI_HIST_OPEN[0];
        a = i + 1;
    }
    buf_free(&seg);
}

static void tui_hist_draw_hit(struct tui *t, int y, const struct tui_hist_ent *e, int sel,
                              int64_t now)
{
    struct tui_hist *h = t->hist;
    struct tui_row *r = &h->row;
    const struct store_hit *hit = &h->hits[e->hit];
    int base = sel ? THEME_SELECTION : THEME_DEFAULT;
    int meta = sel ? base : THEME_META;
    int cur = t->have_session && session_conv(t->s)->id == e->conv;
    tui_row_begin(r, h->cols);
    char b[96];
    snprintf(b, sizeof b, "%s%*lld  ", cur ? "\xE2\x97\x8F" : " ", h->idw, (long long)e->conv);
    tui_row_put(r, b, strlen(b), meta, 0);
    char when[32];
    tui_hist_when(hit->created, now, when, sizeof when);
    char info[96];
    snprintf(info, sizeof info, " %s \xC2\xB7 %s", hit->role ? hit->role : "?", when);
    if (e->count > 1) {
        char more[32];
        snprintf(more, sizeof more, " \xC2\xB7 %zu hits", e->count);
        strncat(info, more, sizeof info - strlen(info) - 1);
    }
    int iw = tui_draw_width(info, strlen(info));
    const char *title = tui_hist_title(hit->title);
    tui_hist_put_clip(r, title, strlen(title), h->cols - r->col - iw - 1,
                      hit->title && *hit->title ? base : sel ? base : THEME_DIM,
                      THEME_ATTR_BOLD);
    tui_row_fill(r, h->cols - iw, base);
    tui_row_put_raw(r, info, strlen(info), meta, 0);
    tui_row_blit(r, h->wbody, y, base);
    if (y + 1 >= h->body_h)
        return;
    tui_row_begin(r, h->cols);
    tui_row_fill(r, h->idw + 3, base);
    tui_hist_put_snippet(r, hit->snippet ? hit->snippet : "", base);
    tui_row_blit(r, h->wbody, y + 1, base);
}

static void tui_hist_draw_list(struct tui *t)
{
    struct tui_hist *h = t->hist;
    int64_t now = util_epoch();
    int y = 0;
    if (tui_hist_head_rows(h))
        tui_hist_draw_head(t, y++);
    size_t n = tui_hist_count(h), page = tui_hist_page(h);
    if (h->sel >= n)
        h->sel = n ? n - 1 : 0;
    if (h->sel < h->top)
        h->top = h->sel;
    if (h->sel >= h->top + page)
        h->top = h->sel - page + 1;
    if (h->top + page > n)
        h->top = n > page ? n - page : 0;
    for (size_t i = h->top; i < n && y < h->body_h; i++) {
        if (h->searched) {
            tui_hist_draw_hit(t, y, &h->ents[i], i == h->sel, now);
            y += 2;
        } else {
            tui_hist_draw_conv(t, y, &h->convs[i], i == h->sel, now);
            y++;
        }
    }
    if (!n && y < h->body_h) {
        struct tui_row *r = &h->row;
        tui_row_begin(r, h->cols);
        const char *s = h->searched ? "  no conversation matches" : "  no saved conversations yet";
        tui_row_put(r, s, strlen(s), THEME_META, 0);
        tui_row_blit(r, h->wbody, y++, THEME_DEFAULT);
    }
    for (; y < h->body_h; y++) {
        tui_row_begin(&h->row, h->cols);
        tui_row_blit(&h->row, h->wbody, y, THEME_DEFAULT);
    }
}

static void tui_hist_draw_top(struct tui *t)
{
    struct tui_hist *h = t->hist;
    struct tui_row *r = &h->row;
    tui_row_begin(r, h->cols);
    struct buf left = BUF_INIT, right = BUF_INIT;
    if (h->mode == TUI_HIST_VIEW) {
        buf_printf(&left, " Conversation %lld: ", (long long)h->view_id);
        buf_appends(&right, " READ-ONLY \xC2\xB7 r resume \xC2\xB7 Esc back \xC2\xB7 q close ");
    } else if (h->searched) {
        buf_printf(&left, " %zu conversation%s", h->nents,
                   h->nents == 1 ? " matches" : "s match");
        if (h->nhits >= TUI_HIST_HITS)
            buf_appends(&left, " (best hits)");
        buf_appends(&left, ": ");
    } else {
        buf_printf(&left, " Conversations (%zu)", h->nconv);
    }
    if (t->answer != TUI_NO_ANSWER && h->mode != TUI_HIST_VIEW)
        buf_appends(&right, " an answer is streaming in the chat ");
    int rw = tui_draw_width(buf_str(&right), right.len);
    if (rw > h->cols / 2 && h->mode != TUI_HIST_VIEW)
        rw = 0;
    tui_row_put(r, buf_str(&left), left.len, THEME_TITLE, 0);
    int room = h->cols - r->col - rw;
    if (h->mode == TUI_HIST_VIEW) {
        tui_hist_put_clip(r, h->view_title, strlen(h->view_title), room, THEME_TITLE,
                          THEME_ATTR_BOLD);
    } else if (h->searched) {
        tui_hist_put_clip(r, h->searched, strlen(h->searched), room, THEME_TITLE,
                          THEME_ATTR_BOLD);
    }
    if (rw && r->col + rw <= h->cols) {
        tui_row_fill(r, h->cols - rw, THEME_TITLE);
        tui_row_put(r, buf_str(&right), right.len, THEME_TITLE, THEME_ATTR_BOLD);
    }
    tui_row_blit(r, h->wtop, 0, THEME_TITLE);
    buf_free(&left);
    buf_free(&right);
}

/* The bottom row: a prompt, a message, or the keys. *cx gets the cursor column (-1: none). */
static void tui_hist_draw_bot(struct tui *t, int *cx)
{
    struct tui_hist *h = t->hist;
    struct tui_row *r = &h->row;
    tui_row_begin(r, h->cols);
    *cx = -1;
    char b[600];
    switch (h->prompt) {
    case TUI_HIST_P_FIND: {
        /* after the field, the keys; or what is wrong with the query, as the OR still being
         * typed (until 2026-12 that hint was kept but never drawn while the field was open) */
        if (h->msg[0])
            snprintf(b, sizeof b, "  %s", h->msg);
        else
            snprintf(b, sizeof b, "  Enter keep \xC2\xB7 \xE2\x86\x91\xE2\x86\x93 move \xC2\xB7 "
                                  "Esc clear");
        int tail = tui_draw_width(b, strlen(b));
        tui_row_put(r, "find: ", 6, THEME_PROMPT, THEME_ATTR_BOLD);
        int room = h->cols - r->col - (tail > h->cols / 2 ? h->cols / 2 : tail) - 1;
        tui_hist_put_clip(r, buf_str(&h->query), h->query.len, room, THEME_INPUT, 0);
        *cx = r->col;
        int slot = !h->msg[0]   ? THEME_META
                   : h->msg_err ? THEME_STATUS_ERROR
                                : THEME_STATUS_WARNING;
        tui_row_put(r, b, strlen(b), slot, 0);
        tui_row_blit(r, h->wbot, 0, THEME_INPUT);
        return;
    }
    case TUI_HIST_P_RENAME:
        snprintf(b, sizeof b, "title of %lld: ", (long long)h->target);
        tui_row_put(r, b, strlen(b), THEME_PROMPT, THEME_ATTR_BOLD);
        tui_hist_put_clip(r, buf_str(&h->edit), h->edit.len, h->cols - r->col - 26,
                          THEME_INPUT, 0);
        *cx = r->col;
        snprintf(b, sizeof b, "  Enter save \xC2\xB7 Esc cancel");
        tui_row_put(r, b, strlen(b), THEME_META, 0);
        tui_row_blit(r, h->wbot, 0, THEME_INPUT);
        return;
    case TUI_HIST_P_DELETE: {
        const struct store_conversation *c = tui_hist_conv(h, h->target);
        const char *title = c ? tui_hist_title(c->title)
                              : h->view_title ? h->view_title : "(untitled)";
        long long count = c ? (long long)c->message_count
                            : h->conv ? (long long)h->conv->n_messages : 0;
        snprintf(b, sizeof b, " Delete conversation %lld '", (long long)h->target);
        tui_row_put(r, b, strlen(b), THEME_STATUS_WARNING, THEME_ATTR_BOLD);
        snprintf(b, sizeof b, "' (%lld message%s)? y/N ", count, count == 1 ? "" : "s");
        int tail = tui_draw_width(b, strlen(b));
        tui_hist_put_clip(r, title, strlen(title), h->cols - r->col - tail, THEME_STATUS_WARNING,
                          THEME_ATTR_BOLD);
        tui_row_put(r, b, strlen(b), THEME_STATUS_WARNING, THEME_ATTR_BOLD);
        *cx = r->col < h->cols ? r->col : h->cols - 1;
        tui_row_blit(r, h->wbot, 0, THEME_STATUS_WARNING);
        return;
    }
    case TUI_HIST_P_NONE:
        break;
    }
    if (h->msg[0]) {
        int slot = h->msg_err ? THEME_STATUS_ERROR : THEME_STATUS;
        tui_row_put(r, " ", 1, slot, 0);
        tui_row_put_raw(r, h->msg, strlen(h->msg), slot, 0);
        tui_row_blit(r, h->wbot, 0, slot);
        return;
    }
    if (h->mode == TUI_HIST_VIEW) {
        size_t n = h->conv ? h->conv->n_messages : 0;
        size_t a = h->pos >= h->sys ? h->pos - h->sys + 1 : 1;
        size_t z = h->last >= h->sys ? h->last - h->sys + 1 : 1;
        if (!n)
            snprintf(b, sizeof b, " no messages \xC2\xB7");
        else if (z > a)
            snprintf(b, sizeof b, " messages %zu-%zu of %zu \xC2\xB7", a, z, n);
        else
            snprintf(b, sizeof b, " message %zu of %zu \xC2\xB7", a, n);
        if (h->nhitv) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, " match %zu/%zu n/N \xC2\xB7", h->hitcur, h->nhitv);
        }
        strncat(b, " \xE2\x86\x91\xE2\x86\x93 PgUp PgDn Home End \xC2\xB7 r resume "
                   "\xC2\xB7 e rename \xC2\xB7 d delete \xC2\xB7 Esc back \xC2\xB7 q close",
                sizeof b - strlen(b) - 1);
    } else {
        snprintf(b, sizeof b, " Enter read \xC2\xB7 r resume \xC2\xB7 e rename \xC2\xB7 d delete "
                              "\xC2\xB7 / search%s \xC2\xB7 q close",
                 h->searched ? " \xC2\xB7 Esc all" : "");
    }
    tui_row_put(r, b, strlen(b), THEME_STATUS, 0);
    tui_row_blit(r, h->wbot, 0, THEME_STATUS);
}

void tui_hist_draw(struct tui *t)
{
    struct tui_hist *h = t->hist;
    if (!h)
        return;
    tui_hist_layout(h);
    if (h->mode == TUI_HIST_LIST)
        tui_hist_search(t); /* the query as typed so far (keys that came together: once) */
    if (h->rows >= 2) {
        tui_hist_draw_top(t);
        wnoutrefresh(h->wtop);
    }
    if (h->body_h > 0) {
        if (h->mode == TUI_HIST_VIEW) {
            tui_hist_view_clamp(h); /* after a resize */
            tui_hist_view_draw(h);
        } else {
            tui_hist_draw_list(t);
        }
        wnoutrefresh(h->wbody);
    }
    int cx;
    tui_hist_draw_bot(t, &cx);
    if (cx >= 0) {
        curs_set(1);
        wmove(h->wbot, 0, cx < h->cols ? cx : h->cols - 1);
        leaveok(h->wbot, FALSE);
    } else {
        curs_set(0);
        leaveok(h->wbot, TRUE);
    }
    wnoutrefresh(h->wbot);
}

void tui_hist_drawn(struct tui *t, double done)
{
    struct tui_hist *h = t->hist;
    if (!h || !h->what)
        return;
    if (t->trace) {
        if (strcmp(h->what, "open") == 0)
            fprintf(t->trace, "B open %.6f %.6f %.6f %.6f\n", h->t_key, h->t_load, h->t_build,
                    done);
        else
            fprintf(t->trace, "B %s %.6f %.6f\n", h->what, h->t_key, done);
        fflush(t->trace);
    }
    h->what = NULL;
}

/* ---- open and close ---- */

void tui_hist_open(struct tui *t, const char *arg)
{
    if (!tui_hist_store(t)) {
        tui_error(t, "/history: there is no conversation store (--incognito, or the database "
                     "could not be opened: see the warning tokterm printed at start), so "
                     "there are no saved conversations to browse");
        return;
    }
    if (t->hist)
        return;
    double t0 = util_now();
    struct tui_hist *h = xcalloc(1, sizeof *h);
    t->hist = h;
    tui_hist_layout(h);
    tui_hist_load(t);
    if (t->have_session && session_conv(t->s)->id)
        tui_hist_select_id(h, session_conv(t->s)->id);
    if (arg && *arg) {
        buf_appends(&h->query, arg);
        tui_hist_search(t);
    }
    if (!t->o->save && !h->msg[0])
        tui_hist_say(h, 0, "this chat is not saved (--no-save): a conversation resumed here "
                           "goes on without saving");
    h->what = "list";
    h->t_key = t0;
    t->dirty |= TUI_D_FULL;
    t->urgent = 1;
}

void tui_hist_close(struct tui *t)
{
    struct tui_hist *h = t->hist;
    if (!h)
        return;
    tui_hist_view_free(h);
    tui_hist_clear_hits(h);
    store_conversation_list_free(h->convs, h->nconv);
    free(h->searched);
    buf_free(&h->query);
    buf_free(&h->edit);
    tui_row_free(&h->row);
    if (h->wtop)
        delwin(h->wtop);
    if (h->wbody)
        delwin(h->wbody);
    if (h->wbot)
        delwin(h->wbot);
    free(h);
    t->hist = NULL;
    curs_set(1);
    t->dirty |= TUI_D_FULL;
    t->urgent = 1;
}

/* ---- keys ---- */

/* Edit a one-line text field: returns 1 when the key was for it. */
static int tui_hist_edit(struct buf *b, int c)
{
    if (c == KEY_BACKSPACE || c == 127 || c == 8) {
        while (b->len && ((unsigned char)b->data[b->len - 1] & 0xC0) == 0x80)
            b->len--;
        if (b->len)
            b->len--;
        if (b->data)
            b->data[b->len] = '\0';
        return 1;
    }
    if (c == 21) { /* Ctrl-U */
        buf_reset(b);
        return 1;
    }
    if (c == 23) { /* Ctrl-W: the last word */
        while (b->len && b->data[b->len - 1] == ' ')
            b->len--;
        while (b->len && b->data[b->len - 1] != ' ')
            b->len--;
        if (b->data)
            b->data[b->len] = '\0';
        return 1;
    }
    if (c >= 0x20 && c < 256 && c != 127) {
        if (b->len < 4096)
            buf_appendc(b, (char)c);
        return 1;
    }
    return 0;
}

static int tui_hist_nav(struct tui_hist *h, int c)
{
    long page = (long)tui_hist_page(h);
    switch (c) {
    case KEY_UP:
        tui_hist_move(h, -1);
        return 1;
    case KEY_DOWN:
        tui_hist_move(h, 1);
        return 1;
    case KEY_PPAGE:
        tui_hist_move(h, -page);
        return 1;
    case KEY_NPAGE:
        tui_hist_move(h, page);
        return 1;
    case KEY_HOME:
        tui_hist_move(h, -(long)tui_hist_count(h));
        return 1;
    case KEY_END:
        tui_hist_move(h, (long)tui_hist_count(h));
        return 1;
    default:
        return 0;
    }
}

static void tui_hist_key_view(struct tui *t, int c)
{
    struct tui_hist *h = t->hist;
    h->what = "scroll";
    switch (c) {
    case KEY_UP:
    case 'k':
    case KEY_SR:
        tui_hist_view_scroll(h, -1);
        return;
    case KEY_DOWN:
    case 'j':
    case KEY_SF:
        tui_hist_view_scroll(h, 1);
        return;
    case KEY_PPAGE:
    case 'b':
        tui_hist_view_scroll(h, -tui_hist_view_page(h));
        return;
    case KEY_NPAGE:
    case ' ':
        tui_hist_view_scroll(h, tui_hist_view_page(h));
        return;
    case KEY_HOME:
    case 'g':
        h->pos = h->off = 0;
        tui_hist_view_clamp(h);
        return;
    case KEY_END:
    case 'G':
        tui_hist_view_end(h);
        return;
    case 'n': /* the next match below */
        if (h->nhitv)
            tui_hist_view_hit(h, h->hitcur < h->nhitv ? h->hitcur : 0);
        return;
    case 'N': /* the one above */
        if (h->nhitv)
            tui_hist_view_hit(h, h->hitcur > 1 ? h->hitcur - 2 : h->nhitv - 1);
        return;
    default:
        break;
    }
    h->what = "key";
    switch (c) {
    case 27:
    case 3:
    case KEY_LEFT:
    case KEY_BACKSPACE:
    case 127:
    case 8:
        tui_hist_view_free(h);
        h->mode = TUI_HIST_LIST;
        return;
    case 'q':
        tui_hist_close(t);
        return;
    case 'r':
        tui_hist_resume(t);
        return;
    case 'e':
    case KEY_F(2):
        tui_hist_rename_start(t);
        return;
    case 'd':
    case KEY_DC:
        tui_hist_delete_start(t);
        return;
    default:
        return;
    }
}

/* The wheel: scroll the conversation read, or the list. */
static void tui_hist_key_mouse(struct tui_hist *h)
{
    MEVENT ev;
    int d = 0;
    if (getmouse(&ev) == OK) {
        if (ev.bstate & BUTTON4_PRESSED)
            d = -3;
#ifdef BUTTON5_PRESSED
        else if (ev.bstate & BUTTON5_PRESSED)
            d = 3;
#endif
    }
    h->what = "scroll";
    if (h->mode == TUI_HIST_VIEW)
        tui_hist_view_scroll(h, d);
    else
        tui_hist_move(h, d);
}

/* A key while a prompt (delete? rename, find) is open. 1 when it was one. */
static int tui_hist_key_prompt(struct tui *t, struct tui_hist *h, int c)
{
    switch (h->prompt) {
    case TUI_HIST_P_DELETE:
        tui_hist_delete_done(t, c == 'y' || c == 'Y');
        return 1;
    case TUI_HIST_P_RENAME:
        if (c == '\r' || c == '\n' || c == KEY_ENTER)
            tui_hist_rename_done(t);
        else if (c == 27 || c == 3 || c == 7) {
            h->prompt = TUI_HIST_P_NONE;
            tui_hist_say(h, 0, "not renamed");
        } else {
            tui_hist_edit(&h->edit, c);
        }
        return 1;
    case TUI_HIST_P_FIND:
        if (c == '\r' || c == '\n' || c == KEY_ENTER || c == '\t') {
            h->prompt = TUI_HIST_P_NONE; /* keep the results; the keys act on them */
        } else if (c == 27 || c == 3 || c == 7) {
            h->prompt = TUI_HIST_P_NONE;
            buf_reset(&h->query);
        } else if (tui_hist_nav(h, c)) {
            h->what = "scroll";
        } else {
            tui_hist_edit(&h->query, c);
        }
        return 1;
    case TUI_HIST_P_NONE:
        break;
    }
    return 0;
}

/* A key on the list of conversations. */
static void tui_hist_key_list(struct tui *t, struct tui_hist *h, int c)
{
    switch (c) {
    case 'k':
        tui_hist_move(h, -1);
        break;
    case 'j':
        tui_hist_move(h, 1);
        break;
    case '\r':
    case '\n':
    case KEY_ENTER:
    case KEY_RIGHT:
        if (tui_hist_count(h))
            tui_hist_view_open(t, tui_hist_entry_id(h, h->sel),
                               h->searched ? h->hits[h->ents[h->sel].hit].message_id : 0);
        break;
    case '/':
    case 19: /* Ctrl-S, as in the chat */
    case 6:  /* Ctrl-F */
        h->prompt = TUI_HIST_P_FIND;
        break;
    case 'r':
        tui_hist_resume(t);
        break;
    case 'e':
    case 'n':
    case KEY_F(2):
        tui_hist_rename_start(t);
        break;
    case 'd':
    case KEY_DC:
        tui_hist_delete_start(t);
        break;
    case 27:
    case 3:
        if (h->searched || h->query.len) {
            buf_reset(&h->query); /* back to the whole list */
            break;
        }
        tui_hist_close(t);
        break;
    case 'q':
        tui_hist_close(t);
        break;
    default:
        break;
    }
}

void tui_hist_key(struct tui *t, int c)
{
    struct tui_hist *h = t->hist;
    if (!h)
        return;
    t->dirty |= TUI_D_VIEW; /* the next frame draws the browser */
    h->msg[0] = '\0';
    h->what = "key";
    h->t_key = util_now();
    if (c == KEY_MOUSE)
        tui_hist_key_mouse(h);
    else if (tui_hist_key_prompt(t, h, c))
        return;
    else if (h->mode == TUI_HIST_VIEW)
        tui_hist_key_view(t, c);
    else if (tui_hist_nav(h, c))
        h->what = "scroll";
    else
        tui_hist_key_list(t, h, c);
}
