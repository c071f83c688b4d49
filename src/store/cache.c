/* cache.c - the response cache: lookups (read-only; hits recorded with the next write),
 * inserts with TTL expiry and LRU eviction under a size cap. */
#include "config.h"
#include "store/store_int.h"

#include "base/sha256.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

#define STORE_TOUCH_MAX 256 /* pending cache-hit updates before they get their own write */

/* ---------------------------------------------------------------- response cache */

void store_cache_key(const char *canonical, size_t len, unsigned char key[STORE_CACHE_KEY_LEN])
{
    sha256_digest(canonical, len, key);
}

void store_cache_key_parts(const char *const *parts, const size_t *lens, size_t n,
                           unsigned char key[STORE_CACHE_KEY_LEN])
{
    struct sha256 ctx;
    sha256_init(&ctx);
    for (size_t i = 0; i < n; i++)
        sha256_update(&ctx, parts[i], lens[i]);
    sha256_final(&ctx, key);
}

void store_cache_set_limits(struct store *st, int64_t ttl, int64_t max_bytes)
{
    st->cache_ttl = ttl > 0 ? ttl : 0;
    st->cache_max = max_bytes > 0 ? max_bytes : 0;
}

/* Delete one entry by key in its own transaction (an expired hit). */
static int store_cache_drop(struct store *st, const unsigned char *key)
{
    static const char q[] = "DELETE FROM response_cache WHERE key = ?1";
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_blob(s, 1, key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot update the cache");
        return store_rollback(st);
    }
    return store_commit(st);
}

int store_cache_get(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                    struct store_cache_entry *out)
{
    /* an entry that refers to a saved answer (v14) takes its text from the row */
    static const char q_get[] =
        "SELECT CASE WHEN c.message_id IS NULL THEN c.content ELSE m.content END, "
        "CASE WHEN c.message_id IS NULL THEN c.reasoning ELSE m.reasoning END, c.model, "
        "c.finish_reason, c.prompt_tokens, c.completion_tokens, c.total_tokens, c.created, "
        "c.last_used, c.hits, c.size, c.message_id IS NOT NULL AND m.id IS NULL "
        "FROM response_cache c LEFT JOIN messages m ON m.id = c.message_id WHERE c.key = ?1";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = store_prep(st, q_get);
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    int rc = store_step(st, s);
    if (rc != SQLITE_ROW) {
        store_done(st, s);
        if (rc == SQLITE_DONE)
            return STORE_NOT_FOUND;
        return store_fail(st, "cannot read the cache");
    }
    int64_t now = store_epoch(st);
    out->created = sqlite3_column_int64(s, 7);
    if ((st->cache_ttl > 0 && out->created <= now - st->cache_ttl) ||
        sqlite3_column_int(s, 11)) { /* expired, or its row is gone */
        store_done(st, s);
        memset(out, 0, sizeof *out);
        return store_cache_drop(st, key) == 0 ? STORE_NOT_FOUND : -1;
    }
    out->content = store_col_str(s, 0);
    if (!out->content)
        out->content = xstrdup("");
    out->reasoning = store_col_str(s, 1);
    out->model = store_col_str(s, 2);
    out->finish_reason = store_col_str(s, 3);
    out->usage.prompt_tokens = store_col_count(s, 4);
    out->usage.completion_tokens = store_col_count(s, 5);
    out->usage.total_tokens = store_col_count(s, 6);
    out->hits = sqlite3_column_int64(s, 9) + 1;
    out->size = sqlite3_column_int64(s, 10);
    out->last_used = now;
    store_done(st, s);

    /* Refreshing last_used is a write; keep lookups read-only and let the update ride along
     * with the next write transaction (in tokterm, saving the replayed answer). */
    for (size_t i = 0; i < st->n_touches; i++)
        if (memcmp(st->touches[i].key, key, STORE_CACHE_KEY_LEN) == 0) {
            st->touches[i].when = now;
            out->hits += st->touches[i].hits++;
            return 0;
        }
    XGROW(st->touches, st->n_touches + 1, st->cap_touches);
    struct store_touch *t = &st->touches[st->n_touches++];
    memcpy(t->key, key, STORE_CACHE_KEY_LEN);
    t->when = now;
    t->hits = 1;
    if (st->n_touches >= STORE_TOUCH_MAX && store_begin(st) == 0)
        store_commit(st);
    return 0;
}

/* Write pending cache-hit updates inside the current write transaction. Best effort: a
 * failure only loses recency information. */
void store_touch_apply(struct store *st)
{
    static const char q_touch[] = "UPDATE response_cache SET last_used = max(last_used, ?2), "
                                  "hits = hits + ?3 WHERE key = ?1";
    static const char q_hits[] = "UPDATE cache_meta SET hits = hits + ?1 WHERE id = 1";
    sqlite3_stmt *s = store_prep(st, q_touch);
    int64_t applied = 0;
    for (size_t i = 0; s && i < st->n_touches; i++) {
        sqlite3_bind_blob(s, 1, st->touches[i].key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, st->touches[i].when);
        sqlite3_bind_int64(s, 3, st->touches[i].hits);
        if (sqlite3_step(s) == SQLITE_DONE && sqlite3_changes(st->db) > 0)
            applied += st->touches[i].hits;
        sqlite3_reset(s);
    }
    store_done(st, s);
    if (applied && (s = store_prep(st, q_hits))) {
        sqlite3_bind_int64(s, 1, applied);
        sqlite3_step(s);
        store_done(st, s);
    }
    st->n_touches = 0;
}

static const char store_q_cache_bytes[] = "SELECT bytes FROM cache_meta WHERE id = 1";
static const char store_q_cache_expire[] = "DELETE FROM response_cache WHERE created <= ?1";

/* Evict least recently used entries until the cache fits its cap (inside a transaction). */
static int store_cache_evict(struct store *st)
{
    static const char q_lru[] =
        "SELECT id, size FROM response_cache ORDER BY last_used, id";
    static const char q_del[] = "DELETE FROM response_cache WHERE id = ?1";
    if (st->cache_max <= 0)
        return 0;
    sqlite3_stmt *s = store_prep(st, store_q_cache_bytes);
    if (!s)
        return -1;
    int64_t bytes = 0;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        bytes = sqlite3_column_int64(s, 0);
    store_done(st, s);
    if (rc != SQLITE_ROW)
        return store_fail(st, "cannot update the cache");
    if (bytes <= st->cache_max)
        return 0;
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (!(s = store_prep(st, q_lru)))
        return -1;
    while (bytes > st->cache_max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        XGROW(ids, n + 1, cap);
        ids[n++] = sqlite3_column_int64(s, 0);
        bytes -= sqlite3_column_int64(s, 1);
    }
    store_done(st, s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        free(ids);
        return store_fail(st, "cannot update the cache");
    }
    if (!(s = store_prep(st, q_del))) {
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(s, 1, ids[i]);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
            store_done(st, s);
            free(ids);
            return store_fail(st, "cannot update the cache");
        }
    }
    store_done(st, s);
    free(ids);
    return 0;
}

/* Largest answer the cache takes, bytes (0 = no limit). */
static int64_t store_cache_entry_limit(const struct store *st)
{
    if (st->cache_entry_max > 0 && (st->cache_max <= 0 || st->cache_entry_max < st->cache_max))
        return st->cache_entry_max;
    return st->cache_max;
}

void store_cache_set_entry_max(struct store *st, int64_t max_bytes)
{
    st->cache_entry_max = max_bytes;
}

/* Open the write transaction of a cache insert and drop expired entries in it. Returns 0, or
 * -1 (rolled back). */
static int store_cache_begin_put(struct store *st, int64_t now)
{
    if (store_begin(st) != 0)
        return -1;
    if (st->cache_ttl <= 0)
        return 0;
    sqlite3_stmt *s = store_prep(st, store_q_cache_expire);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, now - st->cache_ttl);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot update the cache");
        return store_rollback(st);
    }
    return 0;
}

/* 1 (error recorded) when an answer may not be cached: not complete, cut short or filtered,
 * or without content; else 0. */
static int store_cache_refused(struct store *st, enum store_status status, const char *content,
                               const char *finish_reason)
{
    if (status != STORE_COMPLETE) {
        store_set_err(st, "not cached: only complete answers are cached (status %s)",
                      store_status_name(status));
        return 1;
    }
    if (finish_reason && (strcmp(finish_reason, "length") == 0 ||
                          strcmp(finish_reason, "content_filter") == 0 ||
                          strcmp(finish_reason, "error") == 0)) {
        store_set_err(st, "not cached: the answer ended with finish reason \"%s\"",
                      finish_reason);
        return 1;
    }
    if (!content) {
        store_set_err(st, "not cached: no content");
        return 1;
    }
    return 0;
}

/* The size an answer takes in the cache (the texts, the key and a row's fixed overhead), or -1
 * (error recorded) when it may not be cached. */
static int64_t store_cache_size(struct store *st, const struct store_cache_put *p)
{
    if (store_cache_refused(st, p->status, p->content, p->finish_reason))
        return -1;
    int64_t size = (int64_t)strlen(p->content) +
                   (p->reasoning ? (int64_t)strlen(p->reasoning) : 0) +
                   (p->model ? (int64_t)strlen(p->model) : 0) +
                   (p->finish_reason ? (int64_t)strlen(p->finish_reason) : 0) +
                   STORE_CACHE_KEY_LEN + 64;
    int64_t entry_max = store_cache_entry_limit(st);
    if (entry_max > 0 && size > entry_max) {
        store_set_err(st, "not cached: the answer (%lld bytes) is larger than the largest "
                          "cached answer (%lld bytes)", (long long)size, (long long)entry_max);
        return -1;
    }
    return size;
}

/* Insert or replace one entry inside the current write transaction. Returns 0, -1 when its
 * text was refused (nothing written; error recorded), or -2 when the write failed. */
static int store_cache_insert(struct store *st, const struct store_cache_put *p, int64_t size,
                              int64_t now)
{
    static const char q_put[] =
        "INSERT INTO response_cache(key, created, last_used, hits, size, model, finish_reason, "
        "prompt_tokens, completion_tokens, total_tokens, reasoning, content) "
        "VALUES(?1, ?2, ?2, 0, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
        "ON CONFLICT(key) DO UPDATE SET created = excluded.created, "
        "last_used = excluded.last_used, hits = 0, size = excluded.size, model = excluded.model, "
        "finish_reason = excluded.finish_reason, prompt_tokens = excluded.prompt_tokens, "
        "completion_tokens = excluded.completion_tokens, total_tokens = excluded.total_tokens, "
        "reasoning = excluded.reasoning, content = excluded.content, message_id = NULL";
    sqlite3_stmt *s = store_prep(st, q_put);
    if (!s)
        return -2;
    const struct store_usage *u = p->usage;
    sqlite3_bind_blob(s, 1, p->key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, size);
    store_bind_text(s, 4, p->model);
    store_bind_text(s, 5, p->finish_reason);
    store_bind_count(s, 6, u ? u->prompt_tokens : -1);
    store_bind_count(s, 7, u ? u->completion_tokens : -1);
    store_bind_count(s, 8, u ? u->total_tokens : -1);
    if ((p->reasoning &&
         store_bind_big(st, s, 9, p->reasoning, strlen(p->reasoning), "not cached") != 0) ||
        store_bind_big(st, s, 10, p->content, strlen(p->content), "not cached") != 0) {
        store_done(st, s);
        return -1;
    }
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot update the cache");
        return -2;
    }
    return 0;
}

int store_cache_put(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                    enum store_status status, const char *content, const char *reasoning,
                    const char *model, const char *finish_reason,
                    const struct store_usage *usage)
{
    struct store_cache_put p = {key, status, content, reasoning, model, finish_reason, usage, 0};
    return store_cache_put_all(st, &p, 1) == 1 ? 0 : -1;
}

int store_cache_put_all(struct store *st, struct store_cache_put *items, size_t n)
{
    int64_t *sizes = xcalloc(n ? n : 1, sizeof *sizes);
    size_t todo = 0;
    for (size_t i = 0; i < n; i++) {
        sizes[i] = store_cache_size(st, &items[i]);
        items[i].rc = sizes[i] < 0 ? -1 : 0;
        todo += sizes[i] >= 0;
    }
    int64_t now = store_epoch(st);
    int stored = 0;
    if (todo && store_cache_begin_put(st, now) != 0) {
        todo = 0;
        stored = -1;
    }
    for (size_t i = 0; todo && i < n; i++) {
        if (items[i].rc < 0)
            continue;
        int rc = store_cache_insert(st, &items[i], sizes[i], now);
        if (rc == -2) {
            stored = -1;
            break;
        }
        items[i].rc = rc;
        stored += rc == 0;
    }
    free(sizes);
    if (stored > 0 && (store_cache_evict(st) != 0 || store_commit(st) != 0))
        stored = -1;
    if (stored <= 0) {
        store_rollback(st);
        for (size_t i = 0; stored < 0 && i < n; i++)
            items[i].rc = -1;
    }
    return stored;
}

/* store_cache_put_message: the entry refers to the message row (v14): its text is neither
 * copied (a 1 MB answer was written twice, its row and the copy) nor read (with its size
 * given, only the row's other columns are). The size counts the text all the same, so the
 * cache's limits and eviction are as they were. Same conditions as store_cache_put(). */
static const char store_q_cache_copy[] =
    "INSERT INTO response_cache(key, created, last_used, hits, size, model, finish_reason, "
    "prompt_tokens, completion_tokens, total_tokens, reasoning, content, message_id) "
    "SELECT ?1, ?2, ?2, 0, CASE WHEN ?5 >= 0 THEN ?5 ELSE length(CAST(content AS BLOB)) + "
    "ifnull(length(CAST(reasoning AS BLOB)), 0) END + ifnull(length(model), 0) + "
    "ifnull(length(finish_reason), 0) + 96, model, finish_reason, prompt_tokens, "
    "completion_tokens, total_tokens, NULL, '', id FROM messages "
    "WHERE id = ?3 AND role = 'assistant' AND status = 'complete' AND "
    "NOT EXISTS (SELECT 1 FROM message_parts WHERE message_id = ?3) AND "
    "ifnull(finish_reason, '') NOT IN ('length', 'content_filter', 'error') AND "
    "(?4 <= 0 OR ?5 >= 0 OR length(CAST(content AS BLOB)) + "
    "ifnull(length(CAST(reasoning AS BLOB)), 0) + 96 <= ?4) "
    "ON CONFLICT(key) DO UPDATE SET created = excluded.created, "
    "last_used = excluded.last_used, hits = 0, size = excluded.size, model = excluded.model, "
    "finish_reason = excluded.finish_reason, prompt_tokens = excluded.prompt_tokens, "
    "completion_tokens = excluded.completion_tokens, total_tokens = excluded.total_tokens, "
    "reasoning = excluded.reasoning, content = excluded.content, "
    "message_id = excluded.message_id";

int store_cache_put_message(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                            int64_t msg_id, int64_t bytes)
{
    int64_t limit = store_cache_entry_limit(st);
    if (bytes >= 0 && limit > 0 && bytes > limit - 96) {
        store_set_err(st, "not cached: the answer is larger than the largest cached answer");
        return -1; /* the copy's own test would read the whole text back to say so */
    }
    int64_t now = store_epoch(st);
    if (store_cache_begin_put(st, now) != 0)
        return -1;
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_prep(st, store_q_cache_copy)))
        return store_rollback(st);
    sqlite3_bind_blob(s, 1, key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, msg_id);
    sqlite3_bind_int64(s, 4, limit);
    sqlite3_bind_int64(s, 5, bytes);
    rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE)
        goto sqlfail;
    if (sqlite3_changes(st->db) == 0) {
        store_rollback(st);
        store_set_err(st, "not cached: the answer is not a complete one, or larger than the "
                          "largest cached answer");
        return -1;
    }
    if (store_cache_evict(st) != 0)
        return store_rollback(st);
    return store_commit(st);
sqlfail:
    store_fail(st, "cannot update the cache");
    return store_rollback(st);
}

void store_cache_warm(struct store *st)
{
    if (st->cache_ttl > 0)
        store_warm(st, store_q_cache_expire);
    store_warm(st, store_q_cache_copy);
    if (st->cache_max > 0)
        store_warm(st, store_q_cache_bytes);
}

int store_cache_stats(struct store *st, struct store_cache_stats *out)
{
    static const char q[] =
        "SELECT entries, bytes, hits, (SELECT min(created) FROM response_cache), "
        "(SELECT max(created) FROM response_cache) FROM cache_meta WHERE id = 1";
    memset(out, 0, sizeof *out);
    out->max_bytes = st->cache_max;
    out->ttl = st->cache_ttl;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        out->entries = sqlite3_column_int64(s, 0);
        out->bytes = sqlite3_column_int64(s, 1);
        out->hits = sqlite3_column_int64(s, 2);
        for (size_t i = 0; i < st->n_touches; i++)
            out->hits += st->touches[i].hits;
        out->oldest = sqlite3_column_int64(s, 3);
        out->newest = sqlite3_column_int64(s, 4);
    }
    store_done(st, s);
    if (rc != SQLITE_ROW)
        return store_fail(st, "cannot read the cache");
    return 0;
}

int64_t store_cache_clear(struct store *st)
{
    if (store_begin(st) != 0)
        return -1;
    st->n_touches = 0;
    if (store_exec(st, "DELETE FROM response_cache", "cannot clear the cache") != 0)
        return store_rollback(st);
    int64_t n = sqlite3_changes64(st->db);
    if (store_exec(st, "UPDATE cache_meta SET entries = 0, bytes = 0, hits = 0 WHERE id = 1",
                   "cannot clear the cache") != 0)
        return store_rollback(st);
    return store_commit(st) == 0 ? n : -1;
}

void store_cache_entry_clear(struct store_cache_entry *e)
{
    free(e->content);
    free(e->reasoning);
    free(e->model);
    free(e->finish_reason);
    memset(e, 0, sizeof *e);
}
