/* probe.h - requests made outside the network thread (the local-server probe, and
 * `tokterm doctor`'s look at an endpoint) and what libcurl is. The rest of the program never
 * includes curl_dl.h: only net/ talks to libcurl. */
#ifndef TT_NET_PROBE_H
#define TT_NET_PROBE_H

/* libcurl for --version: "8.5.0 (OpenSSL/3.0.13, HTTP/2)", or "(not loadable) (-)" with *why
 * (when why != NULL) pointing to what to install (static). The string is malloc'd. */
char *net_library_version(const char **why);

/* Does GET url answer 200 within timeout_ms? 1 yes, 0 no (nothing, an error, libcurl missing). */
int net_answers(const char *url, long timeout_ms);

/* At the very end of the process: libcurl's global cleanup, when it was loaded. */
void net_library_cleanup(void);

#endif
