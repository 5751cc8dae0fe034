// Greedy search (an argmax per step for the whole batch) and batched beam
// search (B sentences x K hypotheses decoded as one batch of B*K rows).
#include "search/search.h"

#include <cmath>

#include "base/error.h"
#include "base/validate.h"
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

class GreedySearch : public Search {
 public:
  explicit GreedySearch(const SearchOptions& opt) : opt_(opt) {}

  using Search::run;
  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size();
    const auto device = batch.src.device();
    auto state = scorer.start(batch);
    auto caps = length_caps(batch, opt_);
    const int64_t steps = caps.max().item<int64_t>() + 1;  // +1 for the final EOS
    auto caps_dev = caps.to(device);

    auto y = torch::full({B}, kBosId, torch::TensorOptions().dtype(torch::kInt64).device(device));
    auto finished = torch::zeros({B}, torch::TensorOptions().dtype(torch::kBool).device(device));
    auto score = torch::zeros({B}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    std::vector<torch::Tensor> tokens, alphas;
    for (int64_t t = 0; t < steps; ++t) {
      torch::Tensor alpha;
      auto logp = scorer.step(y, state, with_attention ? &alpha : nullptr);  // [B, V]
      auto next = std::get<1>(logp.max(-1));                                 // [B]
      // A sentence at its cap must end now.
      next = torch::where(caps_dev.le(t), torch::full_like(next, kEosId), next);
      next = next.masked_fill(finished, kPadId);
      auto tok_logp = logp.gather(1, next.clamp_min(0).unsqueeze(1)).squeeze(1);
      score = score + tok_logp.masked_fill(finished, 0.0);
      tokens.push_back(next);
      if (with_attention) alphas.push_back(alpha);
      finished = finished.logical_or(next.eq(kEosId));
      y = next;
      if (finished.all().item<bool>()) break;
    }
    auto tok = torch::stack(tokens, 1).cpu();  // [B, L]
    auto sc = score.cpu();
    torch::Tensor att;
    if (with_attention) att = torch::stack(alphas, 1).to(torch::kFloat).cpu();  // [B, L, S]
    std::vector<std::vector<Hypothesis>> result(B);
    auto ta = tok.accessor<int64_t, 2>();
    auto ended = tok.eq(kEosId).logical_or(tok.eq(kPadId)).to(torch::kInt64).cumsum(1).eq(0).sum(1);  // [B] ids each
    auto norm = sc / length_penalty((ended + 1).to(torch::kFloat), opt_.length_penalty);  // EOS counted
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

 private:
  SearchOptions opt_;
};


// Beam search. Each step is one decoder call on [B*K] rows, one top-k over
// [B, K*V] candidates and index gathers; bookkeeping stays on the device.
// Finished hypotheses remain in the beam, extended by padding at no cost, so
// they compete with live ones by normalized score until the end. The search
// stops when every hypothesis of every sentence has finished.
class BeamSearch : public Search {
 public:
  explicit BeamSearch(const SearchOptions& opt) : opt_(opt) {}

  using Search::run;
  std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size(), K = opt_.beam_size;
    const int64_t V = scorer.vocab_size();
    const auto device = batch.src.device();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto state = scorer.start(batch, K);  // rows b*K + k: the K hypotheses of sentence b
    auto caps = length_caps(batch, opt_);                             // [B] on CPU
    const int64_t steps = caps.max().item<int64_t>() + 1;
    auto capsK = caps.to(device).repeat_interleave(K).unsqueeze(1);   // [B*K, 1]
    const int64_t S = batch.src.size(1);

    auto y = torch::full({B * K}, kBosId, i64);
    auto score = torch::full({B, K}, kNegInf, f32);   // raw log-probability sums
    score.select(1, 0).fill_(0);                      // one live hypothesis per sentence at first
    auto finished = torch::zeros({B, K}, i64.dtype(torch::kBool));
    auto length = torch::zeros({B, K}, i64);          // tokens emitted, EOS included
    auto history = torch::empty({B, K, 0}, i64);      // [B, K, t]
    auto att_history = torch::empty({B, K, 0, S}, f32);  // [B, K, t, S] when with_attention
    const auto row0 = (torch::arange(B, i64) * K).unsqueeze(1);  // [B, 1] first row of each sentence
    // Rows that may only end (at the length cap) or only pad (finished).
    auto eos_mask = torch::full({1, V}, kNegInf, f32);
    eos_mask.select(1, kEosId).fill_(0);
    auto pad_only = torch::full({1, V}, kNegInf, f32);
    pad_only.select(1, kPadId).fill_(0);

    for (int64_t t = 0; t < steps; ++t) {
      torch::Tensor alpha;
      auto logp = scorer.step(y, state, with_attention ? &alpha : nullptr);  // [B*K, V]
      logp = torch::where(capsK.le(t), logp + eos_mask, logp);
      logp = torch::where(finished.view({B * K, 1}), pad_only.expand({B * K, V}), logp);
      auto cand = score.unsqueeze(2) + logp.view({B, K, V});              // [B, K, V]
      auto cand_len = (length + finished.logical_not().to(torch::kInt64)).to(torch::kFloat);  // [B, K]
      auto ranked = cand / length_penalty(cand_len, opt_.length_penalty).unsqueeze(2);  // normalized
      auto top = std::get<1>(ranked.view({B, K * V}).topk(K, 1));         // [B, K]
      auto beam = top.div(V, "floor");                                    // hypothesis extended
      auto token = top.remainder(V);                                      // token appended
      auto rows = (row0 + beam).view({-1});                               // [B*K] rows kept
      score = cand.view({B, K * V}).gather(1, top);
      auto was_finished = finished.gather(1, beam);
      length = length.gather(1, beam) + was_finished.logical_not().to(torch::kInt64);
      finished = was_finished.logical_or(token.eq(kEosId));
      history = torch::cat({history.gather(1, beam.unsqueeze(2).expand({B, K, history.size(2)})),
                            token.unsqueeze(2)}, 2);
      if (with_attention) {
        auto prev = att_history.view({B * K, t, S}).index_select(0, rows).view({B, K, t, S});
        att_history = torch::cat({prev, alpha.to(torch::kFloat).index_select(0, rows).view({B, K, 1, S})}, 2);
      }
      y = token.view({-1});
      scorer.reorder(state, rows);
      if (finished.all().item<bool>()) break;
    }

    return best_first(batch, score, length, history, att_history, with_attention);
  }

 private:
  // The n_best hypotheses of each sentence, best normalized score first.
  // score, length [B, K]; history [B, K, t]; att_history [B, K, t, S].
  std::vector<std::vector<Hypothesis>> best_first(const Batch& batch, const torch::Tensor& score,
                                                  const torch::Tensor& length, const torch::Tensor& history,
                                                  const torch::Tensor& att_history, bool with_attention) const {
    const int64_t B = batch.size(), K = opt_.beam_size;
    auto norm = score / length_penalty(length.to(torch::kFloat), opt_.length_penalty);  // [B, K]
    auto order = std::get<1>(norm.sort(1, /*descending=*/true));  // best first
    auto tok = history.cpu();
    auto len = length.cpu();
    auto sc = score.cpu();
    auto nm = norm.cpu();
    auto ord = order.cpu();
    torch::Tensor att = with_attention ? att_history.cpu() : torch::Tensor();
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

std::unique_ptr<Search> make_search(const SearchOptions& opt) {
  opt.validate();
  if (opt.beam_size == 1) return std::make_unique<GreedySearch>(opt);
  return std::make_unique<BeamSearch>(opt);
}

std::unique_ptr<Search> make_beam_search(const SearchOptions& opt) {
  opt.validate();
  return std::make_unique<BeamSearch>(opt);
}

}  // namespace nmt
