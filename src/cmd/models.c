/* models.c - `tokterm models`: what the server offers, as a table, ids or JSON. */
#include "config.h"
#include "cmd/models.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "core/conf.h"
#include "core/models.h"
#include "tokens/context.h"
#include "tokens/tokenizer.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char models_usage[] =
    "usage: tokterm [-P PROFILE] [--api NAME] [--base-url URL] models [--json] [--refresh]\n"
    "Lists the models the server offers (cached for a day; --refresh asks the server again).\n"
    "On a terminal a table, in a pipe one id a line, with --json an array of objects.\n";

/* s as a terminal shows it harmlessly, on one line (utf8_sanitize; a TAB or LF as ^I, ^J). */
static const char *models_safe(struct buf *b, const char *s)
{
    buf_reset(b);
    struct buf raw = BUF_INIT;
    utf8_sanitize(&raw, s, strlen(s));
    for (size_t i = 0; i < raw.len; i++) {
        char c = raw.data[i];
        if (c == '\n' || c == '\t')
            buf_appends(b, c == '\n' ? "^J" : "^I");
        else
            buf_appendc(b, c);
    }
    buf_free(&raw);
    return buf_str(b);
}

/* A window in few characters: "128k", "1.05M", "4096"; "-" when unknown. */
static const char *models_tokens(char *out, size_t n, long v)
{
    if (v <= 0)
        snprintf(out, n, "-");
    else if (v % 1000000 == 0 || v >= 1000000)
        snprintf(out, n, "%.3gM", v / 1e6);
    else if (v % 1000 == 0 || v >= 10000)
        snprintf(out, n, "%.0fk", v / 1e3);
    else
        snprintf(out, n, "%ld", v);
    return out;
}

/* "$2.50" per million tokens; "-" when unknown. */
static const char *models_usd(char *out, size_t n, int known, double v)
{
    if (!known)
        snprintf(out, n, "-");
    else if (v == 0)
        snprintf(out, n, "free");
    else
        snprintf(out, n, v < 0.1 ? "$%.3f" : "$%.2f", v);
    return out;
}

/* On a terminal: the ids, the server's names and limits when it gives them, and what
 * tokterm's own tables say of each (context window, price per million tokens). */
static void models_table(const struct model_list *l)
{
    struct buf id = BUF_INIT, name = BUF_INIT;
    int wid = 2, wname = 0, limits = 0, known = 0;
    char *cdir = conf_dir("config");
    char *user = xasprintf("%s/prices.tsv", cdir);
    free(cdir);
    struct tok_model_info *mi = xcalloc(l->n + 1, sizeof *mi);
    struct context_price *pr = xcalloc(l->n + 1, sizeof *pr);
    int *priced = xcalloc(l->n + 1, sizeof *priced);
    for (size_t i = 0; i < l->n; i++) {
        const struct model_info *m = &l->v[i];
        int n = (int)strlen(m->id);
        wid = n > wid ? n : wid;
        n = m->name ? (int)strlen(m->name) : 0;
        wname = n > wname ? n : wname;
        limits |= m->input_limit || m->output_limit;
        if (tokenizer_model_info(m->id, &mi[i]) < 0)
            mi[i].context_window = 0;
        priced[i] = context_price_lookup(m->id, user, &pr[i]) == 0;
        known |= mi[i].context_window > 0 || priced[i];
    }
    free(user);
    wid = wid > 60 ? 60 : wid;
    wname = wname > 40 ? 40 : wname;
    printf("%-*s", wid, "ID");
    if (wname)
        printf("  %-*s", wname, "NAME");
    if (limits)
        printf("  %9s  %9s", "INPUT", "OUTPUT");
    if (known)
        printf("  %7s  %8s  %8s", "CONTEXT", "$/M IN", "$/M OUT");
    putchar('\n');
    for (size_t i = 0; i < l->n; i++) {
        const struct model_info *m = &l->v[i];
        printf("%-*s", wid, models_safe(&id, m->id));
        if (wname)
            printf("  %-*.*s", wname, wname, models_safe(&name, m->name ? m->name : ""));
        if (limits)
            printf("  %9ld  %9ld", m->input_limit, m->output_limit);
        if (known) {
            char w[16], a[16], b[16];
            printf("  %7s  %8s  %8s", models_tokens(w, sizeof w, mi[i].context_window),
                   models_usd(a, sizeof a, priced[i], pr[i].in),
                   models_usd(b, sizeof b, priced[i], pr[i].out));
        }
        putchar('\n');
    }
    if (known)
        printf("CONTEXT and $/M (per million tokens): tokterm's data/models.tsv and "
               "prices.tsv by id prefix\n");
    free(mi);
    free(pr);
    free(priced);
    buf_free(&id);
    buf_free(&name);
}

int cmd_models(const struct conf *c, const char *key, int json, int argc, char **argv)
{
    int refresh = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--refresh") == 0) {
            refresh = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(models_usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "tokterm models: unknown argument '%s'\n%s", argv[i], models_usage);
            return 2;
        }
    }
    struct model_list l = {0};
    struct buf err = BUF_INIT;
    int code = models_get(c, key, refresh, &l, &err);
    if (code) {
        struct buf safe = BUF_INIT; /* the server's words, shown, not obeyed */
        utf8_sanitize(&safe, err.data ? err.data : "", err.len);
        fprintf(stderr, "tokterm models: %s\n", buf_str(&safe));
        buf_free(&safe);
        buf_free(&err);
        return code;
    }
    buf_free(&err);
    if (json) {
        char *s = models_json(&l);
        struct buf safe = BUF_INIT; /* no character a terminal obeys, the same JSON */
        utf8_json_terminal(&safe, s ? s : "[]", s ? strlen(s) : 2);
        puts(buf_str(&safe));
        buf_free(&safe);
        free(s);
    } else if (isatty(1)) {
        models_table(&l);
    } else {
        struct buf b = BUF_INIT;
        for (size_t i = 0; i < l.n; i++)
            puts(models_safe(&b, l.v[i].id));
        buf_free(&b);
    }
    if (l.n == 0)
        fprintf(stderr, "tokterm models: the server lists no models\n");
    model_list_free(&l);
    return fflush(stdout) == 0 ? 0 : 1;
}
