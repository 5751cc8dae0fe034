// The training loop: steps until a budget, early stopping or a signal ends
// the run, validating and saving on the way (prepare() in
// trainer_prepare.cc runs first). The pieces it calls live beside it:
// training_data.h (reading, encoding, sampled segmentations), validation.h,
// schedule.h (best / decay / stop), progress.h (step figures, throughput),
// run_folder.h (the output folder, step checkpoints, metrics.jsonl).
#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "base/error.h"
#include "base/format.h"
#include "base/json.h"
#include "model/mixed_precision.h"
#include "train/batch_parts.h"
#include "train/gradients.h"
#include "train/trainer_impl.h"

namespace nmt {
namespace fs = std::filesystem;
namespace {

// Each parameter once (tied weights appear twice in parameters()).
std::vector<torch::Tensor> distinct_parameters(const torch::nn::Module& model) {
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters())
    if (std::none_of(params.begin(), params.end(), [&](const torch::Tensor& q) { return q.is_same(p); }))
      params.push_back(p);
  return params;
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
      const StepStats stats = forward_backward(mine < per_epoch ? &batches_[order[mine]] : nullptr, params);
      state_.batch_in_epoch = std::min(per_epoch, state_.batch_in_epoch + world());
      if (!stats.finite) { skip_bad_step(&result); continue; }
      bad_in_a_row_ = 0;
      optimizer_->step();
      ++state_.step;
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
// step is skipped. Nothing here waits for the device.
std::pair<torch::Tensor, torch::Tensor> Trainer::batch_loss(const Batch& batch) {
  torch::Tensor logits, alpha;  // [B, T, V]; [B, T, S] the alignment guided alignment trains
  {
    const Bf16Autocast bf16(opt_.bf16 && device_.is_cpu());  // products in bfloat16 (this thread's forward)
    if (batch.guide.defined())
      std::tie(logits, alpha) = model_->forward_aligned(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out);
    else
      logits = model_->forward(batch.src, batch.src_len, batch.tgt_in);
  }
  logits = logits.to(torch::kFloat);  // the loss in float (a no-op unless --bf16)
  if (alpha.defined()) alpha = alpha.to(torch::kFloat);
  auto loss = sequence_loss(logits, batch.tgt_out, opt_.label_smoothing);  // summed over target tokens
  auto value = loss.detach();
  if (batch.guide.defined()) {  // cross-entropy of the alignment (head or attention) against the guided rows
    auto guided = guided_alignment_loss(alpha, batch.guide);
    loss = loss + opt_.guided_alignment_weight * guided;
    value = value + guided.detach() * 0.0;
  }
  return {loss, value};
}

// The loss is summed over every rank's batch and divided by their target
// tokens, so a step equals one step on the N batches joined. On the CPU the
// batch runs as parts side by side (batch_parts.h), with the same sums.
// Alone (no other ranks), the step reads the device once, at its end: the
// loss and the gradient norm together; a non-finite loss then shows as a
// non-finite norm too, and the step is skipped as before.
StepStats Trainer::forward_backward(const std::vector<int64_t>* indices, std::vector<torch::Tensor>& params) {
  StepStats stats;
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
  optimizer_->zero_grad();
  if (comm_) {  // every rank's tokens, loss, sentences and verdict, before any rank's backward
    stats.loss_sum = loss_sum.item<double>();
    stats.finite = std::isfinite(stats.loss_sum);
    stats.all_reduce(comm_.get());
    if (!stats.finite) return stats;
  }
  const double scale = 1.0 / static_cast<double>(stats.tokens);
  if (losses.size() == 1) (losses[0] * scale).backward();
  else if (!losses.empty()) backward_parts(losses, scale, params, threads_);
  if (comm_) {
    std::vector<torch::Tensor> grads;
    for (auto& p : params) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
    comm_->all_reduce_sum(grads);
  }
  // The norm before clipping: NaN/Inf if any gradient is.
  const auto norm = clip_gradients(params, opt_.clip_norm > 0 ? opt_.clip_norm : std::numeric_limits<double>::infinity());
  if (comm_) {
    stats.finite = std::isfinite(norm.item<double>());
    return stats;
  }
  const auto both = torch::stack({loss_sum.to(norm.device()), norm.to(torch::kDouble)}).cpu();  // the one read
  stats.loss_sum = both[0].item<double>();
  stats.finite = std::isfinite(stats.loss_sum) && std::isfinite(both[1].item<double>());
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
  optimizer_->zero_grad();
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

// Validation and checkpoints happen on rank 0; its verdict (early stop) and
// learning rate then reach every rank.
bool Trainer::validate_everywhere() {
  bool stop = is_main() ? validate_and_save() : false;
  if (comm_) {
    auto verdict = torch::tensor({stop ? 1.0 : 0.0, state_.learning_rate}, torch::kDouble);
    comm_->broadcast({verdict});
    stop = verdict[0].item<double>() != 0;
    if (state_.learning_rate != verdict[1].item<double>()) {
      state_.learning_rate = verdict[1].item<double>();
      set_learning_rate(*optimizer_, state_.learning_rate);
    }
  }
  return stop;
}

// Validates (when there is validation data), feeds the schedule, and writes
// best.ckpt (on a new best), last.ckpt and step-N.ckpt.
bool Trainer::validate_and_save() {
  state_.elapsed_seconds = elapsed();
  bool stop = false;
  if (!valid_.empty()) {
    const auto v0 = Clock::now();
    const auto v = validate_model();
    const auto verdict = update_schedule(opt_, higher_is_better(opt_.stop_metric, v), &state_);
    if (verdict.decayed) set_learning_rate(*optimizer_, state_.learning_rate);
    stop = verdict.stop;
    spdlog::info("valid | step {} | loss {:.4f} | ppl {:.2f} | BLEU {:.2f} | chrF {:.2f} | exact {:.1f}% | {}{}{} | {:.1f}s",
                 state_.step, v.loss, v.perplexity, v.bleu, v.chrf, v.exact_match,
                 verdict.improved ? "new best " : "no improvement ", to_string(opt_.stop_metric),
                 verdict.improved ? "" : " (" + std::to_string(state_.bad_validations) + ")", seconds_since(v0));
    // After the validation line that caused it.
    if (verdict.decayed) spdlog::info("validation plateau: learning rate now {:.3g}", state_.learning_rate);
    folder_.log_metrics(JsonObject()
                            .add("type", "valid")
                            .add("step", state_.step)
                            .add("epoch", step_epoch())
                            .add("valid_nll", v.loss)  // plain cross-entropy per target token
                            .add("valid_ppl", v.perplexity)
                            .add("bleu", v.bleu)
                            .add("chrf", v.chrf)
                            .add("exact_match", v.exact_match)
                            .add("lr", state_.learning_rate)
                            .add("elapsed", state_.elapsed_seconds)
                            .add("new_best", verdict.improved));  // best.ckpt is written at this step
    if (verdict.improved) save("best.ckpt");
  } else {
    save("best.ckpt");  // without validation data the newest model is the best we know
  }
  save("last.ckpt");
  saved_step_ = state_.step;
  if (opt_.keep_checkpoints > 0) {
    const std::string name = "step-" + std::to_string(state_.step) + ".ckpt";
    save(name);
    folder_.add_step_checkpoint(name, opt_.keep_checkpoints);
  }
  folder_.draw_curves();
  return stop;
}

namespace {
torch::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_generator_state(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}
}  // namespace

void Trainer::capture_rng() {
  state_.rng_state = generator_state(at::detail::getDefaultCPUGenerator());
  state_.device_rng_state =
      device_.is_cpu() ? torch::Tensor() : generator_state(at::globalContext().defaultGenerator(device_));
}

void Trainer::restore_rng() {
  if (state_.rng_state.defined()) set_generator_state(at::detail::getDefaultCPUGenerator(), state_.rng_state);
  // A state saved on another kind of device does not fit this one's generator:
  // that run goes on from the seed (it could not repeat the other device's draws anyway).
  if (state_.device_rng_state.defined() && !device_.is_cpu()) {
    try {
      set_generator_state(at::globalContext().defaultGenerator(device_), state_.device_rng_state);
    } catch (const c10::Error&) {
      spdlog::warn("the checkpoint's {} generator state does not fit this device; dropout draws anew", device_.str());
    }
  }
}

void Trainer::save(const std::string& name) {
  capture_rng();
  const auto t0 = Clock::now();
  CheckpointMeta meta;
  meta.command = opt_.command_line;
  meta.folder = started_in_;
  save_checkpoint(folder_.path(name), model_, src_tok_, tgt_tok_, optimizer_.get(), &state_, meta);
  spdlog::debug("wrote {} (step {}, {:.2f}s)", folder_.path(name), state_.step, seconds_since(t0));
}

void Trainer::write_average(TrainResult* result) {
  if (opt_.average <= 0 || !is_main()) return;
  const auto last = folder_.newest_step_checkpoints(static_cast<size_t>(opt_.average));
  if (last.empty()) return;
  const size_t n = last.size();
  if (n < static_cast<size_t>(opt_.average))
    spdlog::warn("--average {}: only {} {}; averaging {}", opt_.average, counted(static_cast<int64_t>(n), "step checkpoint"),
                 n == 1 ? "exists" : "exist", n == 1 ? "that one" : "those");
  const std::string out = folder_.path("average.ckpt");
  auto avg = average_checkpoints(last, out);
  if (valid_.empty()) {
    spdlog::info("wrote {}: the mean of {}", out, counted(static_cast<int64_t>(n), "checkpoint"));
    return;
  }
  avg.model->to(device_);
  std::swap(model_, avg.model);  // validate_model() reads model_
  const auto v = validate_model();
  std::swap(model_, avg.model);
  average_score_ = higher_is_better(opt_.stop_metric, v);
  result->average_metric = reported(opt_.stop_metric, average_score_);
  spdlog::info("average | {}, {} .. {} | loss {:.4f} | ppl {:.2f} | BLEU {:.2f} | chrF {:.2f} | exact {:.1f}% | {}",
               counted(static_cast<int64_t>(n), "checkpoint"), fs::path(last.front()).filename().string(),
               fs::path(last.back()).filename().string(), v.loss,
               v.perplexity, v.bleu, v.chrf, v.exact_match, out);
  folder_.log_metrics(JsonObject()
                          .add("type", "average")
                          .add("step", state_.step)
                          .add("checkpoints", static_cast<int64_t>(n))
                          .add("valid_nll", v.loss)
                          .add("valid_ppl", v.perplexity)
                          .add("bleu", v.bleu)
                          .add("chrf", v.chrf)
                          .add("exact_match", v.exact_match));
  folder_.draw_curves();
}

// Nothing trained since the last save is lost: an interruption saves
// quickly, any other end validates first. Every run that saved weights
// leaves a best.ckpt, the file the README's next command translates with:
// an interruption before the first validation writes it from the last
// weights, unvalidated, and says so. Validating there instead would break
// the promise that a signal stops training within seconds (a large
// validation set takes minutes), and Marian's save-and-exit on SIGTERM
// does not validate either; the next validation (--resume) replaces it.
// Then --average, and the summary, which names the checkpoint to use.
void Trainer::finish(TrainResult* result, const Progress& progress) {
  bool saved_unvalidated = false;  // last.ckpt written now, without validation
  if (is_main() && (state_.step != saved_step_ || !fs::exists(folder_.path("last.ckpt")))) {
    if (result->stop_reason == StopReason::kInterrupted) {
      state_.elapsed_seconds = elapsed();
      save("last.ckpt");
      saved_unvalidated = true;
    } else {
      validate_and_save();
    }
  }
  if (is_main() && !state_.has_best && (saved_unvalidated || !fs::exists(folder_.path("best.ckpt")))) {
    save("best.ckpt");
    if (valid_.empty())
      spdlog::info("wrote {}: the newest weights (step {}; without validation data they are the best known)",
                   folder_.path("best.ckpt"), state_.step);
    else
      spdlog::warn("wrote {} from the weights of step {}, not validated: the run stopped before its first "
                   "validation (--resume validates it)", folder_.path("best.ckpt"), state_.step);
  }
  if (result->stop_reason != StopReason::kInterrupted) write_average(result);
  result->steps = state_.step;
  result->epochs = state_.epoch;
  result->best_metric = reported(opt_.stop_metric, state_.best_metric);
  result->tokens_per_second = progress.tokens_per_second();
  result->peak_rss_mb = peak_rss_mb();
  spdlog::info("training finished ({}): {}, {:.0f} target tokens/s, best {} {:.4g}, elapsed {}, "
               "{} skipped, peak memory {} MiB; {}",
               to_string(result->stop_reason), counted(result->steps, "step"), result->tokens_per_second,
               to_string(opt_.stop_metric), result->best_metric, hms(elapsed()),
               counted(result->skipped_steps, "batch", "batches"), result->peak_rss_mb, next_steps(*result));
}

// The model to translate with, as the run chose it: average.ckpt when its
// validation figure beats best.ckpt's (as scripts/multi30k.sh picks), else
// best.ckpt; after an interruption, also how to continue.
std::string Trainer::next_steps(const TrainResult& result) const {
  std::string model = folder_.path("best.ckpt"), why;
  if (std::isfinite(average_score_) && state_.has_best && average_score_ > state_.best_metric) {
    model = folder_.path("average.ckpt");
    why = fmt::format(" (its {} {:.4g} beats best.ckpt's {:.4g})", to_string(opt_.stop_metric), result.average_metric,
                      result.best_metric);
  } else if (!state_.has_best && !valid_.empty()) {
    why = " (not validated yet)";
  }
  std::string text = "translate with: nmt-translate -m " + model + why;
  if (result.stop_reason == StopReason::kInterrupted)
    text += "; continue with: nmt-train -c " + folder_.path("config.toml") + " --resume";
  return text;
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
