/* conv.h - one conversation: a tree of turns, and the live path through it.
 *
 * A turn is a user message and its outcome: an answer (complete, cut short by the server,
 * interrupted with the text so far), a failure (the error, no answer) or a refusal before
 * anything was sent (budget, no key). /edit and /retry do not change a turn: they add a
 * sibling and move the live path to it, so earlier versions stay saved as alternatives.
 *
 * The live path is what the transcript shows and what the next request carries: every turn
 * whose outcome is an answer contributes its user message and the answer, in order (so a
 * request always alternates user/assistant after the system prompt); failed and refused turns
 * are shown and saved but never sent. Every front end reads this one model: the chat, -p,
 * batch, resume (-c, --conversation, the browser), show and export.
 *
 * In the store (schema v6): a user row's parent_id is the user row of the previous turn on
 * its path, an answer's parent_id is its user row, and conversations.head_id is the user row
 * of the last turn of the live path. */
#ifndef TT_CONV_H
#define TT_CONV_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/attach.h"

struct store;
struct store_conversation;
struct store_message;
struct tool_call;

/* One step of a turn's tool rounds, between its prompt and its answer, in order: the model's
 * message that asked for tools, then a result per call; the next round's request carries
 * them. In the store (schema v8) each is a row under the turn's user row: an assistant row
 * with messages.tool {"calls":[...]}, and a tool row naming the call it answers. */
struct conv_step {
    int64_t id;               /* store id (> 0), or 0: not saved */
    int result;               /* 0: the model asked for tools; 1: a tool's result */
    char *text;               /* the model's text with its calls (may be ""), or the result */
    size_t len;
    struct tool_call *calls;  /* result 0: the calls (id, name, wire, args) */
    size_t n_calls;
    char *thinking;           /* result 0, anthropic: the signed thinking blocks (JSON); NULL */
    char *reasoning;          /* result 0, a round of this run: its reasoning text for --json
                                 (the store keeps it on the round's row); NULL: none, or loaded */
    char *call_id;            /* result 1: the call it answers: the provider's id, */
    char *name, *wire;        /*   tokterm name and wire name */
    int is_error;             /* result 1: an error result (failed, invalid, refused) */
    char *sent;               /* result 1 longer than CONV_TOOL_SENT_MAX: what the model gets
                                 (conv_step_cut); NULL: text itself */
    size_t sent_len;
    long tokens;              /* tokens of what the model gets (sent, else text) in the
                                 session's encoding; 0: not known (or nothing to count) */
    int tokens_saved;         /* the count is in the store (keyed by the row's length, len) */
};

/* A tool result longer than this goes to the model cut: its head and last
 * CONV_TOOL_SENT_TAIL bytes around "[... N bytes of this tool result cut by tokterm ...]"
 * (the store keeps it whole). */
#define CONV_TOOL_SENT_MAX ((size_t)64 << 10)
#define CONV_TOOL_SENT_TAIL ((size_t)8 << 10)
/* Make st->sent when st is a result longer than CONV_TOOL_SENT_MAX (cut on characters). */
void conv_step_cut(struct conv_step *st);

enum conv_outcome {
    CONV_PENDING,     /* the request is in flight */
    CONV_ANSWERED,    /* a complete answer */
    CONV_CUT,         /* cut short by the server (finish_reason length / content_filter) */
    CONV_INTERRUPTED, /* cancelled, dropped or broken off: the text so far (may be empty) */
    CONV_FAILED,      /* the request failed: an error, no answer */
    CONV_REFUSED,     /* never sent (budget, context, no key) */
};

struct conv_turn {
    int64_t user_id;   /* store id of the user row (> 0), or a serial of this process (< 0) */
    int64_t answer_id; /* store id of the answer row (> 0), a serial (< 0), or 0: none */
    char *prompt;
    size_t prompt_len;
    char *answer;      /* NULL: no answer text */
    size_t answer_len;
    char *error;       /* why it failed, was refused or was interrupted; NULL */
    char *model;       /* the model that answered; NULL */
    enum conv_outcome outcome;
    int version;       /* 1-based: which of the turn's versions (siblings) this is */
    int n_versions;
    long prompt_tokens, answer_tokens; /* their texts' tokens in the session's encoding when
                                          known (stored, or counted once); 0 = unknown */
    unsigned tokens_saved; /* 1: prompt_tokens is in the store, 2: answer_tokens is */
    struct conv_step *steps; /* the tool rounds before the answer, oldest first */
    size_t n_steps, cap_steps;
    struct attach *att;    /* the files sent with the prompt (-f, the chat), n_att of them:
                              part of the user message, saved once by SHA-256 with its row */
    size_t n_att;
    char *content;         /* the user message as sent when text goes with the prompt: the
                              text files' fenced blocks (and PDFs' text for a server that takes
                              no documents), then the prompt; NULL: the prompt alone. Made by
                              the session (conv_turn_content), dropped by conv_copy */
    size_t content_len;
    int content_pdf_text;  /* content holds the PDFs' text */
};

struct conv {
    int64_t id;        /* saved conversation, 0 until it is saved */
    char *system;      /* system prompt, NULL */
    struct conv_turn *turns; /* the live path, oldest first */
    size_t n, cap;
    int64_t serial;    /* last serial given to an unsaved message */
    int next_version;  /* set by conv_fork: the version count the next turn shows */
    int64_t *off;      /* the rows a load read that are off the live path (the turns /edit
                          or /retry replaced, with their answers and tool rows): their ids,
                          oldest first, so that each gets a count (session_turns_take) */
    size_t n_off, cap_off;
};

void conv_init(struct conv *c);
void conv_free(struct conv *c);
/* Drop every turn (a new conversation; id 0). The system prompt stays. */
void conv_clear(struct conv *c);
/* Replace the system prompt (NULL or "" removes it). */
void conv_set_system(struct conv *c, const char *system);
/* Copy src's live path and system prompt into dst (cleared first). */
void conv_copy(struct conv *dst, const struct conv *src);

/* Add a new pending turn with prompt (n bytes) at the end of the live path; returns it (valid
 * until the next call that adds a turn). */
struct conv_turn *conv_push(struct conv *c, const char *prompt, size_t n);
/* Give turn t the attachments of l (moved: l is left empty). */
void conv_attach(struct conv_turn *t, struct attach_list *l);
/* The user message of turn t as sent (t->content, made once), with the PDFs as their text when
 * pdf_text (a server that takes no documents), its length in *len. Returns NULL when that is
 * the prompt alone (*err NULL), or NULL with a message in *err (caller frees) when a PDF's
 * text cannot be had. */
const char *conv_turn_content(struct conv_turn *t, int pdf_text, size_t *len, char **err);
/* The last turn of the live path, or NULL. */
struct conv_turn *conv_last(struct conv *c);
/* Settle turn t: outcome, answer text (n bytes; NULL for none), error and model (each NULL
 * or copied). */
void conv_settle(struct conv_turn *t, enum conv_outcome o, const char *answer, size_t n,
                 const char *error, const char *model);
/* /edit and /retry of turn i: the live path ends before it, and the turn that replaces it is
 * one more version of it. Returns the version count the replacement will show, or -1 when i
 * is out of range. The next conv_push takes that version. */
int conv_fork(struct conv *c, size_t i);

/* A new empty step at the end of t's steps. */
struct conv_step *conv_step_add(struct conv_turn *t);
/* The JSON of a step for the store's messages.tool (caller frees), and a step's tool part
 * read back from it (0, or -1 when it is not a step's JSON). */
char *conv_step_json(const struct conv_step *st);
int conv_step_parse(struct conv_step *st, const char *json);

/* 1 when turn t carries its user message and answer into later requests. */
int conv_turn_sent(const struct conv_turn *t);
/* Store id of the user row a turn at index at (c->n: the next one) hangs under: the last
 * saved turn before it on the live path; 0 for none. */
int64_t conv_parent_id(const struct conv *c, size_t at);
/* "answered", "cut", "interrupted", "failed", "refused", "pending". */
const char *conv_outcome_name(enum conv_outcome o);
/* "version V of N": how the chat, show and export name one of a turn's versions (/edit,
 * /retry). Writes into buf (CONV_VERSION_MAX bytes) and returns it. */
#define CONV_VERSION_MAX 48
const char *conv_version_text(char *buf, int version, int versions);

/* Outcome of a saved turn from its rows: status/finish/content of the answer (has_answer 0
 * when there is none) and the user row's error. */
enum conv_outcome conv_outcome_saved(int has_answer, int status, const char *finish,
                                     size_t answer_len, const char *user_error);
/* 1 when a turn whose answer is the saved row m is sent (conv_turn_sent of its outcome). */
int conv_row_sends(const struct store_message *m);
/* Where each row of a loaded conversation stands in its tree (store_conversation_load's rows,
 * oldest first). */
struct conv_rowinfo {
    long user;         /* index of the row's user row (itself for a user row), -1: none */
    long answer;       /* for a user row: index of its answer row, -1: none */
    int version;       /* which version of its turn (1-based), 0 when not in a turn */
    int versions;      /* how many versions that turn has */
    int live;          /* on the live path */
    int turn;          /* 1-based turn number: on the live path its place; a replaced
                          version's, the turn it was a version of (its depth in the tree) */
    int sent;          /* its turn goes into later requests (conv_turn_sent): answered, cut,
                        * interrupted with some text, or its tool rounds ran to their
                        * results */
};
/* One conv_rowinfo per row of sc (caller frees); *n_turns = turns on the live path. */
struct conv_rowinfo *conv_rows(const struct store_conversation *sc, size_t *n_turns);
/* Rebuild the live path of a loaded conversation (all its rows, as store_conversation_load
 * returns them) into c (cleared first): from the head (or the newest user row) up through the
 * parents. system overrides the saved system prompt when not NULL/"". */
void conv_from_saved(struct conv *c, const struct store_conversation *sc, const char *system);
/* Load conversation id (0: the most recent with an answered turn) from st into c. Returns 0,
 * or -1 with a message in *err (caller frees). */
int conv_load(struct conv *c, struct store *st, int64_t id, const char *system, char **err);
/* Give the turns of c (loaded from st: conv_from_rows) their saved attachments. 0, or -1
 * (store_error). conv_load does it. */
int conv_attach_load(struct conv *c, struct store *st);
struct store_attach;
/* Append the stored attachment a to l (its bytes copied). */
void conv_attach_from(struct attach_list *l, const struct store_attach *a);
/* *a described from a saved row's facts (its kind, name, type, size, image size, pages),
 * without its bytes: for a line that lists it (show, export, the browser's read view). */
void conv_attach_facts(struct attach *a, const struct store_attach *sa);
/* conv_load's steps for another way of reading: *id 0 becomes the most recent conversation
 * with an answered turn (0, or -1 with *err); the message for a store code of id. */
int conv_resolve_id(struct store *st, int64_t *id, char **err);
char *conv_load_error(struct store *st, int rc, int64_t id);
/* conv_from_saved for rows the caller owns (store_conversation_walk's): the turns take their
 * texts. */
void conv_from_rows(struct conv *c, struct store_conversation *sc, const char *system);

/* The transcript in a canonical text form, one block per turn (tests, the model-based test's
 * reference, `show`): "user: ...", then "assistant: ..." or "failed: ..." / "refused: ...". */
void conv_transcript(const struct conv *c, struct buf *out);

#endif
