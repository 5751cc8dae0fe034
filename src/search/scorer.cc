// One model or an ensemble behind the interface the search uses.
#include "search/scorer.h"

#include "base/error.h"
#include "search/row_max.h"
#include "text/tokenizer.h"

namespace nmt {

Scorer::Scorer(std::vector<std::shared_ptr<Engine>> engines) : engines_(std::move(engines)) {
  if (engines_.empty()) throw Error("a scorer needs at least one model");
  vocab_ = engines_.front()->vocab_size();
  for (const auto& e : engines_)
    if (e->vocab_size() != vocab_)
      throw Error("ensemble members have different target vocabularies (" + std::to_string(vocab_) + " and " +
                  std::to_string(e->vocab_size()) + " pieces)");
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
    auto logp = torch::log_softmax(out.logits.to(torch::kFloat), -1);  // [R, V]
    logp_sum = i == 0 ? logp : logp_sum + logp;
    if (alpha) alpha_sum = i == 0 ? out.alpha : alpha_sum + out.alpha;
  }
  const double n = static_cast<double>(engines_.size());
  if (alpha) *alpha = engines_.size() == 1 ? alpha_sum : alpha_sum / n;
  return engines_.size() == 1 ? logp_sum : logp_sum / n;
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
    auto logp = torch::log_softmax(engines_[i]->forced_logits(batch).to(torch::kFloat), -1);
    sum = i == 0 ? logp : sum + logp;  // [B, T, V]
  }
  return engines_.size() == 1 ? sum : sum / static_cast<double>(engines_.size());
}

}  // namespace nmt
