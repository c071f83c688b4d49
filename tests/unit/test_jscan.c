/* test_jscan.c - the allocation-free scanner agrees with cJSON on valid documents and rejects
 * invalid ones. */
#include "config.h"
#include "proto/jscan.h"
#include "tap.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static unsigned rnd_state = 12345;
static unsigned rnd(void)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 16) & 0x7fff;
}

static cJSON *random_value(int depth)
{
    static const char *const strs[] = {"", "plain", "quote\"inside", "back\\slash", "new\nline",
                                       "\xE4\xBD\xA0\xE5\xA5\xBD", "emoji \xF0\x9F\x98\x8A",
                                       "tab\tand\x01ctl", "/slash"};
    switch (depth > 4 ? rnd() % 4 : rnd() % 6) {
    case 0: return cJSON_CreateString(strs[rnd() % 9]);
    case 1: return cJSON_CreateNumber((double)((int)rnd() - 16000) / (rnd() % 3 ? 1 : 7.0));
    case 2: return rnd() % 2 ? cJSON_CreateTrue() : cJSON_CreateFalse();
    case 3: return cJSON_CreateNull();
    case 4: {
        cJSON *a = cJSON_CreateArray();
        for (unsigned i = 0, n = rnd() % 5; i < n; i++)
            cJSON_AddItemToArray(a, random_value(depth + 1));
        return a;
    }
    default: {
        cJSON *o = cJSON_CreateObject();
        for (unsigned i = 0, n = rnd() % 5; i < n; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%u", rnd() % 100);
            cJSON_AddItemToObject(o, key, random_value(depth + 1));
        }
        return o;
    }
    }
}

/* Walk with jscan and rebuild every string value; compare with cJSON's. */
static int strings_match(struct jscan *j, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        const char *s;
        size_t n;
        int esc;
        if (jscan_string(j, &s, &n, &esc) < 0)
            return 0;
        struct buf b = BUF_INIT;
        jscan_unescape(s, n, &b);
        int ok = strcmp(buf_str(&b), v->valuestring) == 0;
        buf_free(&b);
        return ok;
    }
    if (cJSON_IsArray(v)) {
        int first = 1;
        if (jscan_array_begin(j) < 0)
            return 0;
        for (const cJSON *c = v->child; c; c = c->next)
            if (jscan_array_next(j, &first) != 1 || !strings_match(j, c))
                return 0;
        return jscan_array_next(j, &first) == 0;
    }
    if (cJSON_IsObject(v)) {
        int first = 1;
        const char *k;
        size_t kn;
        if (jscan_object_begin(j) < 0)
            return 0;
        for (const cJSON *c = v->child; c; c = c->next)
            if (jscan_object_next(j, &first, &k, &kn) != 1 || !jscan_key_is(k, kn, c->string) ||
                !strings_match(j, c))
                return 0;
        return jscan_object_next(j, &first, &k, &kn) == 0;
    }
    return jscan_skip(j) == 0;
}

static int accepts(const char *s)
{
    struct jscan j;
    jscan_init(&j, s, strlen(s));
    return jscan_skip(&j) == 0 && jscan_at_end(&j);
}

int main(void)
{
    int all_ok = 1, all_strings = 1;
    for (int i = 0; i < 2000; i++) {
        cJSON *v = random_value(0);
        char *text = i % 2 ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
        if (!accepts(text))
            all_ok = 0;
        struct jscan j;
        jscan_init(&j, text, strlen(text));
        if (!strings_match(&j, v))
            all_strings = 0;
        cJSON_free(text);
        cJSON_Delete(v);
    }
    TAP_OK(all_ok, "2000 random documents printed by cJSON are accepted");
    TAP_OK(all_strings, "every string decodes to cJSON's value");

    static const char *const bad[] = {
        "", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "\"unterminated",
        "\"bad \\x escape\"", "\"\\u12\"", "01", "1.", "-", "1e", "tru", "nul", "[1 2]",
        "\"raw\ncontrol\"", "{\"a\":1}}", "[[[[", "NaN",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TAP_OK(!accepts(bad[i]), "rejects invalid: %s", bad[i][0] ? bad[i] : "(empty)");
    static const char *const good[] = {
        "0", "-0.5e+10", "\"\"", "[]", "{}", " { \"a\" : [ true , false , null ] } ",
        "\"\\u00e9\\n\\/\"", "1E5",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        TAP_OK(accepts(good[i]), "accepts valid: %s", good[i]);

    struct buf deep = BUF_INIT;
    for (int i = 0; i < JSCAN_MAX_DEPTH + 10; i++)
        buf_appendc(&deep, '[');
    for (int i = 0; i < JSCAN_MAX_DEPTH + 10; i++)
        buf_appendc(&deep, ']');
    TAP_OK(!accepts(buf_str(&deep)), "nesting past the limit is refused");
    buf_free(&deep);

    struct jscan j;
    long long v;
    jscan_init(&j, "12345678901234567890123", 23);
    TAP_INT(jscan_integer(&j, &v), 0, "huge integer parses without overflow");
    TAP_OK(v > 0, "huge integer saturates positive");
    return tap_done();
}
