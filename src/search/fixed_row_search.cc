// Greedy and beam search over fixed rows, for CUDA graphs: every step reads
// and writes tensors allocated once, in place, and reads nothing on the host,
// so that StepGraph (step_graph.h) can capture it once and replay it. Finished
// sentences stay in the batch, masked (greedy: their tokens to padding and
// their scores to 0; beam: their hypotheses extended by padding at no cost),
// and whether all have finished is read on the host only every
// kFixedRowCheckEvery steps. They give what search.cc's searches give, which
// drop finished sentences instead, to the float rounding of other batch sizes.
#include <memory>
#include <vector>

#include "search/search.h"
#include "search/search_parts.h"
#include "search/step_graph.h"
#include "text/tokenizer.h"

namespace nmt {
namespace {

using namespace search_parts;

// Runs `graph` once per step, at most `steps` times, stopping once every
// element of `finished` is set (read every kFixedRowCheckEvery steps).
void run_steps(StepGraph& graph, int64_t steps, const torch::Tensor& finished) {
  for (int64_t step = 0; step < steps; ++step) {
    graph.run();
    if ((step + 1) % kFixedRowCheckEvery == 0 && finished.all().item<bool>()) break;
  }
}

class FixedRowGreedySearch : public Search {
 public:
  FixedRowGreedySearch(const SearchOptions& opt, bool capture) : opt_(opt), capture_(capture) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size(), S = batch.src.size(1);
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    auto state = scorer.start(batch);
    scorer.own_moving_storage(state);  // updated in place by every replay
    auto caps_cpu = length_caps(batch, opt_);
    const int64_t steps = caps_cpu.max().item<int64_t>() + 1;  // +1 for the final EOS

    // What a step reads and writes, in place.
    GreedyOutputs out(batch, steps, with_attention);
    auto &tokens = out.tokens, &score = out.score, &att = out.att;
    auto caps = caps_cpu.to(device);                            // [B]
    auto y = torch::full({B}, kBosId, i64);                     // [B]
    auto finished = torch::zeros({B}, i64.dtype(torch::kBool));  // [B]
    auto t = torch::zeros({1}, i64);                            // [1] the step, on the device
    StepGraph graph(
        [&] {
          ScorerState s = state;  // shares the source memory; step_best gives s new moving tensors
          torch::Tensor alpha;
          auto best = scorer.step_best(y, s, with_attention ? &alpha : nullptr);  // [B] each
          auto capped = caps.le(t);                                             // [B]
          auto col = torch::where(capped, torch::full_like(best.col, kEosId), best.col).masked_fill(finished, kPadId);
          score.add_(torch::where(capped, best.eos_logp, best.logp).masked_fill(finished, 0.0));
          auto next = scorer.token_ids(s, col);  // [B] target ids
          tokens.scatter_(1, t.expand({B}).unsqueeze(1), next.unsqueeze(1));
          if (with_attention)  // row t of each sentence's attention: [B, 1, S] at index t of dim 1
            att.scatter_(1, t.view({1, 1, 1}).expand({B, 1, S}), alpha.to(torch::kFloat).unsqueeze(1));
          finished.logical_or_(next.eq(kEosId));
          y.copy_(next);
          scorer.copy_moving(state, s);
          t.add_(1);
        },
        device, capture_);
    run_steps(graph, steps, finished);
    return greedy_hypotheses(batch, out, opt_.length_penalty);
  }

 private:
  SearchOptions opt_;
  bool capture_;
};

// Beam search on B*K fixed rows (row b*K + k: hypothesis k of sentence b):
// the step of search.cc's BeamSearch (choose_beams()), with each beam's
// history and attention kept whole ([B, K, steps(, S)]) and reordered in place.
class FixedRowBeamSearch : public Search {
 public:
  FixedRowBeamSearch(const SearchOptions& opt, bool capture) : opt_(opt), capture_(capture) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size(), K = opt_.beam_size, S = batch.src.size(1);
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto state = scorer.start(batch, K);
    scorer.own_moving_storage(state);  // updated in place by every replay
    auto caps = length_caps(batch, opt_);                             // [B] on CPU
    const int64_t steps = caps.max().item<int64_t>() + 1;             // +1 for the final EOS

    // What a step reads and writes, in place.
    auto capsK = caps.to(device).repeat_interleave(K).unsqueeze(1);   // [B*K, 1]
    auto y = torch::full({B * K}, kBosId, i64);                       // [B*K]
    Beams cur{torch::full({B, K}, kNegInf, f32), torch::zeros({B, K}, i64),
              torch::full({B, K, steps}, kPadId, i64),
              with_attention ? torch::zeros({B, K, steps, S}, f32) : torch::Tensor()};
    cur.score.select(1, 0).fill_(0);                                  // one live hypothesis per sentence at first
    auto finished = torch::zeros({B, K}, i64.dtype(torch::kBool));    // [B, K]
    auto t = torch::zeros({1}, i64);                                  // [1] the step, on the device
    StepGraph graph(
        [&] {
          ScorerState s = state;  // shares the source memory; step gives s new moving tensors
          torch::Tensor alpha;
          auto logp = scorer.step(y, s, with_attention ? &alpha : nullptr);  // [B*K, V]
          auto c = choose_beams(logp, cur.score, cur.length, finished, capsK.le(t), opt_.length_penalty);
          auto token = scorer.token_ids(s, c.columns);  // [B, K]
          auto history = cur.history.gather(1, c.beam.unsqueeze(2).expand({B, K, steps}));
          history.scatter_(2, t.view({1, 1, 1}).expand({B, K, 1}), token.unsqueeze(2));
          cur.history.copy_(history);
          if (with_attention) {  // the extended rows' attention, then row t: this step's
            auto a = cur.attention.view({B * K, steps, S}).index_select(0, c.rows);
            a.scatter_(1, t.view({1, 1, 1}).expand({B * K, 1, S}),
                       alpha.to(torch::kFloat).index_select(0, c.rows).unsqueeze(1));
            cur.attention.copy_(a.view({B, K, steps, S}));
          }
          cur.score.copy_(c.score);
          cur.length.copy_(c.length);
          finished.copy_(c.finished);
          y.copy_(token.view({-1}));
          scorer.reorder(s, c.rows);
          scorer.copy_moving(state, s);
          t.add_(1);
        },
        device, capture_);
    run_steps(graph, steps, finished);
    return beam_hypotheses(batch, cur, opt_);
  }

 private:
  SearchOptions opt_;
  bool capture_;
};

}  // namespace

std::unique_ptr<Search> make_fixed_row_search(const SearchOptions& opt, bool capture) {
  opt.validate();
  if (opt.beam_size == 1) return std::make_unique<FixedRowGreedySearch>(opt, capture);
  return std::make_unique<FixedRowBeamSearch>(opt, capture);
}

}  // namespace nmt
