/* session.h - one conversation: builds each request from the history and the profile, hands it
 * to the network thread, and dispatches the events that come back to a sink (the TUI or the
 * scripted-mode writer). Both front ends share everything up to the sink. */
#ifndef TT_SESSION_H
#define TT_SESSION_H
#include <stddef.h>

#include "api.h"
#include "buf.h"
#include "conf.h"
#include "net.h"

struct session_msg {
    const char *role;   /* static string */
    char *content;
};

struct session_sink {
    void *ud;
    /* Text of the answer (reasoning = 0) or of the reasoning (1), as it arrives. */
    void (*text)(void *ud, int reasoning, const char *s, size_t n, double t_first, double t_last);
    /* Response headers arrived (optional). */
    void (*headers)(void *ud, long status);
    /* The exchange ended; r stays valid until the next exchange. */
    void (*end)(void *ud, const struct net_result *r);
};

struct session {
    struct conf *conf;
    char *key;                 /* API key (wiped on close); NULL for keyless local servers */
    struct queue *q;
    struct net *net;
    struct session_msg *msgs;
    size_t n_msgs, cap_msgs;
    unsigned active;           /* request in flight, 0 = none */
    struct buf answer;         /* text of the answer in flight */
    struct buf reasoning;
    int keep_answer;           /* collect the answer text (history, --json) */
    struct net_result *last;   /* result of the last exchange */
};

/* Start a session with conf (borrowed) and key (taken: the session wipes and frees it).
 * Returns 0, or -1 with *err (static text). */
int session_open(struct session *s, struct conf *conf, char *key, const char **err);
/* Stop the network thread and free everything. */
void session_close(struct session *s);
/* Append a message to the history. */
void session_add(struct session *s, const char *role, const char *content, size_t n);
/* Send the history plus a new user message; returns the request id. */
unsigned session_send(struct session *s, const char *prompt);
/* File descriptor to poll for events. */
int session_fd(const struct session *s);
/* Hand pending events to the sink. Returns 1 when the exchange in flight ended (its answer is
 * added to the history, whatever arrived of it), else 0. */
int session_dispatch(struct session *s, const struct session_sink *sink);
/* Ask the network thread to stop the exchange in flight. */
void session_cancel(struct session *s);
/* Replace every occurrence of the key in text by "***" (defence in depth for messages that echo
 * what they were sent). */
void session_redact(const struct session *s, char *text);

#endif
