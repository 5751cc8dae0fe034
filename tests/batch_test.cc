// Batching: plan_batches (token budget, bucketing, determinism),
// epoch_order and make_batch.
#include "model/batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "base/error.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

using nmt::Example;

// Random examples: src ends with EOS (as the trainer builds them), lengths vary.
std::vector<Example> random_examples(int n, uint64_t seed, int max_len = 30) {
  std::mt19937_64 rng(seed);
  std::vector<Example> ex(n);
  for (auto& e : ex) {
    int ls = 1 + static_cast<int>(rng() % max_len);
    int lt = 1 + static_cast<int>(rng() % max_len);
    for (int k = 0; k < ls; ++k) e.src.push_back(4 + static_cast<int64_t>(rng() % 50));
    e.src.push_back(nmt::kEosId);
    for (int k = 0; k < lt; ++k) e.tgt.push_back(4 + static_cast<int64_t>(rng() % 50));
  }
  return ex;
}

int64_t padded_len(const Example& e) {
  return std::max<int64_t>(e.src.size(), e.tgt.size() + 1);
}

TEST(BatchPlanTest, EveryExampleExactlyOnceWithinBudget) {
  const auto ex = random_examples(500, 1);
  nmt::BatchPlanOptions opt;
  opt.max_tokens = 200;
  opt.max_sentences = 1000;
  const auto plan = nmt::plan_batches(ex, opt, 7);
  std::vector<int> seen(ex.size(), 0);
  for (const auto& b : plan) {
    ASSERT_FALSE(b.empty());
    int64_t max_len = 0;
    for (int64_t i : b) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, static_cast<int64_t>(ex.size()));
      ++seen[i];
      max_len = std::max(max_len, padded_len(ex[i]));
    }
    if (b.size() > 1) { EXPECT_LE(static_cast<int64_t>(b.size()) * max_len, opt.max_tokens); }
  }
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(seen[i], 1) << "example " << i;
  // The budget is used: batches are not needlessly small (mean fill above half).
  EXPECT_LT(plan.size(), ex.size() / 4);
}

TEST(BatchPlanTest, OverBudgetExampleGetsItsOwnBatch) {
  auto ex = random_examples(50, 2, 10);
  Example big;
  big.src.assign(100, 5);
  big.tgt.assign(20, 6);
  ex.push_back(big);
  nmt::BatchPlanOptions opt;
  opt.max_tokens = 60;
  const auto plan = nmt::plan_batches(ex, opt, 1);
  int found = 0;
  for (const auto& b : plan)
    if (std::find(b.begin(), b.end(), static_cast<int64_t>(ex.size() - 1)) != b.end()) {
      ++found;
      EXPECT_EQ(b.size(), 1u);
    }
  EXPECT_EQ(found, 1);
}

TEST(BatchPlanTest, MaxSentencesCap) {
  const auto ex = random_examples(300, 3, 3);
  nmt::BatchPlanOptions opt;
  opt.max_tokens = 100000;
  opt.max_sentences = 16;
  const auto plan = nmt::plan_batches(ex, opt, 1);
  size_t total = 0;
  for (const auto& b : plan) {
    EXPECT_LE(b.size(), 16u);
    total += b.size();
  }
  EXPECT_EQ(total, ex.size());
  EXPECT_EQ(plan.size(), (ex.size() + 15) / 16);  // the budget never binds: only full batches and one rest
}

TEST(BatchPlanTest, DeterministicPerSeed) {
  const auto ex = random_examples(400, 4, 8);  // many equal lengths: ties are shuffled by the seed
  nmt::BatchPlanOptions opt;
  opt.max_tokens = 120;
  const auto a = nmt::plan_batches(ex, opt, 42);
  const auto b = nmt::plan_batches(ex, opt, 42);
  const auto c = nmt::plan_batches(ex, opt, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(BatchPlanTest, LengthsWithinBatchAreClose) {
  const auto ex = random_examples(1000, 5, 40);
  nmt::BatchPlanOptions opt;
  opt.max_tokens = 400;
  const auto plan = nmt::plan_batches(ex, opt, 9);
  int64_t lo = INT64_MAX, hi = 0;
  for (const auto& e : ex) {
    lo = std::min<int64_t>(lo, e.src.size());
    hi = std::max<int64_t>(hi, e.src.size());
  }
  const int64_t range = hi - lo;
  ASSERT_GE(range, 30);
  int64_t worst = 0;
  for (const auto& b : plan) {
    int64_t bl = INT64_MAX, bh = 0;
    for (int64_t i : b) {
      bl = std::min<int64_t>(bl, ex[i].src.size());
      bh = std::max<int64_t>(bh, ex[i].src.size());
    }
    worst = std::max(worst, bh - bl);
  }
  // Sorted bucketing: 1000 examples over ~40 lengths, ~10-40 per batch, so a
  // batch spans at most a couple of source lengths.
  EXPECT_LE(worst, range / 10) << "corpus range " << range;
}

TEST(EpochOrderTest, PermutationDeterministicAndVarying) {
  const int64_t n = 100;
  const auto a = nmt::epoch_order(n, 5, 1);
  ASSERT_EQ(a.size(), static_cast<size_t>(n));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(n);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota);  // actually shuffled
  EXPECT_EQ(nmt::epoch_order(n, 5, 1), a);
  EXPECT_NE(nmt::epoch_order(n, 5, 2), a);
  EXPECT_NE(nmt::epoch_order(n, 6, 1), a);
  // Seeds that differ only in the high 32 bits give different orders too.
  EXPECT_NE(nmt::epoch_order(n, 5 + (uint64_t{1} << 32), 1), a);
  EXPECT_TRUE(nmt::epoch_order(0, 1, 1).empty());
  EXPECT_EQ(nmt::epoch_order(1, 1, 3), std::vector<int64_t>{0});
}

TEST(MakeBatchTest, ShapesPaddingAndShift) {
  std::vector<Example> ex(3);
  ex[0].src = {10, 11, 12, nmt::kEosId};
  ex[0].tgt = {20, 21};
  ex[1].src = {13, nmt::kEosId};
  ex[1].tgt = {22, 23, 24, 25, 26};
  ex[2].src = {14, 15, nmt::kEosId};
  ex[2].tgt = {27};
  const std::vector<int64_t> idx = {2, 0, 1};
  const auto b = nmt::make_batch(ex, idx);
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.src.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b.tgt_in.sizes(), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(b.tgt_out.sizes(), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(b.src.scalar_type(), torch::kInt64);
  EXPECT_EQ(b.tgt_in.scalar_type(), torch::kInt64);
  EXPECT_TRUE(b.src_len.device().is_cpu());
  EXPECT_TRUE(torch::equal(b.src_len, torch::tensor({3, 4, 2}, torch::kInt64)));
  EXPECT_EQ(b.src_tokens, 9);
  EXPECT_EQ(b.tgt_tokens, (1 + 1) + (2 + 1) + (5 + 1));

  for (int64_t r = 0; r < 3; ++r) {
    const auto& e = ex[idx[r]];
    const int64_t S = e.src.size(), T = e.tgt.size();
    for (int64_t k = 0; k < 4; ++k)
      EXPECT_EQ(b.src[r][k].item<int64_t>(), k < S ? e.src[k] : nmt::kPadId) << r << "," << k;
    EXPECT_EQ(b.tgt_in[r][0].item<int64_t>(), nmt::kBosId);
    for (int64_t k = 0; k < 6; ++k) {
      const int64_t want_out = k < T ? e.tgt[k] : (k == T ? nmt::kEosId : nmt::kPadId);
      EXPECT_EQ(b.tgt_out[r][k].item<int64_t>(), want_out) << r << "," << k;
      if (k + 1 < 6 && k < T) {  // tgt_in is tgt_out shifted right by one, behind BOS
        EXPECT_EQ(b.tgt_in[r][k + 1].item<int64_t>(), b.tgt_out[r][k].item<int64_t>()) << r << "," << k;
      }
      if (k > T) { EXPECT_EQ(b.tgt_in[r][k].item<int64_t>(), nmt::kPadId) << r << "," << k; }
    }
  }
  // Non-pad positions of tgt_out count tgt_tokens.
  EXPECT_EQ(b.tgt_out.ne(nmt::kPadId).sum().item<int64_t>(), b.tgt_tokens);
  EXPECT_EQ(b.src.ne(nmt::kPadId).sum().item<int64_t>(), b.src_tokens);
}

TEST(MakeBatchTest, WithoutTarget) {
  std::vector<Example> ex(2);
  ex[0].src = {5, 6, nmt::kEosId};
  ex[1].src = {7, nmt::kEosId};
  const auto b = nmt::make_batch(ex, {1, 0}, /*with_target=*/false);
  EXPECT_EQ(b.src.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(b.tgt_in.defined());
  EXPECT_FALSE(b.tgt_out.defined());
  EXPECT_TRUE(torch::equal(b.src[0], torch::tensor(std::vector<int64_t>{7, nmt::kEosId, nmt::kPadId})));
  EXPECT_EQ(b.src_tokens, 5);
  const auto moved = b.to(torch::kCPU);
  EXPECT_TRUE(torch::equal(moved.src, b.src));
  EXPECT_FALSE(moved.tgt_in.defined());
}

TEST(MakeBatchTest, GuideRowsSpreadOneOverLinkedSourcePieces) {
  std::vector<Example> ex(2);
  ex[0].src = {5, 6, 7, nmt::kEosId};
  ex[0].tgt = {8, 9};
  ex[0].guide = {{0, 0}, {2, 0}, {1, 1}};  // target piece 0 to source 0 and 2; piece 1 to source 1
  ex[1].src = {5, nmt::kEosId};
  ex[1].tgt = {8, 9, 10};                  // no links: all-zero rows
  const auto b = nmt::make_batch(ex, {0, 1});
  ASSERT_TRUE(b.guide.defined());
  EXPECT_EQ(b.guide.sizes(), (std::vector<int64_t>{2, 4, 4}));  // [B, T = 3 + EOS, S]
  auto g = b.guide.accessor<float, 3>();
  EXPECT_FLOAT_EQ(g[0][0][0], 0.5f);
  EXPECT_FLOAT_EQ(g[0][0][2], 0.5f);
  EXPECT_FLOAT_EQ(g[0][1][1], 1.0f);
  EXPECT_FLOAT_EQ(b.guide[0].sum().item<float>(), 2.0f);  // two guided rows
  EXPECT_FLOAT_EQ(b.guide[1].sum().item<float>(), 0.0f);
  ex[0].guide.clear();
  EXPECT_FALSE(nmt::make_batch(ex, {0, 1}).guide.defined());
}

}  // namespace

namespace {

// cut_batches: the one rule behind training, translation and scoring batches.
TEST(CutBatchesTest, EachLimitCutsAndOneExampleAlwaysFits) {
  std::vector<Example> ex(6);
  for (size_t i = 0; i < ex.size(); ++i) {
    ex[i].src.assign(10 - i, 5);  // 10, 9, .. 5 source pieces
    ex[i].tgt.assign(3, 5);       // 4 target positions
  }
  std::vector<int64_t> order(ex.size());
  std::iota(order.begin(), order.end(), 0);
  auto sizes = [](const std::vector<std::vector<int64_t>>& batches) {
    std::vector<size_t> out;
    for (const auto& b : batches) out.push_back(b.size());
    return out;
  };
  nmt::BatchLimits sentences{4};
  EXPECT_EQ(sizes(nmt::cut_batches(ex, order, sentences)), (std::vector<size_t>{4, 2}));
  nmt::BatchLimits tokens{100, 20};  // n * 10 <= 20, then 8 * n <= 20 ...
  EXPECT_EQ(sizes(nmt::cut_batches(ex, order, tokens)), (std::vector<size_t>{2, 2, 2}));
  nmt::BatchLimits bytes{100, 0, 120, 2, 5};  // n * (S * 2 + 4 * 5) <= 120: 3 of (10 ..), then 3 of (7 ..)
  EXPECT_EQ(sizes(nmt::cut_batches(ex, order, bytes)), (std::vector<size_t>{3, 3}));
  nmt::BatchLimits tiny{100, 1};  // every example is over budget: one each
  EXPECT_EQ(sizes(nmt::cut_batches(ex, order, tiny)), (std::vector<size_t>(6, 1)));
}

}  // namespace

TEST(PadBatchTest, GrowsToTheGivenShapeWithEmptyTargetRows) {
  const auto ex = nmt::test::padded_examples();
  const auto b = nmt::make_batch(ex, {0, 1, 2});
  const int64_t B = b.size(), S = b.src.size(1), T = b.tgt_in.size(1);
  const auto p = nmt::pad_batch(b, B + 2, S + 3, T + 4);
  ASSERT_EQ(p.src.sizes(), (std::vector<int64_t>{B + 2, S + 3}));
  ASSERT_EQ(p.tgt_in.sizes(), (std::vector<int64_t>{B + 2, T + 4}));
  ASSERT_EQ(p.tgt_out.sizes(), (std::vector<int64_t>{B + 2, T + 4}));
  EXPECT_TRUE(torch::equal(p.src.narrow(0, 0, B).narrow(1, 0, S), b.src));
  EXPECT_TRUE(torch::equal(p.tgt_in.narrow(0, 0, B).narrow(1, 0, T), b.tgt_in));
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(0, 0, B).narrow(1, 0, T), b.tgt_out));
  EXPECT_TRUE(p.src.narrow(1, S, 3).eq(nmt::kPadId).all().item<bool>());
  // New rows: one source word, then padding; no target word at all.
  EXPECT_TRUE(p.src.narrow(0, B, 2).select(1, 0).eq(nmt::kEosId).all().item<bool>());
  EXPECT_TRUE(p.src.narrow(0, B, 2).narrow(1, 1, S + 2).eq(nmt::kPadId).all().item<bool>());
  EXPECT_TRUE(p.tgt_in.narrow(0, B, 2).eq(nmt::kPadId).all().item<bool>());
  EXPECT_TRUE(p.tgt_out.narrow(0, B, 2).eq(nmt::kPadId).all().item<bool>());
  EXPECT_TRUE(torch::equal(p.src_len, torch::cat({b.src_len, torch::ones({2}, torch::kInt64)})));
  EXPECT_EQ(p.tgt_tokens, b.tgt_tokens);
  EXPECT_EQ(p.src_tokens, b.src_tokens);
  EXPECT_THROW(nmt::pad_batch(b, B - 1, S, T), nmt::Error);
  EXPECT_THROW(nmt::pad_batch(b, B, S, T - 1), nmt::Error);
}

TEST(MakeBatchTest, TwiceRepeatsEveryRowAndDoublesTheCounts) {
  const auto ex = nmt::test::padded_examples();
  auto b = nmt::make_batch(ex, {0, 1, 2});
  b.guide = torch::rand({3, b.tgt_in.size(1), b.src.size(1)});
  const auto t = nmt::twice(b);
  for (const auto& [mine, theirs] : {std::pair{t.src, b.src}, {t.src_len, b.src_len}, {t.tgt_in, b.tgt_in},
                                     {t.tgt_out, b.tgt_out}, {t.guide, b.guide}}) {
    ASSERT_EQ(mine.size(0), 6);
    EXPECT_TRUE(torch::equal(mine.narrow(0, 0, 3), theirs));
    EXPECT_TRUE(torch::equal(mine.narrow(0, 3, 3), theirs));
  }
  EXPECT_EQ(t.tgt_tokens, 2 * b.tgt_tokens);
  EXPECT_EQ(t.src_tokens, 2 * b.src_tokens);
  EXPECT_FALSE(nmt::twice(nmt::make_batch(ex, {0}, /*with_target=*/false)).tgt_in.defined());
}
