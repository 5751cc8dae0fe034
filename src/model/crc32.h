// CRC-32 (zlib's), the checksum of checkpoint bodies and of the zip entries
// of old-format checkpoints.
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace nmt {

// The CRC-32 of `bytes`, of any length (zlib takes at most 2^32 - 1 at a time).
inline uint32_t crc32_of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {
    const auto n = static_cast<uInt>(std::min<size_t>(bytes.size() - at, size_t{1} << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), n);
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace nmt
