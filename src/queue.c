/* queue.c - coalescing event queue from the network thread to the UI thread. */
#include "config.h"
#include "queue.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct queue {
    pthread_mutex_t lock;
    struct queue_event *head, *tail;
    int fds[2];
    int signalled;   /* a wakeup byte is in the pipe */
};

struct queue *queue_new(void)
{
    struct queue *q = xcalloc(1, sizeof *q);
    if (pipe2(q->fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    return q;
}

void queue_event_free(struct queue_event *e)
{
    buf_free(&e->text);
    free(e);
}

void queue_free(struct queue *q, void (*free_ptr)(void *))
{
    if (!q)
        return;
    struct queue_event *e = q->head;
    while (e) {
        struct queue_event *next = e->next;
        if (e->ptr && free_ptr)
            free_ptr(e->ptr);
        queue_event_free(e);
        e = next;
    }
    close(q->fds[0]);
    close(q->fds[1]);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* Called with the lock held. */
static void queue_append(struct queue *q, struct queue_event *e)
{
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    if (!q->signalled) {
        q->signalled = 1;
        char b = 1;
        (void)!write(q->fds[1], &b, 1);
    }
}

void queue_push_text(struct queue *q, enum queue_type type, unsigned req, const char *s, size_t n,
                     double now)
{
    pthread_mutex_lock(&q->lock);
    struct queue_event *t = q->tail;
    if (t && t->type == type && t->req == req) {
        buf_append(&t->text, s, n);
        t->t_last = now;
        t->count++;
        pthread_mutex_unlock(&q->lock);
        return;
    }
    pthread_mutex_unlock(&q->lock);
    /* Allocate outside the lock. */
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    buf_append(&e->text, s, n);
    e->t_first = e->t_last = now;
    e->count = 1;
    pthread_mutex_lock(&q->lock);
    queue_append(q, e);
    pthread_mutex_unlock(&q->lock);
}

void queue_push_note(struct queue *q, enum queue_type type, unsigned req, const char *text,
                     double num)
{
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    e->num = num;
    buf_appends(&e->text, text);
    pthread_mutex_lock(&q->lock);
    queue_append(q, e);
    pthread_mutex_unlock(&q->lock);
}

void queue_push(struct queue *q, enum queue_type type, unsigned req, double num, void *ptr)
{
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    e->num = num;
    e->ptr = ptr;
    pthread_mutex_lock(&q->lock);
    queue_append(q, e);
    pthread_mutex_unlock(&q->lock);
}

struct queue_event *queue_take(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    struct queue_event *e = q->head;
    q->head = q->tail = NULL;
    if (q->signalled) {
        char drain[64];
        while (read(q->fds[0], drain, sizeof drain) > 0)
            ;
        q->signalled = 0;
    }
    pthread_mutex_unlock(&q->lock);
    return e;
}

int queue_fd(const struct queue *q)
{
    return q->fds[0];
}

int queue_wait(struct queue *q, int timeout_ms)
{
    struct pollfd p = {.fd = q->fds[0], .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR && timeout_ms < 0);
    return r > 0;
}
