/* fuzz_conf.c - the config file parser (INI with profiles) and option values.
 *
 * The input is written to an anonymous memory file and loaded as a config file twice: with
 * the profile it chooses itself and with an explicit profile "p". Then its first line is used
 * as "key=value" for conf_set. Invariants: documented return values; values in range; an
 * error always says where (the file name) and, like every warning, is terminal safe - a
 * config file full of escape sequences must not drive the terminal when tokterm reports it. */
#include "config.h"
#include "core/conf.h"
#include "fuzz.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fuzz_conf_load(const char *path, const char *profile)
{
    struct conf c;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    conf_defaults(&c);
    int rc = conf_load(&c, path, profile, &err, &warn);
    FUZZ_CHECK(rc >= -1 && rc <= 1);
    if (rc < 0) {
        FUZZ_CHECK(err.len > 0);
        FUZZ_CHECK(strstr(err.data, path) != NULL);
    } else {
        FUZZ_CHECK(err.len == 0);
        FUZZ_CHECK(c.base_url && c.model && c.auth_header && c.max_tokens_field);
        FUZZ_CHECK(c.temperature >= 0 && c.temperature <= 2);
        FUZZ_CHECK(c.idle_timeout >= 0.1 && c.idle_timeout <= 86400);
        FUZZ_CHECK(c.connect_timeout_ms >= 1 && c.connect_timeout_ms <= 600000);
        FUZZ_CHECK(c.max_tokens >= 0 && c.max_tokens <= 10000000);
        if (profile)
            FUZZ_CHECK(c.profile && strcmp(c.profile, profile) == 0);
        char *host = conf_host(&c);
        FUZZ_CHECK(host && !strchr(host, '/') && !strchr(host, '@'));
        free(host);
        (void)conf_is_local(&c);
    }
    FUZZ_CHECK(fuzz_terminal_safe(buf_str(&err), err.len));
    FUZZ_CHECK(fuzz_terminal_safe(buf_str(&warn), warn.len));
    conf_free(&c);
    buf_free(&err);
    buf_free(&warn);
}

FUZZ_ENTRY(conf)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("tokterm-fuzz-config", 0);
        FUZZ_CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    fuzz_conf_load(path, NULL);
    fuzz_conf_load(path, "p");

    /* the first line as one option, as --model or a config line would set it */
    const char *s = (const char *)data;
    size_t line = 0;
    while (line < size && s[line] != '\n')
        line++;
    char *text = malloc(line + 1);
    memcpy(text, s, line);
    text[line] = '\0';
    char *eq = strchr(text, '=');
    if (eq) {
        *eq = '\0';
        struct conf c;
        struct buf err = BUF_INIT;
        conf_defaults(&c);
        int rc = conf_set(&c, text, eq + 1, &err);
        FUZZ_CHECK(rc == 0 || (rc == -1 && err.len > 0));
        /* (its message quotes the value as given: command-line text is the user's own) */
        conf_free(&c);
        buf_free(&err);
    }
    free(text);
    return 0;
}
