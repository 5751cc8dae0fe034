// nmt-align through the real executable: ibm2, hmm and attention (forced and
// free), pharaoh, CSV, lexical tables, fast_align input, SVG heatmaps,
// reverse models and --output-dir.
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
using nmt::test::train_args;
using nmt::test::lines_of;
using nmt::test::split_bars;
using nmt::test::csv_fields;

const std::string kDemo = std::string(NMT_SOURCE_DIR) + "/data/demo";

TEST(CliTest, AlignStatisticalWritesLinksInsideEachPairAndScoresThem) {
  const auto dir = temp_dir("cli_ibm2");
  for (const std::string how : {"--aligner ibm2 --symmetrize grow-diag-final-and",
                                "--aligner hmm --symmetrize average --method threshold", "--aligner hmm"}) {
    SCOPED_TRACE(how);
    auto r = run("nmt-align", how + " --format pharaoh --src " + quote(kDemo + "/test.src") + " --tgt " +
                                  quote(kDemo + "/test.tgt") + " --ibm-train-src " + quote(kDemo + "/train.src") +
                                  " --ibm-train-tgt " + quote(kDemo + "/train.tgt") + " --eval-gold " +
                                  quote(kDemo + "/test.align") + " -o " + quote(dir + "/links.txt"),
                 dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto src = lines_of(read_bytes(kDemo + "/test.src")), tgt = lines_of(read_bytes(kDemo + "/test.tgt"));
    const auto links = lines_of(read_bytes(dir + "/links.txt"));
    ASSERT_EQ(links.size(), src.size());
    for (size_t k = 0; k < links.size(); ++k) {
      const auto gold = nmt::parse_gold_line(links[k], "links.txt", static_cast<int64_t>(k + 1), false);
      for (const auto& [i, j] : gold.sure) {
        EXPECT_LT(i, static_cast<int>(nmt::split_ws(src[k]).size())) << "pair " << k;
        EXPECT_LT(j, static_cast<int>(nmt::split_ws(tgt[k]).size())) << "pair " << k;
      }
    }
    // The demo's generator links are nearly one-to-one; a working aligner gets most.
    const std::regex aer_re(R"(AER ([0-9.]+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, aer_re)) << r.err;
    EXPECT_LT(std::stod(m[1]), 0.3) << r.err;
  }
}

TEST(CliTest, AlignFreeModeShowsTheAttentionOfTheModelsOwnTranslation) {
  const auto dir = temp_dir("cli_free");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  auto tr = run("nmt-translate", "-m " + quote(ckpt) + " --threads 1", dir, dir + "/a.src");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const auto hyps = lines_of(tr.out);
  auto r = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  std::vector<std::vector<std::string>> blocks(1);
  for (const auto& l : lines_of(r.out)) {
    if (l.empty()) blocks.emplace_back();
    else blocks.back().push_back(l);
  }
  ASSERT_EQ(blocks.size(), 2u) << r.out;
  for (size_t k = 0; k < blocks.size(); ++k) {
    // Rows are the pieces of the translation nmt-translate gives, then </s>.
    auto want = loaded.tgt_tok.pieces(hyps[k]);
    want.push_back("</s>");
    ASSERT_EQ(blocks[k].size(), want.size() + 1) << r.out;
    for (size_t t = 0; t < want.size(); ++t) {
      const auto row = csv_fields(blocks[k][t + 1]);
      EXPECT_EQ(row[0], want[t]) << "pair " << k << " row " << t;
      double sum = 0;
      for (size_t j = 1; j < row.size(); ++j) sum += std::stod(row[j]);
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
}

// Free mode in pharaoh form names the translation the links refer to, as
// marian-decoder --alignment does; the tidy CSV of both pairs is one table.
TEST(CliTest, AlignFreeModePharaohGivesTranslationAndLinks) {
  const auto dir = temp_dir("cli_free_pharaoh");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  auto tr = run("nmt-translate", "-m " + quote(ckpt) + " --threads 1", dir, dir + "/a.src");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const auto hyps = lines_of(tr.out);
  auto r = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 -f pharaoh --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const std::vector<size_t> src_words = {5, 2};
  for (size_t k = 0; k < lines.size(); ++k) {
    const auto parts = split_bars(lines[k]);
    ASSERT_EQ(parts.size(), 2u) << lines[k];
    EXPECT_EQ(parts[0], hyps[k]);
    const auto links = nmt::parse_gold_line(parts[1], "out", static_cast<int64_t>(k + 1), false);
    EXPECT_FALSE(links.sure.empty()) << lines[k];
    for (const auto& [i, j] : links.sure) {
      EXPECT_LT(i, static_cast<int>(src_words[k])) << lines[k];
      EXPECT_LT(j, static_cast<int>(nmt::split_ws(hyps[k]).size())) << lines[k];
    }
  }
  auto tidy = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 -f tidy --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(tidy.exit_code, 0) << tidy.err;
  const auto rows = lines_of(tidy.out);
  ASSERT_GT(rows.size(), 1u);
  EXPECT_EQ(rows[0], "pair,tgt_index,tgt_token,src_index,src_token,weight");
  std::set<std::string> pairs;
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(csv_fields(rows[i]).size(), 6u) << rows[i];
    pairs.insert(csv_fields(rows[i])[0]);
  }
  EXPECT_EQ(pairs, (std::set<std::string>{"0", "1"}));
}

TEST(CliTest, AlignWritesALexicalTableThatTranslateReadsAsAShortlist) {
  const auto dir = temp_dir("cli_lex");
  const auto files = nmt::test::write_toy_corpus(dir, 300, 20);
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  auto r = run("nmt-align", "--aligner ibm2 --format lex --lex-best 5 -m " + quote(ckpt) + " --src " +
                                quote(files.train_src) + " --tgt " + quote(files.train_tgt) + " -o " +
                                quote(dir + "/lex.tsv"),
               dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto table = lines_of(read_bytes(dir + "/lex.tsv"));
  ASSERT_FALSE(table.empty());
  std::map<std::string, int> per_source;
  for (const auto& line : table) {
    const auto cols = nmt::split_ws(line);  // pieces hold no ASCII whitespace
    ASSERT_EQ(cols.size(), 3u) << line;
    const double p = std::stod(cols[2]);
    EXPECT_TRUE(p > 0 && p <= 1) << line;
    EXPECT_LE(++per_source[cols[0]], 5) << line;
  }
  // Whole vocabulary as frequent pieces: the shortlist changes nothing.
  const std::string common = "-m " + quote(ckpt) + " -i " + quote(files.valid_src) + " --threads 1";
  r = run("nmt-translate", common + " -o " + quote(dir + "/plain.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("nmt-translate",
          common + " --shortlist " + quote(dir + "/lex.tsv") + " --shortlist-frequent 100000 -o " + quote(dir + "/all.txt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_bytes(dir + "/plain.txt"), read_bytes(dir + "/all.txt"));
  // The table's own candidates: every line translated.
  r = run("nmt-translate", common + " -b 3 --shortlist " + quote(dir + "/lex.tsv") + " -o " + quote(dir + "/listed.txt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(read_bytes(dir + "/listed.txt")).size(), lines_of(read_bytes(files.valid_src)).size());
  // A broken table: one line naming the file and line, and the output file untouched.
  nmt::test::write_lines(dir + "/bad.tsv", {table[0], "only\ttwo"});
  r = run("nmt-translate", common + " --shortlist " + quote(dir + "/bad.tsv") + " -o " + quote(dir + "/plain.txt"), dir);
  nmt::test::expect_one_line_error(r, {"bad.tsv:2:", "expected source_piece<TAB>target_piece<TAB>probability"});
  EXPECT_FALSE(read_bytes(dir + "/plain.txt").empty());
}

// nmt-align reads fast_align's "source ||| target" lines, from --pairs or
// from stdin when no other input is given.
TEST(CliTest, AlignReadsFastAlignPairs) {
  const auto dir = temp_dir("cli_fast_align");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  write_lines(dir + "/a.tgt", {"dogo bigo seeso cato redo", "fisho oldo"});
  write_lines(dir + "/pairs.txt", {"red cat sees big dog ||| dogo bigo seeso cato redo", "old fish|||fisho oldo"});
  const std::string m = "-m " + quote(ckpt) + " --threads 1 -f pharaoh";
  auto files = run("nmt-align", m + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt"), dir);
  ASSERT_EQ(files.exit_code, 0) << files.err;
  ASSERT_EQ(lines_of(files.out).size(), 2u) << files.out;
  auto pairs = run("nmt-align", m + " --pairs " + quote(dir + "/pairs.txt"), dir);
  ASSERT_EQ(pairs.exit_code, 0) << pairs.err;
  EXPECT_EQ(pairs.out, files.out);
  auto piped = run("nmt-align", m, dir, dir + "/pairs.txt");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, files.out);
  auto ibm = run("nmt-align", "--aligner ibm2", dir, dir + "/pairs.txt");
  ASSERT_EQ(ibm.exit_code, 0) << ibm.err;
  EXPECT_EQ(lines_of(ibm.out).size(), 2u) << ibm.out;
  write_lines(dir + "/bad.txt", {"red cat ||| cato redo", "no bars here"});
  expect_one_line_error(run("nmt-align", m + " --pairs " + quote(dir + "/bad.txt"), dir), {"bad.txt:2:", "|||"});
}

// Collects what an SVG's <text> elements say and where they stand.
struct SvgText {
  std::string content, anchor = "start", transform;
  double x = 0, font_size = 0;
  bool bold = false;
};
struct SvgScan {
  double width = 0, font_size = 0;
  std::vector<SvgText> texts;
  int depth = 0;  // inside a <text> (its <tspan>s included)
};

SvgScan scan_svg(const std::string& svg, bool* well_formed) {
  SvgScan scan;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &scan);
  XML_SetElementHandler(
      p,
      [](void* data, const XML_Char* name, const XML_Char** attrs) {
        auto* s = static_cast<SvgScan*>(data);
        std::map<std::string, std::string> a;
        for (int i = 0; attrs[i] != nullptr; i += 2) a[attrs[i]] = attrs[i + 1];
        const std::string n = name;
        if (n == "svg") {
          s->width = std::stod(a["width"]);
          s->font_size = std::stod(a["font-size"]);
        } else if (n == "text") {
          SvgText t;
          t.x = std::stod(a["x"]);
          t.font_size = a.count("font-size") ? std::stod(a["font-size"]) : s->font_size;
          if (a.count("text-anchor")) t.anchor = a["text-anchor"];
          t.transform = a["transform"];
          t.bold = a["font-weight"] == "bold";
          s->texts.push_back(t);
          s->depth = 1;
        } else if (s->depth > 0) {
          ++s->depth;
        }
      },
      [](void* data, const XML_Char*) {
        auto* s = static_cast<SvgScan*>(data);
        if (s->depth > 0) --s->depth;
      });
  XML_SetCharacterDataHandler(p, [](void* data, const XML_Char* text, int len) {
    auto* s = static_cast<SvgScan*>(data);
    if (s->depth > 0) s->texts.back().content.append(text, static_cast<size_t>(len));
  });
  *well_formed = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(*well_formed) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p);
  XML_ParserFree(p);
  return scan;
}

// A heatmap holds every line of its text: the picture is at least as wide
// as each horizontal text needs at an estimate of 0.55 em a character (what
// sans-serif text takes on average; bold a tenth more), and its title names
// the pair, the mode, the level and the model.
void expect_heatmap_holds_its_text(const std::string& path, const std::vector<std::string>& title_parts) {
  SCOPED_TRACE(path);
  const std::string svg = read_bytes(path);
  bool ok = false;
  const SvgScan scan = scan_svg(svg, &ok);
  ASSERT_TRUE(ok) << svg;
  ASSERT_GT(scan.width, 0);
  std::string title;
  double longest = 0;
  for (const auto& t : scan.texts) {
    if (!t.transform.empty()) continue;  // labels read upwards: their height is the picture's
    const double w = static_cast<double>(nmt::utf8_length(t.content)) * t.font_size * 0.55 * (t.bold ? 1.1 : 1.0);
    const double right = t.anchor == "end" ? t.x : t.anchor == "middle" ? t.x + w / 2 : t.x + w;
    const double left = t.anchor == "end" ? t.x - w : t.anchor == "middle" ? t.x - w / 2 : t.x;
    EXPECT_LE(right, scan.width) << "'" << t.content << "' runs past the right edge";
    EXPECT_GE(left, 0) << "'" << t.content << "' runs past the left edge";
    longest = std::max(longest, w);
    if (t.content.rfind("pair ", 0) == 0) title = t.content;
  }
  EXPECT_GE(scan.width, longest);
  for (const auto& part : title_parts) EXPECT_NE(title.find(part), std::string::npos) << part << " not in '" << title << "'";
}

TEST(CliTest, HeatmapOfAThreeWordPairHoldsItsTextAndSaysWhatItShows) {
  const auto dir = temp_dir("cli_heatmap");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees"});
  write_lines(dir + "/a.tgt", {"seeso cato redo"});
  const std::string base = "-m " + quote(ckpt) + " --threads 1 --src " + quote(dir + "/a.src");
  auto r = run("nmt-align", base + " --tgt " + quote(dir + "/a.tgt") + " --format svg --output-dir " + quote(dir + "/p"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string model = fs::path(ckpt).filename().string();
  expect_heatmap_holds_its_text(dir + "/p/0001.svg", {"pair 1", "forced", "piece level", model});
  EXPECT_NE(read_bytes(dir + "/p/0001.svg").find("subword pieces"), std::string::npos);
  r = run("nmt-align", base + " --level word --format svg --output-dir " + quote(dir + "/w"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_heatmap_holds_its_text(dir + "/w/0001.svg", {"pair 1", "free", "word level", model});
}

// --reverse-model must translate back: a model of -m's own direction (the
// same file, or one trained the same way) is refused, naming the file and
// why; the model trained the other way is taken.
TEST(CliTest, AlignRefusesAReverseModelOfTheForwardDirection) {
  const auto dir = temp_dir("cli_reverse_dir");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  auto r = run("nmt-train", train_args(f, dir + "/fwd") + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nmt::test::ToyFiles back{f.train_tgt, f.train_src, f.valid_tgt, f.valid_src};
  r = run("nmt-train", train_args(back, dir + "/rev") + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("nmt-train", train_args(f, dir + "/fwd2") + " --max-steps 2 --seed 5", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string pair = " --src " + quote(f.valid_src) + " --tgt " + quote(f.valid_tgt) +
                           " --symmetrize intersection --format pharaoh --threads 1 -m " + quote(dir + "/fwd/best.ckpt");
  for (const std::string& wrong : {dir + "/fwd/best.ckpt", dir + "/fwd2/best.ckpt"}) {
    r = run("nmt-align", pair + " --reverse-model " + quote(wrong), dir);
    expect_one_line_error(r, {wrong + ": translates in the direction of -m " + dir + "/fwd/best.ckpt, not back",
                              "--reverse-model takes the model trained from -m's target language"});
  }
  r = run("nmt-align", pair + " --reverse-model " + quote(dir + "/rev/best.ckpt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 5u) << r.out;
}

// A shorter run into an --output-dir of an earlier one removes the earlier
// run's per-pair files beyond its own, and says so; files that are not
// named as nmt names them stay.
TEST(CliTest, AlignOutputDirHoldsOnlyThisRunsPairs) {
  const auto dir = temp_dir("cli_stale_pairs");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  const auto m = " -m " + quote(nmt::test::trained_toy_checkpoint()) + " --threads 1 --tgt " + quote(f.valid_tgt);
  const auto pairs = dir + "/pairs";
  auto r = run("nmt-align", m + " --src " + quote(f.valid_src) + " --output-dir " + quote(pairs), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"0001.csv", "0003.csv", "0005.csv"}) EXPECT_TRUE(fs::exists(pairs + "/" + name)) << name;
  const std::vector<std::string> mine = {"notes.csv", "0004 (copy).csv", "12.csv", "00004.csv", "0004.txt"};
  for (const auto& name : mine) write_bytes(pairs + "/" + name, "mine");
  r = run("nmt-align", m + " --src " + quote(f.valid_src) + " --max-pairs 2 --output-dir " + quote(pairs), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(pairs + ": removed 3 per-pair files of an earlier, longer run (0003.csv .. 0005.csv)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(pairs + "/0002.csv"));
  for (const char* name : {"0003.csv", "0004.csv", "0005.csv"}) EXPECT_FALSE(fs::exists(pairs + "/" + name)) << name;
  for (const auto& name : mine) EXPECT_EQ(read_bytes(pairs + "/" + name), "mine") << name;
}

}  // namespace
