/* conv.c - the conversation model: turns, the live path, and how a saved tree becomes it. */
#include "config.h"
#include "core/conv.h"
#include "proto/tool.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "store/store.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void conv_init(struct conv *c)
{
    memset(c, 0, sizeof *c);
}

static void conv_step_free(struct conv_step *st)
{
    buf_release(st->text); /* the chat's view may still read it (buf.h) */
    for (size_t i = 0; i < st->n_calls; i++)
        tool_call_free(&st->calls[i]);
    free(st->calls);
    free(st->thinking);
    free(st->reasoning);
    free(st->call_id);
    free(st->name);
    free(st->wire);
    free(st->sent);
}

void conv_step_cut(struct conv_step *st)
{
    free(st->sent);
    st->sent = NULL;
    st->sent_len = 0;
    size_t len = st->len;
    if (!st->result || !st->text || len <= CONV_TOOL_SENT_MAX)
        return;
    const char *text = st->text;
    size_t head = utf8_cut(text, len, CONV_TOOL_SENT_MAX - CONV_TOOL_SENT_TAIL);
    size_t tail = CONV_TOOL_SENT_TAIL;
    while (tail < len - head && ((unsigned char)text[len - tail] & 0xC0) == 0x80)
        tail++; /* the tail starts on a character */
    struct buf b = BUF_INIT;
    buf_append(&b, text, head);
    buf_printf(&b, "\n[... %zu bytes of this tool result cut by tokterm ...]\n",
               len - head - tail);
    buf_append(&b, text + len - tail, tail);
    st->sent_len = b.len;
    st->sent = buf_take(&b);
}

struct conv_step *conv_step_add(struct conv_turn *t)
{
    XGROW(t->steps, t->n_steps + 1, t->cap_steps);
    struct conv_step *st = &t->steps[t->n_steps++];
    memset(st, 0, sizeof *st);
    return st;
}

static char *conv_sdup(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static void conv_step_copy(struct conv_step *d, const struct conv_step *s)
{
    *d = *s;
    d->text = s->text ? xstrndup(s->text, s->len) : NULL;
    d->calls = s->n_calls ? xcalloc(s->n_calls, sizeof *d->calls) : NULL;
    for (size_t i = 0; i < s->n_calls; i++)
        tool_call_copy(&d->calls[i], &s->calls[i]);
    d->thinking = conv_sdup(s->thinking);
    d->reasoning = conv_sdup(s->reasoning);
    d->call_id = conv_sdup(s->call_id);
    d->name = conv_sdup(s->name);
    d->wire = conv_sdup(s->wire);
    d->sent = s->sent ? xstrndup(s->sent, s->sent_len) : NULL;
}

static void conv_json_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
}

char *conv_step_json(const struct conv_step *st)
{
    cJSON *o = cJSON_CreateObject();
    if (st->result) {
        conv_json_str(o, "id", st->call_id);
        conv_json_str(o, "name", st->name);
        conv_json_str(o, "wire", st->wire);
        if (st->is_error)
            cJSON_AddTrueToObject(o, "error");
    } else {
        cJSON *a = cJSON_AddArrayToObject(o, "calls");
        for (size_t i = 0; i < st->n_calls; i++) {
            const struct tool_call *c = &st->calls[i];
            cJSON *e = cJSON_CreateObject();
            conv_json_str(e, "id", c->id);
            conv_json_str(e, "name", c->name);
            conv_json_str(e, "wire", c->wire);
            conv_json_str(e, "arguments", c->args ? c->args : "{}");
            cJSON_AddItemToArray(a, e);
        }
        if (st->thinking)
            cJSON_AddStringToObject(o, "thinking", st->thinking);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        xmalloc_die(0);
    return s;
}

static char *conv_json_get(const cJSON *o, const char *k)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return v ? xstrdup(v) : NULL;
}

int conv_step_parse(struct conv_step *st, const char *json)
{
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return -1;
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(o, "calls");
    if (cJSON_IsArray(calls)) {
        st->result = 0;
        size_t n = (size_t)cJSON_GetArraySize(calls), k = 0;
        st->calls = n ? xcalloc(n, sizeof *st->calls) : NULL;
        const cJSON *e;
        cJSON_ArrayForEach(e, calls) {
            struct tool_call *c = &st->calls[k++];
            c->id = conv_json_get(e, "id");
            c->name = conv_json_get(e, "name");
            c->wire = conv_json_get(e, "wire");
            c->args = conv_json_get(e, "arguments");
            c->args_len = c->args ? strlen(c->args) : 0;
        }
        st->n_calls = k;
        st->thinking = conv_json_get(o, "thinking");
    } else {
        st->result = 1;
        st->call_id = conv_json_get(o, "id");
        st->name = conv_json_get(o, "name");
        st->wire = conv_json_get(o, "wire");
        st->is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "error"));
    }
    cJSON_Delete(o);
    return 0;
}

static void conv_turn_free(struct conv_turn *t)
{
    for (size_t i = 0; i < t->n_steps; i++)
        conv_step_free(&t->steps[i]);
    free(t->steps);
    free(t->prompt);
    buf_release(t->answer); /* the chat's view may still read it (buf.h) */
    free(t->error);
    free(t->model);
    for (size_t i = 0; i < t->n_att; i++)
        attach_clear(&t->att[i]);
    free(t->att);
    free(t->content);
    memset(t, 0, sizeof *t);
}

void conv_attach(struct conv_turn *t, struct attach_list *l)
{
    struct attach_list have = {t->att, t->n_att, t->n_att};
    attach_list_move(&have, l);
    t->att = have.v;
    t->n_att = have.n;
    free(t->content);
    t->content = NULL;
}

const char *conv_turn_content(struct conv_turn *t, int pdf_text, size_t *len, char **err)
{
    *err = NULL;
    if (t->content && t->content_pdf_text == pdf_text) {
        *len = t->content_len;
        return t->content;
    }
    free(t->content);
    t->content = NULL;
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < t->n_att; i++) {
        struct attach *a = &t->att[i];
        if (a->kind == ATTACH_TEXT) {
            attach_text_block(&b, a->name, (const char *)a->data, a->len);
        } else if (a->kind == ATTACH_PDF && pdf_text) {
            if (attach_pdf_text(a, err) < 0) {
                buf_free(&b);
                return NULL;
            }
            attach_text_block(&b, a->name, a->text, a->text_len);
        }
    }
    if (!b.len) {
        *len = t->prompt_len;
        return NULL;
    }
    buf_append(&b, t->prompt, t->prompt_len);
    t->content_len = b.len;
    t->content = buf_take(&b);
    t->content_pdf_text = pdf_text;
    *len = t->content_len;
    return t->content;
}

void conv_clear(struct conv *c)
{
    for (size_t i = 0; i < c->n; i++)
        conv_turn_free(&c->turns[i]);
    c->n = 0;
    c->id = 0;
    c->n_off = 0;
}

void conv_free(struct conv *c)
{
    conv_clear(c);
    free(c->turns);
    free(c->system);
    free(c->off);
    memset(c, 0, sizeof *c);
}

void conv_set_system(struct conv *c, const char *system)
{
    free(c->system);
    c->system = system && *system ? xstrdup(system) : NULL;
}

static char *conv_dup(const char *s, size_t n)
{
    return s ? xstrndup(s, n) : NULL;
}

static char *conv_dups(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static struct conv_turn *conv_append(struct conv *c)
{
    XGROW(c->turns, c->n + 1, c->cap);
    struct conv_turn *t = &c->turns[c->n++];
    memset(t, 0, sizeof *t);
    t->version = t->n_versions = 1;
    return t;
}

void conv_copy(struct conv *dst, const struct conv *src)
{
    if (dst == src)
        return;
    conv_clear(dst);
    conv_set_system(dst, src->system);
    dst->id = src->id;
    dst->serial = src->serial;
    for (size_t i = 0; i < src->n; i++) {
        const struct conv_turn *s = &src->turns[i];
        struct conv_turn *t = conv_append(dst);
        *t = *s;
        t->prompt = conv_dup(s->prompt, s->prompt_len);
        t->answer = conv_dup(s->answer, s->answer_len);
        t->error = conv_dups(s->error);
        t->model = conv_dups(s->model);
        t->steps = NULL;
        t->n_steps = t->cap_steps = 0;
        for (size_t k = 0; k < s->n_steps; k++)
            conv_step_copy(conv_step_add(t), &s->steps[k]);
        t->content = NULL;
        t->att = s->n_att ? xcalloc(s->n_att, sizeof *t->att) : NULL;
        for (size_t k = 0; k < s->n_att; k++)
            attach_copy(&t->att[k], &s->att[k]);
    }
}

struct conv_turn *conv_push(struct conv *c, const char *prompt, size_t n)
{
    int versions = c->next_version;
    c->next_version = 0;
    struct conv_turn *t = conv_append(c);
    t->prompt = xstrndup(prompt, n);
    t->prompt_len = n;
    t->user_id = -++c->serial;
    t->outcome = CONV_PENDING;
    if (versions > 1)
        t->version = t->n_versions = versions;
    return t;
}

struct conv_turn *conv_last(struct conv *c)
{
    return c->n ? &c->turns[c->n - 1] : NULL;
}

void conv_settle(struct conv_turn *t, enum conv_outcome o, const char *answer, size_t n,
                 const char *error, const char *model)
{
    t->outcome = o;
    t->answer_tokens = 0; /* a new text: its count is not known */
    t->tokens_saved &= ~2u;
    buf_release(t->answer);
    t->answer = conv_dup(answer, n);
    t->answer_len = answer ? n : 0;
    free(t->error);
    t->error = conv_dups(error);
    if (model && *model) {
        free(t->model);
        t->model = xstrdup(model);
    }
}

int conv_fork(struct conv *c, size_t i)
{
    if (i >= c->n)
        return -1;
    int versions = c->turns[i].n_versions + 1;
    for (size_t k = i; k < c->n; k++)
        conv_turn_free(&c->turns[k]);
    c->n = i;
    c->next_version = versions;
    return versions;
}

/* The rule for tool rounds that ran to their results: calls were made and each has its
 * result, the last step a result (the API refuses an unanswered call). A loaded turn's calls
 * left without one, as after a kill -9 mid-tool, get theirs at load (conv_steps_close): for
 * saved rows (conv_rows_steps) calls are enough. */
static int conv_steps_ran(size_t calls, size_t results, int last_is_result)
{
    return calls && results >= calls && last_is_result;
}

#define CONV_STOPPED_RESULT "no result of this call was saved: the tokterm that ran it stopped " \
                            "before it came (or is still running it): it may have run in part, " \
                            "in whole, or not at all"

/* A loaded turn whose last round has calls without results (tokterm ended while they ran):
 * each gets an error result saying so, not saved, so that the rounds before and the results
 * that came are sent and the model is told what may have happened. Until 2026-12 such a turn
 * was left out whole: a first call that had written a file was forgotten. */
static void conv_steps_close(struct conv_turn *t)
{
    size_t last = t->n_steps;
    while (last > 0 && t->steps[last - 1].result)
        last--;
    if (last == 0)
        return; /* no calls, or every round closed by a result after it */
    size_t round = last - 1, n_calls = t->steps[round].n_calls;
    for (size_t i = 0; i < n_calls; i++) {
        const struct tool_call *call = &t->steps[round].calls[i];
        int answered = 0;
        for (size_t k = last; k < t->n_steps && !answered; k++)
            answered = t->steps[k].call_id && call->id && !strcmp(t->steps[k].call_id, call->id);
        if (answered)
            continue;
        struct conv_step *st = conv_step_add(t); /* t->steps may move: call is read again */
        call = &t->steps[round].calls[i];
        st->result = 1;
        st->is_error = 1;
        st->call_id = conv_sdup(call->id);
        st->name = conv_sdup(call->name);
        st->wire = conv_sdup(call->wire);
        st->text = xstrdup(CONV_STOPPED_RESULT);
        st->len = strlen(st->text);
    }
}

/* 1 when t's tool rounds ran to their results (conv_steps_ran) */
static int conv_steps_answered(const struct conv_turn *t)
{
    size_t calls = 0, results = 0;
    for (size_t k = 0; k < t->n_steps; k++) {
        if (t->steps[k].result)
            results++;
        else
            calls += t->steps[k].n_calls;
    }
    return t->n_steps && conv_steps_ran(calls, results, t->steps[t->n_steps - 1].result);
}

int conv_turn_sent(const struct conv_turn *t)
{
    switch (t->outcome) {
    case CONV_ANSWERED:
    case CONV_CUT:
        return 1;
    case CONV_INTERRUPTED: /* the text so far; nothing arrived: nothing to answer for */
        return t->answer_len > 0 || conv_steps_answered(t);
    case CONV_FAILED:
        /* tools that ran are carried, with the prompt that asked for them: the model knows
         * what was done (until 2026-12 a turn stopped after its tools ran, at tool_rounds or
         * by a failed later round, was left out whole, and a write_file could be asked again) */
        return conv_steps_answered(t);
    default:
        return 0;
    }
}

int64_t conv_parent_id(const struct conv *c, size_t at)
{
    for (size_t i = at < c->n ? at : c->n; i > 0; i--)
        if (c->turns[i - 1].user_id > 0)
            return c->turns[i - 1].user_id;
    return 0;
}

const char *conv_outcome_name(enum conv_outcome o)
{
    static const char *const names[] = {"pending", "answered", "cut", "interrupted", "failed",
                                        "refused"};
    return (size_t)o < TT_ARRAY_LEN(names) ? names[o] : "?";
}

const char *conv_version_text(char *buf, int version, int versions)
{
    snprintf(buf, CONV_VERSION_MAX, "version %d of %d", version, versions);
    return buf;
}

enum conv_outcome conv_outcome_saved(int has_answer, int status, const char *finish,
                                     size_t answer_len, const char *user_error)
{
    if (!has_answer)
        return user_error ? CONV_REFUSED : CONV_FAILED;
    switch (status) {
    case STORE_COMPLETE:
        if (finish && (strcmp(finish, "length") == 0 || strcmp(finish, "content_filter") == 0))
            return CONV_CUT;
        return CONV_ANSWERED;
    case STORE_ERROR:
        return answer_len ? CONV_INTERRUPTED : CONV_FAILED;
    default: /* cancelled, truncated, interrupted, streaming (a process that died) */
        return CONV_INTERRUPTED;
    }
}

int conv_row_sends(const struct store_message *m)
{
    struct conv_turn t = {.outcome = conv_outcome_saved(1, (int)m->status, m->finish_reason,
                                                        m->content_len, NULL),
                          .answer_len = m->content_len};
    return conv_turn_sent(&t);
}

/* Index of the row with id in sc's rows (sorted by id, oldest first), or -1. */
static long conv_row(const struct store_conversation *sc, int64_t id)
{
    size_t lo = 0, hi = sc->n_messages;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sc->messages[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sc->n_messages && sc->messages[lo].id == id ? (long)lo : -1;
}

/* conv_row, trying row near first (a parent is mostly the row before, or the turn before). */
static long conv_row_near(const struct store_conversation *sc, int64_t id, long near)
{
    if (near >= 0 && (size_t)near < sc->n_messages && sc->messages[near].id == id)
        return near;
    return conv_row(sc, id);
}

static int conv_is(const struct store_message *m, const char *role)
{
    /* the first letters differ between the four roles: most rows are told apart without a
     * strcmp (it runs several times a row over thousands of rows) */
    return m->role && m->role[0] == role[0] && strcmp(m->role, role) == 0;
}

struct conv_sib {
    int64_t parent, id;
    long row; /* its index in the rows */
};

static int conv_sib_cmp(const void *a, const void *b)
{
    const struct conv_sib *x = a, *y = b;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The head row of sc: the saved head when it is a user row, else the newest user row; -1. */
static long conv_head(const struct store_conversation *sc)
{
    long head = sc->head_id > 0 ? conv_row(sc, sc->head_id) : -1;
    if (head >= 0 && !conv_is(&sc->messages[head], "user"))
        head = -1;
    for (size_t i = sc->n_messages; head < 0 && i > 0; i--)
        if (conv_is(&sc->messages[i - 1], "user"))
            head = (long)(i - 1);
    return head;
}

/* conv_steps_answered for the user rows not sent by their answer (ri[u].sent 0, and not
 * refused: no error), from their tool rows: sets ri[u].sent. A call is enough: those left
 * without a result get one at load (conv_steps_close). */
static void conv_rows_steps(const struct store_conversation *sc, struct conv_rowinfo *ri)
{
    size_t n = sc->n_messages, *calls = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct store_message *m = &sc->messages[i];
        long u = ri[i].user;
        if (u < 0 || u == (long)i || ri[u].sent || (long)i == ri[u].answer ||
            !conv_is(m, "assistant") || !m->tool)
            continue;
        if (!calls)
            calls = xcalloc(n, sizeof *calls);
        struct conv_step one = {0};
        if (conv_step_parse(&one, m->tool) == 0 && !one.result) /* as conv_build: else none */
            calls[u] += one.n_calls;
        conv_step_free(&one);
    }
    for (size_t u = 0; calls && u < n; u++)
        if (ri[u].user == (long)u && !ri[u].sent && !sc->messages[u].error)
            ri[u].sent = conv_steps_ran(calls[u], calls[u], 1);
    free(calls);
}

struct conv_rowinfo *conv_rows(const struct store_conversation *sc, size_t *n_turns)
{
    size_t n = sc->n_messages;
    struct conv_rowinfo *ri = xcalloc(n + 1, sizeof *ri);
    *n_turns = 0;
    for (size_t i = 0; i < n; i++)
        ri[i].answer = ri[i].user = -1;
    /* user rows by (parent, id): a turn's versions are the user rows that share its parent */
    struct conv_sib *sib = xcalloc(n + 1, sizeof *sib);
    size_t n_sib = 0;
    for (size_t i = 0; i < n; i++)
        if (conv_is(&sc->messages[i], "user"))
            sib[n_sib++] =
                (struct conv_sib){sc->messages[i].parent_id, sc->messages[i].id, (long)i};
    size_t sorted = 1; /* a conversation without forks comes sorted already */
    while (sorted < n_sib && conv_sib_cmp(&sib[sorted - 1], &sib[sorted]) <= 0)
        sorted++;
    if (sorted < n_sib)
        qsort(sib, n_sib, sizeof *sib, conv_sib_cmp);
    for (size_t k = 0; k < n_sib;) {
        size_t end = k;
        while (end < n_sib && sib[end].parent == sib[k].parent)
            end++;
        for (size_t v = k; v < end; v++) {
            long r = sib[v].row;
            ri[r].user = r;
            ri[r].version = (int)(v - k) + 1;
            ri[r].versions = (int)(end - k);
        }
        k = end;
    }
    free(sib);
    /* each other row belongs to the user row it names; a user row's answer is its newest
     * assistant row (tool rows belong to the turn, but are not its answer) */
    for (size_t i = 0; i < n; i++) {
        const struct store_message *m = &sc->messages[i];
        if (conv_is(m, "user") || m->parent_id <= 0)
            continue;
        long p = conv_row_near(sc, m->parent_id, (long)i - 1);
        if (p < 0 || !conv_is(&sc->messages[p], "user"))
            continue;
        if (conv_is(m, "assistant") && !m->tool) /* one that asked for tools: a step */
            ri[p].answer = (long)i;
        ri[i].user = p;
        ri[i].version = ri[p].version;
        ri[i].versions = ri[p].versions;
    }
    /* the live path, from the head up through the parents (smaller ids, so this ends) */
    size_t len = 0;
    for (long r = conv_head(sc); r >= 0 && len <= n; len++) {
        ri[r].turn = -1; /* numbered below */
        int64_t p = sc->messages[r].parent_id;
        long next = p > 0 && p < sc->messages[r].id ? conv_row_near(sc, p, r - 2) : -1;
        r = next >= 0 && conv_is(&sc->messages[next], "user") ? next : -1;
    }
    size_t turn = 0;
    for (size_t i = 0; i < n; i++)
        if (ri[i].turn == -1) {
            ri[i].turn = (int)++turn;
            ri[i].live = 1;
        }
    for (size_t i = 0; i < n; i++) /* the rest of a live turn: its answer, its tool rows */
        if (ri[i].user >= 0 && ri[ri[i].user].live && !ri[i].live) {
            ri[i].turn = ri[ri[i].user].turn;
            ri[i].live = 1;
        }
    /* a replaced version's prompt: the turn it was a version of, its depth in the tree (the
     * turn before it, through its parent, plus one; parents come first); then its answer and
     * tool rows (until 2026-12 they were all turn 0 in export --all-versions) */
    for (size_t i = 0; i < n; i++) {
        if (ri[i].live || ri[i].user != (long)i)
            continue;
        int64_t p = sc->messages[i].parent_id;
        long r = p > 0 && p < sc->messages[i].id ? conv_row(sc, p) : -1;
        long pu = r >= 0 ? ri[r].user : -1;
        ri[i].turn = (pu >= 0 && pu < (long)i ? ri[pu].turn : 0) + 1;
    }
    for (size_t i = 0; i < n; i++)
        if (!ri[i].live && ri[i].user >= 0 && ri[i].user != (long)i)
            ri[i].turn = ri[ri[i].user].turn;
    /* whether a request carries the turn: the rule conv_from_saved's turns follow (its
     * answer; else tool rounds that ran to their results, conv_steps_answered) */
    for (size_t i = 0; i < n; i++)
        if (ri[i].user == (long)i && ri[i].answer >= 0)
            ri[i].sent = conv_row_sends(&sc->messages[ri[i].answer]);
    conv_rows_steps(sc, ri);
    for (size_t i = 0; i < n; i++)
        if (ri[i].user >= 0)
            ri[i].sent = ri[ri[i].user].sent;
    *n_turns = turn;
    return ri;
}

/* The text of row m for a turn: taken from the row (take), or copied. */
static char *conv_row_text(struct store_message *m, int take)
{
    if (!take)
        return xstrndup(m->content ? m->content : "", m->content ? m->content_len : 0);
    char *t = m->content ? m->content : xstrdup("");
    m->content = NULL;
    return t;
}

static void conv_build(struct conv *c, struct store_conversation *sc, const char *system,
                       int take)
{
    conv_clear(c);
    c->id = sc->id;
    conv_set_system(c, system && *system ? system : sc->system_prompt);
    size_t n_turns;
    struct conv_rowinfo *ri = conv_rows(sc, &n_turns);
    for (size_t i = 0; i < sc->n_messages; i++)
        if (ri[i].user >= 0 && !ri[i].live) {
            XGROW(c->off, c->n_off + 1, c->cap_off);
            c->off[c->n_off++] = sc->messages[i].id;
        }
    for (size_t i = 0; i < sc->n_messages; i++) {
        if (!ri[i].live || !conv_is(&sc->messages[i], "user"))
            continue;
        struct store_message *u = &sc->messages[i];
        struct conv_turn *t = conv_append(c);
        t->user_id = u->id;
        t->prompt_len = u->content ? u->content_len : 0;
        t->prompt = conv_row_text(u, take);
        t->version = ri[i].version;
        t->n_versions = ri[i].versions;
        struct store_message *m = ri[i].answer >= 0 ? &sc->messages[ri[i].answer] : NULL;
        t->outcome = conv_outcome_saved(m != NULL, m ? (int)m->status : 0,
                                        m ? m->finish_reason : NULL, m ? m->content_len : 0,
                                        u->error);
        if (!m) {
            t->error = conv_dups(u->error ? u->error : "no answer was saved");
            continue;
        }
        t->answer_id = m->id;
        if (m->content_len || t->outcome == CONV_ANSWERED || t->outcome == CONV_CUT) {
            t->answer_len = m->content ? m->content_len : 0;
            t->answer = conv_row_text(m, take);
        }
        t->error = conv_dups(m->error);
        if (take) { /* the row's copy, as its texts */
            t->model = m->model;
            m->model = NULL;
        } else {
            t->model = conv_dups(m->model);
        }
    }
    /* the tool rounds: rows of a live turn that asked for tools or answer a call, in order */
    long *turn_of = xcalloc(sc->n_messages + 1, sizeof *turn_of);
    for (size_t i = 0, k = 0; i < sc->n_messages; i++)
        turn_of[i] = ri[i].live && conv_is(&sc->messages[i], "user") ? (long)k++ : -1;
    for (size_t i = 0; i < sc->n_messages; i++) {
        struct store_message *m = &sc->messages[i];
        long u = ri[i].user;
        if (u < 0 || (long)i == u || turn_of[u] < 0 || (long)i == ri[u].answer ||
            !(conv_is(m, "tool") || (conv_is(m, "assistant") && m->tool)))
            continue;
        struct conv_step one = {0};
        if (conv_step_parse(&one, m->tool) < 0) /* another program's row: no call to pair */
            continue;
        struct conv_step *st = conv_step_add(&c->turns[turn_of[u]]);
        *st = one;
        st->id = m->id;
        st->len = m->content ? m->content_len : 0;
        st->text = conv_row_text(m, take);
        conv_step_cut(st);
    }
    for (size_t k = 0; k < c->n; k++)
        if (c->turns[k].n_steps)
            conv_steps_close(&c->turns[k]);
    free(turn_of);
    free(ri);
}

void conv_from_saved(struct conv *c, const struct store_conversation *sc, const char *system)
{
    conv_build(c, (struct store_conversation *)sc, system, 0); /* copies: sc is not changed */
}

int conv_resolve_id(struct store *st, int64_t *id, char **err)
{
    if (!st) {
        *err = xstrdup("no conversation store is open");
        return -1;
    }
    if (*id != 0)
        return 0;
    int rc = store_conversation_latest_answered(st, id);
    if (rc == STORE_NOT_FOUND)
        *err = xstrdup("there is no saved conversation with an answer to continue yet");
    else if (rc != 0)
        *err = xstrdup(store_error(st));
    return rc ? -1 : 0;
}

char *conv_load_error(struct store *st, int rc, int64_t id)
{
    return rc == STORE_NOT_FOUND ? xasprintf("no conversation %lld (see tokterm ls)", (long long)id)
                                 : xstrdup(store_error(st));
}

int conv_load(struct conv *c, struct store *st, int64_t id, const char *system, char **err)
{
    if (conv_resolve_id(st, &id, err) < 0)
        return -1;
    struct store_conversation *sc = NULL;
    int rc = store_conversation_load_turns(st, id, &sc);
    if (rc != 0) {
        *err = conv_load_error(st, rc, id);
        return -1;
    }
    conv_build(c, sc, system, 1); /* the turns take the rows' texts: nothing is copied */
    store_conversation_free(sc);
    if (conv_attach_load(c, st) < 0) {
        *err = xasprintf("cannot read the attachments of conversation %lld: %s", (long long)id,
                         store_error(st));
        return -1;
    }
    return 0;
}

void conv_attach_from(struct attach_list *l, const struct store_attach *a)
{
    XGROW(l->v, l->n + 1, l->cap);
    attach_restore(&l->v[l->n++], a->name, a->mime, a->data, a->len, a->width, a->height,
                   a->pages);
}

void conv_attach_facts(struct attach *a, const struct store_attach *sa)
{
    memset(a, 0, sizeof *a);
    int k = attach_kind_parse(sa->kind);
    a->kind = k < 0 ? ATTACH_TEXT : (enum attach_kind)k;
    a->name = sa->name;
    a->mime = sa->mime;
    a->len = a->file_size = sa->len;
    a->width = sa->width;
    a->height = sa->height;
    a->pages = sa->pages;
}

int conv_attach_load(struct conv *c, struct store *st)
{
    if (!c->id || !c->n)
        return 0;
    struct store_attach *v;
    size_t n;
    int64_t from = 0; /* the oldest saved turn held: the rows before it are not read */
    for (size_t i = 0; i < c->n && from <= 0; i++)
        from = c->turns[i].user_id;
    if (store_attach_list_from(st, c->id, from, &v, &n) != 0)
        return -1;
    for (size_t i = 0, k = 0; i < c->n && k < n; i++) {
        struct conv_turn *t = &c->turns[i];
        while (k < n && v[k].message_id < t->user_id) /* rows off the live path */
            k++;
        struct attach_list l = {0};
        for (; k < n && v[k].message_id == t->user_id; k++)
            conv_attach_from(&l, &v[k]);
        if (l.n)
            conv_attach(t, &l);
    }
    store_attach_free(v, n);
    return 0;
}

void conv_from_rows(struct conv *c, struct store_conversation *sc, const char *system)
{
    conv_build(c, sc, system, 1);
}

static void conv_block(struct buf *out, const char *label, const char *text, size_t n)
{
    buf_appends(out, label);
    buf_appends(out, ": ");
    buf_append(out, text ? text : "", text ? n : 0);
    buf_appendc(out, '\n');
}

void conv_transcript(const struct conv *c, struct buf *out)
{
    if (c->system)
        conv_block(out, "system", c->system, strlen(c->system));
    for (size_t i = 0; i < c->n; i++) {
        const struct conv_turn *t = &c->turns[i];
        conv_block(out, "user", t->prompt, t->prompt_len);
        for (size_t k = 0; k < t->n_att; k++) {
            struct buf d = BUF_INIT;
            attach_describe(&d, &t->att[k], -1);
            conv_block(out, "attached", d.data, d.len);
            buf_free(&d);
        }
        for (size_t k = 0; k < t->n_steps; k++) {
            const struct conv_step *st = &t->steps[k];
            if (st->result) {
                conv_block(out, st->is_error ? "tool error" : "tool", st->text, st->len);
                continue;
            }
            if (st->len)
                conv_block(out, "assistant", st->text, st->len);
            for (size_t j = 0; j < st->n_calls; j++) {
                const struct tool_call *call = &st->calls[j];
                buf_printf(out, "call: %s ", call->name   ? call->name
                                            : call->wire ? call->wire
                                                         : "?");
                buf_append(out, call->args ? call->args : "", call->args ? call->args_len : 0);
                buf_appendc(out, '\n');
            }
        }
        switch (t->outcome) {
        case CONV_ANSWERED:
        case CONV_CUT:
        case CONV_INTERRUPTED:
            if (t->answer_len || t->outcome != CONV_INTERRUPTED)
                conv_block(out, t->outcome == CONV_ANSWERED ? "assistant"
                                : t->outcome == CONV_CUT    ? "assistant (cut)"
                                                            : "assistant (interrupted)",
                           t->answer, t->answer_len);
            else
                conv_block(out, "interrupted", t->error, t->error ? strlen(t->error) : 0);
            break;
        case CONV_FAILED:
        case CONV_REFUSED:
            conv_block(out, conv_outcome_name(t->outcome), t->error,
                       t->error ? strlen(t->error) : 0);
            break;
        case CONV_PENDING:
            break;
        }
    }
}
