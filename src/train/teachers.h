// Word-level knowledge distillation (Hinton et al. 2015; Kim & Rush 2016,
// "Sequence-Level Knowledge Distillation", section 3.1): trained models
// (the teachers) score every training batch by teacher forcing, and the
// student learns their distribution at each target position beside the
// reference (train/losses.h, distillation_loss()). Shapes: B batch, T target
// length, V target vocabulary.
#pragma once
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "text/tokenizer.h"

namespace nmt {

class Teachers {
 public:
  Teachers() = default;
  // Loads the checkpoints `paths` onto `device`, in eval mode with their
  // weights frozen. Each must read and write text with the student's
  // tokenizers (the same SentencePiece models, byte for byte), or the
  // teachers' positions would not be the student's. Throws nmt::Error
  // naming the file: unreadable (as load_checkpoint()), or other
  // vocabularies (with the hint to train with their --src-spm/--tgt-spm).
  Teachers(const std::vector<std::string>& paths, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
           const torch::Device& device);

  bool empty() const { return models_.empty(); }
  size_t size() const { return models_.size(); }

  // The teachers' distribution at each position of `batch` as
  // log-probabilities [B, T, V] (float, no autograd history): the mean of
  // their log-softmaxed logits, normalized again, the distribution of the
  // ensemble that nmt-translate searches with the same models (its
  // per-step mean, renormalized). Rows at padded positions are computed
  // too; the loss masks them. Thread-safe: batch parts call it side by
  // side. Throws what the models' forward throws.
  torch::Tensor log_probs(const Batch& batch) const;

 private:
  std::vector<Seq2Seq> models_;
};

}  // namespace nmt
