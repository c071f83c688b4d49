/* test_conf.c - config file parsing, profiles, precedence, malformed files, key sources. */
#include "config.h"
#include "core/conf.h"
#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <pwd.h>
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
            TAP_OK(load(&c, text, NULL, &err, &warn) == -1 && strstr(buf_str(&err), want), "%s",
                   name);
            conf_free(&c);
            free(text);
            free(name);
            free(want);
        }
    }

    /* A UTF-8 byte order mark does not hide the first key */
    TAP_INT(load(&c, "\xef\xbb\xbfmodel = bom-model\n", NULL, &err, &warn), 0, "BOM: loads");
    TAP_STR(c.model, "bom-model", "BOM: the first key is read");
    TAP_STR(buf_str(&warn), "", "BOM: no warning");
    conf_free(&c);

    /* Duplicates: a warning with both lines, the last one wins */
    TAP_INT(load(&c, "model = a\nmodel = b\n", NULL, &err, &warn), 0, "duplicate key: loads");
    TAP_STR(c.model, "b", "duplicate key: the last one wins");
    if (!TAP_OK(strstr(buf_str(&warn), "config:2: duplicate key 'model' (first at line 1); "
                                       "the last one wins"), "duplicate key: warned with both lines"))
        printf("#   got: %s\n", buf_str(&warn));
    conf_free(&c);
    TAP_INT(load(&c, "model = a\n[default]\nmodel = b\n", NULL, &err, &warn), 0,
            "top level and [default]: loads");
    TAP_OK(strstr(buf_str(&warn), "config:3: duplicate key 'model' (first at line 1)"),
           "top level and [default] are one place: a duplicate");
    conf_free(&c);
    TAP_INT(load(&c, "[p]\nmodel = a\n[q]\nmodel = q\n[profile p]\nmodel = b\ntheme = x\n", "p",
                 &err, &warn), 0, "duplicate section: loads");
    TAP_STR(c.model, "b", "duplicate section: the last value wins");
    TAP_STR(c.theme, "x", "duplicate section: both parts apply");
    if (!TAP_OK(strstr(buf_str(&warn), "config:5: duplicate section [p] (first at line 1)") &&
                    strstr(buf_str(&warn), "config:6: duplicate key 'model' (first at line 2)") &&
                    !strstr(buf_str(&warn), "line 4"),
                "duplicate section: warned; [q]'s model is no duplicate"))
        printf("#   got: %s\n", buf_str(&warn));
    conf_free(&c);
    TAP_INT(load(&c, "[p]\nmodel = a\n[q]\nmodel = b\n", "q", &err, &warn), 0, "two sections");
    TAP_STR(buf_str(&warn), "", "the same key in two sections is no duplicate");
    conf_free(&c);

    /* A hostile file of 4 MiB: a few warnings, not one a line (its time is printed, not asserted:
     * under ASan on a loaded machine it took 1.97 s and failed a 1.5 s bound) */
    {
        struct buf big = BUF_INIT;
        for (int i = 0; i < 1000; i++)
            buf_printf(&big, "unknown%d = x\nmodel = m%d\n[s%d]\nprofile = p\n", i, i, i % 7);
        while (big.len < (4u << 20) - 16)
            buf_appends(&big, "model = again\n");
        double t0 = util_now();
        TAP_INT(load(&c, big.data, NULL, &err, &warn), 0, "4 MiB of repeated lines: loads");
        double dt = util_now() - t0;
        size_t nl = 0;
        for (const char *p = buf_str(&warn); *p; p++)
            nl += *p == '\n';
        if (!TAP_OK(nl <= 2 * 20 + 2 && strstr(buf_str(&warn), "more duplicate keys or sections") &&
                        strstr(buf_str(&warn), "more warnings about single lines"),
                    "... %zu warning lines: 20 of each kind, then a count", nl))
            printf("#   got %zu bytes of warnings\n", warn.len);
        printf("# read in %.2f s (not asserted: speed belongs to bench/, not a unit test)\n", dt);
        conf_free(&c);
        buf_free(&big);
    }

    /* A missing profile: the message lists the sections the file defines */
    TAP_INT(load(&c, cfg, "nosuch", &err, &warn), -1, "profile nosuch: an error");
    if (!TAP_OK(strstr(buf_str(&err), "no profile 'nosuch'") &&
                    strstr(buf_str(&err), "[groq], [ollama], [empty]") &&
                    !strstr(buf_str(&err), "[nosuch]"),
                "profile nosuch: the defined sections listed, not [nosuch]"))
        printf("#   got: %s\n", buf_str(&err));
    conf_free(&c);
    TAP_INT(load(&c, "model = m\n", "nosuch", &err, &warn), -1, "no sections: an error");
    if (!TAP_OK(strstr(buf_str(&err), "defines no profile") && strstr(buf_str(&err), "[nosuch]"),
                "no sections: says so, and how to add one"))
        printf("#   got: %s\n", buf_str(&err));
    conf_free(&c);

    /* An unknown key: the nearest option name */
    static const struct {
        const char *key, *want;
    } typos[] = {
        {"modle", "model"}, {"temprature", "temperature"}, {"api_key_comd", "api_key_cmd"},
        {"baseurl", "base_url"}, {"Model", "model"}, {"profle", "profile"},
        {"key_cmd_timeot", "key_cmd_timeout"}, {"zzzzzz", NULL}, {"colour", NULL},
    };
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        char *text = xasprintf("%s = 1\n", typos[i].key);
        TAP_INT(load(&c, text, NULL, &err, &warn), 0, "unknown key: not fatal");
        char *want = typos[i].want ? xasprintf("did you mean '%s'?", typos[i].want)
                                   : xstrdup("did you mean");
        int has = strstr(buf_str(&warn), want) != NULL;
        if (!TAP_OK(strstr(buf_str(&warn), "unknown option") && has == (typos[i].want != NULL),
                    "unknown '%s': %s", typos[i].key, typos[i].want ? want : "no suggestion"))
            printf("#   got: %s\n", buf_str(&warn));
        free(text);
        free(want);
        conf_free(&c);
    }

    /* The base URL: a malformed one is a configuration error (it was a network error, 4) */
    static const char *const bad_urls[] = {
        "htp://x/v1", "api.openai.com/v1", "http:///v1", "https://", "http://a b/v1",
        "http://x:port/v1", "", "ftp://x/v1", "http//x/v1", "https://x\t/v1",
    };
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        char *text = xasprintf("base_url = \"%s\"\n", bad_urls[i]);
        int rc = load(&c, text, NULL, &err, &warn);
        if (!TAP_OK(rc == -1 && strstr(buf_str(&err), "config:1: base_url") &&
                        strstr(buf_str(&err), "http://") && strstr(buf_str(&err), "https://"),
                    "base_url '%s' refused with a message", bad_urls[i]))
            printf("#   got: %d %s\n", rc, buf_str(&err));
        free(text);
        conf_free(&c);
    }
    static const char *const good_urls[] = {
        "http://127.0.0.1:11434/v1", "https://user:pw@api.example.com:8443/v1",
        "http://[::1]:8080/v1", "HTTPS://API.example.com/v1", "http://localhost",
        "https://x.example/openai/deployments/d?api-version=2024-06-01",
    };
    for (size_t i = 0; i < sizeof good_urls / sizeof good_urls[0]; i++) {
        conf_defaults(&c);
        buf_reset(&err);
        int rc = conf_set(&c, "base_url", good_urls[i], &err);
        if (!TAP_OK(rc == 0, "base_url '%s' accepted", good_urls[i]))
            printf("#   got: %s\n", buf_str(&err));
        conf_free(&c);
    }
    /* a blank model name would go out as "model": "" */
    static const char *const blank_models[] = {"", " ", "\t "};
    for (size_t i = 0; i < sizeof blank_models / sizeof blank_models[0]; i++) {
        conf_defaults(&c);
        buf_reset(&err);
        TAP_OK(conf_set(&c, "model", blank_models[i], &err) == -1 &&
                   strstr(buf_str(&err), "model must name a model") &&
                   strcmp(c.model, "gpt-4o-mini") == 0,
               "model '%s' refused, the model kept: %s", blank_models[i], buf_str(&err));
        conf_free(&c);
    }
    conf_defaults(&c);
    TAP_OK(conf_set(&c, "model", "llama3.1:8b", &err) == 0 && strcmp(c.model, "llama3.1:8b") == 0,
           "a model name is taken as it is");
    conf_free(&c);
    /* a misspelt field name went out as a member of its own: no length limit at all */
    conf_defaults(&c);
    buf_reset(&err);
    TAP_OK(conf_set(&c, "max_tokens_field", "max_completion_token", &err) == -1 &&
               strstr(buf_str(&err), "max_tokens_field must be one of max_tokens|"
                                     "max_completion_tokens") &&
               strcmp(c.max_tokens_field, "max_tokens") == 0 &&
               conf_set(&c, "max_tokens_field", "max_completion_tokens", &err) == 0,
           "max_tokens_field: a misspelt name refused, the two names taken: %s", buf_str(&err));
    conf_free(&c);

    /* Commands run only from a file nobody else can change (as ssh's StrictModes) */
    {
        static const struct {
            const char *text;
            int mode;
            int ok;
            const char *name;
        } perms[] = {
            {"api_key_cmd = echo sk-x\n", 0600, 1, "api_key_cmd, mode 600: loads"},
            {"api_key_cmd = echo sk-x\n", 0644, 1, "api_key_cmd, mode 644: loads"},
            {"api_key_cmd = echo sk-x\n", 0666, 0, "api_key_cmd, mode 666: refused"},
            {"api_key_cmd = echo sk-x\n", 0620, 0, "api_key_cmd, mode 620: refused"},
            {"[p]\napi_key_cmd = echo sk-x\n", 0602, 0, "api_key_cmd in any profile: refused"},
            {"keys = env:A, cmd:echo sk-x\n", 0666, 0, "a cmd: key, mode 666: refused"},
            {"keys = env:A, env:B\n", 0666, 1, "keys without cmd:, mode 666: loads"},
            {"model = m\n", 0666, 1, "no command, mode 666: loads (a warning)"},
        };
        for (size_t i = 0; i < sizeof perms / sizeof perms[0]; i++) {
            char *path = write_cfg("perm", perms[i].text, strlen(perms[i].text), perms[i].mode);
            conf_defaults(&c);
            buf_reset(&err);
            buf_reset(&warn);
            int rc = conf_load(&c, path, NULL, &err, &warn);
            int ok = perms[i].ok ? rc == 0
                                 : rc == -1 && strstr(buf_str(&err), "writable by") &&
                                       strstr(buf_str(&err), "chmod go-w");
            if (!TAP_OK(ok, "%s", perms[i].name))
                printf("#   got: %d %s%s\n", rc, buf_str(&err), buf_str(&warn));
            if (perms[i].mode == 0666 && perms[i].ok)
                TAP_OK(strstr(buf_str(&warn), "chmod go-w"), "%s: warned", perms[i].name);
            conf_free(&c);
            free(path);
        }
        /* another user's file: refused whatever its mode (root's is fine) */
        char *path = write_cfg("owned", "api_key_cmd = echo sk-x\n", 24, 0644);
        struct buf why = BUF_INIT;
        unsigned me = (unsigned)getuid(); /* root gives it away; others pretend to be another */
        if (me == 0)
            TAP_INT(chown(path, 65534, (gid_t)-1), 0, "root: the file given to uid 65534");
        else
            me = me + 1;
        TAP_INT(conf_file_trusted(path, me, &why), 0, "another user's file is not trusted");
        TAP_OK(strstr(buf_str(&why), "belongs to") && strstr(buf_str(&why), "chown"),
               "... the message says whose and what to do");
        buf_reset(&why);
        TAP_INT(conf_file_trusted(path, (unsigned)getuid() == 0 ? 65534 : (unsigned)getuid(),
                                  &why), 1, "the owner's own file is trusted");
        buf_free(&why);
        free(path);
        /* a directory others can write: refused; with the sticky bit (like /tmp): fine */
        char *sub = xasprintf("%s/open", dir);
        mkdir(sub, 0700);
        chmod(sub, 0777);
        char *text = "api_key_cmd = echo sk-x\n";
        path = write_cfg("open/config", text, strlen(text), 0600);
        conf_defaults(&c);
        buf_reset(&err);
        int rc = conf_load(&c, path, NULL, &err, &warn);
        if (!TAP_OK(rc == -1 && strstr(buf_str(&err), "/open is writable by") &&
                        strstr(buf_str(&err), "chmod go-w"),
                    "a directory others can write: refused, the directory named"))
            printf("#   got: %d %s\n", rc, buf_str(&err));
        conf_free(&c);
        /* a symbolic link: the directories of both the link and what it points to count */
        char *safe = write_cfg("safe", text, strlen(text), 0600);
        char *link_in_open = xasprintf("%s/link", sub), *link_to_open = xasprintf("%s/link", dir);
        TAP_OK(symlink(safe, link_in_open) == 0 && symlink(path, link_to_open) == 0, "symlinks");
        conf_defaults(&c);
        buf_reset(&err);
        rc = conf_load(&c, link_in_open, NULL, &err, &warn);
        TAP_OK(rc == -1 && strstr(buf_str(&err), "/open is writable by"),
               "a link in a directory others can write, to a safe file: refused");
        conf_free(&c);
        conf_defaults(&c);
        buf_reset(&err);
        rc = conf_load(&c, link_to_open, NULL, &err, &warn);
        TAP_OK(rc == -1 && strstr(buf_str(&err), "/open is writable by"),
               "a link in a safe directory, to a file in one others can write: refused");
        conf_free(&c);
        unlink(link_in_open);
        unlink(link_to_open);
        free(link_in_open);
        free(link_to_open);
        free(safe);
        chmod(sub, 01777);
        conf_defaults(&c);
        TAP_INT(conf_load(&c, path, NULL, &err, &warn), 0, "the same directory with the sticky bit");
        conf_free(&c);
        chmod(sub, 0700);
        free(path);
        free(sub);
    }

    /* api_key_cmd has a time limit; its whole process group is killed */
    {
        conf_defaults(&c);
        conf_set(&c, "key_cmd_timeout", "0.5", &err);
        static const struct {
            const char *cmd, *name;
        } slow[] = {
            {"sleep 30", "a command that never ends"},
            {"sleep 30 & echo sk-from-a-child", "a child that keeps the output open"},
        };
        for (size_t i = 0; i < 2; i++) {
            char *pidfile = xasprintf("%s/pid%zu", dir, i);
            char *cmd = xasprintf("sh -c 'echo $$ >%s; exec sleep 31' & %s", pidfile,
                                  slow[i].cmd);
            conf_set(&c, "api_key_cmd", cmd, &err);
            buf_reset(&err);
            double t0 = util_now();
            char *k = conf_api_key(&c, &err);
            double dt = util_now() - t0;
            if (!TAP_OK(k == NULL && strstr(buf_str(&err), "did not finish in 0.5 s (killed)") &&
                            strstr(buf_str(&err), "key_cmd_timeout"),
                        "%s: refused, said so", slow[i].name))
                printf("#   got: %s\n", buf_str(&err));
            TAP_OK(dt > 0.4 && dt < 3, "%s: ended after %.2f s (limit 0.5 s)", slow[i].name, dt);
            /* the background sleep of the same group is gone too */
            char *pidtext = util_read_file(pidfile, NULL, 100);
            int gone = 0;
            for (int tries = 0; pidtext && tries < 100 && !gone; tries++) {
                char *stat = xasprintf("/proc/%d/stat", atoi(pidtext));
                char *st = util_read_file(stat, NULL, 0);
                char *paren = st ? strrchr(st, ')') : NULL;
                gone = !st || (paren && paren[2] == 'Z');
                free(st);
                free(stat);
                if (!gone)
                    usleep(20000);
            }
            TAP_OK(pidtext && gone, "%s: the group's other processes killed", slow[i].name);
            util_free_secret(k);
            free(pidtext);
            free(pidfile);
            free(cmd);
        }
        conf_set(&c, "api_key_cmd", "echo 'sk-quick'; exit 0", &err);
        buf_reset(&err);
        char *k = conf_api_key(&c, &err);
        TAP_STR(k, "sk-quick", "a quick command within the limit: its key");
        free(k);
        conf_set(&c, "api_key_cmd", "echo sk-partial; exit 4", &err);
        buf_reset(&err);
        k = conf_api_key(&c, &err);
        TAP_OK(!k && strstr(buf_str(&err), "exit status 4"), "a failing command: its status");
        conf_set(&c, "api_key_cmd", "echo sk-first-line; head -c 100000 /dev/zero", &err);
        buf_reset(&err);
        k = conf_api_key(&c, &err);
        TAP_STR(k, "sk-first-line", "100 KB after the first line: the first line is the key");
        free(k);
        conf_set(&c, "api_key_cmd", "head -c 100000 /dev/zero | tr '\\0' x; echo", &err);
        buf_reset(&err);
        k = conf_api_key(&c, &err);
        TAP_OK(!k && strstr(buf_str(&err), "longer than"), "a first line of 100 KB: refused (%s)",
               buf_str(&err));
        {
            /* stdin and stdout closed: the pipe is descriptors 0 and 1 themselves */
            int saved_in = dup(0), saved_out = dup(1);
            close(0);
            close(1);
            conf_set(&c, "api_key_cmd", "echo sk-with-stdout-closed", &err);
            buf_reset(&err);
            k = conf_api_key(&c, &err);
            dup2(saved_in, 0);
            dup2(saved_out, 1);
            close(saved_in);
            close(saved_out);
            TAP_STR(k, "sk-with-stdout-closed", "stdout closed: the key still comes through");
            free(k);
        }
        conf_set(&c, "keys", "cmd:sleep 30", &err);
        char **labels, **values;
        buf_reset(&err);
        double t0 = util_now();
        int n = conf_key_pool(&c, &labels, &values, &err);
        double dt = util_now() - t0;
        TAP_OK(n == -1 && dt < 3 && strstr(buf_str(&err), "did not finish"),
               "a cmd: key has the same limit (%.2f s): %s", dt, buf_str(&err));
        conf_free(&c);
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
    /* no $HOME (cron, a systemd unit, env -i): the passwd entry's home, as a shell finds ~;
     * until 2026-12 it was /tmp, where any user could plant a config whose base_url got the key */
    struct passwd *pw = getpwuid(getuid());
    char *want = xasprintf("%s/.local/share/tokterm", pw && pw->pw_dir ? pw->pw_dir : "?");
    unsetenv("HOME");
    d = conf_dir("data");
    TAP_STR(d, want, "HOME unset: the passwd entry's home, not /tmp");
    free(d);
    setenv("HOME", "", 1);
    d = conf_dir("data");
    TAP_STR(d, want, "HOME empty: the same");
    free(d);
    free(want);
    setenv("HOME", "/home/u", 1);
    /* a file option's ~/ is the home (it made a directory named ~ in the working directory) */
    conf_defaults(&c);
    buf_reset(&err);
    TAP_INT(conf_set(&c, "db", "~/work/chats.db", &err), 0, "db = ~/work/chats.db");
    TAP_STR(c.db, "/home/u/work/chats.db", "db: ~/ is the home");
    conf_set(&c, "cacert", "~/ca.pem", &err);
    TAP_STR(c.cacert, "/home/u/ca.pem", "cacert: ~/ is the home");
    conf_set(&c, "db", "~user/x.db", &err);
    TAP_STR(c.db, "~user/x.db", "db: ~user is left as written");
    conf_set(&c, "system", "~/not a path", &err);
    TAP_STR(c.system, "~/not a path", "system: not a file, left as written");
    conf_free(&c);

    /* state = redis://...: checked when read; its password from the URL, an env or a command */
    buf_reset(&err);
    TAP_INT(load(&c, "state = http://127.0.0.1:6379\n", NULL, &err, &warn), -1,
            "state: not a redis:// URL is an error");
    TAP_OK(strstr(buf_str(&err), "redis://[user:password@]host:port/db"), "says what it wants");
    conf_free(&c);
    buf_reset(&err);
    TAP_INT(load(&c, "[team]\nstate = redis://:pw@10.0.0.5:6380/1\n", "team", &err, &warn), 0,
            "state in a profile");
    TAP_STR(c.state, "redis://:pw@10.0.0.5:6380/1", "state read");
    TAP_INT(conf_state_password(&c, &err), 0, "no password source: the URL's");
    TAP_OK(c.state_password == NULL, "nothing resolved");
    conf_free(&c);
    TAP_INT(load(&c, "state = unix:///run/r.sock\nstate_password_env = TT_REDIS_PW\n", NULL, &err,
                 &warn), 0, "state_password_env");
    unsetenv("TT_REDIS_PW");
    buf_reset(&err);
    TAP_INT(conf_state_password(&c, &err), -1, "its variable unset: an error");
    TAP_OK(strstr(buf_str(&err), "TT_REDIS_PW"), "naming the variable");
    setenv("TT_REDIS_PW", "pw-from-env", 1);
    TAP_INT(conf_state_password(&c, &err), 0, "its variable set");
    TAP_STR(c.state_password, "pw-from-env", "the password from the environment");
    conf_free(&c);
    buf_reset(&err);
    TAP_INT(load(&c, "state = redis://h:1\nstate_password_cmd = echo pw-from-cmd\n", NULL, &err,
                 &warn), 0, "state_password_cmd");
    TAP_INT(conf_state_password(&c, &err), 0, "its command runs");
    TAP_STR(c.state_password, "pw-from-cmd", "the password from the command");
    conf_free(&c);
    buf_free(&err);
    buf_free(&warn);
    /* the profiles of a file: not [default], [role NAME] or [mcp NAME]; [profile x] is x */
    static const char names_text[] =
        "model = top\n[default]\nmodel = d\n[work]\n[role terse]\nsystem = x\n"
        "[mcp fs]\ncommand = x\n[profile \"home lab\"]\n[work]\nmodel = again\n[mcpx]\n";
    size_t nn;
    char **names = conf_profile_names(names_text, sizeof names_text - 1, &nn);
    TAP_INT(nn, 3, "profile names: three");
    TAP_STR(names[0], "work", "profile names: [work], once");
    TAP_STR(names[1], "home lab", "profile names: [profile \"home lab\"]");
    TAP_STR(names[2], "mcpx", "profile names: [mcpx] is a profile, [mcp fs] is not");
    TAP_OK(names[3] == NULL, "profile names: the list ends in NULL");
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    names = conf_profile_names("", 0, &nn);
    TAP_OK(nn == 0 && names && !names[0], "profile names: none in an empty file");
    free(names);
    char *cmd = xasprintf("rm -rf %s", dir);
    (void)!system(cmd);
    free(cmd);
    return tap_done();
}
