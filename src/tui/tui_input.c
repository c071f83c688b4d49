/* tui_input.c - readline's callback interface glued to the curses loop. */
#include "config.h"
#include "tui/tui_input.h"
#include "base/buf.h"
#include "text/theme.h"
#include "tui/tui_draw.h"
#include "base/utf8.h"
#include "base/util.h"
#include "text/wrap.h"
#include "base/xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#define TUI_INPUT_HISTORY_MAX 2000
/* A prompt longer than this (a large paste) is recalled with Up in this chat, not kept in the
 * history file: 2,000 of them would make a file of tens of MB, read whole at every start. The
 * conversation keeps it either way. */
#define TUI_INPUT_HISTORY_ENTRY_MAX (16u << 10)

/* One display row of the input line: its cleaned text. */
struct tui_input_row {
    struct buf text;
};

static struct tui_input_row *tui_input_rowv;
static size_t tui_input_rown, tui_input_rowcap;
static struct tui_input_ops tui_input_cb;
static char *tui_input_hist_path;
static char *tui_input_prompt;
static char *tui_input_deferred;
static int tui_input_changed = 1;
static FILE *tui_input_null;

/* The byte queue readline reads from. */
static struct {
    unsigned char *v;
    size_t head, tail, cap;
} tui_input_q;

static size_t tui_input_queued(void)
{
    return tui_input_q.tail - tui_input_q.head;
}

void tui_input_push(const char *s, size_t n)
{
    if (tui_input_q.head == tui_input_q.tail)
        tui_input_q.head = tui_input_q.tail = 0;
    if (tui_input_q.tail + n > tui_input_q.cap) {
        if (tui_input_q.head) {
            memmove(tui_input_q.v, tui_input_q.v + tui_input_q.head, tui_input_queued());
            tui_input_q.tail -= tui_input_q.head;
            tui_input_q.head = 0;
        }
        XGROW(tui_input_q.v, tui_input_q.tail + n, tui_input_q.cap);
    }
    memcpy(tui_input_q.v + tui_input_q.tail, s, n);
    tui_input_q.tail += n;
}

void tui_input_push_key(int key)
{
    static const struct {
        int key;
        const char *seq;
    } map[] = {
        {KEY_LEFT, "\033[D"}, {KEY_RIGHT, "\033[C"}, {KEY_UP, "\033[A"},
        {KEY_DOWN, "\033[B"}, {KEY_HOME, "\033[H"}, {KEY_END, "\033[F"},
        {KEY_DC, "\033[3~"}, {KEY_IC, "\033[2~"}, {KEY_BACKSPACE, "\177"},
        {KEY_ENTER, "\r"}, {KEY_BTAB, "\033[Z"},
    };
    if (key >= 0 && key < 256) {
        char c = (char)key;
        tui_input_push(&c, 1);
        return;
    }
    for (size_t i = 0; i < TT_ARRAY_LEN(map); i++)
        if (map[i].key == key) {
            tui_input_push(map[i].seq, strlen(map[i].seq));
            return;
        }
    const char *name = keyname(key);
    static const struct {
        const char *name, *seq;
    } named[] = {
        {"kLFT5", "\033[1;5D"}, {"kRIT5", "\033[1;5C"}, {"kLFT3", "\033[1;3D"},
        {"kRIT3", "\033[1;3C"}, {"kDC5", "\033[3;5~"},
    };
    for (size_t i = 0; name && i < TT_ARRAY_LEN(named); i++)
        if (strcmp(name, named[i].name) == 0) {
            tui_input_push(named[i].seq, strlen(named[i].seq));
            return;
        }
}

/* Inside a bracketed paste (tui_input_paste), and whether the byte read before was a CR. */
static int tui_input_pasting, tui_input_paste_cr;

static int tui_input_getc(FILE *f)
{
    (void)f;
    for (;;) {
        if (!tui_input_queued() && tui_input_cb.more)
            tui_input_cb.more(tui_input_cb.ud, 2000); /* e.g. the rest of a bracketed paste */
        if (!tui_input_queued())
            return EOF;
        int c = tui_input_q.v[tui_input_q.head++];
        /* readline makes each pasted CR a newline: the LF of a CRLF is dropped, so that it is
         * one newline (until 2026-12 it was two) */
        int after_cr = tui_input_paste_cr;
        tui_input_paste_cr = tui_input_pasting && c == '\r';
        if (!(after_cr && c == '\n'))
            return c;
    }
}

static int tui_input_available(void)
{
    return tui_input_queued() > 0;
}

static void tui_input_redisplay(void)
{
    tui_input_changed = 1;
}

static void tui_input_prep(int meta)
{
    (void)meta; /* curses owns the terminal modes */
}

static void tui_input_deprep(void)
{
}

static void tui_input_handler(char *line)
{
    tui_input_changed = 1;
    if (tui_input_cb.line)
        tui_input_cb.line(tui_input_cb.ud, line);
    else
        free(line);
}

static int tui_input_startup(void)
{
    if (tui_input_deferred) {
        rl_insert_text(tui_input_deferred);
        free(tui_input_deferred);
        tui_input_deferred = NULL;
    }
    return 0;
}

static int tui_input_newline(int count, int key)
{
    (void)key;
    for (int i = 0; i < (count > 0 ? count : 1); i++)
        rl_insert_text("\n");
    return 0;
}

/* Ctrl-X Ctrl-E: edit the line in $VISUAL / $EDITOR (vi when neither is set); the result
 * replaces the line, which is not sent until Enter. */
static int tui_input_editor(int count, int key)
{
    (void)count;
    (void)key;
    const char *tmp = getenv("TMPDIR");
    char *path = xasprintf("%s/tokterm-edit-XXXXXX.md", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemps(path, 3);
    if (fd < 0) {
        if (tui_input_cb.matches)
            tui_input_cb.matches(tui_input_cb.ud, "cannot create a temporary file for $EDITOR");
        free(path);
        return 0;
    }
    size_t n = (size_t)rl_end;
    const char *s = rl_line_buffer;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0 && errno != EINTR)
            break;
        if (w > 0) {
            s += w;
            n -= (size_t)w;
        }
    }
    if (rl_end && rl_line_buffer[rl_end - 1] != '\n')
        (void)!write(fd, "\n", 1);
    close(fd);
    const char *ed = getenv("VISUAL");
    if (!ed || !*ed)
        ed = getenv("EDITOR");
    if (!ed || !*ed)
        ed = "vi";
    char *cmd = xasprintf("exec %s \"$1\"", ed); /* $EDITOR may carry arguments */
    if (tui_input_cb.suspend)
        tui_input_cb.suspend(tui_input_cb.ud);
    pid_t pid = fork();
    int ok = 0;
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, "sh", path, (char *)NULL);
        _exit(127);
    } else if (pid > 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    free(cmd);
    if (tui_input_cb.resume)
        tui_input_cb.resume(tui_input_cb.ud);
    if (ok) {
        size_t len;
        char *text = util_read_file(path, &len, 16u << 20);
        if (text) {
            while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                text[--len] = '\0';
            rl_replace_line(text, 0);
            rl_point = rl_end;
            free(text);
        }
    } else if (tui_input_cb.matches) {
        tui_input_cb.matches(tui_input_cb.ud, "the editor failed; the line is unchanged");
    }
    unlink(path);
    free(path);
    tui_input_changed = 1;
    return 0;
}

/* ---- completion ---- */

static const char *const *tui_input_cands;

static char *tui_input_generate(const char *text, int state)
{
    static size_t i, len;
    if (!state) {
        i = 0;
        len = strlen(text);
    }
    while (tui_input_cands && tui_input_cands[i]) {
        const char *c = tui_input_cands[i++];
        if (strncmp(c, text, len) == 0)
            return xstrdup(c);
    }
    return NULL;
}

static char **tui_input_attempt(const char *text, int start, int end)
{
    rl_attempted_completion_over = 1; /* never fall back to file names... */
    if (tui_input_cb.paths && tui_input_cb.paths(tui_input_cb.ud, rl_line_buffer, start))
        return rl_completion_matches(text, rl_filename_completion_function); /* ...but here */
    if (!tui_input_cb.complete)
        return NULL;
    tui_input_cands = tui_input_cb.complete(tui_input_cb.ud, rl_line_buffer, start, end);
    if (!tui_input_cands)
        return NULL;
    return rl_completion_matches(text, tui_input_generate);
}

static void tui_input_show_matches(char **matches, int num, int max_len)
{
    (void)max_len;
    struct buf b = BUF_INIT;
    buf_appends(&b, "completions:");
    for (int i = 1; i <= num; i++) {
        buf_appendc(&b, ' ');
        buf_appends(&b, matches[i]);
    }
    if (tui_input_cb.matches)
        tui_input_cb.matches(tui_input_cb.ud, buf_str(&b));
    buf_free(&b);
    tui_input_changed = 1;
}

/* A bracketed paste: readline inserts it; on an empty line the front end may take it (a path
 * dragged onto the terminal becomes an attachment) and then it leaves the line. */
static int tui_input_paste(int count, int key)
{
    int empty = rl_end == 0, from = rl_point;
    tui_input_pasting = 1;
    tui_input_paste_cr = 0;
    int rc = rl_bracketed_paste_begin(count, key);
    tui_input_pasting = tui_input_paste_cr = 0;
    if (empty && tui_input_cb.pasted && rl_point > from) {
        char *text = xstrndup(rl_line_buffer + from, (size_t)(rl_point - from));
        if (tui_input_cb.pasted(tui_input_cb.ud, text)) {
            rl_delete_text(from, rl_point);
            rl_point = from;
        }
        free(text);
    }
    return rc;
}

/* ---- history ---- */

static int tui_input_hist_open(const char *path, const char **err)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (util_mkdir_p(dir, 0700) < 0) {
            free(dir);
            *err = "cannot create the history directory";
            return -1;
        }
    }
    free(dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = "cannot open the history file";
        return -1;
    }
    (void)fchmod(fd, 0600); /* private, whatever made it before */
    close(fd);
    return 0;
}

/* 1 when the history file can hold line: not over TUI_INPUT_HISTORY_ENTRY_MAX, and no line of
 * it starts with '#' and a digit, which readline reads back as a timestamp (the line lost,
 * a multi-line prompt cut in two). Such a prompt is recalled in its own chat only. */
static int tui_input_hist_keeps(const char *line)
{
    if (strlen(line) > TUI_INPUT_HISTORY_ENTRY_MAX)
        return 0;
    for (const char *p = line;; p++) {
        if (p[0] == history_comment_char && p[1] >= '0' && p[1] <= '9')
            return 0;
        if (!(p = strchr(p, '\n')))
            return 1;
    }
}

void tui_input_history_add(const char *line)
{
    if (!line || !*line)
        return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1)
                                          : NULL;
    if (last && last->line && strcmp(last->line, line) == 0) {
        using_history();
        return;
    }
    add_history(line);
    using_history();
    if (tui_input_hist_path && tui_input_hist_keeps(line))
        append_history(1, tui_input_hist_path);
}

int tui_input_init(const struct tui_input_ops *ops, const char *prompt, const char *history_path,
                   const char **err)
{
    tui_input_cb = *ops;
    tui_input_prompt = xstrdup(prompt);
    int rc = 0;
    rl_readline_name = "tokterm";
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_getc_function = tui_input_getc;
    rl_input_available_hook = tui_input_available;
    rl_redisplay_function = tui_input_redisplay;
    rl_prep_term_function = tui_input_prep;
    rl_deprep_term_function = tui_input_deprep;
    rl_startup_hook = tui_input_startup;
    rl_attempted_completion_function = tui_input_attempt;
    rl_completion_display_matches_hook = tui_input_show_matches;
    rl_completion_query_items = 0;
    tui_input_null = fopen("/dev/null", "w");
    if (tui_input_null)
        rl_outstream = tui_input_null; /* readline must never write to the terminal */
    rl_initialize();
    /* our keys, after the user's inputrc so that they always work */
    Keymap maps[] = {emacs_standard_keymap, vi_insertion_keymap};
    for (size_t i = 0; i < TT_ARRAY_LEN(maps); i++) {
        rl_bind_keyseq_in_map("\\C-j", tui_input_newline, maps[i]);
        rl_bind_keyseq_in_map("\\e\\r", tui_input_newline, maps[i]);
        rl_bind_keyseq_in_map("\\e\\n", tui_input_newline, maps[i]);
        rl_bind_keyseq_in_map("\\C-x\\C-e", tui_input_editor, maps[i]);
        rl_bind_keyseq_in_map("\\e[200~", tui_input_paste, maps[i]);
    }
    /* file names with blanks or quotes are completed quoted (/attach unquotes them) */
    rl_completer_quote_characters = "'\"";
    rl_filename_quote_characters = " \t'\"\\";
    rl_bind_keyseq_in_map("v", tui_input_editor, vi_movement_keymap);

    using_history();
    stifle_history(TUI_INPUT_HISTORY_MAX);
    history_comment_char = '#';   /* timestamps are "#<epoch>" lines ... */
    history_write_timestamps = 1; /* ... and with them multi-line entries read back whole */
    history_multiline_entries = 1;
    if (history_path) {
        if (tui_input_hist_open(history_path, err) == 0) {
            tui_input_hist_path = xstrdup(history_path);
            read_history(history_path);
            using_history();
        } else {
            rc = -1;
        }
    }
    rl_callback_handler_install(tui_input_prompt, tui_input_handler);
    tui_input_changed = 1;
    return rc;
}

void tui_input_end(void)
{
    rl_callback_handler_remove();
    if (tui_input_hist_path) {
        /* keep the newest TUI_INPUT_HISTORY_MAX entries of the file, other chats' appends
         * included: read back whole (a multi-line entry is one), stifled, written again.
         * history_truncate_file counts lines, and would cut a multi-line entry in two, its
         * tail read back as one entry a line. */
        clear_history();
        if (read_history(tui_input_hist_path) == 0)
            write_history(tui_input_hist_path);
        chmod(tui_input_hist_path, 0600);
    }
    free(tui_input_hist_path);
    tui_input_hist_path = NULL;
    free(tui_input_prompt);
    tui_input_prompt = NULL;
    free(tui_input_deferred);
    tui_input_deferred = NULL;
    free(tui_input_q.v);
    memset(&tui_input_q, 0, sizeof tui_input_q);
    for (size_t i = 0; i < tui_input_rowcap; i++)
        buf_free(&tui_input_rowv[i].text);
    free(tui_input_rowv);
    tui_input_rowv = NULL;
    tui_input_rown = tui_input_rowcap = 0;
    rl_outstream = stdout;
    if (tui_input_null)
        fclose(tui_input_null);
    tui_input_null = NULL;
    clear_history();
}

void tui_input_run(void)
{
    while (tui_input_queued())
        rl_callback_read_char();
}

/* ---- drawing ---- */

static struct buf *tui_input_newrow(void)
{
    if (tui_input_rown == tui_input_rowcap) {
        size_t old = tui_input_rowcap;
        XGROW(tui_input_rowv, tui_input_rown + 1, tui_input_rowcap);
        memset(tui_input_rowv + old, 0, (tui_input_rowcap - old) * sizeof(*tui_input_rowv));
    }
    struct buf *b = &tui_input_rowv[tui_input_rown++].text;
    buf_reset(b);
    return b;
}

static int tui_input_prompt_cols;

static const char *tui_input_shown_prompt(void)
{
    const char *p = rl_display_prompt ? rl_display_prompt : tui_input_prompt;
    if (rl_editing_mode == 0 && rl_get_keymap() == vi_movement_keymap &&
        p == tui_input_prompt)
        return ": ";
    return p ? p : "";
}

/* Lay the line out for width; returns the cursor row and sets *ccol. */
static int tui_input_layout(int width, int *ccol)
{
    struct buf pr = BUF_INIT;
    const char *p = tui_input_shown_prompt();
    for (; *p; p++)
        if (*p != RL_PROMPT_START_IGNORE && *p != RL_PROMPT_END_IGNORE)
            buf_appendc(&pr, *p);
    struct buf clean = BUF_INIT;
    utf8_sanitize(&clean, buf_str(&pr), pr.len);
    buf_free(&pr);
    int pw = tui_draw_width(buf_str(&clean), clean.len);
    if (pw > width / 2)
        pw = width / 2;
    tui_input_prompt_cols = pw;
    tui_input_rown = 0;
    struct buf *row = tui_input_newrow();
    int col = pw, crow = -1;
    *ccol = pw;
    const char *s = rl_line_buffer ? rl_line_buffer : "";
    size_t n = rl_line_buffer ? (size_t)rl_end : 0, pos = 0;
    struct buf unit = BUF_INIT;
    for (;;) {
        if (crow < 0 && pos >= (size_t)rl_point) {
            if (col >= width && width > pw) { /* the cursor sits after a full row */
                row = tui_input_newrow();
                col = pw;
            }
            crow = (int)tui_input_rown - 1;
            *ccol = col;
        }
        if (pos >= n)
            break;
        unsigned char c = (unsigned char)s[pos];
        if (c == '\n') {
            row = tui_input_newrow();
            col = pw;
            pos++;
            continue;
        }
        size_t k;
        buf_reset(&unit);
        if (c == '\t') {
            /* to the next stop of 4 from the text's left edge, as the transcript lays the
             * sent prompt out (wrap_clean): pasted code keeps its indentation here too */
            k = 1;
            for (int sp = 4 - (col - pw) % 4; sp > 0; sp--)
                buf_appendc(&unit, ' ');
        } else if (c < 0x20 || c == 0x7F) {
            k = 1;
            utf8_sanitize(&unit, s + pos, 1);
        } else {
            k = wrap_cluster(s + pos, n - pos, NULL);
            utf8_sanitize(&unit, s + pos, k);
        }
        int w = tui_draw_width(buf_str(&unit), unit.len);
        if (col + w > width && col > pw) {
            row = tui_input_newrow();
            col = pw;
        }
        buf_append(row, unit.data, unit.len);
        col += w;
        pos += k;
    }
    buf_free(&unit);
    buf_free(&clean);
    return crow < 0 ? 0 : crow;
}

int tui_input_rows(int width)
{
    int ccol;
    tui_input_layout(width, &ccol);
    return tui_input_rown ? (int)tui_input_rown : 1;
}

void tui_input_draw(WINDOW *w, int width, int height, int *cy, int *cx)
{
    static struct tui_row row;
    int ccol;
    int crow = tui_input_layout(width, &ccol);
    int first = 0;
    if (crow >= height)
        first = crow - height + 1;
    struct buf pr = BUF_INIT;
    const char *p = tui_input_shown_prompt();
    for (; *p; p++)
        if (*p != RL_PROMPT_START_IGNORE && *p != RL_PROMPT_END_IGNORE)
            buf_appendc(&pr, *p);
    for (int y = 0; y < height; y++) {
        int r = first + y;
        tui_row_begin(&row, width);
        if (r < (int)tui_input_rown) {
            if (r == 0) {
                tui_row_put_raw(&row, buf_str(&pr), pr.len, THEME_PROMPT, THEME_ATTR_BOLD);
                tui_row_fill(&row, tui_input_prompt_cols, THEME_INPUT);
            } else {
                tui_row_fill(&row, tui_input_prompt_cols, THEME_INPUT);
            }
            const struct buf *t = &tui_input_rowv[r].text;
            tui_row_put(&row, buf_str(t), t->len, THEME_INPUT, 0);
        }
        tui_row_blit(&row, w, y, THEME_INPUT);
    }
    buf_free(&pr);
    *cy = crow - first;
    *cx = ccol < width ? ccol : width - 1;
    if (*cx < 0)
        *cx = 0;
    tui_input_changed = 0;
}

int tui_input_dirty(void)
{
    return tui_input_changed;
}

int tui_input_vi(void)
{
    return rl_editing_mode == 0;
}

int tui_input_busy(void)
{
    return RL_ISSTATE(RL_STATE_ISEARCH | RL_STATE_NSEARCH | RL_STATE_MULTIKEY |
                      RL_STATE_NUMERICARG | RL_STATE_METANEXT | RL_STATE_MOREINPUT |
                      RL_STATE_CHARSEARCH | RL_STATE_VIMOTION) != 0;
}

int tui_input_empty(void)
{
    return rl_end == 0 && !tui_input_busy();
}

static int tui_input_reset(int keep)
{
    int kept = 0;
    if (RL_ISSTATE(RL_STATE_ISEARCH | RL_STATE_NSEARCH)) {
        tui_input_push("\007", 1); /* abort the search the way readline does */
        tui_input_run();
    }
    rl_callback_sigcleanup();
    if (keep && rl_end > 0) {
        rl_kill_text(0, rl_end); /* into the kill ring: Ctrl-Y yanks it back */
        kept = 1;
    }
    rl_replace_line("", 1);
    rl_point = rl_mark = 0;
    using_history();
    tui_input_changed = 1;
    return kept;
}

void tui_input_clear(void)
{
    (void)tui_input_reset(0);
}

int tui_input_discard(void)
{
    return tui_input_reset(1);
}

void tui_input_defer(const char *text)
{
    free(tui_input_deferred);
    tui_input_deferred = xstrdup(text);
}

int tui_input_deferring(void)
{
    return tui_input_deferred != NULL;
}

int tui_input_offer(const char *text)
{
    if (rl_line_buffer && rl_end == 0 && !tui_input_deferred) {
        rl_insert_text(text); /* the line is empty: the text is there now */
        tui_input_changed = 1;
        return 1;
    }
    tui_input_history_add(text);
    return 0;
}
