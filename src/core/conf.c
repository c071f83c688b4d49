/* conf.c - option table, INI profiles, XDG paths, key sources. */
#include "config.h"
#include "core/conf.h"
#include "net/state.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "text/ini.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    {"api", OPT_STR, O(api), 0, 0, 0},
    {"base_url", OPT_STR, O(base_url), 0, 0, 0},
    {"model", OPT_STR, O(model), 0, 0, 0},
    {"system", OPT_STR, O(system), 0, 0, 0},
    {"role", OPT_STR, O(role), 0, 0, 0},
    {"mcp", OPT_STR, O(mcp), 0, 0, 0},
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
    {"reasoning_effort", OPT_STR, O(reasoning_effort), 0, 0, 0},
    {"extra_body", OPT_STR, O(extra_body), 0, 0, 0},
    {"pdf", OPT_STR, O(pdf), 0, 0, 0},
    {"include_usage", OPT_BOOL, O(include_usage), 0, 0, 1},
    {"connect_timeout_ms", OPT_LONG, O(connect_timeout_ms), 0, 1, 600000},
    {"idle_timeout", OPT_DOUBLE, O(idle_timeout), 0, 0.1, 86400},
    {"max_time", OPT_DOUBLE, O(max_time), 0, 0, 864000},
    {"max_answer_mb", OPT_LONG, O(max_answer_mb), 0, 1, 4096},
    {"tool_rounds", OPT_LONG, O(tool_rounds), 0, 1, 1000},
    {"allow", OPT_STR, O(allow), 0, 0, 0},
    {"key_cmd_timeout", OPT_DOUBLE, O(key_cmd_timeout), 0, 0.1, 3600},
    {"cacert", OPT_STR, O(cacert), 0, 0, 0},
    {"insecure", OPT_BOOL, O(insecure), 0, 0, 1},
    {"theme", OPT_STR, O(theme), 0, 0, 0},
    {"render", OPT_STR, O(render), 0, 0, 0},
    {"hyperlinks", OPT_STR, O(hyperlinks), 0, 0, 0},
    {"highlight", OPT_BOOL, O(highlight), 0, 0, 1},
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
    {"max_rate_wait", OPT_DOUBLE, O(max_rate_wait), 0, 0, 86400},
    {"rpm", OPT_DOUBLE, O(rpm), 0, 0, 1e9},
    {"tpm", OPT_DOUBLE, O(tpm), 0, 0, 1e12},
    {"state", OPT_STR, O(state), 0, 0, 0},
    {"state_password_env", OPT_STR, O(state_password_env), 0, 0, 0},
    {"state_password_cmd", OPT_STR, O(state_password_cmd), 0, 0, 0},
    {"keys", OPT_STR, O(keys), 0, 0, 0},
    {"fallback", OPT_STR, O(fallback), 0, 0, 0},
    {"fallback_model", OPT_STR, O(fallback_model), 0, 0, 0},
    {"breaker_failures", OPT_LONG, O(breaker_failures), 0, 1, 1000},
    {"breaker_cooldown", OPT_DOUBLE, O(breaker_cooldown), 0, 0.1, 86400},
    {"attach_max_files", OPT_LONG, O(attach_max_files), 0, 1, 100000},
    {"attach_max_bytes", OPT_LONG, O(attach_max_bytes), 0, 1, 64L << 20},
    {"attach_url_timeout", OPT_DOUBLE, O(attach_url_timeout), 0, 0.1, 600},
    {"attach_url_max_bytes", OPT_LONG, O(attach_url_max_bytes), 0, 1, 64L << 20},
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
    c->api = xstrdup(dialect_openai.name);
    c->base_url = xstrdup(dialect_openai.base_url);
    c->model = xstrdup(dialect_openai.model);
    c->api_key_env = xstrdup(dialect_openai.key_env[0]);
    c->auth_header = xstrdup(dialect_openai.auth_header);
    c->max_tokens_field = xstrdup("max_tokens");
    c->include_usage = 1;
    c->highlight = 1;
    c->connect_timeout_ms = 10000;
    c->idle_timeout = 90;
    c->max_answer_mb = 64;
    c->tool_rounds = 10;
    c->key_cmd_timeout = 10;
    c->theme = xstrdup("dark");
    c->render = xstrdup("auto");
    c->hyperlinks = xstrdup("auto");
    c->save = 1;
    c->cache_ttl_days = 7;
    c->cache_max_mb = 100;
    c->context_policy = xstrdup("summarize");
    c->max_retries = 2;
    c->max_retry_wait = 60;
    c->max_rate_wait = 120;
    c->breaker_failures = 5;
    c->breaker_cooldown = 30;
    c->attach_max_files = 200;
    c->attach_max_bytes = 1L << 20;
    c->attach_url_timeout = 20;
    c->attach_url_max_bytes = 5L << 20;
}

/* Free the string option *p of o; api_key is wiped first. */
static void conf_free_str(const struct opt *o, char **p)
{
    if (o->off == offsetof(struct conf, api_key) || o->off == offsetof(struct conf, state))
        util_free_secret(*p); /* a state URL may hold a password */
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
    util_free_secret(c->state_password);
    free(c->profile);
    free(c->path);
    c->profile = c->path = NULL;
    c->state_password = NULL;
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
    if (strcmp(key, "reasoning_effort") == 0)
        return "none|low|medium|high";
    if (strcmp(key, "render") == 0 || strcmp(key, "hyperlinks") == 0)
        return "auto|always|never";
    if (strcmp(key, "pdf") == 0)
        return "auto|document|text";
    if (strcmp(key, "max_tokens_field") == 0) /* until 2026-12 any name was sent: a typo
                                                 dropped the length limit */
        return "max_tokens|max_completion_tokens";
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

/* What is wrong with url as a base URL (what[size] may hold the text), or NULL. */
static const char *conf_url_problem(const char *url, char *what, size_t size)
{
    for (const char *q = url; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == 0x7f)
            return "it holds blank space or a control character";
    const char *sep = strstr(url, "://");
    if (!*url)
        return "it is empty";
    if (!sep)
        return "it has no http:// or https:// in front";
    size_t scheme = (size_t)(sep - url);
    if (!((scheme == 4 && strncasecmp(url, "http", 4) == 0) ||
          (scheme == 5 && strncasecmp(url, "https", 5) == 0))) {
        snprintf(what, size, "the scheme '%.*s' is neither http nor https",
                 (int)(scheme < 20 ? scheme : 20), url);
        return what;
    }
    const char *host = sep + 3, *end = host + strcspn(host, "/?#");
    for (const char *q = host; q < end; q++)
        if (*q == '@')
            host = q + 1; /* user:password@ */
    const char *port = NULL;
    if (*host == '[') { /* [IPv6]:port */
        const char *close = memchr(host, ']', (size_t)(end - host));
        if (!close || close == host + 1)
            return "the [IPv6 address] is not closed";
        if (close + 1 < end && close[1] != ':')
            return "something follows the ] of the address";
        if (close + 1 < end)
            port = close + 2;
    } else {
        const char *colon = memchr(host, ':', (size_t)(end - host));
        if (host == end || colon == host)
            return "it names no host";
        if (colon)
            port = colon + 1;
    }
    if (port) {
        long v = 0;
        const char *q = port;
        while (q < end && *q >= '0' && *q <= '9' && v <= 65535)
            v = v * 10 + (*q++ - '0');
        if (q != end || port == end || v < 1 || v > 65535)
            return "the port is not a number from 1 to 65535";
    }
    return NULL;
}

int conf_check_url(const char *url, const char *name, struct buf *err)
{
    char what[80];
    const char *why = conf_url_problem(url, what, sizeof what);
    if (!why)
        return 0;
    struct buf m = BUF_INIT; /* the URL made visible: it may hold control characters */
    buf_printf(&m, "%s must be an http:// or https:// URL with a host (like "
                   "https://api.openai.com/v1), not '%.200s%s': %s",
               name, url, strlen(url) > 200 ? "..." : "", why);
    conf_clean(&m);
    buf_append(err, m.data, m.len);
    buf_free(&m);
    return -1;
}

/* value is "" (none) or a JSON object, all of it: else -1 with err set. */
static int conf_check_object(const char *value, const char *name, struct buf *err)
{
    if (!*value)
        return 0;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(value, &end, 1);
    int ok = cJSON_IsObject(j), parsed = j != NULL;
    cJSON_Delete(j);
    if (ok)
        return 0;
    struct buf m = BUF_INIT; /* quotes the value: it may hold control characters */
    buf_printf(&m, "%s must be a JSON object on one line, like {\"top_k\": 40}, not '%.200s%s'%s",
               name, value, strlen(value) > 200 ? "..." : "",
               parsed ? "" : ": invalid JSON");
    conf_clean(&m);
    buf_append(err, m.data, m.len);
    buf_free(&m);
    return -1;
}

/* 1 when s is a variable's name: letters, digits and _, not starting with a digit. */
static int conf_var_name(const char *s, size_t n)
{
    if (!n || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= '0' && s[i] <= '9') || ((s[i] | 0x20) >= 'a' &&
                                                               (s[i] | 0x20) <= 'z')))
            return 0;
    return 1;
}

/* A setting that names variables holding secrets (api_key_env, state_password_env, the
 * NAME and env:NAME items of keys) given something that is not a name - most likely the key
 * itself, pasted there: refused without showing it. Until 2026-12 it was echoed on stderr and
 * by doctor ("the variable sk-proj-... is not set"), into CI logs. 0, or -1 with err set. */
static int conf_check_var_names(const char *key, const char *value, struct buf *err)
{
    int list = strcmp(key, "keys") == 0, item = 0;
    for (const char *p = value; *p;) {
        size_t n = list ? strcspn(p, ",") : strlen(p);
        const char *s = p, *e = p + n;
        p = *e ? e + 1 : e;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (s == e)
            continue;
        item++;
        if (list && (size_t)(e - s) >= 4 && strncmp(s, "cmd:", 4) == 0)
            continue;
        if (list && (size_t)(e - s) >= 4 && strncmp(s, "env:", 4) == 0)
            for (s += 4; s < e && (*s == ' ' || *s == '\t'); s++)
                ;
        if (conf_var_name(s, (size_t)(e - s)))
            continue;
        if (list)
            buf_printf(err, "keys: item %d is not a variable's name (letters, digits and _), so "
                       "it is not shown: a key goes in a variable named here (NAME or "
                       "env:NAME) or comes from cmd:COMMAND, never in the list itself", item);
        else
            buf_printf(err, "%s takes a variable's name (letters, digits and _); this value is "
                       "not one, so it is not shown: the secret goes in that variable, never "
                       "here", key);
        return -1;
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
        if (o->off == offsetof(struct conf, base_url) && conf_check_url(value, key, err) < 0)
            return -1;
        if (o->off == offsetof(struct conf, api) && !dialect_find(value)) {
            struct buf names = BUF_INIT;
            dialect_names(&names);
            buf_printf(err, "api must be one of %s, not '%s'", buf_str(&names), value);
            buf_free(&names);
            return -1;
        }
        if (o->off == offsetof(struct conf, extra_body) && conf_check_object(value, key, err) < 0)
            return -1;
        if ((o->off == offsetof(struct conf, api_key_env) ||
             o->off == offsetof(struct conf, state_password_env) ||
             o->off == offsetof(struct conf, keys)) &&
            conf_check_var_names(key, value, err) < 0)
            return -1;
        if (o->off == offsetof(struct conf, model) && !value[strspn(value, " \t\r\n")]) {
            /* a blank name goes out as "model": "" and the server refuses it */
            buf_printf(err, "model must name a model (tokterm models lists them), not '%s'",
                       value);
            return -1;
        }
        if (o->off == offsetof(struct conf, state) && *value) {
            struct state_addr a;
            char why[200];
            int bad = state_parse_url(value, &a, why, sizeof why);
            util_wipe(&a, sizeof a);
            if (bad) {
                buf_printf(err, "%s", why);
                return -1;
            }
        }
        char **p = conf_str(c, o);
        conf_free_str(o, p);
        const char *home = NULL;
        if ((o->off == offsetof(struct conf, db) || o->off == offsetof(struct conf, cacert)) &&
            value[0] == '~' && value[1] == '/' && (home = util_home()) != NULL)
            /* a file's ~/ is the home, as a shell reads it (until 2026-12 "db = ~/work/chats.db"
             * made a directory named ~ in the working directory, one per place it ran) */
            *p = xasprintf("%s%s", home, value + 1);
        else
            *p = *value || o->off != offsetof(struct conf, extra_body) ? xstrdup(value) : NULL;
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

void conf_copy(struct conf *dst, const struct conf *src, const char *key)
{
    const struct opt *o = conf_find(key);
    if (!o)
        return;
    if (o->type == OPT_STR) {
        char **p = conf_str(dst, o), *v = *conf_str((struct conf *)src, o);
        conf_free_str(o, p);
        *p = v ? xstrdup(v) : NULL;
    } else {
        memcpy((char *)dst + o->off, (const char *)src + o->off,
               o->type == OPT_DOUBLE ? sizeof(double) : o->type == OPT_LONG ? sizeof(long)
                                                                            : sizeof(int));
    }
    if (o->flag_off)
        *(int *)((char *)dst + o->flag_off) = *(const int *)((const char *)src + o->flag_off);
}

/* One setting of the file (pieces of its text), or a section marker (key ""). */
struct conf_line {
    int lineno;
    char *section;   /* NULL for top-level */
    char *key, *value;
};

/* Section header "[name]" or "[profile name]" -> name. */
static char *conf_section_name(char *s)
{
    s = util_trim(s);
    if (strncmp(s, "profile ", 8) == 0)
        s = util_trim(s + 8);
    ini_unquote(s);
    return s;
}

/* 1 when a section (named as conf_section_name gives it) is a profile. */
static int conf_is_profile(const char *section)
{
    return *section && strcmp(section, "default") != 0 && strncmp(section, "role ", 5) != 0 &&
           strncmp(section, "mcp ", 4) != 0;
}

struct conf_names {
    char **v;
    size_t n, cap;
};

static int conf_name_line(void *ud, struct ini_line *l)
{
    struct conf_names *c = ud;
    if (l->type != INI_SECTION)
        return 0;
    char *name = conf_section_name(l->section);
    if (!conf_is_profile(name))
        return 0;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i], name) == 0)
            return 0;
    XGROW(c->v, c->n + 2, c->cap);
    c->v[c->n++] = xstrdup(name);
    c->v[c->n] = NULL;
    return 0;
}

char **conf_profile_names(const char *text, size_t len, size_t *n)
{
    struct conf_names c = {0};
    char *copy = xstrndup(text, len);
    ini_parse(copy, len, INI_INLINE_COMMENTS, conf_name_line, &c, NULL);
    util_wipe(copy, len); /* the text may hold an api_key */
    free(copy);
    if (!c.v)
        c.v = xcalloc(1, sizeof *c.v);
    *n = c.n;
    return c.v;
}

char **conf_file_profile_names(const char *path, size_t *n)
{
    size_t len = 0;
    char *text = path ? util_read_file(path, &len, 4 << 20) : NULL;
    char **v = conf_profile_names(text ? text : "", text ? len : 0, n);
    if (text)
        util_wipe(text, len); /* it may hold an api_key */
    free(text);
    return v;
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

/* The option name nearest to an unknown key (a typo), or NULL when none is near. */
static const char *conf_suggest(const char *key)
{
    size_t n = strlen(key);
    size_t max = n <= 4 ? 1 : n <= 8 ? 2 : 3, best = max + 1;
    const char *name = NULL;
    for (size_t i = 0; i <= TT_ARRAY_LEN(conf_opts); i++) {
        const char *cand = i < TT_ARRAY_LEN(conf_opts) ? conf_opts[i].name : "profile";
        size_t d = util_distance(key, cand, max);
        if (d < best) {
            best = d;
            name = cand;
        }
    }
    return name;
}

/* 1 when a value of "keys =" holds a cmd: entry (a command conf_key_pool would run). */
static int conf_keys_run(const char *keys)
{
    for (const char *p = keys; *p;) {
        p += strspn(p, " \t,");
        if (strncmp(p, "cmd:", 4) == 0)
            return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

/* What conf_read_line gathers from the file. */
struct conf_reader {
    const char *path;
    struct buf *err, *warn;
    struct conf_line *lines; /* the settings, in order, and a marker for each section */
    size_t n, cap;
    char *section;           /* the current section's profile name; NULL at the top */
    char *chosen;            /* the top-level "profile =" */
    int chosen_line;         /* its line */
    int cmd_line;            /* the first line that sets a command (api_key_cmd, cmd: keys) */
    const char *cmd_key;     /* its key */
    size_t line_warns;       /* warnings about one line (the first CONF_WARN_MAX are given) */
    int key_warned;          /* the warning about an api_key others can read was given */
};

/* Warnings of one kind named one by one before the rest are counted in one line: a hostile
 * file of 4 MiB must not print 400,000 of them. */
#define CONF_WARN_MAX 20

/* The secret a line of the file holds in the clear, named for the warning given when others
 * can read the file, or NULL: api_key; a state URL's password; in an [mcp NAME] section a
 * header or env value whose name says secret (util_secret_name) written out, not taken from
 * a variable ($NAME) or the key ({key}). Until 2026-12 only api_key was warned about. */
static const char *conf_line_secret(const char *section, const char *key, const char *value)
{
    if (strcmp(key, "api_key") == 0)
        return *value ? "an API key" : NULL;
    if (strcmp(key, "state") == 0) {
        char *u = util_url_userinfo(value);
        const char *colon = u ? strchr(u, ':') : NULL;
        int pw = colon && colon[1];
        util_free_secret(u);
        return pw ? "a password (state)" : NULL;
    }
    if (!section || strncmp(section, "mcp ", 4) != 0)
        return NULL;
    int headers = strcmp(key, "headers") == 0, env = strcmp(key, "env") == 0;
    for (const char *p = value; (headers || env) && *p;) {
        size_t n = strcspn(p, headers ? ";" : " \t");
        const char *sep = memchr(p, headers ? ':' : '=', n);
        if (sep) {
            const char *end = p + n, *name = p, *v = sep + 1;
            while (name < sep && strchr(" \t\"'", *name))
                name++;
            while (v < end && strchr(" \t\"'", *v)) /* within the piece (a review: a blank
                                                      after '=' ran past it) */
                v++;
            size_t vn = (size_t)(end - v);
            int from_key = 0;
            for (const char *k = v; k + 5 <= end && !from_key; k++)
                from_key = memcmp(k, "{key}", 5) == 0;
            if (name < sep && util_secret_name(name, (size_t)(sep - name)) && vn &&
                !memchr(v, '$', vn) && !from_key)
                return headers ? "a header's secret ([mcp])" : "an env secret ([mcp])";
        }
        p += n + (p[n] != '\0');
    }
    return NULL;
}

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
        ini_unquote(value);
        if (!*key) {
            buf_printf(r->err, "%s:%d: missing key before '='", path, lineno);
            return -1;
        }
    }
    const char *secret = *key ? conf_line_secret(r->section, key, value) : NULL;
    if (secret && !r->key_warned) {
        struct stat st;
        r->key_warned = 1;
        if (stat(path, &st) == 0 && (st.st_mode & 077))
            buf_printf(r->warn, "%s holds %s and other users can read it: chmod 600 %s\n",
                       path, secret, path);
    }
    if (*key && r->section && strncmp(r->section, "role ", 5) == 0)
        return 0; /* a [role NAME] section: core/role.c reads it */
    if (*key && r->section && strncmp(r->section, "mcp ", 4) == 0)
        return 0; /* an [mcp NAME] section: mcp/conf.c reads it */
    if (*key && strcmp(key, "profile") == 0) {
        if (r->section) {
            if (++r->line_warns <= CONF_WARN_MAX)
                buf_printf(r->warn, "%s:%d: 'profile' only means something at the top\n", path,
                           lineno);
        } else {
            if (r->chosen && ++r->line_warns <= CONF_WARN_MAX)
                buf_printf(r->warn, "%s:%d: duplicate key 'profile' (first at line %d); the "
                                    "last one wins\n", path, lineno, r->chosen_line);
            r->chosen = value;
            r->chosen_line = lineno;
        }
        return 0;
    }
    if (*key && !conf_find(key)) {
        if (++r->line_warns > CONF_WARN_MAX)
            return 0;
        const char *near = conf_suggest(key);
        buf_printf(r->warn, "%s:%d: unknown option '%.60s%s' ignored", path, lineno, key,
                   strlen(key) > 60 ? "..." : "");
        if (near)
            buf_printf(r->warn, "; did you mean '%s'?", near);
        buf_appendc(r->warn, '\n');
        return 0;
    }
    int run_cmd = (strcmp(key, "api_key_cmd") == 0 || strcmp(key, "state_password_cmd") == 0) &&
                  *util_trim(value);
    if (!r->cmd_line && (run_cmd || (strcmp(key, "keys") == 0 && conf_keys_run(value)))) {
        r->cmd_line = lineno;
        r->cmd_key = strcmp(key, "keys") == 0 ? "a cmd: key" : run_cmd && key[0] == 's'
                     ? "state_password_cmd" : "api_key_cmd";
    }
    XGROW(r->lines, r->n + 1, r->cap);
    r->lines[r->n++] = (struct conf_line){lineno, r->section, key, value};
    return 0;
}

/* Where a setting or section marker belongs, for finding duplicates: the top level and
 * [default] are one place (""), each other section its own; a marker (key "") its section. */
static const char *conf_scope(const struct conf_line *l)
{
    if (!l->key[0])
        return l->section;
    return !l->section || strcmp(l->section, "default") == 0 ? "" : l->section;
}

/* Order of pointers into the lines: by place, key, then line. */
static int conf_line_cmp(const void *pa, const void *pb)
{
    const struct conf_line *a = *(const struct conf_line *const *)pa;
    const struct conf_line *b = *(const struct conf_line *const *)pb;
    int d = strcmp(conf_scope(a), conf_scope(b));
    if (!d)
        d = strcmp(a->key, b->key);
    return d ? d : (a > b) - (a < b);
}

/* first[i]: for a line that repeats a key of its section, or a section header that repeats
 * another, the line of the first one; else 0 (a new array of n). O(n log n) and 12 bytes a
 * line besides: a file of 4 MiB may hold 400,000 lines. */
static int *conf_duplicates(const struct conf_line *lines, size_t n)
{
    int *first = xcalloc(n ? n : 1, sizeof *first);
    const struct conf_line **by = xcalloc(n ? n : 1, sizeof *by);
    for (size_t i = 0; i < n; i++)
        by[i] = &lines[i];
    qsort(by, n, sizeof *by, conf_line_cmp);
    for (size_t i = 0, g; i < n; i = g)
        for (g = i + 1; g < n && strcmp(conf_scope(by[g]), conf_scope(by[i])) == 0 &&
                        strcmp(by[g]->key, by[i]->key) == 0; g++)
            first[by[g] - lines] = by[i]->lineno;
    free(by);
    return first;
}

/* The sections the file defines, for a message: "[a], [b]" (at most 20 named). */
static void conf_list_sections(struct buf *b, const struct conf_line *lines, size_t n,
                               const int *first)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (!lines[i].key[0] && !first[i] && conf_is_profile(lines[i].section) && count++ < 20)
            buf_printf(b, "%s[%.40s]", count > 1 ? ", " : "", lines[i].section);
    if (count > 20)
        buf_printf(b, " and %zu more", count - 20);
}

static char *conf_user_name(unsigned uid)
{
    struct passwd *pw = getpwuid((uid_t)uid);
    return pw && pw->pw_name ? xasprintf("uid %u (%s)", uid, pw->pw_name)
                             : xasprintf("uid %u", uid);
}

/* Who else may change the file or directory at path (with its stat st): 1 when only uid or
 * root may, else 0 with why set ("PATH is writable by ...; fix it with: ..."). */
static int conf_trust_one(const char *path, const struct stat *st, unsigned uid, int is_dir,
                          struct buf *why)
{
    unsigned mode = (unsigned)st->st_mode & 07777;
    if (!is_dir && S_ISCHR(st->st_mode) && st->st_uid == 0)
        return 1; /* root's device (`--config /dev/null`): its mode 666 lets no one plant text */
    if (st->st_uid != (uid_t)uid && st->st_uid != 0) {
        char *owner = conf_user_name((unsigned)st->st_uid);
        char *me = conf_user_name(uid);
        buf_printf(why, "%s belongs to %s, not to you (%s) or root; fix it with: chown %u %s",
                   path, owner, me, uid, path);
        free(owner);
        free(me);
        return 0;
    }
    if ((mode & 022) && !(is_dir && (mode & S_ISVTX))) {
        buf_printf(why, "%s is writable by %s (mode %03o); fix it with: chmod go-w %s", path,
                   (mode & 002) ? "every user" : "its group", mode & 0777, path);
        return 0;
    }
    return 1;
}

/* conf_trust_one for each directory above the file at path (a copy, cut up here). */
static int conf_trust_dirs(char *path, unsigned uid, struct buf *why)
{
    for (char *slash = strrchr(path, '/'); slash; slash = strrchr(path, '/')) {
        int root = slash == path;
        slash[root] = '\0'; /* "/" itself is the last */
        struct stat ds;
        if (stat(path, &ds) == 0 && S_ISDIR(ds.st_mode) &&
            !conf_trust_one(path, &ds, uid, 1, why))
            return 0;
        if (root)
            break;
    }
    return 1;
}

/* conf_file_trusted for the file whose stat is st: the file, the directories above the path
 * as given (whoever can write one could replace a symbolic link in it) and above its real
 * path. */
static int conf_trust(const char *path, const struct stat *st, unsigned uid, struct buf *why)
{
    if (!conf_trust_one(path, st, uid, 0, why))
        return 0;
    int ok = 1;
    if (path[0] == '/') {
        char *given = xstrdup(path);
        ok = conf_trust_dirs(given, uid, why);
        free(given);
    }
    char *real = ok ? realpath(path, NULL) : NULL;
    if (real && strcmp(real, path) != 0)
        ok = conf_trust_dirs(real, uid, why);
    free(real);
    return ok;
}

int conf_file_trusted(const char *path, unsigned uid, struct buf *why)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        buf_printf(why, "%s: %s", path, strerror(errno));
        return 0;
    }
    return conf_trust(path, &st, uid, why);
}

#define CONF_PIPE_WAIT_MS 5000 /* a config that is a pipe: how long it may keep us waiting */

int conf_load(struct conf *c, const char *path, const char *explicit_profile,
                struct buf *err, struct buf *warn)
{
    size_t len;
    struct stat st;
    /* Look before reading, through a descriptor that cannot block: a FIFO nobody writes held
     * tokterm at its start for ever (until 2026-12). What is not a file (a pipe: `--config
     * <(...)`, /dev/stdin; /dev/null) is read from that descriptor once it has something to
     * read or its end, within CONF_PIPE_WAIT_MS; a directory goes on to the read's own "Is a
     * directory". */
    char *text = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        struct pollfd p = {fd, POLLIN, 0};
        int ready;
        while ((ready = poll(&p, 1, CONF_PIPE_WAIT_MS)) < 0 && errno == EINTR)
            ;
        if (ready <= 0) {
            close(fd);
            buf_printf(err, "%s: %s with nothing to read in %d s; the config must be a file, "
                            "or a pipe something writes to", path,
                       S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                                              : "a block device",
                       CONF_PIPE_WAIT_MS / 1000);
            return -1;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        text = util_read_fd(fd, &len, 4 << 20, &st);
        if (!text && errno == ENOENT)
            errno = EIO; /* not "no config file": there was one */
    } else {
        if (fd >= 0)
            close(fd);
        text = util_read_file_stat(path, &len, 4 << 20, &st);
    }
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
    int rc = ini_parse(text, len, INI_INLINE_COMMENTS, conf_read_line, &r, NULL) == 0 ? 0 : -1;
    struct conf_line *lines = r.lines;
    size_t n = r.n;
    if (rc == 0 && r.line_warns > CONF_WARN_MAX)
        buf_printf(warn, "%s: %zu more warnings about single lines (unknown options, "
                         "profile =)\n", path, r.line_warns - CONF_WARN_MAX);
    int *first = conf_duplicates(lines, n);
    size_t dups = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!first[i] || ++dups > CONF_WARN_MAX)
            continue;
        if (!lines[i].key[0])
            buf_printf(warn, "%s:%d: duplicate section [%.40s] (first at line %d); its settings "
                             "are added to the first's\n", path, lines[i].lineno,
                       lines[i].section, first[i]);
        else
            buf_printf(warn, "%s:%d: duplicate key '%s' (first at line %d); the last one wins\n",
                       path, lines[i].lineno, lines[i].key, first[i]);
    }
    if (dups > CONF_WARN_MAX)
        buf_printf(warn, "%s: %zu more duplicate keys or sections\n", path,
                   dups - CONF_WARN_MAX);
    /* Commands run only from a file no one else can change (the user's own, or root's). */
    struct buf why = BUF_INIT;
    if (rc == 0 && !conf_trust(path, &st, (unsigned)geteuid(), &why)) {
        if (r.cmd_line) {
            buf_printf(err, "%s:%d: %s is not run: %s (others could change the command)", path,
                       r.cmd_line, r.cmd_key, buf_str(&why));
            rc = -1;
        } else {
            buf_printf(warn, "%s (others could send your key elsewhere with base_url)\n",
                       buf_str(&why));
        }
    }
    buf_free(&why);
    const char *chosen = r.chosen;
    const char *profile = explicit_profile ? explicit_profile : chosen;
    if (rc == 0)
        rc = conf_apply_section(c, lines, n, NULL, path, err);
    if (rc == 0 && profile) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = lines[i].section && strcmp(lines[i].section, profile) == 0;
        if (!found) {
            struct buf list = BUF_INIT;
            conf_list_sections(&list, lines, n, first);
            if (list.len)
                buf_printf(err, "%s: no profile '%s' (the file defines %s)", path, profile,
                           buf_str(&list));
            else
                buf_printf(err, "%s: no profile '%s': the file defines no profiles (a section "
                                "[%s] with its settings would)", path, profile, profile);
            buf_free(&list);
            rc = -1;
        } else {
            rc = conf_apply_section(c, lines, n, profile, path, err);
            free(c->profile);
            c->profile = xstrdup(profile);
            c->profile_explicit = explicit_profile != NULL;
        }
    }
    conf_clean(err);
    conf_clean(warn);
    free(first);
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
void conf_mark_cli(struct conf *c, const char *name)
{
    const struct opt *o = conf_find(name);
    if (o)
        c->cli_set |= 1ul << (o - conf_opts);
}

int conf_given(const struct conf *c, const char *name)
{
    const struct opt *o = conf_find(name);
    if (strcmp(name, "model") == 0 && c->model_given)
        return 1;
    if (strcmp(name, "system") == 0 && c->system_given)
        return 1;
    return o && (c->cli_set & (1ul << (o - conf_opts)));
}

int conf_profile_owns(const struct conf *c, const char *name)
{
    const struct opt *o = conf_find(name);
    return c->profile_explicit && o && (c->profile_set & (1ul << (o - conf_opts)));
}

const struct dialect *conf_dialect(const struct conf *c)
{
    const struct dialect *d = dialect_find(c->api);
    return d ? d : dialect_default();
}

void conf_no_key_help(const struct conf *c, struct conf_key_help *h, struct buf *profile)
{
    const struct dialect *d = conf_dialect(c);
    int openai = strcmp(d->base_url, dialect_default()->base_url) == 0;
    h->key_env = c->api_key_env && *c->api_key_env ? c->api_key_env : d->key_env[0];
    h->key_env_alt = NULL;
    /* the other variable the dialect reads, when the key is looked for in its variables (a
     * profile's own api_key_env is the only one read) */
    int own = 0;
    for (size_t i = 0; i < DIALECT_MAX_KEY_ENV && d->key_env[i]; i++)
        own |= strcmp(d->key_env[i], h->key_env) == 0;
    for (size_t i = 0; own && i < DIALECT_MAX_KEY_ENV && d->key_env[i]; i++)
        if (strcmp(d->key_env[i], h->key_env) != 0) {
            h->key_env_alt = d->key_env[i];
            break;
        }
    h->base_env = d->base_env;
    h->server = openai ? "another OpenAI-compatible server" : "another server with this API";
    buf_printf(profile, "[%s]\n", d->name);
    if (d != dialect_default())
        buf_printf(profile, "api = %s\n", d->name);
    buf_printf(profile,
               "base_url = %s\napi_key_cmd = pass show %s\n# or: api_key_env = MY_KEY_VARIABLE\n"
               "model = %s\n",
               d->base_url, openai ? "openai" : d->name, d->model);
}

/* Replace *p with to when it is still from; 1 when it was. */
static int conf_default_to(char **p, const char *from, const char *to)
{
    if (!*p || strcmp(*p, from) != 0)
        return 0;
    free(*p);
    *p = xstrdup(to);
    return 1;
}

void conf_apply_dialect(struct conf *c)
{
    const struct dialect *d = conf_dialect(c), *o = &dialect_openai;
    if (d == o)
        return;
    conf_default_to(&c->base_url, o->base_url, d->base_url);
    conf_default_to(&c->model, o->model, d->model);
    conf_default_to(&c->auth_header, o->auth_header, d->auth_header);
    const char *key_env = d->key_env[0];
    for (size_t i = 0; i < DIALECT_MAX_KEY_ENV && d->key_env[i]; i++) {
        const char *v = getenv(d->key_env[i]);
        if (v && *v) {
            key_env = d->key_env[i];
            break;
        }
    }
    conf_default_to(&c->api_key_env, o->key_env[0], key_env);
}

void conf_apply_env(struct conf *c)
{
    const char *base_env = conf_dialect(c)->base_env;
    const char *v = base_env ? getenv(base_env) : NULL;
    if (v && *v && !conf_profile_owns(c, "base_url")) {
        free(c->base_url);
        c->base_url = xstrdup(v);
    }
    v = getenv("TOKTERM_MODEL");
    if (v && *v && !conf_profile_owns(c, "model")) {
        free(c->model);
        c->model = xstrdup(v);
    }
    conf_apply_dialect(c);
}

/* The terminal, open, when tokterm is its foreground job: a key command is given it while it
 * runs, so that it can ask for a passphrase there; else -1. */
static int conf_foreground_tty(void)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 && tcgetpgrp(fd) != getpgrp()) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Make pgrp the terminal's foreground job (SIGTTOU held off: the caller may be in the
 * background by now). */
static void conf_give_tty(int tty, pid_t pgrp)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    (void)tcsetpgrp(tty, pgrp);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The child of conf_run_key_cmd: its own process group (the terminal's foreground job when
 * tokterm was), default signals, stdout into the pipe, then sh -c cmd. Only async-signal-safe
 * calls: the network thread may run. */
static void conf_key_child(const char *cmd, int out, int tty)
{
    sigset_t none, ttou;
    sigemptyset(&none);
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    setpgid(0, 0);
    if (tty >= 0) {
        sigprocmask(SIG_BLOCK, &ttou, NULL);
        tcsetpgrp(tty, getpid());
    }
    static const int sigs[] = {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD,
                               SIGTSTP, SIGTTIN, SIGTTOU};
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (size_t i = 0; i < TT_ARRAY_LEN(sigs); i++)
        sigaction(sigs[i], &dfl, NULL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (out == STDOUT_FILENO ? fcntl(out, F_SETFD, 0) < 0 : dup2(out, STDOUT_FILENO) < 0)
        _exit(126); /* (the pipe is close-on-exec; a dup2 copy is not) */
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
}

/* Has the child exited? Looked at without reaping it: while it is a zombie its pid, which is
 * also the process group's id, cannot be reused, so killpg() hits only the command's group. */
static int conf_child_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

#define CONF_KEY_LINE 4096

/* A SIGTERM, SIGHUP, SIGINT or SIGQUIT that came while a key command ran: the command's group
 * is killed and the terminal given back before the signal is acted on (until 2026-12 a
 * SIGTERM killed tokterm and left the command running, the terminal's foreground job). */
static volatile sig_atomic_t conf_key_signal;
static const int conf_key_sigs[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};

static void conf_key_on_signal(int sig)
{
    conf_key_signal = sig;
}

/* Read the command's output until end of file and its exit, until the deadline (util_now()):
 * the first line into line[CONF_KEY_LINE], the rest read and dropped (wiped). *got counts the
 * first line's bytes; *nl says whether it ended. Returns 1 when both happened. */
static int conf_key_read(int fd, pid_t pid, double deadline, char *line, size_t *got, int *nl,
                         int *eof)
{
    int exited = 0;
    char chunk[4096];
    while (!(*eof && exited) && !conf_key_signal) {
        double left = deadline - util_now();
        if (left <= 0)
            break;
        if (left > 0.1)
            left = 0.1; /* a signal taken by another thread is seen within 0.1 s */
        if (*eof) {
            exited = conf_child_exited(pid);
            if (!exited)
                poll(NULL, 0, left < 0.01 ? 1 : 10);
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r <= 0)
            continue; /* EINTR, or the deadline or a slice of it */
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            *eof = 1;
            continue;
        }
        for (ssize_t i = 0; i < k && !*nl; i++) {
            if (chunk[i] == '\n')
                *nl = 1;
            else if (*got < CONF_KEY_LINE - 1)
                line[(*got)++] = chunk[i];
            else
                *got = CONF_KEY_LINE; /* too long */
        }
        util_wipe(chunk, (size_t)k);
    }
    return *eof && exited;
}

/* Run cmd (api_key_cmd or a cmd: key; what names it in messages) in its own process group,
 * for at most timeout seconds: the first line it prints is the key (a new string), or NULL
 * with err set. After the timeout the group gets SIGTERM, then SIGKILL 0.5 s later: a child
 * that keeps the output open cannot hang tokterm either. */
static char *conf_run_key_cmd(const char *cmd, const char *what, double timeout,
                              struct buf *err)
{
    if (!(timeout > 0))
        timeout = 10;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        buf_printf(err, "%s could not run: %s", what, strerror(errno));
        return NULL;
    }
    int tty = conf_foreground_tty();
    pid_t pid = fork();
    if (pid == 0)
        conf_key_child(cmd, fds[1], tty);
    close(fds[1]);
    if (pid < 0) {
        buf_printf(err, "%s could not run: %s", what, strerror(errno));
        close(fds[0]);
        if (tty >= 0)
            close(tty);
        return NULL;
    }
    setpgid(pid, pid); /* also here: the group exists before anything is sent to it */
    if (tty >= 0)
        conf_give_tty(tty, pid);
    struct sigaction on, old[TT_ARRAY_LEN(conf_key_sigs)];
    memset(&on, 0, sizeof on);
    on.sa_handler = conf_key_on_signal; /* no SA_RESTART: poll() returns */
    sigemptyset(&on.sa_mask);
    conf_key_signal = 0;
    for (size_t i = 0; i < TT_ARRAY_LEN(conf_key_sigs); i++)
        if (sigaction(conf_key_sigs[i], NULL, &old[i]) == 0 && old[i].sa_handler != SIG_IGN)
            sigaction(conf_key_sigs[i], &on, NULL); /* one ignored (nohup, `&`) stays so */
    char line[CONF_KEY_LINE];
    size_t got = 0;
    int nl = 0, eof = 0;
    int done = conf_key_read(fds[0], pid, util_now() + timeout, line, &got, &nl, &eof);
    int status = 0, sig = conf_key_signal;
    if (!done) {
        int exited = conf_child_exited(pid);
        killpg(pid, SIGTERM);
        killpg(pid, SIGCONT); /* a stopped process gets its SIGTERM now */
        conf_key_signal = 0;
        conf_key_read(fds[0], pid, util_now() + 0.5, line, &got, &nl, &eof);
        killpg(pid, SIGKILL);
        if (sig)
            buf_printf(err, "%s stopped: tokterm got signal %d", what, sig);
        else
            buf_printf(err, "%s did not finish in %g s (killed)%s; raise key_cmd_timeout or "
                            "fix the command", what, timeout,
                       exited ? ": a process it started kept its output open" : "");
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    close(fds[0]);
    if (tty >= 0) {
        conf_give_tty(tty, getpgrp());
        close(tty);
    }
    for (size_t i = 0; i < TT_ARRAY_LEN(conf_key_sigs); i++)
        sigaction(conf_key_sigs[i], &old[i], NULL);
    if (sig) {
        util_wipe(line, sizeof line);
        kill(getpid(), sig); /* as it would have been: tokterm's own handler, or the default;
                                to the process, not raise()'s thread: the chat runs an MCP
                                server's key_cmd on a thread that blocks signals */
        return NULL;
    }
    char *key = NULL;
    if (done) {
        line[got < CONF_KEY_LINE ? got : 0] = '\0';
        char *k = util_trim(line);
        if (WIFSIGNALED(status))
            buf_printf(err, "%s failed (killed by signal %d)", what, WTERMSIG(status));
        else if (WEXITSTATUS(status) != 0)
            buf_printf(err, "%s failed (exit status %d)", what, WEXITSTATUS(status));
        else if (got >= CONF_KEY_LINE)
            buf_printf(err, "%s printed a first line longer than %d bytes", what,
                       CONF_KEY_LINE - 1);
        else if (!*k)
            buf_printf(err, "%s printed nothing", what);
        else
            key = xstrdup(k);
    }
    util_wipe(line, sizeof line);
    return key;
}

int conf_has_key_source(const struct conf *c)
{
    const char *v = c->api_key_env && *c->api_key_env ? getenv(c->api_key_env) : NULL;
    return (c->api_key_cmd && *c->api_key_cmd) || (v && *v) || (c->api_key && *c->api_key) ||
           (c->keys && *c->keys);
}

/* The key in the variable name (value v, set and not empty), as util_key_take gives it. */
static char *conf_env_key(const char *name, const char *v, struct buf *err)
{
    char *from = xasprintf("$%s", name);
    char *key = util_key_take(v, from, err);
    free(from);
    return key;
}

/* A key a command printed (key, trimmed) or a setting holds, checked as util_key_take checks
 * it: a control character inside would end the header line. key is wiped and freed. */
static char *conf_checked_key(char *key, const char *from, struct buf *err)
{
    if (!key)
        return NULL;
    char *k = util_key_take(key, from, err);
    util_free_secret(key);
    return k;
}

char *conf_key_cmd(const char *cmd, const char *what, double timeout, struct buf *err)
{
    char *key = conf_run_key_cmd(cmd, what, timeout, err);
    if (!key)
        return NULL;
    char *from = xasprintf("%s's output", what);
    key = conf_checked_key(key, from, err);
    free(from);
    return key;
}

char *conf_api_key(const struct conf *c, struct buf *err)
{
    if (c->api_key_cmd && *c->api_key_cmd)
        return conf_key_cmd(c->api_key_cmd, "api_key_cmd", c->key_cmd_timeout, err);
    if (c->api_key_env && *c->api_key_env) {
        const char *v = getenv(c->api_key_env);
        char *key = v && *v ? conf_env_key(c->api_key_env, v, err) : NULL;
        if (key || err->len)
            return key;
    }
    if (c->api_key && *c->api_key)
        return conf_checked_key(xstrdup(c->api_key), "the api_key setting", err);
    return NULL;
}

int conf_state_password(struct conf *c, struct buf *err)
{
    util_free_secret(c->state_password);
    c->state_password = NULL;
    if (!c->state || !*c->state)
        return 0;
    if (c->state_password_cmd && *c->state_password_cmd) {
        c->state_password = conf_run_key_cmd(c->state_password_cmd, "state_password_cmd",
                                             c->key_cmd_timeout, err);
        return c->state_password ? 0 : -1;
    }
    if (c->state_password_env && *c->state_password_env) {
        const char *v = getenv(c->state_password_env);
        if (!v || !*v) {
            buf_printf(err, "state_password_env names %s, which is not set", c->state_password_env);
            return -1;
        }
        c->state_password = xstrdup(v);
    }
    return 0;
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
            const char *cmd = util_trim(item + 4);
            struct buf what = BUF_INIT;
            buf_printf(&what, "keys: cmd:%.60s%s", cmd, strlen(cmd) > 60 ? "..." : "");
            conf_clean(&what);
            value = conf_key_cmd(cmd, buf_str(&what), c->key_cmd_timeout, err);
            buf_free(&what);
        } else {
            const char *name = strncmp(item, "env:", 4) == 0 ? util_trim(item + 4) : item;
            const char *v = getenv(name);
            label = xstrdup(name);
            value = v && *v ? conf_env_key(name, v, err) : NULL;
            if (!value && !err->len)
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
        /* no $HOME (cron, a systemd unit, env -i): the passwd entry's, as a shell does; until
         * 2026-12 this was /tmp, so any user could plant /tmp/.config/tokterm/config with a
         * base_url of theirs and be sent the key, and the conversations went to /tmp/.local */
        const char *home = util_home(); /* NULL: not even a private folder could be made */
        return xasprintf("%s/%s/tokterm", home ? home : "/nonexistent", dirs[i].fallback);
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
