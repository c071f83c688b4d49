/* tool.h - function calling's shared data, no I/O: what a tool is, a call, a result, and the
 * interface a source of tools (an MCP server, the built-in "shell", the test tools) fills in.
 * Pure, so any folder from proto/ up may use it: src/mcp/ (or wherever the MCP client lives)
 * implements a struct tool_source; core/tools.h keeps the registry of sources, maps names for
 * the wire, checks arguments, asks for approval and runs calls off the UI thread.
 *
 * Names. A tool's tokterm name is "SOURCE.TOOL" ("fs.read_file", "shell.run", "test.echo"):
 * the source's name, a dot, the tool's own name as the source lists it. OpenAI function names
 * must match ^[a-zA-Z0-9_-]{1,64}$, so what the model sees (the wire name) is derived by
 * tool_wire_name: "." becomes "__", any other byte outside [A-Za-z0-9_-] becomes "_", and a
 * name over 64 bytes keeps 55 bytes and "_" plus 8 hex digits of a hash of the whole name
 * (the registry keeps both and maps back; a collision gets the hash suffix too).
 *
 * Arguments are JSON text, assembled exactly as the model streamed them; tool_schema_check
 * validates them against the tool's input schema (a JSON Schema subset) before anything runs. */
#ifndef TT_TOOL_H
#define TT_TOOL_H
#include <stddef.h>

#include "base/buf.h"

/* One tool a source offers. */
struct tool_def {
    char *name;        /* the source's own name for it ("read_file"); the registry prefixes
                          the source's name */
    char *description; /* for the model; NULL: none */
    char *schema;      /* JSON text of its input schema (an object schema); NULL: any object */
};

/* A call the model made (or a user typed: `tokterm mcp call`). */
struct tool_call {
    char *id;          /* the provider's call id ("call_abc", "toolu_01...", Gemini: made up
                          by tokterm "gemini-N"): results are paired with it */
    char *name;        /* tokterm name "fs.read_file" (NULL while unknown) */
    char *wire;        /* the name the model used ("fs__read_file") */
    char *args;        /* JSON text, as sent ("{}" when the model sent nothing) */
    size_t args_len;
};

/* What a call gave back. */
struct tool_result {
    int is_error;        /* the tool failed, the call was invalid, refused or cancelled: the
                            model is told so */
    struct buf content;  /* text for the model (MCP text content joined; other content
                            described) */
    char *structured;    /* MCP structuredContent as JSON text, NULL: none */
    int truncated;       /* content was cut at the source's size cap (said in content too) */
    char *note;          /* for the user only, never sent (an MCP server's stderr), or NULL */
};

/* How a running call is watched (handed to tool_source.call). */
struct tool_ctx {
    /* Set to non-zero (by another thread) to ask the call to stop: the source should return
     * soon with is_error and "cancelled" (MCP: send notifications/cancelled). Read it with
     * __atomic_load_n(cancel, __ATOMIC_ACQUIRE). */
    int *cancel;
    double timeout;      /* seconds the call may take; 0: the source's default (60) */
    size_t max_bytes;    /* cap on the result's content (bounded memory); 0: 16 MiB */
    /* Progress for the status bar (MCP notifications/progress), from the calling thread;
     * total < 0 when unknown, message NULL when none. May be NULL. */
    void (*progress)(void *ud, double progress, double total, const char *message);
    void *ud;
};

/* A source of tools. The registry calls list once (lazily: on first use) and call for each
 * call, never two calls of one source at the same time unless the source says it can
 * (parallel); call runs on a worker thread, never on the UI thread. */
struct tool_source {
    const char *name;  /* "fs": the prefix of its tools' tokterm names; [A-Za-z0-9_-] */
    const char *kind;  /* "mcp", "builtin", "test": for `mcp list` and messages */
    void *self;        /* the source's own state */
    int parallel;      /* 1: call may run for several calls at once */
    /* Its tools: *defs (allocated, caller frees with tool_defs_free) and *n. 0, or -1 with a
     * message in err ("fs: the server exited with status 1"). May run on a worker thread
     * (core/tools.h: tools_load_start); when *cancel becomes non-zero (another thread sets it;
     * cancel may be NULL: never) it should give up soon with -1 (MCP: the server is stopped). */
    int (*list)(struct tool_source *src, const int *cancel, struct tool_def **defs, size_t *n,
                struct buf *err);
    /* Run tool (its own name, no prefix) with args (JSON text, already checked against the
     * schema). Fills out (zeroed by the caller); returns 0 when out holds a result (an error
     * result too), -1 when the source itself failed (out->content says why; is_error set). */
    int (*call)(struct tool_source *src, const char *tool, const char *args, size_t args_len,
                const struct tool_ctx *ctx, struct tool_result *out);
    /* Stop and free (MCP: close stdin, wait a grace period, then kill). NULL: nothing to do. */
    void (*close)(struct tool_source *src);
};

void tool_defs_free(struct tool_def *defs, size_t n);
void tool_call_free(struct tool_call *c);   /* its strings; not c itself */
void tool_call_copy(struct tool_call *dst, const struct tool_call *src);
void tool_result_free(struct tool_result *r);
/* Set r to an error result with message msg (the model reads it). */
void tool_result_error(struct tool_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The wire name of tokterm name name (see "Names" above) into out (>= 65 bytes). */
void tool_wire_name(const char *name, char *out, size_t size);

/* Check args (n bytes of JSON text) against schema (JSON text of a JSON Schema; NULL or "":
 * args must be an object). Knows type (incl. arrays of types and "integer"), required,
 * properties, additionalProperties (false or a schema), enum, const, items, minItems,
 * maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
 * anyOf, oneOf, allOf; other keywords are ignored; nesting deeper than 32 is an error.
 * Returns 0, or -1 with one line in err for the model and the user:
 * "arguments are not valid JSON", "$.path: required property \"x\" is missing",
 * "$.n: expected integer, got string". */
int tool_schema_check(const char *schema, const char *args, size_t n, struct buf *err);

/* 1 when name matches glob pattern pat ("*" any run of bytes, "?" one byte; "fs.*",
 * "*.read_file", "*"). */
int tool_glob(const char *pat, const char *name);

#endif
