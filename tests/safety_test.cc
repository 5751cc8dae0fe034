// What the executables do to the outputs a user points them at, as a
// careless or a hostile user would: outputs that are devices, FIFOs and
// links; signals and full disks mid-write. Every failure must be one error
// line with exit code 1 (or 128 + signal) and must leave what existed
// before as it was. Training runs and their folders are in
// safety_run_folder_test.cc, hostile input in safety_input_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "safety_test_util.h"
#include "test_util.h"

namespace {
namespace fs = std::filesystem;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::read_bytes;
using nmt::test::Result;
using nmt::test::run;
using nmt::test::temp_dir;
using nmt::test::write_bytes;
using nmt::test::write_lines;

using nmt::safety_test::model;
using nmt::safety_test::model_args;
using nmt::safety_test::temporaries;

// Whether `path` itself (not a link's target) is a character device.
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

// Runs `args` of `exe` with writes limited to 512-byte files (ulimit -f 1,
// in a subshell of its own), stderr through a pipe so the log is not limited.
Result run_on_a_full_disk(const std::string& exe, const std::string& args, const std::string& dir) {
  const std::string err = dir + "/full.err";
  const std::string cmd = "( (ulimit -f 1; NMT_THREADS=1 exec " + quote(nmt::test::bin(exe)) + " " + args +
                          " < /dev/null > /dev/null) 2>&1 | cat > " + quote(err) + "; exit ${PIPESTATUS[0]} )";
  const int status = std::system(("bash -c " + quote(cmd)).c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  set_err(r, read_bytes(err));
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

}  // namespace
