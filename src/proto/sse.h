/* sse.h - incremental parser for text/event-stream (WHATWG HTML "server-sent events").
 * No I/O: feed it bytes as they arrive, split anywhere; it calls back once per event. */
#ifndef TT_SSE_H
#define TT_SSE_H
#include <stddef.h>

#include "base/buf.h"

struct sse_event {
    const char *type;   /* "message" unless an `event:` field set it */
    const char *data;   /* the joined data lines (LF between them): data_len bytes, not
                           always NUL-terminated (a one-line event points into the bytes fed) */
    size_t data_len;
    const char *id;     /* last event id ("" when none) */
    const char *error;  /* non-standard `error:` field (old llama.cpp), NULL when absent */
    size_t error_len;
};

/* Return 0 to go on, non-zero to stop parsing (sse_feed then returns that value). */
typedef int (*sse_event_fn)(void *ud, const struct sse_event *ev);

struct sse_parser {
    struct buf line;     /* an unfinished line carried over between feeds */
    struct buf data;     /* data buffer of the event being built */
    struct buf type;     /* event type */
    struct buf id;       /* last event id */
    struct buf error;    /* non-standard error field */
    size_t max_event;    /* limit for one line / one event's data, bytes */
    unsigned long comments;   /* comment lines seen (keep-alives) */
    unsigned long events;     /* events dispatched */
    long retry_ms;            /* last `retry:` value, -1 when none */
    int bom_checked;          /* the first bytes were examined for a BOM */
    int after_cr;             /* the previous feed ended with CR: a leading LF is part of it */
    int has_error_field;
    const char *errmsg;       /* why parsing stopped (-1 from sse_feed) */
};

/* Prepare a parser. max_event bounds one line and one event (0 = 64 MiB). */
void sse_init(struct sse_parser *p, size_t max_event);

/* Feed n bytes. Calls fn for every complete event. Returns 0, the callback's non-zero value, or
 * -1 when a line or event exceeds max_event (p->errmsg says so; the parser must be reset). */
int sse_feed(struct sse_parser *p, const char *s, size_t n, sse_event_fn fn, void *ud);

/* 1 when bytes of an unfinished event are pending (the stream ended mid-event). At the end of
 * the stream such an event is discarded, as the standard says. */
int sse_pending(const struct sse_parser *p);

/* 1 when the parser is at the start of an event with nothing held (no BOM left to check, no
 * unfinished line, no field of an event being built): bytes may then be consumed by whole
 * events elsewhere (api_stream_sse_run), sse_skipped counting them. */
int sse_idle(const struct sse_parser *p);

/* Count n events that were dispatched without the parser, from its idle state. */
void sse_skipped(struct sse_parser *p, unsigned long n);

/* Release the parser's memory. */
void sse_free(struct sse_parser *p);

#endif
