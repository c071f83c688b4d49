/* theme.c - theme files, slot inheritance and colour downgrading (no curses). */
#include "config.h"
#include "text/theme.h"
#include "text/ini.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#define THEME_MAX_FILE (1u << 20) /* a theme file is a few hundred bytes; refuse huge ones */

enum { COLOR_DEFAULT, COLOR_INDEX, COLOR_RGB };

struct tcolor {
    uint8_t kind; /* COLOR_* */
    uint8_t idx;  /* COLOR_INDEX */
    uint8_t r, g, b;
};

struct tstyle {
    struct tcolor fg, bg;
    unsigned attrs;
};

struct theme {
    char *name;
    struct tstyle slot[THEME_SLOT_COUNT];
    uint8_t set[THEME_SLOT_COUNT];
};

static const struct {
    const char *name;
    int parent;
} slot_info[THEME_SLOT_COUNT] = {
    [THEME_DEFAULT] = {"default", -1},
    [THEME_USER] = {"user", THEME_DEFAULT},
    [THEME_ASSISTANT] = {"assistant", THEME_DEFAULT},
    [THEME_REASONING] = {"reasoning", THEME_DEFAULT},
    [THEME_SYSTEM] = {"system", THEME_DEFAULT},
    [THEME_META] = {"meta", THEME_DEFAULT},
    [THEME_CODE] = {"code", THEME_DEFAULT},
    [THEME_CODE_LABEL] = {"code-label", THEME_CODE},
    [THEME_CODE_KEYWORD] = {"code-keyword", THEME_CODE},
    [THEME_CODE_TYPE] = {"code-type", THEME_CODE},
    [THEME_CODE_STRING] = {"code-string", THEME_CODE},
    [THEME_CODE_COMMENT] = {"code-comment", THEME_CODE},
    [THEME_CODE_NUMBER] = {"code-number", THEME_CODE},
    [THEME_CODE_FUNCTION] = {"code-function", THEME_CODE},
    [THEME_CODE_PREPROC] = {"code-preproc", THEME_CODE},
    [THEME_CODE_ADDED] = {"code-added", THEME_CODE},
    [THEME_CODE_REMOVED] = {"code-removed", THEME_CODE},
    [THEME_QUOTE] = {"quote", THEME_DEFAULT},
    [THEME_HEADING] = {"heading", THEME_BOLD},
    [THEME_BOLD] = {"bold", THEME_DEFAULT},
    [THEME_ITALIC] = {"italic", THEME_DEFAULT},
    [THEME_BOLD_ITALIC] = {"bold-italic", THEME_BOLD},
    [THEME_LINK] = {"link", THEME_DEFAULT},
    [THEME_LIST_MARKER] = {"list-marker", THEME_DEFAULT},
    [THEME_RULE] = {"rule", THEME_DIM},
    [THEME_TABLE_BORDER] = {"table-border", THEME_BORDER},
    [THEME_DIM] = {"dim", THEME_DEFAULT},
    [THEME_STATUS] = {"status", THEME_DEFAULT},
    [THEME_STATUS_WARNING] = {"status-warning", THEME_STATUS},
    [THEME_STATUS_ERROR] = {"status-error", THEME_STATUS},
    [THEME_ERROR] = {"error", THEME_DEFAULT},
    [THEME_SELECTION] = {"selection", THEME_DEFAULT},
    [THEME_SEARCH_HIT] = {"search-hit", THEME_SELECTION},
    [THEME_BORDER] = {"border", THEME_DIM},
    [THEME_TITLE] = {"title", THEME_STATUS},
    [THEME_PROMPT] = {"prompt", THEME_DEFAULT},
    [THEME_INPUT] = {"input", THEME_DEFAULT},
};

/* The compiled-in theme: the colours of themes/dark.theme (test_theme checks they agree). */
static const char builtin_text[] =
    "[theme]\n"
    "name = default\n"
    "default        = default default\n"
    "user           = 117\n"
    "assistant      = default\n"
    "reasoning      = 245 default italic\n"
    "system         = 180\n"
    "meta           = 244\n"
    "code           = 223 236\n"
    "code-label     = 246 236 italic\n"
    "code-keyword   = 176 236 bold\n"
    "code-type      = 80 236\n"
    "code-string    = 150 236\n"
    "code-comment   = 245 236 italic\n"
    "code-number    = 215 236\n"
    "code-function  = 117 236\n"
    "code-preproc   = 174 236\n"
    "code-added     = 114 236\n"
    "code-removed   = 210 236\n"
    "quote          = 250 default italic\n"
    "heading        = 75 default bold\n"
    "bold           = default default bold\n"
    "italic         = default default italic\n"
    "bold-italic    = default default bold,italic\n"
    "link           = 81 default underline\n"
    "list-marker    = 179\n"
    "rule           = 240\n"
    "table-border   = 242\n"
    "dim            = 243\n"
    "status         = 231 24\n"
    "status-warning = 16 214\n"
    "status-error   = 231 160 bold\n"
    "error          = 203 default bold\n"
    "selection      = 231 239\n"
    "search-hit     = 16 220\n"
    "border         = 240\n"
    "title          = 252 236 bold\n"
    "prompt         = 114 default bold\n"
    "input          = default\n";

static const char *const color_names[16] = {
    "black",        "red",        "green",        "yellow",        "blue",        "magenta",
    "cyan",         "white",      "bright-black", "bright-red",    "bright-green", "bright-yellow",
    "bright-blue",  "bright-magenta", "bright-cyan", "bright-white",
};

static const struct {
    const char *name;
    unsigned bit;
} attr_names[] = {
    {"bold", THEME_ATTR_BOLD},         {"dim", THEME_ATTR_DIM},
    {"italic", THEME_ATTR_ITALIC},     {"underline", THEME_ATTR_UNDERLINE},
    {"reverse", THEME_ATTR_REVERSE},   {"strike", THEME_ATTR_STRIKE},
    {"none", 0},
};

/* xterm's default RGB values for the 16 system colours. */
static const uint8_t rgb16[16][3] = {
    {0, 0, 0},       {205, 0, 0},     {0, 205, 0},     {205, 205, 0},
    {0, 0, 238},     {205, 0, 205},   {0, 205, 205},   {229, 229, 229},
    {127, 127, 127}, {255, 0, 0},     {0, 255, 0},     {255, 255, 0},
    {92, 92, 255},   {255, 0, 255},   {0, 255, 255},   {255, 255, 255},
};

static const uint8_t cube_levels[6] = {0, 95, 135, 175, 215, 255};

const char *theme_slot_name(int slot)
{
    return slot >= 0 && slot < THEME_SLOT_COUNT ? slot_info[slot].name : NULL;
}

int theme_slot_from_name(const char *name)
{
    for (int i = 0; i < THEME_SLOT_COUNT; i++)
        if (strcmp(slot_info[i].name, name) == 0)
            return i;
    return -1;
}

int theme_slot_parent(int slot)
{
    return slot >= 0 && slot < THEME_SLOT_COUNT ? slot_info[slot].parent : -1;
}

/* ---- parsing ---- */

static int parse_color(const char *tok, struct tcolor *c)
{
    memset(c, 0, sizeof(*c));
    if (strcmp(tok, "default") == 0) {
        c->kind = COLOR_DEFAULT;
        return 0;
    }
    if (strcmp(tok, "gray") == 0 || strcmp(tok, "grey") == 0) {
        c->kind = COLOR_INDEX;
        c->idx = 8;
        return 0;
    }
    for (int i = 0; i < 16; i++) {
        if (strcmp(tok, color_names[i]) == 0) {
            c->kind = COLOR_INDEX;
            c->idx = (uint8_t)i;
            return 0;
        }
    }
    if (isdigit((unsigned char)tok[0])) {
        size_t n = strlen(tok);
        if (n > 3)
            return -1;
        unsigned v = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isdigit((unsigned char)tok[i]))
                return -1;
            v = v * 10 + (unsigned)(tok[i] - '0');
        }
        if (v > 255)
            return -1;
        c->kind = COLOR_INDEX;
        c->idx = (uint8_t)v;
        return 0;
    }
    if (tok[0] == '#' && strlen(tok) == 7) {
        unsigned v = 0;
        for (int i = 1; i < 7; i++) {
            int ch = tolower((unsigned char)tok[i]);
            if (!isxdigit(ch))
                return -1;
            v = v * 16 + (unsigned)(isdigit(ch) ? ch - '0' : ch - 'a' + 10);
        }
        c->kind = COLOR_RGB;
        c->r = (uint8_t)(v >> 16);
        c->g = (uint8_t)(v >> 8);
        c->b = (uint8_t)v;
        return 0;
    }
    return -1;
}

static int parse_attr(const char *tok, unsigned *bit)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(attr_names); i++) {
        if (strcmp(tok, attr_names[i].name) == 0) {
            *bit = attr_names[i].bit;
            return 0;
        }
    }
    return -1;
}

/* Parse "FG [BG] [ATTR...]" (value is lower-cased and modified in place). Returns NULL or
 * an error message (caller frees). */
static char *parse_style(char *value, const char *slot, struct tstyle *st)
{
    memset(st, 0, sizeof(*st));
    int ntok = 0;
    char *save = NULL;
    for (char *tok = strtok_r(value, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        struct tcolor c;
        unsigned bit;
        int is_color = parse_color(tok, &c) == 0;
        if (ntok == 0) {
            if (!is_color) {
                if (parse_attr(tok, &bit) == 0)
                    return xasprintf("slot '%s': the foreground colour must come before "
                                     "attributes (write 'default %s')", slot, tok);
                return xasprintf("slot '%s': unknown colour '%s' (use a colour name, 0-255 or "
                                 "#rrggbb)", slot, tok);
            }
            st->fg = c;
        } else if (ntok == 1 && is_color) {
            st->bg = c;
        } else if (parse_attr(tok, &bit) == 0) {
            st->attrs |= bit;
        } else if (is_color) {
            return xasprintf("slot '%s': too many colours at '%s' (only a foreground and a "
                             "background)", slot, tok);
        } else if (ntok == 1) {
            return xasprintf("slot '%s': '%s' is neither a colour nor an attribute", slot, tok);
        } else {
            return xasprintf("slot '%s': unknown attribute '%s' (use bold, dim, italic, "
                             "underline, reverse or none)", slot, tok);
        }
        ntok++;
    }
    if (ntok == 0)
        return xasprintf("slot '%s': no colour given (write e.g. '%s = default')", slot, slot);
    return NULL;
}

static int printable_name(const char *s)
{
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.' && *s != ' ')
            return 0;
    return 1;
}

static char *base_name(const char *file)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 6 && strcmp(b + n - 6, ".theme") == 0)
        n -= 6;
    return xstrndup(b, n);
}

/* What theme_read_line gathers from a theme file. */
struct theme_reader {
    struct theme *t;
    const char *file;
    struct buf warnings;
    char *msg;        /* the error that ends the file */
    int section;      /* 0 before any, 1 in [theme], 2 in another (ignored) */
    int seen_theme;
    int content;      /* a line that is not blank or a comment */
};

/* The message of a malformed line. */
static char *theme_line_error(const char *file, const struct ini_line *l)
{
    switch (l->error) {
    case INI_ERR_NUL:
        return xasprintf("%s:%d: binary data (NUL byte); not a theme file", file, l->lineno);
    case INI_ERR_UTF8:
        return xasprintf("%s:%d: invalid UTF-8; not a theme file", file, l->lineno);
    case INI_ERR_CONTROL:
        return xasprintf("%s:%d: control character 0x%02x; not a theme file", file, l->lineno,
                         l->byte);
    case INI_ERR_SECTION:
        return xasprintf("%s:%d: malformed section header '%s' (expected [theme])", file,
                         l->lineno, l->text);
    default:
        return xasprintf("%s:%d: missing '=' (expected 'slot = colour [colour] "
                         "[attributes]', got '%s')", file, l->lineno, l->text);
    }
}

/* One "key = value" of the [theme] section: the name, or a slot's style. */
static char *theme_setting(struct theme_reader *r, int lineno, char *key, char *value)
{
    const char *file = r->file;
    struct theme *t = r->t;
    for (char *p = key; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    int slot;
    if (*key == '\0')
        return xasprintf("%s:%d: missing slot name before '='", file, lineno);
    if (strcmp(key, "name") == 0) {
        if (*value == '\0' || !printable_name(value) || strlen(value) > 64)
            return xasprintf("%s:%d: bad theme name '%s' (letters, digits, - _ . only)", file,
                             lineno, value);
        free(t->name);
        t->name = xstrdup(value);
    } else if (strcmp(key, "description") == 0) {
        /* free text for people reading the file */
    } else if ((slot = theme_slot_from_name(key)) < 0) {
        buf_printf(&r->warnings, "%s:%d: unknown slot '%s' ignored\n", file, lineno, key);
    } else {
        for (char *p = value; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        char *why = parse_style(value, key, &t->slot[slot]);
        if (why) {
            char *msg = xasprintf("%s:%d: %s", file, lineno, why);
            free(why);
            return msg;
        }
        t->set[slot] = 1;
    }
    return NULL;
}

/* One line of a theme file (an ini_handler). */
static int theme_read_line(void *ud, struct ini_line *l)
{
    struct theme_reader *r = ud;
    if (l->type == INI_ERROR) {
        r->msg = theme_line_error(r->file, l);
        return 1;
    }
    r->content = 1;
    if (l->type == INI_SECTION) {
        r->section = strcmp(l->section, "theme") == 0 ? 1 : 2;
        if (r->section == 1)
            r->seen_theme = 1;
        else
            buf_printf(&r->warnings, "%s:%d: unknown section [%s] ignored\n", r->file,
                       l->lineno, l->section);
        return 0;
    }
    if (r->section == 0)
        r->msg = xasprintf("%s:%d: setting before the [theme] section", r->file, l->lineno);
    else if (r->section == 1) /* lines of an unknown section were reported with it */
        r->msg = theme_setting(r, l->lineno, l->key, l->value);
    return r->msg != NULL;
}

struct theme *theme_parse(const char *text, size_t len, const char *file, char **err,
                          char **warn)
{
    struct theme_reader r = {.t = xcalloc(1, sizeof(struct theme)),
                             .file = file ? file : "theme",
                             .warnings = BUF_INIT};
    *err = NULL;
    if (warn)
        *warn = NULL;
    char *copy = xmalloc(len + 1); /* the reader cuts it into pieces */
    if (len)
        memcpy(copy, text, len);
    copy[len] = '\0';
    int lineno = 0;
    ini_parse(copy, len, INI_TEXT_ONLY, theme_read_line, &r, &lineno);
    free(copy);
    if (!r.msg && !r.content)
        r.msg = xasprintf("%s:%d: empty theme file (expected a [theme] section)", r.file,
                          lineno ? lineno : 1);
    else if (!r.msg && !r.seen_theme)
        r.msg = xasprintf("%s:%d: no [theme] section", r.file, lineno);
    if (r.msg) {
        *err = r.msg;
        buf_free(&r.warnings);
        theme_free(r.t);
        return NULL;
    }
    struct theme *t = r.t;
    if (!t->name)
        t->name = base_name(r.file);
    if (warn && r.warnings.len) {
        if (r.warnings.data[r.warnings.len - 1] == '\n')
            r.warnings.data[--r.warnings.len] = '\0';
        *warn = buf_take(&r.warnings);
    }
    buf_free(&r.warnings);
    return t;
}

struct theme *theme_load(const char *path, char **err, char **warn)
{
    size_t len = 0;
    char *text = util_read_file(path, &len, THEME_MAX_FILE);
    if (!text) {
        *err = xasprintf("%s: %s", path, strerror(errno));
        return NULL;
    }
    struct theme *t = theme_parse(text, len, path, err, warn);
    free(text);
    return t;
}

struct theme *theme_default(void)
{
    char *err = NULL;
    struct theme *t = theme_parse(builtin_text, sizeof(builtin_text) - 1, "(built-in)", &err,
                                  NULL);
    if (!t) /* cannot happen: the built-in text is tested */
        abort();
    return t;
}

static int valid_theme_name(const char *name)
{
    if (!name || !*name || name[0] == '.' || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return 0;
    return 1;
}

/* The directories searched for NAME.theme, in order (up to 3; each string is new). */
static int theme_dirs(char *dirs[3])
{
    int n = 0;
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = util_home(); /* as conf_dir finds it */
    const char *dd = getenv("TOKTERM_DATADIR");
    if (xdg && xdg[0] == '/')
        dirs[n++] = xasprintf("%s/tokterm/themes", xdg);
    else if (home)
        dirs[n++] = xasprintf("%s/.config/tokterm/themes", home);
    dirs[n++] = xasprintf("%s/themes", dd && *dd ? dd : TT_DATADIR);
    dirs[n++] = xasprintf("%s/themes", TT_SRCDIR);
    return n;
}

char *theme_path(const char *name)
{
    if (!valid_theme_name(name))
        return NULL;
    char *dirs[3], *found = NULL;
    int n = theme_dirs(dirs);
    for (int i = 0; i < n; i++) {
        if (!found) {
            char *p = xasprintf("%s/%s.theme", dirs[i], name);
            FILE *f = fopen(p, "r");
            if (f) {
                fclose(f);
                found = p;
            } else {
                free(p);
            }
        }
        free(dirs[i]);
    }
    return found;
}

struct theme *theme_find(const char *name, char **err, char **warn)
{
    *err = NULL;
    if (warn)
        *warn = NULL;
    if (!valid_theme_name(name)) {
        *err = xasprintf("bad theme name '%s' (letters, digits, '-', '_', '.'); using the "
                         "built-in theme", name ? name : "");
        return theme_default();
    }
    char *path = theme_path(name);
    if (!path) {
        if (strcmp(name, "default") == 0)
            return theme_default();
        char *dirs[3];
        int n = theme_dirs(dirs);
        struct buf b = BUF_INIT;
        buf_printf(&b, "theme '%s' not found (no %s.theme in", name, name);
        for (int i = 0; i < n; i++) {
            buf_printf(&b, "%s %s", i ? "," : "", dirs[i]);
            free(dirs[i]);
        }
        buf_appends(&b, "); using the built-in theme");
        *err = buf_take(&b);
        return theme_default();
    }
    char *why = NULL;
    struct theme *t = theme_load(path, &why, warn);
    free(path);
    if (!t) {
        *err = xasprintf("%s; using the built-in theme", why);
        free(why);
        return theme_default();
    }
    return t;
}

const char *theme_name(const struct theme *t)
{
    return t->name;
}

int theme_has_slot(const struct theme *t, int slot)
{
    return slot >= 0 && slot < THEME_SLOT_COUNT && t->set[slot];
}

void theme_free(struct theme *t)
{
    if (!t)
        return;
    free(t->name);
    free(t);
}

/* ---- colour downgrading ---- */

static void index_rgb(int i, int rgb[3])
{
    if (i < 16) {
        for (int k = 0; k < 3; k++)
            rgb[k] = rgb16[i][k];
    } else if (i < 232) {
        i -= 16;
        rgb[0] = cube_levels[i / 36];
        rgb[1] = cube_levels[(i / 6) % 6];
        rgb[2] = cube_levels[i % 6];
    } else {
        rgb[0] = rgb[1] = rgb[2] = 8 + 10 * (i - 232);
    }
}

static long dist2(const int a[3], const int b[3])
{
    long d = 0;
    for (int k = 0; k < 3; k++)
        d += (long)(a[k] - b[k]) * (a[k] - b[k]);
    return d;
}

static int nearest_cube_level(int v)
{
    int best = 0;
    for (int i = 1; i < 6; i++)
        if (abs(cube_levels[i] - v) < abs(cube_levels[best] - v))
            best = i;
    return best;
}

/* Nearest of indices 16..255 (the system colours 0..15 vary by terminal, so avoid them). */
static int nearest256(const int rgb[3])
{
    int cube = 16 + 36 * nearest_cube_level(rgb[0]) + 6 * nearest_cube_level(rgb[1]) +
               nearest_cube_level(rgb[2]);
    int avg = (rgb[0] + rgb[1] + rgb[2]) / 3;
    int g = avg < 8 ? 0 : (avg - 8 + 5) / 10;
    if (g > 23)
        g = 23;
    int gray = 232 + g, c1[3], c2[3];
    index_rgb(cube, c1);
    index_rgb(gray, c2);
    return dist2(c2, rgb) < dist2(c1, rgb) ? gray : cube;
}

static int nearest16(const int rgb[3])
{
    int best = 0;
    long bd = -1;
    for (int i = 0; i < 16; i++) {
        int c[3];
        index_rgb(i, c);
        long d = dist2(c, rgb);
        if (bd < 0 || d < bd) {
            bd = d;
            best = i;
        }
    }
    return best;
}

/* Colour count levels. */
enum { LEVEL_NONE, LEVEL_8, LEVEL_16, LEVEL_256 };

/* Map a colour to the level; *attrs may gain bold/dim (8 colours). -1 = default. */
static int downgrade(const struct tcolor *c, int level, int is_fg, unsigned *attrs)
{
    int rgb[3];
    if (c->kind == COLOR_DEFAULT || level == LEVEL_NONE)
        return -1;
    if (c->kind == COLOR_RGB) {
        rgb[0] = c->r;
        rgb[1] = c->g;
        rgb[2] = c->b;
        if (level == LEVEL_256)
            return nearest256(rgb);
    } else {
        if (level == LEVEL_256 || c->idx < (level == LEVEL_16 ? 16 : 8))
            return c->idx;
        index_rgb(c->idx, rgb);
    }
    int i = c->kind == COLOR_INDEX && c->idx < 16 ? c->idx : nearest16(rgb);
    if (level == LEVEL_16 || i < 8)
        return i;
    if (i == 8) { /* bright black: a dark grey that black/white terminals lack */
        if (is_fg) {
            *attrs |= THEME_ATTR_DIM;
            return -1;
        }
        return 7;
    }
    if (is_fg)
        *attrs |= THEME_ATTR_BOLD;
    return i - 8;
}

static short contrast(int bg)
{
    int rgb[3];
    index_rgb(bg, rgb);
    long lum = 299L * rgb[0] + 587L * rgb[1] + 114L * rgb[2]; /* 0 .. 255000 */
    return lum > 128000 ? 0 : 7;
}

static int is_highlight(int slot)
{
    return slot == THEME_STATUS || slot == THEME_STATUS_WARNING || slot == THEME_STATUS_ERROR ||
           slot == THEME_SELECTION || slot == THEME_SEARCH_HIT || slot == THEME_TITLE;
}

static const struct tstyle *effective(const struct theme *t, int slot)
{
    while (!t->set[slot] && slot_info[slot].parent >= 0)
        slot = slot_info[slot].parent;
    return &t->slot[slot];
}

void theme_resolve(const struct theme *t, int ncolors, int no_color, struct theme_style *out)
{
    int level = no_color || ncolors < 8 ? LEVEL_NONE
              : ncolors < 16           ? LEVEL_8
              : ncolors < 256          ? LEVEL_16
                                       : LEVEL_256;
    const struct tstyle *def = effective(t, THEME_DEFAULT);
    for (int s = 0; s < THEME_SLOT_COUNT; s++) {
        const struct tstyle *st = effective(t, s);
        /* "default" in a slot means the theme's default slot colour */
        const struct tcolor *fgc = st->fg.kind == COLOR_DEFAULT ? &def->fg : &st->fg;
        const struct tcolor *bgc = st->bg.kind == COLOR_DEFAULT ? &def->bg : &st->bg;
        if (st->bg.kind == COLOR_DEFAULT && slot_info[s].parent == THEME_CODE &&
            effective(t, THEME_CODE)->bg.kind != COLOR_DEFAULT)
            bgc = &effective(t, THEME_CODE)->bg; /* code tokens sit on the block's background */
        unsigned attrs = st->attrs;
        int fg = downgrade(fgc, level, 1, &attrs);
        int bg = downgrade(bgc, level, 0, &attrs);
        if (level == LEVEL_NONE) {
            if (bgc->kind != COLOR_DEFAULT && is_highlight(s) &&
                !(attrs & THEME_ATTR_REVERSE))
                attrs |= THEME_ATTR_REVERSE;
        } else if (bg >= 0) {
            /* did the downgrade move the background away from what the theme asked for? */
            int bg_moved = level != LEVEL_256 &&
                           !(bgc->kind == COLOR_INDEX && bgc->idx < (level == LEVEL_16 ? 16 : 8));
            if (fg == bg || (fg < 0 && bg_moved))
                fg = contrast(bg);
        }
        out[s].fg = (short)fg;
        out[s].bg = (short)bg;
        out[s].attrs = attrs;
    }
}
