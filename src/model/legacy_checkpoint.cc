// Reads format 1 and 2 checkpoints without LibTorch's loader (see
// legacy_checkpoint.h), in three layers: a zip reader for the archive, a
// restricted pickle machine for its data.pkl, and a walk from the unpickled
// module tree to a LegacyCheckpoint.
//
// The pickle is what TorchScript's pickler (LibTorch 1.13) writes for a tree
// of torch::serialize::OutputArchive modules: protocol 2, each module an
// object of class __torch__[.___torch_mangle_N].Module built from a dict of
// its attributes, each tensor torch._utils._rebuild_tensor_v2 called on a
// storage (a BINPERSID reference to archive/data/<key>), an offset, sizes,
// strides, requires_grad and an empty collections.OrderedDict of hooks.
// Nothing here calls anything a name in the file designates: the three
// names are recognized and their effect is done by this code.
#include "model/legacy_checkpoint.h"


#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include "base/error.h"
#include "model/crc32.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "storages are copied as they are: little-endian");

namespace nmt {
namespace {

// Bounds: far above anything nmt writes, far below anything that hurts.
constexpr size_t kMaxValues = size_t{1} << 18;  // values one pickle may create (nmt writes ~15 a tensor)
constexpr size_t kMaxStack = size_t{1} << 20;   // values on the stack at once
constexpr size_t kMaxMarks = 32;                // nested MARKs (nmt's files nest 6)
constexpr size_t kMaxDims = 8;                  // tensor dimensions (nmt's have at most 2)
constexpr size_t kMaxNameBytes = 256;           // a GLOBAL's module or name

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error(located(origin, 0, "legacy checkpoint: " + what));
}

// `bytes` fit for an error message: printable ASCII, at most `max` of them.
std::string printable(std::string_view bytes, size_t max = 60) {
  std::string out;
  for (char c : bytes.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (bytes.size() > max) out += "...";
  return out;
}

std::string in_quotes(std::string_view bytes) { return "'" + printable(bytes) + "'"; }

// The `n`-byte little-endian number at `at` (the caller checked the bounds).
uint64_t le(std::string_view b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// a * b and a + b, false where they overflow.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// --- the zip --------------------------------------------------------------

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

struct CentralDir {
  uint64_t at = 0, size = 0, count = 0;
  uint64_t end = 0;  // where the records after it begin: data must lie before
};

bool has_sig(std::string_view z, uint64_t at, const char* sig) {
  return at <= z.size() && z.size() - at >= 4 && z.compare(at, 4, sig, 4) == 0;
}

// Reads the central directory's place from the end-of-central-directory
// record at `eocd`, or from the zip64 record a locator before it points to
// (PyTorch's writer always adds one). Throws nmt::Error if it lies outside.
CentralDir central_dir_at(std::string_view z, uint64_t eocd, const std::string& origin) {
  CentralDir d{le(z, eocd + 16, 4), le(z, eocd + 12, 4), le(z, eocd + 10, 2), eocd};
  if (le(z, eocd + 4, 2) != 0 || le(z, eocd + 6, 2) != 0 || le(z, eocd + 8, 2) != d.count)
    fail(origin, "the zip archive spans several disks");
  if (eocd >= 20 && has_sig(z, eocd - 20, "PK\6\7")) {
    const uint64_t at = le(z, eocd - 20 + 8, 8);
    if (at > eocd - 20 || eocd - 20 - at < 56 || !has_sig(z, at, "PK\6\6") || le(z, at + 24, 8) != le(z, at + 32, 8))
      fail(origin, "damaged zip64 end-of-central-directory record");
    d = {le(z, at + 48, 8), le(z, at + 40, 8), le(z, at + 32, 8), at};
  } else if (d.at == 0xFFFFFFFF || d.size == 0xFFFFFFFF || d.count == 0xFFFF) {
    fail(origin, "zip64 archive without its zip64 end-of-central-directory record");
  }
  if (d.at > d.end || d.size > d.end - d.at) fail(origin, "the zip's central directory lies outside the archive");
  return d;
}

// Finds the end-of-central-directory record (its comment reaching the end).
// Throws nmt::Error if there is none: a truncated file or not a zip.
CentralDir find_central_dir(std::string_view z, const std::string& origin) {
  if (z.size() >= 22) {
    const uint64_t lowest = z.size() > 22 + 0xFFFF ? z.size() - 22 - 0xFFFF : 0;
    for (uint64_t at = z.size() - 22 + 1; at-- > lowest;)
      if (has_sig(z, at, "PK\5\6") && at + 22 + le(z, at + 20, 2) == z.size()) return central_dir_at(z, at, origin);
  }
  fail(origin, "truncated, or not a zip archive (no end-of-central-directory record)");
}

// Applies an entry's zip64 extra field (id 1): the 8-byte sizes and offset
// that replace the 32-bit ones set to 0xFFFFFFFF, in the order zip defines.
void apply_zip64_extra(std::string_view extra, ZipEntry& e, const std::string& name, const std::string& origin) {
  while (extra.size() >= 4) {
    const uint64_t id = le(extra, 0, 2), len = le(extra, 2, 2);
    if (len > extra.size() - 4) fail(origin, "zip entry " + in_quotes(name) + " has a damaged extra field");
    std::string_view field = extra.substr(4, len);
    extra.remove_prefix(4 + len);
    if (id != 1) continue;
    for (uint64_t* v : {&e.raw_size, &e.size, &e.header_at}) {
      if (*v != 0xFFFFFFFF) continue;
      if (field.size() < 8) fail(origin, "zip entry " + in_quotes(name) + " has a damaged zip64 field");
      *v = le(field, 0, 8);
      field.remove_prefix(8);
    }
  }
}

// Finds the bytes of `e` after its local header; all must lie before `end`
// (the central directory). Throws nmt::Error if they do not.
void locate(std::string_view z, uint64_t end, const std::string& name, ZipEntry& e, const std::string& origin) {
  const uint64_t h = e.header_at;
  if (h > end || end - h < 30 || !has_sig(z, h, "PK\3\4"))
    fail(origin, "zip entry " + in_quotes(name) + " has no local header where the directory says");
  const uint64_t name_len = le(z, h + 26, 2), data_at = h + 30 + name_len + le(z, h + 28, 2);
  if (data_at > end || e.size > end - data_at)
    fail(origin, "zip entry " + in_quotes(name) + " (" + std::to_string(e.size) + " bytes at " + std::to_string(data_at) +
                     ") runs past the end of the archive (" + std::to_string(end) + " bytes of entries)");
  if (z.substr(h + 30, name_len) != name) fail(origin, "zip entry " + in_quotes(name) + ": its local header names another");
  e.data = z.substr(data_at, e.size);
}

// Reads the central directory record at `at` (before `end`) into `e`;
// returns its name and moves `at` past it.
std::string read_dir_record(std::string_view z, uint64_t& at, uint64_t end, ZipEntry& e, const std::string& origin) {
  if (end - at < 46 || !has_sig(z, at, "PK\1\2")) fail(origin, "damaged zip central directory");
  const uint64_t name_len = le(z, at + 28, 2), extra_len = le(z, at + 30, 2);
  const uint64_t record = 46 + name_len + extra_len + le(z, at + 32, 2);
  if (end - at < record) fail(origin, "damaged zip central directory (a record runs past its end)");
  std::string name(z.substr(at + 46, name_len));
  e.flags = static_cast<uint16_t>(le(z, at + 8, 2));
  e.method = static_cast<uint16_t>(le(z, at + 10, 2));
  e.crc = static_cast<uint32_t>(le(z, at + 16, 4));
  e.size = le(z, at + 20, 4);
  e.raw_size = le(z, at + 24, 4);
  e.header_at = le(z, at + 42, 4);
  apply_zip64_extra(z.substr(at + 46 + name_len, extra_len), e, name, origin);
  at += record;
  return name;
}

// The entries of a zip archive, each found and bounds-checked.
class Zip {
 public:
  // Reads the directory of `z`. Throws nmt::Error for a truncated or
  // damaged archive, an entry outside it, or a name used twice.
  Zip(std::string_view z, const std::string& origin) : origin_(origin) {
    const CentralDir d = find_central_dir(z, origin);
    if (d.count > d.size / 46) fail(origin, "the zip's central directory claims more entries than it holds");
    uint64_t at = d.at;
    for (uint64_t i = 0; i < d.count; ++i) {
      ZipEntry e;
      std::string name = read_dir_record(z, at, d.at + d.size, e, origin);
      locate(z, d.at, name, e, origin);
      if (!entries_.emplace(name, e).second) fail(origin, "zip entry " + in_quotes(name) + " appears twice; nmt never writes that");
    }
  }

  // The folder holding data.pkl ("archive"). Throws nmt::Error unless
  // exactly one top-level folder holds one.
  std::string root() const {
    std::string found;
    for (const auto& [name, e] : entries_) {
      const size_t slash = name.find('/');
      if (slash == std::string::npos || name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
      if (!found.empty()) fail(origin_, "the archive holds two data.pkl entries");
      found = name.substr(0, slash);
    }
    if (found.empty()) fail(origin_, "the archive holds no data.pkl: not a LibTorch archive");
    return found;
  }

  // The bytes of stored entry `name`, its CRC checked; nullopt if there is
  // no such entry. Throws nmt::Error for a compressed, encrypted or damaged one.
  std::optional<std::string_view> stored(const std::string& name) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    ZipEntry& e = it->second;
    if (e.method != 0 || e.size != e.raw_size || (e.flags & 1))
      fail(origin_, "zip entry " + in_quotes(name) + " is compressed or encrypted; nmt stores its entries");
    if (!e.verified && crc32_of(e.data) != e.crc) fail(origin_, "zip entry " + in_quotes(name) + " is damaged (CRC mismatch)");
    e.verified = true;
    return e.data;
  }

 private:
  std::map<std::string, ZipEntry> entries_;
  const std::string& origin_;
};

// --- the pickle machine ---------------------------------------------------

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

const char* kind_name(Kind k) {
  static const char* names[] = {"a boolean", "an integer", "a float", "a string", "a tuple", "a dict", "a module",
                                "a module class", "_rebuild_tensor_v2", "OrderedDict", "a storage type",
                                "a storage", "a tensor"};
  return names[static_cast<int>(k)];
}

// A dict with string keys, in insertion order.
struct Dict {
  std::vector<std::pair<std::string_view, Id>> items;
  std::map<std::string_view, Id> index;
};

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

// The storage types nmt's files hold: weights and optimizer moments (float),
// size counts (long), generator states (byte).
std::optional<torch::ScalarType> storage_dtype(std::string_view name) {
  if (name == "FloatStorage") return torch::kFloat;
  if (name == "LongStorage") return torch::kLong;
  if (name == "ByteStorage") return torch::kByte;
  return std::nullopt;
}

bool is_module_class(std::string_view module, std::string_view name) {
  constexpr std::string_view kMangled = "__torch__.___torch_mangle_";
  if (name != "Module") return false;
  if (module == "__torch__") return true;
  if (module.substr(0, kMangled.size()) != kMangled || module.size() == kMangled.size() || module.size() > kMangled.size() + 9)
    return false;
  return std::all_of(module.begin() + kMangled.size(), module.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether `strides` lay out `sizes` densely, row-major. The caller checked
// that the element count fits (no product here overflows).
bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, uint64_t numel) {
  if (numel == 0) return true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// Runs a pickle on a stack machine that knows only the opcodes and names
// TorchScript's pickler uses for nmt's checkpoints.
class Unpickler {
 public:
  // `copy_budget`: the most tensor bytes it may copy out in all.
  Unpickler(std::string_view pickle, Zip& zip, std::string root, uint64_t copy_budget, const std::string& origin)
      : p_(pickle), zip_(zip), root_(std::move(root)), budget_(copy_budget), origin_(origin) {}

  // Runs the pickle to its STOP; returns the value it left. Throws
  // nmt::Error for anything nmt's checkpoints never hold.
  Id run() {
    if (take_le(1) != 0x80 || take_le(1) != 2) fail(origin_, "data.pkl is not a protocol 2 pickle");
    for (;;) {
      const size_t at = at_;
      const auto op = static_cast<uint8_t>(take_le(1));
      if (op == '.') break;
      step(op, at);
    }
    if (stack_.size() != 1 || !marks_.empty() || at_ != p_.size())
      fail(origin_, "the pickle does not end with exactly one value and its STOP");
    return stack_.back();
  }

  const Value& operator[](Id id) const { return values_[id]; }

 private:
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
  uint64_t take_le(int n) { return le(take(n), 0, n); }

  // One line of a GLOBAL (module or name), without its newline.
  std::string_view take_line() {
    const size_t end = p_.find('\n', at_);
    if (end == std::string_view::npos || end - at_ > kMaxNameBytes) bad("has a GLOBAL without its newline");
    const size_t n = end - at_;
    return take(n + 1).substr(0, n);
  }

  Id make(Value v) {
    if (values_.size() >= kMaxValues) bad("creates more than " + std::to_string(kMaxValues) + " values");
    values_.push_back(std::move(v));
    return static_cast<Id>(values_.size() - 1);
  }
  void push(Id id) {
    if (stack_.size() >= kMaxStack) bad("holds more than " + std::to_string(kMaxStack) + " values on its stack");
    stack_.push_back(id);
  }
  void push_new(Value v) { push(make(std::move(v))); }
  Id pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) bad("pops an empty stack");
    const Id id = stack_.back();
    stack_.pop_back();
    return id;
  }
  Id top() {
    const Id id = pop();
    stack_.push_back(id);
    return id;
  }
  // The values above the last MARK, removing them and the MARK.
  std::vector<Id> pop_mark() {
    if (marks_.empty()) bad("ends a MARK it never began");
    std::vector<Id> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  // Value `id`, required to be of `kind` in `what`.
  Value& expect(Id id, Kind kind, const char* what) {
    Value& v = values_[id];
    if (v.kind != kind) bad("gives " + std::string(kind_name(v.kind)) + " where " + what + " takes " + kind_name(kind));
    return v;
  }

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

// Runs one opcode, `op` at byte `at`. Anything else is refused.
void Unpickler::step(uint8_t op, size_t at) {
  switch (op) {
    case 'c': return op_global();
    case 'q': return op_memo_put(take_le(1));         // BINPUT
    case 'r': return op_memo_put(take_le(4));         // LONG_BINPUT
    case 'h': return op_memo_get(take_le(1));         // BINGET
    case 'j': return op_memo_get(take_le(4));         // LONG_BINGET
    case '(': return op_mark();
    case ')': return op_tuple({});                    // EMPTY_TUPLE
    case 0x85: return op_tuple({pop()});              // TUPLE1
    case 0x86: { const Id b = pop(), a = pop(); return op_tuple({a, b}); }               // TUPLE2
    case 0x87: { const Id c = pop(), b = pop(), a = pop(); return op_tuple({a, b, c}); }  // TUPLE3
    case 't': return op_tuple(pop_mark());            // TUPLE
    case '}': { Value v; v.kind = Kind::kDict; v.dict = std::make_unique<Dict>(); return push_new(std::move(v)); }
    case 'u': return op_setitems();
    case 0x81: return op_newobj();
    case 'b': return op_build();
    case 'X': return op_string(take_le(4));           // BINUNICODE (bytes, not checked as UTF-8)
    case 'K': return op_scalar(Kind::kInt, static_cast<int64_t>(take_le(1)));  // BININT1
    case 'M': return op_scalar(Kind::kInt, static_cast<int64_t>(take_le(2)));  // BININT2
    case 'J': return op_scalar(Kind::kInt, static_cast<int32_t>(take_le(4)));  // BININT
    case 0x8a: return op_scalar(Kind::kInt, long1());  // LONG1
    case 'G': return op_scalar(Kind::kFloat, 0, binfloat());
    case 0x88: return op_scalar(Kind::kBool, 1);      // NEWTRUE
    case 0x89: return op_scalar(Kind::kBool, 0);      // NEWFALSE
    case 'Q': return op_persid();
    case 'R': return op_reduce();
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  bad("opcode " + std::string(hex) + " at byte " + std::to_string(at) +
      " is not one nmt's checkpoints use; refusing to read it");
}

// GLOBAL: only the names nmt's files use; each becomes a marker value.
void Unpickler::op_global() {
  const std::string_view module = take_line(), name = take_line();
  Value v;
  if (is_module_class(module, name)) {
    v.kind = Kind::kModuleClass;
    v.s = name;
  } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    v.kind = Kind::kRebuild;
  } else if (module == "collections" && name == "OrderedDict") {
    v.kind = Kind::kOrderedDict;
  } else if (const auto dtype = module == "torch" ? storage_dtype(name) : std::nullopt) {
    v.kind = Kind::kStorageType;
    v.dtype = *dtype;
  } else {
    bad("uses " + in_quotes(std::string(module) + "." + std::string(name)) + ", which nmt never writes; refusing to read it");
  }
  push_new(std::move(v));
}

void Unpickler::op_memo_put(uint64_t index) {
  if (index > memo_.size() || index >= kMaxValues)
    bad("stores memo entry " + std::to_string(index) + " out of order (" + std::to_string(memo_.size()) + " so far)");
  if (index == memo_.size()) memo_.push_back(top());
  else memo_[index] = top();
}

void Unpickler::op_memo_get(uint64_t index) {
  if (index >= memo_.size())
    bad("reads memo entry " + std::to_string(index) + " of " + std::to_string(memo_.size()) + ": out of range");
  push(memo_[index]);
}

void Unpickler::op_mark() {
  if (marks_.size() >= kMaxMarks) bad("nests MARKs deeper than " + std::to_string(kMaxMarks));
  marks_.push_back(stack_.size());
}

void Unpickler::op_tuple(std::vector<Id> items) {
  Value v;
  v.kind = Kind::kTuple;
  v.items = std::move(items);
  push_new(std::move(v));
}

void Unpickler::op_scalar(Kind kind, int64_t i, double f) {
  Value v;
  v.kind = kind;
  v.i = i;
  v.f = f;
  push_new(std::move(v));
}

void Unpickler::op_string(uint64_t n) {
  Value v;
  v.kind = Kind::kString;
  v.s = take(n);
  push_new(std::move(v));
}

// LONG1: a little-endian two's-complement integer of up to 8 bytes.
int64_t Unpickler::long1() {
  const auto n = static_cast<int>(take_le(1));
  if (n > 8) bad("holds an integer of " + std::to_string(n) + " bytes; nmt's fit in 8");
  if (n == 0) return 0;
  uint64_t v = take_le(n);
  if (n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
  return static_cast<int64_t>(v);
}

// BINFLOAT: a big-endian IEEE double.
double Unpickler::binfloat() {
  const std::string_view b = take(8);
  uint64_t bits = 0;
  for (char c : b) bits = (bits << 8) | static_cast<unsigned char>(c);
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// SETITEMS: key, value pairs above the MARK into the dict below it. Keys
// are strings, each set once.
void Unpickler::op_setitems() {
  const std::vector<Id> items = pop_mark();
  Dict& d = *expect(top(), Kind::kDict, "SETITEMS").dict;
  if (items.size() % 2) bad("gives SETITEMS a key without its value");
  for (size_t k = 0; k < items.size(); k += 2) {
    const std::string_view key = expect(items[k], Kind::kString, "a dict key").s;
    if (!d.index.emplace(key, items[k + 1]).second) bad("sets " + in_quotes(key) + " twice in one dict");
    d.items.emplace_back(key, items[k + 1]);
  }
}

// NEWOBJ: a module object, empty until BUILD gives it its attributes.
void Unpickler::op_newobj() {
  const Id args = pop();
  const Value& cls = expect(pop(), Kind::kModuleClass, "NEWOBJ");
  if (!expect(args, Kind::kTuple, "NEWOBJ's arguments").items.empty()) bad("passes arguments to a module's NEWOBJ");
  Value v;
  v.kind = Kind::kObject;
  v.s = cls.s;
  push_new(std::move(v));
}

// BUILD: a module's attribute dict, set once (never a __setstate__ call).
void Unpickler::op_build() {
  const Id state = pop();
  expect(state, Kind::kDict, "BUILD");
  Value& obj = expect(top(), Kind::kObject, "BUILD");
  if (obj.attrs) bad("builds one module twice");
  obj.attrs = state;
}

// BINPERSID: ("storage", <Type>Storage, key, location, element count),
// resolved to entry <root>/data/<key>, whose size must be that count's.
void Unpickler::op_persid() {
  const Value& pid = expect(pop(), Kind::kTuple, "BINPERSID");
  if (pid.items.size() != 5 || expect(pid.items[0], Kind::kString, "BINPERSID").s != "storage")
    bad("has a persistent id that is not a storage");
  const Value& type = expect(pid.items[1], Kind::kStorageType, "a storage's type");
  const std::string_view key = expect(pid.items[2], Kind::kString, "a storage's key").s;
  const std::string_view where = expect(pid.items[3], Kind::kString, "a storage's location").s;
  const int64_t numel = expect(pid.items[4], Kind::kInt, "a storage's size").i;
  if (key.empty() || key.size() > 20 || !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
    bad("names storage " + in_quotes(key) + "; nmt's are numbered");
  if (where != "cpu" && where.substr(0, 4) != "cuda") bad("puts a storage on " + in_quotes(where));
  const auto data = zip_.stored(root_ + "/data/" + std::string(key));
  if (!data) bad("refers to storage " + in_quotes(key) + ", which the archive lacks");
  const uint64_t element = c10::elementSize(type.dtype);
  uint64_t bytes = 0;
  if (numel < 0 || !mul_ok(static_cast<uint64_t>(numel), element, &bytes) || bytes != data->size())
    bad("declares storage " + in_quotes(key) + " of " + std::to_string(numel) + " elements of " + std::to_string(element) +
        " bytes, but its entry holds " + std::to_string(data->size()) + " bytes");
  Value v;
  v.kind = Kind::kStorage;
  v.s = key;
  v.data = *data;
  v.dtype = type.dtype;
  v.i = numel;
  push_new(std::move(v));
}

// REDUCE: only OrderedDict() (a tensor's empty hooks) and _rebuild_tensor_v2.
void Unpickler::op_reduce() {
  const Value& args = expect(pop(), Kind::kTuple, "REDUCE");
  const Id callable = pop();
  const Kind kind = values_[callable].kind;
  if (kind == Kind::kOrderedDict && args.items.empty()) {
    Value v;
    v.kind = Kind::kDict;
    v.dict = std::make_unique<Dict>();
    return push_new(std::move(v));
  }
  if (kind == Kind::kRebuild) return push(rebuild_tensor(args.items));
  bad("calls " + std::string(kind_name(kind)) + " with " + std::to_string(args.items.size()) +
      " arguments; nmt's files never do");
}

// A tuple of non-negative integers (a tensor's sizes or strides).
std::vector<int64_t> Unpickler::int_tuple(Id id, const char* what) {
  const Value& t = expect(id, Kind::kTuple, what);
  if (t.items.size() > kMaxDims) bad("gives a tensor more than " + std::to_string(kMaxDims) + " dimensions");
  std::vector<int64_t> out;
  for (Id item : t.items) {
    out.push_back(expect(item, Kind::kInt, what).i);
    if (out.back() < 0) bad(std::string("gives a tensor negative ") + what);
  }
  return out;
}

// _rebuild_tensor_v2(storage, offset, sizes, strides, requires_grad, hooks):
// the view is checked to lie within its storage (checked arithmetic) before
// it is copied out.
Id Unpickler::rebuild_tensor(const std::vector<Id>& args) {
  if (args.size() != 6) bad("rebuilds a tensor from " + std::to_string(args.size()) + " arguments, not 6");
  const Value& storage = expect(args[0], Kind::kStorage, "a tensor's storage");
  const int64_t offset = expect(args[1], Kind::kInt, "a tensor's offset").i;
  const std::vector<int64_t> sizes = int_tuple(args[2], "sizes"), strides = int_tuple(args[3], "strides");
  expect(args[4], Kind::kBool, "a tensor's requires_grad");
  if (!expect(args[5], Kind::kDict, "a tensor's hooks").dict->items.empty()) bad("gives a tensor hooks");
  if (sizes.size() != strides.size()) bad("gives a tensor sizes and strides of different lengths");
  bool fits = offset >= 0;
  uint64_t numel = 1, last = static_cast<uint64_t>(offset), span = 0;
  for (size_t d = 0; d < sizes.size(); ++d) fits = fits && mul_ok(numel, static_cast<uint64_t>(sizes[d]), &numel);
  for (size_t d = 0; d < sizes.size() && numel > 0; ++d)
    fits = fits && mul_ok(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &span) &&
           add_ok(last, span, &last);
  const auto storage_numel = static_cast<uint64_t>(storage.i);
  if (!fits || (numel > 0 ? last >= storage_numel : last > storage_numel))
    bad("has a tensor view (offset " + std::to_string(offset) + ") outside its storage " + in_quotes(storage.s) + " of " +
        std::to_string(storage_numel) + " elements");
  Value v;
  v.kind = Kind::kTensor;
  v.tensor = copy_out(storage, offset, sizes, strides, numel);
  return make(std::move(v));
}

// The view's `numel` elements in a new contiguous tensor, charged to the
// budget (with the whole storage, when the view is not dense).
torch::Tensor Unpickler::copy_out(const Value& storage, int64_t offset, const std::vector<int64_t>& sizes,
                                  const std::vector<int64_t>& strides, uint64_t numel) {
  const auto options = torch::TensorOptions().dtype(storage.dtype);
  const size_t element = c10::elementSize(storage.dtype);
  uint64_t bytes = 0;
  if (!mul_ok(numel, element, &bytes) || bytes > budget_)
    bad("makes tensors of more bytes than the archive holds; nmt's files never share storages");
  const bool dense = contiguous(sizes, strides, numel);
  if (!dense && !add_ok(bytes, storage.data.size(), &bytes)) bytes = UINT64_MAX;
  if (bytes > budget_) bad("makes tensors of more bytes than the archive holds; nmt's files never share storages");
  budget_ -= bytes;
  if (dense) {
    torch::Tensor t = torch::empty(sizes, options);
    if (numel > 0) std::memcpy(t.data_ptr(), storage.data.data() + static_cast<size_t>(offset) * element, numel * element);
    return t;
  }
  torch::Tensor whole = torch::empty({storage.i}, options);
  if (!storage.data.empty()) std::memcpy(whole.data_ptr(), storage.data.data(), storage.data.size());
  return whole.as_strided(sizes, strides, offset).clone(at::MemoryFormat::Contiguous);
}

// --- from the module tree to a LegacyCheckpoint ---------------------------

// Typed reads of the unpickled tree; errors name the entry's path.
class Tree {
 public:
  Tree(const Unpickler& u, const std::string& origin) : u_(u), origin_(origin) {}

  // The attributes of module `id` at `path`.
  const Dict& module(Id id, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind != Kind::kObject || !v.attrs) wrong(path, "a module", v);
    return *u_[*v.attrs].dict;
  }
  // Attribute `key` of `d` (at `path`), or nullopt.
  static std::optional<Id> find(const Dict& d, std::string_view key) {
    const auto it = d.index.find(key);
    return it == d.index.end() ? std::nullopt : std::optional<Id>(it->second);
  }
  Id get(const Dict& d, std::string_view key, const std::string& path) const {
    const auto id = find(d, key);
    if (!id) fail(origin_, path + " lacks '" + std::string(key) + "'");
    return *id;
  }
  const Value& typed(Id id, Kind kind, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind != kind) wrong(path, kind_name(kind), v);
    return v;
  }
  std::string str(Id id, const std::string& path) const { return std::string(typed(id, Kind::kString, path).s); }
  int64_t integer(Id id, const std::string& path) const { return typed(id, Kind::kInt, path).i; }
  double real(Id id, const std::string& path) const { return typed(id, Kind::kFloat, path).f; }
  bool boolean(Id id, const std::string& path) const { return typed(id, Kind::kBool, path).i != 0; }
  torch::Tensor tensor(Id id, const std::string& path) const { return typed(id, Kind::kTensor, path).tensor; }
  // A one-element long tensor's value (LibTorch's "…/size" counts).
  int64_t count(Id id, const std::string& path) const {
    const torch::Tensor t = tensor(id, path);
    if (t.scalar_type() != torch::kLong || t.numel() != 1) fail(origin_, path + " is not a count");
    return t.item<int64_t>();
  }
  // An option's value: a float, an integer, a boolean (0, 1), or (betas) a pair of floats.
  void option(Id id, const std::string& key, std::map<std::string, double>& out, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind == Kind::kFloat) out[key] = v.f;
    else if (v.kind == Kind::kInt || v.kind == Kind::kBool) out[key] = static_cast<double>(v.i);
    else if (key == "betas" && v.kind == Kind::kTuple && v.items.size() == 2) {
      out["beta1"] = real(v.items[0], path);
      out["beta2"] = real(v.items[1], path);
    } else wrong(path, "a number", v);
  }
  [[noreturn]] void wrong(const std::string& path, const char* want, const Value& got) const {
    fail(origin_, path + " is " + kind_name(got.kind) + ", not " + want);
  }
  const std::string& origin() const { return origin_; }

 private:
  const Unpickler& u_;
  const std::string& origin_;
};

// Refuses any attribute of `d` (at `path`) outside `known`.
void only(const Tree& t, const Dict& d, std::initializer_list<std::string_view> known, const std::string& path) {
  for (const auto& [key, id] : d.items)
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(t.origin(), path + " holds " + in_quotes(key) + ", which nmt never writes");
}

void read_weights(const Tree& t, const Dict& model, LegacyCheckpoint& c) {
  for (const auto& [key, id] : model.items) {
    std::string name(key);
    c.weights[name] = t.tensor(id, "weight " + in_quotes(name));
    c.weight_order.push_back(std::move(name));
  }
}

LegacyParamState read_param_state(const Tree& t, const Dict& d, const std::string& path) {
  only(t, d, {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"}, path);
  LegacyParamState s;
  if (const auto id = Tree::find(d, "step")) s.has_step = true, s.step = t.integer(*id, path + ".step");
  const std::pair<const char*, torch::Tensor*> tensors[] = {{"exp_avg", &s.exp_avg},
                                                             {"exp_avg_sq", &s.exp_avg_sq},
                                                             {"max_exp_avg_sq", &s.max_exp_avg_sq},
                                                             {"momentum_buffer", &s.momentum_buffer}};
  for (const auto& [key, out] : tensors)
    if (const auto id = Tree::find(d, key)) *out = t.tensor(*id, path + "." + key);
  return s;
}

// One parameter group: its parameters' keys ("0x..." in the file) and options.
LegacyParamGroup read_group(const Tree& t, const Dict& g, const std::string& path) {
  const int64_t n = t.count(t.get(g, "params/size", path), path + ".params/size");
  if (n < 0 || static_cast<uint64_t>(n) + 2 != g.items.size()) fail(t.origin(), path + " does not hold its " + std::to_string(n) + " parameters and options");
  LegacyParamGroup group;
  for (int64_t j = 0; j < n; ++j) {
    const std::string key = "params/" + std::to_string(j);
    group.params.push_back(t.str(t.get(g, key, path), path + "." + key));
  }
  for (const auto& [key, id] : t.module(t.get(g, "options", path), path + ".options").items)
    t.option(id, std::string(key), group.options, path + ".options." + std::string(key));
  return group;
}

std::vector<LegacyParamGroup> read_groups(const Tree& t, const Dict& d) {
  const int64_t n = t.count(t.get(d, "param_groups/size", "optimizer.param_groups"), "optimizer.param_groups/size");
  if (n < 0 || static_cast<uint64_t>(n) + 1 != d.items.size()) fail(t.origin(), "optimizer.param_groups does not hold its " + std::to_string(n) + " groups");
  std::vector<LegacyParamGroup> groups;
  for (int64_t i = 0; i < n; ++i) {
    const std::string path = "optimizer.param_groups/" + std::to_string(i);
    groups.push_back(read_group(t, t.module(t.get(d, "param_groups/" + std::to_string(i), "optimizer.param_groups"), path), path));
  }
  return groups;
}

// Names the groups' parameters: the optimizer was made from
// model->parameters(), whose order is the weights' order in the file.
// Returns the file's parameter keys ("0x...") to names.
std::map<std::string, std::string> name_params(const Tree& t, std::vector<LegacyParamGroup>& groups, const LegacyCheckpoint& c) {
  std::map<std::string, std::string> names;
  size_t k = 0;
  for (auto& g : groups)
    for (auto& key : g.params) {
      if (k >= c.weight_order.size()) fail(t.origin(), "the optimizer holds more parameters than the model has weights");
      if (!names.emplace(key, c.weight_order[k]).second) fail(t.origin(), "the optimizer lists parameter " + in_quotes(key) + " twice");
      key = c.weight_order[k++];
    }
  return names;
}

// The optimizer's kind, told by its options: Adam has betas, SGD momentum.
std::string optimizer_kind(const Tree& t, const std::vector<LegacyParamGroup>& groups) {
  std::string kind;
  for (const auto& g : groups) {
    const std::string k = g.options.count("beta1") ? "adam" : g.options.count("momentum") ? "sgd" : "";
    if (k.empty() || (!kind.empty() && k != kind)) fail(t.origin(), "the optimizer is neither Adam nor SGD");
    kind = k;
  }
  return kind;
}

void read_optimizer(const Tree& t, const Dict& d, LegacyCheckpoint& c) {
  only(t, d, {"pytorch_version", "state", "param_groups"}, "optimizer");
  if (t.str(t.get(d, "pytorch_version", "optimizer"), "optimizer.pytorch_version") != "1.5.0")
    fail(t.origin(), "the optimizer's format is not LibTorch's 1.5.0");
  LegacyOptimizer& o = c.optimizer;
  o.groups = read_groups(t, t.module(t.get(d, "param_groups", "optimizer"), "optimizer.param_groups"));
  o.kind = optimizer_kind(t, o.groups);
  const auto names = name_params(t, o.groups, c);
  for (const auto& [key, id] : t.module(t.get(d, "state", "optimizer"), "optimizer.state").items) {
    const auto name = names.find(std::string(key));
    if (name == names.end()) fail(t.origin(), "the optimizer holds state for " + in_quotes(key) + ", a parameter of no group");
    LegacyParamState s = read_param_state(t, t.module(id, "optimizer.state." + name->second), "optimizer state of " + in_quotes(name->second));
    for (const torch::Tensor* m : {&s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq, &s.momentum_buffer})
      if (m->defined() && m->sizes() != c.weights.at(name->second).sizes())
        fail(t.origin(), "the optimizer state of " + in_quotes(name->second) + " has another shape than the weight");
    o.state[name->second] = std::move(s);
  }
}

void read_state(const Tree& t, const Dict& d, LegacyTrainState& s) {
  only(t, d, {"step", "epoch", "batch_in_epoch", "learning_rate", "best_metric", "has_best", "bad_validations", "plateau",
              "seed", "elapsed_seconds", "rng_state", "device_rng_state"}, "the training state");
  auto at = [&](const char* key) { return t.get(d, key, "the training state"); };
  auto path = [](const char* key) { return std::string("state.") + key; };
  const std::pair<const char*, int64_t*> ints[] = {{"step", &s.step}, {"epoch", &s.epoch},
                                                    {"batch_in_epoch", &s.batch_in_epoch},
                                                    {"bad_validations", &s.bad_validations},
                                                    {"plateau", &s.plateau}, {"seed", &s.seed}};
  for (const auto& [key, out] : ints) *out = t.integer(at(key), path(key));
  const std::pair<const char*, double*> reals[] = {
      {"learning_rate", &s.learning_rate}, {"best_metric", &s.best_metric}, {"elapsed_seconds", &s.elapsed_seconds}};
  for (const auto& [key, out] : reals) *out = t.real(at(key), path(key));
  s.has_best = t.boolean(at("has_best"), "state.has_best");
  if (const auto id = Tree::find(d, "rng_state")) s.rng_state = t.tensor(*id, "state.rng_state");
  if (const auto id = Tree::find(d, "device_rng_state")) s.device_rng_state = t.tensor(*id, "state.device_rng_state");
}

LegacyCheckpoint read_tree(const Tree& t, Id root) {
  const Dict& top = t.module(root, "the archive");
  only(t, top, {"config", "src_spm", "tgt_spm", "model", "optimizer", "state", "meta"}, "the archive");
  LegacyCheckpoint c;
  c.config = t.str(t.get(top, "config", "the archive"), "config");
  if (const auto id = Tree::find(top, "meta")) c.meta = t.str(*id, "meta");
  c.src_spm = t.str(t.get(top, "src_spm", "the archive"), "src_spm");
  c.tgt_spm = t.str(t.get(top, "tgt_spm", "the archive"), "tgt_spm");
  read_weights(t, t.module(t.get(top, "model", "the archive"), "model"), c);
  if (const auto id = Tree::find(top, "optimizer")) {
    c.has_optimizer = true;
    read_optimizer(t, t.module(*id, "optimizer"), c);
  }
  if (const auto id = Tree::find(top, "state")) {
    c.has_train_state = true;
    read_state(t, t.module(*id, "state"), c.state);
  }
  return c;
}

}  // namespace

std::string_view legacy_archive_bytes(std::string_view file, const std::string& origin) {
  if (file.size() < 12 || file.substr(0, 8) != std::string_view("NMTCKPT\n", 8))
    fail(origin, "not an nmt checkpoint (no NMTCKPT header)");
  const uint64_t version = le(file, 8, 4);
  if (version == 1) return file.substr(12);
  if (version != 2) fail(origin, "format version " + std::to_string(version) + " is neither 1 nor 2");
  if (file.size() < 24) fail(origin, "truncated (the header is cut short)");
  const uint64_t declared = le(file, 12, 8);
  const std::string_view body = file.substr(24);
  if (body.size() != declared)
    fail(origin, std::string(body.size() < declared ? "truncated" : "damaged") + " (" + std::to_string(body.size()) +
                     " bytes after the header, " + std::to_string(declared) + " declared)");
  if (crc32_of(body) != le(file, 20, 4)) fail(origin, "damaged (checksum mismatch)");
  return body;
}

LegacyCheckpoint read_legacy_checkpoint(std::string_view archive_bytes, const std::string& origin) {
  Zip zip(archive_bytes, origin);
  const std::string root = zip.root();
  const auto pickle = zip.stored(root + "/data.pkl");
  if (!pickle) fail(origin, "the archive holds no data.pkl");
  Unpickler machine(*pickle, zip, root, archive_bytes.size(), origin);
  try {
    return read_tree(Tree(machine, origin), machine.run());
  } catch (const c10::Error& e) {  // none expected: every size is checked first
    fail(origin, "LibTorch refused a tensor: " + printable(e.what_without_backtrace(), 200));
  }
}

}  // namespace nmt
