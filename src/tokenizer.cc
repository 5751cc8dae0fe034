// SentencePiece wrapper: training from memory, loading from bytes, encoding.
#include "tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "error.h"

namespace nmt {
namespace {

// Feeds in-memory sentences to the SentencePiece trainer.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

}  // namespace

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences, const TokenizerOptions& opt) {
  if (opt.model_type != "unigram" && opt.model_type != "bpe")
    throw Error("unknown tokenizer model type '" + opt.model_type + "' (expected unigram or bpe)");
  if (sentences.empty()) throw Error("cannot train a tokenizer on an empty corpus");
  std::unordered_map<std::string, std::string> args = {
      {"model_type", opt.model_type},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"character_coverage", std::to_string(opt.character_coverage)},
      {"input_sentence_size", std::to_string(opt.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"num_threads", "2"},
      {"minloglevel", "2"},
      {"model_prefix", ""},
  };
  VectorIterator it(sentences);
  std::string bytes;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
  if (!status.ok()) throw Error("SentencePiece training failed: " + status.ToString());
  return from_bytes(bytes, "trained tokenizer");
}

Tokenizer Tokenizer::from_bytes(const std::string& bytes, const std::string& origin) {
  Tokenizer t;
  t.sp_ = std::make_shared<sentencepiece::SentencePieceProcessor>();
  auto status = t.sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw Error(origin + ": not a SentencePiece model (" + status.ToString() + ")");
  if (t.sp_->pad_id() != kPadId || t.sp_->unk_id() != kUnkId || t.sp_->bos_id() != kBosId ||
      t.sp_->eos_id() != kEosId)
    throw Error(origin + ": SentencePiece model must use pad=0 unk=1 bos=2 eos=3 (train it with "
                         "--pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3, or let nmt-train train one)");
  t.bytes_ = bytes;
  return t;
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(located(path, 0, "cannot open SentencePiece model"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_bytes(ss.str(), path);
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw Error("tokenizer: " + status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<std::string> Tokenizer::pieces(const std::string& text) const {
  std::vector<std::string> out;
  auto status = sp_->Encode(text, &out);
  if (!status.ok()) throw Error("tokenizer: " + status.ToString());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> keep;
  for (int64_t id : ids) {
    if (id == kEosId) break;
    if (id == kPadId || id == kBosId) continue;
    keep.push_back(static_cast<int>(id));
  }
  std::string out;
  auto status = sp_->Decode(keep, &out);
  if (!status.ok()) throw Error("tokenizer: " + status.ToString());
  return out;
}

std::string Tokenizer::piece(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<unk>";
  return sp_->IdToPiece(static_cast<int>(id));
}

int64_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace nmt
