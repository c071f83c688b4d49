/* tools.h - the tools a conversation may call: a registry of tool sources (proto/tool.h:
 * MCP servers, the built-in "shell", the test tools), the names the model sees, the approval
 * policy, and calls run on a worker thread with a cancel flag and progress.
 *
 * Who does what:
 *   - a source (struct tool_source, proto/tool.h) lists its tools and runs one call,
 *     blocking, on whatever thread calls it;
 *   - the registry (struct tools) owns the sources, lists them on first use (tools_load),
 *     gives each tool its tokterm name "SOURCE.TOOL" and its wire name, and hands the
 *     dialects the definitions (tools_api);
 *   - the loop (core/session.c) takes the calls of an answer, checks each (tools_prepare:
 *     known tool, JSON, schema), asks for approval (struct tool_policy first, then the front
 *     end's hook), runs the approved ones (tool_job_start), sends the results back, and stops
 *     after tool_rounds rounds (default 10);
 *   - the front end: scripted mode approves by policy alone (--allow-tool globs; anything else
 *     is refused and the model is told "the user refused"); the chat asks the user (y once,
 *     a always for this tool in this conversation: tool_policy_always, n refuse, e edit).
 *
 * Use:
 *   struct tools *t = tools_new();
 *   tools_add(t, src);                           a source (taken); mcp: one per [mcp NAME]
 *   tools_add_test(t) when getenv("TOKTERM_TEST_TOOLS") (tests only; never shown otherwise)
 *   if (tools_load(t, &err) < 0) ...             lists every source not yet listed
 *   tools_api(t, &defs, &n)                      struct api_tool[] for the request body
 *   const struct tools_entry *e = tools_find_wire(t, call.wire);
 *   if (tools_prepare(t, &call, &res) < 0) ...   unknown tool / bad JSON / schema: res holds
 *                                                the error result for the model
 *   switch (tool_policy_verdict(&policy, call.name)) ... TOOL_ASK: ask the user
 *   struct tool_job *j = tool_job_start(t, &call, ctx_progress, ud);
 *   poll(tool_job_fd(j)) ... tool_job_done(j); tool_job_cancel(j) on Esc
 *   tool_job_finish(j, &res)                     joins the worker; res is the result
 *   tools_free(t)                                closes every source
 */
#ifndef TT_TOOLS_H
#define TT_TOOLS_H
#include <stddef.h>

#include "base/buf.h"
#include "proto/tool.h"

struct api_tool;

/* One tool of the registry. */
struct tools_entry {
    char *name;                 /* "fs.read_file" */
    char wire[72];              /* "fs__read_file" */
    const char *tool;           /* the source's own name ("read_file"), in def */
    struct tool_def def;
    struct tool_source *src;
};

struct tools;

struct tools *tools_new(void);
/* Close every source and free. NULL is fine. */
void tools_free(struct tools *t);
/* Add a source (taken: closed by tools_free). Its tools are listed by the next tools_load. */
void tools_add(struct tools *t, struct tool_source *src);
/* Add the test source "test" (tests only: tools_add_test is called when TOKTERM_TEST_TOOLS is
 * set): test.echo {text} returns text; test.add {a, b: number} returns the sum; test.fail
 * returns an error result; test.sleep {seconds} sleeps, cancellable; test.big {bytes} returns
 * that many bytes of text. */
void tools_add_test(struct tools *t);
/* List the sources not listed yet. 0, or -1 with err (every failure, one line each; the
 * sources that answered are kept; one that failed is listed again by the next tools_load). */
int tools_load(struct tools *t, struct buf *err);
/* 1 while some source is not listed yet (t may be NULL). */
int tools_pending(const struct tools *t);

/* The same off the UI thread (MCP servers start, up to their timeout each): the sources are
 * listed one after the other on a worker thread, and tools_load_fd becomes readable when it
 * is over. Nothing else may use t until tools_load_finish. Never NULL. */
struct tools_loader;
struct tools_loader *tools_load_start(struct tools *t);
int tools_load_fd(const struct tools_loader *l);
int tools_load_done(const struct tools_loader *l);
/* The source being listed now: its name into name (size bytes), the seconds it has taken so
 * far into *seconds; returns its kind ("mcp", "test"), or NULL when none is (name and
 * *seconds then untouched). Any thread. */
const char *tools_load_now(struct tools_loader *l, char *name, size_t size, double *seconds);
/* Give up (any thread): the source being listed stops within about 0.1 s ("NAME: initialize
 * cancelled"; an MCP server being started is stopped), the ones after it are not started
 * ("NAME: not started (cancelled)"). */
void tools_load_cancel(struct tools_loader *l);
/* Wait for the end and free l: what tools_load would have returned, its err appended. */
int tools_load_finish(struct tools_loader *l, struct buf *err);
size_t tools_count(const struct tools *t);
const struct tools_entry *tools_at(const struct tools *t, size_t i);
/* By tokterm name / by wire name; NULL: none. */
const struct tools_entry *tools_find(const struct tools *t, const char *name);
const struct tools_entry *tools_find_wire(const struct tools *t, const char *wire);
/* The definitions for a request: *defs points into t (valid until the next tools_add or
 * tools_load), wire names. Only tools whose tokterm name matches one of the n_only globs
 * only[] when n_only > 0 (a profile's `tools =`). */
void tools_api(struct tools *t, const char *const *only, size_t n_only,
               const struct api_tool **defs, size_t *n);
/* Check a call before it may run: fills call->name from call->wire, checks the arguments
 * (JSON, the tool's schema). 0 when it may run; -1 with an error result in *res (the model is
 * told why: "unknown tool", "arguments are not valid JSON", the schema's complaint). */
int tools_prepare(const struct tools *t, struct tool_call *call, struct tool_result *res);

/* ---- approval ---- */

enum tool_verdict {
    TOOL_ASK,        /* the front end asks the user (scripted mode: refused) */
    TOOL_RUN,        /* run it */
    TOOL_REFUSE,     /* do not run it: the model is told "the user refused" */
};

/* Who may run what without asking, for one conversation. */
struct tool_policy {
    char **allow;      /* --allow-tool globs, and the config's per-tool `allow =` */
    size_t n_allow;
    char **always;     /* tokterm names the user answered `a` for in this conversation */
    size_t n_always;
    int scripted;      /* no one to ask: TOOL_ASK becomes TOOL_REFUSE */
};
void tool_policy_allow(struct tool_policy *p, const char *glob);
void tool_policy_always(struct tool_policy *p, const char *name);
/* TOOL_RUN when name matches an allow glob or an always name, else TOOL_ASK (TOOL_REFUSE
 * when scripted). */
enum tool_verdict tool_policy_verdict(const struct tool_policy *p, const char *name);
/* Forget the always names (a new conversation). */
void tool_policy_reset(struct tool_policy *p);
void tool_policy_free(struct tool_policy *p);

/* What the model is told for a refused call (a tool result with is_error). */
#define TOOL_REFUSED_TEXT "the user refused to run this tool call"

/* ---- running a call off the UI thread ---- */

struct tool_job;
/* Start call (copied) on a worker thread; progress (may be NULL) is called on that thread,
 * and done (may be NULL) once when the call is over, on that thread too (the session pushes
 * an event to its queue). Never NULL. */
struct tool_job *tool_job_start(struct tools *t, const struct tool_call *call, double timeout,
                                void (*progress)(void *ud, double done, double total,
                                                 const char *message),
                                void (*done)(void *ud), void *ud);
/* A file descriptor that becomes readable when the call is over (poll it with the session's). */
int tool_job_fd(const struct tool_job *j);
/* 1 when the call is over. */
int tool_job_done(const struct tool_job *j);
/* Ask the call to stop (Esc, Ctrl-C): it ends soon with an error result "cancelled". */
void tool_job_cancel(struct tool_job *j);
/* Seconds since it started. */
double tool_job_elapsed(const struct tool_job *j);
/* Wait for the call to be over, move its result into *res and free j. */
void tool_job_finish(struct tool_job *j, struct tool_result *res);

#endif
