/* session.c - drives exchanges for either front end: cache, network, store. */
#include "config.h"
#include "session.h"
#include "queue.h"
#include "store.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SESSION_LOCAL_ID 0x80000000u

int session_open(struct session *s, struct conf *conf, char *key, const char **err)
{
    memset(s, 0, sizeof *s);
    s->conf = conf;
    s->key = key;
    s->keep_answer = 1;
    s->cache = SESSION_CACHE_OFF;
    s->q = queue_new();
    if (!s->q) {
        *err = "could not create the event queue";
        return -1;
    }
    s->net = net_start(s->q, err);
    if (!s->net) {
        queue_free(s->q, net_result_free);
        s->q = NULL;
        return -1;
    }
    if (conf->system && *conf->system)
        session_add(s, "system", conf->system, strlen(conf->system));
    return 0;
}

void session_use_store(struct session *s, struct store *st, int save, enum session_cache cache)
{
    s->store = st;
    s->save = st && save;
    s->cache = st ? cache : SESSION_CACHE_OFF;
}

static void session_store_failed(struct session *s)
{
    if (!s->store_error)
        s->store_error = xstrdup(store_error(s->store));
}

static void session_clear_history(struct session *s)
{
    for (size_t i = 0; i < s->n_msgs; i++)
        free(s->msgs[i].content);
    s->n_msgs = 0;
}

static const char *session_role(const char *role)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < TT_ARRAY_LEN(roles); i++)
        if (strcmp(role, roles[i]) == 0)
            return roles[i];
    return NULL;
}

int session_resume(struct session *s, int64_t id, char **err)
{
    if (!s->store) {
        *err = xstrdup("no conversation store is open");
        return -1;
    }
    if (id == 0) {
        struct store_conversation *list = NULL;
        size_t n = 0;
        if (store_conversation_list(s->store, 1, &list, &n) != 0) {
            *err = xstrdup(store_error(s->store));
            return -1;
        }
        if (n == 0) {
            *err = xstrdup("there is no saved conversation to continue yet");
            return -1;
        }
        id = list[0].id;
        store_conversation_list_free(list, n);
    }
    struct store_conversation *c = NULL;
    int rc = store_conversation_load(s->store, id, &c);
    if (rc != 0) {
        *err = rc == STORE_NOT_FOUND ? xasprintf("no conversation %lld (see tokterm ls)",
                                                 (long long)id)
                                     : xstrdup(store_error(s->store));
        return -1;
    }
    session_clear_history(s);
    /* A system prompt given now replaces the saved one. */
    const char *sys = s->conf->system && *s->conf->system ? s->conf->system : c->system_prompt;
    if (sys && *sys)
        session_add(s, "system", sys, strlen(sys));
    for (size_t i = 0; i < c->n_messages; i++) {
        const struct store_message *m = &c->messages[i];
        const char *role = session_role(m->role);
        if (!role || strcmp(role, "system") == 0)
            continue;
        /* An answer that failed before any text says nothing: leave it out of the history. */
        if (strcmp(role, "assistant") == 0 && m->content_len == 0)
            continue;
        session_add(s, role, m->content, m->content_len);
    }
    s->conv_id = c->id;
    store_conversation_free(c);
    return 0;
}

void session_close(struct session *s)
{
    net_stop(s->net);
    queue_free(s->q, net_result_free);
    if (s->store && s->answer_id)
        store_message_flush(s->store, s->answer_id);
    session_clear_history(s);
    free(s->msgs);
    if (s->key) {
        memset(s->key, 0, strlen(s->key));
        free(s->key);
    }
    buf_free(&s->answer);
    buf_free(&s->reasoning);
    net_result_free(s->last);
    free(s->store_error);
    memset(s, 0, sizeof *s);
}

void session_add(struct session *s, const char *role, const char *content, size_t n)
{
    if (s->n_msgs == s->cap_msgs) {
        s->cap_msgs = s->cap_msgs ? s->cap_msgs * 2 : 16;
        s->msgs = xrealloc(s->msgs, s->cap_msgs * sizeof *s->msgs);
    }
    s->msgs[s->n_msgs].role = role;
    s->msgs[s->n_msgs].content = xstrndup(content, n);
    s->n_msgs++;
}

static char *session_url(const struct conf *c)
{
    const char *b = c->base_url;
    size_t n = strlen(b);
    while (n && b[n - 1] == '/')
        n--;
    return xasprintf("%.*s/chat/completions", (int)n, b);
}

/* Answer from the cache: the stored text goes through the same queue as a stream would. */
static int session_replay(struct session *s, unsigned id)
{
    struct store_cache_entry e;
    memset(&e, 0, sizeof e);
    if (store_cache_get(s->store, s->cache_key, &e) != 0)
        return 0;
    double now = util_now();
    if (e.reasoning && *e.reasoning)
        queue_push_text(s->q, QEV_REASONING, id, e.reasoning, strlen(e.reasoning), now);
    if (e.content && *e.content)
        queue_push_text(s->q, QEV_CONTENT, id, e.content, strlen(e.content), now);
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = id;
    r->outcome = API_OK;
    r->status = 200;
    r->cached = 1;
    snprintf(r->model, sizeof r->model, "%s", e.model ? e.model : s->conf->model);
    snprintf(r->finish, sizeof r->finish, "%s", e.finish_reason ? e.finish_reason : "stop");
    if (e.usage.total_tokens >= 0 || e.usage.completion_tokens >= 0) {
        r->usage.present = 1;
        r->usage.prompt = e.usage.prompt_tokens > 0 ? e.usage.prompt_tokens : 0;
        r->usage.completion = e.usage.completion_tokens > 0 ? e.usage.completion_tokens : 0;
        r->usage.total = e.usage.total_tokens > 0 ? e.usage.total_tokens : 0;
    }
    r->t.ttft = 0;
    r->t.deltas = 1;
    r->content_bytes = e.content ? strlen(e.content) : 0;
    r->headers = xstrdup("");
    store_cache_entry_clear(&e);
    queue_push(s->q, QEV_END, id, 0, r);
    return 1;
}

static void session_cache_miss(struct session *s, unsigned id)
{
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = id;
    r->outcome = API_CACHE_MISS;
    r->t.ttft = -1;
    r->error = xstrdup("--cache-only: the cache has no answer for this exact request (model, "
                       "messages, system prompt and parameters)");
    r->headers = xstrdup("");
    queue_push(s->q, QEV_END, id, 0, r);
}

unsigned session_send(struct session *s, const char *prompt)
{
    const struct conf *c = s->conf;
    session_add(s, "user", prompt, strlen(prompt));
    char *host = conf_host(c);
    struct store_msg_info info = {.model = c->model, .profile = c->profile, .host = host};
    if (s->save) {
        if (!s->conv_id) {
            s->conv_id = store_conversation_new(s->store, NULL, c->system, c->model, c->profile);
            if (s->conv_id < 0) {
                session_store_failed(s);
                s->conv_id = 0;
                s->save = 0;
            }
        }
        /* The prompt is committed before the request leaves. */
        if (s->save && store_message_add(s->store, s->conv_id, "user", prompt, strlen(prompt),
                                         &info) < 0)
            session_store_failed(s);
    }

    struct api_message *m = xcalloc(s->n_msgs, sizeof *m);
    for (size_t i = 0; i < s->n_msgs; i++) {
        m[i].role = s->msgs[i].role;
        m[i].content = s->msgs[i].content;
    }
    struct api_request ar = {
        .model = c->model,
        .messages = m,
        .n_messages = s->n_msgs,
        .max_tokens = c->max_tokens,
        .max_tokens_field = c->max_tokens_field,
        .temperature = c->temperature,
        .has_temperature = c->has_temperature,
        .stream = 1,
        .include_usage = c->include_usage,
    };
    char *body = api_request_json(&ar);
    free(m);
    buf_reset(&s->answer);
    buf_reset(&s->reasoning);

    /* The cache key covers everything that changes the answer and nothing secret: the server,
     * and the request body (model, every message with the system prompt, sampling). */
    s->cache_key_set = 0;
    if (s->cache != SESSION_CACHE_OFF) {
        struct buf canon = BUF_INIT;
        buf_printf(&canon, "tokterm-cache-v1\n%s\n%s", c->base_url, body);
        store_cache_key(canon.data, canon.len, s->cache_key);
        buf_free(&canon);
        s->cache_key_set = 1;
    }
    if (s->save) {
        s->answer_id = store_message_begin(s->store, s->conv_id, &info);
        if (s->answer_id < 0) {
            session_store_failed(s);
            s->answer_id = 0;
        }
    }
    free(host);
    if (s->cache == SESSION_CACHE_ON || s->cache == SESSION_CACHE_ONLY) {
        unsigned id = SESSION_LOCAL_ID | ++s->next_local;
        if (session_replay(s, id)) {
            free(body);
            s->cache_key_set = 0; /* nothing new to cache */
            return s->active = id;
        }
        if (s->cache == SESSION_CACHE_ONLY) {
            free(body);
            s->cache_key_set = 0;
            session_cache_miss(s, id);
            return s->active = id;
        }
    }

    struct net_request *rq = xcalloc(1, sizeof *rq);
    rq->url = session_url(c);
    rq->body = body;
    if (s->key && c->auth_header && *c->auth_header) {
        rq->auth_name = xstrdup(c->auth_header);
        rq->auth_value = strcasecmp(c->auth_header, "Authorization") == 0
                             ? xasprintf("Bearer %s", s->key) : xstrdup(s->key);
    }
    rq->connect_timeout_ms = c->connect_timeout_ms;
    rq->idle_timeout_s = c->idle_timeout;
    rq->cacert = c->cacert ? xstrdup(c->cacert) : NULL;
    rq->insecure = c->insecure;
    s->active = net_submit(s->net, rq);
    return s->active;
}

int session_fd(const struct session *s)
{
    return queue_fd(s->q);
}

int session_timeout_ms(const struct session *s)
{
    if (!s->store)
        return -1;
    double due = store_flush_deadline(s->store);
    if (due <= 0)
        return -1;
    double left = due - util_now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

void session_tick(struct session *s)
{
    if (s->store && store_flush_deadline(s->store) > 0 && session_timeout_ms(s) == 0 &&
        store_message_flush(s->store, 0) < 0)
        session_store_failed(s);
}

void session_redact(const struct session *s, char *text)
{
    if (!s->key || strlen(s->key) < 8 || !text)
        return;
    size_t k = strlen(s->key);
    for (char *p = strstr(text, s->key); p; p = strstr(p, s->key)) {
        memset(p, '*', k);
        p += k;
    }
}

static enum store_status session_store_status(enum api_outcome o)
{
    switch (o) {
    case API_OK:
    case API_CUT:
        return STORE_COMPLETE;
    case API_CANCELLED:
        return STORE_CANCELLED;
    case API_ERR_TRUNCATED:
        return STORE_TRUNCATED;
    default:
        return STORE_ERROR;
    }
}

/* Record the end of an answer in the store, and fill the cache with a complete one. */
static void session_save_end(struct session *s, const struct net_result *r)
{
    if (s->answer_id) {
        struct store_usage u = {-1, -1, -1};
        if (r->usage.present)
            u = (struct store_usage){r->usage.prompt, r->usage.completion, r->usage.total};
        struct store_timings t = {r->t.ttft, r->t.total, r->t.tokens_per_s, r->t.dns,
                                  r->t.connect, r->t.tls};
        if (r->cached)
            t = (struct store_timings){-1, -1, -1, -1, -1, -1};
        if (store_message_finish(s->store, s->answer_id, session_store_status(r->outcome),
                                 r->finish[0] ? r->finish : NULL, &u, &t, r->error) != 0)
            session_store_failed(s);
    }
    if (r->outcome == API_OK && !r->cached && s->cache_key_set) {
        if (s->answer_id) {
            (void)store_cache_put_message(s->store, s->cache_key, s->answer_id);
        } else if (s->keep_answer) {
            struct store_usage u = {r->usage.prompt, r->usage.completion, r->usage.total};
            (void)store_cache_put(s->store, s->cache_key, STORE_COMPLETE, buf_str(&s->answer),
                                  s->reasoning.len ? buf_str(&s->reasoning) : NULL, r->model,
                                  r->finish[0] ? r->finish : NULL, r->usage.present ? &u : NULL);
        }
    }
    s->answer_id = 0;
    s->cache_key_set = 0;
}

int session_dispatch(struct session *s, const struct session_sink *sink)
{
    int ended = 0;
    struct queue_event *e = queue_take(s->q);
    while (e) {
        struct queue_event *next = e->next;
        if (e->req != s->active) {
            /* a late event of an exchange that is already over */
            if (e->type == QEV_END)
                net_result_free(e->ptr);
        } else if (e->type == QEV_CONTENT || e->type == QEV_REASONING) {
            int r = e->type == QEV_REASONING;
            if (s->keep_answer)
                buf_append(r ? &s->reasoning : &s->answer, e->text.data, e->text.len);
            if (s->answer_id) {
                int rc = r ? store_message_append_reasoning(s->store, s->answer_id, e->text.data,
                                                            e->text.len)
                           : store_message_append(s->store, s->answer_id, e->text.data,
                                                  e->text.len);
                if (rc < 0)
                    session_store_failed(s);
            }
            if (sink->text)
                sink->text(sink->ud, r, e->text.data, e->text.len, e->t_first, e->t_last);
        } else if (e->type == QEV_HEADERS) {
            if (sink->headers)
                sink->headers(sink->ud, (long)e->num);
        } else if (e->type == QEV_END) {
            net_result_free(s->last);
            s->last = e->ptr;
            session_redact(s, s->last->error);
            session_save_end(s, s->last);
            if (s->answer.len || s->last->outcome == API_OK)
                session_add(s, "assistant", buf_str(&s->answer), s->answer.len);
            s->active = 0;
            ended = 1;
            if (sink->end)
                sink->end(sink->ud, s->last);
        }
        queue_event_free(e);
        e = next;
    }
    return ended;
}

void session_cancel(struct session *s)
{
    if (s->active && !(s->active & SESSION_LOCAL_ID))
        net_cancel(s->net, s->active);
}
