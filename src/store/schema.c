/* schema.c - the schema and its migrations, the database file (created 0600, modes
 * tightened), and the recovery of answers whose writing process died. */
#include "config.h"
#include "store/store_int.h"

#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- schema */

/* The columns of messages as v1 made them, before content (v15 makes them again, in its
 * rebuild). */
#define STORE_MESSAGES_V1_COLUMNS                                                                  \
    "  id INTEGER PRIMARY KEY,\n"                                                                  \
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"         \
    "  role TEXT NOT NULL CHECK(role IN ('system','user','assistant','tool')),\n"                  \
    "  status TEXT NOT NULL DEFAULT 'complete' CHECK(status IN ('streaming','complete',\n"         \
    "    'cancelled','error','truncated','interrupted')),\n"                                       \
    "  created INTEGER NOT NULL,\n"                                                                \
    "  model TEXT,\n"                                                                              \
    "  profile TEXT,\n"                                                                            \
    "  host TEXT,\n"                                                                               \
    "  finish_reason TEXT,\n"                                                                      \
    "  prompt_tokens INTEGER,\n"                                                                   \
    "  completion_tokens INTEGER,\n"                                                               \
    "  total_tokens INTEGER,\n"                                                                    \
    "  ttft REAL,\n"                                                                               \
    "  total_time REAL,\n"                                                                         \
    "  tokens_per_s REAL,\n"                                                                       \
    "  dns_time REAL,\n"                                                                           \
    "  connect_time REAL,\n"                                                                       \
    "  tls_time REAL,\n"                                                                           \
    "  cached INTEGER NOT NULL DEFAULT 0,\n"                                                       \
    "  error TEXT,\n"                                                                              \
    "  writer TEXT,\n"                                                                             \
    "  reasoning TEXT,\n"

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
    STORE_MESSAGES_V1_COLUMNS
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

/* v6: a conversation is a tree of turns (store.h, "Conversations as trees"). A user row's
 * parent_id is the user row of the previous turn on its path (0 for a first turn), an
 * assistant or tool row's the user row it answers; conversations.head_id is the live path's
 * last user row. Columns added, not a rebuild (the status CHECK stays: a refused turn is a
 * user row with an error). The rows already there are linked by store_tree_backfill, then the
 * index is made.
 * tokterm never inserts a NULL parent_id; another program (the sqlite3 shell, a script) does,
 * and messages_tree_ai links such a row as a flat conversation was, from where the live path
 * ends: a user row follows the head (else the newest user row before it; 0: none) and becomes
 * the head, any other row answers that prompt (NULL: none). Plain SQL, so that any program that writes the messages fires it. messages_user
 * finds that prompt in one step: through messages_conversation, each answer a script adds
 * after a prompt walked back over all the answers before it (10,000 answers to one prompt:
 * 24 s instead of 1.3 s). */
static const char store_schema_v6[] =
    "ALTER TABLE messages ADD COLUMN parent_id INTEGER;\n"
    "ALTER TABLE conversations ADD COLUMN head_id INTEGER;\n"
    "CREATE INDEX messages_user ON messages(conversation_id, id) WHERE role = 'user';\n"
    "CREATE TRIGGER messages_tree_ai AFTER INSERT ON messages\n"
    "WHEN new.parent_id IS NULL BEGIN\n"
    "  UPDATE messages SET parent_id = coalesce((SELECT h.id FROM conversations c\n"
    "    JOIN messages h ON h.id = c.head_id WHERE c.id = new.conversation_id\n"
    "    AND h.conversation_id = new.conversation_id AND h.role = 'user' AND h.id < new.id),\n"
    "    (SELECT id FROM messages\n"
    "    WHERE conversation_id = new.conversation_id AND role = 'user' AND id < new.id\n"
    "    ORDER BY id DESC LIMIT 1), CASE WHEN new.role = 'user' THEN 0 END)\n"
    "  WHERE id = new.id;\n"
    "  UPDATE conversations SET head_id = new.id\n"
    "  WHERE id = new.conversation_id AND new.role = 'user';\n"
    "END;\n";

/* v7: each message's token count per encoding, so that resuming a conversation tokenises only
 * what is new (issue 14). Written when a message's count is first known (its plan, its
 * stream), and for the rows of older versions lazily, by the first plan that counts them. Keyed
 * by conversation first: a resume reads its counts in one range. bytes: the length of the text
 * counted (a count whose message changed length is not used; -1, STORE_TOKENS_OFF_PATH: a row
 * off the live path that was never counted, seen); the triggers forget the counts of a message
 * that is deleted or rewritten. */
static const char store_schema_v7[] =
    "CREATE TABLE message_tokens(\n"
    "  conversation_id INTEGER NOT NULL,\n"
    "  message_id INTEGER NOT NULL,\n"
    "  encoding TEXT NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  tokens INTEGER NOT NULL,\n"
    "  PRIMARY KEY(conversation_id, message_id, encoding)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TRIGGER message_tokens_ad AFTER DELETE ON messages BEGIN\n"
    "  DELETE FROM message_tokens WHERE conversation_id = old.conversation_id\n"
    "    AND message_id = old.id;\n"
    "END;\n"
    "CREATE TRIGGER message_tokens_au AFTER UPDATE OF content, conversation_id ON messages BEGIN\n"
    "  DELETE FROM message_tokens WHERE conversation_id = old.conversation_id\n"
    "    AND message_id = old.id;\n"
    "END;\n";

/* v8: tool calls and results (issue 17). tool is JSON: on an assistant row that asked for
 * tools, {"calls":[{"id","name","wire","arguments"}]} (and "thinking", Anthropic's signed
 * blocks, to send back); on a tool row, {"id","name","wire","error"}: the call it answers. */
static const char store_schema_v8[] = "ALTER TABLE messages ADD COLUMN tool TEXT;\n";

/* v9: how an answer's exchange went, for `tokterm stats` (issue 18): itl, the median gap
 * between its tokens (seconds); retries, the attempts after the first; rate_limited, the
 * attempts answered 429. NULL on older rows: unknown, left out of the percentiles. */
static const char store_schema_v9[] = "ALTER TABLE messages ADD COLUMN itl REAL;\n"
                                      "ALTER TABLE messages ADD COLUMN retries INTEGER;\n"
                                      "ALTER TABLE messages ADD COLUMN rate_limited INTEGER;\n";

/* v10: attachments (issue 16). A file's bytes once in blobs, keyed by SHA-256, however many
 * turns and conversations send it; one attachments row per file of a user row. A message
 * deleted takes its rows along, and the last row of a blob takes the blob. */
static const char store_schema_v10[] =
    "CREATE TABLE blobs(\n"
    "  sha256 BLOB PRIMARY KEY,\n"
    "  size INTEGER NOT NULL,\n"
    "  data BLOB NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE attachments(\n"
    "  message_id INTEGER NOT NULL,\n"
    "  seq INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL,\n"
    "  kind TEXT NOT NULL,\n"
    "  mime TEXT NOT NULL,\n"
    "  sha256 BLOB NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  width INTEGER NOT NULL DEFAULT 0,\n"
    "  height INTEGER NOT NULL DEFAULT 0,\n"
    "  pages INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY(message_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE INDEX attachments_sha256 ON attachments(sha256);\n"
    "CREATE TRIGGER attachments_message_ad AFTER DELETE ON messages BEGIN\n"
    "  DELETE FROM attachments WHERE message_id = old.id;\n"
    "END;\n"
    "CREATE TRIGGER attachments_blob_ad AFTER DELETE ON attachments BEGIN\n"
    "  DELETE FROM blobs WHERE sha256 = old.sha256\n"
    "    AND NOT EXISTS (SELECT 1 FROM attachments WHERE sha256 = old.sha256);\n"
    "END;\n";

/* v11: the provider's batches a `batch --remote` created (issue 18), one row per part of the
 * input, keyed by the SHA-256 of the part's requests and where they went (never a key), so the
 * same command run again picks the running batch up instead of paying for a second one. */
static const char store_schema_v11[] =
    "CREATE TABLE remote_batches(\n"
    "  hash BLOB PRIMARY KEY,\n"
    "  api TEXT NOT NULL,\n"
    "  base_url TEXT NOT NULL,\n"
    "  batch_id TEXT NOT NULL,\n"
    "  requests INTEGER NOT NULL,\n"
    "  created INTEGER NOT NULL\n"
    ") WITHOUT ROWID;\n";

/* v12: how far each conversation is counted, per encoding (issue 14): every message of it with
 * an id up to through_id has a count in message_tokens, none larger than max_tokens. A lean
 * resume asks this one row whether the turns it left out are all counted, instead of counting
 * the conversation's rows and counts (O(history) each run). Moved forward by store_tokens_put
 * (over the rows after through_id only); the triggers take it back wherever it could be wrong:
 * a count forgotten at or below it (its message deleted or rewritten), a message added at or
 * below it, a larger count written below it. */
static const char store_schema_v12[] =
    "CREATE TABLE token_marks(\n"
    "  conversation_id INTEGER NOT NULL,\n"
    "  encoding TEXT NOT NULL,\n"
    "  through_id INTEGER NOT NULL,\n"
    "  max_tokens INTEGER NOT NULL,\n"
    "  PRIMARY KEY(conversation_id, encoding)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TRIGGER token_marks_tokens_ad AFTER DELETE ON message_tokens BEGIN\n"
    "  DELETE FROM token_marks WHERE conversation_id = old.conversation_id\n"
    "    AND encoding = old.encoding AND through_id >= old.message_id;\n"
    "END;\n"
    "CREATE TRIGGER token_marks_tokens_ai AFTER INSERT ON message_tokens BEGIN\n"
    "  UPDATE token_marks SET max_tokens = new.tokens WHERE conversation_id = new.conversation_id\n"
    "    AND encoding = new.encoding AND through_id >= new.message_id\n"
    "    AND max_tokens < new.tokens;\n"
    "END;\n"
    "CREATE TRIGGER token_marks_messages_ai AFTER INSERT ON messages BEGIN\n"
    "  DELETE FROM token_marks WHERE conversation_id = new.conversation_id\n"
    "    AND through_id >= new.id;\n"
    "END;\n"
    "CREATE TRIGGER token_marks_messages_au AFTER UPDATE OF conversation_id ON messages BEGIN\n"
    "  DELETE FROM token_marks WHERE conversation_id = new.conversation_id\n"
    "    AND through_id >= new.id;\n"
    "END;\n";

/* v13: the rows a scripted resume reads, packed (issue 14): per conversation and encoding,
 * blocks of up to 1,024 rows newest first (id, parent, role, status, the stored count, the
 * texts the walk takes), each holding every row of the conversation with lo < id <= hi, the
 * blocks chained (one's lo is the next older one's hi). store_conversation_walk reads the rows
 * newer than the top block from messages and the rest from the blocks: a few blob reads
 * instead of stepping thousands of rows. Written by the walk itself (in its transaction, when
 * 256 or more rows were read from the table); the triggers drop every block at or above a row
 * that is added, changed or deleted, or whose count changes, so a block is never stale (the
 * next walk reads those rows from the table again and packs them). */
static const char store_schema_v13[] =
    "CREATE TABLE resume_blocks(\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  encoding TEXT NOT NULL,\n"
    "  lo INTEGER NOT NULL,\n"
    "  hi INTEGER NOT NULL,\n"
    "  data BLOB NOT NULL\n"
    ");\n"
    "CREATE UNIQUE INDEX resume_blocks_hi ON resume_blocks(conversation_id, encoding, hi);\n"
    "CREATE TRIGGER resume_blocks_messages_ai AFTER INSERT ON messages BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id = new.conversation_id\n"
    "    AND hi >= new.id;\n"
    "END;\n"
    "CREATE TRIGGER resume_blocks_messages_au AFTER UPDATE ON messages BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id IN (old.conversation_id,\n"
    "    new.conversation_id) AND hi >= min(old.id, new.id);\n"
    "END;\n"
    "CREATE TRIGGER resume_blocks_messages_ad AFTER DELETE ON messages BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id = old.conversation_id\n"
    "    AND hi >= old.id;\n"
    "END;\n"
    "CREATE TRIGGER resume_blocks_tokens_ai AFTER INSERT ON message_tokens BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id = new.conversation_id\n"
    "    AND encoding = new.encoding AND hi >= new.message_id;\n"
    "END;\n"
    "CREATE TRIGGER resume_blocks_tokens_au AFTER UPDATE ON message_tokens BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id IN (old.conversation_id,\n"
    "    new.conversation_id) AND hi >= min(old.message_id, new.message_id);\n"
    "END;\n"
    "CREATE TRIGGER resume_blocks_tokens_ad AFTER DELETE ON message_tokens BEGIN\n"
    "  DELETE FROM resume_blocks WHERE conversation_id = old.conversation_id\n"
    "    AND encoding = old.encoding AND hi >= old.message_id;\n"
    "END;\n";

/* v14: a cached answer that is a saved message is a reference to its row, not a copy of its
 * text (issue 14: a 1 MB answer was written twice, its row and its cache entry, and the copy
 * read the row back first). message_id names the row and content is '' then (NOT NULL since
 * v1); a lookup reads the text from the row. The entry goes with the row: deleted, or its text
 * changed. */
static const char store_schema_v14[] =
    "ALTER TABLE response_cache ADD COLUMN message_id INTEGER;\n"
    "CREATE INDEX response_cache_message ON response_cache(message_id)\n"
    "  WHERE message_id IS NOT NULL;\n"
    "CREATE TRIGGER response_cache_message_ad AFTER DELETE ON messages BEGIN\n"
    "  DELETE FROM response_cache WHERE message_id = old.id;\n"
    "END;\n"
    "CREATE TRIGGER response_cache_message_au AFTER UPDATE OF id, content, reasoning\n"
    "  ON messages BEGIN\n"
    "  DELETE FROM response_cache WHERE message_id = old.id;\n"
    "END;\n";

/* v15: messages with content as its last column (store_content_last does it). The row of a
 * long answer is then SQLite's record of it ending in the text, which the store can have SQLite
 * make in the very block the text streamed into (sqlite_dl_lend with ends_record): no copy of
 * the text, and no fresh memory for one (a 9.9 MB answer: 10 MB copied into five huge pages
 * fresh from the kernel, 0.6 ms warm, up to 16 ms when the host had taken the pages back). */
static const char store_schema_v15[] = "-- store_content_last\n";

/* v16: conversation ids are never given twice. An id is max(id) + 1, which gave the id of a
 * deleted newest conversation to the next one: a script's `--conversation 8` or a note went on
 * with a stranger's thread. id_marks keeps the highest id ever given (the insert takes the
 * larger of it and max(id), plus one). Written so that it can run again on a database that has
 * it (tests take stores back a version by setting user_version). */
static const char store_schema_v16[] =
    "CREATE TABLE IF NOT EXISTS id_marks(name TEXT PRIMARY KEY, high INTEGER NOT NULL)\n"
    "  WITHOUT ROWID;\n"
    "INSERT OR IGNORE INTO id_marks VALUES('conversations',\n"
    "  coalesce((SELECT max(id) FROM conversations), 0));\n"
    "DROP TRIGGER IF EXISTS conversations_id_mark;\n"
    "CREATE TRIGGER conversations_id_mark AFTER INSERT ON conversations BEGIN\n"
    "  UPDATE id_marks SET high = new.id WHERE name = 'conversations' AND high < new.id;\n"
    "END;\n";

/* v17: a conversation's role (core/role.h), so that a resume sends what the live session
 * sent (until 2026-12 a resume kept the role's system prompt but lost its settings). The
 * column is added by store_role_column only where it is missing: tests take stores back a
 * version by setting user_version. */
static const char store_schema_v17[] = "-- store_role_column\n";

static int store_role_column(struct store *st)
{
    int have = 0;
    if (store_pragma_int(st, "SELECT count(*) FROM pragma_table_info('conversations') WHERE "
                             "name = 'role'", &have) != 0)
        return store_fail(st, "cannot upgrade the database to schema version 17");
    return have ? 0 : store_exec(st, "ALTER TABLE conversations ADD COLUMN role TEXT",
                                 "cannot upgrade the database to schema version 17");
}

/* A message's new parent, collected by store_tree_backfill. */
struct store_link {
    int64_t id, parent;
};

static int store_link_cmp(const void *a, const void *b)
{
    const struct store_link *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The links of a backfill, sorted by id, for tt_link(). */
struct store_links {
    const struct store_link *v;
    size_t n;
};

/* SQL function tt_link(id): the parent store_tree_backfill found for message id, or NULL. */
static void store_sql_link(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const struct store_links *l = sqlite3_user_data(ctx);
    int64_t id = sqlite3_value_int64(argv[0]);
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < l->n && l->v[lo].id == id)
        sqlite3_result_int64(ctx, l->v[lo].parent);
    else
        sqlite3_result_null(ctx);
}

/* Run sql with tt_link() answering from links[0..n) (sorted by id) inside the migration: one
 * statement over the table instead of one per row (0.6 s -> 0.3 s for 100,000 rows). 0 or
 * -1. */
static int store_links_write(struct store *st, const char *sql, const struct store_link *links,
                             size_t n)
{
    struct store_links l = {links, n};
    int rc = sqlite3_create_function(st->db, "tt_link", 1, SQLITE_UTF8, &l, store_sql_link,
                                     NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    sqlite3_create_function(st->db, "tt_link", 1, SQLITE_UTF8, NULL, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : store_fail(st, "cannot upgrade the database to schema "
                                                "version 6");
}

/* Link the rows of a database from before v6, inside the migration's transaction. Per
 * conversation, rows by id: each user row starts a turn; the rows after it (answers, tool
 * results) get it as parent. A user row's parent is the previous turn's user row (0 for the
 * first), except when its text is the same (an old /retry duplicated the turn, and resume
 * sent both): then it is a sibling (the previous turn's parent). A row before the first user
 * row (a system prompt) keeps NULL. The last user row is the head. One pass in index
 * order, then the updates in id order; nothing is deleted. 0 or -1. */
static int store_tree_backfill(struct store *st)
{
    static const char q_rows[] =
        "SELECT id, conversation_id, role = 'user', CASE WHEN role = 'user' THEN content END "
        "FROM messages ORDER BY conversation_id, id";
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, q_rows, -1, &s, NULL) != SQLITE_OK)
        return store_fail(st, "cannot upgrade the database to schema version 6");
    struct store_link *links = NULL, *heads = NULL;
    size_t n_links = 0, cap_links = 0, n_heads = 0, cap_heads = 0;
    struct buf prev = BUF_INIT; /* the text of the conversation's last user row */
    int64_t conv = 0, user = 0, user_parent = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0), c = sqlite3_column_int64(s, 1), parent;
        if (c != conv) { /* a new conversation: no turn yet */
            conv = c;
            user = user_parent = 0;
        }
        if (sqlite3_column_int(s, 2)) {
            const void *t = sqlite3_column_blob(s, 3);
            size_t len = (size_t)sqlite3_column_bytes(s, 3);
            int same = user && prev.len == len && memcmp(buf_str(&prev), t ? t : "", len) == 0;
            parent = same ? user_parent : user;
            user = id;
            user_parent = parent;
            buf_reset(&prev);
            buf_append(&prev, t ? t : "", len);
            if (n_heads && heads[n_heads - 1].id == c) {
                heads[n_heads - 1].parent = id;
            } else {
                XGROW(heads, n_heads + 1, cap_heads);
                heads[n_heads++] = (struct store_link){c, id};
            }
        } else {
            parent = user;
        }
        if (parent || sqlite3_column_int(s, 2)) { /* a first turn's user row: 0, a root */
            XGROW(links, n_links + 1, cap_links);
            links[n_links++] = (struct store_link){id, parent};
        }
    }
    sqlite3_finalize(s);
    buf_free(&prev);
    int ret = -1;
    if (rc != SQLITE_DONE) {
        store_fail(st, "cannot upgrade the database to schema version 6");
        goto out;
    }
    if (n_links) /* a new database has no rows: links is NULL, which qsort may not take */
        qsort(links, n_links, sizeof *links, store_link_cmp); /* heads are sorted already */
    if (store_links_write(st, "UPDATE messages SET parent_id = tt_link(id) "
                              "WHERE tt_link(id) IS NOT NULL", links, n_links) != 0 ||
        store_links_write(st, "UPDATE conversations SET head_id = tt_link(id) "
                              "WHERE tt_link(id) IS NOT NULL", heads, n_heads) != 0 ||
        store_exec(st, "CREATE INDEX messages_parent ON messages(parent_id)",
                   "cannot upgrade the database to schema version 6") != 0)
        goto out;
    ret = 0;
out:
    free(links);
    free(heads);
    return ret;
}

/* messages as of v14, content moved to the end. */
#define STORE_MESSAGES_COLUMNS                                                                 \
    "id, conversation_id, role, status, created, model, profile, host, finish_reason, "        \
    "prompt_tokens, completion_tokens, total_tokens, ttft, total_time, tokens_per_s, "         \
    "dns_time, connect_time, tls_time, cached, error, writer, reasoning, parent_id, tool, "    \
    "itl, retries, rate_limited, content"

/* v15: rebuild messages with content last. Its indexes and triggers (SQLite drops them with
 * the table) are made again from their own SQL, in the order they were made; ids are kept, so
 * the full-text indexes (keyed by id, reading content by name) and every table that refers to
 * a message by id stay as they are. A table with a column not in STORE_MESSAGES_COLUMNS is
 * left as it is. store_migrate runs this with foreign keys off: with them
 * on, dropping the old table would first delete the message_parts rows that refer to it.
 * Inside the migration's transaction. 0 or -1. */
static int store_content_last(struct store *st)
{
    static const char what[] = "cannot upgrade the database to schema version 15";
    static const char q_schema[] = "SELECT sql FROM sqlite_schema WHERE tbl_name = 'messages' "
                                   "AND type IN ('index', 'trigger') AND sql IS NOT NULL "
                                   "ORDER BY rowid";
    static const char q_rebuild[] =
        "CREATE TABLE messages_v15(\n" STORE_MESSAGES_V1_COLUMNS
        "  parent_id INTEGER,\n"
        "  tool TEXT,\n"
        "  itl REAL,\n"
        "  retries INTEGER,\n"
        "  rate_limited INTEGER,\n"
        "  content TEXT NOT NULL DEFAULT '');\n"
        "INSERT INTO messages_v15(" STORE_MESSAGES_COLUMNS ") SELECT " STORE_MESSAGES_COLUMNS
        " FROM messages;\n"
        "DROP TABLE messages;\n"
        "ALTER TABLE messages_v15 RENAME TO messages;\n";
    /* A column this tokterm does not know (added by hand): the table is left as it is, and
     * a long answer's record is made past its text instead (store_fold_write asks). */
    static const char q_other[] = "SELECT count(*) FROM pragma_table_info('messages') WHERE "
                                  "instr(', ' || ?1 || ',', ', ' || name || ',') = 0";
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, q_other, -1, &s, NULL) != SQLITE_OK)
        return store_fail(st, what);
    sqlite3_bind_text(s, 1, STORE_MESSAGES_COLUMNS, -1, SQLITE_STATIC);
    int other = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (other != 0)
        return other > 0 ? 0 : store_fail(st, what);
    if (sqlite3_prepare_v2(st->db, q_schema, -1, &s, NULL) != SQLITE_OK)
        return store_fail(st, what);
    char **sql = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        XGROW(sql, n + 1, cap);
        sql[n++] = xstrdup((const char *)sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    int ret = rc == SQLITE_DONE ? store_exec(st, q_rebuild, what) : store_fail(st, what);
    for (size_t i = 0; i < n; i++) {
        if (ret == 0)
            ret = store_exec(st, sql[i], what);
        free(sql[i]);
    }
    free(sql);
    return ret;
}
#undef STORE_MESSAGES_COLUMNS

/* Migration steps: store_migrations[v] turns schema v-1 into v: its SQL, then its C part (may
 * be NULL). Add the next version here. */
static const struct {
    const char *sql;
    int (*fill)(struct store *st);
} store_migrations[STORE_SCHEMA_VERSION + 1] = {
    {NULL, NULL},
    {store_schema_v1, NULL},
    {store_schema_v2, NULL},
    {store_schema_v3, NULL},
    {store_schema_v4, NULL},
    {store_schema_v5, NULL},
    {store_schema_v6, store_tree_backfill},
    {store_schema_v7, NULL},
    {store_schema_v8, NULL},
    {store_schema_v9, NULL},
    {store_schema_v10, NULL},
    {store_schema_v11, NULL},
    {store_schema_v12, NULL},
    {store_schema_v13, NULL},
    {store_schema_v14, NULL},
    {store_schema_v15, store_content_last},
    {store_schema_v16, NULL},
    {store_schema_v17, store_role_column},
};

/* store_migrate's transaction: the steps from the version found (*from) to
 * STORE_SCHEMA_VERSION. 0 or -1 (rolled back). */
static int store_migrate_steps(struct store *st, int *from)
{
    int v = 0;
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
        if (store_exec(st, store_migrations[next].sql, what) != 0 ||
            (store_migrations[next].fill && store_migrations[next].fill(st) != 0))
            return store_rollback(st);
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
    if (store_exec(st, sql, "cannot record the schema version") != 0)
        return store_rollback(st);
    return store_commit(st);
}

/* Bring the schema to STORE_SCHEMA_VERSION, one step per version, in one write transaction
 * (re-checking the version inside it: another process may have just migrated). */
int store_migrate(struct store *st, int *from)
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
    /* Foreign keys off while the steps run (a no-op inside a transaction): v15 drops and makes
     * again the table that message_parts refers to. No step deletes a row. */
    if (store_exec(st, "PRAGMA foreign_keys = OFF", "cannot upgrade the database") != 0)
        return -1;
    int rc = store_migrate_steps(st, from);
    if (store_exec(st, "PRAGMA foreign_keys = ON", "cannot upgrade the database") != 0)
        rc = -1;
    if (rc != 0)
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

/* ---------------------------------------------------------------- writer identity */

unsigned long long store_proc_start(long pid, int *zombie)
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

int store_writer_alive(const char *writer)
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

/* ---------------------------------------------------------------- the file */

/* Tighten a file's mode to 0600; returns the old mode when it was looser, else 0. */
/* Take group and other bits off path: its mode before (0 when it had none or is left);
 * *now its mode after. The owner's bits stay (until 2026-12 the mode became 0600: a database
 * made read-only, 0444, was made writable again by a read-only command such as ls). */
static unsigned store_fix_mode(const char *path, unsigned *now)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077) == 0)
        return 0;
    mode_t want = sb.st_mode & 0700;
    if (!(want & 0400))
        want = 0600; /* no read bit of the owner's (0044): the file tokterm made, readable */
    if (chmod(path, want) != 0)
        return 0;
    *now = (unsigned)want;
    return (unsigned)(sb.st_mode & 07777);
}

/* A directory others may write to lets them swap the database or its WAL for their own.
 * Tighten one we own that is group/world-writable and not sticky (a shared /tmp is left
 * alone): the data directory (named "tokterm") to 0700, any other (a --db elsewhere, such as
 * the home directory) by its write bits only. */
static void store_fix_dir_mode(const char *dir, const struct stat *sb,
                               struct store_open_info *info)
{
    if (!S_ISDIR(sb->st_mode) || !(sb->st_mode & 022) || (sb->st_mode & S_ISVTX) ||
        sb->st_uid != geteuid())
        return;
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    mode_t want = strcmp(base, "tokterm") == 0 ? 0700 : (sb->st_mode & 07777 & ~(mode_t)022);
    if (chmod(dir, want) != 0)
        return;
    info->old_dir_mode = (unsigned)(sb->st_mode & 07777);
    info->new_dir_mode = (unsigned)want;
    info->dir_mode_fixed = 1;
}

int store_prepare_file(const char *path, struct store_open_info *info, char **err)
{
    char *dir = xstrdup(path), *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        struct stat dsb;
        if (stat(dir, &dsb) != 0) {
            if (util_mkdir_p(dir, 0700) != 0) {
                *err = xasprintf("cannot create the directory %s: %s", dir, strerror(errno));
                free(dir);
                return -1;
            }
        } else {
            store_fix_dir_mode(dir, &dsb, info);
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

void store_fix_modes(const char *path, struct store_open_info *info)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < TT_ARRAY_LEN(suffixes); i++) {
        char *p = xasprintf("%s%s", path, suffixes[i]);
        unsigned now = 0, old = store_fix_mode(p, &now); /* SQLite gives the WAL files the
                                                             main file's mode */
        if (old && !info->mode_fixed) {
            info->old_mode = old;
            info->new_mode = now;
            info->mode_fixed = 1;
        }
        free(p);
    }
}

/* ---------------------------------------------------------------- recovery */

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
        XGROW(dead, n + 1, cap);
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
