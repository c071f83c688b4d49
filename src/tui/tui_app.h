/* tui_app.h - the state of the running chat, shared by the main loop (tui.c) and the slash
 * commands (tui_cmd.c). Internal to the TUI: nothing outside src/tui/ includes it. */
#ifndef TT_TUI_APP_H
#define TT_TUI_APP_H
#include <curses.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "core/conf.h"
#include "core/session.h"
#include "core/tools.h"
#include "text/theme.h"
#include "tui/tui.h"
#include "tui/tui_status.h"
#include "tui/tui_view.h"

struct attach_list;

#define TUI_NO_ANSWER ((size_t)-1)

struct loop;

/* The hint of a key that waits for the answer in flight; the end of the answer clears it. */
#define TUI_HINT_STREAMING "an answer is still streaming: Esc cancels it"
/* a request waiting for its retry or for quota (the status bar counts down) */
#define TUI_HINT_WAITING "the last message waits to be sent (see the countdown): Esc cancels it"
/* Enter on an empty line while the request waits: it goes at once */
#define TUI_HINT_SENT_NOW "sent now, without waiting (the server may refuse it)"
/* Ctrl-D or /quit while an answer is under way (tui_quit); gone with the answer */
#define TUI_HINT_QUIT                                                                           \
    "an answer is under way: Ctrl-D or /quit again within 2 s quits, and leaves it where it "   \
    "is; Esc stops it"
/* The same while the prompt sent waits for the MCP servers to start (tui_tools_wait). */
#define TUI_HINT_TOOLS "the prompt waits for the MCP servers to start: Esc gives it back"
#define TUI_HINT_BUSY(t) ((t)->send_wait ? TUI_HINT_TOOLS : TUI_HINT_STREAMING)

/* Dirty flags: what the next frame redraws. */
#define TUI_D_VIEW 0x01u
#define TUI_D_STATUS 0x02u
#define TUI_D_INPUT 0x04u
#define TUI_D_FULL 0x08u  /* everything, and repaint the terminal from scratch */

struct tui {
    struct conf *conf;
    const struct tui_opts *o;
    struct session *s;     /* NULL until the first session opens */
    int have_session;
    int no_key;              /* no key for a remote server: nothing may be sent */
    char *local_name, *local_url;
    struct tui_view *view;
    struct tui_status st;
    struct theme *theme;
    int no_color;
    WINDOW *wview, *wstatus, *winput, *keys;
    int rows, cols, view_h, input_h;
    int quit, exit_code;
    unsigned dirty;
    int urgent;              /* draw at once (keystrokes), not at the streaming frame rate */
    double last_frame;
    double last_take;        /* when the loop last took the network's events */
    size_t sink_bytes;       /* text the session handed over (--trace) */
    double last_text;        /* when text of the answer last came */
    size_t answer;           /* view index of the answer in flight, TUI_NO_ANSWER when none */
    char answer_model[256];  /* the model its request asked for (a /model while it streams
                                changes the next one's); longer names are cut */
    int cancelling;
    double oldest;           /* arrival of the oldest delta not yet drawn, 0 = none */
    long undrawn;            /* text events since the last frame */
    FILE *trace;
    char hint[512];          /* a transient line in the status bar, "" = none */
    char warned[512];        /* the network's last warning of this turn (tui_sink_warn),
                                shown as the hint: at the turn's end it goes into the
                                conversation as a note, whatever replaced the hint */
    int search;              /* 0 no search, 1 typing the query, 2 moving between hits */
    struct buf query;
    int store_warned;        /* the store's failure was shown */
    int edit_pending;        /* the next prompt replaces the last one (/edit) */
    char *offered;           /* the prompt put back in the input line (not sent), or NULL */
    double ctrl_c_at;        /* when Ctrl-C last hit an empty prompt (a second within 2 s quits) */
    double quit_asked_at;    /* when Ctrl-D or /quit came while an answer streamed (tui_quit) */
    struct tui_view *help;   /* the help over the transcript (F1), NULL when closed */
    char **cands;            /* completion candidates (NULL-terminated, owned) */
    char **models;           /* models seen in answers (NULL-terminated, owned) */
    int ctx_marked;          /* the "history compressed" marker was shown */
    /* While an answer streams the status bar's context is an estimate (tui_frame_status):
     * ctx_base = the history's count at the answer's first frame, plus answer bytes / 4. */
    int ctx_base_ok;
    long ctx_base;
    double ctx_ratio;
    int ctx_stale;           /* an answer ended: take the exact count after the next frame */
    struct tui_hist *hist;   /* the conversation browser while it is open (tui_history.c) */
    struct setup *profile_setup; /* after /profile: its fallback profile, which the session
                                    borrows (freed with the chat) */
    struct tui_ask *ask;     /* a question waiting for a key (tui_ask.h), NULL = none */
    struct loop *lp;         /* the chat's event loop (tui_modal waits on it) */
    struct tui_tool_log *tool_log; /* the tool calls shown, for /expand (tui_tools.c) */
    struct tools *tools;     /* the tools offered to the model (tui_tools.c), NULL = none */
    int tools_loaded;        /* their sources listed (servers started, or failed to) */
    struct tools_loader *tools_loader; /* listing them off the UI thread (MCP servers start:
                                          from the chat's start), NULL when not */
    char *send_wait;         /* a prompt sent while they were listed: it leaves when they are
                                (its answer shown as in flight; Esc gives it back) */
    int send_wait_cache;     /* the session's cache mode when it was sent (/retry) */
    struct tool_policy policy; /* --allow-tool, the config's allow, and `a` answers */
    int answer_split;        /* a tool round ended the answer shown: the next text starts a
                                new one (tui_tools_answer_next) */
    int shell_pending;       /* the answer in flight is a /x proposal (tui_shell.c) */
    struct attach_list *pending; /* /attach: files for the next prompt (tui_attach.c) */
};

/* ---- tui.c ---- */

/* Send prompt as the user's next message (show_user: add it to the transcript). Returns 0, or
 * -1 when nothing may be sent (no key, an answer in flight) with the reason shown. */
int tui_send(struct tui *t, const char *prompt, int show_user);
/* The request of a prompt whose turn tui_send has shown (the answer in flight): it leaves. */
void tui_send_go(struct tui *t, const char *prompt);
/* Show a local notice (markdown) or error (plain) in the transcript. */
void tui_notice(struct tui *t, const char *markdown);
void tui_error(struct tui *t, const char *text);
/* Show local plain text (raw: sanitised when drawn) in the meta style in the transcript. */
void tui_meta(struct tui *t, const char *text);
/* Show a transient hint in the status bar (until the next key). */
void tui_hint(struct tui *t, const char *text);
/* Ctrl-D or /quit: quits, or while an answer streams, asks for a second within 2 s. */
void tui_quit(struct tui *t);
/* A line typed while an answer is in flight waits in the input line: the hint that says why
 * and what to do (the MCP servers starting, a quota wait, or a stream). */
const char *tui_hint_busy(const struct tui *t);
/* Apply theme `name` (messages go to the transcript). A theme that is missing or malformed
 * leaves the current one in place (-1); at start, with none yet, the built-in one is used. */
int tui_theme(struct tui *t, const char *name);
/* Stop the answer in flight (its partial text stays, marked cancelled). */
void tui_cancel(struct tui *t);
/* Open (or reopen) the session for t->conf with key (taken); the conversation carry (NULL:
 * none) is carried over, and with a store saving continues into it (a new one when unsaved). */
int tui_session(struct tui *t, char *key, const struct conv *carry);
/* Drop the last turn (the user's message and what followed it) from the transcript. */
void tui_view_drop_last_turn(struct tui *t);
/* Continue saved conversation id (0 = the latest with an answer): its live path becomes the
 * conversation and the transcript (replace: the transcript is cleared first, once it loaded). */
void tui_resume(struct tui *t, int64_t id, int replace);
/* The conversation read again and drawn as it is saved, after another tokterm added to it
 * (session_conv_moved), with a notice ending in then (what became of the user's action); the
 * settings stay. 0, or -1 (said) when it could not be read. */
int tui_reload(struct tui *t, const char *then);
/* Switch to the local server that was found (no key needed). */
void tui_use_local(struct tui *t);
/* Show what to configure when there is no key. */
void tui_no_key_notice(struct tui *t);

/* Give the terminal back to the shell (curses ended, bracketed paste off) and take it again
 * (the whole screen redrawn). ud: the struct tui. */
void tui_suspend_curses(void *ud);
void tui_resume_curses(void *ud);

/* Draw frames and read keys and signals until the open question (t->ask) is answered; a quit
 * or a cancel meanwhile answers it with Esc. For a caller that needs the answer now (the
 * session's tool approval). */
void tui_modal(struct tui *t);

/* ---- tui_shell.c: /x ---- */

/* /x REQUEST: send the proposal's prompt as a turn. */
void tui_shell_cmd(struct tui *t, const char *arg);
/* The end of an answer (tui_sink_end): a /x proposal opens the run / edit / copy / cancel
 * question. */
void tui_shell_answer_end(struct tui *t, const struct net_result *r);
/* Draw a frame now (before a step that blocks, such as fetching a URL). */
void tui_redraw_now(struct tui *t);

/* ---- tui_attach.c ---- */

/* /attach [PATH|DIR|URL], /detach [N|all]. */
void tui_attach_cmd(struct tui *t, const char *arg);
void tui_detach_cmd(struct tui *t, const char *arg);
/* tui_input_ops' paths and pasted (ud: the tui). */
int tui_attach_paths(void *ud, const char *line, int start);
int tui_attach_pasted(void *ud, const char *text);
/* Hand the waiting attachments to the session for the prompt being sent (tui_send shows
 * them under it); returns how many. */
size_t tui_attach_send(struct tui *t);
/* A prompt offered back (failed, refused, cancelled before a byte): its n attachments wait
 * again for the next prompt (copies; those waiting already are not added twice). Returns how
 * many were added. */
struct attach;
size_t tui_attach_offer(struct tui *t, const struct attach *att, size_t n);
void tui_attach_free(struct tui *t);

/* ---- tui_cmd.c ---- */

/* Run a slash command line ("/model gpt-4o"). */
void tui_cmd_run(struct tui *t, const char *line);
/* 1 when line starts with the name of a command ("/budget 50k"). */
int tui_cmd_known(const char *line);
/* Completion candidates for the word at [start, end) of line, NULL-terminated (owned by t). */
const char *const *tui_cmd_complete(struct tui *t, const char *line, int start, int end);
/* The help text (markdown). */
const char *tui_cmd_help(void);
/* Remember a model name for /model completion. */
void tui_cmd_model_seen(struct tui *t, const char *model);
/* Free what the commands keep. */
void tui_cmd_free(struct tui *t);
/* /new: cancel the answer in flight and start a new conversation (the system prompt stays). */
void tui_cmd_new(struct tui *t);

#endif
