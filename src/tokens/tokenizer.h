/* tokenizer.h - BPE token counting identical to OpenAI's tiktoken (o200k_base, cl100k_base).
 *
 * Rank tables come from data/<encoding>.bin (made once by tools/convert-bpe.js) and are mmap'ed
 * and used without parsing. Lookup order for data files: $TOKTERM_DATADIR (only there when set),
 * then the installed pkgdatadir (TT_DATADIR), then the source tree's data/ (TT_SRCDIR).
 *
 * Text is bytes. Invalid UTF-8 is handled the way a JS caller of tiktoken sees it: every maximal
 * ill-formed subsequence becomes U+FFFD (WHATWG TextDecoder rules) before encoding, so the ids
 * equal tiktoken.encode(new TextDecoder().decode(bytes)). Special-token text such as
 * "<|endoftext|>" is encoded as ordinary text (tiktoken's encode_ordinary).
 *
 * Long runs are split, as tiktoken's users do (Meta's Llama 3 tokenizer cuts runs at 25,000
 * characters before calling tiktoken): a pre-tokenizer piece (a run of letters, of white space
 * or of punctuation) longer than TOKENIZER_PIECE_MAX bytes is cut into pieces of that size
 * (at a character start), each merged alone. Text without such a run gives tiktoken's ids
 * exactly; past it the count may differ from tiktoken's by about one token per cut. So the
 * memory of encoding is O(TOKENIZER_PIECE_MAX) (a few MiB) whatever the text, besides the
 * ids themselves, and time stays linear.
 *
 * A struct tokenizer is immutable after tokenizer_open(): it may be shared between threads. */
#ifndef TT_TOKENIZER_H
#define TT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

struct tokenizer;

/* Longest pre-tokenizer piece, in bytes; longer ones are cut (see above). */
#define TOKENIZER_PIECE_MAX 65536

/* A growable array of token ids. */
struct tok_ids {
    uint32_t *ids;
    size_t len;
    size_t cap;
};
#define TOK_IDS_INIT {NULL, 0, 0}

/* Free the ids array and reset *v to empty. */
void tok_ids_free(struct tok_ids *v);

/* Open the encoding "o200k_base" or "cl100k_base" (mmap of <datadir>/<name>.bin).
 * Returns NULL on failure and sets *err (when err != NULL) to a message the caller frees. */
struct tokenizer *tokenizer_open(const char *encoding, char **err);

/* 0 when the encoding is known and its table file is found (nothing is mapped or read), else
 * -1 with *err set as tokenizer_open would. */
int tokenizer_available(const char *encoding, char **err);

/* Unmap and free (NULL is fine). */
void tokenizer_close(struct tokenizer *tok);

/* Encoding name, e.g. "o200k_base"; owned by tok. */
const char *tokenizer_name(const struct tokenizer *tok);

/* Number of mergeable ranks (ids 0 .. n-1). */
size_t tokenizer_vocab_size(const struct tokenizer *tok);

/* Append the token ids of text[0..len) to out. */
void tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
                      struct tok_ids *out);

/* Number of tokens of text[0..len) (same as the length tokenizer_encode() would produce). */
size_t tokenizer_count(const struct tokenizer *tok, const char *text, size_t len);

/* The ids of text[0..len), handed to fn in order a batch at a time (a few thousand ids per
 * call): the same ids as tokenizer_encode(), in memory that does not grow with len. Returns
 * the number of ids. */
size_t tokenizer_encode_each(const struct tokenizer *tok, const char *text, size_t len,
                             void (*fn)(void *arg, const uint32_t *ids, size_t n), void *arg);

/* The first head ids and the last tail ids (tail >= 1) of text[0..len), the same as those of
 * tokenizer_encode(), appended to *h and *t: only the pieces that hold the two ends are
 * merged, the tail's from a piece start near the end (tokenizer_piece_start), else from the
 * pieces found one after another after the head's (a long message shortened for a request:
 * its ends, not all of it). Returns 0, or -1 with nothing appended when text is not valid
 * UTF-8 or has too few pieces for the two ends to be apart: then encode it whole. */
int tokenizer_encode_ends(const struct tokenizer *tok, const char *text, size_t len,
                          size_t head, size_t tail, struct tok_ids *h, struct tok_ids *t);

/* 1 when text[0..len) is split (by either encoding, for any len) with a piece starting at i,
 * known from the bytes around i alone (a newline before a letter or a digit, a space between
 * a letter or a digit and a letter); 0 when that is not known. tokenizer_encode_ends starts
 * its tail at one. */
int tokenizer_piece_start(const char *text, size_t len, size_t i);

/* Append the bytes of the given ids to out. Returns 0, or -1 when an id is out of range (the
 * bytes of the ids before it are appended). */
int tokenizer_decode(const struct tokenizer *tok, const uint32_t *ids, size_t n, struct buf *out);

/* ---- models ---------------------------------------------------------------------------- */

struct tok_model_info {
    const char *prefix;   /* the matching row of data/models.tsv (static storage) */
    const char *encoding; /* "o200k_base" or "cl100k_base" (static storage); NULL for a model
                             without a public tokenizer (data/models.tsv's "-": Claude,
                             Gemini): its counts are estimates */
    long context_window;  /* tokens; 0 = unknown */
    long max_output;      /* default max output tokens; 0 = unknown */
};

/* Look model up in data/models.tsv by longest prefix, after dropping a leading "ft:" and any
 * "provider/" path (so "openai/gpt-4o-mini" and "ft:gpt-4o:org:x" work). Returns 0 and fills
 * *info, or -1 when no prefix matches (or the table is missing). Thread-safe. */
int tokenizer_model_info(const char *model, struct tok_model_info *info);

/* The encoding for model (static string), or NULL when unknown or without a public tokenizer:
 * the caller then uses o200k_base and marks its counts approximate. */
const char *tokenizer_encoding_for_model(const char *model);

/* ---- chat ------------------------------------------------------------------------------ */

struct tok_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* NUL-terminated; NULL = empty */
    const char *name;    /* optional participant name; NULL = none */
};

/* Prompt tokens of a chat message list as the chat-completions API bills it: per message 3 +
 * tokens(role) + tokens(content), plus tokens(name) + 1 when a name is set, plus 3 for the
 * reply primer (<|start|>assistant<|message|>). Constants from OpenAI's cookbook "How to count
 * tokens with tiktoken" (num_tokens_from_messages, gpt-3.5-turbo-0613 / gpt-4 and later). */
size_t tokenizer_chat_count(const struct tokenizer *tok, const struct tok_chat_msg *msgs,
                            size_t n);

/* ---- streaming ------------------------------------------------------------------------- */

struct tok_stream;

/* A counter for text that arrives in pieces (e.g. a streamed reply). Free with
 * tokenizer_stream_free(). tok must outlive the stream. */
struct tok_stream *tokenizer_stream_new(const struct tokenizer *tok);

/* Add delta[0..len) (any byte split, also inside a UTF-8 sequence). Only the last unfinished
 * pre-token piece is kept and re-scanned (at most about 1.25 x TOKENIZER_PIECE_MAX bytes of
 * it, plus the delta; rescans wait until it has grown by a quarter, so a long piece fed in
 * small deltas costs O(1) per byte); finished pieces are counted once. */
void tokenizer_stream_feed(struct tok_stream *st, const char *delta, size_t len);

/* Tokens of all bytes fed so far: always equal to tokenizer_count() of their concatenation. */
size_t tokenizer_stream_count(struct tok_stream *st);

/* Forget everything fed so far (keeps the tokenizer). */
void tokenizer_stream_reset(struct tok_stream *st);

void tokenizer_stream_free(struct tok_stream *st);

#endif
