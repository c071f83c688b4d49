/* models.h - the models a server offers, in each dialect's shape, cached for a day.
 *
 * Where the list comes from:
 *   openai     GET {base}/models            data[].id
 *   ollama     GET {root}/api/tags          models[].name   (base on port 11434, or when
 *                                           {base}/models answers 404; root = base minus /v1)
 *   anthropic  GET {base}/models?limit=1000 data[].id, display_name  (x-api-key, version);
 *                                           more pages by after_id while has_more
 *   gemini     GET {base}/models            models[].name = "models/NAME" (kept as NAME),
 *                                           inputTokenLimit, outputTokenLimit; pages followed
 *                                           by nextPageToken; those that cannot
 *                                           generateContent (embeddings) are left out
 * The cache is one JSON file per (dialect, base URL) in $XDG_CACHE_HOME/tokterm/models/: the
 * ids and facts, the time fetched; never a key or a header.
 *
 * Use:
 *   struct model_list l = {0};
 *   int code = models_get(conf, key, refresh, &l, &err);  0, 3 (HTTP), 4 (network)
 *   models_cached(conf, &l)                               the cached list, any age (no I/O
 *                                                         but the file): Tab completion
 *   model_list_free(&l);
 */
#ifndef TT_CORE_MODELS_H
#define TT_CORE_MODELS_H
#include <stddef.h>

#include "base/buf.h"

struct conf;

struct model_info {
    char *id;           /* what -m and `model =` take */
    char *name;         /* display name, NULL when none */
    long input_limit;   /* tokens, 0 = not said */
    long output_limit;
};

struct model_list {
    struct model_info *v;
    size_t n, cap;
    char source[16];    /* "openai", "ollama", "anthropic", "gemini" */
    double fetched;     /* when the server was asked (epoch seconds) */
    int from_cache;     /* 1: read from the cache file, no request made */
};

#define MODELS_CACHE_TTL (24.0 * 3600)

/* Parse one answer of shape source ("openai", "ollama", "anthropic", "gemini") onto l.
 * *next (when next != NULL) gets the next page's query ("pageToken=T" for Gemini,
 * "after_id=ID" for Anthropic while has_more; malloc'd) or NULL. 0, or -1 when the
 * body is not a model list of that shape. */
int models_parse(const char *source, const char *body, size_t n, struct model_list *l,
                 char **next);

/* Whether model is one of l's ids (Gemini's "models/NAME" and NAME are the same). */
int models_has(const struct model_list *l, const char *model);

/* 1 when id is printable UTF-8 without blanks (nothing a terminal obeys): one to offer for
 * Tab or to switch to (a server's list may hold anything; --json shows it all). */
int models_id_typable(const char *id);

/* The list for c's server: the cache when it is younger than a day (unless refresh), else
 * the server (then the cache is written). 0; 3 with err set after an HTTP error; 4 after a
 * network failure (or no libcurl). */
int models_get(const struct conf *c, const char *key, int refresh, struct model_list *l,
               struct buf *err);

/* The cached list for c's server, whatever its age: 0, or -1 when there is none. */
int models_cached(const struct conf *c, struct model_list *l);

/* The request headers of a GET in c's dialect with key (NULL: none): "Authorization: Bearer
 * KEY" or the dialect's header, Accept, the dialect's own (anthropic-version). Fills out
 * (NULL-terminated, at most 3 + DIALECT_MAX_HEADERS) and returns the one line holding the key
 * (to util_free_secret), or NULL. */
char *models_headers(const struct conf *c, const char *key, const char **out);

/* The list as a JSON array of objects {id, name?, input_token_limit?, output_token_limit?};
 * caller frees. */
char *models_json(const struct model_list *l);

/* url without user:password@ (for messages and the cache: never show credentials). */
char *models_display_url(const char *url);

void model_list_free(struct model_list *l);

#endif
