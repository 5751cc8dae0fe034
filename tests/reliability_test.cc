// Interruptions and numerical trouble: SIGINT/SIGTERM make nmt-train save
// and exit 0, SIGKILL never damages the previous checkpoints, a resumed run
// equals an uninterrupted one, NaN/Inf batches are skipped (and too many in
// a row stop training without touching last.ckpt), and resuming with model
// options that contradict the checkpoint is refused. The signal tests run
// the real executable on the bundled demo corpus.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "base/error.h"
#include "model/checkpoint.h"
#include "test_util.h"
#include "train/trainer.h"

extern char** environ;

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kSourceDir = NMT_SOURCE_DIR;

// A tiny, fast nmt-train run on the demo corpus that logs and checkpoints often.
std::vector<std::string> demo_train_args(const std::string& out, int64_t max_steps) {
  return {nmt::test::bin("nmt-train"), "--train-src", kSourceDir + "/data/demo/train.src", "--train-tgt",
          kSourceDir + "/data/demo/train.tgt", "--valid-src", kSourceDir + "/data/demo/valid.src", "--valid-tgt",
          kSourceDir + "/data/demo/valid.tgt", "--valid-max-sentences", "20", "-o", out, "--vocab-size", "300",
          "--emb-dim", "16", "--enc-hidden", "16", "--dec-hidden", "32", "--attn-dim", "16", "--batch-tokens", "300",
          "--log-every", "1", "--valid-every", "7", "--max-steps", std::to_string(max_steps), "--threads", "1",
          "--early-stopping", "0", "--dropout", "0.1"};
}

using nmt::test::Child;
using nmt::test::spawn;
using nmt::test::wait_exit;
using nmt::test::wait_for_log;
std::string read_all(const std::string& path) { return nmt::test::read_bytes(path); }

int run_to_end(const std::vector<std::string>& args, const std::string& log) {
  return wait_exit(spawn(args, log), 300);
}

std::map<std::string, torch::Tensor> weights(const std::string& ckpt) {
  auto m = nmt::load_checkpoint(ckpt, torch::kCPU);
  std::map<std::string, torch::Tensor> w;
  for (const auto& p : m.model->named_parameters()) w[p.key()] = p.value().clone();
  return w;
}

void expect_equal_weights(const std::string& a, const std::string& b) {
  auto wa = weights(a), wb = weights(b);
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [k, v] : wa) EXPECT_TRUE(torch::equal(v, wb.at(k))) << k << " differs";
}

void check_signal_saves_and_resume_is_exact(int sig, const std::string& tag) {
  const auto dir = nmt::test::temp_dir(tag);
  const int64_t total = 60;
  // Interrupted run: signal once training has taken a few steps.
  auto c = spawn(demo_train_args(dir + "/b", total), dir + "/b.log");
  ASSERT_TRUE(wait_for_log(c, "| step 12/", 120)) << read_all(c.log);
  const auto t_signal = Clock::now();
  kill(c.pid, sig);
  const int code = wait_exit(c, 60);
  const double seconds = std::chrono::duration<double>(Clock::now() - t_signal).count();
  EXPECT_EQ(code, 0) << read_all(c.log);
  EXPECT_LT(seconds, 10.0) << "took too long to stop";
  EXPECT_NE(read_all(c.log).find("training finished (interrupted)"), std::string::npos) << read_all(c.log);
  ASSERT_TRUE(fs::exists(dir + "/b/last.ckpt"));
  torch::optim::Adam probe(nmt::load_checkpoint(dir + "/b/last.ckpt", torch::kCPU).model->parameters());
  const auto st = nmt::load_train_state(dir + "/b/last.ckpt", probe, torch::kCPU);
  EXPECT_GE(st.step, 12);
  EXPECT_LT(st.step, total);
  // Resume to the end, and compare with a run that was never interrupted.
  auto resume = demo_train_args(dir + "/b", total);
  resume.push_back("--resume");
  ASSERT_EQ(run_to_end(resume, dir + "/b2.log"), 0) << read_all(dir + "/b2.log");
  EXPECT_NE(read_all(dir + "/b2.log").find("resumed from"), std::string::npos);
  ASSERT_EQ(run_to_end(demo_train_args(dir + "/a", total), dir + "/a.log"), 0) << read_all(dir + "/a.log");
  expect_equal_weights(dir + "/a/last.ckpt", dir + "/b/last.ckpt");
}

TEST(ReliabilityTest, SigintSavesExitsZeroAndResumesExactly) {
  check_signal_saves_and_resume_is_exact(SIGINT, "sigint");
}

TEST(ReliabilityTest, SigtermSavesExitsZeroAndResumesExactly) {
  check_signal_saves_and_resume_is_exact(SIGTERM, "sigterm");
}

TEST(ReliabilityTest, SigkillMidWriteNeverDamagesTheCheckpoints) {
  const auto dir = nmt::test::temp_dir("sigkill");
  // Each round kills the run the moment a checkpoint's temporary file
  // appears, i.e. while a checkpoint is being written.
  int mid_write = 0;  // rounds whose kill left a temporary file behind
  for (int round = 0; round < 4; ++round) {
    auto args = demo_train_args(dir + "/run", 400);
    const bool resuming = fs::exists(dir + "/run/last.ckpt");
    if (resuming) args.push_back("--resume");
    auto c = spawn(args, dir + "/log" + std::to_string(round));
    auto writing_checkpoint = [&] {
      for (const auto& t : nmt::test::temporary_files(dir + "/run"))
        if (t.find(".ckpt.tmp.") != std::string::npos) return true;
      return false;
    };
    // After this run's first validation, with last.ckpt on disk (so every
    // round makes progress): the next checkpoint being written.
    ASSERT_TRUE(wait_for_log(c, "valid | step", 120)) << read_all(c.log);
    ASSERT_TRUE(nmt::test::wait_until([&] { return fs::exists(dir + "/run/last.ckpt") && writing_checkpoint(); }, 120))
        << read_all(c.log);
    kill(c.pid, SIGKILL);
    EXPECT_EQ(wait_exit(c, 30), 128 + SIGKILL);
    if (resuming) {
      EXPECT_NE(read_all(c.log).find("resumed from"), std::string::npos) << read_all(c.log);
    }
    mid_write += !nmt::test::temporary_files(dir + "/run").empty();
    for (const auto& e : fs::directory_iterator(dir + "/run")) {
      const auto name = e.path().filename().string();
      if (e.path().extension() == ".ckpt") {
        EXPECT_NO_THROW(nmt::load_checkpoint(e.path().string(), torch::kCPU)) << name << " after kill " << round;
      }
    }
  }
  std::printf("kills that left a checkpoint half-written: %d of 4\n", mid_write);
  EXPECT_GT(mid_write, 0) << "no kill landed while a checkpoint was being written";
  // The run still resumes and finishes, and sweeps what the kills left.
  ASSERT_TRUE(fs::exists(dir + "/run/last.ckpt"));
  torch::optim::Adam probe(nmt::load_checkpoint(dir + "/run/last.ckpt", torch::kCPU).model->parameters());
  const int64_t at = nmt::load_train_state(dir + "/run/last.ckpt", probe, torch::kCPU).step;
  auto fin = demo_train_args(dir + "/run", at + 5);
  fin.push_back("--resume");
  EXPECT_EQ(run_to_end(fin, dir + "/final.log"), 0) << read_all(dir + "/final.log");
  EXPECT_TRUE(nmt::test::temporary_files(dir + "/run").empty());
}

// `nmt-train ... 2>&1 | head -1`, or a log reader that dies: the run's
// stdout and stderr are a pipe whose reader has gone before the first line
// (SIGPIPE at its default action in the child, whatever this process has).
TEST(ReliabilityTest, AClosedLogPipeDoesNotEndTraining) {
  const auto dir = nmt::test::temp_dir("closed-pipe");
  const auto args = demo_train_args(dir + "/run", 20);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &pipe_signal);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[0]);  // the reader goes away before the run writes a line
  ::close(fds[1]);
  ASSERT_EQ(rc, 0);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The log went to train.log in full, and the run saved its last step.
  EXPECT_NE(read_all(dir + "/run/train.log").find("training finished (max_steps)"), std::string::npos)
      << read_all(dir + "/run/train.log");
  torch::optim::Adam probe(nmt::load_checkpoint(dir + "/run/last.ckpt", torch::kCPU).model->parameters());
  EXPECT_EQ(nmt::load_train_state(dir + "/run/last.ckpt", probe, torch::kCPU).step, 20);
}

// Trains a few steps into `out`, then rewrites last.ckpt with `poison`
// applied to the model weights (optimizer and training state kept).
void train_then_poison(const std::string& out, const std::function<void(nmt::Seq2Seq&)>& poison) {
  fs::create_directories(out + "_data");
  const auto files = nmt::test::write_toy_corpus(out + "_data", 200, 10);
  nmt::TrainOptions opt;
  opt.train_src = files.train_src;
  opt.train_tgt = files.train_tgt;
  opt.output_dir = out;
  opt.batch_tokens = 24;  // two or three sentences per batch
  opt.max_steps = 5;
  opt.valid_every = 0;
  opt.log_every = 0;
  opt.keep_checkpoints = 0;
  opt.runtime.threads = 1;
  nmt::TokenizerOptions tok;
  tok.src_model = tok.tgt_model = nmt::test::toy_tokenizer_file();
  nmt::train(opt, tok, nmt::test::tiny_model());
  auto m = nmt::load_checkpoint(out + "/last.ckpt", torch::kCPU);
  torch::optim::Adam adam(m.model->parameters());
  auto state = nmt::load_train_state(out + "/last.ckpt", adam, torch::kCPU);
  {
    torch::NoGradGuard ng;
    poison(m.model);
  }
  nmt::save_checkpoint(out + "/last.ckpt", m.model, m.src_tok, m.tgt_tok, &adam, &state);
}

nmt::TrainOptions resume_options(const std::string& out, int64_t max_steps) {
  const auto files = nmt::test::write_toy_corpus(out + "_data", 200, 10);
  nmt::TrainOptions opt;
  opt.train_src = files.train_src;
  opt.train_tgt = files.train_tgt;
  opt.output_dir = out;
  opt.batch_tokens = 24;
  opt.max_steps = max_steps;
  opt.valid_every = 0;
  opt.log_every = 0;
  opt.keep_checkpoints = 0;
  opt.runtime.threads = 1;
  opt.resume = true;
  return opt;
}

// The id of the target piece that only the word "fisho" holds.
int64_t fisho_piece() {
  const auto& tok = nmt::test::toy_tokenizer();
  const auto ids = tok.encode("fisho");
  for (int64_t id : ids)
    if (tok.piece(id).find("fish") != std::string::npos) return id;
  ADD_FAILURE() << "no piece of 'fisho' holds 'fish'";
  return ids.front();
}

TEST(ReliabilityTest, NonFiniteBatchesAreSkippedAndCounted) {
  const auto out = nmt::test::temp_dir("nan_skip") + "/run";
  // Checkpoints refuse NaN weights, so the poison is a finite extreme: the
  // output bias of "fisho" at -FLT_MAX makes its log-probability about
  // -FLT_MAX. Without label smoothing the loss of a batch is finite with one
  // "fisho" target and overflows to Inf with two or more: those are skipped.
  const int64_t fish = fisho_piece();
  train_then_poison(out, [&](nmt::Seq2Seq& m) {
    m->named_parameters()["decoder.out_bias"][fish].fill_(-std::numeric_limits<float>::max());
  });
  auto opt = resume_options(out, 45);
  opt.label_smoothing = 0;
  opt.max_bad_steps = 1000;
  const auto r = nmt::train(opt, {}, nmt::test::tiny_model());
  EXPECT_EQ(r.steps, 45);
  EXPECT_GT(r.skipped_steps, 0) << "no batch had the poisoned word twice?";
  // Skipped batches never reach the weights: everything stays finite.
  auto m = nmt::load_checkpoint(out + "/last.ckpt", torch::kCPU);
  for (const auto& p : m.model->named_parameters())
    EXPECT_TRUE(torch::isfinite(p.value()).all().item<bool>()) << p.key();
}

TEST(ReliabilityTest, RepeatedNonFiniteBatchesStopAndKeepTheLastGoodCheckpoint) {
  const auto out = nmt::test::temp_dir("nan_stop") + "/run";
  // Finite but extreme output biases: with label smoothing every position's
  // loss includes log p = -3e38 - 3e38 = -Inf, so every batch is non-finite.
  train_then_poison(out, [](nmt::Seq2Seq& m) {
    auto bias = m->named_parameters()["decoder.out_bias"];
    bias[4].fill_(3e38f);
    bias[5].fill_(-3e38f);
  });
  const auto before = nmt::test::read_bytes(out + "/last.ckpt");
  auto opt = resume_options(out, 50);
  opt.max_bad_steps = 4;
  try {
    nmt::train(opt, {}, nmt::test::tiny_model());
    FAIL() << "training went on";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 batches in a row"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last.ckpt (step 5)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nmt::test::read_bytes(out + "/last.ckpt"), before) << "last.ckpt was replaced";
}

TEST(ReliabilityTest, ResumeRefusesContradictingModelOptions) {
  const auto out = nmt::test::temp_dir("mismatch") + "/run";
  train_then_poison(out, [](nmt::Seq2Seq&) {});
  auto opt = resume_options(out, 8);
  auto arch = nmt::test::tiny_model();
  arch.emb_dim = 99;
  opt.given = {"emb-dim"};
  try {
    nmt::train(opt, {}, arch);
    FAIL() << "no error";
  } catch (const nmt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("emb_dim=16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("emb_dim=99"), std::string::npos) << msg;
    EXPECT_NE(msg.find("new --output"), std::string::npos) << msg;
  }
  // The same option at the checkpoint's value, or not given at all, resumes.
  opt.given.clear();
  EXPECT_EQ(nmt::train(opt, {}, arch).steps, 8);
}

}  // namespace
