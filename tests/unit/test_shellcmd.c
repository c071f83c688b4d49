/* test_shellcmd.c - shell-command mode's pieces: the command found in an answer, the output
 * kept for a follow-up (bounded), the follow-up prompt, OSC 52, running a command. */
#include "config.h"
#include "core/shellcmd.h"
#include "base/xmalloc.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void extract(const char *answer, const char *want, const char *want_note,
                    const char *name)
{
    char *note = NULL;
    char *got = shellcmd_extract(answer, strlen(answer), &note);
    if (!want)
        TAP_OK(!got, "%s: no command", name);
    else
        TAP_STR(got ? got : "(null)", want, name);
    if (want_note)
        TAP_STR(note ? note : "(null)", want_note, name);
    free(got);
    free(note);
}

int main(void)
{
    extract("```sh\nfind . -size +100M -mtime -7\n```\nFinds big files.",
            "find . -size +100M -mtime -7", "Finds big files.", "a fenced block and its note");
    extract("Here you go:\n\n```bash\n\nls -la\ncd /tmp\n\n```\n", "ls -la\ncd /tmp", NULL,
            "blank lines around a multi-line block dropped");
    extract("~~~\necho '```'\n~~~", "echo '```'", NULL, "a tilde fence holds backticks");
    extract("````\necho ```x```\n````\nok", "echo ```x```", "ok", "a longer fence");
    extract("```\r\ndu -sh *\r\n```\r\n", "du -sh *", NULL, "CRLF lines");
    extract("`ls -1`", "ls -1", NULL, "one line in backticks");
    extract("$ uname -a\n", "uname -a", NULL, "one line with a prompt sign");
    extract("I cannot help with that.\nIt would delete your files.", NULL, NULL,
            "prose of two lines is no command");
    extract("```\n\n```", NULL, NULL, "an empty block is no command");
    extract("", NULL, NULL, "an empty answer");
    extract("```sh\necho never closed", "echo never closed", NULL, "an unclosed block");

    /* The output kept: the first and last halves, whatever the size. */
    struct shellcmd_out o = {BUF_INIT, BUF_INIT, 0};
    const char *shell = "/bin/sh", *err = NULL;
    int st = shellcmd_exec(shell, "printf 'a\\n'; printf 'b\\n' >&2; exit 3", -1, -1, -1, &o,
                           &err);
    TAP_INT(st, 3, "the command's exit status");
    TAP_INT((int)o.total, 4, "stdout and stderr kept");
    TAP_OK(o.head.len == 4 && (memcmp(o.head.data, "a\nb\n", 4) == 0 ||
                               memcmp(o.head.data, "b\na\n", 4) == 0), "both streams kept");
    char *f = shellcmd_followup(shell, "printf a", st, &o, NULL);
    TAP_OK(strstr(f, "status 3") && strstr(f, "4 bytes") && strstr(f, "Explain the output."),
           "the follow-up names the status, the size and the default question");
    free(f);
    shellcmd_out_free(&o);

    st = shellcmd_exec(shell, "head -c 5000000 /dev/zero | tr '\\0' x; printf END", -1, -1,
                       -1, &o, &err);
    TAP_INT(st, 0, "a 5 MB output runs");
    TAP_INT((int)o.total, 5000003, "every byte counted");
    TAP_OK(o.head.len + o.tail.len <= SHELLCMD_KEEP, "kept at most SHELLCMD_KEEP bytes (%zu)",
           o.head.len + o.tail.len);
    TAP_OK(o.tail.len >= 3 && memcmp(o.tail.data + o.tail.len - 3, "END", 3) == 0,
           "the tail ends with the last bytes");
    f = shellcmd_followup(shell, "gen", st, &o, "what?");
    TAP_OK(strstr(f, "bytes left out") && strstr(f, "the middle left out") &&
           strlen(f) < SHELLCMD_KEEP + 1000, "the follow-up says what was cut (%zu bytes)",
           strlen(f));
    free(f);
    shellcmd_out_free(&o);

    st = shellcmd_exec(shell, "printf '```\\n\\377'", -1, -1, -1, &o, &err);
    f = shellcmd_followup(shell, "x", st, &o, "q");
    TAP_OK(strstr(f, "````\n```\n\xef\xbf\xbd\n````\n") != NULL,
           "output fenced longer than its backticks, invalid UTF-8 replaced");
    free(f);
    shellcmd_out_free(&o);

    st = shellcmd_exec(shell, "kill -TERM $$", -1, -1, -1, NULL, &err);
    TAP_INT(st, 128 + 15, "a command killed by a signal: 128+N");
    st = shellcmd_exec(shell, "exec 3<&- 2>/dev/null && ls /proc/self/fd | wc -l", -1, -1, -1,
                       &o, &err);
    TAP_OK(o.head.len && atoi(o.head.data) <= 5, "the command gets no descriptor of ours (%d)",
           o.head.len ? atoi(o.head.data) : -1);
    shellcmd_out_free(&o);

    struct buf b = BUF_INIT;
    TAP_INT(shellcmd_osc52(&b, "ls -l", 5), 0, "OSC 52 made");
    TAP_STR(buf_str(&b), "\033]52;c;bHMgLWw=\a", "OSC 52 in base64");
    buf_reset(&b);
    char *big = xmalloc(SHELLCMD_OSC52_MAX + 2);
    memset(big, 'a', SHELLCMD_OSC52_MAX + 1);
    big[SHELLCMD_OSC52_MAX + 1] = '\0';
    TAP_INT(shellcmd_osc52(&b, big, SHELLCMD_OSC52_MAX + 1), -1, "too long for OSC 52");
    free(big);
    buf_free(&b);

    b = (struct buf)BUF_INIT;
    shellcmd_context(&b, "/usr/bin/zsh");
    TAP_OK(strstr(buf_str(&b), "zsh (/usr/bin/zsh) on ") != NULL, "the context names the shell");
    buf_free(&b);
    return tap_done();
}
