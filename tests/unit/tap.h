/* tap.h - a tiny TAP producer for unit tests (automake's tap-driver counts each line).
 * Use TAP_OK(cond, "name %d", ...), TAP_STR(got, want, name), TAP_INT(got, want, name),
 * and end main() with `return tap_done();`. Each assertion is one test point. */
#ifndef TT_TAP_H
#define TT_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count, tap_failed;

static void tap_vok(int ok, const char *file, int line, const char *fmt, va_list ap)
{
    tap_count++;
    if (!ok)
        tap_failed++;
    printf("%s %d - ", ok ? "ok" : "not ok", tap_count);
    vprintf(fmt, ap);
    printf("\n");
    if (!ok)
        printf("# failed at %s:%d\n", file, line);
    fflush(stdout);
}

static inline int tap_ok_at(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tap_ok_at(int ok, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vok(ok, file, line, fmt, ap);
    va_end(ap);
    return ok;
}

#define TAP_OK(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define TAP_STR(got, want, name)                                                       \
    do {                                                                               \
        const char *tap_g_ = (got), *tap_w_ = (want);                                  \
        int tap_e_ = (tap_g_ && tap_w_) ? strcmp(tap_g_, tap_w_) == 0 : tap_g_ == tap_w_; \
        if (!TAP_OK(tap_e_, "%s", name))                                               \
            printf("#   got:  \"%s\"\n#   want: \"%s\"\n", tap_g_ ? tap_g_ : "(null)",  \
                   tap_w_ ? tap_w_ : "(null)");                                         \
    } while (0)

#define TAP_INT(got, want, name)                                                       \
    do {                                                                               \
        long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);               \
        if (!TAP_OK(tap_g_ == tap_w_, "%s", name))                                     \
            printf("#   got:  %lld\n#   want: %lld\n", tap_g_, tap_w_);                \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

/* Directory holding test data (tests/), from the build's srcdir. */
static inline const char *tap_srcdir(void)
{
    const char *s = getenv("srcdir");
    return s ? s : ".";
}

#endif
