// The statistical (fast_align-style IBM Model 2) word aligner on corpora
// whose true links are known.
#include "text/word_aligner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"

namespace {

using nmt::Link;

// Pairs from a word-for-word dictionary ("wK" -> "vK") whose target swaps
// every two neighbouring words; `links` gets the true links.
void dictionary_corpus(int n, uint64_t seed, std::vector<std::string>* src, std::vector<std::string>* tgt,
                       std::vector<std::set<Link>>* links) {
  std::mt19937_64 rng(seed);
  for (int k = 0; k < n; ++k) {
    const int len = 2 + static_cast<int>(rng() % 7);
    std::vector<int> words(len);
    for (auto& w : words) w = static_cast<int>(rng() % 30);
    std::string s, t;
    std::set<Link> l;
    for (int i = 0; i < len; ++i) {
      const int j = (i % 2 == 0) ? (i + 1 < len ? i + 1 : i) : i - 1;  // swapped position of source word i
      s += (i ? " w" : "w") + std::to_string(words[i]);
      l.insert({i, j});
    }
    for (int j = 0; j < len; ++j) {
      int i = 0;
      for (const auto& [si, tj] : l)
        if (tj == j) i = si;
      t += (j ? " v" : "v") + std::to_string(words[i]);
    }
    src->push_back(s);
    tgt->push_back(t);
    links->push_back(l);
  }
}

TEST(WordAlignerTest, RecoversADictionaryWithLocalReordering) {
  std::vector<std::string> src, tgt;
  std::vector<std::set<Link>> links;
  dictionary_corpus(400, 3, &src, &tgt, &links);
  const auto aligner = nmt::WordAligner::train(src, tgt);
  int correct = 0, total = 0;
  for (size_t k = 0; k < src.size(); ++k) {
    const auto got = aligner.align(src[k], tgt[k]);
    for (const auto& l : links[k]) correct += got.count(l);
    total += static_cast<int>(links[k].size());
    EXPECT_LE(got.size(), links[k].size()) << "one link per target word at most";
  }
  // Repeated words in a sentence make a few links ambiguous; the rest must be right.
  EXPECT_GT(static_cast<double>(correct) / total, 0.95) << correct << " of " << total;
  EXPECT_GT(aligner.log_translation("w3", "v3"), aligner.log_translation("w3", "v4") + 2);
  EXPECT_TRUE(std::isinf(aligner.log_translation("unseen", "v3")));
  EXPECT_TRUE(aligner.align("unseen words", "v1 v2").empty());
}

TEST(WordAlignerTest, DiagonalPriorBreaksTiesTowardsTheDiagonal) {
  // "a a" <-> "b b": translation alone cannot tell the links apart.
  const auto aligner = nmt::WordAligner::train({"a a", "a"}, {"b b", "b"});
  EXPECT_EQ(aligner.align("a a", "b b"), (std::set<Link>{{0, 0}, {1, 1}}));
}

TEST(WordAlignerTest, LexicalTableRanksEachSourceWordsTranslations) {
  std::vector<std::string> src, tgt;
  std::vector<std::set<Link>> links;
  dictionary_corpus(400, 3, &src, &tgt, &links);
  const auto a = nmt::WordAligner::train(src, tgt);
  const auto table = a.lexical_table(3, 0.0);
  ASSERT_FALSE(table.empty());
  std::set<std::string> sources;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& e = table[i];
    EXPECT_NE(e.source, "") << "NULL is not a source word of the table";
    EXPECT_GT(e.prob, 0.0);
    EXPECT_LE(e.prob, 1.0);
    EXPECT_NEAR(std::log(e.prob), a.log_translation(e.source, e.target), 1e-5);
    if (i == 0 || table[i - 1].source != e.source) {
      EXPECT_TRUE(sources.insert(e.source).second) << e.source << "'s entries are not together";
      if (i > 0) {
        EXPECT_LT(table[i - 1].source, e.source) << "source words not in byte order";
      }
      // The dictionary's translation comes first: "wK" -> "vK".
      EXPECT_EQ(e.target, "v" + e.source.substr(1)) << e.source;
    } else {
      EXPECT_GE(table[i - 1].prob, e.prob) << e.source << " not most probable first";
    }
  }
  EXPECT_EQ(sources.size(), 30u);
  for (const auto& s : sources)
    EXPECT_LE(std::count_if(table.begin(), table.end(), [&](const auto& e) { return e.source == s; }), 3);
  // A probability floor drops the rest.
  for (const auto& e : a.lexical_table(100, 0.5)) EXPECT_GE(e.prob, 0.5);
}

TEST(WordAlignerTest, RejectsBadInput) {
  EXPECT_THROW(nmt::WordAligner::train({"a"}, {"b", "c"}), nmt::Error);
  nmt::WordAlignerOptions o;
  o.null_prob = 1.5;
  EXPECT_THROW(nmt::WordAligner::train({"a"}, {"b"}, o), nmt::Error);
}

}  // namespace
