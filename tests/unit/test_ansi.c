/* test_ansi.c - Markdown rendered with SGR escapes for scripted mode (text/ansi.c). */
#include "config.h"
#include "tap.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/ansi.h"

#include <stdlib.h>
#include <string.h>

static struct theme_style st256[THEME_SLOT_COUNT], stnone[THEME_SLOT_COUNT],
    stdumb[THEME_SLOT_COUNT];

/* The whole answer rendered at width, fed in pieces of `step` bytes (0: at once). */
static char *render(const char *text, int width, size_t step, const struct theme_style *st)
{
    struct ansi_md *r = ansi_md_new(st, width, THEME_ASSISTANT);
    struct buf out = BUF_INIT;
    size_t n = strlen(text);
    for (size_t at = 0; at < n;) {
        size_t k = step && step < n - at ? step : n - at;
        ansi_md_feed(r, text + at, k, &out);
        at += k;
    }
    ansi_md_finish(r, &out);
    ansi_md_free(r);
    buf_appends(&out, "");
    return buf_take(&out);
}

/* text without its escape sequences */
static char *strip(const char *s)
{
    struct buf b = BUF_INIT;
    while (*s) {
        if (s[0] == '\033' && s[1] == '[') {
            s += 2;
            while (*s && *s != 'm')
                s++;
            if (*s)
                s++;
            continue;
        }
        buf_appendc(&b, *s++);
    }
    buf_appends(&b, "");
    return buf_take(&b);
}

static const char doc[] =
    "# Title\n"
    "Some **bold** and *em* text with `code`.\n"
    "- one\n"
    "- two\n"
    "> quoted words\n"
    "\n"
    "```c\n"
    "int x;\n"
    "```\n"
    "---\n"
    "| a | b |\n"
    "|---|---|\n"
    "| 1 | 2 |\n"
    "tail without newline";

/* A fake environment for ansi_hyperlinks: "NAME=value" pairs. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = fake_env; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static int links_for(const char *setting, int tty, const char *const *env)
{
    fake_env = env;
    return ansi_hyperlinks(setting, tty, fake_getenv);
}

static void test_hyperlinks(void)
{
    static const char *const kitty[] = {"TERM=xterm-kitty", NULL};
    static const char *const vte[] = {"TERM=xterm-256color", "VTE_VERSION=7600", NULL};
    static const char *const old_vte[] = {"TERM=xterm-256color", "VTE_VERSION=4800", NULL};
    static const char *const iterm[] = {"TERM_PROGRAM=iTerm.app", NULL};
    static const char *const xterm[] = {"TERM=xterm-256color", NULL};
    static const char *const tmux[] = {"TERM=tmux-256color", "TERM_PROGRAM=tmux", NULL};
    static const char *const in_tmux[] = {"TERM=xterm-kitty", "TMUX=/tmp/t,1,0", NULL};
    TAP_OK(links_for("auto", 1, kitty) && links_for("auto", 1, vte) &&
               links_for(NULL, 1, iterm),
           "hyperlinks: auto on a terminal known to show them (kitty, VTE, iTerm2)");
    TAP_OK(!links_for("auto", 1, xterm) && !links_for("auto", 1, old_vte),
           "hyperlinks: auto off on a terminal not known to (xterm, an old VTE)");
    TAP_OK(!links_for("auto", 1, tmux) && !links_for("auto", 1, in_tmux),
           "hyperlinks: auto off inside tmux, whatever the terminal outside");
    TAP_OK(!links_for("auto", 0, kitty), "hyperlinks: auto off into a pipe");
    TAP_OK(links_for("always", 0, tmux) && !links_for("never", 1, kitty),
           "hyperlinks: always and never decide");

    const char *text = "see https://example.com/a_(b) and <http://x.org/y>, [text](https://t.co)\n"
                       "| u |\n|---|\n| https://in.table/z |\n";
    struct ansi_md *r = ansi_md_new(stnone, 80, THEME_ASSISTANT);
    struct buf out = BUF_INIT;
    ansi_md_hyperlinks(r, 1);
    ansi_md_feed(r, text, strlen(text), &out);
    ansi_md_finish(r, &out);
    const char *o = buf_str(&out);
    TAP_OK(strstr(o, "\033]8;;https://example.com/a_(b)\033\\") &&
               strstr(o, "\033]8;;http://x.org/y\033\\"),
           "hyperlinks: bare URLs and autolinks as OSC 8");
    TAP_OK(!strstr(o, "8;;https://t.co") && !strstr(o, "8;;https://in.table"),
           "hyperlinks: not for [text](url) nor inside a table");
    size_t opens = 0, closes = 0;
    for (const char *p = o; (p = strstr(p, "\033]8;;")); p++)
        if (p[5] == '\033')
            closes++;
        else
            opens++;
    TAP_OK(opens == 2 && closes == 2, "hyperlinks: each one closed (%zu / %zu)", opens, closes);
    buf_free(&out);
    ansi_md_free(r);
    char *plain = render(text, 80, 0, stnone);
    TAP_OK(!strstr(plain, "\033]8"), "hyperlinks: off by default");
    free(plain);
}

int main(void)
{
    struct theme *t = theme_default();
    ansi_styles(t, 256, 0, st256);
    ansi_styles(t, 256, 1, stnone);
    ansi_styles(t, ansi_colors("dumb", NULL), 0, stdumb);

    TAP_INT(ansi_colors("xterm-256color", NULL), 256, "xterm-256color: 256 colours");
    TAP_INT(ansi_colors("xterm", "truecolor"), 256, "COLORTERM=truecolor: 256 colours");
    TAP_INT(ansi_colors("xterm", NULL), 8, "xterm: 8 colours");
    TAP_INT(ansi_colors("dumb", NULL), 0, "dumb: none");
    TAP_INT(ansi_colors(NULL, NULL), 0, "no TERM: none");

    char *whole = render(doc, 40, 0, st256);
    char *plain = strip(whole);
    TAP_OK(strstr(whole, "\033[") != NULL, "escapes are written");
    TAP_OK(!strstr(plain, "**") && !strstr(plain, "`code`") && strstr(plain, "Some bold and em"),
           "markup is rendered, not shown");
    TAP_OK(strstr(plain, "\xE2\x80\xA2 one\n") != NULL, "list bullets");
    TAP_OK(strstr(plain, "\xE2\x94\x82 quoted words") != NULL, "quote bar");
    TAP_OK(strstr(plain, "\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80") != NULL, "a rule");
    TAP_OK(strstr(plain, "\xE2\x94\x82 1 \xE2\x94\x82 2 \xE2\x94\x82\n") != NULL, "a table");
    TAP_OK(strstr(plain, "tail without newline\n") != NULL, "the unfinished tail at the end");
    TAP_OK(strstr(whole, "\033[0;1") != NULL, "bold is SGR 1");
    TAP_OK(strstr(whole, "38;5;") != NULL, "256-colour foregrounds");
    /* every row ends with a reset when it set anything: no colour bleeds into the next */
    int bleed = 0;
    for (const char *p = whole; (p = strchr(p, '\n')) != NULL; p++) {
        const char *q = p;
        while (q > whole && q[-1] != '\n')
            q--;
        const char *esc = NULL;
        for (const char *x = q; x < p; x++)
            if (*x == '\033')
                esc = x;
        if (esc && strncmp(esc, "\033[0m", 4) != 0)
            bleed = 1;
    }
    TAP_OK(!bleed, "every styled row ends with SGR 0");

    /* the same output however the answer was split (a line is written once, whole) */
    int same = 1;
    for (size_t step = 1; step < 20; step++) {
        char *s = render(doc, 40, step, st256);
        if (strcmp(s, whole) != 0) {
            same = 0;
            printf("# step %zu differs:\n%s\n", step, s);
        }
        free(s);
    }
    TAP_OK(same, "split anywhere: the same bytes");

    /* streaming: a line is written when markdown finishes it, not before */
    {
        struct ansi_md *r = ansi_md_new(st256, 40, THEME_ASSISTANT);
        struct buf out = BUF_INIT;
        ansi_md_feed(r, "# Head\nsecond li", 16, &out);
        char *s = strip(buf_str(&out));
        TAP_STR(s, "# Head\n", "the finished line is written at once, the tail is held");
        free(s);
        buf_reset(&out);
        ansi_md_feed(r, "ne\n", 3, &out);
        s = strip(buf_str(&out));
        TAP_STR(s, "second line\n", "the next line when its newline comes");
        free(s);
        buf_reset(&out);
        ansi_md_finish(r, &out);
        TAP_INT(out.len, 0, "nothing left at the end");
        ansi_md_free(r);
        buf_free(&out);
    }

    /* wrapping at the width, continuation rows of a list hang under the text */
    {
        char *s = render("- alpha beta gamma delta epsilon\n", 16, 0, stnone);
        char *p = strip(s);
        TAP_STR(p, "\xE2\x80\xA2 alpha beta\n  gamma delta\n  epsilon\n", "wrapped at 16 columns");
        free(s);
        free(p);
    }

    /* NO_COLOR: attributes, no colours */
    {
        char *s = render(doc, 40, 0, stnone);
        TAP_OK(!strstr(s, "38;5;") && !strstr(s, "48;5;"),
               "NO_COLOR: no colour codes");
        TAP_OK(strstr(s, "\033[0;1m") != NULL, "NO_COLOR: bold stays");
        int colour = 0;
        for (const char *p = s; (p = strstr(p, "\033[")) != NULL; p += 2) {
            const char *m = strchr(p, 'm');
            for (const char *x = p; x && x < m; x++)
                if (x[0] == ';' && (x[1] == '3' || x[1] == '4' || x[1] == '9') && x[2] >= '0' &&
                    x[2] <= '9')
                    colour = 1;
        }
        TAP_OK(!colour, "NO_COLOR: no SGR colour parameter at all");
        free(s);
    }

    /* a dumb terminal: the rendered text without one escape */
    {
        char *s = render(doc, 40, 0, stdumb), *nc = render(doc, 40, 0, stnone);
        char *want = strip(nc); /* no background: no padding of code rows */
        TAP_OK(!strchr(s, '\033'), "TERM=dumb: no escapes");
        TAP_STR(s, want, "TERM=dumb: the same text");
        free(s);
        free(nc);
        free(want);
    }

    /* the model's escape sequences never reach the terminal */
    {
        char *s = render("evil \033]0;pwned\007 and \033[2J\n", 40, 0, st256);
        char *p = strip(s);
        TAP_OK(!strchr(p, '\033') && !strchr(p, '\007'), "the model's escapes are neutralised");
        free(s);
        free(p);
    }

    /* a line over ANSI_LONG_LINE is written as it comes, unstyled, then styling resumes */
    {
        size_t big = ANSI_LONG_LINE + 100;
        char *text = xmalloc(big + 32);
        memset(text, 'x', big);
        memcpy(text, "**", 2);
        strcpy(text + big, "\n**after**\n");
        struct ansi_md *r = ansi_md_new(st256, 40, THEME_ASSISTANT);
        struct buf out = BUF_INIT;
        ansi_md_feed(r, text, big - 10, &out);
        TAP_OK(out.len >= ANSI_LONG_LINE, "a long line is written before its end (%zu bytes)",
               out.len);
        ansi_md_feed(r, text + big - 10, strlen(text + big - 10), &out);
        ansi_md_finish(r, &out);
        char *p = strip(buf_str(&out));
        TAP_OK(strlen(p) == big + 7 && !strncmp(p, "**xxx", 5) && !strcmp(p + big, "\nafter\n"),
               "the long line raw, the next line styled");
        free(p);
        free(text);
        buf_free(&out);
        ansi_md_free(r);
    }

    test_hyperlinks();
    free(whole);
    free(plain);
    theme_free(t);
    return tap_done();
}
