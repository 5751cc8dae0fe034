// The executables' shared frame: which exceptions become which exit codes.
#include "tools/app.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "test_util.h"

namespace {

TEST(AppTest, ExceptionsMapToExitCodes) {
  EXPECT_EQ(nmt::run_guarded([] { return 0; }), nmt::kExitOk);
  EXPECT_EQ(nmt::run_guarded([] { return 7; }), 7);
  // What the user can fix: 1 for input, 2 for options.
  EXPECT_EQ(nmt::run_guarded([]() -> int { throw nmt::UsageError("--beam-size must be ..."); }), nmt::kExitUsage);
  EXPECT_EQ(nmt::run_guarded([]() -> int { nmt::SearchOptions s; s.beam_size = 0; s.validate(); return 0; }),
            nmt::kExitUsage);
  EXPECT_EQ(nmt::run_guarded([]() -> int { throw nmt::Error("bad.txt:3: bad"); }), nmt::kExitError);
  EXPECT_EQ(nmt::run_guarded([]() -> int { throw std::invalid_argument("sizes differ"); }), nmt::kExitError);
  // A bug: 3, for LibTorch's errors and any other exception.
  EXPECT_EQ(nmt::run_guarded([]() -> int { TORCH_CHECK(false, "shape mismatch"); return 0; }), nmt::kExitInternal);
  EXPECT_EQ(nmt::run_guarded([]() -> int { throw std::runtime_error("unexpected"); }), nmt::kExitInternal);
  EXPECT_EQ(nmt::kExitInternal, 3);
}

// command_line() gives a line that bash splits back into the same words.
TEST(AppTest, CommandLineReadsBackInAShell) {
  const std::vector<std::string> words = {"build/nmt-train", "-o", "runs/x", "--valid-src", "my file.en", "it's",
                                          "a\"b", "$HOME", "", "tab\there", "new\nline", "back\\slash", "ünï"};
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  const std::string line = nmt::command_line(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind("build/nmt-train -o runs/x --valid-src 'my file.en' ", 0), 0u) << line;
  // bash prints each word NUL-terminated; they must be the words given.
  const std::string cmd = "bash -c " + nmt::test::quote("for w in " + line + "; do printf '%s\\0' \"$w\"; done");
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0);
  std::vector<std::string> back;
  for (size_t at = 0; at < out.size();) {
    const size_t end = out.find('\0', at);
    back.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  EXPECT_EQ(back, words) << line;
}

}  // namespace
