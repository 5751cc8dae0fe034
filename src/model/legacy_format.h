// What the legacy_*.cc files share, inside the model layer: the reader of
// format 1 and 2 checkpoints (legacy_checkpoint.h) in three layers, a zip
// reader for the archive (legacy_zip.cc), a restricted pickle machine for its
// data.pkl (legacy_pickle.cc, its tensors in legacy_pickle_tensors.cc), and a
// walk from the unpickled module tree to a LegacyCheckpoint (legacy_tree.cc).
// Not for use outside them: model/legacy_checkpoint.h is the interface.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/legacy_checkpoint.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "storages are copied as they are: little-endian");

namespace nmt::legacy {

// Bounds: far above anything nmt writes, far below anything that hurts.
inline constexpr size_t kMaxValues = size_t{1} << 18;  // values one pickle may create (nmt writes ~15 a tensor)
inline constexpr size_t kMaxStack = size_t{1} << 20;   // values on the stack at once
inline constexpr size_t kMaxMarks = 32;                // nested MARKs (nmt's files nest 6)
inline constexpr size_t kMaxDims = 8;                  // tensor dimensions (nmt's have at most 2)
inline constexpr size_t kMaxNameBytes = 256;           // a GLOBAL's module or name

// --- shared helpers (legacy_checkpoint.cc) ---

// Throws nmt::Error: "legacy checkpoint: `what`", located at `origin`.
[[noreturn]] void fail(const std::string& origin, const std::string& what);

// `bytes` fit for an error message: printable ASCII, at most `max` of them.
// Never fails.
std::string printable(std::string_view bytes, size_t max = 60);

// printable(`bytes`) in single quotes. Never fails.
std::string in_quotes(std::string_view bytes);

// The `n`-byte little-endian number at `at` (the caller checked the bounds).
inline uint64_t le(std::string_view b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// a * b and a + b, false where they overflow.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// --- the zip (legacy_zip.cc) ---

// One entry of the zip's central directory, and where its bytes lie.
struct ZipEntry {
  uint64_t header_at = 0;  // its local header
  uint64_t size = 0;       // bytes in the archive
  uint64_t raw_size = 0;   // bytes once uncompressed
  uint32_t crc = 0;
  uint16_t method = 0;
  uint16_t flags = 0;
  std::string_view data;  // its bytes in the archive
  bool verified = false;  // CRC checked
};

// The entries of a zip archive, each found and bounds-checked.
class Zip {
 public:
  // Reads the directory of `z`. Throws nmt::Error for a truncated or
  // damaged archive, an entry outside it, or a name used twice.
  Zip(std::string_view z, const std::string& origin);

  // The folder holding data.pkl ("archive"). Throws nmt::Error unless
  // exactly one top-level folder holds one.
  std::string root() const;

  // The bytes of stored entry `name`, its CRC checked; nullopt if there is
  // no such entry. Throws nmt::Error for a compressed, encrypted or damaged one.
  std::optional<std::string_view> stored(const std::string& name);

 private:
  std::map<std::string, ZipEntry> entries_;
  const std::string& origin_;
};

// --- the pickle machine (legacy_pickle.cc, legacy_pickle_tensors.cc) ---

using Id = uint32_t;  // a value: its index in the machine's arena

enum class Kind : uint8_t {
  kBool, kInt, kFloat, kString, kTuple, kDict,
  kObject,       // a module: its class name and its attribute dict (once built)
  kModuleClass,  // GLOBAL __torch__[.___torch_mangle_N] Module
  kRebuild,      // GLOBAL torch._utils _rebuild_tensor_v2
  kOrderedDict,  // GLOBAL collections OrderedDict
  kStorageType,  // GLOBAL torch <Type>Storage
  kStorage,      // a BINPERSID storage: an archive entry with a dtype and element count
  kTensor,
};

// The name of kind `k` for error messages ("a tuple"). Never fails.
const char* kind_name(Kind k);

// A dict with string keys, in insertion order.
struct Dict {
  std::vector<std::pair<std::string_view, Id>> items;
  std::map<std::string_view, Id> index;
};

// One value the pickle made: `kind` tells which fields hold it.
struct Value {
  Kind kind = Kind::kInt;
  int64_t i = 0;                           // bool (0, 1), int; storage: element count
  double f = 0;                            // float
  std::string_view s;                      // string; object: class; storage: its key
  std::string_view data;                   // storage: its entry's bytes
  torch::ScalarType dtype = torch::kFloat;  // storage type, storage
  std::vector<Id> items;                   // tuple
  std::unique_ptr<Dict> dict;              // dict
  std::optional<Id> attrs;                 // object: its attribute dict, once built
  torch::Tensor tensor;                    // tensor
};

// Runs a pickle on a stack machine that knows only the opcodes and names
// TorchScript's pickler uses for nmt's checkpoints.
class Unpickler {
 public:
  // `copy_budget`: the most tensor bytes it may copy out in all.
  Unpickler(std::string_view pickle, Zip& zip, std::string root, uint64_t copy_budget, const std::string& origin)
      : p_(pickle), zip_(zip), root_(std::move(root)), budget_(copy_budget), origin_(origin) {}

  // Runs the pickle to its STOP; returns the value it left. Throws
  // nmt::Error for anything nmt's checkpoints never hold.
  Id run();

  // Value `id`, one that run() returned or that a value holds (not checked).
  const Value& operator[](Id id) const { return values_[id]; }

 private:
  // Throws nmt::Error: "pickle `what`".
  [[noreturn]] void bad(const std::string& what) const { fail(origin_, "pickle " + what); }

  // The next `n` bytes of the pickle, checked to be there.
  std::string_view take(uint64_t n) {
    if (n > p_.size() - at_)
      bad("wants " + std::to_string(n) + " bytes at byte " + std::to_string(at_) + ", past its end (" +
          std::to_string(p_.size()) + " bytes)");
    const std::string_view out = p_.substr(at_, n);
    at_ += n;
    return out;
  }
  // The next `n` bytes as a little-endian number; throws as take().
  uint64_t take_le(int n) { return le(take(n), 0, n); }

  // One line of a GLOBAL (module or name), without its newline.
  std::string_view take_line() {
    const size_t end = p_.find('\n', at_);
    if (end == std::string_view::npos || end - at_ > kMaxNameBytes) bad("has a GLOBAL without its newline");
    const size_t n = end - at_;
    return take(n + 1).substr(0, n);
  }

  // Stores `v` in the arena; returns its id. Throws past kMaxValues values.
  Id make(Value v) {
    if (values_.size() >= kMaxValues) bad("creates more than " + std::to_string(kMaxValues) + " values");
    values_.push_back(std::move(v));
    return static_cast<Id>(values_.size() - 1);
  }
  // Pushes `id`. Throws past kMaxStack values on the stack.
  void push(Id id) {
    if (stack_.size() >= kMaxStack) bad("holds more than " + std::to_string(kMaxStack) + " values on its stack");
    stack_.push_back(id);
  }
  // make(`v`) and push it; throws as they do.
  void push_new(Value v) { push(make(std::move(v))); }
  // Pops the top value. Throws if the stack (above the last MARK) is empty.
  Id pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) bad("pops an empty stack");
    const Id id = stack_.back();
    stack_.pop_back();
    return id;
  }
  // The top value, left in place; throws as pop().
  Id top() {
    const Id id = pop();
    stack_.push_back(id);
    return id;
  }
  // The values above the last MARK, removing them and the MARK. Throws
  // if no MARK is open.
  std::vector<Id> pop_mark() {
    if (marks_.empty()) bad("ends a MARK it never began");
    std::vector<Id> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  // Value `id`, required to be of `kind` in `what`: throws nmt::Error if
  // it is of another.
  Value& expect(Id id, Kind kind, const char* what) {
    Value& v = values_[id];
    if (v.kind != kind) bad("gives " + std::string(kind_name(v.kind)) + " where " + what + " takes " + kind_name(kind));
    return v;
  }

  // The opcodes (legacy_pickle.cc; storages and tensors in
  // legacy_pickle_tensors.cc), each commented where it is defined.
  void step(uint8_t op, size_t at);
  void op_global();
  void op_memo_put(uint64_t index);
  void op_memo_get(uint64_t index);
  void op_mark();
  void op_tuple(std::vector<Id> items);
  void op_setitems();
  void op_newobj();
  void op_build();
  void op_persid();
  void op_reduce();
  void op_scalar(Kind kind, int64_t i, double f = 0);
  void op_string(uint64_t n);
  int64_t long1();
  double binfloat();
  Id rebuild_tensor(const std::vector<Id>& args);
  std::vector<int64_t> int_tuple(Id id, const char* what);
  torch::Tensor copy_out(const Value& storage, int64_t offset, const std::vector<int64_t>& sizes,
                         const std::vector<int64_t>& strides, uint64_t numel);

  std::string_view p_;
  size_t at_ = 0;
  Zip& zip_;
  std::string root_;
  uint64_t budget_;
  const std::string& origin_;
  std::deque<Value> values_;  // a deque: values never move, so views of their strings stay valid
  std::vector<Id> stack_;
  std::vector<Id> memo_;
  std::vector<size_t> marks_;  // stack heights at each open MARK
};

// --- from the module tree to a LegacyCheckpoint (legacy_tree.cc) ---

// The checkpoint that value `root` of `u` (a module) describes. Throws
// nmt::Error naming `origin` for a missing, mistyped or unknown entry.
LegacyCheckpoint read_tree(const Unpickler& u, Id root, const std::string& origin);

}  // namespace nmt::legacy
