// Device choice and CPU thread settings.
#pragma once
#include <torch/types.h>

#include <string>

#include "base/options.h"

namespace nmt {

// "cpu", "cuda", "cuda:N" or "auto" (CUDA when available). Throws nmt::Error
// for an unknown name or when CUDA is asked for but not available.
torch::Device resolve_device(const std::string& name);

// Sets LibTorch's intra-op threads and, when the process uses OpenBLAS, its
// thread count. n <= 0 picks NMT_THREADS from the environment, else the
// number of cores. Returns the number of threads set.
int set_threads(int n);

// How many distinct threads one at::parallel_for of this library spreads
// `n` items over (grain 1): min(n, LibTorch's intra-op threads) when the
// library is built with OpenMP as LibTorch is; 1 when it is not, since ATen's
// parallel_for is a header template that runs its body serially in a file
// compiled without OpenMP (and then no batch part or translation worker ever
// runs beside another). Never throws.
int parallel_for_threads(int64_t n);

// The thread count for a machine of `cores` cores on which other processes
// keep `others` cores busy: the cores left, at least 1 and at most
// `max_threads`; a background load under 0.3 of a core costs no thread.
int fitted_threads(int max_threads, int cores, double others);

// Fits the CPU thread count to the cores that other processes leave free.
// With as many threads as cores, every parallel region waits for the thread
// whose core another busy process shares, so the run slows to a fraction of
// its fair share; on the free cores alone it keeps them. The first look
// comes `first_interval` seconds after construction (a run started beside
// busy work fits itself within its first steps), then one every `interval`
// seconds (longer windows, so that short bursts of other work do not move
// the count): tick() compares the machine's busy time (/proc/stat, steal
// included) with this process's CPU time (getrusage) and calls set_threads()
// when fitted_threads() changes. Where /proc/stat cannot be read it never
// changes anything. Not thread-safe: call from the thread that runs the steps.
class ThreadGovernor {
 public:
  ThreadGovernor(int max_threads, double interval_seconds = 5.0, double first_interval_seconds = 1.0);
  // Call between steps; returns the thread count in use. Logs each change.
  int tick();
  int threads() const { return threads_; }

 private:
  struct Sample {
    double wall = 0, machine_busy = 0, own = 0;  // seconds
    bool ok = false;
  };
  static Sample sample();
  int max_threads_, threads_, cores_;
  double interval_, first_interval_;
  bool looked_ = false;  // whether a tick has taken its first look
  Sample last_;
};

// Keeps the memory that tensors free inside the process for the next ones.
// A training step frees and reallocates the same large tensors (logits of
// [tokens, vocab] are over 100 MB); glibc's malloc serves blocks over its
// mmap threshold with fresh mappings and returns them on free, so every step
// page-faults and zeroes them again (about 12% of a CPU step in the kernel).
// With glibc this serves every block from the heap and never trims it: the
// resident size stays at the run's peak instead of falling between steps.
// Returns false (and changes nothing) where the C library is not glibc or
// malloc is not glibc's (AddressSanitizer's, whose mallopt does nothing).
bool keep_freed_memory();

// Lets LibTorch's own CPU kernels (element-wise, reductions, softmax) use
// AVX-512 on CPUs that have it (F, BW, VL and DQ), unless the environment's
// ATEN_CPU_CAPABILITY names a level: LibTorch 1.13 keeps them opt-in, and on
// the AVX-512 VM they made training and decoding about 1.05x faster
// (bench/results/aten-avx512-*.txt). Takes effect only before LibTorch's
// first CPU kernel runs; returns whether it set the variable. Never fails.
bool prefer_avx512_kernels();

// The level of LibTorch's CPU kernels for logs: "AVX512" when
// prefer_avx512_kernels() chose it, ATEN_CPU_CAPABILITY's value with ", set by
// ATEN_CPU_CAPABILITY" when the environment did, else "default" (LibTorch's
// own choice: AVX2 on such CPUs for 1.13).
std::string aten_kernels_description();

// Applies `opt` for a tool: prefer_avx512_kernels(), keep_freed_memory(),
// set_threads(opt.threads), then resolve_device(opt.device). Returns the
// device; *threads (when given)
// receives the thread count set. Throws nmt::Error as resolve_device does.
torch::Device start_runtime(const RuntimeOptions& opt, int* threads = nullptr);

// This build of nmt in one line, "nmt 0.1.0 (commit abc1234)": what run
// folders and checkpoints record as their writer. Never throws.
std::string nmt_build();

// What --version prints: nmt's version and commit, the LibTorch version,
// whether CUDA is available (and how many devices), and the BLAS in use.
std::string version_string();

// A line describing the device and threads, for logs.
std::string describe_device(const torch::Device& device);

}  // namespace nmt
