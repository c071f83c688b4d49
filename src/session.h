/* session.h - one conversation: builds each request from the history and the profile, answers
 * it from the response cache or hands it to the network thread, saves it to the store as it
 * streams, and dispatches the events that come back to a sink (the TUI or the scripted-mode
 * writer). Both front ends share everything up to the sink. */
#ifndef TT_SESSION_H
#define TT_SESSION_H
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "conf.h"
#include "net.h"

struct store;

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

enum session_cache {
    SESSION_CACHE_ON,     /* answer from the cache when it has the exact request; fill it */
    SESSION_CACHE_BYPASS, /* always ask the server (--no-cache, /retry); still fill the cache */
    SESSION_CACHE_ONLY,   /* never ask the server (--cache-only): a miss is API_CACHE_MISS */
    SESSION_CACHE_OFF,    /* neither read nor write (--incognito) */
};

struct session {
    struct conf *conf;
    char *key;                 /* API key (wiped on close); NULL for keyless local servers */
    struct queue *q;
    struct net *net;
    struct session_msg *msgs;
    size_t n_msgs, cap_msgs;
    unsigned active;           /* request in flight, 0 = none */
    unsigned next_local;       /* ids of cache replays (high bit set, never a net id) */
    struct buf answer;         /* text of the answer in flight */
    struct buf reasoning;
    int keep_answer;           /* collect the answer text (history, --json) */
    struct net_result *last;   /* result of the last exchange */

    struct store *store;       /* NULL: nothing saved, no cache (borrowed) */
    int save;                  /* write the conversation to the store */
    enum session_cache cache;
    int64_t conv_id;           /* saved conversation, 0 until the first message is saved */
    int64_t answer_id;         /* saved answer being streamed, 0 = none */
    unsigned char cache_key[32];
    int cache_key_set;         /* the request in flight may fill the cache */
    char *store_error;         /* first store failure to report (caller may print), or NULL */
};

/* Start a session with conf (borrowed) and key (taken: the session wipes and frees it).
 * Returns 0, or -1 with *err (static text). */
int session_open(struct session *s, struct conf *conf, char *key, const char **err);
/* Attach a store (borrowed): save = write the conversation; cache = how to use the response
 * cache. Call before the first send. */
void session_use_store(struct session *s, struct store *st, int save, enum session_cache cache);
/* Continue saved conversation id (or the most recent when id is 0): its messages become the
 * history and new messages are added to it. Returns 0, or -1 with a message in *err (caller
 * frees). */
int session_resume(struct session *s, int64_t id, char **err);
/* Stop the network thread and free everything. */
void session_close(struct session *s);
/* Append a message to the history (not saved). */
void session_add(struct session *s, const char *role, const char *content, size_t n);
/* Send the history plus a new user message; returns the request id. */
unsigned session_send(struct session *s, const char *prompt);
/* File descriptor to poll for events. */
int session_fd(const struct session *s);
/* Milliseconds until session_tick() has work (a batch of saved text to commit), -1 = none. */
int session_timeout_ms(const struct session *s);
/* Commit saved text that is due; call when session_timeout_ms() has elapsed. */
void session_tick(struct session *s);
/* Hand pending events to the sink. Returns 1 when the exchange in flight ended (its answer is
 * added to the history, whatever arrived of it), else 0. */
int session_dispatch(struct session *s, const struct session_sink *sink);
/* Ask the network thread to stop the exchange in flight. */
void session_cancel(struct session *s);
/* Replace every occurrence of the key in text by '*' (defence in depth for messages that echo
 * what they were sent). */
void session_redact(const struct session *s, char *text);

#endif
