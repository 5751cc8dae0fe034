// The boundary between nmt and SentencePiece. Debian's libsentencepiece
// carries a private protobuf-lite (3.14) whose exported symbols clash with
// the libprotobuf (3.21) that libtorch uses: linked into one program, one
// side or the other binds to the wrong protobuf and crashes or fails its
// version check. So SentencePiece lives in a separate module
// (libnmt_spm.so) that nmt loads with dlopen(RTLD_LOCAL | RTLD_DEEPBIND):
// the module and libsentencepiece resolve protobuf to their own copy, and
// libtorch keeps its own. This header is the module's only interface.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

namespace nmt::spm {

// Bumped whenever the table below changes.
constexpr int kModuleAbi = 2;

// Functions exported by the module. Errors are returned as false with a
// message in *err; nothing throws across the boundary.
struct ModuleApi {
  int abi;
  // Trains a model on `sentences` with SentencePiece trainer arguments.
  bool (*train)(const std::unordered_map<std::string, std::string>& args, const std::vector<std::string>& sentences,
                std::string* model_bytes, std::string* err);
  // Loads a serialized model; returns an opaque processor or nullptr.
  void* (*load)(const std::string& model_bytes, std::string* err);
  void (*destroy)(void* processor);
  bool (*encode_ids)(void* processor, const std::string& text, std::vector<int>* ids, std::string* err);
  bool (*encode_pieces)(void* processor, const std::string& text, std::vector<std::string>* pieces, std::string* err);
  // The `nbest` most probable segmentations (unigram models only), best
  // first, with their log-probabilities.
  bool (*nbest_ids)(void* processor, const std::string& text, int nbest, std::vector<std::vector<int>>* ids,
                    std::vector<float>* scores, std::string* err);
  bool (*decode)(void* processor, const std::vector<int>& ids, std::string* text, std::string* err);
  std::string (*id_to_piece)(void* processor, int id);
  int (*piece_size)(void* processor);
  // pad, unk, bos, eos ids of the model (-1 when disabled)
  void (*special_ids)(void* processor, int* pad, int* unk, int* bos, int* eos);
};

}  // namespace nmt::spm

// The module's one exported symbol.
extern "C" const nmt::spm::ModuleApi* nmt_spm_module_api();
