// Helpers of the trainer's tests (trainer_test.cc, trainer_schedule_test.cc):
// the options of a short run on the toy corpus, and comparisons of its results.
#pragma once
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "base/options.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "test_util.h"

namespace nmt::test {

// Logging at warnings only while it lives (training runs log every step).
struct Quiet {
  Quiet() { spdlog::set_level(spdlog::level::warn); }
  ~Quiet() { spdlog::set_level(spdlog::level::info); }
};

// The options of a run on the toy corpus `f` into `out`: the loss as the
// stop metric, no early stopping, one CPU thread, seed 3.
nmt::TrainOptions base_options(const ToyFiles& f, const std::string& out);

// tiny_model() with dropout `dropout`.
nmt::ModelOptions tiny_arch(double dropout);

// The pre-trained toy tokenizer, so runs need not train SentencePiece.
nmt::TokenizerOptions toy_tok();

// The first `n` validation pairs of `f` as one batch, in `m`'s vocabularies
// (sources ending in EOS, as the trainer makes them).
nmt::Batch valid_batch(const nmt::LoadedModel& m, const ToyFiles& f, size_t n = 16);

// Trains a model of tiny_arch(0) on `f` into `out` for `steps` steps with
// tokenizer `tok` (default toy_tok()) and label smoothing `eps`, with one
// validation at the end; returns its last.ckpt.
std::string train_tiny(const ToyFiles& f, const std::string& out, int64_t steps, double eps = 0.1,
                       const nmt::TokenizerOptions* tok = nullptr);

// The lines of the file `path` (none when it cannot be read).
std::vector<std::string> read_all_lines(const std::string& path);

// The figure `key` (e.g. "bleu") of each "valid" line of the run's
// metrics.jsonl, in order (none when the file cannot be read).
std::vector<double> valid_figures(const std::string& run_dir, const std::string& key);
// valid_figures() of the validation loss (valid_nll).
inline std::vector<double> valid_losses(const std::string& run_dir) { return valid_figures(run_dir, "valid_nll"); }

// Fails the test for each parameter that is not equal in `a` and `b`
// (`what` names the comparison).
void expect_same_weights(nmt::Seq2Seq& a, nmt::Seq2Seq& b, const std::string& what);

}  // namespace nmt::test
