// A trusting zip reader and writer and pickle edits, for the legacy
// checkpoint tests that take a real format 2 archive apart, change what a
// stranger could change, and put it together again
// (legacy_hostile_checkpoint_test.cc), and the check that each such file is
// refused with one error line.
#pragma once
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/legacy_checkpoint.h"
#include "test_util.h"

namespace nmt::legacy_test {

using nmt::test::error_of;

// One zip entry: its name, bytes and what the directory says of them.
struct Entry {
  std::string name, data;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t raw_size = 0;
};

// The `n`-byte little-endian number at `at` of `b`; throws std::out_of_range past its end.
inline uint64_t get_le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b.at(at + i));
  return v;
}

// Appends `v` to `out` as `n` little-endian bytes.
inline void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Overwrites `n` bytes at `at` of `b` with `v`, little-endian; throws std::out_of_range past its end.
inline void set_le(std::string& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.at(at + i) = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// The CRC-32 of `s` (zlib's).
inline uint32_t crc_of(const std::string& s) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

// The entries of zip `z`, trusting its directory (for real archives only).
inline std::vector<Entry> unzip(const std::string& z) {
  const size_t eocd = z.rfind(std::string("PK\5\6", 4));
  size_t at = get_le(z, eocd + 16, 4);
  std::vector<Entry> out(get_le(z, eocd + 10, 2));
  for (auto& e : out) {
    e.method = static_cast<uint16_t>(get_le(z, at + 10, 2));
    e.crc = static_cast<uint32_t>(get_le(z, at + 16, 4));
    e.raw_size = get_le(z, at + 24, 4);
    const size_t name_len = get_le(z, at + 28, 2), h = get_le(z, at + 42, 4);
    e.name = z.substr(at + 46, name_len);
    e.data = z.substr(h + 30 + get_le(z, h + 26, 2) + get_le(z, h + 28, 2), get_le(z, at + 20, 4));
    at += 46 + name_len + get_le(z, at + 30, 2) + get_le(z, at + 32, 2);
  }
  return out;
}

// A zip of `entries` as PyTorch's writer lays one out: local headers and
// data, the central directory, zip64 end record and locator, end record.
inline std::string zip(const std::vector<Entry>& entries) {
  std::string z, dir;
  for (const auto& e : entries) {
    const uint64_t at = z.size();
    for (std::string* out : {&z, &dir}) {
      const bool central = out == &dir;
      out->append(central ? "PK\1\2" : "PK\3\4");
      if (central) put_le(*out, 20, 2);  // made by
      for (uint64_t v : {uint64_t{20}, uint64_t{0}, uint64_t{e.method}, uint64_t{0}, uint64_t{0}}) put_le(*out, v, 2);
      put_le(*out, e.crc, 4);
      put_le(*out, e.data.size(), 4);
      put_le(*out, e.raw_size, 4);
      put_le(*out, e.name.size(), 2);
      put_le(*out, 0, 2);  // extra
      if (central) {
        out->append(10, '\0');  // comment length, disk, attributes
        put_le(*out, at, 4);
      }
      out->append(e.name);
    }
    z += e.data;
  }
  const uint64_t dir_at = z.size(), zip64_at = z.size() + dir.size();
  z += dir;
  z.append("PK\6\6");
  put_le(z, 44, 8);
  put_le(z, 45, 2);  // made by
  put_le(z, 45, 2);  // needed
  put_le(z, 0, 8);       // disks
  put_le(z, entries.size(), 8);
  put_le(z, entries.size(), 8);
  put_le(z, dir.size(), 8);
  put_le(z, dir_at, 8);
  z.append("PK\6\7");
  put_le(z, 0, 4);
  put_le(z, zip64_at, 8);
  put_le(z, 1, 4);
  z.append("PK\5\6");
  put_le(z, 0, 4);
  put_le(z, entries.size(), 2);
  put_le(z, entries.size(), 2);
  put_le(z, dir.size(), 4);
  put_le(z, dir_at, 4);
  put_le(z, 0, 2);
  return z;
}

// Entry `name` of `entries`; throws std::runtime_error if there is none.
inline Entry& entry(std::vector<Entry>& entries, const std::string& name) {
  for (auto& e : entries)
    if (e.name == name) return e;
  throw std::runtime_error("no zip entry " + name);
}

// The data.pkl of `archive`; throws std::runtime_error if it has none.
inline std::string pickle_of(const std::string& archive) {
  auto entries = unzip(archive);
  return entry(entries, "archive/data.pkl").data;
}

// `archive` with data.pkl replaced by `pickle`.
inline std::string with_pickle(const std::string& archive, const std::string& pickle) {
  auto entries = unzip(archive);
  Entry& e = entry(entries, "archive/data.pkl");
  e.data = pickle;
  e.crc = crc_of(pickle);
  e.raw_size = pickle.size();
  return zip(entries);
}

// `s` with the first `from` replaced by `to`; throws std::runtime_error if `from` is absent.
inline std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("pattern not found in the pickle");
  return s.replace(at, from.size(), to);
}

// A pickle LONG1 opcode of 8 bytes holding `v`.
inline std::string long1(int64_t v) {
  std::string s("\x8a\x08", 2);
  put_le(s, static_cast<uint64_t>(v), 8);
  return s;
}

// Where the first storage's element count and its tensor's offset lie in a
// pickle: ... X'cpu' BINPUT <count> TUPLE BINPERSID BINPUT <offset> ...
struct FirstStorage {
  size_t count_at = 0, count_len = 0, offset_at = 0, offset_len = 0;
};

// The length of a BININT1/BININT2/BININT opcode with its operand; 0 for another opcode.
inline size_t int_len(char op) { return op == 'K' ? 2 : op == 'M' ? 3 : op == 'J' ? 5 : 0; }

// The places of FirstStorage in pickle `pk`; fails the test if it is not laid out as nmt writes it.
inline FirstStorage first_storage(const std::string& pk) {
  FirstStorage f;
  size_t at = pk.find(std::string("X\x03\x00\x00\x00" "cpu", 8)) + 8;
  EXPECT_EQ(pk.at(at), 'q');
  at += 2;
  f.count_at = at;
  f.count_len = int_len(pk.at(at));
  at += f.count_len;
  EXPECT_EQ(pk.substr(at, 3), "tQq");
  f.offset_at = at + 4;
  f.offset_len = int_len(pk.at(f.offset_at));
  EXPECT_EQ(pk.substr(f.offset_at, 2), std::string("K\x00", 2));
  return f;
}

// Where the central directory record of entry `name` begins in zip `z`.
inline size_t central_record(const std::string& z, const std::string& name) {
  const std::string sig("PK\1\2", 4);
  for (size_t at = z.find(sig); at != std::string::npos; at = z.find(sig, at + 1))
    if (at + 46 + name.size() <= z.size() && get_le(z, at + 28, 2) == name.size() && z.compare(at + 46, name.size(), name) == 0)
      return at;
  throw std::runtime_error("no central directory record for " + name);
}

// The error reading archive bytes `a`, with a check that it is one line
// naming the origin.
inline std::string refusal(const std::string& a) {
  const std::string msg = error_of([&] { nmt::read_legacy_checkpoint(a, "model.ckpt"); });
  EXPECT_EQ(msg.rfind("model.ckpt: legacy checkpoint: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

}  // namespace nmt::legacy_test
