// Every options struct's validate(): each numeric option refuses NaN, Inf
// and values out of its range with a message naming the option as the user
// spells it, and accepts the defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <string>

#include "base/options.h"
#include "search/search.h"
#include "translate/translator.h"
#include "test_util.h"
#include "text/word_aligner.h"
#include "tools/align.h"
#include "tools/translate_stream.h"

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

// The defaults, given the options every run needs (the training data, a model).
nmt::TrainOptions train_options() {
  nmt::TrainOptions o;
  o.train_src = "train.en";
  o.train_tgt = "train.de";
  return o;
}
nmt::StreamOptions stream_options() {
  nmt::StreamOptions o;
  o.model_paths = {"model.ckpt"};
  return o;
}
nmt::AlignRunOptions align_options() {
  nmt::AlignRunOptions o;
  o.model_path = "model.ckpt";
  return o;
}

TEST(OptionsTest, DefaultsAreValid) {
  EXPECT_NO_THROW(train_options().validate());
  EXPECT_NO_THROW(nmt::TokenizerOptions().validate());
  EXPECT_NO_THROW(nmt::DistributedOptions().validate());
  EXPECT_NO_THROW(nmt::SearchOptions().validate());
  EXPECT_NO_THROW(nmt::TranslateOptions().validate());
  EXPECT_NO_THROW(stream_options().validate());
  EXPECT_NO_THROW(align_options().validate());
  EXPECT_NO_THROW(nmt::WordAlignerOptions().validate());
  EXPECT_NO_THROW(nmt::test::tiny_model().validate());
  nmt::ServeOptions serve;
  serve.model_paths = {"m.ckpt"};
  EXPECT_NO_THROW(serve.validate());
  EXPECT_TRUE(contains(error_of([] { nmt::ServeOptions().validate(); }), "--model"));
  serve.translate.search.beam_size = 32;  // a default no request could ask for
  EXPECT_TRUE(contains(error_of([&] { serve.validate(); }), "--max-beam-size"));
  serve.translate.search.beam_size = 1;
  serve.port = 70000;
  EXPECT_TRUE(contains(error_of([&] { serve.validate(); }), "--port"));
}

// An option a run cannot do without is a usage error naming that option,
// found before any work: every "X is required" check of the three tools.
TEST(OptionsTest, MissingRequiredOptionsAreNamed) {
  auto usage = [](const auto& options, const std::string& option) {
    try {
      options.validate();
      ADD_FAILURE() << "no error; expected one naming " << option;
    } catch (const nmt::UsageError& e) {
      EXPECT_TRUE(contains(e.what(), option)) << "expected '" << option << "' in: " << e.what();
    }
  };
  using T = nmt::TrainOptions;
  const T none;
  usage(none, "--train-src");
  T half = train_options();
  half.train_tgt.clear();
  usage(half, "--train-tgt");
  half = train_options();
  half.train_src.clear();
  usage(half, "--train-src");
  T both = train_options();
  both.train_tsv = "train.tsv";
  usage(both, "--train-tsv");
  T tsv;
  tsv.train_tsv = "train.tsv";
  EXPECT_NO_THROW(tsv.validate());
  T valid = train_options();
  valid.valid_src = "val.en";
  usage(valid, "--valid-tgt");  // validation data is optional, but not half of it
  valid.valid_tgt = "val.de";
  EXPECT_NO_THROW(valid.validate());
  nmt::TokenizerOptions spm;
  spm.tgt_model = "tgt.model";
  usage(spm, "--src-spm");

  using R = nmt::StreamOptions;
  const R no_model;
  usage(no_model, "--model");
  R evaluate;  // scores given text: needs no model
  evaluate.evaluate = true;
  evaluate.references = {"ref.txt"};
  EXPECT_NO_THROW(evaluate.validate());
  R pairs = stream_options();
  pairs.score_mode = true;
  pairs.src = "a.en";
  usage(pairs, "--tgt");
  pairs.src.clear();
  pairs.tgt = "a.de";
  usage(pairs, "--src");

  using A = nmt::AlignRunOptions;
  const A no_aligner_model;
  usage(no_aligner_model, "--model");
  A ibm2;  // the statistical aligner needs no model, but the target
  ibm2.aligner = nmt::Aligner::kIbm2;
  ibm2.format = nmt::AlignFormat::kPharaoh;
  ibm2.src = "a.en";
  usage(ibm2, "--tgt");
  ibm2.tgt = "a.de";
  EXPECT_NO_THROW(ibm2.validate());
  ibm2.ibm.agreement = true;  // trains both directions together: only with a reverse model
  usage(ibm2, "--symmetrize");
  ibm2.symmetrize = nmt::Symmetrization::kAverage;
  EXPECT_NO_THROW(ibm2.validate());
  A attention_agreement = align_options();
  attention_agreement.ibm.agreement = true;
  usage(attention_agreement, "--ibm-agreement");
  A no_src = align_options();
  no_src.tgt = "a.de";
  usage(no_src, "--src");
  A reverse = align_options();
  reverse.src = "a.en";
  reverse.reverse_model = "de-en.ckpt";
  reverse.symmetrize = nmt::Symmetrization::kUnion;
  usage(reverse, "--tgt");
  A two = align_options();
  two.src = "a.en";
  two.pairs = "pairs.txt";
  usage(two, "--pairs");
}

TEST(OptionsTest, TrainingOptionsOutOfRange) {
  using T = nmt::TrainOptions;
  const T good = train_options();
  for (double bad : {kNan, 0.0, kInf}) expect_refused<T>(good, [bad](T& o) { o.learning_rate = bad; }, "--learning-rate");
  expect_refused<T>(good, [](T& o) { o.batch_tokens = -5; }, "--batch-tokens");
  expect_refused<T>(good, [](T& o) { o.batch_sentences = 0; }, "--batch-sentences");
  expect_refused<T>(good, [](T& o) { o.runtime.threads = -3; }, "--threads");
  expect_refused<T>(good, [](T& o) { o.runtime.threads = 100000; }, "--threads");
  expect_refused<T>(good, [](T& o) { o.label_smoothing = 1.5; }, "--label-smoothing");
  for (double bad : {-1.0, kNan, kInf}) expect_refused<T>(good, [bad](T& o) { o.r_drop = bad; }, "--r-drop");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = kNan; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = -0.1; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = 0.1; o.spm_nbest = 1; }, "--spm-nbest must be");
  expect_refused<T>(good, [](T& o) { o.spm_alpha = 0.1; o.guided_alignment = "links.txt"; }, "--spm-alpha");
  expect_refused<T>(good, [](T& o) { o.clip_norm = -1; }, "--clip-norm");
  expect_refused<T>(good, [](T& o) { o.weight_decay = kNan; }, "--weight-decay");
  expect_refused<T>(good, [](T& o) { o.lr_decay = 0; }, "--lr-decay");
  expect_refused<T>(good, [](T& o) { o.lr_decay = 2; }, "--lr-decay");
  expect_refused<T>(good, [](T& o) { o.lr_patience = 0; }, "--lr-patience");
  expect_refused<T>(good, [](T& o) { o.lr_decay_start = -1; }, "--lr-decay-start");
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
  expect_refused<T>(good, [](T& o) { o.guided_alignment = "links.txt"; o.guided_alignment_weight = kNan; },
                    "--guided-alignment-weight must be");
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
  const R stream = stream_options();  // (one object: R{} temporaries trip a false -Wmaybe-uninitialized in GCC 12)
  expect_refused<R>(stream, [](R& o) { o.window = 0; }, "--window");
  expect_refused<R>(stream, [](R& o) { o.max_line_bytes = 0; }, "--max-line-bytes");
  expect_refused<R>(stream, [](R& o) { o.runtime.threads = -3; }, "--threads");
  expect_refused<R>(stream, [](R& o) { o.translate.batch_sentences = 0; }, "--batch-sentences");
  expect_refused<R>(stream, [](R& o) { o.translate.batch_tokens = -1; }, "--batch-tokens");
  expect_refused<R>(stream, [](R& o) { o.translate.max_input_length = -1; }, "--max-input-length");
  expect_refused<R>(stream, [](R& o) { o.translate.search.length_penalty = kNan; }, "--length-penalty");
  expect_refused<R>(stream, [](R& o) { o.translate.shortlist.best = 0; }, "--shortlist-best");
  expect_refused<R>(stream, [](R& o) { o.translate.shortlist.frequent = -1; }, "--shortlist-frequent");
}

TEST(OptionsTest, AlignmentOptionsOutOfRange) {
  using A = nmt::AlignRunOptions;
  expect_refused<A>(A{}, [](A& o) { o.threshold = kNan; }, "--threshold");
  expect_refused<A>(A{}, [](A& o) { o.threshold = 2; }, "--threshold");
  expect_refused<A>(A{}, [](A& o) { o.shift = 9; }, "--shift");
  expect_refused<A>(A{}, [](A& o) { o.max_pairs = -1; }, "--max-pairs");
  expect_refused<A>(A{}, [](A& o) { o.max_input_length = -1; }, "--max-input-length");
  expect_refused<A>(A{}, [](A& o) { o.runtime.threads = -1; }, "--threads");
  expect_refused<A>(A{}, [](A& o) { o.ibm.iterations = 0; }, "--ibm-iterations");
  expect_refused<A>(A{}, [](A& o) { o.ibm.diagonal_tension = kNan; }, "--ibm-tension");
  expect_refused<A>(A{}, [](A& o) { o.search.beam_size = -1; }, "--beam-size");
  // The beam is for free mode only: with the target given it would do nothing.
  A free_mode = align_options();
  free_mode.src = "a.src";
  free_mode.search.beam_size = 5;
  EXPECT_NO_THROW(free_mode.validate());
  expect_refused<A>(free_mode, [](A& o) { o.tgt = "a.tgt"; }, "--beam-size");
  expect_refused<A>(free_mode, [](A& o) { o.src.clear(); o.tsv = "pairs.tsv"; }, "--beam-size");
  expect_refused<A>(free_mode, [](A& o) { o.src.clear(); o.pairs = "pairs.txt"; }, "--beam-size");
  // The lexical table is ibm2's, over a model's pieces.
  A lex;
  lex.format = nmt::AlignFormat::kLex;
  lex.aligner = nmt::Aligner::kIbm2;
  lex.model_path = "m.ckpt";
  EXPECT_NO_THROW(lex.validate());
  expect_refused<A>(lex, [](A& o) { o.aligner = nmt::Aligner::kAttention; }, "--aligner ibm2");
  expect_refused<A>(lex, [](A& o) { o.model_path.clear(); }, "--model");
  expect_refused<A>(lex, [](A& o) { o.eval_gold = "gold.txt"; }, "one table");
  expect_refused<A>(lex, [](A& o) { o.lex_best = 0; }, "--lex-best");
}

// The ranges declared in the field lists give the messages validate() gave
// when it spelt each range out: the flag (ModelOptions: the stored key), the
// range with its open or closed ends, and the value.
TEST(OptionsTest, DeclaredRangesNameTheOptionAndTheRange) {
  nmt::TrainOptions t = train_options();
  t.runtime.threads = -3;
  EXPECT_EQ(error_of([&] { t.validate(); }), "--threads must be between 0 and 1024, got -3");
  t = train_options();
  t.batch_tokens = 0;
  EXPECT_EQ(error_of([&] { t.validate(); }), "--batch-tokens must be at least 1, got 0");
  t = train_options();
  t.learning_rate = 0;
  EXPECT_EQ(error_of([&] { t.validate(); }), "--learning-rate must be a finite number > 0, got 0");
  t = train_options();
  t.adam_beta1 = 1;
  EXPECT_EQ(error_of([&] { t.validate(); }), "--adam-beta1 must be a finite number in [0, 1), got 1");
  nmt::ModelOptions m = nmt::test::tiny_model();
  m.emb_dim = 0;
  EXPECT_EQ(error_of([&] { m.validate(); }), "model option emb_dim must be between 1 and 65536, got 0");
  m = nmt::test::tiny_model();
  m.word_dropout = kNan;
  EXPECT_EQ(error_of([&] { m.validate(); }), "model option word_dropout must be a finite number in [0, 1), got nan");
  nmt::WordAlignerOptions w;
  w.null_prob = 1;
  EXPECT_EQ(error_of([&] { w.validate(); }), "--ibm-null-prob must be a finite number in (0, 1), got 1");
}

}  // namespace

namespace {

// Collects the fields a struct lists.
struct FieldNames {
  std::vector<std::string> names;
  template <class T>
  void operator()(const nmt::Field& f, const T&) {
    names.push_back(f.name);
  }
};

template <class Options>
std::vector<std::string> field_names() {
  Options o;
  FieldNames v;
  Options::fields(o, v);
  return v.names;
}

// Every name is a lowercase long option ("emb-dim") and none repeats within a tool.
void expect_well_formed(const std::vector<std::string>& names) {
  std::set<std::string> seen;
  for (const auto& n : names) {
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(std::all_of(n.begin(), n.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }))
        << n;
    EXPECT_TRUE(seen.insert(n).second) << n << " is listed twice";
  }
}

// The defaults that depend on which options were given live in the core
// (resolved()), read from GivenOptions: the apps only say what was given.
TEST(OptionsTest, DefaultsThatDependOnGivenOptions) {
  nmt::StreamOptions s;
  s.model_paths = {"m.ckpt"};
  s.translate.search.n_best = 5;  // without --beam-size: a beam of 5 gives the 5 hypotheses
  EXPECT_EQ(s.resolved().translate.search.beam_size, 5);
  EXPECT_NO_THROW(s.resolved().validate());
  s.given = {"beam-size", "n-best"};  // -b 1 --n-best 5: the user's beam stays, and is refused
  EXPECT_EQ(s.resolved().translate.search.beam_size, 1);
  EXPECT_TRUE(contains(error_of([&] { s.resolved().validate(); }), "--n-best"));
  s.given.clear();
  s.translate.search.n_best = 1;
  s.translate.search.beam_size = 4;  // an n-best below the beam is left as it is
  EXPECT_EQ(s.resolved().translate.search.beam_size, 4);

  nmt::AlignRunOptions a;
  a.aligner = nmt::Aligner::kIbm2;  // links only: Pharaoh lines unless --format was given
  EXPECT_EQ(a.resolved().format, nmt::AlignFormat::kPharaoh);
  EXPECT_FALSE(a.resolved().ibm.hmm);
  a.aligner = nmt::Aligner::kHmm;  // the same, and the word aligner goes on to the HMM
  EXPECT_EQ(a.resolved().format, nmt::AlignFormat::kPharaoh);
  EXPECT_TRUE(a.resolved().ibm.hmm);
  a.aligner = nmt::Aligner::kIbm2;
  a.format = nmt::AlignFormat::kLex;
  a.given = {"format"};
  EXPECT_EQ(a.resolved().format, nmt::AlignFormat::kLex);
  a.aligner = nmt::Aligner::kAttention;
  a.format = nmt::AlignFormat::kCsv;
  a.given.clear();
  EXPECT_EQ(a.resolved().format, nmt::AlignFormat::kCsv);
}

TEST(OptionsFieldsTest, EachToolListsEveryOptionOnce) {
  auto train = field_names<nmt::TrainOptions>();
  for (const auto& n : field_names<nmt::TokenizerOptions>()) train.push_back(n);
  for (const auto& n : field_names<nmt::ModelOptions>()) train.push_back(n);
  expect_well_formed(train);
  expect_well_formed(field_names<nmt::StreamOptions>());
  expect_well_formed(field_names<nmt::AlignRunOptions>());
  expect_well_formed(field_names<nmt::ServeOptions>());
  EXPECT_EQ(field_names<nmt::ModelOptions>().size(), 17u);  // one per member of ModelOptions
}

TEST(OptionsFieldsTest, ModelOptionsRoundTripThroughTheirText) {
  nmt::ModelOptions m = nmt::test::tiny_model();
  m.attention = nmt::AttentionType::kGeneral;
  m.decoder = nmt::DecoderType::kCgru;
  m.dropout = 0.125;
  m.tie_embeddings = true;
  m.alignment_head = 32;
  const auto back = nmt::ModelOptions::parse(m.serialize(), "test");
  EXPECT_EQ(back.serialize(), m.serialize());
  EXPECT_EQ(back.field("decoder"), "cgru");
  EXPECT_EQ(back.field("tie_embeddings"), "1");
  EXPECT_TRUE(contains(error_of([&] { back.field("nope"); }), "unknown model option 'nope'"));
  // A config written before `decoder` existed still reads (as bahdanau); any other lacking key is named.
  std::string old = m.serialize();
  old.erase(old.find("decoder=cgru\n"), std::string("decoder=cgru\n").size());
  EXPECT_EQ(nmt::ModelOptions::parse(old, "old").decoder, nmt::DecoderType::kBahdanau);
  // ... and one written before `alignment_head` existed has none.
  EXPECT_EQ(back.field("alignment_head"), "32");
  old.erase(old.find("alignment_head=32\n"), std::string("alignment_head=32\n").size());
  EXPECT_EQ(nmt::ModelOptions::parse(old, "old").alignment_head, 0);
  std::string lacking = m.serialize();
  lacking.erase(lacking.find("emb_dim="), lacking.find('\n', lacking.find("emb_dim=")) + 1 - lacking.find("emb_dim="));
  EXPECT_TRUE(contains(error_of([&] { nmt::ModelOptions::parse(lacking, "x.ckpt"); }), "lacks 'emb_dim'"));
  EXPECT_TRUE(contains(error_of([&] { nmt::ModelOptions::parse(m.serialize() + "dropout=lots\n", "x"); }),
                       "bad value for dropout"));
}

TEST(OptionsFieldsTest, EnumNamesParseBackAndRefuseOthers) {
  for (const auto& name : nmt::enum_names<nmt::Symmetrization>())
    EXPECT_EQ(nmt::enum_name(nmt::parse_enum<nmt::Symmetrization>(name)), name);
  EXPECT_EQ(error_of([] { nmt::parse_attention("bilinear"); }),
            "unknown attention 'bilinear' (expected additive, dot, general, concat or none)");
}

}  // namespace
