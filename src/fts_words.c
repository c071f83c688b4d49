/* fts_words.c - the "tt_words" FTS5 tokenizer (see fts_words.h). */
#include "config.h"
#include "fts_words.h"
#include "sqlite_dl.h"
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

static int utf8_lead(unsigned char c)
{
    return (c & 0xC0) != 0x80;
}

/* One word (folded by unicode61): its pieces, each at the word's position. */
static int words_pieces(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    struct words_emit *e = ctx;
    int chars = 0;
    for (int i = 0; i < n; i++)
        chars += utf8_lead((unsigned char)tok[i]);
    if (chars > FTS_WORDS_LONG) /* its message is not indexed here (tt_words_long) */
        return SQLITE_OK;
    int first = 1;
    for (int i = 0; i < n && chars >= FTS_WORDS_MIN; chars--) {
        int j = i, k = 0;
        while (j < n && k < FTS_WORDS_MAX) {
            j++;
            while (j < n && !utf8_lead((unsigned char)tok[j]))
                j++;
            k++;
        }
        int rc = e->token(e->ctx, first ? 0 : FTS5_TOKEN_COLOCATED, tok + i, j - i, start, end);
        if (rc != SQLITE_OK)
            return rc;
        first = 0;
        i++;
        while (i < n && !utf8_lead((unsigned char)tok[i]))
            i++;
    }
    return SQLITE_OK;
}

static int words_tokenize(Fts5Tokenizer *tok, void *ctx, int flags, const char *text, int n,
                          int (*token)(void *, int, const char *, int, int, int))
{
    struct words_tok *t = (struct words_tok *)tok;
    if (flags & FTS5_TOKENIZE_QUERY) /* a query's words are looked up whole (as prefixes) */
        return t->w->u61.xTokenize(t->inner, ctx, flags, text, n, token);
    struct words_emit e = {ctx, token};
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
        w->u61.xCreate(w->u61_data, (const char **)words_args, WORDS_NARGS, &w->query) != SQLITE_OK) {
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

/* tt_words_long(text): is any word longer than FTS_WORDS_LONG characters? */
static int words_long_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    (void)start;
    (void)end;
    int chars = 0;
    for (int i = 0; i < n; i++)
        chars += utf8_lead((unsigned char)tok[i]);
    if (chars > FTS_WORDS_LONG) {
        *(int *)ctx = 1;
        return SQLITE_DONE; /* stops the tokenizer: one is enough */
    }
    return SQLITE_OK;
}

static void words_long_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    struct fts_words *w = sqlite3_user_data(ctx);
    const char *text = (const char *)sqlite3_value_text(argv[0]);
    int n = sqlite3_value_bytes(argv[0]), found = 0;
    int rc = text && n > FTS_WORDS_LONG
                 ? w->u61.xTokenize(w->query, &found, FTS5_TOKENIZE_DOCUMENT, text, n,
                                    words_long_token)
                 : SQLITE_OK;
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        sqlite3_result_error_code(ctx, rc);
    else
        sqlite3_result_int(ctx, found);
}

/* fts_words_term's count of a term's tokens. */
struct words_check {
    int n, start, end, chars;
};

static int words_check_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    struct words_check *c = ctx;
    if (c->n++ == 0) {
        c->start = start;
        c->end = end;
        for (int i = 0; i < n; i++)
            c->chars += utf8_lead((unsigned char)tok[i]);
    }
    return SQLITE_OK;
}

int fts_words_term(struct fts_words *w, const char *term, int len)
{
    if (!w || !term || len <= 0)
        return 0;
    struct words_check c = {0, 0, 0, 0};
    if (w->u61.xTokenize(w->query, &c, FTS5_TOKENIZE_QUERY, term, len, words_check_token) !=
        SQLITE_OK)
        return 0;
    return c.n == 1 && c.start == 0 && c.end == len && c.chars >= FTS_WORDS_MIN &&
           c.chars <= FTS_WORDS_MAX;
}
