/* test_longrows.c - the rows of a long growing line (text/longrows.c): the ASCII wrapper gives
 * wrap_text's rows, sparse rows give the same rows as whole ones at every length the line
 * passes through and in any order they are asked for, and sparse rows stay small. */
#include "config.h"
#include "tap.h"
#include "text/longrows.h"
#include "text/wrap.h"
#include "base/xmalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15u;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* Printable ASCII: words of 1..maxw letters, runs of 1..4 spaces, sometimes a long run, and
 * sometimes indentation at the start. */
static char *gen_text(size_t n, unsigned maxw)
{
    char *s = xmalloc(n + 1);
    size_t i = 0;
    if (rnd(3) == 0)
        for (unsigned k = 1 + rnd(200); k-- && i < n;)
            s[i++] = ' ';
    while (i < n) {
        for (unsigned k = 1 + rnd(maxw); k-- && i < n;)
            s[i++] = (char)('!' + rnd(94));
        for (unsigned k = rnd(20) == 0 ? 1 + rnd(300) : 1 + rnd(4); k-- && i < n;)
            s[i++] = ' ';
    }
    s[n] = 0;
    return s;
}

static int same_row(const struct wrap_row *a, const struct wrap_row *b)
{
    return a && b && a->off == b->off && a->len == b->len && a->width == b->width &&
           a->indent == b->indent;
}

/* The whole rows of s[0..n) at width w as the reference sees them: wrap_text. */
static void reference(struct wrap_rows *ref, const char *s, size_t n, size_t w, int pre)
{
    ref->n = 0;
    wrap_text(ref, s, n, (int)w, 0, pre ? WRAP_PRE : 0);
}

/* Rows of r for s[0..n) against ref: all in order, then some at random; 0 when they agree. */
static int compare(const struct longrows *r, const struct wrap_rows *ref, const char *s, size_t n,
                   char *why, size_t whylen)
{
    if (longrows_count(r) != ref->n) {
        snprintf(why, whylen, "%zu rows, want %zu", longrows_count(r), ref->n);
        return 1;
    }
    for (size_t i = 0; i < ref->n; i++)
        if (!same_row(longrows_row(r, s, n, i), &ref->v[i])) {
            snprintf(why, whylen, "row %zu of %zu (in order)", i, ref->n);
            return 1;
        }
    for (int k = 0; k < 200 && ref->n; k++) {
        size_t i = rnd((unsigned)ref->n);
        if (!same_row(longrows_row(r, s, n, i), &ref->v[i])) {
            snprintf(why, whylen, "row %zu of %zu (at random)", i, ref->n);
            return 1;
        }
    }
    if (longrows_row(r, s, n, ref->n)) {
        snprintf(why, whylen, "a row past the end");
        return 1;
    }
    return 0;
}

/* Grow a line in chunks, rewrapping from the last two rows each time, as the chat does. */
static void grow(struct longrows *r, const char *s, size_t upto, size_t *have, size_t w, int pre)
{
    *have = upto;
    size_t from = longrows_rewind(r, 0);
    longrows_ascii(r, s + from, upto - from, from, w, pre);
}

static void test_same_rows(int sparse, int pre)
{
    static const size_t widths[] = {1, 2, 7, 40, 80, 137};
    struct wrap_rows ref = {NULL, 0, 0};
    int bad = 0;
    char why[128] = "";
    size_t lines = 0, checks = 0, most = 0;
    for (int t = 0; t < 60 && !bad; t++) {
        size_t n = 2000 + rnd(60000), w = widths[rnd(6)];
        char *s = gen_text(n, rnd(4) == 0 ? 300 : 12);
        struct longrows r = {0};
        longrows_clear(&r, sparse);
        size_t have = 0;
        while (have < n && !bad) {
            size_t step = rnd(8) == 0 ? 1 + rnd(20000) : 1 + rnd(300);
            grow(&r, s, have + step < n ? have + step : n, &have, w, pre);
            if (rnd(6) == 0 || have == n) {
                reference(&ref, s, have, w, pre);
                bad = compare(&r, &ref, s, have, why, sizeof why);
                checks++;
                most = ref.n > most ? ref.n : most;
            }
        }
        if (!bad && rnd(2)) { /* a new width: rewrapped from the start */
            w = widths[rnd(6)];
            size_t from = longrows_rewind(&r, 1);
            longrows_ascii(&r, s + from, n - from, from, w, pre);
            reference(&ref, s, n, w, pre);
            bad = compare(&r, &ref, s, n, why, sizeof why);
            checks++;
        }
        if (bad)
            printf("# text %d: %zu bytes at width %zu: %s\n", t, have, w, why);
        longrows_free(&r);
        free(s);
        lines++;
    }
    wrap_rows_free(&ref);
    TAP_OK(!bad, "%s rows%s = wrap_text's, %zu lines grown in chunks, %zu checks (up to %zu rows)",
           sparse ? "sparse" : "whole", pre ? " (WRAP_PRE)" : "", lines, checks, most);
}

/* A 1.9 MB line at 80 columns, in 16 KiB batches: sparse rows stay a few kB. */
static void test_small(void)
{
    size_t n = 1900000;
    char *s = gen_text(n, 9);
    struct longrows r = {0}, whole = {0};
    longrows_clear(&r, 1);
    longrows_clear(&whole, 0);
    size_t have = 0, have2 = 0;
    while (have < n) {
        size_t upto = have + 16384 < n ? have + 16384 : n;
        grow(&r, s, upto, &have, 80, 0);
        grow(&whole, s, upto, &have2, 80, 0);
    }
    size_t bytes = r.tail.cap * sizeof *r.tail.v + r.capck * sizeof *r.ck;
    TAP_OK(longrows_count(&r) == longrows_count(&whole) && longrows_count(&r) > 10000,
           "%zu rows, as many as whole rows", longrows_count(&r));
    TAP_OK(bytes < 8192, "sparse rows of a 1.9 MB line take %zu bytes (whole: %zu)", bytes,
           whole.tail.cap * sizeof *whole.tail.v);
    int bad = 0;
    for (size_t i = 0; i < longrows_count(&r) && !bad; i += 1 + rnd(100))
        bad = !same_row(longrows_row(&r, s, n, i), longrows_row(&whole, s, n, i));
    TAP_OK(!bad, "and the same rows");
    longrows_free(&r);
    longrows_free(&whole);
    free(s);
}

int main(void)
{
    test_same_rows(0, 0);
    test_same_rows(1, 0);
    test_same_rows(1, 1);
    test_small();
    return tap_done();
}
