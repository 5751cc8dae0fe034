// See checkpoint_edit.h.
#include "checkpoint_edit.h"

#include "model/checkpoint.h"
#include "model/tensor_file.h"
#include "test_util.h"

namespace nmt::test {
namespace {

uint64_t le64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

constexpr size_t kFileHeader = 24;  // magic, version, body size, CRC-32

}  // namespace

std::string checkpoint_body(const std::string& path) { return read_bytes(path).substr(kFileHeader); }

CheckpointParts read_checkpoint_parts(const std::string& path) {
  const std::string body = checkpoint_body(path);
  const auto f = nmt::TensorFile::parse(body, path);
  CheckpointParts p;
  for (const auto& [name, e] : f.entries()) p.tensors[name] = e.to_tensor();
  p.metadata = f.all_metadata();
  return p;
}

void write_checkpoint_parts(const std::string& path, const CheckpointParts& parts) {
  nmt::TensorFileWriter w;
  for (const auto& [name, t] : parts.tensors) w.add(name, t);
  for (const auto& [key, value] : parts.metadata) w.set_metadata(key, value);
  write_sealed(path, w.bytes());
}

void write_sealed(const std::string& path, const std::string& body) {
  write_bytes(path, nmt::checkpoint_file_bytes(body, 3));
}

void write_old_body(const std::string& path, const std::string& archive) {
  write_bytes(path, nmt::checkpoint_file_bytes(archive, 2));
}

std::string json_header(const std::string& body) { return body.substr(8, le64(body, 0)); }

std::string with_json_header(const std::string& body, const std::string& json) {
  std::string out;
  put_le(out, json.size(), 8);
  return out + json + body.substr(8 + le64(body, 0));
}

}  // namespace nmt::test
