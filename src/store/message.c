/* message.c - messages: a finished one added at once, an answer streamed in batches (its
 * text committed as parts, folded into the row when it ends). */
#include "config.h"
#include "store/store_int.h"

#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define STORE_TITLE_MAX 60          /* user-perceived characters in a derived title */

/* ---------------------------------------------------------------- messages */

/* A title from the first prompt: white space runs collapsed, at most STORE_TITLE_MAX
 * user-perceived characters, "…" when cut. Caller frees. */
static char *store_title_from(const char *text, size_t len)
{
    struct buf b = BUF_INIT;
    int space = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            space = 1;
            continue;
        }
        if (space && b.len)
            buf_appendc(&b, ' ');
        space = 0;
        buf_appendc(&b, (char)c);
    }
    if (!b.len) {
        buf_free(&b);
        return NULL;
    }
    size_t i = 0, graphemes = 0;
    utf8proc_int32_t state = 0;
    uint32_t prev = 0;
    while (i < b.len) {
        uint32_t cp;
        size_t step = utf8_decode(b.data + i, b.len - i, &cp);
        if (i == 0 || utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev,
                                                       (utf8proc_int32_t)cp, &state)) {
            if (graphemes == STORE_TITLE_MAX)
                break;
            graphemes++;
        }
        prev = cp;
        i += step;
    }
    if (i < b.len) {
        while (i > 0 && b.data[i - 1] == ' ')
            i--;
        b.len = i;
        b.data[i] = '\0';
        buf_appends(&b, "\xE2\x80\xA6");
    }
    return buf_take(&b);
}

/* 0 when parent (> 0) is a user row of conversation conv, else -1 with the error recorded. */
static int store_msg_parent_ok(struct store *st, int64_t conv, int64_t parent)
{
    static const char q[] =
        "SELECT 1 FROM messages WHERE id = ?1 AND conversation_id = ?2 AND role = 'user'";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, parent);
    sqlite3_bind_int64(s, 2, conv);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc == SQLITE_ROW)
        return 0;
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot save the message");
    store_set_err(st, "cannot save the message: its parent %lld is not a user message of "
                      "conversation %lld", (long long)parent, (long long)conv);
    return -1;
}

/* Insert a message row and touch its conversation, inside the caller's transaction. title is
 * set on an untitled conversation; in->parent_id must be a user row of it. Returns the id, or
 * -1 (STORE_NOT_FOUND-style message). */
static int64_t store_msg_insert(struct store *st, int64_t conv, const char *role,
                                const char *content, size_t len, const struct store_msg_info *in,
                                const char *status, const char *writer, const char *title)
{
    static const char q_touch[] =
        "UPDATE conversations SET updated = ?2, title = CASE WHEN title IS NULL OR title = '' "
        "THEN ?3 ELSE title END WHERE id = ?1";
    static const char q_ins[] =
        "INSERT INTO messages(conversation_id, role, status, created, model, profile, host, "
        "cached, writer, content, parent_id, error, tool) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
    int64_t now = store_epoch(st);
    sqlite3_stmt *s = store_prep(st, q_touch);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    sqlite3_bind_int64(s, 2, now);
    store_bind_text(s, 3, title);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot save the message");
    if (sqlite3_changes(st->db) == 0) {
        store_set_err(st, "cannot save the message: no conversation %lld", (long long)conv);
        return -1;
    }
    if (in && in->parent_id > 0 && store_msg_parent_ok(st, conv, in->parent_id) != 0)
        return -1;
    if (!(s = store_prep(st, q_ins)))
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    store_bind_text(s, 2, role);
    store_bind_text(s, 3, status);
    sqlite3_bind_int64(s, 4, now);
    store_bind_text(s, 5, in ? in->model : NULL);
    store_bind_text(s, 6, in ? in->profile : NULL);
    store_bind_text(s, 7, in ? in->host : NULL);
    sqlite3_bind_int(s, 8, in && in->cached);
    store_bind_text(s, 9, writer);
    if (store_bind_big(st, s, 10, content, content ? len : 0, "cannot save the message") != 0) {
        store_done(st, s);
        return -1;
    }
    /* 0, never NULL, without a parent: NULL is a row another program wrote, which the
     * messages_tree_ai trigger links (schema.c) */
    sqlite3_bind_int64(s, 11, in && in->parent_id > 0 ? in->parent_id : 0);
    store_bind_text(s, 12, in ? in->error : NULL);
    store_bind_text(s, 13, in ? in->tool : NULL);
    rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        if ((sqlite3_extended_errcode(st->db)) == SQLITE_CONSTRAINT_CHECK)
            store_set_err(st, "cannot save the message: bad role \"%s\"", role ? role : "");
        else
            store_fail(st, "cannot save the message");
        return -1;
    }
    return sqlite3_last_insert_rowid(st->db);
}

/* A new user row is the live path's last turn: conversations.head_id, inside the caller's
 * transaction. 0 or -1. */
static int store_msg_head(struct store *st, int64_t conv, int64_t id)
{
    static const char q[] = "UPDATE conversations SET head_id = ?2 WHERE id = ?1";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    sqlite3_bind_int64(s, 2, id);
    int rc = sqlite3_step(s);
    store_done(st, s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot save the message");
}

int64_t store_message_add(struct store *st, int64_t conversation_id, const char *role,
                          const char *content, size_t len, const struct store_msg_info *info)
{
    if (len > INT32_MAX) {
        store_set_err(st, "cannot save the message: it is too large");
        return -1;
    }
    char *title = role && strcmp(role, "user") == 0 && content ? store_title_from(content, len)
                                                               : NULL;
    if (store_begin(st) != 0) {
        free(title);
        return -1;
    }
    int64_t id = store_msg_insert(st, conversation_id, role, content, len, info, "complete",
                                  NULL, title);
    free(title);
    if (id < 0 || (strcmp(role, "user") == 0 && store_msg_head(st, conversation_id, id) != 0))
        return store_rollback(st);
    if (info && info->n_att && store_attach_put(st, id, info->att, info->n_att) != 0)
        return store_rollback(st);
    return store_commit(st) == 0 ? id : -1;
}

int64_t store_message_begin(struct store *st, int64_t conversation_id,
                            const struct store_msg_info *info)
{
    if (store_begin(st) != 0)
        return -1;
    int64_t id = store_msg_insert(st, conversation_id, "assistant", "", 0, info, "streaming",
                                  st->writer, NULL);
    if (id < 0)
        return store_rollback(st);
    if (store_commit(st) != 0)
        return -1;
    st->last_commit = store_mono(st); /* the first text may wait a batch interval from here */
    struct store_stream *s = xcalloc(1, sizeof *s);
    s->id = id;
    s->conversation_id = conversation_id;
    s->next = st->streams;
    st->streams = s;
    return id;
}

void store_stream_free_text(struct store_stream *s)
{
    if (s->head) {
        free(s->head);
        s->head = NULL;
        s->text = (struct buf)BUF_INIT;
    } else {
        buf_free(&s->text);
    }
}

void store_stream_free(struct store_stream *s)
{
    store_stream_free_text(s);
    buf_free(&s->reasoning);
    free(s);
}

static struct store_stream *store_stream_find(struct store *st, int64_t id)
{
    for (struct store_stream *s = st->streams; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

static void store_stream_drop(struct store *st, int64_t id)
{
    for (struct store_stream **pp = &st->streams; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            struct store_stream *s = *pp;
            *pp = s->next;
            store_stream_free(s);
            return;
        }
}

static void store_parts_warm(struct store *st);

/* Commit the buffered text of a streaming answer as new parts (no read of what is saved),
 * inside the caller's transaction. A batch longer than one SQLite value may be is split at
 * UTF-8 boundaries. 0 or -1. */
static int store_stream_write(struct store *st, struct store_stream *s)
{
    static const char q[] = "INSERT INTO message_parts(message_id, reasoning, text) "
                            "VALUES(?1, ?2, ?3)";
    if (!s->text.len && !s->has_reasoning)
        return 0;
    size_t max = store_max_value(st);
    const struct buf *parts[2] = {&s->text, &s->reasoning};
    for (int r = 0; r < 2; r++) {
        if (r == 0 ? !s->text.len : !s->has_reasoning)
            continue;
        size_t off = 0, len = parts[r]->len;
        const char *t = buf_str(parts[r]);
        do {
            size_t n = len - off;
            if (n > max) {
                n = max;
                while (n > 1 && ((unsigned char)t[off + n] & 0xC0) == 0x80)
                    n--; /* not inside a UTF-8 sequence */
            }
            sqlite3_stmt *u = store_prep(st, q);
            if (!u)
                return -1;
            sqlite3_bind_int64(u, 1, s->id);
            sqlite3_bind_int(u, 2, r);
            if (store_bind_big(st, u, 3, t + off, n, "cannot save the answer") != 0) {
                store_done(st, u);
                return -1;
            }
            int rc = sqlite3_step(u);
            store_done(st, u);
            if (rc != SQLITE_DONE)
                return store_fail(st, "cannot save the answer");
            if (!s->parted) /* kept when the transaction is rolled back: only a read more */
                store_parts_warm(st);
            s->parted = 1;
            off += n;
        } while (off < len);
    }
    return 0;
}

static const char store_q_parts_read[] = "SELECT reasoning, text FROM message_parts "
                                        "WHERE message_id = ?1 ORDER BY id";
static const char store_q_parts_drop[] = "DELETE FROM message_parts WHERE message_id = ?1";

/* The text of answer id saved as parts so far, appended to *text and *reasoning; *has_parts
 * and *has_reasoning set when there are any. 0 or -1. */
static int store_parts_read(struct store *st, int64_t id, struct buf *text, struct buf *reasoning,
                            int *has_parts, int *has_reasoning)
{
    sqlite3_stmt *q = store_prep(st, store_q_parts_read);
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int r = sqlite3_column_int(q, 0);
        const void *t = sqlite3_column_blob(q, 1);
        size_t n = (size_t)sqlite3_column_bytes(q, 1);
        buf_append(r ? reasoning : text, t ? t : "", n);
        *has_reasoning |= r;
        *has_parts = 1;
    }
    store_done(st, q);
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot read the saved answer");
    return 0;
}

/* Bind how an answer ended (?4...?18 of the fold statements). */
static void store_fin_bind(sqlite3_stmt *q, const struct store_fin *fin)
{
    const struct store_usage *u = fin->usage;
    const struct store_timings *t = fin->timings;
    store_bind_text(q, 4, store_status_names[fin->status]);
    store_bind_text(q, 5, fin->finish_reason);
    store_bind_count(q, 6, u ? u->prompt_tokens : -1);
    store_bind_count(q, 7, u ? u->completion_tokens : -1);
    store_bind_count(q, 8, u ? u->total_tokens : -1);
    store_bind_seconds(q, 9, t ? t->ttft : -1);
    store_bind_seconds(q, 10, t ? t->total : -1);
    store_bind_seconds(q, 11, t ? t->tokens_per_s : -1);
    store_bind_seconds(q, 12, t ? t->dns : -1);
    store_bind_seconds(q, 13, t ? t->connect : -1);
    store_bind_seconds(q, 14, t ? t->tls : -1);
    store_bind_text(q, 15, fin->error);
    store_bind_seconds(q, 16, t ? t->itl : -1);
    store_bind_count(q, 17, t ? t->retries : -1);
    store_bind_count(q, 18, t ? t->rate_limited : -1);
    store_bind_text(q, 19, u && u->model && *u->model ? u->model : NULL);
}

#define STORE_FOLD_SET                                                                    \
    "UPDATE messages SET content = CASE WHEN ?2 IS NULL THEN content WHEN content = '' "    \
    "THEN ?2 ELSE content || ?2 END, "                                                     \
    "reasoning = CASE WHEN ?3 IS NULL THEN reasoning WHEN reasoning IS NULL THEN ?3 "       \
    "ELSE reasoning || ?3 END"
#define STORE_FIN_SET                                                                     \
    ", status = ?4, finish_reason = ?5, prompt_tokens = ?6, completion_tokens = ?7, "     \
    "total_tokens = ?8, ttft = ?9, total_time = ?10, tokens_per_s = ?11, dns_time = ?12, " \
    "connect_time = ?13, tls_time = ?14, error = ?15, itl = ?16, retries = ?17, "        \
    "rate_limited = ?18, model = coalesce(?19, model), writer = NULL WHERE id = ?1"
/* Append text to the row. */
static const char store_q_fold[] = STORE_FOLD_SET " WHERE id = ?1";
/* Append text and write how the answer ended. */
static const char store_q_fold_fin[] = STORE_FOLD_SET STORE_FIN_SET;
/* The whole answer in one piece (its buffered text, after the parts committed while it
 * streamed, if any; the row still holds what store_message_begin wrote: '' and NULL): set, not
 * appended, so that SQLite copies the bound text once, into the record. A row that holds more
 * (another process's recovery folded parts of ours into it) is appended to with
 * store_q_fold_fin instead. */
static const char store_q_fold_whole[] =
    "UPDATE messages SET content = ifnull(?2, ''), reasoning = ?3" STORE_FIN_SET
    " AND content = '' AND reasoning IS NULL";
#undef STORE_FIN_SET
#undef STORE_FOLD_SET

#define STORE_FOLD_TOOBIG 2 /* the folded text would pass SQLite's length limit */

/* 1 when messages.content is the last column of the row (schema v15 made it so; asked once
 * per handle, at the first long answer). */
static int store_content_is_last(struct store *st)
{
    if (st->content_last < 0) {
        sqlite3_stmt *q = NULL;
        st->content_last = 0;
        if (sqlite3_prepare_v2(st->db, "SELECT name FROM pragma_table_info('messages') "
                                       "ORDER BY cid DESC LIMIT 1",
                               -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
            st->content_last = strcmp((const char *)sqlite3_column_text(q, 0), "content") == 0;
        sqlite3_finalize(q);
    }
    return st->content_last;
}

/* Run one of the fold statements on answer id with the text tp (reasoning rp when
 * has_reasoning; either may be NULL: unchanged) and fin (may be NULL). head: NULL, or the
 * stream's block of which tp's text is part (s->head; set to NULL when SQLite keeps the
 * block). 0, -1, 1 when fin was given and no row changed, or STORE_FOLD_TOOBIG (nothing
 * written). */
static int store_fold_write(struct store *st, const char *sql, int64_t id, struct buf *tp,
                            const struct buf *rp, int has_reasoning, const struct store_fin *fin,
                            char **head)
{
    sqlite3_stmt *q = store_prep(st, sql);
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    if ((tp && tp->len &&
         store_bind_big(st, q, 2, buf_str(tp), tp->len, "cannot save the answer") != 0) ||
        (rp && has_reasoning &&
         store_bind_big(st, q, 3, buf_str(rp), rp->len, "cannot save the answer") != 0)) {
        store_done(st, q);
        return STORE_FOLD_TOOBIG;
    }
    if (fin)
        store_fin_bind(q, fin);
    /* A long answer's text is in huge pages (store_append): SQLite's record of it is made in
     * the same block (sqlite_dl_lend). When the text is set whole (not appended to what the
     * row holds) and ends the row, the record ends where the text does and starts in the room
     * before it; else it goes past the text, where the text's last huge page is faulted in
     * already. */
    char *lent = NULL;
    if (tp && tp->len && tp->cap >= XMALLOC_HUGE_MIN) {
        lent = head && *head ? *head : tp->data;
        int ends = lent != tp->data && sql == store_q_fold_whole && store_content_is_last(st);
        sqlite_dl_lend(lent, tp->data, tp->len, (size_t)(tp->data - lent) + tp->cap, ends);
    }
    int rc = sqlite3_step(q);
    store_done(st, q);
    if (lent && sqlite_dl_lend_end(lent)) {
        /* SQLite kept the record: the block is its own now; the text gets one of its own */
        struct buf keep = BUF_INIT;
        buf_append(&keep, tp->data, tp->len);
        *tp = keep;
        if (head && *head == lent)
            *head = NULL;
    }
    if ((rc & 0xff) == SQLITE_TOOBIG) {
        store_fail(st, "cannot save the answer");
        return STORE_FOLD_TOOBIG;
    }
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot save the answer");
    return fin && sqlite3_changes(st->db) == 0 ? 1 : 0;
}

/* Drop the saved parts of answer id. 0 or -1. */
static int store_parts_drop(struct store *st, int64_t id)
{
    sqlite3_stmt *q = store_prep(st, store_q_parts_drop);
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    int rc = sqlite3_step(q);
    store_done(st, q);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot save the answer");
}

/* The statements the end of an answer saved in parts runs (store_fold), compiled as its first
 * part is written, while it streams: not at its end, which the user waits for. */
static void store_parts_warm(struct store *st)
{
    store_warm(st, store_q_parts_read);
    store_warm(st, store_q_parts_drop);
}

/* The buffered text of a stream, released while the row is written from a copy that holds it
 * too (the answer is then in memory twice, the copy and SQLite's record, not three times), and
 * put back from that copy's tail when the write does not happen. */
struct store_hold {
    struct store_stream *s; /* NULL: nothing released */
    size_t text, reasoning; /* bytes released */
};

static void store_hold_release(struct store_hold *h, struct store_stream *s)
{
    *h = (struct store_hold){s, s->text.len, s->reasoning.len};
    store_stream_free_text(s);
    buf_free(&s->reasoning);
}

/* Put the released text back: the last h->text bytes of text[0..tlen), likewise reasoning. */
static void store_hold_restore(struct store_hold *h, const char *text, size_t tlen,
                               const char *reasoning, size_t rlen)
{
    struct store_stream *s = h->s;
    if (!s)
        return;
    buf_reset(&s->text);
    buf_reset(&s->reasoning);
    if (h->text)
        buf_append(&s->text, text + tlen - h->text, h->text);
    if (h->reasoning)
        buf_append(&s->reasoning, reasoning + rlen - h->reasoning, h->reasoning);
    h->s = NULL;
}

/* 1 when the caller's whole text w is what answer stream s was given: the parts committed so
 * far and the text still buffered. */
static int store_whole_matches(const struct store_stream *s, const struct store_whole *w)
{
    return w->len + w->reasoning_len == s->total && s->text.len <= w->len &&
           s->reasoning.len <= w->reasoning_len &&
           (!s->text.len || memcmp(w->text + w->len - s->text.len, s->text.data,
                                   s->text.len) == 0) &&
           (!s->reasoning.len ||
            memcmp(w->reasoning + w->reasoning_len - s->reasoning.len, s->reasoning.data,
                   s->reasoning.len) == 0);
}

/* Write answer id from the caller's whole text w (stream s buffered its tail; the parts hold
 * the rest): the row is set in one piece, without reading the parts back, and the parts are
 * dropped. 0, -1, 1 when the row is not as store_message_begin left it, or STORE_FOLD_TOOBIG
 * (nothing written either way: the usual fold takes over). */
static int store_fold_given(struct store *st, int64_t id, struct store_stream *s,
                            const struct store_whole *w, const struct store_fin *fin)
{
    size_t max = store_max_value(st);
    if (w->len > max || w->reasoning_len > max)
        return STORE_FOLD_TOOBIG;
    struct buf tv = {(char *)w->text, w->len, 0};
    struct buf rv = {(char *)w->reasoning, w->reasoning_len, 0};
    struct store_hold h;
    store_hold_release(&h, s);
    int rc = store_fold_write(st, store_q_fold_whole, id, &tv, &rv, w->reasoning_len > 0, fin,
                              NULL);
    if (rc == 0 && s->parted && store_parts_drop(st, id) != 0)
        rc = -1;
    if (rc != 0)
        store_hold_restore(&h, w->text, w->len, w->reasoning, w->reasoning_len);
    return rc;
}

/* Fold the saved parts of answer id, then the buffered text of s (may be NULL), into
 * messages.content / reasoning, and drop the parts. With fin, the same UPDATE also writes how
 * the answer ended: a long answer's row (its overflow pages) is written once, not twice.
 * With w (and s, fin), the caller's copy of the whole text is written instead when it is what
 * s was given and parts of it were committed (else s holds it all, in a block in which SQLite
 * can make the record without a copy). Inside a write transaction. Returns 0, -1, or
 * STORE_NOT_FOUND (fin given, no such row). */
static int store_fold(struct store *st, int64_t id, struct store_stream *s,
                      const struct store_whole *w, const struct store_fin *fin)
{
    if (s && w && fin && s->parted && store_whole_matches(s, w)) {
        int rc = store_fold_given(st, id, s, w, fin);
        if (rc == 0 || rc == -1)
            return rc;
    }
    struct buf text = BUF_INIT, reasoning = BUF_INIT;
    int has_reasoning = 0, has_parts = 0, ret = -1;
    struct store_hold hold = {NULL, 0, 0};
    if (s && s->total > s->text.len)
        buf_reserve(&text, s->total); /* no copy as it grows (only what is written is touched) */
    /* An answer of which no part was committed has none to read (only its writer adds them;
     * a deleted row takes its parts with it): a short one's end runs one statement fewer. */
    if ((!s || s->parted) &&
        store_parts_read(st, id, &text, &reasoning, &has_parts, &has_reasoning) != 0)
        goto out;
    struct buf *tp = &text;
    const struct buf *rp = &reasoning;
    if (s && !has_parts) {
        /* Nothing was committed as parts yet: write the buffered text as it is. */
        tp = &s->text;
        rp = &s->reasoning;
        has_reasoning = s->has_reasoning;
    } else if (s) {
        buf_append(&text, buf_str(&s->text), s->text.len);
        if (s->has_reasoning) {
            buf_append(&reasoning, buf_str(&s->reasoning), s->reasoning.len);
            has_reasoning = 1;
        }
        store_hold_release(&hold, s); /* text holds it now */
    }
    size_t max = store_max_value(st);
    int too_big = tp->len > max || rp->len > max;
    if (!too_big && (tp->len || has_reasoning || fin)) {
        /* the row still holds what store_message_begin wrote, parts or not: set, not
         * appended (one statement for both, compiled ahead by store_warm_answer) */
        const char *sql = !fin ? store_q_fold : s ? store_q_fold_whole : store_q_fold_fin;
        char **head = s && tp == &s->text ? &s->head : NULL;
        int rc = store_fold_write(st, sql, id, tp, rp, has_reasoning, fin, head);
        if (rc == 1 && sql == store_q_fold_whole) /* not as store_message_begin left it */
            rc = store_fold_write(st, store_q_fold_fin, id, tp, rp, has_reasoning, fin, head);
        if (rc == 1)
            ret = STORE_NOT_FOUND;
        if (rc == STORE_FOLD_TOOBIG)
            too_big = 1;
        else if (rc != 0)
            goto out;
    }
    if (too_big) {
        /* Too large for one SQLite value: the answer stays in parts (the buffered text
         * joins them), which every reader appends to the row (store_conversation_load); only
         * how it ended is written. Nothing is deleted. */
        store_hold_restore(&hold, text.data, text.len, reasoning.data, reasoning.len);
        if (s && store_stream_write(st, s) != 0)
            goto out;
        int rc = fin ? store_fold_write(st, store_q_fold_fin, id, NULL, NULL, 0, fin, NULL) : 0;
        ret = rc == 1 ? STORE_NOT_FOUND : rc == 0 ? 0 : -1;
        goto out;
    }
    if (has_parts && store_parts_drop(st, id) != 0)
        goto out;
    ret = 0;
out:
    if (ret != 0) /* the transaction is rolled back: the stream keeps its text */
        store_hold_restore(&hold, text.data, text.len, reasoning.data, reasoning.len);
    buf_free(&text);
    buf_free(&reasoning);
    return ret;
}

int store_parts_fold(struct store *st, int64_t id, const struct store_stream *s,
                     const struct store_fin *fin)
{
    return store_fold(st, id, (struct store_stream *)s, NULL, fin);
}

/* Buffered text past which a streaming answer is committed at once, not at the next batch
 * interval, to bound the buffer of a server that sends faster than anyone reads. Not lower:
 * an answer that ends before its first batch interval is written once, as its row, and a
 * part committed is written twice (the part, then the row it is folded into at the end:
 * 9.9 MB in 4 MiB parts put 17.7 MB into the WAL, and read 8 MiB back). */
#define STORE_PART_MAX ((size_t)16 << 20)
#define STORE_BLOCK ((size_t)64 << 20) /* a fast answer's text block (store_append) */
/* A buffer kept for the next batch after a commit holds at most this much. */
#define STORE_PART_KEEP ((size_t)8 << 20)

/* The room before a fast answer's text in its block: the start of SQLite's record of the row
 * (its header and the columns before content: a reasoning of up to ~60 KiB). */
#define STORE_HEAD_ROOM ((size_t)64 << 10)

/* Move the text of s into a new block of STORE_BLOCK bytes, STORE_HEAD_ROOM into it (s->head).
 * 0, or -1 when the block cannot be had (nothing changed). */
static int store_text_block(struct store_stream *s)
{
    char *head = huge_alloc(STORE_BLOCK);
    if (!head)
        return -1;
    char *p = head + STORE_HEAD_ROOM;
    size_t len = s->text.len;
    if (len)
        memcpy(p, s->text.data, len);
    p[len] = '\0';
    store_stream_free_text(s);
    s->text = (struct buf){p, len, STORE_BLOCK - STORE_HEAD_ROOM};
    s->head = head;
    return 0;
}

/* The stream's text is committed: its buffer is kept for the next batch, unless a fast batch
 * grew it large (kept, those pages would stay resident while the fold makes its copies of the
 * whole answer). */
static void store_stream_sent(struct store_stream *s)
{
    if (s->text.cap > STORE_PART_KEEP)
        store_stream_free_text(s);
    if (s->reasoning.cap > STORE_PART_KEEP)
        buf_free(&s->reasoning);
    buf_reset(&s->text);
    buf_reset(&s->reasoning);
    s->has_reasoning = 0;
}

/* Commit the buffered parts of msg_id (0: of every stream). wait = 0: only when the write lock
 * is free now (1 when it is not: nothing written, the text stays buffered, tried again a
 * batch later: store_flush_deadline moves on). */
static int store_flush(struct store *st, int64_t msg_id, int wait)
{
    int pending = 0;
    for (struct store_stream *s = st->streams; s; s = s->next)
        if ((!msg_id || s->id == msg_id) && (s->text.len || s->has_reasoning))
            pending = 1;
    if (!pending)
        return 0;
    if (!wait && store_try_begin(st) != 0) {
        st->last_commit = store_mono(st);
        return 1;
    }
    if (wait && store_begin(st) != 0)
        return -1;
    for (struct store_stream *s = st->streams; s; s = s->next)
        if ((!msg_id || s->id == msg_id) && store_stream_write(st, s) != 0)
            return store_rollback(st);
    if (store_commit(st) != 0)
        return -1;
    for (struct store_stream *s = st->streams; s; s = s->next)
        if (!msg_id || s->id == msg_id)
            store_stream_sent(s);
    st->last_commit = store_mono(st);
    return 0;
}

int store_message_flush(struct store *st, int64_t msg_id)
{
    return store_flush(st, msg_id, 1);
}

int store_message_flush_due(struct store *st)
{
    return store_flush(st, 0, 0) < 0 ? -1 : 0;
}

static int store_append(struct store *st, int64_t msg_id, const char *text, size_t len,
                        int reasoning)
{
    struct store_stream *s = store_stream_find(st, msg_id);
    if (!s) {
        store_set_err(st, "cannot save the answer: message %lld is not streaming here",
                      (long long)msg_id);
        return -1;
    }
    struct buf *b = reasoning ? &s->reasoning : &s->text;
    /* A fast sender: into huge pages, reserved for all it may buffer before a part commit
     * (only the pages written are faulted in; growing, a 9.9 MB answer's buffer copied 5 MB
     * into fresh pages), and past it the record SQLite makes of it when the answer is folded
     * (sqlite_dl_lend: a 1 MB answer's record goes there). Address space taken ahead of
     * need: when STORE_BLOCK cannot be had (RLIMIT_AS, a strict overcommit), a part's room,
     * else the buffer grows as a short answer's does; until 2026-12 a refusal aborted the
     * run, and an answer needed ~200 MiB of address space to be saved where --incognito ran
     * in 60 MiB. The text starts STORE_HEAD_ROOM into its block: the record SQLite makes of
     * it can then end where the text does (store_fold_write). */
    if (b->cap < XMALLOC_HUGE_MIN && b->len + len >= XMALLOC_HUGE_WRITE &&
        (reasoning || store_text_block(s) != 0) && buf_try_room(b, STORE_BLOCK) != 0)
        (void)buf_try_room(b, STORE_PART_MAX + 1);
    if (!reasoning && s->head && len >= b->cap - b->len) { /* (a block never grows) */
        struct buf out = BUF_INIT;
        buf_reserve(&out, b->len + len);
        buf_append(&out, b->data, b->len);
        store_stream_free_text(s);
        *b = out;
    }
    buf_append(b, text, len);
    s->has_reasoning |= reasoning;
    s->total += len;
    int full = s->text.len + s->reasoning.len >= STORE_PART_MAX;
    if (store_mono(st) - st->last_commit < STORE_BATCH_INTERVAL && !full)
        return 0;
    /* A batch due by time waits for no lock: another writer (a tokterm, the sqlite3 shell)
     * holding it leaves the text buffered, tried again a batch later, and the stream goes on
     * (until 2026-12 it waited up to 30 s, the answer frozen on screen, then warned that the
     * conversation was not saved though its end was). A full part waits. */
    int rc = store_flush(st, 0, full);
    return rc == 1 ? 0 : rc == 0 ? 1 : -1;
}

int store_message_append(struct store *st, int64_t msg_id, const char *text, size_t len)
{
    return store_append(st, msg_id, text, len, 0);
}

int store_message_append_reasoning(struct store *st, int64_t msg_id, const char *text,
                                   size_t len)
{
    return store_append(st, msg_id, text, len, 1);
}

double store_flush_deadline(const struct store *st)
{
    for (const struct store_stream *s = st->streams; s; s = s->next)
        if (s->text.len || s->has_reasoning)
            return st->last_commit + STORE_BATCH_INTERVAL;
    return 0;
}

/* The end of an answer's row (store_finish_write). Every answer is indexed by the next search
 * (the trigram index's queue), whatever its size: indexing at save time cost ~0.25 ms per KB
 * (a 60 KB answer: 14-30 ms), and only answers under 64 KiB paid it (the triggers queue longer
 * ones). Queued while the row is still 'streaming', so that messages_fts_done leaves it to the
 * queue; a row that has finished already is in the index and is left alone. */
static const char store_q_queue[] = "INSERT OR IGNORE INTO fts_pending(message_id) "
                                    "SELECT id FROM messages WHERE id = ?1 AND status = "
                                    "'streaming'";
static const char store_q_touch[] = "UPDATE conversations SET updated = ?2 WHERE id = "
                                    "(SELECT conversation_id FROM messages WHERE id = ?1)";

/* store_message_finish's transaction: the folded text and the outcome in one row write. */
static int store_finish_write(struct store *st, int64_t msg_id, struct store_stream *str,
                              const struct store_whole *whole, enum store_status status,
                              const char *finish_reason, const struct store_usage *usage,
                              const struct store_timings *timings, const char *error)
{
    if (store_begin(st) != 0)
        return -1;
    struct store_fin fin = {status, finish_reason, error, usage, timings};
    if (store_run_steps(st, (const char *const[]){store_q_queue}, 1, &msg_id,
                        "cannot save the answer") != 0)
        return -1;
    int rc = store_fold(st, msg_id, str, whole, &fin);
    if (rc == STORE_NOT_FOUND) {
        store_rollback(st);
        store_stream_drop(st, msg_id);
        store_set_err(st, "no message %lld", (long long)msg_id);
        return STORE_NOT_FOUND;
    }
    if (rc != 0)
        return store_rollback(st);
    sqlite3_stmt *s = store_prep(st, store_q_touch);
    if (!s)
        return store_rollback(st);
    sqlite3_bind_int64(s, 1, msg_id);
    sqlite3_bind_int64(s, 2, store_epoch(st));
    rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot save the answer");
        return store_rollback(st);
    }
    return store_commit(st);
}

int store_message_finish_whole(struct store *st, int64_t msg_id, const struct store_whole *whole,
                               enum store_status status, const char *finish_reason,
                               const struct store_usage *usage,
                               const struct store_timings *timings, const char *error)
{
    if (status == STORE_STREAMING || (unsigned)status >= TT_ARRAY_LEN(store_status_names)) {
        store_set_err(st, "cannot finish message %lld with status %s", (long long)msg_id,
                      store_status_name(status));
        return -1;
    }
    if (!st->finished) {
        st->finished = 1;
        st->compiled_end = st->compiled;
    }
    struct store_stream *str = store_stream_find(st, msg_id);
    /* A long answer goes through a page cache of a few pages: SQLite writes each full page to
     * the WAL and reuses its memory, instead of holding the whole answer in 2 MB of fresh pages
     * until the commit (fresh memory is what such a write costs most: 13 -> 6 ms for 1.9 MB). */
    /* A checkpoint still copying the WAL (started as the request left) is waited for here
     * rather than at close: this commit then starts the WAL over instead of appending to it,
     * so the next open recovers only these pages, and the next copy copies only them. Not for
     * a long answer, whose own write overlaps the copy's fsyncs (1 MB: 2.26x -> 1.79x of
     * --no-save when it waited, load 7); it restarts the WAL only if the copy is done. */
    int big = str && str->total >= STORE_BIG_ANSWER;
    store_checkpoint_wait(st, !big);
    if (big)
        (void)sqlite3_exec(st->db, "PRAGMA cache_size = " TT_STR(STORE_BIG_CACHE_PAGES), NULL,
                           NULL, NULL);
    int rc = store_finish_write(st, msg_id, str, whole, status, finish_reason, usage, timings,
                                error);
    if (big)
        (void)sqlite3_exec(st->db, "PRAGMA cache_size = " TT_STR(STORE_CACHE_KIB), NULL, NULL,
                           NULL);
    if (rc == 0)
        store_stream_drop(st, msg_id);
    return rc;
}

int store_message_finish(struct store *st, int64_t msg_id, enum store_status status,
                         const char *finish_reason, const struct store_usage *usage,
                         const struct store_timings *timings, const char *error)
{
    return store_message_finish_whole(st, msg_id, NULL, status, finish_reason, usage, timings,
                                      error);
}

/* ---------------------------------------------------------------- token counts (v7) */

int store_tokens_get(struct store *st, int64_t conversation_id, const char *encoding,
                     struct store_tokens **out, size_t *n)
{
    static const char q[] = "SELECT message_id, bytes, tokens FROM message_tokens "
                            "WHERE conversation_id = ?1 AND encoding = ?2 ORDER BY message_id";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conversation_id);
    store_bind_text(s, 2, encoding);
    size_t cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(*out, *n + 1, cap);
        (*out)[(*n)++] = (struct store_tokens){sqlite3_column_int64(s, 0),
                                               sqlite3_column_int64(s, 1),
                                               (long)sqlite3_column_int64(s, 2)};
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return store_fail(st, "cannot read the token counts");
    }
    return 0;
}

/* The statements of store_tokens_put: the counts, then the mark moved over them. */
static const char store_q_tokens_put[] =
    "INSERT OR REPLACE INTO message_tokens(conversation_id, message_id, encoding, bytes, "
    "tokens) SELECT conversation_id, id, ?3, ?4, ?5 FROM messages "
    "WHERE id = ?2 AND conversation_id = ?1"; /* a count never outlives its message */
static const char store_q_mark[] = "SELECT through_id, max_tokens FROM token_marks "
                                   "WHERE conversation_id = ?1 AND encoding = ?2";
static const char store_q_mark_gap[] =
    "SELECT coalesce((SELECT id - 1 FROM messages m WHERE conversation_id = ?1 AND id > ?3 "
    "AND NOT EXISTS (SELECT 1 FROM message_tokens k WHERE k.conversation_id = ?1 AND "
    "k.message_id = m.id AND k.encoding = ?2) ORDER BY id LIMIT 1), (SELECT max(id) FROM "
    "messages WHERE conversation_id = ?1), 0)";
static const char store_q_mark_max[] =
    "SELECT coalesce(max(tokens), 0) FROM message_tokens WHERE conversation_id = ?1 AND "
    "encoding = ?2 AND message_id > ?3 AND message_id <= ?4";
static const char store_q_mark_put[] =
    "INSERT OR REPLACE INTO token_marks(conversation_id, encoding, through_id, max_tokens) "
    "VALUES(?1, ?2, ?3, ?4)";

int store_tokens_mark(struct store *st, int64_t conv, const char *encoding, int64_t *through,
                      long *max)
{
    *through = 0;
    *max = 0;
    sqlite3_stmt *s = store_prep(st, store_q_mark);
    if (!s)
        return SQLITE_ERROR;
    sqlite3_bind_int64(s, 1, conv);
    store_bind_text(s, 2, encoding);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        *through = sqlite3_column_int64(s, 0);
        *max = (long)sqlite3_column_int64(s, 1);
    }
    store_done(st, s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc;
}

/* Move conversation conv's token mark (schema v11) in encoding past the rows now counted after
 * it, up to the first row without a count: work in those rows only (each put moves it over
 * the rows it counted). Inside the put's transaction. 0, or an SQLite code. */
static int store_tokens_advance(struct store *st, int64_t conv, const char *encoding)
{
    int64_t through, to = 0;
    long max;
    int rc = store_tokens_mark(st, conv, encoding, &through, &max);
    const char *qs[] = {store_q_mark_gap, store_q_mark_max, store_q_mark_put};
    for (int i = 0; rc == 0 && i < 3 && (i == 0 || to > through); i++) {
        sqlite3_stmt *s = store_prep(st, qs[i]);
        if (!s)
            return SQLITE_ERROR;
        sqlite3_bind_int64(s, 1, conv);
        store_bind_text(s, 2, encoding);
        sqlite3_bind_int64(s, 3, i == 2 ? to : through);
        if (i)
            sqlite3_bind_int64(s, 4, i == 1 ? to : max);
        rc = store_step(st, s);
        if (i == 0 && rc == SQLITE_ROW)
            to = sqlite3_column_int64(s, 0);
        else if (i == 1 && rc == SQLITE_ROW && sqlite3_column_int64(s, 0) > max)
            max = (long)sqlite3_column_int64(s, 0);
        store_done(st, s);
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc;
    }
    return rc;
}

int store_tokens_put(struct store *st, int64_t conversation_id, const char *encoding,
                     const struct store_tokens *v, size_t n)
{
    if (!n)
        return 0;
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, store_q_tokens_put);
    if (!s)
        return store_rollback(st);
    int rc = SQLITE_DONE;
    for (size_t i = 0; i < n && rc == SQLITE_DONE; i++) {
        sqlite3_bind_int64(s, 1, conversation_id);
        sqlite3_bind_int64(s, 2, v[i].id);
        store_bind_text(s, 3, encoding);
        sqlite3_bind_int64(s, 4, v[i].bytes);
        sqlite3_bind_int64(s, 5, v[i].tokens);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE || store_tokens_advance(st, conversation_id, encoding) != 0) {
        store_fail(st, "cannot save the token counts");
        return store_rollback(st);
    }
    return store_commit(st);
}

void store_warm_answer(struct store *st, int cache, int tokens)
{
    if (!st || st->readonly)
        return;
    /* what the end of a short answer runs: store_finish_write (no parts to read), then
     * store_cache_put_message and store_tokens_put */
    static const char *const fin[] = {store_q_queue, store_q_fold_whole, store_q_touch};
    static const char *const tok[] = {store_q_tokens_put, store_q_mark, store_q_mark_gap,
                                      store_q_mark_max, store_q_mark_put};
    char *err = st->err ? xstrdup(st->err) : NULL; /* a statement that does not compile here
                                                     * says so again where it runs */
    for (size_t i = 0; i < TT_ARRAY_LEN(fin); i++)
        store_warm(st, fin[i]);
    if (cache)
        store_cache_warm(st);
    for (size_t i = 0; tokens && i < TT_ARRAY_LEN(tok); i++)
        store_warm(st, tok[i]);
    free(st->err);
    st->err = err;
}

int store_message_set_tool(struct store *st, int64_t msg_id, const char *tool)
{
    sqlite3_stmt *s = store_prep(st, "UPDATE messages SET tool = ?2 WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, msg_id);
    store_bind_text(s, 2, tool);
    int rc = sqlite3_step(s);
    store_done(st, s);
    return rc == SQLITE_DONE ? 0 : store_fail(st, "cannot save the tool calls");
}
