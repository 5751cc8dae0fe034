// What the checkpoint_*.cc files share, inside the model layer: the names
// in a checkpoint's body, the file's header (checkpoint_file.cc), the parsed
// body and its "meta" entry (checkpoint.cc), the training-state entry
// (checkpoint_train_state.cc) and the optimizer's (checkpoint_optimizer.cc).
// Not for use outside them: model/checkpoint.h is the interface.
#pragma once
#include <torch/optim.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "model/checkpoint.h"
#include "model/tensor_file.h"

namespace nmt::ckpt {

// Names in the body (tensor_file.h).
inline constexpr char kFormatName[] = "nmt checkpoint 3";  // metadata "format"
inline constexpr char kModelPrefix[] = "model.";           // + a parameter's named_parameters() key
inline constexpr char kSrcTokenizer[] = "tokenizer.src";   // SentencePiece model bytes (U8)
inline constexpr char kTgtTokenizer[] = "tokenizer.tgt";
inline constexpr char kCpuRng[] = "state.rng";              // the CPU generator's state (U8)
inline constexpr char kDeviceRng[] = "state.device_rng";    // the training device's generator's state (U8)
inline constexpr char kSteppedPrefix[] = "state.weights.";  // + a parameter's key: the weights the optimizer steps

// The key of parameter `p` in a LibTorch optimizer's `state()` map: in
// LibTorch 1.x a string of its TensorImpl's address (as c10::guts::to_string,
// which 2.x dropped, wrote it), in 2.x the address itself.
template <class StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream s;
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// --- the file's header (checkpoint_file.cc) ---

struct Header {
  uint32_t version = 0;
  size_t size = 0;         // header bytes: the archive starts here
  uint64_t body_size = 0;  // version 2: archive bytes
  uint32_t crc = 0;        // version 2: their CRC-32
};

// Parses the header at the start of `bytes` (which may hold no more than
// the header). Throws nmt::Error for a foreign file, a version this build
// does not read, or a header cut short.
Header parse_header(std::string_view bytes, const std::string& path);

// Checks that `bytes` holds exactly the body its header declares, unchanged
// (version 2; version 1 has no checksum). Throws nmt::Error with a hint.
void verify_body(std::string_view bytes, const Header& h, const std::string& path);

// Reads a checkpoint file: the header first, then no more than it declares
// (plus one byte, to notice trailing data), so a device or a foreign file is
// refused before anything else is read. Throws nmt::Error naming the path.
std::string read_checkpoint_file(const std::string& path);

// --- the body (checkpoint.cc) ---

// The checkpoint's body after every check of its bytes: the parsed tensor
// file (views into `bytes`) and what its metadata says.
struct Parsed {
  std::string bytes;
  TensorFile file;
  CheckpointInfo info;
};

// Checks the body of a version 3 file and what its metadata says, before
// any model is built: tensor layout (TensorFile), model options (ranges),
// every model tensor against parameter_shapes(), the tokenizers, the
// training state's scalars. Throws nmt::Error naming `origin` and the field.
Parsed parse_checkpoint(std::string bytes, const std::string& origin);

// `text` as a JSON object, or a located error naming `field`.
nlohmann::json json_object(const std::string* text, const std::string& path, const std::string& field);

// `meta` as the JSON text of a checkpoint's "meta" entry (empty fields left out).
std::string meta_json(const CheckpointMeta& meta);

// Reads a "meta" entry; a damaged one counts as absent (it is
// informational). Never throws for bad content.
bool read_meta(const std::string& text, CheckpointMeta* meta);

// --- the training-state entry (checkpoint_train_state.cc) ---

// Reads the scalar training state from its JSON object, each field checked:
// counts non-negative integers (epoch from 1), rates finite and positive,
// figures finite. Throws nmt::Error naming the file and the field.
TrainState parse_train_state(const nlohmann::json& j, const std::string& path);

// The JSON object of the scalar fields of `s` (its "train_state" entry).
nlohmann::json train_state_json(const TrainState& s);

// --- the optimizer's entries (checkpoint_optimizer.cc) ---

// The optimizer's state as the file stores it: metadata "optimizer" (its
// kind; per group its options and, per parameter, Adam's step or -1 where
// it has no state yet) and tensors "optimizer.G.I.NAME" for group G,
// parameter I.
void add_optimizer(TensorFileWriter& w, torch::optim::Optimizer& optimizer);

// Restores `optimizer` from the file's optimizer entries, checking each
// against the optimizer built for this run: the same kind, groups and
// parameter counts, options in range, every moment of its parameter's shape.
// Throws nmt::Error naming `path` and the field.
void restore_optimizer(const TensorFile& f, torch::optim::Optimizer& optimizer, const torch::Device& device,
                       const std::string& path);

}  // namespace nmt::ckpt
