// Greedy and beam search over fixed rows, for CUDA graphs: every step reads
// and writes tensors allocated once, in place, and reads nothing on the host,
// so that StepGraph (step_graph.h) can capture it once and replay it. Finished
// sentences stay in the batch, masked (greedy: their tokens to padding and
// their scores to 0; beam: their hypotheses extended by padding at no cost),
// and whether all have finished is read on the host only every
// kFixedRowCheckEvery steps. They give what search.cc's searches give, which
// drop finished sentences instead, to the float rounding of other batch sizes.
//
// A batch is padded (rows and source positions) to a multiple of kShapeStep,
// and a search keeps each padded shape's tensors and step graph: a later
// batch of that shape copies its encoder state into them and replays the
// graph captured for an earlier one, instead of capturing its own.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "search/search.h"
#include "search/search_parts.h"
#include "search/step_graph.h"
#include "text/tokenizer.h"

namespace nmt {
namespace {

using namespace search_parts;

// Rows and source positions are padded to multiples of this, so that batches
// of nearby sizes share a shape, and with it a captured step graph.
constexpr int64_t kShapeStep = 8;
// Shapes whose tensors and graph a search keeps at once; the one used least
// recently makes room for a new one.
constexpr size_t kMaxShapes = 16;

int64_t round_up(int64_t n) { return (n + kShapeStep - 1) / kShapeStep * kShapeStep; }

// Runs `graph` once per step, at most `steps` times, stopping once every
// element of `finished` is set (read every kFixedRowCheckEvery steps).
void run_steps(StepGraph& graph, int64_t steps, const torch::Tensor& finished) {
  for (int64_t step = 0; step < steps; ++step) {
    graph.run();
    if ((step + 1) % kFixedRowCheckEvery == 0 && finished.all().item<bool>()) break;
  }
}

// A batch as a fixed-row search decodes it: `batch` with rows and source
// positions padded to multiples of kShapeStep (pad_batch(): each new row is
// one EOS), and the shape its step graph is kept under.
struct Padded {
  Batch batch;
  // Steps the buffers hold: a cap of a sentence that fills every position
  // (length_caps()), +1 for the final EOS, so every batch of the shape fits.
  int64_t steps = 0;
  // rows, positions, attention, models, their weights (a graph bakes them in)
  std::tuple<int64_t, int64_t, bool, std::vector<const Engine*>, std::vector<double>> key;

  Padded(const Batch& b, const Scorer& scorer, const SearchOptions& opt, bool with_attention)
      : batch(pad_batch(b, round_up(b.size()), round_up(b.src.size(1)), 0)) {
    const int64_t S = batch.src.size(1);
    steps = length_cap(S, opt) + 1;
    std::vector<const Engine*> engines;
    for (const auto& e : scorer.engines()) engines.push_back(e.get());
    key = {batch.size(), S, with_attention, std::move(engines), scorer.weights()};
  }
};

// One shape's tensors, kept between the batches of that shape (`Buffers`:
// what the step reads and writes besides the decoder state).
template <class Buffers>
struct Slot {
  decltype(Padded::key) key;
  std::vector<std::shared_ptr<Engine>> engines;  // kept alive while the graph refers to their weights
  ScorerState state;                             // refilled in place for each batch
  Buffers buf;
  Scorer* scorer = nullptr;  // the current batch's (of the same engines)
  std::unique_ptr<StepGraph> graph;
  uint64_t used = 0;
};

// The slots of one search, at most kMaxShapes. With a shortlist (a state
// that cannot be refilled, Scorer::refillable()) every batch gets a slot of
// its own, used once.
template <class Buffers>
class Slots {
 public:
  using S = Slot<Buffers>;
  // The slot for `p`'s shape with `fresh` (scorer.start() of p.batch) in its
  // state: a kept one refilled by copies, or one made by `make(slot)`, which
  // sets the slot's buffers and graph.
  template <class Make>
  S& get(const Padded& p, Scorer& scorer, const ScorerState& fresh, Make make) {
    ++clock_;
    if (scorer.refillable()) {
      for (auto& s : slots_)
        if (s->key == p.key) {
          scorer.copy_all(s->state, fresh);
          s->scorer = &scorer;
          s->used = clock_;
          return *s;
        }
      if (slots_.size() >= kMaxShapes)
        slots_.erase(std::min_element(slots_.begin(), slots_.end(),
                                      [](const auto& a, const auto& b) { return a->used < b->used; }));
    } else {
      slots_.clear();
    }
    auto s = std::make_unique<S>();
    s->key = p.key;
    s->engines = scorer.engines();
    s->state = fresh;
    scorer.own_storage(s->state);  // updated (and refilled) in place by every run
    s->scorer = &scorer;
    s->used = clock_;
    make(*s);
    slots_.push_back(std::move(s));
    return *slots_.back();
  }

  // Forgets `slot` (after a run that threw: its graph may have run its
  // warm-up, or been captured, half way, so the next batch of its shape
  // starts afresh).
  void drop(const S& slot) {
    slots_.erase(std::remove_if(slots_.begin(), slots_.end(), [&](const auto& s) { return s.get() == &slot; }),
                 slots_.end());
  }

 private:
  std::vector<std::unique_ptr<S>> slots_;
  uint64_t clock_ = 0;
};

// Resets `finished` [rows(, K)] for a batch's first step: the real sentences
// (rows before `real`) unfinished, pad_batch()'s padding sentences finished,
// since they produce nothing anyone reads and the check of run_steps() then
// waits for the real sentences alone.
void reset_finished(const torch::Tensor& finished, int64_t real) {
  const int64_t rows = finished.size(0);
  finished.zero_();
  if (real < rows) finished.narrow(0, real, rows - real).fill_(true);
}

// run_steps() on `slot`'s graph; a run that throws takes the slot with it
// (Slots::drop()) before the exception goes on.
template <class Buffers>
void run_or_drop(Slots<Buffers>& slots, Slot<Buffers>& slot, int64_t steps, const torch::Tensor& finished) {
  try {
    run_steps(*slot.graph, steps, finished);
  } catch (...) {
    slots.drop(slot);
    throw;
  }
}

// What greedy search's step reads and writes besides the decoder state.
struct GreedyBuffers {
  GreedyOutputs out;     // [rows, steps(, S)]
  torch::Tensor caps;    // [rows] each sentence's length cap
  torch::Tensor y;       // [rows] the previous token
  torch::Tensor finished;  // [rows] bool
  torch::Tensor t;       // [1] the step, on the device
};

class FixedRowGreedySearch : public Search {
 public:
  FixedRowGreedySearch(const SearchOptions& opt, bool capture) : opt_(opt), capture_(capture) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const Padded p(batch, scorer, opt_, with_attention);
    const int64_t B = p.batch.size(), S = p.batch.src.size(1);
    const auto device = p.batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    auto caps = length_caps(p.batch, opt_);                       // [B] on CPU
    const int64_t steps = caps.max().item<int64_t>() + 1;           // +1 for the final EOS
    auto& slot = slots_.get(p, scorer, scorer.start(p.batch), [&](Slot<GreedyBuffers>& s) {
      s.buf = {GreedyOutputs(p.batch, p.steps, with_attention), torch::empty({B}, i64), torch::empty({B}, i64),
               torch::empty({B}, i64.dtype(torch::kBool)), torch::empty({1}, i64)};
      s.graph = std::make_unique<StepGraph>([&s, B, S, with_attention] { step(s, B, S, with_attention); },
                                            device, capture_);
    });
    auto& b = slot.buf;
    b.out.tokens.fill_(kPadId);
    b.out.score.zero_();
    if (with_attention) b.out.att.zero_();
    b.caps.copy_(caps);
    b.y.fill_(kBosId);
    reset_finished(b.finished, batch.size());
    b.t.zero_();
    run_or_drop(slots_, slot, steps, b.finished);
    auto hyps = greedy_hypotheses(p.batch, b.out, opt_.length_penalty);
    hyps.resize(batch.size());
    return hyps;
  }

 private:
  // One step for B rows of S source positions, in place.
  static void step(Slot<GreedyBuffers>& slot, int64_t B, int64_t S, bool with_attention) {
    auto& b = slot.buf;
    auto& scorer = *slot.scorer;
    ScorerState s = slot.state;  // shares the source memory; step_best gives s new moving tensors
    torch::Tensor alpha;
    auto best = scorer.step_best(b.y, s, with_attention ? &alpha : nullptr);  // [B] each
    auto capped = b.caps.le(b.t);                                             // [B]
    auto col = torch::where(capped, torch::full_like(best.col, kEosId), best.col).masked_fill(b.finished, kPadId);
    b.out.score.add_(torch::where(capped, best.eos_logp, best.logp).masked_fill(b.finished, 0.0));
    auto next = scorer.token_ids(s, col);  // [B] target ids
    b.out.tokens.scatter_(1, b.t.expand({B}).unsqueeze(1), next.unsqueeze(1));
    if (with_attention)  // row t of each sentence's attention: [B, 1, S] at index t of dim 1
      b.out.att.scatter_(1, b.t.view({1, 1, 1}).expand({B, 1, S}), alpha.to(torch::kFloat).unsqueeze(1));
    b.finished.logical_or_(next.eq(kEosId));
    b.y.copy_(next);
    scorer.copy_moving(slot.state, s);
    b.t.add_(1);
  }

  SearchOptions opt_;
  bool capture_;
  Slots<GreedyBuffers> slots_;
};

// What beam search's step reads and writes besides the decoder state.
struct BeamBuffers {
  Beams cur;               // [B, K(, steps(, S))] each beam's score, length, history and attention
  torch::Tensor capsK;     // [B*K, 1] each row's length cap
  torch::Tensor y;         // [B*K] the previous token
  torch::Tensor finished;  // [B, K] bool
  torch::Tensor t;         // [1] the step, on the device
};

// Beam search on B*K fixed rows (row b*K + k: hypothesis k of sentence b):
// the step of search.cc's BeamSearch (choose_beams()), with each beam's
// history and attention kept whole ([B, K, steps(, S)]) and reordered in place.
class FixedRowBeamSearch : public Search {
 public:
  FixedRowBeamSearch(const SearchOptions& opt, bool capture) : opt_(opt), capture_(capture) {}

  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const Padded p(batch, scorer, opt_, with_attention);
    const int64_t B = p.batch.size(), K = opt_.beam_size, S = p.batch.src.size(1), T = p.steps;
    const auto device = p.batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto caps = length_caps(p.batch, opt_);                 // [B] on CPU
    const int64_t steps = caps.max().item<int64_t>() + 1;     // +1 for the final EOS
    auto& slot = slots_.get(p, scorer, scorer.start(p.batch, K), [&](Slot<BeamBuffers>& s) {
      s.buf = {Beams{torch::empty({B, K}, f32), torch::empty({B, K}, i64), torch::empty({B, K, T}, i64),
                     with_attention ? torch::empty({B, K, T, S}, f32) : torch::Tensor()},
               torch::empty({B * K, 1}, i64), torch::empty({B * K}, i64), torch::empty({B, K}, i64.dtype(torch::kBool)),
               torch::empty({1}, i64)};
      const double alpha = opt_.length_penalty;
      s.graph = std::make_unique<StepGraph>([&s, B, K, S, T, alpha] { step(s, B, K, S, T, alpha); }, device,
                                            capture_);
    });
    auto& b = slot.buf;
    b.cur.score.fill_(kNegInf);
    b.cur.score.select(1, 0).fill_(0);  // one live hypothesis per sentence at first
    b.cur.length.zero_();
    b.cur.history.fill_(kPadId);
    if (with_attention) b.cur.attention.zero_();
    b.capsK.copy_(caps.repeat_interleave(K).unsqueeze(1));
    b.y.fill_(kBosId);
    reset_finished(b.finished, batch.size());
    b.t.zero_();
    run_or_drop(slots_, slot, steps, b.finished);
    auto hyps = beam_hypotheses(p.batch, b.cur, opt_);
    hyps.resize(batch.size());
    return hyps;
  }

 private:
  // One step for B sentences of K rows, S source positions and T steps of history, in place.
  static void step(Slot<BeamBuffers>& slot, int64_t B, int64_t K, int64_t S, int64_t T, double alpha_lp) {
    auto& b = slot.buf;
    auto& cur = b.cur;
    auto& scorer = *slot.scorer;
    ScorerState s = slot.state;  // shares the source memory; step gives s new moving tensors
    torch::Tensor alpha;
    auto logp = scorer.step(b.y, s, cur.attention.defined() ? &alpha : nullptr);  // [B*K, V]
    auto c = choose_beams(logp, cur.score, cur.length, b.finished, b.capsK.le(b.t), alpha_lp);
    auto token = scorer.token_ids(s, c.columns);  // [B, K]
    auto history = cur.history.gather(1, c.beam.unsqueeze(2).expand({B, K, T}));
    history.scatter_(2, b.t.view({1, 1, 1}).expand({B, K, 1}), token.unsqueeze(2));
    cur.history.copy_(history);
    if (cur.attention.defined()) {  // the extended rows' attention, then row t: this step's
      auto a = cur.attention.view({B * K, T, S}).index_select(0, c.rows);
      a.scatter_(1, b.t.view({1, 1, 1}).expand({B * K, 1, S}),
                 alpha.to(torch::kFloat).index_select(0, c.rows).unsqueeze(1));
      cur.attention.copy_(a.view({B, K, T, S}));
    }
    cur.score.copy_(c.score);
    cur.length.copy_(c.length);
    b.finished.copy_(c.finished);
    b.y.copy_(token.view({-1}));
    scorer.reorder(s, c.rows);
    scorer.copy_moving(slot.state, s);
    b.t.add_(1);
  }

  SearchOptions opt_;
  bool capture_;
  Slots<BeamBuffers> slots_;
};

}  // namespace

std::unique_ptr<Search> make_fixed_row_search(const SearchOptions& opt, bool capture) {
  opt.validate();
  if (opt.beam_size == 1) return std::make_unique<FixedRowGreedySearch>(opt, capture);
  return std::make_unique<FixedRowBeamSearch>(opt, capture);
}

}  // namespace nmt
