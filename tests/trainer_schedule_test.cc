// Training runs on the toy corpus beyond the basics (trainer_test.cc):
// guided alignment, the schedule (validations at epoch ends, plateaus,
// decay, early stopping, a time budget), --average, and subword
// regularization.
#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/utf8.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "test_util.h"
#include "trainer_util.h"
#include "tools/align.h"

namespace {

namespace fs = std::filesystem;
using nmt::test::base_options;
using nmt::test::expect_same_weights;
using nmt::test::Quiet;
using nmt::test::read_all_lines;
using nmt::test::tiny_arch;
using nmt::test::toy_tok;

// The toy target reverses the source words: word i links to word n-1-i.
std::vector<std::string> reversed_links(const std::vector<std::string>& src) {
  std::vector<std::string> out;
  for (const auto& s : src) {
    const int n = static_cast<int>(nmt::split_ws(s).size());
    std::string g;
    for (int i = 0; i < n; ++i) g += (i ? " " : "") + std::to_string(i) + "-" + std::to_string(n - 1 - i);
    out.push_back(g);
  }
  return out;
}

TEST(TrainerTest, GuidedAlignmentPullsAttentionTowardsTheGuide) {
  Quiet quiet;
  const auto dir = nmt::test::temp_dir("guided");
  const auto f = nmt::test::write_toy_corpus(dir, 200, 20);
  nmt::test::write_lines(dir + "/train.align", reversed_links(read_all_lines(f.train_src)));
  nmt::test::write_lines(dir + "/valid.align", reversed_links(read_all_lines(f.valid_src)));
  // Same seed and steps, with and without the guide; AER of forced attention on the validation pairs.
  // With an alignment head, the guide trains the head and forced alignment reads it.
  auto aer = [&](const std::string& name, const std::string& guide, int64_t head = 0) {
    auto o = base_options(f, dir + "/" + name);
    o.max_steps = 60;
    o.valid_every = 0;
    o.keep_checkpoints = 0;
    o.guided_alignment = guide;
    if (!guide.empty()) o.guided_alignment_weight = 1.0;  // the weight of a guide (none: refused)
    auto arch = tiny_arch(0.0);
    arch.alignment_head = head;
    nmt::train(o, toy_tok(), arch);
    nmt::AlignRunOptions a;
    a.model_path = o.output_dir + "/last.ckpt";
    a.src = f.valid_src;
    a.tgt = f.valid_tgt;
    a.format = nmt::AlignFormat::kPharaoh;
    a.output = o.output_dir + "/valid.links";
    a.eval_gold = dir + "/valid.align";
    a.runtime.threads = 1;
    return nmt::run_alignment(a).aer();
  };
  const double plain = aer("plain", ""), guided = aer("guided", dir + "/train.align");
  const double head = aer("head", dir + "/train.align", 16);
  std::printf("AER after 60 steps: %.3f without the guide, %.3f with it, %.3f with an alignment head\n", plain,
              guided, head);
  EXPECT_LT(guided, plain - 0.2);
  EXPECT_LT(head, plain - 0.2);
  // The head learns only from the guide: without one, training refuses it.
  {
    auto o = base_options(f, dir + "/headless");
    auto arch = tiny_arch(0.0);
    arch.alignment_head = 16;
    EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::train(o, toy_tok(), arch); }),
                                    "--alignment-head is trained only by guided alignment"));
  }

  // A link outside its sentence, or a guide of the wrong length, is a located error.
  auto lines = read_all_lines(dir + "/train.align");
  lines[1] = "0-0 40-1";
  nmt::test::write_lines(dir + "/bad.align", lines);
  auto o = base_options(f, dir + "/bad");
  o.guided_alignment = dir + "/bad.align";
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::train(o, toy_tok(), tiny_arch(0.0)); }),
                                  "bad.align:2: link 40-1 is outside"));
  lines.pop_back();
  nmt::test::write_lines(dir + "/short.align", lines);
  o.guided_alignment = dir + "/short.align";
  o.output_dir = dir + "/short";
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::train(o, toy_tok(), tiny_arch(0.0)); }),
                                  "199 lines for 200 training pairs"));
}

}  // namespace

namespace {

// (step, learning rate) of every validation line of metrics.jsonl.
std::vector<std::pair<int, double>> validation_rates(const std::string& run) {
  const std::regex re(R"(^\{"type":"valid","step":(\d+),.*"lr":([0-9.eE+-]+),.*\}$)");
  std::vector<std::pair<int, double>> out;
  for (const auto& line : read_all_lines(run + "/metrics.jsonl")) {
    std::smatch m;
    if (std::regex_match(line, m, re)) out.emplace_back(std::stoi(m[1]), std::stod(m[2]));
  }
  return out;
}

TEST(TrainerTest, EndOfEpochValidationsCarryTheirOwnEpoch) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_epochs");
  const auto files = nmt::test::write_toy_corpus(dir, 60, 10);
  auto opt = base_options(files, dir + "/run");
  opt.max_epochs = 3;
  opt.valid_every = 0;  // epoch ends only
  nmt::train(opt, toy_tok(), tiny_arch(0.0));
  const std::regex re(R"(^\{"type":"valid","step":\d+,"epoch":(\d+),.*\}$)");
  std::vector<int> epochs;
  for (const auto& line : read_all_lines(opt.output_dir + "/metrics.jsonl")) {
    std::smatch m;
    if (std::regex_match(line, m, re)) epochs.push_back(std::stoi(m[1]));
  }
  EXPECT_EQ(epochs, (std::vector<int>{1, 2, 3}));
}

TEST(TrainerTest, PlateausDecayTheLearningRateAndEarlyStoppingEndsTheRun) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_plateau");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 20);
  // A learning rate far below float resolution leaves the weights (and so
  // the validation loss) exactly unchanged: every validation after the
  // first is a plateau.
  auto opt = base_options(files, dir + "/run");
  opt.batch_tokens = 40;  // many batches per epoch: no epoch-end validation before step 20
  opt.learning_rate = 1e-12;
  opt.min_lr = 1e-14;
  opt.lr_decay = 0.5;
  opt.lr_patience = 2;
  opt.early_stopping = 3;
  opt.valid_every = 5;
  opt.keep_checkpoints = 0;
  const auto r = nmt::train(opt, toy_tok(), tiny_arch(0.0));
  EXPECT_STREQ(nmt::to_string(r.stop_reason), "early_stopping");
  EXPECT_EQ(r.steps, 20);  // validations at 5 (best), 10, 15, 20: three without improvement
  const auto rates = validation_rates(opt.output_dir);
  ASSERT_EQ(rates.size(), 4u);
  // Two plateaus in a row decay the rate (at step 15); the count starts again after a decay.
  const std::vector<double> want = {1e-12, 1e-12, 5e-13, 5e-13};
  for (size_t i = 0; i < rates.size(); ++i) {
    EXPECT_EQ(rates[i].first, 5 * static_cast<int>(i + 1));
    EXPECT_NEAR(rates[i].second, want[i], 1e-18) << "validation " << i;
  }
  // The rate never goes below --min-lr.
  auto floor = base_options(files, dir + "/floor");
  floor.batch_tokens = 40;
  floor.learning_rate = 1e-12;
  floor.min_lr = 7e-13;
  floor.lr_patience = 1;
  floor.early_stopping = 3;
  floor.valid_every = 5;
  floor.keep_checkpoints = 0;
  nmt::train(floor, toy_tok(), tiny_arch(0.0));
  const auto floored = validation_rates(floor.output_dir);
  ASSERT_EQ(floored.size(), 4u);
  EXPECT_NEAR(floored[1].second, 7e-13, 1e-18);
  EXPECT_NEAR(floored[3].second, 7e-13, 1e-18);
}

TEST(TrainerTest, EpochDecayHalvesTheRateFromItsEpochOn) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_epoch_decay");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 10);
  auto opt = base_options(files, dir + "/run");
  opt.batch_tokens = 100000;  // one batch per epoch: a validation at each epoch end only
  opt.valid_every = 0;
  opt.max_epochs = 4;
  opt.lr_decay = 0.5;
  opt.lr_decay_start = 2;  // epochs 1 and 2 at 1e-2, the decay at the end of 2 and 3
  opt.keep_checkpoints = 0;
  nmt::train(opt, toy_tok(), tiny_arch(0.0));
  const auto rates = validation_rates(opt.output_dir);
  ASSERT_EQ(rates.size(), 4u);
  const std::vector<double> want = {1e-2, 5e-3, 2.5e-3, 1.25e-3};  // the rate after each epoch's end
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_NEAR(rates[i].second, want[i], 1e-12) << "epoch " << i + 1;
}

TEST(TrainerTest, ResumeKeepsTheDecayedRateUnlessTheOptionsChangeIt) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_resume_rate");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 10);
  auto opt = base_options(files, dir + "/run");
  opt.batch_tokens = 100000;  // one batch per epoch: a validation at each epoch end only
  opt.valid_every = 0;
  opt.lr_decay = 0.5;
  opt.lr_decay_start = 1;  // halved at every epoch end
  opt.keep_checkpoints = 0;
  opt.given.insert("learning-rate");  // as a config file or the command line gives it
  const auto start = opt.learning_rate;
  // Each start runs one more epoch; the rates are those after each epoch's end.
  const auto run_to = [&](int64_t epochs, double rate) {
    opt.max_epochs = epochs;
    opt.resume = epochs > 1;
    opt.learning_rate = rate;
    nmt::train(opt, toy_tok(), tiny_arch(0.0));
  };
  run_to(1, start);
  run_to(2, start);      // the rate the run started at: the checkpoint's decayed rate goes on
  run_to(3, start * 0.3);  // another rate: it replaces the checkpoint's start / 4
  run_to(4, start * 0.3);  // config.toml now records it: the decayed rate goes on again
  const auto rates = validation_rates(opt.output_dir);
  ASSERT_EQ(rates.size(), 4u);
  const std::vector<double> want = {start / 2, start / 4, start * 0.15, start * 0.075};
  // metrics.jsonl holds 6 significant digits.
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_NEAR(rates[i].second, want[i], 1e-6 * want[i]) << "epoch " << i + 1;
}

TEST(TrainerTest, MaxMinutesStopsAndSavesTheRun) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_minutes");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 20);
  auto opt = base_options(files, dir + "/run");
  opt.max_minutes = 0.002;  // 120 ms
  opt.keep_checkpoints = 0;
  const auto r = nmt::train(opt, toy_tok(), tiny_arch(0.0));
  EXPECT_STREQ(nmt::to_string(r.stop_reason), "max_minutes");
  ASSERT_TRUE(fs::exists(opt.output_dir + "/last.ckpt"));
  torch::optim::Adam probe(nmt::load_checkpoint(opt.output_dir + "/last.ckpt", torch::kCPU).model->parameters());
  EXPECT_EQ(nmt::load_train_state(opt.output_dir + "/last.ckpt", probe, torch::kCPU).step, r.steps);
}

}  // namespace

namespace {

TEST(TrainerTest, AverageWritesTheMeanOfTheNewestStepCheckpoints) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_average");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  auto opt = base_options(files, dir + "/run");
  opt.max_steps = 30;
  opt.valid_every = 10;
  opt.keep_checkpoints = 2;
  opt.average = 2;
  const auto r = nmt::train(opt, toy_tok(), tiny_arch(0.0));
  ASSERT_TRUE(fs::exists(opt.output_dir + "/average.ckpt"));
  // average.ckpt is the mean of the two newest step checkpoints.
  auto avg = nmt::load_checkpoint(opt.output_dir + "/average.ckpt", torch::kCPU);
  // Validation also runs at epoch ends, so the step numbers are read from the folder.
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const auto& e : fs::directory_iterator(opt.output_dir)) {
    const auto name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) steps.emplace_back(std::stoll(name.substr(5)), e.path().string());
  }
  std::sort(steps.begin(), steps.end());
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(steps.back().first, 30);
  auto a = nmt::load_checkpoint(steps[0].second, torch::kCPU);
  auto b = nmt::load_checkpoint(steps[1].second, torch::kCPU);
  ASSERT_FALSE(torch::equal(a.model->named_parameters()["decoder.deep.weight"],
                            b.model->named_parameters()["decoder.deep.weight"]));
  auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  // Each side rounds the mean at most twice (here the sum, there the result in float).
  for (const auto& p : avg.model->named_parameters()) {
    const auto mean = (pa[p.key()] + pb[p.key()]) / 2;
    EXPECT_TRUE(nmt::test::within(p.value(), mean, 2 * nmt::test::gamma(2, 0x1p-24) * mean.abs())) << p.key();
  }
  EXPECT_GT(r.average_metric, 0);
  bool logged = false;
  for (const auto& line : read_all_lines(opt.output_dir + "/metrics.jsonl"))
    logged = logged || line.rfind("{\"type\":\"average\",\"step\":30,\"checkpoints\":2,", 0) == 0;
  EXPECT_TRUE(logged);
  // --average needs that many step checkpoints kept.
  opt.keep_checkpoints = 1;
  EXPECT_THROW(opt.validate(), nmt::Error);
}

TEST(TrainerTest, SubwordRegularizationIsSeededAndResumesExactly) {
  Quiet q;
  nmt::set_threads(1);
  const auto dir = nmt::test::temp_dir("train_spm_alpha");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  const auto arch = tiny_arch(0.0);
  auto a = base_options(files, dir + "/A");
  a.spm_alpha = 0.1;
  a.max_steps = 30;  // more than one epoch of 200 pairs
  a.valid_every = 0;
  ASSERT_EQ(nmt::train(a, toy_tok(), arch).steps, 30);
  auto b = a;  // the same run in two halves
  b.output_dir = dir + "/B";
  b.max_steps = 15;
  ASSERT_EQ(nmt::train(b, toy_tok(), arch).steps, 15);
  b.max_steps = 30;
  b.resume = true;
  ASSERT_EQ(nmt::train(b, toy_tok(), arch).steps, 30);
  auto c = a;  // without sampling
  c.output_dir = dir + "/C";
  c.spm_alpha = 0;
  ASSERT_EQ(nmt::train(c, toy_tok(), arch).steps, 30);
  auto ma = nmt::load_checkpoint(a.output_dir + "/last.ckpt", torch::kCPU);
  auto mb = nmt::load_checkpoint(b.output_dir + "/last.ckpt", torch::kCPU);
  auto mc = nmt::load_checkpoint(c.output_dir + "/last.ckpt", torch::kCPU);
  expect_same_weights(ma.model, mb.model, "spm_alpha resumed");
  bool differs = false;
  auto pc = mc.model->named_parameters();
  for (const auto& p : ma.model->named_parameters()) differs |= !torch::equal(p.value(), pc[p.key()]);
  EXPECT_TRUE(differs) << "sampling segmentations changed nothing";
  // Not with guided alignment, whose links are per piece.
  a.guided_alignment = files.train_src;
  EXPECT_THROW(a.validate(), nmt::Error);
}

}  // namespace

