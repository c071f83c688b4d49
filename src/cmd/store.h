/* cmd_store.h - the review subcommands over the store (ls, show, search, export, rm, rename,
 * stats, cache). No curses; output goes to the FILE given.
 *
 * argv conventions: argv[0] is the subcommand name ("ls", "show", ...) and argv[1..argc) its
 * arguments, as main() passes them after the global options. Options take their value as the
 * next argument or after '=' (--limit 5, --limit=5) and may come before or after positional
 * arguments; "--" ends options. Every subcommand accepts -h/--help.
 *
 *   ls [--limit N]                         newest conversations first (default 50)
 *   show ID                                one conversation with all its messages
 *   search QUERY... [--model M] [--since YYYY-MM-DD] [--until YYYY-MM-DD] [--limit N]
 *                                          QUERY words are joined with spaces; see store.h for
 *                                          the query language; --until includes that day
 *   export ID [--format md|json]           one conversation (default md)
 *   export --all [--format json|md]        every conversation (default json)
 *   rm ID                                  delete without asking (the TUI confirms)
 *   rename ID TITLE...                     TITLE words are joined with spaces
 *   stats [--since YYYY-MM-DD] [--until YYYY-MM-DD]
 *   cache stats | cache clear
 *
 * When out is a terminal, text from the database passes through utf8_sanitize() and search
 * matches are bold; otherwise text is printed raw and matches are marked [like this].
 * Exit codes: 0 ok, 2 usage error, 1 not found (a search without a match: "no matches"),
 * or a database error (message on the error stream, prefixed "tokterm: "). */
#ifndef TT_CMD_STORE_H
#define TT_CMD_STORE_H
#include <stdio.h>

struct store;

#define CMD_STORE_OK 0
#define CMD_STORE_FAIL 1
#define CMD_STORE_USAGE 2
#define CMD_STORE_NOMATCH 1 /* search found nothing (grep's convention) */

/* 1 when name is one of the subcommands above (for main()'s dispatch). */
int cmd_store_is_command(const char *name);

/* Run one subcommand on an open store, printing results to out and errors to err. Returns an
 * exit code (CMD_STORE_*). */
int cmd_store_run(struct store *st, int argc, char **argv, FILE *out, FILE *err,
                  int out_is_tty);

/* Open db_path (reporting a mode fix or recovered answers on stderr), run the subcommand with
 * stdout/stderr (terminal detected with isatty) and close. Returns an exit code. */
int cmd_store(const char *db_path, int argc, char **argv);

/* The usage text (static). */
const char *cmd_store_usage(void);

#endif
