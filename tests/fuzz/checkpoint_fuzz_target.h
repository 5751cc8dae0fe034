// The checkpoint fuzz target, shared by the libFuzzer target
// (checkpoint_fuzz.cc) and the bounded run in the unit tests
// (checkpoint_fuzz_test.cc). The input is a checkpoint body (the
// safetensors layout, model/tensor_file.h); it is sealed with a valid
// header and checksum, so that mutations reach what a hostile author
// controls: the tensor header, the config, every shape, the training state.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/checkpoint.h"

namespace nmt::fuzz {

// `body` behind a version 3 checkpoint header with its size and CRC-32.
inline std::string sealed_checkpoint(const std::string& body) {
  std::string bytes("NMTCKPT\n", 8);
  auto le = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  le(3, 4);
  le(body.size(), 8);
  le(::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())), 4);
  return bytes + body;
}

// Parses the sealed body as every tool does before building a model.
// Returns whether it was accepted; nmt::Error (a refusal) is the only
// exception expected: anything else, or a crash, is a bug.
inline bool fuzz_checkpoint_body(const uint8_t* data, size_t size) {
  try {
    nmt::inspect_checkpoint(sealed_checkpoint(std::string(reinterpret_cast<const char*>(data), size)), "fuzz");
    return true;
  } catch (const nmt::Error&) {
    return false;
  }
}

}  // namespace nmt::fuzz
