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

// R-Drop's loss (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural
// Networks"): one batch run twice through the model in training mode, so
// under two dropout masks, and each run's output distribution pulled toward
// the other's. logits [2B, T, V]: rows 0..B-1 the first run, B..2B-1 the
// second (a batch from twice()); tgt_out [B, T].
struct TrainingLoss {
  // The mean of the two runs' sequence_loss() plus alpha / 4 times the
  // symmetric divergence KL(p1 || p2) + KL(p2 || p1) summed over the
  // positions whose target is not padding: the paper's loss, NLL_1 + NLL_2 +
  // alpha / 2 (KL_12 + KL_21), halved, so that alpha keeps the paper's
  // meaning and the cross-entropy its scale. Differentiable in logits.
  torch::Tensor loss;
  // Detached: the mean of the two cross-entropies (what training logs, the
  // same quantity sequence_loss() gives without R-Drop); NaN when the
  // divergence is not finite, so that such a step is skipped.
  torch::Tensor cross_entropy;
};
// Throws c10::Error when logits is not [2B, T, V] for tgt_out [B, T].
TrainingLoss consistency_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                              double alpha);

// The loss a training step takes: consistency_loss() with alpha = r_drop
// when r_drop > 0 (logits [2B, T, V] of a batch from twice()), else
// sequence_loss() (logits [B, T, V]) and its detached value. Throws as
// those do.
TrainingLoss training_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                           double r_drop);

// Word-level knowledge distillation (Kim & Rush 2016; train/teachers.h):
// (1 - weight) times sequence_loss()'s label-smoothed cross-entropy against
// the reference plus `weight` times the cross-entropy against the teachers'
// distribution q = exp(teacher_logp) [B, T, V] (rows summing to 1, no
// gradient), summed over the positions whose target is not padding; its
// gradient in the logits is softmax - ((1 - weight) smoothed onehot + weight
// q). cross_entropy is the reference's term alone (what training logs, as
// without distillation), NaN when the teachers' term is not finite. Throws
// c10::Error when logits, tgt_out [B, T] and teacher_logp do not fit.
TrainingLoss distillation_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                               const torch::Tensor& teacher_logp, double weight);

// Guided alignment (Chen et al. 2016): the cross-entropy of the attention
// `alpha` [B, T, S] against `guide` [B, T, S] (each guided row spreads 1
// over its linked source pieces, other rows are 0), summed over the batch.
torch::Tensor guided_alignment_loss(const torch::Tensor& alpha, const torch::Tensor& guide);

}  // namespace nmt
