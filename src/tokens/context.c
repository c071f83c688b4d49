/* context.c - token counting with a content cache, the history plan (shorten, merge, summarise,
 * drop), calibration of approximate counts, prices and the session budget. */
#include "config.h"
#include "tokens/context.h"
#include "tokens/tokenizer.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


#define CONTEXT_CACHE_MAX 16384 /* entries before the count cache starts over */

/* x rounded up (x >= 0), without libm. */
static long context_ceil(double x)
{
    long l = (long)x;
    return (double)l < x - 1e-9 ? l + 1 : l;
}

int context_policy_parse(const char *s, enum context_policy *out)
{
    if (!s)
        return -1;
    if (strcasecmp(s, "summarize") == 0 || strcasecmp(s, "summarise") == 0)
        *out = CONTEXT_SUMMARIZE;
    else if (strcasecmp(s, "truncate") == 0)
        *out = CONTEXT_TRUNCATE;
    else if (strcasecmp(s, "off") == 0)
        *out = CONTEXT_OFF;
    else
        return -1;
    return 0;
}

const char *context_policy_name(enum context_policy p)
{
    switch (p) {
    case CONTEXT_SUMMARIZE: return "summarize";
    case CONTEXT_TRUNCATE: return "truncate";
    case CONTEXT_OFF: return "off";
    }
    return "?";
}

/* ---- counting ------------------------------------------------------------------------------ */

struct cache_entry {
    uint64_t hash;   /* 0 = empty slot */
    size_t len;
    long tokens;
};

struct context {
    struct tokenizer *tok; /* NULL: bytes/4, or not opened yet */
    char *pending;         /* the encoding to open on the first count (the table was found) */
    int approx;
    struct cache_entry *slots;
    size_t cap, used;
    long role_tokens[4];   /* system, user, assistant, tool: counted once (0: not yet) */
    size_t tok_texts, tok_bytes; /* what was tokenised (context_tokenized) */
    size_t hash_texts, hash_bytes; /* what was hashed for the cache (context_hashed) */
    struct shorten_memo *memo;     /* the last long texts shortened (context_shorten) */
    size_t memo_next, memo_bytes, short_made;
};

/* A history message shortened by context_shorten, kept for the plans that follow: every plan
 * of a chat (each send, the status after each answer) shortens the same old answers again,
 * each time a UTF-8 check of the whole text and its two ends tokenised (~1 ms for a 1.3 MB
 * answer on the project's VM; with a dozen such answers, a frame or two of the chat's UI
 * thread). Found again by the message's id, where its text lies and its length, a hash of its
 * first and last bytes, its count and the tokens kept: not by a hash of the whole text, which
 * would cost a pass over it each time (the history's texts stay where they are while it holds
 * them; a freed one's place taken by another message would not have the same id). */
struct shorten_memo {
    const char *text;
    int64_t id;
    uint64_t ends; /* context_memo_ends */
    size_t len, out_len;
    long tok_content, keep;
    int exact; /* the rank table was open (an estimate otherwise) */
    char *out;
};
#define CONTEXT_MEMO_N 32                      /* texts remembered, the oldest replaced */
#define CONTEXT_MEMO_BYTES ((size_t)4 << 20)   /* at most this much kept in all */

/* 64-bit hash of text (8 bytes a step); never 0. */
static uint64_t context_hash_raw(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h ^= w * 0x87C37B91114253D5ull;
        h = (h << 31 | h >> 33) * 0x4CF5AD432745937Full;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h ^= w * 0x87C37B91114253D5ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h ? h : 1;
}

/* The hash of text for c's cache, counted (context_hashed). */
static uint64_t context_hash(struct context *c, const char *s, size_t n)
{
    c->hash_texts++;
    c->hash_bytes += n;
    return context_hash_raw(s, n);
}

struct context *context_new(const char *encoding, int approximate, char **err)
{
    struct context *c = xcalloc(1, sizeof *c);
    c->approx = approximate;
    const char *enc = encoding ? encoding : "o200k_base";
    /* The table is mapped on the first count: a request that provably fits (context_plan's
     * byte bound) never touches it. */
    if (tokenizer_available(enc, err) == 0)
        c->pending = xstrdup(enc);
    else
        c->approx = 1;
    c->cap = 256;
    c->slots = xcalloc(c->cap, sizeof *c->slots);
    return c;
}

/* The tokenizer, opened now if this is the first count; NULL: bytes/4. A table that was found
 * but does not open turns the counts into estimates. */
static struct tokenizer *context_tok(struct context *c)
{
    if (c->pending) {
        c->tok = tokenizer_open(c->pending, NULL);
        if (!c->tok)
            c->approx = 1;
        free(c->pending);
        c->pending = NULL;
    }
    return c->tok;
}

void context_free(struct context *c)
{
    if (!c)
        return;
    tokenizer_close(c->tok);
    free(c->pending);
    free(c->slots);
    for (size_t i = 0; c->memo && i < CONTEXT_MEMO_N; i++)
        free(c->memo[i].out);
    free(c->memo);
    free(c);
}

const char *context_encoding(const struct context *c)
{
    return c->pending ? c->pending : c->tok ? tokenizer_name(c->tok) : "bytes/4";
}

int context_approximate(const struct context *c)
{
    return c->approx;
}

size_t context_cached(const struct context *c)
{
    return c->used;
}

void context_tokenized(const struct context *c, size_t *texts, size_t *bytes)
{
    *texts = c->tok_texts;
    *bytes = c->tok_bytes;
}

size_t context_shortened(const struct context *c)
{
    return c->short_made;
}

void context_hashed(const struct context *c, size_t *texts, size_t *bytes)
{
    *texts = c->hash_texts;
    *bytes = c->hash_bytes;
}

int context_table_open(const struct context *c)
{
    return c->tok != NULL;
}

static long context_count_raw(struct context *c, const char *text, size_t len)
{
    struct tokenizer *t = context_tok(c);
    if (t) {
        c->tok_texts++;
        c->tok_bytes += len;
        return (long)tokenizer_count(t, text, len);
    }
    return (long)((len + 3) / 4);
}

static void context_cache_grow(struct context *c)
{
    size_t ncap = c->cap * 2;
    struct cache_entry *ns = xcalloc(ncap, sizeof *ns);
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].hash)
            continue;
        size_t j = c->slots[i].hash & (ncap - 1);
        while (ns[j].hash)
            j = (j + 1) & (ncap - 1);
        ns[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = ns;
    c->cap = ncap;
}

/* The slot of text (hash h) in the cache: the one that holds it, or the empty one where it
 * goes. */
static size_t context_slot(const struct context *c, uint64_t h, size_t len)
{
    size_t j = h & (c->cap - 1);
    while (c->slots[j].hash && !(c->slots[j].hash == h && c->slots[j].len == len))
        j = (j + 1) & (c->cap - 1);
    return j;
}

/* Remember tokens for text (hash h) at slot j, an empty one. */
static void context_remember(struct context *c, uint64_t h, size_t len, size_t j, long tokens)
{
    if (c->used >= CONTEXT_CACHE_MAX) { /* start over rather than grow without end */
        memset(c->slots, 0, c->cap * sizeof *c->slots);
        c->used = 0;
        j = h & (c->cap - 1);
    } else if ((c->used + 1) * 10 > c->cap * 7) {
        context_cache_grow(c);
        j = context_slot(c, h, len);
    }
    c->slots[j] = (struct cache_entry){h, len, tokens};
    c->used++;
}

long context_count(struct context *c, const char *text, size_t len)
{
    if (len < CONTEXT_CACHE_MIN) /* cheaper to count than to remember */
        return context_count_raw(c, text, len);
    uint64_t h = context_hash(c, text, len);
    size_t j = context_slot(c, h, len);
    if (c->slots[j].hash)
        return c->slots[j].tokens;
    long t = context_count_raw(c, text, len);
    context_remember(c, h, len, j, t);
    return t;
}

long context_count_known(struct context *c, const char *text, size_t len)
{
    if (len < CONTEXT_CACHE_MIN)
        return -1;
    uint64_t h = context_hash(c, text, len);
    size_t j = context_slot(c, h, len);
    return c->slots[j].hash ? c->slots[j].tokens : -1;
}

void context_count_record(struct context *c, const char *text, size_t len, long tokens)
{
    if (len < CONTEXT_CACHE_MIN || tokens < 0)
        return;
    uint64_t h = context_hash(c, text, len);
    size_t j = context_slot(c, h, len);
    if (c->slots[j].hash)
        c->slots[j].tokens = tokens;
    else
        context_remember(c, h, len, j, tokens);
}

/* Tokens of a role name: the four of the API counted once per counter. */
static long context_role_tokens(struct context *c, const char *role)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    /* the first letter picks the one name to compare (twice per message of a plan) */
    int i = role[0] == 's' ? 0 : role[0] == 'u' ? 1 : role[0] == 'a' ? 2 : role[0] == 't' ? 3 : -1;
    if (i >= 0 && strcmp(role, roles[i]) == 0) {
        if (!c->role_tokens[i])
            c->role_tokens[i] = context_count(c, role, strlen(role));
        return c->role_tokens[i];
    }
    return context_count(c, role, strlen(role));
}

long context_msg_tokens(struct context *c, const char *role, const char *text, size_t len)
{
    return CONTEXT_MSG_OVERHEAD + context_role_tokens(c, role) +
           context_count(c, text ? text : "", text ? len : 0);
}

struct context_stream {
    struct context *c;
    struct tok_stream *ts; /* NULL: bytes/4, or nothing fed yet */
    size_t bytes;
};

struct context_stream *context_stream_new(struct context *c)
{
    struct context_stream *s = xcalloc(1, sizeof *s);
    s->c = c;
    return s;
}

void context_stream_feed(struct context_stream *s, const char *delta, size_t len)
{
    if (!s->ts && !s->bytes && len) {
        struct tokenizer *t = context_tok(s->c);
        if (t)
            s->ts = tokenizer_stream_new(t);
    }
    s->bytes += len;
    if (s->ts)
        tokenizer_stream_feed(s->ts, delta, len);
}

long context_stream_count(struct context_stream *s)
{
    return s->ts ? (long)tokenizer_stream_count(s->ts) : (long)((s->bytes + 3) / 4);
}

void context_stream_reset(struct context_stream *s)
{
    s->bytes = 0;
    if (s->ts)
        tokenizer_stream_reset(s->ts);
}

void context_stream_free(struct context_stream *s)
{
    if (!s)
        return;
    if (s->ts)
        tokenizer_stream_free(s->ts);
    free(s);
}

/* ---- formatting ---------------------------------------------------------------------------- */

void context_format_tokens(struct buf *out, long long n, int approximate)
{
    char digits[32];
    int neg = n < 0;
    snprintf(digits, sizeof digits, "%lld", neg ? -n : n);
    size_t d = strlen(digits);
    if (approximate)
        buf_appendc(out, '~');
    if (neg)
        buf_appendc(out, '-');
    for (size_t i = 0; i < d; i++) {
        if (i && (d - i) % 3 == 0)
            buf_appendc(out, ',');
        buf_appendc(out, digits[i]);
    }
}

/* A new string with the tokens formatted. */
static char *context_fmt(long long n, int approximate)
{
    struct buf b = BUF_INIT;
    context_format_tokens(&b, n, approximate);
    return buf_take(&b);
}

/* ---- the plan ------------------------------------------------------------------------------ */

/* The first `head` and the last `tail` ids of a text, collected from tokenizer_encode_each():
 * memory O(head + tail), not O(tokens of the text). */
struct ends {
    uint32_t *head, *ring; /* ring: the last `tail` ids, the oldest at (n - tail) % tail */
    size_t want_head, want_tail, n;
};

static void ends_take(void *arg, const uint32_t *ids, size_t k)
{
    struct ends *e = arg;
    for (size_t i = 0; i < k; i++, e->n++) {
        if (e->n < e->want_head)
            e->head[e->n] = ids[i];
        if (e->want_tail)
            e->ring[e->n % e->want_tail] = ids[i];
    }
}

/* Shorten text (tok_content tokens) to about keep tokens: head and tail with a marker between.
 * Returns a new string (caller frees) and its length in *out_len. Memory: O(keep) besides the
 * tokenizer's bounded pieces, whatever the length of text. */
static char *context_shorten_text(struct context *c, const char *text, size_t len,
                                  long tok_content, long keep, size_t *out_len)
{
    long head = keep / 2, tail = keep - head;
    struct buf hb = BUF_INIT, tb = BUF_INIT, out = BUF_INIT;
    struct tok_ids eh = TOK_IDS_INIT, et = TOK_IDS_INIT;
    if (c->tok && tokenizer_encode_ends(c->tok, text, len, (size_t)head, (size_t)tail, &eh,
                                        &et) == 0) {
        /* the ends alone: the pieces between them are found, never merged */
        (void)tokenizer_decode(c->tok, eh.ids, eh.len, &hb);
        (void)tokenizer_decode(c->tok, et.ids, et.len, &tb);
        tok_ids_free(&eh);
        tok_ids_free(&et);
    } else if (c->tok) {
        struct ends e = {xmalloc(((size_t)head + 1) * sizeof *e.head),
                         xmalloc(((size_t)tail + 1) * sizeof *e.ring), (size_t)head,
                         (size_t)tail, 0};
        tokenizer_encode_each(c->tok, text, len, ends_take, &e);
        size_t th = (size_t)tail;
        if (e.n < (size_t)(head + tail)) /* then n / 2 <= head <= tail: both ends are here */
            head = tail = (long)(e.n / 2);
        (void)tokenizer_decode(c->tok, e.head, (size_t)head, &hb);
        for (size_t i = e.n - (size_t)tail; i < e.n; i++)
            (void)tokenizer_decode(c->tok, &e.ring[i % th], 1, &tb);
        free(e.head);
        free(e.ring);
    } else {
        size_t hbytes = (size_t)head * 4, tbytes = (size_t)tail * 4;
        if (hbytes + tbytes > len)
            hbytes = tbytes = len / 2;
        buf_append(&hb, text, hbytes);
        buf_append(&tb, text + len - tbytes, tbytes);
    }
    /* Never cut a UTF-8 sequence: the head loses an unfinished tail, the tail its leading
     * continuation bytes. */
    size_t hl = hb.len - utf8_incomplete_tail(buf_str(&hb), hb.len);
    size_t ts = 0;
    while (ts < tb.len && ts < 3 && ((unsigned char)tb.data[ts] & 0xC0) == 0x80)
        ts++;
    buf_append(&out, buf_str(&hb), hl);
    long elided = tok_content - head - tail;
    char *n = context_fmt(elided > 0 ? elided : 0, 0);
    buf_printf(&out, "\n[... %s " CONTEXT_ELISION " ...]\n", n);
    free(n);
    buf_append(&out, buf_str(&tb) + ts, tb.len - ts);
    buf_free(&hb);
    buf_free(&tb);
    *out_len = out.len;
    return buf_take(&out);
}

/* A hash of the first and last 256 bytes of text (struct shorten_memo). */
static uint64_t context_memo_ends(const char *text, size_t len)
{
    size_t k = len < 256 ? len : 256;
    return context_hash_raw(text, k) ^ (context_hash_raw(text + len - k, k) * 31);
}

/* context_shorten_text for history message id (0: none, not remembered), or a copy of what it
 * made for the same message before (struct shorten_memo). */
static char *context_shorten(struct context *c, int64_t id, const char *text, size_t len,
                             long tok_content, long keep, size_t *out_len)
{
    if (!id) {
        c->short_made++;
        return context_shorten_text(c, text, len, tok_content, keep, out_len);
    }
    uint64_t h = context_memo_ends(text, len);
    int exact = c->tok != NULL; /* as context_shorten_text finds it: not opened for this */
    for (size_t i = 0; c->memo && i < CONTEXT_MEMO_N; i++) {
        const struct shorten_memo *m = &c->memo[i];
        if (m->out && m->text == text && m->id == id && m->ends == h && m->len == len &&
            m->tok_content == tok_content && m->keep == keep && m->exact == exact) {
            *out_len = m->out_len;
            return xstrndup(m->out, m->out_len);
        }
    }
    char *out = context_shorten_text(c, text, len, tok_content, keep, out_len);
    c->short_made++;
    if (*out_len > CONTEXT_MEMO_BYTES / 8)
        return out; /* not kept: a few such would fill the memo */
    if (!c->memo)
        c->memo = xcalloc(CONTEXT_MEMO_N, sizeof *c->memo);
    struct shorten_memo *m = &c->memo[c->memo_next];
    c->memo_next = (c->memo_next + 1) % CONTEXT_MEMO_N;
    if (m->out)
        c->memo_bytes -= m->out_len + 1;
    free(m->out);
    m->out = NULL;
    /* over the bytes kept in all: the others go first, oldest first */
    for (size_t k = 0; k < CONTEXT_MEMO_N && c->memo_bytes + *out_len + 1 > CONTEXT_MEMO_BYTES;
         k++) {
        struct shorten_memo *o = &c->memo[(c->memo_next + k) % CONTEXT_MEMO_N];
        if (o->out) {
            c->memo_bytes -= o->out_len + 1;
            free(o->out);
            o->out = NULL;
        }
    }
    *m = (struct shorten_memo){text, id, h, len, *out_len, tok_content, keep, exact,
                               xstrndup(out, *out_len)};
    c->memo_bytes += *out_len + 1;
    return out;
}

long context_plan_budget(const struct context *c, const struct context_params *p)
{
    double ratio = c->approx && p->ratio > 0 ? p->ratio : 1.0;
    long avail = p->window - p->reserve;
    long b = avail > 0 ? (long)(avail / ratio) - (p->fixed > 0 ? p->fixed : 0) : 0;
    return b > 0 ? b : 0;
}

long context_long_limit(long budget)
{
    return budget / 6 > 64 ? budget / 6 : 64;
}

/* Working state of one plan. */
struct plan_work {
    struct context *c;
    const struct context_msg *m;
    struct context_plan *out;
};

static void item_set_owned(struct plan_work *w, struct context_item *it, char *text, size_t len)
{
    free(it->owned);
    it->owned = text;
    it->content = text;
    it->len = len;
    it->tokens = context_msg_tokens(w->c, it->role, text, len) + it->extra;
}

static long plan_sum(const struct context_plan *p, size_t from, size_t to)
{
    long s = 0;
    for (size_t i = from; i < to && i < p->n_items; i++)
        s += p->items[i].tokens;
    return s;
}

static long plan_total(const struct context_plan *p)
{
    return CONTEXT_REPLY_PRIMER + plan_sum(p, 0, p->n_items);
}

/* Remove items [from, to) (their owned text is freed). */
static void plan_remove(struct context_plan *p, size_t from, size_t to)
{
    if (from >= to)
        return; /* nothing: p->items may be NULL, and NULL + 0 is undefined */
    for (size_t i = from; i < to; i++)
        free(p->items[i].owned);
    memmove(p->items + from, p->items + to, (p->n_items - to) * sizeof *p->items);
    p->n_items -= to - from;
}

static void plan_set_fate(struct context_plan *p, size_t first, size_t last, unsigned char f)
{
    for (size_t i = first; i <= last && i < p->n_history; i++)
        p->fate[i] = f;
}

static int is_role(const char *r, const char *want)
{
    return r && strcmp(r, want) == 0;
}

/* Summary budget in raw tokens. */
static long plan_summary_budget(const struct context_params *p, double ratio)
{
    if (p->summary_tokens > 0)
        return p->summary_tokens;
    long s = (long)(p->window / 8 / ratio);
    return s < 32 ? 32 : s > 1024 ? 1024 : s;
}

/* The summary message for text; shortened when far longer than the budget. */
static void plan_summary_item(struct plan_work *w, struct context_item *it, const char *text,
                              long sbudget)
{
    struct buf b = BUF_INIT;
    buf_printf(&b, "%s\n%s", CONTEXT_SUMMARY_HEAD, text);
    it->role = "system";
    it->flags = CONTEXT_F_SUMMARY;
    it->owned = NULL;
    long ct = context_count(w->c, b.data, b.len);
    if (ct > sbudget + sbudget / 2) {
        size_t nl;
        char *s = context_shorten(w->c, 0, b.data, b.len, ct, sbudget, &nl);
        buf_free(&b);
        item_set_owned(w, it, s, nl);
        return;
    }
    size_t n = b.len;
    item_set_owned(w, it, buf_take(&b), n);
}

static void plan_role_label(struct buf *b, const char *role)
{
    if (is_role(role, "user"))
        buf_appends(b, "User");
    else if (is_role(role, "assistant"))
        buf_appends(b, "Assistant");
    else if (is_role(role, "system"))
        buf_appends(b, "System");
    else
        buf_appends(b, role);
}

const char *context_summary_instruction(void)
{
    return "You condense chat history. The user gives you part of a conversation between a user "
           "and an assistant (and maybe a summary of what came before it). Write one concise "
           "summary of all of it, in the conversation's language, for the assistant to continue "
           "from: keep facts, names, numbers, decisions, code identifiers, the user's wishes and "
           "open questions; leave out pleasantries. Answer with the summary only.";
}

/* Step 3: choose what one new summary request covers; items[start..z) is the region after the
 * known summary prev (or from the first unprotected item a), prot the tokens that stay anyway.
 * The summary stands for items[a..pick]: the previous summary plus the turns newly dropped,
 * up to the first turn end after which the rest fits half the budget (so the next turns reuse
 * it for a while). One request must hold it all; when the dropped turns are too many for one,
 * it holds the newest of them and the older ones are left out (out->sum_skipped): one summary
 * request per turn, never a train of them. */
static void plan_need_summary(struct plan_work *w, const struct context_params *p, size_t a,
                              size_t start, size_t z, const char *prev, int prev_idx, long sbudget)
{
    struct context_plan *out = w->out;
    const struct context_msg *m = w->m;
    if (start >= z || !m[out->items[a].first].id)
        return;
    long prot = CONTEXT_REPLY_PRIMER + plan_sum(out, 0, a) + out->items[z].tokens;
    long prev_tokens = prev ? context_count(w->c, prev, strlen(prev)) : 0;
    /* The summary request must fit the window too: instruction, framing, the summary. */
    const char *instr = context_summary_instruction();
    long instr_tokens = context_msg_tokens(w->c, "system", instr, strlen(instr));
    long in_limit = (long)(p->window / out->ratio) - sbudget - CONTEXT_REPLY_PRIMER - 32 -
                    instr_tokens;
    in_limit -= in_limit / 20;
    long target = out->budget / 2;
    size_t pick = (size_t)-1, largest = (size_t)-1;
    long rest = plan_sum(out, start, z);
    for (size_t k = start; k < z; k++) {
        rest -= out->items[k].tokens; /* plan_sum(out, k + 1, z) */
        int turn_end = k + 1 == z || is_role(out->items[k + 1].role, "user");
        if (!turn_end || !m[out->items[k].last].id)
            continue;
        largest = k;
        if (prot + sbudget + rest <= target) {
            pick = k;
            break;
        }
    }
    if (pick == (size_t)-1)
        pick = largest;
    if (pick == (size_t)-1)
        return;
    /* the newest turns up to pick that one request holds */
    size_t lo = (size_t)-1;
    long input = prev_tokens, held = 0;
    for (size_t k = pick + 1; k-- > start;) {
        input += out->items[k].tokens;
        if (input > in_limit)
            break;
        if (k == start || is_role(out->items[k].role, "user")) {
            lo = k;
            held = input - prev_tokens;
        }
    }
    if (lo == (size_t)-1)
        return; /* not even the newest dropped turn fits one request: step 4 drops them */
    out->sum_skipped = out->items[lo].first - out->items[start].first;
    struct buf b = BUF_INIT;
    if (prev)
        buf_printf(&b, "Summary so far:\n%s\n\nMessages to add to it:\n\n", prev);
    else
        buf_appends(&b, "Conversation to summarise:\n\n");
    for (size_t k = lo; k <= pick; k++) {
        plan_role_label(&b, out->items[k].role);
        buf_appends(&b, ": ");
        buf_append(&b, out->items[k].content, out->items[k].len);
        buf_appends(&b, "\n\n");
    }
    buf_printf(&b, "(Write at most about %ld words.)", sbudget * 3 / 4);
    out->need_summary = 1;
    out->sum_first_id = m[out->items[a].first].id;
    out->sum_last_id = m[out->items[pick].last].id;
    out->sum_from = out->items[lo].first;
    out->sum_to = out->items[pick].last;
    out->sum_prev = prev_idx;
    /* the text goes to the server: an answer a broken server sent with invalid UTF-8 or a NUL
     * goes as U+FFFD (as in session_planned_body), so the summary's body is valid JSON and
     * nothing after a NUL is lost */
    size_t clean_len;
    char *clean = utf8_for_wire(b.data ? b.data : "", b.len, &clean_len);
    if (clean) {
        buf_free(&b);
        out->sum_input = clean;
    } else {
        out->sum_input = buf_take(&b);
    }
    out->sum_tokens = sbudget;
    out->sum_after = prot + sbudget + plan_sum(out, pick + 1, z);
    /* framing: the labels and headings, about a token or two per message */
    out->sum_prompt = instr_tokens + CONTEXT_MSG_OVERHEAD + 1 + CONTEXT_REPLY_PRIMER + 16 +
                      prev_tokens + held;
}

static void plan_finish(struct context_plan *out)
{
    out->total = plan_total(out);
    out->shown = out->approximate ? context_ceil((out->total + out->fixed) * out->ratio)
                                  : out->total + out->fixed;
    out->fits = out->total <= out->budget;
    out->n_shortened = out->n_merged = out->n_summarized = out->n_dropped = 0;
    for (size_t i = 0; i < out->n_history; i++)
        switch (out->fate[i]) {
        case CONTEXT_SHORTENED: out->n_shortened++; break;
        case CONTEXT_MERGED: out->n_merged++; break;
        case CONTEXT_SUMMARIZED: out->n_summarized++; break;
        case CONTEXT_DROPPED: out->n_dropped++; break;
        default: break;
        }
}

/* Every message as one item with its token count (an upper bound from its bytes when
 * p->bounds_ok shows the whole history fits anyway), and the totals. */
static void plan_items(struct context *c, const struct context_msg *m, size_t n,
                       const struct context_params *p, struct context_plan *out)
{
    memset(out, 0, sizeof *out);
    out->summary_used = -1;
    out->sum_prev = -1;
    out->approximate = c->approx;
    out->ratio = c->approx && p->ratio > 0 ? p->ratio : 1.0;
    out->budget = context_plan_budget(c, p);
    out->fixed = p->fixed > 0 ? p->fixed : 0;
    out->n_history = n;
    out->fate = xcalloc(n ? n : 1, 1);
    out->items = xcalloc(n ? n : 1, sizeof *out->items);
    out->content_tokens = xmalloc((n ? n : 1) * sizeof *out->content_tokens);
    /* A byte-level BPE token covers at least one byte: when the bytes fit, so do the tokens,
     * and an exact counter need not count (nor map its table) at all. */
    if (p->bounds_ok && !c->approx) {
        size_t sum = CONTEXT_REPLY_PRIMER, lim = out->budget > 0 ? (size_t)out->budget : 0;
        for (size_t i = 0; i < n && sum <= lim; i++) {
            size_t len = m[i].content ? m[i].len : 0;
            size_t ex = m[i].extra > 0 ? (size_t)m[i].extra : 0;
            sum += len < lim && ex < lim ? CONTEXT_MSG_OVERHEAD + strlen(m[i].role) + len + ex
                                         : lim + 1;
        }
        out->bounded = sum <= lim;
    }
    for (size_t i = 0; i < n; i++) {
        struct context_item *it = &out->items[i];
        it->role = m[i].role;
        it->content = m[i].content ? m[i].content : "";
        it->len = m[i].content ? m[i].len : 0;
        /* a count stored with the message is used as it is: a resume tokenises only what is
         * new (the estimate of an approximate counter is bytes/4 or the same tokenizer's) */
        long ct = -1;
        if (!out->bounded)
            ct = m[i].tokens > 0 && it->len ? m[i].tokens : context_count(c, it->content, it->len);
        out->content_tokens[i] = ct;
        it->extra = m[i].extra > 0 ? m[i].extra : 0;
        it->tokens = it->orig_tokens =
            (out->bounded ? (long)(CONTEXT_MSG_OVERHEAD + strlen(it->role) + it->len)
                          : CONTEXT_MSG_OVERHEAD + context_role_tokens(c, it->role) + ct) +
            it->extra;
        it->first = it->last = i;
    }
    out->n_items = n;
    out->history_tokens = plan_total(out);
    plan_finish(out);
}

/* The newest message with the system prompt (P leading items) and the reserve does not fit
 * whatever is left out: out->error says so, and nothing is sent. */
static void plan_too_long(struct context_plan *out, const struct context_params *p, size_t P,
                          long need)
{
    struct buf e = BUF_INIT;
    int ap = out->approximate;
    size_t n = out->n_items;
    char *msg = context_fmt(context_ceil(out->items[n - 1].tokens * out->ratio), ap);
    char *sys = context_fmt(context_ceil(plan_sum(out, 0, P) * out->ratio), ap);
    char *res = context_fmt(p->reserve, 0), *win = context_fmt(p->window, 0);
    char *needs = context_fmt(context_ceil((need + out->fixed) * out->ratio) + p->reserve, ap);
    char *tools = out->fixed > 0 ? context_fmt(context_ceil(out->fixed * out->ratio), ap) : NULL;
    buf_printf(&e, "the message is too long for the model's context window: it takes %s "
                   "tokens; with the system prompt (%s)%s%s%s and the answer reserve (%s) the "
                   "request needs %s tokens, but the window is %s. Shorten the message%s, "
                   "or lower the answer reserve (--max-tokens / reserve_tokens)",
               msg, sys, tools ? ", the tool definitions (" : "", tools ? tools : "",
               tools ? ")" : "", res, needs, win, P ? " or the system prompt" : "");
    free(tools);
    free(msg);
    free(sys);
    free(res);
    free(win);
    free(needs);
    out->error = buf_take(&e);
    plan_remove(out, 0, out->n_items);
    out->fits = 0;
    out->total = out->shown = 0;
}

/* Step 1: shorten very long old messages (after the P protected ones, before the newest),
 * oldest first, until the plan fits. Returns the new total. */
static long plan_shorten(struct plan_work *w, size_t P, long total)
{
    struct context_plan *out = w->out;
    struct context *c = w->c;
    size_t newest = out->n_items - 1;
    long long_limit = context_long_limit(out->budget);
    long keep = long_limit / 3 > 32 ? long_limit / 3 : 32;
    for (size_t i = P; i < newest && total > out->budget; i++) {
        struct context_item *it = &out->items[i];
        /* the content's tokens, known from step 0 (nothing is shortened before this step) */
        long ct = it->tokens - CONTEXT_MSG_OVERHEAD - context_role_tokens(c, it->role) -
                  it->extra;
        if (ct <= long_limit)
            continue;
        size_t nl;
        char *s = context_shorten(c, w->m[it->first].id, it->content, it->len, ct, keep, &nl);
        long before = it->tokens;
        item_set_owned(w, it, s, nl);
        it->flags |= CONTEXT_F_SHORTENED;
        out->fate[i] = CONTEXT_SHORTENED;
        total += it->tokens - before;
    }
    return total;
}

/* Step 2: merge consecutive messages of the same role (not the protected ones): one pass,
 * each run of one role joined once. Tool results are never joined: each answers its own call
 * id, and the request sends an item's id only when it stands for one message. Returns the new
 * total. */
static long plan_merge(struct plan_work *w, size_t P)
{
    struct context_plan *out = w->out;
    size_t z = out->n_items - 1, dst = P;
    for (size_t j = P; j < z;) {
        size_t k = j + 1;
        int tool = strcmp(out->items[j].role, "tool") == 0;
        while (!tool && k < z && strcmp(out->items[k].role, out->items[j].role) == 0)
            k++;
        struct context_item it = out->items[j];
        if (k - j > 1) {
            struct buf t = BUF_INIT;
            for (size_t q = j; q < k; q++) {
                if (q > j)
                    buf_appends(&t, "\n\n");
                buf_append(&t, out->items[q].content, out->items[q].len);
                if (q > j) {
                    it.orig_tokens += out->items[q].orig_tokens;
                    it.extra += out->items[q].extra;
                    it.flags |= out->items[q].flags & CONTEXT_F_SHORTENED;
                    plan_set_fate(out, out->items[q].first, out->items[q].last,
                                  CONTEXT_MERGED);
                    free(out->items[q].owned);
                }
            }
            it.owned = NULL;
            size_t tl = t.len;
            free(out->items[j].owned);
            item_set_owned(w, &it, buf_take(&t), tl);
            it.flags |= CONTEXT_F_MERGED;
            it.last = out->items[k - 1].last;
        }
        out->items[dst++] = it;
        j = k;
    }
    out->items[dst++] = out->items[z];
    out->n_items = dst;
    return plan_total(out);
}

/* Step 3: summarise the oldest turns (after the P protected items): reuse the saved summary
 * that covers the most of them, and ask for a new one when that is not enough. Returns the
 * new total. */
static long plan_summarize(struct plan_work *w, const struct context_params *p, size_t P,
                           long total)
{
    struct context_plan *out = w->out;
    const struct context_msg *m = w->m;
    size_t a = P, z = out->n_items - 1;
    long sbudget = plan_summary_budget(p, out->ratio);
    int best = -1;
    size_t best_k = 0;
    int64_t first_id = m[out->items[a].first].id;
    for (size_t s = 0; s < p->n_summaries && first_id; s++) {
        if (p->summaries[s].first_id != first_id || !p->summaries[s].text)
            continue;
        for (size_t k = a; k < z; k++)
            if (m[out->items[k].last].id == p->summaries[s].last_id &&
                (best < 0 || k > best_k)) {
                best = (int)s;
                best_k = k;
            }
    }
    size_t start = a;
    const char *prev = NULL;
    if (best >= 0) {
        struct context_item si;
        memset(&si, 0, sizeof si);
        si.first = out->items[a].first;
        si.last = out->items[best_k].last;
        for (size_t k = a; k <= best_k; k++)
            si.orig_tokens += out->items[k].orig_tokens;
        plan_summary_item(w, &si, p->summaries[best].text, sbudget);
        plan_set_fate(out, si.first, si.last, CONTEXT_SUMMARIZED);
        plan_remove(out, a + 1, best_k + 1);
        free(out->items[a].owned);
        out->items[a] = si;
        out->summary_used = best;
        z = out->n_items - 1;
        start = a + 1;
        prev = p->summaries[best].text;
        total = plan_total(out);
    }
    if (total > out->budget && !p->no_new_summary)
        plan_need_summary(w, p, a, start, z, prev, best, sbudget);
    return total;
}

/* Step 4: drop the oldest turns after the P protected items (the summary first: it stands
 * for the oldest ones). One pass: find how many leading units must go, then remove them at
 * once. */
static void plan_drop(struct context_plan *out, size_t P, long total)
{
    size_t a = P, z = out->n_items - 1, e = a;
    while (total > out->budget && e < z) {
        size_t u = e + 1;
        if (!(out->items[e].flags & CONTEXT_F_SUMMARY))
            while (u < z && !is_role(out->items[u].role, "user"))
                u++;
        for (size_t k = e; k < u; k++) {
            total -= out->items[k].tokens;
            plan_set_fate(out, out->items[k].first, out->items[k].last, CONTEXT_DROPPED);
        }
        e = u;
    }
    plan_remove(out, a, e);
}

int context_plan(struct context *c, const struct context_msg *m, size_t n,
                 const struct context_params *p, struct context_plan *out)
{
    plan_items(c, m, n, p, out);
    if (p->policy == CONTEXT_OFF || out->fits || n == 0)
        return 0;

    size_t P = 0; /* leading system messages: never touched */
    while (P < n && is_role(m[P].role, "system"))
        P++;
    if (P >= n)
        return 0; /* nothing but system messages: nothing to do */
    long need = CONTEXT_REPLY_PRIMER + plan_sum(out, 0, P) + out->items[n - 1].tokens;
    if (need > out->budget) {
        plan_too_long(out, p, P, need);
        return -1;
    }
    struct plan_work w = {c, m, out};
    long total = plan_shorten(&w, P, plan_total(out));
    if (total > out->budget)
        total = plan_merge(&w, P);
    if (total > out->budget && p->policy == CONTEXT_SUMMARIZE)
        total = plan_summarize(&w, p, P, total);
    if (total > out->budget)
        plan_drop(out, P, total);
    plan_finish(out);
    return 0;
}

void context_plan_free(struct context_plan *plan)
{
    if (!plan)
        return;
    for (size_t i = 0; i < plan->n_items; i++)
        free(plan->items[i].owned);
    free(plan->items);
    free(plan->fate);
    free(plan->sum_input);
    free(plan->content_tokens);
    free(plan->error);
    memset(plan, 0, sizeof *plan);
    plan->summary_used = plan->sum_prev = -1;
}

void context_plan_describe(const struct context_plan *p, struct buf *out)
{
    const struct {
        size_t n;
        const char *what;
    } parts[] = {
        {p->n_shortened, "shortened"},
        {p->n_merged, "merged"},
        {p->n_summarized, "summarised"},
        {p->n_dropped, "dropped"},
    };
    int any = 0;
    for (size_t i = 0; i < TT_ARRAY_LEN(parts); i++) {
        if (!parts[i].n)
            continue;
        buf_printf(out, "%s%zu %s", any ? ", " : "", parts[i].n, parts[i].what);
        any = 1;
    }
    if (any)
        buf_appends(out, p->n_shortened + p->n_merged + p->n_summarized + p->n_dropped == 1
                             ? " (old message)" : " (old messages)");
}

void context_plan_report(const struct context_plan *p, const struct context_params *par,
                         struct buf *out)
{
    int ap = p->approximate;
    struct buf t = BUF_INIT;
    buf_printf(out, "%zu message%s, ", p->n_items, util_plural((long long)p->n_items));
    context_format_tokens(out, p->shown, ap);
    buf_printf(out, " token%s of ", util_plural(p->shown));
    context_format_tokens(out, par->window - par->reserve, 0);
    buf_appends(out, " available (window ");
    context_format_tokens(out, par->window, 0);
    buf_appends(out, " - answer reserve ");
    context_format_tokens(out, par->reserve, 0);
    buf_printf(out, "), policy %s\n", context_policy_name(par->policy));
    for (size_t i = 0; i < p->n_items; i++) {
        const struct context_item *it = &p->items[i];
        buf_reset(&t);
        context_format_tokens(&t, ap ? context_ceil(it->tokens * p->ratio) : it->tokens, ap);
        buf_printf(out, "%4zu  %-9s %9s", i + 1, it->role, buf_str(&t));
        if (it->flags & CONTEXT_F_SUMMARY)
            buf_printf(out, "  summary of messages %zu-%zu", it->first + 1, it->last + 1);
        else if (it->first != it->last)
            buf_printf(out, "  messages %zu-%zu merged", it->first + 1, it->last + 1);
        else
            buf_printf(out, "  message %zu", it->first + 1);
        if (it->flags & CONTEXT_F_SHORTENED) {
            buf_appends(out, ", shortened from ");
            context_format_tokens(out, it->orig_tokens, ap);
        }
        /* first line of the text, as a reminder */
        size_t k = 0, shown = 0;
        const char *s = it->content;
        if (it->flags & CONTEXT_F_SUMMARY) {
            const char *nl = memchr(s, '\n', it->len);
            k = nl ? (size_t)(nl - s) + 1 : 0;
        }
        buf_appends(out, ": ");
        if (it->len == 0 && i + 1 == p->n_items)
            buf_appends(out, "(your next message)");
        while (k < it->len && shown < 40) {
            uint32_t cp;
            size_t l = utf8_decode(s + k, it->len - k, &cp);
            if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
                buf_appendc(out, ' ');
            else
                buf_append(out, s + k, l);
            k += l ? l : 1;
            shown++;
        }
        if (k < it->len)
            buf_appends(out, "...");
        buf_appendc(out, '\n');
    }
    buf_printf(out, "      reply primer %5d\n", CONTEXT_REPLY_PRIMER);
    if (p->fixed > 0) {
        buf_reset(&t);
        context_format_tokens(&t, ap ? context_ceil(p->fixed * p->ratio) : p->fixed, ap);
        buf_printf(out, "      tool definitions %s (sent with every request)\n", buf_str(&t));
    }
    if (p->n_shortened + p->n_merged + p->n_summarized + p->n_dropped) {
        buf_appends(out, "History compressed: ");
        context_plan_describe(p, out);
        buf_appendc(out, '\n');
    }
    if (!p->fits) {
        buf_appends(out, "It does not fit: ");
        context_format_tokens(out, p->shown, ap);
        buf_appends(out, " > ");
        context_format_tokens(out, par->window - par->reserve, 0);
        buf_appendc(out, '\n');
    }
    buf_free(&t);
}

/* ---- calibration --------------------------------------------------------------------------- */

struct calib_row {
    char *model;
    double ratio;
    long samples;
    double sum_est, sum_rep;
};

struct context_calib {
    struct calib_row *rows;
    size_t n, cap;
};

struct context_calib *context_calib_new(void)
{
    return xcalloc(1, sizeof(struct context_calib));
}

void context_calib_free(struct context_calib *cal)
{
    if (!cal)
        return;
    for (size_t i = 0; i < cal->n; i++)
        free(cal->rows[i].model);
    free(cal->rows);
    free(cal);
}

static struct calib_row *calib_find(const struct context_calib *cal, const char *model)
{
    for (size_t i = 0; i < cal->n; i++)
        if (strcmp(cal->rows[i].model, model) == 0)
            return &cal->rows[i];
    return NULL;
}

static struct calib_row *calib_add(struct context_calib *cal, const char *model)
{
    XGROW(cal->rows, cal->n + 1, cal->cap);
    struct calib_row *r = &cal->rows[cal->n++];
    memset(r, 0, sizeof *r);
    r->model = xstrdup(model);
    r->ratio = 1.0;
    return r;
}

double context_calibrate(struct context_calib *cal, const char *model, long estimated,
                         long reported)
{
    if (!model)
        model = "";
    struct calib_row *r = calib_find(cal, model);
    double cur = r ? r->ratio : 1.0;
    if (estimated < CONTEXT_CALIB_MIN || reported <= 0)
        return cur;
    double x = (double)reported / (double)estimated;
    if (x < 0.25 || x > 4)
        return cur;
    if (!r)
        r = calib_add(cal, model);
    r->samples++;
    if (r->samples <= CONTEXT_CALIB_WARMUP) {
        r->sum_est += (double)estimated;
        r->sum_rep += (double)reported;
        r->ratio = r->sum_rep / r->sum_est;
    } else {
        r->ratio += CONTEXT_CALIB_ALPHA * (x - r->ratio);
    }
    return r->ratio;
}

double context_calib_ratio(const struct context_calib *cal, const char *model, long *samples)
{
    const struct calib_row *r = cal && model ? calib_find(cal, model) : NULL;
    if (samples)
        *samples = r ? r->samples : 0;
    return r ? r->ratio : 1.0;
}

int context_calib_load(struct context_calib *cal, const char *path)
{
    size_t len;
    char *text = util_read_file(path, &len, 1 << 20);
    if (!text)
        return errno == ENOENT ? 0 : -1;
    for (char *cur = text, *line; (line = util_next_data_line(&cur));) {
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = '\0';
        double ratio = 0, se = 0, sr = 0;
        long samples = 0;
        if (sscanf(tab + 1, "%lf\t%ld\t%lf\t%lf", &ratio, &samples, &se, &sr) < 2 ||
            !(ratio >= 0.25 && ratio <= 4) || samples < 0)
            continue;
        struct calib_row *r = calib_find(cal, line);
        if (!r)
            r = calib_add(cal, line);
        r->ratio = ratio;
        r->samples = samples;
        r->sum_est = se;
        r->sum_rep = sr;
    }
    free(text);
    return 0;
}

int context_calib_save(const struct context_calib *cal, const char *path)
{
    char *tmp = xasprintf("%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    struct buf b = BUF_INIT;
    buf_appends(&b, "# tokterm calibration: model, ratio of the server's prompt tokens to "
                    "tokterm's estimate, samples, sums\n");
    for (size_t i = 0; i < cal->n; i++) {
        const struct calib_row *r = &cal->rows[i];
        if (strchr(r->model, '\n') || strchr(r->model, '\t'))
            continue;
        buf_printf(&b, "%s\t%.6f\t%ld\t%.0f\t%.0f\n", r->model, r->ratio, r->samples, r->sum_est,
                   r->sum_rep);
    }
    ssize_t wr = write(fd, buf_str(&b), b.len);
    int ok = wr == (ssize_t)b.len;
    int e = errno;
    buf_free(&b);
    if (close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0) {
        e = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        errno = e ? e : EIO;
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* ---- prices -------------------------------------------------------------------------------- */

/* Longest-prefix row for model in the price file text; 1 when found. */
static int price_scan(const char *path, const char *model, struct context_price *out)
{
    size_t len;
    char *text = util_read_file(path, &len, 1 << 20);
    if (!text)
        return 0;
    size_t best = 0;
    int found = 0;
    for (char *cur = text, *line; (line = util_next_data_line(&cur));) {
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = '\0';
        size_t pl = strlen(line);
        if (pl >= sizeof out->prefix || pl <= best || strncmp(model, line, pl) != 0)
            continue;
        double in = -1, outp = -1, cached = -1;
        int got = sscanf(tab + 1, "%lf\t%lf\t%lf", &in, &outp, &cached);
        if (got < 2 || in < 0 || outp < 0)
            continue;
        if (got < 3 || cached < 0)
            cached = in;
        snprintf(out->prefix, sizeof out->prefix, "%s", line);
        out->in = in;
        out->out = outp;
        out->cached = cached;
        best = pl;
        found = 1;
    }
    free(text);
    return found;
}

int context_price_lookup(const char *model, const char *user_file, struct context_price *out)
{
    if (!model || !*model)
        return -1;
    const char *slash = strrchr(model, '/');
    if (slash)
        model = slash + 1;
    if (strncmp(model, "ft:", 3) == 0)
        model += 3;
    memset(out, 0, sizeof *out);
    if (user_file && price_scan(user_file, model, out))
        return 0;
    char *path = util_data_path("prices.tsv", NULL);
    int found = path && price_scan(path, model, out);
    free(path);
    return found ? 0 : -1;
}

double context_cost(const struct context_price *p, long long prompt, long long cached,
                    long long completion)
{
    if (cached > prompt)
        cached = prompt;
    if (cached < 0)
        cached = 0;
    return ((double)(prompt - cached) * p->in + (double)cached * p->cached +
            (double)completion * p->out) / 1e6;
}

/* ---- budget -------------------------------------------------------------------------------- */

void context_budget_add(struct context_budget *b, long long prompt, long long completion,
                        double usd)
{
    b->spent_tokens += (prompt > 0 ? prompt : 0) + (completion > 0 ? completion : 0);
    if (usd >= 0)
        b->spent_usd += usd;
    else
        b->usd_unknown = 1;
}

enum context_budget_level context_budget_level(const struct context_budget *b, double *frac)
{
    double f = 0;
    if (b->cap_tokens > 0)
        f = (double)b->spent_tokens / (double)b->cap_tokens;
    if (b->cap_usd > 0 && b->spent_usd / b->cap_usd > f)
        f = b->spent_usd / b->cap_usd;
    if (frac)
        *frac = f;
    return f >= 1.0 ? CONTEXT_BUDGET_OVER
         : f >= CONTEXT_BUDGET_WARN_FRAC ? CONTEXT_BUDGET_WARN : CONTEXT_BUDGET_OK;
}

char *context_budget_check(const struct context_budget *b, long long prompt_tokens,
                           double prompt_usd)
{
    struct buf e = BUF_INIT;
    if (b->cap_tokens > 0 && b->spent_tokens + prompt_tokens > b->cap_tokens) {
        char *sp = context_fmt(b->spent_tokens, 0), *cap = context_fmt(b->cap_tokens, 0);
        char *pr = context_fmt(prompt_tokens, 0);
        if (b->spent_tokens >= b->cap_tokens)
            buf_printf(&e, "the session's token budget is used up: %s of %s token%s spent", sp,
                       cap, util_plural(b->cap_tokens));
        else
            buf_printf(&e, "this request (%s prompt token%s) would pass the session's token "
                           "budget: %s of %s token%s spent", pr, util_plural(prompt_tokens), sp,
                       cap, util_plural(b->cap_tokens));
        buf_appends(&e, ". Raise the cap with /budget N in the chat or budget_tokens = N in "
                        "the config file (0 = no cap)");
        free(sp);
        free(cap);
        free(pr);
        return buf_take(&e);
    }
    if (b->cap_usd > 0 && b->spent_usd + (prompt_usd > 0 ? prompt_usd : 0) > b->cap_usd) {
        char sp[CONTEXT_USD_MAX], cap[CONTEXT_USD_MAX], pr[CONTEXT_USD_MAX];
        context_format_usd(b->spent_usd, sp);
        context_format_cap_usd(b->cap_usd, cap);
        if (b->spent_usd >= b->cap_usd)
            buf_printf(&e, "the session's money budget is used up: %s of %s spent", sp, cap);
        else
            buf_printf(&e, "this request (about %s of input) would pass the session's money "
                           "budget: %s of %s spent", context_format_usd(prompt_usd, pr), sp,
                       cap);
        buf_appends(&e, ". Raise the cap with /budget $N in the chat or budget_usd = N in the "
                        "config file (0 = no cap)");
        return buf_take(&e);
    }
    return NULL;
}

int context_budget_parse(struct context_budget *b, const char *arg, struct buf *err)
{
    char s[64];
    size_t k = 0;
    for (const char *q = arg ? arg : ""; *q && k + 1 < sizeof s; q++)
        if (*q != ' ' && *q != '\t' && *q != ',' && *q != '_')
            s[k++] = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
    s[k] = '\0';
    if (!strcmp(s, "off") || !strcmp(s, "none")) {
        b->cap_tokens = 0;
        b->cap_usd = 0;
        return 0;
    }
    if (!strcmp(s, "tokensoff")) {
        b->cap_tokens = 0;
        return 0;
    }
    if (!strcmp(s, "usdoff") || !strcmp(s, "$off")) {
        b->cap_usd = 0;
        return 0;
    }
    int usd = 0;
    char *p = s;
    size_t l = strlen(p);
    if (*p == '$') {
        usd = 1;
        p++;
        l--;
    } else if (l && p[l - 1] == '$') {
        usd = 1;
        p[--l] = '\0';
    } else if (l > 3 && !strcmp(p + l - 3, "usd")) {
        usd = 1;
        l -= 3;
        p[l] = '\0';
    } else if (l > 6 && !strcmp(p + l - 6, "tokens")) {
        l -= 6;
        p[l] = '\0';
    }
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    double mult = 1;
    if (!usd && end != p && (*end == 'k' || *end == 'm') && end[1] == '\0') {
        mult = *end == 'k' ? 1e3 : 1e6;
        end++;
    }
    if (errno || end == p || *end || !(v >= 0) || v * mult > 1e15) {
        buf_printf(err, "/budget takes tokens (50000, 50k), dollars ($2, 2usd) or off, not '%s'",
                   arg ? arg : "");
        return -1;
    }
    if (usd)
        b->cap_usd = v;
    else
        b->cap_tokens = (long long)(v * mult + 0.5);
    return 0;
}

const char *context_format_usd(double usd, char out[CONTEXT_USD_MAX])
{
    if (usd > 0 && usd < 0.0001)
        snprintf(out, CONTEXT_USD_MAX, "<$0.0001");
    else
        snprintf(out, CONTEXT_USD_MAX, "$%.*f", usd < 1 ? 4 : 2, usd);
    return out;
}

const char *context_format_cap_usd(double usd, char out[CONTEXT_USD_MAX])
{
    /* cents when the cap is whole cents, else as many places as it needs (no libm: tokterm
     * does not link it) */
    if (usd > 0 && usd < 0.000000005) {
        snprintf(out, CONTEXT_USD_MAX, "<$0.00000001");
        return out;
    }
    int places = 2;
    for (double scaled = usd * 100; places < 8; places++, scaled *= 10) {
        /* off by the double's rounding only: relative, as large caps have fewer places */
        if (scaled > 9e17)
            break; /* past what a long long holds: whole cents anyway at that size */
        double off = scaled - (double)(long long)(scaled + 0.5);
        double tol = scaled > 1000 ? scaled * 1e-12 : 1e-9;
        if (off < tol && off > -tol)
            break;
    }
    snprintf(out, CONTEXT_USD_MAX, "$%.*f", places, usd);
    return out;
}

void context_budget_describe(const struct context_budget *b, struct buf *out)
{
    buf_appends(out, "spent ");
    context_format_tokens(out, b->spent_tokens, 0);
    buf_printf(out, " token%s", util_plural(b->spent_tokens));
    char m[CONTEXT_USD_MAX];
    if (b->spent_usd > 0 || !b->usd_unknown) {
        buf_printf(out, ", %s", context_format_usd(b->spent_usd, m));
        if (b->usd_unknown)
            buf_appends(out, " (some models unpriced)");
    }
    if (b->cap_tokens <= 0 && b->cap_usd <= 0) {
        buf_appends(out, "; no budget set");
        return;
    }
    buf_appends(out, "; budget ");
    if (b->cap_tokens > 0) {
        context_format_tokens(out, b->cap_tokens, 0);
        buf_printf(out, " token%s (%.0f%%)", util_plural(b->cap_tokens),
                   100.0 * (double)b->spent_tokens / (double)b->cap_tokens);
    }
    if (b->cap_usd > 0)
        buf_printf(out, "%s%s (%.0f%%)", b->cap_tokens > 0 ? ", " : "",
                   context_format_cap_usd(b->cap_usd, m), 100.0 * b->spent_usd / b->cap_usd);
    double f;
    enum context_budget_level lv = context_budget_level(b, &f);
    if (lv == CONTEXT_BUDGET_OVER)
        buf_appends(out, " - used up: raise it to send more");
    else if (lv == CONTEXT_BUDGET_WARN)
        buf_appends(out, " - over 80%");
}
