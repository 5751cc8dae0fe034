// Training: data preparation (validation, tokenizer training, encoding),
// the optimisation loop with validation, learning-rate schedule, early
// stopping, progress logs, a metrics file and atomic checkpoints.
#pragma once
#include <atomic>
#include <string>

#include "base/options.h"

namespace nmt {

// Why a training run ended.
enum class StopReason { kMaxEpochs, kMaxSteps, kMaxMinutes, kEarlyStopping, kInterrupted };
// The name the log uses: "max_epochs", "max_steps", "max_minutes",
// "early_stopping" or "interrupted".
const char* to_string(StopReason r);

struct TrainResult {
  int64_t steps = 0;            // optimizer steps at the end
  int64_t epochs = 0;           // epochs started
  double best_metric = 0;       // best validation figure (as reported: loss, ppl, BLEU or chrF)
  double tokens_per_second = 0; // target tokens per second of training (excluding validation)
  StopReason stop_reason = StopReason::kMaxEpochs;
  int64_t skipped_steps = 0;    // batches skipped for a NaN/Inf loss or gradient
  int64_t peak_rss_mb = 0;      // peak resident memory of the process
  double average_metric = 0;    // validation figure of average.ckpt (with --average and validation data)
};

// Trains a model as `opt` says, writing to opt.output_dir: last.ckpt,
// best.ckpt, step-N.ckpt (the newest keep_checkpoints), average.ckpt (with
// opt.average), src.spm.model, tgt.spm.model and metrics.jsonl. `model` gives the architecture (its vocab
// sizes are filled from the tokenizers); on resume the checkpoint's own
// architecture is used. When `stop` becomes true, training writes last.ckpt
// and returns. A batch whose loss or gradient is NaN/Inf is skipped and
// counted; max_bad_steps such batches in a row stop training with an error,
// leaving the last good checkpoint in place. Throws nmt::Error for bad data,
// options or files.
TrainResult train(const TrainOptions& opt, const TokenizerOptions& tok, ModelOptions model,
                  const std::atomic<bool>* stop = nullptr);

}  // namespace nmt
