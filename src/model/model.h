// The attention model of Bahdanau, Cho & Bengio (2015): a bidirectional GRU
// encoder, an attention over its annotations and a GRU decoder with a deep
// output layer. Shapes: B batch, S source length, T target length,
// E embedding, H encoder hidden per direction, C = 2H annotation size,
// D decoder hidden, V target vocabulary.
#pragma once
#include <c10/core/InferenceMode.h>
#include <torch/nn.h>

#include <array>
#include <memory>
#include <mutex>

#include "base/options.h"

namespace nmt {

class ReducedLinear;  // model/quantized.h
class PackedLinear;   // model/packed_linear.h
enum class Precision;

// GRU update from precomputed gate pre-activations, in GRUCell's gate order
// (reset, update, new): gi = W_i x + b_i and gh = W_h h + b_h [B, 3D], h [B, D].
// Returns h' = (1 - z) * n + z * h with r = sigmoid(gi_r + gh_r),
// z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n).
torch::Tensor gru_update(const torch::Tensor& gi, const torch::Tensor& gh, const torch::Tensor& h);

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
  explicit EncoderImpl(const ModelOptions& opt);
  // src [B, S] int64; src_len [B] int64 on CPU, every length >= 1.
  EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& src_len);

 private:
  ModelOptions opt_;
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRU rnn{nullptr};
  torch::nn::Linear init{nullptr};  // H -> D
  Dropout drop{nullptr};
  Dropout word_drop{nullptr};  // whole input embeddings (ModelOptions::word_dropout)
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

// The weights a search step multiplies with, each transposed to [in, out] and
// contiguous: OpenBLAS multiplies a few dozen rows by a weight laid out so
// 10-20% faster than by the [out, in] parameter itself
// (bench/results/decode-kernels-*.txt). It still repacks the weight on every
// call, so on a CPU with AVX-512 search multiplies with copies packed once
// (PackedLinear) instead. Built by DecoderImpl::step_weights(); the same
// values as the parameters.
struct StepWeights {
  torch::Tensor gate_table;             // [V, 3D] input_gates() of every target embedding; defined only
                                        // for search (for_search) and when under kGateTableBytes
  torch::Tensor hidden1_t, hidden1_b;   // cgru's first GRU: W_hh^T [D, 3D], b_hh [3D]; undefined for bahdanau
  torch::Tensor query_t, query_b;       // the attention's query projection stacked over the hidden
                                        // projection of the GRU that reads c_t: [D, A' + 3D], [A' + 3D]
                                        // (A' = A for additive/concat attention, else 0)
  int64_t query_size = 0;               // A'
  torch::Tensor deep_t, deep_b;         // the deep output layer: [D + C + E, E], [E]
  torch::Tensor out_t, out_b;           // the output projection: [E, V], [V]
  bool for_search = false;              // the kept copy for search: made without autograd, so no
                                        // gradient reaches the parameters through it
  // For search on a CPU with AVX-512 (PackedLinear::available()), the same
  // four products with their weights packed once; null otherwise.
  std::shared_ptr<const PackedLinear> hidden1_p, query_p, deep_p, out_p;
};

// What the decoder reads of a batch's encoder output at every step, computed
// once per batch by DecoderImpl::memory(). Row b belongs to sentence b; a
// search that gives a sentence several rows repeats its memory (repeat()).
struct DecoderMemory {
  torch::Tensor keys;       // [B, S, A] attention keys (AttentionImpl::keys)
  torch::Tensor values;     // [B, S, C + 3D] h_j, then h_j's projection into the gates of
                            // the GRU that reads the context (so that W c_t = sum_j alpha_j W h_j);
                            // [B, S, C] (h_j only) when built for the plain path
  torch::Tensor mask;       // [B, S] bool, true on real positions
  torch::Tensor mask_bias;  // [B, S] 0 on real positions, -inf on padding
  int64_t context_size = 0;  // C
  // The step's weights (optimized path only; null for the plain one).
  std::shared_ptr<const StepWeights> weights;
  // The columns of the output projection a shortlist leaves (DecoderImpl::restrict_output):
  // weight [E, V'] and bias [V'], whose logits come out in the shortlist's order;
  // undefined: the whole vocabulary.
  torch::Tensor out_t, out_b;
  std::shared_ptr<const ReducedLinear> out_reduced;  // the same rows in reduced precision, when the decoder's products are (set_precision())
  std::shared_ptr<const PackedLinear> out_packed;    // the same rows packed, for search on a CPU with AVX-512
  // The annotations h_j [B, S, C].
  torch::Tensor annotations() const { return values.narrow(2, 0, context_size); }
  // Each row `copies` times in a row: row b becomes rows b*copies .. b*copies+copies-1.
  DecoderMemory repeat(int64_t copies) const;
  // Rows `rows` [R'] (int64 on this memory's device) in that order: what a
  // search keeps when it drops finished sentences.
  DecoderMemory index_select(const torch::Tensor& rows) const;
};

struct DecoderStep {
  torch::Tensor state;    // [B, D] s_t
  torch::Tensor context;  // [B, C] c_t
  torch::Tensor alpha;    // [B, S] attention weights of this step
  torch::Tensor logits;   // [B, V]
};

// The decoder. Bahdanau: s_t = GRU([E y_{t-1}; c_t], s_{t-1}) where c_t
// attends with s_{t-1}. Conditional GRU (DecoderType::kCgru, as Nematus):
// s'_t = GRU1(E y_{t-1}, s_{t-1}), c_t attends with s'_t, s_t = GRU2(c_t, s'_t).
// Both: output t_t = tanh(W_o [s_t; c_t; E y_{t-1}]), logits = W_out t_t.
class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const ModelOptions& opt);
  // Teacher forcing. tgt_in [B, T] -> logits [B, T, V]; with `alpha_out`,
  // also the attention weights [B, T, S], or, when the model has an
  // alignment head and `tgt_out` [B, T] (the pieces each step predicts) is
  // defined, the head's weights for those pieces (Seq2SeqImpl::forward_aligned()).
  torch::Tensor forward(const torch::Tensor& tgt_in, const EncoderOutput& enc, torch::Tensor* alpha_out = nullptr,
                        const torch::Tensor& tgt_out = {});
  // Whether the model has an alignment head (ModelOptions::alignment_head).
  bool has_alignment_head() const { return !align_head.is_empty(); }
  // The per-batch part of every step: keys, values and mask of `enc`.
  DecoderMemory memory(const EncoderOutput& enc);
  // One step of search. y_prev [B], state [B, D], memory from memory().
  // The logits are [B, V], or [B, V'] over the ids of restrict_output().
  DecoderStep step(const torch::Tensor& y_prev, const torch::Tensor& state, const DecoderMemory& mem);
  // Makes step() score only the target ids `ids` [V'] (int64, any order, on
  // the model's device): logits column i is id ids[i]. For search with a
  // shortlist (search/shortlist.h); teacher forcing is unaffected. With
  // set_int8() and at least kInt8MinRows rows in `mem`, the rows are also
  // packed in int8.
  void restrict_output(DecoderMemory& mem, const torch::Tensor& ids) const;
  Attention attention{nullptr};

  // How steps are computed; the function and the parameters are the same
  // either way (the equivalence tests hold the paths together).
  enum class Path {
    // kRecurrence while autograd records (training), kOptimized otherwise
    // (search, validation): what measured fastest on the CPU
    // (bench/results/decoder-path-and-threads-*.txt, recurrence-*.txt).
    kAuto,
    // As few and as large operations per step as possible: the embeddings'
    // share of the GRU input gates for all steps at once, the context's share
    // through the attention weights (sum_j alpha_j W h_j, W h_j once per
    // batch in memory()), the attention query and the GRU's hidden gates of
    // the same state in one product.
    kOptimized,
    // GRUCell modules over concatenated inputs, the model as written.
    kReference,
    // Teacher forcing (forward()) runs the whole recurrence as one autograd
    // function with a hand-written backward (attentive_recurrence(),
    // recurrence.h) where the attention is additive or concat, the plain
    // formulation otherwise; search steps take the optimized path.
    kRecurrence,
  };
  void set_path(Path p) { path_ = p; }

  // With kInt8 or kBf16, search steps (optimized path, no autograd, CPU, at
  // least min_rows(p) rows) make their matrix products with copies of the
  // weights in that precision (quantized.h), made now from the current ones:
  // the first GRU's hidden product (cgru), the attention query stacked with
  // the context GRU's hidden product, the deep output layer and the output
  // projection. With kFloat32, the float weights again. Throws nmt::Error
  // when the model is not on the CPU or this LibTorch cannot run `p`.
  void set_precision(Precision p);
  Precision precision() const;
  void set_int8(bool on);  // set_precision(kInt8 or kFloat32)
  bool int8() const;
  // Below this many rows the int8 products were slower than float on 2 AVX2
  // cores (the input's quantization does not pay): greedy search over 64
  // sentences lost 16%, beam 5 over the same gained 19%
  // (bench/results/vs-pytorch-vm-42059aa.json). bfloat16 paid from 4 rows
  // on (bench/results/bf16-*.txt), so it runs on any.
  static constexpr int64_t kInt8MinRows = 128;
  static int64_t min_rows(Precision p);

 private:
  // [.., D], [.., C], [.., E] -> logits [.., V], or [.., V'] over the rows
  // `mem` keeps (restrict_output()) when given.
  torch::Tensor output(const torch::Tensor& s, const torch::Tensor& c, const torch::Tensor& ey,
                       const DecoderMemory* mem = nullptr);
  // The embedding's contribution to the first GRU's input gates (bias included): ey [.., E] -> [.., 3D].
  torch::Tensor input_gates(const torch::Tensor& ey);
  // The weights of a search step (StepWeights). In eval mode without
  // autograd (search, validation) a copy kept from the last call, made again
  // when a parameter has changed (its version counter), moved or been
  // replaced; with its gate table, unless that would take more than
  // kGateTableBytes. Otherwise made now, through autograd, without the table.
  // Safe to call from several threads at once (searches of batches in
  // parallel: Translator).
  std::shared_ptr<const StepWeights> step_weights();
  // New weights; `for_search`: without autograd (the caller's duty), with the gate table.
  std::shared_ptr<const StepWeights> make_step_weights(bool for_search);
  // Whether steps now serve search: eval mode, autograd off.
  bool searching() const;
  static constexpr int64_t kGateTableBytes = int64_t{128} << 20;
  struct ParamStamp {  // what step_weights() keeps a copy against, per parameter
    c10::Storage storage;
    int64_t offset = 0, version = 0;
    bool operator==(const ParamStamp& o) const {
      return storage.unsafeGetStorageImpl() == o.storage.unsafeGetStorageImpl() && offset == o.offset &&
             version == o.version;
    }
  };
  std::mutex step_weights_mutex_;
  std::shared_ptr<const StepWeights> step_weights_;
  std::vector<ParamStamp> step_weights_key_;
  // One step of the recurrence: {s_t, c_t, alpha_t} from ey's input gates
  // gi [B, 3D] (input_gates()) and s_{t-1} [B, D].
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> recur_fast(const torch::Tensor& gi, const torch::Tensor& state,
                                                                    const DecoderMemory& mem);
  // The same step in the plain formulation (Path::kReference).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> recur_reference(const torch::Tensor& ey,
                                                                         const torch::Tensor& state,
                                                                         const DecoderMemory& mem);
  ModelOptions opt_;
  Path path_ = Path::kAuto;
  // Whether the optimized path runs now (path_, and for kAuto whether autograd records).
  bool optimized() const;
  // Whether a step with `mem` takes the optimized path (optimized(), and mem built for it).
  bool runs_optimized(const DecoderMemory& mem) const;
  // Whether forward() runs attentive_recurrence() (path_, autograd, attention type).
  bool runs_recurrence() const;
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRUCell cell{nullptr};   // bahdanau: [E + C] -> D; cgru: GRU1, E -> D
  torch::nn::GRUCell cell2{nullptr};  // cgru only: GRU2, C -> D
  torch::nn::Linear deep{nullptr};  // D + C + E -> E
  torch::Tensor out_weight;          // [V, E], or the embedding when tied
  torch::Tensor out_bias;            // [V]
  Dropout drop{nullptr};
  Dropout word_drop{nullptr};  // whole input embeddings (ModelOptions::word_dropout)
  AlignmentHead align_head{nullptr};  // null without ModelOptions::alignment_head
  // set_precision(): the reduced-precision copies.
  struct ReducedWeights {
    Precision precision;
    std::shared_ptr<const ReducedLinear> hidden1;  // cgru's GRU1: W_hh [3D, D], b_hh (null for bahdanau)
    std::shared_ptr<const ReducedLinear> query;    // StepWeights::query_t's weight: [A' + 3D, D]
    std::shared_ptr<const ReducedLinear> deep;     // [E, D + C + E]
    std::shared_ptr<const ReducedLinear> out;      // [V, E]
  };
  std::shared_ptr<const ReducedWeights> reduced_;
  // reduced_ when a step on rows x [R, ..] may use it (no autograd, on the
  // CPU, R >= min_rows()), else null.
  const ReducedWeights* reduced_now(const torch::Tensor& x) const;
};
TORCH_MODULE(Decoder);

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const ModelOptions& opt);
  // Teacher-forced logits [B, T, V] for a batch (src, src_len, tgt_in);
  // with `alpha_out`, also the attention weights [B, T, S].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                        torch::Tensor* alpha_out = nullptr);
  // Teacher forcing, and each target piece's alignment over the source: the
  // logits [B, T, V] and the weights [B, T, S] of the alignment head for the
  // pieces tgt_out [B, T] when the model has one, else of the attention.
  // What guided alignment trains and forced alignment reads.
  std::pair<torch::Tensor, torch::Tensor> forward_aligned(const torch::Tensor& src, const torch::Tensor& src_len,
                                                          const torch::Tensor& tgt_in, const torch::Tensor& tgt_out);
  const ModelOptions& options() const { return opt_; }
  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  ModelOptions opt_;
};
TORCH_MODULE(Seq2Seq);

// Decoding (search, scoring, alignment) runs inside one of these: for its
// life every model given is in eval mode (dropout off) and autograd records
// nothing (c10::InferenceMode); each model's former mode comes back at the end.
class InferenceScope {
 public:
  explicit InferenceScope(std::vector<Seq2Seq> models) : models_(std::move(models)) {
    for (auto& m : models_) {
      was_training_.push_back(m->is_training());
      m->eval();
    }
  }
  ~InferenceScope() {
    for (size_t i = 0; i < models_.size(); ++i)
      if (was_training_[i]) models_[i]->train();
  }
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  std::vector<Seq2Seq> models_;
  std::vector<bool> was_training_;
  c10::InferenceMode mode_;
};

// Summed token cross-entropy with label smoothing, ignoring padding: what
// F::cross_entropy(..., ignore_index = kPadId, label_smoothing, kSum) gives,
// with a backward written by hand (a few passes over the logits instead of a
// dozen). The graph through it may run backward once (no retain_graph).
// logits [B, T, V], tgt_out [B, T] -> scalar.
torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing);

// Guided alignment (Chen et al. 2016): the cross-entropy of the attention
// `alpha` [B, T, S] against `guide` [B, T, S] (each guided row spreads 1
// over its linked source pieces, other rows are 0), summed over the batch.
torch::Tensor guided_alignment_loss(const torch::Tensor& alpha, const torch::Tensor& guide);

// Parameter count, for logs.
int64_t count_parameters(torch::nn::Module& m);

// One parameter of the model that ModelOptions describe.
struct ParameterShape {
  std::string name;            // as named_parameters() names it
  std::vector<int64_t> shape;  // its sizes
};

// The parameters Seq2Seq(opt) would have, in named_parameters() order,
// computed without building it: what a checkpoint's tensors are checked
// against before any memory is given to the model. `opt` must be valid.
std::vector<ParameterShape> parameter_shapes(const ModelOptions& opt);

}  // namespace nmt
