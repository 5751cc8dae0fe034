// The inference engine of the RNN attention model (model/model.h): built
// once from a trained Seq2Seq, it owns the weights of the optimized decoder
// step (transposed, packed once on AVX-512 CPUs, the gate table of every
// target embedding, and the products' copies in reduced precision for
// --int8 or --bf16: model/step_weights.h), fixed when it is built. The
// per-call state lives in a DecoderState (engine.h): keys, values and masks
// of the source fixed per source, the recurrent state moving with the beam.
#pragma once
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace nmt {

// How an RnnEngine computes its steps, fixed when it is built.
struct EngineOptions {
  // The precision of the step products (--int8, --bf16): CPU only; float
  // below StepWeights::min_rows() rows.
  Precision precision = Precision::kFloat32;
  // Steps in the plain formulation (GRUCell modules over concatenated
  // inputs, the model as written) instead of the optimized one: the
  // reference the optimized step is tested and benchmarked against. Float only.
  bool plain = false;
  // Throws nmt::Error when `plain` is combined with a reduced precision.
  void validate() const;
};

class RnnEngine : public Engine {
 public:
  // An engine for `model` as its parameters are now (current() says when
  // they have changed since). The model must stay in eval mode while the
  // engine runs (InferenceScope). Throws nmt::Error on bad options, or for a
  // reduced precision when the model is not on the CPU.
  explicit RnnEngine(Seq2Seq model, const EngineOptions& opt = {});

  int64_t vocab_size() const override;
  torch::Device device() const override;
  EngineMemory memory_use() const override;
  DecoderState start(const Batch& batch, int64_t copies, const torch::Tensor& vocab) override;
  EngineStep step(const torch::Tensor& y_prev, DecoderState& state) override;
  torch::Tensor forced_logits(const Batch& batch) override;

  // Whether the model's parameters are still the ones this engine was built
  // from: none changed in place (its version counter), moved or replaced.
  bool current() const;
  const EngineOptions& options() const { return opt_; }
  Seq2Seq& model() { return model_; }

 private:
  struct ParamStamp {  // what current() compares, per parameter
    c10::Storage storage;  // held, so that its address cannot be reused
    int64_t offset = 0, version = 0;
    bool operator==(const ParamStamp& o) const {
      return storage.unsafeGetStorageImpl() == o.storage.unsafeGetStorageImpl() && offset == o.offset &&
             version == o.version;
    }
  };
  std::vector<ParamStamp> stamps() const;
  Seq2Seq model_;
  EngineOptions opt_;
  std::shared_ptr<const StepWeights> weights_;  // null on the plain path
  std::vector<ParamStamp> stamps_;
};

// An engine for each model, all with options `opt`.
std::vector<std::shared_ptr<Engine>> make_engines(const std::vector<Seq2Seq>& models, const EngineOptions& opt = {});

}  // namespace nmt
