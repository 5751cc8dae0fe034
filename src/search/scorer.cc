// One model or an ensemble behind the interface the search uses.
#include "search/scorer.h"

#include "base/error.h"
#include "model/step_kernels.h"
#include "text/tokenizer.h"

namespace nmt {

Scorer::Scorer(std::vector<Seq2Seq> models) : models_(std::move(models)) {
  if (models_.empty()) throw Error("a scorer needs at least one model");
  vocab_ = models_.front()->options().tgt_vocab;
  for (const auto& m : models_)
    if (m->options().tgt_vocab != vocab_)
      throw Error("ensemble members have different target vocabularies (" + std::to_string(vocab_) + " and " +
                  std::to_string(m->options().tgt_vocab) + " pieces)");
}

ScorerState Scorer::start(const Batch& batch, int64_t copies) {
  ScorerState st;
  for (auto& m : models_) {
    auto enc = m->encoder->forward(batch.src, batch.src_len);
    // Computed once per sentence, then given to each of its `copies` rows: [B*copies, ...]
    auto memory = m->decoder->memory(enc).repeat(copies);
    auto hidden = copies > 1 ? enc.init_state.repeat_interleave(copies, 0) : enc.init_state;  // [R, D]
    st.members.push_back(MemberState{std::move(memory), std::move(hidden)});
  }
  if (shortlist_) {
    st.vocab = shortlist_->for_batch(batch.src).to(batch.src.device());  // [V']
    for (size_t i = 0; i < models_.size(); ++i) models_[i]->decoder->restrict_output(st.members[i].memory, st.vocab);
  }
  return st;
}

torch::Tensor Scorer::token_ids(const ScorerState& state, const torch::Tensor& cols) const {
  if (!state.vocab.defined()) return cols;
  return state.vocab.index_select(0, cols.reshape({-1})).view(cols.sizes());
}

torch::Tensor Scorer::step(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha) {
  torch::Tensor logp_sum, alpha_sum;
  for (size_t i = 0; i < models_.size(); ++i) {
    auto& ms = state.members[i];
    auto out = models_[i]->decoder->step(y_prev, ms.hidden, ms.memory);
    ms.hidden = out.state;
    auto logp = torch::log_softmax(out.logits.to(torch::kFloat), -1);  // [R, V]
    logp_sum = i == 0 ? logp : logp_sum + logp;
    if (alpha) alpha_sum = i == 0 ? out.alpha : alpha_sum + out.alpha;
  }
  const double n = static_cast<double>(models_.size());
  if (alpha) *alpha = models_.size() == 1 ? alpha_sum : alpha_sum / n;
  return models_.size() == 1 ? logp_sum : logp_sum / n;
}

Scorer::Best Scorer::step_best(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha) {
  if (models_.size() > 1) {
    auto logp = step(y_prev, state, alpha);  // [R, V']
    auto [top, col] = max_per_row(logp);
    return {col, top, logp.select(1, kEosId)};
  }
  auto& ms = state.members.front();
  auto out = models_.front()->decoder->step(y_prev, ms.hidden, ms.memory);
  ms.hidden = out.state;
  if (alpha) *alpha = out.alpha;
  auto logits = out.logits.to(torch::kFloat);  // [R, V']
  auto [top, col] = max_per_row(logits);        // [R], [R]
  // log_softmax at the top column: -log sum_v exp(x_v - top); at EOS, that plus x_eos - top.
  auto logp = (logits - top.unsqueeze(1)).exp_().sum(1).log_().neg_();  // [R]
  return {col, logp, logits.select(1, kEosId) - top + logp};
}

void Scorer::reorder(ScorerState& state, const torch::Tensor& rows) {
  // Rows of one sentence share its encoder output: only the recurrent state moves.
  for (auto& ms : state.members) ms.hidden = ms.hidden.index_select(0, rows);
}

void Scorer::keep(ScorerState& state, const torch::Tensor& rows) {
  for (auto& ms : state.members) {
    ms.memory = ms.memory.index_select(rows);
    ms.hidden = ms.hidden.index_select(0, rows);
  }
}

torch::Tensor Scorer::forced_log_probs(const Batch& batch) {
  torch::Tensor sum;
  for (size_t i = 0; i < models_.size(); ++i) {
    auto logp = torch::log_softmax(models_[i]->forward(batch.src, batch.src_len, batch.tgt_in).to(torch::kFloat), -1);
    sum = i == 0 ? logp : sum + logp;  // [B, T, V]
  }
  return models_.size() == 1 ? sum : sum / static_cast<double>(models_.size());
}

}  // namespace nmt
