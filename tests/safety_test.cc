// What the executables do to what a user points them at, as a careless or a
// hostile user would: outputs that are devices, FIFOs and links; signals
// and full disks mid-write; endless and over-long input; two runs in one
// folder; nonsense numbers; damaged checkpoints; bad gold links and UTF-16.
// Every failure must be one error line with exit code 1 (or 128 + signal)
// and must leave what existed before as it was.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "test_util.h"

namespace {
namespace fs = std::filesystem;
using nmt::test::contains;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::read_bytes;
using nmt::test::Result;
using nmt::test::run;
using nmt::test::temp_dir;
using nmt::test::write_bytes;
using nmt::test::write_lines;

const std::string& model() { return nmt::test::trained_toy_checkpoint(); }
std::string model_args() { return "-m " + quote(model()) + " --device cpu --threads 1"; }

std::vector<std::string> temporaries(const std::string& dir) { return nmt::test::temporary_files(dir); }

bool is_char_device(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

// Translations of `in` on stdout: what every other output path must receive.
std::string reference_translation(const std::string& in, const std::string& dir) {
  const auto r = run("nmt-translate", model_args() + " -i " + quote(in), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(SafetyTest, TranslateWritesLinksFifosDescriptorsAndDevicesWithoutReplacingThem) {
  const auto dir = temp_dir("safe_out");
  write_lines(dir + "/in.txt", {"red cat sees big dog", "old fish", "blue bird runs"});
  const auto in = quote(dir + "/in.txt");
  const std::string want = reference_translation(dir + "/in.txt", dir);
  ASSERT_FALSE(want.empty());

  // A link: its target gets the output, the link stays a link.
  fs::create_directories(dir + "/real");
  write_bytes(dir + "/real/target.txt", "old\n");
  fs::create_symlink("real/target.txt", dir + "/link.txt");
  auto r = run("nmt-translate", model_args() + " -i " + in + " -o " + quote(dir + "/link.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/link.txt"));
  EXPECT_EQ(read_bytes(dir + "/real/target.txt"), want);

  // A FIFO, read from a non-blocking read end opened first.
  const auto fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(rd, 0);
  r = run("nmt-translate", model_args() + " -i " + in + " -o " + quote(fifo), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  char buf[4096] = {0};
  const ssize_t n = ::read(rd, buf, sizeof buf - 1);
  ::close(rd);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), want);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";

  // /dev/stdout (a link to /proc/self/fd/1): the output reaches stdout.
  r = run("nmt-translate", model_args() + " -i " + in + " -o /dev/stdout", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  EXPECT_TRUE(temporaries(dir).empty());

  if (::geteuid() != 0) GTEST_SKIP() << "device nodes (mknod) need root; links, FIFOs and /dev/stdout passed";
  const auto null = dir + "/null", full = dir + "/full";
  ASSERT_EQ(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
  r = run("nmt-translate", model_args() + " -i " + in + " -o " + quote(null), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(is_char_device(null)) << "the device node was replaced by a regular file";
  r = run("nmt-translate", model_args() + " -i " + in + " -o " + quote(full), dir);
  expect_one_line_error(r, {full, "No space left on device"});
  EXPECT_TRUE(is_char_device(full));
  // nmt-align writes devices in place too.
  write_lines(dir + "/a.tgt", {"dogo bigo seeso cato redo", "fisho oldo", "runso birdo blueo"});
  r = run("nmt-align", model_args() + " --src " + in + " --tgt " + quote(dir + "/a.tgt") + " -o " + quote(null), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(is_char_device(null));
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(SafetyTest, AlignReplacesLinkTargetsInOutputAndPerPairFolders) {
  const auto dir = temp_dir("safe_align_out");
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  write_lines(dir + "/a.tgt", {"dogo bigo seeso cato redo", "fisho oldo"});
  const std::string pair = " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt");
  const auto plain = run("nmt-align", model_args() + pair, dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  write_bytes(dir + "/elsewhere.csv", "old\n");
  fs::create_symlink(dir + "/elsewhere.csv", dir + "/link.csv");
  auto r = run("nmt-align", model_args() + pair + " -o " + quote(dir + "/link.csv"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/link.csv"));
  EXPECT_EQ(read_bytes(dir + "/elsewhere.csv"), plain.out);
  // --output-dir: a per-pair file that is a link has its target replaced.
  fs::create_directories(dir + "/pairs");
  write_bytes(dir + "/first.csv", "old\n");
  fs::create_symlink(dir + "/first.csv", dir + "/pairs/0001.csv");
  r = run("nmt-align", model_args() + pair + " --output-dir " + quote(dir + "/pairs"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/pairs/0001.csv"));
  EXPECT_EQ(read_bytes(dir + "/first.csv"), plain.out.substr(0, plain.out.find("\n\n") + 1));
  EXPECT_TRUE(fs::exists(dir + "/pairs/0002.csv"));
  EXPECT_TRUE(temporaries(dir).empty());
}

// Starts nmt-translate reading a FIFO that the test holds open, so it sits
// mid-run with its output's temporary file open; then sends `sig`.
void check_translate_interrupted(int sig, const std::string& tag) {
  const auto dir = temp_dir(tag);
  const auto fifo = dir + "/in", out = dir + "/out.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  write_bytes(out, "finished earlier\n");
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // never blocks; keeps the FIFO open for writing
  ASSERT_GE(hold, 0);
  auto c = nmt::test::spawn({nmt::test::bin("nmt-translate"), "-m", model(), "--threads", "1", "-i", fifo, "-o", out},
                            dir + "/err.txt");
  ASSERT_TRUE(nmt::test::wait_until([&] { return !temporaries(dir).empty(); }, 60)) << read_bytes(c.log);
  (void)!::write(hold, "red cat\nold fish\n", 17);
  ::kill(c.pid, sig);
  EXPECT_EQ(nmt::test::wait_exit(c, 30), 128 + sig) << read_bytes(c.log);
  ::close(hold);
  const std::string err = read_bytes(c.log);
  EXPECT_NE(err.find(std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM")), std::string::npos) << err;
  int error_lines = 0;
  std::istringstream lines(err);
  for (std::string l; std::getline(lines, l);) error_lines += l.find("error") != std::string::npos;
  EXPECT_EQ(error_lines, 1) << err;
  EXPECT_EQ(read_bytes(out), "finished earlier\n");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(SafetyTest, SigtermToTranslateRemovesItsTemporaryFileAndKeepsTheOldOutput) {
  check_translate_interrupted(SIGTERM, "safe_sigterm");
}

TEST(SafetyTest, SigintToTranslateRemovesItsTemporaryFileAndKeepsTheOldOutput) {
  check_translate_interrupted(SIGINT, "safe_sigint");
}

TEST(SafetyTest, SigintToAlignMidRunKeepsTheOldOutput) {
  const auto dir = temp_dir("safe_align_sig");
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(20000, 5, &s, &t);
  write_lines(dir + "/a.src", s);
  write_lines(dir + "/a.tgt", t);
  write_bytes(dir + "/out.csv", "old\n");
  auto c = nmt::test::spawn({nmt::test::bin("nmt-align"), "-m", model(), "--threads", "1", "--src", dir + "/a.src",
                             "--tgt", dir + "/a.tgt", "-o", dir + "/out.csv"},
                            dir + "/err.txt");
  ASSERT_TRUE(nmt::test::wait_until([&] { return !temporaries(dir).empty(); }, 60)) << read_bytes(c.log);
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(nmt::test::wait_exit(c, 30), 130) << read_bytes(c.log);
  EXPECT_NE(read_bytes(c.log).find("interrupted by SIGINT"), std::string::npos) << read_bytes(c.log);
  EXPECT_EQ(read_bytes(dir + "/out.csv"), "old\n");
  EXPECT_TRUE(temporaries(dir).empty());
}

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

// An error quotes at most the start of a huge value or path (a config
// file's 1 MB value, a 1 MB path), and still names the file and problem.
TEST(SafetyTest, ErrorsQuoteOnlyTheStartOfAHugeValue) {
  const auto dir = temp_dir("safe_huge_value");
  nmt::test::write_toy_corpus(dir, 20, 5);
  // Just under the 1 MiB a config file may hold (a larger file is refused whole).
  const std::string huge(1000000, 'a');
  write_lines(dir + "/decoder.toml", {"decoder = \"" + huge + "\""});
  auto r = run("nmt-train", "-c " + quote(dir + "/decoder.toml") + " -o " + quote(dir + "/run"), dir);
  expect_one_line_error(r, {dir + "/decoder.toml:1:1: decoder: unknown decoder 'aaaa", "... (1000000 bytes)",
                            "expected bahdanau or cgru"},
                        nmt::test::kExitUsage);
  EXPECT_LT(r.err.size(), 2000u);
  const std::string missing = dir + "/" + huge;
  write_lines(dir + "/path.toml", {"train-src = \"" + missing + "\"", "train-tgt = \"" + dir + "/train.tgt\"",
                                   "output = \"" + dir + "/run\""});
  r = run("nmt-train", "-c " + quote(dir + "/path.toml"), dir);
  expect_one_line_error(r, {dir + "/aaaa", "... (" + std::to_string(missing.size()) + " bytes): cannot open"});
  EXPECT_LT(r.err.size(), 2000u);
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

// Old Mac text (CR alone ends each line) is named with its cause and the
// command that converts it, before SentencePiece sees one giant line.
TEST(SafetyTest, CrOnlyLineEndingsAreNamedWithTheirFix) {
  const auto dir = temp_dir("safe_cr");
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(50, 1, &s, &t);
  std::string src, tgt;
  for (size_t i = 0; i < s.size(); ++i) src += s[i] + "\r", tgt += t[i] + "\r";
  write_bytes(dir + "/cr.src", src);
  write_bytes(dir + "/cr.tgt", tgt);
  auto r = run("nmt-train", "--train-src " + quote(dir + "/cr.src") + " --train-tgt " + quote(dir + "/cr.tgt") + " -o " +
                                quote(dir + "/run") + " --max-steps 1 --threads 1",
               dir);
  expect_one_line_error(r, {dir + "/cr.src: line endings are CR only (old Mac)",
                            "tr '\\r' '\\n' < " + dir + "/cr.src > " + dir + "/cr.src.lf"});
  EXPECT_FALSE(fs::exists(dir + "/run"));
  // CRLF stays accepted.
  src.clear(), tgt.clear();
  for (size_t i = 0; i < s.size(); ++i) src += s[i] + "\r\n", tgt += t[i] + "\r\n";
  write_bytes(dir + "/crlf.src", src);
  write_bytes(dir + "/crlf.tgt", tgt);
  r = run("nmt-translate", model_args() + " -i " + quote(dir + "/crlf.src"), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --seed takes one range, 0 to 2^63 - 1, from flags and config files alike:
// a run's own config.toml always reads back.
TEST(SafetyTest, SeedHasOneRangeForFlagsAndConfigFiles) {
  const auto dir = temp_dir("safe_seed");
  nmt::test::write_toy_corpus(dir, 20, 5);
  const std::string base = "--train-src " + quote(dir + "/train.src") + " --train-tgt " + quote(dir + "/train.tgt") +
                           " -o " + quote(dir + "/run") + " --max-steps 1 --threads 1 ";
  auto r = run("nmt-train", base + "--seed -1", dir);
  expect_one_line_error(r, {"--seed must be at least 0, got -1"}, nmt::test::kExitUsage);
  write_lines(dir + "/seed.toml", {"seed = -1"});
  r = run("nmt-train", base + "-c " + quote(dir + "/seed.toml"), dir);
  expect_one_line_error(r, {"--seed must be at least 0, got -1"}, nmt::test::kExitUsage);
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

// Runs `args` of `exe` with writes limited to 512-byte files (ulimit -f 1,
// in a subshell of its own), stderr through a pipe so the log is not limited.
Result run_on_a_full_disk(const std::string& exe, const std::string& args, const std::string& dir) {
  const std::string err = dir + "/full.err";
  const std::string cmd = "( (ulimit -f 1; NMT_THREADS=1 exec " + quote(nmt::test::bin(exe)) + " " + args +
                          " < /dev/null > /dev/null) 2>&1 | cat > " + quote(err) + "; exit ${PIPESTATUS[0]} )";
  const int status = std::system(("bash -c " + quote(cmd)).c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_bytes(err);
  std::istringstream in(r.err);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) r.err_lines.push_back(l);
  return r;
}

TEST(SafetyTest, AFullDiskLeavesNoPartialFilesAndNamesTheFile) {
  const auto dir = temp_dir("safe_full");
  // Pairs of three toy sentences each: every per-pair CSV is over 512 bytes.
  std::vector<std::string> s3, t3, s, t;
  nmt::test::toy_corpus(120, 3, &s3, &t3);
  for (size_t i = 0; i < 120; i += 3) {
    s.push_back(s3[i] + " " + s3[i + 1] + " " + s3[i + 2]);
    t.push_back(t3[i + 2] + " " + t3[i + 1] + " " + t3[i]);
  }
  write_lines(dir + "/a.src", s);
  write_lines(dir + "/a.tgt", t);
  const std::string pair = model_args() + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt");
  write_bytes(dir + "/out.csv", "old\n");
  auto r = run_on_a_full_disk("nmt-align", pair + " -o " + quote(dir + "/out.csv"), dir);
  expect_one_line_error(r, {dir + "/out.csv", "write failed"});
  EXPECT_EQ(read_bytes(dir + "/out.csv"), "old\n");
  // Per-pair files: each one there is complete, none is cut short.
  auto ok = run("nmt-align", pair + " --output-dir " + quote(dir + "/ref"), dir);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  r = run_on_a_full_disk("nmt-align", pair + " --output-dir " + quote(dir + "/pairs"), dir);
  expect_one_line_error(r, {dir + "/pairs/", "write failed"});
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir + "/pairs")) {
    ++files;
    const auto name = e.path().filename().string();
    EXPECT_EQ(read_bytes(e.path().string()), read_bytes(dir + "/ref/" + name)) << name << " is not complete";
  }
  EXPECT_LT(files, 40);
  // nmt-translate -o the same way.
  write_bytes(dir + "/out.txt", "old\n");
  std::string many;
  for (int i = 0; i < 200; ++i) many += s[i % s.size()] + "\n";
  write_bytes(dir + "/many.txt", many);
  r = run_on_a_full_disk("nmt-translate", model_args() + " -i " + quote(dir + "/many.txt") + " -o " + quote(dir + "/out.txt"), dir);
  expect_one_line_error(r, {dir + "/out.txt", "write failed"});
  EXPECT_EQ(read_bytes(dir + "/out.txt"), "old\n");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(SafetyTest, EndlessOrHugeInputIsRefusedOrCroppedWithoutUnboundedMemory) {
  const auto dir = temp_dir("safe_mem");
  auto r = run("nmt-translate", model_args() + " -i /dev/zero", dir);
  expect_one_line_error(r, {"/dev/zero:1:", "NUL byte at byte 1"});
  r = run("nmt-translate", "-m /dev/zero --threads 1", dir);
  expect_one_line_error(r, {"/dev/zero", "not an nmt checkpoint"});
  r = run("nmt-translate", model_args() + " -b 100000", dir);
  expect_one_line_error(r, {"--beam-size", "256", "100000"}, nmt::test::kExitUsage);
  // A line over --max-line-bytes is cropped and counted; lines stay one per line.
  write_lines(dir + "/in.txt", {"red cat", std::string(5000, 'a'), "old fish"});
  r = run("nmt-translate", model_args() + " --max-line-bytes 100 -i " + quote(dir + "/in.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  EXPECT_NE(r.err.find("1 input line longer than 100 bytes was cropped"), std::string::npos) << r.err;
  // In score mode an over-long pair cannot be scored as given: an error.
  write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\n" + std::string(300, 'a') + "\tx\n");
  r = run("nmt-translate", model_args() + " --score-pairs --max-line-bytes 100 -i " + quote(dir + "/pairs.tsv"), dir);
  expect_one_line_error(r, {"pairs.tsv:2:", "longer than 100 bytes"});
}

// toml++ limits the nesting of inline values, but nests a table per part
// of a table header or dotted key and frees them recursively: 100,000 parts
// crashed every tool (SIGSEGV). The config reader refuses such shapes, and
// files larger than any config, before toml++ sees them: one line naming
// the file and line, the usage code 2 as for other config errors.
TEST(SafetyTest, HostileConfigsAreRefusedBeforeTheTomlParser) {
  const auto dir = temp_dir("safe_config");
  std::string parts = "a";
  for (int i = 1; i < 100000; ++i) parts += ".a";
  const auto refused = [&](const std::string& name, const std::string& text, const std::vector<std::string>& want) {
    write_bytes(dir + "/" + name, text);
    const auto r = run("nmt-translate", "-c " + quote(dir + "/" + name) + " -m " + quote(model()) + " --threads 1", dir);
    SCOPED_TRACE(name);
    expect_one_line_error(r, want, nmt::test::kExitUsage);
  };
  refused("header.toml", "# hostile\nbeam-size = 2\n[" + parts + "]\nx = 1\n",
          {dir + "/header.toml:3:", "table header with 100000 dotted parts", "at most 8"});
  refused("tables.toml", "[[" + parts + "]]\n", {"tables.toml:1:", "table header with 100000 dotted parts"});
  refused("dotted.toml", "\n" + parts + " = 1\n", {"dotted.toml:2:", "dotted key with 100000 dotted parts"});
  refused("inline.toml", "x = { " + parts + " = 1 }\n", {"inline.toml:1:", "dotted key with 100000 dotted parts"});
  refused("long.toml", "beam-size = 2\n" + std::string(5000, 'k') + " = 1\n", {"long.toml:2:", "key of 5000 bytes"});
  refused("quoted.toml", "[\"" + std::string(5000, 'k') + "\"]\n", {"quoted.toml:1:", "key of 5000 bytes"});
  // Deep inline arrays stop at toml++'s own limit.
  refused("arrays.toml", "x = " + std::string(100000, '[') + std::string(100000, ']') + "\n",
          {"arrays.toml:1:", "not valid TOML"});
  // Larger than any config: refused after reading at most one byte more than the limit.
  auto r = run("nmt-translate", "-c /dev/zero -m " + quote(model()), dir);
  expect_one_line_error(r, {"/dev/zero", "larger than 1048576 bytes"}, nmt::test::kExitUsage);
  // Tables nested a few deep, dots in strings and comments, floats: read as before.
  write_bytes(dir + "/fine.toml",
              "# a.b.c.d.e.f.g.h.i.j\n[search.beam.options]\nbeam-size = 3  # x.y.z.w.v.u.t.s.r.q\n"
              "length-penalty = 1.25\n[io]\noutput = \"a.b.c.d.e.f.g.h.i.j.k\"\n"
              "\"max-line-bytes\" = 4096\n");
  r = run("nmt-translate", "-c " + quote(dir + "/fine.toml") + " --dump-config", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"beam-size = 3\n", "length-penalty = 1.25\n", "output = \"a.b.c.d.e.f.g.h.i.j.k\"\n",
                           "max-line-bytes = 4096\n"})
    EXPECT_TRUE(contains(r.out, line)) << line << " missing from:\n" << r.out;
}

// Runs `cmd` (a shell command line) in bash with its address space limited
// to `kb` KiB (ulimit -v; not under AddressSanitizer, whose shadow memory
// needs terabytes of it), stdout to `dir`/limited.out, stderr captured.
Result run_limited(const std::string& cmd, long kb, const std::string& dir) {
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
  (void)kb;
#else
  const std::string limit = "ulimit -v " + std::to_string(kb) + "; ";
#endif
  const std::string err = dir + "/limited.err", out = dir + "/limited.out";
  const std::string line = "(" + limit + "export NMT_THREADS=1; " + cmd + ") > " + quote(out) + " 2> " + quote(err);
  const int status = std::system(("bash -c " + quote(line)).c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  std::istringstream in(r.err);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) r.err_lines.push_back(l);
  return r;
}

// nmt-align built whole attention matrices of whatever length a pair had
// (a pair of 50,000 words a side took 19.8 GB) and read all of its input
// before aligning any. Each side is now cropped to --max-input-length
// pieces (after its last whole word that fits) and the pairs cropped are
// counted; pairs are read, aligned and written one at a time. Both runs
// stay within 2 GB of address space (a tiny model takes about 0.2 GB of
// memory; the old reader failed at its first large matrix, or never ended).
TEST(SafetyTest, AlignCropsLongPairsAndReadsEndlessInputAPairAtATime) {
  const auto dir = temp_dir("safe_align_mem");
  const char* src_words[] = {"red", "cat", "sees", "big", "dog", "old", "fish", "blue", "bird", "runs"};
  const char* tgt_words[] = {"cato", "redo", "fisho", "oldo", "birdo", "blueo"};
  std::string s, t;
  for (int i = 0; i < 30000; ++i) {
    s += std::string(i ? " " : "") + src_words[(i * 7) % 10];
    t += std::string(i ? " " : "") + tgt_words[(i * 5) % 6];
  }
  write_lines(dir + "/a.src", {"red cat", s, "old fish"});
  write_lines(dir + "/a.tgt", {"cato redo", t, "fisho oldo"});
  const std::string align = quote(nmt::test::bin("nmt-align")) + " " + model_args();
  const long limit_kb = 2000000;
  auto r = run_limited("exec " + align + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt"), limit_kb, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.err_lines.size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err_lines[0], "1 pair with a side longer than 1000 pieces was cropped (--max-input-length)"))
      << r.err;
  // Three CSV blocks, the long pair's at most 1,000 pieces (and </s>) a side.
  std::vector<std::vector<std::string>> blocks(1);
  std::istringstream csv(r.out);
  for (std::string l; std::getline(csv, l);) {
    if (l.empty()) {
      blocks.emplace_back();
    } else {
      blocks.back().push_back(l);
    }
  }
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_GT(blocks[1].size(), 500u);
  EXPECT_LE(blocks[1].size(), 1u + 1001u);  // the header row, then a row per target piece
  EXPECT_LE(std::count(blocks[1][0].begin(), blocks[1][0].end(), ','), 1001);
  // The two short pairs are aligned as they are alone.
  write_lines(dir + "/b.src", {"red cat", "old fish"});
  write_lines(dir + "/b.tgt", {"cato redo", "fisho oldo"});
  auto alone = run("nmt-align", model_args() + " --src " + quote(dir + "/b.src") + " --tgt " + quote(dir + "/b.tgt"), dir);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  std::string short_pairs;
  for (size_t b : {0, 2}) {
    short_pairs += short_pairs.empty() ? "" : "\n";
    for (const auto& l : blocks[b]) short_pairs += l + "\n";
  }
  EXPECT_EQ(short_pairs, alone.out);
  // An endless stream of pairs with -n 50: 50 pairs, and the rest never read.
  r = run_limited("yes 'red cat ||| cato redo' | timeout 120 " + align + " -n 50 -f pharaoh", limit_kb, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 50);
  EXPECT_TRUE(r.err_lines.empty()) << r.err;
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

// Every option's range is unit-tested on its options struct
// (tests/options_test.cc); these show that each executable checks them
// before any work, from flags and from a config file.
TEST(SafetyTest, NumericOptionsAreCheckedBeforeAnyWork) {
  const auto dir = temp_dir("safe_numbers");
  write_lines(dir + "/in.txt", {"red cat"});
  const std::string in = " -i " + quote(dir + "/in.txt");
  for (const auto& [args, option] : std::vector<std::pair<std::string, std::string>>{
           {"-b 5 --length-penalty nan", "--length-penalty"}, {"--window 0", "--window"}, {"--threads -3", "--threads"}}) {
    auto r = run("nmt-translate", "-m " + quote(model()) + in + " " + args, dir);
    SCOPED_TRACE(args);
    expect_one_line_error(r, {option}, nmt::test::kExitUsage);
  }
  write_lines(dir + "/a.tgt", {"cato redo"});
  const std::string pair = " --src " + quote(dir + "/in.txt") + " --tgt " + quote(dir + "/a.tgt");
  auto r = run("nmt-align", "-m " + quote(model()) + " --method threshold --threshold nan" + pair, dir);
  expect_one_line_error(r, {"--threshold"}, nmt::test::kExitUsage);
  r = run("nmt-align", "--aligner ibm2 --format pharaoh --ibm-tension inf" + pair, dir);
  expect_one_line_error(r, {"--ibm-tension"}, nmt::test::kExitUsage);
  nmt::test::write_toy_corpus(dir, 20, 5);
  const std::string base = "--train-src " + quote(dir + "/train.src") + " --train-tgt " + quote(dir + "/train.tgt") +
                           " -o " + quote(dir + "/run") + " --max-steps 5 ";
  for (const auto& [args, option] : std::vector<std::pair<std::string, std::string>>{
           {"--learning-rate nan", "--learning-rate"}, {"--dropout nan", "dropout"}, {"--threads -3", "--threads"}}) {
    r = run("nmt-train", base + args, dir);
    SCOPED_TRACE(args);
    expect_one_line_error(r, {option}, nmt::test::kExitUsage);
    EXPECT_FALSE(fs::exists(dir + "/run")) << "a failed start left its output folder";
  }
  write_lines(dir + "/bad.toml", {"batch-tokens = -5"});
  r = run("nmt-train", base + "--config " + quote(dir + "/bad.toml"), dir);
  expect_one_line_error(r, {"--batch-tokens", "-5"}, nmt::test::kExitUsage);
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

TEST(SafetyTest, DamagedCheckpointIsRefusedWithAHint) {
  const auto dir = temp_dir("safe_damaged");
  std::string bytes = read_bytes(model());
  bytes[bytes.size() / 2] ^= 0x10;
  write_bytes(dir + "/damaged.ckpt", bytes);
  auto r = run("nmt-translate", "-m " + quote(dir + "/damaged.ckpt") + " --threads 1", dir);
  expect_one_line_error(r, {dir + "/damaged.ckpt", "damaged (checksum mismatch)", "older step-N.ckpt"});
}

TEST(SafetyTest, GoldLinksOutsideTheirPairAreLocatedErrors) {
  const auto dir = temp_dir("safe_gold");
  write_lines(dir + "/a.src", {"red cat", "old fish"});
  write_lines(dir + "/a.tgt", {"cato redo", "fisho oldo"});
  write_lines(dir + "/gold.txt", {"0-1 1-0", "0-1 99-99"});
  auto r = run("nmt-align", model_args() + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt") +
                                " --format pharaoh --eval-gold " + quote(dir + "/gold.txt"),
               dir);
  expect_one_line_error(r, {"gold.txt:2:", "99-99", "outside the pair"});
}

TEST(SafetyTest, Utf16AndBadTrainingFilesAreNamed) {
  const auto dir = temp_dir("safe_utf16");
  write_bytes(dir + "/u16.txt", std::string("\xFF\xFEr\0e\0d\0\n\0", 10));
  auto r = run("nmt-translate", model_args() + " -i " + quote(dir + "/u16.txt"), dir);
  expect_one_line_error(r, {dir + "/u16.txt:1:", "UTF-16", "iconv -f UTF-16 -t UTF-8"});
  // A bad target file is blamed, not the source; a failed start leaves no folder.
  write_lines(dir + "/s.txt", {"red cat", "old fish"});
  write_bytes(dir + "/t.txt", std::string("\xFF\xFE" "c\0a\0t\0\n\0", 10));
  r = run("nmt-train", "--train-src " + quote(dir + "/s.txt") + " --train-tgt " + quote(dir + "/t.txt") + " -o " +
                           quote(dir + "/run"),
          dir);
  expect_one_line_error(r, {"t.txt:1:", "UTF-16"});
  EXPECT_FALSE(fs::exists(dir + "/run"));
  write_lines(dir + "/t.txt", {"", ""});
  r = run("nmt-train", "--train-src " + quote(dir + "/s.txt") + " --train-tgt " + quote(dir + "/t.txt") + " -o " +
                           quote(dir + "/run"),
          dir);
  expect_one_line_error(r, {dir + "/t.txt", "no usable training pairs"});
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

}  // namespace
