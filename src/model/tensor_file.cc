// The safetensors layout: writing, and reading with every size checked
// before anything is allocated.
#include "model/tensor_file.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace nmt {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tensor files are little-endian, as this CPU must be");

constexpr uint64_t kMaxDim = uint64_t{1} << 40;  // any one dimension

struct DtypeName {
  const char* name;
  torch::ScalarType dtype;
};
constexpr DtypeName kDtypes[] = {{"F32", torch::kFloat},    {"F64", torch::kDouble}, {"BF16", torch::kBFloat16},
                                 {"F16", torch::kHalf},     {"I64", torch::kLong},   {"U8", torch::kByte}};

const char* dtype_name(torch::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.dtype == t) return d.name;
  return nullptr;
}

[[noreturn]] void fail(const std::string& origin, const std::string& what) { throw Error(located(origin, 0, what)); }

std::string quoted(const std::string& name) {
  constexpr size_t kShown = 80;  // a hostile name can be long: quote its start
  return "'" + (name.size() <= kShown ? name : name.substr(0, kShown) + "...") + "'";
}

// The deepest nesting of arrays and objects in JSON text (strings skipped):
// nmt's headers nest 3 deep, and a parser must never meet a depth that
// could exhaust its stack.
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// A JSON value that must be an integer in [0, hi]; fails naming `what`.
uint64_t unsigned_at_most(const nlohmann::json& v, uint64_t hi, const std::string& origin, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail(origin, what + " is not a non-negative integer");
  const uint64_t x = v.get<uint64_t>();
  if (x > hi) fail(origin, what + " is " + std::to_string(x) + ", more than " + std::to_string(hi));
  return x;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The entry `name` -> `v` of a tensor header, over `data` (the bytes after
// the header): a dtype nmt reads, a shape within `limits` whose bytes fit
// the data, and offsets [*begin, *end) inside the data holding exactly
// those bytes. Throws nmt::Error naming `origin` and the tensor.
TensorEntry parse_entry(const std::string& name, const nlohmann::json& v, std::string_view data,
                        const std::string& origin, const TensorFileLimits& limits, uint64_t* begin_out,
                        uint64_t* end_out) {
  const std::string what = "tensor " + quoted(name);
  if (!v.is_object() || v.size() != 3 || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    fail(origin, what + ": not {dtype, shape, data_offsets}");
  TensorEntry e;
  e.name = name;
  const auto& dt = v["dtype"];
  const DtypeName* known = nullptr;
  if (dt.is_string())
    for (const auto& d : kDtypes)
      if (dt.get<std::string>() == d.name) known = &d;
  if (known == nullptr) fail(origin, what + ": dtype " + dt.dump().substr(0, 40) + " is not one nmt reads");
  e.dtype = known->dtype;
  const auto& shape = v["shape"];
  if (!shape.is_array() || shape.size() > limits.max_rank)
    fail(origin, what + ": shape is not an array of at most " + std::to_string(limits.max_rank) + " dimensions");
  const uint64_t elem = c10::elementSize(e.dtype);
  uint64_t numel = 1;
  for (const auto& d : shape) {
    const uint64_t x = unsigned_at_most(d, kMaxDim, origin, what + ": a dimension");
    // numel x elem never exceeds the data: checked before it could overflow.
    if (x != 0 && numel > data.size() / elem / x)
      fail(origin, what + ": shape " + shape.dump() + " needs more bytes than the file's " +
                       std::to_string(data.size()));
    numel *= x;
    e.shape.push_back(static_cast<int64_t>(x));
  }
  const auto& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2) fail(origin, what + ": data_offsets is not [begin, end]");
  const uint64_t begin = unsigned_at_most(off[0], data.size(), origin, what + ": its begin offset");
  const uint64_t end = unsigned_at_most(off[1], data.size(), origin, what + ": its end offset");
  if (end < begin || end - begin != numel * elem)
    fail(origin, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] do not hold " +
                     std::to_string(numel) + " elements of " + std::to_string(elem) + " bytes");
  e.bytes = data.substr(begin, end - begin);
*begin_out = begin;
  *end_out = end;
  return e;
}

}  // namespace

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

torch::Tensor TensorEntry::to_tensor() const {
  auto t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

void TensorEntry::copy_into(torch::Tensor& dst, const std::string& origin) const {
  if (dst.sizes() != torch::IntArrayRef(shape))
    fail(origin, "tensor " + quoted(name) + " has shape " + shape_text(shape) + " where " +
                     shape_text(dst.sizes().vec()) + " is needed");
  if (dst.scalar_type() == dtype && dst.is_contiguous() && dst.device().is_cpu()) {
    torch::NoGradGuard no_grad;
    if (!bytes.empty()) std::memcpy(dst.data_ptr(), bytes.data(), bytes.size());
    return;
  }
  torch::NoGradGuard no_grad;
  dst.copy_(to_tensor());
}

std::string TensorEntry::as_bytes(const std::string& origin) const {
  if (dtype != torch::kByte || shape.size() != 1)
    fail(origin, "entry " + quoted(name) + " is not a byte string (a U8 vector)");
  return std::string(bytes);
}

TensorFile TensorFile::parse(std::string_view bytes, const std::string& origin, const TensorFileLimits& limits) {
  if (bytes.size() < 8) fail(origin, "the tensor header is cut short (" + std::to_string(bytes.size()) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > limits.max_header_bytes)
    fail(origin, "the tensor header declares " + std::to_string(n) + " bytes, more than the " +
                     std::to_string(limits.max_header_bytes) + " nmt reads");
  if (n > bytes.size() - 8)
    fail(origin, "the tensor header declares " + std::to_string(n) + " bytes; the file has " +
                     std::to_string(bytes.size() - 8) + " after its length");
  const std::string_view text = bytes.substr(8, n);
  const std::string_view data = bytes.substr(8 + n);
  if (nesting_depth(text) > 3) fail(origin, "the tensor header nests deeper than the layout's 3 levels");
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) fail(origin, "the tensor header is not a JSON object");
  if (j.size() > limits.max_entries + 1)
    fail(origin, "the tensor header lists " + std::to_string(j.size()) + " entries, more than " +
                     std::to_string(limits.max_entries));
  TensorFile f;
  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, v] : j.items()) {
    if (name.empty() || name.size() > limits.max_name_bytes)
      fail(origin, "the tensor header holds a name of " + std::to_string(name.size()) + " bytes");
    if (name == "__metadata__") {
      if (!v.is_object()) fail(origin, "the tensor header's __metadata__ is not an object");
      for (const auto& [key, value] : v.items()) {
        if (key.size() > limits.max_name_bytes || !value.is_string())
          fail(origin, "metadata " + quoted(key) + " is not a string");
        f.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    uint64_t begin = 0, end = 0;
    TensorEntry e = parse_entry(name, v, data, origin, limits, &begin, &end);
    const std::string what = "tensor " + quoted(name);
    auto [it, fresh] = f.entries_.emplace(name, std::move(e));
    if (!fresh) fail(origin, what + " appears twice");
    ranges.push_back({begin, end, &it->first});
  }
  // The ranges tile the data: sorted by start, each begins where the last ended.
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t at = 0;
  for (const auto& r : ranges) {
    if (r.begin != at)
      fail(origin, "tensor " + quoted(*r.name) + " starts at byte " + std::to_string(r.begin) + " of the data, not " +
                       std::to_string(at) + (r.begin < at ? " (it overlaps another)" : " (a gap)"));
    at = r.end;
  }
  if (at != data.size())
    fail(origin, std::to_string(data.size() - at) + " bytes after the last tensor belong to none");
  return f;
}

const TensorEntry* TensorFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const std::string* TensorFile::metadata(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

void TensorFileWriter::add(const std::string& name, const torch::Tensor& t) {
  if (dtype_name(t.scalar_type()) == nullptr)
    throw Error("tensor '" + name + "': dtype " + std::string(c10::toString(t.scalar_type())) + " cannot be stored");
  if (!tensors_.emplace(name, t.detach().to(torch::kCPU).contiguous()).second)
    throw Error("tensor '" + name + "' added twice");
}

void TensorFileWriter::add_bytes(const std::string& name, const std::string& bytes) {
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  add(name, t);
}

std::string TensorFileWriter::bytes() const {
  std::vector<const std::pair<const std::string, torch::Tensor>*> order;
  for (const auto& kv : tensors_) order.push_back(&kv);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->second.element_size() > b->second.element_size();
  });
  nlohmann::json j = nlohmann::json::object();
  if (!metadata_.empty()) j["__metadata__"] = metadata_;
  uint64_t at = 0;
  for (const auto* kv : order) {
    const auto& t = kv->second;
    const uint64_t size = static_cast<uint64_t>(t.numel()) * t.element_size();
    j[kv->first] = {{"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {at, at + size}}};
    at += size;
  }
  std::string header = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + header.size() + at);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xFF));
  out += header;
  for (const auto* kv : order) {
    const auto& t = kv->second;
    if (t.numel() > 0) out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return out;
}

}  // namespace nmt
