// The decoder of the attention model. Bahdanau: s_t = GRU([E y_{t-1}; c_t],
// s_{t-1}) where c_t attends with s_{t-1}. Conditional GRU
// (DecoderType::kCgru, as Nematus): s'_t = GRU1(E y_{t-1}, s_{t-1}), c_t
// attends with s'_t, s_t = GRU2(c_t, s'_t). Both: output
// t_t = tanh(W_o [s_t; c_t; E y_{t-1}]), logits = W_out t_t.
// Shapes: B batch, S source length, T target length, E embedding,
// C annotation size, D decoder hidden, V target vocabulary.
#pragma once
#include <torch/nn.h>

#include <memory>
#include <tuple>

#include "base/options.h"
#include "model/layers.h"
#include "model/step_weights.h"

namespace nmt {

struct DecoderStep {
  torch::Tensor state;    // [B, D] s_t
  torch::Tensor context;  // [B, C] c_t
  torch::Tensor alpha;    // [B, S] attention weights of this step
  torch::Tensor logits;   // [B, V]
};

class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const ModelOptions& opt);
  // Teacher forcing. tgt_in [B, T] -> logits [B, T, V]; with `alpha_out`,
  // also the attention weights [B, T, S], or, when the model has an
  // alignment head and `tgt_out` [B, T] (the pieces each step predicts) is
  // defined, the head's weights for those pieces (Seq2SeqImpl::forward_aligned()).
  torch::Tensor forward(const torch::Tensor& tgt_in, const EncoderOutput& enc, torch::Tensor* alpha_out = nullptr,
                        const torch::Tensor& tgt_out = {});
  // The weights forward() gives in *alpha_out ([B, T, S]; the alignment
  // head's for tgt_out when the model has one), without the output layer
  // and its [B, T, V] logits: what forced alignment reads.
  torch::Tensor alignment(const torch::Tensor& tgt_in, const EncoderOutput& enc, const torch::Tensor& tgt_out);
  // Whether the model has an alignment head (ModelOptions::alignment_head).
  bool has_alignment_head() const { return !align_head.is_empty(); }
  // The per-batch part of every step: keys, values and mask of `enc`, for
  // the path set_path() chooses: optimized, with step weights made now
  // (packed when autograd is off and the decoder is in eval mode), or plain.
  DecoderMemory memory(const EncoderOutput& enc);
  // The same for the optimized step with `weights` (for search: made once by
  // its engine, engine/rnn_engine.h), or for the plain step when null.
  DecoderMemory memory(const EncoderOutput& enc, std::shared_ptr<const StepWeights> weights);
  // One step. y_prev [B], state [B, D], memory from memory(): the optimized
  // step when the memory has weights, else the plain one. The logits are
  // [B, V], or [B, V'] over the ids of restrict_output().
  DecoderStep step(const torch::Tensor& y_prev, const torch::Tensor& state, const DecoderMemory& mem);
  // Makes step() score only the target ids `ids` [V'] (int64, any order, on
  // the model's device): logits column i is id ids[i]. For search with a
  // shortlist (search/shortlist.h); teacher forcing is unaffected. With the
  // memory's weights in reduced precision and at least min_rows() rows in
  // `mem`, the rows are also copied in that precision.
  void restrict_output(DecoderMemory& mem, const torch::Tensor& ids) const;
  // The weights of an optimized step, made now from the current parameters
  // (StepWeights). Throws nmt::Error for a reduced precision when the model
  // is not on the CPU or this LibTorch cannot run it.
  std::shared_ptr<const StepWeights> make_step_weights(const StepWeightsFor& what);

  // How teacher forcing computes its steps; the function and the parameters
  // are the same either way (the equivalence tests hold the paths together).
  enum class Path {
    // kRecurrence while autograd records (training), kOptimized otherwise
    // (validation, scoring, alignment): what measured fastest on the CPU
    // (bench/results/decoder-path-and-threads-*.txt, recurrence-*.txt).
    kAuto,
    // As few and as large operations per step as possible: the embeddings'
    // share of the GRU input gates for all steps at once, the context's share
    // through the attention weights (sum_j alpha_j W h_j, W h_j once per
    // batch in memory()), the attention query and the GRU's hidden gates of
    // the same state in one product. Search always steps this way.
    kOptimized,
    // GRUCell modules over concatenated inputs, the model as written.
    kPlain,
    // The whole recurrence as one autograd function with a hand-written
    // backward (attentive_recurrence(), recurrence.h) where the attention is
    // additive or concat and the GRUs are not layer-normalized, the plain
    // formulation otherwise, with or without autograd.
    kRecurrence,
  };
  void set_path(Path p) { path_ = p; }

  Attention attention{nullptr};
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRUCell cell{nullptr};   // bahdanau: [E + C] -> D; cgru: GRU1, E -> D
  torch::nn::GRUCell cell2{nullptr};  // cgru only: GRU2, C -> D
  // ModelOptions::layer_norm only: the norms of cell's and cell2's products (W_ih x, W_hh h)
  GateNorm norm_ih{nullptr}, norm_hh{nullptr}, norm2_ih{nullptr}, norm2_hh{nullptr};
  torch::nn::Linear deep{nullptr};    // D + C + E -> E
  torch::Tensor out_weight;           // [V, E], or the embedding when tied
  torch::Tensor out_bias;             // [V]

 private:
  // [.., D], [.., C], [.., E] -> logits [.., V], or [.., V'] over the rows
  // `mem` keeps (restrict_output()) when given.
  torch::Tensor output(const torch::Tensor& s, const torch::Tensor& c, const torch::Tensor& ey,
                       const DecoderMemory* mem = nullptr);
  // The embedding's contribution to the first GRU's input gates (bias included): ey [.., E] -> [.., 3D];
  // for cgru, whose first GRU reads ey alone, normalized by norm_ih (ModelOptions::layer_norm).
  torch::Tensor input_gates(const torch::Tensor& ey);
  // One step of the recurrence: {s_t, c_t, alpha_t} from ey's input gates
  // gi [B, 3D] (input_gates()) and s_{t-1} [B, D].
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> recur_fast(const torch::Tensor& gi, const torch::Tensor& state,
                                                                    const DecoderMemory& mem);
  // The same step in the plain formulation (Path::kPlain).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> recur_plain(const torch::Tensor& ey,
                                                                     const torch::Tensor& state,
                                                                     const DecoderMemory& mem);
  // Teacher forcing's steps through attentive_recurrence(): {states [B, T, D],
  // contexts [B, T, C], alphas [B, T, S]}.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run_recurrence(const torch::Tensor& ey,
                                                                        const EncoderOutput& enc,
                                                                        const DecoderMemory& mem);
  // Teacher forcing up to the output layer: its inputs (states [B, T, D],
  // contexts [B, T, C], embeddings ey [B, T, E]) and, with `want_alpha`, the
  // weights forward() returns in *alpha_out.
  struct Forced {
    torch::Tensor states, contexts, ey, alpha;
  };
  Forced teacher_forced(const torch::Tensor& tgt_in, const EncoderOutput& enc, bool want_alpha,
                        const torch::Tensor& tgt_out);
  // Teacher forcing's steps one at a time (optimized or plain); alphas only with `alphas`.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run_steps(const torch::Tensor& ey, const EncoderOutput& enc,
                                                                   const DecoderMemory& mem, bool alphas);
  // Adds the reduced-precision copies of the step products to `w`
  // (StepWeightsFor::precision). Throws nmt::Error off the CPU.
  void add_reduced_weights(StepWeights& w, Precision p) const;
  // Whether teacher forcing takes the optimized path (path_, and for kAuto whether autograd records).
  bool optimized() const;
  // Whether forward() runs attentive_recurrence() (path_, autograd, attention type).
  bool runs_recurrence() const;
  static constexpr int64_t kGateTableBytes = int64_t{128} << 20;
  ModelOptions opt_;
  Path path_ = Path::kAuto;
  Dropout drop{nullptr};
  Dropout word_drop{nullptr};         // whole input embeddings (ModelOptions::word_dropout)
  Dropout hidden_drop{nullptr};       // DecoderMemory's state masks (ModelOptions::dec_hidden_dropout)
  AlignmentHead align_head{nullptr};  // null without ModelOptions::alignment_head
};
TORCH_MODULE(Decoder);

// The attention's query projection W [A, D] stacked over the hidden projection
// of `reader`, the GRU whose state queries: {weight [A' + 3D, D], bias [A' + 3D]}
// with zeros for W's bias; A' = 0 where the attention projects no query.
std::pair<torch::Tensor, torch::Tensor> query_projection(const AttentionImpl& attention,
                                                         const torch::nn::GRUCellImpl& reader);

}  // namespace nmt
