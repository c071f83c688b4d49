/* test_conf.c - config file parsing, profiles, precedence, malformed files, key sources. */
#include "config.h"
#include "core/conf.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/tt-conf-XXXXXX";

static char *write_cfg(const char *name, const char *text, size_t n, int mode)
{
    char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
    chmod(path, (mode_t)mode);
    return path;
}

/* Load text; returns rc, fills err/warn. */
static int load(struct conf *c, const char *text, const char *profile, struct buf *err,
                struct buf *warn)
{
    char *path = write_cfg("config", text, strlen(text), 0600);
    conf_defaults(c);
    buf_reset(err);
    buf_reset(warn);
    int rc = conf_load(c, path, profile, err, warn);
    free(path);
    return rc;
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    struct conf c;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    unsetenv("OPENAI_BASE_URL");
    unsetenv("TOKTERM_MODEL");

    const char *cfg = "# comment\n"
                      "model = gpt-4o\n"
                      "profile = groq\n"
                      "\n"
                      "[groq]\n"
                      "base_url = https://api.groq.com/openai/v1\n"
                      "model = \"llama-3.3-70b\"\n"
                      "api_key_env = GROQ_API_KEY\n"
                      "temperature = 0.2\n"
                      "[profile ollama]\n"
                      "base_url = http://127.0.0.1:11434/v1\n"
                      "include_usage = false\n"
                      "[empty]\n";
    TAP_INT(load(&c, cfg, NULL, &err, &warn), 0, "valid file loads");
    TAP_STR(c.profile, "groq", "top-level profile= selects a section");
    TAP_STR(c.model, "llama-3.3-70b", "profile value wins over top-level, quotes removed");
    TAP_STR(c.api_key_env, "GROQ_API_KEY", "api_key_env from profile");
    TAP_OK(c.has_temperature && c.temperature > 0.19 && c.temperature < 0.21, "temperature");
    conf_free(&c);

    TAP_INT(load(&c, cfg, "ollama", &err, &warn), 0, "explicit profile loads");
    TAP_STR(c.model, "gpt-4o", "explicit profile: top-level model kept");
    TAP_INT(c.include_usage, 0, "bool false parsed");
    TAP_OK(conf_is_local(&c), "127.0.0.1 base URL is local");
    setenv("OPENAI_BASE_URL", "https://env.example/v1", 1);
    setenv("TOKTERM_MODEL", "env-model", 1);
    conf_apply_env(&c);
    TAP_STR(c.base_url, "http://127.0.0.1:11434/v1", "explicit profile's base_url beats env");
    TAP_STR(c.model, "env-model", "env model applies where the profile is silent");
    conf_free(&c);

    TAP_INT(load(&c, cfg, NULL, &err, &warn), 0, "file-chosen profile");
    conf_apply_env(&c);
    TAP_STR(c.base_url, "https://env.example/v1", "env beats a profile chosen in the file");
    conf_free(&c);
    unsetenv("OPENAI_BASE_URL");
    unsetenv("TOKTERM_MODEL");

    TAP_INT(load(&c, cfg, "empty", &err, &warn), 0, "an empty profile is valid");
    conf_free(&c);
    TAP_INT(load(&c, cfg, "nope", &err, &warn), -1, "missing profile is an error");
    TAP_OK(strstr(buf_str(&err), "no profile 'nope'") != NULL, "missing profile message");
    conf_free(&c);

    /* Malformed files: clear message with file:line */
    static const struct {
        const char *text, *want, *name;
    } bad[] = {
        {"model = a\njust garbage\n", ":2: expected 'key = value'", "line without ="},
        {"[unclosed\n", ":1: a section header", "unclosed section"},
        {"max_tokens = lots\n", ":1: max_tokens must be a whole number", "bad number"},
        {"temperature = 7\n", ":1: temperature must be a number from 0 to 2", "out of range"},
        {"insecure = maybe\n", ":1: insecure must be true or false", "bad bool"},
        {" = value\n", ":1: missing key", "missing key"},
        {"[]\n", ":1: empty section name", "empty section"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TAP_INT(load(&c, bad[i].text, NULL, &err, &warn), -1, bad[i].name);
        if (!TAP_OK(strstr(buf_str(&err), bad[i].want) != NULL, "%s: message", bad[i].name))
            printf("#   got: %s\n", buf_str(&err));
        conf_free(&c);
    }
    {
        char *path = write_cfg("binary", "model = a\0\x01\x02", 12, 0600);
        conf_defaults(&c);
        buf_reset(&err);
        TAP_INT(conf_load(&c, path, NULL, &err, &warn), -1, "binary garbage refused");
        TAP_OK(strstr(buf_str(&err), "not a text file") != NULL, "binary garbage message");
        conf_free(&c);
        free(path);
    }
    TAP_INT(load(&c, "colour = blue\n", NULL, &err, &warn), 0, "unknown key is not fatal");
    TAP_OK(strstr(buf_str(&warn), "unknown option 'colour'") != NULL, "unknown key warned");
    conf_free(&c);

    /* Every sampling parameter (API_SAMPLING) is a key of the file, in a profile too, with the
     * table's range (an INT also takes 0: not sent). */
    for (size_t i = 0; i < API_N_PARAMS; i++) {
        const struct api_param *p = &api_params[i];
        double lo = p->flagged ? p->min : 0;
        char *text = xasprintf("[p]\n%s = %.17g\n", p->name, p->max);
        char *name = xasprintf("%s = its largest value in a profile", p->name);
        TAP_INT(load(&c, text, "p", &err, &warn), 0, name);
        conf_free(&c);
        free(text);
        free(name);
        for (int side = 0; side < 2; side++) {
            double v = side ? p->max + 1 : lo - 1;
            text = xasprintf("%s = %.17g\n", p->name, v);
            name = xasprintf("%s = %.17g is refused and named", p->name, v);
            char *want = xasprintf(":1: %s must be a ", p->name);
            TAP_OK(load(&c, text, NULL, &err, &warn) == -1 && strstr(buf_str(&err), want),
                   name);
            conf_free(&c);
            free(text);
            free(name);
            free(want);
        }
    }

    /* Missing file */
    conf_defaults(&c);
    char *none = xasprintf("%s/none", dir);
    TAP_INT(conf_load(&c, none, NULL, &err, &warn), 1, "missing file is fine");
    TAP_INT(conf_load(&c, none, "x", &err, &warn), -1, "missing file with a profile is not");
    free(none);
    conf_free(&c);

    /* Key sources and permissions */
    {
        char *path = write_cfg("withkey", "api_key = sk-literal-123\n", 24, 0644);
        conf_defaults(&c);
        buf_reset(&warn);
        TAP_INT(conf_load(&c, path, NULL, &err, &warn), 0, "file with key loads");
        TAP_OK(strstr(buf_str(&warn), "other users can read it") != NULL,
               "readable file holding a key is warned about");
        unsetenv("OPENAI_API_KEY");
        buf_reset(&err);
        char *k = conf_api_key(&c, &err);
        TAP_STR(k, "sk-literal-123", "literal key used when no env");
        free(k);
        setenv("OPENAI_API_KEY", "sk-from-env", 1);
        k = conf_api_key(&c, &err);
        TAP_STR(k, "sk-from-env", "env key wins over literal");
        free(k);
        conf_set(&c, "api_key_cmd", "printf 'sk-from-cmd\\n'", &err);
        k = conf_api_key(&c, &err);
        TAP_STR(k, "sk-from-cmd", "api_key_cmd output, first line");
        free(k);
        conf_set(&c, "api_key_cmd", "exit 3", &err);
        buf_reset(&err);
        k = conf_api_key(&c, &err);
        TAP_OK(k == NULL && strstr(buf_str(&err), "failed"), "failing api_key_cmd reported");
        conf_free(&c);
        free(path);
    }
    conf_defaults(&c);
    conf_set(&c, "base_url", "https://user:secret@api.example.com:8443/v1", &err);
    char *h = conf_host(&c);
    TAP_STR(h, "api.example.com:8443", "host without credentials");
    free(h);
    TAP_OK(!conf_is_local(&c), "remote is not local");
    conf_free(&c);

    setenv("XDG_CONFIG_HOME", "/x/cfg", 1);
    char *d = conf_dir("config");
    TAP_STR(d, "/x/cfg/tokterm", "XDG_CONFIG_HOME respected");
    free(d);
    setenv("XDG_DATA_HOME", "relative", 1);
    setenv("HOME", "/home/u", 1);
    d = conf_dir("data");
    TAP_STR(d, "/home/u/.local/share/tokterm", "relative XDG path ignored (spec)");
    free(d);
    buf_free(&err);
    buf_free(&warn);
    char *cmd = xasprintf("rm -rf %s", dir);
    (void)!system(cmd);
    free(cmd);
    return tap_done();
}
