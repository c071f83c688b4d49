/* test_tokenizer.c - parity with tiktoken on tests/tokenizer/corpus, plus unit cases for the
 * model table, the streaming counter, chat counting, data-file errors, `tokterm count`, and the
 * limits: long pieces are cut at TOKENIZER_PIECE_MAX, memory does not grow with a long run,
 * count refuses input past COUNT_MAX_INPUT. */
#include "config.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "cmd/count.h"
#include "tap.h"
#include "memprobe.h"
#include "tokens/tokenizer.h"
#include "base/util.h"
#include "base/xmalloc.h"

static const char *const ENCODINGS[2] = {"o200k_base", "cl100k_base"};
static struct tokenizer *toks[2];

static char *read_all(const char *path, size_t *len)
{
    char *s = util_read_file(path, len, 0);
    if (!s)
        printf("# cannot read %s\n", path);
    return s;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the corpus files (*.txt); caller frees each and the array. */
static char **corpus_list(const char *dir, size_t *n)
{
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".txt") != 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            names = xrealloc(names, cap * sizeof *names);
        }
        names[(*n)++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, *n, sizeof *names, cmp_name);
    return names;
}

/* Compare ids with a JSON array; prints the first difference. */
static int ids_match(const struct tok_ids *got, const cJSON *want)
{
    int n = cJSON_GetArraySize(want);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, want)
    {
        if (i >= got->len || !cJSON_IsNumber(it) || (double)got->ids[i] != it->valuedouble) {
            printf("#   first difference at token %zu: got %ld, want %.0f\n", i,
                   i < got->len ? (long)got->ids[i] : -1L,
                   cJSON_IsNumber(it) ? it->valuedouble : -1.0);
            return 0;
        }
        i++;
    }
    if (got->len != (size_t)n) {
        printf("#   got %zu tokens, want %d\n", got->len, n);
        return 0;
    }
    return 1;
}

/* One test point per corpus file and encoding: the ids equal tiktoken's exactly. Also checks
 * count == len(ids) and that decoding gives the bytes back for valid UTF-8 files. */
static void test_corpus(void)
{
    char *dir = xasprintf("%s/tokenizer/corpus", tap_srcdir());
    size_t n;
    char **names = corpus_list(dir, &n);
    TAP_OK(n >= 20, "corpus has %zu files", n);
    for (size_t f = 0; f < n; f++) {
        char *path = xasprintf("%s/%s", dir, names[f]);
        char *jpath = xasprintf("%s/tokenizer/expected/%.*s.json", tap_srcdir(),
                                (int)(strlen(names[f]) - 4), names[f]);
        size_t len, jlen;
        char *text = read_all(path, &len);
        char *json = read_all(jpath, &jlen);
        cJSON *root = json ? cJSON_Parse(json) : NULL;
        for (int e = 0; e < 2; e++) {
            const cJSON *want = root ? cJSON_GetObjectItemCaseSensitive(root, ENCODINGS[e]) : NULL;
            struct tok_ids got = TOK_IDS_INIT;
            int ok = text && cJSON_IsArray(want);
            if (ok) {
                tokenizer_encode(toks[e], text, len, &got);
                ok = ids_match(&got, want) && tokenizer_count(toks[e], text, len) == got.len;
            }
            TAP_OK(ok, "%s %s: %zu tokens identical to tiktoken", names[f], ENCODINGS[e],
                   got.len);
            if (ok && strcmp(names[f], "invalid_utf8.txt") != 0) {
                struct buf back = BUF_INIT;
                int rc = tokenizer_decode(toks[e], got.ids, got.len, &back);
                if (rc != 0 || back.len != len || (len && memcmp(back.data, text, len) != 0))
                    TAP_OK(0, "%s %s: decode(encode(text)) == text", names[f], ENCODINGS[e]);
                buf_free(&back);
            }
            tok_ids_free(&got);
        }
        cJSON_Delete(root);
        free(json);
        free(text);
        free(jpath);
        free(path);
        free(names[f]);
    }
    free(names);
    free(dir);
}

static void expect_ids(int e, const char *text, size_t len, const uint32_t *want, size_t nwant,
                       const char *name)
{
    struct tok_ids got = TOK_IDS_INIT;
    tokenizer_encode(toks[e], text, len, &got);
    int ok = got.len == nwant && memcmp(got.ids, want, nwant * sizeof *want) == 0;
    TAP_OK(ok, "%s %s", ENCODINGS[e], name);
    if (!ok) {
        printf("#   got:");
        for (size_t i = 0; i < got.len; i++)
            printf(" %u", (unsigned)got.ids[i]);
        printf("\n");
    }
    tok_ids_free(&got);
}

static void test_basics(void)
{
    static const uint32_t hello_o[] = {24912, 2375}, hello_c[] = {15339, 1917};
    expect_ids(0, "hello world", 11, hello_o, 2, "hello world");
    expect_ids(1, "hello world", 11, hello_c, 2, "hello world");
    TAP_INT(tokenizer_count(toks[0], "", 0), 0, "empty text has no tokens");
    TAP_INT(tokenizer_vocab_size(toks[0]), 199998, "o200k_base has 199998 ranks");
    TAP_INT(tokenizer_vocab_size(toks[1]), 100256, "cl100k_base has 100256 ranks");
    TAP_STR(tokenizer_name(toks[1]), "cl100k_base", "tokenizer_name");

    /* invalid UTF-8 is encoded as the U+FFFD a JS caller of tiktoken would pass */
    for (int e = 0; e < 2; e++) {
        struct tok_ids a = TOK_IDS_INIT, b = TOK_IDS_INIT;
        tokenizer_encode(toks[e], "x\xe2\x82" "A\xff\xc0\xaf", 7, &a);
        tokenizer_encode(toks[e], "x\xef\xbf\xbd" "A\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 14, &b);
        TAP_OK(a.len == b.len && memcmp(a.ids, b.ids, a.len * sizeof a.ids[0]) == 0,
               "%s: invalid bytes count as U+FFFD (maximal subparts)", ENCODINGS[e]);
        tok_ids_free(&a);
        tok_ids_free(&b);
    }
    /* NUL bytes are ordinary text */
    TAP_OK(tokenizer_count(toks[0], "a\0b", 3) >= 2, "NUL inside text is encoded");

    struct buf out = BUF_INIT;
    uint32_t bad[] = {24912, 250000};
    TAP_INT(tokenizer_decode(toks[0], bad, 2, &out), -1, "decode rejects an out-of-range id");
    TAP_STR(buf_str(&out), "hello", "decode keeps the bytes before the bad id");
    buf_free(&out);

    /* a 200 kB run of one character exercises the heap merge; compare with a short run's
     * shape: 'a' x 8k tokenises periodically, so 200k 'a' gives 25x the tokens of 8k 'a' */
    size_t big = 200000;
    char *run = xmalloc(big);
    memset(run, 'a', big);
    size_t n8k = tokenizer_count(toks[0], run, 8000), n200k = tokenizer_count(toks[0], run, big);
    TAP_OK(n8k > 0 && n200k == 25 * n8k, "long run of 'a': %zu tokens (8000 bytes: %zu)", n200k,
           n8k);
    free(run);
}

/* tokenizer_open() that must fail; returns 1 when it did and gave a message containing want. */
static int open_fails(const char *enc, const char *want, struct buf *msg)
{
    char *err = NULL;
    struct tokenizer *t = tokenizer_open(enc, &err);
    int ok = t == NULL && err != NULL && (!want || strstr(err, want) != NULL);
    tokenizer_close(t);
    buf_printf(msg, "%s", err ? err : "(no message)");
    free(err);
    return ok;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

static void test_open_errors(const char *datadir)
{
    struct buf msg = BUF_INIT;
    int ok = open_fails("p50k_base", "p50k_base", &msg);
    TAP_OK(ok, "unknown encoding is refused: %s", buf_str(&msg));
    buf_reset(&msg);
    ok = open_fails(NULL, NULL, &msg);
    TAP_OK(ok, "NULL encoding is refused: %s", buf_str(&msg));
    buf_reset(&msg);

    setenv("TOKTERM_DATADIR", "/nonexistent-tokterm-dir", 1);
    ok = open_fails("o200k_base", "/nonexistent-tokterm-dir/o200k_base.bin", &msg);
    TAP_OK(ok, "missing data file is reported: %s", buf_str(&msg));
    buf_reset(&msg);

    /* a truncated, a mislabelled and a corrupted copy of the table */
    char tmpl[] = "/tmp/tt-tok-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    char *src = xasprintf("%s/cl100k_base.bin", datadir);
    size_t len;
    char *data = read_all(src, &len);
    char *dst = xasprintf("%s/cl100k_base.bin", tmp ? tmp : "/tmp");
    if (tmp && data && len > 8192) {
        setenv("TOKTERM_DATADIR", tmp, 1);
        write_file(dst, data, len / 2);
        ok = open_fails("cl100k_base", "truncated", &msg);
        TAP_OK(ok, "truncated table refused: %s", buf_str(&msg));
        buf_reset(&msg);

        data[0] = 'X';
        write_file(dst, data, len);
        ok = open_fails("cl100k_base", "magic", &msg);
        TAP_OK(ok, "bad magic refused: %s", buf_str(&msg));
        buf_reset(&msg);
        data[0] = 'T';

        char *copy = xmalloc(len);
        memcpy(copy, data, len);
        memcpy(copy + 64, "o200k_base", 11);
        write_file(dst, copy, len);
        ok = open_fails("cl100k_base", "another encoding", &msg);
        TAP_OK(ok, "table of another encoding refused: %s", buf_str(&msg));
        buf_reset(&msg);

        /* garbage offsets (past the single bytes) and pair index: the table opens, and lookups
         * must stay inside the file (ASan would catch a stray read) */
        memcpy(copy, data, len);
        uint32_t off_offsets, off_pair2, n_tok;
        memcpy(&n_tok, data + 12, 4);
        memcpy(&off_offsets, data + 32, 4);
        memcpy(&off_pair2, data + 40, 4);
        for (size_t i = off_offsets + 4 * 300; i < off_offsets + 4 * (size_t)n_tok; i++)
            copy[i] = (char)(i * 2654435761u >> 13);
        for (size_t i = off_pair2; i < off_pair2 + 4 * 65536; i++)
            copy[i] = (char)(i * 2246822519u >> 11);
        write_file(dst, copy, len);
        char *err = NULL;
        struct tokenizer *t = tokenizer_open("cl100k_base", &err);
        size_t n = t ? tokenizer_count(t, "hello world, a corrupt table", 28) : 0;
        struct tok_ids ids = TOK_IDS_INIT;
        if (t)
            tokenizer_encode(t, "abc def", 7, &ids);
        struct buf back = BUF_INIT;
        if (t)
            tokenizer_decode(t, ids.ids, ids.len, &back);
        TAP_OK(t != NULL && n > 0, "garbage offsets: %s", t ? "lookups stay bounded" : err);
        buf_free(&back);
        tok_ids_free(&ids);
        tokenizer_close(t);
        free(err);
        free(copy);
        unlink(dst);
        rmdir(tmp);
    } else
        TAP_OK(0, "could not set up the corrupt-table tests");
    free(dst);
    free(data);
    free(src);
    buf_free(&msg);
    setenv("TOKTERM_DATADIR", datadir, 1);
}

static void test_models(void)
{
    static const struct {
        const char *model, *enc;
        long ctx;
    } cases[] = {
        {"gpt-4o", "o200k_base", 128000},
        {"gpt-4o-mini-2024-07-18", "o200k_base", 128000},
        {"gpt-4o-2099-12-31", "o200k_base", 128000},
        {"chatgpt-4o-latest", "o200k_base", 128000},
        {"gpt-4.1", "o200k_base", 1047576},
        {"gpt-4.1-nano-2025-04-14", "o200k_base", 1047576},
        {"gpt-5", "o200k_base", 400000},
        {"gpt-5-mini", "o200k_base", 400000},
        {"o1", "o200k_base", 200000},
        {"o3-mini", "o200k_base", 200000},
        {"o4-mini-2025-04-16", "o200k_base", 200000},
        {"gpt-4", "cl100k_base", 8192},
        {"gpt-4-0613", "cl100k_base", 8192},
        {"gpt-4-turbo", "cl100k_base", 128000},
        {"gpt-4-turbo-2024-04-09", "cl100k_base", 128000},
        {"gpt-3.5-turbo", "cl100k_base", 16385},
        {"text-embedding-3-small", "cl100k_base", 8191},
        {"openai/gpt-4o-mini", "o200k_base", 128000},
        {"ft:gpt-3.5-turbo-0125:acme::abc123", "cl100k_base", 16385},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(cases); i++) {
        struct tok_model_info info = {0};
        int rc = tokenizer_model_info(cases[i].model, &info);
        TAP_OK(rc == 0 && strcmp(info.encoding, cases[i].enc) == 0 &&
                   info.context_window == cases[i].ctx,
               "model %s -> %s, context %ld (got %s, %ld)", cases[i].model, cases[i].enc,
               cases[i].ctx, rc == 0 ? info.encoding : "none", rc == 0 ? info.context_window : 0);
    }
    struct tok_model_info info;
    TAP_OK(tokenizer_model_info("gpt-4o", &info) == 0 && info.max_output == 16384,
           "gpt-4o default max output 16384");
    TAP_STR(tokenizer_encoding_for_model("gpt-4-32k-0613"), "cl100k_base", "gpt-4-32k encoding");
    TAP_OK(tokenizer_encoding_for_model("llama-3.1-70b-instruct") == NULL, "unknown model: NULL");
    TAP_OK(tokenizer_encoding_for_model("text-davinci-003") == NULL,
           "p50k model is not claimed (its encoding is not supported)");
    /* models without a public tokenizer: their window is known, their counts estimated */
    TAP_OK(tokenizer_model_info("claude-sonnet-4-5", &info) == 0 && info.encoding == NULL &&
               info.context_window == 200000 && info.max_output == 8192,
           "claude-sonnet-4-5: window 200000, no encoding (estimated)");
    TAP_OK(tokenizer_model_info("claude-3-haiku-20240307", &info) == 0 &&
               info.max_output == 4096, "claude-3-haiku: max output 4096");
    TAP_OK(tokenizer_model_info("models/gemini-2.5-flash", &info) == 0 && info.encoding == NULL &&
               info.context_window == 1048576, "gemini-2.5-flash: window 1048576, estimated");
    TAP_OK(tokenizer_encoding_for_model("claude-haiku-4-5") == NULL,
           "claude: no exact encoding (counts are estimates)");
    TAP_OK(tokenizer_encoding_for_model(NULL) == NULL, "NULL model: NULL");
    TAP_OK(tokenizer_encoding_for_model("") == NULL, "empty model: NULL");
}

static uint32_t rng_state = 12345;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Feed text in deltas of the given size (0 = random 1..40); check every intermediate count
 * against tokenizer_count of the prefix when check_each, and always the final count. */
static int stream_check(int e, const char *text, size_t len, size_t step, int check_each)
{
    struct tok_stream *st = tokenizer_stream_new(toks[e]);
    size_t off = 0;
    int ok = 1;
    while (off < len && ok) {
        size_t d = step ? step : 1 + rng() % 40;
        if (d > len - off)
            d = len - off;
        tokenizer_stream_feed(st, text + off, d);
        off += d;
        if (check_each) {
            size_t a = tokenizer_stream_count(st), b = tokenizer_count(toks[e], text, off);
            if (a != b) {
                printf("#   after %zu bytes: stream %zu, whole %zu\n", off, a, b);
                ok = 0;
            }
        }
    }
    size_t a = tokenizer_stream_count(st), b = tokenizer_count(toks[e], text, len);
    if (a != b) {
        printf("#   final: stream %zu, whole %zu\n", a, b);
        ok = 0;
    }
    tokenizer_stream_reset(st);
    tokenizer_stream_feed(st, "hello world", 11);
    if (tokenizer_stream_count(st) != 2)
        ok = 0;
    tokenizer_stream_free(st);
    return ok;
}

static void test_stream(void)
{
    static const char *const files[] = {"prose_en.txt", "code_mixed.txt", "contractions.txt",
                                        "casing.txt", "whitespace.txt", "unicode_space.txt",
                                        "emoji.txt", "hindi.txt", "invalid_utf8.txt",
                                        "digits.txt", "long_mixed_runs.txt",
                                        "mixed_random.txt"};
    for (size_t f = 0; f < TT_ARRAY_LEN(files); f++) {
        char *path = xasprintf("%s/tokenizer/corpus/%s", tap_srcdir(), files[f]);
        size_t len;
        char *text = read_all(path, &len);
        for (int e = 0; e < 2 && text; e++) {
            int each = len <= 4000;
            int ok = stream_check(e, text, len, 1, each) && stream_check(e, text, len, 2, each) &&
                     stream_check(e, text, len, 3, each) && stream_check(e, text, len, 0, each) &&
                     stream_check(e, text, len, 256, 1);
            TAP_OK(ok, "stream %s %s: every delta split gives tokenizer_count()", files[f],
                   ENCODINGS[e]);
        }
        if (!text)
            TAP_OK(0, "stream %s readable", files[f]);
        free(text);
        free(path);
    }
    /* 1 MB of prose fed in 7-byte deltas stays fast: only the unfinished piece is rescanned */
    char *path = xasprintf("%s/tokenizer/corpus/prose_en.txt", tap_srcdir());
    size_t plen;
    char *prose = read_all(path, &plen);
    if (prose && plen) {
        struct buf big = BUF_INIT;
        while (big.len < 1000000)
            buf_append(&big, prose, plen);
        struct tok_stream *st = tokenizer_stream_new(toks[0]);
        double t0 = util_now();
        for (size_t off = 0; off < big.len; off += 7)
            tokenizer_stream_feed(st, big.data + off, big.len - off < 7 ? big.len - off : 7);
        double dt = util_now() - t0;
        TAP_OK(tokenizer_stream_count(st) == tokenizer_count(toks[0], big.data, big.len) &&
                   dt < 10.0,
               "1 MB streamed in 7-byte deltas in %.3f s, same count", dt);
        tokenizer_stream_free(st);
        buf_free(&big);
    } else
        TAP_OK(0, "prose corpus readable");
    free(prose);
    free(path);
}

static void test_chat(void)
{
    /* The example of OpenAI's cookbook "How to count tokens with tiktoken": the API reported
     * 129 prompt tokens for gpt-3.5-turbo / gpt-4 (cl100k_base) and 124 for gpt-4o / gpt-4o-mini
     * (o200k_base). */
    static const struct tok_chat_msg msgs[] = {
        {"system", "You are a helpful, pattern-following assistant that translates corporate "
                   "jargon into plain English.", NULL},
        {"system", "New synergies will help drive top-line growth.", "example_user"},
        {"system", "Things working well together will increase revenue.", "example_assistant"},
        {"system", "Let's circle back when we have more bandwidth to touch base on opportunities "
                   "for increased leverage.", "example_user"},
        {"system", "Let's talk later when we're less busy about how to do better.",
         "example_assistant"},
        {"user", "This late pivot means we don't have time to boil the ocean for the client "
                 "deliverable.", NULL},
    };
    TAP_INT(tokenizer_chat_count(toks[1], msgs, TT_ARRAY_LEN(msgs)), 129,
            "cookbook chat example, cl100k_base");
    TAP_INT(tokenizer_chat_count(toks[0], msgs, TT_ARRAY_LEN(msgs)), 124,
            "cookbook chat example, o200k_base");
    TAP_INT(tokenizer_chat_count(toks[0], NULL, 0), 3, "empty chat: the reply primer only");
    struct tok_chat_msg empty = {"user", NULL, NULL};
    TAP_INT(tokenizer_chat_count(toks[0], &empty, 1), 3 + 3 + 1, "message without content");
}

/* Run cmd_count with stdin from `input`; capture stdout and stderr. */
static int run_count(const char *input, char **argv, int argc, struct buf *out, struct buf *err)
{
    char in_path[] = "/tmp/tt-count-in-XXXXXX", out_path[] = "/tmp/tt-count-out-XXXXXX",
         err_path[] = "/tmp/tt-count-err-XXXXXX";
    int fi = mkstemp(in_path), fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fi < 0 || fo < 0 || fe < 0)
        return -100;
    if (write(fi, input, strlen(input)) != (ssize_t)strlen(input))
        return -100;
    lseek(fi, 0, SEEK_SET);
    fflush(stdout);
    fflush(stderr);
    int save_in = dup(0), save_out = dup(1), save_err = dup(2);
    dup2(fi, 0);
    dup2(fo, 1);
    dup2(fe, 2);
    clearerr(stdin);
    int rc = cmd_count(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save_in, 0);
    dup2(save_out, 1);
    dup2(save_err, 2);
    close(save_in);
    close(save_out);
    close(save_err);
    clearerr(stdin);
    size_t len;
    char *s = util_read_file(out_path, &len, 0);
    buf_reset(out);
    buf_append(out, s ? s : "", s ? len : 0);
    free(s);
    s = util_read_file(err_path, &len, 0);
    buf_reset(err);
    buf_append(err, s ? s : "", s ? len : 0);
    free(s);
    close(fi);
    close(fo);
    close(fe);
    unlink(in_path);
    unlink(out_path);
    unlink(err_path);
    return rc;
}

static void test_cmd_count(void)
{
    struct buf out = BUF_INIT, err = BUF_INIT;
    char *a1[] = {"count", NULL};
    TAP_INT(run_count("hello world", a1, 1, &out, &err), 0, "count: exit 0");
    TAP_STR(buf_str(&out), "2\n", "count: prints the o200k count");

    char *a2[] = {"count", "--ids", NULL};
    run_count("hello world", a2, 2, &out, &err);
    TAP_STR(buf_str(&out), "24912 2375\n", "count --ids: o200k ids");

    char *a3[] = {"count", "-m", "gpt-4", "--ids", NULL};
    TAP_INT(run_count("hello world", a3, 4, &out, &err), 0, "count -m gpt-4: exit 0");
    TAP_STR(buf_str(&out), "15339 1917\n", "count -m gpt-4 --ids: cl100k ids");

    char *a4[] = {"count", "--encoding=cl100k_base", NULL};
    run_count("hello world", a4, 2, &out, &err);
    TAP_STR(buf_str(&out), "2\n", "count --encoding=cl100k_base");

    char *a5[] = {"count", "--model", "mystery-model", NULL};
    TAP_INT(run_count("hello world", a5, 3, &out, &err), 0, "count: unknown model still counts");
    TAP_OK(strcmp(buf_str(&out), "2\n") == 0 && strstr(buf_str(&err), "approximate"),
           "count: unknown model -> o200k and a note on stderr");

    char *a6[] = {"count", "--bogus", NULL};
    TAP_INT(run_count("x", a6, 2, &out, &err), 2, "count --bogus: exit 2");
    TAP_OK(err.len > 0 && out.len == 0, "count --bogus: message on stderr only");

    char *a7[] = {"count", "-m", NULL};
    TAP_INT(run_count("x", a7, 2, &out, &err), 2, "count -m without a value: exit 2");

    char *a8[] = {"count", "-m", "gpt-4o", "-e", "cl100k_base", NULL};
    TAP_INT(run_count("x", a8, 5, &out, &err), 2, "count with both -m and -e: exit 2");

    char *a9[] = {"count", "-e", "p50k_base", NULL};
    TAP_INT(run_count("x", a9, 3, &out, &err), 2, "count -e p50k_base: exit 2");

    char *a10[] = {"count", "--ids", NULL};
    run_count("", a10, 2, &out, &err);
    TAP_STR(buf_str(&out), "\n", "count --ids of empty input: empty line");
    buf_free(&out);
    buf_free(&err);
}

/* ---- limits ---------------------------------------------------------------------------- */

/* Pseudo-random lower-case letters: one pre-tokenizer piece whose merges differ by position. */
static char *random_word(size_t n)
{
    char *w = xmalloc(n + 1);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w[i] = (char)('a' + x % 26);
    }
    w[n] = '\0';
    return w;
}

static void test_piece_cap(void)
{
    const size_t P = TOKENIZER_PIECE_MAX;
    /* A word of 2.5 pieces is encoded as its three cuts are, each alone. */
    size_t n = 2 * P + P / 2;
    char *w = random_word(n);
    for (int e = 0; e < 2; e++) {
        struct tok_ids whole = TOK_IDS_INIT, parts = TOK_IDS_INIT;
        tokenizer_encode(toks[e], w, n, &whole);
        for (size_t off = 0; off < n; off += P)
            tokenizer_encode(toks[e], w + off, n - off < P ? n - off : P, &parts);
        TAP_OK(whole.len == parts.len &&
                   memcmp(whole.ids, parts.ids, whole.len * sizeof whole.ids[0]) == 0,
               "%s: a %zu-byte word is cut every %zu bytes (%zu tokens, cuts alone %zu)",
               ENCODINGS[e], n, P, whole.len, parts.len);
        /* a word of exactly P bytes is one piece: not the same as two halves */
        size_t one = tokenizer_count(toks[e], w, P);
        TAP_OK(one == tokenizer_count(toks[e], w, P) && one > 0 && one < P,
               "%s: a word of exactly %zu bytes is one piece (%zu tokens)", ENCODINGS[e], P, one);
        tok_ids_free(&whole);
        tok_ids_free(&parts);
    }
    /* A run of one letter is cut into identical pieces: the ids of the first serve the
     * others (encode, count, encode_each and the stream agree with the cuts merged alone). */
    size_t rn = 3 * P + 5;
    char *run = xmalloc(rn);
    memset(run, 'a', rn);
    for (int e = 0; e < 2; e++) {
        struct tok_ids whole = TOK_IDS_INIT, parts = TOK_IDS_INIT;
        tokenizer_encode(toks[e], run, rn, &whole);
        for (size_t off = 0; off < rn; off += P)
            tokenizer_encode(toks[e], run + off, rn - off < P ? rn - off : P, &parts);
        struct tok_stream *st = tokenizer_stream_new(toks[e]);
        for (size_t off = 0; off < rn; off += 1000)
            tokenizer_stream_feed(st, run + off, rn - off < 1000 ? rn - off : 1000);
        TAP_OK(whole.len == parts.len &&
                   memcmp(whole.ids, parts.ids, whole.len * sizeof whole.ids[0]) == 0 &&
                   tokenizer_count(toks[e], run, rn) == whole.len &&
                   tokenizer_stream_count(st) == whole.len,
               "%s: a run of 3 pieces + 5 bytes of 'a': %zu tokens, as its cuts", ENCODINGS[e],
               whole.len);
        tokenizer_stream_free(st);
        tok_ids_free(&whole);
        tok_ids_free(&parts);
    }
    free(run);
    /* Cuts fall on a character start: a run of 3-byte letters (U+4E00) decodes back whole. */
    size_t m = 3 * (P / 3 + 7) * 2 + 1;
    char *cjk = xmalloc(m + 1);
    for (size_t i = 0; i + 3 <= m; i += 3)
        memcpy(cjk + i, "\xE4\xB8\x80", 3);
    cjk[m - 1] = 'x';
    cjk[m] = '\0';
    struct tok_ids v = TOK_IDS_INIT;
    tokenizer_encode(toks[0], cjk, m, &v);
    struct buf back = BUF_INIT;
    int dec = tokenizer_decode(toks[0], v.ids, v.len, &back);
    TAP_OK(dec == 0 && back.len == m && memcmp(back.data, cjk, m) == 0 &&
               utf8_valid(back.data, back.len),
           "a long run of CJK is cut between characters: decodes back to the same bytes");
    tok_ids_free(&v);
    buf_free(&back);
    free(cjk);
    free(w);
}

/* The stream equals the whole text on runs longer than a piece, whatever the deltas. */
static void test_stream_long(void)
{
    const size_t P = TOKENIZER_PIECE_MAX;
    struct buf t = BUF_INIT;
    for (size_t i = 0; i < P + 100; i++)
        buf_appendc(&t, 'a');
    buf_appends(&t, " x\n");
    for (size_t i = 0; i < 2 * P + 3; i++)
        buf_appendc(&t, ' ');
    buf_appends(&t, "y\n");
    for (size_t i = 0; i < P + 9; i++)
        buf_appendc(&t, i % 1000 ? ' ' : '\n'); /* spaces with a newline now and then */
    buf_appends(&t, "z");
    for (size_t i = 0; i < P; i++)
        buf_appends(&t, i % 5000 ? "A" : "\xE4\xB8\x80"); /* o200k: upper case with a CJK */
    buf_appends(&t, "b1");
    for (size_t i = 0; i < P + 77; i++)
        buf_appendc(&t, "!?-"[i % 3]);
    buf_appends(&t, "\n\xFF\xFE bad bytes ");
    for (size_t i = 0; i < P + 11; i++)
        buf_append(&t, i % 7 ? "\xC3\xA9" : "\xC3", i % 7 ? 2 : 1); /* é and stray bytes */
    for (int e = 0; e < 2; e++) {
        int ok = stream_check(e, t.data, t.len, 4093, 0) && stream_check(e, t.data, t.len, 65536, 0)
                 && stream_check(e, t.data, t.len, 1000003, 0);
        TAP_OK(ok, "%s: %zu bytes of long runs streamed in deltas: same count as whole",
               ENCODINGS[e], t.len);
    }
    /* a 2 MB run fed in 5-byte deltas: each feed used to rescan the whole unfinished piece */
    size_t rn = (size_t)2 << 20;
    char *run = xmalloc(rn);
    memset(run, 'a', rn);
    struct tok_stream *st = tokenizer_stream_new(toks[0]);
    double t0 = util_now();
    for (size_t off = 0; off < rn; off += 5)
        tokenizer_stream_feed(st, run + off, rn - off < 5 ? rn - off : 5);
    size_t sc = tokenizer_stream_count(st);
    double dt = util_now() - t0;
    TAP_OK(sc == tokenizer_count(toks[0], run, rn) && dt < 5.0,
           "a 2 MB run streamed in 5-byte deltas: %.2f s (< 5), same count", dt);
    tokenizer_stream_free(st);
    free(run);
    /* invalid UTF-8 is encoded in blocks: the same ids as its U+FFFD-replaced text */
    struct tok_ids a = TOK_IDS_INIT;
    tokenizer_encode(toks[0], t.data, t.len, &a);
    size_t n_each = tokenizer_count(toks[0], t.data, t.len);
    TAP_OK(a.len == n_each, "long invalid text: encode and count agree (%zu)", a.len);
    tok_ids_free(&a);
    buf_free(&t);
}

struct each_acc {
    struct tok_ids ids;
    size_t calls, most;
};

static void each_cb(void *arg, const uint32_t *ids, size_t n)
{
    struct each_acc *acc = arg;
    acc->calls++;
    if (n > acc->most)
        acc->most = n;
    for (size_t i = 0; i < n; i++) {
        XGROW(acc->ids.ids, acc->ids.len + 1, acc->ids.cap);
        acc->ids.ids[acc->ids.len++] = ids[i];
    }
}

static void test_encode_each(void)
{
    struct buf t = BUF_INIT;
    char *path = xasprintf("%s/tokenizer/corpus/mixed_random.txt", tap_srcdir());
    size_t len;
    char *text = read_all(path, &len);
    while (text && t.len < 3000000)
        buf_append(&t, text, len);
    for (int e = 0; e < 2 && text; e++) {
        struct tok_ids v = TOK_IDS_INIT;
        tokenizer_encode(toks[e], t.data, t.len, &v);
        struct each_acc acc;
        memset(&acc, 0, sizeof acc);
        size_t n = tokenizer_encode_each(toks[e], t.data, t.len, each_cb, &acc);
        TAP_OK(n == v.len && acc.ids.len == v.len &&
                   memcmp(acc.ids.ids, v.ids, v.len * sizeof v.ids[0]) == 0 && acc.calls > 10 &&
                   acc.most < 20000,
               "%s: encode_each gives encode's %zu ids in %zu calls of at most %zu",
               ENCODINGS[e], v.len, acc.calls, acc.most);
        tok_ids_free(&v);
        tok_ids_free(&acc.ids);
    }
    free(text);
    free(path);
    buf_free(&t);
}

/* 1 unless h and t are the first hn and the last tn of all's ids. */
static int ends_wrong(const struct tok_ids *all, const struct tok_ids *h, size_t hn,
                      const struct tok_ids *t, size_t tn)
{
    return h->len != hn || t->len != tn || all->len < hn + tn ||
           memcmp(h->ids, all->ids, hn * sizeof *h->ids) != 0 ||
           memcmp(t->ids, all->ids + all->len - tn, tn * sizeof *t->ids) != 0;
}

/* tokenizer_encode_ends gives the first and last ids of tokenizer_encode, for every corpus
 * file, short (one bounded split) and repeated past 32 kB and past a piece's cap (the bounded
 * split, pieces cut), with ends of a few ids to most of the text; -1 where they would meet and
 * for text that is not UTF-8. */
static void test_encode_ends(void)
{
    static const char *files[] = {"prose_en", "cjk", "code_c", "code_mixed", "emoji",
                                  "whitespace", "long_a", "long_spaces", "long_mixed_runs",
                                  "mixed_random", "unicode_space", "digits", "invalid_utf8"};
    static const size_t ends[][2] = {{1, 1}, {16, 16}, {300, 700}, {5000, 5000}};
    for (int e = 0; e < 2; e++) {
        size_t checked = 0, fallbacks = 0, bad = 0, invalid_ok = 1;
        for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
            char *path = xasprintf("%s/tokenizer/corpus/%s.txt", tap_srcdir(), files[f]);
            size_t len;
            char *text = read_all(path, &len);
            free(path);
            if (!text) {
                bad++;
                continue;
            }
            for (int big = 0; big < 2; big++) {
                struct buf t = BUF_INIT;
                do
                    buf_append(&t, text, len);
                while (big && len && t.len < 200000);
                struct tok_ids all = TOK_IDS_INIT;
                tokenizer_encode(toks[e], t.data, t.len, &all);
                for (size_t k = 0; k < sizeof ends / sizeof *ends; k++) {
                    size_t hn = ends[k][0], tn = ends[k][1];
                    struct tok_ids h = TOK_IDS_INIT, tl = TOK_IDS_INIT;
                    int rc = tokenizer_encode_ends(toks[e], t.data, t.len, hn, tn, &h, &tl);
                    if (strcmp(files[f], "invalid_utf8") == 0) {
                        invalid_ok &= rc == -1 && h.len == 0 && tl.len == 0;
                    } else if (rc != 0) {
                        fallbacks++; /* the caller encodes it whole */
                        bad += h.len || tl.len;
                    } else {
                        checked++;
                        bad += ends_wrong(&all, &h, hn, &tl, tn);
                    }
                    tok_ids_free(&h);
                    tok_ids_free(&tl);
                }
                tok_ids_free(&all);
                buf_free(&t);
            }
            free(text);
        }
        TAP_OK(bad == 0 && checked >= 65 && invalid_ok,
               "%s: encode_ends gives encode's first and last ids (%zu cases, %zu fell back "
               "where the ends meet, %zu wrong)", ENCODINGS[e], checked, fallbacks, bad);
    }
    /* random text of the characters where the splits differ (newlines before slashes and
     * words, spaces before and after words and numbers, contractions, runs, CJK, Unicode
     * spaces), 1 kB to 100 kB, random ends: the tail found from a piece start near the end
     * must be the whole encoding's */
    static const char *bits[] = {"a", "Z", "7", " ", "  ", "\n", "\r\n", "\n\n", "/", ".", "'s",
                                 "'T", "\t", "-", "(", "\xe4\xb8\xad", "\xc2\xa0", "\xe3\x80\x80",
                                 "word", " the", "123456", "\xcc\x81", "!!", "\n/", " /x"};
    unsigned seed = 12345;
    for (int e = 0; e < 2; e++) {
        size_t checked = 0, bad = 0;
        for (int round = 0; round < 120; round++) {
            struct buf t = BUF_INIT;
            seed = seed * 1103515245u + 12345u;
            size_t want = 1000 + (seed >> 8) % (round % 4 == 3 ? 100000 : 20000);
            while (t.len < want) {
                seed = seed * 1103515245u + 12345u;
                buf_appends(&t, bits[(seed >> 16) % (sizeof bits / sizeof *bits)]);
            }
            seed = seed * 1103515245u + 12345u;
            size_t hn = 1 + (seed >> 16) % 200, tn = 1 + (seed >> 4) % 300;
            struct tok_ids all = TOK_IDS_INIT, h = TOK_IDS_INIT, tl = TOK_IDS_INIT;
            tokenizer_encode(toks[e], t.data, t.len, &all);
            if (tokenizer_encode_ends(toks[e], t.data, t.len, hn, tn, &h, &tl) == 0) {
                checked++;
                bad += ends_wrong(&all, &h, hn, &tl, tn);
            }
            tok_ids_free(&all);
            tok_ids_free(&h);
            tok_ids_free(&tl);
            buf_free(&t);
        }
        TAP_OK(bad == 0 && checked >= 110, "%s: encode_ends on random text: %zu of 120 texts, "
               "%zu wrong", ENCODINGS[e], checked, bad);
    }
    /* every piece start tokenizer_piece_start names is one: the text's ids are those of the
     * text before it followed by those of the text from it */
    for (int e = 0; e < 2; e++) {
        size_t starts = 0, bad = 0;
        for (int round = 0; round < 40; round++) {
            struct buf t = BUF_INIT;
            while (t.len < 600) {
                seed = seed * 1103515245u + 12345u;
                buf_appends(&t, bits[(seed >> 16) % (sizeof bits / sizeof *bits)]);
            }
            struct tok_ids all = TOK_IDS_INIT;
            tokenizer_encode(toks[e], t.data, t.len, &all);
            for (size_t i = 1; i < t.len; i++) {
                if (!tokenizer_piece_start(t.data, t.len, i))
                    continue;
                starts++;
                struct tok_ids two = TOK_IDS_INIT;
                tokenizer_encode(toks[e], t.data, i, &two);
                tokenizer_encode(toks[e], t.data + i, t.len - i, &two);
                bad += two.len != all.len || memcmp(two.ids, all.ids, all.len * sizeof *all.ids);
                tok_ids_free(&two);
            }
            tok_ids_free(&all);
            buf_free(&t);
        }
        TAP_OK(bad == 0 && starts > 300, "%s: each of %zu piece starts named splits the "
               "encoding there (%zu do not)", ENCODINGS[e], starts, bad);
    }
}

/* Memory does not grow with the length of a run: 8 MiB of one letter (one piece to the regex)
 * used to take ~43 bytes per byte (357 MB). */
static void test_long_run_memory(void)
{
    size_t n = (size_t)8 << 20;
    char *run = xmalloc(n);
    memset(run, 'a', n);
    if (UNDER_ASAN || hwm_reset() != 0) {
        printf("# peak-memory check not made here (%s): the plain build makes it\n",
               UNDER_ASAN ? "ASan" : "no clear_refs");
        free(run);
        return;
    }
    long before = proc_kb("VmRSS");
    size_t got = tokenizer_count(toks[0], run, n);
    long grew = proc_kb("VmHWM") - before;
    TAP_OK(got > 0 && grew >= 0 && grew < 32 * 1024,
           "count of an 8 MiB run of one letter: peak memory +%ld KiB (< 32 MiB), %zu tokens",
           grew, got);
    free(run);
}

/* Run cmd_count in a child with stdin from path; its exit status and peak RSS beyond the
 * parent's (KiB). stdout and stderr go to out_path / err_path. */
static int count_child(const char *path, char **argv, int argc, const char *out_path,
                       const char *err_path, long *grew_kb)
{
    long base = proc_kb("VmRSS");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fi = open(path, O_RDONLY), fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
            fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fi < 0 || fo < 0 || fe < 0)
            _exit(99);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        int rc = cmd_count(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
        return -1;
    *grew_kb = ru.ru_maxrss - base;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void write_pattern(const char *path, size_t n, const char *unit)
{
    FILE *f = fopen(path, "wb");
    size_t u = strlen(unit);
    char block[65536];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = unit[i % u];
    for (size_t done = 0; f && done < n;) {
        size_t k = n - done < sizeof block ? n - done : sizeof block;
        fwrite(block, 1, k, f);
        done += k;
    }
    if (f)
        fclose(f);
}

static void test_count_limits(void)
{
    char dir[] = "/tmp/tt-countlim-XXXXXX";
    if (!mkdtemp(dir)) {
        TAP_OK(0, "temp dir");
        return;
    }
    char *in = xasprintf("%s/in", dir), *out = xasprintf("%s/out", dir),
         *err = xasprintf("%s/err", dir);
    char *a1[] = {"count", NULL};
    char *a2[] = {"count", "--ids", NULL};
    long grew = 0;
    size_t len;

    /* one byte past the limit: refused with the limit named, nothing on stdout */
    write_pattern(in, (size_t)COUNT_MAX_INPUT + 1, "hello world ");
    int rc = count_child(in, a1, 1, out, err, &grew);
    char *o = util_read_file(out, &len, 0), *e = util_read_file(err, &len, 0);
    TAP_OK(rc == 2 && o && !*o && e && strstr(e, "larger than the limit (64 MiB)"),
           "count: 64 MiB + 1 byte of stdin: exit 2, \"%s\"", e ? util_trim(e) : "");
    free(o);
    free(e);

    /* 8 MiB of one letter: memory is the input and a little more (was 357 MB) */
    write_pattern(in, (size_t)8 << 20, "a");
    rc = count_child(in, a1, 1, out, err, &grew);
    o = util_read_file(out, &len, 0);
    TAP_OK(rc == 0 && o && strtoul(o, NULL, 10) > 0, "count: 8 MiB one-word stdin counted (%s)",
           o ? util_trim(o) : "");
    if (UNDER_ASAN)
        printf("# peak-memory check not made under ASan: the plain build makes it\n");
    else
        TAP_OK(grew < 8 * 1024 + 24 * 1024, "count: 8 MiB one-word stdin: peak RSS +%ld KiB "
               "(< 32 MiB)", grew);
    free(o);

    /* --ids of 16 MiB that is 8M tokens: the ids are written as they come, never all kept */
    write_pattern(in, (size_t)16 << 20, "x ");
    rc = count_child(in, a2, 2, out, err, &grew);
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    int st = stat(out, &sb);
    TAP_OK(rc == 0 && st == 0 && sb.st_size > (8 << 20),
           "count --ids: 16 MiB of \"x \" gives its ids (%lld bytes)", (long long)sb.st_size);
    if (UNDER_ASAN)
        printf("# peak-memory check not made under ASan: the plain build makes it\n");
    else
        TAP_OK(grew < 16 * 1024 + 16 * 1024, "count --ids: 8M ids: peak RSS +%ld KiB (< 32 MiB)",
               grew);
    unlink(in);
    unlink(out);
    unlink(err);
    rmdir(dir);
    free(in);
    free(out);
    free(err);
}

/* Opening a tokenizer clears none of its class table (128 KiB, filled a block at a time as a
 * text needs it): run after the others, as the chat runs, with blocks of up to 1 MiB from the
 * heap (huge_alloc's threshold), where a calloc of the whole struct would write every page. */
static void test_open_pages(void)
{
    const char *pre = getenv("LD_PRELOAD");
    if (UNDER_ASAN || (pre && strstr(pre, "vgpreload_"))) {
        TAP_OK(1, "# pages faulted by an open: not measured under another allocator");
        return;
    }
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    long most = 0;
    for (int round = 0; round < 3; round++) {
        struct rusage a, b;
        getrusage(RUSAGE_SELF, &a);
        char *err = NULL;
        struct tokenizer *t = tokenizer_open("o200k_base", &err);
        getrusage(RUSAGE_SELF, &b);
        TAP_OK(t != NULL, "open %d after the others%s%s", round, err ? ": " : "", err ? err : "");
        long got = b.ru_minflt - a.ru_minflt;
        most = got > most ? got : most;
        TAP_OK(tokenizer_count(t, "hello world", 11) == 2, "it counts (%ld pages faulted)", got);
        tokenizer_close(t);
        free(err);
    }
    /* the header's page, the file's first pages; the table's 32 pages would be 33 more */
    TAP_OK(most < 20, "an open faults in %ld pages at most, not its whole class table", most);
}

int main(void)
{
    char *datadir = xasprintf("%s/../data", tap_srcdir());
    setenv("TOKTERM_DATADIR", datadir, 1);
    for (int e = 0; e < 2; e++) {
        char *err = NULL;
        double t0 = util_now();
        toks[e] = tokenizer_open(ENCODINGS[e], &err);
        double ms = (util_now() - t0) * 1e3;
        TAP_OK(toks[e] != NULL, "open %s (%.2f ms)%s%s", ENCODINGS[e], ms, err ? ": " : "",
               err ? err : "");
        free(err);
    }
    if (!toks[0] || !toks[1])
        return tap_done();
    test_corpus();
    test_basics();
    test_open_errors(datadir);
    test_models();
    test_stream();
    test_chat();
    test_cmd_count();
    test_piece_cap();
    test_stream_long();
    test_encode_each();
    test_encode_ends();
    test_long_run_memory();
    test_count_limits();
    test_open_pages();
    tokenizer_close(toks[0]);
    tokenizer_close(toks[1]);
    free(datadir);
    return tap_done();
}
