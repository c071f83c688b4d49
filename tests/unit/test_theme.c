/* test_theme.c - shipped themes, colour downgrading, NO_COLOR, malformed files, lookup. */
#include "config.h"
#include "tap.h"
#include "text/theme.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <limits.h>
#include <stdlib.h>

static const char *const shipped[] = {"dark", "light", "solarized-dark", "mono"};

static char *theme_file(const char *name)
{
    return xasprintf("%s/../themes/%s.theme", tap_srcdir(), name);
}

static struct theme *parse_str(const char *text)
{
    char *err = NULL, *warn = NULL;
    struct theme *t = theme_parse(text, strlen(text), "inline", &err, &warn);
    if (!t)
        printf("# parse error: %s\n", err);
    free(err);
    free(warn);
    return t;
}

/* Every resolved colour is valid for the colour count and no slot is fg-on-same-bg. */
static int readable(const struct theme_style *st, int ncolors, int no_color, char *why,
                    size_t whylen)
{
    int max = no_color || ncolors < 8 ? 0 : ncolors >= 256 ? 256 : ncolors >= 16 ? 16 : 8;
    for (int s = 0; s < THEME_SLOT_COUNT; s++) {
        if (st[s].fg < -1 || st[s].fg >= max || st[s].bg < -1 || st[s].bg >= max) {
            if (!(max == 0 && st[s].fg == -1 && st[s].bg == -1)) {
                snprintf(why, whylen, "%s: colour out of range (%d, %d)", theme_slot_name(s),
                         st[s].fg, st[s].bg);
                return 0;
            }
        }
        if (st[s].fg >= 0 && st[s].fg == st[s].bg) {
            snprintf(why, whylen, "%s: fg == bg == %d", theme_slot_name(s), st[s].fg);
            return 0;
        }
    }
    return 1;
}

static void test_slots(void)
{
    int ok = 1;
    for (int s = 0; s < THEME_SLOT_COUNT; s++)
        ok &= theme_slot_from_name(theme_slot_name(s)) == s;
    TAP_OK(ok, "every slot name maps back to its slot");
    TAP_INT(theme_slot_from_name("nope"), -1, "unknown slot name");
    TAP_STR(theme_slot_name(THEME_CODE_LABEL), "code-label", "slot name uses hyphens");
    TAP_OK(theme_slot_name(THEME_SLOT_COUNT) == NULL, "out-of-range slot has no name");
    int rooted = 1;
    for (int s = 0; s < THEME_SLOT_COUNT; s++) {
        int p = s, steps = 0;
        while (p >= 0 && steps++ < THEME_SLOT_COUNT)
            p = theme_slot_parent(p);
        rooted &= p == -1;
    }
    TAP_OK(rooted, "every slot's parent chain ends at default (no cycles)");
}

static void test_shipped(void)
{
    int levels[] = {256, 16, 8, 2};
    for (size_t i = 0; i < TT_ARRAY_LEN(shipped); i++) {
        char *path = theme_file(shipped[i]);
        char *err = NULL, *warn = NULL;
        struct theme *t = theme_load(path, &err, &warn);
        TAP_OK(t != NULL, "%s parses", shipped[i]);
        if (!t) {
            printf("# %s\n", err);
            free(err);
            free(path);
            continue;
        }
        TAP_OK(warn == NULL, "%s has no warnings", shipped[i]);
        TAP_STR(theme_name(t), shipped[i], "theme name matches the file");
        int all = 1;
        for (int s = 0; s < THEME_SLOT_COUNT; s++)
            all &= theme_has_slot(t, s);
        TAP_OK(all, "%s sets every slot", shipped[i]);
        for (size_t l = 0; l < TT_ARRAY_LEN(levels); l++) {
            struct theme_style st[THEME_SLOT_COUNT];
            char why[128] = "";
            theme_resolve(t, levels[l], 0, st);
            TAP_OK(readable(st, levels[l], 0, why, sizeof(why)), "%s readable at %d colours %s",
                   shipped[i], levels[l], why);
        }
        struct theme_style st[THEME_SLOT_COUNT];
        theme_resolve(t, 256, 1, st);
        int none = 1;
        for (int s = 0; s < THEME_SLOT_COUNT; s++)
            none &= st[s].fg == -1 && st[s].bg == -1;
        TAP_OK(none, "%s with NO_COLOR has no colours", shipped[i]);
        TAP_OK(st[THEME_HEADING].attrs & THEME_ATTR_BOLD, "%s NO_COLOR keeps heading bold",
               shipped[i]);
        TAP_OK(st[THEME_STATUS].attrs & THEME_ATTR_REVERSE,
               "%s NO_COLOR: status bar still visible (reverse)", shipped[i]);
        TAP_OK(st[THEME_SELECTION].attrs & THEME_ATTR_REVERSE,
               "%s NO_COLOR: selection still visible (reverse)", shipped[i]);
        theme_free(t);
        free(warn);
        free(path);
    }

    /* mono uses attributes only, whatever the terminal */
    char *path = theme_file("mono"), *err = NULL;
    struct theme *mono = theme_load(path, &err, NULL);
    struct theme_style st[THEME_SLOT_COUNT];
    theme_resolve(mono, 256, 0, st);
    int none = 1, distinct = 0;
    for (int s = 0; s < THEME_SLOT_COUNT; s++) {
        none &= st[s].fg == -1 && st[s].bg == -1;
        distinct += st[s].attrs != 0;
    }
    TAP_OK(none, "mono: no colour at 256 colours");
    TAP_OK(distinct >= 20, "mono: most slots carry attributes (%d)", distinct);
    TAP_INT(st[THEME_STATUS].attrs, THEME_ATTR_REVERSE, "mono: status is reverse");
    theme_free(mono);
    free(path);

    /* the compiled-in default equals themes/dark.theme */
    path = theme_file("dark");
    struct theme *dark = theme_load(path, &err, NULL), *def = theme_default();
    int same = dark != NULL;
    for (size_t l = 0; same && l < TT_ARRAY_LEN(levels); l++) {
        struct theme_style a[THEME_SLOT_COUNT], b[THEME_SLOT_COUNT];
        theme_resolve(dark, levels[l], 0, a);
        theme_resolve(def, levels[l], 0, b);
        same = memcmp(a, b, sizeof(a)) == 0;
    }
    TAP_OK(same, "built-in default resolves like dark.theme at 256/16/8/2 colours");
    TAP_STR(theme_name(def), "default", "built-in theme is called default");
    theme_free(dark);
    theme_free(def);
    free(path);
}

static void test_downgrade(void)
{
    struct theme *t = parse_str("[theme]\n"
                                "user = #ff0000\n"
                                "code = 223 236\n"
                                "dim = 243\n"
                                "selection = 231 239\n"
                                "link = #5fafff default underline\n"
                                "meta = #808080\n"
                                "error = #000000 #ffff00\n"
                                "status = black cyan\n"
                                "prompt = bright-green\n");
    struct theme_style s256[THEME_SLOT_COUNT], s16[THEME_SLOT_COUNT], s8[THEME_SLOT_COUNT];
    theme_resolve(t, 256, 0, s256);
    theme_resolve(t, 16, 0, s16);
    theme_resolve(t, 8, 0, s8);

    TAP_INT(s256[THEME_USER].fg, 196, "#ff0000 -> 196 at 256 colours");
    TAP_INT(s16[THEME_USER].fg, 9, "#ff0000 -> bright red (9) at 16");
    TAP_INT(s8[THEME_USER].fg, 1, "#ff0000 -> red (1) at 8");
    TAP_OK(s8[THEME_USER].attrs & THEME_ATTR_BOLD, "bright colour at 8 becomes bold");
    TAP_INT(s256[THEME_LINK].fg, 75, "#5fafff -> 75 (exact cube colour)");
    TAP_INT(s256[THEME_LINK].attrs, THEME_ATTR_UNDERLINE, "attributes kept");
    TAP_INT(s256[THEME_META].fg, 244, "#808080 -> grey ramp 244");
    TAP_INT(s256[THEME_ERROR].fg, 16, "#000000 -> 16");
    TAP_INT(s256[THEME_ERROR].bg, 226, "#ffff00 -> 226");
    TAP_INT(s256[THEME_CODE].fg, 223, "index kept at 256");
    TAP_INT(s256[THEME_CODE].bg, 236, "bg index kept at 256");
    TAP_INT(s16[THEME_CODE].fg, 7, "223 -> white (7) at 16");
    TAP_INT(s16[THEME_CODE].bg, 0, "236 -> black (0) at 16");
    TAP_INT(s8[THEME_CODE].fg, 7, "223 -> white at 8");
    TAP_INT(s8[THEME_CODE].bg, 0, "236 -> black at 8");
    TAP_INT(s16[THEME_DIM].fg, 8, "243 -> bright black at 16");
    TAP_INT(s8[THEME_DIM].fg, -1, "bright black fg at 8 -> default colour");
    TAP_OK(s8[THEME_DIM].attrs & THEME_ATTR_DIM, "... with the dim attribute");
    TAP_INT(s16[THEME_SELECTION].fg, 15, "231 -> bright white at 16");
    TAP_INT(s16[THEME_SELECTION].bg, 8, "239 -> bright black at 16");
    TAP_INT(s8[THEME_SELECTION].bg, 7, "bright black bg at 8 -> white");
    TAP_INT(s8[THEME_SELECTION].fg, 0, "white on white at 8 -> black on white (contrast)");
    TAP_INT(s16[THEME_STATUS].fg, 0, "named colours stay: black");
    TAP_INT(s16[THEME_STATUS].bg, 6, "named colours stay: cyan");
    TAP_INT(s8[THEME_PROMPT].fg, 2, "bright-green at 8 -> green");
    TAP_OK(s8[THEME_PROMPT].attrs & THEME_ATTR_BOLD, "bright-green at 8 -> bold");
    TAP_INT(s16[THEME_ERROR].fg, 0, "#000000 at 16 -> black");
    TAP_INT(s16[THEME_ERROR].bg, 11, "#ffff00 at 16 -> bright yellow");
    TAP_INT(s8[THEME_ERROR].bg, 3, "#ffff00 at 8 -> yellow");

    /* deterministic: the same input gives the same output */
    struct theme_style again[THEME_SLOT_COUNT];
    theme_resolve(t, 16, 0, again);
    TAP_OK(memcmp(again, s16, sizeof(again)) == 0, "downgrade is deterministic");

    /* inheritance: an unset slot takes its parent's style */
    TAP_OK(s256[THEME_STATUS_WARNING].fg == s256[THEME_STATUS].fg &&
               s256[THEME_STATUS_WARNING].bg == s256[THEME_STATUS].bg,
           "unset status-warning inherits status");
    TAP_OK(s256[THEME_SEARCH_HIT].bg == s256[THEME_SELECTION].bg,
           "unset search-hit inherits selection");
    TAP_OK(!theme_has_slot(t, THEME_STATUS_WARNING) && theme_has_slot(t, THEME_STATUS),
           "theme_has_slot tells set from inherited");
    theme_free(t);

    /* "default" in a slot is the theme's default colour; default fg over a moved bg */
    t = parse_str("[theme]\ndefault = 252 234\nuser = 117\nselection = default 253\n");
    theme_resolve(t, 256, 0, s256);
    theme_resolve(t, 16, 0, s16);
    TAP_INT(s256[THEME_USER].bg, 234, "slot bg 'default' = the theme's default bg");
    TAP_INT(s256[THEME_ASSISTANT].fg, 252, "unset slot inherits the default slot");
    TAP_INT(s16[THEME_SELECTION].bg, 7, "253 -> white at 16");
    TAP_INT(s16[THEME_SELECTION].fg, 0, "fg over a downgraded light bg becomes black");
    theme_free(t);

    /* a plain default-on-moved-background gets a contrasting colour */
    t = parse_str("[theme]\ncode = default 236\n");
    theme_resolve(t, 16, 0, s16);
    theme_resolve(t, 256, 0, s256);
    TAP_INT(s256[THEME_CODE].fg, -1, "256: default fg stays default");
    TAP_INT(s16[THEME_CODE].fg, 7, "16: default fg over a downgraded dark bg becomes white");
    theme_free(t);
}

static void test_no_color(void)
{
    char *path = theme_file("dark"), *err = NULL;
    struct theme *t = theme_load(path, &err, NULL);
    struct theme_style a[THEME_SLOT_COUNT], b[THEME_SLOT_COUNT];
    theme_resolve(t, 256, 1, a);
    theme_resolve(t, 2, 0, b);
    TAP_OK(memcmp(a, b, sizeof(a)) == 0, "NO_COLOR equals a 2-colour terminal");
    TAP_INT(a[THEME_CODE].fg, -1, "NO_COLOR: no foreground");
    TAP_INT(a[THEME_CODE].bg, -1, "NO_COLOR: no background");
    TAP_INT(a[THEME_CODE].attrs, 0, "NO_COLOR: code block gets no reverse video");
    TAP_INT(a[THEME_LINK].attrs, THEME_ATTR_UNDERLINE, "NO_COLOR: link keeps underline");
    TAP_INT(a[THEME_STATUS_ERROR].attrs, THEME_ATTR_BOLD | THEME_ATTR_REVERSE,
            "NO_COLOR: status-error bold + reverse");
    theme_free(t);
    free(path);
}

/* Code token slots sit on the code block's background; NO_COLOR keeps their attributes. */
static void test_code_slots(void)
{
    static const char text[] = "[theme]\ncode = 223 236\ncode-keyword = 176 bold\n"
                                "code-string = 150 default\n";
    char *err = NULL;
    struct theme *t = theme_parse(text, sizeof(text) - 1, "code.theme", &err, NULL);
    TAP_OK(t != NULL, "a theme setting code-keyword parses");
    struct theme_style s[THEME_SLOT_COUNT], nc[THEME_SLOT_COUNT];
    theme_resolve(t, 256, 0, s);
    TAP_INT(s[THEME_CODE_KEYWORD].bg, 236, "code-keyword without a BG takes the code BG");
    TAP_INT(s[THEME_CODE_STRING].bg, 236, "code-string BG 'default' means the code BG");
    TAP_INT(s[THEME_CODE_COMMENT].fg, 223, "unset code-comment inherits code");
    TAP_INT(s[THEME_CODE_COMMENT].bg, 236, "... and its BG");
    TAP_INT(s[THEME_CODE_KEYWORD].fg, 176, "code-keyword FG kept");
    theme_resolve(t, 256, 1, nc);
    TAP_OK(nc[THEME_CODE_KEYWORD].fg == -1 && nc[THEME_CODE_KEYWORD].bg == -1 &&
               nc[THEME_CODE_KEYWORD].attrs == THEME_ATTR_BOLD,
           "NO_COLOR: code-keyword keeps bold, no colours");
    theme_free(t);
    TAP_INT(theme_slot_parent(THEME_CODE_REMOVED), THEME_CODE, "code-removed inherits code");
    static const char *const shipped_themes[] = {"dark", "light", "solarized-dark", "mono"};
    for (size_t i = 0; i < 4; i++) {
        char *path = theme_file(shipped_themes[i]);
        struct theme *u = theme_load(path, &err, NULL);
        theme_resolve(u, 256, 0, s);
        int same_bg = 1, distinct = 0;
        for (int k = THEME_CODE_KEYWORD; k <= THEME_CODE_REMOVED; k++) {
            same_bg &= s[k].bg == s[THEME_CODE].bg;
            distinct += s[k].fg != s[THEME_CODE].fg || s[k].attrs != s[THEME_CODE].attrs;
        }
        TAP_OK(same_bg, "%s: every code token slot has the code block's background",
               shipped_themes[i]);
        TAP_OK(distinct >= 8, "%s: the token slots differ from plain code (%d of 9)",
               shipped_themes[i], distinct);
        theme_free(u);
        free(path);
    }
}

struct bad_case {
    const char *file;
    const char *where;
    const char *what;
};

static void test_malformed(void)
{
    static const struct bad_case cases[] = {
        {"bad_color.theme", "bad_color.theme:5: ", "unknown colour 'purpl'"},
        {"bad_attr.theme", "bad_attr.theme:5: ", "unknown attribute 'blink'"},
        {"missing_eq.theme", "missing_eq.theme:4: ", "missing '='"},
        {"binary.theme", "binary.theme:1: ", "binary data"},
        {"empty.theme", "empty.theme:1: ", "empty theme file"},
        {"comments_only.theme", "comments_only.theme:3: ", "empty theme file"},
        {"too_many.theme", "too_many.theme:3: ", "too many colours"},
        {"no_section.theme", "no_section.theme:1: ", "before the [theme] section"},
        {"big_index.theme", "big_index.theme:4: ", "unknown colour '256'"},
        {"bad_hex.theme", "bad_hex.theme:3: ", "unknown colour '#12345g'"},
        {"bad_section.theme", "bad_section.theme:1: ", "malformed section header"},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(cases); i++) {
        char *path = xasprintf("%s/theme/%s", tap_srcdir(), cases[i].file);
        char *err = NULL, *warn = NULL;
        struct theme *t = theme_load(path, &err, &warn);
        TAP_OK(t == NULL && err != NULL, "%s is rejected", cases[i].file);
        TAP_OK(err && strstr(err, cases[i].where) != NULL, "%s: message names file:line (%s)",
               cases[i].file, err ? err : "none");
        TAP_OK(err && strstr(err, cases[i].what) != NULL, "%s: message says what is wrong",
               cases[i].file);
        theme_free(t);
        free(err);
        free(warn);
        free(path);
    }

    /* unknown slot: a warning, not an error */
    char *path = xasprintf("%s/theme/unknown_slot.theme", tap_srcdir());
    char *err = NULL, *warn = NULL;
    struct theme *t = theme_load(path, &err, &warn);
    TAP_OK(t != NULL && err == NULL, "unknown slot is not an error");
    TAP_OK(warn && strstr(warn, "unknown_slot.theme:4: unknown slot 'frobnicate'"),
           "unknown slot warning names file:line (%s)", warn ? warn : "none");
    TAP_OK(t && theme_has_slot(t, THEME_USER) && theme_has_slot(t, THEME_HEADING),
           "the other slots are read");
    theme_free(t);
    free(warn);
    free(path);

    err = NULL;
    t = theme_load("/nonexistent/x.theme", &err, NULL);
    TAP_OK(t == NULL && err && strstr(err, "/nonexistent/x.theme: "),
           "unreadable file: error names the path");
    free(err);
}

static void test_lookup(void)
{
    char abs[PATH_MAX];
    if (!realpath(tap_srcdir(), abs)) {
        TAP_OK(0, "realpath of srcdir");
        return;
    }
    char *xdg = xasprintf("%s/theme/user", abs);
    char *data = xasprintf("%s/theme/data", abs);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    setenv("TOKTERM_DATADIR", data, 1);
    char *err = NULL, *warn = NULL;

    struct theme *t = theme_find("dark", &err, &warn);
    TAP_STR(theme_name(t), "user-dark", "user theme dir wins over the shipped theme");
    TAP_OK(err == NULL, "no error for a user theme");
    theme_free(t);

    t = theme_find("onlydata", &err, &warn);
    TAP_STR(theme_name(t), "from-datadir", "TOKTERM_DATADIR is searched");
    theme_free(t);

    t = theme_find("light", &err, &warn);
    TAP_STR(theme_name(t), "light", "source tree themes/ is the last fallback");
    theme_free(t);

    t = theme_find("broken", &err, &warn);
    TAP_STR(theme_name(t), "default", "malformed theme falls back to the built-in one");
    TAP_OK(err && strstr(err, "broken.theme:5: ") && strstr(err, "built-in"),
           "fallback error names file:line (%s)", err ? err : "none");
    free(err);
    err = NULL;

    t = (theme_free(t), theme_find("no-such-theme", &err, &warn));
    TAP_STR(theme_name(t), "default", "missing theme falls back to the built-in one");
    TAP_OK(err && strstr(err, "not found"), "missing theme error (%s)", err ? err : "none");
    free(err);
    err = NULL;

    t = (theme_free(t), theme_find("../../etc/passwd", &err, &warn));
    TAP_OK(err && strstr(err, "bad theme name"), "path-like names are refused");
    free(err);
    err = NULL;

    t = (theme_free(t), theme_find("default", &err, &warn));
    TAP_OK(err == NULL && strcmp(theme_name(t), "default") == 0,
           "'default' is the built-in theme");
    theme_free(t);

    char *p = theme_path("onlydata");
    TAP_OK(p && strstr(p, "/theme/data/themes/onlydata.theme"), "theme_path finds the file");
    free(p);
    TAP_OK(theme_path("nothing-here") == NULL, "theme_path: NULL when missing");

    unsetenv("XDG_CONFIG_HOME");
    unsetenv("TOKTERM_DATADIR");
    free(warn);
    free(xdg);
    free(data);
}

int main(void)
{
    test_slots();
    test_shipped();
    test_downgrade();
    test_no_color();
    test_code_slots();
    test_malformed();
    test_lookup();
    return tap_done();
}
