/* cpu.h - which x86 extensions this CPU has, for the few loops that have a SIMD variant.
 *
 * Read from what the C library's loader found at start-up (glibc 2.33's <sys/platform/x86.h>),
 * not by asking the CPU again: every process already pays the loader's cpuid, and each
 * further one is a trap to the hypervisor on a VM (~20 us on the project's VM, which made
 * libgcc's start-up constructor behind __builtin_cpu_supports cost 0.15-0.3 ms a run).
 * "Active" means the CPU has it and the kernel saves its registers. Elsewhere, the compiler's
 * own probe. */
#ifndef TOKTERM_CPU_H
#define TOKTERM_CPU_H

#if defined(__x86_64__) && defined(__GNUC__)
#ifdef HAVE_SYS_PLATFORM_X86_H
#include <sys/platform/x86.h>
/* CPU_FEATURE_ACTIVE's own inline function shifts a signed 1 by the bit's place: undefined
 * for bit 31 (AVX512VL), which UBSan stops at. The same lookup, with an unsigned shift. */
static inline int cpu_glibc_active(unsigned index)
{
    const unsigned words = 4, bits = 8 * sizeof(unsigned);
    const struct cpuid_feature *leaf = __x86_get_cpuid_feature_leaf(index / (bits * words));
    unsigned reg = index % (bits * words);
    return (int)((leaf->active_array[reg / bits] >> (reg % bits)) & 1u);
}
#define CPU_HAS(glibc_name, gcc_name) cpu_glibc_active(x86_cpu_##glibc_name)
#else
#define CPU_HAS(glibc_name, gcc_name) (__builtin_cpu_supports(gcc_name) != 0)
#endif

/* The value of expr, worked out on the first call and kept (each file that calls the function
 * keeps its own answer; the threads that ask first all store the same). */
#define CPU_ONCE(expr)                                                                         \
    do {                                                                                       \
        static int has_ = -1;                                                                  \
        int v_ = __atomic_load_n(&has_, __ATOMIC_RELAXED);                                     \
        if (v_ < 0)                                                                            \
            __atomic_store_n(&has_, v_ = (expr), __ATOMIC_RELAXED);                            \
        return v_;                                                                             \
    } while (0)

/* AVX2: api.c's 32-byte scan of the stream's JSON. */
static inline int cpu_avx2(void)
{
    CPU_ONCE(CPU_HAS(AVX2, "avx2"));
}

/* AVX-512 BW and VL with BMI1/2: api.c's 64-byte scan. */
static inline int cpu_avx512_scan(void)
{
    CPU_ONCE(CPU_HAS(AVX512BW, "avx512bw") && CPU_HAS(AVX512VL, "avx512vl") &&
             CPU_HAS(BMI1, "bmi") && CPU_HAS(BMI2, "bmi2"));
}

/* The SHA extensions with SSSE3 and SSE4.1: sha256.c's rounds. */
#ifdef HAVE_SYS_PLATFORM_X86_H
static inline int cpu_sha_ni(void)
{
    return CPU_HAS(SHA, "sha") && CPU_HAS(SSE4_1, "sse4.1") && CPU_HAS(SSSE3, "ssse3");
}
#else
#include <cpuid.h>
static inline int cpu_sha_ni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9)) &&
           __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif
#endif

#endif
