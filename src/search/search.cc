// Greedy search (an argmax per step for the whole batch) and batched beam
// search (B sentences x K hypotheses decoded as one batch of B*K rows).
#include "search/search.h"

#include "search/search_parts.h"
#include "search/step_graph.h"
#include "text/tokenizer.h"

namespace nmt {
namespace {

using namespace search_parts;

// Whether to drop `done` finished rows (or sentences) of `live` from the
// batch now: once they are an eighth of it, so that the copy of the source
// memory that dropping costs stays small against the steps it saves (the
// eighth is a first choice, not a tuned one).
bool worth_dropping(int64_t done, int64_t live) { return done > 0 && 8 * done >= live; }

// Greedy search. Sentences that have finished leave the batch (their rows
// of the decoder state with them), so later steps run on the live rows only.
class GreedySearch : public Search {
 public:
  explicit GreedySearch(const SearchOptions& opt) : opt_(opt) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size();
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto state = scorer.start(batch);
    auto caps = length_caps(batch, opt_);
    const int64_t steps = caps.max().item<int64_t>() + 1;  // +1 for the final EOS

    // Every sentence's outputs, written row by row as its live row produces them.
    GreedyOutputs out(batch, steps, with_attention);
    auto &tokens = out.tokens, &score = out.score, &att = out.att;
    // The live rows: R of them, row r decoding sentence live[r].
    auto live = torch::arange(B, i64);                    // [R]
    auto caps_live = caps.to(device);                     // [R]
    auto y = torch::full({B}, kBosId, i64);               // [R]
    auto finished = torch::zeros({B}, f32.dtype(torch::kBool));  // [R] ended, not yet dropped
    for (int64_t t = 0; t < steps; ++t) {
      torch::Tensor alpha;
      auto best = scorer.step_best(y, state, with_attention ? &alpha : nullptr);  // [R] each
      // A sentence at its cap must end now. (Special ids are their own columns.)
      auto capped = caps_live.le(t);
      auto col = torch::where(capped, torch::full_like(best.col, kEosId), best.col).masked_fill(finished, kPadId);
      auto tok_logp = torch::where(capped, best.eos_logp, best.logp);
      auto next = scorer.token_ids(state, col);                              // [R] target ids
      score.index_add_(0, live, tok_logp.masked_fill(finished, 0.0));
      tokens.select(1, t).index_copy_(0, live, next);
      if (with_attention) att.select(1, t).index_copy_(0, live, alpha.to(torch::kFloat));
      finished = finished.logical_or(next.eq(kEosId));
      y = next;
      const int64_t R = live.size(0), done = finished.sum().item<int64_t>();
      if (done == R) break;
      if (worth_dropping(done, R)) {
        auto keep = finished.logical_not().nonzero().squeeze(1);  // [R'] rows still decoding
        live = live.index_select(0, keep);
        caps_live = caps_live.index_select(0, keep);
        y = y.index_select(0, keep);
        finished = finished.index_select(0, keep);
        scorer.keep(state, keep);
      }
    }
    return greedy_hypotheses(batch, out, opt_.length_penalty);
  }

 private:
  SearchOptions opt_;
};

// Beam search. Each step is one decoder call on [B'*K] rows (the K
// hypotheses of each live sentence), one top-k over [B', K*V] candidates and
// index gathers; bookkeeping stays on the device. Finished hypotheses remain
// in the beam, extended by padding at no cost, so they compete with live ones
// by normalized score until their sentence ends; a sentence ends when all its
// K hypotheses have finished, and then leaves the batch. The search stops
// when every sentence has ended.
class BeamSearch : public Search {
 public:
  explicit BeamSearch(const SearchOptions& opt) : opt_(opt) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size(), K = opt_.beam_size;
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto state = scorer.start(batch, K);  // rows b*K + k: the K hypotheses of sentence b
    auto caps = length_caps(batch, opt_);                             // [B] on CPU
    const int64_t steps = caps.max().item<int64_t>() + 1;
    const int64_t S = batch.src.size(1);

    // Every sentence's beam as it ended, written when it leaves the batch.
    Beams out{torch::full({B, K}, kNegInf, f32), torch::zeros({B, K}, i64),
              torch::full({B, K, steps}, kPadId, i64),
              with_attention ? torch::zeros({B, K, steps, S}, f32) : torch::Tensor()};
    // The live sentences' beams: B' of them, sentence i being live[i].
    auto live = torch::arange(B, i64);                                // [B']
    auto capsK = caps.to(device).repeat_interleave(K).unsqueeze(1);   // [B'*K, 1]
    auto y = torch::full({B * K}, kBosId, i64);                       // [B'*K]
    Beams cur{torch::full({B, K}, kNegInf, f32),  // raw log-probability sums
              torch::zeros({B, K}, i64),          // tokens emitted, EOS included
              torch::empty({B, K, 0}, i64),       // [B', K, t]
              with_attention ? torch::empty({B, K, 0, S}, f32) : torch::Tensor()};  // [B', K, t, S]
    cur.score.select(1, 0).fill_(0);              // one live hypothesis per sentence at first
    auto finished = torch::zeros({B, K}, i64.dtype(torch::kBool));  // [B', K]

    for (int64_t t = 0; t < steps; ++t) {
      const int64_t Bl = live.size(0);
      torch::Tensor alpha;
      auto logp = scorer.step(y, state, with_attention ? &alpha : nullptr);  // [B'*K, V] (V: columns)
      auto c = choose_beams(logp, cur.score, cur.length, finished, capsK.le(t), opt_.length_penalty);
      auto token = scorer.token_ids(state, c.columns);  // [B', K] tokens appended
      cur.score = c.score;
      cur.length = c.length;
      finished = c.finished;
      cur.history = torch::cat({cur.history.gather(1, c.beam.unsqueeze(2).expand({Bl, K, t})),
                                token.unsqueeze(2)}, 2);
      if (with_attention) {
        auto prev = cur.attention.view({Bl * K, t, S}).index_select(0, c.rows).view({Bl, K, t, S});
        cur.attention = torch::cat({prev, alpha.to(torch::kFloat).index_select(0, c.rows).view({Bl, K, 1, S})}, 2);
      }
      y = token.view({-1});
      scorer.reorder(state, c.rows);

      auto ended = finished.all(1);  // [B'] every hypothesis finished: nothing of it changes any more
      const int64_t done = ended.sum().item<int64_t>();
      if (done == Bl) break;
      if (worth_dropping(done, Bl)) {
        out.write(cur.select(ended.nonzero().squeeze(1)), live.masked_select(ended));
        auto keep = ended.logical_not().nonzero().squeeze(1);  // [B''] sentences still decoding
        auto keep_rows = ((keep * K).unsqueeze(1) + torch::arange(K, i64)).view({-1});  // [B''*K]
        cur = cur.select(keep);
        live = live.index_select(0, keep);
        finished = finished.index_select(0, keep);
        capsK = capsK.index_select(0, keep_rows);
        y = y.index_select(0, keep_rows);
        scorer.keep(state, keep_rows);
      }
    }
    out.write(cur, live);
    return beam_hypotheses(batch, out, opt_);
  }

 private:
  SearchOptions opt_;
};

}  // namespace

std::unique_ptr<Search> make_search(const SearchOptions& opt, const torch::Device& device) {
  opt.validate();
  if (device.is_cuda() && !opt.no_cuda_graphs && cuda_graphs_built()) return make_fixed_row_search(opt, true);
  if (opt.beam_size == 1) return std::make_unique<GreedySearch>(opt);
  return std::make_unique<BeamSearch>(opt);
}

std::unique_ptr<Search> make_beam_search(const SearchOptions& opt) {
  opt.validate();
  return std::make_unique<BeamSearch>(opt);
}

}  // namespace nmt
