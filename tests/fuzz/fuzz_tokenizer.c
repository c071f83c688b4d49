/* fuzz_tokenizer.c - the BPE tokenizer (o200k_base and cl100k_base) on any bytes.
 *
 * Needs the rank tables: $TOKTERM_DATADIR, the installed data or the source tree's data/.
 * Invariants: every id is in the vocabulary; decoding the ids gives back the input when it is
 * valid UTF-8 (and valid UTF-8 in any case, since invalid bytes became U+FFFD); the count
 * equals the number of ids; a streaming counter fed in input-chosen pieces (split inside UTF-8
 * sequences too) counts the same; model lookup never fails on odd names. */
#include "config.h"
#include "fuzz.h"
#include "tokens/tokenizer.h"
#include "base/utf8.h"

#include <string.h>

static struct tokenizer *fuzz_tok[2];

static struct tokenizer *fuzz_tok_get(int which)
{
    static const char *const names[2] = {"o200k_base", "cl100k_base"};
    if (!fuzz_tok[which]) {
        char *err = NULL;
        fuzz_tok[which] = tokenizer_open(names[which], &err);
        if (!fuzz_tok[which]) {
            fprintf(stderr, "fuzz_tokenizer: %s (set TOKTERM_DATADIR)\n", err ? err : "?");
            abort();
        }
    }
    return fuzz_tok[which];
}

FUZZ_ENTRY(tokenizer)
{
    const char *s = (const char *)data;
    struct tokenizer *tok = fuzz_tok_get(size && (data[0] & 1));
    struct tok_ids ids = TOK_IDS_INIT;
    tokenizer_encode(tok, s, size, &ids);
    size_t vocab = tokenizer_vocab_size(tok);
    for (size_t i = 0; i < ids.len; i++)
        FUZZ_CHECK(ids.ids[i] < vocab);
    FUZZ_CHECK(tokenizer_count(tok, s, size) == ids.len);
    FUZZ_CHECK((size == 0) == (ids.len == 0));

    struct buf back = BUF_INIT;
    FUZZ_CHECK(tokenizer_decode(tok, ids.ids, ids.len, &back) == 0);
    FUZZ_CHECK(utf8_valid(buf_str(&back), back.len));
    if (utf8_valid(s, size))
        FUZZ_CHECK(back.len == size && memcmp(buf_str(&back), s, size) == 0);
    uint32_t bad = (uint32_t)vocab + 7;
    FUZZ_CHECK(tokenizer_decode(tok, &bad, 1, &back) == -1);
    buf_free(&back);

    struct tok_stream *ts = tokenizer_stream_new(tok);
    size_t off = 0;
    while (off < size) {
        size_t n = 1 + (size_t)(data[off] % 11);
        if (n > size - off)
            n = size - off;
        tokenizer_stream_feed(ts, s + off, n);
        off += n;
    }
    FUZZ_CHECK(tokenizer_stream_count(ts) == ids.len);
    tokenizer_stream_free(ts);

    /* the ends alone (a message shortened for a request) are the whole encoding's ends; every
     * piece start named splits the encoding there */
    size_t head = size ? data[size - 1] % 9 : 0, tail = 1 + (size > 1 ? data[1] % 7 : 0);
    struct tok_ids h = TOK_IDS_INIT, t = TOK_IDS_INIT;
    if (tokenizer_encode_ends(tok, s, size, head, tail, &h, &t) == 0)
        FUZZ_CHECK(ids.len >= head + tail && h.len == head && t.len == tail &&
                   (!head || memcmp(h.ids, ids.ids, head * sizeof *h.ids) == 0) &&
                   memcmp(t.ids, ids.ids + ids.len - tail, tail * sizeof *t.ids) == 0);
    else
        FUZZ_CHECK(h.len == 0 && t.len == 0);
    tok_ids_free(&h);
    tok_ids_free(&t);
    for (size_t i = 1, n = 0; i < size && n < 4; i++) {
        if (!tokenizer_piece_start(s, size, i))
            continue;
        n++;
        struct tok_ids two = TOK_IDS_INIT;
        tokenizer_encode(tok, s, i, &two);
        tokenizer_encode(tok, s + i, size - i, &two);
        FUZZ_CHECK(utf8_valid(s, size) == 0 || (two.len == ids.len &&
                                                memcmp(two.ids, ids.ids,
                                                       ids.len * sizeof *ids.ids) == 0));
        tok_ids_free(&two);
    }
    tok_ids_free(&ids);

    char model[64];
    size_t m = size < sizeof model - 1 ? size : sizeof model - 1;
    memcpy(model, s, m);
    model[m] = '\0';
    struct tok_model_info info;
    if (tokenizer_model_info(model, &info) == 0) /* a known encoding, or none: estimated */
        FUZZ_CHECK(tokenizer_encoding_for_model(model) == info.encoding &&
                   (!info.encoding || strcmp(info.encoding, "o200k_base") == 0 ||
                    strcmp(info.encoding, "cl100k_base") == 0));
    return 0;
}
