// Safe output files and the temporary-file registry (see io.h).
#include "io/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <streambuf>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"

namespace nmt {
namespace {

// --- temporary files a signal handler may remove ----------------------------
// Fixed slots, so the handler touches no allocator: state 0 free, 1 being
// filled, 2 holds a path.
constexpr int kTempSlots = 64;
struct TempSlot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
TempSlot g_temps[kTempSlots];

// Lists `path`; returns its slot, or -1 when every slot is taken (the file is
// then only removed by the normal paths, not by a signal handler).
int register_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temps[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
      g_temps[i].state.store(2);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_temps[slot].state.store(0);
}

// "NAME.tmp.PID" -> PID (0 when `entry` is not such a name, or NAME differs
// from a non-empty `name`).
pid_t temporary_owner(const std::string& entry, const std::string& name) {
  const size_t at = entry.rfind(".tmp.");
  if (at == std::string::npos || at == 0 || at + 5 >= entry.size()) return 0;
  if (!name.empty() && entry.compare(0, at, name) != 0) return 0;
  if (!name.empty() && at != name.size()) return 0;
  long pid = 0;
  for (size_t i = at + 5; i < entry.size(); ++i) {
    if (entry[i] < '0' || entry[i] > '9' || pid > 1'000'000'000) return 0;
    pid = pid * 10 + (entry[i] - '0');
  }
  return static_cast<pid_t>(pid);
}

// "dir/name" -> {"dir", "name"}; "name" -> {".", "name"}.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// The descriptor named by /dev/stdout, /dev/stderr, /dev/fd/N or
// /proc/self/fd/N (also /proc/PID/fd/N of this process); -1 for other paths.
int descriptor_path(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                   std::string("/proc/thread-self/fd/"),
                                   "/proc/" + std::to_string(::getpid()) + "/fd/"}) {
    if (path.compare(0, prefix.size(), prefix) != 0 || path.size() == prefix.size()) continue;
    int fd = 0;
    for (size_t i = prefix.size(); i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9' || fd > 1'000'000) return -1;
      fd = fd * 10 + (path[i] - '0');
    }
    return fd;
  }
  return -1;
}

// A streambuf writing to a file descriptor through a 64 KiB buffer. The
// first failed write is remembered (errno) and fails every later one.
class FdBuf : public std::streambuf {
 public:
  FdBuf() : buf_(1 << 16) { setp(buf_.data(), buf_.data() + buf_.size()); }
  void attach(int fd) { fd_ = fd; }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (drain() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain(); }

 private:
  int drain() {
    if (error_ != 0) return -1;
    const char* p = pbase();
    size_t n = static_cast<size_t>(pptr() - pbase());
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return -1;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return 0;
  }
  std::vector<char> buf_;
  int fd_ = -1;
  int error_ = 0;
};

}  // namespace

std::string temporary_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

void remove_temporaries_now() {
  for (auto& slot : g_temps)
    if (slot.state.load() == 2) ::unlink(slot.path);
}

int remove_stale_temporaries(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temporary_owner(e->d_name, name);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    if (::unlink((dir + "/" + e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

OutputTarget resolve_output(const std::string& path) {
  OutputTarget t;
  if (path.empty() || path == "-") return t;
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    const int fd = descriptor_path(p);
    if (fd >= 0) {
      t.mode = OutputMode::kDup;
      t.fd = fd;
      return t;
    }
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) throw Error(located(path, 0, system_error("cannot write", errno)));
      t.mode = OutputMode::kReplace;  // a new file (a missing folder fails when it is opened)
      t.path = p;
      return t;
    }
    if (S_ISLNK(st.st_mode)) {
      std::vector<char> target(PATH_MAX);
      const ssize_t n = ::readlink(p.c_str(), target.data(), target.size() - 1);
      if (n < 0) throw Error(located(path, 0, system_error("cannot follow the link", errno)));
      std::string next(target.data(), static_cast<size_t>(n));
      p = next[0] == '/' ? next : split_path(p).first + "/" + next;
      continue;
    }
    if (S_ISDIR(st.st_mode)) throw Error(located(path, 0, "is a folder; give a file name"));
    if (S_ISBLK(st.st_mode)) throw Error(located(path, 0, "is a block device; refusing to write on it"));
    t.mode = S_ISREG(st.st_mode) ? OutputMode::kReplace : OutputMode::kInPlace;
    t.path = p;
    return t;
  }
  throw Error(located(path, 0, "too many levels of symbolic links"));
}

struct OutputFile::Impl {
  std::string name;    // for messages
  OutputTarget target;
  std::string tmp;     // kReplace: the temporary file
  int fd = -1;
  bool close_fd = false;
  int temp_slot = -1;
  bool committed = false;
  FdBuf buf;
  std::ostream os{&buf};

  void fail(const std::string& what, int err) { throw Error(located(name, 0, system_error(what, err))); }
};

OutputFile::OutputFile(const std::string& path, bool sweep_stale) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.name = path.empty() || path == "-" ? "<stdout>" : path;
  m.target = resolve_output(path);
  switch (m.target.mode) {
    case OutputMode::kStdout:
      m.fd = 1;
      break;
    case OutputMode::kDup:
      m.fd = ::fcntl(m.target.fd, F_DUPFD_CLOEXEC, 3);
      if (m.fd < 0) m.fail("cannot open output for writing", errno);
      m.close_fd = true;
      break;
    case OutputMode::kInPlace:
      m.fd = ::open(m.target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (m.fd < 0) m.fail("cannot open output for writing", errno);
      m.close_fd = true;
      break;
    case OutputMode::kReplace: {
      const auto [dir, base] = split_path(m.target.path);
      if (sweep_stale) remove_stale_temporaries(dir, base);
      m.tmp = temporary_name(m.target.path);
      struct stat old;
      const bool existed = ::stat(m.target.path.c_str(), &old) == 0;
      m.temp_slot = register_temporary(m.tmp);  // before the file exists: a signal never misses it
      ::unlink(m.tmp.c_str());                  // left by an earlier process with our pid
      m.fd = ::open(m.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (m.fd < 0) {
        const int err = errno;
        unregister_temporary(m.temp_slot);
        m.fail("cannot open output for writing", err);
      }
      m.close_fd = true;
      if (existed) {  // the new file keeps the old one's permissions (and owner, when we may)
        (void)::fchmod(m.fd, old.st_mode & 07777);
        if (::geteuid() == 0) (void)::fchown(m.fd, old.st_uid, old.st_gid);
      }
      break;
    }
  }
  m.buf.attach(m.fd);
}

OutputFile::~OutputFile() {
  auto& m = *impl_;
  if (m.close_fd && m.fd >= 0) ::close(m.fd);
  if (m.target.mode == OutputMode::kReplace && !m.committed) ::unlink(m.tmp.c_str());
  unregister_temporary(m.temp_slot);
}

std::ostream& OutputFile::stream() { return impl_->os; }

const std::string& OutputFile::name() const { return impl_->name; }

void OutputFile::flush() {
  auto& m = *impl_;
  m.os.flush();
  if (m.buf.error() != 0) m.fail("write failed", m.buf.error());
  if (!m.os) throw Error(located(m.name, 0, "write failed"));
}

void OutputFile::commit() {
  auto& m = *impl_;
  if (m.committed) return;
  flush();
  if (m.target.mode == OutputMode::kReplace) {
    if (::fsync(m.fd) != 0) m.fail("write failed", errno);
    const int rc = ::close(m.fd);
    m.fd = -1;
    if (rc != 0) m.fail("write failed", errno);
    if (::rename(m.tmp.c_str(), m.target.path.c_str()) != 0) m.fail("cannot replace the file", errno);
  } else if (m.close_fd) {
    const int rc = ::close(m.fd);
    m.fd = -1;
    if (rc != 0) m.fail("write failed", errno);
  }
  m.committed = true;
  unregister_temporary(m.temp_slot);
  m.temp_slot = -1;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  OutputFile out(path);
  out.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.commit();
}

}  // namespace nmt
