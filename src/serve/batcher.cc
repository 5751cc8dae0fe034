// The dynamic batcher (batcher.h): a bounded queue and one worker thread.
#include "serve/batcher.h"

#include <exception>

#include "translate/pick.h"

namespace nmt {

Batcher::Batcher(Translator& translator, Rescorer* rescorer, const TranslateOptions& base, int64_t gather_lines,
                 int64_t queue_lines, std::chrono::milliseconds wait)
    : translator_(translator),
      rescorer_(rescorer),
      base_(base),
      gather_lines_(gather_lines),
      queue_lines_(queue_lines),
      wait_(wait) {
  worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() { stop(); }

std::optional<std::future<BatchReply>> Batcher::submit(BatchRequest request) {
  const auto lines = static_cast<int64_t>(request.lines.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queued_lines_ + lines > queue_lines_) return std::nullopt;
  queue_.push_back(Job{std::move(request), {}});
  auto future = queue_.back().reply.get_future();
  queued_lines_ += lines;
  cv_.notify_one();
  return future;
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int64_t Batcher::queued_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_lines_;
}

std::vector<Batcher::Job> Batcher::take_batch() {
  std::vector<Job> jobs;
  const BatchRequest& first = queue_.front().request;
  const int64_t beam = first.beam_size, n_best = first.n_best;
  const bool attention = first.attention;
  const MbrOptions mbr = first.mbr;
  int64_t lines = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const BatchRequest& r = it->request;
    const auto n = static_cast<int64_t>(r.lines.size());
    const bool same = r.beam_size == beam && r.n_best == n_best && r.attention == attention &&
                      r.mbr.utility == mbr.utility && r.mbr.temperature == mbr.temperature;
    if (!same || (!jobs.empty() && lines + n > gather_lines_)) {
      ++it;
      continue;
    }
    lines += n;
    queued_lines_ -= n;
    jobs.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return jobs;
}

void Batcher::work() {
  for (;;) {
    std::vector<Job> jobs;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every request answered
      // Less than a batch waiting: give other requests a moment to join it.
      if (!stopping_ && queued_lines_ < gather_lines_ && wait_.count() > 0)
        cv_.wait_for(lock, wait_, [&] { return stopping_ || queued_lines_ >= gather_lines_; });
      jobs = take_batch();
    }
    translate(jobs);
  }
}

void Batcher::translate(std::vector<Job>& jobs) {
  const auto now = ServeClock::now();
  std::vector<std::string> lines;
  std::vector<Job*> live;
  for (auto& job : jobs) {
    if (job.request.deadline < now) {
      BatchReply expired;
      expired.expired = true;
      job.reply.set_value(std::move(expired));
      continue;
    }
    live.push_back(&job);
    lines.insert(lines.end(), job.request.lines.begin(), job.request.lines.end());
  }
  if (live.empty()) return;
  const BatchRequest& first = live.front()->request;
  TranslateOptions opt = base_;
  opt.search.beam_size = first.beam_size;
  opt.search.n_best = first.n_best;
  std::vector<std::vector<Hypothesis>> hyps;
  std::string error;
  try {
    hyps = translator_.translate(lines, pick_search_options(opt, rescorer_, first.mbr), first.attention);
    pick_from_beam(translator_, rescorer_, first.mbr, lines, /*replace_unk=*/false, opt, &hyps);
  } catch (const std::exception& e) {
    error = e.what();
  }
  size_t k = 0;
  for (Job* job : live) {
    BatchReply reply;
    reply.error = error;
    if (error.empty())
      for (size_t i = 0; i < job->request.lines.size(); ++i) reply.hyps.push_back(std::move(hyps[k++]));
    job->reply.set_value(std::move(reply));
  }
}

}  // namespace nmt
