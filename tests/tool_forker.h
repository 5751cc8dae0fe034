// Runs the tools (nmt-train, nmt-translate, nmt-align, nmt-serve) for the
// tests without starting their executables. A fresh process spends about
// 0.75 s (2.2 s under the sanitizers) loading LibTorch before a tool does
// anything, and the tests run the tools some hundreds of times. So the test
// binary forks a copy of itself first thing in main(), the forker, which
// holds LibTorch loaded and has run nothing else; for each run it forks
// again, and the child does what `cd CWD && exec env NMT_THREADS=1 EXE ARGS
// < IN > OUT 2> ERR` does, calling the tool's entry point
// (apps/entry_points.h) in place of exec, and leaves with its code, streams
// flushed, by _exit(): neither the static destructors (LibTorch's
// unregister every operator) nor, under the sanitizers, the leak check (it
// marks every heap block) run, since in a forked copy every page written
// is copied first, and a tool run took as long forked as started. The
// sanitizers' other checks run in forked runs too; the runs that start the
// executables (run_with_env(), spawn(), NMT_TEST_EXEC=1) keep exit()'s whole
// path, leak check included.
//
// Where that could differ from the executable, run_forked() declines and
// the caller starts the executable: arguments that need a shell to read
// (anything beyond words and quotes), an environment that differs from the
// test binary's start in what libraries read when they load (OPENBLAS_*,
// OMP_*, LD_*, the sanitizers' options, ...), a run already in progress on another
// thread, or NMT_TEST_EXEC set (every tool started as an executable).
// Without NMT_TEST_FORKER=1 (a test binary run by hand) there is no forker.
#pragma once
#include <string>
#include <vector>

namespace nmt::test {

// Starts the forker when NMT_TEST_FORKER=1 (CTest sets it for the entries
// whose tests run tools: tests/CMakeLists.txt). A fork costs the process
// that makes it: every page either side writes afterwards is copied first,
// about 0.7 s a test process on a VM, paid back only where tools run. Call
// first in main(), while the process is one thread and has run nothing:
// the forker is a copy of the process as it is now. Does nothing when
// NMT_TEST_EXEC is set, when the process has other threads, or when fork()
// fails (every run then starts the executable).
void start_tool_forker();

// Why there is no forker ("NMT_TEST_EXEC is set", "the test binary had 3
// threads at its start", ...), or "" when there is one. Never fails.
std::string tool_forker_off();

// One run: the tool `exe` ("nmt-translate") with `args` as /bin/sh would
// read them, in the folder `cwd` ("": the test's), stdin from `in`, stdout
// to `out`, stderr to `err` (paths taken from `cwd`, as the shell takes them).
struct ForkedRun {
  std::string cwd, exe, args, in, out, err;
};

// Runs `run` in a forked child and waits for it; sets `exit_code` (128 +
// the signal when one ended it) and `peak_rss_mib` (the child's peak
// resident memory) and returns true. Returns false, having run nothing,
// where the run should start the executable instead (see above). Fails the
// test (exit code -1) when the forker dies during a run.
bool run_forked(const ForkedRun& run, int& exit_code, double& peak_rss_mib);

// The words /bin/sh reads from `s` (blanks between words; '...' literal;
// "..." with \\ \" \$ \` escapes; \ before any other character outside
// quotes), or false when `s` holds anything else a shell would act on:
// redirections, pipes, expansions, globs, comments. Never throws (beyond
// std::bad_alloc).
bool split_shell_words(const std::string& s, std::vector<std::string>& words);

}  // namespace nmt::test
