/* summary.c - summaries of ranges of a conversation's messages. */
#include "config.h"
#include "store/store_int.h"

#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- summaries */

int store_summary_put(struct store *st, int64_t conversation_id, int64_t first_id,
                      int64_t last_id, const char *text, const char *model, int64_t tokens)
{
    static const char q[] =
        "INSERT OR REPLACE INTO summaries(conversation_id, first_message_id, last_message_id, "
        "model, tokens, created, summary) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    if (!text || first_id > last_id) {
        store_set_err(st, "cannot save the summary: %s", text ? "empty range" : "no text");
        return -1;
    }
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, conversation_id);
    sqlite3_bind_int64(s, 2, first_id);
    sqlite3_bind_int64(s, 3, last_id);
    store_bind_text(s, 4, model);
    store_bind_count(s, 5, tokens);
    sqlite3_bind_int64(s, 6, store_epoch(st));
    if (store_bind_big(st, s, 7, text, strlen(text), "cannot save the summary") != 0) {
        store_done(st, s);
        return store_rollback(st);
    }
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        if (sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
            store_set_err(st, "cannot save the summary: no conversation %lld",
                          (long long)conversation_id);
        else
            store_fail(st, "cannot save the summary");
        return store_rollback(st);
    }
    return store_commit(st);
}

static void store_summary_row(sqlite3_stmt *s, struct store_summary *o)
{
    o->conversation_id = sqlite3_column_int64(s, 0);
    o->first_message_id = sqlite3_column_int64(s, 1);
    o->last_message_id = sqlite3_column_int64(s, 2);
    o->model = store_col_str(s, 3);
    o->tokens = store_col_count(s, 4);
    o->created = sqlite3_column_int64(s, 5);
    o->text = store_col_str(s, 6);
}

int store_summary_get(struct store *st, int64_t conversation_id, int64_t first_id,
                      int64_t last_id, struct store_summary *out)
{
    static const char q[] =
        "SELECT conversation_id, first_message_id, last_message_id, model, tokens, created, "
        "summary FROM summaries WHERE conversation_id = ?1 AND first_message_id = ?2 AND "
        "last_message_id = ?3";
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conversation_id);
    sqlite3_bind_int64(s, 2, first_id);
    sqlite3_bind_int64(s, 3, last_id);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW)
        store_summary_row(s, out);
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        store_set_err(st, "no summary of messages %lld..%lld", (long long)first_id,
                      (long long)last_id);
        return STORE_NOT_FOUND;
    }
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot read the summary");
}

int store_summary_list(struct store *st, int64_t conversation_id, struct store_summary **out,
                       size_t *n)
{
    static const char q[] =
        "SELECT conversation_id, first_message_id, last_message_id, model, tokens, created, "
        "summary FROM summaries WHERE conversation_id = ?1 "
        "ORDER BY last_message_id, first_message_id";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conversation_id);
    size_t cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        store_summary_row(s, &(*out)[(*n)++]);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_summaries_free(*out, *n);
        *out = NULL;
        *n = 0;
        return store_fail(st, "cannot read the summaries");
    }
    return 0;
}

void store_summary_clear(struct store_summary *s)
{
    free(s->text);
    free(s->model);
    memset(s, 0, sizeof *s);
}

void store_summaries_free(struct store_summary *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_summary_clear(&list[i]);
    free(list);
}
