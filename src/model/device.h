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

// Applies `opt` for a tool: set_threads(opt.threads), then
// resolve_device(opt.device). Returns the device; *threads (when given)
// receives the thread count set. Throws nmt::Error as resolve_device does.
torch::Device start_runtime(const RuntimeOptions& opt, int* threads = nullptr);

// What --version prints: nmt's version and commit, the LibTorch version,
// whether CUDA is available (and how many devices), and the BLAS in use.
std::string version_string();

// A line describing the device and threads, for logs.
std::string describe_device(const torch::Device& device);

}  // namespace nmt
