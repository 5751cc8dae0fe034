// What a search sees of the models: encode a batch into decoder states, score
// the next token, keep the states of the hypotheses that survive. One
// Scorer serves one engine or an ensemble of several, one engine per member
// (Marian's "scorers"): the ensemble's log-probability of a token is the
// mean of its members' log-probabilities, step by step, and an ensemble of
// one is exactly that engine. The search sees engines (engine/engine.h)
// and their opaque states only.
#pragma once
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "search/shortlist.h"

namespace nmt {

// The state of every member of a Scorer, row for row.
struct ScorerState {
  std::vector<DecoderState> members;  // one per engine, R rows each
  // With a shortlist, the target id of each column of step()'s
  // log-probabilities [V'] (sorted, and id i < 4 in column i); undefined:
  // column = id over the whole vocabulary.
  torch::Tensor vocab;
};

// `weights` (one per member of an ensemble of `members`) divided by their
// sum; empty when `weights` is empty or all its weights are equal (the plain
// mean). Throws nmt::Error when they are not one finite number > 0 per
// member, or their sum is not finite.
std::vector<double> normalized_weights(const std::vector<double>& weights, size_t members);

class Scorer {
 public:
  // Scores with `engines` (one, or an ensemble), which must share the target
  // vocabulary, weighted by `weights` (one per engine; empty: all equal).
  // The mean is sum_i w_i log p_i / sum_i w_i; weights that are all equal
  // give the plain mean, bit for bit. Throws nmt::Error when there are no
  // engines, their target vocabularies differ, or normalized_weights()
  // throws. Call under InferenceMode or NoGradGuard.
  explicit Scorer(std::vector<std::shared_ptr<Engine>> engines, std::vector<double> weights = {});

  // Encodes `batch` with every member; each sentence takes `copies` rows
  // (row b * copies + k), all starting from the same state.
  ScorerState start(const Batch& batch, int64_t copies = 1);

  // Log-probabilities of the next token after y_prev [R] (float, [R, V'],
  // V' = columns(state)): the (weighted) mean over members of their
  // log-softmax (over the shortlist's ids when there is one). Advances
  // `state` by one step. With `alpha`, also the attention weights [R, S]
  // (the same mean over members).
  torch::Tensor step(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha = nullptr);

  // One step of greedy search: what step() followed by a max over each row
  // gives, without step()'s [R, V'] log-probabilities where there is one
  // member (a max and one sum of exponentials over the logits instead).
  struct Best {
    torch::Tensor col;       // [R] int64 each row's most probable column (the first on ties)
    torch::Tensor logp;      // [R] float its log-probability
    torch::Tensor eos_logp;  // [R] float the log-probability of EOS (kEosId's column)
  };
  Best step_best(const torch::Tensor& y_prev, ScorerState& state, torch::Tensor* alpha = nullptr);

  // Searches from now on choose among the ids `shortlist` gives each batch
  // (start() asks it); null: the whole vocabulary.
  void set_shortlist(std::shared_ptr<const Shortlist> shortlist) { shortlist_ = std::move(shortlist); }
  // Columns of step()'s log-probabilities for `state`: V, or the shortlist's size.
  int64_t columns(const ScorerState& state) const { return state.vocab.defined() ? state.vocab.size(0) : vocab_; }
  // The target ids of step() columns `cols` (int64, any shape): the columns
  // themselves without a shortlist. The special ids (pad, unk, bos, eos) are
  // their own columns either way.
  torch::Tensor token_ids(const ScorerState& state, const torch::Tensor& cols) const;

  // Keeps rows `rows` [R'] (int64 indices into the current rows) of every
  // member's state, in that order (DecoderState::reorder()).
  void reorder(ScorerState& state, const torch::Tensor& rows);

  // Keeps rows `rows` [R'] of every member's state, source memory included,
  // in that order: unlike reorder(), rows may come from any sentences (a
  // search drops the rows of finished sentences with it).
  void keep(ScorerState& state, const torch::Tensor& rows);

  // Copies every member's moving tensors from `from` into `to`'s, in place
  // (DecoderState::copy_moving_from()): for steps replayed as CUDA graphs.
  void copy_moving(ScorerState& to, const ScorerState& from);

  // Whether copy_all() can refill a state in place: not with a shortlist,
  // whose output rows each batch's engines keep outside the state's tensors.
  bool refillable() const { return shortlist_ == nullptr; }
  // Gives every tensor of every member's state storage of its own, and
  // copies all of `from`'s (a state of the same shape) into them in place
  // (DecoderState::own_storage(), copy_from()): one state serves batch after
  // batch, for a step graph replayed across batches. copy_all() throws
  // nmt::Error when the shapes differ or the scorer is not refillable().
  void own_storage(ScorerState& state);
  void copy_all(ScorerState& to, const ScorerState& from);

  // Teacher-forced log-probabilities [B, T, V] (float) of batch.tgt_in's
  // continuations: the (weighted) mean over members of their log-softmax.
  torch::Tensor forced_log_probs(const Batch& batch);

  int64_t vocab_size() const { return vocab_; }
  // The members, in order.
  const std::vector<std::shared_ptr<Engine>>& engines() const { return engines_; }
  size_t size() const { return engines_.size(); }
  // The members' weights divided by their sum (empty: the plain mean).
  const std::vector<double>& weights() const { return weights_; }
  // Where the engines run.
  torch::Device device() const { return engines_.front()->device(); }

 private:
  // Member i's term of a mean: `t` times its weight (`t` itself without weights).
  torch::Tensor weighted(size_t i, const torch::Tensor& t) const { return weights_.empty() ? t : t * weights_[i]; }
  // The mean of the terms' sum: divided by the members without weights.
  torch::Tensor mean_of(const torch::Tensor& sum) const;

  std::vector<std::shared_ptr<Engine>> engines_;
  // Each member's weight divided by their sum; empty: the plain mean.
  std::vector<double> weights_;
  int64_t vocab_ = 0;
  std::shared_ptr<const Shortlist> shortlist_;
};

}  // namespace nmt
