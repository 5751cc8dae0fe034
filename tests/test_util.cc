// Shared test helpers.
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
#include <limits>
#include <map>
#include <stdexcept>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <expat.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <spawn.h>
#include <cerrno>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

extern char** environ;

namespace nmt::test {
namespace fs = std::filesystem;

namespace {
// Removes the folders made by temp_dir() when the test binary exits, unless
// NMT_KEEP_TEST_FILES is set.
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    if (!std::getenv("NMT_KEEP_TEST_FILES"))
      for (auto& d : dirs) fs::remove_all(d, ec);
  }
};
TempDirs g_temp_dirs;
}  // namespace

std::string temp_dir(const std::string& tag) {
  static int counter = 0;
  auto dir = fs::temp_directory_path() /
             ("nmt_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir);
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

std::vector<std::string> temporary_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().lexically_relative(dir).string());  // no lookup: the file may be gone by now
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {
// Runs `args` (already quoted where needed) with stdout and stderr captured,
// in the folder `cwd` ("": this process's), with `env` ("env -u NAME
// NAME2=value", or "") in front of the command.
Result run_command(const std::string& cwd, const std::string& env, const std::string& exe, const std::string& args,
                   const std::string& dir, const std::string& stdin_file) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  // The shell execs the tool (through env), so that wait4() reports the
  // tool's own peak memory.
  const std::string cmd = (cwd.empty() ? "" : "cd " + quote(cwd) + " && ") + "exec " + (env.empty() ? "env" : env) +
                          " NMT_THREADS=1 " + quote(std::string(NMT_BINARY_DIR) + "/" + exe) + " " + args + " < " +
                          quote(stdin_file) + " > " + quote(out) + " 2> " + quote(err);
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  Result r;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    ADD_FAILURE() << "cannot start /bin/sh for " << cmd;
    return r;
  }
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  expect_no_sanitizer_report(r.err);
  EXPECT_NE(r.exit_code, kSanitizerExitCode) << "a sanitizer report:\n" << r.err;
  std::istringstream in(r.err);
  std::string l;
  while (std::getline(in, l))
    if (!l.empty()) r.err_lines.push_back(l);
  return r;
}
}  // namespace

Result run(const std::string& exe, const std::string& args, const std::string& dir, const std::string& stdin_file) {
  return run_command("", "", exe, args, dir, stdin_file);
}

Result run_in(const std::string& cwd, const std::string& exe, const std::string& args, const std::string& dir) {
  return run_command(cwd, "", exe, args, dir, "/dev/null");
}

Result run_with_env(const std::string& env, const std::string& exe, const std::string& args, const std::string& dir,
                    const std::string& stdin_file) {
  return run_command("", env, exe, args, dir, stdin_file);
}

std::vector<SvgElement> svg_elements(const std::string& svg) {
  struct Parse {
    std::vector<SvgElement> elements;
    std::vector<size_t> open;  // indices of the elements being read
  } parse;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &parse);
  XML_SetElementHandler(
      p,
      [](void* data, const XML_Char* name, const XML_Char** attrs) {
        auto* ps = static_cast<Parse*>(data);
        SvgElement e;
        e.name = name;
        for (int i = 0; attrs[i] != nullptr; i += 2) e.attrs[attrs[i]] = attrs[i + 1];
        ps->open.push_back(ps->elements.size());
        ps->elements.push_back(std::move(e));
      },
      [](void* data, const XML_Char*) { static_cast<Parse*>(data)->open.pop_back(); });
  XML_SetCharacterDataHandler(p, [](void* data, const XML_Char* s, int len) {
    auto* ps = static_cast<Parse*>(data);
    if (!ps->open.empty()) ps->elements[ps->open.back()].text.append(s, static_cast<size_t>(len));
  });
  const bool ok = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(ok) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p);
  XML_ParserFree(p);
  return parse.elements;
}

std::vector<std::pair<double, double>> svg_points(const std::string& points) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(points);
  std::string pair;
  while (in >> pair) {
    const size_t comma = pair.find(',');
    if (comma == std::string::npos) {
      ADD_FAILURE() << "not an x,y pair: " << pair;
      continue;
    }
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}

// Asserts a clean failure: exit code 1 (a user error), exactly one error line
// containing every string of `parts`, and no crash report.
void expect_one_line_error(const Result& r, const std::vector<std::string>& parts, int exit_code) {
  EXPECT_EQ(r.exit_code, exit_code) << "stderr:\n" << r.err;
  int error_lines = 0;
  for (const auto& l : r.err_lines) {
    if (l.find("error") == std::string::npos) continue;
    ++error_lines;
    for (const auto& p : parts) EXPECT_NE(l.find(p), std::string::npos) << "'" << p << "' missing from: " << l;
  }
  EXPECT_EQ(error_lines, 1) << "stderr:\n" << r.err;
  for (const char* bad : {"terminate called", "Exception raised from", "frame #", "Aborted", "Segmentation"})
    EXPECT_EQ(r.err.find(bad), std::string::npos) << "crash output '" << bad << "' in stderr:\n" << r.err;
}

void expect_no_sanitizer_report(const std::string& text) {
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: UndefinedBehaviorSanitizer"})
    EXPECT_EQ(text.find(report), std::string::npos) << "sanitizer report in a child's stderr:\n" << text;
}

std::string bin(const std::string& exe) { return std::string(NMT_BINARY_DIR) + "/" + exe; }

Child spawn(const std::vector<std::string>& args, const std::string& log, const std::string& out,
            const std::string& in) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child c;
  c.log = log;
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  c.pid = pid;
  posix_spawn_file_actions_destroy(&fa);
  return c;
}

bool wait_until(const std::function<bool()>& pred, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

bool wait_for_log(const Child& c, const std::string& text, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (read_bytes(c.log).find(text) != std::string::npos) return true;
    int status;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) return read_bytes(c.log).find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int wait_exit(const Child& c, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    int status;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      expect_no_sanitizer_report(read_bytes(c.log));
      EXPECT_NE(code, kSanitizerExitCode) << read_bytes(c.log);
      return code;
    }
    if (r < 0) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  return -1;
}

double unit_roundoff(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kDouble: return std::ldexp(1.0, -53);
    case torch::kFloat: return std::ldexp(1.0, -24);
    case torch::kBFloat16: return std::ldexp(1.0, -8);
    case torch::kHalf: return std::ldexp(1.0, -11);
    default: throw std::invalid_argument("unit_roundoff: not a floating dtype");
  }
}

double gamma(int64_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  if (nu >= 1) throw std::invalid_argument("gamma: n u >= 1, no bound");
  return nu / (1 - nu);
}

at::Tensor dot_error_bound(const at::Tensor& x, const at::Tensor& w_t, const at::Tensor& bias) {
  const int64_t K = x.size(-1);
  auto mag = torch::matmul(x.detach().abs().to(torch::kDouble), w_t.detach().abs().to(torch::kDouble));
  if (bias.defined()) mag = mag + bias.detach().abs().to(torch::kDouble);
  return 2 * gamma(K + (bias.defined() ? 1 : 0), unit_roundoff(x)) * mag;
}

namespace {

// What model_rounding_bound() reads of a model's weights: the longest
// accumulation K, the largest |W| |x| + |b| and the unit roundoff.
struct Magnitudes {
  int64_t K = 1;
  double scale = 0, u = 0;
};

Magnitudes magnitudes(torch::nn::Module& model) {
  torch::NoGradGuard ng;
  const auto params = model.named_parameters();
  // With tied embeddings the target embedding [V, E] is also the output projection.
  const bool tied = !params.contains("decoder.out_weight") && params.contains("decoder.embed.weight");
  Magnitudes m;
  double input = 1, rows = 0, bias = 0;
  for (const auto& p : params) {
    const auto& w = p.value();
    m.u = unit_roundoff(w);
    const bool embedding = p.key().find("embed") != std::string::npos;
    if (embedding) input = std::max(input, w.abs().max().item<double>());
    if (w.dim() == 2 && (!embedding || (tied && p.key() == "decoder.embed.weight"))) {
      m.K = std::max(m.K, w.size(1) + 1);  // and the bias
      rows = std::max(rows, w.abs().sum(1).max().item<double>());
    } else if (w.dim() == 1) {
      bias = std::max(bias, w.abs().max().item<double>());
    }
  }
  m.scale = rows * input + bias;
  return m;
}

}  // namespace

double model_rounding_bound(torch::nn::Module& model, int64_t depth) {
  const auto m = magnitudes(model);
  return 2 * kModelBoundLambda * std::sqrt(static_cast<double>(depth * m.K)) * m.u * m.scale;
}

double gradient_rounding_bound(torch::nn::Module& model, int64_t depth, int64_t positions) {
  const auto m = magnitudes(model);
  return 2 * kModelBoundLambda * std::sqrt(static_cast<double>(2 * depth * std::max(m.K, positions))) * m.u *
         std::max(1.0, m.scale);
}

int64_t model_depth(int64_t S, int64_t T) { return S + 1 + 6 * T; }

double score_rounding_bound(torch::nn::Module& model, int64_t S, int64_t T, double score) {
  return 2 * static_cast<double>(T) * model_rounding_bound(model, model_depth(S, T)) +
         2 * gamma(T, std::ldexp(1.0, -24)) * std::abs(score);
}

double greedy_margin(const std::vector<nmt::Seq2Seq>& models, const std::vector<int64_t>& src,
                     const std::vector<int64_t>& ids, bool eos_chosen) {
  nmt::InferenceScope scope(models);
  Example e;
  e.src = src;
  e.tgt = ids;
  const auto b = make_batch(std::vector<Example>{e}, {0});  // tgt_out: ids, then EOS
  torch::Tensor logp;
  for (auto m : models) {
    auto lp = torch::log_softmax(m->forward(b.src, b.src_len, b.tgt_in).to(torch::kDouble), -1)[0];  // [T, V]
    logp = logp.defined() ? logp + lp : lp;
  }
  logp = logp / static_cast<double>(models.size());
  const int64_t steps = static_cast<int64_t>(ids.size()) + (eos_chosen ? 1 : 0);
  double margin = std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t chosen = b.tgt_out[0][t].item<int64_t>();
    auto row = logp[t].clone();
    const double mine = row[chosen].item<double>();
    row[chosen] = -std::numeric_limits<double>::infinity();
    margin = std::min(margin, mine - row.max().item<double>());
  }
  return margin;
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

bool greedy_near_tie(nmt::Translator& tr, const std::string& line, const nmt::Hypothesis& h,
                     const nmt::SearchOptions& opt) {
  if (line.empty()) return false;
  const auto src = tr.encode_source(line);
  // Search stops a hypothesis at min(S x ratio + 5, max_length) pieces
  // (search.cc: length_caps()); one shorter than that chose EOS.
  const auto cap = std::min<int64_t>(static_cast<int64_t>(src.size() * opt.max_length_ratio) + 5, opt.max_length);
  const bool eos_chosen = static_cast<int64_t>(h.ids.size()) < cap;
  const double bound = model_rounding_bound(
      *tr.model(), model_depth(static_cast<int64_t>(src.size()), static_cast<int64_t>(h.ids.size()) + 1));
  return greedy_margin({tr.model()}, src, h.ids, eos_chosen) <= 2 * bound;
}

::testing::AssertionResult same_greedy_hypothesis(const std::vector<nmt::Seq2Seq>& models,
                                                  const std::vector<int64_t>& src, const nmt::Hypothesis& want,
                                                  const nmt::Hypothesis& got, bool eos_chosen, double logits_bound,
                                                  int* compared) {
  if (greedy_margin(models, src, want.ids, eos_chosen) <= 2 * logits_bound) return ::testing::AssertionSuccess();
  ++*compared;
  if (got.ids != want.ids) {
    auto r = ::testing::AssertionFailure() << "other pieces:";
    for (int64_t id : got.ids) r << " " << id;
    r << " against";
    for (int64_t id : want.ids) r << " " << id;
    return r;
  }
  const int64_t T = static_cast<int64_t>(want.ids.size()) + 1;
  const double score_bound = 2 * T * logits_bound + 2 * gamma(T, std::ldexp(1.0, -24)) * std::abs(want.score);
  auto r = within(got.score, want.score, score_bound);
  if (!r) return r << " (score)";
  if (got.attention.defined() != want.attention.defined())
    return ::testing::AssertionFailure() << "attention on one side only";
  if (want.attention.defined()) {
    r = within(got.attention, want.attention, logits_bound);
    if (!r) return r << " (attention)";
  }
  return ::testing::AssertionSuccess();
}

namespace {

// The largest ratio within() has seen in each test, for its property.
double& worst_ratio_of_this_test() {
  static std::map<std::string, double> worst;  // -1 before the first
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return worst.try_emplace(info ? std::string(info->test_suite_name()) + "." + info->name() : "", -1.0).first->second;
}

}  // namespace

::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, const at::Tensor& bound) {
  const auto a = actual.detach().to(torch::kDouble).cpu(), e = expected.detach().to(torch::kDouble).cpu();
  if (a.sizes() != e.sizes())
    return ::testing::AssertionFailure() << "sizes differ: " << a.sizes() << " against " << e.sizes();
  const auto b = bound.detach().to(torch::kDouble).cpu().expand_as(a);
  const auto diff = (a - e).abs();
  // NaN differences (NaN against a number) fail; equal infinities pass.
  const auto same = a.eq(e);
  auto ratio = torch::where(same, torch::zeros_like(diff), diff / b);
  ratio = torch::where(ratio.isnan(), torch::full_like(ratio, std::numeric_limits<double>::infinity()), ratio);
  if (a.numel() == 0) return ::testing::AssertionSuccess();
  const int64_t worst = ratio.flatten().argmax().item<int64_t>();
  const double r = ratio.flatten()[worst].item<double>();
  double& recorded = worst_ratio_of_this_test();
  if (r > recorded && ::testing::UnitTest::GetInstance()->current_test_info()) {
    recorded = r;
    ::testing::Test::RecordProperty("max_bound_ratio", std::to_string(r));
  }
  if (r <= 1) return ::testing::AssertionSuccess();
  std::vector<int64_t> index;
  for (int64_t i = a.dim() - 1, rest = worst; i >= 0; --i) {
    index.insert(index.begin(), rest % a.size(i));
    rest /= a.size(i);
  }
  std::ostringstream where;
  for (size_t i = 0; i < index.size(); ++i) where << (i ? "," : "") << index[i];
  return ::testing::AssertionFailure() << "|actual - expected| exceeds the bound at [" << where.str()
                                       << "]: " << a.flatten()[worst].item<double>() << " against "
                                       << e.flatten()[worst].item<double>() << ", difference "
                                       << diff.flatten()[worst].item<double>() << ", bound "
                                       << b.flatten()[worst].item<double>() << " (ratio " << r << ")";
}

::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, double bound) {
  return within(actual, expected, torch::full({}, bound, torch::kDouble));
}

::testing::AssertionResult within(double actual, double expected, double bound) {
  return within(torch::full({}, actual, torch::kDouble), torch::full({}, expected, torch::kDouble),
                torch::full({}, bound, torch::kDouble));
}

}  // namespace nmt::test
