// Fuzzes checkpoint reading: header (magic, version), the archive, the
// config and tokenizer entries. Seed it with a real checkpoint.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    nmt::inspect_checkpoint(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const nmt::Error&) {
  }
  return 0;
}
