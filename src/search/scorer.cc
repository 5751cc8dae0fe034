// One model or an ensemble behind the interface the search uses.
#include "search/scorer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/format.h"
#include "search/row_max.h"
#include "text/tokenizer.h"

namespace nmt {

std::vector<double> normalized_weights(const std::vector<double>& weights, size_t members) {
  if (weights.empty()) return {};
  if (weights.size() != members)
    throw Error(std::to_string(weights.size()) + " ensemble weights for " + counted(static_cast<int64_t>(members), "model") +
                ": give one weight per model, in their order");
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || !(weights[i] > 0))
      throw Error("the ensemble weight of model " + std::to_string(i + 1) + " is " + shortest_decimal(weights[i]) +
                  ": weights are positive numbers (leave a model out rather than weigh it 0)");
    sum += weights[i];
  }
  if (!std::isfinite(sum)) throw Error("the ensemble weights are too large to add up");
  if (std::all_of(weights.begin(), weights.end(), [&](double w) { return w == weights.front(); }))
    return {};  // all equal: the plain mean, bit for bit
  std::vector<double> out;
  for (double w : weights) out.push_back(w / sum);
  return out;
}

Scorer::Scorer(std::vector<std::shared_ptr<Engine>> engines, std::vector<double> weights)
    : engines_(std::move(engines)) {
  if (engines_.empty()) throw Error("a scorer needs at least one model");
  vocab_ = engines_.front()->vocab_size();
  for (const auto& e : engines_)
    if (e->vocab_size() != vocab_)
      throw Error("ensemble members have different target vocabularies (" + std::to_string(vocab_) + " and " +
                  std::to_string(e->vocab_size()) + " pieces)");
  weights_ = normalized_weights(weights, engines_.size());
}

torch::Tensor Scorer::mean_of(const torch::Tensor& sum) const {
  if (engines_.size() == 1 || !weights_.empty()) return sum;  // the weights sum to 1
  return sum / static_cast<double>(engines_.size());
}

ScorerState Scorer::start(const Batch& batch, int64_t copies) {
  ScorerState st;
  if (shortlist_) st.vocab = shortlist_->for_batch(batch.src).to(batch.src.device());  // [V']
  for (auto& e : engines_) st.members.push_back(e->start(batch, copies, st.vocab));
  return st;
}

torch::Tensor Scorer::token_ids(const ScorerState& state, const torch::Tensor& cols) const {
  if (!state.vocab.defined()) return cols;
  return state.vocab.index_select(0, cols.reshape({-1})).view(cols.sizes());
}

torch::Tensor Scorer::step(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha) {
  torch::Tensor logp_sum, alpha_sum;
  for (size_t i = 0; i < engines_.size(); ++i) {
    auto out = engines_[i]->step(y_prev, state.members[i]);
    auto logp = weighted(i, torch::log_softmax(out.logits.to(torch::kFloat), -1));  // [R, V]
    logp_sum = i == 0 ? logp : logp_sum + logp;
    if (alpha) alpha_sum = i == 0 ? weighted(i, out.alpha) : alpha_sum + weighted(i, out.alpha);
  }
  if (alpha) *alpha = mean_of(alpha_sum);
  return mean_of(logp_sum);
}

Scorer::Best Scorer::step_best(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha) {
  if (engines_.size() > 1) {
    auto logp = step(y_prev, state, alpha);  // [R, V']
    auto [top, col] = max_per_row(logp);
    return {col, top, logp.select(1, kEosId)};
  }
  auto out = engines_.front()->step(y_prev, state.members.front());
  if (alpha) *alpha = out.alpha;
  auto logits = out.logits.to(torch::kFloat);  // [R, V']
  auto [top, col] = max_per_row(logits);        // [R], [R]
  // log_softmax at the top column: -log sum_v exp(x_v - top); at EOS, that plus x_eos - top.
  auto logp = (logits - top.unsqueeze(1)).exp_().sum(1).log_().neg_();  // [R]
  return {col, logp, logits.select(1, kEosId) - top + logp};
}

void Scorer::reorder(ScorerState& state, const torch::Tensor& rows) {
  // Rows of one sentence share its encoder output: only what moves with the beam moves.
  for (auto& ms : state.members) ms.reorder(rows);
}

void Scorer::keep(ScorerState& state, const torch::Tensor& rows) {
  for (auto& ms : state.members) ms.keep(rows);
}

void Scorer::copy_moving(ScorerState& to, const ScorerState& from) {
  for (size_t i = 0; i < to.members.size(); ++i) to.members[i].copy_moving_from(from.members[i]);
}

void Scorer::own_storage(ScorerState& state) {
  for (auto& ms : state.members) ms.own_storage();
}

void Scorer::copy_all(ScorerState& to, const ScorerState& from) {
  if (!refillable() || to.vocab.defined() || from.vocab.defined())
    throw Error("a search state with a shortlist cannot be refilled in place");
  if (to.members.size() != from.members.size()) throw Error("search states of different ensembles");
  for (size_t i = 0; i < to.members.size(); ++i) to.members[i].copy_from(from.members[i]);
}

torch::Tensor Scorer::forced_log_probs(const Batch& batch) {
  torch::Tensor sum;
  for (size_t i = 0; i < engines_.size(); ++i) {
    auto logp = weighted(i, torch::log_softmax(engines_[i]->forced_logits(batch).to(torch::kFloat), -1));
    sum = i == 0 ? logp : sum + logp;  // [B, T, V]
  }
  return mean_of(sum);
}

}  // namespace nmt
