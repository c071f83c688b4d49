/* info.h - what the store's library is, and a look at a store file from outside: for
 * `tokterm --version`, `tokterm doctor` and the commands that read much (search). The rest of
 * the program never includes sqlite_dl.h or fts_words.h: those are private to store/. */
#ifndef TT_STORE_INFO_H
#define TT_STORE_INFO_H

/* SQLite's version ("3.46.1"), loading the library if needed; NULL when it cannot be loaded,
 * with *err set to a message that says what to install (free it). */
const char *store_library_version(char **err);

/* Before the first store is opened: this process will read many pages (a search), so the page
 * cache is set up in one huge page (see sqlite_dl.c). */
void store_prefer_large_reads(void);

#endif
