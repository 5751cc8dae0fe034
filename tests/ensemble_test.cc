// Ensembles and checkpoint averaging: an ensemble of one model is that
// model, an ensemble's scores are the (weighted) mean of its members'
// per-step log-probabilities, and averaging copies of one checkpoint gives
// it back.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "engine/rnn_engine.h"
#include "search/scorer.h"
#include "translate/translator.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

// The trained toy model, and a second model of the same shape and
// tokenizers with other (random) weights.
struct Models {
  nmt::LoadedModel a = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::LoadedModel b = [this] {
    nmt::LoadedModel m = a;
    torch::manual_seed(42);
    m.model = nmt::Seq2Seq(a.options);
    m.model->eval();
    return m;
  }();
};

const std::vector<std::string> kSrc = {"red cat sees big dog", "old fish", "blue bird runs", "green tree house"};
const std::vector<std::string> kTgt = {"dogo bigo seeso cato redo", "fisho oldo", "runso birdo blueo",
                                       "houseo treeo greeno"};

// Beam search with `ens` (an ensemble of m.a and m.b) scores each line's best
// hypothesis as forced decoding of its text does, within the members'
// rounding bounds (search steps against teacher forcing: other products, in
// each member), on the lines whose text encodes back to its ids (at least one).
void expect_search_scores_as_forced_decoding(nmt::Translator& ens, Models& m) {
  nmt::TranslateOptions opt;
  opt.search.beam_size = 3;
  opt.search.length_penalty = 0;
  const auto hyps = ens.translate(kSrc, opt);
  int compared = 0;
  for (size_t i = 0; i < kSrc.size(); ++i) {
    const std::string text = ens.tgt_tokenizer().decode(hyps[i][0].ids);
    if (ens.tgt_tokenizer().encode(text) != hyps[i][0].ids) continue;  // decode/encode does not round-trip
    const auto S = static_cast<int64_t>(ens.encode_source(kSrc[i]).size());
    const auto T = static_cast<int64_t>(hyps[i][0].ids.size()) + 1;
    const double bound = std::max(nmt::test::score_rounding_bound(*m.a.model, S, T, hyps[i][0].score),
                                  nmt::test::score_rounding_bound(*m.b.model, S, T, hyps[i][0].score));
    EXPECT_TRUE(nmt::test::within(ens.score({kSrc[i]}, {text}, 1)[0], hyps[i][0].score, bound)) << kSrc[i];
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(EnsembleTest, AnEnsembleOfOneIsThatModel) {
  Models m;
  nmt::Translator alone(m.a), ensemble(std::vector<nmt::LoadedModel>{m.a});
  nmt::TranslateOptions opt;
  opt.search.beam_size = 3;
  opt.search.n_best = 3;
  const auto h1 = alone.translate(kSrc, opt), h2 = ensemble.translate(kSrc, opt);
  for (size_t i = 0; i < kSrc.size(); ++i) {
    ASSERT_EQ(h1[i].size(), h2[i].size());
    for (size_t r = 0; r < h1[i].size(); ++r) {
      EXPECT_EQ(h1[i][r].ids, h2[i][r].ids);
      EXPECT_EQ(h1[i][r].score, h2[i][r].score);  // the same steps and sums: the same bits
    }
  }
  // The scorer's step of one engine is that engine's log-softmax, bit for bit.
  torch::NoGradGuard ng;
  nmt::RnnEngine engine(m.a.model);
  nmt::Scorer scorer({std::make_shared<nmt::RnnEngine>(m.a.model)});
  std::vector<nmt::Example> ex(1);
  ex[0].src = alone.encode_source(kSrc[0]);
  const auto batch = nmt::make_batch(ex, {0}, false);
  auto state = scorer.start(batch);
  const auto y = torch::full({1}, nmt::kBosId, torch::kInt64);
  const auto logp = scorer.step(y, state);
  auto own = engine.start(batch, 1, {});
  EXPECT_TRUE(torch::equal(logp, torch::log_softmax(engine.step(y, own).logits, -1)));
}

TEST(EnsembleTest, TwoCopiesOfAModelTranslateAsTheModel) {
  Models m;
  nmt::Translator alone(m.a), twice(std::vector<nmt::LoadedModel>{m.a, m.a});
  nmt::TranslateOptions opt;
  opt.search.beam_size = 4;
  const auto h1 = alone.translate(kSrc, opt), h2 = twice.translate(kSrc, opt);
  for (size_t i = 0; i < kSrc.size(); ++i) {
    EXPECT_EQ(h1[i][0].ids, h2[i][0].ids) << kSrc[i];
    // The same steps of the same model twice, and (x + x) / 2 == x exactly: the same bits.
    EXPECT_EQ(h1[i][0].score, h2[i][0].score) << kSrc[i];
  }
}

TEST(EnsembleTest, ScoresAreTheMeanOfTheMembersPerStepLogProbabilities) {
  Models m;
  nmt::Translator ta(m.a), tb(m.b), ens(std::vector<nmt::LoadedModel>{m.a, m.b});
  const auto sa = ta.score(kSrc, kTgt, 2), sb = tb.score(kSrc, kTgt, 2), se = ens.score(kSrc, kTgt, 2);
  for (size_t i = 0; i < kSrc.size(); ++i) {
    // Forced decoding sums per-token log-probabilities, so the mean per step
    // sums to the mean of sums. The members' log-probabilities are the same
    // bits alone and in the ensemble; only the sums differ: T + 1 roundings
    // of terms whose magnitudes sum to |sa| + |sb| (all are <= 0).
    const auto T = static_cast<int64_t>(ens.tgt_tokenizer().encode(kTgt[i]).size()) + 1;
    EXPECT_TRUE(nmt::test::within(se[i], (sa[i] + sb[i]) / 2,
                                  nmt::test::gamma(T + 2, 0x1p-24) * (std::abs(sa[i]) + std::abs(sb[i]))))
        << kSrc[i];
    EXPECT_GT(std::abs(sa[i] - sb[i]), 1e-2) << "the members must differ for this test to mean anything";
  }
  // Beam search over the ensemble scores its hypotheses as forced decoding does.
  expect_search_scores_as_forced_decoding(ens, m);
}

TEST(EnsembleTest, WeightedScoresAreTheWeightedMeanOfTheMembers) {
  Models m;
  const std::vector<nmt::LoadedModel> both{m.a, m.b};
  nmt::Translator ta(m.a), tb(m.b), plain(both), weighted(both, {}, {3, 1});
  const auto sa = ta.score(kSrc, kTgt, 2), sb = tb.score(kSrc, kTgt, 2), sp = plain.score(kSrc, kTgt, 2),
             sw = weighted.score(kSrc, kTgt, 2);
  for (size_t i = 0; i < kSrc.size(); ++i) {
    // Per token fl(fl(0.75 a) + 0.25 b) (0.25 b is exact), then T of them
    // summed: at most gamma(T + 2) of 0.75 |sa| + 0.25 |sb| (every term is
    // <= 0). The reference's sa and sb are sums of T roundings each: at most
    // gamma(T) of the same. Both within gamma(T + 2) of |sa| + |sb|.
    const auto T = static_cast<int64_t>(weighted.tgt_tokenizer().encode(kTgt[i]).size()) + 1;
    const double bound = 2 * nmt::test::gamma(T + 2, 0x1p-24) * (std::abs(sa[i]) + std::abs(sb[i]));
    EXPECT_TRUE(nmt::test::within(sw[i], 0.75 * sa[i] + 0.25 * sb[i], bound)) << kSrc[i];
    // The weights move the score away from the plain mean, by (a - b) / 4.
    EXPECT_GT(std::abs(sw[i] - sp[i]), std::abs(sa[i] - sb[i]) / 4 - 2 * bound) << kSrc[i];
  }
  // Beam search under the weights scores its best hypothesis as forced decoding does.
  expect_search_scores_as_forced_decoding(weighted, m);
}

TEST(EnsembleTest, EqualWeightsAreThePlainMeanBitForBit) {
  Models m;
  const std::vector<nmt::LoadedModel> both{m.a, m.b};
  nmt::Translator plain(both), equal(both, {}, {2.5, 2.5});
  EXPECT_EQ(plain.score(kSrc, kTgt, 2), equal.score(kSrc, kTgt, 2));
  nmt::TranslateOptions opt;
  opt.search.beam_size = 3;
  opt.search.n_best = 3;
  const auto h1 = plain.translate(kSrc, opt), h2 = equal.translate(kSrc, opt);
  for (size_t i = 0; i < kSrc.size(); ++i) {
    ASSERT_EQ(h1[i].size(), h2[i].size());
    for (size_t r = 0; r < h1[i].size(); ++r) {
      EXPECT_EQ(h1[i][r].ids, h2[i][r].ids);
      EXPECT_EQ(h1[i][r].score, h2[i][r].score);
    }
  }
}

TEST(EnsembleTest, WeightsMustBeOnePositiveNumberPerMember) {
  Models m;
  const std::vector<nmt::LoadedModel> both{m.a, m.b};
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const auto count = error_of([&] { nmt::Translator(both, {}, {1}); });
  EXPECT_TRUE(contains(count, "1 ensemble weights for 2 models")) << count;
  for (double bad : {0.0, -1.0, nan, inf}) {
    const auto msg = error_of([&] { nmt::Translator(both, {}, {1, bad}); });
    EXPECT_TRUE(contains(msg, "weight of model 2") && contains(msg, "positive")) << msg;
  }
  const auto big = error_of([&] { nmt::Translator(both, {}, {1e308, 1e308}); });
  EXPECT_TRUE(contains(big, "too large")) << big;
  EXPECT_EQ(nmt::normalized_weights({1, 3}, 2), (std::vector<double>{0.25, 0.75}));
  EXPECT_TRUE(nmt::normalized_weights({4, 4, 4}, 3).empty());
}

TEST(EnsembleTest, MembersMustShareTokenizers) {
  Models m;
  auto other = m.b;
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(300, 9, &s, &t);
  nmt::TokenizerOptions to;
  to.vocab_size = 50;
  other.tgt_tok = nmt::Tokenizer::train(t, to);
  const auto msg = error_of([&] { nmt::Translator({m.a, other}, {"a.ckpt", "b.ckpt"}); });
  EXPECT_TRUE(contains(msg, "b.ckpt") && contains(msg, "tokenizers")) << msg;
}

TEST(AverageTest, AveragingCopiesOfACheckpointGivesItBack) {
  const auto dir = nmt::test::temp_dir("average_same");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  auto avg = nmt::average_checkpoints({ckpt, ckpt, ckpt}, dir + "/avg.ckpt");
  auto orig = nmt::load_checkpoint(ckpt, torch::kCPU), back = nmt::load_checkpoint(dir + "/avg.ckpt", torch::kCPU);
  auto po = orig.model->named_parameters(), pb = back.model->named_parameters();
  // Summed in double, 3 x / 3 is x exactly.
  for (const auto& p : po) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  EXPECT_EQ(back.options.serialize(), orig.options.serialize());
  EXPECT_EQ(back.src_tok.bytes(), orig.src_tok.bytes());
}

TEST(AverageTest, AveragingTwoCheckpointsTakesTheMeanOfEachWeight) {
  const auto dir = nmt::test::temp_dir("average_two");
  Models m;
  nmt::save_checkpoint(dir + "/a.ckpt", m.a.model, m.a.src_tok, m.a.tgt_tok);
  nmt::save_checkpoint(dir + "/b.ckpt", m.b.model, m.b.src_tok, m.b.tgt_tok);
  nmt::average_checkpoints({dir + "/a.ckpt", dir + "/b.ckpt"}, dir + "/avg.ckpt");
  auto avg = nmt::load_checkpoint(dir + "/avg.ckpt", torch::kCPU);
  auto pa = m.a.model->named_parameters(), pb = m.b.model->named_parameters(), pv = avg.model->named_parameters();
  // Each side rounds the mean at most twice (here the sum, there the result in float).
  for (const auto& p : pa) {
    const auto mean = (p.value() + pb[p.key()]) / 2;
    EXPECT_TRUE(nmt::test::within(pv[p.key()], mean, 2 * nmt::test::gamma(2, 0x1p-24) * mean.abs())) << p.key();
  }
  // Different architectures cannot be averaged.
  auto wide = m.a;
  auto opt = m.a.options;
  opt.emb_dim += 2;
  wide.model = nmt::Seq2Seq(opt);
  nmt::save_checkpoint(dir + "/wide.ckpt", wide.model, wide.src_tok, wide.tgt_tok);
  const auto msg = error_of([&] { nmt::average_checkpoints({dir + "/a.ckpt", dir + "/wide.ckpt"}, dir + "/x.ckpt"); });
  EXPECT_TRUE(contains(msg, "wide.ckpt") && contains(msg, "configuration")) << msg;
}

}  // namespace
