// nmt-translate through the real executable: n-best and score formats,
// search options, streaming through windows and pipes, long lines, full
// disks, ensembles and its summary line.
#include <expat.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "model/checkpoint.h"
#include "translate/translator.h"
#include "checkpoint_edit.h"
#include "cli_util.h"
#include "test_util.h"
#include "text/alignment.h"
#include "text/corpus.h"
#include "text/metrics.h"


namespace {

namespace fs = std::filesystem;
using nmt::test::read_bytes;
using nmt::test::temp_dir;
using nmt::test::write_bytes;
using nmt::test::write_lines;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::Result;
using nmt::test::run;
using nmt::test::lines_of;
using nmt::test::split_bars;
using nmt::test::contains;

TEST(CliTest, TranslateNBestFormatAndRanks) {
  const auto dir = temp_dir("cli_nbest");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/in.txt", {"red cat sees big dog", "", "old fish eats"});
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " -b 4 --n-best 3", dir, dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  std::map<int, std::vector<double>> scores;
  for (const auto& l : out) {
    // Moses' form, which rerankers read: i ||| hypothesis ||| features ||| score.
    auto f = split_bars(l);
    ASSERT_EQ(f.size(), 4u) << "not 'i ||| hyp ||| features ||| score': " << l;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(f[2], m, std::regex(R"(LogProb= (-?[0-9.]+) Length= ([0-9]+) LengthPenalty= ([0-9.]+))")))
        << f[2];
    const double score = std::stod(f[3]);
    EXPECT_LE(std::stod(m[1]), 0.0) << l;
    EXPECT_EQ(std::stoul(m[2]) > 0, !f[1].empty()) << "Length counts the hypothesis' pieces: " << l;
    // Each figure is printed to 4 decimals, within h = 5e-5 of its value:
    // L / P then moves by at most h / P + |L| h / P^2 (P >= 1), the score by
    // h; the float score itself is within a few float roundings of L / P.
    const double L = std::stod(m[1]), P = std::stod(m[3]), h = 5e-5;
    ASSERT_GE(P, 1.0) << l;
    const double bound = h / P + std::abs(L) * h / (P * P) + h + 4 * 0x1p-24 * std::abs(score);
    EXPECT_NEAR(L / P, score, bound) << "score = LogProb / LengthPenalty: " << l;
    scores[std::stoi(f[0])].push_back(score);
  }
  ASSERT_EQ(scores.size(), 3u) << r.out;
  EXPECT_EQ(scores[0].size(), 3u);
  EXPECT_EQ(scores[1].size(), 1u);  // an empty line has one (empty) hypothesis
  EXPECT_EQ(scores[2].size(), 3u);
  for (auto& [i, s] : scores)
    for (size_t k = 1; k < s.size(); ++k) EXPECT_GE(s[k - 1], s[k]) << "sentence " << i << " not best first";
  // The first hypothesis of each sentence is the plain output of the same beam.
  auto plain = run("nmt-translate", "-m " + quote(ckpt) + " -b 4 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto p = lines_of(plain.out);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(split_bars(p[0])[0], split_bars(out[0])[1]);
  EXPECT_EQ(std::stod(split_bars(p[0])[1]), scores[0][0]);
  // An empty line's one hypothesis has no pieces.
  for (const auto& l : out)
    if (split_bars(l)[0] == "1") {
      EXPECT_NE(split_bars(l)[2].find("Length= 0 "), std::string::npos) << l;
    }
}

TEST(CliTest, TranslateScoreModePrintsOneLogProbPerPair) {
  const auto dir = temp_dir("cli_score");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nred cat\tfisho fisho fisho\n\tcato\n");
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  const double good = std::stod(out[0]), bad = std::stod(out[1]);
  EXPECT_LT(good, 0);
  EXPECT_GT(good, bad) << "the right translation should be more probable";
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  nmt::Translator tr(loaded);
  EXPECT_NEAR(good, tr.score({"red cat"}, {"cato redo"}, 1)[0], 1e-3);
  // A line without a tab is a located error.
  nmt::test::write_bytes(dir + "/bad.tsv", "red cat\tcato\nno tab here\n");
  r = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs -i " + quote(dir + "/bad.tsv"), dir);
  expect_one_line_error(r, {"bad.tsv:2:", "tab"});
}

// The former spellings --score and --scores still work, with a warning, and
// pairs given to translation (the old one-letter slip) are pointed out.
TEST(CliTest, TranslateWarnsOnFormerSpellingsAndTabInput) {
  const auto dir = temp_dir("cli_spelling");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nold fish\tfisho\n");
  auto scores = run("nmt-translate", "-m " + quote(ckpt) + " --scores", dir, dir + "/pairs.tsv");
  ASSERT_EQ(scores.exit_code, 0) << scores.err;
  EXPECT_NE(scores.err.find("--scores is deprecated: use --with-scores"), std::string::npos) << scores.err;
  EXPECT_NE(scores.err.find("line 1 holds a TAB"), std::string::npos) << scores.err;
  EXPECT_NE(scores.err.find("--score-pairs"), std::string::npos) << scores.err;
  const auto lines = lines_of(scores.out);
  ASSERT_EQ(lines.size(), 2u) << scores.out;
  EXPECT_NE(lines[0].find(" ||| "), std::string::npos) << lines[0];
  // The old --score scores the pairs exactly as --score-pairs does.
  auto old = run("nmt-translate", "-m " + quote(ckpt) + " --score", dir, dir + "/pairs.tsv");
  auto now = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(old.exit_code, 0) << old.err;
  ASSERT_EQ(now.exit_code, 0) << now.err;
  EXPECT_EQ(old.out, now.out);
  EXPECT_NE(old.err.find("--score is deprecated: use --score-pairs"), std::string::npos) << old.err;
  EXPECT_EQ(now.err.find("deprecated"), std::string::npos) << now.err;
  EXPECT_EQ(now.err.find("TAB"), std::string::npos) << now.err;
  // --batch-size, the former name of --batch-sentences, batches as it does.
  nmt::test::write_bytes(dir + "/in.txt", "red cat\nold fish\nblue\n");
  auto size = run("nmt-translate", "-m " + quote(ckpt) + " --batch-size 2", dir, dir + "/in.txt");
  auto sentences = run("nmt-translate", "-m " + quote(ckpt) + " --batch-sentences 2", dir, dir + "/in.txt");
  ASSERT_EQ(size.exit_code, 0) << size.err;
  EXPECT_EQ(size.out, sentences.out);
  EXPECT_NE(size.err.find("--batch-size is deprecated: use --batch-sentences"), std::string::npos) << size.err;
  auto both = run("nmt-translate", "-m " + quote(ckpt) + " --batch-size 2 --batch-sentences 2", dir, dir + "/in.txt");
  expect_one_line_error(both, {"--batch-size and --batch-sentences are one option"}, nmt::test::kExitUsage);
}

TEST(CliTest, TranslateRejectsBadSearchOptions) {
  const auto dir = temp_dir("cli_badopt");
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " -b 2 --n-best 5", dir);
  expect_one_line_error(r, {"n-best"}, nmt::test::kExitUsage);
  // Options that would do nothing in score mode are refused, not ignored.
  r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --score-pairs -b 5 --n-best 2", dir);
  expect_one_line_error(r, {"--beam-size does nothing with --score-pairs"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --info --length-penalty 1", dir);
  expect_one_line_error(r, {"--length-penalty does nothing with --info"}, nmt::test::kExitUsage);
  // The same options from a system file are that system's: --info and --score-pairs read what they need.
  write_lines(dir + "/system.toml", {"model = [\"" + nmt::test::trained_toy_checkpoint() + "\"]",
                                     "beam-size = 5", "length-penalty = 1.0"});
  r = run("nmt-translate", "-c " + quote(dir + "/system.toml") + " --info", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  write_lines(dir + "/pairs.tsv", {"red cat\tred cat"});
  r = run("nmt-translate", "-c " + quote(dir + "/system.toml") + " --score-pairs -i " + quote(dir + "/pairs.tsv"), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.out;
}

TEST(CliTest, AReferenceOfTheWrongLengthNeverCostsTheTranslations) {
  const auto dir = temp_dir("cli_refcount");
  const auto model = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat", "old fish eats", "big dog"});
  write_lines(dir + "/one.txt", {"cato redo"});
  // A file input is counted first: nothing is translated, nothing written.
  auto r = run("nmt-translate", "-m " + model + " -i " + quote(dir + "/in.txt") + " -o " + quote(dir + "/out.txt") +
                                    " --reference " + quote(dir + "/one.txt"), dir);
  expect_one_line_error(r, {"one.txt", "1 reference lines for 3 input lines"});
  EXPECT_FALSE(fs::exists(dir + "/out.txt"));
  // From stdin the count is known only at the end: the translations are kept.
  r = run("nmt-translate", "-m " + model + " -o " + quote(dir + "/out.txt") + " --reference " + quote(dir + "/one.txt"),
          dir, dir + "/in.txt");
  expect_one_line_error(r, {"one.txt", "1 reference lines for 3 input lines"});
  EXPECT_EQ(lines_of(nmt::test::read_bytes(dir + "/out.txt")).size(), 3u);
}

TEST(CliTest, TranslateNBestWithoutBeamSizeWidensTheBeam) {
  const auto dir = temp_dir("cli_nbest_nob");
  write_lines(dir + "/in.txt", {"red cat sees big dog"});
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --n-best 3", dir,
               dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
}

TEST(CliTest, TranslateCropsAMegabyteLine) {
  const auto dir = temp_dir("cli_long");
  std::string huge;
  while (huge.size() < (1u << 20)) huge += "red cat sees big dog ";
  write_lines(dir + "/in.txt", {"red cat", huge, "old fish"});
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --max-input-length 200", dir,
               dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u);
  EXPECT_NE(r.err.find("1 input line longer than 200 pieces was cropped"), std::string::npos) << r.err;
}

TEST(CliTest, TranslateReportsUnwritableOutputAndFullDisk) {
  const auto dir = temp_dir("cli_full");
  write_lines(dir + "/in.txt", {"red cat", "old fish"});
  const auto model = quote(nmt::test::trained_toy_checkpoint());
  auto r = run("nmt-translate", "-m " + model + " -i " + quote(dir + "/in.txt") + " -o " + quote(dir + "/no/such/dir/out"), dir);
  expect_one_line_error(r, {"no/such/dir/out", "cannot open output"});
  // stdout on a full disk: the write error is reported, not ignored.
  const std::string cmd = "NMT_THREADS=1 " + quote(nmt::test::bin("nmt-translate")) + " -m " + model + " < " +
                          quote(dir + "/in.txt") + " > /dev/full 2> " + quote(dir + "/err.txt");
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_bytes(dir + "/err.txt").find("write failed"), std::string::npos) << read_bytes(dir + "/err.txt");
}

TEST(CliTest, TranslateStreamsManyWindowsInOrder) {
  const auto dir = temp_dir("cli_windows");
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(23, 9, &src, &tgt);
  src[4] = "";  // an empty line inside a window
  write_lines(dir + "/in.txt", src);
  const std::string m = "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --threads 1";
  auto whole = run("nmt-translate", m + " --window 1000", dir, dir + "/in.txt");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // Windows of 3 (8 windows, the last one short) sort and batch each window
  // on its own; lines must still come out one per input line, in order.
  auto windows = run("nmt-translate", m + " --window 3 --batch-sentences 2", dir, dir + "/in.txt");
  ASSERT_EQ(windows.exit_code, 0) << windows.err;
  const auto got = lines_of(windows.out), want = lines_of(whole.out);
  ASSERT_EQ(got.size(), src.size());
  ASSERT_EQ(want.size(), src.size());
  EXPECT_EQ(got[4], "");
  // Other batches mean other product shapes: the same line unless a choice
  // was a near tie (nmt::test::greedy_near_tie()).
  auto loaded = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::Translator tr(loaded);
  nmt::TranslateOptions one;
  one.batch_sentences = 1;
  int compared = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i].empty() && nmt::test::greedy_near_tie(tr, src[i], tr.translate({src[i]}, one)[0][0], one.search))
      continue;
    ++compared;
    EXPECT_EQ(got[i], want[i]) << "line " << i << " out of order or wrong";
  }
  EXPECT_GT(compared, 1) << "every choice a near tie: nothing compared";
}

TEST(CliTest, TranslateAnswersAWindowWhileThePipeStaysOpen) {
  const auto dir = temp_dir("cli_pipe");
  const auto fifo = dir + "/in";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // the writing side stays open (not inherited)
  ASSERT_GE(hold, 0);
  auto c = nmt::test::spawn({nmt::test::bin("nmt-translate"), "-m", nmt::test::trained_toy_checkpoint(), "--threads",
                             "1", "--window", "2"},
                            dir + "/err.txt", dir + "/out.txt", fifo);
  (void)!::write(hold, "red cat\nold fish\n", 17);
  // Two lines fill a window: both are answered with the input still open.
  EXPECT_TRUE(nmt::test::wait_until([&] { return lines_of(read_bytes(dir + "/out.txt")).size() == 2; }, 60))
      << read_bytes(dir + "/err.txt");
  (void)!::write(hold, "blue bird\n", 10);
  ::close(hold);
  EXPECT_EQ(nmt::test::wait_exit(c, 60), 0) << read_bytes(dir + "/err.txt");
  EXPECT_EQ(lines_of(read_bytes(dir + "/out.txt")).size(), 3u);
}

TEST(CliTest, TranslateAnswersOneLineAsSoonAsThePipePauses) {
  const auto dir = temp_dir("cli_pipe_one");
  const auto fifo = dir + "/in";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(hold, 0);
  // The default window (1000 lines) only bounds memory: one line is answered while the input stays open.
  auto c = nmt::test::spawn({nmt::test::bin("nmt-translate"), "-m", nmt::test::trained_toy_checkpoint(), "--threads", "1"},
                            dir + "/err.txt", dir + "/out.txt", fifo);
  (void)!::write(hold, "red cat\n", 8);
  EXPECT_TRUE(nmt::test::wait_until([&] { return lines_of(read_bytes(dir + "/out.txt")).size() == 1; }, 60))
      << read_bytes(dir + "/err.txt");
  ::close(hold);
  EXPECT_EQ(nmt::test::wait_exit(c, 60), 0) << read_bytes(dir + "/err.txt");
}

TEST(CliTest, TranslateWithAnEnsembleOfCheckpoints) {
  const auto dir = temp_dir("cli_ensemble");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/in.txt", {"red cat sees big dog", "old fish", "blue bird"});
  auto one = run("nmt-translate", "-m " + quote(ckpt) + " -b 3 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // Two copies of one model average to that model: same lines, same scores.
  auto two = run("nmt-translate", "-m " + quote(ckpt) + " -m " + quote(ckpt) + " -b 3 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  EXPECT_NE(two.err.find("an ensemble of 2"), std::string::npos) << two.err;
}

// --ensemble-weights: equal weights are the plain ensemble; unequal ones are
// logged; a count that is not one per -m, or a weight of 0, is a usage error
// naming the option.
TEST(CliTest, TranslateWithEnsembleWeights) {
  const auto dir = temp_dir("cli_ensemble_weights");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/in.txt", {"red cat sees big dog", "old fish", "blue bird"});
  const std::string two = "-m " + quote(ckpt) + " -m " + quote(ckpt) + " -b 3 --with-scores";
  auto plain = run("nmt-translate", two, dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto equal = run("nmt-translate", two + " --ensemble-weights 2 --ensemble-weights 2", dir, dir + "/in.txt");
  ASSERT_EQ(equal.exit_code, 0) << equal.err;
  EXPECT_EQ(equal.out, plain.out);
  auto weighted = run("nmt-translate", two + " --ensemble-weights 3 1", dir, dir + "/in.txt");
  ASSERT_EQ(weighted.exit_code, 0) << weighted.err;
  EXPECT_EQ(lines_of(weighted.out).size(), 3u);
  EXPECT_NE(weighted.err.find("an ensemble of 2 weighted 3 1"), std::string::npos) << weighted.err;
  for (const std::string bad : {" --ensemble-weights 1", " --ensemble-weights 1 0", " --ensemble-weights 1 -2"}) {
    auto r = run("nmt-translate", two + bad, dir, dir + "/in.txt");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--ensemble-weights"), std::string::npos) << bad << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad;
  }
}

// nmt-translate's summary counts in the singular too, and --score-pairs
// counts the target pieces it scored.
TEST(CliTest, TranslateSummaryCountsRight) {
  const auto dir = temp_dir("cli_translate_log");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/one.txt", {"red cat"});
  auto one = run("nmt-translate", "-m " + quote(ckpt), dir, dir + "/one.txt");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("translated 1 sentence ("), std::string::npos) << one.err;
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nold fish\tfisho oldo\n");
  auto scored = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(scored.err, m, std::regex("scored 2 pairs \\(([0-9]+) target pieces\\)"))) << scored.err;
  EXPECT_GT(std::stoi(m[1]), 0) << scored.err;
}

}  // namespace
