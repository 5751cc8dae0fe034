// The output folder of a training run.
#include "train/run_folder.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/format.h"
#include "train/curves.h"

namespace nmt {
namespace fs = std::filesystem;

bool RunFolder::claim(const std::string& dir, bool resume) {
  dir_ = dir;
  std::error_code ec;
  // Nothing to resume: stop before the folder is created, locked or logged into.
  if (resume && !fs::exists(path("last.ckpt"), ec))
    throw Error(located(dir, 0, std::string(fs::is_directory(dir, ec) ? "holds no last.ckpt" : "does not exist") +
                                    ", so there is no run to --resume; drop --resume to start a new run there, "
                                    "or give the --output of the run to continue"));
  created_ = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw Error(located(dir, 0, "cannot create output folder: " + ec.message()));
  lock_ = std::make_unique<RunLock>(dir);
  if (const int stale = remove_stale_temporaries(dir); stale > 0)
    spdlog::info("removed {} of an earlier run that did not finish", counted(stale, "temporary file"));
  const std::string last = path("last.ckpt");
  if (resume && !fs::exists(last))  // it went between the check above and the lock
    throw Error(located(dir, 0, "holds no last.ckpt, so there is no run to --resume; drop --resume to start a new run there"));
  if (!resume && fs::exists(last))
    throw Error(located(dir, 0, "already holds a training run (last.ckpt); use --resume to continue it "
                                "or choose another --output"));
  attach_log();
  return resume;
}

RunFolder::~RunFolder() { detach_log(); }

void RunFolder::attach_log() {
  try {
    log_sink_ = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path("train.log"), /*truncate=*/false);
    log_sink_->set_pattern("[%Y-%m-%d %H:%M:%S] [%l] %v");
    spdlog::default_logger()->sinks().push_back(log_sink_);
    spdlog::default_logger()->flush_on(spdlog::level::info);  // `tail -f train.log` sees each line
  } catch (const spdlog::spdlog_ex& e) {
    log_sink_.reset();
    throw Error(located(path("train.log"), 0, std::string("cannot open for writing: ") + e.what()));
  }
}

void RunFolder::detach_log() {
  if (!log_sink_) return;
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), log_sink_), sinks.end());
  log_sink_.reset();
}

void RunFolder::undo_claim() {
  if (!created_ || !lock_) return;
  std::error_code ec;
  if (metrics_.is_open()) metrics_.close();
  detach_log();
  for (const char* name : {"src.spm.model", "tgt.spm.model", "metrics.jsonl", "config.toml", "train.log"})
    fs::remove(path(name), ec);
  fs::remove(path(RunLock::file_name()), ec);
  lock_.reset();
  fs::remove(dir_, ec);  // only when nothing else is in it
}

void RunFolder::scan_step_checkpoints() {
  step_checkpoints_.clear();
  for (const auto& e : fs::directory_iterator(dir_)) {
    auto name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && e.path().extension() == ".ckpt") step_checkpoints_.push_back(e.path().string());
  }
  auto num = [](const std::string& p) { return std::stoll(fs::path(p).stem().string().substr(5)); };
  std::sort(step_checkpoints_.begin(), step_checkpoints_.end(),
            [&](const std::string& a, const std::string& b) { return num(a) < num(b); });
}

void RunFolder::add_step_checkpoint(const std::string& name, int64_t keep) {
  step_checkpoints_.push_back(path(name));
  while (static_cast<int64_t>(step_checkpoints_.size()) > keep) {
    std::error_code ec;
    fs::remove(step_checkpoints_.front(), ec);
    step_checkpoints_.pop_front();
  }
}

std::vector<std::string> RunFolder::newest_step_checkpoints(size_t n) const {
  n = std::min(n, step_checkpoints_.size());
  return {step_checkpoints_.end() - static_cast<std::ptrdiff_t>(n), step_checkpoints_.end()};
}

void RunFolder::open_metrics() {
  if (metrics_.is_open()) return;
  metrics_.open(path("metrics.jsonl"), std::ios::app);
  if (!metrics_) throw Error(located(path("metrics.jsonl"), 0, "cannot open for writing"));
}

void RunFolder::log_metrics(const JsonObject& record) {
  open_metrics();
  metrics_ << record.str() << '\n';
  metrics_.flush();
}

void RunFolder::draw_curves() {
  write_training_curves(path("metrics.jsonl"), path("training-curves.svg"), "nmt-train: " + dir_);
}

}  // namespace nmt
