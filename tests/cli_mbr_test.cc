// nmt-translate --mbr through the real executable: the beam's list reordered
// by expected utility, under the evidence of the scores that ordered it
// before (the search's, or the rescoring's mix), and the options that would
// do nothing refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cli_util.h"
#include "test_util.h"
#include "translate/mbr.h"

namespace {

using nmt::test::contains;
using nmt::test::expect_one_line_error;
using nmt::test::lines_of;
using nmt::test::quote;
using nmt::test::run;
using nmt::test::split_bars;
using nmt::test::temp_dir;
using nmt::test::write_lines;

// Each line's n-best entries (text, score column, and the MBR= feature or
// NaN), by line number, in the order printed.
struct Entry {
  std::string text;
  double score = 0, mbr = NAN;
};
std::map<int, std::vector<Entry>> nbest_lists(const std::string& out) {
  std::map<int, std::vector<Entry>> lists;
  for (const auto& line : lines_of(out)) {
    const auto f = split_bars(line);
    EXPECT_EQ(f.size(), 4u) << line;
    if (f.size() != 4) continue;
    Entry e{f[1], std::stod(f[3])};
    if (const size_t at = f[2].find("MBR= "); at != std::string::npos) e.mbr = std::stod(f[2].substr(at + 5));
    lists[std::stoi(f[0])].push_back(e);
  }
  return lists;
}

// Over a rescored list, whose scores (the mix) are printed exactly, the
// expected utilities are the library's of those texts and scores, to the
// last bit; the list is ordered by them, each one the entry's MBR= and its
// score; the one-best output is each list's first.
TEST(CliTest, TranslateMbrReordersTheRescoredBeamByExpectedUtility) {
  const auto dir = temp_dir("cli_mbr");
  const auto m = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat sees big dog", "", "old fish eats", "big dog sees red cat"});
  const std::string base = "-m " + m + " --r2l-model " + m + " -b 5 ";
  auto plain = run("nmt-translate", base + "--n-best 5", dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* utility : {"bleu", "chrf"}) {
    const std::string mbr = std::string("--mbr ") + utility + " --mbr-temperature 0.5";
    auto r = run("nmt-translate", base + mbr + " --n-best 5", dir, dir + "/in.txt");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto before = nbest_lists(plain.out), after = nbest_lists(r.out);
    ASSERT_EQ(after.size(), 4u) << r.out;
    nmt::MbrOptions opt;
    opt.utility = std::string(utility) == "bleu" ? nmt::MbrUtility::kBleu : nmt::MbrUtility::kChrf;
    opt.temperature = 0.5;
    for (const auto& [line, list] : before) {
      std::vector<std::string> texts;
      std::vector<double> scores;
      for (const auto& e : list) texts.push_back(e.text), scores.push_back(e.score);
      const auto want = nmt::expected_utilities(texts, scores, opt);
      const auto& got = after.at(line);
      ASSERT_EQ(got.size(), list.size()) << r.out;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].score, got[k].mbr) << r.out;
        if (k > 0) {
          EXPECT_GE(got[k - 1].mbr, got[k].mbr) << r.out;
        }
        const size_t at = std::find(texts.begin(), texts.end(), got[k].text) - texts.begin();
        ASSERT_LT(at, texts.size()) << got[k].text;
        EXPECT_EQ(got[k].mbr, want[at]) << got[k].text;
      }
    }
    auto one = run("nmt-translate", base + mbr, dir, dir + "/in.txt");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto firsts = lines_of(one.out);
    ASSERT_EQ(firsts.size(), 4u) << one.out;
    for (const auto& [line, list] : after) EXPECT_EQ(firsts[static_cast<size_t>(line)], list.front().text);
  }
}

// Without rescoring the evidence is the search's length-normalized score:
// the list holds the beam's texts, ordered by MBR=; --with-scores prints
// the utility that chose, to 4 decimals.
TEST(CliTest, TranslateMbrPicksFromTheSearchsList) {
  const auto dir = temp_dir("cli_mbr_search");
  const auto m = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat sees big dog", "old fish eats"});
  auto plain = run("nmt-translate", "-m " + m + " -b 4 --n-best 4", dir, dir + "/in.txt");
  auto r = run("nmt-translate", "-m " + m + " -b 4 --n-best 4 --mbr chrf", dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto before = nbest_lists(plain.out), after = nbest_lists(r.out);
  ASSERT_EQ(after.size(), 2u) << r.out;
  for (const auto& [line, list] : after) {
    std::vector<std::string> texts, searched;
    for (const auto& e : list) texts.push_back(e.text);
    for (const auto& e : before.at(line)) searched.push_back(e.text);
    std::sort(texts.begin(), texts.end());
    std::sort(searched.begin(), searched.end());
    EXPECT_EQ(texts, searched);
    for (size_t k = 1; k < list.size(); ++k) EXPECT_GE(list[k - 1].mbr, list[k].mbr) << r.out;
  }
  auto scored = run("nmt-translate", "-m " + m + " -b 4 --mbr chrf --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  const auto lines = lines_of(scored.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NEAR(std::stod(split_bars(lines[0]).at(1)), after.at(0).front().mbr, 5.1e-5) << scored.out;
}

TEST(CliTest, TranslateMbrRefusesWhatWouldDoNothing) {
  const auto dir = temp_dir("cli_mbr_refused");
  const auto m = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat"});
  auto r = run("nmt-translate", "-m " + m + " --mbr bleu", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--mbr", "--beam-size"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " -b 4 --mbr-temperature 2", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--mbr-temperature", "--mbr"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " -b 4 --mbr bleu --mbr-temperature 0", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--mbr-temperature"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " -b 4 --mbr meteor", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--mbr", "meteor"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " --mbr chrf --score-pairs", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--mbr", "--score-pairs"}, nmt::test::kExitUsage);
  EXPECT_FALSE(contains(r.out, "red"));
}

}  // namespace
