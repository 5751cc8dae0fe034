// NMT_VECTOR_CLONES: compiles a hot loop for AVX-512, AVX2 + FMA and the
// baseline (GCC's target_clones, GCC 12 or later on x86-64, which names the
// x86-64-v3/v4 levels), the CPU picking its version at load time; nothing
// elsewhere, and nothing under AddressSanitizer.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
    !defined(__SANITIZE_ADDRESS__)
#define NMT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NMT_VECTOR_CLONES
#endif
