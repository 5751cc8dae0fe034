// Exponential smoothing of the weights: see smoothing.h.
#include "train/smoothing.h"

#include <spdlog/spdlog.h>
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
  int64_t largest = 0;
  for (const auto& p : params_) {
    averages_.push_back(p.detach().clone());
    largest = std::max(largest, p.numel());
  }
  if (!params_.empty()) scratch_ = torch::empty({largest}, params_.front().options());
}

void WeightSmoothing::update(int64_t step) {
  if (lost_) throw Error("exponential smoothing: the moving average was lost when a copy failed; training cannot go on");
  const double d = std::max(factor_, 9.0 / (static_cast<double>(step) + 9.0));
  torch::NoGradGuard no_grad;
  const auto& stepped = stepped_weights();
  auto& averages = applied_ > 0 ? params_ : averages_;
  for (size_t i = 0; i < params_.size(); ++i) averages[i].lerp_(stepped[i], d);  // a += d (w - a)
}

void WeightSmoothing::swap() {
  if (lost_) throw Error("exponential smoothing: the moving average was lost when a copy failed");
  torch::NoGradGuard no_grad;
  try {
    for (size_t i = 0; i < params_.size(); ++i) {
      auto held = scratch_.narrow(0, 0, params_[i].numel()).view_as(params_[i]);
      held.copy_(params_[i]);
      params_[i].copy_(averages_[i]);
      averages_[i].copy_(held);
    }
  } catch (...) {
    lost_ = true;
    throw;
  }
}

WeightSmoothing::Applied::Applied(WeightSmoothing* s) : s_(s) {
  if (s_ == nullptr) return;
  if (s_->applied_ == 0) s_->swap();
  ++s_->applied_;
}

WeightSmoothing::Applied::~Applied() {
  if (s_ == nullptr || --s_->applied_ > 0) return;
  try {
    s_->swap();
  } catch (const std::exception& e) {
    spdlog::error("exponential smoothing: putting the stepped weights back failed: {}", e.what());
  }
}

void WeightSmoothing::restart_from(const std::vector<torch::Tensor>& stepped) {
  if (applied_ > 0) throw Error("exponential smoothing: restart_from() while the averages are applied");
  if (stepped.size() != params_.size())
    throw Error("exponential smoothing: " + std::to_string(stepped.size()) + " stepped weights for " +
                std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < params_.size(); ++i)
    if (!stepped[i].sizes().equals(params_[i].sizes()))
      throw Error("exponential smoothing: stepped weight " + std::to_string(i) + " has shape " +
                  c10::str(stepped[i].sizes()) + " for a parameter of shape " + c10::str(params_[i].sizes()));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    averages_[i].copy_(params_[i]);
    params_[i].copy_(stepped[i]);
  }
}

}  // namespace nmt
