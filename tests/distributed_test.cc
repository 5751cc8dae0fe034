// Data-parallel training: real nmt-train processes joined by c10d Gloo on
// loopback. One step on 2 ranks must equal one step of 1 process on the two
// ranks' batches joined.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "test_util.h"
#include "text/corpus.h"
#include "train/distributed.h"

namespace {

using nmt::test::quote;
using nmt::test::read_bytes;
using nmt::test::Result;

// A TCP port that was free a moment ago (the kernel's pick for port 0).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs `world` nmt-train processes at once, as torchrun would (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT), each killed after 120 s.
std::vector<Result> run_ranks(int world, const std::string& args, const std::string& dir) {
  const std::string bin = quote(std::string(NMT_BINARY_DIR) + "/nmt-train");
  const int port = free_port();
  std::string cmd;
  for (int r = 0; r < world; ++r) {
    const std::string f = dir + "/rank" + std::to_string(r);
    cmd += "(RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
           " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " NMT_THREADS=1 timeout 120 " + bin + " " +
           args + " > " + quote(f + ".out") + " 2> " + quote(f + ".err") + "; echo $? > " + quote(f + ".rc") + ") & ";
  }
  cmd += "wait";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::vector<Result> out(world);
  for (int r = 0; r < world; ++r) {
    const std::string f = dir + "/rank" + std::to_string(r);
    out[r].exit_code = std::stoi("0" + read_bytes(f + ".rc"));
    out[r].err = read_bytes(f + ".err");
  }
  return out;
}

// Options for a tiny deterministic model (no dropout) on the toy corpus.
std::string tiny_args(const nmt::test::ToyFiles& f, const std::string& out) {
  const std::string spm = quote(nmt::test::toy_tokenizer_file());
  return "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " -o " + quote(out) +
         " --src-spm " + spm + " --tgt-spm " + spm +
         " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16 --dropout 0 --device cpu --threads 1"
         " --batch-tokens 100000 --valid-every 0 --keep-checkpoints 0 --log-every 1 --seed 7";
}

// Largest |a - b| over all weights of two checkpoints (same architecture).
double max_weight_difference(const std::string& a, const std::string& b) {
  auto ma = nmt::load_checkpoint(a, torch::kCPU).model, mb = nmt::load_checkpoint(b, torch::kCPU).model;
  auto pa = ma->named_parameters(), pb = mb->named_parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double worst = 0;
  for (const auto& item : pa) worst = std::max(worst, (item.value() - pb[item.key()]).abs().max().item<double>());
  return worst;
}

TEST(DistributedTest, TwoRanksStepEqualsOneProcessOnTheJoinedBatches) {
  const auto dir = nmt::test::temp_dir("dist_step");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  std::string why;
  if (!nmt::distributed_supported(&why)) {  // then the option must say so
    auto r = nmt::test::run("nmt-train", tiny_args(f, dir + "/x") + " --world-size 2 --max-steps 1", dir);
    nmt::test::expect_one_line_error(r, {"no distributed support"});
    GTEST_SKIP() << why;
  }
  // Plain SGD, so the update is proportional to the gradient: a gradient
  // scaled wrongly (a mean over ranks, or divided twice) moves the weights
  // by a different amount. (Adam's first steps are nearly scale-invariant,
  // lr * sign(g), and would hide such a bug.)
  const std::string sgd = " --optimizer sgd --max-steps 3";
  // 8 pairs: 2 batches of 4 on two ranks (one step covers both) against 1 batch of 8.
  auto ranks = run_ranks(2, tiny_args(f, dir + "/two") + sgd + " --learning-rate 1 --batch-sentences 4", dir);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ranks[0].err.find("2 ranks"), std::string::npos) << ranks[0].err;
  EXPECT_NE(ranks[0].err.find("training finished (max_steps): 3 steps"), std::string::npos) << ranks[0].err;
  EXPECT_EQ(ranks[1].err.find("[info]"), std::string::npos) << "only rank 0 logs:\n" << ranks[1].err;

  auto one = nmt::test::run("nmt-train", tiny_args(f, dir + "/one") + sgd + " --learning-rate 1 --batch-sentences 8", dir);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // What a gradient off by a factor of 2 would give: the same steps at half the rate.
  auto half = nmt::test::run("nmt-train", tiny_args(f, dir + "/half") + sgd + " --learning-rate 0.5 --batch-sentences 8", dir);
  ASSERT_EQ(half.exit_code, 0) << half.err;

  const double joined = max_weight_difference(dir + "/two/last.ckpt", dir + "/one/last.ckpt");
  const double scaled = max_weight_difference(dir + "/two/last.ckpt", dir + "/half/last.ckpt");
  std::printf("max |w(2 ranks) - w(joined)| = %.3g, max |w(2 ranks) - w(joined, gradient / 2)| = %.3g\n", joined, scaled);
  // The ranks' gradients and the joined batch's sum their terms in other
  // orders: within gradient_rounding_bound() of their size, which three
  // steps at rate 1 carry into weights that move about twice as far as the
  // run at half the rate lags behind.
  const auto& tok = nmt::test::toy_tokenizer();
  int64_t S = 0, T = 0;
  for (const auto& l : nmt::read_lines(f.train_src)) S = std::max<int64_t>(S, tok.encode(l).size() + 1);
  for (const auto& l : nmt::read_lines(f.train_tgt)) T = std::max<int64_t>(T, tok.encode(l).size() + 1);
  auto model = nmt::load_checkpoint(dir + "/one/last.ckpt", torch::kCPU).model;
  const double lag = max_weight_difference(dir + "/one/last.ckpt", dir + "/half/last.ckpt");
  const double bound = 3 * nmt::test::gradient_rounding_bound(*model, nmt::test::model_depth(S, T), 8 * T) * 2 * lag;
  EXPECT_TRUE(nmt::test::within(joined, 0.0, bound)) << "2 ranks vs 1 process on the joined batches";
  EXPECT_GT(scaled, 10 * bound) << "a gradient off by 2x must be visible, or the comparison proves nothing";
}

TEST(DistributedTest, ResumesWithAnotherWorldSize) {
  const auto dir = nmt::test::temp_dir("dist_resume");
  const auto f = nmt::test::write_toy_corpus(dir, 40, 2);
  if (!nmt::distributed_supported(nullptr)) GTEST_SKIP() << "no distributed support in this build";
  const std::string args = tiny_args(f, dir + "/run") + " --batch-sentences 4";
  auto first = nmt::test::run("nmt-train", args + " --max-steps 2", dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto ranks = run_ranks(2, args + " --max-steps 4 --resume", dir);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ranks[0].err.find("resumed from"), std::string::npos) << ranks[0].err;
  EXPECT_NE(ranks[0].err.find("training finished (max_steps): 4 steps"), std::string::npos) << ranks[0].err;
  auto back = nmt::test::run("nmt-train", args + " --max-steps 5 --resume", dir);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_NE(back.err.find("training finished (max_steps): 5 steps"), std::string::npos) << back.err;
}

// Runs one nmt-train process per entry of `envs` ("RANK=.. WORLD_SIZE=.."),
// at once, on MASTER_PORT `port`, each stopped after 120 s (and killed 10 s
// later); the seconds until each has exited go to *seconds.
std::vector<Result> run_each(const std::vector<std::string>& envs, int port, const std::string& args,
                             const std::string& dir, std::vector<double>* seconds = nullptr) {
  const std::string bin = quote(std::string(NMT_BINARY_DIR) + "/nmt-train");
  std::string cmd;
  for (size_t r = 0; r < envs.size(); ++r) {
    const std::string f = dir + "/proc" + std::to_string(r);
    // The time each takes, from date's nanoseconds before and after.
    cmd += "(s=$(date +%s%N); " + envs[r] + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
           " NMT_THREADS=1 timeout -k 10 120 " + bin + " " + args + " > /dev/null 2> " + quote(f + ".err") + "; echo $? > " +
           quote(f + ".rc") + "; echo $(( $(date +%s%N) - s )) > " + quote(f + ".ns") + ") & ";
  }
  cmd += "wait";
  EXPECT_EQ(std::system(("bash -c " + quote(cmd)).c_str()), 0);
  std::vector<Result> out(envs.size());
  if (seconds != nullptr) seconds->assign(envs.size(), 0);
  for (size_t r = 0; r < envs.size(); ++r) {
    const std::string f = dir + "/proc" + std::to_string(r);
    out[r].exit_code = std::stoi("0" + read_bytes(f + ".rc"));
    nmt::test::set_err(out[r], read_bytes(f + ".err"));
    if (seconds != nullptr) (*seconds)[r] = std::stod("0" + read_bytes(f + ".ns")) / 1e9;
  }
  return out;
}

// A program that holds MASTER_PORT, accepts connections (the kernel's
// backlog does) and never answers: rank 0 cannot serve the store there, and
// the other ranks, whose connection succeeds, must give up at the timeout
// (they waited for an answer until the program went away, deaf to SIGTERM:
// run_each() kills them 10 s after it).
TEST(DistributedTest, SilentListenerOnTheMasterPortFailsEveryRankWithinTheTimeout) {
  const auto dir = nmt::test::temp_dir("dist_silent");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  if (!nmt::distributed_supported(nullptr)) GTEST_SKIP() << "no distributed support in this build";
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(::listen(fd, 64), 0);
  const int port = ntohs(a.sin_port);
  const std::string args = tiny_args(f, dir + "/run") + " --max-steps 1 --dist-timeout 0.05";  // 3 s
  std::vector<double> seconds;
  auto ranks = run_each({"RANK=1 WORLD_SIZE=2", "RANK=0 WORLD_SIZE=2"}, port, args, dir, &seconds);
  ::close(fd);
  nmt::test::expect_one_line_error(ranks[0], {"rank 1 could not join the process group at 127.0.0.1:" +
                                                  std::to_string(port), "no answer from rank 0's rendezvous store",
                                              "timeout of 3 s"});
  nmt::test::expect_one_line_error(ranks[1], {"rank 0 could not join the process group", "Address already in use"});
  for (double s : seconds) EXPECT_LT(s, 20) << "a 3 s timeout";
}

// A worker with no rank 0 anywhere (nothing listens on the port) gives up
// at its timeout, in one line.
TEST(DistributedTest, WorkerWithoutRankZeroFailsWithinTheTimeout) {
  const auto dir = nmt::test::temp_dir("dist_alone");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  if (!nmt::distributed_supported(nullptr)) GTEST_SKIP() << "no distributed support in this build";
  const std::string args = tiny_args(f, dir + "/run") + " --max-steps 1 --dist-timeout 0.05";  // 3 s
  std::vector<double> seconds;
  auto ranks = run_each({"RANK=1 WORLD_SIZE=2"}, free_port(), args, dir, &seconds);
  nmt::test::expect_one_line_error(ranks[0], {"rank 1 could not join the process group at 127.0.0.1:"});
  EXPECT_LT(seconds[0], 20) << "a 3 s timeout";
}

// Ranks started with different world sizes: each says so in one line
// (Gloo's own check failed with "enforce fail ... sizeof(impl_) == bytes.size()").
TEST(DistributedTest, RanksThatDisagreeOnTheWorldSizeSaySo) {
  const auto dir = nmt::test::temp_dir("dist_world");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  if (!nmt::distributed_supported(nullptr)) GTEST_SKIP() << "no distributed support in this build";
  const std::string args = tiny_args(f, dir + "/run") + " --max-steps 1 --dist-timeout 1";
  auto ranks = run_each({"RANK=0 WORLD_SIZE=2", "RANK=1 WORLD_SIZE=3"}, free_port(), args, dir);
  nmt::test::expect_one_line_error(ranks[0], {"rank 0 could not join", "rank 1 was started with world size 3, rank 0 with 2",
                                              "same WORLD_SIZE"});
  nmt::test::expect_one_line_error(ranks[1], {"rank 1 could not join", "this rank was started with world size 3, rank 0 with 2"});
  for (const auto& r : ranks) EXPECT_EQ(r.err.find("enforce fail"), std::string::npos) << r.err;
}

// A rank that never comes is named at the timeout, not at twice it (rank 0
// waited for the workers, then Gloo waited as long again).
TEST(DistributedTest, MissingRankIsNamedAtTheTimeout) {
  const auto dir = nmt::test::temp_dir("dist_missing");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  if (!nmt::distributed_supported(nullptr)) GTEST_SKIP() << "no distributed support in this build";
  const std::string args = tiny_args(f, dir + "/run") + " --max-steps 1 --dist-timeout 0.25";  // 15 s
  std::vector<double> seconds;
  auto ranks = run_each({"RANK=0 WORLD_SIZE=3"}, free_port(), args, dir, &seconds);
  nmt::test::expect_one_line_error(ranks[0], {"rank 0 could not join", "ranks 1 and 2 did not arrive within the timeout of 15 s"});
  EXPECT_GE(seconds[0], 15);
  EXPECT_LT(seconds[0], 27) << "reported well before twice the timeout";
}

TEST(DistributedTest, BadRankOrEnvironmentIsAOneLineError) {
  const auto dir = nmt::test::temp_dir("dist_bad");
  const auto f = nmt::test::write_toy_corpus(dir, 8, 2);
  auto r = nmt::test::run("nmt-train", tiny_args(f, dir + "/x") + " --world-size 2 --rank 2 --max-steps 1", dir);
  nmt::test::expect_one_line_error(r, {"rank 2"}, nmt::test::kExitUsage);
  const std::string cmd = "WORLD_SIZE=two " + quote(std::string(NMT_BINARY_DIR) + "/nmt-train") + " --help > /dev/null 2> " +
                          quote(dir + "/env.err");
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_bytes(dir + "/env.err").find("WORLD_SIZE='two'"), std::string::npos);
}

}  // namespace
