// The zip reader of legacy checkpoints (legacy_format.h): finds the central
// directory (zip64 included), reads its records, and checks that every
// entry's bytes lie within the archive before anything reads them.
#include <string>
#include <string_view>

#include "model/crc32.h"
#include "model/legacy_format.h"

namespace nmt::legacy {
namespace {

// Where the central directory lies in the archive.
struct CentralDir {
  uint64_t at = 0, size = 0, count = 0;
  uint64_t end = 0;  // where the records after it begin: data must lie before
};

// Whether the 4-byte signature `sig` lies at `at` in `z`. Never fails.
bool has_sig(std::string_view z, uint64_t at, const char* sig) {
  return at <= z.size() && z.size() - at >= 4 && z.compare(at, 4, sig, 4) == 0;
}

// Reads the central directory's place from the end-of-central-directory
// record at `eocd`, or from the zip64 record a locator before it points to
// (PyTorch's writer always adds one). Throws nmt::Error if it lies outside.
CentralDir central_dir_at(std::string_view z, uint64_t eocd, const std::string& origin) {
  CentralDir d{le(z, eocd + 16, 4), le(z, eocd + 12, 4), le(z, eocd + 10, 2), eocd};
  if (le(z, eocd + 4, 2) != 0 || le(z, eocd + 6, 2) != 0 || le(z, eocd + 8, 2) != d.count)
    fail(origin, "the zip archive spans several disks");
  if (eocd >= 20 && has_sig(z, eocd - 20, "PK\6\7")) {
    const uint64_t at = le(z, eocd - 20 + 8, 8);
    if (at > eocd - 20 || eocd - 20 - at < 56 || !has_sig(z, at, "PK\6\6") || le(z, at + 24, 8) != le(z, at + 32, 8))
      fail(origin, "damaged zip64 end-of-central-directory record");
    d = {le(z, at + 48, 8), le(z, at + 40, 8), le(z, at + 32, 8), at};
  } else if (d.at == 0xFFFFFFFF || d.size == 0xFFFFFFFF || d.count == 0xFFFF) {
    fail(origin, "zip64 archive without its zip64 end-of-central-directory record");
  }
  if (d.at > d.end || d.size > d.end - d.at) fail(origin, "the zip's central directory lies outside the archive");
  return d;
}

// Finds the end-of-central-directory record (its comment reaching the end).
// Throws nmt::Error if there is none: a truncated file or not a zip.
CentralDir find_central_dir(std::string_view z, const std::string& origin) {
  if (z.size() >= 22) {
    const uint64_t lowest = z.size() > 22 + 0xFFFF ? z.size() - 22 - 0xFFFF : 0;
    for (uint64_t at = z.size() - 22 + 1; at-- > lowest;)
      if (has_sig(z, at, "PK\5\6") && at + 22 + le(z, at + 20, 2) == z.size()) return central_dir_at(z, at, origin);
  }
  fail(origin, "truncated, or not a zip archive (no end-of-central-directory record)");
}

// Applies an entry's zip64 extra field (id 1): the 8-byte sizes and offset
// that replace the 32-bit ones set to 0xFFFFFFFF, in the order zip defines.
// Throws nmt::Error for a field that runs past its end or lacks a value.
void apply_zip64_extra(std::string_view extra, ZipEntry& e, const std::string& name, const std::string& origin) {
  while (extra.size() >= 4) {
    const uint64_t id = le(extra, 0, 2), len = le(extra, 2, 2);
    if (len > extra.size() - 4) fail(origin, "zip entry " + in_quotes(name) + " has a damaged extra field");
    std::string_view field = extra.substr(4, len);
    extra.remove_prefix(4 + len);
    if (id != 1) continue;
    for (uint64_t* v : {&e.raw_size, &e.size, &e.header_at}) {
      if (*v != 0xFFFFFFFF) continue;
      if (field.size() < 8) fail(origin, "zip entry " + in_quotes(name) + " has a damaged zip64 field");
      *v = le(field, 0, 8);
      field.remove_prefix(8);
    }
  }
}

// Finds the bytes of `e` after its local header; all must lie before `end`
// (the central directory). Throws nmt::Error if they do not.
void locate(std::string_view z, uint64_t end, const std::string& name, ZipEntry& e, const std::string& origin) {
  const uint64_t h = e.header_at;
  if (h > end || end - h < 30 || !has_sig(z, h, "PK\3\4"))
    fail(origin, "zip entry " + in_quotes(name) + " has no local header where the directory says");
  const uint64_t name_len = le(z, h + 26, 2), data_at = h + 30 + name_len + le(z, h + 28, 2);
  if (data_at > end || e.size > end - data_at)
    fail(origin, "zip entry " + in_quotes(name) + " (" + std::to_string(e.size) + " bytes at " + std::to_string(data_at) +
                     ") runs past the end of the archive (" + std::to_string(end) + " bytes of entries)");
  if (z.substr(h + 30, name_len) != name) fail(origin, "zip entry " + in_quotes(name) + ": its local header names another");
  e.data = z.substr(data_at, e.size);
}

// Reads the central directory record at `at` (before `end`) into `e`;
// returns its name and moves `at` past it. Throws nmt::Error for a damaged
// record or one that runs past `end`.
std::string read_dir_record(std::string_view z, uint64_t& at, uint64_t end, ZipEntry& e, const std::string& origin) {
  if (end - at < 46 || !has_sig(z, at, "PK\1\2")) fail(origin, "damaged zip central directory");
  const uint64_t name_len = le(z, at + 28, 2), extra_len = le(z, at + 30, 2);
  const uint64_t record = 46 + name_len + extra_len + le(z, at + 32, 2);
  if (end - at < record) fail(origin, "damaged zip central directory (a record runs past its end)");
  std::string name(z.substr(at + 46, name_len));
  e.flags = static_cast<uint16_t>(le(z, at + 8, 2));
  e.method = static_cast<uint16_t>(le(z, at + 10, 2));
  e.crc = static_cast<uint32_t>(le(z, at + 16, 4));
  e.size = le(z, at + 20, 4);
  e.raw_size = le(z, at + 24, 4);
  e.header_at = le(z, at + 42, 4);
  apply_zip64_extra(z.substr(at + 46 + name_len, extra_len), e, name, origin);
  at += record;
  return name;
}

}  // namespace

Zip::Zip(std::string_view z, const std::string& origin) : origin_(origin) {
  const CentralDir d = find_central_dir(z, origin);
  if (d.count > d.size / 46) fail(origin, "the zip's central directory claims more entries than it holds");
  uint64_t at = d.at;
  for (uint64_t i = 0; i < d.count; ++i) {
    ZipEntry e;
    std::string name = read_dir_record(z, at, d.at + d.size, e, origin);
    locate(z, d.at, name, e, origin);
    if (!entries_.emplace(name, e).second) fail(origin, "zip entry " + in_quotes(name) + " appears twice; nmt never writes that");
  }
}

std::string Zip::root() const {
  std::string found;
  for (const auto& [name, e] : entries_) {
    const size_t slash = name.find('/');
    if (slash == std::string::npos || name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (!found.empty()) fail(origin_, "the archive holds two data.pkl entries");
    found = name.substr(0, slash);
  }
  if (found.empty()) fail(origin_, "the archive holds no data.pkl: not a LibTorch archive");
  return found;
}

std::optional<std::string_view> Zip::stored(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  ZipEntry& e = it->second;
  if (e.method != 0 || e.size != e.raw_size || (e.flags & 1))
    fail(origin_, "zip entry " + in_quotes(name) + " is compressed or encrypted; nmt stores its entries");
  if (!e.verified && crc32_of(e.data) != e.crc) fail(origin_, "zip entry " + in_quotes(name) + " is damaged (CRC mismatch)");
  e.verified = true;
  return e.data;
}

}  // namespace nmt::legacy
