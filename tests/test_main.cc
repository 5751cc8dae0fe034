// main() of the test binary: the tool forker first (tool_forker.h), while
// the process is one thread and has run nothing, then the tests.
#include <gtest/gtest.h>

#include "tool_forker.h"

int main(int argc, char** argv) {
  nmt::test::start_tool_forker();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
