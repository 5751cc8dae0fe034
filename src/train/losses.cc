// The training losses (losses.h).
#include "train/losses.h"

#include <torch/autograd.h>

#include "text/tokenizer.h"

namespace nmt {

torch::Tensor guided_alignment_loss(const torch::Tensor& alpha, const torch::Tensor& guide) {
  return -(guide * torch::log(alpha.clamp_min(1e-9))).sum();
}

namespace {

// Label-smoothed cross-entropy summed over the rows whose target is not
// padding, with a hand-written backward. F::cross_entropy computes the same
// loss with a dozen passes over the [N, V] logits forward and backward (the
// log-softmax, the smoothing term's sum, the gradients of both and of the
// NLL as separate dense tensors); here the forward makes the log-softmax and
// one sum, and the backward turns the saved log-probabilities into the
// gradient in place: g * (softmax - (1 - eps) onehot(target) - eps / V).
// The saved log-probabilities are consumed, so the graph runs backward once.
struct SmoothedCrossEntropy : torch::autograd::Function<SmoothedCrossEntropy> {
  // logits [N, V], target [N] int64 -> scalar.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& target, double eps) {
    const int64_t V = logits.size(1);
    auto lp = torch::log_softmax(logits, 1);                             // [N, V]
    auto keep = target.ne(kPadId).to(logits.scalar_type());              // [N]
    auto lp_target = lp.gather(1, target.unsqueeze(1)).squeeze(1);       // [N]
    auto row = lp_target * (1.0 - eps);                                  // [N]
    if (eps > 0) row = row + lp.sum(1) * (eps / static_cast<double>(V));
    ctx->save_for_backward({lp, target, keep});
    ctx->saved_data["eps"] = eps;
    return -(row * keep).sum();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0];  // the log-probabilities, turned into the gradient in place
    const auto& target = saved[1];
    const double eps = ctx->saved_data["eps"].toDouble();
    const int64_t V = grad.size(1);
    auto w = (saved[2] * grad_out[0]).unsqueeze(1);  // [N, 1]: the upstream gradient, 0 on padding
    grad.exp_();                                      // softmax
    if (eps > 0) grad.sub_(eps / static_cast<double>(V));
    grad.mul_(w);
    grad.scatter_add_(1, target.unsqueeze(1), w * -(1.0 - eps));
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

// R-Drop's loss (consistency_loss()) on rows [2N, V] (the first run's N,
// then the second's) with a hand-written backward, as SmoothedCrossEntropy's:
// the log-softmax once, its exponential and the difference of the two runs'
// log-probabilities saved; the backward turns them into the gradient in
// place. A training step of the Multi30k recipe with --r-drop 5 runs 1.14
// times as fast as with the same loss composed of LibTorch's operators
// (bench/results/train-speed-rdrop-vm-c55e497.txt). With
// D = log p1 - log p2 and the per-row divergences KL_12 = sum p1 D and
// KL_21 = -sum p2 D, the divergence's gradient in the first run's logits is
// p1 (D - KL_12) + p1 - p2, in the second's p2 (-D - KL_21) + p2 - p1.
struct SmoothedConsistency : torch::autograd::Function<SmoothedConsistency> {
  // logits [2N, V], target [N] int64 -> {loss, cross-entropy}, scalars; the second is not differentiable.
  static torch::autograd::tensor_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                                              const torch::Tensor& target, double eps, double alpha) {
    const int64_t N = target.size(0), V = logits.size(1);
    auto lp = torch::log_softmax(logits, 1);                         // [2N, V]
    const auto target2 = target.repeat({2});                         // [2N]
    const auto keep = target.ne(kPadId).to(logits.scalar_type());    // [N]
    const auto keep2 = keep.repeat({2});                             // [2N]
    auto row = lp.gather(1, target2.unsqueeze(1)).squeeze(1) * (1.0 - eps);  // [2N]
    if (eps > 0) row = row + lp.sum(1) * (eps / static_cast<double>(V));
    const auto cross_entropy = -(row * keep2).sum() * 0.5;          // [] the two runs' mean
    auto diff = lp.narrow(0, 0, N) - lp.narrow(0, N, N);             // [N, V] D
    auto p = lp.exp_();                                              // [2N, V], in lp's memory
    const auto kl12 = (p.narrow(0, 0, N) * diff).sum(1);             // [N]
    const auto kl21 = -(p.narrow(0, N, N) * diff).sum(1);            // [N]
    const auto loss = cross_entropy + ((kl12 + kl21) * keep).sum() * (alpha / 4);
    ctx->save_for_backward({p, diff, target2, keep2, kl12, kl21});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["alpha"] = alpha;
    const auto value = cross_entropy + (kl12 + kl21).sum() * 0.0;  // NaN with a divergence that is not finite
    ctx->mark_non_differentiable({value});
    return {loss, value};
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0];  // the probabilities, turned into the gradient in place
    auto diff = saved[1];  // D, consumed
    const auto& target2 = saved[2];
    const double eps = ctx->saved_data["eps"].toDouble(), alpha = ctx->saved_data["alpha"].toDouble();
    const int64_t N = diff.size(0), V = grad.size(1);
    const auto w2 = (saved[3] * grad_out[0]).unsqueeze(1);  // [2N, 1]: the upstream gradient, 0 on padding
    const auto w = w2.narrow(0, 0, N) * (alpha / 4);        // [N, 1]: the divergence's weight
    auto p1 = grad.narrow(0, 0, N), p2 = grad.narrow(0, N, N);
    const auto spread = p1 - p2;                                                            // [N, V]
    auto first = (diff - saved[4].unsqueeze(1)).mul_(p1).add_(spread).mul_(w);             // [N, V]
    auto second = diff.neg_().sub_(saved[5].unsqueeze(1)).mul_(p2).sub_(spread).mul_(w);  // [N, V], in D's memory
    if (eps > 0) grad.sub_(eps / static_cast<double>(V));
    grad.mul_(w2 * 0.5);
    grad.scatter_add_(1, target2.unsqueeze(1), w2 * (-(1.0 - eps) * 0.5));
    p1.add_(first);
    p2.add_(second);
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Word-level distillation's loss (distillation_loss()) on rows [N, V] with a
// hand-written backward, as SmoothedCrossEntropy's. The loss is the
// cross-entropy -sum_v t_v log p_v against the mixed target
// t = (1 - weight) ((1 - eps) onehot(target) + eps / V) + weight q, whose
// rows sum to 1, so its gradient in the logits is softmax - t.
struct SmoothedDistillation : torch::autograd::Function<SmoothedDistillation> {
  // logits [N, V], target [N] int64, teacher_logp [N, V] -> {loss, cross-entropy}, scalars; the second is not differentiable.
  static torch::autograd::tensor_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                                              const torch::Tensor& target, const torch::Tensor& teacher_logp,
                                              double eps, double weight) {
    const int64_t V = logits.size(1);
    auto lp = torch::log_softmax(logits, 1);                        // [N, V]
    const auto keep = target.ne(kPadId).to(logits.scalar_type());   // [N]
    auto row = lp.gather(1, target.unsqueeze(1)).squeeze(1) * (1.0 - eps);  // [N]
    if (eps > 0) row = row + lp.sum(1) * (eps / static_cast<double>(V));
    const auto q = teacher_logp.to(logits.scalar_type()).exp();     // [N, V] the teachers' probabilities
    const auto kd_row = (q * lp).sum(1);                            // [N] minus the cross-entropy against q
    const auto cross_entropy = -(row * keep).sum();                 // [] against the reference alone
    const auto kd = -(kd_row * keep).sum();                         // [] against the teachers
    const auto loss = cross_entropy * (1.0 - weight) + kd * weight;
    ctx->save_for_backward({lp, target, keep, q});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["weight"] = weight;
    const auto value = cross_entropy.detach() + kd.detach() * 0.0;  // NaN with a teacher term that is not finite
    ctx->mark_non_differentiable({value});
    return {loss, value};
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0];  // the log-probabilities, turned into the gradient in place
    const auto& target = saved[1];
    const double eps = ctx->saved_data["eps"].toDouble(), weight = ctx->saved_data["weight"].toDouble();
    const int64_t V = grad.size(1);
    auto w = (saved[2] * grad_out[0]).unsqueeze(1);  // [N, 1]: the upstream gradient, 0 on padding
    grad.exp_();                                      // softmax
    if (eps > 0) grad.sub_((1.0 - weight) * eps / static_cast<double>(V));
    grad.sub_(saved[3] * weight);
    grad.mul_(w);
    grad.scatter_add_(1, target.unsqueeze(1), w * -((1.0 - weight) * (1.0 - eps)));
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing) {
  return SmoothedCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}), label_smoothing);
}

TrainingLoss consistency_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                              double alpha) {
  const int64_t B = tgt_out.size(0);
  TORCH_CHECK(logits.dim() == 3 && tgt_out.dim() == 2 && logits.size(0) == 2 * B && logits.size(1) == tgt_out.size(1),
              "consistency_loss: logits ", logits.sizes(), " are not [2B, T, V] for tgt_out ", tgt_out.sizes());
  const auto out = SmoothedConsistency::apply(logits.reshape({2 * tgt_out.numel(), logits.size(2)}),
                                              tgt_out.reshape({-1}), label_smoothing, alpha);
  return {out[0], out[1]};
}

TrainingLoss training_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                           double r_drop) {
  if (r_drop > 0) return consistency_loss(logits, tgt_out, label_smoothing, r_drop);
  auto loss = sequence_loss(logits, tgt_out, label_smoothing);  // [] summed over target tokens
  return {loss, loss.detach()};
}

TrainingLoss distillation_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                               const torch::Tensor& teacher_logp, double weight) {
  TORCH_CHECK(logits.dim() == 3 && tgt_out.dim() == 2 && logits.size(0) == tgt_out.size(0) &&
                  logits.size(1) == tgt_out.size(1) && teacher_logp.sizes() == logits.sizes(),
              "distillation_loss: logits ", logits.sizes(), " and teacher_logp ", teacher_logp.sizes(),
              " are not both [B, T, V] for tgt_out ", tgt_out.sizes());
  const int64_t V = logits.size(2);
  const auto out = SmoothedDistillation::apply(logits.reshape({-1, V}), tgt_out.reshape({-1}),
                                               teacher_logp.reshape({-1, V}), label_smoothing, weight);
  return {out[0], out[1]};
}

}  // namespace nmt
