/* mcp.h - a Model Context Protocol client (JSON-RPC 2.0, revision 2025-11-25 and the three
 * before it): servers declared in the config as [mcp NAME] sections, spoken to over stdio (a
 * child process, newline-delimited JSON) or Streamable HTTP (POST, JSON or SSE answers,
 * Mcp-Session-Id; net/http.h does the HTTP).
 *
 * Each server is a struct mcp_client. It starts on first use (mcp_client_start, or any call
 * that needs it): spawn or connect, `initialize` (version negotiation), then
 * `notifications/initialized`. Its messages are read on a thread of its own (stdio) or on the
 * thread of each HTTP request; a request waits on a condition variable, so the caller blocks
 * only in the functions that say so. mcp_call_start runs a tool call on a thread of its own
 * and signals a pipe when it ends: the UI polls mcp_call_fd and never blocks.
 *
 * Everything is bounded: one message (a line or an SSE event) at most max_result_mb MiB (an
 * oversized one fails the request it answers, the rest of it skipped without being kept), the
 * server's stderr kept as its last 4 KiB, a timeout per request (default 60 s; the server
 * gets notifications/cancelled). A server that crashes, hangs, writes garbage, floods stderr
 * or answers with ids nobody asked for gets a message that says so; the caller goes on. */
#ifndef TT_MCP_H
#define TT_MCP_H
#include <stddef.h>

#include "base/buf.h"

/* The newest revision tokterm speaks, and every one it accepts from a server. */
#define MCP_PROTOCOL_VERSION "2025-11-25"
extern const char *const mcp_protocol_versions[];

/* One [mcp NAME] section of the config file. */
struct mcp_server_conf {
    char *name;
    char **argv;        /* stdio: command and args (words; NULL-terminated), NULL for HTTP */
    char **env;         /* "NAME=value" added to the child's environment ($VAR expanded at
                           start, so a secret may stay in tokterm's environment) */
    char *cwd;          /* the child's working directory, NULL = tokterm's */
    char *url;          /* Streamable HTTP endpoint, NULL for stdio */
    char **headers;     /* "Name: value" for HTTP ($VAR and {key} expanded at start) */
    char *key_env;      /* HTTP: the variable holding a key for the headers */
    char *key_cmd;      /* HTTP: a command printing the key (run through get_key) */
    double timeout;     /* seconds per request (60) */
    long max_result_mb; /* one message from the server at most (16 MiB) */
    char *allow;        /* "read_file, search": tools the chat runs without asking, in every
                           conversation (NAME.TOOL globs, core/mcpset.h); NULL = none */
    int line;           /* where the section starts in the config file */
};

/* The sections of the config file at path: *out gets n of them (0 when none or no file).
 * Returns n, or -1 with err set to "FILE:LINE: what is wrong". Free with mcp_conf_free. */
int mcp_conf_load(const char *path, struct mcp_server_conf **out, struct buf *err);
void mcp_conf_free(struct mcp_server_conf *v, int n);
/* The one named name, or NULL. */
const struct mcp_server_conf *mcp_conf_find(const struct mcp_server_conf *v, int n,
                                            const char *name);
/* Does the section run a command (so the config file must be trusted)? */
int mcp_conf_runs(const struct mcp_server_conf *c);

/* A tool a server offers (tools/list). */
struct mcp_tool {
    char *name;
    char *title;        /* NULL when the server gave none */
    char *description;  /* "" when none */
    char *input_schema; /* the JSON Schema as compact JSON ("{}" when none) */
};

/* Progress of a request (notifications/progress): progress and total (total < 0: unknown),
 * message NULL when none. Called on the client's reader thread: keep it short. */
typedef void (*mcp_progress_fn)(void *ud, double progress, double total, const char *message);

/* Where the key for an HTTP server's headers comes from when key_cmd is set: a new string or
 * NULL with err set. core/ passes one that runs the command as api_key_cmd is run. */
typedef char *(*mcp_key_fn)(const struct mcp_server_conf *c, struct buf *err);

struct mcp_client;

/* A client for conf (copied). Nothing starts until it is first used. */
struct mcp_client *mcp_client_new(const struct mcp_server_conf *conf, mcp_key_fn get_key);
/* Stop the server (stdio: close its stdin, SIGTERM to its process group after grace seconds,
 * SIGKILL after as many more; HTTP: DELETE the session) and free everything. It waits for
 * the end, unless mcp_exiting was called. */
void mcp_client_free(struct mcp_client *c, double grace);

/* The process is about to exit (the end of `mcp call` and `mcp list`, of a scripted run, of
 * the chat): a stdio server stopped from now on gets its stdin closed here, and if it is
 * still running the rest of the stop (the same SIGTERM and SIGKILL after the same graces) is
 * left to a detached reaper, `tokterm --reap`, so that the exit does not wait for the server.
 * The reaper is in a session of its own, with /dev/null for stdin, stdout and stderr, an empty
 * environment and nothing of tokterm's but the server's pidfd, stdout and stderr (drained
 * unread); the server, an orphan once tokterm has exited, is reaped by init. Before Linux 5.3
 * (no pidfd_open) the stop waits here as before. Call it only on the way out: while the
 * process goes on, stops wait for the server. */
void mcp_exiting(void);

/* The reaper: main() runs it for `tokterm --reap PID GRACE SINCE` (argv past "--reap"), the
 * server's pidfd as descriptor 3, its stdout and stderr as 4 and 5; SINCE is when its stdin
 * was closed (CLOCK_MONOTONIC seconds). 0, or 2 when that is not what it was given. */
int mcp_reap_main(int argc, char **argv);
const char *mcp_client_name(const struct mcp_client *c);

/* Start the server and shake hands, if it is not running yet (a server that died is started
 * again). Blocks up to the timeout. 0, or -1 with err set. */
int mcp_client_start(struct mcp_client *c, struct buf *err);
/* The negotiated protocol revision and the server's name and version ("" before start). */
const char *mcp_client_protocol(const struct mcp_client *c);
const char *mcp_client_server_info(const struct mcp_client *c);

/* Every tool, each page of tools/list followed (nextCursor), cached until the server sends
 * notifications/tools/list_changed. Blocks. Returns n (the array belongs to the client and
 * stays valid until the next mcp_client_tools or mcp_client_free), or -1 with err set. */
int mcp_client_tools(struct mcp_client *c, const struct mcp_tool **tools, struct buf *err);

/* Send a ping and wait for the answer. 0 or -1 with err set. */
int mcp_client_ping(struct mcp_client *c, struct buf *err);

/* How a request ended. */
enum mcp_status {
    MCP_OK,          /* a result (a tool's own error is MCP_OK with is_error set) */
    MCP_RPC_ERROR,   /* the server answered with a JSON-RPC error (unknown tool, bad params) */
    MCP_FAILED,      /* the server could not be started, died, or broke the protocol */
    MCP_TIMEOUT,     /* no answer within the timeout (the server was told to cancel) */
    MCP_TOO_LARGE,   /* the answer was over max_result_mb */
    MCP_CANCELLED,   /* cancelled by the caller (the server was told) */
};

/* The result of tools/call. */
struct mcp_result {
    enum mcp_status status;
    int is_error;        /* the tool reported an error (isError) */
    struct buf text;     /* the text content, blocks joined by newlines; other blocks as
                            "[image image/png, N bytes]"-style placeholders */
    char *structured;    /* structuredContent as compact JSON, NULL when none */
    char *json;          /* the whole result object as compact JSON, NULL when none */
    struct buf error;    /* why, when status is not MCP_OK: what the model is told */
    struct buf diag;     /* what the server's own output says of it (its stderr's last line,
                            stray stdout): for the user only, never sent to the model */
};
void mcp_result_free(struct mcp_result *r);

/* Call tool with arguments (a JSON object as text; NULL or "" = {}) and wait for the result
 * (blocks up to the timeout; progress, when not NULL, gets the server's progress). Returns
 * r->status. */
enum mcp_status mcp_client_call(struct mcp_client *c, const char *tool, const char *arguments,
                                mcp_progress_fn progress, void *ud, struct mcp_result *r);

/* The same on a thread of its own: mcp_call_fd becomes readable when it has ended, then
 * mcp_call_finish hands over the result and frees the call. mcp_call_cancel (any thread)
 * ends it early: the server gets notifications/cancelled, the result says MCP_CANCELLED. */
struct mcp_call;
struct mcp_call *mcp_call_start(struct mcp_client *c, const char *tool, const char *arguments,
                                mcp_progress_fn progress, void *ud);
int mcp_call_fd(const struct mcp_call *k);
int mcp_call_done(const struct mcp_call *k);
void mcp_call_cancel(struct mcp_call *k);
/* Waits for the end if it has not come yet. */
void mcp_call_finish(struct mcp_call *k, struct mcp_result *r);

/* The server of conf as a source of tools for core/tools.h (proto/tool.h): its tools are
 * "NAME.TOOL", it starts on the first list or call, calls may run in parallel, the
 * registry's cancel flag sends notifications/cancelled, its timeout (0: the section's) and
 * size cap apply (text over the cap is cut with a "[truncated: ...]" line), progress goes to
 * the registry's callback. Its close stops the server (2 s of grace). */
struct tool_source;
struct tool_source *mcp_source_new(const struct mcp_server_conf *conf, mcp_key_fn get_key);

#endif
