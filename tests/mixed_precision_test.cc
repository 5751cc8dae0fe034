// Mixed-precision training (model/mixed_precision.h, nmt-train --bf16): the
// autocast scope nests and restores, a whole model's logits and gradients
// under it come out in bfloat16's precision of the float ones (and are not
// the float ones: the products did run in bfloat16), on the recurrence's
// path and the plain one, and nmt-train --bf16 trains.
#include "model/mixed_precision.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "model/batch.h"
#include "model/model.h"
#include "train/losses.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::quote;
using nmt::test::temp_dir;

TEST(MixedPrecisionTest, AutocastScopesNestAndRestore) {
  const auto x = torch::randn({4, 8}), w = torch::randn({3, 8});
  ASSERT_FALSE(nmt::bf16_autocast_active());
  {
    const nmt::Bf16Autocast outer(true);
    EXPECT_TRUE(nmt::bf16_autocast_active());
    EXPECT_EQ(torch::nn::functional::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      const nmt::Bf16Autocast inner(true);
      const nmt::NoAutocast off;
      EXPECT_FALSE(nmt::bf16_autocast_active());
      EXPECT_EQ(torch::nn::functional::linear(x, w).scalar_type(), torch::kFloat);
    }
    EXPECT_TRUE(nmt::bf16_autocast_active()) << "an inner scope gives back the outer one's state";
  }
  EXPECT_FALSE(nmt::bf16_autocast_active());
  {
    const nmt::Bf16Autocast off(false);
    EXPECT_FALSE(nmt::bf16_autocast_active());
  }
}

// Relative difference |a - b| / |b| in the Frobenius norm.
double relative(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         b.to(torch::kDouble).norm().item<double>();
}

TEST(MixedPrecisionTest, ModelUnderBf16IsFloatToBfloat16Precision) {
  // bfloat16 keeps 8 significant bits (unit roundoff u = 2^-8). A product
  // whose inputs are both rounded is off by at most 2u relative per term,
  // before float accumulation; from the embeddings to the logits a target
  // step passes about 6 products in sequence (encoder keys, input gates, the
  // recurrence's query and context products, deep output, output layer),
  // each step's error carried into the next through gates that keep the gain
  // under 1, so logits and gradients stay within about 16 x 2u = 12.5%
  // relative (gradients pass the products twice: 25%). A wrong weight, a
  // transposed product or a dropped term is off by the order of 100%.
  constexpr double u = 1.0 / 256;
  using Path = nmt::DecoderImpl::Path;
  for (const auto path : {Path::kRecurrence, Path::kPlain}) {
    SCOPED_TRACE(path == Path::kRecurrence ? "recurrence" : "plain");
    auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
    opt.decoder = nmt::DecoderType::kCgru;
    torch::manual_seed(1);
    nmt::Seq2Seq model(opt);
    model->decoder->set_path(path);
    std::vector<std::pair<std::string, std::string>> pairs;
    std::vector<std::string> src, tgt;
    nmt::test::toy_corpus(12, 5, &src, &tgt);
    for (size_t i = 0; i < src.size(); ++i) pairs.emplace_back(src[i], tgt[i]);
    const auto examples = nmt::test::toy_examples(pairs);
    std::vector<int64_t> all(examples.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    const auto b = nmt::make_batch(examples, all);
    model->eval();  // no dropout: both runs compute the same function
    auto run = [&](bool bf16, std::map<std::string, torch::Tensor>* grads) {
      model->zero_grad();
      torch::Tensor logits;
      {
        const nmt::Bf16Autocast autocast(bf16);
        logits = model->forward(b.src, b.src_len, b.tgt_in);
      }
      logits = logits.to(torch::kFloat);
      nmt::sequence_loss(logits, b.tgt_out, 0.1).backward();
      for (const auto& p : model->named_parameters()) (*grads)[p.key()] = p.value().grad().clone();
      return logits.detach();
    };
    std::map<std::string, torch::Tensor> g32, g16;
    const auto l32 = run(false, &g32), l16 = run(true, &g16);
    EXPECT_GT(relative(l16, l32), 0.0) << "the products ran in float";
    EXPECT_LT(relative(l16, l32), 16 * 2 * u);
    for (const auto& [name, g] : g32) {
      if (g.norm().item<double>() == 0) continue;
      EXPECT_LT(relative(g16.at(name), g), 32 * 2 * u) << "gradient of " << name;
    }
  }
}

TEST(MixedPrecisionTest, NmtTrainTrainsWithBf16) {
  const auto dir = temp_dir("bf16_train");
  const auto f = nmt::test::write_toy_corpus(dir, 40, 8);
  const auto r = nmt::test::run(
      "nmt-train",
      "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " --valid-src " + quote(f.valid_src) +
          " --valid-tgt " + quote(f.valid_tgt) + " -o " + quote(dir + "/run") +
          " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16 --vocab-size 60 --threads 2 --device cpu"
          " --batch-tokens 300 --max-steps 6 --valid-every 3 --bf16 --batch-parts 2",
      dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "products in bfloat16")) << r.err;
  // oneDNN 2.6 fails when two threads create its kernels at once: no batch parts side by side.
  EXPECT_TRUE(contains(r.err, "--batch-parts 2 ignored: with --bf16 each batch trains whole")) << r.err;
  EXPECT_TRUE(contains(r.err, "whole batches")) << r.err;
  EXPECT_TRUE(contains(r.err, "training finished")) << r.err;
}

}  // namespace
