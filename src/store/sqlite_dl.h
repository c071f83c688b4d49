/* sqlite_dl.h - SQLite through a table of its functions, filled when the store is first opened.
 *
 * By default SQLite is linked in (Debian's libsqlite3.a, configure's SQLITE_LINK): the table
 * holds its functions, and nothing of SQLite is touched before the store opens. Built with
 * --with-sqlite=shared, the table is filled from a dlopen() of the shared library (its soname
 * comes from configure): a scripted `tokterm --incognito -p ...` never maps it, and the
 * system's SQLite is used as it is updated. sqlite_dl_load() fills the table, once per
 * process (thread-safe), and sets SQLite up (its allocator, its page cache, the WAL's VFS).
 *
 * Include this header instead of <sqlite3.h>: it includes it for the types and constants, and
 * redirects each sqlite3_*() function tokterm calls through the table. Call sqlite_dl_load()
 * before the first of them (store_open() does). A function that is not in SQLITE_DL_FUNCS
 * fails to link with "undefined reference to sqlite3_..." in the shared build: add it to the
 * list and to the #defines below. */
#ifndef TT_SQLITE_DL_H
#define TT_SQLITE_DL_H

#include <stddef.h>

#include <sqlite3.h>

/* Every sqlite3_ function tokterm uses, without its prefix. */
#define SQLITE_DL_FUNCS(X)                                                                     \
    X(bind_blob) X(bind_double) X(bind_int) X(bind_int64) X(bind_null) X(bind_pointer)         \
    X(bind_text) X(busy_timeout) X(changes) X(changes64) X(clear_bindings) X(close)            \
    X(column_blob) X(column_bytes) X(column_double) X(column_int) X(column_int64)              \
    X(column_text) X(column_type) X(create_function) X(db_config) X(db_readonly) X(db_status)     \
    X(errmsg)     \
    X(errstr) X(exec) X(extended_errcode) X(extended_result_codes) X(filename_database)       \
    X(finalize) X(free)                                                                        \
    X(get_autocommit) X(get_auxdata) X(last_insert_rowid) X(libversion) X(limit) X(malloc64) \
    X(open_v2)                                                                                 \
    X(prepare_v2) X(prepare_v3) X(reset) X(result_double) X(result_error_code) X(result_int)   \
    X(result_int64) X(result_null) X(set_auxdata) X(step) X(stmt_busy) X(stmt_status) X(user_data)            \
    X(value_bytes) X(value_double) X(value_int64) X(value_text) X(vfs_find) X(vfs_register) \
    X(wal_checkpoint) X(wal_hook)

/* The table: one pointer per function, with the type of its declaration in <sqlite3.h>. */
struct sqlite_dl {
#define SQLITE_DL_MEMBER(name) __typeof__(sqlite3_##name) *name;
    SQLITE_DL_FUNCS(SQLITE_DL_MEMBER)
#undef SQLITE_DL_MEMBER
};
extern struct sqlite_dl sqlite_dl_api;

/* Load the library and every function of the list (only the first call does the work).
 * 0 on success; -1 with *err set to a message that says what to install (free it). */
int sqlite_dl_load(char **err);
/* Before the first sqlite_dl_load: this process will read many pages (a search), so that the
 * page cache is set up in a huge page (see sqlite_dl.c). */
void sqlite_dl_prefer_large_reads(void);
/* A long answer's text, len bytes at text in a block of cap bytes from base (huge_alloc'd,
 * malloc'd), is lent to the record SQLite makes of it in the statement this thread runs next:
 * SQLite's allocator hands out room in the block for the first large block that fits.
 * - ends_record: the text is the record's last value (messages.content set whole, content the
 *   last column). A block of len + 16 bytes or more, up to the room before the text, is put
 *   so that it ends where the text does: SQLite then copies the text onto itself (glibc's
 *   memcpy does nothing when source and destination are the same; so does ASan's check), and
 *   writes the header and the other columns in the room. A copy of the text (len to len + 2
 *   bytes) is not placed. The block may not be 8-byte aligned: SQLite reads and writes a
 *   record byte by byte.
 * - else, or when the block does not fit there: the rest of the block past the text, already
 *   faulted in where the text's last huge page reaches. A fresh 2 MiB huge page costs 0.1-0.2
 *   ms to fault in on this project's VM, 3-5 ms when memory was freed seconds before
 *   (bench/freshmem.c).
 * sqlite_dl_lend_end(base) after the statement is reset: 0, or 1 when SQLite still holds the
 * record (not expected: a statement frees its registers when it halts); base is then SQLite's,
 * freed with the record, and the caller must not free it (nor write to it). */
void sqlite_dl_lend(char *base, const char *text, size_t len, size_t cap, int ends_record);
int sqlite_dl_lend_end(char *base);
/* How many of SQLite's large blocks were lent so far (placed: only those placed to end where
 * the text does) (tests). */
unsigned long sqlite_dl_lend_used(int placed);

#ifndef SQLITE_DL_NO_REDIRECT
#define sqlite3_vfs_find (sqlite_dl_api.vfs_find)
#define sqlite3_vfs_register (sqlite_dl_api.vfs_register)
#define sqlite3_bind_blob (sqlite_dl_api.bind_blob)
#define sqlite3_bind_double (sqlite_dl_api.bind_double)
#define sqlite3_bind_int (sqlite_dl_api.bind_int)
#define sqlite3_bind_int64 (sqlite_dl_api.bind_int64)
#define sqlite3_bind_null (sqlite_dl_api.bind_null)
#define sqlite3_bind_pointer (sqlite_dl_api.bind_pointer)
#define sqlite3_bind_text (sqlite_dl_api.bind_text)
#define sqlite3_busy_timeout (sqlite_dl_api.busy_timeout)
#define sqlite3_changes (sqlite_dl_api.changes)
#define sqlite3_changes64 (sqlite_dl_api.changes64)
#define sqlite3_clear_bindings (sqlite_dl_api.clear_bindings)
#define sqlite3_close (sqlite_dl_api.close)
#define sqlite3_column_blob (sqlite_dl_api.column_blob)
#define sqlite3_column_bytes (sqlite_dl_api.column_bytes)
#define sqlite3_column_double (sqlite_dl_api.column_double)
#define sqlite3_column_int (sqlite_dl_api.column_int)
#define sqlite3_column_int64 (sqlite_dl_api.column_int64)
#define sqlite3_column_text (sqlite_dl_api.column_text)
#define sqlite3_column_type (sqlite_dl_api.column_type)
#define sqlite3_create_function (sqlite_dl_api.create_function)
#define sqlite3_db_config (sqlite_dl_api.db_config)
#define sqlite3_db_readonly (sqlite_dl_api.db_readonly)
#define sqlite3_db_status (sqlite_dl_api.db_status)
#define sqlite3_errmsg (sqlite_dl_api.errmsg)
#define sqlite3_errstr (sqlite_dl_api.errstr)
#define sqlite3_exec (sqlite_dl_api.exec)
#define sqlite3_extended_errcode (sqlite_dl_api.extended_errcode)
#define sqlite3_extended_result_codes (sqlite_dl_api.extended_result_codes)
#define sqlite3_finalize (sqlite_dl_api.finalize)
#define sqlite3_free (sqlite_dl_api.free)
#define sqlite3_get_autocommit (sqlite_dl_api.get_autocommit)
#define sqlite3_get_auxdata (sqlite_dl_api.get_auxdata)
#define sqlite3_last_insert_rowid (sqlite_dl_api.last_insert_rowid)
#define sqlite3_libversion (sqlite_dl_api.libversion)
#define sqlite3_limit (sqlite_dl_api.limit)
#define sqlite3_malloc64 (sqlite_dl_api.malloc64)
#define sqlite3_open_v2 (sqlite_dl_api.open_v2)
#define sqlite3_prepare_v2 (sqlite_dl_api.prepare_v2)
#define sqlite3_prepare_v3 (sqlite_dl_api.prepare_v3)
#define sqlite3_reset (sqlite_dl_api.reset)
#define sqlite3_result_double (sqlite_dl_api.result_double)
#define sqlite3_result_error_code (sqlite_dl_api.result_error_code)
#define sqlite3_result_int (sqlite_dl_api.result_int)
#define sqlite3_result_int64 (sqlite_dl_api.result_int64)
#define sqlite3_result_null (sqlite_dl_api.result_null)
#define sqlite3_set_auxdata (sqlite_dl_api.set_auxdata)
#define sqlite3_step (sqlite_dl_api.step)
#define sqlite3_stmt_busy (sqlite_dl_api.stmt_busy)
#define sqlite3_stmt_status (sqlite_dl_api.stmt_status)
#define sqlite3_value_bytes (sqlite_dl_api.value_bytes)
#define sqlite3_value_double (sqlite_dl_api.value_double)
#define sqlite3_value_int64 (sqlite_dl_api.value_int64)
#define sqlite3_user_data (sqlite_dl_api.user_data)
#define sqlite3_value_text (sqlite_dl_api.value_text)
#define sqlite3_wal_checkpoint (sqlite_dl_api.wal_checkpoint)
#define sqlite3_wal_hook (sqlite_dl_api.wal_hook)
#define sqlite3_filename_database (sqlite_dl_api.filename_database)
#endif

#endif
