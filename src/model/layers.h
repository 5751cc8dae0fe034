// The layers of the attention model of Bahdanau, Cho & Bengio (2015): the
// bidirectional GRU encoder, the attention over its annotations (additive,
// and Luong's scores as options), the alignment head, the GRU update from
// precomputed gates, and dropout with a per-thread generator. The decoder
// that combines them is model/decoder.h, the whole model model/model.h.
// Shapes: B batch, S source length, T target length, E embedding, H encoder
// hidden per direction, C = 2H annotation size, D decoder hidden.
#pragma once
#include <torch/nn.h>

#include <map>
#include <string>
#include <utility>

#include "base/options.h"

namespace nmt {

// GRU update from precomputed gate pre-activations, in GRUCell's gate order
// (reset, update, new): gi = W_i x + b_i and gh = W_h h + b_h [B, 3D], h [B, D].
// Returns h' = (1 - z) * n + z * h with r = sigmoid(gi_r + gh_r),
// z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n).
torch::Tensor gru_update(const torch::Tensor& gi, const torch::Tensor& gh, const torch::Tensor& h);

// Layer normalization of a GRU's gate pre-activations, as Nematus normalizes
// them (Ba et al. 2016): g [.., 3H] in GRUCell's gate order (reset, update,
// new), the reset and update gates' [.., 2H] normalized together and the
// candidate's [.., H] apart, each to zero mean and unit variance over its
// units (epsilon 1e-5), then scaled by `weight` [3H] (ones at first) and
// shifted by `bias` [3H] (zeros). A GRU with ModelOptions::layer_norm has one
// for W_ih x + b_ih and one for W_hh h + b_hh. forward() throws c10::Error
// when g's last dimension is not 3H.
class GateNormImpl : public torch::nn::Module {
 public:
  explicit GateNormImpl(int64_t hidden);
  torch::Tensor forward(const torch::Tensor& g);

  torch::Tensor weight;  // [3H]
  torch::Tensor bias;    // [3H]
};
TORCH_MODULE(GateNorm);

// g normalized by `norm` (GateNormImpl), or g itself when `norm` is empty.
torch::Tensor gate_normed(const GateNorm& norm, const torch::Tensor& g);

// Gives the calling thread its own dropout generator while alive, seeded
// with `seed`: threads that train parts of one batch side by side
// (train/batch_parts.h) then draw the same masks whatever the scheduling.
// Scopes nest; each thread sees its newest.
class DropoutRng {
 public:
  explicit DropoutRng(uint64_t seed);
  ~DropoutRng();
  DropoutRng(const DropoutRng&) = delete;
  DropoutRng& operator=(const DropoutRng&) = delete;

 private:
  at::Generator gen_;
  at::Generator* outer_;
};

// Inverted dropout, as torch::dropout: in training, each element is zeroed
// with probability p and the rest scaled by 1 / (1 - p); otherwise x. With
// `whole_vectors` the unit is a vector along the last dimension instead (word
// dropout: an embedding [.., E] is zeroed whole or scaled whole). The masks
// come from the calling thread's DropoutRng on the CPU when one is alive,
// else from LibTorch's default generator (then, for elements, they are
// torch::dropout's own). Draws nothing when p is 0. Never throws for p in [0, 1).
class DropoutImpl : public torch::nn::Module {
 public:
  explicit DropoutImpl(double p, bool whole_vectors = false) : p_(p), whole_vectors_(whole_vectors) {}
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double p_;
  bool whole_vectors_;
};
TORCH_MODULE(Dropout);

struct EncoderOutput {
  torch::Tensor annotations;  // [B, S, C] h_j; zero on padding
  torch::Tensor mask;         // [B, S] bool, true on real positions
  torch::Tensor init_state;   // [B, D] s_0 = tanh(W_s <-h_1)
};

// Embeds the source and runs a bidirectional GRU over packed sequences, so
// padding never reaches the recurrence: a sentence's annotations are the same
// alone or inside a padded batch.
class EncoderImpl : public torch::nn::Module {
 public:
  // With `shared_embed` (three-way tying, ModelOptions::tie_all_embeddings),
  // the source is embedded by that module, which this one does not register
  // (its owner holds the parameter); without it, by an embedding of its own.
  explicit EncoderImpl(const ModelOptions& opt, torch::nn::Embedding shared_embed = nullptr);
  // src [B, S] int64; src_len [B] int64 on CPU, every length >= 1: the
  // recurrence runs over packed sequences. src_len undefined: over the padded
  // batch as it is, lengths taken from the padding on src's device (the same
  // annotations to rounding; no read from the device and shapes that depend
  // on [B, S] alone, as a CUDA graph needs; every row must hold a word).
  // In training with ModelOptions::enc_hidden_dropout, over the padded batch
  // whatever src_len, step by step, with the states masked where they enter
  // W_hh: masks [B, H] drawn in the order layer 0 forward, layer 0 backward,
  // layer 1 forward, ..., one per sentence for all its steps. With
  // ModelOptions::layer_norm, always step by step over the padded batch, the
  // gate pre-activations normalized by norms of each layer and direction.
  EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& src_len);
  // The source embedding [V, E]: the decoder's with three-way tying.
  const torch::Tensor& embedding() const { return embed->weight; }

 private:
  // The bidirectional GRU over x [B, S, E] padded, mask [B, S] -> [B, S, 2H], zero on padding.
  torch::Tensor recur_in_place(const torch::Tensor& x, const torch::Tensor& mask);
  // Whether forward() draws state masks (training with enc_hidden_dropout).
  bool state_masks() const { return is_training() && opt_.enc_hidden_dropout > 0; }
  // Whether the recurrence runs step by step (state masks or layer normalization).
  bool stepped() const { return state_masks() || opt_.layer_norm; }

  ModelOptions opt_;
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRU rnn{nullptr};
  torch::nn::Linear init{nullptr};  // H -> D
  Dropout drop{nullptr};
  Dropout word_drop{nullptr};  // whole input embeddings (ModelOptions::word_dropout)
  Dropout state_drop{nullptr};  // the recurrence's state masks (ModelOptions::enc_hidden_dropout)
  // ModelOptions::layer_norm: {W_ih x norm, W_hh h norm} by the GRU's parameter
  // suffix ("l0", "l0_reverse", ...); empty without it.
  std::map<std::string, std::pair<GateNorm, GateNorm>> norms_;
};
TORCH_MODULE(Encoder);

// Scores a decoder state against every annotation and returns the context.
// Keys (the part of the score that depends only on h_j) are computed once per
// batch by keys(); forward() is called once per decoder step.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelOptions& opt);
  // annotations [B, S, C] -> keys: additive/concat [B, S, A], general [B, S, D], dot/none [B, S, C]
  torch::Tensor keys(const torch::Tensor& annotations);
  // query [B, D] -> {context [B, C], alpha [B, S]}; alpha sums to 1 over mask
  // and is exactly 0 on padding.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& query, const torch::Tensor& keys,
                                                  const torch::Tensor& annotations, const torch::Tensor& mask);
  // The query projection W [A, D] of additive/concat attention; undefined for
  // the others, which score the query itself.
  torch::Tensor query_weight() const { return W ? W->weight : torch::Tensor(); }
  // The score vector v [1, A] of additive/concat attention; undefined for the others.
  torch::Tensor score_weight() const { return v ? v->weight : torch::Tensor(); }
  // Unnormalized scores [B, S] of `q` against `keys`: q is W s [B, A] for
  // additive/concat (see query_weight()), the state s [B, D] otherwise.
  torch::Tensor score(const torch::Tensor& q, const torch::Tensor& keys);

 private:
  AttentionType type_;
  torch::nn::Linear W{nullptr};  // query projection (additive, concat)
  torch::nn::Linear U{nullptr};  // key projection (additive, concat, general)
  torch::nn::Linear v{nullptr};  // A -> 1 (additive, concat)
};
TORCH_MODULE(Attention);

// An attention over the source for word alignment alone (the supervised
// alignment head of Garg et al. 2019, the alignment layer of Zenkel et al.
// 2019): the query of target piece y_t sees the decoder state s_t that
// predicts it, its context c_t and its embedding E y_t, where the
// translation attention of step t is computed before y_t is known. It is
// trained only by guided alignment (its gradient reaches the encoder and
// decoder too), read by forced alignment (nmt-align), never by search.
// Score: q_t . k_j / sqrt(A) with q_t = tanh(W_q [s_t; c_t; E y_t] + b_q)
// and k_j = W_k h_j, A = ModelOptions::alignment_head.
class AlignmentHeadImpl : public torch::nn::Module {
 public:
  explicit AlignmentHeadImpl(const ModelOptions& opt);
  // states [B, T, D], contexts [B, T, C], ey [B, T, E] (embeddings of the
  // pieces aligned), annotations [B, S, C], mask_bias [B, S] (0 on real
  // positions, -inf on padding) -> weights [B, T, S], each row summing to 1
  // over the real positions and exactly 0 on padding.
  torch::Tensor forward(const torch::Tensor& states, const torch::Tensor& contexts, const torch::Tensor& ey,
                        const torch::Tensor& annotations, const torch::Tensor& mask_bias);

 private:
  torch::nn::Linear query{nullptr};  // D + C + E -> A
  torch::nn::Linear key{nullptr};    // C -> A, no bias (it would add the same to every score of a row)
};
TORCH_MODULE(AlignmentHead);

}  // namespace nmt
