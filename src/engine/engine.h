// What a search sees of a model: an inference engine, built once from a
// trained model with its precision and kernels fixed at construction
// (CTranslate2's translator, whisper.cpp's context). It encodes a batch into
// an opaque decoder state (decoder_state.h), scores the next token of every
// row and advances the state; the search reorders the state by beam and
// hands it back. A new decoder, head or device plugs in as another Engine
// without the search changing. Shapes: B batch, R rows (hypotheses),
// S source length, T target length, V target vocabulary, V' the columns a
// shortlist leaves.
#pragma once
#include <torch/types.h>

#include <cstdint>

#include "engine/decoder_state.h"
#include "model/batch.h"

namespace nmt {

// One step's result for every row.
struct EngineStep {
  torch::Tensor logits;  // [R, V'] the next token's scores (start()'s `vocab` columns)
  torch::Tensor alpha;   // [R, S] the attention weights of this step
};

// The memory an engine's work holds, for cutting batches under a budget.
struct EngineMemory {
  int64_t search_bytes = 0;         // search state per hypothesis and source piece
  int64_t forced_source_bytes = 0;  // teacher forcing, per sentence and source piece
  int64_t forced_target_bytes = 0;  // teacher forcing, per sentence and target piece
};

class Engine {
 public:
  virtual ~Engine() = default;
  // The size V of the target vocabulary.
  virtual int64_t vocab_size() const = 0;
  // Where the engine's tensors live; batches must be there.
  virtual torch::Device device() const = 0;
  // What start() and forced_logits() hold per piece.
  virtual EngineMemory memory_use() const = 0;
  // Encodes `batch`; each sentence takes `copies` rows (row b * copies + k),
  // all starting from the same state. With `vocab` [V'] (int64 target ids,
  // any order, on device()), step() scores only those ids, column i being id
  // vocab[i]; undefined: the whole vocabulary. Call without autograd.
  virtual DecoderState start(const Batch& batch, int64_t copies, const torch::Tensor& vocab) = 0;
  // The scores of the token after y_prev [R] (int64) for every row of
  // `state`, which advances by one step.
  virtual EngineStep step(const torch::Tensor& y_prev, DecoderState& state) = 0;
  // Teacher forcing: the logits [B, T, V] of batch.tgt_in's continuations.
  virtual torch::Tensor forced_logits(const Batch& batch) = 0;
};

}  // namespace nmt
