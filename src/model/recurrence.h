// The decoder's teacher-forced recurrence (attention and GRU steps over all
// target positions) as one autograd function with a hand-written backward.
// Recorded step by step, training builds dozens of tiny autograd nodes per
// step and computes every weight's gradient T times as a rank-B product, each
// into a fresh tensor added to the last. Here the forward runs the steps with
// nothing recorded, keeping the gate activations and attention energies; the
// backward runs the steps in reverse (backpropagation through time) with only
// the products that carry gradients between steps, and computes each weight's
// gradient once, as one product over all T x B rows.
// Shapes: B batch, T target steps, S source length, A attention size,
// C annotation size, D decoder hidden, G = 3D (GRU gates reset, update, new).
#pragma once
#include <torch/types.h>

namespace nmt {

// The weights of the recurrence, as DecoderImpl holds them. Conditional GRU
// (cgru): GRU1 reads E y_{t-1} with hidden s_{t-1} and gives s'_t, the
// attention queries with s'_t, GRU2 reads c_t with hidden s'_t and gives s_t.
// Bahdanau: the attention queries with s_{t-1}, the GRU reads [E y_{t-1}; c_t]
// with hidden s_{t-1}. Either way "the reading GRU" is the one that reads c_t,
// and its hidden state is "the query state".
struct RecurrenceWeights {
  bool cgru = false;
  torch::Tensor hidden1_weight;  // [G, D] GRU1's W_hh (cgru; undefined otherwise)
  torch::Tensor hidden1_bias;    // [G] GRU1's b_hh (cgru; undefined otherwise)
  torch::Tensor query_weight;    // [A + G, D] the attention's W over the reading GRU's W_hh
  torch::Tensor query_bias;      // [A + G] zeros (the attention's W has no bias), then its b_hh
  torch::Tensor score_weight;    // [A] v of the score v^T tanh(k_j + W q)
  torch::Tensor context_weight;  // [G, C] the reading GRU's W_ih for c_t
  torch::Tensor context_bias;    // [G] cgru: GRU2's b_ih; bahdanau: undefined (its b_ih is in the input gates)
};

// Variational dropout on the recurrence's states (DecoderMemory's masks):
// each [B, D], 0 or 1/(1-p) per unit, the same at every step; undefined: none.
struct RecurrenceMasks {
  torch::Tensor query;  // on the query state where it enters query_weight
  torch::Tensor prev;   // cgru: on s_{t-1} where it enters hidden1_weight
};

struct RecurrenceOutput {
  torch::Tensor states;    // [B, T, D] s_t
  torch::Tensor contexts;  // [B, T, C] c_t
  torch::Tensor alphas;    // [B, T, S] attention weights, 0 on padding
};

// Runs the recurrence of additive (or concat) attention over all T steps.
// input_gates [B, T, G]: the embeddings' share of the input gates of the GRU
// that reads E y (GRU1, or Bahdanau's one GRU), its b_ih included;
// init_state [B, D] s_0; keys [B, S, A] the attention keys; values [B, S, C]
// the annotations h_j; mask_bias [B, S] 0 on real positions, -inf on padding;
// `masks` drop state units where they enter the products (the states carried
// from step to step stay whole). Differentiable in every tensor but mask_bias
// and the masks; the graph through it may run backward once. Throws c10::Error when shapes or devices disagree.
RecurrenceOutput attentive_recurrence(const torch::Tensor& input_gates, const torch::Tensor& init_state,
                                      const torch::Tensor& keys, const torch::Tensor& values,
                                      const torch::Tensor& mask_bias, const RecurrenceWeights& w,
                                      const RecurrenceMasks& masks = {});

}  // namespace nmt
