// Shared test helpers: the built executables run as processes (captured,
// spawned, waited for), their one-line errors, and the SVG they write.
#include <expat.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "tool_forker.h"

extern char** environ;

namespace nmt::test {
namespace fs = std::filesystem;

std::vector<std::string> temporary_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().lexically_relative(dir).string());  // no lookup: the file may be gone by now
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {
// Runs `args` (already quoted where needed) with stdout and stderr captured,
// in the folder `cwd` ("": this process's), with `env` ("env -u NAME
// NAME2=value", or "") in front of the command.
Result run_command(const std::string& cwd, const std::string& env, const std::string& exe, const std::string& args,
                   const std::string& dir, const std::string& stdin_file) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  Result r;
  // A tool of the test binary's own runs forked from it where that is the
  // same as starting it (tool_forker.h); else the shell execs the tool
  // (through env), so that wait4() reports the tool's own peak memory.
  if (!env.empty() || !run_forked({cwd, exe, args, stdin_file, out, err}, r.exit_code, r.peak_rss_mib)) {
    const std::string cmd = (cwd.empty() ? "" : "cd " + quote(cwd) + " && ") + "exec " + (env.empty() ? "env" : env) +
                            " NMT_THREADS=1 " + quote(std::string(NMT_BINARY_DIR) + "/" + exe) + " " + args +
                            " < " + quote(stdin_file) + " > " + quote(out) + " 2> " + quote(err);
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
      ADD_FAILURE() << "cannot start /bin/sh for " << cmd;
      return r;
    }
    int status = 0;
    struct rusage usage {};
    while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    r.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
    r.exit_code = exit_code_of(status);
  }
  r.out = read_bytes(out);
  set_err(r, read_bytes(err));
  expect_no_sanitizer_report(r.err);
  EXPECT_NE(r.exit_code, kSanitizerExitCode) << "a sanitizer report:\n" << r.err;
  return r;
}
}  // namespace

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + (WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
}

void set_err(Result& r, std::string err) {
  r.err = std::move(err);
  r.err_lines.clear();
  std::istringstream in(r.err);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) r.err_lines.push_back(l);
}

std::vector<std::string> warnings_of(const Result& r) {
  std::vector<std::string> out;
  for (const auto& l : r.err_lines)
    if (l.find("] [warning] ") != std::string::npos || l.find("] [error] ") != std::string::npos ||
        l.find("] [critical] ") != std::string::npos)
      out.push_back(l);
  return out;
}

Result run(const std::string& exe, const std::string& args, const std::string& dir, const std::string& stdin_file) {
  return run_command("", "", exe, args, dir, stdin_file);
}

Result run_in(const std::string& cwd, const std::string& exe, const std::string& args, const std::string& dir) {
  return run_command(cwd, "", exe, args, dir, "/dev/null");
}

Result run_with_env(const std::string& env, const std::string& exe, const std::string& args, const std::string& dir,
                    const std::string& stdin_file) {
  return run_command("", env, exe, args, dir, stdin_file);
}

std::vector<SvgElement> svg_elements(const std::string& svg) {
  struct Parse {
    std::vector<SvgElement> elements;
    std::vector<size_t> open;  // indices of the elements being read
  } parse;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &parse);
  XML_SetElementHandler(
      p,
      [](void* data, const XML_Char* name, const XML_Char** attrs) {
        auto* ps = static_cast<Parse*>(data);
        SvgElement e;
        e.name = name;
        for (int i = 0; attrs[i] != nullptr; i += 2) e.attrs[attrs[i]] = attrs[i + 1];
        ps->open.push_back(ps->elements.size());
        ps->elements.push_back(std::move(e));
      },
      [](void* data, const XML_Char*) { static_cast<Parse*>(data)->open.pop_back(); });
  XML_SetCharacterDataHandler(p, [](void* data, const XML_Char* s, int len) {
    auto* ps = static_cast<Parse*>(data);
    if (!ps->open.empty()) ps->elements[ps->open.back()].text.append(s, static_cast<size_t>(len));
  });
  const bool ok = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(ok) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p);
  XML_ParserFree(p);
  return parse.elements;
}

std::vector<std::pair<double, double>> svg_points(const std::string& points) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(points);
  std::string pair;
  while (in >> pair) {
    const size_t comma = pair.find(',');
    if (comma == std::string::npos) {
      ADD_FAILURE() << "not an x,y pair: " << pair;
      continue;
    }
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}

// Asserts a clean failure: exit code 1 (a user error), exactly one error line
// containing every string of `parts`, and no crash report.
void expect_one_line_error(const Result& r, const std::vector<std::string>& parts, int exit_code) {
  EXPECT_EQ(r.exit_code, exit_code) << "stderr:\n" << r.err;
  int error_lines = 0;
  for (const auto& l : r.err_lines) {
    if (l.find("error") == std::string::npos) continue;
    ++error_lines;
    for (const auto& p : parts) EXPECT_NE(l.find(p), std::string::npos) << "'" << p << "' missing from: " << l;
  }
  EXPECT_EQ(error_lines, 1) << "stderr:\n" << r.err;
  for (const char* bad : {"terminate called", "Exception raised from", "frame #", "Aborted", "Segmentation"})
    EXPECT_EQ(r.err.find(bad), std::string::npos) << "crash output '" << bad << "' in stderr:\n" << r.err;
}

void expect_no_sanitizer_report(const std::string& text) {
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: UndefinedBehaviorSanitizer"})
    EXPECT_EQ(text.find(report), std::string::npos) << "sanitizer report in a child's stderr:\n" << text;
}

std::string bin(const std::string& exe) { return std::string(NMT_BINARY_DIR) + "/" + exe; }

Child spawn(const std::vector<std::string>& args, const std::string& log, const std::string& out,
            const std::string& in) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child c;
  c.log = log;
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  c.pid = pid;
  posix_spawn_file_actions_destroy(&fa);
  return c;
}

bool wait_until(const std::function<bool()>& pred, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

bool wait_for_log(const Child& c, const std::string& text, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (read_bytes(c.log).find(text) != std::string::npos) return true;
    int status;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) return read_bytes(c.log).find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int wait_exit(const Child& c, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    int status;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      const int code = exit_code_of(status);
      expect_no_sanitizer_report(read_bytes(c.log));
      EXPECT_NE(code, kSanitizerExitCode) << read_bytes(c.log);
      return code;
    }
    if (r < 0) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  return -1;
}

}  // namespace nmt::test
