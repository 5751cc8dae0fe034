// Training a batch as parts side by side: see batch_parts.h.
#include "train/batch_parts.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "model/model.h"

namespace nmt {

int64_t batch_parts(int64_t want, int threads, int64_t sentences, const torch::Device& device) {
  if (!device.is_cpu()) return 1;
  if (want > 0) return std::max<int64_t>(1, std::min(want, sentences));
  const int64_t n = std::max(1, threads);
  if (n == 1) return 1;
  if (sentences >= n * kPartsPerThread * kMinPartSentences) return n * kPartsPerThread;
  return sentences >= n * kMinPartSentences ? n : 1;
}

std::string describe_batch_parts(int64_t want, int threads, const torch::Device& device) {
  const int64_t n = std::max(1, threads);
  if (!device.is_cpu() || want == 1 || (want == 0 && n == 1)) return "whole batches";
  if (want > 1) return std::to_string(want) + " parts each";
  return std::to_string(n) + " parts for batches of " + std::to_string(n * kMinPartSentences) + " sentences or more, " +
         std::to_string(n * kPartsPerThread) + " for " + std::to_string(n * kPartsPerThread * kMinPartSentences) +
         " or more";
}

std::vector<std::pair<int64_t, int64_t>> part_ranges(int64_t sentences, int64_t parts) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t p = 0; p < parts; ++p) ranges.emplace_back(sentences * p / parts, sentences * (p + 1) / parts);
  return ranges;
}

uint64_t mix_seed(uint64_t a, uint64_t b) {  // splitmix64 of a, then of that xor b
  auto split = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return split(split(a) ^ b);
}

namespace {
// f(p) for every p in [0, parts), each of `workers` threads taking the next
// part until none is left; the first exception is rethrown after all ended.
template <class F>
void for_each_part(int64_t parts, int workers, const F& f) {
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t p; (p = next.fetch_add(1)) < parts;) {
      try {
        f(p);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  const int n = static_cast<int>(std::min<int64_t>(std::max(workers, 1), parts));
#ifdef _OPENMP
  if (n > 1 && !at::in_parallel_region()) {
#pragma omp parallel num_threads(n)
    work();
  } else {
    work();
  }
#else
  work();
#endif
  if (error) std::rethrow_exception(error);
}
}  // namespace

void run_parts(int64_t parts, int workers, uint64_t seed, const std::function<void(int64_t)>& forward) {
  for_each_part(parts, workers, [&](int64_t p) {
    DropoutRng rng(mix_seed(seed, static_cast<uint64_t>(p)));
    forward(p);
  });
}

void backward_parts(const std::vector<torch::Tensor>& losses, double scale, const std::vector<torch::Tensor>& params,
                    int workers) {
  const int64_t parts = static_cast<int64_t>(losses.size());
  std::vector<std::vector<torch::Tensor>> grads(losses.size());
  for_each_part(parts, workers, [&](int64_t p) {
    grads[p] = torch::autograd::grad({losses[p] * scale}, params, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
  });
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor sum;
    for (const auto& g : grads) {
      if (!g[i].defined()) continue;
      if (!sum.defined()) sum = g[i].clone();
      else sum.add_(g[i]);
    }
    params[i].mutable_grad() = sum.defined() ? sum : torch::zeros_like(params[i]);  // a handle: const allows it
  }
}

}  // namespace nmt
