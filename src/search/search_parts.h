// What the searches share (search.cc: eager greedy and beam search;
// fixed_row_search.cc: the same over fixed rows, for CUDA graphs): length
// caps and penalty, the buffers they fill and how those become hypotheses.
// Internal to src/search.
#pragma once
#include <torch/torch.h>

#include <limits>
#include <vector>

#include "base/options.h"
#include "model/batch.h"
#include "search/search.h"

namespace nmt::search_parts {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// GNMT length penalty ((5 + n) / 6)^alpha for n output tokens (EOS
// included), elementwise; 1 when alpha is 0. Normalized score = score / it.
torch::Tensor length_penalty(const torch::Tensor& n, double alpha);

// Per-sentence output cap [B] int64 on the CPU: ratio * source length + 5, at
// most max_length. Throws c10::Error unless batch.src_len is int64 on the CPU.
torch::Tensor length_caps(const Batch& batch, const SearchOptions& opt);
// The cap of one sentence of `src_len` source pieces, as length_caps() gives it.
int64_t length_cap(int64_t src_len, const SearchOptions& opt);

// What greedy search writes for each sentence, on the batch's device.
struct GreedyOutputs {
  torch::Tensor tokens;  // [B, steps] int64: target ids, then EOS, then padding
  torch::Tensor score;   // [B] float: summed log-probabilities
  torch::Tensor att;     // [B, steps, S] float attention rows; undefined: not asked for
  GreedyOutputs() = default;
  GreedyOutputs(const Batch& batch, int64_t steps, bool with_attention);
};

// Each sentence's hypothesis from greedy search's outputs, normalized with
// length-penalty exponent `alpha`.
std::vector<std::vector<Hypothesis>> greedy_hypotheses(const Batch& batch, const GreedyOutputs& outputs,
                                                       double alpha);

// Beams of some sentences, K hypotheses each.
struct Beams {
  torch::Tensor score;      // [B, K] float raw log-probability sums
  torch::Tensor length;     // [B, K] int64 tokens emitted, EOS included
  torch::Tensor history;    // [B, K, t] int64 tokens, padding after EOS
  torch::Tensor attention;  // [B, K, t, S] float; undefined without attention

  // The beams of sentences `idx` [n] (int64), in that order.
  Beams select(const torch::Tensor& idx) const;
  // Stores `beams` (of t <= this history's steps) as the beams of sentences `idx` [n].
  void write(const Beams& beams, const torch::Tensor& idx);
};

// The opt.n_best hypotheses of each sentence of `beams` (one per sentence of
// `batch`, opt.beam_size each), best normalized score first.
std::vector<std::vector<Hypothesis>> beam_hypotheses(const Batch& batch, const Beams& beams, const SearchOptions& opt);

// One beam-search step's choice, shared by the eager and fixed-row searches.
// From the step's log-probabilities `logp` [B*K, V] (B sentences, K rows each),
// the beams' scores and lengths [B, K], which rows have finished [B, K] bool,
// and which rows have reached their length cap [B*K, 1] bool: the K best
// continuations of each sentence. A capped row may only end (EOS); a
// finished row only pads, at no cost.
struct BeamChoice {
  torch::Tensor beam;      // [B, K] int64 the hypothesis (0..K-1) each new one extends
  torch::Tensor rows;      // [B*K] int64 the row (b*K + beam) each new one extends
  torch::Tensor columns;   // [B, K] int64 the column of logp appended
  torch::Tensor score;     // [B, K] float the new raw scores
  torch::Tensor length;    // [B, K] int64 the new lengths
  torch::Tensor finished;  // [B, K] bool the new hypothesis has ended (by EOS, now or before)
};
BeamChoice choose_beams(const torch::Tensor& logp, const torch::Tensor& score, const torch::Tensor& length,
                        const torch::Tensor& finished, const torch::Tensor& capped, double alpha);

// How often, in steps, a fixed-row search reads on the host whether every
// sentence has finished (a read waits for the device).
constexpr int64_t kFixedRowCheckEvery = 8;

}  // namespace nmt::search_parts
