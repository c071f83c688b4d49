/* html.c - HTML to readable text through libxml2 (see html.h). */
#include "config.h"
#include "text/html.h"

#include "base/utf8.h"
#include "text/xml_dl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTML_PREFIX_MAX 32 /* bytes of "> " and list indentation a line may start with */
#define HTML_TABLES_MAX 16

struct html_table {
    int rows;  /* rows begun */
    int cells; /* cells of the first row */
};

struct html_frame {
    size_t plen;   /* prefix length to restore when the element ends */
    size_t mark;   /* links: where the text began (after "[") */
    int counter;   /* ol: next item number; 0 for ul */
    int kind;      /* what to undo at the end (HK_*) */
};

enum { HK_NONE, HK_BLOCK1, HK_BLOCK2, HK_LIST, HK_ITEM, HK_QUOTE, HK_PRE, HK_CODE, HK_LINK,
       HK_HEAD, HK_TABLE, HK_ROW, HK_CELL };

struct html {
    struct buf *out;
    size_t start, max;
    int full;
    int nl;    /* line ends owed before the next text: 0, 1 or 2 */
    int bol;   /* at the start of a line */
    int space; /* a space owed before the next word */
    char prefix[HTML_PREFIX_MAX + 1];
    size_t plen;
    int pre, cell, depth, ntables;
    const char *fence; /* the open <pre>'s fence */
    struct html_table tables[HTML_TABLES_MAX];
    struct html_frame frames[HTML_DEPTH_MAX];
};

/* Append raw bytes, within the limit; control characters other than TAB and LF are dropped
 * and invalid UTF-8 becomes U+FFFD, so the text is safe whatever the parser hands over. */
static void html_put(struct html *h, const char *s, size_t n)
{
    if (h->full)
        return;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        char enc[4];
        size_t elen = utf8_encode(cp, enc);
        int skip = (cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0x7f ||
                   (cp >= 0x80 && cp < 0xa0);
        if (!skip) {
            if (h->max && h->out->len - h->start + elen > h->max) {
                h->full = 1;
                return;
            }
            buf_append(h->out, enc, elen);
        }
        i += k;
    }
}

/* Pay the line ends owed, then the prefix at the start of a line. */
static void html_flush(struct html *h)
{
    if (h->out->len == h->start) {
        h->nl = 0;
    } else if (h->nl) {
        if (!h->bol)
            html_put(h, "\n", 1);
        for (int i = 1; i < h->nl; i++) {
            size_t p = h->plen;
            while (p && h->prefix[p - 1] == ' ')
                p--;
            html_put(h, h->prefix, p);
            html_put(h, "\n", 1);
        }
        h->bol = 1;
        h->space = 0;
    }
    h->nl = 0;
    if (h->bol) {
        html_put(h, h->prefix, h->plen);
        h->bol = 0;
        h->space = 0;
    }
}

/* Text that is not whitespace-collapsed further: a word, a marker, punctuation. */
static void html_word(struct html *h, const char *s, size_t n)
{
    if (!n)
        return;
    html_flush(h);
    if (h->space)
        html_put(h, " ", 1);
    h->space = 0;
    html_put(h, s, n);
}

static void html_words(struct html *h, const char *s)
{
    html_word(h, s, strlen(s));
}

/* A block boundary: lines owed (1: a new line, 2: a blank line); inside a table cell, a space. */
static void html_break(struct html *h, int lines)
{
    if (h->cell) {
        h->space = 1;
        return;
    }
    if (h->nl < lines)
        h->nl = lines;
}

static void html_text(struct html *h, const char *s)
{
    if (h->pre) {
        for (const char *p = s; *p;) {
            size_t k = strcspn(p, "\n\r");
            if (k)
                html_word(h, p, k);
            p += k;
            if (*p == '\n') {
                html_flush(h);
                html_put(h, "\n", 1);
                h->bol = 1;
            }
            if (*p)
                p++;
        }
        return;
    }
    for (const char *p = s; *p;) {
        size_t k = strcspn(p, " \t\n\r\f\v");
        if (k) {
            html_word(h, p, k);
            p += k;
        }
        size_t w = strspn(p, " \t\n\r\f\v");
        if (w && !h->bol)
            h->space = 1;
        p += w;
    }
}

static void html_prefix_push(struct html *h, const char *s)
{
    size_t n = strlen(s);
    if (h->plen + n > HTML_PREFIX_MAX)
        return;
    memcpy(h->prefix + h->plen, s, n + 1);
    h->plen += n;
}

static const char *html_attr(const xmlNode *n, const char *name)
{
    for (const xmlAttr *a = n->properties; a; a = a->next)
        if (a->name && strcasecmp((const char *)a->name, name) == 0)
            return a->children && a->children->content ? (const char *)a->children->content
                                                        : "";
    return NULL;
}

static int html_is(const xmlNode *n, const char *const *names)
{
    for (; *names; names++)
        if (strcmp((const char *)n->name, *names) == 0)
            return 1;
    return 0;
}

static int html_hidden(const xmlNode *n)
{
    static const char *const noise[] = {"script", "style", "noscript", "template", "nav",
                                        "aside", "footer", "form", "button", "select",
                                        "input", "textarea", "svg", "canvas", "iframe",
                                        "object", "embed", "head", "math", "dialog", NULL};
    if (html_is(n, noise) || html_attr(n, "hidden"))
        return 1;
    const char *aria = html_attr(n, "aria-hidden");
    if (aria && strcasecmp(aria, "true") == 0)
        return 1;
    const char *style = html_attr(n, "style");
    if (style) {
        char compact[128];
        size_t k = 0;
        for (const char *p = style; *p && k + 1 < sizeof compact; p++)
            if (*p != ' ' && *p != '\t')
                compact[k++] = *p;
        compact[k] = '\0';
        if (strcasestr(compact, "display:none") || strcasestr(compact, "visibility:hidden"))
            return 1;
    }
    return 0;
}

/* The language of a <pre> from its class or its <code> child's: "language-x" / "lang-x". */
static void html_pre_lang(const xmlNode *n, char *lang, size_t size)
{
    lang[0] = '\0';
    for (int pass = 0; pass < 2 && n; pass++) {
        const char *cls = html_attr(n, "class");
        const char *p = cls ? strstr(cls, "lang") : NULL;
        if (p && (strncmp(p, "language-", 9) == 0 || strncmp(p, "lang-", 5) == 0)) {
            p = strchr(p, '-') + 1;
            size_t k = 0;
            while (k + 1 < size && (p[k] == '+' || p[k] == '#' || p[k] == '_' ||
                                    (p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
                                    (p[k] >= '0' && p[k] <= '9')))
                k++;
            memcpy(lang, p, k);
            lang[k] = '\0';
            return;
        }
        n = n->children;
        while (n && n->type != XML_ELEMENT_NODE)
            n = n->next;
    }
}

/* The longest run of backticks in the text under n (bounded walk), for a fence longer than it. */
static int html_backticks(const xmlNode *top)
{
    int best = 0;
    const xmlNode *n = top->children;
    while (n && n != top) {
        if (n->type == XML_TEXT_NODE && n->content) {
            int run = 0;
            for (const char *p = (const char *)n->content; *p; p++) {
                run = *p == '`' ? run + 1 : 0;
                if (run > best)
                    best = run;
            }
        }
        if (n->children && n->type == XML_ELEMENT_NODE) {
            n = n->children;
            continue;
        }
        while (n && n != top && !n->next)
            n = n->parent;
        if (n && n != top)
            n = n->next;
    }
    return best > 15 ? 15 : best;
}

static struct html_table *html_table(struct html *h)
{
    return h->ntables > 0 && h->ntables <= HTML_TABLES_MAX ? &h->tables[h->ntables - 1] : NULL;
}

/* An element begins. Returns 0 when its content is left out. */
static int html_enter(struct html *h, const xmlNode *n, struct html_frame *f)
{
    static const char *const block2[] = {"p", "dl", "figure", "center", NULL};
    static const char *const block1[] = {"div", "section", "article", "header", "main",
                                         "figcaption", "dt", "dd", "address", "details",
                                         "summary", "caption", "fieldset", "legend", "body",
                                         "html", NULL};
    const char *name = (const char *)n->name;
    if (html_hidden(n))
        return 0;
    if (!f) /* deeper than the frames: plain text from here */
        return 1;
    f->kind = HK_NONE;
    f->plen = h->plen;
    if (html_is(n, block2)) {
        html_break(h, 2);
        f->kind = HK_BLOCK2;
    } else if (html_is(n, block1)) {
        html_break(h, 1);
        f->kind = HK_BLOCK1;
    } else if (name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && !name[2]) {
        html_break(h, 2);
        static const char hashes[] = "###### ";
        if (!h->cell)
            html_words(h, hashes + 6 - (name[1] - '0'));
        f->kind = HK_HEAD;
    } else if (!strcmp(name, "br")) {
        if (h->pre) {
            html_flush(h);
            html_put(h, "\n", 1);
            h->bol = 1;
        } else {
            html_break(h, 1);
        }
    } else if (!strcmp(name, "hr")) {
        html_break(h, 2);
        html_words(h, "---");
        html_break(h, 2);
    } else if (!strcmp(name, "ul") || !strcmp(name, "ol") || !strcmp(name, "menu")) {
        html_break(h, h->plen ? 1 : 2);
        f->kind = HK_LIST;
        const char *start = html_attr(n, "start");
        f->counter = name[0] == 'o' ? (start && atoi(start) > 0 && atoi(start) < 1000000
                                           ? atoi(start) : 1) : 0;
    } else if (!strcmp(name, "li")) {
        html_break(h, 1);
        struct html_frame *list = NULL;
        for (int d = h->depth - 1; d >= 0 && !list; d--)
            if (h->frames[d].kind == HK_LIST)
                list = &h->frames[d];
        char marker[24];
        if (list && list->counter > 0)
            snprintf(marker, sizeof marker, "%d.", list->counter++);
        else
            snprintf(marker, sizeof marker, "-");
        html_words(h, marker);
        h->space = 1;
        html_prefix_push(h, list && list->counter > 0 ? "   " : "  ");
        f->kind = HK_ITEM;
    } else if (!strcmp(name, "blockquote")) {
        html_break(h, 2);
        html_prefix_push(h, "> ");
        f->kind = HK_QUOTE;
    } else if (!strcmp(name, "pre") || !strcmp(name, "listing") || !strcmp(name, "xmp")) {
        if (h->pre++ == 0 && !h->cell) {
            static const char ticks[] = "````````````````";
            int k = html_backticks(n) + 1;
            h->fence = ticks + sizeof ticks - 1 - (k < 3 ? 3 : k);
            char lang[32];
            html_pre_lang(n, lang, sizeof lang);
            html_break(h, 2);
            html_words(h, h->fence);
            html_put(h, lang, strlen(lang));
            html_put(h, "\n", 1);
            h->bol = 1;
        }
        f->kind = HK_PRE;
    } else if ((!strcmp(name, "code") || !strcmp(name, "kbd") || !strcmp(name, "samp") ||
                !strcmp(name, "tt")) && !h->pre) {
        html_words(h, "`");
        f->mark = h->out->len;
        f->kind = HK_CODE;
    } else if (!strcmp(name, "a")) {
        const char *href = html_attr(n, "href");
        if (href && *href && href[0] != '#' && strncasecmp(href, "javascript:", 11) != 0 &&
            strncasecmp(href, "data:", 5) != 0 && !h->pre) {
            html_words(h, "[");
            f->mark = h->out->len - 1; /* where the "[" stands */
            f->kind = HK_LINK;
        }
    } else if (!strcmp(name, "img")) {
        const char *alt = html_attr(n, "alt");
        if (alt && *alt) {
            html_words(h, "[image:");
            h->space = 1;
            html_text(h, alt);
            html_words(h, "]");
        }
    } else if (!strcmp(name, "table")) {
        html_break(h, 2);
        h->ntables++;
        f->kind = HK_TABLE;
    } else if (!strcmp(name, "tr") && html_table(h) && !h->cell) {
        struct html_table *t = html_table(h);
        html_break(h, 1);
        if (t->rows == 1) { /* the separator after the first row */
            html_flush(h);
            html_words(h, "|");
            for (int i = 0; i < t->cells; i++)
                html_put(h, "---|", 4);
            html_break(h, 1);
        }
        t->rows++;
        html_words(h, "|");
        f->kind = HK_ROW;
    } else if ((!strcmp(name, "td") || !strcmp(name, "th")) && html_table(h) && !h->cell) {
        struct html_table *t = html_table(h);
        if (t->rows == 1)
            t->cells++;
        h->space = 1;
        h->cell++;
        f->kind = HK_CELL;
    }
    return 1;
}

static void html_leave(struct html *h, const xmlNode *n, struct html_frame *f)
{
    if (!f)
        return;
    switch (f->kind) {
    case HK_BLOCK2: case HK_HEAD: case HK_QUOTE: case HK_LIST:
        h->plen = f->plen;
        h->prefix[h->plen] = '\0';
        html_break(h, f->kind == HK_LIST && h->plen ? 1 : 2);
        break;
    case HK_BLOCK1: case HK_ITEM: case HK_ROW:
        h->plen = f->plen;
        h->prefix[h->plen] = '\0';
        html_break(h, 1);
        break;
    case HK_PRE:
        if (--h->pre == 0 && !h->cell) {
            if (!h->bol)
                html_put(h, "\n", 1);
            h->bol = 1;
            h->nl = 0;
            html_words(h, h->fence);
            html_break(h, 2);
        }
        break;
    case HK_CODE:
        if (h->full) {
            break;
        } else if (h->out->len == f->mark) { /* nothing inside: no empty pair of backticks */
            h->out->len = f->mark - 1;
            h->out->data[h->out->len] = '\0';
        } else {
            html_word(h, "`", 1);
        }
        break;
    case HK_LINK: {
        const char *href = html_attr(n, "href");
        size_t textlen = h->out->len - f->mark - 1;
        if (h->full) {
            break;
        } else if (textlen == 0 || (textlen == strlen(href) &&
                                    !memcmp(h->out->data + f->mark + 1, href, textlen))) {
            /* no text, or the text is the address: no brackets */
            memmove(h->out->data + f->mark, h->out->data + f->mark + 1, textlen);
            h->out->len--;
            h->out->data[h->out->len] = '\0';
        } else {
            html_put(h, "](", 2);
            html_put(h, href, strcspn(href, " \t\r\n"));
            html_put(h, ")", 1);
        }
        break;
    }
    case HK_TABLE:
        h->ntables--;
        html_break(h, 2);
        break;
    case HK_CELL:
        h->cell--;
        h->space = 1;
        html_word(h, "|", 1);
        break;
    default:
        break;
    }
}

/* "Title: ..." from the <head>'s <title>, if any. */
static void html_title(struct html *h, const xmlNode *html)
{
    for (const xmlNode *c = html ? html->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "head") != 0)
            continue;
        for (const xmlNode *t = c->children; t; t = t->next) {
            if (t->type != XML_ELEMENT_NODE || strcmp((const char *)t->name, "title") != 0 ||
                !t->children || !t->children->content)
                continue;
            html_words(h, "Title:");
            h->space = 1;
            html_text(h, (const char *)t->children->content);
            html_break(h, 2);
            return;
        }
    }
}

static void html_silent(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

static void html_silent_structured(void *ctx, xmlErrorPtr err)
{
    (void)ctx;
    (void)err;
}

int html_to_text(const char *html, size_t n, const char *encoding, size_t max_out,
                 struct buf *out, const char **why)
{
    if (xml_dl_load(why) != 0)
        return -1;
    if (n > INT_MAX) {
        if (why)
            *why = "the page is too large to parse";
        return -1;
    }
    /* The library's own messages would land on the terminal: none. */
    xmlSetGenericErrorFunc(NULL, html_silent);
    xmlSetStructuredErrorFunc(NULL, html_silent_structured);
    htmlDocPtr doc = htmlReadMemory(n ? html : "", (int)n, NULL, encoding,
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                        HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                                        HTML_PARSE_NOBLANKS | HTML_PARSE_COMPACT | XML_PARSE_HUGE);
    if (!doc) /* nothing in it: no text */
        return 0;
    struct html *h = calloc(1, sizeof *h);
    if (!h) {
        xmlFreeDoc(doc);
        if (why)
            *why = "out of memory";
        return -1;
    }
    h->out = out;
    h->start = out->len;
    h->max = max_out;
    h->bol = 1;
    buf_reserve(out, 0);
    xmlNode *top = (xmlNode *)doc;
    xmlNode *root = top->children;
    while (root && root->type != XML_ELEMENT_NODE)
        root = root->next;
    html_title(h, root);

    /* Depth-first without recursion: enter each element, its children, leave it. */
    xmlNode *node = top->children;
    while (node && !h->full) {
        int descend = 0;
        if (node->type == XML_ELEMENT_NODE) {
            struct html_frame *f = h->depth < HTML_DEPTH_MAX ? &h->frames[h->depth] : NULL;
            descend = html_enter(h, node, f);
            if (descend && !node->children)
                html_leave(h, node, f);
        } else if ((node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) &&
                   node->content) {
            html_text(h, (const char *)node->content);
        }
        if (descend && node->children) {
            h->depth++;
            node = node->children;
            continue;
        }
        while (node && node != top && !node->next) {
            node = node->parent;
            if (node == top || !node)
                break;
            h->depth--;
            html_leave(h, node, h->depth < HTML_DEPTH_MAX ? &h->frames[h->depth] : NULL);
        }
        node = node && node != top ? node->next : NULL;
    }
    int cut = h->full;
    free(h);
    xmlFreeDoc(doc);
    /* No trailing whitespace. */
    while (out->len > 0 && (out->data[out->len - 1] == '\n' || out->data[out->len - 1] == ' '))
        out->data[--out->len] = '\0';
    return cut;
}
