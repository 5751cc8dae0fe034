// Logging set-up and exception-to-exit-code mapping for the executables.
#include "tools/app.h"

#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "base/blas_kernels.h"
#include "base/error.h"
#include "io/io.h"

namespace nmt {
namespace {

const char* g_tool = "nmt";
std::atomic<bool>* g_stop = nullptr;

void write_stderr(const char* s) { (void)!::write(2, s, std::strlen(s)); }

extern "C" void on_signal(int sig) {
  if (sig == SIGPIPE) {  // the reader of our output went away (`nmt-translate | head`): leave quietly
    remove_temporaries_now();
    ::_exit(128 + sig);
  }
  if (g_stop != nullptr && !g_stop->exchange(true)) return;  // first signal: finish cleanly
  remove_temporaries_now();
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
  write_stderr("error: ");
  write_stderr(g_tool);
  write_stderr(" interrupted by ");
  write_stderr(name);
  write_stderr("; files being written were left as they were\n");
  ::_exit(128 + sig);
}

}  // namespace

bool ensure_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free descriptor is `fd` itself: the ones below it are open by now.
    if (::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return false;
  }
  return true;
}

void install_signal_handlers(const char* tool, std::atomic<bool>* stop) {
  g_tool = tool;
  g_stop = stop;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // A tool that stops cleanly writes only logs to its pipes: a log reader that
  // goes away must not end the run (writes to it fail quietly; nmt-train keeps
  // its log in the run folder too). The others leave as a pipe's writer does.
  if (stop != nullptr) std::signal(SIGPIPE, SIG_IGN);
  else sigaction(SIGPIPE, &sa, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}

void setup_logging(bool verbose, bool warnings_only) {
  auto logger = spdlog::stderr_color_mt("nmt");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(warnings_only ? spdlog::level::warn : verbose ? spdlog::level::debug : spdlog::level::info);
  const BlasKernels blas = blas_kernels();
  if (!blas.warning.empty()) spdlog::warn("{}", blas_choice_log_line());
  else if (const std::string line = blas_choice_log_line(); !line.empty()) spdlog::info("{}", line);
}

std::string command_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i] ? argv[i] : "";
    if (i > 0) line += ' ';
    const bool safe = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                        "0123456789-_./=:,+@%") == std::string::npos;
    const bool control = std::any_of(a.begin(), a.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (safe) {
      line += a;
    } else if (!control) {
      line += '\'';
      for (char c : a) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
      line += '\'';
    } else {
      line += "$'";
      for (char c : a) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\\' || c == '\'') {
          line += '\\';
          line += c;
        } else if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          line += buf;
        } else {
          line += c;
        }
      }
      line += '\'';
    }
  }
  return line;
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    spdlog::error("{}", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return kExitError;
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return kExitError;
  } catch (const c10::Error& e) {
    spdlog::error("internal error (LibTorch): {}", e.what_without_backtrace());
    return kExitInternal;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace nmt
