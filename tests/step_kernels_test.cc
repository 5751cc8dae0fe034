// The hand-written CPU kernels of a search step against the LibTorch
// operations they replace: the rational tanh, the fused additive attention
// and the per-row maximum with its column.
#include "model/step_kernels.h"
#include "search/row_max.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <limits>

#include "test_util.h"

namespace {

using nmt::test::gamma;
using nmt::test::within;

constexpr double kU = 0x1p-24;  // float's unit roundoff

// The rational tanh's largest error over every float (measured below): 7
// units in the last place of values near 1 (2^-24 each), a little over.
constexpr double kRationalTanhError = 4.5e-7;

TEST(StepKernelsTest, RationalTanhIsTanhToFloatRounding) {
  auto x = torch::linspace(-12, 12, 240001, torch::kFloat);  // steps of 1e-4, both sides of the clamp
  const auto extremes = torch::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, 100.0f, -100.0f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity()});
  x = torch::cat({x, extremes});
  const auto got = nmt::rational_tanh(x);
  const auto want = torch::tanh(x.to(torch::kDouble));
  // Over every float, the largest error is 2.92e-7 where the polynomials are
  // evaluated with FMA (the AVX2 and AVX-512 clones) and 4.10e-7 without it
  // (the baseline clone a CPU without AVX2 runs): about 5 and 7 units in the
  // last place of values near 1.
  EXPECT_LT((got.to(torch::kDouble) - want).abs().max().item<double>(), kRationalTanhError);
  // Relative error near zero, where tanh(x) ~ x, and odd symmetry.
  const auto small = torch::linspace(-1e-3, 1e-3, 2001, torch::kFloat);
  const auto rel = ((nmt::rational_tanh(small).to(torch::kDouble) - torch::tanh(small.to(torch::kDouble))).abs() /
                    small.to(torch::kDouble).abs().clamp_min(1e-30));
  EXPECT_LT(rel.max().item<double>(), 16 * kU);  // about 8 units in the last place
  EXPECT_TRUE(torch::equal(nmt::rational_tanh(-x), -got));
  EXPECT_EQ(got[-2].item<float>(), 1.0f);
  EXPECT_EQ(got[-1].item<float>(), -1.0f);
}

// The composed operations the fused step replaces.
std::pair<torch::Tensor, torch::Tensor> composed(const torch::Tensor& q, const torch::Tensor& keys,
                                                 const torch::Tensor& v, const torch::Tensor& mask_bias,
                                                 const torch::Tensor& values) {
  auto scores = torch::matmul(torch::tanh(keys + q.unsqueeze(1)), v.reshape({-1, 1})).squeeze(2);  // [B, S]
  auto alpha = torch::softmax(scores + mask_bias, 1);
  return {alpha, torch::bmm(alpha.unsqueeze(1), values).squeeze(1)};
}

// Elementwise bounds on how far the fused step's results may lie from the
// composed operations' (alpha: the composed weights [B, S]), from how each
// computes them:
// - energies tanh(k + q): the rational tanh within kRationalTanhError of
//   tanh, LibTorch's within an ulp (2u |e|); both add k + q alike;
// - scores sum_a v_a e_a: two orders of A products, 2 gamma_A sum |v e|, and
//   sum |v| times the energies' bound;
// - weights: scores that move by at most d move each softmax weight by a
//   factor within exp(+-2d); each side rounds exp(s - max) within
//   (|s - max| + 2) u and the sum of S and the division within gamma_{S+2};
// - output sum_j alpha_j values_j: |d alpha| |values|, and two orders of S
//   products, 2 gamma_S alpha |values|.
struct StepBounds {
  torch::Tensor energies, scores, alpha, out;
};
StepBounds step_bounds(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& v,
                       const torch::Tensor& mask_bias, const torch::Tensor& values, const torch::Tensor& alpha) {
  const auto d = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  const int64_t S = keys.size(1), A = keys.size(2);
  StepBounds b;
  const auto e = torch::tanh(d(keys) + d(q).unsqueeze(1)).abs();  // [B, S, A]
  const auto va = d(v).abs().reshape({A});
  b.energies = kRationalTanhError + 2 * kU * e;
  b.scores = 2 * gamma(A, kU) * (e * va).sum(2) + (b.energies * va).sum(2);  // [B, S]
  const auto real = mask_bias.isinf().logical_not();
  const auto moved = b.scores.masked_fill(real.logical_not(), 0).amax(1, true);  // [B, 1]
  const auto scores = d(torch::matmul(torch::tanh(keys + q.unsqueeze(1)), v.reshape({-1, 1})).squeeze(2));
  const auto top = scores.masked_fill(real.logical_not(), -INFINITY).amax(1, true);
  const auto spread = (top - scores).masked_fill(real.logical_not(), 0);
  b.alpha = d(alpha) * (torch::expm1(2 * moved) + 2 * ((spread + 2) * kU + gamma(S + 2, kU)));
  b.out = torch::bmm(b.alpha.unsqueeze(1), d(values).abs()).squeeze(1) +
          2 * gamma(S, kU) * torch::bmm(d(alpha).unsqueeze(1), d(values).abs()).squeeze(1);
  return b;
}

TEST(StepKernelsTest, FusedAttentionEqualsComposedOperations) {
  torch::manual_seed(3);
  // Attention sizes around the 16-float lanes, one source position, padding.
  for (auto [B, S, A, W] : {std::array<int64_t, 4>{5, 7, 48, 80}, {3, 1, 16, 16}, {4, 9, 37, 19}, {1, 3, 5, 3}}) {
    const auto q_wide = torch::randn({B, A + 11});
    const auto q = q_wide.narrow(1, 3, A);  // strided rows, as a narrow of a wider product
    const auto keys = torch::randn({B, S, A}) * 2;
    const auto v = torch::randn({1, A});
    const auto values = torch::randn({B, S, W});
    auto mask_bias = torch::zeros({B, S});
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = std::max<int64_t>(1, S - b);  // row b: the last b positions are padding
      if (len < S) mask_bias[b].narrow(0, len, S - len).fill_(-std::numeric_limits<float>::infinity());
    }
    torch::NoGradGuard ng;
    ASSERT_TRUE(nmt::additive_attention_step_applies(q, keys, v, mask_bias, values));
    const auto [alpha, out] = nmt::additive_attention_step(q, keys, v, mask_bias, values);
    const auto [want_alpha, want_out] = composed(q, keys, v, mask_bias, values);
    const auto bound = step_bounds(q, keys, v, mask_bias, values, want_alpha);
    EXPECT_TRUE(within(alpha, want_alpha, bound.alpha)) << "B" << B << " S" << S << " A" << A;
    EXPECT_TRUE(within(out, want_out, bound.out)) << "B" << B << " S" << S << " A" << A;
    EXPECT_TRUE(torch::equal(alpha.masked_select(mask_bias.isinf()), torch::zeros({mask_bias.isinf().sum().item<int64_t>()})));
    // The kernel's sum of S exponentials and its S quotients, then LibTorch's sum of the S weights.
    EXPECT_TRUE(within(alpha.sum(1), torch::ones({B}), 2 * gamma(S + 1, kU)));
  }
}

TEST(StepKernelsTest, FusedAttentionTakesOnlyWhatItCanServe) {
  const auto q = torch::randn({2, 8}), keys = torch::randn({2, 3, 8}), values = torch::randn({2, 3, 5});
  const auto v = torch::randn({1, 8}), mb = torch::zeros({2, 3});
  const auto applies = nmt::additive_attention_step_applies;
  EXPECT_TRUE(applies(q, keys, v, mb, values));
  EXPECT_FALSE(applies(q.to(torch::kDouble), keys, v, mb, values));
  EXPECT_FALSE(applies(q, keys.narrow(2, 0, 7), v, mb, values));  // sizes disagree
  EXPECT_FALSE(applies(q, keys, v, mb, values.narrow(1, 0, 2)));
  EXPECT_FALSE(applies(q, keys, v.narrow(1, 0, 7), mb, values));
  EXPECT_FALSE(applies(q, keys, v, mb.narrow(1, 0, 2), values));
  // Autograd recording any input: the kernel has no backward, so it declines.
  for (int i = 0; i < 5; ++i) {
    std::array<torch::Tensor, 5> in{q.clone(), keys.clone(), v.clone(), mb.clone(), values.clone()};
    in[i].requires_grad_(true);
    EXPECT_FALSE(applies(in[0], in[1], in[2], in[3], in[4])) << "input " << i;
    torch::NoGradGuard ng;
    EXPECT_TRUE(applies(in[0], in[1], in[2], in[3], in[4])) << "input " << i;
  }
  EXPECT_THROW(nmt::additive_attention_step(q, keys, torch::randn({7}), mb, values), std::exception);
}

// The recurrence's variant keeps the energies tanh(k + q), and their backward
// gives what LibTorch's autograd gives through tanh and the score product.
TEST(StepKernelsTest, EnergiesAndTheirBackwardEqualLibTorch) {
  torch::manual_seed(8);
  const int64_t B = 3, S = 5, A = 21, W = 9;
  const auto q = torch::randn({B, A + 4}).narrow(1, 2, A), keys = torch::randn({B, S, A});
  const auto v = torch::randn({A}), values = torch::randn({B, S, W});
  auto mask_bias = torch::zeros({B, S});
  mask_bias[2].narrow(0, 3, 2).fill_(-std::numeric_limits<float>::infinity());
  auto alpha = torch::empty({B, S}), out = torch::empty({B, W}), energies = torch::empty({B, S, A});
  nmt::additive_attention_step_out(q, keys, v, mask_bias, values, alpha, out, &energies);
  const auto want_energies = torch::tanh(keys + q.unsqueeze(1));
  const auto [want_alpha, want_out] = composed(q, keys, v, mask_bias, values);
  const auto bound = step_bounds(q, keys, v, mask_bias, values, want_alpha);
  EXPECT_TRUE(within(energies, want_energies, bound.energies));
  EXPECT_TRUE(within(alpha, want_alpha, bound.alpha));
  EXPECT_TRUE(within(out, want_out, bound.out));
  // Backward: scores = e v with e = tanh(k + q); d_sc as it comes (0 on padding).
  auto d_sc = torch::randn({B, S}).masked_fill(mask_bias.isinf(), 0);
  auto k_leaf = keys.clone().requires_grad_(true), q_leaf = q.clone().requires_grad_(true);
  (torch::matmul(torch::tanh(k_leaf + q_leaf.unsqueeze(1)), v) * d_sc).sum().backward();
  auto d_keys = torch::full({B, S, A}, 0.5f);  // added into
  auto d_q_wide = torch::full({B, A + 3}, 7.0f);
  auto d_q = d_q_wide.narrow(1, 1, A);  // written, rows strided
  ASSERT_TRUE(nmt::additive_energy_backward_applies(energies, d_keys, d_q));
  nmt::additive_energy_backward(d_sc, energies, v, d_keys, d_q);
  // x = d_sc v (1 - e^2) on each side, from energies that differ by up to
  // bound.energies (de): |d_sc v| de (2|e| + de), and each side's four
  // roundings, 5u |d_sc v|; d_keys also rounds adding x to 0.5 and the test
  // subtracting it; d_q sums S of them in two orders, 2 gamma_S sum |x|.
  const auto dd = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  const auto gv = (dd(d_sc).unsqueeze(2) * dd(v)).abs();  // [B, S, A]
  const auto e = dd(want_energies).abs();
  const auto x = dd(k_leaf.grad()).abs();
  const auto dx = gv * (bound.energies * (2 * e + bound.energies) + 5 * kU);
  EXPECT_TRUE(within(d_keys - 0.5f, k_leaf.grad(), dx + kU * (0.5 + 2 * x)));
  EXPECT_TRUE(within(d_q, q_leaf.grad(), dx.sum(1) + 2 * gamma(S, kU) * x.sum(1)));
  EXPECT_TRUE(torch::equal(d_q_wide.narrow(1, 0, 1), torch::full({B, 1}, 7.0f)));  // outside the view untouched
}

TEST(StepKernelsTest, MaxPerRowEqualsMaxWithIndices) {
  torch::manual_seed(5);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 5, 16, 17, 31, 48, 1000}) {
    auto x = torch::randn({6, n});
    if (n > 3) {
      x[1].fill_(0.5f);                      // all tied: the first column
      x[2][n - 1] = 9.0f, x[2][n / 2] = 9.0f;  // two tied maxima: the first
      x[3].fill_(-inf);                      // nothing but -inf: column 0
      x[4][n - 2] = inf;
    }
    const auto [values, columns] = nmt::max_per_row(x);
    const auto [want_values, want_columns] = x.max(1);
    EXPECT_TRUE(torch::equal(values, want_values)) << "n " << n;
    EXPECT_TRUE(torch::equal(columns, want_columns)) << "n " << n;
  }
  // A NaN wins its row, the first of several, wherever it stands (in a full
  // block before the maximum, in the tail, in a row of whole blocks), as in LibTorch.
  for (int64_t n : {2, 3, 40, 48, 64}) {
    auto x = torch::randn({5, n});
    x[0][n - 1] = nan;                  // the last column (in the tail where there is one)
    x[1][1] = nan, x[1][n / 2] = nan;  // two: the first wins
    if (n > 20) x[2][20] = 50.0f, x[2][5] = nan;  // a NaN in the first block, the maximum after it
    x[3].fill_(-inf);
    const auto [values, columns] = nmt::max_per_row(x);
    const auto [want_values, want_columns] = x.max(1);
    EXPECT_TRUE(torch::equal(columns, want_columns)) << "n " << n << ": " << columns << " against " << want_columns;
    EXPECT_TRUE(std::isnan(values[0].item<float>()) && std::isnan(values[1].item<float>())) << "n " << n;
    EXPECT_EQ(values[3].item<float>(), -inf);
  }
  // Not contiguous, and another dtype (through LibTorch).
  const auto wide = torch::randn({4, 50});
  EXPECT_TRUE(torch::equal(nmt::max_per_row(wide.narrow(1, 7, 30)).second, std::get<1>(wide.narrow(1, 7, 30).max(1))));
  const auto d = torch::randn({3, 20}, torch::kDouble);
  EXPECT_TRUE(torch::equal(nmt::max_per_row(d).second, std::get<1>(d.max(1))));
}

}  // namespace
