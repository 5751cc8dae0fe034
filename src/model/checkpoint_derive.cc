// Checkpoints written from other checkpoints: the mean of several
// (averaging), a model to ship without its training state (release), and a
// format 1 or 2 file in the current format (convert, through
// read_legacy_checkpoint(), which runs nothing from the file).
#include <filesystem>

#include "base/error.h"
#include "io/io.h"
#include "model/checkpoint_format.h"
#include "model/device.h"
#include "model/legacy_checkpoint.h"

namespace nmt {

using namespace ckpt;

namespace {

// Adds to `w` every weight of `old` that `options` needs, as float: each of
// its shape, floating point and finite, and no other. Throws nmt::Error
// naming `in` and the weight.
void add_legacy_weights(TensorFileWriter& w, const LegacyCheckpoint& old, const ModelOptions& options,
                        const std::string& in) {
  size_t used = 0;
  for (const auto& want : parameter_shapes(options)) {
    auto it = old.weights.find(want.name);
    if (it == old.weights.end())
      throw Error(located(in, 0, "checkpoint lacks weight '" + want.name + "' (config and weights disagree)"));
    if (it->second.sizes().vec() != want.shape || !it->second.is_floating_point())
      throw Error(located(in, 0, "weight '" + want.name + "' has the wrong shape or type for the model config"));
    if (!torch::isfinite(it->second).all().item<bool>())
      throw Error(located(in, 0, "weight '" + want.name + "' holds NaN or Inf values; the model is unusable"));
    w.add(kModelPrefix + want.name, it->second.to(torch::kFloat));
    ++used;
  }
  if (used != old.weights.size()) throw Error(located(in, 0, "holds weights that the model config does not name"));
}

// Adds to `w` the optimizer of a legacy file as add_optimizer() stores it:
// groups by index, each parameter by its place in the group (the legacy
// file names them). Never throws for content read_legacy_checkpoint() took.
void add_legacy_optimizer(TensorFileWriter& w, const LegacyOptimizer& optimizer) {
  nlohmann::json groups = nlohmann::json::array();
  for (size_t g = 0; g < optimizer.groups.size(); ++g) {
    const auto& group = optimizer.groups[g];
    nlohmann::json options_json = nlohmann::json::object();
    for (const auto& [key, value] : group.options) options_json[key] = value;
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < group.params.size(); ++i) {
      const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
      auto st = optimizer.state.find(group.params[i]);
      if (st == optimizer.state.end()) {
        steps.push_back(-1);
        continue;
      }
      steps.push_back(st->second.has_step ? st->second.step : 0);
      for (const auto& [name, t] : {std::pair<const char*, const torch::Tensor&>{"exp_avg", st->second.exp_avg},
                                    {"exp_avg_sq", st->second.exp_avg_sq},
                                    {"max_exp_avg_sq", st->second.max_exp_avg_sq},
                                    {"momentum_buffer", st->second.momentum_buffer}})
        if (t.defined()) w.add(prefix + name, t);
    }
    groups.push_back({{"options", options_json}, {"steps", steps}});
  }
  w.set_metadata("optimizer", nlohmann::json{{"kind", optimizer.kind}, {"groups", groups}}.dump());
}

// The scalar fields of a legacy file's training state (no generator state).
TrainState legacy_train_state(const LegacyTrainState& old) {
  TrainState s;
  s.step = old.step;
  s.epoch = old.epoch;
  s.batch_in_epoch = old.batch_in_epoch;
  s.learning_rate = old.learning_rate;
  s.best_metric = old.best_metric;
  s.has_best = old.has_best;
  s.bad_validations = old.bad_validations;
  s.plateau = old.plateau;
  s.seed = old.seed;
  s.elapsed_seconds = old.elapsed_seconds;
  return s;
}

}  // namespace

LoadedModel average_checkpoints(const std::vector<std::string>& paths, const std::string& out) {
  if (paths.empty()) throw Error("nothing to average: no checkpoints given");
  auto avg = load_checkpoint(paths.front(), torch::kCPU);
  torch::NoGradGuard no_grad;
  auto sums = avg.model->named_parameters();
  std::vector<torch::Tensor> acc;  // double-precision sums, parameter by parameter
  for (const auto& p : sums) acc.push_back(p.value().to(torch::kDouble));
  for (size_t i = 1; i < paths.size(); ++i) {
    auto other = load_checkpoint(paths[i], torch::kCPU);
    if (other.options.serialize() != avg.options.serialize())
      throw Error(located(paths[i], 0, "cannot average: its model configuration differs from " + paths.front() + "'s"));
    if (other.src_tok.bytes() != avg.src_tok.bytes() || other.tgt_tok.bytes() != avg.tgt_tok.bytes())
      throw Error(located(paths[i], 0, "cannot average: its tokenizers differ from " + paths.front() + "'s"));
    auto params = other.model->named_parameters();
    size_t k = 0;
    for (const auto& p : sums) acc[k++] += params[p.key()].to(torch::kDouble);
  }
  size_t k = 0;
  for (auto& p : sums) p.value().copy_(acc[k++] / static_cast<double>(paths.size()));
  CheckpointMeta meta = avg.meta;  // the run's command and folder
  meta.step = -1;
  meta.made_from = "the mean of " + std::to_string(paths.size()) + " checkpoints:";
  for (const auto& p : paths) meta.made_from += " " + std::filesystem::path(p).filename().string();
  save_checkpoint(out, avg.model, avg.src_tok, avg.tgt_tok, nullptr, nullptr, meta);
  avg.meta = meta;
  return avg;
}

ReleaseResult release_checkpoint(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (in == out || fs::equivalent(in, out, ec))  // the same file by another path, a link or a hard link
    throw UsageError("--release: the output " + out + " is the input checkpoint; name a new file (the input is never replaced)");
  const std::string bytes = read_checkpoint_file(in);
  const CheckpointInfo info = inspect_checkpoint(bytes, in);
  LoadedModel m = load_checkpoint(in, torch::kCPU);
  ReleaseResult r;
  r.in_bytes = bytes.size();
  r.step = info.has_train_state ? info.state.step : m.meta.step;
  CheckpointMeta meta = m.meta;
  meta.step = r.step;
  meta.made_from = "released from " + fs::absolute(in, ec).string() +
                   (info.has_train_state ? " (optimizer and training state left out)" : "");
  if (!m.meta.made_from.empty()) meta.made_from += ", itself " + m.meta.made_from;
  save_checkpoint(out, m.model, m.src_tok, m.tgt_tok, nullptr, nullptr, meta);
  r.out_bytes = fs::file_size(out, ec);
  if (ec) r.out_bytes = 0;
  return r;
}

ConvertResult convert_checkpoint(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (in == out || fs::equivalent(in, out, ec))
    throw UsageError("--convert: the output " + out + " is the input checkpoint; name a new file (the input is never replaced)");
  const std::string bytes = read_checkpoint_file(in);
  const Header h = parse_header(bytes, in);
  if (h.version >= 3)
    throw Error(located(in, 0, "is already checkpoint format " + std::to_string(h.version) + ": nothing to convert"));
  const LegacyCheckpoint old = read_legacy_checkpoint(legacy_archive_bytes(bytes, in), in);
  const ModelOptions options = ModelOptions::parse(old.config, in);
  TensorFileWriter w;
  w.set_metadata("format", kFormatName);
  w.set_metadata("config", options.serialize());
  add_legacy_weights(w, old, options, in);
  const Tokenizer src_tok = Tokenizer::from_bytes(old.src_spm, in + " (source tokenizer)");
  const Tokenizer tgt_tok = Tokenizer::from_bytes(old.tgt_spm, in + " (target tokenizer)");
  if (src_tok.vocab_size() != options.src_vocab || tgt_tok.vocab_size() != options.tgt_vocab)
    throw Error(located(in, 0, "tokenizer and model vocabulary sizes differ (corrupt checkpoint)"));
  w.add_bytes(kSrcTokenizer, old.src_spm);
  w.add_bytes(kTgtTokenizer, old.tgt_spm);
  ConvertResult r;
  r.from_version = h.version;
  r.resumable = old.has_optimizer && old.has_train_state;
  if (r.resumable) {
    add_legacy_optimizer(w, old.optimizer);
    const TrainState s = legacy_train_state(old.state);
    const auto state_json = train_state_json(s);
    parse_train_state(state_json, in);  // the same checks as a resume
    w.set_metadata("train_state", state_json.dump());
    if (old.state.rng_state.defined()) w.add(kCpuRng, old.state.rng_state.to(torch::kByte));
    if (old.state.device_rng_state.defined()) w.add(kDeviceRng, old.state.device_rng_state.to(torch::kByte));
    r.step = s.step;
  }
  CheckpointMeta meta;  // the old file's, where it has one: the run's command and folder
  if (!old.meta.empty()) read_meta(old.meta, &meta);
  const std::string earlier = meta.made_from;
  meta.writer = nmt_build();
  if (r.step >= 0) meta.step = r.step;
  meta.made_from = "converted from " + fs::absolute(in, ec).string() + " (checkpoint format " +
                   std::to_string(h.version) + ")" + (earlier.empty() ? "" : ", itself " + earlier);
  w.set_metadata("meta", meta_json(meta));
  const std::string body = checkpoint_file_bytes(w.bytes());
  // The result must read back as any checkpoint does before it is kept.
  parse_checkpoint(body, out);
  write_file_atomic(out, body);
  r.in_bytes = bytes.size();
  r.out_bytes = body.size();
  return r;
}

}  // namespace nmt
