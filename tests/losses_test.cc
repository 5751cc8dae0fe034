// The training losses (train/losses.h): padding ignored, and the
// hand-written losses (cross-entropy, R-Drop, distillation) and their gradients against LibTorch's.
#include "train/losses.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/batch.h"
#include "model/model.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

using nmt::test::gamma;
using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::within;

using nmt::test::padded_indices;
using nmt::test::seeded_model;

// Random targets [B, T] (B >= 3, T >= 5) below V with padding: row 0 from
// position 3 on, and row 2 at position 4.
torch::Tensor padded_targets(int64_t B, int64_t T, int64_t V) {
  auto tgt = torch::randint(1, V, {B, T}, torch::kLong);
  tgt.index_put_({0, torch::indexing::Slice(3, T)}, nmt::kPadId);
  tgt.index_put_({2, 4}, nmt::kPadId);
  return tgt;
}

TEST(LossTest, SequenceLossIgnoresPadding) {
  auto model = seeded_model(nmt::test::tiny_model());
  const auto ex = nmt::test::padded_examples();
  const auto b = nmt::make_batch(ex, padded_indices());
  torch::NoGradGuard ng;
  const double batch_loss =
      nmt::sequence_loss(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1).item<double>();
  double sum = 0;
  for (int64_t r = 0; r < b.size(); ++r) {
    const auto one = nmt::make_batch(ex, {r});
    sum += nmt::sequence_loss(model->forward(one.src, one.src_len, one.tgt_in), one.tgt_out, 0.1).item<double>();
  }
  // The batch sums its tokens' losses in another order, from logits within the model's bound of
  // those alone; each token's loss moves by at most twice what its logits move.
  const int64_t tokens = b.tgt_out.ne(nmt::kPadId).sum().item<int64_t>();
  const double logits_bound = model_rounding_bound(*model, model_depth(b.src.size(1), b.tgt_in.size(1)));
  EXPECT_TRUE(within(batch_loss, sum, tokens * 2 * logits_bound + 2 * gamma(tokens, 0x1p-24) * std::abs(sum)));
  EXPECT_GT(batch_loss, 0.0);
}

// The hand-written loss and its gradient against LibTorch's cross_entropy,
// with and without label smoothing, on rows with padding targets.
TEST(LossTest, SequenceLossAndItsGradientEqualLibTorchCrossEntropy) {
  torch::manual_seed(3);
  const int64_t B = 3, T = 5, V = 11;
  const auto tgt = padded_targets(B, T, V);
  for (double eps : {0.0, 0.1, 0.3}) {
    auto x = (torch::randn({B, T, V}) * 3).requires_grad_();
    auto loss = nmt::sequence_loss(x, tgt, eps);
    loss.backward(torch::full({}, 0.7));
    auto y = x.detach().clone().requires_grad_();
    auto ref = torch::nn::functional::cross_entropy(
        y.reshape({-1, V}), tgt.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(nmt::kPadId).label_smoothing(eps).reduction(
            torch::kSum));
    ref.backward(torch::full({}, 0.7));
    // Each side sums V exponentials, V logits and N rows its own way: per row
    // within gamma_{V+N+3} (|log-sum-exp| + 2 max |x|) of the exact loss;
    // each gradient p - target rounds p = exp(x - max) / sum within
    // gamma_{V+3} + u |x - max| relative, and the difference and the scaling
    // by 0.7 within 2u (p + 1).
    const double u = 0x1p-24;
    const auto xd = x.detach().to(torch::kDouble).reshape({-1, V});
    const auto real = tgt.reshape({-1}).ne(nmt::kPadId);
    const auto row_scale = (xd.logsumexp(1).abs() + 2 * xd.abs().amax(1)).masked_fill(real.logical_not(), 0);
    const double loss_bound = 2 * gamma(V + B * T + 3, u) * row_scale.sum().item<double>();
    EXPECT_TRUE(within(loss.item<double>(), ref.item<double>(), loss_bound)) << "eps " << eps;
    const auto p = torch::softmax(xd, 1);
    const auto spread = xd.amax(1, true) - xd;
    const auto grad_bound =
        (0.7 * 2 * (p * (gamma(V + 3, u) + u * spread) + 2 * u * (p + 1))).masked_fill(real.logical_not().unsqueeze(1), 0);
    EXPECT_TRUE(within(x.grad().reshape({-1, V}), y.grad().reshape({-1, V}), grad_bound)) << "eps " << eps;
    EXPECT_EQ(x.grad()[0][4].abs().sum().item<float>(), 0.0f);  // a padding row gets no gradient
  }
}

// R-Drop's loss against one written from LibTorch's own functions
// (cross_entropy, kl_div) on rows with padding targets, in double so that
// both sides are within a few units of 2^-53 per term of the exact value.
TEST(LossTest, ConsistencyLossAndItsGradientEqualLibTorchsDivergence) {
  namespace F = torch::nn::functional;
  torch::manual_seed(4);
  const int64_t B = 3, T = 5, V = 11;
  const double eps = 0.1;
  const auto tgt = padded_targets(B, T, V);
  const auto real = tgt.reshape({-1}).ne(nmt::kPadId);  // [B T]
  for (double alpha : {0.0, 1.0, 5.0}) {
    auto x = (torch::randn({2 * B, T, V}, torch::kDouble) * 3).requires_grad_();
    auto got = nmt::consistency_loss(x, tgt, eps, alpha);
    got.loss.backward(torch::full({}, 0.7, torch::kDouble));
    auto y = x.detach().clone().requires_grad_();
    const auto ce = [&](const torch::Tensor& half) {
      return F::cross_entropy(half.reshape({-1, V}), tgt.reshape({-1}),
                              F::CrossEntropyFuncOptions().ignore_index(nmt::kPadId).label_smoothing(eps).reduction(
                                  torch::kSum));
    };
    // KL(p || q) summed over the real positions: kl_div(log q, log p).
    const auto kl = [&](const torch::Tensor& lp, const torch::Tensor& lq) {
      return F::kl_div(lq.reshape({-1, V}).index({real}), lp.reshape({-1, V}).index({real}),
                       F::KLDivFuncOptions().reduction(torch::kSum).log_target(true));
    };
    const auto y1 = y.narrow(0, 0, B), y2 = y.narrow(0, B, B);
    const auto ce_mean = (ce(y1) + ce(y2)) * 0.5;
    const auto lp1 = torch::log_softmax(y1, 2), lp2 = torch::log_softmax(y2, 2);
    const auto want = ce_mean + (kl(lp1, lp2) + kl(lp2, lp1)) * (alpha / 4);
    want.backward(torch::full({}, 0.7, torch::kDouble));
    // Each side sums at most 2 B T V terms its own way, each term from a
    // log-softmax within gamma_{V+3} (|log-sum-exp| + 2 max |x|) of exact and
    // times at most 1 + alpha (2 |lp1 - lp2| + 1); every gradient element
    // sums at most 4 V such terms.
    const double u = 0x1p-53;
    const auto xd = x.detach();
    const double magnitude = (xd.logsumexp(2).abs().max() + 2 * xd.abs().max()).item<double>();
    const double spread = (lp1 - lp2).abs().max().item<double>();
    const double per_term = gamma(V + 3, u) * magnitude * (1 + alpha * (2 * spread + 1));
    const double loss_bound = 2 * (gamma(2 * B * T * V, u) + 2 * B * T * V * per_term) * (1 + want.abs().item<double>());
    EXPECT_TRUE(within(got.loss.item<double>(), want.item<double>(), loss_bound)) << "alpha " << alpha;
    EXPECT_TRUE(within(got.cross_entropy.item<double>(), ce_mean.item<double>(), loss_bound)) << "alpha " << alpha;
    EXPECT_FALSE(got.cross_entropy.requires_grad());
    EXPECT_TRUE(within(x.grad(), y.grad(), 2 * 0.7 * 4 * V * per_term)) << "alpha " << alpha;
    EXPECT_EQ(x.grad()[0][4].abs().sum().item<double>(), 0.0);      // padding rows get no gradient,
    EXPECT_EQ(x.grad()[B][4].abs().sum().item<double>(), 0.0);      // in either run
    if (alpha > 0) {
      EXPECT_GT(got.loss.item<double>() - got.cross_entropy.item<double>(), 1.0);  // the runs differ
    }
  }
}

// Two runs that agree exactly have no divergence: the loss is their
// cross-entropy, and that the one run's sequence_loss() to rounding.
TEST(LossTest, ConsistencyLossOfEqualRunsIsTheirCrossEntropy) {
  torch::manual_seed(5);
  const int64_t B = 2, T = 4, V = 7;
  const auto tgt = torch::randint(1, V, {B, T}, torch::kLong);
  const auto half = torch::randn({B, T, V});
  const auto got = nmt::consistency_loss(torch::cat({half, half}), tgt, 0.1, 5.0);
  EXPECT_EQ(got.loss.item<float>(), got.cross_entropy.item<float>());
  const double one = nmt::sequence_loss(half, tgt, 0.1).item<double>();
  // Both sum B T rows of at most V + 3 rounded terms; the doubled one twice as many rows.
  const double bound = 2 * gamma(2 * B * T + V + 3, 0x1p-24) * (one + 2 * B * T * (half.abs().max().item<double>() + std::log(V)));
  EXPECT_TRUE(within(got.cross_entropy.item<double>(), one, bound));
  EXPECT_THROW(nmt::consistency_loss(half, tgt, 0.1, 5.0), c10::Error);  // [B, T, V] is not [2B, T, V]
}

// Word-level distillation's loss against one written from LibTorch's own
// functions, (1 - w) cross_entropy + w sum_real -(q log_softmax(x)), on rows
// with padding targets, in double; at w 0 it is sequence_loss()'s.
TEST(LossTest, DistillationLossAndItsGradientEqualLibTorchs) {
  namespace F = torch::nn::functional;
  torch::manual_seed(6);
  const int64_t B = 3, T = 5, V = 11;
  const double eps = 0.1;
  const auto tgt = padded_targets(B, T, V);
  const auto real = tgt.reshape({-1}).ne(nmt::kPadId);                             // [B T]
  const auto teacher_logp = torch::log_softmax(torch::randn({B, T, V}, torch::kDouble) * 2, 2);  // [B, T, V]
  for (double w : {0.0, 0.5, 1.0}) {
    auto x = (torch::randn({B, T, V}, torch::kDouble) * 3).requires_grad_();
    auto got = nmt::distillation_loss(x, tgt, eps, teacher_logp, w);
    got.loss.backward(torch::full({}, 0.7, torch::kDouble));
    auto y = x.detach().clone().requires_grad_();
    const auto ce = F::cross_entropy(y.reshape({-1, V}), tgt.reshape({-1}),
                                     F::CrossEntropyFuncOptions().ignore_index(nmt::kPadId).label_smoothing(eps).reduction(
                                         torch::kSum));
    const auto kd = -(teacher_logp.exp() * torch::log_softmax(y, 2)).reshape({-1, V}).index({real}).sum();
    const auto want = ce * (1 - w) + kd * w;
    want.backward(torch::full({}, 0.7, torch::kDouble));
    // Each side sums at most 2 B T V terms its own way, each a weight of at
    // most 1 times a log-softmax within gamma_{V+3} (|log-sum-exp| + 2 max
    // |x|) of exact; every gradient element is p - t, p and t each within
    // gamma_{V+3} of exact times that magnitude, scaled by 0.7.
    const double u = 0x1p-53;
    const auto xd = x.detach();
    const double magnitude = (xd.logsumexp(2).abs().max() + 2 * xd.abs().max()).item<double>();
    const double per_term = gamma(V + 3, u) * magnitude;
    const double loss_bound = 2 * (gamma(2 * B * T * V, u) + 2 * B * T * V * per_term) * (1 + want.abs().item<double>());
    EXPECT_TRUE(within(got.loss.item<double>(), want.item<double>(), loss_bound)) << "w " << w;
    EXPECT_TRUE(within(got.cross_entropy.item<double>(), ce.item<double>(), loss_bound)) << "w " << w;
    EXPECT_FALSE(got.cross_entropy.requires_grad());
    EXPECT_TRUE(within(x.grad(), y.grad(), 2 * 0.7 * 2 * per_term)) << "w " << w;
    EXPECT_EQ(x.grad()[0][4].abs().sum().item<double>(), 0.0);  // a padding row gets no gradient
    if (w == 0) {
      EXPECT_TRUE(within(got.loss.item<double>(), nmt::sequence_loss(xd, tgt, eps).item<double>(), loss_bound));
    } else {
      EXPECT_GT(std::abs(kd.item<double>() - ce.item<double>()) * w, 100 * loss_bound);  // the teachers' term counts
    }
  }
  EXPECT_THROW(nmt::distillation_loss(torch::zeros({B, T, V}), tgt, eps, torch::zeros({B, T, V + 1}), 0.5), c10::Error);
}

}  // namespace
