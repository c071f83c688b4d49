/* stats.c - `tokterm stats`: counts, spend, and p50/p90/p99 of time to first token,
 * inter-token latency and tokens/s per model, provider and day, for people or as JSON. */
#include "config.h"
#include "cmd/stats.h"

#include "base/buf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "core/conf.h"
#include "core/metrics.h"
#include "tokens/context.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Spend of the models: dollars; *unpriced gets the models without a price, ", "-separated. */
static double cmd_stats_spend(const struct store_stats *s, double *each, struct buf *unpriced)
{
    char *cdir = conf_dir("config");
    char *user = xasprintf("%s/prices.tsv", cdir);
    double sum = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        const struct store_model_stat *m = &s->models[i];
        struct context_price p;
        each[i] = -1;
        if (context_price_lookup(m->model, user, &p) == 0) {
            each[i] = context_cost(&p, m->prompt_tokens, 0, m->completion_tokens);
            sum += each[i];
        } else if (m->prompt_tokens + m->completion_tokens > 0) {
            buf_printf(unpriced, "%s%s", unpriced->len ? ", " : "", m->model);
        }
    }
    free(user);
    free(cdir);
    return sum;
}

/* name made harmless for a terminal. */
static void cmd_stats_name(FILE *f, const char *name, int width)
{
    struct buf b = BUF_INIT;
    utf8_sanitize(&b, name, strlen(name));
    fprintf(f, "%-*s", width, buf_str(&b));
    buf_free(&b);
}

/* "p50 1.00 s   p90 ...   (N answers)", scaled by mul, or "-" when nothing was measured. */
static void cmd_stats_pct(FILE *f, const char *label, const struct store_pct *p, double mul,
                          const char *unit, int prec, const char *more)
{
    fprintf(f, "%-22s", label);
    if (p->n == 0) { /* none counted: say which answers would be */
        if (*more)
            fprintf(f, "- (no answers%s yet)\n", more);
        else
            fputs("-\n", f);
        return;
    }
    fprintf(f, "p50 %.*f%s   p90 %.*f%s   p99 %.*f%s   (%lld answer%s%s)\n", prec, p->p50 * mul,
            unit, prec, p->p90 * mul, unit, prec, p->p99 * mul, unit, (long long)p->n,
            util_plural(p->n), more);
}

/* One cell of a latency table: the value scaled, or "-". */
static void cmd_stats_cell(FILE *f, double v, double mul, int prec)
{
    if (v < 0)
        fprintf(f, " %8s", "-");
    else
        fprintf(f, " %8.*f", prec, v * mul);
}

/* A table of the percentiles of groups (models, providers or days). */
static void cmd_stats_perf_table(FILE *f, const char *title, size_t n,
                                 const char *(*name)(const struct store_stats *, size_t),
                                 const struct store_perf *(*perf)(const struct store_stats *,
                                                                  size_t),
                                 const struct store_stats *s)
{
    if (!n)
        return;
    fprintf(f, "\n%-24s %8s %8s %8s %8s %8s %8s %8s %7s %5s\n", title, "TTFT50", "TTFT90",
            "TTFT99", "ITL50ms", "ITL99ms", "TOK/S50", "TOK/S90", "RETRIES", "429");
    for (size_t i = 0; i < n; i++) {
        const struct store_perf *p = perf(s, i);
        cmd_stats_name(f, name(s, i), 24);
        cmd_stats_cell(f, p->ttft.p50, 1, 2);
        cmd_stats_cell(f, p->ttft.p90, 1, 2);
        cmd_stats_cell(f, p->ttft.p99, 1, 2);
        cmd_stats_cell(f, p->itl.p50, 1000, 1);
        cmd_stats_cell(f, p->itl.p99, 1000, 1);
        cmd_stats_cell(f, p->tps.p50, 1, 1);
        cmd_stats_cell(f, p->tps.p90, 1, 1);
        fprintf(f, " %7lld %5lld\n", (long long)p->retries, (long long)p->rate_limited);
    }
}

static const char *cmd_model_name(const struct store_stats *s, size_t i)
{
    return s->models[i].model;
}
static const struct store_perf *cmd_model_perf(const struct store_stats *s, size_t i)
{
    return &s->models[i].perf;
}
static const char *cmd_host_name(const struct store_stats *s, size_t i)
{
    return s->hosts[i].model;
}
static const struct store_perf *cmd_host_perf(const struct store_stats *s, size_t i)
{
    return &s->hosts[i].perf;
}
static const char *cmd_day_name(const struct store_stats *s, size_t i)
{
    return s->days[i].day;
}
static const struct store_perf *cmd_day_perf(const struct store_stats *s, size_t i)
{
    return &s->days[i].perf;
}

static void cmd_stats_text(FILE *f, const struct store_stats *s, const double *spend,
                           double total, const struct buf *unpriced)
{
    fprintf(f, "%-22s%lld\n", "conversations", (long long)s->conversations);
    fprintf(f, "%-22s%lld\n", "messages", (long long)s->messages);
    fprintf(f, "%-22s%lld", "answers", (long long)s->answers);
    const char *sep = " (";
    for (int k = STORE_COMPLETE; k <= STORE_INTERRUPTED; k++)
        if (s->by_status[k]) {
            fprintf(f, "%s%s %lld", sep, store_status_name((enum store_status)k),
                    (long long)s->by_status[k]);
            sep = ", ";
        }
    if (s->by_status[STORE_STREAMING])
        fprintf(f, "%sstreaming %lld", sep, (long long)s->by_status[STORE_STREAMING]), sep = ", ";
    fputs(*sep == ',' ? ")\n" : "\n", f);
    fprintf(f, "%-22s%lld of %lld answer%s (%.1f%%)\n", "cache hits",
            (long long)s->cached_answers, (long long)s->answers, util_plural(s->answers),
            s->cache_hit_rate * 100.0);
    fprintf(f, "%-22s%lld (%lld answered 429)\n", "retries", (long long)s->perf.retries,
            (long long)s->perf.rate_limited);
    char usd[CONTEXT_USD_MAX];
    fprintf(f, "%-22s%s", "spend", context_format_usd(total, usd));
    if (unpriced->len) {
        fputs(" (no price for ", f);
        cmd_stats_name(f, buf_str(unpriced), 0);
        fputs(")", f);
    }
    fputc('\n', f);
    cmd_stats_pct(f, "time to first token", &s->perf.ttft, 1, " s", 2, "");
    cmd_stats_pct(f, "inter-token latency", &s->perf.itl, 1000, " ms", 1, "");
    char more[64];
    snprintf(more, sizeof more, " of %d+ tokens over %.1f+ s", STORE_TPS_MIN_TOKENS,
             STORE_TPS_MIN_SECONDS);
    cmd_stats_pct(f, "tokens/s", &s->perf.tps, 1, "", 1, more);
    if (s->n_models) {
        fprintf(f, "\n%-30s %8s %12s %12s %12s %10s\n", "MODEL", "ANSWERS", "PROMPT",
                "COMPLETION", "TOTAL", "SPEND");
        for (size_t i = 0; i < s->n_models; i++) {
            const struct store_model_stat *m = &s->models[i];
            cmd_stats_name(f, m->model, 30);
            fprintf(f, " %8lld %12lld %12lld %12lld", (long long)m->answers,
                    (long long)m->prompt_tokens, (long long)m->completion_tokens,
                    (long long)m->total_tokens);
            if (spend[i] >= 0)
                fprintf(f, " %10s\n", context_format_usd(spend[i], usd));
            else
                fprintf(f, " %10s\n", "-");
        }
    }
    if (s->n_days) {
        fprintf(f, "\n%-30s %8s %12s %12s %12s\n", "DAY", "ANSWERS", "PROMPT", "COMPLETION",
                "TOTAL");
        for (size_t i = 0; i < s->n_days; i++) {
            const struct store_day_stat *d = &s->days[i];
            fprintf(f, "%-30s %8lld %12lld %12lld %12lld\n", d->day, (long long)d->answers,
                    (long long)d->prompt_tokens, (long long)d->completion_tokens,
                    (long long)d->total_tokens);
        }
    }
    cmd_stats_perf_table(f, "MODEL", s->n_models, cmd_model_name, cmd_model_perf, s);
    cmd_stats_perf_table(f, "PROVIDER", s->n_hosts, cmd_host_name, cmd_host_perf, s);
    cmd_stats_perf_table(f, "DAY", s->n_days, cmd_day_name, cmd_day_perf, s);
}

static cJSON *cmd_stats_json_pct(const struct store_pct *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)p->n);
    if (p->n) {
        cJSON_AddNumberToObject(o, "p50", p->p50);
        cJSON_AddNumberToObject(o, "p90", p->p90);
        cJSON_AddNumberToObject(o, "p99", p->p99);
    }
    return o;
}

static void cmd_stats_json_perf(cJSON *o, const struct store_perf *p)
{
    cJSON_AddNumberToObject(o, "sent", (double)p->sent);
    cJSON_AddNumberToObject(o, "retries", (double)p->retries);
    cJSON_AddNumberToObject(o, "rate_limited", (double)p->rate_limited);
    cJSON_AddItemToObject(o, "ttft_seconds", cmd_stats_json_pct(&p->ttft));
    cJSON_AddItemToObject(o, "inter_token_seconds", cmd_stats_json_pct(&p->itl));
    cJSON_AddItemToObject(o, "tokens_per_second", cmd_stats_json_pct(&p->tps));
}

/* One group's object: its name under key, its answers and tokens, its perf. */
static cJSON *cmd_stats_json_group(const char *key, const char *name, int64_t answers,
                                   int64_t prompt, int64_t completion, int64_t total,
                                   const struct store_perf *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, key, name);
    cJSON_AddNumberToObject(o, "answers", (double)answers);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(o, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(o, "total_tokens", (double)total);
    cmd_stats_json_perf(o, p);
    return o;
}

static void cmd_stats_json(FILE *f, const struct store_stats *s, const double *spend,
                           double total)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "conversations", (double)s->conversations);
    cJSON_AddNumberToObject(j, "messages", (double)s->messages);
    cJSON_AddNumberToObject(j, "answers", (double)s->answers);
    cJSON *st = cJSON_AddObjectToObject(j, "by_status");
    for (int k = STORE_STREAMING; k <= STORE_INTERRUPTED; k++)
        cJSON_AddNumberToObject(st, store_status_name((enum store_status)k),
                                (double)s->by_status[k]);
    cJSON_AddNumberToObject(j, "cached_answers", (double)s->cached_answers);
    cJSON_AddNumberToObject(j, "cache_hit_rate", s->cache_hit_rate);
    cJSON_AddNumberToObject(j, "spend_usd", total);
    cJSON_AddNumberToObject(j, "tokens_per_second_min_tokens", STORE_TPS_MIN_TOKENS);
    cmd_stats_json_perf(j, &s->perf);
    cJSON *a = cJSON_AddArrayToObject(j, "models");
    for (size_t i = 0; i < s->n_models; i++) {
        const struct store_model_stat *m = &s->models[i];
        cJSON *o = cmd_stats_json_group("model", m->model, m->answers, m->prompt_tokens,
                                        m->completion_tokens, m->total_tokens, &m->perf);
        if (spend[i] >= 0)
            cJSON_AddNumberToObject(o, "spend_usd", spend[i]);
        else
            cJSON_AddNullToObject(o, "spend_usd");
        cJSON_AddItemToArray(a, o);
    }
    a = cJSON_AddArrayToObject(j, "providers");
    for (size_t i = 0; i < s->n_hosts; i++) {
        const struct store_model_stat *m = &s->hosts[i];
        cJSON_AddItemToArray(a, cmd_stats_json_group("host", m->model, m->answers,
                                                     m->prompt_tokens, m->completion_tokens,
                                                     m->total_tokens, &m->perf));
    }
    a = cJSON_AddArrayToObject(j, "days");
    for (size_t i = 0; i < s->n_days; i++) {
        const struct store_day_stat *d = &s->days[i];
        cJSON_AddItemToArray(a, cmd_stats_json_group("day", d->day, d->answers,
                                                     d->prompt_tokens, d->completion_tokens,
                                                     d->total_tokens, &d->perf));
    }
    char *txt = cJSON_Print(j);
    if (txt) {
        fputs(txt, f);
        fputc('\n', f);
    }
    free(txt);
    cJSON_Delete(j);
}

void cmd_stats_write(FILE *f, const struct store_stats *s, enum cmd_stats_format fmt)
{
    double *spend = xcalloc(s->n_models + 1, sizeof *spend);
    struct buf unpriced = BUF_INIT;
    double total = cmd_stats_spend(s, spend, &unpriced);
    if (fmt == CMD_STATS_JSON)
        cmd_stats_json(f, s, spend, total);
    else
        cmd_stats_text(f, s, spend, total, &unpriced);
    buf_free(&unpriced);
    free(spend);
}

/* Prices looked up once per model. */
struct cmd_prices {
    char *user; /* the user's prices.tsv */
    struct {
        char *model;
        int priced;
        struct context_price p;
    } *v;
    size_t n, cap;
    struct metrics *m;
};

static void cmd_stats_row(const struct store_answer_row *r, void *ud)
{
    struct cmd_prices *c = ud;
    const char *model = r->model ? r->model : "";
    size_t i;
    for (i = 0; i < c->n && strcmp(c->v[i].model, model); i++)
        ;
    if (i == c->n) {
        XGROW(c->v, c->n + 1, c->cap);
        c->v[i].model = xstrdup(model);
        c->v[i].priced = context_price_lookup(model, c->user, &c->v[i].p) == 0;
        c->n++;
    }
    double usd = -1;
    if (c->v[i].priced && !r->cached)
        usd = context_cost(&c->v[i].p, r->prompt_tokens > 0 ? r->prompt_tokens : 0, 0,
                           r->completion_tokens > 0 ? r->completion_tokens : 0);
    struct metrics_obs o = {r->host,  r->model,          r->status,     r->cached,
                            r->ttft,  r->itl,            r->total,      r->dns,
                            r->connect, r->tls,          r->prompt_tokens, r->completion_tokens,
                            r->retries, r->rate_limited, usd};
    metrics_observe(c->m, &o);
}

int cmd_stats_prometheus(FILE *f, struct store *st, int64_t since, int64_t until,
                         const char *model)
{
    char *cdir = conf_dir("config");
    struct cmd_prices c = {xasprintf("%s/prices.tsv", cdir), NULL, 0, 0, metrics_new()};
    free(cdir);
    int rc = store_answers_each(st, since, until, model, cmd_stats_row, &c);
    if (rc == 0) {
        struct buf out = BUF_INIT;
        metrics_write(c.m, &out);
        fwrite(out.data, 1, out.len, f);
        buf_free(&out);
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.v[i].model);
    free(c.v);
    free(c.user);
    metrics_free(c.m);
    return rc;
}
