// The output folder of a training run: taking it (create, lock, sweep the
// temporary files of a run that died), the decision to resume, the rolling
// set of step-N.ckpt files, and the metrics.jsonl log. Only rank 0 (or the
// only process) has one.
#pragma once
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "io/io.h"

namespace nmt {

class RunFolder {
 public:
  // Creates and locks `dir`, and removes stale temporary files in it.
  // Returns whether a run can be resumed from it (`resume` and last.ckpt
  // exists). Throws nmt::Error when the folder cannot be created, is in use
  // by another process, or holds a run (last.ckpt) and `resume` is false.
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

 private:
  std::string dir_;
  std::unique_ptr<RunLock> lock_;
  bool created_ = false;                 // this run made the folder
  std::deque<std::string> step_checkpoints_;
  std::ofstream metrics_;
};

}  // namespace nmt
