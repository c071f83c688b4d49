/* tui_tools.h - the chat's side of tool calls: the approval question (the server, the tool and
 * its arguments pretty-printed; y once, a always for this tool in this conversation, n refuse,
 * e edit the arguments as JSON, checked against the tool's schema). Internal to tui/. */
#ifndef TT_TUI_TOOLS_H
#define TT_TUI_TOOLS_H
#include "core/conv.h"
#include "core/tools.h"

struct tui;

/* The user's answer: verdict TOOL_RUN (always: 'a', the caller records it with
 * tool_policy_always) or TOOL_REFUSE (n, Esc); args: the arguments to run with, compact JSON
 * (the model's, or the user's edit), owned by the callee until done returns. */
typedef void (*tui_tool_done_fn)(struct tui *t, void *ud, enum tool_verdict verdict, int always,
                                 const char *args);

/* Ask about call, a call of tool entry e (its tokterm name, source and schema). */
void tui_tool_ask(struct tui *t, const struct tools_entry *e, const struct tool_call *call,
                  tui_tool_done_fn done, void *ud);

/* The transcript's record of calls, one collapsed line each: the call when it is decided (its
 * number, name and arguments cut to one line; "refused" when it is), the result when it comes
 * (ok or error, size, seconds, its start cut to one line); /expand N shows call N whole. */
void tui_tool_shown_call(struct tui *t, const struct tool_call *call, int refused);
void tui_tool_shown_result(struct tui *t, const struct tool_call *call,
                           const struct tool_result *res, double seconds);
/* /expand [N]: call N (default: the last) with its arguments and result, in full up to
 * TUI_TOOL_KEEP bytes of the result (the store keeps it all). */
void tui_tool_expand(struct tui *t, const char *arg);
/* Forget the record (the chat ends). */
void tui_tool_log_free(struct tui *t);

/* ---- the chat's tools (the registry and the policy of struct tui) ---- */

/* Make the registry: the test tools when TOKTERM_TEST_TOOLS is set, the MCP servers the
 * profile enables (not started); the policy: --allow-tool globs (o->allow_tools), the
 * config's `allow` and the enabled [mcp NAME] sections' `allow`. Messages go to the
 * transcript. */
void tui_tools_init(struct tui *t);
/* 1 while the registry's sources are not listed yet (MCP servers not started, or starting). */
int tui_tools_pending(const struct tui *t);
/* Start listing them off the UI thread (the MCP servers start) when that is still to do: the
 * chat does it as it opens. The status bar says which server is starting. */
void tui_tools_start(struct tui *t);
/* The descriptor that becomes readable when the listing is over (-1: none is running); then
 * tui_tools_loaded: failures in the transcript (the chat goes on without those servers'
 * tools, not started again), the tools offered to the session, the waiting prompt sent. */
int tui_tools_fd(const struct tui *t);
void tui_tools_loaded(struct tui *t);
/* tui_send while the listing runs: its turn is shown, prompt waits for the listing's end
 * (the status bar and a hint say so). */
void tui_tools_wait(struct tui *t, const char *prompt);
/* Esc or Ctrl-C meanwhile: the servers still starting are stopped, the turn leaves the
 * transcript and its prompt goes back to the input line; nothing was sent. */
void tui_tools_wait_cancel(struct tui *t);
/* Offer them to the session just opened (tui_session), once they are listed. */
void tui_tools_session(struct tui *t);
/* A new conversation: `a` answers are forgotten. */
void tui_tools_forget(struct tui *t);
/* The chat's end: the tools freed, a server still running left to a reaper (mcp_exiting). */
void tui_tools_free(struct tui *t);
/* The session sink's hooks (struct session_sink): approve asks and waits (tui_modal). */
enum tool_verdict tui_tools_approve(void *ud, struct tool_call *call);
void tui_tools_call(void *ud, const struct tool_call *call, enum tool_verdict verdict);
void tui_tools_result(void *ud, const struct tool_call *call, const struct tool_result *res,
                      double seconds);
/* Before answer text or the end: after a tool round, the next text goes into a new answer
 * below the tool lines. */
void tui_tools_answer_next(struct tui *t);
/* The status bar's tool field, from the session (each frame). */
void tui_tools_status(struct tui *t, double now);
/* A saved turn's tool rounds in the transcript (resume). */
void tui_tools_show_steps(struct tui *t, const struct conv_turn *tt);

/* Bytes of a call's arguments the approval panel shows (more: shown cut, not editable). */
#define TUI_TOOL_SHOW ((size_t)64 << 10)
/* Bytes of a result kept for /expand. */
#define TUI_TOOL_KEEP ((size_t)64 << 10)

/* The arguments pretty-printed for the panel (caller frees): JSON two-space indented, or the
 * text as it came when it is not JSON. */
char *tui_tool_pretty(const char *args, size_t n);

#endif
