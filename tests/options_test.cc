// Every options struct's validate(): each numeric option refuses NaN, Inf
// and values out of its range with a message naming the option as the user
// spells it, and accepts the defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "align.h"
#include "options.h"
#include "search.h"
#include "test_util.h"
#include "translate_stream.h"
#include "translator.h"
#include "word_aligner.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Applies `change` to a copy of `good` and expects validate() to name `option`.
template <typename Options>
void expect_refused(const Options& good, const std::function<void(Options&)>& change, const std::string& option) {
  Options bad = good;
  change(bad);
  const auto msg = error_of([&] { bad.validate(); });
  EXPECT_TRUE(contains(msg, option)) << "expected '" << option << "' in: " << msg;
}

TEST(OptionsTest, DefaultsAreValid) {
  EXPECT_NO_THROW(nmt::TrainOptions().validate());
  EXPECT_NO_THROW(nmt::TokenizerOptions().validate());
  EXPECT_NO_THROW(nmt::DistributedOptions().validate());
  EXPECT_NO_THROW(nmt::SearchOptions().validate());
  EXPECT_NO_THROW(nmt::TranslateOptions().validate());
  EXPECT_NO_THROW(nmt::StreamOptions().validate());
  EXPECT_NO_THROW(nmt::AlignRunOptions().validate());
  EXPECT_NO_THROW(nmt::WordAlignerOptions().validate());
  EXPECT_NO_THROW(nmt::test::tiny_model().validate());
}

TEST(OptionsTest, TrainingOptionsOutOfRange) {
  using T = nmt::TrainOptions;
  const T good;
  expect_refused<T>(good, [](T& o) { o.learning_rate = kNan; }, "--learning-rate");
  expect_refused<T>(good, [](T& o) { o.learning_rate = 0; }, "--learning-rate");
  expect_refused<T>(good, [](T& o) { o.learning_rate = kInf; }, "--learning-rate");
  expect_refused<T>(good, [](T& o) { o.batch_tokens = -5; }, "--batch-tokens");
  expect_refused<T>(good, [](T& o) { o.max_batch_sentences = 0; }, "--max-batch-sentences");
  expect_refused<T>(good, [](T& o) { o.threads = -3; }, "--threads");
  expect_refused<T>(good, [](T& o) { o.threads = 100000; }, "--threads");
  expect_refused<T>(good, [](T& o) { o.label_smoothing = 1.5; }, "--label-smoothing");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = kNan; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = -0.1; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.spm_nbest = 1; }, "--spm-nbest");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = 0.1; o.guided_alignment = "links.txt"; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.clip_norm = -1; }, "--clip-norm");
  expect_refused<T>(good, [](T& o) { o.weight_decay = kNan; }, "--weight-decay");
  expect_refused<T>(good, [](T& o) { o.lr_decay = 0; }, "--lr-decay");
  expect_refused<T>(good, [](T& o) { o.lr_decay = 2; }, "--lr-decay");
  expect_refused<T>(good, [](T& o) { o.lr_patience = 0; }, "--lr-patience");
  expect_refused<T>(good, [](T& o) { o.min_lr = -1; }, "--min-lr");
  expect_refused<T>(good, [](T& o) { o.max_epochs = 0; }, "--max-epochs");
  expect_refused<T>(good, [](T& o) { o.max_steps = -1; }, "--max-steps");
  expect_refused<T>(good, [](T& o) { o.max_minutes = kInf; }, "--max-minutes");
  expect_refused<T>(good, [](T& o) { o.early_stopping = -1; }, "--early-stopping");
  expect_refused<T>(good, [](T& o) { o.max_bad_steps = 0; }, "--max-bad-steps");
  expect_refused<T>(good, [](T& o) { o.log_every = -1; }, "--log-every");
  expect_refused<T>(good, [](T& o) { o.valid_every = -1; }, "--valid-every");
  expect_refused<T>(good, [](T& o) { o.keep_checkpoints = -1; }, "--keep-checkpoints");
  expect_refused<T>(good, [](T& o) { o.max_src_tokens = 0; }, "--max-src-tokens");
  expect_refused<T>(good, [](T& o) { o.guided_alignment_weight = kNan; }, "--guided-alignment-weight");
  expect_refused<T>(good, [](T& o) { o.adam_beta2 = 1; }, "beta2");
  expect_refused<T>(good, [](T& o) { o.dist.rank = 2; o.dist.world_size = 2; }, "rank 2");
  expect_refused<T>(good, [](T& o) { o.dist.master_port = 70000; }, "--master-port");
  expect_refused<T>(good, [](T& o) { o.dist.timeout_minutes = kNan; }, "--dist-timeout");
}

TEST(OptionsTest, TokenizerAndModelOptionsOutOfRange) {
  using K = nmt::TokenizerOptions;
  expect_refused<K>(K{}, [](K& o) { o.vocab_size = 0; }, "--vocab-size");
  expect_refused<K>(K{}, [](K& o) { o.character_coverage = kNan; }, "--character-coverage");
  expect_refused<K>(K{}, [](K& o) { o.character_coverage = 0; }, "--character-coverage");
  expect_refused<K>(K{}, [](K& o) { o.model_type = "word"; }, "--spm-type");
  using M = nmt::ModelOptions;
  const M good = nmt::test::tiny_model();
  expect_refused<M>(good, [](M& o) { o.dropout = kNan; }, "dropout");
  expect_refused<M>(good, [](M& o) { o.dropout = 1; }, "dropout");
  expect_refused<M>(good, [](M& o) { o.emb_dim = 0; }, "emb_dim");
  expect_refused<M>(good, [](M& o) { o.enc_hidden = int64_t{1} << 40; }, "enc_hidden");
}

TEST(OptionsTest, SearchAndTranslationOptionsOutOfRange) {
  using S = nmt::SearchOptions;
  expect_refused<S>(S{}, [](S& o) { o.beam_size = 0; }, "--beam-size");
  expect_refused<S>(S{}, [](S& o) { o.beam_size = 100000; }, "--beam-size");
  expect_refused<S>(S{}, [](S& o) { o.length_penalty = kNan; }, "--length-penalty");
  expect_refused<S>(S{}, [](S& o) { o.length_penalty = kInf; }, "--length-penalty");
  expect_refused<S>(S{}, [](S& o) { o.max_length_ratio = 0; }, "--max-length-ratio");
  expect_refused<S>(S{}, [](S& o) { o.max_length = 0; }, "--max-length");
  expect_refused<S>(S{}, [](S& o) { o.n_best = 2; }, "--n-best");
  using R = nmt::StreamOptions;
  expect_refused<R>(R{}, [](R& o) { o.window = 0; }, "--window");
  expect_refused<R>(R{}, [](R& o) { o.max_line_bytes = 0; }, "--max-line-bytes");
  expect_refused<R>(R{}, [](R& o) { o.threads = -3; }, "--threads");
  expect_refused<R>(R{}, [](R& o) { o.translate.batch_sentences = 0; }, "--batch-size");
  expect_refused<R>(R{}, [](R& o) { o.translate.batch_tokens = -1; }, "--batch-tokens");
  expect_refused<R>(R{}, [](R& o) { o.translate.max_input_length = -1; }, "--max-input-length");
  expect_refused<R>(R{}, [](R& o) { o.translate.search.length_penalty = kNan; }, "--length-penalty");
}

TEST(OptionsTest, AlignmentOptionsOutOfRange) {
  using A = nmt::AlignRunOptions;
  expect_refused<A>(A{}, [](A& o) { o.threshold = kNan; }, "--threshold");
  expect_refused<A>(A{}, [](A& o) { o.threshold = 2; }, "--threshold");
  expect_refused<A>(A{}, [](A& o) { o.shift = 9; }, "--shift");
  expect_refused<A>(A{}, [](A& o) { o.max_pairs = -1; }, "--max-pairs");
  expect_refused<A>(A{}, [](A& o) { o.threads = -1; }, "--threads");
  expect_refused<A>(A{}, [](A& o) { o.ibm.iterations = 0; }, "--ibm-iterations");
  expect_refused<A>(A{}, [](A& o) { o.ibm.diagonal_tension = kNan; }, "--ibm-tension");
  expect_refused<A>(A{}, [](A& o) { o.search.beam_size = -1; }, "--beam-size");
}

}  // namespace
