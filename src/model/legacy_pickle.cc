// The pickle machine of legacy checkpoints (legacy_format.h): the loop that
// runs data.pkl opcode by opcode, and the opcodes that make plain values,
// memo entries, tuples, dicts and module objects. Storages and tensors are
// made in legacy_pickle_tensors.cc.
//
// The pickle is what TorchScript's pickler (LibTorch 1.13) writes for a tree
// of torch::serialize::OutputArchive modules: protocol 2, each module an
// object of class __torch__[.___torch_mangle_N].Module built from a dict of
// its attributes, each tensor torch._utils._rebuild_tensor_v2 called on a
// storage (a BINPERSID reference to archive/data/<key>), an offset, sizes,
// strides, requires_grad and an empty collections.OrderedDict of hooks.
// Nothing here calls anything a name in the file designates: the three
// names are recognized and their effect is done by this code.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "model/legacy_format.h"

namespace nmt::legacy {
namespace {

// The storage types nmt's files hold: weights and optimizer moments (float),
// size counts (long), generator states (byte); nullopt for any other name.
std::optional<torch::ScalarType> storage_dtype(std::string_view name) {
  if (name == "FloatStorage") return torch::kFloat;
  if (name == "LongStorage") return torch::kLong;
  if (name == "ByteStorage") return torch::kByte;
  return std::nullopt;
}

// Whether GLOBAL `module`.`name` is a TorchScript module's class:
// __torch__.Module or __torch__.___torch_mangle_<N>.Module. Never fails.
bool is_module_class(std::string_view module, std::string_view name) {
  constexpr std::string_view kMangled = "__torch__.___torch_mangle_";
  if (name != "Module") return false;
  if (module == "__torch__") return true;
  if (module.substr(0, kMangled.size()) != kMangled || module.size() == kMangled.size() || module.size() > kMangled.size() + 9)
    return false;
  return std::all_of(module.begin() + kMangled.size(), module.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const char* kind_name(Kind k) {
  static const char* names[] = {"a boolean", "an integer", "a float", "a string", "a tuple", "a dict", "a module",
                                "a module class", "_rebuild_tensor_v2", "OrderedDict", "a storage type",
                                "a storage", "a tensor"};
  return names[static_cast<int>(k)];
}

// Runs the pickle to its STOP; returns the value it left. Throws
// nmt::Error for anything nmt's checkpoints never hold.
Id Unpickler::run() {
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
// Throws nmt::Error for any other name.
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

// BINPUT, LONG_BINPUT: the top value into memo entry `index`, the next one
// or one already set. Throws for any other index.
void Unpickler::op_memo_put(uint64_t index) {
  if (index > memo_.size() || index >= kMaxValues)
    bad("stores memo entry " + std::to_string(index) + " out of order (" + std::to_string(memo_.size()) + " so far)");
  if (index == memo_.size()) memo_.push_back(top());
  else memo_[index] = top();
}

// BINGET, LONG_BINGET: pushes memo entry `index`. Throws if it is not set.
void Unpickler::op_memo_get(uint64_t index) {
  if (index >= memo_.size())
    bad("reads memo entry " + std::to_string(index) + " of " + std::to_string(memo_.size()) + ": out of range");
  push(memo_[index]);
}

// MARK: opens a MARK at the stack's height. Throws past kMaxMarks open.
void Unpickler::op_mark() {
  if (marks_.size() >= kMaxMarks) bad("nests MARKs deeper than " + std::to_string(kMaxMarks));
  marks_.push_back(stack_.size());
}

// The tuples: pushes one of `items`; throws only as push_new().
void Unpickler::op_tuple(std::vector<Id> items) {
  Value v;
  v.kind = Kind::kTuple;
  v.items = std::move(items);
  push_new(std::move(v));
}

// The integers, floats and booleans: pushes one of `kind` holding `i` or
// `f`; throws only as push_new().
void Unpickler::op_scalar(Kind kind, int64_t i, double f) {
  Value v;
  v.kind = kind;
  v.i = i;
  v.f = f;
  push_new(std::move(v));
}

// BINUNICODE: pushes the next `n` bytes as a string. Throws if the pickle
// holds fewer.
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

}  // namespace nmt::legacy
