// What a training run counts as it goes: one step's figures (summed across
// ranks), the window of steps since the last progress line, and the run's
// throughput, which leaves validation time out.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace nmt {

class Communicator;

// One step's figures on this rank; all_reduce() makes them the step's.
struct StepStats {
  double loss_sum = 0;    // summed (label-smoothed) token losses; not finite when the loss was not
  int64_t tokens = 0;     // target tokens
  int64_t sentences = 0;
  bool finite = true;     // the loss was finite (after all_reduce: on every rank)

  // Sums the figures over all ranks; a no-op without `comm` (in distributed.cc).
  void all_reduce(Communicator* comm);
};

// The figures of the steps since the last progress line.
struct ProgressWindow {
  double mean_loss = 0;            // per target token
  double tokens_per_second = 0;    // target tokens, wall time of the window
  double sentences_per_second = 0;
};

// Counts finished steps.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  Progress() : window_start_(Clock::now()) {}

  // A finished optimizer step with its figures and the seconds it took.
  void add(const StepStats& step, double seconds);
  // The window since the last call (or since construction); starts a new one.
  ProgressWindow take_window();
  // Target tokens per second over the run's steps (validation excluded).
  double tokens_per_second() const { return train_seconds_ > 0 ? trained_tokens_ / train_seconds_ : 0; }

 private:
  double train_seconds_ = 0;
  int64_t trained_tokens_ = 0;
  double window_loss_ = 0;
  int64_t window_tokens_ = 0, window_sentences_ = 0;
  Clock::time_point window_start_;
};

// Seconds as H:MM:SS.
std::string hms(double seconds);
// Peak resident set size of this process (VmHWM), in MiB; 0 if unknown.
int64_t peak_rss_mb();

}  // namespace nmt
