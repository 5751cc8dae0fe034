// Fuzzes checkpoint reading past the checksum (checkpoint_fuzz_target.h).
// Seed it with the body of a real checkpoint (scripts/fuzz.sh does).
#include "checkpoint_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nmt::fuzz::fuzz_checkpoint_body(data, size);
  return 0;
}
