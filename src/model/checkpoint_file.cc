// A checkpoint file's header (magic, format version, body size, CRC-32):
// sealing a body behind one, and reading a file header first, then no more
// than the header declares.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "model/checkpoint_format.h"
#include "model/crc32.h"

namespace nmt {
namespace {

constexpr char kMagic[8] = {'N', 'M', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr size_t kHeaderV1 = sizeof(kMagic) + 4;  // magic, version
constexpr size_t kHeaderV2 = kHeaderV1 + 8 + 4;   // ... body size, CRC-32 of the body (versions 2 and 3)
constexpr uint64_t kMaxCheckpointBytes = uint64_t{1} << 40;  // sanity cap on a declared body size
constexpr uint64_t kMaxUnsizedBytes = uint64_t{4} << 30;     // version 1 (no size) from a regular file

uint64_t read_le(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void append_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Appends up to `n` bytes of `fd` to `out`; fewer only at the end of the file.
void read_up_to(int fd, uint64_t n, std::string& out, const std::string& path) {
  char chunk[1 << 16];
  while (n > 0) {
    const ssize_t got = ::read(fd, chunk, static_cast<size_t>(std::min<uint64_t>(n, sizeof chunk)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(located(path, 0, std::string("read error: ") + std::strerror(errno)));
    if (got == 0) return;
    out.append(chunk, static_cast<size_t>(got));
    n -= static_cast<uint64_t>(got);
  }
}

}  // namespace

namespace ckpt {

Header parse_header(std::string_view bytes, const std::string& path) {
  if (bytes.size() < kHeaderV1 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw Error(located(path, 0, "not an nmt checkpoint (no NMTCKPT header); expected a .ckpt file written by nmt-train"));
  Header h;
  h.version = static_cast<uint32_t>(read_le(bytes, sizeof(kMagic), 4));
  if (h.version > kCheckpointVersion)
    throw Error(located(path, 0, "checkpoint format version " + std::to_string(h.version) +
                                     " is newer than this nmt reads (" + std::to_string(kCheckpointVersion) +
                                     "); upgrade nmt"));
  if (h.version < 1) throw Error(located(path, 0, "checkpoint format version 0 is not valid"));
  h.size = h.version == 1 ? kHeaderV1 : kHeaderV2;
  if (h.version >= 2) {
    if (bytes.size() < kHeaderV2) throw Error(located(path, 0, "truncated checkpoint (the header is cut short)"));
    h.body_size = read_le(bytes, kHeaderV1, 8);
    h.crc = static_cast<uint32_t>(read_le(bytes, kHeaderV1 + 8, 4));
    if (h.body_size > kMaxCheckpointBytes)
      throw Error(located(path, 0, "damaged checkpoint (its header declares " + std::to_string(h.body_size) +
                                       " bytes); use an older step-N.ckpt"));
  }
  return h;
}

void verify_body(std::string_view bytes, const Header& h, const std::string& path) {
  if (h.version < 2) return;
  const uint64_t have = bytes.size() - h.size;
  if (have != h.body_size)
    throw Error(located(path, 0, std::string(have < h.body_size ? "truncated" : "damaged") + " checkpoint (" +
                                     std::to_string(have) + " bytes after the header, " +
                                     std::to_string(h.body_size) + " expected); use an older step-N.ckpt"));
  if (crc32_of(bytes.substr(h.size)) != h.crc)
    throw Error(located(path, 0, "damaged (checksum mismatch); use an older step-N.ckpt"));
}

std::string read_checkpoint_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(located(path, 0, std::string("cannot open checkpoint: ") + std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error(located(path, 0, std::string("cannot read: ") + std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(located(path, 0, "is a folder, not a checkpoint"));
  std::string bytes;
  read_up_to(fd, kHeaderV2, bytes, path);  // a version 1 header is shorter: the rest is its archive
  const Header h = parse_header(bytes, path);
  if (h.version >= 2) {
    if (S_ISREG(st.st_mode)) bytes.reserve(std::min<uint64_t>(h.body_size, static_cast<uint64_t>(st.st_size)) + h.size + 1);
    read_up_to(fd, h.body_size + 1, bytes, path);  // one byte more shows trailing data
  } else {
    // Format 1 declares no size: only a regular file says where it ends.
    if (!S_ISREG(st.st_mode))
      throw Error(located(path, 0, "a format 1 checkpoint is read only from a regular file (it declares no size)"));
    if (static_cast<uint64_t>(st.st_size) > kMaxUnsizedBytes)
      throw Error(located(path, 0, "a format 1 checkpoint of more than 4 GiB is not one nmt wrote"));
    read_up_to(fd, static_cast<uint64_t>(st.st_size), bytes, path);
  }
  return bytes;
}

}  // namespace ckpt

std::string checkpoint_file_bytes(std::string_view body, uint32_t version) {
  std::string bytes(kMagic, sizeof(kMagic));
  append_le(bytes, version, 4);
  if (version >= 2) {
    append_le(bytes, body.size(), 8);
    append_le(bytes, crc32_of(body), 4);
  }
  bytes.reserve(bytes.size() + body.size());
  bytes += body;
  return bytes;
}

}  // namespace nmt
