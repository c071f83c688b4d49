/* memprobe.h - peak memory of the test process itself (Linux /proc), for the tests that bound
 * what a huge input costs. Under AddressSanitizer RSS is not the program's: UNDER_ASAN says so
 * and the tests print a diagnostic instead of measuring. */
#ifndef TT_TEST_MEMPROBE_H
#define TT_TEST_MEMPROBE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* A field of /proc/self/status in kB (VmRSS, VmHWM); -1 when unknown. */
static inline long proc_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0); 0 when done. */
static inline int hwm_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

#endif
