// Each row's largest value and its column (row_max.h). The loops are plain
// C++ that the compiler vectorizes, compiled for several x86-64 levels
// (base/vector_clones.h).
#include "search/row_max.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "base/vector_clones.h"

namespace nmt {
namespace {

// The largest of x[0..n) (n >= 1) and its index as LibTorch's max(dim) ranks
// them (a NaN above everything, else the largest value; the first on ties),
// in two passes that vectorize: the maximum and whether there is a NaN over
// sixteen lanes, then the first position holding it, sixteen at a time.
NMT_VECTOR_CLONES std::pair<float, int64_t> max_and_index(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (int64_t a = 0; a < n; ++a) {
    m = x[a] > m ? x[a] : m;
    nan |= x[a] != x[a];
  }
  // Blocks of sixteen until one holds the value sought (m, or a NaN); then within it, or in the tail.
  constexpr int64_t kBlock = 16;
  int64_t k = 0;
  for (; k + kBlock <= n; k += kBlock) {
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int64_t i = k; i < k + kBlock; ++i) hit |= nan ? x[i] != x[i] : x[i] == m;
    if (hit) break;
  }
  k = std::min(k, n - 1);  // (a match exists; this only guards against compilers told NaN cannot occur)
  while (k < n - 1 && !(nan ? x[k] != x[k] : x[k] == m)) ++k;
  return {x[k], k};
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> max_per_row(const torch::Tensor& x) {
  if (x.dim() != 2 || x.size(1) == 0 || !x.device().is_cpu() || x.scalar_type() != torch::kFloat ||
      (x.requires_grad() && torch::GradMode::is_enabled())) {
    auto [values, columns] = x.max(1);
    return {values, columns};
  }
  const auto in = x.contiguous();
  const int64_t R = in.size(0), N = in.size(1);
  auto values = torch::empty({R}, in.options());
  auto columns = torch::empty({R}, in.options().dtype(torch::kInt64));
  const float* xp = in.data_ptr<float>();
  float* vp = values.data_ptr<float>();
  int64_t* cp = columns.data_ptr<int64_t>();
  at::parallel_for(0, R, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) std::tie(vp[r], cp[r]) = max_and_index(xp + r * N, N);
  });
  return {values, columns};
}

}  // namespace nmt
