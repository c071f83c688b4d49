/* cmd_count.h - the `tokterm count` subcommand. */
#ifndef TT_CMD_COUNT_H
#define TT_CMD_COUNT_H

/* `tokterm count [-m MODEL | -e/--encoding NAME] [--ids]`: read stdin to its end and print its
 * token count (with --ids: the token ids, space-separated) and a newline on stdout.
 * argv[0] is the subcommand name ("count"), options follow: main() passes argc - 1, argv + 1
 * of `tokterm count ...`. With an unknown model the count uses o200k_base and a note goes to
 * stderr. Returns the exit status: 0 ok, 1 read/data error, 2 bad usage (message on stderr). */
int cmd_count(int argc, char **argv);

#endif
