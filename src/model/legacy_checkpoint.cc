// Reads format 1 and 2 checkpoints without LibTorch's loader (see
// legacy_checkpoint.h), in three layers: a zip reader for the archive
// (legacy_zip.cc), a restricted pickle machine for its data.pkl
// (legacy_pickle.cc, legacy_pickle_tensors.cc), and a walk from the
// unpickled module tree to a LegacyCheckpoint (legacy_tree.cc); they share
// legacy_format.h. This file holds the nmt header's check, the helpers the
// layers share, and the entry point that runs the three.
#include "model/legacy_checkpoint.h"

#include "base/error.h"
#include "model/crc32.h"
#include "model/legacy_format.h"

namespace nmt {
namespace legacy {

void fail(const std::string& origin, const std::string& what) {
  throw Error(located(origin, 0, "legacy checkpoint: " + what));
}

std::string printable(std::string_view bytes, size_t max) {
  std::string out;
  for (char c : bytes.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (bytes.size() > max) out += "...";
  return out;
}

std::string in_quotes(std::string_view bytes) { return "'" + printable(bytes) + "'"; }

}  // namespace legacy

// (The entry points name legacy's helpers inside themselves: at namespace
// scope they would meet other files' own fail() in the unity build.)
std::string_view legacy_archive_bytes(std::string_view file, const std::string& origin) {
  using legacy::fail;
  using legacy::le;
  if (file.size() < 12 || file.substr(0, 8) != std::string_view("NMTCKPT\n", 8))
    fail(origin, "not an nmt checkpoint (no NMTCKPT header)");
  const uint64_t version = le(file, 8, 4);
  if (version == 1) return file.substr(12);
  if (version != 2) fail(origin, "format version " + std::to_string(version) + " is neither 1 nor 2");
  if (file.size() < 24) fail(origin, "truncated (the header is cut short)");
  const uint64_t declared = le(file, 12, 8);
  const std::string_view body = file.substr(24);
  if (body.size() != declared)
    fail(origin, std::string(body.size() < declared ? "truncated" : "damaged") + " (" + std::to_string(body.size()) +
                     " bytes after the header, " + std::to_string(declared) + " declared)");
  if (crc32_of(body) != le(file, 20, 4)) fail(origin, "damaged (checksum mismatch)");
  return body;
}

LegacyCheckpoint read_legacy_checkpoint(std::string_view archive_bytes, const std::string& origin) {
  using legacy::fail;
  using legacy::printable;
  legacy::Zip zip(archive_bytes, origin);
  const std::string root = zip.root();
  const auto pickle = zip.stored(root + "/data.pkl");
  if (!pickle) fail(origin, "the archive holds no data.pkl");
  legacy::Unpickler machine(*pickle, zip, root, archive_bytes.size(), origin);
  try {
    return legacy::read_tree(machine, machine.run(), origin);
  } catch (const c10::Error& e) {  // none expected: every size is checked first
    fail(origin, "LibTorch refused a tensor: " + printable(e.what_without_backtrace(), 200));
  }
}

}  // namespace nmt
