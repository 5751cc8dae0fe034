// BLAS kernel choice (base/blas_kernels.h): the ranking of OpenBLAS's kernel
// families, the widest family for a CPU's features, and through the real
// executables: the default environment runs the widest family this CPU and
// OpenBLAS have, a user's OPENBLAS_CORETYPE is kept (and named in one log
// line when it is narrower than the CPU runs), and when OpenBLAS picks
// narrower kernels by itself (stood in for by NMT_TEST_OPENBLAS_OWN_CHOICE)
// the tool switches it to the widest and says so in one log line.
#include "base/blas_kernels.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using nmt::CpuFeatures;
using namespace nmt::test;

TEST(BlasKernelsTest, FamiliesRankByTheirInstructions) {
  EXPECT_EQ(nmt::blas_family_rank("Prescott"), 0);
  EXPECT_LT(nmt::blas_family_rank("Prescott"), nmt::blas_family_rank("Nehalem"));
  EXPECT_LT(nmt::blas_family_rank("Nehalem"), nmt::blas_family_rank("Sandybridge"));
  EXPECT_LT(nmt::blas_family_rank("Sandybridge"), nmt::blas_family_rank("Haswell"));
  EXPECT_EQ(nmt::blas_family_rank("Haswell"), nmt::blas_family_rank("Zen"));
  EXPECT_LT(nmt::blas_family_rank("Haswell"), nmt::blas_family_rank("SkylakeX"));
  EXPECT_LT(nmt::blas_family_rank("SkylakeX"), nmt::blas_family_rank("Cooperlake"));
  EXPECT_LT(nmt::blas_family_rank("Cooperlake"), nmt::blas_family_rank("SapphireRapids"));
  EXPECT_EQ(nmt::blas_family_rank("cooperlake"), nmt::blas_family_rank("Cooperlake")) << "names match in any case";
  EXPECT_EQ(nmt::blas_family_rank("NoSuchCore"), -1);
}

TEST(BlasKernelsTest, BestFamilyIsTheWidestTheCpuAndTheLibraryHave) {
  const auto all = [](const std::string&) { return true; };
  const std::set<std::string> debian12 = {"Cooperlake", "SkylakeX", "Haswell", "Sandybridge", "Nehalem"};
  const auto without_sapphire = [&](const std::string& f) { return debian12.count(f) > 0; };
  CpuFeatures cpu;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "") << "no SSE4.2: nothing better than OpenBLAS's own choice";
  cpu.sse42 = true;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "Nehalem");
  cpu.avx = true;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "Sandybridge");
  cpu.avx2 = true;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "Haswell");
  cpu.avx512 = true;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "SkylakeX");
  cpu.avx512_bf16 = true;
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "Cooperlake");
  cpu.amx = true;  // the Intel Xeon of the trial: AMX, but OpenBLAS 0.3.21 has no Sapphire Rapids kernels
  EXPECT_EQ(nmt::best_blas_family(cpu, all), "SapphireRapids");
  EXPECT_EQ(nmt::best_blas_family(cpu, without_sapphire), "Cooperlake");
  EXPECT_EQ(nmt::best_blas_family(cpu, [](const std::string& f) { return f == "Haswell"; }), "Haswell");
}

TEST(BlasKernelsTest, DetectedFeaturesAreConsistent) {
  const CpuFeatures f = CpuFeatures::detect();
  EXPECT_TRUE(!f.avx512_bf16 || f.avx512);
  EXPECT_TRUE(!f.avx512 || f.avx2);
  EXPECT_TRUE(!f.avx2 || f.avx);
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(f.avx2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  EXPECT_EQ(f.avx512, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512cd"));
#endif
}

// `exe --version` with `env` (assignments and -u NAME) in front, nothing of
// the test's own kernel settings inherited.
Result version_with(const std::string& env, const std::string& dir) {
  return run_with_env("env -u OPENBLAS_CORETYPE -u NMT_OPENBLAS_CHOICE " + env, "nmt-translate", "--version", dir);
}

// The kernel family and how it was chosen, from --version's BLAS line
// ("BLAS: OpenBLAS 0.3.21 (OpenMP, Cooperlake kernels, OpenBLAS's own choice)").
std::pair<std::string, std::string> family_and_how(const std::string& version) {
  const size_t line = version.find("BLAS: OpenBLAS");
  if (line == std::string::npos) return {"", ""};
  const size_t end = version.find('\n', line);
  const std::string s = version.substr(line, end - line);
  const size_t k = s.find(" kernels, ");
  const size_t start = s.rfind(", ", k);
  if (k == std::string::npos || start == std::string::npos) return {"", ""};
  return {s.substr(start + 2, k - start - 2), s.substr(k + 10, s.size() - k - 11)};
}

class BlasChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    best_ = nmt::best_blas_family(CpuFeatures::detect(), [](const std::string&) { return true; });
    const auto r = version_with("", temp_dir("blas_probe"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (family_and_how(r.out).first.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS:\n" << r.out;
  }
  std::string best_;  // the widest family for this CPU (if the library had every family)
};

TEST_F(BlasChoiceTest, DefaultEnvironmentRunsTheWidestFamilyThereIs) {
  const auto r = version_with("", temp_dir("blas_default"));
  const auto [family, how] = family_and_how(r.out);
  ASSERT_GE(nmt::blas_family_rank(family), 0) << r.out;
  // Either OpenBLAS's own pick was already as wide as this OpenBLAS allows, or nmt chose.
  EXPECT_TRUE(how == "OpenBLAS's own choice" || how.rfind("chosen by nmt: OpenBLAS picked ", 0) == 0) << r.out;
  const auto sapphire_or_lower = [&](const std::string& f) { return f != "SapphireRapids" || family == f; };
  const std::string want = nmt::best_blas_family(CpuFeatures::detect(), sapphire_or_lower);
  if (!want.empty()) {
    EXPECT_GE(nmt::blas_family_rank(family), nmt::blas_family_rank(want)) << r.out;
  }
}

TEST_F(BlasChoiceTest, AUsersCoretypeIsKept) {
  const auto r = version_with("OPENBLAS_CORETYPE=Prescott", temp_dir("blas_user"));
  EXPECT_EQ(family_and_how(r.out), std::make_pair(std::string("Prescott"), std::string("set by OPENBLAS_CORETYPE")))
      << r.out;
}

// The "BLAS: " lines a real run (nmt-translate --evaluate) logs with `env` in front.
std::vector<std::string> blas_lines_with(const std::string& env, const std::string& dir) {
  write_lines(dir + "/ref.txt", {"a small test"});
  write_lines(dir + "/hyp.txt", {"a small test"});
  const auto r = run_with_env("env -u OPENBLAS_CORETYPE -u NMT_OPENBLAS_CHOICE " + env, "nmt-translate",
                              "--evaluate --reference " + quote(dir + "/ref.txt"), dir, dir + "/hyp.txt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;
  for (const auto& l : r.err_lines)
    if (contains(l, "BLAS: ")) lines.push_back(l);
  return lines;
}

TEST_F(BlasChoiceTest, ANarrowUsersCoretypeIsKeptAndNamedOnce) {
  if (best_.empty() || best_ == "Nehalem") GTEST_SKIP() << "no family wider than SSE4.2 on this CPU";
  // The family nmt runs by default is the widest this CPU and OpenBLAS have.
  const std::string widest = family_and_how(version_with("", temp_dir("blas_widest")).out).first;
  const auto narrow = blas_lines_with("OPENBLAS_CORETYPE=Prescott", temp_dir("blas_user_narrow"));
  ASSERT_EQ(narrow.size(), 1u) << "one line names the wider kernels";
  EXPECT_TRUE(contains(narrow[0], "OPENBLAS_CORETYPE=Prescott keeps OpenBLAS ")) << narrow[0];
  EXPECT_TRUE(contains(narrow[0], " on its Prescott kernels; this CPU (" + CpuFeatures::detect().describe() +
                                      ") can run its wider " + widest + " kernels"))
      << narrow[0];
  EXPECT_TRUE(blas_lines_with("OPENBLAS_CORETYPE=" + widest, temp_dir("blas_user_widest")).empty())
      << "the widest family chosen by the user needs no word";
}

TEST_F(BlasChoiceTest, ANarrowOwnChoiceIsReplacedAndLoggedOnce) {
  if (best_.empty() || best_ == "Nehalem") GTEST_SKIP() << "no family wider than SSE4.2 on this CPU";
  const auto dir = temp_dir("blas_narrow");
  const auto v = version_with("NMT_TEST_OPENBLAS_OWN_CHOICE=Prescott", dir);
  const auto [family, how] = family_and_how(v.out);
  EXPECT_GT(nmt::blas_family_rank(family), nmt::blas_family_rank("Nehalem")) << v.out;
  EXPECT_EQ(how, "chosen by nmt: OpenBLAS picked Prescott on this CPU (" + CpuFeatures::detect().describe() + ")")
      << v.out;
  // A real run logs the choice once, and reads its input (stdin, arguments) as usual.
  write_lines(dir + "/ref.txt", {"a small test"});
  write_lines(dir + "/hyp.txt", {"a small test"});
  const auto r = run_with_env("env -u OPENBLAS_CORETYPE -u NMT_OPENBLAS_CHOICE NMT_TEST_OPENBLAS_OWN_CHOICE=Prescott",
                              "nmt-translate", "--evaluate --reference " + quote(dir + "/ref.txt"), dir, dir + "/hyp.txt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  int lines = 0;
  for (const auto& l : r.err_lines)
    if (contains(l, "BLAS: ")) {
      ++lines;
      EXPECT_TRUE(contains(l, "picked its Prescott kernels on this CPU")) << l;
      EXPECT_TRUE(contains(l, "nmt runs its " + family + " kernels instead")) << l;
    }
  EXPECT_EQ(lines, 1) << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "chrF2 = 100.00")) << "the run read stdin and the arguments:\n" << r.err;
}

}  // namespace
