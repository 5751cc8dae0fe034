// Bounded line and file reading, and the run-folder lock (see io.h).
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/utf8.h"
#include "io/io.h"

namespace nmt {

// --- reading -----------------------------------------------------------------

LineReader::LineReader(const std::string& path, size_t max_bytes)
    : name_(path.empty() || path == "-" ? "<stdin>" : path), max_bytes_(max_bytes) {
  if (name_ == "<stdin>") {
    fd_ = 0;
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(located(path, 0, system_error("cannot open", errno)));
  own_fd_ = true;
  struct stat st;
  if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw Error(located(path, 0, "is a folder, not a text file"));
  }
}

LineReader::~LineReader() {
  if (own_fd_) ::close(fd_);
}

bool LineReader::fill() {
  if (eof_) return false;
  buf_.erase(0, pos_);
  pos_ = 0;
  const size_t old = buf_.size();
  buf_.resize(old + (1 << 16));
  ssize_t n;
  do {
    n = ::read(fd_, &buf_[old], buf_.size() - old);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int err = errno;
    buf_.resize(old);
    throw Error(located(name_, line_ + 1, system_error("read error", err)));
  }
  buf_.resize(old + static_cast<size_t>(n));
  if (n == 0) eof_ = true;
  return n > 0;
}

bool LineReader::more_ready() const {
  if (eof_ || std::memchr(buf_.data() + pos_, '\n', buf_.size() - pos_) != nullptr) return true;
  struct pollfd p = {fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // readable, at its end, or an error that next() will report
}

bool LineReader::next(std::string* line, bool* cropped) {
  line->clear();
  bool crop = false, any = false;
  size_t seen = 0;  // bytes of this line so far, kept or dropped
  while (true) {
    if (pos_ == buf_.size() && !fill()) break;
    const char* start = buf_.data() + pos_;
    const size_t avail = buf_.size() - pos_;
    const auto* nl = static_cast<const char*>(std::memchr(start, '\n', avail));
    const size_t take = nl ? static_cast<size_t>(nl - start) : avail;
    any = true;
    if (const auto* nul = static_cast<const char*>(std::memchr(start, '\0', take))) {
      std::string head = line->substr(0, 64);
      if (head.size() < 64) head.append(start, std::min<size_t>(take, 64 - head.size()));
      throw Error(located(name_, line_ + 1, nul_byte_problem(head, seen + static_cast<size_t>(nul - start), name_)));
    }
    const size_t room = max_bytes_ - std::min(max_bytes_, line->size());
    line->append(start, std::min(room, take));
    crop = crop || take > room;
    seen += take;
    pos_ += take;
    if (nl) {
      ++pos_;
      break;
    }
  }
  if (!any) return false;
  ++line_;
  if (crop) line->resize(utf8_safe_cut(*line));
  if (cropped) *cropped = crop;
  return true;
}

// --- the run-folder lock -------------------------------------------------------

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/" + file_name();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(located(path, 0, system_error("cannot create the lock file", errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char owner[32] = {0};
    const ssize_t n = ::pread(fd_, owner, sizeof owner - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw Error(located(path, 0, system_error("cannot lock", err)));
    std::string pid(owner, n > 0 ? static_cast<size_t>(n) : 0);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw Error(dir + " is in use by process " + (pid.empty() ? std::string("(unknown)") : pid) +
                " (another nmt-train run); wait for it to end or choose another --output");
  }
  // The owner's pid, for a second run's message; the lock holds without it.
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace nmt
