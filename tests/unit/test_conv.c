/* test_conv.c - the conversation model: turns, what is sent, /edit and /retry as versions, and
 * the live path rebuilt from saved rows (old flat conversations and trees). */
#include "config.h"
#include "core/conv.h"
#include "proto/tool.h"
#include "store/store.h"
#include "tap.h"
#include "base/utf8.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

/* Rows of a saved conversation, built by hand. */
struct rows {
    struct store_conversation sc;
    struct store_message m[32];
};

static void row(struct rows *r, int64_t id, const char *role, const char *content,
                int64_t parent, enum store_status st, const char *error)
{
    struct store_message *m = &r->m[r->sc.n_messages++];
    memset(m, 0, sizeof *m);
    m->id = id;
    m->role = (char *)role;
    m->content = (char *)content;
    m->content_len = strlen(content);
    m->parent_id = parent;
    m->status = st;
    m->error = (char *)error;
    r->sc.messages = r->m;
}

static char *transcript(const struct conv *c)
{
    struct buf b = BUF_INIT;
    conv_transcript(c, &b);
    return buf_take(&b);
}

/* The messages a request would carry (roles and texts joined): the sent turns only. */
static char *sent(const struct conv *c)
{
    struct buf b = BUF_INIT;
    for (size_t i = 0; i < c->n; i++)
        if (conv_turn_sent(&c->turns[i]))
            buf_printf(&b, "u:%s a:%s ", c->turns[i].prompt, c->turns[i].answer);
    return buf_take(&b);
}

static void test_live(void)
{
    struct conv c;
    conv_init(&c);
    conv_set_system(&c, "be brief");
    struct conv_turn *t = conv_push(&c, "alpha", 5);
    TAP_OK(t->outcome == CONV_PENDING && t->user_id < 0, "a pushed turn is pending, unsaved");
    conv_settle(t, CONV_ANSWERED, "A", 1, NULL, "m1");
    t = conv_push(&c, "beta", 4);
    conv_settle(t, CONV_REFUSED, NULL, 0, "over budget", NULL);
    t = conv_push(&c, "gamma", 5);
    conv_settle(t, CONV_FAILED, NULL, 0, "HTTP 500", NULL);
    t = conv_push(&c, "delta", 5);
    conv_settle(t, CONV_INTERRUPTED, NULL, 0, "cancelled", NULL);
    t = conv_push(&c, "eps", 3);
    conv_settle(t, CONV_INTERRUPTED, "E-part", 6, "cancelled", NULL);
    t = conv_push(&c, "zeta", 4);
    conv_settle(t, CONV_CUT, "Z", 1, "length", NULL);
    char *s = sent(&c);
    TAP_STR(s, "u:alpha a:A u:eps a:E-part u:zeta a:Z ",
            "refused, failed and empty interrupted turns are never sent");
    free(s);
    s = transcript(&c);
    TAP_STR(s, "system: be brief\nuser: alpha\nassistant: A\nuser: beta\nrefused: over budget\n"
               "user: gamma\nfailed: HTTP 500\nuser: delta\ninterrupted: cancelled\n"
               "user: eps\nassistant (interrupted): E-part\nuser: zeta\nassistant (cut): Z\n",
            "the transcript shows every turn with its outcome");
    free(s);

    /* /retry of the last turn: a second version; /edit of that: a third */
    TAP_INT(conv_fork(&c, c.n - 1), 2, "fork: the replacement is version 2");
    TAP_INT(c.n, 5, "fork: the live path ends before the turn");
    t = conv_push(&c, "zeta", 4);
    TAP_OK(t->version == 2 && t->n_versions == 2, "the next turn is version 2 of 2");
    conv_settle(t, CONV_ANSWERED, "Z2", 2, NULL, NULL);
    TAP_INT(conv_fork(&c, c.n - 1), 3, "fork again: version 3");
    t = conv_push(&c, "zeta!", 5);
    conv_settle(t, CONV_ANSWERED, "Z3", 2, NULL, NULL);
    s = sent(&c);
    TAP_STR(s, "u:alpha a:A u:eps a:E-part u:zeta! a:Z3 ", "only the live version is sent");
    free(s);
    TAP_INT(conv_fork(&c, 99), -1, "fork out of range");
    TAP_OK(conv_parent_id(&c, c.n) == 0, "nothing saved: no parent id");

    struct conv d;
    conv_init(&d);
    conv_copy(&d, &c);
    char *a = transcript(&c), *b = transcript(&d);
    TAP_STR(b, a, "conv_copy keeps the live path and the system prompt");
    free(a);
    free(b);
    conv_clear(&d);
    TAP_OK(d.n == 0 && d.system && strcmp(d.system, "be brief") == 0,
           "conv_clear drops the turns, keeps the system prompt");
    conv_free(&d);
    conv_free(&c);
}

static void test_outcome_saved(void)
{
    TAP_OK(conv_outcome_saved(0, 0, NULL, 0, NULL) == CONV_FAILED, "no answer row: failed");
    TAP_OK(conv_outcome_saved(0, 0, NULL, 0, "budget") == CONV_REFUSED,
           "no answer row and an error on the prompt: refused");
    TAP_OK(conv_outcome_saved(1, STORE_COMPLETE, "stop", 3, NULL) == CONV_ANSWERED, "complete");
    TAP_OK(conv_outcome_saved(1, STORE_COMPLETE, "length", 3, NULL) == CONV_CUT, "length: cut");
    TAP_OK(conv_outcome_saved(1, STORE_ERROR, NULL, 0, NULL) == CONV_FAILED,
           "an error without text: failed");
    TAP_OK(conv_outcome_saved(1, STORE_ERROR, NULL, 4, NULL) == CONV_INTERRUPTED,
           "an error after some text: interrupted with the text");
    TAP_OK(conv_outcome_saved(1, STORE_CANCELLED, NULL, 0, NULL) == CONV_INTERRUPTED,
           "cancelled: interrupted");
}

static void test_saved_tree(void)
{
    /* A, a; /edit -> B, b; /retry -> B, b2 (head); an earlier failed turn F before A */
    struct rows r;
    memset(&r, 0, sizeof r);
    r.sc.id = 7;
    row(&r, 1, "user", "F", 0, STORE_COMPLETE, NULL);
    row(&r, 2, "assistant", "", 1, STORE_ERROR, "HTTP 500");
    row(&r, 3, "user", "A", 1, STORE_COMPLETE, NULL);
    row(&r, 4, "assistant", "a", 3, STORE_COMPLETE, NULL);
    row(&r, 5, "user", "B", 1, STORE_COMPLETE, NULL);
    row(&r, 6, "assistant", "b", 5, STORE_COMPLETE, NULL);
    row(&r, 7, "user", "B", 1, STORE_COMPLETE, NULL);
    row(&r, 8, "assistant", "b2", 7, STORE_COMPLETE, NULL);
    row(&r, 9, "user", "R", 7, STORE_COMPLETE, "over budget");
    row(&r, 10, "tool", "tool output", 7, STORE_COMPLETE, NULL);
    r.sc.head_id = 9;
    struct conv c;
    conv_init(&c);
    conv_from_saved(&c, &r.sc, NULL);
    char *s = transcript(&c);
    TAP_STR(s, "user: F\nfailed: HTTP 500\nuser: B\nassistant: b2\nuser: R\nrefused: over budget\n",
            "the live path from the head: earlier versions left out");
    free(s);
    s = sent(&c);
    TAP_STR(s, "u:B a:b2 ", "a resume sends only the live, answered turns");
    free(s);
    TAP_OK(c.n == 3 && c.turns[1].version == 3 && c.turns[1].n_versions == 3,
           "the retried turn is version 3 of 3");
    TAP_OK(c.turns[1].user_id == 7 && c.turns[1].answer_id == 8, "ids of the live turn");
    TAP_INT(conv_parent_id(&c, c.n), 9, "the next turn hangs under the head");
    TAP_INT(conv_parent_id(&c, 2), 7, "the last turn hangs under the saved turn before it");
    TAP_OK(c.n_off == 4 && c.off[0] == 3 && c.off[1] == 4 && c.off[2] == 5 && c.off[3] == 6,
           "the rows off the live path, oldest first: A, a, B, b (for their counts)");

    size_t turns = 0;
    struct conv_rowinfo *ri = conv_rows(&r.sc, &turns);
    TAP_INT(turns, 3, "three turns on the live path");
    int live = 0;
    for (size_t i = 0; i < r.sc.n_messages; i++)
        live += ri[i].live;
    TAP_INT(live, 6, "six rows on it (F, its failure, B, b2, R, B's tool row)");
    TAP_OK(ri[7].answer == -1 && ri[6].answer == 7 && ri[9].turn == 2,
           "a tool row is part of its turn, never its answer");
    TAP_OK(!ri[2].live && !ri[3].live && !ri[4].live && ri[6].live && ri[7].live,
           "replaced versions are off the live path");
    TAP_OK(ri[3].version == 1 && ri[3].versions == 3 && ri[7].turn == 2,
           "answers take their prompt's version and turn");
    TAP_OK(ri[2].turn == 2 && ri[3].turn == 2 && ri[4].turn == 2 && ri[5].turn == 2,
           "replaced versions (A, a, B, b) keep the turn they were versions of, not 0");
    free(ri);

    /* head_id missing (NULL): the newest user row is the head */
    r.sc.head_id = 0;
    conv_from_saved(&c, &r.sc, "sys now");
    TAP_OK(c.n == 3 && strcmp(c.system, "sys now") == 0, "no head: the newest user row");

    /* a head that names an answer row is not trusted */
    r.sc.head_id = 8;
    conv_from_saved(&c, &r.sc, NULL);
    TAP_OK(c.n == 3 && c.turns[2].user_id == 9, "a head that is not a user row: the newest");

    /* the head can move to an earlier version */
    r.sc.head_id = 3;
    conv_from_saved(&c, &r.sc, NULL);
    s = sent(&c);
    TAP_STR(s, "u:A a:a ", "a head moved to version 1 makes it the live path");
    free(s);
    conv_free(&c);
}

static void test_hostile_rows(void)
{
    /* a parent loop or a parent in the future must not hang or crash */
    struct rows r;
    memset(&r, 0, sizeof r);
    row(&r, 1, "user", "x", 2, STORE_COMPLETE, NULL);
    row(&r, 2, "user", "y", 1, STORE_COMPLETE, NULL);
    row(&r, 3, "assistant", "z", 99, STORE_COMPLETE, NULL);
    struct conv c;
    conv_init(&c);
    conv_from_saved(&c, &r.sc, NULL);
    TAP_OK(c.n == 2, "a parent cycle ends the path at the first row (%zu turns)", c.n);
    memset(&r, 0, sizeof r);
    conv_from_saved(&c, &r.sc, NULL);
    TAP_OK(c.n == 0, "no rows: no turns");
    conv_free(&c);
}

/* Tool rounds: a step's JSON round trip, steps rebuilt from rows (rows of other programs
 * without the JSON left out; an answer that asked for tools is a step, not the answer), and
 * copied with the conversation. */
static void test_steps(void)
{
    struct conv_step a = {.n_calls = 1};
    struct tool_call call = {.id = "c1", .name = "fs.read", .wire = "fs__read",
                             .args = "{\"p\":1}", .args_len = 7};
    a.calls = &call;
    a.thinking = "[]";
    char *json = conv_step_json(&a);
    struct conv_step b = {0};
    TAP_INT(conv_step_parse(&b, json), 0, "steps: the calls' JSON reads back");
    TAP_OK(b.n_calls == 1 && !b.result && !strcmp(b.calls[0].id, "c1") &&
               !strcmp(b.calls[0].name, "fs.read") && !strcmp(b.calls[0].args, "{\"p\":1}") &&
               b.calls[0].args_len == 7 && b.thinking && !strcmp(b.thinking, "[]"),
           "steps: id, name, arguments and thinking kept");
    free(json);
    tool_call_free(&b.calls[0]);
    free(b.calls);
    free(b.thinking);
    TAP_INT(conv_step_parse(&b, "not json"), -1, "steps: other text is no step");

    struct rows r = {0};
    row(&r, 1, "user", "read it", 0, STORE_COMPLETE, NULL);
    row(&r, 2, "assistant", "let me", 1, STORE_COMPLETE, NULL);
    r.m[1].tool = "{\"calls\":[{\"id\":\"c1\",\"name\":\"fs.read\",\"wire\":\"fs__read\","
                  "\"arguments\":\"{}\"}]}";
    row(&r, 3, "tool", "the text", 1, STORE_COMPLETE, NULL);
    r.m[2].tool = "{\"id\":\"c1\",\"name\":\"fs.read\",\"wire\":\"fs__read\",\"error\":true}";
    row(&r, 4, "tool", "foreign", 1, STORE_COMPLETE, NULL);
    row(&r, 5, "assistant", "it says hi", 1, STORE_COMPLETE, NULL);
    struct conv c;
    conv_init(&c);
    conv_from_saved(&c, &r.sc, NULL);
    const struct conv_turn *t = c.n ? &c.turns[0] : NULL;
    TAP_OK(t && t->outcome == CONV_ANSWERED && t->answer_id == 5 && t->n_steps == 2 &&
               t->steps[0].id == 2 && t->steps[0].n_calls == 1 && t->steps[1].result &&
               t->steps[1].is_error && !strcmp(t->steps[1].call_id, "c1") &&
               !strcmp(t->steps[1].text, "the text"),
           "steps: rebuilt from the rows; the foreign tool row left out");
    struct conv d;
    conv_init(&d);
    conv_copy(&d, &c);
    TAP_OK(d.n == 1 && d.turns[0].n_steps == 2 && d.turns[0].steps[0].calls != t->steps[0].calls &&
               !strcmp(d.turns[0].steps[0].calls[0].wire, "fs__read"),
           "steps: copied deep");
    struct buf tr = BUF_INIT;
    conv_transcript(&d, &tr);
    TAP_OK(strstr(buf_str(&tr), "call: fs.read {}") && strstr(buf_str(&tr), "tool error: the text"),
           "steps: in the transcript");
    buf_free(&tr);
    conv_free(&d);
    /* the answer row missing (killed mid-round): the round's row is a step, no answer */
    r.sc.n_messages = 3;
    conv_from_saved(&c, &r.sc, NULL);
    TAP_OK(c.n == 1 && c.turns[0].outcome == CONV_FAILED && c.turns[0].n_steps == 2,
           "steps: killed before the answer: failed, its rounds kept");
    conv_free(&c);

    /* a long result: head, marker, tail for the model (cut on characters) */
    struct conv_step big = {.result = 1, .len = 300000};
    big.text = xmalloc(big.len + 1);
    for (size_t i = 0; i < big.len; i += 2)
        memcpy(big.text + i, "\xC3\xA9", 2); /* é: a cut inside one would show */
    big.text[big.len] = 0;
    conv_step_cut(&big);
    TAP_OK(big.sent && big.sent_len < CONV_TOOL_SENT_MAX + 100 &&
               strstr(big.sent, "bytes of this tool result cut by tokterm") &&
               (unsigned char)big.sent[big.sent_len - 1] == 0xA9 &&
               utf8_valid(big.sent, big.sent_len),
           "steps: a long result is cut for the model, on characters");
    big.len = 100;
    conv_step_cut(&big);
    TAP_OK(!big.sent, "steps: a short result goes as it is");
    free(big.text);
}

int main(void)
{
    test_steps();
    test_live();
    test_outcome_saved();
    test_saved_tree();
    test_hostile_rows();
    return tap_done();
}
