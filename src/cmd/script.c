/* script.c - scripted mode: stream the answer to stdout as each delta arrives. When stdout is
 * a terminal, control and escape sequences in the model's text are neutralised; when it is a
 * pipe or file, the bytes pass through exactly. With --render (auto: stdout is a terminal) the
 * answer is Markdown rendered with the theme's colours (text/ansi.c), a line at a time as
 * markdown finishes it; on a terminal a slow line is drawn as it grows (ansi_md_live). */
#include "config.h"
#include "cmd/script.h"
#include "core/loop.h"
#include "core/mcpset.h"
#include "core/session.h"
#include "core/setup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/probe.h"
#include "text/ansi.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct script_state {
    const struct script_opts *o;
    int out_tty, err_tty;
    int broken_pipe;      /* stdout failed: the reader went away, or (write_errno not EPIPE)
                             the disk is full or the descriptor closed */
    int write_errno;
    int sep_pending;      /* a blank line goes before this turn's first byte on stdout (none
                             when the turn writes nothing: a failed later turn) */
    int quiet;            /* this turn's text is kept, not written (script_turn) */
    char last_byte;       /* last byte written to stdout */
    size_t md_fed, md_fed_at_call; /* bytes of answer fed to md, and as the last call began */
    char last_err_byte;   /* last reasoning byte written to stderr */
    size_t written;
    struct buf scratch;
    struct buf pending;   /* an unfinished UTF-8 sequence held back (terminal only) */
    char wait_last[512];  /* script_wait: the last wait line of this turn, and how many times */
    long wait_same;
    int render;           /* the answer as rendered Markdown (--render) */
    int links;            /* rendered URLs as OSC 8 hyperlinks (profile key hyperlinks) */
    struct theme_style styles[THEME_SLOT_COUNT];
    int width;            /* columns to wrap at */
    int rows;             /* a terminal's rows: the unfinished line is drawn in fewer */
    int highlight;        /* highlight code blocks (the `highlight` option) */
    struct ansi_md *md;   /* this turn's answer being rendered */
};

#define SCRIPT_PIECE ((size_t)64 << 10) /* text sanitised at a time: memory O(piece) */

/* stdout failed (errno says why): nothing more is written to it. */
static void script_out_failed(struct script_state *st)
{
    if (!st->broken_pipe)
        st->write_errno = errno;
    st->broken_pipe = 1;
}

/* Write text to fd (already sanitised when fd is a terminal). */
static void script_put(struct script_state *st, int fd, const char *s, size_t n)
{
    if (!n || st->broken_pipe)
        return;
    if (fd == 1 && st->sep_pending) {
        st->sep_pending = 0;
        if (util_write_all(1, "\n", 1) < 0) {
            script_out_failed(st);
            return;
        }
    }
    if (fd == 1 && st->last_err_byte && st->last_err_byte != '\n') {
        (void)util_write_all(2, "\n", 1); /* the reasoning is over: end its line */
        st->last_err_byte = '\n';
    }
    if (util_write_all(fd, s, n) < 0) {
        if (fd == 1)
            script_out_failed(st);
        return;
    }
    if (fd == 1) {
        st->last_byte = s[n - 1];
        st->written += n;
    } else {
        st->last_err_byte = s[n - 1];
    }
}

/* Sanitise s[0..n) for a terminal and write it, a piece at a time. */
static void script_put_tty(struct script_state *st, int fd, const char *s, size_t n)
{
    for (size_t at = 0, k; at < n; at += k) {
        k = utf8_cut(s + at, n - at, SCRIPT_PIECE);
        buf_reset(&st->scratch);
        utf8_sanitize(&st->scratch, s + at, k);
        script_put(st, fd, st->scratch.data, st->scratch.len);
    }
}

/* Erase the rendered answer's unfinished line from the terminal before other text goes
 * there (stderr on the same terminal): it is drawn again below that text. */
static void script_hide(struct script_state *st)
{
    if (!st->md || !st->err_tty)
        return;
    struct buf b = BUF_INIT;
    ansi_md_hide(st->md, &b);
    if (b.len && !st->broken_pipe && util_write_all(1, b.data, b.len) < 0)
        script_out_failed(st); /* not script_put: cursor moves are no text (last_byte) */
    buf_free(&b);
}

static void script_text(void *ud, int reasoning, const char *s, size_t n, double t1, double t2)
{
    struct script_state *st = ud;
    if (st->o->json || st->broken_pipe || st->quiet)
        return;
    int fd = reasoning ? 2 : 1;
    int tty = reasoning ? st->err_tty : st->out_tty;
    if (reasoning && !st->o->reasoning)
        return;
    if (reasoning)
        script_hide(st);
    if (!reasoning && st->render) { /* finished lines, rendered (made safe by markdown) */
        if (!st->md) {
            st->md = ansi_md_new(st->styles, st->width, THEME_ASSISTANT);
            ansi_md_hyperlinks(st->md, st->links);
            ansi_md_highlight(st->md, st->highlight);
            if (st->out_tty && st->rows > 2)
                ansi_md_live(st->md, st->rows - 2);
        }
        buf_reset(&st->scratch);
        ansi_md_feed(st->md, s, n, &st->scratch);
        st->md_fed += n;
        script_put(st, 1, st->scratch.data, st->scratch.len);
        return;
    }
    if (!tty) {
        script_put(st, fd, s, n);
        return;
    }
    /* Keep back an unfinished UTF-8 sequence (not shown as U+FFFD) or a CR that may begin a
     * CRLF (not shown as ^M) until the next piece. */
    buf_append(&st->pending, s, n);
    size_t len = st->pending.len, hold = utf8_incomplete_tail(st->pending.data, len);
    if (!hold && len && st->pending.data[len - 1] == '\r')
        hold = 1;
    script_put_tty(st, fd, st->pending.data, len - hold);
    memmove(st->pending.data, st->pending.data + len - hold, hold);
    st->pending.len = hold;
}

/* A retry or a wait for quota: say so on stderr (the text is ours, not the server's). The
 * same line again and again (a server that answers 429 "retry in 1 s" for two minutes: 120 of
 * them until 2026-12) is said three times, then at the 4th, 8th, 16th... time with its count. */
/* The count of a run of the same wait line that its last power of two did not tell. */
static void script_hide(struct script_state *st);

static void script_wait_flush(struct script_state *st)
{
    script_hide(st); /* before anything on stderr (the wait's count at the turn's end) */
    if (st->wait_same > 3 && (st->wait_same & (st->wait_same - 1)) != 0)
        fprintf(stderr, "tokterm: %s (the same %ld times in a row)\n", st->wait_last,
                st->wait_same);
    st->wait_last[0] = '\0';
    st->wait_same = 0;
}

static void script_wait(void *ud, int retry, const char *why, double seconds)
{
    struct script_state *st = ud;
    (void)retry;
    (void)seconds;
    script_hide(st);
    if (st->wait_same && strncmp(st->wait_last, why, sizeof st->wait_last - 1) == 0) {
        st->wait_same++;
    } else {
        script_wait_flush(st);
        snprintf(st->wait_last, sizeof st->wait_last, "%s", why);
        st->wait_same = 1;
    }
    if (st->wait_same <= 3)
        fprintf(stderr, "tokterm: %s\n", why);
    else if ((st->wait_same & (st->wait_same - 1)) == 0)
        fprintf(stderr, "tokterm: %s (the same %ld times in a row)\n", why, st->wait_same);
}

/* A tool call and its result on stderr, one line each, cut at SCRIPT_TOOL_SHOW bytes (a
 * terminal gets them sanitised). */
#define SCRIPT_TOOL_SHOW 300

static void script_tool_line(struct script_state *st, const char *what, const char *name,
                             const char *text, size_t n)
{
    struct buf b = BUF_INIT;
    buf_printf(&b, "tokterm: %s %s", what, name ? name : "?");
    if (text && n) {
        buf_appendc(&b, ' ');
        size_t k = n > SCRIPT_TOOL_SHOW ? utf8_cut(text, n, SCRIPT_TOOL_SHOW) : n;
        for (size_t i = 0; i < k; i++) /* one line */
            buf_appendc(&b, text[i] == '\n' || text[i] == '\r' ? ' ' : text[i]);
        if (k < n)
            buf_printf(&b, "... (%zu bytes)", n);
    }
    buf_appendc(&b, '\n');
    script_hide(st);
    if (st->err_tty) {
        struct buf safe = BUF_INIT;
        utf8_sanitize(&safe, b.data, b.len);
        (void)util_write_all(2, safe.data, safe.len);
        buf_free(&safe);
    } else {
        (void)util_write_all(2, b.data, b.len);
    }
    buf_free(&b);
}

static void script_tool_call(void *ud, const struct tool_call *call, enum tool_verdict v)
{
    struct script_state *st = ud;
    if (st->md && st->md_fed > st->md_fed_at_call && !st->quiet) {
        /* rendered: the round's text ends its line through the renderer, which holds it
         * (until 2026-12 the newline went out before the held line: "Summing.The result") */
        buf_reset(&st->scratch);
        ansi_md_feed(st->md, "\n", 1, &st->scratch);
        script_put(st, 1, st->scratch.data, st->scratch.len);
    } else if (!st->md && st->written && st->last_byte != '\n' && !st->o->json && !st->quiet) {
        script_put(st, 1, "\n", 1); /* the round's text ends its line; the next round's follows */
    }
    st->md_fed_at_call = st->md_fed;
    script_tool_line(st, v == TOOL_RUN ? "tool" : "tool refused:", call->name ? call->name
                                                                            : call->wire,
                     call->args, call->args_len);
}

static void script_tool_result(void *ud, const struct tool_call *call,
                               const struct tool_result *res, double seconds)
{
    struct script_state *st = ud;
    (void)seconds;
    script_tool_line(st, res->is_error ? "tool error:" : "tool result:",
                     call->name ? call->name : call->wire, res->content.data, res->content.len);
    if (res->note) /* the server's own output: said here, never sent to the model */
        script_tool_line(st, "tool note (not sent to the model):",
                         call->name ? call->name : call->wire, res->note, strlen(res->note));
}

/* --json "tools": every call of the turn with its result, in order. */
static void script_json_tools(struct session *s, cJSON *o)
{
    const struct conv *c = session_conv(s);
    const struct conv_turn *t = c->n ? &c->turns[c->n - 1] : NULL;
    if (!t || !t->n_steps)
        return;
    cJSON *a = cJSON_AddArrayToObject(o, "tools");
    int round = 0;
    for (size_t k = 0; k < t->n_steps; k++) {
        const struct conv_step *st = &t->steps[k];
        if (!st->result) {
            round++;
            for (size_t i = 0; i < st->n_calls; i++) {
                const struct tool_call *call = &st->calls[i];
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "round", round);
                if (i == 0 && st->text && *st->text) /* the model's words before its calls */
                    cJSON_AddStringToObject(e, "text", st->text);
                if (i == 0 && st->reasoning) /* and its reasoning (the top level's is the
                                                last round's, as "content" is) */
                    cJSON_AddStringToObject(e, "reasoning", st->reasoning);
                cJSON_AddStringToObject(e, "id", call->id ? call->id : "");
                cJSON_AddStringToObject(e, "name", call->name ? call->name : "");
                cJSON_AddStringToObject(e, "wire", call->wire ? call->wire : "");
                cJSON_AddStringToObject(e, "arguments", call->args ? call->args : "");
                cJSON_AddItemToArray(a, e);
            }
            continue;
        }
        cJSON *e;
        cJSON_ArrayForEach(e, a) { /* the call it answers */
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(e, "id"));
            if (id && st->call_id && !strcmp(id, st->call_id) &&
                !cJSON_GetObjectItem(e, "result")) {
                cJSON_AddBoolToObject(e, "is_error", st->is_error);
                cJSON_AddStringToObject(e, "result", st->text ? st->text : "");
                break;
            }
        }
    }
    const char *why = session_tools_incomplete(s);
    if (why)
        cJSON_AddStringToObject(o, "tools_incomplete", why);
}

/* --json "context": the request's tokens against the window, compression, calibration and
 * the session's spending. */
static void script_json_context(struct session *s, cJSON *o)
{
    struct session_status st;
    session_status_sent(s, &st);
    cJSON *c = cJSON_AddObjectToObject(o, "context");
    cJSON_AddNumberToObject(c, "prompt_tokens", (double)st.sent_tokens);
    cJSON_AddNumberToObject(c, "prompt_tokens_raw", (double)st.sent_raw);
    cJSON_AddNumberToObject(c, "messages", (double)st.sent_messages);
    cJSON_AddNumberToObject(c, "window", (double)st.window);
    cJSON_AddNumberToObject(c, "reserve", (double)st.reserve);
    cJSON_AddStringToObject(c, "encoding", st.encoding);
    cJSON_AddBoolToObject(c, "approximate", st.approximate);
    cJSON_AddNumberToObject(c, "ratio", st.ratio);
    cJSON_AddNumberToObject(c, "ratio_samples", (double)st.ratio_samples);
    cJSON_AddStringToObject(c, "policy", context_policy_name(st.policy));
    cJSON_AddNumberToObject(c, "shortened", (double)st.n_shortened);
    cJSON_AddNumberToObject(c, "merged", (double)st.n_merged);
    cJSON_AddNumberToObject(c, "summarized", (double)st.n_summarized);
    cJSON_AddNumberToObject(c, "dropped", (double)st.n_dropped);
    cJSON_AddNumberToObject(c, "summary_requests", st.summary_requests);
    cJSON_AddBoolToObject(c, "summary_reused", st.summary_reused);
    cJSON_AddNumberToObject(c, "spent_tokens", (double)st.spent_tokens);
    if (st.spent_estimated)
        cJSON_AddBoolToObject(c, "spent_estimated", 1);
    if (st.priced)
        cJSON_AddNumberToObject(c, "spent_usd", st.spent_usd);
    else
        cJSON_AddNullToObject(c, "spent_usd");
    if (st.budget_tokens)
        cJSON_AddNumberToObject(c, "budget_tokens", (double)st.budget_tokens);
    if (st.budget_usd > 0)
        cJSON_AddNumberToObject(c, "budget_usd", st.budget_usd);
}

/* Warn on stderr when this turn took the session past 80 % of its budget. */
static void script_budget_warn(struct session *s, int *warned)
{
    if (*warned || !session_has_budget(s))
        return; /* no budget: nothing to warn of (and no status to count) */
    struct session_status st;
    session_status_sent(s, &st);
    if (st.level == CONTEXT_BUDGET_OK)
        return;
    *warned = 1;
    fprintf(stderr, "tokterm: warning: %.0f%% of the session's budget is spent (%lld token%s",
            st.budget_frac * 100, st.spent_tokens, util_plural(st.spent_tokens));
    char m[CONTEXT_USD_MAX];
    if (st.priced)
        fprintf(stderr, ", %s", context_format_usd(st.spent_usd, m));
    fputs(")\n", stderr);
}

const char script_json_streamed[] = "";

/* The placeholders of the streamed texts: raw values that no printed string can hold (cJSON
 * escapes every byte under 0x20 in strings). */
#define SCRIPT_MARK_CONTENT '\001'
#define SCRIPT_MARK_REASONING '\002'

static void script_add_text(cJSON *o, const char *name, const char *text, char mark)
{
    if (text == SCRIPT_JSON_STREAMED) {
        char raw[] = {'"', mark, '"', '\0'};
        cJSON_AddRawToObject(o, name, raw);
    } else {
        cJSON_AddStringToObject(o, name, text ? text : "");
    }
}

void script_result_fields(cJSON *o, const struct net_result *r, const char *content,
                          const char *reasoning, const char *model, int code, int timed)
{
    script_add_text(o, "content", content, SCRIPT_MARK_CONTENT);
    script_add_text(o, "reasoning", reasoning, SCRIPT_MARK_REASONING);
    if (r->model[0] || model)
        cJSON_AddStringToObject(o, "model", r->model[0] ? r->model : model);
    else
        cJSON_AddNullToObject(o, "model");
    if (r->finish[0])
        cJSON_AddStringToObject(o, "finish_reason", r->finish);
    else
        cJSON_AddNullToObject(o, "finish_reason");
    cJSON_AddStringToObject(o, "outcome", api_outcome_name(r->outcome));
    cJSON_AddNumberToObject(o, "exit_code", code);
    cJSON_AddNumberToObject(o, "http_status", (double)r->status);
    if (r->error)
        cJSON_AddStringToObject(o, "error", r->error);
    else
        cJSON_AddNullToObject(o, "error");
    if (r->usage.present) {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->usage.prompt);
        cJSON_AddNumberToObject(u, "completion_tokens", (double)r->usage.completion);
        cJSON_AddNumberToObject(u, "total_tokens", (double)r->usage.total);
        if (r->usage.reasoning)
            cJSON_AddNumberToObject(u, "reasoning_tokens", (double)r->usage.reasoning);
        if (r->usage.cached)
            cJSON_AddNumberToObject(u, "cached_tokens", (double)r->usage.cached);
    } else {
        cJSON_AddNullToObject(o, "usage");
    }
    const struct net_timings *t = &r->t;
    if (timed) {
        cJSON *tj = cJSON_AddObjectToObject(o, "timings");
        cJSON_AddNumberToObject(tj, "dns_s", t->dns);
        cJSON_AddNumberToObject(tj, "connect_s", t->connect);
        cJSON_AddNumberToObject(tj, "tls_s", t->tls);
        cJSON_AddNumberToObject(tj, "ttfb_s", t->ttfb);
        if (t->ttft >= 0)
            cJSON_AddNumberToObject(tj, "ttft_s", t->ttft);
        else
            cJSON_AddNullToObject(tj, "ttft_s");
        cJSON_AddNumberToObject(tj, "total_s", t->total);
        cJSON_AddNumberToObject(tj, "gap_p50_s", t->gap_p50);
        cJSON_AddNumberToObject(tj, "gap_p95_s", t->gap_p95);
        cJSON_AddNumberToObject(tj, "tokens_per_s", t->tokens_per_s);
        cJSON_AddNumberToObject(tj, "deltas", (double)t->deltas);
    } else {
        cJSON_AddNullToObject(o, "timings");
    }
    cJSON_AddBoolToObject(o, "connection_reused", t->reused);
    const char *hv = t->http_version == 20 ? "2" : t->http_version == 11 ? "1.1"
                   : t->http_version == 10 ? "1.0" : t->http_version == 30 ? "3" : NULL;
    if (hv)
        cJSON_AddStringToObject(o, "http_version", hv);
    else
        cJSON_AddNullToObject(o, "http_version");
    cJSON_AddBoolToObject(o, "cached", r->cached);
    cJSON_AddNumberToObject(o, "attempts", r->attempts);
    if (r->key_label[0])
        cJSON_AddStringToObject(o, "key", r->key_label);
    if (r->used_fallback)
        cJSON_AddBoolToObject(o, "fallback", 1);
    if (r->quota_text && *r->quota_text)
        cJSON_AddStringToObject(o, "quota", r->quota_text);
}

/* script_json_write's output: JSON text gathered into pieces of about SCRIPT_PIECE bytes. */
struct script_jw {
    int fd, tty, failed;
    struct buf out;  /* JSON text not written yet */
    struct buf safe; /* a piece escaped for a terminal */
};

/* Write what is gathered; unless last, an unfinished UTF-8 sequence at its end waits for the
 * rest (so that a terminal's escaping sees it whole, as it would see the whole text). */
static void script_jw_flush(struct script_jw *w, int last)
{
    size_t n = w->out.len, hold = last || !w->tty ? 0 : utf8_incomplete_tail(w->out.data, n);
    if (n - hold && !w->failed) {
        const char *p = w->out.data;
        if (w->tty) {
            buf_reset(&w->safe);
            utf8_json_terminal(&w->safe, p, n - hold);
            p = w->safe.data;
        }
        if (util_write_all(w->fd, p, w->tty ? w->safe.len : n - hold) < 0)
            w->failed = errno ? errno : EIO; /* kept: the frees below may not keep errno */
    }
    memmove(w->out.data, w->out.data + n - hold, hold);
    w->out.len = hold;
}

static void script_jw_put(struct script_jw *w, const char *s, size_t n)
{
    /* JSON is UTF-8: a byte a server sent that is not (in the answer, the model, an error) is
     * U+FFFD here, as in `export --format json` (until 2026-12 written raw: json.load refused
     * the line) */
    size_t fixed_n;
    char *fixed = utf8_for_wire(s, n, &fixed_n);
    if (fixed) {
        s = fixed;
        n = fixed_n;
    }
    while (n) {
        size_t k = w->out.len < SCRIPT_PIECE ? SCRIPT_PIECE - w->out.len : 0;
        k = k < n ? k : n;
        buf_append(&w->out, s, k);
        if (w->out.len >= SCRIPT_PIECE)
            script_jw_flush(w, 0);
        s += k;
        n -= k;
    }
    free(fixed);
}

/* s[0..n) as the inside of a JSON string, escaped as cJSON escapes it. */
static void script_jw_string(struct script_jw *w, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        script_jw_put(w, s + run, i - run);
        char e[8];
        switch (c) {
        case '"': memcpy(e, "\\\"", 3); break;
        case '\\': memcpy(e, "\\\\", 3); break;
        case '\b': memcpy(e, "\\b", 3); break;
        case '\f': memcpy(e, "\\f", 3); break;
        case '\n': memcpy(e, "\\n", 3); break;
        case '\r': memcpy(e, "\\r", 3); break;
        case '\t': memcpy(e, "\\t", 3); break;
        default: snprintf(e, sizeof e, "\\u%04x", c); break;
        }
        script_jw_put(w, e, strlen(e));
        run = i + 1;
    }
    script_jw_put(w, s + run, n - run);
}

int script_json_write(int fd, const cJSON *o, const char *content, size_t clen,
                      const char *reasoning, size_t rlen, int tty)
{
    char *text = cJSON_PrintUnformatted(o);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    struct script_jw w = {fd, tty, 0, BUF_INIT, BUF_INIT};
    for (const char *p = text;;) {
        size_t k = strcspn(p, "\001\002");
        script_jw_put(&w, p, k);
        if (!p[k])
            break;
        if (p[k] == SCRIPT_MARK_CONTENT)
            script_jw_string(&w, content ? content : "", content ? clen : 0);
        else
            script_jw_string(&w, reasoning ? reasoning : "", reasoning ? rlen : 0);
        p += k + 1;
    }
    script_jw_put(&w, "\n", 1);
    script_jw_flush(&w, 1);
    cJSON_free(text);
    buf_free(&w.out);
    buf_free(&w.safe);
    if (w.failed)
        errno = w.failed;
    return w.failed ? -1 : 0;
}

/* The one JSON object of --json, written as it is made (script_json_write). On a terminal,
 * C1, DEL and bidi controls are escaped as \uXXXX too (cJSON escapes only C0): the same JSON
 * value, nothing the terminal obeys. */
static int script_json(struct session *s, const struct net_result *r, int code, int tty)
{
    cJSON *o = cJSON_CreateObject();
    struct net_result turn = *r; /* usage: the turn's, every tool round's (not the last's) */
    if (session_turn_usage(s)->present)
        turn.usage = *session_turn_usage(s);
    script_result_fields(o, &turn, SCRIPT_JSON_STREAMED, SCRIPT_JSON_STREAMED,
                         session_profile(s)->model, code, 1);
    script_json_context(s, o);
    script_json_tools(s, o);
    int rc = script_json_write(1, o, session_answer(s), session_answer_len(s),
                               session_reasoning(s), session_reasoning_len(s), tty);
    int e = errno;
    cJSON_Delete(o);
    errno = e;
    return rc;
}

/* The exit status of a run whose stdout failed: 141, quiet, when the reader went away (like
 * death by SIGPIPE); else 1, said once (until 2026-12 a full disk read as a reader gone: 141
 * and no word, and --json's lost object as exit 0). */
static int script_out_error(struct script_state *st)
{
    if (!st->write_errno)
        return 1; /* said already */
    int code = util_out_failed(st->write_errno, "tokterm", "(the answer was stopped there)");
    if (code != 141)
        st->write_errno = 0; /* said once */
    return code;
}

/* Report the end of one turn; returns its exit status. */
static int script_turn_end(struct session *s, struct script_state *st, const struct script_opts *o)
{
    script_wait_flush(st); /* the count of this turn's waits, if not told; none carries over */
    const struct net_result *r = session_last(s);
    int code = r ? api_outcome_exit(r->outcome) : 1;
    const char *incomplete = session_tools_incomplete(s);
    if (incomplete && (code == 0 || code == 6))
        code = SCRIPT_EXIT_TOOLS;
    if (st->broken_pipe)
        return script_out_error(st);
    if (st->last_err_byte && st->last_err_byte != '\n') {
        (void)util_write_all(2, "\n", 1);
        st->last_err_byte = '\n';
    }
    if (o->json && r) {
        if (script_json(s, r, code, st->out_tty) != 0) {
            script_out_failed(st);
            return script_out_error(st);
        }
    } else if (st->md) { /* the unfinished line and a held table */
        buf_reset(&st->scratch);
        ansi_md_finish(st->md, &st->scratch);
        script_put(st, 1, st->scratch.data, st->scratch.len);
        ansi_md_free(st->md);
        st->md = NULL;
        if (st->written && st->last_byte != '\n')
            (void)util_write_all(1, "\n", 1);
    } else {
        if (st->pending.len) { /* a trailing unfinished UTF-8 sequence or CR */
            script_put_tty(st, 1, st->pending.data, st->pending.len);
            buf_reset(&st->pending);
        }
        if (st->written && st->last_byte != '\n')
            (void)util_write_all(1, "\n", 1);
    }
    if (r && r->cached && st->err_tty && !o->json) /* a person sees it: scripts need not */
        fputs("tokterm: the answer is from the cache (--no-cache asks the server again)\n",
              stderr);
    if (r && r->warning)
        fprintf(stderr, "tokterm: warning: %s\n", r->warning);
    if (code == SCRIPT_EXIT_TOOLS && !(r && r->error))
        fprintf(stderr, "tokterm: warning: the answer may be incomplete: %s\n", incomplete);
    if (r && r->error) {
        const char *kept = r->content_bytes && !o->json && r->outcome != API_LIMIT
                               ? " (the partial answer above is kept)" : "";
        if (r->outcome == API_CUT)
            fprintf(stderr, "tokterm: warning: %s\n", r->error);
        else if (r->outcome == API_CANCELLED)
            fprintf(stderr, "tokterm: cancelled%s\n", kept);
        else if (r->outcome == API_ERR_HTTP && r->status < 300 && r->status > 0)
            /* a stream tokterm could not read is not an error the server reported (until
             * 2026-12 both read "the server reported an error") */
            fprintf(stderr, "tokterm: %s: %s%s%s%s%s\n",
                    strncmp(r->error, "the server sent ", 16) == 0 ||
                            strncmp(r->error, "the server answered with ", 25) == 0 ||
                            strncmp(r->error, "the server's answer is larger", 29) == 0
                        ? "the answer could not be read"
                        : r->body ? "the server reported an error in its answer"
                                  : "the server reported an error mid-stream",
                    r->error, r->error_code[0] ? " (" : "", r->error_code,
                    r->error_code[0] ? ")" : "", kept);
        else
            fprintf(stderr, "tokterm: %s%s\n", r->error, kept);
    }
    return code;
}

/* Columns (rows: 0) or rows (1) of the terminal on stdout, else $COLUMNS or $LINES, else 80
 * columns and 0 rows. */
static int script_size(int rows)
{
    struct winsize ws;
    if (ioctl(1, TIOCGWINSZ, &ws) == 0 && (rows ? ws.ws_row : ws.ws_col) > 0)
        return rows ? ws.ws_row : ws.ws_col;
    const char *c = getenv(rows ? "LINES" : "COLUMNS");
    long v = c ? strtol(c, NULL, 10) : 0;
    return v > 0 && v < 100000 ? (int)v : rows ? 0 : 80;
}

static const char *script_env(const char *name)
{
    return getenv(name);
}

/* --render: auto renders on a terminal only; --json never. Colours from the theme for $TERM,
 * none with NO_COLOR; a theme that does not load is the built-in one (said once). */
static void script_render_setup(struct script_state *st, const struct conf *conf)
{
    const char *w = conf->render ? conf->render : "auto";
    st->render = !st->o->json && (strcmp(w, "always") == 0 ||
                                  (strcmp(w, "auto") == 0 && st->out_tty));
    if (!st->render)
        return;
    char *err = NULL, *warn = NULL;
    struct theme *t = theme_find(conf->theme && *conf->theme ? conf->theme : "default", &err,
                                 &warn);
    if (err)
        fprintf(stderr, "tokterm: warning: %s\n", err);
    free(err);
    free(warn);
    const char *nc = getenv("NO_COLOR");
    ansi_styles(t, ansi_colors(getenv("TERM"), getenv("COLORTERM")), nc && *nc, st->styles);
    theme_free(t);
    st->width = script_size(0);
    const char *term = getenv("TERM"); /* a terminal that moves its cursor: live lines */
    st->rows = st->out_tty && term && *term && strcmp(term, "dumb") != 0 ? script_size(1) : 0;
    st->links = ansi_hyperlinks(conf->hyperlinks, st->out_tty, script_env);
    st->highlight = conf->highlight;
}

struct script {
    struct tools *tools;  /* TOKTERM_TEST_TOOLS (tests); MCP servers: [mcp NAME] */
    struct tool_policy policy;
    struct session *s;
    const struct script_opts *o;
    struct script_state st;
    struct loop lp;
    int turns, cancelled, budget_warned;
    int lines;            /* the line chat (script_lines): its prompt parts two answers */
    int signal;           /* the signal that cancelled the last turn (SIGTERM, SIGHUP over
                             SIGINT), 0 when none */
    FILE *trace;          /* --trace: S, E and U records per turn (script_trace) */
};

/* --trace in scripted mode, the chat's records for one answer: "S <time>" and "U <CPU of the
 * process, all threads> <CPU of this thread> 0" as the request leaves, "E <time>" and U again
 * once its end is written, so a benchmark reads the answer's CPU as the chat's own clock
 * gives it there (bench/tui/run.py), start-up and exit excluded the same way. */
static void script_end(struct script *sc, int leaving);

static void script_trace(struct script *sc, char what)
{
    fprintf(sc->trace, "%c %.6f\nU %.6f %.6f 0\n", what, util_now(), util_cpu(0), util_cpu(1));
}

struct script *script_open(struct conf *conf, char *key, const struct script_opts *o, int *code)
{
    const char *err = NULL;
    struct session *s = session_open(conf, key, &err);
    if (!s) {
        fprintf(stderr, "tokterm: %s\n", err);
        *code = 1;
        return NULL;
    }
    session_set_options(s, &(struct session_opts){
                               /* later turns need the earlier answers */
                               .keep_answer = o->json || o->n_prompts > 1 || o->keep,
                               /* --json reports the request's exact tokens */
                               .count_lazily = !o->json,
                               /* --json reports what the plan left out of the whole history */
                               .lean_resume = !o->json});
    session_use_store(s, o->store, o->save, o->cache);
    if (o->setup)
        setup_use_keys(o->setup, s); /* the key pool and the fallback */
    if (o->resume) {
        char *rerr = NULL;
        if (session_resume(s, o->resume_id, &rerr) < 0) {
            fprintf(stderr, "tokterm: %s\n", rerr);
            free(rerr);
            session_close(s);
            *code = 2;
            return NULL;
        }
        /* A conversation held with another server (a local model, another provider) is not
         * sent whole to the default one unasked: until 2026-12, -c sent a conversation held
         * with -P ollama to the cloud profile of the config, without a word. */
        char *held = o->endpoint_named || o->cache == SESSION_CACHE_ONLY /* sends nothing */
                         ? NULL : session_resumed_elsewhere(s);
        if (held) {
            const struct conv *cv = session_conv(s);
            char *now = conf_host(conf);
            fprintf(stderr, "tokterm: conversation %lld was held with %s; continuing it here "
                            "would send all of it to %s. Give the profile it was held with "
                            "(-P), or name where to send it (-P, --base-url or --api) to send it "
                            "to %s after all\n",
                    (long long)(cv ? cv->id : 0), held, now, now);
            free(now);
            free(held);
            session_close(s);
            *code = 2;
            return NULL;
        }
        if (session_resume_note(s)) /* after the refusal, which says more */
            fprintf(stderr, "tokterm: warning: %s\n", session_resume_note(s));
        if (session_resume_passed(s)) {
            const struct conv *cv = session_conv(s);
            fprintf(stderr, "tokterm: continuing conversation %lld, the latest with an answer: "
                            "%s (--conversation ID picks another)\n",
                    (long long)(cv ? cv->id : 0), session_resume_passed(s));
        }
    }
    struct script *sc = xcalloc(1, sizeof *sc);
    sc->s = s;
    struct buf terr = BUF_INIT;
    sc->tools = mcp_set_registry(conf, &terr); /* --mcp NAME, mcp = a, b; test tools */
    if (!sc->tools) {
        fprintf(stderr, "tokterm: %s\n", buf_str(&terr));
        buf_free(&terr);
        session_close(s);
        free(sc);
        *code = 2;
        return NULL;
    }
    if (tools_load(sc->tools, &terr) < 0) /* the servers start: their tools go in the request */
        fprintf(stderr, "tokterm: warning: %s\n", buf_str(&terr));
    buf_free(&terr);
    sc->policy.scripted = 1; /* no one to ask: what nothing allows is refused */
    if (mcp_set_policy(&sc->policy, conf, o->allow_tools, o->n_allow_tools, &terr) < 0)
        fprintf(stderr, "tokterm: warning: %s\n", buf_str(&terr));
    buf_free(&terr);
    session_use_tools(s, sc->tools, &sc->policy, (int)conf->tool_rounds);
    sc->o = o;
    sc->st = (struct script_state){.o = o, .out_tty = isatty(1), .err_tty = isatty(2)};
    script_render_setup(&sc->st, conf);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    const char *lerr = NULL;
    if (loop_init(&sc->lp, sigs, (int)TT_ARRAY_LEN(sigs), 0, &lerr) < 0) {
        fprintf(stderr, "tokterm: %s: %s\n", lerr, strerror(errno));
        session_close(s);
        free(sc);
        *code = 1;
        return NULL;
    }
    if (o->trace) {
        sc->trace = util_fopen_private(o->trace);
        if (!sc->trace) {
            fprintf(stderr, "tokterm: --trace %s: %s\n", o->trace, strerror(errno));
            *code = 2;
            script_end(sc, 0);
            return NULL;
        }
        net_library_wait(); /* libcurl's load is start-up, as in the chat: not in S..E */
    }
    return sc;
}

int script_turn(struct script *sc, const char *prompt, int quiet)
{
    struct session *s = sc->s;
    struct script_state *st = &sc->st;
    /* a blank line between the answers of two turns, written with the second's first byte
     * (until 2026-12 at once: a later turn that failed left stdout ending "one\n\n") */
    st->sep_pending = sc->turns++ > 0 && !sc->o->json && !quiet && !sc->lines;
    st->written = 0;
    st->last_byte = 0;
    st->md_fed = st->md_fed_at_call = 0;
    st->quiet = quiet;
    struct session_sink sink = {.ud = st, .text = script_text, .wait = script_wait,
                                .tool_call = script_tool_call, .tool_result = script_tool_result};
    if (sc->turns == 1 && sc->o->files)
        session_attach(s, sc->o->files); /* -f: with the first prompt */
    if (sc->trace)
        script_trace(sc, 'S');
    session_send(s, prompt);
    char *note = session_notice(s); /* a large summary request has just left */
    if (note)
        fprintf(stderr, "tokterm: note: %s\n", note);
    free(note);
    int done = 0;
    while (!done) {
        int fd = session_fd(s);
        if (loop_wait(&sc->lp, &fd, 1, session_timeout_ms(s)) < 0)
            break;
        session_tick(s); /* commit saved text that is due */
        int sig;
        while ((sig = loop_signal(&sc->lp)) != 0) { /* SIGINT, SIGTERM, SIGHUP: cancel it */
            if (sig != SIGINT || !sc->signal)
                sc->signal = sig; /* the line chat leaves on SIGTERM and SIGHUP */
            if (!sc->cancelled) {
                sc->cancelled = 1;
                session_cancel(s);
            }
        }
        done = session_dispatch(s, &sink);
        if (st->broken_pipe && !sc->cancelled) {
            sc->cancelled = 1;
            char why[160];
            snprintf(why, sizeof why, "stopped: writing stdout failed (%s)",
                     st->write_errno == EPIPE ? "the reader went away"
                                              : strerror(st->write_errno));
            session_cancel_because(s, why);
        }
    }
    int code = script_turn_end(s, st, sc->o);
    if (sc->trace)
        script_trace(sc, 'E');
    script_budget_warn(s, &sc->budget_warned);
    return code;
}

const char *script_answer(const struct script *sc)
{
    return session_answer(sc->s);
}

int script_stopped(const struct script *sc)
{
    return sc->cancelled || sc->st.broken_pipe;
}

/* The end of a scripted run; leaving: the process exits next (session_leave). */
static void script_end(struct script *sc, int leaving)
{
    if (!sc)
        return;
    if (session_store_error(sc->s))
        fprintf(stderr, "tokterm: warning: the conversation could not be saved: %s\n",
                session_store_error(sc->s));
    loop_end(&sc->lp);
    if (sc->trace)
        fclose(sc->trace);
    buf_free(&sc->st.scratch);
    buf_free(&sc->st.pending);
    ansi_md_free(sc->st.md);
    if (leaving)
        session_leave(sc->s);
    else
        session_close(sc->s);
    mcp_exiting(); /* the run ends: a server still running is left to a reaper */
    tools_free(sc->tools);
    tool_policy_free(&sc->policy);
    free(sc);
}

void script_close(struct script *sc)
{
    script_end(sc, 0);
}

/* The longest line a terminal in canonical mode passes on (Linux: N_TTY_BUF_SIZE - 1); the
 * rest of a longer one is dropped before tokterm can read it. */
#define SCRIPT_TTY_LINE_MAX 4095

/* The line chat's next prompt into line: read from the terminal in its own (canonical) mode,
 * so its line editing works. 1: a line; 0: leave (Ctrl-D on an empty line, the terminal gone);
 * -1: Ctrl-C, the prompt is given up and asked again; -2: SIGTERM or SIGHUP (sc->signal). */
static int script_line_read(struct script *sc, struct buf *line)
{
    buf_reset(line);
    (void)util_write_all(1, "\xE2\x80\xBA ", 4); /* "› " */
    for (;;) {
        int fd = 0;
        if (loop_wait(&sc->lp, &fd, 1, -1) < 0)
            return 0;
        int sig, again = 0;
        while ((sig = loop_signal(&sc->lp)) != 0)
            if (sig != SIGINT) {
                sc->signal = sig;
                return -2;
            } else
                again = 1;
        if (again) {
            (void)util_write_all(1, "\n", 1);
            return -1;
        }
        if (!loop_ready(&sc->lp, 0))
            continue;
        char b[4096];
        ssize_t n = read(0, b, sizeof b);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) /* the terminal went away (EIO): a half-typed line is not sent */
            return 0;
        if (n == 0) { /* Ctrl-D: on a half-typed line it sends it, on an empty one leaves */
            (void)util_write_all(1, "\n", 1);
            return line->len ? 1 : 0;
        }
        buf_append(line, b, (size_t)n);
        if (line->data[line->len - 1] == '\n') {
            line->data[--line->len] = '\0';
            return 1;
        }
    }
}

int script_lines(struct conf *conf, char *key, const struct script_opts *o, const char *why)
{
    int code = 0;
    struct script *sc = script_open(conf, key, o, &code);
    if (!sc)
        return code;
    fprintf(stderr, "tokterm: %s, so this is the line chat: Enter sends a line, Ctrl-C stops an "
                    "answer, Ctrl-D or /quit leaves; tools run only where allowed "
                    "(--allow-tool). A terminal such as TERM=xterm-256color gets the full "
                    "chat.\n", why);
    const struct conv *cv = session_conv(sc->s);
    if (o->resume && cv && cv->id) /* -c: the chat would show it; here its number says where */
        fprintf(stderr, "tokterm: continuing conversation %lld (tokterm show %lld prints it)\n",
                (long long)cv->id, (long long)cv->id);
    struct buf line = BUF_INIT;
    sc->lines = 1;
    /* a terminal of unknown powers: the raw text, live (rendering holds each line to its end) */
    sc->st.render = 0;
    for (;;) {
        int got = script_line_read(sc, &line);
        if (got == 0 || got == -2)
            break;
        const char *p = buf_str(&line);
        if (got < 0 || !p[strspn(p, " \t\r")])
            continue;
        if (strcmp(p, "/quit") == 0 || strcmp(p, "/exit") == 0)
            break;
        if (p[0] == '/' && p[1] != '/') {
            fputs("tokterm: the line chat knows only /quit (//text sends /text)\n", stderr);
            continue;
        }
        if (line.len >= SCRIPT_TTY_LINE_MAX) { /* the terminal dropped what came after */
            fprintf(stderr, "tokterm: not sent: the terminal cuts a line at %d bytes in this mode, "
                            "so this one lost its end; give long text as a file (-f FILE, or "
                            "tokterm -p PROMPT < FILE)\n", SCRIPT_TTY_LINE_MAX);
            continue;
        }
        sc->signal = 0;
        script_turn(sc, p[0] == '/' ? p + 1 : p, 0);
        if (sc->st.broken_pipe || (sc->signal && sc->signal != SIGINT))
            break;
        sc->cancelled = 0; /* Ctrl-C stopped that answer, not the chat */
        (void)util_write_all(1, "\n", 1);
    }
    buf_free(&line);
    /* SIGTERM or SIGHUP: 128 + its number, as the chat; Ctrl-D or /quit: 0 */
    code = sc->signal && sc->signal != SIGINT ? 128 + sc->signal : 0;
    script_end(sc, 1); /* main_exit ends the process next */
    return code;
}

int script_run(struct conf *conf, char *key, const struct script_opts *o)
{
    int code = 0;
    struct script *sc = script_open(conf, key, o, &code);
    if (!sc)
        return code;
    int turn = 0;
    for (; turn < o->n_prompts && code == 0 && !script_stopped(sc); turn++)
        code = script_turn(sc, o->prompts[turn], 0);
    /* the prompts after a turn that failed are not sent: say which (until 2026-12 they went
     * unmentioned, and a script could not tell them from answered ones) */
    if (turn < o->n_prompts && code != 141) { /* a reader gone: quiet, as for one prompt */
        int left = o->n_prompts - turn;
        fprintf(stderr, "tokterm: %d later prompt%s not sent (turn%s %d", left,
                left == 1 ? " was" : "s were", left == 1 ? "" : "s", turn + 1);
        if (left > 1)
            fprintf(stderr, "-%d", o->n_prompts);
        if (code)
            fprintf(stderr, " of %d): the turn before %s ended with exit %d\n", o->n_prompts,
                    left == 1 ? "it" : "them", code);
        else
            fprintf(stderr, " of %d): the run was stopped\n", o->n_prompts);
    }
    script_end(sc, 1); /* main_exit ends the process next */
    return code;
}
