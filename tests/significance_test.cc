// Bootstrap resampling (text/significance.h): the segments' statistics give
// the corpus scores bit for bit, the draws are the same on every platform,
// sacreBLEU's confidence estimate, and the paired test telling a real
// difference from noise. The tool's options and output: cli_scores_test.cc.
#include "text/significance.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/metrics.h"

namespace {

using Strings = std::vector<std::string>;

// `n` sentences of 4-12 words from a vocabulary of 40, seeded.
Strings random_sentences(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  Strings out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    for (uint32_t w = 0, len = 4 + gen() % 9; w < len; ++w) s += (w ? " " : "") + std::string("w") + std::to_string(gen() % 40);
    out.push_back(s);
  }
  return out;
}

// `refs` with each sentence replaced by an unrelated one with probability
// `wrong` percent (seeded; std::mt19937's sequence is the standard's, so
// the data is the same everywhere).
Strings degraded(const Strings& refs, uint32_t wrong, uint32_t seed) {
  std::mt19937 gen(seed);
  const Strings noise = random_sentences(refs.size(), seed + 1000);
  Strings out = refs;
  for (size_t i = 0; i < out.size(); ++i)
    if (gen() % 100 < wrong) out[i] = noise[i];
  return out;
}

TEST(SignificanceTest, SegmentStatisticsSumToTheCorpusScores) {
  const Strings refs = random_sentences(200, 1);
  const Strings hyps = degraded(refs, 40, 3);
  Strings second = random_sentences(200, 2);
  for (size_t i = 0; i < second.size(); i += 7) second[i].clear();  // some segments with one reference: nrefs var
  for (const auto& streams : {std::vector<Strings>{refs}, std::vector<Strings>{refs, second}}) {
    for (const nmt::BleuOptions& opt : {nmt::BleuOptions{}, nmt::BleuOptions{true, "none"}}) {
      const auto stats = nmt::bleu_statistics(hyps, streams, opt);
      ASSERT_EQ(stats.rows.size(), hyps.size());
      EXPECT_EQ(nmt::corpus_score(stats), nmt::corpus_bleu_multiref(hyps, streams, opt).score);  // bit for bit
    }
    const auto chrf = nmt::chrf_statistics(hyps, streams);
    EXPECT_EQ(nmt::corpus_score(chrf), nmt::corpus_chrf_multiref(hyps, streams).score);
  }
  EXPECT_THROW(nmt::bleu_statistics(hyps, {Strings(3)}), nmt::Error);  // the streams' layout is checked
  // An empty corpus: no rows, the corpus functions' zero.
  const auto none = nmt::bleu_statistics({}, {Strings{}});
  EXPECT_TRUE(none.rows.empty());
  EXPECT_EQ(nmt::corpus_score(none), nmt::corpus_bleu({}, {}).score);
  EXPECT_EQ(nmt::corpus_score(nmt::chrf_statistics({}, {Strings{}})), nmt::corpus_chrf({}, {}).score);
}

TEST(SignificanceTest, DrawsAreTheSameEverywhere) {
  // std::mt19937_64's sequence is the standard's, and the bounded draws are
  // nmt's own: these are the draws on any platform and library.
  const auto draws = nmt::bootstrap_draws(10, {3, 12345});
  const std::vector<std::vector<uint32_t>> pinned = {
      {8, 1, 9, 3, 8, 5, 9, 9, 9, 1}, {4, 8, 4, 3, 1, 8, 9, 4, 8, 3}, {3, 3, 8, 1, 2, 1, 7, 5, 7, 3}};
  EXPECT_EQ(draws, pinned);
  EXPECT_NE(nmt::bootstrap_draws(10, {3, 12346}), pinned);
  for (const auto& draw : nmt::bootstrap_draws(7, {50, 1}))
    for (uint32_t i : draw) EXPECT_LT(i, 7u);
  EXPECT_THROW(nmt::bootstrap_draws(10, {0, 1}), nmt::Error);
  // The first draws of more samples are those of fewer.
  const auto more = nmt::bootstrap_draws(10, {5, 12345});
  EXPECT_EQ(std::vector<std::vector<uint32_t>>(more.begin(), more.begin() + 3), pinned);
  // Bounds where about a quarter of the products are rejected (2^32 mod n
  // is 2^30): the rejection step runs, and its values are pinned too.
  std::mt19937_64 gen(7);
  std::vector<uint32_t> big;
  for (int k = 0; k < 8; ++k) big.push_back(nmt::detail::uniform_below(gen, 3u << 30));
  const std::vector<uint32_t> pinned_big = {2962039613u, 1537708297u, 407834074u,  2743049656u,
                                            2625496869u, 1774909728u, 1800745780u, 785612520u};
  EXPECT_EQ(big, pinned_big);  // nine draws of the generator: one product rejected
  for (uint32_t v : big) EXPECT_LT(v, 3u << 30);
  std::mt19937_64 one(1);
  EXPECT_EQ(nmt::detail::uniform_below(one, 1), 0u);
}

TEST(SignificanceTest, TheEstimateIsSacreBleusInterval) {
  std::vector<double> scores;
  for (int i = 40; i >= 1; --i) scores.push_back(i);  // unsorted on purpose
  const auto e = nmt::estimate_of(scores);
  EXPECT_DOUBLE_EQ(e.mean, 20.5);
  EXPECT_DOUBLE_EQ(e.ci, 0.5 * (39 - 2));  // the 2nd lowest and the 2nd highest of 40 (n / 40 = 1)
  EXPECT_DOUBLE_EQ(nmt::estimate_of({7.0}).ci, 0.0);
  EXPECT_THROW(nmt::estimate_of({}), nmt::Error);
}

TEST(SignificanceTest, ThePairedTestTellsADifferenceFromNoise) {
  const Strings refs = random_sentences(500, 11);
  const nmt::BootstrapOptions draws;
  const auto bleu = [&](const Strings& h) { return nmt::bleu_statistics(h, {refs}); };
  const Strings good = degraded(refs, 30, 12), bad = degraded(refs, 60, 13);
  const auto clear = nmt::paired_bootstrap(bleu(good), bleu(bad), draws);
  EXPECT_GT(clear.system, clear.baseline + 10);
  EXPECT_DOUBLE_EQ(clear.p_value, 1.0 / 1001);  // no draw reverses a gap this wide
  EXPECT_LT(clear.baseline_estimate.mean, clear.system_estimate.mean);
  EXPECT_GT(clear.system_estimate.ci, 0);
  // One sentence of 500 changed: a difference the draws cannot tell from chance.
  Strings almost = good;
  almost[0] = refs[0] == good[0] ? bad[1] : refs[0];
  const auto noise = nmt::paired_bootstrap(bleu(almost), bleu(good), draws);
  EXPECT_NE(noise.system, noise.baseline);
  EXPECT_GT(noise.p_value, 0.05);  // not significant at the usual level
  // A system against itself: p = 1 (ties count), its estimate its own.
  const auto same = nmt::paired_bootstrap(bleu(good), bleu(good), draws);
  EXPECT_EQ(same.p_value, 1.0);
  EXPECT_EQ(same.system_estimate.mean, same.baseline_estimate.mean);
  EXPECT_EQ(same.system_estimate.mean, nmt::estimate_of(nmt::resampled_scores(bleu(good), draws)).mean);
  EXPECT_THROW(nmt::paired_bootstrap(bleu(good), nmt::bleu_statistics(Strings(3, "a"), {Strings(3, "a")}), draws),
               nmt::Error);
}

}  // namespace
