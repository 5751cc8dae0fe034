// Gradient clipping by global norm without waiting for the device.
// torch::nn::utils::clip_grad_norm_ returns the norm as a double, which on a
// GPU means waiting for every queued kernel in the middle of a training
// step; clip_gradients() leaves the norm on the device so that the step's
// figures (loss and norm) can be read once, at its end.
#pragma once
#include <torch/types.h>

#include <vector>

namespace nmt {

// How clip_gradients() applies the scale.
enum class ClipRead {
  kAuto,      // kNow on the CPU (reading is free there), kDeferred elsewhere
  kNow,       // read the norm; multiply the gradients only when it is over max_norm
  kDeferred,  // never read: multiply every gradient by min(1, max_norm / (norm + 1e-6)) on the device
};

// Scales the gradients of `params` (those without one are skipped) so that
// their joint L2 norm is at most `max_norm` (infinity: leaves them), as
// torch::nn::utils::clip_grad_norm_ does, and returns their norm before
// scaling as a 0-dim float tensor on their device: NaN or Inf when any
// gradient is (then the scaled gradients are NaN too). No gradients: 0.
// Throws c10::Error when max_norm <= 0.
torch::Tensor clip_gradients(const std::vector<torch::Tensor>& params, double max_norm,
                             ClipRead read = ClipRead::kAuto);

// The same for one gradient tensor (FlatAdam::gradients(), say), scaled in place.
torch::Tensor clip_gradient(const torch::Tensor& grad, double max_norm, ClipRead read = ClipRead::kAuto);

}  // namespace nmt
