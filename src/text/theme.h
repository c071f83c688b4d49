/* theme.h - themes: semantic style slots, themes/NAME.theme files, colour downgrading.
 *
 * No curses here: a theme resolves to plain (fg, bg, attribute bits) per slot, and the curses
 * layer turns those into colour pairs and A_* attributes.
 *
 * File format (INI, UTF-8, one setting per line; `#` or `;` starts a comment line):
 *
 *     [theme]
 *     name = dark
 *     description = light text on a dark terminal       (optional)
 *     heading     = #5fafff default bold
 *     code        = 252 236
 *     status      = black cyan
 *
 * A slot line is `slot = FG [BG] [ATTR...]`. FG and BG are colour names (default, black, red,
 * green, yellow, blue, magenta, cyan, white, bright-black (alias gray/grey), bright-red, ...,
 * bright-white), 256-colour indices 0..255 or `#rrggbb`. ATTRs (separated by spaces or commas)
 * are bold, dim, italic, underline, reverse, or `none`. A slot that a file does not set takes the
 * value of its parent slot (see theme_slot_parent()); `default` falls back to the terminal's own
 * colours. The code-* slots (code-label and the token slots of highlighted code) are drawn on
 * the code block's background: their BG `default` (or none given) means the `code` slot's
 * background. Unknown slots produce a warning; anything else malformed is an error. */
#ifndef TT_THEME_H
#define TT_THEME_H
#include <stddef.h>
#include <stdint.h>

/* Style slots, shared by markdown (which tags text with them), the curses layer and themes.
 * The INI name of each slot is in quotes. */
enum theme_slot {
    THEME_DEFAULT,        /* "default": window background; text that has no other slot */
    THEME_USER,           /* "user": the user's own messages */
    THEME_ASSISTANT,      /* "assistant": plain answer text */
    THEME_REASONING,      /* "reasoning": reasoning / thinking text of a model */
    THEME_SYSTEM,         /* "system": system prompt and local notices in the transcript */
    THEME_META,           /* "meta": message headers (role, model, time, token counts) */
    THEME_CODE,           /* "code": inline code and the contents of code blocks */
    THEME_CODE_LABEL,     /* "code-label": the language label line of a fenced code block */
    THEME_CODE_KEYWORD,   /* "code-keyword": keywords in a highlighted code block */
    THEME_CODE_TYPE,      /* "code-type": type names, keys of JSON/YAML/TOML, attributes */
    THEME_CODE_STRING,    /* "code-string": string and character literals */
    THEME_CODE_COMMENT,   /* "code-comment": comments */
    THEME_CODE_NUMBER,    /* "code-number": numbers and constants (true, None, NULL) */
    THEME_CODE_FUNCTION,  /* "code-function": names of functions defined or called, builtins */
    THEME_CODE_PREPROC,   /* "code-preproc": #include, decorators, macros, $variables, @@ */
    THEME_CODE_ADDED,     /* "code-added": + lines of a diff */
    THEME_CODE_REMOVED,   /* "code-removed": - lines of a diff */
    THEME_QUOTE,          /* "quote": block quote text and its bar */
    THEME_HEADING,        /* "heading": markdown heading text */
    THEME_BOLD,           /* "bold": **strong** text */
    THEME_ITALIC,         /* "italic": *emphasised* text */
    THEME_BOLD_ITALIC,    /* "bold-italic": ***both*** */
    THEME_LINK,           /* "link": link text, autolinks and bare URLs */
    THEME_LIST_MARKER,    /* "list-marker": bullets and item numbers */
    THEME_RULE,           /* "rule": horizontal rules */
    THEME_TABLE_BORDER,   /* "table-border": the lines drawn around table cells */
    THEME_DIM,            /* "dim": visible markup kept for orientation (heading #, link URL) */
    THEME_STATUS,         /* "status": the status bar */
    THEME_STATUS_WARNING, /* "status-warning": status bar while rate-limited, retrying, ... */
    THEME_STATUS_ERROR,   /* "status-error": status bar after a failed request */
    THEME_ERROR,          /* "error": error messages in the transcript */
    THEME_SELECTION,      /* "selection": the selected message or text */
    THEME_SEARCH_HIT,     /* "search-hit": matches of a search */
    THEME_BORDER,         /* "border": separators between windows */
    THEME_TITLE,          /* "title": the title bar (conversation name, model) */
    THEME_PROMPT,         /* "prompt": the input prompt */
    THEME_INPUT,          /* "input": text being typed */
    THEME_SLOT_COUNT
};

/* Attribute bits of a style (the curses layer maps them to A_BOLD, A_DIM, ...). */
#define THEME_ATTR_BOLD 0x01u
#define THEME_ATTR_DIM 0x02u
#define THEME_ATTR_ITALIC 0x04u
#define THEME_ATTR_UNDERLINE 0x08u
#define THEME_ATTR_REVERSE 0x10u
#define THEME_ATTR_STRIKE 0x20u /* struck through: curses has no attribute for it, so the chat
                                 * lays U+0336 over each cell; SGR 9 where escapes are written */

/* A styled run of bytes: [off, off + len) of some text is drawn with `slot`, plus the extra
 * attribute bits in `attrs` (OR them onto the slot's own attributes). */
struct theme_span {
    uint32_t off;
    uint32_t len;
    uint16_t slot;  /* enum theme_slot */
    uint16_t attrs; /* THEME_ATTR_* */
};

/* A resolved style for a terminal: colour indices valid for its colour count, -1 = the
 * terminal's default colour. */
struct theme_style {
    short fg;
    short bg;
    unsigned attrs; /* THEME_ATTR_* */
};

struct theme;

/* INI name of a slot ("code-label"), or NULL when out of range. */
const char *theme_slot_name(int slot);

/* Slot for an INI name, or -1 when unknown. */
int theme_slot_from_name(const char *name);

/* The slot whose value an unset slot inherits, or -1 for THEME_DEFAULT. */
int theme_slot_parent(int slot);

/* Parse theme text. `file` names it in messages. Returns a new theme (free with theme_free),
 * or NULL with *err = "file:line: what was wrong" (caller frees). When warn is not NULL,
 * *warn gets the warnings (unknown slot, unknown section), one per line, or NULL when there
 * are none (caller frees). */
struct theme *theme_parse(const char *text, size_t len, const char *file, char **err,
                          char **warn);

/* Read and parse a theme file; like theme_parse (a read failure is an error "file: reason"). */
struct theme *theme_load(const char *path, char **err, char **warn);

/* A new copy of the compiled-in theme "default" (the same colours as themes/dark.theme). */
struct theme *theme_default(void);

/* Path of the file theme `name` would load from, or NULL (caller frees). Looks in
 * $XDG_CONFIG_HOME/tokterm/themes (or ~/.config/tokterm/themes), then $TOKTERM_DATADIR/themes
 * when set, otherwise the installed TT_DATADIR/themes, then the source tree's themes/. */
char *theme_path(const char *name);

/* Load theme `name` (see theme_path). Never returns NULL: when the theme is missing or
 * malformed, *err explains why (caller frees) and the compiled-in default is returned.
 * "default" without a file of that name is the compiled-in theme. Warnings as theme_parse. */
struct theme *theme_find(const char *name, char **err, char **warn);

/* The theme's `name` (never NULL). */
const char *theme_name(const struct theme *t);

/* 1 when the theme file set `slot` explicitly, 0 when it is inherited. */
int theme_has_slot(const struct theme *t, int slot);

/* Resolve every slot for a terminal with `ncolors` colours (COLORS from curses) into
 * out[THEME_SLOT_COUNT]. A slot colour `default` means the theme's `default` slot colour
 * (itself the terminal's colour unless the theme sets one). Then, deterministically:
 *   >= 256 colours: 256-colour indices; #rrggbb -> nearest entry of the xterm 6x6x6 cube or
 *                   grey ramp (16..255; 0..15 are avoided because terminals redefine them).
 *   16..255:        indices 0..15; any other colour -> nearest of xterm's 16 default RGBs.
 *   8..15:          indices 0..7, via the 16-colour result: a bright foreground becomes its
 *                   base colour + BOLD, a bright background its base colour; bright black
 *                   (grey) as foreground becomes the default colour + DIM, as background white.
 *   < 8, or no_color (pass 1 when NO_COLOR is set and non-empty): no colours at all, only
 *                   attributes; the bar and highlight slots (status*, title, selection,
 *                   search-hit) that had a background gain REVERSE so they stay visible.
 * Readability: after a downgrade, a foreground equal to its background, or a default
 * foreground over a background the downgrade changed, becomes black (0) or white (7),
 * whichever contrasts with the background. */
void theme_resolve(const struct theme *t, int ncolors, int no_color, struct theme_style *out);

void theme_free(struct theme *t);

#endif
