/* queue.h - events from the network thread to the UI thread.
 * A mutex-protected list plus a pipe: the reader polls queue_fd() and is woken once per batch
 * (the first push into an empty queue), not once per token. Text events for the same request
 * that the reader has not taken yet are coalesced into one (a batch in its own storage only
 * where the tail has room for it). */
#ifndef TT_QUEUE_H
#define TT_QUEUE_H
#include <stddef.h>

#include "base/buf.h"

enum queue_type {
    QEV_CONTENT = 1,   /* text: answer delta(s) */
    QEV_REASONING,     /* text: reasoning delta(s) */
    QEV_HEADERS,       /* response headers arrived (status known) */
    QEV_RETRY,         /* text: why; num: seconds until the next attempt */
    QEV_WAIT,          /* waiting for quota before sending: text: why; num: seconds */
    QEV_END,           /* the exchange is over: ptr = struct net_result * (reader frees) */
    QEV_TOOL,          /* a tool call running for the session is over (core/session.c) */
    QEV_QUOTA,         /* text: the kept headers of a response that is retried (a 429) */
    QEV_WARN,          /* text: a warning to show once (the shared state lost or back) */
};

struct queue_event {
    struct queue_event *next;
    enum queue_type type;
    unsigned req;          /* request id */
    struct buf text;
    double t_first;        /* arrival (monotonic s) of the first delta in this event */
    double t_last;         /* arrival of the last one */
    long count;            /* deltas coalesced into this event */
    double num;
    void *ptr;
};

struct queue;

/* Create a queue; NULL with errno when the pipe cannot be made. */
struct queue *queue_new(void);
/* Free the queue and any events still in it (QEV_END results are freed with free_ptr). */
void queue_free(struct queue *q, void (*free_ptr)(void *));
/* Append text to the queue (coalesced with the tail when the tail is the same request and type). */
void queue_push_text(struct queue *q, enum queue_type type, unsigned req, const char *s, size_t n,
                     double now);
/* queue_push_text of b's text, leaving b empty: a new event takes b's storage instead of a copy
 * (the network thread's batches). */
void queue_push_buf(struct queue *q, enum queue_type type, unsigned req, struct buf *b,
                    double now);
/* Append an event carrying a short text and a number (never coalesced). */
void queue_push_note(struct queue *q, enum queue_type type, unsigned req, const char *text,
                     double num);
/* Append a non-text event. */
void queue_push(struct queue *q, enum queue_type type, unsigned req, double num, void *ptr);
/* Take every pending event (a list in order, NULL when none); the reader frees each with
 * queue_event_free. Clears the wakeup pipe. */
struct queue_event *queue_take(struct queue *q);
void queue_event_free(struct queue_event *e);
/* The producer waits while the events not taken yet take `high` bytes of storage or more, for
 * at most wait_ms at a time (defaults: 256 KiB, 20 ms; tests set a long wait to check the bound). */
void queue_bound(struct queue *q, size_t high, int wait_ms);
/* What the queue held at most, and how often a producer waited (TOKTERM_DEBUG_QUEUE). */
struct queue_stats {
    size_t held_max;        /* bytes of text held at once, at most */
    size_t storage_max;     /* bytes of storage holding that text, at most */
    size_t event_max;       /* bytes of storage of one event, at most */
    unsigned long waits;    /* pushes that waited for the consumer */
    unsigned long timeouts; /* of them, those that went on after wait_ms without a take */
};
struct queue_stats queue_stats(struct queue *q);
/* File descriptor that becomes readable when events are waiting (for poll). */
int queue_fd(const struct queue *q);
/* Block up to timeout_ms (-1 = forever) until events are waiting. Returns 1 when some are. */
int queue_wait(struct queue *q, int timeout_ms);

#endif
