/* session.c - drives exchanges for either front end. */
#include "config.h"
#include "session.h"
#include "queue.h"
#include "xmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int session_open(struct session *s, struct conf *conf, char *key, const char **err)
{
    memset(s, 0, sizeof *s);
    s->conf = conf;
    s->key = key;
    s->keep_answer = 1;
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

void session_close(struct session *s)
{
    net_stop(s->net);
    queue_free(s->q, net_result_free);
    for (size_t i = 0; i < s->n_msgs; i++)
        free(s->msgs[i].content);
    free(s->msgs);
    if (s->key) {
        memset(s->key, 0, strlen(s->key));
        free(s->key);
    }
    buf_free(&s->answer);
    buf_free(&s->reasoning);
    net_result_free(s->last);
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

unsigned session_send(struct session *s, const char *prompt)
{
    session_add(s, "user", prompt, strlen(prompt));
    struct api_message *m = xcalloc(s->n_msgs, sizeof *m);
    for (size_t i = 0; i < s->n_msgs; i++) {
        m[i].role = s->msgs[i].role;
        m[i].content = s->msgs[i].content;
    }
    const struct conf *c = s->conf;
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
    struct net_request *rq = xcalloc(1, sizeof *rq);
    rq->url = session_url(c);
    rq->body = api_request_json(&ar);
    free(m);
    if (s->key && c->auth_header && *c->auth_header) {
        rq->auth_name = xstrdup(c->auth_header);
        rq->auth_value = strcasecmp(c->auth_header, "Authorization") == 0
                             ? xasprintf("Bearer %s", s->key) : xstrdup(s->key);
    }
    rq->connect_timeout_ms = c->connect_timeout_ms;
    rq->idle_timeout_s = c->idle_timeout;
    rq->cacert = c->cacert ? xstrdup(c->cacert) : NULL;
    rq->insecure = c->insecure;
    buf_reset(&s->answer);
    buf_reset(&s->reasoning);
    s->active = net_submit(s->net, rq);
    return s->active;
}

int session_fd(const struct session *s)
{
    return queue_fd(s->q);
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
            if (sink->text)
                sink->text(sink->ud, r, e->text.data, e->text.len, e->t_first, e->t_last);
        } else if (e->type == QEV_HEADERS) {
            if (sink->headers)
                sink->headers(sink->ud, (long)e->num);
        } else if (e->type == QEV_END) {
            net_result_free(s->last);
            s->last = e->ptr;
            session_redact(s, s->last->error);
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
    if (s->active)
        net_cancel(s->net, s->active);
}
