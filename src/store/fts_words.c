/* fts_words.c - the "tt_words" FTS5 tokenizer (see fts_words.h). */
#include "config.h"
#include "store/fts_words.h"
#include "store/sqlite_dl.h"
#include "base/utf8.h"
#include <stdlib.h>
#include <string.h>

/* The connection's state: unicode61's methods, and one instance of it for fts_words_term. */
struct fts_words {
    fts5_tokenizer u61;
    void *u61_data;
    Fts5Tokenizer *query;
};

/* One tt_words tokenizer (one per table that uses it). */
struct words_tok {
    struct fts_words *w;
    Fts5Tokenizer *inner;
};

/* What the pieces callback passes on. */
struct words_emit {
    void *ctx;
    int (*token)(void *, int, const char *, int, int, int);
    int placed;     /* a piece of this word was emitted: the next ones are colocated */
    int start, end; /* the word's offsets */
};

static const char *const words_args[] = {"remove_diacritics", "0", "tokenchars", "\xCD\x85"};
#define WORDS_NARGS 4

static int words_create(void *data, const char **argv, int argc, Fts5Tokenizer **out)
{
    (void)argv;
    (void)argc;
    struct fts_words *w = data;
    struct words_tok *t = sqlite3_malloc64(sizeof *t);
    if (!t)
        return SQLITE_NOMEM;
    t->w = w;
    int rc = w->u61.xCreate(w->u61_data, (const char **)words_args, WORDS_NARGS, &t->inner);
    if (rc != SQLITE_OK) {
        sqlite3_free(t);
        return rc;
    }
    *out = (Fts5Tokenizer *)t;
    return SQLITE_OK;
}

static void words_delete(Fts5Tokenizer *tok)
{
    struct words_tok *t = (struct words_tok *)tok;
    if (t) {
        t->w->u61.xDelete(t->inner);
        sqlite3_free(t);
    }
}

/* The code point at s[i] of s[0..n) (UTF-8 from unicode61: valid); *next gets the offset of
 * the character after it. */
static uint32_t words_cp(const char *s, int n, int i, int *next)
{
    uint32_t cp = 0;
    *next = i + (int)utf8_decode(s + i, (size_t)(n - i), &cp);
    return cp;
}

/* Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, Hangul, kana, CJK
 * ideographs. unicode61 makes a whole sentence of them one word, one distinct piece per
 * character here; the trigram index finds them as well, with shorter doclists than Latin
 * text has. So the word index leaves them out, and a term holding one goes to the trigram
 * index. */
static int words_unspaced(uint32_t cp)
{
    return (cp >= 0x0E00 && cp <= 0x0EFF) || (cp >= 0x1000 && cp <= 0x109F) ||
           (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0x1780 && cp <= 0x17FF) ||
           (cp >= 0x2E80 && cp <= 0x9FFF) || (cp >= 0xA960 && cp <= 0xA97F) ||
           (cp >= 0xAC00 && cp <= 0xD7FF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
           (cp >= 0xFF66 && cp <= 0xFFDC) || (cp >= 0x20000 && cp <= 0x3FFFF);
}

/* Call run() for each run of a word's characters that are not of an unspaced script
 * (usually the whole word): its bytes and characters. Stops at a run's non-OK code. */
static int words_runs(const char *tok, int n, void *ctx,
                      int (*run)(void *ctx, const char *s, int len, int chars))
{
    int from = 0, chars = 0;
    for (int i = 0; i <= n;) {
        int next = i + 1;
        uint32_t cp = i < n ? words_cp(tok, n, i, &next) : 0;
        if (i == n || words_unspaced(cp)) {
            if (chars > 0) {
                int rc = run(ctx, tok + from, i - from, chars);
                if (rc != SQLITE_OK)
                    return rc;
            }
            from = next;
            chars = 0;
        } else {
            chars++;
        }
        i = next;
    }
    return SQLITE_OK;
}

/* One run of a word: its pieces, all at the word's position. */
static int words_run_pieces(void *ctx, const char *s, int n, int chars)
{
    struct words_emit *e = ctx;
    if (chars > FTS_WORDS_LONG) /* its message is not indexed here (tt_words_long) */
        return SQLITE_OK;
    for (int i = 0; i < n && chars >= FTS_WORDS_MIN; chars--) {
        int j = i;
        for (int k = 0; j < n && k < FTS_WORDS_MAX; k++)
            words_cp(s, n, j, &j);
        int rc = e->token(e->ctx, e->placed ? FTS5_TOKEN_COLOCATED : 0, s + i, j - i, e->start,
                          e->end);
        if (rc != SQLITE_OK)
            return rc;
        e->placed = 1;
        words_cp(s, n, i, &i);
    }
    return SQLITE_OK;
}

/* One word (folded by unicode61): the pieces of its runs. */
static int words_pieces(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    struct words_emit *e = ctx;
    e->placed = 0;
    e->start = start;
    e->end = end;
    return words_runs(tok, n, e, words_run_pieces);
}

static int words_tokenize(Fts5Tokenizer *tok, void *ctx, int flags, const char *text, int n,
                          int (*token)(void *, int, const char *, int, int, int))
{
    struct words_tok *t = (struct words_tok *)tok;
    if (flags & FTS5_TOKENIZE_QUERY) /* a query's words are looked up whole (as prefixes) */
        return t->w->u61.xTokenize(t->inner, ctx, flags, text, n, token);
    struct words_emit e = {ctx, token, 0, 0, 0};
    return t->w->u61.xTokenize(t->inner, &e, flags, text, n, words_pieces);
}

static void words_destroy(void *data)
{
    struct fts_words *w = data;
    if (w->query)
        w->u61.xDelete(w->query);
    free(w);
}

static void words_long_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv);

struct fts_words *fts_words_register(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &s, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_pointer(s, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(s);
    sqlite3_finalize(s);
    if (!api)
        return NULL;
    struct fts_words *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (api->xFindTokenizer(api, "unicode61", &w->u61_data, &w->u61) != SQLITE_OK ||
        w->u61.xCreate(w->u61_data, (const char **)words_args, WORDS_NARGS, &w->query) !=
            SQLITE_OK) {
        free(w);
        return NULL;
    }
    fts5_tokenizer methods = {words_create, words_delete, words_tokenize};
    if (api->xCreateTokenizer(api, "tt_words", w, &methods, words_destroy) != SQLITE_OK) {
        words_destroy(w);
        return NULL;
    }
    /* w is freed with the tokenizer, when the connection closes: no call comes after */
    if (sqlite3_create_function(db, "tt_words_long", 1,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, w,
                                words_long_sql, NULL, NULL) != SQLITE_OK)
        return NULL;
    return w;
}

/* tt_words_long(text): does the text look like a blob: a run of a word longer than
 * FTS_WORDS_LONG characters, or more than FTS_WORDS_LONGISH_MAX runs of FTS_WORDS_LONGISH or
 * more (base64, PEM or a hex dump wrapped in lines of 60-76 characters)? Or would it add more
 * than about FTS_WORDS_DISTINCT_MAX distinct pieces (a long answer of numbers, ids, names)?
 * FTS5 keeps each distinct term of a document in memory until the document ends (some 140
 * bytes each) and sorts them all then: a 3.9 MB answer of distinct numbered words, 2 million
 * pieces, took 270 MB and 9-35 s to index, the trigram index 0.5 s. Counted are the pieces of
 * each distinct run (a run whose hash sets a new bit in a bitmap of FTS_WORDS_SEEN_BITS: one
 * hash per run, not per piece), and only in a text of more bytes than the limit (each piece
 * starts at a byte of its own). */
struct words_blob {
    int found, longish;
    unsigned char *seen; /* FTS_WORDS_SEEN_BITS bits, NULL: not counted */
    int distinct;        /* pieces of the runs that set a bit in it */
};

#define FTS_WORDS_SEEN_BITS (1u << 20) /* 128 KiB: ~3 % of collisions at the limit */

static int words_long_run(void *ctx, const char *s, int n, int chars)
{
    struct words_blob *b = ctx;
    if (chars >= FTS_WORDS_LONGISH)
        b->longish++;
    if (chars > FTS_WORDS_LONG || b->longish > FTS_WORDS_LONGISH_MAX) {
        b->found = 1;
        return SQLITE_DONE; /* stops the tokenizer: one is enough */
    }
    if (!b->seen || chars < FTS_WORDS_MIN)
        return SQLITE_OK;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    h &= FTS_WORDS_SEEN_BITS - 1;
    unsigned char bit = (unsigned char)(1u << (h & 7));
    if (!(b->seen[h >> 3] & bit)) {
        b->seen[h >> 3] |= bit;
        b->distinct += chars - FTS_WORDS_MIN + 1;
        if (b->distinct > FTS_WORDS_DISTINCT_MAX) {
            b->found = 1;
            return SQLITE_DONE;
        }
    }
    return SQLITE_OK;
}

static int words_long_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    (void)start;
    (void)end;
    return words_runs(tok, n, ctx, words_long_run);
}

static void words_long_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    struct fts_words *w = sqlite3_user_data(ctx);
    const char *text = (const char *)sqlite3_value_text(argv[0]);
    int n = sqlite3_value_bytes(argv[0]);
    struct words_blob b = {0, 0, NULL, 0};
    if (text && n > FTS_WORDS_DISTINCT_MAX &&
        !(b.seen = calloc(FTS_WORDS_SEEN_BITS / 8, 1))) {
        sqlite3_result_error_code(ctx, SQLITE_NOMEM);
        return;
    }
    int rc = text && n > FTS_WORDS_LONG
                 ? w->u61.xTokenize(w->query, &b, FTS5_TOKENIZE_DOCUMENT, text, n,
                                    words_long_token)
                 : SQLITE_OK;
    free(b.seen);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        sqlite3_result_error_code(ctx, rc);
    else
        sqlite3_result_int(ctx, b.found);
}

/* fts_words_term's count of a term's tokens. */
struct words_check {
    int n, start, end, chars, unspaced;
};

static int words_check_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    struct words_check *c = ctx;
    if (c->n++ == 0) {
        c->start = start;
        c->end = end;
        for (int i = 0; i < n; c->chars++)
            c->unspaced |= words_unspaced(words_cp(tok, n, i, &i));
    }
    return SQLITE_OK;
}

int fts_words_term(struct fts_words *w, const char *term, int len)
{
    if (!w || !term || len <= 0)
        return 0;
    struct words_check c = {0, 0, 0, 0, 0};
    if (w->u61.xTokenize(w->query, &c, FTS5_TOKENIZE_QUERY, term, len, words_check_token) !=
        SQLITE_OK)
        return 0;
    return c.n == 1 && c.start == 0 && c.end == len && !c.unspaced && c.chars >= FTS_WORDS_MIN &&
           c.chars <= FTS_WORDS_MAX;
}
