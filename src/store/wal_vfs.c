/* wal_vfs.c - SQLite's writes to a WAL file, gathered: one write per commit (see wal_vfs.h). */
#include "config.h"
#include "store/wal_vfs.h"

#include "store/sqlite_dl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The bytes gathered before they are written all the same (a commit larger than this is
 * written in pieces of it), and the first size of the buffer (it doubles up to the most).
 * Under 128 KiB: the unix VFS masks the length of one write with 0x1ffff (os_unix.c,
 * seekAndWriteFd), so a write of 128 KiB or more is cut short, and one of 128 KiB more
 * than a multiple of 128 KiB ends in a write of 0 bytes, which it reports as SQLITE_FULL. */
#define WAL_GATHER_MAX (124 * 1024)
#define WAL_GATHER_FIRST (16 * 1024)
/* A WAL frame's header: its bytes 4-7 hold the database's size in pages after a commit, 0 in
 * the other frames of a transaction (SQLite's file format, "WAL frame header"). */
#define WAL_FRAME_HDR 24

struct wal_main;

/* What this VFS keeps beside the underlying file, which comes first in the sqlite3_file
 * SQLite allocates (szOsFile): the underlying methods are called with the same pointer. */
struct wal_gather {
    const sqlite3_io_methods *io; /* the underlying file's methods */
    char *buf;                    /* bytes [off, off + len) of the file, not written yet */
    size_t len, cap;
    sqlite3_int64 off;
    sqlite3_int64 next; /* where the last write ended (-1 after a failed one) */
    int commit; /* the last write was a commit frame's header: its page ends the commit */
    struct wal_main *main; /* the database file of the same connection (NULL: not found) */
};

/* The same place in a database file: its WAL's file while that is open, found by the name
 * SQLite gives both (sqlite3_filename_database of the WAL's name is the very pointer the
 * database's xOpen had: one per connection). */
struct wal_main {
    const sqlite3_io_methods *io;
    const char *name;
    sqlite3_file *wal;
    struct wal_main *next; /* the open database files (wal_mains) */
};

static sqlite3_vfs wal_vfs;
static sqlite3_vfs *wal_under;
static size_t wal_gather_at; /* where struct wal_gather (or wal_main) starts in the file */
static sqlite3_io_methods wal_io;
static atomic_ulong wal_writes; /* writes made to WAL files by the underlying VFS */
static struct wal_main *wal_mains;
static pthread_mutex_t wal_mains_lock = PTHREAD_MUTEX_INITIALIZER;

static struct wal_gather *wal_of(sqlite3_file *f)
{
    return (struct wal_gather *)((char *)f + wal_gather_at);
}

static struct wal_main *main_of(sqlite3_file *f)
{
    return (struct wal_main *)((char *)f + wal_gather_at);
}

/* Write what is gathered. */
static int wal_flush(sqlite3_file *f)
{
    struct wal_gather *g = wal_of(f);
    if (!g->len)
        return SQLITE_OK;
    atomic_fetch_add(&wal_writes, 1);
    int rc = g->io->xWrite(f, g->buf, (int)g->len, g->off);
    g->len = 0;
    return rc;
}

/* Write p as it is, after what is gathered (a frame's header before its page). */
static int wal_write_through(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    struct wal_gather *g = wal_of(f);
    int rc = wal_flush(f);
    if (rc == SQLITE_OK) {
        atomic_fetch_add(&wal_writes, 1);
        rc = g->io->xWrite(f, p, n, off);
    }
    g->next = rc == SQLITE_OK ? off + (n > 0 ? n : 0) : -1;
    return rc;
}

/* Add p, which starts where the gathered bytes end, to them (written first past
 * WAL_GATHER_MAX; written as it comes when there is no memory to gather). */
static int wal_gather(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    struct wal_gather *g = wal_of(f);
    size_t k = (size_t)n;
    int rc;
    if (g->len + k > WAL_GATHER_MAX && (rc = wal_flush(f)) != SQLITE_OK)
        return rc;
    if (g->len + k > g->cap) {
        size_t cap = g->cap ? g->cap : WAL_GATHER_FIRST;
        while (cap < g->len + k)
            cap *= 2;
        char *b = realloc(g->buf, cap);
        if (!b)
            return wal_write_through(f, p, n, off);
        g->buf = b;
        g->cap = cap;
    }
    if (!g->len)
        g->off = off;
    memcpy(g->buf + g->len, p, k);
    g->len += k;
    g->next = off + (sqlite3_int64)k;
    return SQLITE_OK;
}

/* Only frames appended in sequence are gathered: a write that starts where the last one ended
 * joins the gathered bytes, and the page that follows a commit frame's header ends the
 * commit: everything is written then, before SQLite syncs or publishes the commit in the WAL
 * index (a failed write fails the commit, as one of SQLite's own would). Any other write is
 * written at once, after what is gathered: SQLite writes elsewhere in the file to start it
 * over (its header) and to rewrite frames of the transaction it is writing. That last one
 * ends with the commit frame's header alone, after its page, and SQLite then publishes the
 * commit (walRewriteChecksums, when a transaction that spilled pages to the WAL changes one of
 * them again): gathered, that header waited for the next write or the close, and a one-shot's
 * exit (which does not close) left the old header on disk, whose checksum the next process's
 * recovery of the WAL refused: the commit was lost, and any page a checkpoint had already
 * copied from it was in the database file beside older ones from the WAL. */
static int wal_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    struct wal_gather *g = wal_of(f);
    const unsigned char *h = p;
    int ends = g->commit; /* the page after a commit frame's header */
    int rc;
    g->commit = 0;
    if (off != g->next || n <= 0 || n > WAL_GATHER_MAX / 2) /* elsewhere, or a 64 KiB page */
        rc = wal_write_through(f, p, n, off);
    else if ((rc = wal_gather(f, p, n, off)) == SQLITE_OK && ends)
        rc = wal_flush(f);
    if (rc == SQLITE_OK && n == WAL_FRAME_HDR && (h[4] | h[5] | h[6] | h[7]))
        g->commit = 1;
    return rc;
}

/* Every other method writes what is gathered first, so that the file is as SQLite wrote it. */
static int wal_close(sqlite3_file *f)
{
    struct wal_gather *g = wal_of(f);
    int rc = wal_flush(f);
    pthread_mutex_lock(&wal_mains_lock);
    if (g->main && g->main->wal == f)
        g->main->wal = NULL;
    g->main = NULL;
    pthread_mutex_unlock(&wal_mains_lock);
    free(g->buf);
    g->buf = NULL;
    g->cap = 0;
    int rc2 = g->io->xClose(f);
    return rc != SQLITE_OK ? rc : rc2;
}

#define WAL_FLUSHED(call)                                                                      \
    do {                                                                                       \
        int rc_ = wal_flush(f);                                                                \
        if (rc_ != SQLITE_OK)                                                                  \
            return rc_;                                                                        \
        return wal_of(f)->io->call;                                                            \
    } while (0)

static int wal_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off)
{
    WAL_FLUSHED(xRead(f, p, n, off));
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    WAL_FLUSHED(xTruncate(f, size));
}

static int wal_sync(sqlite3_file *f, int flags)
{
    WAL_FLUSHED(xSync(f, flags));
}

static int wal_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    WAL_FLUSHED(xFileSize(f, size));
}

static int wal_lock(sqlite3_file *f, int level)
{
    WAL_FLUSHED(xLock(f, level));
}

static int wal_unlock(sqlite3_file *f, int level)
{
    WAL_FLUSHED(xUnlock(f, level));
}

static int wal_check_reserved(sqlite3_file *f, int *out)
{
    WAL_FLUSHED(xCheckReservedLock(f, out));
}

static int wal_file_control(sqlite3_file *f, int op, void *arg)
{
    WAL_FLUSHED(xFileControl(f, op, arg));
}

static int wal_sector_size(sqlite3_file *f)
{
    return wal_of(f)->io->xSectorSize(f);
}

static int wal_device(sqlite3_file *f)
{
    return wal_of(f)->io->xDeviceCharacteristics(f);
}

static int wal_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    WAL_FLUSHED(xShmMap(f, pg, pgsz, extend, pp));
}

static int wal_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    WAL_FLUSHED(xShmLock(f, offset, n, flags));
}

static void wal_shm_barrier(sqlite3_file *f)
{
    (void)wal_flush(f);
    wal_of(f)->io->xShmBarrier(f);
}

static int wal_shm_unmap(sqlite3_file *f, int del)
{
    WAL_FLUSHED(xShmUnmap(f, del));
}

static int wal_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    WAL_FLUSHED(xFetch(f, off, n, pp));
}

static int wal_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    WAL_FLUSHED(xUnfetch(f, off, p));
}

/* A database file's methods are the underlying ones, but for its close and the release of the
 * WAL's write lock. A transaction that spilled pages to the WAL and rolled back leaves its last frames
 * gathered: SQLite reads nothing of the WAL when it rolls back (a page it reloads may come
 * from the database file), and gives the write lock up, on the database file. Written later,
 * at this connection's next call on its WAL, those frames would land over what another
 * connection appended meanwhile at the same offsets, a commit of its own: its pages lost, and
 * read as other pages by every reader the WAL index sends there. So they are written before
 * the lock goes, as SQLite would have written them, past the WAL's last commit, where the
 * next writer writes over them. (A commit has written everything by then.) */
static int wal_main_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    struct wal_main *m = main_of(f);
    /* the write lock is the WAL index's lock 0 (SQLite's WAL_WRITE_LOCK) */
    if (offset == 0 && n >= 1 && flags == (SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE) && m->wal &&
        wal_flush(m->wal) != SQLITE_OK)
        wal_of(m->wal)->next = -1; /* nothing gathered is left: those frames count for nothing */
    return m->io->xShmLock(f, offset, n, flags);
}

static int wal_main_close(sqlite3_file *f)
{
    struct wal_main *m = main_of(f);
    pthread_mutex_lock(&wal_mains_lock);
    for (struct wal_main **p = &wal_mains; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    if (m->wal)
        wal_of(m->wal)->main = NULL;
    pthread_mutex_unlock(&wal_mains_lock);
    return m->io->xClose(f);
}

/* A database file's methods: the underlying file's own but for those two, one copy per table
 * of underlying methods (the unix VFS has one per locking style; one is used in practice). */
#define WAL_MAIN_IOS 4
static struct {
    const sqlite3_io_methods *under;
    sqlite3_io_methods io;
} wal_main_ios[WAL_MAIN_IOS];
static int wal_main_n; /* under wal_mains_lock */

/* The copy for the underlying methods under (NULL: no room, or a version this VFS does not
 * know). Called with wal_mains_lock held. */
static const sqlite3_io_methods *wal_main_methods(const sqlite3_io_methods *under)
{
    for (int i = 0; i < wal_main_n; i++)
        if (wal_main_ios[i].under == under)
            return &wal_main_ios[i].io;
    if (wal_main_n == WAL_MAIN_IOS || under->iVersion > 3)
        return NULL;
    wal_main_ios[wal_main_n].under = under;
    wal_main_ios[wal_main_n].io = *under;
    wal_main_ios[wal_main_n].io.xClose = wal_main_close;
    wal_main_ios[wal_main_n].io.xShmLock = wal_main_shm_lock;
    return &wal_main_ios[wal_main_n++].io;
}

/* A WAL's writes are gathered; a database file's lock calls are watched (wal_main_shm_lock);
 * other files keep the underlying methods as they are. */
static int wal_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    int rc = wal_under->xOpen(wal_under, name, f, flags, out);
    if (rc != SQLITE_OK || !name)
        return rc;
    if ((flags & SQLITE_OPEN_MAIN_DB) && f->pMethods) {
        struct wal_main *m = main_of(f);
        pthread_mutex_lock(&wal_mains_lock);
        const sqlite3_io_methods *io = wal_main_methods(f->pMethods);
        if (io) {
            memset(m, 0, sizeof *m);
            m->io = f->pMethods;
            m->name = name;
            f->pMethods = io;
            m->next = wal_mains;
            wal_mains = m;
        }
        pthread_mutex_unlock(&wal_mains_lock);
    } else if ((flags & SQLITE_OPEN_WAL) && f->pMethods && f->pMethods->iVersion <= 3 &&
               (!wal_io.iVersion || f->pMethods->iVersion == wal_io.iVersion)) {
        struct wal_gather *g = wal_of(f);
        memset(g, 0, sizeof *g);
        g->io = f->pMethods;
        if (!wal_io.iVersion) /* one underlying VFS: its files' methods have one version */
            wal_io.iVersion = g->io->iVersion;
        f->pMethods = &wal_io;
        const char *db = sqlite3_filename_database(name);
        pthread_mutex_lock(&wal_mains_lock);
        for (struct wal_main *m = wal_mains; m; m = m->next)
            if (m->name == db) {
                m->wal = f;
                g->main = m;
                break;
            }
        pthread_mutex_unlock(&wal_mains_lock);
    }
    return rc;
}

static sqlite3_io_methods wal_io = {
    0,           wal_close,          wal_read,         wal_write,     wal_truncate,
    wal_sync,    wal_file_size,      wal_lock,         wal_unlock,    wal_check_reserved,
    wal_file_control, wal_sector_size, wal_device,     wal_shm_map,   wal_shm_lock,
    wal_shm_barrier, wal_shm_unmap,  wal_fetch,        wal_unfetch,
};

void wal_vfs_install(void)
{
    sqlite3_vfs *u = sqlite3_vfs_find(NULL);
    if (!u || u == &wal_vfs || u->iVersion < 1)
        return;
    wal_under = u;
    wal_vfs = *u; /* the other methods are the underlying VFS's, with its pAppData */
    wal_vfs.pNext = NULL;
    wal_vfs.zName = "tokterm-wal";
    wal_gather_at = ((size_t)u->szOsFile + 15) & ~(size_t)15;
    wal_vfs.szOsFile = (int)(wal_gather_at + (sizeof(struct wal_gather) > sizeof(struct wal_main)
                                                  ? sizeof(struct wal_gather)
                                                  : sizeof(struct wal_main)));
    wal_vfs.xOpen = wal_open;
    if (sqlite3_vfs_register(&wal_vfs, 1) != SQLITE_OK)
        wal_under = NULL;
}

unsigned long wal_vfs_writes(void)
{
    return atomic_load(&wal_writes);
}
