// Minimum Bayes-risk selection (translate/mbr.h) and the sentence-level
// metrics it weighs (pairwise_sentence_bleu, pairwise_sentence_chrf in
// text/metrics.h). The BLEU values of short segments are worked out by hand
// from sacreBLEU's compute_bleu ('exp' smoothing, effective order: the mean
// of the logs over the orders the hypothesis has n-grams of).
#include "translate/mbr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/metrics.h"

namespace {

// Segments of four tokens or more have n-grams of every order: their
// sentence BLEU is the corpus BLEU of the one segment, bit for bit, in both
// directions of every pair, and chrF's always is.
TEST(PairwiseMetricsTest, EqualTheCorpusScoreOfOnePair) {
  const std::vector<std::string> segs = {"a man sleeps on a green sofa .", "a man sleeps in a green room on a couch .",
                                         "two dogs run through the snow", "a man is sleeping on the sofa , green ."};
  const auto bleu = nmt::pairwise_sentence_bleu(segs);
  const auto chrf = nmt::pairwise_sentence_chrf(segs);
  ASSERT_EQ(bleu.size(), segs.size());
  ASSERT_EQ(chrf.size(), segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    for (size_t j = 0; j < segs.size(); ++j) {
      EXPECT_EQ(bleu[i][j], nmt::corpus_bleu({segs[i]}, {segs[j]}).score) << i << " " << j;
      EXPECT_EQ(chrf[i][j], nmt::corpus_chrf({segs[i]}, {segs[j]}).score) << i << " " << j;
    }
    EXPECT_DOUBLE_EQ(bleu[i][i], 100.0);
    EXPECT_DOUBLE_EQ(chrf[i][i], 100.0);
  }
  EXPECT_EQ(bleu[2][0], 0.0);  // no word in common: sacreBLEU's early stop
  EXPECT_NE(bleu[0][1], bleu[1][0]);  // the brevity penalty and precisions are the hypothesis'
}

// Shorter segments: the orders without n-grams are left out of the mean
// (sentence_bleu's effective order), where the corpus score would count
// them as zero.
TEST(PairwiseMetricsTest, SentenceBleuUsesTheEffectiveOrder) {
  const auto b = nmt::pairwise_sentence_bleu({"test", "a test", "a little test"});
  EXPECT_DOUBLE_EQ(b[0][1], 100 * std::exp(1.0 - 2.0));  // unigram precision 1, brevity penalty e^(1 - 2/1)
  EXPECT_DOUBLE_EQ(b[1][1], 100.0);                       // two orders, both matched
  // "a little test" against "a test": 2/3 unigrams; no bigram of 2 and no
  // trigram of 1 matched, smoothed to 100 / (2 * 2) and 100 / (4 * 1).
  EXPECT_NEAR(b[2][1], std::exp((std::log(200.0 / 3) + 2 * std::log(25.0)) / 3), 1e-12);
  EXPECT_NE(b[2][1], nmt::corpus_bleu({"a little test"}, {"a test"}).score);
  EXPECT_THROW(nmt::pairwise_sentence_bleu({"a"}, nmt::BleuOptions{false, "moses"}), nmt::Error);
}

nmt::MbrOptions options(nmt::MbrUtility u, double temperature) {
  nmt::MbrOptions o;
  o.utility = u;
  o.temperature = temperature;
  return o;
}

// U_i = sum_j p_j u(h_i, h_j) with p = softmax(score / T), computed here
// from the pairwise utilities.
TEST(MbrTest, ExpectedUtilitiesWeighThePairsByTheirProbabilities) {
  const std::vector<std::string> texts = {"a man sleeps on a sofa .", "a man sleeps on a couch .",
                                          "a man is sleeping on a sofa ."};
  const std::vector<double> scores = {-0.5, -0.9, -1.3};
  for (const auto utility : {nmt::MbrUtility::kBleu, nmt::MbrUtility::kChrf}) {
    const auto u = utility == nmt::MbrUtility::kBleu ? nmt::pairwise_sentence_bleu(texts)
                                                     : nmt::pairwise_sentence_chrf(texts);
    for (const double t : {0.5, 1.0, 3.0}) {
      const auto got = nmt::expected_utilities(texts, scores, options(utility, t));
      double z = 0;
      for (double s : scores) z += std::exp(s / t);
      ASSERT_EQ(got.size(), texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        double want = 0;
        for (size_t j = 0; j < texts.size(); ++j) want += std::exp(scores[j] / t) / z * u[i][j];
        EXPECT_NEAR(got[i], want, 1e-12 * 100) << i << " at T " << t;
      }
    }
  }
}

// A cold temperature puts the evidence on the model's best, which then wins
// (it agrees fully with itself); a hot one spreads it evenly, and the
// hypothesis that agrees with most of the others wins over a lone best.
TEST(MbrTest, TemperatureMovesThePickFromTheModelsBestToTheConsensus) {
  const std::vector<std::string> texts = {"the cat sat on the mat .", "a dog ran in the park .",
                                          "a dog ran in a park .", "a dog runs in the park ."};
  const std::vector<double> scores = {-0.1, -0.4, -0.5, -0.6};
  for (const auto utility : {nmt::MbrUtility::kBleu, nmt::MbrUtility::kChrf}) {
    std::vector<nmt::Hypothesis> cold(4), hot(4);
    for (size_t i = 0; i < 4; ++i) {
      cold[i].ids = {static_cast<int64_t>(i)};
      cold[i].norm_score = scores[i];
    }
    hot = cold;
    nmt::mbr_reorder(texts, &cold, options(utility, 1e-3), 4);
    nmt::mbr_reorder(texts, &hot, options(utility, 1e3), 2);
    ASSERT_EQ(cold.size(), 4u);
    EXPECT_EQ(cold.front().ids, std::vector<int64_t>{0});
    ASSERT_EQ(hot.size(), 2u);  // the first `keep`
    EXPECT_EQ(hot.front().ids, std::vector<int64_t>{1});  // "a dog ran in the park ." is nearest the other two
    for (size_t i = 0; i + 1 < cold.size(); ++i) EXPECT_GE(cold[i].mbr_utility, cold[i + 1].mbr_utility);
    EXPECT_GE(hot[0].mbr_utility, hot[1].mbr_utility);
  }
}

// Equal texts get equal utilities and keep the list's order (40 of them in
// pairs: a list long enough that an unstable sort would reorder some); a
// single hypothesis stays.
TEST(MbrTest, TiesKeepTheListsOrder) {
  std::vector<nmt::Hypothesis> hyps(40);
  std::vector<std::string> texts;
  for (size_t i = 0; i < hyps.size(); ++i) {
    hyps[i].ids = {static_cast<int64_t>(i)};
    hyps[i].norm_score = -1.0;
    texts.push_back("word " + std::to_string(i / 2) + " and more words");
  }
  nmt::mbr_reorder(texts, &hyps, options(nmt::MbrUtility::kChrf, 1.0), 40);
  ASSERT_EQ(hyps.size(), 40u);
  for (size_t k = 0; k + 1 < hyps.size(); ++k) {
    EXPECT_GE(hyps[k].mbr_utility, hyps[k + 1].mbr_utility);
    if (hyps[k].ids[0] / 2 == hyps[k + 1].ids[0] / 2) {  // one pair: equal utilities, the list's order
      EXPECT_EQ(hyps[k].mbr_utility, hyps[k + 1].mbr_utility);
      EXPECT_LT(hyps[k].ids[0], hyps[k + 1].ids[0]);
    }
  }
  std::vector<nmt::Hypothesis> one(1);
  nmt::mbr_reorder({""}, &one, options(nmt::MbrUtility::kBleu, 1.0), 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].mbr_utility, 0.0);  // an empty line's one empty hypothesis
}

// A score of -inf (a beam wider than the columns it chose from) weighs
// nothing; where all are -inf, all weigh the same.
TEST(MbrTest, HypothesesOfMinusInfinityWeighNothing) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::string> texts = {"a dog runs in the park .", "a cat sleeps on the sofa ."};
  const auto u = nmt::pairwise_sentence_chrf(texts);
  const auto got = nmt::expected_utilities(texts, {-2.0, -inf}, options(nmt::MbrUtility::kChrf, 1.0));
  EXPECT_EQ(got[0], u[0][0]);
  EXPECT_EQ(got[1], u[1][0]);
  const auto even = nmt::expected_utilities(texts, {-inf, -inf}, options(nmt::MbrUtility::kChrf, 1.0));
  EXPECT_NEAR(even[0], (u[0][0] + u[0][1]) / 2, 1e-12 * 100);
  EXPECT_NEAR(even[1], (u[1][0] + u[1][1]) / 2, 1e-12 * 100);
}

TEST(MbrTest, RefusesWhatItCannotWeigh) {
  const auto bleu = options(nmt::MbrUtility::kBleu, 1.0);
  EXPECT_THROW(nmt::expected_utilities({"a", "b"}, {0.0}, bleu), nmt::Error);
  EXPECT_THROW(nmt::expected_utilities({}, {}, bleu), nmt::Error);
  EXPECT_THROW(nmt::expected_utilities({"a", "b"}, {0.0, std::numeric_limits<double>::quiet_NaN()}, bleu), nmt::Error);
  EXPECT_THROW(nmt::expected_utilities({"a", "b"}, {0.0, std::numeric_limits<double>::infinity()}, bleu), nmt::Error);
  EXPECT_THROW(nmt::expected_utilities({"a"}, {0.0}, options(nmt::MbrUtility::kNone, 1.0)), nmt::Error);
}

}  // namespace
