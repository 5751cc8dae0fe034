// What nmt-train does to its output folder when a run is stopped, when an
// earlier run's files are there, and when two runs are pointed at one
// folder: no temporary files left, no checkpoint replaced or rotated away
// silently. See safety_test.cc for the other executables' outputs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "safety_test_util.h"
#include "test_util.h"

namespace {
namespace fs = std::filesystem;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::read_bytes;
using nmt::test::run;
using nmt::test::temp_dir;
using nmt::test::write_bytes;

using nmt::safety_test::temporaries;

// nmt-train arguments for a tiny run on the toy corpus in `dir` with a
// budget of `steps` steps; the epoch limit is as large, so that a long run a
// test stops cannot end by itself first.
std::vector<std::string> train_argv(const std::string& dir, const std::string& out, int64_t steps) {
  if (!fs::exists(dir + "/train.src")) nmt::test::write_toy_corpus(dir, 400, 20);
  return {nmt::test::bin("nmt-train"), "--train-src", dir + "/train.src", "--train-tgt", dir + "/train.tgt",
          "--valid-src", dir + "/valid.src", "--valid-tgt", dir + "/valid.tgt", "-o", out, "--src-spm",
          nmt::test::toy_tokenizer_file(), "--tgt-spm", nmt::test::toy_tokenizer_file(), "--emb-dim", "16",
          "--enc-hidden", "16", "--dec-hidden", "32", "--attn-dim", "16", "--batch-tokens", "200", "--log-every", "1",
          "--valid-every", "5", "--early-stopping", "0", "--threads", "1", "--device", "cpu", "--max-steps",
          std::to_string(steps), "--max-epochs", std::to_string(steps)};
}

// `argv` after the program's name, each quoted, as one argument string for run().
std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (size_t i = 1; i < argv.size(); ++i) s += quote(argv[i]) + " ";
  return s;
}

TEST(SafetyTest, SecondSignalToTrainLeavesNoTemporaryFiles) {
  const auto dir = temp_dir("safe_train_sig2");
  auto c = nmt::test::spawn(train_argv(dir, dir + "/run", 100000), dir + "/log");
  ASSERT_TRUE(nmt::test::wait_for_log(c, "valid | step", 60)) << read_bytes(c.log);
  ::kill(c.pid, SIGINT);   // first: finish cleanly
  ::kill(c.pid, SIGTERM);  // second (another signal, so the two cannot merge): leave now
  // Threads of the process may take the two signals in either order.
  const int code = nmt::test::wait_exit(c, 30);
  EXPECT_TRUE(code == 128 + SIGTERM || code == 128 + SIGINT) << code << "\n" << read_bytes(c.log);
  EXPECT_NE(read_bytes(c.log).find("nmt-train interrupted by SIG"), std::string::npos) << read_bytes(c.log);
  EXPECT_TRUE(temporaries(dir).empty());
  for (const auto& e : fs::directory_iterator(dir + "/run"))
    if (e.path().extension() == ".ckpt") { EXPECT_NO_THROW(nmt::load_checkpoint(e.path().string(), torch::kCPU)) << e.path(); }
}

TEST(SafetyTest, TrainRemovesTemporaryFilesOfRunsThatAreGone) {
  const auto dir = temp_dir("safe_stale");
  auto r = run("nmt-train", joined(train_argv(dir, dir + "/run", 3)), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const pid_t dead = ::fork();  // a process id that is certainly gone
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = dir + "/run/last.ckpt.tmp." + std::to_string(dead);
  const std::string live = dir + "/run/best.ckpt.tmp." + std::to_string(::getppid());
  write_bytes(stale, "half a checkpoint");
  write_bytes(live, "another process's file");
  r = run("nmt-train", joined(train_argv(dir, dir + "/run", 6)) + " --resume", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary file was removed";
  EXPECT_NE(r.err.find("removed 1 temporary file of an earlier run"), std::string::npos) << r.err;
}

// The names in `dir`, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A folder that holds checkpoints of an earlier run but no last.ckpt (a
// user deleted it) is not taken for a new run: best.ckpt, the logs and the
// step checkpoints would be replaced, appended to and rotated away. Without
// --resume: one line with the choices; with --resume: the run goes on from
// the newest step checkpoint. Only the names nmt writes are step
// checkpoints: a user's step-final.ckpt, backup copy or 20-digit step is
// neither read as one nor removed by the rotation.
TEST(SafetyTest, AFolderWithCheckpointsOfAnEarlierRunIsNeverReusedSilently) {
  const auto dir = temp_dir("safe_reuse");
  const auto out = dir + "/run";
  auto r = run("nmt-train", joined(train_argv(dir, out, 10)), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(out + "/step-10.ckpt")) << r.err;
  const std::vector<std::string> mine = {"step-final.ckpt", "step-1 (copy).ckpt", "step-007.ckpt",
                                         "step-99999999999999999999.ckpt", "step-+3.ckpt"};
  for (const auto& name : mine) write_bytes(out + "/" + name, "mine");
  fs::remove(out + "/last.ckpt");
  const std::string best = read_bytes(out + "/best.ckpt"), metrics = read_bytes(out + "/metrics.jsonl");
  const std::string log = read_bytes(out + "/train.log");
  const auto before = names_in(out);

  r = run("nmt-train", joined(train_argv(dir, out, 15)), dir);
  expect_one_line_error(r, {out + ": already holds checkpoints of an earlier run", "best.ckpt", "step-10.ckpt",
                            "use --resume to continue it from step-10.ckpt", "or choose another --output"});
  EXPECT_EQ(names_in(out), before);
  EXPECT_EQ(read_bytes(out + "/best.ckpt"), best);
  EXPECT_EQ(read_bytes(out + "/metrics.jsonl"), metrics);
  EXPECT_EQ(read_bytes(out + "/train.log"), log);

  // --resume continues from the newest step checkpoint and says so; the
  // rotation (--keep-checkpoints 1) removes nmt's older step files only.
  r = run("nmt-train", joined(train_argv(dir, out, 15)) + " --resume --keep-checkpoints 1", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("holds no last.ckpt: resuming from step-10.ckpt, its newest step checkpoint"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("resumed from " + out + "/step-10.ckpt at step 10"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("training finished (max_steps): 15 steps"), std::string::npos) << r.err;
  for (const auto& name : mine) EXPECT_EQ(read_bytes(out + "/" + name), "mine") << name;
  EXPECT_TRUE(fs::exists(out + "/step-15.ckpt"));
  EXPECT_FALSE(fs::exists(out + "/step-10.ckpt"));
  EXPECT_FALSE(fs::exists(out + "/step-5.ckpt"));
  EXPECT_TRUE(fs::exists(out + "/last.ckpt"));
}

TEST(SafetyTest, OneTrainingRunPerOutputFolder) {
  const auto dir = temp_dir("safe_lock");
  // The first run would go on for long; it is stopped (SIGINT: save, exit 0)
  // once the second has been refused.
  auto first = nmt::test::spawn(train_argv(dir, dir + "/run", 1000000), dir + "/first.log");
  ASSERT_TRUE(nmt::test::wait_for_log(first, "| step 1/", 60)) << read_bytes(first.log);
  auto second = run("nmt-train", joined(train_argv(dir, dir + "/run", 60)), dir);
  expect_one_line_error(second, {dir + "/run is in use by process " + std::to_string(first.pid)});
  ::kill(first.pid, SIGINT);
  ASSERT_EQ(nmt::test::wait_exit(first, 60), 0) << read_bytes(first.log);
  // metrics.jsonl is the first run's alone: steps only grow.
  std::istringstream metrics(read_bytes(dir + "/run/metrics.jsonl"));
  int64_t last_step = 0;
  for (std::string l; std::getline(metrics, l);) {
    if (l.find("\"type\":\"train\"") == std::string::npos) continue;
    const int64_t step = std::stoll(l.substr(l.find("\"step\":") + 7));
    EXPECT_GT(step, last_step) << l;
    last_step = step;
  }
  EXPECT_GT(last_step, 0);
  // Two resumes at once: the second is refused the same way.
  auto resume = train_argv(dir, dir + "/run", 1000000);
  resume.push_back("--resume");
  auto a = nmt::test::spawn(resume, dir + "/a.log");
  ASSERT_TRUE(nmt::test::wait_for_log(a, "resumed from", 60)) << read_bytes(a.log);
  auto b = run("nmt-train", joined(resume), dir);
  expect_one_line_error(b, {"in use by process " + std::to_string(a.pid)});
  ::kill(a.pid, SIGINT);
  EXPECT_EQ(nmt::test::wait_exit(a, 60), 0) << read_bytes(a.log);
}

}  // namespace
