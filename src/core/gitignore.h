/* gitignore.h - the .gitignore rules of a folder attachment (-f DIR, /attach DIR), as git
 * reads them (gitignore(5)):
 *   - one pattern a line; blank lines and lines starting with "#" are skipped; "\#" and "\!"
 *     start a pattern with those characters; trailing spaces are dropped unless escaped;
 *   - "!" negates: a path a later negation matches is included again (but a file inside an
 *     excluded directory stays out: the walker never enters that directory);
 *   - a trailing "/" matches directories only;
 *   - a pattern with a "/" at its start or middle is anchored to the .gitignore's folder; one
 *     without matches a name at any depth below it;
 *   - "*" and "?" match within one path segment, "[a-z]" / "[!a-z]" a class, "\" escapes;
 *     "**" as a whole segment matches any number of folders ("**" + "/x", "a/" + "**",
 *     "a/" + "**" + "/b"); any other run of "*" is one "*".
 * Files deeper in the tree come later, so their rules win over their parents' (git's order).
 * Matching is git's wildmatch algorithm: polynomial whatever the pattern. */
#ifndef TT_GITIGNORE_H
#define TT_GITIGNORE_H
#include <stddef.h>

struct gitignore;

struct gitignore *gitignore_new(void);
void gitignore_free(struct gitignore *g);
/* Add the rules of a .gitignore text (n bytes) found in folder base: "" for the attached
 * folder itself, else a path relative to it without a trailing "/" ("src/lib"). */
void gitignore_add(struct gitignore *g, const char *base, const char *text, size_t n);
/* Add the rules of a .gitignore above the attached folder, in the same git work tree: lead is
 * the attached folder's path below the .gitignore's folder ("src/lib"); its rules see each
 * path as lead + "/" + path. Add the outermost first. */
void gitignore_add_above(struct gitignore *g, const char *lead, const char *text, size_t n);
/* Forget the rules added for folders below base's parent once the walk leaves base: every
 * rule set whose base is base or below it. */
void gitignore_leave(struct gitignore *g, const char *base);
/* 1 when path (relative to the attached folder, "/"-separated, no trailing "/") is ignored;
 * is_dir: the path is a folder. */
int gitignore_match(const struct gitignore *g, const char *path, int is_dir);
/* git's wildmatch with WM_PATHNAME: 1 when text matches pattern (for the tests). */
int gitignore_wildmatch(const char *pattern, const char *text);

#endif
