/* mcp_int.h - private to mcp/: struct mcp_client and what client.c, stdio.c and http.c share.
 * Other folders use mcp/mcp.h. */
#ifndef TT_MCP_INT_H
#define TT_MCP_INT_H
#include <pthread.h>
#include <sys/types.h>

#include "mcp/mcp.h"
#include "proto/tool.h"

#define MCP_STDERR_KEEP 4096 /* the last bytes of a server's stderr kept for messages */
#define MCP_SNIP 240         /* the head and tail kept of an oversized message */
#define MCP_START_SECONDS 30 /* initialize waits at least this (a timeout shorter is a call's) */

/* One request waiting for its answer. */
struct mcp_pending {
    long id;
    int done;               /* an answer, an error, or the server's end */
    enum mcp_status status;
    char *result;           /* the "result" member as JSON text */
    struct buf error;
    struct buf diag;        /* the server's own output that explains it (mcp_diagnose) */
    mcp_progress_fn progress;
    void *ud;
    struct mcp_pending *next;
};

struct mcp_transport {
    /* Start the server (stdio: spawn; HTTP: nothing to do). 0 or -1 with err set. */
    int (*open)(struct mcp_client *c, struct buf *err);
    /* Send one message (no newline). id: the request's id, 0 for a notification or an answer.
     * 0, or -1 with err set. Called with c->mu not held. */
    int (*send)(struct mcp_client *c, const char *msg, size_t n, long id, struct buf *err);
    /* Stop the server and wait for its threads. */
    void (*close)(struct mcp_client *c, double grace);
};

struct mcp_client {
    struct mcp_server_conf conf;
    mcp_key_fn get_key;
    const struct mcp_transport *tr;
    pthread_mutex_t mu;     /* everything below */
    pthread_cond_t cv;      /* an answer arrived, the server ended, a call was cancelled */
    int running;            /* started and shaken hands with (or being) */
    int dead;               /* the server ended (its messages are gone) */
    struct buf dead_why;
    long next_id;
    struct mcp_pending *pending;
    char protocol[32];
    char *server_info;
    struct mcp_tool *tools;
    int n_tools, tools_valid;
    /* what went wrong along the way, for messages */
    unsigned long garbage, unknown_ids;
    char garbage_first[81];
    struct buf stderr_tail;
    unsigned long long stderr_total;
    /* stdio */
    pid_t pid;
    int in_fd, out_fd, err_fd, stop_fd[2];
    pthread_t reader;
    int reader_on;
    pthread_mutex_t write_mu;
    pthread_mutex_t start_mu; /* one start at a time */
    /* HTTP */
    char *session_id;
    char **http_headers;    /* the headers with $VAR and {key} expanded (wiped at the end) */
    /* what the section's secrets became (its env values, header values, key): starred in all
     * the server sends (mcp_secret_add; NULL-terminated, wiped at the end) */
    char **secrets;
    size_t n_secrets, cap_secrets;
    int http_threads;       /* requests in flight, each on a thread of its own */
    int stopping;
};

/* client.c: one whole message from the server (a line, an SSE event, a JSON body). */
void mcp_dispatch(struct mcp_client *c, const char *msg, size_t n);
/* A message over max_result_mb: head and tail are its first and last bytes, total its size;
 * the request it answers (found by its id in the tail or the head) fails with MCP_TOO_LARGE. */
void mcp_oversized(struct mcp_client *c, const char *head, size_t hn, const char *tail,
                   size_t tn, unsigned long long total);
/* The server ended (stdio: its stdout closed): every pending request fails with why. */
void mcp_server_ended(struct mcp_client *c, const char *why);
/* A failure of one request's transport (HTTP): that request fails with why. */
void mcp_request_failed(struct mcp_client *c, long id, enum mcp_status st, const char *why);
/* Keep s (8 bytes or more) among c's secrets: starred wherever the server's words are shown,
 * sent to the model or saved (until 2026-12 a server that echoed its key in an error, a result
 * or on stderr had it printed, sent and saved). */
void mcp_secret_add(struct mcp_client *c, const char *s); /* of names util_secret_name takes:
                                                            "Accept: application/json" or
                                                            PATH=/usr/bin would star a
                                                            tool's ordinary words */
/* Keep the last bytes of the server's stderr. */
void mcp_stderr_add(struct mcp_client *c, const char *p, size_t n);
/* $NAME and ${NAME} of s expanded from the environment (unset: empty); {key} to key. */
char *mcp_expand(const char *s, const char *key);
size_t mcp_max_message(const struct mcp_client *c);
/* tools/call with a cancel flag (any thread sets it) and a timeout (0: the section's). */
enum mcp_status mcp_call_run(struct mcp_client *c, const char *tool, const char *arguments,
                             mcp_progress_fn progress, void *ud, const int *cancel,
                             double timeout, struct mcp_result *r);
/* mcp_client_tools, given up when *cancel is set (by any thread; NULL: never): the start
 * (initialize) and each page of tools/list end with "... cancelled" within 0.1 s, and a
 * server that was being started is stopped. */
int mcp_tools_run(struct mcp_client *c, const int *cancel, const struct mcp_tool **tools,
                  struct buf *err);
/* conf.c: a deep copy of a section, its release, a NULL-terminated string array's (wiped). */
void mcp_conf_copy(struct mcp_server_conf *d, const struct mcp_server_conf *s);
void mcp_conf_clear(struct mcp_server_conf *c);
void mcp_strv_free_all(char **v);

extern const struct mcp_transport mcp_stdio_transport;
extern const struct mcp_transport mcp_http_transport;

#endif
