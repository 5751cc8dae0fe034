// The checkpoint fuzz target, shared by the libFuzzer target
// (checkpoint_fuzz.cc) and the bounded run in the unit tests
// (checkpoint_fuzz_test.cc). The input is a checkpoint body (the
// safetensors layout, model/tensor_file.h); it is sealed with a valid
// header and checksum, so that mutations reach what a hostile author
// controls: the tensor header, the config, every shape, the training state.
#pragma once
#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/checkpoint.h"

namespace nmt::fuzz {

// Parses the sealed body as every tool does before building a model.
// Returns whether it was accepted; nmt::Error (a refusal) is the only
// exception expected: anything else, or a crash, is a bug.
inline bool fuzz_checkpoint_body(const uint8_t* data, size_t size) {
  try {
    nmt::inspect_checkpoint(
        nmt::checkpoint_file_bytes(std::string_view(reinterpret_cast<const char*>(data), size)), "fuzz");
    return true;
  } catch (const nmt::Error&) {
    return false;
  }
}

}  // namespace nmt::fuzz
