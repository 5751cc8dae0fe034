// The training loop: steps until a budget, early stopping or a signal ends
// the run, validating and saving on the way (prepare() in
// trainer_prepare.cc runs first; validation, checkpoints and the end of the
// run are in trainer_checkpoints.cc). The pieces it calls live beside it:
// training_data.h (reading, encoding, sampled segmentations), validation.h,
// schedule.h (best / decay / stop), progress.h (step figures, throughput),
// run_folder.h (the output folder, step checkpoints, metrics.jsonl).
#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <numeric>

#include "base/error.h"
#include "base/format.h"
#include "base/json.h"
#include "model/mixed_precision.h"
#include "train/batch_parts.h"
#include "train/flat_adam.h"
#include "train/gradients.h"
#include "train/trainer_impl.h"

namespace nmt {
namespace {

// Leaves every parameter without a gradient (the next backward writes them anew).
void clear_gradients(const std::vector<torch::Tensor>& params) {
  for (auto p : params) p.mutable_grad().reset();
}

}  // namespace

TrainResult Trainer::run() {
  try {
    prepare();
  } catch (...) {
    folder_.undo_claim();
    throw;
  }
  TrainResult result;
  Progress progress;
  auto params = distinct_parameters(*model_);
  const int64_t per_epoch = static_cast<int64_t>(batches_.size());
  const auto due = [&](int64_t every) { return every > 0 && state_.step % every == 0; };
  model_->train();
  std::optional<StopReason> stop;
  while (!stop) {
    if (state_.epoch > opt_.max_epochs) { stop = StopReason::kMaxEpochs; break; }
    const auto order = epoch_order(per_epoch, static_cast<uint64_t>(state_.seed), state_.epoch);
    while (!stop && state_.batch_in_epoch < per_epoch) {
      if ((stop = stop_before_step())) break;
      const auto step_t0 = Clock::now();
      // With N ranks a step takes N batches of the epoch's order, rank r the r-th.
      const int64_t mine = state_.batch_in_epoch + rank();
      const StepStats stats = train_step(mine < per_epoch ? &batches_[order[mine]] : nullptr, params);
      state_.batch_in_epoch = std::min(per_epoch, state_.batch_in_epoch + world());
      if (!stats.finite) { skip_bad_step(&result); continue; }
      bad_in_a_row_ = 0;
      ++state_.step;
      if (smoothing_) smoothing_->update(state_.step);
      if (governor_) governor_->tick();
      progress.add(stats, seconds_since(step_t0));
      if (due(opt_.log_every) && is_main()) log_progress(&progress);
      if (due(opt_.valid_every) && validate_everywhere()) stop = StopReason::kEarlyStopping;
    }
    if (stop) break;
    ++state_.epoch;  // end of epoch: decay (--lr-decay-start), validate unless this step just did
    state_.batch_in_epoch = 0;
    if (decay_at_epoch_end(opt_, state_.epoch - 1, &state_)) {
      set_learning_rate(*optimizer_, state_.learning_rate);
      if (is_main()) spdlog::info("end of epoch {}: learning rate now {:.3g}", state_.epoch - 1, state_.learning_rate);
    }
    if (!due(opt_.valid_every) && validate_everywhere()) stop = StopReason::kEarlyStopping;
  }
  result.stop_reason = *stop;
  if (graphed_)
    spdlog::info("--cuda-graphs: {}, {} replayed from a CUDA graph", counted(static_cast<int64_t>(graphed_->shapes()), "batch shape"),
                 graphed_->captured());
  finish(&result, progress);
  return result;
}

std::optional<StopReason> Trainer::stop_before_step() {
  if (opt_.max_steps > 0 && state_.step >= opt_.max_steps) return StopReason::kMaxSteps;
  double stops[2] = {stop_requested() ? 1.0 : 0.0, opt_.max_minutes > 0 && elapsed() >= opt_.max_minutes * 60 ? 1.0 : 0.0};
  if (comm_) {  // a signal or the clock on any rank stops all of them
    auto t = torch::tensor({stops[0], stops[1]}, torch::kDouble);
    comm_->all_reduce_sum({t});
    stops[0] = t[0].item<double>();
    stops[1] = t[1].item<double>();
  }
  if (stops[0] > 0) return StopReason::kInterrupted;
  if (stops[1] > 0) return StopReason::kMaxMinutes;
  return std::nullopt;
}

// The loss of `batch` (summed over its target tokens, plus the guided
// alignment term) and, detached, its value without that term; the value is
// NaN when the term is not finite (0 * Inf and 0 * NaN are NaN), so such a
// step is skipped. With --r-drop the batch runs twice in one pass (twice())
// and the loss is consistency_loss()'s, its value the two runs' mean
// cross-entropy; with --kd-teachers it is distillation_loss()'s, its value
// the reference's cross-entropy. Nothing here waits for the device.
std::pair<torch::Tensor, torch::Tensor> Trainer::batch_loss(const Batch& batch) {
  const bool r_drop = opt_.r_drop > 0;
  const Batch doubled = r_drop ? twice(batch) : Batch();
  const Batch& in = r_drop ? doubled : batch;  // [B or 2B, ...]
  torch::Tensor logits, alpha;  // [B or 2B, T, V]; [B or 2B, T, S] the alignment guided alignment trains
  {
    const Bf16Autocast bf16(opt_.bf16 && device_.is_cpu());  // products in bfloat16 (this thread's forward)
    if (in.guide.defined())
      std::tie(logits, alpha) = model_->forward_aligned(in.src, in.src_len, in.tgt_in, in.tgt_out);
    else
      logits = model_->forward(in.src, in.src_len, in.tgt_in);
  }
  logits = logits.to(torch::kFloat);  // the loss in float (a no-op unless --bf16)
  torch::Tensor teacher_logp;         // [B, T, V] --kd-teachers' distribution
  if (!teachers_.empty()) {
    const Bf16Autocast bf16(opt_.bf16 && device_.is_cpu());
    teacher_logp = teachers_.log_probs(batch);
  }
  auto [loss, value] = teacher_logp.defined()  // summed over target tokens
                           ? distillation_loss(logits, batch.tgt_out, opt_.label_smoothing, teacher_logp, opt_.kd_weight)
                           : training_loss(logits, batch.tgt_out, opt_.label_smoothing, opt_.r_drop);
  if (batch.guide.defined()) {  // cross-entropy of the alignment (head or attention) against the guided rows
    alpha = alpha.narrow(0, 0, batch.size()).to(torch::kFloat);  // the first run's, under R-Drop
    auto guided = guided_alignment_loss(alpha, batch.guide);
    loss = loss + opt_.guided_alignment_weight * guided;
    value = value + guided.detach() * 0.0;
  }
  return {loss, value};
}

// The loss is summed over every rank's batch and divided by their target
// tokens, so a step equals one step on the N batches joined. On the CPU the
// batch runs as parts side by side (batch_parts.h), with the same sums.
// Alone (no other ranks) with Adam, the step never waits for the device:
// clipping, the finiteness test and FlatAdam's step are queued after the
// backward, and the step's figures (loss and gradient norm) are read once,
// at its end; a non-finite loss or norm leaves the parameters as they were.
StepStats Trainer::train_step(const std::vector<int64_t>* indices, std::vector<torch::Tensor>& params) {
  StepStats stats;
  if (graphed_) {  // one process: a batch every step
    const auto batch = make_training_batch(*indices);
    const auto r = graphed_->run(batch);
    stats.tokens = batch.tgt_tokens;
    stats.sentences = batch.size();
    stats.loss_sum = r.loss_sum;
    stats.finite = r.finite;
    return stats;
  }
  std::vector<torch::Tensor> losses, values;  // one per part
  if (indices != nullptr) {
    const int64_t n = static_cast<int64_t>(indices->size());
    const int64_t parts = batch_parts(parts_wanted_, threads_, n, device_);
    std::vector<Batch> batches;
    for (const auto& [begin, end] : part_ranges(n, parts))
      batches.push_back(make_training_batch({indices->begin() + begin, indices->begin() + end}).to(device_));
    losses.resize(batches.size());
    values.resize(batches.size());
    if (parts == 1) {
      std::tie(losses[0], values[0]) = batch_loss(batches[0]);
    } else {
      // Dropout per (seed, step, rank, part): the same masks on every run.
      const uint64_t seed = mix_seed(mix_seed(state_.seed, static_cast<uint64_t>(state_.step)), rank());
      run_parts(parts, threads_, seed, [&](int64_t p) { std::tie(losses[p], values[p]) = batch_loss(batches[p]); });
    }
    for (const auto& b : batches) {
      stats.tokens += b.tgt_tokens;
      stats.sentences += b.size();
    }
  }
  // [] double, the loss summed over the parts (in part order)
  const auto loss_sum = values.empty() ? torch::zeros({}, torch::kDouble) : torch::stack(values).to(torch::kDouble).sum();
  clear_gradients(params);
  if (comm_) {  // every rank's tokens, loss, sentences and verdict, before any rank's backward
    stats.loss_sum = loss_sum.item<double>();
    stats.finite = std::isfinite(stats.loss_sum);
    stats.all_reduce(comm_.get());
    if (!stats.finite) return stats;
  }
  const double scale = 1.0 / static_cast<double>(stats.tokens);
  if (losses.size() == 1) (losses[0] * scale).backward();
  else if (!losses.empty()) backward_parts(losses, scale, params, threads_);
  const double max_norm = opt_.clip_norm > 0 ? opt_.clip_norm : std::numeric_limits<double>::infinity();
  // The step's one read: the loss and the gradient norm together.
  const auto read_figures = [&](const torch::Tensor& norm) {
    const auto both = torch::stack({loss_sum.to(norm.device()), norm.to(torch::kDouble)}).cpu();
    stats.loss_sum = both[0].item<double>();
    stats.finite = std::isfinite(stats.loss_sum) && std::isfinite(both[1].item<double>());
  };
  auto* flat = dynamic_cast<FlatAdam*>(optimizer_.get());
  if (flat != nullptr && !comm_) {
    auto grads = flat->gradients();                      // [N]
    const auto norm = clip_gradient(grads, max_norm);    // [], before clipping: NaN/Inf if any gradient is
    const auto ok = torch::isfinite(loss_sum.to(norm.device())) & torch::isfinite(norm);  // [] bool
    flat->prepare();
    flat->step(grads, ok);
    read_figures(norm);
    return stats;
  }
  if (comm_) {
    std::vector<torch::Tensor> grads;
    for (auto& p : params) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
    comm_->all_reduce_sum(grads);
  }
  const auto norm = clip_gradients(params, max_norm);  // before clipping: NaN/Inf if any gradient is
  if (comm_) {
    stats.finite = std::isfinite(norm.item<double>());
  } else {
    read_figures(norm);
  }
  if (stats.finite) optimizer_->step();
  return stats;
}

Batch Trainer::make_training_batch(const std::vector<int64_t>& indices) const {
  if (opt_.spm_alpha <= 0) return make_batch(train_, indices);
  const auto sampled = sampler_.sample(train_, indices, static_cast<uint64_t>(state_.seed), state_.epoch);
  std::vector<int64_t> all(sampled.size());
  std::iota(all.begin(), all.end(), 0);
  return make_batch(sampled, all);
}

void Trainer::skip_bad_step(TrainResult* result) {
  clear_gradients(model_->parameters());
  ++result->skipped_steps;
  spdlog::warn("step {}: non-finite loss or gradient, batch skipped ({} in a row, {} in all)", state_.step + 1,
               ++bad_in_a_row_, result->skipped_steps);
  if (bad_in_a_row_ >= opt_.max_bad_steps)
    throw Error("training stopped: " + std::to_string(bad_in_a_row_) + " batches in a row had a NaN/Inf loss or "
                "gradient (lower --learning-rate or --clip-norm); the last good checkpoint is " +
                opt_.output_dir + "/last.ckpt (step " + std::to_string(saved_step_) + ")");
}

void Trainer::log_progress(Progress* progress) {
  const auto w = progress->take_window();
  const double done = static_cast<double>(state_.step) / std::max<int64_t>(total_steps_, 1);
  double eta = done > 0 ? elapsed() * (1 - done) / done : 0;
  if (opt_.max_minutes > 0) eta = std::min(eta, std::max(0.0, opt_.max_minutes * 60 - elapsed()));
  spdlog::info("epoch {} | step {}/{} | loss {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} tgt tok/s | {:.0f} sent/s | elapsed {} | eta {}",
               state_.epoch, state_.step, total_steps_, w.mean_loss, std::exp(w.mean_loss), state_.learning_rate,
               w.tokens_per_second, w.sentences_per_second, hms(elapsed()), hms(eta));
  folder_.log_metrics(JsonObject()
                          .add("type", "train")
                          .add("step", state_.step)
                          .add("epoch", state_.epoch)
                          .add("train_loss", w.mean_loss)  // label-smoothed, mean since the last train line
                          .add("train_ppl", std::exp(w.mean_loss))
                          .add("lr", state_.learning_rate)
                          .add("tgt_tokens_per_s", w.tokens_per_second)
                          .add("elapsed", elapsed()));
}

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::kMaxEpochs: return "max_epochs";
    case StopReason::kMaxSteps: return "max_steps";
    case StopReason::kMaxMinutes: return "max_minutes";
    case StopReason::kEarlyStopping: return "early_stopping";
    case StopReason::kInterrupted: return "interrupted";
  }
  return "unknown";
}

TrainResult train(const TrainOptions& opt, const TokenizerOptions& tok, ModelOptions model,
                  const std::atomic<bool>* stop) {
  return Trainer(opt, tok, model, stop).run();
}

}  // namespace nmt
