/* test_cli.c - command-line parsing. */
#include "config.h"
#include "core/cli.h"
#include "tap.h"

#include <string.h>

static int parse(struct cli *c, struct buf *err, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    buf_reset(err);
    return cli_parse(c, argc, argv, err);
}

int main(void)
{
    struct cli c;
    struct buf err = BUF_INIT;
    char *a1[] = {"tokterm", "-p", "hello", "-m", "gpt-4o", "--json", "--max-tokens=20", NULL};
    TAP_INT(parse(&c, &err, a1), 0, "options parse");
    TAP_STR(c.prompts[0], "hello", "-p prompt");
    TAP_STR(c.model, "gpt-4o", "-m model");
    TAP_OK(c.json, "--json flag");
    TAP_STR(c.max_tokens, "20", "--opt=value form");
    cli_free(&c);

    char *a2[] = {"tokterm", "-mgpt-4o-mini", "explain", "this", "code", NULL};
    TAP_INT(parse(&c, &err, a2), 0, "words parse");
    TAP_STR(c.prompts[0], "explain this code", "positional words form the prompt");
    TAP_STR(c.model, "gpt-4o-mini", "-mVALUE form");
    cli_free(&c);

    /* a lone word near a subcommand is refused with the subcommand named (until 2026-12
     * `tokterm list` was sent as a prompt and saved); other lone words are prompts */
    static const char *const near[][2] = {{"list", "'ls'"}, {"exoprt", "'export'"},
                                          {"serach", "'search'"}, {"delete", "'rm'"}};
    for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
        char *an[] = {"tokterm", (char *)near[i][0], NULL};
        buf_reset(&err);
        TAP_OK(parse(&c, &err, an) == -1 && strstr(buf_str(&err), near[i][1]) &&
                   strstr(buf_str(&err), "tokterm -p "),
               "'%s' alone: did you mean %s: %s", near[i][0], near[i][1], buf_str(&err));
    }
    static const char *const prompts[] = {"hello", "hi", "explain", "summarise", "patch", "rules",
                                          "state", "arm", "map"};
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++) {
        char *ap[] = {"tokterm", (char *)prompts[i], NULL};
        TAP_OK(parse(&c, &err, ap) == 0 && c.n_prompts == 1, "'%s' alone: a prompt", prompts[i]);
        cli_free(&c);
    }
    char *adash[] = {"tokterm", "--", "list", NULL};
    TAP_OK(parse(&c, &err, adash) == 0 && c.n_prompts == 1 && !strcmp(c.prompts[0], "list"),
           "-- list: a prompt, as documented (a review found it refused)");
    cli_free(&c);

    char *ax[] = {"tokterm", "-x", "--dry-run", "--allow-tool", "fs.*", "--allow-tool=shell",
                  "find", "big", "files", NULL};
    TAP_INT(parse(&c, &err, ax), 0, "-x parses");
    TAP_OK(c.execute && c.dry_run, "-x and --dry-run flags");
    TAP_INT(c.n_allow_tools, 2, "--allow-tool repeats");
    TAP_STR(c.n_allow_tools == 2 ? c.allow_tools[1] : "", "shell", "--allow-tool=GLOB form");
    TAP_STR(c.prompts[0], "find big files", "-x takes the words as the request");
    cli_free(&c);

    char *a3[] = {"tokterm", "--json", "search", "--model", "x", "foo", NULL};
    TAP_INT(parse(&c, &err, a3), 0, "subcommand parse");
    TAP_STR(c.subcommand, "search", "reserved word is a subcommand");
    TAP_INT(c.sub_argc, 4, "subcommand argc");
    TAP_STR(c.sub_argv[1], "--model", "subcommand gets its own options");
    cli_free(&c);

    char *a4[] = {"tokterm", "why", "ls", NULL};
    TAP_INT(parse(&c, &err, a4), 0, "reserved word later is a prompt word");
    TAP_STR(c.prompts[0], "why ls", "only the first word can be a subcommand");
    TAP_OK(c.subcommand == NULL, "no subcommand");
    cli_free(&c);

    char *a5[] = {"tokterm", "--", "ls", "-p", NULL};
    TAP_INT(parse(&c, &err, a5), 0, "after -- everything is words");
    TAP_STR(c.prompts[0], "ls -p", "-- escapes reserved words and dashes");
    cli_free(&c);

    char *a11[] = {"tokterm", "-p", "one", "--prompt", "two", NULL};
    TAP_INT(parse(&c, &err, a11), 0, "repeated -p");
    TAP_INT(c.n_prompts, 2, "two turns");
    TAP_STR(c.prompts[1], "two", "second turn");
    cli_free(&c);

    char *a6[] = {"tokterm", "--bogus", NULL};
    TAP_INT(parse(&c, &err, a6), -1, "unknown long option");
    TAP_OK(strstr(buf_str(&err), "--bogus") != NULL, "message names it");
    cli_free(&c);
    char *a7[] = {"tokterm", "-m", NULL};
    TAP_INT(parse(&c, &err, a7), -1, "missing value");
    TAP_OK(strstr(buf_str(&err), "needs a value") != NULL, "missing value message");
    cli_free(&c);
    char *a8[] = {"tokterm", "-p", "x", "y", NULL};
    TAP_INT(parse(&c, &err, a8), -1, "-p and words together is ambiguous");
    cli_free(&c);
    char *a9[] = {"tokterm", "--json=1", NULL};
    TAP_INT(parse(&c, &err, a9), -1, "flag with a value refused");
    cli_free(&c);
    char *a10[] = {"tokterm", "-hV", NULL};
    TAP_INT(parse(&c, &err, a10), 0, "bundled short flags");
    TAP_OK(c.help && c.version, "both flags set");
    cli_free(&c);
    TAP_OK(strstr(cli_usage(), "Exit status") != NULL, "usage documents exit codes");
    /* an unknown option is echoed made safe: it is argv, anything can be in it */
    char *bad_long[] = {"tokterm", "--\x1b]0;x\x07\xe2\x80\xae", NULL};
    TAP_INT(parse(&c, &err, bad_long), -1, "unknown long option refused");
    TAP_OK(err.data && !strchr(err.data, 0x1b) && !strchr(err.data, 0x07) &&
               !strstr(err.data, "\xe2\x80\xae") && strstr(err.data, "^[]0;x^G<U+202E>"),
           "unknown long option shown neutralised");
    cli_free(&c);
    char *bad_short[] = {"tokterm", "-\x1b", NULL};
    TAP_INT(parse(&c, &err, bad_short), -1, "unknown short option refused");
    TAP_OK(err.data && !strchr(err.data, 0x1b) && strstr(err.data, "'-^['"),
           "unknown short option shown neutralised");
    cli_free(&c);
    buf_free(&err);
    return tap_done();
}
