/* stats.c - statistics over answers: counts, tokens per model and day, latency
 * percentiles per model, provider (host) and day. */
#include "config.h"
#include "store/store_int.h"

#include "base/util.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- statistics */

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

/* The bucket of a model (or host) in *v, added when new. */
static struct store_model_stat *store_stats_model(struct store_model_stat **v, size_t *n,
                                                  size_t *cap, const char *name)
{
    size_t i;
    for (i = 0; i < *n; i++)
        if (strcmp((*v)[i].model, name ? name : "") == 0)
            return &(*v)[i];
    XGROW(*v, *n + 1, *cap);
    memset(&(*v)[i], 0, sizeof (*v)[i]);
    (*v)[i].model = xstrdup(name ? name : "");
    (*n)++;
    return &(*v)[i];
}

/* Prepare sql with ?1 = since, ?2 = hi bound and ?3 = the model (NULL: any). NULL when it does
 * not compile. */
static sqlite3_stmt *store_stats_prep(struct store *st, const char *sql, int64_t since,
                                      int64_t hi, const char *model)
{
    sqlite3_stmt *s = store_prep(st, sql);
    if (s) {
        sqlite3_bind_int64(s, 1, since);
        sqlite3_bind_int64(s, 2, hi);
        store_bind_text(s, 3, model);
    }
    return s;
}

/* Conversations and messages created in [since, hi) (of the model). SQLITE_ROW, an error
 * code, or -1 when the statement does not compile. */
static int store_stats_counts(struct store *st, int64_t since, int64_t hi, const char *model,
                              struct store_stats *out)
{
    static const char q_counts[] =
        "SELECT (SELECT count(*) FROM conversations c WHERE created >= ?1 AND created < ?2 AND "
        "(?3 IS NULL OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND "
        STORE_MODEL_IS("m.model", "?3") "))), "
        "(SELECT count(*) FROM messages WHERE created >= ?1 AND created < ?2 AND "
        "(?3 IS NULL OR " STORE_MODEL_IS("model", "?3") "))";
    sqlite3_stmt *s = store_stats_prep(st, q_counts, since, hi, model);
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

/* Add a group row's answers and tokens (columns 4..8) to a bucket. */
static void store_stat_tokens(struct store_model_stat *m, sqlite3_stmt *s)
{
    int64_t tok[3] = {0, 0, 0};
    store_stat_add(&m->answers, tok, s);
    m->prompt_tokens += tok[0];
    m->completion_tokens += tok[1];
    m->total_tokens += tok[2];
}

/* Answers per status, day, model and host, and the tokens billed. SQLITE_DONE, an error code,
 * or -1 when the statement does not compile. */
static int store_stats_groups(struct store *st, int64_t since, int64_t hi, const char *model,
                              struct store_stats *out)
{
    /* One pass over the answers, grouped by day, model, host and status. Tokens count what was
     * billed: answers replayed from the cache are left out of the sums. */
    static const char q_groups[] =
        "SELECT date(created, 'unixepoch', 'localtime'), coalesce(model, '(unknown)'), status, "
        "count(*), sum(cached), "
        "coalesce(sum(CASE WHEN cached = 0 THEN prompt_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN completion_tokens END), 0), "
        "coalesce(sum(CASE WHEN cached = 0 THEN coalesce(total_tokens, prompt_tokens + "
        "completion_tokens) END), 0), coalesce(host, '(unknown)') "
        "FROM messages WHERE role = 'assistant' AND created >= ?1 AND created < ?2 AND "
        "(?3 IS NULL OR " STORE_MODEL_IS("model", "?3") ") GROUP BY 1, 2, 3, 9 "
        "ORDER BY 1";
    sqlite3_stmt *s = store_stats_prep(st, q_groups, since, hi, model);
    if (!s)
        return -1;
    size_t cap_m = 0, cap_d = 0, cap_h = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        const char *day = (const char *)sqlite3_column_text(s, 0);
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
        store_stat_tokens(store_stats_model(&out->models, &out->n_models, &cap_m,
                                            (const char *)sqlite3_column_text(s, 1)),
                          s);
        store_stat_tokens(store_stats_model(&out->hosts, &out->n_hosts, &cap_h,
                                            (const char *)sqlite3_column_text(s, 8)),
                          s);
    }
    store_done(st, s);
    if (rc == SQLITE_DONE && out->n_models > 1)
        qsort(out->models, out->n_models, sizeof *out->models, store_cmp_model);
    if (rc == SQLITE_DONE && out->n_hosts > 1)
        qsort(out->hosts, out->n_hosts, sizeof *out->hosts, store_cmp_model);
    out->cache_hit_rate = out->answers ? (double)out->cached_answers / (double)out->answers : 0;
    return rc;
}

/* One measure of one answer, tagged with its group, for sorting by group then value. */
struct store_sample {
    size_t group;
    double v;
};

static int store_cmp_sample(const void *a, const void *b)
{
    const struct store_sample *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* Per uncached answer: its groups and measures (< 0: unknown or not meaningful). */
struct store_row {
    size_t day, model, host;
    double m[3]; /* ttft, itl, tokens/s */
};

enum { STORE_DIM_ALL, STORE_DIM_DAY, STORE_DIM_MODEL, STORE_DIM_HOST, STORE_DIMS };

/* The perf bucket of group g of dimension dim. */
static struct store_perf *store_perf_of(struct store_stats *out, int dim, size_t g)
{
    switch (dim) {
    case STORE_DIM_DAY:
        return &out->days[g].perf;
    case STORE_DIM_MODEL:
        return &out->models[g].perf;
    case STORE_DIM_HOST:
        return &out->hosts[g].perf;
    default:
        return &out->perf;
    }
}

static size_t store_row_group(const struct store_row *r, int dim)
{
    return dim == STORE_DIM_DAY ? r->day : dim == STORE_DIM_MODEL ? r->model
                                         : dim == STORE_DIM_HOST  ? r->host
                                                                  : 0;
}

/* Percentiles of measure k for every group of dimension dim (tmp holds n samples). */
static void store_perf_fill(struct store_stats *out, const struct store_row *rows, size_t n,
                            int dim, int k, struct store_sample *tmp)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].m[k] >= 0)
            tmp[m++] = (struct store_sample){store_row_group(&rows[i], dim), rows[i].m[k]};
    if (m > 1)
        qsort(tmp, m, sizeof *tmp, store_cmp_sample);
    double v[3];
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && tmp[j].group == tmp[i].group)
            j++;
        struct store_perf *p = store_perf_of(out, dim, tmp[i].group);
        struct store_pct *pc = k == 0 ? &p->ttft : k == 1 ? &p->itl : &p->tps;
        static const double ps[3] = {50, 90, 99};
        for (int q = 0; q < 3; q++) {
            /* nearest rank */
            size_t rank = (size_t)(ps[q] / 100.0 * (double)(j - i) + 0.999999);
            rank = rank < 1 ? 1 : rank > j - i ? j - i : rank;
            v[q] = tmp[i + rank - 1].v;
        }
        *pc = (struct store_pct){v[0], v[1], v[2], (int64_t)(j - i)};
        i = j;
    }
}

/* The index of name among the groups (models or hosts); they are all there already. */
static size_t store_group_index(const struct store_model_stat *g, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(g[i].model, name ? name : "") == 0)
            return i;
    return 0;
}

static size_t store_day_index(const struct store_stats *out, const char *day)
{
    size_t lo = 0, hi = out->n_days; /* days are sorted */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(out->days[mid].day, day ? day : "?") < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < out->n_days ? lo : 0;
}

/* Latency and speed percentiles, retries and 429s of the answers that really went to a server,
 * overall and per day, model and host. tokens/s counts only answers of at least
 * STORE_TPS_MIN_TOKENS tokens streamed over STORE_TPS_MIN_SECONDS. SQLITE_DONE, an error
 * code, or -1 when the statement does not compile. */
static int store_stats_timing(struct store *st, int64_t since, int64_t hi, const char *model,
                              struct store_stats *out)
{
    static const char q_timing[] =
        "SELECT date(created, 'unixepoch', 'localtime'), coalesce(model, '(unknown)'), "
        "coalesce(host, '(unknown)'), ttft, itl, "
        "CASE WHEN completion_tokens >= ?4 AND total_time - ttft >= ?5 THEN tokens_per_s END, "
        "coalesce(retries, 0), coalesce(rate_limited, 0) "
        "FROM messages WHERE role = 'assistant' AND cached = 0 AND status != 'streaming' AND "
        "created >= ?1 AND created < ?2 AND (?3 IS NULL OR " STORE_MODEL_IS("model", "?3") ")";
    sqlite3_stmt *s = store_stats_prep(st, q_timing, since, hi, model);
    if (!s)
        return -1;
    sqlite3_bind_int(s, 4, STORE_TPS_MIN_TOKENS);
    sqlite3_bind_double(s, 5, STORE_TPS_MIN_SECONDS);
    struct store_row *rows = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        XGROW(rows, n + 1, cap);
        struct store_row *r = &rows[n++];
        r->day = store_day_index(out, (const char *)sqlite3_column_text(s, 0));
        r->model = store_group_index(out->models, out->n_models,
                                     (const char *)sqlite3_column_text(s, 1));
        r->host = store_group_index(out->hosts, out->n_hosts,
                                    (const char *)sqlite3_column_text(s, 2));
        for (int k = 0; k < 3; k++)
            r->m[k] = sqlite3_column_type(s, 3 + k) == SQLITE_NULL ? -1
                                                                   : sqlite3_column_double(s, 3 + k);
        int64_t retries = sqlite3_column_int64(s, 6), limited = sqlite3_column_int64(s, 7);
        for (int dim = 0; dim < STORE_DIMS; dim++) {
            struct store_perf *p = store_perf_of(out, dim, store_row_group(r, dim));
            p->sent++;
            p->retries += retries;
            p->rate_limited += limited;
        }
    }
    store_done(st, s);
    if (rc == SQLITE_DONE && n) {
        struct store_sample *tmp = xreallocarray(NULL, n, sizeof *tmp);
        for (int dim = 0; dim < STORE_DIMS; dim++)
            for (int k = 0; k < 3; k++)
                store_perf_fill(out, rows, n, dim, k, tmp);
        free(tmp);
    }
    free(rows);
    return rc;
}

/* Every percentile unknown (-1) until one is computed. */
static void store_perf_init(struct store_perf *p)
{
    struct store_pct none = {-1, -1, -1, 0};
    memset(p, 0, sizeof *p);
    p->ttft = p->itl = p->tps = none;
}

int store_stats(struct store *st, int64_t since, int64_t until, const char *model,
                struct store_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t hi = until > 0 ? until : INT64_MAX;
    if (store_exec(st, "BEGIN", "cannot compute statistics") != 0)
        return -1;
    int rc = store_stats_counts(st, since, hi, model, out);
    if (rc == SQLITE_ROW)
        rc = store_stats_groups(st, since, hi, model, out);
    if (rc == SQLITE_DONE) {
        for (int dim = 0; dim < STORE_DIMS; dim++) {
            size_t n = dim == STORE_DIM_DAY     ? out->n_days
                       : dim == STORE_DIM_MODEL ? out->n_models
                       : dim == STORE_DIM_HOST  ? out->n_hosts
                                                : 1;
            for (size_t g = 0; g < n; g++)
                store_perf_init(store_perf_of(out, dim, g));
        }
        rc = store_stats_timing(st, since, hi, model, out);
    }
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

/* A REAL column as seconds, -1 when NULL. */
static double store_col_or(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_double(s, i);
}

int store_answers_each(struct store *st, int64_t since, int64_t until, const char *model,
                       void (*fn)(const struct store_answer_row *, void *), void *ud)
{
    static const char q[] =
        "SELECT model, host, status, cached, ttft, itl, total_time, dns_time, connect_time, "
        "tls_time, coalesce(prompt_tokens, -1), coalesce(completion_tokens, -1), "
        "coalesce(retries, 0), coalesce(rate_limited, 0) FROM messages WHERE role = "
        "'assistant' AND created >= ?1 AND created < ?2 AND (?3 IS NULL OR "
        STORE_MODEL_IS("model", "?3") ") "
        "ORDER BY id";
    sqlite3_stmt *s = store_stats_prep(st, q, since, until > 0 ? until : INT64_MAX, model);
    if (!s)
        return -1;
    int rc;
    while ((rc = store_step(st, s)) == SQLITE_ROW) {
        struct store_answer_row r = {
            (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
            (const char *)sqlite3_column_text(s, 2), sqlite3_column_int(s, 3) != 0,
            store_col_or(s, 4), store_col_or(s, 5), store_col_or(s, 6), store_col_or(s, 7),
            store_col_or(s, 8), store_col_or(s, 9), sqlite3_column_int64(s, 10),
            sqlite3_column_int64(s, 11), sqlite3_column_int64(s, 12),
            sqlite3_column_int64(s, 13)};
        fn(&r, ud);
    }
    store_done(st, s);
    if (rc != SQLITE_DONE)
        return store_fail(st, "cannot read the answers");
    return 0;
}

void store_stats_clear(struct store_stats *s)
{
    for (size_t i = 0; i < s->n_models; i++)
        free(s->models[i].model);
    free(s->models);
    for (size_t i = 0; i < s->n_hosts; i++)
        free(s->hosts[i].model);
    free(s->hosts);
    free(s->days);
    memset(s, 0, sizeof *s);
}
