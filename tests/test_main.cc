// main() of the test binary: the tool forker first (tool_forker.h), while
// the process is one thread and has run nothing, then the tests.
//
// CTest runs as many test processes at once as the machine has cores (-j)
// and gives each NMT_THREADS=1 (tests/CMakeLists.txt); each process starts
// at that many intra-op and BLAS threads, as the tools do (set_threads()).
// Left at LibTorch's default of one thread per core, N processes of N
// threads each wait for each other in every parallel region: OpenMP's
// threads spin before they sleep, and on a 16-core GPU host the fixed-row
// searches ran past CTest's limit (bench/results/test-threads-*.txt). A test
// that needs more threads sets them, and sets 1 again when it ends.
#include <gtest/gtest.h>

#include <cstdlib>

#include "model/device.h"
#include "tool_forker.h"

int main(int argc, char** argv) {
  nmt::test::start_tool_forker();
  if (std::getenv("NMT_THREADS") != nullptr) nmt::set_threads(0);  // 0: NMT_THREADS' count
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
