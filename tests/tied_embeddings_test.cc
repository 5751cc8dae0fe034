// Three-way tying (ModelOptions::tie_all_embeddings): one embedding for the
// source, the target and the output layer. Its gradient is the sum of the
// three uses', it survives a checkpoint, and every way to ask for it without
// one vocabulary for both sides is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "train/losses.h"
#include "train/trainer.h"

namespace {

using nmt::test::gamma;
using nmt::test::unit_roundoff;

nmt::ModelOptions options(int tie) {  // 0 untied, 1 target embedding and output, 2 all three
  auto opt = nmt::test::tiny_model();
  opt.tie_embeddings = tie > 0;
  opt.tie_all_embeddings = tie == 2;
  return opt;
}

// The weights of `all` (three-way tied) copied into `other` (untied or
// two-way tied): the one embedding into each of other's.
void copy_weights(nmt::Seq2Seq& all, nmt::Seq2Seq& other) {
  torch::NoGradGuard ng;
  const auto from = all->named_parameters();
  const auto& shared = from["decoder.embed.weight"];
  for (auto& p : other->named_parameters()) {
    const bool embedding = p.key() == "encoder.embed.weight" || p.key() == "decoder.out_weight";
    p.value().copy_(embedding ? shared : from[p.key()]);
  }
}

TEST(TiedEmbeddingsTest, ThreeWayTyingHoldsOneEmbedding) {
  auto all = nmt::test::seeded_model(options(2));
  auto two = nmt::test::seeded_model(options(1));
  EXPECT_TRUE(all->encoder->embedding().is_same(all->decoder->embed->weight));
  EXPECT_TRUE(all->decoder->out_weight.is_same(all->decoder->embed->weight));
  const auto names = all->named_parameters();
  EXPECT_FALSE(names.contains("encoder.embed.weight"));
  EXPECT_TRUE(names.contains("decoder.embed.weight"));
  EXPECT_EQ(nmt::count_parameters(*two) - nmt::count_parameters(*all), options(2).src_vocab * options(2).emb_dim);
  // The embedding's padding row starts at zero, as with an encoder embedding of its own.
  EXPECT_EQ(all->decoder->embed->weight[nmt::kPadId].abs().max().item<float>(), 0.0f);
}

TEST(TiedEmbeddingsTest, GradientIsTheSumOfTheThreeUses) {
  // The same weights in an untied model: the same logits, bit for bit (the
  // same kernels on the same values), and the shared gradient is the sum of
  // its three gradients. Autograd adds the three in an order of its own, so
  // each element is within gamma_2 (|a| + |b| + |c|) of the exact sum, and so
  // is the reference sum: 2 gamma_2 between them.
  auto all = nmt::test::seeded_model(options(2));
  auto untied = nmt::test::seeded_model(options(0));
  copy_weights(all, untied);
  const auto b = nmt::make_batch(nmt::test::padded_examples(), nmt::test::padded_indices());
  for (auto* m : {&all, &untied}) (*m)->train();
  const auto logits_all = all->forward(b.src, b.src_len, b.tgt_in);
  const auto logits_untied = untied->forward(b.src, b.src_len, b.tgt_in);
  ASSERT_TRUE(torch::equal(logits_all, logits_untied));
  nmt::sequence_loss(logits_all, b.tgt_out, 0.1).backward();
  nmt::sequence_loss(logits_untied, b.tgt_out, 0.1).backward();
  const auto p = untied->named_parameters();
  const auto a = p["encoder.embed.weight"].grad(), d = p["decoder.embed.weight"].grad(),
             o = p["decoder.out_weight"].grad();
  const auto got = all->decoder->embed->weight.grad();
  const auto bound = 2 * gamma(2, unit_roundoff(got)) * (a.abs() + d.abs() + o.abs());
  EXPECT_TRUE(((got - (a + d + o)).abs() <= bound).all().item<bool>());
  // Every use contributes: the source's gradient is not zero where the batch reads source pieces.
  EXPECT_GT(a.abs().sum().item<double>(), 0.0);
}

TEST(TiedEmbeddingsTest, CheckpointKeepsTheTying) {
  const auto dir = nmt::test::temp_dir("tie_all_ckpt");
  auto model = nmt::test::seeded_model(options(2));
  const auto& tok = nmt::test::toy_tokenizer();
  nmt::save_checkpoint(dir + "/m.ckpt", model, tok, tok);
  auto loaded = nmt::load_checkpoint(dir + "/m.ckpt", torch::kCPU);
  EXPECT_TRUE(loaded.options.tie_all_embeddings);
  EXPECT_TRUE(loaded.model->encoder->embedding().is_same(loaded.model->decoder->embed->weight));
  const auto b = nmt::make_batch(nmt::test::padded_examples(), nmt::test::padded_indices());
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::equal(model->forward(b.src, b.src_len, b.tgt_in), loaded.model->forward(b.src, b.src_len, b.tgt_in)));

  // A file that ties the embeddings of two different tokenizers (of one size) is refused by name.
  // toy_tokenizer()'s recipe on other sentences, until one gives its size.
  std::optional<nmt::Tokenizer> other;
  for (uint64_t seed = 8; seed < 40 && !other; ++seed) {
    std::vector<std::string> s, t;
    nmt::test::toy_corpus(500, seed, &s, &t);
    s.insert(s.end(), t.begin(), t.end());
    nmt::TokenizerOptions other_opt;
    other_opt.vocab_size = 60;
    auto trained = nmt::Tokenizer::train(s, other_opt);
    if (trained.vocab_size() == tok.vocab_size()) other = trained;
  }
  ASSERT_TRUE(other) << "no toy corpus gave a tokenizer of " << tok.vocab_size() << " pieces";
  ASSERT_NE(other->bytes(), tok.bytes());
  nmt::save_checkpoint(dir + "/two.ckpt", model, tok, *other);
  try {
    nmt::load_checkpoint(dir + "/two.ckpt", torch::kCPU);
    FAIL() << "three-way tying of two tokenizers loaded";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("two.ckpt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("two different tokenizers"), std::string::npos) << e.what();
  }
}

TEST(TiedEmbeddingsTest, RefusedWithoutOneVocabulary) {
  auto opt = options(2);
  opt.tie_embeddings = false;
  EXPECT_THROW(opt.validate(), nmt::UsageError);
  opt = options(2);
  opt.tgt_vocab += 1;
  try {
    opt.validate();
    FAIL() << "three-way tying of two vocabulary sizes accepted";
  } catch (const nmt::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("one vocabulary"), std::string::npos) << e.what();
  }

  // nmt-train: two SentencePiece models to train, or two different ones given.
  const auto dir = nmt::test::temp_dir("tie_all_train");
  const auto files = nmt::test::write_toy_corpus(dir, 40, 8);
  nmt::TrainOptions train;
  train.train_src = files.train_src;
  train.train_tgt = files.train_tgt;
  train.output_dir = dir + "/run";
  train.max_steps = 1;
  nmt::TokenizerOptions tok;
  try {
    nmt::train(train, tok, options(2));
    FAIL() << "three-way tying with a vocabulary for each side accepted";
  } catch (const nmt::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--shared-vocab"), std::string::npos) << e.what();
  }
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(200, 5, &s, &t);
  nmt::TokenizerOptions bpe;
  bpe.model_type = "bpe";
  bpe.vocab_size = 50;
  nmt::test::write_bytes(dir + "/bpe.model", nmt::Tokenizer::train(s, bpe).bytes());
  tok.src_model = nmt::test::toy_tokenizer_file();
  tok.tgt_model = dir + "/bpe.model";
  try {
    nmt::train(train, tok, options(2));
    FAIL() << "three-way tying of two SentencePiece models accepted";
  } catch (const nmt::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("differ"), std::string::npos) << e.what();
  }
}

}  // namespace
