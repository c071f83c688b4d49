/* attach.h - files that go with a prompt (-f PATH, the chat's first prompt): read, classified
 * and checked once into a struct attach, which the conversation keeps with its turn
 * (core/conv.h), the store saves once by SHA-256 (store.h, "Attachments") and each dialect
 * sends in its own shape (proto/api.h, struct api_part).
 *
 * The one entry point is attach_add(list, arg, &err). It classifies arg:
 *   - a regular file, by its bytes, never by its name:
 *       PNG, JPEG, GIF, WebP (magic bytes)  -> ATTACH_IMAGE (width and height read from the
 *                                              header, for the token estimate and the limits)
 *       "%PDF-"                             -> ATTACH_PDF (pages counted)
 *       anything else must be text          -> ATTACH_TEXT: UTF-8 (a BOM dropped), or UTF-16
 *                                              LE/BE with a BOM, converted to UTF-8; a NUL byte
 *                                              or invalid UTF-8 is refused as binary
 *   - a directory, an http:// or https:// URL: refused for now with a message. Folders and
 *     URLs are to be added here (each becomes ATTACH_TEXT entries appended to the list), so
 *     every front end (-f, the chat) gets them through this one call.
 * A file over ATTACH_FILE_MAX is refused before it is read whole (bounded memory). On failure
 * the list is unchanged and *err says what and why, naming the argument.
 *
 * What is sent depends on the provider (attach_provider): text files go into the user
 * message's text as fenced blocks headed by their path (attach_text_block); images and PDFs
 * become api_parts; a PDF for a server that takes no documents (an OpenAI-compatible server
 * that is not OpenAI) is sent as its text, extracted with pdftotext (poppler-utils) when it is
 * installed, else refused with a message that says what to install. Each provider's size
 * limits are checked before anything is sent (attach_check), and the tokens an image or PDF
 * costs are estimated with the provider's published formula (attach_tokens). */
#ifndef TT_ATTACH_H
#define TT_ATTACH_H
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Largest file attach_add reads (any kind): 64 MiB. Each provider's own limits are lower. */
#define ATTACH_FILE_MAX ((size_t)64 << 20)

enum attach_kind {
    ATTACH_TEXT,  /* UTF-8 text (converted when it was UTF-16) */
    ATTACH_IMAGE, /* PNG, JPEG, GIF, WebP */
    ATTACH_PDF,
};

struct attach {
    enum attach_kind kind;
    char *name;          /* as given (the path): shown, and the fenced block's header */
    char *mime;          /* "text/plain", "image/png", "image/jpeg", "image/gif",
                            "image/webp", "application/pdf" */
    unsigned char *data; /* what is sent: text as UTF-8, an image or a PDF as it is;
                            NUL-terminated (not counted in len) */
    size_t len;
    size_t file_size;    /* bytes of the file as it was read (before a conversion) */
    unsigned char sha256[32]; /* of data: the store's key (one copy however often sent) */
    int width, height;   /* images: pixels, 0 when unknown */
    int pages;           /* PDFs: pages counted, 0 when unknown */
    const char *note;    /* "converted from UTF-16LE", NULL (static) */
    char *text;          /* a PDF sent as text: pdftotext's output once extracted, else NULL */
    size_t text_len;
};

struct attach_list {
    struct attach *v;
    size_t n, cap;
};

/* Add the file (or, later, folder or URL) arg to l. Returns 0, or -1 with a message in *err
 * (caller frees) and l unchanged. */
int attach_add(struct attach_list *l, const char *arg, char **err);
/* Whether attach_add reads a pipe or a character device to its end (on: the command line's
 * -f, where `-f <(cmd)` and `-f -` are meant; off, the default: the chat's /attach and a batch
 * line's "files", where a read that waits would freeze the chat or swallow the batch's input).
 * A terminal is never read. */
void attach_allow_streams(int on);
/* An attachment from its stored form (the store's blob and columns): kind and mime as saved,
 * data copied, the hash recomputed. */
void attach_restore(struct attach *a, const char *name, const char *mime, const void *data,
                    size_t len, int width, int height, int pages);
/* Classify bytes already read (the body of attach_add, for the unit tests and folders):
 * 0 with *a filled (data copied), or -1 with *err. name is used in messages. */
int attach_from_bytes(struct attach *a, const char *name, const unsigned char *data, size_t len,
                      char **err);
/* Text as a file attachment's text is read: UTF-16 with a byte order mark converted to UTF-8
 * (*note says from which; else NULL), a UTF-8 one dropped. 0 with the text in out, or
 * ATTACH_TEXT_NUL (a NUL byte: binary), ATTACH_TEXT_UTF8 (invalid UTF-8) or ATTACH_TEXT_UTF16
 * (a byte order mark, then no valid UTF-16), out then unchanged. */
enum { ATTACH_TEXT_NUL = -1, ATTACH_TEXT_UTF8 = -2, ATTACH_TEXT_UTF16 = -3 };
int attach_text_decode(const unsigned char *d, size_t n, struct buf *out, const char **note);
void attach_clear(struct attach *a);
void attach_copy(struct attach *dst, const struct attach *src);
void attach_list_free(struct attach_list *l);
/* 1 when the first n entries of l hold a: the same bytes under the same file name without
 * its folders (main.c, ./main.c and /tmp/x/main.c are one file when their bytes are). */
int attach_list_has(const struct attach_list *l, size_t n, const struct attach *a);
/* Move every entry of src to the end of dst (src is left empty). */
void attach_list_move(struct attach_list *dst, struct attach_list *src);
/* kind's word: "text", "image", "pdf" (the store's kind column); attach_kind_parse the
 * reverse (-1 for another word). */
const char *attach_kind_name(enum attach_kind k);
int attach_kind_parse(const char *word);

/* ---- per provider ------------------------------------------------------------------ */

enum attach_provider {
    ATTACH_OPENAI,     /* api.openai.com (chat completions or responses): images, documents */
    ATTACH_COMPAT,     /* another OpenAI-compatible server (Ollama, llama.cpp, vLLM...):
                          images as data URLs, PDFs as their text unless `pdf = document` */
    ATTACH_ANTHROPIC,
    ATTACH_GEMINI,
    ATTACH_PDF_TEXT = 16, /* a flag or'ed in: PDFs go as their text (pdftotext) */
};
/* The provider of a profile: its dialect (api =), base URL and `pdf =` (NULL or "auto",
 * "document", "text"). The "openai" and "responses" dialects are OpenAI when the base URL's
 * host is api.openai.com, else ATTACH_COMPAT. PDFs go as text (ATTACH_PDF_TEXT) to a
 * compatible server under "auto", to every provider under "text", to none under
 * "document". */
enum attach_provider attach_provider(const char *dialect, const char *base_url,
                                     const char *pdf);
const char *attach_provider_name(enum attach_provider p);
/* 1 when a PDF goes to p as its extracted text rather than as a document. */
int attach_pdf_as_text(enum attach_provider p);

/* The tokens a (an image or PDF) costs p, by p's published formula (an estimate: OpenAI's
 * 512-pixel tiles, Anthropic's w*h/750, Gemini's 258 per 768-pixel tile or page); a text
 * file's or a PDF sent as text: its bytes / 4 (the plan counts them exactly, as text). */
long attach_tokens(const struct attach *a, enum attach_provider p);
/* Check the attachments of one message against p's limits: per image and PDF, and their
 * total. 0, or -1 with a message in *err (caller frees) naming the file, its size and the
 * limit. */
int attach_check(const struct attach *v, size_t n, enum attach_provider p, char **err);
struct api_part;
/* The api_parts of v[0..n) that travel as parts (images; PDFs unless pdf_text), written to out
 * (room for n); they borrow v's data. Returns how many. */
size_t attach_parts(const struct attach *v, size_t n, int pdf_text, struct api_part *out);
/* Extract a PDF's text with pdftotext once (a->text). 0, or -1 with a message in *err:
 * pdftotext is not installed (what to install), or it failed. */
int attach_pdf_text(struct attach *a, char **err);

/* Append text file name's block to out: "name:\n" and the text in a fence longer than any
 * backtick run in it (so the text cannot close it), a language from the file name's
 * extension when known. */
void attach_text_block(struct buf *out, const char *name, const char *text, size_t len);
/* The compact line of an attachment, appended to out: "name (PNG image 640x480, 12.3 KiB,
 * ~425 tokens)"; tokens < 0 leaves the tokens out. */
void attach_describe(struct buf *out, const struct attach *a, long tokens);
/* A byte size as "812 B", "12.3 KiB", "4.0 MiB". */
void attach_size(struct buf *out, size_t bytes);

#endif
