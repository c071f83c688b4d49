/* tokenizer.c - tiktoken-identical BPE for o200k_base and cl100k_base.
 *
 * Three parts:
 *  - the rank table: data/<encoding>.bin (tools/convert-bpe.js), mmap'ed; an open-addressing
 *    hash table of ranks keyed by token bytes, plus a direct table for 2-byte tokens;
 *  - the pre-tokenizer: hand-written matchers equivalent to tiktoken's regexes (leftmost-first
 *    alternation with backtracking, worked out per alternative below), classifying code points
 *    with utf8proc categories;
 *  - the merge loop: tiktoken's rule (repeatedly merge the adjacent pair with the lowest rank,
 *    leftmost on ties) as a linear scan for short pieces and, for long ones, a linked list with
 *    candidate pairs in a sorted array, FIFOs and a heap, so a 1 MB run of one character costs
 *    O(n log n) (close to linear in practice) instead of tiktoken's O(n^2).
 * Pieces are bounded (see TOKENIZER_PIECE_MAX): the matchers look at most PIECE_WINDOW bytes
 * ahead of a piece's start and a longer piece is cut, so memory is O(TOKENIZER_PIECE_MAX)
 * whatever the text, not ~40 bytes per byte of its longest run. */
#include "config.h"
#include "tokens/tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"


#define NO_RANK 0xFFFFFFFFu
#define HDR_SIZE 96u
#define BPE_SMALL 64      /* pieces up to this many bytes use the simple O(n^2) merge */
#define BPE_SORT_MIN 2048 /* from this many pairs on, radix-sort the initial pairs */
#define PIECE_MAX TOKENIZER_PIECE_MAX
#define PIECE_WINDOW (PIECE_MAX + 64) /* bytes the matchers see from a piece's start */
#define SINK_BATCH 4096   /* ids handed to a tokenizer_encode_each() callback at a time */

#define CLS_TABLE 0x20000 /* classes of planes 0 and 1 are kept in a table per tokenizer */
#define CLS_BLOCK 256

enum tok_kind { KIND_O200K, KIND_CL100K };

struct tokenizer {
    void *map;
    size_t map_len;
    enum tok_kind kind;
    char name[32];
    uint32_t n_tokens;
    uint32_t mask;      /* hash table slots - 1 */
    uint32_t rank_bits; /* slot = tag << rank_bits | rank */
    uint32_t rank_mask;
    uint32_t max_len;
    uint32_t max_probe; /* no key is further than this from its home slot */
    uint32_t blob_len;
    const uint32_t *offsets; /* token r = blob[offsets[r] .. offsets[r + 1]) */
    const uint32_t *table;
    const uint32_t *pair2; /* rank of the 2-byte token b0 << 8 | b1 */
    const uint8_t *blob;
    const uint32_t *ucd; /* (first, last, class) override triples, sorted */
    uint32_t n_ucd;
    uint32_t byte_rank[256];
    /* Class of every code point below CLS_TABLE, overrides applied, filled one block of
     * CLS_BLOCK code points at a time on first use: a text touches only the pages (of this
     * table and of utf8proc's) of the scripts it is written in. */
    pthread_mutex_t cls_lock;
    uint8_t cls_ready[CLS_TABLE / CLS_BLOCK]; /* atomic: 1 once the block is filled */
    uint8_t cls[CLS_TABLE];
};

/* ---- character classes ----------------------------------------------------------------- */

enum {
    C_L = 1,   /* \p{L}: Lu Ll Lt Lm Lo */
    C_N = 2,   /* \p{N}: Nd Nl No */
    C_WS = 4,  /* \s: Unicode White_Space */
    C_NL = 8,  /* \r or \n */
    C_U = 16,  /* o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
    C_LW = 32, /* o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
    C_END = 64 /* past the end of the text (never stored in the table) */
};


static unsigned cls_compute(uint32_t cp)
{
    unsigned c = 0;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT:
        c = C_L | C_U;
        break;
    case UTF8PROC_CATEGORY_LL:
        c = C_L | C_LW;
        break;
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        c = C_L | C_U | C_LW;
        break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
        c = C_U | C_LW;
        break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        c = C_N;
        break;
    case UTF8PROC_CATEGORY_ZS: /* every Zs, Zl, Zp is White_Space */
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        c = C_WS;
        break;
    default:
        break;
    }
    /* White_Space also holds these controls (Cc). */
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85)
        c |= C_WS;
    if (cp == '\r' || cp == '\n')
        c |= C_NL;
    return c;
}

/* Fill block b of t->cls (a rare path: once per block and tokenizer). */
static void cls_fill(const struct tokenizer *tc, uint32_t b)
{
    struct tokenizer *t = (struct tokenizer *)tc; /* the table is a cache of a pure function */
    pthread_mutex_lock(&t->cls_lock);
    if (!__atomic_load_n(&t->cls_ready[b], __ATOMIC_ACQUIRE)) {
        uint32_t first = b * CLS_BLOCK, last = first + CLS_BLOCK - 1;
        /* ASCII is filled at open without utf8proc (cls_ascii), and read without this check */
        for (uint32_t cp = first ? first : 0x80; cp <= last; cp++)
            t->cls[cp] = (uint8_t)cls_compute(cp);
        /* the data file's overrides that overlap the block (sorted, disjoint) */
        size_t lo = 0, hi = t->n_ucd;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (t->ucd[3 * mid + 1] < first)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t i = lo; i < t->n_ucd && t->ucd[3 * i] <= last; i++) {
            const uint32_t *r = t->ucd + 3 * i;
            for (uint32_t cp = r[0] > first ? r[0] : first; cp <= r[1] && cp <= last; cp++)
                t->cls[cp] = (uint8_t)r[2];
        }
        __atomic_store_n(&t->cls_ready[b], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&t->cls_lock);
}

/* The classes of ASCII, as cls_compute gives them, without touching utf8proc's tables (a
 * prompt in English then maps none of them). The overrides of the data file are applied by
 * cls_fill (block 0) and checked not to touch ASCII at open. */
static void cls_ascii(struct tokenizer *t)
{
    for (uint32_t cp = 0; cp < 0x80; cp++) {
        unsigned c = 0;
        if (cp >= 'A' && cp <= 'Z')
            c = C_L | C_U;
        else if (cp >= 'a' && cp <= 'z')
            c = C_L | C_LW;
        else if (cp >= '0' && cp <= '9')
            c = C_N;
        else if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
            c = C_WS | (cp == '\r' || cp == '\n' ? C_NL : 0);
        t->cls[cp] = (uint8_t)c;
    }
}

/* Class of a code point below CLS_TABLE. */
static inline unsigned cls_low(const struct tokenizer *t, uint32_t cp)
{
    if (!__atomic_load_n(&t->cls_ready[cp / CLS_BLOCK], __ATOMIC_ACQUIRE))
        cls_fill(t, cp / CLS_BLOCK);
    return t->cls[cp];
}

/* Class of a code point at or above CLS_TABLE: the data file's override, else utf8proc's. */
static unsigned cls_high(const struct tokenizer *t, uint32_t cp)
{
    size_t lo = 0, hi = t->n_ucd;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = t->ucd + 3 * mid;
        if (cp < r[0])
            hi = mid;
        else if (cp > r[1])
            lo = mid + 1;
        else
            return r[2];
    }
    return cls_compute(cp);
}

/* The text being split: valid UTF-8 only (callers sanitise first). hit_end records whether a
 * matcher looked at the end of the text, i.e. whether more text could change its answer. */
struct scan {
    const uint8_t *s;
    size_t len;
    int hit_end;
    const struct tokenizer *t;
};

/* Class of the character at p; *next gets the offset after it. */
static inline unsigned scan_cls(struct scan *sc, size_t p, size_t *next)
{
    if (p >= sc->len) {
        sc->hit_end = 1;
        *next = p;
        return C_END;
    }
    const uint8_t *s = sc->s + p;
    uint32_t b = s[0];
    if (b < 0x80) {
        *next = p + 1;
        return sc->t->cls[b]; /* ASCII is filled at open */
    }
    if (b < 0xE0) {
        *next = p + 2;
        return cls_low(sc->t, ((b & 0x1F) << 6) | (s[1] & 0x3F));
    }
    if (b < 0xF0) {
        *next = p + 3;
        return cls_low(sc->t, ((b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F));
    }
    *next = p + 4;
    uint32_t cp = ((b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                  ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return cp < CLS_TABLE ? cls_low(sc->t, cp) : cls_high(sc->t, cp);
}

/* Offset after the run of characters (from p) whose class has a bit of mask. */
static inline size_t scan_run(struct scan *sc, size_t p, unsigned mask)
{
    size_t nx;
    while (scan_cls(sc, p, &nx) & mask)
        p = nx;
    return p;
}

/* [^\s\p{L}\p{N}] */
static inline int cls_punct(unsigned c)
{
    return !(c & (C_L | C_N | C_WS | C_END));
}

static inline size_t scan_run_punct(struct scan *sc, size_t p)
{
    size_t nx;
    while (cls_punct(scan_cls(sc, p, &nx)))
        p = nx;
    return p;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at p: its length, or 0. Case folding adds only U+017F (long s,
 * folds to s) to these ASCII letters. */
static size_t scan_contraction(struct scan *sc, size_t p)
{
    const uint8_t *s = sc->s;
    if (p >= sc->len) {
        sc->hit_end = 1;
        return 0;
    }
    if (s[p] != '\'')
        return 0;
    if (p + 1 >= sc->len) {
        sc->hit_end = 1;
        return 0;
    }
    uint8_t want;
    switch (s[p + 1] | 0x20) { /* ASCII letters to lower case; other bytes never match */
    case 's':
    case 't':
    case 'm':
    case 'd':
        return 2;
    case 'r':
    case 'v':
        want = 'e';
        break;
    case 'l':
        want = 'l';
        break;
    case 0xC5 | 0x20: /* U+017F is C5 BF; the text is valid UTF-8, so p + 2 exists */
        return s[p + 1] == 0xC5 && s[p + 2] == 0xBF ? 3 : 0;
    default:
        return 0;
    }
    if (p + 2 >= sc->len) {
        sc->hit_end = 1;
        return 0;
    }
    return (s[p + 2] | 0x20) == want ? 3 : 0;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at i, where the character at i is white space. */
static size_t scan_space(struct scan *sc, size_t i)
{
    size_t j = i, nx, last_start = i, nl_end = 0;
    unsigned c;
    while ((c = scan_cls(sc, j, &nx)) & C_WS) {
        if (c & C_NL)
            nl_end = nx;
        last_start = j;
        j = nx;
    }
    if (nl_end) /* \s* backs off to the last CR/LF of the run, [\r\n]+ takes it */
        return nl_end;
    if (c == C_END) /* (?!\S) holds at the end of the text */
        return j;
    if (last_start > i) /* \s+ gives back one character so that (?!\S) holds */
        return last_start;
    return j; /* \s+ */
}

/* cl100k_base:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+
 * Returns the end of the piece starting at i (< len). */
static size_t scan_cl100k(struct scan *sc, size_t i)
{
    size_t n0, nx, k;
    if (sc->s[i] == '\'' && (k = scan_contraction(sc, i)))
        return i + k;
    unsigned c0 = scan_cls(sc, i, &n0);
    if (c0 & C_L)
        return scan_run(sc, n0, C_L);
    if (!(c0 & (C_N | C_NL)) && (scan_cls(sc, n0, &nx) & C_L))
        return scan_run(sc, nx, C_L);
    if (c0 & C_N) {
        size_t j = n0;
        for (int d = 1; d < 3 && (scan_cls(sc, j, &nx) & C_N); d++)
            j = nx;
        return j;
    }
    unsigned cs = c0;
    size_t ns = n0;
    if (sc->s[i] == ' ')
        cs = scan_cls(sc, n0, &ns);
    if (cls_punct(cs))
        return scan_run(sc, scan_run_punct(sc, ns), C_NL);
    return scan_space(sc, i);
}

/* o200k alternative A from s0: [U]*[Lw]+ then an optional contraction; 0 when it fails.
 * U* is greedy, so it ends at the last position from which [Lw]+ can start: the end of the U
 * run when an Ll follows, else the last Lm/Lo/M inside the run. */
static size_t o200k_alt_a(struct scan *sc, size_t s0)
{
    size_t j = s0, nx, q = (size_t)-1, e;
    unsigned c;
    while ((c = scan_cls(sc, j, &nx)) & C_U) {
        if (c & C_LW)
            q = j;
        j = nx;
    }
    if (c & C_LW)
        e = scan_run(sc, nx, C_LW);
    else if (q != (size_t)-1)
        e = scan_run(sc, q, C_LW);
    else
        return 0;
    return e + scan_contraction(sc, e);
}

/* o200k alternative B from s0: [U]+[Lw]* then an optional contraction; 0 when it fails. */
static size_t o200k_alt_b(struct scan *sc, size_t s0)
{
    size_t nx;
    if (!(scan_cls(sc, s0, &nx) & C_U))
        return 0;
    size_t e = scan_run(sc, scan_run(sc, nx, C_U), C_LW);
    return e + scan_contraction(sc, e);
}

/* o200k_base, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and Lw = [\p{Ll}\p{Lm}\p{Lo}\p{M}]:
 * [^\r\n\p{L}\p{N}]?U*Lw+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?U+Lw*(?i:...)?|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Returns the end of the piece starting at i (< len). */
static size_t scan_o200k(struct scan *sc, size_t i)
{
    size_t n0, nx, e;
    unsigned c0 = scan_cls(sc, i, &n0);
    int opt = !(c0 & (C_L | C_N | C_NL)); /* [^\r\n\p{L}\p{N}]? can take the first char */
    if (opt && (e = o200k_alt_a(sc, n0)))
        return e;
    if ((c0 & (C_U | C_LW)) && (e = o200k_alt_a(sc, i)))
        return e;
    if (opt && (e = o200k_alt_b(sc, n0)))
        return e;
    if ((c0 & C_U) && (e = o200k_alt_b(sc, i)))
        return e;
    if (c0 & C_N) {
        size_t j = n0;
        for (int d = 1; d < 3 && (scan_cls(sc, j, &nx) & C_N); d++)
            j = nx;
        return j;
    }
    unsigned cs = c0;
    size_t ns = n0;
    if (sc->s[i] == ' ')
        cs = scan_cls(sc, n0, &ns);
    if (cls_punct(cs)) {
        size_t j = scan_run_punct(sc, ns);
        while (j < sc->len && (sc->s[j] == '\r' || sc->s[j] == '\n' || sc->s[j] == '/'))
            j++;
        if (j >= sc->len)
            sc->hit_end = 1;
        return j;
    }
    return scan_space(sc, i);
}

static inline size_t scan_piece(const struct tokenizer *t, struct scan *sc, size_t i)
{
    return t->kind == KIND_O200K ? scan_o200k(sc, i) : scan_cl100k(sc, i);
}

/* The end of the bounded piece at i of s[0..len) (the whole text, or what a stream has so far):
 * the matcher runs on the window s[i .. i + PIECE_WINDOW) (extended to a character's end), and
 * a piece longer than PIECE_MAX is cut at the start of the character that holds byte
 * i + PIECE_MAX. A run of one class is then cut every PIECE_MAX bytes, and the matcher reads
 * at most one window per piece: linear time, bounded memory. Any text in which no run is
 * longer than PIECE_MAX is split exactly as by the regex. sc->len is set to the window's end;
 * sc->hit_end tells whether the matcher looked at it. */
static inline size_t piece_end(const struct tokenizer *t, struct scan *sc, size_t len, size_t i)
{
    size_t lim = len;
    if (len - i > PIECE_WINDOW) {
        lim = i + PIECE_WINDOW;
        while (lim < len && (sc->s[lim] & 0xC0) == 0x80)
            lim++;
    }
    sc->len = lim;
    size_t e = scan_piece(t, sc, i);
    if (e - i > PIECE_MAX) {
        e = i + PIECE_MAX;
        while ((sc->s[e] & 0xC0) == 0x80)
            e--;
    }
    return e;
}

/* ---- invalid UTF-8 ------------------------------------------------------------------------ */

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Append s[0..n) to out with every maximal ill-formed subsequence replaced by U+FFFD (the
 * WHATWG decoder's rule, which TextDecoder and Node use). When final is 0 a valid but
 * unfinished sequence at the very end is left unconsumed. Returns the bytes consumed. */
static size_t text_sanitize(struct buf *out, const uint8_t *s, size_t n, int final)
{
    size_t i = 0, ok = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            lo = b == 0xE0 ? 0xA0 : 0x80;
            hi = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            lo = b == 0xF0 ? 0x90 : 0x80;
            hi = b == 0xF4 ? 0x8F : 0xBF;
        } else {
            buf_append(out, s + ok, i - ok);
            buf_append(out, REPLACEMENT, 3);
            ok = ++i;
            continue;
        }
        size_t j = i + 1, k = 0;
        for (; k < need && j < n; k++, j++) {
            if (s[j] < lo || s[j] > hi)
                break;
            lo = 0x80;
            hi = 0xBF;
        }
        if (k == need) {
            i = j;
            continue;
        }
        buf_append(out, s + ok, i - ok);
        if (j >= n && !final)
            return i;
        buf_append(out, REPLACEMENT, 3);
        i = ok = j;
    }
    buf_append(out, s + ok, n - ok);
    return n;
}

/* ---- rank table ------------------------------------------------------------------------- */

static inline uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static inline uint32_t hash_mix(uint32_t k)
{
    k *= 0xCC9E2D51u;
    k = rotl32(k, 15);
    return k * 0x1B873593u;
}

/* Must equal ttHash() in tools/convert-bpe.js. */
static inline uint32_t tok_hash(const uint8_t *p, size_t n)
{
    uint32_t h = 0x811C9DC5u ^ ((uint32_t)n * 0x9E3779B1u);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t k = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
                     (uint32_t)p[i + 3] << 24;
        h ^= hash_mix(k);
        h = rotl32(h, 13);
        h = h * 5 + 0xE6546B64u;
    }
    if (i < n) {
        uint32_t k = 0;
        for (size_t j = 0; i + j < n; j++)
            k |= (uint32_t)p[i + j] << (8 * j);
        h ^= hash_mix(k);
    }
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* a[0..n) == b[0..n), with overlapping word loads for short keys (no read outside either). */
static inline int bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n >= 8) {
        if (n > 16)
            return memcmp(a, b, n) == 0;
        return ld64(a) == ld64(b) && ld64(a + n - 8) == ld64(b + n - 8);
    }
    if (n >= 4)
        return ld32(a) == ld32(b) && ld32(a + n - 4) == ld32(b + n - 4);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* Rank of a key of n (1..max_len) bytes found by hashing, or NO_RANK. The table is used as
 * mapped, unchecked at load time, so every read is bounded here: probes stop after max_probe,
 * ranks beyond n_tokens and offsets beyond the blob never match. */
static inline uint32_t tok_rank_hashed(const struct tokenizer *t, const uint8_t *p, size_t n)
{
    uint32_t h = tok_hash(p, n);
    uint32_t tag = h >> t->rank_bits;
    uint32_t i = h & t->mask;
    for (uint32_t probe = 0; probe <= t->max_probe; probe++, i = (i + 1) & t->mask) {
        uint32_t slot = t->table[i];
        if (slot == NO_RANK)
            return NO_RANK;
        uint32_t r = slot & t->rank_mask;
        if ((slot >> t->rank_bits) == tag && r < t->n_tokens) {
            uint32_t a = t->offsets[r], b = t->offsets[r + 1];
            if (b - a == n && b <= t->blob_len && bytes_eq(t->blob + a, p, n))
                return r;
        }
    }
    return NO_RANK;
}

/* Rank of the token with bytes p[0..n), or NO_RANK. */
static inline uint32_t tok_rank(const struct tokenizer *t, const uint8_t *p, size_t n)
{
    if (n == 2)
        return t->pair2[(uint32_t)p[0] << 8 | p[1]];
    if (n == 1)
        return t->byte_rank[p[0]];
    if (n > t->max_len)
        return NO_RANK;
    return tok_rank_hashed(t, p, n);
}

/* ---- merging ------------------------------------------------------------------------------ */

/* The last long piece merged and its ids: a run of one character is cut into identical
 * pieces, and merging each again would cost ~0.3 us a byte (a 64 MiB run: 20 s). */
#define MEMO_MIN 4096 /* shorter pieces are not remembered */

struct piece_memo {
    uint8_t *bytes;
    size_t len; /* 0 = nothing remembered */
    uint32_t *ids;
    size_t n, cap;
};

static void memo_free(struct piece_memo *m)
{
    free(m->bytes);
    free(m->ids);
    memset(m, 0, sizeof *m);
}

/* Where tokens go: counted always, stored when out != NULL; with flush, out is handed over
 * and emptied every SINK_BATCH ids or so (sink_maybe_flush, between pieces); memo (optional)
 * remembers the last long piece. */
struct sink {
    struct tok_ids *out;
    size_t count;
    void (*flush)(void *arg, const uint32_t *ids, size_t n);
    void *arg;
    struct piece_memo *memo;
};

static void sink_flush(struct sink *k)
{
    if (k->flush && k->out->len) {
        k->flush(k->arg, k->out->ids, k->out->len);
        k->out->len = 0;
    }
}

static inline void sink_maybe_flush(struct sink *k)
{
    if (k->flush && k->out->len >= SINK_BATCH)
        sink_flush(k);
}

static inline void sink_put(struct sink *k, uint32_t id)
{
    k->count++;
    struct tok_ids *v = k->out;
    if (v) {
        XGROW(v->ids, v->len + 1, v->cap);
        v->ids[v->len++] = id;
    }
}

/* tiktoken's merge for 2 <= n <= BPE_SMALL: parts as boundary offsets, pair ranks rescanned. */
static void bpe_small(const struct tokenizer *t, const uint8_t *p, size_t n, struct sink *k)
{
    uint32_t pos[BPE_SMALL + 1], pair[BPE_SMALL], part[BPE_SMALL];
    size_t m = n;
    for (size_t i = 0; i < n; i++) {
        pos[i] = (uint32_t)i;
        part[i] = t->byte_rank[p[i]];
        pair[i] = i + 1 < n ? t->pair2[(uint32_t)p[i] << 8 | p[i + 1]] : NO_RANK;
    }
    pos[n] = (uint32_t)n;
    for (;;) {
        uint32_t best = NO_RANK;
        size_t b = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (pair[i] < best) {
                best = pair[i];
                b = i;
            }
        if (best == NO_RANK)
            break;
        /* parts b and b + 1 become one part with token `best` */
        part[b] = best;
        for (size_t i = b + 1; i + 1 < m; i++) {
            pos[i] = pos[i + 1];
            part[i] = part[i + 1];
            pair[i] = pair[i + 1];
        }
        pos[m - 1] = pos[m];
        m--;
        pair[b] = b + 1 < m ? tok_rank(t, p + pos[b], pos[b + 2] - pos[b]) : NO_RANK;
        if (b > 0)
            pair[b - 1] = tok_rank(t, p + pos[b - 1], pos[b + 1] - pos[b - 1]);
    }
    for (size_t i = 0; i < m; i++)
        sink_put(k, part[i]);
}

/* Min-heap of (rank << 32 | start) keys. */
struct heap {
    uint64_t *v;
    size_t len, cap;
};

static void heap_push(struct heap *h, uint64_t key)
{
    XGROW(h->v, h->len + 1, h->cap);
    size_t i = h->len++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (h->v[up] <= key)
            break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = key;
}

static void heap_sift_down(struct heap *h, size_t i)
{
    uint64_t key = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && h->v[c + 1] < h->v[c])
            c++;
        if (h->v[c] >= key)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    h->v[i] = key;
}

static uint64_t heap_pop(struct heap *h)
{
    uint64_t top = h->v[0];
    h->v[0] = h->v[--h->len];
    if (h->len)
        heap_sift_down(h, 0);
    return top;
}

#define DEAD NO_RANK

/* Sort keys (rank << 32 | start) by rank, keeping the start order within a rank: LSD radix
 * on the rank with 11-bit digits. tmp has room for n keys. */
static void keys_sort(uint64_t *v, uint64_t *tmp, size_t n, uint32_t max_rank)
{
    for (int shift = 32; shift < 64 && (max_rank >> (shift - 32)) != 0; shift += 11) {
        size_t count[2048] = {0};
        for (size_t i = 0; i < n; i++)
            count[(v[i] >> shift) & 2047]++;
        size_t sum = 0;
        for (size_t d = 0; d < 2048; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(v[i] >> shift) & 2047]++] = v[i];
        memcpy(v, tmp, n * sizeof *v);
    }
}

/* Candidate pairs of bpe_long(), smallest key first: the initial pairs (sorted array or part of
 * the heap), a few FIFOs that take keys pushed in increasing order (merging runs of a repeated
 * pattern pushes several such interleaved sequences) and a heap for everything else. */
#define CAND_FIFOS 4

struct fifo {
    uint64_t *v;
    size_t head, len, cap;
};

struct cands {
    const uint64_t *init;
    size_t ninit, cur;
    struct fifo q[CAND_FIFOS];
    struct heap h;
};

static void cands_push(struct cands *c, uint64_t key)
{
    for (int i = 0; i < CAND_FIFOS; i++) {
        struct fifo *f = &c->q[i];
        if (f->head == f->len)
            f->head = f->len = 0;
        if (f->len == 0 || f->v[f->len - 1] <= key) {
            XGROW(f->v, f->len + 1, f->cap);
            f->v[f->len++] = key;
            return;
        }
    }
    heap_push(&c->h, key);
}

static int cands_pop(struct cands *c, uint64_t *key)
{
    uint64_t best = UINT64_MAX;
    int from = -3; /* -1 init, -2 heap, else a fifo */
    if (c->cur < c->ninit) {
        best = c->init[c->cur];
        from = -1;
    }
    if (c->h.len && c->h.v[0] < best) {
        best = c->h.v[0];
        from = -2;
    }
    for (int i = 0; i < CAND_FIFOS; i++) {
        const struct fifo *f = &c->q[i];
        if (f->head < f->len && f->v[f->head] < best) {
            best = f->v[f->head];
            from = i;
        }
    }
    if (from == -3)
        return 0;
    if (from == -1)
        c->cur++;
    else if (from == -2)
        heap_pop(&c->h);
    else
        c->q[from].head++;
    *key = best;
    return 1;
}

/* The same merge order for long pieces in O(n log n): parts are a linked list indexed by their
 * start offset; candidate pairs are keyed by (rank, start), so the lowest rank and then the
 * leftmost pair comes first. An entry is stale when its pair has changed since. */
static void bpe_long(const struct tokenizer *t, const uint8_t *p, size_t n, struct sink *k)
{
    uint32_t *next = xmalloc(4 * n * sizeof *next);
    uint32_t *prev = next + n, *pair = next + 2 * n, *part = next + 3 * n;
    uint64_t *init = xmalloc(2 * n * sizeof *init), *tmp = init + n;
    size_t ninit = 0;
    uint32_t max_rank = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)i - 1; /* 0 - 1 = NO_RANK: no previous part */
        part[i] = t->byte_rank[p[i]];
        pair[i] = i + 1 < n ? t->pair2[(uint32_t)p[i] << 8 | p[i + 1]] : NO_RANK;
        if (pair[i] != NO_RANK) {
            init[ninit++] = (uint64_t)pair[i] << 32 | i;
            if (pair[i] > max_rank)
                max_rank = pair[i];
        }
    }
    struct cands c;
    memset(&c, 0, sizeof c);
    if (ninit >= BPE_SORT_MIN) {
        keys_sort(init, tmp, ninit, max_rank);
        c.init = init;
        c.ninit = ninit;
    } else { /* a shorter piece: heapify the initial pairs instead */
        c.h.v = init;
        c.h.len = ninit;
        c.h.cap = 2 * n; /* init and tmp are one block */
        init = NULL;
        for (size_t i = c.h.len / 2; i-- > 0;)
            heap_sift_down(&c.h, i);
    }
    uint64_t key;
    while (cands_pop(&c, &key)) {
        uint32_t r = (uint32_t)(key >> 32), i = (uint32_t)key;
        if (part[i] == DEAD || pair[i] != r)
            continue;
        uint32_t j = next[i];
        part[i] = r;
        part[j] = DEAD;
        next[i] = next[j];
        if (next[i] < n)
            prev[next[i]] = i;
        uint32_t end_i = next[i];
        if (end_i < n) {
            uint32_t end2 = next[end_i];
            pair[i] = tok_rank(t, p + i, end2 - i);
            if (pair[i] != NO_RANK)
                cands_push(&c, (uint64_t)pair[i] << 32 | i);
        } else
            pair[i] = NO_RANK;
        if (prev[i] != NO_RANK) {
            uint32_t a = prev[i];
            pair[a] = tok_rank(t, p + a, end_i - a);
            if (pair[a] != NO_RANK)
                cands_push(&c, (uint64_t)pair[a] << 32 | a);
        }
    }
    for (uint32_t i = 0; i < n; i = next[i])
        sink_put(k, part[i]);
    for (int i = 0; i < CAND_FIFOS; i++)
        free(c.q[i].v);
    free(c.h.v); /* the init block itself when the heap started in it */
    free(init);
    free(next);
}

/* A long piece: the ids of the last one again when it is the same bytes, else merged (and
 * remembered when k has a memo). */
static void encode_long(const struct tokenizer *t, const uint8_t *p, size_t n, struct sink *k)
{
    struct piece_memo *m = k->memo;
    if (!m || n < MEMO_MIN) {
        bpe_long(t, p, n, k);
        return;
    }
    if (m->len == n && memcmp(m->bytes, p, n) == 0) {
        if (k->out) {
            for (size_t i = 0; i < m->n; i++)
                sink_put(k, m->ids[i]);
        } else
            k->count += m->n;
        return;
    }
    size_t before = k->count, at = k->out ? k->out->len : 0;
    bpe_long(t, p, n, k);
    m->n = k->count - before;
    if (k->out && m->n) { /* a memo serves sinks of one kind: ids kept, or counts only */
        XGROW(m->ids, m->n, m->cap);
        memcpy(m->ids, k->out->ids + at, m->n * sizeof *m->ids);
    }
    m->bytes = xrealloc(m->bytes, n);
    memcpy(m->bytes, p, n);
    m->len = n;
}

static inline void encode_piece(const struct tokenizer *t, const uint8_t *p, size_t n,
                                struct sink *k)
{
    uint32_t r = tok_rank(t, p, n);
    if (r != NO_RANK)
        sink_put(k, r);
    else if (n <= BPE_SMALL)
        bpe_small(t, p, n, k);
    else
        encode_long(t, p, n, k);
}

/* A per-call cache of whole pieces for long texts, where words repeat: one probe into 256 kB
 * instead of a walk through the multi-megabyte rank table. Direct-mapped; pieces of 3..22
 * bytes that give at most 8 tokens. In count-only calls the ids are not kept. */
#define PCACHE_BITS 12
#define PCACHE_KEY 22
#define PCACHE_IDS 8
#define PCACHE_MIN_TEXT 32768 /* smaller texts are not worth the cache's setup */

struct pcache_ent {
    uint32_t hash;
    uint8_t len; /* 0 = empty */
    uint8_t nids;
    uint8_t key[PCACHE_KEY];
    uint32_t ids[PCACHE_IDS];
};

static void encode_piece_cached(const struct tokenizer *t, const uint8_t *p, size_t n,
                                struct sink *k, struct pcache_ent *cache)
{
    if (n < 3 || n > PCACHE_KEY) {
        encode_piece(t, p, n, k);
        return;
    }
    uint32_t h = tok_hash(p, n);
    struct pcache_ent *e = &cache[h & ((1u << PCACHE_BITS) - 1)];
    if (e->hash == h && e->len == n && bytes_eq(e->key, p, n)) {
        if (k->out) {
            for (unsigned i = 0; i < e->nids; i++)
                sink_put(k, e->ids[i]);
        } else
            k->count += e->nids;
        return;
    }
    size_t before = k->count;
    encode_piece(t, p, n, k);
    size_t got = k->count - before;
    if (got <= PCACHE_IDS) {
        e->hash = h;
        e->len = (uint8_t)n;
        e->nids = (uint8_t)got;
        memcpy(e->key, p, n);
        if (k->out)
            memcpy(e->ids, k->out->ids + k->out->len - got, got * sizeof e->ids[0]);
    }
}

/* Encode valid UTF-8. */
static void encode_valid(const struct tokenizer *t, const uint8_t *s, size_t len, struct sink *k)
{
    struct scan sc = {s, len, 0, t};
    size_t i = 0;
    if (len >= PCACHE_MIN_TEXT) { /* a long text: its pieces are bounded (piece_end) */
        struct pcache_ent *cache = xcalloc(1u << PCACHE_BITS, sizeof *cache);
        while (i < len) {
            size_t e = piece_end(t, &sc, len, i);
            encode_piece_cached(t, s + i, e - i, k, cache);
            sink_maybe_flush(k);
            i = e;
        }
        free(cache);
    } else if (t->kind == KIND_O200K) {
        while (i < len) {
            size_t e = scan_o200k(&sc, i);
            encode_piece(t, s + i, e - i, k);
            i = e;
        }
    } else {
        while (i < len) {
            size_t e = scan_cl100k(&sc, i);
            encode_piece(t, s + i, e - i, k);
            i = e;
        }
    }
}

static void encode_invalid(const struct tokenizer *t, const uint8_t *s, size_t len,
                           struct sink *k);

static void encode_any(const struct tokenizer *t, const char *text, size_t len, struct sink *k)
{
    const uint8_t *s = (const uint8_t *)text;
    struct piece_memo memo;
    memset(&memo, 0, sizeof memo);
    if (len > PIECE_MAX)
        k->memo = &memo;
    if (utf8_valid((const char *)s, len))
        encode_valid(t, s, len, k);
    else
        encode_invalid(t, s, len, k);
    k->memo = NULL;
    memo_free(&memo);
}

void tok_ids_free(struct tok_ids *v)
{
    free(v->ids);
    v->ids = NULL;
    v->len = v->cap = 0;
}

void tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
                      struct tok_ids *out)
{
    struct sink k = {out, 0, NULL, NULL, NULL};
    encode_any(tok, text, len, &k);
}

size_t tokenizer_count(const struct tokenizer *tok, const char *text, size_t len)
{
    struct sink k = {NULL, 0, NULL, NULL, NULL};
    encode_any(tok, text, len, &k);
    return k.count;
}

size_t tokenizer_encode_each(const struct tokenizer *tok, const char *text, size_t len,
                             void (*fn)(void *arg, const uint32_t *ids, size_t n), void *arg)
{
    struct tok_ids v = TOK_IDS_INIT;
    struct sink k = {&v, 0, fn, arg, NULL};
    encode_any(tok, text, len, &k);
    sink_flush(&k);
    tok_ids_free(&v);
    return k.count;
}

/* The end of the piece at i of s[0..len), split as encode_valid() splits the whole text. */
static inline size_t ends_piece(const struct tokenizer *t, struct scan *sc, size_t len,
                                size_t i)
{
    if (len >= PCACHE_MIN_TEXT)
        return piece_end(t, sc, len, i);
    sc->len = len;
    return scan_piece(t, sc, i);
}

static inline int ends_alpha(uint8_t c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static inline int ends_alnum(uint8_t c)
{
    return (c >= '0' && c <= '9') || ends_alpha(c);
}

/* 1 when every split of s (either encoding's pattern, bounded or not) has a piece start at i
 * (0 < i < len): no piece holds both s[i - 1] and s[i]. After a newline before a letter or a
 * digit: a piece takes a newline only as whitespace (none holds a letter or a digit), as the
 * end of punctuation (`[\r\n]*`, o200k's `[\r\n/]*`: then only newlines and slashes), and the
 * optional first character of a word or a number is never one. A space between a letter or a
 * digit and a letter: a word's piece holds no space but its first character, and a number's
 * none. */
static inline int ends_sync(const uint8_t *s, size_t len, size_t i)
{
    if (s[i - 1] == '\n')
        return ends_alnum(s[i]);
    return s[i] == ' ' && i + 1 < len && ends_alnum(s[i - 1]) && ends_alpha(s[i + 1]);
}

int tokenizer_piece_start(const char *text, size_t len, size_t i)
{
    return i > 0 && i < len && ends_sync((const uint8_t *)text, len, i);
}

#define ENDS_SYNC_SEARCH 4096 /* bytes looked through for a piece start before the tail */

/* Encode the pieces of s[from..len) into k (the split resumed at from, a piece start). */
static void ends_encode_from(const struct tokenizer *tok, const uint8_t *s, size_t len,
                             size_t from, struct sink *k)
{
    struct scan sc = {s, len, 0, tok};
    for (size_t i = from; i < len;) {
        size_t e = ends_piece(tok, &sc, len, i);
        encode_piece(tok, s + i, e - i, k);
        i = e;
    }
}

/* The last tail ids of s[0..len) into k, from a piece start found near the end (ends_sync),
 * at or after lo (where the head's pieces end): the text after it is encoded, from further
 * back each time until it holds tail ids. 0, or -1 (k emptied) when no start is found near
 * where one is wanted. */
static int ends_tail_synced(const struct tokenizer *tok, const uint8_t *s, size_t len,
                            size_t lo, size_t tail, struct sink *k)
{
    size_t t0 = k->out->len;
    for (size_t want = tail * 4 + 64;; want *= 4) {
        size_t p = len - lo > want ? len - want : lo, stop = p - lo > ENDS_SYNC_SEARCH
                                                                ? p - ENDS_SYNC_SEARCH
                                                                : lo;
        while (p > stop && !ends_sync(s, len, p))
            p--;
        if (p == stop && p != lo)
            break;
        k->out->len = t0;
        k->count = 0;
        ends_encode_from(tok, s, len, p, k);
        if (k->count >= tail)
            return 0;
        if (p == lo)
            break; /* every piece after the head's: fewer than tail ids */
    }
    k->out->len = t0;
    k->count = 0;
    return -1;
}

/* The last tail ids of s[0..len) into k with no piece start known near the end: the pieces
 * after lo are found one after another (the starts of the last tail of them kept: each piece
 * is one id or more), counted back from the last until they hold tail ids, and those encoded.
 * 0, or -1 when the pieces after lo hold fewer. */
static int ends_tail_pieces(const struct tokenizer *tok, const uint8_t *s, size_t len,
                            size_t lo, size_t tail, struct sink *k)
{
    struct scan sc = {s, len, 0, tok};
    size_t *starts = xmalloc(tail * sizeof *starts), pieces = 0;
    for (size_t i = lo; i < len; pieces++) {
        starts[pieces % tail] = i;
        i = ends_piece(tok, &sc, len, i);
    }
    struct piece_memo cmemo; /* a memo serves sinks of one kind (encode_long) */
    memset(&cmemo, 0, sizeof cmemo);
    struct sink kc = {NULL, 0, NULL, NULL, k->memo ? &cmemo : NULL};
    size_t from = pieces, least = pieces > tail ? pieces - tail : 0;
    while (kc.count < tail && from > least) {
        from--;
        size_t a = starts[from % tail], b = from + 1 < pieces ? starts[(from + 1) % tail] : len;
        encode_piece(tok, s + a, b - a, &kc);
    }
    int rc = kc.count >= tail ? 0 : -1;
    if (rc == 0)
        ends_encode_from(tok, s, len, starts[from % tail], k);
    free(starts);
    memo_free(&cmemo);
    return rc;
}

int tokenizer_encode_ends(const struct tokenizer *tok, const char *text, size_t len,
                          size_t head, size_t tail, struct tok_ids *h, struct tok_ids *t)
{
    const uint8_t *s = (const uint8_t *)text;
    if (!tail || !utf8_valid(text, len))
        return -1;
    struct piece_memo memo;
    memset(&memo, 0, sizeof memo);
    size_t h0 = h->len, t0 = t->len;
    struct sink kh = {h, 0, NULL, NULL, len > PIECE_MAX ? &memo : NULL};
    /* the head: the first pieces, until they hold head ids */
    struct scan sc = {s, len, 0, tok};
    size_t i = 0;
    while (i < len && kh.count < head) {
        size_t e = ends_piece(tok, &sc, len, i);
        encode_piece(tok, s + i, e - i, &kh);
        i = e;
    }
    /* the tail, from the pieces after the head's only (the two ends never share one) */
    struct sink kt = {t, 0, NULL, NULL, kh.memo};
    int rc = kh.count >= head && i < len ? ends_tail_synced(tok, s, len, i, tail, &kt) : -1;
    if (rc != 0 && kh.count >= head && i < len) /* (ends_tail_synced left t as it was) */
        rc = ends_tail_pieces(tok, s, len, i, tail, &kt);
    if (rc == 0) {
        h->len = h0 + head; /* a piece's ids past the head's */
        memmove(t->ids + t0, t->ids + t->len - tail, tail * sizeof *t->ids);
        t->len = t0 + tail;
    } else {
        h->len = h0;
        t->len = t0;
    }
    memo_free(&memo);
    return rc;
}

int tokenizer_decode(const struct tokenizer *tok, const uint32_t *ids, size_t n, struct buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= tok->n_tokens)
            return -1;
        uint32_t a = tok->offsets[ids[i]], b = tok->offsets[ids[i] + 1];
        if (a > b || b > tok->blob_len)
            return -1;
        buf_append(out, tok->blob + a, b - a);
    }
    return 0;
}

const char *tokenizer_name(const struct tokenizer *tok)
{
    return tok->name;
}

size_t tokenizer_vocab_size(const struct tokenizer *tok)
{
    return tok->n_tokens;
}

/* ---- loading ------------------------------------------------------------------------------ */

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Check the mapped file's header: every section must lie inside the file. The sections are
 * used without a pass over them (lookups bound their own reads, see tok_rank()), so opening
 * touches only a few pages. */
static const char *tokenizer_check(struct tokenizer *t, const uint8_t *m, size_t size,
                                   const char *encoding)
{
    if (size < HDR_SIZE || memcmp(m, "TTBPE001", 8) != 0)
        return "not a tokterm rank table (bad magic)";
    uint32_t hdr = rd32(m + 8), n = rd32(m + 12), bits = rd32(m + 16), rbits = rd32(m + 20);
    uint32_t maxlen = rd32(m + 24), blob_len = rd32(m + 28), off_offsets = rd32(m + 32);
    uint32_t off_table = rd32(m + 36), off_pair2 = rd32(m + 40), off_blob = rd32(m + 44);
    uint32_t fsize = rd32(m + 48), off_ucd = rd32(m + 56), n_ucd = rd32(m + 60);
    uint32_t max_probe = rd32(m + 88);
    if (hdr != HDR_SIZE || fsize != size)
        return "rank table has a bad header or is truncated";
    if (n < 256 || bits < 9 || bits > 28 || rbits < 9 || rbits > 24 || n >= (1u << rbits) - 1 ||
        (1u << bits) <= n || maxlen == 0 || max_probe >= (1u << bits))
        return "rank table header has impossible sizes";
    uint64_t slots = 1ull << bits;
    if (off_offsets % 4 || off_table % 4 || off_pair2 % 4 || off_ucd % 4 ||
        (uint64_t)off_offsets + 4ull * (n + 1) > size || off_table + 4 * slots > size ||
        (uint64_t)off_pair2 + 4ull * 65536 > size || (uint64_t)off_blob + blob_len > size ||
        (uint64_t)off_ucd + 12ull * n_ucd > size)
        return "rank table sections lie outside the file";
    if (memchr(m + 64, 0, 24) == NULL || strcmp((const char *)m + 64, encoding) != 0)
        return "rank table is for another encoding";
    t->n_tokens = n;
    t->mask = (uint32_t)(slots - 1);
    t->rank_bits = rbits;
    t->rank_mask = (1u << rbits) - 1;
    t->max_len = maxlen;
    t->max_probe = max_probe;
    t->blob_len = blob_len;
    t->offsets = (const uint32_t *)(m + off_offsets);
    t->table = (const uint32_t *)(m + off_table);
    t->pair2 = (const uint32_t *)(m + off_pair2);
    t->blob = m + off_blob;
    t->ucd = (const uint32_t *)(m + off_ucd);
    t->n_ucd = n_ucd;
    for (uint32_t i = 0; i < n_ucd; i++) {
        const uint32_t *r = t->ucd + 3 * i;
        if (r[0] > r[1] || r[1] > 0x10FFFF || r[2] > 63 || (i && r[0] <= r[-2]))
            return "rank table Unicode overrides are corrupt";
    }
    if (n_ucd && t->ucd[0] < 0x80)
        return "rank table Unicode overrides change ASCII";
    cls_ascii(t);
    /* Ranks of the 256 single bytes. The tiktoken encodings give them ranks 0-255, which are
     * read in one pass over the start of the offsets and the blob; looking each byte up in
     * the hash table instead would touch most of its pages at every start. */
    uint8_t found[256] = {0};
    int have = 0;
    for (uint32_t r = 0; r < 256 && r < n; r++) {
        uint32_t o = t->offsets[r], e = t->offsets[r + 1];
        if (e == o + 1 && e <= blob_len && !found[t->blob[o]]) {
            found[t->blob[o]] = 1;
            t->byte_rank[t->blob[o]] = r;
            have++;
        }
    }
    for (uint32_t b = 0; have < 256 && b < 256; b++) {
        if (found[b])
            continue;
        uint8_t byte = (uint8_t)b;
        uint32_t r = tok_rank_hashed(t, &byte, 1);
        if (r == NO_RANK)
            return "rank table lacks a single-byte token";
        t->byte_rank[b] = r;
    }
    return NULL;
}

/* The table file of an encoding: its path (the caller frees it), or NULL with *err set. */
static char *tok_find(const char *encoding, enum tok_kind *kind, char **err)
{
    if (encoding && strcmp(encoding, "o200k_base") == 0)
        *kind = KIND_O200K;
    else if (encoding && strcmp(encoding, "cl100k_base") == 0)
        *kind = KIND_CL100K;
    else {
        if (err)
            *err = xasprintf("unknown encoding '%s' (known: o200k_base, cl100k_base)",
                             encoding ? encoding : "(null)");
        return NULL;
    }
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1) {
        if (err)
            *err = xstrdup("the tokenizer's rank tables need a little-endian host");
        return NULL;
    }
    char file[64];
    snprintf(file, sizeof file, "%s.bin", encoding);
    struct buf tried = BUF_INIT;
    char *path = util_data_path(file, &tried);
    if (!path && err)
        *err = xasprintf("cannot find %s (looked for %s; set TOKTERM_DATADIR)", file,
                         buf_str(&tried));
    buf_free(&tried);
    return path;
}

int tokenizer_available(const char *encoding, char **err)
{
    enum tok_kind kind;
    char *path = tok_find(encoding, &kind, err);
    int found = path != NULL;
    free(path);
    return found ? 0 : -1;
}

/* A tokenizer in pages of its own, zero and not faulted in until written: its class table
 * (128 KiB) is filled a block at a time on first use, so an English text touches only its first
 * pages. From the heap, calloc would clear all of it at every open (33 fresh 4 KiB pages, ~0.4
 * ms on the virtual machines tokterm is measured on: the chat opens one as each prompt leaves). */
static struct tokenizer *tok_alloc(void)
{
    void *p = mmap(NULL, sizeof(struct tokenizer), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        xmalloc_die(sizeof(struct tokenizer));
    return p;
}

struct tokenizer *tokenizer_open(const char *encoding, char **err)
{
    enum tok_kind kind;
    char *path = tok_find(encoding, &kind, err);
    if (!path)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (err)
            *err = xasprintf("%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(path);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *map = size >= HDR_SIZE ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        if (err)
            *err = xasprintf("%s: %s", path, size < HDR_SIZE ? "file too small"
                                                             : strerror(map_errno));
        free(path);
        return NULL;
    }
    struct tokenizer *t = tok_alloc();
    pthread_mutex_init(&t->cls_lock, NULL);
    t->map = map;
    t->map_len = size;
    t->kind = kind;
    snprintf(t->name, sizeof t->name, "%s", encoding);
    const char *bad = tokenizer_check(t, map, size, encoding);
    if (bad) {
        if (err)
            *err = xasprintf("%s: %s", path, bad);
        tokenizer_close(t);
        free(path);
        return NULL;
    }
    free(path);
    return t;
}

void tokenizer_close(struct tokenizer *tok)
{
    if (!tok)
        return;
    if (tok->map)
        munmap(tok->map, tok->map_len);
    pthread_mutex_destroy(&tok->cls_lock);
    munmap(tok, sizeof *tok);
}

/* ---- models -------------------------------------------------------------------------------- */

struct model_row {
    char *prefix;
    const char *encoding;
    long context_window;
    long max_output;
};

static struct model_row *models;
static size_t models_len;
static pthread_once_t models_once = PTHREAD_ONCE_INIT;

static void models_load(void)
{
    char *path = util_data_path("models.tsv", NULL);
    if (!path)
        return;
    size_t len;
    char *text = util_read_file(path, &len, 1 << 20);
    free(path);
    if (!text)
        return;
    size_t cap = 0;
    for (char *cur = text, *line; (line = util_next_data_line(&cur));) {
        char *f[4] = {line, NULL, NULL, NULL};
        for (int i = 1; i < 4; i++) {
            char *tab = f[i - 1] ? strchr(f[i - 1], '\t') : NULL;
            if (tab) {
                *tab = '\0';
                f[i] = tab + 1;
            }
        }
        const char *enc;
        if (f[1] && strcmp(f[1], "o200k_base") == 0)
            enc = "o200k_base";
        else if (f[1] && strcmp(f[1], "cl100k_base") == 0)
            enc = "cl100k_base";
        else if (f[1] && strcmp(f[1], "-") == 0)
            enc = NULL; /* no public tokenizer (Claude, Gemini): a window, counts estimated */
        else
            continue;
        XGROW(models, models_len + 1, cap);
        struct model_row *r = &models[models_len++];
        r->prefix = xstrdup(f[0]);
        r->encoding = enc;
        r->context_window = f[2] ? strtol(f[2], NULL, 10) : 0;
        r->max_output = f[3] ? strtol(f[3], NULL, 10) : 0;
    }
    free(text);
}

int tokenizer_model_info(const char *model, struct tok_model_info *info)
{
    if (!model)
        return -1;
    pthread_once(&models_once, models_load);
    const char *slash = strrchr(model, '/');
    if (slash)
        model = slash + 1;
    if (strncmp(model, "ft:", 3) == 0)
        model += 3;
    const struct model_row *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < models_len; i++) {
        size_t l = strlen(models[i].prefix);
        if (l > best_len && strncmp(model, models[i].prefix, l) == 0) {
            best = &models[i];
            best_len = l;
        }
    }
    if (!best)
        return -1;
    if (info) {
        info->prefix = best->prefix;
        info->encoding = best->encoding;
        info->context_window = best->context_window;
        info->max_output = best->max_output;
    }
    return 0;
}

const char *tokenizer_encoding_for_model(const char *model)
{
    struct tok_model_info info;
    return tokenizer_model_info(model, &info) == 0 ? info.encoding : NULL;
}

/* ---- chat ---------------------------------------------------------------------------------- */

size_t tokenizer_chat_count(const struct tokenizer *tok, const struct tok_chat_msg *msgs,
                            size_t n)
{
    size_t total = 3; /* every reply is primed with <|start|>assistant<|message|> */
    for (size_t i = 0; i < n; i++) {
        const struct tok_chat_msg *m = &msgs[i];
        total += 3; /* <|start|>{role}<|message|>{content}<|end|> framing */
        if (m->role)
            total += tokenizer_count(tok, m->role, strlen(m->role));
        if (m->content)
            total += tokenizer_count(tok, m->content, strlen(m->content));
        if (m->name)
            total += 1 + tokenizer_count(tok, m->name, strlen(m->name));
    }
    return total;
}

/* ---- streaming ----------------------------------------------------------------------------- */

struct tok_stream {
    const struct tokenizer *tok;
    struct buf pending; /* sanitised text from the start of the first unfinished piece */
    uint8_t tail[4];    /* raw bytes of an unfinished UTF-8 sequence */
    size_t tail_len;
    size_t committed; /* tokens of the finished pieces before pending */
    size_t cached;    /* tokenizer_stream_count() result, valid when cache_ok */
    int cache_ok;
    size_t retry_at;  /* try to commit once pending is this long (see tokenizer_stream_feed) */
    struct piece_memo memo; /* the last long piece counted */
};

struct tok_stream *tokenizer_stream_new(const struct tokenizer *tok)
{
    struct tok_stream *st = xcalloc(1, sizeof *st);
    st->tok = tok;
    return st;
}

/* Encode into k and drop the pieces of pending that more text can no longer change: those
 * whose matcher did not look at the end of pending, and any piece once a whole window from its
 * start is there (piece_end never looks further). pending then holds less than a window. */
static void stream_commit(struct tok_stream *st, struct sink *k)
{
    const uint8_t *s = (const uint8_t *)st->pending.data;
    size_t len = st->pending.len, i = 0;
    struct scan sc = {s, len, 0, st->tok};
    while (i < len) {
        sc.hit_end = 0;
        size_t e = piece_end(st->tok, &sc, len, i);
        if (sc.hit_end && len - i < PIECE_WINDOW)
            break;
        encode_piece(st->tok, s + i, e - i, k);
        sink_maybe_flush(k);
        i = e;
    }
    if (i) {
        memmove(st->pending.data, st->pending.data + i, len - i);
        st->pending.len = len - i;
        st->pending.data[st->pending.len] = '\0';
    }
}

/* Append delta (sanitised; an unfinished UTF-8 sequence waits in tail) to pending. */
static void stream_take(struct tok_stream *st, const char *delta, size_t len)
{
    const uint8_t *in = (const uint8_t *)delta;
    uint8_t *joined = NULL;
    if (st->tail_len) {
        joined = xmalloc(st->tail_len + len);
        memcpy(joined, st->tail, st->tail_len);
        memcpy(joined + st->tail_len, delta, len);
        len += st->tail_len;
        in = joined;
    }
    size_t used = text_sanitize(&st->pending, in, len, 0);
    st->tail_len = len - used; /* at most 3 */
    memcpy(st->tail, in + used, st->tail_len);
    free(joined);
}

void tokenizer_stream_feed(struct tok_stream *st, const char *delta, size_t len)
{
    if (!len)
        return;
    st->cache_ok = 0;
    stream_take(st, delta, len);
    /* Committing rescans pending from its first piece; after an attempt, the next one waits
     * until pending has grown by a quarter (64 bytes at least), so a long unfinished piece fed
     * in small deltas costs O(1) per byte, not O(its length). pending stays below
     * 1.25 x PIECE_WINDOW + a delta. Committing later changes no count. */
    if (st->pending.len < st->retry_at)
        return;
    struct sink k = {NULL, 0, NULL, NULL, &st->memo};
    stream_commit(st, &k);
    st->committed += k.count;
    st->retry_at = st->pending.len + (st->pending.len / 4 > 64 ? st->pending.len / 4 : 64);
}

/* Text with invalid UTF-8: sanitised and encoded a block at a time, as a stream (the result is
 * the same as for the whole sanitised text; memory stays O(block + window)). */
static void encode_invalid(const struct tokenizer *t, const uint8_t *s, size_t len,
                           struct sink *k)
{
    struct tok_stream st;
    memset(&st, 0, sizeof st);
    st.tok = t;
    const size_t block = 65536;
    for (size_t off = 0; off < len; off += block) {
        stream_take(&st, (const char *)s + off, len - off < block ? len - off : block);
        stream_commit(&st, k);
    }
    if (st.tail_len)
        text_sanitize(&st.pending, st.tail, st.tail_len, 1);
    encode_valid(t, (const uint8_t *)st.pending.data, st.pending.len, k);
    buf_free(&st.pending);
}

size_t tokenizer_stream_count(struct tok_stream *st)
{
    if (st->cache_ok)
        return st->cached;
    size_t keep = st->pending.len;
    if (st->tail_len)
        text_sanitize(&st->pending, st->tail, st->tail_len, 1);
    struct sink k = {NULL, 0, NULL, NULL, &st->memo};
    encode_valid(st->tok, (const uint8_t *)st->pending.data, st->pending.len, &k);
    if (st->pending.data) {
        st->pending.len = keep;
        st->pending.data[keep] = '\0';
    }
    st->cached = st->committed + k.count;
    st->cache_ok = 1;
    return st->cached;
}

void tokenizer_stream_reset(struct tok_stream *st)
{
    buf_reset(&st->pending);
    st->tail_len = 0;
    st->retry_at = 0;
    st->committed = 0;
    st->cached = 0;
    st->cache_ok = 0;
    memo_free(&st->memo);
}

void tokenizer_stream_free(struct tok_stream *st)
{
    if (!st)
        return;
    buf_free(&st->pending);
    memo_free(&st->memo);
    free(st);
}
