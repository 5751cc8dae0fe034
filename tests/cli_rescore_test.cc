// nmt-translate's rescoring through the real executable: right-to-left and
// channel models reorder the beam by the mix, and the n-best features give
// that mix back to the last bit, so that a reranker choosing other weights
// from one n-best list chooses as nmt-translate would.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cli_util.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::expect_one_line_error;
using nmt::test::lines_of;
using nmt::test::quote;
using nmt::test::run;
using nmt::test::split_bars;
using nmt::test::temp_dir;
using nmt::test::write_lines;

// One rescored n-best entry: "i ||| text ||| features ||| score".
struct Rescored {
  int index = -1;
  std::string text;
  double l2r = 0, r2l = NAN, channel = NAN, words = 0, score = 0;
};

// The entry of n-best line `line`; a missing L2R= or Words= fails the test.
Rescored parse_rescored(const std::string& line) {
  Rescored e;
  const auto f = split_bars(line);
  EXPECT_EQ(f.size(), 4u) << line;
  if (f.size() != 4) return e;
  const auto feature = [&](const std::string& name, bool needed) {
    const size_t at = (" " + f[2]).find(" " + name + "= ");
    EXPECT_TRUE(!needed || at != std::string::npos) << name << " in " << line;
    return at == std::string::npos ? NAN : std::stod(f[2].substr(at + name.size() + 1));
  };
  e.index = std::stoi(f[0]);
  e.text = f[1];
  e.l2r = feature("L2R", true);
  e.r2l = feature("R2L", false);
  e.channel = feature("CH", false);
  e.words = feature("Words", true);
  e.score = std::stod(f[3]);
  return e;
}

// The mix of entry `e` under weights w, c and exponent a, in the order
// rescorer.h gives (a term absent where its feature is).
double mix(const Rescored& e, double w, double c, double a) {
  double sum = (1 - (std::isnan(e.r2l) ? 0.0 : w)) * e.l2r;
  if (!std::isnan(e.r2l)) sum += w * e.r2l;
  if (!std::isnan(e.channel)) sum += c * e.channel;
  return sum / std::pow((5.0 + e.words + 1.0) / 6.0, a);
}

// --r2l-model rescores the beam's whole list and keeps --n-best of it, in
// the order of the mix, each entry with the mix's parts among its features
// and the mix, exactly, as its score; its weights without it, or with a mode
// that does not translate, are refused.
TEST(CliTest, TranslateRescoresWithRightToLeftModels) {
  const auto dir = temp_dir("cli_r2l");
  const auto m = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat sees big dog", "", "old fish eats"});
  auto r = run("nmt-translate", "-m " + m + " --r2l-model " + m + " -b 4 --n-best 2", dir, dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;  // two per line, the empty line's one empty translation
  EXPECT_TRUE(contains(r.err, "rescoring the beam's 4 hypotheses")) << r.err;
  for (size_t k = 0; k + 1 < out.size(); ++k) {
    const auto e = parse_rescored(out[k]), next = parse_rescored(out[k + 1]);
    if (e.index == next.index) {  // one line's list: best first
      EXPECT_GE(e.score, next.score) << r.out;
    }
  }
  // Each entry's features give its score back under the default mix (w 0.5, a 1).
  for (const auto& line : out) {
    const auto e = parse_rescored(line);
    EXPECT_FALSE(std::isnan(e.r2l)) << line;
    EXPECT_EQ(e.score, mix(e, 0.5, 0.0, 1.0)) << line;
  }
  auto unscored = run("nmt-translate", "-m " + m + " -b 4 --n-best 2", dir, dir + "/in.txt");
  ASSERT_EQ(unscored.exit_code, 0) << unscored.err;
  EXPECT_FALSE(contains(unscored.out, "R2L=")) << unscored.out;
  auto plain = run("nmt-translate", "-m " + m + " --r2l-model " + m + " -b 4", dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(lines_of(plain.out).size(), 3u) << plain.out;
  r = run("nmt-translate", "-m " + m + " --r2l-weight 0.3", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--r2l-model"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " --r2l-model " + m + " --score-pairs", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--r2l-model", "--score-pairs"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " --r2l-model " + m + " --r2l-weight 2", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--r2l-weight"}, nmt::test::kExitUsage);
}

// --channel-model adds c log P(source | hypothesis) to the mix, with or
// without --r2l-model, and its feature CH= to the n-best entries; its weight
// without it is refused.
TEST(CliTest, TranslateRescoresWithChannelModels) {
  const auto dir = temp_dir("cli_channel");
  const auto m = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat sees big dog", "", "old fish eats"});
  for (const bool with_r2l : {false, true}) {
    auto r = run("nmt-translate", "-m " + m + (with_r2l ? " --r2l-model " + m : std::string()) + " --channel-model " +
                                      m + " --channel-weight 0.25 -b 4 --n-best 2",
                 dir, dir + "/in.txt");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "channel")) << r.err;
    for (const auto& line : lines_of(r.out)) {
      const auto e = parse_rescored(line);
      EXPECT_EQ(!std::isnan(e.r2l), with_r2l) << line;
      EXPECT_FALSE(std::isnan(e.channel)) << line;
      EXPECT_EQ(e.score, mix(e, 0.5, 0.25, 1.0)) << line;
    }
  }
  auto r = run("nmt-translate", "-m " + m + " --channel-weight 0.3", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--channel-model"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " --r2l-model " + m + " --channel-weight 0.3", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--channel-model"}, nmt::test::kExitUsage);
  r = run("nmt-translate", "-m " + m + " --channel-model " + m + " --score-pairs", dir, dir + "/in.txt");
  expect_one_line_error(r, {"--channel-model", "--score-pairs"}, nmt::test::kExitUsage);
}

// One rescored n-best list of the whole beam gives every other setting's
// choice: the best of each line by the mix recomputed from its features
// (the first of equal ones) is nmt-translate's output under that setting.
TEST(CliTest, TranslateNBestFeaturesGiveEverySettingsChoice) {
  const auto dir = temp_dir("cli_rescore_choice");
  const std::string toy = nmt::test::trained_toy_checkpoint();
  const auto m = quote(toy);
  const std::vector<std::string> in = {"red cat sees big dog", "old fish eats", "big dog sees red cat", "old cat",
                                       "red fish sees old dog"};
  write_lines(dir + "/in.txt", in);
  const std::string models = "-m " + m + " --r2l-model " + m + " --channel-model " + m + " -b 4";
  auto r = run("nmt-translate", models + " --n-best 4", dir, dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::vector<Rescored>> lists;
  for (const auto& line : lines_of(r.out)) {
    const auto e = parse_rescored(line);
    lists[e.index].push_back(e);
  }
  ASSERT_EQ(lists.size(), in.size()) << r.out;
  for (const auto& [w, c, a] : {std::tuple{0.25, 0.5, 1.0}, std::tuple{0.75, 0.1, 1.4}, std::tuple{0.0, 1.0, 0.6},
                                std::tuple{0.5, 0.0, 1.4}}) {
    const auto setting = " --r2l-weight " + std::to_string(w) + " --channel-weight " + std::to_string(c) +
                         " --r2l-length-exponent " + std::to_string(a);
    const auto chosen = run("nmt-translate", models + setting, dir, dir + "/in.txt");
    ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
    // a model of weight 0 is not run (the choice below shows the mix unchanged)
    EXPECT_EQ(contains(chosen.err, "right-to-left " + toy + " (weight 0: not run)"), w == 0) << chosen.err;
    EXPECT_EQ(contains(chosen.err, "channel " + toy + " (weight 0: not run)"), c == 0) << chosen.err;
    const auto out = lines_of(chosen.out);
    ASSERT_EQ(out.size(), in.size()) << chosen.out;
    for (const auto& [i, list] : lists) {
      const Rescored* best = &list[0];
      for (const auto& e : list)
        if (mix(e, w, c, a) > mix(*best, w, c, a)) best = &e;
      EXPECT_EQ(out[i], best->text) << "line " << i << setting;
    }
  }
}

}  // namespace
