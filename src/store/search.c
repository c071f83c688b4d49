/* search.c - full-text search: query terms, case-insensitive matching and snippets, the
 * catch-up of both indexes (trigram, words), the sample and tt_rank(), store_search. */
#include "config.h"
#include "store/store_int.h"

#include "base/buf.h"
#include "store/fts_words.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define STORE_RANK_WINDOW STORE_SEARCH_MAX /* newest full-text matches ranked by bm25 */
#define STORE_SAMPLE 2000           /* newest indexed messages a search samples first */

/* ---------------------------------------------------------------- case-insensitive matching */

enum needle_kind { NEEDLE_EXACT, NEEDLE_ASCII, NEEDLE_FOLD };

/* A search term prepared for repeated substring search. */
struct needle {
    char *text;      /* as given (NEEDLE_ASCII: lowered) */
    size_t len;
    int32_t *folded; /* NEEDLE_FOLD: lower-cased code points */
    size_t n_folded;
    size_t chars;    /* code points */
    enum needle_kind kind;
    /* A phrase of several words: one needle per word. A run of blanks between two words
     * matches any run of blanks (a line break too), so "title second" finds "title⏎second". */
    struct needle *parts;
    size_t n_parts;
};

static int store_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The next word of [*p, end), words parted by blanks: its start, with its length in *len and
 * *p moved past it, or NULL when only blanks are left. */
static const char *store_word_in(const char **p, const char *end, size_t *len)
{
    const char *w = *p;
    while (w < end && store_blank((unsigned char)*w))
        w++;
    const char *e = w;
    while (e < end && !store_blank((unsigned char)*e))
        e++;
    *p = e;
    *len = (size_t)(e - w);
    return e > w ? w : NULL;
}

static int32_t store_fold(uint32_t cp)
{
    return utf8proc_tolower((utf8proc_int32_t)cp);
}

static void needle_init(struct needle *nd, const char *s, size_t len)
{
    memset(nd, 0, sizeof *nd);
    size_t words = 0, wlen;
    for (const char *p = s; store_word_in(&p, s + len, &wlen);)
        words++;
    if (words > 1) {
        nd->parts = xmalloc(words * sizeof *nd->parts);
        for (const char *p = s, *w; (w = store_word_in(&p, s + len, &wlen));)
            needle_init(&nd->parts[nd->n_parts++], w, wlen);
    }
    nd->text = xstrndup(s, len);
    nd->len = len;
    nd->folded = xmalloc((len + 1) * sizeof *nd->folded);
    int ascii = 1, cased = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += utf8_decode(s + i, len - i, &cp);
        int32_t f = store_fold(cp);
        if (cp >= 0x80)
            ascii = 0;
        if (f != (int32_t)cp || utf8proc_toupper((utf8proc_int32_t)cp) != (int32_t)cp)
            cased = 1;
        nd->folded[nd->n_folded++] = f;
    }
    nd->chars = nd->n_folded;
    if (!cased) {
        nd->kind = NEEDLE_EXACT;
    } else if (ascii) {
        nd->kind = NEEDLE_ASCII;
        for (size_t i = 0; i < len; i++)
            if (nd->text[i] >= 'A' && nd->text[i] <= 'Z')
                nd->text[i] = (char)(nd->text[i] - 'A' + 'a');
    } else {
        nd->kind = NEEDLE_FOLD;
    }
}

static void needle_free(struct needle *nd)
{
    for (size_t i = 0; i < nd->n_parts; i++)
        needle_free(&nd->parts[i]);
    free(nd->parts);
    free(nd->text);
    free(nd->folded);
}

static unsigned char ascii_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Whether nd (one word) matches at hay[0]: *mlen gets the matched byte length. */
static int needle_at(const struct needle *nd, const char *hay, size_t n, size_t *mlen)
{
    if (nd->kind != NEEDLE_FOLD) {
        if (n < nd->len)
            return 0;
        for (size_t j = 0; j < nd->len; j++)
            if ((nd->kind == NEEDLE_ASCII ? ascii_lower((unsigned char)hay[j])
                                          : (unsigned char)hay[j]) != (unsigned char)nd->text[j])
                return 0;
        *mlen = nd->len;
        return 1;
    }
    size_t k = 0;
    for (size_t j = 0; j < nd->n_folded; j++) {
        uint32_t c;
        if (k >= n)
            return 0;
        size_t step = utf8_decode(hay + k, n - k, &c);
        if (store_fold(c) != nd->folded[j])
            return 0;
        k += step;
    }
    *mlen = k;
    return 1;
}

static long needle_find(const struct needle *nd, const char *hay, size_t n, size_t *mlen);

/* needle_find of a phrase: its first word, then each next one after a run of blanks. */
static long needle_find_words(const struct needle *nd, const char *hay, size_t n, size_t *mlen)
{
    for (size_t pos = 0; pos < n;) {
        size_t ml;
        long at = needle_find(&nd->parts[0], hay + pos, n - pos, &ml);
        if (at < 0)
            return -1;
        size_t start = pos + (size_t)at, k = start + ml, i = 1;
        for (; i < nd->n_parts; i++) {
            size_t w = k;
            while (w < n && store_blank((unsigned char)hay[w]))
                w++;
            if (w == k || !needle_at(&nd->parts[i], hay + w, n - w, &ml))
                break;
            k = w + ml;
        }
        if (i == nd->n_parts) {
            *mlen = k - start;
            return (long)start;
        }
        uint32_t cp;
        pos = start + utf8_decode(hay + start, n - start, &cp);
    }
    return -1;
}

/* First match of nd in hay[0..n): its offset, or -1. *mlen gets the matched byte length. */
static long needle_find(const struct needle *nd, const char *hay, size_t n, size_t *mlen)
{
    if (nd->len == 0)
        return -1;
    if (nd->n_parts)
        return needle_find_words(nd, hay, n, mlen);
    if (nd->kind == NEEDLE_EXACT) {
        const char *p = memmem(hay, n, nd->text, nd->len);
        if (!p)
            return -1;
        *mlen = nd->len;
        return (long)(p - hay);
    }
    if (nd->kind == NEEDLE_ASCII) {
        const unsigned char *h = (const unsigned char *)hay, *t = (const unsigned char *)nd->text;
        unsigned char c0 = t[0], c1 = (c0 >= 'a' && c0 <= 'z') ? (unsigned char)(c0 - 32) : c0;
        for (size_t i = 0; i + nd->len <= n; i++) {
            if (h[i] != c0 && h[i] != c1)
                continue;
            size_t j = 1;
            while (j < nd->len && ascii_lower(h[i + j]) == t[j])
                j++;
            if (j == nd->len) {
                *mlen = nd->len;
                return (long)i;
            }
        }
        return -1;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t step = utf8_decode(hay + i, n - i, &cp), k = i, j = 0;
        while (j < nd->n_folded && k < n) {
            uint32_t c2;
            size_t s2 = utf8_decode(hay + k, n - k, &c2);
            if (store_fold(c2) != nd->folded[j])
                break;
            k += s2;
            j++;
        }
        if (j == nd->n_folded) {
            *mlen = k - i;
            return (long)i;
        }
        i += step;
    }
    return -1;
}

static void needle_destroy(void *p)
{
    needle_free(p);
    free(p);
}

/* SQL function tt_contains(haystack, needle): 1 when needle occurs case-insensitively. */
static void store_sql_contains(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *hay = (const char *)sqlite3_value_text(argv[0]);
    size_t hn = (size_t)sqlite3_value_bytes(argv[0]);
    struct needle *nd = sqlite3_get_auxdata(ctx, 1);
    if (!nd) {
        const char *t = (const char *)sqlite3_value_text(argv[1]);
        if (!t) {
            sqlite3_result_int(ctx, 0);
            return;
        }
        nd = xmalloc(sizeof *nd);
        needle_init(nd, t, (size_t)sqlite3_value_bytes(argv[1]));
        sqlite3_set_auxdata(ctx, 1, nd, needle_destroy);
        nd = sqlite3_get_auxdata(ctx, 1);
        if (!nd) { /* SQLite could not keep it; it has been freed: match without caching */
            struct needle tmp;
            needle_init(&tmp, t, (size_t)sqlite3_value_bytes(argv[1]));
            size_t ml;
            sqlite3_result_int(ctx, hay && needle_find(&tmp, hay, hn, &ml) >= 0);
            needle_free(&tmp);
            return;
        }
    }
    size_t ml;
    sqlite3_result_int(ctx, hay && needle_find(nd, hay, hn, &ml) >= 0);
}

int store_search_functions(struct store *st)
{
    return sqlite3_create_function(st->db, "tt_contains", 2,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                   store_sql_contains, NULL, NULL);
}

/* ---------------------------------------------------------------- terms and snippets */

/* Split a query into terms (see store.h). Returns the count; *terms holds malloc'd strings. */
static size_t store_query_terms(const char *q, char ***terms)
{
    size_t n = 0, cap = 0;
    *terms = NULL;
    const char *p = q;
    for (;;) {
        while (store_blank((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *start, *end;
        if (*p == '"') {
            start = ++p;
            end = strchr(p, '"');
            if (!end)
                end = p + strlen(p);
            p = *end ? end + 1 : end;
            while (start < end && store_blank((unsigned char)*start))
                start++;
            while (end > start && store_blank((unsigned char)end[-1]))
                end--;
        } else {
            start = p;
            while (*p && !store_blank((unsigned char)*p))
                p++;
            end = p;
        }
        if (end == start)
            continue;
        XGROW(*terms, n + 1, cap);
        (*terms)[n++] = xstrndup(start, (size_t)(end - start));
    }
    return n;
}

/* Code points in s[0..len). */
static size_t store_chars_n(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        i += utf8_decode(s + i, len - i, &cp);
    }
    return n;
}

/* A term's words: the term, or for a quoted phrase each of its words. The index looks up
 * each word of 3+ characters; a phrase is then checked with tt_contains, whose blanks match
 * any blanks (the trigram index sees "title second" and "title⏎second" as different text).
 * Returns the next word's start from *p (moved past it) and its length in *len, or NULL. */
static const char *store_term_word(const char **p, size_t *len)
{
    return store_word_in(p, *p + strlen(*p), len);
}

/* A term the index narrows by has a word of 3+ characters; one the rows are filtered by with
 * tt_contains has none, or is a phrase (a phrase with a long word is both). */
static int store_term_filtered(const char *t)
{
    size_t len, words = 0, longest = 0;
    for (const char *w; (w = store_term_word(&t, &len)); words++) {
        size_t chars = store_chars_n(w, len);
        longest = chars > longest ? chars : longest;
    }
    return longest < 3 || words > 1;
}

/* Byte offset of the code point `chars` code points before (dir < 0) or after off. */
static size_t store_move(const char *s, size_t len, size_t off, size_t chars, int dir)
{
    while (chars--) {
        if (dir < 0) {
            if (off == 0)
                break;
            off--;
            while (off > 0 && ((unsigned char)s[off] & 0xC0) == 0x80)
                off--;
        } else {
            if (off >= len)
                break;
            uint32_t cp;
            off += utf8_decode(s + off, len - off, &cp);
        }
    }
    return off;
}

/* Append s[0..n) to out with line breaks and tabs turned into spaces. */
static void store_snip_text(struct buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        buf_appendc(out, c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
    }
}

/* A one-line excerpt of text around the first match of any needle, every match inside it
 * wrapped in open/close. Caller frees. */
static char *store_snippet(const char *text, size_t len, const struct needle *nds, size_t n_nd,
                           int chars, const char *open, const char *close)
{
    long first = -1;
    size_t ml;
    for (size_t i = 0; i < n_nd; i++) {
        long at = needle_find(&nds[i], text, len, &ml);
        if (at >= 0 && (first < 0 || at < first))
            first = at;
    }
    size_t from = first < 0 ? 0 : store_move(text, len, (size_t)first, (size_t)chars / 4, -1);
    size_t to = store_move(text, len, from, (size_t)chars, 1);
    struct buf b = BUF_INIT;
    if (from > 0)
        buf_appends(&b, "\xE2\x80\xA6");
    size_t pos = from;
    while (pos < to) {
        long best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < n_nd; i++) {
            long at = needle_find(&nds[i], text + pos, len - pos, &ml);
            if (at >= 0 && (best < 0 || at < best || (at == best && ml > best_len))) {
                best = at;
                best_len = ml;
            }
        }
        if (best < 0 || pos + (size_t)best >= to) {
            store_snip_text(&b, text + pos, to - pos);
            pos = to;
            break;
        }
        store_snip_text(&b, text + pos, (size_t)best);
        buf_appends(&b, open);
        store_snip_text(&b, text + pos + best, best_len);
        buf_appends(&b, close);
        pos += (size_t)best + best_len;
        if (pos > to)
            to = pos; /* a match that crosses the end is shown whole */
    }
    if (pos < len)
        buf_appends(&b, "\xE2\x80\xA6");
    return buf_take(&b);
}

/* Fill a hit's details and snippet (phase two of a search). 0, 1 when the message is gone,
 * or -1. */
static int store_hit_fill(struct store *st, struct store_hit *h, const struct needle *nds,
                          size_t n_nd, const struct store_search_opts *o)
{
    static const char q[] =
        "SELECT m.conversation_id, c.title, m.role, m.model, m.created, m.content "
        "FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ?1";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, h->message_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        h->conversation_id = sqlite3_column_int64(s, 0);
        h->title = store_col_str(s, 1);
        h->role = store_col_str(s, 2);
        h->model = store_col_str(s, 3);
        h->created = sqlite3_column_int64(s, 4);
        const char *text = (const char *)sqlite3_column_text(s, 5);
        h->snippet = store_snippet(text ? text : "", (size_t)sqlite3_column_bytes(s, 5), nds,
                                   n_nd, o->snippet_chars > 0 ? o->snippet_chars : 80,
                                   o->open ? o->open : "[", o->close ? o->close : "]");
    }
    store_done(st, s);
    if (rc == SQLITE_DONE)
        return 1;
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot search");
}

/* ---------------------------------------------------------------- index catch-up */

/* Index the messages queued in fts_pending (schema v3; every finished answer since issue 14),
 * the oldest STORE_WORDS_BATCH of them (all when all is set); the rest are scanned by the
 * search (store_cand_pending). Best effort: when another process holds the write lock, the
 * search goes on without the newest messages in the index. */
static void store_fts_catch_up(struct store *st, int all)
{
    static const char q_cut[] = "SELECT message_id FROM fts_pending ORDER BY message_id "
                                "LIMIT 1 OFFSET ?1";
    static const char q_index[] =
        "INSERT INTO messages_fts(rowid, content) SELECT m.id, m.content FROM fts_pending p "
        "JOIN messages m ON m.id = p.message_id WHERE m.status <> 'streaming' "
        "AND p.message_id <= ?1";
    static const char q_clear[] =
        "DELETE FROM fts_pending WHERE message_id <= ?1 AND (message_id IN (SELECT id FROM "
        "messages WHERE status <> 'streaming') OR message_id NOT IN (SELECT id FROM messages))";
    if (st->readonly) /* a reader never writes: the queued messages are scanned instead */
        return;
    for (;;) {
        sqlite3_stmt *s = store_prep(st, q_cut);
        if (!s)
            return;
        sqlite3_bind_int(s, 1, 0);
        int rc = sqlite3_step(s);
        store_done(st, s);
        if (rc != SQLITE_ROW || store_begin(st) != 0)
            return;
        int64_t cut = INT64_MAX; /* the batch: queued ids up to this one */
        if (!(s = store_prep(st, q_cut))) {
            store_rollback(st);
            return;
        }
        sqlite3_bind_int(s, 1, STORE_WORDS_BATCH - 1);
        if (sqlite3_step(s) == SQLITE_ROW)
            cut = sqlite3_column_int64(s, 0);
        store_done(st, s);
        const char *const steps[] = {q_index, q_clear};
        if (store_run_steps(st, steps, TT_ARRAY_LEN(steps), &cut, NULL) != 0 ||
            store_commit(st) != 0 || cut == INT64_MAX || !all)
            return;
    }
}

/* Apply the word index's queue (schema v5), or its oldest STORE_WORDS_BATCH changes (and any
 * later ones of the same messages). For each message: when the index holds it, the text of
 * its first queued delete or change is what the index holds, and is taken out; then a message
 * that exists and has finished is indexed as it is now (or listed in words_long). A search
 * does not wait for the write lock for this: it uses the trigram index instead. 1 when the
 * queue is empty, 0 when some of it is left (another process held the write lock, or more
 * than a batch), -1 on an error. */
static int store_words_catch_up(struct store *st, int all)
{
    static const char q_any[] = "SELECT seq FROM words_queue ORDER BY seq LIMIT 1 OFFSET ?1";
    static const char q_out[] =
        "INSERT INTO messages_words(messages_words, rowid, content) "
        "SELECT 'delete', q.message_id, q.old FROM words_queue q "
        "WHERE q.seq IN (SELECT min(seq) FROM words_queue WHERE old IS NOT NULL "
        "AND message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "GROUP BY message_id) "
        "AND EXISTS (SELECT 1 FROM messages_words_docsize d WHERE d.id = q.message_id)";
    static const char q_long_out[] =
        "DELETE FROM words_long "
        "WHERE message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1)";
    static const char q_in[] =
        "INSERT INTO messages_words(rowid, content) SELECT m.id, m.content FROM messages m "
        "WHERE m.id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "AND m.status <> 'streaming' "
        "AND NOT EXISTS (SELECT 1 FROM words_long l WHERE l.message_id = m.id) "
        "AND NOT EXISTS (SELECT 1 FROM messages_words_docsize d WHERE d.id = m.id)";
    static const char q_long_in[] =
        "INSERT OR IGNORE INTO words_long(message_id) SELECT m.id FROM messages m "
        "WHERE m.id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "AND m.status <> 'streaming' AND tt_words_long(m.content)";
    static const char q_clear[] =
        "DELETE FROM words_queue "
        "WHERE message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1)";
    for (;;) {
        sqlite3_stmt *s = store_prep(st, q_any);
        if (!s)
            return -1;
        sqlite3_bind_int(s, 1, 0);
        int rc = store_step(st, s);
        store_done(st, s);
        if (rc == SQLITE_DONE)
            return 1;
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
        if (st->readonly || store_try_begin(st) != 0)
            return 0;
        int64_t cut = INT64_MAX; /* the batch: changes up to this seq */
        if (!(s = store_prep(st, q_any)))
            return store_rollback(st);
        sqlite3_bind_int(s, 1, STORE_WORDS_BATCH - 1);
        rc = store_step(st, s);
        if (rc == SQLITE_ROW)
            cut = sqlite3_column_int64(s, 0);
        store_done(st, s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return store_fail(st, "cannot index messages"), store_rollback(st);
        const char *const steps[] = {q_out, q_long_out, q_long_in, q_in, q_clear};
        if (store_run_steps(st, steps, TT_ARRAY_LEN(steps), &cut, "cannot index messages") != 0)
            return -1;
        if (store_commit(st) != 0)
            return -1;
        if (cut == INT64_MAX)
            return 1;
        if (!all)
            return 0;
    }
}

int store_words_forget(struct store *st)
{
    static const char q_out[] =
        "INSERT INTO messages_words(messages_words, rowid, content) "
        "SELECT 'delete', q.message_id, q.old FROM words_queue q "
        "WHERE q.seq IN (SELECT min(seq) FROM words_queue WHERE old IS NOT NULL "
        "AND message_id NOT IN (SELECT id FROM messages) GROUP BY message_id) "
        "AND EXISTS (SELECT 1 FROM messages_words_docsize d WHERE d.id = q.message_id)";
    static const char q_long_out[] =
        "DELETE FROM words_long WHERE message_id NOT IN (SELECT id FROM messages)";
    static const char q_clear[] =
        "DELETE FROM words_queue WHERE message_id NOT IN (SELECT id FROM messages)";
    const char *const steps[] = {q_out, q_long_out, q_clear};
    return store_run_steps(st, steps, TT_ARRAY_LEN(steps), NULL, "cannot update the word index");
}

int store_search_index(struct store *st)
{
    store_fts_catch_up(st, 1);
    return store_words_catch_up(st, 1) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------- ranking */

/* Natural logarithm of x > 0 (tokterm links no libm: see util_ceil). */
static double store_ln(double x)
{
    if (!(x > 0 && x < 1e300))
        return 0;
    int e = 0;
    while (x >= 2) {
        x /= 2;
        e++;
    }
    while (x < 1) {
        x *= 2;
        e--;
    }
    double y = (x - 1) / (x + 1), y2 = y * y, term = y, sum = 0; /* ln x = 2 atanh(y) */
    for (int k = 1; k < 40; k += 2) {
        sum += term / k;
        term *= y2;
    }
    return 2 * sum + e * 0.69314718055994530942;
}

/* Per-query state of tt_rank(): average row size and each phrase's IDF, then scratch space for
 * the phrase frequencies of one row. */
struct store_rank {
    double avgdl;
    int n;
    double *idf, *freq;
};

/* FTS5 auxiliary function tt_rank(messages_fts, f1, f2, ...): bm25 computed as FTS5's bm25()
 * does (k1 = 1.2, b = 0.75, IDF = log((N - n + 0.5) / (n + 0.5)), at least 1e-6), except that
 * n, the number of rows holding phrase i, is fi * N with fi given by the caller: bm25() counts
 * every match of every phrase with xQueryPhrase before ranking the first row, which was most
 * of the time of a search (13-40 ms of a 20-80 ms query over 100,000 messages). */
static void store_fts_rank(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                           int n_val, sqlite3_value **val)
{
    struct store_rank *r = api->xGetAuxdata(fts, 0);
    int rc = SQLITE_OK;
    if (!r) {
        int n = api->xPhraseCount(fts);
        sqlite3_int64 rows = 0, tokens = 0;
        rc = api->xRowCount(fts, &rows);
        if (rc == SQLITE_OK)
            rc = api->xColumnTotalSize(fts, -1, &tokens);
        if (rc == SQLITE_OK &&
            !(r = sqlite3_malloc64(sizeof *r + 2 * (size_t)(n > 0 ? n : 1) * sizeof(double))))
            rc = SQLITE_NOMEM;
        if (rc != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return;
        }
        r->n = n;
        r->avgdl = rows > 0 && tokens > 0 ? (double)tokens / (double)rows : 1.0;
        r->idf = (double *)(r + 1);
        r->freq = r->idf + (n > 0 ? n : 1);
        for (int i = 0; i < n; i++) {
            double f = i < n_val ? sqlite3_value_double(val[i]) : 0.0;
            double hits = (f > 0 ? (f < 1 ? f : 1) : 0) * (double)rows;
            double idf = store_ln(((double)rows - hits + 0.5) / (hits + 0.5));
            r->idf[i] = idf > 0 ? idf : 1e-6;
        }
        if ((rc = api->xSetAuxdata(fts, r, sqlite3_free)) != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return;
        }
    }
    int n_inst = 0, tokens = 0;
    for (int i = 0; i < r->n; i++)
        r->freq[i] = 0;
    rc = api->xInstCount(fts, &n_inst);
    for (int i = 0; rc == SQLITE_OK && i < n_inst; i++) {
        int phrase, col, off;
        rc = api->xInst(fts, i, &phrase, &col, &off);
        if (rc == SQLITE_OK && phrase >= 0 && phrase < r->n)
            r->freq[phrase] += 1;
    }
    if (rc == SQLITE_OK)
        rc = api->xColumnSize(fts, -1, &tokens);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    const double k1 = 1.2, b = 0.75;
    double score = 0, norm = k1 * (1 - b + b * (double)tokens / r->avgdl);
    for (int i = 0; i < r->n; i++)
        score += r->idf[i] * (r->freq[i] * (k1 + 1)) / (r->freq[i] + norm);
    sqlite3_result_double(ctx, -score);
}

/* Register tt_rank() on this connection (once). 0, or -1 when FTS5 has no API for it. */
static int store_fts_rank_init(struct store *st)
{
    if (st->fts_rank)
        return st->fts_rank > 0 ? 0 : -1;
    fts5_api *api = NULL;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT fts5(?1)", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_pointer(s, 1, (void *)&api, "fts5_api_ptr", NULL);
        sqlite3_step(s);
    }
    sqlite3_finalize(s);
    st->fts_rank = api && api->iVersion >= 2 &&
                           api->xCreateFunction(api, "tt_rank", NULL, store_fts_rank, NULL) ==
                               SQLITE_OK
                       ? 1
                       : -1;
    return st->fts_rank > 0 ? 0 : -1;
}

/* The sample of a search: the newest STORE_SAMPLE indexed messages, those with id >= *bound
 * (*bound = 0 and *rows = all of them when there are no more). With frac, the fraction of
 * them holding each of the n MATCH phrases, for tt_rank()'s IDFs (exact when the sample is
 * every message: then the IDF is bm25()'s). A phrase's count stops at the sample's oldest
 * message, so a common term costs no more than a rare one. Inside the search's read
 * transaction. 0 or -1. */
static int store_sample(struct store *st, int words, char *const *phrases, size_t n,
                        double *frac, int64_t *bound, double *rows)
{
    static const char *const q_bounds[] = {
        "SELECT id FROM messages_fts_docsize ORDER BY id DESC LIMIT 1 OFFSET ?1",
        "SELECT id FROM messages_words_docsize ORDER BY id DESC LIMIT 1 OFFSET ?1"};
    static const char *const q_rowss[] = {"SELECT count(*) FROM messages_fts_docsize",
                                          "SELECT count(*) FROM messages_words_docsize"};
    static const char *const q_counts[] = {
        "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?1 AND rowid >= ?2",
        "SELECT count(*) FROM messages_words WHERE messages_words MATCH ?1 AND rowid >= ?2"};
    const char *q_bound = q_bounds[words], *q_rows = q_rowss[words], *q_count = q_counts[words];
    sqlite3_stmt *s = store_prep(st, q_bound);
    if (!s)
        return -1;
    sqlite3_bind_int(s, 1, STORE_SAMPLE - 1);
    int rc = store_step(st, s);
    *bound = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    store_done(st, s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, "cannot search");
    *rows = STORE_SAMPLE;
    if (rc == SQLITE_DONE) { /* fewer indexed messages than the sample: all of them */
        if (!(s = store_prep(st, q_rows)))
            return -1;
        rc = store_step(st, s);
        *rows = rc == SQLITE_ROW ? (double)sqlite3_column_int64(s, 0) : 0;
        store_done(st, s);
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
    }
    for (size_t i = 0; frac && i < n; i++) {
        if (!(s = store_prep(st, q_count)))
            return -1;
        sqlite3_bind_text(s, 1, phrases[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, *bound);
        rc = store_step(st, s);
        double hits = rc == SQLITE_ROW ? (double)sqlite3_column_int64(s, 0) : 0;
        store_done(st, s);
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
        if (hits == 0 && *bound > 0)
            hits = 0.5; /* absent from the sample: rarer than that, not absent */
        frac[i] = *rows > 0 ? hits / *rows : 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- store_search */

/* A full-text match ranked in phase one of a search. */
struct store_cand {
    int64_t id;
    double score;
};

/* Best first: lowest score, then newest. */
static int store_cand_cmp(const void *a, const void *b)
{
    const struct store_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

/* What each phase-one statement of a search binds (see store_search). */
struct store_query {
    const struct store_search_opts *opts;
    const char *match;
    char *const *terms; /* the filtered terms (store_term_filtered) bound at ?10... */
    size_t n_terms, n_short;
    const double *frac; /* tt_rank() arguments bound after them (NULL: bm25()) */
    size_t n_long;
};

static void store_query_bind(sqlite3_stmt *s, const struct store_query *q)
{
    if (q->match)
        sqlite3_bind_text(s, 1, q->match, -1, SQLITE_STATIC);
    store_bind_text(s, 2, q->opts->model);
    if (q->opts->since > 0)
        sqlite3_bind_int64(s, 3, q->opts->since);
    if (q->opts->until > 0)
        sqlite3_bind_int64(s, 4, q->opts->until);
    sqlite3_bind_int(s, 5, q->opts->limit > 0 ? q->opts->limit : 20);
    for (size_t i = 0, k = 0; i < q->n_terms; i++)
        if (store_term_filtered(q->terms[i]))
            sqlite3_bind_text(s, (int)(10 + k++), q->terms[i], -1, SQLITE_STATIC);
    for (size_t k = 0; q->frac && k < q->n_long; k++)
        sqlite3_bind_double(s, (int)(10 + q->n_short + k), q->frac[k]);
}

/* Run one phase-one statement (rows: id, score; ?6 its LIMIT, ?7 the sample bound) and append
 * its rows to c[*n...]. Descending (asc = 0), at most `room` rows. Ascending (oldest first),
 * every row is read and the newest `room` kept (a ring); 1 when there turn out to be more
 * than 2 * room, to be read descending instead. 0, 1 or -1. */
static int store_cand_run(struct store *st, const char *sql, int asc, size_t room,
                          int64_t bound, const struct store_query *q, struct store_cand *c,
                          size_t *n)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return store_fail(st, "cannot search");
    store_query_bind(s, q);
    sqlite3_bind_int64(s, 6, asc ? -1 : (sqlite3_int64)room);
    sqlite3_bind_int64(s, 7, bound);
    int rc = SQLITE_DONE;
    size_t got = 0;
    struct store_cand *ring = c + *n;
    while (room > 0 && (rc = store_step(st, s)) == SQLITE_ROW) {
        if (asc && got == 2 * room)
            break;
        struct store_cand *e = &ring[got++ % room];
        e->id = sqlite3_column_int64(s, 0);
        e->score = sqlite3_column_double(s, 1);
    }
    sqlite3_finalize(s);
    if (room > 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
        return store_fail(st, "cannot search");
    if (asc && rc == SQLITE_ROW)
        return 1;
    *n += got < room ? got : room;
    return 0;
}

/* The score of a phase-one row on the index tbl: tt_rank() with the n IDF fractions bound at
 * ?first..., or bm25() when tt_rank() could not be registered. */
static void store_rank_sql(struct buf *b, const char *tbl, int ranked, size_t first, size_t n)
{
    if (!ranked) {
        buf_printf(b, "bm25(%s)", tbl);
        return;
    }
    buf_printf(b, "tt_rank(%s", tbl);
    for (size_t k = 0; k < n; k++)
        buf_printf(b, ", ?%zu", first + k);
    buf_appendc(b, ')');
}

/* Phase-one SQL of a full-text search (see store_cand_run) on the index tbl: rank is the
 * score expression, where the filters on messages m (may be empty), op ">=" (the sample) or
 * "<" (below it); with long_only, only the messages of words_long. */
static char *store_cand_sql(const char *tbl, const char *rank, const char *where,
                            const char *op, const char *order, int long_only)
{
    const char *only = long_only ? " IN (SELECT message_id FROM words_long) AND rowid" : "";
    if (!*where)
        return xasprintf("SELECT rowid, %s FROM %s WHERE %s MATCH ?1 "
                         "AND rowid%s %s ?7 ORDER BY rowid %s LIMIT ?6",
                         rank, tbl, tbl, only, op, order);
    only = long_only ? " IN (SELECT message_id FROM words_long) AND m.id" : "";
    return xasprintf("SELECT m.id, %s FROM %s CROSS JOIN messages m "
                     "ON m.id = %s.rowid WHERE %s MATCH ?1%s "
                     "AND %s.rowid%s %s ?7 ORDER BY %s.rowid %s LIMIT ?6",
                     rank, tbl, tbl, tbl, where, tbl, only, op, tbl, order);
}

/* One search: the terms of the query and what its phases share. */
struct store_srch {
    const struct store_search_opts *opts;
    char **terms;
    size_t n_terms;
    int words;          /* the word index answers (else the trigram index) */
    int64_t n_wlong;    /* messages left out of the word index (words_long) */
    const char *tbl;    /* that index: messages_words or messages_fts */
    char **phr;         /* an FTS5 phrase per term with a key of 3+ characters */
    size_t n_long, n_short;
    struct buf where;   /* filters on messages m: the short terms, model, dates */
    struct needle *nds; /* every term, for the snippets */
};

/* Whether the word index may answer: every term of 3+ characters is a word it finds (there is
 * at least one), and its queue could be applied (store_words_catch_up). Before the search's
 * read transaction. */
static int store_words_usable(struct store *st, const struct store_srch *sr)
{
    int words = !sr->opts->no_words, wide = 0;
    for (size_t i = 0; words && i < sr->n_terms; i++) {
        size_t len;
        for (const char *p = sr->terms[i], *w; words && (w = store_term_word(&p, &len));)
            if (store_chars_n(w, len) >= 3) {
                wide = 1;
                words = fts_words_term(st->words, w, (int)len);
            }
    }
    return words && wide && store_words_catch_up(st, 0) == 1;
}

/* Inside the read transaction: the word index answers when it is not behind in it (an empty
 * queue) and few messages are left out of it for their long words (words_long: those go
 * through the trigram index, one lookup each). Sets sr->words, n_wlong and tbl. */
static void store_words_ready(struct store *st, struct store_srch *sr)
{
    if (sr->words) {
        sqlite3_stmt *q = store_prep(st, "SELECT 1 FROM words_queue LIMIT 1");
        sr->words = q && store_step(st, q) == SQLITE_DONE;
        store_done(st, q);
    }
    if (sr->words) {
        sqlite3_stmt *q = store_prep(st, "SELECT count(*) FROM words_long");
        sr->words = q && store_step(st, q) == SQLITE_ROW;
        sr->n_wlong = sr->words ? sqlite3_column_int64(q, 0) : 0;
        store_done(st, q);
        sr->words = sr->words && sr->n_wlong <= STORE_WORDS_LONG_MAX;
    }
    sr->tbl = sr->words ? "messages_words" : "messages_fts";
}

/* " AND (tt_contains(m.content, ?first) AND ...)" over n parameters from first, as a balanced
 * tree: SQLite parses a chain of ANDs as a tree as deep as it is long, and a query of ~1,000
 * words failed on its limit of 1,000 ("Expression tree is too large"), exit status 1 as for no
 * match. Nested halves keep the depth near log2(n). */
static void store_contains_tree(struct buf *b, const char *col, size_t first, size_t n)
{
    if (n == 1) {
        buf_printf(b, "tt_contains(%s, ?%zu)", col, first);
        return;
    }
    buf_appendc(b, '(');
    store_contains_tree(b, col, first, n / 2);
    buf_appends(b, " AND ");
    store_contains_tree(b, col, first + n / 2, n - n / 2);
    buf_appendc(b, ')');
}

static void store_contains_all(struct buf *b, size_t first, size_t n)
{
    if (n == 0)
        return;
    buf_appends(b, " AND ");
    store_contains_tree(b, "m.content", first, n);
}

/* Each word of 3+ characters becomes an FTS5 string with '"' doubled, so nothing the user
 * types is FTS5 syntax (a prefix query "word"* on the word index); shorter terms and phrases
 * filter the rows with tt_contains. Builds phr, where and nds. */
static void store_srch_build(struct store_srch *sr)
{
    const struct store_search_opts *opts = sr->opts;
    size_t cap = 0;
    sr->phr = NULL;
    for (size_t i = 0; i < sr->n_terms; i++) {
        sr->n_short += (size_t)store_term_filtered(sr->terms[i]);
        size_t len;
        for (const char *t = sr->terms[i], *w; (w = store_term_word(&t, &len));) {
            if (store_chars_n(w, len) < 3)
                continue;
            struct buf p = BUF_INIT;
            buf_appendc(&p, '"');
            for (const char *c = w; c < w + len; c++) {
                if (*c == '"')
                    buf_appendc(&p, '"');
                buf_appendc(&p, *c);
            }
            buf_appends(&p, sr->words ? "\"*" : "\"");
            XGROW(sr->phr, sr->n_long + 1, cap);
            sr->phr[sr->n_long++] = buf_take(&p);
        }
    }
    store_contains_all(&sr->where, 10, sr->n_short); /* bound at ?10... (store_query_bind) */
    if (opts->model)
        buf_appends(&sr->where, " AND " STORE_MODEL_IS("m.model", "?2"));
    if (opts->since > 0)
        buf_appends(&sr->where, " AND m.created >= ?3");
    if (opts->until > 0)
        buf_appends(&sr->where, " AND m.created < ?4");
    sr->nds = xmalloc(sr->n_terms * sizeof *sr->nds);
    for (size_t i = 0; i < sr->n_terms; i++)
        needle_init(&sr->nds[i], sr->terms[i], strlen(sr->terms[i]));
}

static void store_srch_free(struct store_srch *sr)
{
    for (size_t i = 0; i < sr->n_terms; i++) {
        if (sr->nds)
            needle_free(&sr->nds[i]);
        free(sr->terms[i]);
    }
    for (size_t i = 0; i < sr->n_long; i++)
        free(sr->phr[i]);
    free(sr->phr);
    free(sr->nds);
    free(sr->terms);
    buf_free(&sr->where);
}

/* The MATCH expression: the phrases rarest first (FTS5 intersects them in MATCH order). ord
 * gets that order, frac_m the fractions in it. */
static void store_match_order(const struct store_srch *sr, const double *frac, size_t *ord,
                              double *frac_m, struct buf *match)
{
    for (size_t i = 0; i < sr->n_long; i++) { /* stable insertion sort by frac */
        size_t j = i;
        while (j > 0 && frac[ord[j - 1]] > frac[i]) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
    }
    for (size_t k = 0; k < sr->n_long; k++) {
        if (k)
            buf_appendc(match, ' ');
        buf_appends(match, sr->phr[ord[k]]);
        frac_m[k] = frac[ord[k]];
    }
}

/* The newest STORE_RANK_WINDOW matches on the index into cand[*n...]: the sample's (ids >=
 * bound, rows of them) newest first; below it, oldest first when the sample says that they
 * fit the window (FTS5 reads a doclist forwards about a fifth faster than backwards), else
 * newest first up to the window. 0 or -1. */
static int store_cand_window(struct store *st, const struct store_srch *sr,
                             const struct store_query *q, const char *rank, int64_t bound,
                             double rows, struct store_cand *cand, size_t *n)
{
    const char *where = buf_str(&sr->where);
    size_t win = STORE_RANK_WINDOW;
    char *text = store_cand_sql(sr->tbl, rank, where, ">=", "DESC", 0);
    int rc = store_cand_run(st, text, 0, win, bound, q, cand, n);
    free(text);
    if (rc == 0 && bound > 0 && *n < win) {
        size_t room = win - *n;
        /* matches below the sample if as dense as in it (ids: about one per message) */
        int asc = (double)*n * (double)bound / rows <= 0.8 * (double)room;
        text = store_cand_sql(sr->tbl, rank, where, "<", asc ? "ASC" : "DESC", 0);
        rc = store_cand_run(st, text, asc, room, bound, q, cand, n);
        free(text);
        if (rc == 1) { /* far more than the sample said: the newest first after all */
            text = store_cand_sql(sr->tbl, rank, where, "<", "DESC", 0);
            rc = store_cand_run(st, text, 0, room, bound, q, cand, n);
            free(text);
        }
    }
    return rc;
}

/* The matches among the messages left out of the word index (words_long), through the trigram
 * index, into cand[*n...]. ord: the MATCH order of the phrases. 0 or -1. */
static int store_cand_wlong(struct store *st, const struct store_srch *sr,
                            const struct store_query *q, const size_t *ord, int ranked,
                            struct store_cand *cand, size_t *n)
{
    struct buf tmatch = BUF_INIT, trank = BUF_INIT;
    for (size_t k = 0; k < sr->n_long; k++) {
        const char *ph = sr->phr[ord[k]];
        buf_printf(&tmatch, "%s%.*s", k ? " " : "", (int)strlen(ph) - 1, ph);
    }
    store_rank_sql(&trank, "messages_fts", ranked, 10 + sr->n_short, sr->n_long);
    struct store_query ql = *q;
    ql.match = buf_str(&tmatch);
    char *text = store_cand_sql("messages_fts", buf_str(&trank), buf_str(&sr->where), ">=",
                                "DESC", 1);
    int rc = store_cand_run(st, text, 0, (size_t)sr->n_wlong, 0, &ql, cand, n);
    free(text);
    buf_free(&tmatch);
    buf_free(&trank);
    return rc;
}

/* The messages still queued for the trigram index (answers finished since the last search, and
 * messages over 64 KiB; a read-only store, another process held the write lock, or more than a
 * batch) are scanned with
 * tt_contains and added to the candidates (rank 0: after the ranked ones) unless already
 * there. 0 or -1. */
static int store_cand_pending(struct store *st, const struct store_srch *sr,
                              const struct store_query *q, struct store_cand **cand, size_t *n,
                              size_t *cap)
{
    size_t base = 10 + sr->n_short + sr->n_long; /* after the short terms and the IDFs */
    struct buf sql = BUF_INIT;
    /* CROSS JOIN keeps fts_pending (usually empty) the outer loop: a plain JOIN let the
     * planner scan every message with tt_contains (10x slower search, bench/run-all.sh). */
    buf_printf(&sql, "SELECT m.id FROM fts_pending p CROSS JOIN messages m "
                     "ON m.id = p.message_id WHERE m.status <> 'streaming'%s",
               buf_str(&sr->where));
    size_t n_unfiltered = 0; /* the filtered ones are in sr->where */
    for (size_t k = 0; k < sr->n_terms; k++)
        n_unfiltered += !store_term_filtered(sr->terms[k]);
    store_contains_all(&sql, base, n_unfiltered);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, buf_str(&sql), -1, &s, NULL);
    buf_free(&sql);
    if (rc != SQLITE_OK)
        return store_fail(st, "cannot search");
    store_query_bind(s, q); /* parameters this statement does not use are ignored */
    for (size_t k = 0, j = 0; k < sr->n_terms; k++)
        if (!store_term_filtered(sr->terms[k]))
            sqlite3_bind_text(s, (int)(base + j++), sr->terms[k], -1, SQLITE_STATIC);
    size_t before = *n;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        size_t i = 0;
        while (i < before && (*cand)[i].id != id)
            i++;
        if (i < before)
            continue;
        XGROW(*cand, *n + 1, *cap);
        (*cand)[(*n)++] = (struct store_cand){id, 0.0};
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot search");
}

/* Phase one, full text: the best matches into *out (message ids and ranks) and *n. tt_rank()
 * ranks the matches with IDFs from the sample (bm25() when it cannot be registered). Ranking
 * costs a few microseconds per match, so only the newest STORE_RANK_WINDOW matches are
 * ranked: exact for all but very common terms. 0 or -1. */
static int store_search_fulltext(struct store *st, const struct store_srch *sr,
                                 struct store_hit **out, size_t *n)
{
    size_t n_long = sr->n_long;
    double *frac = xcalloc(2 * n_long, sizeof *frac), *frac_m = frac + n_long;
    size_t *ord = xmalloc(n_long * sizeof *ord), n_cand = 0;
    struct buf match = BUF_INIT, rank = BUF_INIT;
    struct store_cand *cand = NULL;
    /* tt_rank(tbl, f1, ... fn) takes n + 1 arguments: a query of more phrases than SQLite lets
     * a function take (127) is ranked by bm25() (until 2026-12 it failed: "too many arguments
     * on function tt_rank", exit status 1 as for no match) */
    int ranked = store_fts_rank_init(st) == 0 &&
                 n_long < (size_t)sqlite3_limit(st->db, SQLITE_LIMIT_FUNCTION_ARG, -1),
        ret = -1;
    int64_t bound = 0;
    double rows = 0;
    if (store_sample(st, sr->words, sr->phr, n_long, ranked ? frac : NULL, &bound, &rows) != 0)
        goto out;
    store_match_order(sr, frac, ord, frac_m, &match);
    store_rank_sql(&rank, sr->tbl, ranked, 10 + sr->n_short, n_long);
    struct store_query q = {sr->opts,     buf_str(&match),        sr->terms, sr->n_terms,
                            sr->n_short, ranked ? frac_m : NULL, n_long};
    cand = xmalloc((STORE_RANK_WINDOW + (size_t)sr->n_wlong) * sizeof *cand);
    size_t cap = STORE_RANK_WINDOW + (size_t)sr->n_wlong;
    int rc = store_cand_window(st, sr, &q, buf_str(&rank), bound, rows, cand, &n_cand);
    if (rc == 0 && sr->words && sr->n_wlong > 0)
        rc = store_cand_wlong(st, sr, &q, ord, ranked, cand, &n_cand);
    if (rc == 0)
        rc = store_cand_pending(st, sr, &q, &cand, &n_cand, &cap);
    if (rc != 0)
        goto out;
    qsort(cand, n_cand, sizeof *cand, store_cand_cmp);
    size_t lim = sr->opts->limit > 0 ? (size_t)sr->opts->limit : 20;
    *n = n_cand < lim ? n_cand : lim;
    *out = *n ? xcalloc(*n, sizeof **out) : NULL;
    for (size_t i = 0; i < *n; i++) {
        (*out)[i].message_id = cand[i].id;
        (*out)[i].rank = cand[i].score;
    }
    ret = 0;
out:
    free(frac);
    free(ord);
    free(cand);
    buf_free(&match);
    buf_free(&rank);
    return ret;
}

/* Phase one when every term has 1-2 characters: scan the messages newest first until enough
 * hits. 0 or -1 (the hits so far stay in *out). */
static int store_search_scan(struct store *st, const struct store_srch *sr,
                             struct store_hit **out, size_t *n)
{
    char *sql = xasprintf("SELECT m.id, 0 FROM messages m WHERE m.status <> 'streaming' "
                          "%s ORDER BY m.id DESC LIMIT ?5",
                          buf_str(&sr->where));
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    free(sql);
    if (rc != SQLITE_OK)
        return store_fail(st, "cannot search");
    struct store_query q = {sr->opts, NULL, sr->terms, sr->n_terms, sr->n_short, NULL, 0};
    store_query_bind(s, &q);
    size_t cap = 0;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        struct store_hit *h = &(*out)[(*n)++];
        memset(h, 0, sizeof *h);
        h->message_id = sqlite3_column_int64(s, 0);
    }
    int ret = rc == SQLITE_DONE ? 0 : store_fail(st, "cannot search");
    sqlite3_finalize(s);
    return ret;
}

/* The conversations whose title holds every term (opts->titles), newest first, into *out and
 * *n (at most the limit; the caller keeps those with no message found). A title is what the user named a conversation (rename) or its first
 * prompt: until 2026-12 a search for its words found only messages, never the conversation
 * named so. A title is short and conversations few: a scan, no index. 0 or -1. */
static int store_search_titles(struct store *st, const struct store_srch *sr, size_t limit,
                               struct store_hit **out, size_t *n)
{
    const struct store_search_opts *o = sr->opts;
    struct buf sql = BUF_INIT;
    buf_appends(&sql, "SELECT c.id, c.title, c.model, c.updated FROM conversations c "
                      "WHERE c.title IS NOT NULL AND ");
    store_contains_tree(&sql, "c.title", 10, sr->n_terms);
    if (o->model)
        buf_appends(&sql, " AND " STORE_MODEL_IS("c.model", "?2"));
    if (o->since > 0)
        buf_appends(&sql, " AND c.updated >= ?3");
    if (o->until > 0)
        buf_appends(&sql, " AND c.updated < ?4");
    buf_appends(&sql, " ORDER BY c.updated DESC, c.id DESC LIMIT ?5");
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, buf_str(&sql), -1, &s, NULL);
    buf_free(&sql);
    if (rc != SQLITE_OK)
        return store_fail(st, "cannot search the titles");
    struct store_query q = {o, NULL, NULL, 0, 0, NULL, 0}; /* ?2 to ?5 */
    store_query_bind(s, &q);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)limit);
    for (size_t i = 0; i < sr->n_terms; i++)
        sqlite3_bind_text(s, (int)(10 + i), sr->terms[i], -1, SQLITE_STATIC);
    size_t cap = 0;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        struct store_hit *h = &(*out)[(*n)++];
        memset(h, 0, sizeof *h);
        h->conversation_id = sqlite3_column_int64(s, 0);
        h->title = store_col_str(s, 1);
        h->role = xstrdup("title");
        h->model = store_col_str(s, 2);
        h->created = sqlite3_column_int64(s, 3);
        h->snippet = store_snippet(h->title, strlen(h->title), sr->nds, sr->n_terms,
                                   o->snippet_chars > 0 ? o->snippet_chars : 80,
                                   o->open ? o->open : "[", o->close ? o->close : "]");
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot search the titles");
}

/* Phase two: details and snippets of the few hits; hits whose message is gone are dropped.
 * 0 or -1. */
static int store_search_fill(struct store *st, const struct store_srch *sr,
                             struct store_hit *hits, size_t *n)
{
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        struct store_hit h = hits[i];
        int r = store_hit_fill(st, &h, sr->nds, sr->n_terms, sr->opts);
        if (r < 0)
            return -1;
        if (r == 0)
            hits[kept++] = h;
    }
    *n = kept;
    return 0;
}

static const char store_or_side[] = "OR needs a word or a \"phrase\" on each side";

/* The query's alternatives: the query cut at each OR that stands alone, unquoted. Returns
 * their count (*groups: malloc'd strings), or 0 with *why when the query has no term or an
 * OR has none on one side (*groups NULL). */
static size_t store_query_groups(const char *q, char ***groups, const char **why)
{
    size_t n = 0, cap = 0;
    *groups = NULL;
    *why = NULL;
    for (const char *from = q, *p = q;;) {
        while (store_blank((unsigned char)*p))
            p++;
        const char *tok = p;
        if (*p == '"') {
            const char *end = strchr(p + 1, '"');
            p = end ? end + 1 : p + strlen(p);
        } else {
            while (*p && !store_blank((unsigned char)*p))
                p++;
        }
        int cut = p - tok == 2 && tok[0] == 'O' && tok[1] == 'R';
        if (!cut && *tok)
            continue;
        char *grp = xstrndup(from, (size_t)(tok - from)), **terms = NULL;
        size_t k = store_query_terms(grp, &terms);
        for (size_t i = 0; i < k; i++)
            free(terms[i]);
        free(terms);
        if (!k) {
            free(grp);
            if (cut || n) /* "OR b", "a OR", "a OR OR b" */
                *why = store_or_side;
            break;
        }
        XGROW(*groups, n + 1, cap);
        (*groups)[n++] = grp;
        if (!cut)
            break;
        from = p;
    }
    if (*why || !n) {
        for (size_t i = 0; i < n; i++)
            free((*groups)[i]);
        free(*groups);
        *groups = NULL;
        if (!*why)
            *why = "the search query is empty: give a word or a \"phrase\"";
        return 0;
    }
    return n;
}

const char *store_query_error(const char *query, int *or_open)
{
    char **g;
    const char *why;
    size_t n = store_query_groups(query ? query : "", &g, &why);
    for (size_t i = 0; i < n; i++)
        free(g[i]);
    free(g);
    if (or_open)
        *or_open = !n && why == store_or_side;
    return n ? NULL : why;
}

/* A hit of one alternative with its place in the merge: the alternatives take turns, each
 * giving its best hit not yet taken (their ranks cannot be compared: bm25 sums grow with the
 * terms, and a scan's hits all rank 0). */
struct store_merged {
    struct store_hit h;
    size_t place; /* its rank within its alternative * alternatives + the alternative */
};

static int store_merged_by_id(const void *a, const void *b)
{
    const struct store_merged *x = a, *y = b;
    if (x->h.message_id != y->h.message_id)
        return x->h.message_id < y->h.message_id ? -1 : 1;
    if (x->h.conversation_id != y->h.conversation_id) /* title hits: message_id 0 */
        return x->h.conversation_id < y->h.conversation_id ? -1 : 1;
    return x->place < y->place ? -1 : x->place > y->place;
}

/* A title's hits first (store_search_opts.titles), then by place. */
static int store_merged_by_place(const void *a, const void *b)
{
    const struct store_merged *x = a, *y = b;
    int tx = x->h.message_id == 0, ty = y->h.message_id == 0;
    if (tx != ty)
        return ty - tx;
    return x->place < y->place ? -1 : x->place > y->place;
}

static int store_search_group(struct store *st, const char *query,
                              const struct store_search_opts *opts, struct store_hit **out,
                              size_t *n);
static void store_hits_free_one(struct store_hit *h);

int store_search(struct store *st, const char *query, const struct store_search_opts *opts,
                 struct store_hit **out, size_t *n)
{
    store_fts_catch_up(st, 0);
    struct store_search_opts def = {0};
    opts = opts ? opts : &def;
    *out = NULL;
    *n = 0;
    if (opts->limit < 0 || opts->limit > STORE_SEARCH_MAX) {
        store_set_err(st, "a search returns 1 to %d hits, not %d", STORE_SEARCH_MAX,
                      opts->limit);
        return -1;
    }
    char **g;
    const char *why;
    size_t n_g = store_query_groups(query ? query : "", &g, &why);
    if (!n_g) {
        store_set_err(st, "%s", why);
        return -1;
    }
    if (n_g == 1) {
        int ret = store_search_group(st, g[0], opts, out, n);
        free(g[0]);
        free(g);
        return ret;
    }
    int ret = 0;
    struct store_merged *m = NULL;
    size_t n_m = 0, cap = 0;
    for (size_t i = 0; i < n_g; i++) {
        struct store_hit *h = NULL;
        size_t k = 0;
        if (ret == 0 && (ret = store_search_group(st, g[i], opts, &h, &k)) == 0) {
            XGROW(m, n_m + k, cap);
            for (size_t r = 0; r < k; r++)
                m[n_m++] = (struct store_merged){h[r], r * n_g + i};
            free(h);
        }
        free(g[i]);
    }
    free(g);
    /* a message found by several alternatives counts once, at its first place */
    if (n_m)
        qsort(m, n_m, sizeof *m, store_merged_by_id);
    size_t kept = 0;
    for (size_t i = 0; i < n_m; i++) {
        if (kept && m[kept - 1].h.message_id == m[i].h.message_id &&
            m[kept - 1].h.conversation_id == m[i].h.conversation_id)
            store_hits_free_one(&m[i].h);
        else
            m[kept++] = m[i];
    }
    /* a conversation a message was found in by one alternative is listed by that message,
     * not also for its title by another (sorted by id, the titles' hits, id 0, come first) */
    size_t titles = 0, k2 = 0;
    while (titles < kept && m[titles].h.message_id == 0)
        titles++;
    for (size_t i = 0; i < kept; i++) {
        int found = 0;
        for (size_t j = titles; i < titles && j < kept && !found; j++)
            found = m[j].h.conversation_id == m[i].h.conversation_id;
        if (found)
            store_hits_free_one(&m[i].h);
        else
            m[k2++] = m[i];
    }
    kept = k2;
    if (kept)
        qsort(m, kept, sizeof *m, store_merged_by_place);
    size_t lim = opts->limit > 0 ? (size_t)opts->limit : 20;
    if (ret != 0) /* nothing half done: the caller gets no hits (as before OR) */
        lim = 0;
    *n = kept < lim ? kept : lim;
    *out = *n ? xmalloc(*n * sizeof **out) : NULL;
    for (size_t i = 0; i < kept; i++) {
        if (i < *n)
            (*out)[i] = m[i].h;
        else
            store_hits_free_one(&m[i].h);
    }
    free(m);
    return ret;
}

/* store_search for one alternative (no OR). */
static int store_search_group(struct store *st, const char *query,
                              const struct store_search_opts *opts, struct store_hit **out,
                              size_t *n)
{
    struct store_srch sr = {.opts = opts};
    sr.n_terms = store_query_terms(query, &sr.terms);
    if (sr.n_terms == 0) {
        free(sr.terms);
        store_set_err(st, "empty search query");
        return -1;
    }
    sr.words = store_words_usable(st, &sr);
    if (store_exec(st, "BEGIN", "cannot search") != 0) {
        store_srch_free(&sr);
        return -1;
    }
    store_words_ready(st, &sr);
    store_srch_build(&sr);
    int ret = sr.n_long ? store_search_fulltext(st, &sr, out, n)
                        : store_search_scan(st, &sr, out, n);
    if (ret == 0)
        ret = store_search_fill(st, &sr, *out, n);
    if (ret == 0 && opts->titles) { /* the titles first, then the messages, to the limit */
        struct store_hit *th = NULL;
        size_t tn = 0, lim = opts->limit > 0 ? (size_t)opts->limit : 20;
        /* room for the titles of conversations listed by a message too, dropped below */
        ret = store_search_titles(st, &sr, lim + *n, &th, &tn);
        /* a conversation with a message found is shown by that message's line, which names
         * its title: an automatic title (the first prompt) would be listed twice */
        size_t kt = 0;
        for (size_t i = 0; ret == 0 && i < tn; i++) {
            size_t k = 0;
            while (k < *n && (*out)[k].conversation_id != th[i].conversation_id)
                k++;
            if (k < *n)
                store_hits_free_one(&th[i]);
            else
                th[kt++] = th[i];
        }
        tn = kt;
        while (tn > lim) /* the limit counts after the drop */
            store_hits_free_one(&th[--tn]);
        if (ret == 0) {
            size_t keep = *n < lim - tn ? *n : lim - tn;
            th = xrealloc(th, (tn + keep + 1) * sizeof *th);
            if (keep)
                memcpy(th + tn, *out, keep * sizeof *th);
            for (size_t k = keep; k < *n; k++)
                store_hits_free_one(&(*out)[k]);
            free(*out);
            *out = th;
            *n = tn + keep;
        } else {
            store_hits_free(th, tn);
        }
    }
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    if (ret != 0) {
        store_hits_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    store_srch_free(&sr);
    return ret;
}

static void store_hits_free_one(struct store_hit *h)
{
    free(h->title);
    free(h->role);
    free(h->model);
    free(h->snippet);
}

void store_hits_free(struct store_hit *hits, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_hits_free_one(&hits[i]);
    free(hits);
}
