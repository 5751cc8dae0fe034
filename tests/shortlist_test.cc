// Lexical shortlists on a briefly trained tiny model: the candidate ids of a
// batch, search restricted to them (ids map back to the vocabulary, a list
// holding the unrestricted choices changes no greedy output, nothing outside
// the list is ever chosen), the table's file format and its errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "base/error.h"
#include "model/checkpoint.h"
#include "engine/rnn_engine.h"
#include "search/scorer.h"
#include "search/search.h"
#include "search/shortlist.h"
#include "test_util.h"

namespace {

struct ShortlistFixture {
  nmt::LoadedModel m;
  std::vector<nmt::Example> ex;
  std::vector<int64_t> all;
};

const ShortlistFixture& shortlist_fixture() {
  static const ShortlistFixture f = [] {
    ShortlistFixture f;
    f.m = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
    std::vector<std::string> src, tgt;
    nmt::test::toy_corpus(12, 99, &src, &tgt);
    for (const auto& s : src) {
      nmt::Example e;
      e.src = f.m.src_tok.encode(s);
      e.src.push_back(nmt::kEosId);
      f.all.push_back(static_cast<int64_t>(f.ex.size()));
      f.ex.push_back(e);
    }
    return f;
  }();
  return f;
}

// Writes a table in which every source piece lists `targets` (ids), and loads it.
nmt::Shortlist table_listing(const std::set<int64_t>& targets, int64_t frequent, const std::string& tag) {
  const auto& f = shortlist_fixture();
  std::vector<std::string> lines;
  for (int64_t e = nmt::kEosId + 1; e < f.m.src_tok.vocab_size(); ++e)
    for (int64_t t : targets)
      if (t > nmt::kEosId) lines.push_back(f.m.src_tok.piece(e) + "\t" + f.m.tgt_tok.piece(t) + "\t0.5");
  const std::string path = nmt::test::temp_dir(tag) + "/lex.tsv";
  nmt::test::write_lines(path, lines);
  nmt::ShortlistOptions opt;
  opt.path = path;
  opt.best = 1 << 20;
  opt.frequent = frequent;
  return nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok);
}

// The bound on two paths' logits (with and without a list: other output
// products) for a hypothesis of `ids` pieces of example i.
double logits_bound(size_t i, size_t ids) {
  auto model = shortlist_fixture().m.model;
  return nmt::test::model_rounding_bound(
      *model, nmt::test::model_depth(static_cast<int64_t>(shortlist_fixture().ex[i].src.size()), static_cast<int64_t>(ids) + 1));
}

// The bound on two paths' scores of h, a hypothesis of example i: each of its
// T log-probabilities moves at most twice as far as the logits.
double score_bound(size_t i, const nmt::Hypothesis& h) {
  const auto T = static_cast<int64_t>(h.ids.size()) + 1;
  return 2 * T * logits_bound(i, h.ids.size()) + 2 * nmt::test::gamma(T, 0x1p-24) * std::abs(h.score);
}

// Whether h, a greedy hypothesis of example i, ended by choosing EOS rather than at its length cap.
bool ended_by_eos(size_t i, const nmt::Hypothesis& h) {
  const nmt::SearchOptions opt;
  const auto cap = std::min<int64_t>(static_cast<int64_t>(shortlist_fixture().ex[i].src.size() * opt.max_length_ratio) + 5,
                                     opt.max_length);
  return static_cast<int64_t>(h.ids.size()) < cap;
}

std::vector<std::vector<nmt::Hypothesis>> search(int beam, const std::shared_ptr<const nmt::Shortlist>& list) {
  const auto& f = shortlist_fixture();
  c10::InferenceMode guard;
  auto model = f.m.model;
  model->eval();
  nmt::Scorer scorer({std::make_shared<nmt::RnnEngine>(model)});
  scorer.set_shortlist(list);
  nmt::SearchOptions so;
  so.beam_size = beam;
  return nmt::make_search(so)->run(scorer, nmt::make_batch(f.ex, f.all, false), false);
}

TEST(ShortlistTest, CandidatesAreTheSpecialsTheFrequentAndTheBatchsTranslations) {
  const auto& f = shortlist_fixture();
  const std::string dir = nmt::test::temp_dir("shortlist-cands");
  const auto piece = [&](const nmt::Tokenizer& t, int64_t id) { return t.piece(id); };
  const int64_t e1 = 5, e2 = 6;  // two source ids
  nmt::test::write_lines(dir + "/lex.tsv", {piece(f.m.src_tok, e1) + "\t" + piece(f.m.tgt_tok, 20) + "\t0.6",
                                            piece(f.m.src_tok, e1) + "\t" + piece(f.m.tgt_tok, 12) + "\t0.3",
                                            piece(f.m.src_tok, e1) + "\t" + piece(f.m.tgt_tok, 30) + "\t0.1",
                                            "no-such-piece\t" + piece(f.m.tgt_tok, 25) + "\t0.9",
                                            piece(f.m.src_tok, e2) + "\t" + piece(f.m.tgt_tok, 22) + "\t1"});
  nmt::ShortlistOptions opt;
  opt.path = dir + "/lex.tsv";
  opt.best = 2;      // e1 keeps 20 and 12, not 30
  opt.frequent = 8;  // ids 0..7
  const auto list = nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok);
  auto ids = [](const torch::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  // e1 and padding: the frequent ids and e1's two best.
  EXPECT_EQ(ids(list.for_batch(torch::tensor({e1, nmt::kEosId, nmt::kPadId}).view({1, 3}))),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 12, 20}));
  EXPECT_EQ(ids(list.for_batch(torch::tensor({e2, e1}).view({2, 1}))),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 12, 20, 22}));
  opt.frequent = 0;  // the special ids stay
  EXPECT_EQ(ids(nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok).for_batch(torch::tensor({e2}).view({1, 1}))),
            (std::vector<int64_t>{0, 1, 2, 3, 22}));
}

TEST(ShortlistTest, GreedyOutputsStayWhenTheListHoldsTheirPieces) {
  // Greedy takes the argmax, which a list holding it leaves in place: with
  // only the pieces the unrestricted search chose (columns no longer equal
  // to ids), every output is the same.
  const auto plain = search(1, nullptr);
  std::set<int64_t> used;
  for (const auto& h : plain) used.insert(h[0].ids.begin(), h[0].ids.end());
  auto list = std::make_shared<const nmt::Shortlist>(table_listing(used, 0, "shortlist-greedy"));
  const auto& f = shortlist_fixture();
  const auto cands = list->for_batch(nmt::make_batch(f.ex, f.all, false).src);
  ASSERT_LT(cands.size(0), f.m.tgt_tok.vocab_size()) << "the test needs a list smaller than the vocabulary";
  const auto listed = search(1, list);
  ASSERT_EQ(plain.size(), listed.size());
  int compared = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    // The list's logits come from other output products: the same choices
    // wherever they are not near ties (nmt::test::greedy_margin()).
    const auto& h = plain[i][0];
    const double margin = nmt::test::greedy_margin({f.m.model}, f.ex[i].src, h.ids, ended_by_eos(i, h));
    if (margin <= 2 * logits_bound(i, h.ids.size())) continue;
    ++compared;
    EXPECT_EQ(h.ids, listed[i][0].ids) << "sentence " << i;
    // Renormalized over fewer pieces, a token's log-probability can only rise.
    EXPECT_GE(listed[i][0].score, h.score - score_bound(i, h)) << "sentence " << i;
  }
  EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
}

TEST(ShortlistTest, TheWholeVocabularyChangesNothing) {
  const auto& f = shortlist_fixture();
  std::set<int64_t> every;
  for (int64_t t = 0; t < f.m.tgt_tok.vocab_size(); ++t) every.insert(t);
  auto list = std::make_shared<const nmt::Shortlist>(table_listing(every, 0, "shortlist-all"));
  for (int beam : {1, 4}) {
    const auto plain = search(beam, nullptr), listed = search(beam, list);
    int compared = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      // The list's output product has its columns in another order (other kernels).
      const double bound = logits_bound(i, plain[i][0].ids.size());
      if (beam == 1) {
        EXPECT_TRUE(nmt::test::same_greedy_hypothesis({f.m.model}, f.ex[i].src, plain[i][0], listed[i][0],
                                                      ended_by_eos(i, plain[i][0]), bound, &compared))
            << "sentence " << i;
        continue;
      }
      EXPECT_EQ(plain[i][0].ids, listed[i][0].ids) << "sentence " << i << ", beam " << beam;
      EXPECT_TRUE(nmt::test::within(plain[i][0].score, listed[i][0].score, score_bound(i, plain[i][0])))
          << "sentence " << i << ", beam " << beam;
    }
    if (beam == 1) {
      EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
    }
  }
}

TEST(ShortlistTest, NothingOutsideTheListIsChosen) {
  const auto& f = shortlist_fixture();
  const std::set<int64_t> few{5, 9, 14};  // and the specials
  auto list = std::make_shared<const nmt::Shortlist>(table_listing(few, 0, "shortlist-few"));
  for (int beam : {1, 3})
    for (const auto& h : search(beam, list)) {
      ASSERT_FALSE(h.empty());
      for (int64_t id : h[0].ids) EXPECT_TRUE(few.count(id) || id <= nmt::kEosId) << "id " << id << ", beam " << beam;
      EXPECT_LE(h[0].score, 0.0);
    }
  (void)f;
}

TEST(ShortlistTest, BadTablesAreNamedByFileAndLine) {
  const auto& f = shortlist_fixture();
  const std::string dir = nmt::test::temp_dir("shortlist-bad");
  const std::string good = f.m.src_tok.piece(5) + "\t" + f.m.tgt_tok.piece(5) + "\t0.5";
  nmt::ShortlistOptions opt;
  opt.path = dir + "/lex.tsv";
  auto error = [&](const std::vector<std::string>& lines) {
    nmt::test::write_lines(opt.path, lines);
    return nmt::test::error_of([&] { nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok); });
  };
  EXPECT_TRUE(nmt::test::contains(error({good, "a\tb"}), "lex.tsv:2: expected source_piece<TAB>target_piece<TAB>"));
  EXPECT_TRUE(nmt::test::contains(error({"a\tb\tc\td"}), "lex.tsv:1: expected"));
  EXPECT_TRUE(nmt::test::contains(error({good, good, "a\tb\t1.5"}), "lex.tsv:3: probability '1.5' is not in [0, 1]"));
  EXPECT_TRUE(nmt::test::contains(error({"a\tb\t"}), "lex.tsv:1: probability '' is not in [0, 1]"));
  opt.path = dir + "/missing.tsv";
  EXPECT_TRUE(nmt::test::contains(
      nmt::test::error_of([&] { nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok); }), "missing.tsv"));
  opt.best = 0;
  EXPECT_THROW(nmt::Shortlist::load(opt, f.m.src_tok, f.m.tgt_tok), nmt::UsageError);
}

}  // namespace
