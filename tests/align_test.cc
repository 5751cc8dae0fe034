// Alignments from attention: word merging, hard links, gold parsing, AER,
// CSV quoting (round trip through a CSV parser) and SVG well-formedness
// (expat). A trained tiny model's attention: align_run_test.cc.
#include "tools/align.h"

#include <expat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "base/error.h"
#include "base/utf8.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "test_util.h"
#include "text/corpus.h"

namespace {

using nmt::AttentionMatrix;
using nmt::Link;

const std::string W = "\xe2\x96\x81";  // SentencePiece word mark


// Seq2Seq::alignment(), what forced alignment reads, runs forward_aligned()'s
// steps and leaves out the output layer: the same weights, bit for bit, with
// and without an alignment head, on every decoder and path.
TEST(AlignTest, ModelAlignmentAloneGivesForwardAlignedsWeights) {
  using Path = nmt::DecoderImpl::Path;
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  torch::NoGradGuard no_grad;
  for (const auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru})
    for (const int64_t head : {int64_t{0}, int64_t{8}}) {
      auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
      opt.decoder = decoder;
      opt.alignment_head = head;
      auto model = nmt::test::seeded_model(opt);
      for (const auto path : {Path::kPlain, Path::kOptimized, Path::kRecurrence}) {
        SCOPED_TRACE("decoder " + std::to_string(static_cast<int>(decoder)) + ", head " + std::to_string(head) +
                     ", path " + std::to_string(static_cast<int>(path)));
        model->decoder->set_path(path);
        const auto full = model->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out).second;
        EXPECT_TRUE(torch::equal(model->alignment(b.src, b.src_len, b.tgt_in, b.tgt_out), full));
      }
    }
}

TEST(AlignTest, MergeToWordsSumsSourcePiecesAndAveragesTargetPieces) {
  AttentionMatrix m;
  m.src_tokens = {W + "ab", "c", W + "d", "</s>"};      // words: abc, d, </s>
  m.tgt_tokens = {W + "x", W + "y", "z", "</s>"};        // words: x, yz, </s>
  m.weights = {{0.1f, 0.2f, 0.6f, 0.1f},
               {0.5f, 0.3f, 0.2f, 0.0f},
               {0.1f, 0.1f, 0.7f, 0.1f},
               {0.0f, 0.0f, 0.2f, 0.8f}};
  const auto w = nmt::merge_to_words(m);
  EXPECT_EQ(w.src_tokens, (std::vector<std::string>{"abc", "d", "</s>"}));
  EXPECT_EQ(w.tgt_tokens, (std::vector<std::string>{"x", "yz", "</s>"}));
  ASSERT_EQ(w.weights.size(), 3u);
  const std::vector<std::vector<float>> want = {{0.3f, 0.6f, 0.1f},
                                                {(0.8f + 0.2f) / 2, (0.2f + 0.7f) / 2, (0.0f + 0.1f) / 2},
                                                {0.0f, 0.2f, 0.8f}};
  for (size_t r = 0; r < 3; ++r) {
    float sum = 0;
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(w.weights[r][c], want[r][c], 1e-6) << r << "," << c;
      sum += w.weights[r][c];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-6);
  }
}

TEST(AlignTest, HardAlignmentArgmaxAndThresholdSkipEos) {
  AttentionMatrix w;
  w.src_tokens = {"a", "b", "</s>"};
  w.tgt_tokens = {"x", "y", "z", "</s>"};
  w.weights = {{0.7f, 0.2f, 0.1f}, {0.45f, 0.55f, 0.0f}, {0.1f, 0.1f, 0.8f}, {0.5f, 0.5f, 0.0f}};
  EXPECT_EQ(nmt::hard_alignment(w, nmt::HardMethod::kArgmax), (std::set<Link>{{0, 0}, {1, 1}, {0, 2}}));
  EXPECT_EQ(nmt::hard_alignment(w, nmt::HardMethod::kThreshold, 0.4),
            (std::set<Link>{{0, 0}, {0, 1}, {1, 1}}));
  EXPECT_EQ(nmt::to_pharaoh({{1, 1}, {0, 2}, {0, 0}}), "0-0 0-2 1-1");
  EXPECT_THROW(nmt::parse_hard_method("max"), nmt::Error);
}

TEST(AlignTest, ShiftRowsMovesRowsUpAndRepeatsTheLast) {
  nmt::AttentionMatrix m;
  m.src_tokens = {"a", "b", "</s>"};
  m.tgt_tokens = {"x", "y", "</s>"};
  m.weights = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  EXPECT_EQ(nmt::shift_rows(m, 0).weights, m.weights);
  EXPECT_EQ(nmt::shift_rows(m, 1).weights, (std::vector<std::vector<float>>{{0, 1, 0}, {0, 0, 1}, {0, 0, 1}}));
  EXPECT_EQ(nmt::shift_rows(m, 2).weights, (std::vector<std::vector<float>>{{0, 0, 1}, {0, 0, 1}, {0, 0, 1}}));
  EXPECT_EQ(nmt::shift_rows(m, 1).tgt_tokens, m.tgt_tokens);
  EXPECT_THROW(nmt::shift_rows(m, -1), nmt::Error);
}

TEST(AlignTest, SymmetrizationMatchesHandWorkedCases) {
  using S = nmt::Symmetrization;
  // Intersection {0-0, 1-1}; 1-2 neighbours 1-1 with target 2 unaligned, so
  // grow-diag takes it; 3-3 touches nothing chosen, so only -final(-and) add it.
  const std::set<Link> fwd{{0, 0}, {1, 1}, {1, 2}}, rev{{0, 0}, {1, 1}, {3, 3}};
  EXPECT_EQ(nmt::symmetrize(fwd, rev, S::kIntersection), (std::set<Link>{{0, 0}, {1, 1}}));
  EXPECT_EQ(nmt::symmetrize(fwd, rev, S::kUnion), (std::set<Link>{{0, 0}, {1, 1}, {1, 2}, {3, 3}}));
  EXPECT_EQ(nmt::symmetrize(fwd, rev, S::kGrowDiag), (std::set<Link>{{0, 0}, {1, 1}, {1, 2}}));
  EXPECT_EQ(nmt::symmetrize(fwd, rev, S::kGrowDiagFinalAnd), (std::set<Link>{{0, 0}, {1, 1}, {1, 2}, {3, 3}}));
  EXPECT_EQ(nmt::symmetrize(fwd, rev, S::kNone), fwd);
  // final vs final-and: 2-0 has an aligned target word, so only -final adds
  // it (forward links first); 2-2 then has an unaligned target word only.
  const std::set<Link> f2{{0, 0}, {2, 0}}, r2{{0, 0}, {2, 2}};
  EXPECT_EQ(nmt::symmetrize(f2, r2, S::kGrowDiag), (std::set<Link>{{0, 0}}));
  EXPECT_EQ(nmt::symmetrize(f2, r2, S::kGrowDiagFinalAnd), (std::set<Link>{{0, 0}, {2, 2}}));
  EXPECT_EQ(nmt::symmetrize(f2, r2, S::kGrowDiagFinal), (std::set<Link>{{0, 0}, {2, 0}, {2, 2}}));
  EXPECT_EQ(nmt::swap_links({{1, 2}, {3, 0}}), (std::set<Link>{{2, 1}, {0, 3}}));
  EXPECT_EQ(nmt::parse_symmetrization("grow-diag-final-and"), S::kGrowDiagFinalAnd);
  EXPECT_THROW(nmt::parse_symmetrization("gdfa"), nmt::Error);
}

TEST(AlignTest, AverageWithReverseMeansTheTransposedMatrix) {
  nmt::AttentionMatrix fwd, rev;
  fwd.src_tokens = {"a", "b", "</s>"};
  fwd.tgt_tokens = {"x", "</s>"};
  fwd.weights = {{0.6f, 0.4f, 0.0f}, {0.0f, 0.0f, 1.0f}};
  rev.src_tokens = {"x", "</s>"};
  rev.tgt_tokens = {"a", "b", "</s>"};
  rev.weights = {{0.2f, 0.8f}, {1.0f, 0.0f}, {0.0f, 1.0f}};
  const auto avg = nmt::average_with_reverse(fwd, rev);
  EXPECT_EQ(avg.src_tokens, fwd.src_tokens);
  EXPECT_FLOAT_EQ(avg.weights[0][0], 0.4f);
  EXPECT_FLOAT_EQ(avg.weights[0][1], 0.7f);
  EXPECT_FLOAT_EQ(avg.weights[1][2], 1.0f);
  EXPECT_EQ(nmt::hard_alignment(avg, nmt::HardMethod::kArgmax), (std::set<Link>{{1, 0}}));
  EXPECT_THROW(nmt::average_with_reverse(fwd, fwd), nmt::Error);
}

TEST(AlignTest, GoldLinesParseSureAndPossible) {
  auto g = nmt::parse_gold_line("0-0 1?2 3p4", "g.txt", 1, false);
  EXPECT_EQ(g.sure, (std::set<Link>{{0, 0}}));
  EXPECT_EQ(g.possible, (std::set<Link>{{0, 0}, {1, 2}, {3, 4}}));
  auto one = nmt::parse_gold_line("1-1 2p3", "g.talp", 1, true);
  EXPECT_EQ(one.sure, (std::set<Link>{{0, 0}}));
  EXPECT_EQ(one.possible, (std::set<Link>{{0, 0}, {1, 2}}));
  EXPECT_TRUE(nmt::parse_gold_line("", "g.txt", 1, false).possible.empty());
  try {
    nmt::parse_gold_line("0-0 1x2", "g.txt", 7, false);
    FAIL() << "no error";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("g.txt:7:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1x2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nmt::parse_gold_line("0-0 1-", "g.txt", 1, false), nmt::Error);
  EXPECT_THROW(nmt::parse_gold_line("1-0", "g.talp", 1, true), nmt::Error);  // 0 is not 1-based
}

TEST(AlignTest, AerMatchesHandComputedValues) {
  // Pair 1: A = {0-0, 1-1, 2-1}; S = {0-0, 1-2}; P = S + {2-1}.
  //   |A∩S| = 1, |A∩P| = 2. Pair 2: A = {0-0}; S = {0-0}: |A∩S| = |A∩P| = 1.
  // Totals: |A| = 4, |S| = 3, |A∩S| = 2, |A∩P| = 3.
  // P = 3/4, R = 2/3, AER = 1 - (2 + 3) / (4 + 3) = 2/7.
  std::vector<std::set<Link>> hyp = {{{0, 0}, {1, 1}, {2, 1}}, {{0, 0}}};
  std::vector<nmt::GoldAlignment> gold = {nmt::parse_gold_line("0-0 1-2 2?1", "g", 1, false),
                                          nmt::parse_gold_line("0-0", "g", 2, false)};
  const auto s = nmt::alignment_error_rate(hyp, gold);
  EXPECT_EQ(s.hyp, 4);
  EXPECT_EQ(s.sure, 3);
  EXPECT_EQ(s.hyp_sure, 2);
  EXPECT_EQ(s.hyp_possible, 3);
  EXPECT_DOUBLE_EQ(s.precision(), 0.75);
  EXPECT_DOUBLE_EQ(s.recall(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.aer(), 2.0 / 7.0);
  // Perfect links give AER 0; sizes must match.
  EXPECT_DOUBLE_EQ(nmt::alignment_error_rate({{{0, 0}}}, {gold[1]}).aer(), 0.0);
  EXPECT_THROW(nmt::alignment_error_rate(hyp, {gold[0]}), nmt::Error);
}

// RFC 4180 reader: quoted fields with doubled quotes, commas and newlines.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, in_quotes = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') { field += '"'; ++i; }
      else if (c == '"') in_quotes = false;
      else field += c;
    } else if (c == '"') { in_quotes = quoted = true; }
    else if (c == ',') { rows.back().push_back(field); field.clear(); quoted = false; }
    else if (c == '\n') { rows.back().push_back(field); field.clear(); quoted = false; rows.emplace_back(); }
    else field += c;
  }
  if (!field.empty() || quoted) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

AttentionMatrix awkward_matrix() {
  AttentionMatrix m;
  m.src_tokens = {"a,b", "\"q\"", "x\ny", "</s>"};
  m.tgt_tokens = {"\"\"", ",", "</s>"};
  m.weights = {{0.25f, 0.25f, 0.5f, 0.0f}, {0.0f, 1.0f, 0.0f, 0.0f}, {0.1f, 0.2f, 0.3f, 0.4f}};
  return m;
}

TEST(AlignTest, CsvRoundTripsThroughACsvParser) {
  const auto m = awkward_matrix();
  std::ostringstream out;
  nmt::write_csv(out, m);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), m.tgt_tokens.size() + 1) << out.str();
  ASSERT_EQ(rows[0].size(), m.src_tokens.size() + 1);
  EXPECT_EQ(rows[0][0], "");
  for (size_t j = 0; j < m.src_tokens.size(); ++j) EXPECT_EQ(rows[0][j + 1], m.src_tokens[j]);
  for (size_t t = 0; t < m.tgt_tokens.size(); ++t) {
    ASSERT_EQ(rows[t + 1].size(), m.src_tokens.size() + 1);
    EXPECT_EQ(rows[t + 1][0], m.tgt_tokens[t]);
    double sum = 0;
    for (size_t j = 0; j < m.src_tokens.size(); ++j) {
      EXPECT_NEAR(std::stod(rows[t + 1][j + 1]), m.weights[t][j], 1e-6);
      sum += std::stod(rows[t + 1][j + 1]);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(AlignTest, SvgIsWellFormedXmlWithOneCellPerWeight) {
  auto m = awkward_matrix();
  m.src_tokens[0] = "<&>";
  m.tgt_tokens[1] = std::string("ctl\x01");
  std::ostringstream out;
  nmt::write_svg(out, m);
  const std::string svg = out.str();
  struct Count { int rects = 0, texts = 0; } count;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &count);
  XML_SetStartElementHandler(p, [](void* data, const XML_Char* name, const XML_Char**) {
    auto* c = static_cast<Count*>(data);
    if (std::string(name) == "rect") ++c->rects;
    if (std::string(name) == "text") ++c->texts;
  });
  const bool ok = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(ok) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p) << "\n" << svg;
  XML_ParserFree(p);
  EXPECT_EQ(count.rects, 1 + 4 * 3 + 1);     // background, one per weight, the colour scale
  EXPECT_EQ(count.texts, 4 + 3 + 2 + 3 + 1);  // a label per token, two axis titles, the scale's ticks and title
  EXPECT_NE(svg.find("&lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("rgb(255,255,255)"), std::string::npos);  // weight 1 is white
  EXPECT_NE(svg.find("rgb(0,0,0)"), std::string::npos);        // weight 0 is black
}

// Pieces are labelled without SentencePiece's mark: a word-start piece bare,
// a piece continuing a word after a gray dot, and a note says so.
TEST(AlignTest, SvgShowsPiecesWithoutTheWordMark) {
  AttentionMatrix m;
  m.src_tokens = {"\u2581walk", "ing", "</s>"};
  m.tgt_tokens = {"\u2581geh", "en", "</s>"};
  m.weights = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  std::ostringstream out;
  nmt::write_svg(out, m);
  std::string svg = out.str();
  // Tooltips name the exact pieces; the labels never show the mark.
  std::string labels = std::regex_replace(svg, std::regex("<title>[^<]*</title>"), "");
  EXPECT_EQ(labels.find("\u2581"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">walk</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("\u00b7</tspan>ing</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("subword pieces"), std::string::npos);
  // Words (no mark anywhere) get no note.
  std::ostringstream words;
  nmt::write_svg(words, awkward_matrix());
  EXPECT_EQ(words.str().find("subword pieces"), std::string::npos);
}

// The tidy form of several pairs is one table: one header, six fields a
// row, and each target token's weights sum to 1.
TEST(AlignTest, TidyCsvOfSeveralPairsIsOneTable) {
  const auto m = awkward_matrix();
  std::ostringstream out;
  nmt::write_tidy_csv(out, m, 0, true);
  nmt::write_tidy_csv(out, m, 1, false);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 1 + 2 * 3 * 4) << out.str();
  EXPECT_EQ(rows[0], (std::vector<std::string>{"pair", "tgt_index", "tgt_token", "src_index", "src_token", "weight"}));
  std::map<std::pair<std::string, std::string>, double> sums;
  for (size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), 6u) << r;
    const size_t t = std::stoul(rows[r][1]), j = std::stoul(rows[r][3]);
    EXPECT_EQ(rows[r][2], m.tgt_tokens[t]);
    EXPECT_EQ(rows[r][4], m.src_tokens[j]);
    EXPECT_NEAR(std::stod(rows[r][5]), m.weights[t][j], 1e-6);
    sums[{rows[r][0], rows[r][1]}] += std::stod(rows[r][5]);
  }
  EXPECT_EQ(sums.size(), 2u * 3u);
  for (const auto& [key, sum] : sums) EXPECT_NEAR(sum, 1.0, 1e-5) << key.first << "/" << key.second;
}

}  // namespace
