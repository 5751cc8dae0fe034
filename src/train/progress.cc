// Step figures, progress windows and the run's throughput.
#include "train/progress.h"

#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>


namespace nmt {

void Progress::add(const StepStats& step, double seconds) {
  train_seconds_ += seconds;
  trained_tokens_ += step.tokens;
  window_loss_ += step.loss_sum;
  window_tokens_ += step.tokens;
  window_sentences_ += step.sentences;
}

ProgressWindow Progress::take_window() {
  const double w = std::chrono::duration<double>(Clock::now() - window_start_).count();
  ProgressWindow out;
  out.mean_loss = window_loss_ / std::max<int64_t>(window_tokens_, 1);
  out.tokens_per_second = window_tokens_ / w;
  out.sentences_per_second = window_sentences_ / w;
  window_loss_ = 0;
  window_tokens_ = window_sentences_ = 0;
  window_start_ = Clock::now();
  return out;
}

std::string hms(double seconds) {
  auto s = static_cast<int64_t>(seconds);
  std::ostringstream o;
  o << s / 3600 << ':' << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ':' << std::setw(2)
    << std::setfill('0') << s % 60;
  return o.str();
}

int64_t peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") {
      in >> kb;
      return kb / 1024;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace nmt
