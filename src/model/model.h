// The attention model of Bahdanau, Cho & Bengio (2015) as it trains: a
// bidirectional GRU encoder, an attention over its annotations and a GRU
// decoder with a deep output layer (layers.h, decoder.h), teacher-forced.
// Search runs it through an engine built from it (engine/rnn_engine.h).
// Shapes: B batch, S source length, T target length, V target vocabulary.
#pragma once
#include <c10/core/InferenceMode.h>
#include <torch/nn.h>

#include <string>
#include <utility>
#include <vector>

#include "base/options.h"
#include "model/decoder.h"
#include "model/layers.h"

namespace nmt {

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const ModelOptions& opt);
  // Teacher-forced logits [B, T, V] for a batch (src, src_len, tgt_in);
  // with `alpha_out`, also the attention weights [B, T, S]. src_len
  // undefined: the encoder runs over the padded batch (EncoderImpl::forward).
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                        torch::Tensor* alpha_out = nullptr);
  // Teacher forcing, and each target piece's alignment over the source: the
  // logits [B, T, V] and the weights [B, T, S] of the alignment head for the
  // pieces tgt_out [B, T] when the model has one, else of the attention.
  // What guided alignment trains and forced alignment reads.
  std::pair<torch::Tensor, torch::Tensor> forward_aligned(const torch::Tensor& src, const torch::Tensor& src_len,
                                                          const torch::Tensor& tgt_in, const torch::Tensor& tgt_out);
  // forward_aligned()'s weights alone [B, T, S], without the output layer.
  torch::Tensor alignment(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          const torch::Tensor& tgt_out);
  const ModelOptions& options() const { return opt_; }
  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  ModelOptions opt_;
};
TORCH_MODULE(Seq2Seq);

// Decoding (search, scoring, alignment) runs inside one of these: for its
// life every model given is in eval mode (dropout off) and autograd records
// nothing (c10::InferenceMode); each model's former mode comes back at the end.
class InferenceScope {
 public:
  explicit InferenceScope(std::vector<Seq2Seq> models) : models_(std::move(models)) {
    for (auto& m : models_) {
      was_training_.push_back(m->is_training());
      m->eval();
    }
  }
  ~InferenceScope() {
    for (size_t i = 0; i < models_.size(); ++i)
      if (was_training_[i]) models_[i]->train();
  }
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  std::vector<Seq2Seq> models_;
  std::vector<bool> was_training_;
  c10::InferenceMode mode_;
};

// Parameter count, for logs.
int64_t count_parameters(torch::nn::Module& m);

// One parameter of the model that ModelOptions describe.
struct ParameterShape {
  std::string name;            // as named_parameters() names it
  std::vector<int64_t> shape;  // its sizes
};

// The parameters Seq2Seq(opt) would have, in named_parameters() order,
// computed without building it: what a checkpoint's tensors are checked
// against before any memory is given to the model. `opt` must be valid.
std::vector<ParameterShape> parameter_shapes(const ModelOptions& opt);

}  // namespace nmt
