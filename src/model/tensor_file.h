// Named tensors in the safetensors layout, the body of a checkpoint file:
//
//   uint64 N (little-endian) | N bytes of JSON | the tensors' bytes
//
// The JSON is an object: for each tensor its name -> {"dtype": "F32",
// "shape": [d0, d1], "data_offsets": [begin, end]} (a byte range of the
// data, which the tensors tile without gaps or overlaps), and "__metadata__"
// -> an object of strings. Nothing in such a file is code: reading one
// parses JSON of bounded size and depth and checks every range and shape
// against the bytes before any tensor is made, so its memory never exceeds
// the file's. (The same bytes read with Python's safetensors.)
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// One tensor of a TensorFile: a view of its bytes in the file.
struct TensorEntry {
  std::string name;
  torch::ScalarType dtype = torch::kFloat;  // F32, F64, BF16, F16, I64 or U8
  std::vector<int64_t> shape;
  std::string_view bytes;  // numel x element size bytes, little-endian

  int64_t numel() const;
  // The tensor, copied out (CPU, contiguous, owning its memory).
  torch::Tensor to_tensor() const;
  // Copies the values into `dst` (CPU, contiguous, as many elements),
  // converting the dtype where they differ; with equal dtypes the bytes go
  // straight into dst's storage. Throws nmt::Error (naming `origin`) when
  // the shapes differ.
  void copy_into(torch::Tensor& dst, const std::string& origin) const;
  // The bytes of a U8 vector as a string. Throws nmt::Error naming `origin`
  // and this entry for another dtype or rank.
  std::string as_bytes(const std::string& origin) const;
};

// Bounds on what TensorFile::parse() accepts; far above what nmt writes.
struct TensorFileLimits {
  uint64_t max_header_bytes = uint64_t{64} << 20;  // the JSON
  size_t max_entries = 100000;                      // tensors
  size_t max_rank = 8;                              // dimensions per tensor
  size_t max_name_bytes = 1024;                     // a tensor's name, a metadata key
};

// A parsed file: entries by name and the metadata. Views into the bytes
// given to parse(), which must outlive it.
class TensorFile {
 public:
  // Parses `bytes` (the whole body). Throws nmt::Error naming `origin` and
  // the entry for: a header longer than the bytes or the limits, JSON that
  // does not parse or nests deeper than the layout, an unknown dtype, a
  // negative or non-integer dimension, a byte range outside the data or not
  // numel x element size long, ranges that overlap or leave gaps, metadata
  // that is not strings, a name twice.
  static TensorFile parse(std::string_view bytes, const std::string& origin, const TensorFileLimits& limits = {});

  // The entry `name`, or null.
  const TensorEntry* find(const std::string& name) const;
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  // The metadata value of `key`, or null.
  const std::string* metadata(const std::string& key) const;
  const std::map<std::string, std::string>& all_metadata() const { return metadata_; }

 private:
  std::map<std::string, TensorEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Builds a file: tensors and byte strings by name, and metadata strings.
class TensorFileWriter {
 public:
  // Adds a tensor (copied to the CPU when it is not there; F32, F64, BF16,
  // F16, I64 or U8). Throws nmt::Error for another dtype or a name given twice.
  void add(const std::string& name, const torch::Tensor& t);
  // Adds a string's bytes as a U8 vector.
  void add_bytes(const std::string& name, const std::string& bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // The file's bytes. Wider elements come first, so every tensor starts at
  // a multiple of its element size.
  std::string bytes() const;

 private:
  std::map<std::string, torch::Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace nmt
