/* test_request.c - the request builder (core/request.c), the sampling table (API_SAMPLING) and
 * the event loop's signal pipe (core/loop.c). */
#include "config.h"
#include "core/loop.h"
#include "core/request.h"
#include "store/store.h"
#include "base/buf.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/curl_dl.h"
#include "net/probe.h"
#include "net/ratelimit.h"
#include "tap.h"
#include <math.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The fallback body as the old code made it: the main body with its "model" value spliced. */
/* The tokens the network thread paces rq by (net.c counts them so when it first needs them). */
static double est(const struct net_request *rq)
{
    return ratelimit_est_tokens(rq->body, rq->est_answer);
}

static char *old_splice(const char *body, const char *model)
{
    struct buf b = BUF_INIT;
    const char *at = strstr(body, "\"model\":");
    const char *end = at ? strstr(at + 8, "\",") : NULL;
    char *qm = api_request_json(&(struct api_request){.model = model});
    const char *mq = strstr(qm, "\"model\":");
    const char *mend = mq ? strstr(mq + 8, "\",") : NULL;
    buf_append(&b, body, (size_t)(at - body));
    buf_append(&b, mq, (size_t)(mend + 1 - mq));
    buf_appends(&b, end + 1);
    free(qm);
    return buf_take(&b);
}

static void test_bodies(void)
{
    struct conf c;
    conf_defaults(&c);
    free(c.model);
    c.model = xstrdup("gpt-4o");
    c.max_tokens = 50;
    c.temperature = 0.5;
    c.has_temperature = 1;
    struct api_message m[] = {API_MSG("system", "be brief"), API_MSG("user", "hi \"there\"\n")};
    struct api_request ar;
    request_api(&ar, &c, m, 2);
    char *body = api_request_json(&ar);
    TAP_STR(body,
            "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
            "{\"role\":\"user\",\"content\":\"hi \\\"there\\\"\\n\"}],\"max_tokens\":50,"
            "\"temperature\":0.5,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            "the body from the profile, byte for byte as before");

    /* the fallback: the same api_request with another model, never spliced text */
    struct request_keys k = {"sk-main-key-000", NULL, NULL, 0};
    TAP_OK(request_fallback(&c, &ar, &k, NULL, NULL) == NULL, "no fallback configured: none");
    c.fallback_model = xstrdup("spare-\"model\"");
    struct net_request *fb = request_fallback(&c, &ar, &k, NULL, NULL);
    char *spliced = old_splice(body, "spare-\"model\"");
    TAP_STR(fb ? fb->body : "", spliced, "fallback_model: the body the old splicing made");
    char *host = conf_host(&c);
    char *want = xasprintf("default|%s|spare-\"model\"", host);
    TAP_STR(fb ? fb->quota_name : "", want, "fallback_model: a quota and breaker of its own");
    TAP_STR(fb ? fb->fallback_name : "", "model spare-\"model\"", "fallback_model: named");
    TAP_STR(fb && fb->auth_value ? fb->auth_value : "", "Bearer sk-main-key-000",
            "fallback_model: the same key");
    free(want);
    free(host);
    free(spliced);
    net_request_free(fb);

    struct conf f;
    conf_defaults(&f);
    free(f.base_url);
    f.base_url = xstrdup("http://backup.example/v1/");
    free(f.model);
    f.model = xstrdup("backup-model");
    free(f.profile);
    f.profile = xstrdup("backup");
    free(f.auth_header);
    f.auth_header = xstrdup("api-key");
    fb = request_fallback(&c, &ar, &k, &f, "sk-backup");
    spliced = old_splice(body, "backup-model");
    TAP_STR(fb ? fb->body : "", spliced, "fallback profile: the body the old splicing made");
    TAP_STR(fb ? fb->url : "", "http://backup.example/v1/chat/completions",
            "fallback profile: its own server");
    TAP_STR(fb && fb->auth_value ? fb->auth_value : "", "sk-backup",
            "fallback profile: its own key in its own header");
    TAP_STR(fb ? fb->quota_name : "", "backup|backup.example", "fallback profile: its quota");
    TAP_STR(fb ? fb->fallback_name : "", "profile backup", "fallback profile: named");
    free(spliced);
    net_request_free(fb);
    conf_free(&f);

    /* top_p and seed (a line each in API_SAMPLING): after temperature, in the table's order;
     * a seed of 0 is sent */
    c.top_p = 0.5;
    c.has_top_p = 1;
    c.has_seed = 1;
    request_api(&ar, &c, m + 1, 1);
    char *more = api_request_json(&ar);
    TAP_STR(more,
            "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi "
            "\\\"there\\\"\\n\"}],\"max_tokens\":50,\"temperature\":0.5,\"top_p\":0.5,\"seed\":0,"
            "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            "top_p and seed from the profile, after temperature; seed 0 is sent");
    free(more);
    c.seed = 9007199254740991L;
    c.has_top_p = 0;
    request_api(&ar, &c, m + 1, 1);
    more = api_request_json(&ar);
    TAP_OK(strstr(more, ",\"seed\":9007199254740991,") && !strstr(more, "top_p"),
           "the largest seed is sent exactly; an unset top_p is not");
    free(more);
    c.has_seed = 0;

    /* the max_tokens field name, and nothing unset sent */
    free(c.max_tokens_field);
    c.max_tokens_field = xstrdup("max_completion_tokens");
    c.has_temperature = 0;
    c.include_usage = 0;
    request_api(&ar, &c, m + 1, 1);
    free(body);
    body = api_request_json(&ar);
    TAP_STR(body,
            "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi "
            "\\\"there\\\"\\n\"}],\"max_completion_tokens\":50,\"stream\":true}",
            "max_completion_tokens; no temperature, no stream_options");
    free(body);

    /* a pool: every key in the request, none printed in the quota name */
    char *labels[] = {"KEY_A", "KEY_B"}, *values[] = {"sk-a", "sk-b"};
    struct request_keys pk = {NULL, labels, values, 2};
    struct net_request *rq = request_new(&c, xstrdup("{}"), &pk, 0);
    TAP_INT((long)rq->n_keys, 2, "pool: two keys");
    TAP_STR(rq->keys[1].auth_value, "Bearer sk-b", "pool: each key's header value");
    TAP_OK(rq->auth_value == NULL && rq->auth_name != NULL, "pool: no single key");
    net_request_free(rq);

    /* the tokens a request is paced by: its messages' text (4 bytes a token, 3 a message) and
     * max_tokens, not the JSON around them (the servers count it so) */
    rq = request_new(&c, xstrdup("{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":"
                                 "\"system\",\"content\":\"be brief\"},{\"role\":\"user\","
                                 "\"content\":\"a question of 27 bytes here\"}],\"stream\":"
                                 "true,\"stream_options\":{\"include_usage\":true}}"),
                     &pk, 200);
    TAP_OK(!rq->est_pending && fabs(rq->est_tokens - est(rq)) < 1e-9,
           "est_tokens: libcurl not loaded yet, counted at once (%g)", rq->est_tokens);
    TAP_OK(fabs(est(rq) - (35.0 / 4 + 6 + 200)) < 1e-9,
           "est_tokens: 35 bytes of text, 2 messages, 200 of answer (%g)", est(rq));
    net_request_free(rq);
    rq = request_new(&c, xstrdup("{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":"
                                 "\"a \\\"quoted\\\" word\"}]}],\"systemInstruction\":"
                                 "{\"parts\":[{\"text\":\"sys\"}]}}"), &pk, 0);
    TAP_OK(fabs(est(rq) - (20.0 / 4 + 3)) < 1e-9,
           "est_tokens: Gemini's parts, escapes counted as sent (%g)", est(rq));
    net_request_free(rq);
    /* once libcurl is loaded: left to the network thread (net.c counts it when it paces) */
    const char *why = NULL;
    if (curl_dl_load(&why) == 0) {
        rq = request_new(&c, xstrdup("{\"content\":\"12345678\"}"), &pk, 100);
        TAP_OK(rq->est_pending && rq->est_tokens == 0 && rq->est_answer == 100 &&
                   fabs(est(rq) - 102) < 1e-9,
               "est_tokens: libcurl loaded, left to the network thread (%g)", est(rq));
        net_request_free(rq);
    } else {
        TAP_OK(0, "libcurl loads (%s)", why ? why : "?");
    }
    rq = request_new(&c, xstrdup("[1, 2, 3, 4]"), &pk, 0);
    TAP_OK(fabs(est(rq) - 3) < 1e-9, "est_tokens: no text keys: 4 bytes a token of all");
    net_request_free(rq);
    /* runs of backslashes before a quote: an odd run escapes it, an even one does not (the
     * string's end is found by memchr, then the run before the quote is counted) */
    rq = request_new(&c, xstrdup("{\"content\":\"a\\\\\",\"role\":\"b\\\\\\\"c\\\\\\\\\"}"),
                     &pk, 0);
    TAP_OK(fabs(est(rq) - (3.0 / 4 + 3)) < 1e-9,
           "est_tokens: an even run of backslashes ends the string, an odd one does not (%g)",
           est(rq));
    net_request_free(rq);
    rq = request_new(&c, xstrdup("{\"text\":\"open \\\" never closed\\"), &pk, 0);
    TAP_OK(fabs(est(rq) - (21.0 / 4)) < 1e-9,
           "est_tokens: a string left open runs to the end of the body (%g)", est(rq));
    net_request_free(rq);
    conf_free(&c);
}

static void test_params(void)
{
    TAP_INT(API_N_PARAMS, 4, "four sampling parameters in the table");
    TAP_STR(api_params[API_PARAM_IDX_temperature].opt, "temperature", "the option name");
    struct api_request ar;
    memset(&ar, 0, sizeof ar);
    struct buf err = BUF_INIT;
    const struct api_param *t = &api_params[API_PARAM_IDX_temperature];
    const struct api_param *mt = &api_params[API_PARAM_IDX_max_tokens];
    TAP_INT(api_param_from_json(&ar, t, 0.7, 1, &err), 0, "temperature 0.7 is taken");
    TAP_OK(ar.has_temperature && ar.temperature == 0.7, "temperature set");
    TAP_INT(api_param_from_json(&ar, t, 9, 1, &err), -1, "temperature 9 is refused");
    TAP_STR(buf_str(&err), "\"temperature\" must be a number from 0 to 2", "and says why");
    buf_reset(&err);
    TAP_INT(api_param_from_json(&ar, mt, 2.5, 1, &err), -1, "max_tokens 2.5 is refused");
    TAP_STR(buf_str(&err), "\"max_tokens\" must be a whole number from 1 to 10000000",
            "and says why");
    buf_reset(&err);
    TAP_INT(api_param_from_json(&ar, mt, 0, 0, &err), -1, "max_tokens \"x\" is refused");
    TAP_INT(api_param_from_json(&ar, mt, 77, 1, &err), 0, "max_tokens 77 is taken");
    TAP_INT(ar.max_tokens, 77, "max_tokens set");
    const struct api_param *tp = &api_params[API_PARAM_IDX_top_p];
    const struct api_param *sd = &api_params[API_PARAM_IDX_seed];
    TAP_STR(tp->opt, "top-p", "top_p: its option");
    buf_reset(&err);
    TAP_INT(api_param_from_json(&ar, tp, 1.5, 1, &err), -1, "top_p 1.5 is refused");
    TAP_STR(buf_str(&err), "\"top_p\" must be a number from 0 to 1", "and says why");
    TAP_INT(api_param_from_json(&ar, tp, 0.25, 1, &err), 0, "top_p 0.25 is taken");
    TAP_OK(ar.has_top_p && ar.top_p == 0.25, "top_p set");
    buf_reset(&err);
    TAP_INT(api_param_from_json(&ar, sd, 1.5, 1, &err), -1, "seed 1.5 is refused");
    TAP_STR(buf_str(&err), "\"seed\" must be a whole number from 0 to 9007199254740991",
            "and says why");
    TAP_INT(api_param_from_json(&ar, sd, -1, 1, &err), -1, "seed -1 is refused");
    TAP_INT(api_param_from_json(&ar, sd, 1e300, 1, &err), -1, "seed 1e300 is refused");
    TAP_INT(api_param_from_json(&ar, sd, 0, 1, &err), 0, "seed 0 is taken");
    TAP_OK(ar.has_seed && ar.seed == 0, "seed 0 set (and so sent)");
    buf_free(&err);
}

static void test_loop(void)
{
    struct loop lp;
    const char *err = NULL;
    const int sigs[] = {SIGUSR1, SIGUSR2};
    TAP_INT(loop_init(&lp, sigs, 2, 0, &err), 0, "loop: init");
    int fds[2];
    TAP_INT(pipe(fds), 0, "a pipe to watch");
    TAP_INT(loop_wait(&lp, &fds[0], 1, 0), 0, "loop: nothing ready, timeout 0");
    TAP_INT(loop_signal(&lp), 0, "loop: no signal");
    TAP_OK(!loop_signalled(&lp), "loop: nothing signalled");
    raise(SIGUSR2);
    raise(SIGUSR1);
    TAP_OK(loop_signalled(&lp), "loop: a signal is seen without a wait");
    TAP_INT(loop_wait(&lp, &fds[0], 1, 5000), 1, "loop: the wait ends at once for it");
    TAP_INT(loop_ready(&lp, 0), 0, "loop: the fd is not ready");
    TAP_INT(loop_signal(&lp), SIGUSR2, "loop: the first signal");
    TAP_INT(loop_signal(&lp), SIGUSR1, "loop: then the second, in order");
    TAP_INT(loop_signal(&lp), 0, "loop: then none");
    TAP_OK(!loop_signalled(&lp), "loop: all taken");
    TAP_INT((int)write(fds[1], "x", 1), 1, "write to the pipe");
    TAP_INT(loop_wait(&lp, &fds[0], 1, 5000), 1, "loop: the fd wakes it");
    TAP_OK(loop_ready(&lp, 0) & POLLIN, "loop: the fd is readable");
    loop_end(&lp);
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    TAP_OK(sa.sa_handler == SIG_DFL, "loop: the old handler is back");
    close(fds[0]);
    close(fds[1]);
}

/* The dialect of a profile: its defaults, URL, body, cache key, and a fallback in another. */
static void test_dialects(void)
{
    struct conf c;
    conf_defaults(&c);
    struct buf err = BUF_INIT;
    TAP_INT(conf_set(&c, "api", "klingon", &err), -1, "api: an unknown dialect is refused");
    TAP_OK(strstr(buf_str(&err), "openai|anthropic") != NULL, "api: the message names them");
    const char *body = "{\"model\":\"m\"}";
    unsigned char k_openai[32], k_old[32], k_anth[32];
    request_cache_key(&c, NULL, body, k_openai);
    struct buf canon = BUF_INIT;
    buf_printf(&canon, "tokterm-cache-v1\n%s\n%s", c.base_url, body);
    store_cache_key(canon.data, canon.len, k_old);
    buf_free(&canon);
    TAP_OK(memcmp(k_openai, k_old, 32) == 0, "cache key: openai's as before dialects");
    char *url = request_url(&c);
    TAP_STR(url, "https://api.openai.com/v1/chat/completions", "openai: URL");
    free(url);

    struct conf a;
    conf_defaults(&a);
    TAP_INT(conf_set(&a, "api", "anthropic", &err), 0, "api = anthropic");
    conf_apply_dialect(&a);
    TAP_STR(a.base_url, "https://api.anthropic.com/v1", "anthropic: its base URL");
    TAP_STR(a.model, "claude-haiku-4-5", "anthropic: its model");
    TAP_STR(a.api_key_env, "ANTHROPIC_API_KEY", "anthropic: its key variable");
    TAP_STR(a.auth_header, "x-api-key", "anthropic: its header");
    free(a.base_url);
    a.base_url = xstrdup(c.base_url);
    request_cache_key(&a, NULL, body, k_anth);
    TAP_OK(memcmp(k_openai, k_anth, 32) != 0,
           "cache key: the same URL and body in another dialect is another entry");
    url = request_url(&a);
    TAP_STR(url, "https://api.openai.com/v1/messages", "anthropic: URL {base}/messages");
    free(url);
    {   /* Gemini names the model in the URL, not in the body: the key must cover it */
        struct conf g;
        conf_defaults(&g);
        TAP_INT(conf_set(&g, "api", "gemini", &err), 0, "api = gemini");
        conf_apply_dialect(&g);
        unsigned char k_flash[32], k_pro[32], k_pro2[32];
        const char *gbody = "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"x\"}]}]}";
        request_cache_key(&g, "gemini-2.5-flash", gbody, k_flash);
        request_cache_key(&g, "gemini-2.5-pro", gbody, k_pro);
        free(g.model);
        g.model = xstrdup("gemini-2.5-pro");
        request_cache_key(&g, NULL, gbody, k_pro2);
        TAP_OK(memcmp(k_flash, k_pro, 32) != 0,
               "cache key, gemini: another model (in the URL only) is another entry");
        TAP_OK(memcmp(k_pro, k_pro2, 32) == 0,
               "cache key, gemini: the model given, or the profile's, the same entry");
        url = request_url_model(&g, "gemini-2.5-flash");
        TAP_OK(strstr(url, "/models/gemini-2.5-flash:") != NULL, "gemini: the model's URL (%s)",
               url);
        free(url);
        conf_free(&g);
    }
    struct conf b;
    conf_defaults(&b);
    conf_set(&b, "base_url", "http://proxy.example/v1", &err);
    conf_set(&b, "model", "claude-z", &err);
    conf_set(&b, "api", "anthropic", &err);
    conf_apply_dialect(&b);
    TAP_OK(strcmp(b.base_url, "http://proxy.example/v1") == 0 && strcmp(b.model, "claude-z") == 0,
           "anthropic: a base_url and model set are kept");

    /* main openai, fallback profile anthropic: the fallback's body, URL, header, decoder */
    struct api_message m[] = {API_MSG("system", "be brief"), API_MSG("user", "hi")};
    struct api_request ar;
    request_api(&ar, &c, m, 2);
    char *main_body = request_body(&c, &ar);
    TAP_OK(strstr(main_body, "\"role\":\"system\"") != NULL, "main: chat-completions body");
    free(main_body);
    struct request_keys k = {"sk-main", NULL, NULL, 0};
    struct net_request *fb = request_fallback(&c, &ar, &k, &b, "sk-ant");
    TAP_OK(fb && strstr(fb->body, "\"system\":\"be brief\"") &&
               strstr(fb->body, "\"max_tokens\":8192"),
           "fallback in anthropic: its body (%s)", fb ? fb->body : "");
    TAP_STR(fb ? fb->url : "", "http://proxy.example/v1/messages", "fallback: its URL");
    TAP_STR(fb && fb->auth_name ? fb->auth_name : "", "x-api-key", "fallback: x-api-key");
    TAP_STR(fb && fb->auth_value ? fb->auth_value : "", "sk-ant", "fallback: the key alone");
    TAP_OK(fb && fb->dialect == &dialect_anthropic, "fallback: decoded as anthropic");
    net_request_free(fb);
    buf_free(&err);
    conf_free(&a);
    conf_free(&b);
    conf_free(&c);
}

/* reasoning_effort from the profile into each dialect's body: its own member and structure,
 * nothing at none; anthropic: the budget below max_tokens and no temperature. */
static void test_effort(void)
{
    static const char *const dialects[] = {"openai", "responses", "anthropic", "gemini"};
    static const char *const want[4][4] = {
        /* none, low, medium, high */
        {NULL, "\"reasoning_effort\":\"low\"", "\"reasoning_effort\":\"medium\"",
         "\"reasoning_effort\":\"high\""},
        {NULL, "\"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"}",
         "\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"}",
         "\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}"},
        {NULL, "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}",
         "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4096}",
         "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":16384}"},
        {NULL, "\"thinkingConfig\":{\"thinkingBudget\":1024,\"includeThoughts\":true}",
         "\"thinkingConfig\":{\"thinkingBudget\":4096,\"includeThoughts\":true}",
         "\"thinkingConfig\":{\"thinkingBudget\":16384,\"includeThoughts\":true}"},
    };
    static const char *const words[] = {"none", "low", "medium", "high"};
    static const char *const members[] = {"reasoning_effort", "\"reasoning\"", "thinking",
                                          "thinkingConfig"};
    struct api_message m[] = {API_MSG("user", "hi")};
    struct buf err = BUF_INIT;
    for (int d = 0; d < 4; d++) {
        for (int e = 0; e < 4; e++) {
            struct conf c;
            conf_defaults(&c);
            conf_set(&c, "api", dialects[d], &err);
            conf_apply_dialect(&c);
            conf_set(&c, "temperature", "0.5", &err);
            TAP_OK(conf_set(&c, "reasoning_effort", words[e], &err) == 0,
                   "%s: reasoning_effort = %s taken", dialects[d], words[e]);
            struct api_request ar;
            request_api(&ar, &c, m, 1);
            char *body = request_body(&c, &ar);
            if (want[d][e])
                TAP_OK(strstr(body, want[d][e]) != NULL, "%s, %s: %s in %s", dialects[d],
                       words[e], want[d][e], body);
            else
                TAP_OK(strstr(body, members[d]) == NULL, "%s, none: nothing sent (%s)",
                       dialects[d], body);
            if (d == 2) {
                const char *mt = strstr(body, "\"max_tokens\":");
                long max = mt ? strtol(mt + 13, NULL, 10) : 0;
                TAP_OK(max > api_effort_budget(e) && max >= 8192,
                       "anthropic, %s: max_tokens %ld above the budget", words[e], max);
                TAP_OK(!strstr(body, "temperature") == (e > 0),
                       "anthropic, %s: temperature %s", words[e], e ? "left out" : "sent");
            }
            free(body);
            conf_free(&c);
        }
    }
    struct conf c;
    conf_defaults(&c);
    TAP_INT(conf_set(&c, "reasoning_effort", "extreme", &err), -1, "an unknown effort refused");
    TAP_OK(strstr(buf_str(&err), "none|low|medium|high") != NULL, "the message names them");
    /* the profile's max_tokens above the budget is kept; at or below it, the budget is added */
    conf_set(&c, "api", "anthropic", &err);
    conf_apply_dialect(&c);
    conf_set(&c, "reasoning_effort", "medium", &err);
    conf_set(&c, "max_tokens", "2000", &err);
    struct api_request ar;
    request_api(&ar, &c, m, 1);
    char *body = request_body(&c, &ar);
    TAP_OK(strstr(body, "\"max_tokens\":6096,") != NULL, "anthropic: 2000 + 4096 (%s)", body);
    free(body);
    conf_free(&c);
    /* gemini counts thinking inside maxOutputTokens: the budget is added to the answer's */
    conf_defaults(&c);
    conf_set(&c, "api", "gemini", &err);
    conf_apply_dialect(&c);
    conf_set(&c, "reasoning_effort", "low", &err);
    conf_set(&c, "max_tokens", "100", &err);
    request_api(&ar, &c, m, 1);
    body = request_body(&c, &ar);
    TAP_OK(strstr(body, "\"maxOutputTokens\":1124") != NULL, "gemini: 100 + 1024 (%s)", body);
    free(body);
    conf_free(&c);
    buf_free(&err);
}

/* What a 400 naming a refused member teaches (request_learn), and what it does not. */
static void test_learn(void)
{
    char dir[] = "/tmp/tt-learn-XXXXXX";
    TAP_OK(mkdtemp(dir) != NULL, "learn: a state directory");
    setenv("XDG_STATE_HOME", dir, 1);
    char param[32];
    const char *e400 = "{\"error\":{\"message\":\"Unsupported parameter: 'max_tokens'\","
                       "\"type\":\"invalid_request_error\",\"param\":\"max_tokens\","
                       "\"code\":\"unsupported_parameter\"}}";
    api_error_param(e400, strlen(e400), param, sizeof param);
    TAP_STR(param, "max_tokens", "api_error_param: error.param");
    api_error_param("{\"error\":{\"param\":null}}", 24, param, sizeof param);
    TAP_STR(param, "", "api_error_param: null is none");
    api_error_param("<html>", 6, param, sizeof param);
    TAP_STR(param, "", "api_error_param: not JSON, none");

    struct conf c;
    conf_defaults(&c);
    struct buf err = BUF_INIT;
    conf_set(&c, "model", "o9", &err);
    conf_set(&c, "max_tokens", "50", &err);
    conf_set(&c, "temperature", "0.5", &err);
    struct net_result r;
    memset(&r, 0, sizeof r);
    r.outcome = API_ERR_HTTP;
    r.status = 400;
    snprintf(r.error_code, sizeof r.error_code, "unsupported_parameter");
    snprintf(r.error_param, sizeof r.error_param, "max_tokens");
    TAP_INT(request_learn(&c, &r, 1), 1, "learn: max_tokens refused");
    TAP_INT(request_learn(&c, &r, 1), 0, "learn: the same again changes nothing (no loop)");
    struct api_request ar;
    request_api(&ar, &c, NULL, 0);
    TAP_STR(ar.max_tokens_field, "max_completion_tokens", "learnt: max_completion_tokens");
    TAP_OK(ar.has_temperature, "learnt: temperature still sent");
    snprintf(r.error_param, sizeof r.error_param, "max_completion_tokens");
    TAP_INT(request_learn(&c, &r, 1), 0, "learn: the field flips once, not back and forth");
    snprintf(r.error_code, sizeof r.error_code, "unsupported_value");
    snprintf(r.error_param, sizeof r.error_param, "temperature");
    TAP_INT(request_learn(&c, &r, 1), 1, "learn: temperature refused");
    request_api(&ar, &c, NULL, 0);
    TAP_OK(!ar.has_temperature, "learnt: no temperature");
    snprintf(r.error_param, sizeof r.error_param, "top_p");
    TAP_INT(request_learn(&c, &r, 1), 0, "learn: a member not sent teaches nothing");
    conf_set(&c, "reasoning_effort", "high", &err);
    snprintf(r.error_code, sizeof r.error_code, "unsupported_parameter");
    snprintf(r.error_param, sizeof r.error_param, "reasoning_effort");
    TAP_INT(request_learn(&c, &r, 0), 1, "learn: reasoning_effort refused (not saved)");
    request_api(&ar, &c, NULL, 0);
    TAP_INT(ar.reasoning_effort, API_EFFORT_NONE, "learnt: no reasoning_effort for o9");
    snprintf(r.error_code, sizeof r.error_code, "invalid_value");
    snprintf(r.error_param, sizeof r.error_param, "temperature");
    conf_set(&c, "model", "other", &err);
    TAP_INT(request_learn(&c, &r, 1), 0, "learn: another code teaches nothing");
    request_api(&ar, &c, NULL, 0);
    TAP_OK(ar.has_temperature && strcmp(ar.max_tokens_field, "max_tokens") == 0,
           "learnt: another model keeps both");
    char *path = xasprintf("%s/tokterm/learnt", dir);
    size_t len = 0;
    char *text = util_read_file(path, &len, 0);
    char *host = conf_host(&c);
    char *want = xasprintf("%s\to9\tmax_completion_tokens\n%s\to9\t-temperature\n", host, host);
    TAP_STR(text ? text : "", want, "the file: one line per thing learnt");
    unlink(path);
    char *sub = xasprintf("%s/tokterm", dir);
    rmdir(sub);
    free(sub);
    rmdir(dir);
    free(text);
    free(want);
    free(host);
    free(path);
    buf_free(&err);
    conf_free(&c);
    unsetenv("XDG_STATE_HOME");
}

/* extra_body: its members at the top level of every dialect's body; unset, the body as before. */
static void test_extra_body(void)
{
    struct api_message m[1] = {API_MSG("user", "hi")};
    const char *apis[] = {"openai", "responses", "anthropic", "gemini"};
    struct buf err = BUF_INIT;
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++) {
        struct conf c;
        conf_defaults(&c);
        conf_set(&c, "api", apis[i], &err);
        conf_apply_dialect(&c);
        conf_set(&c, "temperature", "0.5", &err);
        struct api_request ar;
        request_api(&ar, &c, m, 1);
        char *plain = conf_dialect(&c)->request_json(&ar);
        char *body = request_body(&c, &ar);
        TAP_OK(strcmp(body, plain) == 0,
               "%s: without extra_body the body is byte for byte the dialect's", apis[i]);
        free(body);
        /* gemini's temperature is in generationConfig: that member is replaced whole */
        const char *extra = strcmp(apis[i], "gemini") == 0
                                ? "{\"top_k\": 40, \"generationConfig\": {\"temperature\": 1}, \"x\": []}"
                                : "{\"top_k\": 40, \"temperature\": 1, \"x\": []}";
        TAP_OK(conf_set(&c, "extra_body", extra, &err) == 0, "%s: extra_body set", apis[i]);
        body = request_body(&c, &ar);
        TAP_OK(strstr(body, "\"top_k\":40") != NULL && strstr(body, "\"x\":[]") != NULL,
               "%s: its members sent (%s)", apis[i], body);
        TAP_OK(strstr(body, "\"temperature\":1") != NULL && !strstr(body, "0.5"),
               "%s: a member of the same name replaces tokterm's", apis[i]);
        TAP_OK(strncmp(body, plain, 12) == 0 && body[strlen(body) - 1] == '}',
               "%s: the dialect's members first, one object", apis[i]);
        unsigned char k1[32], k2[32];
        request_cache_key(&c, NULL, plain, k1);
        request_cache_key(&c, NULL, body, k2);
        TAP_OK(memcmp(k1, k2, 32) != 0, "%s: extra_body is part of the cache key", apis[i]);
        free(body);
        free(plain);
        conf_free(&c);
    }
    struct conf c;
    conf_defaults(&c);
    const char *bad[] = {"[1]", "{\"a\":", "40", "{} x", "{\"a\":1}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        buf_reset(&err);
        TAP_OK(conf_set(&c, "extra_body", bad[i], &err) == -1, "extra_body '%s' refused", bad[i]);
        TAP_OK(strstr(buf_str(&err), "JSON object") != NULL, "the message says why (%s)",
               buf_str(&err));
    }
    TAP_OK(c.extra_body == NULL, "a refused extra_body leaves it unset");
    conf_set(&c, "extra_body", "{}", &err);
    TAP_OK(conf_set(&c, "extra_body", "", &err) == 0 && c.extra_body == NULL, "\"\": none");
    conf_free(&c);
    buf_free(&err);
}

int main(void)
{
    test_learn();
    test_extra_body();
    test_effort();
    test_dialects();
    test_bodies();
    test_params();
    test_loop();
    return tap_done();
}
