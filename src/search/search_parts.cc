// What greedy and beam search share (search_parts.h).
#include "search/search_parts.h"

#include <algorithm>
#include <cmath>

#include "text/tokenizer.h"

namespace nmt::search_parts {

torch::Tensor length_penalty(const torch::Tensor& n, double alpha) {
  if (alpha == 0) return torch::ones_like(n);
  return ((n + 5.0) / 6.0).pow(alpha);
}

int64_t length_cap(int64_t src_len, const SearchOptions& opt) {
  const auto cap = static_cast<int64_t>(std::floor(static_cast<double>(src_len) * opt.max_length_ratio)) + 5;
  return std::min(cap, opt.max_length);
}

torch::Tensor length_caps(const Batch& batch, const SearchOptions& opt) {
  TORCH_CHECK(batch.src_len.device().is_cpu() && batch.src_len.scalar_type() == torch::kInt64,
              "length_caps: source lengths must be int64 on the CPU, got ", batch.src_len.toString(), " on ",
              batch.src_len.device());
  auto lengths = batch.src_len.contiguous();
  auto caps = torch::empty_like(lengths);  // [B] on CPU
  const auto* len = lengths.data_ptr<int64_t>();
  auto* cap = caps.data_ptr<int64_t>();
  for (int64_t b = 0; b < lengths.numel(); ++b) cap[b] = length_cap(len[b], opt);
  return caps;
}

GreedyOutputs::GreedyOutputs(const Batch& batch, int64_t steps, bool with_attention) {
  const int64_t B = batch.size(), S = batch.src.size(1);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(batch.src.device());
  tokens = torch::full({B, steps}, kPadId, f32.dtype(torch::kInt64));
  score = torch::zeros({B}, f32);
  if (with_attention) att = torch::zeros({B, steps, S}, f32);
}

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

Beams Beams::select(const torch::Tensor& idx) const {
  return {score.index_select(0, idx), length.index_select(0, idx), history.index_select(0, idx),
          attention.defined() ? attention.index_select(0, idx) : torch::Tensor()};
}

void Beams::write(const Beams& beams, const torch::Tensor& idx) {
  score.index_copy_(0, idx, beams.score);
  length.index_copy_(0, idx, beams.length);
  history.narrow(2, 0, beams.history.size(2)).index_copy_(0, idx, beams.history);
  if (attention.defined()) attention.narrow(2, 0, beams.attention.size(2)).index_copy_(0, idx, beams.attention);
}

std::vector<std::vector<Hypothesis>> beam_hypotheses(const Batch& batch, const Beams& beams, const SearchOptions& opt) {
  const int64_t B = batch.size();
  auto norm = beams.score / length_penalty(beams.length.to(torch::kFloat), opt.length_penalty);  // [B, K]
  auto order = std::get<1>(norm.sort(1, /*descending=*/true));  // best first
  auto tok = beams.history.cpu();
  auto len = beams.length.cpu();
  auto sc = beams.score.cpu();
  auto nm = norm.cpu();
  auto ord = order.cpu();
  const bool with_attention = beams.attention.defined();
  torch::Tensor att = with_attention ? beams.attention.cpu() : torch::Tensor();
  const int64_t n_best = std::min(opt.n_best, opt.beam_size);
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

BeamChoice choose_beams(const torch::Tensor& logp, const torch::Tensor& score, const torch::Tensor& length,
                        const torch::Tensor& finished, const torch::Tensor& capped, double alpha) {
  const int64_t B = score.size(0), K = score.size(1), V = logp.size(1);
  // A row's own k best continuations contain every one of its candidates
  // that can make the beam (a row's candidates share its score and length
  // penalty, so they rank within the row as its log-probabilities do): the
  // beam is chosen among the K * k of them instead of all K * V.
  const int64_t k = std::min(K, V);
  auto [top_lp, top_id] = logp.topk(k, 1);                                  // [B*K, k]
  const auto first = torch::arange(k, top_id.options()).eq(0).unsqueeze(0);  // [1, k] true in column 0
  const auto no_lp = torch::full({1, k}, kNegInf, top_lp.options());
  top_lp = torch::where(capped, torch::where(first, logp.narrow(1, kEosId, 1), no_lp), top_lp);
  top_id = torch::where(capped, torch::full_like(top_id, kEosId), top_id);
  auto done_row = finished.view({B * K, 1});
  top_lp = torch::where(done_row, torch::where(first, torch::zeros_like(no_lp), no_lp), top_lp);
  top_id = torch::where(done_row, torch::full_like(top_id, kPadId), top_id);
  auto cand = score.unsqueeze(2) + top_lp.view({B, K, k});                                   // [B, K, k]
  auto cand_len = (length + finished.logical_not().to(torch::kInt64)).to(torch::kFloat);   // [B, K]
  auto ranked = cand / length_penalty(cand_len, alpha).unsqueeze(2);                        // normalized
  auto top = std::get<1>(ranked.view({B, K * k}).topk(K, 1));                              // [B, K]
  BeamChoice c;
  c.beam = top.div(k, "floor");
  c.rows = ((torch::arange(B, top.options()) * K).unsqueeze(1) + c.beam).view({-1});
  c.columns = top_id.view({B, K * k}).gather(1, top);
  c.score = cand.view({B, K * k}).gather(1, top);
  auto was_finished = finished.gather(1, c.beam);
  c.length = length.gather(1, c.beam) + was_finished.logical_not().to(torch::kInt64);
  c.finished = was_finished.logical_or(c.columns.eq(kEosId));  // special ids are their own columns
  return c;
}

}  // namespace nmt::search_parts
