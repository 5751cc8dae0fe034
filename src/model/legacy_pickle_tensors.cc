// The storages and tensors of the legacy pickle machine (legacy_format.h):
// BINPERSID storages resolved to archive entries, REDUCE of the two callables
// nmt's files use, and _rebuild_tensor_v2 views checked against their storage
// and copied out within the machine's byte budget.
#include <algorithm>
#include <cstring>

#include "model/legacy_format.h"

namespace nmt::legacy {
namespace {

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

}  // namespace

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

}  // namespace nmt::legacy
