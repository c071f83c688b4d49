/* redis_dl.h - hiredis, loaded with dlopen() when the shared state first connects.
 *
 * Only `state = redis://...` uses hiredis; linked, it was mapped and relocated at every start
 * (~60 KB of every scripted run's resident memory, the stream's peak RSS against curl). So
 * tokterm does not link it: redis_dl_load() opens the library (its soname comes from
 * configure) and fills a table of function pointers, once per process (thread-safe); the
 * state's first connection attempt calls it.
 *
 * Include this header instead of <hiredis/hiredis.h>: it includes it for the types and
 * constants and redirects each function state.c calls through the table. A function that is
 * not in REDIS_DL_FUNCS fails to link: add it to the list and to the #defines below. */
#ifndef TT_REDIS_DL_H
#define TT_REDIS_DL_H

#include <hiredis/hiredis.h>

/* Every hiredis function tokterm uses. */
#define REDIS_DL_FUNCS(X)                                                                     \
    X(redisAppendCommandArgv) X(redisBufferRead) X(redisBufferWrite)                          \
    X(redisConnectUnixWithTimeout) X(redisConnectWithTimeout) X(redisFree)                    \
    X(redisReaderGetReply) X(redisSetTimeout) X(freeReplyObject)

/* The table: one pointer per function (dl_ and its name: the names are the macros below), with
 * the type of its declaration in <hiredis.h>. */
struct redis_dl {
#define REDIS_DL_MEMBER(name) __typeof__(name) *dl_##name;
    REDIS_DL_FUNCS(REDIS_DL_MEMBER)
#undef REDIS_DL_MEMBER
};
extern struct redis_dl redis_dl_api;

/* Load the library and every function of the list (only the first call does the work). 0 on
 * success; -1 with *why pointing to a message that says what to install (static). */
int redis_dl_load(const char **why);

#define redisAppendCommandArgv (redis_dl_api.dl_redisAppendCommandArgv)
#define redisBufferRead (redis_dl_api.dl_redisBufferRead)
#define redisBufferWrite (redis_dl_api.dl_redisBufferWrite)
#define redisConnectUnixWithTimeout (redis_dl_api.dl_redisConnectUnixWithTimeout)
#define redisConnectWithTimeout (redis_dl_api.dl_redisConnectWithTimeout)
#define redisFree (redis_dl_api.dl_redisFree)
#define redisReaderGetReply (redis_dl_api.dl_redisReaderGetReply)
#define redisSetTimeout (redis_dl_api.dl_redisSetTimeout)
#define freeReplyObject (redis_dl_api.dl_freeReplyObject)

#endif
