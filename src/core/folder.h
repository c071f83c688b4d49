/* folder.h - the files of a folder attachment (-f DIR, /attach DIR): the walk, in a
 * deterministic order (full paths in byte order, as `git ls-files` lists them), honouring
 * the .gitignore files it meets (core/gitignore.h; .git is always left out, and not listed:
 * it is never wanted), with a limit
 * on files and on bytes, and a listing of everything left out and why.
 *
 * Symbolic links, devices, FIFOs and sockets are left out (never followed, never opened);
 * a file is read only when it fits in what is left of the byte limit (bounded memory);
 * the walk looks at FOLDER_SCAN_MAX entries at most and goes FOLDER_DEPTH_MAX folders deep.
 * Once the limit is reached every later file is listed as left out "over the limit". */
#ifndef TT_FOLDER_H
#define TT_FOLDER_H
#include <stddef.h>

#include "base/buf.h"

#define FOLDER_LIST_MAX 50      /* left-out entries named in the listing; the rest counted */
#define FOLDER_SCAN_MAX 100000  /* directory entries looked at */
#define FOLDER_DEPTH_MAX 64

struct folder_limits {
    size_t max_files; /* files taken at most (attach_max_files) */
    size_t max_bytes; /* their bytes together at most (attach_max_bytes) */
};

struct folder_report {
    size_t files, bytes; /* taken */
    size_t left_out;     /* entries left out (an ignored folder counts once) */
    size_t ignored;      /* of which by .gitignore or .git */
    int truncated;       /* the limit was reached */
    struct buf listing;  /* "path: reason\n" for the first FOLDER_LIST_MAX left out, then
                            "... and N more\n" */
};

/* Called for each candidate file, in order, with its display path (dir as given, "/", the
 * path below it) and its bytes: 0 when taken, or -1 with *why (static: "binary", "an image:
 * attach it on its own") to leave it out. */
typedef int (*folder_take_fn)(void *ud, const char *path, const char *data, size_t len,
                              const char **why);

/* Walk dir. 0 (rep filled; free rep->listing), or -1 with *err (caller frees) when dir cannot
 * be read as a folder. */
int folder_walk(const char *dir, const struct folder_limits *lim, folder_take_fn take, void *ud,
                struct folder_report *rep, char **err);

#endif
