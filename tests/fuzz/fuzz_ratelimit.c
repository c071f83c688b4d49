/* fuzz_ratelimit.c - rate-limit header parsing, pacing, retry policy and persistence.
 *
 * The target and its invariants live in tests/unit/fuzz_ratelimit.c (written with the
 * ratelimit module, where `make check` also runs it as a mutation test); this file builds that
 * same code as a libFuzzer target and as the replay entry fuzz_ratelimit_one(). With
 * TT_LIBFUZZER set, the unit file has no main() and a broken invariant aborts. */
#include <stddef.h>
#include <stdint.h>

#ifndef TT_LIBFUZZER
#define TT_LIBFUZZER 1
#define LLVMFuzzerTestOneInput fuzz_ratelimit_one
#endif
/* Its violation counters serve only its own main(), which this build leaves out. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "../unit/fuzz_ratelimit.c"
