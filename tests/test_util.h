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

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}
namespace nmt {
class Seq2Seq;
struct Hypothesis;
class Translator;
struct TrainState;
}

namespace nmt::test {

// A fresh empty folder under the system temp dir, removed at exit.
std::string temp_dir(const std::string& tag);

// Removes `path` and everything under it (symbolic links themselves, never
// what they point to); a path that does not exist is no error. Walks the tree
// with POSIX nftw rather than std::filesystem::remove_all: a PyTorch install's
// libtorch exports its own copy of remove_all, which the tests' calls bound
// to on a GPU host and which crashed. Returns false if anything stayed.
bool remove_tree(const std::string& path);

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

// Four toy pairs of clearly different lengths (toy_examples()), so a batch of them is padded.
std::vector<Example> padded_examples();

// The indices of every pair of padded_examples(), for make_batch().
std::vector<int64_t> padded_indices();

// A model of `opt` in evaluation mode, its weights drawn after
// torch::manual_seed(seed), so the same seed gives the same weights.
Seq2Seq seeded_model(const ModelOptions& opt, uint64_t seed = 1);

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

// Writes `dir`/twin-SEED.ckpt, a model of the trained toy's shape and
// tokenizers (the same on both sides, so it can also stand in for a
// right-to-left or a channel model) with random weights drawn under `seed`,
// and returns its path. Throws nmt::Error as save_checkpoint() does.
std::string random_toy_twin(const std::string& dir, uint64_t seed);

// Writes a checkpoint of format 1 or 2 (`version`) as nmt wrote them before
// format 3: a LibTorch archive ("config", "src_spm", "tgt_spm", "model/...",
// "meta" and, with `optimizer` and `state`, "optimizer/..." and "state/...")
// behind the old header. What the format 1 and 2 readers are tested on;
// no check of the weights (NaN is written as given).
void write_old_checkpoint(const std::string& path, nmt::Seq2Seq& model, const nmt::Tokenizer& src_tok,
                          const nmt::Tokenizer& tgt_tok, torch::optim::Optimizer* optimizer = nullptr,
                          const nmt::TrainState* state = nullptr, int version = 2);

// An executable's exit code and output.
struct Result {
  int exit_code = -1;
  std::string out, err;
  std::vector<std::string> err_lines;  // non-empty stderr lines
  double peak_rss_mib = 0;             // the executable's peak resident memory
};

// Stores `err` as `r`'s stderr and its non-empty lines as r.err_lines.
void set_err(Result& r, std::string err);

// The stderr lines logged at warning level or above ("[warning]", "[error]",
// "[critical]"): what a run says beyond its informational lines, whose number
// depends on the machine (the BLAS kernel notice appears on some CPUs only).
std::vector<std::string> warnings_of(const Result& r);

// Temporary files ("*.tmp.PID") anywhere under `dir`, as paths relative to
// it; none when `dir` does not exist.
std::vector<std::string> temporary_files(const std::string& dir);

// `s` quoted for /bin/sh.
std::string quote(const std::string& s);

// The exit code a wait status (waitpid(), wait4()) gives: the process's own,
// or 128 + the signal that ended it, as a shell reports it.
int exit_code_of(int wait_status);

// Runs the built executable `exe` (e.g. "nmt-train") with `args` (already
// quoted where needed) and NMT_THREADS=1, stdout and stderr captured in `dir`.
Result run(const std::string& exe, const std::string& args, const std::string& dir,
           const std::string& stdin_file = "/dev/null");
// run() with `env` in front of the command: "env -u NAME NAME2=value".
Result run_with_env(const std::string& env, const std::string& exe, const std::string& args, const std::string& dir,
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

// Rounding-error bounds. Two correct results of one function from different
// kernels (sums in another order or vector width, another path through the
// model) agree only to rounding, and how closely depends on the CPU and the
// kernels it runs (OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY). These bounds are
// derived from the computation (accumulation lengths, magnitudes, the unit
// roundoff u), so a comparison holds on every CPU, yet a wrong index, term or
// weight, whose error is of the order of the terms themselves, exceeds them.

// The unit roundoff u of a tensor's dtype: 2^-24 float, 2^-53 double, 2^-8 bfloat16, 2^-11 half.
double unit_roundoff(const at::Tensor& t);

// gamma_n = n u / (1 - n u): a sum of n terms in any order (a dot product of
// length n, with or without FMA) is within gamma_n sum |terms| of the exact
// sum (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1).
double gamma(int64_t n, double u);

// Elementwise bound on the difference between two results of x w_t + bias
// (x [.., K], w_t [K, N] or [.., K, N] batched, bias broadcasting to the
// result or undefined), each summing the K products and the bias in its own
// order: each is within gamma_{K+1} (|x| |w_t| + |bias|) of the exact value,
// so 2 gamma_{K+1} (|x| |w_t| + |bias|), computed in double; u of x's dtype.
at::Tensor dot_error_bound(const at::Tensor& x, const at::Tensor& w_t, const at::Tensor& bias);

// For results of a whole model that two paths compute (teacher forcing and
// search steps, a batch and its sentences alone, the optimized and the plain
// decoder), where an elementwise worst-case bound (depth times 2 gamma_K of
// each layer's magnitude) would be of the order of the results themselves:
// the probabilistic bound of Higham and Mary (SIAM J. Sci. Comput. 41(5),
// 2019). With rounding errors taken as independent and of mean 0, a sum of n
// terms is within lambda sqrt(n) u of their magnitude, except with
// probability about exp(-lambda^2 / 2). A result passes `depth` layers (see
// model_depth()) of K products each, and the layers do not amplify a
// difference (tanh, sigmoid, softmax and the GRU's convex update have slopes
// of at most 1), so two paths differ by at most
//   2 lambda sqrt(depth K) u scale,  lambda = kModelBoundLambda = 8
// (a larger difference has a probability of about 1e-14), with K the longest
// accumulation (the widest weight's inputs and its bias), scale the largest
// row sum of |W| times the bound on its inputs (max(1, largest |embedding|):
// every other input is a tanh, a GRU state or an average of those) plus the
// largest |bias|, and u of the model's parameters' dtype. A wrong weight,
// index or term moves results by about |w| |x|: 10^2 to 10^3 times this in
// float, over 10^10 times in double.
constexpr double kModelBoundLambda = 8;
double model_rounding_bound(torch::nn::Module& model, int64_t depth);

// The same bound for a parameter's gradient, relative to its largest
// |element|: the backward passes the layers again in reverse (2 depth), its
// products are the forward's transposed, and each gradient also sums over
// `positions` (batch rows times steps); the scale counts at least 1.
double gradient_rounding_bound(torch::nn::Module& model, int64_t depth, int64_t positions);

// The depth model_rounding_bound() needs for what a decoder produces at step
// T (logits, attention) of a sentence of S source pieces: the encoder's S
// steps in each direction and its output layer, then per decoder step the
// GRU(s), the attention (query, scores, softmax, context) and the output
// layers: S + 1 + 6 T.
int64_t model_depth(int64_t S, int64_t T);

// Bound on the difference between two paths' scores of one hypothesis (the
// log-probabilities of its T pieces, EOS included, summed) from a source of
// S pieces: a log-softmax moves by at most twice what its logits move
// (model_rounding_bound()), and each side sums T of them, 2 gamma_T |score|.
double score_rounding_bound(torch::nn::Module& model, int64_t S, int64_t T, double score);

// The smallest margin, over the steps of a greedy hypothesis `ids` for the
// source `src` (pieces ending in EOS), between the log-probability of the
// piece chosen and the largest other, teacher-forced through the mean of
// `models`' log-softmax (computed in double from their float logits); the
// step that chose EOS counts too when `eos_chosen` (not when a length cap
// forced it). Two paths whose logits differ by at most L choose the same
// pieces wherever this margin exceeds 2 L (each path's margin is within L of
// the exact one, the teacher-forced one as well); below that a near tie may
// go either way, so the comparison of their outputs has to leave it out. (A
// hypothesis that search ended with PAD rather than EOS, which an untrained
// model can choose, has a negative margin here and is left out too.)
double greedy_margin(const std::vector<nmt::Seq2Seq>& models, const std::vector<int64_t>& src,
                     const std::vector<int64_t>& ids, bool eos_chosen);

// Greedy hypotheses of one source from two paths whose logits differ by at
// most `logits_bound`: where greedy_margin() of `want` exceeds twice that,
// the same pieces, scores within 2 T logits_bound + 2 gamma_T |score| (T
// pieces with EOS) and attention within logits_bound; a closer call, where a
// near tie may go either way on another CPU, is not compared (`compared`
// counts the others).
::testing::AssertionResult same_greedy_hypothesis(const std::vector<nmt::Seq2Seq>& models,
                                                  const std::vector<int64_t>& src, const nmt::Hypothesis& want,
                                                  const nmt::Hypothesis& got, bool eos_chosen, double logits_bound,
                                                  int* compared);

// Whether the best greedy hypothesis `h` that `tr` found for `line` (options
// `opt`, one model) rests on a near tie: a step where greedy_margin() is at
// most twice model_rounding_bound() for its length, so that another batch
// shape, kernel or CPU may choose another piece there. Tests that compare the
// text of two paths (a batch against one sentence alone, windows against the
// whole input) leave such lines out. Lines that are empty are never ties.
bool greedy_near_tie(nmt::Translator& tr, const std::string& line, const nmt::Hypothesis& h,
                     const nmt::SearchOptions& opt);

// Whether |actual - expected| <= bound everywhere (bound broadcasts to them;
// either side may be float or double); when not, names the worst element:
// its index, both values, the bound and their ratio. Records the largest
// ratio |actual - expected| / bound of the running test as its property
// "max_bound_ratio" (shown by --gtest_output=xml), to tell how close a CPU
// and its kernels come to the bounds.
::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, const at::Tensor& bound);
::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, double bound);
::testing::AssertionResult within(double actual, double expected, double bound);

}  // namespace nmt::test
