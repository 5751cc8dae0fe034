// Gradient clipping without a device read (train/gradients.h): the same
// gradients and norm as LibTorch's clip_grad_norm_, read now or deferred.
#include "train/gradients.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "test_util.h"

namespace {

using nmt::test::gamma;
using nmt::test::within;

// Three parameters with gradients of norm near `size` together, and one without.
std::vector<torch::Tensor> params_with_grads(double size) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> ps;
  for (auto shape : {std::vector<int64_t>{4, 5}, {7}, {2, 3, 2}, {3}}) ps.push_back(torch::randn(shape).requires_grad_());
  for (int i = 0; i < 3; ++i) ps[i].mutable_grad() = torch::randn(ps[i].sizes()) * (size / std::sqrt(39.0));
  return ps;
}

TEST(GradientsTest, ClipEqualsLibTorchReadNowOrDeferred) {
  // A norm of n = 39 elements, as a sum of their squares or a norm of
  // per-tensor norms, is within gamma_{n+4} of the exact one, whatever the
  // order; the clipped gradients, scaled by max_norm / norm, within two
  // roundings more.
  const double u = 0x1p-24, norm_bound = 2 * gamma(39 + 4, u), grad_bound = 2 * gamma(39 + 6, u);
  for (double size : {0.3, 5.0}) {      // under and over the limit
    for (double max_norm : {1.0, std::numeric_limits<double>::infinity()}) {
      auto ref = params_with_grads(size);
      const double ref_norm = torch::nn::utils::clip_grad_norm_(ref, max_norm);
      for (auto read : {nmt::ClipRead::kNow, nmt::ClipRead::kDeferred, nmt::ClipRead::kAuto}) {
        SCOPED_TRACE(testing::Message() << "size " << size << ", max " << max_norm << ", read " << static_cast<int>(read));
        auto ps = params_with_grads(size);
        const auto norm = nmt::clip_gradients(ps, max_norm, read);
        EXPECT_EQ(norm.dim(), 0);
        EXPECT_TRUE(within(norm.item<double>(), ref_norm, norm_bound * ref_norm));
        for (size_t i = 0; i < 3; ++i)
          EXPECT_TRUE(within(ps[i].grad(), ref[i].grad(), grad_bound * ref[i].grad().abs())) << i;
        EXPECT_FALSE(ps[3].grad().defined());
        double after = 0;
        for (size_t i = 0; i < 3; ++i) after += ps[i].grad().pow(2).sum().item<double>();
        EXPECT_LE(std::sqrt(after), std::min(max_norm, ref_norm) * (1 + grad_bound));
      }
    }
  }
}

TEST(GradientsTest, NonFiniteGradientsGiveANonFiniteNorm) {
  for (auto read : {nmt::ClipRead::kNow, nmt::ClipRead::kDeferred}) {
    auto ps = params_with_grads(5.0);
    ps[1].mutable_grad()[2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(std::isfinite(nmt::clip_gradients(ps, 1.0, read).item<double>()));
    ps = params_with_grads(5.0);
    ps[0].mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(std::isfinite(nmt::clip_gradients(ps, 1.0, read).item<double>()));
  }
  std::vector<torch::Tensor> none = {torch::zeros({3}).requires_grad_()};
  EXPECT_EQ(nmt::clip_gradients(none, 1.0).item<double>(), 0.0);
  EXPECT_THROW(nmt::clip_gradients(none, 0.0), c10::Error);
}

}  // namespace
