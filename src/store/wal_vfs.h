/* wal_vfs.h - a SQLite VFS that gathers the writes to a WAL file.
 *
 * SQLite writes each WAL frame with two calls, its 24-byte header and then its page: a 10 MB
 * answer was 4,884 pwrite calls, ~11-15 ms of the save on the VMs tokterm is measured on,
 * where the same bytes in writes of 64 frames take ~2.3 ms. This VFS wraps the default one
 * (unix) and gathers the writes SQLite makes to a WAL file while each starts where the last
 * ended, up to 124 KiB; they are written when a commit frame's page is (so a failed write
 * fails the commit), or before any other call on the file (a read, a sync, a truncate, a
 * lock, a close) or write elsewhere, which is written at once (a rewritten frame header: the
 * last one SQLite writes before it publishes such a commit), and when the connection gives up
 * the WAL's write lock, which SQLite does on the database file (a rolled-back transaction's
 * spilled frames, which must not land later over another writer's commit). Frames not committed yet are
 * invisible to other connections until the WAL index says so, which SQLite updates after that
 * commit's writes: nothing another connection reads, and nothing a recovery of the file needs
 * after an exit without a close, is still gathered. Other files keep the underlying methods. */
#ifndef TT_WAL_VFS_H
#define TT_WAL_VFS_H

/* Register the VFS as the default, wrapping the default before it (once; sqlite_dl_init). */
void wal_vfs_install(void);
/* Writes made to WAL files so far by the underlying VFS (tests). */
unsigned long wal_vfs_writes(void);

#endif
