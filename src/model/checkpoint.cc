// The body of a current (format 3) checkpoint: writing a model, its
// tokenizers and meta (with, in training checkpoints, the optimizer and
// training state), and reading it back with every check made before a model
// is built: tensor layout, model config, each weight's name and shape,
// tokenizers, meta; nothing in the file is ever run.
#include <algorithm>
#include <map>
#include <sstream>

#include "base/error.h"
#include "io/io.h"
#include "model/checkpoint_format.h"
#include "model/device.h"

namespace nmt {
namespace ckpt {
namespace {

// The one line that turns away a format 1 or 2 file: its LibTorch archive
// runs code when LibTorch loads it, so only --convert reads it.
[[noreturn]] void refuse_legacy(const std::string& path, uint32_t version) {
  throw Error(located(path, 0, "checkpoint format " + std::to_string(version) +
                                   " (from an older nmt) is read only to convert it, as its archive can carry code: "
                                   "nmt-train --convert " + path + " NEW.ckpt"));
}

// Throws nmt::Error naming the first weight of `model` with a NaN or Inf.
void check_finite(Seq2Seq& model, const std::string& path, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model->named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw Error(located(path, 0, what + ": weight '" + p.key() + "' holds NaN or Inf values"));
}

}  // namespace

std::string meta_json(const CheckpointMeta& meta) {
  nlohmann::json j = nlohmann::json::object();
  if (!meta.writer.empty()) j["writer"] = meta.writer;
  if (!meta.command.empty()) j["command"] = meta.command;
  if (!meta.folder.empty()) j["folder"] = meta.folder;
  if (meta.step >= 0) j["step"] = meta.step;
  if (!meta.made_from.empty()) j["made_from"] = meta.made_from;
  // Invalid UTF-8 in a command line is replaced rather than refused: meta never stops a save.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool read_meta(const std::string& text, CheckpointMeta* meta) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto str = [&](const char* key, std::string* out) {
    if (auto it = j.find(key); it != j.end() && it->is_string()) *out = it->get<std::string>();
  };
  str("writer", &meta->writer);
  str("command", &meta->command);
  str("folder", &meta->folder);
  str("made_from", &meta->made_from);
  if (auto it = j.find("step"); it != j.end() && it->is_number_integer()) meta->step = it->get<int64_t>();
  return true;
}

nlohmann::json json_object(const std::string* text, const std::string& path, const std::string& field) {
  if (text == nullptr) throw Error(located(path, 0, "checkpoint lacks its " + field));
  const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw Error(located(path, 0, "checkpoint's " + field + " is not a JSON object"));
  return j;
}

Parsed parse_checkpoint(std::string bytes, const std::string& origin) {
  const Header h = parse_header(bytes, origin);
  if (h.version < 3) refuse_legacy(origin, h.version);
  verify_body(bytes, h, origin);
  Parsed p;
  p.bytes = std::move(bytes);
  p.file = TensorFile::parse(std::string_view(p.bytes).substr(h.size), origin);
  const TensorFile& f = p.file;
  CheckpointInfo& info = p.info;
  info.format_version = h.version;
  const std::string* format = f.metadata("format");
  if (format == nullptr || *format != kFormatName)
    throw Error(located(origin, 0, "not an nmt checkpoint body (its metadata lacks format = \"" +
                                       std::string(kFormatName) + "\")"));
  const std::string* config = f.metadata("config");
  if (config == nullptr) throw Error(located(origin, 0, "checkpoint lacks its model config"));
  info.options = ModelOptions::parse(*config, origin);  // range-checked
  // Every model tensor, and no other, with its shape: the model that loading
  // builds is then no larger than the file.
  std::map<std::string, const TensorEntry*> model_entries;
  for (const auto& [name, e] : f.entries())
    if (name.rfind(kModelPrefix, 0) == 0) model_entries[name.substr(sizeof(kModelPrefix) - 1)] = &e;
  for (const auto& want : parameter_shapes(info.options)) {
    auto it = model_entries.find(want.name);
    if (it == model_entries.end())
      throw Error(located(origin, 0, "checkpoint lacks weight '" + want.name + "' (config and weights disagree)"));
    const TensorEntry& e = *it->second;
    if (e.shape != want.shape)
      throw Error(located(origin, 0, "weight '" + want.name + "' has the wrong shape for the model config"));
    if (!c10::isFloatingType(e.dtype))
      throw Error(located(origin, 0, "weight '" + want.name + "' is not floating point"));
    model_entries.erase(it);
  }
  if (!model_entries.empty())
    throw Error(located(origin, 0, "weight '" + model_entries.begin()->first.substr(0, 80) +
                                       "' is not one of the model config's"));
  auto bytes_of = [&](const char* name) {
    const TensorEntry* e = f.find(name);
    if (e == nullptr) throw Error(located(origin, 0, std::string("checkpoint lacks '") + name + "'"));
    return e->as_bytes(origin);
  };
  info.src_spm = bytes_of(kSrcTokenizer);
  info.tgt_spm = bytes_of(kTgtTokenizer);
  if (const std::string* meta = f.metadata("meta")) info.has_meta = read_meta(*meta, &info.meta);
  info.has_train_state = f.metadata("train_state") != nullptr;
  for (const auto& [name, e] : f.entries()) info.smoothed |= name.rfind(kSteppedPrefix, 0) == 0;
  if (info.has_train_state) info.state = parse_train_state(json_object(f.metadata("train_state"), origin, "training state"), origin);
  return p;
}

}  // namespace ckpt

using namespace ckpt;

void save_checkpoint(const std::string& path, Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                     torch::optim::Optimizer* optimizer, const TrainState* state, CheckpointMeta meta) {
  check_finite(model, path, "not written (the file is unchanged)");
  meta.writer = nmt_build();
  if (meta.step < 0 && state != nullptr) meta.step = state->step;
  TensorFileWriter w;
  w.set_metadata("format", kFormatName);
  w.set_metadata("config", model->options().serialize());
  w.set_metadata("meta", meta_json(meta));
  // Weights are stored from the CPU so a GPU-trained model loads anywhere.
  for (const auto& p : model->named_parameters()) w.add(kModelPrefix + p.key(), p.value());
  w.add_bytes(kSrcTokenizer, src_tok.bytes());
  w.add_bytes(kTgtTokenizer, tgt_tok.bytes());
  if (optimizer) add_optimizer(w, *optimizer);
  if (state) {
    w.set_metadata("train_state", train_state_json(*state).dump());
    if (state->rng_state.defined()) w.add(kCpuRng, state->rng_state);
    if (state->device_rng_state.defined()) w.add(kDeviceRng, state->device_rng_state);
    for (const auto& [name, t] : state->stepped_weights) w.add(kSteppedPrefix + name, t);
  }
  write_file_atomic(path, checkpoint_file_bytes(w.bytes()));
}

CheckpointInfo inspect_checkpoint(const std::string& bytes, const std::string& origin) {
  return parse_checkpoint(bytes, origin).info;
}

std::string describe_checkpoint(const std::string& path) {
  const CheckpointInfo info = parse_checkpoint(read_checkpoint_file(path), path).info;
  int64_t parameters = 0;
  for (const auto& p : parameter_shapes(info.options)) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    parameters += n;
  }
  std::ostringstream o;
  o << "checkpoint: " << path << "\n"
    << "format version: " << info.format_version << "\n"
    << "parameters: " << parameters << "\n"
    << "source vocabulary: " << info.options.src_vocab << " pieces\n"
    << "target vocabulary: " << info.options.tgt_vocab << " pieces\n";
  if (info.has_meta) {
    const CheckpointMeta& m = info.meta;
    o << "written by: " << (m.writer.empty() ? "unknown" : m.writer) << "\n";
    if (!m.command.empty()) o << "trained by: " << m.command << (m.folder.empty() ? "" : " (in " + m.folder + ")") << "\n";
    if (m.step >= 0) o << "weights of step: " << m.step << "\n";
    if (!m.made_from.empty()) o << "made from: " << m.made_from << "\n";
  } else {
    o << "written by: not recorded\n";
  }
  if (info.has_train_state) {
    const TrainState& s = info.state;
    o << "training state: yes (resumable)\n"
      << "step: " << s.step << "\n"
      << "epoch: " << s.epoch << " (" << s.batch_in_epoch << " batches into it)\n"
      << "learning rate: " << s.learning_rate << "\n"
      << "best validation figure: " << (s.has_best ? std::to_string(s.best_metric) : "none yet")
      << " (the run's --stop-metric; loss and perplexity are stored negated)\n"
      << "seed: " << s.seed << "\n"
      << "training time: " << s.elapsed_seconds << " s\n";
    if (info.smoothed)
      o << "model weights: a moving average (--exponential-smoothing); the training state holds the stepped ones\n";
  } else {
    o << "training state: no (weights only: an average or a released model; translates, cannot be resumed)\n";
  }
  o << "model options:\n";
  std::istringstream lines(info.options.serialize());
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) o << "  " << line << "\n";
  return o.str();
}

LoadedModel load_checkpoint(const std::string& path, const torch::Device& device) {
  const Parsed p = parse_checkpoint(read_checkpoint_file(path), path);
  LoadedModel m;
  m.options = p.info.options;
  m.meta = p.info.meta;
  m.src_tok = Tokenizer::from_bytes(p.info.src_spm, path + " (source tokenizer)");
  m.tgt_tok = Tokenizer::from_bytes(p.info.tgt_spm, path + " (target tokenizer)");
  if (m.src_tok.vocab_size() != m.options.src_vocab || m.tgt_tok.vocab_size() != m.options.tgt_vocab)
    throw Error(located(path, 0, "tokenizer and model vocabulary sizes differ (corrupt checkpoint)"));
  if (m.options.tie_all_embeddings && p.info.src_spm != p.info.tgt_spm)
    throw Error(located(path, 0, "has one embedding for both sides but two different tokenizers (corrupt "
                                 "checkpoint)"));
  m.model = Seq2Seq(m.options);  // its shapes were checked against the file's: no larger than it
  torch::NoGradGuard no_grad;
  for (auto& param : m.model->named_parameters()) {
    p.file.find(kModelPrefix + param.key())->copy_into(param.value(), path);  // straight into its storage
    if (!torch::isfinite(param.value()).all().item<bool>())
      throw Error(located(path, 0, "weight '" + param.key() + "' holds NaN or Inf values; the model is unusable "
                                   "(use an older step-N.ckpt)"));
  }
  m.model->to(device);
  m.model->eval();
  return m;
}

}  // namespace nmt
