/* sha256.c - SHA-256 as specified in FIPS 180-4, section 6.2. */
#include "config.h"
#include "base/sha256.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha256_block_c(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha256_k[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(TT_NO_SHA_NI)
#include "base/cpu.h"
#include <immintrin.h>

/* The x86 SHA extensions (2 rounds an instruction): a response cache key over a request of
 * hundreds of kB took 60 instructions a byte in C (10 % of a resume of 10,000 messages).
 * Rounds on (A,B,E,F) / (C,D,G,H) as the instructions want them; message words 4 at a time:
 * W[j] = msg2(msg1(W[j-4], W[j-3]) + W[t-7..t-4], W[j-1]). */
__attribute__((target("sha,sse4.1,ssse3"))) static void sha256_block_ni(uint32_t h[8],
                                                                        const unsigned char *p)
{
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i st1 = _mm_loadu_si128((const __m128i *)&h[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);           /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);           /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);   /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);        /* CDGH */
    __m128i abef = st0, cdgh = st1, m[16];
    for (int j = 0; j < 16; j++) {
        if (j < 4) {
            m[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), mask);
        } else {
            __m128i t = _mm_sha256msg1_epu32(m[j - 4], m[j - 3]);
            t = _mm_add_epi32(t, _mm_alignr_epi8(m[j - 1], m[j - 2], 4));
            m[j] = _mm_sha256msg2_epu32(t, m[j - 1]);
        }
        __m128i msg = _mm_add_epi32(m[j], _mm_loadu_si128((const __m128i *)&sha256_k[4 * j]));
        st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
        msg = _mm_shuffle_epi32(msg, 0x0E);
        st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
    }
    st0 = _mm_add_epi32(st0, abef);
    st1 = _mm_add_epi32(st1, cdgh);
    tmp = _mm_shuffle_epi32(st0, 0x1B);           /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);           /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);        /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);           /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

/* 1: the CPU has the SHA extensions and SSE4.1 (asked once). */
static int sha256_has_ni(void)
{
    static int has = -1;
    if (has < 0) {
        has = cpu_sha_ni() && !getenv("TOKTERM_NO_SHA_NI");
    }
    return has;
}

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    if (sha256_has_ni())
        sha256_block_ni(h, p);
    else
        sha256_block_c(h, p);
}
#else
#define sha256_block sha256_block_c
#endif

void sha256_init(struct sha256 *ctx)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->h, iv, sizeof iv);
    ctx->total = 0;
    ctx->fill = 0;
}

void sha256_update(struct sha256 *ctx, const void *data, size_t n)
{
    const unsigned char *p = data;
    ctx->total += n;
    if (ctx->fill) {
        size_t take = 64 - ctx->fill < n ? 64 - ctx->fill : n;
        memcpy(ctx->blk + ctx->fill, p, take);
        ctx->fill += take;
        p += take;
        n -= take;
        if (ctx->fill < 64)
            return;
        sha256_block(ctx->h, ctx->blk);
        ctx->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64)
        sha256_block(ctx->h, p);
    memcpy(ctx->blk, p, n);
    ctx->fill = n;
}

void sha256_final(struct sha256 *ctx, unsigned char out[SHA256_DIGEST_LEN])
{
    uint64_t bits = ctx->total * 8;
    ctx->blk[ctx->fill++] = 0x80;
    if (ctx->fill > 56) {
        memset(ctx->blk + ctx->fill, 0, 64 - ctx->fill);
        sha256_block(ctx->h, ctx->blk);
        ctx->fill = 0;
    }
    memset(ctx->blk + ctx->fill, 0, 56 - ctx->fill);
    for (int i = 0; i < 8; i++)
        ctx->blk[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_block(ctx->h, ctx->blk);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(ctx->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(ctx->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(ctx->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)ctx->h[i];
    }
}

void sha256_digest(const void *p, size_t n, unsigned char out[SHA256_DIGEST_LEN])
{
    struct sha256 ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, p, n);
    sha256_final(&ctx, out);
}

void sha256_hex(const unsigned char digest[SHA256_DIGEST_LEN], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_LEN; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}
