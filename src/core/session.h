/* session.h - one conversation: builds each request from the history and the profile, answers
 * it from the response cache or hands it to the network thread, saves it to the store as it
 * streams, and dispatches the events that come back to a sink (the TUI or the scripted-mode
 * writer). Both front ends share everything up to the sink. */
#ifndef TT_SESSION_H
#define TT_SESSION_H
#include <stddef.h>
#include <stdint.h>

#include "proto/api.h"
#include "base/buf.h"
#include "core/conf.h"
#include "core/conv.h"
#include "core/tools.h"
#include "tokens/context.h"
#include "net/net.h"

struct store;

/* One message of the history the next request carries (derived from the conversation's live
 * path: system prompt, then the user message and answer of every turn that is sent). */
struct session_msg {
    const char *role;    /* static string */
    const char *content; /* borrowed from the conversation */
    size_t len;
    int64_t id;          /* > 0: store id; < 0: this session's serial (not saved); 0: none */
    long *tokens;        /* its text's count in the turn (0 = unknown), or NULL */
    const struct conv_step *step; /* a tool round's message (calls, or a result), or NULL */
    const struct attach *att; /* a user message's files (the turn's), n_att of them */
    size_t n_att;
    long extra;          /* tokens of those sent as parts (images, PDFs), estimated */
};

/* A summary of history messages first_id..last_id (see context.h). */
struct session_summary {
    int64_t first_id, last_id;
    char *text;
};

struct session_sink {
    void *ud;
    /* Text of the answer (reasoning = 0) or of the reasoning (1), as it arrives. */
    void (*text)(void *ud, int reasoning, const char *s, size_t n, double t_first, double t_last);
    /* Response headers arrived (optional). */
    void (*headers)(void *ud, long status);
    /* The exchange ended; r stays valid until the next exchange. */
    void (*end)(void *ud, const struct net_result *r);
    /* Waiting before the request leaves (optional): retry = 1 for a retry after a failed
     * attempt, 0 for waiting on the quota; why is a sentence; seconds until it goes. */
    void (*wait)(void *ud, int retry, const char *why, double seconds);
    /* A warning of the network layer to show once, e.g. the shared state lost (optional;
     * without it, wait() gets it with seconds 0). */
    void (*warn)(void *ud, const char *text);
    /* The kept headers (rate limits) of a response that is retried, a 429 (optional). */
    void (*quota)(void *ud, const char *headers);
    /* Function calling (session_use_tools), all optional. The model asked for call (tokterm
     * name, arguments checked) and the policy says TOOL_ASK: return TOOL_RUN or TOOL_REFUSE
     * (the chat asks the user; it may replace call->args, args_len: edited arguments). NULL:
     * refused. */
    enum tool_verdict (*tool_approve)(void *ud, struct tool_call *call);
    /* A call was decided: verdict TOOL_RUN (it starts now) or TOOL_REFUSE; invalid calls
     * (unknown tool, bad arguments) come with TOOL_REFUSE too, their result follows. */
    void (*tool_call)(void *ud, const struct tool_call *call, enum tool_verdict verdict);
    /* A call's result (is_error for failed, invalid, refused or cancelled calls), seconds
     * after it started (0 when it never ran). */
    void (*tool_result)(void *ud, const struct tool_call *call, const struct tool_result *res,
                        double seconds);
};

enum session_cache {
    SESSION_CACHE_ON,     /* answer from the cache when it has the exact request; fill it */
    SESSION_CACHE_BYPASS, /* always ask the server (--no-cache, /retry); still fill the cache */
    SESSION_CACHE_ONLY,   /* never ask the server (--cache-only): a miss is API_CACHE_MISS */
    SESSION_CACHE_OFF,    /* neither read nor write (--incognito) */
};

/* One conversation with its network thread, store and budget. Opaque: the front ends use
 * the functions below (the history through session_conv). */
struct session;

/* How a front end wants the session to behave (session_set_options). */
struct session_opts {
    int keep_answer;   /* collect the answer text (history, --json); default 1 */
    int count_lazily;  /* count tokens only when asked: a request that fits by its bytes is
                          sent without tokenizing it (scripted -p); default 0 */
    int save_refused;  /* save turns refused before sending (the chat shows them); default 0 */
    int lean_resume;   /* session_resume reads only the newest turns that can still be sent
                          when the stored counts prove the rest is summarised or dropped
                          (scripted -c/-r -p: the request is the same; the chat shows them
                          all); default 0 */
};

/* Start a session with conf (borrowed) and key (taken: the session wipes and frees it, also
 * on failure). Returns it, or NULL with *err (static text). */
struct session *session_open(struct conf *conf, char *key, const char **err);
void session_set_options(struct session *s, const struct session_opts *o);
/* The response-cache mode now; session_set_cache returns the one it replaces (/retry asks
 * the server for a new answer once). */
enum session_cache session_set_cache(struct session *s, enum session_cache cache);
/* 1 when requests to a remote server carry a key (a key, or a key pool). */
int session_has_key(const struct session *s);
/* The first store failure to report, or NULL. */
const char *session_store_error(const struct session *s);
/* The result of the last exchange (NULL before one), and its answer and reasoning text (kept
 * when keep_answer is set). */
const struct net_result *session_last(const struct session *s);
const char *session_answer(const struct session *s);
const char *session_reasoning(const struct session *s);
/* Their lengths in bytes (the text may hold a NUL byte). */
size_t session_answer_len(const struct session *s);
size_t session_reasoning_len(const struct session *s);
/* While an answer streams: the block of the session's copy of it (session_answer_len bytes;
 * the sink gets the kept text in it) when a reader may hold that block (buf_lend) instead of
 * copying the text: a fast answer's, in its room for the whole answer, which does not move.
 * NULL otherwise. */
void *session_answer_lend(const struct session *s);
/* The profile the session sends with. */
const struct conf *session_profile(const struct session *s);
/* Attach a store (borrowed): save = write the conversation; cache = how to use the response
 * cache. Call before the first send. */
void session_use_store(struct session *s, struct store *st, int save, enum session_cache cache);
/* Continue saved conversation id (or, when id is 0, the most recent one with an answered
 * turn): its live path becomes the conversation, and new turns are added to it. Returns 0, or
 * -1 with a message in *err (caller frees). */
int session_resume(struct session *s, int64_t id, char **err);
/* After a resume: when the conversation's newest answer came from another server than the
 * profile in use now would send to, where that was ("api.openai.com, profile openai";
 * malloc'd), else NULL. Its turns would go to the new server whole. */
char *session_resumed_elsewhere(struct session *s);
/* Take over conversation c's live path (copied): /profile carries the conversation over. */
void session_adopt(struct session *s, const struct conv *c);
/* /new: an empty conversation (the system prompt stays). */
void session_new_conversation(struct session *s);
/* /system: replace the system prompt (NULL or "" removes it). */
void session_set_system(struct session *s, const char *text);
/* /edit and /retry of the last turn: the live path ends before it, and the next
 * session_send is a new version of it (the old one stays saved, never sent), with the same
 * attachments (they wait in session_attached). Returns 0, or -1
 * when there is no turn. */
int session_fork_last(struct session *s);
/* Record prompt as a turn refused before sending (no key): shown, saved when the chat saves
 * refused turns, never sent. */
void session_refuse_turn(struct session *s, const char *prompt, const char *why);
/* The conversation (its live path). */
const struct conv *session_conv(const struct session *s);
/* Use a key pool: labels and values (n of each) are taken (see conf_key_pool). */
void session_use_pool(struct session *s, char **labels, char **values, int n);
/* Use the fallback profile conf (borrowed) with key (taken) while the endpoint's circuit
 * breaker is open. A conf fallback_model needs no call: it is used by itself. */
void session_use_fallback(struct session *s, struct conf *fallback, char *key);
/* Function calling: offer the tools of t (borrowed; tools_load done) to the model, run its
 * calls as policy p (borrowed) and the sink's tool_approve decide, at most rounds rounds per
 * turn (<= 0: 10). t NULL: no tools (the bodies are as before). */
void session_use_tools(struct session *s, struct tools *t, struct tool_policy *p, int rounds);
/* While a call runs: the call, its round (1-based) and seconds so far; NULL when none. */
const struct tool_call *session_tool_running(const struct session *s, int *round,
                                             double *elapsed);
/* Why the last turn's answer could not be completed with its tools (a call refused, the
 * round limit), or NULL: scripted mode exits with 9 then. */
const char *session_tools_incomplete(const struct session *s);
/* Why the last resume could not take the role its conversation was held with, or NULL. A
 * resume takes the conversation's role and model unless given now (conf role_given,
 * model_given). */
const char *session_resume_note(const struct session *s);
/* What -c passed over to reach the conversation it continues (newer ones without an answer),
 * or NULL. */
const char *session_resume_passed(const struct session *s);
/* Read this session's conversation again as it is saved (another process added to it:
 * session_conv_moved), keeping the session's settings (model, role, system prompt): not a
 * resume. 0, or -1 with *err (the session is unchanged). */
int session_reload(struct session *s, char **err);
/* The saved conversation this session holds, or 0 when none is saved yet. */
int64_t session_conv_id(const struct session *s);
/* 1 when another process added a turn to the saved conversation since this session last
 * read or wrote it (its saved head is no longer this session's last turn): the next turn
 * would leave that one off the live path. One indexed read; 0 when not known (not saved, a
 * write that failed, a head never saved). */
int session_conv_moved(struct session *s);
/* conf->role changed (the chat's /role): the saved conversation is held with it now. */
void session_role_changed(struct session *s);
/* The usage of the last turn's requests summed: with tools, every round's (a round's own is
 * in its net_result); present 0 when no request of the turn reported usage. */
const struct api_usage *session_turn_usage(const struct session *s);

/* Stop the network thread and free everything, s included. NULL is fine. */
void session_close(struct session *s);
/* session_close when the process exits right after: the conversation's turns and the last
 * plan (thousands of allocations after a long resume, ~2.5M instructions at 10,000 messages)
 * are left to the kernel, unless a leak checker watches (an ASan build, or
 * TOKTERM_FULL_CLEANUP=1, as main_exit decides). Everything else closes as it does there. */
void session_leave(struct session *s);
/* Send the history plus a new user message; returns the request id. The attachments given
 * with session_attach go with it (checked first against the provider's limits: a turn that
 * fails the check is refused with the reason, nothing sent). */
unsigned session_send(struct session *s, const char *prompt);
/* Files for the next session_send: l's entries are moved to the session (l is left empty). */
void session_attach(struct session *s, struct attach_list *l);
/* The files waiting for the next session_send (session_attach), n of them in *n. */
const struct attach *session_attached(const struct session *s, size_t *n);
/* The attachment provider of the session's profile (limits, token estimates, PDFs). */
enum attach_provider session_attach_provider(const struct session *s);
/* Check files l against the profile's limits before they are attached (the front ends' early
 * check: -f, /attach): 0, or -1 with a message in *err (caller frees); a PDF for a server that
 * takes no documents is converted to text here (pdftotext), so its failure shows now. */
int session_attach_check(const struct session *s, struct attach_list *l, char **err);
/* File descriptor to poll for events. */
int session_fd(const struct session *s);
/* Milliseconds until session_tick() has work (a batch of saved text to commit), -1 = none. */
int session_timeout_ms(const struct session *s);
/* Commit saved text that is due; call when session_timeout_ms() has elapsed. */
void session_tick(struct session *s);
/* Hand pending events to the sink. Returns 1 when the exchange in flight ended (its turn is
 * settled: answered, cut, interrupted with the text so far, failed or refused), else 0. */
int session_dispatch(struct session *s, const struct session_sink *sink);
/* Ask the network thread to stop the exchange in flight. */
void session_cancel(struct session *s);
/* The same for a reason of the program's (stdout failed: "writing stdout: No space left on
 * device"): the answer ends cancelled, and why is its error, saved (until 2026-12 it read
 * "cancelled", as if the user had asked). */
void session_cancel_because(struct session *s, const char *why);
/* Ask the network thread to send the exchange in flight now, while it waits for its quota or a
 * retry's backoff (net_send_now). */
void session_send_now(struct session *s);

/* ---- context window and budget (for the status bar, /context, /budget, --json) ---- */

struct session_status {
    long window, reserve, available;  /* available = window - reserve (tokens for the prompt) */
    int window_assumed;        /* unknown model, no context_window: 8,192 assumed */
    const char *encoding;      /* counting encoding (static / owned by the session) */
    int approximate;           /* counts are estimates: show them with "~" */
    double ratio;              /* calibration ratio applied (1 when exact) */
    long ratio_samples;
    enum context_policy policy;
    long ctx_used;             /* tokens the history takes in the next request (compressed as
                                  it would be), as the server counts them */
    long answer_tokens;        /* tokens of the answer streaming now (counted incrementally) */
    /* the last request that left */
    long sent_tokens;          /* its prompt, as the server counts it (estimate) */
    long sent_raw;             /* the same in raw tokens of the encoding */
    size_t sent_messages;
    size_t n_shortened, n_merged, n_summarized, n_dropped;
    int summary_requests;      /* summary requests made for it */
    int summary_reused;        /* a summary made earlier was sent (not paid for again) */
    const char *note;          /* what compression did, "" when nothing (valid until the next
                                  session call) */
    int summarizing;           /* a summary request is in flight */
    /* spending */
    long long spent_tokens;
    int spent_estimated;       /* spent_tokens holds an estimate of an answer's tokens (no usage
                                  from the server, and too long to count) */
    double spent_usd;
    int priced;                /* the current model has a price (data/prices.tsv) */
    long long budget_tokens;   /* 0 = no cap */
    double budget_usd;         /* 0 = no cap */
    enum context_budget_level level; /* OK, WARN (>= 80 %), OVER (>= 100 %: sending refused) */
    double budget_frac;
};
/* A notice the caller should show before the request's answer (a large summary request has
 * just left, with what it costs), or NULL; the caller frees it. */
char *session_notice(struct session *s);

/* Fill *st. Cheap enough for every frame (the history is re-planned only when it changed).
 * While an answer streams, answer_tokens is what session_answer_count_step counted so far:
 * the status never tokenises the answer. */
void session_status(struct session *s, struct session_status *st);
/* 1 while an answer streams whose tokens will have to be counted by us (no usage asked for,
 * a server of this session sent none, or the model has another tokenizer). */
int session_answer_count_wanted(struct session *s);
/* Count at most max more bytes of the streaming answer when session_answer_count_wanted;
 * returns the bytes still uncounted (0 when nothing is wanted). For idle moments: what it
 * counts is not counted again when the answer ends. */
size_t session_answer_count_step(struct session *s, size_t max);
/* Debug counters for tests: answer bytes given to the token counter so far, and texts in the
 * count cache (a text counted is cached). */
void session_count_debug(const struct session *s, size_t *answer_bytes, size_t *texts);
/* The same without ctx_used and answer_tokens (left 0): only the request that left and the
 * spending, so that nothing of the history is counted (--json, the budget warning). */
void session_status_sent(struct session *s, struct session_status *st);
/* What happened to history message i in the last request: enum context_fate (CONTEXT_SENT for
 * messages added since). The TUI puts its "history compressed" marker after the last message
 * that is not CONTEXT_SENT. */
int session_msg_fate(const struct session *s, size_t i);
/* 1 when the last request left history out or summarised it (the chat says so once). */
int session_compressed(const struct session *s);
/* The /context text: every message the next request will carry with its tokens, what was
 * compressed, the calibration and the budget. Caller frees. */
char *session_context_report(struct session *s);
/* 1 when the session has a spending cap (tokens or dollars). */
int session_has_budget(const struct session *s);
/* /budget ARG: "" shows the budget; "50000", "50k", "$2", "2usd", "off", "tokens off",
 * "usd off" set it. Returns 0 with a confirmation in *msg, or -1 with the error in *msg
 * (caller frees *msg either way). */
int session_budget_command(struct session *s, const char *arg, char **msg);
/* The chat's spending and caps, carried from the session of one profile to the next
 * (/profile): the budget is the chat's, as /new and /model keep it. */
struct session_spend {
    long long tokens;
    double usd;
    int usd_unknown;
    long long cap_tokens; /* 0 = no cap */
    double cap_usd;
};
void session_spend_get(const struct session *s, struct session_spend *sp);
/* s goes on from sp: what was spent counts, and sp's caps where s's profile sets none. */
void session_spend_carry(struct session *s, const struct session_spend *sp);

#endif
