// Fuzzes the model configuration text stored in checkpoints.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = nmt::ModelOptions::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // Whatever parses must round-trip.
    if (nmt::ModelOptions::parse(m.serialize(), "again").serialize() != m.serialize()) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  return 0;
}
