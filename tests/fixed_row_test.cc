// The fixed-row searches (what CUDA runs, replayed as graphs) across batches:
// one search object keeps each padded shape's tensors and step graph, and a
// later batch of that shape refills them. Each batch must still get exactly
// what a fresh search gives it, whatever ran before it, with a shortlist
// (whose states are not refilled) too. Run here eagerly (capture off), the
// same code and copies as on CUDA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/batch.h"
#include "search/search.h"
#include "search/shortlist.h"
#include "search_util.h"
#include "test_util.h"

namespace {

using nmt::test::iota;
using nmt::test::scorer_of;
using nmt::test::source_examples;

// Two batches of `n` sentences each with the same source positions (the
// longer one's), but other sentences: one padded shape, other states.
std::vector<nmt::Batch> same_shape_batches(int n) {
  auto a = nmt::make_batch(source_examples(n, 31), iota(n), false);
  auto b = nmt::make_batch(source_examples(n, 32), iota(n), false);
  const int64_t S = std::max(a.src.size(1), b.src.size(1));
  return {nmt::pad_batch(a, n, S, 0), nmt::pad_batch(b, n, S, 0)};
}

// A shortlist in which source piece e lists one target, e + 1: other
// source pieces, another list.
std::shared_ptr<const nmt::Shortlist> small_shortlist() {
  const auto& tok = nmt::test::toy_tokenizer();
  const int64_t V = tok.vocab_size();
  std::vector<std::string> lines;
  for (int64_t e = nmt::kEosId + 1; e < V; ++e)
    lines.push_back(tok.piece(e) + "\t" + tok.piece(nmt::kEosId + 1 + (e + 1) % (V - nmt::kEosId - 1)) + "\t0.5");
  const std::string path = nmt::test::temp_dir("fixed-row-shortlist") + "/lex.tsv";
  nmt::test::write_lines(path, lines);
  nmt::ShortlistOptions opt;
  opt.path = path;
  opt.best = 1;
  opt.frequent = 0;
  return std::make_shared<const nmt::Shortlist>(nmt::Shortlist::load(opt, tok, tok));
}

// `got` and `want` the same hypotheses, bit for bit: the same products in the same shapes.
void expect_same(const std::vector<std::vector<nmt::Hypothesis>>& got,
                 const std::vector<std::vector<nmt::Hypothesis>>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << where << ", sentence " << i;
    for (size_t r = 0; r < want[i].size(); ++r) {
      const auto& g = got[i][r];
      const auto& w = want[i][r];
      EXPECT_EQ(g.ids, w.ids) << where << ", sentence " << i << ", rank " << r;
      EXPECT_EQ(g.score, w.score) << where << ", sentence " << i << ", rank " << r;
      ASSERT_EQ(g.attention.defined(), w.attention.defined()) << where;
      if (w.attention.defined()) {
        EXPECT_TRUE(torch::equal(g.attention, w.attention)) << where << ", sentence " << i;
      }
    }
  }
}

// Batches A, B (same shape as A), C (a shape of its own), A again through
// one search: each as a fresh search decodes it.
TEST(FixedRowTest, ABatchOfAKeptShapeDecodesAsInAFreshSearch) {
  auto a = nmt::test::eval_model(41), b = nmt::test::eval_model(42);
  const auto ab = same_shape_batches(9);
  const auto c = nmt::make_batch(source_examples(3, 33), iota(3), false);
  const std::vector<nmt::Batch> batches = {ab[0], ab[1], c, ab[0]};
  ASSERT_NE(c.size(), ab[0].size());
  torch::NoGradGuard ng;
  for (int64_t beam : {1, 4}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;
    opt.n_best = beam;
    for (auto models : {std::vector<nmt::Seq2Seq>{a}, std::vector<nmt::Seq2Seq>{a, b}}) {
      for (bool with_attention : {false, true}) {
        // One search and one scorer for every batch, as the translator has: its engines are the shape's.
        auto kept = nmt::make_fixed_row_search(opt, /*capture=*/false);
        auto scorer = scorer_of(models);
        for (size_t k = 0; k < batches.size(); ++k) {
          auto fresh = scorer_of(models);
          const auto want = nmt::make_fixed_row_search(opt, false)->run(fresh, batches[k], with_attention);
          const auto got = kept->run(scorer, batches[k], with_attention);
          expect_same(got, want, "beam " + std::to_string(beam) + ", " + std::to_string(models.size()) +
                                     " model(s), batch " + std::to_string(k) + (with_attention ? ", attention" : ""));
        }
      }
    }
  }
}

// The kept state really is refilled: B's hypotheses differ from A's (else
// the test above could not tell a stale state from a refilled one).
TEST(FixedRowTest, TheTwoSameShapeBatchesTranslateDifferently) {
  auto m = nmt::test::eval_model(41);
  const auto ab = same_shape_batches(9);
  torch::NoGradGuard ng;
  auto search = nmt::make_fixed_row_search(nmt::SearchOptions{}, false);
  auto s = scorer_of({m});
  const auto ha = search->run(s, ab[0], false);
  const auto hb = search->run(s, ab[1], false);
  int differ = 0;
  for (size_t i = 0; i < ha.size(); ++i) differ += ha[i][0].ids != hb[i][0].ids;
  EXPECT_GT(differ, 0);
}

// With a shortlist each batch has its own output rows, outside the state's
// tensors: no state is refilled, and each batch still decodes as alone.
TEST(FixedRowTest, WithAShortlistEveryBatchDecodesAsInAFreshSearch) {
  auto m = nmt::test::eval_model(43);
  auto ab = same_shape_batches(9);
  // B: one short sentence 9 times, in A's shape: fewer source pieces, a shorter list.
  const std::vector<nmt::Example> one(9, source_examples(1, 36)[0]);
  ab[1] = nmt::pad_batch(nmt::make_batch(one, iota(9), false), 9, ab[0].src.size(1), 0);
  const auto shortlist = small_shortlist();
  ASSERT_NE(shortlist->for_batch(ab[0].src).size(0), shortlist->for_batch(ab[1].src).size(0));
  torch::NoGradGuard ng;
  auto kept = nmt::make_fixed_row_search(nmt::SearchOptions{}, false);
  auto scorer = scorer_of({m});
  scorer.set_shortlist(shortlist);
  for (const auto& batch : {ab[0], ab[1], ab[0]}) {
    auto fresh = scorer_of({m});
    fresh.set_shortlist(shortlist);
    expect_same(kept->run(scorer, batch, true),
                nmt::make_fixed_row_search(nmt::SearchOptions{}, false)->run(fresh, batch, true), "shortlist");
  }
}

// More shapes than a search keeps: the least recently used make room, and a
// shape that comes back after its tensors went decodes as in a fresh search.
TEST(FixedRowTest, MoreShapesThanKeptStillDecodeAsInAFreshSearch) {
  auto m = nmt::test::eval_model(45);
  const auto base = nmt::make_batch(source_examples(3, 37), iota(3), false);
  std::vector<nmt::Batch> batches;
  for (int64_t i = 0; i < 18; ++i) batches.push_back(nmt::pad_batch(base, 3, base.src.size(1) + 8 * i, 0));
  batches.push_back(batches[0]);   // the first to go
  batches.push_back(batches[17]);  // still kept
  torch::NoGradGuard ng;
  for (int64_t beam : {1, 2}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;
    opt.n_best = beam;
    auto kept = nmt::make_fixed_row_search(opt, /*capture=*/false);
    auto scorer = scorer_of({m});
    for (size_t k = 0; k < batches.size(); ++k) {
      auto fresh = scorer_of({m});
      expect_same(kept->run(scorer, batches[k], true),
                  nmt::make_fixed_row_search(opt, false)->run(fresh, batches[k], true),
                  "beam " + std::to_string(beam) + ", batch " + std::to_string(k));
    }
  }
}

// A state is refilled only from one of its own shape.
TEST(FixedRowTest, RefillingAStateFromAnotherShapeThrows) {
  auto m = nmt::test::eval_model(44);
  torch::NoGradGuard ng;
  auto s = scorer_of({m});
  auto x = s.start(nmt::make_batch(source_examples(4, 34), iota(4), false));
  auto y = s.start(nmt::make_batch(source_examples(5, 35), iota(5), false));
  s.own_storage(x);
  EXPECT_THROW(s.copy_all(x, y), nmt::Error);
  EXPECT_NO_THROW(s.copy_all(x, x));
}

}  // namespace
