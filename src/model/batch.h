// A planned batch as padded tensors: text/batching.h decides which pairs go
// together (the one rule by which training, validation, translation and
// scoring cut batches); make_batch() pads them into the tensors the model
// reads. train/training_data.h reads and encodes the corpus it plans from.
#pragma once
#include <torch/types.h>

#include "text/batching.h"

#include <cstdint>
#include <vector>

namespace nmt {

// Padded tensors for one batch.
struct Batch {
  torch::Tensor src;      // [B, S] int64, kPadId after each sentence's EOS
  torch::Tensor src_len;  // [B] int64 on CPU (packing needs host lengths)
  torch::Tensor tgt_in;   // [B, T] int64: BOS y_1 .. y_{n}, padded
  torch::Tensor tgt_out;  // [B, T] int64: y_1 .. y_{n} EOS, padded
  torch::Tensor guide;    // [B, T, S] float: each guided target row spreads 1 over its linked source
                          // pieces, other rows are 0; undefined when no example has links
  int64_t tgt_tokens = 0; // real (non-pad) positions in tgt_out
  int64_t src_tokens = 0; // real positions in src
  int64_t size() const { return src.size(0); }
  Batch to(const torch::Device& device) const;  // tensors moved; src_len stays on CPU
};

// Builds the tensors for `indices` into `examples`. With `with_target` false,
// tgt_in/tgt_out are left undefined (translation).
Batch make_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices,
                 bool with_target = true);

// `b` (on any device) grown to `rows` rows, `src_positions` source and
// `tgt_positions` target positions (each at least b's): the new positions
// are padding, and each new row holds one source word (kEosId) and no target
// word, so that the model's loss and gradients on the result are b's (to
// rounding: longer products). src_len gets 1 for the new rows; tgt_tokens
// and src_tokens stay b's. For shapes fixed in advance (a CUDA graph's).
// Throws nmt::Error when a size is smaller than b's.
Batch pad_batch(const Batch& b, int64_t rows, int64_t src_positions, int64_t tgt_positions);

// `b` (on any device) with its rows twice over: rows B..2B-1 repeat rows
// 0..B-1, so that one forward pass in training mode runs the batch under two
// dropout masks (R-Drop, train/losses.h's consistency_loss()). Every tensor
// b defines is repeated, src_len too; tgt_tokens and src_tokens double.
Batch twice(const Batch& b);

}  // namespace nmt
