// End-to-end training on the toy corpus: the loss falls and the run's files
// appear; resuming is exact; a used folder is refused; a stop flag
// interrupts cleanly; --r-drop makes two dropout runs agree. Guided
// alignment, the schedule, --average and subword regularization:
// trainer_schedule_test.cc.
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
#include "model/batch.h"
#include "model/device.h"
#include "model/layers.h"
#include "test_util.h"
#include "trainer_util.h"
#include "tools/align.h"
#include "train/losses.h"

namespace {

namespace fs = std::filesystem;
using nmt::test::base_options;
using nmt::test::expect_same_weights;
using nmt::test::Quiet;
using nmt::test::read_all_lines;
using nmt::test::tiny_arch;
using nmt::test::toy_tok;

TEST(TrainerTest, TrainingLowersValidationLossAndWritesRunFiles) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_basic");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 40);
  auto opt = base_options(files, dir + "/run");
  opt.max_steps = 200;
  opt.valid_every = 20;
  opt.keep_checkpoints = 2;
  nmt::TokenizerOptions tok;  // trains SentencePiece on the corpus
  tok.vocab_size = 60;
  const auto r = nmt::train(opt, tok, tiny_arch(0.1));
  EXPECT_STREQ(nmt::to_string(r.stop_reason), "max_steps");
  EXPECT_EQ(r.steps, 200);
  EXPECT_GT(r.tokens_per_second, 0);

  for (const char* f : {"last.ckpt", "best.ckpt", "metrics.jsonl", "src.spm.model", "tgt.spm.model"})
    EXPECT_TRUE(fs::exists(opt.output_dir + "/" + f)) << f;
  // The effective options, in the form --config reads.
  std::string config;
  for (const auto& line : read_all_lines(opt.output_dir + "/config.toml")) config += line + "\n";
  EXPECT_NE(config.find("keep-checkpoints = 2\n"), std::string::npos) << config;
  EXPECT_NE(config.find("vocab-size = 60\n"), std::string::npos) << config;
  std::set<std::string> step_files;
  for (const auto& e : fs::directory_iterator(opt.output_dir)) {
    const auto name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) step_files.insert(name);
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "temporary file left: " << name;
  }

  // Tokenizers written next to the checkpoints are the ones inside them.
  auto last = nmt::load_checkpoint(opt.output_dir + "/last.ckpt", torch::kCPU);
  EXPECT_EQ(last.src_tok.bytes(), nmt::test::read_bytes(opt.output_dir + "/src.spm.model"));
  EXPECT_EQ(last.tgt_tok.bytes(), nmt::test::read_bytes(opt.output_dir + "/tgt.spm.model"));
  EXPECT_EQ(last.options.emb_dim, 16);

  // metrics.jsonl: one JSON object per line, validation lines with the loss.
  const std::regex valid_re(R"(^\{"type":"valid","step":(\d+),.*"valid_nll":([0-9.eE+-]+),.*\}$)");
  std::vector<std::pair<int, double>> losses;
  for (const auto& line : read_all_lines(opt.output_dir + "/metrics.jsonl")) {
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    std::smatch m;
    if (std::regex_match(line, m, valid_re)) losses.emplace_back(std::stoi(m[1]), std::stod(m[2]));
  }
  // Validation every 20 steps and at every epoch end.
  ASSERT_GE(losses.size(), 10u);
  EXPECT_EQ(losses.back().first, 200);
  std::set<int> valid_steps;
  for (const auto& l : losses) valid_steps.insert(l.first);
  for (int s = 20; s <= 200; s += 20) EXPECT_TRUE(valid_steps.count(s)) << "no validation at step " << s;
  EXPECT_EQ(valid_steps.size(), losses.size()) << "a step validated twice";
  // step-N.ckpt: the newest keep_checkpoints validations.
  std::set<std::string> want;
  for (size_t i = losses.size() - 2; i < losses.size(); ++i)
    want.insert("step-" + std::to_string(losses[i].first) + ".ckpt");
  EXPECT_EQ(step_files, want);

  const double first = losses.front().second, final_loss = losses.back().second;
  EXPECT_LE(losses.front().first, 20);
  EXPECT_LT(final_loss, 0.5 * first) << "validation loss " << first << " -> " << final_loss;

  // best.ckpt holds the lowest validation loss: its training state says so.
  double best = 1e9;
  for (const auto& l : losses) best = std::min(best, l.second);
  auto best_model = nmt::load_checkpoint(opt.output_dir + "/best.ckpt", torch::kCPU);
  torch::optim::Adam adam(best_model.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto st = nmt::load_train_state(opt.output_dir + "/best.ckpt", adam, torch::kCPU);
  EXPECT_NEAR(-st.best_metric, best, 1e-4 * best);
  EXPECT_NEAR(r.best_metric, best, 1e-4 * best);
}

// The training states of runs A and B (last.ckpt each) after `n` steps:
// equal in position, rate, dropout generator and, where `stepped` > 0
// parameters were smoothed, stepped weights.
void expect_same_train_state(const std::string& a_path, const std::string& b_path, int64_t n, size_t stepped) {
  auto ma = nmt::load_checkpoint(a_path, torch::kCPU);
  auto mb = nmt::load_checkpoint(b_path, torch::kCPU);
  torch::optim::Adam adam_a(ma.model->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam adam_b(mb.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto sa = nmt::load_train_state(a_path, adam_a, torch::kCPU);
  const auto sb = nmt::load_train_state(b_path, adam_b, torch::kCPU);
  EXPECT_EQ(sa.step, n);
  EXPECT_EQ(sb.step, n);
  EXPECT_EQ(sa.epoch, sb.epoch);
  EXPECT_EQ(sa.batch_in_epoch, sb.batch_in_epoch);
  EXPECT_DOUBLE_EQ(sa.learning_rate, sb.learning_rate);
  ASSERT_TRUE(sa.rng_state.defined() && sb.rng_state.defined());
  EXPECT_TRUE(torch::equal(sa.rng_state, sb.rng_state)) << "dropout RNG state differs";
  ASSERT_EQ(sa.stepped_weights.size(), stepped);
  ASSERT_EQ(sb.stepped_weights.size(), sa.stepped_weights.size());
  for (size_t i = 0; i < sa.stepped_weights.size(); ++i)
    EXPECT_TRUE(torch::equal(sa.stepped_weights[i].second, sb.stepped_weights[i].second)) << sa.stepped_weights[i].first;
}

// Run A trains N steps straight; run B trains N/2, then resumes to N. Both
// must end with bit-identical weights: data order, optimizer moments,
// learning rate and the dropout RNG all have to be restored.
// With `parts` > 1 both train on that many threads, each batch as parts
// (--batch-parts), whose dropout masks come from per-step generators.
// With `smoothing` > 0 (--exponential-smoothing) the checkpoints' models are
// moving averages, and both the averages and the stepped weights must match.
void check_exact_resume(int64_t n, int64_t valid_every, bool check_rng_control, int parts = 1,
                        double smoothing = 0) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_resume");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 40);
  const auto arch = tiny_arch(0.2);  // dropout: the RNG state matters

  auto a = base_options(files, dir + "/A");
  a.max_steps = n;
  a.valid_every = valid_every;
  a.runtime.threads = parts;
  a.batch_parts = parts;
  a.fixed_threads = true;
  a.exponential_smoothing = smoothing;
  const auto ra = nmt::train(a, toy_tok(), arch);
  ASSERT_EQ(ra.steps, n);

  auto b = base_options(files, dir + "/B");
  b.max_steps = n / 2;
  b.valid_every = valid_every;
  b.runtime.threads = parts;
  b.batch_parts = parts;
  b.fixed_threads = true;
  b.exponential_smoothing = smoothing;
  const auto rb1 = nmt::train(b, toy_tok(), arch);
  ASSERT_EQ(rb1.steps, n / 2);
  // Control run C: B's half-way folder with the saved dropout RNG state
  // replaced. It must end elsewhere, or the dropout RNG would not matter and
  // the comparison below could not catch a resume that forgets it.
  auto c = b;
  c.output_dir = dir + "/C";
  if (check_rng_control) {
    fs::copy(b.output_dir, c.output_dir, fs::copy_options::recursive);
    const auto last = c.output_dir + "/last.ckpt";
    auto m = nmt::load_checkpoint(last, torch::kCPU);
    torch::optim::Adam adam(m.model->parameters(), torch::optim::AdamOptions(c.learning_rate));
    auto st = nmt::load_train_state(last, adam, torch::kCPU);
    torch::manual_seed(12345);
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      st.rng_state = gen.get_state();
    }
    nmt::save_checkpoint(last, m.model, m.src_tok, m.tgt_tok, &adam, &st);
  }

  b.max_steps = n;
  b.resume = true;
  const auto rb2 = nmt::train(b, toy_tok(), arch);
  ASSERT_EQ(rb2.steps, n);
  EXPECT_STREQ(nmt::to_string(rb2.stop_reason), "max_steps");

  auto ma = nmt::load_checkpoint(a.output_dir + "/last.ckpt", torch::kCPU);
  auto mb = nmt::load_checkpoint(b.output_dir + "/last.ckpt", torch::kCPU);
  expect_same_weights(ma.model, mb.model, "valid_every " + std::to_string(valid_every));

  if (check_rng_control) {
    c.max_steps = n;
    c.resume = true;
    ASSERT_EQ(nmt::train(c, toy_tok(), arch).steps, n);
    auto mc = nmt::load_checkpoint(c.output_dir + "/last.ckpt", torch::kCPU);
    bool any_differs = false;
    auto pc = mc.model->named_parameters();
    for (const auto& p : ma.model->named_parameters()) any_differs |= !torch::equal(p.value(), pc[p.key()]);
    EXPECT_TRUE(any_differs) << "changing the dropout RNG state did not change training: the test has no teeth";
  }

  expect_same_train_state(a.output_dir + "/last.ckpt", b.output_dir + "/last.ckpt", n,
                          smoothing > 0 ? ma.model->named_parameters().size() : 0);
}

TEST(TrainerTest, ResumeIsExactWhenValidationDividesTheSplit) {
  nmt::set_threads(1);
  check_exact_resume(40, 10, /*check_rng_control=*/true);
}

TEST(TrainerTest, ResumeIsExactWhenValidationIsRare) {
  nmt::set_threads(1);
  check_exact_resume(40, 1000, /*check_rng_control=*/false);
}

TEST(TrainerTest, ResumeIsExactWithExponentialSmoothing) {
  nmt::set_threads(1);
  check_exact_resume(40, 10, /*check_rng_control=*/false, /*parts=*/1, /*smoothing=*/0.1);
}

TEST(TrainerTest, ResumeIsExactWithBatchParts) {
  check_exact_resume(20, 10, /*check_rng_control=*/false, /*parts=*/2);
  nmt::set_threads(1);
}

// The symmetric divergence between the output distributions of two dropout
// runs of `m` on the first 16 validation pairs of `f`, summed over 4 pairs
// of masks: what --r-drop trains down.
double dropout_disagreement(nmt::LoadedModel& m, const nmt::test::ToyFiles& f) {
  const auto b = nmt::test::valid_batch(m, f), two = nmt::twice(b);
  m.model->train();
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const nmt::DropoutRng rng(seed);
    const auto c = nmt::consistency_loss(m.model->forward(two.src, two.src_len, two.tgt_in), b.tgt_out, 0.0, 4.0);
    sum += (c.loss - c.cross_entropy).item<double>();  // alpha 4: the divergence itself
  }
  return sum;
}

// --r-drop: the same run (seed, data, dropout 0.3) with and without it. Its
// model's two dropout runs disagree by less than half as much.
TEST(TrainerTest, RDropTrainsTwoDropoutRunsToAgree) {
  Quiet q;
  nmt::set_threads(1);
  const auto dir = nmt::test::temp_dir("train_rdrop");
  const auto files = nmt::test::write_toy_corpus(dir, 400, 40);
  std::vector<double> disagreement;
  for (double r_drop : {0.0, 5.0}) {
    auto o = base_options(files, dir + "/r" + std::to_string(static_cast<int>(r_drop)));
    o.max_steps = 100;
    o.valid_every = 1000;
    o.r_drop = r_drop;
    ASSERT_EQ(nmt::train(o, toy_tok(), tiny_arch(0.3)).steps, 100);
    auto m = nmt::load_checkpoint(o.output_dir + "/last.ckpt", torch::kCPU);
    disagreement.push_back(dropout_disagreement(m, files));
  }
  EXPECT_LT(disagreement[1], 0.5 * disagreement[0]) << disagreement[0] << " -> " << disagreement[1];
}

TEST(TrainerTest, RefusesAFolderWithARun) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_used");
  const auto files = nmt::test::write_toy_corpus(dir, 50, 5);
  auto opt = base_options(files, dir + "/run");
  fs::create_directories(opt.output_dir);
  nmt::test::write_bytes(opt.output_dir + "/last.ckpt", "something");
  try {
    nmt::train(opt, toy_tok(), tiny_arch(0.0));
    FAIL() << "train() started a new run over an existing one";
  } catch (const nmt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(opt.output_dir), std::string::npos) << msg;
    EXPECT_NE(msg.find("resume"), std::string::npos) << msg;
  }
  EXPECT_EQ(nmt::test::read_bytes(opt.output_dir + "/last.ckpt"), "something");
}

TEST(TrainerTest, BadCorpusIsAnError) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_badcorpus");
  auto files = nmt::test::write_toy_corpus(dir, 20, 5);
  nmt::test::write_lines(files.train_tgt, {"a", "b"});
  auto opt = base_options(files, dir + "/run");
  try {
    nmt::train(opt, toy_tok(), tiny_arch(0.0));
    FAIL() << "mismatched corpus accepted";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(files.train_src + ":3:"), std::string::npos) << e.what();
  }
}

TEST(TrainerTest, StopFlagAlreadySetInterruptsAndWritesLastCheckpoint) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_stop0");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 10);
  auto opt = base_options(files, dir + "/run");
  opt.max_steps = 1000;
  std::atomic<bool> stop{true};
  const auto r = nmt::train(opt, toy_tok(), tiny_arch(0.0), &stop);
  EXPECT_STREQ(nmt::to_string(r.stop_reason), "interrupted");
  EXPECT_EQ(r.steps, 0);
  // trainer.h: "When `stop` becomes true, training writes last.ckpt and returns."
  EXPECT_TRUE(fs::exists(opt.output_dir + "/last.ckpt"))
      << "an interrupted run must leave last.ckpt, even before its first step";
  // And best.ckpt, which the next command (nmt-translate -m RUN/best.ckpt) needs: unvalidated.
  EXPECT_TRUE(fs::exists(opt.output_dir + "/best.ckpt"));
}

TEST(TrainerTest, StopFlagSetDuringTrainingInterruptsAndSaves) {
  Quiet q;
  const auto dir = nmt::test::temp_dir("train_stop");
  const auto files = nmt::test::write_toy_corpus(dir, 100, 10);
  auto opt = base_options(files, dir + "/run");
  opt.max_steps = 100000;  // neither budget ends the run before the flag does
  opt.max_epochs = 100000;
  opt.valid_every = 0;
  opt.log_every = 1;  // a metrics line per step tells the watcher training runs
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  const std::string metrics = opt.output_dir + "/metrics.jsonl";
  std::thread watcher([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      std::error_code ec;
      if (fs::exists(metrics, ec) && fs::file_size(metrics, ec) > 0 && !ec) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    stop = true;
  });
  nmt::TrainResult r;
  try {
    r = nmt::train(opt, toy_tok(), tiny_arch(0.0), &stop);
  } catch (...) {
    done = true;
    watcher.join();
    throw;
  }
  done = true;
  watcher.join();
  EXPECT_STREQ(nmt::to_string(r.stop_reason), "interrupted");
  EXPECT_GE(r.steps, 1);
  EXPECT_LT(r.steps, opt.max_steps);
  const auto last = opt.output_dir + "/last.ckpt";
  ASSERT_TRUE(fs::exists(last));
  auto loaded = nmt::load_checkpoint(last, torch::kCPU);
  torch::optim::Adam adam(loaded.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto st = nmt::load_train_state(last, adam, torch::kCPU);
  EXPECT_EQ(st.step, r.steps) << "last.ckpt must hold the interrupted step";
}

}  // namespace
