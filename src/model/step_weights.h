// What a decoder step multiplies with and reads. StepWeights: the weights of
// a step's products, each transposed to [in, out] and contiguous, and for
// search also packed once (AVX-512), in reduced precision (--int8, --bf16)
// and the first GRU's input gates of every target embedding. DecoderMemory:
// what the decoder reads of one batch's encoder output at every step.
// Teacher forcing makes both per call (DecoderImpl::forward); search makes
// the weights once per engine (engine/rnn_engine.h) and the memory once per
// batch. Shapes: S source length, E embedding, C annotation size, D decoder
// hidden, A attention size, V target vocabulary.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <memory>

#include "model/quantized.h"

namespace nmt {

class PackedLinear;  // model/packed_linear.h

// What DecoderImpl::make_step_weights() makes besides the transposed weights.
struct StepWeightsFor {
  // For search (or any step without autograd): packed copies where the CPU
  // has AVX-512 (PackedLinear::available()). The caller must have autograd
  // off, as no gradient reaches the parameters through the copies.
  bool search = false;
  // With the first GRU's input gates of every target embedding (when under
  // kGateTableBytes): for search, whose steps read one embedding per row.
  bool gate_table = false;
  // With kInt8 or kBf16, copies of the four step products' weights in that
  // precision (quantized.h), used on rows enough (min_rows()); needs `search`.
  Precision precision = Precision::kFloat32;
};

// The weights a decoder step multiplies with. OpenBLAS multiplies a few
// dozen rows by a weight laid out [in, out] 10-20% faster than by the
// [out, in] parameter itself (bench/results/decode-kernels-*.txt); it still
// repacks the weight on every call, so on a CPU with AVX-512 search
// multiplies with copies packed once (PackedLinear) instead. The same values
// as the parameters when made.
struct StepWeights {
  torch::Tensor gate_table;             // [V, 3D] input gates of every target embedding (StepWeightsFor::gate_table)
  torch::Tensor hidden1_t, hidden1_b;   // cgru's first GRU: W_hh^T [D, 3D], b_hh [3D]; undefined for bahdanau
  torch::Tensor query_t, query_b;       // the attention's query projection stacked over the hidden
                                        // projection of the GRU that reads c_t: [D, A' + 3D], [A' + 3D]
                                        // (A' = A for additive/concat attention, else 0)
  int64_t query_size = 0;               // A'
  torch::Tensor deep_t, deep_b;         // the deep output layer: [D + C + E, E], [E]
  torch::Tensor out_t, out_b;           // the output projection: [E, V], [V]
  bool for_search = false;              // made without autograd (StepWeightsFor::search)
  // The same four products with their weights packed once (search on a CPU
  // with AVX-512); null otherwise.
  std::shared_ptr<const PackedLinear> hidden1_p, query_p, deep_p, out_p;
  // The same four products in reduced precision (StepWeightsFor::precision);
  // null in float.
  Precision precision = Precision::kFloat32;
  std::shared_ptr<const ReducedLinear> hidden1_r, query_r, deep_r, out_r;

  // Below this many rows the int8 products were slower than float on 2 AVX2
  // cores (the input's quantization does not pay): greedy search over 64
  // sentences lost 16%, beam 5 over the same gained 19%
  // (bench/results/vs-pytorch-vm-42059aa.json, in git at c997cff). bfloat16 paid from 4 rows
  // on (bench/results/bf16-*.txt), so it runs on any.
  static constexpr int64_t kInt8MinRows = 128;
  static int64_t min_rows(Precision p) { return p == Precision::kInt8 ? kInt8MinRows : 1; }
  // Whether a product over rows x [R, ..] takes the reduced-precision copies:
  // they exist, autograd is off, x is on the CPU and R >= min_rows().
  bool reduced_for(const torch::Tensor& x) const;
};

// x W^T + b with the weight given transposed: x [.., K], wt [K, N], b [N] -> [.., N].
torch::Tensor linear_t(const torch::Tensor& x, const torch::Tensor& wt, const torch::Tensor& b);

// linear_t() through the packed copy `p` where there is one and x is [R, K]
// on the CPU without autograd (search on an AVX-512 CPU).
torch::Tensor step_linear(const torch::Tensor& x, const std::shared_ptr<const PackedLinear>& p, const torch::Tensor& wt,
                          const torch::Tensor& b);

// What the decoder reads of a batch's encoder output at every step, computed
// once per batch by DecoderImpl::memory(). Row b belongs to sentence b; a
// search that gives a sentence several rows repeats its memory (repeat()),
// and its engine keeps the row tensors in a DecoderState from then on.
struct DecoderMemory {
  torch::Tensor keys;       // [B, S, A] attention keys (AttentionImpl::keys)
  torch::Tensor values;     // [B, S, C + 3D] h_j, then h_j's projection into the gates of
                            // the GRU that reads the context (so that W c_t = sum_j alpha_j W h_j);
                            // [B, S, C] (h_j only) when built for the plain path
  torch::Tensor mask;       // [B, S] bool, true on real positions
  torch::Tensor mask_bias;  // [B, S] 0 on real positions, -inf on padding
  int64_t context_size = 0;  // C
  // Variational dropout masks [B, D] (ModelOptions::dec_hidden_dropout, training only; undefined
  // otherwise), each row 0 or 1/(1-p) per unit, the same at every step: query_mask on the query
  // state where it enters the attention's W and the reading GRU's W_hh; prev_mask (cgru) on
  // s_{t-1} where it enters GRU1's W_hh.
  torch::Tensor query_mask, prev_mask;
  // The step's weights (optimized path only; null for the plain one).
  std::shared_ptr<const StepWeights> weights;
  // The columns of the output projection a shortlist leaves (DecoderImpl::restrict_output):
  // weight [E, V'] and bias [V'], whose logits come out in the shortlist's order;
  // undefined: the whole vocabulary.
  torch::Tensor out_t, out_b;
  std::shared_ptr<const ReducedLinear> out_reduced;  // the same rows in the weights' reduced precision
  std::shared_ptr<const PackedLinear> out_packed;    // the same rows packed, for search on a CPU with AVX-512
  // The annotations h_j [B, S, C].
  torch::Tensor annotations() const { return values.narrow(2, 0, context_size); }
  // Each row `copies` times in a row: row b becomes rows b*copies .. b*copies+copies-1.
  DecoderMemory repeat(int64_t copies) const;
};

}  // namespace nmt
