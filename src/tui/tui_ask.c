/* tui_ask.c - a question that waits for one key: see tui_ask.h. */
#include "config.h"
#include "tui/tui_ask.h"
#include "tui/tui_app.h"
#include "tui/tui_draw.h"
#include "tui/tui_input.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

struct tui_ask {
    struct tui_ask_spec spec;  /* strings owned */
    char *body;
    int editing;
    int top;                   /* first body row shown when it is longer than the panel */
    int rows;                  /* body rows at the last draw */
};

static void tui_ask_spec_free(struct tui_ask *a)
{
    free((char *)a->spec.title);
    free((char *)a->spec.choices);
    free((char *)a->spec.keys);
    free(a->body);
    free(a);
}

void tui_ask_free(struct tui *t)
{
    if (t->ask)
        tui_ask_spec_free(t->ask);
    t->ask = NULL;
}

int tui_ask_active(const struct tui *t)
{
    return t->ask != NULL;
}

/* Close the question and give the answer. */
static void tui_ask_answer(struct tui *t, int key)
{
    struct tui_ask *a = t->ask;
    t->ask = NULL;
    t->dirty |= TUI_D_VIEW | TUI_D_INPUT | TUI_D_STATUS;
    if (a->editing)
        tui_input_clear();
    a->spec.done(t, a->spec.ud, key, a->body);
    tui_ask_spec_free(a);
}

void tui_ask_close(struct tui *t)
{
    if (t->ask)
        tui_ask_answer(t, 27);
}

void tui_ask_open(struct tui *t, const struct tui_ask_spec *spec)
{
    if (t->ask)
        tui_ask_answer(t, 27);
    struct tui_ask *a = xcalloc(1, sizeof *a);
    a->spec = *spec;
    a->spec.title = xstrdup(spec->title ? spec->title : "");
    a->spec.choices = xstrdup(spec->choices ? spec->choices : "");
    a->spec.keys = xstrdup(spec->keys ? spec->keys : "");
    a->spec.body = NULL;
    a->body = xstrdup(spec->body ? spec->body : "");
    t->ask = a;
    flushinp(); /* keys typed before the question showed do not answer it */
    t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
    t->urgent = 1;
}

/* Start editing: the body goes into the (cleared) input line. */
static void tui_ask_edit(struct tui *t)
{
    struct tui_ask *a = t->ask;
    a->editing = 1;
    tui_input_clear();
    tui_input_offer(a->body);
    tui_hint(t, "editing: Enter takes it, Esc keeps the old text");
    t->dirty |= TUI_D_INPUT | TUI_D_VIEW;
}

int tui_ask_key(struct tui *t, int c)
{
    struct tui_ask *a = t->ask;
    if (!a)
        return 0;
    if (c == KEY_RESIZE || c == 12 /* Ctrl-L */)
        return 0;
    if (a->editing) {
        if ((c >= KEY_F(1) && c <= KEY_F(12)) || c == 19 || c == KEY_MOUSE)
            return 1; /* no help, browser or search while a question is open */
        if (c != 27 && c != 3)
            return 0; /* readline's */
        a->editing = 0;
        tui_input_clear();
        tui_hint(t, "edit abandoned: the text is as it was");
        t->dirty |= TUI_D_INPUT | TUI_D_VIEW;
        return 1;
    }
    if (c == KEY_PPAGE || c == KEY_NPAGE) {
        int step = a->rows > 1 ? a->rows - 1 : 1;
        a->top += c == KEY_PPAGE ? -step : step;
        if (a->top < 0)
            a->top = 0;
        t->dirty |= TUI_D_VIEW;
        return 1;
    }
    if (c == 27 || c == 3 || c == 4) {
        tui_ask_answer(t, 27);
        return 1;
    }
    int k = c >= 0 && c < 128 ? tolower(c) : 0;
    if (k && a->spec.edit_key && k == a->spec.edit_key) {
        tui_ask_edit(t);
        return 1;
    }
    if (k && strchr(a->spec.keys, k)) {
        tui_ask_answer(t, k);
        return 1;
    }
    return 1; /* any other key (Enter too): nothing, the question stays */
}

int tui_ask_line(struct tui *t, char *line)
{
    struct tui_ask *a = t->ask;
    if (!a || !a->editing)
        return 0;
    if (!line) { /* Ctrl-D on an empty line: back to the question */
        a->editing = 0;
        t->dirty |= TUI_D_INPUT | TUI_D_VIEW;
        return 1;
    }
    struct buf err = BUF_INIT;
    char *fixed = NULL;
    int ok = a->spec.check ? a->spec.check(a->spec.ud, line, &fixed, &err) == 0
                           : line[strspn(line, " \t\n")] != '\0';
    if (!ok) {
        if (!a->spec.check)
            buf_appends(&err, "the text is empty");
        tui_input_offer(line); /* to be fixed */
        char *m = xasprintf("not taken: %s", buf_str(&err));
        tui_hint(t, m);
        free(m);
    } else {
        free(a->body);
        a->body = fixed ? fixed : xstrdup(line);
        a->editing = 0;
        a->top = 0;
    }
    buf_free(&err);
    free(line);
    t->dirty |= TUI_D_INPUT | TUI_D_VIEW;
    return 1;
}

/* The body as display rows of at most width columns: [starts[i], starts[i] + lens[i]). */
static size_t tui_ask_rows(const char *s, int width, size_t **starts, size_t **lens)
{
    size_t n = 0, cap = 0, len = strlen(s);
    *starts = NULL;
    *lens = NULL;
    for (size_t pos = 0;;) {
        size_t end = pos, row_end = pos;
        int col = 0;
        while (end < len && s[end] != '\n') {
            uint32_t cp;
            size_t k = utf8_decode(s + end, len - end, &cp);
            int w = tui_draw_width(s + end, k);
            if (col + w > width && col > 0)
                break;
            col += w;
            end += k;
            row_end = end;
        }
        if (n + 1 > cap) {
            cap = cap ? cap * 2 : 16;
            *starts = xrealloc(*starts, cap * sizeof **starts);
            *lens = xrealloc(*lens, cap * sizeof **lens);
        }
        (*starts)[n] = pos;
        (*lens)[n++] = row_end - pos;
        if (row_end >= len)
            break;
        pos = s[row_end] == '\n' ? row_end + 1 : row_end;
        if (pos >= len && s[row_end] == '\n')
            break;
    }
    return n;
}

int tui_ask_draw(struct tui *t, int *cy, int *cx)
{
    struct tui_ask *a = t->ask;
    if (!a || t->view_h < 2)
        return 0;
    static struct tui_row row;
    int width = t->cols > 4 ? t->cols - 4 : 1;
    size_t *starts, *lens;
    size_t n = tui_ask_rows(a->body, width, &starts, &lens);
    int room = t->view_h * 2 / 3 - 2; /* the panel keeps a third of the transcript */
    if (room < 1)
        room = 1;
    int shown = (int)n < room ? (int)n : room;
    a->rows = shown;
    if (a->top > (int)n - shown)
        a->top = (int)n - shown;
    int y = t->view_h - shown - 2;
    if (y < 0)
        y = 0;
    /* the title row, the body, a closing rule */
    tui_row_begin(&row, t->cols);
    tui_row_put(&row, "\xE2\x94\x8C ", 4, THEME_META, THEME_ATTR_BOLD);
    tui_row_put_raw(&row, a->spec.title, strlen(a->spec.title), THEME_META, THEME_ATTR_BOLD);
    tui_row_blit(&row, t->wview, y++, THEME_META);
    for (int i = 0; i < shown && y < t->view_h - 1; i++, y++) {
        size_t r = (size_t)(a->top + i);
        tui_row_begin(&row, t->cols);
        tui_row_put(&row, "\xE2\x94\x82 ", 4, THEME_META, 0);
        tui_row_put_raw(&row, a->body + starts[r], lens[r], THEME_INPUT, 0);
        tui_row_blit(&row, t->wview, y, THEME_INPUT);
    }
    tui_row_begin(&row, t->cols);
    char more[96] = "";
    if ((int)n > shown)
        snprintf(more, sizeof more, " lines %d-%d of %zu (PgUp/PgDn)", a->top + 1,
                 a->top + shown, n);
    tui_row_put(&row, "\xE2\x94\x94\xE2\x94\x80", 6, THEME_META, 0);
    tui_row_put(&row, more, strlen(more), THEME_META, 0);
    tui_row_blit(&row, t->wview, y, THEME_META);
    free(starts);
    free(lens);
    wnoutrefresh(t->wview);
    if (a->editing)
        return 0;
    tui_row_begin(&row, t->cols);
    tui_row_put(&row, "? ", 2, THEME_PROMPT, THEME_ATTR_BOLD);
    tui_row_put_raw(&row, a->spec.choices, strlen(a->spec.choices), THEME_PROMPT,
                    THEME_ATTR_BOLD);
    *cx = row.col < t->cols ? row.col : t->cols - 1;
    *cy = 0;
    tui_row_blit(&row, t->winput, 0, THEME_INPUT);
    for (int yy = 1; yy < t->input_h; yy++) {
        tui_row_begin(&row, t->cols);
        tui_row_blit(&row, t->winput, yy, THEME_INPUT);
    }
    return 1;
}
