/* quota.c - rate-limit state per profile and key label (never a key). */
#include "config.h"
#include "store/store_int.h"

#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- quota */

/* 1 when a label could be a secret rather than a name: too long, a known key prefix, or one
 * long run of key-like characters. */
static int store_label_secret(const char *label)
{
    size_t n = strlen(label);
    if (n > 64 || util_starts_with(label, "sk-") || util_starts_with(label, "sk_") ||
        util_starts_with(label, "Bearer "))
        return 1;
    size_t run = 0;
    for (const char *p = label; *p; p++) {
        char c = *p;
        int keyish = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_';
        run = keyish ? run + 1 : 0;
        if (run >= 32)
            return 1;
    }
    return 0;
}

int store_quota_put(struct store *st, const char *profile, const char *key_label,
                    const struct store_quota *q)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO quota(profile, key_label, limit_requests, remaining_requests, "
        "reset_requests, limit_tokens, remaining_tokens, reset_tokens, blocked_until, extra, "
        "updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
    if (!profile || !key_label || !q) {
        store_set_err(st, "cannot save the quota: missing profile, key label or state");
        return -1;
    }
    if (store_label_secret(key_label)) {
        store_set_err(st, "cannot save the quota: the key label looks like a key; give keys "
                          "short names");
        return -1;
    }
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, sql);
    if (!s)
        return store_rollback(st);
    store_bind_text(s, 1, profile);
    store_bind_text(s, 2, key_label);
    store_bind_count(s, 3, q->limit_requests);
    store_bind_count(s, 4, q->remaining_requests);
    store_bind_seconds(s, 5, q->reset_requests);
    store_bind_count(s, 6, q->limit_tokens);
    store_bind_count(s, 7, q->remaining_tokens);
    store_bind_seconds(s, 8, q->reset_tokens);
    store_bind_seconds(s, 9, q->blocked_until);
    store_bind_text(s, 10, q->extra);
    sqlite3_bind_int64(s, 11, q->updated > 0 ? q->updated : store_epoch(st));
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot save the quota");
        return store_rollback(st);
    }
    return store_commit(st);
}

int store_quota_get(struct store *st, const char *profile, const char *key_label,
                    struct store_quota *out)
{
    static const char sql[] =
        "SELECT limit_requests, remaining_requests, reset_requests, limit_tokens, "
        "remaining_tokens, reset_tokens, blocked_until, extra, updated FROM quota "
        "WHERE profile = ?1 AND key_label = ?2";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = store_prep(st, sql);
    if (!s)
        return -1;
    store_bind_text(s, 1, profile);
    store_bind_text(s, 2, key_label);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        out->limit_requests = store_col_count(s, 0);
        out->remaining_requests = store_col_count(s, 1);
        out->reset_requests = store_col_seconds(s, 2);
        out->limit_tokens = store_col_count(s, 3);
        out->remaining_tokens = store_col_count(s, 4);
        out->reset_tokens = store_col_seconds(s, 5);
        out->blocked_until = store_col_seconds(s, 6);
        out->extra = store_col_str(s, 7);
        out->updated = sqlite3_column_int64(s, 8);
    }
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        store_set_err(st, "no quota state for %s/%s", profile ? profile : "",
                      key_label ? key_label : "");
        return STORE_NOT_FOUND;
    }
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot read the quota");
}

void store_quota_clear(struct store_quota *q)
{
    free(q->extra);
    memset(q, 0, sizeof *q);
}
