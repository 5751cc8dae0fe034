// The Trainer behind train(): private to trainer.cc (the loop),
// trainer_prepare.cc (everything before the first step) and
// trainer_checkpoints.cc (validation, checkpoints, the end of the run).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/options.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "model/model.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "train/distributed.h"
#include "train/graphed_step.h"
#include "train/progress.h"
#include "train/run_folder.h"
#include "train/schedule.h"
#include "train/smoothing.h"
#include "train/teachers.h"
#include "train/trainer.h"
#include "train/losses.h"
#include "train/training_data.h"
#include "train/validation.h"

namespace nmt {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Each parameter once (a tensor registered in two modules appears twice in parameters()).
inline std::vector<torch::Tensor> distinct_parameters(const torch::nn::Module& model) {
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters())
    if (std::none_of(params.begin(), params.end(), [&](const torch::Tensor& q) { return q.is_same(p); }))
      params.push_back(p);
  return params;
}

// Sets the learning rate of every parameter group.
inline void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

class Trainer {
 public:
  Trainer(const TrainOptions& opt, const TokenizerOptions& tok, ModelOptions model, const std::atomic<bool>* stop)
      : opt_(opt), tok_opt_(tok), model_opt_(model), stop_(stop) {}
  Trainer(const Trainer&) = delete;  // sampler_ points into this object
  Trainer& operator=(const Trainer&) = delete;

  TrainResult run();

 private:
  // prepare() and its parts, in the order it calls them.
  void prepare();
  void validate_options();
  void join_group();
  bool claim_output();  // rank 0 takes the folder; every rank learns whether it resumes
  void init_model(bool resuming, const ParallelCorpus& train);
  // On resume: refuses tokenizer options that contradict the checkpoint's
  // vocabularies, and keeps the run's own in config.toml.
  void check_tokenizer_options(const LoadedModel& loaded);
  void make_tokenizers(const ParallelCorpus& train);
  void warn_small_vocabulary(const char* side, const Tokenizer& tok, size_t sentences) const;
  void share_from_main(bool resuming);  // every rank gets rank 0's tokenizers, weights and (on resume) file
  // --kd-teachers: loads the teachers (after the tokenizers, which they must
  // share); throws nmt::Error as Teachers' constructor.
  void init_teachers();
  void init_data(ParallelCorpus train, ParallelCorpus valid);
  void init_optimizer(bool resuming);
  // --exponential-smoothing (rank 0): the averages, from the model's
  // weights; on resume those are the checkpoint's averages and the weights
  // training steps come from its state, which the other ranks and a run
  // without smoothing go on from. Throws nmt::Error naming the checkpoint
  // when its stepped weights lack a parameter.
  void init_smoothing();
  // The weights training steps, by parameter name (TrainState::stepped_weights).
  // Only with smoothing on (smoothing_ not null); never throws.
  std::vector<std::pair<std::string, torch::Tensor>> named_stepped_weights() const;
  // On resume, after the training state is loaded: a --learning-rate that
  // differs from the run's config.toml replaces the checkpoint's rate.
  void resume_learning_rate();
  std::string config_header() const;  // config.toml's opening comment

  // The loop's parts.
  std::optional<StopReason> stop_before_step();
  // One optimizer step: forward and backward on this rank's batch (none:
  // `indices` null), the gradients summed over ranks and clipped, and the
  // optimizer's step when loss and gradient were finite, as the step's
  // figures then say (otherwise the parameters are left as they were).
  StepStats train_step(const std::vector<int64_t>* indices, std::vector<torch::Tensor>& params);
  // The summed loss of one batch (or part) and, detached, its value without
  // the guided alignment term (NaN when that term is not finite).
  std::pair<torch::Tensor, torch::Tensor> batch_loss(const Batch& batch);
  // The tensors of training batch `indices` (segmentations sampled anew with --spm-alpha).
  Batch make_training_batch(const std::vector<int64_t>& indices) const;
  void skip_bad_step(TrainResult* result);
  void log_progress(Progress* progress);
  bool validate_everywhere();  // returns true when early stopping triggers
  bool validate_and_save();
  void write_average(TrainResult* result);  // --average N
  void finish(TrainResult* result, const Progress& progress);
  std::string next_steps(const TrainResult& result) const;  // the end of the final log line

  ValidResult validate_model() {
    return validate(model_, src_tok_, tgt_tok_, valid_, plan_options(), opt_.valid_batch_sentences, valid_bleu(),
                    device_);
  }
  BleuOptions valid_bleu() const { return {opt_.valid_bleu_lowercase, to_string(opt_.valid_bleu_tokenize)}; }
  void save(const std::string& name);
  // The generators that dropout and data order draw on, into state_ and back:
  // the CPU's, and the training device's where it has its own (CUDA), so that
  // a resumed run draws what an uninterrupted one would have.
  void capture_rng();
  void restore_rng();
  BatchPlanOptions plan_options() const { return {opt_.batch_tokens, opt_.batch_sentences}; }
  double elapsed() const { return elapsed0_ + seconds_since(t0_); }
  // The epoch of the newest step: at an epoch's end state_.epoch already names the next one.
  int64_t step_epoch() const { return state_.batch_in_epoch == 0 && state_.epoch > 1 ? state_.epoch - 1 : state_.epoch; }
  bool stop_requested() const { return stop_ && stop_->load(); }
  bool is_main() const { return !comm_ || comm_->rank() == 0; }  // rank 0 logs, validates and writes files
  int64_t rank() const { return comm_ ? comm_->rank() : 0; }
  int64_t world() const { return comm_ ? comm_->world_size() : 1; }

  TrainOptions opt_;
  TokenizerOptions tok_opt_;
  ModelOptions model_opt_;
  const std::atomic<bool>* stop_;

  int threads_ = 1;
  int64_t parts_wanted_ = 0;  // --batch-parts, or 1 where parts would not be reproducible (prepare())
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ThreadGovernor> governor_;  // CPU training without --fixed-threads
  std::unique_ptr<Communicator> comm_;  // null when training as one process
  RunFolder folder_;                    // rank 0 only
  std::string resume_path_;             // the checkpoint resumed from (a local copy on ranks > 0)
  Tokenizer src_tok_, tgt_tok_;
  Seq2Seq model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<GraphedTrainStep> graphed_;  // --cuda-graphs: every step through it
  std::unique_ptr<WeightSmoothing> smoothing_;  // --exponential-smoothing; null when off
  Teachers teachers_;                           // --kd-teachers; empty when off
  std::vector<Example> train_;
  std::vector<std::pair<std::string, std::string>> train_text_;  // train_'s text, kept for --spm-alpha
  SegmentationSampler sampler_;
  ValidationSet valid_;
  std::vector<std::vector<int64_t>> batches_;
  TrainState state_;
  int64_t total_steps_ = 0;             // for the ETA
  Clock::time_point t0_ = Clock::now();
  double elapsed0_ = 0;                 // elapsed seconds of the run before this process (resume)
  int64_t saved_step_ = 0;              // the step last.ckpt holds
  int64_t bad_in_a_row_ = 0;            // consecutive non-finite steps
  double average_score_ = std::numeric_limits<double>::quiet_NaN();  // average.ckpt's figure, higher is better
  std::string started_in_;              // the current folder at the start (checkpoints' meta)
};

}  // namespace nmt
