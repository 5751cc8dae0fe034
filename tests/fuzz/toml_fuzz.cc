// Fuzzes the TOML config reader (-c/--config of every tool): the shape
// check before toml++ (deep table headers and dotted keys) and toml++ itself.
#include <cstdint>
#include <string>

#include "base/config.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    nmt::ConfigFile::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const nmt::Error&) {
  }
  return 0;
}
