/* stats.h - `tokterm stats`: the store's statistics as a table for people or JSON. */
#ifndef TOKTERM_CMD_STATS_H
#define TOKTERM_CMD_STATS_H

#include "store/store.h"

#include <stdio.h>

enum cmd_stats_format { CMD_STATS_TEXT, CMD_STATS_JSON, CMD_STATS_PROMETHEUS };

/* Write s to f. Spend is priced per model from prices.tsv (the user's, then tokterm's);
 * models without a price are named, never counted as free. */
void cmd_stats_write(FILE *f, const struct store_stats *s, enum cmd_stats_format fmt);

/* The answers in [since, until) (of model when not NULL) as Prometheus metrics, the families
 * `batch --metrics-listen` serves, for node_exporter's textfile collector. 0 or -1 (the
 * store's error is set). */
int cmd_stats_prometheus(FILE *f, struct store *st, int64_t since, int64_t until,
                         const char *model);

#endif
