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
#include <utility>
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
  // (the run in `dir` is continued from resume_checkpoint()). Throws
  // nmt::Error when the folder cannot be created, is in use by another
  // process, holds any checkpoint of an earlier run (last.ckpt, best.ckpt,
  // average.ckpt, step-N.ckpt) and `resume` is false, or holds no checkpoint
  // to resume and `resume` is true (then before anything is created or
  // changed). A folder is never reused without --resume: its best.ckpt,
  // logs and step checkpoints would be replaced, appended to and rotated.
  bool claim(const std::string& dir, bool resume);
  // The checkpoint a resumed run continues from: last.ckpt; when it is
  // missing, the newest step-N.ckpt, else best.ckpt (said in a warning).
  // "" when not resuming.
  const std::string& resume_checkpoint() const { return resume_from_; }
  // After a failed start: removes what this run put into a folder it
  // created, and the folder when nothing else is in it. Never throws.
  void undo_claim();

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Lists the step-N.ckpt files already in the folder, oldest first: only
  // the names this class writes (step_of_checkpoint_name()); other files,
  // "step-final.ckpt" or a copy "step-1 (copy).ckpt", are never counted,
  // rotated or removed.
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
  std::string resume_from_;
  std::unique_ptr<RunLock> lock_;
  bool created_ = false;                 // this run made the folder
  std::deque<std::string> step_checkpoints_;
  std::ofstream metrics_;
  std::shared_ptr<spdlog::sinks::sink> log_sink_;  // train.log, while attached to the default logger
  void attach_log();
  void detach_log();
  // The step checkpoints of the folder, oldest first. Never throws.
  std::vector<std::pair<int64_t, std::string>> own_step_checkpoints() const;
  // The names of the checkpoints of an earlier run in the folder, last.ckpt
  // first, then best.ckpt, average.ckpt and the step checkpoints, newest first.
  std::vector<std::string> earlier_checkpoints() const;
  // What a resumed run continues from ("" when nothing can be resumed).
  std::string resumable_checkpoint() const;
};

// The step N of a file name "step-N.ckpt" as the run folder writes it: N in
// decimal digits without leading zeros, within int64. -1 for every other name
// ("step-final.ckpt", "step-007.ckpt", "step-1 (copy).ckpt", a 20-digit N).
int64_t step_of_checkpoint_name(const std::string& name);

}  // namespace nmt
