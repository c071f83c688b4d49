/* tui_status.c - the status bar: fields ranked by importance, dropped from the least
 * important when the terminal is narrow. */
#include "config.h"
#include "tui/tui_status.h"
#include "tokens/context.h"
#include "core/session.h"
#include "text/theme.h"
#include "text/wrap.h"
#include "tokens/tokenizer.h"
#include "tui/tui_draw.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tui_status_model(struct tui_status *st, const char *profile, const char *model)
{
    if (profile && *profile)
        snprintf(st->model, sizeof st->model, "%s/%s", profile, model ? model : "?");
    else
        snprintf(st->model, sizeof st->model, "%s", model ? model : "?");
    /* Hook: the context budget is the model's window from data/models.tsv; a context module
     * that knows the configured budget should set st->ctx_budget instead. */
    struct tok_model_info info;
    st->ctx_budget = model && tokenizer_model_info(model, &info) == 0 ? info.context_window : 0;
}

void tui_status_effort(struct tui_status *st, const char *effort)
{
    snprintf(st->effort, sizeof st->effort, "%s",
             effort && strcmp(effort, "none") != 0 ? effort : "");
}

void tui_status_init(struct tui_status *st, const char *profile, const char *model)
{
    memset(st, 0, sizeof(*st));
    ratelimit_state_init(&st->rl, 0, 0);
    st->ctx_used = -1;
    tui_status_model(st, profile, model);
}

void tui_status_context(struct tui_status *st, const struct session_status *ss)
{
    st->have_ctx = 1;
    st->ctx_used = ss->ctx_used;
    st->ctx_budget = ss->available > 0 ? ss->available : 0;
    st->ctx_approx = ss->approximate || ss->window_assumed;
    st->spent = ss->spent_tokens;
    st->spent_usd = ss->spent_usd;
    st->priced = ss->priced;
    st->budget_level = (int)ss->level;
    st->budget_frac = ss->budget_frac;
}

void tui_status_send(struct tui_status *st, double now)
{
    st->state = TUI_STATE_WAITING;
    st->t_send = now;
    st->t_first = 0;
    st->t_last = 0;
    st->bytes = 0;
}

void tui_status_text(struct tui_status *st, size_t n, double t_first, double t_last)
{
    if (!st->t_first)
        st->t_first = t_first;
    st->t_last = t_last;
    st->bytes += n;
    if (st->state == TUI_STATE_WAITING || st->state == TUI_STATE_RETRYING ||
        st->state == TUI_STATE_QUOTA)
        st->state = TUI_STATE_STREAMING;
}

void tui_status_wait(struct tui_status *st, enum tui_state state, double until, const char *why)
{
    st->state = state;
    st->until = until;
    snprintf(st->why, sizeof st->why, "%s", why ? why : "");
}

void tui_status_state(struct tui_status *st, enum tui_state state, double until)
{
    st->state = state;
    st->until = until;
}

/* An answer replayed from the response cache (no request was made). */
static int tui_status_cached(const struct net_result *r)
{
    return r->cached;
}

/* Feed a response's headers into the bar's limits; resp (may be NULL) gets what they said. */
static void tui_status_feed(struct tui_status *st, const char *headers, double now,
                            double now_epoch, struct ratelimit_response *resp)
{
    for (const char *h = headers; h && *h;) {
        const char *nl = strchr(h, '\n');
        size_t len = nl ? (size_t)(nl - h) : strlen(h);
        ratelimit_feed(&st->rl, resp, h, len, now, now_epoch);
        h += len + (nl ? 1 : 0);
    }
}

void tui_status_headers(struct tui_status *st, const char *headers, double now,
                        double now_epoch)
{
    tui_status_feed(st, headers, now, now_epoch, NULL);
}

void tui_status_end(struct tui_status *st, const struct net_result *r, double now,
                    double now_epoch)
{
    if (r->outcome == API_ERR_USAGE) { /* refused before it was sent: nothing was timed (until
                                          2026-12 "ttft - total 127ms" of the refusal) */
        st->state = TUI_STATE_ERROR;
        return;
    }
    st->have_last = 1;
    st->ttft = r->t.ttft;
    st->total = r->t.total > 0 ? r->t.total : now - st->t_send;
    st->tps = r->t.tokens_per_s;
    st->reused = r->t.reused;
    st->http_version = r->t.http_version;
    st->cached = tui_status_cached(r);
    if (r->usage.present) {
        if (!st->have_ctx) /* the session's count (tui_status_context) is the better one */
            st->ctx_used = r->usage.prompt;
        st->spent += r->usage.total;
    }
    if (r->model[0] && strcmp(r->model, st->model) != 0) {
        struct tok_model_info info;
        if (tokenizer_model_info(r->model, &info) == 0 && info.context_window)
            st->ctx_budget = info.context_window;
    }
    struct ratelimit_response resp;
    ratelimit_response_init(&resp);
    tui_status_feed(st, r->headers, now, now_epoch, &resp);
    if (r->status >= 200 && r->status < 300 && !r->cached) /* a limit no longer reported is */
        ratelimit_forget_unreported(&st->rl, &resp); /* forgotten, as the pacer forgets it */
    if (r->outcome == API_OK || r->outcome == API_CUT || r->outcome == API_CANCELLED)
        st->state = TUI_STATE_IDLE;
    else
        st->state = TUI_STATE_ERROR;
}

static void tui_status_count(long long n, char *buf, size_t size)
{
    if (n < 0)
        snprintf(buf, size, "?");
    else if (n < 1000)
        snprintf(buf, size, "%lld", n);
    else if (n < 100000)
        snprintf(buf, size, "%.1fk", (double)n / 1000);
    else if (n < 1000000)
        snprintf(buf, size, "%lldk", n / 1000);
    else
        snprintf(buf, size, "%.1fM", (double)n / 1e6);
}

static const char *tui_status_http(int v)
{
    switch (v) {
    case 10: return "HTTP/1.0";
    case 11: return "HTTP/1.1";
    case 20: return "HTTP/2";
    case 30: return "HTTP/3";
    default: return "HTTP/?";
    }
}

struct tui_seg {
    char text[224];
    int prio; /* lower = more important */
    int slot;
};

#define TUI_SEGS 14

/* The fields of the status line, most important first where the order is shown. */
struct tui_segs {
    struct tui_seg v[TUI_SEGS];
    int n;
};

static void tui_seg_add(struct tui_segs *s, int prio, int slot, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void tui_seg_add(struct tui_segs *s, int prio, int slot, const char *fmt, ...)
{
    if (s->n >= TUI_SEGS)
        return;
    struct tui_seg *g = &s->v[s->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->text, sizeof g->text, fmt, ap);
    va_end(ap);
    g->prio = prio;
    g->slot = slot;
}

void tui_status_tool(struct tui_status *st, const char *name, int round, double elapsed,
                     double now)
{
    snprintf(st->tool, sizeof st->tool, "%s", name ? name : "");
    st->tool_round = round;
    st->tool_elapsed = elapsed;
    st->tool_at = now;
}

int tui_status_tick(const struct tui_status *st, double now)
{
    if (st->tool[0])
        return 250;
    switch (st->state) {
    case TUI_STATE_WAITING:
    case TUI_STATE_STREAMING:
    case TUI_STATE_CANCELLING:
        return 250;
    case TUI_STATE_RETRYING:
    case TUI_STATE_QUOTA:
        return 250;
    default:
        break;
    }
    if (st->rl.seen && ((st->rl.req.reset_at > now) || (st->rl.tok.reset_at > now)))
        return 1000;
    return -1;
}

/* The colour of the whole line: error, warning (retrying, quota, cancelling) or normal. */
static int tui_status_base(const struct tui_status *st)
{
    if (st->state == TUI_STATE_ERROR || st->state == TUI_STATE_NOKEY)
        return THEME_STATUS_ERROR;
    if (st->state == TUI_STATE_RETRYING || st->state == TUI_STATE_QUOTA ||
        st->state == TUI_STATE_CANCELLING)
        return THEME_STATUS_WARNING;
    return THEME_STATUS;
}

/* The state field: "idle", "waiting 3s", "retrying in 2s"... */
static void tui_status_state_text(const struct tui_status *st, double now, char *out,
                                  size_t size)
{
    char d[32];
    out[0] = '\0';
    if (st->tool[0]) {
        const char *took =
            ratelimit_format_duration(st->tool_elapsed + (now - st->tool_at), d, sizeof d);
        if (st->tool_round > 0)
            snprintf(out, size, "round %d \xC2\xB7 %s %s", st->tool_round, st->tool, took);
        else /* no round: "starting MCP server fs 3s" */
            snprintf(out, size, "%s %s", st->tool, took);
        return;
    }
    switch (st->state) {
    case TUI_STATE_IDLE: snprintf(out, size, "idle"); break;
    case TUI_STATE_WAITING:
        snprintf(out, size, "waiting %s",
                 ratelimit_format_duration(now - st->t_send, d, sizeof d));
        break;
    case TUI_STATE_STREAMING: snprintf(out, size, "streaming"); break;
    case TUI_STATE_CANCELLING: snprintf(out, size, "cancelling"); break;
    case TUI_STATE_RETRYING:
        snprintf(out, size, "retrying in %s",
                 ratelimit_format_duration(st->until - now, d, sizeof d));
        break;
    case TUI_STATE_QUOTA:
        snprintf(out, size, "waiting for quota %s",
                 ratelimit_format_duration(st->until - now, d, sizeof d));
        break;
    case TUI_STATE_ERROR: snprintf(out, size, "error"); break;
    case TUI_STATE_NOKEY: snprintf(out, size, "no API key"); break;
    }
}

/* The timings field: the stream's so far, or the last exchange's; 0 when there is none. */
static int tui_status_timings(const struct tui_status *st, char *out, size_t size)
{
    char a[32], b[32];
    if (st->state == TUI_STATE_STREAMING && st->t_first) {
        double span = st->t_last - st->t_first;
        ratelimit_format_duration(st->t_first - st->t_send, a, sizeof a);
        if (span > 0.05)
            snprintf(out, size, "ttft %s %.0f tok/s~", a, (double)st->bytes / 4.0 / span);
        else
            snprintf(out, size, "ttft %s", a);
        return 1;
    }
    if (!st->have_last || st->state == TUI_STATE_WAITING)
        return 0;
    if (st->ttft >= 0)
        ratelimit_format_duration(st->ttft, a, sizeof a);
    else
        snprintf(a, sizeof a, "-");
    ratelimit_format_duration(st->total, b, sizeof b);
    if (st->tps > 0) /* net.c measures it only over TT_TPS_MIN_SECONDS */
        snprintf(out, size, "ttft %s %.0f tok/s %s", a, st->tps, b);
    else
        snprintf(out, size, "ttft %s total %s", a, b);
    return 1;
}

/* The session's spending field (tokens, dollars, share of the budget), when there is one. */
static void tui_status_spend(const struct tui_status *st, struct tui_segs *s, int base)
{
    int warn = st->budget_level >= CONTEXT_BUDGET_WARN;
    if (!(st->spent > 0 || warn))
        return;
    char a[16], usd[32] = "", pct[48] = "";
    tui_status_count(st->spent, a, sizeof a);
    char m[CONTEXT_USD_MAX];
    if (st->spent_usd > 0) /* what was spent stays shown under a model with no price, as at
                              least that much (until 2026-12 it went from the bar) */
        snprintf(usd, sizeof usd, " %s%s", st->priced ? "" : "\xE2\x89\xA5",
                 context_format_usd(st->spent_usd, m));
    if (st->budget_level >= CONTEXT_BUDGET_OVER)
        snprintf(pct, sizeof pct, " (budget reached)");
    else if (warn)
        snprintf(pct, sizeof pct, " (%.0f%% of budget)", st->budget_frac * 100);
    tui_seg_add(s, warn ? 1 : 5, warn ? THEME_STATUS_WARNING : base, "session %s tok%s%s", a,
                usd, pct);
}

/* Every field the status line could show, with its priority and colour. */
static void tui_status_fields(const struct tui_status *st, double now, int base,
                              struct tui_segs *s)
{
    char text[224];
    tui_status_state_text(st, now, text, sizeof text);
    tui_seg_add(s, 0, base, "%s", text);
    if (st->scrolled)
        tui_seg_add(s, 0, THEME_STATUS_WARNING, "\xE2\x86\x91 scrolled (End)");
    char rl[128];
    ratelimit_format(&st->rl, now, rl, sizeof rl);
    int waits = st->state == TUI_STATE_RETRYING || st->state == TUI_STATE_QUOTA;
    if (waits) {
        /* why it waits, and the way out, before anything else; a wait for the quota is
         * explained by the limits' own field (kept fresh by every response, 429s too) */
        static const char quota[] = "waiting for quota ";
        const char *why = st->why, *p = strstr(why, " (");
        if (st->state == TUI_STATE_QUOTA && strncmp(why, quota, sizeof quota - 1) == 0)
            why = rl[0] || !p ? "" : p + 1;
        tui_seg_add(s, 0, base, "Enter sends now");
        if (*why)
            tui_seg_add(s, 1, base, "%s", why);
    }
    if (st->effort[0]) /* while it waits, the model gives way to the reason first */
        tui_seg_add(s, waits ? 2 : 1, base, "%s think:%s", st->model, st->effort);
    else
        tui_seg_add(s, waits ? 2 : 1, base, "%s", st->model);
    if (tui_status_timings(st, text, sizeof text))
        tui_seg_add(s, 2, base, "%s", text);
    /* the last exchange's connection: not while the next one is out (until 2026-12 a request
     * on a new connection showed "reused" from the one before until it ended) */
    if (st->have_last && (st->state == TUI_STATE_IDLE || st->state == TUI_STATE_ERROR) &&
        !st->cached && st->http_version) /* none made: a cached answer, a cancel before it */
        tui_seg_add(s, 6, base, "%s %s", st->reused ? "reused" : "new",
                    tui_status_http(st->http_version));
    if (rl[0]) {
        int low = (st->rl.req.remaining == 0 || st->rl.tok.remaining == 0);
        tui_seg_add(s, waits ? 1 : 3, low ? THEME_STATUS_WARNING : base, "%s", rl);
    }
    if (st->ctx_used >= 0) {
        char a[16], b[16];
        tui_status_count(st->ctx_used, a, sizeof a);
        tui_status_count(st->ctx_budget ? st->ctx_budget : -1, b, sizeof b);
        tui_seg_add(s, 4, base, "ctx %s%s/%s", st->ctx_approx ? "~" : "", a, b);
    }
    tui_status_spend(st, s, base);
    if (st->cached)
        tui_seg_add(s, 2, base, "cached");
}

/* Leave out fields (keep[i] = 0) until the rest fits width: first the "F1 help" hint (helpw
 * columns), then the least important field, never one of priority 0. Returns 1 when the
 * hint stays. */
/* Cut a field to cols columns, whole clusters then "…". */
static void tui_seg_clip(struct tui_seg *g, int cols)
{
    size_t n = strlen(g->text), at = 0;
    int used = 0;
    while (at < n) {
        int w;
        size_t k = wrap_cluster(g->text + at, n - at, &w);
        if (used + w > cols - 1)
            break;
        used += w;
        at += k;
    }
    if (at < n && at + 4 <= sizeof g->text)
        memcpy(g->text + at, "\xE2\x80\xA6", 4); /* with its NUL */
}

static int tui_status_fit(struct tui_segs *s, int width, int helpw, int *keep)
{
    for (int i = 0; i < s->n; i++)
        keep[i] = 1;
    int show_help = 1;
    for (;;) {
        int total = 1;
        for (int i = 0; i < s->n; i++)
            if (keep[i])
                total += tui_draw_width(s->v[i].text, strlen(s->v[i].text)) + 3;
        if (show_help)
            total += helpw + 1;
        if (total <= width)
            break;
        if (show_help) {
            show_help = 0;
            continue;
        }
        int worst = -1;
        for (int i = 0; i < s->n; i++)
            if (keep[i] && s->v[i].prio > 0 && (worst < 0 || s->v[i].prio > s->v[worst].prio))
                worst = i;
        if (worst < 0)
            break;
        int w = tui_draw_width(s->v[worst].text, strlen(s->v[worst].text));
        int room = width - (total - w);
        if (s->v[worst].prio <= 1 && room >= 12 && room < w) {
            /* the model (a router's or a deployment's name runs to 60 columns and more) is
             * cut rather than dropped: until 2026-12 the bar said "idle" and nothing else */
            tui_seg_clip(&s->v[worst], room);
            if (tui_draw_width(s->v[worst].text, strlen(s->v[worst].text)) <= room)
                continue;
        }
        keep[worst] = 0;
    }
    return show_help;
}

void tui_status_draw(const struct tui_status *st, WINDOW *w, int y, int width, double now,
                     const char *hint)
{
    static struct tui_row row;
    int base = tui_status_base(st);
    tui_row_begin(&row, width);
    struct tui_segs s = {.n = 0};
    if (hint && *hint) {
        tui_row_put(&row, " ", 1, THEME_STATUS, 0);
        if (st->state == TUI_STATE_QUOTA || st->state == TUI_STATE_RETRYING) {
            /* the countdown stays in sight beside the hint (until 2026-12 a hint about the
             * waiting message hid the countdown it pointed to, for the whole wait) */
            tui_status_fields(st, now, base, &s);
            if (s.n) {
                tui_row_put_raw(&row, s.v[0].text, strlen(s.v[0].text), s.v[0].slot,
                                THEME_ATTR_BOLD);
                tui_row_put(&row, " \xE2\x94\x82 ", 5, base, THEME_ATTR_DIM);
            }
        }
        tui_row_put_raw(&row, hint, strlen(hint), THEME_STATUS, 0);
        tui_row_blit(&row, w, y, THEME_STATUS);
        return;
    }
    tui_status_fields(st, now, base, &s);
    const char *help = "F1 help";
    int helpw = 7;
    int keep[TUI_SEGS];
    int show_help = tui_status_fit(&s, width, helpw, keep);
    tui_row_put(&row, " ", 1, base, 0);
    int first = 1;
    for (int i = 0; i < s.n; i++) {
        if (!keep[i])
            continue;
        if (!first)
            tui_row_put(&row, " \xE2\x94\x82 ", 5, base, THEME_ATTR_DIM);
        first = 0;
        tui_row_put_raw(&row, s.v[i].text, strlen(s.v[i].text), s.v[i].slot,
                        i == 0 ? THEME_ATTR_BOLD : 0);
    }
    if (show_help) {
        tui_row_fill(&row, width - helpw - 1, base);
        tui_row_put(&row, help, strlen(help), base, THEME_ATTR_DIM);
    }
    tui_row_blit(&row, w, y, base);
}
