// Greedy search: batch independence, length caps, attention rows, scores
// that agree with teacher-forced decoding; and the Translator around it.
#include "search/search.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/quantized.h"
#include "translate/translator.h"
#include "search_util.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

using nmt::Example;
using nmt::test::gamma;
using nmt::test::iota;
using nmt::test::run_search;
using nmt::test::source_examples;
using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::same_greedy_hypothesis;
using nmt::test::within;

// Whether a hypothesis of `src_len` source pieces ended by choosing EOS
// rather than at its length cap (search/search_parts.cc: length_caps()).
bool ended_by_eos(const nmt::Hypothesis& h, size_t src_len, const nmt::SearchOptions& opt) {
  const auto cap = std::min<int64_t>(static_cast<int64_t>(src_len * opt.max_length_ratio) + 5, opt.max_length);
  return static_cast<int64_t>(h.ids.size()) < cap;
}

// The bound on two paths' logits for a hypothesis of `ids` from a source of `src_len` pieces.
double logits_bound(nmt::Seq2Seq& model, size_t src_len, size_t ids) {
  return model_rounding_bound(*model, model_depth(static_cast<int64_t>(src_len), static_cast<int64_t>(ids) + 1));
}

nmt::Seq2Seq tiny_model(uint64_t seed = 2, nmt::AttentionType att = nmt::AttentionType::kAdditive) {
  return nmt::test::eval_model(seed, att);
}

// Makes EOS (almost) impossible, so every hypothesis runs to its length cap.
void suppress_eos(nmt::Seq2Seq& m) {
  torch::NoGradGuard ng;
  m->named_parameters()["decoder.out_bias"][nmt::kEosId].fill_(-1e4);
}

TEST(SearchTest, BatchedEqualsAlone) {
  for (auto att : {nmt::AttentionType::kAdditive, nmt::AttentionType::kGeneral}) {
    auto model = tiny_model(3, att);
    const auto ex = source_examples(7, 11);
    auto search = nmt::make_search(nmt::SearchOptions{});
    torch::NoGradGuard ng;
    const auto batched = run_search(*search, model, nmt::make_batch(ex, iota(7), false), true);
    ASSERT_EQ(batched.size(), 7u);
    int compared = 0;
    for (int64_t i = 0; i < 7; ++i) {
      const auto alone = run_search(*search, model, nmt::make_batch(ex, {i}, false), true);
      ASSERT_EQ(alone.size(), 1u);
      ASSERT_EQ(batched[i].size(), 1u);
      // Alone, the products have fewer rows (other kernels, other sums).
      const auto& want = alone[0][0];
      EXPECT_TRUE(same_greedy_hypothesis({model}, ex[i].src, want, batched[i][0],
                                         ended_by_eos(want, ex[i].src.size(), {}),
                                         logits_bound(model, ex[i].src.size(), want.ids.size()), &compared))
          << "sentence " << i;
    }
    EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
  }
}

TEST(SearchTest, LengthCaps) {
  auto model = tiny_model(4);
  suppress_eos(model);
  const auto ex = source_examples(6, 12);
  const auto batch = nmt::make_batch(ex, iota(6), false);
  torch::NoGradGuard ng;
  {
    nmt::SearchOptions opt;
    opt.max_length = 3;
    const auto hyps = run_search(*nmt::make_search(opt), model, batch, false);
    for (const auto& h : hyps) EXPECT_EQ(h[0].ids.size(), 3u);  // EOS suppressed: exactly at the cap
  }
  {
    nmt::SearchOptions opt;
    opt.max_length_ratio = 0.5;
    const auto hyps = run_search(*nmt::make_search(opt), model, batch, true);
    for (size_t i = 0; i < hyps.size(); ++i) {
      const size_t cap = ex[i].src.size() / 2 + 5;  // floor(ratio * |src|) + 5
      EXPECT_EQ(hyps[i][0].ids.size(), cap) << "sentence " << i << " (source length " << ex[i].src.size() << ")";
      for (int64_t id : hyps[i][0].ids) {
        EXPECT_NE(id, nmt::kEosId);
        EXPECT_NE(id, nmt::kPadId);
      }
      // The forced EOS at the cap is part of the score and of the attention.
      EXPECT_LT(hyps[i][0].score, -1000.0);
      EXPECT_EQ(hyps[i][0].attention.size(0), static_cast<int64_t>(cap) + 1);
    }
  }
}

// Sentences that end early leave the batch (greedy: their rows; beam: their
// K hypotheses): with EOS suppressed each sentence ends exactly at its own
// length cap, so sentences leave at different steps, a few at a time and many
// at once. What remains must decode as it would alone: ids, scores, attention.
TEST(SearchTest, SentencesLeavingTheBatchChangeNothing) {
  auto model = tiny_model(8);
  // Bounds come from the model as it was: the -1e4 bias that suppresses EOS
  // moves only EOS's logit, which no choice comes near, and its rounding in
  // a score is covered by that score's own term (2 gamma_T |score|).
  auto unsuppressed = tiny_model(8);
  suppress_eos(model);
  auto ex = source_examples(9, 15);
  for (size_t i = 0; i < ex.size(); ++i) ex[i].src.resize(std::min(ex[i].src.size(), 2 + i));  // lengths 2..10
  for (auto& e : ex) e.src.back() = nmt::kEosId;
  torch::NoGradGuard ng;
  for (int64_t beam : {1, 3}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;
    opt.n_best = beam;
    opt.max_length_ratio = 1.0;
    auto search = nmt::make_search(opt);
    const auto batched = run_search(*search, model, nmt::make_batch(ex, iota(9), false), true);
    std::set<size_t> caps;
    int compared = 0;
    for (int64_t i = 0; i < 9; ++i) {
      const auto alone = run_search(*search, model, nmt::make_batch(ex, {i}, false), true);
      ASSERT_EQ(alone[0].size(), batched[i].size());
      caps.insert(batched[i][0].ids.size());
      const double bound = logits_bound(unsuppressed, ex[i].src.size(), alone[0][0].ids.size());
      if (beam == 1) {  // EOS suppressed: every hypothesis ends at its cap
        EXPECT_TRUE(same_greedy_hypothesis({model}, ex[i].src, alone[0][0], batched[i][0], false, bound, &compared))
            << "sentence " << i;
        continue;
      }
      for (size_t r = 0; r < alone[0].size(); ++r) {
        const auto& a = alone[0][r];
        const auto& b = batched[i][r];
        EXPECT_EQ(b.ids, a.ids) << "beam " << beam << " sentence " << i << " rank " << r;
        const int64_t T = static_cast<int64_t>(a.ids.size()) + 1;
        EXPECT_TRUE(within(b.score, a.score, 2 * T * bound + 2 * gamma(T, 0x1p-24) * std::abs(a.score)))
            << "beam " << beam << " sentence " << i;
        ASSERT_EQ(b.attention.sizes(), a.attention.sizes());
        EXPECT_TRUE(within(b.attention, a.attention, bound)) << "beam " << beam << " sentence " << i;
      }
    }
    EXPECT_GE(caps.size(), 5u) << "sentences should end at several different steps";
    if (beam == 1) {
      EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
    }
  }
}

// The search CUDA uses (fixed rows, a step that updates its tensors in place,
// finished sentences masked rather than dropped), run here eagerly: the same
// hypotheses as greedy search, with and without attention, capped or not,
// for one model and an ensemble.
TEST(SearchTest, FixedRowGreedyEqualsGreedy) {
  for (bool capped : {false, true}) {
    auto a = tiny_model(21), b = tiny_model(22);
    // For bounds, as in SentencesLeavingTheBatchChangeNothing.
    std::vector<nmt::Seq2Seq> unsuppressed = {tiny_model(21), b};
    if (capped) suppress_eos(a);
    const auto ex = source_examples(11, 23);
    const auto batch = nmt::make_batch(ex, iota(11), false);
    nmt::SearchOptions opt;
    opt.max_length = capped ? 7 : 40;
    torch::NoGradGuard ng;
    for (auto models : {std::vector<nmt::Seq2Seq>{a}, std::vector<nmt::Seq2Seq>{a, b}}) {
      for (bool with_attention : {false, true}) {
        auto s1 = nmt::test::scorer_of(models), s2 = nmt::test::scorer_of(models);
        const auto want = nmt::make_search(opt)->run(s1, batch, with_attention);
        const auto got = nmt::make_fixed_row_search(opt, /*capture=*/false)->run(s2, batch, with_attention);
        ASSERT_EQ(got.size(), want.size());
        int compared = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          const auto& w = want[i][0];
          const auto& g = got[i][0];
          ASSERT_EQ(g.attention.defined(), with_attention);
          // Fixed rows multiply all rows to the end where greedy drops them: other products.
          double bound = 0;
          for (size_t k = 0; k < models.size(); ++k)
            bound = std::max(bound, logits_bound(unsuppressed[k], ex[i].src.size(), w.ids.size()));
          const int before = compared;
          EXPECT_TRUE(
              same_greedy_hypothesis(models, ex[i].src, w, g, ended_by_eos(w, ex[i].src.size(), opt), bound, &compared))
              << "sentence " << i << ", " << models.size() << " models";
          // The normalized score divides by ((5 + n) / 6)^alpha >= 1: at most the score's bound, and a rounding.
          const int64_t T = static_cast<int64_t>(w.ids.size()) + 1;
          if (compared > before) {
            const double norm_bound = 2 * T * bound + 2 * gamma(T + 2, 0x1p-24) * std::abs(w.score);
            EXPECT_TRUE(within(g.norm_score, w.norm_score, norm_bound)) << i;
          }
        }
        EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
      }
    }
  }
}

TEST(SearchTest, AttentionRowsSumToOne) {
  auto model = tiny_model(5);
  const auto ex = source_examples(5, 13);
  torch::NoGradGuard ng;
  const auto hyps = run_search(*nmt::make_search(nmt::SearchOptions{}), model, nmt::make_batch(ex, iota(5), false), true);
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto& h = hyps[i][0];
    ASSERT_TRUE(h.attention.defined());
    EXPECT_TRUE(h.attention.device().is_cpu());
    EXPECT_EQ(h.attention.scalar_type(), torch::kFloat);
    EXPECT_EQ(h.attention.size(0), static_cast<int64_t>(h.ids.size()) + 1) << i;
    EXPECT_EQ(h.attention.size(1), static_cast<int64_t>(ex[i].src.size())) << i;
    // Softmax weights sum to 1 within gamma_{S+2}; their sum here adds gamma_S.
    const int64_t S = h.attention.size(1);
    EXPECT_TRUE(within(h.attention.sum(1), torch::ones({h.attention.size(0)}), 2 * gamma(S + 2, 0x1p-24))) << i;
  }
  // Without attention requested, none is returned.
  const auto plain = run_search(*nmt::make_search(nmt::SearchOptions{}), model, nmt::make_batch(ex, iota(5), false), false);
  EXPECT_FALSE(plain[0][0].attention.defined());
}

TEST(SearchTest, GreedyScoreEqualsForcedDecodingLogProb) {
  for (bool capped : {false, true}) {
    auto model = tiny_model(6);
    auto unsuppressed = tiny_model(6);  // for bounds, as in SentencesLeavingTheBatchChangeNothing
    if (capped) suppress_eos(model);
    auto ex = source_examples(6, 14);
    torch::NoGradGuard ng;
    nmt::SearchOptions opt;
    opt.max_length = 6;
    const auto hyps = run_search(*nmt::make_search(opt), model, nmt::make_batch(ex, iota(6), false), false);
    for (size_t i = 0; i < ex.size(); ++i) ex[i].tgt = hyps[i][0].ids;
    const auto b = nmt::make_batch(ex, iota(6), true);
    const auto logp = torch::log_softmax(model->forward(b.src, b.src_len, b.tgt_in), -1);  // [B, T, V]
    const auto tok_logp = logp.gather(2, b.tgt_out.unsqueeze(2)).squeeze(2).masked_fill(b.tgt_out.eq(nmt::kPadId), 0);
    for (size_t i = 0; i < ex.size(); ++i) {
      // tgt_out is ids then EOS, as greedy search scores it; search steps and
      // teacher forcing make other products.
      const auto& ids = hyps[i][0].ids;
      const auto S = static_cast<int64_t>(ex[i].src.size()), T = static_cast<int64_t>(ids.size()) + 1;
      EXPECT_TRUE(within(hyps[i][0].score, tok_logp[i].sum().item<double>(),
                         nmt::test::score_rounding_bound(*unsuppressed, S, T, hyps[i][0].score)))
          << "sentence " << i << (capped ? " (capped)" : "");
      // Greedy: each produced token is the argmax of its step, unless within
      // the two paths' bound of it (a near tie either may break its own way).
      const double bound = model_rounding_bound(*unsuppressed, model_depth(S, T));
      const auto best = std::get<1>(logp[i].max(-1));
      for (size_t k = 0; k < ids.size(); ++k) {
        const int64_t want = best[k].item<int64_t>();
        EXPECT_TRUE(want == ids[k] || logp[i][k][ids[k]].item<double>() >= logp[i][k][want].item<double>() - 2 * bound)
            << "sentence " << i << " token " << k << ": " << ids[k] << " where the argmax is " << want;
      }
    }
  }
}

TEST(SearchTest, BadOptionsThrow) {
  nmt::SearchOptions opt;
  opt.beam_size = 0;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  opt.beam_size = -3;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  opt = {};
  opt.max_length = 0;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  EXPECT_NO_THROW(nmt::make_search(nmt::SearchOptions{}));
}

TEST(TranslatorTest, OrderEmptyLinesAndBatching) {
  auto model = tiny_model(7);
  const auto& tok = nmt::test::toy_tokenizer();
  nmt::Translator tr(model, tok, tok);
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(9, 15, &s, &t);
  s.insert(s.begin() + 3, "");
  s.push_back("");
  nmt::TranslateOptions opt;
  opt.batch_sentences = 4;
  opt.batch_tokens = 20;
  model->train();
  const auto out = tr.translate_text(s, opt);
  EXPECT_TRUE(model->is_training()) << "translate must restore training mode";
  ASSERT_EQ(out.size(), s.size());
  EXPECT_EQ(out[3], "");
  EXPECT_EQ(out.back(), "");
  nmt::TranslateOptions one;
  one.batch_sentences = 1;
  int compared = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].empty()) continue;
    // Alone, other products: the same text unless a choice was a near tie.
    const auto alone = tr.translate({s[i]}, one)[0][0];
    if (nmt::test::greedy_near_tie(tr, s[i], alone, one.search)) continue;
    ++compared;
    EXPECT_EQ(out[i], tr.translate_text({s[i]}, one)[0]) << "line " << i;
  }
  EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
  const auto ids = tr.encode_source("red cat");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), nmt::kEosId);
  opt.batch_sentences = 0;
  EXPECT_THROW(tr.translate_text(s, opt), nmt::Error);
}

// A Translator keeps its search between calls only while the search options
// stay the same: each call, whatever came before it, translates as a fresh
// Translator does with the same options.
TEST(TranslatorTest, AKeptSearchFollowsEveryChangeOfTheSearchOptions) {
  auto model = tiny_model(8);
  const auto& tok = nmt::test::toy_tokenizer();
  nmt::Translator kept(model, tok, tok);
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(6, 16, &s, &t);
  std::vector<nmt::TranslateOptions> calls(6);
  calls[1].search.beam_size = 4;
  calls[1].search.n_best = 4;
  calls[2] = calls[1];
  calls[2].search.length_penalty = 1.0;
  calls[3] = calls[2];
  calls[3].search.max_length = 2;
  calls[4] = calls[3];
  calls[4].search.n_best = 2;
  // calls[0] and calls[5]: greedy, the defaults
  for (size_t c = 0; c < calls.size(); ++c) {
    const auto got = kept.translate(s, calls[c]);
    const auto want = nmt::Translator(model, tok, tok).translate(s, calls[c]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].size(), want[i].size()) << "call " << c << ", line " << i;
      for (size_t r = 0; r < want[i].size(); ++r) {
        EXPECT_EQ(got[i][r].ids, want[i][r].ids) << "call " << c << ", line " << i << ", rank " << r;
        EXPECT_EQ(got[i][r].score, want[i][r].score) << "call " << c << ", line " << i << ", rank " << r;
      }
    }
  }
}

}  // namespace
