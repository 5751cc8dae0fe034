// The RNN attention model's inference engine (rnn_engine.h).
#include "engine/rnn_engine.h"

#include <algorithm>

#include "base/error.h"

namespace nmt {
namespace {

// A batch's part of the decoder memory that no row indexes: the step
// weights and the shortlist's output rows. Its row tensors (keys, values,
// masks) live in the DecoderState.
struct RnnBatch : DecoderState::Extra {
  DecoderMemory memory;  // keys, values, mask and mask_bias left undefined
};

}  // namespace

void EngineOptions::validate() const {
  if (plain && precision != Precision::kFloat32)
    throw Error("the plain decoder step computes in float only, not in " + to_string(precision));
}

RnnEngine::RnnEngine(Seq2Seq model, const EngineOptions& opt) : model_(std::move(model)), opt_(opt) {
  opt_.validate();
  if (!opt_.plain) {
    torch::NoGradGuard no_grad;  // the copies serve search only
    StepWeightsFor what;
    what.search = true;
    what.gate_table = true;
    what.precision = opt_.precision;
    weights_ = model_->decoder->make_step_weights(what);
  }
  stamps_ = stamps();
}

std::vector<RnnEngine::ParamStamp> RnnEngine::stamps() const {
  // Each parameter's storage, offset and version: an in-place change bumps
  // the version, a move or load replaces the storage.
  std::vector<ParamStamp> out;
  for (const auto& p : model_->parameters()) out.push_back({p.storage(), p.storage_offset(), p._version()});
  return out;
}

bool RnnEngine::current() const { return stamps() == stamps_; }

int64_t RnnEngine::vocab_size() const { return model_->options().tgt_vocab; }

torch::Device RnnEngine::device() const { return model_->parameters().front().device(); }

EngineMemory RnnEngine::memory_use() const {
  const auto& mo = model_->options();
  const int64_t keys = std::max(mo.attn_dim, mo.dec_hidden);  // keys, or a step's scores
  EngineMemory m;
  // Values (annotations and their gate projection), keys, and a step's scores.
  m.search_bytes = 4 * (2 * mo.enc_hidden + 3 * mo.dec_hidden + 2 * keys);
  m.forced_source_bytes = 4 * (2 * mo.enc_hidden + keys);
  m.forced_target_bytes = 4 * (2 * mo.tgt_vocab + mo.dec_hidden + mo.emb_dim);  // logits twice, states, embeddings
  return m;
}

DecoderState RnnEngine::start(const Batch& batch, int64_t copies, const torch::Tensor& vocab) {
  auto enc = model_->encoder->forward(batch.src, batch.src_len);
  // Computed once per sentence, then given to each of its `copies` rows: [B*copies, ...]
  auto memory = model_->decoder->memory(enc, weights_).repeat(copies);
  if (vocab.defined()) model_->decoder->restrict_output(memory, vocab);
  auto hidden = copies > 1 ? enc.init_state.repeat_interleave(copies, 0) : enc.init_state;  // [R, D]
  using Rows = DecoderState::Rows;
  DecoderState st;
  st.add("hidden", std::move(hidden), Rows::kMoveWithBeam);  // s_t [R, D]
  st.add("keys", std::move(memory.keys), Rows::kFixedPerSource);            // [R, S, A]
  st.add("values", std::move(memory.values), Rows::kFixedPerSource);        // [R, S, C (+ 3D)]
  st.add("mask", std::move(memory.mask), Rows::kFixedPerSource);            // [R, S]
  st.add("mask_bias", std::move(memory.mask_bias), Rows::kFixedPerSource);  // [R, S]
  auto extra = std::make_shared<RnnBatch>();
  extra->memory = std::move(memory);
  st.extra = std::move(extra);
  return st;
}

EngineStep RnnEngine::step(const torch::Tensor& y_prev, DecoderState& state) {
  const auto* batch = dynamic_cast<const RnnBatch*>(state.extra.get());
  if (batch == nullptr) throw Error("a decoder state not made by this kind of engine");
  DecoderMemory mem = batch->memory;
  mem.keys = state.at("keys");
  mem.values = state.at("values");
  mem.mask = state.at("mask");
  mem.mask_bias = state.at("mask_bias");
  auto& hidden = state.at("hidden");
  auto out = model_->decoder->step(y_prev, hidden, mem);
  hidden = std::move(out.state);
  return {std::move(out.logits), std::move(out.alpha)};
}

torch::Tensor RnnEngine::forced_logits(const Batch& batch) {
  return model_->forward(batch.src, batch.src_len, batch.tgt_in);  // [B, T, V]
}

std::vector<std::shared_ptr<Engine>> make_engines(const std::vector<Seq2Seq>& models, const EngineOptions& opt) {
  std::vector<std::shared_ptr<Engine>> out;
  for (const auto& m : models) out.push_back(std::make_shared<RnnEngine>(m, opt));
  return out;
}

}  // namespace nmt
