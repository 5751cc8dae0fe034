// Checkpoint writing (atomic) and reading (with checks and hints).
#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.h"

namespace nmt {
namespace {

constexpr char kMagic[8] = {'N', 'M', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr size_t kHeaderSize = sizeof(kMagic) + sizeof(uint32_t);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(located(path, 0, std::string("cannot open checkpoint: ") + std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(located(path, 0, "read error"));
  return ss.str();
}

// Checks magic and version; returns the archive bytes' offset.
void check_header(const std::string& bytes, const std::string& path) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw Error(located(path, 0, "not an nmt checkpoint (no NMTCKPT header); expected a .ckpt file written by nmt-train"));
  uint32_t version = 0;
  for (int i = 3; i >= 0; --i) version = (version << 8) | static_cast<unsigned char>(bytes[sizeof(kMagic) + i]);
  if (version > kCheckpointVersion)
    throw Error(located(path, 0, "checkpoint format version " + std::to_string(version) +
                                     " is newer than this nmt reads (" + std::to_string(kCheckpointVersion) +
                                     "); upgrade nmt"));
  if (version < 1) throw Error(located(path, 0, "checkpoint format version 0 is not valid"));
}

torch::serialize::InputArchive open_archive(const std::string& bytes, const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize, torch::Device(torch::kCPU));
  } catch (const std::exception&) {  // c10::Error and the zip reader's own errors
    throw Error(located(path, 0, "corrupt or truncated checkpoint (the archive does not open); "
                                 "use best.ckpt or an older step-N.ckpt"));
  }
  return archive;
}

std::string read_string(torch::serialize::InputArchive& archive, const std::string& key, const std::string& path) {
  c10::IValue v;
  if (!archive.try_read(key, v) || !v.isString())
    throw Error(located(path, 0, "checkpoint lacks '" + key + "' (corrupt, or not a complete nmt checkpoint)"));
  return v.toStringRef();
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(located(tmp, 0, std::string("cannot write: ") + std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(located(path, 0, std::string("write failed: ") + std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(located(path, 0, std::string("write failed: ") + std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(located(path, 0, std::string("cannot replace: ") + std::strerror(err)));
  }
}

void save_checkpoint(const std::string& path, Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                     torch::optim::Optimizer* optimizer, const TrainState* state) {
  torch::serialize::OutputArchive archive;
  archive.write("config", c10::IValue(model->options().serialize()));
  archive.write("src_spm", c10::IValue(src_tok.bytes()));
  archive.write("tgt_spm", c10::IValue(tgt_tok.bytes()));
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
    st.write("step", c10::IValue(state->step));
    st.write("epoch", c10::IValue(state->epoch));
    st.write("batch_in_epoch", c10::IValue(state->batch_in_epoch));
    st.write("learning_rate", c10::IValue(state->learning_rate));
    st.write("best_metric", c10::IValue(state->best_metric));
    st.write("has_best", c10::IValue(state->has_best));
    st.write("bad_validations", c10::IValue(state->bad_validations));
    st.write("plateau", c10::IValue(state->plateau));
    st.write("seed", c10::IValue(state->seed));
    st.write("elapsed_seconds", c10::IValue(state->elapsed_seconds));
    if (state->rng_state.defined()) st.write("rng_state", state->rng_state);
    archive.write("state", st);
  }
  std::string bytes(kMagic, sizeof(kMagic));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((kCheckpointVersion >> (8 * i)) & 0xFF));
  std::ostringstream body;
  archive.save_to(body);
  bytes += body.str();
  write_file_atomic(path, bytes);
}

CheckpointInfo inspect_checkpoint(const std::string& bytes, const std::string& origin) {
  check_header(bytes, origin);
  auto archive = open_archive(bytes, origin);
  CheckpointInfo info;
  info.options = ModelOptions::parse(read_string(archive, "config", origin), origin);
  info.src_spm = read_string(archive, "src_spm", origin);
  info.tgt_spm = read_string(archive, "tgt_spm", origin);
  torch::serialize::InputArchive sub;
  if (!archive.try_read("model", sub)) throw Error(located(origin, 0, "checkpoint lacks weights"));
  info.has_train_state = archive.try_read("state", sub);
  return info;
}

LoadedModel load_checkpoint(const std::string& path, const torch::Device& device) {
  const std::string bytes = read_file(path);
  auto info = inspect_checkpoint(bytes, path);
  auto archive = open_archive(bytes, path);
  LoadedModel m;
  m.options = info.options;
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
    p.value().copy_(t);
  }
  m.model->to(device);
  m.model->eval();
  return m;
}

TrainState load_train_state(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device) {
  const std::string bytes = read_file(path);
  check_header(bytes, path);
  auto archive = open_archive(bytes, path);
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
  s.step = get("step").toInt();
  s.epoch = get("epoch").toInt();
  s.batch_in_epoch = get("batch_in_epoch").toInt();
  s.learning_rate = get("learning_rate").toDouble();
  s.best_metric = get("best_metric").toDouble();
  s.has_best = get("has_best").toBool();
  s.bad_validations = get("bad_validations").toInt();
  s.plateau = get("plateau").toInt();
  s.seed = get("seed").toInt();
  s.elapsed_seconds = get("elapsed_seconds").toDouble();
  st.try_read("rng_state", s.rng_state);
  return s;
}

}  // namespace nmt
