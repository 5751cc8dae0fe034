// Device resolution and CPU thread configuration.
#include "model/device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <thread>

#include <torch/cuda.h>
#include <torch/utils.h>
#include <torch/version.h>

#include "base/error.h"
#include "text/tokenizer.h"

namespace nmt {

torch::Device resolve_device(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw Error("device '" + name + "' requested but CUDA is not available (this LibTorch " +
                  "was built without CUDA or no GPU is visible); use --device cpu");
    try {
      return torch::Device(name);
    } catch (const c10::Error&) {
      throw Error("bad device '" + name + "' (expected cpu, cuda, cuda:N or auto)");
    }
  }
  throw Error("bad device '" + name + "' (expected cpu, cuda, cuda:N or auto)");
}

namespace {

// OpenBLAS's threading model: 0 sequential, 1 pthreads, 2 OpenMP; -1 when
// the BLAS in this process is not OpenBLAS.
int openblas_parallel() {
  using GetFn = int (*)();
  auto fn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  return fn ? fn() : -1;
}

}  // namespace

int set_threads(int n) {
  if (n <= 0) {
    const char* env = std::getenv("NMT_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  using SetFn = void (*)(int);
  auto set_blas = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  // OpenBLAS with pthreads keeps a pool of its own: n LibTorch (OpenMP)
  // threads each entering n BLAS threads oversubscribe the cores (4x slower
  // GRU steps, bench/results/blas-*.txt). There the BLAS gets the threads and
  // LibTorch's element-wise work runs on one. OpenBLAS built with OpenMP
  // shares LibTorch's pool, so both get n.
  const bool own_pool = openblas_parallel() == 1;
  torch::set_num_threads(own_pool ? 1 : n);
  if (set_blas) set_blas(n);
  return n;
}

std::string blas_description() {
  switch (openblas_parallel()) {
    case 0: return "OpenBLAS (sequential)";
    case 1: return "OpenBLAS (pthreads)";
    case 2: return "OpenBLAS (OpenMP)";
    default: return "BLAS";
  }
}

std::string describe_device(const torch::Device& device) {
  if (device.is_cuda()) return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
  return "cpu (" + blas_description() + ", LibTorch threads " + std::to_string(torch::get_num_threads()) + ")";
}

std::string version_string() {
#ifndef NMT_VERSION
#define NMT_VERSION "unknown"
#endif
#ifndef NMT_COMMIT
#define NMT_COMMIT "unknown"
#endif
  const bool cuda = torch::cuda::is_available();
  std::string spm;
  try {
    spm = Tokenizer::module_path();
  } catch (const Error& e) {
    spm = std::string("not loaded: ") + e.what();
  }
  return std::string("nmt ") + NMT_VERSION + " (commit " + NMT_COMMIT + ")\nLibTorch " + TORCH_VERSION +
         "\nCUDA: " + (cuda ? "available, " + std::to_string(torch::cuda::device_count()) + " device(s)" : "not available") +
         "\nBLAS: " + blas_description() + "\nSentencePiece module: " + spm;
}

torch::Device start_runtime(const RuntimeOptions& opt, int* threads) {
  const int n = set_threads(opt.threads);
  if (threads != nullptr) *threads = n;
  return resolve_device(opt.device);
}

}  // namespace nmt
