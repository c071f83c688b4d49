/* script.h - the scripted front end: one prompt in, the answer streamed to stdout, an honest
 * exit status out. */
#ifndef TT_SCRIPT_H
#define TT_SCRIPT_H
#include "conf.h"

struct script_opts {
    const char *const *prompts; /* one per turn; the first already joined with stdin */
    int n_prompts;
    int json;             /* one JSON object at the end instead of the text */
    int reasoning;        /* copy reasoning to stderr */
};

/* Run one exchange with conf and key (taken). Returns the process exit status. */
int script_run(struct conf *conf, char *key, const struct script_opts *o);

#endif
