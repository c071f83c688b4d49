/* stats.h - `tokterm stats`: the store's statistics as a table for people or JSON. */
#ifndef TOKTERM_CMD_STATS_H
#define TOKTERM_CMD_STATS_H

#include "store/store.h"

#include <stdio.h>

enum cmd_stats_format { CMD_STATS_TEXT, CMD_STATS_JSON };

/* Write s to f. Spend is priced per model from prices.tsv (the user's, then tokterm's);
 * models without a price are named, never counted as free. */
void cmd_stats_write(FILE *f, const struct store_stats *s, enum cmd_stats_format fmt);

#endif
