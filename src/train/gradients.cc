// Gradient clipping by global norm: see gradients.h.
#include "train/gradients.h"

#include <ATen/ops/_foreach_norm.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <cmath>

namespace nmt {

torch::Tensor clip_gradients(const std::vector<torch::Tensor>& params, double max_norm, ClipRead read) {
  TORCH_CHECK(max_norm > 0, "clip_gradients: max_norm must be positive, got ", max_norm);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({}, params.empty() ? torch::TensorOptions() : params[0].options());
  // One kernel for every gradient's norm on CUDA (a loop of reductions on the CPU).
  auto norm = torch::stack(at::_foreach_norm(grads, 2)).norm(2);  // []
  if (!std::isfinite(max_norm)) return norm;
  if (read == ClipRead::kAuto) read = grads[0].is_cpu() ? ClipRead::kNow : ClipRead::kDeferred;
  if (read == ClipRead::kNow) {
    const double coef = max_norm / (norm.item<double>() + 1e-6);
    if (coef < 1 || !std::isfinite(coef))
      for (auto& g : grads) g.mul_(coef);
    return norm;
  }
  auto coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);  // [], NaN stays NaN
  for (auto& g : grads) g.mul_(coef);
  return norm;
}

}  // namespace nmt
