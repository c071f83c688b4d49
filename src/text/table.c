/* table.c - Markdown table rows laid out at a width: proportional columns, cells wrapped by
 * grapheme width, a record per row when even that does not fit (see table.h). */
#include "config.h"
#include "text/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"

#define TABLE_NUM_MAX (1u << 24) /* a measured width above this is read as this */
#define TABLE_ROW_ROWS 256 /* a row this many rows high is shown as a record: its borders would
                              repeat on every row, a cost many times its text */

#define BAR "\xE2\x94\x82"   /* │ */
#define HLINE "\xE2\x94\x80" /* ─ */

/* ---- measuring and encoding (markdown.c's side) ---- */

void table_measure(struct table_col *col, const char *s, size_t n)
{
    size_t pos = 0, word = 0, total = 0;
    while (pos < n) {
        int w;
        size_t k = wrap_cluster(s + pos, n - pos, &w);
        if (s[pos] == ' ') {
            word = 0;
        } else if (w >= 2) { /* wide: a line may break before and after it (CJK) */
            word = (size_t)w;
        } else {
            word += (size_t)w;
        }
        if (word > col->word)
            col->word = word > TABLE_NUM_MAX ? TABLE_NUM_MAX : (uint32_t)word;
        if ((uint32_t)w > col->min)
            col->min = (uint32_t)w;
        total += (size_t)w;
        pos += k;
    }
    if (total > col->nat)
        col->nat = total > TABLE_NUM_MAX ? TABLE_NUM_MAX : (uint32_t)total;
}

void table_meta(struct buf *out, char kind, int ncols, const struct table_col *cols)
{
    buf_printf(out, "\x1d%c%d", kind, ncols);
    for (int c = 0; c < ncols; c++)
        buf_printf(out, ";%c%u,%u,%u", cols[c].align, cols[c].nat, cols[c].word, cols[c].min);
    buf_appendc(out, '\x1d');
}

/* ---- widths ---- */

/* Widths between lo[] and hi[] that add up to `room` (>= the sum of lo, < the sum of hi): the
 * widest columns give way first, down to a level every column reaches when it can (the
 * columns at that level one wider from the left, for what the level leaves over). */
static void level(int n, uint32_t *colw, const uint64_t *lo, const uint64_t *hi, uint64_t room)
{
    uint64_t a = 0, b = 0;
    for (int c = 0; c < n; c++)
        b = hi[c] > b ? hi[c] : b;
    while (a < b) { /* the highest level whose widths fit the room */
        uint64_t m = a + (b - a + 1) / 2, sum = 0;
        for (int c = 0; c < n; c++)
            sum += m < lo[c] ? lo[c] : m > hi[c] ? hi[c] : m;
        if (sum <= room)
            a = m;
        else
            b = m - 1;
    }
    uint64_t sum = 0;
    for (int c = 0; c < n; c++) {
        colw[c] = (uint32_t)(a < lo[c] ? lo[c] : a > hi[c] ? hi[c] : a);
        sum += colw[c];
    }
    for (int c = 0; c < n && sum < room; c++)
        if (colw[c] == a && a < hi[c] && a >= lo[c]) {
            colw[c]++;
            sum++;
        }
}

int table_widths(int ncols, const struct table_col *cols, int width, uint32_t *colw)
{
    uint64_t lo[TABLE_MAX_COLS], mid[TABLE_MAX_COLS], hi[TABLE_MAX_COLS];
    uint64_t slo = 0, smid = 0, shi = 0;
    if (ncols < 1 || ncols > TABLE_MAX_COLS)
        return -1;
    for (int c = 0; c < ncols; c++) {
        lo[c] = cols[c].min ? cols[c].min : 1;
        mid[c] = cols[c].word > lo[c] ? cols[c].word : lo[c];
        hi[c] = cols[c].nat > mid[c] ? cols[c].nat : mid[c];
        slo += lo[c];
        smid += mid[c];
        shi += hi[c];
    }
    int64_t avail = (int64_t)width - (3 * (int64_t)ncols + 1);
    if (avail < (int64_t)slo)
        return -1;
    if ((uint64_t)avail >= shi) {
        for (int c = 0; c < ncols; c++)
            colw[c] = (uint32_t)hi[c];
    } else if ((uint64_t)avail >= smid) {
        level(ncols, colw, mid, hi, (uint64_t)avail);
    } else {
        level(ncols, colw, lo, mid, (uint64_t)avail);
    }
    return 0;
}

/* ---- parsing an encoded row ---- */

struct trow {
    char kind;
    int ncols;
    struct table_col cols[TABLE_MAX_COLS];
    size_t ca[TABLE_MAX_COLS], cb[TABLE_MAX_COLS]; /* cells, as byte ranges of the text */
    int ncells;
    size_t ha[TABLE_MAX_COLS], hb[TABLE_MAX_COLS]; /* the header's cells (body rows) */
    int nhead;
};

static int parse_num(const char *s, size_t n, size_t *i, uint32_t *v)
{
    uint64_t x = 0;
    size_t a = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
        if (x < TABLE_NUM_MAX)
            x = x * 10 + (uint64_t)(s[*i] - '0');
        (*i)++;
    }
    *v = (uint32_t)(x > TABLE_NUM_MAX ? TABLE_NUM_MAX : x);
    return *i > a;
}

/* Split s[i..e) at '\x1f' into up to TABLE_MAX_COLS ranges. */
static int split_at_us(const char *s, size_t i, size_t e, size_t *a, size_t *b)
{
    int k = 0;
    for (;;) {
        const char *us = memchr(s + i, '\x1f', e - i);
        size_t end = us ? (size_t)(us - s) : e;
        if (k < TABLE_MAX_COLS) {
            a[k] = i;
            b[k] = end;
            k++;
        }
        if (!us)
            return k;
        i = end + 1;
    }
}

static int parse_row(const char *s, size_t n, struct trow *t)
{
    size_t i = 2;
    uint32_t nc;
    if (n < 4 || s[0] != '\x1d' || !strchr("hsfb", s[1]) || !s[1])
        return -1;
    t->kind = s[1];
    if (!parse_num(s, n, &i, &nc) || nc < 1 || nc > TABLE_MAX_COLS)
        return -1;
    t->ncols = (int)nc;
    for (int c = 0; c < t->ncols; c++) {
        struct table_col *col = &t->cols[c];
        if (i + 2 > n || s[i] != ';' || !strchr("lrc", s[i + 1]) || !s[i + 1])
            return -1;
        col->align = s[i + 1];
        i += 2;
        if (!parse_num(s, n, &i, &col->nat) || i >= n || s[i++] != ',' ||
            !parse_num(s, n, &i, &col->word) || i >= n || s[i++] != ',' ||
            !parse_num(s, n, &i, &col->min))
            return -1;
    }
    if (i >= n || s[i] != '\x1d')
        return -1;
    i++;
    const char *rs = memchr(s + i, '\x1e', n - i);
    size_t e = rs ? (size_t)(rs - s) : n;
    t->ncells = split_at_us(s, i, e, t->ca, t->cb);
    t->nhead = rs ? split_at_us(s, e + 1, n, t->ha, t->hb) : 0;
    return 0;
}

/* ---- output ---- */

struct lay {
    struct table_out *out;
    const char *s; /* the encoded row and its spans */
    const struct theme_span *sp;
    size_t nsp;
    int slot;
    size_t row_start, row_width;
};

static void out_reset(struct table_out *o)
{
    buf_reset(&o->text);
    o->nspans = 0;
    o->rows.n = 0;
    o->cut = 0;
}

static void out_add(struct table_out *o, const char *s, size_t n, int slot, unsigned attrs)
{
    if (!n)
        return;
    size_t off = o->text.len;
    buf_append(&o->text, s, n);
    struct theme_span *l = o->nspans ? &o->spans[o->nspans - 1] : NULL;
    if (l && l->slot == slot && l->attrs == attrs && l->off + l->len == off &&
        off != o->cut) {
        l->len += (uint32_t)n;
        return;
    }
    XGROW(o->spans, o->nspans + 1, o->capspans);
    o->spans[o->nspans++] = (struct theme_span){(uint32_t)off, (uint32_t)n, (uint16_t)slot,
                                                (uint16_t)attrs};
}

static void out_spaces(struct table_out *o, size_t k, int slot)
{
    static const char sp[] = "                                ";
    while (k > 0) {
        size_t c = k < sizeof(sp) - 1 ? k : sizeof(sp) - 1;
        out_add(o, sp, c, slot, 0);
        k -= c;
    }
}

static void out_repeat(struct table_out *o, const char *s, size_t k, int slot)
{
    for (size_t i = 0; i < k; i++)
        out_add(o, s, strlen(s), slot, 0);
}

/* Copy s[a..b) with the styles of its spans (the slot where none covers it), in spans of its
 * own: a cell's text is measured alone, so it is drawn alone too (a mark at its start does
 * not join the space before it, nor a prepended one the space after it). */
static void out_src(struct table_out *o, const char *s, size_t a, size_t b,
                    const struct theme_span *sp, size_t nsp, int slot)
{
    o->cut = o->text.len;
    size_t lo = 0, hi = nsp; /* the first span that ends after a */
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if ((size_t)sp[m].off + sp[m].len <= a)
            lo = m + 1;
        else
            hi = m;
    }
    size_t at = a;
    for (size_t j = lo; j < nsp && sp[j].off < b && at < b; j++) {
        size_t sa = sp[j].off > at ? sp[j].off : at, sb = (size_t)sp[j].off + sp[j].len;
        if (sb > b)
            sb = b;
        if (sa > at)
            out_add(o, s + at, sa - at, slot, 0);
        if (sa < sb)
            out_add(o, s + sa, sb - sa, sp[j].slot, sp[j].attrs);
        if (sb > at)
            at = sb;
    }
    if (at < b)
        out_add(o, s + at, b - at, slot, 0);
    o->cut = o->text.len;
}

static void row_begin(struct lay *L)
{
    L->row_start = L->out->text.len;
    L->row_width = 0;
}

static void row_end(struct lay *L, size_t indent)
{
    struct wrap_rows *r = &L->out->rows;
    XGROW(r->v, r->n + 1, r->cap);
    r->v[r->n++] = (struct wrap_row){(uint32_t)L->row_start,
                                     (uint32_t)(L->out->text.len - L->row_start),
                                     (uint32_t)L->row_width, (uint32_t)indent};
}

/* ├─...─┼─...─┤ */
static void lay_rule(struct lay *L, int ncols, const uint32_t *colw)
{
    row_begin(L);
    for (int c = 0; c < ncols; c++) {
        out_add(L->out, c == 0 ? "\xE2\x94\x9C" HLINE : HLINE "\xE2\x94\xBC" HLINE, c ? 9 : 6,
                THEME_TABLE_BORDER, 0);
        out_repeat(L->out, HLINE, colw[c], THEME_TABLE_BORDER);
        L->row_width += colw[c] + (c ? 3 : 2);
    }
    out_add(L->out, HLINE "\xE2\x94\xA4", 6, THEME_TABLE_BORDER, 0);
    L->row_width += 2;
    row_end(L, 0);
}

/* The cells of a header or body row side by side, each wrapped in its column. Returns 0, or
 * -1 (nothing laid out) when the row would be more than TABLE_ROW_ROWS rows high. */
static int lay_cells(struct lay *L, const struct trow *t, const uint32_t *colw)
{
    struct wrap_rows cr[TABLE_MAX_COLS];
    size_t height = 1;
    for (int c = 0; c < t->ncols; c++) {
        memset(&cr[c], 0, sizeof(cr[c]));
        if (c < t->ncells)
            wrap_text(&cr[c], L->s + t->ca[c], t->cb[c] - t->ca[c], (int)colw[c], 0, 0);
        if (cr[c].n > height)
            height = cr[c].n;
    }
    if (height > TABLE_ROW_ROWS)
        height = 0;
    for (size_t r = 0; r < height; r++) {
        row_begin(L);
        for (int c = 0; c < t->ncols; c++) {
            out_add(L->out, c ? " " BAR " " : BAR " ", c ? 5 : 4, THEME_TABLE_BORDER, 0);
            L->row_width += c ? 3 : 2;
            const struct wrap_row *p = r < cr[c].n ? &cr[c].v[r] : NULL;
            size_t pw = p ? p->width : 0, plen = p ? p->len : 0, at = p ? t->ca[c] + p->off : 0;
            int more = 0;
            if (pw > colw[c]) { /* a cluster wider than any measured (a row past them) */
                plen = wrap_fit(L->s + at, plen, colw[c], &pw);
                more = plen == 0;
                pw = more ? 1 : pw;
            }
            size_t pad = colw[c] > pw ? colw[c] - pw : 0;
            char al = t->cols[c].align;
            size_t left = al == 'r' ? pad : al == 'c' ? pad / 2 : 0;
            out_spaces(L->out, left, L->slot);
            if (more)
                out_add(L->out, "\xE2\x80\xA6", 3, THEME_DIM, 0); /* … */
            else if (plen)
                out_src(L->out, L->s, at, at + plen, L->sp, L->nsp, L->slot);
            out_spaces(L->out, pad - left, L->slot);
            L->row_width += pw + pad;
        }
        out_add(L->out, " " BAR, 4, THEME_TABLE_BORDER, 0);
        L->row_width += 2;
        row_end(L, 0);
    }
    for (int c = 0; c < t->ncols; c++)
        wrap_rows_free(&cr[c]);
    return height ? 0 : -1;
}

/* A body row as a record: "Header: value" per column, wrapped at the width. */
static void lay_record(struct lay *L, const struct trow *t, int width, int gap)
{
    struct table_out line = TABLE_OUT_INIT;
    struct wrap_rows wr = {NULL, 0, 0};
    if (gap && t->kind == 'b') { /* a blank row between records */
        row_begin(L);
        row_end(L, 0);
    }
    for (int c = 0; c < t->ncols; c++) {
        out_reset(&line);
        if (c < t->nhead && t->hb[c] > t->ha[c]) {
            out_src(&line, L->s, t->ha[c], t->hb[c], L->sp, L->nsp, THEME_BOLD);
        } else {
            char name[32];
            int k = snprintf(name, sizeof(name), "Column %d", c + 1);
            out_add(&line, name, (size_t)k, THEME_BOLD, 0);
        }
        out_add(&line, ": ", 2, L->slot, 0);
        if (c < t->ncells)
            out_src(&line, L->s, t->ca[c], t->cb[c], L->sp, L->nsp, L->slot);
        wr.n = 0;
        wrap_text(&wr, buf_str(&line.text), line.text.len, width, 2, 0);
        for (size_t r = 0; r < wr.n; r++) {
            row_begin(L);
            out_src(L->out, line.text.data, wr.v[r].off, wr.v[r].off + wr.v[r].len, line.spans,
                    line.nspans, L->slot);
            L->row_width = wr.v[r].width;
            row_end(L, wr.v[r].indent);
        }
    }
    wrap_rows_free(&wr);
    table_out_free(&line);
}

int table_layout(const char *s, size_t n, const struct theme_span *sp, size_t nsp, int slot,
                 int width, struct table_out *out)
{
    struct trow *t = xmalloc(sizeof(*t));
    out_reset(out);
    if (parse_row(s, n, t) < 0) {
        free(t);
        return -1;
    }
    struct lay L = {out, s, sp, nsp, slot, 0, 0};
    uint32_t colw[TABLE_MAX_COLS];
    if (width < 1)
        width = 1;
    if (table_widths(t->ncols, t->cols, width, colw) < 0) {
        if (t->kind == 'f' || t->kind == 'b')
            lay_record(&L, t, width, 1);
        free(t);
        return 0;
    }
    int shrunk = 0;
    for (int c = 0; c < t->ncols; c++)
        if (colw[c] < t->cols[c].nat)
            shrunk = 1;
    if (t->kind == 's' || (t->kind == 'b' && shrunk))
        lay_rule(&L, t->ncols, colw);
    if (t->kind != 's' && lay_cells(&L, t, colw) < 0)
        lay_record(&L, t, width, 0); /* too high for its columns: a record, in the table */
    free(t);
    return 0;
}

void table_out_free(struct table_out *out)
{
    buf_free(&out->text);
    free(out->spans);
    wrap_rows_free(&out->rows);
    memset(out, 0, sizeof(*out));
}
