/* test_store.c - the SQLite store: migrations, file mode and errors, streaming saves and crash
 * recovery, search (quotes, operators, CJK, accents), statistics, response cache (TTL, LRU),
 * summaries, quota, two writers at once, and the review subcommands. */
#include "config.h"
#include "base/buf.h"
#include "cmd/store.h"
#include "store/fts_words.h"
#include "base/sha256.h"
#include "store/info.h"
#include "store/store.h"
#include "store/store_int.h"
#include "store/wal_vfs.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];

/* ---------------------------------------------------------------- helpers */

struct fake_clock {
    double mono;
    int64_t epoch;
};

static double fake_mono(void *ud)
{
    return ((struct fake_clock *)ud)->mono;
}

static int64_t fake_epoch(void *ud)
{
    return ((struct fake_clock *)ud)->epoch;
}

static char *tmp_path(const char *name)
{
    return xasprintf("%s/%s", tmpdir, name);
}

/* A fresh store at tmpdir/name; fails the test run when it cannot be opened. */
static struct store *open_new(const char *name, struct store_open_info *info)
{
    char *path = tmp_path(name), *err = NULL;
    struct store *st = store_open(path, info, &err);
    if (!st) {
        printf("Bail out! cannot open %s: %s\n", path, err);
        exit(1);
    }
    free(path);
    return st;
}

/* n letters a-z over and over, NUL-terminated (caller frees). */
static char *letters(size_t n)
{
    char *t = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        t[i] = (char)('a' + i % 26);
    t[n] = '\0';
    return t;
}

/* First column of the first row of sql over a separate raw connection (-1 on error). */
static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *db;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
            if (sqlite3_step(s) == SQLITE_ROW)
                v = sqlite3_column_int64(s, 0);
            sqlite3_finalize(s);
        }
    }
    sqlite3_close(db);
    return v;
}

/* The frames a new connection finds in path's WAL (its recovery's count; -1 on error). The
 * connection's close then checkpoints and removes the WAL, as a last connection does. */
static long long raw_wal_frames(const char *path)
{
    long long v = -1;
    /* -1 also while another checkpoint runs (a detached copy's last pass goes on after it
     * gave up its lock): asked again for up to 10 s */
    for (double until = util_now() + 10; v < 0 && util_now() < until;) {
        sqlite3 *db;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
            sqlite3_stmt *s;
            if (sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &s, NULL) ==
                SQLITE_OK) {
                if (sqlite3_step(s) == SQLITE_ROW)
                    v = sqlite3_column_int64(s, 1);
                sqlite3_finalize(s);
            }
        }
        sqlite3_close(db);
        if (v < 0)
            usleep(10000);
    }
    return v;
}

/* Same for a text result (caller frees; NULL on error). */
static char *raw_text(const char *path, const char *sql)
{
    sqlite3 *db;
    char *v = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
            if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
                v = xstrdup((const char *)sqlite3_column_text(s, 0));
            sqlite3_finalize(s);
        }
    }
    sqlite3_close(db);
    return v;
}

/* A test point: PRAGMA integrity_check over a separate raw connection says "ok". */
static void tap_sound(const char *path, const char *name)
{
    char *ic = raw_text(path, "PRAGMA integrity_check");
    TAP_STR(ic ? ic : "(null)", "ok", name);
    free(ic);
}

static int raw_exec(const char *path, const char *sql)
{
    sqlite3 *db;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static unsigned file_mode(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned)(sb.st_mode & 0777) : 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Search and return the hit count (-1 on error); *first gets the first snippet (or NULL). */
static int search_count(struct store *st, const char *q, const struct store_search_opts *o,
                        char **first, int64_t *first_id)
{
    struct store_hit *hits;
    size_t n;
    if (first)
        *first = NULL;
    if (store_search(st, q, o, &hits, &n) != 0)
        return -1;
    if (first && n)
        *first = xstrdup(hits[0].snippet);
    if (first_id && n)
        *first_id = hits[0].message_id;
    store_hits_free(hits, n);
    return (int)n;
}

/* Does a search for q find message id? */
static int search_finds(struct store *st, const char *q, int64_t id)
{
    struct store_hit *hits;
    size_t n;
    int found = 0;
    if (store_search(st, q, NULL, &hits, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        found |= hits[i].message_id == id;
    store_hits_free(hits, n);
    return found;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = xasprintf("%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            rm_tree(p);
        else
            unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

/* ---------------------------------------------------------------- sha256 */

static void hex_of(const void *p, size_t n, char hex[65])
{
    unsigned char d[32];
    sha256_digest(p, n, d);
    sha256_hex(d, hex);
}

static void test_sha256(void)
{
    char hex[65];
    hex_of("", 0, hex);
    TAP_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256 ''");
    hex_of("abc", 3, hex);
    TAP_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256 abc");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), hex);
    TAP_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            "sha256 448-bit message");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmno"
                       "pjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    TAP_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
            "sha256 896-bit message");
    struct sha256 ctx;
    unsigned char d[32], d2[32];
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    sha256_init(&ctx);
    for (int i = 0; i < 1000; i++)
        sha256_update(&ctx, chunk, sizeof chunk);
    sha256_final(&ctx, d);
    sha256_hex(d, hex);
    TAP_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            "sha256 one million 'a'");
    /* Every split of a 150-byte message gives the one-shot digest. */
    char msg[150];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)(i * 7 + 3);
    sha256_digest(msg, sizeof msg, d);
    int same = 1;
    for (size_t cut = 0; cut <= sizeof msg; cut++) {
        sha256_init(&ctx);
        sha256_update(&ctx, msg, cut);
        sha256_update(&ctx, msg + cut, sizeof msg - cut);
        sha256_final(&ctx, d2);
        same &= memcmp(d, d2, 32) == 0;
    }
    TAP_OK(same, "sha256 incremental at every split equals one-shot");
    unsigned char key[STORE_CACHE_KEY_LEN];
    store_cache_key("abc", 3, key);
    sha256_hex(key, hex);
    TAP_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "store_cache_key is SHA-256");
}

/* ---------------------------------------------------------------- open, modes, errors */

/* SQLite's math functions reach libm (linked in, through store/sqlite_dl.c's wrappers, which
 * load libm on the first call): each argument lands where it should. */
static void test_sqlite_math(void)
{
    static const struct {
        const char *sql;
        double want;
    } cases[] = {
        {"SELECT acos(0.5) * 3", 3.14159265358979}, {"SELECT asin(1) * 2", 3.14159265358979},
        {"SELECT atan(1) * 4", 3.14159265358979},   {"SELECT atan2(1, 0)", 1.5707963267949},
        {"SELECT pow(2, 10)", 1024},                {"SELECT mod(7.5, 2)", 1.5},
        {"SELECT ln(exp(2))", 2},                   {"SELECT sqrt(2) * sqrt(2)", 2},
        {"SELECT trunc(-2.7)", -2},                 {"SELECT cos(0) + sin(0) + tan(0)", 1},
        {"SELECT cosh(0) + sinh(0) + tanh(0)", 1},  {"SELECT acosh(1) + asinh(0) + atanh(0)", 0},
        {"SELECT log(1000)", 3},
    };
    char *err = NULL;
    TAP_OK(store_library_version(&err) != NULL, "math: SQLite is there (%s)", err ? err : "");
    free(err);
    sqlite3 *db = NULL;
    int opened = sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK;
    TAP_OK(opened, "math: an SQLite connection opens");
    for (size_t i = 0; opened && i < TT_ARRAY_LEN(cases); i++) {
        sqlite3_stmt *s = NULL;
        double got = -12345;
        int null = -1;
        if (sqlite3_prepare_v2(db, cases[i].sql, -1, &s, NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            null = sqlite3_column_type(s, 0) == SQLITE_NULL;
            got = sqlite3_column_double(s, 0);
        }
        sqlite3_finalize(s);
        TAP_OK(null == 0 && fabs(got - cases[i].want) < 1e-9, "math: %s = %.12g (got %.12g%s)",
               cases[i].sql, cases[i].want, got, null == 1 ? ", NULL" : "");
    }
    sqlite3_close(db);
}

static void test_open_and_errors(void)
{
    struct store_open_info info;
    char *path = tmp_path("sub/dir/a.db");
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "open creates a new database (and its directories)");
    TAP_INT(info.created, 1, "info.created");
    TAP_INT(info.from_version, 0, "new file starts at version 0");
    TAP_INT(info.version, STORE_SCHEMA_VERSION, "migrated to the current version");
    TAP_INT(store_schema_version(st), STORE_SCHEMA_VERSION, "user_version set");
    TAP_INT(file_mode(path), 0600, "new database has mode 0600");
    char *dir = tmp_path("sub/dir");
    TAP_INT(file_mode(dir), 0700, "new directory has mode 0700");
    free(dir);
    char *jm = raw_text(path, "PRAGMA journal_mode");
    TAP_STR(jm, "wal", "journal mode is WAL");
    free(jm);
    /* a failure SQLite did not see (rows that do not hang together): said so, not SQLite's
     * "not an error" */
    store_fail(st, "cannot read the messages");
    TAP_OK(strstr(store_error(st), "do not hang together") &&
               !strstr(store_error(st), "not an error"),
           "a failure SQLite did not see says what it is: %s", store_error(st));
    store_close(st);

    /* A looser mode is tightened and reported. */
    chmod(path, 0644);
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "reopen");
    TAP_INT(info.created, 0, "reopen: not created");
    TAP_INT(info.mode_fixed, 1, "loose mode reported");
    TAP_INT(info.old_mode, 0644, "old mode reported");
    TAP_INT(file_mode(path), 0600, "mode tightened to 0600");
    TAP_INT(info.from_version, STORE_SCHEMA_VERSION, "no migration on reopen");
    store_close(st);
    st = store_open(path, &info, &err);
    TAP_INT(info.mode_fixed, 0, "0600 is left alone");
    int64_t conv = store_conversation_new(st, "t", NULL, NULL, NULL);
    TAP_OK(conv > 0, "write after reopen");
    char *wal = xasprintf("%s-wal", path), *shm = xasprintf("%s-shm", path);
    TAP_INT(file_mode(wal), 0600, "WAL file is private too");
    TAP_INT(file_mode(shm), 0600, "shared-memory file is private too");
    /* A loose WAL file (left by an older version or a copy) is tightened as well. */
    struct store *st2 = store_open(path, NULL, &err); /* keeps the WAL in place */
    chmod(wal, 0664);
    struct store *st3 = store_open(path, &info, &err);
    TAP_INT(info.mode_fixed, 1, "loose WAL file reported");
    TAP_INT(info.old_mode, 0664, "its old mode");
    TAP_INT(file_mode(wal), 0600, "WAL file tightened");
    store_close(st3);
    store_close(st2);
    free(wal);
    free(shm);
    store_close(st);

    /* Not an SQLite file. */
    char *bad = tmp_path("notes.txt");
    write_file(bad, "These are my notes, not a database. They are long enough to have a header "
                    "that SQLite will look at and reject as not a database file at all.\n");
    chmod(bad, 0644);
    st = store_open(bad, &info, &err);
    TAP_OK(st == NULL, "a text file is refused");
    TAP_OK(err && strstr(err, "not a tokterm database"), "clear message: %s", err ? err : "");
    free(err);
    err = NULL;
    char *content = raw_text(bad, "SELECT 1"); /* must not have been rewritten */
    free(content);
    FILE *f = fopen(bad, "r");
    char head[16] = "";
    if (f) {
        if (!fgets(head, sizeof head, f))
            head[0] = '\0';
        fclose(f);
    }
    TAP_OK(strncmp(head, "These are", 9) == 0, "the text file is untouched");
    TAP_INT(file_mode(bad), 0644, "and keeps its mode");
    free(bad);

    /* Another program's SQLite database. */
    char *other = tmp_path("other.db");
    raw_exec(other, "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT)");
    st = store_open(other, &info, &err);
    TAP_OK(st == NULL, "another program's database is refused");
    TAP_OK(err && strstr(err, "another program"), "clear message: %s", err ? err : "");
    free(err);
    err = NULL;
    TAP_INT(raw_int(other, "SELECT count(*) FROM sqlite_schema"), 1, "and left untouched");
    free(other);

    /* A database from a newer tokterm. */
    char *newer = tmp_path("newer.db");
    st = store_open(newer, NULL, &err);
    store_close(st);
    raw_exec(newer, "PRAGMA user_version = 99");
    st = store_open(newer, NULL, &err);
    TAP_OK(st == NULL, "a newer schema is refused");
    TAP_OK(err && strstr(err, "newer tokterm"), "clear message: %s", err ? err : "");
    free(err);
    err = NULL;
    free(newer);

    /* Read-only file (as root, try it as "nobody": root ignores permission bits). */
    char *ro = tmp_path("ro.db");
    st = store_open(ro, NULL, &err);
    store_close(st);
    chmod(ro, 0444);
    if (geteuid() != 0) {
        st = store_open(ro, NULL, &err);
        TAP_OK(st == NULL, "read-only file is refused");
        TAP_OK(err && strstr(err, "read-only"), "clear message: %s", err ? err : "");
        free(err);
        err = NULL;
        store_close(st);
    } else {
        chmod(tmpdir, 0711);
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(3);
            st = store_open(ro, NULL, &err);
            _exit(st ? 1 : err && strstr(err, "read-only") ? 0 : 2);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        chmod(tmpdir, 0700);
        TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) != 1,
               "read-only file is refused (as nobody)");
        TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "read-only message (as nobody)");
    }
    chmod(ro, 0600);
    free(ro);

    /* A directory where the file should be. */
    char *dpath = tmp_path("adir.db");
    mkdir(dpath, 0700);
    st = store_open(dpath, NULL, &err);
    TAP_OK(st == NULL && err && strstr(err, "not a regular file"), "directory refused: %s",
           err ? err : "");
    free(err);
    err = NULL;
    free(dpath);
    st = store_open("", NULL, &err);
    TAP_OK(st == NULL && err, "empty path refused");
    free(err);
    free(path);
}

/* ---------------------------------------------------------------- migration from v1 */

/* Schema version 1 as it shipped (frozen copy): the test builds an old database with it. */
static const char v1_schema[] =
    "PRAGMA application_id = 1953199213;"
    "CREATE TABLE conversations(id INTEGER PRIMARY KEY, title TEXT, system_prompt TEXT,"
    " model TEXT, profile TEXT, created INTEGER NOT NULL, updated INTEGER NOT NULL);"
    "CREATE INDEX conversations_updated ON conversations(updated, id);"
    "CREATE TABLE messages(id INTEGER PRIMARY KEY,"
    " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    " role TEXT NOT NULL CHECK(role IN ('system','user','assistant','tool')),"
    " status TEXT NOT NULL DEFAULT 'complete' CHECK(status IN ('streaming','complete',"
    " 'cancelled','error','truncated','interrupted')),"
    " created INTEGER NOT NULL, model TEXT, profile TEXT, host TEXT, finish_reason TEXT,"
    " prompt_tokens INTEGER, completion_tokens INTEGER, total_tokens INTEGER, ttft REAL,"
    " total_time REAL, tokens_per_s REAL, dns_time REAL, connect_time REAL, tls_time REAL,"
    " cached INTEGER NOT NULL DEFAULT 0, error TEXT, writer TEXT, reasoning TEXT,"
    " content TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX messages_conversation ON messages(conversation_id, id);"
    "CREATE INDEX messages_created ON messages(created);"
    "CREATE INDEX messages_streaming ON messages(status) WHERE status = 'streaming';"
    "CREATE TABLE summaries(conversation_id INTEGER NOT NULL REFERENCES conversations(id)"
    " ON DELETE CASCADE, first_message_id INTEGER NOT NULL, last_message_id INTEGER NOT NULL,"
    " model TEXT, tokens INTEGER, created INTEGER NOT NULL, summary TEXT NOT NULL,"
    " PRIMARY KEY(conversation_id, first_message_id, last_message_id));"
    "CREATE TABLE quota(profile TEXT NOT NULL, key_label TEXT NOT NULL, limit_requests INTEGER,"
    " remaining_requests INTEGER, reset_requests REAL, limit_tokens INTEGER,"
    " remaining_tokens INTEGER, reset_tokens REAL, blocked_until REAL, extra TEXT,"
    " updated INTEGER NOT NULL, PRIMARY KEY(profile, key_label)) WITHOUT ROWID;"
    "CREATE TABLE response_cache(id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE"
    " CHECK(length(key) = 32), created INTEGER NOT NULL, last_used INTEGER NOT NULL,"
    " hits INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL, model TEXT, finish_reason TEXT,"
    " prompt_tokens INTEGER, completion_tokens INTEGER, total_tokens INTEGER, reasoning TEXT,"
    " content TEXT NOT NULL);"
    "CREATE INDEX response_cache_lru ON response_cache(last_used, size);"
    "CREATE INDEX response_cache_created ON response_cache(created);"
    "CREATE TABLE cache_meta(id INTEGER PRIMARY KEY CHECK(id = 1), entries INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, hits INTEGER NOT NULL);"
    "INSERT INTO cache_meta VALUES(1, 0, 0, 0);"
    "CREATE TRIGGER response_cache_ai AFTER INSERT ON response_cache BEGIN"
    " UPDATE cache_meta SET entries = entries + 1, bytes = bytes + new.size WHERE id = 1; END;"
    "CREATE TRIGGER response_cache_ad AFTER DELETE ON response_cache BEGIN"
    " UPDATE cache_meta SET entries = entries - 1, bytes = bytes - old.size WHERE id = 1; END;"
    "CREATE TRIGGER response_cache_au AFTER UPDATE OF size ON response_cache BEGIN"
    " UPDATE cache_meta SET bytes = bytes - old.size + new.size WHERE id = 1; END;"
    "PRAGMA user_version = 1;";

static void test_migrate_v1(void)
{
    char *path = tmp_path("v1.db");
    int rc = raw_exec(path, v1_schema);
    rc |= raw_exec(path,
                   "INSERT INTO conversations VALUES(1, 'old chat', NULL, 'm-old', NULL, 100, 200);"
                   "INSERT INTO messages(id, conversation_id, role, created, content) VALUES"
                   " (1, 1, 'user', 100, '東京タワーはどこですか'),"
                   " (2, 1, 'assistant', 101, 'Tokyo Tower is in Minato, Tokyo.');"
                   "INSERT INTO messages(id, conversation_id, role, status, created, writer,"
                   " content) VALUES (3, 1, 'assistant', 'streaming', 102, '999999999:1',"
                   " 'half an answer about penguins');"
                   "INSERT INTO summaries VALUES(1, 1, 2, NULL, 12, 150, 'Tokyo tower talk');");
    TAP_INT(rc, SQLITE_OK, "built a version 1 database by hand");
    TAP_INT(raw_int(path, "PRAGMA user_version"), 1, "it says version 1");
    chmod(path, 0600);
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "version 1 database opens: %s", err ? err : "");
    if (!st)
        return;
    TAP_INT(info.from_version, 1, "migrated from version 1");
    TAP_INT(info.version, STORE_SCHEMA_VERSION, "to the current version");
    TAP_INT(store_schema_version(st), STORE_SCHEMA_VERSION, "user_version updated");
    TAP_INT(info.recovered, 1, "the dead writer's streaming answer was recovered");
    TAP_INT(search_finds(st, "タワー", 1), 1, "old CJK message is searchable after migration");
    TAP_INT(search_finds(st, "Minato", 2), 1, "old answer is searchable after migration");
    TAP_INT(search_finds(st, "penguins", 3), 1, "recovered answer is indexed");
    struct store_conversation *c;
    TAP_INT(store_conversation_load(st, 1, &c), 0, "old conversation loads");
    if (c) {
        TAP_INT(c->n_messages, 3, "with its three messages");
        TAP_STR(c->title, "old chat", "title kept");
        TAP_INT(c->messages[2].status, STORE_INTERRUPTED, "streaming row is now interrupted");
        TAP_INT(c->messages[0].parent_id, 0, "v1 -> v6: the first prompt starts the tree");
        TAP_INT(c->messages[1].parent_id, 1, "v1 -> v6: the answer's parent is the prompt");
        TAP_INT(c->messages[2].parent_id, 1, "v1 -> v6: so is the interrupted answer's");
        TAP_INT(c->head_id, 1, "v1 -> v6: the prompt is the head");
        store_conversation_free(c);
    }
    struct store_summary sum;
    TAP_INT(store_summary_get(st, 1, 1, 2, &sum), 0, "old summary kept");
    TAP_STR(sum.text, "Tokyo tower talk", "summary text");
    store_summary_clear(&sum);
    store_close(st);
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH "
                          "'\"Tokyo\"'"),
            1, "fts table answers raw queries");
    free(path);
}

/* ---------------------------------------------------------------- the turn tree (v6) */

/* "id:parent_id ..." of every message, by id (0 for NULL); caller frees. */
static char *tree_of(const char *path)
{
    return raw_text(path, "SELECT group_concat(id || ':' || ifnull(parent_id, 0), ' ') FROM "
                          "(SELECT id, parent_id FROM messages ORDER BY id)");
}

/* "id:head_id ..." of every conversation, by id (0 for NULL); caller frees. */
static char *heads_of(const char *path)
{
    return raw_text(path, "SELECT group_concat(id || ':' || ifnull(head_id, 0), ' ') FROM "
                          "(SELECT id, head_id FROM conversations ORDER BY id)");
}

/* Takes a database back from version 9 to 8 (the exchange columns of stats dropped). */
#define UNDO_V9                                                                          \
    "ALTER TABLE messages DROP COLUMN itl; ALTER TABLE messages DROP COLUMN retries; "    \
    "ALTER TABLE messages DROP COLUMN rate_limited;"
/* What takes a new store back to version 13 (before the cache's message_id). */
#define STORE_DROP_V14                                                                     \
    "DROP TRIGGER response_cache_message_ad; DROP TRIGGER response_cache_message_au; "      \
    "DROP INDEX response_cache_message; ALTER TABLE response_cache DROP COLUMN message_id; "
/* What takes a new store back to version 12 (before the packed rows of a resume). */
#define STORE_DROP_V13                                                                     \
    STORE_DROP_V14                                                                         \
    "DROP TRIGGER resume_blocks_messages_ai; DROP TRIGGER resume_blocks_messages_au; "      \
    "DROP TRIGGER resume_blocks_messages_ad; DROP TRIGGER resume_blocks_tokens_ai; "        \
    "DROP TRIGGER resume_blocks_tokens_au; DROP TRIGGER resume_blocks_tokens_ad; "          \
    "DROP TABLE resume_blocks; "
/* What takes a new store back to version 11 (before the token marks). */
#define STORE_DROP_V12                                                                     \
    STORE_DROP_V13                                                                         \
    "DROP TRIGGER token_marks_tokens_ad; DROP TRIGGER token_marks_tokens_ai; "              \
    "DROP TRIGGER token_marks_messages_ai; DROP TRIGGER token_marks_messages_au; "          \
    "DROP TABLE token_marks; "
/* What takes a new store back to version 10 (before the provider's batches). */
#define STORE_DROP_V11 STORE_DROP_V12 "DROP TABLE remote_batches; "
/* What takes a new store back to version 9 (before attachments). */
#define STORE_DROP_V10                                                                     \
    STORE_DROP_V11                                                                         \
    "DROP TRIGGER attachments_blob_ad; DROP TRIGGER attachments_message_ad; "               \
    "DROP TABLE attachments; DROP TABLE blobs; "

/* A version 5 database at path: a new store (version 6) taken back to version 5 (the tree's
 * trigger, indexes and columns dropped, user_version 5), so that rows raw_exec inserts then go
 * through the v5 triggers. test_migrate_prev has the real thing, written by the previous release.
 * 0 or -1. */
static int make_v5(const char *path)
{
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    if (!st) {
        free(err);
        return -1;
    }
    store_close(st);
    return raw_exec(path, STORE_DROP_V10
                          "DROP TRIGGER message_tokens_ad; DROP TRIGGER message_tokens_au;"
                          "DROP TABLE message_tokens;"
                          "DROP TRIGGER IF EXISTS messages_tree_ai;"
                          "DROP INDEX IF EXISTS messages_user;"
                          "DROP INDEX messages_parent;"
                          "ALTER TABLE messages DROP COLUMN parent_id;"
                          "ALTER TABLE conversations DROP COLUMN head_id;"
                          "ALTER TABLE messages DROP COLUMN tool;" UNDO_V9
                          "PRAGMA user_version = 5;") == SQLITE_OK
               ? 0
               : -1;
}

/* v9 -> v10: the attachment tables are added in place; a blob is stored once however many
 * rows send it, read back with each message, and goes with the last row that uses it. */
/* "blobs rows" of the store at path (*keep: the string, freed by the next call). */
static const char *blobs_rows(const char *path, char **keep)
{
    free(*keep);
    *keep = raw_text(path, "SELECT count(*) || ' ' || (SELECT count(*) FROM attachments) "
                           "FROM blobs");
    return *keep;
}

static void test_migrate_v9_attachments(void)
{
    char *txt = NULL;
    char *path = tmp_path("v9a.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "v9: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u = store_message_add(st, conv, "user", "old prompt", 10, NULL);
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V10 "PRAGMA user_version = 9;"), SQLITE_OK,
            "v9: taken back to version 9 (no attachment tables)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 9 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v9 -> v10: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    static const unsigned char img[] = "\x89PNG fake bytes";
    struct store_attach a = {.name = "d.png", .kind = "image", .mime = "image/png",
                             .data = img, .len = sizeof img - 1, .width = 2, .height = 3};
    sha256_digest(img, a.len, a.sha256);
    struct store_msg_info mi = {.att = &a, .n_att = 1};
    int64_t u2 = store_message_add(st, conv, "user", "look", 4, &mi);
    int64_t conv2 = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u3 = store_message_add(st, conv2, "user", "again", 5, &mi);
    TAP_OK(u > 0 && u2 > 0 && u3 > 0, "v10: rows with attachments saved");
    TAP_STR(blobs_rows(path, &txt),
            "1 2", "v10: one blob for two rows in two conversations");
    struct store_attach *v;
    size_t n;
    TAP_INT(store_attach_list(st, conv, &v, &n), 0, "v10: read back");
    TAP_OK(n == 1 && v[0].message_id == u2 && v[0].len == a.len &&
               memcmp(v[0].data, img, a.len) == 0 && strcmp(v[0].name, "d.png") == 0 &&
               v[0].width == 2 && v[0].height == 3 && memcmp(v[0].sha256, a.sha256, 32) == 0,
           "v10: the same bytes, name and facts");
    store_attach_free(v, n);
    TAP_INT(store_conversation_delete(st, conv), 0, "v10: a conversation deleted");
    TAP_STR(blobs_rows(path, &txt),
            "1 1", "v10: its row gone, the blob kept (another row uses it)");
    TAP_INT(store_conversation_delete(st, conv2), 0, "v10: the other deleted");
    TAP_STR(blobs_rows(path, &txt),
            "0 0", "v10: the last row took the blob with it");
    free(txt);
    store_close(st);
    free(path);
}

/* v10 -> v11: the table of the provider's batches is added in place; a batch id is saved,
 * found by its hash, replaced, and forgotten. */
static void test_migrate_v10_remote(void)
{
    char *path = tmp_path("v10r.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "v10: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    TAP_OK(store_message_add(st, conv, "user", "kept", 4, NULL) > 0, "v10: a row");
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V11 "PRAGMA user_version = 10;"), SQLITE_OK,
            "v10: taken back to version 10 (no remote_batches)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 10 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v10 -> v11: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    unsigned char h[STORE_REMOTE_HASH_LEN], h2[STORE_REMOTE_HASH_LEN];
    memset(h, 0xab, sizeof h);
    memset(h2, 0xcd, sizeof h2);
    char id[64] = "";
    TAP_INT(store_remote_get(st, h, id, sizeof id), STORE_NOT_FOUND, "v11: nothing saved yet");
    TAP_INT(store_remote_put(st, h, "openai", "http://x/v1", "batch_1", 3), 0, "v11: saved");
    TAP_INT(store_remote_put(st, h2, "anthropic", "http://y/v1", "msgbatch_2", 5), 0,
            "v11: another saved");
    TAP_INT(store_remote_get(st, h, id, sizeof id), 0, "v11: found by its hash");
    TAP_STR(id, "batch_1", "v11: the id saved");
    TAP_INT(store_remote_put(st, h, "openai", "http://x/v1", "batch_3", 3), 0, "v11: replaced");
    TAP_INT(store_remote_get(st, h, id, sizeof id), 0, "v11: found again");
    TAP_STR(id, "batch_3", "v11: the new id");
    TAP_INT(store_remote_del(st, h), 0, "v11: forgotten");
    TAP_INT(store_remote_get(st, h, id, sizeof id), STORE_NOT_FOUND, "v11: gone");
    TAP_INT(store_remote_get(st, h2, id, sizeof id), 0, "v11: the other one stays");
    TAP_STR(id, "msgbatch_2", "v11: its id");
    store_close(st);
    TAP_OK(raw_int(path, "SELECT count(*) FROM messages WHERE content = 'kept'") == 1,
           "v11: the old row is there");
    TAP_OK(raw_int(path, "SELECT count(*) FROM remote_batches WHERE batch_id LIKE '%sk-%'") == 0,
           "v11: no key-like text in the table");
    free(path);
}

/* "through max" of conversation conv's token mark in o200k_base ("none" without one). */
static const char *mark_of(const char *path, int64_t conv, char **keep)
{
    char q[200];
    snprintf(q, sizeof q, "SELECT coalesce((SELECT through_id || ' ' || max_tokens FROM "
             "token_marks WHERE conversation_id = %lld AND encoding = 'o200k_base'), 'none')",
             (long long)conv);
    free(*keep);
    *keep = raw_text(path, q);
    return *keep;
}

static int walk_two(void *ud, const struct store_message *m, long tokens, int live)
{
    (void)m;
    (void)tokens;
    (void)live;
    return ++*(int *)ud >= 2; /* the newest turn only */
}

/* A walk of conv's newest turn: "uncounted max" of the rows it did not read. */
static const char *walk_older(struct store *st, int64_t conv, char *out, size_t size)
{
    struct store_walk w;
    int k = 0;
    if (store_conversation_walk(st, conv, "o200k_base", walk_two, &k, &w) != 0)
        return "walk failed";
    snprintf(out, size, "%lld %ld%s", (long long)w.older_uncounted, w.older_max_tokens,
             w.complete ? " complete" : "");
    store_walk_free(&w);
    return out;
}

static int walk_all(void *ud, const struct store_message *m, long tokens, int live)
{
    (void)m;
    (void)tokens;
    (void)live;
    ++*(int *)ud;
    return 0;
}

/* The walk's verdicts: how many rows it read, and the ids it did not call live. */
struct walk_live {
    char dead[128];
    size_t nd;
    int n;
};

static int walk_live_rows(void *ud, const struct store_message *m, long tokens, int live)
{
    (void)tokens;
    struct walk_live *w = ud;
    w->n++;
    if (!live && w->nd < sizeof w->dead - 24)
        w->nd += (size_t)snprintf(w->dead + w->nd, sizeof w->dead - w->nd, "%s%lld",
                                  w->nd ? "," : "", (long long)m->id);
    return 0;
}

/* Rows of a turn that /retry replaced are read but not live: from the table (the first walk,
 * which packs them) and from the packed block (the second). */
static void test_walk_live(void)
{
    char *path = tmp_path("live.db"), *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "live: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL), last = 0, user = 0;
    for (int i = 0; i < 300; i++) { /* linked as tokterm links them: a tree, one path */
        struct store_msg_info info = {.parent_id = user};
        last = store_message_add(st, conv, i % 2 ? "assistant" : "user", "row", 3, &info);
        if (i % 2 == 0)
            user = last;
    }
    store_conversation_set_head(st, conv, user);
    store_close(st);
    /* the last turn (rows last-1, last) retried twice: each version a user row under the
     * same parent, with its answer; the head the newest */
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO messages(id, conversation_id, role, created, content, parent_id) "
             "SELECT %lld + k, %lld, CASE k %% 2 WHEN 1 THEN 'user' ELSE 'assistant' END, 0, "
             "'again', CASE k %% 2 WHEN 1 THEN (SELECT parent_id FROM messages WHERE id = "
             "%lld) ELSE %lld + k - 1 END FROM (SELECT 1 AS k UNION SELECT 2 UNION SELECT 3 "
             "UNION SELECT 4) ORDER BY k; UPDATE conversations SET head_id = %lld + 3;",
             (long long)last, (long long)conv, (long long)last - 1, (long long)last,
             (long long)last);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "live: the last turn retried twice");
    st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "live: reopened (%s)", err ? err : "");
    free(err);
    err = NULL;
    char want_dead[96];
    snprintf(want_dead, sizeof want_dead, "%lld,%lld,%lld,%lld", (long long)last + 2,
             (long long)last + 1, (long long)last, (long long)last - 1);
    for (int pass = 0; st && pass < 2; pass++) {
        struct walk_live wl = {{0}, 0, 0};
        struct store_walk w;
        int rc = store_conversation_walk(st, conv, "o200k_base", walk_live_rows, &wl, &w);
        if (rc == 0)
            store_walk_free(&w);
        TAP_OK(rc == 0 && wl.n == 304 && strcmp(wl.dead, want_dead) == 0,
               "live, %s: the replaced versions' rows are read and not live (%d rows; dead "
               "%s, want %s)", pass ? "from the block" : "from the table", wl.n, wl.dead,
               want_dead);
        TAP_INT(raw_int(path, "SELECT count(*) FROM resume_blocks") > 0, 1,
                "live: the rows are packed");
    }
    store_close(st);
    free(path);
}

/* A walk of all of conv: "rows counts first-content" (or what failed). */
static const char *walk_rows(struct store *st, int64_t conv, char *out, size_t size)
{
    struct store_walk w;
    int k = 0;
    if (store_conversation_walk(st, conv, "o200k_base", walk_all, &k, &w) != 0)
        return "walk failed";
    snprintf(out, size, "%zu %zu %s", w.conv->n_messages, w.n_tokens,
             w.conv->n_messages ? w.conv->messages[0].content : "-");
    store_walk_free(&w);
    return out;
}

/* v12 -> v13: the packed rows of a resume. A database of v12 upgrades in place; a walk that
 * reads 300 rows packs them, the next walk reads the same rows from the blocks, and a row
 * rewritten by another program drops the blocks at and above it. */
static void test_migrate_v12_blocks(void)
{
    char *path = tmp_path("v12b.db"), *err = NULL, a[96], b[96];
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "v12: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    struct store_tokens v[300];
    for (int i = 0; i < 300; i++) {
        char text[32];
        int n = snprintf(text, sizeof text, "row %d", i);
        int64_t mid = store_message_add(st, conv, i % 2 ? "assistant" : "user", text,
                                        (size_t)n, NULL);
        v[i] = (struct store_tokens){mid, n, 2};
    }
    TAP_INT(store_tokens_put(st, conv, "o200k_base", v, 300), 0, "v12: counts stored");
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V13 "PRAGMA user_version = 12;"), SQLITE_OK,
            "v12: taken back to version 12 (no packed rows)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 12 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v12 -> v13: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    TAP_INT(raw_int(path, "SELECT count(*) FROM resume_blocks"), 0, "v13: no blocks yet");
    TAP_STR(walk_rows(st, conv, a, sizeof a), "300 300 row 0", "v13: the walk reads them all");
    TAP_INT(raw_int(path, "SELECT count(*) FROM resume_blocks"), 1, "v13: and packs them");
    TAP_STR(walk_rows(st, conv, b, sizeof b), a, "v13: the same rows from the block");
    TAP_INT(raw_exec(path, "UPDATE messages SET content = 'rewritten' WHERE id = (SELECT "
                           "min(id) FROM messages)"),
            SQLITE_OK, "v13: the oldest row rewritten");
    TAP_INT(raw_int(path, "SELECT count(*) FROM resume_blocks"), 0, "v13: the block is gone");
    TAP_STR(walk_rows(st, conv, b, sizeof b), "300 299 rewritten",
            "v13: the walk reads the new text (its count forgotten)");
    store_close(st);
    free(path);
}

/* v11 -> v12: the token marks. A database of v11 upgrades in place with counts and no mark;
 * a put moves the mark over the rows counted, a walk learns from it what it did not read, and
 * whatever could make it wrong takes it back (a count forgotten, a row added below it). */
static void test_migrate_v11_marks(void)
{
    char *txt = NULL, *path = tmp_path("v11m.db"), *err = NULL, buf[64], mark_q[256];
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "v11: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL), id[8];
    struct store_tokens v[8];
    for (int i = 0; i < 6; i++) {
        id[i] = store_message_add(st, conv, i % 2 ? "assistant" : "user", "some words", 10,
                                  NULL);
        v[i] = (struct store_tokens){id[i], 10, 2 + i};
    }
    TAP_INT(store_tokens_put(st, conv, "o200k_base", v, 6), 0, "v11: counts stored");
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V12 "PRAGMA user_version = 11;"), SQLITE_OK,
            "v11: taken back to version 11 (no token marks)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 11 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v11 -> v12: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    TAP_STR(mark_of(path, conv, &txt), "none", "v12: no mark yet");
    TAP_STR(walk_older(st, conv, buf, sizeof buf), "0 7", "v12: without a mark, the walk "
            "counts the older rows: all counted, the largest 7");
    id[6] = store_message_add(st, conv, "user", "new words", 9, NULL);
    v[6] = (struct store_tokens){id[6], 9, 3};
    TAP_INT(store_tokens_put(st, conv, "o200k_base", &v[6], 1), 0, "v12: a new row counted");
    snprintf(buf, sizeof buf, "%lld 7", (long long)id[6]);
    TAP_STR(mark_of(path, conv, &txt), buf, "v12: the put moves the mark over every row");
    TAP_STR(walk_older(st, conv, buf, sizeof buf), "0 7", "v12: the walk takes it");
    id[7] = store_message_add(st, conv, "assistant", "x", 1, NULL);
    snprintf(buf, sizeof buf, "%lld 7", (long long)id[6]);
    TAP_STR(mark_of(path, conv, &txt), buf, "v12: a row added after the mark leaves it");
    TAP_INT(raw_exec(path, "UPDATE messages SET content = 'rewritten' WHERE id = (SELECT "
                           "min(id) + 1 FROM messages)"),
            SQLITE_OK, "v12: an old row rewritten (its count forgotten)");
    TAP_STR(mark_of(path, conv, &txt), "none", "v12: the mark is taken back");
    TAP_STR(walk_older(st, conv, buf, sizeof buf), "1 7",
            "v12: the walk sees the older row without a count");
    v[1].bytes = 9;
    v[1].tokens = 40;
    TAP_INT(store_tokens_put(st, conv, "o200k_base", &v[1], 1), 0, "v12: it is counted again");
    snprintf(buf, sizeof buf, "%lld 40", (long long)id[6]);
    TAP_STR(mark_of(path, conv, &txt), buf, "v12: the mark is back, up to the row not counted");
    v[2].tokens = 50;
    TAP_INT(store_tokens_put(st, conv, "o200k_base", &v[2], 1), 0, "v12: a count rewritten");
    snprintf(buf, sizeof buf, "%lld 50", (long long)id[6]);
    TAP_STR(mark_of(path, conv, &txt), buf, "v12: a larger count below the mark raises its max");
    TAP_INT(raw_exec(path, "DELETE FROM messages WHERE id = (SELECT max(id) FROM messages); "
                           "DELETE FROM messages WHERE id = (SELECT max(id) FROM messages)"),
            SQLITE_OK, "v12: the two newest rows deleted");
    TAP_STR(mark_of(path, conv, &txt), "none", "v12: the mark goes with a count it covered");
    v[5].tokens = 5;
    TAP_INT(store_tokens_put(st, conv, "o200k_base", &v[5], 1), 0, "v12: a put");
    snprintf(mark_q, sizeof mark_q, "INSERT INTO messages(id, conversation_id, role, created, content) "
             "VALUES(%lld, %lld, 'user', 0, 'late')", (long long)id[0] - 1, (long long)conv);
    snprintf(buf, sizeof buf, "%lld 50", (long long)id[5]);
    TAP_STR(mark_of(path, conv, &txt), buf, "v12: the put marks the rows left");
    TAP_INT(raw_exec(path, mark_q), SQLITE_OK, "v12: a row inserted below the mark");
    TAP_STR(mark_of(path, conv, &txt), "none", "v12: the mark is taken back");
    free(txt);
    store_close(st);
    free(path);
}

/* v6 -> v7: the token counts table is added in place; counts are stored per encoding, read
 * back by conversation, and forgotten with a message that is rewritten or deleted. */
static void test_migrate_v6_tokens(void)
{
    char *path = tmp_path("v6.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "v6: a new store");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u = store_message_add(st, conv, "user", "hello there", 11, NULL);
    int64_t a = store_message_add(st, conv, "assistant", "hi", 2, NULL);
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V10
                           "DROP TRIGGER message_tokens_ad; DROP TRIGGER message_tokens_au; "
                           "DROP TABLE message_tokens; ALTER TABLE messages DROP COLUMN tool;" UNDO_V9
                           "PRAGMA user_version = 6;"),
            SQLITE_OK, "v6: taken back to version 6 (no counts table)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 6 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v6 -> v7: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    struct store_tokens v[] = {{u, 11, 2}, {a, 2, 1}, {999999, 5, 5}};
    TAP_INT(store_tokens_put(st, conv, "o200k_base", v, 3), 0, "v7: counts stored");
    TAP_INT(store_tokens_put(st, conv, "cl100k_base", v, 1), 0, "v7: another encoding too");
    struct store_tokens *got = NULL;
    size_t n = 0;
    TAP_INT(store_tokens_get(st, conv, "o200k_base", &got, &n), 0, "v7: counts read back");
    TAP_OK(n == 2 && got[0].id == u && got[0].tokens == 2 && got[1].id == a &&
               got[1].bytes == 2,
           "v7: the two messages' counts, by id; none for a message that is not there");
    free(got);
    TAP_INT(raw_exec(path, "UPDATE messages SET content = 'changed' WHERE role = 'assistant'"),
            SQLITE_OK, "v7: a message rewritten");
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_tokens"), 2,
            "v7: its count is forgotten (the prompt's two encodings stay)");
    store_close(st);
    TAP_INT(raw_exec(path, "DELETE FROM messages"), SQLITE_OK, "v7: messages deleted");
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_tokens"), 0,
            "v7: and their counts with them");
    free(path);
}

/* v7 -> v8: the tool column is added in place; an assistant row's calls and a tool row's
 * call are saved and read back with the conversation. */
static void test_migrate_v7_tool(void)
{
    char *path = tmp_path("v7.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u = store_message_add(st, conv, "user", "add 2 and 40", 12, NULL);
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V10 "ALTER TABLE messages DROP COLUMN tool;" UNDO_V9
                           "PRAGMA user_version = 7;"),
            SQLITE_OK, "v7: taken back to version 7 (no tool column)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 7 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v7 -> v8: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    struct store_msg_info in = {.parent_id = u};
    int64_t a = store_message_add(st, conv, "assistant", "", 0, &in);
    TAP_INT(store_message_set_tool(st, a, "{\"calls\":[]}"), 0, "v8: an answer's calls saved");
    in.tool = "{\"id\":\"call_1\"}";
    int64_t t = store_message_add(st, conv, "tool", "42", 2, &in);
    struct store_conversation *cv = NULL;
    TAP_INT(store_conversation_load(st, conv, &cv), 0, "v8: loaded");
    TAP_OK(cv && cv->n_messages == 3 && cv->messages[1].id == a && cv->messages[2].id == t &&
               cv->messages[1].tool && !strcmp(cv->messages[1].tool, "{\"calls\":[]}") &&
               cv->messages[2].tool && !strcmp(cv->messages[2].tool, "{\"id\":\"call_1\"}") &&
               !cv->messages[0].tool,
           "v8: the tool column read back");
    store_conversation_free(cv);
    store_close(st);
    free(path);
}

/* v8 -> v9: itl, retries and rate_limited added in place; an old answer reads as unknown
 * (left out of the percentiles), a new one has them. */
static void test_migrate_v8_perf(void)
{
    char *path = tmp_path("v8.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u = store_message_add(st, conv, "user", "hi", 2, NULL);
    struct store_msg_info in = {.parent_id = u, .model = "m"};
    int64_t a = store_message_begin(st, conv, &in);
    struct store_usage us = {5, 40, 45, NULL};
    struct store_timings old = {0.5, 2.5, 20, -1, -1, -1, -1, -1, -1};
    store_message_finish(st, a, STORE_COMPLETE, "stop", &us, &old, NULL);
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V10 UNDO_V9 "PRAGMA user_version = 8;"),
            SQLITE_OK, "v8: taken back to version 8 (no itl, retries, rate_limited)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 8 &&
               store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v8 -> v9: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    a = store_message_begin(st, conv, &in);
    struct store_timings now = {0.3, 2.3, 20, -1, -1, -1, 0.05, 2, 1};
    store_message_finish(st, a, STORE_COMPLETE, "stop", &us, &now, NULL);
    struct store_stats s;
    TAP_INT(store_stats(st, 0, 0, NULL, &s), 0, "v9: stats");
    TAP_INT(s.perf.ttft.n, 2, "v9: both answers' ttft");
    TAP_INT(s.perf.itl.n, 1, "v9: the old answer's gap is unknown, not 0");
    TAP_INT(s.perf.retries, 2, "v9: retries of the new answer");
    TAP_INT(s.perf.rate_limited, 1, "v9: its 429");
    store_stats_clear(&s);
    store_close(st);
    free(path);
}

/* v5 -> v6: every row kept and linked; a resent prompt (old /retry) is a sibling; failed turns
 * stay; the last prompt is the head. */
static void test_migrate_v5(void)
{
    char *path = tmp_path("v5.db");
    TAP_INT(make_v5(path), 0, "v5: built a version 5 database");
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_table_info('messages') "
                          "WHERE name = 'parent_id'"),
            0, "v5: no parent_id column");
    int rc = raw_exec(
        path,
        "INSERT INTO conversations(id, title, created, updated) VALUES"
        " (1, 'normal', 100, 200), (2, 'retry', 110, 800), (3, 'failed', 120, 900),"
        " (4, 'system first', 130, 300), (5, 'empty', 140, 150);"
        "INSERT INTO messages(id, conversation_id, role, status, created, error, content) VALUES"
        " (1, 1, 'user', 'complete', 100, NULL, 'hello'),"
        " (2, 1, 'assistant', 'complete', 101, NULL, 'hi there'),"
        " (3, 1, 'user', 'complete', 102, NULL, 'more'),"
        " (4, 1, 'assistant', 'complete', 103, NULL, 'sure'),"
        " (5, 2, 'user', 'complete', 110, NULL, 'Q'),"
        " (6, 2, 'assistant', 'error', 111, 'HTTP 500', ''),"
        " (7, 2, 'user', 'complete', 112, NULL, 'Q'),"
        " (8, 2, 'assistant', 'complete', 113, NULL, 'the answer about quokkas'),"
        " (9, 3, 'user', 'complete', 120, NULL, 'fail me'),"
        " (10, 2, 'user', 'complete', 114, NULL, 'next'),"
        " (11, 2, 'assistant', 'complete', 115, NULL, 'ok'),"
        " (12, 2, 'tool', 'complete', 116, NULL, 'tool output'),"
        " (13, 2, 'user', 'complete', 117, NULL, 'next'),"
        " (14, 2, 'user', 'complete', 118, NULL, 'next'),"
        " (15, 3, 'assistant', 'error', 121, 'HTTP 502', ''),"
        " (16, 4, 'system', 'complete', 130, NULL, 'be brief'),"
        " (17, 4, 'user', 'complete', 131, NULL, 'x'),"
        " (18, 4, 'assistant', 'complete', 132, NULL, 'y'),"
        " (19, 1, 'user', 'complete', 104, NULL, 'hello'),"
        " (20, 1, 'assistant', 'complete', 105, NULL, 'hi again');");
    TAP_INT(rc, SQLITE_OK, "v5: rows inserted");
    long long queued = raw_int(path, "SELECT count(*) FROM words_queue");
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "v5 database opens: %s", err ? err : "");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    TAP_INT(info.from_version, 5, "v5: migrated from version 5");
    TAP_INT(store_schema_version(st), STORE_SCHEMA_VERSION, "v5: now the current version");
    char *tree = tree_of(path), *heads = heads_of(path);
    TAP_STR(tree,
            "1:0 2:1 3:1 4:3 5:0 6:5 7:0 8:7 9:0 10:7 11:10 12:10 13:7 14:7 15:9 16:0 17:0 "
            "18:17 19:3 20:19",
            "v5: every row linked (a resent prompt is its twin's sibling, three times too; "
            "the same text two turns later is not)");
    TAP_STR(heads, "1:19 2:14 3:9 4:17 5:0", "v5: each conversation's last prompt is its head");
    free(tree);
    free(heads);
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE role = 'user' AND "
                          "parent_id IS NULL"),
            0, "v5: a first turn's prompt is linked to 0, not left NULL");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE parent_id IS NULL"), 1,
            "v5: only the system row before any prompt stays NULL");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 20, "v5: no row lost");
    TAP_INT(raw_int(path, "SELECT count(*) FROM words_queue"), queued,
            "v5: linking the rows queued no change for the word index");
    TAP_INT(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                          "name = 'messages_parent'"),
            1, "v5: messages(parent_id) is indexed");
    TAP_INT(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                          "name = 'messages_user'"),
            1, "v5: so are the user rows (for the trigger that links other programs' rows)");
    struct store_conversation *c = NULL;
    TAP_INT(store_conversation_load(st, 2, &c), 0, "v5: the retried conversation loads");
    if (c) {
        TAP_INT(c->n_messages, 9, "v5: with all its rows");
        TAP_INT(c->head_id, 14, "v5: and its head");
        TAP_INT(c->messages[1].id, 6, "v5: the failed answer is kept");
        TAP_INT(c->messages[1].status, STORE_ERROR, "v5: as an error");
        TAP_INT(c->messages[1].content_len, 0, "v5: without text");
        TAP_STR(c->messages[1].error, "HTTP 500", "v5: with its error");
        TAP_INT(c->messages[1].parent_id, 5, "v5: answering the first Q");
        TAP_INT(c->messages[2].parent_id, 0, "v5: the resent Q is a first turn too");
        store_conversation_free(c);
    }
    TAP_INT(search_finds(st, "quokkas", 8), 1, "v5: search still finds old answers");
    TAP_INT(raw_exec(path, "INSERT INTO messages(id, conversation_id, role, created, content) "
                           "VALUES(21, 1, 'user', 106, 'appended by a script');"),
            SQLITE_OK, "v5: a script appends a prompt to an upgraded conversation");
    tree = raw_text(path, "SELECT parent_id FROM messages WHERE id = 21");
    heads = heads_of(path);
    TAP_STR(tree, "19", "v5: the upgrade's trigger linked it after the last prompt");
    TAP_STR(heads, "1:21 2:14 3:9 4:17 5:0", "v5: and made it the head");
    free(tree);
    free(heads);
    int64_t latest = 0;
    TAP_INT(store_conversation_latest_answered(st, &latest), 0, "latest answered: found");
    TAP_INT(latest, 2, "latest answered: skips the newer conversation whose only turn failed");
    /* newer still: a refused turn, an answer interrupted before any text; then a cancelled
     * answer with text, which counts */
    int64_t refused = store_conversation_new(st, NULL, NULL, NULL, NULL);
    struct store_msg_info why = {.error = "the message does not fit"};
    int64_t u = store_message_add(st, refused, "user", "a very long paste", 17, &why);
    TAP_OK(u > 0, "refused turn saved");
    TAP_INT(store_conversation_latest_answered(st, &latest), 0, "latest answered: found again");
    TAP_INT(latest, 2, "latest answered: skips a conversation whose only turn was refused");
    int64_t empty = store_conversation_new(st, NULL, NULL, NULL, NULL);
    u = store_message_add(st, empty, "user", "hello?", 6, NULL);
    struct store_msg_info ai = {.parent_id = u};
    int64_t a = store_message_begin(st, empty, &ai);
    store_message_finish(st, a, STORE_INTERRUPTED, NULL, NULL, NULL, NULL);
    store_conversation_latest_answered(st, &latest);
    TAP_INT(latest, 2, "latest answered: skips an answer interrupted before its first word");
    int64_t cut = store_conversation_new(st, NULL, NULL, NULL, NULL);
    u = store_message_add(st, cut, "user", "tell me", 7, NULL);
    ai.parent_id = u;
    a = store_message_begin(st, cut, &ai);
    store_message_append(st, a, "Once upon", 9);
    store_message_finish(st, a, STORE_CANCELLED, NULL, NULL, NULL, NULL);
    store_conversation_latest_answered(st, &latest);
    TAP_INT(latest, cut, "latest answered: a cancelled answer with text counts");
    store_close(st);
    free(path);

    st = open_new("latest-none.db", NULL);
    latest = -5;
    TAP_INT(store_conversation_latest_answered(st, &latest), STORE_NOT_FOUND,
            "latest answered: none in an empty store");
    store_close(st);
}

/* Copy src to dst. 0 or -1. */
static int copy_file(const char *src, const char *dst)
{
    size_t len;
    char *data = util_read_file(src, &len, 0);
    if (!data)
        return -1;
    FILE *f = fopen(dst, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    free(data);
    return ok ? 0 : -1;
}

/* A copy of the previous release's version 5 database at name in the test directory (free
 * it); bails out when it cannot be made. */
static char *prev_release_copy(const char *name)
{
    char *fixture = xasprintf("%s/fixtures/store-v5-prev-release.db", tap_srcdir());
    char *path = tmp_path(name);
    if (copy_file(fixture, path) != 0) {
        printf("Bail out! cannot copy %s\n", fixture);
        exit(1);
    }
    chmod(path, 0600);
    free(fixture);
    return path;
}

/* tests/fixtures/store-v5-prev-release.db, written by the release before the tree (see
 * tests/fixtures/README.md): a two-turn conversation, one whose second request failed with
 * HTTP 500, and a chat where the user sent A, did /edit to B, then /retry. */
static void test_migrate_prev(void)
{
    char *path = prev_release_copy("prev-release.db");
    TAP_INT(raw_int(path, "PRAGMA user_version"), 5, "previous release: a version 5 database");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 14, "previous release: 14 rows");
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "previous release: opens: %s", err ? err : "");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    TAP_INT(info.from_version, 5, "previous release: migrated from version 5");
    TAP_INT(store_schema_version(st), STORE_SCHEMA_VERSION, "previous release: to the current");
    char *tree = tree_of(path), *heads = heads_of(path);
    /* 1-4 two turns; 5-8 a turn, then one whose answer failed (8: error, no text); 9-14 A and
     * its answer, B (/edit: the old release sent B alone but kept A, so B follows A), then B
     * again (/retry): a sibling of the first B */
    TAP_STR(tree, "1:0 2:1 3:1 4:3 5:0 6:5 7:5 8:7 9:0 10:9 11:9 12:11 13:9 14:13",
            "previous release: every row linked, the /retry a sibling");
    TAP_STR(heads, "1:3 2:7 3:13", "previous release: heads at the last prompts");
    free(tree);
    free(heads);
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 14, "previous release: no row lost");
    struct store_conversation *c = NULL;
    TAP_INT(store_conversation_load(st, 2, &c), 0, "previous release: the failed one loads");
    if (c && c->n_messages == 4) {
        TAP_INT(c->messages[3].status, STORE_ERROR, "previous release: the failed answer kept");
        TAP_INT(c->messages[3].content_len, 0, "previous release: without text");
        TAP_OK(c->messages[3].error && strstr(c->messages[3].error, "HTTP 500"),
               "previous release: its error says HTTP 500");
        TAP_INT(c->messages[3].parent_id, 7, "previous release: answering the second prompt");
    } else {
        TAP_OK(0, "previous release: conversation 2 has 4 messages");
    }
    store_conversation_free(c);
    int64_t latest = 0;
    TAP_INT(store_conversation_latest_answered(st, &latest), 0, "previous release: answered");
    TAP_INT(latest, 3, "previous release: the chat is the latest answered");
    TAP_INT(search_count(st, "wolf", NULL, NULL, NULL), 2, "previous release: still searchable");
    store_close(st);
    free(path);
}

/* The tree through the API: who moves the head, set_head, the parent's checks, refusals. */
static void test_tree(void)
{
    struct store *st = open_new("tree.db", NULL);
    int64_t c = store_conversation_new(st, NULL, NULL, NULL, NULL);
    int64_t other = store_conversation_new(st, NULL, NULL, NULL, NULL);
    int64_t u1 = store_message_add(st, c, "user", "first", 5, NULL);
    struct store_conversation *cv = NULL;
    store_conversation_load(st, c, &cv);
    TAP_INT(cv ? cv->head_id : -1, u1, "tree: a first prompt is the head");
    store_conversation_free(cv);
    struct store_msg_info ai = {.parent_id = u1};
    int64_t a1 = store_message_begin(st, c, &ai);
    store_message_append(st, a1, "one", 3);
    store_message_finish(st, a1, STORE_COMPLETE, "stop", NULL, NULL, NULL);
    struct store_msg_info ui = {.parent_id = u1};
    int64_t u2 = store_message_add(st, c, "user", "second", 6, &ui);
    ai.parent_id = u2;
    int64_t a2 = store_message_add(st, c, "assistant", "two", 3, &ai);
    int64_t u2b = store_message_add(st, c, "user", "second, edited", 14, &ui); /* a sibling */
    TAP_OK(a1 > 0 && u2 > 0 && a2 > 0 && u2b > 0, "tree: rows added");
    TAP_INT(store_conversation_load(st, c, &cv), 0, "tree: loads");
    if (cv && cv->n_messages == 5) {
        TAP_INT(cv->head_id, u2b, "tree: the newest prompt is the head; answers leave it");
        TAP_INT(cv->messages[0].parent_id, 0, "tree: first prompt, no parent");
        TAP_INT(cv->messages[1].parent_id, u1, "tree: streamed answer -> its prompt");
        TAP_INT(cv->messages[2].parent_id, u1, "tree: second prompt -> first");
        TAP_INT(cv->messages[3].parent_id, u2, "tree: added answer -> its prompt");
        TAP_INT(cv->messages[4].parent_id, u1, "tree: the edit is the second's sibling");
    } else {
        TAP_OK(0, "tree: all five rows loaded");
    }
    store_conversation_free(cv);
    TAP_INT(store_conversation_set_head(st, c, u2), 0, "set_head: back to the first branch");
    store_conversation_load(st, c, &cv);
    TAP_INT(cv ? cv->head_id : -1, u2, "set_head: the head moved");
    store_conversation_free(cv);
    TAP_INT(store_conversation_set_head(st, c, a2), STORE_NOT_FOUND,
            "set_head: an answer cannot be the head");
    TAP_INT(store_conversation_set_head(st, other, u1), STORE_NOT_FOUND,
            "set_head: nor another conversation's prompt");
    TAP_INT(store_conversation_set_head(st, c, 999999), STORE_NOT_FOUND,
            "set_head: nor a missing row");
    TAP_INT(store_conversation_set_head(st, 999999, u1), STORE_NOT_FOUND,
            "set_head: nor in a missing conversation");
    struct store_conversation *list = NULL;
    size_t n = 0;
    store_conversation_list(st, 0, &list, &n);
    int64_t listed = -1;
    for (size_t i = 0; i < n; i++)
        if (list[i].id == c)
            listed = list[i].head_id;
    TAP_INT(listed, u2, "set_head: failures left it alone; the list shows it");
    store_conversation_list_free(list, n);

    struct store_msg_info bad = {.parent_id = u1};
    TAP_INT(store_message_add(st, other, "user", "x", 1, &bad), -1,
            "a parent from another conversation is refused");
    TAP_OK(strstr(store_error(st), "parent"), "with a message about the parent: %s",
           store_error(st));
    bad.parent_id = a1;
    TAP_INT(store_message_add(st, c, "user", "x", 1, &bad), -1, "an answer as parent is refused");
    TAP_INT(store_message_begin(st, c, &bad), -1, "also for a streamed answer");
    store_conversation_load(st, other, &cv);
    TAP_INT(cv ? (long long)cv->n_messages : -1, 0, "the refused rows were not saved");
    TAP_INT(cv ? cv->head_id : -1, 0, "nor did they move a head");
    store_conversation_free(cv);

    struct store_msg_info refused = {.parent_id = u2, .error = "too long for the context"};
    int64_t u3 = store_message_add(st, c, "user", "a huge paste", 12, &refused);
    TAP_OK(u3 > 0, "refused: saved");
    store_conversation_load(st, c, &cv);
    if (cv && cv->n_messages == 6) {
        TAP_INT(cv->head_id, u3, "refused: it is the head (the live path's last turn)");
        TAP_STR(cv->messages[5].error, "too long for the context", "refused: why");
        TAP_INT(cv->messages[5].status, STORE_COMPLETE, "refused: status stays complete");
        TAP_INT(cv->messages[5].parent_id, u2, "refused: after the second prompt");
        TAP_OK(cv->messages[2].error == NULL, "a sent prompt has no error");
    } else {
        TAP_OK(0, "refused: six rows");
    }
    store_conversation_free(cv);
    store_close(st);
}

/* Rows another program inserts (raw SQL, parent_id NULL) are linked by the messages_tree_ai
 * trigger as a flat conversation was; tokterm's own rows are saved with 0, never NULL, and
 * never fire it. */
static void test_tree_foreign(void)
{
    char *path = tmp_path("foreign.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    if (!st) {
        printf("Bail out! cannot open %s: %s\n", path, err);
        exit(1);
    }
    int64_t c = store_conversation_new(st, NULL, NULL, NULL, NULL);
    int64_t u1 = store_message_add(st, c, "user", "first", 5, NULL);
    struct store_msg_info ai = {.parent_id = u1};
    int64_t a1 = store_message_add(st, c, "assistant", "one", 3, &ai);
    struct store_msg_info ui = {.parent_id = u1};
    int64_t u2 = store_message_add(st, c, "user", "second", 6, &ui);
    int64_t u2b = store_message_add(st, c, "user", "second, edited", 14, &ui);
    TAP_INT(store_conversation_set_head(st, c, u2), 0, "foreign: the head on the first branch");
    TAP_OK(u1 > 0 && a1 > 0 && u2 > 0 && u2b > 0, "foreign: tokterm's rows added");
    char *sql = xasprintf("SELECT typeof(parent_id) || ':' || parent_id FROM messages "
                          "WHERE id = %lld", (long long)u1);
    char *got = raw_text(path, sql);
    TAP_STR(got, "integer:0", "foreign: tokterm saves a first turn's parent as 0, not NULL");
    free(got);
    free(sql);
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE parent_id IS NULL"), 0,
            "foreign: tokterm saved no NULL parent");
    /* the trigger would turn a NULL into the same 0: look without it */
    char *own = tmp_path("foreign-own.db");
    struct store *o = store_open(own, NULL, &err);
    TAP_OK(o != NULL, "foreign: a second store opens: %s", err ? err : "");
    TAP_INT(raw_exec(own, "DROP TRIGGER messages_tree_ai"), SQLITE_OK,
            "foreign: its trigger dropped");
    int64_t oc = o ? store_conversation_new(o, NULL, NULL, NULL, NULL) : -1;
    int64_t ou = o ? store_message_add(o, oc, "user", "first", 5, NULL) : -1;
    int64_t oa = o ? store_message_add(o, oc, "assistant", "unlinked", 8, NULL) : -1;
    TAP_OK(ou > 0 && oa > 0, "foreign: rows added without the trigger");
    got = raw_text(own, "SELECT group_concat(ifnull(typeof(parent_id) || ':' || parent_id, "
                        "'NULL'), ' ') FROM (SELECT parent_id FROM messages ORDER BY id)");
    TAP_STR(got, "integer:0 integer:0",
            "foreign: tokterm itself writes 0 for a row without a parent");
    free(got);
    store_close(o);
    free(own);

    /* appended by a script to a conversation with a head: one statement, several rows */
    sql = xasprintf("INSERT INTO messages(conversation_id, role, created, content) VALUES"
                    " (%1$lld, 'user', 1, 'script prompt about wombats'),"
                    " (%1$lld, 'assistant', 2, 'script answer about wombats'),"
                    " (%1$lld, 'tool', 3, 'script tool output'),"
                    " (%1$lld, 'user', 4, 'script follow-up')",
                    (long long)c);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "foreign: a script appends four rows");
    free(sql);
    int64_t f = u2b + 1; /* the script's rows: f .. f + 3 */
    struct store_conversation *cv = NULL;
    TAP_INT(store_conversation_load(st, c, &cv), 0, "foreign: the conversation loads");
    if (cv && cv->n_messages == 8) {
        TAP_INT(cv->messages[4].id, f, "foreign: the script's rows follow tokterm's");
        TAP_INT(cv->messages[4].parent_id, u2,
                "foreign: its prompt follows the head (the path the user chose), not the "
                "newest prompt");
        TAP_INT(cv->messages[5].parent_id, f, "foreign: its answer answers that prompt");
        TAP_INT(cv->messages[6].parent_id, f, "foreign: so does its tool row");
        TAP_INT(cv->messages[7].parent_id, f, "foreign: its next prompt follows its first");
        TAP_INT(cv->head_id, f + 3, "foreign: its last prompt is the head");
        TAP_INT(cv->messages[3].parent_id, u1, "foreign: tokterm's rows are left alone");
    } else {
        TAP_OK(0, "foreign: eight rows loaded");
    }
    store_conversation_free(cv);

    /* a new conversation written by a script alone */
    TAP_INT(raw_exec(path,
                     "INSERT INTO conversations(id, title, created, updated) "
                     "VALUES(100, 'by a script', 10, 10);"
                     "INSERT INTO messages(id, conversation_id, role, created, content) VALUES"
                     " (1000, 100, 'system', 10, 'be brief'),"
                     " (1001, 100, 'user', 11, 'first scripted question'),"
                     " (1002, 100, 'assistant', 12, 'first scripted answer'),"
                     " (1003, 100, 'user', 13, 'second scripted question'),"
                     " (1004, 100, 'assistant', 14, 'second scripted answer');"
                     "INSERT INTO messages(id, conversation_id, role, created, content) "
                     "VALUES(1005, 100, 'assistant', 15, 'another answer');"),
            SQLITE_OK, "foreign: a script writes a conversation of its own");
    got = raw_text(path, "SELECT group_concat(id || ':' || ifnull(typeof(parent_id) || ':' || "
                         "parent_id, 'NULL'), ' ') FROM (SELECT id, parent_id FROM messages "
                         "WHERE conversation_id = 100 ORDER BY id)");
    TAP_STR(got,
            "1000:NULL 1001:integer:0 1002:integer:1001 1003:integer:1001 1004:integer:1003 "
            "1005:integer:1003",
            "foreign: a first prompt is a root (0), each prompt follows the one before, "
            "answers answer the newest; a system row before any prompt stays NULL");
    free(got);
    TAP_INT(raw_int(path, "SELECT head_id FROM conversations WHERE id = 100"), 1003,
            "foreign: the last prompt is the head (an answer leaves it)");

    /* a script that links its rows itself is left alone */
    TAP_INT(raw_exec(path, "INSERT INTO messages(id, conversation_id, role, created, parent_id, "
                           "content) VALUES(1006, 100, 'user', 16, 1001, 'an edit');"),
            SQLITE_OK, "foreign: a script inserts a prompt with its parent");
    TAP_INT(raw_int(path, "SELECT parent_id FROM messages WHERE id = 1006"), 1001,
            "foreign: its parent is kept");
    TAP_INT(raw_int(path, "SELECT head_id FROM conversations WHERE id = 100"), 1003,
            "foreign: and the head stays");

    /* the search indexes took the script's rows in */
    struct store_search_opts trigram = {.no_words = 1};
    TAP_INT(search_finds(st, "wombats", f), 1, "foreign: the word index finds a script's row");
    TAP_INT(search_count(st, "wombats", &trigram, NULL, NULL), 2,
            "foreign: the trigram index finds both");
    TAP_INT(search_count(st, "scripted", NULL, NULL, NULL), 4,
            "foreign: and the other conversation's");
    store_close(st);
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = "
                          "'ok'"),
            1, "foreign: the database is intact");
    TAP_INT(raw_exec(path, "INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')"),
            SQLITE_OK, "foreign: the trigram index matches the messages");
    free(path);
}

/* ---------------------------------------------------------------- conversations, streaming */

static void test_conversations(void)
{
    struct fake_clock clk = {100.0, 1700000000};
    struct store *st = open_new("conv.db", NULL);
    store_set_clock(st, fake_mono, fake_epoch, &clk);

    int64_t a = store_conversation_new(st, NULL, "be terse", "gpt-x", "work");
    TAP_OK(a > 0, "new conversation id");
    struct store_msg_info ui = {.model = "gpt-x", .profile = "work", .host = "api.example.com"};
    const char *prompt = "  How do I\n\tparse   JSON in C without a library?  ";
    int64_t m1 = store_message_add(st, a, "user", prompt, strlen(prompt), &ui);
    TAP_OK(m1 > 0, "user message committed");
    struct store_conversation *c = NULL;
    store_conversation_load(st, a, &c);
    TAP_STR(c ? c->title : NULL, "How do I parse JSON in C without a library?",
            "title from the first prompt, white space collapsed");
    TAP_STR(c ? c->system_prompt : NULL, "be terse", "system prompt stored");
    TAP_STR(c && c->n_messages ? c->messages[0].content : NULL, prompt, "content stored raw");
    TAP_STR(c && c->n_messages ? c->messages[0].host : NULL, "api.example.com", "host stored");
    store_conversation_free(c);

    const char *p2 = "second prompt must not retitle";
    store_message_add(st, a, "user", p2, strlen(p2), &ui);
    store_conversation_load(st, a, &c);
    TAP_STR(c ? c->title : NULL, "How do I parse JSON in C without a library?",
            "later prompts keep the title");
    store_conversation_free(c);

    clk.epoch += 10;
    int64_t b = store_conversation_new(st, NULL, NULL, "gpt-y", NULL);
    char longp[400] = "";
    for (int i = 0; i < 30; i++)
        strcat(longp, "caf\xC3\xA9 ");
    store_message_add(st, b, "user", longp, strlen(longp), NULL);
    store_conversation_load(st, b, &c);
    const char *t = c ? c->title : "";
    TAP_OK(strlen(t) > 3 && strcmp(t + strlen(t) - 3, "\xE2\x80\xA6") == 0,
           "long title is cut with an ellipsis");
    TAP_OK(strncmp(t, "caf\xC3\xA9 caf\xC3\xA9", 11) == 0, "cut on character boundaries");
    store_conversation_free(c);

    TAP_INT(store_message_add(st, 9999, "user", "x", 1, NULL), -1, "unknown conversation fails");
    TAP_OK(strstr(store_error(st), "9999") != NULL, "error names it: %s", store_error(st));
    TAP_INT(store_message_add(st, a, "robot", "x", 1, NULL), -1, "bad role fails");

    /* Listing: newest first. */
    clk.epoch += 10;
    int64_t cc = store_conversation_new(st, "third", NULL, NULL, NULL);
    clk.epoch += 10;
    store_message_add(st, a, "user", "bump", 4, NULL); /* a becomes the newest */
    struct store_conversation *list;
    size_t n;
    TAP_INT(store_conversation_list(st, 0, &list, &n), 0, "list");
    TAP_INT(n, 3, "three conversations");
    if (n == 3) {
        TAP_INT(list[0].id, a, "most recently updated first");
        TAP_INT(list[1].id, cc, "then the next");
        TAP_INT(list[2].id, b, "oldest last");
        TAP_INT(list[0].message_count, 3, "message count");
        TAP_STR(list[0].model, "gpt-x", "model listed");
    }
    store_conversation_list_free(list, n);
    store_conversation_list(st, 2, &list, &n);
    TAP_INT(n, 2, "limit respected");
    store_conversation_list_free(list, n);

    TAP_INT(store_conversation_rename(st, cc, "renamed"), 0, "rename");
    store_conversation_load(st, cc, &c);
    TAP_STR(c ? c->title : NULL, "renamed", "new title");
    store_conversation_free(c);
    TAP_INT(store_conversation_rename(st, 777, "x"), STORE_NOT_FOUND, "rename unknown id");
    TAP_INT(store_conversation_update(st, cc, "sys2", "model2", NULL), 0, "update");
    store_conversation_load(st, cc, &c);
    TAP_STR(c ? c->model : NULL, "model2", "updated model");
    TAP_STR(c ? c->system_prompt : NULL, "sys2", "updated system prompt");
    store_conversation_free(c);

    /* Streaming: batches every 250 ms of the store's clock. */
    struct store_msg_info ai = {.model = "gpt-x", .profile = "work", .host = "api.example.com"};
    int64_t m = store_message_begin(st, a, &ai);
    TAP_OK(m > 0, "answer begun");
    store_conversation_load(st, a, &c);
    TAP_INT(c ? (int)c->messages[c->n_messages - 1].status : -1, STORE_STREAMING,
            "empty streaming row committed at once");
    store_conversation_free(c);
    clk.mono += 0.1;
    TAP_INT(store_message_append(st, m, "Hel", 3), 0, "append within 250 ms only buffers");
    TAP_OK(store_flush_deadline(st) > clk.mono, "a flush deadline is pending");
    store_conversation_load(st, a, &c);
    TAP_STR(c ? c->messages[c->n_messages - 1].content : NULL, "", "nothing committed yet");
    store_conversation_free(c);
    clk.mono += 0.2;
    TAP_INT(store_message_append_reasoning(st, m, "think", 5), 1, "after 250 ms it commits");
    TAP_OK(store_flush_deadline(st) == 0, "nothing pending after a commit");
    clk.mono += 0.01;
    TAP_INT(store_message_append(st, m, "lo", 2), 0, "next append buffers");
    store_conversation_load(st, a, &c);
    TAP_STR(c ? c->messages[c->n_messages - 1].content : NULL, "Hel", "first batch committed");
    TAP_STR(c ? c->messages[c->n_messages - 1].reasoning : NULL, "think", "reasoning committed");
    store_conversation_free(c);
    TAP_INT(store_message_flush(st, m), 0, "explicit flush");
    store_conversation_load(st, a, &c);
    TAP_STR(c ? c->messages[c->n_messages - 1].content : NULL, "Hello", "flush committed");
    store_conversation_free(c);
    TAP_INT(search_finds(st, "Hello", m), 0, "a streaming answer is not indexed yet");
    store_message_append(st, m, ", world", 7);
    struct store_usage u = {11, 22, 33, NULL};
    struct store_timings tm = {0.5, 2.0, 44.5, 0.01, 0.02, 0.03, -1, -1, -1};
    TAP_INT(store_message_finish(st, m, STORE_COMPLETE, "stop", &u, &tm, NULL), 0, "finish");
    store_conversation_load(st, a, &c);
    if (c) {
        struct store_message *x = &c->messages[c->n_messages - 1];
        TAP_STR(x->content, "Hello, world", "buffered tail committed by finish");
        TAP_INT(x->status, STORE_COMPLETE, "status complete");
        TAP_STR(x->finish_reason, "stop", "finish reason");
        TAP_INT(x->usage.prompt_tokens, 11, "prompt tokens");
        TAP_INT(x->usage.completion_tokens, 22, "completion tokens");
        TAP_INT(x->usage.total_tokens, 33, "total tokens");
        TAP_OK(x->timings.ttft == 0.5 && x->timings.total == 2.0, "ttft and total time");
        TAP_OK(x->timings.tokens_per_s == 44.5, "tokens/s");
        TAP_OK(x->timings.dns == 0.01 && x->timings.connect == 0.02 && x->timings.tls == 0.03,
               "dns, connect, tls times");
        TAP_STR(x->model, "gpt-x", "answer model");
        TAP_STR(x->profile, "work", "answer profile");
        TAP_INT(x->cached, 0, "not cached");
        TAP_STR(x->role, "assistant", "role assistant");
    }
    store_conversation_free(c);
    TAP_INT(search_finds(st, "Hello, world", m), 1, "finished answer is indexed");
    TAP_INT(store_message_append(st, m, "more", 4), -1, "append after finish fails");
    TAP_INT(store_message_finish(st, 424242, STORE_ERROR, NULL, NULL, NULL, "x"),
            STORE_NOT_FOUND, "finish of an unknown message");
    TAP_INT(store_message_finish(st, m, STORE_STREAMING, NULL, NULL, NULL, NULL), -1,
            "finish with status streaming is refused");

    /* An error answer keeps its message; unknown usage stays unknown. */
    int64_t e = store_message_begin(st, a, &ai);
    store_message_append(st, e, "partial", 7);
    store_message_finish(st, e, STORE_ERROR, NULL, NULL, NULL, "HTTP 500 from server");
    store_conversation_load(st, a, &c);
    if (c) {
        struct store_message *x = &c->messages[c->n_messages - 1];
        TAP_INT(x->status, STORE_ERROR, "error status");
        TAP_STR(x->error, "HTTP 500 from server", "error message");
        TAP_STR(x->content, "partial", "partial text kept");
        TAP_INT(x->usage.total_tokens, -1, "unknown usage is -1");
        TAP_OK(x->timings.ttft < 0, "unknown timing is < 0");
    }
    store_conversation_free(c);

    /* Closing with an unfinished answer saves it as interrupted. */
    int64_t open_id = store_message_begin(st, b, &ai);
    store_message_append(st, open_id, "cut short", 9);
    store_close(st);
    st = open_new("conv.db", NULL);
    store_conversation_load(st, b, &c);
    if (c) {
        struct store_message *x = &c->messages[c->n_messages - 1];
        TAP_INT(x->status, STORE_INTERRUPTED, "close marks an unfinished answer interrupted");
        TAP_STR(x->content, "cut short", "and keeps its buffered text");
    }
    store_conversation_free(c);

    /* Delete cascades to messages, summaries and the index. */
    TAP_INT(store_summary_put(st, a, m1, m, "summary of a", "gpt-x", 9), 0, "summary stored");
    TAP_INT(store_conversation_delete(st, a), 0, "delete");
    TAP_INT(store_conversation_load(st, a, &c), STORE_NOT_FOUND, "deleted conversation is gone");
    TAP_INT(search_finds(st, "Hello, world", m), 0, "its messages left the index");
    struct store_summary s;
    TAP_INT(store_summary_get(st, a, m1, m, &s), STORE_NOT_FOUND, "its summaries are gone");
    TAP_INT(store_conversation_delete(st, a), STORE_NOT_FOUND, "second delete: not found");
    /* ids are never given twice: the newest deleted, the next one is past it (v16) */
    int64_t hi = store_conversation_new(st, "newest", NULL, "m", NULL);
    TAP_INT(store_conversation_delete(st, hi), 0, "the newest conversation deleted");
    int64_t next = store_conversation_new(st, "next", NULL, "m", NULL);
    TAP_OK(hi > 0 && next == hi + 1, "the next conversation does not get its id (%lld, %lld)",
           (long long)hi, (long long)next);
    char *path = tmp_path("conv.db");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE conversation_id = 1"), 0,
            "no orphan messages");
    store_close(st);
    TAP_INT(raw_exec(path, "INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')"),
            SQLITE_OK, "FTS index agrees with the messages table");
    tap_sound(path, "integrity_check ok");
    free(path);
}

/* ---------------------------------------------------------------- crash recovery */

static void test_crash_recovery(void)
{
    char *path = tmp_path("crash.db");
    int fds[2];
    if (pipe(fds) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char *err = NULL;
        struct store *st = store_open(path, NULL, &err);
        if (!st)
            _exit(3);
        int64_t conv = store_conversation_new(st, "crash", NULL, "m", NULL);
        int64_t id = store_message_begin(st, conv, NULL);
        if (write(fds[1], &id, sizeof id) != sizeof id)
            _exit(4);
        size_t total = 0;
        for (int i = 0;; i++) {
            char chunk[32];
            int len = snprintf(chunk, sizeof chunk, "chunk %06d \xE5\x8C\x97;", i);
            total += (size_t)len;
            int rc = store_message_append(st, id, chunk, (size_t)len);
            if (rc < 0)
                _exit(5);
            if (rc == 1) {
                int64_t committed = (int64_t)total;
                if (write(fds[1], &committed, sizeof committed) != sizeof committed)
                    _exit(6);
            }
            usleep(500);
        }
    }
    close(fds[1]);
    int64_t id = 0, committed = 0, v;
    int commits = 0;
    if (read(fds[0], &id, sizeof id) != sizeof id)
        id = -1;
    while (commits < 4 && read(fds[0], &v, sizeof v) == sizeof v) {
        committed = v;
        commits++;
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer killed with SIGKILL");
    TAP_INT(commits, 4, "writer committed four batches before the kill");

    tap_sound(path, "database intact after kill -9");
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open(path, &info, &err);
    TAP_OK(st != NULL, "reopen after the crash");
    if (!st)
        return;
    TAP_INT(info.recovered, 1, "one interrupted answer recovered");
    TAP_INT(store_recover(st), 0, "nothing left to recover");
    struct store_conversation *c = NULL;
    store_conversation_load(st, 1, &c);
    if (c && c->n_messages == 1) {
        struct store_message *m = &c->messages[0];
        TAP_INT(m->id, id, "the streamed answer");
        TAP_INT(m->status, STORE_INTERRUPTED, "marked interrupted");
        TAP_OK((int64_t)m->content_len >= committed,
               "holds every committed batch (%zu >= %lld bytes)", m->content_len,
               (long long)committed);
        /* Everything held is a whole prefix of what was streamed. */
        struct buf want = BUF_INIT;
        for (int i = 0; want.len < m->content_len; i++)
            buf_printf(&want, "chunk %06d \xE5\x8C\x97;", i);
        TAP_OK(want.len == m->content_len && memcmp(want.data, m->content, want.len) == 0,
               "content is exactly the first batches, in order");
        buf_free(&want);
    } else {
        TAP_OK(0, "the streamed answer");
    }
    store_conversation_free(c);
    TAP_INT(search_finds(st, "chunk 000001", id), 1, "recovered answer is searchable");
    store_close(st);
    free(path);
}

/* ---------------------------------------------------------------- two writers */

static void test_two_writers(void)
{
    char *path = tmp_path("two.db");
    char *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    store_close(st);
    int go[2];
    if (pipe(go) != 0)
        return;
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            close(go[1]);
            char c;
            if (read(go[0], &c, 1) != 1)
                _exit(9);
            st = store_open(path, NULL, &err);
            if (!st) {
                fprintf(stderr, "child open: %s\n", err);
                _exit(2);
            }
            int64_t conv = store_conversation_new(st, k ? "child 1" : "child 0", NULL, NULL,
                                                  NULL);
            for (int i = 0; i < 200; i++) {
                char text[64];
                int len = snprintf(text, sizeof text, "writer %d message %d", k, i);
                if (store_message_add(st, conv, i % 2 ? "assistant" : "user", text,
                                      (size_t)len, NULL) < 0) {
                    fprintf(stderr, "child %d: %s\n", k, store_error(st));
                    _exit(1);
                }
            }
            store_close(st);
            _exit(0);
        }
    }
    close(go[0]);
    if (write(go[1], "gg", 2) != 2)
        TAP_OK(0, "start signal");
    close(go[1]);
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(kids[k], &status, 0);
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    TAP_OK(ok, "two processes writing at once both succeed (no 'database is locked')");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 400, "all 400 messages present");
    TAP_INT(raw_int(path, "SELECT count(DISTINCT conversation_id) FROM messages"), 2,
            "in two conversations");
    st = store_open(path, NULL, &err);
    TAP_INT(search_count(st, "\"writer 1 message 199\"", NULL, NULL, NULL), 1,
            "last one indexed");
    store_close(st);
    free(path);
}

/* ---------------------------------------------------------------- search */

static void test_search(void)
{
    struct fake_clock clk = {0, 1700000000};
    struct store *st = open_new("search.db", NULL);
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    int64_t conv = store_conversation_new(st, "search fixture", NULL, NULL, NULL);
    struct store_msg_info m1 = {.model = "model-one"}, m2 = {.model = "model-two"};
    const char *texts[] = {
        "我们今天去北京大学参观了图书馆",                              /* 0 CJK */
        "Café crème brûlée est délicieux",                             /* 1 accents */
        "he said \"hello\" AND (maybe) NOT; x:y -z *star ^caret {col}", /* 2 operators */
        "The quick brown fox jumps over the lazy dog",                 /* 3 */
        "NEAR the end, OR so it seems",                                /* 4 */
        "apple apple apple apple",                                     /* 5 bm25: dense */
        "an apple a day keeps many other long words and doctors away", /* 6 bm25: sparse */
        "東京と京都",                                                  /* 7 */
    };
    int64_t ids[8];
    for (int i = 0; i < 8; i++) {
        clk.epoch = 1700000000 + i * 86400; /* one message a day */
        ids[i] = store_message_add(st, conv, i % 2 ? "assistant" : "user", texts[i],
                                   strlen(texts[i]), i < 4 ? &m1 : &m2);
    }
    char *snip = NULL;
    int64_t fid = 0;
    /* CJK substrings of 2 and 3 characters. */
    TAP_INT(search_count(st, "北京", NULL, &snip, &fid), 1, "CJK 2 chars: 北京");
    TAP_INT(fid, ids[0], "CJK 2 chars finds the right message");
    TAP_OK(snip && strstr(snip, "[北京]"), "CJK 2-char snippet highlighted: %s",
           snip ? snip : "");
    free(snip);
    TAP_INT(search_count(st, "北京大", NULL, &snip, &fid), 1, "CJK 3 chars: 北京大");
    TAP_OK(snip && strstr(snip, "[北京大]"), "CJK 3-char snippet: %s", snip ? snip : "");
    free(snip);
    TAP_INT(search_count(st, "图书馆", NULL, NULL, &fid), 1, "CJK 3 chars at the end");
    TAP_INT(fid, ids[0], "right message");
    TAP_INT(search_count(st, "京", NULL, NULL, NULL), 2, "CJK 1 char finds both messages");
    TAP_INT(search_count(st, "京都", NULL, NULL, &fid), 1, "京都 2 chars");
    TAP_INT(fid, ids[7], "right message");
    TAP_INT(search_count(st, "大阪", NULL, NULL, NULL), 0, "absent CJK: no hits, no error");
    TAP_INT(search_count(st, "北京 图书馆", NULL, NULL, NULL), 1, "2-char AND 3-char terms");
    TAP_INT(search_count(st, "北京 京都", NULL, NULL, NULL), 0, "AND across messages: none");

    /* Accents and case. */
    TAP_INT(search_count(st, "crème", NULL, &snip, &fid), 1, "accented word");
    TAP_INT(fid, ids[1], "right message");
    TAP_OK(snip && strstr(snip, "[crème]"), "accented snippet: %s", snip ? snip : "");
    free(snip);
    TAP_INT(search_count(st, "CRÈME", NULL, NULL, NULL), 1, "accented word, upper case");
    TAP_INT(search_count(st, "brûlée délicieux", NULL, NULL, NULL), 1, "two accented words");
    TAP_INT(search_count(st, "é", NULL, NULL, NULL), 1, "1-char accented letter");
    TAP_INT(search_count(st, "É", NULL, NULL, NULL), 1, "1-char accented capital");
    TAP_INT(search_count(st, "FOX", NULL, &snip, NULL), 1, "case-insensitive ASCII");
    TAP_OK(snip && strstr(snip, "[fox]"), "snippet keeps the text's case: %s", snip ? snip : "");
    free(snip);

    /* Quotes, operators, parentheses: never an error, matched literally. */
    static const char *const hostile[] = {
        "\"",       "\"\"",        "\"unbalanced", "a\"b",    "hello\"",      "AND",
        "\"OR\"",   "NOT",         "NEAR",         "NEAR(",   "NEAR(a b, 2)", "*",
        "-",        ":",           "(",            ")",       "()",           "x:y",
        "col:fox",  "fox*",        "-fox",         "+fox",    "^fox",         "{col}",
        "a OR b",   "NOT fox",     "\"a\" \"b",    "'",       "''",           "\\",
        "%",        "_",           "%%",           "\x01",    "fox AND",      "AND AND",
        "\"AND\"",  "(maybe)",     "*star",        "; DROP TABLE messages; --",
    };
    int errors = 0;
    for (size_t i = 0; i < TT_ARRAY_LEN(hostile); i++) {
        int n = search_count(st, hostile[i], NULL, NULL, NULL);
        if (n < 0 && strcmp(hostile[i], "\"") != 0 && strcmp(hostile[i], "\"\"") != 0) {
            printf("# query <%s> failed: %s\n", hostile[i], store_error(st));
            errors++;
        }
    }
    TAP_INT(errors, 0, "no hostile query produces an error");
    TAP_INT(search_count(st, "\"", NULL, NULL, NULL), -1, "a lone quote is an empty query");
    TAP_OK(strstr(store_error(st), "empty"), "empty query message: %s", store_error(st));
    TAP_INT(search_count(st, "   ", NULL, NULL, NULL), -1, "blank query is an error");
    TAP_INT(search_count(st, "x:y", NULL, NULL, &fid), 1, "x:y literal");
    TAP_INT(fid, ids[2], "right message");
    TAP_INT(search_count(st, "(maybe)", NULL, NULL, NULL), 1, "parentheses literal");
    TAP_INT(search_count(st, "*star", NULL, NULL, NULL), 1, "star literal");
    TAP_INT(search_count(st, "-z", NULL, NULL, NULL), 1, "minus literal (2 chars)");
    TAP_INT(search_count(st, "{col}", NULL, NULL, NULL), 1, "braces literal");
    TAP_INT(search_count(st, "^caret", NULL, NULL, NULL), 1, "caret literal");
    TAP_INT(search_count(st, "\"hello\"", NULL, NULL, NULL), 1, "quoted word");
    TAP_INT(search_count(st, "said \"hello", NULL, NULL, NULL), 1, "unbalanced quote");
    TAP_INT(search_count(st, "NEAR", NULL, NULL, &fid), 1, "NEAR literal");
    TAP_INT(fid, ids[4], "right message");
    TAP_INT(search_count(st, "AND", NULL, NULL, NULL), 2, "AND literal (two messages hold it)");
    TAP_INT(search_count(st, "NOT fox", NULL, NULL, NULL), 0, "NOT is a word, not negation");
    TAP_INT(search_count(st, "\"AND (maybe)\"", NULL, NULL, NULL), 1, "phrase with operators");
    TAP_INT(search_count(st, "; DROP TABLE messages; --", NULL, NULL, NULL), 0,
            "SQL injection attempt is just text");
    TAP_INT(search_count(st, "fox", NULL, NULL, NULL), 1, "table still there");

    /* OR alone, in capitals, parts alternatives; each message once. */
    TAP_INT(search_count(st, "quick OR crème", NULL, NULL, NULL), 2, "OR: one of each side");
    TAP_INT(search_count(st, "fox OR dog OR lazy", NULL, NULL, NULL), 1,
            "OR: a message found by every side counts once");
    TAP_INT(search_count(st, "quick elephant OR brûlée délicieux", NULL, NULL, &fid), 1,
            "OR binds looser than AND: (quick elephant) or (brûlée délicieux)");
    TAP_INT(fid, ids[1], "right message");
    TAP_INT(search_count(st, "é OR fox", NULL, NULL, NULL), 2,
            "OR of a scanned 1-char term and an indexed word");
    TAP_INT(search_count(st, "fox or dog", NULL, NULL, NULL), 0, "lower-case or is a word");
    TAP_INT(search_count(st, "\"OR\" seems", NULL, NULL, &fid), 1, "quoted OR is searched for");
    TAP_INT(fid, ids[4], "right message");
    {
        struct store_search_opts one = {.limit = 1};
        TAP_INT(search_count(st, "apple OR fox OR crème", &one, NULL, NULL), 1,
                "OR: --limit holds for the merged hits");
    }
    static const char *const half[] = {"OR fox", "fox OR", "fox OR OR dog", "OR"};
    for (size_t i = 0; i < TT_ARRAY_LEN(half); i++) {
        int got = search_count(st, half[i], NULL, NULL, NULL);
        TAP_OK(got == -1 && strstr(store_error(st), "OR needs"), "<%s> is an error: %s",
               half[i], got == -1 ? store_error(st) : "(none)");
    }

    /* Phrases vs AND. */
    TAP_INT(search_count(st, "\"quick brown\"", NULL, NULL, NULL), 1, "phrase in order");
    TAP_INT(search_count(st, "\"brown quick\"", NULL, NULL, NULL), 0, "phrase out of order");
    TAP_INT(search_count(st, "brown quick", NULL, NULL, NULL), 1, "words in any order");
    TAP_INT(search_count(st, "quick elephant", NULL, NULL, NULL), 0, "every word required");
    TAP_INT(search_count(st, "uick bro", NULL, NULL, NULL), 1, "substrings of words");

    /* Ranking. */
    struct store_hit *hits;
    size_t n;
    TAP_INT(store_search(st, "apple", NULL, &hits, &n), 0, "ranked search");
    TAP_INT(n, 2, "two apple messages");
    if (n == 2) {
        TAP_INT(hits[0].message_id, ids[5], "denser match ranks first (bm25)");
        TAP_OK(hits[0].rank <= hits[1].rank, "ranks ascend");
        TAP_STR(hits[0].title, "search fixture", "hit carries the title");
        TAP_STR(hits[0].model, "model-two", "hit carries the model");
        TAP_INT(hits[0].conversation_id, conv, "hit carries the conversation");
    }
    store_hits_free(hits, n);

    /* Filters. */
    struct store_search_opts o = {0};
    o.model = "model-one";
    TAP_INT(search_count(st, "e", &o, NULL, NULL), 3, "model filter (short term)");
    TAP_INT(search_count(st, "the", &o, NULL, NULL), 1, "model filter (fts)");
    o.model = "model-two";
    TAP_INT(search_count(st, "the", &o, NULL, NULL), 2, "other model (\"the\" in \"other\" too)");
    o.model = NULL;
    o.since = 1700000000 + 3 * 86400;
    o.until = 1700000000 + 5 * 86400;
    TAP_INT(search_count(st, "e", &o, NULL, NULL), 2, "date range [day 3, day 5)");
    TAP_INT(search_count(st, "apple", &o, NULL, NULL), 0, "date range excludes days 5-6");
    o.since = o.until = 0;
    o.limit = 1;
    TAP_INT(search_count(st, "e", &o, NULL, NULL), 1, "limit");
    o.limit = 0;
    o.open = "<<";
    o.close = ">>";
    o.snippet_chars = 20;
    TAP_INT(search_count(st, "lazy", &o, &snip, NULL), 1, "custom markers");
    TAP_OK(snip && strstr(snip, "<<lazy>>"), "custom markers used: %s", snip ? snip : "");
    TAP_OK(snip && strncmp(snip, "\xE2\x80\xA6", 3) == 0, "cut start marked with an ellipsis");
    free(snip);
    store_close(st);
}

/* ---------------------------------------------------------------- search ranking and window */

/* The ids (and bm25 scores) that FTS5's own bm25() gives for a MATCH expression on the
 * index tbl: the best `limit` of the newest `window` matches, lowest score first, then
 * newest. n gets the count. The connection registers tt_words to read the word index. */
static size_t bm25_expect_like(const char *path, const char *tbl, const char *match,
                               const char *like, int window, int limit, int64_t *ids,
                               double *scores)
{
    sqlite3 *db = NULL;
    size_t n = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        !fts_words_register(db)) {
        sqlite3_close(db);
        return 0;
    }
    char *sql = xasprintf("SELECT id, sc FROM (SELECT rowid AS id, bm25(%s) AS sc FROM %s "
                          "WHERE %s MATCH ?1 ORDER BY rowid DESC LIMIT ?2) "
                          "ORDER BY sc, id DESC LIMIT ?3",
                          tbl, tbl, tbl);
    {
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
            sqlite3_bind_text(s, 1, match, -1, SQLITE_STATIC);
            sqlite3_bind_int(s, 2, window);
            sqlite3_bind_int(s, 3, like ? window : limit);
            sqlite3_stmt *f = NULL; /* like: only the rows whose text (blanks as one space) is */
            if (like)
                sqlite3_prepare_v2(db, "SELECT replace(replace(replace(content, char(10), ' '), "
                                       "char(9), ' '), '  ', ' ') LIKE ?2 FROM messages "
                                       "WHERE id = ?1", -1, &f, NULL);
            while (sqlite3_step(s) == SQLITE_ROW && (int)n < limit) {
                ids[n] = sqlite3_column_int64(s, 0);
                scores[n] = sqlite3_column_double(s, 1);
                if (f) {
                    sqlite3_reset(f);
                    sqlite3_bind_int64(f, 1, ids[n]);
                    sqlite3_bind_text(f, 2, like, -1, SQLITE_STATIC);
                    if (sqlite3_step(f) != SQLITE_ROW || !sqlite3_column_int(f, 0))
                        continue;
                }
                n++;
            }
            sqlite3_finalize(f);
            sqlite3_finalize(s);
        }
    }
    free(sql);
    sqlite3_close(db);
    return n;
}

static size_t bm25_expect(const char *path, const char *tbl, const char *match, int window,
                          int limit, int64_t *ids, double *scores)
{
    return bm25_expect_like(path, tbl, match, NULL, window, limit, ids, scores);
}

/* store_search's hits for q equal bm25()'s for match: same ids in the same order, and with
 * exact, the same scores (the IDF is exact when the store has fewer messages than its
 * sample); otherwise only the order (one term: the IDF scales every score alike). On the
 * trigram index with match, and, with wmatch (q's words as prefix queries), on the word
 * index, which a search of such words takes. */
static void check_ranking_like(struct store *st, const char *path, const char *tbl,
                               const char *q, const char *match, const char *like, int limit,
                               int exact)
{
    int64_t ids[64];
    double sc[64];
    int words = strcmp(tbl, "messages_words") == 0;
    store_search_index(st);
    size_t want = bm25_expect_like(path, tbl, match, like, 5000, limit, ids, sc);
    struct store_search_opts o = {0};
    o.limit = limit;
    o.no_words = !words;
    struct store_hit *h = NULL;
    size_t n = 0;
    int rc = store_search(st, q, &o, &h, &n);
    int same = rc == 0 && n == want && want > 0;
    for (size_t i = 0; same && i < n; i++) {
        double tol = 1e-9 * (sc[i] < 0 ? -sc[i] : sc[i]) + 1e-12;
        same = h[i].message_id == ids[i] &&
               (!exact || (h[i].rank - sc[i] <= tol && sc[i] - h[i].rank <= tol));
    }
    TAP_OK(same, "%s: %zu hits ranked as bm25() ranks them%s on %s (got %zu%s)", q, want,
           exact ? ", same scores" : "", tbl, n, rc ? ", error" : "");
    store_hits_free(h, n);
}

static void check_ranking_on(struct store *st, const char *path, const char *tbl,
                             const char *q, const char *match, int limit, int exact)
{
    check_ranking_like(st, path, tbl, q, match, NULL, limit, exact);
}

static void check_ranking(struct store *st, const char *path, const char *q, const char *match,
                          const char *wmatch, int limit, int exact)
{
    check_ranking_on(st, path, "messages_fts", q, match, limit, exact);
    if (wmatch)
        check_ranking_on(st, path, "messages_words", q, wmatch, limit, exact);
}

static void test_search_ranking(void)
{
    /* A small store: the IDF comes from every message, so scores are bm25()'s exactly. */
    struct store *st = open_new("rank.db", NULL);
    char *path = tmp_path("rank.db");
    int64_t conv = store_conversation_new(st, "ranking", NULL, NULL, NULL);
    const char *texts[] = {
        "alpha", "alpha alpha beta", "beta beta beta gamma", "alpha beta gamma delta",
        "gamma gamma", "a long message about alpha and then many other words follow it here",
        "alpha beta", "beta alpha", "delta", "alpha gamma alpha gamma alpha gamma",
        "beta\nalpha  beta\tgamma", "gamma\nalpha\tgamma",
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(texts); i++)
        store_message_add(st, conv, i % 2 ? "assistant" : "user", texts[i], strlen(texts[i]),
                          NULL);
    check_ranking(st, path, "alpha", "\"alpha\"", "\"alpha\"*", 20, 1);
    check_ranking(st, path, "alpha beta", "\"alpha\" \"beta\"", NULL, 20, 1);
    check_ranking(st, path, "gamma alpha", "\"gamma\" \"alpha\"", "\"gamma\"* \"alpha\"*", 20, 1);
    /* A phrase: the rows holding it, its blanks matching any blanks (a line break, a tab, two
     * spaces: the last text), ranked as bm25() ranks its words; on either index. */
    check_ranking_like(st, path, "messages_fts", "\"alpha beta\"", "\"alpha\" \"beta\"",
                       "%alpha beta%", 20, 1);
    check_ranking_like(st, path, "messages_words", "\"alpha gamma\"", "\"alpha\"* \"gamma\"*",
                       "%alpha gamma%", 20, 1);
    check_ranking_like(st, path, "messages_fts", "\"beta alpha beta\"",
                       "\"beta\" \"alpha\" \"beta\"", "%beta alpha beta%", 20, 1);
    check_ranking(st, path, "lph eta", "\"lph\" \"eta\"", NULL, 3, 1);
    /* OR: the alternatives take turns (their scores cannot be compared: a 2-character
     * term's scan ranks all 0, bm25 sums grow with the terms); a review found the one
     * message a short alternative found cut off by --limit 3 */
    {
        int64_t go = store_message_add(st, conv, "user", "go now", 6, NULL);
        struct store_search_opts three = {.limit = 3};
        struct store_hit *h = NULL;
        size_t n = 0;
        int rc = store_search(st, "go OR alpha", &three, &h, &n);
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= h[i].message_id == go;
        TAP_OK(rc == 0 && n == 3 && found, "OR: each alternative gets its turn within --limit");
        store_hits_free(h, n);
        rc = store_search(st, "alpha beta gamma OR delta", &three, &h, &n);
        found = 0;
        for (size_t i = 0; i < n; i++)
            found |= strstr(h[i].snippet, "delta") != NULL && !strstr(h[i].snippet, "alpha");
        TAP_OK(rc == 0 && found, "OR: a one-word side is not pushed out by three-word sums");
        store_hits_free(h, n);
    }
    store_close(st);
    free(path);

    /* 13,000 messages, more than the sample (the newest 2,000) and the ranked window (the
     * newest 5,000 matches): every way of reading the matches below the sample. */
    st = open_new("window.db", NULL);
    path = tmp_path("window.db");
    conv = store_conversation_new(st, "window", NULL, NULL, NULL);
    store_close(st);
    sqlite3 *db;
    sqlite3_stmt *ins = NULL;
    int ok = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
             sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "INSERT INTO messages(conversation_id, role, created, "
                                    "content) VALUES(?1, 'user', ?2, ?3)",
                                -1, &ins, NULL) == SQLITE_OK;
    struct buf b = BUF_INIT;
    for (int i = 1; ok && i <= 13000; i++) {
        buf_reset(&b);
        if (i <= 11000) /* none in the sample, more than twice the window below it */
            for (int k = 0; k <= i % 5; k++)
                buf_appends(&b, "driftx ");
        if (i > 4000 && i <= 10000) /* none in the sample, 6,000 below it */
            for (int k = 0; k <= i % 3; k++)
                buf_appends(&b, "ringx ");
        if (i % 400 == 7) /* rare: a few in the sample, all ranked */
            for (int k = 0; k <= i % 4; k++)
                buf_appends(&b, "rarex ");
        for (int k = 0; k <= i % 2; k++) /* in every message */
            buf_appends(&b, "commonx ");
        for (int k = 0; k < i % 37; k++) /* lengths vary */
            buf_printf(&b, "w%d ", (i * 7 + k) % 1000);
        sqlite3_bind_int64(ins, 1, conv);
        sqlite3_bind_int64(ins, 2, 1700000000 + i);
        sqlite3_bind_text(ins, 3, buf_str(&b), (int)b.len, SQLITE_TRANSIENT);
        ok = sqlite3_step(ins) == SQLITE_DONE && sqlite3_reset(ins) == SQLITE_OK;
    }
    buf_free(&b);
    sqlite3_finalize(ins);
    ok = ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(db);
    TAP_OK(ok, "13,000 messages loaded");
    st = open_new("window.db", NULL);
    check_ranking(st, path, "driftx", "\"driftx\"", "\"driftx\"*", 20, 0); /* oldest first: too many */
    check_ranking(st, path, "ringx", "\"ringx\"", "\"ringx\"*", 20, 0); /* oldest first, newest kept */
    check_ranking(st, path, "rarex", "\"rarex\"", "\"rarex\"*", 20, 0); /* oldest first, all of them */
    check_ranking(st, path, "commonx", "\"commonx\"", "\"commonx\"*", 20, 0); /* newest first */
    check_ranking(st, path, "ommon", "\"ommon\"", "\"ommon\"*", 50, 0);
    struct store_hit *h = NULL;
    size_t n = 0;
    TAP_INT(store_search(st, "ringx driftx rarex", NULL, &h, &n), 0, "three terms");
    int all = n > 0;
    for (size_t i = 0; i < n; i++) /* in ringx and driftx: 4000 < id <= 10000, id % 400 == 7 */
        all = all && h[i].message_id > 4000 && h[i].message_id <= 10000 &&
              h[i].message_id % 400 == 7;
    TAP_OK(all && n == 15, "three terms: the 15 messages holding all three (%zu)", n);
    store_hits_free(h, n);
    struct store_search_opts o = {0};
    o.since = 1700000000 + 9000;
    TAP_INT(store_search(st, "ringx", &o, &h, &n), 0, "filtered search");
    all = n == 20;
    for (size_t i = 0; i < n; i++)
        all = all && h[i].message_id >= 9000 && h[i].message_id <= 10000;
    TAP_OK(all, "filtered: 20 hits, all in the date range (%zu)", n);
    store_hits_free(h, n);
    store_close(st);
    free(path);
}

/* ---------------------------------------------------------------- the word index */

/* The ids store_search finds for q (limit 1000), sorted, on the word index (words = 1) or the
 * trigram index only; n gets the count, -1 on an error. */
static int64_t *search_ids(struct store *st, const char *q, int words, int *n)
{
    struct store_search_opts o = {0};
    o.limit = 1000;
    o.no_words = !words;
    struct store_hit *h = NULL;
    size_t k = 0;
    *n = store_search(st, q, &o, &h, &k) == 0 ? (int)k : -1;
    int64_t *ids = xcalloc(k + 1, sizeof *ids);
    for (size_t i = 0; i < k; i++) { /* insertion sort: few */
        size_t j = i;
        while (j > 0 && ids[j - 1] > h[i].message_id) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = h[i].message_id;
    }
    store_hits_free(h, k);
    return ids;
}

/* 1 when the ids of q through the word index equal those through the trigram index. */
static int same_both_ways(struct store *st, const char *q, int *count)
{
    int nw, nt;
    int64_t *w = search_ids(st, q, 1, &nw), *t = search_ids(st, q, 0, &nt);
    int same = nw >= 0 && nw == nt;
    for (int i = 0; same && i < nw; i++)
        same = w[i] == t[i];
    free(w);
    free(t);
    *count = nw;
    return same;
}

/* FTS5's own check of the word index against the messages (all finished, none queued). */
static int words_integrity(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = fts_words_register(db) ? SQLITE_OK : SQLITE_ERROR;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "INSERT INTO messages_words(messages_words) VALUES('integrity-check')",
                          NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static void test_words_index(void)
{
    /* Same answers as the trigram index: words of 5-16 characters, found at the start, the
     * middle and the end of longer words, in any case, next to punctuation, in non-ASCII
     * text; terms that are not one whole word go to the trigram index. */
    struct store *st = open_new("words.db", NULL);
    char *path = tmp_path("words.db");
    int64_t conv = store_conversation_new(st, "words", NULL, NULL, NULL);
    const char *syl[] = {"ka", "lo", "rem", "ish", "tra", "vo", "en", "quu", "zel", "pa"};
    const char *extra[] = {"Überprüfung", "ÜBERPRÜFUNG", "straße", "ΑΘΗΝΑ", "αθηνα",
                           "图书馆数据库系统", "naïve", "x-ray", "foo.bar", "e=mc2",
                           "node\xCD\x85system" /* U+0345: folds to iota */,
                           "database数据库系统", "数据库Database", "ภาษาไทยสวัสดีครับ",
                           "vectorデータベース"};
    struct buf b = BUF_INIT, w = BUF_INIT;
    uint64_t seed = 7;
    for (int i = 0; i < 400; i++) {
        buf_reset(&b);
        int words = 3 + (int)(seed % 30);
        for (int k = 0; k < words; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            if ((seed >> 33) % 13 == 0) {
                buf_appends(&b, extra[(seed >> 40) % TT_ARRAY_LEN(extra)]);
            } else {
                int n = 1 + (int)((seed >> 36) % 8);
                for (int j = 0; j < n; j++) {
                    const char *x = syl[(seed >> (20 + 3 * j)) % TT_ARRAY_LEN(syl)];
                    buf_appends(&b, (seed >> (50 + j)) & 1 && j == 0 ? "KA" : x);
                }
            }
            buf_appends(&b, (seed >> 60) % 3 ? " " : ", ");
        }
        if (i % 80 == 3) { /* five messages with a word too long for the word index (a blob) */
            buf_appends(&b, " 0f3a9c0d2e7b41aa9e5ckaremishtralo88d1c2b3a4f5e6d7c8b9");
            for (int k = 0; k < 16; k++)
                buf_appends(&b, "0123456789abcdef");
        }
        if (i % 50 == 9) /* a hash: long, but not for the word index */
            buf_appends(&b, " e83c5163316f89bfbde7d9ab23ca2e25604af290");
        store_message_add(st, conv, i % 2 ? "assistant" : "user", buf_str(&b), b.len, NULL);
    }
    const char *queries[] = {
        "karem", "remish", "ishtra", "traquu", "kalorem", "lorem", "ishtravo", "quuzelpa",
        "KaRem", "zelpaka", "enenen", "remishtraquuzelp", "absent", "überprüfung", "ÜBERPRÜF",
        "prüfung", "STRASSE", "straße", "αθηνα", "ΑΘΗΝ", "书馆数据库", "naïve", "karem lorem",
        "ishtra vo", "x-ray", "foo.bar", "remishtraquuzelpaka", "ka", "rem,", "nodeιsystem",
        "NODEΙSYSTEM", "node\xCD\x85sys", "2e7b41aa9e5c", "88d1c2b3a4f5e6d7", "89abcdef012",
        "316f89bfbde7d9ab", "e83c5163316f", "database", "tabase", "DATABASE", "vector",
        "สวัสดีครับ", "データベース", "数据库Data"};
    int all_same = 1, found = 0;
    const char *word = NULL; /* one of the first 12 (plain words) that is found */
    for (size_t i = 0; i < TT_ARRAY_LEN(queries); i++) {
        int n = 0;
        int same = same_both_ways(st, queries[i], &n);
        if (!word && i < 12 && n > 0)
            word = queries[i];
        if (!same)
            TAP_OK(0, "word index and trigram index disagree on '%s'", queries[i]);
        all_same = all_same && same;
        found += n > 0;
    }
    TAP_OK(all_same, "%zu queries: the word index finds what the trigram index finds",
           TT_ARRAY_LEN(queries));
    TAP_OK(found >= 20, "most of them find something (%d)", found);
    TAP_INT(raw_int(path, "SELECT count(*) FROM words_long"), 5,
            "the five messages with a long word are left out of the word index");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages_words_docsize WHERE id IN "
                          "(SELECT message_id FROM words_long)"),
            0, "none of them is in it");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages_words_docsize d JOIN messages m "
                          "ON m.id = d.id WHERE m.content LIKE '%e83c5163316f89bf%'"),
            8, "the eight with a 40-character hash are");
    /* A hex dump wrapped at 60 characters has no long word, but many of 24 or more. */
    buf_reset(&b);
    for (int k = 0; k < 40; k++) {
        for (int j = 0; j < 60; j++)
            buf_appendc(&b, "0123456789abcdef"[(k * 7 + j * 13 + j / 5) % 16]);
        buf_appendc(&b, '\n');
    }
    char probe[13];
    memcpy(probe, b.data + 5 * 61 + 20, 12);
    probe[12] = 0;
    store_message_add(st, conv, "user", buf_str(&b), b.len, NULL);
    int n_probe = 0, same_probe = same_both_ways(st, probe, &n_probe);
    TAP_OK(same_probe && n_probe == 1, "a hex dump is found through both indexes (%s: %d)",
           probe, n_probe);
    TAP_INT(raw_int(path, "SELECT count(*) FROM words_long"), 6,
            "and it is left out of the word index, as a blob");
    TAP_INT(words_integrity(path), SQLITE_OK, "FTS5 finds the word index consistent");

    /* It is the word index that answers: without the trigram index, words are still found
     * (and a substring of 4 characters, which goes to the trigram index, is not). */
    TAP_INT(raw_exec(path, "INSERT INTO messages_fts(messages_fts) VALUES('delete-all')"),
            SQLITE_OK, "trigram index emptied");
    int n = 0;
    int64_t *ids = search_ids(st, word ? word : "-", 1, &n);
    TAP_OK(n > 0, "a word is still found, through the word index (%s: %d)", word, n);
    free(ids);
    char four[5];
    snprintf(four, sizeof four, "%s", word ? word : "-");
    ids = search_ids(st, four, 1, &n);
    TAP_INT(n, 0, "a 4-character term goes to the trigram index");
    free(ids);
    TAP_INT(raw_exec(path, "INSERT INTO messages_fts(messages_fts) VALUES('rebuild')"),
            SQLITE_OK, "trigram index rebuilt");
    store_close(st);
    free(path);

    /* Changes by another program (the sqlite3 shell, no tt_words tokenizer) reach the word
     * index through its queue: updates, deletes, a row deleted before it was indexed, an id
     * used again; an answer is indexed when it finishes. */
    st = open_new("wordsq.db", NULL);
    path = tmp_path("wordsq.db");
    conv = store_conversation_new(st, "queue", NULL, NULL, NULL);
    int64_t a = store_message_add(st, conv, "user", "about zebrafish", 15, NULL);
    int64_t c = store_message_add(st, conv, "user", "about kangaroos", 15, NULL);
    TAP_INT(search_finds(st, "zebrafish", a), 1, "a word found");
    char *sql = xasprintf("UPDATE messages SET content = 'about platypuses' WHERE id = %lld;"
                          "UPDATE messages SET content = 'about echidnas now' WHERE id = %lld;"
                          "DELETE FROM messages WHERE id = %lld;",
                          (long long)a, (long long)a, (long long)c);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "another program changes and deletes messages");
    free(sql);
    TAP_INT(search_count(st, "zebrafish", NULL, NULL, NULL), 0, "the old text is gone");
    TAP_INT(search_count(st, "platypuses", NULL, NULL, NULL), 0, "so is the text between");
    TAP_INT(search_finds(st, "echidnas", a), 1, "the new text is found");
    TAP_INT(search_count(st, "kangaroos", NULL, NULL, NULL), 0, "the deleted message is gone");
    int64_t d = store_message_add(st, conv, "user", "wombats here", 12, NULL);
    sql = xasprintf("DELETE FROM messages WHERE id = %lld;"
                    "INSERT INTO messages(id, conversation_id, role, created, content) "
                    "VALUES(%lld, %lld, 'user', 1, 'numbats there');",
                    (long long)d, (long long)d, (long long)conv);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "a message deleted before it was indexed, its id "
                                             "used again");
    free(sql);
    TAP_INT(search_count(st, "wombats", NULL, NULL, NULL), 0, "its text is not found");
    TAP_INT(search_finds(st, "numbats", d), 1, "the new message is");
    sql = xasprintf("REPLACE INTO messages(id, conversation_id, role, created, content) "
                    "VALUES(%lld, %lld, 'user', 2, 'gamma platypus')",
                    (long long)d, (long long)conv);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "another program replaces a message");
    free(sql);
    TAP_INT(search_count(st, "numbats", NULL, NULL, NULL), 0, "the replaced text is gone");
    ids = search_ids(st, "numbats", 0, &n);
    TAP_INT(n, 0, "from the trigram index too");
    free(ids);
    TAP_INT(search_finds(st, "platypus", d), 1, "the new text is found");
    sql = xasprintf("UPDATE OR REPLACE messages SET id = %lld WHERE id = %lld",
                    (long long)d, (long long)a);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "another program moves a message onto another's id");
    free(sql);
    TAP_INT(search_count(st, "platypus", NULL, NULL, NULL), 0, "the displaced text is gone");
    TAP_INT(search_finds(st, "echidnas", d), 1, "the moved text is found under its new id");
    /* A search never waits for the write lock to bring the word index up to date: while
     * another connection holds it, the trigram index answers. */
    int64_t f = store_message_add(st, conv, "user", "lockword here", 13, NULL);
    sqlite3 *lock = NULL;
    int held = sqlite3_open_v2(path, &lock, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
               sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    TAP_OK(held, "another connection holds the write lock");
    double t0 = util_now();
    TAP_INT(search_finds(st, "lockword", f), 1, "a search finds the new message meanwhile");
    TAP_OK(util_now() - t0 < 2.0, "without waiting for the lock (%.2f s)", util_now() - t0);
    TAP_OK(raw_int(path, "SELECT count(*) FROM words_queue") > 0, "its change is still queued");
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    TAP_INT(search_finds(st, "lockword", f), 1, "and indexed by the next search");
    /* The trigram index follows such changes too (an INSERT OR REPLACE used to leave the old
     * text in it, and a later delete corrupted it). */
    ids = search_ids(st, "platypus", 0, &n);
    TAP_INT(n, 0, "trigram index: the displaced text is gone");
    free(ids);
    ids = search_ids(st, "echidnas", 0, &n);
    TAP_OK(n == 1 && ids[0] == d, "trigram index: the moved text is under its new id");
    free(ids);
    sql = xasprintf("INSERT OR IGNORE INTO messages(id, conversation_id, role, created, content) "
                    "VALUES(%lld, %lld, 'user', 3, 'ignored text');"
                    "UPDATE messages SET id = 99999, content = 'kiwis now' WHERE id = %lld;"
                    "UPDATE messages SET id = 99998 WHERE id = 99999;",
                    (long long)d, (long long)conv, (long long)f);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "an ignored insert, a new id with new text, a new id");
    free(sql);
    for (int wi = 0; wi < 2; wi++) {
        const char *idx = wi ? "word index" : "trigram index";
        ids = search_ids(st, "echidnas", wi, &n);
        TAP_OK(n == 1 && ids[0] == d, "%s: the row an insert left alone is still found", idx);
        free(ids);
        ids = search_ids(st, "ignored", wi, &n);
        TAP_OK(n == 0, "%s: the ignored text is not", idx);
        free(ids);
        ids = search_ids(st, "kiwis", wi, &n);
        TAP_OK(n == 1 && ids[0] == 99998, "%s: the moved, changed text under its last id", idx);
        free(ids);
        ids = search_ids(st, "lockword", wi, &n);
        TAP_OK(n == 0, "%s: its old text is gone", idx);
        free(ids);
    }
    sql = xasprintf("DELETE FROM messages WHERE id IN (%lld, 99998)", (long long)d);
    TAP_INT(raw_exec(path, sql), SQLITE_OK, "another program deletes them");
    free(sql);
    ids = search_ids(st, "echidnas", 0, &n);
    TAP_INT(n, 0, "trigram index: deleted, and no error");
    free(ids);
    TAP_INT(raw_exec(path, "INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')"),
            SQLITE_OK, "FTS5 finds the trigram index consistent");
    int64_t e = store_message_begin(st, conv, NULL);
    store_message_append(st, e, "streaming ", 10);
    store_message_flush(st, e);
    TAP_INT(search_count(st, "streaming", NULL, NULL, NULL), 0, "an answer still streaming: "
                                                                 "not yet");
    store_message_append(st, e, "answered", 8);
    store_message_finish(st, e, STORE_COMPLETE, "stop", NULL, NULL, NULL);
    TAP_INT(search_finds(st, "answered", e), 1, "found once finished");
    TAP_INT(search_finds(st, "streaming", e), 1, "with its first batch");
    TAP_INT(raw_int(path, "SELECT count(*) FROM words_queue"), 0, "the queue is empty");
    TAP_INT(words_integrity(path), SQLITE_OK, "FTS5 finds the word index consistent");
    store_close(st);
    free(path);
    buf_free(&b);
    buf_free(&w);
}

/* tt_words_long(text) on a connection of its own: 1, 0, or -1 on an error. */
static int words_long_of(const char *path, const char *text, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        fts_words_register(db) &&
        sqlite3_prepare_v2(db, "SELECT tt_words_long(?1)", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, text, (int)len, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int(s, 0);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

/* Numbered words "tokN " for N in [from, to): some 4 distinct pieces each. */
static void numbered_words(struct buf *b, int from, int to)
{
    for (int i = from; i < to; i++)
        buf_printf(b, "tok%d ", i);
}

static void test_words_distinct(void)
{
    /* FTS5 keeps every distinct term of a document in memory until the document ends, and
     * sorts them then: an answer of millions of distinct pieces (numbered words, ids) took
     * 270 MB and 9-35 s to index at the first search. Such a message is left out of the word
     * index, as a blob is, and found through the trigram index. */
    struct store *st = open_new("distinct.db", NULL);
    char *path = tmp_path("distinct.db");
    int64_t conv = store_conversation_new(st, "distinct", NULL, NULL, NULL);
    struct buf b = BUF_INIT;
    numbered_words(&b, 10000, 40000); /* 30,000 words, 120,000 distinct pieces */
    TAP_INT(words_long_of(path, b.data, b.len), 0, "120,000 distinct pieces: indexed");
    numbered_words(&b, 40000, 75000); /* 65,000 words, 260,000 distinct pieces */
    TAP_INT(words_long_of(path, b.data, b.len), 1, "260,000 distinct pieces: left out");
    int64_t many = store_message_add(st, conv, "assistant", b.data, b.len, NULL);
    /* Long, but of few distinct words (a long answer in a language): still indexed. */
    buf_reset(&b);
    const char *vocab[] = {"retrieval", "indexing", "structure", "algorithm", "parameter",
                           "function", "variable", "database", "transaction", "response"};
    for (int i = 0; b.len < 1200000; i++)
        buf_printf(&b, "%s %s, ", vocab[i % 10], vocab[(i * 7 + 3) % 10]);
    TAP_INT(words_long_of(path, b.data, b.len), 0, "1.2 MB of a few words: indexed");
    int64_t few = store_message_add(st, conv, "assistant", b.data, b.len, NULL);
    const char *probes[] = {"tok61234", "ok7123", "tok99999", "transaction"};
    const int want[] = {1, 1, 0, 1};
    for (size_t i = 0; i < TT_ARRAY_LEN(probes); i++) {
        int n = -1, same = same_both_ways(st, probes[i], &n);
        TAP_OK(same && n == want[i], "'%s': %d found, the same through both indexes", probes[i],
               n);
    }
    TAP_INT(search_finds(st, "tok74999", many), 1, "the last word is found");
    TAP_INT(raw_int(path, "SELECT count(*) FROM words_queue"), 0, "the queue is applied");
    char *sql = xasprintf("SELECT count(*) FROM words_long WHERE message_id = %lld",
                          (long long)many);
    TAP_INT(raw_int(path, sql), 1, "the message of distinct words is listed in words_long");
    free(sql);
    sql = xasprintf("SELECT count(*) FROM messages_words_docsize WHERE id = %lld",
                    (long long)many);
    TAP_INT(raw_int(path, sql), 0, "and not in the word index");
    free(sql);
    sql = xasprintf("SELECT count(*) FROM messages_words_docsize WHERE id = %lld",
                    (long long)few);
    TAP_INT(raw_int(path, sql), 1, "the long one of a few words is");
    free(sql);
    TAP_INT(words_integrity(path), SQLITE_OK, "FTS5 finds the word index consistent");
    store_close(st);
    free(path);
    buf_free(&b);
}

/* ---------------------------------------------------------------- stats */

/* Percentiles per model, provider (host) and day; tokens/s only over answers long enough
 * (a burst of 3 tokens in a millisecond is left out); retries and 429s summed; --model. */
static void test_stats(void)
{
    struct fake_clock clk = {0, 1700000000};
    struct store *st = open_new("stats.db", NULL);
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    int64_t conv = store_conversation_new(st, "s", NULL, NULL, NULL);
    for (int i = 1; i <= 20; i++) {
        clk.epoch = 1700000000 + (i > 10) * 86400;
        struct store_msg_info info = {.model = i % 2 ? "alpha" : "beta",
                                      .host = i <= 15 ? "api.a" : "api.b"};
        store_message_add(st, conv, "user", "q", 1, &info);
        int64_t m = store_message_begin(st, conv, &info);
        struct store_usage u = {10, 20 + i, 30 + i, NULL};
        struct store_timings t = {i / 10.0, i / 10.0 + 2.0, 10.0 * i, -1, -1, -1,
                                  i / 1000.0, i % 5 == 0, i == 10};
        store_message_finish(st, m, i == 20 ? STORE_CANCELLED : STORE_COMPLETE, "stop", &u, &t,
                             NULL);
    }
    /* A burst: three tokens in a millisecond (1830543.9 tokens/s), on day two. */
    struct store_msg_info binfo = {.model = "alpha", .host = "api.a"};
    int64_t m = store_message_begin(st, conv, &binfo);
    struct store_usage bu = {10, 3, 13, NULL};
    struct store_timings bt = {0.05, 0.051, 1830543.9, -1, -1, -1, 0.00001, 0, 0};
    store_message_finish(st, m, STORE_COMPLETE, "stop", &bu, &bt, NULL);
    struct store_msg_info cached = {.model = "alpha", .host = "api.a", .cached = 1};
    m = store_message_begin(st, conv, &cached);
    struct store_usage cu = {1000, 1000, 2000, NULL};
    struct store_timings ct = {0.001, 0.001, 99999, -1, -1, -1, 0.0001, 0, 0};
    store_message_finish(st, m, STORE_COMPLETE, "stop", &cu, &ct, NULL);
    struct store_stats s;
    TAP_INT(store_stats(st, 0, 0, NULL, &s), 0, "stats");
    TAP_INT(s.conversations, 1, "conversations");
    TAP_INT(s.messages, 42, "messages");
    TAP_INT(s.answers, 22, "answers");
    TAP_INT(s.by_status[STORE_COMPLETE], 21, "complete answers");
    TAP_INT(s.by_status[STORE_CANCELLED], 1, "cancelled answers");
    TAP_INT(s.cached_answers, 1, "cached answers");
    TAP_OK(s.cache_hit_rate > 0.0454 && s.cache_hit_rate < 0.0455, "cache hit rate 1/22");
    const struct store_perf *p = &s.perf;
    TAP_INT(p->sent, 21, "21 answers went to a server");
    TAP_INT(p->ttft.n, 21, "ttft over the uncached answers");
    TAP_OK(p->ttft.p50 > 0.99 && p->ttft.p50 < 1.01, "ttft p50 = 1.0: %g", p->ttft.p50);
    TAP_OK(p->ttft.p90 > 1.79 && p->ttft.p90 < 1.81, "ttft p90 = 1.8: %g", p->ttft.p90);
    TAP_OK(p->ttft.p99 > 1.99 && p->ttft.p99 < 2.01, "ttft p99 = 2.0: %g", p->ttft.p99);
    TAP_INT(p->tps.n, 20, "tokens/s leaves out the burst (and the cached answer)");
    TAP_OK(p->tps.p50 > 99.9 && p->tps.p50 < 100.1, "tokens/s p50 = 100: %g", p->tps.p50);
    TAP_OK(p->tps.p90 > 179.9 && p->tps.p90 < 180.1, "tokens/s p90 = 180: %g", p->tps.p90);
    TAP_OK(p->tps.p99 > 199.9 && p->tps.p99 < 200.1, "tokens/s p99 = 200, not 1830543.9: %g",
           p->tps.p99);
    TAP_INT(p->itl.n, 21, "inter-token gaps");
    TAP_OK(p->itl.p50 > 0.0099 && p->itl.p50 < 0.0101, "itl p50 = 10 ms: %g", p->itl.p50);
    TAP_INT(p->retries, 4, "retries summed");
    TAP_INT(p->rate_limited, 1, "429s summed");
    TAP_INT(s.n_models, 2, "two models");
    if (s.n_models == 2) {
        /* alpha: i odd -> total 10*40 + 100 = 500 - 100 + the burst 13 = 413; beta: 410 */
        TAP_STR(s.models[0].model, "alpha", "most tokens first");
        TAP_INT(s.models[1].completion_tokens, 310, "beta completion tokens");
        TAP_INT(s.models[0].answers, 12, "alpha answers include the cached one");
        TAP_INT(s.models[0].prompt_tokens, 110, "cached answer's tokens are not counted");
        TAP_OK(s.models[1].perf.tps.p50 > 99.9 && s.models[1].perf.tps.p50 < 100.1,
               "beta tokens/s p50 = 100: %g", s.models[1].perf.tps.p50);
        TAP_OK(s.models[0].perf.tps.p50 > 89.9 && s.models[0].perf.tps.p50 < 90.1,
               "alpha tokens/s p50 = 90: %g", s.models[0].perf.tps.p50);
        TAP_INT(s.models[0].perf.tps.n, 10, "alpha: the burst left out");
    }
    TAP_INT(s.n_hosts, 2, "two providers");
    if (s.n_hosts == 2) {
        TAP_STR(s.hosts[1].model, "api.b", "the smaller provider second");
        TAP_INT(s.hosts[1].answers, 5, "api.b answers");
        TAP_OK(s.hosts[1].perf.tps.p50 > 179.9 && s.hosts[1].perf.tps.p50 < 180.1,
               "api.b tokens/s p50 = 180: %g", s.hosts[1].perf.tps.p50);
        TAP_INT(s.hosts[1].perf.retries, 1, "api.b retries");
    }
    TAP_INT(s.n_days, 2, "two days");
    if (s.n_days == 2) {
        TAP_INT(s.days[0].answers, 10, "day one answers");
        TAP_INT(s.days[1].answers, 12, "day two answers");
        TAP_OK(strcmp(s.days[0].day, s.days[1].day) < 0, "days in order: %s %s", s.days[0].day,
               s.days[1].day);
        TAP_INT(s.days[0].perf.retries, 2, "day one retries");
        TAP_INT(s.days[0].perf.rate_limited, 1, "day one 429s");
        TAP_OK(s.days[0].perf.ttft.p50 > 0.49 && s.days[0].perf.ttft.p50 < 0.51,
               "day one ttft p50 = 0.5: %g", s.days[0].perf.ttft.p50);
    }
    store_stats_clear(&s);
    TAP_INT(store_stats(st, 1700000000 + 86400, 0, NULL, &s), 0, "stats since day two");
    TAP_INT(s.answers, 12, "range filter");
    store_stats_clear(&s);
    TAP_INT(store_stats(st, 0, 0, "beta", &s), 0, "stats of one model");
    TAP_INT(s.answers, 10, "model filter: answers");
    TAP_INT(s.n_models, 1, "model filter: one model");
    TAP_INT(s.perf.sent, 10, "model filter: percentiles of its answers");
    TAP_OK(s.perf.tps.p50 > 99.9 && s.perf.tps.p50 < 100.1, "model filter: tokens/s p50 %g",
           s.perf.tps.p50);
    store_stats_clear(&s);
    store_close(st);
}

/* ---------------------------------------------------------------- cache */

static void key_of(const char *s, unsigned char key[32])
{
    store_cache_key(s, strlen(s), key);
}

/* Issue 14: a saved answer's cache entry copied its text (a 1 MB answer written twice, the
 * copy reading the row back first). Schema v14: the entry refers to the row; a lookup reads the
 * text from it, and the entry goes with the row. A database of v13 upgrades in place, its
 * copied entries still served. */
static void test_cache_by_reference(void)
{
    char *path = tmp_path("cacheref.db"), *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    int64_t c = st ? store_conversation_new(st, NULL, NULL, "m", NULL) : -1;
    unsigned char k1[32], k2[32], k3[32];
    key_of("by reference one", k1);
    key_of("by reference two", k2);
    key_of("copied before v14", k3);
    TAP_INT(store_cache_put(st, k3, STORE_COMPLETE, "an old copy", NULL, "m", "stop", NULL), 0,
            "v13: an entry copied");
    store_close(st);
    TAP_INT(raw_exec(path, STORE_DROP_V14 "PRAGMA user_version = 13;"), SQLITE_OK,
            "v13: taken back to version 13 (no message_id)");
    struct store_open_info info;
    st = store_open(path, &info, &err);
    TAP_OK(st && info.from_version == 13 && store_schema_version(st) == STORE_SCHEMA_VERSION,
           "v13 -> v14: upgraded in place");
    if (!st) {
        free(err);
        free(path);
        return;
    }
    struct store_cache_entry e;
    TAP_OK(store_cache_get(st, k3, &e) == 0 && strcmp(e.content, "an old copy") == 0,
           "v14: the copied entry is still served");
    store_cache_entry_clear(&e);
    size_t n = (size_t)1 << 20;
    char *big = letters(n);
    struct store_msg_info info_a = {.model = "m"};
    int64_t a = store_message_add(st, c, "assistant", big, n, &info_a);
    int64_t b = store_message_add(st, c, "assistant", "a short one", 11, &info_a);
    TAP_INT(store_cache_put_message(st, k1, a, (int64_t)n), 0, "v14: a 1 MB answer cached");
    TAP_INT(store_cache_put_message(st, k2, b, 11), 0, "v14: a short one cached");
    char q[160];
    snprintf(q, sizeof q, "SELECT length(content) + ifnull(length(reasoning), 0) + 1000 * "
             "(message_id = %lld) FROM response_cache WHERE message_id IS NOT NULL ORDER BY id "
             "LIMIT 1", (long long)a);
    TAP_INT(raw_int(path, q), 1000, "v14: its entry refers to the row and holds no copy");
    int got = store_cache_get(st, k1, &e);
    TAP_OK(got == 0 && strlen(e.content) == n && memcmp(e.content, big, n) == 0 &&
               e.size >= (int64_t)n,
           "v14: a lookup reads the whole text from the row (size counted: %lld)",
           got == 0 ? (long long)e.size : -1LL);
    store_cache_entry_clear(&e);
    snprintf(q, sizeof q, "DELETE FROM messages WHERE id = %lld", (long long)b);
    TAP_INT(raw_exec(path, q), SQLITE_OK, "v14: a row deleted by another program");
    TAP_INT(store_cache_get(st, k2, &e), STORE_NOT_FOUND, "v14: its entry went with it");
    TAP_INT(store_cache_get(st, k1, &e), 0, "v14: the other entry is still served");
    store_cache_entry_clear(&e);
    int64_t d = store_message_add(st, c, "assistant", "to be changed", 13, &info_a);
    TAP_INT(store_cache_put_message(st, k2, d, 13), 0, "v14: another cached");
    snprintf(q, sizeof q, "UPDATE messages SET content = 'changed' WHERE id = %lld",
             (long long)d);
    TAP_INT(raw_exec(path, q), SQLITE_OK, "v14: its text changed by another program");
    TAP_INT(store_cache_get(st, k2, &e), STORE_NOT_FOUND, "v14: its entry went with it");
    TAP_INT(store_conversation_delete(st, c), 0, "v14: the conversation deleted (rm)");
    TAP_INT(store_cache_get(st, k1, &e), STORE_NOT_FOUND, "v14: rm takes its cache entries");
    TAP_INT(raw_int(path, "SELECT count(*) FROM response_cache WHERE message_id IS NOT NULL"), 0,
            "v14: no entry refers to a deleted row");
    store_close(st);
    free(big);
    free(path);
}

static void test_cache(void)
{
    struct fake_clock clk = {0, 1700000000};
    struct store *st = open_new("cache.db", NULL);
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    unsigned char k1[32], k2[32], k3[32], k4[32];
    key_of("request one", k1);
    key_of("request two", k2);
    key_of("request three", k3);
    key_of("request four", k4);
    struct store_cache_entry e;
    TAP_INT(store_cache_get(st, k1, &e), STORE_NOT_FOUND, "miss on an empty cache");
    struct store_usage u = {5, 6, 11, NULL};
    TAP_INT(store_cache_put(st, k1, STORE_COMPLETE, "answer one", "why", "gpt-x", "stop", &u), 0,
            "put");
    TAP_INT(store_cache_get(st, k1, &e), 0, "hit");
    TAP_STR(e.content, "answer one", "content");
    TAP_STR(e.reasoning, "why", "reasoning");
    TAP_STR(e.model, "gpt-x", "model");
    TAP_STR(e.finish_reason, "stop", "finish reason");
    TAP_INT(e.usage.total_tokens, 11, "usage");
    TAP_INT(e.hits, 1, "hit counted");
    store_cache_entry_clear(&e);
    TAP_INT(store_cache_put(st, k2, STORE_TRUNCATED, "cut", NULL, NULL, "length", NULL), -1,
            "truncated answer refused");
    TAP_INT(store_cache_put(st, k2, STORE_CANCELLED, "cut", NULL, NULL, NULL, NULL), -1,
            "cancelled answer refused");
    TAP_INT(store_cache_put(st, k2, STORE_ERROR, "x", NULL, NULL, NULL, NULL), -1,
            "error answer refused");
    TAP_INT(store_cache_put(st, k2, STORE_COMPLETE, "x", NULL, NULL, "length", NULL), -1,
            "finish reason length refused");
    TAP_OK(strstr(store_error(st), "not cached"), "refusal message: %s", store_error(st));
    TAP_INT(store_cache_get(st, k2, &e), STORE_NOT_FOUND, "nothing stored by refusals");
    /* Replace keeps one entry. */
    TAP_INT(store_cache_put(st, k1, STORE_COMPLETE, "answer one v2", NULL, NULL, NULL, NULL), 0,
            "replace");
    store_cache_get(st, k1, &e);
    TAP_STR(e.content, "answer one v2", "replaced content");
    TAP_STR(e.reasoning, NULL, "replaced reasoning");
    store_cache_entry_clear(&e);
    struct store_cache_stats cs;
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 1, "one entry after replace");

    /* TTL: an entry older than the TTL is a miss and is dropped. */
    clk.epoch += STORE_CACHE_DEFAULT_TTL + 1;
    TAP_INT(store_cache_get(st, k1, &e), STORE_NOT_FOUND, "expired after the 7-day TTL");
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 0, "expired entry dropped");
    TAP_INT(cs.bytes, 0, "bytes back to zero");
    store_cache_set_limits(st, 100, 0);
    store_cache_put(st, k1, STORE_COMPLETE, "short-lived", NULL, NULL, "stop", NULL);
    clk.epoch += 99;
    TAP_INT(store_cache_get(st, k1, &e), 0, "custom TTL: still fresh at 99 s");
    store_cache_entry_clear(&e);
    clk.epoch += 2;
    TAP_INT(store_cache_get(st, k1, &e), STORE_NOT_FOUND, "custom TTL: gone at 101 s");
    store_cache_put(st, k2, STORE_COMPLETE, "will expire", NULL, NULL, "stop", NULL);
    clk.epoch += 200;
    store_cache_put(st, k3, STORE_COMPLETE, "fresh", NULL, NULL, "stop", NULL);
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 1, "put drops expired entries");

    /* LRU under the size cap. */
    store_cache_clear(st);
    char big[1001];
    memset(big, 'x', 1000);
    big[1000] = '\0';
    int64_t one = 1000 + 32 + 64; /* size accounting: text + key + overhead */
    store_cache_set_limits(st, 0, 3 * one);
    clk.epoch += 1;
    store_cache_put(st, k1, STORE_COMPLETE, big, NULL, NULL, NULL, NULL);
    clk.epoch += 1;
    store_cache_put(st, k2, STORE_COMPLETE, big, NULL, NULL, NULL, NULL);
    clk.epoch += 1;
    store_cache_put(st, k3, STORE_COMPLETE, big, NULL, NULL, NULL, NULL);
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 3, "three entries fit");
    TAP_INT(cs.bytes, 3 * one, "bytes accounted");
    clk.epoch += 1;
    store_cache_get(st, k1, &e); /* k1 becomes the most recently used */
    store_cache_entry_clear(&e);
    clk.epoch += 1;
    TAP_INT(store_cache_put(st, k4, STORE_COMPLETE, big, NULL, NULL, NULL, NULL), 0,
            "put over the cap");
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 3, "one entry evicted");
    TAP_OK(cs.bytes <= cs.max_bytes, "size within the cap");
    TAP_INT(store_cache_get(st, k2, &e), STORE_NOT_FOUND, "least recently used (k2) evicted");
    TAP_INT(store_cache_get(st, k1, &e), 0, "recently used k1 kept");
    store_cache_entry_clear(&e);
    TAP_INT(store_cache_get(st, k3, &e), 0, "k3 kept");
    store_cache_entry_clear(&e);
    TAP_INT(store_cache_get(st, k4, &e), 0, "new k4 kept");
    store_cache_entry_clear(&e);
    /* A bigger entry evicts as many as needed. */
    char *huge = xmalloc((size_t)(2 * one) + 1);
    memset(huge, 'y', (size_t)(2 * one) - 200);
    huge[2 * one - 200] = '\0';
    clk.epoch += 1;
    store_cache_put(st, k2, STORE_COMPLETE, huge, NULL, NULL, NULL, NULL);
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries, 2, "big entry evicted two");
    TAP_INT(store_cache_get(st, k4, &e), 0, "the most recent old entry stays");
    store_cache_entry_clear(&e);
    free(huge);
    char *toobig = xmalloc((size_t)(4 * one));
    memset(toobig, 'z', (size_t)(4 * one) - 1);
    toobig[4 * one - 1] = '\0';
    TAP_INT(store_cache_put(st, k3, STORE_COMPLETE, toobig, NULL, NULL, NULL, NULL), -1,
            "an answer larger than the cache is refused");
    free(toobig);
    store_cache_stats(st, &cs);
    TAP_OK(cs.hits >= 4, "hits counted in stats (%lld)", (long long)cs.hits);
    TAP_INT(store_cache_clear(st), 2, "clear returns the count");
    store_cache_stats(st, &cs);
    TAP_INT(cs.entries + cs.bytes + cs.hits, 0, "empty after clear");
    store_close(st);
}

/* store_cache_put_all: the answers of a batch that finished together, in one write: all
 * stored, a refused one does not keep the others out, and each says how it went. */
static void test_cache_put_all(void)
{
    struct store *st = open_new("cache_all.db", NULL);
    unsigned char k[4][32];
    key_of("all one", k[0]);
    key_of("all two", k[1]);
    key_of("all three", k[2]);
    key_of("all four", k[3]);
    struct store_usage u = {1, 2, 3, NULL};
    struct store_cache_put items[4] = {
        {k[0], STORE_COMPLETE, "first", NULL, "m", "stop", &u, 7},
        {k[1], STORE_TRUNCATED, "cut", NULL, NULL, "length", NULL, 7},
        {k[2], STORE_COMPLETE, "third", "why", NULL, NULL, NULL, 7},
        {k[3], STORE_COMPLETE, NULL, NULL, NULL, NULL, NULL, 7},
    };
    TAP_INT(store_cache_put_all(st, items, 4), 2, "put_all: 2 of 4 stored");
    TAP_OK(items[0].rc == 0 && items[1].rc == -1 && items[2].rc == 0 && items[3].rc == -1,
           "put_all: each item's rc (%d %d %d %d)", items[0].rc, items[1].rc, items[2].rc,
           items[3].rc);
    struct store_cache_entry e;
    memset(&e, 0, sizeof e);
    TAP_INT(store_cache_get(st, k[0], &e), 0, "put_all: the first is cached");
    TAP_STR(e.content, "first", "put_all: its content");
    TAP_INT(e.usage.total_tokens, 3, "put_all: its usage");
    store_cache_entry_clear(&e);
    TAP_INT(store_cache_get(st, k[1], &e), STORE_NOT_FOUND, "put_all: the refused one is not");
    TAP_INT(store_cache_get(st, k[2], &e), 0, "put_all: the third is cached");
    TAP_STR(e.reasoning, "why", "put_all: its reasoning");
    store_cache_entry_clear(&e);
    TAP_INT(store_cache_get(st, k[3], &e), STORE_NOT_FOUND, "put_all: no content, not cached");
    TAP_INT(store_cache_put_all(st, items + 1, 1), 0, "put_all: nothing to store: 0");
    TAP_INT(store_cache_put_all(st, items, 0), 0, "put_all: no items: 0");
    store_close(st);
}

/* ---------------------------------------------------------------- summaries, quota */

static void test_summaries_quota(void)
{
    struct store *st = open_new("sq.db", NULL);
    int64_t conv = store_conversation_new(st, "s", NULL, NULL, NULL);
    TAP_INT(store_summary_put(st, conv, 1, 10, "first ten", "m", 50), 0, "summary put");
    TAP_INT(store_summary_put(st, conv, 1, 20, "first twenty", NULL, -1), 0, "second summary");
    TAP_INT(store_summary_put(st, conv, 1, 10, "first ten v2", "m", 40), 0, "replace");
    struct store_summary s;
    TAP_INT(store_summary_get(st, conv, 1, 10, &s), 0, "summary get");
    TAP_STR(s.text, "first ten v2", "replaced text");
    TAP_INT(s.tokens, 40, "tokens");
    store_summary_clear(&s);
    TAP_INT(store_summary_get(st, conv, 2, 10, &s), STORE_NOT_FOUND, "other range not found");
    struct store_summary *list;
    size_t n;
    TAP_INT(store_summary_list(st, conv, &list, &n), 0, "summary list");
    TAP_INT(n, 2, "two summaries");
    if (n == 2) {
        TAP_INT(list[1].last_message_id, 20, "ordered by last message");
        TAP_INT(list[1].tokens, -1, "unknown tokens");
    }
    store_summaries_free(list, n);
    TAP_INT(store_summary_put(st, 999, 1, 2, "x", NULL, 1), -1, "summary for unknown chat");
    TAP_INT(store_summary_put(st, conv, 5, 2, "x", NULL, 1), -1, "reversed range refused");

    struct store_quota q = {100, 42, 1000, 900, 1700000000.5, 1700000060.25, -1, NULL, 0};
    q.extra = "{\"breaker\":\"closed\"}";
    TAP_INT(store_quota_put(st, "default", "key1", &q), 0, "quota put");
    struct store_quota g;
    TAP_INT(store_quota_get(st, "default", "key1", &g), 0, "quota get");
    TAP_INT(g.limit_requests, 100, "limit requests");
    TAP_INT(g.remaining_requests, 42, "remaining requests");
    TAP_INT(g.limit_tokens, 1000, "limit tokens");
    TAP_INT(g.remaining_tokens, 900, "remaining tokens");
    TAP_OK(g.reset_requests == 1700000000.5 && g.reset_tokens == 1700000060.25, "reset times");
    TAP_OK(g.blocked_until < 0, "not blocked");
    TAP_STR(g.extra, "{\"breaker\":\"closed\"}", "extra state");
    TAP_OK(g.updated > 0, "updated time set");
    store_quota_clear(&g);
    q.remaining_requests = 0;
    q.blocked_until = 1700000100;
    store_quota_put(st, "default", "key1", &q);
    store_quota_get(st, "default", "key1", &g);
    TAP_INT(g.remaining_requests, 0, "quota replaced");
    TAP_OK(g.blocked_until == 1700000100, "blocked until");
    store_quota_clear(&g);
    TAP_INT(store_quota_get(st, "default", "key2", &g), STORE_NOT_FOUND, "unknown label");
    TAP_INT(store_quota_put(st, "default", "sk-proj-abcdefghijklmnop", &q), -1,
            "a key as label is refused");
    TAP_INT(store_quota_put(st, "default", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", &q), -1,
            "a long token-like label is refused");
    store_close(st);
}

/* ---------------------------------------------------------------- review subcommands */

/* Run a subcommand; returns the exit code, *out_text the output (caller frees). */
static int run_cmd(struct store *st, int tty, char **out_text, const char *a0, ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    int code = cmd_store_run(st, argc, argv, out, err, tty);
    fflush(out);
    long len = ftell(out);
    rewind(out);
    char *text = xmalloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, out);
    text[got] = '\0';
    fclose(out);
    fclose(err);
    if (out_text)
        *out_text = text;
    else
        free(text);
    return code;
}

static void test_commands(void)
{
    struct store *st = open_new("cmd.db", NULL);
    int64_t c1 = store_conversation_new(st, NULL, "sys", "gpt-x", "work");
    const char *evil = "look: \x1b]52;c;SGVsbG8=\x07 and \x1b[2J cleared";
    int64_t u1 = store_message_add(st, c1, "user", "Tell me about the red fox", 25, NULL);
    struct store_msg_info ai = {.model = "gpt-x", .profile = "work", .host = "api.example.com",
                                .parent_id = u1};
    int64_t m = store_message_begin(st, c1, &ai);
    store_message_append(st, m, evil, strlen(evil));
    struct store_usage u = {3, 4, 7, NULL};
    store_message_finish(st, m, STORE_COMPLETE, "stop", &u, NULL, NULL);
    int64_t c2 = store_conversation_new(st, "second chat", NULL, "gpt-y", NULL);
    store_message_add(st, c2, "user", "another fox question", 20, NULL);
    char id1[32], id2[32];
    snprintf(id1, sizeof id1, "%lld", (long long)c1);
    snprintf(id2, sizeof id2, "%lld", (long long)c2);

    char *out;
    TAP_INT(run_cmd(st, 0, &out, "ls", NULL), 0, "ls exits 0");
    TAP_OK(strstr(out, "Tell me about the red fox") && strstr(out, "second chat"), "ls lists both");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "ls", "--limit", "1", NULL), 0, "ls --limit");
    TAP_OK(!strstr(out, "Tell me about") != !strstr(out, "second chat"), "ls --limit 1: one row");
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "ls", "--limit", "zero", NULL), 2, "ls bad limit: usage");

    TAP_INT(run_cmd(st, 0, &out, "show", id1, NULL), 0, "show exits 0");
    TAP_OK(strstr(out, "# Tell me about the red fox") && strstr(out, "## Assistant"),
           "show prints the conversation");
    TAP_OK(strstr(out, "\x1b]52") != NULL, "not a terminal: text printed raw");
    free(out);
    TAP_INT(run_cmd(st, 1, &out, "show", id1, NULL), 0, "show on a terminal");
    TAP_OK(strchr(out, '\x1b') == NULL, "terminal: no escape byte from the database");
    TAP_OK(strstr(out, "^[]52;c;SGVsbG8=^G") != NULL, "terminal: escapes made visible");
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "show", "4242", NULL), 1, "show unknown id exits 1");
    TAP_INT(run_cmd(st, 0, NULL, "show", "abc", NULL), 2, "show bad id exits 2");
    TAP_INT(run_cmd(st, 0, NULL, "show", NULL), 2, "show without id exits 2");

    TAP_INT(run_cmd(st, 0, &out, "search", "fox", NULL), 0, "search exits 0");
    TAP_OK(strstr(out, "[fox]") != NULL, "not a terminal: [ ] markers");
    TAP_OK(strstr(out, "\033[1m") == NULL, "not a terminal: no bold");
    free(out);
    TAP_INT(run_cmd(st, 1, &out, "search", "fox", NULL), 0, "search on a terminal");
    TAP_OK(strstr(out, "\033[1mfox\033[0m") != NULL, "terminal: bold highlight");
    free(out);
    TAP_INT(run_cmd(st, 1, &out, "search", "look", NULL), 0, "search hostile text on a terminal");
    TAP_OK(strstr(out, "\x1b]") == NULL && strstr(out, "\x1b[2J") == NULL,
           "terminal: snippet escapes neutralised");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "search", "fox", "--model", "gpt-y", NULL), 1,
            "search --model: no match exits 1");
    TAP_OK(!strstr(out, "red fox") && !strstr(out, "another"),
           "model filter (user rows have none)");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "search", "look", "--model=gpt-x", NULL), 0, "search --model=");
    TAP_OK(strstr(out, "[look]") != NULL, "model filter keeps the answer of that model");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "search", "another", "fox", "--limit=5", NULL), 0,
            "search words joined");
    TAP_OK(strstr(out, "another [fox] question") || strstr(out, "[another] [fox] question"),
           "two-word search hit");
    free(out);
    /* Only the newest 5,000 full-text matches are ranked: a larger --limit is refused, not
     * silently cut (issue 14). */
    TAP_INT(run_cmd(st, 0, NULL, "search", "fox", "--limit", "5001", NULL), 2,
            "search --limit over 5000: usage, not a silent cap");
    TAP_INT(run_cmd(st, 0, NULL, "search", "fox", "--limit", "0", NULL), 2,
            "search --limit 0: usage");
    TAP_INT(run_cmd(st, 0, &out, "search", "fox", "--limit", "5000", NULL), 0,
            "search --limit 5000: the most allowed");
    TAP_OK(strstr(out, "[fox]") != NULL, "search --limit 5000 finds");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "search", "fox", "--since", "2000-01-01", "--until",
                    "2999-12-31", NULL),
            0, "search with dates");
    TAP_OK(strstr(out, "[fox]") != NULL, "date range includes now");
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "search", "fox", "--since", "2024-13-01", NULL), 2,
            "bad date: usage");
    TAP_INT(run_cmd(st, 0, NULL, "search", "fox", "--until", "yesterday", NULL), 2,
            "bad --until: usage");
    TAP_INT(run_cmd(st, 0, NULL, "search", NULL), 2, "search without query: usage");
    TAP_INT(run_cmd(st, 0, NULL, "search", "\"", NULL), 2, "empty query: usage");
    TAP_INT(run_cmd(st, 0, NULL, "search", "NEAR(\"a", "AND", NULL), 1,
            "hostile query: no match, no error");
    TAP_INT(run_cmd(st, 0, NULL, "search", "fox", "OR", NULL), 2, "an OR with one side: usage");

    TAP_INT(run_cmd(st, 0, &out, "export", id1, "--format", "json", NULL), 0, "export json");
    cJSON *j = cJSON_Parse(out);
    TAP_OK(j != NULL, "export json parses");
    cJSON *msgs = cJSON_GetObjectItem(j, "messages");
    TAP_INT(cJSON_GetArraySize(msgs), 2, "export json has both messages");
    cJSON *m1 = cJSON_GetArrayItem(msgs, 1);
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(m1, "content")), evil,
            "export json content round-trips exactly");
    TAP_INT((int)cJSON_GetNumberValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(m1, "usage"), "total_tokens")),
            7, "export json usage");
    TAP_STR(cJSON_GetStringValue(cJSON_GetObjectItem(m1, "status")), "complete",
            "export json status");
    cJSON_Delete(j);
    TAP_OK(strchr(out, '\x1b') == NULL, "json output escapes control bytes");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "export", id2, NULL), 0, "export md (default)");
    TAP_OK(strncmp(out, "# second chat", 13) == 0, "markdown heading");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "export", "--all", "--format", "json", NULL), 0, "export --all");
    j = cJSON_Parse(out);
    TAP_OK(j != NULL, "export --all parses");
    TAP_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "conversations")), 2,
            "export --all has both conversations");
    cJSON_Delete(j);
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "export", id1, "--format", "pdf", NULL), 2, "bad format: usage");
    TAP_INT(run_cmd(st, 0, NULL, "export", NULL), 2, "export without id: usage");

    TAP_INT(run_cmd(st, 0, &out, "rename", id2, "new", "name", NULL), 0, "rename");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "ls", NULL), 0, "ls after rename");
    TAP_OK(strstr(out, "new name") != NULL, "renamed title listed");
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "rename", "999", "x", NULL), 1, "rename unknown: 1");
    TAP_INT(run_cmd(st, 0, NULL, "rename", id2, NULL), 2, "rename without title: usage");

    TAP_INT(run_cmd(st, 0, &out, "stats", NULL), 0, "stats");
    TAP_OK(strstr(out, "answers") && strstr(out, "gpt-x"), "stats output");
    TAP_OK(strstr(out, "inter-token latency") && strstr(out, "retries") &&
               strstr(out, "spend") && strstr(out, "PROVIDER"),
           "stats output: latency, retries, spend, providers");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "stats", "--json", "--model", "gpt-x", NULL), 0,
            "stats --json --model");
    cJSON *sj = cJSON_Parse(out);
    cJSON *sm = cJSON_GetObjectItem(sj, "models");
    TAP_OK(sj && cJSON_IsArray(sm) && cJSON_GetArraySize(sm) == 1 &&
               !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(sm, 0),
                                                                "model")),
                       "gpt-x") &&
               cJSON_GetObjectItem(sj, "ttft_seconds") && cJSON_GetObjectItem(sj, "providers") &&
               cJSON_GetObjectItem(sj, "days") && cJSON_GetObjectItem(sj, "spend_usd"),
           "stats --json: one model, percentiles, providers, days, spend");
    cJSON_Delete(sj);
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "stats", "--json", "--model", "no-such", NULL), 0,
            "stats --json of a model never used");
    sj = cJSON_Parse(out);
    TAP_OK(sj && cJSON_GetArraySize(cJSON_GetObjectItem(sj, "models")) == 0 &&
               cJSON_GetNumberValue(cJSON_GetObjectItem(sj, "answers")) == 0,
           "no answers, no models");
    cJSON_Delete(sj);
    TAP_INT(run_cmd(st, 0, NULL, "stats", "--format", "yaml", NULL), 2, "stats bad format: usage");
    free(out);
    unsigned char key[32];
    store_cache_key("k", 1, key);
    store_cache_put(st, key, STORE_COMPLETE, "cached", NULL, NULL, "stop", NULL);
    TAP_INT(run_cmd(st, 0, &out, "cache", "stats", NULL), 0, "cache stats");
    TAP_OK(strstr(out, "entries   1") != NULL, "cache stats shows the entry");
    free(out);
    TAP_INT(run_cmd(st, 0, &out, "cache", "clear", NULL), 0, "cache clear");
    TAP_OK(strstr(out, "cleared 1 cached answer") != NULL, "cache clear count");
    free(out);
    TAP_INT(run_cmd(st, 0, NULL, "cache", "purge", NULL), 2, "cache bad verb: usage");

    TAP_INT(run_cmd(st, 0, NULL, "rm", id1, NULL), 0, "rm");
    TAP_INT(run_cmd(st, 0, NULL, "show", id1, NULL), 1, "removed conversation not found");
    TAP_INT(run_cmd(st, 0, NULL, "rm", id1, NULL), 1, "rm again: not found");
    TAP_INT(run_cmd(st, 0, NULL, "frobnicate", NULL), 2, "unknown subcommand: usage");
    TAP_INT(run_cmd(st, 0, NULL, "ls", "--bogus", NULL), 2, "unknown option: usage");
    TAP_INT(run_cmd(st, 0, &out, "ls", "--help", NULL), 0, "--help");
    TAP_OK(strstr(out, "usage:") != NULL, "help text");
    free(out);
    TAP_OK(cmd_store_is_command("search") && !cmd_store_is_command("chat"), "is_command");
    store_close(st);

    char *bad = tmp_path("notes.txt");
    char *argv[] = {"ls", NULL};
    int saved = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2); /* keep the expected error out of the TAP log */
    int code = cmd_store(bad, 1, argv);
    dup2(saved, 2);
    close(saved);
    close(devnull);
    TAP_INT(code, 1, "cmd_store on a non-database exits 1");
    free(bad);
}

/* Stream n bytes of text into answer m, 1,000 at a time. */
static void stream_text(struct store *st, int64_t m, const char *text, size_t n)
{
    for (size_t off = 0; off < n; off += 1000)
        store_message_append(st, m, text + off, n - off < 1000 ? n - off : 1000);
}

/* A long answer (past STORE_BIG_ANSWER): written through a small page cache, whole or after
 * parts were committed; and refused by the cache by its size before it is read back. */
static void test_long_answer(void)
{
    char *path = tmp_path("long.db");
    struct store *st = open_new("long.db", NULL);
    struct fake_clock clk = {100.0, 1700000000};
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    int64_t c = store_conversation_new(st, "long", NULL, "m", NULL);
    size_t n = 600 * 1024;
    char *text = letters(n);
    /* Whole: nothing committed while it streams (no time passes). */
    int64_t m1 = store_message_begin(st, c, NULL);
    stream_text(st, m1, text, n);
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_parts"), 0, "whole: no part committed");
    unsigned long lent = sqlite_dl_lend_used(0), placed = sqlite_dl_lend_used(1);
    TAP_INT(store_message_finish(st, m1, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "whole: finish");
    /* its text is in huge pages (past 256 KiB), and content is the row's last column: SQLite's
     * record of it was made in that block, ending where the text does (sqlite_dl_lend), and
     * reads back whole below */
    TAP_INT((long)(sqlite_dl_lend_used(0) - lent), 1,
            "whole: the record was made in the text's block");
    TAP_INT((long)(sqlite_dl_lend_used(1) - placed), 1,
            "whole: ending where the text does (no copy of it)");
    /* In parts: a batch interval passes twice while it streams. */
    int64_t m2 = store_message_begin(st, c, NULL);
    for (size_t off = 0; off < n; off += 1000) {
        if (off == 200000 || off == 400000)
            clk.mono += 0.3;
        store_message_append(st, m2, text + off, n - off < 1000 ? n - off : 1000);
    }
    store_message_append_reasoning(st, m2, "hmm", 3);
    TAP_OK(raw_int(path, "SELECT count(*) FROM message_parts") >= 2, "parts: parts committed");
    TAP_INT(store_message_finish(st, m2, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "parts: finish");
    struct store_conversation *cv = NULL;
    store_conversation_load(st, c, &cv);
    TAP_OK(cv && cv->n_messages == 2 && strcmp(cv->messages[0].content, text) == 0 &&
               cv->messages[0].reasoning == NULL,
           "whole: the answer reads back byte for byte, no reasoning");
    TAP_OK(cv && cv->n_messages == 2 && strcmp(cv->messages[1].content, text) == 0 &&
               cv->messages[1].reasoning && strcmp(cv->messages[1].reasoning, "hmm") == 0,
           "parts: the answer reads back byte for byte, with its reasoning");
    store_conversation_free(cv);
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_parts"), 0, "no part left behind");
    /* A third answer, finished right after a small one: the page cache is back to its size. */
    int64_t m3 = store_message_begin(st, c, NULL);
    store_message_append(st, m3, "short", 5);
    TAP_INT(store_message_finish(st, m3, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "a short answer after the long ones");
    /* Another process's recovery folded a committed part of ours into the row (it took this
     * writer for dead); the rest, never committed as a part, must be appended, not set. */
    int64_t m4 = store_message_begin(st, c, NULL);
    store_message_append(st, m4, "PART-ONE ", 9);
    store_message_flush(st, m4);
    raw_exec(path, "UPDATE messages SET content = 'PART-ONE ' WHERE id = (SELECT max(id) FROM "
                   "messages); DELETE FROM message_parts");
    store_message_append(st, m4, "PART-TWO", 8);
    TAP_INT(store_message_finish(st, m4, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "finish after another process folded a part");
    char *got = raw_text(path, "SELECT content FROM messages WHERE id = (SELECT max(id) FROM "
                               "messages)");
    TAP_STR(got, "PART-ONE PART-TWO", "the folded part is kept, the rest appended");
    free(got);
    /* The cache: 600 KB over a 100 KB limit, refused by the size the caller knows. */
    unsigned char key[STORE_CACHE_KEY_LEN] = {1, 2, 3};
    store_cache_set_entry_max(st, 100 * 1024);
    TAP_INT(store_cache_put_message(st, key, m1, (int64_t)n), -1, "cache: too large, refused");
    TAP_OK(strstr(store_error(st), "larger") != NULL, "cache: says why (%s)", store_error(st));
    TAP_INT(store_cache_put_message(st, key, m1, -1), -1,
            "cache: size unknown, refused all the same");
    TAP_INT(store_cache_put_message(st, key, m3, 5), 0, "cache: the short answer is taken");
    store_close(st);
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
            1, "integrity_check ok");
    free(text);
    free(path);
}

/* A long answer whose text is not the row's last value (a column added after content by hand):
 * the record is not placed to end where the text does, but made past it, and the answer and
 * the added column read back as they were written. */
static void test_long_answer_not_last(void)
{
    char *path = tmp_path("notlast.db");
    struct store *st = open_new("notlast.db", NULL);
    TAP_INT(raw_exec(path, "ALTER TABLE messages ADD COLUMN note TEXT DEFAULT 'kept'"), SQLITE_OK,
            "not last: a column added after content");
    int64_t c = store_conversation_new(st, "long", NULL, "m", NULL);
    size_t n = 600 * 1024;
    char *text = letters(n);
    int64_t m = store_message_begin(st, c, NULL);
    stream_text(st, m, text, n);
    unsigned long lent = sqlite_dl_lend_used(0), placed = sqlite_dl_lend_used(1);
    TAP_INT(store_message_finish(st, m, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "not last: finish");
    TAP_INT((long)(sqlite_dl_lend_used(0) - lent), 1, "not last: the record made in the block");
    TAP_INT((long)(sqlite_dl_lend_used(1) - placed), 0, "not last: past the text, not placed");
    char *got = raw_text(path, "SELECT content || '|' || note FROM messages WHERE role = "
                               "'assistant'");
    TAP_OK(got && strlen(got) == n + 5 && memcmp(got, text, n) == 0 &&
               strcmp(got + n, "|kept") == 0,
           "not last: the text and the added column read back");
    free(got);
    store_close(st);
    free(text);
    free(path);
}

/* The names of the indexes and triggers on messages, in order (free it). */
static char *messages_schema_names(const char *path)
{
    return raw_text(path, "SELECT group_concat(type || ':' || name, ' ') FROM (SELECT type, "
                          "name FROM sqlite_schema WHERE tbl_name = 'messages' ORDER BY name)");
}

/* v15 moves content to the end of messages. A database of the previous release (content
 * before the columns added in v6, v8 and v9), with the part of an answer still streaming,
 * keeps its rows, their text, the part (message_parts refers to messages: dropping the old
 * table with foreign keys on deletes it), every index and trigger, and its search. One with a
 * column tokterm does not know is left as it is. */
static void test_migrate_v15_content_last(void)
{
    struct store *fresh = open_new("v15-fresh.db", NULL);
    char *fresh_path = tmp_path("v15-fresh.db"), *names = messages_schema_names(fresh_path);
    store_close(fresh);
    free(fresh_path);

    char *path = prev_release_copy("v15.db");
    TAP_INT(raw_exec(path, "UPDATE messages SET status = 'streaming', writer = NULL WHERE id = "
                           "14; INSERT INTO message_parts(message_id, reasoning, text) "
                           "VALUES(14, 0, ' and more')"),
            SQLITE_OK, "v15: the old release's last answer still streaming, with a part");
    char *before = raw_text(path, "SELECT group_concat(id || ':' || content, '|') FROM messages");
    char *last = raw_text(path, "SELECT name FROM pragma_table_info('messages') ORDER BY cid "
                                "DESC LIMIT 1");
    TAP_STR(last, "content", "v15: before, content was the last column of version 5");
    free(last);
    struct store_open_info info;
    char *err = NULL;
    struct store *st = store_open_searcher(path, &info, &err); /* (no recovery: it folds parts) */
    TAP_OK(st != NULL, "v15: opens: %s", err ? err : "");
    free(err);
    last = raw_text(path, "SELECT name FROM pragma_table_info('messages') ORDER BY cid DESC "
                          "LIMIT 1");
    TAP_STR(last, "content", "v15: content is the last column after v6, v8 and v9 added theirs");
    free(last);
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_parts WHERE message_id = 14"), 1,
            "v15: the part of the streaming answer is kept");
    char *after = raw_text(path, "SELECT group_concat(id || ':' || content, '|') FROM messages");
    TAP_STR(after, before, "v15: every row, its id and its text");
    free(before);
    free(after);
    char *now = messages_schema_names(path);
    TAP_STR(now, names, "v15: the indexes and triggers of a new database");
    free(now);
    if (st) {
        TAP_INT(search_count(st, "wolf", NULL, NULL, NULL), 2, "v15: still searchable");
        int64_t b = store_message_add(st, 1, "user", "and the harbour", 15, NULL);
        TAP_OK(b > 14, "v15: a new row after the old ones");
        TAP_INT(search_count(st, "harbour", NULL, NULL, NULL), 1, "v15: a new row is indexed");
        store_close(st);
    }
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = "
                          "'ok'"),
            1, "v15: integrity_check ok");
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_foreign_key_check"), 0,
            "v15: no foreign key left dangling");
    free(path);
    free(names);

    /* A column added by hand after content: nothing is rebuilt, nothing dropped. */
    path = tmp_path("v15-hand.db");
    st = open_new("v15-hand.db", NULL);
    store_message_add(st, store_conversation_new(st, "x", NULL, "m", NULL), "user", "hi", 2,
                      NULL);
    store_close(st);
    TAP_INT(raw_exec(path, "ALTER TABLE messages ADD COLUMN mine TEXT DEFAULT 'note'; "
                           "PRAGMA user_version = 14"),
            SQLITE_OK, "v15: a version 14 database with a column of its own");
    st = store_open(path, &info, &err);
    TAP_OK(st != NULL && info.from_version == 14, "v15: opens and migrates: %s",
           err ? err : "");
    free(err);
    store_close(st);
    last = raw_text(path, "SELECT group_concat(content || ':' || mine) FROM messages");
    TAP_STR(last, "hi:note", "v15: the column and its value are kept");
    free(last);
    TAP_INT(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION, "v15: version recorded");
    free(path);
}

/* An answer that ends within its first batch interval is written once, as its row: a fast
 * 10 MiB answer commits no part while it streams (4 MiB parts wrote it into the WAL twice and
 * read 8 MiB back at its end); past 16 MiB a batch is committed all the same (the bound on a
 * fast server's buffer), and the answer reads back whole either way. */
static void test_fast_answer(void)
{
    char *path = tmp_path("fast.db");
    struct store *st = open_new("fast.db", NULL);
    struct fake_clock clk = {100.0, 1700000000};
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    int64_t c = store_conversation_new(st, "fast", NULL, "m", NULL);
    size_t sizes[2] = {(size_t)10 << 20, (size_t)17 << 20}, step = 65536;
    long long want_parts[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        char *text = letters(n);
        int64_t m = store_message_begin(st, c, NULL);
        int rc = 0;
        for (size_t off = 0; off < n && rc >= 0; off += step) /* no time passes */
            rc = store_message_append(st, m, text + off, n - off < step ? n - off : step);
        TAP_OK(rc >= 0, "%zu MiB: appended", n >> 20);
        long long parts = raw_int(path, "SELECT count(*) FROM message_parts");
        if (want_parts[i])
            TAP_OK(parts >= 1, "%zu MiB within a batch interval: a part is committed past "
                               "16 MiB (%lld)", n >> 20, parts);
        else
            TAP_OK(parts == 0, "%zu MiB within a batch interval: no part committed (%lld)",
                   n >> 20, parts);
        TAP_OK(store_message_finish(st, m, STORE_COMPLETE, "stop", NULL, NULL, NULL) == 0,
               "%zu MiB: finish", n >> 20);
        char *sql = xasprintf("SELECT length(content) FROM messages WHERE id = %lld",
                              (long long)m);
        long long len = raw_int(path, sql);
        TAP_OK(len == (long long)n, "%zu MiB: the row holds the whole answer (%lld bytes)",
               n >> 20, len);
        free(sql);
        struct store_conversation *cv = NULL;
        store_conversation_load(st, c, &cv);
        TAP_OK(cv && cv->n_messages == (size_t)i + 1 &&
                   strcmp(cv->messages[i].content, text) == 0,
               "%zu MiB: reads back byte for byte", n >> 20);
        store_conversation_free(cv);
        TAP_OK(raw_int(path, "SELECT count(*) FROM message_parts") == 0,
               "%zu MiB: no part left behind", n >> 20);
        free(text);
    }
    store_close(st);
    free(path);
}

/* store_checkpoint_async copies the WAL into the database file off the committing thread. */
static void test_checkpoint_async(void)
{
    char *path = tmp_path("ckpt.db"), *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    TAP_OK(st != NULL, "open ckpt.db");
    if (!st)
        return;
    int64_t c = store_conversation_new(st, "big", NULL, "m", NULL);
    size_t n = (size_t)3 << 20;
    char *big = letters(n);
    int64_t id = store_message_add(st, c, "assistant", big, n, NULL);
    TAP_OK(id > 0, "a 3 MB message committed");
    struct stat sb;
    TAP_OK(stat(path, &sb) == 0 && sb.st_size < (off_t)1 << 20,
           "before: the database file is small (the message is in the WAL)");
    store_checkpoint_async(st);
    store_close(st); /* waits for the checkpoint */
    long long after = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    TAP_OK(after >= (long long)n, "after: the WAL was copied into the database file (%lld bytes)",
           after);
    TAP_INT(raw_int(path, "SELECT length(content) FROM messages WHERE role = 'assistant'"),
            (long long)n, "the message reads back whole");
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
            1, "integrity_check ok");
    /* A small WAL: nothing to do, and a store closed right away is fine. */
    st = store_open(path, NULL, &err);
    store_checkpoint_async(st);
    store_checkpoint_async(st);
    store_close(st);
    free(big);
    free(path);
}

/* ---------------------------------------------------------------- indexing cost flat */

/* Issue 14: an answer under 64 KiB was trigram-indexed at save time (14-30 ms for 60 KB), a
 * longer one queued for the next search. Now every answer is queued: the save writes one
 * small row whatever the size, and the next search indexes it first (both indexes), so it is
 * found right away; a reader (which never writes) scans the queue. */
static void test_index_flat(void)
{
    struct store *st = open_new("flat.db", NULL);
    char *path = tmp_path("flat.db");
    int64_t c = store_conversation_new(st, "flat", NULL, "m", NULL);
    static const size_t sizes[] = {1000, 60 * 1024, 200 * 1024};
    int64_t ids[3];
    for (int i = 0; i < 3; i++) {
        struct buf a = BUF_INIT;
        buf_printf(&a, "flatmarker%c ", 'a' + i);
        while (a.len < sizes[i])
            buf_appends(&a, "lorem ipsum dolor sit amet ");
        struct store_msg_info info = {.model = "m"};
        ids[i] = store_message_begin(st, c, &info);
        store_message_append(st, ids[i], a.data, a.len);
        struct store_whole w = {a.data, a.len, NULL, 0};
        TAP_OK(store_message_finish_whole(st, ids[i], &w, STORE_COMPLETE, "stop", NULL, NULL,
                                          NULL) == 0, "a %zu-byte answer saved", a.len);
        char *q = xasprintf("SELECT count(*) FROM fts_pending WHERE message_id = %lld",
                            (long long)ids[i]);
        TAP_OK(raw_int(path, q) == 1, "%zu bytes: queued for the index, not indexed at save time",
               sizes[i]);
        free(q);
        buf_free(&a);
    }
    /* a reader finds them by scanning the queue */
    char *err = NULL;
    struct store *rd = store_open_reader(path, NULL, &err);
    for (int i = 0; rd && i < 3; i++) {
        char word[32];
        snprintf(word, sizeof word, "flatmarker%c", 'a' + i);
        struct store_hit *hits = NULL;
        size_t n = 0;
        int rc = store_search(rd, word, NULL, &hits, &n);
        TAP_OK(rc == 0 && n == 1 && hits[0].message_id == ids[i],
               "a reader finds the %zu-byte answer (queued)", sizes[i]);
        store_hits_free(hits, n);
    }
    store_close(rd);
    for (int i = 0; i < 3; i++) {
        char word[32];
        snprintf(word, sizeof word, "flatmarker%c", 'a' + i);
        for (int no_words = 0; no_words <= 1; no_words++) {
            struct store_search_opts o = {.no_words = no_words};
            struct store_hit *hits = NULL;
            size_t n = 0;
            int rc = store_search(st, word, &o, &hits, &n);
            TAP_OK(rc == 0 && n == 1 && hits[0].message_id == ids[i],
                   "the %zu-byte answer is found right away (%s index)", sizes[i],
                   no_words ? "trigram" : "word");
            store_hits_free(hits, n);
        }
    }
    TAP_INT(raw_int(path, "SELECT count(*) FROM fts_pending"), 0,
            "the search indexed the queue");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages_fts_docsize"), 3,
            "all three in the trigram index");
    store_close(st);
    TAP_INT(raw_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
            1, "integrity_check ok");
    free(path);
}

/* Issue 14: the end of an answer (its row, its cache entry, its token counts) is what the user
 * waits for after the last token; compiling its SQL there (~1M instructions of SQLite's parser
 * and trigger code, a dozen statements) was most of what saving added after the answer.
 * store_warm_answer compiles them while the request is on the wire; an answer saved in parts
 * has the statements of its end compiled as its first part is written; and an answer of which
 * no part was written reads none back (one statement fewer at its end). */
static void answer_end(struct store *st, int64_t c, int64_t a, const char *q, int parted,
                       struct fake_clock *clk)
{
    unsigned char key[STORE_CACHE_KEY_LEN];
    store_cache_key(q, strlen(q), key);
    const char *text = "an answer of a few words";
    size_t n = strlen(text);
    store_message_append(st, a, text, 10);
    if (parted)
        clk->mono += 1.0; /* a batch interval passed: the text so far becomes a part */
    store_message_append(st, a, text + 10, n - 10);
    unsigned before = store_statements_compiled(st);
    struct store_whole w = {text, n, NULL, 0};
    struct store_tokens t = {a, (int64_t)n, 6};
    int ok = store_batch_begin(st) == 0 &&
             store_message_finish_whole(st, a, &w, STORE_COMPLETE, "stop", NULL, NULL, NULL) ==
                 0 &&
             store_cache_put_message(st, key, a, (int64_t)n) == 0 &&
             store_tokens_put(st, c, "o200k_base", &t, 1) == 0 && store_batch_end(st) == 0;
    TAP_OK(ok, "%s answer's end saved", parted ? "a parted" : "a whole");
    unsigned more = store_statements_compiled(st) - before;
    TAP_OK(more == 0, "%s answer's end compiles no statement (warmed ahead; %u)",
           parted ? "a parted" : "a whole", more);
}

static void test_warm_answer(void)
{
    char *path = tmp_path("warm.db");
    struct store *st = open_new("warm.db", NULL);
    struct fake_clock clk = {100.0, 1700000000};
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    /* without the warm-up: the end of a whole answer compiles its row's statements, and reads
     * no part (store_q_parts_read is never compiled) */
    int64_t c = store_conversation_new(st, NULL, NULL, "m", NULL);
    struct store_msg_info info = {.model = "m"};
    int64_t u = store_message_add(st, c, "user", "cold", 4, &info);
    info.parent_id = u;
    int64_t a = store_message_begin(st, c, &info);
    store_message_append(st, a, "cold answer", 11);
    unsigned before = store_statements_compiled(st);
    TAP_INT(store_message_finish(st, a, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "cold: finished");
    TAP_INT(store_statements_compiled(st) - before, 3,
            "cold: the end of a whole answer compiles 3 statements (no read of parts)");
    for (int parted = 0; parted <= 1; parted++) {
        u = store_message_add(st, c, "user", parted ? "q2" : "q1", 2, &info);
        info.parent_id = u;
        a = store_message_begin(st, c, &info);
        store_warm_answer(st, 1, 1);
        unsigned warm = store_statements_compiled(st);
        store_warm_answer(st, 1, 1);
        TAP_INT(store_statements_compiled(st) - warm, 0, "a second warm-up compiles nothing");
        answer_end(st, c, a, parted ? "q2" : "q1", parted, &clk);
    }
    TAP_INT(raw_int(path, "SELECT count(*) FROM message_parts"), 0, "no part left behind");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE role = 'assistant' AND content = "
                          "'an answer of a few words' AND status = 'complete'"),
            2, "both answers whole in their rows");
    TAP_INT(raw_int(path, "SELECT count(*) FROM response_cache"), 2, "both cached");
    TAP_INT(raw_int(path, "SELECT count(*) FROM fts_pending"), 3, "all three queued for search");
    store_close(st);
    free(path);
}

/* A long chat fills the store's statement cache (STORE_STMT_CACHE) with what it used (its
 * resume, searches, lists, stats, summaries, the cache): a warm-up after that must neither
 * compile its statements again at every turn nor leave them unfinalized (a statement that is
 * not cached belongs to whoever compiled it; left open, it keeps the connection from closing
 * and leaks). */
static void warm_full_row(const struct store_answer_row *r, void *ud)
{
    (void)r;
    (void)ud;
}

static int warm_full_enough(void *ud, const struct store_message *m, long tokens, int live)
{
    (void)live;
    (void)ud;
    (void)m;
    (void)tokens;
    return 0;
}

static void test_warm_full_cache(void)
{
    struct store *st = open_new("warmfull.db", NULL);
    int64_t c = store_conversation_new(st, "t", NULL, "m", NULL), c2;
    struct store_msg_info info = {.model = "m"};
    int64_t u = store_message_add(st, c, "user", "hello", 5, &info);
    info.parent_id = u;
    int64_t a = store_message_add(st, c, "assistant", "world", 5, &info);
    struct store_conversation *conv = NULL, *list = NULL;
    size_t n = 0;
    struct store_hit *hits = NULL;
    struct store_stats stats;
    struct store_cache_stats cst;
    struct store_cache_entry ce;
    struct store_summary sum, *sums = NULL;
    struct store_quota q = {0};
    struct store_tokens *tk = NULL;
    struct store_attach *att = NULL;
    unsigned char key[STORE_CACHE_KEY_LEN] = {1};
    int64_t id;
    char rid[64];
    /* the public calls a long chat and its commands make, each compiling its statements */
    for (int round = 0; round < 2 && store_statements_compiled(st) < 80; round++) {
        store_conversation_load(st, c, &conv);
        store_conversation_free(conv);
        store_conversation_load_turns(st, c, &conv);
        store_conversation_free(conv);
        store_conversation_list(st, 10, &list, &n);
        store_conversation_list_free(list, n);
        store_conversation_latest_answered(st, &id);
        int64_t *ids = NULL;
        store_conversation_ids(st, &ids, &n);
        free(ids);
        store_attach_list(st, c, &att, &n);
        store_attach_free(att, n);
        store_search_index(st);
        struct store_search_opts so = {0};
        store_search(st, "hello", &so, &hits, &n);
        store_hits_free(hits, n);
        store_stats(st, 0, 0, NULL, &stats);
        store_stats_clear(&stats);
        store_cache_stats(st, &cst);
        if (store_cache_get(st, key, &ce) == 0)
            store_cache_entry_clear(&ce);
        store_summary_put(st, c, u, a, "sum", "m", 3);
        if (store_summary_get(st, c, u, a, &sum) == 0)
            store_summary_clear(&sum);
        store_summary_list(st, c, &sums, &n);
        store_summaries_free(sums, n);
        store_quota_put(st, "p", "k", &q);
        if (store_quota_get(st, "p", "k", &q) == 0)
            store_quota_clear(&q);
        store_remote_put(st, key, "openai", "http://x", "b1", 1);
        store_remote_get(st, key, rid, sizeof rid);
        store_remote_del(st, key);
        store_tokens_get(st, c, "o200k_base", &tk, &n);
        free(tk);
        store_conversation_rename(st, c, "u");
        store_conversation_set_head(st, c, u);
        store_message_set_tool(st, a, "x");
        c2 = store_conversation_new(st, "gone", NULL, "m", NULL);
        store_conversation_delete(st, c2);
        store_cache_clear(st);
        store_conversation_update(st, c, "sys", "m2", NULL);
        store_attach_get(st, a, &att, &n);
        store_attach_free(att, n);
        store_answers_each(st, 0, 0, NULL, warm_full_row, NULL);
        struct store_walk w;
        if (store_conversation_walk(st, c, "o200k_base", warm_full_enough, NULL, &w) == 0)
            store_walk_free(&w);
        store_recover(st);
    }
    unsigned used = store_statements_compiled(st);
    int64_t b = store_message_begin(st, c, &info);
    store_warm_answer(st, 1, 1);
    TAP_OK(used + 11 > 64, "a long chat compiled %u statements: with the warm-up's 11, more "
           "than the cache holds (64)", used);
    unsigned warm = store_statements_compiled(st);
    store_warm_answer(st, 1, 1);
    TAP_INT(store_statements_compiled(st) - warm, 0,
            "statement cache full: a second warm-up compiles nothing");
    store_message_append(st, b, "answer", 6);
    TAP_INT(store_message_finish(st, b, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "statement cache full: the answer is saved");
    store_close(st); /* under ASan, a statement left unfinalized leaks the connection */
}

/* store_batch_begin/end: the writes of a one-shot's start (and of its end) in one commit, each
 * write still on its own (a savepoint): a failed one takes nothing else with it. */
static void test_batch(void)
{
    struct store *st = open_new("batch.db", NULL);
    char *path = tmp_path("batch.db");
    TAP_INT(store_batch_begin(st), 0, "batch: begin");
    TAP_INT(store_batch_begin(st), 0, "batch: nested begin");
    int64_t c = store_conversation_new(st, NULL, NULL, "m", NULL);
    int64_t u = store_message_add(st, c, "user", "batched prompt", 14, NULL);
    TAP_OK(c > 0 && u > 0, "batch: conversation and prompt written");
    TAP_OK(store_message_add(st, c + 100, "user", "no such conversation", 20, NULL) < 0,
           "batch: a write that fails");
    struct store_msg_info info = {.parent_id = u};
    int64_t a = store_message_begin(st, c, &info);
    TAP_OK(a > 0, "batch: the answer's row after the failure");
    TAP_INT(store_batch_end(st), 0, "batch: inner end");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 0,
            "batch: nothing visible to another connection before the end");
    TAP_INT(store_batch_end(st), 0, "batch: end commits");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 2,
            "batch: the prompt and the answer's row committed, the failed write not");
    TAP_INT(raw_int(path, "SELECT count(*) FROM conversations"), 1, "batch: the conversation too");
    TAP_INT(store_batch_end(st), 0, "batch: an end without a begin does nothing");
    struct store_whole w = {"an answer", 9, NULL, 0};
    store_message_append(st, a, "an answer", 9);
    TAP_INT(store_message_finish_whole(st, a, &w, STORE_COMPLETE, "stop", NULL, NULL, NULL), 0,
            "batch: later writes commit on their own");
    char *got = raw_text(path, "SELECT status || ':' || content FROM messages WHERE role = "
                               "'assistant'");
    TAP_STR(got, "complete:an answer", "batch: and are visible at once");
    free(got);
    store_close(st);
    free(path);
}

/* ---------------------------------------------------------------- fsyncs of a one-shot */

/* A VFS over the default one that counts xSync calls (every fsync and fdatasync SQLite makes,
 * the directory's included), on every connection, the background checkpoint's too. */
static sqlite3_vfs count_vfs, *count_base;
static sqlite3_io_methods count_io[4];
static const sqlite3_io_methods *count_real[4];
static int count_syncs;

static int count_sync_at(int k, sqlite3_file *f, int flags)
{
    __atomic_add_fetch(&count_syncs, 1, __ATOMIC_RELAXED);
    return count_real[k]->xSync(f, flags);
}
static int count_truncs_zero; /* xTruncate calls to 0 bytes */
static int count_trunc_at(int k, sqlite3_file *f, sqlite3_int64 size)
{
    if (size == 0)
        __atomic_add_fetch(&count_truncs_zero, 1, __ATOMIC_RELAXED);
    return count_real[k]->xTruncate(f, size);
}
static int count_trunc0(sqlite3_file *f, sqlite3_int64 n) { return count_trunc_at(0, f, n); }
static int count_trunc1(sqlite3_file *f, sqlite3_int64 n) { return count_trunc_at(1, f, n); }
static int count_trunc2(sqlite3_file *f, sqlite3_int64 n) { return count_trunc_at(2, f, n); }
static int count_trunc3(sqlite3_file *f, sqlite3_int64 n) { return count_trunc_at(3, f, n); }
static int (*const count_trunc_fn[4])(sqlite3_file *, sqlite3_int64) = {
    count_trunc0, count_trunc1, count_trunc2, count_trunc3};
static int count_sync0(sqlite3_file *f, int fl) { return count_sync_at(0, f, fl); }
static int count_sync1(sqlite3_file *f, int fl) { return count_sync_at(1, f, fl); }
static int count_sync2(sqlite3_file *f, int fl) { return count_sync_at(2, f, fl); }
static int count_sync3(sqlite3_file *f, int fl) { return count_sync_at(3, f, fl); }
static int (*const count_sync_fn[4])(sqlite3_file *, int) = {count_sync0, count_sync1,
                                                             count_sync2, count_sync3};

static int count_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    int rc = count_base->xOpen(count_base, name, f, flags, out);
    if (rc != SQLITE_OK || !f->pMethods)
        return rc;
    for (int k = 0; k < 4; k++) {
        if (!count_real[k]) { /* one wrapper per io_methods table the base VFS uses */
            count_real[k] = f->pMethods;
            count_io[k] = *f->pMethods;
            count_io[k].xSync = count_sync_fn[k];
            count_io[k].xTruncate = count_trunc_fn[k];
        }
        if (count_real[k] == f->pMethods) {
            f->pMethods = &count_io[k];
            break;
        }
    }
    return rc;
}

/* Make the counting VFS the default (sqlite3_vfs_unregister(&count_vfs) ends it). */
static void count_vfs_on(void)
{
    count_base = sqlite3_vfs_find(NULL);
    count_vfs = *count_base;
    count_vfs.zName = "tt_count";
    count_vfs.xOpen = count_open;
    sqlite3_vfs_register(&count_vfs, 1);
}

/* The save of a short answer as the default mode makes it: open, a cache lookup (a miss), the
 * prompt, the answer, the cache entry, close. */
static void one_shot(const char *path, int i)
{
    char *err = NULL, q[64];
    struct store *st = store_open(path, NULL, &err);
    if (!st) {
        TAP_OK(0, "open %s: %s", path, err);
        free(err);
        return;
    }
    snprintf(q, sizeof q, "question number %d", i);
    unsigned char key[STORE_CACHE_KEY_LEN];
    store_cache_key(q, strlen(q), key);
    struct store_cache_entry e;
    int miss = store_cache_get(st, key, &e) == STORE_NOT_FOUND;
    int64_t c = store_conversation_new(st, NULL, NULL, "m", NULL);
    struct store_msg_info info = {.model = "m", .host = "h"};
    int64_t u = store_message_add(st, c, "user", q, strlen(q), &info);
    info.parent_id = u;
    int64_t a = store_message_begin(st, c, &info);
    char answer[1024];
    memset(answer, 'a', sizeof answer);
    snprintf(answer, 64, "the answer to %.40s ", q);
    answer[strlen(answer)] = ' ';
    struct store_whole w = {answer, sizeof answer, NULL, 0};
    int ok = store_message_append(st, a, answer, sizeof answer) >= 0 &&
             store_message_finish_whole(st, a, &w, STORE_COMPLETE, "stop", NULL, NULL, NULL) == 0 &&
             store_cache_put_message(st, key, a, sizeof answer) == 0;
    TAP_OK(miss && c > 0 && u > 0 && a > 0 && ok, "one-shot %d saved", i);
    store_close(st);
}

/* Issue 14: a default one-shot paid three fsyncs (the WAL's header when the next run restarted
 * it, the WAL and the database in the checkpoint at close: milliseconds each on a busy disk).
 * Now a short answer's run syncs nothing: its pages stay in the WAL, copied in the background
 * once the WAL passes 1 MB. A copy of tokterm.db alone is still a consistent database with the
 * tables; a complete backup is the online backup API (sqlite3's .backup). */
static void test_one_shot_syncs(void)
{
    count_vfs_on();
    char *path = tmp_path("oneshot.db");
    one_shot(path, 1); /* makes the file and the schema */
    int most = 0;
    for (int i = 2; i <= 6; i++) {
        count_syncs = 0;
        one_shot(path, i);
        if (count_syncs > most)
            most = count_syncs;
    }
    TAP_OK(most <= 1, "a default one-shot makes at most 1 fsync (most: %d)", most);

    /* tokterm.db copied alone: a consistent tokterm database */
    char *copy = tmp_path("oneshot-copy.db");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
    TAP_OK(system(cmd) == 0, "tokterm.db copied alone");
    TAP_INT(raw_int(copy, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
            1, "the copy alone: integrity_check ok");
    TAP_INT(raw_int(copy, "SELECT count(*) FROM sqlite_schema WHERE name = 'messages'"), 1,
            "the copy alone holds the tables");
    /* the documented backup: the online backup API reads through the WAL */
    char *bak = tmp_path("oneshot-backup.db");
    sqlite3 *src = NULL, *dst = NULL;
    int rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_open(bak, &dst);
    sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(dst, "main", src, "main") : NULL;
    rc = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
    sqlite3_backup_finish(b);
    sqlite3_close(dst);
    sqlite3_close(src);
    TAP_INT(rc, SQLITE_DONE, "backup through the online backup API");
    TAP_INT(raw_int(bak, "SELECT count(*) FROM messages WHERE content LIKE 'the answer to "
                         "question number 6 %'"),
            1, "the backup holds the last answer");
    sqlite3_vfs_unregister(&count_vfs);
    free(bak);
    free(copy);
    free(path);
}

/* A new database with the conversation *c, closed by the run that made the schema (it
 * checkpoints) and opened again with the counting VFS on: a later run's store. */
static struct store *big_answer_store(const char *name, int64_t *c)
{
    struct store *st = open_new(name, NULL);
    char *path = tmp_path(name), *err = NULL;
    *c = store_conversation_new(st, "big", NULL, "m", NULL);
    store_close(st);
    count_vfs_on();
    st = store_open(path, NULL, &err);
    free(err);
    free(path);
    return st;
}

/* big (n bytes, a multiple of 1 MiB) streamed in 1 MiB parts, as a slow stream commits them,
 * then finished from the whole text. Its id. */
static int64_t big_answer_save(struct store *st, int64_t c, const char *big, size_t n)
{
    size_t piece = (size_t)1 << 20;
    struct store_msg_info info = {.model = "m"};
    int64_t a = store_message_begin(st, c, &info);
    for (size_t off = 0; off < n; off += piece) {
        store_message_append(st, a, big + off, piece);
        store_message_flush(st, a);
    }
    struct store_whole w = {big, n, NULL, 0};
    TAP_OK(store_message_finish_whole(st, a, &w, STORE_COMPLETE, "stop", NULL, NULL, NULL) == 0,
           "a %zu MB answer saved in parts, then whole", n >> 20);
    return a;
}

/* The end of a 10 MB answer leaves the WAL (its parts, then its row: ~20 MB) alone: at 4,000
 * pages the commit copied and synced it itself, on the answer's path (issue 14). The close
 * copies a WAL over 8 MB and starts it over, without truncating the file to 0 bytes (10-24 ms
 * on a busy disk, and the next run allocated its blocks again). */
static void test_big_answer_wal(void)
{
    char *path = tmp_path("bigwal.db");
    int64_t c;
    struct store *st = big_answer_store("bigwal.db", &c);
    count_truncs_zero = 0;
    size_t n = (size_t)10 << 20;
    char *big = letters(n);
    int64_t a = big_answer_save(st, c, big, n);
    struct stat sb;
    long long db = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    TAP_OK(db >= 0 && db < (1 << 20), "its commit left the WAL alone (database file %lld bytes)",
           db);
    store_close(st);
    db = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    TAP_OK(db >= (long long)n, "a WAL that large is copied at close (%lld bytes)", db);
    TAP_INT(count_truncs_zero, 0, "the close truncates no file to 0 bytes (the WAL starts "
                                  "over in place)");
    char *wal = xasprintf("%s-wal", path);
    long long wal_size = stat(wal, &sb) == 0 ? (long long)sb.st_size : -1;
    TAP_OK(wal_size >= 0 && wal_size <= (16 << 20),
           "the WAL file is cut to journal_size_limit (%lld bytes)", wal_size);
    TAP_INT(raw_wal_frames(path), 1, "the next open finds one frame in it (the restart's)");
    sqlite3_vfs_unregister(&count_vfs);
    free(wal);
    char *q = xasprintf("SELECT length(content) FROM messages WHERE id = %lld", (long long)a);
    TAP_INT(raw_int(path, q), (long long)n, "it reads back whole");
    free(q);
    free(big);
    free(path);
}

/* The WAL's copy of a run that wrote a long answer: the detached `tokterm --checkpoint`
 * (here this test program, see main). Its exit status: 0 when it started the WAL over, 3 when
 * it did not run as promised (an environment, stdin/stdout/stderr not /dev/null, or a
 * descriptor of the parent's besides the lock on 3). It is nobody's child (a double fork):
 * waited for here as the subreaper this process makes itself in test_checkpoint_detached. */
static int detached_status(void)
{
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, 0)) < 0 && errno == EINTR) {
    }
    return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The chat goes on after a close (and a run's exit may take a while: an MCP server's stop):
 * the checkpoint process of a run that wrote 1 MiB or more was its child, left a zombie once
 * done. It is started by a double fork whose middle process the close waits for: the closing
 * process has no child left, running or not. Runs before this process becomes a subreaper. */
static void test_checkpoint_no_zombie(void)
{
    char *path = tmp_path("nozombie.db");
    int64_t c;
    struct store *st = big_answer_store("nozombie.db", &c);
    store_set_checkpoint_exe(st, "/proc/self/exe");
    size_t n = (size_t)1 << 20;
    char *big = letters(n);
    big_answer_save(st, c, big, n);
    store_close(st);
    sqlite3_vfs_unregister(&count_vfs);
    int status = 0;
    errno = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    int no_child = pid < 0 && errno == ECHILD;
    TAP_OK(no_child, "no zombie: after a run that wrote 1 MiB the closing process has no child "
                     "(waitpid: %ld, %s)", (long)pid, pid > 0 ? "a zombie" : pid == 0 ?
                     "a running child" : strerror(errno));
    /* and the checkpoint process still ran: once it is gone (its lock on byte 129 of the
     * -shm file, STORE_SHM_DETACHED, released) the WAL was started over: one frame left */
    char *shm = xasprintf("%s-shm", path);
    int fd = open(shm, O_RDONLY | O_CLOEXEC);
    int busy = 1;
    for (double until = util_now() + 60; fd >= 0 && busy && util_now() < until;) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 129, .l_len = 1};
        busy = fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
        struct timespec ts = {0, 20000000};
        if (busy)
            nanosleep(&ts, NULL);
    }
    if (fd >= 0)
        close(fd);
    free(shm);
    TAP_OK(!busy, "no zombie: the detached checkpoint ended");
    long long frames = raw_wal_frames(path);
    TAP_INT(frames, 1, "no zombie: the detached checkpoint started the WAL over");
    free(big);
    free(path);
}

/* Issue 14: the close of a run that left a long answer in the WAL copied it into the database
 * and synced both (a 10 MB answer: 18 MB and two fsyncs, 30-40 ms of the user's wait). With a
 * checkpoint program it makes no fsync: `tokterm --checkpoint PATH` copies and starts the WAL
 * over after the process is gone. */
static void test_checkpoint_detached(void)
{
    /* the checkpoint processes, orphans, become children of this process (detached_status) */
    TAP_OK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "detached: this process is a subreaper");
    char *path = tmp_path("detach.db"), *err = NULL;
    int64_t c;
    struct store *st = big_answer_store("detach.db", &c);
    store_set_checkpoint_exe(st, "/proc/self/exe");
    size_t n = (size_t)10 << 20;
    char *big = letters(n);
    int64_t a = big_answer_save(st, c, big, n);
    count_syncs = 0;
    store_close(st);
    TAP_INT(count_syncs, 0, "detached: the close makes no fsync");
    /* a short run right after it (its copy still running) leaves the WAL to that copy: no
     * background copy of its own, nothing copied at its close */
    st = store_open(path, NULL, &err);
    store_set_checkpoint_exe(st, "/proc/self/exe");
    int64_t u = st ? store_message_add(st, c, "user", "short", 5, NULL) : -1;
    store_checkpoint_async(st);
    TAP_OK(u > 0 && store_message_add(st, c, "assistant", "answer", 6, NULL) > 0,
           "detached: a short run right after it saved");
    store_close(st);
    TAP_INT(count_syncs, 0, "detached: and made no fsync either");
    sqlite3_vfs_unregister(&count_vfs);
    TAP_INT(detached_status(), 0, "detached: the checkpoint process ran as promised and started "
                                  "the WAL over");
    struct stat sb;
    long long db = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    TAP_OK(db >= (long long)n, "detached: the database file holds the answer (%lld bytes)", db);
    TAP_INT(raw_wal_frames(path), 1, "detached: the next open finds one frame in the WAL");
    char *q = xasprintf("SELECT length(content) FROM messages WHERE id = %lld", (long long)a);
    TAP_INT(raw_int(path, q), (long long)n, "detached: the answer reads back whole");
    free(q);

    /* Long answers in a row, each run started right as the one before exits, while the
     * copy of the earlier ones still runs (a run leaves the WAL to it, and it cannot start
     * the WAL over while runs keep writing): the WAL does not grow without bound. Past 40 MiB
     * of earlier runs' frames a close copies it itself. */
    size_t m = (size_t)3 << 20;
    long long most = 0;
    int children = 0;
    char *wal = xasprintf("%s-wal", path);
    for (int i = 0; i < 16; i++) {
        st = store_open(path, NULL, &err);
        store_set_checkpoint_exe(st, "/proc/self/exe");
        big[0] = (char)('a' + i);
        int64_t id = st ? store_message_add(st, c, "assistant", big, m, NULL) : -1;
        if (id <= 0)
            TAP_OK(0, "detached: run %d saved its answer: %s", i, st ? store_error(st) : err);
        store_close(st);
        children++;
        if (stat(wal, &sb) == 0 && sb.st_size > most)
            most = sb.st_size;
    }
    int ok = 0;
    for (int i = 0; i < children; i++)
        ok += detached_status() == 0;
    TAP_OK(ok >= 1, "detached: the copies of 16 runs in a row started the WAL over (%d "
                    "processes did)", ok);
    TAP_OK(most <= (40 << 20) + 2 * (long long)m,
           "detached: the WAL file stayed within 40 MiB and two answers (at most %lld bytes)",
           most);
    TAP_INT(raw_wal_frames(path), 1, "detached: then one frame in the WAL");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE length(content) = 3145728"), 16,
            "detached: the 16 answers read back");
    free(wal);
    free(big);
    free(path);
}

/* The checkpoint's side of test_checkpoint_race: once it started the WAL over it says so (the
 * file PATH.restarted) and holds its lock until the test lets it go on (PATH.go). */
static void race_hold(const char *path)
{
    char *hold = xasprintf("%s.hold", path), *said = xasprintf("%s.restarted", path),
         *go = xasprintf("%s.go", path);
    if (access(hold, F_OK) == 0) {
        int fd = open(said, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        for (double until = util_now() + 60; access(go, F_OK) != 0 && util_now() < until;)
            usleep(5000);
    }
    free(hold);
    free(said);
    free(go);
}

/* Wait for the file path to exist (at most 60 s): 1 when it does. */
static int wait_file(const char *path)
{
    for (double until = util_now() + 60; util_now() < until; usleep(5000))
        if (access(path, F_OK) == 0)
            return 1;
    return 0;
}

/* A long run that closes after the detached copy of an earlier one started the WAL over, but
 * while that copy still holds its lock, leaves its frames to it (it sees a copy running): the
 * copy takes them too before it exits. CI once found 778 frames left after 16 long runs in a
 * row, the last one closing in that window; here the window is held open (race_hold). */
static void test_checkpoint_race(void)
{
    char *path = tmp_path("race.db"), *err = NULL;
    struct store *st = open_new("race.db", NULL);
    int64_t c = store_conversation_new(st, "race", NULL, "m", NULL);
    store_close(st);
    char *hold = xasprintf("%s.hold", path), *said = xasprintf("%s.restarted", path),
         *go = xasprintf("%s.go", path);
    unlink(said);
    unlink(go);
    int fd = open(hold, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    size_t m = (size_t)2 << 20;
    char *big = letters(m);
    int saved = 0;
    for (int i = 0; i < 2; i++) {
        if (i == 1) { /* the first run's copy started the WAL over and still runs */
            TAP_OK(wait_file(said), "race: the first run's copy started the WAL over");
            TAP_INT(raw_wal_frames(path), 1, "race: one frame in the WAL then");
        }
        st = store_open(path, NULL, &err);
        store_set_checkpoint_exe(st, "/proc/self/exe");
        big[0] = (char)('a' + i);
        saved += st && store_message_add(st, c, "assistant", big, m, NULL) > 0;
        store_close(st);
    }
    TAP_INT(saved, 2, "race: two runs saved a 2 MiB answer each");
    TAP_OK(raw_wal_frames(path) > 1, "race: the second run left its frames to the copy");
    fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    TAP_INT(detached_status(), 0, "race: the copy ended, the WAL started over");
    TAP_INT(raw_wal_frames(path), 1, "race: the copy took the second run's frames too");
    unlink(hold);
    free(hold);
    free(said);
    free(go);
    free(big);
    free(err);
    free(path);
}

/* SQLite writes each WAL frame with two calls, its header and its page; wal_vfs.c gathers
 * them: a 4 MiB answer (~1,030 frames, ~2,060 of SQLite's writes) is written in pieces of up
 * to 124 KiB, and reads back whole. A write that fails (a file size limit standing in for a
 * full disk) fails the commit: the answer is not saved, the database stays sound and the next
 * commit goes in. */
static void test_wal_gather(void)
{
    char *path = tmp_path("gather.db");
    struct store *st = open_new("gather.db", NULL);
    int64_t c = store_conversation_new(st, "gather", NULL, "m", NULL);
    size_t n = (size_t)4 << 20;
    char *big = letters(n);
    unsigned long w0 = wal_vfs_writes();
    int64_t id = store_message_add(st, c, "assistant", big, n, NULL);
    unsigned long w = wal_vfs_writes() - w0;
    TAP_OK(id > 0, "gather: a 4 MiB answer saved");
    TAP_OK(w > 0 && w < 100, "gather: its ~1,030 frames went to the WAL in %lu writes", w);
    char *q = xasprintf("SELECT length(content) FROM messages WHERE id = %lld", (long long)id);
    TAP_INT(raw_int(path, q), (long long)n, "gather: it reads back whole from another connection");
    free(q);

    /* a write refused past a file size limit: the commit fails, nothing half-saved */
    struct stat sb;
    char *wal = xasprintf("%s-wal", path);
    long long wal_size = stat(wal, &sb) == 0 ? (long long)sb.st_size : 0;
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)(wal_size + (1 << 20));
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    big[0] = 'Z';
    int64_t bad = store_message_add(st, c, "assistant", big, n, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    TAP_OK(bad < 0, "gather: a write past the file size limit fails the commit (%lld)",
           (long long)bad);
    int64_t after = store_message_add(st, c, "user", "still here", 10, NULL);
    TAP_OK(after > 0, "gather: the next commit goes in");
    store_close(st);
    tap_sound(path, "gather: the database is sound after the failed commit");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE substr(content, 1, 1) = 'Z'"), 0,
            "gather: nothing of the refused answer was saved");
    free(wal);
    free(big);
    free(path);
}

/* Run sql in a child process on a connection of its own, which exits without closing it (as
 * a one-shot does); then copy the database and its WAL as the exit left them, without the
 * -shm file, so that the copy's open recovers the WAL (the copy's path; the caller frees). */
static char *commit_and_exit(const char *path, const char *sql, const char *what)
{
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
            _exit(3);
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
        _exit(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : 4);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    TAP_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0, what);
    char *copy = xasprintf("%s-copy.db", path);
    for (int i = 0; i < 3; i++) {
        const char *ext = i == 0 ? "" : i == 1 ? "-wal" : "-shm";
        char *cmd = i == 2 ? xasprintf("rm -f '%s%s'", copy, ext)
                           : xasprintf("cp '%s%s' '%s%s'", path, ext, copy, ext);
        TAP_OK(system(cmd) == 0, "%s", cmd);
        free(cmd);
    }
    return copy;
}

/* What the WAL gatherer must leave on disk for the next process's recovery, when the process
 * that committed exits without a close (a one-shot's exit): the commit, whole.
 * - A transaction that spills pages to the WAL and then changes one of them again: SQLite
 *   overwrites that frame and, at the commit, rewrites the headers of the frames from there on
 *   (walRewriteChecksums), the commit frame's last and alone.
 * - A commit of one frame at the end of a WAL this connection never wrote: its header is not
 *   where a write of this connection ended. */
static void test_wal_commit_at_exit(void)
{
    char *path = tmp_path("recksum.db");
    struct store *st = open_new("recksum.db", NULL); /* installs the VFS, makes the file */
    store_close(st);
    char *copy = commit_and_exit(
        path,
        "PRAGMA synchronous = NORMAL; PRAGMA cache_size = 10; PRAGMA cache_spill = 5;"
        "CREATE TABLE spill(id INTEGER PRIMARY KEY, v TEXT);"
        "BEGIN;"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) "
        "INSERT INTO spill(v) SELECT hex(randomblob(600)) FROM n;"
        "UPDATE spill SET v = 'x' || v WHERE id < 50;"
        "COMMIT;",
        "commit at exit: a transaction that spilled, committed");
    TAP_INT(raw_int(copy, "SELECT count(*) FROM spill WHERE v LIKE 'x%'"), 49,
            "commit at exit: the WAL's recovery finds the spilled transaction");
    tap_sound(copy, "commit at exit: the recovered database is sound");
    free(copy);
    copy = commit_and_exit(path, "PRAGMA synchronous = NORMAL; PRAGMA user_version = 4242",
                           "commit at exit: a commit of one frame");
    TAP_INT(raw_int(copy, "PRAGMA user_version"), 4242,
            "commit at exit: the WAL's recovery finds the one-frame commit");
    free(copy);
    free(path);
}

/* A transaction that spilled pages to the WAL and rolled back: its frames sit past the WAL's
 * last commit, and the next writer's frames go over them. Gathered and not written, they must
 * not be written once the write lock is given up: another connection (here of this process,
 * on SQLite's own VFS; a tokterm beside it alike) commits frames at the same offsets, and the
 * rolled-back ones written over them later would take that commit's place: its pages lost, or
 * pages of another transaction read in their place. The WAL starts over empty first, so that
 * the rollback reloads its pages from the database file, not from the WAL (a read of the WAL
 * would write what is gathered, while the lock is held). */
static void test_wal_rollback_gathered(void)
{
    char *path = tmp_path("rollback.db");
    struct store *st = open_new("rollback.db", NULL); /* installs the VFS, makes the file */
    store_close(st);
    sqlite3 *a = NULL, *b = NULL;
    int ok = sqlite3_open_v2(path, &a, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
             sqlite3_open_v2(path, &b, SQLITE_OPEN_READWRITE, "unix") == SQLITE_OK &&
             sqlite3_exec(a,
                          "PRAGMA cache_size = 10; PRAGMA cache_spill = 5;"
                          "CREATE TABLE back(id INTEGER PRIMARY KEY, v TEXT);"
                          "INSERT INTO back(v) VALUES ('before');"
                          "PRAGMA wal_checkpoint(TRUNCATE);",
                          NULL, NULL, NULL) == SQLITE_OK;
    unsigned long w0 = wal_vfs_writes();
    ok = ok && sqlite3_exec(a,
                            "BEGIN;"
                            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                            "WHERE i < 24) INSERT INTO back(v) SELECT hex(randomblob(700)) FROM n;"
                            "ROLLBACK;",
                            NULL, NULL, NULL) == SQLITE_OK;
    TAP_OK(ok && wal_vfs_writes() > w0,
           "rollback: a transaction spilled pages to the WAL (%lu writes) and rolled back",
           wal_vfs_writes() - w0);
    ok = sqlite3_exec(b,
                      "BEGIN; INSERT INTO back(v) VALUES ('from b');"
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                      "WHERE i < 40) INSERT INTO back(v) SELECT 'b ' || hex(randomblob(700)) FROM n;"
                      "COMMIT;",
                      NULL, NULL, NULL) == SQLITE_OK;
    TAP_OK(ok, "rollback: another connection committed after it");
    sqlite3_stmt *q = NULL;
    long long n = -1;
    if (sqlite3_prepare_v2(a, "SELECT count(*) FROM back WHERE v = 'from b'", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    TAP_INT(n, 1, "rollback: the first connection reads the other's commit");
    sqlite3_close(a);
    sqlite3_close(b);
    TAP_INT(raw_int(path, "SELECT count(*) FROM back WHERE v LIKE 'b %'"), 40,
            "rollback: the other's commit is whole in the database");
    tap_sound(path, "rollback: the database is sound");
    free(path);
}

/* An I/O error names SQLite's extended code, which tells a short read from a failing disk: a
 * WAL cut short under a live WAL index (kept by another connection of this process) makes the
 * store's first read of the page there a short read (SQLITE_IOERR_SHORT_READ, 522). */
static void test_io_error_code(void)
{
    char *path = tmp_path("ioerr.db"), *err = NULL;
    struct store *st = open_new("ioerr.db", NULL);
    store_close(st);
    sqlite3 *db = NULL;
    int ok = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
             sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL) ==
                 SQLITE_OK &&
             sqlite3_exec(db, "CREATE TABLE cut(v); INSERT INTO cut VALUES (zeroblob(20000))",
                          NULL, NULL, NULL) == SQLITE_OK;
    char *wal = xasprintf("%s-wal", path);
    TAP_OK(ok && truncate(wal, 32) == 0, "I/O error: a commit in the WAL, then the WAL cut short");
    st = store_open(path, NULL, &err);
    TAP_OK(!st && err && strstr(err, "disk I/O error (input/output error, SQLite code 522)"),
           "I/O error: the open says so, with SQLite's code: %s", err ? err : "(opened)");
    store_close(st);
    free(err);
    sqlite3_close(db);
    free(wal);
    free(path);
}

/* `test_store --checkpoint PATH`: the detached checkpoint's side of test_checkpoint_detached,
 * which checks the contract of store_checkpoint_detach first: an empty environment,
 * /dev/null as 0-2, the lock as 3 and nothing else open. */
static int checkpoint_main(int argc, char **argv)
{
    extern char **environ;
    struct stat nul, sb;
    int bad = environ && environ[0] != NULL;
    if (stat("/dev/null", &nul) != 0)
        bad = 1;
    for (int fd = 0; fd < 3; fd++)
        if (fstat(fd, &sb) != 0 || sb.st_rdev != nul.st_rdev)
            bad = 1;
    if (fcntl(3, F_GETFD) < 0)
        bad = 1;
    for (int fd = 4; fd < 256; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            bad = 1;
    store_checkpoint_test_hook = race_hold;
    int rc = store_checkpoint_main(argc, argv);
    return bad ? 3 : rc;
}

/* A one-shot as the session runs it, its WAL checkpoints asked for where the session asks:
 * when the request is about to leave (before the prompt's commit) and after that commit. */
static void one_shot_ckpt(const char *path, int i)
{
    char *err = NULL, q[64];
    struct store *st = store_open(path, NULL, &err);
    if (!st) {
        TAP_OK(0, "open %s: %s", path, err);
        free(err);
        return;
    }
    snprintf(q, sizeof q, "checkpoint question %d", i);
    store_checkpoint_async(st);
    /* the conversation, the prompt and the answer's row in one commit, as session_save_begin */
    int batch = store_batch_begin(st) == 0;
    int64_t c = store_conversation_new(st, NULL, NULL, "m", NULL);
    struct store_msg_info info = {.model = "m", .host = "h"};
    int64_t u = store_message_add(st, c, "user", q, strlen(q), &info);
    info.parent_id = u;
    int64_t a = store_message_begin(st, c, &info);
    batch = batch && store_batch_end(st) == 0;
    store_checkpoint_async(st);
    struct store_whole w = {q, strlen(q), NULL, 0};
    int ok = store_message_append(st, a, q, strlen(q)) >= 0 &&
             store_message_finish_whole(st, a, &w, STORE_COMPLETE, "stop", NULL, NULL, NULL) == 0;
    TAP_OK(batch && c > 0 && u > 0 && a > 0 && ok, "checkpointed one-shot %d saved", i);
    store_close(st);
}

/* Issue 14: store_checkpoint_async went by the WAL file's size, which a checkpoint does not
 * shrink (journal_size_limit keeps up to 16 MiB): once one long answer had grown the file past
 * 1 MB, every later run started a checkpoint (a second connection, two fsyncs, joined at
 * close) though its WAL held a few pages. It goes by the frames the WAL holds now, and the
 * answer's commit waits for a running checkpoint, so that it restarts the WAL: the next runs
 * recover and copy only their own pages. */
static void test_checkpoint_by_frames(void)
{
    count_vfs_on();
    char *path = tmp_path("ckptframes.db"), *err = NULL;
    one_shot_ckpt(path, 0); /* makes the file and the schema */
    struct store *st = store_open(path, NULL, &err);
    size_t n = (size_t)2 << 20;
    char *big = letters(n);
    int64_t c = st ? store_conversation_new(st, "big", NULL, "m", NULL) : -1;
    TAP_OK(c > 0 && store_message_add(st, c, "assistant", big, n, NULL) > 0,
           "a 2 MB message committed");
    store_checkpoint_async(st);
    store_close(st);
    char *wal = xasprintf("%s-wal", path);
    struct stat sb;
    TAP_OK(stat(wal, &sb) == 0 && sb.st_size >= (off_t)n, "the WAL file is over 2 MB (%lld)",
           (long long)sb.st_size);
    one_shot_ckpt(path, 1); /* may copy what the 2 MB message left in the WAL */
    int syncs = 0;
    count_syncs = 0;
    for (int i = 2; i <= 6; i++)
        one_shot_ckpt(path, i);
    syncs = count_syncs;
    TAP_INT(syncs, 0, "five one-shots after it: no checkpoint, no fsync (the WAL file stays "
                      "large, its frames are few)");
    TAP_OK(stat(wal, &sb) == 0, "the WAL file is still there (%lld bytes)", (long long)sb.st_size);
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages WHERE content LIKE 'checkpoint question%'"),
            14, "every prompt and answer reads back");
    TAP_INT(raw_int(path, "SELECT length(content) FROM messages WHERE conversation_id = "
                          "(SELECT id FROM conversations WHERE title = 'big')"),
            (long long)n, "the 2 MB message reads back whole");
    sqlite3_vfs_unregister(&count_vfs);
    free(wal);
    free(big);
    free(path);
}

/* ---------------------------------------------------------------- an answer over SQLite's limit */

/* SQLite refuses a value over SQLITE_LIMIT_LENGTH (1e9 bytes by default) with SQLITE_TOOBIG.
 * TOKTERM_TEST_SQLITE_LENGTH lowers the limit on the store's connection so that 100 KB plays
 * the part of a gigabyte: an answer longer than that stays in parts, nothing is dropped. */
static void test_too_big(void)
{
    setenv("TOKTERM_TEST_SQLITE_LENGTH", "100000", 1);
    struct store *st = open_new("toobig.db", NULL);
    unsetenv("TOKTERM_TEST_SQLITE_LENGTH");
    char *path = tmp_path("toobig.db");
    struct fake_clock clk = {1000.0, 1700000000};
    store_set_clock(st, fake_mono, fake_epoch, &clk);
    int64_t conv = store_conversation_new(st, "big", NULL, "m", NULL);
    size_t chunk = 60000, n_chunks = 3;
    char *text = letters(chunk * n_chunks + 10000);
    /* streamed: three batches of 60 KB committed as parts, 10 KB still buffered at the end */
    int64_t id = store_message_begin(st, conv, NULL);
    int commits = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        clk.mono += 1.0;
        commits += store_message_append(st, id, text + i * chunk, chunk) == 1;
    }
    TAP_INT(commits, 3, "three batches committed as parts");
    store_message_append(st, id, text + n_chunks * chunk, 10000);
    int rc = store_message_finish(st, id, STORE_COMPLETE, "stop", NULL, NULL, NULL);
    TAP_OK(rc == 0, "finishing a 190 KB answer over a 100 KB limit succeeds (%s)",
           rc ? store_error(st) : "");
    struct store_conversation *c = NULL;
    store_conversation_load(st, conv, &c);
    size_t want = chunk * n_chunks + 10000;
    TAP_OK(c && c->n_messages == 1 && c->messages[0].content_len == want &&
               memcmp(c->messages[0].content, text, want) == 0,
           "the whole answer reads back (%zu of %zu bytes)",
           c && c->n_messages ? c->messages[0].content_len : 0, want);
    TAP_OK(c && c->n_messages == 1 && c->messages[0].status == STORE_COMPLETE,
           "and it is marked complete");
    store_conversation_free(c);
    TAP_OK(raw_int(path, "SELECT count(*) FROM message_parts") > 0,
           "its text stays in parts (not deleted)");

    /* the recovery path: an answer cut by a crash, over the limit */
    int64_t id2 = store_message_begin(st, conv, NULL);
    for (size_t i = 0; i < n_chunks; i++) {
        clk.mono += 1.0;
        store_message_append(st, id2, text + i * chunk, chunk);
    }
    char *sql = xasprintf("UPDATE messages SET writer = '999999999:1' WHERE id = %lld",
                          (long long)id2);
    raw_exec(path, sql);
    free(sql);
    int rec = store_recover(st);
    TAP_OK(rec == 1, "recovery of a cut answer over the limit (%d: %s)", rec,
           rec < 0 ? store_error(st) : "ok");
    c = NULL;
    store_conversation_load(st, conv, &c);
    TAP_OK(c && c->n_messages == 2 && c->messages[1].content_len == chunk * n_chunks &&
               memcmp(c->messages[1].content, text, chunk * n_chunks) == 0 &&
               c->messages[1].status == STORE_INTERRUPTED,
           "recovered: interrupted, with all its text (%zu bytes)",
           c && c->n_messages == 2 ? c->messages[1].content_len : 0);
    store_conversation_free(c);

    /* one message over the limit at once: refused with a clear message, nothing half-saved */
    int64_t before = raw_int(path, "SELECT count(*) FROM messages");
    int64_t r = store_message_add(st, conv, "user", text, 150000, NULL);
    TAP_OK(r < 0 && strstr(store_error(st), "too large"), "a 150 KB prompt: refused (%s)",
           store_error(st));
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), before, "and nothing was added");
    /* a cache entry over the limit: refused, not stored empty */
    unsigned char key[STORE_CACHE_KEY_LEN] = {7};
    TAP_OK(store_cache_put(st, key, STORE_COMPLETE, text, NULL, "m", "stop", NULL) != 0,
           "a cache entry over the limit is refused");
    TAP_INT(raw_int(path, "SELECT count(*) FROM response_cache"), 0, "no empty entry cached");
    store_close(st);
    tap_sound(path, "integrity_check ok");
    free(text);
    free(path);
}

/* ---------------------------------------------------------------- rm leaves no copy */

/* Occurrences of needle in the files of tmpdir whose names start with prefix. */
static int files_hold(const char *prefix, const char *needle)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int hits = 0;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char *p = tmp_path(e->d_name);
        FILE *f = fopen(p, "rb");
        struct buf b = BUF_INIT;
        char chunk[65536];
        size_t n;
        while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
            buf_append(&b, chunk, n);
        if (f)
            fclose(f);
        if (b.len && memmem(b.data, b.len, needle, strlen(needle)))
            hits++;
        buf_free(&b);
        free(p);
    }
    if (d)
        closedir(d);
    return hits;
}

/* Pages freed while secure_delete is FAST keep their text: here a cached answer replaced by
 * a newer one for the same request (asked again with --no-cache). rm overwrites the free
 * pages too, and the WAL is emptied. */
static void test_rm_scrub(void)
{
    const char *marker = "qzvkmarkerxq";
    struct store *st = open_new("scrub.db", NULL);
    char *path = tmp_path("scrub.db");
    int64_t keep = store_conversation_new(st, "keep", NULL, "m", NULL);
    store_message_add(st, keep, "user", "keep me", 7, NULL);
    int64_t conv = store_conversation_new(st, "secret", NULL, "m", NULL);
    store_message_add(st, conv, "user", marker, strlen(marker), NULL);
    struct buf a = BUF_INIT;
    for (int i = 0; i < 3000; i++)
        buf_printf(&a, "%s %04d ", marker, i); /* 51 KB */
    store_message_add(st, conv, "assistant", buf_str(&a), a.len, NULL);
    unsigned char key[STORE_CACHE_KEY_LEN] = {9};
    store_cache_put(st, key, STORE_COMPLETE, buf_str(&a), NULL, "m", "stop", NULL);
    char *b = letters(100); /* a short answer this time */
    store_cache_put(st, key, STORE_COMPLETE, b, NULL, "m", "stop", NULL);
    free(b);
    store_close(st); /* checkpoints (this run made the schema): everything is in scrub.db */
    long long free_pages = raw_int(path, "PRAGMA freelist_count");
    TAP_OK(free_pages > 8, "the replaced cache entry left %lld free pages", free_pages);
    TAP_OK(files_hold("scrub.db", marker) > 0, "before rm: the text is on disk");
    st = open_new("scrub.db", NULL);
    TAP_INT(store_conversation_delete(st, conv), 0, "rm");
    TAP_INT(files_hold("scrub.db", marker), 0, "after rm (still open): no file holds the text");
    store_close(st);
    TAP_INT(files_hold("scrub.db", marker), 0, "after close: no file holds the text");
    TAP_INT(raw_int(path, "SELECT count(*) FROM messages"), 1, "the other conversation is kept");
    tap_sound(path, "integrity_check ok");
    buf_free(&a);
    free(path);
}

/* ---------------------------------------------------------------- a read-only handle */

static void test_reader(void)
{
    struct store *st = open_new("reader.db", NULL);
    char *path = tmp_path("reader.db"), *err = NULL;
    int64_t conv = store_conversation_new(st, "r", NULL, "m", NULL);
    struct buf big = BUF_INIT;
    while (big.len < 70000)
        buf_appends(&big, "lorem ipsum dolor ");
    buf_appends(&big, "needleword at the end");
    int64_t id = store_message_add(st, conv, "assistant", buf_str(&big), big.len, NULL);
    int64_t cut = store_message_begin(st, conv, NULL);
    store_message_append(st, cut, "cut short", 9);
    store_message_flush(st, cut);
    store_close(st); /* marks it interrupted: make it look like a dead writer's again */
    char *sql = xasprintf("UPDATE messages SET status = 'streaming', writer = '999999999:1' "
                          "WHERE id = %lld", (long long)cut);
    raw_exec(path, sql);
    free(sql);
    sql = xasprintf("SELECT count(*) FROM fts_pending WHERE message_id = %lld", (long long)id);
    TAP_INT(raw_int(path, sql), 1, "a message over 64 KiB waits for the next search to be indexed");
    free(sql);
    long long queued = raw_int(path, "SELECT count(*) FROM fts_pending"); /* the cut one too */
    struct store_open_info info;
    st = store_open_reader(path, &info, &err);
    TAP_OK(st != NULL, "open read-only (%s)", err ? err : "ok");
    if (!st)
        return;
    TAP_INT(info.recovered, 0, "a reader recovers nothing");
    TAP_INT(search_finds(st, "needleword", id), 1, "a reader still finds text in the queued message");
    struct store_conversation *c = NULL;
    store_conversation_load(st, conv, &c);
    TAP_OK(c && c->n_messages == 2 && c->messages[1].status == STORE_INTERRUPTED &&
               strcmp(c->messages[1].content, "cut short") == 0,
           "a dead writer's answer reads as interrupted, with its text");
    store_conversation_free(c);
    TAP_OK(store_conversation_rename(st, conv, "x") < 0, "a write on a reader fails (%s)",
           store_error(st));
    store_close(st);
    sql = xasprintf("SELECT status FROM messages WHERE id = %lld", (long long)cut);
    char *status = raw_text(path, sql);
    TAP_STR(status, "streaming", "nothing was written");
    free(status);
    free(sql);
    TAP_INT(raw_int(path, "SELECT count(*) FROM fts_pending"), queued,
            "the queue is left as it was");
    buf_free(&big);
    free(path);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--checkpoint") == 0)
        return checkpoint_main(argc - 2, argv + 2);
    snprintf(tmpdir, sizeof tmpdir, "%s", "/tmp/tt-store-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setenv("TZ", "UTC", 1);
    tzset();
    test_sha256();
    test_sqlite_math();
    test_open_and_errors();
    test_migrate_v1();
    test_migrate_v5();
    test_migrate_v6_tokens();
    test_migrate_v7_tool();
    test_migrate_v8_perf();
    test_migrate_v9_attachments();
    test_migrate_v10_remote();
    test_migrate_v11_marks();
    test_migrate_v12_blocks();
    test_walk_live();
    test_cache_by_reference();
    test_migrate_prev();
    test_tree();
    test_tree_foreign();
    test_conversations();
    test_crash_recovery();
    test_two_writers();
    test_search();
    test_search_ranking();
    test_words_index();
    test_words_distinct();
    test_stats();
    test_cache();
    test_cache_put_all();
    test_summaries_quota();
    test_commands();
    test_long_answer();
    test_long_answer_not_last();
    test_migrate_v15_content_last();
    test_fast_answer();
    test_checkpoint_async();
    test_one_shot_syncs();
    test_checkpoint_by_frames();
    test_index_flat();
    test_warm_answer();
    test_warm_full_cache();
    test_batch();
    test_big_answer_wal();
    test_checkpoint_no_zombie();
    test_checkpoint_detached();
    test_checkpoint_race();
    test_wal_gather();
    test_wal_commit_at_exit();
    test_wal_rollback_gathered();
    test_io_error_code();
    test_too_big();
    test_rm_scrub();
    test_reader();
    rm_tree(tmpdir);
    return tap_done();
}
