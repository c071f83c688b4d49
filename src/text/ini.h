/* ini.h - the one reader of INI text, for the config file (core/conf.c) and the themes
 * (text/theme.c).
 *
 * A UTF-8 byte order mark at the start of the text is skipped. A line is '\n'-terminated (a
 * '\r' before it is blank space); blank lines and lines whose first non-blank character is '#'
 * or ';' are skipped. Every other line is a section header
 * "[name]" (nothing but blanks after the ']'), or "key = value" split at the first '=' (the
 * value may hold '=', '#', ';' and quotes: nothing is removed from it but the blanks around
 * it, and with INI_INLINE_COMMENTS a comment after it). Blanks are space, tab, CR. Nothing is a continuation line and there is no length limit
 * beyond the text's own: the callers cap the size of what they read.
 *
 * The reader works in place: the strings it hands out are pieces of the text, cut with '\0',
 * and stay valid as long as the text does; the callback may change them (unquote, lower-case).
 * It allocates nothing. What a section, a key or a value means, and how a message reads, is
 * the caller's: a malformed line is handed to the callback as an INI_ERROR with its kind. */
#ifndef TT_INI_H
#define TT_INI_H
#include <stddef.h>

enum ini_type { INI_SECTION, INI_PAIR, INI_ERROR };

enum ini_error {
    INI_ERR_NONE,
    INI_ERR_NUL,       /* the line holds a NUL byte */
    INI_ERR_UTF8,      /* INI_TEXT_ONLY: the line is not valid UTF-8 */
    INI_ERR_CONTROL,   /* INI_TEXT_ONLY: a control character other than tab and CR (in byte) */
    INI_ERR_SECTION,   /* '[' without a ']', or something after the ']' */
    INI_ERR_NO_EQUALS, /* neither a section header nor key = value */
};

struct ini_line {
    enum ini_type type;
    int lineno;          /* 1 for the first line */
    char *section;       /* INI_SECTION: the name between the brackets, blanks trimmed (may be
                            ""); INI_PAIR: the current section's name, NULL before the first */
    char *key, *value;   /* INI_PAIR: blanks trimmed; the key may be "" ("= value") */
    enum ini_error error;  /* INI_ERROR */
    char *text;          /* INI_ERROR: the line, blanks trimmed (for NUL: up to the NUL) */
    unsigned char byte;  /* INI_ERR_CONTROL: the control character */
};

/* Check each line before anything else (also comments): invalid UTF-8 and control characters
 * other than tab and CR are INI_ERRORs. Without it only a NUL byte is. */
#define INI_TEXT_ONLY 1u
/* A '#' or ';' after a blank in a value starts a comment ("model = m   # the default"), as
 * the docs' examples write them, and after a section header; a value that must hold one is
 * quoted ("say ; then #"), and the comment may follow the closing quote. Shell commands and
 * JSON are kept whole (ini_whole_value). Not for themes, whose colours are "#rrggbb". */
#define INI_INLINE_COMMENTS 2u

/* Called for each section header, pair and malformed line, in order; return 0 to go on, any
 * other value to stop. */
typedef int (*ini_handler)(void *ud, struct ini_line *l);

/* Read len bytes of text, which must be followed by one more writable byte (a '\0': what
 * util_read_file and xstrndup give). Calls fn for each line that is not blank or a comment;
 * reading ends at an INI_ERROR line or when fn returns non-zero. Returns what fn returned to
 * stop, -1 after an INI_ERROR line the callback let pass, else 0. *lines (when lines != NULL)
 * is the number of lines read (the last one counted even without a '\n'). */
int ini_parse(char *text, size_t len, unsigned flags, ini_handler fn, void *ud, int *lines);

/* INI_INLINE_COMMENTS' cut, for readers of other "key: value" text (a role's front matter):
 * the comment off a trimmed value v, in place, from a '#' or ';' that follows a blank, or in
 * a value that starts with a quote, one that follows the closing quote (and blanks). */
void ini_cut_comment(char *v);
/* 1 for a key whose value INI_INLINE_COMMENTS keeps whole: a shell command (NAME_cmd) and
 * JSON (extra_body). */
int ini_whole_value(const char *key);
/* A value in a pair of '"' or '\'': the quotes taken off, in place. */
void ini_unquote(char *v);

#endif
