/* session.c - drives exchanges for either front end: cache, network, store. */
#include "config.h"
#include "core/session.h"
#include "core/request.h"
#include "core/role.h"
#include "net/otlp.h"
#include "net/probe.h"
#include "net/queue.h"
#include "store/store.h"
#include "tokens/tokenizer.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SESSION_LOCAL_ID 0x80000000u
/* How long the answer's SQL waits for libcurl's load (session_send_planned): the load takes
 * 5-7 ms on the project's VM; one that hangs holds the loop (signals, the chat's screen) no
 * longer than this, and the SQL is compiled beside it as before. */
#define SESSION_SETTLE_MS 50

struct session {
    struct conf *conf;
    char *key;                 /* API key (wiped on close); NULL for keyless local servers */
    struct queue *q;
    struct net *net;
    struct conv conv;          /* the conversation: its live path is what is shown and sent */
    struct attach_list att_pending; /* files for the next session_send (session_attach) */
    struct api_part *parts;    /* the files of the request being built (session_planned_body) */
    struct session_msg *msgs;  /* the history the next request carries (session_history) */
    size_t n_msgs, cap_msgs;
    int save_refused;          /* save turns refused before sending (the chat shows them) */
    unsigned active;           /* request in flight, 0 = none */
    unsigned cancel_asked;     /* the request the user asked to cancel (Esc, SIGINT), 0 = none */
    char *cancel_why;          /* why, when not the user's asking (session_cancel_because) */
    unsigned next_local;       /* ids of cache replays (high bit set, never a net id) */
    struct buf answer;         /* text of the answer in flight */
    const struct conv_turn *answer_turn; /* the turn that took it when it ended, until the
                                            history changes (session_answer) */
    struct buf reasoning;
    int keep_answer;           /* collect the answer text (history, --json) */
    int count_lazily;          /* count tokens only when asked (status, no usage): a request
                                  that fits by its bytes is sent without tokenizing it */
    struct net_result *last;   /* result of the last exchange */

    struct store *store;       /* NULL: nothing saved, no cache (borrowed) */
    int save;                  /* write the conversation to the store */
    enum session_cache cache;
    int64_t conv_id;           /* saved conversation, 0 until the first message is saved */
    int64_t answer_id;         /* saved answer being streamed, 0 = none */
    unsigned char cache_key[32];
    int cache_key_set;         /* the request in flight may fill the cache */
    char *store_error;         /* first store failure to report (caller may print), or NULL */
    int quota_loaded;          /* the saved quota state was handed to the network thread */
    char **pool_labels, **pool_values; /* key pool (values wiped on close) */
    int n_pool;
    struct conf *fallback_conf;        /* profile used while the breaker is open (borrowed) */
    char *fallback_key;

    /* Context window, compression and budget (context.h); set up on the first send. */
    struct context *ctx;       /* counter for the model's encoding */
    char *ctx_key;             /* model + encoding option ctx was made for */
    struct session_model {
        long window, reserve;
        int window_assumed;    /* unknown model and no context_window: 8,192 assumed */
        int priced;
        struct context_price price;
    } ctx_model;
    struct session_model sent_model; /* ctx_model as the last request left: its spend is
                                        priced so (until 2026-12 at the model current when it
                                        ended: /model mid-answer charged the new one's price) */
    struct context_calib *calib;
    char *calib_path;          /* $XDG_STATE_HOME/tokterm/calibration */
    struct context_plan plan;  /* plan of the last request that left (or is about to) */
    int plan_summary_reused;
    int plan_summary_requests;
    char *plan_note;           /* what the last plan did, for the status bar */
    struct session_summary *sums; /* summaries known to this session */
    size_t n_sums, cap_sums;
    unsigned sum_req;          /* summary request in flight, 0 = none */
    struct buf sum_text;
    int sum_failed;            /* a summary failed for this send: drop turns instead */
    int sum_cancelled;         /* cancelled while the summary was being made */
    char *sum_error;
    int tokens_loaded;         /* the stored counts of the conversation were read (for ctx's
                                  encoding) */
    char *sum_notice;          /* a large summary request is on its way (session_notice) */
    long ans_unkept_tokens;    /* an answer not kept: its tokens (server's usage) and bytes, */
    size_t ans_unkept_bytes;   /* for session_tokens_save; 0 = unknown */
    long ans_tokens;           /* the kept answer's tokens when known at its end, else -1
                                  (session_answer_record): the turn or step takes them */
    struct context_budget budget;
    struct context_stream *ans_count; /* the streaming answer's tokens, counted incrementally */
    size_t ans_fed;
    size_t ans_fed_total;      /* answer bytes ever given to ans_count (a debug counter) */
    int usage_missing;         /* an answer of this session came without the server's usage */
    size_t ans_bytes;          /* answer bytes received when the text is not kept */
    int spent_estimated;       /* an answer's tokens in the spending were estimated (no usage,
                                  and too long to count: SESSION_COUNT_MAX) */
    int lean_resume;           /* session_opts.lean_resume */
    int leaving;               /* session_leave: the process exits next, no leak checker */
    int lean;                  /* the conversation holds only its newest turns (lean resume):
                                  the older ones are summarised or dropped by every plan */
    int64_t lean_first;        /* then: the id of its first message sent */
    size_t resumed_turns;      /* turns a resume read (a debug counter) */
    int64_t *off_seen;         /* rows of conv.off with nothing stored in the encoding: each
                                  gets its STORE_TOKENS_OFF_PATH entry (session_tokens_save) */
    size_t n_off_seen, cap_off_seen;
    /* Function calling (session_use_tools) */
    struct tools *tools;       /* borrowed; NULL: no tools offered */
    long tools_tokens;         /* session_tools_tokens' count, of tools_sig's definitions */
    int system_unsaved;        /* a resume's -s: saved with the next turn (session_resumed) */
    uint64_t tools_sig;
    struct tool_policy *policy;
    int tool_rounds;           /* rounds at most per turn */
    int round;                 /* tool rounds of the turn in flight */
    struct api_usage turn_usage; /* the usage of the turn's requests, every round summed */
    char *resume_note;         /* the last resume's role that could not be taken (why) */
    char *resume_passed;       /* -c passed over newer conversations without an answer */
    char *edited_from;         /* the arguments the model asked for, of the call the user
                                  edited before it ran (edited_call of the step asked) */
    size_t edited_call;
    size_t ask_step, ask_call; /* the step whose calls are being run, and the next call */
    struct tool_job *job;      /* the call running, NULL = none */
    int tools_cancel;          /* cancelled while tools ran: the turn ends */
    char *incomplete;          /* why the turn's answer could not be completed with its tools */

    size_t status_n;           /* history length when status_used was computed */
    const char *status_last;
    long status_used;
};

static void session_history(struct session *s);

struct session *session_open(struct conf *conf, char *key, const char **err)
{
    struct session *s = xcalloc(1, sizeof *s);
    s->conf = conf;
    s->key = key;
    s->keep_answer = 1;
    s->ans_tokens = -1;
    s->cache = SESSION_CACHE_OFF;
    s->q = queue_new();
    if (!s->q) {
        *err = "could not create the event queue";
        util_free_secret(key);
        free(s);
        return NULL;
    }
    /* The network thread starts with the first request (session_submit): the history, the
     * cache lookup and the prompt's save do not wait for libcurl's load (main.c started it on
     * a thread of its own), and an answer from the cache never needs it. */
    conv_init(&s->conv);
    conv_set_system(&s->conv, conf->system);
    session_history(s);
    return s;
}

void session_set_options(struct session *s, const struct session_opts *o)
{
    s->keep_answer = o->keep_answer;
    s->count_lazily = o->count_lazily;
    s->save_refused = o->save_refused;
    s->lean_resume = o->lean_resume;
}

enum session_cache session_set_cache(struct session *s, enum session_cache cache)
{
    enum session_cache old = s->cache;
    s->cache = s->store ? cache : SESSION_CACHE_OFF;
    return old;
}

int session_has_key(const struct session *s)
{
    return s->key || s->n_pool;
}

const char *session_store_error(const struct session *s)
{
    return s->store_error;
}

const struct net_result *session_last(const struct session *s)
{
    return s->last;
}

const char *session_answer(const struct session *s)
{
    return s->answer_turn ? s->answer_turn->answer : buf_str(&s->answer);
}

static size_t session_answer_limit(const struct session *s);

void *session_answer_lend(const struct session *s)
{
    /* only a block in its room for the whole answer (a fast sender's): it does not move */
    if (!s->keep_answer || s->answer_turn || !s->answer.data ||
        s->answer.cap <= session_answer_limit(s))
        return NULL;
    return s->answer.data;
}

const char *session_reasoning(const struct session *s)
{
    return buf_str(&s->reasoning);
}

size_t session_answer_len(const struct session *s)
{
    return s->answer_turn ? s->answer_turn->answer_len : s->answer.len;
}

size_t session_reasoning_len(const struct session *s)
{
    return s->reasoning.len;
}

const struct conf *session_profile(const struct session *s)
{
    return s->conf;
}

void session_use_store(struct session *s, struct store *st, int save, enum session_cache cache)
{
    s->store = st;
    s->save = st && save;
    s->cache = st ? cache : SESSION_CACHE_OFF;
}

static void session_store_failed(struct session *s)
{
    if (!s->store_error)
        s->store_error = xstrdup(store_error(s->store));
}

static void session_msgs_push(struct session *s, const char *role, const char *content,
                              size_t len, int64_t id, long *tokens)
{
    XGROW(s->msgs, s->n_msgs + 1, s->cap_msgs);
    s->msgs[s->n_msgs++] = (struct session_msg){.role = role, .content = content ? content : "",
                                                .len = len, .id = id, .tokens = tokens};
}

/* The tool rounds of turn t: the model's messages with calls and the results. */
static void session_msgs_steps(struct session *s, struct conv_turn *t)
{
    for (size_t k = 0; k < t->n_steps; k++) {
        struct conv_step *st = &t->steps[k];
        session_msgs_push(s, st->result ? "tool" : "assistant", st->sent ? st->sent : st->text,
                          st->sent ? st->sent_len : st->len, st->id, &st->tokens);
        s->msgs[s->n_msgs - 1].step = st;
    }
}

enum attach_provider session_attach_provider(const struct session *s)
{
    return attach_provider(s->conf->api, s->conf->base_url, s->conf->pdf);
}

/* The user message of turn t: its prompt, or with files the text they add (conv_turn_content)
 * and those sent as parts with their tokens. A PDF whose text cannot be had (pdftotext gone
 * since it was attached) is sent as a line saying so. */
static void session_msgs_user(struct session *s, struct conv_turn *t)
{
    if (!t->n_att) {
        session_msgs_push(s, "user", t->prompt, t->prompt_len, t->user_id, &t->prompt_tokens);
        return;
    }
    enum attach_provider p = session_attach_provider(s);
    size_t len;
    char *err;
    const char *content = conv_turn_content(t, attach_pdf_as_text(p), &len, &err);
    if (err) {
        struct buf b = BUF_INIT;
        buf_printf(&b, "[%s]\n\n", err);
        buf_append(&b, t->prompt, t->prompt_len);
        free(t->content);
        t->content_len = b.len;
        t->content = buf_take(&b);
        t->content_pdf_text = attach_pdf_as_text(p);
        content = t->content;
        len = t->content_len;
        free(err);
    }
    /* the count of the prompt alone is not the message's: a message with text files is
     * counted (and cached) as the text it is */
    session_msgs_push(s, "user", content ? content : t->prompt, len, t->user_id,
                      content ? NULL : &t->prompt_tokens);
    struct session_msg *m = &s->msgs[s->n_msgs - 1];
    m->att = t->att;
    m->n_att = t->n_att;
    for (size_t k = 0; k < t->n_att; k++)
        if (t->att[k].kind == ATTACH_IMAGE ||
            (t->att[k].kind == ATTACH_PDF && !attach_pdf_as_text(p)))
            m->extra += attach_tokens(&t->att[k], p);
}

void session_attach(struct session *s, struct attach_list *l)
{
    attach_list_move(&s->att_pending, l);
}

const struct attach *session_attached(const struct session *s, size_t *n)
{
    *n = s->att_pending.n;
    return s->att_pending.v;
}

int session_attach_check(const struct session *s, struct attach_list *l, char **err)
{
    enum attach_provider p = session_attach_provider(s);
    if (attach_check(l->v, l->n, p, err) < 0)
        return -1;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == ATTACH_PDF && attach_pdf_as_text(p) &&
            attach_pdf_text(&l->v[i], err) < 0)
            return -1;
    return 0;
}

/* The history the next request carries, from the live path: the system prompt, then the user
 * message and answer of each turn that is sent, then the prompt of a pending turn. It always
 * alternates user/assistant, whatever failed or was refused on the way. */
static void session_history(struct session *s)
{
    s->answer_turn = NULL;
    s->n_msgs = 0;
    if (s->conv.system)
        session_msgs_push(s, "system", s->conv.system, strlen(s->conv.system), 0, NULL);
    for (size_t i = 0; i < s->conv.n; i++) {
        struct conv_turn *t = &s->conv.turns[i];
        if (conv_turn_sent(t)) {
            session_msgs_user(s, t);
            session_msgs_steps(s, t);
            if (t->answer_len || !t->n_steps) /* a turn stopped in its tools has no answer */
                session_msgs_push(s, "assistant", t->answer, t->answer_len, t->answer_id,
                                  &t->answer_tokens);
        } else if (t->outcome == CONV_PENDING && i + 1 == s->conv.n) {
            session_msgs_user(s, t);
            session_msgs_steps(s, t);
        }
    }
    s->status_n = (size_t)-1;
}

static void session_context_load_summaries(struct session *s);
static void session_context_close(struct session *s);
static void session_tokens_forget(struct session *s);

static void session_forget_summaries(struct session *s)
{
    for (size_t i = 0; i < s->n_sums; i++)
        free(s->sums[i].text);
    s->n_sums = 0;
}

static int session_resume_lean(struct session *s, int64_t id, char **err);
static void session_context_setup(struct session *s);
static void session_context_params(struct session *s, struct context_params *p);

/* The conversation's system prompt as it is now (none: "") into its row, so that a resume,
 * show and export see the one the next turns are sent with. Until 2026-12 a change (the
 * chat's /system, -s on a resume) lived in memory only: the next resume sent the old one. */
static void session_save_system(struct session *s)
{
    if (s->store && s->save && s->conv_id > 0 &&
        store_conversation_update(s->store, s->conv_id, s->conv.system ? s->conv.system : "",
                                  NULL, NULL) != 0)
        session_store_failed(s);
}

/* The system prompt a resume replaces the saved one with: -s's, not the profile's or a
 * role's (those are for new conversations; a conversation keeps the one it was held with). */
static const char *session_resume_system(const struct session *s)
{
    return s->conf->system_given ? s->conf->system : NULL;
}

/* The resumed conversation's role and model, as its live session had them (until 2026-12 a
 * resume took the profile's model and no role, and kept the role's system prompt): the
 * role it was held with, unless --role names one now; then the model its newest prompt asked
 * for, unless -m, TOKTERM_MODEL, a named profile or --role gives one. What cannot be taken is
 * said in session_resume_note. */
static void session_resume_settings(struct session *s, int64_t id)
{
    struct conf *c = s->conf;
    char *role = NULL, *model = NULL, *host = NULL;
    free(s->resume_note);
    s->resume_note = NULL;
    if (!s->store || store_conversation_settings(s->store, id, &role, &model, &host) != 0)
        return;
    struct buf err = BUF_INIT;
    if (role && !*role && !c->role_given && c->role) {
        /* held with none ("": a conversation of schema 17; NULL, older, is not known): the
         * role in use goes, but for what the command line gave (a review found its settings
         * sent without its prompt) */
        if (role_drop_over(c, &err) < 0)
            s->resume_note = xasprintf("the conversation was held with no role, but %s could "
                                       "not be dropped: %s", c->role, buf_str(&err));
    } else if (role && *role && !c->role_given && strcmp(role, c->role ? c->role : "") != 0) {
        struct role r;
        if (role_load(&r, role, c->path, &err) < 0) {
            s->resume_note = xasprintf("the conversation was held with role %s: %s", role,
                                       buf_str(&err));
            role_free(&r);
        } else {
            const char *other = NULL;
            for (size_t i = 0; i < r.n; i++)
                if (strcmp(r.keys[i], "api") == 0 && strcmp(r.values[i], c->api) != 0)
                    other = "api";
            if (r.profile && (!c->profile || strcmp(r.profile, c->profile) != 0))
                other = "profile";
            if (other)
                s->resume_note = xasprintf("the conversation was held with role %s, whose "
                                           "%s differs from this one's: give --role %s to "
                                           "use it", role, other, role);
            else if (role_apply_over(c, &r, &err) < 0) /* -m, -s, -t... given now win */
                s->resume_note = xasprintf("the conversation was held with role %s: %s", role,
                                           buf_str(&err));
            role_free(&r);
        }
    }
    /* another server than the conversation's newest prompt went to (given now, or the
     * configuration's or --api's default URL), or --api given (another dialect than the
     * configuration's: which one the conversation was held with is not saved, and a gateway
     * serving several at one host would get the other provider's model name): the old model
     * name may mean nothing there (until 2026-12 -c --api anthropic sent a Gemini model to
     * /v1/messages; then only a given --base-url counted, and -c alone after -c --api
     * anthropic sent the Claude model to the configured OpenAI server) */
    char *now_host = conf_host(c);
    int moved_host = host && *host && now_host && strcmp(host, now_host) != 0;
    int moved = moved_host || conf_given(c, "api"); /* given only when it differs */
    if (model && *model && !c->model_given && strcmp(model, c->model) != 0) {
        if (moved && !s->resume_note && moved_host)
            s->resume_note = xasprintf("the conversation's model %s is not taken: it was held "
                                       "with %s, this run goes to %s (-m %s keeps it)", model,
                                       host, now_host, model);
        else if (moved && !s->resume_note)
            s->resume_note = xasprintf("the conversation's model %s is not taken: --api names "
                                       "another API than the configuration's (-m %s keeps it)",
                                       model, model);
        if (!moved) {
            free(c->model);
            c->model = xstrdup(model);
        }
    }
    free(now_host);
    /* --role given now is the conversation's from here: the next resume takes it */
    if (c->role_given && strcmp(role ? role : "", c->role ? c->role : "") != 0 && s->save &&
        store_conversation_set_role(s->store, id, c->role ? c->role : "") < 0)
        session_store_failed(s);
    buf_free(&err);
    free(role);
    free(model);
    free(host);
}

const char *session_resume_note(const struct session *s)
{
    return s->resume_note;
}

const char *session_resume_passed(const struct session *s)
{
    return s->resume_passed;
}

int64_t session_conv_id(const struct session *s)
{
    return s->conv_id;
}

int session_conv_moved(struct session *s)
{
    int64_t head = 0, mine = conv_parent_id(&s->conv, s->conv.n);
    /* a turn of this chat's that was not saved left the head on the one before it: mine */
    if (!s->store || !s->save || s->conv_id <= 0 || mine <= 0 ||
        store_conversation_head(s->store, s->conv_id, &head) != 0 || head <= 0)
        return 0;
    return head != mine;
}

void session_role_changed(struct session *s)
{
    if (s->save && s->store && s->conv_id > 0 &&
        store_conversation_set_role(s->store, s->conv_id,
                                    s->conf->role ? s->conf->role : "") < 0)
        session_store_failed(s);
}

/* Take c as the resumed conversation (lean: only its newest turns). */
static void session_resumed(struct session *s, struct conv *c, int lean)
{
    conv_free(&s->conv);
    s->conv = *c;
    s->conv_id = c->id;
    s->tokens_loaded = 0;
    s->lean = lean;
    s->resumed_turns = c->n;
    session_history(s);
    session_forget_summaries(s);
    session_context_load_summaries(s);
    /* -s given now replaced the saved prompt: saved when the next turn goes out (not before:
     * a resume refused, or one only opened in the chat's browser, changes nothing) */
    s->system_unsaved = s->conf->system_given;
}

int session_resume(struct session *s, int64_t id, char **err)
{
    int latest = id == 0;
    if (conv_resolve_id(s->store, &id, err) < 0)
        return -1;
    free(s->resume_passed);
    s->resume_passed = NULL;
    long n = 0;
    int64_t newest = 0;
    if (latest && store_conversation_newer(s->store, id, &n, &newest) == 0 && n > 0)
        /* a newer one failed (a key refused, a server down): the prompt given now goes to an
         * older conversation, which must not happen without a word */
        s->resume_passed = n == 1 ? xasprintf("conversation %lld, newer, has no answer",
                                              (long long)newest)
                                  : xasprintf("%ld newer conversations (the newest %lld) have "
                                              "no answer", n, (long long)newest);
    session_resume_settings(s, id); /* first: the model decides the encoding counts load in */
    /* a scripted resume builds thousands of rows, turns and a large body once, then exits:
     * from fresh memory in huge pages, reused as it is freed, not 4 KiB faults by the thousand */
    if (s->lean_resume)
        xmalloc_working_set();
    /* the newest turns read through a map of the file: a few hundred pages, once */
    store_mapped_reads(s->lean_resume ? s->store : NULL, 1);
    int rc = s->lean_resume ? session_resume_lean(s, id, err) : 1;
    store_mapped_reads(s->lean_resume ? s->store : NULL, 0);
    if (rc <= 0)
        return rc;
    /* A system prompt given now replaces the saved one. */
    struct conv c;
    conv_init(&c);
    if (conv_load(&c, s->store, id, session_resume_system(s), err) < 0) {
        conv_free(&c);
        return -1;
    }
    session_resumed(s, &c, 0);
    return 0;
}

int session_reload(struct session *s, char **err)
{
    struct conv c;
    conv_init(&c);
    int system_unsaved = s->system_unsaved; /* this session's, not a resume's */
    if (s->conv_id <= 0 || conv_load(&c, s->store, s->conv_id, s->conv.system, err) < 0) {
        conv_free(&c);
        return -1;
    }
    session_resumed(s, &c, 0);
    s->system_unsaved = system_unsaved;
    return 0;
}

char *session_resumed_elsewhere(struct session *s)
{
    char *host = NULL, *profile = NULL, *out = NULL;
    if (!s->store || s->conv_id <= 0 ||
        store_conversation_where(s->store, s->conv_id, &host, &profile) != 0 || !host)
        goto done;
    char *now = conf_host(s->conf);
    if (strcmp(now, host) != 0)
        out = profile && *profile ? xasprintf("%s, profile %s", host, profile) : xstrdup(host);
    free(now);
done:
    free(host);
    free(profile);
    return out;
}

void session_adopt(struct session *s, const struct conv *c)
{
    char *sys = s->conv.system ? xstrdup(s->conv.system) : NULL;
    conv_copy(&s->conv, c);
    if (!s->conv.system && sys)
        conv_set_system(&s->conv, sys);
    free(sys);
    s->conv_id = c->id;
    s->lean = 0;
    session_tokens_forget(s); /* counted in whatever encoding the other session used */
    session_history(s);
}

void session_new_conversation(struct session *s)
{
    conv_clear(&s->conv);
    s->conv_id = 0;
    s->lean = 0;
    s->tokens_loaded = 0;
    session_forget_summaries(s);
    session_history(s);
}

void session_set_system(struct session *s, const char *text)
{
    conv_set_system(&s->conv, text);
    session_history(s);
    session_save_system(s);
}

int session_fork_last(struct session *s)
{
    if (!s->conv.n || s->active)
        return -1;
    /* the new version keeps the turn's files: /retry and /edit send them again */
    const struct conv_turn *t = &s->conv.turns[s->conv.n - 1];
    if (t->n_att && !s->att_pending.n) {
        s->att_pending.v = xcalloc(t->n_att, sizeof *s->att_pending.v);
        for (size_t k = 0; k < t->n_att; k++)
            attach_copy(&s->att_pending.v[k], &t->att[k]);
        s->att_pending.n = s->att_pending.cap = t->n_att;
    }
    conv_fork(&s->conv, s->conv.n - 1);
    session_history(s);
    return 0;
}

const struct conv *session_conv(const struct session *s)
{
    return &s->conv;
}

void session_close(struct session *s)
{
    if (!s)
        return;
    if (s->job) {
        struct tool_result res = {0};
        tool_job_cancel(s->job);
        tool_job_finish(s->job, &res);
        tool_result_free(&res);
    }
    free(s->incomplete);
    free(s->cancel_why);
    free(s->resume_passed);
    free(s->resume_note);
    free(s->edited_from);
    /* The process exits next and every request has ended: the network thread is left parked
     * in its poll, with its queue, for the exit to end. Stopping it would wake it and wait
     * for it (0.2-0.5 ms of a one-shot on the project's VM, several ms at times). */
    int keep_net = s->leaving && net_idle(s->net);
    if (!keep_net)
        net_stop(s->net);
    if (getenv("TOKTERM_DEBUG_QUEUE")) {
        struct queue_stats qs = queue_stats(s->q);
        fprintf(stderr, "tokterm: debug: queue: held %zu bytes of text in %zu of storage at "
                "most, %zu in one event; %lu waits, %lu timed out\n", qs.held_max,
                qs.storage_max, qs.event_max, qs.waits, qs.timeouts);
    }
    if (!keep_net)
        queue_free(s->q, net_result_free);
    if (s->store && s->answer_id)
        store_message_flush(s->store, s->answer_id);
    if (!s->leaving) /* thousands of turns' texts a resume read: the kernel takes them back */
        conv_free(&s->conv);
    attach_list_free(&s->att_pending);
    free(s->parts);
    free(s->msgs);
    free(s->off_seen);
    util_free_secret(s->key);
    buf_free_lent(&s->answer);
    buf_free(&s->reasoning);
    net_result_free(s->last);
    free(s->store_error);
    session_context_close(s);
    conf_pool_free(s->pool_labels, s->pool_values, s->n_pool);
    util_free_secret(s->fallback_key);
    free(s);
}

void session_leave(struct session *s)
{
#if !defined(__SANITIZE_ADDRESS__)
    if (s && !getenv("TOKTERM_FULL_CLEANUP"))
        s->leaving = 1;
#endif
    session_close(s);
}

/* Answer from the cache: the stored text goes through the same queue as a stream would. */
static int session_replay(struct session *s, unsigned id)
{
    struct store_cache_entry e;
    memset(&e, 0, sizeof e);
    if (store_cache_get(s->store, s->cache_key, &e) != 0)
        return 0;
    double now = util_now();
    if (e.reasoning && *e.reasoning)
        queue_push_text(s->q, QEV_REASONING, id, e.reasoning, strlen(e.reasoning), now);
    if (e.content && *e.content)
        queue_push_text(s->q, QEV_CONTENT, id, e.content, strlen(e.content), now);
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = id;
    r->outcome = API_OK;
    r->status = 200;
    r->cached = 1;
    snprintf(r->model, sizeof r->model, "%s", e.model ? e.model : s->conf->model);
    snprintf(r->finish, sizeof r->finish, "%s", e.finish_reason ? e.finish_reason : "stop");
    if (e.usage.total_tokens >= 0 || e.usage.completion_tokens >= 0) {
        r->usage.present = 1;
        r->usage.prompt = e.usage.prompt_tokens > 0 ? e.usage.prompt_tokens : 0;
        r->usage.completion = e.usage.completion_tokens > 0 ? e.usage.completion_tokens : 0;
        r->usage.total = e.usage.total_tokens > 0 ? e.usage.total_tokens : 0;
    }
    r->t.ttft = 0;
    r->t.deltas = 1;
    r->content_bytes = e.content ? strlen(e.content) : 0;
    r->headers = xstrdup("");
    store_cache_entry_clear(&e);
    queue_push(s->q, QEV_END, id, 0, r);
    return 1;
}

static void session_cache_miss(struct session *s, unsigned id)
{
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = id;
    r->outcome = API_CACHE_MISS;
    r->t.ttft = -1;
    r->error = xstrdup("--cache-only: the cache has no answer for this exact request (model, "
                       "messages, system prompt and parameters)");
    r->headers = xstrdup("");
    queue_push(s->q, QEV_END, id, 0, r);
}

/* The first request starts from what the last run learnt about the quota. */
static void session_quota_seed(struct session *s, struct net_request *rq)
{
    if (!s->store || s->quota_loaded)
        return;
    request_quota_seed(rq, s->store, s->conf);
    s->quota_loaded = 1;
}

/* Keep the quota state between runs, so a new process starts informed. */
static void session_save_quota(struct session *s, const struct net_result *r)
{
    request_quota_save(s->store, s->conf, r->quota_line);
}

/* A request of body (taken) to the session's server with its key and key pool; the first one
 * starts from the quota state the last run saved. */
static struct net_request *session_request(struct session *s, const struct conf *c,
                                           const char *key, char *body)
{
    struct request_keys k = {key, s->pool_labels, s->pool_values, s->n_pool};
    struct net_request *rq = request_new(c, body, &k, c->max_tokens);
    session_quota_seed(s, rq);
    return rq;
}

/* The same request (ar) for the fallback profile or model, when one is configured; NULL else. */
static struct net_request *session_fallback_request(struct session *s,
                                                    const struct api_request *ar)
{
    struct request_keys k = {s->key, s->pool_labels, s->pool_values, s->n_pool};
    return request_fallback(s->conf, ar, &k, s->fallback_conf, s->fallback_key);
}

void session_use_pool(struct session *s, char **labels, char **values, int n)
{
    conf_pool_free(s->pool_labels, s->pool_values, s->n_pool);
    s->pool_labels = labels;
    s->pool_values = values;
    s->n_pool = n;
}

void session_use_fallback(struct session *s, struct conf *fallback, char *key)
{
    s->fallback_conf = fallback;
    util_free_secret(s->fallback_key);
    s->fallback_key = key;
}

static char *session_context_begin(struct session *s);
static int session_context_summarize(struct session *s);

static unsigned session_send_planned(struct session *s);

/* The saved conversation, made on the first turn that is saved. 0, or -1 (saving stops). */
static int session_save_conversation(struct session *s)
{
    const struct conf *c = s->conf;
    if (!s->save)
        return -1;
    if (s->conv_id)
        return 0;
    s->conv_id = store_conversation_new_role(s->store, NULL, s->conv.system, c->model,
                                             c->profile, c->role ? c->role : "");
    if (s->conv_id < 0) {
        session_store_failed(s);
        s->conv_id = 0;
        s->save = 0;
        return -1;
    }
    s->conv.id = s->conv_id;
    return 0;
}

/* 1 when history message m is turn t's user message. */
static int session_msg_is_turn(const struct session_msg *m, const struct conv_turn *t)
{
    return m->content == t->prompt || (t->content && m->content == t->content);
}

/* Save the user row of the last turn (once): before its request leaves, or when its answer
 * comes from the cache, or (refused, error set) when the chat shows a refusal. */
static void session_save_prompt(struct session *s, const char *error)
{
    const struct conf *c = s->conf;
    struct conv_turn *t = conv_last(&s->conv);
    if (!t || t->user_id > 0 || session_save_conversation(s) < 0)
        return;
    char *host = conf_host(c);
    /* the parent: the last saved turn before this one on the live path */
    struct store_msg_info info = {.model = c->model, .profile = c->profile, .host = host,
                                  .parent_id = conv_parent_id(&s->conv, s->conv.n - 1),
                                  .error = error};
    struct store_attach *att = t->n_att ? xcalloc(t->n_att, sizeof *att) : NULL;
    for (size_t k = 0; k < t->n_att; k++) {
        const struct attach *a = &t->att[k];
        att[k] = (struct store_attach){.seq = (int)k, .name = a->name,
                                       .kind = (char *)attach_kind_name(a->kind),
                                       .mime = a->mime, .data = a->data, .len = a->len,
                                       .width = a->width, .height = a->height,
                                       .pages = a->pages};
        memcpy(att[k].sha256, a->sha256, sizeof att[k].sha256);
    }
    info.att = att;
    info.n_att = t->n_att;
    int64_t uid = store_message_add(s->store, s->conv_id, "user", t->prompt, t->prompt_len,
                                    &info);
    free(att);
    free(host);
    if (uid < 0) {
        session_store_failed(s);
        return;
    }
    t->user_id = uid;
    if (s->n_msgs && session_msg_is_turn(&s->msgs[s->n_msgs - 1], t))
        s->msgs[s->n_msgs - 1].id = uid;
    if (s->system_unsaved) { /* a resume's -s, with the first turn sent under it */
        s->system_unsaved = 0;
        session_save_system(s);
    }
}

/* An exchange that ends at once, without the network: its end (outcome, why taken) is queued
 * under a local id, which is returned. */
static unsigned session_end_local(struct session *s, enum api_outcome outcome, char *why)
{
    unsigned id = SESSION_LOCAL_ID | ++s->next_local;
    net_result_push_local(s->q, id, outcome, why);
    return id;
}

/* Refuse to send the pending turn: it is settled as refused with why (taken), saved when the
 * chat saves refusals, and the exchange ends at once with outcome API_ERR_USAGE. */
static unsigned session_refuse(struct session *s, char *why)
{
    struct conv_turn *t = conv_last(&s->conv);
    if (t && t->outcome == CONV_PENDING) {
        if (s->save_refused)
            session_save_prompt(s, why);
        conv_settle(t, CONV_REFUSED, NULL, 0, why, NULL);
        session_history(s);
    }
    return s->active = session_end_local(s, API_ERR_USAGE, why);
}

/* Hand rq (taken) to the network thread, started by the first request; its id. When the thread
 * cannot start (libcurl missing), the exchange ends at once as a network error that says so:
 * the prompt saved before stays, the turn fails. While libcurl still loads, the request is
 * handed over at once (the loading thread becomes the network thread: net_start); a libcurl
 * that fails to load then ends the exchange the same way, from there. */
static unsigned session_submit(struct session *s, struct net_request *rq)
{
    const char *err = NULL;
    if (!s->net && !(s->net = net_start(s->q, 0, &err))) {
        net_request_free(rq);
        return session_end_local(s, API_ERR_NETWORK, xstrdup(err ? err : "no network"));
    }
    s->sent_model = s->ctx_model;
    return net_submit(s->net, rq);
}

void session_refuse_turn(struct session *s, const char *prompt, const char *why)
{
    conv_push(&s->conv, prompt, strlen(prompt));
    if (s->save_refused)
        session_save_prompt(s, why);
    conv_settle(conv_last(&s->conv), CONV_REFUSED, NULL, 0, why, NULL);
    session_history(s);
}

unsigned session_send(struct session *s, const char *prompt)
{
    struct conv_turn *nt = conv_push(&s->conv, prompt, strlen(prompt));
    s->round = 0;
    memset(&s->turn_usage, 0, sizeof s->turn_usage);
    s->tools_cancel = 0;
    free(s->incomplete);
    s->incomplete = NULL;
    if (s->att_pending.n) {
        conv_attach(nt, &s->att_pending);
        char *why = NULL;
        struct attach_list l = {nt->att, nt->n_att, nt->n_att};
        if (session_attach_check(s, &l, &why) < 0) {
            session_history(s);
            return session_refuse(s, why);
        }
    }
    session_history(s);
    /* Fit the history into the window and check the budget before anything is saved or sent. */
    char *why = session_context_begin(s);
    if (why)
        return session_refuse(s, why);
    /* Step 3 of the plan may first need a summary of the oldest turns (a request of its own;
     * session_dispatch sends the answer's request when it is back). The prompt is committed
     * before any request leaves. */
    if (s->plan.need_summary && s->cache != SESSION_CACHE_ONLY)
        session_save_prompt(s, NULL);
    if (session_context_summarize(s))
        return s->active;
    return session_send_planned(s);
}

/* Begin saving the answer of the last turn (its prompt first). cached: the answer is replayed
 * from the response cache (saved with cached = 1: stats counts it as a hit, and leaves it out of
 * the time to first token and tokens/s). */
static void session_save_begin(struct session *s, int cached)
{
    const struct conf *c = s->conf;
    struct conv_turn *t = conv_last(&s->conv);
    int64_t had_user = t ? t->user_id : 0, had_conv = s->conv_id;
    /* the conversation, the prompt and the answer's row: one commit (store_batch_begin) */
    int batch = s->save && s->store && store_batch_begin(s->store) == 0;
    if (s->save && s->store && !batch) {
        /* the write lock stayed held past STORE_BUSY_DEADLINE (or the write cannot start):
         * this turn is not saved. Each write on its own waited that long again, so the
         * request left after 60 s where the note said "a write gives up after 30 s". */
        session_store_failed(s);
        return;
    }
    session_save_prompt(s, NULL);
    if (s->save && t && t->user_id > 0) {
        char *host = conf_host(c);
        struct store_msg_info info = {.model = c->model, .profile = c->profile, .host = host,
                                      .parent_id = t->user_id, .cached = cached};
        s->answer_id = store_message_begin(s->store, s->conv_id, &info);
        free(host);
        if (s->answer_id < 0) {
            session_store_failed(s);
            s->answer_id = 0;
        }
    }
    if (batch && store_batch_end(s->store) != 0) { /* none of it was saved */
        session_store_failed(s);
        if (s->answer_id) /* not found: its stream is dropped */
            (void)store_message_finish(s->store, s->answer_id, STORE_ERROR, NULL, NULL, NULL,
                                       NULL);
        s->answer_id = 0;
        if (t)
            t->user_id = had_user;
        if (s->n_msgs && t && session_msg_is_turn(&s->msgs[s->n_msgs - 1], t))
            s->msgs[s->n_msgs - 1].id = had_user;
        s->conv_id = s->conv.id = had_conv;
    }
}

/* The body of the planned messages (s->plan) in the profile's dialect, *ar what it was made
 * from; *mp the messages ar borrows (caller frees). */
static char *session_planned_body(struct session *s, struct api_request *ar,
                                  struct api_message **mp)
{

    struct api_message *m = xcalloc(s->plan.n_items + 1, sizeof *m);
    /* the files of the history messages each item stands for (a summary sends none) */
    size_t n_parts = 0;
    for (size_t i = 0; i < s->n_msgs; i++)
        n_parts += s->msgs[i].n_att;
    struct api_part *parts = xcalloc(n_parts + 1, sizeof *parts), *next = parts;
    int pdf_text = attach_pdf_as_text(session_attach_provider(s));
    for (size_t i = 0; i < s->plan.n_items; i++) {
        struct context_item *it = &s->plan.items[i];
        size_t clean_len;
        char *clean = utf8_for_wire(it->content, it->len, &clean_len);
        if (clean) { /* the plan owns the copy sent (the history keeps the text as it came) */
            free(it->owned);
            it->owned = clean;
            it->content = clean;
            it->len = clean_len;
        }
        m[i].role = it->role;
        m[i].content = it->content;
        const struct conv_step *st = it->first == it->last && it->first < s->n_msgs
                                         ? s->msgs[it->first].step
                                         : NULL;
        if (st && st->result) {
            m[i].tool_call_id = st->call_id ? st->call_id : "";
            m[i].tool_name = st->wire ? st->wire : "";
            m[i].tool_error = st->is_error;
        } else if (st) {
            m[i].calls = st->calls;
            m[i].n_calls = st->n_calls;
            m[i].thinking_json = st->thinking;
        }
        if (it->flags & CONTEXT_F_SUMMARY)
            continue;
        m[i].parts = next;
        for (size_t h = it->first; h <= it->last && h < s->n_msgs; h++)
            next += attach_parts(s->msgs[h].att, s->msgs[h].n_att, pdf_text, next);
        m[i].n_parts = (size_t)(next - m[i].parts);
        if (!m[i].n_parts)
            m[i].parts = NULL;
    }
    request_api(ar, s->conf, m, s->plan.n_items);
    if (s->tools)
        tools_api(s->tools, NULL, 0, &ar->tools, &ar->n_tools);
    *mp = m;
    char *body = request_body(s->conf, ar);
    free(s->parts);
    s->parts = parts; /* ar borrows them until the next body (the fallback's) */
    return body;
}

static const char *session_tokens_encoding(const struct session *s, char buf[32]);

/* Compile the statements that saving the answer will run (store_warm_answer). */
static void session_warm(struct session *s)
{
    char enc[32];
    store_warm_answer(s->store, s->cache_key_set, session_tokens_encoding(s, enc) != NULL);
}

/* Send the planned messages (s->plan): from the cache, or to the network thread. */
static unsigned session_send_planned(struct session *s)
{
    const struct conf *c = s->conf;
    struct api_message *m;
    struct api_request ar;
    char *body = session_planned_body(s, &ar, &m);
    buf_reset_lent(&s->answer);
    s->answer_turn = NULL;
    buf_reset(&s->reasoning);
    s->ans_fed = 0;
    s->ans_bytes = 0;
    if (s->ans_count)
        context_stream_reset(s->ans_count);

    /* The cache key covers everything that changes the answer and nothing secret: the server,
     * and the request body (model, every message with the system prompt, sampling). */
    s->cache_key_set = 0;
    if (s->cache != SESSION_CACHE_OFF) {
        request_cache_key(c, NULL, body, s->cache_key);
        s->cache_key_set = 1;
    }
    /* Nothing is saved for a request that is never made (a --cache-only miss). */
    if (s->cache == SESSION_CACHE_ON || s->cache == SESSION_CACHE_ONLY) {
        unsigned id = SESSION_LOCAL_ID | ++s->next_local;
        if (session_replay(s, id)) {
            session_save_begin(s, 1);
            free(body);
            free(m);
            s->cache_key_set = 0; /* nothing new to cache */
            return s->active = id;
        }
        if (s->cache == SESSION_CACHE_ONLY) {
            free(body);
            free(m);
            s->cache_key_set = 0;
            session_cache_miss(s, id);
            return s->active = id;
        }
    }
    session_save_begin(s, 0);
    /* After the prompt's commit the store knows what its WAL holds (a one-shot knows nothing
     * before it): a large one is copied while the request is on the wire. */
    if (s->store)
        store_checkpoint_async(s->store);
    struct net_request *rq = session_request(s, c, s->key, body);
    rq->fallback = session_fallback_request(s, &ar);
    free(m);
    s->active = session_submit(s, rq);
    /* The SQL of the answer's end is compiled before it is due, while the request is on the
     * wire. Not while libcurl still loads (a one-shot): this thread sleeps through the load
     * instead, which is then faster (net_library_settle); the request cannot leave before it
     * anyway. A one-shot in the default mode: the request left 0.3 ms sooner (41 runs), and
     * the run took 1.26x curl's time against 1.32x (81 rounds). */
    if (s->answer_id > 0) {
        net_library_settle(SESSION_SETTLE_MS);
        session_warm(s);
    }
    return s->active;
}

int session_fd(const struct session *s)
{
    return queue_fd(s->q);
}

int session_timeout_ms(const struct session *s)
{
    if (!s->store)
        return -1;
    double due = store_flush_deadline(s->store);
    if (due <= 0)
        return -1;
    double left = due - util_now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

void session_tick(struct session *s)
{
    if (s->store && store_flush_deadline(s->store) > 0 && session_timeout_ms(s) == 0 &&
        store_message_flush_due(s->store) < 0)
        session_store_failed(s);
}

/* net_result_redact of r for every secret this session holds: an error may come from any key
 * of the pool or from the fallback's server (defence in depth for messages that echo what they
 * were sent) */
static void session_redact_result(const struct session *s, struct net_result *r)
{
    net_result_redact(r, s->key);
    for (int i = 0; i < s->n_pool; i++)
        net_result_redact(r, s->pool_values[i]);
    net_result_redact(r, s->fallback_key);
}

/* The same for a message made of what the server sent (a tool call's name, say). */
static void session_redact_text(const struct session *s, char *text)
{
    util_redact(text, s->key);
    for (int i = 0; i < s->n_pool; i++)
        util_redact(text, s->pool_values[i]);
    util_redact(text, s->fallback_key);
}

static enum store_status session_store_status(enum api_outcome o)
{
    switch (o) {
    case API_OK:
    case API_CUT:
        return STORE_COMPLETE;
    case API_CANCELLED:
        return STORE_CANCELLED;
    case API_ERR_TRUNCATED:
    case API_LIMIT: /* stopped by our own limit: the text so far is kept, like a break */
        return STORE_TRUNCATED;
    default:
        return STORE_ERROR;
    }
}

/* Record the end of an answer in the store, and fill the cache with a complete one. */
static void session_save_end(struct session *s, const struct net_result *r)
{
    char *host = conf_host(s->conf);
    otlp_result(r, s->conf->api, s->conf->model, host, r->attempts > 1 ? r->attempts - 1 : 0);
    free(host);
    if (s->answer_id) {
        struct store_usage u = {-1, -1, -1, r->model};
        if (r->usage.present)
            u = (struct store_usage){r->usage.prompt, r->usage.completion, r->usage.total,
                                     r->model};
        struct store_timings t = {r->t.ttft,    r->t.total,   r->t.tokens_per_s,
                                  r->t.dns,     r->t.connect, r->t.tls,
                                  r->t.deltas > 1 ? r->t.gap_p50 : -1,
                                  r->attempts > 0 ? r->attempts - 1 : 0, r->rate_limited};
        if (r->cached)
            t = (struct store_timings){-1, -1, -1, -1, -1, -1, -1, -1, -1};
        /* The answer kept here is written as it is: the store gives back its own copy first
         * (a long answer is then in memory twice while it is saved, not three times). */
        struct store_whole w = {s->answer.data, s->answer.len, s->reasoning.data,
                                s->reasoning.len};
        if (store_message_finish_whole(s->store, s->answer_id, s->keep_answer ? &w : NULL,
                                       session_store_status(r->outcome),
                                       r->finish[0] ? r->finish : NULL, &u, &t, r->error) != 0)
            session_store_failed(s);
    }
    /* Only a complete answer with text is cached: never an empty or failed one, nor the
     * fallback's (another model or server: not the answer the key stands for) */
    if (r->outcome == API_OK && !r->cached && s->cache_key_set && !r->n_calls &&
        !r->used_fallback &&
        r->content_bytes + r->reasoning_bytes > 0) {
        if (s->answer_id) {
            (void)store_cache_put_message(s->store, s->cache_key, s->answer_id,
                                          (int64_t)(r->content_bytes + r->reasoning_bytes));
        } else if (s->keep_answer) {
            struct store_usage u = {r->usage.prompt, r->usage.completion, r->usage.total, NULL};
            (void)store_cache_put(s->store, s->cache_key, STORE_COMPLETE, buf_str(&s->answer),
                                  s->reasoning.len ? buf_str(&s->reasoning) : NULL, r->model,
                                  r->finish[0] ? r->finish : NULL, r->usage.present ? &u : NULL);
        }
    }
    s->answer_id = 0;
    s->cache_key_set = 0;
}

static int session_summary_event(struct session *s, struct queue_event *e,
                                 const struct session_sink *sink);
static void session_context_end(struct session *s, const struct net_result *r);
static void session_tokens_save(struct session *s);

/* What an exchange's result makes of its turn. */
static enum conv_outcome session_outcome(const struct net_result *r, size_t answer_len)
{
    switch (r->outcome) {
    case API_OK:
        return CONV_ANSWERED;
    case API_CUT:
        return CONV_CUT;
    case API_CANCELLED:
    case API_ERR_TRUNCATED:
        return CONV_INTERRUPTED;
    case API_ERR_USAGE:
        return CONV_REFUSED;
    default: /* HTTP, network, a --cache-only miss, our own limits: the text that arrived is
                kept */
        return answer_len ? CONV_INTERRUPTED : CONV_FAILED;
    }
}

/* Settle the pending turn with the exchange's result (answer row aid): the live path, and so
 * the next request, takes the answer only when there is one. */
static void session_settle(struct session *s, const struct net_result *r, int64_t aid)
{
    struct conv_turn *t = conv_last(&s->conv);
    if (!t || t->outcome != CONV_PENDING)
        return;
    size_t n = s->keep_answer ? s->answer.len : 0;
    enum conv_outcome o = session_outcome(r, n);
    conv_settle(t, o, !n && (o == CONV_ANSWERED || o == CONV_CUT) ? "" : NULL, 0, r->error,
                r->model[0] ? r->model : NULL);
    if (n) { /* the turn takes the text kept here: no second copy of a long answer */
        t->answer = buf_take(&s->answer);
        t->answer_len = n;
        if (s->ans_tokens > 0) /* its count, known at its end: not looked up by hash again */
            t->answer_tokens = s->ans_tokens;
    }
    s->ans_tokens = -1;
    if (aid > 0)
        t->answer_id = aid;
    else if (conv_turn_sent(t))
        t->answer_id = -++s->conv.serial;
    session_history(s);
    s->answer_turn = n ? t : NULL;
}

#define SESSION_ANSWER_GROW ((size_t)1 << 20)
#define SESSION_FAST_BATCH ((size_t)16 << 10) /* a fast sender's batch (NET_HOLD_MIN) */
#define SESSION_FAST_GROW ((size_t)32 << 10)

/* Keep text of the answer (or of its reasoning) in b. Once it is long, b takes room for the
 * rest up to max_answer_mb at once: only what is written is resident (in huge pages), and no
 * doubling copies the whole answer again (with the old block, twice the answer for a moment).
 * That room is address space taken ahead of need: when it cannot be had (RLIMIT_AS, a strict
 * overcommit), the answer grows as a short one does instead of ending the run. (Until
 * 2026-12 it asked for the limit plus one byte, which buf_reserve made 256 MiB, and a refusal
 * aborted the run.)
 * Text coming in batches of a fast sender takes that room from 32 KiB on, so at its first
 * batch of 32 KiB or more: the doubling up to 1 MiB faulted in 256 small pages and copied the
 * answer once more, and up to 128 KiB (where it stopped until 2026-12) still 48 pages and two
 * copies, ~0.6 ms of the chat's first frame on the project's VM (a huge page: 0.2-0.4 ms). */
static size_t session_answer_limit(const struct session *s)
{
    return (size_t)(s->conf->max_answer_mb > 0 ? s->conf->max_answer_mb : 64) << 20;
}

static void session_keep(struct session *s, struct buf *b, const char *text, size_t n)
{
    size_t limit = session_answer_limit(s);
    size_t grow = n >= SESSION_FAST_BATCH ? SESSION_FAST_GROW : SESSION_ANSWER_GROW;
    if (b->len + n >= b->cap && buf_lent(b->data)) {
        /* past its room (the limit), and the chat's view reads the block: the block stays
         * where it is for the view, the text goes on in a new one */
        struct buf moved = BUF_INIT;
        buf_append(&moved, b->data, b->len);
        buf_free_lent(b);
        *b = moved;
    }
    if (b->len + n >= b->cap && b->len + n >= grow && b->len + n < limit)
        (void)buf_try_room_for(b, limit + 1, XMALLOC_GRADUAL); /* the limit's bytes and the
                                                                   NUL; refused: it grows */
    buf_append(b, text, n);
}

/* A 400 naming a member the model refuses (max_tokens, temperature: request_learn): learnt,
 * remembered (not with --incognito), and the same turn sent again at once without it into the
 * same answer row. 1 when it was sent again (r is freed), else 0. */
static int session_relearn(struct session *s, struct net_result *r,
                           const struct session_sink *sink)
{
    if (s->cancel_asked == r->req || r->used_fallback || r->content_bytes + r->reasoning_bytes ||
        !request_learn(s->conf, r, s->store != NULL))
        return 0;
    char *note = request_learnt_note(s->conf, r);
    if (sink->wait)
        sink->wait(sink->ud, 1, note, 0);
    free(note);
    net_result_free(r);
    struct api_message *m;
    struct api_request ar;
    char *body = session_planned_body(s, &ar, &m);
    if (s->cache_key_set)
        request_cache_key(s->conf, NULL, body, s->cache_key);
    struct net_request *rq = session_request(s, s->conf, s->key, body);
    rq->fallback = session_fallback_request(s, &ar);
    free(m);
    s->active = session_submit(s, rq);
    return 1;
}

/* ---- function calling: the rounds of a turn ---- */

#define SESSION_TOOL_ROUNDS 10
#define SESSION_TOOL_STORE_MAX ((size_t)16 << 20) /* a result's bytes kept in the store */

void session_use_tools(struct session *s, struct tools *t, struct tool_policy *p, int rounds)
{
    s->tools = t && tools_count(t) ? t : NULL;
    if (s->tools)
        s->keep_answer = 1; /* a round's text goes back with its calls */
    s->policy = p;
    s->tool_rounds = rounds > 0 ? rounds : SESSION_TOOL_ROUNDS;
}

const struct tool_call *session_tool_running(const struct session *s, int *round,
                                             double *elapsed)
{
    if (!s->job)
        return NULL;
    const struct conv_turn *t = s->conv.n ? &s->conv.turns[s->conv.n - 1] : NULL;
    if (!t || s->ask_step >= t->n_steps || s->ask_call >= t->steps[s->ask_step].n_calls)
        return NULL;
    *round = s->round;
    *elapsed = tool_job_elapsed(s->job);
    return &t->steps[s->ask_step].calls[s->ask_call];
}

const char *session_tools_incomplete(const struct session *s)
{
    return s->incomplete;
}

static void session_incomplete(struct session *s, const char *why)
{
    if (!s->incomplete)
        s->incomplete = xstrdup(why);
}

/* A row of the turn's tool rounds: saved under its user row as it happens. */
static int64_t session_save_step(struct session *s, const struct conv_turn *t,
                                 const struct conv_step *st, const char *role)
{
    if (!s->save || !s->store || t->user_id <= 0)
        return 0;
    char *json = conv_step_json(st);
    const struct conf *c = s->conf;
    struct store_msg_info info = {.model = c->model, .profile = c->profile,
                                  .parent_id = t->user_id, .tool = json};
    size_t n = st->len < SESSION_TOOL_STORE_MAX ? st->len : SESSION_TOOL_STORE_MAX;
    int64_t id = store_message_add(s->store, s->conv_id, role, st->text ? st->text : "", n,
                                   &info);
    free(json);
    if (id < 0) {
        session_store_failed(s);
        return 0;
    }
    return id;
}

/* The calls of step st into its saved row, as they are now: an edit made at the approval
 * (the chat's `e`) is what ran and what the next requests send, so the row has it too (until
 * 2026-12 it kept the model's arguments: a resume showed and sent a call to /etc/shadow that
 * the user had pointed elsewhere before it ran). */
static void session_save_calls(struct session *s, const struct conv_step *st)
{
    if (!s->save || !s->store || st->id <= 0)
        return;
    char *json = conv_step_json(st);
    if (store_message_set_tool(s->store, st->id, json) != 0)
        session_store_failed(s);
    free(json);
}

/* Record call's result as the next step of the last turn, save it, tell the sink. */
static void session_tool_result(struct session *s, const struct session_sink *sink,
                                size_t call_i, struct tool_result *res, double seconds)
{
    struct conv_turn *t = conv_last(&s->conv);
    struct conv_step *st = conv_step_add(t);
    const struct tool_call *c = &t->steps[s->ask_step].calls[call_i];
    st->result = 1;
    st->is_error = res->is_error;
    st->call_id = xstrdup(c->id ? c->id : "");
    st->name = c->name ? xstrdup(c->name) : NULL;
    st->wire = xstrdup(c->wire ? c->wire : "");
    if (s->edited_from && s->edited_call == call_i) {
        /* the history carries the call as it ran; the model is told it was not its own
         * (until 2026-12 it was not: the model, the transcript and show had the edited call
         * as the one it asked for) */
        struct buf b = BUF_INIT;
        size_t len = strlen(s->edited_from), cut = utf8_cut(s->edited_from, len, 1024);
        buf_printf(&b, "[the user edited this call's arguments before it ran; the model had "
                       "asked for: %.*s%s]\n", (int)cut, s->edited_from,
                   cut < len ? "\xE2\x80\xA6 (cut)" : ""); /* bounded: the result comes first */
        buf_append(&b, res->content.data ? res->content.data : "", res->content.len);
        buf_free(&res->content);
        res->content = b;
    }
    free(s->edited_from);
    s->edited_from = NULL;
    if (sink->tool_result)
        sink->tool_result(sink->ud, c, res, seconds);
    st->len = res->content.len;
    st->text = res->content.len ? buf_take(&res->content) : xstrdup("");
    conv_step_cut(st); /* what the model gets; the row keeps it whole */
    st->id = session_save_step(s, t, st, "tool");
    tool_result_free(res);
}

/* The turn ends while its tools run (cancelled, the round limit, a refusal of the budget):
 * its outcome o with why (taken); ends the exchange. */
static int session_tools_end(struct session *s, enum api_outcome o, char *why,
                             const struct session_sink *sink)
{
    struct net_result *r = xcalloc(1, sizeof *r);
    r->req = s->active;
    r->outcome = o;
    r->error = why;
    r->t.ttft = -1;
    r->headers = xstrdup("");
    if (s->last) {
        memcpy(r->model, s->last->model, sizeof r->model);
        r->usage = s->last->usage;
    }
    net_result_free(s->last);
    s->last = r;
    buf_reset_lent(&s->answer);
    session_settle(s, r, 0);
    session_tokens_save(s);
    s->active = 0;
    if (sink->end)
        sink->end(sink->ud, r);
    return 1;
}

static void session_job_done(void *ud)
{
    struct session *s = ud;
    queue_push(s->q, QEV_TOOL, s->active, 0, NULL);
}

/* Run the calls of the current step that are left, one at a time: check, ask, start. When a
 * call runs, returns 0 and waits for its QEV_TOOL; when none is left, the next round leaves
 * (0), or the turn ends (1). */
static int session_tool_next(struct session *s, const struct session_sink *sink)
{
    struct conv_turn *t = conv_last(&s->conv);
    while (s->ask_call < t->steps[s->ask_step].n_calls) {
        size_t i = s->ask_call++;
        struct tool_call *c = &t->steps[s->ask_step].calls[i];
        struct tool_result res = {0};
        if (s->tools_cancel) {
            tool_result_error(&res, "cancelled by the user");
            session_tool_result(s, sink, i, &res, 0);
            continue;
        }
        if (s->round > s->tool_rounds) {
            tool_result_error(&res, "not run: the limit of %d tool rounds per turn was reached",
                              s->tool_rounds);
            session_tool_result(s, sink, i, &res, 0);
            continue;
        }
        if (tools_prepare(s->tools, c, &res) < 0) {
            if (sink->tool_call)
                sink->tool_call(sink->ud, c, TOOL_REFUSE);
            session_tool_result(s, sink, i, &res, 0);
            continue;
        }
        enum tool_verdict v = s->policy ? tool_policy_verdict(s->policy, c->name) : TOOL_ASK;
        int asked = v == TOOL_ASK && sink->tool_approve;
        if (v == TOOL_ASK) {
            char *was = c->args ? xstrndup(c->args, c->args_len) : NULL;
            size_t was_len = c->args ? c->args_len : 0;
            v = sink->tool_approve ? sink->tool_approve(sink->ud, c) : TOOL_REFUSE;
            if ((c->args ? c->args_len : 0) != was_len ||
                (was_len && memcmp(was, c->args, was_len) != 0)) {
                session_save_calls(s, &t->steps[s->ask_step]); /* edited before it ran */
                free(s->edited_from);
                s->edited_from = was ? was : xstrdup("{}");
                s->edited_call = i;
                was = NULL;
            }
            free(was);
        }
        if (v == TOOL_RUN && tools_prepare(s->tools, c, &res) < 0) /* edited: check again */
            v = TOOL_REFUSE;
        if (sink->tool_call)
            sink->tool_call(sink->ud, c, v);
        if (v != TOOL_RUN) {
            if (!res.is_error) {
                tool_result_error(&res, TOOL_REFUSED_TEXT);
                /* the chat's user said no: --allow-tool has nothing to do with it */
                char *why = asked ? xasprintf("you refused the tool call %s", c->name)
                                  : xasprintf("the tool call %s was refused (not allowed: see "
                                              "--allow-tool)", c->name);
                session_incomplete(s, why);
                free(why);
            }
            session_tool_result(s, sink, i, &res, 0);
            continue;
        }
        s->ask_call = i; /* running: it moves on when the result is in */
        s->job = tool_job_start(s->tools, c, 0, NULL, session_job_done, s);
        return 0;
    }
    if (s->tools_cancel)
        return session_tools_end(s, API_CANCELLED, xstrdup("cancelled"), sink);
    if (s->round > s->tool_rounds) {
        char *why = xasprintf("stopped after %d tool rounds (tool_rounds): the model asked for "
                              "more", s->tool_rounds);
        session_incomplete(s, why);
        return session_tools_end(s, API_CUT, why, sink);
    }
    /* the next round: the history with the results, fitted again */
    session_history(s);
    char *why = session_context_begin(s);
    if (why)
        return session_tools_end(s, API_ERR_USAGE, why, sink);
    session_send_planned(s);
    return 0;
}

/* An answer that asked for tools (r, taken on 1): its text and calls become a step of the
 * turn, saved, and its calls run. 0 when r is not such an answer; 1 when the turn goes on, 2
 * when it ended. */
/* One request's usage into the turn's sum (session_turn_usage). */
static void session_usage_add(struct session *s, const struct net_result *r)
{
    const struct api_usage *u = &r->usage;
    if (!u->present)
        return;
    struct api_usage *t = &s->turn_usage;
    t->prompt += u->prompt;
    t->completion += u->completion;
    t->total += u->total;
    t->reasoning += u->reasoning;
    t->cached += u->cached;
    t->present = 1;
}

const struct api_usage *session_turn_usage(const struct session *s)
{
    return &s->turn_usage;
}

static int session_tools_round(struct session *s, struct net_result *r,
                               const struct session_sink *sink)
{
    struct conv_turn *t = conv_last(&s->conv);
    if (!s->tools || r->outcome != API_OK || !r->n_calls || s->cancel_asked == r->req || !t ||
        t->outcome != CONV_PENDING)
        return 0;
    int64_t aid = s->answer_id;
    int batch = s->save && s->store && store_batch_begin(s->store) == 0;
    session_save_end(s, r);
    session_save_quota(s, r);
    session_context_end(s, r);
    session_usage_add(s, r);
    s->ask_step = t->n_steps;
    s->ask_call = 0;
    struct conv_step *st = conv_step_add(t);
    st->len = s->answer.len;
    st->text = s->answer.len ? buf_take(&s->answer) : xstrdup("");
    st->tokens = s->ans_tokens > 0 ? s->ans_tokens : 0; /* for the plans and the store */
    s->ans_tokens = -1;
    st->calls = r->calls;
    st->n_calls = r->n_calls;
    st->thinking = r->thinking_json;
    r->calls = NULL;
    r->n_calls = 0;
    r->thinking_json = NULL;
    for (size_t i = 0; i < st->n_calls; i++) {
        struct tool_call *c = &st->calls[i];
        if (!c->id || !*c->id) { /* Gemini names none: results are paired by these */
            free(c->id);
            c->id = xasprintf("call_%d_%zu", s->round + 1, i + 1);
        }
        const struct tools_entry *e = tools_find_wire(s->tools, c->wire);
        if (e && !c->name)
            c->name = xstrdup(e->name);
        size_t n = 0; /* arguments with invalid UTF-8 or a NUL: as U+FFFD, here and sent back */
        char *clean = c->args ? utf8_for_wire(c->args, c->args_len, &n) : NULL;
        if (clean) {
            free(c->args);
            c->args = clean;
            c->args_len = n;
        }
    }
    st->id = aid > 0 ? aid : 0;
    if (aid > 0)
        session_save_calls(s, st);
    if (batch && store_batch_end(s->store) != 0)
        session_store_failed(s);
    net_result_free(s->last);
    s->last = r;
    st->reasoning = s->reasoning.len ? buf_take(&s->reasoning) : NULL; /* --json's round */
    buf_reset(&s->reasoning);
    s->round++;
    s->active = SESSION_LOCAL_ID | ++s->next_local;
    return session_tool_next(s, sink) ? 2 : 1;
}

/* QEV_TOOL: the running call is over; its result goes in, the next call or round follows. */
static int session_tool_event(struct session *s, const struct session_sink *sink)
{
    if (!s->job)
        return 0;
    struct tool_result res = {0};
    double secs = tool_job_elapsed(s->job);
    tool_job_finish(s->job, &res);
    s->job = NULL;
    session_tool_result(s, sink, s->ask_call++, &res, secs);
    return session_tool_next(s, sink);
}

int session_dispatch(struct session *s, const struct session_sink *sink)
{
    int ended = 0;
    struct queue_event *e = queue_take(s->q);
    while (e) {
        struct queue_event *next = e->next;
        int tr;
        if (s->sum_req && e->req == s->sum_req) {
            /* the summary request of step 3: its text is not the answer */
            ended |= session_summary_event(s, e, sink);
        } else if (e->type == QEV_TOOL) {
            if (e->req == s->active)
                ended |= session_tool_event(s, sink);
        } else if (e->req != s->active) {
            /* a late event of an exchange that is already over */
            if (e->type == QEV_END)
                net_result_free(e->ptr);
        } else if (e->type == QEV_CONTENT || e->type == QEV_REASONING) {
            int r = e->type == QEV_REASONING;
            /* a kept text reaches the sink in the session's copy: the chat's view may read it
             * there (session_answer_lend) */
            const char *text = e->text.data;
            if (s->keep_answer) {
                struct buf *b = r ? &s->reasoning : &s->answer;
                session_keep(s, b, e->text.data, e->text.len);
                text = b->data + b->len - e->text.len;
            } else if (!r)
                s->ans_bytes += e->text.len; /* not kept: the server's usage counts it */
            if (s->answer_id) {
                int rc = r ? store_message_append_reasoning(s->store, s->answer_id, e->text.data,
                                                            e->text.len)
                           : store_message_append(s->store, s->answer_id, e->text.data,
                                                  e->text.len);
                if (rc < 0)
                    session_store_failed(s);
            }
            if (sink->text)
                sink->text(sink->ud, r, text, e->text.len, e->t_first, e->t_last);
        } else if (e->type == QEV_HEADERS) {
            if (sink->headers)
                sink->headers(sink->ud, (long)e->num);
        } else if (e->type == QEV_QUOTA) {
            if (sink->quota)
                sink->quota(sink->ud, buf_str(&e->text));
        } else if (e->type == QEV_WARN) {
            if (sink->warn) /* the shared state lost or back: the chat's hint line */
                sink->warn(sink->ud, buf_str(&e->text));
            else if (sink->wait) /* scripted mode: stderr */
                sink->wait(sink->ud, 0, buf_str(&e->text), 0);
        } else if (e->type == QEV_RETRY || e->type == QEV_WAIT) {
            if (sink->wait)
                sink->wait(sink->ud, e->type == QEV_RETRY, buf_str(&e->text), e->num);
        } else if (e->type == QEV_END && session_relearn(s, e->ptr, sink)) {
            /* sent again: the new request's events follow */
        } else if (e->type == QEV_END && (tr = session_tools_round(s, e->ptr, sink)) != 0) {
            ended |= tr == 2; /* its calls run; the next round follows */
        } else if (e->type == QEV_END) {
            net_result_free(s->last);
            s->last = e->ptr;
            if (s->cancel_asked == e->req && s->last->outcome != API_OK &&
                s->last->outcome != API_CUT && s->last->outcome != API_CANCELLED) {
                /* The user asked to stop: whatever broke while the cancel was on its way (a
                 * limit, a timeout, an error), it ends as cancelled, with the text kept. */
                s->last->outcome = API_CANCELLED;
                free(s->last->error);
                s->last->error = xstrdup("cancelled");
            }
            if (s->cancel_asked == e->req && s->cancel_why &&
                s->last->outcome == API_CANCELLED) { /* the answer's own reason, saved */
                free(s->last->error);
                s->last->error = s->cancel_why;
                s->cancel_why = NULL;
            }
            if (s->cancel_asked == e->req) {
                s->cancel_asked = 0;
                free(s->cancel_why); /* not used: the answer had ended before the cancel */
                s->cancel_why = NULL;
            }
            if (s->last->outcome == API_OK && s->last->n_calls && !s->tools) {
                /* calls no tool offered (a broken or hostile server): not run, and said, exit
                 * 9 (until 2026-12 dropped without a word, exit 0) */
                const char *w = s->last->calls[0].wire;
                char *why = xasprintf("the model asked for a tool (%.60s%s) but none was "
                                      "offered; %s not run", w && *w ? w : "unnamed",
                                      s->last->n_calls > 1 ? ", ..." : "",
                                      s->last->n_calls > 1 ? "the calls were" : "the call was");
                session_redact_text(s, why); /* the name is the server's */
                session_incomplete(s, why);
                free(why);
            }
            session_redact_result(s, s->last);
            int64_t aid = s->answer_id;
            /* the answer, its cache entry, the quota and the counts: one commit */
            int batch = s->save && s->store && store_batch_begin(s->store) == 0;
            session_save_end(s, s->last);
            session_save_quota(s, s->last);
            session_context_end(s, s->last); /* spend, calibration */
            session_usage_add(s, s->last);
            session_settle(s, s->last, aid);
            session_tokens_save(s); /* the counts of the turn, and of older rows counted now */
            if (batch && store_batch_end(s->store) != 0)
                session_store_failed(s);
            s->active = 0;
            ended = 1;
            if (sink->end)
                sink->end(sink->ud, s->last);
        }
        queue_event_free(e);
        e = next;
    }
    return ended;
}

void session_cancel(struct session *s)
{
    if (s->job) { /* a tool runs: it is asked to stop, and the turn ends after it */
        s->tools_cancel = 1;
        tool_job_cancel(s->job);
        return;
    }
    if (s->sum_req)
        s->sum_cancelled = 1; /* the answer's request must not leave after the summary */
    if (s->active && !(s->active & SESSION_LOCAL_ID)) {
        net_cancel(s->net, s->active);
        s->cancel_asked = s->active;
    }
}

void session_cancel_because(struct session *s, const char *why)
{
    free(s->cancel_why);
    s->cancel_why = xstrdup(why);
    session_cancel(s);
}

void session_send_now(struct session *s)
{
    if (s->active && !(s->active & SESSION_LOCAL_ID))
        net_send_now(s->net, s->active);
}

/* ---- context window, history compression and budget (context.h) ---------------------------- */

#define SESSION_WINDOW_DEFAULT 8192 /* unknown model without context_window */
#define SESSION_RESERVE_DEFAULT 4096
#define SESSION_SUMMARY_ROUNDS 1    /* summary requests at most per message sent */
/* A summary request this large (raw prompt tokens) is announced before it is spent: on stderr
 * in scripted mode (session_notice), and /context flags it. About $0.04 at $2.50 per million;
 * a tenth of a 128k window. */
#define SESSION_SUMMARY_LARGE 16384
#define SESSION_COUNT_MAX ((size_t)4 << 20) /* longer answers without usage: tokens estimated */

static void session_context_close(struct session *s)
{
    if (s->ctx && getenv("TOKTERM_DEBUG_TOKENIZED")) {
        size_t texts, bytes;
        context_tokenized(s->ctx, &texts, &bytes);
        fprintf(stderr, "tokterm: debug: tokenised %zu texts, %zu bytes; table %s\n", texts,
                bytes, context_table_open(s->ctx) ? "open" : "not opened");
        context_hashed(s->ctx, &texts, &bytes);
        fprintf(stderr, "tokterm: debug: hashed %zu texts, %zu bytes\n", texts, bytes);
        if (s->resumed_turns)
            fprintf(stderr, "tokterm: debug: resumed %zu turns (%s)\n", s->resumed_turns,
                    s->lean ? "the newest" : "all");
    }
    free(s->sum_notice);
    if (!s->leaving)
        context_plan_free(&s->plan);
    context_free(s->ctx);
    context_calib_free(s->calib);
    context_stream_free(s->ans_count);
    free(s->ctx_key);
    free(s->calib_path);
    free(s->plan_note);
    free(s->sum_error);
    for (size_t i = 0; i < s->n_sums; i++)
        free(s->sums[i].text);
    free(s->sums);
    buf_free(&s->sum_text);
}

/* Remember a summary (in this session; the caller stores it). */
static void session_summary_add(struct session *s, int64_t first, int64_t last, const char *text)
{
    for (size_t i = 0; i < s->n_sums; i++)
        if (s->sums[i].first_id == first && s->sums[i].last_id == last) {
            free(s->sums[i].text);
            s->sums[i].text = xstrdup(text);
            return;
        }
    XGROW(s->sums, s->n_sums + 1, s->cap_sums);
    s->sums[s->n_sums++] = (struct session_summary){first, last, xstrdup(text)};
}

/* The summaries saved with a resumed conversation. */
static void session_context_load_summaries(struct session *s)
{
    struct store_summary *list = NULL;
    size_t n = 0;
    if (!s->store || !s->conv_id || store_summary_list(s->store, s->conv_id, &list, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (list[i].text)
            session_summary_add(s, list[i].first_message_id, list[i].last_message_id,
                                list[i].text);
    store_summaries_free(list, n);
}

/* ---- token counts stored with the messages (store v7) ---- */

/* The encoding counts are stored under, copied into buf (the counter's name may change when
 * its table opens), or NULL (bytes/4: not worth storing). */
static const char *session_tokens_encoding(const struct session *s, char buf[32])
{
    const char *enc = s->ctx ? context_encoding(s->ctx) : NULL;
    if (!enc || strcmp(enc, "bytes/4") == 0 || strlen(enc) >= 32)
        return NULL;
    return strcpy(buf, enc);
}

/* Forget the turns' counts (another encoding, or another session's conversation). */
static void session_tokens_forget(struct session *s)
{
    for (size_t i = 0; i < s->conv.n; i++) {
        struct conv_turn *t = &s->conv.turns[i];
        t->prompt_tokens = t->answer_tokens = 0;
        t->tokens_saved = 0;
        for (size_t k = 0; k < t->n_steps; k++) {
            t->steps[k].tokens = 0;
            t->steps[k].tokens_saved = 0;
        }
    }
    s->tokens_loaded = 0;
    s->n_off_seen = 0;
}

static int session_tokens_cmp(const void *a, const void *b)
{
    const struct store_tokens *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The stored count of message id in v (sorted by id), or NULL. */
/* Stored counts sorted by message id, looked up in the order of the turns: the next one is
 * tried first (a resume takes thousands of them in order), then a binary search. */
struct session_counts {
    const struct store_tokens *v;
    size_t n, at; /* at: where the last one found ends */
};

static const struct store_tokens *session_tokens_find(struct session_counts *c, int64_t id)
{
    if (id <= 0 || !c->n)
        return NULL;
    if (c->at < c->n && c->v[c->at].id == id)
        return &c->v[c->at++];
    struct store_tokens key = {id, 0, 0};
    const struct store_tokens *r = bsearch(&key, c->v, c->n, sizeof *c->v, session_tokens_cmp);
    if (r)
        c->at = (size_t)(r - c->v) + 1;
    return r;
}

/* Take a stored count for the text of message id (len bytes) into *tokens. */
static int session_tokens_take(struct session_counts *c, int64_t id, size_t len, long *tokens)
{
    const struct store_tokens *r = session_tokens_find(c, id);
    if (!r || r->bytes != (int64_t)len || r->tokens <= 0)
        return 0;
    *tokens = r->tokens;
    return 1;
}

/* The length of what the model gets of step st (its count's text). */
static size_t session_step_sent_len(const struct conv_step *st)
{
    return st->sent ? st->sent_len : st->len;
}

/* Take the stored counts of turn t's tool rounds (the rows with calls, the results): keyed by
 * the row's length, of what the model gets; an empty text's count is 0. */
static void session_steps_take(struct session_counts *c, struct conv_turn *t)
{
    for (size_t k = 0; k < t->n_steps; k++) {
        struct conv_step *st = &t->steps[k];
        if (st->tokens_saved)
            continue;
        if (!session_step_sent_len(st)) {
            const struct store_tokens *r = session_tokens_find(c, st->id);
            st->tokens_saved = r && r->bytes == (int64_t)st->len && r->tokens == 0;
        } else if (session_tokens_take(c, st->id, st->len, &st->tokens)) {
            st->tokens_saved = 1;
        }
    }
}

/* Give the turns whose counts are not known yet the stored counts v (n, sorted by id). */
static void session_turns_take(struct session *s, const struct store_tokens *v, size_t n)
{
    struct session_counts c = {v, n, 0};
    for (size_t i = 0; i < s->conv.n; i++) {
        struct conv_turn *t = &s->conv.turns[i];
        if (t->prompt_tokens <= 0 &&
            session_tokens_take(&c, t->user_id, t->prompt_len, &t->prompt_tokens))
            t->tokens_saved |= 1;
        if (t->answer && t->answer_tokens <= 0 &&
            session_tokens_take(&c, t->answer_id, t->answer_len, &t->answer_tokens))
            t->tokens_saved |= 2;
        if (!t->answer_len && t->answer_id > 0) { /* no text: a count of 0 is stored once */
            const struct store_tokens *r = session_tokens_find(&c, t->answer_id);
            if (r && r->bytes == 0 && r->tokens == 0)
                t->tokens_saved |= 2;
        }
        session_steps_take(&c, t);
    }
    /* the rows off the live path that were read: those with nothing stored */
    s->n_off_seen = 0;
    c.at = 0;
    for (size_t i = 0; i < s->conv.n_off; i++)
        if (!session_tokens_find(&c, s->conv.off[i])) {
            XGROW(s->off_seen, s->n_off_seen + 1, s->cap_off_seen);
            s->off_seen[s->n_off_seen++] = s->conv.off[i];
        }
}

/* Read the counts stored with the conversation's messages (once per conversation and
 * encoding): a resume then tokenises only the messages that have none. */
static void session_tokens_load(struct session *s)
{
    char encbuf[32];
    const char *enc = session_tokens_encoding(s, encbuf);
    if (s->tokens_loaded || !enc || !s->store || !s->conv_id)
        return;
    s->tokens_loaded = 1;
    struct store_tokens *v = NULL;
    size_t n = 0;
    if (store_tokens_get(s->store, s->conv_id, enc, &v, &n) != 0)
        return; /* counted as before */
    session_turns_take(s, v, n);
    free(v);
}

/* Is turn i's answer row without text (an exchange that failed before any came)? Its count
 * is 0 in every encoding, stored like any other: a row left without one reads as never
 * counted, and a resume that meets a few of them reads the whole conversation, every time.
 * Known for a turn read from the store (its text is the row's), for one whose answer is kept,
 * and for a last one that is not kept (the bytes that streamed into its row). */
static int session_answer_empty(const struct session *s, size_t i)
{
    const struct conv_turn *t = &s->conv.turns[i];
    if (t->answer_id <= 0 || t->answer_len || t->outcome == CONV_PENDING)
        return 0;
    for (size_t k = 0; k < t->n_steps; k++)
        if (t->steps[k].id == t->answer_id)
            return 0; /* a tool round's row: the steps' count is its own */
    return s->keep_answer || i < s->resumed_turns || (i + 1 == s->conv.n && !s->ans_bytes);
}

/* Store the counts known and not stored yet: the last turn's (its prompt counted by the plan,
 * its answer as it streamed or by the server's usage), and older rows' that a plan counted
 * (an older database: once). One transaction; nothing when nothing is new. */
static void session_tokens_save(struct session *s)
{
    char encbuf[32];
    const char *enc = session_tokens_encoding(s, encbuf);
    if (!enc || !s->save || !s->store || !s->conv_id)
        return;
    struct store_tokens *v = NULL;
    size_t n = 0, cap = 0;
    struct conv_turn *last = conv_last(&s->conv);
    if (last && !last->answer_len && last->answer_id > 0 && s->ans_unkept_tokens > 0) {
        /* an answer that was not kept (scripted mode's last one): the server's count */
        XGROW(v, n + 1, cap);
        v[n++] = (struct store_tokens){last->answer_id, (int64_t)s->ans_unkept_bytes,
                                       s->ans_unkept_tokens};
    }
    s->ans_unkept_tokens = 0;
    for (size_t i = 0; i < s->conv.n; i++) {
        struct conv_turn *t = &s->conv.turns[i];
        if (t->answer && t->answer_tokens <= 0 && t->answer_id > 0 && i + 1 == s->conv.n) {
            long k = context_count_known(s->ctx, t->answer, t->answer_len);
            /* short texts are not cached: count one, but never open the table for it (a
             * one-shot that fits by its bytes maps no table; a later resume counts lazily) */
            if (k < 0 && t->answer_len && t->answer_len < 256 && context_table_open(s->ctx))
                k = context_count(s->ctx, t->answer, t->answer_len);
            if (k > 0)
                t->answer_tokens = k;
        }
        if (t->user_id > 0 && t->prompt_tokens <= 0 && !(t->tokens_saved & 1) && t->prompt &&
            i < s->resumed_turns && !conv_turn_sent(t)) /* read, never sent: counted once */
            t->prompt_tokens = context_count(s->ctx, t->prompt, t->prompt_len);
        if (t->user_id > 0 && t->prompt_tokens > 0 && !(t->tokens_saved & 1)) {
            XGROW(v, n + 1, cap);
            v[n++] = (struct store_tokens){t->user_id, (int64_t)t->prompt_len, t->prompt_tokens};
        }
        if (t->answer && t->answer_id > 0 && t->answer_tokens > 0 && !(t->tokens_saved & 2)) {
            XGROW(v, n + 1, cap);
            v[n++] = (struct store_tokens){t->answer_id, (int64_t)t->answer_len,
                                           t->answer_tokens};
        } else if (!(t->tokens_saved & 2) && session_answer_empty(s, i)) {
            XGROW(v, n + 1, cap);
            v[n++] = (struct store_tokens){t->answer_id, 0, 0};
        }
        for (size_t k = 0; k < t->n_steps; k++) { /* the tool rounds: an empty text is 0 */
            const struct conv_step *st = &t->steps[k];
            if (st->id > 0 && !st->tokens_saved &&
                (st->tokens > 0 || !session_step_sent_len(st))) {
                XGROW(v, n + 1, cap);
                v[n++] = (struct store_tokens){st->id, (int64_t)st->len,
                                               session_step_sent_len(st) ? st->tokens : 0};
            }
        }
    }
    for (size_t i = 0; i < s->n_off_seen; i++) {
        XGROW(v, n + 1, cap);
        v[n++] = (struct store_tokens){s->off_seen[i], STORE_TOKENS_OFF_PATH, 0};
    }
    enc = session_tokens_encoding(s, encbuf); /* bytes/4 if the table failed to open */
    if (n && enc && store_tokens_put(s->store, s->conv_id, enc, v, n) == 0) {
        s->n_off_seen = 0;
        for (size_t i = 0; i < s->conv.n; i++) {
            struct conv_turn *t = &s->conv.turns[i];
            if (t->user_id > 0 && t->prompt_tokens > 0)
                t->tokens_saved |= 1;
            if ((t->answer && t->answer_id > 0 && t->answer_tokens > 0) ||
                session_answer_empty(s, i))
                t->tokens_saved |= 2;
            for (size_t k = 0; k < t->n_steps; k++) {
                struct conv_step *st = &t->steps[k];
                st->tokens_saved |= st->id > 0 && (st->tokens > 0 || !session_step_sent_len(st));
            }
        }
    }
    free(v);
}

/* ---- the lean resume (scripted -c/-r -p) ---- */

/* Read the whole conversation after a lean resume (a plan needs what was left out); a prompt
 * not saved yet stays the last turn. Returns 0, or -1 with *err. */
static int session_lean_full(struct session *s, char **err)
{
    struct conv_turn *last = conv_last(&s->conv);
    char *pending = NULL;
    size_t plen = 0;
    struct conv c;
    conv_init(&c);
    if (conv_load(&c, s->store, s->conv_id, s->conf->system, err) < 0) {
        conv_free(&c);
        return -1;
    }
    struct attach_list att = {0};
    if (last && last->outcome == CONV_PENDING && last->user_id <= 0) {
        pending = last->prompt;
        plen = last->prompt_len;
        last->prompt = NULL;
        att = (struct attach_list){last->att, last->n_att, last->n_att};
        last->att = NULL;
        last->n_att = 0;
    }
    session_resumed(s, &c, 0);
    if (pending) {
        conv_attach(conv_push(&s->conv, pending, plen), &att);
        free(pending);
        session_history(s);
    }
    return 0;
}

/* The newest rows may have no count yet (an answer the server did not count): more than that
 * is a conversation never counted (one that fits by its bytes): the walk reads it all (the
 * full load's rows, from the store's packed blocks once it has some), uncounted. */
#define SESSION_WALK_UNCOUNTED 4

struct session_walk {
    struct context *ctx;
    long limit;      /* context_long_limit: a longer message may be shortened by step 1 */
    long need;       /* raw tokens that must be read: more than the budget */
    long sum;        /* raw tokens read (of the rows with a count) */
    long over_user, over_other; /* a message's tokens besides its content */
    int uncounted;
    size_t bytes;    /* of the texts read */
    int read_all;    /* too many without a count: every row is read (a complete walk), while
                        its bytes prove it fits (more: the plan counts it, the full load) */
    int give_up;     /* a message over limit: the full load */
    int64_t answered; /* the user row whose answer was read last (newest first: its newest) */
    int answer_sent;  /* that answer makes its turn one the history sends (conv_row_sends:
                         conv_turn_sent by the answer row alone; a failed turn whose tool
                         rounds ran is sent but not counted here, so the walk reads on,
                         never stops short) */
};

static int session_walk_enough(void *ud, const struct store_message *m, long tokens, int live)
{
    struct session_walk *w = ud;
    if (!live) /* a turn /edit or /retry replaced: never sent, nothing to count */
        return w->sum > w->need;
    int user = m->role && strcmp(m->role, "user") == 0;
    if (!user && m->role && strcmp(m->role, "assistant") == 0 && !m->tool &&
        m->parent_id != w->answered) { /* a turn's answer, read before its prompt */
        w->answered = m->parent_id;
        w->answer_sent = conv_row_sends(m);
    }
    /* A prompt that is never sent (its exchange failed before any text came, or it was
     * refused: no answer) counts for nothing: summed, it would end the walk short of what
     * the history holds, and the resume would go back to the full load; one left without a
     * count (a run that died) would count as a row never counted. */
    if (user && !(w->answered == m->id && w->answer_sent))
        tokens = 0;
    if (tokens < 0 && !m->content_len)
        tokens = 0; /* no text: 0 in every encoding (a failed answer saved before its count) */
    if (tokens > w->limit)
        w->give_up = 1;
    if (tokens < 0 && ++w->uncounted > SESSION_WALK_UNCOUNTED)
        w->read_all = 1;
    w->bytes += m->content_len;
    if (w->read_all && w->bytes > (size_t)w->need)
        w->give_up = 1;
    if (tokens > 0)
        w->sum += (m->role && strcmp(m->role, "user") == 0 ? w->over_user : w->over_other) +
                  tokens;
    return w->give_up ? -1 : w->sum > w->need;
}

/* Read only the newest turns of conversation id when the plan of every later turn provably
 * leaves the older ones out (dropped, or stood for by a saved summary): the turns read hold
 * more raw tokens than the budget, no message is long enough for step 1 to shorten it, and
 * every row not read has a count no longer than that (so none of them is shortened either,
 * and none is counted). The plan is then the same over the newest turns as over all of them
 * (session_context_sums maps the saved summaries onto them; a plan that would need an older
 * turn's text, a new summary, goes back to the full load: session_lean_check). Returns 0
 * (resumed), 1 (read it all instead) or -1 with *err. */
static int session_resume_lean(struct session *s, int64_t id, char **err)
{
    session_context_setup(s);
    struct context_params p;
    session_context_params(s, &p);
    char encbuf[32];
    const char *enc = session_tokens_encoding(s, encbuf);
    if (!enc || p.policy == CONTEXT_OFF || getenv("TOKTERM_FULL_RESUME"))
        return 1;
    long budget = context_plan_budget(s->ctx, &p);
    struct session_walk sw = {.ctx = s->ctx, .limit = context_long_limit(budget),
                              .need = budget + 1,
                              .over_user = context_msg_tokens(s->ctx, "user", "", 0),
                              .over_other = context_msg_tokens(s->ctx, "assistant", "", 0)};
    struct store_walk w;
    int rc = store_conversation_walk(s->store, id, enc, session_walk_enough, &sw, &w);
    if (rc == STORE_WALK_FULL || rc == STORE_NOT_FOUND)
        return 1; /* the full load reads it, or says what is missing */
    if (rc != 0) {
        *err = conv_load_error(s->store, rc, id);
        return -1;
    }
    if (sw.give_up || (!w.complete && (w.older_uncounted != 0 ||
                                       w.older_max_tokens > sw.limit))) {
        store_walk_free(&w);
        return 1;
    }
    struct conv c;
    conv_init(&c);
    conv_from_rows(&c, w.conv, session_resume_system(s));
    if (conv_attach_load(&c, s->store) < 0) {
        *err = xasprintf("cannot read the attachments: %s", store_error(s->store));
        conv_free(&c);
        store_walk_free(&w);
        return -1;
    }
    session_resumed(s, &c, !w.complete);
    s->tokens_loaded = 1; /* the walk's counts, not the whole conversation's */
    session_turns_take(s, w.tokens, w.n_tokens); /* a turn just read has no count yet */
    store_walk_free(&w);
    if (!s->lean)
        return 0; /* the walk read the whole path: nothing was left out */
    /* the history as the plan sees it must be over the budget by itself */
    long sum = CONTEXT_REPLY_PRIMER + (s->conv.system ? context_msg_tokens(s->ctx, "system",
                                                       s->conv.system, strlen(s->conv.system))
                                                      : 0);
    s->lean_first = 0;
    for (size_t i = 0; i < s->n_msgs; i++) {
        const struct session_msg *m = &s->msgs[i];
        if (strcmp(m->role, "system") == 0)
            continue; /* counted above */
        long ct = m->tokens && *m->tokens > 0 ? *m->tokens
                                              : context_count(s->ctx, m->content, m->len);
        if (m->tokens && *m->tokens <= 0 && m->len)
            *m->tokens = ct;
        sum += (strcmp(m->role, "user") == 0 ? sw.over_user : sw.over_other) + ct;
        if (!s->lean_first)
            s->lean_first = m->id;
    }
    if (sum <= budget || s->lean_first <= 0)
        return session_lean_full(s, err) < 0 ? -1 : 0;
    return 0;
}

/* (Re)make the counter, window, reserve and price for the profile's current model. */
static void session_context_setup(struct session *s)
{
    const struct conf *c = s->conf;
    if (!s->calib) { /* first use */
        s->calib = context_calib_new();
        s->budget.cap_tokens = c->budget_tokens;
        s->budget.cap_usd = c->budget_usd;
        char *dir = conf_dir("state");
        s->calib_path = xasprintf("%s/calibration", dir);
        free(dir);
        (void)context_calib_load(s->calib, s->calib_path);
    }
    const char *model = c->model ? c->model : "";
    const char *enc_opt = c->encoding && *c->encoding ? c->encoding : NULL;
    char *key = xasprintf("%s\n%s\n%ld\n%ld\n%ld", model, enc_opt ? enc_opt : "",
                          c->context_window, c->reserve_tokens, c->max_tokens);
    if (s->ctx && strcmp(key, s->ctx_key) == 0) {
        free(key);
        return;
    }
    free(s->ctx_key);
    s->ctx_key = key;
    s->status_n = (size_t)-1;
    struct tok_model_info mi;
    int known = tokenizer_model_info(model, &mi) == 0;
    const char *enc = enc_opt ? enc_opt : known && mi.encoding ? mi.encoding : "o200k_base";
    int approx = !enc_opt && !(known && mi.encoding); /* another tokenizer: estimate and calibrate */
    if (!s->ctx || strcmp(context_encoding(s->ctx), enc) != 0 ||
        context_approximate(s->ctx) != approx) {
        context_stream_free(s->ans_count);
        context_free(s->ctx);
        s->ctx = context_new(enc, approx, NULL);
        session_tokens_forget(s);
        s->ans_count = context_stream_new(s->ctx);
        s->ans_fed = 0;
    s->ans_bytes = 0;
    }
    struct session_model *sm = &s->ctx_model;
    sm->window = c->context_window > 0 ? c->context_window
               : known && mi.context_window > 0 ? mi.context_window : SESSION_WINDOW_DEFAULT;
    sm->window_assumed = c->context_window <= 0 && !(known && mi.context_window > 0);
    if (c->max_tokens > 0)
        sm->reserve = c->max_tokens;
    else if (c->reserve_tokens > 0)
        sm->reserve = c->reserve_tokens;
    else {
        sm->reserve = SESSION_RESERVE_DEFAULT;
        if (known && mi.max_output > 0 && mi.max_output < sm->reserve)
            sm->reserve = mi.max_output;
        if (sm->reserve > sm->window / 4)
            sm->reserve = sm->window / 4;
    }
    char *cdir = conf_dir("config");
    char *user_prices = xasprintf("%s/prices.tsv", cdir);
    sm->priced = context_price_lookup(model, user_prices, &sm->price) == 0;
    free(user_prices);
    free(cdir);
}

/* The raw tokens of the tool definitions every request carries: each tool's name,
 * description and schema, and a few tokens of framing (CONTEXT_MSG_OVERHEAD), counted again
 * only when the tools change (an MCP server started on first use adds its own). Until 2026-12
 * they were left out of the budget and of /context: 14 tools of an MCP server (8.8 KB of
 * JSON, ~2,000 tokens) went with every request, unseen. */
static long session_tools_tokens(struct session *s)
{
    if (!s->tools || !s->ctx)
        return 0;
    const struct api_tool *defs;
    size_t n;
    tools_api(s->tools, NULL, 0, &defs, &n);
    /* what is counted: the definitions' bytes and the encoding (FNV-1a) */
    uint64_t sig = 1469598103934665603ull;
    const char *enc = context_encoding(s->ctx);
    for (size_t i = 0; i <= n; i++) {
        const char *parts[3] = {i < n ? defs[i].name : enc, i < n ? defs[i].description : NULL,
                                i < n ? defs[i].schema : NULL};
        for (int k = 0; k < 3; k++) {
            for (const char *p = parts[k] ? parts[k] : ""; *p; p++)
                sig = (sig ^ (unsigned char)*p) * 1099511628211ull;
            sig = (sig ^ 0xff) * 1099511628211ull; /* the end of each string */
        }
    }
    if (s->tools_tokens >= 0 && sig == s->tools_sig)
        return s->tools_tokens;
    long tokens = 0;
    for (size_t i = 0; i < n; i++) {
        const char *parts[3] = {defs[i].name, defs[i].description, defs[i].schema};
        for (int k = 0; k < 3; k++)
            if (parts[k])
                tokens += context_count(s->ctx, parts[k], strlen(parts[k]));
        tokens += CONTEXT_MSG_OVERHEAD;
    }
    s->tools_sig = sig;
    s->tools_tokens = tokens;
    return tokens;
}

static void session_context_params(struct session *s, struct context_params *p)
{
    const struct conf *c = s->conf;
    memset(p, 0, sizeof *p);
    p->window = s->ctx_model.window;
    p->reserve = s->ctx_model.reserve;
    if (context_policy_parse(c->context_policy, &p->policy) < 0)
        p->policy = CONTEXT_SUMMARIZE;
    p->ratio = context_calib_ratio(s->calib, c->model, NULL);
    /* --cache-only never talks to the server, not even for a summary */
    p->no_new_summary = s->sum_failed || s->cache == SESSION_CACHE_ONLY;
    /* A budget is checked against the exact count. */
    p->bounds_ok = s->count_lazily && s->budget.cap_tokens <= 0 && s->budget.cap_usd <= 0;
    p->fixed = session_tools_tokens(s);
}

/* The history as context messages (+ extra empty user message when placeholder). */
static struct context_msg *session_context_msgs(const struct session *s, int placeholder,
                                                size_t *n)
{
    struct context_msg *m = xcalloc(s->n_msgs + 1, sizeof *m);
    for (size_t i = 0; i < s->n_msgs; i++)
        m[i] = (struct context_msg){s->msgs[i].role, s->msgs[i].content, s->msgs[i].len,
                                    s->msgs[i].id, s->msgs[i].tokens ? *s->msgs[i].tokens : 0,
                                    s->msgs[i].extra};
    *n = s->n_msgs;
    if (placeholder)
        m[(*n)++] = (struct context_msg){"user", "", 0, 0, 0, 0};
    return m;
}

/* The summaries for a plan. After a lean resume a summary stands for the turns from the start
 * of the path, which were not read: one whose last message was read starts, for the plan, at
 * the first message read (it was made when the path began where it begins now: the rows of a
 * path never change); one that ends before (or off the path) cannot be the plan's, which keeps
 * turns read after the one it would use. */
static struct context_summary *session_context_sums(const struct session *s)
{
    struct context_summary *v = xcalloc(s->n_sums + 1, sizeof *v);
    for (size_t i = 0; i < s->n_sums; i++) {
        v[i] = (struct context_summary){s->sums[i].first_id, s->sums[i].last_id, s->sums[i].text};
        if (!s->lean)
            continue;
        int read = 0;
        for (size_t k = 0; k < s->conv.n && !read; k++)
            read = s->conv.turns[k].answer_id == v[i].last_id;
        if (read)
            v[i].first_id = s->lean_first;
        else
            v[i].text = NULL;
    }
    return v;
}

/* Plan the request for the whole history into plan. Returns context_plan's result. */
static int session_context_plan_into(struct session *s, int placeholder,
                                     struct context_plan *plan, struct context_params *p)
{
    session_context_params(s, p);
    struct context_summary *sums = session_context_sums(s);
    p->summaries = sums;
    p->n_summaries = s->n_sums;
    size_t n;
    session_tokens_load(s);
    struct context_msg *m = session_context_msgs(s, placeholder, &n);
    int rc = context_plan(s->ctx, m, n, p, plan);
    /* what the plan counted is not counted again (session_tokens_save stores it) */
    for (size_t i = 0; i < s->n_msgs && i < n && plan->content_tokens; i++)
        if (s->msgs[i].tokens && *s->msgs[i].tokens <= 0 && plan->content_tokens[i] > 0)
            *s->msgs[i].tokens = plan->content_tokens[i];
    free(m);
    free(sums);
    p->summaries = NULL;
    p->n_summaries = 0;
    return rc;
}

/* After a lean resume: does the plan keep to the turns read, as the full history's would?
 * It must leave something out (a saved summary, or dropped turns), and need no older text: no
 * new summary (its request holds the dropped turns), nothing shortened or merged. */
static int session_lean_kept(const struct context_plan *p)
{
    return !p->need_summary && !p->n_shortened && !p->n_merged &&
           (p->summary_used >= 0 || p->n_dropped > 0);
}

/* Plan the request to send into s->plan. */
static int session_context_replan(struct session *s)
{
    context_plan_free(&s->plan);
    struct context_params p;
    int rc = session_context_plan_into(s, 0, &s->plan, &p);
    if (s->lean && rc == 0 && !session_lean_kept(&s->plan)) {
        char *err = NULL;
        context_plan_free(&s->plan);
        if (session_lean_full(s, &err) < 0) {
            memset(&s->plan, 0, sizeof s->plan);
            s->plan.summary_used = s->plan.sum_prev = -1;
            s->plan.error = err;
            return -1;
        }
        rc = session_context_plan_into(s, 0, &s->plan, &p);
    }
    s->plan_summary_reused = s->plan.summary_used >= 0;
    struct buf d = BUF_INIT;
    context_plan_describe(&s->plan, &d);
    free(s->plan_note);
    s->plan_note = buf_take(&d);
    return rc;
}

/* Count what a plan sent on its bytes alone (context_plan's bound): the same messages, exactly. */
static void session_context_exact(struct session *s)
{
    if (!s->plan.bounded)
        return;
    /* the history as it was sent (the answer may have been added since) */
    size_t n = s->n_msgs;
    if (s->plan.n_history < n)
        s->n_msgs = s->plan.n_history;
    int lazy = s->count_lazily;
    s->count_lazily = 0;
    (void)session_context_replan(s);
    s->count_lazily = lazy;
    s->n_msgs = n;
}

static char *session_context_begin(struct session *s)
{
    session_context_setup(s);
    s->sum_failed = 0;
    s->sum_cancelled = 0;
    free(s->sum_error);
    s->sum_error = NULL;
    s->plan_summary_requests = 0;
    if (session_context_replan(s) < 0)
        return xstrdup(s->plan.error ? s->plan.error : "the message does not fit");
    if (s->budget.cap_tokens > 0 || s->budget.cap_usd > 0) {
        double usd = s->ctx_model.priced ? context_cost(&s->ctx_model.price, s->plan.shown, 0, 0)
                                         : -1;
        return context_budget_check(&s->budget, s->plan.shown, usd);
    }
    return NULL;
}

/* Ask the model for the summary the plan wants (a non-streamed request). */
static void session_summary_submit(struct session *s)
{
    const struct conf *c = s->conf;
    struct api_message m[2] = {API_MSG("system", context_summary_instruction()),
                               API_MSG("user", s->plan.sum_input)};
    /* the plan's own counts: a request of hundreds of kB is not tokenised again */
    long in = (long)(s->plan.sum_prompt * s->plan.ratio) + 1;
    /* Room for reasoning models too, but never more than the window leaves. */
    long max = s->plan.sum_tokens * 4, room = s->ctx_model.window - in - 16;
    if (max > room)
        max = room;
    if (max < 16)
        max = 16;
    struct api_request ar = {
        .model = c->model,
        .messages = m,
        .n_messages = 2,
        .max_tokens = max,
        .max_tokens_field = c->max_tokens_field,
        .stream = 0,
    };
    request_learnt_apply(&ar, c);
    char *body = request_body(c, &ar);
    struct net_request *rq = session_request(s, c, s->key, body);
    buf_reset(&s->sum_text);
    s->plan_summary_requests++;
    s->sum_req = s->active = session_submit(s, rq);
}

/* What a summary request of the plan p will cost: "a summary request of N prompt tokens (up
 * to M for the summary), of messages X-Y[, leaving out messages U-V]". */
static void session_summary_cost(const struct session *s, const struct context_plan *p,
                                 struct buf *b)
{
    long in = p->approximate ? (long)(p->sum_prompt * p->ratio) + 1 : p->sum_prompt;
    buf_appends(b, "a summary request of ");
    context_format_tokens(b, in, p->approximate);
    buf_printf(b, " prompt token%s (up to ", util_plural(in));
    context_format_tokens(b, p->sum_tokens * 4, 0);
    buf_printf(b, " for the summary) of messages %zu-%zu", p->sum_from + 1, p->sum_to + 1);
    if (p->sum_skipped)
        buf_printf(b, "; messages %zu-%zu are too many for one request and are dropped "
                      "unsummarised", p->sum_from - p->sum_skipped + 1, p->sum_from);
    if (s->ctx_model.priced) {
        char m[CONTEXT_USD_MAX];
        buf_printf(b, ", about %s",
                   context_format_usd(context_cost(&s->ctx_model.price, in, 0, p->sum_tokens), m));
    }
}

/* A large summary request is about to leave: say what it costs (session_notice). */
static void session_summary_note(struct session *s)
{
    free(s->sum_notice);
    s->sum_notice = NULL;
    if (s->plan.sum_prompt < SESSION_SUMMARY_LARGE)
        return;
    struct buf b = BUF_INIT;
    buf_appends(&b, "the history is over the context window (context_policy = summarize): "
                    "this turn first sends ");
    session_summary_cost(s, &s->plan, &b);
    s->sum_notice = buf_take(&b);
}

char *session_notice(struct session *s)
{
    char *n = s->sum_notice;
    s->sum_notice = NULL;
    return n;
}

static int session_context_summarize(struct session *s)
{
    for (int guard = 0; s->plan.need_summary && guard < 64; guard++) {
        int64_t first = s->plan.sum_first_id, last = s->plan.sum_last_id;
        struct store_summary ss;
        memset(&ss, 0, sizeof ss);
        if (s->store && s->conv_id && first > 0 && last > 0 &&
            store_summary_get(s->store, s->conv_id, first, last, &ss) == 0 && ss.text) {
            /* made by an earlier run: never paid for twice */
            session_summary_add(s, first, last, ss.text);
            store_summary_clear(&ss);
            session_context_replan(s);
            continue;
        }
        store_summary_clear(&ss);
        if (s->plan_summary_requests >= SESSION_SUMMARY_ROUNDS) {
            s->sum_failed = 1;
            session_context_replan(s);
            break;
        }
        session_summary_note(s);
        session_summary_submit(s);
        return 1;
    }
    return 0;
}

/* Tokens the request's prompt and answer cost, into the budget. */
static void session_context_spend(struct session *s, const struct net_result *r, long est_prompt,
                                  long est_completion)
{
    long long prompt = est_prompt, completion = est_completion, cached = 0;
    if (r->usage.present) {
        prompt = r->usage.prompt;
        completion = r->usage.completion;
        cached = r->usage.cached;
    } else if (r->status >= 400 || (r->status == 0 && !r->content_bytes)) {
        return; /* refused or never reached the server: nothing billed */
    }
    const struct session_model *m = &s->sent_model;
    double usd = m->priced ? context_cost(&m->price, prompt, cached, completion) : -1;
    context_budget_add(&s->budget, prompt, completion, usd);
}

static int session_summary_event(struct session *s, struct queue_event *e,
                                 const struct session_sink *sink)
{
    if (e->type == QEV_CONTENT) {
        buf_append(&s->sum_text, e->text.data, e->text.len);
        return 0;
    }
    if (e->type != QEV_END)
        return 0; /* reasoning, headers, retries of the summary are not the answer's */
    struct net_result *r = e->ptr;
    s->sum_req = 0;
    long in = (long)(s->plan.sum_prompt * s->plan.ratio);
    session_context_spend(s, r, in, context_count(s->ctx, buf_str(&s->sum_text),
                                                  s->sum_text.len));
    char *text = util_trim((char *)buf_str(&s->sum_text));
    if ((r->outcome == API_OK || r->outcome == API_CUT) && *text) {
        int64_t first = s->plan.sum_first_id, last = s->plan.sum_last_id;
        session_summary_add(s, first, last, text);
        if (s->save && s->conv_id && first > 0 && last > 0 &&
            store_summary_put(s->store, s->conv_id, first, last, text, s->conf->model,
                              r->usage.present ? r->usage.completion : -1) != 0)
            session_store_failed(s);
    } else if (r->outcome != API_CANCELLED) {
        s->sum_failed = 1;
        session_redact_result(s, r);
        free(s->sum_error);
        s->sum_error = xasprintf("the summary request failed (%s); older turns were dropped "
                                 "instead", r->error ? r->error : api_outcome_name(r->outcome));
    }
    if (s->sum_cancelled || r->outcome == API_CANCELLED) {
        /* the user cancelled while the summary was made: the exchange ends here */
        r->outcome = API_CANCELLED;
        if (!r->error)
            r->error = xstrdup("cancelled");
        net_result_free(s->last);
        s->last = r;
        s->active = 0;
        if (sink->end)
            sink->end(sink->ud, r);
        return 1;
    }
    net_result_free(r);
    session_context_replan(s);
    if (!session_context_summarize(s))
        session_send_planned(s);
    return 0;
}

/* Give at most max more bytes of the answer to its counter; returns the bytes still uncounted. */
static size_t session_answer_feed(struct session *s, size_t max)
{
    if (!s->ans_count || !s->keep_answer || s->answer.len <= s->ans_fed)
        return 0;
    size_t n = s->answer.len - s->ans_fed;
    if (n > max)
        n = max;
    context_stream_feed(s->ans_count, s->answer.data + s->ans_fed, n);
    s->ans_fed += n;
    s->ans_fed_total += n;
    return s->answer.len - s->ans_fed;
}

/* Tokens of the answer so far: only the text that arrived since the last call is scanned. */
static long session_answer_tokens(struct session *s)
{
    if (!s->ans_count)
        return 0;
    session_answer_feed(s, SIZE_MAX);
    return context_stream_count(s->ans_count);
}

int session_answer_count_wanted(struct session *s)
{
    if (!s->active || s->sum_req || !s->keep_answer || !s->ans_count)
        return 0;
    /* the server's usage counts it, unless it is not asked for, or a server of this session
     * sent none, or the count is another tokenizer's (then ours is needed for the history) */
    return !s->conf->include_usage || s->usage_missing || context_approximate(s->ctx);
}

size_t session_answer_count_step(struct session *s, size_t max)
{
    return session_answer_count_wanted(s) ? session_answer_feed(s, max) : 0;
}

void session_count_debug(const struct session *s, size_t *answer_bytes, size_t *texts)
{
    *answer_bytes = s->ans_fed_total;
    *texts = s->ctx ? context_cached(s->ctx) : 0;
}

/* The longest token of o200k_base and cl100k_base, in bytes (their rank tables' max_len). */
#define SESSION_TOKEN_BYTES 128

/* Could the server's completion_tokens be the count of an answer of bytes bytes? Not when
 * fewer tokens than bytes / SESSION_TOKEN_BYTES: a broken or lying server (5 tokens for 2 MB)
 * made the history carry 2 MB as 5 tokens, unseen by the window's check, /context and
 * /budget, and sent in full on every later turn (until 2026-12). Then the text is counted. */
static int session_usage_fits(const struct net_result *r, size_t bytes)
{
    return (double)r->usage.completion * SESSION_TOKEN_BYTES >= (double)bytes;
}

/* The answer goes into the history: its tokens, when they are known without counting it
 * again, go with it (s->ans_tokens) to the turn that takes it (session_settle: the plans that
 * will carry it, the status, /context, the next request, and the store read the turn's count)
 * or to the tool round's step. Known: counted as it streamed (the chat's status counts it
 * incrementally), or the server's completion_tokens when they are the answer's alone (the
 * model's own encoding, no reasoning, no tool calls: they count the calls too). Otherwise
 * the first plan that needs it counts it. The text is not hashed here: a long answer was
 * hashed twice at its end (once to record its count in the cache, once to find it there for
 * the store). */
static void session_answer_record(struct session *s, const struct net_result *r)
{
    if (r->outcome == API_OK && !r->usage.present)
        s->usage_missing = 1; /* from now on the chat counts answers as they stream */
    if (!s->keep_answer || s->answer.len < CONTEXT_CACHE_MIN)
        return; /* a short text is counted by the plan (as the count cache did) */
    if (s->ans_count && s->ans_fed == s->answer.len)
        s->ans_tokens = context_stream_count(s->ans_count);
    else if (r->usage.present && r->usage.completion > 0 && !r->usage.reasoning &&
             !r->n_calls && !s->reasoning.len && !context_approximate(s->ctx) &&
             (r->outcome == API_OK || r->outcome == API_CUT) &&
             session_usage_fits(r, s->answer.len))
        s->ans_tokens = (long)r->usage.completion;
}

static void session_context_end(struct session *s, const struct net_result *r)
{
    s->ans_tokens = -1;
    if (!s->ctx || !r || r->cached || r->outcome == API_ERR_USAGE ||
        r->outcome == API_CACHE_MISS)
        return;
    if (!r->usage.present)
        session_context_exact(s); /* the spend is our own count */
    long completion;
    size_t kept = s->answer.len + s->reasoning.len;
    /* counted as it streamed (the chat's status), or short enough to count now */
    int countable = (s->answer.len <= SESSION_COUNT_MAX || s->ans_fed == s->answer.len) &&
                    s->reasoning.len <= SESSION_COUNT_MAX;
    if (r->usage.present && r->usage.completion > 0) {
        completion = (long)r->usage.completion; /* what the server bills: no need to count */
    } else if (s->keep_answer && countable) {
        completion = session_answer_tokens(s);
        if (s->reasoning.len)
            completion += context_count(s->ctx, s->reasoning.data, s->reasoning.len);
    } else {
        /* not kept, or too long to count now (a server that sent no usage, a limit): an
         * estimate, and said to be one */
        completion = (long)((s->keep_answer ? kept : s->ans_bytes) / 4);
        s->spent_estimated = 1;
    }
    session_context_spend(s, r, s->plan.shown, completion);
    session_answer_record(s, r);
    s->ans_unkept_tokens = 0;
    if (!s->keep_answer && r->usage.present && r->usage.completion > 0 && !r->usage.reasoning &&
        !r->reasoning_bytes && !context_approximate(s->ctx) &&
        (r->outcome == API_OK || r->outcome == API_CUT) &&
        session_usage_fits(r, r->content_bytes)) {
        s->ans_unkept_tokens = (long)r->usage.completion;
        s->ans_unkept_bytes = r->content_bytes;
    }
    s->status_n = (size_t)-1;
    if (r->usage.present && r->usage.prompt > 0 && !r->used_fallback && !s->plan.bounded &&
        (r->outcome == API_OK || r->outcome == API_CUT)) {
        context_calibrate(s->calib, s->conf->model, s->plan.total + s->plan.fixed,
                          (long)r->usage.prompt); /* the tool definitions are in both */
        /* learnt ratios of approximate models outlive the run (not with --incognito) */
        if (context_approximate(s->ctx) && s->store && s->calib_path) {
            char *dir = conf_dir("state");
            if (util_mkdir_p(dir, 0700) == 0)
                (void)context_calib_save(s->calib, s->calib_path);
            free(dir);
        }
    }
}

static void session_status_fill(struct session *s, struct session_status *st, int history)
{
    memset(st, 0, sizeof *st);
    session_context_setup(s);
    session_context_exact(s);
    const struct conf *c = s->conf;
    st->window = s->ctx_model.window;
    st->reserve = s->ctx_model.reserve;
    st->available = st->window - st->reserve;
    st->window_assumed = s->ctx_model.window_assumed;
    st->encoding = context_encoding(s->ctx);
    st->approximate = context_approximate(s->ctx);
    st->ratio = st->approximate ? context_calib_ratio(s->calib, c->model, &st->ratio_samples)
                                : 1.0;
    if (!st->approximate)
        (void)context_calib_ratio(s->calib, c->model, &st->ratio_samples);
    if (context_policy_parse(c->context_policy, &st->policy) < 0)
        st->policy = CONTEXT_SUMMARIZE;
    st->summarizing = s->sum_req != 0;
    if (!history) {
        /* the request that left and the spending only: nothing of the history is counted */
    } else if (s->active && !s->sum_req) {
        /* what is counted so far: the status never tokenises (session_answer_count_step does,
         * off the drawing path) */
        st->answer_tokens = s->ans_count ? context_stream_count(s->ans_count) : 0;
        st->ctx_used = s->plan.shown + CONTEXT_MSG_OVERHEAD + 1 +
                       (long)(st->answer_tokens * st->ratio + 0.999);
    } else {
        const char *last = s->n_msgs ? s->msgs[s->n_msgs - 1].content : NULL;
        if (s->status_n != s->n_msgs || s->status_last != last) {
            struct context_plan p;
            struct context_params par;
            const char *role = s->n_msgs ? s->msgs[s->n_msgs - 1].role : NULL;
            if (session_context_plan_into(s, 0, &p, &par) < 0 && role &&
                strcmp(role, "user") != 0) {
                /* An answer longer than the window fails as the newest message ("too long",
                 * shown 0), yet the next request carries it as an old one, shortened: count
                 * that request (with its empty user message, as /context does). */
                context_plan_free(&p);
                session_context_plan_into(s, 1, &p, &par);
            }
            s->status_used = s->n_msgs ? p.shown : 0;
            context_plan_free(&p);
            s->status_n = s->n_msgs;
            s->status_last = last;
        }
        st->ctx_used = s->status_used;
    }
    st->sent_tokens = s->plan.shown;
    st->sent_raw = s->plan.total;
    st->sent_messages = s->plan.n_items;
    st->n_shortened = s->plan.n_shortened;
    st->n_merged = s->plan.n_merged;
    st->n_summarized = s->plan.n_summarized;
    st->n_dropped = s->plan.n_dropped;
    st->summary_requests = s->plan_summary_requests;
    st->summary_reused = s->plan_summary_reused && !s->plan_summary_requests;
    st->note = s->plan_note ? s->plan_note : "";
    st->spent_tokens = s->budget.spent_tokens;
    st->spent_estimated = s->spent_estimated;
    st->spent_usd = s->budget.spent_usd;
    st->priced = s->ctx_model.priced;
    st->budget_tokens = s->budget.cap_tokens;
    st->budget_usd = s->budget.cap_usd;
    st->level = context_budget_level(&s->budget, &st->budget_frac);
}

void session_status(struct session *s, struct session_status *st)
{
    int lazy = s->count_lazily;
    s->count_lazily = 0; /* the status shows exact counts */
    session_status_fill(s, st, 1);
    s->count_lazily = lazy;
}

void session_status_sent(struct session *s, struct session_status *st)
{
    int lazy = s->count_lazily;
    s->count_lazily = 0;
    session_status_fill(s, st, 0);
    s->count_lazily = lazy;
}

int session_msg_fate(const struct session *s, size_t i)
{
    return i < s->plan.n_history && s->plan.fate ? s->plan.fate[i] : CONTEXT_SENT;
}

int session_compressed(const struct session *s)
{
    for (size_t i = 0; i < s->plan.n_history && s->plan.fate; i++)
        if (s->plan.fate[i] == CONTEXT_SUMMARIZED || s->plan.fate[i] == CONTEXT_DROPPED ||
            s->plan.fate[i] == CONTEXT_SHORTENED) /* until 2026-12 a shortened one, unsaid */
            return 1;
    return 0;
}

/* /context's lines for the files of the history: each with its tokens and whether the plan p
 * sends it, or leaves it out with its message (dropped or summarised: never silently). */
static void session_context_attachments(struct session *s, const struct context_plan *p,
                                        struct buf *b)
{
    enum attach_provider pv = session_attach_provider(s);
    int head = 0;
    for (size_t i = 0; i < s->n_msgs && i < p->n_history; i++)
        for (size_t k = 0; k < s->msgs[i].n_att; k++) {
            const struct attach *a = &s->msgs[i].att[k];
            if (!head++)
                buf_appends(b, "Attachments:\n");
            buf_printf(b, "  message %zu: ", i + 1);
            struct buf d = BUF_INIT;
            attach_describe(&d, a, attach_tokens(a, pv));
            utf8_sanitize(b, d.data, d.len);
            buf_free(&d);
            int fate = p->fate ? p->fate[i] : CONTEXT_SENT;
            buf_appends(b, fate == CONTEXT_DROPPED      ? ": left out with its message\n"
                           : fate == CONTEXT_SUMMARIZED ? ": left out (its message is summarised)\n"
                                                        : ": sent\n");
        }
}

char *session_context_report(struct session *s)
{
    session_context_setup(s);
    session_context_exact(s);
    const struct conf *c = s->conf;
    struct buf b = BUF_INIT;
    long samples = 0;
    double ratio = context_calib_ratio(s->calib, c->model, &samples);
    buf_printf(&b, "Model %s: window ", c->model ? c->model : "?");
    context_format_tokens(&b, s->ctx_model.window, 0);
    buf_printf(&b, "%s, counted with %s", s->ctx_model.window_assumed
                                              ? " (assumed: set context_window)" : "",
               context_encoding(s->ctx));
    if (context_approximate(s->ctx))
        buf_printf(&b, " (approximate; x%.3f calibrated from %ld answer%s)", ratio, samples,
                   samples == 1 ? "" : "s");
    else
        buf_appends(&b, " (exact)");
    /* while an answer streams, the plan has its prompt but not the answer: until 2026-12 it
     * read as two user messages in a row, which no request sends */
    buf_appends(&b, s->active ? "\nThe next request (with your next message last; the answer "
                                "streaming now is not in it yet, /context after it ends counts "
                                "it):\n"
                              : "\nThe next request (with your next message last):\n");
    struct context_plan p;
    struct context_params par;
    session_context_plan_into(s, 1, &p, &par);
    context_plan_report(&p, &par, &b);
    if (p.need_summary) {
        long in = p.approximate ? (long)(p.sum_prompt * p.ratio) + 1 : p.sum_prompt;
        buf_appends(&b, in >= SESSION_SUMMARY_LARGE ? "Large summary first: before it, tokterm "
                                                      "sends "
                                                    : "Before it, tokterm sends ");
        session_summary_cost(s, &p, &b);
        long after = p.approximate ? (long)(p.sum_after * p.ratio) + 1 : p.sum_after;
        buf_appends(&b, ".\nThe next turn costs about ");
        context_format_tokens(&b, in + after, p.approximate);
        buf_printf(&b, " prompt token%s plus your message (the summary request, then about ",
                   util_plural(in + after));
        context_format_tokens(&b, after, p.approximate);
        buf_appends(&b, " for the request with the summary in it).\n");
    } else {
        buf_appends(&b, "The next turn costs ");
        context_format_tokens(&b, p.shown, p.approximate);
        buf_printf(&b, " prompt token%s plus your message; no summary request.\n",
                   util_plural(p.shown));
    }
    session_context_attachments(s, &p, &b);
    context_plan_free(&p);
    if (s->plan.n_items) {
        buf_appends(&b, "Last request: ");
        buf_printf(&b, "%zu message%s, ", s->plan.n_items, util_plural((long long)s->plan.n_items));
        context_format_tokens(&b, s->plan.shown, s->plan.approximate);
        buf_printf(&b, " token%s", util_plural(s->plan.shown));
        if (s->plan_note && *s->plan_note)
            buf_printf(&b, "; %s", s->plan_note);
        if (s->plan_summary_requests)
            buf_printf(&b, "; %d summary request%s", s->plan_summary_requests,
                       s->plan_summary_requests == 1 ? "" : "s");
        else if (s->plan_summary_reused)
            buf_appends(&b, "; a saved summary was reused");
        buf_appendc(&b, '\n');
    }
    if (s->sum_error)
        buf_printf(&b, "Note: %s\n", s->sum_error);
    buf_appends(&b, "Session: ");
    context_budget_describe(&s->budget, &b);
    if (!s->ctx_model.priced)
        buf_printf(&b, " (no price for %s in prices.tsv: money not counted)",
                   c->model ? c->model : "?");
    buf_appendc(&b, '\n');
    return buf_take(&b);
}

int session_has_budget(const struct session *s)
{
    return s->budget.cap_tokens > 0 || s->budget.cap_usd > 0;
}

void session_spend_get(const struct session *s, struct session_spend *sp)
{
    sp->tokens = s->budget.spent_tokens;
    sp->usd = s->budget.spent_usd;
    sp->usd_unknown = s->budget.usd_unknown;
    sp->cap_tokens = s->budget.cap_tokens;
    sp->cap_usd = s->budget.cap_usd;
}

void session_spend_carry(struct session *s, const struct session_spend *sp)
{
    session_context_setup(s); /* the profile's caps, as the first send takes them */
    s->budget.spent_tokens += sp->tokens;
    s->budget.spent_usd += sp->usd;
    s->budget.usd_unknown |= sp->usd_unknown;
    if (s->budget.cap_tokens <= 0 && s->budget.cap_usd <= 0) {
        s->budget.cap_tokens = sp->cap_tokens;
        s->budget.cap_usd = sp->cap_usd;
    }
}

int session_budget_command(struct session *s, const char *arg, char **msg)
{
    session_context_setup(s);
    struct buf b = BUF_INIT;
    while (arg && (*arg == ' ' || *arg == '\t'))
        arg++;
    if (arg && *arg && context_budget_parse(&s->budget, arg, &b) < 0) {
        *msg = buf_take(&b);
        return -1;
    }
    buf_appends(&b, "Budget: ");
    context_budget_describe(&s->budget, &b);
    *msg = buf_take(&b);
    return 0;
}
