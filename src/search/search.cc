// Greedy search (an argmax per step for the whole batch) and batched beam
// search (B sentences x K hypotheses decoded as one batch of B*K rows).
#include "search/search.h"

#include <cmath>

#include "base/error.h"
#include "base/validate.h"
#include "search/step_graph.h"
#include "text/tokenizer.h"

namespace nmt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// GNMT length penalty ((5 + n) / 6)^alpha for n output tokens (EOS
// included), elementwise; 1 when alpha is 0. Normalized score = score / it.
torch::Tensor length_penalty(const torch::Tensor& n, double alpha) {
  if (alpha == 0) return torch::ones_like(n);
  return ((n + 5.0) / 6.0).pow(alpha);
}

// Per-sentence output cap: ratio * source length + 5, at most max_length.
torch::Tensor length_caps(const Batch& batch, const SearchOptions& opt) {
  auto caps = (batch.src_len.to(torch::kDouble) * opt.max_length_ratio).floor().to(torch::kInt64) + 5;
  return caps.clamp_max(opt.max_length);  // [B] on CPU
}

// Whether to drop `done` finished rows (or sentences) of `live` from the
// batch now: once they are an eighth of it, so that the copy of the source
// memory that dropping costs stays small against the steps it saves (the
// eighth is a first choice, not a tuned one).
bool worth_dropping(int64_t done, int64_t live) { return done > 0 && 8 * done >= live; }

// What greedy search writes for each sentence, on the batch's device.
struct GreedyOutputs {
  torch::Tensor tokens;  // [B, steps] int64: target ids, then EOS, then padding
  torch::Tensor score;   // [B] float: summed log-probabilities
  torch::Tensor att;     // [B, steps, S] float attention rows; undefined: not asked for
  GreedyOutputs(const Batch& batch, int64_t steps, bool with_attention) {
    const int64_t B = batch.size(), S = batch.src.size(1);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(batch.src.device());
    tokens = torch::full({B, steps}, kPadId, f32.dtype(torch::kInt64));
    score = torch::zeros({B}, f32);
    if (with_attention) att = torch::zeros({B, steps, S}, f32);
  }
};

// Each sentence's hypothesis from greedy search's outputs.
std::vector<std::vector<Hypothesis>> greedy_hypotheses(const Batch& batch, const GreedyOutputs& outputs,
                                                       double alpha) {
  const int64_t B = batch.size();
  auto tok = outputs.tokens.cpu();  // [B, steps]
  auto sc = outputs.score.cpu();
  const bool with_attention = outputs.att.defined();
  torch::Tensor att;
  if (with_attention) att = outputs.att.cpu();
  std::vector<std::vector<Hypothesis>> result(B);
  auto ta = tok.accessor<int64_t, 2>();
  auto ended = tok.eq(kEosId).logical_or(tok.eq(kPadId)).to(torch::kInt64).cumsum(1).eq(0).sum(1);  // [B] ids each
  auto norm = sc / length_penalty((ended + 1).to(torch::kFloat), alpha);  // EOS counted
  for (int64_t b = 0; b < B; ++b) {
    Hypothesis h;
    int64_t len = 0;
    for (; len < tok.size(1); ++len) {
      int64_t id = ta[b][len];
      if (id == kEosId || id == kPadId) break;
      h.ids.push_back(id);
    }
    h.score = sc[b].item<double>();
    h.norm_score = norm[b].item<double>();
    if (with_attention) {
      int64_t rows = std::min<int64_t>(len + 1, tok.size(1));
      h.attention = att[b].narrow(0, 0, rows).narrow(1, 0, batch.src_len[b].item<int64_t>()).clone();
    }
    result[b].push_back(std::move(h));
  }
  return result;
}

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

// Greedy search over fixed rows, each step one StepGraph run (on CUDA, a
// replayed CUDA graph): finished sentences stay in the batch, their tokens
// masked to padding and their scores to 0, and whether all have finished is
// read on the host only every kGraphCheckEvery steps. Gives what
// GreedySearch gives (to the float rounding of other batch sizes).
class GraphedGreedySearch : public Search {
 public:
  GraphedGreedySearch(const SearchOptions& opt, bool capture) : opt_(opt), capture_(capture) {}
  static constexpr int64_t kGraphCheckEvery = 8;

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size(), S = batch.src.size(1);
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto state = scorer.start(batch);
    scorer.own_moving_storage(state);  // updated in place by every replay
    auto caps_cpu = length_caps(batch, opt_);
    const int64_t steps = caps_cpu.max().item<int64_t>() + 1;  // +1 for the final EOS

    // What a step reads and writes, in place.
    GreedyOutputs out(batch, steps, with_attention);
    auto &tokens = out.tokens, &score = out.score, &att = out.att;
    auto caps = caps_cpu.to(device);                                // [B]
    auto y = torch::full({B}, kBosId, i64);                         // [B]
    auto finished = torch::zeros({B}, f32.dtype(torch::kBool));     // [B]
    auto t = torch::zeros({1}, i64);                                // [1] the step, on the device
    StepGraph graph(
        [&] {
          ScorerState s = state;  // shares the source memory; step_best gives s new moving tensors
          torch::Tensor alpha;
          auto best = scorer.step_best(y, s, with_attention ? &alpha : nullptr);  // [B] each
          auto capped = caps.le(t);                                             // [B]
          auto col = torch::where(capped, torch::full_like(best.col, kEosId), best.col).masked_fill(finished, kPadId);
          score.add_(torch::where(capped, best.eos_logp, best.logp).masked_fill(finished, 0.0));
          auto next = scorer.token_ids(s, col);                                 // [B] target ids
          tokens.scatter_(1, t.expand({B}).unsqueeze(1), next.unsqueeze(1));
          if (with_attention)  // row t of each sentence's attention: [B, 1, S] at index t of dim 1
            att.scatter_(1, t.view({1, 1, 1}).expand({B, 1, S}), alpha.to(torch::kFloat).unsqueeze(1));
          finished.logical_or_(next.eq(kEosId));
          y.copy_(next);
          scorer.copy_moving(state, s);
          t.add_(1);
        },
        device, capture_);
    for (int64_t step = 0; step < steps; ++step) {
      graph.run();
      if ((step + 1) % kGraphCheckEvery == 0 && finished.all().item<bool>()) break;
    }
    return greedy_hypotheses(batch, out, opt_.length_penalty);
  }

 private:
  SearchOptions opt_;
  bool capture_;
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
    const int64_t V = scorer.columns(state);  // the vocabulary, or the batch's shortlist
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
    // A row's own k best continuations contain every one of its candidates
    // that can make the beam (a row's candidates share its score and length
    // penalty, so they rank within the row as its log-probabilities do): the
    // beam is chosen among the K * k of them instead of all K * V.
    const int64_t k = std::min(K, V);
    const auto first = torch::arange(k, i64).eq(0).unsqueeze(0);  // [1, k] true in column 0
    const auto no_lp = torch::full({1, k}, kNegInf, f32);

    for (int64_t t = 0; t < steps; ++t) {
      const int64_t Bl = live.size(0);
      torch::Tensor alpha;
      auto logp = scorer.step(y, state, with_attention ? &alpha : nullptr);  // [B'*K, V] (V: columns)
      auto [top_lp, top_id] = logp.topk(k, 1);                            // [B'*K, k]
      // A row at its length cap may only end; a finished row only pads, at no cost.
      auto capped = capsK.le(t);                                          // [B'*K, 1]
      top_lp = torch::where(capped, torch::where(first, logp.narrow(1, kEosId, 1), no_lp), top_lp);
      top_id = torch::where(capped, torch::full_like(top_id, kEosId), top_id);
      auto done_row = finished.view({Bl * K, 1});
      top_lp = torch::where(done_row, torch::where(first, torch::zeros_like(no_lp), no_lp), top_lp);
      top_id = torch::where(done_row, torch::full_like(top_id, kPadId), top_id);
      auto cand = cur.score.unsqueeze(2) + top_lp.view({Bl, K, k});       // [B', K, k]
      auto cand_len = (cur.length + finished.logical_not().to(torch::kInt64)).to(torch::kFloat);  // [B', K]
      auto ranked = cand / length_penalty(cand_len, opt_.length_penalty).unsqueeze(2);  // normalized
      auto top = std::get<1>(ranked.view({Bl, K * k}).topk(K, 1));        // [B', K]
      auto beam = top.div(k, "floor");                                    // hypothesis extended
      auto token = scorer.token_ids(state, top_id.view({Bl, K * k}).gather(1, top));  // token appended
      auto rows = ((torch::arange(Bl, i64) * K).unsqueeze(1) + beam).view({-1});  // [B'*K] rows kept
      cur.score = cand.view({Bl, K * k}).gather(1, top);
      auto was_finished = finished.gather(1, beam);
      cur.length = cur.length.gather(1, beam) + was_finished.logical_not().to(torch::kInt64);
      finished = was_finished.logical_or(token.eq(kEosId));
      cur.history = torch::cat({cur.history.gather(1, beam.unsqueeze(2).expand({Bl, K, t})),
                                token.unsqueeze(2)}, 2);
      if (with_attention) {
        auto prev = cur.attention.view({Bl * K, t, S}).index_select(0, rows).view({Bl, K, t, S});
        cur.attention = torch::cat({prev, alpha.to(torch::kFloat).index_select(0, rows).view({Bl, K, 1, S})}, 2);
      }
      y = token.view({-1});
      scorer.reorder(state, rows);

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
    return best_first(batch, out, with_attention);
  }

 private:
  // Beams of some sentences: score, length [B, K]; history [B, K, t];
  // attention [B, K, t, S] (undefined without attention).
  struct Beams {
    torch::Tensor score, length, history, attention;

    // The beams of sentences `idx` [n] (int64), in that order.
    Beams select(const torch::Tensor& idx) const {
      return {score.index_select(0, idx), length.index_select(0, idx), history.index_select(0, idx),
              attention.defined() ? attention.index_select(0, idx) : torch::Tensor()};
    }
    // Stores `beams` (of t <= this history's steps) as the beams of sentences `idx` [n].
    void write(const Beams& beams, const torch::Tensor& idx) {
      score.index_copy_(0, idx, beams.score);
      length.index_copy_(0, idx, beams.length);
      history.narrow(2, 0, beams.history.size(2)).index_copy_(0, idx, beams.history);
      if (attention.defined())
        attention.narrow(2, 0, beams.attention.size(2)).index_copy_(0, idx, beams.attention);
    }
  };

  // The n_best hypotheses of each sentence, best normalized score first.
  // score, length [B, K]; history [B, K, t]; att_history [B, K, t, S].
  std::vector<std::vector<Hypothesis>> best_first(const Batch& batch, const Beams& beams, bool with_attention) const {
    const int64_t B = batch.size(), K = opt_.beam_size;
    auto norm = beams.score / length_penalty(beams.length.to(torch::kFloat), opt_.length_penalty);  // [B, K]
    auto order = std::get<1>(norm.sort(1, /*descending=*/true));  // best first
    auto tok = beams.history.cpu();
    auto len = beams.length.cpu();
    auto sc = beams.score.cpu();
    auto nm = norm.cpu();
    auto ord = order.cpu();
    torch::Tensor att = with_attention ? beams.attention.cpu() : torch::Tensor();
    const int64_t n_best = std::min(opt_.n_best, K);
    std::vector<std::vector<Hypothesis>> result(B);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t src_len = batch.src_len[b].item<int64_t>();
      for (int64_t r = 0; r < n_best; ++r) {
        const int64_t k = ord[b][r].item<int64_t>();
        Hypothesis h;
        const int64_t n = len[b][k].item<int64_t>();  // EOS included
        auto ids = tok[b][k];
        for (int64_t i = 0; i < n; ++i) {
          const int64_t id = ids[i].item<int64_t>();
          if (id == kEosId) break;
          h.ids.push_back(id);
        }
        h.score = sc[b][k].item<double>();
        h.norm_score = nm[b][k].item<double>();
        if (with_attention) h.attention = att[b][k].narrow(0, 0, n).narrow(1, 0, src_len).clone();
        result[b].push_back(std::move(h));
      }
    }
    return result;
  }

  SearchOptions opt_;
};

}  // namespace

std::unique_ptr<Search> make_search(const SearchOptions& opt, const torch::Device& device) {
  opt.validate();
  if (opt.beam_size == 1) {
    if (device.is_cuda() && !opt.no_cuda_graphs && cuda_graphs_built())
      return std::make_unique<GraphedGreedySearch>(opt, /*capture=*/true);
    return std::make_unique<GreedySearch>(opt);
  }
  return std::make_unique<BeamSearch>(opt);
}

std::unique_ptr<Search> make_fixed_row_greedy_search(const SearchOptions& opt, bool capture) {
  opt.validate();
  return std::make_unique<GraphedGreedySearch>(opt, capture);
}

std::unique_ptr<Search> make_beam_search(const SearchOptions& opt) {
  opt.validate();
  return std::make_unique<BeamSearch>(opt);
}

}  // namespace nmt
