/* ansi.c - Markdown's styled lines as rows of text with SGR escapes (see ansi.h). */
#include "config.h"
#include "text/ansi.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/table.h"
#include "text/wrap.h"

#include <stdlib.h>
#include <string.h>

/* Every attribute bit a span or a slot may carry, and its SGR parameter. A bit added to
 * theme.h gets its line here. */
static const struct {
    unsigned bit;
    const char *sgr;
} ansi_attrs[] = {
    {THEME_ATTR_BOLD, "1"},      {THEME_ATTR_DIM, "2"},     {THEME_ATTR_ITALIC, "3"},
    {THEME_ATTR_UNDERLINE, "4"}, {THEME_ATTR_REVERSE, "7"},
    {THEME_ATTR_STRIKE, "9"},
};

int ansi_colors(const char *term, const char *colorterm)
{
    if (!term || !*term || strcmp(term, "dumb") == 0)
        return 0;
    if (strstr(term, "256color") ||
        (colorterm && (strcmp(colorterm, "truecolor") == 0 || strcmp(colorterm, "24bit") == 0)))
        return 256;
    return 8;
}

void ansi_styles(const struct theme *t, int ncolors, int no_color, struct theme_style *out)
{
    theme_resolve(t, ncolors, no_color || ncolors == 0, out);
    short bg0 = out[THEME_DEFAULT].bg;
    for (int i = 0; i < THEME_SLOT_COUNT; i++) {
        if (!no_color && ncolors == 0)
            out[i] = (struct theme_style){-1, -1, 0}; /* a dumb terminal: no escapes */
        else if (out[i].bg == bg0)
            out[i].bg = -1;
    }
}

static int ansi_same(const struct theme_style *a, const struct theme_style *b)
{
    return a->fg == b->fg && a->bg == b->bg && a->attrs == b->attrs;
}

static int ansi_plain(const struct theme_style *s)
{
    return s->fg < 0 && s->bg < 0 && !s->attrs;
}

static void ansi_colour(struct buf *out, int c, int base, int bright)
{
    if (c < 8)
        buf_printf(out, ";%d", base + c);
    else if (c < 16)
        buf_printf(out, ";%d", bright + c - 8);
    else
        buf_printf(out, ";%d;5;%d", base + 8, c);
}

/* Switch from style *cur to s. */
static void ansi_set(struct buf *out, struct theme_style *cur, const struct theme_style *s)
{
    if (ansi_same(cur, s))
        return;
    *cur = *s;
    buf_appends(out, "\033[0");
    for (size_t i = 0; i < TT_ARRAY_LEN(ansi_attrs); i++)
        if (s->attrs & ansi_attrs[i].bit)
            buf_printf(out, ";%s", ansi_attrs[i].sgr);
    if (s->fg >= 0)
        ansi_colour(out, s->fg, 30, 90);
    if (s->bg >= 0)
        ansi_colour(out, s->bg, 40, 100);
    buf_appendc(out, 'm');
}

static struct theme_style ansi_style(const struct theme_style *st, int slot, unsigned extra)
{
    struct theme_style s = st[slot >= 0 && slot < THEME_SLOT_COUNT ? slot : THEME_DEFAULT];
    s.attrs |= extra;
    return s;
}

static void ansi_put(struct buf *out, struct theme_style *cur, const struct theme_style *s,
                     const char *text, size_t n)
{
    if (!n)
        return;
    ansi_set(out, cur, s);
    buf_append(out, text, n);
}

static void ansi_spaces(struct buf *out, struct theme_style *cur, const struct theme_style *s,
                        int k)
{
    if (k <= 0)
        return;
    ansi_set(out, cur, s);
    for (int i = 0; i < k; i++)
        buf_appendc(out, ' ');
}

static void ansi_row_end(struct buf *out, struct theme_style *cur)
{
    if (!ansi_plain(cur))
        buf_appends(out, "\033[0m");
    *cur = (struct theme_style){-1, -1, 0};
    buf_appendc(out, '\n');
}

/* The bytes of row in their spans' styles (base where none covers them); *j is the first
 * span that may reach the row (rows come in order). */
/* The URL of a link span s[0..n) for OSC 8: a whole http(s) URL of printable ASCII (no
 * space, no byte that could end the sequence), or NULL. */
static const char *ansi_url(const char *s, size_t n)
{
    if (n < 8 || (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F)
            return NULL;
    return s;
}

static void ansi_row_text(struct buf *out, struct theme_style *cur, const struct theme_style *st,
                          const struct theme_style *base, const char *text,
                          const struct theme_span *spans, size_t nspans, size_t *j,
                          const struct wrap_row *row, int links)
{
    size_t a = row->off, b = a + row->len;
    while (*j < nspans && spans[*j].off + spans[*j].len <= a)
        (*j)++;
    for (size_t pos = a; pos < b;) {
        const struct theme_span *sp = *j < nspans ? &spans[*j] : NULL;
        size_t end;
        struct theme_style s;
        const char *url = NULL;
        if (sp && sp->off <= pos) {
            end = sp->off + sp->len < b ? sp->off + sp->len : b;
            s = ansi_style(st, sp->slot, sp->attrs);
            if (links && sp->slot == THEME_LINK) /* the whole span, on each row it spans */
                url = ansi_url(text + sp->off, sp->len);
            if (url)
                buf_printf(out, "\033]8;;%.*s\033\\", (int)sp->len, url);
            if (end == sp->off + sp->len)
                (*j)++;
        } else {
            end = sp && sp->off < b ? sp->off : b;
            s = *base;
        }
        ansi_put(out, cur, &s, text + pos, end - pos);
        if (url)
            buf_appends(out, "\033]8;;\033\\");
        pos = end;
    }
}

/* A table row (WRAP_TABLE): laid out at the width by table.c, as wrap_doc does for the chat.
 * Returns 0, or -1 when it is not an encoded row. */
static int ansi_table(struct buf *out, const struct wrap_line *wl, const struct theme_style *st,
                      int width)
{
    struct table_out t = TABLE_OUT_INIT;
    int rc = table_layout(wl->text, wl->len, wl->spans, wl->nspans, wl->slot, width, &t);
    struct theme_style cur = {-1, -1, 0}, base = ansi_style(st, wl->slot, 0);
    size_t j = 0;
    for (size_t r = 0; rc == 0 && r < t.rows.n; r++) {
        ansi_spaces(out, &cur, &base, (int)t.rows.v[r].indent);
        /* no links: a URL wrapped in its cell is in pieces */
        ansi_row_text(out, &cur, st, &base, t.text.data, t.spans, t.nspans, &j, &t.rows.v[r], 0);
        ansi_row_end(out, &cur);
    }
    table_out_free(&t);
    return rc;
}

static void ansi_line_links(struct buf *out, const struct markdown_line *ml,
                            const struct theme_style *st, int width, int links);

void ansi_line(struct buf *out, const struct markdown_line *ml, const struct theme_style *st,
               int width)
{
    ansi_line_links(out, ml, st, width, 0);
}

static void ansi_line_links(struct buf *out, const struct markdown_line *ml,
                            const struct theme_style *st, int width, int links)
{
    const struct wrap_line *wl = &ml->wl;
    struct theme_style cur = {-1, -1, 0};
    if (width < 1)
        width = 1;
    if ((wl->flags & WRAP_TABLE) && ansi_table(out, wl, st, width) == 0)
        return;
    if (wl->flags & WRAP_RULE) {
        int slot = wl->nspans && wl->spans[0].len ? wl->spans[0].slot : wl->slot;
        struct theme_style s = ansi_style(st, slot, 0);
        ansi_set(out, &cur, &s);
        for (int i = 0; i < width; i++)
            buf_append(out, "\xE2\x94\x80", 3);
        ansi_row_end(out, &cur);
        return;
    }
    int kind = wl->tag & 0xFF, level = wl->tag >> 8;
    int code = kind == MARKDOWN_CODE || kind == MARKDOWN_CODE_LABEL;
    struct theme_style base = ansi_style(st, wl->slot, 0);
    struct theme_style quote = ansi_style(st, THEME_QUOTE, 0);
    struct theme_style pad = ansi_style(st, THEME_CODE, 0);
    struct wrap_rows rows = {0};
    wrap_text(&rows, wl->text, wl->len, width, wl->hang, wl->flags & WRAP_PRE);
    size_t j = 0;
    for (size_t r = 0; r < rows.n; r++) {
        const struct wrap_row *row = &rows.v[r];
        int indent = (int)row->indent;
        if (kind == MARKDOWN_QUOTE && r > 0 && indent >= 2 * level) {
            for (int d = 0; d < level; d++)
                ansi_put(out, &cur, &quote, "\xE2\x94\x82 ", 4);
            indent -= 2 * level;
        }
        ansi_spaces(out, &cur, &base, indent);
        ansi_row_text(out, &cur, st, &base, wl->text, wl->spans, wl->nspans, &j, row, links);
        if (code && pad.bg >= 0)
            ansi_spaces(out, &cur, &pad, width - (int)(row->indent + row->width));
        ansi_row_end(out, &cur);
    }
    wrap_rows_free(&rows);
}

/* ---- the streamed answer ---- */

struct ansi_md {
    struct markdown *md;
    struct theme_style st[THEME_SLOT_COUNT];
    int width;
    size_t done;      /* finished lines written */
    struct buf line;  /* the source line being received (markdown gets whole lines) */
    int raw;          /* in a line over ANSI_LONG_LINE: written as it comes until its '\n' */
    struct buf tail;  /* raw mode: an unfinished UTF-8 sequence held back */
    int links;        /* URLs as OSC 8 hyperlinks (ansi_md_hyperlinks) */
    /* ansi_md_live: the unfinished line drawn as it grows (markdown is fed it as it comes,
     * r->line keeps a copy for raw mode), at most live_rows rows of it, redrawn at most every
     * ANSI_LIVE_INTERVAL s; shown: rows of it on the screen above the cursor. */
    int live_rows;
    size_t shown;
    double drawn_at, line_at; /* the last draw; when the unfinished line began */
    struct buf fresh, preview;
};

#define ANSI_LIVE_INTERVAL 0.04 /* between two draws */
#define ANSI_LIVE_DELAY 0.1     /* a line that ends sooner is never drawn unfinished */
#define ANSI_LIVE_MAX ((size_t)64 << 10) /* a longer unfinished line is not redrawn */

void ansi_md_highlight(struct ansi_md *r, int on)
{
    markdown_set_highlight(r->md, on);
}

struct ansi_md *ansi_md_new(const struct theme_style *st, int width, int base_slot)
{
    struct ansi_md *r = xcalloc(1, sizeof *r);
    r->md = markdown_new(base_slot);
    memcpy(r->st, st, sizeof r->st);
    r->width = width < 1 ? 1 : width;
    return r;
}

void ansi_md_hyperlinks(struct ansi_md *r, int on)
{
    r->links = on != 0;
}

/* Terminals known to show OSC 8 hyperlinks, by the variables they set. */
static int ansi_links_known(const char *(*env)(const char *))
{
    static const char *const programs[] = {"iTerm.app", "WezTerm", "vscode", "ghostty",
                                           "Hyper", "rio", "Tabby"};
    const char *v = env("TERM_PROGRAM");
    for (size_t i = 0; v && i < sizeof(programs) / sizeof(programs[0]); i++)
        if (strcmp(v, programs[i]) == 0)
            return 1;
    v = env("VTE_VERSION"); /* GNOME Terminal, Tilix...: since VTE 0.50 */
    if (v && strtol(v, NULL, 10) >= 5000)
        return 1;
    v = env("TERM");
    return env("KITTY_WINDOW_ID") || env("WT_SESSION") || env("KONSOLE_VERSION") ||
           env("ALACRITTY_WINDOW_ID") || env("WEZTERM_PANE") ||
           (v && (strcmp(v, "xterm-kitty") == 0 || strncmp(v, "foot", 4) == 0));
}

int ansi_hyperlinks(const char *setting, int tty, const char *(*env)(const char *))
{
    if (setting && strcmp(setting, "always") == 0)
        return 1;
    if ((setting && strcmp(setting, "never") == 0) || !tty)
        return 0;
    const char *term = env("TERM");
    if (env("TMUX") || (term && (strncmp(term, "tmux", 4) == 0 || strncmp(term, "screen", 6) == 0)))
        return 0; /* tmux and screen pass them on only when set up to: the outer terminal's
                     variables say nothing about that (hyperlinks = always if yours does) */
    return ansi_links_known(env);
}

void ansi_md_free(struct ansi_md *r)
{
    if (!r)
        return;
    markdown_free(r->md);
    buf_free(&r->line);
    buf_free(&r->tail);
    buf_free(&r->fresh);
    buf_free(&r->preview);
    free(r);
}

/* Write the lines markdown has finished and let it forget them. */
static void ansi_md_drain(struct ansi_md *r, struct buf *out)
{
    size_t n = markdown_count(r->md);
    for (; r->done < n; r->done++)
        ansi_line_links(out, markdown_line(r->md, r->done), r->st, r->width, r->links);
    markdown_release(r->md, r->done);
}

/* Raw mode: s[0..n) sanitised, an unfinished UTF-8 sequence kept for the next piece (all of
 * it when last). */
static void ansi_md_raw(struct ansi_md *r, const char *s, size_t n, int last, struct buf *out)
{
    buf_append(&r->tail, s, n);
    size_t len = r->tail.len, hold = last ? 0 : utf8_incomplete_tail(r->tail.data, len);
    wrap_clean(out, r->tail.data, len - hold);
    memmove(r->tail.data, r->tail.data + len - hold, hold);
    r->tail.len = hold;
}

void ansi_md_live(struct ansi_md *r, int rows)
{
    r->live_rows = rows > 0 ? rows : 0;
}

/* Each row erased by itself (EL), not the screen below (ED): tmux moves the whole screen into
 * its history when ED comes at the top-left corner, leaving a copy of every redraw there. */
void ansi_md_hide(struct ansi_md *r, struct buf *out)
{
    if (!r->shown)
        return;
    buf_printf(out, "\r\x1b[%zuA", r->shown);
    for (size_t i = 0; i < r->shown; i++)
        buf_appends(out, "\x1b[2K\x1b[B");
    buf_printf(out, "\x1b[%zuA", r->shown);
    r->shown = 0;
}

/* Draw the unfinished line (and a table's rows still coming): its last live_rows rows, each
 * ended by '\n', so that ansi_md_hide finds their first row live_rows up. */
static void ansi_md_preview(struct ansi_md *r, struct buf *out)
{
    size_t n = markdown_pending_count(r->md), rows = 0;
    buf_reset(&r->preview);
    for (size_t i = 0; i < n; i++)
        ansi_line_links(&r->preview, markdown_pending_line(r->md, i), r->st, r->width,
                        r->links);
    if (!r->preview.len) { /* nothing pending (and no buffer yet: memchr takes no NULL) */
        r->shown = 0;
        return;
    }
    const char *p = r->preview.data, *end = p + r->preview.len;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))); q++)
        rows++;
    for (; rows > (size_t)r->live_rows; rows--)
        p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
    buf_append(out, p, (size_t)(end - p));
    r->shown = rows;
}

static void ansi_md_feed_rows(struct ansi_md *r, const char *s, size_t n, struct buf *out);

void ansi_md_feed(struct ansi_md *r, const char *s, size_t n, struct buf *out)
{
    if (!r->live_rows) {
        ansi_md_feed_rows(r, s, n, out);
        return;
    }
    buf_reset(&r->fresh);
    int had = r->line.len > 0;
    ansi_md_feed_rows(r, s, n, &r->fresh);
    double now = util_now();
    if (r->line.len && (!had || r->fresh.len))
        r->line_at = now;
    int due = now - r->line_at >= ANSI_LIVE_DELAY && now - r->drawn_at >= ANSI_LIVE_INTERVAL &&
              r->line.len <= ANSI_LIVE_MAX;
    if (!r->fresh.len && !due)
        return;
    ansi_md_hide(r, out);
    buf_append(out, r->fresh.data, r->fresh.len);
    if (due && !r->raw) {
        ansi_md_preview(r, out);
        r->drawn_at = now;
    }
}

static void ansi_md_feed_rows(struct ansi_md *r, const char *s, size_t n, struct buf *out)
{
    while (n) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) + 1 : n;
        if (r->raw) {
            ansi_md_raw(r, s, nl ? k - 1 : k, nl != NULL, out);
            if (nl) {
                buf_appendc(out, '\n');
                r->raw = 0;
            }
        } else if (nl) {
            if (r->line.len && r->live_rows) { /* markdown has the line's start */
                markdown_feed(r->md, s, k);
                buf_reset(&r->line);
            } else if (r->line.len) {
                buf_append(&r->line, s, k);
                markdown_feed(r->md, r->line.data, r->line.len);
                buf_reset(&r->line);
            } else { /* every whole line of the piece at once, not a copy of each */
                k = (size_t)((const char *)memrchr(s, '\n', n) - s) + 1;
                markdown_feed(r->md, s, k);
            }
            ansi_md_drain(r, out);
        } else {
            buf_append(&r->line, s, k);
            if (r->live_rows && r->line.len <= ANSI_LONG_LINE)
                markdown_feed(r->md, s, k); /* to be drawn before its end */
            if (r->line.len > ANSI_LONG_LINE) { /* too long to style: written as it comes */
                markdown_skip_line(r->md);  /* a table being received ends */
                ansi_md_drain(r, out);
                r->raw = 1;
                ansi_md_raw(r, r->line.data, r->line.len, 0, out);
                buf_free(&r->line);
            }
        }
        s += k;
        n -= k;
    }
}

void ansi_md_finish(struct ansi_md *r, struct buf *out)
{
    ansi_md_hide(r, out);
    if (r->raw) {
        ansi_md_raw(r, "", 0, 1, out);
        r->raw = 0;
    } else if (r->line.len) {
        if (!r->live_rows) /* else markdown has it */
            markdown_feed(r->md, r->line.data, r->line.len);
        buf_free(&r->line);
    }
    markdown_finish(r->md);
    ansi_md_drain(r, out);
}
