// Greedy search: one argmax per step for the whole batch, stopping when every
// sentence has produced EOS or reached its length cap.
#include "search.h"

#include <cmath>

#include "error.h"
#include "tokenizer.h"

namespace nmt {
namespace {

// Per-sentence output cap: ratio * source length + 5, at most max_length.
torch::Tensor length_caps(const Batch& batch, const SearchOptions& opt) {
  auto caps = (batch.src_len.to(torch::kDouble) * opt.max_length_ratio).floor().to(torch::kInt64) + 5;
  return caps.clamp_max(opt.max_length);  // [B] on CPU
}

class GreedySearch : public Search {
 public:
  explicit GreedySearch(const SearchOptions& opt) : opt_(opt) {}

  std::vector<std::vector<Hypothesis>> run(Seq2Seq& model, const Batch& batch, bool with_attention) override {
    const int64_t B = batch.size();
    const auto device = batch.src.device();
    auto enc = model->encoder->forward(batch.src, batch.src_len);
    auto keys = model->decoder->attention->keys(enc.annotations);
    auto caps = length_caps(batch, opt_);
    const int64_t steps = caps.max().item<int64_t>() + 1;  // +1 for the final EOS
    auto caps_dev = caps.to(device);

    auto y = torch::full({B}, kBosId, torch::TensorOptions().dtype(torch::kInt64).device(device));
    auto state = enc.init_state;
    auto finished = torch::zeros({B}, torch::TensorOptions().dtype(torch::kBool).device(device));
    auto score = torch::zeros({B}, enc.annotations.options().dtype(torch::kFloat));
    std::vector<torch::Tensor> tokens, alphas;
    for (int64_t t = 0; t < steps; ++t) {
      auto out = model->decoder->step(y, state, enc, keys);
      auto logp = torch::log_softmax(out.logits.to(torch::kFloat), -1);  // [B, V]
      auto next = std::get<1>(logp.max(-1));                              // [B]
      // A sentence at its cap must end now.
      next = torch::where(caps_dev.le(t), torch::full_like(next, kEosId), next);
      next = next.masked_fill(finished, kPadId);
      auto tok_logp = logp.gather(1, next.clamp_min(0).unsqueeze(1)).squeeze(1);
      score = score + tok_logp.masked_fill(finished, 0.0);
      tokens.push_back(next);
      if (with_attention) alphas.push_back(out.alpha);
      finished = finished.logical_or(next.eq(kEosId));
      y = next;
      state = out.state;
      if (finished.all().item<bool>()) break;
    }
    auto tok = torch::stack(tokens, 1).cpu();  // [B, L]
    auto sc = score.cpu();
    torch::Tensor att;
    if (with_attention) att = torch::stack(alphas, 1).to(torch::kFloat).cpu();  // [B, L, S]
    std::vector<std::vector<Hypothesis>> result(B);
    auto ta = tok.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      Hypothesis h;
      int64_t len = 0;
      for (; len < tok.size(1); ++len) {
        int64_t id = ta[b][len];
        if (id == kEosId || id == kPadId) break;
        h.ids.push_back(id);
      }
      h.score = sc[b].item<double>();
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

}  // namespace

std::unique_ptr<Search> make_search(const SearchOptions& opt) {
  if (opt.beam_size < 1) throw Error("beam size must be at least 1");
  if (opt.max_length < 1) throw Error("max length must be at least 1");
  if (opt.beam_size == 1) return std::make_unique<GreedySearch>(opt);
  throw Error("beam search (beam size > 1) is not available yet; use --beam-size 1");
}

}  // namespace nmt
