// Device names and CPU threads: the thread count fitted to the cores other
// processes leave free, and the governor that applies it; the heap policy.
#include "model/device.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "base/error.h"
#include "test_util.h"

namespace {

TEST(DeviceTest, FittedThreadsAreTheCoresOthersLeaveFree) {
  // Alone, or beside a light background load: every thread asked for.
  EXPECT_EQ(nmt::fitted_threads(2, 2, 0.0), 2);
  EXPECT_EQ(nmt::fitted_threads(2, 2, 0.25), 2);
  // One busy process on a 2-core machine, whether it got all of its core or
  // part of it (while both our threads spun): one thread.
  EXPECT_EQ(nmt::fitted_threads(2, 2, 1.0), 1);
  EXPECT_EQ(nmt::fitted_threads(2, 2, 0.5), 1);
  // Never fewer than one, never more than asked for.
  EXPECT_EQ(nmt::fitted_threads(2, 2, 5.0), 1);
  EXPECT_EQ(nmt::fitted_threads(4, 16, 3.0), 4);
  EXPECT_EQ(nmt::fitted_threads(16, 16, 3.0), 13);
  EXPECT_EQ(nmt::fitted_threads(16, 16, -1.0), 16);  // a negative estimate (clock noise) counts as none
}

// The library's at::parallel_for (batch parts, translation workers, the
// step kernels' rows) must run on LibTorch's threads: built without OpenMP it
// ran every one of them serially, and nothing else noticed.
TEST(DeviceTest, TheLibrarysParallelForRunsOnSeveralThreads) {
  nmt::set_threads(2);
  EXPECT_EQ(nmt::parallel_for_threads(2), 2);
  EXPECT_EQ(nmt::parallel_for_threads(1), 1);
  nmt::set_threads(1);
  EXPECT_EQ(nmt::parallel_for_threads(2), 1);
}

// The child of TestBinaryStartsAtNmtThreads: writes the intra-op thread
// count it started with to the file NMT_THREAD_PROBE names (disabled: it runs
// only when asked for by name).
TEST(DeviceTest, DISABLED_ThreadProbe) {
  const char* path = std::getenv("NMT_THREAD_PROBE");
  ASSERT_NE(path, nullptr);
  std::ofstream(path) << at::get_num_threads();
}

// CTest runs a test process per core at once and gives each NMT_THREADS=1:
// the test binary must start at that count, not at LibTorch's default of a
// thread per core (on a 16-core host, 16 processes of 16 spinning OpenMP
// threads held the fixed-row searches past CTest's limit). Started by hand,
// without NMT_THREADS, it keeps the default (OMP_NUM_THREADS sets it here).
TEST(DeviceTest, TestBinaryStartsAtNmtThreads) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  const std::string probe = nmt::test::temp_dir("thread-probe") + "/threads";
  auto started_with = [&](const std::string& env) {
    std::remove(probe.c_str());
    const std::string cmd = "env -u NMT_THREADS " + env + " NMT_THREAD_PROBE=" + nmt::test::quote(probe) +
                            " NMT_TEST_FORKER=0 " + nmt::test::quote(self) +
                            " --gtest_also_run_disabled_tests --gtest_filter=DeviceTest.DISABLED_ThreadProbe" +
                            " > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    int threads = -1;
    std::ifstream(probe) >> threads;
    std::remove(probe.c_str());
    return threads;
  };
  EXPECT_EQ(started_with("OMP_NUM_THREADS=3 NMT_THREADS=1"), 1);
  EXPECT_EQ(started_with("OMP_NUM_THREADS=3 NMT_THREADS=2"), 2);
  EXPECT_EQ(started_with("OMP_NUM_THREADS=3"), 3);
}

TEST(DeviceTest, TheGovernorKeepsItsThreadsWithinBoundsAndWaitsForItsInterval) {
  nmt::set_threads(2);
  {
    // Long intervals: no tick changes anything.
    nmt::ThreadGovernor slow(2, 3600.0, 3600.0);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(slow.tick(), 2);
  }
  // A zero interval re-estimates at every tick: whatever the machine's load,
  // the count stays within [1, 2].
  nmt::ThreadGovernor fast(2, 0.0);
  for (int i = 0; i < 20; ++i) {
    volatile double x = 0;
    for (int k = 0; k < 200000; ++k) x = x + k;  // some CPU time of our own between ticks
    const int n = fast.tick();
    EXPECT_GE(n, 1);
    EXPECT_LE(n, 2);
    EXPECT_EQ(fast.threads(), n);
  }
  // One thread asked for: never more.
  nmt::ThreadGovernor one(1, 0.0);
  EXPECT_EQ(one.tick(), 1);
  nmt::set_threads(1);
}

TEST(DeviceTest, UnknownDeviceNamesAreRefused) {
  EXPECT_NO_THROW(nmt::resolve_device("cpu"));
  EXPECT_THROW(nmt::resolve_device("tpu"), nmt::Error);
  if (!torch::cuda::is_available()) {
    EXPECT_THROW(nmt::resolve_device("cuda"), nmt::Error);
  }
}

#if defined(__GLIBC__)
// Tensors far above glibc's mmap threshold come from the heap once the policy
// is set; freeing one leaves the heap as large as it was, and a smaller
// tensor allocated next fits in what it freed.
TEST(DeviceTest, FreedTensorMemoryStaysInTheProcess) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc's malloc (its mallopt does nothing)";
#endif
  ASSERT_TRUE(nmt::keep_freed_memory());
  const auto hblks = mallinfo2().hblks;
  auto a = torch::ones({16 << 20});  // 64 MB
  const auto held = mallinfo2().arena;
  EXPECT_EQ(mallinfo2().hblks, hblks);  // no mapping of its own
  EXPECT_GE(held, 64u << 20);
  a = torch::Tensor();
  EXPECT_EQ(mallinfo2().arena, held);  // not trimmed
  EXPECT_GE(mallinfo2().fordblks, 64u << 20);
  auto b = torch::ones({8 << 20});     // 32 MB: served from the freed block
  EXPECT_EQ(mallinfo2().arena, held);
  EXPECT_EQ(mallinfo2().hblks, hblks);
}
#endif

}  // namespace
