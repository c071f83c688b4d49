/* attach.c - files that go with a prompt: classification by bytes, text encodings, image
 * headers, PDF pages, provider limits and token estimates, pdftotext. See attach.h. */
#include "config.h"
#include "core/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sha256.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "proto/api.h"
#include "text/markdown.h"

/* Limits of each provider, from their documentation (bytes of the file, not of its base64):
 *   OpenAI: images up to 20 MB each (50 MB of images per request); PDF file inputs up to
 *     32 MB per request.
 *   Anthropic: images up to 5 MB each as base64 (so 3.75 MiB of file) and 8000x8000 pixels;
 *     a request up to 32 MB, PDFs within it (and 100 pages).
 *   Gemini: inline data up to 20 MB for the whole request, base64 included: 15 MB of files.
 *   Other OpenAI-compatible servers: OpenAI's image limit (their own is rarely documented). */
#define MB (1000.0 * 1000.0)
struct attach_limits {
    double image, pdf, total; /* bytes per image, per PDF, of the message's files */
    int max_px;               /* the longest side of an image, 0 = none */
    int max_pages;            /* pages of a PDF, 0 = none */
};
static const struct attach_limits attach_limit_table[] = {
    [ATTACH_OPENAI] = {20 * MB, 32 * MB, 50 * MB, 0, 0},
    [ATTACH_COMPAT] = {20 * MB, 32 * MB, 50 * MB, 0, 0},
    [ATTACH_ANTHROPIC] = {5 * 1024 * 1024 * 3.0 / 4, 32 * MB * 3 / 4, 32 * MB * 3 / 4, 8000,
                          100},
    [ATTACH_GEMINI] = {20 * MB * 3 / 4, 20 * MB * 3 / 4, 20 * MB * 3 / 4, 0, 1000},
};

const char *attach_kind_name(enum attach_kind k)
{
    return k == ATTACH_IMAGE ? "image" : k == ATTACH_PDF ? "pdf" : "text";
}

int attach_kind_parse(const char *word)
{
    if (!word)
        return -1;
    if (strcmp(word, "text") == 0)
        return ATTACH_TEXT;
    if (strcmp(word, "image") == 0)
        return ATTACH_IMAGE;
    if (strcmp(word, "pdf") == 0)
        return ATTACH_PDF;
    return -1;
}

static enum attach_provider attach_base(enum attach_provider p);

const char *attach_provider_name(enum attach_provider p)
{
    switch (attach_base(p)) {
    case ATTACH_OPENAI: return "OpenAI";
    case ATTACH_ANTHROPIC: return "Anthropic";
    case ATTACH_GEMINI: return "Gemini";
    default: return "this OpenAI-compatible server";
    }
}

static enum attach_provider attach_provider_base(const char *dialect, const char *base_url)
{
    if (dialect && strcmp(dialect, "anthropic") == 0)
        return ATTACH_ANTHROPIC;
    if (dialect && strcmp(dialect, "gemini") == 0)
        return ATTACH_GEMINI;
    /* chat completions and responses: OpenAI itself, or a server that speaks its protocol */
    const char *h = base_url ? strstr(base_url, "://") : NULL;
    h = h ? h + 3 : base_url;
    if (h && util_starts_with(h, "api.openai.com") &&
        (h[14] == '\0' || h[14] == '/' || h[14] == ':'))
        return ATTACH_OPENAI;
    return ATTACH_COMPAT;
}

enum attach_provider attach_provider(const char *dialect, const char *base_url,
                                     const char *pdf)
{
    enum attach_provider p = attach_provider_base(dialect, base_url);
    int text = pdf && strcmp(pdf, "text") == 0 ? 1
               : pdf && strcmp(pdf, "document") == 0 ? 0
                                                     : p == ATTACH_COMPAT;
    return text ? (enum attach_provider)(p | ATTACH_PDF_TEXT) : p;
}

int attach_pdf_as_text(enum attach_provider p)
{
    return (p & ATTACH_PDF_TEXT) != 0;
}

/* The provider without its flags. */
static enum attach_provider attach_base(enum attach_provider p)
{
    return (enum attach_provider)(p & ~ATTACH_PDF_TEXT);
}

/* ---- classification ---------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* JPEG: the size is in the first start-of-frame marker (SOF0..SOF15 but DHT, JPG, DAC). */
static void jpeg_size(const unsigned char *d, size_t n, int *w, int *h)
{
    size_t i = 2;
    while (i + 9 < n) {
        if (d[i] != 0xFF) {
            i++;
            continue;
        }
        unsigned m = d[i + 1];
        if (m == 0xFF) {
            i++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }
        size_t seg = (size_t)d[i + 2] << 8 | d[i + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            *h = d[i + 5] << 8 | d[i + 6];
            *w = d[i + 7] << 8 | d[i + 8];
            return;
        }
        if (seg < 2)
            return;
        i += 2 + seg;
    }
}

/* The image type of data by its magic bytes (NULL: not an image we send), and its size. */
static const char *image_type(const unsigned char *d, size_t n, int *w, int *h)
{
    *w = *h = 0;
    if (n >= 24 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) {
        if (memcmp(d + 12, "IHDR", 4) == 0) {
            *w = (int)(be32(d + 16) & 0x7fffffff);
            *h = (int)(be32(d + 20) & 0x7fffffff);
        }
        return "image/png";
    }
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
        jpeg_size(d, n, w, h);
        return "image/jpeg";
    }
    if (n >= 10 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0)) {
        *w = d[6] | d[7] << 8;
        *h = d[8] | d[9] << 8;
        return "image/gif";
    }
    if (n >= 16 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0) {
        const unsigned char *c = d + 12;
        if (n >= 30 && memcmp(c, "VP8 ", 4) == 0) {
            *w = (d[26] | d[27] << 8) & 0x3fff;
            *h = (d[28] | d[29] << 8) & 0x3fff;
        } else if (n >= 25 && memcmp(c, "VP8L", 4) == 0) {
            uint32_t b = (uint32_t)d[21] | (uint32_t)d[22] << 8 | (uint32_t)d[23] << 16 |
                         (uint32_t)d[24] << 24;
            *w = (int)(b & 0x3fff) + 1;
            *h = (int)(b >> 14 & 0x3fff) + 1;
        } else if (n >= 30 && memcmp(c, "VP8X", 4) == 0) {
            *w = (int)(d[24] | d[25] << 8 | d[26] << 16) + 1;
            *h = (int)(d[27] | d[28] << 8 | d[29] << 16) + 1;
        }
        return "image/webp";
    }
    return NULL;
}

/* The format of an image that starts as one but ends before the header image_type reads
 * (a file cut off while copied or downloaded), or NULL. */
static const char *image_cut(const unsigned char *d, size_t n)
{
    static const char png[] = "\x89PNG\r\n\x1a\n";
    if (n >= 4 && n < 24 && memcmp(d, png, n < 8 ? n : 8) == 0)
        return "PNG";
    if (n >= 6 && n < 10 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "GIF";
    if (n >= 12 && n < 16 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "WebP";
    return NULL;
}

/* Pages of a PDF: its page objects ("/Type /Page", not "/Pages"), else the largest /Count of
 * a page tree; 0 when neither is found (a compressed object stream). */
static int pdf_pages(const unsigned char *d, size_t n)
{
    int pages = 0, count = 0;
    for (size_t i = 0; i + 5 < n; i++) {
        if (d[i] != '/')
            continue;
        if (memcmp(d + i, "/Type", 5) == 0) {
            size_t j = i + 5;
            while (j < n && (d[j] == ' ' || d[j] == '\r' || d[j] == '\n' || d[j] == '\t'))
                j++;
            if (j + 5 <= n && memcmp(d + j, "/Page", 5) == 0 &&
                (j + 5 == n || (d[j + 5] != 's' && d[j + 5] != 'L')))
                pages++;
        } else if (i + 6 < n && memcmp(d + i, "/Count", 6) == 0) {
            size_t j = i + 6;
            while (j < n && d[j] == ' ')
                j++;
            int v = 0;
            while (j < n && d[j] >= '0' && d[j] <= '9' && v < 1000000)
                v = v * 10 + (d[j++] - '0');
            if (v > count)
                count = v;
        }
    }
    return pages ? pages : count;
}

/* UTF-16 with a BOM to UTF-8; -1 for an unpaired surrogate or an odd length. */
static int utf16_to_utf8(const unsigned char *d, size_t n, int be, struct buf *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        uint32_t u = be ? (uint32_t)d[i] << 8 | d[i + 1] : (uint32_t)d[i + 1] << 8 | d[i];
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (i + 3 >= n)
                return -1;
            uint32_t l = be ? (uint32_t)d[i + 2] << 8 | d[i + 3]
                            : (uint32_t)d[i + 3] << 8 | d[i + 2];
            if (l < 0xDC00 || l > 0xDFFF)
                return -1;
            u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
            i += 2;
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            return -1;
        }
        if (u == 0)
            return -1; /* a NUL: binary, not text */
        char e[4];
        buf_append(out, e, utf8_encode(u, e));
    }
    return 0;
}

int attach_text_decode(const unsigned char *d, size_t n, struct buf *out, const char **note)
{
    *note = NULL;
    if (n >= 2 && ((d[0] == 0xFF && d[1] == 0xFE) || (d[0] == 0xFE && d[1] == 0xFF))) {
        int be = d[0] == 0xFE;
        size_t was = out->len;
        if (utf16_to_utf8(d + 2, n - 2, be, out) < 0) {
            out->len = was;
            return ATTACH_TEXT_UTF16;
        }
        *note = be ? "converted from UTF-16BE" : "converted from UTF-16LE";
        return 0;
    }
    size_t skip = n >= 3 && memcmp(d, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    if (memchr(d + skip, '\0', n - skip))
        return ATTACH_TEXT_NUL;
    if (!utf8_valid((const char *)d + skip, n - skip))
        return ATTACH_TEXT_UTF8;
    buf_append(out, d + skip, n - skip);
    return 0;
}

static void attach_set(struct attach *a, enum attach_kind kind, const char *name,
                       const char *mime, const void *data, size_t len)
{
    a->kind = kind;
    a->name = xstrdup(name);
    a->mime = xstrdup(mime);
    a->data = xmalloc(len + 1);
    memcpy(a->data, data, len);
    a->data[len] = '\0';
    a->len = len;
    sha256_digest(a->data, len, a->sha256);
}

int attach_from_bytes(struct attach *a, const char *name, const unsigned char *d, size_t n,
                      char **err)
{
    memset(a, 0, sizeof *a);
    int w, h;
    const char *img = image_type(d, n, &w, &h);
    const char *cut = img ? NULL : image_cut(d, n);
    if (cut) { /* before the text check: "GIF89a" alone is text, and a cut-off GIF */
        *err = xasprintf("%s: a cut-off %s image (%zu byte%s, too short for its header)", name,
                         cut, n, n == 1 ? "" : "s");
        return -1;
    }
    if (img) {
        attach_set(a, ATTACH_IMAGE, name, img, d, n);
        a->width = w;
        a->height = h;
    } else if (n >= 5 && memcmp(d, "%PDF-", 5) == 0) {
        attach_set(a, ATTACH_PDF, name, "application/pdf", d, n);
        a->pages = pdf_pages(d, n);
    } else {
        struct buf u = BUF_INIT;
        const char *note = NULL;
        int rc = attach_text_decode(d, n, &u, &note);
        if (rc == ATTACH_TEXT_UTF16)
            *err = xasprintf("%s: not valid UTF-16 text (it starts with a UTF-16 byte order "
                             "mark)", name);
        else if (rc < 0)
            *err = xasprintf("%s: a binary file (not UTF-8 or UTF-16 text, nor a PNG, JPEG, "
                             "GIF, WebP image or a PDF)", name);
        if (rc < 0) {
            buf_free(&u);
            return -1;
        }
        attach_set(a, ATTACH_TEXT, name, "text/plain", u.data ? u.data : "", u.len);
        a->note = note;
        buf_free(&u);
    }
    a->file_size = n;
    return 0;
}

void attach_restore(struct attach *a, const char *name, const char *mime, const void *data,
                    size_t len, int width, int height, int pages)
{
    memset(a, 0, sizeof *a);
    enum attach_kind k = !mime                                   ? ATTACH_TEXT
                         : strncmp(mime, "image/", 6) == 0       ? ATTACH_IMAGE
                         : strcmp(mime, "application/pdf") == 0  ? ATTACH_PDF
                                                                 : ATTACH_TEXT;
    attach_set(a, k, name ? name : "", mime ? mime : "text/plain", data, len);
    a->file_size = len;
    a->width = width;
    a->height = height;
    a->pages = pages;
}

static int attach_is_url(const char *s)
{
    return util_starts_with(s, "http://") || util_starts_with(s, "https://");
}

static int attach_streams;
/* The pipes and devices read so far: a second -f of one (-f - -f -) would read it at its end
 * and attach an empty file. */
struct attach_stream {
    dev_t dev;
    ino_t ino;
};
static struct attach_stream attach_read[16];
static size_t attach_n_read;

void attach_allow_streams(int on)
{
    attach_streams = on;
    attach_n_read = 0;
}

int attach_add(struct attach_list *l, const char *arg, char **err)
{
    *err = NULL;
    if (!arg || !*arg) {
        *err = xstrdup("an empty file name; nothing attached");
        return -1;
    }
    if (attach_is_url(arg)) {
        *err = xasprintf("%s: attaching a URL is not supported yet; save it to a file and "
                         "attach that", arg);
        return -1;
    }
    struct stat st;
    if (stat(arg, &st) != 0) {
        *err = xasprintf("%s: %s", arg,
                         errno == ENOENT ? "no such file" : strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        *err = xasprintf("%s: a directory; attach the files in it one by one", arg);
        return -1;
    }
    /* a pipe (process substitution: -f <(git diff)) or a character device (/dev/stdin) is
     * read to its end, as far as the limit, where attach_allow_streams says so: shell users
     * of llm and mods expect it of -f; never a terminal (the read would wait for Ctrl-D) */
    int stream = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode);
    if (!S_ISREG(st.st_mode) && !(stream && attach_streams)) {
        *err = xasprintf("%s: not a regular file%s", arg,
                         stream ? " (a pipe or a device is read only from -f on the command "
                                  "line)" : "");
        return -1;
    }
    if (S_ISCHR(st.st_mode)) {
        int fd = open(arg, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        int tty = fd >= 0 && isatty(fd);
        if (fd >= 0)
            close(fd);
        if (tty) {
            *err = xasprintf("%s: a terminal; attach a file or a pipe", arg);
            return -1;
        }
    }
    int fifo = S_ISFIFO(st.st_mode); /* a device (/dev/null, /dev/zero) reads again */
    for (size_t i = 0; fifo && i < attach_n_read; i++)
        if (attach_read[i].dev == st.st_dev && attach_read[i].ino == st.st_ino) {
            *err = xasprintf("%s: already attached (a pipe or stdin can be read only once)",
                             arg);
            return -1;
        }
    if (fifo && attach_n_read < TT_ARRAY_LEN(attach_read))
        attach_read[attach_n_read++] = (struct attach_stream){st.st_dev, st.st_ino};
    if ((size_t)st.st_size > ATTACH_FILE_MAX) {
        struct buf s = BUF_INIT, m = BUF_INIT;
        attach_size(&s, (size_t)st.st_size);
        attach_size(&m, ATTACH_FILE_MAX);
        *err = xasprintf("%s: %s is too large to attach (at most %s)", arg, buf_str(&s),
                         buf_str(&m));
        buf_free(&s);
        buf_free(&m);
        return -1;
    }
    size_t n = 0;
    char *d = util_read_file(arg, &n, ATTACH_FILE_MAX);
    if (!d && errno == EFBIG) { /* a pipe that gave more than a file may have */
        struct buf m = BUF_INIT;
        attach_size(&m, ATTACH_FILE_MAX);
        *err = xasprintf("%s: more than %s: too large to attach", arg, buf_str(&m));
        buf_free(&m);
        return -1;
    }
    if (!d) {
        *err = xasprintf("%s: cannot read it: %s", arg, strerror(errno));
        return -1;
    }
    struct attach a;
    int rc = attach_from_bytes(&a, arg, (const unsigned char *)d, n, err);
    free(d);
    if (rc < 0)
        return -1;
    XGROW(l->v, l->n + 1, l->cap);
    l->v[l->n++] = a;
    return 0;
}

void attach_clear(struct attach *a)
{
    free(a->name);
    free(a->mime);
    free(a->data);
    free(a->text);
    memset(a, 0, sizeof *a);
}

void attach_copy(struct attach *dst, const struct attach *src)
{
    *dst = *src;
    dst->name = xstrdup(src->name);
    dst->mime = xstrdup(src->mime);
    dst->data = xmalloc(src->len + 1);
    memcpy(dst->data, src->data, src->len + 1);
    dst->text = NULL;
    dst->text_len = 0;
    if (src->text) {
        dst->text = xmalloc(src->text_len + 1);
        memcpy(dst->text, src->text, src->text_len + 1);
        dst->text_len = src->text_len;
    }
}

void attach_list_free(struct attach_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        attach_clear(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static const char *attach_base_name(const char *name)
{
    const char *slash = strrchr(name, '/');
    return slash ? slash + 1 : name;
}

int attach_list_has(const struct attach_list *l, size_t n, const struct attach *a)
{
    for (size_t k = 0; k < n && k < l->n; k++)
        if (memcmp(l->v[k].sha256, a->sha256, sizeof a->sha256) == 0 &&
            strcmp(attach_base_name(l->v[k].name), attach_base_name(a->name)) == 0)
            return 1;
    return 0;
}

void attach_list_move(struct attach_list *dst, struct attach_list *src)
{
    for (size_t i = 0; i < src->n; i++) {
        XGROW(dst->v, dst->n + 1, dst->cap);
        dst->v[dst->n++] = src->v[i];
    }
    free(src->v);
    memset(src, 0, sizeof *src);
}

/* ---- tokens and limits -------------------------------------------------------------- */

/* OpenAI (GPT-4o, 4.1, 5 at detail high/auto): fit in 2048x2048, then the shorter side down
 * to 768, then 170 per 512-pixel tile plus 85. */
static long openai_image_tokens(double w, double h)
{
    if (w > 2048 || h > 2048) {
        double s = 2048 / (w > h ? w : h);
        w *= s;
        h *= s;
    }
    double short_side = w < h ? w : h;
    if (short_side > 768) {
        double s = 768 / short_side;
        w *= s;
        h *= s;
    }
    long tiles = (long)util_ceil(w / 512) * (long)util_ceil(h / 512);
    return 85 + 170 * tiles;
}

/* Anthropic: a long side over 1568 pixels is scaled down to it, then w*h/750. */
static long anthropic_image_tokens(double w, double h)
{
    double l = w > h ? w : h;
    if (l > 1568) {
        w *= 1568 / l;
        h *= 1568 / l;
    }
    return (long)util_ceil(w * h / 750);
}

/* Gemini: 258 when both sides are at most 384 pixels, else 258 per 768x768 tile. */
static long gemini_image_tokens(double w, double h)
{
    if (w <= 384 && h <= 384)
        return 258;
    return 258 * (long)util_ceil(w / 768) * (long)util_ceil(h / 768);
}

long attach_tokens(const struct attach *a, enum attach_provider p)
{
    if (a->kind == ATTACH_TEXT)
        return (long)(a->len / 4 + 1);
    if (a->kind == ATTACH_PDF) {
        long pages = a->pages > 0 ? a->pages : 1;
        if (attach_pdf_as_text(p))
            return (long)((a->text ? a->text_len : a->len / 8) / 4 + 1);
        /* every page as its text and as an image: Anthropic ~1,500-3,000 text tokens a page
         * plus the image; OpenAI the same way; Gemini 258 a page */
        p = attach_base(p);
        return p == ATTACH_GEMINI ? 258 * pages : p == ATTACH_ANTHROPIC ? 3000 * pages
                                                                         : 1500 * pages;
    }
    double w = a->width > 0 ? a->width : 1024, h = a->height > 0 ? a->height : 1024;
    switch (attach_base(p)) {
    case ATTACH_ANTHROPIC: return anthropic_image_tokens(w, h);
    case ATTACH_GEMINI: return gemini_image_tokens(w, h);
    default: return openai_image_tokens(w, h);
    }
}

int attach_check(const struct attach *v, size_t n, enum attach_provider p, char **err)
{
    const struct attach_limits *lim = &attach_limit_table[attach_base(p)];
    double total = 0;
    struct buf sz = BUF_INIT, mx = BUF_INIT;
    int rc = 0;
    *err = NULL;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct attach *a = &v[i];
        if (a->kind == ATTACH_TEXT || (a->kind == ATTACH_PDF && attach_pdf_as_text(p)))
            continue;
        double max = a->kind == ATTACH_IMAGE ? lim->image : lim->pdf;
        total += (double)a->len;
        buf_reset(&sz);
        buf_reset(&mx);
        attach_size(&sz, a->len);
        if ((double)a->len > max) {
            attach_size(&mx, (size_t)max);
            *err = xasprintf("%s: the %s is %s; %s takes at most %s per %s", a->name,
                             a->kind == ATTACH_IMAGE ? "image" : "PDF", buf_str(&sz),
                             attach_provider_name(p), buf_str(&mx),
                             a->kind == ATTACH_IMAGE ? "image" : "PDF");
            rc = -1;
        } else if (a->kind == ATTACH_IMAGE && lim->max_px &&
                   (a->width > lim->max_px || a->height > lim->max_px)) {
            *err = xasprintf("%s: the image is %dx%d pixels; %s takes at most %dx%d", a->name,
                             a->width, a->height, attach_provider_name(p), lim->max_px,
                             lim->max_px);
            rc = -1;
        } else if (a->kind == ATTACH_PDF && lim->max_pages && a->pages > lim->max_pages) {
            *err = xasprintf("%s: the PDF has %d pages; %s takes at most %d", a->name, a->pages,
                             attach_provider_name(p), lim->max_pages);
            rc = -1;
        }
    }
    if (rc == 0 && total > lim->total) {
        buf_reset(&sz);
        buf_reset(&mx);
        attach_size(&sz, (size_t)total);
        attach_size(&mx, (size_t)lim->total);
        *err = xasprintf("the attached images and PDFs take %s together; %s takes at most %s "
                         "in one request", buf_str(&sz), attach_provider_name(p), buf_str(&mx));
        rc = -1;
    }
    buf_free(&sz);
    buf_free(&mx);
    return rc;
}

size_t attach_parts(const struct attach *v, size_t n, int pdf_text, struct api_part *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct attach *a = &v[i];
        if (a->kind == ATTACH_TEXT || (a->kind == ATTACH_PDF && pdf_text))
            continue; /* in the message's text */
        out[k++] = (struct api_part){a->kind == ATTACH_IMAGE ? API_PART_IMAGE : API_PART_DOCUMENT,
                                     a->mime, a->name, a->data, a->len};
    }
    return k;
}

/* ---- pdftotext ---------------------------------------------------------------------- */

#define ATTACH_PDFTOTEXT_TIMEOUT 30.0 /* seconds pdftotext may take for one PDF */

/* Where pdftotext is on PATH (caller frees), NULL when it is not. */
static char *attach_find_tool(const char *tool)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char *f = xasprintf("%.*s/%s", (int)n, n ? p : ".", tool);
        if (access(f, X_OK) == 0)
            return f;
        free(f);
        p += n + (p[n] == ':');
    }
    return NULL;
}

int attach_pdf_text(struct attach *a, char **err)
{
    *err = NULL;
    if (a->text)
        return 0;
    char *tool = attach_find_tool("pdftotext");
    if (!tool) {
        *err = xasprintf("%s: this server takes no PDF documents, and pdftotext (to send the "
                         "PDF's text) is not installed: install poppler-utils (apt install "
                         "poppler-utils, brew install poppler)", a->name);
        return -1;
    }
    /* pdftotext reads the PDF from a file: a private temporary copy */
    const char *tmp = getenv("TMPDIR");
    char *path = xasprintf("%s/tokterm-pdf-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0 || util_write_all(fd, (const char *)a->data, a->len) != 0) {
        *err = xasprintf("%s: cannot write a temporary copy for pdftotext: %s", a->name,
                         strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        free(path);
        free(tool);
        return -1;
    }
    close(fd);
    int pfd[2];
    pid_t pid = -1;
    if (pipe(pfd) == 0) {
        pid = fork();
        if (pid == 0) {
            dup2(pfd[1], 1);
            int dn = open("/dev/null", O_RDWR);
            if (dn >= 0) {
                dup2(dn, 0);
                dup2(dn, 2);
            }
            close(pfd[0]);
            close(pfd[1]);
            execl(tool, "pdftotext", "-q", "-enc", "UTF-8", path, "-", (char *)NULL);
            _exit(127);
        }
        close(pfd[1]);
    }
    struct buf out = BUF_INIT;
    int too_big = 0, too_slow = 0;
    if (pid > 0) {
        char chunk[65536];
        ssize_t k;
        const char *tv = getenv("TOKTERM_PDFTOTEXT_TIMEOUT"); /* tests: a shorter wait */
        double limit = tv && atof(tv) > 0 ? atof(tv) : ATTACH_PDFTOTEXT_TIMEOUT;
        double deadline = util_now() + limit;
        for (;;) {
            struct pollfd pf = {pfd[0], POLLIN, 0};
            double left = deadline - util_now();
            if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) == 0) {
                too_slow = 1; /* a PDF that keeps pdftotext busy: given up */
                kill(pid, SIGKILL);
                break;
            }
            k = read(pfd[0], chunk, sizeof chunk);
            if (k == 0)
                break;
            if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                break;
            }
            if (out.len + (size_t)k > ATTACH_FILE_MAX) {
                too_big = 1;
                kill(pid, SIGKILL);
                break;
            }
            buf_append(&out, chunk, (size_t)k);
        }
        close(pfd[0]);
    }
    int status = -1;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    unlink(path);
    free(path);
    free(tool);
    if (pid <= 0 || too_big || too_slow || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        *err = xasprintf("%s: pdftotext could not read the PDF%s", a->name,
                         too_big    ? " (its text is too large)"
                         : too_slow ? " (it took too long: given up)"
                                    : "");
        buf_free(&out);
        return -1;
    }
    /* pdftotext's page breaks (form feeds) and any invalid bytes made plain */
    struct buf clean = BUF_INIT;
    for (size_t i = 0; i < out.len; i++)
        if (out.data[i] == '\f')
            out.data[i] = '\n';
    if (out.len && !utf8_valid(out.data, out.len)) {
        utf8_sanitize(&clean, out.data, out.len);
        buf_free(&out);
        out = clean;
    }
    a->text_len = out.len;
    a->text = buf_take(&out);
    return 0;
}

/* ---- text ------------------------------------------------------------------------------ */

/* A fence language for a file name's extension, "" when unknown. */
static const char *attach_lang(const char *name)
{
    static const char *const map[][2] = {
        {"c", "c"}, {"h", "c"}, {"cc", "cpp"}, {"cpp", "cpp"}, {"hpp", "cpp"}, {"cxx", "cpp"},
        {"py", "python"}, {"js", "javascript"}, {"mjs", "javascript"}, {"ts", "typescript"},
        {"tsx", "tsx"}, {"jsx", "jsx"}, {"go", "go"}, {"rs", "rust"}, {"java", "java"},
        {"kt", "kotlin"}, {"rb", "ruby"}, {"php", "php"}, {"sh", "sh"}, {"bash", "bash"},
        {"zsh", "zsh"}, {"sql", "sql"}, {"json", "json"}, {"yaml", "yaml"}, {"yml", "yaml"},
        {"toml", "toml"}, {"html", "html"}, {"css", "css"}, {"md", "markdown"},
        {"diff", "diff"}, {"patch", "diff"}, {"swift", "swift"}, {"cs", "csharp"},
        {"lua", "lua"}, {"pl", "perl"}, {"xml", "xml"}, {"ini", "ini"}, {"txt", ""},
    };
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strcmp(base, "Makefile") == 0 || strcmp(base, "makefile") == 0)
        return "makefile";
    if (strcmp(base, "Dockerfile") == 0)
        return "dockerfile";
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base)
        return "";
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(dot + 1, map[i][0]) == 0)
            return map[i][1];
    return "";
}

void attach_text_block(struct buf *out, const char *name, const char *text, size_t len)
{
    buf_printf(out, "%s:\n", name);
    markdown_code_block(out, attach_lang(name), text, len, NULL);
    buf_appendc(out, '\n');
}

void attach_size(struct buf *out, size_t bytes)
{
    if (bytes < 1024)
        buf_printf(out, "%zu B", bytes);
    else if (bytes < (size_t)1 << 20)
        buf_printf(out, "%.1f KiB", (double)bytes / 1024);
    else
        buf_printf(out, "%.1f MiB", (double)bytes / (1024.0 * 1024));
}

void attach_describe(struct buf *out, const struct attach *a, long tokens)
{
    buf_printf(out, "%s (", a->name);
    if (a->kind == ATTACH_IMAGE) {
        const char *t = strchr(a->mime, '/');
        t = t ? t + 1 : a->mime;
        for (const char *c = t; *c; c++)
            buf_appendc(out, (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c));
        buf_appends(out, " image");
        if (a->width && a->height)
            buf_printf(out, " %dx%d", a->width, a->height);
    } else if (a->kind == ATTACH_PDF) {
        buf_appends(out, "PDF");
        if (a->pages)
            buf_printf(out, ", %d page%s", a->pages, a->pages == 1 ? "" : "s");
    } else {
        buf_appends(out, "text");
        if (a->note)
            buf_printf(out, ", %s", a->note);
    }
    buf_appends(out, ", ");
    attach_size(out, a->file_size ? a->file_size : a->len);
    if (tokens >= 0)
        buf_printf(out, ", ~%ld token%s", tokens, tokens == 1 ? "" : "s");
    buf_appendc(out, ')');
}
