/* fuzz_theme.c - the theme file parser and colour downgrading.
 *
 * Any bytes either parse or give one error naming the file and line, with no C0 control byte
 * but TAB and CR in it (theme.c refuses the others; CR, DEL and C1 controls may be quoted - the
 * TUI sanitises every message it draws). A theme that parses resolves, for every colour depth
 * and NO_COLOR, to colour indices the terminal has (-1 = its default) and known attribute
 * bits. */
#include "config.h"
#include "fuzz.h"
#include "text/theme.h"

#include <string.h>

#define FUZZ_THEME_ATTRS                                                                 \
    (THEME_ATTR_BOLD | THEME_ATTR_DIM | THEME_ATTR_ITALIC | THEME_ATTR_UNDERLINE |       \
     THEME_ATTR_REVERSE | THEME_ATTR_STRIKE)

FUZZ_ENTRY(theme)
{
    char *err = NULL, *warn = NULL;
    struct theme *t = theme_parse((const char *)data, size, "fuzz.theme", &err, &warn);
    if (!t) {
        FUZZ_CHECK(err != NULL);
        FUZZ_CHECK(strncmp(err, "fuzz.theme", 10) == 0);
        for (const char *p = err; *p; p++)
            FUZZ_CHECK((unsigned char)*p >= 0x20 || *p == '\t' || *p == '\r');
    } else {
        FUZZ_CHECK(err == NULL);
        FUZZ_CHECK(theme_name(t) != NULL);
        static const int depths[] = {0, 2, 8, 16, 88, 256, 16777216};
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
            for (int no_color = 0; no_color < 2; no_color++) {
                struct theme_style out[THEME_SLOT_COUNT];
                theme_resolve(t, depths[d], no_color, out);
                int max = no_color || depths[d] < 8 ? -1 : depths[d] > 256 ? 255 : depths[d] - 1;
                for (int i = 0; i < THEME_SLOT_COUNT; i++) {
                    FUZZ_CHECK(out[i].fg >= -1 && out[i].fg <= max);
                    FUZZ_CHECK(out[i].bg >= -1 && out[i].bg <= max);
                    FUZZ_CHECK((out[i].attrs & ~FUZZ_THEME_ATTRS) == 0);
                }
            }
        for (int i = 0; i < THEME_SLOT_COUNT; i++) {
            FUZZ_CHECK(theme_slot_name(i) != NULL);
            FUZZ_CHECK(theme_slot_from_name(theme_slot_name(i)) == i);
        }
        theme_free(t);
    }
    free(err);
    free(warn);
    return 0;
}
