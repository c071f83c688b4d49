/* curl_dl.h - libcurl, loaded with dlopen() when the network is first needed.
 *
 * Mapping libcurl at start-up means mapping and relocating its dependency tree too (OpenSSL,
 * GnuTLS, Kerberos, LDAP, libssh2, RTMP...): ~14 ms of every start on the machines tokterm is
 * measured on, for `tokterm ls`, `show` and `search` as much as for a request. So tokterm does
 * not link it: curl_dl_load() opens the library (its soname comes from configure), fills a
 * table of function pointers and runs curl_global_init, once per process (thread-safe). The
 * network thread (net_start), `tokterm doctor`, the local-server probe and --version load it.
 *
 * Include this header instead of <curl/curl.h>: it includes it for the types and constants
 * (without curl's GCC type-checking macros, which would call the real functions) and
 * redirects each curl_*() function tokterm calls through the table. A function that is not in
 * CURL_DL_FUNCS fails to link with "undefined reference to curl_...": add it to the list and
 * to the #defines below. */
#ifndef TT_CURL_DL_H
#define TT_CURL_DL_H

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/* Every curl_ function tokterm uses, without its prefix. */
#define CURL_DL_FUNCS(X)                                                                      \
    X(easy_cleanup) X(easy_getinfo) X(easy_init) X(easy_perform) X(easy_setopt)               \
    X(easy_strerror) X(global_cleanup) X(global_init) X(multi_add_handle) X(multi_cleanup)    \
    X(multi_info_read) X(multi_init) X(multi_perform) X(multi_poll) X(multi_remove_handle)    \
    X(multi_setopt) X(multi_wakeup) X(share_cleanup) X(share_init) X(share_setopt)            \
    X(slist_append) X(slist_free_all) X(version_info)

/* The table: one pointer per function, with the type of its declaration in <curl/curl.h>. */
struct curl_dl {
#define CURL_DL_MEMBER(name) __typeof__(curl_##name) *name;
    CURL_DL_FUNCS(CURL_DL_MEMBER)
#undef CURL_DL_MEMBER
};
extern struct curl_dl curl_dl_api;

/* Load the library and every function of the list, and initialise it (only the first call
 * does the work). 0 on success; -1 with *why (when why != NULL) pointing to a message that
 * says what to install (static: not freed). */
int curl_dl_load(const char **why);
/* 1 once curl_dl_load has succeeded. */
int curl_dl_loaded(void);
/* A CURLOPT_WRITEFUNCTION that drops the body: for transfers whose body is not read (libcurl's
 * default writes it to stdout, where the answer or --json goes) */
size_t curl_dl_discard(char *ptr, size_t size, size_t nmemb, void *ud);

/* curl.h defines these four as function-like macros (so that each call has three arguments). */
#undef curl_easy_getinfo
#undef curl_easy_setopt
#undef curl_multi_setopt
#undef curl_share_setopt
#define curl_easy_cleanup (curl_dl_api.easy_cleanup)
#define curl_easy_getinfo (curl_dl_api.easy_getinfo)
#define curl_easy_init (curl_dl_api.easy_init)
#define curl_easy_perform (curl_dl_api.easy_perform)
#define curl_easy_setopt (curl_dl_api.easy_setopt)
#define curl_easy_strerror (curl_dl_api.easy_strerror)
#define curl_global_cleanup (curl_dl_api.global_cleanup)
#define curl_global_init (curl_dl_api.global_init)
#define curl_multi_add_handle (curl_dl_api.multi_add_handle)
#define curl_multi_cleanup (curl_dl_api.multi_cleanup)
#define curl_multi_info_read (curl_dl_api.multi_info_read)
#define curl_multi_init (curl_dl_api.multi_init)
#define curl_multi_perform (curl_dl_api.multi_perform)
#define curl_multi_poll (curl_dl_api.multi_poll)
#define curl_multi_remove_handle (curl_dl_api.multi_remove_handle)
#define curl_multi_setopt (curl_dl_api.multi_setopt)
#define curl_multi_wakeup (curl_dl_api.multi_wakeup)
#define curl_share_cleanup (curl_dl_api.share_cleanup)
#define curl_share_init (curl_dl_api.share_init)
#define curl_share_setopt (curl_dl_api.share_setopt)
#define curl_slist_append (curl_dl_api.slist_append)
#define curl_slist_free_all (curl_dl_api.slist_free_all)
#define curl_version_info (curl_dl_api.version_info)

#endif
