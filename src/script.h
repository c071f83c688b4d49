/* script.h - the scripted front end: one prompt in, the answer streamed to stdout, an honest
 * exit status out. */
#ifndef TT_SCRIPT_H
#define TT_SCRIPT_H
#include <stdint.h>

#include "conf.h"
#include "session.h"

struct store;

struct script_opts {
    const char *const *prompts; /* one per turn; the first already joined with stdin */
    int n_prompts;
    int json;             /* one JSON object at the end instead of the text */
    int reasoning;        /* copy reasoning to stderr */
    struct store *store;  /* NULL: nothing saved, no cache */
    int save;
    enum session_cache cache;
    char **pool_labels, **pool_values; /* key pool (taken), n_pool of each */
    int n_pool;
    struct conf *fallback;  /* fallback profile (borrowed), with fallback_key (taken) */
    char *fallback_key;
    int resume;           /* continue a saved conversation: resume_id, or the latest when 0 */
    int64_t resume_id;
};

/* Run one exchange with conf and key (taken). Returns the process exit status. */
int script_run(struct conf *conf, char *key, const struct script_opts *o);

#endif
