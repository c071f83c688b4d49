/* test_attach.c - attachments (core/attach.c): classification by bytes, text encodings, image
 * headers, PDF pages, providers, limits, token estimates, fenced blocks; and their parts in
 * each dialect's body (proto/). */
#include "config.h"
#include "core/attach.h"
#include "proto/dialect.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A PNG header (signature + IHDR) of w x h: enough for the classifier. */
static size_t png_header(unsigned char *b, uint32_t w, uint32_t h)
{
    memcpy(b, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    for (int i = 0; i < 4; i++) {
        b[16 + i] = (unsigned char)(w >> (24 - 8 * i));
        b[20 + i] = (unsigned char)(h >> (24 - 8 * i));
    }
    memcpy(b + 24, "\x08\x02\0\0\0", 5);
    return 29;
}

static int classify(const void *d, size_t n, struct attach *a, char **err)
{
    return attach_from_bytes(a, "f", d, n, err);
}

static void test_kinds(void)
{
    struct attach a;
    char *err = NULL;
    unsigned char b[64];
    size_t n = png_header(b, 640, 480);
    TAP_INT(classify(b, n, &a, &err), 0, "PNG by its bytes");
    TAP_INT(a.kind, ATTACH_IMAGE, "PNG: an image");
    TAP_STR(a.mime, "image/png", "PNG: image/png");
    TAP_OK(a.width == 640 && a.height == 480, "PNG: 640x480 from IHDR (%dx%d)", a.width,
           a.height);
    attach_clear(&a);

    /* JPEG: SOI, an APP0 segment, then SOF0 with 100 high, 200 wide */
    static const unsigned char jpg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x4A, 0x46,
                                        0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x64, 0x00,
                                        0xC8, 0x03, 0x01, 0x22, 0x00};
    TAP_INT(classify(jpg, sizeof jpg, &a, &err), 0, "JPEG");
    TAP_STR(a.mime, "image/jpeg", "JPEG: image/jpeg");
    TAP_OK(a.width == 200 && a.height == 100, "JPEG: 200x100 from SOF0 (%dx%d)", a.width,
           a.height);
    attach_clear(&a);

    static const unsigned char gif[] = "GIF89a\x20\x00\x10\x00\x00\x00\x00";
    TAP_INT(classify(gif, sizeof gif - 1, &a, &err), 0, "GIF");
    TAP_STR(a.mime, "image/gif", "GIF: image/gif");
    TAP_OK(a.width == 32 && a.height == 16, "GIF: 32x16");
    attach_clear(&a);

    unsigned char webp[30] = "RIFF\0\0\0\0WEBPVP8X";
    webp[24] = 99; /* width - 1 = 99 */
    webp[27] = 49; /* height - 1 = 49 */
    TAP_INT(classify(webp, sizeof webp, &a, &err), 0, "WebP");
    TAP_STR(a.mime, "image/webp", "WebP: image/webp");
    TAP_OK(a.width == 100 && a.height == 50, "WebP VP8X: 100x50 (%dx%d)", a.width, a.height);
    attach_clear(&a);

    /* the name says .png, the bytes say text: the bytes win */
    TAP_INT(attach_from_bytes(&a, "fake.png", (const unsigned char *)"hello\n", 6, &err), 0,
            "a .png holding text");
    TAP_INT(a.kind, ATTACH_TEXT, "typed by its bytes, not its name");
    attach_clear(&a);

    static const char pdf[] = "%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
                              "2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >> endobj\n"
                              "3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n"
                              "4 0 obj << /Type/Page /Parent 2 0 R >> endobj\n%%EOF\n";
    TAP_INT(classify(pdf, sizeof pdf - 1, &a, &err), 0, "PDF");
    TAP_INT(a.kind, ATTACH_PDF, "PDF: kind");
    TAP_INT(a.pages, 2, "PDF: 2 pages (/Type /Page, not /Pages)");
    attach_clear(&a);
}

static void test_text(void)
{
    struct attach a;
    char *err = NULL;
    TAP_INT(classify("\xEF\xBB\xBFh\xC3\xA9", 6, &a, &err), 0, "UTF-8 with a BOM");
    TAP_OK(a.len == 3 && memcmp(a.data, "h\xC3\xA9", 3) == 0, "the BOM dropped");
    attach_clear(&a);
    /* UTF-16LE "hé€𝄞" with a BOM */
    static const unsigned char le[] = {0xFF, 0xFE, 'h', 0, 0xE9, 0, 0xAC, 0x20,
                                       0x34, 0xD8, 0x1E, 0xDD};
    TAP_INT(classify(le, sizeof le, &a, &err), 0, "UTF-16LE with a BOM");
    TAP_STR((char *)a.data, "h\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E", "converted to UTF-8");
    TAP_STR(a.note, "converted from UTF-16LE", "and says so");
    attach_clear(&a);
    static const unsigned char be[] = {0xFE, 0xFF, 0, 'o', 0, 'k'};
    TAP_INT(classify(be, sizeof be, &a, &err), 0, "UTF-16BE with a BOM");
    TAP_STR((char *)a.data, "ok", "UTF-16BE converted");
    attach_clear(&a);
    static const unsigned char lone[] = {0xFF, 0xFE, 0x00, 0xDC};
    TAP_INT(classify(lone, sizeof lone, &a, &err), -1, "UTF-16 with a lone surrogate refused");
    TAP_OK(err && strstr(err, "UTF-16"), "the message says UTF-16: %s", err ? err : "");
    free(err);
    err = NULL;
    TAP_INT(classify("ab\0cd", 5, &a, &err), -1, "a NUL byte: binary, refused");
    TAP_OK(err && strstr(err, "binary"), "the message says binary: %s", err ? err : "");
    free(err);
    err = NULL;
    TAP_INT(classify("caf\xE9", 4, &a, &err), -1, "Latin-1 (invalid UTF-8) refused");
    free(err);
    err = NULL;
    TAP_INT(classify("", 0, &a, &err), 0, "an empty file is (empty) text");
    attach_clear(&a);
}

static void test_add(void)
{
    struct attach_list l = {0};
    char *err = NULL;
    TAP_INT(attach_add(&l, "/nonexistent/x.c", &err), -1, "a missing file");
    TAP_OK(err && strstr(err, "/nonexistent/x.c") && strstr(err, "no such file"),
           "names it: %s", err ? err : "");
    free(err);
    TAP_INT(attach_add(&l, "/", &err), -1, "a directory");
    TAP_OK(err && strstr(err, "directory"), "says directory: %s", err ? err : "");
    free(err);
    TAP_INT(attach_add(&l, "https://example.com/x", &err), -1, "a URL (not yet)");
    free(err);
    TAP_INT(l.n, 0, "nothing added on failure");
    char path[] = "/tmp/tt-attach-XXXXXX";
    int fd = mkstemp(path);
    TAP_OK(fd >= 0 && util_write_all(fd, "x = 1\n", 6) == 0, "temp file");
    close(fd);
    TAP_INT(attach_add(&l, path, &err), 0, "a text file");
    TAP_INT(l.n, 1, "added");
    TAP_INT(l.v[0].file_size, 6, "its size");
    unlink(path);
    attach_list_free(&l);
}

static void test_limits(void)
{
    struct attach a;
    memset(&a, 0, sizeof a);
    a.kind = ATTACH_IMAGE;
    a.name = "big.png";
    a.mime = "image/png";
    a.width = a.height = 1000;
    char *err = NULL;
    a.len = 20u << 20; /* 20 MiB: over OpenAI's 20 MB */
    TAP_INT(attach_check(&a, 1, ATTACH_OPENAI, &err), -1, "a 20 MiB image: over OpenAI's limit");
    TAP_OK(err && strstr(err, "big.png") && strstr(err, "20.0 MiB") && strstr(err, "OpenAI"),
           "says file, size, provider: %s", err ? err : "");
    free(err);
    a.len = 4u << 20;
    TAP_INT(attach_check(&a, 1, ATTACH_OPENAI, &err), 0, "4 MiB: fine for OpenAI");
    TAP_INT(attach_check(&a, 1, ATTACH_ANTHROPIC, &err), -1, "4 MiB: over Anthropic's 5 MB base64");
    free(err);
    a.len = 1000;
    a.width = 9000;
    TAP_INT(attach_check(&a, 1, ATTACH_ANTHROPIC, &err), -1, "9000 pixels wide: over Anthropic's");
    TAP_OK(err && strstr(err, "9000x1000"), "says the size: %s", err ? err : "");
    free(err);
    struct attach two[2];
    memset(two, 0, sizeof two);
    for (int i = 0; i < 2; i++) {
        two[i].kind = ATTACH_IMAGE;
        two[i].name = "x.png";
        two[i].mime = "image/png";
        two[i].len = 9u << 20;
    }
    TAP_INT(attach_check(two, 2, ATTACH_GEMINI, &err), -1, "two 9 MiB images: over Gemini's 20 MB");
    TAP_OK(err && strstr(err, "together"), "the total: %s", err ? err : "");
    free(err);
    /* a PDF sent as text is no document: no document limit */
    a.kind = ATTACH_PDF;
    a.len = 40u << 20;
    TAP_INT(attach_check(&a, 1, ATTACH_COMPAT | ATTACH_PDF_TEXT, &err), 0,
            "a PDF as text: not held to the document limit");
    TAP_INT(attach_check(&a, 1, ATTACH_OPENAI, &err), -1, "a 40 MiB PDF: over OpenAI's");
    free(err);
}

static void test_providers(void)
{
    TAP_INT(attach_provider("openai", "https://api.openai.com/v1", NULL), ATTACH_OPENAI,
            "api.openai.com: OpenAI");
    TAP_INT(attach_provider("responses", "https://api.openai.com/v1", NULL), ATTACH_OPENAI,
            "responses at api.openai.com: OpenAI");
    TAP_INT(attach_provider("openai", "http://127.0.0.1:11434/v1", NULL),
            ATTACH_COMPAT | ATTACH_PDF_TEXT, "a local server: compatible, PDFs as text");
    TAP_INT(attach_provider("openai", "https://api.openai.com.evil.example/v1", NULL),
            ATTACH_COMPAT | ATTACH_PDF_TEXT, "api.openai.com.evil.example is not OpenAI");
    TAP_INT(attach_provider("openai", "http://127.0.0.1:1/v1", "document"), ATTACH_COMPAT,
            "pdf = document: documents");
    TAP_INT(attach_provider("anthropic", NULL, NULL), ATTACH_ANTHROPIC, "anthropic");
    TAP_INT(attach_provider("gemini", NULL, "text"), ATTACH_GEMINI | ATTACH_PDF_TEXT,
            "pdf = text: every provider");
}

static void test_tokens(void)
{
    struct attach a;
    memset(&a, 0, sizeof a);
    a.kind = ATTACH_IMAGE;
    a.width = 1024;
    a.height = 1024;
    /* OpenAI: 1024x1024 -> 768x768 -> 4 tiles: 85 + 4 * 170 */
    TAP_INT(attach_tokens(&a, ATTACH_OPENAI), 765, "OpenAI 1024x1024: 765");
    a.width = 2048;
    a.height = 4096; /* -> 1024x2048 -> 768x1536: 2x3 tiles */
    TAP_INT(attach_tokens(&a, ATTACH_OPENAI), 85 + 6 * 170, "OpenAI 2048x4096: 1105");
    a.width = 1000;
    a.height = 1000;
    TAP_INT(attach_tokens(&a, ATTACH_ANTHROPIC), 1334, "Anthropic 1000x1000: w*h/750 = 1334");
    a.width = 3136;
    a.height = 1568; /* -> 1568x784 */
    TAP_INT(attach_tokens(&a, ATTACH_ANTHROPIC), 1568L * 784 / 750 + 1,
            "Anthropic: long side scaled to 1568 first");
    a.width = 300;
    a.height = 200;
    TAP_INT(attach_tokens(&a, ATTACH_GEMINI), 258, "Gemini <= 384: 258");
    a.width = 1600;
    a.height = 800; /* 3 x 2 tiles of 768 */
    TAP_INT(attach_tokens(&a, ATTACH_GEMINI), 258 * 6, "Gemini 1600x800: 6 tiles");
    a.kind = ATTACH_PDF;
    a.pages = 3;
    TAP_INT(attach_tokens(&a, ATTACH_GEMINI), 258 * 3, "Gemini PDF: 258 a page");
}

static void test_block(void)
{
    struct buf b = BUF_INIT;
    attach_text_block(&b, "src/main.c", "int x;", 6);
    TAP_STR(buf_str(&b), "src/main.c:\n```c\nint x;\n```\n\n", "a fenced block with the path");
    buf_reset(&b);
    attach_text_block(&b, "notes.md", "a\n````\nb\n", 9);
    TAP_STR(buf_str(&b), "notes.md:\n`````markdown\na\n````\nb\n`````\n\n",
            "the fence is longer than any run in the text");
    buf_reset(&b);
    struct attach a;
    char *err;
    unsigned char png[64];
    (void)attach_from_bytes(&a, "d.png", png, png_header(png, 640, 480), &err);
    attach_describe(&b, &a, 425);
    TAP_STR(buf_str(&b), "d.png (PNG image 640x480, 29 B, ~425 tokens)", "the compact line");
    attach_clear(&a);
    buf_free(&b);
}

/* Each dialect's body for a user message with an image and a PDF. */
static void test_bodies(void)
{
    static const unsigned char img[] = {1, 2, 3, 4};
    struct api_part parts[2] = {{API_PART_IMAGE, "image/png", "d.png", img, 4},
                                {API_PART_DOCUMENT, "application/pdf", "r.pdf", img, 3}};
    struct api_message m[2] = {API_MSG("system", "be brief"),
                               {.role = "user", .content = "what?", .parts = parts, .n_parts = 2}};
    struct api_request r = {.model = "m", .messages = m, .n_messages = 2};
    struct {
        const char *dialect, *want[3];
    } cases[] = {
        {"openai",
         {"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AQIDBA==\"}}",
          "{\"type\":\"file\",\"file\":{\"filename\":\"r.pdf\",\"file_data\":"
          "\"data:application/pdf;base64,AQID\"}}",
          "{\"type\":\"text\",\"text\":\"what?\"}]"}},
        {"responses",
         {"{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,AQIDBA==\"}",
          "{\"type\":\"input_file\",\"filename\":\"r.pdf\",\"file_data\":"
          "\"data:application/pdf;base64,AQID\"}",
          "{\"type\":\"input_text\",\"text\":\"what?\"}"}},
        {"anthropic",
         {"{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
          "\"data\":\"AQIDBA==\"}}",
          "{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":"
          "\"application/pdf\",\"data\":\"AQID\"},\"title\":\"r.pdf\"}",
          "{\"type\":\"text\",\"text\":\"what?\"}"}},
        {"gemini",
         {"{\"inline_data\":{\"mime_type\":\"image/png\",\"data\":\"AQIDBA==\"}}",
          "{\"inline_data\":{\"mime_type\":\"application/pdf\",\"data\":\"AQID\"}}",
          "{\"text\":\"what?\"}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct dialect *d = dialect_find(cases[i].dialect);
        char *body = d->request_json(&r);
        for (int k = 0; k < 3; k++) {
            const char *at = strstr(body, cases[i].want[k]);
            TAP_OK(at != NULL, "%s: part %d in the body", cases[i].dialect, k);
            if (!at)
                printf("# %s\n", body);
        }
        /* files before the text */
        const char *t = strstr(body, cases[i].want[2]), *f = strstr(body, cases[i].want[0]);
        TAP_OK(t && f && f < t, "%s: the files before the text", cases[i].dialect);
        free(body);
    }
    /* without parts the bodies are what they were: content a string */
    m[1].parts = NULL;
    m[1].n_parts = 0;
    char *body = api_request_json(&r);
    TAP_OK(strstr(body, "{\"role\":\"user\",\"content\":\"what?\"}") != NULL,
           "no files: content stays a string");
    free(body);
}

static void test_base64(void)
{
    struct buf b = BUF_INIT;
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        buf_reset(&b);
        buf_append_base64(&b, in[i], strlen(in[i]));
        TAP_STR(buf_str(&b), out[i], "base64 of RFC 4648's vectors");
    }
    buf_free(&b);
}

int main(void)
{
    test_kinds();
    test_text();
    test_add();
    test_limits();
    test_providers();
    test_tokens();
    test_block();
    test_bodies();
    test_base64();
    return tap_done();
}
