// Helpers shared by the unit tests: a tiny real model trained in seconds on
// a generated toy corpus, temp folders, file writing.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "text/batching.h"
#include "text/tokenizer.h"

namespace nmt::test {

// A fresh empty folder under the system temp dir, removed at exit.
std::string temp_dir(const std::string& tag);

// Writes `lines` (each followed by '\n') to `path`.
void write_lines(const std::string& path, const std::vector<std::string>& lines);
void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);

// A small deterministic toy parallel corpus: target = source words reversed
// with a suffix, so the model must attend in reverse order.
void toy_corpus(int n, uint64_t seed, std::vector<std::string>* src, std::vector<std::string>* tgt);

// A tokenizer trained on the toy corpus (cached per process).
const Tokenizer& toy_tokenizer();

// `pairs` (source, target text) as examples encoded by toy_tokenizer(), each
// source ending in EOS, as the corpus reader makes them.
std::vector<Example> toy_examples(const std::vector<std::pair<std::string, std::string>>& pairs);

// Tiny model sizes for tests, with vocabularies from toy_tokenizer().
ModelOptions tiny_model(AttentionType attention = AttentionType::kAdditive);

// The toy corpus written to `dir` as train.src/train.tgt (n_train pairs, seed
// 1) and valid.src/valid.tgt (n_valid pairs, seed 2).
struct ToyFiles {
  std::string train_src, train_tgt, valid_src, valid_tgt;
};
ToyFiles write_toy_corpus(const std::string& dir, int n_train, int n_valid);

// toy_tokenizer() saved as a .model file (once per process).
const std::string& toy_tokenizer_file();

// The message of the nmt::Error thrown by `f`; fails the test when none (or
// another exception) is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected nmt::Error, got another exception: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected nmt::Error, nothing was thrown";
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Path of a checkpoint of a tiny model trained briefly on the toy corpus:
// trained once per build (a few seconds) and kept in the build folder for
// the other test processes. Read it; do not write it.
const std::string& trained_toy_checkpoint();

// An executable's exit code and output.
struct Result {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines;  // non-empty stderr lines
};

// Temporary files ("*.tmp.PID") anywhere under `dir`, as paths relative to
// it; none when `dir` does not exist.
std::vector<std::string> temporary_files(const std::string& dir);

// `s` quoted for /bin/sh.
std::string quote(const std::string& s);

// Runs the built executable `exe` (e.g. "nmt-train") with `args` (already
// quoted where needed) and NMT_THREADS=1, stdout and stderr captured in `dir`.
Result run(const std::string& exe, const std::string& args, const std::string& dir,
           const std::string& stdin_file = "/dev/null");

// run() in the folder `cwd` (its relative paths are taken from there).
Result run_in(const std::string& cwd, const std::string& exe, const std::string& args, const std::string& dir);

// One element of an SVG (or any XML) document.
struct SvgElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // its character data (not its children's)
};
// The elements of `svg` in document order; fails the test when it is not
// well-formed XML (expat).
std::vector<SvgElement> svg_elements(const std::string& svg);
// The (x, y) pairs of a polyline's "points" attribute ("x1,y1 x2,y2 ...").
std::vector<std::pair<double, double>> svg_points(const std::string& points);

// Exit codes the tools document (tools/app.h), for the tests that run them.
constexpr int kExitError = 1;  // bad input or file
constexpr int kExitUsage = 2;  // bad command line, config or option value

// Asserts a clean failure: `exit_code` (1: bad input, 2: usage), exactly one
// error line containing every string of `parts`, and no crash report.
void expect_one_line_error(const Result& r, const std::vector<std::string>& parts, int exit_code = kExitError);

// Fails the test when `stderr_text` holds a sanitizer report (also caught by
// the exit code kSanitizerExitCode that scripts/sanitize.sh sets).
void expect_no_sanitizer_report(const std::string& stderr_text);
constexpr int kSanitizerExitCode = 86;

// A child process started by spawn(), its stderr in `log`.
struct Child {
  int pid = -1;
  std::string log;
};

// Starts `args` (args[0] the executable's path) with stdout to `out` and
// stderr to `log`, stdin from `in`, without waiting.
Child spawn(const std::vector<std::string>& args, const std::string& log, const std::string& out = "/dev/null",
            const std::string& in = "/dev/null");
// Waits until the child's log contains `text` (true), or it exits or `seconds` pass (false).
bool wait_for_log(const Child& c, const std::string& text, double seconds);
// Waits until `pred()` holds (true) or `seconds` pass (false), polling every millisecond.
bool wait_until(const std::function<bool()>& pred, double seconds);
// Waits for the child's exit; returns its exit code (128 + signal if killed), -1 on
// timeout (the child is then killed).
int wait_exit(const Child& c, double seconds);
// The path of a built executable ("nmt-train").
std::string bin(const std::string& exe);

}  // namespace nmt::test
