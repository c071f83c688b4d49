/* fuzz.h - shared glue of the fuzz targets in tests/fuzz/.
 *
 * Every fuzz_NAME.c is built twice:
 *   - with -DTT_LIBFUZZER as its own libFuzzer program (./configure CC=clang --enable-fuzzing;
 *     `make fuzz-smoke`), where FUZZ_ENTRY(NAME) is LLVMFuzzerTestOneInput;
 *   - without it, into tests/fuzz/replay (a `make check` program for every build, gcc or
 *     clang, plain or ASan), where FUZZ_ENTRY(NAME) is fuzz_NAME_one() and replay runs each
 *     target over its seed corpus and its regression inputs (tests/fuzz/regress/NAME/).
 * A target checks invariants with FUZZ_CHECK: a violation aborts, so libFuzzer saves the input
 * as a crash and replay dies with the message. */
#ifndef TT_FUZZ_H
#define TT_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef TT_LIBFUZZER
#define FUZZ_ENTRY(name)                                              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);     \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#else
#define FUZZ_ENTRY(name) int fuzz_##name##_one(const uint8_t *data, size_t size)
#endif

/* Report a broken invariant and abort (libFuzzer keeps the input as a crash). */
static inline void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "fuzz: invariant violated at %s:%d: %s\n", file, line, what);
    abort();
}

#define FUZZ_CHECK(cond)                                    \
    do {                                                    \
        if (!(cond))                                        \
            fuzz_fail(#cond, __FILE__, __LINE__);           \
    } while (0)

/* 1 when s[0..n) holds no byte that could drive a terminal: no C0 control other than TAB and
 * LF, no DEL, no C1 control encoded as UTF-8 (U+0080..U+009F), no raw byte 0x80..0x9F that
 * starts a sequence (invalid UTF-8 must have become U+FFFD). */
static inline int fuzz_terminal_safe(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
            return 0;
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9f)
            return 0;
    }
    return 1;
}

/* The targets, for tests/fuzz/replay (only declared when not built for libFuzzer). */
#ifndef TT_LIBFUZZER
int fuzz_sse_one(const uint8_t *data, size_t size);
int fuzz_api_one(const uint8_t *data, size_t size);
int fuzz_dialect_one(const uint8_t *data, size_t size);
int fuzz_conf_one(const uint8_t *data, size_t size);
int fuzz_theme_one(const uint8_t *data, size_t size);
int fuzz_markdown_one(const uint8_t *data, size_t size);
int fuzz_table_one(const uint8_t *data, size_t size);
int fuzz_highlight_one(const uint8_t *data, size_t size);
int fuzz_tokenizer_one(const uint8_t *data, size_t size);
int fuzz_ratelimit_one(const uint8_t *data, size_t size);
int fuzz_html_one(const uint8_t *data, size_t size);
#endif

#endif
