/* cmd_count.c - `tokterm count`: token count (or ids) of stdin or of the words given. */
#include "config.h"
#include "cmd/count.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "core/attach.h"
#include "tokens/tokenizer.h"

static void count_usage(FILE *f)
{
    fputs("usage: tokterm count [-m MODEL | -e ENCODING] [--ids] [TEXT...]\n"
          "  Print the number of tokens of TEXT (the words joined by spaces), or of standard\n"
          "  input when no TEXT is given (-- ends the options: TEXT may begin with -).\n"
          "  -m, --model MODEL        count as MODEL does (default: o200k_base)\n"
          "  -e, --encoding NAME      o200k_base or cl100k_base\n"
          "      --ids                print the token ids instead of the count\n"
          "  Standard input may hold at most 64 MiB.\n",
          f);
}

/* Value of an option given as "--opt VALUE", "--opt=VALUE", "-o VALUE" or "-oVALUE"; advances
 * *i past a separate value. NULL when argv[*i] is not this option. *missing is set when the
 * option is there but its value is not. */
static const char *count_optval(int argc, char **argv, int *i, const char *s, const char *l,
                                int *missing)
{
    const char *a = argv[*i];
    size_t ll = strlen(l);
    if (strcmp(a, s) == 0 || strcmp(a, l) == 0) {
        if (*i + 1 >= argc) {
            *missing = 1;
            return NULL;
        }
        return argv[++*i];
    }
    if (strncmp(a, l, ll) == 0 && a[ll] == '=')
        return a + ll + 1;
    if (strncmp(a, s, 2) == 0 && a[2] != '\0' && a[1] != '-')
        return a + 2;
    return NULL;
}

/* The encoding to count with: --encoding, the --model's, or o200k_base. NULL (after the
 * message) for an encoding tokterm does not have. */
static const char *count_encoding(const char *model, const char *encoding)
{
    if (model) {
        encoding = tokenizer_encoding_for_model(model);
        if (!encoding) {
            fprintf(stderr, tokenizer_model_info(model, NULL) == 0
                                ? "tokterm count: no public tokenizer for '%s'; counting with "
                                  "o200k_base (an estimate)\n"
                                : "tokterm count: unknown model '%s'; counting with o200k_base "
                                  "(approximate)\n", model);
            encoding = "o200k_base";
        }
    }
    if (!encoding)
        encoding = "o200k_base";
    if (strcmp(encoding, "o200k_base") != 0 && strcmp(encoding, "cl100k_base") != 0) {
        fprintf(stderr, "tokterm count: unknown encoding '%s' (o200k_base, cl100k_base)\n",
                encoding);
        return NULL;
    }
    return encoding;
}

/* Write ids to stdout as decimal numbers separated by spaces (first: nothing written yet). */
static void count_put_ids(void *arg, const uint32_t *ids, size_t n)
{
    int *first = arg;
    char out[4096 * 11 + 16];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (len > sizeof out - 12) {
            fwrite(out, 1, len, stdout);
            len = 0;
        }
        char num[12], *q = num + sizeof num;
        uint32_t id = ids[i];
        do
            *--q = (char)('0' + id % 10);
        while ((id /= 10) != 0);
        if (!*first)
            out[len++] = ' ';
        *first = 0;
        memcpy(out + len, q, (size_t)(num + sizeof num - q));
        len += (size_t)(num + sizeof num - q);
    }
    fwrite(out, 1, len, stdout);
}

/* Read all of stdin, at most COUNT_MAX_INPUT bytes, into *text (with a NUL after it). Returns
 * 0, 2 past the limit or 1 on a read error (after the message). */
static int count_read(char **text, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *s = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > COUNT_MAX_INPUT) { /* one byte past the limit was read */
                fprintf(stderr, "tokterm count: standard input is larger than the limit "
                                "(%d MiB); count it in parts\n", COUNT_MAX_INPUT >> 20);
                free(s);
                return 2;
            }
            cap = cap * 2 > COUNT_MAX_INPUT ? (size_t)COUNT_MAX_INPUT + 1 : cap * 2;
            s = xrealloc(s, cap + 1); /* large blocks move by mremap: no copy, no double */
        }
        ssize_t got = read(0, s + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            fprintf(stderr, "tokterm count: reading stdin: %s\n", strerror(errno));
            free(s);
            return 1;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    s[n] = '\0';
    *text = s;
    *len = n;
    return 0;
}

/* Count (or list the ids of) in[0..len) with tok, then free in: the exit status. Memory: the
 * input (stdin: at most COUNT_MAX_INPUT) and the tokenizer's O(TOKENIZER_PIECE_MAX); ids are
 * written as they come, never all kept. */
static int count_text(struct tokenizer *tok, int ids, char *in, size_t len)
{
    if (ids) {
        int first = 1;
        tokenizer_encode_each(tok, in, len, count_put_ids, &first);
        putchar('\n');
    } else
        printf("%zu\n", tokenizer_count(tok, in, len));
    free(in);
    return util_out_flushed(stdout, 0, "tokterm count"); /* a reader gone: 141, quiet, as -p */
}

int cmd_count(int argc, char **argv)
{
    const char *model = NULL, *encoding = NULL;
    int ids = 0, words = 0, opts = 1, rc = 2;
    struct buf text = BUF_INIT; /* the TEXT words, joined by spaces */
    struct tokenizer *tok = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int missing = 0;
        if (!opts || argv[i][0] != '-' || argv[i][1] == '\0') {
            if (words++)
                buf_appendc(&text, ' ');
            buf_appends(&text, argv[i]);
        } else if (strcmp(argv[i], "--") == 0) {
            opts = 0;
        } else if (strcmp(argv[i], "--ids") == 0) {
            ids = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            count_usage(stdout);
            rc = 0;
            goto out;
        } else if ((v = count_optval(argc, argv, &i, "-m", "--model", &missing))) {
            model = v;
        } else if ((v = count_optval(argc, argv, &i, "-e", "--encoding", &missing))) {
            encoding = v;
        } else {
            if (missing)
                fprintf(stderr, "tokterm count: option '%s' needs a value\n", argv[i]);
            else
                fprintf(stderr, "tokterm count: unknown option '%s'\n", argv[i]);
            count_usage(stderr);
            goto out;
        }
    }
    if (model && encoding) {
        fputs("tokterm count: give either --model or --encoding, not both\n", stderr);
        goto out;
    }
    if (!(encoding = count_encoding(model, encoding)))
        goto out;
    char *err = NULL;
    if (!(tok = tokenizer_open(encoding, &err))) {
        fprintf(stderr, "tokterm count: %s\n", err);
        free(err);
        rc = 1;
        goto out;
    }
    char *in = NULL;
    size_t len = text.len;
    if (words)
        in = buf_take(&text);
    else if ((rc = count_read(&in, &len)) != 0)
        goto out;
    else {
        /* stdin as -p and -f read it: UTF-16 with a byte order mark converted, a UTF-8 one
         * dropped (until 2026-12 the bytes were counted as they came: a lone BOM was 1 token);
         * other bytes (binary, invalid UTF-8) are counted as they are */
        struct buf dec = BUF_INIT;
        const char *note;
        if (attach_text_decode((const unsigned char *)in, len, &dec, &note) == 0) {
            free(in);
            len = dec.len;
            in = buf_take(&dec);
        }
        buf_free(&dec);
    }
    rc = count_text(tok, ids, in, len);
out:
    tokenizer_close(tok);
    buf_free(&text);
    return rc;
}
