// The tool forker (tool_forker.h): the shell words it reads, the runs it
// declines, and forked runs that match the executables' output byte for byte.
#include "tool_forker.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"

namespace {
using nmt::test::ForkedRun;
using nmt::test::split_shell_words;
using Words = std::vector<std::string>;

Words words_of(const std::string& s) {
  Words w;
  EXPECT_TRUE(split_shell_words(s, w)) << s;
  return w;
}

TEST(ToolForkerTest, ReadsWordsAsTheShellDoes) {
  EXPECT_EQ(words_of("  -m a.ckpt\t--beam 5\n"), (Words{"-m", "a.ckpt", "--beam", "5"}));
  EXPECT_EQ(words_of(""), Words{});
  // quote() of the tests: single quotes, and '\'' for a quote inside.
  EXPECT_EQ(words_of(nmt::test::quote("it's a file") + " x"), (Words{"it's a file", "x"}));
  EXPECT_EQ(words_of("''"), Words{""});
  EXPECT_EQ(words_of("a'b c'd"), Words{"ab cd"});
  EXPECT_EQ(words_of(R"("a \"b\" \\ \$ \` \n")"), Words{R"(a "b" \ $ ` \n)"});
  EXPECT_EQ(words_of(R"(a\ b \' --k=v)"), (Words{"a b", "'", "--k=v"}));
  EXPECT_EQ(words_of("'a|b;c>d$e*'"), Words{"a|b;c>d$e*"});
}

TEST(ToolForkerTest, RefusesWhatOnlyAShellCouldRun) {
  for (const std::string s : {"a > out", "a 2>&1", "a | head", "a; b", "a && b", "$HOME", "\"$HOME\"", "`x`",
                              "\"`x`\"", "*.txt", "a?", "[ab]", "~/x", "# comment", "(a)", "'open", "\"open",
                              "a\\", "{a,b}", "!x"}) {
    Words w;
    EXPECT_FALSE(split_shell_words(s, w)) << s;
  }
}

// The forker runs where the test binary's start allowed it: asked for
// (NMT_TEST_FORKER=1, as CTest's entries of this suite are), and on a machine
// where the process has one thread at its start.
TEST(ToolForkerTest, IsRunningUnlessTheStartForbade) {
  const std::string off = nmt::test::tool_forker_off();
  if (std::getenv("NMT_TEST_EXEC") != nullptr || off.find("threads at its start") != std::string::npos ||
      off.find("NMT_TEST_FORKER") != std::string::npos)
    GTEST_SKIP() << "no forker: " << off;
  EXPECT_EQ(off, "");
}

// `log` with each line's time stamp ("[2026-12-02 15:58:42] ") replaced by "[time] ".
std::string without_times(const std::string& log) {
  std::string out;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    end = end == std::string::npos ? log.size() : end + 1;
    std::string line = log.substr(start, end - start);
    if (line.size() > 22 && line[0] == '[' && line[20] == ']' && line[21] == ' ') line = "[time]" + line.substr(21);
    out += line;
    start = end;
  }
  return out;
}

// A tool run forked and the same run as an executable (a run with an
// environment always starts it) write the same bytes and exit alike: runs
// that read stdin and a file, fail on a missing file, refuse an option, and
// print the version; and a forked run in another folder reads its paths
// from there.
TEST(ToolForkerTest, ForkedRunsMatchTheExecutables) {
  if (!nmt::test::tool_forker_off().empty()) GTEST_SKIP() << "no forker: " << nmt::test::tool_forker_off();
  const std::string dir = nmt::test::temp_dir("forker");
  nmt::test::write_lines(dir + "/ref.txt", {"a small dog runs .", "two men sit on a bench ."});
  nmt::test::write_lines(dir + "/hyp.txt", {"a small dog runs .", "two men sit on the bench ."});
  const std::string ref = nmt::test::quote(dir + "/ref.txt"), hyp = dir + "/hyp.txt";
  struct Case {
    std::string exe, args, in;
    int exit_code;
  };
  for (const Case& c : {Case{"nmt-translate", "--evaluate --tokenize none --reference " + ref, hyp, 0},
                        Case{"nmt-translate", "--evaluate --reference " + ref + "x", hyp, 1},
                        Case{"nmt-translate", "-m x.ckpt --beam-size 0", "/dev/null", 2},
                        Case{"nmt-align", "--version", "/dev/null", 0}}) {
    SCOPED_TRACE(c.exe + " " + c.args);
    const std::string forked = nmt::test::temp_dir("forked"), started = nmt::test::temp_dir("started");
    int code = -1;
    double rss = 0;
    ASSERT_TRUE(nmt::test::run_forked({"", c.exe, c.args, c.in, forked + "/out", forked + "/err"}, code, rss));
    const auto exec = nmt::test::run_with_env("env -u NMT_NO_SUCH_VARIABLE", c.exe, c.args, started, c.in);
    EXPECT_EQ(code, c.exit_code);
    EXPECT_EQ(exec.exit_code, c.exit_code) << exec.err;
    EXPECT_EQ(nmt::test::read_bytes(forked + "/out"), exec.out);
    EXPECT_EQ(without_times(nmt::test::read_bytes(forked + "/err")), without_times(exec.err));
    EXPECT_GT(rss, 0.0);
  }
  const auto there = nmt::test::run_in(dir, "nmt-translate", "--evaluate --tokenize none --reference ref.txt -i hyp.txt",
                                       nmt::test::temp_dir("there"));
  const auto here = nmt::test::run("nmt-translate", "--evaluate --tokenize none --reference " + ref + " -i " +
                                                        nmt::test::quote(hyp),
                                   nmt::test::temp_dir("here"));
  EXPECT_EQ(there.exit_code, 0) << there.err;
  EXPECT_FALSE(there.out.empty());
  EXPECT_EQ(there.out, here.out);
}

// Runs that could differ from the executable start it instead: arguments
// for a shell, a tool the test binary lacks, and an environment whose
// load-time variables changed since the forker was made.
TEST(ToolForkerTest, DeclinesRunsThatCouldDiffer) {
  if (!nmt::test::tool_forker_off().empty()) GTEST_SKIP() << "no forker: " << nmt::test::tool_forker_off();
  const std::string dir = nmt::test::temp_dir("forker_declines");
  int code = -1;
  double rss = 0;
  const auto run = [&](const std::string& exe, const std::string& args) {
    return nmt::test::run_forked({"", exe, args, "/dev/null", dir + "/out", dir + "/err"}, code, rss);
  };
  EXPECT_TRUE(run("nmt-train", "--version"));
  EXPECT_FALSE(run("nmt-train", "--version | cat"));
  EXPECT_FALSE(run("nmt-bench-gru", "--help"));
  ASSERT_EQ(std::getenv("OMP_NMT_TEST_PROBE"), nullptr);
  ASSERT_EQ(::setenv("OMP_NMT_TEST_PROBE", "3", 1), 0);  // read, for all the forker knows, as OpenMP loads
  EXPECT_FALSE(run("nmt-train", "--version"));
  ::unsetenv("OMP_NMT_TEST_PROBE");
  EXPECT_TRUE(run("nmt-train", "--version"));
  EXPECT_EQ(code, 0);
}

}  // namespace
