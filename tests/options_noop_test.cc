// Options that could not take effect where they were given are refused with
// a line naming them, not accepted and ignored: a shortlist's shape without
// the shortlist, scores appended to n-best lines that carry them already,
// heatmaps of an aligner that has no attention, per-pair files of a format
// that writes one output, and an output file that --output-dir leaves
// unwritten; weights of an ensemble of one; nmt-train's options that tune
// another that is off. Each case
// is also accepted once the option can take effect.
#include <gtest/gtest.h>

#include <filesystem>
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
      {"--kd-weight takes effect only with --kd-teachers", [](nmt::TrainOptions* o) { o->kd_weight = 0.7; },
       [](nmt::TrainOptions* o) { o->kd_teachers = {"teacher.ckpt"}; }},
      {"--guided-alignment-weight takes effect only with --guided-alignment",
       [](nmt::TrainOptions* o) { o->guided_alignment_weight = 3; },
       [](nmt::TrainOptions* o) { o->guided_alignment = "train.align"; }},
      {"--spm-nbest takes effect only with --spm-alpha above 0", [](nmt::TrainOptions* o) { o->spm_nbest = 8; },
       [](nmt::TrainOptions* o) { o->spm_alpha = 0.1; }},
      {"--adam-beta1 takes effect only with --optimizer adam",
       [](nmt::TrainOptions* o) {
         o->optimizer = nmt::OptimizerType::kSgd;
         o->adam_beta1 = 0.8;
       },
       [](nmt::TrainOptions* o) { o->optimizer = nmt::OptimizerType::kAdam; }},
      {"--adam-beta2 takes effect only with --optimizer adam",
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
  o.stop_metric = nmt::StopMetric::kLoss;
  o.valid_bleu_lowercase = true;
  EXPECT_EQ(o.unused_without_validation(),
            (std::vector<std::string>{"--early-stopping", "--stop-metric", "--valid-bleu-lowercase"}));
  for (auto* path : {&o.valid_src, &o.valid_tsv}) {
    *path = "val.txt";
    EXPECT_TRUE(o.unused_without_validation().empty());
    path->clear();
  }
}

// --attn-dim sizes the additive and concat scores' layers; dot and general
// attention have none, and training refuses the size before any work.
TEST(OptionsNoopTest, AnAttentionSizeWithoutItsLayerIsRefused) {
  nmt::test::Quiet quiet;
  const std::string dir = nmt::test::temp_dir("noop_attn");
  const auto f = nmt::test::write_toy_corpus(dir, 16, 4);
  auto o = nmt::test::base_options(f, dir + "/run");
  o.max_steps = 1;
  auto arch = nmt::test::tiny_arch(0.0);
  arch.attention = nmt::AttentionType::kGeneral;
  arch.attn_dim = 24;
  EXPECT_TRUE(contains(error_of([&] { nmt::train(o, nmt::test::toy_tok(), arch); }),
                       "--attn-dim sizes additive and concat attention only, and --attention is general"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run"));  // refused before any work
  arch.attn_dim = nmt::ModelOptions{}.attn_dim;  // the default, as config.toml lists it
  EXPECT_NO_THROW(nmt::train(o, nmt::test::toy_tok(), arch));
}

}  // namespace
