// End-to-end training on the toy corpus: the loss falls and the run's files
// appear; resuming is exact; a used folder is refused; a stop flag
// interrupts cleanly.
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
#include "tools/align.h"

namespace {

namespace fs = std::filesystem;

struct Quiet {
  Quiet() { spdlog::set_level(spdlog::level::warn); }
  ~Quiet() { spdlog::set_level(spdlog::level::info); }
};

nmt::TrainOptions base_options(const nmt::test::ToyFiles& f, const std::string& out) {
  nmt::TrainOptions o;
  o.train_src = f.train_src;
  o.train_tgt = f.train_tgt;
  o.valid_src = f.valid_src;
  o.valid_tgt = f.valid_tgt;
  o.output_dir = out;
  o.batch_tokens = 300;
  o.learning_rate = 1e-2;
  o.max_epochs = 1000;
  o.early_stopping = 0;
  o.lr_patience = 1000;
  o.stop_metric = nmt::StopMetric::kLoss;
  o.log_every = 0;
  o.runtime.device = "cpu";
  o.runtime.threads = 1;
  o.seed = 3;
  return o;
}

nmt::ModelOptions tiny_arch(double dropout) {
  auto m = nmt::test::tiny_model();
  m.dropout = dropout;
  return m;
}

// The pre-trained toy tokenizer, so runs need not train SentencePiece.
nmt::TokenizerOptions toy_tok() {
  nmt::TokenizerOptions t;
  t.src_model = t.tgt_model = nmt::test::toy_tokenizer_file();
  return t;
}

std::vector<std::string> read_all_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

void expect_same_weights(nmt::Seq2Seq& a, nmt::Seq2Seq& b, const std::string& what) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  int differ = 0;
  for (const auto& p : pa) {
    ASSERT_TRUE(pb.contains(p.key())) << p.key();
    if (!torch::equal(p.value(), pb[p.key()])) {
      ++differ;
      ADD_FAILURE() << what << ": parameter " << p.key() << " differs (max abs diff "
                    << (p.value() - pb[p.key()]).abs().max().item<double>() << ")";
    }
  }
  EXPECT_EQ(differ, 0);
}

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

// Run A trains N steps straight; run B trains N/2, then resumes to N. Both
// must end with bit-identical weights: data order, optimizer moments,
// learning rate and the dropout RNG all have to be restored.
// With `parts` > 1 both train on that many threads, each batch as parts
// (--batch-parts), whose dropout masks come from per-step generators.
void check_exact_resume(int64_t n, int64_t valid_every, bool check_rng_control, int parts = 1) {
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
  const auto ra = nmt::train(a, toy_tok(), arch);
  ASSERT_EQ(ra.steps, n);

  auto b = base_options(files, dir + "/B");
  b.max_steps = n / 2;
  b.valid_every = valid_every;
  b.runtime.threads = parts;
  b.batch_parts = parts;
  b.fixed_threads = true;
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

  // Sanity: the runs did train (weights differ from the half-way checkpoint).
  torch::optim::Adam adam_a(ma.model->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam adam_b(mb.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto sa = nmt::load_train_state(a.output_dir + "/last.ckpt", adam_a, torch::kCPU);
  const auto sb = nmt::load_train_state(b.output_dir + "/last.ckpt", adam_b, torch::kCPU);
  EXPECT_EQ(sa.step, n);
  EXPECT_EQ(sb.step, n);
  EXPECT_EQ(sa.epoch, sb.epoch);
  EXPECT_EQ(sa.batch_in_epoch, sb.batch_in_epoch);
  EXPECT_DOUBLE_EQ(sa.learning_rate, sb.learning_rate);
  ASSERT_TRUE(sa.rng_state.defined() && sb.rng_state.defined());
  EXPECT_TRUE(torch::equal(sa.rng_state, sb.rng_state)) << "dropout RNG state differs";
}

TEST(TrainerTest, ResumeIsExactWhenValidationDividesTheSplit) {
  nmt::set_threads(1);
  check_exact_resume(40, 10, /*check_rng_control=*/true);
}

TEST(TrainerTest, ResumeIsExactWhenValidationIsRare) {
  nmt::set_threads(1);
  check_exact_resume(40, 1000, /*check_rng_control=*/false);
}

TEST(TrainerTest, ResumeIsExactWithBatchParts) {
  check_exact_resume(20, 10, /*check_rng_control=*/false, /*parts=*/2);
  nmt::set_threads(1);
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
    o.guided_alignment_weight = 1.0;
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
