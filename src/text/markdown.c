/* markdown.c - streaming Markdown styler: complete lines are styled once, in order. */
#include "config.h"
#include "text/markdown.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/highlight.h"
#include "text/table.h"

#define MAX_LIST 16        /* deeper list nesting is treated as the deepest level */
#define MAX_COLS TABLE_MAX_COLS /* table columns beyond this are dropped */
#define TABLE_MAX_ROWS 256 /* rows held back to align a table */
#define MAX_LINK_DEPTH 3   /* [links [inside [links]]] deeper than this stay text */
#define LINE_BLOCK 256     /* finished lines are allocated in blocks that never move */

enum { TABLE_NONE, TABLE_CANDIDATE, TABLE_HELD, TABLE_FLOWING };

struct mdstate {
    int fence;        /* inside a fenced code block */
    char fence_ch;    /* ` or ~ */
    int fence_len;    /* length of the opening run */
    int fence_indent; /* spaces before the opening fence, stripped from content lines */
    int code_indent;  /* display columns before code (inside a list item) */
    const struct hl_lang *lang; /* the fence's language, NULL: plain code */
    struct hl_state hls;        /* what the last code line left open (a comment, a string) */
    int nlist;
    int lind[MAX_LIST];  /* source column of each level's marker */
    int lcont[MAX_LIST]; /* source column of each level's content */
    int lout[MAX_LIST];  /* display column of each level's content */
};

struct cells;

/* Finished lines' text and spans live in blocks of MD_ARENA_BLOCK bytes (a longer line gets a
 * block of its own); a block goes when markdown_release passes the last line in it. */
#define MD_ARENA_BLOCK 65536

struct mdblock {
    char *mem;
    size_t used, size;
    size_t lines; /* md->n once its last line was committed: free when released >= lines */
};

/* The line builder (text and spans of the line being styled). */
struct lb {
    struct buf t;
    struct theme_span *sp;
    size_t n, cap;
};

struct node;

struct nodes {
    struct node *v;
    size_t n, cap;
};

struct tick_run {
    size_t start, len;
};

/* Per-line index so that no construct rescans the line (hostile input must stay linear):
 * maximal backtick runs sorted by (length, start) answer "where does the code span opened
 * here close?" in O(log n); bracket and parenthesis partners come from one stack pass. Its
 * arrays are kept from line to line (render_inline's at depth 0 is the styler's). */
struct lidx {
    struct tick_run *bylen; /* maximal backtick runs sorted by (len, start) */
    size_t nruns, caprun;
    size_t *match; /* for '[' and '(' positions: index of the partner, or SIZE_MAX; NULL
                      when the line has no '[' */
    size_t *match_mem, capmatch;
    size_t *stack, capstack;
};

struct held {
    char *raw; /* cleaned source line */
    size_t len;
    struct markdown_line shown; /* raw rendering for markdown_pending_* */
};

struct markdown {
    int base;
    int finished;
    struct buf cur; /* the unfinished source line */
    struct markdown_line **blocks; /* finished lines, LINE_BLOCK per block: stable addresses */
    size_t n, nblocks, capblocks;
    size_t released; /* lines before this one were freed (markdown_release) */
    struct mdstate st;
    int table; /* TABLE_* */
    struct held *held;
    size_t nheld, capheld;
    int ncols;
    char align[MAX_COLS]; /* 'l', 'r', 'c' */
    struct table_col cols[MAX_COLS]; /* measured on the held rows, kept while rows flow */
    struct cells *head; /* the header's cells while rows flow (for the list form) */
    struct buf meta;    /* the encoded rows' prefix (table_meta), made once a table */
    int pending_dirty;
    struct markdown_line partial; /* points into pl */
    int have_partial;
    struct lb pl;        /* the partial line's text and spans */
    struct buf scratch;
    struct buf pclean;   /* the unfinished line, cleaned for its preview */
    struct lb line;      /* the line being styled (its buffers kept from line to line) */
    struct nodes ns;     /* the inline scanner's nodes of a line (depth 0) */
    struct lidx lx;      /* and its index */
    struct mdblock *mb;  /* blocks of finished lines' text and spans, oldest first */
    size_t nmb, capmb, mb0; /* mb[mb0 ..] are still in use */
    int no_highlight;    /* markdown_set_highlight(md, 0) */
    int hl_when_drawn;   /* markdown_highlight_when_drawn */
    struct wrap_hl later; /* the next committed line's wl.hl, when have_later */
    int have_later;
    struct hl *hl;       /* the compiled tables of the last language highlighted */
    struct hl_spans hsp; /* one code line's spans */
};

/* ---- line builder ---- */

static void lb_add(struct lb *b, const char *s, size_t n, int slot, unsigned attrs)
{
    if (n == 0)
        return;
    size_t off = b->t.len;
    buf_append(&b->t, s, n);
    if (b->n && b->sp[b->n - 1].slot == slot && b->sp[b->n - 1].attrs == attrs &&
        b->sp[b->n - 1].off + b->sp[b->n - 1].len == off) {
        b->sp[b->n - 1].len += (uint32_t)n;
        return;
    }
    XGROW(b->sp, b->n + 1, b->cap);
    b->sp[b->n++] = (struct theme_span){(uint32_t)off, (uint32_t)n, (uint16_t)slot,
                                        (uint16_t)attrs};
}

static void lb_spaces(struct lb *b, size_t k, int slot)
{
    static const char sp[] = "                                ";
    while (k > 0) {
        size_t c = k < sizeof(sp) - 1 ? k : sizeof(sp) - 1;
        lb_add(b, sp, c, slot, 0);
        k -= c;
    }
}

/* Append the builder's contents to another builder (spans shifted). */
static void lb_cat(struct lb *dst, const struct lb *src)
{
    for (size_t i = 0; i < src->n; i++)
        lb_add(dst, src->t.data + src->sp[i].off, src->sp[i].len, src->sp[i].slot,
               src->sp[i].attrs);
}

static void lb_free(struct lb *b)
{
    buf_free(&b->t);
    free(b->sp);
    memset(b, 0, sizeof(*b));
}

/* Empty the builder, keep its memory. */
static void lb_clear(struct lb *b)
{
    buf_reset(&b->t);
    b->n = 0;
}

/* The styler's builder, empty: every block below styles its line into it. */
static struct lb *lb_line(struct markdown *md)
{
    lb_clear(&md->line);
    return &md->line;
}

/* A line's fields but its text and spans. */
static void line_meta(struct markdown_line *out, int base, int kind, int level, int hang,
                      unsigned flags)
{
    memset(out, 0, sizeof(*out));
    out->wl.slot = (uint16_t)base;
    out->wl.hang = (uint16_t)(hang < 0 ? 0 : hang > 0xFFFF ? 0xFFFF : hang);
    out->wl.flags = (uint16_t)flags;
    out->kind = (uint8_t)kind;
    out->level = (uint8_t)(level > 255 ? 255 : level);
    out->wl.tag = (uint16_t)(kind | out->level << 8);
}

/* Move the builder's contents into *out (which then owns them: mdline_free). */
static void lb_finish(struct lb *b, struct markdown_line *out, int base, int kind, int level,
                      int hang, unsigned flags)
{
    line_meta(out, base, kind, level, hang, flags);
    out->wl.len = b->t.len;
    out->wl.text = buf_take(&b->t);
    out->wl.spans = b->sp;
    out->wl.nspans = b->n;
    b->sp = NULL;
    b->n = b->cap = 0;
}

static void mdline_free(struct markdown_line *l)
{
    free((char *)l->wl.text);
    free((void *)l->wl.spans);
    memset(l, 0, sizeof(*l));
}

/* ---- character classes for emphasis flanking ---- */

static int is_ascii_punct(unsigned c)
{
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
}

static int cp_space(uint32_t c)
{
    if (c == ' ' || c == '\t')
        return 1;
    if (c < 0x80)
        return 0;
    return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_ZS;
}

static int cp_punct(uint32_t c)
{
    if (c < 0x80)
        return is_ascii_punct(c);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO) ||
           (k >= UTF8PROC_CATEGORY_SM && k <= UTF8PROC_CATEGORY_SO);
}

/* The code point ending just before s[i] (' ' at the start of the line). */
static uint32_t cp_before(const char *s, size_t i)
{
    if (i == 0)
        return ' ';
    size_t j = i - 1;
    while (j > 0 && i - j < 4 && ((unsigned char)s[j] & 0xC0) == 0x80)
        j--;
    uint32_t cp;
    utf8_decode(s + j, i - j, &cp);
    return cp;
}

static uint32_t cp_at(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return ' ';
    uint32_t cp;
    utf8_decode(s + i, n - i, &cp);
    return cp;
}

/* ---- inline parsing ---- */

enum { N_TEXT, N_CODE, N_DELIM, N_LINK, N_AUTOLINK, N_ENTITY };

struct node {
    uint8_t type;
    uint8_t image;
    char ch;
    size_t a, b;   /* text / code content / link text */
    size_t ua, ub; /* link url */
    int count, rem, can_open, can_close;
    int open_s, open_e, close_s, close_e;
    int open_t, close_t; /* ~~strikethrough~~ */
};

static struct node *nodes_add(struct nodes *ns, int type, size_t a, size_t b)
{
    XGROW(ns->v, ns->n + 1, ns->cap);
    struct node *nd = &ns->v[ns->n++];
    memset(nd, 0, sizeof(*nd));
    nd->type = (uint8_t)type;
    nd->a = a;
    nd->b = b;
    return nd;
}

static size_t run_len(const char *s, size_t n, size_t i, char c)
{
    size_t k = 0;
    while (i + k < n && s[i + k] == c)
        k++;
    return k;
}


static int tick_cmp(const void *a, const void *b)
{
    const struct tick_run *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A code span opening with k backticks at i: start of the closing run of exactly k backticks
 * (the first maximal run of that length after the opener), or 0 when there is none. */
static size_t code_close(const struct lidx *x, size_t i, size_t k)
{
    size_t lo = 0, hi = x->nruns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct tick_run *r = &x->bylen[mid];
        if (r->len < k || (r->len == k && r->start < i + k))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->nruns && x->bylen[lo].len == k ? x->bylen[lo].start : 0;
}

/* Byte classes of the inline scanners: MC_INLINE may start an inline construct (tokenize looks
 * at no other byte; MC_URL, an 'h', only in a line with "://"), MC_BRACKET matters to the bracket index, MC_PAREN to the parenthesis
 * index. The scanners jump over runs of other bytes (skip_plain) instead of stepping through
 * them one at a time; markdown_bytewise (tests) makes them step, as the reference. */
enum { MC_INLINE = 1, MC_BRACKET = 2, MC_PAREN = 4, MC_URL = 8 };
static const unsigned char mdclass[256] = {
    ['\\'] = MC_INLINE | MC_BRACKET | MC_PAREN, ['`'] = MC_INLINE | MC_BRACKET,
    ['*'] = MC_INLINE, ['_'] = MC_INLINE, ['~'] = MC_INLINE, ['['] = MC_INLINE | MC_BRACKET, ['!'] = MC_INLINE,
    ['<'] = MC_INLINE, ['&'] = MC_INLINE, ['h'] = MC_URL, [']'] = MC_BRACKET, ['('] = MC_PAREN,
    [')'] = MC_PAREN,
};

int markdown_bytewise;

/* The first position at or after i whose byte is in class mask (n when none). */
static inline size_t skip_plain(const char *str, size_t i, size_t n, unsigned mask)
{
    if (markdown_bytewise)
        return i;
    const unsigned char *s = (const unsigned char *)str;
    while (i + 4 <= n && !((mdclass[s[i]] | mdclass[s[i + 1]] | mdclass[s[i + 2]] |
                            mdclass[s[i + 3]]) & mask))
        i += 4;
    while (i < n && !(mdclass[s[i]] & mask))
        i++;
    return i;
}

/* Sort the runs by (len, start): they come in start order and are few in a real line, so
 * insertion sort; many (hostile input) go to qsort. */
static void sort_runs(struct tick_run *v, size_t n)
{
    if (n > 32 || markdown_bytewise) {
        qsort(v, n, sizeof(*v), tick_cmp);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct tick_run r = v[i];
        size_t j = i;
        while (j > 0 && tick_cmp(&v[j - 1], &r) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = r;
    }
}

/* Index s[0..n) into x (zeroed, or built before: its arrays are reused). */
static void lidx_build(struct lidx *x, const char *s, size_t n, int links)
{
    x->nruns = 0;
    x->match = NULL;
    const char *tick = memchr(s, '`', n);
    if (tick) {
        for (size_t i = (size_t)(tick - s); i < n;) {
            if (s[i] != '`') {
                if (markdown_bytewise) {
                    i++;
                    continue;
                }
                const char *p = memchr(s + i, '`', n - i);
                if (!p)
                    break;
                i = (size_t)(p - s);
            }
            size_t k = run_len(s, n, i, '`');
            XGROW(x->bylen, x->nruns + 1, x->caprun);
            x->bylen[x->nruns++] = (struct tick_run){i, k};
            i += k;
        }
        if (x->nruns) /* none: bylen is still NULL */
            sort_runs(x->bylen, x->nruns);
    }
    if (!links || !memchr(s, '[', n))
        return;
    XGROW(x->match_mem, n, x->capmatch);
    XGROW(x->stack, n, x->capstack);
    x->match = x->match_mem;
    size_t *stack = x->stack, top = 0;
    memset(x->match, 0xFF, n * sizeof(*x->match)); /* SIZE_MAX: no partner */
    for (size_t i = 0; i < n;) { /* brackets: code spans hide them */
        i = skip_plain(s, i, n, MC_BRACKET);
        if (i >= n)
            break;
        if (s[i] == '\\' && i + 1 < n) {
            i += 2;
        } else if (s[i] == '`') {
            size_t k = run_len(s, n, i, '`'), e = code_close(x, i, k);
            i = e ? e + k : i + k;
        } else {
            if (s[i] == '[')
                stack[top++] = i;
            else if (s[i] == ']' && top)
                x->match[stack[--top]] = i;
            i++;
        }
    }
    top = 0;
    for (size_t i = 0; i < n;) { /* parentheses of link destinations */
        i = skip_plain(s, i, n, MC_PAREN);
        if (i >= n)
            break;
        if (s[i] == '\\' && i + 1 < n) {
            i += 2;
            continue;
        }
        if (s[i] == '(')
            stack[top++] = i;
        else if (s[i] == ')' && top)
            x->match[stack[--top]] = i;
        i++;
    }
}

static void lidx_free(struct lidx *x)
{
    free(x->bylen);
    free(x->match_mem);
    free(x->stack);
    memset(x, 0, sizeof(*x));
}

/* [text](url) starting with '[' at i: fills the node ranges; returns the end or 0. */
static size_t parse_link(const struct lidx *x, const char *s, size_t n, size_t i,
                         struct node *nd)
{
    size_t j = x->match ? x->match[i] : SIZE_MAX;
    if (j == SIZE_MAX || j + 1 >= n || s[j + 1] != '(')
        return 0;
    size_t k = x->match[j + 1];
    if (k == SIZE_MAX)
        return 0;
    size_t ua = j + 2, ub = k;
    while (ua < ub && s[ua] == ' ')
        ua++;
    while (ub > ua && s[ub - 1] == ' ')
        ub--;
    if (ua < ub && s[ua] == '<') {
        const char *gt = memchr(s + ua, '>', ub - ua);
        if (gt) {
            ub = (size_t)(gt - s);
            ua++;
        }
    } else {
        const char *sp = memchr(s + ua, ' ', ub - ua); /* drop a "title" */
        if (sp)
            ub = (size_t)(sp - s);
    }
    nd->a = i + 1;
    nd->b = j;
    nd->ua = ua;
    nd->ub = ub;
    return k + 1;
}

static int url_scheme_at(const char *s, size_t n, size_t i)
{
    if (n - i < 7 || s[i] != 'h' || s[i + 1] != 't')
        return 0;
    if (n - i >= 8 && memcmp(s + i, "https://", 8) == 0)
        return 8;
    if (n - i >= 7 && memcmp(s + i, "http://", 7) == 0)
        return 7;
    return 0;
}

/* A bare URL starting at i: returns its end. */
static size_t bare_url_end(const char *s, size_t n, size_t i)
{
    size_t j = i;
    int parens = 0;
    while (j < n && s[j] != ' ' && s[j] != '<' && s[j] != '>' && s[j] != '"' && s[j] != '`') {
        if (s[j] == '(')
            parens++;
        else if (s[j] == ')')
            parens--;
        j++;
    }
    while (j > i) {
        char c = s[j - 1];
        if (c == ')' && parens < 0) {
            parens++;
            j--;
        } else if (c && strchr(".,:;!?'*_", c)) {
            j--;
        } else {
            break;
        }
    }
    return j;
}

/* The inline scanner of one paragraph line: each tok_* below looks at s[i], where its
 * construct may start, and returns where scanning goes on; a construct found becomes a node
 * (tok_emit), after the plain text before it. */
struct tok {
    const struct lidx *x;
    const char *s;
    size_t n;
    struct nodes *ns;
    size_t text; /* plain text not yet made a node starts here */
};

/* Add the node [a, b) of a construct found at [at, end): the text before it first. */
static struct node *tok_emit(struct tok *t, size_t at, size_t end, int type, size_t a, size_t b)
{
    if (at > t->text)
        nodes_add(t->ns, N_TEXT, t->text, at);
    t->text = end;
    return nodes_add(t->ns, type, a, b);
}

/* A backslash before ASCII punctuation: the punctuation as text. */
static size_t tok_escape(struct tok *t, size_t i)
{
    tok_emit(t, i, i + 2, N_TEXT, i + 1, i + 2);
    return i + 2;
}

/* An entity reference at s[i] ('&'): the code point it stands for and its length (through
 * the ';'), or 0 when it is none. The few names models write (&amp; &lt; &gt; &quot; &apos;
 * &nbsp;) and numeric ones; a control character or a surrogate stays literal. */
static size_t entity_at(const char *s, size_t n, size_t i, uint32_t *cp)
{
    static const struct {
        const char *name;
        uint32_t cp;
    } names[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''},
                 {"nbsp;", ' '}};
    const char *p = s + i + 1;
    size_t left = n - i - 1;
    if (left && *p != '#') {
        for (size_t k = 0; k < TT_ARRAY_LEN(names); k++) {
            size_t l = strlen(names[k].name);
            if (left >= l && memcmp(p, names[k].name, l) == 0) {
                *cp = names[k].cp;
                return l + 1;
            }
        }
        return 0;
    }
    int hex = left > 1 && (p[1] == 'x' || p[1] == 'X');
    size_t j = hex ? 2 : 1, digits = 0;
    uint32_t v = 0;
    for (; j < left && digits < 7; j++, digits++) {
        unsigned char c = (unsigned char)p[j];
        int d = c >= '0' && c <= '9'                ? c - '0'
                : hex && c >= 'a' && c <= 'f'       ? c - 'a' + 10
                : hex && c >= 'A' && c <= 'F'       ? c - 'A' + 10
                                                    : -1;
        if (d < 0)
            break;
        v = v * (hex ? 16u : 10u) + (uint32_t)d;
    }
    if (!digits || j >= left || p[j] != ';' || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ||
        v < 0x20 || (v >= 0x7F && v < 0xA0))
        return 0;
    *cp = v;
    return j + 2;
}

/* An entity reference ("AT&amp;T" as a model may write it): the character it stands for. */
static size_t tok_entity(struct tok *t, size_t i)
{
    uint32_t cp;
    size_t len = entity_at(t->s, t->n, i, &cp);
    if (!len)
        return i + 1;
    tok_emit(t, i, i + len, N_ENTITY, i, i + len)->count = (int)cp;
    return i + len;
}

/* A code span: a run of backticks up to the next run of the same length. */
static size_t tok_code(struct tok *t, size_t i)
{
    const char *s = t->s;
    size_t k = run_len(s, t->n, i, '`');
    size_t e = code_close(t->x, i, k);
    if (!e)
        return i + k;
    size_t a = i + k, b = e;
    /* strip one space on each side when both are there and it isn't all spaces */
    if (b - a >= 2 && s[a] == ' ' && s[b - 1] == ' ') {
        size_t q = a;
        while (q < b && s[q] == ' ')
            q++;
        if (q < b) {
            a++;
            b--;
        }
    }
    tok_emit(t, i, e + k, N_CODE, a, b);
    return e + k;
}

/* A run of * or _: a delimiter that may open or close emphasis, or plain text; a run of
 * exactly two ~ may open or close strikethrough (one ~ is "about", three open a fence). */
static size_t tok_delim(struct tok *t, size_t i)
{
    const char *s = t->s;
    unsigned char c = (unsigned char)s[i];
    size_t k = run_len(s, t->n, i, (char)c);
    if (c == '~' && k != 2)
        return i + k;
    uint32_t before = cp_before(s, i), after = cp_at(s, t->n, i + k);
    int left = !cp_space(after) && (!cp_punct(after) || cp_space(before) || cp_punct(before));
    int right = !cp_space(before) && (!cp_punct(before) || cp_space(after) || cp_punct(after));
    int can_open = c != '_' ? left : left && (!right || cp_punct(before));
    int can_close = c != '_' ? right : right && (!left || cp_punct(after));
    if (!can_open && !can_close) /* plain text (snake_case, 2 * 3) */
        return i + k;
    struct node *nd = tok_emit(t, i, i + k, N_DELIM, i, i + k);
    nd->ch = (char)c;
    nd->count = nd->rem = (int)k;
    nd->can_open = can_open;
    nd->can_close = can_close;
    return i + k;
}

/* [text](url) or ![alt](url). */
static size_t tok_link(struct tok *t, size_t i)
{
    struct node tmp;
    int image = t->s[i] == '!';
    size_t end = parse_link(t->x, t->s, t->n, image ? i + 1 : i, &tmp);
    if (!end)
        return i + 1;
    struct node *nd = tok_emit(t, i, end, N_LINK, tmp.a, tmp.b);
    nd->ua = tmp.ua;
    nd->ub = tmp.ub;
    nd->image = image;
    return end;
}

/* <http://...>. */
static size_t tok_autolink(struct tok *t, size_t i)
{
    const char *s = t->s;
    size_t j = i + 1;
    while (j < t->n && s[j] != '>' && s[j] != ' ' && s[j] != '<')
        j++;
    if (j >= t->n || s[j] != '>')
        return i + 1;
    tok_emit(t, i, j + 1, N_AUTOLINK, i + 1, j);
    return j + 1;
}

/* A bare http:// or https:// URL. */
static size_t tok_bare_url(struct tok *t, size_t i)
{
    size_t e = bare_url_end(t->s, t->n, i);
    if (e <= i + (size_t)url_scheme_at(t->s, t->n, i))
        return i + 1;
    tok_emit(t, i, e, N_AUTOLINK, i, e);
    return e;
}

/* Does s[0..n) hold "://"? (':' is rare in prose: memchr from one to the next.) */
static int has_scheme_sep(const char *s, size_t n)
{
    for (const char *p = s, *e = s + n; (p = memchr(p, ':', (size_t)(e - p))) != NULL; p++)
        if (e - p >= 3 && p[1] == '/' && p[2] == '/')
            return 1;
    return 0;
}

static void tokenize(const struct lidx *x, const char *s, size_t n, struct nodes *ns, int depth)
{
    struct tok t = {x, s, n, ns, 0};
    size_t i = 0;
    /* a bare URL needs "://": without one, an 'h' starts nothing (no stop at every "the") */
    unsigned mask = MC_INLINE | (has_scheme_sep(s, n) ? MC_URL : 0);
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (!(mdclass[c] & mask)) {
            i = skip_plain(s, i + 1, n, mask);
            continue;
        }
        if (c == '\\' && i + 1 < n && is_ascii_punct((unsigned char)s[i + 1]))
            i = tok_escape(&t, i);
        else if (c == '`')
            i = tok_code(&t, i);
        else if (c == '*' || c == '_' || c == '~')
            i = tok_delim(&t, i);
        else if ((c == '[' || (c == '!' && i + 1 < n && s[i + 1] == '[')) &&
                 depth < MAX_LINK_DEPTH)
            i = tok_link(&t, i);
        else if (c == '<' && url_scheme_at(s, n, i + 1))
            i = tok_autolink(&t, i);
        else if (c == '&')
            i = tok_entity(&t, i);
        else if (c == 'h' && url_scheme_at(s, n, i) &&
                 (i == 0 || (s[i - 1] && strchr(" (\"'", s[i - 1]))))
            i = tok_bare_url(&t, i);
        else
            i++;
    }
    if (i > t.text)
        nodes_add(ns, N_TEXT, t.text, i);
}

/* CommonMark's "process emphasis": each closer, left to right, takes the nearest usable
 * opener; delimiters between a matched pair leave the stack, and a failed search records a
 * floor ("openers bottom") so later closers of that kind don't search below it again. This
 * keeps a line of thousands of unmatched delimiters linear. */
static void pair_emphasis(struct nodes *ns)
{
    long n = (long)ns->n, last = -1;
    if (n == 0)
        return;
    long small[2][64]; /* a real line's nodes fit: no allocation */
    long *prev = n <= 64 ? small[0] : xmalloc((size_t)n * sizeof(*prev));
    long *next = n <= 64 ? small[1] : xmalloc((size_t)n * sizeof(*next));
    long bottom[3][2][3];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++)
                bottom[a][b][c] = -1;
    for (long i = 0; i < n; i++) {
        prev[i] = next[i] = -1;
        if (ns->v[i].type != N_DELIM)
            continue;
        prev[i] = last;
        if (last >= 0)
            next[last] = i;
        last = i;
    }
#define UNLINK(x)                          \
    do {                                   \
        if (prev[x] >= 0)                  \
            next[prev[x]] = next[x];       \
        if (next[x] >= 0)                  \
            prev[next[x]] = prev[x];       \
    } while (0)
    for (long c = 0; c < n; c++) {
        struct node *cl = &ns->v[c];
        if (cl->type != N_DELIM || !cl->can_close)
            continue;
        while (cl->rem > 0) {
            long *floor = &bottom[cl->ch == '*' ? 1 : cl->ch == '~' ? 2 : 0][cl->can_open != 0]
                                 [cl->count % 3];
            long o = prev[c];
            for (; o >= 0 && o > *floor; o = prev[o]) {
                struct node *op = &ns->v[o];
                if (op->ch != cl->ch || !op->can_open || op->rem == 0)
                    continue;
                if (cl->ch != '~' && (op->can_close || cl->can_open) &&
                    (op->count + cl->count) % 3 == 0 && !(op->count % 3 == 0 && cl->count % 3 == 0))
                    continue; /* the "rule of 3" */
                break;
            }
            if (o < 0 || o <= *floor) {
                *floor = prev[c];
                if (!cl->can_open)
                    UNLINK(c);
                break;
            }
            struct node *op = &ns->v[o];
            int use = op->rem >= 2 && cl->rem >= 2 ? 2 : 1;
            op->rem -= use;
            cl->rem -= use;
            if (cl->ch == '~') { /* both runs are two long: all of them */
                op->open_t++;
                cl->close_t++;
            } else if (use == 2) {
                op->open_s++;
                cl->close_s++;
            } else {
                op->open_e++;
                cl->close_e++;
            }
            next[o] = c; /* delimiters in between can't pair any more */
            prev[c] = o;
            if (op->rem == 0)
                UNLINK(o);
            if (cl->rem == 0)
                UNLINK(c);
        }
    }
#undef UNLINK
    if (prev != small[0]) {
        free(prev);
        free(next);
    }
}

struct ictx {
    struct markdown *md;
    int slot;       /* slot of the surrounding block (heading, quote, link, base) */
    unsigned attrs; /* attributes inherited from outside */
    int depth;
};

static void style_for(const struct ictx *cx, int strong, int em, unsigned strike, int *slot,
                      unsigned *attrs)
{
    unsigned e = (strong > 0 ? THEME_ATTR_BOLD : 0) | (em > 0 ? THEME_ATTR_ITALIC : 0);
    if (cx->slot == cx->md->base && e) {
        *slot = e == (THEME_ATTR_BOLD | THEME_ATTR_ITALIC) ? THEME_BOLD_ITALIC
              : e == THEME_ATTR_BOLD                        ? THEME_BOLD
                                                            : THEME_ITALIC;
        *attrs = cx->attrs | strike;
    } else {
        *slot = cx->slot;
        *attrs = cx->attrs | e | strike;
    }
}

static void render_inline(struct lb *out, const char *s, size_t n, const struct ictx *cx);

static void emit_nodes(struct lb *out, const char *s, const struct nodes *ns,
                       const struct ictx *cx)
{
    int strong = 0, em = 0, struck = 0, slot;
    unsigned attrs, strike = 0;
    for (size_t i = 0; i < ns->n; i++) {
        const struct node *nd = &ns->v[i];
        switch (nd->type) {
        case N_TEXT:
            style_for(cx, strong, em, strike, &slot, &attrs);
            lb_add(out, s + nd->a, nd->b - nd->a, slot, attrs);
            break;
        case N_CODE:
            lb_add(out, s + nd->a, nd->b - nd->a, THEME_CODE, strike);
            break;
        case N_ENTITY: {
            char u[4];
            style_for(cx, strong, em, strike, &slot, &attrs);
            lb_add(out, u, utf8_encode((uint32_t)nd->count, u), slot, attrs);
            break;
        }
        case N_DELIM:
            strong -= nd->close_s;
            em -= nd->close_e;
            struck -= nd->close_t;
            strike = struck > 0 ? THEME_ATTR_STRIKE : 0;
            style_for(cx, strong, em, strike, &slot, &attrs);
            for (int k = 0; k < nd->rem; k++)
                lb_add(out, &nd->ch, 1, slot, attrs);
            strong += nd->open_s;
            em += nd->open_e;
            struck += nd->open_t;
            strike = struck > 0 ? THEME_ATTR_STRIKE : 0;
            break;
        case N_LINK: {
            unsigned e = (strong > 0 ? THEME_ATTR_BOLD : 0) | (em > 0 ? THEME_ATTR_ITALIC : 0) |
                         strike;
            struct ictx sub = {cx->md, THEME_LINK, cx->attrs | e, cx->depth + 1};
            if (nd->image)
                lb_add(out, "image: ", 7, THEME_DIM, 0);
            size_t mark = out->t.len;
            render_inline(out, s + nd->a, nd->b - nd->a, &sub);
            size_t ulen = nd->ub - nd->ua;
            int same = out->t.len - mark == ulen &&
                       memcmp(out->t.data + mark, s + nd->ua, ulen) == 0;
            if (ulen && !same) {
                lb_add(out, " (", 2, THEME_DIM, 0);
                lb_add(out, s + nd->ua, ulen, THEME_DIM, 0);
                lb_add(out, ")", 1, THEME_DIM, 0);
            }
            break;
        }
        case N_AUTOLINK: {
            unsigned e = (strong > 0 ? THEME_ATTR_BOLD : 0) | (em > 0 ? THEME_ATTR_ITALIC : 0) |
                         strike;
            lb_add(out, s + nd->a, nd->b - nd->a, THEME_LINK, cx->attrs | e);
            break;
        }
        }
    }
}

static void render_inline(struct lb *out, const char *s, size_t n, const struct ictx *cx)
{
    /* the line itself uses the styler's arrays; a link's text inside it (depth > 0) its own */
    struct nodes own = {NULL, 0, 0}, *ns = cx->depth ? &own : &cx->md->ns;
    struct lidx xown = {0}, *x = cx->depth ? &xown : &cx->md->lx;
    ns->n = 0;
    buf_reserve(&out->t, n + 16); /* the line's text in one allocation, not by doubling */
    lidx_build(x, s, n, cx->depth < MAX_LINK_DEPTH);
    tokenize(x, s, n, ns, cx->depth);
    pair_emphasis(ns);
    emit_nodes(out, s, ns, cx);
    if (cx->depth) {
        lidx_free(&xown);
        free(own.v);
    }
}

static void inline_into(struct markdown *md, struct lb *out, const char *s, size_t n, int slot)
{
    struct ictx cx = {md, slot, 0, 0};
    render_inline(out, s, n, &cx);
}

/* ---- block helpers ---- */

static size_t count_indent(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] == ' ')
        i++;
    return i;
}

static int is_blank(const char *s, size_t n)
{
    return count_indent(s, n) == n;
}

/* A thematic break: 3+ of one of - * _ with only spaces between. */
static int is_rule(const char *s, size_t n)
{
    size_t i = count_indent(s, n);
    if (i > 3 || i >= n || !s[i] || !strchr("-*_", s[i]))
        return 0;
    char c = s[i];
    int cnt = 0;
    for (; i < n; i++) {
        if (s[i] == c)
            cnt++;
        else if (s[i] != ' ')
            return 0;
    }
    return cnt >= 3;
}

/* Opening fence at s: run length (>= 3) or 0; *ch gets the fence character. */
static size_t fence_open(const char *s, size_t n, char *ch)
{
    if (n < 3 || (s[0] != '`' && s[0] != '~'))
        return 0;
    size_t k = run_len(s, n, 0, s[0]);
    if (k < 3)
        return 0;
    if (s[0] == '`' && memchr(s + k, '`', n - k))
        return 0; /* a backtick fence's info string has no backticks */
    *ch = s[0];
    return k;
}

static int fence_close(const struct mdstate *st, const char *s, size_t n)
{
    size_t i = count_indent(s, n);
    size_t k = run_len(s, n, i, st->fence_ch);
    if (k < (size_t)st->fence_len)
        return 0;
    return is_blank(s + i + k, n - i - k);
}

/* Unescaped '|' outside code spans? */
static int has_pipe(const char *s, size_t n)
{
    if (!memchr(s, '|', n))
        return 0;
    struct lidx x = {0};
    int found = 0;
    lidx_build(&x, s, n, 0);
    for (size_t i = 0; i < n && !found; i++) {
        if (s[i] == '\\') {
            i++;
        } else if (s[i] == '`') {
            size_t k = run_len(s, n, i, '`');
            size_t e = code_close(&x, i, k);
            i = (e ? e + k : i + k) - 1;
        } else if (s[i] == '|') {
            found = 1;
        }
    }
    lidx_free(&x);
    return found;
}

/* Split a table row into trimmed cells: returns the count (<= MAX_COLS; more are dropped). */
static int split_cells(const char *s, size_t n, size_t *ca, size_t *cb)
{
    size_t a = count_indent(s, n), b = n;
    while (b > a && s[b - 1] == ' ')
        b--;
    if (a < b && s[a] == '|')
        a++;
    if (b > a && s[b - 1] == '|' && !(b >= a + 2 && s[b - 2] == '\\'))
        b--;
    int nc = 0;
    size_t start = a;
    struct lidx ix = {0};
    lidx_build(&ix, s, n, 0);
    for (size_t i = a; i <= b; i++) {
        if (i < b && s[i] == '\\') {
            i++;
            continue;
        }
        if (i < b && s[i] == '`') {
            size_t k = run_len(s, b, i, '`');
            size_t e = code_close(&ix, i, k);
            if (e >= b)
                e = 0;
            i = (e ? e + k : i + k) - 1;
            continue;
        }
        if (i == b || s[i] == '|') {
            size_t x = start, y = i;
            while (x < y && s[x] == ' ')
                x++;
            while (y > x && s[y - 1] == ' ')
                y--;
            if (nc < MAX_COLS) {
                ca[nc] = x;
                cb[nc] = y;
                nc++;
            }
            start = i + 1;
        }
    }
    lidx_free(&ix);
    return nc;
}

/* A delimiter row (|---|:--:|): its cell count, alignments into align[]; 0 when not one. */
static int delim_row(const char *s, size_t n, char *align)
{
    size_t ca[MAX_COLS], cb[MAX_COLS];
    if (!memchr(s, '-', n))
        return 0;
    int pipe = memchr(s, '|', n) != NULL;
    int nc = split_cells(s, n, ca, cb);
    if (nc == 0 || (!pipe && nc < 2))
        return 0;
    for (int c = 0; c < nc; c++) {
        size_t x = ca[c], y = cb[c];
        if (x == y)
            return 0;
        int left = s[x] == ':', right = s[y - 1] == ':';
        if (left)
            x++;
        if (right && y > x)
            y--;
        if (x >= y)
            return 0;
        for (size_t i = x; i < y; i++)
            if (s[i] != '-')
                return 0;
        align[c] = left && right ? 'c' : right ? 'r' : 'l';
    }
    return nc;
}

/* ---- emitting lines ---- */

/* n bytes (8-aligned) in the newest block of finished lines' text, a new block when it is
 * full. */
static char *md_alloc(struct markdown *md, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    struct mdblock *last = md->nmb > md->mb0 ? &md->mb[md->nmb - 1] : NULL;
    if (!last || last->size - last->used < n) {
        if (md->mb0 && md->mb0 * 2 >= md->nmb) { /* the array's freed head goes */
            memmove(md->mb, md->mb + md->mb0, (md->nmb - md->mb0) * sizeof(*md->mb));
            md->nmb -= md->mb0;
            md->mb0 = 0;
        }
        XGROW(md->mb, md->nmb + 1, md->capmb);
        last = &md->mb[md->nmb++];
        last->size = n > MD_ARENA_BLOCK ? n : MD_ARENA_BLOCK;
        last->mem = xmalloc(last->size);
        last->used = 0;
    }
    char *p = last->mem + last->used;
    last->used += n;
    last->lines = md->n + 1; /* the line being committed is in it */
    return p;
}

/* The builder's line becomes finished line md->n: its spans and text copied into the blocks
 * (no allocation of its own), the builder emptied for the next line. */
static void commit_line(struct markdown *md, struct lb *b, int kind, int level, int hang,
                        unsigned flags)
{
    if (md->n == md->nblocks * LINE_BLOCK) {
        XGROW(md->blocks, md->nblocks + 1, md->capblocks);
        md->blocks[md->nblocks++] = xmalloc(LINE_BLOCK * sizeof(**md->blocks));
    }
    struct markdown_line *out = &md->blocks[md->n / LINE_BLOCK][md->n % LINE_BLOCK];
    line_meta(out, md->base, kind, level, hang, flags);
    size_t spb = b->n * sizeof(*b->sp);
    size_t hz = md->have_later ? (sizeof(md->later) + 7) & ~(size_t)7 : 0;
    char *mem = md_alloc(md, hz + spb + b->t.len + 1);
    if (hz) { /* a code line highlighted when drawn: how, stored with it */
        memcpy(mem, &md->later, sizeof(md->later));
        out->hl = (const struct wrap_hl *)(void *)mem;
        mem += hz;
        md->have_later = 0;
    }
    if (b->n)
        memcpy(mem, b->sp, spb);
    memcpy(mem + spb, buf_str(&b->t), b->t.len + 1);
    out->wl.spans = b->n ? (const struct theme_span *)(void *)mem : NULL;
    out->wl.nspans = b->n;
    out->wl.text = mem + spb;
    out->wl.len = b->t.len;
    md->n++;
    lb_clear(b);
}

/* The builder's line becomes the provisional partial line: the builder's buffers and the
 * partial line's trade places (no copy). */
static void partial_line(struct markdown *md, struct lb *b, int kind, int level, int hang,
                         unsigned flags)
{
    struct lb t = *b;
    *b = md->pl;
    md->pl = t;
    lb_clear(b);
    line_meta(&md->partial, md->base, kind, level, hang, flags);
    md->partial.wl.text = buf_str(&md->pl.t);
    md->partial.wl.len = md->pl.t.len;
    md->partial.wl.spans = md->pl.n ? md->pl.sp : NULL;
    md->partial.wl.nspans = md->pl.n;
    md->have_partial = 1;
}

/* Where a line lands: committed, or the provisional partial line. */
struct sink {
    struct markdown *md;
    int commit;
};

static void sink_line(const struct sink *k, struct lb *b, int kind, int level, int hang,
                      unsigned flags)
{
    if (k->commit)
        commit_line(k->md, b, kind, level, hang, flags);
    else
        partial_line(k->md, b, kind, level, hang, flags);
}

/* The deepest list level whose content column is <= indent (0 when none). */
static int list_level_for(const struct mdstate *st, size_t indent)
{
    int d = 0;
    for (int i = 0; i < st->nlist; i++)
        if ((size_t)st->lcont[i] <= indent)
            d = i;
    return d;
}

/* A line of a fenced code block, highlighted when the fence named a known language; st->hls
 * carries what the line leaves open to the next (the caller passes a copy for a preview). */
static void code_line(struct markdown *md, struct mdstate *st, const char *s, size_t n,
                      const struct sink *k)
{
    struct lb *b = lb_line(md);
    size_t strip = count_indent(s, n);
    if (strip > (size_t)st->fence_indent)
        strip = (size_t)st->fence_indent;
    lb_spaces(b, (size_t)st->code_indent, md->base);
    s += strip;
    n -= strip;
    if (st->lang && !md->no_highlight) {
        if (!md->hl || hl_of(md->hl) != st->lang) {
            hl_free(md->hl);
            md->hl = hl_new(st->lang);
        }
        if (md->hl_when_drawn && k->commit) { /* wrap_doc highlights it if it is drawn */
            md->later = (struct wrap_hl){st->lang, st->hls, (uint32_t)b->t.len};
            md->have_later = 1;
            hl_scan(md->hl, &st->hls, s, n);
            lb_add(b, s, n, THEME_CODE, 0);
            sink_line(k, b, MARKDOWN_CODE, 0, st->code_indent, WRAP_PRE);
            return;
        }
        hl_line(md->hl, &st->hls, s, n, &md->hsp);
        size_t at = b->t.len; /* the text once, then its spans shifted */
        buf_append(&b->t, s, n);
        XGROW(b->sp, b->n + md->hsp.n, b->cap);
        for (size_t i = 0; i < md->hsp.n; i++) {
            b->sp[b->n] = md->hsp.v[i];
            b->sp[b->n++].off += (uint32_t)at;
        }
    } else {
        lb_add(b, s, n, THEME_CODE, 0);
    }
    sink_line(k, b, MARKDOWN_CODE, 0, st->code_indent, WRAP_PRE);
}

static void raw_table_line(struct markdown *md, const char *s, size_t n, struct markdown_line *out)
{
    struct lb b = {BUF_INIT, NULL, 0, 0};
    inline_into(md, &b, s, n, md->base);
    lb_finish(&b, out, md->base, MARKDOWN_TABLE_RAW, 0, 0, WRAP_PRE);
}

/* The opening line of a code fence of flen fence characters fch: remember the fence; the line
 * shows the info string's first word (the language). */
static void block_fence(struct markdown *md, struct mdstate *st, const char *p, size_t rest,
                        size_t indent, size_t flen, char fch, const struct sink *k)
{
    struct lb *b = lb_line(md);
    st->fence = 1;
    st->fence_ch = fch;
    st->fence_len = (int)flen;
    st->fence_indent = (int)indent;
    st->code_indent = st->nlist > 0 && indent > 0 ? st->lout[list_level_for(st, indent)] : 0;
    size_t a = flen;
    while (a < rest && p[a] == ' ')
        a++;
    size_t e = a;
    while (e < rest && p[e] != ' ')
        e++;
    st->lang = hl_lang_find(p + a, e - a);
    st->hls = (struct hl_state)HL_STATE_INIT;
    lb_spaces(b, (size_t)st->code_indent, md->base);
    lb_add(b, p + a, e - a, THEME_CODE_LABEL, 0);
    sink_line(k, b, MARKDOWN_CODE_LABEL, 0, st->code_indent, WRAP_PRE);
}

/* An ATX heading at p ("## text", an optional closing run of #s); 0 when p is not one. */
static int block_heading(struct markdown *md, struct mdstate *st, const char *p, size_t rest,
                         const struct sink *k)
{
    size_t h = run_len(p, rest, 0, '#');
    if (h > 6 || (h != rest && p[h] != ' '))
        return 0;
    size_t a = h, e = rest;
    while (a < e && p[a] == ' ')
        a++;
    while (e > a && p[e - 1] == ' ')
        e--;
    size_t t = e; /* an optional closing run of #s after a space */
    while (t > a && p[t - 1] == '#')
        t--;
    if (t < e && (t == a || p[t - 1] == ' ')) {
        e = t;
        while (e > a && p[e - 1] == ' ')
            e--;
    }
    struct lb *b = lb_line(md);
    st->nlist = 0;
    lb_add(b, p, h, THEME_DIM, 0);
    lb_add(b, " ", 1, THEME_DIM, 0);
    inline_into(md, b, p + a, e - a, THEME_HEADING);
    sink_line(k, b, MARKDOWN_HEADING, (int)h, (int)h + 1, 0);
    return 1;
}

/* A block quote line (s[indent] is '>'), nested as many levels as it has '>'s. */
static void block_quote(struct markdown *md, struct mdstate *st, const char *s, size_t n,
                        size_t indent, const struct sink *k)
{
    struct lb *b = lb_line(md);
    int depth = 0;
    size_t i = indent;
    while (i < n && s[i] == '>') {
        depth++;
        i++;
        if (i < n && s[i] == ' ')
            i++;
        size_t j = i;
        while (j < n && j - i < 3 && s[j] == ' ')
            j++;
        if (j < n && s[j] == '>')
            i = j;
    }
    st->nlist = 0;
    for (int d = 0; d < depth; d++)
        lb_add(b, "\xE2\x94\x82 ", 4, THEME_QUOTE, 0);
    inline_into(md, b, s + i, n - i, THEME_QUOTE);
    sink_line(k, b, MARKDOWN_QUOTE, depth, 2 * depth, 0);
}

/* The length of the list marker at p ("-", "*", "+", "1." or "1)" before a space or the end),
 * with *ordered set for a number; 0 when p starts no list item. */
static size_t list_marker(const char *p, size_t rest, int *ordered)
{
    *ordered = 0;
    if ((p[0] == '-' || p[0] == '*' || p[0] == '+') && (rest == 1 || p[1] == ' '))
        return 1;
    size_t d = 0;
    while (d < rest && d < 10 && p[d] >= '0' && p[d] <= '9')
        d++;
    if (d >= 1 && d <= 9 && d < rest && (p[d] == '.' || p[d] == ')') &&
        (d + 1 == rest || p[d + 1] == ' ')) {
        *ordered = 1;
        return d + 1;
    }
    return 0;
}

/* A list item whose marker (mlen bytes) starts at p: find its level in the list stack, draw
 * the bullet or number and the item's first line. */
static void block_list_item(struct markdown *md, struct mdstate *st, const char *p, size_t rest,
                            size_t indent, size_t mlen, int ordered, const struct sink *k)
{
    struct lb *b = lb_line(md);
    size_t sp = 0;
    while (mlen + sp < rest && p[mlen + sp] == ' ')
        sp++;
    if (sp > 4)
        sp = 1; /* the extra spaces belong to the content */
    if (sp == 0)
        sp = 1;
    int cont = (int)(indent + mlen + sp);
    while (st->nlist > 0 && st->lind[st->nlist - 1] > (int)indent)
        st->nlist--;
    if (st->nlist > 0 && (int)indent < st->lcont[st->nlist - 1])
        st->nlist--; /* a sibling: replace the top level */
    if (st->nlist == MAX_LIST)
        st->nlist--;
    int depth = st->nlist++;
    st->lind[depth] = (int)indent;
    st->lcont[depth] = cont;
    static const char *const bullets[3] = {"\xE2\x80\xA2", "\xE2\x97\xA6", "\xE2\x96\xAA"};
    size_t a = mlen + sp;
    if (a > rest)
        a = rest;
    /* a task: "[ ]" or "[x]" before a space or the end becomes a ballot box (U+2610 / U+2611),
     * instead of the bullet or after the number */
    const char *box = NULL;
    if (rest - a >= 3 && p[a] == '[' && p[a + 2] == ']' && strchr(" xX", p[a + 1]) &&
        (rest - a == 3 || p[a + 3] == ' ')) {
        box = p[a + 1] == ' ' ? "\xE2\x98\x90" : "\xE2\x98\x91";
        a += rest - a == 3 ? 3 : 4;
    }
    lb_spaces(b, (size_t)depth * 2, md->base);
    size_t mw;
    if (ordered) {
        lb_add(b, p, mlen, THEME_LIST_MARKER, 0);
        mw = mlen;
        if (box) {
            lb_add(b, " ", 1, md->base, 0);
            lb_add(b, box, 3, THEME_LIST_MARKER, 0);
            mw += 2;
        }
    } else {
        const char *m = box ? box : bullets[depth % 3];
        lb_add(b, m, strlen(m), THEME_LIST_MARKER, 0);
        mw = 1;
    }
    lb_add(b, " ", 1, md->base, 0);
    st->lout[depth] = depth * 2 + (int)mw + 1;
    inline_into(md, b, p + a, rest - a, md->base);
    sink_line(k, b, MARKDOWN_LIST, depth, st->lout[depth], 0);
}

/* One line of block structure outside code fences and tables. */
static void block_line(struct markdown *md, struct mdstate *st, const char *s, size_t n,
                       const struct sink *k)
{
    struct lb *b = lb_line(md);
    size_t indent = count_indent(s, n);
    const char *p = s + indent;
    size_t rest = n - indent;
    char fch;
    size_t flen, mlen;
    int ordered;

    if (rest == 0) {
        sink_line(k, b, MARKDOWN_BLANK, 0, 0, 0);
        return;
    }
    if ((flen = fence_open(p, rest, &fch)) != 0) {
        block_fence(md, st, p, rest, indent, flen, fch, k);
        return;
    }
    if (indent <= 3 && p[0] == '#' && block_heading(md, st, p, rest, k))
        return;
    if (is_rule(s, n)) {
        st->nlist = 0;
        lb_add(b, "\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80", 9, THEME_RULE, 0);
        sink_line(k, b, MARKDOWN_RULE, 0, 0, WRAP_RULE);
        return;
    }
    if (indent <= 3 && p[0] == '>') {
        block_quote(md, st, s, n, indent, k);
        return;
    }
    if ((mlen = list_marker(p, rest, &ordered)) != 0) {
        block_list_item(md, st, p, rest, indent, mlen, ordered, k);
        return;
    }
    if (indent > 0 && st->nlist > 0) {
        int d = list_level_for(st, indent);
        lb_spaces(b, (size_t)st->lout[d], md->base);
        inline_into(md, b, p, rest, md->base);
        sink_line(k, b, MARKDOWN_LIST, d, st->lout[d], 0);
        return;
    }
    if (indent == 0)
        st->nlist = 0;
    lb_spaces(b, indent, md->base);
    inline_into(md, b, p, rest, md->base);
    sink_line(k, b, MARKDOWN_TEXT, 0, (int)indent, 0);
}

/* ---- tables ---- */

static void hold_row(struct markdown *md, const char *s, size_t n)
{
    XGROW(md->held, md->nheld + 1, md->capheld);
    struct held *h = &md->held[md->nheld++];
    h->raw = xstrndup(s, n);
    h->len = n;
    raw_table_line(md, s, n, &h->shown);
}

static void drop_held(struct markdown *md)
{
    for (size_t i = 0; i < md->nheld; i++) {
        free(md->held[i].raw);
        mdline_free(&md->held[i].shown);
    }
    md->nheld = 0;
}

/* Rendered cells of one row. */
struct cells {
    struct lb c[MAX_COLS];
};

static void render_cells(struct markdown *md, const char *s, size_t n, int header,
                         struct cells *out)
{
    size_t ca[MAX_COLS], cb[MAX_COLS];
    int nc = split_cells(s, n, ca, cb);
    for (int c = 0; c < md->ncols; c++) {
        memset(&out->c[c], 0, sizeof(out->c[c]));
        if (c < nc)
            inline_into(md, &out->c[c], s + ca[c], cb[c] - ca[c],
                        header ? THEME_BOLD : md->base);
    }
}

static void free_cells(struct markdown *md, struct cells *cl)
{
    for (int c = 0; c < md->ncols; c++)
        lb_free(&cl->c[c]);
}

/* One row encoded for wrap_doc to lay out at its width (text/table.h): kind 'h', 's', 'f' or
 * 'b', the measured columns, the cells, and for body rows the header's cells. */
static void emit_table_row(struct markdown *md, char kind, const struct cells *cl,
                           const struct cells *head)
{
    struct lb *b = lb_line(md);
    lb_add(b, md->meta.data, md->meta.len, md->base, 0);
    b->t.data[1] = kind; /* "\x1d" KIND ... */
    for (int c = 0; cl && c < md->ncols; c++) {
        if (c)
            lb_add(b, "\x1f", 1, md->base, 0);
        lb_cat(b, &cl->c[c]);
    }
    for (int c = 0; head && c < md->ncols; c++) {
        lb_add(b, c ? "\x1f" : "\x1e", 1, md->base, 0);
        lb_cat(b, &head->c[c]);
    }
    commit_line(md, b, MARKDOWN_TABLE, 0, 0, WRAP_TABLE);
}

/* Emit the held rows (header, delimiter, body...), measured together. */
static void flush_table(struct markdown *md)
{
    size_t rows = md->nheld;
    struct cells *cl = xcalloc(rows, sizeof(*cl));
    for (int c = 0; c < md->ncols; c++)
        md->cols[c] = (struct table_col){md->align[c], 0, 0, 0};
    for (size_t r = 0; r < rows; r++) {
        if (r == 1)
            continue;
        render_cells(md, md->held[r].raw, md->held[r].len, r == 0, &cl[r]);
        for (int c = 0; c < md->ncols; c++)
            table_measure(&md->cols[c], buf_str(&cl[r].c[c].t), cl[r].c[c].t.len);
    }
    buf_reset(&md->meta);
    table_meta(&md->meta, 'h', md->ncols, md->cols);
    for (size_t r = 0; r < rows; r++) {
        if (r == 1)
            emit_table_row(md, 's', NULL, NULL);
        else
            emit_table_row(md, r == 0 ? 'h' : r == 2 ? 'f' : 'b', &cl[r], r ? &cl[0] : NULL);
        if (r > 1)
            free_cells(md, &cl[r]);
    }
    md->head = xmalloc(sizeof(*md->head)); /* kept for rows that flow after the held ones */
    *md->head = cl[0];
    free(cl);
    drop_held(md);
}

static void table_end_flow(struct markdown *md)
{
    if (md->head) {
        free_cells(md, md->head);
        free(md->head);
        md->head = NULL;
    }
}

/* ---- feeding ---- */

/* Release a held table candidate as ordinary text. */
static void release_candidate(struct markdown *md)
{
    struct sink k = {md, 1};
    char *raw = md->held[0].raw;
    size_t len = md->held[0].len;
    md->held[0].raw = NULL;
    drop_held(md);
    md->table = TABLE_NONE;
    block_line(md, &md->st, raw, len, &k);
    free(raw);
}

/* A source line as the block rules see it: a final '\r' dropped, cleaned (wrap_clean) into
 * md->scratch; *n gets its length. */
static const char *clean_line(struct markdown *md, const char *src, size_t *n)
{
    if (*n && src[*n - 1] == '\r')
        (*n)--;
    buf_reset(&md->scratch);
    wrap_clean(&md->scratch, src, *n);
    *n = md->scratch.len;
    return buf_str(&md->scratch);
}

static void process_line(struct markdown *md, const char *src, size_t n)
{
    struct sink k = {md, 1};
    const char *s = clean_line(md, src, &n);

    if (md->st.fence) {
        if (fence_close(&md->st, s, n))
            md->st.fence = 0;
        else
            code_line(md, &md->st, s, n, &k);
        return;
    }
    if (md->table == TABLE_CANDIDATE) {
        char align[MAX_COLS];
        int nc = delim_row(s, n, align);
        if (nc > 0 && nc == md->ncols) {
            memcpy(md->align, align, sizeof(align));
            md->table = TABLE_HELD;
            hold_row(md, s, n);
            return;
        }
        release_candidate(md);
    } else if (md->table == TABLE_HELD || md->table == TABLE_FLOWING) {
        if (!is_blank(s, n) && has_pipe(s, n)) {
            if (md->table == TABLE_FLOWING) {
                struct cells cl;
                render_cells(md, s, n, 0, &cl);
                emit_table_row(md, 'b', &cl, md->head);
                free_cells(md, &cl);
                return;
            }
            hold_row(md, s, n);
            if (md->nheld >= TABLE_MAX_ROWS + 2) {
                flush_table(md);
                md->table = TABLE_FLOWING;
            }
            return;
        }
        if (md->table == TABLE_HELD)
            flush_table(md);
        table_end_flow(md);
        md->table = TABLE_NONE;
    }
    size_t indent = count_indent(s, n);
    char fch;
    if (md->table == TABLE_NONE && indent <= 3 && has_pipe(s, n) && !is_rule(s, n) &&
        s[indent] != '>' && s[indent] != '#' && !fence_open(s + indent, n - indent, &fch)) {
        size_t ca[MAX_COLS], cb[MAX_COLS];
        md->ncols = split_cells(s, n, ca, cb);
        md->table = TABLE_CANDIDATE;
        hold_row(md, s, n);
        return;
    }
    block_line(md, &md->st, s, n, &k);
}

struct markdown *markdown_new(int base_slot)
{
    struct markdown *md = xcalloc(1, sizeof(*md));
    md->base = base_slot;
    md->pending_dirty = 1;
    return md;
}

void markdown_free(struct markdown *md)
{
    if (!md)
        return;
    for (size_t b = 0; b < md->nblocks; b++)
        free(md->blocks[b]);
    free(md->blocks);
    for (size_t b = md->mb0; b < md->nmb; b++)
        free(md->mb[b].mem);
    free(md->mb);
    drop_held(md);
    free(md->held);
    table_end_flow(md);
    buf_free(&md->meta);
    lb_free(&md->pl);
    lb_free(&md->line);
    free(md->ns.v);
    lidx_free(&md->lx);
    buf_free(&md->cur);
    buf_free(&md->scratch);
    buf_free(&md->pclean);
    hl_free(md->hl);
    hl_spans_free(&md->hsp);
    free(md);
}

void markdown_set_highlight(struct markdown *md, int on)
{
    md->no_highlight = !on;
}

void markdown_highlight_when_drawn(struct markdown *md)
{
    md->hl_when_drawn = 1;
}

void markdown_feed(struct markdown *md, const char *s, size_t n)
{
    if (md->finished || n == 0)
        return;
    size_t scan = md->cur.len, start = 0;
    buf_append(&md->cur, s, n);
    md->pending_dirty = 1;
    for (;;) {
        const char *t = md->cur.data;
        const char *nl = memchr(t + scan, '\n', md->cur.len - scan);
        if (!nl)
            break;
        size_t end = (size_t)(nl - t);
        process_line(md, t + start, end - start);
        start = scan = end + 1;
    }
    if (start) {
        memmove(md->cur.data, md->cur.data + start, md->cur.len - start);
        md->cur.len -= start;
        md->cur.data[md->cur.len] = '\0';
    }
}

/* A table being held ends where the text ends or a line is skipped: a candidate header is
 * released as plain lines, a held table is laid out and flushed. */
static void end_table(struct markdown *md)
{
    if (md->table == TABLE_CANDIDATE)
        release_candidate(md);
    else if (md->table == TABLE_HELD)
        flush_table(md);
    table_end_flow(md);
    md->table = TABLE_NONE;
}

void markdown_finish(struct markdown *md)
{
    if (md->finished)
        return;
    if (md->cur.len)
        process_line(md, md->cur.data, md->cur.len);
    buf_reset(&md->cur);
    end_table(md);
    md->finished = 1;
    md->pending_dirty = 1;
}

size_t markdown_count(const struct markdown *md)
{
    return md->n;
}

const struct markdown_line *markdown_line(const struct markdown *md, size_t i)
{
    return i < md->n && i >= md->released ? &md->blocks[i / LINE_BLOCK][i % LINE_BLOCK] : NULL;
}

void markdown_skip_line(struct markdown *md)
{
    if (md->finished)
        return;
    buf_free(&md->cur);
    end_table(md);
    md->pending_dirty = 1;
}

void markdown_release(struct markdown *md, size_t upto)
{
    if (upto > md->n)
        upto = md->n;
    for (; md->released < upto; md->released++) {
        size_t i = md->released;
        memset(&md->blocks[i / LINE_BLOCK][i % LINE_BLOCK], 0, sizeof(**md->blocks));
        if (i % LINE_BLOCK == LINE_BLOCK - 1) { /* the block's last line: the block goes */
            free(md->blocks[i / LINE_BLOCK]);
            md->blocks[i / LINE_BLOCK] = NULL;
        }
    }
    /* the text blocks whose lines are all released: freed, but the newest, which is emptied
     * for the next lines */
    while (md->mb0 < md->nmb && md->mb[md->mb0].lines <= md->released) {
        if (md->mb0 + 1 == md->nmb) {
            md->mb[md->mb0].used = 0;
            break;
        }
        free(md->mb[md->mb0++].mem);
    }
}

static void update_pending(struct markdown *md)
{
    if (!md->pending_dirty)
        return;
    md->pending_dirty = 0;
    memset(&md->partial, 0, sizeof(md->partial)); /* its text stays in pl for the next one */
    md->have_partial = 0;
    size_t n = md->cur.len;
    if (n == 0)
        return;
    n -= utf8_incomplete_tail(md->cur.data, n);
    if (n && md->cur.data[n - 1] == '\r')
        n--;
    if (n == 0)
        return;
    struct buf *clean = &md->pclean;
    buf_reset(clean);
    wrap_clean(clean, md->cur.data, n);
    const char *s = buf_str(clean);
    n = clean->len;
    struct sink k = {md, 0};
    if (md->st.fence) {
        struct mdstate copy = md->st; /* a preview must not change the block state */
        code_line(md, &copy, s, n, &k);
    } else if (md->table != TABLE_NONE && has_pipe(s, n)) {
        struct lb *b = lb_line(md);
        inline_into(md, b, s, n, md->base);
        partial_line(md, b, MARKDOWN_TABLE_RAW, 0, 0, WRAP_PRE);
    } else {
        struct mdstate copy = md->st; /* a preview must not change the block state */
        block_line(md, &copy, s, n, &k);
    }
}

size_t markdown_pending_count(struct markdown *md)
{
    update_pending(md);
    return md->nheld + (md->have_partial ? 1 : 0);
}

const struct markdown_line *markdown_pending_line(struct markdown *md, size_t i)
{
    update_pending(md);
    if (i < md->nheld)
        return &md->held[i].shown;
    if (i == md->nheld && md->have_partial)
        return &md->partial;
    return NULL;
}

/* ---- a new styler's place (markdown_restart) ---- */

static int restart_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* s[0..n) (no '\n') is blank once cleaned: spaces and tabs, then at most one '\r'. */
static int restart_blank(const char *s, size_t n)
{
    if (n && s[n - 1] == '\r')
        n--;
    for (size_t i = 0; i < n; i++)
        if (!restart_ws(s[i]))
            return 0;
    return 1;
}

/* The fence state after the line s[0..n) (a line whose first byte past its blanks is ` or ~),
 * as process_line decides it; -1 when a table could have taken the line as a row instead. */
static int restart_fence_line(struct markdown *md, struct mdstate *st, const char *s, size_t n)
{
    const char *c = clean_line(md, s, &n);
    if (st->fence) {
        if (fence_close(st, c, n))
            st->fence = 0;
        return 0;
    }
    size_t indent = count_indent(c, n);
    char fch;
    size_t flen = fence_open(c + indent, n - indent, &fch);
    if (!flen)
        return 0;
    if (memchr(c, '|', n))
        return -1; /* a held table's row, or a fence: not worth telling apart */
    st->fence = 1;
    st->fence_ch = fch;
    st->fence_len = (int)flen;
    return 0;
}

size_t markdown_restart(struct markdown *md, const char *s, size_t n, size_t min_lines,
                        size_t max_line)
{
    if (md->finished || n == 0)
        return 0;
    /* the last place with min_lines finished lines after it */
    size_t pos = n;
    for (size_t k = 0; k <= min_lines; k++) {
        const char *nl = pos ? memrchr(s, '\n', pos) : NULL;
        if (!nl)
            return 0;
        pos = (size_t)(nl - s);
    }
    size_t limit = pos + 1;
    /* the line md has begun: its first byte tells whether it could be a fence's */
    size_t first = md->cur.len;
    if (first) {
        size_t i = 0;
        while (i < first && restart_ws(md->cur.data[i]))
            i++;
        if (i == first || md->cur.data[i] == '`' || md->cur.data[i] == '~')
            return 0;
    }
    struct mdstate st = md->st;
    size_t at = 0, best = 0;
    int prev_blank = 0;
    for (;;) {
        if (at > 0 && !st.fence && prev_blank && !restart_ws(s[at]) && s[at] != '\n' &&
            s[at] != '\r')
            best = at; /* column 0 after a blank line, outside a fence */
        if (at >= limit)
            break;
        size_t e = (size_t)((const char *)memchr(s + at, '\n', n - at) - s);
        if (first + e - at > max_line)
            break; /* a long line goes to the new styler (or is not styled at all) */
        size_t i = at;
        while (i < e && restart_ws(s[i]))
            i++;
        prev_blank = 0;
        if (first) {
            /* the rest of md's line: neither blank nor a fence (above) */
        } else if (i < e && (s[i] == '`' || s[i] == '~')) {
            if (restart_fence_line(md, &st, s + at, e - at) < 0)
                break;
        } else if (!st.fence) {
            prev_blank = restart_blank(s + at, e - at);
        }
        first = 0;
        at = e + 1;
    }
    return best;
}

void markdown_code_block(struct buf *out, const char *info, const char *text, size_t len,
                         void (*put)(struct buf *out, const char *s, size_t n))
{
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < len; i++) {
        run = text[i] == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    size_t fence = longest < 3 ? 3 : longest + 1;
    for (size_t i = 0; i < fence; i++)
        buf_appendc(out, '`');
    buf_appends(out, info);
    buf_appendc(out, '\n');
    if (put)
        put(out, text, len);
    else
        buf_append(out, text, len);
    if (len && text[len - 1] != '\n')
        buf_appendc(out, '\n');
    for (size_t i = 0; i < fence; i++)
        buf_appendc(out, '`');
    buf_appendc(out, '\n');
}

size_t markdown_open_fence(const char *text, size_t len, char *ch)
{
    size_t open = 0;
    char fch = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t e = nl ? (size_t)(nl - text) : len;
        size_t i = at + count_indent(text + at, e - at), j;
        if (i - at > 3) { /* indented code, or a line inside one: no fence */
        } else if (!open) {
            open = fence_open(text + i, e - i, &fch);
        } else if ((j = i + run_len(text, e, i, fch)) - i >= open) {
            while (j < e && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r'))
                j++;
            if (j == e) /* a closing fence: as long at least, then only blanks */
                open = 0;
        }
        at = e + 1;
    }
    if (open && ch)
        *ch = fch;
    return open;
}
