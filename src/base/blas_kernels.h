// Which OpenBLAS kernel family the process runs, and making it the widest
// one the CPU can run. OpenBLAS (Debian's is built for every x86-64 family)
// picks its kernels when it loads, from the CPU model it recognizes: a CPU
// newer than the library falls back to narrower kernels (SSE3 "Prescott"
// ones, where a GRU training step runs about 3x slower). Such an OpenBLAS
// picks again, reading OPENBLAS_CORETYPE, when told to (its exported
// gotoblas_dynamic_quit() and gotoblas_dynamic_init()), so the fix is to
// switch it before the first product (ensure_best_blas_kernels()).
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
  bool chosen_by_nmt = false;  // nmt set OPENBLAS_CORETYPE (and switched OpenBLAS to it)
  std::string warning;  // non-empty when nmt asked for a family that OpenBLAS did not take
  std::string wider;    // the widest family this CPU and OpenBLAS run, when a user's
                        // OPENBLAS_CORETYPE keeps OpenBLAS on a narrower one; else ""
};

// The kernels of this process, as above. Never fails.
BlasKernels blas_kernels();

// Call first thing in main(), before any BLAS product (and before threads
// that might run one). When the BLAS is OpenBLAS, OPENBLAS_CORETYPE is not
// set and the family OpenBLAS picked ranks below best_blas_family() for this
// CPU, sets OPENBLAS_CORETYPE to the best family and NMT_OPENBLAS_CHOICE to
// what OpenBLAS had picked (so that child processes load the best family
// and blas_kernels() tells both), and has OpenBLAS pick again. A user's own
// OPENBLAS_CORETYPE is never changed, nor is anything done when
// NMT_OPENBLAS_CHOICE is already set (a child of such a process). When the
// library cannot pick again, or does not take the family, it is left on its
// own choice, both variables are unset and blas_kernels().warning says so.
// Never fails. For tests, NMT_TEST_OPENBLAS_OWN_CHOICE stands in for the
// family OpenBLAS picked by itself.
void ensure_best_blas_kernels();

// One log line about the kernels when nmt chose them or a choice failed
// ("BLAS: OpenBLAS picked Prescott kernels ...; nmt runs Cooperlake ..."), or
// when a user's OPENBLAS_CORETYPE keeps narrower kernels than the CPU runs
// ("BLAS: OPENBLAS_CORETYPE=Haswell keeps ...; this CPU ... runs its
// Cooperlake kernels ..."), else "". Never fails.
std::string blas_choice_log_line();

}  // namespace nmt
