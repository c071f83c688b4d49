/* cmd_count.h - the `tokterm count` subcommand. */
#ifndef TT_CMD_COUNT_H
#define TT_CMD_COUNT_H

/* Most bytes of standard input `count` reads; more is refused (exit 2). */
#define COUNT_MAX_INPUT (64 << 20)

/* `tokterm count [-m MODEL | -e/--encoding NAME] [--ids]`: read stdin to its end and print its
 * token count (with --ids: the token ids, space-separated) and a newline on stdout.
 * argv[0] is the subcommand name ("count"), options follow: main() passes argc - 1, argv + 1
 * of `tokterm count ...`. With an unknown model the count uses o200k_base and a note goes to
 * stderr. Input past COUNT_MAX_INPUT is refused. Memory: the input plus a few MiB (the
 * tokenizer's pieces are bounded; ids are written as they come). Returns the exit status: 0 ok,
 * 1 read/data error, 2 bad usage or input over the limit (message on stderr). */
int cmd_count(int argc, char **argv);

#endif
