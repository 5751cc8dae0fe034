// The hand-written CPU kernels of a search step against the LibTorch
// operations they replace: the rational tanh, the fused additive attention
// and the per-row maximum with its column.
#include "model/step_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <limits>

namespace {

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
  EXPECT_LT((got.to(torch::kDouble) - want).abs().max().item<double>(), 4.5e-7);
  // Relative error near zero, where tanh(x) ~ x, and odd symmetry.
  const auto small = torch::linspace(-1e-3, 1e-3, 2001, torch::kFloat);
  const auto rel = ((nmt::rational_tanh(small).to(torch::kDouble) - torch::tanh(small.to(torch::kDouble))).abs() /
                    small.to(torch::kDouble).abs().clamp_min(1e-30));
  EXPECT_LT(rel.max().item<double>(), 1e-6);
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
    EXPECT_TRUE(torch::allclose(alpha, want_alpha, 1e-5, 1e-6)) << "B" << B << " S" << S << " A" << A;
    EXPECT_TRUE(torch::allclose(out, want_out, 1e-5, 1e-5)) << "B" << B << " S" << S << " A" << A;
    EXPECT_TRUE(torch::equal(alpha.masked_select(mask_bias.isinf()), torch::zeros({mask_bias.isinf().sum().item<int64_t>()})));
    EXPECT_TRUE(torch::allclose(alpha.sum(1), torch::ones({B}), 1e-6, 1e-6));
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
  EXPECT_TRUE(torch::allclose(energies, torch::tanh(keys + q.unsqueeze(1)), 1e-6, 1e-6));
  const auto [want_alpha, want_out] = composed(q, keys, v, mask_bias, values);
  EXPECT_TRUE(torch::allclose(alpha, want_alpha, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(out, want_out, 1e-5, 1e-5));
  // Backward: scores = e v with e = tanh(k + q); d_sc as it comes (0 on padding).
  auto d_sc = torch::randn({B, S}).masked_fill(mask_bias.isinf(), 0);
  auto k_leaf = keys.clone().requires_grad_(true), q_leaf = q.clone().requires_grad_(true);
  (torch::matmul(torch::tanh(k_leaf + q_leaf.unsqueeze(1)), v) * d_sc).sum().backward();
  auto d_keys = torch::full({B, S, A}, 0.5f);  // added into
  auto d_q_wide = torch::full({B, A + 3}, 7.0f);
  auto d_q = d_q_wide.narrow(1, 1, A);  // written, rows strided
  ASSERT_TRUE(nmt::additive_energy_backward_applies(energies, d_keys, d_q));
  nmt::additive_energy_backward(d_sc, energies, v, d_keys, d_q);
  EXPECT_TRUE(torch::allclose(d_keys - 0.5f, k_leaf.grad(), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(d_q, q_leaf.grad(), 1e-5, 1e-6));
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
