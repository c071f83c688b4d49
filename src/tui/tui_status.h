/* tui_status.h - the status bar: what the chat is doing and what the last answer cost.
 *
 * Fields, most important first (the least important are dropped when the bar is narrow):
 * state (idle, waiting, streaming, cancelling, retrying in Ns, waiting for quota, error),
 * profile/model, time to first token, tokens/s (an estimate of bytes/4 while streaming, the
 * server's usage once done) and total time, connection new/reused and HTTP version, rate-limit
 * remaining requests/tokens with a reset countdown (only once x-ratelimit-* headers arrived),
 * context used / the model's context window, tokens spent in this session, a cache mark. */
#ifndef TT_TUI_STATUS_H
#define TT_TUI_STATUS_H
#include <curses.h>

#include "net/net.h"
#include "net/ratelimit.h"

enum tui_state {
    TUI_STATE_IDLE,
    TUI_STATE_WAITING,    /* request sent, no answer yet */
    TUI_STATE_STREAMING,
    TUI_STATE_CANCELLING,
    TUI_STATE_RETRYING,   /* until: the next attempt */
    TUI_STATE_QUOTA,      /* waiting for quota; until: when the request may go */
    TUI_STATE_ERROR,
    TUI_STATE_NOKEY,      /* no API key: nothing can be sent */
};

struct tui_status {
    char model[160];          /* "profile/model" as shown */
    char effort[8];           /* the reasoning effort shown after it ("high"), "" = none */
    enum tui_state state;
    double until;             /* RETRYING / QUOTA: monotonic time the wait ends */
    double t_send;            /* the request left */
    double t_first;           /* first answer text arrived, 0 = none yet */
    double t_last;            /* latest text */
    size_t bytes;             /* answer bytes so far */
    /* the last finished exchange */
    int have_last;
    double ttft, total, tps;
    int reused, http_version;
    int cached;               /* the answer came from the cache (hook: no such field yet) */
    struct ratelimit_state rl;
    long long ctx_used;       /* usage.prompt_tokens of the last answer, -1 = unknown */
    long ctx_budget;          /* the model's context window, 0 = unknown */
    long long spent;          /* sum of usage.total_tokens in this session */
    /* from session_status() when there is a session (have_ctx): these replace the above */
    int have_ctx;
    int ctx_approx;           /* ctx_used is an estimate: shown with "~" */
    double spent_usd;
    int priced;               /* spent_usd is known */
    int budget_level;         /* enum context_budget_level */
    double budget_frac;
    int scrolled;             /* the transcript is scrolled up (new text is not followed) */
    char why[200];            /* RETRYING / QUOTA: the reason, as the network thread said it */
    char tool[128];           /* a tool call running: its name ("" = none), shown as the state
                                 with its round and elapsed time (tui_status_tool) */
    int tool_round;
    double tool_elapsed, tool_at; /* seconds it had run at tool_at (monotonic) */
};

/* Reset everything; model = "profile/model" (raw text; sanitised when drawn). */
void tui_status_init(struct tui_status *st, const char *profile, const char *model);

/* Change the model shown. */
void tui_status_model(struct tui_status *st, const char *profile, const char *model);
/* The reasoning effort to show ("low", "medium", "high"; NULL, "none": nothing). */
void tui_status_effort(struct tui_status *st, const char *effort);

/* A request left at time now. */
void tui_status_send(struct tui_status *st, double now);

/* Answer text arrived (n bytes, first/last arrival times). */
void tui_status_text(struct tui_status *st, size_t n, double t_first, double t_last);

/* Switch to a waiting state (RETRYING or QUOTA) that ends at until, or another state. */
void tui_status_state(struct tui_status *st, enum tui_state state, double until);

/* The request waits before it leaves: state RETRYING (after a failed attempt) or QUOTA, until
 * the monotonic time until, because of why (raw text, may be NULL). */
void tui_status_wait(struct tui_status *st, enum tui_state state, double until, const char *why);

/* Rate-limit headers (lines) of a response: every response's, a retried 429's too. */
void tui_status_headers(struct tui_status *st, const char *headers, double now,
                        double now_epoch);

/* The exchange ended: take timings, usage and rate-limit headers from r. */
void tui_status_end(struct tui_status *st, const struct net_result *r, double now,
                    double now_epoch);

/* Take the context window, its use and the session's spend from the session's status. */
struct session_status;
void tui_status_context(struct tui_status *st, const struct session_status *ss);

/* Draw the bar into row y of w (width columns). A non-empty hint replaces the fields. */
void tui_status_draw(const struct tui_status *st, WINDOW *w, int y, int width, double now,
                     const char *hint);

/* A tool call is running: name (raw; NULL = none any more), its round (1-based) and the
 * seconds it has run at now. The state field reads "round 2 · fs.read_file 3s"; with round 0,
 * "NAME 3s" ("starting MCP server fs 3s"). */
void tui_status_tool(struct tui_status *st, const char *name, int round, double elapsed,
                     double now);

/* Milliseconds until the bar's text changes by itself (countdowns, live rates), -1 = never. */
int tui_status_tick(const struct tui_status *st, double now);

#endif
