// Padded batch tensors.
#include "model/batch.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "text/tokenizer.h"

namespace nmt {

Batch Batch::to(const torch::Device& device) const {
  Batch b = *this;
  b.src = src.to(device);
  if (tgt_in.defined()) b.tgt_in = tgt_in.to(device);
  if (tgt_out.defined()) b.tgt_out = tgt_out.to(device);
  if (guide.defined()) b.guide = guide.to(device);
  return b;
}

Batch make_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices, bool with_target) {
  const int64_t B = static_cast<int64_t>(indices.size());
  int64_t S = 1, T = 1;
  for (int64_t i : indices) {
    S = std::max<int64_t>(S, examples[i].src.size());
    T = std::max<int64_t>(T, examples[i].tgt.size() + 1);
  }
  Batch b;
  b.src = torch::full({B, S}, kPadId, torch::kInt64);
  b.src_len = torch::empty({B}, torch::kInt64);
  auto src = b.src.accessor<int64_t, 2>();
  auto src_len = b.src_len.accessor<int64_t, 1>();
  for (int64_t r = 0; r < B; ++r) {
    const auto& e = examples[indices[r]];
    for (size_t k = 0; k < e.src.size(); ++k) src[r][k] = e.src[k];
    src_len[r] = static_cast<int64_t>(e.src.size());
    b.src_tokens += src_len[r];
  }
  if (!with_target) return b;
  b.tgt_in = torch::full({B, T}, kPadId, torch::kInt64);
  b.tgt_out = torch::full({B, T}, kPadId, torch::kInt64);
  auto tin = b.tgt_in.accessor<int64_t, 2>();
  auto tout = b.tgt_out.accessor<int64_t, 2>();
  for (int64_t r = 0; r < B; ++r) {
    const auto& y = examples[indices[r]].tgt;
    tin[r][0] = kBosId;
    for (size_t k = 0; k < y.size(); ++k) {
      tin[r][k + 1] = y[k];
      tout[r][k] = y[k];
    }
    tout[r][y.size()] = kEosId;
    b.tgt_tokens += static_cast<int64_t>(y.size()) + 1;
  }
  bool guided = false;
  for (int64_t i : indices) guided = guided || !examples[i].guide.empty();
  if (!guided) return b;
  b.guide = torch::zeros({B, T, S}, torch::kFloat);
  auto g = b.guide.accessor<float, 3>();
  for (int64_t r = 0; r < B; ++r) {
    std::vector<int> per_row(T, 0);
    for (const auto& [s, t] : examples[indices[r]].guide) ++per_row[t];
    for (const auto& [s, t] : examples[indices[r]].guide) g[r][t][s] = 1.0f / static_cast<float>(per_row[t]);
  }
  return b;
}

Batch pad_batch(const Batch& b, int64_t rows, int64_t src_positions, int64_t tgt_positions) {
  const int64_t B = b.size(), S = b.src.size(1), T = b.tgt_in.defined() ? b.tgt_in.size(1) : 0;
  if (rows < B || src_positions < S || (b.tgt_in.defined() && tgt_positions < T))
    throw Error("pad_batch: cannot shrink a batch of " + std::to_string(B) + " x " + std::to_string(S) + " x " +
                std::to_string(T) + " to " + std::to_string(rows) + " x " + std::to_string(src_positions) + " x " +
                std::to_string(tgt_positions));
  Batch out = b;
  out.src = torch::constant_pad_nd(b.src, {0, src_positions - S, 0, rows - B}, kPadId);  // [rows, S']
  out.src.narrow(0, B, rows - B).select(1, 0).fill_(kEosId);
  out.src_len = torch::cat({b.src_len, torch::ones({rows - B}, torch::kInt64)});
  if (b.tgt_in.defined()) {
    out.tgt_in = torch::constant_pad_nd(b.tgt_in, {0, tgt_positions - T, 0, rows - B}, kPadId);    // [rows, T']
    out.tgt_out = torch::constant_pad_nd(b.tgt_out, {0, tgt_positions - T, 0, rows - B}, kPadId);  // [rows, T']
  }
  if (b.guide.defined())
    out.guide = torch::constant_pad_nd(b.guide, {0, src_positions - S, 0, tgt_positions - T, 0, rows - B}, 0.0);
  return out;
}

Batch twice(const Batch& b) {
  const auto rows = [](const torch::Tensor& t) { return t.defined() ? torch::cat({t, t}) : t; };  // [B, ...] -> [2B, ...]
  Batch out;
  out.src = rows(b.src);
  out.src_len = rows(b.src_len);
  out.tgt_in = rows(b.tgt_in);
  out.tgt_out = rows(b.tgt_out);
  out.guide = rows(b.guide);
  out.tgt_tokens = 2 * b.tgt_tokens;
  out.src_tokens = 2 * b.src_tokens;
  return out;
}

}  // namespace nmt
