// Gradient clipping by global norm: see gradients.h.
#include "train/gradients.h"

#include <ATen/ops/_foreach_norm.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <cmath>

namespace nmt {

namespace {

// clip_gradients() on the gradients themselves (at least one).
torch::Tensor clip_list(const std::vector<torch::Tensor>& grads, double max_norm, ClipRead read) {
  TORCH_CHECK(max_norm > 0, "clip_gradients: max_norm must be positive, got ", max_norm);
  torch::NoGradGuard no_grad;
  // One kernel for every gradient's norm on CUDA (a loop of reductions on the CPU).
  auto norm = torch::stack(at::_foreach_norm(grads, 2)).norm(2);  // []
  if (!std::isfinite(max_norm)) return norm;
  if (read == ClipRead::kAuto) read = grads[0].is_cpu() ? ClipRead::kNow : ClipRead::kDeferred;
  if (read == ClipRead::kNow) {
    const double coef = max_norm / (norm.item<double>() + 1e-6);
    if (coef < 1 || !std::isfinite(coef))
      for (auto g : grads) g.mul_(coef);
    return norm;
  }
  auto coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);  // [], NaN stays NaN
  for (auto& g : grads) g.mul_(coef);
  return norm;
}

}  // namespace

torch::Tensor clip_gradients(const std::vector<torch::Tensor>& params, double max_norm, ClipRead read) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) {
    TORCH_CHECK(max_norm > 0, "clip_gradients: max_norm must be positive, got ", max_norm);
    return torch::zeros({}, params.empty() ? torch::TensorOptions() : params[0].options());
  }
  return clip_list(grads, max_norm, read);
}

torch::Tensor clip_gradient(const torch::Tensor& grad, double max_norm, ClipRead read) {
  return clip_list({grad}, max_norm, read);
}

}  // namespace nmt
