// Dynamic batching for nmt-serve: the requests of many connections wait in
// one bounded queue; one worker thread takes the first and every queued one
// that searches the same way, waiting a few milliseconds for more when the
// queue holds less than a batch, and translates them together, so that under
// load the server runs nmt-translate's batches rather than one sentence at a
// time. The Translator (and the Rescorer, where there is one) is used by
// that thread only.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/translate_options.h"
#include "search/search.h"
#include "translate/rescorer.h"
#include "translate/translator.h"

namespace nmt {

using ServeClock = std::chrono::steady_clock;

// What one request asks the batcher for.
struct BatchRequest {
  std::vector<std::string> lines;  // sentences to translate ("" gives an empty translation)
  int64_t beam_size = 1;
  int64_t n_best = 1;               // <= beam_size
  MbrOptions mbr;                   // pick from the beam by minimum Bayes risk (translate/mbr.h); off by default
  bool attention = false;           // the hypotheses carry their attention rows
  ServeClock::time_point deadline;  // not started by then: answered with `expired`
};

// The batcher's answer to one request.
struct BatchReply {
  std::vector<std::vector<Hypothesis>> hyps;  // one list per line, best first
  bool expired = false;  // the deadline passed while it waited: not translated
  std::string error;     // the translation failed (an exception's message); "" when it did not
};

class Batcher {
 public:
  // Translates with `translator` and `base` (batch sizes, precision, length
  // penalty; each request sets beam size, n-best and minimum Bayes risk),
  // each beam rescored by `rescorer` where it is not null (translate/pick.h).
  // Gathers up to `gather_lines` sentences per translate call, waiting up to
  // `wait` for more; holds at most `queue_lines` sentences waiting. Starts
  // the worker.
  Batcher(Translator& translator, Rescorer* rescorer, const TranslateOptions& base, int64_t gather_lines,
          int64_t queue_lines, std::chrono::milliseconds wait);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `request`; its reply comes through the future. std::nullopt when
  // the queue cannot take its sentences now (the caller answers 503) or the
  // batcher is stopping. Never throws (beyond std::bad_alloc).
  std::optional<std::future<BatchReply>> submit(BatchRequest request);
  // Stops taking requests, answers every queued one, and joins the worker.
  void stop();
  // Sentences waiting now.
  int64_t queued_lines() const;

 private:
  struct Job {
    BatchRequest request;
    std::promise<BatchReply> reply;
  };
  void work();
  // Takes the first job and the queued ones that search as it does, up to
  // gather_lines sentences (the first always). Call with mu_ held.
  std::vector<Job> take_batch();
  void translate(std::vector<Job>& jobs);

  Translator& translator_;
  Rescorer* rescorer_;  // null: none
  TranslateOptions base_;
  const int64_t gather_lines_, queue_lines_;
  const std::chrono::milliseconds wait_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  int64_t queued_lines_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace nmt
