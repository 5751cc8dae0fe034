// The teachers of word-level distillation (teachers.h).
#include "train/teachers.h"

#include <torch/torch.h>

#include "base/error.h"
#include "model/checkpoint.h"

namespace nmt {

Teachers::Teachers(const std::vector<std::string>& paths, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                   const torch::Device& device) {
  for (const auto& path : paths) {
    LoadedModel m = load_checkpoint(path, device);
    const char* side = m.src_tok.bytes() != src_tok.bytes()   ? "source"
                       : m.tgt_tok.bytes() != tgt_tok.bytes() ? "target"
                                                              : nullptr;
    if (side != nullptr)
      throw Error("--kd-teachers: " + path + ": its " + side +
                  " SentencePiece model is not this run's; train the student with the teacher's "
                  "(--src-spm and --tgt-spm naming the files in the teacher's folder)");
    m.model->eval();
    for (auto& p : m.model->parameters()) p.set_requires_grad(false);
    models_.push_back(m.model);
  }
}

torch::Tensor Teachers::log_probs(const Batch& batch) const {
  torch::NoGradGuard no_grad;
  torch::Tensor sum;  // [B, T, V]
  for (const auto& m : models_) {
    auto lp = torch::log_softmax(m.ptr()->forward(batch.src, batch.src_len, batch.tgt_in).to(torch::kFloat), -1);
    sum = sum.defined() ? sum + lp : lp;
  }
  if (models_.size() == 1) return sum;
  return torch::log_softmax(sum / static_cast<double>(models_.size()), -1);
}

}  // namespace nmt
