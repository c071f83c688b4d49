/* db.c - the connection: open and close, errors, cached statements, steps and transactions
 * that wait out other writers, the clocks, and the background checkpoint. */
#include "config.h"
#include "store/store_int.h"

#include "store/fts_words.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const store_status_names[STORE_INTERRUPTED + 1] = {
    "streaming", "complete", "cancelled", "error", "truncated", "interrupted"};

/* ---------------------------------------------------------------- errors and helpers */

void store_set_err(struct store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[1024];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    free(st->err);
    st->err = xstrdup(tmp);
}

/* A user-facing explanation of an SQLite failure (rc: its extended code). An I/O error names
 * its extended code: which read, write, lock or map failed is all a report can go on (a
 * short read of the WAL, 522, is not a failing disk). The text is the calling thread's until
 * its next call. */
static const char *store_hint(int rc)
{
    static _Thread_local char io[64];
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return " (another process, a tokterm or an sqlite3 shell, held the database's write "
               "lock too long; try again)";
    case SQLITE_READONLY:
        return " (the database file or its directory is read-only)";
    case SQLITE_FULL:
        return " (the disk is full)";
    case SQLITE_CORRUPT:
        return " (the database file is damaged)";
    case SQLITE_NOTADB:
        return " (the file is not an SQLite database)";
    case SQLITE_IOERR:
        snprintf(io, sizeof io, " (input/output error, SQLite code %d)", rc);
        return io;
    case SQLITE_CANTOPEN:
        return " (cannot open the file)";
    default:
        return "";
    }
}

int store_fail(struct store *st, const char *what)
{
    int rc = sqlite3_extended_errcode(st->db);
    if (rc == SQLITE_OK) /* SQLite saw nothing wrong: what it gave does not hang together */
        store_set_err(st, "%s: the rows read do not hang together (the database file may be "
                          "damaged, or copied without its -wal file)", what);
    else if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
        /* a row written under a conversation or message that is gone: another process removed
         * it meanwhile (until 2026-12 only SQLite's "FOREIGN KEY constraint failed") */
        store_set_err(st, "%s: its conversation was removed meanwhile (tokterm rm, or /delete "
                          "in another chat); what came after is not saved", what);
    else
        store_set_err(st, "%s: %s%s", what, sqlite3_errmsg(st->db), store_hint(rc));
    return -1;
}

double store_mono(struct store *st)
{
    return st->mono ? st->mono(st->clock_ud) : util_now();
}

int64_t store_epoch(struct store *st)
{
    return st->epoch ? st->epoch(st->clock_ud) : util_epoch();
}

sqlite3_stmt *store_prep(struct store *st, const char *sql)
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
    st->compiled++;
    if (st->n_stmts < STORE_STMT_CACHE) {
        st->stmts[st->n_stmts].sql = sql;
        st->stmts[st->n_stmts++].stmt = stmt;
    }
    return stmt;
}

void store_warm(struct store *st, const char *sql)
{
    for (size_t i = 0; i < st->n_stmts; i++)
        if (st->stmts[i].sql == sql)
            return;
    if (st->n_stmts < STORE_STMT_CACHE)
        (void)store_prep(st, sql);
}

void store_done(struct store *st, sqlite3_stmt *stmt)
{
    if (!stmt)
        return;
    st->vm_steps += (unsigned)sqlite3_stmt_status(stmt, SQLITE_STMTSTATUS_VM_STEP, 1);
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
int store_step(struct store *st, sqlite3_stmt *stmt)
{
    /* the clock is read from the first SQLITE_BUSY on, not at every step (a read of thousands
     * of rows steps thousands of times, none of them busy); that first step may have waited
     * SQLite's busy timeout already, so the retries start as if it had: never longer than
     * STORE_BUSY_DEADLINE in all */
    double start = -1;
    for (int attempt = 0;; attempt++) {
        int started = sqlite3_stmt_busy(stmt);
        int rc = sqlite3_step(stmt);
        if ((rc & 0xff) != SQLITE_BUSY || started || !sqlite3_get_autocommit(st->db))
            return rc;
        double now = util_now();
        if (start < 0)
            start = now - STORE_BUSY_TIMEOUT_MS / 1000.0;
        if (now - start > STORE_BUSY_DEADLINE)
            return rc;
        sqlite3_reset(stmt);
        util_sleep_ms(2 + (attempt % 16) * 3);
    }
}

int store_exec(struct store *st, const char *sql, const char *what)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(st, what);
    return 0;
}

/* Inside store_batch_begin's transaction, each write is a savepoint of it: it succeeds or fails
 * on its own, and the batch commits once. 1 when in a batch (the savepoint's statement run). */
static int store_in_batch(struct store *st, const char *sql)
{
    if (!st->batch)
        return 0;
    if (sqlite3_get_autocommit(st->db)) { /* SQLite rolled the whole batch back (an I/O error) */
        st->batch_lost = 1;
        return 0;
    }
    sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    return 1;
}

/* Before another try at a lock wanted since start: 0 when STORE_BUSY_DEADLINE has passed, else
 * 1 with SQLite's own wait cut to the time left. Each try waits SQLite's busy timeout itself,
 * so a try begun just before the deadline ran up to STORE_BUSY_TIMEOUT_MS past it (until
 * 2026-12 a write that "gives up after 30 s" gave up after 35). store_busy_reset undoes it. */
static int store_busy_left(struct store *st, double start)
{
    double left_ms = (STORE_BUSY_DEADLINE - (util_now() - start)) * 1000.0;
    if (left_ms < 1)
        return 0;
    sqlite3_busy_timeout(st->db, left_ms < STORE_BUSY_TIMEOUT_MS ? (int)left_ms
                                                                 : STORE_BUSY_TIMEOUT_MS);
    return 1;
}

static void store_busy_reset(struct store *st)
{
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
}

/* BEGIN IMMEDIATE, retrying on SQLITE_BUSY beyond the busy timeout so that concurrent
 * writers queue up instead of failing, STORE_BUSY_DEADLINE in all. Pending cache-hit updates
 * ride along. */
int store_begin(struct store *st)
{
    if (store_in_batch(st, "SAVEPOINT tt_write"))
        return 0;
    double start = util_now();
    int told = 0;
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            store_busy_reset(st);
            if (st->n_touches)
                store_touch_apply(st);
            return 0;
        }
        if ((rc & 0xff) != SQLITE_BUSY || !store_busy_left(st, start)) {
            int ret = store_fail(st, "cannot start a write"); /* SQLite's message first */
            store_busy_reset(st);
            return ret;
        }
        if (!told && st->busy_note) { /* after SQLite's own wait: say why nothing happens */
            st->busy_note(st->busy_ud, st->path);
            told = 1;
        }
        util_sleep_ms(1 + (int)((unsigned)getpid() % 7) + (attempt % 10) * 2);
    }
}

void store_set_busy_note(struct store *st, void (*note)(void *ud, const char *path), void *ud)
{
    st->busy_note = note;
    st->busy_ud = ud;
}

int store_try_begin(struct store *st)
{
    if (store_in_batch(st, "SAVEPOINT tt_write"))
        return 0;
    sqlite3_busy_timeout(st->db, 0);
    int rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return -1;
    if (st->n_touches)
        store_touch_apply(st);
    return 0;
}

int store_commit(struct store *st)
{
    if (store_in_batch(st, "RELEASE tt_write"))
        return 0;
    double start = util_now();
    for (;;) {
        int rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            store_busy_reset(st);
            st->wrote = 1;
            return 0;
        }
        if ((rc & 0xff) != SQLITE_BUSY || !store_busy_left(st, start)) {
            store_fail(st, "cannot commit");
            store_busy_reset(st);
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        util_sleep_ms(5);
    }
}

int store_rollback(struct store *st)
{
    if (store_in_batch(st, "ROLLBACK TO tt_write; RELEASE tt_write"))
        return -1;
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int store_batch_begin(struct store *st)
{
    if (!st || st->readonly)
        return 0;
    if (st->batch) {
        st->batch++;
        return 0;
    }
    /* A checkpoint still copying (started as the request left) is waited for before the
     * transaction begins, not inside it: a transaction that began while the copy ran reads
     * the WAL as it was then, so its commit could only append, and the WAL never started over
     * (~110 kB more per run, re-read by every open; issue 14). Not while a long answer is
     * pending: its write overlaps the copy's fsyncs (store_message_finish_whole). */
    int big = 0;
    for (const struct store_stream *str = st->streams; str; str = str->next)
        big |= str->total >= STORE_BIG_ANSWER;
    store_checkpoint_wait(st, !big);
    if (store_begin(st) != 0)
        return -1;
    st->batch = 1;
    st->batch_lost = 0;
    return 0;
}

int store_batch_end(struct store *st)
{
    if (!st || !st->batch || --st->batch)
        return 0;
    int rc = sqlite3_get_autocommit(st->db) ? 0 : store_commit(st);
    if (st->batch_lost && rc == 0)
        store_set_err(st, "the writes were lost: %s", sqlite3_errmsg(st->db));
    return st->batch_lost ? -1 : rc;
}

void store_bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, i);
}

void store_bind_count(sqlite3_stmt *s, int i, int64_t v)
{
    if (v >= 0)
        sqlite3_bind_int64(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

void store_bind_seconds(sqlite3_stmt *s, int i, double v)
{
    if (v >= 0)
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

size_t store_max_value(struct store *st)
{
    int lim = sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, -1);
    size_t room = lim > 8192 ? 4096 : (size_t)lim / 2; /* the row's other columns, its header */
    return lim > 0 ? (size_t)lim - room : 0;
}

int store_bind_big(struct store *st, sqlite3_stmt *s, int i, const char *v, size_t len,
                   const char *what)
{
    int rc = len <= (size_t)INT32_MAX
                 ? sqlite3_bind_text(s, i, v ? v : "", (int)len, SQLITE_STATIC)
                 : SQLITE_TOOBIG;
    if (rc == SQLITE_OK)
        return 0;
    if (rc == SQLITE_TOOBIG)
        store_set_err(st, "%s: %zu bytes is too large (SQLite stores at most %d bytes in one "
                          "value)", what, len, sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, -1));
    else
        store_set_err(st, "%s: %s", what, sqlite3_errstr(rc));
    return -1;
}

char *store_col_str(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? xstrndup((const char *)t, (size_t)sqlite3_column_bytes(s, i)) : NULL;
}

static const char *const store_roles[] = {"user", "assistant", "system", "tool"};

const char *store_col_role(sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    for (size_t k = 0; t && k < TT_ARRAY_LEN(store_roles); k++)
        if (strcmp(t, store_roles[k]) == 0)
            return store_roles[k];
    return NULL;
}

int store_role_index(const char *role)
{
    for (size_t k = 0; role && k < TT_ARRAY_LEN(store_roles); k++)
        if (role == store_roles[k] || strcmp(role, store_roles[k]) == 0)
            return (int)k + 1;
    return 0;
}

const char *store_role_at(int k)
{
    return k >= 1 && (size_t)k <= TT_ARRAY_LEN(store_roles) ? store_roles[k - 1] : NULL;
}

int64_t store_col_count(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i);
}

double store_col_seconds(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, i);
}

int store_pragma_int(struct store *st, const char *sql, int *out)
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

int store_run_steps(struct store *st, const char *const *steps, size_t n, const int64_t *bind,
                    const char *what)
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

/* ---------------------------------------------------------------- background checkpoint */

/* Commits checkpoint the WAL themselves only past this many pages (128 MiB): below it the copy
 * is left to store_checkpoint_async, off the path of an answer. At 16 MB, the end of a 10 MB
 * answer (its parts and its row: 18 MB of WAL) copied and synced the WAL inside its commit
 * (+~0.4 s at load 10). The journal size limit keeps the file from staying that large. */
#define STORE_CKPT_PAGES 32768
#define STORE_WAL_KEEP_BYTES 16777216 /* PRAGMA journal_size_limit: 16 MiB */
/* A WAL holding this much is worth a checkpoint. What it holds, not the file's size: a
 * checkpoint does not shrink the file (journal_size_limit keeps up to 16 MiB), and going by the
 * size, one long answer made every later run start a checkpoint (a second connection, two
 * fsyncs, joined at close) for the few pages it wrote (issue 14). */
#define STORE_CKPT_ASYNC_BYTES ((off_t)1 << 20)
/* A run that wrote this much starts a detached checkpoint at its close (store_free_as). */
#define STORE_CKPT_DETACH_BYTES ((off_t)256 << 10)
/* A WAL this large at close (a long answer: its parts and its row) is copied and started over
 * then (store_wal_restart): left to the next run, every open re-read it to rebuild the WAL
 * index (~1 ms per MB), and its background copy held back the reset while that run wrote more
 * (10 MB answers in a row: the WAL grew past 40 MB). */
#define STORE_CKPT_CLOSE_BYTES ((off_t)8 << 20)
/* Earlier runs' frames in the WAL past which a close with a detached checkpoint program copies
 * the WAL itself (their copies are not keeping up): two 10 MB answers' parts and rows. */
#define STORE_CKPT_PILE_BYTES ((off_t)40 << 20)
/* store_mapped_reads: the first 256 MiB of the file (past it SQLite reads as before). The
 * database file never shrinks (no VACUUM, no auto_vacuum), so no page of the map can vanish
 * under it. */
#define STORE_MAP_BYTES 268435456

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

/* What the WAL holds (its frames since it last started over, as the last commit of this
 * connection left it); -1 before this connection committed anything. */
static off_t store_wal_bytes(const struct store *st)
{
    if (st->wal_frames < 0)
        return -1;
    return (off_t)st->wal_frames * (st->page_size > 0 ? st->page_size : 4096);
}

/* The WAL hook: after each commit, the frames the WAL holds. It replaces SQLite's own
 * (wal_autocheckpoint's), so it checkpoints past STORE_CKPT_PAGES as that one did. */
static int store_wal_hook(void *ud, sqlite3 *db, const char *name, int frames)
{
    struct store *st = ud;
    st->wal_frames = frames;
    if (frames >= STORE_CKPT_PAGES)
        (void)sqlite3_wal_checkpoint(db, name);
    return SQLITE_OK;
}

void store_mapped_reads(struct store *st, int on)
{
    if (st)
        (void)sqlite3_exec(st->db, on ? "PRAGMA mmap_size = " TT_STR(STORE_MAP_BYTES)
                                      : "PRAGMA mmap_size = 0",
                           NULL, NULL, NULL);
}

int store_checkpoint_wait(struct store *st, int block)
{
    if (!st || !st->ckpt_started)
        return 0;
    if (!block && !__atomic_load_n(&st->ckpt_done, __ATOMIC_ACQUIRE))
        return -1;
    pthread_join(st->ckpt, NULL);
    st->ckpt_started = 0;
    return 0;
}

static int store_detached_running(const struct store *st);

void store_checkpoint_async(struct store *st)
{
    if (!st || store_checkpoint_wait(st, 0) != 0)
        return; /* the last one is still copying */
    /* Unknown before this connection's first commit (the prompt's, right before the request
     * leaves): the caller asks again after it. Nor while a detached checkpoint (an earlier
     * run's) copies it: it copies what this run adds too, and a copy of our own would make a
     * short answer's end wait for it (a one-shot right after a 10 MB answer: 2.77x). */
    if (store_wal_bytes(st) < STORE_CKPT_ASYNC_BYTES || store_detached_running(st))
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

/* ---------------------------------------------------------------- open / close */

int store_wal_truncate(struct store *st)
{
    double start = util_now();
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *s = NULL;
        int busy = 1;
        if (sqlite3_prepare_v2(st->db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &s, NULL) ==
                SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW)
            busy = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
        if (!busy)
            return 0;
        if (util_now() - start > 10.0) {
            store_set_err(st, "the write-ahead log %s-wal could not be emptied: another "
                              "process kept reading the database", st->path);
            return -1;
        }
        util_sleep_ms(5 + (attempt % 10) * 5);
    }
}

/* Copy the whole WAL into the database, then start it over with one small write: its new
 * header's salt ends the old frames, so the next open's recovery reads one frame, and the next
 * writes go over the file's blocks from its start. Not truncated to 0 bytes (TRUNCATE): that
 * ftruncate of ~18 MB took 10-24 ms of the close on this disk (load 5), and the next run then
 * allocated the blocks again; journal_size_limit cuts the file to 16 MiB at the write's commit.
 * Never waits for another process's reader (it would keep the old frames: the WAL then starts
 * over at a later write, as it would have anyway). mode: "RESTART" in this process's close
 * (busy timeout 0), "PASSIVE" in the detached checkpoint (never holds the write lock while it
 * copies, so another tokterm's writes go on meanwhile). 1 when the WAL holds at most one frame
 * now (started over, or empty), -1 when another checkpoint was running (SQLite does not wait
 * for it), else 0. */
static int store_wal_restart_db(sqlite3 *db, const char *mode, const long *frames)
{
    char q[64];
    snprintf(q, sizeof q, "PRAGMA wal_checkpoint(%s)", mode);
    sqlite3_stmt *s = NULL;
    int whole = 0, log = -1, rc = sqlite3_prepare_v2(db, q, -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        log = sqlite3_column_int(s, 1);
        whole = sqlite3_column_int(s, 0) == 0 && log == sqlite3_column_int(s, 2);
    }
    sqlite3_finalize(s);
    if ((rc & 0xff) == SQLITE_BUSY || (rc == SQLITE_ROW && log == -1))
        return -1;
    if (whole && log <= 1)
        return 1; /* nothing to start over */
    /* Read and written back in one write transaction: another process's migration cannot
     * come in between and have its version set back (no wait for it: busy means skip). */
    int v = -1;
    if (whole && sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK) {
        s = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
        if (v >= 0) { /* rewrites page 1 as it is: the one frame of the new WAL */
            snprintf(q, sizeof q, "PRAGMA user_version = %d", v);
            sqlite3_exec(db, q, NULL, NULL, NULL);
        }
        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            v = -1;
        }
    }
    return v >= 0 && frames && *frames == 1;
}

/* In this process's close; waits for a detached checkpoint that is copying (at most
 * STORE_RESTART_WAIT), then copies what is left itself. */
#define STORE_RESTART_WAIT 2.0
static void store_wal_restart(struct store *st)
{
    sqlite3_busy_timeout(st->db, 0);
    double start = util_now();
    while (store_wal_restart_db(st->db, "RESTART", &st->wal_frames) < 0 &&
           util_now() - start < STORE_RESTART_WAIT)
        util_sleep_ms(5);
}

/* ---------------------------------------------------------------- the detached checkpoint */

/* How long the detached checkpoint tries to copy the WAL whole and start it over while other
 * processes write or read it (each try waits longer, up to STORE_DETACH_WAIT_MAX_MS). */
#define STORE_DETACH_SECONDS 10.0
#define STORE_DETACH_WAIT_MAX_MS 500

void store_set_checkpoint_exe(struct store *st, const char *exe)
{
    if (!st)
        return;
    free(st->ckpt_exe);
    st->ckpt_exe = exe && access(exe, X_OK) == 0 ? xstrdup(exe) : NULL;
}

/* SQLite's "dead man switch" byte in the -shm file (UNIX_SHM_DMS of os_unix.c): the first
 * connection to open a database finds nobody holding it, and rebuilds the WAL index from the
 * whole WAL (~1 ms per MB, and more under load). */
#define STORE_SHM_DMS 128
/* A byte of the -shm file no SQLite lock uses: a detached checkpoint holds an exclusive
 * open-file-description lock on it while it runs (store_detached_running). */
#define STORE_SHM_DETACHED 129

/* The -shm file opened with flags (close-on-exec), or -1. */
static int store_shm_open(const struct store *st, int flags)
{
    char *shm = xasprintf("%s-shm", st->path);
    int fd = open(shm, flags | O_CLOEXEC | O_NOFOLLOW);
    free(shm);
    return fd;
}

/* An open-file-description lock of `type` (F_RDLCK, F_WRLCK, F_UNLCK) on one byte of the -shm
 * file open as fd, without waiting: 0 or -1. */
static int store_shm_lock(int fd, short type, off_t byte)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* The -shm file, open, with a shared lock on its DMS byte and the exclusive lock of a detached
 * copy running (STORE_SHM_DETACHED): a detached copy's fd 3. -1 when it cannot. */
static int store_detach_fd(const struct store *st)
{
    int keep = store_shm_open(st, O_RDWR);
    if (keep >= 0 && (store_shm_lock(keep, F_RDLCK, STORE_SHM_DMS) != 0 ||
                      store_shm_lock(keep, F_WRLCK, STORE_SHM_DETACHED) != 0)) {
        close(keep);
        keep = -1;
    }
    return keep;
}

/* Start `exe --checkpoint PATH` as nobody's child (util_spawn_detached: a session of its own,
 * /dev/null for stdin, stdout and stderr, an empty environment, no signal blocked), with as
 * fd 3 the -shm file with a shared lock on its DMS byte. The lock is an open file
 * description's (F_OFD_SETLK): taken here, it passes to the child through fork and exec, and
 * to the opens of other processes it is a connection still open, so the next tokterm, started
 * before the checkpoint's own SQLite connection is open (its exec and open take a while on a
 * loaded machine), uses the WAL index as this process leaves it instead of re-reading a 20 MB
 * WAL (a one-shot right after a 10 MB answer: 16 ms of CPU with the lock, 31 ms without).
 * A process that goes on after the close (the chat, a profile switch) waits for the middle
 * process of a double fork, so it keeps no zombie; a close for the exit (at_exit) forks once
 * and does not wait: the exit follows at once. 0, or -1 (then the caller copies the WAL
 * itself). */
static int store_checkpoint_detach(struct store *st, int at_exit)
{
    char *argv[] = {(char *)"tokterm", (char *)"--checkpoint", st->path, NULL};
    int keep = store_detach_fd(st);
    int rc = keep >= 0 ? util_spawn_detached(st->ckpt_exe, argv, &keep, 1, NULL, NULL, at_exit)
                       : -1;
    if (keep >= 0)
        close(keep); /* the child's copy holds the lock */
    return rc;
}

/* 1 while a detached checkpoint of this database runs (its lock on STORE_SHM_DETACHED). */
static int store_detached_running(const struct store *st)
{
    int fd = store_shm_open(st, O_RDONLY);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = STORE_SHM_DETACHED,
                       .l_len = 1};
    int busy = fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    if (fd >= 0)
        close(fd);
    return busy;
}

/* The pages this connection wrote to the WAL, in bytes. */
static off_t store_wrote_bytes(struct store *st)
{
    int cur = 0, hi = 0;
    if (sqlite3_db_status(st->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 0) != SQLITE_OK)
        return 0;
    return (off_t)cur * (st->page_size > 0 ? st->page_size : 4096);
}

static int store_detach_hook(void *ud, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    *(long *)ud = frames;
    return SQLITE_OK;
}

void (*store_checkpoint_test_hook)(const char *path);

int store_checkpoint_main(int argc, char **argv)
{
    /* fd 3, the -shm file's lock from store_checkpoint_detach, stays open until the exit:
     * closing it would end the lock before this connection holds SQLite's own */
    if (argc != 1 || !argv[0][0])
        return 2;
    /* At the normal priority: a short one-shot right after a 10 MB answer took 1.03x the
     * baseline's wall with it, 1.09x at nice 19 (15 rounds, load 8.5), and a starved copy
     * would leave the WAL to grow */
    char *err = NULL;
    if (sqlite_dl_load(&err) != 0) {
        free(err);
        return 1;
    }
    sqlite3 *db = NULL;
    int ok = 0;
    if (sqlite3_open_v2(argv[0], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) ==
        SQLITE_OK) {
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
        long frames = -1;
        sqlite3_wal_hook(db, store_detach_hook, &frames);
        sqlite3_stmt *s = NULL;
        int wal = sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL) == SQLITE_OK &&
                  sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) &&
                  strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
        sqlite3_finalize(s);
        if (wal && sqlite3_exec(db,
                                "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = "
                                TT_STR(STORE_WAL_KEEP_BYTES), NULL, NULL, NULL) == SQLITE_OK) {
            double start = util_now();
            int running = 1;
            for (int ms = 10;; ms = ms * 2 > STORE_DETACH_WAIT_MAX_MS ? STORE_DETACH_WAIT_MAX_MS
                                                                     : ms * 2) {
                ok = store_wal_restart_db(db, "PASSIVE", &frames);
                if (ok == 1 && running) {
                    /* Started over, and then no longer running: a run that wrote its frames
                     * and found the lock still held left them to this copy, so they are
                     * copied once more after the lock is gone (CI: 778 frames were left
                     * when the last of 16 long runs closed between this copy's restart and
                     * its exit). A run that closes after it starts a copy of its own. */
                    if (store_checkpoint_test_hook)
                        store_checkpoint_test_hook(argv[0]);
                    (void)store_shm_lock(3, F_UNLCK, STORE_SHM_DETACHED);
                    running = 0;
                    continue;
                }
                if (ok == 1 || util_now() - start >= STORE_DETACH_SECONDS)
                    break;
                util_sleep_ms(ms);
            }
        }
    }
    sqlite3_close(db);
    return ok == 1 ? 0 : 1;
}

/* Close st. at_exit: the process ends right after (_exit): what the close writes is written
 * and the checkpoint joined, but SQLite's memory (the parsed schema, the statements, the page
 * cache: ~5,000 frees and ~0.4M instructions after a one-shot's answer) and st's are left to
 * the exit, as are its descriptors and locks. Not after the run that made the schema: its
 * close checkpoints. */
static void store_free_as(struct store *st, int at_exit)
{
    if (st->ckpt_started)
        pthread_join(st->ckpt, NULL);
    if (st->created && st->wrote && !st->readonly) {
        /* This process made the schema (a new file, or an upgrade): it goes into the database
         * file, so that tokterm.db alone is always a tokterm database (the tables, not an
         * empty file). Other runs leave their pages in the WAL: a checkpoint at every exit cost
         * three fsyncs per run (issue 14); store_checkpoint_async copies the WAL while a
         * request is on the wire once it passes STORE_CKPT_ASYNC_BYTES. */
        sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, (int *)NULL);
        sqlite3_exec(st->db, "PRAGMA wal_checkpoint(PASSIVE)", NULL, NULL, NULL);
    } else if (st->wrote && !st->readonly && st->ckpt_exe &&
               store_wal_bytes(st) - store_wrote_bytes(st) < STORE_CKPT_PILE_BYTES &&
               (store_wrote_bytes(st) < STORE_CKPT_DETACH_BYTES || store_detached_running(st) ||
                store_checkpoint_detach(st, at_exit) == 0)) {
        /* Copied and started over by a process of its own, after this one has exited: the
         * copy and its fsyncs (a 10 MB answer: 18 MB and 30-40 ms) are not the user's wait.
         * One still running (an earlier run's) copies this run's frames too: it tries until
         * it can start the WAL over. Started by a run that wrote 256 KiB or more: left in
         * the WAL, the next open re-reads it to rebuild the WAL index (~1 ms per MB) and
         * the next request copies it while it is out, joined at its end (a short one-shot
         * right after a 0.9 MB answer: 26.9 ms when only runs that wrote 1 MiB started one,
         * 21.5 ms now). Shorter runs start none (a detached copy loads tokterm and SQLite
         * again: ~15 ms of CPU for a few pages): their pages wait for a request once the WAL
         * holds 1 MiB (store_checkpoint_async). A short run after a long one finds the long
         * one's copy running, or the WAL started over (copied here, in the process, a
         * one-shot right after a 10 MB answer took 2.5x as long). The
         * earlier runs' frames still in the WAL past STORE_CKPT_PILE_BYTES (long answers in
         * a row faster than their copies: nothing can start the WAL over while another run
         * writes to it) are copied here, as before, so the WAL stays within that and two
         * runs' writes. */
    } else if (st->wrote && !st->readonly && store_wal_bytes(st) >= STORE_CKPT_CLOSE_BYTES) {
        store_wal_restart(st);
    }
    if (at_exit && !st->created)
        return;
    for (size_t i = 0; i < st->n_stmts; i++)
        sqlite3_finalize(st->stmts[i].stmt);
    sqlite3_close(st->db);
    while (st->streams) {
        struct store_stream *s = st->streams;
        st->streams = s->next;
        store_stream_free(s);
    }
    free(st->touches);
    free(st->ckpt_exe);
    free(st->path);
    free(st->err);
    free(st);
}

static void store_free(struct store *st)
{
    store_free_as(st, 0);
}

/* Tests only: TOKTERM_TEST_SQLITE_LENGTH=N lowers SQLITE_LIMIT_LENGTH to N bytes, so that a
 * test plays an answer over SQLite's limit (1e9 bytes by default) with 100 KB. */
static void store_test_limit(struct store *st)
{
    const char *v = getenv("TOKTERM_TEST_SQLITE_LENGTH");
    long n = v ? strtol(v, NULL, 10) : 0;
    if (n > 0 && n < INT32_MAX)
        sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, (int)n);
}

/* Open the connection and check it can write and read: 0, or -1 with *err set. */
static int store_connect(struct store *st, const char *path, char **err)
{
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        *err = xasprintf("cannot open the database %s: %s%s", path,
                         st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc), store_hint(rc));
        return -1;
    }
    /* No checkpoint when the connection closes (store_free makes one exception: the run that
     * made the schema). The WAL is copied by store_checkpoint_async while a request is on the
     * wire, or by a commit once it passes STORE_CKPT_PAGES (wal_autocheckpoint). */
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    store_test_limit(st);
    if (sqlite3_db_readonly(st->db, "main") == 1) {
        *err = xasprintf("the database %s is read-only: tokterm needs to write to it", path);
        return -1;
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
        return -1;
    }
    return 0;
}

/* Switch to WAL mode. That needs a moment of exclusive access: retry while others hold it.
 * 0, or -1 with *err set. */
static int store_wal(struct store *st, const char *path, char **err)
{
    double start = util_now();
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            return 0;
        if ((rc & 0xff) != SQLITE_BUSY || util_now() - start > STORE_BUSY_DEADLINE) {
            store_fail(st, "cannot switch the database to WAL mode");
            *err = xasprintf("%s: %s", path, st->err);
            return -1;
        }
        util_sleep_ms(2 + attempt % 20);
    }
}

/* The connection's settings and functions (tt_contains, the tt_words tokenizer), then the
 * schema brought up to date. 0, or -1 with the error recorded. */
static int store_setup(struct store *st, struct store_open_info *info)
{
    if (store_exec(st,
                   "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
                   "PRAGMA secure_delete = FAST;"
                   "PRAGMA temp_store = MEMORY; PRAGMA cache_size = " TT_STR(STORE_CACHE_KIB) "; "
                   "PRAGMA journal_size_limit = " TT_STR(STORE_WAL_KEEP_BYTES),
                   "cannot configure the database") != 0 ||
        store_pragma_int(st, "PRAGMA page_size", &st->page_size) != 0 ||
        (sqlite3_wal_hook(st->db, store_wal_hook, st), 0) ||
        store_search_functions(st) != SQLITE_OK ||
        (!(st->words = fts_words_register(st->db)) &&
         (store_set_err(st, "this SQLite has no FTS5 full-text search (tokterm needs it)"), 1)) ||
        store_migrate(st, &info->from_version) != 0) {
        if (!st->err)
            store_fail(st, "cannot set up the database");
        return -1;
    }
    return 0;
}

/* store_open, and store_open_searcher with recover = 0. */
static struct store *store_open_as(const char *path, struct store_open_info *info, char **err,
                                   int recover)
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
    int memory = strcmp(path, STORE_MEMORY) == 0;
    if (!memory && store_prepare_file(path, info, err) != 0)
        return NULL;

    struct store *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(path);
    st->cache_ttl = STORE_CACHE_DEFAULT_TTL;
    st->cache_max = STORE_CACHE_DEFAULT_MAX;
    st->wal_frames = -1;
    st->content_last = -1;
    snprintf(st->writer, sizeof st->writer, "%ld:%llu", (long)getpid(),
             store_proc_start((long)getpid(), NULL));
    if (store_connect(st, path, err) != 0 || store_wal(st, path, err) != 0) {
        store_free(st);
        return NULL;
    }
    if (store_setup(st, info) != 0) {
        *err = xstrdup(st->err);
        store_free(st);
        return NULL;
    }
    info->version = STORE_SCHEMA_VERSION;
    st->created = info->from_version != STORE_SCHEMA_VERSION;
    if (!memory)
        store_fix_modes(path, info);
    int n = recover ? store_recover(st) : 0;
    if (n < 0) {
        *err = xstrdup(st->err);
        store_free(st);
        return NULL;
    }
    info->recovered = n;
    st->last_commit = store_mono(st);
    return st;
}

struct store *store_open(const char *path, struct store_open_info *info, char **err)
{
    return store_open_as(path, info, err, 1);
}

/* A reader's path that names nothing: an empty database in memory, so that the command reads
 * no conversations and leaves no file behind (a typo in --db made one, and said nothing). */
static struct store *store_open_missing(const char *path, struct store_open_info *info,
                                        char **err)
{
    struct stat sb;
    if (!path || !*path || stat(path, &sb) == 0 || errno != ENOENT) /* stat: a dangling */
        return NULL;                                                  /* link makes none */
    struct store *st = store_open_as(STORE_MEMORY, info, err, 0);
    if (st)
        info->missing = 1;
    return st;
}

struct store *store_open_searcher(const char *path, struct store_open_info *info, char **err)
{
    struct stat sb;
    struct store *st = store_open_missing(path, info, err);
    if (st || (err && *err))
        return st;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        return store_open(path, info, err);
    st = store_open_as(path, info, err, 0);
    if (st)
        return st;
    free(*err); /* a file it cannot write: read it as it is */
    return store_open_reader(path, info, err);
}

char *store_reader_uri(const char *path, int immutable)
{
    struct buf uri = BUF_INIT;
    buf_appends(&uri, "file:");
    for (const char *p = path; *p; p++) {
        if (*p == '%' || *p == '?' || *p == '#')
            buf_printf(&uri, "%%%02X", (unsigned char)*p);
        else
            buf_appendc(&uri, *p);
    }
    if (immutable)
        buf_appends(&uri, "?immutable=1");
    return buf_take(&uri);
}

/* A read-only connection to path (SQLITE_OPEN_READONLY; with immutable=1 when the WAL index
 * cannot be made: a read-only directory, a full disk). 0, 1 when the schema is not this
 * tokterm's current one (a writer must upgrade it), or -1 with *err set. */
static int store_connect_reader(struct store *st, const char *path, int immutable, int *version,
                                char **err)
{
    char *uri = store_reader_uri(path, immutable);
    int rc = sqlite3_open_v2(uri, &st->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        *err = xasprintf("cannot open the database %s: %s%s", path,
                         st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc), store_hint(rc));
        return -1;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    store_test_limit(st);
    int app = 0;
    if (store_pragma_int(st, "PRAGMA user_version", version) != 0 ||
        store_pragma_int(st, "PRAGMA application_id", &app) != 0) {
        rc = sqlite3_extended_errcode(st->db);
        *err = xasprintf((rc & 0xff) == SQLITE_NOTADB
                             ? "%s is not a tokterm database (not an SQLite file)%.0s%.0s"
                             : "cannot read the database %s: %s%s",
                         path, sqlite3_errmsg(st->db), store_hint(rc));
        return -1;
    }
    if (*version != STORE_SCHEMA_VERSION || app != STORE_APP_ID)
        return 1;
    return 0;
}

static struct store *store_reader_new(const char *path)
{
    struct store *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(path);
    st->readonly = 1;
    st->wal_frames = -1;
    st->content_last = -1;
    st->cache_ttl = STORE_CACHE_DEFAULT_TTL;
    st->cache_max = STORE_CACHE_DEFAULT_MAX;
    return st;
}

struct store *store_open_reader(const char *path, struct store_open_info *info, char **err)
{
    struct store_open_info dummy;
    if (!info)
        info = &dummy;
    struct stat sb;
    *err = NULL;
    struct store *st = store_open_missing(path, info, err);
    if (st || *err)
        return st;
    if (!path || !*path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        return store_open(path, info, err); /* nothing to read yet: as a writer opens it */
    memset(info, 0, sizeof *info);
    if (sqlite_dl_load(err) != 0)
        return NULL;
    st = store_reader_new(path);
    int version = 0;
    int rc = store_connect_reader(st, path, 0, &version, err);
    if (rc < 0) { /* no WAL index could be made (a read-only directory, a full disk) */
        char *first = *err;
        *err = NULL;
        store_free(st);
        st = store_reader_new(path);
        rc = store_connect_reader(st, path, 1, &version, err);
        if (rc < 0) {
            free(*err);
            *err = first;
        } else {
            free(first);
        }
    }
    if (rc != 0) {
        store_free(st);
        if (rc < 0)
            return NULL;
        free(*err);
        return store_open(path, info, err); /* an older schema: a writer upgrades it */
    }
    if (store_exec(st,
                   "PRAGMA temp_store = MEMORY; PRAGMA cache_size = " TT_STR(STORE_CACHE_KIB),
                   "cannot configure the database") != 0 ||
        store_search_functions(st) != SQLITE_OK ||
        (!(st->words = fts_words_register(st->db)) &&
         (store_set_err(st, "this SQLite has no FTS5 full-text search (tokterm needs it)"), 1))) {
        *err = xstrdup(st->err ? st->err : "cannot set up the database");
        store_free(st);
        return NULL;
    }
    info->from_version = info->version = STORE_SCHEMA_VERSION;
    store_fix_modes(path, info);
    st->last_commit = store_mono(st);
    return st;
}

static void store_close_as(struct store *st, int at_exit)
{
    if (!st)
        return;
    while (st->streams) {
        int64_t id = st->streams->id;
        if (store_message_finish(st, id, STORE_INTERRUPTED, NULL, NULL, NULL, NULL) != 0 &&
            st->streams && st->streams->id == id) {
            struct store_stream *s = st->streams; /* could not save: drop it */
            st->streams = s->next;
            store_stream_free(s);
        }
    }
    if (st->n_touches && store_begin(st) == 0) /* store_begin applies them */
        store_commit(st);
    if (getenv("TOKTERM_DEBUG_STORE")) {
        fprintf(stderr, "tokterm: debug: store: %llu VM steps, %u statements compiled\n",
                st->vm_steps, st->compiled);
        int miss = 0, hi = 0;
        sqlite3_db_status(st->db, SQLITE_DBSTATUS_CACHE_MISS, &miss, &hi, 0);
        fprintf(stderr, "tokterm: debug: store: %d pages read into the page cache\n", miss);
        /* the measure of store_free_as's choice of a detached checkpoint (tests) */
        fprintf(stderr, "tokterm: debug: store: wrote %lld bytes to the WAL\n",
                (long long)store_wrote_bytes(st));
        if (st->finished)
            fprintf(stderr, "tokterm: debug: store: %u statements compiled from the first "
                            "answer's end on\n", st->compiled - st->compiled_end);
        if (at_exit && !st->created)
            fputs("tokterm: debug: store: closed for the exit (its memory left to it)\n",
                  stderr);
    }
    store_free_as(st, at_exit);
}

void store_close(struct store *st)
{
    store_close_as(st, 0);
}

void store_close_at_exit(struct store *st)
{
    store_close_as(st, 1);
}

unsigned store_statements_compiled(const struct store *st)
{
    return st ? st->compiled : 0;
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
    return (unsigned)s < TT_ARRAY_LEN(store_status_names) ? store_status_names[s] : "?";
}

int store_status_parse(const char *name)
{
    for (size_t i = 0; name && i < TT_ARRAY_LEN(store_status_names); i++)
        if (strcmp(name, store_status_names[i]) == 0)
            return (int)i;
    return -1;
}
