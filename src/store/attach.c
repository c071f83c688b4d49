/* attach.c - attachments of user rows (schema v10): the files' bytes once in `blobs` by SHA-256,
 * one `attachments` row per file of a message. See store.h, "Attachments". */
#include "config.h"
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"

/* Save the attachments of message id inside the open transaction: each blob once (INSERT OR
 * IGNORE by its hash), then the rows. 0, or -1 with the error recorded. */
int store_attach_put(struct store *st, int64_t id, const struct store_attach *v, size_t n)
{
    static const char q_blob[] =
        "INSERT OR IGNORE INTO blobs(sha256, size, data) VALUES(?1, ?2, ?3)";
    static const char q_row[] =
        "INSERT INTO attachments(message_id, seq, name, kind, mime, sha256, size, width, "
        "height, pages) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    for (size_t i = 0; i < n; i++) {
        const struct store_attach *a = &v[i];
        if (a->len > store_max_value(st)) {
            store_set_err(st, "cannot save the attachment %s: %zu bytes is too large for the "
                          "database", a->name, a->len);
            return -1;
        }
        sqlite3_stmt *s = store_prep(st, q_blob);
        if (!s)
            return -1;
        sqlite3_bind_blob(s, 1, a->sha256, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)a->len);
        sqlite3_bind_blob(s, 3, a->len ? (const void *)a->data : "", (int)a->len, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        store_done(st, s);
        if (rc != SQLITE_DONE)
            return store_fail(st, "cannot save the attachment");
        if (!(s = store_prep(st, q_row)))
            return -1;
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, (int)i);
        store_bind_text(s, 3, a->name);
        store_bind_text(s, 4, a->kind);
        store_bind_text(s, 5, a->mime);
        sqlite3_bind_blob(s, 6, a->sha256, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 7, (sqlite3_int64)a->len);
        sqlite3_bind_int(s, 8, a->width);
        sqlite3_bind_int(s, 9, a->height);
        sqlite3_bind_int(s, 10, a->pages);
        rc = sqlite3_step(s);
        store_done(st, s);
        if (rc != SQLITE_DONE)
            return store_fail(st, "cannot save the attachment");
    }
    return 0;
}

/* q selects the columns of STORE_ATTACH_COLS, or (store_attach_names) the size, an integer, in
 * place of the bytes: then data stays NULL and len is the size. */
static int store_attach_read(struct store *st, const char *q, int64_t key, int64_t from,
                             struct store_attach **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, key);
    if (from)
        sqlite3_bind_int64(s, 2, from);
    size_t cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        struct store_attach *a = &(*out)[(*n)++];
        memset(a, 0, sizeof *a);
        a->message_id = sqlite3_column_int64(s, 0);
        a->seq = sqlite3_column_int(s, 1);
        a->name = store_col_str(s, 2);
        a->kind = store_col_str(s, 3);
        a->mime = store_col_str(s, 4);
        if (sqlite3_column_bytes(s, 5) == 32)
            memcpy(a->sha256, sqlite3_column_blob(s, 5), 32);
        a->width = sqlite3_column_int(s, 6);
        a->height = sqlite3_column_int(s, 7);
        a->pages = sqlite3_column_int(s, 8);
        if (sqlite3_column_type(s, 9) == SQLITE_INTEGER) { /* the size, not the bytes */
            a->len = (size_t)sqlite3_column_int64(s, 9);
            continue;
        }
        size_t len = (size_t)sqlite3_column_bytes(s, 9);
        unsigned char *d = xmalloc(len + 1);
        if (len)
            memcpy(d, sqlite3_column_blob(s, 9), len);
        d[len] = '\0';
        a->data = d;
        a->len = len;
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_attach_free(*out, *n);
        *out = NULL;
        *n = 0;
        return store_fail(st, "cannot read the attachments");
    }
    return 0;
}

#define STORE_ATTACH_COLS                                                                    \
    "SELECT a.message_id, a.seq, a.name, a.kind, a.mime, a.sha256, a.width, a.height, "      \
    "a.pages, b.data FROM attachments a JOIN blobs b ON b.sha256 = a.sha256 "

int store_attach_list(struct store *st, int64_t conversation_id, struct store_attach **out,
                      size_t *n)
{
    static const char q[] = STORE_ATTACH_COLS
        "JOIN messages m ON m.id = a.message_id WHERE m.conversation_id = ?1 "
        "ORDER BY a.message_id, a.seq";
    return store_attach_read(st, q, conversation_id, 0, out, n);
}

int store_attach_names(struct store *st, int64_t conversation_id, struct store_attach **out,
                       size_t *n)
{
    static const char q[] =
        "SELECT a.message_id, a.seq, a.name, a.kind, a.mime, a.sha256, a.width, a.height, "
        "a.pages, a.size FROM attachments a JOIN messages m ON m.id = a.message_id "
        "WHERE m.conversation_id = ?1 ORDER BY a.message_id, a.seq";
    return store_attach_read(st, q, conversation_id, 0, out, n);
}

int store_attach_list_from(struct store *st, int64_t conversation_id, int64_t from_id,
                           struct store_attach **out, size_t *n)
{
    /* along attachments' key from from_id to the conversation's newest row (not along the
     * conversation's rows, each probed for attachments: O(history)) */
    static const char q[] = STORE_ATTACH_COLS
        "CROSS JOIN messages m ON m.id = a.message_id WHERE a.message_id >= ?2 AND "
        "a.message_id <= (SELECT max(id) FROM messages WHERE conversation_id = ?1) AND "
        "m.conversation_id = ?1 ORDER BY a.message_id, a.seq";
    return store_attach_read(st, q, conversation_id, from_id > 0 ? from_id : 1, out, n);
}

int store_attach_get(struct store *st, int64_t message_id, struct store_attach **out, size_t *n)
{
    static const char q[] = STORE_ATTACH_COLS "WHERE a.message_id = ?1 ORDER BY a.seq";
    return store_attach_read(st, q, message_id, 0, out, n);
}

void store_attach_free(struct store_attach *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].kind);
        free(v[i].mime);
        free((void *)v[i].data);
    }
    free(v);
}
