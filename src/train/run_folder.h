// The output folder of a training run: taking it (create, lock, sweep the
// temporary files of a run that died), the decision to resume, the rolling
// set of step-N.ckpt files, the metrics.jsonl log, train.log (a copy of
// everything logged while the folder is held) and training-curves.svg. Only
// rank 0 (or the only process) has one.
#pragma once
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/sink.h>

#include "base/json.h"
#include "io/io.h"

namespace nmt {

class RunFolder {
 public:
  RunFolder() = default;
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;
  ~RunFolder();  // stops copying the log into train.log

  // Creates and locks `dir`, starts copying the log into `dir`/train.log
  // (appending), and removes stale temporary files in it. Returns `resume`
  // (the run in `dir` is continued). Throws nmt::Error when the folder
  // cannot be created, is in use by another process, holds a run
  // (last.ckpt) and `resume` is false, or holds none and `resume` is true
  // (then before anything is created or changed).
  bool claim(const std::string& dir, bool resume);
  // After a failed start: removes what this run put into a folder it
  // created, and the folder when nothing else is in it. Never throws.
  void undo_claim();

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Lists the step-N.ckpt files already in the folder, oldest first.
  void scan_step_checkpoints();
  // Records `name` (written into the folder) as the newest step checkpoint
  // and removes the oldest ones beyond `keep`. Never throws.
  void add_step_checkpoint(const std::string& name, int64_t keep);
  // The paths of the newest `n` step checkpoints (fewer when fewer exist), oldest first.
  std::vector<std::string> newest_step_checkpoints(size_t n) const;

  // Opens metrics.jsonl for appending (creating it). Throws nmt::Error when
  // it cannot be opened.
  void open_metrics();
  // Appends one JSON line to metrics.jsonl, opening it first if needed.
  void log_metrics(const JsonObject& record);
  // Redraws training-curves.svg from metrics.jsonl. Never throws (a failure
  // is logged as a warning).
  void draw_curves();

 private:
  std::string dir_;
  std::unique_ptr<RunLock> lock_;
  bool created_ = false;                 // this run made the folder
  std::deque<std::string> step_checkpoints_;
  std::ofstream metrics_;
  std::shared_ptr<spdlog::sinks::sink> log_sink_;  // train.log, while attached to the default logger
  void attach_log();
  void detach_log();
};

}  // namespace nmt
