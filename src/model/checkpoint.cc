// Checkpoint writing (atomic, checksummed) and reading (header first, with
// checks and hints).
#include "model/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "io/io.h"
#include "model/device.h"

namespace nmt {
namespace {

constexpr char kMagic[8] = {'N', 'M', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr size_t kHeaderV1 = sizeof(kMagic) + 4;  // magic, version
constexpr size_t kHeaderV2 = kHeaderV1 + 8 + 4;   // ... body size, CRC-32 of the body
constexpr uint64_t kMaxCheckpointBytes = uint64_t{1} << 40;  // sanity cap on a declared body size
constexpr uint64_t kMaxUnsizedBytes = uint64_t{4} << 30;     // version 1 read from a device or FIFO

uint64_t read_le(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void append_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {  // zlib takes uInt lengths
    const auto n = static_cast<uInt>(std::min<size_t>(bytes.size() - at, size_t{1} << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), n);
    at += n;
  }
  return static_cast<uint32_t>(crc);
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
  read_up_to(fd, kHeaderV2, bytes, path);  // a version 1 header is shorter: the rest is archive
  const Header h = parse_header(bytes, path);
  if (h.version >= 2) {
    if (S_ISREG(st.st_mode)) bytes.reserve(std::min<uint64_t>(h.body_size, static_cast<uint64_t>(st.st_size)) + h.size + 1);
    read_up_to(fd, h.body_size + 1, bytes, path);  // one byte more shows trailing data
  } else {
    read_up_to(fd, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : kMaxUnsizedBytes, bytes, path);
  }
  return bytes;
}

torch::serialize::InputArchive open_archive(const std::string& bytes, const Header& h, const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data() + h.size, bytes.size() - h.size, torch::Device(torch::kCPU));
  } catch (const std::exception&) {  // c10::Error and the zip reader's own errors
    throw Error(located(path, 0, "corrupt or truncated checkpoint (the archive does not open); "
                                 "use best.ckpt or an older step-N.ckpt"));
  }
  return archive;
}

// The archive of a checkpoint file, after every check of its bytes.
torch::serialize::InputArchive open_checkpoint(const std::string& path) {
  const std::string bytes = read_checkpoint_file(path);
  const Header h = parse_header(bytes, path);
  verify_body(bytes, h, path);
  return open_archive(bytes, h, path);
}

std::string read_string(torch::serialize::InputArchive& archive, const std::string& key, const std::string& path) {
  c10::IValue v;
  if (!archive.try_read(key, v) || !v.isString())
    throw Error(located(path, 0, "checkpoint lacks '" + key + "' (corrupt, or not a complete nmt checkpoint)"));
  return v.toStringRef();
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

// The "meta" entry of `archive`, if it has one that parses; a damaged one
// counts as absent (it is informational). Never throws for bad content.
bool read_meta(torch::serialize::InputArchive& archive, CheckpointMeta* meta) {
  c10::IValue v;
  if (!archive.try_read("meta", v) || !v.isString()) return false;
  const auto j = nlohmann::json::parse(v.toStringRef(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto text = [&](const char* key, std::string* out) {
    if (auto it = j.find(key); it != j.end() && it->is_string()) *out = it->get<std::string>();
  };
  text("writer", &meta->writer);
  text("command", &meta->command);
  text("folder", &meta->folder);
  text("made_from", &meta->made_from);
  if (auto it = j.find("step"); it != j.end() && it->is_number_integer()) meta->step = it->get<int64_t>();
  return true;
}

// Throws nmt::Error naming the first weight of `model` with a NaN or Inf.
void check_finite(Seq2Seq& model, const std::string& path, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model->named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw Error(located(path, 0, what + ": weight '" + p.key() + "' holds NaN or Inf values"));
}

}  // namespace

void save_checkpoint(const std::string& path, Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                     torch::optim::Optimizer* optimizer, const TrainState* state, CheckpointMeta meta) {
  check_finite(model, path, "not written (the file is unchanged)");
  meta.writer = nmt_build();
  if (meta.step < 0 && state != nullptr) meta.step = state->step;
  torch::serialize::OutputArchive archive;
  archive.write("config", c10::IValue(model->options().serialize()));
  archive.write("src_spm", c10::IValue(src_tok.bytes()));
  archive.write("tgt_spm", c10::IValue(tgt_tok.bytes()));
  archive.write("meta", c10::IValue(meta_json(meta)));
  torch::serialize::OutputArchive weights;
  {
    // Weights are stored on the CPU so a GPU-trained model loads anywhere.
    for (const auto& p : model->named_parameters()) weights.write(p.key(), p.value().detach().cpu());
    for (const auto& b : model->named_buffers()) weights.write(b.key(), b.value().detach().cpu(), /*is_buffer=*/true);
  }
  archive.write("model", weights);
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    archive.write("optimizer", opt);
  }
  if (state) {
    torch::serialize::OutputArchive st;
    TrainState::fields(*state, [&](const char* key, const auto& value) { st.write(key, c10::IValue(value)); });
    if (state->rng_state.defined()) st.write("rng_state", state->rng_state);
    if (state->device_rng_state.defined()) st.write("device_rng_state", state->device_rng_state);
    archive.write("state", st);
  }
  std::ostringstream body_stream;
  archive.save_to(body_stream);
  const std::string body = body_stream.str();
  std::string bytes(kMagic, sizeof(kMagic));
  append_le(bytes, kCheckpointVersion, 4);
  append_le(bytes, body.size(), 8);
  append_le(bytes, crc32_of(body), 4);
  bytes += body;
  write_file_atomic(path, bytes);
}

CheckpointInfo inspect_checkpoint(const std::string& bytes, const std::string& origin) {
  const Header h = parse_header(bytes, origin);
  verify_body(bytes, h, origin);
  auto archive = open_archive(bytes, h, origin);
  CheckpointInfo info;
  info.options = ModelOptions::parse(read_string(archive, "config", origin), origin);
  info.src_spm = read_string(archive, "src_spm", origin);
  info.tgt_spm = read_string(archive, "tgt_spm", origin);
  torch::serialize::InputArchive sub;
  if (!archive.try_read("model", sub)) throw Error(located(origin, 0, "checkpoint lacks weights"));
  info.format_version = h.version;
  info.has_meta = read_meta(archive, &info.meta);
  info.has_train_state = archive.try_read("state", sub);
  if (info.has_train_state) {
    TrainState::fields(info.state, [&](const char* key, auto& value) {
      c10::IValue v;
      if (!sub.try_read(key, v)) throw Error(located(origin, 0, std::string("training state lacks '") + key + "'"));
      value = v.to<std::decay_t<decltype(value)>>();
    });
  }
  return info;
}

std::string describe_checkpoint(const std::string& path) {
  const CheckpointInfo info = inspect_checkpoint(read_checkpoint_file(path), path);
  Seq2Seq model(info.options);
  std::ostringstream o;
  o << "checkpoint: " << path << "\n"
    << "format version: " << info.format_version << "\n"
    << "parameters: " << count_parameters(*model) << "\n"
    << "source vocabulary: " << info.options.src_vocab << " pieces\n"
    << "target vocabulary: " << info.options.tgt_vocab << " pieces\n";
  if (info.has_meta) {
    const CheckpointMeta& m = info.meta;
    o << "written by: " << (m.writer.empty() ? "unknown" : m.writer) << "\n";
    if (!m.command.empty()) o << "trained by: " << m.command << (m.folder.empty() ? "" : " (in " + m.folder + ")") << "\n";
    if (m.step >= 0) o << "weights of step: " << m.step << "\n";
    if (!m.made_from.empty()) o << "made from: " << m.made_from << "\n";
  } else {
    o << "written by: not recorded (a checkpoint from before nmt recorded it)\n";
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
  const std::string bytes = read_checkpoint_file(path);
  auto info = inspect_checkpoint(bytes, path);
  auto archive = open_archive(bytes, parse_header(bytes, path), path);
  LoadedModel m;
  m.options = info.options;
  m.meta = info.meta;
  m.src_tok = Tokenizer::from_bytes(info.src_spm, path + " (source tokenizer)");
  m.tgt_tok = Tokenizer::from_bytes(info.tgt_spm, path + " (target tokenizer)");
  if (m.src_tok.vocab_size() != m.options.src_vocab || m.tgt_tok.vocab_size() != m.options.tgt_vocab)
    throw Error(located(path, 0, "tokenizer and model vocabulary sizes differ (corrupt checkpoint)"));
  m.model = Seq2Seq(m.options);
  torch::serialize::InputArchive weights;
  if (!archive.try_read("model", weights)) throw Error(located(path, 0, "checkpoint lacks weights"));
  torch::NoGradGuard no_grad;
  for (auto& p : m.model->named_parameters()) {
    torch::Tensor t;
    if (!weights.try_read(p.key(), t))
      throw Error(located(path, 0, "checkpoint lacks weight '" + p.key() + "' (config and weights disagree)"));
    if (t.sizes() != p.value().sizes())
      throw Error(located(path, 0, "weight '" + p.key() + "' has the wrong shape (config and weights disagree)"));
    if (!torch::isfinite(t).all().item<bool>())
      throw Error(located(path, 0, "weight '" + p.key() + "' holds NaN or Inf values; the model is unusable "
                                   "(use an older step-N.ckpt)"));
    p.value().copy_(t);
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

TrainState load_train_state(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device) {
  auto archive = open_checkpoint(path);
  torch::serialize::InputArchive st, opt;
  if (!archive.try_read("state", st) || !archive.try_read("optimizer", opt))
    throw Error(located(path, 0, "not a training checkpoint (no optimizer state); cannot resume from it"));
  try {
    optimizer.load(opt);
  } catch (const c10::Error&) {
    throw Error(located(path, 0, "optimizer state does not match the model (was the config changed?)"));
  }
  // The optimizer state was read on the CPU; move it next to its parameters.
  for (auto& kv : optimizer.state()) {
    auto* adam = dynamic_cast<torch::optim::AdamParamState*>(kv.second.get());
    if (!adam) continue;
    adam->exp_avg(adam->exp_avg().to(device));
    adam->exp_avg_sq(adam->exp_avg_sq().to(device));
    if (adam->max_exp_avg_sq().defined()) adam->max_exp_avg_sq(adam->max_exp_avg_sq().to(device));
  }
  auto get = [&](const char* key) {
    c10::IValue v;
    if (!st.try_read(key, v)) throw Error(located(path, 0, std::string("training state lacks '") + key + "'"));
    return v;
  };
  TrainState s;
  TrainState::fields(s, [&](const char* key, auto& value) { value = get(key).to<std::decay_t<decltype(value)>>(); });
  st.try_read("rng_state", s.rng_state);
  st.try_read("device_rng_state", s.device_rng_state);
  return s;
}

}  // namespace nmt
