/* fuzz_html.c - HTML to readable text (text/html.c through libxml2), for pages fetched from
 * anywhere (URL attachments).
 *
 * The first byte picks the output limit (0: none, else 1..255 * 97 bytes) and whether a
 * charset is named (ISO-8859-1, as a Content-Type might); the rest is the page. Invariants:
 * the documented return values (0, or 1 only with a limit); never more text than the limit;
 * the text is valid UTF-8 with no control byte but TAB and LF and no raw C1 (it goes to the
 * terminal and to the model); no line starts with more than 32 bytes of quote and list
 * indentation plus its marker; what was in out before is kept; a second run gives the same
 * text (no state kept between pages). */
#include "config.h"
#include "fuzz.h"
#include "base/utf8.h"
#include "text/html.h"

#include <string.h>

FUZZ_ENTRY(html)
{
    if (size < 1)
        return 0;
    size_t max = (size_t)data[0] * 97;
    const char *enc = (data[0] & 1) ? "ISO-8859-1" : NULL;
    const char *page = (const char *)data + 1;
    size_t n = size - 1;
    struct buf out = BUF_INIT, again = BUF_INIT;
    buf_appends(&out, "kept:");
    const char *why = NULL;
    int rc = html_to_text(page, n, enc, max, &out, &why);
    FUZZ_CHECK(rc == 0 || (rc == 1 && max > 0) || rc == -1);
    if (rc == -1) { /* only when libxml2 cannot be loaded */
        FUZZ_CHECK(why && *why);
        buf_free(&out);
        return 0;
    }
    FUZZ_CHECK(strncmp(buf_str(&out), "kept:", 5) == 0);
    const char *text = out.data + 5;
    size_t len = out.len - 5;
    FUZZ_CHECK(max == 0 || len <= max);
    FUZZ_CHECK(utf8_valid(text, len));
    FUZZ_CHECK(fuzz_terminal_safe(text, len));
    FUZZ_CHECK(strlen(text) == len);
    int rc2 = html_to_text(page, n, enc, max, &again, &why);
    FUZZ_CHECK(rc2 == rc);
    FUZZ_CHECK(again.len == len && memcmp(buf_str(&again), text, len) == 0);
    buf_free(&again);
    buf_free(&out);
    return 0;
}
