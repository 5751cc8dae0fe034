// Checkpoint writing (atomic, checksummed, safetensors body) and reading:
// header, checksum, tensor layout, model config and every tensor's shape
// checked before a model is built; nothing in the file is ever run.
#include "model/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "base/error.h"
#include "base/format.h"
#include "io/io.h"
#include "model/device.h"
#include "model/crc32.h"
#include "model/legacy_checkpoint.h"
#include "model/tensor_file.h"

namespace nmt {
namespace {

constexpr char kMagic[8] = {'N', 'M', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr size_t kHeaderV1 = sizeof(kMagic) + 4;  // magic, version
constexpr size_t kHeaderV2 = kHeaderV1 + 8 + 4;   // ... body size, CRC-32 of the body (versions 2 and 3)
constexpr uint64_t kMaxCheckpointBytes = uint64_t{1} << 40;  // sanity cap on a declared body size
constexpr uint64_t kMaxUnsizedBytes = uint64_t{4} << 30;     // version 1 (no size) from a regular file

// Names in the body (tensor_file.h).
constexpr char kFormatName[] = "nmt checkpoint 3";  // metadata "format"
constexpr char kModelPrefix[] = "model.";           // + a parameter's named_parameters() key
constexpr char kSrcTokenizer[] = "tokenizer.src";   // SentencePiece model bytes (U8)
constexpr char kTgtTokenizer[] = "tokenizer.tgt";
constexpr char kCpuRng[] = "state.rng";              // the CPU generator's state (U8)
constexpr char kDeviceRng[] = "state.device_rng";    // the training device's generator's state (U8)

uint64_t read_le(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void append_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

struct Header {
  uint32_t version = 0;
  size_t size = 0;         // header bytes: the archive starts here
  uint64_t body_size = 0;  // version 2: archive bytes
  uint32_t crc = 0;        // version 2: their CRC-32
};

// Parses the header at the start of `bytes` (which may hold no more than
// the header). Throws nmt::Error for a foreign file, a version this build
// does not read, or a header cut short.
Header parse_header(std::string_view bytes, const std::string& path) {
  if (bytes.size() < kHeaderV1 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw Error(located(path, 0, "not an nmt checkpoint (no NMTCKPT header); expected a .ckpt file written by nmt-train"));
  Header h;
  h.version = static_cast<uint32_t>(read_le(bytes, sizeof(kMagic), 4));
  if (h.version > kCheckpointVersion)
    throw Error(located(path, 0, "checkpoint format version " + std::to_string(h.version) +
                                     " is newer than this nmt reads (" + std::to_string(kCheckpointVersion) +
                                     "); upgrade nmt"));
  if (h.version < 1) throw Error(located(path, 0, "checkpoint format version 0 is not valid"));
  h.size = h.version == 1 ? kHeaderV1 : kHeaderV2;
  if (h.version >= 2) {
    if (bytes.size() < kHeaderV2) throw Error(located(path, 0, "truncated checkpoint (the header is cut short)"));
    h.body_size = read_le(bytes, kHeaderV1, 8);
    h.crc = static_cast<uint32_t>(read_le(bytes, kHeaderV1 + 8, 4));
    if (h.body_size > kMaxCheckpointBytes)
      throw Error(located(path, 0, "damaged checkpoint (its header declares " + std::to_string(h.body_size) +
                                       " bytes); use an older step-N.ckpt"));
  }
  return h;
}

// Checks that `bytes` holds exactly the body its header declares, unchanged
// (version 2; version 1 has no checksum). Throws nmt::Error with a hint.
void verify_body(std::string_view bytes, const Header& h, const std::string& path) {
  if (h.version < 2) return;
  const uint64_t have = bytes.size() - h.size;
  if (have != h.body_size)
    throw Error(located(path, 0, std::string(have < h.body_size ? "truncated" : "damaged") + " checkpoint (" +
                                     std::to_string(have) + " bytes after the header, " +
                                     std::to_string(h.body_size) + " expected); use an older step-N.ckpt"));
  if (crc32_of(bytes.substr(h.size)) != h.crc)
    throw Error(located(path, 0, "damaged (checksum mismatch); use an older step-N.ckpt"));
}

// Appends up to `n` bytes of `fd` to `out`; fewer only at the end of the file.
void read_up_to(int fd, uint64_t n, std::string& out, const std::string& path) {
  char chunk[1 << 16];
  while (n > 0) {
    const ssize_t got = ::read(fd, chunk, static_cast<size_t>(std::min<uint64_t>(n, sizeof chunk)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(located(path, 0, std::string("read error: ") + std::strerror(errno)));
    if (got == 0) return;
    out.append(chunk, static_cast<size_t>(got));
    n -= static_cast<uint64_t>(got);
  }
}

// Reads a checkpoint file: the header first, then no more than it declares
// (plus one byte, to notice trailing data), so a device or a foreign file is
// refused before anything else is read. Throws nmt::Error naming the path.
std::string read_checkpoint_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(located(path, 0, std::string("cannot open checkpoint: ") + std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error(located(path, 0, std::string("cannot read: ") + std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(located(path, 0, "is a folder, not a checkpoint"));
  std::string bytes;
  read_up_to(fd, kHeaderV2, bytes, path);  // a version 1 header is shorter: the rest is its archive
  const Header h = parse_header(bytes, path);
  if (h.version >= 2) {
    if (S_ISREG(st.st_mode)) bytes.reserve(std::min<uint64_t>(h.body_size, static_cast<uint64_t>(st.st_size)) + h.size + 1);
    read_up_to(fd, h.body_size + 1, bytes, path);  // one byte more shows trailing data
  } else {
    // Format 1 declares no size: only a regular file says where it ends.
    if (!S_ISREG(st.st_mode))
      throw Error(located(path, 0, "a format 1 checkpoint is read only from a regular file (it declares no size)"));
    if (static_cast<uint64_t>(st.st_size) > kMaxUnsizedBytes)
      throw Error(located(path, 0, "a format 1 checkpoint of more than 4 GiB is not one nmt wrote"));
    read_up_to(fd, static_cast<uint64_t>(st.st_size), bytes, path);
  }
  return bytes;
}


// `meta` as the JSON text of a checkpoint's "meta" entry (empty fields left out).
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

// Reads a "meta" entry; a damaged one counts as absent (it is
// informational). Never throws for bad content.
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

// The checkpoint's body after every check of its bytes: the parsed tensor
// file (views into `bytes`) and what its metadata says.
struct Parsed {
  std::string bytes;
  TensorFile file;
  CheckpointInfo info;
};

// The one line that turns away a format 1 or 2 file: its LibTorch archive
// runs code when LibTorch loads it, so only --convert reads it.
[[noreturn]] void refuse_legacy(const std::string& path, uint32_t version) {
  throw Error(located(path, 0, "checkpoint format " + std::to_string(version) +
                                   " (from an older nmt) is read only to convert it, as its archive can carry code: "
                                   "nmt-train --convert " + path + " NEW.ckpt"));
}

// `text` as a JSON object, or a located error naming `field`.
nlohmann::json json_object(const std::string* text, const std::string& path, const std::string& field) {
  if (text == nullptr) throw Error(located(path, 0, "checkpoint lacks its " + field));
  const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw Error(located(path, 0, "checkpoint's " + field + " is not a JSON object"));
  return j;
}

// Reads the scalar training state from its JSON object, each field checked:
// counts non-negative integers (epoch from 1), rates finite and positive,
// figures finite. Throws nmt::Error naming the file and the field.
TrainState parse_train_state(const nlohmann::json& j, const std::string& path) {
  constexpr int64_t kMaxCount = int64_t{1} << 53;  // exact in a double, beyond any run
  TrainState s;
  auto bad = [&](const char* key, const std::string& why) {
    return Error(located(path, 0, std::string("training state field '") + key + "' " + why));
  };
  TrainState::fields(s, [&](const char* key, auto& value) {
    using T = std::decay_t<decltype(value)>;
    auto it = j.find(key);
    if (it == j.end()) throw bad(key, "is missing");
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw bad(key, "is not true or false");
      value = it->template get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) throw bad(key, "is not an integer");
      const int64_t v = it->template get<int64_t>();
      const int64_t lo = std::string_view(key) == "epoch" ? 1 : 0;
      if (v < lo || v > kMaxCount)
        throw bad(key, "is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", 2^53]");
      value = v;
    } else {
      if (!it->is_number()) throw bad(key, "is not a number");
      const double v = it->template get<double>();
      if (!std::isfinite(v)) throw bad(key, "is not finite");
      value = v;
    }
  });
  if (!(s.learning_rate > 0)) throw bad("learning_rate", "is " + shortest_decimal(s.learning_rate) + ", not positive");
  if (s.elapsed_seconds < 0) throw bad("elapsed_seconds", "is negative");
  return s;
}

nlohmann::json train_state_json(const TrainState& s) {
  nlohmann::json j = nlohmann::json::object();
  TrainState::fields(s, [&](const char* key, const auto& value) { j[key] = value; });
  return j;
}

// Checks the body of a version 3 file and what its metadata says, before
// any model is built: tensor layout (TensorFile), model options (ranges),
// every model tensor against parameter_shapes(), the tokenizers, the
// training state's scalars. Throws nmt::Error naming `origin` and the field.
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
  if (info.has_train_state) info.state = parse_train_state(json_object(f.metadata("train_state"), origin, "training state"), origin);
  return p;
}

// Throws nmt::Error naming the first weight of `model` with a NaN or Inf.
void check_finite(Seq2Seq& model, const std::string& path, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model->named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw Error(located(path, 0, what + ": weight '" + p.key() + "' holds NaN or Inf values"));
}

// The key of parameter `p` in `optimizer.state()`: a string of its address
// in LibTorch 1.x, the address itself in 2.x.
template <class Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    return c10::guts::to_string(p.unsafeGetTensorImpl());
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// The options of one parameter group, by the names the file stores.
nlohmann::json group_options(torch::optim::OptimizerOptions& o) {
  if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o))
    return {{"lr", a->lr()}, {"beta1", std::get<0>(a->betas())}, {"beta2", std::get<1>(a->betas())},
            {"eps", a->eps()}, {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}};
  if (auto* g = dynamic_cast<torch::optim::SGDOptions*>(&o))
    return {{"lr", g->lr()}, {"momentum", g->momentum()}, {"dampening", g->dampening()},
            {"weight_decay", g->weight_decay()}, {"nesterov", g->nesterov()}};
  throw Error("checkpoint: this optimizer cannot be saved (neither Adam nor SGD)");
}

// The optimizer's state as the file stores it: metadata "optimizer" (its
// kind; per group its options and, per parameter, Adam's step or -1 where
// it has no state yet) and tensors "optimizer.G.I.NAME" for group G,
// parameter I.
void add_optimizer(TensorFileWriter& w, torch::optim::Optimizer& optimizer) {
  nlohmann::json j = nlohmann::json::object();
  j["groups"] = nlohmann::json::array();
  auto& state = optimizer.state();
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < group.params().size(); ++i) {
      const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
      auto it = state.find(state_key(state, group.params()[i]));
      int64_t step = -1;
      if (it != state.end()) {
        if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
          step = a->step();
          w.add(prefix + "exp_avg", a->exp_avg());
          w.add(prefix + "exp_avg_sq", a->exp_avg_sq());
          if (a->max_exp_avg_sq().defined()) w.add(prefix + "max_exp_avg_sq", a->max_exp_avg_sq());
        } else if (auto* m = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
          step = 0;
          if (m->momentum_buffer().defined()) w.add(prefix + "momentum_buffer", m->momentum_buffer());
        }
      }
      steps.push_back(step);
    }
    j["groups"].push_back({{"options", group_options(group.options())}, {"steps", steps}});
  }
  j["kind"] = dynamic_cast<torch::optim::Adam*>(&optimizer) ? "adam" : "sgd";
  w.set_metadata("optimizer", j.dump());
}

// A finite number at `key` of `j` within [lo, hi]; throws nmt::Error naming `field`.
double number_in(const nlohmann::json& j, const char* key, double lo, double hi, const std::string& path,
                 const std::string& field) {
  auto it = j.find(key);
  if (it == j.end() || !(it->is_number() || it->is_boolean()))
    throw Error(located(path, 0, field + " lacks the number '" + key + "'"));
  const double v = it->is_boolean() ? (it->get<bool>() ? 1.0 : 0.0) : it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    throw Error(located(path, 0, field + " '" + key + "' is " + shortest_decimal(v) + ", outside [" + shortest_decimal(lo) +
                                     ", " + shortest_decimal(hi) + "]"));
  return v;
}

// Restores `optimizer` from the file's optimizer entries, checking each
// against the optimizer built for this run: the same kind, groups and
// parameter counts, options in range, every moment of its parameter's shape.
void restore_optimizer(const TensorFile& f, torch::optim::Optimizer& optimizer, const torch::Device& device,
                       const std::string& path) {
  const auto j = json_object(f.metadata("optimizer"), path, "optimizer state");
  const bool adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  const std::string want = adam ? "adam" : "sgd";
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || kind->get<std::string>() != want)
    throw Error(located(path, 0, "the checkpoint's optimizer is " + (kind != j.end() ? kind->dump().substr(0, 20) : "none") +
                                     "; this run uses " + want + " (was --optimizer changed?)"));
  auto groups = j.find("groups");
  if (groups == j.end() || !groups->is_array() || groups->size() != optimizer.param_groups().size())
    throw Error(located(path, 0, "the checkpoint's optimizer has other parameter groups than this model's"));
  auto& state = optimizer.state();
  state.clear();
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    const auto& gj = (*groups)[g];
    const std::string field = "optimizer group " + std::to_string(g);
    if (!gj.is_object() || !gj.contains("options") || !gj.contains("steps") || !gj["steps"].is_array() ||
        gj["steps"].size() != group.params().size())
      throw Error(located(path, 0, field + " does not hold " + std::to_string(group.params().size()) +
                                       " parameters (was the model changed?)"));
    const auto& o = gj["options"];
    const double lr = number_in(o, "lr", 0, 1e6, path, field);
    const double wd = number_in(o, "weight_decay", 0, 1e6, path, field);
    if (adam) {
      auto& a = static_cast<torch::optim::AdamOptions&>(group.options());
      a.lr(lr).weight_decay(wd);
      a.betas({number_in(o, "beta1", 0, 1, path, field), number_in(o, "beta2", 0, 1, path, field)});
      a.eps(number_in(o, "eps", 0, 1, path, field));
      a.amsgrad(number_in(o, "amsgrad", 0, 1, path, field) != 0);
    } else {
      auto& s = static_cast<torch::optim::SGDOptions&>(group.options());
      s.lr(lr).weight_decay(wd);
      s.momentum(number_in(o, "momentum", 0, 1e6, path, field));
      s.dampening(number_in(o, "dampening", 0, 1e6, path, field));
      s.nesterov(number_in(o, "nesterov", 0, 1, path, field) != 0);
    }
    for (size_t i = 0; i < group.params().size(); ++i) {
      const auto& p = group.params()[i];
      const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
      const auto& sj = gj["steps"][i];
      if (!sj.is_number_integer() || sj.get<int64_t>() < -1 || sj.get<int64_t>() > (int64_t{1} << 53))
        throw Error(located(path, 0, prefix + "step is not an integer in [-1, 2^53]"));
      const int64_t step = sj.get<int64_t>();
      if (step < 0) continue;  // no state yet
      // A moment of p's shape, finite, on p's device.
      auto moment = [&](const char* name, bool required) -> torch::Tensor {
        const TensorEntry* e = f.find(prefix + name);
        if (e == nullptr) {
          if (required) throw Error(located(path, 0, "checkpoint lacks '" + prefix + name + "'"));
          return {};
        }
        auto t = torch::empty(p.sizes(), p.options().device(torch::kCPU));
        try {
          e->copy_into(t, path);
        } catch (const Error&) {
          throw Error(located(path, 0, "'" + prefix + name + "' does not have its parameter's shape (was the model changed?)"));
        }
        if (!torch::isfinite(t).all().item<bool>())
          throw Error(located(path, 0, "'" + prefix + name + "' holds NaN or Inf values"));
        return t.to(device);
      };
      if (adam) {
        auto st = std::make_unique<torch::optim::AdamParamState>();
        st->step(step);
        st->exp_avg(moment("exp_avg", true));
        st->exp_avg_sq(moment("exp_avg_sq", true));
        if ((st->exp_avg_sq() < 0).any().item<bool>())
          throw Error(located(path, 0, "'" + prefix + "exp_avg_sq' holds negative values"));
        auto mx = moment("max_exp_avg_sq", false);
        if (mx.defined()) st->max_exp_avg_sq(mx);
        state[state_key(state, p)] = std::move(st);
      } else {
        auto st = std::make_unique<torch::optim::SGDParamState>();
        auto buf = moment("momentum_buffer", false);
        if (buf.defined()) st->momentum_buffer(buf);
        state[state_key(state, p)] = std::move(st);
      }
    }
  }
}

// A generator state from the file, checked by giving it to a new generator
// of the same kind: a state of the wrong size or content is refused here,
// naming the field, and never reaches the run's own generator.
torch::Tensor checked_cpu_rng(const TensorFile& f, const std::string& path) {
  const TensorEntry* e = f.find(kCpuRng);
  if (e == nullptr) return {};
  auto t = torch::empty({static_cast<int64_t>(e->as_bytes(path).size())}, torch::kByte);
  e->copy_into(t, path);
  try {
    auto probe = at::detail::createCPUGenerator();
    std::lock_guard<std::mutex> lock(probe.mutex());
    probe.set_state(t);
  } catch (const c10::Error&) {
    throw Error(located(path, 0, std::string("'") + kCpuRng + "' is not a generator state of this LibTorch"));
  }
  return t;
}

}  // namespace

std::string checkpoint_file_bytes(std::string_view body, uint32_t version) {
  std::string bytes(kMagic, sizeof(kMagic));
  append_le(bytes, version, 4);
  if (version >= 2) {
    append_le(bytes, body.size(), 8);
    append_le(bytes, crc32_of(body), 4);
  }
  bytes.reserve(bytes.size() + body.size());
  bytes += body;
  return bytes;
}

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
  // Every weight the config needs, of its shape, finite; nothing else.
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
    // The optimizer, as add_optimizer() stores it: groups by index, each
    // parameter by its place in the group (the legacy file names them).
    nlohmann::json groups = nlohmann::json::array();
    for (size_t g = 0; g < old.optimizer.groups.size(); ++g) {
      const auto& group = old.optimizer.groups[g];
      nlohmann::json options_json = nlohmann::json::object();
      for (const auto& [key, value] : group.options) options_json[key] = value;
      nlohmann::json steps = nlohmann::json::array();
      for (size_t i = 0; i < group.params.size(); ++i) {
        const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
        auto st = old.optimizer.state.find(group.params[i]);
        if (st == old.optimizer.state.end()) {
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
    w.set_metadata("optimizer", nlohmann::json{{"kind", old.optimizer.kind}, {"groups", groups}}.dump());
    TrainState s;
    s.step = old.state.step;
    s.epoch = old.state.epoch;
    s.batch_in_epoch = old.state.batch_in_epoch;
    s.learning_rate = old.state.learning_rate;
    s.best_metric = old.state.best_metric;
    s.has_best = old.state.has_best;
    s.bad_validations = old.state.bad_validations;
    s.plateau = old.state.plateau;
    s.seed = old.state.seed;
    s.elapsed_seconds = old.state.elapsed_seconds;
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

TrainState load_train_state(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device) {
  const Parsed p = parse_checkpoint(read_checkpoint_file(path), path);
  if (!p.info.has_train_state || p.file.metadata("optimizer") == nullptr)
    throw Error(located(path, 0, "not a training checkpoint (no optimizer state); cannot resume from it"));
  TrainState s = p.info.state;
  s.rng_state = checked_cpu_rng(p.file, path);
  if (const TensorEntry* e = p.file.find(kDeviceRng)) {  // checked when it is used (trainer.cc: restore_rng())
    s.device_rng_state = torch::empty({static_cast<int64_t>(e->as_bytes(path).size())}, torch::kByte);
    e->copy_into(s.device_rng_state, path);
  }
  restore_optimizer(p.file, optimizer, device, path);
  return s;
}

}  // namespace nmt
