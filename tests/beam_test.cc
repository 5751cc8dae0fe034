// Beam search and the translator around it, on a briefly trained tiny model:
// beam 1 equals greedy, batching does not change results, n-best lists are
// ranked, scores agree with forced decoding, attention rows are proper.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/error.h"
#include "model/checkpoint.h"
#include "search/search.h"
#include "translate/translator.h"
#include "search_util.h"
#include "test_util.h"

namespace {

using nmt::test::gamma;
using nmt::test::within;

constexpr double kU = 0x1p-24;  // float's unit roundoff

struct Fixture {
  nmt::LoadedModel m;
  std::vector<std::string> src;
  std::vector<nmt::Example> ex;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture f;
    f.m = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
    std::vector<std::string> tgt;
    nmt::test::toy_corpus(12, 99, &f.src, &tgt);
    for (const auto& s : f.src) {
      nmt::Example e;
      e.src = f.m.src_tok.encode(s);
      e.src.push_back(nmt::kEosId);
      f.ex.push_back(e);
    }
    return f;
  }();
  return f;
}

std::vector<int64_t> all(const Fixture& f) {
  std::vector<int64_t> v(f.ex.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

std::vector<std::vector<nmt::Hypothesis>> run(nmt::Search& s, const Fixture& f, const std::vector<int64_t>& idx,
                                              bool att = false, const nmt::EngineOptions& engine = {}) {
  c10::InferenceMode guard;
  auto model = f.m.model;
  return nmt::test::run_search(s, model, nmt::make_batch(f.ex, idx, false), att, engine);
}

// Forced log-probability of ids + EOS for example i.
// The bound on two paths' logits for a hypothesis of `ids` pieces of example i.
double logits_bound(const Fixture& f, int64_t i, size_t ids) {
  auto model = f.m.model;
  return nmt::test::model_rounding_bound(*model, nmt::test::model_depth(static_cast<int64_t>(f.ex[i].src.size()),
                                                                         static_cast<int64_t>(ids) + 1));
}

// The bound on two paths' scores of hypothesis h of example i.
double score_bound(const Fixture& f, int64_t i, const nmt::Hypothesis& h) {
  auto model = f.m.model;
  return nmt::test::score_rounding_bound(*model, static_cast<int64_t>(f.ex[i].src.size()),
                                         static_cast<int64_t>(h.ids.size()) + 1, h.score);
}

// Whether h, a hypothesis of example i, ended by choosing EOS rather than at its length cap.
bool ended_by_eos(const Fixture& f, int64_t i, const nmt::Hypothesis& h, const nmt::SearchOptions& opt) {
  const auto cap =
      std::min<int64_t>(static_cast<int64_t>(f.ex[i].src.size() * opt.max_length_ratio) + 5, opt.max_length);
  return static_cast<int64_t>(h.ids.size()) < cap;
}

double forced_logprob(const Fixture& f, int64_t i, const std::vector<int64_t>& ids) {
  c10::InferenceMode guard;
  std::vector<nmt::Example> ex{f.ex[i]};
  ex[0].tgt = ids;
  auto b = nmt::make_batch(ex, {0});
  auto model = f.m.model;  // a handle: forward() is not const
  auto logp = torch::log_softmax(model->forward(b.src, b.src_len, b.tgt_in), -1);
  return logp.gather(2, b.tgt_out.unsqueeze(2)).sum().item<double>();
}

TEST(BeamTest, BeamOfOneEqualsGreedy) {
  const auto& f = fixture();
  nmt::SearchOptions opt;
  auto greedy = nmt::make_search(opt);
  auto beam1 = nmt::make_beam_search(opt);
  const auto g = run(*greedy, f, all(f));
  const auto b = run(*beam1, f, all(f));
  // Greedy takes the top logit and its log-softmax alone, beam a whole
  // log-softmax; each drops finished rows its own way (other products).
  int compared = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(g.size()); ++i) {
    const int before = compared;
    EXPECT_TRUE(nmt::test::same_greedy_hypothesis({f.m.model}, f.ex[i].src, g[i][0], b[i][0],
                                                  ended_by_eos(f, i, g[i][0], opt),
                                                  logits_bound(f, i, g[i][0].ids.size()), &compared))
        << "sentence " << i;
    if (compared > before) {  // the normalized score divides by ((5 + n) / 6)^alpha >= 1
      EXPECT_TRUE(within(g[i][0].norm_score, b[i][0].norm_score,
                         score_bound(f, i, g[i][0]) + 8 * kU * std::abs(g[i][0].norm_score)))
          << "sentence " << i;
    }
  }
  EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
}

TEST(BeamTest, BatchedEqualsAlone) {
  const auto& f = fixture();
  nmt::SearchOptions opt;
  opt.beam_size = 5;
  opt.n_best = 3;
  auto beam = nmt::make_search(opt);
  const auto batched = run(*beam, f, all(f));
  for (int64_t i = 0; i < static_cast<int64_t>(f.ex.size()); ++i) {
    const auto alone = run(*beam, f, {i});
    ASSERT_EQ(alone[0].size(), batched[i].size());
    for (size_t r = 0; r < alone[0].size(); ++r) {
      EXPECT_EQ(alone[0][r].ids, batched[i][r].ids) << "sentence " << i << " rank " << r;
      // Alone, the products have fewer rows (other kernels, other sums).
      EXPECT_TRUE(within(alone[0][r].score, batched[i][r].score, score_bound(f, i, alone[0][r]))) << "sentence " << i;
    }
  }
}

TEST(BeamTest, NBestIsRankedDistinctAndScoredLikeForcedDecoding) {
  const auto& f = fixture();
  nmt::SearchOptions opt;
  opt.beam_size = 4;
  opt.n_best = 4;
  opt.length_penalty = 0.6;
  auto beam = nmt::make_search(opt);
  const auto res = run(*beam, f, all(f));
  for (size_t i = 0; i < res.size(); ++i) {
    ASSERT_EQ(res[i].size(), 4u);
    for (size_t r = 0; r < res[i].size(); ++r) {
      const auto& h = res[i][r];
      if (r > 0) {
        EXPECT_GE(res[i][r - 1].norm_score, h.norm_score) << "sentence " << i << " not ranked";
        for (size_t q = 0; q < r; ++q) EXPECT_NE(res[i][q].ids, h.ids) << "duplicate hypothesis";
      }
      const double n = static_cast<double>(h.ids.size() + 1);
      // Search divides in float: (5 + n) / 6, its power and the quotient, within 6u.
      EXPECT_TRUE(within(h.norm_score, h.score / std::pow((5 + n) / 6, 0.6), gamma(6, kU) * std::abs(h.norm_score)));
      // Search steps against teacher forcing: other products.
      EXPECT_TRUE(within(h.score, forced_logprob(f, static_cast<int64_t>(i), h.ids), score_bound(f, i, h)))
          << "sentence " << i;
    }
  }
}

TEST(BeamTest, AttentionRowsSumToOneOverTheSource) {
  const auto& f = fixture();
  nmt::SearchOptions opt;
  opt.beam_size = 3;
  opt.n_best = 3;
  const auto res = run(*nmt::make_search(opt), f, all(f), /*att=*/true);
  for (size_t i = 0; i < res.size(); ++i)
    for (const auto& h : res[i]) {
      ASSERT_TRUE(h.attention.defined());
      EXPECT_EQ(h.attention.size(0), static_cast<int64_t>(h.ids.size() + 1));
      EXPECT_EQ(h.attention.size(1), static_cast<int64_t>(f.ex[i].src.size()));
      // Softmax weights sum to 1 within gamma_{S+2}; their sum here adds gamma_S.
      const auto S = h.attention.size(1);
      EXPECT_TRUE(within(h.attention.sum(1), torch::ones({h.attention.size(0)}), 2 * gamma(S + 2, kU)));
    }
}

TEST(BeamTest, LengthCapsHold) {
  const auto& f = fixture();
  nmt::SearchOptions opt;
  opt.beam_size = 4;
  opt.n_best = 4;
  opt.max_length = 3;
  for (const auto& hyps : run(*nmt::make_search(opt), f, all(f)))
    for (const auto& h : hyps) EXPECT_LE(h.ids.size(), 3u);
}

TEST(BeamTest, TranslatorKeepsOrderAndEmptyLines) {
  const auto& f = fixture();
  nmt::Translator tr(f.m);
  std::vector<std::string> lines = {f.src[0], "", f.src[1], f.src[2], "", f.src[3]};
  nmt::TranslateOptions opt;
  opt.search.beam_size = 3;
  opt.batch_sentences = 2;  // several batches, sorted by length inside
  const auto out = tr.translate_text(lines, opt);
  ASSERT_EQ(out.size(), lines.size());
  EXPECT_EQ(out[1], "");
  EXPECT_EQ(out[4], "");
  for (size_t i : {0u, 2u, 3u, 5u}) EXPECT_EQ(out[i], tr.translate_text({lines[i]}, opt)[0]) << "line " << i;
}

TEST(BeamTest, BatchesTranslatedInParallelGiveTheSameHypotheses) {
  const auto& f = fixture();
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  nmt::Translator tr(f.m);
  std::vector<std::string> lines = f.src;
  lines.insert(lines.begin() + 1, "");
  // A batch per line; or up to 64 lines a batch, which the translator cuts
  // smaller when that leaves a worker without a batch (one batch of the 5
  // lines on one thread, against 3 + 2 lines on two).
  for (auto [beam, batch] : {std::pair<int64_t, int64_t>{1, 1}, {3, 1}, {1, 64}, {3, 64}}) {
    nmt::TranslateOptions opt;
    opt.search.beam_size = beam;
    opt.search.n_best = beam;
    opt.batch_sentences = batch;
    opt.parallel_batches = 1;
    EXPECT_EQ(nmt::Translator::batch_workers(opt, 5, torch::kCPU), 1);
    const auto one = tr.translate(lines, opt, /*with_attention=*/true);
    opt.parallel_batches = 0;
    EXPECT_EQ(nmt::Translator::batch_workers(opt, 5, torch::kCPU), 2);
    EXPECT_EQ(nmt::Translator::batch_workers(opt, 1, torch::kCPU), 1);
    const auto two = tr.translate(lines, opt, /*with_attention=*/true);
    ASSERT_EQ(one.size(), two.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(one[i].size(), two[i].size()) << "line " << i;
      for (size_t r = 0; r < one[i].size(); ++r) {
        EXPECT_EQ(one[i][r].ids, two[i][r].ids) << "line " << i << " beam " << beam;
        // Other threads and (batch 64) other batch shapes, whose products
        // may split their work (and a reduction its sums) otherwise.
        const auto& h = one[i][r];
        const auto S = static_cast<int64_t>(tr.encode_source(lines[i]).size());
        const auto T = static_cast<int64_t>(h.ids.size()) + 1;
        auto model = f.m.model;
        EXPECT_TRUE(within(h.score, two[i][r].score, nmt::test::score_rounding_bound(*model, S, T, h.score)))
            << "line " << i;
        ASSERT_EQ(h.attention.defined(), two[i][r].attention.defined());
        if (h.attention.defined()) {
          EXPECT_TRUE(within(h.attention, two[i][r].attention,
                             nmt::test::model_rounding_bound(*model, nmt::test::model_depth(S, T))))
              << "line " << i;
        }
      }
    }
  }
  at::set_num_threads(threads);
}

TEST(BeamTest, ForcedScoresMatchSearchScores) {
  const auto& f = fixture();
  nmt::Translator tr(f.m);
  nmt::TranslateOptions opt;
  auto hyps = tr.translate(f.src, opt);
  std::vector<std::string> tgt;
  for (const auto& h : hyps) tgt.push_back(f.m.tgt_tok.decode(h[0].ids));
  const auto scores = tr.score(f.src, tgt, 5);
  for (size_t i = 0; i < f.src.size(); ++i) {
    if (f.m.tgt_tok.encode(tgt[i]) != hyps[i][0].ids) continue;  // re-tokenization may differ
    // Teacher forcing against search steps: other products.
    EXPECT_TRUE(within(scores[i], hyps[i][0].score, score_bound(f, static_cast<int64_t>(i), hyps[i][0])))
        << "sentence " << i;
  }
  EXPECT_THROW(tr.score({"a"}, {}, 4), nmt::Error);
}

TEST(BeamTest, ReplaceUnkCopiesTheMostAttendedSourcePiece) {
  const auto& f = fixture();
  nmt::Translator tr(f.m);
  nmt::Hypothesis h;
  h.ids = {nmt::kUnkId};
  const std::string src = "red dog";
  const auto pieces = f.m.src_tok.pieces(src);
  ASSERT_GE(pieces.size(), 2u);
  h.attention = torch::zeros({2, static_cast<int64_t>(pieces.size() + 1)});
  h.attention[0][1] = 1.0;  // <unk> attended to the second source piece
  h.attention[1][0] = 1.0;
  std::string want = pieces[1];
  const std::string marker = "\xe2\x96\x81";
  if (want.rfind(marker, 0) == 0) want = want.substr(marker.size());
  EXPECT_EQ(tr.detokenize(h, src, /*replace_unk=*/true), want);
  EXPECT_NE(tr.detokenize(h, src, /*replace_unk=*/false), want);
}

TEST(BeamTest, BadOptionsAreRejected) {
  nmt::SearchOptions opt;
  opt.beam_size = 2;
  opt.n_best = 3;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  opt.n_best = 1;
  opt.max_length_ratio = 0;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
}

// The beam search CUDA uses (fixed rows, a step that updates its tensors in
// place, finished sentences extended by padding rather than dropped), run
// here eagerly: beam search's n-best lists, scores and attention, with and
// without length caps that end hypotheses.
TEST(BeamTest, FixedRowBeamEqualsBeam) {
  const auto& f = fixture();
  for (int64_t max_length : {256, 4}) {
    for (int64_t beam : {2, 5}) {
      nmt::SearchOptions opt;
      opt.beam_size = beam;
      opt.n_best = beam;
      opt.max_length = max_length;
      const auto want = run(*nmt::make_beam_search(opt), f, all(f), /*att=*/true);
      const auto got = run(*nmt::make_fixed_row_search(opt, /*capture=*/false), f, all(f), /*att=*/true);
      const auto plain = run(*nmt::make_fixed_row_search(opt, /*capture=*/false), f, all(f));
      ASSERT_EQ(got.size(), want.size());
      for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
        ASSERT_EQ(got[i].size(), want[i].size());
        for (size_t r = 0; r < want[i].size(); ++r) {
          const auto& w = want[i][r];
          const auto& g = got[i][r];
          const std::string where = "sentence " + std::to_string(i) + ", beam " + std::to_string(beam) + ", rank " +
                                    std::to_string(r) + ", max length " + std::to_string(max_length);
          EXPECT_EQ(g.ids, w.ids) << where;
          EXPECT_EQ(plain[i][r].ids, w.ids) << where << ", without attention";
          // Fixed rows multiply all rows to the end where beam search drops finished sentences: other products.
          EXPECT_TRUE(within(g.score, w.score, score_bound(f, i, w))) << where;
          ASSERT_EQ(g.attention.sizes(), w.attention.sizes()) << where;
          EXPECT_TRUE(within(g.attention, w.attention, logits_bound(f, i, w.ids.size()))) << where;
        }
      }
    }
  }
}

}  // namespace

TEST(BeamTest, FastDecoderPathSearchesAsTheReferencePath) {
  // Greedy and beam search give the same hypotheses (ids, and scores within
  // float tolerance) with the decoder's optimized step and its plain one.
  const auto& f = fixture();
  auto model = f.m.model;
  for (int beam : {1, 4}) {
    nmt::SearchOptions so;
    so.beam_size = beam;
    so.n_best = beam;
    auto search = nmt::make_search(so);
    nmt::EngineOptions plain;
    plain.plain = true;
    const auto ref = run(*search, f, all(f), true, plain);
    const auto fast = run(*search, f, all(f), true);
    ASSERT_EQ(ref.size(), fast.size());
    int compared = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(ref.size()); ++i) {
      ASSERT_EQ(ref[i].size(), fast[i].size()) << "sentence " << i << ", beam " << beam;
      if (beam == 1) {
        EXPECT_TRUE(nmt::test::same_greedy_hypothesis({model}, f.ex[i].src, ref[i][0], fast[i][0],
                                                      ended_by_eos(f, i, ref[i][0], so),
                                                      logits_bound(f, i, ref[i][0].ids.size()), &compared))
            << "sentence " << i;
        continue;
      }
      for (size_t k = 0; k < ref[i].size(); ++k) {
        EXPECT_EQ(ref[i][k].ids, fast[i][k].ids) << "sentence " << i << ", beam " << beam << ", rank " << k;
        EXPECT_TRUE(within(ref[i][k].score, fast[i][k].score, score_bound(f, i, ref[i][k])))
            << "sentence " << i << ", beam " << beam;
        EXPECT_TRUE(within(ref[i][k].attention, fast[i][k].attention, logits_bound(f, i, ref[i][k].ids.size())));
      }
    }
    if (beam == 1) {
      EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
    }
  }
}
