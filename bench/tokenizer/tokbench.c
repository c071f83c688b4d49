/* tokbench.c - benchmark driver for the tokenizer (bench/tokenizer/run.sh).
 *
 *   tokbench                          TAP self-test: long runs of one character stay fast
 *   tokbench ids ENCODING FILE        print the ids of FILE, space-separated
 *   tokbench idsz ENCODING FILE       FILE holds NUL-separated texts: one line of ids each
 *   tokbench speed ENCODING FILE [N]  encode and count FILE N times each (default 5); best MB/s
 *   tokbench run ENCODING CHAR BYTES  encode a run of one ASCII character; seconds
 *   tokbench load ENCODING [N]        tokenizer_open + close N times; best and mean ms
 *   tokbench ends ENCODING FILE BYTES KEEP [N]
 *                                     a long message shortened for a request (context_shorten:
 *                                     its first and last KEEP/2 ids) from the first BYTES of
 *                                     FILE: encoded whole, then its ends alone; best of N */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/tokenizer.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "../../tests/unit/tap.h"

static struct tokenizer *bench_open(const char *enc)
{
    char *err = NULL;
    struct tokenizer *t = tokenizer_open(enc, &err);
    if (!t) {
        fprintf(stderr, "tokbench: %s\n", err);
        free(err);
        exit(1);
    }
    return t;
}

static char *bench_read(const char *path, size_t *len)
{
    char *s = util_read_file(path, len, 0);
    if (!s) {
        perror(path);
        exit(1);
    }
    return s;
}

static void bench_print_ids(struct tokenizer *t, const char *text, size_t len)
{
    struct tok_ids v = TOK_IDS_INIT;
    tokenizer_encode(t, text, len, &v);
    char num[16];
    for (size_t i = 0; i < v.len; i++) {
        int n = snprintf(num, sizeof num, i ? " %u" : "%u", (unsigned)v.ids[i]);
        fwrite(num, 1, (size_t)n, stdout);
    }
    putchar('\n');
    tok_ids_free(&v);
}

static int bench_ids(const char *enc, const char *path, int split)
{
    struct tokenizer *t = bench_open(enc);
    size_t len;
    char *text = bench_read(path, &len);
    if (!split)
        bench_print_ids(t, text, len);
    else {
        for (size_t i = 0; i < len;) {
            const char *z = memchr(text + i, '\0', len - i);
            size_t n = z ? (size_t)(z - (text + i)) : len - i;
            bench_print_ids(t, text + i, n);
            i += n + 1;
        }
    }
    free(text);
    tokenizer_close(t);
    return 0;
}

static int bench_speed(const char *enc, const char *path, int reps)
{
    if (reps < 1)
        reps = 1;
    struct tokenizer *t = bench_open(enc);
    size_t len;
    char *text = bench_read(path, &len);
    struct tok_ids v = TOK_IDS_INIT;
    double best = 1e9;
    size_t ntok = 0;
    for (int r = 0; r < reps; r++) {
        v.len = 0;
        double t0 = util_now();
        tokenizer_encode(t, text, len, &v);
        double dt = util_now() - t0;
        if (dt < best)
            best = dt;
        ntok = v.len;
    }
    double count_s = 1e9;
    size_t counted = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = util_now();
        counted = tokenizer_count(t, text, len);
        double dt = util_now() - t0;
        if (dt < count_s)
            count_s = dt;
    }
    printf("encoding=%s bytes=%zu tokens=%zu encode_s=%.4f encode_MBps=%.2f count_s=%.4f "
           "count_MBps=%.2f\n",
           enc, len, ntok, best, len / best / 1e6, count_s, len / count_s / 1e6);
    tok_ids_free(&v);
    free(text);
    tokenizer_close(t);
    return counted == ntok ? 0 : 1;
}

static double bench_run_once(struct tokenizer *t, char c, size_t bytes, size_t *ntok)
{
    char *text = xmalloc(bytes + 1);
    memset(text, c, bytes);
    text[bytes] = '\0';
    double t0 = util_now();
    *ntok = tokenizer_count(t, text, bytes);
    double dt = util_now() - t0;
    free(text);
    return dt;
}

static int bench_run(const char *enc, const char *ch, const char *bytes)
{
    struct tokenizer *t = bench_open(enc);
    size_t ntok;
    size_t n = (size_t)strtoull(bytes, NULL, 10);
    double dt = bench_run_once(t, ch[0], n, &ntok);
    printf("encoding=%s char='%c' bytes=%zu tokens=%zu seconds=%.4f\n", enc, ch[0], n, ntok, dt);
    tokenizer_close(t);
    return 0;
}

static int bench_load(const char *enc, int reps)
{
    if (reps < 1)
        reps = 1;
    double best = 1e9, sum = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = util_now();
        struct tokenizer *t = bench_open(enc);
        /* one lookup so that the table is really usable */
        size_t n = tokenizer_count(t, "hello", 5);
        double dt = util_now() - t0;
        tokenizer_close(t);
        if (n != 1)
            return 1;
        sum += dt;
        if (dt < best)
            best = dt;
    }
    printf("encoding=%s load_best_ms=%.3f load_mean_ms=%.3f\n", enc, best * 1e3,
           sum / reps * 1e3);
    return 0;
}

static int bench_ends(const char *enc, const char *path, size_t bytes, size_t keep, int reps)
{
    struct tokenizer *t = bench_open(enc);
    size_t len;
    char *text = bench_read(path, &len);
    if (bytes < len) {
        len = bytes;
        while (len && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--; /* a whole character last */
    }
    size_t head = keep / 2, tail = keep - head;
    double whole_s = 1e9, ends_s = 1e9;
    int same = 1;
    size_t ntok = 0;
    for (int r = 0; r < (reps < 1 ? 1 : reps); r++) {
        struct tok_ids v = TOK_IDS_INIT, h = TOK_IDS_INIT, e = TOK_IDS_INIT;
        double t0 = util_now();
        tokenizer_encode(t, text, len, &v); /* as context_shorten did: every id, keep the ends */
        double t1 = util_now();
        int rc = tokenizer_encode_ends(t, text, len, head, tail, &h, &e);
        double t2 = util_now();
        whole_s = t1 - t0 < whole_s ? t1 - t0 : whole_s;
        ends_s = t2 - t1 < ends_s ? t2 - t1 : ends_s;
        ntok = v.len;
        same &= rc == 0 && v.len >= head + tail && h.len == head && e.len == tail &&
                memcmp(h.ids, v.ids, head * sizeof *v.ids) == 0 &&
                memcmp(e.ids, v.ids + v.len - tail, tail * sizeof *v.ids) == 0;
        tok_ids_free(&v);
        tok_ids_free(&h);
        tok_ids_free(&e);
    }
    printf("encoding=%s bytes=%zu tokens=%zu keep=%zu whole_ms=%.3f ends_ms=%.3f same=%d\n", enc,
           len, ntok, keep, whole_s * 1e3, ends_s * 1e3, same);
    free(text);
    tokenizer_close(t);
    return same ? 0 : 1;
}

/* Without arguments: check that runs of one character cost about linear time. A quadratic
 * merge would take minutes on 1 MB; the limit is generous for sanitizer builds. */
static int bench_selftest(void)
{
    const char *encs[] = {"o200k_base", "cl100k_base"};
    const char chars[] = {'a', ' ', '!', '\n'};
    for (size_t e = 0; e < 2; e++) {
        struct tokenizer *t = bench_open(encs[e]);
        for (size_t c = 0; c < sizeof chars; c++) {
            size_t n_small, n_big;
            double small = bench_run_once(t, chars[c], 100000, &n_small);
            double big = bench_run_once(t, chars[c], 1000000, &n_big);
            TAP_OK(big < 20.0 && n_big > 0 && n_big < 1000000,
                   "%s: 1 MB of 0x%02x in %.3f s (100 kB: %.3f s), %zu tokens", encs[e],
                   (unsigned)chars[c], big, small, n_big);
        }
        tokenizer_close(t);
    }
    return tap_done();
}

int main(int argc, char **argv)
{
    if (argc == 1)
        return bench_selftest();
    if (argc == 4 && strcmp(argv[1], "ids") == 0)
        return bench_ids(argv[2], argv[3], 0);
    if (argc == 4 && strcmp(argv[1], "idsz") == 0)
        return bench_ids(argv[2], argv[3], 1);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "speed") == 0)
        return bench_speed(argv[2], argv[3], argc == 5 ? atoi(argv[4]) : 5);
    if (argc == 5 && strcmp(argv[1], "run") == 0)
        return bench_run(argv[2], argv[3], argv[4]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "load") == 0)
        return bench_load(argv[2], argc == 4 ? atoi(argv[3]) : 20);
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "ends") == 0)
        return bench_ends(argv[2], argv[3], (size_t)strtoull(argv[4], NULL, 10),
                          (size_t)strtoull(argv[5], NULL, 10), argc == 7 ? atoi(argv[6]) : 5);
    fputs("usage: tokbench [ids|speed|run|load|ends] ...\n", stderr);
    return 2;
}
