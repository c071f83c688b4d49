/* tui_cmd.c - slash commands, their completion, and the help text. */
#include "config.h"
#include "core/models.h"
#include "core/role.h"
#include "core/shellcmd.h"
#include "tui/tui_tools.h"
#include "core/setup.h"
#include "tui/tui_app.h"
#include "tui/tui_history.h"
#include "tui/tui_input.h"
#include "base/util.h"
#include "base/xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Candidates for a command name: every command of tui_cmd_table but the aliases. */
static void tui_cmd_complete_names(struct tui *t);

static const char tui_cmd_help_text[] =
    "## Keys\n"
    "- **Enter** sends; **Alt-Enter** or **Ctrl-J** starts a new line; pasted text keeps its "
    "newlines\n"
    "- **Esc** or **Ctrl-C** cancels a streaming answer (the partial text stays, marked "
    "cancelled); **Ctrl-C** on the prompt clears it (**Ctrl-Y** brings it back)\n"
    "- **Ctrl-D** on an empty prompt quits, as does `/quit`; **Ctrl-C** on an empty prompt "
    "says so, and quits when pressed again within 2 s\n"
    "- **PgUp**/**PgDn**, the mouse wheel, **Shift-Up**/**Shift-Down** scroll; **Home**/**End** "
    "(on an empty prompt) or **Ctrl-Home**/**Ctrl-End** go to the top/bottom; new text is "
    "followed only while the view is at the bottom\n"
    "- The mouse wheel scrolls; hold **Shift** to select text with the mouse\n"
    "- **Ctrl-S** (or `/find TEXT`) searches the transcript: type, **Enter**, then **n** older "
    "hit, **N** newer hit, **Esc** done\n"
    "- **F2** (or `/history`) opens the conversation browser: saved conversations newest "
    "first; **/** searches them as you type; **Enter** reads one (read-only), **r** resumes "
    "it here, **e** renames, **d** deletes (asks first); **Esc** or **q** closes it\n"
    "- **Ctrl-R** searches the prompt history; **Up**/**Down** walk it; **Tab** completes "
    "commands, themes, profiles, roles and models\n"
    "- **Ctrl-X Ctrl-E** edits the prompt in `$EDITOR` (vi mode: **v**); **Ctrl-L** redraws; "
    "**Ctrl-Z** suspends; **F1** shows this over the transcript (**PgUp**/**PgDn** scroll it, "
    "**Esc** or **F1** closes it; `/help` adds it to the transcript)\n"
    "- Editing is readline's: Emacs keys, or vi when `~/.inputrc` says `set editing-mode vi`\n"
    "\n"
    "## Commands\n"
    "- `/model [NAME]`: show or set the model\n"
    "- `/system [TEXT]`: show or set the system prompt (`/system -` removes it)\n"
    "- `/new`: a new conversation\n"
    "- `/retry`: regenerate the last answer\n"
    "- `/edit`: edit the last prompt; **Enter** sends it in place of the old one\n"
    "- `/copy [N]`: copy the last answer, or its code block N, to the clipboard (OSC 52) and "
    "to a file\n"
    "- `/theme [NAME]`: list or switch themes\n"
    "- `/profile [NAME]`: list or switch configuration profiles\n"
    /* an entry is one line, wrapped to the window (until 2026-12 two entries had a line
     * break in them, so at 120 columns their second line started early) */
    "- `/role [NAME]`: show or switch the role (a preset prompt and settings; `tokterm roles`); "
    "`/role none` drops it\n"
    "- `/expand [N]`: show tool call N (default: the last) with its arguments and result\n"
    "- `/x REQUEST`: propose one shell command, then **r** run it (f sends the output back), "
    "**e** edit, **c** copy, **q** or Esc cancel\n"
    "- `/attach PATH`: attach a file, a folder (its text files, `.gitignore` honoured) or a "
    "URL (its text) to the next prompt; **Tab** completes paths; a path pasted (dragged) on an "
    "empty prompt is attached too; `/attach` lists what waits, `/detach N` (or `all`) drops\n"
    "- `/clear`: clear the screen (the conversation goes on; `/new` starts another)\n"
    "- `/find TEXT`: search the transcript\n"
    "- `/history [TEXT]`: browse, search, read, resume, rename or delete saved conversations "
    "(**F2**)\n"
    "- `/context`: what the next request will carry (tokens per message, compression, "
    "calibration) and the session's spend\n"
    "- `/budget [ARG]`: show or set the session budget (`50k`, `$2`, `off`, `tokens off`, "
    "`usd off`)\n"
    "- `/think [low|medium|high|off]`: how hard a reasoning model thinks in the next turns\n"
    "- `/use-local`: use the local server that was found (when there is no key) and a model it "
    "lists\n"
    "- `/quit`: leave (so does **Ctrl-D**)\n"
    "- `//text` sends `/text` as a message; text of several lines is always a message\n";

const char *tui_cmd_help(void)
{
    return tui_cmd_help_text;
}

void tui_cmd_free(struct tui *t)
{
    util_strv_free(t->cands);
    util_strv_free(t->models);
    t->cands = t->models = NULL;
}

static size_t tui_cmd_list_len(char **v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Append s to a NULL-terminated list unless it is there already. */
static char **tui_cmd_list_add(char **v, const char *s)
{
    size_t n = tui_cmd_list_len(v);
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return v;
    v = xrealloc(v, (n + 2) * sizeof(*v));
    v[n] = xstrdup(s);
    v[n + 1] = NULL;
    return v;
}

static int tui_cmd_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tui_cmd_model_seen(struct tui *t, const char *model)
{
    t->models = tui_cmd_list_add(t->models, model);
}

/* Theme names found in the theme directories (sorted; "default" included). */
static char **tui_cmd_themes(void)
{
    char **v = tui_cmd_list_add(NULL, "default");
    char *cfg = conf_dir("config");
    const char *env = getenv("TOKTERM_DATADIR");
    char *dirs[4] = {
        xasprintf("%s/themes", cfg),
        env && *env ? xasprintf("%s/themes", env) : xasprintf("%s/themes", TT_DATADIR),
        xasprintf("%s/themes", TT_SRCDIR),
        NULL,
    };
    free(cfg);
    for (int i = 0; dirs[i]; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n > 6 && strcmp(e->d_name + n - 6, ".theme") == 0 && e->d_name[0] != '.') {
                char *name = xstrndup(e->d_name, n - 6);
                v = tui_cmd_list_add(v, name);
                free(name);
            }
        }
        if (d)
            closedir(d);
        free(dirs[i]);
    }
    if (v)
        qsort(v, tui_cmd_list_len(v), sizeof(*v), tui_cmd_cmp);
    return v;
}

/* Profile names of the configuration file, or NULL for none. */
static char **tui_cmd_profiles(const struct tui *t)
{
    size_t n;
    char **v = conf_file_profile_names(t->conf->path, &n);
    if (!n) {
        free(v);
        return NULL;
    }
    return v;
}

const char *const *tui_cmd_complete(struct tui *t, const char *line, int start, int end)
{
    (void)end;
    util_strv_free(t->cands);
    t->cands = NULL;
    if (line[0] != '/')
        return NULL;
    if (start == 0) {
        tui_cmd_complete_names(t);
        return (const char *const *)t->cands;
    }
    size_t w = strcspn(line, " "), arg = w + strspn(line + w, " ");
    if ((size_t)start != arg)
        return NULL; /* each command takes one argument: after it, Tab offers nothing (until
                      * 2026-12 "/model gpt-4o " Tab gave "/model gpt-4o gpt-4o") */
    if (w == 6 && strncmp(line, "/theme", 6) == 0) {
        t->cands = tui_cmd_themes();
    } else if (w == 8 && strncmp(line, "/profile", 8) == 0) {
        t->cands = tui_cmd_profiles(t);
    } else if (w == 5 && strncmp(line, "/role", 5) == 0) {
        t->cands = role_names(t->conf->path, NULL);
    } else if (w == 7 && strncmp(line, "/budget", 7) == 0) {
        static const char *const args[] = {"off", "tokens off", "usd off", "50k", "$2", NULL};
        for (size_t i = 0; args[i]; i++)
            t->cands = tui_cmd_list_add(t->cands, args[i]);
    } else if (w == 6 && strncmp(line, "/think", 6) == 0) {
        static const char *const args[] = {"low", "medium", "high", "off", NULL};
        for (size_t i = 0; args[i]; i++)
            t->cands = tui_cmd_list_add(t->cands, args[i]);
    } else if (w == 6 && strncmp(line, "/model", 6) == 0) {
        t->cands = tui_cmd_list_add(t->cands, t->conf->model);
        for (size_t i = 0; t->models && t->models[i]; i++)
            t->cands = tui_cmd_list_add(t->cands, t->models[i]);
        struct model_list l = {0}; /* `tokterm models`' cache: no request on a Tab */
        if (models_cached(t->conf, &l) == 0)
            for (size_t i = 0; i < l.n; i++)
                if (models_id_typable(l.v[i].id))
                    t->cands = tui_cmd_list_add(t->cands, l.v[i].id);
        model_list_free(&l);
    }
    return (const char *const *)t->cands;
}

/* ---- /copy ---- */

/* Code block `want` (1-based) of markdown text s: its lines between the fences, into out.
 * Returns the number of blocks seen when it is not found (0 = found). The blocks are the ones
 * the chat shows (markdown.c): a fence opens and closes at any indentation (in a list item,
 * "    ```sh" is one; until 2026-12 /copy took only up to 3 spaces, and such a block had no
 * number), the fence's indentation is taken off its lines, and a line indented 4 spaces
 * without a fence is text there, not code, so it is not a block here either. */
static int tui_cmd_code_block(const char *s, size_t n, int want, struct buf *out)
{
    int seen = 0, in = 0;
    char fch = 0;
    size_t flen = 0, find = 0;
    for (size_t pos = 0; pos < n;) {
        const char *nl = memchr(s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - s) : n;
        const char *l = s + pos;
        size_t len = end - pos, sp = 0, ind, cut;
        while (sp < len && l[sp] == ' ')
            sp++;
        cut = sp < find ? sp : find; /* a code line's spaces the fence's indentation takes off */
        ind = sp;
        while (ind < len && (l[ind] == ' ' || l[ind] == '\t'))
            ind++;
        size_t run = 0;
        while (ind + run < len && (l[ind + run] == '`' || l[ind + run] == '~') &&
               l[ind + run] == l[ind])
            run++;
        if (!in && run >= 3 && !(l[ind] == '`' && memchr(l + ind + run, '`', len - ind - run))) {
            in = 1; /* (a backtick fence's info string has no backticks) */
            fch = l[ind];
            flen = run;
            find = sp;
            seen++;
        } else if (in && run >= flen && l[ind] == fch) {
            size_t k = ind + run;
            while (k < len && (l[k] == ' ' || l[k] == '\t' || l[k] == '\r'))
                k++;
            if (k == len) {
                in = 0;
                if (seen == want)
                    return 0;
            } else if (seen == want) {
                buf_append(out, l + cut, len - cut);
                buf_appendc(out, '\n');
            }
        } else if (in && seen == want) {
            buf_append(out, l + cut, len - cut);
            buf_appendc(out, '\n');
        }
        pos = end + 1;
    }
    return seen >= want ? 0 : (seen ? seen : -1);
}

static int tui_cmd_osc52_ok(void)
{
    const char *term = getenv("TERM");
    if (getenv("TMUX") || getenv("STY"))
        return 1;
    if (!term || !*term || strcmp(term, "dumb") == 0 || strncmp(term, "linux", 5) == 0)
        return 0;
    return 1;
}

static void tui_cmd_copy(struct tui *t, const char *arg)
{
    const struct conv *c = t->have_session ? session_conv(t->s) : NULL;
    size_t i = c ? c->n : 0;
    while (i > 0 && !c->turns[i - 1].answer_len)
        i--;
    if (!i) {
        tui_error(t, "/copy: there is no finished answer to copy yet");
        return;
    }
    const char *text = c->turns[i - 1].answer;
    size_t n = c->turns[i - 1].answer_len;
    struct buf sel = BUF_INIT;
    char what[64] = "the last answer";
    if (arg && *arg) {
        char *endp;
        long k = strtol(arg, &endp, 10);
        if (endp == arg || *endp || k < 1) {
            tui_error(t, "/copy takes the number of a code block: /copy 2");
            return;
        }
        int r = tui_cmd_code_block(text, n, (int)k, &sel);
        if (r != 0) {
            char *m = r < 0 ? xasprintf("/copy %ld: the last answer has no code block", k)
                            : xasprintf("/copy %ld: the last answer has %d code block%s", k, r,
                                        r == 1 ? "" : "s");
            tui_error(t, m);
            free(m);
            buf_free(&sel);
            return;
        }
        snprintf(what, sizeof what, "code block %ld", k);
    } else {
        buf_append(&sel, text, n);
    }
    struct buf msg = BUF_INIT;
    struct buf seq = BUF_INIT;
    if (tui_cmd_osc52_ok() && shellcmd_osc52(&seq, buf_str(&sel), sel.len) == 0) {
        fflush(stdout);
        (void)!write(STDOUT_FILENO, seq.data, seq.len);
        buf_printf(&msg, "Copied %s (%zu bytes) to the clipboard (OSC 52, if the terminal allows "
                         "it)", what, sel.len);
    }
    buf_free(&seq);
    if (t->o->incognito) { /* no file: the clipboard only */
        if (!msg.len)
            buf_printf(&msg, "Not copied: the terminal takes no OSC 52 clipboard sequence, and "
                             "--incognito writes no file (copy.txt)");
        else
            buf_appends(&msg, "; no copy.txt (--incognito)");
        tui_notice(t, buf_str(&msg));
        buf_free(&msg);
        buf_free(&sel);
        return;
    }
    char *dir = conf_dir("state");
    char *path = xasprintf("%s/copy.txt", dir);
    util_mkdir_p(dir, 0700);
    free(dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = fd >= 0;
    for (size_t off = 0; ok && off < sel.len;) {
        ssize_t w = write(fd, sel.data + off, sel.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ok = 0;
        else
            off += (size_t)w;
    }
    if (fd >= 0)
        close(fd);
    if (ok)
        buf_printf(&msg, "%s%s saved to `%s`", msg.len ? "; " : "", msg.len ? "and" : what, path);
    else
        buf_printf(&msg, "%scannot write `%s`", msg.len ? "; " : "", path);
    tui_notice(t, buf_str(&msg));
    buf_free(&msg);
    buf_free(&sel);
    free(path);
}

/* ---- the other commands ---- */

static void tui_cmd_system(struct tui *t, const char *arg)
{
    if (!arg || !*arg) {
        const char *cur = t->have_session ? session_conv(t->s)->system : NULL;
        char *m = cur ? xasprintf("System prompt:\n\n> %s", cur)
                      : xstrdup("No system prompt. Set one with `/system TEXT`.");
        tui_notice(t, m);
        free(m);
        return;
    }
    int clear = strcmp(arg, "-") == 0;
    free(t->conf->system);
    t->conf->system = clear ? NULL : xstrdup(arg);
    if (t->have_session)
        session_set_system(t->s, t->conf->system);
    tui_notice(t, clear ? "System prompt removed." : "System prompt set for the next requests.");
}

void tui_cmd_new(struct tui *t)
{
    tui_cancel(t);
    if (t->have_session)
        session_new_conversation(t->s); /* saved as a new conversation */
    t->answer = TUI_NO_ANSWER;
    t->edit_pending = 0;
    t->ctx_marked = 0;
    tui_tools_forget(t); /* `a` answers hold for one conversation */
    tui_view_truncate(t->view, 0);
    tui_notice(t, "New conversation.");
}

/* The last turn of the conversation, or NULL. */
static const struct conv_turn *tui_cmd_last_turn(struct tui *t)
{
    const struct conv *c = t->have_session ? session_conv(t->s) : NULL;
    return c && c->n ? &c->turns[c->n - 1] : NULL;
}

static void tui_cmd_retry(struct tui *t)
{
    if (t->answer != TUI_NO_ANSWER) {
        tui_hint(t, TUI_HINT_STREAMING);
        return;
    }
    const struct conv_turn *last = tui_cmd_last_turn(t);
    if (!last) {
        tui_error(t, "/retry: there is no prompt to answer again");
        return;
    }
    /* another tokterm added a turn: /retry would have made it a replaced version, unseen */
    if (session_conv_moved(t->s) &&
        tui_reload(t, "/retry was not done: give it again to answer the last turn as it is "
                      "now.") == 0)
        return;
    /* a new version of the last turn: the old one leaves the live path, stays saved */
    char *prompt = xstrdup(last->prompt);
    session_fork_last(t->s);
    tui_view_drop_last_turn(t);
    enum session_cache cache = session_set_cache(t->s, SESSION_CACHE_BYPASS);
    if (cache != SESSION_CACHE_ON) /* a new answer, not the cached one; otherwise as it was */
        session_set_cache(t->s, cache);
    if (tui_send(t, prompt, 1) < 0)
        tui_input_defer(prompt);
    session_set_cache(t->s, cache);
    free(prompt);
}

static void tui_cmd_edit(struct tui *t)
{
    if (t->answer != TUI_NO_ANSWER) {
        tui_hint(t, TUI_HINT_STREAMING);
        return;
    }
    const struct conv_turn *last = tui_cmd_last_turn(t);
    if (!last) {
        tui_error(t, "/edit: there is no prompt to edit");
        return;
    }
    tui_input_defer(last->prompt);
    t->edit_pending = 1;
    /* the turn's files go with the new version: said, since the input line shows only the
     * text (until 2026-12 nothing told that they would be sent again) */
    char *hint = last->n_att
                     ? xasprintf("edit the last prompt (its %zu attached file%s go%s with it); "
                                 "Enter sends it in place of the old one, Ctrl-C gives up",
                                 last->n_att, last->n_att == 1 ? "" : "s",
                                 last->n_att == 1 ? "es" : "")
                     : xstrdup("edit the last prompt; Enter sends it in place of the old one, "
                               "Ctrl-C gives up");
    tui_hint(t, hint);
    free(hint);
}

/* "Theme: NAME. Available: ..." (after a name not found, too). */
static void tui_cmd_theme_list(struct tui *t)
{
    char **v = tui_cmd_themes();
    struct buf b = BUF_INIT;
    buf_printf(&b, "Theme: **%s**. Available:", theme_name(t->theme));
    for (size_t i = 0; v[i]; i++)
        buf_printf(&b, " `%s`", v[i]);
    char *cfg = conf_dir("config"); /* where theme_find looks first (until 2026-12 this named
                                     * ~/.config whatever $XDG_CONFIG_HOME said) */
    buf_printf(&b, "\nUser themes go in `%s/themes/NAME.theme`.", cfg);
    free(cfg);
    tui_notice(t, buf_str(&b));
    buf_free(&b);
    util_strv_free(v);
}

static void tui_cmd_theme(struct tui *t, const char *arg)
{
    if (!arg || !*arg || tui_theme(t, arg) < 0) {
        tui_cmd_theme_list(t);
        return;
    }
    free(t->conf->theme);
    t->conf->theme = xstrdup(arg);
    char *m = xasprintf("Theme **%s**.", theme_name(t->theme));
    tui_notice(t, m);
    free(m);
}

static void tui_cmd_profile(struct tui *t, const char *arg)
{
    if (!arg || !*arg) {
        char **v = tui_cmd_profiles(t);
        struct buf b = BUF_INIT;
        buf_printf(&b, "Profile: **%s**.", t->conf->profile ? t->conf->profile : "(none)");
        if (v) {
            buf_appends(&b, " Available:");
            for (size_t i = 0; v[i]; i++)
                buf_printf(&b, " `%s`", v[i]);
        } else {
            buf_printf(&b, " No profiles in %s.", t->conf->path ? t->conf->path
                                                                 : "a configuration file");
        }
        tui_notice(t, buf_str(&b));
        buf_free(&b);
        util_strv_free(v);
        return;
    }
    if (t->answer != TUI_NO_ANSWER) {
        tui_hint(t, TUI_HINT_STREAMING);
        return;
    }
    if (!t->conf->path) {
        tui_error(t, "/profile: no configuration file was read");
        return;
    }
    /* the new profile through the same setup as -p: its key, key pool and fallback */
    struct setup *ns = xcalloc(1, sizeof *ns);
    conf_defaults(&ns->conf);
    ns->have_conf = 1;
    struct buf err = BUF_INIT, warn = BUF_INIT;
    char *why = NULL;
    if (conf_load(&ns->conf, t->conf->path, arg, &err, &warn) < 0) {
        why = xasprintf("/profile %s: %s", arg, buf_str(&err));
    } else if (ns->conf.role && setup_role(ns, ns->conf.role, t->conf->path, arg, &err) < 0) {
        why = xasprintf("/profile %s: %s", arg, buf_str(&err)); /* the profile's role = */
    } else {
        conf_apply_env(&ns->conf);
        if (!ns->conf.profile || strcmp(ns->conf.profile, arg) != 0) {
            why = xasprintf("/profile: there is no profile '%s'", arg);
        } else {
            buf_reset(&err);
            struct cli none;
            memset(&none, 0, sizeof none);
            if (setup_keys(ns, &none, &err) < 0)
                why = xasprintf("/profile %s: %s", arg, buf_str(&err));
        }
    }
    if (why) {
        tui_error(t, why);
        free(why);
        setup_free(ns);
        free(ns);
        buf_free(&err);
        buf_free(&warn);
        return;
    }
    /* carry the conversation over to a session for the new profile */
    struct conv carry;
    struct session_spend spend = {0};
    conv_init(&carry);
    if (t->have_session)
        conv_copy(&carry, session_conv(t->s));
    if (t->have_session) {
        /* and what the chat spent (until 2026-12 /profile began the budget again at 0) */
        session_spend_get(t->s, &spend);
        session_close(t->s);
    }
    t->s = NULL;
    t->have_session = 0;
    conf_free(t->conf);
    *t->conf = ns->conf; /* the profile moves to the chat; the fallback stays in ns */
    memset(&ns->conf, 0, sizeof ns->conf);
    ns->have_conf = 0;
    char *key = ns->key;
    ns->key = NULL;
    t->no_key = ns->no_key;
    if (tui_session(t, key, &carry) == 0) {
        setup_use_keys(ns, t->s);
        session_spend_carry(t->s, &spend);
    }
    conv_free(&carry);
    if (t->profile_setup) /* the fallback profile the old session borrowed */
        setup_free(t->profile_setup);
    free(t->profile_setup);
    t->profile_setup = ns;
    tui_status_model(&t->st, t->conf->profile, t->conf->model);
    tui_status_effort(&t->st, t->conf->reasoning_effort);
    tui_status_state(&t->st, t->no_key ? TUI_STATE_NOKEY : TUI_STATE_IDLE, 0);
    if (warn.len)
        tui_error(t, buf_str(&warn));
    char *m = xasprintf("Profile **%s**: `%s` at `%s`.", arg, t->conf->model, t->conf->base_url);
    tui_notice(t, m);
    free(m);
    if (t->no_key)
        tui_no_key_notice(t);
    buf_free(&err);
    buf_free(&warn);
}

/* The chat after a role was set (name from source), or dropped (name NULL). */
static void tui_cmd_role_applied(struct tui *t, const char *name, const char *source)
{
    if (t->have_session) {
        session_set_system(t->s, t->conf->system);
        session_role_changed(t->s); /* a resume takes it again */
    }
    t->conf->role_given = 0; /* this conversation's: another one resumed takes its own */
    tui_status_model(&t->st, t->conf->profile, t->conf->model);
    tui_status_effort(&t->st, t->conf->reasoning_effort);
    t->dirty |= TUI_D_STATUS;
    char *m = name ? xasprintf("Role **%s** (%s) for the next requests: `%s`.", name, source,
                               t->conf->model)
                   : xasprintf("No role for the next requests: the profile's prompt and "
                               "settings, `%s`.", t->conf->model);
    tui_notice(t, m);
    free(m);
}

static void tui_cmd_role(struct tui *t, const char *arg)
{
    if (!arg || !*arg) {
        char **v = role_names(t->conf->path, NULL);
        struct buf b = BUF_INIT;
        buf_printf(&b, "Role: **%s**.", t->conf->role ? t->conf->role : "(none)");
        buf_appends(&b, v[0] ? " Available:" : " No roles.");
        for (size_t i = 0; v[i]; i++)
            buf_printf(&b, " `%s`", v[i]);
        tui_notice(t, buf_str(&b));
        buf_free(&b);
        util_strv_free(v);
        return;
    }
    struct role r;
    struct buf err = BUF_INIT;
    char *why = NULL;
    if (strcmp(arg, "none") == 0 || strcmp(arg, "off") == 0) {
        if (role_drop(t->conf, &err) < 0) {
            why = xasprintf("/role %s: %s", arg, buf_str(&err));
            tui_error(t, why);
        } else {
            tui_cmd_role_applied(t, NULL, NULL);
        }
        free(why);
        buf_free(&err);
        return;
    }
    if (role_load(&r, arg, t->conf->path, &err) < 0) {
        why = xasprintf("/role: %s", buf_str(&err));
    } else if (r.profile && (!t->conf->profile || strcmp(r.profile, t->conf->profile) != 0)) {
        tui_cmd_profile(t, r.profile); /* says itself when it cannot */
        if (!t->conf->profile || strcmp(r.profile, t->conf->profile) != 0)
            why = xasprintf("/role %s: its profile '%s' could not be used", arg, r.profile);
    }
    for (size_t i = 0; !why && i < r.n; i++)
        if (strcmp(r.keys[i], "api") == 0 && strcmp(r.values[i], t->conf->api) != 0)
            why = xasprintf("/role %s: it speaks api %s, this chat %s: start tokterm with "
                            "--role %s", arg, r.values[i], t->conf->api, arg);
    buf_reset(&err);
    if (!why && role_apply(t->conf, &r, &err) < 0)
        why = xasprintf("/role %s: %s", arg, buf_str(&err));
    if (why)
        tui_error(t, why);
    else
        tui_cmd_role_applied(t, r.name, r.source);
    free(why);
    role_free(&r);
    buf_free(&err);
}

static void tui_cmd_help_cmd(struct tui *t, const char *arg)
{
    (void)arg;
    tui_notice(t, tui_cmd_help());
}

static void tui_cmd_model(struct tui *t, const char *arg)
{
    char *m;
    if (*arg && strpbrk(arg, " \t")) { /* model names have no blanks: "a b c" is a typo */
        m = xasprintf("/model %s: a model name has no spaces (`/model NAME`)", arg);
        tui_error(t, m);
        free(m);
        return;
    }
    if (*arg) {
        free(t->conf->model);
        t->conf->model = xstrdup(arg);
        t->conf->model_given = 0; /* this conversation's choice: another one resumed takes its
                                     own, as without -m (until 2026-12 it carried over) */
        if (t->answer == TUI_NO_ANSWER) {
            tui_status_model(&t->st, t->conf->profile, t->conf->model);
            m = xasprintf("Model **%s** for the next requests.", arg);
        } else { /* the bar shows the streaming answer's model and window until it ends
                    (until 2026-12 the new one's at once) */
            m = xasprintf("Model **%s** for the next requests (the answer streaming is %s's).",
                          arg, t->answer_model[0] ? t->answer_model : "the old model");
        }
    } else {
        m = xasprintf("Model: **%s** at `%s`. Change it with `/model NAME`.", t->conf->model,
                      t->conf->base_url);
    }
    tui_notice(t, m);
    free(m);
    t->dirty |= TUI_D_STATUS;
}

/* Why a command waits: the answer streams, or the request waits for a retry or quota. */
static void tui_cmd_new_cmd(struct tui *t, const char *arg)
{
    (void)arg;
    if (t->answer != TUI_NO_ANSWER) { /* until 2026-12 it cancelled the answer without a word */
        tui_hint(t, tui_hint_busy(t));
        return;
    }
    tui_cmd_new(t);
}

static void tui_cmd_retry_cmd(struct tui *t, const char *arg)
{
    (void)arg;
    tui_cmd_retry(t);
}

static void tui_cmd_edit_cmd(struct tui *t, const char *arg)
{
    (void)arg;
    tui_cmd_edit(t);
}

static void tui_cmd_clear(struct tui *t, const char *arg)
{
    (void)arg;
    if (t->answer != TUI_NO_ANSWER) { /* it cut the answer's start off the screen, while /copy */
        tui_hint(t, tui_hint_busy(t)); /* and the next request still had it */
        return;
    }
    tui_view_truncate(t->view, 0);
    t->dirty |= TUI_D_VIEW;
}

static void tui_cmd_find(struct tui *t, const char *arg)
{
    buf_reset(&t->query);
    if (!*arg) {
        t->search = 1;
    } else {
        buf_appends(&t->query, arg);
        size_t n = tui_view_search(t->view, arg);
        t->search = 2;
        if (!n)
            tui_hint(t, "no hits");
    }
    t->dirty |= TUI_D_VIEW | TUI_D_INPUT;
}

static void tui_cmd_history(struct tui *t, const char *arg)
{
    tui_hist_open(t, arg);
}

static void tui_cmd_context(struct tui *t, const char *arg)
{
    (void)arg;
    char *r = session_context_report(t->s);
    tui_meta(t, r);
    free(r);
    t->dirty |= TUI_D_STATUS;
}

static void tui_cmd_budget(struct tui *t, const char *arg)
{
    char *m = NULL;
    if (session_budget_command(t->s, arg, &m) < 0)
        tui_error(t, m); /* it names /budget */
    else
        tui_meta(t, m);
    free(m);
    t->dirty |= TUI_D_STATUS;
}

/* /think [low|medium|high|off]: the reasoning effort of the next requests (--reasoning-effort). */
static void tui_cmd_think(struct tui *t, const char *arg)
{
    struct buf err = BUF_INIT;
    const char *e = strcmp(arg, "off") == 0 ? "none" : arg;
    char *m;
    if (!*arg) {
        const char *now = t->conf->reasoning_effort;
        m = xasprintf("Reasoning effort: **%s**. Change it with `/think low|medium|high|off`.",
                      now && *now ? now : "none");
    } else if (conf_set(t->conf, "reasoning_effort", e, &err) < 0) {
        m = xasprintf("/think takes low, medium, high or off, not '%s'", arg);
        tui_error(t, m);
        free(m);
        buf_free(&err);
        return;
    } else {
        tui_status_effort(&t->st, e);
        m = strcmp(e, "none") == 0 ? xstrdup("Reasoning effort **off** for the next requests.")
                                   : xasprintf("Reasoning effort **%s** for the next requests.", e);
    }
    buf_free(&err);
    tui_notice(t, m);
    free(m);
    t->dirty |= TUI_D_STATUS;
}

static void tui_cmd_use_local(struct tui *t, const char *arg)
{
    (void)arg;
    tui_use_local(t);
}

static void tui_cmd_quit(struct tui *t, const char *arg)
{
    (void)arg;
    tui_quit(t);
}

/* The chat's commands: name, whether it needs a session, alias (not offered by Tab: another
 * name of the command before it), idle (it waits for the answer in flight: the line stays in
 * the input line for after it; 2: only when given an argument, as /profile alone lists), the
 * handler (its argument trimmed). */
static const struct tui_cmd_entry {
    const char *name;
    int needs_session, alias, idle;
    void (*run)(struct tui *t, const char *arg);
} tui_cmd_table[] = {
    {"/help", 0, 0, 0, tui_cmd_help_cmd},
    {"/?", 0, 1, 0, tui_cmd_help_cmd},
    {"/model", 0, 0, 0, tui_cmd_model},
    {"/system", 0, 0, 0, tui_cmd_system},
    {"/new", 0, 0, 1, tui_cmd_new_cmd},
    {"/retry", 0, 0, 1, tui_cmd_retry_cmd},
    {"/edit", 0, 0, 1, tui_cmd_edit_cmd},
    {"/copy", 0, 0, 0, tui_cmd_copy},
    {"/theme", 0, 0, 0, tui_cmd_theme},
    {"/profile", 0, 0, 2, tui_cmd_profile},
    {"/clear", 0, 0, 1, tui_cmd_clear},
    {"/find", 0, 0, 0, tui_cmd_find},
    {"/history", 0, 0, 0, tui_cmd_history},
    {"/context", 1, 0, 0, tui_cmd_context},
    {"/budget", 1, 0, 0, tui_cmd_budget},
    {"/use-local", 0, 0, 0, tui_cmd_use_local},
    {"/think", 0, 0, 0, tui_cmd_think},
    {"/role", 0, 0, 0, tui_cmd_role},
    {"/x", 1, 0, 2, tui_shell_cmd},
    {"/expand", 0, 0, 0, tui_tool_expand},
    {"/attach", 0, 0, 0, tui_attach_cmd},
    {"/detach", 0, 0, 0, tui_detach_cmd},
    {"/quit", 0, 0, 0, tui_cmd_quit},
    {"/exit", 0, 1, 0, tui_cmd_quit},
    {"/q", 0, 1, 0, tui_cmd_quit},
};

static void tui_cmd_complete_names(struct tui *t)
{
    for (size_t i = 0; i < TT_ARRAY_LEN(tui_cmd_table); i++)
        if (!tui_cmd_table[i].alias)
            t->cands = tui_cmd_list_add(t->cands, tui_cmd_table[i].name);
}

int tui_cmd_known(const char *line)
{
    size_t n = strcspn(line, " \t");
    for (size_t i = 0; i < TT_ARRAY_LEN(tui_cmd_table); i++)
        if (strlen(tui_cmd_table[i].name) == n && memcmp(line, tui_cmd_table[i].name, n) == 0)
            return 1;
    return 0;
}

void tui_cmd_run(struct tui *t, const char *line)
{
    char *copy = xstrdup(line);
    char *arg = copy + strcspn(copy, " \t");
    if (*arg)
        *arg++ = '\0';
    arg = util_trim(arg);
    const char *cmd = copy;
    size_t i = 0;
    while (i < TT_ARRAY_LEN(tui_cmd_table) && strcmp(cmd, tui_cmd_table[i].name) != 0)
        i++;
    if (i == TT_ARRAY_LEN(tui_cmd_table)) {
        char *m = xasprintf("unknown command %s (F1 or /help lists the commands; //text sends "
                            "/text)", cmd);
        tui_error(t, m);
        free(m);
        tui_input_defer(line); /* the line stays to be mended, as /attach's (until 2026-12 it
                                * was gone: only Up brought it back) */
    } else if (tui_cmd_table[i].idle && (tui_cmd_table[i].idle == 1 || *arg) &&
               t->answer != TUI_NO_ANSWER) {
        /* kept for after the answer, as text typed then is (until 2026-12 it was dropped) */
        tui_input_defer(line);
        tui_hint(t, tui_hint_busy(t));
    } else if (tui_cmd_table[i].needs_session && !t->have_session) {
        char *m = xasprintf("%s: there is no session (no key or server)", cmd);
        tui_error(t, m);
        free(m);
    } else {
        tui_cmd_table[i].run(t, arg);
    }
    free(copy);
}
