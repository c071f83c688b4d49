/* conf.c - option table, INI profiles, XDG paths, key sources. */
#include "config.h"
#include "core/conf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/ini.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>

enum opt_type { OPT_STR, OPT_LONG, OPT_DOUBLE, OPT_BOOL };

struct opt {
    const char *name;
    enum opt_type type;
    size_t off;
    size_t flag_off;  /* an int set to 1 with the value ("has_temperature"); 0 = none */
    double min, max;
};

#define O(f) offsetof(struct conf, f)
static const struct opt conf_opts[] = {
    {"base_url", OPT_STR, O(base_url), 0, 0, 0},
    {"model", OPT_STR, O(model), 0, 0, 0},
    {"system", OPT_STR, O(system), 0, 0, 0},
    {"api_key_env", OPT_STR, O(api_key_env), 0, 0, 0},
    {"api_key_cmd", OPT_STR, O(api_key_cmd), 0, 0, 0},
    {"api_key", OPT_STR, O(api_key), 0, 0, 0},
    {"auth_header", OPT_STR, O(auth_header), 0, 0, 0},
    /* the sampling parameters, one row each from API_SAMPLING (INT also takes 0: not sent) */
#define CONF_PARAM_OPT_INT(f, lo, hi) {#f, OPT_LONG, O(f), 0, 0, hi},
#define CONF_PARAM_OPT_REAL(f, lo, hi) {#f, OPT_DOUBLE, O(f), O(has_##f), lo, hi},
#define CONF_PARAM_OPT_WHOLE(f, lo, hi) {#f, OPT_LONG, O(f), O(has_##f), lo, hi},
#define CONF_PARAM_OPT(f, kind, lo, hi, opt, shrt, metavar, help) CONF_PARAM_OPT_##kind(f, lo, hi)
    API_SAMPLING(CONF_PARAM_OPT)
#undef CONF_PARAM_OPT
    {"max_tokens_field", OPT_STR, O(max_tokens_field), 0, 0, 0},
    {"include_usage", OPT_BOOL, O(include_usage), 0, 0, 1},
    {"connect_timeout_ms", OPT_LONG, O(connect_timeout_ms), 0, 1, 600000},
    {"idle_timeout", OPT_DOUBLE, O(idle_timeout), 0, 0.1, 86400},
    {"max_time", OPT_DOUBLE, O(max_time), 0, 0, 864000},
    {"max_answer_mb", OPT_LONG, O(max_answer_mb), 0, 1, 4096},
    {"key_cmd_timeout", OPT_DOUBLE, O(key_cmd_timeout), 0, 0.1, 3600},
    {"cacert", OPT_STR, O(cacert), 0, 0, 0},
    {"insecure", OPT_BOOL, O(insecure), 0, 0, 1},
    {"theme", OPT_STR, O(theme), 0, 0, 0},
    {"save", OPT_BOOL, O(save), 0, 0, 1},
    {"cache_ttl_days", OPT_DOUBLE, O(cache_ttl_days), 0, 0, 36500},
    {"cache_max_mb", OPT_LONG, O(cache_max_mb), 0, 0, 1000000},
    {"db", OPT_STR, O(db), 0, 0, 0},
    {"context_window", OPT_LONG, O(context_window), 0, 0, 100000000},
    {"encoding", OPT_STR, O(encoding), 0, 0, 0},
    {"reserve_tokens", OPT_LONG, O(reserve_tokens), 0, 0, 10000000},
    {"context_policy", OPT_STR, O(context_policy), 0, 0, 0},
    {"budget_tokens", OPT_LONG, O(budget_tokens), 0, 0, 1e15},
    {"budget_usd", OPT_DOUBLE, O(budget_usd), 0, 0, 1e9},
    {"max_retries", OPT_LONG, O(max_retries), 0, 0, 20},
    {"max_retry_wait", OPT_DOUBLE, O(max_retry_wait), 0, 0, 86400},
    {"rpm", OPT_DOUBLE, O(rpm), 0, 0, 1e9},
    {"tpm", OPT_DOUBLE, O(tpm), 0, 0, 1e12},
    {"keys", OPT_STR, O(keys), 0, 0, 0},
    {"fallback", OPT_STR, O(fallback), 0, 0, 0},
    {"fallback_model", OPT_STR, O(fallback_model), 0, 0, 0},
    {"breaker_failures", OPT_LONG, O(breaker_failures), 0, 1, 1000},
    {"breaker_cooldown", OPT_DOUBLE, O(breaker_cooldown), 0, 0.1, 86400},
};
#undef O
/* struct conf's profile_set has a bit per option. */
_Static_assert(TT_ARRAY_LEN(conf_opts) <= sizeof(unsigned long) * CHAR_BIT,
               "more options than bits in profile_set");

static char **conf_str(struct conf *c, const struct opt *o)
{
    return (char **)((char *)c + o->off);
}

void conf_defaults(struct conf *c)
{
    memset(c, 0, sizeof *c);
    c->base_url = xstrdup("https://api.openai.com/v1");
    c->model = xstrdup("gpt-4o-mini");
    c->api_key_env = xstrdup("OPENAI_API_KEY");
    c->auth_header = xstrdup("Authorization");
    c->max_tokens_field = xstrdup("max_tokens");
    c->include_usage = 1;
    c->connect_timeout_ms = 10000;
    c->idle_timeout = 90;
    c->max_answer_mb = 64;
    c->key_cmd_timeout = 10;
    c->theme = xstrdup("dark");
    c->save = 1;
    c->cache_ttl_days = 7;
    c->cache_max_mb = 100;
    c->context_policy = xstrdup("summarize");
    c->max_retries = 2;
    c->max_retry_wait = 60;
    c->breaker_failures = 5;
    c->breaker_cooldown = 30;
}

/* Free the string option *p of o; api_key is wiped first. */
static void conf_free_str(const struct opt *o, char **p)
{
    if (o->off == offsetof(struct conf, api_key))
        util_free_secret(*p);
    else
        free(*p);
    *p = NULL;
}

void conf_free(struct conf *c)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(conf_opts); i++)
        if (conf_opts[i].type == OPT_STR) {
            conf_free_str(&conf_opts[i], conf_str(c, &conf_opts[i]));
        }
    free(c->profile);
    free(c->path);
    c->profile = c->path = NULL;
}

static const struct opt *conf_find(const char *key)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(conf_opts); i++)
        if (strcmp(conf_opts[i].name, key) == 0)
            return &conf_opts[i];
    return NULL;
}

static int conf_parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* The values a string option allows, "a|b|c", or NULL for any text. */
static const char *conf_choices(const char *key)
{
    if (strcmp(key, "encoding") == 0)
        return "o200k_base|cl100k_base";
    if (strcmp(key, "context_policy") == 0)
        return "summarize|summarise|truncate|off";
    return NULL;
}

/* 1 when value is one of the '|'-separated choices. */
static int conf_choice_ok(const char *choices, const char *value)
{
    size_t n = strlen(value);
    for (const char *p = choices; *p;) {
        size_t l = strcspn(p, "|");
        if (l == n && strncmp(p, value, n) == 0)
            return 1;
        p += l + (p[l] == '|');
    }
    return 0;
}

int conf_set(struct conf *c, const char *key, const char *value, struct buf *err)
{
    const struct opt *o = conf_find(key);
    if (!o) {
        buf_printf(err, "unknown option '%s'", key);
        return -1;
    }
    char *end;
    switch (o->type) {
    case OPT_STR: {
        const char *choices = conf_choices(key);
        if (choices && !conf_choice_ok(choices, value)) {
            buf_printf(err, "%s must be one of %s, not '%s'", key, choices, value);
            return -1;
        }
        char **p = conf_str(c, o);
        conf_free_str(o, p);
        *p = xstrdup(value);
        return 0;
    }
    case OPT_LONG: {
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end || v < (long)o->min || v > (long)o->max) {
            buf_printf(err, "%s must be a whole number from %.0f to %.0f, not '%s'", key, o->min,
                       o->max, value);
            return -1;
        }
        *(long *)((char *)c + o->off) = v;
        if (o->flag_off)
            *(int *)((char *)c + o->flag_off) = 1;
        return 0;
    }
    case OPT_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end || !(v >= o->min && v <= o->max)) {
            buf_printf(err, "%s must be a number from %g to %g, not '%s'", key, o->min, o->max,
                       value);
            return -1;
        }
        *(double *)((char *)c + o->off) = v;
        if (o->flag_off)
            *(int *)((char *)c + o->flag_off) = 1;
        return 0;
    }
    case OPT_BOOL: {
        int b;
        if (conf_parse_bool(value, &b) < 0) {
            buf_printf(err, "%s must be true or false, not '%s'", key, value);
            return -1;
        }
        *(int *)((char *)c + o->off) = b;
        return 0;
    }
    }
    return -1;
}

/* One setting of the file (pieces of its text), or a section marker (key ""). */
struct conf_line {
    int lineno;
    char *section;   /* NULL for top-level */
    char *key, *value;
};

static void conf_unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && ((v[0] == '"' && v[n - 1] == '"') || (v[0] == '\'' && v[n - 1] == '\''))) {
        memmove(v, v + 1, n - 2);
        v[n - 2] = '\0';
    }
}

/* Section header "[name]" or "[profile name]" -> name. */
static char *conf_section_name(char *s)
{
    s = util_trim(s);
    if (strncmp(s, "profile ", 8) == 0)
        s = util_trim(s + 8);
    conf_unquote(s);
    return s;
}

static int conf_apply_section(struct conf *c, struct conf_line *lines, size_t n,
                                const char *section, const char *path, struct buf *err)
{
    for (size_t i = 0; i < n; i++) {
        int match = section ? lines[i].section && strcmp(lines[i].section, section) == 0
                            : !lines[i].section || strcmp(lines[i].section, "default") == 0;
        if (!match || !lines[i].key[0])
            continue; /* a section marker */
        struct buf e = BUF_INIT;
        if (section)
            c->profile_set |= 1ul << (conf_find(lines[i].key) - conf_opts);
        if (conf_set(c, lines[i].key, lines[i].value, &e) < 0) {
            buf_printf(err, "%s:%d: %s", path, lines[i].lineno, buf_str(&e));
            buf_free(&e);
            return -1;
        }
        buf_free(&e);
    }
    return 0;
}

/* Messages quote text from the file: make control bytes and escape sequences in it harmless
 * before anyone prints them (a config file must not drive the terminal). */
static void conf_clean(struct buf *b)
{
    if (!b->len)
        return;
    struct buf t = BUF_INIT;
    utf8_sanitize(&t, b->data, b->len);
    buf_reset(b);
    buf_append(b, t.data, t.len);
    buf_free(&t);
}

/* What conf_read_line gathers from the file. */
struct conf_reader {
    const char *path;
    struct buf *err, *warn;
    struct conf_line *lines; /* the settings, in order, and a marker for each section */
    size_t n, cap;
    char *section;           /* the current section's profile name; NULL at the top */
    char *chosen;            /* the top-level "profile =" */
};

/* One line of the config file (an ini_handler): the message of a malformed line, else the
 * setting or section marker remembered for conf_apply_section. */
static int conf_read_line(void *ud, struct ini_line *l)
{
    struct conf_reader *r = ud;
    const char *path = r->path;
    int lineno = l->lineno;
    char *key, *value;
    if (l->type == INI_ERROR) {
        if (l->error == INI_ERR_SECTION)
            buf_printf(r->err, "%s:%d: a section header must look like [name]", path, lineno);
        else if (l->error == INI_ERR_NO_EQUALS)
            buf_printf(r->err, "%s:%d: expected 'key = value', got '%.40s'", path, lineno,
                       l->text);
        else /* a NUL byte: conf_load refuses the file before */
            buf_printf(r->err, "%s:%d: not a text file", path, lineno);
        return -1;
    }
    if (l->type == INI_SECTION) {
        r->section = conf_section_name(l->section);
        if (!*r->section) {
            buf_printf(r->err, "%s:%d: empty section name", path, lineno);
            return -1;
        }
        /* A marker line (empty key) remembers the section even when it has no keys. */
        key = value = "";
    } else {
        key = l->key;
        value = l->value;
        conf_unquote(value);
        if (!*key) {
            buf_printf(r->err, "%s:%d: missing key before '='", path, lineno);
            return -1;
        }
    }
    if (*key && strcmp(key, "profile") == 0) {
        if (r->section)
            buf_printf(r->warn, "%s:%d: 'profile' only means something at the top\n", path,
                       lineno);
        else
            r->chosen = value;
        return 0;
    }
    if (*key && !conf_find(key)) {
        buf_printf(r->warn, "%s:%d: unknown option '%s' ignored\n", path, lineno, key);
        return 0;
    }
    if (strcmp(key, "api_key") == 0) {
        struct stat st;
        if (stat(path, &st) == 0 && (st.st_mode & 077))
            buf_printf(r->warn, "%s holds an API key and other users can read it: chmod 600 %s\n",
                       path, path);
    }
    XGROW(r->lines, r->n + 1, r->cap);
    r->lines[r->n++] = (struct conf_line){lineno, r->section, key, value};
    return 0;
}

int conf_load(struct conf *c, const char *path, const char *explicit_profile,
                struct buf *err, struct buf *warn)
{
    size_t len;
    char *text = util_read_file(path, &len, 4 << 20);
    if (!text) {
        if (errno == ENOENT) {
            if (explicit_profile) {
                buf_printf(err, "profile '%s' asked for, but there is no config file %s",
                           explicit_profile, path);
                return -1;
            }
            return 1;
        }
        buf_printf(err, "%s: %s", path, errno == EFBIG ? "larger than 4 MiB" : strerror(errno));
        return -1;
    }
    if (memchr(text, '\0', len)) {
        buf_printf(err, "%s: not a text file (it contains NUL bytes)", path);
        util_wipe(text, len);
        free(text);
        return -1;
    }
    struct conf_reader r = {.path = path, .err = err, .warn = warn};
    int rc = ini_parse(text, len, 0, conf_read_line, &r, NULL) == 0 ? 0 : -1;
    struct conf_line *lines = r.lines;
    size_t n = r.n;
    const char *chosen = r.chosen;
    const char *profile = explicit_profile ? explicit_profile : chosen;
    if (rc == 0)
        rc = conf_apply_section(c, lines, n, NULL, path, err);
    if (rc == 0 && profile) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = lines[i].section && strcmp(lines[i].section, profile) == 0;
        if (!found) {
            buf_printf(err, "%s: no profile '%s' (sections define profiles: [%s])", path, profile,
                       profile);
            rc = -1;
        } else {
            rc = conf_apply_section(c, lines, n, profile, path, err);
            free(c->profile);
            c->profile = xstrdup(profile);
            c->profile_explicit = explicit_profile != NULL;
        }
    }
    struct stat st;
    if (rc == 0 && stat(path, &st) == 0 && (st.st_mode & 002))
        buf_printf(warn, "%s is writable by every user: chmod 600 %s\n", path, path);
    conf_clean(err);
    conf_clean(warn);
    free(lines);
    util_wipe(text, len); /* it may hold an api_key */
    free(text);
    if (rc == 0) {
        free(c->path);
        c->path = xstrdup(path);
    }
    return rc;
}

/* 1 when the explicitly chosen profile set option `name`. */
static int conf_profile_owns(const struct conf *c, const char *name)
{
    const struct opt *o = conf_find(name);
    return c->profile_explicit && o && (c->profile_set & (1ul << (o - conf_opts)));
}

void conf_apply_env(struct conf *c)
{
    const char *v = getenv("OPENAI_BASE_URL");
    if (v && *v && !conf_profile_owns(c, "base_url")) {
        free(c->base_url);
        c->base_url = xstrdup(v);
    }
    v = getenv("TOKTERM_MODEL");
    if (v && *v && !conf_profile_owns(c, "model")) {
        free(c->model);
        c->model = xstrdup(v);
    }
}

static char *conf_run_key_cmd(const char *cmd, struct buf *err)
{
    FILE *p = popen(cmd, "r");
    if (!p) {
        buf_printf(err, "api_key_cmd could not run: %s", strerror(errno));
        return NULL;
    }
    setvbuf(p, NULL, _IONBF, 0); /* the key is read into line only, no stdio buffer */
    char line[4096];
    size_t got = fread(line, 1, sizeof line - 1, p);
    line[got] = '\0';
    int st = pclose(p);
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = '\0';
    char *key = util_trim(line);
    if (st != 0 || !*key) {
        buf_printf(err, "api_key_cmd %s", st != 0 ? "failed (non-zero exit status)"
                                                  : "printed nothing");
        util_wipe(line, sizeof line);
        return NULL;
    }
    char *out = xstrdup(key);
    util_wipe(line, sizeof line);
    return out;
}

char *conf_api_key(const struct conf *c, struct buf *err)
{
    if (c->api_key_cmd && *c->api_key_cmd)
        return conf_run_key_cmd(c->api_key_cmd, err);
    if (c->api_key_env && *c->api_key_env) {
        const char *v = getenv(c->api_key_env);
        if (v && *v)
            return xstrdup(v);
    }
    if (c->api_key && *c->api_key)
        return xstrdup(c->api_key);
    return NULL;
}

void conf_pool_free(char **labels, char **values, int n)
{
    for (int i = 0; i < n; i++) {
        if (values)
            util_free_secret(values[i]);
        if (labels)
            free(labels[i]);
    }
    free(labels);
    free(values);
}

int conf_key_pool(const struct conf *c, char ***labels, char ***values, struct buf *err)
{
    *labels = *values = NULL;
    if (!c->keys || !*c->keys)
        return 0;
    char *list = xstrdup(c->keys);
    int n = 0, cmds = 0;
    size_t cap_labels = 0, cap_values = 0;
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        item = util_trim(item);
        if (!*item)
            continue;
        char *label, *value;
        if (strncmp(item, "cmd:", 4) == 0) {
            label = xasprintf("cmd%d", ++cmds);
            value = conf_run_key_cmd(util_trim(item + 4), err);
        } else {
            const char *name = strncmp(item, "env:", 4) == 0 ? util_trim(item + 4) : item;
            const char *v = getenv(name);
            label = xstrdup(name);
            value = v && *v ? xstrdup(v) : NULL;
            if (!value)
                buf_printf(err, "keys: the variable %s is not set", name);
        }
        if (!value) {
            free(label);
            conf_pool_free(*labels, *values, n);
            *labels = *values = NULL;
            free(list);
            return -1;
        }
        XGROW(*labels, (size_t)n + 1, cap_labels);
        XGROW(*values, (size_t)n + 1, cap_values);
        (*labels)[n] = label;
        (*values)[n] = value;
        n++;
    }
    free(list);
    return n;
}

char *conf_dir(const char *kind)
{
    static const struct {
        const char *kind, *env, *fallback;
    } dirs[] = {
        {"config", "XDG_CONFIG_HOME", ".config"},
        {"data", "XDG_DATA_HOME", ".local/share"},
        {"state", "XDG_STATE_HOME", ".local/state"},
        {"cache", "XDG_CACHE_HOME", ".cache"},
    };
    for (size_t i = 0; i < TT_ARRAY_LEN(dirs); i++) {
        if (strcmp(dirs[i].kind, kind) != 0)
            continue;
        const char *v = getenv(dirs[i].env);
        if (v && v[0] == '/')
            return xasprintf("%s/tokterm", v);
        const char *home = getenv("HOME");
        return xasprintf("%s/%s/tokterm", home && *home ? home : "/tmp", dirs[i].fallback);
    }
    return xstrdup("/tmp/tokterm");
}

char *conf_host(const struct conf *c)
{
    const char *s = c->base_url ? c->base_url : "";
    const char *p = strstr(s, "://");
    p = p ? p + 3 : s;
    const char *at = NULL;
    for (const char *q = p; *q && *q != '/'; q++)
        if (*q == '@')
            at = q; /* user:password@host: never show the credentials */
    if (at)
        p = at + 1;
    size_t n = strcspn(p, "/?#");
    return xstrndup(p, n);
}

int conf_is_local(const struct conf *c)
{
    char *h = conf_host(c);
    char *colon = strrchr(h, ':');
    if (colon && h[0] != '[')
        *colon = '\0';
    int local = strcmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0 ||
                strcmp(h, "[::1]") == 0 || strncmp(h, "[::1]", 5) == 0 || strcmp(h, "0.0.0.0") == 0;
    free(h);
    return local;
}
