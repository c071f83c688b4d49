/* buf.h - growable byte buffer, always NUL-terminated after any append. */
#ifndef TT_BUF_H
#define TT_BUF_H
#include <stddef.h>

#include "base/xmalloc.h"

struct buf {
    char *data;  /* NULL until the first append; then NUL-terminated */
    size_t len;
    size_t cap;
};

#define BUF_INIT {NULL, 0, 0}

void buf_reserve(struct buf *b, size_t extra);
/* Room for total bytes (its NUL included) in one block, taken now if the memory can be had:
 * a reservation made ahead of need (a fast answer's room up to its limit), so a refusal is
 * not fatal. 0 when b has that room, -1 when it could not be had (b unchanged: it grows as
 * it would have). From XMALLOC_HUGE_MIN on, the block is whole huge pages (huge_alloc). */
int buf_try_room(struct buf *b, size_t total);
/* The same for room that fills as a stream arrives (use XMALLOC_GRADUAL: huge_alloc_for). */
int buf_try_room_for(struct buf *b, size_t total, enum xmalloc_use use);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_appends(struct buf *b, const char *s);
void buf_appendc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empty the buffer, keep its memory. */
void buf_reset(struct buf *b);
/* Return data (never NULL; "" when empty); still owned by the buffer. */
const char *buf_str(const struct buf *b);
/* Hand the data over to the caller (who frees it) and empty the buffer. A block of huge pages
 * much larger than its text is cut to the text first (the caller keeps it). */
char *buf_take(struct buf *b);
void buf_free(struct buf *b);
/* Lending a buffer's block to readers instead of copying it (the chat's view of a long line
 * reads the session's copy of the answer). A reader holds the block with buf_lend and lets go
 * with buf_return; the owner frees a block that may be lent with buf_release (buf_free_lent,
 * buf_reset_lent for a buffer), which frees it now when no reader holds it, else at the last
 * reader's buf_return. A lent block is never moved: buf_take does not cut it to its text, and
 * its owner must not grow it in place (buf_lent says so). Blocks never lent cost a load. */
void buf_lend(void *block);
void buf_return(void *block);
void buf_release(void *block);
int buf_lent(const void *block);
/* buf_free / buf_reset of a buffer whose block may be lent: a lent block is released and the
 * buffer starts again empty. */
void buf_free_lent(struct buf *b);
void buf_reset_lent(struct buf *b);
/* Append n bytes of p in base64 (RFC 4648, with padding): data URLs, attachments. */
void buf_append_base64(struct buf *b, const void *p, size_t n);

#endif
