// Each row's largest value and its column, as greedy search picks its next
// token: a vectorized CPU kernel in place of LibTorch's max(1).
#pragma once
#include <torch/types.h>

#include <utility>

namespace nmt {

// Each row's largest value and its column: x [R, N] (N >= 1) -> {values [R]
// (x's dtype), columns [R] int64}, as x.max(1) gives, the first column on ties
// and a NaN winning wherever one is. Float32 on the CPU in two vectorized
// passes per row (rows in parallel on LibTorch's threads); any other tensor
// through x.max(1).
std::pair<torch::Tensor, torch::Tensor> max_per_row(const torch::Tensor& x);

}  // namespace nmt
