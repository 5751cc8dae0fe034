// Device resolution and CPU thread configuration.
#include "device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <thread>

#include <torch/cuda.h>

#include "error.h"

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

int set_threads(int n) {
  if (n <= 0) {
    const char* env = std::getenv("NMT_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
  // OpenBLAS keeps its own pool; LibTorch does not size it. Without this, n
  // LibTorch threads each start OpenBLAS's threads and oversubscribe the cores.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
  return n;
}

std::string describe_device(const torch::Device& device) {
  if (device.is_cuda()) return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
  return "cpu (" + std::to_string(torch::get_num_threads()) + " threads)";
}

}  // namespace nmt
