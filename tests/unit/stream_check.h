/* stream_check.h - got.h's every-split check plus a byte at a time, on a fixture: for the
 * decoder tests of the native dialects (test_gemini, test_responses). */
#ifndef TT_TEST_STREAM_CHECK_H
#define TT_TEST_STREAM_CHECK_H
#include "fixture.h"
#include "got.h"

/* Decode s[0..n) with dec fed to the SSE parser one byte at a time (nothing more is fed once
 * the decoder said the stream is over, as in the network thread). */
static void got_decode_bytes(struct got *g, got_decoder dec, const char *s, size_t n)
{
    got_init(g, dec);
    struct sse_parser p;
    sse_init(&p, 0);
    for (size_t i = 0; i < n && sse_feed(&p, s + i, 1, got_on_event, g) == 0; i++)
        ;
    sse_free(&p);
}

/* Decode s[0..n) whole into *g; check that every two-piece split and a byte at a time give
 * the same (two TAP points). */
static void stream_check_splits(const char *name, got_decoder dec, const char *s, size_t n,
                                struct got *g)
{
    got_every_split(g, dec, s, n, name);
    char *whole = got_summary(g);
    struct got bytes;
    got_decode_bytes(&bytes, dec, s, n);
    char *sum = got_summary(&bytes);
    TAP_STR(sum, whole, "a byte at a time: the same");
    free(sum);
    got_free(&bytes);
    free(whole);
}

/* stream_check_splits on tests/fixtures/NAME. */
static void stream_check_fixture(const char *name, got_decoder dec, struct got *g)
{
    size_t n;
    char *s = fixture_read(name, &n);
    stream_check_splits(name, dec, s, n, g);
    free(s);
}

#endif
