// PackedLinear: the packed-weight product equals LibTorch's addmm to float
// rounding (test_util.h: dot_error_bound) for every shape of rows, inputs and outputs (full and partial
// register blocks and panels), strided rows, on one thread and on two; bad
// inputs throw. Skipped on a CPU without AVX-512F, where nothing uses it.
#include "model/packed_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "base/error.h"
#include "model/device.h"
#include "test_util.h"

namespace {

class PackedLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nmt::PackedLinear::available()) GTEST_SKIP() << "no AVX-512F on this CPU: PackedLinear is not used here";
  }
  void TearDown() override { nmt::set_threads(1); }
};

TEST_F(PackedLinearTest, EqualsAddmmForEveryBlockShape) {
  torch::manual_seed(3);
  for (int64_t K : {1, 3, 17, 256})
    for (int64_t N : {1, 15, 16, 17, 63, 64, 65, 200})
      for (int64_t R : {1, 5, 6, 7, 13, 64}) {
        const auto wt = torch::randn({K, N}), b = torch::randn({N}), x = torch::randn({R, K});
        const nmt::PackedLinear p(wt, b);
        EXPECT_EQ(p.in_features(), K);
        EXPECT_EQ(p.out_features(), N);
        const auto y = p(x), want = torch::addmm(b, x, wt);
        ASSERT_EQ(y.sizes(), want.sizes());
        // Each sums the K products and the bias in its own order (and vector width).
        EXPECT_TRUE(nmt::test::within(y, want, nmt::test::dot_error_bound(x, wt, b)))
            << "R " << R << " K " << K << " N " << N;
      }
}

TEST_F(PackedLinearTest, StridedRowsAndThreadsGiveTheSameResult) {
  torch::manual_seed(4);
  const auto wt = torch::randn({96, 1000}), b = torch::randn({1000});
  const auto wide = torch::randn({40, 150});
  const auto x = wide.narrow(1, 20, 96);  // rows 150 apart
  ASSERT_FALSE(x.is_contiguous());
  const nmt::PackedLinear p(wt, b);
  nmt::set_threads(1);
  const auto one = p(x);
  nmt::set_threads(2);
  const auto two = p(x);
  EXPECT_TRUE(torch::equal(one, two)) << "each column block is one thread's: the threads cannot change a sum";
  EXPECT_TRUE(nmt::test::within(one, torch::addmm(b, x.contiguous(), wt), nmt::test::dot_error_bound(x, wt, b)));
}

TEST_F(PackedLinearTest, BadInputsThrow) {
  const nmt::PackedLinear p(torch::randn({8, 4}), torch::randn({4}));
  EXPECT_THROW(p(torch::randn({2, 7})), nmt::Error);               // K differs
  EXPECT_THROW(p(torch::randn({8})), nmt::Error);                  // not [R, K]
  EXPECT_THROW(p(torch::randn({2, 8}, torch::kDouble)), nmt::Error);  // not float32
  EXPECT_THROW(p(torch::randn({2, 8}, torch::requires_grad())), nmt::Error);  // would lose the gradient
  EXPECT_THROW(nmt::PackedLinear(torch::randn({8, 4}), torch::randn({5})), nmt::Error);
  EXPECT_EQ(p(torch::randn({0, 8})).sizes(), (std::vector<int64_t>{0, 4}));
}

}  // namespace
