// Exponential smoothing of the weights: see smoothing.h.
#include "train/smoothing.h"

#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "base/error.h"

namespace nmt {

WeightSmoothing::WeightSmoothing(std::vector<torch::Tensor> params, double factor)
    : params_(std::move(params)), factor_(factor) {
  if (!(factor > 0 && factor < 1))
    throw UsageError("--exponential-smoothing: the factor must be above 0 and below 1, got " + std::to_string(factor));
  torch::NoGradGuard no_grad;
  for (const auto& p : params_) averages_.push_back(p.detach().clone());
}

void WeightSmoothing::update(int64_t step) {
  const double d = std::max(factor_, 9.0 / (static_cast<double>(step) + 9.0));
  torch::NoGradGuard no_grad;
  const auto& stepped = stepped_weights();
  auto& averages = applied_ > 0 ? params_ : averages_;
  for (size_t i = 0; i < params_.size(); ++i) averages[i].lerp_(stepped[i], d);  // a += d (w - a)
}

void WeightSmoothing::swap() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto held = params_[i].detach().clone();
    params_[i].copy_(averages_[i]);
    averages_[i].copy_(held);
  }
}

WeightSmoothing::Applied::Applied(WeightSmoothing* s) : s_(s) {
  if (s_ != nullptr && s_->applied_++ == 0) s_->swap();
}

WeightSmoothing::Applied::~Applied() {
  if (s_ != nullptr && --s_->applied_ == 0) s_->swap();
}

void WeightSmoothing::restart_from(const std::vector<torch::Tensor>& stepped) {
  if (stepped.size() != params_.size())
    throw Error("the training state holds " + std::to_string(stepped.size()) + " stepped weights for " +
                std::to_string(params_.size()) + " parameters");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!stepped[i].sizes().equals(params_[i].sizes()))
      throw Error("a stepped weight of the training state has the wrong shape");
    averages_[i].copy_(params_[i]);
    params_[i].copy_(stepped[i]);
  }
}

}  // namespace nmt
