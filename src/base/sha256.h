/* sha256.h - SHA-256 (FIPS 180-4), incremental and one-shot. No I/O, no allocation. */
#ifndef TT_SHA256_H
#define TT_SHA256_H
#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32

struct sha256 {
    uint32_t h[8];
    uint64_t total;        /* bytes hashed so far */
    unsigned char blk[64]; /* pending partial block */
    size_t fill;           /* bytes in blk */
};

/* Start a new hash in ctx. */
void sha256_init(struct sha256 *ctx);
/* Hash n more bytes of p. */
void sha256_update(struct sha256 *ctx, const void *p, size_t n);
/* Finish and write the 32-byte digest to out; ctx must be re-initialised before reuse. */
void sha256_final(struct sha256 *ctx, unsigned char out[SHA256_DIGEST_LEN]);
/* One-shot digest of p[0..n) into out. */
void sha256_digest(const void *p, size_t n, unsigned char out[SHA256_DIGEST_LEN]);
/* Write the 64 lowercase hex digits of a digest plus a NUL to hex (65 bytes). */
void sha256_hex(const unsigned char digest[SHA256_DIGEST_LEN], char hex[65]);

#endif
