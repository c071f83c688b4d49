/* cmd_store.c - review subcommands: ls, show, search, export, rm, rename, stats, cache. */
#include "config.h"
#include "cmd/store.h"
#include "proto/tool.h"

#include "cmd/stats.h"
#include "base/buf.h"
#include "base/sha256.h"
#include "core/attach.h"
#include "core/conv.h"
#include "store/info.h"
#include "store/store.h"
#include "text/markdown.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Highlight markers handed to the store on a terminal: noncharacters U+FDD0/U+FDD1, which
 * text never legitimately holds; they are replaced by bold on/off after sanitising. */
#define CMD_MARK_OPEN "\xEF\xB7\x90"
#define CMD_MARK_CLOSE "\xEF\xB7\x91"
#define CMD_BOLD "\033[1m"
#define CMD_NORMAL "\033[0m"

enum {
    OPT_LIMIT = 1 << 0,
    OPT_MODEL = 1 << 1,
    OPT_SINCE = 1 << 2,
    OPT_UNTIL = 1 << 3,
    OPT_FORMAT = 1 << 4,
    OPT_ALL = 1 << 5,
    OPT_VERSIONS = 1 << 6,
    OPT_JSON = 1 << 7,
    OPT_OUTPUT = 1 << 8,
};

struct cmd_ctx {
    struct store *st;
    FILE *out, *err;
    int tty;
    const char *name; /* subcommand */
    /* the attachments of the conversation being printed (store_attach_list) */
    struct store_attach *att;
    size_t n_att;
    const char *files_dir;  /* export -o: where they are written (NULL: not written) */
    const char *files_link; /* the same, relative to the Markdown file (its links) */
    struct buf written;     /* "name hash" lines of the files written there so far */
    int unwritten;          /* an attachment was not written there: export fails */
};

struct cmd_opts {
    const char *limit, *model, *since, *until, *format, *output;
    int all, help, versions, json;
    char **pos;
    int n_pos;
};

static const char cmd_usage_text[] =
    "usage: tokterm ls [--limit N] [--json]\n"
    "       tokterm show ID [--all-versions]\n"
    "       tokterm search QUERY... [--model M] [--since YYYY-MM-DD] [--until YYYY-MM-DD]\n"
    "                      [--limit N] [--json]\n"
    "       tokterm export ID [--format md|json] [--all-versions] [-o FILE]\n"
    "       tokterm export --all [--format json|md] [--all-versions]\n"
    "       tokterm rm ID\n"
    "       tokterm rename ID TITLE...\n"
    "       tokterm stats [--since YYYY-MM-DD] [--until YYYY-MM-DD] [--model M] [--json]\n"
    "                     [--format text|json|prometheus]\n"
    "       tokterm cache stats|clear\n"
    "search: words must all occur (as substrings, any case); \"quoted words\" form one phrase;\n"
    "        OR (in capitals) parts alternatives: a b OR c; nothing else is special.\n"
    "        Conversations whose title holds them come first: ID  UPDATED  title  TITLE.\n"
    "        No match: \"no matches\" on stderr, exit status 1.\n"
    "show, export: the live path of each conversation (what the next request would carry,\n"
    "        with failed and refused turns); --all-versions adds the earlier versions that\n"
    "        /edit and /retry replaced.\n"
    "export -o FILE: write to FILE; with Markdown the attachments go beside it, into FILE's\n"
    "        name without .md plus .files/ (linked from the Markdown).\n";

const char *cmd_store_usage(void)
{
    return cmd_usage_text;
}

int cmd_store_is_command(const char *name)
{
    static const char *const names[] = {"ls",     "show",  "search", "export",
                                        "rm",     "rename", "stats", "cache"};
    for (size_t i = 0; name && i < TT_ARRAY_LEN(names); i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- output helpers */

#define CMD_PIECE ((size_t)64 << 10) /* text made terminal-safe at a time: memory O(piece) */

/* Print s[0..n) from the database: sanitised on a terminal (a piece at a time), raw
 * otherwise. */
static void cmd_put(struct cmd_ctx *c, const char *s, size_t n)
{
    if (!s)
        return;
    if (!c->tty) {
        fwrite(s, 1, n, c->out);
        return;
    }
    struct buf b = BUF_INIT;
    for (size_t at = 0, k; at < n; at += k) {
        k = utf8_cut(s + at, n - at, CMD_PIECE);
        buf_reset(&b);
        utf8_sanitize(&b, s + at, k);
        fwrite(b.data, 1, b.len, c->out);
    }
    buf_free(&b);
}

static void cmd_puts(struct cmd_ctx *c, const char *s)
{
    if (s)
        cmd_put(c, s, strlen(s));
}

/* A stored text as a block of Markdown: a code fence it leaves open (an answer cut off inside
 * a code block) is closed after it, else every heading and message after it would be code to
 * a Markdown reader. */
static void cmd_md_text(struct cmd_ctx *c, const char *s, size_t n)
{
    char ch;
    size_t open = s ? markdown_open_fence(s, n, &ch) : 0;
    cmd_put(c, s, n);
    if (!open)
        return;
    if (n && s[n - 1] != '\n')
        fputc('\n', c->out);
    for (size_t i = 0; i < open; i++)
        fputc(ch, c->out);
}

static void cmd_error(struct cmd_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cmd_error(struct cmd_ctx *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, msg, strlen(msg)); /* messages may quote paths or titles */
    fprintf(c->err, "tokterm %s: %s\n", c->name, buf_str(&b));
    buf_free(&b);
}

/* 1 when the word name[0..n) is one of the words of s[0..len) (words end at a space, a comma
 * or a colon). */
static int cmd_has_word(const char *s, size_t len, const char *name, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if ((i == 0 || strchr(" ,", s[i - 1])) && memcmp(s + i, name, n) == 0 &&
            (i + n == len || strchr(" ,:\n", s[i + n])))
            return 1;
    return 0;
}

/* What cmd_usage_text says of the subcommand name: its usage lines and its notes (a line that
 * begins at the margin and names it before its colon), each with the lines that go on from it;
 * the whole text when it says nothing of name. */
static void cmd_usage_of(FILE *f, const char *name)
{
    size_t n = strlen(name), said = 0;
    int keep = 0;
    for (const char *p = cmd_usage_text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
        const char *w = p;
        if (strncmp(w, "usage: ", 7) == 0)
            w += 7;
        while (*w == ' ')
            w++;
        if (strncmp(w, "tokterm ", 8) == 0) { /* a usage line */
            keep = strncmp(w + 8, name, n) == 0 && (w[8 + n] == ' ' || w[8 + n] == '\n');
            if (keep)
                fprintf(f, "%s%.*s", said ? "       " : "usage: ", (int)(len - (size_t)(w - p)),
                        w);
        } else {
            if (w == p) { /* a note: about the commands before its colon */
                const char *colon = memchr(p, ':', len);
                keep = colon && cmd_has_word(p, (size_t)(colon - p), name, n);
            }
            if (keep)
                fwrite(p, 1, len, f);
        }
        said += keep;
        p += len;
    }
    if (!said)
        fputs(cmd_usage_text, f);
}

/* A usage error: why, and the usage of the subcommand (all of them: tokterm --help). */
static int cmd_usage(struct cmd_ctx *c, const char *why)
{
    if (why)
        cmd_error(c, "%s", why);
    cmd_usage_of(c->err, c->name);
    return CMD_STORE_USAGE;
}

/* Local "YYYY-MM-DD HH:MM" of unix time t. */
static void cmd_time(int64_t t, char out[32])
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!localtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%d %H:%M", &tm))
        snprintf(out, 32, "%lld", (long long)t);
}

/* ---------------------------------------------------------------- argument parsing */

static int cmd_parse(struct cmd_ctx *c, int argc, char **argv, unsigned allowed,
                     struct cmd_opts *o)
{
    static const struct {
        const char *name;
        unsigned bit;
        size_t off;
    } opts[] = {
        {"--limit", OPT_LIMIT, offsetof(struct cmd_opts, limit)},
        {"--model", OPT_MODEL, offsetof(struct cmd_opts, model)},
        {"--since", OPT_SINCE, offsetof(struct cmd_opts, since)},
        {"--until", OPT_UNTIL, offsetof(struct cmd_opts, until)},
        {"--format", OPT_FORMAT, offsetof(struct cmd_opts, format)},
        {"--output", OPT_OUTPUT, offsetof(struct cmd_opts, output)},
        {"-o", OPT_OUTPUT, offsetof(struct cmd_opts, output)},
    };
    memset(o, 0, sizeof *o);
    o->pos = xcalloc((size_t)argc + 1, sizeof *o->pos);
    int dashdash = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (dashdash || a[0] != '-' || a[1] == '\0') {
            o->pos[o->n_pos++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            dashdash = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            continue;
        }
        if (strcmp(a, "--all") == 0 && (allowed & OPT_ALL)) {
            o->all = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0 && (allowed & OPT_JSON)) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--all-versions") == 0 && (allowed & OPT_VERSIONS)) {
            o->versions = 1;
            continue;
        }
        size_t k;
        for (k = 0; k < TT_ARRAY_LEN(opts); k++) {
            size_t len = strlen(opts[k].name);
            if (!(allowed & opts[k].bit) || strncmp(a, opts[k].name, len) != 0 ||
                (a[len] != '\0' && a[len] != '='))
                continue;
            const char *val = a[len] == '=' ? a + len + 1 : NULL;
            if (!val) {
                if (i + 1 >= argc) {
                    cmd_error(c, "option %s needs a value", opts[k].name);
                    return -1;
                }
                val = argv[++i];
            }
            *(const char **)((char *)o + opts[k].off) = val;
            break;
        }
        if (k == TT_ARRAY_LEN(opts)) {
            cmd_error(c, "unknown option %s", a);
            return -1;
        }
    }
    return 0;
}

/* A positive integer id or count; -1 when s is not one. */
static int64_t cmd_number(const char *s)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v <= 0)
        return -1;
    return v;
}

/* Local midnight starting YYYY-MM-DD (+ days); -1 when s is not such a date. */
static int64_t cmd_date(const char *s, int days)
{
    int y, m, d;
    char extra;
    if (!s || strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &extra) != 3 ||
        s[4] != '-' || s[7] != '-' || m < 1 || m > 12 || d < 1 || d > 31)
        return -1;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d + days;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1)
        return -1;
    if (days == 0 && (tm.tm_mon != m - 1 || tm.tm_mday != d))
        return -1; /* 2024-02-31 normalised into March */
    return (int64_t)t;
}

static int cmd_range(struct cmd_ctx *c, const struct cmd_opts *o, int64_t *since,
                     int64_t *until)
{
    *since = *until = 0;
    if (o->since && (*since = cmd_date(o->since, 0)) < 0) {
        cmd_error(c, "--since wants a date like 2024-05-31, not \"%s\"", o->since);
        return -1;
    }
    if (o->until) {
        if (cmd_date(o->until, 0) < 0) {
            cmd_error(c, "--until wants a date like 2024-05-31, not \"%s\"", o->until);
            return -1;
        }
        *until = cmd_date(o->until, 1); /* the whole day is included */
    }
    if (*since && *until && *since >= *until) { /* no day at all: a mistake, not "no match" */
        cmd_error(c, "--since %s is after --until %s", o->since, o->until);
        return -1;
    }
    return 0;
}

static int cmd_limit(struct cmd_ctx *c, const struct cmd_opts *o, int def)
{
    if (!o->limit)
        return def;
    int64_t v = cmd_number(o->limit);
    if (v < 0 || v > 1000000) {
        cmd_error(c, "--limit wants a positive number, not \"%s\"", o->limit);
        return -1;
    }
    return (int)v;
}

/* Map a store result to an exit code, printing the store's message when it failed. */
static int cmd_store_result(struct cmd_ctx *c, int rc)
{
    if (rc == 0)
        return CMD_STORE_OK;
    cmd_error(c, "%s", store_error(c->st));
    return CMD_STORE_FAIL;
}

/* ---------------------------------------------------------------- ls */

static void cmd_json_lines(struct cmd_ctx *c, cJSON *arr);
static void cmd_json_add_str(cJSON *obj, const char *key, const char *s);

/* ls --json: one object a conversation, newest first. */
static void cmd_ls_json(struct cmd_ctx *c, const struct store_conversation *list, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)list[i].id);
        cmd_json_add_str(o, "title", list[i].title);
        cmd_json_add_str(o, "model", list[i].model);
        cmd_json_add_str(o, "profile", list[i].profile);
        cJSON_AddNumberToObject(o, "created", (double)list[i].created);
        cJSON_AddNumberToObject(o, "updated", (double)list[i].updated);
        cJSON_AddNumberToObject(o, "messages", (double)list[i].message_count);
        cJSON_AddItemToArray(arr, o);
    }
    cmd_json_lines(c, arr);
    cJSON_Delete(arr);
}

static int cmd_ls(struct cmd_ctx *c, const struct cmd_opts *o)
{
    int limit = cmd_limit(c, o, 50);
    if (limit < 0 || o->n_pos)
        return cmd_usage(c, limit < 0 ? NULL : "ls takes no arguments");
    struct store_conversation *list;
    size_t n;
    if (store_conversation_list(c->st, limit, &list, &n) != 0)
        return cmd_store_result(c, -1);
    if (o->json) {
        cmd_ls_json(c, list, n);
        store_conversation_list_free(list, n);
        return CMD_STORE_OK;
    }
    if (n == 0 && c->tty)
        fputs("no conversations yet\n", c->out);
    int wmodel = 5;
    for (size_t i = 0; i < n; i++) {
        int w = list[i].model ? (int)strlen(list[i].model) : 1;
        if (w > wmodel)
            wmodel = w < 30 ? w : 30;
    }
    if (n)
        fprintf(c->out, "%6s  %-16s  %5s  %-*s  %s\n", "ID", "UPDATED", "MSGS", wmodel, "MODEL",
                "TITLE");
    for (size_t i = 0; i < n; i++) {
        char when[32];
        cmd_time(list[i].updated, when);
        fprintf(c->out, "%6lld  %-16s  %5lld  ", (long long)list[i].id, when,
                (long long)list[i].message_count);
        const char *model = list[i].model ? list[i].model : "-";
        cmd_puts(c, model);
        for (int pad = (int)strlen(model); pad < wmodel; pad++)
            fputc(' ', c->out);
        fputs("  ", c->out);
        cmd_puts(c, list[i].title ? list[i].title : "(untitled)");
        fputc('\n', c->out);
    }
    store_conversation_list_free(list, n);
    return CMD_STORE_OK;
}

/* ---------------------------------------------------------------- markdown / show */

static void cmd_md_meta(struct cmd_ctx *c, const char *key, const char *val)
{
    if (!val)
        return;
    fprintf(c->out, "- %s: ", key);
    cmd_puts(c, val);
    fputc('\n', c->out);
}

/* A row's tool part (schema v8): the calls an answer asked for, or the call a result
 * answers, one line each. */
static void cmd_md_tool(struct cmd_ctx *c, const struct store_message *m)
{
    struct conv_step st = {0};
    if (!m->tool || conv_step_parse(&st, m->tool) < 0)
        return;
    for (size_t i = 0; i < st.n_calls; i++) {
        fputs("- call `", c->out);
        cmd_puts(c, st.calls[i].name ? st.calls[i].name : st.calls[i].wire);
        fputs("` (", c->out);
        cmd_puts(c, st.calls[i].id ? st.calls[i].id : "");
        fputs("): ", c->out);
        cmd_puts(c, st.calls[i].args ? st.calls[i].args : "");
        fputc('\n', c->out);
        tool_call_free(&st.calls[i]);
    }
    if (st.result) {
        fprintf(c->out, "*%s of `", st.is_error ? "error result" : "result");
        cmd_puts(c, st.name ? st.name : st.wire ? st.wire : "?");
        fputs("` (", c->out);
        cmd_puts(c, st.call_id ? st.call_id : "");
        fputs(")*\n", c->out);
    }
    fputc('\n', c->out);
    free(st.calls);
    free(st.thinking);
    free(st.call_id);
    free(st.name);
    free(st.wire);
}

/* The provider a message was sent to, from its host (for the token estimates of show). */
static enum attach_provider cmd_provider(const char *host)
{
    if (host && strstr(host, "anthropic"))
        return ATTACH_ANTHROPIC;
    if (host && strstr(host, "googleapis"))
        return ATTACH_GEMINI;
    /* another host got a PDF as its text, as pdf = auto sends it (until 2026-12 show counted
     * ~1,500 tokens a page, a document's, for the few tokens the chat had shown) */
    return host && strcmp(host, "api.openai.com") == 0
               ? ATTACH_OPENAI
               : (enum attach_provider)(ATTACH_COMPAT | ATTACH_PDF_TEXT);
}

/* Write attachment a into c->files_dir under its base name (a name another file already took:
 * "<message>-<seq>-<name>"); *name gets the name used (caller frees). 0, or -1 with a
 * message printed. */
static int cmd_write_attachment(struct cmd_ctx *c, const struct store_attach *a, char **name)
{
    const char *base = strrchr(a->name, '/');
    base = base ? base + 1 : a->name;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        base = "attachment";
    char hex[65];
    sha256_hex(a->sha256, hex);
    char *line = xasprintf("%s %s\n", base, hex);
    const char *have = strstr(buf_str(&c->written), line);
    free(line);
    if (have && (have == c->written.data || have[-1] == '\n')) {
        *name = xstrdup(base); /* the same file, written already */
        return 0;
    }
    char *prefix = xasprintf("%s ", base);
    const char *t = strstr(buf_str(&c->written), prefix);
    int taken = t && (t == c->written.data || t[-1] == '\n');
    free(prefix);
    *name = taken ? xasprintf("%lld-%d-%s", (long long)a->message_id, a->seq, base)
                  : xstrdup(base);
    buf_printf(&c->written, "%s %s\n", *name, hex);
    char *path = xasprintf("%s/%s", c->files_dir, *name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(a->data, 1, a->len, f) == a->len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        cmd_error(c, "cannot write %s: %s", path, strerror(errno));
        c->unwritten = 1;
    }
    free(path);
    return ok ? 0 : -1;
}

/* One compact line per attachment of message m ("name (PNG image 64x32, 2.1 KiB, ~85
 * tokens)"), a link to its copy when export writes them. */
/* A path as a Markdown link's destination: a blank, a parenthesis, '<', '>', '%' and control
 * bytes percent-encoded, so that "my export.files/a.c" stays one link (until 2026-12 the
 * blank ended it). */
static void cmd_link_path(struct cmd_ctx *c, const char *p)
{
    for (; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch <= ' ' || ch == '(' || ch == ')' || ch == '<' || ch == '>' || ch == '%' ||
            ch == 0x7f)
            fprintf(c->out, "%%%02X", ch);
        else
            fputc(ch, c->out);
    }
}

static void cmd_md_attachments(struct cmd_ctx *c, const struct store_message *m)
{
    int any = 0;
    for (size_t i = 0; i < c->n_att; i++) {
        const struct store_attach *sa = &c->att[i];
        if (sa->message_id != m->id)
            continue;
        any = 1;
        struct attach a;
        conv_attach_facts(&a, sa);
        struct buf d = BUF_INIT;
        attach_describe(&d, &a, attach_tokens(&a, cmd_provider(m->host)));
        char *name = NULL;
        fputs(c->files_dir ? "- attached: [" : "- attached: ", c->out);
        cmd_put(c, d.data, d.len);
        if (c->files_dir && cmd_write_attachment(c, sa, &name) == 0) {
            fputs("](", c->out);
            cmd_link_path(c, c->files_link);
            fputc('/', c->out);
            cmd_link_path(c, name);
            fputc(')', c->out);
        } else if (c->files_dir) {
            fputc(']', c->out);
        }
        fputc('\n', c->out);
        free(name);
        buf_free(&d);
    }
    if (any)
        fputc('\n', c->out);
}

static void cmd_md_message(struct cmd_ctx *c, const struct store_message *m,
                           const struct conv_rowinfo *ri)
{
    char when[32];
    cmd_time(m->created, when);
    const char *role = m->role ? m->role : "?";
    fprintf(c->out, "## %c%s", role[0] >= 'a' && role[0] <= 'z' ? role[0] - 'a' + 'A' : role[0],
            role + 1);
    if (m->model && strcmp(role, "assistant") == 0) {
        fputs(" \xC2\xB7 ", c->out);
        cmd_puts(c, m->model);
    }
    fprintf(c->out, " \xC2\xB7 %s", when);
    char vt[CONV_VERSION_MAX];
    if (ri->versions > 1)
        fprintf(c->out, " \xC2\xB7 %s", conv_version_text(vt, ri->version, ri->versions));
    if (!ri->live)
        fputs(" \xC2\xB7 replaced (not on the live path, never sent again)", c->out);
    fputs("\n\n", c->out);
    if (m->reasoning && *m->reasoning) {
        fputs("<details><summary>Reasoning</summary>\n\n", c->out);
        cmd_md_text(c, m->reasoning, strlen(m->reasoning));
        fputs("\n\n</details>\n\n", c->out);
    }
    cmd_md_text(c, m->content, m->content_len);
    fputs("\n\n", c->out);
    cmd_md_attachments(c, m);
    cmd_md_tool(c, m);
    if (strcmp(role, "user") == 0 && m->error) {
        fputs("*refused: not sent*\n\n> ", c->out);
        cmd_puts(c, m->error);
        fputs("\n\n", c->out);
        return;
    }
    if (strcmp(role, "user") == 0 && ri->user >= 0 && ri->answer < 0) {
        /* no answer row: the turn ended while its tools ran (cancelled, failed) or its process
         * died first (until 2026-12 nothing here said so, and the turn read as any answered
         * one); a request carries it when its tools ran to their results (conv_rows) */
        fputs(ri->sent ? "*not answered: no answer was saved for this turn; a request carries "
                         "the prompt and its tool rounds, which ran*\n\n"
                       : "*not answered: no answer was saved for this turn (cancelled or failed "
                         "before one, or still running); a request leaves it out*\n\n",
              c->out);
        return;
    }
    if (strcmp(role, "assistant") != 0 && m->status == STORE_COMPLETE)
        return;
    struct buf f = BUF_INIT;
    buf_appends(&f, store_status_name(m->status));
    if (m->finish_reason)
        buf_printf(&f, " (%s)", m->finish_reason);
    if (m->usage.prompt_tokens >= 0 || m->usage.completion_tokens >= 0)
        buf_printf(&f, " \xC2\xB7 %lld prompt + %lld completion token%s",
                   (long long)(m->usage.prompt_tokens > 0 ? m->usage.prompt_tokens : 0),
                   (long long)(m->usage.completion_tokens > 0 ? m->usage.completion_tokens : 0),
                   util_plural(m->usage.completion_tokens > 0 ? m->usage.completion_tokens : 0));
    if (m->timings.ttft >= 0)
        buf_printf(&f, " \xC2\xB7 first token %.2f s", m->timings.ttft);
    if (m->timings.total >= 0)
        buf_printf(&f, " \xC2\xB7 total %.2f s", m->timings.total);
    /* tokens/s only where stats counts it: a few tokens in a millisecond make no speed */
    if (m->timings.tokens_per_s > 0 && m->timings.ttft >= 0 && m->timings.total >= 0 &&
        m->usage.completion_tokens >= STORE_TPS_MIN_TOKENS &&
        m->timings.total - m->timings.ttft >= STORE_TPS_MIN_SECONDS)
        buf_printf(&f, " \xC2\xB7 %.1f tokens/s", m->timings.tokens_per_s);
    if (m->cached)
        buf_appends(&f, " \xC2\xB7 from cache");
    if (strcmp(role, "assistant") == 0 && ri->live && ri->user >= 0 && !ri->sent &&
        !m->tool)
        buf_appends(&f, " \xC2\xB7 a request leaves this turn out");
    fputc('*', c->out);
    cmd_put(c, f.data, f.len);
    fputs("*\n\n", c->out);
    buf_free(&f);
    /* the error, unless it only names the status ("cancelled" twice) */
    if (m->error && strcmp(m->error, store_status_name(m->status)) != 0) {
        fputs("> error: ", c->out);
        cmd_puts(c, m->error);
        fputs("\n\n", c->out);
    }
}

/* Where each row stands (conv_rows), and how many rows are shown: the live path, or all. */
static struct conv_rowinfo *cmd_rows(const struct store_conversation *conv, int all,
                                     size_t *shown)
{
    size_t turns;
    struct conv_rowinfo *ri = conv_rows(conv, &turns);
    *shown = 0;
    for (size_t i = 0; i < conv->n_messages; i++)
        *shown += all || ri[i].live;
    return ri;
}

static void cmd_md_conversation(struct cmd_ctx *c, const struct store_conversation *conv,
                                int all)
{
    size_t shown;
    struct conv_rowinfo *ri = cmd_rows(conv, all, &shown);
    char when[32];
    fputs("# ", c->out);
    cmd_puts(c, conv->title ? conv->title : "(untitled)");
    fputs("\n\n", c->out);
    fprintf(c->out, "- conversation: %lld\n", (long long)conv->id);
    cmd_md_meta(c, "model", conv->model);
    cmd_md_meta(c, "profile", conv->profile);
    cmd_time(conv->created, when);
    fprintf(c->out, "- created: %s\n", when);
    cmd_time(conv->updated, when);
    fprintf(c->out, "- updated: %s\n", when);
    fprintf(c->out, "- messages: %zu", shown);
    if (shown < conv->n_messages)
        fprintf(c->out, " (%zu more in earlier versions: --all-versions)",
                conv->n_messages - shown);
    fputs("\n\n", c->out);
    if (conv->system_prompt && *conv->system_prompt) {
        fputs("## System prompt\n\n", c->out);
        cmd_md_text(c, conv->system_prompt, strlen(conv->system_prompt));
        fputs("\n\n", c->out);
    }
    /* the files' bytes only when they are written (export -o): show prints a line a file
     * (until 2026-12 it read them all: 190 MB of memory for the line of a 30 MB file) */
    if ((c->files_dir ? store_attach_list(c->st, conv->id, &c->att, &c->n_att)
                      : store_attach_names(c->st, conv->id, &c->att, &c->n_att)) != 0)
        cmd_error(c, "cannot read the attachments: %s", store_error(c->st));
    for (size_t i = 0; i < conv->n_messages; i++)
        if (all || ri[i].live)
            cmd_md_message(c, &conv->messages[i], &ri[i]);
    store_attach_free(c->att, c->n_att);
    c->att = NULL;
    c->n_att = 0;
    free(ri);
}

/* Load conversation `arg` (an id) or report why not. NULL on failure with *code set. */
static struct store_conversation *cmd_load(struct cmd_ctx *c, const char *arg, int *code)
{
    int64_t id = cmd_number(arg);
    if (id < 0) {
        *code = cmd_usage(c, "expected a conversation id (a positive number)");
        return NULL;
    }
    struct store_conversation *conv;
    int rc = store_conversation_load(c->st, id, &conv);
    if (rc != 0) {
        *code = cmd_store_result(c, rc);
        return NULL;
    }
    return conv;
}

static int cmd_show(struct cmd_ctx *c, const struct cmd_opts *o)
{
    if (o->n_pos != 1)
        return cmd_usage(c, "show takes one conversation id");
    int code;
    struct store_conversation *conv = cmd_load(c, o->pos[0], &code);
    if (!conv)
        return code;
    cmd_md_conversation(c, conv, o->versions);
    store_conversation_free(conv);
    return CMD_STORE_OK;
}

/* ---------------------------------------------------------------- search */

/* Print a snippet holding CMD_MARK_* markers: bold on a terminal (text sanitised). */
static void cmd_snippet(struct cmd_ctx *c, const char *s)
{
    while (*s) {
        const char *o = strstr(s, CMD_MARK_OPEN), *cl = strstr(s, CMD_MARK_CLOSE);
        const char *next = o && (!cl || o < cl) ? o : cl;
        if (!next) {
            cmd_puts(c, s);
            return;
        }
        cmd_put(c, s, (size_t)(next - s));
        fputs(next == o ? CMD_BOLD : CMD_NORMAL, c->out);
        s = next + strlen(CMD_MARK_OPEN);
    }
}

static int cmd_search(struct cmd_ctx *c, const struct cmd_opts *o)
{
    if (o->n_pos == 0)
        return cmd_usage(c, "search needs a query");
    struct store_search_opts so = {0};
    so.limit = cmd_limit(c, o, 20);
    if (so.limit > STORE_SEARCH_MAX) { /* said, never cut silently */
        cmd_error(c, "--limit takes 1 to %d (only the newest %d matches are ranked), not %s",
                  STORE_SEARCH_MAX, STORE_SEARCH_MAX, o->limit);
        return cmd_usage(c, NULL);
    }
    if (so.limit < 0 || cmd_range(c, o, &so.since, &so.until) != 0)
        return cmd_usage(c, NULL);
    so.model = o->model;
    so.titles = 1;
    so.open = o->json ? "" : c->tty ? CMD_MARK_OPEN : "[";
    so.close = o->json ? "" : c->tty ? CMD_MARK_CLOSE : "]";
    struct buf q = BUF_INIT;
    for (int i = 0; i < o->n_pos; i++) {
        if (i)
            buf_appendc(&q, ' ');
        buf_appends(&q, o->pos[i]);
    }
    const char *bad = store_query_error(buf_str(&q), NULL);
    if (bad) {
        buf_free(&q);
        return cmd_usage(c, bad);
    }
    struct store_hit *hits;
    size_t n;
    int rc = store_search(c->st, buf_str(&q), &so, &hits, &n);
    buf_free(&q);
    if (rc != 0)
        return cmd_store_result(c, rc);
    if (o->json) { /* the same hits as objects; [] for none (still exit 1) */
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            cJSON *h = cJSON_CreateObject();
            cJSON_AddNumberToObject(h, "conversation", (double)hits[i].conversation_id);
            if (hits[i].message_id) /* a title's hit is of the conversation: null */
                cJSON_AddNumberToObject(h, "message", (double)hits[i].message_id);
            else
                cJSON_AddNullToObject(h, "message");
            cJSON_AddNumberToObject(h, "created", (double)hits[i].created);
            cmd_json_add_str(h, "role", hits[i].role);
            cmd_json_add_str(h, "model", hits[i].model);
            cmd_json_add_str(h, "title", hits[i].title);
            cmd_json_add_str(h, "snippet", hits[i].snippet);
            cJSON_AddItemToArray(arr, h);
        }
        cmd_json_lines(c, arr);
        cJSON_Delete(arr);
    }
    if (n == 0) { /* grep's convention: a search that finds nothing says so and fails */
        store_hits_free(hits, n);
        cmd_error(c, "no matches");
        return CMD_STORE_NOMATCH;
    }
    for (size_t i = 0; i < n && !o->json; i++) {
        char when[32];
        cmd_time(hits[i].created, when);
        if (!hits[i].message_id) { /* the conversation's title matched: ID, update, title */
            fprintf(c->out, "%lld  %s  title  ", (long long)hits[i].conversation_id, when);
            if (c->tty)
                cmd_snippet(c, hits[i].snippet);
            else
                cmd_puts(c, hits[i].snippet);
            fputc('\n', c->out);
            continue;
        }
        fprintf(c->out, "%lld/%lld  %s  ", (long long)hits[i].conversation_id,
                (long long)hits[i].message_id, when);
        cmd_puts(c, hits[i].role);
        if (hits[i].model) {
            fputs("  ", c->out);
            cmd_puts(c, hits[i].model);
        }
        fputs("  ", c->out);
        cmd_puts(c, hits[i].title ? hits[i].title : "(untitled)");
        fputs("\n    ", c->out);
        if (c->tty)
            cmd_snippet(c, hits[i].snippet);
        else
            cmd_puts(c, hits[i].snippet);
        fputc('\n', c->out);
    }
    store_hits_free(hits, n);
    return CMD_STORE_OK;
}

/* ---------------------------------------------------------------- export */

/* A JSON string of possibly invalid UTF-8: bad bytes become U+FFFD, and so does a NUL (cJSON's
 * strings end at one), as in --json and in the requests that send the text again (until
 * 2026-12 a NUL was dropped: "before\0after" exported as "beforeafter"). */
static cJSON *cmd_json_str(const char *s, size_t n)
{
    if (utf8_valid(s, n) && memchr(s, '\0', n) == NULL)
        return cJSON_CreateString(s);
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        char enc[4];
        buf_append(&b, enc, utf8_encode(cp ? cp : UTF8_REPLACEMENT, enc));
        i += k;
    }
    cJSON *j = cJSON_CreateString(buf_str(&b));
    buf_free(&b);
    return j;
}

static void cmd_json_add_str(cJSON *obj, const char *key, const char *s)
{
    cJSON_AddItemToObject(obj, key, s ? cmd_json_str(s, strlen(s)) : cJSON_CreateNull());
}

static void cmd_json_add_count(cJSON *obj, const char *key, int64_t v)
{
    if (v >= 0)
        cJSON_AddNumberToObject(obj, key, (double)v);
    else
        cJSON_AddNullToObject(obj, key);
}

/* A message's attachments in the JSON export: name, kind, mime, size, sha256, the image or
 * PDF facts, and the file itself: "text" for a text file (as it was sent), "base64" for an
 * image or a PDF, so that the export is the whole conversation (until 2026-12 the bytes were
 * left out, and a backup lost what the user message had carried). */
static void cmd_json_attachments(struct cmd_ctx *c, cJSON *j, int64_t id)
{
    cJSON *arr = NULL;
    for (size_t i = 0; i < c->n_att; i++) {
        const struct store_attach *a = &c->att[i];
        if (a->message_id != id)
            continue;
        if (!arr)
            arr = cJSON_AddArrayToObject(j, "attachments");
        cJSON *o = cJSON_CreateObject();
        cmd_json_add_str(o, "name", a->name);
        cmd_json_add_str(o, "kind", a->kind);
        cmd_json_add_str(o, "mime", a->mime);
        cJSON_AddNumberToObject(o, "size", (double)a->len);
        char hex[65];
        sha256_hex(a->sha256, hex);
        cJSON_AddStringToObject(o, "sha256", hex);
        if (a->width && a->height) {
            cJSON_AddNumberToObject(o, "width", a->width);
            cJSON_AddNumberToObject(o, "height", a->height);
        }
        if (a->pages)
            cJSON_AddNumberToObject(o, "pages", a->pages);
        if (a->kind && strcmp(a->kind, "text") == 0 && utf8_valid((const char *)a->data, a->len)) {
            char *t = xstrndup((const char *)a->data, a->len);
            cJSON_AddStringToObject(o, "text", t);
            free(t);
        } else {
            struct buf b64 = BUF_INIT;
            buf_append_base64(&b64, a->data ? (const void *)a->data : "", a->len);
            cJSON_AddStringToObject(o, "base64", buf_str(&b64));
            buf_free(&b64);
        }
        cJSON_AddItemToArray(arr, o);
    }
}

static cJSON *cmd_json_conversation(struct cmd_ctx *c, const struct store_conversation *conv,
                                    int all)
{
    if (store_attach_list(c->st, conv->id, &c->att, &c->n_att) != 0)
        cmd_error(c, "cannot read the attachments: %s", store_error(c->st));
    size_t shown;
    struct conv_rowinfo *ri = cmd_rows(conv, all, &shown);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)conv->id);
    cmd_json_add_str(o, "title", conv->title);
    cmd_json_add_str(o, "model", conv->model);
    cmd_json_add_str(o, "profile", conv->profile);
    cmd_json_add_str(o, "system_prompt", conv->system_prompt);
    cJSON_AddNumberToObject(o, "created", (double)conv->created);
    cJSON_AddNumberToObject(o, "updated", (double)conv->updated);
    cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
    for (size_t i = 0; i < conv->n_messages; i++) {
        const struct store_message *m = &conv->messages[i];
        if (!all && !ri[i].live)
            continue;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "id", (double)m->id);
        cmd_json_add_count(j, "parent_id", m->parent_id > 0 ? m->parent_id : -1);
        cmd_json_add_str(j, "role", m->role);
        cJSON_AddNumberToObject(j, "turn", ri[i].turn);
        cJSON_AddNumberToObject(j, "version", ri[i].version);
        cJSON_AddNumberToObject(j, "versions", ri[i].versions);
        if (all)
            cJSON_AddBoolToObject(j, "live", ri[i].live);
        cJSON_AddItemToObject(j, "content", cmd_json_str(m->content, m->content_len));
        cmd_json_attachments(c, j, m->id);
        cmd_json_add_str(j, "reasoning", m->reasoning);
        cJSON *tool = m->tool ? cJSON_Parse(m->tool) : NULL; /* calls, or the call answered */
        if (tool)
            cJSON_AddItemToObject(j, "tool", tool);
        cmd_json_add_str(j, "status", store_status_name(m->status));
        cmd_json_add_str(j, "finish_reason", m->finish_reason);
        cmd_json_add_str(j, "error", m->error);
        cmd_json_add_str(j, "model", m->model);
        cmd_json_add_str(j, "profile", m->profile);
        cmd_json_add_str(j, "host", m->host);
        cJSON_AddNumberToObject(j, "created", (double)m->created);
        cJSON_AddBoolToObject(j, "cached", m->cached);
        cJSON *u = cJSON_AddObjectToObject(j, "usage");
        cmd_json_add_count(u, "prompt_tokens", m->usage.prompt_tokens);
        cmd_json_add_count(u, "completion_tokens", m->usage.completion_tokens);
        cmd_json_add_count(u, "total_tokens", m->usage.total_tokens);
        cJSON *t = cJSON_AddObjectToObject(j, "timings");
        const double tv[] = {m->timings.ttft, m->timings.total, m->timings.tokens_per_s,
                             m->timings.dns,  m->timings.connect, m->timings.tls};
        static const char *const tk[] = {"ttft", "total", "tokens_per_s", "dns", "connect", "tls"};
        for (size_t k = 0; k < TT_ARRAY_LEN(tk); k++) {
            if (tv[k] >= 0)
                cJSON_AddNumberToObject(t, tk[k], tv[k]);
            else
                cJSON_AddNullToObject(t, tk[k]);
        }
        cJSON_AddItemToArray(msgs, j);
    }
    free(ri);
    store_attach_free(c->att, c->n_att);
    c->att = NULL;
    c->n_att = 0;
    return o;
}

static void cmd_json_print_as(struct cmd_ctx *c, cJSON *j, const char *indent, int compact)
{
    char *s = compact ? cJSON_PrintUnformatted(j) : cJSON_Print(j);
    /* cJSON escapes C0 controls only: on a terminal, C1, DEL and bidi controls become \uXXXX
     * too (the same JSON value); a pipe or file gets cJSON's bytes. */
    struct buf safe = BUF_INIT;
    size_t n = strlen(s);
    for (size_t at = 0, k; at < n; at += k) {
        k = c->tty ? utf8_cut(s + at, n - at, CMD_PIECE) : n - at;
        const char *p = s + at, *end = p + k;
        if (c->tty) { /* a piece at a time: memory O(piece) */
            buf_reset(&safe);
            utf8_json_terminal(&safe, p, k);
            p = safe.data;
            end = p + safe.len;
        }
        for (; p < end; p++) {
            fputc(*p, c->out);
            if (*p == '\n' && indent)
                fputs(indent, c->out);
        }
    }
    buf_free(&safe);
    free(s);
}

static void cmd_json_print(struct cmd_ctx *c, cJSON *j, const char *indent)
{
    cmd_json_print_as(c, j, indent, 0);
}

/* A list for ls and search: an array with one object a line (grep and jq read it alike). */
static void cmd_json_lines(struct cmd_ctx *c, cJSON *arr)
{
    fputc('[', c->out);
    for (cJSON *e = arr->child; e; e = e->next) {
        fputs(e == arr->child ? "\n" : ",\n", c->out);
        cmd_json_print_as(c, e, NULL, 1);
    }
    fputs(arr->child ? "\n]\n" : "]\n", c->out);
}

static int cmd_export_to(struct cmd_ctx *c, const struct cmd_opts *o, int json);

/* export -o FILE: the output in FILE, and for Markdown the attachments in FILE's stem +
 * ".files/" beside it. */
static int cmd_export(struct cmd_ctx *c, const struct cmd_opts *o)
{
    const char *fmt = o->format ? o->format : o->all ? "json" : "md";
    int json = strcmp(fmt, "json") == 0;
    if (!json && strcmp(fmt, "md") != 0)
        return cmd_usage(c, "--format is md or json");
    if (o->all ? o->n_pos != 0 : o->n_pos != 1)
        return cmd_usage(c, "export takes one conversation id, or --all");
    if (!o->output || strcmp(o->output, "-") == 0) /* "-": stdout, as for other tools (until
                                                     * 2026-12 a file named "-") */
        return cmd_export_to(c, o, json);
    char *dir = xstrdup(o->output);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (util_mkdir_p(dir, 0700) != 0 && errno != EEXIST) {
            cmd_error(c, "cannot make %s: %s", dir, strerror(errno));
            free(dir);
            return CMD_STORE_FAIL;
        }
    }
    free(dir);
    struct cmd_ctx fc = *c;
    fc.out = fopen(o->output, "w");
    if (!fc.out) {
        cmd_error(c, "cannot write %s: %s", o->output, strerror(errno));
        return CMD_STORE_FAIL;
    }
    fc.tty = 0;
    size_t n = strlen(o->output);
    size_t stem = n > 3 && strcmp(o->output + n - 3, ".md") == 0 ? n - 3 : n;
    char *files = xasprintf("%.*s.files", (int)stem, o->output);
    const char *rel = strrchr(files, '/');
    if (!json) {
        fc.files_dir = files;
        fc.files_link = rel ? rel + 1 : files;
        if (util_mkdir_p(files, 0700) != 0 && errno != EEXIST) {
            cmd_error(c, "cannot make %s: %s", files, strerror(errno));
            fc.files_dir = NULL;
            fc.unwritten = 1;
        }
    }
    int code = cmd_export_to(&fc, o, json);
    /* the Markdown without its files is not the export asked for: a backup script must see
     * it (until 2026-12 the error was printed and the exit status was 0) */
    if (code == CMD_STORE_OK && fc.unwritten)
        code = CMD_STORE_FAIL;
    if (fclose(fc.out) != 0 && code == CMD_STORE_OK) {
        cmd_error(c, "cannot write %s: %s", o->output, strerror(errno));
        code = CMD_STORE_FAIL;
    }
    if (!json && fc.written.len == 0)
        (void)rmdir(files); /* no attachments: no empty folder */
    buf_free(&fc.written);
    free(files);
    return code;
}

static int cmd_export_to(struct cmd_ctx *c, const struct cmd_opts *o, int json)
{
    if (!o->all) {
        int code;
        struct store_conversation *conv = cmd_load(c, o->pos[0], &code);
        if (!conv)
            return code;
        if (json) {
            cJSON *j = cmd_json_conversation(c, conv, o->versions);
            cmd_json_print(c, j, NULL);
            fputc('\n', c->out);
            cJSON_Delete(j);
        } else {
            cmd_md_conversation(c, conv, o->versions);
        }
        store_conversation_free(conv);
        return CMD_STORE_OK;
    }
    int64_t *ids;
    size_t n;
    if (store_conversation_ids(c->st, &ids, &n) != 0)
        return cmd_store_result(c, -1);
    /* One conversation in memory at a time; the wrapper indented as cJSON_Print indents the
     * conversations in it (tabs) */
    if (json)
        fputs("{\n\t\"format\":\t\"tokterm-export\",\n\t\"version\":\t1,\n"
              "\t\"conversations\":\t[",
              c->out);
    int code = CMD_STORE_OK, first = 1;
    for (size_t i = 0; i < n; i++) {
        struct store_conversation *conv;
        int rc = store_conversation_load(c->st, ids[i], &conv);
        if (rc == STORE_NOT_FOUND)
            continue; /* deleted meanwhile */
        if (rc != 0) {
            code = cmd_store_result(c, rc);
            break;
        }
        if (json) {
            fputs(first ? "\n\t\t" : ",\n\t\t", c->out);
            cJSON *j = cmd_json_conversation(c, conv, o->versions);
            cmd_json_print(c, j, "\t\t");
            cJSON_Delete(j);
        } else {
            if (!first)
                fputs("---\n\n", c->out);
            cmd_md_conversation(c, conv, o->versions);
        }
        first = 0;
        store_conversation_free(conv);
    }
    if (json)
        fputs(first ? "]\n}\n" : "\n\t]\n}\n", c->out);
    free(ids);
    return code;
}

/* ---------------------------------------------------------------- rm, rename */

static int cmd_rm(struct cmd_ctx *c, const struct cmd_opts *o)
{
    if (o->n_pos != 1)
        return cmd_usage(c, "rm takes one conversation id");
    int64_t id = cmd_number(o->pos[0]);
    if (id < 0)
        return cmd_usage(c, "expected a conversation id (a positive number)");
    int rc = store_conversation_delete(c->st, id);
    if (rc != 0)
        return cmd_store_result(c, rc);
    fprintf(c->out, "deleted conversation %lld\n", (long long)id);
    return CMD_STORE_OK;
}

static int cmd_rename(struct cmd_ctx *c, const struct cmd_opts *o)
{
    if (o->n_pos < 2)
        return cmd_usage(c, "rename takes a conversation id and a title");
    int64_t id = cmd_number(o->pos[0]);
    if (id < 0)
        return cmd_usage(c, "expected a conversation id (a positive number)");
    struct buf t = BUF_INIT;
    for (int i = 1; i < o->n_pos; i++) {
        if (i > 1)
            buf_appendc(&t, ' ');
        buf_appends(&t, o->pos[i]);
    }
    /* each run of white space one blank, as in a title taken from a prompt (until 2026-12 a
     * line break in it split the conversation's line of ls in two) */
    size_t w = 0;
    for (size_t r = 0; r < t.len; r++) {
        char ch = t.data[r];
        if (!strchr(" \t\n\r\f\v", ch))
            t.data[w++] = ch;
        else if (w && t.data[w - 1] != ' ')
            t.data[w++] = ' ';
    }
    t.data[t.len = w] = '\0';
    char *title = util_trim(t.data);
    if (!*title) {
        buf_free(&t);
        return cmd_usage(c, "the title is empty");
    }
    int rc = store_conversation_rename(c->st, id, title);
    if (rc == 0) {
        fprintf(c->out, "renamed conversation %lld to \"", (long long)id);
        cmd_puts(c, title);
        fputs("\"\n", c->out);
    }
    buf_free(&t);
    return cmd_store_result(c, rc);
}

/* ---------------------------------------------------------------- stats, cache */

static int cmd_stats(struct cmd_ctx *c, const struct cmd_opts *o)
{
    int64_t since, until;
    if (o->n_pos)
        return cmd_usage(c, "stats takes no arguments");
    if (cmd_range(c, o, &since, &until) != 0)
        return cmd_usage(c, NULL);
    enum cmd_stats_format fmt = o->json ? CMD_STATS_JSON : CMD_STATS_TEXT;
    if (o->format && strcmp(o->format, "json") == 0)
        fmt = CMD_STATS_JSON;
    else if (o->format && strcmp(o->format, "prometheus") == 0)
        fmt = CMD_STATS_PROMETHEUS;
    else if (o->format && strcmp(o->format, "text") != 0)
        return cmd_usage(c, "stats --format takes text, json or prometheus");
    if (fmt == CMD_STATS_PROMETHEUS)
        return cmd_store_result(c, cmd_stats_prometheus(c->out, c->st, since, until, o->model));
    struct store_stats s;
    if (store_stats(c->st, since, until, o->model, &s) != 0)
        return cmd_store_result(c, -1);
    cmd_stats_write(c->out, &s, fmt);
    store_stats_clear(&s);
    return CMD_STORE_OK;
}

static void cmd_bytes(char out[32], int64_t b)
{
    if (b >= 1024 * 1024)
        snprintf(out, 32, "%.1f MB", (double)b / (1024.0 * 1024.0));
    else if (b >= 1024)
        snprintf(out, 32, "%.1f kB", (double)b / 1024.0);
    else
        snprintf(out, 32, "%lld B", (long long)b);
}

static int cmd_cache(struct cmd_ctx *c, const struct cmd_opts *o)
{
    if (o->n_pos != 1)
        return cmd_usage(c, "cache takes \"stats\" or \"clear\"");
    if (strcmp(o->pos[0], "clear") == 0) {
        int64_t n = store_cache_clear(c->st);
        if (n < 0)
            return cmd_store_result(c, -1);
        fprintf(c->out, "cleared %lld cached answer%s\n", (long long)n, n == 1 ? "" : "s");
        return CMD_STORE_OK;
    }
    if (strcmp(o->pos[0], "stats") != 0)
        return cmd_usage(c, "cache takes \"stats\" or \"clear\"");
    struct store_cache_stats s;
    if (store_cache_stats(c->st, &s) != 0)
        return cmd_store_result(c, -1);
    char used[32], cap[32], t1[32], t2[32];
    cmd_bytes(used, s.bytes);
    cmd_bytes(cap, s.max_bytes);
    fprintf(c->out, "%-10s%lld\n", "entries", (long long)s.entries);
    fprintf(c->out, "%-10s%s of %s\n", "size", used, s.max_bytes ? cap : "unlimited");
    if (s.ttl)
        fprintf(c->out, "%-10s%.1f days\n", "ttl", (double)s.ttl / 86400.0);
    else
        fprintf(c->out, "%-10s%s\n", "ttl", "none");
    fprintf(c->out, "%-10s%lld\n", "hits", (long long)s.hits);
    if (s.entries) {
        cmd_time(s.oldest, t1);
        cmd_time(s.newest, t2);
        fprintf(c->out, "%-10s%s\n%-10s%s\n", "oldest", t1, "newest", t2);
    }
    return CMD_STORE_OK;
}

/* ---------------------------------------------------------------- dispatch */

/* code, unless out could not be written: 141, quiet, when its reader went away (as -p), or
 * 1 with the reason (until 2026-12 `export --all > all.json` on a full disk exited 0). */
static int cmd_flushed(struct cmd_ctx *c, int code)
{
    char who[64];
    snprintf(who, sizeof who, "tokterm %s", c->name);
    return util_out_flushed(c->out, code, who);
}

int cmd_store_run(struct store *st, int argc, char **argv, FILE *out, FILE *err,
                  int out_is_tty)
{
    struct cmd_ctx c = {st, out, err, out_is_tty, argc > 0 ? argv[0] : "store", NULL, 0, NULL,
                        NULL, BUF_INIT, 0};
    static const struct {
        const char *name;
        unsigned opts;
        int (*fn)(struct cmd_ctx *, const struct cmd_opts *);
    } cmds[] = {
        {"ls", OPT_LIMIT | OPT_JSON, cmd_ls},
        {"show", OPT_VERSIONS, cmd_show},
        {"search", OPT_LIMIT | OPT_MODEL | OPT_SINCE | OPT_UNTIL | OPT_JSON, cmd_search},
        {"export", OPT_FORMAT | OPT_ALL | OPT_VERSIONS | OPT_OUTPUT, cmd_export},
        {"rm", 0, cmd_rm},
        {"rename", 0, cmd_rename},
        {"stats", OPT_SINCE | OPT_UNTIL | OPT_MODEL | OPT_JSON | OPT_FORMAT, cmd_stats},
        {"cache", 0, cmd_cache},
    };
    if (argc < 1)
        return cmd_usage(&c, "no subcommand");
    for (size_t i = 0; i < TT_ARRAY_LEN(cmds); i++) {
        if (strcmp(argv[0], cmds[i].name) != 0)
            continue;
        struct cmd_opts o;
        int code;
        if (cmd_parse(&c, argc, argv, cmds[i].opts, &o) != 0) {
            code = cmd_usage(&c, NULL);
        } else if (o.help) {
            fputs(cmd_usage_text, out);
            code = CMD_STORE_OK;
        } else {
            code = cmds[i].fn(&c, &o);
        }
        free(o.pos);
        return cmd_flushed(&c, code);
    }
    cmd_error(&c, "unknown subcommand");
    fputs(cmd_usage_text, err);
    return CMD_STORE_USAGE;
}

int cmd_store(const char *db_path, int argc, char **argv)
{
    char *err = NULL;
    if (argc > 0 && strcmp(argv[0], "search") == 0)
        store_prefer_large_reads(); /* before SQLite is loaded */
    struct store_open_info info;
    /* commands that only read never write (a full disk, a read-only file): no recovery */
    /* search may update its indexes, best effort */
    static const char *const readers[] = {"ls", "show", "export", "stats"};
    int reader = 0, search = argc > 0 && strcmp(argv[0], "search") == 0;
    for (size_t i = 0; argc > 0 && i < TT_ARRAY_LEN(readers); i++)
        reader |= strcmp(argv[0], readers[i]) == 0;
    /* no file there (a mistyped --db): rm, rename and cache open it as readers do, in memory,
     * and say so (until 2026-12 they created an empty database at that path) */
    struct stat sb;
    reader |= stat(db_path, &sb) != 0 && errno == ENOENT;
    struct store *st = search   ? store_open_searcher(db_path, &info, &err)
                       : reader ? store_open_reader(db_path, &info, &err)
                                : store_open(db_path, &info, &err);
    if (!st) {
        struct buf b = BUF_INIT;
        utf8_sanitize(&b, err, strlen(err));
        fprintf(stderr, "tokterm: %s\n", buf_str(&b));
        buf_free(&b);
        free(err);
        return CMD_STORE_FAIL;
    }
    int help = 0;
    for (int i = 0; i < argc; i++)
        help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    if (info.missing && !help)
        fprintf(stderr, "tokterm: no database at %s (nothing has been saved there)\n",
                db_path);
    if (info.mode_fixed)
        fprintf(stderr, "tokterm: note: %s was open to others (mode %04o); now %04o\n",
                db_path, info.old_mode, info.new_mode);
    if (info.dir_mode_fixed)
        fprintf(stderr, "tokterm: the database's directory was writable by others (mode %04o); "
                        "it is now %04o\n", info.old_dir_mode, info.new_dir_mode);
    if (info.recovered)
        fprintf(stderr, "tokterm: %d answer%s cut off when tokterm stopped %s marked "
                        "interrupted\n",
                info.recovered, info.recovered == 1 ? "" : "s",
                info.recovered == 1 ? "is" : "are");
    int code = cmd_store_run(st, argc, argv, stdout, stderr, isatty(STDOUT_FILENO));
    store_close(st);
    if (fflush(stdout) != 0 && code == CMD_STORE_OK) {
        fprintf(stderr, "tokterm: cannot write the output: %s\n", strerror(errno));
        code = CMD_STORE_FAIL;
    }
    return code;
}
