// The training run's saving and end (see trainer.cc for the loop): validation
// and its checkpoints (best, last, step-N), the random generators' state in
// them, --average, and the summary that names the checkpoint to use.
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "base/format.h"
#include "base/json.h"
#include "train/flat_adam.h"
#include "train/trainer_impl.h"

namespace nmt {
namespace fs = std::filesystem;

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
  const WeightSmoothing::Applied smoothed(smoothing_.get());  // validated and saved: the averages
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
// The state of generator `gen`, read under its lock. Throws c10::Error where the generator has none.
torch::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
// Sets generator `gen`'s state under its lock. Throws c10::Error for a state that does not fit it.
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
  if (auto* flat = dynamic_cast<FlatAdam*>(optimizer_.get())) flat->sync_state();  // its step count, for the file
  const WeightSmoothing::Applied smoothed(smoothing_.get());  // the model's weights: the averages
  TrainState state = state_;
  if (smoothing_) state.stepped_weights = named_stepped_weights();
  save_checkpoint(folder_.path(name), model_, src_tok_, tgt_tok_, optimizer_.get(), &state, meta);
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
  const std::string best = state_.has_best ? fmt::format("best {} {:.4g}", to_string(opt_.stop_metric),
                                                        result->best_metric)
                                          : std::string("not validated");
  spdlog::info("training finished ({}): {}, {:.0f} target tokens/s, {}, elapsed {}, "
               "{} skipped, peak memory {} MiB; {}",
               to_string(result->stop_reason), counted(result->steps, "step"), result->tokens_per_second, best,
               hms(elapsed()),
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

}  // namespace nmt
