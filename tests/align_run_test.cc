// Alignments of a trained tiny model: forced attention, sides cut to whole
// words, the alignment head, and run_alignment()'s output and scores (the
// matrices and their formats: align_test.cc).
#include "tools/align.h"

#include <expat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/utf8.h"
#include "model/checkpoint.h"
#include "test_util.h"
#include "text/corpus.h"

namespace {

using nmt::AttentionMatrix;
using nmt::Link;



// Options that align `src` with `tgt` (written to dir/s and dir/t) by the
// trained toy model into dir/links as Pharaoh lines, on one thread.
nmt::AlignRunOptions pharaoh_run(const std::string& dir, const std::vector<std::string>& src,
                                 const std::vector<std::string>& tgt) {
  nmt::test::write_lines(dir + "/s", src);
  nmt::test::write_lines(dir + "/t", tgt);
  nmt::AlignRunOptions opt;
  opt.model_path = nmt::test::trained_toy_checkpoint();
  opt.src = dir + "/s";
  opt.tgt = dir + "/t";
  opt.format = nmt::AlignFormat::kPharaoh;
  opt.output = dir + "/links";
  opt.runtime.threads = 1;
  return opt;
}

// Gold links of toy pairs: the toy target reverses the source word order.
std::vector<std::string> toy_gold(const std::vector<std::string>& src) {
  std::vector<std::string> gold;
  for (const auto& s : src) {
    const int n = static_cast<int>(nmt::split_ws(s).size());
    std::string g;
    for (int i = 0; i < n; ++i) g += (i ? " " : "") + std::to_string(i) + "-" + std::to_string(n - 1 - i);
    gold.push_back(g);
  }
  return gold;
}

TEST(AlignTest, ForcedAttentionRowsSumToOneOverRealSourcePieces) {
  auto loaded = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::Translator tr(loaded);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"red cat", "cato redo"}, {"old fish eats new tree house big", "bigo houseo treeo newo eatso fisho oldo"}};
  for (const auto& [src, tgt] : pairs) {
    const auto m = nmt::forced_attention(tr, src, tgt);
    EXPECT_EQ(m.src_tokens.size(), loaded.src_tok.pieces(src).size() + 1);  // pieces + </s>, no padding
    EXPECT_EQ(m.tgt_tokens.size(), loaded.tgt_tok.pieces(tgt).size() + 1);
    ASSERT_EQ(m.weights.size(), m.tgt_tokens.size());
    // A softmax's S weights sum to 1 within gamma_{S+2} (its sum and
    // division); merged into words by float sums, within gamma_S more.
    const double bound = 2 * nmt::test::gamma(static_cast<int64_t>(m.src_tokens.size()) + 2, 0x1p-24);
    for (const auto& row : m.weights) {
      ASSERT_EQ(row.size(), m.src_tokens.size());
      double sum = 0;
      for (float v : row) sum += v;
      EXPECT_TRUE(nmt::test::within(sum, 1.0, bound));
    }
    for (const auto& row : nmt::merge_to_words(m).weights) {
      double sum = 0;
      for (float v : row) sum += v;
      EXPECT_TRUE(nmt::test::within(sum, 1.0, bound));
    }
  }
  // The long pair's matrix is the same whether or not it is aligned after a short one.
  const auto a = nmt::forced_attention(tr, pairs[1].first, pairs[1].second);
  const auto b = nmt::forced_attention(tr, pairs[1].first, pairs[1].second);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_THROW(nmt::forced_attention(tr, "", "x"), nmt::Error);
}

// Forced attention in batches (pairs sorted by length, padded to the
// longest of each batch) gives each pair's matrix as it is alone, in the
// pairs' order: the same pieces, and weights within the rounding of the two
// paths (the products have other row counts).
TEST(AlignTest, ForcedAttentionInBatchesEqualsEachPairAlone) {
  auto loaded = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::Translator tr(loaded);
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(static_cast<int>(nmt::kForcedAlignBatch) + 9, 11, &src, &tgt);  // two batches
  const auto batched = nmt::forced_attention(tr, src, tgt);
  ASSERT_EQ(batched.size(), src.size());
  std::set<size_t> lengths;
  for (size_t i = 0; i < src.size(); ++i) {
    SCOPED_TRACE(src[i]);
    const auto alone = nmt::forced_attention(tr, src[i], tgt[i]);
    lengths.insert(alone.src_tokens.size());
    EXPECT_EQ(batched[i].src_tokens, alone.src_tokens);
    ASSERT_EQ(batched[i].tgt_tokens, alone.tgt_tokens);
    const auto S = static_cast<int64_t>(alone.src_tokens.size()), T = static_cast<int64_t>(alone.tgt_tokens.size());
    const double bound = nmt::test::model_rounding_bound(*loaded.model, nmt::test::model_depth(S, T));
    for (size_t t = 0; t < alone.weights.size(); ++t)
      EXPECT_TRUE(nmt::test::within(torch::tensor(batched[i].weights[t]), torch::tensor(alone.weights[t]), bound))
          << "row " << t;
  }
  EXPECT_GT(lengths.size(), 2u) << "the batches should pad pairs of several lengths";
  EXPECT_THROW(nmt::forced_attention(tr, src, std::vector<std::string>(2, "x")), nmt::Error);
  EXPECT_THROW(nmt::forced_attention(tr, std::vector<std::string>{"red cat", ""}, {"cato", "x"}), nmt::Error);
}

// run_alignment() aligns its input in chunks of kAlignChunk pairs: line k of
// its output is pair k's, across chunks (every target word linked once, to a
// source word of that pair), and it matches the pair aligned alone.
TEST(AlignTest, RunAlignmentKeepsPairOrderAcrossChunks) {
  const auto dir = nmt::test::temp_dir("align_chunks");
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(static_cast<int>(nmt::kAlignChunk) + 20, 13, &src, &tgt);
  const auto opt = pharaoh_run(dir, src, tgt);
  nmt::run_alignment(opt);
  const auto lines = nmt::read_lines(opt.output);
  ASSERT_EQ(lines.size(), src.size());
  auto loaded = nmt::load_checkpoint(opt.model_path, torch::kCPU);
  nmt::Translator tr(loaded);
  for (size_t k = 0; k < lines.size(); ++k) {
    const auto links = nmt::parse_gold_line(lines[k], "links", static_cast<int64_t>(k + 1), false).sure;
    const auto S = static_cast<int>(nmt::split_ws(src[k]).size()), T = static_cast<int>(nmt::split_ws(tgt[k]).size());
    std::set<int> linked;
    for (const auto& [i, j] : links) {
      EXPECT_LT(i, S) << "pair " << k;
      linked.insert(j);
    }
    EXPECT_EQ(links.size(), static_cast<size_t>(T)) << "pair " << k;
    EXPECT_EQ(linked.size(), static_cast<size_t>(T)) << "pair " << k;
  }
  // A gold file that ends early, in the first chunk or a later one, is named
  // with its line count and every pair's.
  const auto gold = toy_gold(src);
  for (size_t lines_given : {size_t{10}, nmt::kAlignChunk + 5}) {
    nmt::test::write_lines(dir + "/g", std::vector<std::string>(gold.begin(), gold.begin() + lines_given));
    auto scored = opt;
    scored.eval_gold = dir + "/g";
    EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::run_alignment(scored); }),
                                    std::to_string(lines_given) + " gold lines for " + std::to_string(src.size()) +
                                        " pairs"));
  }
  // The last chunk's last pair, aligned alone: the same argmax links unless
  // a row's two best words lie within the two paths' rounding (a word's
  // weight sums at most S piece weights, each within `bound`).
  const auto alone = nmt::forced_attention(tr, src.back(), tgt.back());
  const auto words = nmt::merge_to_words(alone);
  const auto S = static_cast<int64_t>(alone.src_tokens.size()), T = static_cast<int64_t>(alone.tgt_tokens.size());
  const double bound = static_cast<double>(S) * nmt::test::model_rounding_bound(*loaded.model, nmt::test::model_depth(S, T));
  double margin = 1;
  for (auto row : words.weights) {
    std::sort(row.begin(), row.end(), std::greater<>());
    if (row.size() > 1) margin = std::min<double>(margin, row[0] - row[1]);
  }
  if (margin > 2 * bound) {
    EXPECT_EQ(nmt::parse_gold_line(lines.back(), "links", 1, false).sure,
              nmt::hard_alignment(words, nmt::HardMethod::kArgmax));
  }
}

// A model with an alignment head aligns with the head in both modes: free
// mode aligns the model's own translation as forced mode would.
// --max-input-length in nmt-align: a side is cut after its last whole word
// within the limit (the pieces a model reads are then a prefix of the
// uncut side's), after its first word when even that one is longer, and
// forced_attention() cuts the pieces of such a word.
TEST(AlignTest, LongSidesAreCutAtWholeWordsWithinThePieceLimit) {
  auto loaded = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::Translator tr(loaded);
  const nmt::Tokenizer* tok = &loaded.src_tok;
  const std::string line = "old fishcat eats new treehouse big redcat";
  const auto all = tok->pieces(line);
  ASSERT_GT(all.size(), 7u) << "words of several pieces";
  std::string text = line;
  EXPECT_FALSE(nmt::crop_to_whole_words(&text, {tok}, static_cast<int64_t>(all.size())));
  EXPECT_EQ(text, line);
  EXPECT_FALSE(nmt::crop_to_whole_words(&text, {tok}, 0));  // 0: never
  for (int64_t max = 1; max < static_cast<int64_t>(all.size()); ++max) {
    text = line;
    SCOPED_TRACE(max);
    EXPECT_TRUE(nmt::crop_to_whole_words(&text, {tok, tok}, max));
    EXPECT_EQ(line.compare(0, text.size(), text), 0);  // a prefix of the line
    EXPECT_TRUE(text.size() == line.size() || line[text.size()] == ' ');  // ending at a word's end
    const auto pieces = tok->pieces(text);
    EXPECT_TRUE(std::equal(pieces.begin(), pieces.end(), all.begin()));
    const auto words = nmt::piece_words(all);
    const int64_t whole = words[static_cast<size_t>(max)];  // words before the first piece left out
    EXPECT_EQ(static_cast<int64_t>(nmt::split_ws(text).size()), std::max<int64_t>(1, whole));
    const auto m = nmt::forced_attention(tr, text, "cato redo", max);
    EXPECT_LE(static_cast<int64_t>(m.src_tokens.size()), max + 1);
  }
  // One word of many pieces: kept whole by the cut, its pieces cut by forced_attention().
  text = "redcatseesbigdogoldfish more";
  ASSERT_GT(tok->pieces("redcatseesbigdogoldfish").size(), 3u);
  EXPECT_TRUE(nmt::crop_to_whole_words(&text, {tok}, 3));
  EXPECT_EQ(text, "redcatseesbigdogoldfish");
  const auto m = nmt::forced_attention(tr, text, "cato redo", 3);
  EXPECT_EQ(m.src_tokens.size(), 4u);
  EXPECT_EQ(m.weights.size(), loaded.tgt_tok.pieces("cato redo").size() + 1);
}

TEST(AlignTest, AlignmentHeadServesForcedAndFreeModes) {
  auto plain = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  auto headed = plain;
  headed.options.alignment_head = 8;
  torch::manual_seed(5);
  headed.model = nmt::Seq2Seq(headed.options);
  {
    torch::NoGradGuard ng;
    auto from = plain.model->named_parameters();
    for (auto& p : headed.model->named_parameters())
      if (from.contains(p.key())) p.value().copy_(from[p.key()]);
  }
  nmt::Translator tp(plain), th(headed);
  const std::string src = "old fish eats new tree house big";
  std::string plain_translation, head_translation;
  const auto free_plain = nmt::free_attention(tp, src, {}, &plain_translation);
  const auto free_head = nmt::free_attention(th, src, {}, &head_translation);
  EXPECT_EQ(head_translation, plain_translation) << "the head leaves the translation alone";
  ASSERT_FALSE(head_translation.empty());
  const auto forced_head = nmt::forced_attention(th, src, head_translation);
  EXPECT_EQ(free_head.tgt_tokens, forced_head.tgt_tokens);
  EXPECT_EQ(free_head.weights, forced_head.weights);
  const auto forced_plain = nmt::forced_attention(tp, src, head_translation);
  ASSERT_EQ(forced_plain.weights.size(), forced_head.weights.size());
  EXPECT_NE(forced_plain.weights, forced_head.weights) << "forced mode reads the head, not the attention";
}

TEST(AlignTest, RunAlignmentPharaohOutputAgreesWithItsAer) {
  const auto dir = nmt::test::temp_dir("align_run");
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(20, 5, &src, &tgt);
  const auto gold = toy_gold(src);
  nmt::test::write_lines(dir + "/g", gold);
  auto opt = pharaoh_run(dir, src, tgt);
  opt.eval_gold = dir + "/g";
  const auto score = nmt::run_alignment(opt);
  const auto lines = nmt::read_lines(dir + "/links");
  ASSERT_EQ(lines.size(), src.size());
  std::vector<std::set<Link>> hyp;
  std::vector<nmt::GoldAlignment> g;
  for (size_t k = 0; k < lines.size(); ++k) {
    hyp.push_back(nmt::parse_gold_line(lines[k], "links", static_cast<int64_t>(k + 1), false).sure);
    g.push_back(nmt::parse_gold_line(gold[k], "g", static_cast<int64_t>(k + 1), false));
    EXPECT_EQ(hyp.back().size(), nmt::split_ws(tgt[k]).size()) << "argmax links every target word once";
  }
  EXPECT_DOUBLE_EQ(score.aer(), nmt::alignment_error_rate(hyp, g).aer());
}

TEST(AlignTest, RunAlignmentSymmetrizesWithAReverseModel) {
  // The toy model shares one vocabulary on both sides, so it can also read
  // the target as a source: the intersection lies inside the forward links
  // and those inside the union.
  const auto dir = nmt::test::temp_dir("align_sym");
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(12, 9, &src, &tgt);
  nmt::test::write_lines(dir + "/s", src);
  nmt::test::write_lines(dir + "/t", tgt);
  auto run = [&](nmt::Symmetrization how, const std::string& name) {
    nmt::AlignRunOptions opt;
    opt.model_path = nmt::test::trained_toy_checkpoint();
    if (how != nmt::Symmetrization::kNone) opt.reverse_model = opt.model_path;
    opt.symmetrize = how;
    opt.src = dir + "/s";
    opt.tgt = dir + "/t";
    opt.format = nmt::AlignFormat::kPharaoh;
    opt.output = dir + "/" + name;
    opt.runtime.threads = 1;
    nmt::run_alignment(opt);
    std::vector<std::set<Link>> links;
    for (const auto& line : nmt::read_lines(opt.output)) links.push_back(nmt::parse_gold_line(line, name, 1, false).sure);
    return links;
  };
  const auto fwd = run(nmt::Symmetrization::kNone, "fwd");
  const auto inter = run(nmt::Symmetrization::kIntersection, "inter");
  const auto uni = run(nmt::Symmetrization::kUnion, "union");
  ASSERT_EQ(fwd.size(), src.size());
  ASSERT_EQ(inter.size(), src.size());
  ASSERT_EQ(uni.size(), src.size());
  size_t strictly_smaller = 0;
  for (size_t k = 0; k < fwd.size(); ++k) {
    EXPECT_TRUE(std::includes(fwd[k].begin(), fwd[k].end(), inter[k].begin(), inter[k].end())) << k;
    EXPECT_TRUE(std::includes(uni[k].begin(), uni[k].end(), fwd[k].begin(), fwd[k].end())) << k;
    strictly_smaller += inter[k].size() < uni[k].size();
    // The reverse model's links are this pair's own (the pairs have several lengths).
    const auto S = static_cast<int>(nmt::split_ws(src[k]).size()), T = static_cast<int>(nmt::split_ws(tgt[k]).size());
    for (const auto& [i, j] : uni[k]) EXPECT_TRUE(i < S && j < T) << "pair " << k << ": " << i << "-" << j;
  }
  EXPECT_GT(strictly_smaller, 0u) << "a model reading its own output backwards disagrees somewhere";

  nmt::AlignRunOptions bad;
  bad.model_path = nmt::test::trained_toy_checkpoint();
  bad.src = dir + "/s";
  bad.symmetrize = nmt::Symmetrization::kUnion;
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::run_alignment(bad); }), "reverse model"));
  bad.reverse_model = bad.model_path;
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { nmt::run_alignment(bad); }), "forced mode"));
}

}  // namespace

