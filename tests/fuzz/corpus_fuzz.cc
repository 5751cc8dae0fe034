// Fuzzes the corpus readers: line validation (UTF-8, NUL), TSV splitting,
// and read_tsv / read_parallel / read_lines on the input as a file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/utf8.h"
#include "text/corpus.h"

namespace {

// The bytes as a file (memfd), named by its /proc path.
struct MemFile {
  int fd;
  std::string path;
  MemFile(const uint8_t* data, size_t size) : fd(memfd_create("fuzz", 0)) {
    if (size && write(fd, data, size) != static_cast<ssize_t>(size)) __builtin_trap();
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  ~MemFile() { close(fd); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t bad = nmt::find_invalid_utf8(text);
  if (bad != std::string::npos && bad >= size) __builtin_trap();
  if (bad == std::string::npos && nmt::utf8_length(text) > size) __builtin_trap();
  nmt::split_ws(text);
  try {
    auto [src, tgt] = nmt::split_tsv_line(text, "fuzz", 1);
    if (src.find('\t') != std::string::npos || tgt.find('\t') != std::string::npos) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  MemFile f(data, size);
  try {
    auto c = nmt::read_tsv(f.path, nmt::CorpusLimits{64});
    if (c.src.size() != c.tgt.size() || c.stats.kept + c.stats.empty + c.stats.too_long != c.stats.lines) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  try {
    nmt::read_lines(f.path);
  } catch (const nmt::Error&) {
  }
  // Split the input at its middle into two "parallel" files.
  MemFile a(data, size / 2), b(data + size / 2, size - size / 2);
  try {
    auto c = nmt::read_parallel(a.path, b.path);
    if (c.src.size() != c.tgt.size() || c.src.size() != c.line.size()) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  return 0;
}
