/* tui.c - the interactive chat: the main loop (poll on the keyboard, the session's event queue
 * and a signal pipe), the window layout, and frames drawn from dirty flags (one doupdate per
 * frame, at most ~60 frames a second while an answer streams; keystrokes are drawn at once). */
#include "config.h"
#include "tui/tui.h"
#include "core/loop.h"
#include "core/models.h"
#include "core/setup.h"
#include "proto/api.h"
#include "net/ratelimit.h"
#include "store/store.h"
#include "tui/tui_app.h"
#include "tui/tui_pace.h"
#include "tui/tui_ask.h"
#include "tui/tui_tools.h"
#include "tui/tui_draw.h"
#include "tui/tui_history.h"
#include "tui/tui_input.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define TUI_TAKE 0.002             /* text waiting for a frame is taken at most this often */
#define TUI_FAST_BATCH 32768       /* text in one batch that makes the heap huge (tui_sink_text) */
#define TUI_SLICE 16384            /* text styled between two looks at the clock: a frame that
                                      falls due inside a large batch is drawn there */
#define TUI_COUNT_STEP 16384       /* answer bytes counted at a time when no usage will count
                                      them (~0.5 ms), */
#define TUI_COUNT_ROOM 0.002       /* when the next frame is at least this far */
#define TUI_LAZY_QUIET 0.05        /* text set aside by a large batch is styled once no text
                                      came for this long (or the answer ended) */
#define TUI_RESUME_SHOWN 500 /* messages a resumed conversation shows in the chat */
#define TUI_PROMPT "\xE2\x80\xBA "
#define TUI_CTRL_C_QUIT 2.0 /* seconds: a second Ctrl-C on an empty prompt this soon quits */
#define TUI_HELP_HINT "help: PgUp/PgDn scroll, Esc or F1 closes it"
#define TUI_KEY_CHOME (KEY_MAX + 1)
#define TUI_KEY_CEND (KEY_MAX + 2)

/* ---- terminal modes ---- */

static void tui_term_modes(int on)
{
    /* bracketed paste: pasted newlines are inserted, not sent */
    const char *s = on ? "\033[?2004h" : "\033[?2004l";
    fflush(stdout);
    (void)!write(STDOUT_FILENO, s, strlen(s));
}

void tui_suspend_curses(void *ud)
{
    (void)ud;
    tui_term_modes(0);
    def_prog_mode();
    endwin();
}

void tui_resume_curses(void *ud)
{
    struct tui *t = ud;
    reset_prog_mode();
    tui_term_modes(1);
    clearok(curscr, TRUE);
    t->dirty |= TUI_D_FULL;
    t->urgent = 1;
}

/* ---- layout ---- */

static void tui_layout(struct tui *t)
{
    int rows = LINES, cols = COLS;
    if (rows < 1)
        rows = 1;
    if (cols < 1)
        cols = 1;
    int max_in = rows >= 3 ? rows / 3 : 1;
    if (max_in < 1)
        max_in = 1;
    int in_h = t->search ? 1 : tui_input_rows(cols);
    if (in_h > max_in)
        in_h = max_in;
    if (in_h < 1)
        in_h = 1;
    int view_h = rows - 1 - in_h;
    if (rows < 3) {
        view_h = 0;
        in_h = 1;
    }
    if (view_h < 0)
        view_h = 0;
    if (rows == t->rows && cols == t->cols && in_h == t->input_h && t->wview)
        return;
    t->rows = rows;
    t->cols = cols;
    t->input_h = in_h;
    t->view_h = view_h;
    int status_y = rows >= 2 ? rows - 1 - in_h : -1;
    if (!t->wview) {
        t->wview = newwin(view_h > 0 ? view_h : 1, cols, 0, 0);
        t->wstatus = newwin(1, cols, status_y >= 0 ? status_y : 0, 0);
        t->winput = newwin(in_h, cols, rows - in_h, 0);
    } else {
        /* shrink first so that no window sticks out of the screen while moving */
        wresize(t->wview, 1, cols);
        mvwin(t->wview, 0, 0);
        wresize(t->wview, view_h > 0 ? view_h : 1, cols);
        wresize(t->wstatus, 1, cols);
        mvwin(t->wstatus, status_y >= 0 ? status_y : 0, 0);
        wresize(t->winput, in_h, cols);
        mvwin(t->winput, rows - in_h, 0);
    }
    idlok(t->wview, TRUE);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS | TUI_D_INPUT;
}

static void tui_resize(struct tui *t)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
        resize_term(ws.ws_row, ws.ws_col);
    clearok(curscr, TRUE);
    t->rows = -1; /* force the layout */
    tui_layout(t);
    t->dirty |= TUI_D_FULL;
    t->urgent = 1;
}

/* ---- frames ---- */

static void tui_draw_search_prompt(struct tui *t, int *cy, int *cx)
{
    static struct tui_row row;
    tui_row_begin(&row, t->cols);
    if (t->search == 1) {
        tui_row_put(&row, "find: ", 6, THEME_PROMPT, THEME_ATTR_BOLD);
        tui_row_put_raw(&row, buf_str(&t->query), t->query.len, THEME_INPUT, 0);
        *cx = row.col < t->cols ? row.col : t->cols - 1;
    } else {
        size_t total, cur = tui_view_search_pos(t->view, &total);
        char b[160];
        snprintf(b, sizeof b, "find: ");
        tui_row_put(&row, b, strlen(b), THEME_PROMPT, THEME_ATTR_BOLD);
        tui_row_put_raw(&row, buf_str(&t->query), t->query.len, THEME_INPUT, 0);
        if (total && tui_view_search_dropped(t->view))
            snprintf(b, sizeof b, "  hit %zu/%zu (the newest of %zu)  n older  N newer  Esc done",
                     cur, total, total + tui_view_search_dropped(t->view));
        else if (total)
            snprintf(b, sizeof b, "  hit %zu/%zu  n older  N newer  Esc done", cur, total);
        else
            snprintf(b, sizeof b, "  no hits  Esc done");
        *cx = row.col < t->cols ? row.col : t->cols - 1;
        tui_row_put(&row, b, strlen(b), THEME_META, 0);
    }
    *cy = 0;
    tui_row_blit(&row, t->winput, 0, THEME_INPUT);
    for (int y = 1; y < t->input_h; y++) {
        tui_row_begin(&row, t->cols);
        tui_row_blit(&row, t->winput, y, THEME_INPUT);
    }
}

/* The session's counts for the status bar. While an answer streams, the context used is the
 * count at the answer's first frame plus an estimate of the answer (bytes / 4 times the
 * calibration ratio, shown with "~", like tokens/s): counting the answer's tokens exactly on
 * every frame cost more than styling and drawing it. When the answer ends the exact count is
 * taken once: by the frame that shows the end when the answer is short (a millisecond or
 * less), else after that frame (tui_run_timeout), off the drawing path. */
#define TUI_CTX_DEFER_BYTES (16 * 1024)
static void tui_frame_status(struct tui *t)
{
    if (!t->have_session)
        return;
    tui_tools_status(t, util_now()); /* a tool call running: its round, name, time */
    if (t->answer != TUI_NO_ANSWER && t->ctx_base_ok) {
        t->st.ctx_used = t->ctx_base + (long)((double)((t->st.bytes + 3) / 4) * t->ctx_ratio +
                                              0.999);
        t->st.ctx_approx = 1;
        return;
    }
    if (t->answer == TUI_NO_ANSWER && t->ctx_stale)
        return; /* the answer's last frame: the estimate stays until the exact count */
    struct session_status ss;
    session_status(t->s, &ss);
    tui_status_context(&t->st, &ss);
    if (t->answer != TUI_NO_ANSWER && !ss.summarizing) {
        t->ctx_base = ss.ctx_used - (long)(ss.answer_tokens * ss.ratio + 0.999);
        t->ctx_ratio = ss.ratio > 0 ? ss.ratio : 1.0;
        t->ctx_base_ok = 1;
    }
}

/* --trace: Y <text the session handed over> <text the transcript took> <text styled>, after
 * each frame and when the text set aside by large batches is all styled (a large batch is
 * taken whole, its last screenful styled first, the rest later). */
static void tui_trace_styled(struct tui *t)
{
    size_t taken = 0, styled = tui_view_styled(t->view, &taken);
    fprintf(t->trace, "Y %zu %zu %zu\n", t->sink_bytes, taken, styled);
}

/* U <CPU of the process, all threads> <CPU of the UI thread> <the UI thread's CPU in the
 * frame> <the UI thread's minor page faults so far>: after S, after each frame and after the Y
 * that says all is styled (0: no frame), so the benchmark takes an answer's CPU (request sent
 * -> its end drawn and all of it styled) exactly, and what its frames cost, and a test the
 * fresh pages an answer took (test_chat_faults.py). */
static void tui_trace_cpu(struct tui *t, double frame_cpu0)
{
    double ui = util_cpu(1);
    fprintf(t->trace, "U %.6f %.6f %.6f %ld\n", util_cpu(0), ui, frame_cpu0 ? ui - frame_cpu0 : 0,
            util_thread_faults());
}

static void tui_frame(struct tui *t)
{
    double now = util_now(), cpu0 = t->trace ? util_cpu(1) : 0;
    size_t fed0 = 0, texts0 = 0, fed1 = 0, texts1 = 0;
    unsigned long put0, made0, put1, made1;
    if (t->have_session)
        session_count_debug(t->s, &fed0, &texts0);
    tui_draw_counts(&put0, &made0);
    tui_layout(t);
    if (t->dirty & TUI_D_FULL) {
        clearok(curscr, TRUE);
        t->dirty |= TUI_D_VIEW | TUI_D_STATUS | TUI_D_INPUT;
    }
    if (t->hist) { /* the conversation browser covers the chat */
        tui_hist_draw(t);
        doupdate();
        tui_hist_drawn(t, util_now());
        t->oldest = 0;
        t->undrawn = 0;
        t->dirty = 0;
        t->urgent = 0;
        t->last_frame = now;
        return;
    }
    if ((t->dirty & TUI_D_VIEW) && t->view_h > 0) {
        tui_view_draw(t->help ? t->help : t->view, t->wview, t->cols, t->view_h);
        wnoutrefresh(t->wview);
    }
    if ((t->dirty & (TUI_D_STATUS | TUI_D_VIEW)) && t->rows >= 2) {
        t->st.scrolled = !tui_view_following(t->view);
        tui_frame_status(t);
        tui_status_draw(&t->st, t->wstatus, 0, t->cols, now,
                        t->help && !t->hint[0] ? TUI_HELP_HINT : t->hint);
        wnoutrefresh(t->wstatus);
    }
    int cy = 0, cx = 0;
    if (t->ask && tui_ask_draw(t, &cy, &cx))
        ; /* the question's choices are the input row */
    else if (t->search)
        tui_draw_search_prompt(t, &cy, &cx);
    else
        tui_input_draw(t->winput, t->cols, t->input_h, &cy, &cx);
    wmove(t->winput, cy, cx);
    wnoutrefresh(t->winput);
    tui_draw_settle();
    doupdate();
    double done = util_now();
    if (t->trace) {
        /* F <arrival of the oldest undrawn delta or -> <frame done> <frame start> <events> */
        if (t->undrawn)
            fprintf(t->trace, "F %.6f %.6f %.6f %ld\n", t->oldest, done, now, t->undrawn);
        else
            fprintf(t->trace, "F - %.6f %.6f 0\n", done, now);
        /* T <answer bytes the frame gave the token counter> <texts it counted>: 0 0, the
         * drawing path never tokenises */
        if (t->have_session)
            session_count_debug(t->s, &fed1, &texts1);
        fprintf(t->trace, "T %zu %ld\n", fed1 - fed0, (long)texts1 - (long)texts0);
        /* C <cells the frame drew> <cells setcchar made>: ASCII cells are copies */
        tui_draw_counts(&put1, &made1);
        fprintf(t->trace, "C %lu %lu\n", put1 - put0, made1 - made0);
        tui_trace_styled(t);
        tui_trace_cpu(t, cpu0);
    }
    t->oldest = 0;
    t->undrawn = 0;
    t->dirty = 0;
    t->urgent = 0;
    t->last_frame = now; /* frames start at most every TUI_FRAME */
}

/* ---- transcript helpers ---- */

void tui_notice(struct tui *t, const char *markdown)
{
    tui_view_add(t->view, TUI_MSG_NOTICE, markdown, strlen(markdown));
    tui_view_end(t->view);
    t->dirty |= TUI_D_VIEW;
}

void tui_meta(struct tui *t, const char *text)
{
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n')
        n--;
    tui_view_add(t->view, TUI_MSG_META, text, n);
    tui_view_end(t->view);
    t->dirty |= TUI_D_VIEW;
}

void tui_error(struct tui *t, const char *text)
{
    tui_view_add(t->view, TUI_MSG_ERROR, text, strlen(text));
    tui_view_end(t->view);
    t->dirty |= TUI_D_VIEW;
}

void tui_hint(struct tui *t, const char *text)
{
    snprintf(t->hint, sizeof t->hint, "%s", text);
    t->dirty |= TUI_D_STATUS;
}

void tui_no_key_notice(struct tui *t)
{
    char *cfg = conf_dir("config");
    struct buf b = BUF_INIT, profile = BUF_INIT;
    struct conf_key_help h;
    conf_no_key_help(t->conf, &h, &profile);
    buf_printf(&b,
               "**No API key** for `%s`, so nothing will be sent.\n"
               "Set one of these and start tokterm again:\n"
               "- `export %s=...` (the key for the API",
               t->conf->base_url, h.key_env);
    if (h.key_env_alt)
        buf_printf(&b, "; or `%s`", h.key_env_alt);
    buf_appends(&b, ")\n");
    if (h.base_env)
        buf_printf(&b, "- `export %s=https://...` (%s)\n", h.base_env, h.server);
    buf_printf(&b, "- a profile in `%s/config`:\n```ini\n%s```\n", cfg, buf_str(&profile));
    buf_free(&profile);
    if (t->local_url)
        buf_printf(&b,
                   "A local **%s** server answers at `%s` and needs no key: press **Enter** on "
                   "the empty line (or type `/use-local`) to use it.\n",
                   t->local_name ? t->local_name : "OpenAI-compatible", t->local_url);
    free(cfg);
    tui_notice(t, buf_str(&b));
    buf_free(&b);
}

void tui_use_local(struct tui *t)
{
    if (!t->local_url) {
        tui_error(t, "No local server was found (tokterm looks for Ollama on port 11434 and "
                     "llama.cpp on 8080 at start).");
        return;
    }
    free(t->conf->base_url);
    t->conf->base_url = xstrdup(t->local_url);
    t->no_key = 0;
    tui_status_state(&t->st, TUI_STATE_IDLE, 0);
    /* a model the local server has: the configured one when it is listed, else its first */
    struct model_list l = {0};
    struct buf err = BUF_INIT;
    char *msg;
    const char *name = t->local_name ? t->local_name : "";
    size_t first = 0;
    int got = models_get(t->conf, NULL, 0, &l, &err) == 0;
    while (got && first < l.n && !models_id_typable(l.v[first].id))
        first++;
    if (got && first < l.n) {
        int keep = models_has(&l, t->conf->model);
        if (!keep) {
            free(t->conf->model);
            t->conf->model = xstrdup(l.v[first].id);
            tui_status_model(&t->st, t->conf->profile, t->conf->model);
        }
        msg = xasprintf("Using the local %s server at `%s` (no key needed) with its model **%s**%s "
                        "(`/model` and Tab list its %zu model%s).",
                        name, t->local_url, t->conf->model, keep ? "" : ", the first it lists",
                        l.n, l.n == 1 ? "" : "s");
    } else {
        msg = xasprintf("Using the local %s server at `%s` (no key needed). It did not list its "
                        "models (%s): pick one with `/model NAME` if `%s` is not one of them.",
                        name, t->local_url, err.len ? buf_str(&err) : "an empty list",
                        t->conf->model);
    }
    model_list_free(&l);
    buf_free(&err);
    tui_notice(t, msg);
    free(msg);
    t->dirty |= TUI_D_STATUS;
}

int tui_theme(struct tui *t, const char *name)
{
    char *err = NULL, *warn = NULL;
    struct theme *th = theme_find(name && *name ? name : "default", &err, &warn);
    if (err && t->theme) { /* a theme is in use: it stays (theme_find gave the built-in one) */
        static const char builtin[] = "; using the built-in theme";
        size_t n = strlen(err), k = sizeof builtin - 1;
        if (n >= k && strcmp(err + n - k, builtin) == 0)
            err[n - k] = '\0';
        char *m = xasprintf("%s; the theme stays %s", err, theme_name(t->theme));
        tui_error(t, m);
        free(m);
        free(err);
        free(warn);
        theme_free(th);
        return -1;
    }
    if (err)
        tui_error(t, err);
    if (warn) {
        char *m = xasprintf("theme warnings:\n%s", warn);
        tui_error(t, m);
        free(m);
    }
    free(err);
    free(warn);
    theme_free(t->theme);
    t->theme = th;
    tui_draw_setup(t->theme, t->no_color);
    t->dirty |= TUI_D_FULL;
    return 0;
}

/* ---- the session ---- */

static void tui_block_signals(int block, sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGWINCH);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCONT);
    if (block)
        pthread_sigmask(SIG_BLOCK, &set, old);
    else
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

int tui_session(struct tui *t, char *key, const struct conv *carry)
{
    const char *err = NULL;
    sigset_t old;
    tui_block_signals(1, &old); /* the network thread inherits a mask without our signals */
    t->s = session_open(t->conf, key, &err); /* the key is wiped when it fails */
    tui_block_signals(0, &old);
    if (!t->s) {
        t->have_session = 0;
        char *m = xasprintf("cannot start the network thread: %s", err);
        tui_error(t, m);
        free(m);
        return -1;
    }
    t->have_session = 1;
    /* the transcript shows refused turns: so does a resume */
    session_set_options(t->s, &(struct session_opts){.keep_answer = 1, .save_refused = 1});
    if (t->o->store)
        session_use_store(t->s, t->o->store, t->o->save, (enum session_cache)t->o->cache);
    if (carry)
        session_adopt(t->s, carry);
    tui_tools_session(t); /* the tools offered to the model, the approval policy */
    return 0;
}

/* The footer line of a complete answer: "✓ 4ms · first token 4ms · 10 tokens · ..." (times
 * < 0 and completion < 0: unknown, left out), live and on a resume alike. */
static void tui_footer_done(struct buf *b, double total, double ttft, long long completion,
                            double tps, int empty, int cached)
{
    char d1[32], d2[32];
    buf_appends(b, "\xE2\x9C\x93");
    if (total >= 0)
        buf_printf(b, " %s", ratelimit_format_duration(total, d1, sizeof d1));
    if (ttft >= 0)
        buf_printf(b, "%sfirst token %s", total >= 0 ? " \xC2\xB7 " : " ",
                   ratelimit_format_duration(ttft, d2, sizeof d2));
    if (completion >= 0)
        buf_printf(b, " \xC2\xB7 %lld token%s", completion, util_plural(completion));
    if (tps > 0) /* net.c measures it only over TT_TPS_MIN_SECONDS */
        buf_printf(b, " \xC2\xB7 %.0f tok/s", tps);
    if (empty)
        buf_appends(b, " \xC2\xB7 the answer is empty");
    if (cached)
        buf_appends(b, " \xC2\xB7 from the cache");
}

/* The footer of a saved turn's answer: how it ended (a complete one as it was shown live, from
 * the row's facts f; NULL: unknown), and which version of the turn it is. */
static char *tui_turn_footer(const struct conv_turn *tt, const struct store_message *f,
                             int *slot)
{
    struct buf b = BUF_INIT;
    *slot = THEME_META;
    switch (tt->outcome) {
    case CONV_ANSWERED:
        if (f) /* until 2026-12 a resume showed no footer under a complete answer */
            tui_footer_done(&b, f->timings.total, f->timings.ttft, f->usage.completion_tokens,
                            f->timings.tokens_per_s, tt->answer_len == 0, f->cached);
        break;
    case CONV_CUT:
        *slot = THEME_ERROR;
        buf_printf(&b, "\xE2\x9A\xA0 %s", tt->error ? tt->error : "the answer was cut short");
        break;
    case CONV_INTERRUPTED:
        *slot = THEME_ERROR;
        buf_printf(&b, "\xE2\x9C\x97 %s%s", tt->error ? tt->error : "interrupted",
                   tt->answer_len ? " (the partial answer above is kept)" : "");
        break;
    case CONV_FAILED:
        *slot = THEME_ERROR;
        /* a turn whose tool rounds ran (or were cut by tokterm's end) is sent with them */
        buf_printf(&b, "\xE2\x9C\x97 %s (%s)", tt->error ? tt->error : "failed",
                   conv_turn_sent(tt) ? "the prompt and its tool rounds are sent again"
                                      : "not sent again");
        break;
    case CONV_REFUSED:
        *slot = THEME_ERROR;
        buf_printf(&b, "\xE2\x9C\x97 not sent: %s", tt->error ? tt->error : "refused");
        break;
    default:
        break;
    }
    char vt[CONV_VERSION_MAX];
    if (tt->n_versions > 1)
        buf_printf(&b, "%s%s", b.len ? " \xC2\xB7 " : "",
                   conv_version_text(vt, tt->version, tt->n_versions));
    return b.len ? buf_take(&b) : (buf_free(&b), NULL);
}

/* Show turn tt of the conversation as the live session showed it. */
/* One compact line per attachment (name, type, size, tokens) under the user's message. */
static void tui_show_attachments(struct tui *t, const struct attach *v, size_t n)
{
    enum attach_provider p = session_attach_provider(t->s);
    for (size_t i = 0; i < n; i++) {
        struct buf b = BUF_INIT;
        buf_appends(&b, "+ attached: ");
        attach_describe(&b, &v[i], attach_tokens(&v[i], p));
        tui_view_add(t->view, TUI_MSG_META, b.data, b.len);
        buf_free(&b);
    }
}

static void tui_show_turn(struct tui *t, const struct conv_turn *tt)
{
    tui_view_add(t->view, TUI_MSG_USER, tt->prompt, tt->prompt_len);
    tui_show_attachments(t, tt->att, tt->n_att);
    tui_tools_show_steps(t, tt); /* its tool rounds, one line each */
    if (tt->outcome == CONV_PENDING)
        return;
    struct store_message f = {0};
    int known = t->o->store && tt->answer_id > 0 &&
                store_message_facts(t->o->store, tt->answer_id, &f) == 0;
    char when[32] = "";
    time_t at = (time_t)f.created, now = time(NULL);
    struct tm tm, today;
    if (known && f.created > 0 && localtime_r(&at, &tm) && localtime_r(&now, &today))
        strftime(when, sizeof when, tm.tm_yday == today.tm_yday && tm.tm_year == today.tm_year
                                        ? "%H:%M" : "%Y-%m-%d %H:%M", &tm);
    size_t a = tui_view_answer_begin(t->view, tt->model ? tt->model : t->conf->model,
                                     when[0] ? when : NULL);
    char *why = t->o->store && tt->answer_id > 0 ? store_message_reasoning(t->o->store,
                                                                          tt->answer_id)
                                                 : NULL;
    if (why) /* as it was shown live (until 2026-12 a resume hid it) */
        tui_view_answer_text(t->view, a, 1, why, strlen(why));
    free(why);
    if (tt->answer_len)
        tui_view_answer_text(t->view, a, 0, tt->answer, tt->answer_len);
    int slot;
    char *footer = tui_turn_footer(tt, known ? &f : NULL, &slot);
    tui_view_answer_end(t->view, a, footer, slot);
    free(footer);
}

/* The session's conversation drawn into the transcript (replace: in place of what is
 * there). */
static void tui_show_conv(struct tui *t, int replace)
{
    if (replace) {
        tui_view_truncate(t->view, 0);
        t->edit_pending = 0;
        t->ctx_marked = 0;
    }
    /* The chat shows the newest TUI_RESUME_SHOWN messages (a turn shows two): rendering all
     * of a 10,000-message conversation took 0.26 s and ~60 MB; the browser (F2) reads the whole
     * of it, page by page. Every turn stays in the conversation and its context. */
    const struct conv *c = session_conv(t->s);
    size_t from = c->n > TUI_RESUME_SHOWN / 2 ? c->n - TUI_RESUME_SHOWN / 2 : 0;
    if (from) {
        char *m = xasprintf("%zu earlier turn%s %s not shown here (%s still part of the "
                            "conversation): F2 opens the whole conversation.",
                            from, util_plural((long long)from), from == 1 ? "is" : "are",
                            from == 1 ? "it is" : "they are");
        tui_meta(t, m);
        free(m);
    }
    for (size_t i = from; i < c->n; i++)
        tui_show_turn(t, &c->turns[i]);
}

int tui_reload(struct tui *t, const char *then)
{
    char *err = NULL;
    int edit = t->edit_pending;
    if (session_reload(t->s, &err) < 0) {
        char *m = xasprintf("Another tokterm added to conversation %lld while this chat was "
                            "open, and it could not be read again (%s): your message goes "
                            "after this chat's last turn.",
                            (long long)session_conv_id(t->s), err ? err : "?");
        tui_error(t, m);
        free(m);
        free(err);
        return -1;
    }
    tui_show_conv(t, 1); /* the model, the role and `a` answers stay: the same conversation */
    char *m = xasprintf("Another tokterm added to conversation %lld while this chat was open: "
                        "it is shown above as it is saved now%s. %s",
                        (long long)session_conv_id(t->s),
                        edit ? " (the /edit was given up)" : "", then);
    tui_notice(t, m);
    free(m);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
    return 0;
}

void tui_resume(struct tui *t, int64_t id, int replace)
{
    char *err = NULL;
    if (session_resume(t->s, id, &err) < 0) {
        char *m = xasprintf("cannot continue the conversation: %s", err ? err : "?");
        tui_error(t, m);
        free(m);
        free(err);
        return;
    }
    tui_tools_forget(t); /* another conversation: `a` answers do not carry over */
    tui_show_conv(t, replace);
    const struct conv *c = session_conv(t->s);
    /* with the model and role it was held with (session_resume_settings) */
    tui_status_model(&t->st, t->conf->profile, t->conf->model);
    tui_status_effort(&t->st, t->conf->reasoning_effort);
    t->dirty |= TUI_D_STATUS;
    const char *passed = session_resume_passed(t->s);
    char *m = xasprintf("Continuing conversation %lld (%zu turn%s) with `%s`%s%s%s%s%s.",
                        (long long)c->id, c->n, util_plural((long long)c->n), t->conf->model,
                        t->conf->role ? ", role " : "", t->conf->role ? t->conf->role : "",
                        passed ? ", the latest with an answer: " : "", passed ? passed : "",
                        passed ? " (F2 lists them all)" : "");
    tui_notice(t, m);
    free(m);
    if (session_resume_note(t->s)) {
        m = xasprintf("%s.", session_resume_note(t->s));
        tui_error(t, m);
        free(m);
    }
    /* held with another server: the next turn sends all of it here, so say so before it does
     * (scripted mode refuses unless -P, --base-url or --api names where to send it) */
    char *held = session_resumed_elsewhere(t->s);
    if (held) {
        char *now = conf_host(t->conf);
        m = xasprintf("This conversation was held with %s. Your next message sends all of it "
                      "to **%s**: `/profile NAME` switches back first.", held, now);
        tui_notice(t, m);
        free(m);
        free(now);
        free(held);
    }
}

static double tui_frame_due(const struct tui *t);

/* Text of the answer. A large batch (a cache replay is one, the network's up to 256 KiB) has
 * its last screenful styled first when the transcript can (tui_view_answer_defer), and a
 * frame shows it at once: the text before it waits for the loop's quiet time
 * (tui_view_lazy_step). What is styled now goes TUI_SLICE bytes at a time, and when a frame
 * falls due before it is all styled (a batch that could not be split: one long code block),
 * the frame is drawn there, so what arrived first is on screen before the rest is styled.
 * Such frames keep to TUI_FRAME apart (not TUI_FRAME_MIN: a backlog is not drawn at 120 Hz,
 * each frame costs a screenful). The rest counts as arrived at t1 (an upper bound of its
 * delay). */
static void tui_sink_text(void *ud, int reasoning, const char *s, size_t n, double t1, double t2)
{
    struct tui *t = ud;
    if (t->answer == TUI_NO_ANSWER)
        return;
    tui_tools_answer_next(t); /* after a tool round: a new answer below its lines */
    t->sink_bytes += n;
    t->last_text = util_now();
    int first = t->st.bytes == 0; /* no text of this answer on screen yet */
    /* A batch this large is a fast sender (a cache replay, a local model, a big stream): the
     * answer's copies (the styler's lines, the document's text, rows and spans) are allocated
     * from here on, hundreds of fresh 4 KiB pages that cost more CPU to fault in than styling
     * the text. From the first such batch, the heap grows in large steps, in transparent huge
     * pages where those pay (xmalloc_heap_fast, xmalloc_huge_pays). */
    if (n >= TUI_FAST_BATCH)
        xmalloc_heap_fast();
    /* the text lies in the session's copy of the answer: a long line reads it there */
    tui_view_answer_lend(t->view, session_answer_lend(t->s), session_answer_len(t->s));
    size_t lazy = tui_view_answer_defer(t->view, t->answer, reasoning, s, n), at = lazy;
    if (at && !reasoning)
        tui_status_text(&t->st, at, t1, t2);
    while (at < n) {
        size_t k = n - at > TUI_SLICE ? TUI_SLICE : n - at;
        tui_view_answer_text(t->view, t->answer, reasoning, s + at, k);
        if (!reasoning)
            tui_status_text(&t->st, k, t1, t2);
        else if (t->st.state == TUI_STATE_WAITING)
            t->st.state = TUI_STATE_STREAMING;
        at += k;
        if (!t->oldest || t1 < t->oldest)
            t->oldest = t1;
        if (at == n) {
            t->undrawn++;
        } else if (util_now() >= tui_frame_due(t) && util_now() >= t->last_frame + TUI_FRAME) {
            t->undrawn++;
            t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
            if (t->trace)
                fprintf(t->trace, "P %zu %zu\n", at, n); /* a frame inside a batch */
            tui_frame(t);
        }
    }
    tui_view_answer_lend(t->view, NULL, 0);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
    double due = tui_pace_due(t->last_frame, t->oldest ? t->oldest : t1);
    if (lazy && (first || util_now() >= due)) {
        /* a large batch, its end styled: on screen now when its frame is due, not after what
         * the session does next (a replay's end saves the answer) */
        tui_frame(t);
    }
}

static void tui_sink_headers(void *ud, long status)
{
    struct tui *t = ud;
    (void)status;
    t->dirty |= TUI_D_STATUS;
}

static void tui_sink_wait(void *ud, int retry, const char *why, double seconds)
{
    struct tui *t = ud;
    tui_status_wait(&t->st, retry ? TUI_STATE_RETRYING : TUI_STATE_QUOTA,
                    util_now() + (seconds > 0 ? seconds : 0), why);
    t->dirty |= TUI_D_STATUS;
}

/* A warning of the network layer (the shared state lost or back): the hint line keeps it. */
static void tui_sink_warn(void *ud, const char *text)
{
    struct tui *t = ud;
    tui_hint(t, text);
    snprintf(t->warned, sizeof t->warned, "%s", text);
}

static void tui_sink_quota(void *ud, const char *headers)
{
    struct tui *t = ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tui_status_headers(&t->st, headers, util_now(), (double)ts.tv_sec + ts.tv_nsec / 1e9);
    t->dirty |= TUI_D_STATUS;
}

static char *tui_footer(struct tui *t, const struct net_result *r, int *slot)
{
    struct buf b = BUF_INIT;
    *slot = THEME_META;
    switch (r->outcome) {
    case API_OK:
        tui_footer_done(&b, r->t.total, r->t.ttft, r->usage.present ? r->usage.completion : -1,
                        r->t.tokens_per_s, r->content_bytes == 0, r->cached);
        /* attempts, not retries: a 429 waited out as asked spends no retry */
        if (r->attempts > 1) {
            buf_printf(&b, " \xC2\xB7 after %d failed attempt%s", r->attempts - 1,
                       util_plural(r->attempts - 1));
            if (r->rate_limited)
                buf_printf(&b, " (%d answered 429)", r->rate_limited);
        }
        if (t->have_session && session_tools_incomplete(t->s)) {
            *slot = THEME_ERROR;
            buf_printf(&b, "\n\xE2\x9A\xA0 the answer may be incomplete: %s",
                       session_tools_incomplete(t->s));
        }
        break;
    case API_CANCELLED:
        *slot = THEME_ERROR;
        buf_appends(&b, r->content_bytes ? "\xE2\x9C\x97 cancelled (the partial answer above is "
                                           "kept)"
                                         : "\xE2\x9C\x97 cancelled");
        break;
    case API_CUT:
        *slot = THEME_ERROR;
        buf_printf(&b, "\xE2\x9A\xA0 %s", r->error ? r->error : "the answer was cut short");
        break;
    default: {
        *slot = THEME_ERROR;
        buf_printf(&b, "\xE2\x9C\x97 %s%s", r->outcome == API_ERR_USAGE ? "not sent: " : "",
                   r->error ? r->error : api_outcome_name(r->outcome));
        if (r->outcome == API_ERR_HTTP && r->status >= 400) {
            struct ratelimit_failure f = {.status = (int)r->status,
                                          .net = RATELIMIT_NET_OK,
                                          .error_code = r->error_code[0] ? r->error_code : NULL,
                                          .key_env = t->conf->api_key_env};
            char *ex = ratelimit_explain(&f);
            if (ex && *ex && !(r->error && strstr(r->error, ex))) { /* the message may hold it */
                /* the line above already says "HTTP 500": the advice need not say it again */
                char status[32];
                int k = snprintf(status, sizeof status, "HTTP %ld: ", r->status);
                const char *hint = ex;
                if (k > 0 && r->error && strncmp(r->error, status, (size_t)k - 2) == 0 &&
                    strncmp(ex, status, (size_t)k) == 0 && ex[k]) {
                    hint = ex + k;
                    buf_printf(&b, "\n%c%s", toupper((unsigned char)*hint), hint + 1);
                } else {
                    buf_printf(&b, "\n%s", hint);
                }
            }
            free(ex);
        }
        if (r->content_bytes && r->outcome != API_LIMIT) /* that message says it already */
            buf_appends(&b, "\n(the partial answer above is kept)");
        break;
    }
    }
    return buf_take(&b);
}

static void tui_sink_end(void *ud, const struct net_result *r)
{
    struct tui *t = ud;
    double now = util_now();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tui_tools_answer_next(t);
    tui_status_tool(&t->st, NULL, 0, 0, now);
    tui_status_model(&t->st, t->conf->profile, t->conf->model); /* a /model while it streamed */
    tui_status_end(&t->st, r, now, (double)ts.tv_sec + ts.tv_nsec / 1e9);
    if (t->answer != TUI_NO_ANSWER && r->model[0] && t->answer_model[0] &&
        strcmp(r->model, t->answer_model) != 0) { /* the server answered with another name */
        char *label = xasprintf("%s \xE2\x86\x92 %s", t->answer_model, r->model);
        tui_view_answer_label(t->view, t->answer, label);
        free(label);
    }
    if (t->answer != TUI_NO_ANSWER) {
        int slot;
        char *footer = tui_footer(t, r, &slot);
        const struct conv *c = t->have_session ? session_conv(t->s) : NULL;
        if (c && c->n && c->turns[c->n - 1].n_versions > 1) {
            char vt[CONV_VERSION_MAX];
            char *v = xasprintf("%s \xC2\xB7 %s", footer,
                                conv_version_text(vt, c->turns[c->n - 1].version,
                                                  c->turns[c->n - 1].n_versions));
            free(footer);
            footer = v;
        }
        tui_view_answer_end(t->view, t->answer, footer, slot);
        free(footer);
    }
    if (r->model[0])
        tui_cmd_model_seen(t, r->model);
    if (t->have_session && !t->ctx_marked && session_compressed(t->s)) {
        /* history left out of (or summarised for) the request: say so once */
        tui_meta(t, "\xE2\x94\x80\xE2\x94\x80 earlier messages shortened, summarised or "
                    "dropped to fit the context (/context) \xE2\x94\x80\xE2\x94\x80");
        t->ctx_marked = 1;
    }
    if (t->have_session) {
        /* a prompt the next request leaves out goes back to the input line */
        const struct conv *c = session_conv(t->s);
        const struct conv_turn *last = c->n ? &c->turns[c->n - 1] : NULL;
        if (last && !conv_turn_sent(last)) { /* failed, refused, or cancelled before a byte */
            /* its attachments come back with it (until 2026-12 Enter sent the prompt alone) */
            int back = tui_input_offer(last->prompt);
            free(t->offered);
            t->offered = back ? xstrdup(last->prompt) : NULL;
            if (!back)
                tui_hint(t, last->n_att ? "the prompt is in the input history: Up recalls it "
                                          "(its attachments are not: /attach them again)"
                                        : "the prompt is in the input history: Up recalls it");
            else if (last->n_att && tui_attach_offer(t, last->att, last->n_att))
                tui_hint(t, "the prompt and its attachments are back: Enter sends them again");
            else
                tui_hint(t, "the prompt is back in the input line: Enter sends it again");
        } else if (last && !last->answer_len && last->n_steps &&
                   last->outcome != CONV_ANSWERED && last->outcome != CONV_CUT) {
            /* stopped after its tools ran (cancelled, failed, tool_rounds): the next request
             * carries the prompt and what the tools returned (conv_turn_sent) */
            tui_hint(t, "its tools ran: the turn stays in the conversation with their results "
                        "(/retry asks again)");
        }
    }
    if (strncmp(t->hint, TUI_HINT_STREAMING, sizeof TUI_HINT_STREAMING - 1) == 0 ||
        strncmp(t->hint, TUI_HINT_WAITING, sizeof TUI_HINT_WAITING - 1) == 0 ||
        strcmp(t->hint, TUI_HINT_SENT_NOW) == 0 || strcmp(t->hint, TUI_HINT_QUIT) == 0)
        t->hint[0] = '\0'; /* it is over: the hint would be stale */
    if (t->warned[0]) {
        /* the network's warning stays readable in the conversation (a key pressed during
         * the answer, or a failure's hint, took it off the bar), and the status bar comes
         * back (until 2026-12 it held the bar until a key was pressed) */
        tui_meta(t, t->warned);
        if (strcmp(t->hint, t->warned) == 0)
            t->hint[0] = '\0';
        t->warned[0] = '\0';
    }
    t->answer = TUI_NO_ANSWER;
    t->cancelling = 0;
    tui_shell_answer_end(t, r); /* a /x proposal: run / edit / copy / cancel */
    /* a long answer is counted after the frame that shows its end, a short one by it */
    t->ctx_stale = t->ctx_base_ok && t->st.bytes > TUI_CTX_DEFER_BYTES;
    t->ctx_base_ok = 0;
    if (t->trace) {
        fprintf(t->trace, "E %.6f %zu\n", now, tui_view_lent(t->view));
        fflush(t->trace);
    }
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}


void tui_view_drop_last_turn(struct tui *t)
{
    size_t v = tui_view_count(t->view);
    while (v > 0 && tui_view_kind(t->view, v - 1) != TUI_MSG_USER)
        v--;
    if (v > 0)
        tui_view_truncate(t->view, v - 1);
}

int tui_send(struct tui *t, const char *prompt, int show_user)
{
    if (t->answer != TUI_NO_ANSWER) {
        tui_hint(t, TUI_HINT_BUSY(t));
        return -1;
    }
    if (!t->have_session) {
        tui_error(t, "nothing can be sent: the network thread is not running");
        return -1;
    }
    if (t->no_key || (!session_has_key(t->s) && !conf_is_local(t->conf))) {
        /* never send a request to a remote server without a key: the turn is refused */
        session_refuse_turn(t->s, prompt, "no API key");
        const struct conv *c = session_conv(t->s);
        tui_show_turn(t, &c->turns[c->n - 1]);
        tui_no_key_notice(t);
        tui_view_end(t->view);
        t->dirty |= TUI_D_VIEW;
        return -1;
    }
    tui_attach_send(t); /* what /attach left waiting goes with this prompt */
    if (show_user) {
        size_t n_att;
        const struct attach *att = session_attached(t->s, &n_att);
        tui_view_add(t->view, TUI_MSG_USER, prompt, strlen(prompt));
        tui_show_attachments(t, att, n_att);
    }
    char when[16] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%H:%M", &tm);
    snprintf(t->answer_model, sizeof t->answer_model, "%s", t->conf->model ? t->conf->model : "");
    t->answer =
        tui_view_answer_begin(t->view, t->answer_model[0] ? t->answer_model : NULL, when);
    tui_view_end(t->view);
    if (tui_tools_pending(t)) /* the MCP servers are still starting: it leaves when they are */
        tui_tools_wait(t, prompt);
    else
        tui_send_go(t, prompt);
    return 0;
}

void tui_send_go(struct tui *t, const char *prompt)
{
    double tn = util_now();
    tui_status_send(&t->st, tn);
    t->ctx_base_ok = 0;
    t->ctx_stale = 0;
    if (t->trace) {
        fprintf(t->trace, "S %.6f\n", tn);
        tui_trace_cpu(t, 0);
    }
    session_send(t->s, prompt);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
    t->urgent = 1;
}

void tui_cancel(struct tui *t)
{
    if (t->send_wait) { /* not sent yet: it goes back to the input line */
        tui_tools_wait_cancel(t);
        return;
    }
    if (t->answer == TUI_NO_ANSWER || t->cancelling)
        return;
    t->cancelling = 1;
    session_cancel(t->s);
    tui_status_state(&t->st, TUI_STATE_CANCELLING, 0);
    t->dirty |= TUI_D_STATUS;
}

void tui_redraw_now(struct tui *t)
{
    t->dirty |= TUI_D_STATUS | TUI_D_VIEW;
    tui_frame(t);
}

/* ---- input ---- */

/* Ctrl-D or /quit: quit, but while an answer streams only when asked again within 2 s (until
 * 2026-12 it quit at once, the answer cut off without a word; Ctrl-C already asked twice) */
void tui_quit(struct tui *t)
{
    double now = util_now();
    if (t->answer != TUI_NO_ANSWER &&
        !(t->quit_asked_at > 0 && now - t->quit_asked_at <= TUI_CTRL_C_QUIT)) {
        t->quit_asked_at = now;
        tui_hint(t, TUI_HINT_QUIT);
        return;
    }
    t->quit = 1;
}

/* 1 when line holds nothing but spaces, tabs and new lines. */
static int tui_blank(const char *line)
{
    return line[strspn(line, " \t\r\n")] == '\0';
}

/* A command typed after a prompt that came back to the input line ("not sent: ... Raise the
 * cap with /budget N"): until 2026-12 the two were one line, sent as a message ("my
 * question/budget 50k"). The command runs and the prompt stays in the input line. 1 when line
 * was that. */
static int tui_offered_cmd(struct tui *t, const char *line)
{
    char *off = t->offered;
    t->offered = NULL;
    size_t k = off ? strlen(off) : 0;
    if (!off || strncmp(line, off, k) != 0 || line[k] != '/' || line[k + 1] == '/' ||
        strchr(line + k, '\n') || !tui_cmd_known(line + k)) {
        free(off);
        return 0;
    }
    tui_input_history_add(line + k);
    tui_cmd_run(t, line + k);
    if (tui_input_deferring()) { /* the command keeps a line of its own (/edit's prompt) */
        tui_input_history_add(off);
        free(off);
        return 1;
    }
    tui_input_defer(off); /* in the next fresh line */
    t->offered = off;     /* another command may follow */
    return 1;
}

static void tui_on_line(void *ud, char *line)
{
    struct tui *t = ud;
    if (t->ask && tui_ask_line(t, line))
        return; /* an edited command or arguments */
    if (!line) { /* Ctrl-D on an empty line */
        tui_quit(t);
        return;
    }
    if (tui_blank(line)) {
        /* a blank prompt is an empty one: sent, it cost a request for nothing (Anthropic
         * refuses a text block of whitespace with a 400) */
        if (*line && t->answer == TUI_NO_ANSWER)
            tui_hint(t, "nothing to send: the prompt is blank");
        if (t->answer != TUI_NO_ANSWER &&
            (t->st.state == TUI_STATE_QUOTA || t->st.state == TUI_STATE_RETRYING)) {
            session_send_now(t->s); /* the user sends anyway: no more waiting */
            tui_status_state(&t->st, TUI_STATE_WAITING, 0);
            tui_hint(t, TUI_HINT_SENT_NOW);
            t->dirty |= TUI_D_STATUS;
        } else if (t->no_key && t->local_url)
            tui_use_local(t);
        free(line);
        return;
    }
    if (tui_offered_cmd(t, line)) {
        free(line);
        return;
    }
    /* a command is one line: text of several (a paste of a traceback that starts with a path)
     * is a prompt, sent as typed (until 2026-12 its first word was taken for a command, and
     * the whole text left the input line on "unknown command") */
    size_t body = strlen(line); /* a pasted "/help" with its newline is still one line */
    while (body && (line[body - 1] == '\n' || line[body - 1] == '\r'))
        body--;
    int one_line = !memchr(line, '\n', body);
    if (one_line && line[0] == '/' && line[1] != '/') {
        line[body] = '\0';
        tui_input_history_add(line);
        tui_cmd_run(t, line);
        free(line);
        return;
    }
    const char *text = one_line && line[0] == '/' ? line + 1 : line; /* "//x" sends "/x" */
    if (t->answer != TUI_NO_ANSWER) {
        tui_input_defer(line); /* keep what was typed */
        tui_hint(t, tui_hint_busy(t));
        free(line);
        return;
    }
    if (t->have_session && session_conv_moved(t->s) &&
        tui_reload(t, "Your message was not sent: press Enter to send it after what was "
                      "added.") == 0) {
        /* another tokterm added to this conversation (`--conversation N -p` from a script):
         * sent now, this prompt would have left its turn off the live path, unseen here and
         * never sent again. Shown first, as it is saved; the prompt waits for Enter. (When it
         * cannot be read again, the prompt goes as it would have, said.) */
        tui_input_defer(line);
        free(line);
        return;
    }
    if (t->edit_pending && t->have_session) {
        /* /edit: the new prompt is a new version of the last turn, which leaves the live path
         * (and the transcript) but stays saved */
        t->edit_pending = 0;
        if (session_fork_last(t->s) == 0)
            tui_view_drop_last_turn(t);
    }
    tui_input_history_add(line);
    if (tui_send(t, text, 1) < 0)
        tui_input_defer(line);
    free(line);
}

const char *tui_hint_busy(const struct tui *t)
{
    int waits = t->st.state == TUI_STATE_QUOTA || t->st.state == TUI_STATE_RETRYING;
    return t->send_wait ? TUI_HINT_TOOLS ", then press Enter"
           : waits      ? TUI_HINT_WAITING "; your text waits here for after it"
                        : TUI_HINT_STREAMING ", then press Enter";
}

static const char *const *tui_on_complete(void *ud, const char *line, int start, int end)
{
    return tui_cmd_complete(ud, line, start, end);
}

/* Tab's list of completions: on the status line when it fits there, else into the
 * transcript, where it wraps (until 2026-12 a long list was cut at the window's edge: /help's
 * last commands could not be seen). */
static void tui_on_matches(void *ud, const char *text)
{
    struct tui *t = ud;
    if (tui_draw_width(text, strlen(text)) < t->cols - 1) {
        tui_hint(t, text);
        return;
    }
    tui_meta(t, text);
    tui_hint(t, "completions: see above");
}

/* Read keys that are already waiting (or arrive within timeout_ms) into readline's queue
 * without interpreting them: readline asked for more (the rest of a bracketed paste). */
static void tui_on_more(void *ud, int timeout_ms)
{
    struct tui *t = ud;
    wtimeout(t->keys, timeout_ms);
    int c = wgetch(t->keys);
    wtimeout(t->keys, 0);
    while (c != ERR) {
        tui_input_push_key(c);
        c = wgetch(t->keys);
    }
}

static void tui_search_key(struct tui *t, int c)
{
    if (c == '\r' || c == '\n' || c == KEY_ENTER) {
        tui_view_search(t->view, buf_str(&t->query));
        t->search = 2; /* n / N move between the hits */
        t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
        return;
    }
    if (c == 27 || c == 3 || c == 7) {
        t->search = 0;
        tui_view_search_end(t->view);
        t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
        return;
    }
    if (c == KEY_BACKSPACE || c == 127 || c == 8) {
        while (t->query.len && ((unsigned char)t->query.data[t->query.len - 1] & 0xC0) == 0x80)
            t->query.len--;
        if (t->query.len)
            t->query.len--;
        if (t->query.data)
            t->query.data[t->query.len] = '\0';
        t->dirty |= TUI_D_INPUT;
        return;
    }
    if (c == 21) { /* Ctrl-U */
        buf_reset(&t->query);
        t->dirty |= TUI_D_INPUT;
        return;
    }
    if (c >= 0x20 && c < 256 && c != 127) {
        buf_appendc(&t->query, (char)c);
        t->dirty |= TUI_D_INPUT;
    }
}

static void tui_key(struct tui *t, int c);
static void tui_help_close(struct tui *t);

/* Keys curses may not know (terminfo and tmux disagree on Home/End, for one): the rest of an
 * escape sequence is read and matched here; anything else goes to readline as it came. */
static const struct {
    const char *seq;
    int key;
} tui_escapes[] = {
    {"[1~", KEY_HOME}, {"[7~", KEY_HOME}, {"[H", KEY_HOME}, {"OH", KEY_HOME},
    {"[4~", KEY_END}, {"[8~", KEY_END}, {"[F", KEY_END}, {"OF", KEY_END},
    {"[5~", KEY_PPAGE}, {"[6~", KEY_NPAGE}, {"[1;2A", KEY_SR}, {"[1;2B", KEY_SF},
    {"[1;5H", TUI_KEY_CHOME}, {"[1;5F", TUI_KEY_CEND}, {"[11~", KEY_F(1)}, {"OP", KEY_F(1)},
    {"[12~", KEY_F(2)}, {"OQ", KEY_F(2)},
};

static void tui_key_escape(struct tui *t)
{
    int seq[24], n = 0;
    int c = wgetch(t->keys);
    if (c == ERR) { /* Esc alone */
        if (t->help) {
            tui_help_close(t);
            return;
        }
        if (t->hist) {
            tui_hist_key(t, 27);
            return;
        }
        if (t->ask && tui_ask_key(t, 27))
            return;
        if (t->answer != TUI_NO_ANSWER) {
            tui_cancel(t);
            return;
        }
        if (tui_input_vi() || tui_input_busy()) {
            /* vi: to command mode; or leave a Ctrl-R search the readline way */
            tui_input_push_key(27);
            tui_input_run();
        }
        return; /* emacs: a lone Esc would turn the next key into Meta-key; ignore it */
    }
    seq[n++] = c;
    if (c == '[' || c == 'O') {
        /* a CSI (parameters, intermediates, a final byte) or an SS3 sequence */
        while (n < (int)TT_ARRAY_LEN(seq)) {
            int last = seq[n - 1];
            if (n > 1 && (c == 'O' || (last >= 0x40 && last <= 0x7E)))
                break;
            int d = wgetch(t->keys);
            if (d == ERR)
                break;
            seq[n++] = d;
            if (d < 0x20 || d > 0x7E)
                break;
        }
    }
    char text[32];
    int k = 0;
    for (int i = 0; i < n && i < 31; i++)
        text[k++] = seq[i] >= 0 && seq[i] < 256 ? (char)seq[i] : '?';
    text[k] = '\0';
    for (size_t i = 0; i < TT_ARRAY_LEN(tui_escapes); i++)
        if (strcmp(text, tui_escapes[i].seq) == 0) {
            tui_key(t, tui_escapes[i].key);
            return;
        }
    if (t->hist) { /* the browser has no Alt- keys: Esc then the key, typed quickly */
        if (n == 1 && seq[0] != '[' && seq[0] != 'O') {
            tui_hist_key(t, 27);
            if (seq[0] != 27)
                tui_key(t, seq[0]);
            else if (t->hist)
                tui_hist_key(t, 27);
        }
        return; /* an unknown CSI / SS3 sequence: nothing */
    }
    tui_input_push_key(27);
    for (int i = 0; i < n; i++)
        tui_input_push_key(seq[i]);
    tui_input_run();
}

/* Handle one key from curses. */
/* A key while the transcript search has found something: n / N / Ctrl-S move through the
 * matches; any other key ends the search (Esc, Enter, q, Ctrl-C and Ctrl-G only that). 1 when
 * the key is used up. */
static int tui_key_found(struct tui *t, int c)
{
    if (c == 'n' || c == 19 || c == 'N') {
        tui_view_search_step(t->view, c == 'N' ? 1 : -1);
        t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
        return 1;
    }
    t->search = 0;
    tui_view_search_end(t->view);
    t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
    return c == 27 || c == '\r' || c == 'q' || c == 3 || c == 7;
}

/* F1: the help over the transcript (the transcript itself does not change), from its top. */
static void tui_help_open(struct tui *t)
{
    if (t->help)
        return;
    t->help = tui_view_new();
    const char *h = tui_cmd_help();
    tui_view_add(t->help, TUI_MSG_NOTICE, h, strlen(h));
    if (t->view_h > 0)
        tui_view_draw(t->help, t->wview, t->cols, t->view_h); /* laid out: home is its top */
    tui_view_home(t->help);
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}

static void tui_help_close(struct tui *t)
{
    tui_view_free(t->help);
    t->help = NULL;
    t->dirty |= TUI_D_VIEW | TUI_D_STATUS;
}

/* A key while the help is open: F1 closes it, the scrolling keys scroll it; any other key
 * closes it and goes on (0). Esc comes through tui_key_escape. */
static int tui_help_key(struct tui *t, int c)
{
    switch (c) {
    case KEY_F(1):
        tui_help_close(t);
        return 1;
    case KEY_PPAGE:
    case KEY_NPAGE:
        tui_view_page(t->help, c == KEY_PPAGE ? -1 : 1);
        break;
    case KEY_UP:
    case KEY_DOWN:
        tui_view_scroll(t->help, c == KEY_UP ? -1 : 1);
        break;
    case KEY_HOME:
        tui_view_home(t->help);
        break;
    case KEY_END:
        tui_view_end(t->help);
        break;
    case KEY_RESIZE:
    case 12: /* Ctrl-L */
    case 26: /* Ctrl-Z */
        return 0;
    default:
        tui_help_close(t);
        return 0;
    }
    t->dirty |= TUI_D_VIEW;
    return 1;
}

/* Keys that move the transcript, help and the browser. 1 when the key is used up. */
static int tui_key_view(struct tui *t, int c)
{
    switch (c) {
    case KEY_RESIZE:
        tui_resize(t);
        return 1;
    case KEY_F(1):
        tui_help_open(t);
        return 1;
    case KEY_F(2):
        tui_hist_open(t, NULL);
        return 1;
    case KEY_PPAGE:
        tui_view_page(t->view, -1);
        t->dirty |= TUI_D_VIEW;
        return 1;
    case KEY_NPAGE:
        tui_view_page(t->view, 1);
        t->dirty |= TUI_D_VIEW;
        return 1;
    case KEY_SR:
        tui_view_scroll(t->view, -1);
        t->dirty |= TUI_D_VIEW;
        return 1;
    case KEY_SF:
        tui_view_scroll(t->view, 1);
        t->dirty |= TUI_D_VIEW;
        return 1;
    case KEY_HOME:
    case KEY_END:
        if (tui_input_empty()) {
            if (c == KEY_HOME)
                tui_view_home(t->view);
            else
                tui_view_end(t->view);
            t->dirty |= TUI_D_VIEW;
            return 1;
        }
        return 0;
    case KEY_MOUSE: {
        MEVENT ev;
        if (getmouse(&ev) == OK) {
            if (ev.bstate & BUTTON4_PRESSED)
                tui_view_scroll(t->view, -3);
#ifdef BUTTON5_PRESSED
            else if (ev.bstate & BUTTON5_PRESSED)
                tui_view_scroll(t->view, 3);
#endif
            t->dirty |= TUI_D_VIEW;
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* Control keys of the chat: cancel, search, redraw, suspend, Esc. 1 when used up. */
static int tui_key_control(struct tui *t, int c)
{
    switch (c) {
    case 3: /* Ctrl-C: cancel the answer, else clear the line; on an empty one, say how to
               quit, and quit when it comes again within 2 s */
        if (t->answer != TUI_NO_ANSWER) {
            tui_cancel(t);
        } else if (tui_input_empty() && !t->edit_pending) {
            double now = util_now();
            if (t->ctrl_c_at > 0 && now - t->ctrl_c_at <= TUI_CTRL_C_QUIT)
                t->quit = 1;
            t->ctrl_c_at = now;
            tui_hint(t, "Ctrl-D or /quit to quit (or Ctrl-C again within 2 s)");
        } else {
            if (tui_input_discard())
                tui_hint(t, "prompt cleared: Ctrl-Y brings it back");
            t->edit_pending = 0;
            t->ctrl_c_at = 0;
        }
        t->dirty |= TUI_D_INPUT;
        return 1;
    case 19: /* Ctrl-S: search the transcript */
        t->search = 1;
        buf_reset(&t->query);
        t->dirty |= TUI_D_INPUT;
        return 1;
    case 12: /* Ctrl-L */
        t->dirty |= TUI_D_FULL;
        return 1;
    case 26: /* Ctrl-Z */
        tui_suspend_curses(t);
        raise(SIGTSTP);
        tui_resume_curses(t);
        return 1;
    case 27: /* Esc alone, an Alt- key, or a sequence curses does not know */
        tui_key_escape(t);
        return 1;
    default:
        return 0;
    }
}

static void tui_key(struct tui *t, int c)
{
    if (t->hint[0]) {
        t->hint[0] = '\0';
        t->dirty |= TUI_D_STATUS;
    }
    t->urgent = 1;
    if (t->hist && c != KEY_RESIZE && c != 27 && c != 12 && c != 26) {
        tui_hist_key(t, c); /* the conversation browser is open */
        return;
    }
    if (t->ask && c != 27 && tui_ask_key(t, c))
        return; /* a question waits for its key (Esc: tui_key_escape) */
    if (c != 3)
        t->ctrl_c_at = 0;
    if (t->help && c != 27 && tui_help_key(t, c))
        return;
    if (t->search == 1) {
        tui_search_key(t, c);
        return;
    }
    if (t->search == 2 && tui_key_found(t, c))
        return;
    if (tui_key_view(t, c) || tui_key_control(t, c))
        return;
    const char *name = c >= KEY_MIN ? keyname(c) : NULL;
    if (c == TUI_KEY_CHOME || c == TUI_KEY_CEND ||
        (name && (strcmp(name, "kHOM5") == 0 || strcmp(name, "kEND5") == 0))) {
        if (c == TUI_KEY_CHOME || (name && name[1] == 'H'))
            tui_view_home(t->view);
        else
            tui_view_end(t->view);
        t->dirty |= TUI_D_VIEW;
        return;
    }
    tui_input_push_key(c);
    tui_input_run();
}

static void tui_keys(struct tui *t)
{
    int c;
    while (!t->quit && (c = wgetch(t->keys)) != ERR)
        tui_key(t, c);
    if (tui_input_dirty())
        t->dirty |= TUI_D_INPUT;
}

/* ---- setup and the loop ---- */

static int tui_curses_start(struct tui *t)
{
    const char *esc = getenv("ESCDELAY");
    if (!esc || !*esc)
        set_escdelay(25);
    if (!initscr())
        return -1;
    raw();
    noecho();
    nonl();
    /* No look for typed keys in the middle of doupdate(): ncurses polled stdin every five
     * changed lines (8 poll() calls per frame of the chat at 120x40); keys are read between
     * frames, which are at most 1/60 s apart. */
    typeahead(-1);
    /* One write() per frame, not one per changed line. ncurses 6.4 flushes its output after
     * every cursor move until the screen has once been suspended and resumed (lib_mvcur.c:
     * _nc_mvcur flushes while SP->_endwin is ewInitial, meant for terminfo programs that call
     * mvcur without a screen; only doupdate's resume after endwin sets ewRunning). So each of
     * a frame's lines was a write(2) of ~70 bytes to the pty, ~22 per frame at 80x24, each a
     * trip through the tty layer and a wake-up of the terminal. endwin and doupdate here, before
     * anything is drawn, go through that resume once: the modes set above are kept (raw,
     * noecho and nonl update the program mode that doupdate restores). */
    def_prog_mode();
    endwin();
    doupdate();
    t->keys = newpad(1, 1);
    keypad(t->keys, TRUE);
    nodelay(t->keys, TRUE);
    meta(t->keys, TRUE);
    mousemask(BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
                  | BUTTON5_PRESSED
#endif
              , NULL);
    mouseinterval(0);
    tui_term_modes(1);
    return 0;
}

/* Readline on the input window, with the history file; a failure is said in the transcript. */
static void tui_run_input(struct tui *t)
{
    struct tui_input_ops ops = {
        .ud = t,
        .line = tui_on_line,
        .complete = tui_on_complete,
        .paths = tui_attach_paths,
        .pasted = tui_attach_pasted,
        .matches = tui_on_matches,
        .more = tui_on_more,
        .suspend = tui_suspend_curses,
        .resume = tui_resume_curses,
    };
    char *state = conf_dir("state");
    char *hist = t->o->incognito ? NULL : xasprintf("%s/history", state); /* Up still recalls
                                                                              this run's lines */
    free(state);
    const char *herr = NULL;
    if (tui_input_init(&ops, TUI_PROMPT, hist, &herr) < 0) {
        char *m = xasprintf("%s %s: history is not saved", herr, hist);
        tui_error(t, m);
        free(m);
    }
    free(hist);
}

/* What the chat says before the first key: the locale, the resumed conversation, what to do. */
static void tui_run_greet(struct tui *t, const struct tui_opts *o)
{
    const char *cs = nl_langinfo(CODESET);
    if (!cs || (strcasecmp(cs, "UTF-8") != 0 && strcasecmp(cs, "utf8") != 0))
        tui_error(t, "The locale is not UTF-8 (see LANG / LC_ALL): text beyond ASCII may not "
                     "show. Control characters are still neutralised.");
    if (t->have_session && o->store && o->resume)
        tui_resume(t, o->resume_id, 0);
    if (t->no_key) {
        tui_status_state(&t->st, TUI_STATE_NOKEY, 0);
        tui_no_key_notice(t);
    } else if (!tui_view_count(t->view)) {
        tui_notice(t, "Type a message and press **Enter**. **F1** or `/help` lists the keys and "
                      "commands; **Ctrl-D** quits.");
    }
    if (t->have_session && o->files && o->files->n) {
        tui_notice(t, "These files go with your first message:");
        tui_show_attachments(t, o->files->v, o->files->n);
        session_attach(t->s, o->files);
    }
    if (o->first_prompt && *o->first_prompt)
        tui_send(t, o->first_prompt, 1);
}

/* Milliseconds the loop may sleep: until the next frame is due, the status bar's next tick
 * (*next_tick, monotonic seconds; 0 = none planned) or saved text is due; -1 = until input.
 * Draws the frame first when one is due. */
/* When the next frame is due (tui_pace_due): text waiting is drawn as soon as 120 Hz allows,
 * and at the latest TUI_TEXT_WAIT after the network read it. */
static double tui_frame_due(const struct tui *t)
{
    return tui_pace_due(t->last_frame, t->oldest);
}

/* Milliseconds from now until t (at least 1: poll() takes whole milliseconds). */
static int tui_ms_until(double t, double now)
{
    double ms = (t - now) * 1000;
    return ms <= 1 ? 1 : (int)ms + (ms > (int)ms);
}

static int tui_run_timeout(struct tui *t, const struct session_sink *sink, double *next_tick)
{
    double now = util_now();
    int timeout = -1;
    if (t->dirty) {
        double due = tui_frame_due(t);
        if (t->urgent || now >= due) {
            if (t->have_session) { /* show what arrived while we waited, too */
                session_dispatch(t->s, sink);
                t->last_take = now;
            }
            tui_frame(t);
            now = util_now();
        } else {
            timeout = tui_ms_until(due, now);
        }
    }
    size_t taken = 0, styled = tui_view_styled(t->view, &taken);
    if (styled < taken) {
        /* the text before a large batch's last screenful: styled once the stream pauses or
         * ends (a fast sender's stream is over soon; until then the text on screen goes
         * first), TUI_SLICE at a time while no frame is due */
        now = util_now();
        double quiet = t->answer == TUI_NO_ANSWER ? now : t->last_text + TUI_LAZY_QUIET;
        if (now < quiet) {
            int ms = tui_ms_until(quiet, now);
            if (timeout < 0 || ms < timeout)
                timeout = ms;
        } else if (!t->dirty || now + TUI_COUNT_ROOM < tui_frame_due(t)) {
            if (tui_view_lazy_step(t->view, TUI_SLICE) > 0)
                timeout = 0;
            if (t->trace && tui_view_styled(t->view, &taken) == taken) {
                tui_trace_styled(t);
                tui_trace_cpu(t, 0);
                fflush(t->trace);
            }
        }
    }
    if (t->answer != TUI_NO_ANSWER && t->have_session && session_answer_count_wanted(t->s) &&
        (!t->dirty || util_now() + TUI_COUNT_ROOM < tui_frame_due(t))) {
        /* no usage will count the answer: count what arrived, a step at a time, while no
         * frame is due (the answer's end then counts only its last step) */
        if (session_answer_count_step(t->s, TUI_COUNT_STEP) > 0)
            timeout = 0;
    }
    if (t->ctx_stale && !t->dirty && t->have_session) {
        /* the frame that showed the answer's end is drawn: now the exact count, shown by
         * the next frame */
        t->ctx_stale = 0;
        struct session_status ss;
        session_status(t->s, &ss);
        tui_status_context(&t->st, &ss);
        t->dirty |= TUI_D_STATUS;
        now = util_now();
        double due = tui_frame_due(t);
        timeout = now >= due ? 0 : tui_ms_until(due, now);
    }
    if (t->tools_loader && !t->st.tool[0]) {
        /* the servers are starting: the status bar names the one as soon as it is known */
        tui_tools_status(t, now);
        if (t->st.tool[0])
            t->dirty |= TUI_D_STATUS;
        else if (timeout < 0 || timeout > 20)
            timeout = 20;
    }
    int tick = tui_status_tick(&t->st, now);
    if (tick >= 0) {
        if (*next_tick <= 0)
            *next_tick = now + tick / 1000.0;
        int ms = (int)((*next_tick - now) * 1000) + 1;
        if (ms < 0)
            ms = 0;
        if (timeout < 0 || ms < timeout)
            timeout = ms;
    } else {
        *next_tick = 0;
    }
    int st_ms = t->have_session ? session_timeout_ms(t->s) : -1;
    if (st_ms >= 0 && (timeout < 0 || st_ms < timeout))
        timeout = st_ms;
    return timeout;
}

/* Commit saved text that is due, and say once when the store failed. */
static void tui_run_store(struct tui *t)
{
    if (!t->have_session)
        return;
    session_tick(t->s);
    if (session_store_error(t->s) && !t->store_warned) {
        char *m = xasprintf("the conversation store failed: %s (the chat goes on; this "
                            "conversation may not be saved)", session_store_error(t->s));
        tui_error(t, m);
        free(m);
        t->store_warned = 1;
    }
}

/* The signals the loop caught: resize, cancel the answer (Ctrl-C), or quit. */
static void tui_run_signals(struct tui *t, struct loop *lp)
{
    int resize = 0;
    for (int sig; (sig = loop_signal(lp)) != 0;) {
        if (sig == SIGWINCH || sig == SIGCONT)
            resize = 1;
        else if (sig == SIGINT && t->answer != TUI_NO_ANSWER)
            tui_cancel(t);
        else if (sig == SIGINT)
            t->quit = 1;
        else {
            t->quit = 1;
            t->exit_code = 128 + sig;
        }
    }
    if (resize)
        tui_resize(t);
}

void tui_modal(struct tui *t)
{
    while (t->ask && !t->quit && !t->cancelling) {
        if (t->dirty)
            tui_frame(t);
        int fds[1] = {STDIN_FILENO};
        int n = loop_wait(t->lp, fds, 1, 250);
        if (n < 0)
            break;
        if (n <= 0)
            continue;
        tui_run_signals(t, t->lp);
        short in = loop_ready(t->lp, 0);
        if (in & (POLLIN | POLLHUP | POLLERR)) {
            tui_keys(t);
            if (in & (POLLHUP | POLLERR) && !(in & POLLIN))
                t->quit = 1; /* the terminal went away */
        }
    }
    tui_ask_close(t); /* not answered (quit, cancel): Esc */
}

/* The loop: frames, the network's events, keys and signals, until the chat quits. */
static void tui_run_loop(struct tui *t, struct loop *lp)
{
    t->lp = lp;
    const struct session_sink sink = {
        .ud = t,
        .text = tui_sink_text,
        .headers = tui_sink_headers,
        .end = tui_sink_end,
        .wait = tui_sink_wait,
        .tool_approve = tui_tools_approve,
        .tool_call = tui_tools_call,
        .tool_result = tui_tools_result,
        .quota = tui_sink_quota,
        .warn = tui_sink_warn,
    };
    t->dirty = TUI_D_FULL;
    t->urgent = 1;
    double next_tick = 0;
    while (!t->quit) {
        int timeout = tui_run_timeout(t, &sink, &next_tick);
        /* While text waits for a frame, more of it waits in the queue for TUI_TAKE: taken in
         * batches (or by the frame), not at every wakeup of the network thread */
        int coalesce = 0;
        double now = util_now();
        if (t->oldest > 0 && t->dirty && timeout != 0 && t->last_take + TUI_TAKE > now) {
            int ms = tui_ms_until(t->last_take + TUI_TAKE, now);
            coalesce = 1;
            if (timeout < 0 || ms < timeout)
                timeout = ms;
        }
        int fds[3] = {STDIN_FILENO, t->have_session && !coalesce ? session_fd(t->s) : -1,
                      tui_tools_fd(t)};
        int n = loop_wait(lp, fds, 3, timeout);
        if (n < 0)
            break;
        tui_run_store(t);
        if (next_tick > 0 && util_now() >= next_tick) {
            t->dirty |= TUI_D_STATUS;
            next_tick = 0;
        }
        if (n <= 0)
            continue;
        tui_run_signals(t, lp);
        if (t->have_session && (loop_ready(lp, 1) & POLLIN)) {
            session_dispatch(t->s, &sink);
            t->last_take = util_now();
        }
        if (loop_ready(lp, 2) & POLLIN)
            tui_tools_loaded(t); /* the MCP servers started (or not): a waiting prompt leaves */
        short in = loop_ready(lp, 0);
        if (in & (POLLIN | POLLHUP | POLLERR)) {
            tui_keys(t);
            if (in & (POLLHUP | POLLERR) && !(in & POLLIN))
                t->quit = 1; /* the terminal went away */
        }
    }
}

/* Leave the terminal as it was and free everything of t. */
static void tui_run_end(struct tui *t, struct loop *lp)
{
    if (t->answer != TUI_NO_ANSWER && t->have_session && !t->send_wait)
        session_cancel(t->s);
    tui_hist_close(t);
    tui_input_end();
    tui_term_modes(0);
    endwin();
    loop_end(lp);
    if (t->have_session)
        session_close(t->s);
    t->s = NULL;
    if (t->profile_setup) {
        setup_free(t->profile_setup);
        free(t->profile_setup);
        t->profile_setup = NULL;
    }
    if (t->trace)
        fclose(t->trace);
    delwin(t->wview);
    delwin(t->wstatus);
    delwin(t->winput);
    delwin(t->keys);
    tui_view_free(t->view);
    tui_view_free(t->help);
    theme_free(t->theme);
    buf_free(&t->query);
    tui_cmd_free(t);
    free(t->offered);
    tui_ask_free(t);
    tui_tools_free(t);
    tui_attach_free(t);
    free(t->local_name);
    free(t->local_url);
}

int tui_run(struct conf *conf, char *key, const struct tui_opts *o)
{
    struct tui tt, *t = &tt;
    memset(t, 0, sizeof *t);
    t->conf = conf;
    t->o = o;
    t->answer = TUI_NO_ANSWER;
    t->no_key = o->no_key;
    t->local_name = o->local_name ? xstrdup(o->local_name) : NULL;
    t->local_url = o->local_url ? xstrdup(o->local_url) : NULL;
    const char *nc = getenv("NO_COLOR");
    t->no_color = nc && *nc;
    if (o->trace_path) {
        t->trace = util_fopen_private(o->trace_path);
        if (!t->trace) {
            fprintf(stderr, "tokterm: --trace %s: %s\n", o->trace_path, strerror(errno));
            util_free_secret(key);
            free(t->local_name);
            free(t->local_url);
            return 2;
        }
    }
    /* Whether the answer's copies, written as text arrives (maybe after minutes idle), go in
     * huge pages here: measured now (~20-150 us), not inside the first fast batch. */
    xmalloc_huge_decide();
    /* The signals, before initscr: curses then leaves SIGWINCH to us. */
    static const int sigs[] = {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGCONT};
    struct loop lp;
    const char *lerr = NULL;
    if (loop_init(&lp, sigs, (int)TT_ARRAY_LEN(sigs), 1, &lerr) < 0) {
        fprintf(stderr, "tokterm: %s: %s\n", lerr, strerror(errno));
        util_free_secret(key);
        return 1;
    }
    t->view = tui_view_new();
    tui_view_set_highlight(t->view, conf->highlight);
    tui_view_set_lazy(t->view, 1);
    tui_status_init(&t->st, conf->profile, conf->model);
    tui_status_effort(&t->st, conf->reasoning_effort);
    if (tui_curses_start(t) < 0) {
        loop_end(&lp);
        util_free_secret(key);
        fputs("tokterm: cannot start the terminal interface\n", stderr);
        return 1;
    }
    t->theme = NULL;
    tui_theme(t, conf->theme);
    tui_tools_init(t); /* the tools the model may call: before the session that offers them */
    tui_session(t, key, NULL);
    if (t->have_session && o->setup)
        setup_use_keys(o->setup, t->s); /* `keys =` and `fallback =`, as -p */
    /* the MCP servers start now, off the UI thread, while the first prompt is typed: a
     * server takes a second or more (node), typing takes longer, so the first send rarely
     * waits; a server that fails says so before anything is sent */
    tui_tools_start(t);
    tui_run_input(t);
    tui_run_greet(t, o);
    tui_run_loop(t, &lp);
    tui_run_end(t, &lp);
    return t->exit_code;
}
