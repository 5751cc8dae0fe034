// The products of a decoder step and the per-batch decoder memory (step_weights.h).
#include "model/step_weights.h"

#include "model/packed_linear.h"

namespace nmt {

bool StepWeights::reduced_for(const torch::Tensor& x) const {
  return precision != Precision::kFloat32 && !torch::GradMode::is_enabled() && x.device().is_cpu() && x.dim() > 0 &&
         x.numel() / x.size(-1) >= min_rows(precision);  // rows, however many leading dimensions
}

torch::Tensor linear_t(const torch::Tensor& x, const torch::Tensor& wt, const torch::Tensor& b) {
  if (x.dim() == 2) return torch::addmm(b, x, wt);
  auto shape = x.sizes().vec();
  shape.back() = wt.size(1);
  return torch::addmm(b, x.reshape({-1, x.size(-1)}), wt).view(shape);
}

torch::Tensor step_linear(const torch::Tensor& x, const std::shared_ptr<const PackedLinear>& p, const torch::Tensor& wt,
                          const torch::Tensor& b) {
  if (p && x.dim() == 2 && x.device().is_cpu() && !torch::GradMode::is_enabled()) return (*p)(x);
  return linear_t(x, wt, b);
}

DecoderMemory DecoderMemory::repeat(int64_t copies) const {
  if (copies == 1) return *this;
  DecoderMemory m = *this;
  m.keys = keys.repeat_interleave(copies, 0);
  m.values = values.repeat_interleave(copies, 0);
  m.mask = mask.repeat_interleave(copies, 0);
  m.mask_bias = mask_bias.repeat_interleave(copies, 0);
  if (query_mask.defined()) m.query_mask = query_mask.repeat_interleave(copies, 0);
  if (prev_mask.defined()) m.prev_mask = prev_mask.repeat_interleave(copies, 0);
  return m;
}

}  // namespace nmt
