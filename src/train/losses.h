// The training losses: label-smoothed cross-entropy with a hand-written
// backward, and guided alignment. Shapes: B batch, T target length, S source
// length, V target vocabulary.
#pragma once
#include <torch/types.h>

namespace nmt {

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

}  // namespace nmt
