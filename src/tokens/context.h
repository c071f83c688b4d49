/* context.h - fit a conversation into a model's context window, and keep a session's budget.
 *
 * Pure: no curl, curses or store. The session hands over its history (role, content, a stable
 * id per message) and gets back a plan: the exact messages to send with their token counts, what
 * was shortened, merged, summarised or dropped, which messages still need a summary, or an error
 * when the newest message alone cannot fit.
 *
 * Token counts are "raw" counts of the chosen encoding (o200k_base / cl100k_base), with the chat
 * overhead the API bills: 3 per message + the role's tokens, and 3 for the reply primer. For a
 * model with another tokenizer (approximate counting) a calibration ratio learnt from the
 * server's usage.prompt_tokens turns raw counts into what the server will count.
 *
 * Steps when the history does not fit (window - reserve), in this order, each only while it
 * still does not fit:
 *   1. shorten very long old messages: keep head and tail, with a marked elision in between;
 *   2. merge consecutive messages of the same role;
 *   3. (policy summarize) replace the oldest turns by a summary message: an available summary
 *      is reused; otherwise the plan names the messages a new summary must cover;
 *   4. drop the oldest turns.
 * Leading system messages and the newest message are never shortened, merged or dropped. */
#ifndef TT_CONTEXT_H
#define TT_CONTEXT_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

enum context_policy {
    CONTEXT_SUMMARIZE, /* steps 1-4 (default) */
    CONTEXT_TRUNCATE,  /* steps 1, 2, 4: never asks the model for a summary */
    CONTEXT_OFF,       /* send as is and let the server refuse */
};

/* Parse "summarize" (or "summarise"), "truncate", "off". Returns 0, or -1 when unknown. */
int context_policy_parse(const char *s, enum context_policy *out);
/* "summarize", "truncate" or "off" (static). */
const char *context_policy_name(enum context_policy p);

/* Tokens per message the chat API adds (<|start|>role<|message|>...<|end|>, role excluded) and
 * tokens of the reply primer, as OpenAI's cookbook counts them. */
#define CONTEXT_MSG_OVERHEAD 3
#define CONTEXT_REPLY_PRIMER 3
/* Marker text of a shortened message: "[... N tokens elided by tokterm ...]". */
#define CONTEXT_ELISION "tokens elided by tokterm"
/* First line of the summary message put in place of the oldest turns. */
#define CONTEXT_SUMMARY_HEAD "Summary of the earlier part of this conversation (by tokterm):"

/* ---- counting -------------------------------------------------------------------------- */

struct context;

/* A counter for encoding ("o200k_base", "cl100k_base"; NULL = o200k_base). approximate: the
 * model really uses another tokenizer (counts are estimates). When the encoding's table cannot
 * be opened, counting falls back to bytes/4 (approximate) and *err (when err != NULL) gets a
 * message the caller frees. Never returns NULL; free with context_free(). */
struct context *context_new(const char *encoding, int approximate, char **err);
void context_free(struct context *c);
/* "o200k_base", "cl100k_base" or "bytes/4" (owned by c). */
const char *context_encoding(const struct context *c);
#define CONTEXT_CACHE_MIN 16 /* shorter texts are counted each time, not remembered */

/* 1 when counts are estimates (another tokenizer, or no table). */
int context_approximate(const struct context *c);
/* Tokens of text[0..len). Counts are cached by content (hash + length), so a message that is
 * sent again each turn is tokenised once. */
long context_count(struct context *c, const char *text, size_t len);
/* Record that text[0..len) is tokens tokens (counted elsewhere: incrementally as it streamed,
 * or by the server), so that context_count finds it instead of tokenising it again. */
void context_count_record(struct context *c, const char *text, size_t len, long tokens);
/* Tokens one chat message costs: CONTEXT_MSG_OVERHEAD + tokens(role) + tokens(content). */
long context_msg_tokens(struct context *c, const char *role, const char *text, size_t len);
/* The tokens of text[0..len) when the cache knows them (context_count_record, an earlier
 * count), else -1: nothing is tokenised. */
long context_count_known(struct context *c, const char *text, size_t len);
/* Number of texts in the count cache (for tests). */
size_t context_cached(const struct context *c);
/* Texts and bytes tokenised by this counter so far (the debug counter: TOKTERM_DEBUG_TOKENIZED
 * makes tokterm print them at exit). */
void context_tokenized(const struct context *c, size_t *texts, size_t *bytes);
/* Texts and bytes hashed for the count cache so far (printed with the same debug counter). */
void context_hashed(const struct context *c, size_t *texts, size_t *bytes);
/* Long texts shortened so far (their ends encoded); not those a plan found shortened the same
 * way by an earlier one, which are copied. */
size_t context_shortened(const struct context *c);
/* 1 when the rank table is open (a count has been paid for); 0 while it is still unmapped. */
int context_table_open(const struct context *c);

/* Incremental counter of a streamed answer: each delta is scanned once. */
struct context_stream;
struct context_stream *context_stream_new(struct context *c);
void context_stream_feed(struct context_stream *s, const char *delta, size_t len);
long context_stream_count(struct context_stream *s);
void context_stream_reset(struct context_stream *s);
void context_stream_free(struct context_stream *s);

/* ---- the plan -------------------------------------------------------------------------- */

struct context_msg {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content;
    size_t len;
    int64_t id;          /* stable id (store id, or a session serial); 0 = none (no summary) */
    long tokens;         /* the content's tokens when known (stored with the message), so the
                            plan need not count them; 0 = unknown (count) */
    long extra;          /* tokens of the files sent with it (images, PDFs: the provider's
                            estimate), added to its count; never shortened, dropped with it */
};

/* A summary that is already known (from the store or made earlier in this session): it
 * stands for the messages from first_id through last_id. */
struct context_summary {
    int64_t first_id, last_id;
    const char *text;
};

struct context_params {
    long window;              /* tokens the model accepts, prompt and answer together */
    long reserve;             /* tokens kept free for the answer */
    enum context_policy policy;
    double ratio;             /* server tokens per raw token (calibration); used only when the
                                 counter is approximate; <= 0 means 1 */
    long summary_tokens;      /* most tokens a summary should take; 0 = window/8 in 32..1024 */
    const struct context_summary *summaries;
    size_t n_summaries;
    int no_new_summary;       /* never ask for a new summary (one failed): go on to step 4 */
    int bounds_ok;            /* an exact counter may skip counting when the bytes fit (every
                                 token is at least one byte): the plan is then out->bounded */
    long fixed;               /* raw tokens every request carries besides its messages: the
                                 tool definitions (14 MCP tools: ~2,000); out of the budget,
                                 in out->shown and the /context listing */
};

/* Flags of a planned message. */
#define CONTEXT_F_SHORTENED 1u /* a long message cut to head + tail */
#define CONTEXT_F_MERGED 2u    /* several messages of one role joined */
#define CONTEXT_F_SUMMARY 4u   /* the summary of older messages */

/* What happened to each message of the history. */
enum context_fate {
    CONTEXT_SENT,       /* sent as it is */
    CONTEXT_SHORTENED,  /* sent, shortened */
    CONTEXT_MERGED,     /* sent, joined to the message before it */
    CONTEXT_SUMMARIZED, /* stands in the summary */
    CONTEXT_DROPPED,    /* not sent */
};

/* One message of the request. */
struct context_item {
    const char *role;     /* static string */
    const char *content;  /* NUL-terminated; the history's text or plan-owned text */
    size_t len;
    long tokens;          /* raw tokens including the per-message overhead (and extra) */
    long extra;           /* the files' tokens of the messages it stands for (0 for a
                             summary: their files are not sent) */
    long orig_tokens;     /* the same for the history messages it stands for, unchanged */
    unsigned flags;       /* CONTEXT_F_* */
    size_t first, last;   /* history indices it stands for */
    char *owned;          /* content when the plan made it (freed with the plan) */
};

struct context_plan {
    struct context_item *items;  /* the messages to send, in order */
    size_t n_items;
    unsigned char *fate;         /* enum context_fate per history message */
    size_t n_history;
    long history_tokens;         /* raw tokens of the whole history as it is (+ primer) */
    long total;                  /* raw tokens of the items + reply primer */
    long shown;                  /* total and fixed as the server will count them (x ratio,
                                    rounded up, when approximate) */
    long fixed;                  /* params->fixed: the tool definitions' raw tokens */
    long budget;                 /* raw tokens the messages may take: (window - reserve) /
                                    ratio - fixed */
    double ratio;                /* ratio applied (1 when exact) */
    int approximate;
    int fits;                    /* total <= budget */
    int bounded;                 /* nothing was counted: every message fits by its bytes, and
                                    tokens/total/shown are upper bounds (params->bounds_ok) */
    size_t n_shortened, n_merged, n_summarized, n_dropped; /* history messages */
    int summary_used;            /* index into params->summaries of the one sent, or -1 */
    /* Step 3 wants a new summary (policy summarize, none of the known ones is enough): */
    int need_summary;
    int64_t sum_first_id, sum_last_id; /* the range the new summary will stand for */
    size_t sum_from, sum_to;     /* history indices of the messages folded in by this request */
    int sum_prev;                /* index of the summary it extends, or -1 */
    char *sum_input;             /* the user message of the summary request */
    long sum_tokens;             /* max_tokens for the summary request */
    long sum_prompt;             /* raw prompt tokens of the summary request (instruction and
                                    sum_input), from the counts the plan has: nothing recounted */
    long sum_after;              /* raw tokens of the request once that summary is in it */
    size_t sum_skipped;          /* history messages between the previous summary (or the
                                    start) and sum_from that one request cannot hold: they are
                                    left out of the summary (dropped) */
    long *content_tokens;        /* per history message: its content's tokens as the plan knew
                                    or counted them, -1 when not counted (bounded plan) */
    char *error;                 /* the newest message alone does not fit: nothing to send */
};

/* Plan the request for history msgs[0..n) (the newest message last). Fills *out (free it with
 * context_plan_free). Returns 0, or -1 when the newest message alone does not fit (out->error
 * says so with the numbers; out->items is empty). With policy off nothing is changed and 0 is
 * returned even when it does not fit (out->fits = 0). When out->need_summary is set, out->items
 * is the plan without a new summary (steps 1, 2, 4), to send if the summary cannot be had; once
 * the summary is known, plan again with it in params->summaries. */
int context_plan(struct context *c, const struct context_msg *msgs, size_t n,
                 const struct context_params *p, struct context_plan *out);
void context_plan_free(struct context_plan *plan);
/* The raw tokens a plan with params p may send (context_plan's out->budget), and the content
 * tokens above which its step 1 shortens an old message. */
long context_plan_budget(const struct context *c, const struct context_params *p);
long context_long_limit(long budget);

/* The system message of a summary request (static). */
const char *context_summary_instruction(void);
/* One line saying what the plan did ("2 old messages shortened, 6 summarised, 1 dropped"), or
 * "" when nothing was changed. Appended to out. */
void context_plan_describe(const struct context_plan *plan, struct buf *out);
/* The /context listing: each message that will be sent with its tokens and what was done to
 * it, and the totals. Appended to out. */
void context_plan_report(const struct context_plan *plan, const struct context_params *p,
                         struct buf *out);

/* Append n with thousands separators, prefixed by "~" when approximate ("~1,234"). */
void context_format_tokens(struct buf *out, long long n, int approximate);
/* An amount of money written into out: "$0.0123" under a dollar, "$12.34" from one on, and
 * "<$0.0001" for a spend too small to show in 4 places (not "$0.0000", which reads as nothing
 * spent). The status bar, /context, /budget and stats say the same. Returns out. */
#define CONTEXT_USD_MAX 32
const char *context_format_usd(double usd, char out[CONTEXT_USD_MAX]);
/* A budget's cap as it was set: "$2.00", "$0.50", "$0.0001", "$0.125" (whole cents in two
 * places, else as many as it takes, up to 8). Returns out. */
const char *context_format_cap_usd(double usd, char out[CONTEXT_USD_MAX]);

/* ---- calibration ----------------------------------------------------------------------- */

/* Per-model ratio reported prompt tokens / raw estimate. The first CONTEXT_CALIB_WARMUP samples
 * give the running ratio sum(reported) / sum(estimated) (big requests weigh more); after that an
 * exponentially weighted moving average with weight CONTEXT_CALIB_ALPHA for the newest sample,
 * so the ratio follows a server whose template changes but one odd request moves it little.
 * Samples with estimated < CONTEXT_CALIB_MIN tokens or a ratio outside 0.25..4 (a server that
 * reports only the uncached part of the prompt, say) are ignored. */
#define CONTEXT_CALIB_WARMUP 5
#define CONTEXT_CALIB_ALPHA 0.2
#define CONTEXT_CALIB_MIN 8

struct context_calib;

struct context_calib *context_calib_new(void);
void context_calib_free(struct context_calib *cal);
/* Record one exchange of model: the request counted estimated raw tokens, the server reported
 * reported prompt tokens. Returns the model's ratio afterwards. */
double context_calibrate(struct context_calib *cal, const char *model, long estimated,
                         long reported);
/* The model's ratio (1 when nothing was learnt); *samples (optional) gets the samples taken. */
double context_calib_ratio(const struct context_calib *cal, const char *model, long *samples);
/* Read "model<TAB>ratio<TAB>samples<TAB>sum_est<TAB>sum_rep" lines (a missing file is fine).
 * Returns 0, or -1 on a read error. */
int context_calib_load(struct context_calib *cal, const char *path);
/* Write the table atomically (temp file + rename, mode 0600). Returns 0 or -1 (errno). */
int context_calib_save(const struct context_calib *cal, const char *path);

/* ---- prices and budget ----------------------------------------------------------------- */

struct context_price {
    char prefix[64];        /* the matching row */
    double in, out, cached; /* US dollars per 1M tokens: input, output, cached input */
};

/* Look model up by longest prefix (after dropping "provider/" and "ft:"), first in user_file
 * (when non-NULL and readable), then in data/prices.tsv (same search as the tokenizer's data:
 * $TOKTERM_DATADIR, the installed pkgdatadir, the source tree). Returns 0, or -1 when no row
 * matches. */
int context_price_lookup(const char *model, const char *user_file, struct context_price *out);
/* Dollars for prompt tokens (cached of them at the cached-input rate) and completion tokens. */
double context_cost(const struct context_price *p, long long prompt, long long cached,
                    long long completion);

struct context_budget {
    long long cap_tokens;   /* 0 = no cap */
    double cap_usd;         /* 0 = no cap */
    long long spent_tokens; /* prompt + completion of every request of the session */
    double spent_usd;       /* of the requests whose price was known */
    int usd_unknown;        /* some request had no price */
};

enum context_budget_level {
    CONTEXT_BUDGET_OK,
    CONTEXT_BUDGET_WARN,    /* >= 80 % of a cap */
    CONTEXT_BUDGET_OVER,    /* >= 100 % of a cap: sending is refused */
};
#define CONTEXT_BUDGET_WARN_FRAC 0.8

/* Add one request's tokens; usd < 0 when its price is unknown. */
void context_budget_add(struct context_budget *b, long long prompt, long long completion,
                        double usd);
/* The level of spending; *frac (optional) gets the larger fraction of the caps (0 without). */
enum context_budget_level context_budget_level(const struct context_budget *b, double *frac);
/* May a request whose prompt is prompt_tokens (costing prompt_usd, < 0 unknown) go? Returns
 * NULL, or a refusal that says what was spent and how to raise the cap (caller frees). */
char *context_budget_check(const struct context_budget *b, long long prompt_tokens,
                           double prompt_usd);
/* Parse a /budget argument: "50000" or "50k" tokens, "$2" / "2usd" / "2$" dollars, "off" (both
 * caps removed), "tokens off", "usd off". Returns 0 and updates b, or -1 with a message in err. */
int context_budget_parse(struct context_budget *b, const char *arg, struct buf *err);
/* "12,345 tokens, $0.0123 of budget 50,000 tokens (25%)"-style line. Appended to out. */
void context_budget_describe(const struct context_budget *b, struct buf *out);

#endif
