// Device resolution and CPU thread configuration.
#include "model/device.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <torch/version.h>

#include "base/blas_kernels.h"
#include "base/error.h"
#include "base/format.h"
#include "nmt_commit.h"  // generated: NMT_COMMIT (cmake/commit.cmake)
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

int parallel_for_threads(int64_t n) {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (begin < end) seen.insert(std::this_thread::get_id());
  });
  return static_cast<int>(seen.size());
}

int fitted_threads(int max_threads, int cores, double others) {
  const int free_cores = static_cast<int>(std::floor(cores - std::max(0.0, others) + 0.3));
  return std::max(1, std::min(max_threads, free_cores));
}

ThreadGovernor::ThreadGovernor(int max_threads, double interval_seconds, double first_interval_seconds)
    : max_threads_(std::max(1, max_threads)),
      threads_(std::max(1, max_threads)),
      cores_(static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)))),
      interval_(interval_seconds),
      first_interval_(std::min(first_interval_seconds, interval_seconds)),
      last_(sample()) {}

ThreadGovernor::Sample ThreadGovernor::sample() {
  Sample s;
  s.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return s;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  s.machine_busy = (user + nice + system + irq + softirq + steal) / tick;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return s;
  s.own = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  s.ok = true;
  return s;
}

int ThreadGovernor::tick() {
  if (max_threads_ == 1) return threads_;
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_.wall < (looked_ ? interval_ : first_interval_)) return threads_;
  looked_ = true;
  const Sample s = sample();
  if (!s.ok || !last_.ok) {
    last_ = s;
    return threads_;
  }
  const double wall = s.wall - last_.wall;
  const double others = std::max(0.0, (s.machine_busy - last_.machine_busy) - (s.own - last_.own)) / wall;  // cores
  last_ = s;
  const int want = fitted_threads(max_threads_, cores_, others);
  if (want != threads_) {
    spdlog::info("threads: {} -> {} (other processes keep {:.1f} of {} busy)", threads_, want, others,
                 counted(cores_, "core"));
    threads_ = set_threads(want);
  }
  return threads_;
}

std::string blas_description() {
  std::string threading;
  switch (openblas_parallel()) {
    case 0: threading = "sequential"; break;
    case 1: threading = "pthreads"; break;
    case 2: threading = "OpenMP"; break;
    default: return "BLAS";
  }
  // The kernel family OpenBLAS runs and how it came to (base/blas_kernels.h):
  // on an AVX-512 CPU its Prescott kernels trained 2.9x slower than Cooperlake.
  const BlasKernels k = blas_kernels();
  if (k.family.empty()) return "OpenBLAS (" + threading + ")";
  return k.library + " (" + threading + ", " + k.family + " kernels, " + k.how + ")";
}

namespace {
bool set_aten_capability = false;  // prefer_avx512_kernels() set ATEN_CPU_CAPABILITY
}  // namespace

bool prefer_avx512_kernels() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (std::getenv("ATEN_CPU_CAPABILITY") != nullptr) return false;
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
    return false;
  set_aten_capability = setenv("ATEN_CPU_CAPABILITY", "avx512", /*overwrite=*/0) == 0;
  return set_aten_capability;
#else
  return false;
#endif
}

std::string aten_kernels_description() {
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  if (env == nullptr) return "default";
  std::string level = env;
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return set_aten_capability ? level : level + ", set by ATEN_CPU_CAPABILITY";
}

std::string describe_device(const torch::Device& device) {
  if (device.is_cuda()) return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
  return "cpu (" + blas_description() + ", LibTorch " + aten_kernels_description() + " kernels, threads " +
         std::to_string(torch::get_num_threads()) + ")";
}

#ifndef NMT_VERSION
#define NMT_VERSION "unknown"
#endif

std::string nmt_build() { return std::string("nmt ") + NMT_VERSION + " (commit " + NMT_COMMIT + ")"; }

std::string version_string() {
  const bool cuda = torch::cuda::is_available();
  std::string spm;
  try {
    spm = Tokenizer::module_path();
  } catch (const Error& e) {
    spm = std::string("not loaded: ") + e.what();
  }
  return nmt_build() + "\nLibTorch " + TORCH_VERSION +
         "\nCUDA: " + (cuda ? "available, " + std::to_string(torch::cuda::device_count()) + " device(s)" : "not available") +
         "\nBLAS: " + blas_description() + "\nLibTorch CPU kernels: " + aten_kernels_description() +
         "\nSentencePiece module: " + spm;
}

bool keep_freed_memory() {
#if defined(__GLIBC__)
  // No block from mmap (M_MMAP_MAX 0), so none is unmapped on free; and the
  // heap's free top is never given back (M_TRIM_THRESHOLD at its maximum).
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
#else
  return false;
#endif
}

torch::Device start_runtime(const RuntimeOptions& opt, int* threads) {
  prefer_avx512_kernels();
  keep_freed_memory();
  const int n = set_threads(opt.threads);
  if (threads != nullptr) *threads = n;
  return resolve_device(opt.device);
}

}  // namespace nmt
