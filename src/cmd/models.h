/* models.h - the `tokterm models` subcommand. */
#ifndef TT_CMD_MODELS_H
#define TT_CMD_MODELS_H

struct conf;

/* `tokterm models [--json] [--refresh]`: the models c's server offers (core/models.h), from
 * the day-old cache unless --refresh. On a terminal a table (id, name and token limits when
 * the server says them), in a pipe one id a line, with --json (or json set: tokterm --json
 * models) an array of objects. argv[0] is "models". Returns the exit status: 0, 2 bad usage,
 * 3 an HTTP error, 4 a network failure (message on stderr). */
int cmd_models(const struct conf *c, const char *key, int json, int argc, char **argv);

#endif
