/* request.h - the one request builder: a profile (struct conf) and the messages to send become
 * the wire request the network thread sends (URL, body, the key or a key pool, timeouts, TLS,
 * retry policy, pacing limits, breaker, quota name), and the same request for the fallback the
 * network thread switches to while the endpoint's breaker is open (another profile, or the same
 * endpoint with fallback_model). The chat and -p (session.c) and `tokterm batch` all build
 * their requests here, so they send the same bytes and share cache entries and quota state.
 *
 * No string splicing: every body is an api_request serialised by api_request_json(), the
 * fallback's with only the model changed. Nothing here prints (see setup.h for the rule). */
#ifndef TT_REQUEST_H
#define TT_REQUEST_H
#include <stddef.h>

#include "core/conf.h"
#include "net/net.h"
#include "proto/api.h"

struct store;

/* The key(s) a request carries, borrowed: one key (NULL for a keyless local server) and/or a
 * pool of n_pool labelled keys (conf_key_pool), which the network thread rotates. */
struct request_keys {
    const char *key;
    char *const *labels, *const *values;
    int n_pool;
};

/* Fill *ar from profile c for the n messages m (borrowed): the model, every sampling parameter
 * of API_SAMPLING, the max_tokens field name, streaming with include_usage as configured.
 * The caller may change any field before serialising it (the summary request does). */
void request_api(struct api_request *ar, const struct conf *c, const struct api_message *m,
                 size_t n);

/* What servers refused, learnt from their 400s and remembered per host and model in
 * $XDG_STATE_HOME/tokterm/learnt (lines "HOST<TAB>MODEL<TAB>FIX": "max_completion_tokens" or
 * "max_tokens" for the field the length limit goes by, "-NAME" for a member left out), so the
 * next run does not pay the 400 again. request_api applies them. */
/* Learn from result r of a request built from c: a 400 unsupported_parameter or
 * unsupported_value whose param is max_tokens (then max_completion_tokens is sent),
 * max_completion_tokens (then max_tokens), or a member the request sends (temperature, top_p,
 * seed, reasoning_effort: then left out). Returns 1 when the request changes by it (send it
 * again at once, request_learnt_note says what), 0 else. save: append it to the file too. */
int request_learn(const struct conf *c, const struct net_result *r, int save);
/* One line for the user on what request_learn learnt from r ("o1 refuses temperature: sent
 * again without it"). Caller frees. */
char *request_learnt_note(const struct conf *c, const struct net_result *r);
/* Apply what was learnt about c's host and model to ar (request_api does). */
void request_learnt_apply(struct api_request *ar, const struct conf *c);

/* The URL of a request to c: its base_url (trailing slashes dropped) and its dialect's path
 * ("/chat/completions", "/messages") for c's model. Caller frees. */
char *request_url(const struct conf *c);

/* The JSON body of *ar in c's dialect (proto/dialect.h). Caller frees. */
char *request_body(const struct conf *c, const struct api_request *ar);

/* The auth header value carrying key for c: "Bearer KEY" for Authorization, else the key
 * itself (Azure's api-key). Caller wipes and frees. */
char *request_auth(const struct conf *c, const char *key);

/* The quota name of c: "profile|host" (never a key). Caller frees. */
char *request_quota_name(const struct conf *c);

/* Response-cache key (SHA-256, 32 bytes into key) of body sent to c's server for model (NULL:
 * c->model): covers the base URL (the whole request URL where the dialect names the model in
 * it: Gemini's body does not), the dialect (but for openai) and the body (model, messages,
 * sampling), never the API key. The chat, -p and batch share it, so they share cache
 * entries. */
void request_cache_key(const struct conf *c, const char *model, const char *body,
                       unsigned char key[32]);

/* The request URL of c's server for model (a dialect may name it in the path). Caller
 * frees. */
char *request_url_model(const struct conf *c, const char *model);

/* A request of body (taken) to c's server carrying k's key and pool (copied), with c's
 * timeouts, TLS settings, retry policy, pacing limits, breaker and quota name; its tokens for
 * pacing are counted from the body and max_tokens by the network thread, when it first needs
 * them (ratelimit_est_tokens). The saved quota state is the caller's to seed
 * (request_quota_seed). Never NULL. */
struct net_request *request_new(const struct conf *c, char *body, const struct request_keys *k,
                                long max_tokens);

/* The request the network thread sends instead of ar's while c's breaker is open: ar with the
 * fallback's model, to the fallback profile fc with its key fkey (may be NULL), or, when fc is
 * NULL, to c's own server with c->fallback_model and the keys k (a breaker and quota of its
 * own: "profile|host|model"). NULL when neither is configured. */
struct net_request *request_fallback(const struct conf *c, const struct api_request *ar,
                                     const struct request_keys *k, const struct conf *fc,
                                     const char *fkey);

/* Start rq from the quota state an earlier run saved for its quota name in st (may be NULL). */
void request_quota_seed(struct net_request *rq, struct store *st, const struct conf *c);

/* Save the quota state line (net_result's quota_line) of c's quota in st, so the next run
 * starts informed. Nothing happens when st is NULL or the line is empty. */
void request_quota_save(struct store *st, const struct conf *c, const char *quota_line);

#endif
