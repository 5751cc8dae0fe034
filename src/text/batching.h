// Batch planning, without tensors: tokenized pairs (Example), the one rule
// that cuts them into batches (cut_batches), training's length-bucketed plan
// with a seeded shuffle (plan_batches) and the order of batches per epoch.
// model/batch.h turns a planned batch into padded tensors.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace nmt {

// One tokenized pair. `src` ends with EOS; `tgt` holds no BOS/EOS.
struct Example {
  std::vector<int64_t> src;
  std::vector<int64_t> tgt;
  // Guided alignment: (source piece, target piece) links, 0-based; empty
  // when the pair has none.
  std::vector<std::pair<int32_t, int32_t>> guide;
};

// The limits of one batch: the one rule by which training, validation,
// translation and scoring cut batches. A batch of n examples whose longest
// source has S pieces and longest target T (+1: BOS or EOS; 1 without
// targets) fits when
//   n <= max_sentences,
//   n * max(S, T) <= max_tokens                      (padded tokens; 0: no limit),
//   n * (S * src_bytes + T * tgt_bytes) <= max_bytes  (the memory it needs; 0: no limit).
// A single example always fits.
struct BatchLimits {
  int64_t max_sentences = 1;
  int64_t max_tokens = 0;
  int64_t max_bytes = 0;
  int64_t src_bytes = 0;  // bytes per padded source position
  int64_t tgt_bytes = 0;  // bytes per padded target position
};

// Cuts `order` (indices into `examples`) into consecutive batches, each as
// long as `limits` allow. Never throws.
std::vector<std::vector<int64_t>> cut_batches(const std::vector<Example>& examples, const std::vector<int64_t>& order,
                                              const BatchLimits& limits);

// Training's batches (see plan_batches).
struct BatchPlanOptions {
  int64_t max_tokens = 4096;     // padded tokens per batch: n * max(len) on the longer side
  int64_t max_sentences = 256;   // cap on sentences per batch
};

// Splits examples into batches of indices. Examples are sorted by length
// (ties broken by a shuffle seeded with `seed`) and cut by cut_batches() so
// that n * max_len <= max_tokens; a single over-budget example gets its own
// batch. The result is the same for the same inputs and seed.
std::vector<std::vector<int64_t>> plan_batches(const std::vector<Example>& examples,
                                               const BatchPlanOptions& opt, uint64_t seed);

// The order in which batches are visited in `epoch` (1-based): a permutation
// of [0, n) from a generator seeded by (seed, epoch), so a resumed run can
// recompute it.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace nmt
