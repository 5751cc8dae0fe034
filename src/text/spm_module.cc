// libnmt_spm.so: SentencePiece behind the plain function table of
// spm_module.h (see there why it is a separate module).
#include "text/spm_module.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <utility>

namespace {

using sentencepiece::SentencePieceProcessor;
// What SentencePiece's functions return: sentencepiece::util::Status, or
// absl::Status where it is built on the system's Abseil (Debian's 0.2.2);
// both have ok() and ToString().
using Status = decltype(std::declval<const SentencePieceProcessor&>().status());

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

bool fail(const Status& s, std::string* err) {
  if (s.ok()) return true;
  *err = s.ToString();
  return false;
}

bool train(const std::unordered_map<std::string, std::string>& args, const std::vector<std::string>& sentences,
           std::string* model_bytes, std::string* err) {
  VectorIterator it(sentences);
  return fail(sentencepiece::SentencePieceTrainer::Train(args, &it, model_bytes), err);
}

void* load(const std::string& bytes, std::string* err) {
  auto* sp = new SentencePieceProcessor();
  if (!fail(sp->LoadFromSerializedProto(bytes), err)) {
    delete sp;
    return nullptr;
  }
  return sp;
}

void destroy(void* p) { delete static_cast<SentencePieceProcessor*>(p); }

bool encode_ids(void* p, const std::string& text, std::vector<int>* ids, std::string* err) {
  return fail(static_cast<SentencePieceProcessor*>(p)->Encode(text, ids), err);
}

bool encode_pieces(void* p, const std::string& text, std::vector<std::string>* pieces, std::string* err) {
  return fail(static_cast<SentencePieceProcessor*>(p)->Encode(text, pieces), err);
}

bool nbest_ids(void* p, const std::string& text, int nbest, std::vector<std::vector<int>>* ids,
               std::vector<float>* scores, std::string* err) {
  sentencepiece::ImmutableNBestSentencePieceText spt;
  if (!fail(static_cast<SentencePieceProcessor*>(p)->NBestEncode(text, nbest, spt.mutable_proto()), err)) return false;
  ids->clear();
  scores->clear();
  for (const auto& one : spt.nbests()) {
    std::vector<int> v;
    for (const auto& piece : one.pieces()) v.push_back(static_cast<int>(piece.id()));
    ids->push_back(std::move(v));
    scores->push_back(one.score());
  }
  return true;
}

bool decode(void* p, const std::vector<int>& ids, std::string* text, std::string* err) {
  return fail(static_cast<SentencePieceProcessor*>(p)->Decode(ids, text), err);
}

std::string id_to_piece(void* p, int id) { return static_cast<SentencePieceProcessor*>(p)->IdToPiece(id); }

int piece_size(void* p) { return static_cast<SentencePieceProcessor*>(p)->GetPieceSize(); }

void special_ids(void* p, int* pad, int* unk, int* bos, int* eos) {
  auto* sp = static_cast<SentencePieceProcessor*>(p);
  *pad = sp->pad_id();
  *unk = sp->unk_id();
  *bos = sp->bos_id();
  *eos = sp->eos_id();
}

const nmt::spm::ModuleApi kApi = {nmt::spm::kModuleAbi, train, load, destroy, encode_ids, encode_pieces,
                                  nbest_ids, decode, id_to_piece, piece_size, special_ids};

}  // namespace

extern "C" __attribute__((visibility("default"))) const nmt::spm::ModuleApi* nmt_spm_module_api() { return &kApi; }
