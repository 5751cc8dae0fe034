// Which OpenBLAS kernel family the process runs, and making it the widest
// one the CPU can run. OpenBLAS (Debian's is built for every x86-64 family)
// picks its kernels once, when it loads, from the CPU model it recognizes: a
// CPU newer than the library falls back to SSE3 "Prescott" kernels, and a
// GRU training step then runs about 3x slower. OpenBLAS reads
// OPENBLAS_CORETYPE only at load time, so the fix is to run the tool again
// with it set, before anything else happens (ensure_best_blas_kernels()).
// No LibTorch here: only the CPU's feature bits and OpenBLAS's C symbols.
#pragma once
#include <functional>
#include <string>

namespace nmt {

// The CPU features that decide which OpenBLAS kernel families can run, each
// counted only when the operating system saves the registers it needs.
struct CpuFeatures {
  bool sse42 = false;        // SSE4.2 (Nehalem kernels)
  bool avx = false;          // AVX (Sandybridge kernels)
  bool avx2 = false;         // AVX2 and FMA (Haswell, Zen kernels)
  bool avx512 = false;       // AVX-512 F, CD, BW, DQ and VL (SkylakeX kernels)
  bool avx512_bf16 = false;  // AVX512-BF16 (Cooperlake kernels)
  bool amx = false;          // AMX tiles with bfloat16 (Sapphire Rapids kernels)

  // Reads the features of the CPU this process runs on (cpuid and xgetbv).
  // All false on a CPU that is not x86-64. Never fails.
  static CpuFeatures detect();
  // "AVX-512 with BF16 and AMX", "AVX2", "SSE4.2", "no SSE4.2".
  std::string describe() const;
};

// The rank of an OpenBLAS kernel family by the instructions it uses (the
// names openblas_get_corename() returns, any case): 0 for SSE2/SSE3 families
// (Prescott, Core2, Atom, Opteron...), 1 Nehalem, 2 Sandybridge and
// Bulldozer's kin, 3 Haswell and Zen, 4 SkylakeX, 5 Cooperlake, 6
// SapphireRapids; -1 for a name it does not know.
int blas_family_rank(const std::string& family);

// The widest family `cpu` can run among those `has_family` says this
// OpenBLAS was built with (it gets the names "SapphireRapids", "Cooperlake",
// "SkylakeX", "Haswell", "Sandybridge", "Nehalem"); "" when none applies.
std::string best_blas_family(const CpuFeatures& cpu, const std::function<bool(const std::string&)>& has_family);

// How the process came to run its BLAS kernels.
struct BlasKernels {
  std::string library;  // "OpenBLAS 0.3.21", or "" when the BLAS in this process is not OpenBLAS
  std::string family;   // the kernel family in use ("Cooperlake"), "" when unknown
  std::string how;      // why that family: "OpenBLAS's own choice", "set by OPENBLAS_CORETYPE", or nmt's reason
  bool chosen_by_nmt = false;  // nmt set OPENBLAS_CORETYPE (the tool ran again with it)
  std::string warning;  // non-empty when nmt asked for a family that OpenBLAS did not take
  std::string wider;    // the widest family this CPU and OpenBLAS run, when a user's
                        // OPENBLAS_CORETYPE keeps OpenBLAS on a narrower one; else ""
};

// The kernels of this process, as above. Never fails.
BlasKernels blas_kernels();

// Call first thing in main(), before any other work (it may replace the
// process). When the BLAS is OpenBLAS, OPENBLAS_CORETYPE is not set and the
// family OpenBLAS picked ranks below best_blas_family() for this CPU, runs
// this executable again (/proc/self/exe, the same arguments) with
// OPENBLAS_CORETYPE set to the best family and NMT_OPENBLAS_CHOICE recording
// what OpenBLAS had picked; blas_kernels() of the new process tells both. A
// user's own OPENBLAS_CORETYPE is never changed, nor is anything done when
// NMT_OPENBLAS_CHOICE is already set (the second run, or a child of it).
// Returns only when nothing needs doing or the exec fails (then
// blas_kernels().warning says so). For tests, NMT_TEST_OPENBLAS_OWN_CHOICE
// stands in for the family OpenBLAS picked by itself.
void ensure_best_blas_kernels(char** argv);

// The family ensure_best_blas_kernels() would run this executable again
// with, under the present environment; "" when it would return at once.
// Never fails.
std::string blas_restart_family();

// One log line about the kernels when nmt chose them or a choice failed
// ("BLAS: OpenBLAS picked Prescott kernels ...; nmt runs Cooperlake ..."), or
// when a user's OPENBLAS_CORETYPE keeps narrower kernels than the CPU runs
// ("BLAS: OPENBLAS_CORETYPE=Haswell keeps ...; this CPU ... runs its
// Cooperlake kernels ..."), else "". Never fails.
std::string blas_choice_log_line();

}  // namespace nmt
