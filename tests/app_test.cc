// The executables' shared frame: which exceptions become which exit codes.
#include "tools/app.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "base/error.h"
#include "base/options.h"

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

}  // namespace
