// What the executables do with hostile or careless input: huge values,
// CR-only line endings, nonsense numbers, endless and over-long input,
// hostile config files, damaged checkpoints, bad gold links and UTF-16.
// Every failure must be one error line naming the file and the problem,
// before any work and within bounded memory. See safety_test.cc for outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "safety_test_util.h"
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
using nmt::test::warnings_of;
using nmt::test::write_bytes;
using nmt::test::write_lines;

using nmt::safety_test::model;
using nmt::safety_test::model_args;

// Expects CSV matrix blocks `a` and `b` (nmt-align's csv lines) to hold the
// same tokens, and weights within `bound` plus the 1e-6 that two printings
// to six decimals may add.
void expect_same_csv_matrices(const std::string& a, const std::string& b, double bound) {
  std::istringstream x(a), y(b);
  std::string lx, ly;
  while (std::getline(x, lx)) {
    ASSERT_TRUE(static_cast<bool>(std::getline(y, ly))) << "missing line " << lx;
    std::istringstream cx(lx), cy(ly);
    std::string vx, vy;
    while (std::getline(cx, vx, ',')) {
      ASSERT_TRUE(static_cast<bool>(std::getline(cy, vy, ','))) << lx << " | " << ly;
      if (vx.empty() || vx[0] == '"' || vy.empty() || vy[0] == '"') {
        EXPECT_EQ(vx, vy) << lx << " | " << ly;  // a token
      } else {
        EXPECT_NEAR(std::stod(vx), std::stod(vy), bound + 1e-6) << lx << " | " << ly;
      }
    }
    EXPECT_FALSE(static_cast<bool>(std::getline(cy, vy, ','))) << lx << " | " << ly;
  }
  EXPECT_FALSE(static_cast<bool>(std::getline(y, ly))) << "extra line " << ly;
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

// Runs `cmd` (a shell command line) in bash with its data limited to `kb`
// KiB (ulimit -d: the heap and private writable mappings, what the tool
// itself allocates; not the address space, which a LibTorch built with CUDA
// fills with gigabytes of library code before main; not under
// AddressSanitizer, whose shadow memory needs terabytes), stdout to
// `dir`/limited.out, stderr captured.
Result run_limited(const std::string& cmd, long kb, const std::string& dir) {
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
  (void)kb;
#else
  const std::string limit = "ulimit -d " + std::to_string(kb) + "; ";
#endif
  const std::string err = dir + "/limited.err", out = dir + "/limited.out";
  const std::string line = "(" + limit + "export NMT_THREADS=1; " + cmd + ") > " + quote(out) + " 2> " + quote(err);
  const int status = std::system(("bash -c " + quote(line)).c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_bytes(out);
  set_err(r, read_bytes(err));
  return r;
}

// nmt-align built whole attention matrices of whatever length a pair had
// (a pair of 50,000 words a side took 19.8 GB) and read all of its input
// before aligning any. Each side is now cropped to --max-input-length
// pieces (after its last whole word that fits) and the pairs cropped are
// counted; pairs are read, aligned and written a chunk at a time (up to
// kAlignChunk pairs, fewer when their lines are long). Both runs stay within
// 2 GB of data (a tiny model takes about 0.2 GB of memory; the old reader
// failed at its first large matrix, or never ended).
TEST(SafetyTest, AlignCropsLongPairsAndReadsEndlessInputInChunks) {
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
  auto r = run_limited("exec timeout 120 " + align + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt"), limit_kb, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto warnings = warnings_of(r);
  ASSERT_EQ(warnings.size(), 1u) << r.err;
  EXPECT_TRUE(contains(warnings[0], "1 pair with a side longer than 1000 pieces was cropped (--max-input-length)"))
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
  // The two short pairs are aligned as they are alone: in one batch with
  // the long pair, their own arithmetic is that of a batch without it (the
  // padding's weights are exact zeros), up to the rounding of other kernels
  // (model_rounding_bound() over their 2 pieces and </s> a side).
  write_lines(dir + "/b.src", {"red cat", "old fish"});
  write_lines(dir + "/b.tgt", {"cato redo", "fisho oldo"});
  auto alone = run("nmt-align", model_args() + " --src " + quote(dir + "/b.src") + " --tgt " + quote(dir + "/b.tgt"), dir);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  std::string short_pairs;
  for (size_t b : {0, 2}) {
    short_pairs += short_pairs.empty() ? "" : "\n";
    for (const auto& l : blocks[b]) short_pairs += l + "\n";
  }
  auto loaded = nmt::load_checkpoint(model(), torch::kCPU);
  expect_same_csv_matrices(short_pairs, alone.out,
                           nmt::test::model_rounding_bound(*loaded.model, nmt::test::model_depth(3, 3)));
  // An endless stream of pairs with -n 50: 50 pairs, and the rest never read.
  r = run_limited("yes 'red cat ||| cato redo' | timeout 120 " + align + " -n 50 -f pharaoh", limit_kb, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 50);
  EXPECT_TRUE(warnings_of(r).empty()) << r.err;
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
