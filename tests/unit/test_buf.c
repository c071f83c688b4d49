/* test_buf.c - the growable buffer, across the size where it moves into huge pages. */
#include "config.h"
#include "base/buf.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when the mapping that holds p is advised for huge pages ("hg" in its VmFlags), 0 when
 * not, -1 when /proc/self/smaps cannot tell. */
static int advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) /* a mapping's line */
            in = a >= lo && a < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* In a child with $TOKTERM_THP = mode: bit 0 the mapping of a gradual block is advised, bit 1
 * that of a whole one; 4 when smaps cannot tell. */
static int advice_in_child(const char *mode)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (mode)
            setenv("TOKTERM_THP", mode, 1);
        else
            unsetenv("TOKTERM_THP");
        char *g = huge_alloc_for((size_t)4 << 20, XMALLOC_GRADUAL);
        char *w = huge_alloc_for((size_t)4 << 20, XMALLOC_WHOLE);
        int ag = advised_huge(g), aw = advised_huge(w);
        _exit(ag < 0 || aw < 0 ? 4 : ag | aw << 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_huge_policy(void)
{
    /* Huge pages for gradual blocks only where a fresh 4 KiB page costs more than
     * XMALLOC_SMALL_FAULT_NS: 2-3 us on one VM measured (no), 11-16 us on another (yes). */
    TAP_OK(!xmalloc_huge_pays_at(2500), "a 4 KiB page of 2.5 us: small pages for gradual blocks");
    TAP_OK(xmalloc_huge_pays_at(13000), "of 13 us: huge pages");
    TAP_OK(xmalloc_huge_pays_at(-1), "no measure: huge pages, as before");
    double ns = xmalloc_probe_small_faults();
    TAP_OK(ns > 0 && ns < 1e7, "the probe measures a fresh page: %.0f ns", ns);
    int always = advice_in_child("always"), never = advice_in_child("never");
    int dflt = advice_in_child(NULL);
    if (always == 4 || never == 4 || dflt == 4) {
        printf("ok %d - TOKTERM_THP # SKIP /proc/self/smaps shows no VmFlags\n", ++tap_count);
        return;
    }
    TAP_INT(always, 3, "TOKTERM_THP=always: a gradual block and a whole one advised");
    TAP_INT(never, 2, "TOKTERM_THP=never: the gradual block not, the whole one still");
    TAP_INT(dflt, 3, "undecided (a one-shot, no TOKTERM_THP): both advised, as before");
}

/* The appends' own room check (buf_reserve only to grow): at every length up to a few
 * capacities, each append of 0-3 bytes or one character keeps the text, its NUL and
 * len < cap. A check off by one writes the NUL at data[cap] (ASan), leaves len == cap, or
 * loses a byte. */
static void test_append_room(void)
{
    struct buf b = BUF_INIT;
    char want[600];
    size_t n = 0, bad = 0, grew = 0;
    for (size_t i = 0; n + 4 < sizeof want; i++) {
        size_t cap = b.cap;
        if (i % 3 == 2) {
            char c = (char)('a' + i % 26);
            buf_appendc(&b, c);
            want[n++] = c;
        } else {
            size_t k = i % 4;
            char p[3] = {(char)('A' + i % 26), '1', '2'};
            buf_append(&b, p, k);
            memcpy(want + n, p, k);
            n += k;
        }
        grew += b.cap != cap;
        if (b.len != n || b.len >= b.cap || b.data[b.len] != '\0' || memcmp(b.data, want, n))
            bad++;
    }
    TAP_OK(bad == 0 && grew >= 4, "appends at every length keep the text, its NUL and room for "
                                  "it (%zu bytes, %zu growths, %zu bad)", n, grew, bad);
    buf_free(&b);
    /* Right at the edge: k bytes appended to a buffer that has exactly k bytes left before its
     * capacity (no room for the NUL), by buf_append and, for k = 1, by buf_appendc. */
    size_t edge_bad = 0;
    for (size_t k = 1; k <= 3; k++)
        for (int how = 0; how < (k == 1 ? 2 : 1); how++) {
            struct buf t = BUF_INIT;
            buf_appendc(&t, '.');
            while (t.len < t.cap - k)
                buf_appendc(&t, '.');
            size_t cap = t.cap;
            if (how)
                buf_appendc(&t, 'z');
            else
                buf_append(&t, "zzz", k);
            if (t.len != cap || t.len >= t.cap || t.data[t.len] != '\0' ||
                t.data[t.len - 1] != 'z')
                edge_bad++;
            buf_free(&t);
        }
    TAP_OK(edge_bad == 0, "an append that fills the capacity grows the buffer first (%zu bad)",
           edge_bad);
    struct buf e = BUF_INIT;
    buf_append(&e, "", 0);
    TAP_OK(e.data && e.len == 0 && e.data[0] == '\0', "an empty append to a new buffer makes it "
                                                      "\"\"");
    buf_free(&e);
    buf_appendc(&e, 'x');
    TAP_STR(buf_str(&e), "x", "a character appended to a new buffer");
    buf_free(&e);
}

int main(void)
{
    test_huge_policy();
    test_append_room();
    struct buf b = BUF_INIT;
    TAP_STR(buf_str(&b), "", "empty buffer reads as an empty string");
    /* Grow one short piece at a time past XMALLOC_HUGE_MIN and past one huge page. */
    size_t want = 5 * XMALLOC_HUGE_MIN / 2, pieces = 0;
    char piece[1000];
    while (b.len < want) {
        for (size_t i = 0; i < sizeof piece; i++)
            piece[i] = (char)('a' + (pieces + i) % 26);
        buf_append(&b, piece, sizeof piece);
        pieces++;
    }
    int same = 1;
    for (size_t p = 0; p < pieces && same; p++)
        for (size_t i = 0; i < sizeof piece; i++)
            if (b.data[p * sizeof piece + i] != (char)('a' + (p + i) % 26)) {
                same = 0;
                break;
            }
    TAP_OK(same, "%zu bytes appended in %zu pieces read back in order", b.len, pieces);
    TAP_INT(b.data[b.len], 0, "terminated after the last byte");
    TAP_OK(b.cap >= b.len + 1 && b.cap % XMALLOC_HUGE_PAGE == 0,
           "a large buffer's capacity is whole huge pages (%zu)", b.cap);
    TAP_OK(((uintptr_t)b.data & (XMALLOC_HUGE_PAGE - 1)) == 0, "and starts on a huge page");
    /* It stays an ordinary malloc'd block: buf_take hands it out, free() takes it back. */
    size_t len = b.len;
    char *taken = buf_take(&b);
    TAP_OK(taken && strlen(taken) == len && b.len == 0, "buf_take hands the text out");
    taken = realloc(taken, 10);
    TAP_OK(taken != NULL, "realloc shrinks it like any block");
    free(taken);
    /* huge_alloc rounds up and aligns. */
    char *h = huge_alloc(1);
    TAP_OK(h && ((uintptr_t)h & (XMALLOC_HUGE_PAGE - 1)) == 0, "huge_alloc(1) is aligned");
    if (h)
        memset(h, 1, XMALLOC_HUGE_PAGE); /* the whole page is ours (ASan checks) */
    free(h);
    /* huge_is_huge tells a huge page from plain pages: with THP off for this process (as on a
     * machine without it), never. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0) {
        char *plain = huge_alloc(XMALLOC_HUGE_PAGE);
        TAP_OK(plain && !huge_is_huge(plain), "THP off: huge_is_huge says no");
        free(plain);
    } else {
        printf("ok %d - THP off: huge_is_huge says no # SKIP prctl(PR_SET_THP_DISABLE) failed\n",
               ++tap_count);
    }
    /* Reset and reuse keep the large block. */
    buf_append(&b, "x", 1);
    buf_reset(&b);
    TAP_STR(buf_str(&b), "", "reset empties it");
    buf_free(&b);
    /* XGROW: room for what is needed, doubling; an overflowing size is fatal, not a wrap. */
    int *v = NULL;
    size_t cap = 0;
    XGROW(v, 1, cap);
    TAP_OK(v != NULL && cap == 16, "XGROW starts at 16 elements");
    XGROW(v, 17, cap);
    TAP_OK(cap == 32, "XGROW doubles");
    XGROW(v, 1000, cap);
    TAP_OK(cap == 1024, "XGROW doubles until the need is met");
    v[999] = 7;
    free(v);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_DUMPABLE, 0);
        size_t c2 = 0;
        double *d = NULL;
        XGROW(d, SIZE_MAX / 4, c2); /* SIZE_MAX/4 * 8 bytes overflows size_t */
        _exit(d ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "XGROW aborts on a size that overflows");

    /* Room taken ahead of need gives way to a limit on address space (RLIMIT_AS): buf_try_room
     * refuses and leaves the buffer as it was, and buf_reserve, whose four-fold step past
     * XMALLOC_HUGE_MIN is refused, takes what is needed instead of aborting. In a child, its
     * limit 48 MiB above what it maps already. Not under ASan (its shadow needs terabytes). */
    struct buf r = BUF_INIT;
    buf_append(&r, "abc", 3);
    int room = buf_try_room(&r, (size_t)3 << 20);
    TAP_OK(room == 0 && r.cap >= ((size_t)3 << 20) &&
               r.cap % XMALLOC_HUGE_PAGE == 0 && strcmp(buf_str(&r), "abc") == 0,
           "buf_try_room takes the room (%zu bytes), the text kept", r.cap);
    buf_free(&r);
#ifndef __SANITIZE_ADDRESS__
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_DUMPABLE, 0);
        struct buf g = BUF_INIT;
        buf_append(&g, "abc", 3);
        long vm_kb = 0;
        char line[256];
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "VmSize:", 7) == 0)
                vm_kb = atol(line + 7);
        if (f)
            fclose(f);
        struct rlimit lim = {(rlim_t)vm_kb * 1024 + (48u << 20), RLIM_INFINITY};
        if (vm_kb <= 0 || setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(3);
        if (buf_try_room(&g, (size_t)64 << 20) != -1 || strcmp(buf_str(&g), "abc") != 0)
            _exit(4);
        /* 16 MiB of text: the next byte asks for 64 MiB (refused), then for what it needs
         * (16 MiB and one byte, in 18 MiB: with the 16 MiB block, within the limit) */
        buf_free(&g);
        if (buf_try_room(&g, (size_t)16 << 20) != 0)
            _exit(5);
        memset(g.data, 'q', g.cap - 1);
        g.len = g.cap - 1;
        g.data[g.len] = '\0';
        buf_append(&g, "z", 1);
        _exit(g.cap < ((size_t)64 << 20) && g.data[0] == 'q' && g.data[g.len - 1] == 'z' ? 0 : 6);
    }
    st = 0;
    waitpid(pid, &st, 0);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "under RLIMIT_AS: room ahead of need is refused, growth takes what it needs "
           "(child: %s %d)", WIFEXITED(st) ? "exit" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
#else
    printf("# under RLIMIT_AS: not checked under ASan (its shadow needs terabytes of address "
           "space)\n");
#endif

    /* A huge block is a map of its own, not carved from the heap's top chunk, also when the
     * heap grows in large pads (xmalloc_heap_fast, as in the chat once an answer is fast):
     * carved, the header glibc writes after it faulted in the heap's next huge page. In a
     * child (the heap's settings are for the whole process). Not under ASan (its allocator
     * has no heap of glibc's). */
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
    pid = fork();
    if (pid == 0) {
        xmalloc_heap_fast();
        char *blk = huge_alloc((size_t)4 << 20);
        uintptr_t lo = 0, hi = 0, at = (uintptr_t)blk;
        char line[256];
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && fgets(line, sizeof line, f)) { /* advice splits it into several maps */
            uintptr_t a, z;
            if (strstr(line, "[heap]") && sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &a, &z) == 2) {
                lo = lo && lo < a ? lo : a;
                hi = hi > z ? hi : z;
            }
        }
        if (f)
            fclose(f);
        _exit(!blk ? 2 : !hi ? 3 : at + ((size_t)4 << 20) > lo && at < hi ? 4 : 0);
    }
    st = 0;
    waitpid(pid, &st, 0);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "after xmalloc_heap_fast a 4 MiB huge block is not in the heap (child: %s %d)",
           WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
#else
    printf("# a huge block outside the heap: not checked under ASan\n");
#endif

    /* Lending (buf_lend): the owner's release leaves a lent block to its last reader. A block
     * of huge pages is a map of its own: read after a free that came too early, it faults (in
     * a child here; under ASan, its report). */
    struct buf o = BUF_INIT;
    (void)buf_try_room(&o, (size_t)3 << 20);
    buf_append(&o, "lent text", 9);
    void *blk = o.data;
    TAP_OK(!buf_lent(blk), "a block no reader holds is not lent");
    buf_lend(blk);
    buf_lend(blk);
    TAP_OK(buf_lent(blk), "lent to two readers");
    char *kept = buf_take(&o);
    TAP_OK(kept == blk && o.data == NULL,
           "buf_take hands a lent block out where it is (not cut to its text: not moved)");
    buf_release(kept);
    buf_return(blk);
    TAP_OK(buf_lent(blk), "released by its owner, returned by one reader: still lent");
    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(memcmp(blk, "lent text", 9) == 0 ? 0 : 1);
    st = 0;
    waitpid(pid, &st, 0);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "its last reader still reads it (child: %s %d)", WIFEXITED(st) ? "exit" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    buf_return(blk); /* freed here: ASan's leak check sees it otherwise */
    TAP_OK(!buf_lent(blk), "the last reader's return frees and forgets it");
    /* the other order: the readers go first, the owner frees it as any block */
    struct buf q = BUF_INIT;
    buf_append(&q, "abc", 3);
    buf_lend(q.data);
    buf_return(q.data);
    TAP_OK(!buf_lent(q.data), "returned before the owner let go: not lent any more");
    buf_free_lent(&q);
    TAP_OK(q.data == NULL && q.len == 0, "buf_free_lent of a block not lent frees it");
    /* buf_reset_lent: the buffer starts again in a new block, the lent one stays */
    buf_append(&q, "abc", 3);
    void *qb = q.data;
    buf_lend(qb);
    buf_reset_lent(&q);
    TAP_OK(q.data == NULL && q.len == 0 && memcmp(qb, "abc", 3) == 0,
           "buf_reset_lent of a lent block lets it go and leaves it to its reader");
    buf_append(&q, "de", 2);
    TAP_OK(q.data != qb && strcmp(buf_str(&q), "de") == 0, "the buffer goes on in a new block");
    buf_return(qb);
    buf_reset_lent(&q);
    TAP_OK(q.data != NULL && q.len == 0, "buf_reset_lent of a block not lent keeps it");
    buf_free(&q);

    /* util_wipe: zeros exactly n bytes; util_free_secret takes NULL. */
    char secret[8] = "sk-abcd";
    util_wipe(secret + 3, 3);
    TAP_OK(memcmp(secret, "sk-\0\0\0d", 8) == 0, "util_wipe zeroes exactly n bytes");
    util_wipe(NULL, 0);
    util_free_secret(NULL);
    util_free_secret(xstrdup("sk-secret"));
    TAP_OK(1, "util_wipe(NULL, 0) and util_free_secret(NULL) are no-ops");
    return tap_done();
}
