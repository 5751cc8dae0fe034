// The output folder of a training run.
#include "train/run_folder.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string_view>

#include "base/error.h"
#include "base/format.h"
#include "train/curves.h"

namespace nmt {
namespace fs = std::filesystem;

namespace {

// "a, b and c" of the first `most` of `names`, "and N more" past them.
std::string listed(const std::vector<std::string>& names, size_t most = 4) {
  std::string out;
  const size_t shown = std::min(names.size(), most);
  for (size_t i = 0; i < shown; ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

}  // namespace

int64_t step_of_checkpoint_name(const std::string& name) {
  constexpr std::string_view head = "step-", tail = ".ckpt";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return -1;
  const std::string_view digits(name.data() + head.size(), name.size() - head.size() - tail.size());
  if (digits[0] < '0' || digits[0] > '9' || (digits.size() > 1 && digits[0] == '0')) return -1;
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return -1;  // a non-digit, or past int64
  return n;
}

std::vector<std::pair<int64_t, std::string>> RunFolder::own_step_checkpoints() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = step_of_checkpoint_name(name);
    std::error_code type_ec;
    // A link, folder or device of that name is not a file this class wrote.
    if (step >= 0 && it->symlink_status(type_ec).type() == fs::file_type::regular) found.emplace_back(step, name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> RunFolder::earlier_checkpoints() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const char* name : {"last.ckpt", "best.ckpt", "average.ckpt"})
    if (fs::exists(path(name), ec)) names.emplace_back(name);
  const auto steps = own_step_checkpoints();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) names.push_back(it->second);
  return names;
}

std::string RunFolder::resumable_checkpoint() const {
  std::error_code ec;
  if (fs::exists(path("last.ckpt"), ec)) return path("last.ckpt");
  const auto steps = own_step_checkpoints();
  if (!steps.empty()) return path(steps.back().second);
  if (fs::exists(path("best.ckpt"), ec)) return path("best.ckpt");
  return "";
}

// What a user of Marian or OpenNMT-py expects of a folder that holds an
// earlier run: it is continued only when asked (--resume, OpenNMT-py's
// -train_from), from its newest state (Marian reloads the model file it
// finds), and a new run never writes over it.
bool RunFolder::claim(const std::string& dir, bool resume) {
  dir_ = dir;
  resume_from_.clear();
  std::error_code ec;
  const auto nothing_to_resume = [&] {
    return Error(located(dir, 0, std::string(fs::is_directory(dir, ec) ? "holds no last.ckpt (nor step-N.ckpt or best.ckpt)"
                                                                       : "does not exist") +
                                     ", so there is no run to --resume; drop --resume to start a new run there, "
                                     "or give the --output of the run to continue"));
  };
  // Nothing to resume: stop before the folder is created, locked or logged into.
  if (resume && resumable_checkpoint().empty()) throw nothing_to_resume();
  created_ = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw Error(located(dir, 0, "cannot create output folder: " + ec.message()));
  lock_ = std::make_unique<RunLock>(dir);
  if (const int stale = remove_stale_temporaries(dir); stale > 0)
    spdlog::info("removed {} of an earlier run that did not finish", counted(stale, "temporary file"));
  if (resume) {
    resume_from_ = resumable_checkpoint();  // again: it may have gone between the check above and the lock
    if (resume_from_.empty()) throw nothing_to_resume();
  } else if (const auto earlier = earlier_checkpoints(); !earlier.empty()) {
    const std::string from = resumable_checkpoint();
    std::string choices = from.empty() ? "none of them can be resumed: choose another --output (or move them away)"
                                       : "use --resume to continue it from " + fs::path(from).filename().string() +
                                             (earlier.front() == "last.ckpt" ? "" : " (its newest)") +
                                             ", or choose another --output";
    throw Error(located(dir, 0, "already holds " + std::string(earlier.front() == "last.ckpt" ? "a training run" : "checkpoints of an earlier run") +
                                    " (" + listed(earlier) + "); " + choices));
  }
  attach_log();
  if (resume && fs::path(resume_from_).filename() != "last.ckpt")
    spdlog::warn("{} holds no last.ckpt: resuming from {}, {} (to resume from another one, copy it to last.ckpt)", dir,
                 fs::path(resume_from_).filename().string(),
                 fs::path(resume_from_).filename() == "best.ckpt" ? "its only checkpoint with a training state"
                                                                  : "its newest step checkpoint");
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
  for (const auto& [step, name] : own_step_checkpoints()) step_checkpoints_.push_back(path(name));
}

void RunFolder::add_step_checkpoint(const std::string& name, int64_t keep) {
  // Written again (a run resumed from an older copy): one entry, the newest.
  step_checkpoints_.erase(std::remove(step_checkpoints_.begin(), step_checkpoints_.end(), path(name)),
                          step_checkpoints_.end());
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
