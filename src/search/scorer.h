// What a search sees of the model: encode a batch into decoder states, score
// the next token, keep the states of the hypotheses that survive. One
// Scorer serves one model or an ensemble of several (Marian's "scorers"):
// the ensemble's log-probability of a token is the mean of its members'
// log-probabilities, step by step, and an ensemble of one model is exactly
// that model. The search never reaches into a model's modules.
#pragma once
#include <vector>

#include "model/batch.h"
#include "model/model.h"

namespace nmt {

// One model's decoder state for R rows (hypotheses).
struct MemberState {
  DecoderMemory memory;  // keys, values and mask of the source [R, S, ..]
  torch::Tensor hidden;  // s_t [R, D]
};

// The state of every member of a Scorer, row for row.
struct ScorerState {
  std::vector<MemberState> members;
};

class Scorer {
 public:
  // Scores with `models` (one, or an ensemble), which must share the target
  // vocabulary. Throws nmt::Error when there are none or their target
  // vocabularies differ. Call under InferenceMode or NoGradGuard, with the
  // models in eval mode.
  explicit Scorer(std::vector<Seq2Seq> models);

  // Encodes `batch` with every member; each sentence takes `copies` rows
  // (row b * copies + k), all starting from the same state.
  ScorerState start(const Batch& batch, int64_t copies = 1);

  // Log-probabilities of the next token after y_prev [R] (float, [R, V]):
  // the mean over members of their log-softmax. Advances `state` by one
  // step. With `alpha`, also the attention weights [R, S] (mean over members).
  torch::Tensor step(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha = nullptr);

  // Keeps rows `rows` [R'] (int64 indices into the current rows) of every
  // member's state, in that order.
  void reorder(ScorerState& state, const torch::Tensor& rows);

  // Keeps rows `rows` [R'] of every member's state, source memory included,
  // in that order: unlike reorder(), rows may come from any sentences (a
  // search drops the rows of finished sentences with it).
  void keep(ScorerState& state, const torch::Tensor& rows);

  // Teacher-forced log-probabilities [B, T, V] (float) of batch.tgt_in's
  // continuations: the mean over members of their log-softmax.
  torch::Tensor forced_log_probs(const Batch& batch);

  int64_t vocab_size() const { return vocab_; }
  size_t size() const { return models_.size(); }

 private:
  std::vector<Seq2Seq> models_;
  int64_t vocab_ = 0;
};

}  // namespace nmt
