// Rescoring (translate/rescorer.h): each line's beam is reordered by the mix
// of the forced-decoding scores of both directions and of the channel,
// computed here again through Translator::score from the formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/checkpoint.h"
#include "translate/rescorer.h"
#include "translate/translator.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

TEST(RescorerTest, WordsReverseAndCount) {
  EXPECT_EQ(nmt::reverse_words("a b  c"), "c b a");
  EXPECT_EQ(nmt::reverse_words("  one\t"), "one");
  EXPECT_EQ(nmt::reverse_words(""), "");
  EXPECT_EQ(nmt::count_words(" a b\tc "), 3);
  EXPECT_EQ(nmt::count_words(""), 0);
}

// The beam's hypotheses of each line, their text, and the mix each gets
// from forced decoding left to right, right to left (r2l, when given) and by
// the channel (when given): one call per kind over each line's distinct
// texts (by their pieces left to right, by their words read backwards, by
// the text itself for the channel), in the order the rescorer makes them,
// so the same batches and the same bits.
struct Expected {
  std::vector<std::vector<std::string>> text;
  std::vector<std::vector<double>> mix;
  std::vector<std::vector<double>> channel;  // log P(source | text), when a channel was given
};

Expected expected_mix(nmt::Translator& l2r, nmt::Translator* r2l, nmt::Translator* channel,
                      const std::vector<std::string>& src, const std::vector<std::vector<nmt::Hypothesis>>& hyps,
                      double w, double c, double a) {
  std::vector<std::string> s, t, s_rev, rev, ch_src, ch_tgt;
  std::vector<std::vector<size_t>> f_of(hyps.size()), b_of(hyps.size()), c_of(hyps.size());
  Expected e;
  for (size_t i = 0; i < hyps.size(); ++i) {
    e.text.emplace_back();
    std::map<std::vector<int64_t>, size_t> pieces;
    std::map<std::string, size_t> words, texts;
    for (const auto& h : hyps[i]) {
      e.text[i].push_back(l2r.detokenize(h, src[i], false));
      const auto [f, new_pieces] = pieces.emplace(l2r.tgt_tokenizer().encode(e.text[i].back()), t.size());
      if (new_pieces) {
        s.push_back(src[i]);
        t.push_back(e.text[i].back());
      }
      f_of[i].push_back(f->second);
      const auto [b, new_words] = words.emplace(nmt::reverse_words(e.text[i].back()), rev.size());
      if (new_words) {
        s_rev.push_back(src[i]);
        rev.push_back(b->first);
      }
      b_of[i].push_back(b->second);
      const auto [k, new_text] = texts.emplace(e.text[i].back(), ch_src.size());
      if (new_text) {
        ch_src.push_back(e.text[i].back());
        ch_tgt.push_back(src[i]);
      }
      c_of[i].push_back(k->second);
    }
  }
  const auto f = l2r.score(s, t, 64);
  const auto b = r2l != nullptr ? r2l->score(s_rev, rev, 64) : std::vector<double>();
  const auto ch = channel != nullptr ? channel->score(ch_src, ch_tgt, 64) : std::vector<double>();
  if (r2l == nullptr) w = 0;
  for (size_t i = 0; i < e.text.size(); ++i) {
    e.mix.emplace_back();
    e.channel.emplace_back();
    for (size_t r = 0; r < e.text[i].size(); ++r) {
      if (channel != nullptr) e.channel.back().push_back(ch[c_of[i][r]]);
      const double words = static_cast<double>(nmt::count_words(e.text[i][r]));
      double sum = (1 - w) * f[f_of[i][r]];
      if (r2l != nullptr) sum += w * b[b_of[i][r]];
      if (channel != nullptr) sum += c * ch[c_of[i][r]];
      e.mix.back().push_back(sum / std::pow((5 + words + 1) / 6.0, a));
    }
  }
  return e;
}

// The toy model and, standing in for a right-to-left model, another of the
// same shape with random weights.
std::pair<nmt::LoadedModel, nmt::LoadedModel> toy_and_random_twin() {
  const auto l2r = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::LoadedModel r2l = l2r;
  torch::manual_seed(7);
  r2l.model = nmt::Seq2Seq(l2r.options);
  r2l.model->eval();
  return {l2r, r2l};
}

// Search options that keep the beam's whole list of 4.
nmt::TranslateOptions beam_of_4() {
  nmt::TranslateOptions topt;
  topt.search.beam_size = 4;
  topt.search.n_best = 4;
  return topt;
}

// Checks that `hyps`, `beams` rescored and cut to 2, hold each line's best
// by the mix of `e` first, with its mix; returns how many lines changed
// their first hypothesis.
int expect_best_by_mix(const std::vector<std::vector<nmt::Hypothesis>>& beams,
                       const std::vector<std::vector<nmt::Hypothesis>>& hyps, const Expected& e,
                       const std::string& what) {
  int reordered = 0;
  for (size_t i = 0; i < beams.size(); ++i) {
    EXPECT_EQ(hyps[i].size(), std::min<size_t>(2, beams[i].size())) << what;
    if (hyps[i].empty()) continue;
    size_t best = 0;
    for (size_t r = 1; r < e.mix[i].size(); ++r)
      if (e.mix[i][r] > e.mix[i][best]) best = r;
    EXPECT_EQ(hyps[i][0].ids, beams[i][best].ids) << what << " line " << i;
    EXPECT_EQ(hyps[i][0].norm_score, e.mix[i][best]) << what << " line " << i;
    if (hyps[i].size() > 1) {
      EXPECT_GE(hyps[i][0].norm_score, hyps[i][1].norm_score) << what;
    }
    reordered += best != 0;
  }
  return reordered;
}

TEST(RescorerTest, OrdersEachBeamByTheMixOfBothDirections) {
  const auto [l2r_model, r2l_model] = toy_and_random_twin();
  const std::vector<std::string> src = {"red cat sees big dog", "old fish", "blue bird runs", "green tree house"};
  nmt::Translator l2r(l2r_model), r2l(r2l_model);
  const auto beams = l2r.translate(src, beam_of_4());
  int reordered = 0;
  for (const double w : {0.0, 0.5, 1.0}) {
    nmt::RescoreOptions ropt;
    ropt.r2l_models = {"r2l.ckpt"};
    ropt.r2l_weight = w;
    ropt.length_exponent = 1.0;
    const Expected e = expected_mix(l2r, &r2l, nullptr, src, beams, w, 0, ropt.length_exponent);
    nmt::Rescorer rescorer(nmt::Translator(r2l_model), std::nullopt, ropt);
    auto hyps = beams;
    rescorer.rescore(l2r, src, &hyps, false, 64, 2, /*search_scores_exact=*/false);
    reordered += expect_best_by_mix(beams, hyps, e, "w=" + std::to_string(w));
    for (const auto& line : hyps)
      for (const auto& h : line) {
        EXPECT_TRUE(std::isnan(h.channel_logprob));
        EXPECT_EQ(std::isnan(h.r2l_logprob), w == 0) << "w=" << w;  // a model of weight 0 is not run
      }
  }
  // The random right-to-left model disagrees with the search somewhere: the test saw a reordering.
  EXPECT_GT(reordered, 0);
}

// A channel model (here a random model of the toy's shape, reading the
// hypotheses as its source) adds c log P(source | text) to the mix, alone
// and beside a right-to-left model; its log-probability is set on each
// hypothesis, and c = 0 gives the order and mix of the other parts alone
// (the channel model not run).
TEST(RescorerTest, AddsTheChannelsScoreOfTheSource) {
  const auto [l2r_model, r2l_model] = toy_and_random_twin();
  nmt::LoadedModel channel_model = l2r_model;
  torch::manual_seed(11);
  channel_model.model = nmt::Seq2Seq(l2r_model.options);
  channel_model.model->eval();
  const std::vector<std::string> src = {"red cat sees big dog", "old fish", "", "blue bird runs"};
  nmt::Translator l2r(l2r_model), r2l(r2l_model), channel(channel_model);
  const auto beams = l2r.translate(src, beam_of_4());
  int reordered = 0;
  for (const bool with_r2l : {false, true})
    for (const double c : {0.0, 1.0, 5.0}) {
      nmt::RescoreOptions ropt;
      if (with_r2l) ropt.r2l_models = {"r2l.ckpt"};
      ropt.channel_models = {"channel.ckpt"};
      ropt.channel_weight = c;
      const Expected e = expected_mix(l2r, with_r2l ? &r2l : nullptr, &channel, src, beams, ropt.r2l_weight, c,
                                      ropt.length_exponent);
      nmt::Rescorer rescorer(with_r2l ? std::optional<nmt::Translator>(nmt::Translator(r2l_model)) : std::nullopt,
                             nmt::Translator(channel_model), ropt);
      auto hyps = beams;
      rescorer.rescore(l2r, src, &hyps, false, 64, 2, /*search_scores_exact=*/false);
      const std::string what = std::string(with_r2l ? "r2l, " : "") + "c=" + std::to_string(c);
      const int changed = expect_best_by_mix(beams, hyps, e, what);
      if (c > 0 && !with_r2l) reordered += changed;  // the channel's doing alone
      for (size_t i = 0; i < hyps.size(); ++i)
        for (const auto& h : hyps[i]) {
          const size_t r = static_cast<size_t>(
              std::find_if(beams[i].begin(), beams[i].end(), [&](const auto& g) { return g.ids == h.ids; }) -
              beams[i].begin());
          ASSERT_LT(r, beams[i].size()) << what;
          if (c == 0)  // a model of weight 0 is not run
            EXPECT_TRUE(std::isnan(h.channel_logprob)) << what << " line " << i;
          else
            EXPECT_EQ(h.channel_logprob, e.channel[i][r]) << what << " line " << i;
          EXPECT_EQ(std::isnan(h.r2l_logprob), !with_r2l) << what;
        }
      if (c == 0 && with_r2l) {  // the same order and mix as the right-to-left model's alone
        ropt.channel_models.clear();
        auto without = beams;
        nmt::Rescorer(nmt::Translator(r2l_model), std::nullopt, ropt)
            .rescore(l2r, src, &without, false, 64, 2, /*search_scores_exact=*/false);
        for (size_t i = 0; i < src.size(); ++i)
          for (size_t r = 0; r < hyps[i].size(); ++r) {
            EXPECT_EQ(hyps[i][r].ids, without[i][r].ids) << "line " << i;
            EXPECT_EQ(hyps[i][r].norm_score, without[i][r].norm_score) << "line " << i;
          }
      }
    }
  EXPECT_GT(reordered, 0);
}

// With search_scores_exact, a hypothesis whose text encodes back to its ids
// keeps the search's score as log P_l2r (and so does any of its line whose
// text encodes to those ids), and that score is what forced decoding gives,
// up to rounding; an empty line, or the flag off, decodes again. Texts of
// the same pieces (or words read backwards) share one log-probability.
TEST(RescorerTest, KeepsTheSearchsScoreWhereItIsForcedDecodings) {
  const auto [l2r_model, r2l_model] = toy_and_random_twin();
  const std::vector<std::string> src = {"red cat sees big dog", "old fish", "", "blue bird runs"};
  nmt::Translator l2r(l2r_model);
  const auto beams = l2r.translate(src, beam_of_4());
  nmt::RescoreOptions ropt;
  ropt.r2l_models = {"r2l.ckpt"};
  nmt::Rescorer rescorer(nmt::Translator(r2l_model), std::nullopt, ropt);
  // The search's score against forced decoding of the same text. Both sum the
  // same float32 log-softmax values, EOS included, computed through other
  // batch shapes and code paths (the search's step, teacher forcing): each
  // token's log-probability differs by rounding alone, far below 1e-3 nats
  // (a wrong token or a missing EOS is off by whole nats).
  std::vector<std::string> s, t;
  for (size_t i = 0; i < src.size(); ++i)
    for (const auto& h : beams[i]) {
      s.push_back(src[i]);
      t.push_back(l2r.detokenize(h, src[i], false));
    }
  const auto forced = l2r.score(s, t, 64);
  size_t k = 0, round_trips = 0;
  for (size_t i = 0; i < src.size(); ++i)
    for (const auto& h : beams[i]) {
      const bool same_ids = l2r.tgt_tokenizer().encode(t[k]) == h.ids;
      round_trips += same_ids && !src[i].empty();
      if (same_ids && !src[i].empty()) {
        EXPECT_NEAR(h.score, forced[k], 1e-3 * static_cast<double>(h.ids.size() + 1)) << t[k];
      }
      ++k;
    }
  ASSERT_GT(round_trips, 0u);
  // A score no decoding gives shows which path each hypothesis took.
  auto marked = beams;
  for (auto& line : marked)
    for (auto& h : line) h.score = 1000.0;
  for (const bool exact : {true, false}) {
    auto hyps = marked;
    rescorer.rescore(l2r, src, &hyps, false, 64, 4, exact);
    for (size_t i = 0; i < src.size(); ++i) {
      ASSERT_EQ(hyps[i].size(), beams[i].size());
      for (const auto& h : hyps[i]) {
        // kept: some hypothesis of the line has exactly the pieces h's text encodes to
        const auto pieces = l2r.tgt_tokenizer().encode(l2r.detokenize(h, src[i], false));
        const bool kept = exact && !src[i].empty() &&
                          std::any_of(beams[i].begin(), beams[i].end(), [&](const auto& g) { return g.ids == pieces; });
        if (kept) {
          EXPECT_EQ(h.l2r_logprob, 1000.0) << "line " << i;
        } else {
          EXPECT_LT(h.l2r_logprob, 0.0) << "line " << i << (exact ? " exact" : "");
        }
      }
      // Texts of the same pieces, or of the same words read backwards, share one log-probability.
      for (const auto& g : hyps[i])
        for (const auto& h : hyps[i]) {
          const auto g_text = l2r.detokenize(g, src[i], false), h_text = l2r.detokenize(h, src[i], false);
          if (l2r.tgt_tokenizer().encode(g_text) == l2r.tgt_tokenizer().encode(h_text)) {
            EXPECT_EQ(g.l2r_logprob, h.l2r_logprob) << g_text << " / " << h_text;
          }
          if (nmt::reverse_words(g_text) == nmt::reverse_words(h_text)) {
            EXPECT_EQ(g.r2l_logprob, h.r2l_logprob) << g_text << " / " << h_text;
          }
        }
    }
  }
}

TEST(RescorerTest, RefusesWeightsOutOfRange) {
  const auto m = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::RescoreOptions opt;
  opt.r2l_models = {"r2l.ckpt"};
  opt.r2l_weight = 1.5;
  EXPECT_TRUE(contains(error_of([&] { nmt::Rescorer(nmt::Translator(m), std::nullopt, opt); }), "--r2l-weight"));
  opt.r2l_weight = 0.5;
  opt.length_exponent = std::nan("");
  EXPECT_TRUE(contains(error_of([&] { nmt::Rescorer(nmt::Translator(m), std::nullopt, opt); }), "--r2l-length-exponent"));
  opt.length_exponent = 1;
  opt.channel_weight = -1;
  EXPECT_TRUE(contains(error_of([&] { nmt::Rescorer(std::nullopt, nmt::Translator(m), opt); }), "--channel-weight"));
  opt.channel_weight = 0.5;
  EXPECT_TRUE(contains(error_of([&] { nmt::Rescorer(std::nullopt, std::nullopt, opt); }), "--channel-model"));
}

}  // namespace
