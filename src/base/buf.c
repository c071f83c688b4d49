/* buf.c - growable byte buffer. */
#include "config.h"
#include "base/buf.h"
#include "base/xmalloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_reserve(struct buf *b, size_t extra)
{
    if (extra >= SIZE_MAX - b->len)
        xmalloc_die(SIZE_MAX); /* len + extra + 1 would wrap */
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    /* From XMALLOC_HUGE_MIN on, four times larger each time: each step copies the text so
     * far into fresh pages, and only the pages written are faulted in (a 9.9 MB answer's
     * buffer copied 15 MB into 26 MiB of fresh huge pages doubling, 5 MB into 16 MiB so). */
    while (cap < need)
        cap = cap < XMALLOC_HUGE_MIN                   ? cap * 2
              : cap < ((size_t)1 << 30)             ? cap * 4
              : cap <= SIZE_MAX - ((size_t)1 << 30) ? cap + ((size_t)1 << 30)
                                                    : need;
    if (cap >= XMALLOC_HUGE_MIN) {
        /* A long answer: a new block in huge pages each time it grows (the copy is cheaper
         * than faulting in the new part page by page). Four times the room is a guess about
         * what comes next: when the address space cannot take it (RLIMIT_AS, a strict
         * overcommit), a block of what is needed now will do. */
        if (buf_try_room(b, cap) != 0 && buf_try_room(b, need) != 0)
            xmalloc_die(need);
        return;
    }
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

int buf_try_room(struct buf *b, size_t total)
{
    return buf_try_room_for(b, total, XMALLOC_WHOLE);
}

int buf_try_room_for(struct buf *b, size_t total, enum xmalloc_use use)
{
    if (total <= b->cap) /* past here total > cap >= len + 1: the text and its NUL fit */
        return 0;
    size_t cap = total;
    char *p;
    if (cap >= XMALLOC_HUGE_MIN) {
        cap = (cap + XMALLOC_HUGE_PAGE - 1) & ~(XMALLOC_HUGE_PAGE - 1);
        p = cap >= total ? huge_alloc_for(cap, use) : NULL;
    } else {
        p = malloc(cap);
    }
    if (!p)
        return -1;
    if (b->len)
        memcpy(p, b->data, b->len);
    p[b->len] = '\0';
    free(b->data);
    b->data = p;
    b->cap = cap;
    return 0;
}

/* The appends check the room themselves: buf_reserve is called only to grow (a body of
 * 10,000 messages makes ~55,000 appends, nearly all of a few bytes). */
void buf_append(struct buf *b, const void *p, size_t n)
{
    if (b->len >= b->cap || n >= b->cap - b->len) /* len + n + 1 > cap, without overflow */
        buf_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_appends(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_appendc(struct buf *b, char c)
{
    if (b->len + 1 >= b->cap)
        buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

const char *buf_str(const struct buf *b)
{
    return b->data ? b->data : "";
}

char *buf_take(struct buf *b)
{
    char *p = b->data ? b->data : xstrdup("");
    if (b->data && buf_lent(p)) { /* read where it is: not moved */
        b->data = NULL;
        b->len = b->cap = 0;
        return p;
    }
    /* A text in a block far larger than itself (a long answer's room, reserved up to
     * max_answer_mb: 128 MiB of address space) is cut to its size: the taker keeps it for the
     * rest of the run (a conversation's turns), and twenty kept answers must not hold 2.5 GiB
     * of address space (an RLIMIT_AS or a strict overcommit then aborts the run) nor a huge
     * page each. glibc shrinks such a mapping in place (mremap): no copy. */
    if (b->cap >= XMALLOC_HUGE_MIN && b->cap - b->len - 1 >= XMALLOC_HUGE_PAGE)
        p = xrealloc(p, b->len + 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_append_base64(struct buf *b, const void *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    buf_reserve(b, (n + 2) / 3 * 4);
    char *o = b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[v >> 12 & 63];
        *o++ = tab[v >> 6 & 63];
        *o++ = tab[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)(o - b->data);
    *o = '\0';
}

/* ---- lent blocks: a short list, the UI thread's in practice; a mutex for the others ---- */

struct buf_loan {
    void *block;
    unsigned readers;
    int released; /* the owner let go: freed at the last buf_return */
};

static pthread_mutex_t buf_loan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf_loan *buf_loans;
static size_t buf_n_loans, buf_cap_loans;
static atomic_size_t buf_loans_out; /* buf_n_loans, read without the lock */

static struct buf_loan *buf_loan_find(const void *block)
{
    for (size_t i = 0; i < buf_n_loans; i++)
        if (buf_loans[i].block == block)
            return &buf_loans[i];
    return NULL;
}

static void buf_loan_drop(struct buf_loan *l)
{
    *l = buf_loans[--buf_n_loans];
    atomic_store(&buf_loans_out, buf_n_loans);
}

void buf_lend(void *block)
{
    if (!block)
        return;
    pthread_mutex_lock(&buf_loan_lock);
    struct buf_loan *l = buf_loan_find(block);
    if (!l) {
        XGROW(buf_loans, buf_n_loans + 1, buf_cap_loans);
        l = &buf_loans[buf_n_loans++];
        *l = (struct buf_loan){block, 0, 0};
        atomic_store(&buf_loans_out, buf_n_loans);
    }
    l->readers++;
    pthread_mutex_unlock(&buf_loan_lock);
}

void buf_return(void *block)
{
    if (!block)
        return;
    void *gone = NULL;
    pthread_mutex_lock(&buf_loan_lock);
    struct buf_loan *l = buf_loan_find(block);
    if (l && --l->readers == 0) {
        if (l->released)
            gone = block;
        buf_loan_drop(l);
    }
    pthread_mutex_unlock(&buf_loan_lock);
    free(gone);
}

void buf_release(void *block)
{
    if (!block)
        return;
    if (atomic_load(&buf_loans_out) == 0) {
        free(block);
        return;
    }
    pthread_mutex_lock(&buf_loan_lock);
    struct buf_loan *l = buf_loan_find(block);
    if (l)
        l->released = 1;
    pthread_mutex_unlock(&buf_loan_lock);
    if (!l)
        free(block);
}

int buf_lent(const void *block)
{
    if (!block || atomic_load(&buf_loans_out) == 0)
        return 0;
    pthread_mutex_lock(&buf_loan_lock);
    int lent = buf_loan_find(block) != NULL;
    pthread_mutex_unlock(&buf_loan_lock);
    return lent;
}

void buf_free_lent(struct buf *b)
{
    buf_release(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_reset_lent(struct buf *b)
{
    if (buf_lent(b->data))
        buf_free_lent(b);
    else
        buf_reset(b);
}
