// Token-budget batching with length bucketing (see batching.h).
#include "text/batching.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace nmt {

std::vector<std::vector<int64_t>> plan_batches(const std::vector<Example>& examples,
                                               const BatchPlanOptions& opt, uint64_t seed) {
  std::vector<int64_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (examples[a].src.size() != examples[b].src.size()) return examples[a].src.size() < examples[b].src.size();
    return examples[a].tgt.size() < examples[b].tgt.size();
  });
  return cut_batches(examples, order, BatchLimits{opt.max_sentences, opt.max_tokens});
}

std::vector<std::vector<int64_t>> cut_batches(const std::vector<Example>& examples, const std::vector<int64_t>& order,
                                              const BatchLimits& limits) {
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  int64_t max_src = 0, max_tgt = 0;
  for (int64_t i : order) {
    const int64_t s = static_cast<int64_t>(examples[i].src.size());
    const int64_t t = static_cast<int64_t>(examples[i].tgt.size()) + 1;  // tgt_in / tgt_out length
    const int64_t ms = std::max(max_src, s), mt = std::max(max_tgt, t);
    const int64_t n = static_cast<int64_t>(cur.size()) + 1;
    const bool fits = n <= limits.max_sentences && (limits.max_tokens <= 0 || n * std::max(ms, mt) <= limits.max_tokens) &&
                      (limits.max_bytes <= 0 || n * (ms * limits.src_bytes + mt * limits.tgt_bytes) <= limits.max_bytes);
    if (!cur.empty() && !fits) {
      batches.push_back(std::move(cur));
      cur.clear();
      max_src = s;
      max_tgt = t;
    } else {
      max_src = ms;
      max_tgt = mt;
    }
    cur.push_back(i);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  return batches;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch)};
  std::mt19937_64 rng(seq);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace nmt
