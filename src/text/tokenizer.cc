// SentencePiece wrapper over the isolated module: training from memory,
// loading from bytes, encoding and decoding.
#include "text/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "io/io.h"
#include "text/spm_module.h"

namespace nmt {
namespace {

struct Module {
  const spm::ModuleApi* api = nullptr;
  std::string path;
};

#if defined(__SANITIZE_ADDRESS__)
#define NMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NMT_ASAN 1
#endif
#endif

// dlopen with RTLD_DEEPBIND. AddressSanitizer's dlopen interceptor refuses
// that flag, so sanitizer builds call libc's dlopen directly; the module then
// pairs allocations differently from ASan's view, so those runs set
// ASAN_OPTIONS=alloc_dealloc_mismatch=0 (scripts/sanitize.sh does).
void* open_deepbind(const char* path) {
  constexpr int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#ifdef NMT_ASAN
  using OpenFn = void* (*)(const char*, int);
  void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto real = libc ? reinterpret_cast<OpenFn>(::dlsym(libc, "dlopen")) : nullptr;
  if (real) return real(path, flags);
#endif
  return ::dlopen(path, flags);
}

// The folder of `path` ("/a/b/c" -> "/a/b", "/a" -> ""); "." when it has no '/'.
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The folder of this executable, symbolic links resolved; "." when unknown.
std::string exe_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  return folder_of(std::string(buf, static_cast<size_t>(n)));
}

// Loads libnmt_spm.so once: from $NMT_SPM_MODULE, next to the executable,
// one folder up (tests), ../lib/nmt (installed), or the build tree.
const Module& module() {
  static Module m;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("NMT_SPM_MODULE")) candidates.push_back(env);
    // exe_dir() is free of links, so its parent is folder_of(it), not "/..":
    // the path reported (nmt --version) names the module one way.
    const std::string dir = exe_dir();
    const std::string parent = dir == "." ? ".." : dir.empty() ? dir : folder_of(dir);
    candidates.push_back(dir + "/libnmt_spm.so");
    candidates.push_back(parent + "/libnmt_spm.so");
    candidates.push_back(parent + "/lib/nmt/libnmt_spm.so");
#ifdef NMT_SPM_MODULE_PATH
    candidates.push_back(NMT_SPM_MODULE_PATH);
#endif
    std::string tried;
    for (const auto& c : candidates) {
      if (::access(c.c_str(), R_OK) != 0) {
        tried += " " + c;
        continue;
      }
      // RTLD_DEEPBIND: SentencePiece resolves protobuf to its own copy.
      void* h = open_deepbind(c.c_str());
      if (!h) {
        error = std::string("cannot load SentencePiece module ") + c + ": " + ::dlerror();
        return;
      }
      using ApiFn = const spm::ModuleApi* (*)();
      auto fn = reinterpret_cast<ApiFn>(::dlsym(h, "nmt_spm_module_api"));
      if (!fn || !fn() || fn()->abi != spm::kModuleAbi) {
        error = "SentencePiece module " + c + " is from another nmt build (rebuild nmt)";
        return;
      }
      m.api = fn();
      m.path = c;
      return;
    }
    error = "cannot find the SentencePiece module libnmt_spm.so (looked at" + tried +
            "); build nmt with cmake or set NMT_SPM_MODULE";
  });
  if (!m.api) throw Error(error);
  return m;
}

const spm::ModuleApi& api() { return *module().api; }

}  // namespace

std::string Tokenizer::module_path() { return module().path; }

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences, const TokenizerOptions& opt) {
  if (opt.model_type != "unigram" && opt.model_type != "bpe")
    throw Error("unknown tokenizer model type '" + opt.model_type + "' (expected unigram or bpe)");
  if (sentences.empty()) throw Error("cannot train a tokenizer on an empty corpus");
  std::unordered_map<std::string, std::string> args = {
      {"model_type", opt.model_type},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"character_coverage", std::to_string(opt.character_coverage)},
      {"input_sentence_size", std::to_string(opt.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"num_threads", "2"},
      {"minloglevel", "2"},
      {"model_prefix", ""},
  };
  std::string bytes, err;
  if (!api().train(args, sentences, &bytes, &err)) throw Error("SentencePiece training failed: " + err);
  return from_bytes(bytes, "trained tokenizer");
}

Tokenizer Tokenizer::from_bytes(const std::string& bytes, const std::string& origin) {
  const auto& a = api();
  std::string err;
  void* p = a.load(bytes, &err);
  if (!p) throw Error(origin + ": not a SentencePiece model (" + err + ")");
  Tokenizer t;
  t.sp_ = std::shared_ptr<void>(p, a.destroy);
  int pad, unk, bos, eos;
  a.special_ids(p, &pad, &unk, &bos, &eos);
  if (pad != kPadId || unk != kUnkId || bos != kBosId || eos != kEosId)
    throw Error(origin + ": SentencePiece model must use pad=0 unk=1 bos=2 eos=3 (train it with "
                         "--pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3, or let nmt-train train one)");
  t.bytes_ = bytes;
  return t;
}

Tokenizer Tokenizer::load(const std::string& path) {
  return from_bytes(read_file_bounded(path, size_t{256} << 20, "SentencePiece model"), path);
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  std::string err;
  if (!api().encode_ids(sp_.get(), text, &ids, &err)) throw Error("tokenizer: " + err);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<int64_t> Tokenizer::sample(const std::string& text, int nbest, double alpha, uint64_t seed) const {
  std::vector<std::vector<int>> ids;
  std::vector<float> scores;
  std::string err;
  if (!api().nbest_ids(sp_.get(), text, nbest, &ids, &scores, &err))
    throw Error("tokenizer: sampling segmentations: " + err);
  if (ids.empty()) return encode(text);
  // P^alpha, relative to the most probable segmentation (scores are log P).
  const float top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> weight(scores.size());
  double total = 0;
  for (size_t i = 0; i < scores.size(); ++i) total += weight[i] = std::exp(alpha * (scores[i] - top));
  std::mt19937_64 rng(seed);
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  size_t pick = 0;
  while (pick + 1 < weight.size() && u >= weight[pick]) u -= weight[pick++];
  return std::vector<int64_t>(ids[pick].begin(), ids[pick].end());
}

std::vector<std::string> Tokenizer::pieces(const std::string& text) const {
  std::vector<std::string> out;
  std::string err;
  if (!api().encode_pieces(sp_.get(), text, &out, &err)) throw Error("tokenizer: " + err);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> keep;
  for (int64_t id : ids) {
    if (id == kEosId) break;
    if (id == kPadId || id == kBosId || id < 0 || id >= vocab_size()) continue;
    keep.push_back(static_cast<int>(id));
  }
  std::string out, err;
  if (!api().decode(sp_.get(), keep, &out, &err)) throw Error("tokenizer: " + err);
  return out;
}

std::string Tokenizer::piece(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<unk>";
  return api().id_to_piece(sp_.get(), static_cast<int>(id));
}

int64_t Tokenizer::vocab_size() const { return api().piece_size(sp_.get()); }

namespace {

// Protocol-buffer wire format, as far as model_type() reads it.
bool read_varint(std::string_view* s, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !s->empty(); shift += 7) {
    const auto b = static_cast<unsigned char>(s->front());
    s->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Reads the next field: its number, and its varint value or (wire type 2)
// its bytes; skips fixed-size values. False at the end or on bad bytes.
bool next_field(std::string_view* s, uint64_t* number, uint64_t* value, std::string_view* bytes) {
  uint64_t tag = 0;
  if (s->empty() || !read_varint(s, &tag)) return false;
  *number = tag >> 3;
  switch (tag & 7) {
    case 0: return read_varint(s, value);
    case 1:
    case 5: {
      const size_t n = (tag & 7) == 1 ? 8 : 4;
      if (s->size() < n) return false;
      s->remove_prefix(n);
      return true;
    }
    case 2: {
      uint64_t n = 0;
      if (!read_varint(s, &n) || n > s->size()) return false;
      *bytes = s->substr(0, n);
      s->remove_prefix(n);
      return true;
    }
    default: return false;
  }
}

}  // namespace

// sentencepiece_model.proto: ModelProto field 2 is the TrainerSpec, whose
// field 3 is model_type (UNIGRAM 1, BPE 2, WORD 3, CHAR 4; UNIGRAM when absent).
std::string Tokenizer::model_type() const {
  std::string_view model(bytes_), spec;
  bool found = false;
  uint64_t number = 0, value = 0;
  std::string_view field;
  while (next_field(&model, &number, &value, &field))
    if (number == 2) spec = field, found = true;
  if (!found) return "";
  static const char* const kTypes[] = {"", "unigram", "bpe", "word", "char"};
  std::string type = "unigram";
  while (next_field(&spec, &number, &value, &field))
    if (number == 3) type = value < 5 ? kTypes[value] : "";
  return type;
}

}  // namespace nmt
