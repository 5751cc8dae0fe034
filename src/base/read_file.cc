// Reading a whole file under a size cap (see read_file.h).
#include "base/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/error.h"

namespace nmt {

std::string read_file_bounded(const std::string& path, size_t max_bytes, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(located(path, 0, system_error("cannot open " + what, errno)));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(located(path, 0, "is a folder, not a " + what));
  }
  std::string bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(std::min<size_t>(static_cast<size_t>(st.st_size), max_bytes) + 1);
  char chunk[1 << 16];
  while (bytes.size() <= max_bytes) {
    const ssize_t n = ::read(fd, chunk, std::min(sizeof chunk, max_bytes + 1 - bytes.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(located(path, 0, system_error("read error", err)));
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  if (bytes.size() > max_bytes)
    throw Error(located(path, 0, "is larger than " + std::to_string(max_bytes) + " bytes: not a " + what));
  return bytes;
}

}  // namespace nmt
