/* store.h - the SQLite store: conversations, messages (streamed in batches), full-text search,
 * statistics, the response cache, summaries and quota state.
 *
 * One `struct store` is one connection; use it from one thread at a time. Several processes may
 * share the database file (WAL, busy timeout, BEGIN IMMEDIATE with retry). Nothing here prints:
 * a failing call returns -1 (or NULL) and store_error() tells why. No function takes an API key,
 * and none ever writes one.
 *
 * Times: `created`/`updated` are unix seconds (store_set_clock() can replace the clocks for
 * tests). Token counts are -1 when unknown, durations are REAL seconds and < 0 when unknown.
 *
 * Conversations as trees (schema v6): a conversation is a tree of turns. A turn is a user row
 * and its outcome: an assistant row (complete, truncated, cancelled or interrupted with the
 * text so far, error with none) and tool rows, or nothing when it was refused before sending
 * (the user row's error says why; its status stays 'complete'). messages.parent_id links a user
 * row to the user row of the previous turn on its path (0 for a first turn: a root) and an
 * assistant or tool row to the user row it answers; siblings (an /edit, a /retry) share a
 * parent. conversations.head_id is the user row of the live path's last turn: the live path
 * runs from it up the parents. Nothing is deleted to change the path. Databases from before
 * v6 get the links on upgrade: rows in id order, each user row starting a turn (the first
 * with parent 0), a user row whose text equals the previous turn's a sibling of it (an old
 * /retry), the last user row the head.
 * NULL means "not linked by tokterm": tokterm writes 0, never NULL, for a row without a
 * parent. A row another program inserts (the sqlite3 shell, a script) with parent_id NULL is
 * linked by a trigger (plain SQL) as flat conversations were: a user row gets the newest user
 * row of its conversation with a smaller id (0 when none) and becomes the head; any other row
 * gets that user row (NULL when none, as for a system row before the first prompt, which
 * the upgrade also leaves NULL). The loader reads NULL as 0 (store_message.parent_id: none).
 *
 * Search query language (store_search): the query is split into terms at white space; a term
 * is a substring to find, case-insensitively, anywhere in a message's content, and a message
 * must contain every term (AND). "double quotes" group words, spaces included, into one term
 * (an unbalanced quote runs to the end of the query). OR on its own, in capitals and unquoted,
 * parts alternatives: `a b OR c` finds the messages with a and b, and those with c (each once,
 * at its best rank). Nothing else is special: AND, NOT, NEAR, *, -, :, ( ) and "OR" quoted are
 * searched for literally. Terms of 3 or more characters use an FTS5
 * index: the word index (fts_words.h) when each is one whole word of 5-16 letters or digits
 * (not CJK or another script written without spaces), else the trigram index; both find the same messages (the word index counts a message's
 * length in its own pieces, so the order of hits can differ a little). Hits rank by bm25 (the newest 5,000 matches are ranked, so a word found in
 * most messages stays fast; a term's IDF is estimated from the newest 2,000 messages, exact
 * in a smaller store). A query whose terms are all 1-2 characters scans the messages
 * newest first instead (ranked newest first). Case folding covers Unicode letters; accents
 * are not folded (cafe does not find café). Answers still streaming are indexed when they
 * finish. */
#ifndef TT_STORE_H
#define TT_STORE_H
#include "base/util.h"

#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 17
#define STORE_NOT_FOUND 1                       /* returned by lookups of a missing id */
#define STORE_CACHE_KEY_LEN 32                  /* SHA-256 */
#define STORE_CACHE_DEFAULT_TTL (7 * 24 * 3600) /* seconds */
#define STORE_CACHE_DEFAULT_MAX ((int64_t)100 * 1024 * 1024) /* bytes */
#define STORE_BATCH_INTERVAL 0.25               /* seconds between streaming commits */
#define STORE_WORDS_BATCH 2000 /* queued changes a search applies to the word index at most */
#define STORE_WORDS_LONG_MAX 20 /* messages left out of it (blobs) it can do with */

struct store;

enum store_status {
    STORE_STREAMING,
    STORE_COMPLETE,
    STORE_CANCELLED,
    STORE_ERROR,
    STORE_TRUNCATED,
    STORE_INTERRUPTED,
};

/* What store_open() did, for the caller to tell the user. */
struct store_open_info {
    int created;         /* 1 when the file was new */
    /* The file was readable or writable by group or others (mode old_mode): now new_mode,
     * the owner's bits alone (0644 -> 0600; a read-only 0444 -> 0400 stays read-only) */
    unsigned old_mode, new_mode;
    int mode_fixed;
    /* The directory of the file was writable by group or others (mode old_dir_mode): now
     * new_dir_mode (0700 for a directory named "tokterm", the default data directory; else
     * only those write bits removed). A sticky directory (/tmp) is left alone. */
    unsigned old_dir_mode, new_dir_mode;
    int dir_mode_fixed;
    int from_version;    /* schema version found (0 for a new file) */
    int version;         /* schema version now (STORE_SCHEMA_VERSION) */
    int recovered;       /* answers left 'streaming' by a dead process, now 'interrupted' */
    int missing;         /* a reader's path named no file: an empty store in memory instead */
};
/* The path of an in-memory database (no file, no WAL). */
#define STORE_MEMORY ":memory:"

/* Per-message facts other than the text. Any pointer may be NULL. */
struct store_msg_info {
    const char *model;
    const char *profile;
    const char *host; /* server host name only, never a URL with credentials, never a key */
    int cached;       /* 1 when the answer was replayed from the response cache */
    /* The turn tree (see "Conversations as trees" below): for a user row, the user row of the
     * previous turn on its path; for an assistant or tool row, the user row it answers. 0 =
     * none (a first turn); saved as 0, not NULL. */
    int64_t parent_id;
    const char *error; /* a user row refused before sending: why (NULL: it was sent) */
    const char *tool;  /* a tool row: JSON naming the call it answers (schema v8) */
    const struct store_attach *att; /* a user row's attachments, saved with it (n_att) */
    size_t n_att;
};

/* Attachments (schema v10): the files sent with a user row. Each file's bytes are kept once, in
 * `blobs` keyed by their SHA-256, however many turns and conversations send them;
 * `attachments` has one row per (message, seq) with the name, kind, MIME type and image or
 * PDF facts. Deleting a message deletes its rows; a blob no row uses any more goes with its
 * last row (triggers, so the sqlite3 shell keeps it tidy too). */
struct store_attach {
    int64_t message_id;
    int seq;                   /* its place among the message's files, from 0 */
    char *name, *kind, *mime;  /* kind: "text", "image", "pdf" */
    unsigned char sha256[32];
    const unsigned char *data; /* saving: the bytes (len); loading: read into the same */
    size_t len;
    int width, height, pages;  /* 0 when unknown */
};

struct store_usage {
    int64_t prompt_tokens, completion_tokens, total_tokens; /* -1 = unknown */
    /* the model the server says answered (a router's, a dated snapshot), when it named one:
     * replaces the row's model, which was the one asked for; NULL or "": left as it is */
    const char *model;
};

struct store_timings {
    double ttft, total, tokens_per_s, dns, connect, tls; /* seconds; < 0 = unknown */
    double itl;                 /* median gap between answer tokens, seconds; < 0 = unknown */
    int retries, rate_limited;  /* attempts after the first; attempts answered 429 (< 0 unknown) */
};

/* Answers shorter than this are left out of the tokens/s percentiles: a few tokens that
 * arrive in one burst give rates of a million tokens/s that mean nothing. */
#define STORE_TPS_MIN_TOKENS TT_TPS_MIN_TOKENS /* base/util.h */
#define STORE_TPS_MIN_SECONDS TT_TPS_MIN_SECONDS

struct store_message {
    int64_t id, conversation_id;
    int64_t parent_id; /* 0 = none (a first turn's user row; a system row); NULL reads 0 */
    const char *role; /* "system", "user", "assistant" or "tool": static strings (the schema's
                         CHECK allows no other role), never freed; NULL for none */
    char *content;
    size_t content_len;
    /* NULL when unset. error: why an answer failed, or why a user row was refused before it
     * was sent (a refused turn: no assistant row answers it). */
    char *reasoning, *model, *profile, *host, *finish_reason, *error;
    enum store_status status;
    struct store_usage usage;
    struct store_timings timings;
    int cached;
    int64_t created;
    char *tool; /* tool calls (assistant) or the call answered (tool row): JSON, NULL none */
};

struct store_conversation {
    int64_t id;
    char *title, *system_prompt, *model, *profile; /* NULL when unset */
    int64_t created, updated;
    int64_t head_id; /* user row of the live path's last turn; 0: take the newest user row */
    int64_t message_count;
    struct store_message *messages; /* oldest first; NULL/0 in list results */
    size_t n_messages;
};

struct store_hit {
    int64_t conversation_id, message_id;
    char *title, *role, *model; /* NULL when unset */
    int64_t created;
    double rank;   /* bm25 (lower is better); 0 for a short-term scan */
    char *snippet; /* text around the match with the caller's markers */
};

/* The most hits one search returns: only the newest STORE_SEARCH_MAX full-text matches are
 * ranked (a few microseconds each), so memory and time stay bounded. A larger limit is an
 * error, never a silent cut. */
#define STORE_SEARCH_MAX 5000

struct store_search_opts {
    const char *model;         /* only messages with this model (NULL: any) */
    int64_t since, until;      /* created in [since, until); 0 = unbounded */
    int limit;                 /* 0 = 20; at most STORE_SEARCH_MAX */
    const char *open, *close;  /* highlight markers (NULL: "[" and "]") */
    int snippet_chars;         /* characters of context in a snippet (0 = 80) */
    int no_words;              /* 1: the trigram index only, never the word index (tests) */
    /* 1: conversations whose title holds every term and none of whose messages is a hit come
     * first, as hits with message_id 0, role "title" and the marked title as snippet (the
     * model and dates filter the conversation's model and last update) */
    int titles;
};

/* Nearest-rank percentiles of one measure over n answers (all < 0 when n = 0). */
struct store_pct {
    double p50, p90, p99;
    int64_t n;
};

/* How the uncached answers of a group went: latency, speed, retries. */
struct store_perf {
    struct store_pct ttft, itl, tps; /* seconds, seconds, tokens/s (long answers only) */
    int64_t sent;                    /* uncached answers */
    int64_t retries, rate_limited;   /* attempts after the first; attempts answered 429 */
};

struct store_model_stat {
    char *model; /* "(unknown)" when the answer has none; the host in store_stats.hosts */
    int64_t answers, prompt_tokens, completion_tokens, total_tokens;
    struct store_perf perf;
};

struct store_day_stat {
    char day[11]; /* YYYY-MM-DD, local time */
    int64_t answers, prompt_tokens, completion_tokens, total_tokens;
    struct store_perf perf;
};

struct store_stats {
    int64_t conversations, messages, answers, cached_answers;
    int64_t by_status[STORE_INTERRUPTED + 1]; /* answers per enum store_status */
    struct store_model_stat *models;          /* most tokens first */
    size_t n_models;
    struct store_day_stat *days; /* oldest first */
    size_t n_days;
    struct store_model_stat *hosts; /* per provider (the API host), most tokens first */
    size_t n_hosts;
    struct store_perf perf;         /* over every uncached answer */
    double cache_hit_rate; /* cached_answers / answers (0 without answers) */
};

struct store_cache_entry {
    char *content, *reasoning, *model, *finish_reason; /* reasoning/model/finish may be NULL */
    struct store_usage usage;
    int64_t created, last_used, hits, size;
};

struct store_cache_stats {
    int64_t entries, bytes, max_bytes, ttl, hits;
    int64_t oldest, newest; /* created times; 0 when empty */
};

struct store_summary {
    int64_t conversation_id, first_message_id, last_message_id;
    char *text, *model; /* model may be NULL */
    int64_t tokens;     /* -1 = unknown */
    int64_t created;
};

/* Rate-limit state of one API key, known to the store only by its label ("work", "key2"). */
struct store_quota {
    int64_t limit_requests, remaining_requests; /* -1 = unknown */
    int64_t limit_tokens, remaining_tokens;     /* -1 = unknown */
    double reset_requests, reset_tokens;        /* unix seconds (fractional); < 0 = unknown */
    double blocked_until;                       /* unix seconds; < 0 = not blocked */
    char *extra;                                /* free-form (e.g. JSON) or NULL */
    int64_t updated;
};

/* Open (creating with mode 0600 and its parent directory with 0700 when missing) and migrate
 * the database at path, then mark answers left 'streaming' by dead processes 'interrupted'.
 * info (may be NULL) receives what was done. Returns the store, or NULL with *err set to a
 * message for the user (caller frees) - e.g. when the file is not a tokterm database, is
 * read-only, or comes from a newer tokterm. */
struct store *store_open(const char *path, struct store_open_info *info, char **err);
/* Open the database at path for a command that only reads (ls, show, search, export,
 * stats): a read-only connection that never writes - no recovery (an answer left
 * 'streaming' by a dead process loads as 'interrupted' without being changed), no index
 * catch-up - so that it works on a full disk or a read-only file. When nothing is at path, an
 * empty store in memory (info->missing; no file is made); an empty file or an older schema is
 * opened as store_open() does. Writes on it fail. */
struct store *store_open_reader(const char *path, struct store_open_info *info, char **err);
/* Open the database for a search: as store_open() does but without recovery, so that the
 * search may bring its indexes up to date (best effort: on a full disk it searches without),
 * or, when the file cannot be written, as store_open_reader() does (then messages over 64 KiB
 * that no search has indexed yet are not found). Nothing at path: as store_open_reader(). */
struct store *store_open_searcher(const char *path, struct store_open_info *info, char **err);
/* Commit text still buffered, mark this handle's unfinished answers 'interrupted', close.
 * The WAL is left as it is (no fsync at exit), except after this handle made or upgraded the
 * schema (then it is copied into the database file, so that the file alone always holds the
 * tables) or when it holds much after writes: 256 KiB or more with a checkpoint program
 * (store_set_checkpoint_exe), which copies it and starts it over after this process is gone;
 * else over 8 MiB, copied and started over here. The newest writes may stay in the WAL: a
 * complete copy is sqlite3's ".backup" (the online backup API) or the database and its -wal
 * file copied together. */
void store_close(struct store *st);
/* The program whose `exe --checkpoint PATH` (store_checkpoint_main) store_close starts, as
 * nobody's child with an empty environment and nothing of this process open, when this
 * connection leaves 256 KiB or more in the WAL: the copy into the database and its fsyncs then
 * happen after the user's command, and the next open finds the WAL started over. NULL (the
 * default, and when exe cannot be run): the close copies a WAL over 8 MiB itself. */
void store_set_checkpoint_exe(struct store *st, const char *exe);
/* The main of `tokterm --checkpoint PATH` (argv: PATH): at the normal CPU priority, copies the
 * WAL of the database PATH into it (a passive checkpoint: other processes' writes go on), then
 * starts the WAL over with one small write; tries again, waiting longer each time, for up to
 * 10 s while other processes write or read the WAL's frames. Never creates a file. 0 when the
 * WAL was started over, 1 when not, 2 for bad arguments. */
int store_checkpoint_main(int argc, char **argv);
/* Tests only: called by store_checkpoint_main once it started the WAL over, before it gives up
 * its lock (others then see it running). */
extern void (*store_checkpoint_test_hook)(const char *path);
/* Group the writes that follow, up to the matching store_batch_end, into one transaction (one
 * commit, each page written to the WAL once: the prompt, its conversation and the answer's
 * row before a request leaves; the answer, its cache entry and the quota after). Each write
 * still succeeds or fails on its own (a savepoint). Nested calls count. Nothing is visible
 * to other processes, nor durable, before store_batch_end; the write lock is held until then,
 * so keep a batch short. 0, or -1 (nothing grouped: the writes commit one by one). */
int store_batch_begin(struct store *st);
/* Commit the batch (at the outermost end). 0, or -1 when the commit failed: every write of
 * the batch is lost (store_error says why). */
int store_batch_end(struct store *st);
/* When the WAL holds more than 1 MB (as this connection's last commit left it: nothing
 * before its first commit), copy it into the database on a thread and connection of its own
 * (a passive checkpoint: it never blocks this process's writes), so that the copy and its
 * fsyncs overlap the wait for an answer instead of a commit. Nothing while the last one still
 * runs; the next store_message_finish (whose commit then starts the WAL over) or store_close
 * waits for it. */
void store_checkpoint_async(struct store *st);
/* Read the database file through a memory map while on (PRAGMA mmap_size), for a read of a
 * few hundred pages made once: a resume's walk over the newest turns. Its pages are then
 * neither copied into SQLite's page cache nor faulted in as fresh memory a 4 KiB page at a
 * time (the kernel maps the file's cached pages 16 at a fault). Off again after it, so that
 * what a long run reads later stays in the bounded page cache. */
void store_mapped_reads(struct store *st, int on);
/* Compile, ahead of it, what the end of an answer runs (its row; with cache, its cache entry;
 * with tokens, its token counts), so that the end, which the user waits for, compiles no
 * SQL: called while the request is on the wire or libcurl still loads. Statements are kept
 * for the life of st, so a second call costs nothing. */
void store_warm_answer(struct store *st, int cache, int tokens);
/* store_close for a process that ends right after (_exit, no leak checker): everything the
 * close writes is written, but SQLite's memory, descriptors and locks are left to the exit
 * (freeing the parsed schema and the statements piece by piece cost ~0.4M instructions after
 * a one-shot's answer). */
void store_close_at_exit(struct store *st);
/* How many statements st has compiled (TOKTERM_DEBUG_STORE prints it; tests). */
unsigned store_statements_compiled(const struct store *st);
/* Message of the last failure on st; valid until the next call on st. Never NULL. */
const char *store_error(const struct store *st);

/* Replace the clocks (monotonic seconds for batching, unix seconds for timestamps); NULL
 * restores util_now()/util_epoch(). For tests and benchmarks. */
void store_set_clock(struct store *st, double (*mono)(void *), int64_t (*epoch)(void *), void *ud);
/* Schema version of the open database. */
int store_schema_version(struct store *st);

/* "complete", "streaming", ... for a status; "?" when out of range. */
const char *store_status_name(enum store_status s);
/* Status for a name, or -1. */
int store_status_parse(const char *name);

/* Mark every answer still 'streaming' whose writing process is gone as 'interrupted' (tokterm
 * was killed mid-stream). Returns how many, or -1. store_open() already calls it. */
int store_recover(struct store *st);

/* New conversation; title may be NULL (it is then taken from the first user message). Returns
 * its id (> 0) or -1. */
int64_t store_conversation_new(struct store *st, const char *title, const char *system_prompt,
                               const char *model, const char *profile);
/* The same with the role it is held with ("": none; NULL: not known, as for conversations
 * saved before schema 17). */
int64_t store_conversation_new_role(struct store *st, const char *title,
                                    const char *system_prompt, const char *model,
                                    const char *profile, const char *role);
/* Change the title (not the updated time). Returns 0, STORE_NOT_FOUND or -1. */
int store_conversation_rename(struct store *st, int64_t id, const char *title);
/* Where conversation id's newest answer (not a failed one) came from: its host
 * (messages.host) and profile, each malloc'd or NULL (none saved). 0, or -1 (an error). */
int store_conversation_where(struct store *st, int64_t id, char **host, char **profile);
/* What conversation id was last held with: its role (NULL: none), the model its newest
 * prompt on the live path asked for and the host it went to (NULL: none saved), each
 * malloc'd. 0, or -1 (an error). */
int store_conversation_settings(struct store *st, int64_t id, char **role, char **model,
                                char **host);
/* Set the conversation's role (NULL: none). 0, STORE_NOT_FOUND or -1. */
int store_conversation_set_role(struct store *st, int64_t id, const char *role);
/* Change the system prompt, model and profile (NULL leaves that field alone). 0, 1 or -1. */
int store_conversation_update(struct store *st, int64_t id, const char *system_prompt,
                              const char *model, const char *profile);
/* Delete a conversation with its messages and summaries, and leave no copy of their text in
 * any file: the cached answers that equal one of its answers go too, the freed pages are
 * zeroed (secure_delete; pages already free are overwritten), both full-text indexes are
 * merged so that no segment keeps its words, and the WAL is emptied and truncated. Returns 0,
 * STORE_NOT_FOUND or -1 (also when another process kept the WAL from being emptied within
 * 10 s: the conversation is deleted, but its text may stay in the WAL until it is reused). */
int store_conversation_delete(struct store *st, int64_t id);
/* Load a conversation and all its messages (oldest first, every branch of the tree, with
 * parent_id; head_id set) into *out (free with store_conversation_free). Returns 0,
 * STORE_NOT_FOUND or -1. */
int store_conversation_load(struct store *st, int64_t id, struct store_conversation **out);
/* The same with only what the turns need (id, role, status, model, finish_reason, error,
 * content, parent_id; the other columns empty): resuming a long conversation reads less. */
int store_conversation_load_turns(struct store *st, int64_t id, struct store_conversation **out);
/* The newest rows of a conversation, read newest first (along the table, through the index
 * when other conversations' rows are many in between), for a resume that sends only the
 * newest turns. enough(ud, row, tokens, live) is called for each row read (tokens: its count
 * stored in encoding for its length, or -1; live: the row is on the path from the head, not
 * of a turn /edit or /retry replaced): nonzero stops the read at the next user row once the
 * head was read (so that every row from that one on is read), negative gives up. Into *w: the
 * rows read (w->conv, oldest first, as store_conversation_load_turns gives them), their stored
 * counts (by id), and what was not read. Returns 0, STORE_WALK_FULL (the read cannot stand
 * for the full load: no saved head, a row still streaming, enough gave up), STORE_NOT_FOUND or
 * -1. Free with store_walk_free. */
#define STORE_WALK_FULL 2
struct store_walk {
    struct store_conversation *conv;
    struct store_tokens *tokens;
    size_t n_tokens;
    int complete;               /* the walk reached the start of the path: nothing is older */
    int64_t first_id;           /* the oldest user row read */
    int64_t older_uncounted;    /* rows of the conversation not read (older turns, other
                                   branches) without a count in encoding, */
    long older_max_tokens;      /* and the largest count of the conversation */
};
int store_conversation_walk(struct store *st, int64_t id, const char *encoding,
                            int (*enough)(void *ud, const struct store_message *m, long tokens,
                                          int live),
                            void *ud, struct store_walk *w);
void store_walk_free(struct store_walk *w);
/* Newest (last updated) conversations first, at most limit (<= 0: all), without messages.
 * *out is an array of *n (free with store_conversation_list_free). Returns 0 or -1. */
int store_conversation_list(struct store *st, int limit, struct store_conversation **out,
                            size_t *n);
/* The user row of conversation conv's live path's last turn into *head (0: none saved).
 * Returns 0, STORE_NOT_FOUND (no such conversation) or -1. */
int store_conversation_head(struct store *st, int64_t conv, int64_t *head);
/* Make head_user_id (a user row of conversation conv) the last turn of the live path, and
 * touch the conversation's updated time. Returns 0, STORE_NOT_FOUND (no such conversation, or
 * that row is not one of its user rows) or -1. */
int store_conversation_set_head(struct store *st, int64_t conv, int64_t head_user_id);
/* The most recently updated conversation that has at least one answered turn (an assistant
 * row that is complete or truncated, or has text) into *id. Returns 0, STORE_NOT_FOUND (none)
 * or -1. */
int store_conversation_latest_answered(struct store *st, int64_t *id);
/* The conversations updated after id (newer in -c's order): how many, and the newest's id
 * (0 when none). -c passes over them when they hold no answer. */
int store_conversation_newer(struct store *st, int64_t id, long *n, int64_t *newest);
/* Ids of all conversations, oldest first (caller frees *ids). Returns 0 or -1. */
int store_conversation_ids(struct store *st, int64_t **ids, size_t *n);
void store_conversation_free(struct store_conversation *c);
/* The attachments of conversation id's messages (every row's, with their bytes), by message
 * id and seq, into *out (free with store_attach_free). 0, or -1 (store_error). */
int store_attach_list(struct store *st, int64_t conversation_id, struct store_attach **out,
                      size_t *n);
/* The same without the bytes (data NULL, len the size): what a reader lists, however large
 * the files. */
int store_attach_names(struct store *st, int64_t conversation_id, struct store_attach **out,
                       size_t *n);
/* Those of its rows from message id from_id on: work in the attachments of those rows, not in
 * the conversation's length (a lean resume reads its newest rows' only). */
int store_attach_list_from(struct store *st, int64_t conversation_id, int64_t from_id,
                           struct store_attach **out, size_t *n);
/* Those of one message. */
int store_attach_get(struct store *st, int64_t message_id, struct store_attach **out,
                     size_t *n);
void store_attach_free(struct store_attach *v, size_t n);
void store_conversation_list_free(struct store_conversation *list, size_t n);

/* Add a finished message (a user prompt: call it before the request leaves) and commit it at
 * once. role: "system", "user", "assistant" or "tool". content is len bytes (raw, as received).
 * info's parent_id and error are saved with it (a refused prompt: a user row with error). A
 * user row becomes the conversation's head (a new turn is the live path's last), in the same
 * transaction. The first user message titles an untitled conversation. Returns the message id
 * or -1. */
int64_t store_message_add(struct store *st, int64_t conversation_id, const char *role,
                          const char *content, size_t len, const struct store_msg_info *info);
/* Commit an empty assistant answer with status 'streaming'; info->parent_id is the user row
 * it answers. Returns its id or -1. */
int64_t store_message_begin(struct store *st, int64_t conversation_id,
                            const struct store_msg_info *info);
/* Buffer len bytes of answer text (or of reasoning with the _reasoning variant) and commit
 * every buffered text in one transaction once STORE_BATCH_INTERVAL has passed since the last
 * commit. Returns 1 when it committed, 0 when it only buffered, -1 on error. */
int store_message_append(struct store *st, int64_t msg_id, const char *text, size_t len);
int store_message_append_reasoning(struct store *st, int64_t msg_id, const char *text,
                                   size_t len);
/* Commit buffered text of msg_id now (0: of every streaming answer). Returns 0 or -1. */
int store_message_flush(struct store *st, int64_t msg_id);
/* note(ud, path) is called when a write that waits (store_begin: the prompt before its request
 * leaves, a full part, the answer's end, the cache) has waited SQLite's busy timeout (5 s) for
 * the write lock another process holds, once per write: a scripted run says why it is quiet
 * (until 2026-12 it waited up to 30 s without a word, the request not sent yet). */
void store_set_busy_note(struct store *st, void (*note)(void *ud, const char *path), void *ud);
/* The batch store_flush_deadline says is due, committed when the write lock is free now; held
 * by another writer, the text stays buffered and the deadline moves a batch on. 0 or -1. */
int store_message_flush_due(struct store *st);
/* Monotonic time (store clock) by which buffered text should be committed - call
 * store_message_flush(st, 0) then; 0 when nothing is buffered. For a poll() timeout. */
double store_flush_deadline(const struct store *st);
/* Commit buffered text and the final facts of an answer: status (not STORE_STREAMING),
 * finish_reason, usage, timings and error (each may be NULL). Returns 0, STORE_NOT_FOUND or
 * -1. */
int store_message_finish(struct store *st, int64_t msg_id, enum store_status status,
                         const char *finish_reason, const struct store_usage *usage,
                         const struct store_timings *timings, const char *error);
/* The whole text of an answer as its caller holds it: every byte given to
 * store_message_append (text) and store_message_append_reasoning (reasoning), in order. */
struct store_whole {
    const char *text;
    size_t len;
    const char *reasoning;
    size_t reasoning_len;
};
/* store_message_finish for a caller that holds the whole text (whole, borrowed): the row is
 * written from it in one piece and the copy buffered here is released first, so that a long
 * answer is in memory twice (whole and SQLite's record), not three times. When whole is not
 * what was appended, the same as store_message_finish. */
int store_message_finish_whole(struct store *st, int64_t msg_id, const struct store_whole *whole,
                               enum store_status status, const char *finish_reason,
                               const struct store_usage *usage,
                               const struct store_timings *timings, const char *error);
/* Record the tool calls an answer asked for (JSON, see struct store_message.tool) on row
 * msg_id. 0 or -1. */
int store_message_set_tool(struct store *st, int64_t msg_id, const char *tool);
/* Free the strings of a message (not m itself). */
void store_message_clear(struct store_message *m);

/* The reasoning saved with answer row id (its column, then parts not yet folded into it), or
 * NULL when it has none. A conversation's turns are loaded without it (store_conversation_
 * load_turns: a resume of thousands of rows); the chat shows it for the turns it draws.
 * Caller frees. */
char *store_message_reasoning(struct store *st, int64_t id);
/* What the chat's footer of answer row id says: when it was made, its times, its tokens (the
 * server's count), whether the cache gave it. The turns are loaded without them (as without
 * the reasoning); the chat reads them for the turns it draws, so that a resumed screen shows
 * what the live one did. 0, or -1 (m's fields then as store_turn_row leaves them). */
int store_message_facts(struct store *st, int64_t id, struct store_message *m);

/* Bring the search indexes up to date now (a search does it first anyway, a batch at a
 * time): the answers queued for the trigram index and every change queued for the word
 * index. 0, or -1 when the queue is left (another process held the write lock too long). */
int store_search_index(struct store *st);

/* What is wrong with a search query (no term, or an OR with nothing on one side), or NULL.
 * *or_open (when not NULL) gets 1 for an OR with nothing on one side: a query still being
 * typed, as "timeout OR". */
const char *store_query_error(const char *query, int *or_open);

/* Full-text search (query language above). *out gets *n hits, best first (free with
 * store_hits_free). A query store_query_error refuses is an error. Returns 0 or -1. */
int store_search(struct store *st, const char *query, const struct store_search_opts *opts,
                 struct store_hit **out, size_t *n);
void store_hits_free(struct store_hit *hits, size_t n);

/* Statistics over answers created in [since, until) (0 = unbounded), of model only when
 * model is not NULL. Free with store_stats_clear. Returns 0 or -1. */
int store_stats(struct store *st, int64_t since, int64_t until, const char *model,
                struct store_stats *out);
void store_stats_clear(struct store_stats *s);

/* One answer as store_answers_each gives it: strings valid during the call only. */
struct store_answer_row {
    const char *model, *host, *status; /* model and host may be NULL */
    int cached;
    double ttft, itl, total, dns, connect, tls; /* seconds; < 0 = unknown */
    int64_t prompt_tokens, completion_tokens;   /* -1 = unknown */
    int64_t retries, rate_limited;              /* 0 when unknown */
};
/* Call fn for each answer created in [since, until) (0 = unbounded), of model only when not
 * NULL, oldest first. Returns 0 or -1. */
int store_answers_each(struct store *st, int64_t since, int64_t until, const char *model,
                       void (*fn)(const struct store_answer_row *, void *), void *ud);

/* SHA-256 of a canonical request text: the response-cache key. */
void store_cache_key(const char *canonical, size_t len, unsigned char key[STORE_CACHE_KEY_LEN]);
/* The same key for the canonical text given in n pieces (parts[i], lens[i] bytes each), hashed
 * one after the other: a request body of megabytes is neither copied nor allocated. */
void store_cache_key_parts(const char *const *parts, const size_t *lens, size_t n,
                           unsigned char key[STORE_CACHE_KEY_LEN]);
/* Set the cache's time to live (seconds, 0 = forever) and size cap (bytes, 0 = unlimited).
 * Defaults: STORE_CACHE_DEFAULT_TTL, STORE_CACHE_DEFAULT_MAX. */
void store_cache_set_limits(struct store *st, int64_t ttl, int64_t max_bytes);
/* Look up a cached answer younger than the TTL (an expired one is dropped). Read-only: the
 * hit's last-use time and counter are queued and written with this handle's next write
 * transaction (or at close). Returns 0 and fills *out (free with store_cache_entry_clear),
 * STORE_NOT_FOUND on a miss, or -1. */
int store_cache_get(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                    struct store_cache_entry *out);
/* Cache a complete answer: status must be STORE_COMPLETE and finish_reason must not be
 * "length", "content_filter" or "error" (else -1: refused). Replaces an entry with the same
 * key, drops expired entries and evicts least recently used ones above the size cap. reasoning,
 * model, finish_reason and usage may be NULL. Returns 0 or -1. */
int store_cache_put(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                    enum store_status status, const char *content, const char *reasoning,
                    const char *model, const char *finish_reason,
                    const struct store_usage *usage);
/* One answer for store_cache_put_all(): the arguments of store_cache_put(), and rc (out): 0
 * stored, -1 refused or not written. */
struct store_cache_put {
    const unsigned char *key; /* STORE_CACHE_KEY_LEN bytes */
    enum store_status status;
    const char *content, *reasoning, *model, *finish_reason;
    const struct store_usage *usage;
    int rc;
};
/* Cache n answers in one write transaction (one commit for all: a batch's answers that
 * finished together), each under the rules of store_cache_put(); a refused one (rc -1, its
 * reason in store_error) does not keep the others out. Returns how many were stored, or -1
 * when the write failed (nothing stored, every rc -1). */
int store_cache_put_all(struct store *st, struct store_cache_put *items, size_t n);
/* Cache the saved answer msg_id under key: the entry refers to the row (schema v14), its text
 * is neither copied nor read (nothing is loaded into memory; the entry goes when the row is
 * deleted or its text changes). Same rules as store_cache_put: a complete answer only. bytes: the size
 * of its content and reasoning when the caller knows it (else -1), so that an answer too large
 * for the cache is refused without reading it back. Returns 0, or -1 (refused or failed;
 * store_error says which). */
int store_cache_put_message(struct store *st, const unsigned char key[STORE_CACHE_KEY_LEN],
                            int64_t msg_id, int64_t bytes);
/* Largest answer the cache takes, bytes (0: up to the whole cap, the default). tokterm sets
 * 1/100 of the cap, so that one huge answer never evicts a hundred ordinary ones. */
void store_cache_set_entry_max(struct store *st, int64_t max_bytes);
/* Entry count, bytes, limits, total hits. Returns 0 or -1. */
int store_cache_stats(struct store *st, struct store_cache_stats *out);
/* Drop every cached answer. Returns the number dropped or -1. */
int64_t store_cache_clear(struct store *st);
void store_cache_entry_clear(struct store_cache_entry *e);

/* Token counts of messages (schema v7): message id, the length of the text counted, its
 * tokens in one encoding. */
struct store_tokens {
    int64_t id;
    int64_t bytes;
    long tokens;
};
/* The bytes of a row's entry that stands for no count: a row off the live path (a turn /edit
 * or /retry replaced) that was never counted (the run that streamed it was killed). It is
 * never sent, so it needs none; the entry says it was seen, so that the rows without a count
 * (the token mark, a lean resume's test of the rows it did not read) do not count it for
 * ever. Its tokens are 0, and no text has this length: a turn that makes the row live again
 * counts it as it is sent, and stores that count in its place. */
#define STORE_TOKENS_OFF_PATH (-1)
/* The counts stored for a conversation's messages in encoding, by message id (free *out).
 * Returns 0 or -1. */
int store_tokens_get(struct store *st, int64_t conversation_id, const char *encoding,
                     struct store_tokens **out, size_t *n);
/* Store (replace) counts of a conversation's messages in encoding, in one transaction. */
int store_tokens_put(struct store *st, int64_t conversation_id, const char *encoding,
                     const struct store_tokens *v, size_t n);

/* Store (replace) the summary of messages first_id..last_id of a conversation. model may be
 * NULL, tokens -1. Returns 0 or -1. */
int store_summary_put(struct store *st, int64_t conversation_id, int64_t first_id,
                      int64_t last_id, const char *text, const char *model, int64_t tokens);
/* The summary of exactly that range into *out (free with store_summary_clear). Returns 0,
 * STORE_NOT_FOUND or -1. */
int store_summary_get(struct store *st, int64_t conversation_id, int64_t first_id,
                      int64_t last_id, struct store_summary *out);
/* All summaries of a conversation, by last_message_id then first_message_id (free with
 * store_summaries_free). Returns 0 or -1. */
int store_summary_list(struct store *st, int64_t conversation_id, struct store_summary **out,
                       size_t *n);
void store_summary_clear(struct store_summary *s);
void store_summaries_free(struct store_summary *list, size_t n);

/* Save the rate-limit state of profile + key label (a name, never the key: a label that looks
 * like a secret is refused). Returns 0 or -1. */
int store_quota_put(struct store *st, const char *profile, const char *key_label,
                    const struct store_quota *q);
/* Load it into *out (free with store_quota_clear). Returns 0, STORE_NOT_FOUND or -1. */
int store_quota_get(struct store *st, const char *profile, const char *key_label,
                    struct store_quota *out);
void store_quota_clear(struct store_quota *q);

/* ---- the provider's batches (`batch --remote`, schema v11) ----
 * hash: STORE_REMOTE_HASH_LEN bytes naming one part of an input (its requests and where they
 * go). put saves (or replaces) the batch id it became; get copies it into id (size bytes)
 * and returns 0, STORE_NOT_FOUND or -1; del forgets it (0 or -1). */
#define STORE_REMOTE_HASH_LEN 32
int store_remote_put(struct store *st, const unsigned char *hash, const char *api,
                     const char *base_url, const char *batch_id, long requests);
int store_remote_get(struct store *st, const unsigned char *hash, char *id, size_t size);
int store_remote_del(struct store *st, const unsigned char *hash);

#endif
