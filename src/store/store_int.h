/* store_int.h - private to src/store/: the connection (struct store) and the helpers the
 * store's files share. Nothing outside src/store/ includes it; the public API is store.h.
 *
 * Files: db.c (connection, statements, transactions, clocks, checkpoint), schema.c (schema,
 * migrations, the file, recovery), conv.c (conversations), message.c (messages and streamed
 * answers), search.c, stats.c, cache.c, summary.c, quota.c. */
#ifndef TT_STORE_INT_H
#define TT_STORE_INT_H
#include "store/store.h"

#include "base/buf.h"
#include "store/sqlite_dl.h" /* <sqlite3.h>, the library loaded on first open */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_APP_ID 0x746b746d     /* "tktm" in PRAGMA application_id */
#define STORE_BUSY_TIMEOUT_MS 5000  /* SQLite's own wait for a lock */
#define STORE_BUSY_DEADLINE 30.0    /* seconds we keep retrying on SQLITE_BUSY in total */
#define STORE_STMT_CACHE 64

#define TT_XSTR(x) #x
#define TT_STR(x) TT_XSTR(x)
/* The page cache: 2 MiB (PRAGMA cache_size in KiB, negative); an answer of STORE_BIG_ANSWER
 * bytes or more is written through STORE_BIG_CACHE_PAGES pages (store_message_finish). */
#define STORE_CACHE_KIB -2048
#define STORE_BIG_ANSWER (256 * 1024)
#define STORE_BIG_CACHE_PAGES 50

/* An answer this handle is streaming: text waiting for the next batch commit. */
struct store_stream {
    int64_t id, conversation_id;
    struct buf text, reasoning;  /* appended since the last committed part */
    char *head; /* a fast answer's block (store_append), when text.data is head +
                 * STORE_HEAD_ROOM in it: that room takes the start of SQLite's record of the
                 * text (sqlite_dl_lend); freed in place of text.data (store_stream_free_text) */
    size_t total;                /* bytes appended over the whole answer */
    int has_reasoning;
    int parted;                  /* a part of it was committed (store_stream_write): its end
                                  * reads the parts back; else it writes what it holds */
    struct store_stream *next;
};

/* A cache hit whose last_used/hits update waits for the next write transaction. */
struct store_touch {
    unsigned char key[STORE_CACHE_KEY_LEN];
    int64_t when;
    int64_t hits;
};

struct store_stmt {
    const char *sql; /* identity: the address of a string literal in the store's files */
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
    void (*busy_note)(void *ud, const char *path); /* store_set_busy_note */
    void *busy_ud;
    char writer[64];    /* "pid:starttime" of this process, stored on streaming rows */
    struct store_touch *touches; /* pending cache-hit updates */
    size_t n_touches, cap_touches;
    int fts_rank;                /* tt_rank() registered on this connection (search) */
    struct fts_words *words;     /* the tt_words tokenizer, registered at open */
    pthread_t ckpt;              /* store_checkpoint_async's thread */
    int ckpt_started;
    int ckpt_done;               /* atomic: set by that thread as it ends */
    char *ckpt_exe;              /* store_set_checkpoint_exe: the close hands the WAL's copy to
                                  * `ckpt_exe --checkpoint PATH` */
    long wal_frames;             /* frames in the WAL after this connection's last commit (the
                                  * WAL hook); -1 before the first */
    int page_size;               /* PRAGMA page_size, read at open */
    int readonly;                /* store_open_reader: a read-only connection, never writes */
    int content_last;            /* messages.content is the row's last column (schema v15): 1,
                                  * 0, or -1 until store_fold_write first asks */
    int wrote;                   /* a write was committed */
    int batch;                   /* store_batch_begin depth: writes are savepoints of one
                                  * transaction */
    int batch_lost;              /* SQLite rolled that transaction back */
    int created;                 /* this connection made or upgraded the schema: store_close
                                  * checkpoints (when it wrote) */
    unsigned long long vm_steps; /* SQLite VM steps of the statements done so far (the work of
                                  * this connection, load-independent: TOKTERM_DEBUG_STORE) */
    unsigned compiled;           /* statements store_prep compiled */
    int finished;                /* an answer's end began: compiled_end is the count then */
    unsigned compiled_end;
};

/* "streaming", "complete", ... indexed by enum store_status (db.c). */
extern const char *const store_status_names[STORE_INTERRUPTED + 1];

/* ---- db.c: errors, clocks, statements, transactions */

/* Record a printf-style message as the store's error. */
void store_set_err(struct store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record "what: sqlite message (hint)" and return -1. */
int store_fail(struct store *st, const char *what);
/* The store's clocks: monotonic seconds, unix seconds (store_set_clock). */
double store_mono(struct store *st);
int64_t store_epoch(struct store *st);
/* A prepared statement for a string literal, kept for the life of the connection. The caller
 * resets it with store_done(). NULL (error recorded) when it does not compile. */
sqlite3_stmt *store_prep(struct store *st, const char *sql);
/* Compile sql ahead of its use (a warm-up) into the statement cache; nothing when it is
 * cached already or the cache is full (then it is compiled where it runs and finalized there:
 * a warmed statement nobody holds would stay unfinalized, and the connection with it). */
void store_warm(struct store *st, const char *sql);
/* Reset a statement from store_prep() (or finalize one that did not fit the cache). */
void store_done(struct store *st, sqlite3_stmt *stmt);
/* sqlite3_step, retried while a statement outside a transaction cannot start (SQLITE_BUSY). */
int store_step(struct store *st, sqlite3_stmt *stmt);
/* Run SQL without results (several statements allowed). 0 or -1 with the error recorded. */
int store_exec(struct store *st, const char *sql, const char *what);
/* BEGIN IMMEDIATE, waiting for other writers (pending cache-hit updates ride along). 0 or -1. */
int store_begin(struct store *st);
/* BEGIN IMMEDIATE without waiting: 0, or -1 when another connection holds the write lock. */
int store_try_begin(struct store *st);
/* COMMIT, retried on SQLITE_BUSY; rolls back and returns -1 when it fails. */
int store_commit(struct store *st);
/* Roll back after a failure; keeps the recorded error and returns -1. */
int store_rollback(struct store *st);
/* Run steps[0..n) inside the open write transaction, each with ?1 bound to *bind (when not
 * NULL). On a failure: roll back, record what failed (unless what is NULL) and return -1. */
int store_run_steps(struct store *st, const char *const *steps, size_t n, const int64_t *bind,
                    const char *what);
/* Bind len bytes of text at i, checked: a value over SQLite's length limit (SQLITE_TOOBIG)
 * records "what: N bytes is too large ..." and returns -1 (never a NULL bound instead). */
int store_bind_big(struct store *st, sqlite3_stmt *s, int i, const char *v, size_t len,
                   const char *what);
/* The largest text value this connection stores in one piece (SQLITE_LIMIT_LENGTH less room
 * for the rest of a row). */
size_t store_max_value(struct store *st);
/* Empty the WAL into the database and truncate it to 0 bytes (PRAGMA
 * wal_checkpoint(TRUNCATE)), waiting a while for readers. 0, or -1 when readers kept it. */
int store_wal_truncate(struct store *st);
/* Wait for a running store_checkpoint_async (block = 0: only reap one that has ended; -1 when
 * it still runs): the next write transaction then starts the WAL over (its frames all copied)
 * instead of appending to it. 0 when none runs now. */
int store_checkpoint_wait(struct store *st, int block);
/* First column of the first row of sql (a PRAGMA or a count) into *out. 0 or -1. */
int store_pragma_int(struct store *st, const char *sql, int *out);
/* The URI that opens path read-only (SQLITE_OPEN_URI), with immutable=1 when the WAL index
 * cannot be made (a read-only directory or filesystem, a full disk); a new string. */
char *store_reader_uri(const char *path, int immutable);

/* Bind NULL for NULL text, a negative count or negative seconds; else the value. */
void store_bind_text(sqlite3_stmt *s, int i, const char *v);
void store_bind_count(sqlite3_stmt *s, int i, int64_t v);
void store_bind_seconds(sqlite3_stmt *s, int i, double v);
/* A column as a malloc'd string (NULL for NULL), a count (-1), seconds (-1.0). */
char *store_col_str(sqlite3_stmt *s, int i);
/* Column i as one of the four roles' static strings (no copy: a row of a thousands-long
 * read costs no allocation for it), NULL for NULL or a name the schema's CHECK refuses. */
const char *store_col_role(sqlite3_stmt *s, int i);
/* A role as a small number (1-4; 0 for NULL or another name) and back to its static string. */
int store_role_index(const char *role);
const char *store_role_at(int k);
int64_t store_col_count(sqlite3_stmt *s, int i);
double store_col_seconds(sqlite3_stmt *s, int i);

/* ---- attach.c */

/* Save attachments v[0..n) of message id inside the open write transaction (blobs once by
 * hash). 0, or -1 with the error recorded. */
int store_attach_put(struct store *st, int64_t id, const struct store_attach *v, size_t n);

/* ---- schema.c: schema, the file, recovery */

/* Conversation conv's token mark in encoding (schema v11): every row up to *through has a
 * count, none above *max (0 and 0 when there is none). 0, or an SQLite code. */
int store_tokens_mark(struct store *st, int64_t conv, const char *encoding, int64_t *through,
                      long *max);
/* Bring the schema to STORE_SCHEMA_VERSION; *from gets the version found. 0 or -1. */
int store_migrate(struct store *st, int *from);
/* Create the file (0600) and its directory (0700) when missing and check it is a regular file
 * we can write. 0 or -1 with *err set. */
int store_prepare_file(const char *path, struct store_open_info *info, char **err);
/* Tighten the modes of the database and its WAL files to 0600 (info records the old one). */
void store_fix_modes(const char *path, struct store_open_info *info);
/* Start time of a process from /proc (0 when unknown); *zombie (may be NULL) set when it has
 * exited unreaped. */
unsigned long long store_proc_start(long pid, int *zombie);
/* 1 when the process that wrote "pid:start" (messages.writer) may still be running. */
int store_writer_alive(const char *writer);

/* ---- message.c */

/* How an answer ended: what store_message_finish writes with the folded text. */
/* SQL: column col names the model p as --model gives it (a bound parameter such as "?3"): the
 * same name in any case, or a dated snapshot of it, NAME-DDDD... (gpt-4o-mini-2024-07-18,
 * gpt-4-0613), which is what an answer's row keeps when the server names one. Not another
 * model that starts with the name (gpt-4o-mini for gpt-4o), and nothing in p is a pattern. */
#define STORE_MODEL_IS(col, p)                                                               \
    "(" col " = " p " COLLATE NOCASE OR (lower(substr(" col ", 1, length(" p ") + 1)) = "      \
    "lower(" p ") || '-' AND substr(" col ", length(" p ") + 2, 4) GLOB "                      \
    "'[0-9][0-9][0-9][0-9]'))"

struct store_fin {
    enum store_status status;
    const char *finish_reason, *error;
    const struct store_usage *usage;
    const struct store_timings *timings;
};
/* Free an answer stream's buffers (store_stream_free_text: its text only, which is then
 * empty) and, for store_stream_free, the stream itself. */
void store_stream_free_text(struct store_stream *s);
void store_stream_free(struct store_stream *s);
/* Fold the saved parts of answer id, then the buffered text of s (may be NULL), into the row
 * (with fin, also how it ended). Inside a write transaction. 0, -1, or STORE_NOT_FOUND. */
int store_parts_fold(struct store *st, int64_t id, const struct store_stream *s,
                     const struct store_fin *fin);

/* ---- search.c */

/* Inside a write transaction: take messages that no longer exist out of the word index (the
 * text their delete queued) and drop their queue entries. 0, or -1 (rolled back). */
int store_words_forget(struct store *st);

/* Register the SQL function tt_contains(haystack, needle) on the connection. SQLITE_OK or an
 * SQLite error code. */
int store_search_functions(struct store *st);

/* ---- cache.c */
/* Compile the statements of store_cache_put_message (store_warm_answer). */
void store_cache_warm(struct store *st);

/* Write pending cache-hit updates inside the current write transaction (best effort). */
void store_touch_apply(struct store *st);

#endif
