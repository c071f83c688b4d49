/* stats.c - statistics over answers: counts, tokens per model and day, latency
 * percentiles. */
#include "config.h"
#include "store/store_int.h"

#include "base/util.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- statistics */

/* Nearest-rank percentile of sorted v[0..n). */
static double store_percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return -1;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

static int store_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int store_cmp_model(const void *a, const void *b)
{
    const struct store_model_stat *x = a, *y = b;
    if (x->total_tokens != y->total_tokens)
        return x->total_tokens > y->total_tokens ? -1 : 1;
    if (x->answers != y->answers)
        return x->answers > y->answers ? -1 : 1;
    return strcmp(x->model, y->model);
}

/* Add one group row (tokens in columns 5..7) to a model or day bucket. */
static void store_stat_add(int64_t *answers, int64_t *tok, sqlite3_stmt *s)
{
    *answers += sqlite3_column_int64(s, 3);
    for (int k = 0; k < 3; k++)
        tok[k] += sqlite3_column_int64(s, 5 + k);
}

/* The day's bucket (rows come ordered by day: the last one or a new one). */
static struct store_day_stat *store_stats_day(struct store_stats *out, size_t *cap,
                                              const char *day)
{
    if (!out->n_days || strcmp(out->days[out->n_days - 1].day, day ? day : "?") != 0) {
        XGROW(out->days, out->n_days + 1, *cap);
        struct store_day_stat *d = &out->days[out->n_days++];
        memset(d, 0, sizeof *d);
        snprintf(d->day, sizeof d->day, "%s", day ? day : "?");
    }
    return &out->days[out->n_days - 1];
}

/* The model's bucket, added when new. */
static struct store_model_stat *store_stats_model(struct store_stats *out, size_t *cap,
                                                  const char *model)
{
    size_t i;
    for (i = 0; i < out->n_models; i++)
        if (strcmp(out->models[i].model, model ? model : "") == 0)
            return &out->models[i];
    XGROW(out->models, out->n_models + 1, *cap);
    memset(&out->models[i], 0, sizeof out->models[i]);
    out->models[i].model = xstrdup(model ? model : "");
    out->n_models++;
    return &out->models[i];
}

/* Prepare sql with ?1 = since and ?2 = hi bound. NULL when it does not compile. */
static sqlite3_stmt *store_stats_prep(struct store *st, const char *sql, int64_t since,
                                      int64_t hi)
{
    sqlite3_stmt *s = store_prep(st, sql);
    if (s) {
        sqlite3_bind_int64(s, 1, since);
        sqlite3_bind_int64(s, 2, hi);
    }
    return s;
}

/* Conversations and messages created in [since, hi). SQLITE_ROW, an error code, or -1 when the
 * statement does not compile. */
static int store_stats_counts(struct store *st, int64_t since, int64_t hi,
                              struct store_stats *out)
{
    static const char q_counts[] =
        "SELECT (SELECT count(*) FROM conversations WHERE created >= ?1 AND created < ?2), "
        "(SELECT count(*) FROM messages WHERE created >= ?1 AND created < ?2)";
    sqlite3_stmt *s = store_stats_prep(st, q_counts, since, hi);
    if (!s)
        return -1;
    int rc = store_step(st, s);
    if (rc == SQLITE_ROW) {
        out->conversations = sqlite3_column_int64(s, 0);
        out->messages = sqlite3_column_int64(s, 1);
    }
    store_done(st, s);
    return rc;
}

/* Answers per status, day and model, and the tokens billed. SQLITE_DONE, an error code, or -1
 * when the statement does not compile. */
static int store_stats_groups(struct store *st, int64_t since, int64_t hi,
                              struct store_stats *out)
{
    /* One pass over the answers, grouped by day, model and status. Tokens count what was
     * billed: answers replayed from the cache are left out of the sums. */
    static const char q_groups[] =
        "SELECT date(created, 'unixepoch', 'localtime'), coalesce(model, '(unknown)'), status, "
        "count(*), sum(cached), "
        "coalesce(sum(CASE WHEN cached = 0 THEN prompt_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN completion_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN coalesce(total_tokens, prompt_tokens + "
        "completion_tokens) END), 0) "
        "FROM messages WHERE role = 'assistant' AND created >= ?1 AND created < ?2 "
        "GROUP BY 1, 2, 3 ORDER BY 1";
    sqlite3_stmt *s = store_stats_prep(st, q_groups, since, hi);
    if (!s)
        return -1;
    size_t cap_m = 0, cap_d = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        const char *day = (const char *)sqlite3_column_text(s, 0);
        const char *model = (const char *)sqlite3_column_text(s, 1);
        int k = store_status_parse((const char *)sqlite3_column_text(s, 2));
        int64_t count = sqlite3_column_int64(s, 3);
        if (k >= 0)
            out->by_status[k] += count;
        out->answers += count;
        out->cached_answers += sqlite3_column_int64(s, 4);
        struct store_day_stat *d = store_stats_day(out, &cap_d, day);
        int64_t dt[3] = {0, 0, 0};
        store_stat_add(&d->answers, dt, s);
        d->prompt_tokens += dt[0];
        d->completion_tokens += dt[1];
        d->total_tokens += dt[2];
        struct store_model_stat *m = store_stats_model(out, &cap_m, model);
        int64_t mt[3] = {0, 0, 0};
        store_stat_add(&m->answers, mt, s);
        m->prompt_tokens += mt[0];
        m->completion_tokens += mt[1];
        m->total_tokens += mt[2];
    }
    store_done(st, s);
    if (rc == SQLITE_DONE && out->n_models > 1)
        qsort(out->models, out->n_models, sizeof *out->models, store_cmp_model);
    out->cache_hit_rate = out->answers ? (double)out->cached_answers / (double)out->answers : 0;
    return rc;
}

/* Latency and speed percentiles of answers that really went to a server. SQLITE_DONE, an
 * error code, or -1 when the statement does not compile. */
static int store_stats_timing(struct store *st, int64_t since, int64_t hi,
                              struct store_stats *out)
{
    static const char q_timing[] =
        "SELECT ttft, tokens_per_s FROM messages WHERE role = 'assistant' AND cached = 0 AND "
        "(ttft IS NOT NULL OR tokens_per_s IS NOT NULL) AND created >= ?1 AND created < ?2";
    sqlite3_stmt *s = store_stats_prep(st, q_timing, since, hi);
    if (!s)
        return -1;
    double *ttft = NULL, *tps = NULL;
    size_t n_ttft = 0, n_tps = 0, cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        if (n_ttft == cap || n_tps == cap) { /* two arrays of one capacity */
            XGROW(ttft, cap + 1, cap);
            tps = xreallocarray(tps, cap, sizeof *tps);
        }
        if (sqlite3_column_type(s, 0) != SQLITE_NULL)
            ttft[n_ttft++] = sqlite3_column_double(s, 0);
        if (sqlite3_column_type(s, 1) != SQLITE_NULL)
            tps[n_tps++] = sqlite3_column_double(s, 1);
    }
    store_done(st, s);
    if (rc == SQLITE_DONE) {
        if (n_ttft)
            qsort(ttft, n_ttft, sizeof *ttft, store_cmp_double);
        if (n_tps)
            qsort(tps, n_tps, sizeof *tps, store_cmp_double);
        out->ttft_p50 = store_percentile(ttft, n_ttft, 50);
        out->ttft_p95 = store_percentile(ttft, n_ttft, 95);
        out->tps_p50 = store_percentile(tps, n_tps, 50);
        out->tps_p95 = store_percentile(tps, n_tps, 95);
    }
    free(ttft);
    free(tps);
    return rc;
}

int store_stats(struct store *st, int64_t since, int64_t until, struct store_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t hi = until > 0 ? until : INT64_MAX;
    if (store_exec(st, "BEGIN", "cannot compute statistics") != 0)
        return -1;
    int rc = store_stats_counts(st, since, hi, out);
    if (rc == SQLITE_ROW)
        rc = store_stats_groups(st, since, hi, out);
    if (rc == SQLITE_DONE)
        rc = store_stats_timing(st, since, hi, out);
    if (rc == SQLITE_DONE) {
        store_exec(st, "COMMIT", "cannot compute statistics");
        return 0;
    }
    if (rc != -1) /* -1: the statement did not compile, and store_prep said so */
        store_fail(st, "cannot compute statistics");
    store_rollback(st);
    store_stats_clear(out);
    return -1;
}

void store_stats_clear(struct store_stats *s)
{
    for (size_t i = 0; i < s->n_models; i++)
        free(s->models[i].model);
    free(s->models);
    free(s->days);
    memset(s, 0, sizeof *s);
}
