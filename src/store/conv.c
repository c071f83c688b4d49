/* conv.c - conversations: create, rename, update, delete, load with their messages, list. */
#include "config.h"
#include "store/store_int.h"

#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- conversations */

int64_t store_conversation_new(struct store *st, const char *title, const char *system_prompt,
                               const char *model, const char *profile)
{
    return store_conversation_new_role(st, title, system_prompt, model, profile, NULL);
}

int64_t store_conversation_new_role(struct store *st, const char *title,
                                    const char *system_prompt, const char *model,
                                    const char *profile, const char *role)
{
    /* past every id given before, deleted ones too (id_marks, schema v16) */
    static const char q[] = "INSERT INTO conversations(id, title, system_prompt, model, profile, "
                            "created, updated, role) VALUES(max(coalesce((SELECT max(id) FROM "
                            "conversations), 0), coalesce((SELECT high FROM id_marks WHERE "
                            "name = 'conversations'), 0)) + 1, ?1, ?2, ?3, ?4, ?5, ?5, ?6)";
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return store_rollback(st);
    store_bind_text(s, 1, title && *title ? title : NULL);
    store_bind_text(s, 2, system_prompt);
    store_bind_text(s, 3, model);
    store_bind_text(s, 4, profile);
    sqlite3_bind_int64(s, 5, store_epoch(st));
    store_bind_text(s, 6, role);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot create the conversation");
        return store_rollback(st);
    }
    int64_t id = sqlite3_last_insert_rowid(st->db);
    return store_commit(st) == 0 ? id : -1;
}

/* Run one write statement on a conversation id in its own transaction: 0, STORE_NOT_FOUND or
 * -1. bind() binds parameters 2.. (1 is the id). */
static int store_conv_write(struct store *st, const char *sql, int64_t id, const char *what,
                            void (*bind)(sqlite3_stmt *, const void *), const void *arg)
{
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, sql);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, id);
    if (bind)
        bind(s, arg);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, what);
        return store_rollback(st);
    }
    if (sqlite3_changes(st->db) == 0) {
        store_rollback(st);
        store_set_err(st, "no conversation %lld", (long long)id);
        return STORE_NOT_FOUND;
    }
    return store_commit(st);
}

static void store_bind_rename(sqlite3_stmt *s, const void *p)
{
    store_bind_text(s, 2, p);
}

int store_conversation_rename(struct store *st, int64_t id, const char *title)
{
    /* updated stays: it orders ls and the browser, and -c takes the newest conversation, so a
     * renamed old one would be continued in place of the one just held */
    static const char q[] = "UPDATE conversations SET title = ?2 WHERE id = ?1";
    return store_conv_write(st, q, id, "cannot rename the conversation", store_bind_rename,
                            title && *title ? title : NULL);
}

struct store_update_arg {
    const char *system_prompt, *model, *profile;
    int64_t now;
};

static void store_bind_update(sqlite3_stmt *s, const void *p)
{
    const struct store_update_arg *a = p;
    store_bind_text(s, 2, a->system_prompt);
    store_bind_text(s, 3, a->model);
    store_bind_text(s, 4, a->profile);
    sqlite3_bind_int64(s, 5, a->now);
}

int store_conversation_where(struct store *st, int64_t id, char **host, char **profile)
{
    *host = *profile = NULL;
    /* the live path, from its head back (an answer is a step or two away): not the newest
     * answer of any branch, which an /edit or a fork leaves off the path */
    sqlite3_stmt *h = store_prep(st, "SELECT head_id FROM conversations WHERE id = ?1");
    if (!h)
        return -1;
    sqlite3_bind_int64(h, 1, id);
    int64_t at = store_step(st, h) == SQLITE_ROW ? sqlite3_column_int64(h, 0) : 0;
    store_done(st, h);
    /* the live path is its user rows (head_id the last, each parent_id the one before); an
     * answer is a child of its user row */
    static const char q_answer[] = "SELECT host, profile FROM messages WHERE parent_id = ?1 AND "
                                   "conversation_id = ?2 AND role = 'assistant' AND status IN "
                                   "('complete', 'truncated', 'cancelled') AND host IS NOT NULL "
                                   "AND host <> '' ORDER BY id DESC LIMIT 1";
    static const char q_up[] = "SELECT parent_id FROM messages WHERE id = ?1 AND "
                               "conversation_id = ?2";
    for (int steps = 0; at > 0 && steps < 10000; steps++) {
        for (int k = 0; k < 2; k++) {
            sqlite3_stmt *s = store_prep(st, k ? q_up : q_answer);
            if (!s)
                return -1;
            sqlite3_bind_int64(s, 1, at);
            sqlite3_bind_int64(s, 2, id);
            int rc = store_step(st, s);
            if (rc == SQLITE_ROW && !k) {
                *host = store_col_str(s, 0);
                *profile = store_col_str(s, 1);
            } else if (k) {
                at = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
            }
            store_done(st, s);
            if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return store_fail(st, "cannot read the conversation");
            if (*host)
                return 0;
        }
    }
    return 0;
}

int store_conversation_settings(struct store *st, int64_t id, char **role, char **model,
                                char **host)
{
    *role = *model = *host = NULL;
    sqlite3_stmt *s = store_prep(st, "SELECT c.role, m.model, m.host FROM conversations c "
                                     "LEFT JOIN messages m ON m.id = c.head_id WHERE c.id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        *role = store_col_str(s, 0);
        *model = store_col_str(s, 1);
        *host = store_col_str(s, 2);
    }
    store_done(st, s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_fail(st, "cannot read the conversation");
}

static void store_bind_role(sqlite3_stmt *s, const void *p)
{
    store_bind_text(s, 2, p);
}

int store_conversation_set_role(struct store *st, int64_t id, const char *role)
{
    static const char q[] = "UPDATE conversations SET role = ?2 WHERE id = ?1";
    return store_conv_write(st, q, id, "cannot set the conversation's role", store_bind_role,
                            role);
}

int store_conversation_update(struct store *st, int64_t id, const char *system_prompt,
                              const char *model, const char *profile)
{
    static const char q[] = "UPDATE conversations SET system_prompt = coalesce(?2, system_prompt),"
                            " model = coalesce(?3, model), profile = coalesce(?4, profile), "
                            "updated = ?5 WHERE id = ?1";
    struct store_update_arg a = {system_prompt, model, profile, store_epoch(st)};
    return store_conv_write(st, q, id, "cannot update the conversation", store_bind_update, &a);
}

/* Overwrite every page on the freelist with zeros inside the open write transaction: pages
 * freed while secure_delete was FAST (the parts of a streamed answer once folded, an old
 * overflow chain, a merged FTS segment) still hold their old text. A scratch table takes them
 * all with zero-filled blobs and is dropped again (its pages are zero). 0 or -1. */
static int store_scrub_free(struct store *st)
{
    int free_pages = 0, page = 0;
    if (store_pragma_int(st, "PRAGMA freelist_count", &free_pages) != 0 ||
        store_pragma_int(st, "PRAGMA page_size", &page) != 0)
        return store_fail(st, "cannot delete the conversation");
    if (free_pages <= 0)
        return 0;
    if (store_exec(st, "CREATE TABLE tt_scrub(b BLOB)", "cannot delete the conversation") != 0)
        return -1;
    int64_t left = (int64_t)free_pages * page;
    int64_t piece = (int64_t)store_max_value(st);
    if (piece > ((int64_t)64 << 20))
        piece = (int64_t)64 << 20;
    while (left > 0) {
        char sql[80];
        snprintf(sql, sizeof sql, "INSERT INTO tt_scrub VALUES(zeroblob(%lld))",
                 (long long)(left < piece ? left : piece));
        if (store_exec(st, sql, "cannot delete the conversation") != 0)
            return -1;
        left -= piece;
    }
    return store_exec(st, "DROP TABLE tt_scrub", "cannot delete the conversation");
}

int store_conversation_delete(struct store *st, int64_t id)
{
    /* Streaming writes run with secure_delete = FAST (Debian's default ON zeroes every page a
     * batch frees: 6 page writes per byte of a long answer). What the user deletes is zeroed,
     * and so is every page already free. A cached answer that equals one of the deleted ones
     * goes too (a cache holds nothing that cannot be asked again). Both full-text indexes
     * are merged into one segment each ('optimize'): a delete only adds a tombstone, and the
     * older segments keep the words until a merge. */
    static const char q_cache[] =
        "DELETE FROM response_cache WHERE content IN (SELECT content FROM messages "
        "WHERE conversation_id = ?1 AND role = 'assistant' AND content <> '')";
    /* A finished answer (or any message over 64 KiB) waits in fts_pending for the next search
     * to index it, and the delete triggers would take it out of the trigram index all the same
     * (messages_pending_ad fires before messages_fts_ad: "database disk image is malformed").
     * Index such messages first, so that the delete takes out what is there. */
    static const char q_index[] =
        "INSERT INTO messages_fts(rowid, content) SELECT id, content FROM messages "
        "WHERE conversation_id = ?1 AND status <> 'streaming' "
        "AND id IN (SELECT message_id FROM fts_pending)";
    static const char q_unqueue[] =
        "DELETE FROM fts_pending WHERE message_id IN (SELECT id FROM messages "
        "WHERE conversation_id = ?1 AND status <> 'streaming')";
    static const char q_del[] = "DELETE FROM conversations WHERE id = ?1";
    static const char *const q_merge[] = {
        "INSERT INTO messages_fts(messages_fts) VALUES('optimize')",
        "INSERT INTO messages_words(messages_words) VALUES('optimize')"};
    const char *what = "cannot delete the conversation";
    if (store_exec(st, "PRAGMA secure_delete = ON", what) != 0 || store_begin(st) != 0)
        goto fail;
    const char *const steps[] = {q_cache, q_index, q_unqueue, q_del};
    for (size_t i = 0; i < TT_ARRAY_LEN(steps); i++) {
        sqlite3_stmt *s = store_prep(st, steps[i]);
        if (!s)
            goto rollback;
        sqlite3_bind_int64(s, 1, id);
        int rc = sqlite3_step(s);
        store_done(st, s);
        if (rc != SQLITE_DONE) {
            store_fail(st, what);
            goto rollback;
        }
    }
    if (sqlite3_changes(st->db) == 0) {
        store_rollback(st);
        store_exec(st, "PRAGMA secure_delete = FAST", what);
        store_set_err(st, "no conversation %lld", (long long)id);
        return STORE_NOT_FOUND;
    }
    if (store_words_forget(st) != 0 ||
        store_run_steps(st, q_merge, TT_ARRAY_LEN(q_merge), NULL, what) != 0)
        goto fail;
    if (store_scrub_free(st) != 0)
        goto rollback;
    if (store_commit(st) != 0)
        goto fail;
    int rc = store_wal_truncate(st);
    store_exec(st, "PRAGMA secure_delete = FAST", what);
    return rc;
rollback:
    store_rollback(st);
fail:;
    char *err = xstrdup(store_error(st));
    store_exec(st, "PRAGMA secure_delete = FAST", what);
    store_set_err(st, "%s", err);
    free(err);
    return -1;
}

/* Columns of a conversation row: id, title, system_prompt, model, profile, created, updated,
 * message count, head_id. */
static void store_conv_row(sqlite3_stmt *s, struct store_conversation *c)
{
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(s, 0);
    c->title = store_col_str(s, 1);
    c->system_prompt = store_col_str(s, 2);
    c->model = store_col_str(s, 3);
    c->profile = store_col_str(s, 4);
    c->created = sqlite3_column_int64(s, 5);
    c->updated = sqlite3_column_int64(s, 6);
    c->message_count = sqlite3_column_int64(s, 7);
    c->head_id = sqlite3_column_int64(s, 8); /* NULL reads as 0 */
}

#define STORE_MSG_COLS                                                                       \
    "id, conversation_id, role, status, created, model, profile, host, finish_reason, "     \
    "prompt_tokens, completion_tokens, total_tokens, ttft, total_time, tokens_per_s, "       \
    "dns_time, connect_time, tls_time, cached, error, reasoning, content, parent_id, writer, " \
    "EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = messages.id), tool"

static void store_msg_row(sqlite3_stmt *s, struct store_message *m)
{
    m->id = sqlite3_column_int64(s, 0);
    m->conversation_id = sqlite3_column_int64(s, 1);
    m->role = store_col_role(s, 2);
    int status = store_status_parse((const char *)sqlite3_column_text(s, 3));
    m->status = status < 0 ? STORE_ERROR : (enum store_status)status;
    m->created = sqlite3_column_int64(s, 4);
    m->model = store_col_str(s, 5);
    m->profile = store_col_str(s, 6);
    m->host = store_col_str(s, 7);
    m->finish_reason = store_col_str(s, 8);
    m->usage.prompt_tokens = store_col_count(s, 9);
    m->usage.completion_tokens = store_col_count(s, 10);
    m->usage.total_tokens = store_col_count(s, 11);
    m->timings.ttft = store_col_seconds(s, 12);
    m->timings.total = store_col_seconds(s, 13);
    m->timings.tokens_per_s = store_col_seconds(s, 14);
    m->timings.dns = store_col_seconds(s, 15);
    m->timings.connect = store_col_seconds(s, 16);
    m->timings.tls = store_col_seconds(s, 17);
    m->cached = sqlite3_column_int(s, 18) != 0;
    m->error = store_col_str(s, 19);
    m->reasoning = store_col_str(s, 20);
    m->content = store_col_str(s, 21);
    m->content_len = (size_t)sqlite3_column_bytes(s, 21);
    if (!m->content)
        m->content = xstrdup("");
    m->parent_id = sqlite3_column_int64(s, 22); /* NULL reads as 0 */
    m->tool = store_col_str(s, 25);
}

/* An answer still streaming (in another process), or one too large for one SQLite value: add
 * the parts committed so far to its text. Returns 0 or -1. */
static int store_msg_add_parts(struct store *st, struct store_message *m)
{
    static const char q[] = "SELECT reasoning, text FROM message_parts WHERE message_id = ?1 "
                            "ORDER BY id";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, m->id);
    struct buf text = BUF_INIT, reasoning = BUF_INIT;
    buf_append(&text, m->content ? m->content : "", m->content_len);
    if (m->reasoning)
        buf_appends(&reasoning, m->reasoning);
    int rc, has_reasoning = m->reasoning != NULL;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int r = sqlite3_column_int(s, 0);
        const void *t = sqlite3_column_blob(s, 1);
        buf_append(r ? &reasoning : &text, t ? t : "", (size_t)sqlite3_column_bytes(s, 1));
        has_reasoning |= r;
    }
    store_done(st, s);
    free(m->content);
    m->content_len = text.len;
    m->content = buf_take(&text);
    free(m->reasoning);
    m->reasoning = has_reasoning ? buf_take(&reasoning) : NULL;
    buf_free(&reasoning);
    return rc == SQLITE_DONE ? 0 : -1;
}

char *store_message_reasoning(struct store *st, int64_t id)
{
    static const char q[] =
        "SELECT reasoning FROM messages WHERE id = ?1 UNION ALL SELECT * FROM (SELECT text "
        "FROM message_parts WHERE message_id = ?1 AND reasoning ORDER BY id)";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return NULL;
    sqlite3_bind_int64(s, 1, id);
    struct buf b = BUF_INIT;
    while (store_step(st, s) == SQLITE_ROW) {
        const void *t = sqlite3_column_blob(s, 0);
        buf_append(&b, t ? t : "", (size_t)sqlite3_column_bytes(s, 0));
    }
    store_done(st, s);
    return b.len ? buf_take(&b) : (buf_free(&b), NULL);
}

int store_message_facts(struct store *st, int64_t id, struct store_message *m)
{
    sqlite3_stmt *s = store_prep(st, "SELECT created, completion_tokens, ttft, total_time, "
                                     "tokens_per_s, cached FROM messages WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    int rc = store_step(st, s) == SQLITE_ROW ? 0 : -1;
    if (rc == 0) {
        m->created = sqlite3_column_int64(s, 0);
        m->usage.completion_tokens = store_col_count(s, 1);
        m->timings.ttft = store_col_seconds(s, 2);
        m->timings.total = store_col_seconds(s, 3);
        m->timings.tokens_per_s = store_col_seconds(s, 4);
        m->cached = sqlite3_column_int(s, 5) != 0;
    }
    store_done(st, s);
    return rc;
}

/* The columns a conversation's turns need (store_conversation_load_turns): fewer columns, less
 * work for SQLite on each of thousands of rows. Read by store_turn_row; the writer is 8, the tool 9. */
#define STORE_TURN_COLS_HEAD "id, role, status, model, finish_reason, error, content, parent_id, "
#define STORE_TURN_COLS STORE_TURN_COLS_HEAD "writer, tool"

static void store_turn_row(sqlite3_stmt *s, int64_t conv, struct store_message *m)
{
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(s, 0);
    m->conversation_id = conv;
    m->role = store_col_role(s, 1);
    int status = store_status_parse((const char *)sqlite3_column_text(s, 2));
    m->status = status < 0 ? STORE_ERROR : (enum store_status)status;
    /* the turns take the model, finish reason and tool calls of their answers and tool rows
     * only (conv_build): a user row's are not read */
    int user = m->role && strcmp(m->role, "user") == 0;
    m->model = user ? NULL : store_col_str(s, 3);
    m->finish_reason = user ? NULL : store_col_str(s, 4);
    m->usage.prompt_tokens = m->usage.completion_tokens = m->usage.total_tokens = -1;
    m->timings = (struct store_timings){-1, -1, -1, -1, -1, -1, -1, -1, -1};
    m->error = store_col_str(s, 5);
    m->content = store_col_str(s, 6);
    m->content_len = (size_t)sqlite3_column_bytes(s, 6);
    if (!m->content)
        m->content = xstrdup("");
    m->parent_id = sqlite3_column_int64(s, 7);
    m->tool = user ? NULL : store_col_str(s, 9);
}

/* Which of rows have parts: one query over message_parts (mostly empty) from the first row's
 * id on (message_parts_message), not a probe per row nor a pass over the conversation; parts
 * of other conversations' rows match none. Sets parts[i] for rows[i] (sorted by id, n > 0).
 * 0 or an SQLite code. */
static int store_conv_parts(struct store *st, const struct store_message *rows, size_t n,
                            char *parts)
{
    static const char q[] = "SELECT DISTINCT message_id FROM message_parts "
                            "WHERE message_id >= ?1 ORDER BY message_id";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return SQLITE_ERROR;
    sqlite3_bind_int64(s, 1, rows[0].id);
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        int64_t mid = sqlite3_column_int64(s, 0);
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid_i = lo + (hi - lo) / 2;
            if (rows[mid_i].id < mid)
                lo = mid_i + 1;
            else
                hi = mid_i;
        }
        if (lo < n && rows[lo].id == mid)
            parts[lo] = 1;
    }
    store_done(st, s);
    return rc == SQLITE_DONE ? SQLITE_DONE : rc;
}

/* Rows of other conversations a read along the table passes over (besides two per row of its
 * own) before it takes the index instead. */
#define STORE_WALK_PASSED 256

/* One more row of another conversation passed over by a read along the table that has read
 * own rows of its own: 1 when they are too many (go on through the index). */
static int store_passed_over(size_t *passed, size_t own)
{
    return ++*passed > STORE_WALK_PASSED + 2 * own;
}

/* End statement s and start q (?1 the conversation, ?2 the last id read): the same read
 * through the index from where it was. NULL on failure. */
static sqlite3_stmt *store_reprep(struct store *st, sqlite3_stmt *s, const char *q, int64_t id,
                                  int64_t last)
{
    store_done(st, s);
    s = store_prep(st, q);
    if (s) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, last);
    }
    return s;
}

/* Begin the read transaction of conversation id (so that it and its messages agree) and read
 * its row into a new *c. Returns 0 (in the transaction), STORE_NOT_FOUND or -1 (rolled back). */
static int store_conv_begin(struct store *st, int64_t id, struct store_conversation **c)
{
    static const char q_conv[] =
        "SELECT id, title, system_prompt, model, profile, created, updated, 0, head_id "
        "FROM conversations WHERE id = ?1";
    if (store_exec(st, "BEGIN", "cannot read the conversation") != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q_conv);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, id);
    int rc = store_step(st, s);
    if (rc != SQLITE_ROW) {
        store_done(st, s);
        store_rollback(st);
        if (rc == SQLITE_DONE) {
            store_set_err(st, "no conversation %lld", (long long)id);
            return STORE_NOT_FOUND;
        }
        return store_fail(st, "cannot read the conversation");
    }
    *c = xmalloc(sizeof **c);
    store_conv_row(s, *c);
    store_done(st, s);
    return 0;
}

static int store_conv_load(struct store *st, int64_t id, int turns,
                           struct store_conversation **out)
{
    static const char q_msgs[] =
        "SELECT " STORE_MSG_COLS " FROM messages WHERE conversation_id = ?1 ORDER BY id";
    /* the turns: along the table from the conversation's first row to its last (a row a time
     * through messages_conversation costs a search of the table each: twice the time), the
     * rows of other conversations in between passed over while they are few */
    static const char q_turns[] = "SELECT " STORE_TURN_COLS ", conversation_id FROM messages "
                                  "NOT INDEXED WHERE id >= (SELECT min(id) FROM messages "
                                  "WHERE conversation_id = ?1) AND id <= (SELECT max(id) "
                                  "FROM messages WHERE conversation_id = ?1) ORDER BY id";
    static const char q_turns_ix[] = "SELECT " STORE_TURN_COLS ", conversation_id FROM messages "
                                     "WHERE conversation_id = ?1 AND id > ?2 ORDER BY id";
    *out = NULL;
    struct store_conversation *c;
    int rc = store_conv_begin(st, id, &c);
    if (rc != 0)
        return rc;
    sqlite3_stmt *s = store_prep(st, turns ? q_turns : q_msgs);
    if (!s) {
        store_conversation_free(c);
        return store_rollback(st);
    }
    sqlite3_bind_int64(s, 1, id);
    size_t cap = 0, cap_parts = 0, passed = 0;
    char *parts = NULL; /* the message has text in message_parts (streaming, or too large) */
    int indexed = !turns;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        if (!indexed && sqlite3_column_int64(s, 10) != id) {
            if (!store_passed_over(&passed, c->n_messages))
                continue;
            s = store_reprep(st, s, q_turns_ix, id,
                             c->n_messages ? c->messages[c->n_messages - 1].id : INT64_MIN);
            if (!s) {
                free(parts);
                store_conversation_free(c);
                return store_rollback(st);
            }
            indexed = 1;
            continue;
        }
        XGROW(c->messages, c->n_messages + 1, cap);
        XGROW(parts, c->n_messages + 1, cap_parts);
        struct store_message *m = &c->messages[c->n_messages];
        if (turns)
            store_turn_row(s, id, m);
        else
            store_msg_row(s, m);
        parts[c->n_messages++] = turns ? 0 : (char)sqlite3_column_int(s, 24);
        /* a read-only handle recovers nothing: a dead writer's answer reads as interrupted */
        if (st->readonly && m->status == STORE_STREAMING &&
            !store_writer_alive((const char *)sqlite3_column_text(s, turns ? 8 : 23)))
            m->status = STORE_INTERRUPTED;
    }
    store_done(st, s);
    if (turns && rc == SQLITE_DONE && c->n_messages)
        rc = store_conv_parts(st, c->messages, c->n_messages, parts);
    for (size_t i = 0; rc == SQLITE_DONE && i < c->n_messages; i++)
        if (parts[i] && store_msg_add_parts(st, &c->messages[i]))
            rc = SQLITE_ERROR;
    free(parts);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot read the messages");
        store_conversation_free(c);
        return store_rollback(st);
    }
    store_exec(st, "COMMIT", "cannot read the conversation");
    c->message_count = (int64_t)c->n_messages;
    *out = c;
    return 0;
}

int store_conversation_load(struct store *st, int64_t id, struct store_conversation **out)
{
    return store_conv_load(st, id, 0, out);
}

int store_conversation_load_turns(struct store *st, int64_t id, struct store_conversation **out)
{
    return store_conv_load(st, id, 1, out);
}

/* One row of the backward walk: the turn columns (store_turn_row), then the conversation. The
 * writer is not read (a writer's walk recovers dead writers' rows at open): a NULL, which
 * SQLite makes once, not a column decoded per row. */
#define STORE_WALK_SELECT \
    "SELECT " STORE_TURN_COLS_HEAD "NULL, tool, conversation_id FROM messages "

/* Read the row the statement s stands on into a new row of c. Returns 0, or 1 for a row the
 * walk does not take (still streaming: another process may be writing it). */
static int store_walk_row(sqlite3_stmt *s, struct store_conversation *c, size_t *cap)
{
    XGROW(c->messages, c->n_messages + 1, *cap);
    struct store_message *m = &c->messages[c->n_messages];
    store_turn_row(s, c->id, m);
    if (m->status == STORE_STREAMING) {
        store_message_clear(m);
        return 1;
    }
    c->n_messages++;
    return 0;
}

/* The stored count of message id, from the statement t that reads a conversation's counts
 * newest first (message_id, bytes, tokens; *t_row: it stands on a row); -1 when none. */
static long store_walk_count(struct store *st, sqlite3_stmt *t, int *t_row, int64_t id,
                             size_t len, struct store_walk *w, size_t *cap_tv)
{
    while (*t_row && sqlite3_column_int64(t, 0) > id)
        *t_row = store_step(st, t) == SQLITE_ROW;
    if (!*t_row || sqlite3_column_int64(t, 0) != id)
        return -1;
    XGROW(w->tokens, w->n_tokens + 1, *cap_tv);
    struct store_tokens *v = &w->tokens[w->n_tokens++];
    *v = (struct store_tokens){id, sqlite3_column_int64(t, 1), (long)sqlite3_column_int64(t, 2)};
    return v->bytes == (int64_t)len ? v->tokens : -1;
}


/* Reverse n elements of size sz in place (rows read newest first). */
static void store_reverse(void *v, size_t n, size_t sz)
{
    char *a = v, tmp[256];
    for (size_t i = 0, j = n; i + 1 < j; i++, j--) {
        char *x = a + i * sz, *y = a + (j - 1) * sz;
        for (size_t k = 0; k < sz; k += sizeof tmp) {
            size_t c = sz - k < sizeof tmp ? sz - k : sizeof tmp;
            memcpy(tmp, x + k, c);
            memcpy(x + k, y + k, c);
            memcpy(y + k, tmp, c);
        }
    }
}

/* What the walk needs to know of the rows of conversation id older than row first (it did not
 * read them): how many have no count in encoding, and the largest count of the conversation.
 * From its token mark (schema v11) and the rows after the mark only: work in the rows counted
 * since the last store_tokens_put, not in the conversation's length. 0, or an SQLite code. */
static int store_walk_older(struct store *st, int64_t id, const char *encoding, int64_t first,
                            struct store_walk *w)
{
    static const char q_after[] =
        "SELECT coalesce(max(tokens), 0) FROM message_tokens WHERE conversation_id = ?1 "
        "AND encoding = ?2 AND message_id > ?3";
    static const char q_gap[] =
        "SELECT (SELECT count(*) FROM messages WHERE conversation_id = ?1 AND id > ?3 AND "
        "id < ?4) - (SELECT count(*) FROM message_tokens WHERE conversation_id = ?1 AND "
        "encoding = ?2 AND message_id > ?3 AND message_id < ?4)";
    int64_t through = 0;
    long max = 0;
    int rc = store_tokens_mark(st, id, encoding, &through, &max);
    sqlite3_stmt *s = rc == 0 ? store_prep(st, q_after) : NULL;
    if (!s)
        return SQLITE_ERROR;
    sqlite3_bind_int64(s, 1, id);
    store_bind_text(s, 2, encoding);
    sqlite3_bind_int64(s, 3, through);
    if ((rc = store_step(st, s)) == SQLITE_ROW && sqlite3_column_int64(s, 0) > max)
        max = (long)sqlite3_column_int64(s, 0);
    store_done(st, s);
    if (rc != SQLITE_ROW)
        return rc;
    w->older_max_tokens = max;
    w->older_uncounted = 0;
    if (through >= first - 1)
        return 0; /* every older row is counted */
    if (!(s = store_prep(st, q_gap)))
        return SQLITE_ERROR;
    sqlite3_bind_int64(s, 1, id);
    store_bind_text(s, 2, encoding);
    sqlite3_bind_int64(s, 3, through);
    sqlite3_bind_int64(s, 4, first);
    if ((rc = store_step(st, s)) == SQLITE_ROW)
        w->older_uncounted = sqlite3_column_int64(s, 0);
    store_done(st, s);
    return rc == SQLITE_ROW ? 0 : rc;
}

/* ---- the packed rows of a resume (resume_blocks, schema v13) ---- */

#define STORE_PACK_FORMAT 1
#define STORE_PACK_ROWS 1024 /* rows a block holds at most, */
#define STORE_PACK_BYTES (1 << 20) /* and bytes (unless one row is larger) */
#define STORE_PACK_MIN 256   /* rows read from the table before they are packed */
#define STORE_PACK_MAX (16 << 20) /* bytes one walk packs at most (a conversation never
                                     counted is read whole once: not all of it copied) */
#define STORE_PACK_NULL 0xffffffffu

/* Rows the walk read from the table, packed newest first as it read them: the blob's records
 * and where each starts. */
struct store_pack {
    struct buf b;
    struct store_pack_at {
        int64_t id;
        size_t at;
    } *rows;
    size_t n, cap;
};

static void store_pack_str(struct buf *b, const char *p, size_t n)
{
    uint32_t len = p ? (uint32_t)n : STORE_PACK_NULL;
    buf_append(b, &len, sizeof len);
    if (p)
        buf_append(b, p, n);
}

/* Pack row m (what store_turn_row read) with its stored count (v; NULL: none). */
static void store_pack_row(struct store_pack *k, const struct store_message *m,
                           const struct store_tokens *v)
{
    XGROW(k->rows, k->n + 1, k->cap);
    k->rows[k->n++] = (struct store_pack_at){m->id, k->b.len};
    unsigned char head[3] = {(unsigned char)store_role_index(m->role), (unsigned char)m->status,
                             v != NULL};
    int64_t nums[2] = {m->id, m->parent_id};
    buf_append(&k->b, nums, sizeof nums);
    buf_append(&k->b, head, sizeof head);
    if (v) {
        int64_t count[2] = {v->bytes, (int64_t)v->tokens};
        buf_append(&k->b, count, sizeof count);
    }
    store_pack_str(&k->b, m->model, m->model ? strlen(m->model) : 0);
    store_pack_str(&k->b, m->finish_reason, m->finish_reason ? strlen(m->finish_reason) : 0);
    store_pack_str(&k->b, m->error, m->error ? strlen(m->error) : 0);
    store_pack_str(&k->b, m->content, m->content_len);
    store_pack_str(&k->b, m->tool, m->tool ? strlen(m->tool) : 0);
}

static void store_pack_free(struct store_pack *k)
{
    buf_free(&k->b);
    free(k->rows);
}

/* A block being read: its records from p to end. */
struct store_pack_rd {
    const unsigned char *p, *end;
};

static int store_pack_get(struct store_pack_rd *r, void *out, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return -1;
    memcpy(out, r->p, n);
    r->p += n;
    return 0;
}

static int store_pack_get_str(struct store_pack_rd *r, char **out, size_t *len)
{
    uint32_t n;
    *out = NULL;
    if (store_pack_get(r, &n, sizeof n) != 0)
        return -1;
    if (n == STORE_PACK_NULL)
        return 0;
    if ((size_t)(r->end - r->p) < n)
        return -1;
    *out = xstrndup((const char *)r->p, n);
    r->p += n;
    if (len)
        *len = n;
    return 0;
}

/* The next record of r as a new row m (the walk's row: store_turn_row's fields) and its count
 * (*has: one was stored). 0, or -1 for a block that is not what this format writes. */
static int store_pack_next(struct store_pack_rd *r, int64_t conv, struct store_message *m,
                           struct store_tokens *v, int *has)
{
    int64_t nums[2];
    unsigned char head[3];
    memset(m, 0, sizeof *m);
    if (store_pack_get(r, nums, sizeof nums) || store_pack_get(r, head, sizeof head) ||
        head[1] > STORE_INTERRUPTED || head[2] > 1)
        return -1;
    m->id = nums[0];
    m->parent_id = nums[1];
    m->conversation_id = conv;
    m->role = store_role_at(head[0]);
    m->status = (enum store_status)head[1];
    m->usage.prompt_tokens = m->usage.completion_tokens = m->usage.total_tokens = -1;
    m->timings = (struct store_timings){-1, -1, -1, -1, -1, -1, -1, -1, -1};
    *has = head[2];
    if (*has) {
        int64_t count[2];
        if (store_pack_get(r, count, sizeof count))
            return -1;
        *v = (struct store_tokens){m->id, count[0], (long)count[1]};
    }
    if (store_pack_get_str(r, &m->model, NULL) || store_pack_get_str(r, &m->finish_reason, NULL) ||
        store_pack_get_str(r, &m->error, NULL) ||
        store_pack_get_str(r, &m->content, &m->content_len) ||
        store_pack_get_str(r, &m->tool, NULL)) {
        store_message_clear(m);
        return -1;
    }
    if (!m->content)
        m->content = xstrdup("");
    return 0;
}

/* Write the rows of k (every row of conversation id with lo < id <= k's newest) as blocks of
 * encoding, and drop the blocks wholly older than before (rows no walk of this budget reads).
 * Inside the walk's read transaction, so that the rows are what was read; a write that cannot
 * start at once (another writer) is left to a later walk. Nothing is reported. */
static void store_pack_write(struct store *st, int64_t id, const char *encoding,
                             const struct store_pack *k, int64_t lo, int64_t before)
{
    static const char q_put[] = "INSERT OR REPLACE INTO resume_blocks(conversation_id, encoding, "
                                "lo, hi, data) VALUES(?1, ?2, ?3, ?4, ?5)";
    static const char q_old[] = "DELETE FROM resume_blocks WHERE conversation_id = ?1 AND "
                                "encoding = ?2 AND hi < ?3";
    if (sqlite3_exec(st->db, "SAVEPOINT tt_pack", NULL, NULL, NULL) != SQLITE_OK)
        return;
    sqlite3_busy_timeout(st->db, 0);
    int ok = 1;
    for (size_t i = 0, j; ok && i < k->n; i = j) {
        for (j = i + 1; j < k->n && j - i < STORE_PACK_ROWS &&
                        k->rows[j].at - k->rows[i].at < STORE_PACK_BYTES;)
            j++;
        size_t end = j < k->n ? k->rows[j].at : k->b.len;
        struct buf blob = BUF_INIT;
        uint32_t rows = (uint32_t)(j - i);
        unsigned char format = STORE_PACK_FORMAT;
        buf_append(&blob, &format, 1);
        buf_append(&blob, &rows, sizeof rows);
        buf_append(&blob, k->b.data + k->rows[i].at, end - k->rows[i].at);
        sqlite3_stmt *s = store_prep(st, q_put);
        if (s) {
            sqlite3_bind_int64(s, 1, id);
            store_bind_text(s, 2, encoding);
            sqlite3_bind_int64(s, 3, j < k->n ? k->rows[j].id : lo);
            sqlite3_bind_int64(s, 4, k->rows[i].id);
            sqlite3_bind_blob(s, 5, blob.data, (int)blob.len, SQLITE_STATIC);
            ok = sqlite3_step(s) == SQLITE_DONE;
            store_done(st, s);
        } else {
            ok = 0;
        }
        buf_free(&blob);
    }
    sqlite3_stmt *s = ok ? store_prep(st, q_old) : NULL;
    if (s) {
        sqlite3_bind_int64(s, 1, id);
        store_bind_text(s, 2, encoding);
        sqlite3_bind_int64(s, 3, before);
        ok = sqlite3_step(s) == SQLITE_DONE;
        store_done(st, s);
    }
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    sqlite3_exec(st->db, ok && s ? "RELEASE tt_pack" : "ROLLBACK TO tt_pack; RELEASE tt_pack",
                 NULL, NULL, NULL);
}

/* Where the walk is: the rows read so far and the caller's verdicts on them. */
struct store_walk_at {
    struct store_conversation *c;
    size_t cap;
    int (*enough)(void *ud, const struct store_message *m, long tokens, int live);
    void *ud;
    int stop, head_seen;
    int64_t expect; /* the live path's next user row (newest first): the head, then each one's
                       parent; 0 once the path's first turn was read */
};

/* Give the newest row read (tk: its stored count, -1 none) to the caller. 1: the walk has
 * read enough (a turn boundary after the caller's stop), 0: go on, -1: the caller gives up. */
static int store_walk_take(struct store_walk_at *a, struct store_walk *w, long tk)
{
    const struct store_message *m = &a->c->messages[a->c->n_messages - 1];
    int user = m->role && strcmp(m->role, "user") == 0;
    a->head_seen |= user && m->id == a->c->head_id;
    /* On the live path: a user row of the chain from the head through the parents, or a row
     * of such a turn (its answer, its tool rounds: read before it, newest first), or one with
     * no parent (a system row). A turn /edit or /retry replaced is not: its rows are read,
     * and go with the rest, but the history never sends them. */
    int live;
    if (user) {
        live = m->id == a->expect;
        if (live)
            a->expect = m->parent_id;
    } else {
        live = m->parent_id <= 0 || m->parent_id == a->expect;
    }
    int e = a->enough(a->ud, m, tk, live);
    if (e < 0)
        return -1;
    a->stop |= e;
    if (user) /* every row from here on is read: a turn boundary */
        w->first_id = m->id;
    return a->stop && user && a->head_seen;
}

/* 0 when data is a block this format wrote of rows lo < id <= hi, newest first, none
 * streaming; -1 otherwise. Checked before any row is taken (the caller's sums stay right). */
static int store_pack_check(const void *data, size_t len, int64_t lo, int64_t hi)
{
    struct store_pack_rd r = {data, (const unsigned char *)data + len};
    unsigned char format;
    uint32_t rows;
    if (!data || store_pack_get(&r, &format, 1) || format != STORE_PACK_FORMAT ||
        store_pack_get(&r, &rows, sizeof rows))
        return -1;
    int64_t prev = hi + 1;
    for (uint32_t i = 0; i < rows; i++) {
        int64_t nums[2], count[2];
        unsigned char head[3];
        if (store_pack_get(&r, nums, sizeof nums) || store_pack_get(&r, head, sizeof head) ||
            nums[0] >= prev || nums[0] <= lo || head[0] > 4 || head[1] > STORE_INTERRUPTED ||
            head[1] == STORE_STREAMING || head[2] > 1 ||
            (head[2] && store_pack_get(&r, count, sizeof count)))
            return -1;
        prev = nums[0];
        for (int k = 0; k < 5; k++) {
            uint32_t n;
            if (store_pack_get(&r, &n, sizeof n) ||
                (n != STORE_PACK_NULL && (size_t)(r.end - r.p) < n))
                return -1;
            r.p += n == STORE_PACK_NULL ? 0 : n;
        }
    }
    return r.p == r.end ? 0 : -1;
}

/* The rows of block data (lo < id <= hi, newest first) into the walk, until it has enough.
 * 1 (enough), 0 (all taken), -1 (the caller gave up), -2 (not a block this format wrote). */
static int store_walk_block(struct store_walk_at *a, struct store_walk *w, size_t *cap_tv,
                            const void *data, size_t len, int64_t lo, int64_t hi)
{
    if (store_pack_check(data, len, lo, hi) != 0)
        return -2;
    struct store_pack_rd r = {(const unsigned char *)data + 5, (const unsigned char *)data + len};
    uint32_t rows;
    memcpy(&rows, (const unsigned char *)data + 1, sizeof rows);
    for (uint32_t i = 0; i < rows; i++) {
        XGROW(a->c->messages, a->c->n_messages + 1, a->cap);
        struct store_message *m = &a->c->messages[a->c->n_messages];
        struct store_tokens v;
        int has = 0;
        if (store_pack_next(&r, a->c->id, m, &v, &has) != 0)
            return -2; /* not after the check */
        a->c->n_messages++;
        long tk = -1;
        if (has) {
            XGROW(w->tokens, w->n_tokens + 1, *cap_tv);
            w->tokens[w->n_tokens++] = v;
            tk = v.bytes == (int64_t)m->content_len ? v.tokens : -1;
        }
        int e = store_walk_take(a, w, tk);
        if (e != 0)
            return e;
    }
    return 0;
}

int store_conversation_walk(struct store *st, int64_t id, const char *encoding,
                            int (*enough)(void *ud, const struct store_message *m, long tokens,
                                          int live),
                            void *ud, struct store_walk *w)
{
    /* newest first, along the table itself from the conversation's newest row down to the
     * packed rows (a row a time through messages_conversation costs a search of the table
     * each: twice the time); the rows of other conversations in between are passed over */
    static const char q_rows[] = STORE_WALK_SELECT "NOT INDEXED WHERE id <= (SELECT max(id) "
                                 "FROM messages WHERE conversation_id = ?1) AND id > ?2 "
                                 "ORDER BY id DESC";
    /* when they are many (a conversation resumed after others grew), and below the blocks:
     * through the index */
    static const char q_rows_ix[] = STORE_WALK_SELECT "WHERE conversation_id = ?1 AND id < ?2 "
                                    "AND id > ?3 ORDER BY id DESC";
    static const char q_counts[] = "SELECT message_id, bytes, tokens FROM message_tokens "
                                   "WHERE conversation_id = ?1 AND encoding = ?2 "
                                   "ORDER BY message_id DESC";
    static const char q_blocks[] = "SELECT lo, hi, data FROM resume_blocks WHERE "
                                   "conversation_id = ?1 AND encoding = ?2 ORDER BY hi DESC";
    memset(w, 0, sizeof *w);
    struct store_walk_at a = {NULL, 0, enough, ud, 0, 0, 0};
    int rc = store_conv_begin(st, id, &a.c);
    if (rc != 0)
        return rc;
    a.expect = a.c->head_id;
    struct store_conversation *c = a.c;
    size_t cap_tv = 0;
    int ret = STORE_WALK_FULL, e = 0;
    struct store_pack fresh = {BUF_INIT, NULL, 0, 0};
    sqlite3_stmt *t = store_prep(st, q_counts); /* both cursors newest first, in step */
    sqlite3_stmt *b = t ? store_prep(st, q_blocks) : NULL;
    sqlite3_stmt *s = b ? store_prep(st, q_rows) : NULL;
    if (!s) {
        store_done(st, t);
        store_done(st, b);
        goto out;
    }
    sqlite3_bind_int64(t, 1, id);
    store_bind_text(t, 2, encoding);
    int t_row = store_step(st, t) == SQLITE_ROW;
    sqlite3_bind_int64(b, 1, id);
    store_bind_text(b, 2, encoding);
    int b_row = store_step(st, b) == SQLITE_ROW;
    int64_t floor = b_row ? sqlite3_column_int64(b, 1) : 0; /* the rows above it: the table */
    const int64_t top = floor;
    int blocks = b_row;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, floor);
    size_t passed = 0; /* rows of other conversations passed over */
    int indexed = 0, streaming = 0, phase = 1, broken = 0;
    for (;;) {
        while ((rc = store_step(st, s)) == SQLITE_ROW) {
            if (sqlite3_column_int64(s, 10) != id) {
                if (indexed || !store_passed_over(&passed, c->n_messages))
                    continue;
                s = store_reprep(st, s, q_rows_ix, id,
                                 c->n_messages ? c->messages[c->n_messages - 1].id : INT64_MAX);
                if (!s) {
                    broken = 1;
                    break;
                }
                sqlite3_bind_int64(s, 3, floor);
                indexed = 1;
                continue;
            }
            if ((streaming = store_walk_row(s, c, &a.cap)) != 0)
                break;
            const struct store_message *m = &c->messages[c->n_messages - 1];
            size_t n_tv = w->n_tokens;
            long tk = store_walk_count(st, t, &t_row, m->id, m->content_len, w, &cap_tv);
            if (phase == 1 && fresh.b.len <= STORE_PACK_MAX)
                store_pack_row(&fresh, m, w->n_tokens > n_tv ? &w->tokens[n_tv] : NULL);
            if ((e = store_walk_take(&a, w, tk)) != 0)
                break;
        }
        if (broken || rc != SQLITE_DONE || e != 0 || phase == 3 || !b_row)
            break;
        /* the table's rows above the blocks are read: the blocks, newest first, each one's hi
         * the next newer one's lo; then (a gap, a block not of this format, or none left) the
         * table again below the last one taken */
        store_done(st, s);
        s = NULL;
        phase = 2;
        while (b_row && sqlite3_column_int64(b, 1) == floor) {
            int64_t lo = sqlite3_column_int64(b, 0);
            const void *data = sqlite3_column_blob(b, 2);
            e = store_walk_block(&a, w, &cap_tv, data, (size_t)sqlite3_column_bytes(b, 2), lo,
                                 floor);
            if (e == -2) { /* not ours (no row taken): its rows from the table */
                e = 0;
                break;
            }
            if (e != 0)
                break;
            floor = lo;
            b_row = store_step(st, b) == SQLITE_ROW;
        }
        if (e != 0 || floor <= 0)
            break; /* (ids start at 1: nothing is older than a block down to 0) */
        phase = 3;
        s = store_prep(st, q_rows_ix);
        if (!s) {
            broken = 1;
            break;
        }
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, floor + 1);
        sqlite3_bind_int64(s, 3, 0);
        indexed = 1;
    }
    /* every statement reset, never left stepped (a statement left open holds its read of the
     * WAL, and no checkpoint can copy past it for the rest of the run) */
    store_done(st, b);
    store_done(st, s);
    store_done(st, t);
    if (e < 0)
        goto out; /* the caller gives up: the full load */
    if (broken || (rc != SQLITE_ROW && rc != SQLITE_DONE && e == 0))
        goto fail;
    if (!a.head_seen || streaming || (e == 0 && rc == SQLITE_ROW))
        goto out; /* no saved head (conv_head's rules are the full load's), a streaming row */
    w->complete = e == 0;
    /* what was read from the table above the blocks, packed once it is worth a block: from
     * the newest row down to the blocks, or (none, or not reached) to the oldest row read;
     * the blocks wholly older than the oldest row read go */
    if (!st->readonly && fresh.n >= STORE_PACK_MIN && fresh.b.len <= STORE_PACK_MAX)
        store_pack_write(st, id, encoding, &fresh,
                         blocks && phase > 1 ? top
                         : w->complete       ? 0
                                             : fresh.rows[fresh.n - 1].id - 1,
                         c->messages[c->n_messages - 1].id);
    /* the rows not read (older turns, other branches: every row of the conversation older
     * than the oldest read) */
    if (!w->complete && store_walk_older(st, id, encoding, c->messages[c->n_messages - 1].id, w))
        goto fail;
    /* newest first -> oldest first, as store_conversation_load_turns gives them */
    store_reverse(c->messages, c->n_messages, sizeof *c->messages);
    store_reverse(w->tokens, w->n_tokens, sizeof *w->tokens);
    /* the answers with parts (streaming, or too large for one value): one query */
    char *parts = xcalloc(c->n_messages + 1, 1);
    rc = c->n_messages ? store_conv_parts(st, c->messages, c->n_messages, parts) : SQLITE_DONE;
    for (size_t i = 0; rc == SQLITE_DONE && i < c->n_messages; i++)
        if (parts[i] && store_msg_add_parts(st, &c->messages[i]))
            rc = SQLITE_ERROR;
    free(parts);
    if (rc != SQLITE_DONE)
        goto fail;
    ret = 0;
    goto out;
fail:
    store_fail(st, "cannot read the messages");
    ret = -1;
out:
    store_pack_free(&fresh);
    if (ret != 0) {
        store_conversation_free(c);
        free(w->tokens);
        memset(w, 0, sizeof *w);
        store_rollback(st);
        return ret;
    }
    store_exec(st, "COMMIT", "cannot read the conversation");
    c->message_count = (int64_t)c->n_messages;
    w->conv = c;
    return 0;
}

int store_conversation_list(struct store *st, int limit, struct store_conversation **out,
                            size_t *n)
{
    static const char q[] =
        "SELECT c.id, c.title, c.system_prompt, c.model, c.profile, c.created, c.updated, "
        "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.head_id "
        "FROM conversations c ORDER BY c.updated DESC, c.id DESC LIMIT ?1";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, limit > 0 ? limit : -1);
    size_t cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        store_conv_row(s, &(*out)[(*n)++]);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_conversation_list_free(*out, *n);
        *out = NULL;
        *n = 0;
        return store_fail(st, "cannot list conversations");
    }
    return 0;
}

int store_conversation_head(struct store *st, int64_t conv, int64_t *head)
{
    *head = 0;
    sqlite3_stmt *s = store_prep(st, "SELECT head_id FROM conversations WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW)
        *head = sqlite3_column_int64(s, 0); /* NULL reads as 0 */
    store_done(st, s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? STORE_NOT_FOUND : -1;
}

int store_conversation_set_head(struct store *st, int64_t conv, int64_t head_user_id)
{
    static const char q[] =
        "UPDATE conversations SET head_id = ?2, updated = ?3 WHERE id = ?1 AND EXISTS "
        "(SELECT 1 FROM messages WHERE id = ?2 AND conversation_id = ?1 AND role = 'user')";
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, conv);
    sqlite3_bind_int64(s, 2, head_user_id);
    sqlite3_bind_int64(s, 3, store_epoch(st));
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot move the conversation's head");
        return store_rollback(st);
    }
    if (sqlite3_changes(st->db) == 0) {
        store_rollback(st);
        store_set_err(st, "no user message %lld in conversation %lld", (long long)head_user_id,
                      (long long)conv);
        return STORE_NOT_FOUND;
    }
    return store_commit(st);
}

int store_conversation_latest_answered(struct store *st, int64_t *id)
{
    /* Newest first through conversations_updated; the first whose messages hold an answer.
     * The status test comes first so that the content of a finished answer is not read. */
    static const char q[] =
        "SELECT c.id FROM conversations c WHERE EXISTS (SELECT 1 FROM messages m "
        "WHERE m.conversation_id = c.id AND m.role = 'assistant' "
        "AND (m.status IN ('complete', 'truncated') OR m.content <> '')) "
        "ORDER BY c.updated DESC, c.id DESC LIMIT 1";
    *id = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        store_set_err(st, "no conversation has an answer");
        return STORE_NOT_FOUND;
    }
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot list conversations");
}

int store_conversation_newer(struct store *st, int64_t id, long *n, int64_t *newest)
{
    static const char q[] =
        "SELECT c.id FROM conversations c, conversations o WHERE o.id = ?1 AND "
        "(c.updated > o.updated OR (c.updated = o.updated AND c.id > o.id)) "
        "ORDER BY c.updated DESC, c.id DESC";
    *n = 0;
    *newest = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW)
        if ((*n)++ == 0)
            *newest = sqlite3_column_int64(s, 0);
    store_done(st, s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot list conversations");
}

int store_conversation_ids(struct store *st, int64_t **ids, size_t *n)
{
    static const char q[] = "SELECT id FROM conversations ORDER BY id";
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*ids, *n + 1, cap);
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return store_fail(st, "cannot list conversations");
    }
    return 0;
}

void store_message_clear(struct store_message *m)
{
    free(m->tool);
    free(m->content);
    free(m->reasoning);
    free(m->model);
    free(m->profile);
    free(m->host);
    free(m->finish_reason);
    free(m->error);
    memset(m, 0, sizeof *m);
}

static void store_conv_clear(struct store_conversation *c)
{
    free(c->title);
    free(c->system_prompt);
    free(c->model);
    free(c->profile);
    for (size_t i = 0; i < c->n_messages; i++)
        store_message_clear(&c->messages[i]);
    free(c->messages);
}

void store_conversation_free(struct store_conversation *c)
{
    if (!c)
        return;
    store_conv_clear(c);
    free(c);
}

void store_conversation_list_free(struct store_conversation *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_conv_clear(&list[i]);
    free(list);
}

void store_walk_free(struct store_walk *w)
{
    store_conversation_free(w->conv);
    free(w->tokens);
    memset(w, 0, sizeof *w);
}
