// Shared test helpers: temp folders, files, the toy corpus, its tokenizer and
// trained checkpoint, old checkpoint formats. Running the executables:
// test_process.cc; rounding-error bounds: test_bounds.cc.
#include "test_util.h"

#include "io/io.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "search/search.h"
#include "translate/translator.h"
#include "train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nmt::test {
namespace fs = std::filesystem;

namespace {
// Removes the folders made by temp_dir() when the test binary exits, unless
// NMT_KEEP_TEST_FILES is set.
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    if (!std::getenv("NMT_KEEP_TEST_FILES"))
      for (auto& d : dirs) remove_tree(d.string());
  }
};
TempDirs g_temp_dirs;
}  // namespace

bool remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  // children before their folder (FTW_DEPTH), links not followed (FTW_PHYS)
  const int rc = ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 1; },
      16, FTW_DEPTH | FTW_PHYS);
  return rc == 0;
}

std::string temp_dir(const std::string& tag) {
  static int counter = 0;
  auto dir = fs::temp_directory_path() /
             ("nmt_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  remove_tree(dir.string());
  fs::create_directories(dir);
  g_temp_dirs.dirs.push_back(dir);
  return dir.string();
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& l : lines) out << l << '\n';
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void toy_corpus(int n, uint64_t seed, std::vector<std::string>* src, std::vector<std::string>* tgt) {
  static const char* words[] = {"red", "blue", "cat", "dog", "sees", "runs", "big", "small", "tree", "house",
                                "green", "bird", "eats", "fish", "old", "new"};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    int len = 2 + static_cast<int>(rng() % 6);
    std::vector<std::string> w;
    for (int k = 0; k < len; ++k) w.push_back(words[rng() % 16]);
    std::string s, t;
    for (int k = 0; k < len; ++k) s += (k ? " " : "") + w[k];
    for (int k = len - 1; k >= 0; --k) t += (k != len - 1 ? " " : "") + w[k] + "o";
    src->push_back(s);
    tgt->push_back(t);
  }
}

std::vector<Example> toy_examples(const std::vector<std::pair<std::string, std::string>>& pairs) {
  const auto& tok = toy_tokenizer();
  std::vector<Example> ex;
  for (const auto& [s, t] : pairs) {
    Example e;
    e.src = tok.encode(s);
    e.src.push_back(kEosId);
    e.tgt = tok.encode(t);
    ex.push_back(e);
  }
  return ex;
}

std::vector<Example> padded_examples() {
  return toy_examples({
      {"red cat", "cato redo"},
      {"big dog sees small bird", "birdo smallo seeso dogo bigo"},
      {"old fish eats new tree house green blue", "blueo greeno houseo treeo newo eatso fisho oldo"},
      {"blue", "blueo"},
  });
}

std::vector<int64_t> padded_indices() { return {0, 1, 2, 3}; }

Seq2Seq seeded_model(const ModelOptions& opt, uint64_t seed) {
  torch::manual_seed(seed);
  Seq2Seq m(opt);
  m->eval();
  return m;
}

const Tokenizer& toy_tokenizer() {
  static const Tokenizer tok = [] {
    std::vector<std::string> s, t;
    toy_corpus(500, 7, &s, &t);
    s.insert(s.end(), t.begin(), t.end());
    TokenizerOptions opt;
    opt.vocab_size = 60;
    return Tokenizer::train(s, opt);
  }();
  return tok;
}

ModelOptions tiny_model(AttentionType attention) {
  ModelOptions m;
  m.src_vocab = m.tgt_vocab = toy_tokenizer().vocab_size();
  m.emb_dim = 16;
  m.enc_hidden = 12;
  m.dec_hidden = 24;
  m.attn_dim = 10;
  m.dropout = 0.0;
  m.attention = attention;
  return m;
}

ToyFiles write_toy_corpus(const std::string& dir, int n_train, int n_valid) {
  ToyFiles f{dir + "/train.src", dir + "/train.tgt", dir + "/valid.src", dir + "/valid.tgt"};
  std::vector<std::string> s, t;
  toy_corpus(n_train, 1, &s, &t);
  write_lines(f.train_src, s);
  write_lines(f.train_tgt, t);
  s.clear();
  t.clear();
  toy_corpus(n_valid, 2, &s, &t);
  write_lines(f.valid_src, s);
  write_lines(f.valid_tgt, t);
  return f;
}

const std::string& toy_tokenizer_file() {
  static const std::string path = [] {
    std::string p = temp_dir("toy_tokenizer") + "/toy.model";
    write_bytes(p, toy_tokenizer().bytes());
    return p;
  }();
  return path;
}

namespace {

// Trains the toy checkpoint into `dir`/run; returns its last.ckpt.
std::string train_toy_checkpoint(const std::string& dir) {
  auto files = write_toy_corpus(dir, 400, 40);
  TrainOptions opt;
  opt.train_src = files.train_src;
  opt.train_tgt = files.train_tgt;
  opt.valid_src = files.valid_src;
  opt.valid_tgt = files.valid_tgt;
  opt.output_dir = dir + "/run";
  opt.batch_tokens = 400;
  opt.learning_rate = 0.01;
  opt.max_steps = 300;
  opt.early_stopping = 0;
  opt.valid_every = 0;
  opt.keep_checkpoints = 0;
  opt.log_every = 0;
  opt.runtime.threads = 1;
  TokenizerOptions tok;
  tok.src_model = tok.tgt_model = toy_tokenizer_file();
  train(opt, tok, tiny_model());
  return opt.output_dir + "/last.ckpt";
}

}  // namespace

std::string random_toy_twin(const std::string& dir, uint64_t seed) {
  const auto toy = load_checkpoint(trained_toy_checkpoint(), torch::kCPU);
  torch::manual_seed(seed);
  Seq2Seq random(toy.options);
  const std::string path = dir + "/twin-" + std::to_string(seed) + ".ckpt";
  save_checkpoint(path, random, toy.src_tok, toy.tgt_tok);
  return path;
}

const std::string& trained_toy_checkpoint() {
  // Training is deterministic, so every test process of one build would
  // train the same model: the first one keeps it in the build folder, keyed
  // by this test binary's identity (a rebuild trains afresh), and the others
  // load that copy. It is written atomically, so racing processes are fine.
  static const std::string path = [] {
    struct stat self;
    if (::stat("/proc/self/exe", &self) != 0) return train_toy_checkpoint(temp_dir("trained_toy"));
    const std::string cache_dir = std::string(NMT_BINARY_DIR) + "/test-cache";
    const std::string cached = cache_dir + "/toy-" + std::to_string(self.st_mtime) + "-" +
                               std::to_string(self.st_size) + ".ckpt";
    if (fs::exists(cached)) return cached;
    const std::string trained = train_toy_checkpoint(temp_dir("trained_toy"));
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    for (const auto& e : fs::directory_iterator(cache_dir, ec))  // checkpoints of earlier builds
      if (e.path().string() != cached && e.path().extension() == ".ckpt") fs::remove(e.path(), ec);
    try {
      write_file_atomic(cached, read_bytes(trained));
    } catch (const Error&) {
      return trained;  // an unwritable build folder: use this process's own copy
    }
    return cached;
  }();
  return path;
}

void write_old_checkpoint(const std::string& path, nmt::Seq2Seq& model, const nmt::Tokenizer& src_tok,
                          const nmt::Tokenizer& tgt_tok, torch::optim::Optimizer* optimizer,
                          const nmt::TrainState* state, int version) {
  torch::serialize::OutputArchive archive, weights;
  archive.write("config", c10::IValue(model->options().serialize()));
  archive.write("src_spm", c10::IValue(src_tok.bytes()));
  archive.write("tgt_spm", c10::IValue(tgt_tok.bytes()));
  archive.write("meta", c10::IValue(std::string("{\"writer\":\"nmt 0.1.0 (format 2)\"}")));
  for (const auto& p : model->named_parameters()) weights.write(p.key(), p.value().detach().cpu());
  archive.write("model", weights);
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    archive.write("optimizer", opt);
  }
  if (state) {
    torch::serialize::OutputArchive st;
    nmt::TrainState::fields(*state, [&](const char* key, const auto& value) { st.write(key, c10::IValue(value)); });
    if (state->rng_state.defined()) st.write("rng_state", state->rng_state);
    archive.write("state", st);
  }
  std::ostringstream body_stream;
  archive.save_to(body_stream);
  write_bytes(path, nmt::checkpoint_file_bytes(body_stream.str(), static_cast<uint32_t>(version)));
}

}  // namespace nmt::test
