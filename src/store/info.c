/* info.c - the store's library and a read-only look at a store file (see info.h). */
#include "config.h"
#include "store/info.h"

#include "store/fts_words.h"
#include "store/sqlite_dl.h"
#include "store/store_int.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(STORE_WORDS_LONG_CHARS == FTS_WORDS_LONG, "info.h and fts_words.h disagree");

const char *store_library_version(char **err)
{
    return sqlite_dl_load(err) == 0 ? sqlite3_libversion() : NULL;
}

int store_library_linked(void)
{
#ifdef TT_SQLITE_STATIC
    return 1;
#else
    return 0;
#endif
}

void store_prefer_large_reads(void)
{
    sqlite_dl_prefer_large_reads();
}

/* PRAGMA quick_check: NULL when it says "ok", else its first line or the error that stopped
 * it (malloc'd). */
static char *store_inspect_check(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    char *first = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, NULL) != SQLITE_OK)
        return xstrdup(sqlite3_errmsg(db));
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW)
        if (!first)
            first = xstrdup((const char *)sqlite3_column_text(s, 0));
    if (r != SQLITE_DONE && !first)
        first = xstrdup(sqlite3_errmsg(db));
    sqlite3_finalize(s);
    if (!first)
        return xstrdup("?");
    if (strcmp(first, "ok") == 0) {
        free(first);
        return NULL;
    }
    return first;
}

/* The first column of the first row of sql into *v; left alone when there is none. */
static void store_inspect_int(sqlite3 *db, const char *sql, long long *v)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
        return;
    if (sqlite3_step(s) == SQLITE_ROW)
        *v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
}

int store_inspect(const char *path, struct store_inspect *out, char **err)
{
    memset(out, 0, sizeof *out);
    out->version = -1;
    out->conversations = -1;
    if (sqlite_dl_load(err) != 0)
        return STORE_INSPECT_UNLOADED;
    sqlite3 *db = NULL;
    /* as the read-only commands read it: immutable when no WAL index can be made beside it (a
     * read-only filesystem); until 2026-12 doctor called such an intact file damaged ("unable
     * to open database file") and said to move it away */
    for (int immutable = 0; immutable < 2; immutable++) {
        char *uri = store_reader_uri(path, immutable);
        int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
        if (rc != SQLITE_OK) {
            *err = xstrdup(db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
            sqlite3_close(db);
            return -1;
        }
        sqlite3_busy_timeout(db, 2000);
        fts_words_register(db); /* SQLite 3.44-3.46's quick_check loads every FTS5 tokenizer */
        out->problem = store_inspect_check(db);
        if (!out->problem || immutable || (sqlite3_extended_errcode(db) & 0xff) != SQLITE_CANTOPEN)
            break;
        free(out->problem);
        out->problem = NULL;
        sqlite3_close(db);
        db = NULL;
    }
    if (!out->problem) {
        long long version = -1;
        store_inspect_int(db, "PRAGMA user_version", &version);
        out->version = (int)version;
        store_inspect_int(db, "PRAGMA page_count", &out->pages);
        store_inspect_int(db, "PRAGMA page_size", &out->page_size);
        store_inspect_int(db, "SELECT count(*) FROM conversations", &out->conversations);
        store_inspect_int(db, "SELECT count(*) FROM words_queue", &out->words_queued);
        store_inspect_int(db, "SELECT count(*) FROM words_long", &out->words_long);
    }
    sqlite3_close(db);
    return 0;
}

void store_inspect_clear(struct store_inspect *out)
{
    free(out->problem);
    out->problem = NULL;
}
