/* queue.c - coalescing event queue from the network thread to the UI thread. */
#include "config.h"
#include "net/queue.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Storage of the text waiting for the consumer past which the producer waits for it (at most
 * QUEUE_WAIT_MS at a time, so a consumer that is busy elsewhere never stalls the network for
 * long): a fast stream then costs this much memory, not whatever arrived while the consumer was
 * descheduled. It is counted over every event not taken yet, and it is the storage, not the
 * text: a batch flushed a quarter full still takes its 64 KiB (counting the text let six such
 * batches hold 400 KiB under a 256 KiB bound on a loaded CI machine). */
#define QUEUE_TEXT_HIGH (256 * 1024)
#define QUEUE_WAIT_MS 20
/* A copied text is appended to the tail while the tail's storage stays within this (a batch in
 * its own storage only where the tail has room as it is): more goes into a new event, so no
 * event's storage grows past a network batch's. */
#define QUEUE_EVENT_CAP (64 * 1024)

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t taken; /* signalled by queue_take */
    pthread_t consumer;   /* the thread that made the queue, then the last to call queue_take */
    struct queue_event *head, *tail;
    int fds[2];
    int signalled;   /* a wakeup byte is in the pipe, or about to be */
    int byte_due;    /* wakeup bytes announced and not read yet (consumer only): queue_take
                        reads no more than these, never the byte of a later announcement */
    size_t held;     /* bytes of text in the events not taken yet */
    size_t held_cap; /* bytes of storage those texts take */
    size_t high;     /* past this much storage held, a producer waits (QUEUE_TEXT_HIGH) */
    int wait_ms;     /* for at most this long at a time (QUEUE_WAIT_MS) */
    unsigned long takes; /* queue_take calls so far: a waiting producer sees the queue taken */
    struct queue_stats stats;
};

struct queue *queue_new(void)
{
    struct queue *q = xcalloc(1, sizeof *q);
    if (pipe2(q->fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    q->consumer = pthread_self();
    q->high = QUEUE_TEXT_HIGH;
    q->wait_ms = QUEUE_WAIT_MS;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->taken, &ca);
    pthread_condattr_destroy(&ca);
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
    pthread_cond_destroy(&q->taken);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* Under q's lock: n more bytes of text held, in cap more bytes of storage, in an event of
 * ev_cap bytes of storage. */
static void queue_held_add(struct queue *q, size_t n, size_t cap, size_t ev_cap)
{
    q->held += n;
    q->held_cap += cap;
    if (ev_cap > q->stats.event_max)
        q->stats.event_max = ev_cap;
    if (q->held > q->stats.held_max)
        q->stats.held_max = q->held;
    if (q->held_cap > q->stats.storage_max)
        q->stats.storage_max = q->held_cap;
}

/* Link e under the lock, then wake the consumer when no wakeup is pending: after the unlock,
 * so that the woken consumer does not find the lock still held (and sleep on it again). */
static void queue_append(struct queue *q, struct queue_event *e)
{
    pthread_mutex_lock(&q->lock);
    queue_held_add(q, e->text.len, e->text.cap, e->text.cap);
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    int wake = !q->signalled;
    q->signalled = 1;
    pthread_mutex_unlock(&q->lock);
    if (wake) {
        char b = 1;
        (void)!write(q->fds[1], &b, 1);
    }
}

/* Under q's lock: wait while the events not taken yet take q->high of storage or more (not the
 * consumer itself, replaying a cached answer: it would only wait for itself), up to q->wait_ms.
 * Returns the tail. */
static struct queue_event *queue_room(struct queue *q)
{
    if (q->held_cap >= q->high && !pthread_equal(q->consumer, pthread_self())) {
        struct timespec until;
        util_deadline_ms(&until, q->wait_ms);
        unsigned long takes = q->takes;
        q->stats.waits++;
        while (q->takes == takes && pthread_cond_timedwait(&q->taken, &q->lock, &until) == 0)
            ;
        if (q->takes == takes)
            q->stats.timeouts++;
    }
    return q->tail;
}

/* Text s[0..n) for the queue: appended to the tail when it is the same request and type and
 * there is room (a batch in its own storage: in the tail's storage as it is; a copy: in up to
 * QUEUE_EVENT_CAP), else in a new event, whose text is *take's storage when take is given (no
 * copy: *take is left empty), else a copy. */
static void queue_push_some(struct queue *q, enum queue_type type, unsigned req, const char *s,
                            size_t n, double now, struct buf *take)
{
    pthread_mutex_lock(&q->lock);
    struct queue_event *t = queue_room(q);
    size_t room = t ? t->text.cap - t->text.len : 0; /* without growing the tail */
    if (!take && t && t->text.cap < QUEUE_EVENT_CAP)
        room += QUEUE_EVENT_CAP - t->text.cap; /* a copy grows it up to QUEUE_EVENT_CAP */
    if (t && t->type == type && t->req == req && n < room) {
        size_t cap = t->text.cap;
        buf_append(&t->text, s, n);
        queue_held_add(q, n, t->text.cap - cap, t->text.cap);
        t->t_last = now;
        t->count++;
        pthread_mutex_unlock(&q->lock);
        if (take)
            buf_reset(take);
        return;
    }
    pthread_mutex_unlock(&q->lock);
    /* Allocate outside the lock. */
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    if (take) {
        e->text = *take;
        *take = (struct buf)BUF_INIT;
    } else {
        buf_append(&e->text, s, n);
    }
    e->t_first = e->t_last = now;
    e->count = 1;
    queue_append(q, e);
}

void queue_push_text(struct queue *q, enum queue_type type, unsigned req, const char *s, size_t n,
                     double now)
{
    queue_push_some(q, type, req, s, n, now, NULL);
}

void queue_push_buf(struct queue *q, enum queue_type type, unsigned req, struct buf *b,
                    double now)
{
    queue_push_some(q, type, req, b->data ? b->data : "", b->len, now, b);
}

void queue_push_note(struct queue *q, enum queue_type type, unsigned req, const char *text,
                     double num)
{
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    e->num = num;
    buf_appends(&e->text, text);
    queue_append(q, e);
}

void queue_push(struct queue *q, enum queue_type type, unsigned req, double num, void *ptr)
{
    struct queue_event *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->req = req;
    e->num = num;
    e->ptr = ptr;
    queue_append(q, e);
}

struct queue_event *queue_take(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    struct queue_event *e = q->head;
    q->head = q->tail = NULL;
    q->held = q->held_cap = 0;
    q->takes++;
    q->consumer = pthread_self();
    pthread_cond_broadcast(&q->taken);
    q->byte_due += q->signalled;
    q->signalled = 0;
    pthread_mutex_unlock(&q->lock);
    if (q->byte_due) {
        /* The wakeup bytes this take owes: one read (a byte is written only when none was
         * pending). The producer writes it after its unlock: when it is not there yet, the
         * next take reads it (and the consumer wakes once more for nothing). Reading more
         * than is owed would eat the byte of an event pushed since the unlock, whose producer
         * saw signalled set and wrote no other: that event would wait forever. */
        char drain[64];
        ssize_t r = read(q->fds[0], drain,
                         q->byte_due < (int)sizeof drain ? (size_t)q->byte_due : sizeof drain);
        if (r > 0)
            q->byte_due -= (int)r;
    }
    return e;
}

void queue_bound(struct queue *q, size_t high, int wait_ms)
{
    pthread_mutex_lock(&q->lock);
    q->high = high;
    q->wait_ms = wait_ms;
    pthread_mutex_unlock(&q->lock);
}

struct queue_stats queue_stats(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    struct queue_stats st = q->stats;
    pthread_mutex_unlock(&q->lock);
    return st;
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
