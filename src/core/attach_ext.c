/* attach_ext.c - folders and URLs as attachments (attach_ext.h). */
#include "config.h"
#include "core/attach_ext.h"

#include "base/xmalloc.h"
#include "core/folder.h"
#include "net/fetch.h"
#include "text/html.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static struct attach_limits attach_lim = {200, 1u << 20, 20000, 5u << 20};

const struct attach_limits *attach_limits(void)
{
    return &attach_lim;
}

void attach_limits_conf(const struct conf *c)
{
    attach_lim.max_files = (size_t)c->attach_max_files;
    attach_lim.max_bytes = (size_t)c->attach_max_bytes;
    attach_lim.url_timeout_ms = (long)(c->attach_url_timeout * 1000 + 0.5);
    attach_lim.url_max_bytes = (size_t)c->attach_url_max_bytes;
}

int attach_any(struct attach_list *l, const char *arg, struct buf *warn, char **err,
               int (*cancelled)(void *ud), void *ud)
{
    struct stat st;
    if (net_fetch_is_url(arg))
        return attach_url(l, arg, err, cancelled, ud);
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode))
        return attach_folder(l, arg, warn, err);
    return attach_add(l, arg, err);
}

/* ---- folders --------------------------------------------------------------------------- */

struct attach_folder_take {
    struct attach_list got;
};

static int attach_folder_one(void *ud, const char *path, const char *data, size_t len,
                             const char **why)
{
    struct attach_folder_take *t = ud;
    struct attach a;
    char *err = NULL;
    if (attach_from_bytes(&a, path, (const unsigned char *)data, len, &err) != 0) {
        free(err);
        *why = "binary (not UTF-8 or UTF-16 text)";
        return -1;
    }
    if (a.kind != ATTACH_TEXT) {
        *why = a.kind == ATTACH_IMAGE ? "an image (attach it on its own)"
                                      : "a PDF (attach it on its own)";
        attach_clear(&a);
        return -1;
    }
    XGROW(t->got.v, t->got.n + 1, t->got.cap);
    t->got.v[t->got.n++] = a;
    return 0;
}

int attach_folder(struct attach_list *l, const char *dir, struct buf *warn, char **err)
{
    const struct attach_limits *lim = attach_limits();
    struct folder_limits fl = {lim->max_files, lim->max_bytes};
    struct folder_report rep;
    struct attach_folder_take t;
    memset(&t, 0, sizeof t);
    if (folder_walk(dir, &fl, attach_folder_one, &t, &rep, err) != 0)
        return -1;
    if (t.got.n == 0) {
        *err = xasprintf("%s: no text file to attach%s%s%s", dir,
                         rep.left_out ? " (left out:\n" : "", buf_str(&rep.listing),
                         rep.left_out ? ")" : "");
        /* one line less: the listing ends with a newline */
        size_t k = strlen(*err);
        if (k >= 2 && (*err)[k - 2] == '\n')
            memmove(*err + k - 2, *err + k - 1, 2);
        buf_free(&rep.listing);
        attach_list_free(&t.got);
        return -1;
    }
    if (rep.left_out) {
        char *name = xasprintf("%s%s (left out)", dir,
                               dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/");
        struct buf note = BUF_INIT;
        buf_printf(&note, "Left out of the folder %s (%zu %s%s):\n%s", dir, rep.left_out,
                   rep.left_out == 1 ? "entry" : "entries",
                   rep.truncated ? "; the limit was reached" : "", buf_str(&rep.listing));
        struct attach a;
        char *e2 = NULL;
        if (attach_from_bytes(&a, name, (const unsigned char *)note.data, note.len, &e2) == 0) {
            XGROW(t.got.v, t.got.n + 1, t.got.cap);
            t.got.v[t.got.n++] = a;
        }
        free(e2);
        buf_free(&note);
        free(name);
    }
    if (warn && rep.left_out) {
        struct buf size = BUF_INIT;
        attach_size(&size, rep.bytes);
        buf_printf(warn, "%s: %zu file%s (%s) attached, %zu left out%s:\n%s", dir, rep.files,
                   rep.files == 1 ? "" : "s", buf_str(&size), rep.left_out,
                   rep.truncated ? " (over the limit: attach_max_files, attach_max_bytes)" : "",
                   buf_str(&rep.listing));
        buf_free(&size);
    }
    buf_free(&rep.listing);
    attach_list_move(l, &t.got);
    attach_list_free(&t.got);
    return 0;
}

/* ---- URLs ------------------------------------------------------------------------------ */

enum attach_url_kind { AU_REFUSE, AU_HTML, AU_TEXT, AU_BYTES };

/* What a Content-Type becomes. */
static enum attach_url_kind attach_url_kind_of(const char *ct)
{
    char type[96];
    size_t n = strcspn(ct, "; \t");
    snprintf(type, sizeof type, "%.*s", (int)(n < sizeof type ? n : sizeof type - 1), ct);
    for (char *p = type; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    static const char *const text[] = {
        "application/json", "application/xml", "application/javascript",
        "application/x-javascript", "application/ecmascript", "application/x-yaml",
        "application/yaml", "application/toml", "application/x-sh", "application/x-shellscript",
        "application/sql", "application/x-httpd-php", "application/ld+json", NULL};
    static const char *const bytes[] = {"image/png", "image/jpeg", "image/gif", "image/webp",
                                        "application/pdf", "application/x-pdf",
                                        "application/octet-stream", "", NULL};
    if (!strcmp(type, "text/html") || !strcmp(type, "application/xhtml+xml"))
        return AU_HTML;
    if (!strncmp(type, "text/", 5))
        return AU_TEXT;
    for (size_t i = 0; text[i]; i++)
        if (!strcmp(type, text[i]))
            return AU_TEXT;
    n = strlen(type);
    if ((n > 5 && !strcmp(type + n - 5, "+json")) || (n > 4 && !strcmp(type + n - 4, "+xml")))
        return AU_TEXT;
    for (size_t i = 0; bytes[i]; i++)
        if (!strcmp(type, bytes[i]))
            return AU_BYTES;
    return AU_REFUSE;
}

static int attach_url_accept(const char *ct, void *ud)
{
    (void)ud;
    return attach_url_kind_of(ct) != AU_REFUSE;
}

/* The charset parameter of a Content-Type, or NULL. */
static const char *attach_url_charset(const char *ct, char *out, size_t size)
{
    const char *p = strcasestr(ct, "charset=");
    if (!p)
        return NULL;
    p += 8;
    if (*p == '"')
        p++;
    size_t n = strcspn(p, "\"; \t");
    if (!n || n >= size)
        return NULL;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* 1 when bytes without a type start like an HTML page. */
static int attach_url_looks_html(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    return (n >= 9 && !strncasecmp(s, "<!doctype", 9)) || (n >= 5 && !strncasecmp(s, "<html", 5));
}

int attach_url(struct attach_list *l, const char *url, char **err, int (*cancelled)(void *ud),
               void *ud)
{
    const struct attach_limits *lim = attach_limits();
    struct net_fetch_request req = {url, lim->url_timeout_ms, lim->url_max_bytes,
                                    ATTACH_URL_REDIRECTS, "tokterm/" PACKAGE_VERSION,
                                    attach_url_accept, ud, cancelled};
    struct net_fetch_result res;
    if (net_fetch(&req, &res) != 0) {
        const char *hint = res.failure == NET_FETCH_TIMEOUT ? " (attach_url_timeout)"
                           : res.failure == NET_FETCH_SIZE  ? " (attach_url_max_bytes)"
                                                            : "";
        *err = xasprintf("%s: %s%s", url, res.why, hint);
        net_fetch_result_free(&res);
        return -1;
    }
    enum attach_url_kind kind = attach_url_kind_of(res.content_type);
    if (kind == AU_BYTES && !res.content_type[0] &&
        attach_url_looks_html(buf_str(&res.body), res.body.len))
        kind = AU_HTML;
    struct attach a;
    int rc;
    if (kind == AU_HTML) {
        struct buf text = BUF_INIT;
        char cs[64];
        const char *why = NULL;
        if (strcmp(res.final_url, url) != 0)
            buf_printf(&text, "(from %s)\n\n", res.final_url);
        size_t before = text.len;
        if (html_to_text(buf_str(&res.body), res.body.len,
                         attach_url_charset(res.content_type, cs, sizeof cs),
                         lim->url_max_bytes, &text, &why) < 0) {
            *err = xasprintf("%s: %s", url, why);
            rc = -1;
        } else if (text.len == before) {
            *err = xasprintf("%s: the page has no readable text (it may be drawn by "
                             "JavaScript)", url);
            rc = -1;
        } else {
            /* named so that no language is taken from the URL's ".html" for the fence */
            char *name = xasprintf("%s (page text)", url);
            rc = attach_from_bytes(&a, name, (const unsigned char *)text.data, text.len, err);
            free(name);
        }
        buf_free(&text);
    } else {
        /* the bytes decide, as for a file: a PNG sent as text/plain is an image */
        rc = attach_from_bytes(&a, url, (const unsigned char *)buf_str(&res.body),
                               res.body.len, err);
    }
    net_fetch_result_free(&res);
    if (rc != 0)
        return -1;
    XGROW(l->v, l->n + 1, l->cap);
    l->v[l->n++] = a;
    return 0;
}

/* ---- drag and drop --------------------------------------------------------------------- */

char *attach_unquote(const char *text)
{
    while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
        text++;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' ||
                 text[n - 1] == '\r'))
        n--;
    struct buf p = BUF_INIT;
    buf_reserve(&p, n + 1);
    if ((text[0] == '\'' || text[0] == '"') && n >= 2 && text[n - 1] == text[0]) {
        buf_append(&p, text + 1, n - 2);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (text[i] == '\\' && i + 1 < n)
                i++;
            buf_appendc(&p, text[i]);
        }
    }
    buf_appendc(&p, '\0');
    p.len--;
    char *path = buf_take(&p);
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || !path[1]) && home && *home) { /* as a shell does */
        char *full = xasprintf("%s%s", home, path + 1);
        free(path);
        path = full;
    }
    return path;
}

/* 1 when text (blanks trimmed) holds an unescaped, unquoted blank or a line break: words,
 * not one path. */
static int attach_paste_is_words(const char *text)
{
    while (*text == ' ' || *text == '\t')
        text++;
    size_t n = strlen(text);
    while (n && strchr(" \t\r\n", text[n - 1]))
        n--;
    if (!n || n > 4096 || memchr(text, '\n', n))
        return 1;
    if ((text[0] == '\'' || text[0] == '"') && n >= 2 && text[n - 1] == text[0])
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\\')
            i++;
        else if (text[i] == ' ' || text[i] == '\t')
            return 1;
    }
    return 0;
}

char *attach_pasted_path(const char *text)
{
    if (attach_paste_is_words(text))
        return NULL;
    char *path = attach_unquote(text);
    if (!strncmp(path, "file://", 7)) { /* file:///home/x%20y: percent-decoded */
        const char *s = path + 7;
        if (strncmp(s, "localhost/", 10) == 0)
            s += 9;
        struct buf d = BUF_INIT;
        for (; *s; s++) {
            if (*s == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
                char hex[3] = {s[1], s[2], 0};
                char c = (char)strtol(hex, NULL, 16);
                if (!c)
                    break;
                buf_appendc(&d, c);
                s += 2;
            } else {
                buf_appendc(&d, *s);
            }
        }
        free(path);
        path = buf_take(&d);
        if (!path)
            return NULL;
    }
    struct stat st;
    if (path[0] != '/' && path[0] != '.') {
        free(path);
        return NULL; /* a word that happens to name a file in the current folder: text */
    }
    if (stat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
        free(path);
        return NULL;
    }
    return path;
}
