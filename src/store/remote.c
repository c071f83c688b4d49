/* remote.c - the provider's batches `batch --remote` created, by the hash of their requests
 * (schema v11): what lets the same command, run again, pick a running batch up. */
#include "config.h"
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run sql (one statement binding ?1 = hash and more from the caller) in a write transaction. */
static int store_remote_write(struct store *st, const char *sql, const unsigned char *hash,
                              const char *api, const char *base_url, const char *batch_id,
                              long requests, const char *what)
{
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, sql);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_blob(s, 1, hash, STORE_REMOTE_HASH_LEN, SQLITE_STATIC);
    if (api) {
        store_bind_text(s, 2, api);
        store_bind_text(s, 3, base_url);
        store_bind_text(s, 4, batch_id);
        sqlite3_bind_int64(s, 5, requests);
        sqlite3_bind_int64(s, 6, store_epoch(st));
    }
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, what);
        return store_rollback(st);
    }
    return store_commit(st);
}

int store_remote_put(struct store *st, const unsigned char *hash, const char *api,
                     const char *base_url, const char *batch_id, long requests)
{
    return store_remote_write(st,
                              "INSERT OR REPLACE INTO remote_batches(hash, api, base_url, "
                              "batch_id, requests, created) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                              hash, api ? api : "openai", base_url ? base_url : "", batch_id,
                              requests, "cannot save the batch id");
}

int store_remote_del(struct store *st, const unsigned char *hash)
{
    return store_remote_write(st, "DELETE FROM remote_batches WHERE hash = ?1", hash, NULL,
                              NULL, NULL, 0, "cannot forget the batch id");
}

int store_remote_get(struct store *st, const unsigned char *hash, char *id, size_t size)
{
    sqlite3_stmt *s = store_prep(st, "SELECT batch_id FROM remote_batches WHERE hash = ?1");
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, hash, STORE_REMOTE_HASH_LEN, SQLITE_STATIC);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        snprintf(id, size, "%s", t ? (const char *)t : "");
    }
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        store_set_err(st, "no batch for these requests");
        return STORE_NOT_FOUND;
    }
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot read the batch id");
}
