// Fuzzes the reader of format 1 and 2 checkpoints that runs no code in them
// (read_legacy_checkpoint): the zip, the restricted pickle machine, the
// storages and tensor views. Seed it with a checkpoint's archive, the bytes
// after its 24-byte header (scripts/fuzz.sh does).
//
// Before reading, the harness sets each zip entry's CRC-32 to that of its
// bytes (where it can follow the directory), so that mutations inside
// data.pkl reach the pickle machine instead of stopping at the CRC check.
#include <zlib.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/legacy_checkpoint.h"

namespace {

uint64_t le(const std::string& b, uint64_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// The CRC-32 of `z`'s entry whose central record is at `at`, written into
// that record, when its local header and bytes lie within `z`.
void fix_crc(std::string& z, uint64_t at) {
  const uint64_t size = le(z, at + 20, 4), h = le(z, at + 42, 4);
  if (h > z.size() || z.size() - h < 30) return;
  const uint64_t data = h + 30 + le(z, h + 26, 2) + le(z, h + 28, 2);
  if (data > z.size() || size > z.size() - data) return;
  const auto crc = ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(z.data() + data), static_cast<uInt>(size));
  for (int i = 0; i < 4; ++i) z[at + 16 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

void fix_crcs(std::string& z) {
  const size_t eocd = z.rfind(std::string("PK\5\6", 4));
  if (eocd == std::string::npos || z.size() - eocd < 22) return;
  uint64_t at = le(z, eocd + 16, 4);
  for (uint64_t n = le(z, eocd + 10, 2); n > 0 && at <= z.size() && z.size() - at >= 46; --n) {
    if (z.compare(at, 4, "PK\1\2", 4) != 0) return;
    fix_crc(z, at);
    at += 46 + le(z, at + 28, 2) + le(z, at + 30, 2) + le(z, at + 32, 2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string archive(reinterpret_cast<const char*>(data), size);
  fix_crcs(archive);
  try {
    nmt::read_legacy_checkpoint(archive, "fuzz");
  } catch (const nmt::Error&) {
  }
  return 0;
}
