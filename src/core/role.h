/* role.h - named presets (a system prompt with model, api, profile and sampling settings):
 * $XDG_CONFIG_HOME/tokterm/roles/NAME.md, a [role NAME] section of the config file, or a
 * built-in data/roles/NAME.md, in that order. A role applies on top of the profile; the
 * command line wins over it. */
#ifndef TT_ROLE_H
#define TT_ROLE_H
#include "base/buf.h"
#include "core/conf.h"

struct role {
    char *name;
    const char *source;     /* "user", "config" or "built-in" */
    char *path;             /* the file it came from */
    char *prompt;           /* the system prompt (the body); NULL = the profile's */
    char *profile;          /* the profile it asks for, NULL = none */
    char **keys, **values;  /* its settings, in order */
    int *lines;             /* the line of each */
    size_t n;
};

/* Find and read the role name (cfgpath: the config file, may be NULL). Returns 0, -1 with
 * err set ("FILE:LINE: what is wrong" for bad front matter, or "unknown role 'x' (known: ...)").
 * Free r with role_free. */
int role_load(struct role *r, const char *name, const char *cfgpath, struct buf *err);
void role_free(struct role *r);

/* Set the role's settings and system prompt on c. Returns 0, or -1 with err "FILE:LINE: ...". */
int role_apply(struct conf *c, const struct role *r, struct buf *err);
/* The same, leaving alone what was given on the command line or in the environment
 * (conf_given): a resume taking the role its conversation was held with. */
int role_apply_over(struct conf *c, const struct role *r, struct buf *err);
/* 1 when the role sets key. */
int role_sets(const struct role *r, const char *key);

/* Drop c's role: the settings a role may make (its prompt, model, sampling, extra_body) go
 * back to those of c's profile, read again from c->path (the built-in defaults without a
 * file; the command line's are not kept). Returns 0, or -1 with err set. */
int role_drop(struct conf *c, struct buf *err);
/* The same, leaving alone what was given on the command line or in the environment. */
int role_drop_over(struct conf *c, struct buf *err);

/* The known role names, sorted, each once (a user file hiding a built-in): a NULL-terminated
 * array of new strings (free with util_strv_free); *sources (when not NULL) gets where each
 * comes from. */
char **role_names(const char *cfgpath, const char ***sources);

#endif
