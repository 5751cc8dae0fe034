// Options that could not take effect where they were given are refused with
// a line naming them, not accepted and ignored: a shortlist's shape without
// the shortlist, scores appended to n-best lines that carry them already,
// heatmaps of an aligner that has no attention, per-pair files of a format
// that writes one output, an output file that --output-dir leaves
// unwritten, weights of an ensemble of one, options typed for a mode that
// never reads them, and nmt-train's options that tune another that is off. Each case is also accepted once the option can
// take effect. Options a recipe's config file carries to runs of every kind
// (validation settings without validation data, an attention size without
// its layer) are named in a warning instead.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/align_options.h"
#include "base/serve_options.h"
#include "base/train_options.h"
#include "base/translate_options.h"
#include "test_util.h"
#include "train/trainer.h"
#include "trainer_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

template <class Options>
std::string refusal(const Options& o) {
  return error_of([&] { o.validate(); });
}

TEST(OptionsNoopTest, TheShortlistsShapeNeedsTheShortlist) {
  nmt::StreamOptions stream;
  stream.model_paths = {"model.ckpt"};
  nmt::ServeOptions serve;
  serve.model_paths = {"model.ckpt"};
  for (const char* option : {"shortlist-best", "shortlist-frequent"}) {
    stream.given = serve.given = {option};
    EXPECT_TRUE(contains(refusal(stream), "--shortlist-best and --shortlist-frequent shape the candidates of --shortlist"))
        << option;
    EXPECT_TRUE(contains(refusal(serve), "give --shortlist")) << option;
    stream.translate.shortlist.path = serve.translate.shortlist.path = "lex.tsv";
    EXPECT_NO_THROW(stream.validate()) << option;
    EXPECT_NO_THROW(serve.validate()) << option;
    stream.translate.shortlist.path = serve.translate.shortlist.path = "";
  }
}

TEST(OptionsNoopTest, ScoresOnNBestLinesAreRefused) {
  nmt::StreamOptions stream;
  stream.model_paths = {"model.ckpt"};
  stream.scores = true;
  stream.translate.search.beam_size = 4;
  EXPECT_NO_THROW(stream.validate());  // the one best, with its score
  stream.translate.search.n_best = 2;
  EXPECT_TRUE(contains(refusal(stream), "--with-scores does nothing with --n-best"));
}

TEST(OptionsNoopTest, AlignmentOutputsThatWouldStayEmptyAreRefused) {
  nmt::AlignRunOptions ibm2;
  ibm2.aligner = nmt::Aligner::kIbm2;
  ibm2.src = "a.src";
  ibm2.tgt = "a.tgt";
  ibm2 = ibm2.resolved();  // pharaoh, the statistical aligner's format
  EXPECT_NO_THROW(ibm2.validate());
  auto heatmap = ibm2;
  heatmap.heatmap_dir = "maps";
  EXPECT_TRUE(contains(refusal(heatmap), "the ibm2 aligner gives hard links only, no attention to draw: drop --heatmap"));
  auto dir = ibm2;
  dir.output_dir = "pairs";
  EXPECT_TRUE(contains(refusal(dir), "--format pharaoh writes all its links to one output"));

  nmt::AlignRunOptions attention;
  attention.model_path = "model.ckpt";
  attention.src = "a.src";
  attention.tgt = "a.tgt";
  attention.output_dir = "pairs";  // csv, one file per pair
  EXPECT_NO_THROW(attention.validate());
  attention.heatmap_dir = "maps";
  EXPECT_NO_THROW(attention.validate());
  attention.output = "-";  // stdout named as such: nothing goes unwritten
  EXPECT_NO_THROW(attention.validate());
  attention.output = "out.csv";
  EXPECT_TRUE(contains(refusal(attention), "--output-dir writes one file per pair, and the -o file would stay unwritten"));
  attention.output_dir.clear();  // the matrices into -o, the heatmaps beside: both written
  EXPECT_NO_THROW(attention.validate());
}

TEST(OptionsNoopTest, WeightsOfOneModelAreRefused) {
  nmt::StreamOptions stream;
  stream.model_paths = {"model.ckpt"};
  stream.ensemble_weights = {2};
  nmt::ServeOptions serve;
  serve.model_paths = {"model.ckpt"};
  serve.ensemble_weights = {2};
  const char* why = "--ensemble-weights weighs the models of an ensemble, and -m names one model (model.ckpt)";
  EXPECT_TRUE(contains(refusal(stream), why)) << refusal(stream);
  EXPECT_TRUE(contains(refusal(serve), why)) << refusal(serve);
  stream.model_paths = serve.model_paths = {"a.ckpt", "b.ckpt"};
  stream.ensemble_weights = serve.ensemble_weights = {2, 1};
  EXPECT_NO_THROW(stream.validate());
  EXPECT_NO_THROW(serve.validate());
}

// Modes that read only some options refuse the others typed on the command
// line, and take them from a config file (a system file describes a whole
// system: -c system.toml --info or --score-pairs reads what it needs).
TEST(OptionsNoopTest, OptionsAModeNeverReadsAreRefusedWhenTyped) {
  nmt::StreamOptions evaluate;
  evaluate.evaluate = true;
  evaluate.references = {"ref.txt"};
  nmt::StreamOptions info;
  info.info = true;
  info.model_paths = {"model.ckpt"};
  nmt::StreamOptions pairs;
  pairs.score_mode = true;
  pairs.model_paths = {"model.ckpt"};
  for (const char* option : {"beam-size", "length-penalty", "shortlist", "batch-tokens", "int8", "parallel-batches"}) {
    for (auto* o : {&evaluate, &info, &pairs}) {
      o->given = {option};  // from a config file: taken
      o->typed.clear();
      EXPECT_NO_THROW(o->validate()) << option;
      o->typed = {option};
    }
    EXPECT_TRUE(contains(refusal(evaluate), std::string("--") + option + " does nothing with --evaluate")) << option;
    EXPECT_TRUE(contains(refusal(info), std::string("--") + option + " does nothing with --info")) << option;
    EXPECT_TRUE(contains(refusal(pairs), std::string("--") + option + " does nothing with --score-pairs")) << option;
  }
  pairs.typed = pairs.given = {"batch-sentences"};  // forced decoding's batches
  EXPECT_NO_THROW(pairs.validate());
  pairs.translate.search.beam_size = 10;  // a system file's beam, with --score-pairs: spared
  pairs.typed.clear();
  EXPECT_NO_THROW(pairs.validate());
}

// A run's config.toml lists every option, so nmt-train refuses an option
// set apart from its default while the option it tunes is off, and takes
// the default itself without a word.
TEST(OptionsNoopTest, TrainingOptionsThatTuneAnOptionThatIsOffAreRefused) {
  nmt::TrainOptions base;
  base.train_src = "train.src";
  base.train_tgt = "train.tgt";
  EXPECT_NO_THROW(base.validate());
  struct Case {
    const char* refusal;
    void (*set)(nmt::TrainOptions*);     // the tuning option, apart from its default
    void (*enable)(nmt::TrainOptions*);  // the option it tunes, on
  };
  const std::vector<Case> cases = {
      {"--kd-weight 0.7 takes effect only with --kd-teachers: give that, or leave --kd-weight at its default (0.5)",
       [](nmt::TrainOptions* o) { o->kd_weight = 0.7; },
       [](nmt::TrainOptions* o) { o->kd_teachers = {"teacher.ckpt"}; }},
      {"--guided-alignment-weight 3 takes effect only with --guided-alignment",
       [](nmt::TrainOptions* o) { o->guided_alignment_weight = 3; },
       [](nmt::TrainOptions* o) { o->guided_alignment = "train.align"; }},
      {"--spm-nbest 8 takes effect only with --spm-alpha above 0", [](nmt::TrainOptions* o) { o->spm_nbest = 8; },
       [](nmt::TrainOptions* o) { o->spm_alpha = 0.1; }},
      {"--adam-beta1 0.8 takes effect only with --optimizer adam (it is sgd)",
       [](nmt::TrainOptions* o) {
         o->optimizer = nmt::OptimizerType::kSgd;
         o->adam_beta1 = 0.8;
       },
       [](nmt::TrainOptions* o) { o->optimizer = nmt::OptimizerType::kAdam; }},
      {"--adam-beta2 0.98 takes effect only with --optimizer adam (it is sgd)",
       [](nmt::TrainOptions* o) {
         o->optimizer = nmt::OptimizerType::kSgd;
         o->adam_beta2 = 0.98;
       },
       [](nmt::TrainOptions* o) { o->optimizer = nmt::OptimizerType::kAdam; }},
  };
  for (const auto& c : cases) {
    auto o = base;
    c.set(&o);
    EXPECT_TRUE(contains(refusal(o), c.refusal)) << c.refusal << ": " << refusal(o);
    c.enable(&o);
    EXPECT_NO_THROW(o.validate()) << c.refusal;
  }
  auto sgd = base;  // the betas at their defaults, as config.toml writes them: no refusal
  sgd.optimizer = nmt::OptimizerType::kSgd;
  EXPECT_NO_THROW(sgd.validate());
}

TEST(OptionsNoopTest, ValidationOptionsWithoutValidationDataAreNamed) {
  nmt::TrainOptions o;
  EXPECT_TRUE(o.unused_without_validation().empty());  // the defaults say nothing
  o.early_stopping = 6;
  o.lr_patience = 3;
  o.stop_metric = nmt::StopMetric::kLoss;
  o.valid_max_sentences = 100;
  o.valid_batch_sentences = 32;
  o.valid_bleu_tokenize = nmt::BleuTokenizer::kNone;
  o.valid_bleu_lowercase = true;
  o.lr_decay = 0.7;
  o.min_lr = 1e-4;
  const std::vector<std::string> all = {"--early-stopping",        "--lr-patience",          "--stop-metric",
                                        "--valid-max-sentences",   "--valid-batch-sentences", "--valid-bleu-tokenize",
                                        "--valid-bleu-lowercase",  "--lr-decay",              "--min-lr"};
  EXPECT_EQ(o.unused_without_validation(), all);
  o.lr_decay_start = 11;  // the rate decays at epoch ends too: --lr-decay and --min-lr act
  EXPECT_EQ(o.unused_without_validation(), std::vector<std::string>(all.begin(), all.end() - 2));
  for (auto* path : {&o.valid_src, &o.valid_tsv}) {
    *path = "val.txt";
    EXPECT_TRUE(o.unused_without_validation().empty());
    path->clear();
  }
}

// --attn-dim sizes the additive and concat scores' layers; dot, general and
// no attention have none. Configs set it for their additive attention, so a
// run with another attention is warned, not refused, and trains.
TEST(OptionsNoopTest, AnAttentionSizeWithoutItsLayerIsNamed) {
  for (auto attention : {nmt::AttentionType::kAdditive, nmt::AttentionType::kConcat, nmt::AttentionType::kDot,
                         nmt::AttentionType::kGeneral, nmt::AttentionType::kNone}) {
    nmt::ModelOptions m;
    m.attention = attention;
    EXPECT_TRUE(m.unused().empty()) << nmt::to_string(attention);  // the default size, as config.toml lists it
    m.attn_dim = 64;
    const bool layer = attention == nmt::AttentionType::kAdditive || attention == nmt::AttentionType::kConcat;
    EXPECT_EQ(m.unused(), layer ? std::vector<std::string>{} : std::vector<std::string>{"--attn-dim"})
        << nmt::to_string(attention);
  }
  // The trainer says so in one warning, and trains.
  nmt::test::Quiet quiet;
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  const std::string dir = nmt::test::temp_dir("noop_attn");
  const auto f = nmt::test::write_toy_corpus(dir, 16, 4);
  auto o = nmt::test::base_options(f, dir + "/run");
  o.max_steps = 1;
  auto arch = nmt::test::tiny_arch(0.0);
  arch.attention = nmt::AttentionType::kGeneral;
  arch.attn_dim = 24;
  EXPECT_NO_THROW(nmt::train(o, nmt::test::toy_tok(), arch));
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_TRUE(contains(log.str(), "--attn-dim sizes a layer that --attention general does not have: ignored"))
      << log.str();
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/last.ckpt"));
}

}  // namespace
