/* ini.c - the INI reader shared by the config file and the themes (see ini.h). */
#include "config.h"
#include "text/ini.h"

#include "base/utf8.h"
#include "base/util.h"

#include <limits.h>
#include <string.h>

/* What is wrong with the bytes of line [p, p + n) before its syntax is looked at. */
static enum ini_error ini_check_bytes(const char *p, size_t n, unsigned flags,
                                      unsigned char *byte)
{
    if (memchr(p, '\0', n))
        return INI_ERR_NUL;
    if (!(flags & INI_TEXT_ONLY))
        return INI_ERR_NONE;
    if (!utf8_valid(p, n))
        return INI_ERR_UTF8;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 && c != '\t' && c != '\r') {
            *byte = c;
            return INI_ERR_CONTROL;
        }
    }
    return INI_ERR_NONE;
}

void ini_cut_comment(char *v)
{
    if (!*v) /* "key =": nothing to cut (the scan below starts past the first byte) */
        return;
    if (*v == '"' || *v == '\'') {
        char *close = strchr(v + 1, *v);
        if (!close)
            return;
        char *p = close + 1;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '#' || *p == ';')
            close[1] = '\0';
        return;
    }
    for (char *p = v + 1; *p; p++)
        if ((*p == '#' || *p == ';') && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            util_trim(v); /* the blanks before it (v does not move: it starts with no blank) */
            return;
        }
}

/* Keys whose values are kept whole, '#' and ';' and all: a command for the shell (`api_key_cmd
 * = cd ~/keys ; cat openai`: the shell reads its own comments) and JSON (`extra_body`). */
int ini_whole_value(const char *key)
{
    size_t n = strlen(key);
    return (n >= 4 && strcmp(key + n - 4, "_cmd") == 0) || strcmp(key, "extra_body") == 0;
}

/* Fill l from one trimmed line s that is neither blank nor a comment. */
static void ini_classify(char *s, char **section, struct ini_line *l, unsigned flags)
{
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (close && close[1] && (flags & INI_INLINE_COMMENTS)) { /* "[name]   # comment" */
            char *after = close + 1;
            while (*after == ' ' || *after == '\t')
                after++;
            if ((*after == '#' || *after == ';') && after > close + 1)
                close[1] = '\0';
        }
        if (!close || close[1] != '\0') { /* s is trimmed: nothing but blanks may follow */
            l->type = INI_ERROR;
            l->error = INI_ERR_SECTION;
            l->text = s;
            return;
        }
        *close = '\0';
        l->type = INI_SECTION;
        l->section = *section = util_trim(s + 1);
        return;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
        l->type = INI_ERROR;
        l->error = INI_ERR_NO_EQUALS;
        l->text = s;
        return;
    }
    *eq = '\0';
    l->type = INI_PAIR;
    l->section = *section;
    l->key = util_trim(s);
    l->value = util_trim(eq + 1);
    if ((flags & INI_INLINE_COMMENTS) && !ini_whole_value(l->key))
        ini_cut_comment(l->value);
}

void ini_unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && ((v[0] == '"' && v[n - 1] == '"') || (v[0] == '\'' && v[n - 1] == '\''))) {
        memmove(v, v + 1, n - 2);
        v[n - 2] = '\0';
    }
}

int ini_parse(char *text, size_t len, unsigned flags, ini_handler fn, void *ud, int *lines)
{
    char *section = NULL;
    int lineno = 0, rc = 0;
    /* A UTF-8 byte order mark (some Windows editors write one) is not part of the first line. */
    size_t pos = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    while (pos < len && rc == 0) {
        char *line = text + pos;
        char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos = nl ? pos + n + 1 : len;
        if (lineno < INT_MAX)
            lineno++;
        struct ini_line l;
        memset(&l, 0, sizeof l);
        l.lineno = lineno;
        l.error = ini_check_bytes(line, n, flags, &l.byte);
        line[n] = '\0'; /* the '\n', or the byte after the text */
        if (l.error != INI_ERR_NONE) {
            l.type = INI_ERROR;
            l.text = util_trim(line); /* for a NUL: the part before it */
        } else {
            char *s = util_trim(line);
            if (*s == '\0' || *s == '#' || *s == ';')
                continue;
            ini_classify(s, &section, &l, flags);
        }
        rc = fn(ud, &l);
        if (l.type == INI_ERROR && rc == 0)
            rc = -1;
    }
    if (lines)
        *lines = lineno;
    return rc;
}
