// Validation during training (train/validation.h): the BLEU of the greedy
// translations is scored with the tokenizer and case it is given, and a
// training run gives it --valid-bleu-tokenize.
#include "train/validation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "test_util.h"
#include "train/trainer.h"
#include "train/training_data.h"
#include "trainer_util.h"
#include "translate/translator.h"

namespace {

using nmt::test::read_all_lines;

// `hyp` with its first letter capitalized and a comma glued to its last
// word: a reference that 13a (which splits the comma off) and none (which
// does not), each cased and lowercased, match differently.
std::string reference_for(std::string hyp) {
  if (!hyp.empty()) hyp[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(hyp[0])));
  return hyp + ",";
}

TEST(ValidationTest, BleuIsScoredWithTheTokenizerAndCaseGiven) {
  auto m = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  std::vector<std::string> src, unused;
  nmt::test::toy_corpus(24, 5, &src, &unused);
  const int64_t batch = 8;
  nmt::TranslateOptions greedy;
  greedy.batch_sentences = batch;
  const auto hyps = nmt::Translator(m.model, m.src_tok, m.tgt_tok).translate_text(src, greedy);

  nmt::ValidationSet set;
  set.source = src;
  for (const auto& h : hyps) set.reference.push_back(reference_for(h));
  nmt::ParallelCorpus pairs;
  pairs.src = set.source;
  pairs.tgt = set.reference;
  for (size_t i = 0; i < src.size(); ++i) pairs.line.push_back(static_cast<int64_t>(i) + 1);
  set.examples = nmt::encode_corpus(pairs, m.src_tok, m.tgt_tok, INT64_MAX, INT64_MAX).examples;

  std::set<double> seen;
  for (const char* tokenize : {"13a", "none"}) {
    for (bool lowercase : {false, true}) {
      const nmt::BleuOptions bleu{lowercase, tokenize};
      const double expected = nmt::corpus_bleu(hyps, set.reference, bleu).score;
      seen.insert(expected);
      const auto v = nmt::validate(m.model, m.src_tok, m.tgt_tok, set, {2048, 64}, batch, bleu, torch::kCPU);
      EXPECT_DOUBLE_EQ(v.bleu, expected) << "tokenize " << tokenize << ", lowercase " << lowercase;
    }
  }
  // Otherwise a validation that ignored its options could pass.
  EXPECT_EQ(seen.size(), 4u) << "the four settings should score these references differently";
}

// The BLEU logged at a run's last validation is its last checkpoint's greedy
// translations scored with the run's tokenizer (char here), which scores
// them otherwise than the default 13a.
TEST(ValidationTest, TrainingScoresBleuWithTheRunsTokenizer) {
  nmt::test::Quiet q;
  const auto dir = nmt::test::temp_dir("valid_bleu");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 24);
  auto opt = nmt::test::base_options(files, dir + "/run");
  opt.max_steps = 60;
  opt.valid_every = 60;
  opt.valid_bleu_tokenize = nmt::BleuTokenizer::kChar;
  nmt::train(opt, nmt::test::toy_tok(), nmt::test::tiny_arch(0.1));

  // The last validation is the run's end, whose weights last.ckpt holds.
  const auto logged = nmt::test::valid_figures(opt.output_dir, "bleu");
  ASSERT_FALSE(logged.empty()) << "no validation in metrics.jsonl";
  auto last = nmt::load_checkpoint(opt.output_dir + "/last.ckpt", torch::kCPU);
  nmt::TranslateOptions greedy;
  greedy.batch_sentences = opt.valid_batch_sentences;
  const auto src = read_all_lines(files.valid_src), ref = read_all_lines(files.valid_tgt);
  const auto hyps = nmt::Translator(last.model, last.src_tok, last.tgt_tok).translate_text(src, greedy);
  const double chars = nmt::corpus_bleu(hyps, ref, {false, "char"}).score;
  const double words = nmt::corpus_bleu(hyps, ref, {false, "13a"}).score;
  ASSERT_GT(std::abs(chars - words), 0.01) << "the two tokenizers agree here: the test would prove nothing";
  EXPECT_NEAR(logged.back(), chars, 1e-4 * std::max(1.0, chars)) << "13a would give " << words;
}

}  // namespace
