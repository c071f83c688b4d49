/* info.h - what the store's library is, and a look at a store file from outside: for
 * `tokterm --version`, `tokterm doctor` and the commands that read much (search). The rest of
 * the program never includes sqlite_dl.h or fts_words.h: those are private to store/. */
#ifndef TT_STORE_INFO_H
#define TT_STORE_INFO_H

/* A word longer than this keeps its message out of the word index (fts_words.h's
 * FTS_WORDS_LONG; info.c checks that they agree). */
#define STORE_WORDS_LONG_CHARS 256

/* SQLite's version ("3.46.1"), loading the library if needed; NULL when it cannot be loaded,
 * with *err set to a message that says what to install (free it). */
const char *store_library_version(char **err);
/* 1 when SQLite is linked into the program, 0 when it is loaded with dlopen() (configure
 * --with-sqlite). */
int store_library_linked(void);

/* Before the first store is opened: this process will read many pages (a search), so the page
 * cache is set up in one huge page (see sqlite_dl.c). */
void store_prefer_large_reads(void);

/* What store_inspect found in a database file. */
struct store_inspect {
    char *problem;             /* NULL: PRAGMA quick_check said "ok"; else its first line (or
                                  the error that stopped it); the counts below are then unset */
    int version;               /* PRAGMA user_version; -1 unknown */
    long long pages, page_size; /* PRAGMA page_count and page_size (0 unknown) */
    long long conversations;   /* rows; -1: no conversations table (not a tokterm database) */
    long long words_queued;    /* changes waiting for the word index (words_queue) */
    long long words_long;      /* messages left out of the word index (words_long) */
};

#define STORE_INSPECT_UNLOADED (-2) /* store_inspect: SQLite could not be loaded */

/* Open path read-only (never creating or migrating it; waits up to 2 s for a writer), run
 * PRAGMA quick_check and, when it passes, read the schema version, the size in pages and the
 * counts above. 0 when the file was opened (look at out->problem); -1 when SQLite cannot open
 * it and STORE_INSPECT_UNLOADED when SQLite cannot be loaded, with *err set (free it). Clear
 * *out with store_inspect_clear in every case. */
int store_inspect(const char *path, struct store_inspect *out, char **err);
void store_inspect_clear(struct store_inspect *out);

#endif
