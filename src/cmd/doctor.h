/* cmd_doctor.h - `tokterm doctor`: checks the setup and prints one line per check,
 *
 *     STATUS  CHECK        [profile] what was found; what to do
 *
 * with STATUS ok, warn or fail, then a summary line. Checks: the config file (syntax, unknown
 * options, file mode), each profile's key source (the key itself is never printed), DNS, TCP,
 * TLS and HTTP reachability of its endpoint (GET BASE/models, with the key), whether the key
 * was accepted, the rate-limit headers the answer carried, whether the profile's model is
 * listed, the terminal (colours, UTF-8 locale, width), the database (integrity, schema, size,
 * mode) and the data files (tokenizer tables, theme).
 *
 *   tokterm [-P NAME] [--config FILE] [--db FILE] [--base-url URL] [--cacert FILE]
 *           [--insecure] doctor [--offline] [--timeout SECONDS]
 *
 * Every profile of the config file is checked, or only -P NAME (or $TOKTERM_PROFILE); with no
 * profile sections, the settings tokterm would use (top level, environment). --offline skips
 * the network checks; --timeout bounds each endpoint check (default 10 s). */
#ifndef TT_CMD_DOCTOR_H
#define TT_CMD_DOCTOR_H

struct cli;

/* Run the checks for the command line a (argv[0] of the subcommand is "doctor"); prints to
 * stdout. Returns 0 when no check failed, 1 when one did, 2 on bad usage. */
int cmd_doctor(const struct cli *a, int argc, char **argv);

#endif
