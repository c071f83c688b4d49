/* attach_ext.h - the attachments that expand into text: folders (-f DIR, /attach DIR) and URLs
 * (-f https://..., /attach URL). attach_add (core/attach.h) hands them here; the front ends
 * call attach_any, which also returns the notes for the user (what a folder left out).
 *
 * A folder becomes one ATTACH_TEXT entry per text file under it (core/folder.h: .gitignore
 * honoured, binaries, images, links and special files left out, at most attach_max_files
 * files and attach_max_bytes bytes, in git's order), named by its path; when anything was
 * left out, one more ATTACH_TEXT entry, named "DIR/ (left out)", lists it for the model.
 *
 * A URL is fetched once (net/fetch.h: http and https only, attach_url_timeout,
 * attach_url_max_bytes, 5 redirects, nothing of the user's sent) and becomes:
 *   - HTML (text/html, application/xhtml+xml, or no type and bytes that start like HTML):
 *     its readable text (text/html.h), an ATTACH_TEXT named "URL (page text)";
 *   - text (text/ *, JSON, XML, YAML, TOML, JavaScript, shell): the body as text;
 *   - an image or a PDF (or application/octet-stream): classified by its bytes as a file is
 *     (attach_from_bytes), so the same checks and the same shapes for every dialect;
 *   - anything else is refused as soon as its Content-Type arrives.
 * Every failure leaves the list unchanged and says what happened and which setting to
 * change. */
#ifndef TT_ATTACH_EXT_H
#define TT_ATTACH_EXT_H
#include <stddef.h>

#include "base/buf.h"
#include "core/attach.h"
#include "core/conf.h"

#define ATTACH_URL_REDIRECTS 5

struct attach_limits {
    size_t max_files, max_bytes;   /* a folder's */
    long url_timeout_ms;
    size_t url_max_bytes;
};

/* The process's limits: the built-in defaults until attach_limits_conf is called (the front
 * door does, once the configuration is final). */
const struct attach_limits *attach_limits(void);
void attach_limits_conf(const struct conf *c);

/* Add arg (a file, a folder or a URL) to l, as attach_add does for a file; what a folder left
 * out is appended to *warn for the user (may be NULL): a summary line, then "path: reason"
 * lines. A URL's fetch asks cancelled(ud) every 50 ms (NULL: never cancelled), and stops
 * with "cancelled" when it returns 1. */
int attach_any(struct attach_list *l, const char *arg, struct buf *warn, char **err,
               int (*cancelled)(void *ud), void *ud);
int attach_folder(struct attach_list *l, const char *dir, struct buf *warn, char **err);
int attach_url(struct attach_list *l, const char *url, char **err, int (*cancelled)(void *ud),
               void *ud);

/* A path as typed after /attach or pasted: 'quoted' or "quoted" (quotes removed), else with
 * backslash escapes undone ("my\ file" -> "my file"), blanks around it dropped, a leading "~/"
 * made $HOME's. Caller frees. */
char *attach_unquote(const char *text);

/* The argument of a drag-and-drop paste: text that is one existing path, maybe quoted ('..'
 * or "..") or with backslash escapes ("my\ file.txt"), or a file:// URL, surrounded by blanks.
 * Returns the path (caller frees), or NULL when the text is anything else. */
char *attach_pasted_path(const char *text);

#endif
