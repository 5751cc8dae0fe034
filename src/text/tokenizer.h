// SentencePiece front end: trains or loads a subword model, encodes text to
// ids and decodes ids back to text. The serialized model travels inside the
// checkpoint, so a checkpoint alone can translate. SentencePiece itself runs
// in a separately loaded module (see spm_module.h for why).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/options.h"

namespace nmt {

// Reserved ids, the same in every nmt vocabulary.
constexpr int64_t kPadId = 0;
constexpr int64_t kUnkId = 1;
constexpr int64_t kBosId = 2;
constexpr int64_t kEosId = 3;

class Tokenizer {
 public:
  // Trains a model on `sentences` with `opt` (model type, vocabulary size,
  // character coverage). The vocabulary size is a soft limit: a tiny corpus
  // yields fewer pieces. Throws nmt::Error when SentencePiece rejects the input.
  static Tokenizer train(const std::vector<std::string>& sentences, const TokenizerOptions& opt);
  // Loads a serialized model (the bytes of a .model file). `origin` names the
  // source in errors. Throws nmt::Error if the bytes are not a model or its
  // reserved ids differ from nmt's (pad=0, unk=1, bos=2, eos=3).
  static Tokenizer from_bytes(const std::string& bytes, const std::string& origin);
  // Loads a .model file; throws nmt::Error naming the path on failure.
  static Tokenizer load(const std::string& path);

  std::vector<int64_t> encode(const std::string& text) const;        // no BOS/EOS
  std::vector<std::string> pieces(const std::string& text) const;    // same segmentation, as strings
  // Subword regularization (Kudo 2018): draws one segmentation of `text`
  // from its `nbest` most probable ones, each with probability proportional
  // to P(segmentation)^alpha (SentencePiece's SampleEncode with nbest_size >
  // 0; alpha 0 draws uniformly), with a generator seeded by `seed`: the same
  // seed always gives the same segmentation. Throws nmt::Error for a BPE
  // model, which has no n-best segmentations.
  std::vector<int64_t> sample(const std::string& text, int nbest, double alpha, uint64_t seed) const;
  std::string decode(const std::vector<int64_t>& ids) const;         // stops at EOS, skips pad/BOS
  std::string piece(int64_t id) const;                               // "<unk>" for out-of-range ids
  int64_t vocab_size() const;

  // The model type SentencePiece recorded in the model when it trained it
  // (its TrainerSpec): "unigram", "bpe", "word" or "char"; "" when the model
  // records none (or the record cannot be read). Never throws.
  std::string model_type() const;

  // Path of the loaded SentencePiece module; loads it if needed. Throws
  // nmt::Error naming the places searched when it cannot be loaded.
  static std::string module_path();
  const std::string& bytes() const { return bytes_; }                // serialized model

 private:
  std::shared_ptr<void> sp_;  // a processor inside the SentencePiece module (spm_module.h)
  std::string bytes_;
};

}  // namespace nmt
