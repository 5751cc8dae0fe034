// Training a batch as parts side by side (train/batch_parts.h): the parts'
// summed gradients equal the whole batch's, dropout masks repeat with the
// seed whatever the threads, and the model's dropout without a DropoutRng
// is LibTorch's own.
#include "train/batch_parts.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/device.h"
#include "model/model.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "train/losses.h"

namespace {

// Six pairs of different lengths, so every part is padded differently.
std::vector<nmt::Example> examples() {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"red cat", "cato redo"},
      {"big dog sees small bird", "birdo smallo seeso dogo bigo"},
      {"old fish eats new tree house green blue", "blueo greeno houseo treeo newo eatso fisho oldo"},
      {"blue", "blueo"},
      {"green tree", "treeo greeno"},
      {"small fish sees big cat", "cato bigo seeso fisho smallo"},
  };
  return nmt::test::toy_examples(pairs);
}

std::vector<torch::Tensor> distinct(const nmt::Seq2Seq& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m->parameters())
    if (std::none_of(out.begin(), out.end(), [&](const torch::Tensor& q) { return q.is_same(p); })) out.push_back(p);
  return out;
}

// The gradients of one step over the six examples cut into `parts` (1: the
// whole batch, plain backward) on `workers` threads, as the trainer takes them.
std::vector<torch::Tensor> step_gradients(nmt::Seq2Seq& model, int64_t parts, uint64_t seed, int workers = 2) {
  const auto ex = examples();
  const int64_t n = static_cast<int64_t>(ex.size());
  auto params = distinct(model);
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  std::vector<nmt::Batch> batches;
  for (const auto& [b, e] : nmt::part_ranges(n, parts)) {
    std::vector<int64_t> idx;
    for (int64_t i = b; i < e; ++i) idx.push_back(i);
    batches.push_back(nmt::make_batch(ex, idx));
  }
  std::vector<torch::Tensor> losses(batches.size());
  int64_t tokens = 0;
  for (const auto& b : batches) tokens += b.tgt_tokens;
  auto loss_of = [&](int64_t p) {
    const auto& b = batches[p];
    losses[p] = nmt::sequence_loss(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
  };
  if (parts == 1) {
    loss_of(0);
    (losses[0] / static_cast<double>(tokens)).backward();
  } else {
    nmt::run_parts(parts, workers, seed, loss_of);
    nmt::backward_parts(losses, 1.0 / static_cast<double>(tokens), params, workers);
  }
  std::vector<torch::Tensor> grads;
  for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return grads;
}

nmt::Seq2Seq make_model(nmt::DecoderType decoder, double dropout) {
  auto opt = nmt::test::tiny_model();
  opt.decoder = decoder;
  opt.dropout = dropout;
  opt.tie_embeddings = true;  // one parameter reached from two places
  torch::manual_seed(7);
  nmt::Seq2Seq m(opt);
  m->train();
  return m;
}

class BatchPartsTest : public ::testing::TestWithParam<nmt::DecoderType> {
 protected:
  void SetUp() override { nmt::set_threads(2); }
  void TearDown() override { nmt::set_threads(1); }
};

TEST_P(BatchPartsTest, PartsGiveTheWholeBatchGradient) {
  auto model = make_model(GetParam(), 0.0);
  const auto whole = step_gradients(model, 1, 0);
  // The parts make products of fewer rows and sum their gradients in another
  // order: within the rounding bound of the whole batch's gradients.
  const auto batch = nmt::make_batch(examples(), {0, 1, 2, 3, 4, 5});
  const int64_t T = batch.tgt_in.size(1);
  const double bound =
      nmt::test::gradient_rounding_bound(*model, nmt::test::model_depth(batch.src.size(1), T), batch.size() * T);
  for (int64_t parts : {2, 3, 6}) {
    const auto split = step_gradients(model, parts, 0);
    ASSERT_EQ(split.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_TRUE(nmt::test::within(split[i], whole[i], bound * whole[i].abs().max().item<double>()))
          << parts << " parts, parameter " << i;
      EXPECT_GT(whole[i].abs().sum().item<double>(), 0) << "parameter " << i << " got no gradient";
    }
  }
}

TEST_P(BatchPartsTest, DropoutMasksRepeatWithTheSeedWhateverTheThreads) {
  auto model = make_model(GetParam(), 0.3);
  for (int64_t parts : {2, 6}) {  // 6: more parts than threads, handed out as threads come free
    const auto a = step_gradients(model, parts, 11, 2);
    const auto b = step_gradients(model, parts, 11, 1);  // the parts in turn on one thread
    const auto c = step_gradients(model, parts, 12, 2);
    bool seed_matters = false;
    for (size_t i = 0; i < a.size(); ++i) {
      // The same parts, each computed alone and summed in part order whatever thread takes it: the same bits.
      EXPECT_TRUE(torch::equal(a[i], b[i])) << parts << " parts, parameter " << i;
      seed_matters |= !torch::equal(a[i], c[i]);
    }
    EXPECT_TRUE(seed_matters) << "another seed gave the same gradients: dropout is not drawn per part";
  }
}

TEST(BatchPartsTest, EveryPartRunsOnceAndErrorsComeBack) {
  std::vector<std::atomic<int>> runs(7);
  nmt::run_parts(7, 2, 1, [&](int64_t p) { runs[p]++; });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  std::atomic<int> after{0};
  EXPECT_THROW(nmt::run_parts(5, 2, 1,
                              [&](int64_t p) {
                                if (p == 1) throw std::runtime_error("part 1");
                                after++;
                              }),
               std::runtime_error);
  EXPECT_EQ(after.load(), 4);  // the other parts still ran
}

INSTANTIATE_TEST_SUITE_P(Decoders, BatchPartsTest,
                         ::testing::Values(nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru),
                         [](const ::testing::TestParamInfo<nmt::DecoderType>& i) {
                           return std::string(nmt::to_string(i.param));
                         });

TEST(BatchPartsTest, CountsAndRanges) {
  // Automatic (0): one part per thread once each thread gets kMinPartSentences,
  // kPartsPerThread per thread once each of those parts would.
  const int64_t m = nmt::kMinPartSentences, k = nmt::kPartsPerThread;
  EXPECT_EQ(nmt::batch_parts(0, 2, 2 * k * m, torch::kCPU), 2 * k);
  EXPECT_EQ(nmt::batch_parts(0, 2, 2 * k * m - 1, torch::kCPU), 2);
  EXPECT_EQ(nmt::batch_parts(0, 2, 2 * m, torch::kCPU), 2);
  EXPECT_EQ(nmt::batch_parts(0, 2, 2 * m - 1, torch::kCPU), 1);
  EXPECT_EQ(nmt::batch_parts(0, 4, 4 * k * m + 5, torch::kCPU), 4 * k);
  EXPECT_EQ(nmt::batch_parts(0, 4, 4 * m + 5, torch::kCPU), 4);
  EXPECT_EQ(nmt::batch_parts(0, 4, 4 * m - 1, torch::kCPU), 1);  // all threads' parts or none
  EXPECT_EQ(nmt::batch_parts(0, 1, 10 * m, torch::kCPU), 1);
  EXPECT_EQ(nmt::batch_parts(0, 2, 10 * m, torch::Device(torch::kCUDA, 0)), 1);
  // Asked for: that many, at most one per sentence.
  EXPECT_EQ(nmt::batch_parts(2, 4, 3, torch::kCPU), 2);
  EXPECT_EQ(nmt::batch_parts(4, 2, 3, torch::kCPU), 3);
  EXPECT_EQ(nmt::batch_parts(1, 8, 64, torch::kCPU), 1);
  EXPECT_EQ(nmt::batch_parts(3, 1, 64, torch::kCPU), 3);
  EXPECT_EQ(nmt::batch_parts(2, 2, 64, torch::Device(torch::kCUDA, 0)), 1);
  EXPECT_EQ(nmt::describe_batch_parts(0, 2, torch::kCPU),
            "2 parts for batches of " + std::to_string(2 * m) + " sentences or more, " + std::to_string(2 * k) +
                " for " + std::to_string(2 * k * m) + " or more");
  EXPECT_EQ(nmt::describe_batch_parts(0, 1, torch::kCPU), "whole batches");
  EXPECT_EQ(nmt::describe_batch_parts(1, 2, torch::kCPU), "whole batches");
  EXPECT_EQ(nmt::describe_batch_parts(3, 2, torch::kCPU), "3 parts each");
  const auto r = nmt::part_ranges(7, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(r[1], std::make_pair(int64_t{2}, int64_t{4}));
  EXPECT_EQ(r[2], std::make_pair(int64_t{4}, int64_t{7}));
}

TEST(DropoutTest, WithoutADropoutRngItIsTorchDropout) {
  nmt::Dropout drop(0.3);
  drop->train();
  auto x = torch::randn({5, 7});
  torch::manual_seed(5);
  auto ours = drop(x);
  torch::manual_seed(5);
  auto theirs = torch::dropout(x, 0.3, true);
  EXPECT_TRUE(torch::equal(ours, theirs));
  drop->eval();
  EXPECT_TRUE(torch::equal(drop(x), x));
  {
    nmt::DropoutRng rng(9);
    drop->train();
    auto a = drop(x);
    nmt::DropoutRng inner(9);  // a fresh generator with the same seed: the same mask
    EXPECT_TRUE(torch::equal(drop(x), a));
  }
}

TEST(DropoutTest, WholeVectorsZeroOrScaleEachEmbeddingWhole) {
  // Word dropout: each [.., E] vector is zeroed whole (probability p) or scaled
  // whole by 1 / (1 - p), with this thread's DropoutRng and without one.
  nmt::Dropout drop(0.25, /*whole_vectors=*/true);
  drop->train();
  const auto x = torch::ones({8, 50, 6});  // 400 vectors
  for (const bool own_generator : {true, false}) {
    SCOPED_TRACE(own_generator ? "DropoutRng" : "default generator");
    std::optional<nmt::DropoutRng> rng;
    if (own_generator) rng.emplace(3);
    torch::manual_seed(3);
    const auto y = drop(x);
    const auto first = y.narrow(2, 0, 1);  // [8, 50, 1]
    EXPECT_TRUE(torch::equal(y, first.expand_as(y)));
    EXPECT_TRUE((first.eq(0) | first.eq(1 / 0.75f)).all().item<bool>());
    // 400 draws of p = 0.25: the share dropped has a standard deviation of about 0.022.
    EXPECT_NEAR(first.eq(0).to(torch::kFloat).mean().item<double>(), 0.25, 0.09);
  }
  drop->eval();
  EXPECT_TRUE(torch::equal(drop(x), x));
  nmt::Dropout off(0.0, /*whole_vectors=*/true);
  off->train();
  EXPECT_TRUE(torch::equal(off(x), x));
}

}  // namespace
