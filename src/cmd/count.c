/* cmd_count.c - `tokterm count`: token count (or ids) of stdin. */
#include "config.h"
#include "cmd/count.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "tokens/tokenizer.h"

static void count_usage(FILE *f)
{
    fputs("usage: tokterm count [-m MODEL | -e ENCODING] [--ids]\n"
          "  Print the number of tokens of standard input.\n"
          "  -m, --model MODEL        count as MODEL does (default: o200k_base)\n"
          "  -e, --encoding NAME      o200k_base or cl100k_base\n"
          "      --ids                print the token ids instead of the count\n",
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
            fprintf(stderr, "tokterm count: unknown model '%s'; counting with o200k_base "
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

/* The token ids of text on one line of stdout, separated by spaces. */
static void count_print_ids(struct tokenizer *tok, const struct buf *text)
{
    struct tok_ids v = TOK_IDS_INIT;
    tokenizer_encode(tok, buf_str(text), text->len, &v);
    struct buf out = BUF_INIT;
    buf_reserve(&out, v.len * 7 + 1);
    for (size_t i = 0; i < v.len; i++) {
        char num[12], *q = num + sizeof num;
        uint32_t id = v.ids[i];
        do
            *--q = (char)('0' + id % 10);
        while ((id /= 10) != 0);
        if (i)
            buf_appendc(&out, ' ');
        buf_append(&out, q, (size_t)(num + sizeof num - q));
    }
    buf_appendc(&out, '\n');
    fwrite(out.data, 1, out.len, stdout);
    buf_free(&out);
    tok_ids_free(&v);
}

/* Count (or list the ids of) all of stdin with tok: the exit status. */
static int count_stdin(struct tokenizer *tok, int ids)
{
    struct buf in = BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        buf_append(&in, chunk, n);
    if (ferror(stdin)) {
        fprintf(stderr, "tokterm count: reading stdin: %s\n", strerror(errno));
        buf_free(&in);
        return 1;
    }
    if (ids)
        count_print_ids(tok, &in);
    else
        printf("%zu\n", tokenizer_count(tok, buf_str(&in), in.len));
    buf_free(&in);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "tokterm count: writing stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int cmd_count(int argc, char **argv)
{
    const char *model = NULL, *encoding = NULL;
    int ids = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int missing = 0;
        if (strcmp(argv[i], "--ids") == 0)
            ids = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            count_usage(stdout);
            return 0;
        } else if ((v = count_optval(argc, argv, &i, "-m", "--model", &missing)))
            model = v;
        else if ((v = count_optval(argc, argv, &i, "-e", "--encoding", &missing)))
            encoding = v;
        else {
            if (missing)
                fprintf(stderr, "tokterm count: option '%s' needs a value\n", argv[i]);
            else
                fprintf(stderr, "tokterm count: unknown argument '%s'\n", argv[i]);
            count_usage(stderr);
            return 2;
        }
    }
    if (model && encoding) {
        fputs("tokterm count: give either --model or --encoding, not both\n", stderr);
        return 2;
    }
    if (!(encoding = count_encoding(model, encoding)))
        return 2;
    char *err = NULL;
    struct tokenizer *tok = tokenizer_open(encoding, &err);
    if (!tok) {
        fprintf(stderr, "tokterm count: %s\n", err);
        free(err);
        return 1;
    }
    int rc = count_stdin(tok, ids);
    tokenizer_close(tok);
    return rc;
}
