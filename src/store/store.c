/* store.c - the SQLite store: schema and migrations, conversations, batched streaming saves,
 * trigram full-text search, statistics, response cache, summaries and quota state. */
#include "config.h"
#include "store/store.h"

#include "base/buf.h"
#include "store/fts_words.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include "store/sqlite_dl.h" /* <sqlite3.h>, the library loaded on first open */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#define STORE_APP_ID 0x746b746d     /* "tktm" in PRAGMA application_id */
#define STORE_BUSY_TIMEOUT_MS 5000  /* SQLite's own wait for a lock */
#define STORE_BUSY_DEADLINE 30.0    /* seconds we keep retrying on SQLITE_BUSY in total */
#define STORE_STMT_CACHE 64
#define STORE_TITLE_MAX 60          /* user-perceived characters in a derived title */
#define STORE_RANK_WINDOW 5000      /* newest full-text matches ranked by bm25 */
#define STORE_SAMPLE 2000           /* newest indexed messages a search samples first */

/* An answer this handle is streaming: text waiting for the next batch commit. */
struct store_stream {
    int64_t id, conversation_id;
    struct buf text, reasoning;  /* appended since the last committed part */
    size_t total;                /* bytes appended over the whole answer */
    int has_reasoning;
    struct store_stream *next;
};

/* A cache hit whose last_used/hits update waits for the next write transaction. */
struct store_touch {
    unsigned char key[STORE_CACHE_KEY_LEN];
    int64_t when;
    int64_t hits;
};

struct store_stmt {
    const char *sql; /* identity: the address of a string literal in this file */
    sqlite3_stmt *stmt;
};

struct store {
    sqlite3 *db;
    char *path;
    char *err;
    struct store_stmt stmts[STORE_STMT_CACHE];
    size_t n_stmts;
    double (*mono)(void *);
    int64_t (*epoch)(void *);
    void *clock_ud;
    int64_t cache_ttl, cache_max;
    int64_t cache_entry_max;  /* largest answer cached, bytes (0 = cache_max) */
    struct store_stream *streams;
    double last_commit; /* mono time of the last batch commit */
    char writer[64];    /* "pid:starttime" of this process, stored on streaming rows */
    struct store_touch *touches; /* pending cache-hit updates */
    size_t n_touches, cap_touches;
    int fts_rank;                /* tt_rank() registered on this connection (search) */
    struct fts_words *words;     /* the tt_words tokenizer, registered at open */
    pthread_t ckpt;              /* store_checkpoint_async's thread */
    int ckpt_started;
    int ckpt_done;               /* atomic: set by that thread as it ends */
};

#define STORE_TOUCH_MAX 256 /* pending cache-hit updates before they get their own write */

static const char *const status_names[] = {"streaming", "complete",  "cancelled",
                                           "error",     "truncated", "interrupted"};

/* ---------------------------------------------------------------- errors and helpers */

static void store_set_err(struct store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void store_set_err(struct store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[1024];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    free(st->err);
    st->err = xstrdup(tmp);
}

/* A user-facing explanation of an SQLite failure. */
static const char *store_hint(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return " (another tokterm kept the database busy for too long; try again)";
    case SQLITE_READONLY:
        return " (the database file or its directory is read-only)";
    case SQLITE_FULL:
        return " (the disk is full)";
    case SQLITE_CORRUPT:
        return " (the database file is damaged)";
    case SQLITE_NOTADB:
        return " (the file is not an SQLite database)";
    case SQLITE_IOERR:
        return " (input/output error)";
    case SQLITE_CANTOPEN:
        return " (cannot open the file)";
    default:
        return "";
    }
}

/* Record "what: sqlite message (hint)" and return -1. */
static int store_fail(struct store *st, const char *what)
{
    int rc = sqlite3_extended_errcode(st->db);
    store_set_err(st, "%s: %s%s", what, sqlite3_errmsg(st->db), store_hint(rc));
    return -1;
}

static double store_mono(struct store *st)
{
    return st->mono ? st->mono(st->clock_ud) : util_now();
}

static int64_t store_epoch(struct store *st)
{
    return st->epoch ? st->epoch(st->clock_ud) : util_epoch();
}

static void store_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A prepared statement for a string literal, kept for the life of the connection. The caller
 * resets it with store_done(). NULL (error recorded) when it does not compile. */
static sqlite3_stmt *store_prep(struct store *st, const char *sql)
{
    for (size_t i = 0; i < st->n_stmts; i++)
        if (st->stmts[i].sql == sql)
            return st->stmts[i].stmt;
    sqlite3_stmt *stmt = NULL;
    unsigned flags = st->n_stmts < STORE_STMT_CACHE ? SQLITE_PREPARE_PERSISTENT : 0;
    if (sqlite3_prepare_v3(st->db, sql, -1, flags, &stmt, NULL) != SQLITE_OK) {
        store_fail(st, "internal query failed to compile");
        return NULL;
    }
    if (st->n_stmts < STORE_STMT_CACHE) {
        st->stmts[st->n_stmts].sql = sql;
        st->stmts[st->n_stmts++].stmt = stmt;
    }
    return stmt;
}

/* Reset a statement from store_prep() (or finalize one that did not fit the cache). */
static void store_done(struct store *st, sqlite3_stmt *stmt)
{
    if (!stmt)
        return;
    for (size_t i = 0; i < st->n_stmts; i++)
        if (st->stmts[i].stmt == stmt) {
            sqlite3_reset(stmt);
            sqlite3_clear_bindings(stmt);
            return;
        }
    sqlite3_finalize(stmt);
}

/* sqlite3_step that retries a statement which could not start because of SQLITE_BUSY (possible
 * in WAL mode even with a busy timeout, e.g. while another connection recovers the WAL). Only
 * a statement that has not returned rows yet, outside an explicit transaction, is retried. */
static int store_step(struct store *st, sqlite3_stmt *stmt)
{
    double start = util_now();
    for (int attempt = 0;; attempt++) {
        int started = sqlite3_stmt_busy(stmt);
        int rc = sqlite3_step(stmt);
        if ((rc & 0xff) != SQLITE_BUSY || started || util_now() - start > STORE_BUSY_DEADLINE ||
            !sqlite3_get_autocommit(st->db))
            return rc;
        sqlite3_reset(stmt);
        store_sleep_ms(2 + (attempt % 16) * 3);
    }
}

/* Run SQL without results (several statements allowed). 0 or -1 with the error recorded. */
static int store_exec(struct store *st, const char *sql, const char *what)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(st, what);
    return 0;
}

static void store_touch_apply(struct store *st);

/* BEGIN IMMEDIATE, retrying on SQLITE_BUSY beyond the busy timeout so that concurrent
 * writers queue up instead of failing. Pending cache-hit updates ride along. */
static int store_begin(struct store *st)
{
    double start = util_now();
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            if (st->n_touches)
                store_touch_apply(st);
            return 0;
        }
        if ((rc & 0xff) != SQLITE_BUSY || util_now() - start > STORE_BUSY_DEADLINE)
            return store_fail(st, "cannot start a write");
        store_sleep_ms(1 + (int)((unsigned)getpid() % 7) + (attempt % 10) * 2);
    }
}

/* BEGIN IMMEDIATE without waiting: 0, or -1 when another connection holds the write lock. */
static int store_try_begin(struct store *st)
{
    sqlite3_busy_timeout(st->db, 0);
    int rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return -1;
    if (st->n_touches)
        store_touch_apply(st);
    return 0;
}

static int store_commit(struct store *st)
{
    double start = util_now();
    for (;;) {
        int rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return 0;
        if ((rc & 0xff) != SQLITE_BUSY || util_now() - start > STORE_BUSY_DEADLINE) {
            store_fail(st, "cannot commit");
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        store_sleep_ms(5);
    }
}

/* Roll back after a failure; keeps the recorded error and returns -1. */
static int store_rollback(struct store *st)
{
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, i);
}

static void bind_count(sqlite3_stmt *s, int i, int64_t v)
{
    if (v >= 0)
        sqlite3_bind_int64(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

static void bind_seconds(sqlite3_stmt *s, int i, double v)
{
    if (v >= 0)
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

static char *col_str(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? xstrndup((const char *)t, (size_t)sqlite3_column_bytes(s, i)) : NULL;
}

static int64_t col_count(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i);
}

static double col_seconds(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, i);
}

/* ---------------------------------------------------------------- writer identity */

/* Start time (clock ticks since boot) of a process from /proc, 0 when unknown; *zombie is set
 * when the process has exited but was not reaped. */
static unsigned long long store_proc_start(long pid, int *zombie)
{
    char path[64], data[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, data, sizeof data - 1);
    close(fd);
    if (n <= 0)
        return 0;
    data[n] = '\0';
    char *p = strrchr(data, ')'); /* the command name may hold spaces and parentheses */
    if (!p)
        return 0;
    p++;
    unsigned long long start = 0;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (field == 3 && zombie)
            *zombie = *p == 'Z' || *p == 'X';
        if (field == 22)
            start = strtoull(p, NULL, 10);
        while (*p && *p != ' ')
            p++;
    }
    return start;
}

/* 1 when the process that wrote "pid:start" may still be running. */
static int store_writer_alive(const char *writer)
{
    if (!writer)
        return 0;
    char *end;
    long pid = strtol(writer, &end, 10);
    if (pid <= 0 || *end != ':')
        return 0;
    unsigned long long start = strtoull(end + 1, NULL, 10);
    int zombie = 0;
    unsigned long long now = store_proc_start(pid, &zombie);
    if (now)
        return !zombie && (start == 0 || now == start);
    if (store_proc_start((long)getpid(), NULL))
        return 0; /* /proc works and has no such process */
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* ---------------------------------------------------------------- case-insensitive matching */

enum needle_kind { NEEDLE_EXACT, NEEDLE_ASCII, NEEDLE_FOLD };

/* A search term prepared for repeated substring search. */
struct needle {
    char *text;      /* as given (NEEDLE_ASCII: lowered) */
    size_t len;
    int32_t *folded; /* NEEDLE_FOLD: lower-cased code points */
    size_t n_folded;
    size_t chars;    /* code points */
    enum needle_kind kind;
};

static int32_t store_fold(uint32_t cp)
{
    return utf8proc_tolower((utf8proc_int32_t)cp);
}

static void needle_init(struct needle *nd, const char *s, size_t len)
{
    memset(nd, 0, sizeof *nd);
    nd->text = xstrndup(s, len);
    nd->len = len;
    nd->folded = xmalloc((len + 1) * sizeof *nd->folded);
    int ascii = 1, cased = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += utf8_decode(s + i, len - i, &cp);
        int32_t f = store_fold(cp);
        if (cp >= 0x80)
            ascii = 0;
        if (f != (int32_t)cp || utf8proc_toupper((utf8proc_int32_t)cp) != (int32_t)cp)
            cased = 1;
        nd->folded[nd->n_folded++] = f;
    }
    nd->chars = nd->n_folded;
    if (!cased) {
        nd->kind = NEEDLE_EXACT;
    } else if (ascii) {
        nd->kind = NEEDLE_ASCII;
        for (size_t i = 0; i < len; i++)
            if (nd->text[i] >= 'A' && nd->text[i] <= 'Z')
                nd->text[i] = (char)(nd->text[i] - 'A' + 'a');
    } else {
        nd->kind = NEEDLE_FOLD;
    }
}

static void needle_free(struct needle *nd)
{
    free(nd->text);
    free(nd->folded);
}

static unsigned char ascii_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* First match of nd in hay[0..n): its offset, or -1. *mlen gets the matched byte length. */
static long needle_find(const struct needle *nd, const char *hay, size_t n, size_t *mlen)
{
    if (nd->len == 0)
        return -1;
    if (nd->kind == NEEDLE_EXACT) {
        const char *p = memmem(hay, n, nd->text, nd->len);
        if (!p)
            return -1;
        *mlen = nd->len;
        return (long)(p - hay);
    }
    if (nd->kind == NEEDLE_ASCII) {
        const unsigned char *h = (const unsigned char *)hay, *t = (const unsigned char *)nd->text;
        unsigned char c0 = t[0], c1 = (c0 >= 'a' && c0 <= 'z') ? (unsigned char)(c0 - 32) : c0;
        for (size_t i = 0; i + nd->len <= n; i++) {
            if (h[i] != c0 && h[i] != c1)
                continue;
            size_t j = 1;
            while (j < nd->len && ascii_lower(h[i + j]) == t[j])
                j++;
            if (j == nd->len) {
                *mlen = nd->len;
                return (long)i;
            }
        }
        return -1;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t step = utf8_decode(hay + i, n - i, &cp), k = i, j = 0;
        while (j < nd->n_folded && k < n) {
            uint32_t c2;
            size_t s2 = utf8_decode(hay + k, n - k, &c2);
            if (store_fold(c2) != nd->folded[j])
                break;
            k += s2;
            j++;
        }
        if (j == nd->n_folded) {
            *mlen = k - i;
            return (long)i;
        }
        i += step;
    }
    return -1;
}

static void needle_destroy(void *p)
{
    needle_free(p);
    free(p);
}

/* SQL function tt_contains(haystack, needle): 1 when needle occurs case-insensitively. */
static void store_sql_contains(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *hay = (const char *)sqlite3_value_text(argv[0]);
    size_t hn = (size_t)sqlite3_value_bytes(argv[0]);
    struct needle *nd = sqlite3_get_auxdata(ctx, 1);
    if (!nd) {
        const char *t = (const char *)sqlite3_value_text(argv[1]);
        if (!t) {
            sqlite3_result_int(ctx, 0);
            return;
        }
        nd = xmalloc(sizeof *nd);
        needle_init(nd, t, (size_t)sqlite3_value_bytes(argv[1]));
        sqlite3_set_auxdata(ctx, 1, nd, needle_destroy);
        nd = sqlite3_get_auxdata(ctx, 1);
        if (!nd) { /* SQLite could not keep it; it has been freed: match without caching */
            struct needle tmp;
            needle_init(&tmp, t, (size_t)sqlite3_value_bytes(argv[1]));
            size_t ml;
            sqlite3_result_int(ctx, hay && needle_find(&tmp, hay, hn, &ml) >= 0);
            needle_free(&tmp);
            return;
        }
    }
    size_t ml;
    sqlite3_result_int(ctx, hay && needle_find(nd, hay, hn, &ml) >= 0);
}

/* ---------------------------------------------------------------- schema */

/* v1: conversations, messages, summaries, quota, response cache. Frozen: change the schema
 * only by adding a step below (tests/unit/test_store.c keeps a copy to test migrations). */
static const char store_schema_v1[] =
    "PRAGMA application_id = 1953199213;\n" /* STORE_APP_ID */
    "CREATE TABLE conversations(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  title TEXT,\n"
    "  system_prompt TEXT,\n"
    "  model TEXT,\n"
    "  profile TEXT,\n"
    "  created INTEGER NOT NULL,\n"
    "  updated INTEGER NOT NULL);\n"
    "CREATE INDEX conversations_updated ON conversations(updated, id);\n"
    "CREATE TABLE messages(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  role TEXT NOT NULL CHECK(role IN ('system','user','assistant','tool')),\n"
    "  status TEXT NOT NULL DEFAULT 'complete' CHECK(status IN ('streaming','complete',\n"
    "    'cancelled','error','truncated','interrupted')),\n"
    "  created INTEGER NOT NULL,\n"
    "  model TEXT,\n"
    "  profile TEXT,\n"
    "  host TEXT,\n"
    "  finish_reason TEXT,\n"
    "  prompt_tokens INTEGER,\n"
    "  completion_tokens INTEGER,\n"
    "  total_tokens INTEGER,\n"
    "  ttft REAL,\n"
    "  total_time REAL,\n"
    "  tokens_per_s REAL,\n"
    "  dns_time REAL,\n"
    "  connect_time REAL,\n"
    "  tls_time REAL,\n"
    "  cached INTEGER NOT NULL DEFAULT 0,\n"
    "  error TEXT,\n"
    "  writer TEXT,\n"
    "  reasoning TEXT,\n"
    "  content TEXT NOT NULL DEFAULT '');\n"
    "CREATE INDEX messages_conversation ON messages(conversation_id, id);\n"
    "CREATE INDEX messages_created ON messages(created);\n"
    "CREATE INDEX messages_streaming ON messages(status) WHERE status = 'streaming';\n"
    "CREATE TABLE summaries(\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  first_message_id INTEGER NOT NULL,\n"
    "  last_message_id INTEGER NOT NULL,\n"
    "  model TEXT,\n"
    "  tokens INTEGER,\n"
    "  created INTEGER NOT NULL,\n"
    "  summary TEXT NOT NULL,\n"
    "  PRIMARY KEY(conversation_id, first_message_id, last_message_id));\n"
    "CREATE TABLE quota(\n"
    "  profile TEXT NOT NULL,\n"
    "  key_label TEXT NOT NULL,\n"
    "  limit_requests INTEGER,\n"
    "  remaining_requests INTEGER,\n"
    "  reset_requests REAL,\n"
    "  limit_tokens INTEGER,\n"
    "  remaining_tokens INTEGER,\n"
    "  reset_tokens REAL,\n"
    "  blocked_until REAL,\n"
    "  extra TEXT,\n"
    "  updated INTEGER NOT NULL,\n"
    "  PRIMARY KEY(profile, key_label)) WITHOUT ROWID;\n"
    "CREATE TABLE response_cache(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  key BLOB NOT NULL UNIQUE CHECK(length(key) = 32),\n"
    "  created INTEGER NOT NULL,\n"
    "  last_used INTEGER NOT NULL,\n"
    "  hits INTEGER NOT NULL DEFAULT 0,\n"
    "  size INTEGER NOT NULL,\n"
    "  model TEXT,\n"
    "  finish_reason TEXT,\n"
    "  prompt_tokens INTEGER,\n"
    "  completion_tokens INTEGER,\n"
    "  total_tokens INTEGER,\n"
    "  reasoning TEXT,\n"
    "  content TEXT NOT NULL);\n"
    "CREATE INDEX response_cache_lru ON response_cache(last_used, size);\n"
    "CREATE INDEX response_cache_created ON response_cache(created);\n"
    "CREATE TABLE cache_meta(\n"
    "  id INTEGER PRIMARY KEY CHECK(id = 1),\n"
    "  entries INTEGER NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  hits INTEGER NOT NULL);\n"
    "INSERT INTO cache_meta VALUES(1, 0, 0, 0);\n"
    "CREATE TRIGGER response_cache_ai AFTER INSERT ON response_cache BEGIN\n"
    "  UPDATE cache_meta SET entries = entries + 1, bytes = bytes + new.size WHERE id = 1;\n"
    "END;\n"
    "CREATE TRIGGER response_cache_ad AFTER DELETE ON response_cache BEGIN\n"
    "  UPDATE cache_meta SET entries = entries - 1, bytes = bytes - old.size WHERE id = 1;\n"
    "END;\n"
    "CREATE TRIGGER response_cache_au AFTER UPDATE OF size ON response_cache BEGIN\n"
    "  UPDATE cache_meta SET bytes = bytes - old.size + new.size WHERE id = 1;\n"
    "END;\n";

/* v2: trigram full-text index over message content. Answers still streaming are left out
 * (they are indexed once, when they finish) so that batch commits stay cheap. */
static const char store_schema_v2[] =
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content = 'messages',\n"
    "  content_rowid = 'id', tokenize = 'trigram');\n"
    "INSERT INTO messages_fts(rowid, content)\n"
    "  SELECT id, content FROM messages WHERE status <> 'streaming';\n"
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages\n"
    "WHEN new.status <> 'streaming' BEGIN\n"
    "  INSERT INTO messages_fts(rowid, content) VALUES(new.id, new.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages\n"
    "WHEN old.status <> 'streaming' BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, "
    "old.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, status ON messages\n"
    "WHEN old.content IS NOT new.content\n"
    "  OR (old.status = 'streaming') <> (new.status = 'streaming') BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)\n"
    "    SELECT 'delete', old.id, old.content WHERE old.status <> 'streaming';\n"
    "  INSERT INTO messages_fts(rowid, content)\n"
    "    SELECT new.id, new.content WHERE new.status <> 'streaming';\n"
    "END;\n";

/* Trigger bodies that several schema steps share (they expand to the same SQL text). */
/* Index the new row in the trigram index, or queue it in fts_pending when it is long (v3). */
#define STORE_TRIG_FTS_INDEX_NEW                                                               \
    "  INSERT INTO messages_fts(rowid, content) SELECT new.id, new.content\n"                   \
    "    WHERE length(CAST(new.content AS BLOB)) <= 65536;\n"                                   \
    "  INSERT OR IGNORE INTO fts_pending(message_id) SELECT new.id\n"                           \
    "    WHERE length(CAST(new.content AS BLOB)) > 65536;\n"
/* Take the row that holds new.id (about to be replaced) out of the trigram index and queue it
 * for the next search (v5). */
#define STORE_TRIG_FTS_TAKE_OUT_NEW_ID                                                         \
    "  INSERT INTO messages_fts(messages_fts, rowid, content)\n"                                \
    "    SELECT 'delete', id, content FROM messages WHERE id = new.id;\n"                       \
    "  INSERT OR IGNORE INTO fts_pending(message_id) VALUES(new.id);\n"
/* Queue the text of the row that holds new.id (about to be replaced) for the word index
 * (v5). */
#define STORE_TRIG_WORDS_QUEUE_NEW_ID                                                          \
    "  INSERT INTO words_queue(message_id, old) SELECT id, content FROM messages\n"             \
    "    WHERE id = new.id;\n"
/* Queue the old text out of the word index and the row under its new id in (v5). */
#define STORE_TRIG_WORDS_REQUEUE                                                               \
    "  INSERT INTO words_queue(message_id, old) VALUES(old.id, old.content);\n"                 \
    "  INSERT INTO words_queue(message_id) VALUES(new.id);\n"

/* v3: a long message is indexed lazily. A message over 64 KiB that is inserted finished, or an
 * answer over 64 KiB that finishes, is queued in fts_pending, and the next search indexes the
 * queue first (store_fts_catch_up); shorter ones (nearly all) are indexed at once, as in v2.
 * Finishing a very long answer then costs one small insert instead of trigram-indexing
 * megabytes while the user waits (measured: 0.12 s and 6 MB for a 1.9 MB answer). Rows in the
 * queue are not in the index yet, so the delete and update triggers leave the index alone for
 * them. */
static const char store_schema_v3[] =
    "CREATE TABLE fts_pending(message_id INTEGER PRIMARY KEY);\n"
    "DROP TRIGGER messages_fts_ai;\n"
    "DROP TRIGGER messages_fts_ad;\n"
    "DROP TRIGGER messages_fts_au;\n"
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages\n"
    "WHEN new.status <> 'streaming' BEGIN\n"
    STORE_TRIG_FTS_INDEX_NEW
    "END;\n"
    "CREATE TRIGGER messages_fts_done AFTER UPDATE OF status ON messages\n"
    "WHEN old.status = 'streaming' AND new.status <> 'streaming' BEGIN\n"
    STORE_TRIG_FTS_INDEX_NEW
    "END;\n"
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages\n"
    "WHEN old.status <> 'streaming' AND old.id NOT IN (SELECT message_id FROM fts_pending)\n"
    "BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, "
    "old.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_pending_ad AFTER DELETE ON messages BEGIN\n"
    "  DELETE FROM fts_pending WHERE message_id = old.id;\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages\n"
    "WHEN old.status <> 'streaming' AND new.status <> 'streaming'\n"
    "  AND old.content IS NOT new.content\n"
    "  AND old.id NOT IN (SELECT message_id FROM fts_pending) BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, "
    "old.content);\n"
    "  INSERT INTO messages_fts(rowid, content) VALUES(new.id, new.content);\n"
    "END;\n";

/* v4: text of an answer still streaming is committed as parts (one row per batch), and folded
 * into messages.content once, when the answer ends (or when recovery finds it interrupted).
 * Appending to messages.content directly re-wrote the whole growing answer at every batch:
 * quadratic in the answer's length (measured: 3,585 page writes for a 1.9 MB answer). */
static const char store_schema_v4[] =
    "CREATE TABLE message_parts(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,\n"
    "  reasoning INTEGER NOT NULL,\n"
    "  text TEXT NOT NULL);\n"
    "CREATE INDEX message_parts_message ON message_parts(message_id, id);\n";

/* v5: the word index (fts_words.h), for fast searches of whole words of 5-16 characters.
 * Its tokenizer is tokterm's own, so no trigger may touch the index: any other program that
 * writes the messages (the sqlite3 shell) would fail with "no such tokenizer". The triggers
 * queue the changes instead, in plain SQL, and a search applies the queue first
 * (store_words_catch_up): a row to index, or the text of a row as it was before a change or a
 * delete, which is what the index holds for it. A search uses the word index only when the
 * queue is empty, so the index is never behind. Upgrading queues every message; the searches
 * index them, STORE_WORDS_BATCH at a time. A message with a word of more than FTS_WORDS_LONG
 * characters is listed in words_long instead of indexed, and searched through the trigram
 * index. An INSERT OR REPLACE (no delete trigger fires for the row it replaces) and a change
 * of id (also onto an existing id, with OR REPLACE) are queued as deletes and an insert. */
static const char store_schema_v5[] =
    "CREATE VIRTUAL TABLE messages_words USING fts5(content, content = 'messages',\n"
    "  content_rowid = 'id', tokenize = 'tt_words');\n"
    "CREATE TABLE words_queue(seq INTEGER PRIMARY KEY, message_id INTEGER NOT NULL, old TEXT);\n"
    "CREATE TABLE words_long(message_id INTEGER PRIMARY KEY);\n"
    "INSERT INTO words_queue(message_id) SELECT id FROM messages WHERE status <> 'streaming';\n"
    /* the trigram index: a row replaced by INSERT OR REPLACE (no delete trigger fires for it)
     * or by UPDATE OR REPLACE of an id, and a change of id, left its old text in the index
     * (a later delete then corrupted it). Such a row is taken out and queued in fts_pending
     * (the next search indexes it as it is then); the insert trigger leaves a queued id to
     * the queue. */
    "DROP TRIGGER messages_fts_ai;\n"
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages\n"
    "WHEN new.status <> 'streaming' AND new.id NOT IN (SELECT message_id FROM fts_pending)\n"
    "BEGIN\n"
    STORE_TRIG_FTS_INDEX_NEW
    "END;\n"
    "DROP TRIGGER messages_fts_done;\n"
    "CREATE TRIGGER messages_fts_done AFTER UPDATE OF status ON messages\n"
    "WHEN old.status = 'streaming' AND new.status <> 'streaming'\n"
    "  AND new.id NOT IN (SELECT message_id FROM fts_pending) BEGIN\n"
    STORE_TRIG_FTS_INDEX_NEW
    "END;\n"
    "DROP TRIGGER messages_fts_au;\n"
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages\n"
    "WHEN old.status <> 'streaming' AND new.status <> 'streaming'\n"
    "  AND old.content IS NOT new.content\n"
    "  AND old.id NOT IN (SELECT message_id FROM fts_pending) BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, "
    "old.content);\n"
    "  INSERT INTO messages_fts(rowid, content) SELECT new.id, new.content\n"
    "    WHERE new.id NOT IN (SELECT message_id FROM fts_pending);\n"
    "END;\n"
    "CREATE TRIGGER messages_fts_bi BEFORE INSERT ON messages\n"
    "WHEN EXISTS (SELECT 1 FROM messages WHERE id = new.id AND status <> 'streaming'\n"
    "  AND id NOT IN (SELECT message_id FROM fts_pending)) BEGIN\n"
    STORE_TRIG_FTS_TAKE_OUT_NEW_ID
    "END;\n"
    "CREATE TRIGGER messages_fts_bu BEFORE UPDATE OF id ON messages\n"
    "WHEN old.id <> new.id AND EXISTS (SELECT 1 FROM messages WHERE id = new.id\n"
    "  AND status <> 'streaming' AND id NOT IN (SELECT message_id FROM fts_pending)) BEGIN\n"
    STORE_TRIG_FTS_TAKE_OUT_NEW_ID
    "END;\n"
    "CREATE TRIGGER messages_fts_id AFTER UPDATE OF id ON messages\n"
    "WHEN old.id <> new.id AND old.content IS new.content BEGIN\n"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)\n"
    "    SELECT 'delete', old.id, old.content WHERE old.status <> 'streaming'\n"
    "    AND old.id NOT IN (SELECT message_id FROM fts_pending);\n"
    "  DELETE FROM fts_pending WHERE message_id = old.id;\n"
    "  INSERT OR IGNORE INTO fts_pending(message_id) SELECT new.id WHERE new.status <> "
    "'streaming';\n"
    "END;\n"
    "CREATE TRIGGER messages_words_bi BEFORE INSERT ON messages\n"
    "WHEN EXISTS (SELECT 1 FROM messages WHERE id = new.id AND status <> 'streaming')\n"
    "BEGIN\n"
    STORE_TRIG_WORDS_QUEUE_NEW_ID
    "END;\n"
    "CREATE TRIGGER messages_words_bu BEFORE UPDATE OF id ON messages\n"
    "WHEN old.id <> new.id\n"
    "  AND EXISTS (SELECT 1 FROM messages WHERE id = new.id AND status <> 'streaming') BEGIN\n"
    STORE_TRIG_WORDS_QUEUE_NEW_ID
    "END;\n"
    "CREATE TRIGGER messages_words_id AFTER UPDATE OF id ON messages\n"
    "WHEN old.id <> new.id AND old.status <> 'streaming' BEGIN\n"
    STORE_TRIG_WORDS_REQUEUE
    "END;\n"
    "CREATE TRIGGER messages_words_ai AFTER INSERT ON messages\n"
    "WHEN new.status <> 'streaming' BEGIN\n"
    "  INSERT INTO words_queue(message_id) VALUES(new.id);\n"
    "END;\n"
    "CREATE TRIGGER messages_words_done AFTER UPDATE OF status ON messages\n"
    "WHEN old.status = 'streaming' AND new.status <> 'streaming' BEGIN\n"
    "  INSERT INTO words_queue(message_id) VALUES(new.id);\n"
    "END;\n"
    "CREATE TRIGGER messages_words_ad AFTER DELETE ON messages\n"
    "WHEN old.status <> 'streaming' BEGIN\n"
    "  INSERT INTO words_queue(message_id, old) VALUES(old.id, old.content);\n"
    "END;\n"
    "CREATE TRIGGER messages_words_au AFTER UPDATE OF content ON messages\n"
    "WHEN old.status <> 'streaming' AND new.status <> 'streaming'\n"
    "  AND old.content IS NOT new.content BEGIN\n"
    STORE_TRIG_WORDS_REQUEUE
    "END;\n";

/* Migration steps: store_migrations[v] turns schema v-1 into v. Add v6 here. */
static const char *const store_migrations[STORE_SCHEMA_VERSION + 1] = {
    NULL,
    store_schema_v1,
    store_schema_v2,
    store_schema_v3,
    store_schema_v4,
    store_schema_v5,
};

static int store_pragma_int(struct store *st, const char *sql, int *out)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = store_step(st, s);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(s, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    return rc == SQLITE_OK || rc == SQLITE_DONE ? 0 : -1;
}

/* Bring the schema to STORE_SCHEMA_VERSION, one step per version, in one write transaction
 * (re-checking the version inside it: another process may have just migrated). */
static int store_migrate(struct store *st, int *from)
{
    int v = 0;
    if (store_pragma_int(st, "PRAGMA user_version", &v) != 0)
        return store_fail(st, "cannot read the database");
    *from = v;
    if (v == STORE_SCHEMA_VERSION)
        goto check_app;
    if (v > STORE_SCHEMA_VERSION) {
        store_set_err(st,
                      "%s was written by a newer tokterm (schema version %d; this one knows up to "
                      "%d): upgrade tokterm",
                      st->path, v, STORE_SCHEMA_VERSION);
        return -1;
    }
    if (store_begin(st) != 0)
        return -1;
    if (store_pragma_int(st, "PRAGMA user_version", &v) != 0)
        return store_fail(st, "cannot read the database"), store_rollback(st);
    *from = v;
    if (v == 0) {
        int tables = 0;
        if (store_pragma_int(st, "SELECT count(*) FROM sqlite_schema", &tables) != 0)
            return store_fail(st, "cannot read the database"), store_rollback(st);
        if (tables > 0) {
            store_set_err(st, "%s is an SQLite database of another program, not tokterm's",
                          st->path);
            return store_rollback(st);
        }
    }
    for (int next = v + 1; next <= STORE_SCHEMA_VERSION; next++) {
        char what[64];
        snprintf(what, sizeof what, "cannot upgrade the database to schema version %d", next);
        if (store_exec(st, store_migrations[next], what) != 0)
            return store_rollback(st);
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
    if (store_exec(st, sql, "cannot record the schema version") != 0)
        return store_rollback(st);
    if (store_commit(st) != 0)
        return -1;
check_app:;
    int app = 0;
    if (store_pragma_int(st, "PRAGMA application_id", &app) != 0)
        return store_fail(st, "cannot read the database");
    if (app != STORE_APP_ID) {
        store_set_err(st, "%s is an SQLite database of another program, not tokterm's", st->path);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- open / close */

/* Tighten a file's mode to 0600; returns the old mode when it was looser, else 0. */
static unsigned store_fix_mode(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077) == 0)
        return 0;
    if (chmod(path, 0600) != 0)
        return 0;
    return (unsigned)(sb.st_mode & 07777);
}

/* Create the file (0600) and its directory (0700) when missing and check it is a regular file
 * we can write. 0 or -1 with *err set. */
static int store_prepare_file(const char *path, struct store_open_info *info, char **err)
{
    char *dir = xstrdup(path), *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        struct stat dsb;
        if (stat(dir, &dsb) != 0 && util_mkdir_p(dir, 0700) != 0) {
            *err = xasprintf("cannot create the directory %s: %s", dir, strerror(errno));
            free(dir);
            return -1;
        }
    }
    free(dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        info->created = 1;
        fchmod(fd, 0600); /* the umask may have removed our own read/write bits */
        close(fd);
        return 0;
    }
    if (errno != EEXIST) {
        *err = xasprintf("cannot create the database %s: %s%s", path, strerror(errno),
                         errno == EACCES || errno == EROFS ? " (read-only location)" : "");
        return -1;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        *err = xasprintf("cannot open the database %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        *err = xasprintf("cannot open the database %s: not a regular file", path);
        return -1;
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        *err = xasprintf("cannot open the database %s for writing: %s%s", path, strerror(errno),
                         errno == EACCES || errno == EROFS ? " (the file is read-only)" : "");
        return -1;
    }
    close(fd);
    return 0;
}

/* Tighten the modes of the database and its WAL files once we know the file is ours. */
static void store_fix_modes(const char *path, struct store_open_info *info)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < TT_ARRAY_LEN(suffixes); i++) {
        char *p = xasprintf("%s%s", path, suffixes[i]);
        unsigned old = store_fix_mode(p); /* SQLite gives the WAL files the main file's mode */
        if (old && !info->mode_fixed) {
            info->old_mode = old;
            info->mode_fixed = 1;
        }
        free(p);
    }
}

/* ---------------------------------------------------------------- background checkpoint */

#define TT_XSTR(x) #x
#define TT_STR(x) TT_XSTR(x)
/* Commits checkpoint the WAL themselves only past this many pages (16 MB): below it the copy
 * is left to store_checkpoint_async, off the path of a streaming answer. */
#define STORE_CKPT_PAGES 4000
/* The page cache: 2 MiB (PRAGMA cache_size in KiB, negative); an answer of STORE_BIG_ANSWER
 * bytes or more is written through STORE_BIG_CACHE_PAGES pages (store_message_finish). */
#define STORE_CACHE_KIB -2048
#define STORE_BIG_ANSWER (256 * 1024)
#define STORE_BIG_CACHE_PAGES 50
#define STORE_CKPT_ASYNC_BYTES ((off_t)1 << 20) /* a WAL this large is worth a checkpoint */

/* Copy the WAL into the database on a connection of its own (PRAGMA wal_checkpoint(PASSIVE):
 * never waits for, nor blocks, this process's writes). */
struct store_ckpt_arg {
    char *path;
    int *done;
};

static void *store_ckpt_main(void *arg)
{
    struct store_ckpt_arg *a = arg;
    char *path = a->path;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
        sqlite3_exec(db, "PRAGMA synchronous = NORMAL; PRAGMA wal_checkpoint(PASSIVE)", NULL,
                     NULL, NULL);
    }
    sqlite3_close(db);
    free(path);
    __atomic_store_n(a->done, 1, __ATOMIC_RELEASE);
    free(a);
    return NULL;
}

void store_checkpoint_async(struct store *st)
{
    if (!st)
        return;
    if (st->ckpt_started) {
        if (!__atomic_load_n(&st->ckpt_done, __ATOMIC_ACQUIRE))
            return; /* the last one is still copying */
        pthread_join(st->ckpt, NULL);
        st->ckpt_started = 0;
    }
    char *wal = xasprintf("%s-wal", st->path);
    struct stat sb;
    int big = stat(wal, &sb) == 0 && sb.st_size >= STORE_CKPT_ASYNC_BYTES;
    free(wal);
    if (!big)
        return;
    struct store_ckpt_arg *a = xcalloc(1, sizeof *a);
    a->path = xstrdup(st->path);
    a->done = &st->ckpt_done;
    st->ckpt_done = 0;
    if (pthread_create(&st->ckpt, NULL, store_ckpt_main, a) == 0) {
        st->ckpt_started = 1;
    } else {
        free(a->path);
        free(a);
    }
}

static void store_free(struct store *st)
{
    if (st->ckpt_started)
        pthread_join(st->ckpt, NULL);
    for (size_t i = 0; i < st->n_stmts; i++)
        sqlite3_finalize(st->stmts[i].stmt);
    sqlite3_close(st->db);
    while (st->streams) {
        struct store_stream *s = st->streams;
        st->streams = s->next;
        buf_free(&s->text);
        buf_free(&s->reasoning);
        free(s);
    }
    free(st->touches);
    free(st->path);
    free(st->err);
    free(st);
}

struct store *store_open(const char *path, struct store_open_info *info, char **err)
{
    struct store_open_info dummy;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    *err = NULL;
    if (!path || !*path) {
        *err = xstrdup("no database path given");
        return NULL;
    }
    if (sqlite_dl_load(err) != 0)
        return NULL;
    if (store_prepare_file(path, info, err) != 0)
        return NULL;

    struct store *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(path);
    st->cache_ttl = STORE_CACHE_DEFAULT_TTL;
    st->cache_max = STORE_CACHE_DEFAULT_MAX;
    snprintf(st->writer, sizeof st->writer, "%ld:%llu", (long)getpid(),
             store_proc_start((long)getpid(), NULL));
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        *err = xasprintf("cannot open the database %s: %s%s", path,
                         st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc), store_hint(rc));
        store_free(st);
        return NULL;
    }
    /* No checkpoint when the last connection closes: a script that runs tokterm in a loop would
     * otherwise copy the WAL into the database and fsync at every exit. The WAL is copied by
     * store_checkpoint_async while a request is on the wire, or by a commit once it passes
     * STORE_CKPT_PAGES (wal_autocheckpoint). */
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (sqlite3_db_readonly(st->db, "main") == 1) {
        *err = xasprintf("the database %s is read-only: tokterm needs to write to it", path);
        store_free(st);
        return NULL;
    }

    /* The first read tells whether this is an SQLite file at all. */
    int v = 0;
    if (store_pragma_int(st, "PRAGMA user_version", &v) != 0) {
        rc = sqlite3_extended_errcode(st->db);
        if ((rc & 0xff) == SQLITE_NOTADB)
            *err = xasprintf("%s is not a tokterm database (not an SQLite file)", path);
        else
            *err = xasprintf("cannot read the database %s: %s%s", path, sqlite3_errmsg(st->db),
                             store_hint(rc));
        store_free(st);
        return NULL;
    }
    /* Switching to WAL needs a moment of exclusive access: retry while others hold it. */
    double start = util_now();
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            break;
        if ((rc & 0xff) != SQLITE_BUSY || util_now() - start > STORE_BUSY_DEADLINE) {
            store_fail(st, "cannot switch the database to WAL mode");
            *err = xasprintf("%s: %s", path, st->err);
            store_free(st);
            return NULL;
        }
        store_sleep_ms(2 + attempt % 20);
    }
    if (store_exec(st,
                   "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
                   "PRAGMA secure_delete = FAST;"
                   "PRAGMA temp_store = MEMORY; PRAGMA cache_size = " TT_STR(STORE_CACHE_KIB) "; "
                   "PRAGMA wal_autocheckpoint = " TT_STR(STORE_CKPT_PAGES),
                   "cannot configure the database") != 0 ||
        sqlite3_create_function(st->db, "tt_contains", 2,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                store_sql_contains, NULL, NULL) != SQLITE_OK ||
        (!(st->words = fts_words_register(st->db)) &&
         (store_set_err(st, "this SQLite has no FTS5 full-text search (tokterm needs it)"), 1)) ||
        store_migrate(st, &info->from_version) != 0) {
        if (!st->err)
            store_fail(st, "cannot set up the database");
        *err = xstrdup(st->err);
        store_free(st);
        return NULL;
    }
    info->version = STORE_SCHEMA_VERSION;
    store_fix_modes(path, info);
    int n = store_recover(st);
    if (n < 0) {
        *err = xstrdup(st->err);
        store_free(st);
        return NULL;
    }
    info->recovered = n;
    st->last_commit = store_mono(st);
    return st;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    while (st->streams) {
        int64_t id = st->streams->id;
        if (store_message_finish(st, id, STORE_INTERRUPTED, NULL, NULL, NULL, NULL) != 0 &&
            st->streams && st->streams->id == id) {
            struct store_stream *s = st->streams; /* could not save: drop it */
            st->streams = s->next;
            buf_free(&s->text);
            buf_free(&s->reasoning);
            free(s);
        }
    }
    if (st->n_touches && store_begin(st) == 0) /* store_begin applies them */
        store_commit(st);
    store_free(st);
}

const char *store_error(const struct store *st)
{
    return st && st->err ? st->err : "no error";
}

void store_set_clock(struct store *st, double (*mono)(void *), int64_t (*epoch)(void *), void *ud)
{
    st->mono = mono;
    st->epoch = epoch;
    st->clock_ud = ud;
    st->last_commit = store_mono(st);
}

int store_schema_version(struct store *st)
{
    int v = -1;
    store_pragma_int(st, "PRAGMA user_version", &v);
    return v;
}

const char *store_status_name(enum store_status s)
{
    return (unsigned)s < TT_ARRAY_LEN(status_names) ? status_names[s] : "?";
}

int store_status_parse(const char *name)
{
    for (size_t i = 0; name && i < TT_ARRAY_LEN(status_names); i++)
        if (strcmp(name, status_names[i]) == 0)
            return (int)i;
    return -1;
}

struct store_stream;
struct store_fin;
static int store_parts_fold(struct store *st, int64_t id, const struct store_stream *s,
                            const struct store_fin *fin);

int store_recover(struct store *st)
{
    static const char q_list[] = "SELECT id, writer FROM messages WHERE status = 'streaming'";
    static const char q_mark[] = "UPDATE messages SET status = 'interrupted', writer = NULL "
                                 "WHERE id = ?1 AND status = 'streaming'";
    /* Find candidates without a write lock: usually there are none. */
    sqlite3_stmt *s = store_prep(st, q_list);
    if (!s)
        return -1;
    int64_t *dead = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        if (store_writer_alive((const char *)sqlite3_column_text(s, 1)))
            continue;
        if (n == cap)
            dead = xrealloc(dead, (cap = cap ? cap * 2 : 8) * sizeof *dead);
        dead[n++] = sqlite3_column_int64(s, 0);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE) {
        free(dead);
        return store_fail(st, "cannot look for interrupted answers");
    }
    if (n == 0)
        return 0;
    int changed = 0;
    if (store_begin(st) != 0) {
        free(dead);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (store_parts_fold(st, dead[i], NULL, NULL) != 0) {
            free(dead);
            return store_rollback(st);
        }
    sqlite3_stmt *u = store_prep(st, q_mark);
    for (size_t i = 0; u && i < n; i++) {
        sqlite3_bind_int64(u, 1, dead[i]);
        rc = sqlite3_step(u);
        store_done(st, u);
        if (rc != SQLITE_DONE) {
            free(dead);
            store_fail(st, "cannot mark interrupted answers");
            return store_rollback(st);
        }
        changed += sqlite3_changes(st->db);
    }
    free(dead);
    if (!u)
        return store_rollback(st);
    if (store_commit(st) != 0)
        return -1;
    return changed;
}

/* ---------------------------------------------------------------- conversations */

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

int64_t store_conversation_new(struct store *st, const char *title, const char *system_prompt,
                               const char *model, const char *profile)
{
    static const char q[] = "INSERT INTO conversations(title, system_prompt, model, profile, "
                            "created, updated) VALUES(?1, ?2, ?3, ?4, ?5, ?5)";
    if (store_begin(st) != 0)
        return -1;
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return store_rollback(st);
    bind_text(s, 1, title && *title ? title : NULL);
    bind_text(s, 2, system_prompt);
    bind_text(s, 3, model);
    bind_text(s, 4, profile);
    sqlite3_bind_int64(s, 5, store_epoch(st));
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

struct store_rename_arg {
    const char *title;
    int64_t now;
};

static void store_bind_rename(sqlite3_stmt *s, const void *p)
{
    const struct store_rename_arg *a = p;
    bind_text(s, 2, a->title);
    sqlite3_bind_int64(s, 3, a->now);
}

int store_conversation_rename(struct store *st, int64_t id, const char *title)
{
    static const char q[] = "UPDATE conversations SET title = ?2, updated = ?3 WHERE id = ?1";
    struct store_rename_arg a = {title && *title ? title : NULL, store_epoch(st)};
    return store_conv_write(st, q, id, "cannot rename the conversation", store_bind_rename, &a);
}

struct store_update_arg {
    const char *system_prompt, *model, *profile;
    int64_t now;
};

static void store_bind_update(sqlite3_stmt *s, const void *p)
{
    const struct store_update_arg *a = p;
    bind_text(s, 2, a->system_prompt);
    bind_text(s, 3, a->model);
    bind_text(s, 4, a->profile);
    sqlite3_bind_int64(s, 5, a->now);
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

int store_conversation_delete(struct store *st, int64_t id)
{
    /* Streaming writes run with secure_delete = FAST (Debian's default ON zeroes every page a
     * batch frees: 6 page writes per byte of a long answer). What the user deletes is zeroed. */
    static const char q[] = "DELETE FROM conversations WHERE id = ?1";
    store_exec(st, "PRAGMA secure_delete = ON", "cannot delete the conversation");
    int rc = store_conv_write(st, q, id, "cannot delete the conversation", NULL, NULL);
    store_exec(st, "PRAGMA secure_delete = FAST", "cannot delete the conversation");
    return rc;
}

/* Columns of a conversation row: id, title, system_prompt, model, profile, created, updated,
 * message count. */
static void store_conv_row(sqlite3_stmt *s, struct store_conversation *c)
{
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(s, 0);
    c->title = col_str(s, 1);
    c->system_prompt = col_str(s, 2);
    c->model = col_str(s, 3);
    c->profile = col_str(s, 4);
    c->created = sqlite3_column_int64(s, 5);
    c->updated = sqlite3_column_int64(s, 6);
    c->message_count = sqlite3_column_int64(s, 7);
}

#define STORE_MSG_COLS                                                                       \
    "id, conversation_id, role, status, created, model, profile, host, finish_reason, "     \
    "prompt_tokens, completion_tokens, total_tokens, ttft, total_time, tokens_per_s, "       \
    "dns_time, connect_time, tls_time, cached, error, reasoning, content"

static void store_msg_row(sqlite3_stmt *s, struct store_message *m)
{
    m->id = sqlite3_column_int64(s, 0);
    m->conversation_id = sqlite3_column_int64(s, 1);
    m->role = col_str(s, 2);
    int status = store_status_parse((const char *)sqlite3_column_text(s, 3));
    m->status = status < 0 ? STORE_ERROR : (enum store_status)status;
    m->created = sqlite3_column_int64(s, 4);
    m->model = col_str(s, 5);
    m->profile = col_str(s, 6);
    m->host = col_str(s, 7);
    m->finish_reason = col_str(s, 8);
    m->usage.prompt_tokens = col_count(s, 9);
    m->usage.completion_tokens = col_count(s, 10);
    m->usage.total_tokens = col_count(s, 11);
    m->timings.ttft = col_seconds(s, 12);
    m->timings.total = col_seconds(s, 13);
    m->timings.tokens_per_s = col_seconds(s, 14);
    m->timings.dns = col_seconds(s, 15);
    m->timings.connect = col_seconds(s, 16);
    m->timings.tls = col_seconds(s, 17);
    m->cached = sqlite3_column_int(s, 18) != 0;
    m->error = col_str(s, 19);
    m->reasoning = col_str(s, 20);
    m->content = col_str(s, 21);
    m->content_len = (size_t)sqlite3_column_bytes(s, 21);
    if (!m->content)
        m->content = xstrdup("");
}

/* An answer still streaming (in another process): add the parts committed so far to its text.
 * Returns 0 or -1. */
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

int store_conversation_load(struct store *st, int64_t id, struct store_conversation **out)
{
    static const char q_conv[] =
        "SELECT id, title, system_prompt, model, profile, created, updated, 0 "
        "FROM conversations WHERE id = ?1";
    static const char q_msgs[] =
        "SELECT " STORE_MSG_COLS " FROM messages WHERE conversation_id = ?1 ORDER BY id";
    *out = NULL;
    /* One read transaction so that the conversation and its messages agree. */
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
    struct store_conversation *c = xmalloc(sizeof *c);
    store_conv_row(s, c);
    store_done(st, s);
    s = store_prep(st, q_msgs);
    if (!s) {
        store_conversation_free(c);
        return store_rollback(st);
    }
    sqlite3_bind_int64(s, 1, id);
    size_t cap = 0;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        if (c->n_messages == cap)
            c->messages = xrealloc(c->messages, (cap = cap ? cap * 2 : 16) * sizeof *c->messages);
        store_msg_row(s, &c->messages[c->n_messages++]);
    }
    store_done(st, s);
    for (size_t i = 0; rc == SQLITE_DONE && i < c->n_messages; i++)
        if (c->messages[i].status == STORE_STREAMING && store_msg_add_parts(st, &c->messages[i]))
            rc = SQLITE_ERROR;
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

int store_conversation_list(struct store *st, int limit, struct store_conversation **out,
                            size_t *n)
{
    static const char q[] =
        "SELECT c.id, c.title, c.system_prompt, c.model, c.profile, c.created, c.updated, "
        "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id) "
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
        if (*n == cap)
            *out = xrealloc(*out, (cap = cap ? cap * 2 : 16) * sizeof **out);
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
        if (*n == cap)
            *ids = xrealloc(*ids, (cap = cap ? cap * 2 : 64) * sizeof **ids);
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
    free(m->role);
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

/* ---------------------------------------------------------------- messages */

/* Insert a message row and touch its conversation, inside the caller's transaction. title is
 * set on an untitled conversation. Returns the id, or -1 (STORE_NOT_FOUND-style message). */
static int64_t store_msg_insert(struct store *st, int64_t conv, const char *role,
                                const char *content, size_t len, const struct store_msg_info *in,
                                const char *status, const char *writer, const char *title)
{
    static const char q_touch[] =
        "UPDATE conversations SET updated = ?2, title = CASE WHEN title IS NULL OR title = '' "
        "THEN ?3 ELSE title END WHERE id = ?1";
    static const char q_ins[] =
        "INSERT INTO messages(conversation_id, role, status, created, model, profile, host, "
        "cached, writer, content) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    int64_t now = store_epoch(st);
    sqlite3_stmt *s = store_prep(st, q_touch);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    sqlite3_bind_int64(s, 2, now);
    bind_text(s, 3, title);
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot save the message");
    if (sqlite3_changes(st->db) == 0) {
        store_set_err(st, "cannot save the message: no conversation %lld", (long long)conv);
        return -1;
    }
    if (!(s = store_prep(st, q_ins)))
        return -1;
    sqlite3_bind_int64(s, 1, conv);
    bind_text(s, 2, role);
    bind_text(s, 3, status);
    sqlite3_bind_int64(s, 4, now);
    bind_text(s, 5, in ? in->model : NULL);
    bind_text(s, 6, in ? in->profile : NULL);
    bind_text(s, 7, in ? in->host : NULL);
    sqlite3_bind_int(s, 8, in && in->cached);
    bind_text(s, 9, writer);
    sqlite3_bind_text(s, 10, content ? content : "", content ? (int)len : 0, SQLITE_STATIC);
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
    if (id < 0)
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
            buf_free(&s->text);
            buf_free(&s->reasoning);
            free(s);
            return;
        }
}

/* Write one stream's buffered text inside the caller's transaction. */
/* Commit the buffered text of a streaming answer as new parts (no read of what is saved). */
static int store_stream_write(struct store *st, struct store_stream *s)
{
    static const char q[] = "INSERT INTO message_parts(message_id, reasoning, text) "
                            "VALUES(?1, ?2, ?3)";
    if (!s->text.len && !s->has_reasoning)
        return 0;
    if (s->text.len > INT32_MAX || s->reasoning.len > INT32_MAX) {
        store_set_err(st, "cannot save the answer: too much text in one batch");
        return -1;
    }
    const struct buf *parts[2] = {&s->text, &s->reasoning};
    for (int r = 0; r < 2; r++) {
        if (r == 0 ? !s->text.len : !s->has_reasoning)
            continue;
        sqlite3_stmt *u = store_prep(st, q);
        if (!u)
            return -1;
        sqlite3_bind_int64(u, 1, s->id);
        sqlite3_bind_int(u, 2, r);
        sqlite3_bind_text(u, 3, buf_str(parts[r]), (int)parts[r]->len, SQLITE_STATIC);
        int rc = sqlite3_step(u);
        store_done(st, u);
        if (rc != SQLITE_DONE)
            return store_fail(st, "cannot save the answer");
    }
    return 0;
}

/* How an answer ended: what store_message_finish writes with the folded text. */
struct store_fin {
    enum store_status status;
    const char *finish_reason, *error;
    const struct store_usage *usage;
    const struct store_timings *timings;
};

/* Fold the saved parts of answer id, then the buffered text of s (may be NULL), into
 * messages.content / reasoning, and drop the parts. With fin, the same UPDATE also writes how
 * the answer ended: a long answer's row (its overflow pages) is written once, not twice.
 * Inside a write transaction. Returns 0, -1, or STORE_NOT_FOUND (fin given, no such row). */
static int store_parts_fold(struct store *st, int64_t id, const struct store_stream *s,
                            const struct store_fin *fin)
{
    static const char q_read[] = "SELECT reasoning, text FROM message_parts "
                                 "WHERE message_id = ?1 ORDER BY id";
#define STORE_FOLD_SET                                                                    \
    "UPDATE messages SET content = CASE WHEN ?2 IS NULL THEN content WHEN content = '' "    \
    "THEN ?2 ELSE content || ?2 END, "                                                     \
    "reasoning = CASE WHEN ?3 IS NULL THEN reasoning WHEN reasoning IS NULL THEN ?3 "       \
    "ELSE reasoning || ?3 END"
    static const char q_set[] = STORE_FOLD_SET " WHERE id = ?1";
#define STORE_FIN_SET                                                                     \
    ", status = ?4, finish_reason = ?5, prompt_tokens = ?6, completion_tokens = ?7, "     \
    "total_tokens = ?8, ttft = ?9, total_time = ?10, tokens_per_s = ?11, dns_time = ?12, " \
    "connect_time = ?13, tls_time = ?14, error = ?15, writer = NULL WHERE id = ?1"
    static const char q_fin[] = STORE_FOLD_SET STORE_FIN_SET;
    /* The whole answer in one piece (no part committed while it streamed, as with any answer
     * shorter than a batch interval; the row still holds what store_message_begin wrote: ''
     * and NULL): set, not appended, so that SQLite copies the bound text once, into the
     * record. A row that holds more (another process's recovery folded parts of ours into it)
     * is appended to with q_fin instead. */
    static const char q_fin_whole[] =
        "UPDATE messages SET content = ifnull(?2, ''), reasoning = ?3" STORE_FIN_SET
        " AND content = '' AND reasoning IS NULL";
#undef STORE_FIN_SET
#undef STORE_FOLD_SET
    static const char q_drop[] = "DELETE FROM message_parts WHERE message_id = ?1";
    struct buf text = BUF_INIT, reasoning = BUF_INIT;
    int has_reasoning = 0, has_parts = 0, rc, ret = -1;
    sqlite3_stmt *q = store_prep(st, q_read);
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int r = sqlite3_column_int(q, 0);
        const void *t = sqlite3_column_blob(q, 1);
        size_t n = (size_t)sqlite3_column_bytes(q, 1);
        buf_append(r ? &reasoning : &text, t ? t : "", n);
        has_reasoning |= r;
        has_parts = 1;
    }
    store_done(st, q);
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot read the saved answer");
        goto out;
    }
    const struct buf *tp = &text, *rp = &reasoning;
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
    }
    if (tp->len > INT32_MAX || rp->len > INT32_MAX) {
        store_set_err(st, "cannot save the answer: larger than 2 GiB");
        goto out;
    }
    const char *sql = !fin ? q_set : s && !has_parts ? q_fin_whole : q_fin;
again:
    if (tp->len || has_reasoning || fin) {
        if (!(q = store_prep(st, sql)))
            goto out;
        sqlite3_bind_int64(q, 1, id);
        if (tp->len)
            sqlite3_bind_text(q, 2, buf_str(tp), (int)tp->len, SQLITE_STATIC);
        if (has_reasoning)
            sqlite3_bind_text(q, 3, buf_str(rp), (int)rp->len, SQLITE_STATIC);
        if (fin) {
            const struct store_usage *u = fin->usage;
            const struct store_timings *t = fin->timings;
            bind_text(q, 4, status_names[fin->status]);
            bind_text(q, 5, fin->finish_reason);
            bind_count(q, 6, u ? u->prompt_tokens : -1);
            bind_count(q, 7, u ? u->completion_tokens : -1);
            bind_count(q, 8, u ? u->total_tokens : -1);
            bind_seconds(q, 9, t ? t->ttft : -1);
            bind_seconds(q, 10, t ? t->total : -1);
            bind_seconds(q, 11, t ? t->tokens_per_s : -1);
            bind_seconds(q, 12, t ? t->dns : -1);
            bind_seconds(q, 13, t ? t->connect : -1);
            bind_seconds(q, 14, t ? t->tls : -1);
            bind_text(q, 15, fin->error);
        }
        rc = sqlite3_step(q);
        store_done(st, q);
        if (rc != SQLITE_DONE) {
            store_fail(st, "cannot save the answer");
            goto out;
        }
        if (fin && sqlite3_changes(st->db) == 0) {
            if (sql == q_fin_whole) {
                sql = q_fin; /* not as store_message_begin left it: append */
                goto again;
            }
            ret = STORE_NOT_FOUND;
            goto out;
        }
    }
    if (has_parts) {
        if (!(q = store_prep(st, q_drop)))
            goto out;
        sqlite3_bind_int64(q, 1, id);
        rc = sqlite3_step(q);
        store_done(st, q);
        if (rc != SQLITE_DONE) {
            store_fail(st, "cannot save the answer");
            goto out;
        }
    }
    ret = 0;
out:
    buf_free(&text);
    buf_free(&reasoning);
    return ret;
}

static void store_stream_sent(struct store_stream *s)
{
    buf_reset(&s->text);
    buf_reset(&s->reasoning);
    s->has_reasoning = 0;
}

int store_message_flush(struct store *st, int64_t msg_id)
{
    int pending = 0;
    for (struct store_stream *s = st->streams; s; s = s->next)
        if ((!msg_id || s->id == msg_id) && (s->text.len || s->has_reasoning))
            pending = 1;
    if (!pending)
        return 0;
    if (store_begin(st) != 0)
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

static int store_append(struct store *st, int64_t msg_id, const char *text, size_t len,
                        int reasoning)
{
    struct store_stream *s = store_stream_find(st, msg_id);
    if (!s) {
        store_set_err(st, "cannot save the answer: message %lld is not streaming here",
                      (long long)msg_id);
        return -1;
    }
    if (reasoning) {
        buf_append(&s->reasoning, text, len);
        s->has_reasoning = 1;
    } else {
        buf_append(&s->text, text, len);
    }
    s->total += len;
    if (store_mono(st) - st->last_commit < STORE_BATCH_INTERVAL)
        return 0;
    return store_message_flush(st, 0) == 0 ? 1 : -1;
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

static int store_finish_write(struct store *st, int64_t msg_id, struct store_stream *str,
                              enum store_status status, const char *finish_reason,
                              const struct store_usage *usage,
                              const struct store_timings *timings, const char *error);

int store_message_finish(struct store *st, int64_t msg_id, enum store_status status,
                         const char *finish_reason, const struct store_usage *usage,
                         const struct store_timings *timings, const char *error)
{
    if (status == STORE_STREAMING || (unsigned)status >= TT_ARRAY_LEN(status_names)) {
        store_set_err(st, "cannot finish message %lld with status %s", (long long)msg_id,
                      store_status_name(status));
        return -1;
    }
    struct store_stream *str = store_stream_find(st, msg_id);
    /* A long answer goes through a page cache of a few pages: SQLite writes each full page to
     * the WAL and reuses its memory, instead of holding the whole answer in 2 MB of fresh pages
     * until the commit (fresh memory is what such a write costs most: 13 -> 6 ms for 1.9 MB). */
    int big = str && str->total >= STORE_BIG_ANSWER;
    if (big)
        (void)sqlite3_exec(st->db, "PRAGMA cache_size = " TT_STR(STORE_BIG_CACHE_PAGES), NULL,
                           NULL, NULL);
    int rc = store_finish_write(st, msg_id, str, status, finish_reason, usage, timings, error);
    if (big)
        (void)sqlite3_exec(st->db, "PRAGMA cache_size = " TT_STR(STORE_CACHE_KIB), NULL, NULL,
                           NULL);
    if (rc == 0)
        store_stream_drop(st, msg_id);
    return rc;
}

/* store_message_finish's transaction: the folded text and the outcome in one row write. */
static int store_finish_write(struct store *st, int64_t msg_id, struct store_stream *str,
                              enum store_status status, const char *finish_reason,
                              const struct store_usage *usage,
                              const struct store_timings *timings, const char *error)
{
    static const char q_touch[] = "UPDATE conversations SET updated = ?2 WHERE id = "
                                  "(SELECT conversation_id FROM messages WHERE id = ?1)";
    if (store_begin(st) != 0)
        return -1;
    struct store_fin fin = {status, finish_reason, error, usage, timings};
    int rc = store_parts_fold(st, msg_id, str, &fin);
    if (rc == STORE_NOT_FOUND) {
        store_rollback(st);
        store_stream_drop(st, msg_id);
        store_set_err(st, "no message %lld", (long long)msg_id);
        return STORE_NOT_FOUND;
    }
    if (rc != 0)
        return store_rollback(st);
    sqlite3_stmt *s = store_prep(st, q_touch);
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

/* ---------------------------------------------------------------- search */

/* Split a query into terms (see store.h). Returns the count; *terms holds malloc'd strings. */
static size_t store_query_terms(const char *q, char ***terms)
{
    size_t n = 0, cap = 0;
    *terms = NULL;
    const char *p = q;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
            p++;
        if (!*p)
            break;
        const char *start, *end;
        if (*p == '"') {
            start = ++p;
            end = strchr(p, '"');
            if (!end)
                end = p + strlen(p);
            p = *end ? end + 1 : end;
        } else {
            start = p;
            while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\f' &&
                   *p != '\v')
                p++;
            end = p;
        }
        if (end == start)
            continue;
        if (n == cap)
            *terms = xrealloc(*terms, (cap = cap ? cap * 2 : 8) * sizeof **terms);
        (*terms)[n++] = xstrndup(start, (size_t)(end - start));
    }
    return n;
}

/* Code points in s. */
static size_t store_chars(const char *s)
{
    size_t n = 0, len = strlen(s);
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        i += utf8_decode(s + i, len - i, &cp);
    }
    return n;
}

/* Byte offset of the code point `chars` code points before (dir < 0) or after off. */
static size_t store_move(const char *s, size_t len, size_t off, size_t chars, int dir)
{
    while (chars--) {
        if (dir < 0) {
            if (off == 0)
                break;
            off--;
            while (off > 0 && ((unsigned char)s[off] & 0xC0) == 0x80)
                off--;
        } else {
            if (off >= len)
                break;
            uint32_t cp;
            off += utf8_decode(s + off, len - off, &cp);
        }
    }
    return off;
}

/* Append s[0..n) to out with line breaks and tabs turned into spaces. */
static void store_snip_text(struct buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        buf_appendc(out, c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
    }
}

/* A one-line excerpt of text around the first match of any needle, every match inside it
 * wrapped in open/close. Caller frees. */
static char *store_snippet(const char *text, size_t len, const struct needle *nds, size_t n_nd,
                           int chars, const char *open, const char *close)
{
    long first = -1;
    size_t ml;
    for (size_t i = 0; i < n_nd; i++) {
        long at = needle_find(&nds[i], text, len, &ml);
        if (at >= 0 && (first < 0 || at < first))
            first = at;
    }
    size_t from = first < 0 ? 0 : store_move(text, len, (size_t)first, (size_t)chars / 4, -1);
    size_t to = store_move(text, len, from, (size_t)chars, 1);
    struct buf b = BUF_INIT;
    if (from > 0)
        buf_appends(&b, "\xE2\x80\xA6");
    size_t pos = from;
    while (pos < to) {
        long best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < n_nd; i++) {
            long at = needle_find(&nds[i], text + pos, len - pos, &ml);
            if (at >= 0 && (best < 0 || at < best || (at == best && ml > best_len))) {
                best = at;
                best_len = ml;
            }
        }
        if (best < 0 || pos + (size_t)best >= to) {
            store_snip_text(&b, text + pos, to - pos);
            pos = to;
            break;
        }
        store_snip_text(&b, text + pos, (size_t)best);
        buf_appends(&b, open);
        store_snip_text(&b, text + pos + best, best_len);
        buf_appends(&b, close);
        pos += (size_t)best + best_len;
        if (pos > to)
            to = pos; /* a match that crosses the end is shown whole */
    }
    if (pos < len)
        buf_appends(&b, "\xE2\x80\xA6");
    return buf_take(&b);
}

/* Fill a hit's details and snippet (phase two of a search). 0, 1 when the message is gone,
 * or -1. */
static int store_hit_fill(struct store *st, struct store_hit *h, const struct needle *nds,
                          size_t n_nd, const struct store_search_opts *o)
{
    static const char q[] =
        "SELECT m.conversation_id, c.title, m.role, m.model, m.created, m.content "
        "FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ?1";
    sqlite3_stmt *s = store_prep(st, q);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, h->message_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        h->conversation_id = sqlite3_column_int64(s, 0);
        h->title = col_str(s, 1);
        h->role = col_str(s, 2);
        h->model = col_str(s, 3);
        h->created = sqlite3_column_int64(s, 4);
        const char *text = (const char *)sqlite3_column_text(s, 5);
        h->snippet = store_snippet(text ? text : "", (size_t)sqlite3_column_bytes(s, 5), nds,
                                   n_nd, o->snippet_chars > 0 ? o->snippet_chars : 80,
                                   o->open ? o->open : "[", o->close ? o->close : "]");
    }
    store_done(st, s);
    if (rc == SQLITE_DONE)
        return 1;
    return rc == SQLITE_ROW ? 0 : store_fail(st, "cannot search");
}

/* Run the statements steps[0..n) inside the open write transaction, each with ?1 bound to
 * *bind when bind is not NULL. On a failure: roll back, record what failed (unless what is
 * NULL: best effort) and return -1; else 0. */
static int store_run_steps(struct store *st, const char *const *steps, size_t n,
                           const int64_t *bind, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = store_prep(st, steps[i]);
        if (!s)
            return store_rollback(st);
        if (bind)
            sqlite3_bind_int64(s, 1, *bind);
        int rc = store_step(st, s);
        store_done(st, s);
        if (rc != SQLITE_DONE) {
            if (what)
                store_fail(st, what);
            return store_rollback(st);
        }
    }
    return 0;
}

/* Index the messages queued in fts_pending (schema v3). Best effort: when another process
 * holds the write lock, the search goes on without the newest messages. */
static void store_fts_catch_up(struct store *st)
{
    static const char q_any[] = "SELECT 1 FROM fts_pending LIMIT 1";
    static const char q_index[] =
        "INSERT INTO messages_fts(rowid, content) SELECT m.id, m.content FROM fts_pending p "
        "JOIN messages m ON m.id = p.message_id WHERE m.status <> 'streaming'";
    static const char q_clear[] =
        "DELETE FROM fts_pending WHERE message_id IN (SELECT id FROM messages "
        "WHERE status <> 'streaming') OR message_id NOT IN (SELECT id FROM messages)";
    sqlite3_stmt *s = store_prep(st, q_any);
    if (!s)
        return;
    int rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_ROW || store_begin(st) != 0)
        return;
    const char *const steps[] = {q_index, q_clear};
    if (store_run_steps(st, steps, TT_ARRAY_LEN(steps), NULL, NULL) == 0)
        store_commit(st);
}

/* Apply the word index's queue (schema v5), or its oldest STORE_WORDS_BATCH changes (and any
 * later ones of the same messages). For each message: when the index holds it, the text of
 * its first queued delete or change is what the index holds, and is taken out; then a message
 * that exists and has finished is indexed as it is now (or listed in words_long). A search
 * does not wait for the write lock for this: it uses the trigram index instead. 1 when the
 * queue is empty, 0 when some of it is left (another process held the write lock, or more
 * than a batch), -1 on an error. */
static int store_words_catch_up(struct store *st, int all)
{
    static const char q_any[] = "SELECT seq FROM words_queue ORDER BY seq LIMIT 1 OFFSET ?1";
    static const char q_out[] =
        "INSERT INTO messages_words(messages_words, rowid, content) "
        "SELECT 'delete', q.message_id, q.old FROM words_queue q "
        "WHERE q.seq IN (SELECT min(seq) FROM words_queue WHERE old IS NOT NULL "
        "AND message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "GROUP BY message_id) "
        "AND EXISTS (SELECT 1 FROM messages_words_docsize d WHERE d.id = q.message_id)";
    static const char q_long_out[] =
        "DELETE FROM words_long "
        "WHERE message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1)";
    static const char q_in[] =
        "INSERT INTO messages_words(rowid, content) SELECT m.id, m.content FROM messages m "
        "WHERE m.id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "AND m.status <> 'streaming' "
        "AND NOT EXISTS (SELECT 1 FROM words_long l WHERE l.message_id = m.id) "
        "AND NOT EXISTS (SELECT 1 FROM messages_words_docsize d WHERE d.id = m.id)";
    static const char q_long_in[] =
        "INSERT OR IGNORE INTO words_long(message_id) SELECT m.id FROM messages m "
        "WHERE m.id IN (SELECT message_id FROM words_queue WHERE seq <= ?1) "
        "AND m.status <> 'streaming' AND tt_words_long(m.content)";
    static const char q_clear[] =
        "DELETE FROM words_queue "
        "WHERE message_id IN (SELECT message_id FROM words_queue WHERE seq <= ?1)";
    for (;;) {
        sqlite3_stmt *s = store_prep(st, q_any);
        if (!s)
            return -1;
        sqlite3_bind_int(s, 1, 0);
        int rc = store_step(st, s);
        store_done(st, s);
        if (rc == SQLITE_DONE)
            return 1;
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
        if (store_try_begin(st) != 0)
            return 0;
        int64_t cut = INT64_MAX; /* the batch: changes up to this seq */
        if (!(s = store_prep(st, q_any)))
            return store_rollback(st);
        sqlite3_bind_int(s, 1, STORE_WORDS_BATCH - 1);
        rc = store_step(st, s);
        if (rc == SQLITE_ROW)
            cut = sqlite3_column_int64(s, 0);
        store_done(st, s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return store_fail(st, "cannot index messages"), store_rollback(st);
        const char *const steps[] = {q_out, q_long_out, q_long_in, q_in, q_clear};
        if (store_run_steps(st, steps, TT_ARRAY_LEN(steps), &cut, "cannot index messages") != 0)
            return -1;
        if (store_commit(st) != 0)
            return -1;
        if (cut == INT64_MAX)
            return 1;
        if (!all)
            return 0;
    }
}

int store_search_index(struct store *st)
{
    store_fts_catch_up(st);
    return store_words_catch_up(st, 1) == 1 ? 0 : -1;
}

/* Natural logarithm of x > 0 (tokterm links no libm: see util_ceil). */
static double store_ln(double x)
{
    if (!(x > 0 && x < 1e300))
        return 0;
    int e = 0;
    while (x >= 2) {
        x /= 2;
        e++;
    }
    while (x < 1) {
        x *= 2;
        e--;
    }
    double y = (x - 1) / (x + 1), y2 = y * y, term = y, sum = 0; /* ln x = 2 atanh(y) */
    for (int k = 1; k < 40; k += 2) {
        sum += term / k;
        term *= y2;
    }
    return 2 * sum + e * 0.69314718055994530942;
}

/* Per-query state of tt_rank(): average row size and each phrase's IDF, then scratch space for
 * the phrase frequencies of one row. */
struct store_rank {
    double avgdl;
    int n;
    double *idf, *freq;
};

/* FTS5 auxiliary function tt_rank(messages_fts, f1, f2, ...): bm25 computed as FTS5's bm25()
 * does (k1 = 1.2, b = 0.75, IDF = log((N - n + 0.5) / (n + 0.5)), at least 1e-6), except that
 * n, the number of rows holding phrase i, is fi * N with fi given by the caller: bm25() counts
 * every match of every phrase with xQueryPhrase before ranking the first row, which was most
 * of the time of a search (13-40 ms of a 20-80 ms query over 100,000 messages). */
static void store_fts_rank(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                           int n_val, sqlite3_value **val)
{
    struct store_rank *r = api->xGetAuxdata(fts, 0);
    int rc = SQLITE_OK;
    if (!r) {
        int n = api->xPhraseCount(fts);
        sqlite3_int64 rows = 0, tokens = 0;
        rc = api->xRowCount(fts, &rows);
        if (rc == SQLITE_OK)
            rc = api->xColumnTotalSize(fts, -1, &tokens);
        if (rc == SQLITE_OK &&
            !(r = sqlite3_malloc64(sizeof *r + 2 * (size_t)(n > 0 ? n : 1) * sizeof(double))))
            rc = SQLITE_NOMEM;
        if (rc != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return;
        }
        r->n = n;
        r->avgdl = rows > 0 && tokens > 0 ? (double)tokens / (double)rows : 1.0;
        r->idf = (double *)(r + 1);
        r->freq = r->idf + (n > 0 ? n : 1);
        for (int i = 0; i < n; i++) {
            double f = i < n_val ? sqlite3_value_double(val[i]) : 0.0;
            double hits = (f > 0 ? (f < 1 ? f : 1) : 0) * (double)rows;
            double idf = store_ln(((double)rows - hits + 0.5) / (hits + 0.5));
            r->idf[i] = idf > 0 ? idf : 1e-6;
        }
        if ((rc = api->xSetAuxdata(fts, r, sqlite3_free)) != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return;
        }
    }
    int n_inst = 0, tokens = 0;
    for (int i = 0; i < r->n; i++)
        r->freq[i] = 0;
    rc = api->xInstCount(fts, &n_inst);
    for (int i = 0; rc == SQLITE_OK && i < n_inst; i++) {
        int phrase, col, off;
        rc = api->xInst(fts, i, &phrase, &col, &off);
        if (rc == SQLITE_OK && phrase >= 0 && phrase < r->n)
            r->freq[phrase] += 1;
    }
    if (rc == SQLITE_OK)
        rc = api->xColumnSize(fts, -1, &tokens);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    const double k1 = 1.2, b = 0.75;
    double score = 0, norm = k1 * (1 - b + b * (double)tokens / r->avgdl);
    for (int i = 0; i < r->n; i++)
        score += r->idf[i] * (r->freq[i] * (k1 + 1)) / (r->freq[i] + norm);
    sqlite3_result_double(ctx, -score);
}

/* Register tt_rank() on this connection (once). 0, or -1 when FTS5 has no API for it. */
static int store_fts_rank_init(struct store *st)
{
    if (st->fts_rank)
        return st->fts_rank > 0 ? 0 : -1;
    fts5_api *api = NULL;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT fts5(?1)", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_pointer(s, 1, (void *)&api, "fts5_api_ptr", NULL);
        sqlite3_step(s);
    }
    sqlite3_finalize(s);
    st->fts_rank = api && api->iVersion >= 2 &&
                           api->xCreateFunction(api, "tt_rank", NULL, store_fts_rank, NULL) ==
                               SQLITE_OK
                       ? 1
                       : -1;
    return st->fts_rank > 0 ? 0 : -1;
}

/* The sample of a search: the newest STORE_SAMPLE indexed messages, those with id >= *bound
 * (*bound = 0 and *rows = all of them when there are no more). With frac, the fraction of
 * them holding each of the n MATCH phrases, for tt_rank()'s IDFs (exact when the sample is
 * every message: then the IDF is bm25()'s). A phrase's count stops at the sample's oldest
 * message, so a common term costs no more than a rare one. Inside the search's read
 * transaction. 0 or -1. */
static int store_sample(struct store *st, int words, char *const *phrases, size_t n,
                        double *frac, int64_t *bound, double *rows)
{
    static const char *const q_bounds[] = {
        "SELECT id FROM messages_fts_docsize ORDER BY id DESC LIMIT 1 OFFSET ?1",
        "SELECT id FROM messages_words_docsize ORDER BY id DESC LIMIT 1 OFFSET ?1"};
    static const char *const q_rowss[] = {"SELECT count(*) FROM messages_fts_docsize",
                                          "SELECT count(*) FROM messages_words_docsize"};
    static const char *const q_counts[] = {
        "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?1 AND rowid >= ?2",
        "SELECT count(*) FROM messages_words WHERE messages_words MATCH ?1 AND rowid >= ?2"};
    const char *q_bound = q_bounds[words], *q_rows = q_rowss[words], *q_count = q_counts[words];
    sqlite3_stmt *s = store_prep(st, q_bound);
    if (!s)
        return -1;
    sqlite3_bind_int(s, 1, STORE_SAMPLE - 1);
    int rc = store_step(st, s);
    *bound = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    store_done(st, s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(st, "cannot search");
    *rows = STORE_SAMPLE;
    if (rc == SQLITE_DONE) { /* fewer indexed messages than the sample: all of them */
        if (!(s = store_prep(st, q_rows)))
            return -1;
        rc = store_step(st, s);
        *rows = rc == SQLITE_ROW ? (double)sqlite3_column_int64(s, 0) : 0;
        store_done(st, s);
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
    }
    for (size_t i = 0; frac && i < n; i++) {
        if (!(s = store_prep(st, q_count)))
            return -1;
        sqlite3_bind_text(s, 1, phrases[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, *bound);
        rc = store_step(st, s);
        double hits = rc == SQLITE_ROW ? (double)sqlite3_column_int64(s, 0) : 0;
        store_done(st, s);
        if (rc != SQLITE_ROW)
            return store_fail(st, "cannot search");
        if (hits == 0 && *bound > 0)
            hits = 0.5; /* absent from the sample: rarer than that, not absent */
        frac[i] = *rows > 0 ? hits / *rows : 0;
    }
    return 0;
}

/* A full-text match ranked in phase one of a search. */
struct store_cand {
    int64_t id;
    double score;
};

/* Best first: lowest score, then newest. */
static int store_cand_cmp(const void *a, const void *b)
{
    const struct store_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

/* What each phase-one statement of a search binds (see store_search). */
struct store_query {
    const struct store_search_opts *opts;
    const char *match;
    char *const *terms; /* short terms (1-2 characters) bound at ?10... */
    size_t n_terms, n_short;
    const double *frac; /* tt_rank() arguments bound after them (NULL: bm25()) */
    size_t n_long;
};

static void store_query_bind(sqlite3_stmt *s, const struct store_query *q)
{
    if (q->match)
        sqlite3_bind_text(s, 1, q->match, -1, SQLITE_STATIC);
    bind_text(s, 2, q->opts->model);
    if (q->opts->since > 0)
        sqlite3_bind_int64(s, 3, q->opts->since);
    if (q->opts->until > 0)
        sqlite3_bind_int64(s, 4, q->opts->until);
    sqlite3_bind_int(s, 5, q->opts->limit > 0 ? q->opts->limit : 20);
    for (size_t i = 0, k = 0; i < q->n_terms; i++)
        if (store_chars(q->terms[i]) < 3)
            sqlite3_bind_text(s, (int)(10 + k++), q->terms[i], -1, SQLITE_STATIC);
    for (size_t k = 0; q->frac && k < q->n_long; k++)
        sqlite3_bind_double(s, (int)(10 + q->n_short + k), q->frac[k]);
}

/* Run one phase-one statement (rows: id, score; ?6 its LIMIT, ?7 the sample bound) and append
 * its rows to c[*n...]. Descending (asc = 0), at most `room` rows. Ascending (oldest first),
 * every row is read and the newest `room` kept (a ring); 1 when there turn out to be more
 * than 2 * room, to be read descending instead. 0, 1 or -1. */
static int store_cand_run(struct store *st, const char *sql, int asc, size_t room,
                          int64_t bound, const struct store_query *q, struct store_cand *c,
                          size_t *n)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return store_fail(st, "cannot search");
    store_query_bind(s, q);
    sqlite3_bind_int64(s, 6, asc ? -1 : (sqlite3_int64)room);
    sqlite3_bind_int64(s, 7, bound);
    int rc = SQLITE_DONE;
    size_t got = 0;
    struct store_cand *ring = c + *n;
    while (room > 0 && (rc = store_step(st, s)) == SQLITE_ROW) {
        if (asc && got == 2 * room)
            break;
        struct store_cand *e = &ring[got++ % room];
        e->id = sqlite3_column_int64(s, 0);
        e->score = sqlite3_column_double(s, 1);
    }
    sqlite3_finalize(s);
    if (room > 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
        return store_fail(st, "cannot search");
    if (asc && rc == SQLITE_ROW)
        return 1;
    *n += got < room ? got : room;
    return 0;
}

/* The score of a phase-one row on the index tbl: tt_rank() with the n IDF fractions bound at
 * ?first..., or bm25() when tt_rank() could not be registered. */
static void store_rank_sql(struct buf *b, const char *tbl, int ranked, size_t first, size_t n)
{
    if (!ranked) {
        buf_printf(b, "bm25(%s)", tbl);
        return;
    }
    buf_printf(b, "tt_rank(%s", tbl);
    for (size_t k = 0; k < n; k++)
        buf_printf(b, ", ?%zu", first + k);
    buf_appendc(b, ')');
}

/* Phase-one SQL of a full-text search (see store_cand_run) on the index tbl: rank is the
 * score expression, where the filters on messages m (may be empty), op ">=" (the sample) or
 * "<" (below it); with long_only, only the messages of words_long. */
static char *store_cand_sql(const char *tbl, const char *rank, const char *where,
                            const char *op, const char *order, int long_only)
{
    const char *only = long_only ? " IN (SELECT message_id FROM words_long) AND rowid" : "";
    if (!*where)
        return xasprintf("SELECT rowid, %s FROM %s WHERE %s MATCH ?1 "
                         "AND rowid%s %s ?7 ORDER BY rowid %s LIMIT ?6",
                         rank, tbl, tbl, only, op, order);
    only = long_only ? " IN (SELECT message_id FROM words_long) AND m.id" : "";
    return xasprintf("SELECT m.id, %s FROM %s CROSS JOIN messages m "
                     "ON m.id = %s.rowid WHERE %s MATCH ?1%s "
                     "AND %s.rowid%s %s ?7 ORDER BY %s.rowid %s LIMIT ?6",
                     rank, tbl, tbl, tbl, where, tbl, only, op, tbl, order);
}

int store_search(struct store *st, const char *query, const struct store_search_opts *opts,
                 struct store_hit **out, size_t *n)
{
    store_fts_catch_up(st);
    struct store_search_opts def = {0};
    if (!opts)
        opts = &def;
    *out = NULL;
    *n = 0;
    char **terms;
    size_t n_terms = store_query_terms(query ? query : "", &terms);
    if (n_terms == 0) {
        free(terms);
        store_set_err(st, "empty search query");
        return -1;
    }
    /* The word index answers when every term of 3+ characters is a word it finds (there is at
     * least one), it is not behind in this read transaction (store_words_catch_up), and few
     * messages are left out of it for their long words (words_long: those go through the
     * trigram index, one lookup each). */
    int words = !opts->no_words, wide = 0;
    int64_t n_wlong = 0;
    for (size_t i = 0; words && i < n_terms; i++)
        if (store_chars(terms[i]) >= 3) {
            wide = 1;
            if (!fts_words_term(st->words, terms[i], (int)strlen(terms[i])))
                words = 0;
        }
    words = words && wide && store_words_catch_up(st, 0) == 1;
    if (store_exec(st, "BEGIN", "cannot search") != 0) {
        for (size_t i = 0; i < n_terms; i++)
            free(terms[i]);
        free(terms);
        return -1;
    }
    if (words) {
        sqlite3_stmt *q = store_prep(st, "SELECT 1 FROM words_queue LIMIT 1");
        words = q && store_step(st, q) == SQLITE_DONE;
        store_done(st, q);
    }
    if (words) {
        sqlite3_stmt *q = store_prep(st, "SELECT count(*) FROM words_long");
        words = q && store_step(st, q) == SQLITE_ROW;
        n_wlong = words ? sqlite3_column_int64(q, 0) : 0;
        store_done(st, q);
        words = words && n_wlong <= STORE_WORDS_LONG_MAX;
    }
    const char *tbl = words ? "messages_words" : "messages_fts";
    /* Each term of 3+ characters becomes an FTS5 string with '"' doubled, so nothing the user
     * types is FTS5 syntax (a prefix query "term"* on the word index); shorter terms filter the
     * rows with tt_contains. */
    struct buf match = BUF_INIT, where = BUF_INIT, sql = BUF_INIT, rank = BUF_INIT;
    char **phr = xmalloc(n_terms * sizeof *phr);
    double *frac = xcalloc(2 * n_terms, sizeof *frac);
    size_t *ord = xmalloc(n_terms * sizeof *ord);
    size_t n_short = 0, n_long = 0;
    for (size_t i = 0; i < n_terms; i++) {
        if (store_chars(terms[i]) < 3) {
            buf_printf(&where, " AND tt_contains(m.content, ?%zu)", 10 + n_short++);
            continue;
        }
        struct buf p = BUF_INIT;
        buf_appendc(&p, '"');
        for (const char *c = terms[i]; *c; c++) {
            if (*c == '"')
                buf_appendc(&p, '"');
            buf_appendc(&p, *c);
        }
        buf_appends(&p, words ? "\"*" : "\"");
        phr[n_long++] = buf_take(&p);
    }
    if (opts->model)
        buf_appends(&where, " AND m.model = ?2");
    if (opts->since > 0)
        buf_appends(&where, " AND m.created >= ?3");
    if (opts->until > 0)
        buf_appends(&where, " AND m.created < ?4");

    struct needle *nds = xmalloc(n_terms * sizeof *nds);
    for (size_t i = 0; i < n_terms; i++)
        needle_init(&nds[i], terms[i], strlen(terms[i]));
    sqlite3_stmt *s = NULL;
    struct store_cand *cand = NULL;
    size_t n_cand = 0;
    int ret = 0, rc;
    struct store_query q = {opts, NULL, terms, n_terms, n_short, NULL, n_long};
    if (n_long) {
        /* Phase one, full text. The phrases go rarest first (FTS5 intersects them in MATCH
         * order); tt_rank() ranks the matches with IDFs from the sample (bm25() when it cannot
         * be registered). Ranking costs a few microseconds per match, so only the newest
         * STORE_RANK_WINDOW matches are ranked: exact for all but very common terms. The
         * sample's matches are read newest first; below it, oldest first when the sample
         * says that they fit the window (FTS5 reads a doclist forwards about a fifth faster
         * than backwards), else newest first up to the window. */
        int ranked = store_fts_rank_init(st) == 0;
        int64_t bound = 0;
        double rows = 0;
        if (store_sample(st, words, phr, n_long, ranked ? frac : NULL, &bound, &rows) != 0) {
            ret = -1;
            goto out;
        }
        for (size_t i = 0; i < n_long; i++) { /* stable insertion sort by frac */
            size_t j = i;
            while (j > 0 && frac[ord[j - 1]] > frac[i]) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = i;
        }
        double *frac_m = frac + n_terms; /* frac in MATCH order */
        for (size_t k = 0; k < n_long; k++) {
            if (k)
                buf_appendc(&match, ' ');
            buf_appends(&match, phr[ord[k]]);
            frac_m[k] = frac[ord[k]];
        }
        store_rank_sql(&rank, tbl, ranked, 10 + n_short, n_long);
        q.match = buf_str(&match);
        q.frac = ranked ? frac_m : NULL;
        size_t win = STORE_RANK_WINDOW;
        cand = xmalloc((win + (size_t)n_wlong) * sizeof *cand);
        char *text = store_cand_sql(tbl, buf_str(&rank), buf_str(&where), ">=", "DESC", 0);
        rc = store_cand_run(st, text, 0, win, bound, &q, cand, &n_cand);
        free(text);
        if (rc == 0 && bound > 0 && n_cand < win) {
            size_t room = win - n_cand;
            /* matches below the sample if as dense as in it (ids: about one per message) */
            int asc = (double)n_cand * (double)bound / rows <= 0.8 * (double)room;
            text = store_cand_sql(tbl, buf_str(&rank), buf_str(&where), "<", asc ? "ASC" : "DESC",
                                  0);
            rc = store_cand_run(st, text, asc, room, bound, &q, cand, &n_cand);
            free(text);
            if (rc == 1) { /* far more than the sample said: the newest first after all */
                text = store_cand_sql(tbl, buf_str(&rank), buf_str(&where), "<", "DESC", 0);
                rc = store_cand_run(st, text, 0, room, bound, &q, cand, &n_cand);
                free(text);
            }
        }
        if (rc == 0 && words && n_wlong > 0) { /* the messages left out of the word index */
            struct buf tmatch = BUF_INIT, trank = BUF_INIT;
            for (size_t k = 0; k < n_long; k++) {
                const char *ph = phr[ord[k]];
                buf_printf(&tmatch, "%s%.*s", k ? " " : "", (int)strlen(ph) - 1, ph);
            }
            store_rank_sql(&trank, "messages_fts", ranked, 10 + n_short, n_long);
            struct store_query ql = q;
            ql.match = buf_str(&tmatch);
            text = store_cand_sql("messages_fts", buf_str(&trank), buf_str(&where), ">=", "DESC",
                                  1);
            rc = store_cand_run(st, text, 0, (size_t)n_wlong, 0, &ql, cand, &n_cand);
            free(text);
            buf_free(&tmatch);
            buf_free(&trank);
        }
        if (rc != 0) {
            ret = -1;
            goto out;
        }
        qsort(cand, n_cand, sizeof *cand, store_cand_cmp);
        size_t lim = opts->limit > 0 ? (size_t)opts->limit : 20;
        *n = n_cand < lim ? n_cand : lim;
        *out = *n ? xcalloc(*n, sizeof **out) : NULL;
        for (size_t i = 0; i < *n; i++) {
            (*out)[i].message_id = cand[i].id;
            (*out)[i].rank = cand[i].score;
        }
    } else { /* only 1-2 character terms: scan, newest first, until enough hits */
        buf_printf(&sql, "SELECT m.id, 0 FROM messages m WHERE m.status <> 'streaming' "
                         "%s ORDER BY m.id DESC LIMIT ?5",
                   buf_str(&where));
        if (sqlite3_prepare_v2(st->db, buf_str(&sql), -1, &s, NULL) != SQLITE_OK) {
            ret = store_fail(st, "cannot search");
            goto out;
        }
        store_query_bind(s, &q);
        size_t cap = 0;
        while ((rc = store_step(st, s)) == SQLITE_ROW) {
            if (*n == cap)
                *out = xrealloc(*out, (cap = cap ? cap * 2 : 16) * sizeof **out);
            struct store_hit *h = &(*out)[(*n)++];
            memset(h, 0, sizeof *h);
            h->message_id = sqlite3_column_int64(s, 0);
        }
        if (rc != SQLITE_DONE)
            ret = store_fail(st, "cannot search");
    }
    /* Phase two: details and snippets of the few hits. */
    size_t kept = 0;
    for (size_t i = 0; ret == 0 && i < *n; i++) {
        struct store_hit h = (*out)[i];
        int r = store_hit_fill(st, &h, nds, n_terms, opts);
        if (r < 0)
            ret = -1;
        if (r == 0)
            (*out)[kept++] = h;
    }
    if (ret == 0)
        *n = kept;
out:
    sqlite3_finalize(s);
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    if (ret != 0) {
        store_hits_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    for (size_t i = 0; i < n_terms; i++) {
        needle_free(&nds[i]);
        free(terms[i]);
    }
    for (size_t i = 0; i < n_long; i++)
        free(phr[i]);
    free(phr);
    free(frac);
    free(ord);
    free(cand);
    free(nds);
    free(terms);
    buf_free(&match);
    buf_free(&where);
    buf_free(&sql);
    buf_free(&rank);
    return ret;
}

void store_hits_free(struct store_hit *hits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(hits[i].title);
        free(hits[i].role);
        free(hits[i].model);
        free(hits[i].snippet);
    }
    free(hits);
}

/* ---------------------------------------------------------------- statistics */

/* Nearest-rank percentile of sorted v[0..n). */
static double store_percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return -1;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

static int store_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int store_cmp_model(const void *a, const void *b)
{
    const struct store_model_stat *x = a, *y = b;
    if (x->total_tokens != y->total_tokens)
        return x->total_tokens > y->total_tokens ? -1 : 1;
    if (x->answers != y->answers)
        return x->answers > y->answers ? -1 : 1;
    return strcmp(x->model, y->model);
}

/* Add one group row (tokens in columns 5..7) to a model or day bucket. */
static void store_stat_add(int64_t *answers, int64_t *tok, sqlite3_stmt *s)
{
    *answers += sqlite3_column_int64(s, 3);
    for (int k = 0; k < 3; k++)
        tok[k] += sqlite3_column_int64(s, 5 + k);
}

int store_stats(struct store *st, int64_t since, int64_t until, struct store_stats *out)
{
    static const char q_counts[] =
        "SELECT (SELECT count(*) FROM conversations WHERE created >= ?1 AND created < ?2), "
        "(SELECT count(*) FROM messages WHERE created >= ?1 AND created < ?2)";
    /* One pass over the answers, grouped by day, model and status. Tokens count what was
     * billed: answers replayed from the cache are left out of the sums. */
    static const char q_groups[] =
        "SELECT date(created, 'unixepoch', 'localtime'), coalesce(model, '(unknown)'), status, "
        "count(*), sum(cached), "
        "coalesce(sum(CASE WHEN cached = 0 THEN prompt_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN completion_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN coalesce(total_tokens, prompt_tokens + "
        "completion_tokens) END), 0) "
        "FROM messages WHERE role = 'assistant' AND created >= ?1 AND created < ?2 "
        "GROUP BY 1, 2, 3 ORDER BY 1";
    /* Latency and speed of answers that really went to a server. */
    static const char q_timing[] =
        "SELECT ttft, tokens_per_s FROM messages WHERE role = 'assistant' AND cached = 0 AND "
        "(ttft IS NOT NULL OR tokens_per_s IS NOT NULL) AND created >= ?1 AND created < ?2";
    memset(out, 0, sizeof *out);
    int64_t hi = until > 0 ? until : INT64_MAX;
    if (store_exec(st, "BEGIN", "cannot compute statistics") != 0)
        return -1;
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_prep(st, q_counts)))
        goto fail;
    sqlite3_bind_int64(s, 1, since);
    sqlite3_bind_int64(s, 2, hi);
    rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        out->conversations = sqlite3_column_int64(s, 0);
        out->messages = sqlite3_column_int64(s, 1);
    }
    store_done(st, s);
    if (rc != SQLITE_ROW)
        goto sqlfail;

    size_t cap_m = 0, cap_d = 0;
    if (!(s = store_prep(st, q_groups)))
        goto fail;
    sqlite3_bind_int64(s, 1, since);
    sqlite3_bind_int64(s, 2, hi);
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        const char *day = (const char *)sqlite3_column_text(s, 0);
        const char *model = (const char *)sqlite3_column_text(s, 1);
        int k = store_status_parse((const char *)sqlite3_column_text(s, 2));
        int64_t count = sqlite3_column_int64(s, 3);
        if (k >= 0)
            out->by_status[k] += count;
        out->answers += count;
        out->cached_answers += sqlite3_column_int64(s, 4);
        if (!out->n_days || strcmp(out->days[out->n_days - 1].day, day ? day : "?") != 0) {
            if (out->n_days == cap_d)
                out->days = xrealloc(out->days, (cap_d = cap_d ? cap_d * 2 : 32) *
                                                    sizeof *out->days);
            struct store_day_stat *d = &out->days[out->n_days++];
            memset(d, 0, sizeof *d);
            snprintf(d->day, sizeof d->day, "%s", day ? day : "?");
        }
        struct store_day_stat *d = &out->days[out->n_days - 1];
        int64_t dt[3] = {0, 0, 0};
        store_stat_add(&d->answers, dt, s);
        d->prompt_tokens += dt[0];
        d->completion_tokens += dt[1];
        d->total_tokens += dt[2];
        size_t i;
        for (i = 0; i < out->n_models; i++)
            if (strcmp(out->models[i].model, model ? model : "") == 0)
                break;
        if (i == out->n_models) {
            if (out->n_models == cap_m)
                out->models = xrealloc(out->models, (cap_m = cap_m ? cap_m * 2 : 8) *
                                                        sizeof *out->models);
            memset(&out->models[i], 0, sizeof out->models[i]);
            out->models[i].model = xstrdup(model ? model : "");
            out->n_models++;
        }
        struct store_model_stat *m = &out->models[i];
        int64_t mt[3] = {0, 0, 0};
        store_stat_add(&m->answers, mt, s);
        m->prompt_tokens += mt[0];
        m->completion_tokens += mt[1];
        m->total_tokens += mt[2];
    }
    store_done(st, s);
    if (rc != SQLITE_DONE)
        goto sqlfail;
    if (out->n_models > 1)
        qsort(out->models, out->n_models, sizeof *out->models, store_cmp_model);
    out->cache_hit_rate = out->answers ? (double)out->cached_answers / (double)out->answers : 0;

    if (!(s = store_prep(st, q_timing)))
        goto fail;
    sqlite3_bind_int64(s, 1, since);
    sqlite3_bind_int64(s, 2, hi);
    double *ttft = NULL, *tps = NULL;
    size_t n_ttft = 0, n_tps = 0, cap = 0;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        if (n_ttft == cap || n_tps == cap) {
            cap = cap ? cap * 2 : 256;
            ttft = xrealloc(ttft, cap * sizeof *ttft);
            tps = xrealloc(tps, cap * sizeof *tps);
        }
        if (sqlite3_column_type(s, 0) != SQLITE_NULL)
            ttft[n_ttft++] = sqlite3_column_double(s, 0);
        if (sqlite3_column_type(s, 1) != SQLITE_NULL)
            tps[n_tps++] = sqlite3_column_double(s, 1);
    }
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        if (n_ttft)
            qsort(ttft, n_ttft, sizeof *ttft, store_cmp_double);
        if (n_tps)
            qsort(tps, n_tps, sizeof *tps, store_cmp_double);
        out->ttft_p50 = store_percentile(ttft, n_ttft, 50);
        out->ttft_p95 = store_percentile(ttft, n_ttft, 95);
        out->tps_p50 = store_percentile(tps, n_tps, 50);
        out->tps_p95 = store_percentile(tps, n_tps, 95);
    }
    free(ttft);
    free(tps);
    if (rc != SQLITE_DONE)
        goto sqlfail;
    store_exec(st, "COMMIT", "cannot compute statistics");
    return 0;
sqlfail:
    store_fail(st, "cannot compute statistics");
fail:
    store_rollback(st);
    store_stats_clear(out);
    return -1;
}

void store_stats_clear(struct store_stats *s)
{
    for (size_t i = 0; i < s->n_models; i++)
        free(s->models[i].model);
    free(s->models);
    free(s->days);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- response cache */

void store_cache_key(const char *canonical, size_t len, unsigned char key[STORE_CACHE_KEY_LEN])
{
    sha256_digest(canonical, len, key);
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
    static const char q_get[] =
        "SELECT content, reasoning, model, finish_reason, prompt_tokens, completion_tokens, "
        "total_tokens, created, last_used, hits, size FROM response_cache WHERE key = ?1";
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
    if (st->cache_ttl > 0 && out->created <= now - st->cache_ttl) {
        store_done(st, s);
        memset(out, 0, sizeof *out);
        return store_cache_drop(st, key) == 0 ? STORE_NOT_FOUND : -1;
    }
    out->content = col_str(s, 0);
    if (!out->content)
        out->content = xstrdup("");
    out->reasoning = col_str(s, 1);
    out->model = col_str(s, 2);
    out->finish_reason = col_str(s, 3);
    out->usage.prompt_tokens = col_count(s, 4);
    out->usage.completion_tokens = col_count(s, 5);
    out->usage.total_tokens = col_count(s, 6);
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
    if (st->n_touches == st->cap_touches)
        st->touches = xrealloc(st->touches, (st->cap_touches = st->cap_touches
                                                                   ? st->cap_touches * 2
                                                                   : 16) *
                                                sizeof *st->touches);
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
static void store_touch_apply(struct store *st)
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

/* Evict least recently used entries until the cache fits its cap (inside a transaction). */
static int store_cache_evict(struct store *st)
{
    static const char q_bytes[] = "SELECT bytes FROM cache_meta WHERE id = 1";
    static const char q_lru[] =
        "SELECT id, size FROM response_cache ORDER BY last_used, id";
    static const char q_del[] = "DELETE FROM response_cache WHERE id = ?1";
    if (st->cache_max <= 0)
        return 0;
    sqlite3_stmt *s = store_prep(st, q_bytes);
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
        if (n == cap)
            ids = xrealloc(ids, (cap = cap ? cap * 2 : 16) * sizeof *ids);
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
    static const char q_expire[] = "DELETE FROM response_cache WHERE created <= ?1";
    if (store_begin(st) != 0)
        return -1;
    if (st->cache_ttl <= 0)
        return 0;
    sqlite3_stmt *s = store_prep(st, q_expire);
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

int store_cache_put(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                    enum store_status status, const char *content, const char *reasoning,
                    const char *model, const char *finish_reason,
                    const struct store_usage *usage)
{
    static const char q_put[] =
        "INSERT INTO response_cache(key, created, last_used, hits, size, model, finish_reason, "
        "prompt_tokens, completion_tokens, total_tokens, reasoning, content) "
        "VALUES(?1, ?2, ?2, 0, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
        "ON CONFLICT(key) DO UPDATE SET created = excluded.created, "
        "last_used = excluded.last_used, hits = 0, size = excluded.size, model = excluded.model, "
        "finish_reason = excluded.finish_reason, prompt_tokens = excluded.prompt_tokens, "
        "completion_tokens = excluded.completion_tokens, total_tokens = excluded.total_tokens, "
        "reasoning = excluded.reasoning, content = excluded.content";
    if (status != STORE_COMPLETE) {
        store_set_err(st, "not cached: only complete answers are cached (status %s)",
                      store_status_name(status));
        return -1;
    }
    if (finish_reason && (strcmp(finish_reason, "length") == 0 ||
                          strcmp(finish_reason, "content_filter") == 0 ||
                          strcmp(finish_reason, "error") == 0)) {
        store_set_err(st, "not cached: the answer ended with finish reason \"%s\"",
                      finish_reason);
        return -1;
    }
    if (!content) {
        store_set_err(st, "not cached: no content");
        return -1;
    }
    /* Approximate bytes on disk: the texts, the key and a row's fixed overhead. */
    int64_t size = (int64_t)strlen(content) + (reasoning ? (int64_t)strlen(reasoning) : 0) +
                   (model ? (int64_t)strlen(model) : 0) +
                   (finish_reason ? (int64_t)strlen(finish_reason) : 0) + STORE_CACHE_KEY_LEN +
                   64;
    int64_t entry_max = store_cache_entry_limit(st);
    if (entry_max > 0 && size > entry_max) {
        store_set_err(st, "not cached: the answer (%lld bytes) is larger than the largest "
                          "cached answer (%lld bytes)", (long long)size, (long long)entry_max);
        return -1;
    }
    int64_t now = store_epoch(st);
    if (store_cache_begin_put(st, now) != 0)
        return -1;
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_prep(st, q_put)))
        return store_rollback(st);
    sqlite3_bind_blob(s, 1, key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, size);
    bind_text(s, 4, model);
    bind_text(s, 5, finish_reason);
    bind_count(s, 6, usage ? usage->prompt_tokens : -1);
    bind_count(s, 7, usage ? usage->completion_tokens : -1);
    bind_count(s, 8, usage ? usage->total_tokens : -1);
    bind_text(s, 9, reasoning);
    bind_text(s, 10, content);
    rc = sqlite3_step(s);
    store_done(st, s);
    if (rc != SQLITE_DONE)
        goto sqlfail;
    if (store_cache_evict(st) != 0)
        return store_rollback(st);
    return store_commit(st);
sqlfail:
    store_fail(st, "cannot update the cache");
    return store_rollback(st);
}

int store_cache_put_message(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                            int64_t msg_id, int64_t bytes)
{
    /* The text goes from the message row to the cache inside SQLite: a long answer is never
     * held in memory for it. Same conditions as store_cache_put(). */
    static const char q_copy[] =
        "INSERT INTO response_cache(key, created, last_used, hits, size, model, finish_reason, "
        "prompt_tokens, completion_tokens, total_tokens, reasoning, content) "
        "SELECT ?1, ?2, ?2, 0, length(CAST(content AS BLOB)) + "
        "ifnull(length(CAST(reasoning AS BLOB)), 0) + ifnull(length(model), 0) + "
        "ifnull(length(finish_reason), 0) + 96, model, finish_reason, prompt_tokens, "
        "completion_tokens, total_tokens, reasoning, content FROM messages "
        "WHERE id = ?3 AND role = 'assistant' AND status = 'complete' AND "
        "ifnull(finish_reason, '') NOT IN ('length', 'content_filter', 'error') AND "
        "(?4 <= 0 OR length(CAST(content AS BLOB)) + ifnull(length(CAST(reasoning AS BLOB)), 0) "
        "+ 96 <= ?4) "
        "ON CONFLICT(key) DO UPDATE SET created = excluded.created, "
        "last_used = excluded.last_used, hits = 0, size = excluded.size, model = excluded.model, "
        "finish_reason = excluded.finish_reason, prompt_tokens = excluded.prompt_tokens, "
        "completion_tokens = excluded.completion_tokens, total_tokens = excluded.total_tokens, "
        "reasoning = excluded.reasoning, content = excluded.content";
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
    if (!(s = store_prep(st, q_copy)))
        return store_rollback(st);
    sqlite3_bind_blob(s, 1, key, STORE_CACHE_KEY_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, msg_id);
    sqlite3_bind_int64(s, 4, limit);
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
    bind_text(s, 4, model);
    bind_count(s, 5, tokens);
    sqlite3_bind_int64(s, 6, store_epoch(st));
    bind_text(s, 7, text);
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
    o->model = col_str(s, 3);
    o->tokens = col_count(s, 4);
    o->created = sqlite3_column_int64(s, 5);
    o->text = col_str(s, 6);
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
        if (*n == cap)
            *out = xrealloc(*out, (cap = cap ? cap * 2 : 4) * sizeof **out);
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
    bind_text(s, 1, profile);
    bind_text(s, 2, key_label);
    bind_count(s, 3, q->limit_requests);
    bind_count(s, 4, q->remaining_requests);
    bind_seconds(s, 5, q->reset_requests);
    bind_count(s, 6, q->limit_tokens);
    bind_count(s, 7, q->remaining_tokens);
    bind_seconds(s, 8, q->reset_tokens);
    bind_seconds(s, 9, q->blocked_until);
    bind_text(s, 10, q->extra);
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
    bind_text(s, 1, profile);
    bind_text(s, 2, key_label);
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        out->limit_requests = col_count(s, 0);
        out->remaining_requests = col_count(s, 1);
        out->reset_requests = col_seconds(s, 2);
        out->limit_tokens = col_count(s, 3);
        out->remaining_tokens = col_count(s, 4);
        out->reset_tokens = col_seconds(s, 5);
        out->blocked_until = col_seconds(s, 6);
        out->extra = col_str(s, 7);
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
