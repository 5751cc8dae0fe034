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

}  // namespace

torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing) {
  return SmoothedCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}), label_smoothing);
}

ConsistencyLoss consistency_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing,
                                 double alpha) {
  const int64_t B = tgt_out.size(0);
  TORCH_CHECK(logits.dim() == 3 && tgt_out.dim() == 2 && logits.size(0) == 2 * B && logits.size(1) == tgt_out.size(1),
              "consistency_loss: logits ", logits.sizes(), " are not [2B, T, V] for tgt_out ", tgt_out.sizes());
  auto loss = sequence_loss(logits, tgt_out.repeat({2, 1}), label_smoothing) * 0.5;  // [] the two runs' mean
  auto cross_entropy = loss.detach();
  if (alpha > 0) {
    const auto lp = torch::log_softmax(logits, 2);                                   // [2B, T, V]
    const auto lp1 = lp.narrow(0, 0, B), lp2 = lp.narrow(0, B, B);                  // [B, T, V] each
    const auto keep = tgt_out.ne(kPadId).unsqueeze(2).to(lp.scalar_type());          // [B, T, 1]
    // KL(p1 || p2) + KL(p2 || p1) = sum_v (p1 - p2) (log p1 - log p2), per position.
    const auto divergence = ((lp1.exp() - lp2.exp()) * (lp1 - lp2) * keep).sum();  // []
    loss = loss + divergence * (alpha / 4);
    cross_entropy = cross_entropy + divergence.detach() * 0.0;  // NaN with a divergence that is not finite
  }
  return {loss, cross_entropy};
}

}  // namespace nmt
