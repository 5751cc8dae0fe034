// The forker of tool_forker.h: a copy of the test binary made at its start
// that forks a child for each tool run, and the test side that asks it.
#include "tool_forker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

#include "entry_points.h"
#include "test_util.h"

extern char** environ;

namespace nmt::test {
namespace {

using EntryPoint = int (*)(int, char**);

// The tools linked into the test binary.
EntryPoint entry_point(const std::string& exe) {
  if (exe == "nmt-train") return &nmt::apps::train_main;
  if (exe == "nmt-translate") return &nmt::apps::translate_main;
  if (exe == "nmt-align") return &nmt::apps::align_main;
#ifdef NMT_TEST_HAS_SERVE
  if (exe == "nmt-serve") return &nmt::apps::serve_main;
#endif
  return nullptr;
}

// Variables that libraries read when they load (or the sanitizers at
// start), which a forked child cannot take up: a run whose environment
// differs from the forker's in one of them starts the executable.
std::map<std::string, std::string> load_time_environment() {
  static const char* const kPrefixes[] = {"OPENBLAS_", "GOTO", "OMP_", "GOMP_", "KMP_", "MKL_", "LD_", "ASAN_",
                                          "UBSAN_", "LSAN_", "MALLOC_", "GLIBC_", "TORCH_", "PYTORCH_", "CUDA_"};
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    for (const char* p : kPrefixes)
      if (kv.rfind(p, 0) == 0) {
        const size_t eq = kv.find('=');
        out[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      }
  }
  return out;
}

int g_fd = -1;                                     // the test's end of the socket to the forker; -1: none
std::string g_off = "start_tool_forker() was not called";  // why there is no forker, "" when there is
std::map<std::string, std::string> g_start_env;    // load_time_environment() when the forker was made
std::mutex g_busy;                                 // one run at a time on the socket
std::vector<std::string> g_child_env;              // a forked child's environ strings

// Writes all of `data`; false when the other end has gone.
bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads exactly `n` bytes; false at the end of the stream or an error.
bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// A list of strings on the socket: its length, then each string's length and bytes.
bool write_strings(int fd, const std::vector<std::string>& v) {
  const uint64_t n = v.size();
  if (!send_all(fd, &n, sizeof n)) return false;
  for (const auto& s : v) {
    const uint64_t len = s.size();
    if (!send_all(fd, &len, sizeof len) || !send_all(fd, s.data(), s.size())) return false;
  }
  return true;
}

bool read_strings(int fd, std::vector<std::string>& v) {
  uint64_t n = 0;
  if (!recv_all(fd, &n, sizeof n)) return false;
  v.assign(n, std::string());
  for (auto& s : v) {
    uint64_t len = 0;
    if (!recv_all(fd, &len, sizeof len)) return false;
    s.resize(len);
    if (len > 0 && !recv_all(fd, s.data(), len)) return false;
  }
  return true;
}

// Opens `path` onto descriptor `target` as a shell redirection would;
// on failure says so on stderr and leaves as the shell does (2).
void redirect(int target, const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  if (fd < 0) {
    std::fprintf(stderr, "sh: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
    ::_exit(2);
  }
  if (::dup2(fd, target) < 0) ::_exit(2);
  ::close(fd);
}

// A run's fields in the order they travel on the socket.
std::vector<std::string> fields_of(const ForkedRun& r) { return {r.cwd, r.exe, r.in, r.out, r.err}; }

// The forked child: becomes `run` with `args` (run.args already split) and
// the environment `env`, and never returns.
[[noreturn]] void become_tool(const ForkedRun& run, const std::vector<std::string>& args,
                              const std::vector<std::string>& env) {
  if (!run.cwd.empty() && ::chdir(run.cwd.c_str()) != 0) {
    std::fprintf(stderr, "sh: cd: can't cd to %s\n", run.cwd.c_str());
    ::_exit(2);
  }
  redirect(0, run.in, O_RDONLY);
  redirect(1, run.out, O_WRONLY | O_CREAT | O_TRUNC);
  redirect(2, run.err, O_WRONLY | O_CREAT | O_TRUNC);
  // The run's environment, NMT_THREADS=1 in place of any other value. putenv()
  // keeps the strings themselves: they live in g_child_env, never freed.
  ::clearenv();
  for (const auto& kv : env)
    if (kv.rfind("NMT_THREADS=", 0) != 0) g_child_env.push_back(kv);
  g_child_env.push_back("NMT_THREADS=1");
  for (auto& kv : g_child_env) ::putenv(kv.data());
  std::vector<std::string> words;
  words.push_back(std::string(NMT_BINARY_DIR) + "/" + run.exe);  // argv[0] as the shell gives it
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int code = entry_point(run.exe)(static_cast<int>(words.size()), argv.data());
  // Leaves as exit() would, streams flushed, but without what writes to the
  // pages it shares with the forker, each of which the kernel then copies
  // (a TLB flush each on a VM): LibTorch's static destructors, which
  // unregister every operator (0.7 s a run), and LeakSanitizer's check,
  // which marks every heap block (2 s a run). The runs that start the
  // executables keep both.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

// The forker's loop: one run per request, answered with the child's wait
// status and peak memory (status INT32_MIN: no child could be made). Leaves
// when the test process closes its end.
[[noreturn]] void serve_runs(int fd) {
  for (;;) {
    std::vector<std::string> fields, args, env;
    if (!read_strings(fd, fields) || !read_strings(fd, args) || !read_strings(fd, env) || fields.size() != 5)
      ::_exit(0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fd);
      become_tool({fields[0], fields[1], "", fields[2], fields[3], fields[4]}, args, env);
    }
    int32_t status = INT32_MIN;
    int64_t rss = 0;
    if (pid > 0) {
      int s = 0;
      struct rusage usage {};
      while (::wait4(pid, &s, 0, &usage) < 0 && errno == EINTR) {
      }
      status = s;
      rss = usage.ru_maxrss;
    }
    if (!send_all(fd, &status, sizeof status) || !send_all(fd, &rss, sizeof rss)) ::_exit(0);
  }
}

// The number of threads of this process (1 when it cannot tell: then it is
// at the start of main(), where the caller is told to be).
size_t thread_count() {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n == 0 ? 1 : n;
}

}  // namespace

bool split_shell_words(const std::string& s, std::vector<std::string>& words) {
  words.clear();
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = s.find('\'', i + 1);
      if (end == std::string::npos) return false;
      word += s.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < s.size() && s[j] != '"'; ++j) {
        if (s[j] == '$' || s[j] == '`') return false;
        if (s[j] == '\\' && j + 1 < s.size() && std::strchr("\\\"$`", s[j + 1]) != nullptr) ++j;
        else if (s[j] == '\\' && j + 1 < s.size() && s[j + 1] == '\n') return false;
        word += s[j];
      }
      if (j >= s.size()) return false;
      in_word = true;
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= s.size() || s[i + 1] == '\n') return false;
      word += s[++i];
      in_word = true;
    } else if (std::strchr("|&;<>()$`*?[]{}#~!", c) != nullptr) {
      return false;  // redirection, pipe, expansion, glob, comment (some only in places: refused anywhere)
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return true;
}

void start_tool_forker() {
  if (std::getenv("NMT_TEST_EXEC") != nullptr) {
    g_off = "NMT_TEST_EXEC is set";
    return;
  }
  if (const char* on = std::getenv("NMT_TEST_FORKER"); on == nullptr || std::string(on) != "1") {
    g_off = "NMT_TEST_FORKER is not 1";
    return;
  }
  if (const size_t n = thread_count(); n != 1) {
    g_off = "the test binary had " + std::to_string(n) + " threads at its start";
    return;
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    g_off = std::string("socketpair: ") + std::strerror(errno);
    return;
  }
  std::fflush(nullptr);  // nothing of the test's output is written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    g_off = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the test process gone (a timeout's kill): go too
    serve_runs(fds[1]);
  }
  ::close(fds[1]);
  g_fd = fds[0];
  g_start_env = load_time_environment();
  g_off.clear();
}

std::string tool_forker_off() { return g_off; }

bool run_forked(const ForkedRun& run, int& exit_code, double& peak_rss_mib) {
  if (g_fd < 0 || entry_point(run.exe) == nullptr) return false;
  std::unique_lock<std::mutex> lock(g_busy, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread's run: let this one start the executable
  std::vector<std::string> args;
  if (!split_shell_words(run.args, args) || load_time_environment() != g_start_env) return false;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  if (!write_strings(g_fd, fields_of(run)) || !write_strings(g_fd, args) ||
      !write_strings(g_fd, env)) {
    ::close(g_fd);  // the forker is gone before this run began: start executables from now on
    g_fd = -1;
    g_off = "the forker ended";
    return false;
  }
  int32_t status = 0;
  int64_t rss = 0;
  if (!recv_all(g_fd, &status, sizeof status) || !recv_all(g_fd, &rss, sizeof rss)) {
    ADD_FAILURE() << "the tool forker ended during a run of " << run.exe << " " << run.args;
    ::close(g_fd);
    g_fd = -1;
    g_off = "the forker ended during a run";
    exit_code = -1;
    peak_rss_mib = 0;
    return true;
  }
  if (status == INT32_MIN) return false;  // it could not fork: nothing ran
  exit_code = exit_code_of(status);
  peak_rss_mib = static_cast<double>(rss) / 1024.0;  // ru_maxrss is in KiB on Linux
  return true;
}

}  // namespace nmt::test
